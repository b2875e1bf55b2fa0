//! Fuzz target `json`: the check lives in core/tests/fuzz_checks (shared with the stable
//! replay test core/tests/fuzz_replay.rs).
#![no_main]

#[path = "../../core/tests/fuzz_checks/mod.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::json(data));
