//! The official `everything` test server (`@modelcontextprotocol/server-everything`, on the
//! TypeScript SDK 1.32: old era only, stateful, SSE with event ids): the era probe finds it
//! old; its `trigger-elicitation-request` exists only for a client that declares elicitation
//! and requires a field that has no default; its `simulate-research-query` runs only as a
//! 2025-11-25 task (SEP-1686: `params.task`, `tasks/get`, `tasks/result`), over HTTP and over
//! stdio (`… stdio`: there the call lists the tools first to learn `execution.taskSupport`).

mod support;

use serde_json::json;
use support::{CHECK_BOUND, Peer, context, context_with, everything_main, mcp_json, run_bounded};
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
    assert!(r.ok(), "{r:?}");
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
/// (`initialize` offers 2025-11-25). At the first version (2024-11-05, `ProtocolVersion::SEED`, on request) there are no
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
    assert!(r.ok(), "{r:?}");
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
    assert!(!r.ok(), "{r:?}");
    assert!(r.error().unwrap_or("").contains("task"), "{r:?}");
}

/// The everything server over stdio: `npx @modelcontextprotocol/server-everything stdio`, run
/// from its installed package. Panics (the test fails) saying what to run when it is missing.
fn everything_stdio() -> String {
    if let Some(why) = support::everything_missing() {
        panic!("{why}: run scripts/peers.sh");
    }
    format!("node {} stdio", everything_main().display())
}

/// Over stdio no `tools/list` precedes a call unless the call makes one: in a 2025-11-25
/// session the call lists the tools first, learns `execution.taskSupport: "required"`, and
/// runs the tool as a task to its report (it failed "requires task augmentation" before).
#[test]
fn the_task_required_tool_runs_to_its_report_over_stdio() {
    let server = everything_stdio();
    let argv: Vec<&str> = server.split(' ').collect();
    let opts = Options::default().protocol_version(ProtocolVersion::V2025_11_25);
    let ctx = context_with(
        json!({ "slotFills": { "kali": { "command": argv } } }),
        "run-everything-stdio",
        opts,
    );
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("simulate-research-query", json!({"topic": "rust"})),
    );
    assert!(r.ok(), "{r:?}");
    assert!(r.text.contains("Research Report: rust"), "{}", r.text);
    assert_eq!(ctx.ledger().tool_calls, 1);
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "start and end: {tasks:?}");
    assert_eq!(tasks[1].value()["status"], "completed");
    run_bounded(CHECK_BOUND, ctx.close());
}

/// `mcp call … simulate-research-query topic=rust` runs to the report over HTTP and over stdio.
/// (With `--protocol-version 2025-11-25` until `initialize` offers it by default.)
#[test]
fn mcp_call_runs_the_task_required_tool_over_http_and_stdio() {
    let peer = Peer::start_everything();
    let url = format!("{}/mcp", peer.base_url());
    let server = everything_stdio();
    for place in [["", url.as_str()], ["--stdio", server.as_str()]] {
        let mut args = vec!["call"];
        args.extend(place.iter().filter(|a| !a.is_empty()));
        args.extend([
            "simulate-research-query",
            "topic=rust",
            "--protocol-version",
            "2025-11-25",
        ]);
        let (code, v) = mcp_json(&args);
        assert_eq!(code, Some(0), "{args:?}: {v}");
        assert_eq!(v["ok"], true, "{v}");
        assert!(
            v["text"]
                .as_str()
                .unwrap_or("")
                .contains("Research Report: rust"),
            "{v}"
        );
    }
}

/// `mcp tools --format json` keeps each tool's `execution`: the everything server's
/// `simulate-research-query` says `taskSupport: "required"`, `echo` says `"forbidden"`.
#[test]
fn mcp_tools_json_keeps_execution() {
    let peer = Peer::start_everything();
    let (code, v) = mcp_json(&["tools", peer.base_url(), "--format", "json"]);
    assert_eq!(code, Some(0), "{v}");
    let tools = v["tools"].as_array().cloned().unwrap_or_default();
    let of = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {v}"))
    };
    assert_eq!(
        of("simulate-research-query")["execution"]["taskSupport"],
        "required",
        "{v}"
    );
    assert_eq!(of("echo")["execution"]["taskSupport"], "forbidden", "{v}");
}

/// `--detach` on a task of a 2025-11-25 session is refused before the call is sent (exit 2, as
/// other usage refusals): the task would die with the session when mcp exits. The message says
/// why and what works. A tool that does not become a task is called as usual.
#[test]
fn detach_on_a_2025_11_25_session_task_is_refused_before_the_call() {
    let peer = Peer::start_everything();
    let url = format!("{}/mcp", peer.base_url());
    let o = support::run_mcp(
        &[
            "call",
            &url,
            "simulate-research-query",
            "topic=rust",
            "--detach",
            "-v",
            "--protocol-version",
            "2025-11-25",
        ],
        &[],
        CHECK_BOUND,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "no task id: {o:?}");
    let refusal = err
        .lines()
        .find(|l| l.starts_with("mcp: --detach"))
        .unwrap_or_else(|| panic!("no refusal: {err}"));
    for says in [
        "2025-11-25",
        "die with it",
        "`mcp task` needs a 2026-07-28 server",
        "task handle",
    ] {
        assert!(refusal.contains(says), "{says:?} in {refusal}");
    }
    // The trace shows the list, never the call.
    assert!(err.contains("\"tools/list\""), "{err}");
    assert!(!err.contains("\"tools/call\""), "{err}");

    let (code, v) = mcp_json(&[
        "call",
        &url,
        "echo",
        "message=hi",
        "--detach",
        "--protocol-version",
        "2025-11-25",
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["text"], "Echo: hi", "{v}");
}
