//! The tasks extension (2026-07-28 era) against a real server: FastMCP with `fastmcp-tasks`
//! (in memory), whose `scan` and `scan_fail` are task-required. A call stays transparent: the
//! client polls the task to its result and the tool runs once; a failing task gives the tool's
//! words; a deadline shorter than the task cancels it (the server sees the cancellation) and the
//! error names the task; with the extension off, the server's refusal says why.
//!
//! The task handle: a call detached as a task, its status, its result by `wait` (the tool ran
//! once, one tool call metered), re-attached by id from a new context (a harness restart),
//! cancelled; a dropped call that is a task is cancelled on its server. The command line:
//! `mcp call --detach`, `mcp task get|wait|cancel`, and its status line only on a terminal.

mod support;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    CHECK_BOUND, Peer, PeerKind, context, context_with, failure_events, json_of, mcp_bin,
    peer_unavailable, run_bounded, run_mcp,
};
use verifi_mcp_host::{EraSetting, HarnessContext, Options, TaskHandle, TaskStart};

/// What the tasks peer has seen (its `runs` tool).
async fn runs(peer: &Peer) -> Value {
    let ctx = context(peer.base_url(), "run-runs", Options::default());
    let r = ctx.mcp("kali").unwrap().call("runs", json!({})).await;
    assert!(r.ok(), "{r:?}");
    serde_json::from_str(&r.text).expect("runs JSON")
}

fn peer() -> Option<Peer> {
    if peer_unavailable(PeerKind::PyStateful) {
        return None;
    }
    Some(Peer::start_tasks())
}

/// Starts `scan` detached through the command line (`--detach --format text`) and returns
/// the task id it prints.
fn cli_detach_scan(url: &str, target: &str, seconds: f64) -> String {
    let args = format!(r#"{{"target":"{target}","seconds":{seconds}}}"#);
    let out = run_mcp(
        &["call", url, "scan", &args, "--detach", "--format", "text"],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
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
    assert!(r.ok(), "{r:?}");
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
    let out = support::mcp_command()
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
    assert!(!r.ok() && r.is_error(), "{r:?}");
    assert_eq!(r.text, "nmap: host down");
    assert_eq!(r.error(), Some("tool error: nmap: host down"));
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
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
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
    assert!(!r.ok(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(
        error.contains("-32021") && error.contains("task"),
        "{error}"
    );
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_started"], 0);
}

// ---- the task handle: detach, status, wait, cancel, re-attach ------------------------------

/// Starts `scan` of `target` for `seconds` as a detached call on `ctx`'s slot: its handle.
async fn detach_scan(ctx: &HarnessContext, target: &str, seconds: f64) -> TaskHandle {
    let kali = ctx.mcp("kali").unwrap();
    match kali
        .start_task("scan", json!({"target": target, "seconds": seconds}))
        .await
    {
        TaskStart::Task(t) => t,
        TaskStart::Done(r) => panic!("scan answered at once instead of as a task: {r:?}"),
    }
}

/// Waits (bounded) until the peer's `runs` counter `key` reaches `n`.
async fn runs_reach(peer: &Peer, key: &str, n: u64) -> bool {
    for _ in 0..100 {
        if runs(peer).await[key] == n {
            return true;
        }
        smol::Timer::after(Duration::from_millis(100)).await;
    }
    false
}

#[test]
fn detach_then_status_then_wait_gives_the_result_and_the_tool_ran_once() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-detach", Options::default());
    let messages = Mutex::new(Vec::<String>::new());
    let (task, status, r, after) = run_bounded(CHECK_BOUND, async {
        let task = detach_scan(&ctx, "10.0.0.8", 1.5).await;
        let status = task.status().await.expect("tasks/get");
        let r = task
            .wait_with_progress(|u| {
                assert_eq!(u.progress, "", "a task's status has no number");
                messages
                    .lock()
                    .unwrap()
                    .push(u.message.unwrap_or_default().to_owned());
            })
            .await;
        let after = task.status().await.expect("tasks/get after the end");
        (task, status, r, after)
    });
    assert!(!task.id().is_empty() && !task.on_fallback(), "{task:?}");
    assert_eq!(task.tool_name(), "scan");
    assert_eq!(status["taskId"], task.id(), "{status}");
    assert_eq!(status["status"], "working", "{status}");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "scanned 10.0.0.8 in 1.5s");
    assert_eq!(after["status"], "completed", "{after}");
    // The task's statusMessage reached the observer while it ran.
    let messages = messages.into_inner().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("scanning 10.0.0.8: step ")),
        "{messages:?}"
    );
    let seen = run_bounded(CHECK_BOUND, runs(&peer));
    assert_eq!(seen["scan_started"], 1, "{seen}");
    assert_eq!(seen["scan_finished"], 1, "{seen}");
    // Detach + wait is one tool call, its evidence the result's bytes.
    let ledger = ctx.ledger();
    assert_eq!(ledger.tool_calls, 1);
    assert_eq!(ledger.evidence_bytes, r.text.len() as u64);
    // The timeline: the task's start (at the detach) and its end (at the wait), naming it.
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert_eq!(tasks[0].value()["status"], "working");
    assert_eq!(tasks[1].value()["status"], "completed");
    assert_eq!(tasks[0].value()["task"], task.id());
    assert_eq!(tasks[1].value()["task"], task.id());
    assert!(failure_events(&ctx).iter().all(|e| e.kind != "tool_error"));
}

#[test]
fn a_task_is_re_attached_by_id_from_a_new_context() {
    let Some(peer) = peer() else { return };
    let id = {
        let first = context(peer.base_url(), "run-before-restart", Options::default());
        let task = run_bounded(CHECK_BOUND, detach_scan(&first, "10.0.0.9", 1.0));
        assert_eq!(first.ledger().tool_calls, 1);
        task.id().to_owned()
        // The first harness (its context, slot and connections) is gone here.
    };
    let ctx = context(peer.base_url(), "run-after-restart", Options::default());
    let task = ctx.mcp("kali").unwrap().task(&id).tool("scan");
    let r = run_bounded(CHECK_BOUND, task.wait());
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "scanned 10.0.0.9 in 1s");
    let seen = run_bounded(CHECK_BOUND, runs(&peer));
    assert_eq!(seen["scan_started"], 1, "{seen}");
    assert_eq!(seen["scan_finished"], 1, "{seen}");
    // Following the task is no second tool call; its result's bytes are metered here.
    let ledger = ctx.ledger();
    assert_eq!(ledger.tool_calls, 0);
    assert_eq!(ledger.evidence_bytes, r.text.len() as u64);
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].value()["status"], "completed");
    assert_eq!(tasks[0].value()["tool"], "scan");
    // An id the server does not know: its refusal, and no tools/call.
    let unknown = ctx.mcp("kali").unwrap().task("no-such-task");
    let status = run_bounded(CHECK_BOUND, unknown.status());
    let e = status.expect_err("an unknown task has no status");
    assert_eq!(e.code, Some(-32602), "{e}");
    let r = run_bounded(CHECK_BOUND, unknown.wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_started"], 1);
}

#[test]
fn cancel_of_a_running_task_ends_it_and_wait_says_cancelled() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-task-cancel", Options::default());
    let (task, status, r) = run_bounded(CHECK_BOUND, async {
        let task = detach_scan(&ctx, "10.0.0.10", 30.0).await;
        smol::Timer::after(Duration::from_millis(300)).await;
        task.cancel().await.expect("tasks/cancel");
        let status = task.status().await.expect("tasks/get");
        let r = task.wait().await;
        (task, status, r)
    });
    assert_eq!(status["status"], "cancelled", "{status}");
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(
        error.contains("cancelled") && error.contains(task.id()),
        "{error}"
    );
    assert!(
        run_bounded(CHECK_BOUND, runs_reach(&peer, "scan_cancelled", 1)),
        "the tool did not stop on the server"
    );
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_finished"], 0);
}

#[test]
fn a_dropped_call_that_is_a_task_is_cancelled_on_its_server() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-task-dropped", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    // The caller gives up on a transparent call after 1.5 s, while it polls its task.
    let ended = run_bounded(
        CHECK_BOUND,
        smol::future::or(
            async {
                Some(
                    kali.call("scan", json!({"target": "10.0.0.11", "seconds": 30}))
                        .await,
                )
            },
            async {
                smol::Timer::after(Duration::from_millis(1500)).await;
                None
            },
        ),
    );
    assert!(ended.is_none(), "the call ended by itself: {ended:?}");
    // The server sees tasks/cancel: the tool stops (a task whose caller merely went away runs
    // on: see a_task_is_re_attached_by_id_from_a_new_context).
    assert!(
        run_bounded(CHECK_BOUND, runs_reach(&peer, "scan_cancelled", 1)),
        "the dropped call's task was not cancelled on the server"
    );
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_started"], 1);
    // The dropped call is metered once and on the timeline as cancelled.
    assert_eq!(ctx.ledger().tool_calls, 1);
    let errors: Vec<_> = failure_events(&ctx)
        .into_iter()
        .filter(|e| e.kind == "tool_error")
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_finished"], 0);
    // The call said when it became a task, so the dropped call's task is on the timeline.
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].value()["status"], "working");
}

#[test]
fn a_secret_in_a_tasks_result_is_redacted_in_status_wait_and_the_command_line() {
    let Some(peer) = peer() else { return };
    let secret = "hunter2-task-secret";
    let opts = Options::default().secrets(Some(vec![secret.to_owned()]));
    let ctx = context(peer.base_url(), "run-task-secret", opts);
    let (status, r) = run_bounded(CHECK_BOUND, async {
        let task = detach_scan(&ctx, secret, 0.3).await;
        let r = task.wait().await;
        (task.status().await.expect("tasks/get"), r)
    });
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "scanned [REDACTED] in 0.3s");
    assert_eq!(ctx.ledger().evidence_bytes, r.text.len() as u64);
    let status = status.to_string();
    assert!(
        status.contains("completed") && status.contains("scanned [REDACTED] in 0.3s"),
        "{status}"
    );
    assert!(!status.contains(secret), "{status}");
    // The command line: a header value is a secret of every output.
    let url = peer.base_url();
    let header = format!("X-Scan-Key: {secret}");
    let args = format!(r#"{{"target":"{secret}","seconds":0.3}}"#);
    let out = run_mcp(
        &[
            "call", url, "scan", &args, "--detach", "--format", "text", "-H", &header,
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let wait = run_mcp(&["task", "wait", url, &id, "-H", &header], &[], CLI_BOUND);
    let get = run_mcp(
        &["task", "get", url, &id, "-H", &header, "-v"],
        &[],
        CLI_BOUND,
    );
    for out in [&wait, &get] {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(all.contains("scanned [REDACTED] in 0.3s"), "{all}");
        assert!(!all.contains(secret), "{all}");
    }
}

#[test]
fn a_task_id_over_the_cap_or_an_old_era_server_is_a_clear_error() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-task-long-id", Options::default());
    let long = "t".repeat(65);
    let r = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().task(&long).wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some("task id must be 1 to 64 bytes long, not 65")
    );
    // Nothing was sent for it, and it is no tool call.
    assert_eq!(ctx.ledger().tool_calls, 0);
    let out = run_mcp(&["task", "wait", peer.base_url(), &long], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        json_of(&out)["error"],
        "task id must be 1 to 64 bytes long, not 65"
    );
    // rmcp speaks the 2026 era but has no such task: it says so, naming the id.
    let rmcp = Peer::start(PeerKind::RmcpStateful);
    let ctx = context(rmcp.base_url(), "run-task-rmcp", Options::default());
    let r = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().task("abc").wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some("task abc is not found or expired on the server")
    );
    // Spoken to in the handshake era, a server has no tasks: following one says so.
    let legacy = Options::default().era(EraSetting::Legacy);
    let ctx = context(rmcp.base_url(), "run-task-old-era", legacy);
    let r = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().task("abc").wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(error.contains("2026-07-28"), "{error}");
    // And `start_task` of an ordinary tool there is its answer, at once.
    let started = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .start_task("echo", json!({"text": "now"})),
    );
    match started {
        TaskStart::Done(r) => assert!(r.ok() && r.text == "now", "{r:?}"),
        TaskStart::Task(t) => panic!("an old-era server made a task: {t:?}"),
    }
}

#[test]
fn dropping_wait_cancels_the_task_it_follows() {
    let Some(peer) = peer() else { return };
    let ctx = context(peer.base_url(), "run-wait-dropped", Options::default());
    let ended = run_bounded(CHECK_BOUND, async {
        let task = detach_scan(&ctx, "10.0.0.16", 30.0).await;
        smol::future::or(async { Some(task.wait().await) }, async {
            smol::Timer::after(Duration::from_millis(800)).await;
            None
        })
        .await
    });
    assert!(ended.is_none(), "wait ended by itself: {ended:?}");
    assert!(
        run_bounded(CHECK_BOUND, runs_reach(&peer, "scan_cancelled", 1)),
        "the task of a dropped wait was not cancelled on the server"
    );
    // One tool call (the detach); the dropped wait is no second one.
    assert_eq!(ctx.ledger().tool_calls, 1);
}

#[test]
fn a_task_on_the_fallback_is_followed_there_and_named_so() {
    let Some(peer) = peer() else { return };
    // The primary refuses connections: the call fails over before any task exists.
    let dead = "http://127.0.0.1:1";
    let manifest = json!({"slotFills": {"kali": {"endpoint": dead, "fallback": peer.base_url()}}});
    let ctx = context_with(manifest.clone(), "run-task-fallback", Options::default());
    let task = run_bounded(CHECK_BOUND, detach_scan(&ctx, "10.0.0.17", 0.5));
    assert!(task.on_fallback(), "{task:?}");
    let id = task.id().to_owned();
    // After a restart: named on the fallback, it is followed there (the primary is not asked).
    let again = context_with(manifest, "run-task-fallback-2", Options::default());
    let r = run_bounded(
        CHECK_BOUND,
        again
            .mcp("kali")
            .unwrap()
            .task(&id)
            .tool("scan")
            .fallback()
            .wait(),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "scanned 10.0.0.17 in 0.5s");
    assert_eq!(again.ledger().tool_calls, 0);
    // The command line prints the fallback as the task's endpoint.
    let out = run_mcp(
        &[
            "call",
            dead,
            "--fallback",
            peer.base_url(),
            "scan",
            r#"{"target":"10.0.0.18","seconds":0.2}"#,
            "--detach",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["endpoint"], peer.base_url(), "{out:?}");
    assert_eq!(run_bounded(CHECK_BOUND, runs(&peer))["scan_started"], 2);
}

// ---- the command line ------------------------------------------------------------------------

const CLI_BOUND: Duration = Duration::from_secs(60);

#[test]
fn mcp_call_detach_then_task_get_and_wait_print_the_result_without_a_status_line_off_a_terminal() {
    let Some(peer) = peer() else { return };
    let url = peer.base_url();
    let out = run_mcp(
        &[
            "call",
            url,
            "scan",
            r#"{"target":"10.0.0.12","seconds":2}"#,
            "--detach",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let started = json_of(&out);
    let id = started["taskId"].as_str().expect("taskId").to_owned();
    assert_eq!(started["tool"], "scan", "{started}");
    assert_eq!(started["endpoint"], url, "{started}");
    let out = run_mcp(&["task", "get", url, &id], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let status = json_of(&out);
    assert_eq!(status["taskId"], id.as_str(), "{status}");
    assert_eq!(status["status"], "working", "{status}");
    // `wait` runs over a second (when a terminal would show the line) with status messages.
    let out = run_mcp(
        &["task", "wait", url, &id, "--tool", "scan"],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let r = json_of(&out);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["text"], "scanned 10.0.0.12 in 2s", "{r}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b') && !stderr.contains("scanning"),
        "a status line went to a stderr that is not a terminal: {stderr:?}"
    );
    let seen = run_bounded(CHECK_BOUND, runs(&peer));
    assert_eq!(seen["scan_started"], 1, "{seen}");
    assert_eq!(seen["scan_finished"], 1, "{seen}");
    // --format text: the id alone; a tool that answers at once: its result as `mcp call`.
    let out = run_mcp(
        &[
            "call",
            url,
            "scan",
            r#"{"target":"10.0.0.13","seconds":0.1}"#,
            "--detach",
            "--format",
            "text",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.trim().is_empty() && !text.trim().contains(char::is_whitespace),
        "{text:?}"
    );
    let out = run_mcp(
        &["call", url, "echo", "text=at once", "--detach"],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["text"], "at once");
    // A task the server does not know: its refusal on stderr, exit 1.
    let out = run_mcp(&["task", "get", url, "no-such-task"], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-32602"), "{stderr}");
    // Every task command's help has examples.
    for sub in [
        &["task", "--help"][..],
        &["task", "wait", "--help"],
        &["task", "get", "--help"],
    ] {
        let out = run_mcp(sub, &[], CLI_BOUND);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("Examples:") && help.contains("mcp task wait"),
            "{help}"
        );
    }
    // Usage errors: no id, two ids.
    let out = run_mcp(&["task", "wait", url], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = run_mcp(&["task", "get", url, "a", "b"], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn mcp_task_cancel_ends_a_running_task() {
    let Some(peer) = peer() else { return };
    let url = peer.base_url();
    let id = cli_detach_scan(url, "10.0.0.14", 30.0);
    let out = run_mcp(&["task", "cancel", url, &id], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // FastMCP answers tasks/cancel with an empty result.
    assert!(json_of(&out).is_object(), "{out:?}");
    let out = run_mcp(&["task", "get", url, &id], &[], CLI_BOUND);
    assert_eq!(json_of(&out)["status"], "cancelled", "{out:?}");
    assert!(
        run_bounded(CHECK_BOUND, runs_reach(&peer, "scan_cancelled", 1)),
        "the tool did not stop on the server"
    );
    let out = run_mcp(
        &["task", "wait", url, &id, "--tool", "scan"],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r = json_of(&out);
    assert_eq!(r["ok"], false, "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("cancelled") && error.contains(&id), "{r}");
}

#[test]
fn on_a_terminal_mcp_task_wait_shows_a_status_line_and_clears_it_before_the_result() {
    let Some(peer) = peer() else { return };
    let url = peer.base_url();
    let id = cli_detach_scan(url, "10.0.0.15", 2.5);
    let tty = on_a_terminal(&format!("task wait {url} {id} --tool scan --format text"));
    let label = format!("\r\x1b[Ktask {id} ");
    let first = tty
        .find(&label)
        .unwrap_or_else(|| panic!("no status line: {tty:?}"));
    let status = &tty[first..];
    assert!(status.contains(" 1 s scanning 10.0.0.15: step "), "{tty:?}");
    let cleared = tty.rfind("\r\x1b[K").expect("cleared");
    let result = tty
        .find("scanned 10.0.0.15 in 2.5s")
        .unwrap_or_else(|| panic!("no result: {tty:?}"));
    assert!(
        first < cleared && cleared < result && !tty[cleared..result].contains("scanning"),
        "the status line was not cleared before the result: {tty:?}"
    );
}

#[test]
fn mcp_task_wait_past_its_timeout_cancels_the_task_and_names_it() {
    let Some(peer) = peer() else { return };
    let url = peer.base_url();
    let id = cli_detach_scan(url, "10.0.0.19", 30.0);
    let t0 = std::time::Instant::now();
    let out = run_mcp(
        &[
            "task",
            "wait",
            url,
            &id,
            "--tool",
            "scan",
            "--timeout-ms",
            "800",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let r = json_of(&out);
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("timed out") && error.contains(&id), "{r}");
    assert!(
        run_bounded(CHECK_BOUND, runs_reach(&peer, "scan_cancelled", 1)),
        "the task was not cancelled at the deadline"
    );
}

/// `mcp ARGS` on a pseudo-terminal (util-linux `script`: stdout and stderr both a terminal):
/// what it wrote there.
fn on_a_terminal(args: &str) -> String {
    let line = format!("{} {args}", mcp_bin().display());
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("NO_COLOR", "1")
        .env("MCP_TOKEN_STORE", "memory")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("`script` (util-linux) is needed for this test: {e}"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn on_a_terminal_mcp_call_shows_a_bar_when_progress_has_a_total() {
    if peer_unavailable(PeerKind::PyStateful) {
        return;
    }
    // The Python SDK peer's `slow` sends a progress notification with a total per step.
    let peer = Peer::start(PeerKind::PyStateful);
    let tty = on_a_terminal(&format!(
        "call {} slow ms:=2500 steps:=10 --format text",
        peer.base_url()
    ));
    let first = tty
        .find("\r\x1b[Kslow 1 s [")
        .unwrap_or_else(|| panic!("no status line with a bar: {tty:?}"));
    assert!(tty[first..].contains("#-"), "a bar part filled: {tty:?}");
    assert!(tty[first..].contains("/10"), "the total: {tty:?}");
    let cleared = tty.rfind("\r\x1b[K").expect("cleared");
    assert!(
        first < cleared && !tty[cleared + 4..].contains(" s ["),
        "the status line was not cleared before the result: {tty:?}"
    );
}
