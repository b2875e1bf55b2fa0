//! Interop through the `mcp` command line (the `verifi-mcp-examples` crate's binary), a subset
//! of the adapter list against every server mode: `tools`, `call` (answered, `isError`, mixed
//! content, an unknown tool) and `exec` (the tool's exit code as the process's).
//!
//! The binary is another crate's, so it is found next to this test's executable (target/debug);
//! `cargo test --workspace` builds it. If it is missing the test fails and says what to build.

mod support;

use std::process::Output;
use std::time::Duration;

use support::{Peer, PeerKind, Sdk, json_of, peer_unavailable};

/// The most one `mcp` invocation may take.
const RUN_BOUND: Duration = Duration::from_secs(30);

/// Runs `mcp ARGS…`, bounded.
fn mcp(args: &[&str]) -> Output {
    support::run_mcp(args, &[], RUN_BOUND)
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
    let mut want = vec![
        "big",
        "echo",
        "fail",
        "mixed",
        "ports",
        "run_command",
        "slow",
    ];
    if kind.sdk() != Sdk::Rmcp {
        want.push("peer_stats");
    }
    if kind.sdk() == Sdk::Py {
        want.extend(["regional", "confirm_scan"]);
    }
    if kind.sdk() == Sdk::Ts {
        // The GET stream's server requests (issue 27) and server log messages (issue 28).
        want.extend(["ask_aside", "logs"]);
    }
    want.sort();
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

    // call, unknown tool: rmcp refuses with JSON-RPC, TS and Python answer isError; either
    // way it is bad input (exit 2) naming the tools there are, with nothing on stdout.
    let out = mcp(&["call", url, "no_such_tool"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tool \"no_such_tool\" is not on this server; it has: ")
            && err.contains("echo"),
        "{out:?}"
    );

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
