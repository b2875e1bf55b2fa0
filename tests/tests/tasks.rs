//! The tasks extension (2026-07-28 era) against a real server: FastMCP with `fastmcp-tasks`
//! (in memory), whose `scan` and `scan_fail` are task-required. A call stays transparent: the
//! client polls the task to its result and the tool runs once; a failing task gives the tool's
//! words; a deadline shorter than the task cancels it (the server sees the cancellation) and the
//! error names the task; with the extension off, the server's refusal says why.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::{CHECK_BOUND, Peer, PeerKind, context, mcp_bin, peer_unavailable, run_bounded};
use verifi_mcp_host::Options;

/// What the tasks peer has seen (its `runs` tool).
async fn runs(peer: &Peer) -> Value {
    let ctx = context(peer.base_url(), "run-runs", Options::default());
    let r = ctx.mcp("kali").unwrap().call("runs", json!({})).await;
    assert!(r.ok, "{r:?}");
    serde_json::from_str(&r.text).expect("runs JSON")
}

fn peer() -> Option<Peer> {
    if peer_unavailable(PeerKind::PyStateful) {
        return None;
    }
    Some(Peer::start_tasks())
}

#[test]
fn a_task_required_tool_returns_its_result_and_runs_once() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-task", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("scan", json!({"target": "10.0.0.5", "seconds": 1})),
    );
    assert!(r.ok, "{r:?}");
    assert_eq!(r.text, "scanned 10.0.0.5 in 1s");
    let seen = run_bounded(CHECK_BOUND, runs(&peer));
    assert_eq!(seen["scan_started"], 1, "{seen}");
    assert_eq!(seen["scan_finished"], 1, "{seen}");
    // On the timeline: the task's start and its end, naming it.
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert_eq!(tasks[0].value()["status"], "working");
    assert_eq!(tasks[1].value()["status"], "completed");
    assert_eq!(tasks[0].value()["task"], tasks[1].value()["task"]);
    // One ledger record for the call (not one per poll), its evidence the result's bytes.
    let ledger = ctx.ledger();
    assert_eq!(ledger.tool_calls, 1);
    assert_eq!(ledger.evidence_bytes, r.text.len() as u64);
    // The command line is transparent too.
    let out = Command::new(mcp_bin())
        .args([
            "call",
            peer.base_url(),
            "scan",
            r#"{"target":"10.0.0.6","seconds":0.3}"#,
        ])
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["text"], "scanned 10.0.0.6 in 0.3s");
}

#[test]
fn a_failing_task_gives_the_tools_own_words() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-task-fail", Options::default());
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali").unwrap().call("scan_fail", json!({})),
    );
    assert!(!r.ok && r.is_error, "{r:?}");
    assert_eq!(r.text, "nmap: host down");
    assert_eq!(r.error.as_deref(), Some("tool error: nmap: host down"));
}

#[test]
fn a_deadline_shorter_than_the_task_cancels_it_and_names_it() {
    let Some(peer) = peer() else { return };
    let ctx = context(
        peer.base_url(),
        "run-task-deadline",
        Options::default().timeout_ms(800),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("scan", json!({"target": "10.0.0.7", "seconds": 5})),
    );
    assert!(!r.ok && !r.is_error, "{r:?}");
    let error = r.error.clone().unwrap_or_default();
    assert!(
        error.starts_with("tool call timed out (task ") && error.ends_with(" was cancelled)"),
        "{error}"
    );
    assert!(
        r.latency_ms < 2_500,
        "ended {} ms after the start",
        r.latency_ms
    );
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert_eq!(tasks[1].value()["status"], "timedOut");
    let id = tasks[1].value()["task"].as_str().unwrap_or("?").to_owned();
    assert!(error.contains(&id), "{error} names {id}");
    // The server saw the cancel: the tool stopped, it did not run on.
    let stopped = run_bounded(CHECK_BOUND, async {
        for _ in 0..50 {
            if runs(&peer).await["scan_cancelled"] == 1 {
                return true;
            }
            smol::Timer::after(Duration::from_millis(100)).await;
        }
        false
    });
    assert!(stopped, "the task was not cancelled on the server");
}

#[test]
fn with_tasks_off_a_task_required_tool_is_refused_with_the_servers_reason() {
    let Some(peer) = peer() else { return };
    let ctx = context(
        peer.base_url(),
        "run-task-off",
        Options::default().tasks(false),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("scan", json!({"target": "x", "seconds": 0.1})),
    );
    assert!(!r.ok, "{r:?}");
    let error = r.error.clone().unwrap_or_default();
    assert!(
        error.contains("-32021") && error.contains("task"),
        "{error}"
    );
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_started"], 0);
}
