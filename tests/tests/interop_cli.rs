//! Interop through the `mcp` command line (the `verifi-mcp-examples` crate's binary), a subset
//! of the adapter list against every server mode: `tools`, `call` (answered, `isError`, mixed
//! content, an unknown tool) and `exec` (the tool's exit code as the process's).
//!
//! The binary is another crate's, so it is found next to this test's executable (target/debug);
//! `cargo test --workspace` builds it. If it is missing the test fails and says what to build.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Peer, PeerKind, Sdk, peer_unavailable};

/// The most one `mcp` invocation may take.
const RUN_BOUND: Duration = Duration::from_secs(30);

fn mcp_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/interop_cli-HASH → target/<profile>/mcp
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf();
    let bin = dir.join("mcp");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p verifi-mcp-examples --bin mcp` \
         (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

/// Runs `mcp ARGS…` with a bound; the child is killed if it overruns.
fn mcp(args: &[&str]) -> Output {
    let mut child = Command::new(mcp_bin())
        .args(args)
        .env_remove("VERIFI_ALLOW_NO_PEERS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mcp");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait mcp").is_some() {
            return child.wait_with_output().expect("mcp output");
        }
        if t0.elapsed() > RUN_BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().expect("mcp output");
            panic!(
                "mcp {args:?} did not finish within {RUN_BOUND:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON result ({e}): {:?}, stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn run(kind: PeerKind) {
    if peer_unavailable(kind) {
        return;
    }
    let peer = Peer::start(kind);
    let url = peer.base_url();

    // tools: one name a line, exit 0.
    let out = mcp(&["tools", url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    names.sort();
    let mut want = vec!["big", "echo", "fail", "mixed", "run_command", "slow"];
    if kind.sdk() != Sdk::Rmcp {
        want.push("peer_stats");
        want.sort();
    }
    assert_eq!(names, want);

    // call, answered.
    let out = mcp(&["call", url, "echo", r#"{"text":"héllo"}"#]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(v["text"], "héllo");
    assert_eq!(v["isError"], false);

    // call, isError: exit 1, the tool's text kept, the event on stderr.
    let out = mcp(&["call", url, "fail"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["isError"], true);
    assert_eq!(v["text"], "fail: this tool always fails");
    // The error carries the tool's own words (its first line), not a generic sentence.
    assert_eq!(v["error"], "tool error: fail: this tool always fails");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("event: tool_error"),
        "{out:?}"
    );

    // call, mixed content flattened exactly as through the adapter.
    let out = mcp(&["call", url, "mixed"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let image = match kind.sdk() {
        Sdk::Py => r#"{"data":"iVBORw0KGgo=","mimeType":"image/png","type":"image"}"#,
        _ => r#"{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}"#,
    };
    assert_eq!(json_of(&out)["text"], format!("mixed: text part\n{image}"));

    // call, unknown tool: rmcp refuses with JSON-RPC, TS and Python answer isError.
    let out = mcp(&["call", url, "no_such_tool"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["isError"], kind.sdk() != Sdk::Rmcp);

    // exec: the tool's exit code is the process's; the output unwrapped.
    let out = mcp(&["exec", url, "id; exit 3", "--workspace", "run-cli-7"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "workspace=run-cli-7 timeout=285\nran: id; exit 3"
    );
    let out = mcp(&[
        "exec",
        url,
        "true",
        "--workspace",
        "run-cli-7",
        "--timeout-ms",
        "5000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "workspace=run-cli-7 timeout=5\nran: true"
    );
}

#[test]
fn cli_ts_stateful() {
    run(PeerKind::TsStateful);
}
#[test]
fn cli_ts_json() {
    run(PeerKind::TsJson);
}
#[test]
fn cli_py_stateful() {
    run(PeerKind::PyStateful);
}
#[test]
fn cli_py_stateless() {
    run(PeerKind::PyStateless);
}
#[test]
fn cli_py_json() {
    run(PeerKind::PyJson);
}
#[test]
fn cli_py_stateless_json() {
    run(PeerKind::PyStatelessJson);
}
#[test]
fn cli_rmcp_stateful() {
    run(PeerKind::RmcpStateful);
}
#[test]
fn cli_rmcp_stateless() {
    run(PeerKind::RmcpStateless);
}
#[test]
fn cli_rmcp_json() {
    run(PeerKind::RmcpJson);
}
