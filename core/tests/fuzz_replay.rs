//! Replays every corpus file of `fuzz/corpus/<target>/` through the same checks the cargo-fuzz
//! targets run (`fuzz_checks`), on stable: a crash once found and kept stays fixed.
//!
//! A missing or empty corpus folder FAILS the test (it does not skip): the corpus is part of
//! the repository.
// The `exchange` check runs the driver: the replay needs `drive` (the core's default).
#![cfg(feature = "drive")]

#[path = "fuzz_checks/mod.rs"]
mod fuzz_checks;

use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

fn replay(target: &str) {
    let (_, check) = fuzz_checks::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no check named {target}"));
    let dir = corpus_root().join(target);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus folder {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "corpus folder {} is empty",
        dir.display()
    );
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if let Err(p) = std::panic::catch_unwind(|| check(&data)) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{target}: {} fails: {msg}", f.display());
        }
    }
}

#[test]
fn every_target_has_a_corpus() {
    for (name, _) in fuzz_checks::TARGETS {
        let dir = corpus_root().join(name);
        assert!(dir.is_dir(), "corpus folder {} is missing", dir.display());
    }
}

#[test]
fn http_response() {
    replay("http_response");
}
#[test]
fn sse() {
    replay("sse");
}
#[test]
fn json() {
    replay("json");
}
#[test]
fn exchange() {
    replay("exchange");
}
#[test]
fn redactor() {
    replay("redactor");
}
#[test]
fn run_command() {
    replay("run_command");
}
#[test]
fn endpoint() {
    replay("endpoint");
}
#[test]
fn manifest() {
    replay("manifest");
}
#[test]
fn machine() {
    replay("machine");
}
