//! The official `everything` test server (`@modelcontextprotocol/server-everything`, on the
//! TypeScript SDK 1.32: old era only, stateful, SSE with event ids): the era probe finds it
//! old; its `trigger-elicitation-request` exists only for a client that declares elicitation
//! and requires a field that has no default; its `simulate-research-query` runs only as a
//! 2025-11-25 task (SEP-1686: `params.task`, `tasks/get`, `tasks/result`).

mod support;

use serde_json::json;
use support::{CHECK_BOUND, Peer, context, mcp_json, run_bounded};
use verifi_mcp_host::{Options, ProtocolVersion};

#[test]
fn the_everything_server_is_old_era_and_its_elicitation_is_declined() {
    let peer = Peer::start_everything();
    let url = peer.base_url().to_owned();
    // Without a handler the client declares none, so the server does not offer the tool.
    let ctx = context(&url, "run-everything", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let tools = run_bounded(CHECK_BOUND, kali.list_tools()).expect("tools/list");
    assert!(tools.iter().any(|t| t == "echo"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t == "trigger-elicitation-request"),
        "{tools:?}"
    );
    let r = run_bounded(CHECK_BOUND, kali.call("echo", json!({"message": "hi"})));
    assert!(r.ok, "{r:?}");
    assert_eq!(r.text, "Echo: hi");
    let eras = ctx.events_of("mcp.era");
    assert_eq!(eras.len(), 1);
    assert_eq!(eras[0].value()["era"], "legacy");

    // `--elicitation decline`: declared, offered, answered on the call's stream.
    let (code, v) = mcp_json(&[
        "call",
        &url,
        "trigger-elicitation-request",
        "--elicitation",
        "decline",
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["text"].as_str().unwrap_or("").contains("declined"), "{v}");
    // accept-defaults cannot fill its required `name` (no default): declined, not invented.
    let (code, v) = mcp_json(&[
        "call",
        &url,
        "trigger-elicitation-request",
        "--elicitation",
        "accept-defaults",
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["text"].as_str().unwrap_or("").contains("declined"), "{v}");
}

/// A task-required tool in a 2025-11-25 session: called as a task, polled, its result fetched;
/// the tool ran once and its report is the call's text. This is the default since issue 27
/// (`initialize` offers 2025-11-25). At the seed's version (2024-11-05, on request) there are no
/// tasks, and the server's refusal says so.
#[test]
fn the_everything_servers_task_required_tool_runs_as_a_2025_11_25_task() {
    let peer = Peer::start_everything();
    let ctx = context(peer.base_url(), "run-everything-task", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("simulate-research-query", json!({"topic": "rust"})),
    );
    assert!(r.ok, "{r:?}");
    assert!(r.text.contains("Research Report: rust"), "{}", r.text);
    assert_eq!(ctx.ledger().tool_calls, 1);
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "start and end");
    assert_eq!(tasks[1].value()["status"], "completed");

    let opts = Options::default().protocol_version(ProtocolVersion::SEED);
    let ctx = context(peer.base_url(), "run-everything-2024", opts);
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("simulate-research-query", json!({"topic": "rust"})),
    );
    assert!(!r.ok, "{r:?}");
    assert!(r.error.as_deref().unwrap_or("").contains("task"), "{r:?}");
}
