//! The tasks extension (2026-07-28 era, SEP-2663) against rmcp's own server-side runtime: the
//! rmcp test server with [`ServerOptions::tasks`], whose `long_scan` and `confirm_task` run as
//! tasks through rmcp's `TaskManager`, over TCP on 127.0.0.1, in each of its three modes.
//!
//! A call stays transparent (the tool ran once, its result arrives); a deadline shorter than the
//! task sends one `tasks/cancel` that the server sees, and the error names the task; an
//! `input_required` task is answered by the slot's elicitation policy with one `tasks/update`,
//! and without a policy it is cancelled and the error says what was asked; the same from
//! `mcp call --elicitation accept-defaults`. What the server saw is read from its [`Stats`].

mod support;

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use support::{CHECK_BOUND, context, json_of, run_bounded, run_mcp};
use verifi_mcp_host::{Elicitation, Options, TaskStart};
use verifi_mcp_tests::servers::{
    confirm_task_question, confirm_task_text, long_scan_status, long_scan_text,
};
use verifi_mcp_tests::{Mode, SeenRequest, ServerOptions, Stats, TestServer};

/// The rmcp test server in `mode`, offering the tasks extension.
fn task_server(mode: Mode) -> TestServer {
    TestServer::start_with(ServerOptions::new(mode).with_tasks()).expect("rmcp task server")
}

/// Waits (bounded) until `pred` holds on the server's stats.
fn server_sees(stats: &Stats, pred: impl Fn(&Stats) -> bool) -> bool {
    stats.wait_until(Duration::from_secs(10), pred)
}

/// What `confirm_task` gets from the accept-defaults policy: each field's default.
fn accepted_defaults() -> Value {
    json!({"action": "accept", "content": {"port": 443, "confirm": true}})
}

const CLI_BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_task_tool_called_transparently_returns_its_result_and_ran_once() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let ctx = context(&server.base_url(), "run-rmcp-task", Options::default());
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(
            CHECK_BOUND,
            kali.call("long_scan", json!({"target": "10.1.0.1", "seconds": 0.6})),
        );
        assert!(r.ok(), "{mode:?}: {r:?}");
        assert_eq!(r.text, long_scan_text("10.1.0.1", 0.6), "{mode:?}");
        let stats = server.stats();
        assert_eq!(stats.calls_of("long_scan"), 1, "{mode:?}: one tools/call");
        assert_eq!(stats.tasks_created(), 1, "{mode:?}: it became a task");
        assert_eq!(stats.scans_started(), 1, "{mode:?}: the tool ran once");
        assert_eq!(stats.scans_finished(), 1, "{mode:?}");
        assert!(stats.task_gets() >= 1, "{mode:?}: it was polled");
        // rmcp asks for a poll every 100 ms: a 0.6 s task is not polled much faster than that
        // (a ramp from the client's floor up to the interval is fine).
        assert!(
            stats.task_gets() <= 20,
            "{mode:?}: {} polls",
            stats.task_gets()
        );
        assert_eq!(stats.task_cancels(), 0, "{mode:?}");
        // The timeline: the task's start and its end, naming the same task.
        let tasks = ctx.events_of("mcp.task");
        assert_eq!(tasks.len(), 2, "{mode:?}: {tasks:?}");
        assert_eq!(tasks[0].value()["status"], "working", "{mode:?}");
        assert_eq!(tasks[1].value()["status"], "completed", "{mode:?}");
        assert_eq!(
            tasks[0].value()["task"],
            tasks[1].value()["task"],
            "{mode:?}"
        );
        // One ledger record for the call, not one per poll.
        let ledger = ctx.ledger();
        assert_eq!(ledger.tool_calls, 1, "{mode:?}");
        assert_eq!(ledger.evidence_bytes, r.text.len() as u64, "{mode:?}");
    }
}

#[test]
fn a_detached_task_tells_rmcps_status_messages_and_waits_to_its_result() {
    let server = task_server(Mode::Stateless);
    let ctx = context(&server.base_url(), "run-rmcp-detach", Options::default());
    let messages = Mutex::new(Vec::<String>::new());
    let (id, status, r) = run_bounded(CHECK_BOUND, async {
        let kali = ctx.mcp("kali").unwrap();
        let task = match kali
            .start_task("long_scan", json!({"target": "10.1.0.2", "seconds": 1.2}))
            .await
        {
            TaskStart::Task(t) => t,
            TaskStart::Done(r) => panic!("long_scan answered at once: {r:?}"),
        };
        let status = task.status().await.expect("tasks/get");
        let r = task
            .wait_with_progress(|u| {
                messages
                    .lock()
                    .unwrap()
                    .push(u.message.unwrap_or_default().to_owned());
            })
            .await;
        (task.id().to_owned(), status, r)
    });
    // rmcp's task, as it is on the wire: its id, `working`, the server's poll interval.
    assert_eq!(status["taskId"], id.as_str(), "{status}");
    assert_eq!(status["status"], "working", "{status}");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, long_scan_text("10.1.0.2", 1.2));
    let messages = messages.into_inner().unwrap();
    let steps: Vec<_> = (1..=6)
        .map(|i| long_scan_status("10.1.0.2", i, 6))
        .collect();
    assert!(
        messages.iter().any(|m| steps.contains(m)),
        "no status message of rmcp's task reached the observer: {messages:?}"
    );
    assert_eq!(server.stats().scans_started(), 1);
    assert_eq!(ctx.ledger().tool_calls, 1);
}

#[test]
fn a_deadline_shorter_than_the_task_cancels_it_on_the_server_and_names_it() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let ctx = context(
            &server.base_url(),
            "run-rmcp-deadline",
            Options::default().timeout_ms(800),
        );
        let r = run_bounded(
            CHECK_BOUND,
            ctx.mcp("kali")
                .unwrap()
                .call("long_scan", json!({"target": "10.1.0.3", "seconds": 20})),
        );
        assert!(!r.ok() && !r.is_error(), "{mode:?}: {r:?}");
        let error = r.error().map(str::to_owned).unwrap_or_default();
        assert!(error.contains("timed out"), "{mode:?}: {error}");
        assert!(
            r.latency_ms < 2_500,
            "{mode:?}: ended {} ms after the start",
            r.latency_ms
        );
        let tasks = ctx.events_of("mcp.task");
        assert_eq!(tasks.len(), 2, "{mode:?}: {tasks:?}");
        assert_eq!(tasks[1].value()["status"], "timedOut", "{mode:?}");
        let id = tasks[1].value()["task"].as_str().unwrap_or("?").to_owned();
        assert!(error.contains(&id), "{mode:?}: {error} names {id}");
        // The server saw exactly one tasks/cancel, for that task, and the tool stopped.
        let stats = server.stats();
        assert!(
            server_sees(stats, |s| s.scans_cancelled() == 1),
            "{mode:?}: the scan did not stop on the server"
        );
        assert_eq!(stats.task_cancels(), 1, "{mode:?}");
        assert_eq!(stats.cancelled_task_ids(), vec![id.clone()], "{mode:?}");
        // The cancel is the call's last request: no poll after it.
        let sent = requests_of_the_call(stats);
        assert_eq!(
            sent.last().map(|r| r.method.as_str()),
            Some("tasks/cancel"),
            "{mode:?}: {sent:?}"
        );
        assert_eq!(stats.scans_finished(), 0, "{mode:?}");
        assert_eq!(stats.scans_started(), 1, "{mode:?}");
        // rmcp keeps the cancelled task: asked again, it says `cancelled`.
        let status = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().task(&id).status())
            .expect("tasks/get of the cancelled task");
        assert_eq!(status["status"], "cancelled", "{mode:?}: {status}");
    }
}

#[test]
fn confirm_task_gets_the_schemas_defaults_through_one_tasks_update() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let opts = Options::default().elicitation(Some(Elicitation::AcceptDefaults));
        let ctx = context(&server.base_url(), "run-rmcp-confirm", opts);
        let r = run_bounded(
            CHECK_BOUND,
            ctx.mcp("kali")
                .unwrap()
                .call("confirm_task", json!({"target": "10.1.0.4"})),
        );
        assert!(r.ok(), "{mode:?}: {r:?}");
        assert_eq!(
            r.text,
            confirm_task_text("10.1.0.4", &accepted_defaults()),
            "{mode:?}"
        );
        let stats = server.stats();
        assert_eq!(stats.task_updates(), 1, "{mode:?}: one tasks/update");
        // Every tasks/* request names its task in `Mcp-Name` (the tools/call names its tool).
        let sent = requests_of_the_call(stats);
        let id = ctx.events_of("mcp.task")[0].value()["task"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        for r in &sent {
            let want = if r.method == "tools/call" {
                "confirm_task"
            } else {
                id.as_str()
            };
            assert_eq!(r.mcp_name.as_deref(), Some(want), "{mode:?}: {r:?}");
        }
        assert!(
            sent.iter()
                .filter(|r| r.method.starts_with("tasks/"))
                .count()
                >= 3,
            "{mode:?}: {sent:?}"
        );
        assert_eq!(
            stats.input_responses(),
            vec![accepted_defaults()],
            "{mode:?}"
        );
        assert_eq!(stats.task_cancels(), 0, "{mode:?}");
        assert_eq!(stats.calls_of("confirm_task"), 1, "{mode:?}");
        assert_eq!(ctx.ledger().tool_calls, 1, "{mode:?}");
    }
}

#[test]
fn confirm_task_with_no_policy_is_cancelled_and_the_error_says_what_was_asked() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let ctx = context(&server.base_url(), "run-rmcp-no-policy", Options::default());
        let r = run_bounded(
            CHECK_BOUND,
            ctx.mcp("kali")
                .unwrap()
                .call("confirm_task", json!({"target": "10.1.0.5"})),
        );
        assert!(!r.ok() && !r.is_error(), "{mode:?}: {r:?}");
        let error = r.error().map(str::to_owned).unwrap_or_default();
        let asked = confirm_task_question("10.1.0.5")["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(error.contains(&asked), "{mode:?}: {error} names {asked:?}");
        let stats = server.stats();
        assert!(
            server_sees(stats, |s| s.confirms_cancelled() == 1),
            "{mode:?}: the question was not withdrawn on the server"
        );
        assert_eq!(stats.task_cancels(), 1, "{mode:?}: one tasks/cancel");
        assert_eq!(stats.task_updates(), 0, "{mode:?}: no tasks/update");
        assert!(stats.input_responses().is_empty(), "{mode:?}");
    }
}

#[test]
fn a_tool_error_and_a_failed_task_say_rmcps_words() {
    let server = task_server(Mode::Stateless);
    let ctx = context(&server.base_url(), "run-rmcp-fail", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    // A tool's own error: `completed` with isError.
    let r = run_bounded(
        CHECK_BOUND,
        kali.call(
            "long_scan",
            json!({"target": "10.1.0.6", "seconds": 0.2, "fail": "tool"}),
        ),
    );
    assert!(!r.ok() && r.is_error(), "{r:?}");
    assert_eq!(r.text, "long_scan 10.1.0.6: host down");
    assert_eq!(r.error(), Some("tool error: long_scan 10.1.0.6: host down"));
    // A failed task: rmcp's JSON-RPC error object, its message word for word.
    let r = run_bounded(
        CHECK_BOUND,
        kali.call(
            "long_scan",
            json!({"target": "10.1.0.7", "seconds": 0.2, "fail": "task"}),
        ),
    );
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some("JSON-RPC error -32603: long_scan 10.1.0.7: scanner crashed")
    );
    assert_eq!(server.stats().tasks_created(), 2);
    assert_eq!(server.stats().scans_started(), 2);
}

#[test]
fn with_tasks_off_long_scan_runs_inline_and_confirm_task_is_refused() {
    let server = task_server(Mode::Stateless);
    let ctx = context(
        &server.base_url(),
        "run-rmcp-off",
        Options::default().tasks(false),
    );
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("long_scan", json!({"target": "10.1.0.8", "seconds": 0.3})),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, long_scan_text("10.1.0.8", 0.3));
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("confirm_task", json!({"target": "10.1.0.8"})),
    );
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(error.contains("-32021"), "{error}");
    let stats = server.stats();
    assert_eq!(stats.tasks_created(), 0, "no task without the extension");
    assert_eq!(stats.task_gets(), 0);
    assert_eq!(stats.scans_started(), 1);
}

#[test]
fn an_unknown_task_on_rmcps_task_store_is_not_found() {
    let server = task_server(Mode::Stateful);
    let ctx = context(&server.base_url(), "run-rmcp-unknown", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let status = run_bounded(CHECK_BOUND, kali.task("no-such-task").status());
    let e = status.expect_err("an unknown task has no status");
    assert_eq!(e.code, Some(-32602), "{e}");
    let r = run_bounded(CHECK_BOUND, kali.task("no-such-task").wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some("task no-such-task is not found or expired on the server")
    );
    assert_eq!(server.stats().tool_calls(), 0, "no tools/call for it");
}

#[test]
fn mcp_call_with_accept_defaults_answers_confirm_task_and_without_a_policy_fails_naming_it() {
    let server = task_server(Mode::Stateful);
    let url = server.base_url();
    let out = run_mcp(
        &[
            "call",
            &url,
            "confirm_task",
            "target=10.1.0.9",
            "--elicitation",
            "accept-defaults",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        v["text"],
        confirm_task_text("10.1.0.9", &accepted_defaults()),
        "{v}"
    );
    let stats = server.stats();
    assert_eq!(stats.task_updates(), 1);
    assert_eq!(stats.input_responses(), vec![accepted_defaults()]);
    // No policy: exit 1, the question in the error, the task cancelled on the server.
    let out = run_mcp(
        &["call", &url, "confirm_task", "target=10.1.0.10"],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("Scan 10.1.0.10? Which port?"), "{v}");
    assert!(
        server_sees(stats, |s| s.confirms_cancelled() == 1),
        "the CLI's task was not cancelled on the server"
    );
    assert_eq!(stats.task_updates(), 1, "no second tasks/update");
    // The long tool is transparent from the command line too.
    let out = run_mcp(
        &[
            "call",
            &url,
            "long_scan",
            r#"{"target":"10.1.0.11","seconds":0.4}"#,
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["text"], long_scan_text("10.1.0.11", 0.4));
    assert_eq!(stats.scans_started(), 1);
}

/// The server's view of the client's requests of one call, from the first `tools/call` on
/// (the era probe and the tool list before it are other requests).
fn requests_of_the_call(stats: &Stats) -> Vec<SeenRequest> {
    let all = stats.requests();
    let start = all
        .iter()
        .position(|r| r.method == "tools/call")
        .unwrap_or(all.len());
    all[start..].to_vec()
}

/// Every request gets an id of its own (MCP: an id is never used twice by the requestor; the
/// design: a request sent again gets a new id), `tasks/update` and `tasks/cancel` included.
#[test]
fn every_request_of_a_task_has_an_id_of_its_own() {
    let mut reused = Vec::new();
    // input_required answered: tools/call, tasks/get, tasks/update, tasks/get.
    let server = task_server(Mode::Stateless);
    let opts = Options::default().elicitation(Some(Elicitation::AcceptDefaults));
    let ctx = context(&server.base_url(), "run-rmcp-ids", opts);
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("confirm_task", json!({"target": "10.1.0.12"})),
    );
    assert!(r.ok(), "{r:?}");
    let sent = requests_of_the_call(server.stats());
    assert!(sent.iter().any(|r| r.method == "tasks/update"), "{sent:?}");
    reused.extend(repeated_ids(&sent));
    // The deadline: tools/call, tasks/get …, tasks/cancel.
    let server = task_server(Mode::Stateless);
    let ctx = context(
        &server.base_url(),
        "run-rmcp-ids-cancel",
        Options::default().timeout_ms(600),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("long_scan", json!({"target": "10.1.0.13", "seconds": 20})),
    );
    assert!(!r.ok(), "{r:?}");
    let sent = requests_of_the_call(server.stats());
    assert!(sent.iter().any(|r| r.method == "tasks/cancel"), "{sent:?}");
    reused.extend(repeated_ids(&sent));
    assert!(
        reused.is_empty(),
        "requests sent with the id of an earlier request: {reused:?}"
    );
}

/// Each request whose id an earlier request already had: `method id (also method)`.
fn repeated_ids(sent: &[SeenRequest]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, r) in sent.iter().enumerate() {
        if let Some(earlier) = sent[..i].iter().find(|e| e.id == r.id) {
            out.push(format!(
                "{} id {} (also {})",
                r.method, r.id, earlier.method
            ));
        }
    }
    out
}

#[test]
fn a_detached_task_is_re_attached_from_a_new_context_and_its_cancel_ends_it() {
    let server = task_server(Mode::Stateless);
    let url = server.base_url();
    // Detach, then a new context (a harness restart) follows it to its result.
    let id = {
        let first = context(&url, "run-rmcp-before-restart", Options::default());
        let kali = first.mcp("kali").unwrap();
        match run_bounded(
            CHECK_BOUND,
            kali.start_task("long_scan", json!({"target": "10.1.0.14", "seconds": 0.8})),
        ) {
            TaskStart::Task(t) => t.id().to_owned(),
            TaskStart::Done(r) => panic!("long_scan answered at once: {r:?}"),
        }
    };
    let ctx = context(&url, "run-rmcp-after-restart", Options::default());
    let task = ctx.mcp("kali").unwrap().task(&id).tool("long_scan");
    let r = run_bounded(CHECK_BOUND, task.wait());
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, long_scan_text("10.1.0.14", 0.8));
    assert_eq!(
        ctx.ledger().tool_calls,
        0,
        "following a task is no tool call"
    );
    assert_eq!(server.stats().calls_of("long_scan"), 1);
    // A running task cancelled through its handle: rmcp's cancel is cooperative (its status may
    // lag), so `wait` is what says it ended cancelled, naming it.
    let (id, r) = run_bounded(CHECK_BOUND, async {
        let kali = ctx.mcp("kali").unwrap();
        let task = match kali
            .start_task("long_scan", json!({"target": "10.1.0.15", "seconds": 20}))
            .await
        {
            TaskStart::Task(t) => t,
            TaskStart::Done(r) => panic!("long_scan answered at once: {r:?}"),
        };
        task.cancel().await.expect("tasks/cancel");
        (task.id().to_owned(), task.wait().await)
    });
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(
        error.contains("cancelled") && error.contains(&id),
        "{error}"
    );
    let stats = server.stats();
    assert!(server_sees(stats, |s| s.scans_cancelled() == 1));
    assert_eq!(stats.cancelled_task_ids(), vec![id]);
    // The command line: `mcp task cancel` prints rmcp's acknowledgement, `mcp task get` the end.
    let out = run_mcp(
        &[
            "call",
            &url,
            "long_scan",
            r#"{"target":"10.1.0.16","seconds":20}"#,
            "--detach",
            "--format",
            "text",
        ],
        &[],
        CLI_BOUND,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let out = run_mcp(&["task", "cancel", &url, &id], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(json_of(&out).is_object(), "{out:?}");
    assert!(server_sees(stats, |s| s.scans_cancelled() == 2));
    let out = run_mcp(&["task", "get", &url, &id], &[], CLI_BOUND);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["status"], "cancelled", "{out:?}");
}

#[test]
fn a_dropped_call_that_is_an_rmcp_task_is_cancelled_there() {
    let server = task_server(Mode::Stateful);
    let ctx = context(&server.base_url(), "run-rmcp-dropped", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let ended = run_bounded(
        CHECK_BOUND,
        smol::future::or(
            async {
                Some(
                    kali.call("long_scan", json!({"target": "10.1.0.17", "seconds": 20}))
                        .await,
                )
            },
            async {
                smol::Timer::after(Duration::from_millis(700)).await;
                None
            },
        ),
    );
    assert!(ended.is_none(), "the call ended by itself: {ended:?}");
    let stats = server.stats();
    assert!(
        server_sees(stats, |s| s.scans_cancelled() == 1),
        "the dropped call's task was not cancelled on the server"
    );
    assert_eq!(stats.task_cancels(), 1);
    assert_eq!(stats.scans_finished(), 0);
    assert_eq!(ctx.ledger().tool_calls, 1);
}

#[test]
fn in_the_handshake_era_rmcp_makes_no_task_and_long_scan_runs_inline() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let opts = Options::default().era(verifi_mcp_host::EraSetting::Legacy);
        let ctx = context(&server.base_url(), "run-rmcp-legacy", opts);
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(
            CHECK_BOUND,
            kali.call("long_scan", json!({"target": "10.1.0.18", "seconds": 0.3})),
        );
        assert!(r.ok(), "{mode:?}: {r:?}");
        assert_eq!(r.text, long_scan_text("10.1.0.18", 0.3), "{mode:?}");
        let r = run_bounded(
            CHECK_BOUND,
            kali.call("confirm_task", json!({"target": "10.1.0.18"})),
        );
        assert!(!r.ok() && !r.is_error(), "{mode:?}: {r:?}");
        assert!(
            r.error().unwrap_or_default().contains("-32021"),
            "{mode:?}: {r:?}"
        );
        let stats = server.stats();
        assert_eq!(stats.initializes(), 1, "{mode:?}: the handshake era");
        assert_eq!(stats.tasks_created(), 0, "{mode:?}");
        assert_eq!(stats.task_gets(), 0, "{mode:?}");
        assert!(ctx.events_of("mcp.task").is_empty(), "{mode:?}");
    }
}

#[test]
fn connections_reset_between_polls_lose_nothing_and_the_tool_ran_once() {
    for mode in Mode::ALL {
        let server = task_server(mode);
        let ctx = context(&server.base_url(), "run-rmcp-reset", Options::default());
        let kali = ctx.mcp("kali").unwrap();
        let stats = server.stats();
        let (r, dropped) = run_bounded(
            CHECK_BOUND,
            smol::future::zip(
                kali.call("long_scan", json!({"target": "10.1.0.19", "seconds": 1.6})),
                async {
                    // Twice while the task runs, every connection is reset under the client.
                    let mut dropped = 0;
                    for polls in [2, 6] {
                        for _ in 0..200 {
                            if stats.task_gets() >= polls {
                                break;
                            }
                            smol::Timer::after(Duration::from_millis(10)).await;
                        }
                        dropped += server.drop_connections();
                    }
                    dropped
                },
            ),
        );
        assert!(dropped >= 1, "{mode:?}: no connection was reset");
        assert!(r.ok(), "{mode:?}: {r:?}");
        assert_eq!(r.text, long_scan_text("10.1.0.19", 1.6), "{mode:?}");
        assert_eq!(stats.calls_of("long_scan"), 1, "{mode:?}: one tools/call");
        assert_eq!(stats.scans_started(), 1, "{mode:?}: the tool ran once");
        assert_eq!(stats.task_cancels(), 0, "{mode:?}");
        assert!(stats.connections() >= 2, "{mode:?}: a fresh connection");
        assert_eq!(ctx.ledger().tool_calls, 1, "{mode:?}");
    }
}

#[test]
fn a_task_that_outlives_its_ttl_is_failed_by_rmcp_then_forgotten() {
    let server = task_server(Mode::Stateless);
    let ctx = context(&server.base_url(), "run-rmcp-ttl", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call(
            "long_scan",
            json!({"target": "10.1.0.20", "seconds": 10, "ttl_ms": 400}),
        ),
    );
    // rmcp's words for an expired task, word for word, well before the call's deadline.
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some("JSON-RPC error -32603: task expired: TTL elapsed before completion")
    );
    assert!(r.latency_ms < 5_000, "{r:?}");
    let tasks = ctx.events_of("mcp.task");
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let id = tasks[0].value()["task"].as_str().unwrap_or("?").to_owned();
    let stats = server.stats();
    assert_eq!(stats.scans_finished(), 0, "rmcp aborted the scan");
    assert_eq!(
        stats.task_cancels(),
        0,
        "the client did not need to cancel it"
    );
    // One TTL after its end rmcp has forgotten it: following it says so, and runs nothing.
    std::thread::sleep(Duration::from_millis(500));
    let r = run_bounded(CHECK_BOUND, kali.task(&id).wait());
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some(format!("task {id} is not found or expired on the server").as_str())
    );
    assert_eq!(stats.calls_of("long_scan"), 1);
}
