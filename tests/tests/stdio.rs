//! stdio servers: the interop list over stdio against the official TypeScript and Python SDK
//! servers and the rmcp kit, and the faults of a byte-level child (`verifi-stdio-fault`): exit
//! mid-reply, exit at start, lines that are not JSON-RPC (skipped), a line over the cap, a stderr flood, a child that ignores
//! stdin closing and SIGTERM; the child's environment; failover between stdio and HTTP. Every
//! test checks that no child it started is left running.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{context_with, run_bounded, workspace_root};
use verifi_mcp_host::{HarnessContext, Kind, LedgerTotals, Options, SlotHandle};
use verifi_mcp_tests::{Mode, TestServer};

/// A hang guard for each test (not a performance bound).
const BOUND: Duration = Duration::from_secs(90);

fn fault_bin() -> String {
    env!("CARGO_BIN_EXE_verifi-stdio-fault").to_owned()
}

fn rmcp_bin() -> String {
    env!("CARGO_BIN_EXE_verifi-test-server").to_owned()
}

/// True when `pid` is still a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses; `Z` is a zombie (already dead).
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Closes the context and checks every child it started is gone.
async fn close_and_check(ctx: &HarnessContext, slots: &[&SlotHandle], pids: &[u32]) {
    ctx.close().await;
    for s in slots {
        assert!(
            s.stdio_pids().is_empty(),
            "a child is left: {:?}",
            s.stdio_pids()
        );
    }
    for pid in pids {
        assert!(!alive(*pid), "child {pid} outlived close()");
    }
}

/// The command line of an SDK's stdio server, or why it cannot run here (then the test fails,
/// unless `VERIFI_ALLOW_NO_PEERS=1` and not `VERIFI_REQUIRE_PEERS=1`: a printed skip).
fn sdk_command(sdk: support::Sdk) -> Option<Vec<String>> {
    let root = workspace_root();
    if let Some(why) = support::missing(sdk) {
        let flag = |n: &str| std::env::var(n).is_ok_and(|v| v == "1");
        let msg =
            format!("the {sdk:?} SDK's stdio server cannot run: {why} (run scripts/peers.sh)");
        if flag("VERIFI_REQUIRE_PEERS") || !flag("VERIFI_ALLOW_NO_PEERS") {
            panic!("{msg}");
        }
        eprintln!("NOT RUN (VERIFI_ALLOW_NO_PEERS=1): {msg}");
        return None;
    }
    let s = |p: PathBuf| p.display().to_string();
    Some(match sdk {
        support::Sdk::Ts => vec![
            "node".into(),
            s(root.join("tests/peers/ts/server.mjs")),
            "stdio".into(),
        ],
        support::Sdk::Py => {
            let venv = std::env::var_os("VERIFI_PEERS_VENV")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target/peers/venv"));
            vec![
                s(venv.join("bin/python")),
                s(root.join("tests/peers/py/server.py")),
                "stdio".into(),
            ]
        }
        support::Sdk::Rmcp => vec![rmcp_bin(), "--stdio".into()],
    })
}

fn stdio_ctx(fill: Value, opts: Options) -> HarnessContext {
    context_with(json!({ "slotFills": { "local": fill } }), "run-stdio", opts)
}

// ---- interop: the three SDKs' stdio servers ----------------------------------------------------

fn interop(sdk: support::Sdk) {
    let Some(argv) = sdk_command(sdk) else { return };
    let ctx = stdio_ctx(
        json!({ "command": argv }),
        Options::default().timeout_ms(60_000),
    );
    let slot = ctx.mcp("local").unwrap();
    run_bounded(BOUND, async {
        // Nothing runs before the first operation.
        assert!(slot.stdio_pids().is_empty());
        let tools = slot.list_tools().await.expect("tools/list over stdio");
        for t in ["echo", "run_command", "fail", "slow"] {
            assert!(
                tools.iter().any(|n| n == t),
                "{sdk:?}: {t} missing from {tools:?}"
            );
        }
        let pids = slot.stdio_pids();
        assert_eq!(pids.len(), 1, "one child for the slot");

        let r = slot
            .call("echo", json!({ "text": "hello over stdio" }))
            .await;
        assert!(r.ok(), "{sdk:?}: {:?}", r.error());
        assert_eq!(r.text, "hello over stdio");

        let r = slot.call("fail", json!({})).await;
        assert!(!r.ok() && r.is_error(), "{sdk:?}: {r:?}");
        assert_eq!(r.error(), Some("tool error: fail: this tool always fails"));

        let r = slot.call("no_such_tool", json!({})).await;
        assert!(!r.ok(), "{sdk:?}: {r:?}");
        assert!(
            !matches!(r.kind(), Kind::Unreachable(_)),
            "{sdk:?}: answered, not unreachable: {r:?}"
        );

        // Progress notifications over stdio are routed to their call by progress token.
        let seen = std::sync::atomic::AtomicU32::new(0);
        let r = slot
            .call_with_progress("slow", json!({ "ms": 300, "steps": 3 }), |_| {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
            .await;
        assert!(r.ok(), "{sdk:?}: {:?}", r.error());
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::Relaxed),
            3,
            "{sdk:?}: progress"
        );

        // Sixteen calls at once share the one child, each gets its own answer.
        let calls = (0..16).map(|i| {
            let slot = slot.clone();
            async move {
                (
                    i,
                    slot.call("echo", json!({ "text": format!("n{i}") })).await,
                )
            }
        });
        for (i, r) in futures_join_all(calls).await {
            assert!(r.ok(), "{sdk:?} call {i}: {:?}", r.error());
            assert_eq!(r.text, format!("n{i}"));
        }

        let rs = slot.list_resources().await.expect("resources/list");
        assert!(
            rs.iter().any(|r| r.uri == "test://notes/readme"),
            "{sdk:?}: {rs:?}"
        );
        let read = slot
            .read_resource("test://notes/readme")
            .await
            .expect("resources/read");
        let body = format!("{:?}", read.contents);
        assert!(body.contains("hello from the readme"), "{sdk:?}: {body}");
        let prompts = slot.list_prompts().await.expect("prompts/list");
        assert!(prompts.iter().any(|p| p.name == "review"), "{sdk:?}");
        let got = slot
            .get_prompt("review", json!({ "topic": "TLS" }))
            .await
            .expect("prompts/get");
        let text = format!("{:?}", got.messages);
        assert!(text.contains("Review the TLS findings."), "{sdk:?}: {text}");
        slot.ping().await.expect("ping");

        // Every call was metered (echo, fail, unknown, slow, 16 echoes), reads too.
        let LedgerTotals { tool_calls, .. } = ctx.ledger();
        assert_eq!(tool_calls, 4 + 16 + 2, "{sdk:?}");
        assert_eq!(slot.stdio_pids(), pids, "still the same child");
        close_and_check(&ctx, &[&slot], &pids).await;
    });
}

/// A call that times out is cancelled over stdio (`notifications/cancelled`): the TypeScript
/// server's tool sees the abort, and the child goes on serving.
#[test]
fn a_timed_out_call_is_cancelled_over_stdio() {
    let Some(argv) = sdk_command(support::Sdk::Ts) else {
        return;
    };
    let ctx = stdio_ctx(
        json!({ "command": argv }),
        Options::default().timeout_ms(1_000),
    );
    let slot = ctx.mcp("local").unwrap();
    run_bounded(BOUND, async {
        let r = slot.call("slow", json!({ "ms": 20_000, "steps": 1 })).await;
        assert!(!r.ok(), "{r:?}");
        assert!(
            r.error()
                .is_some_and(|e| e.starts_with("tool call timed out after")),
            "{r:?}"
        );
        let mut interrupted = false;
        for _ in 0..50 {
            let st = slot.call("peer_stats", json!({})).await;
            assert!(st.ok(), "{:?}", st.error());
            let v: Value = serde_json::from_str(&st.text).unwrap();
            if v["slow_interrupted"].as_u64() >= Some(1) {
                interrupted = true;
                break;
            }
            async_io::Timer::after(Duration::from_millis(100)).await;
        }
        assert!(interrupted, "the server never saw the cancellation");
        let pids = slot.stdio_pids();
        close_and_check(&ctx, &[&slot], &pids).await;
    });
}

#[test]
fn typescript_sdk_over_stdio() {
    interop(support::Sdk::Ts);
}

#[test]
fn python_sdk_over_stdio() {
    interop(support::Sdk::Py);
}

#[test]
fn rmcp_over_stdio() {
    interop(support::Sdk::Rmcp);
}

/// Runs futures concurrently on the current task and collects their outputs in order.
async fn futures_join_all<F>(futs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futs.map(smol::spawn).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await);
    }
    out
}

// ---- the byte-level child ---------------------------------------------------------------------

fn fault(mode: &str, env: Value, opts: Options) -> (HarnessContext, SlotHandle) {
    let ctx = stdio_ctx(json!({ "command": [fault_bin(), mode], "env": env }), opts);
    let slot = ctx.mcp("local").unwrap();
    (ctx, slot)
}

/// The server's own requests are answered (ping: a result; roots/list: an error) so it never
/// waits, and a message with a `method` never answers a call even when its id is the call's.
#[test]
fn server_requests_are_answered_and_a_method_never_answers_a_call() {
    let (ctx, slot) = fault("ok", json!({}), Options::default().timeout_ms(20_000));
    run_bounded(BOUND, async {
        for i in 0..3 {
            let r = slot.call("echo", json!({ "text": format!("t{i}") })).await;
            assert!(r.ok(), "{:?}", r.error());
            assert_eq!(r.text, format!("t{i}"));
        }
        let pids = slot.stdio_pids();
        close_and_check(&ctx, &[&slot], &pids).await;
    });
}

#[test]
fn a_child_that_exits_mid_reply_is_unreachable_with_its_status_and_stderr_redacted() {
    let secret = "hunter2-db-password";
    let opts = Options::default()
        .timeout_ms(60_000)
        .secrets(Some(vec![secret.to_owned()]));
    let (ctx, slot) = fault("exit-mid-reply", json!({ "FAULT_SECRET": secret }), opts);
    run_bounded(BOUND, async {
        let r = slot.call("echo", json!({ "text": "x" })).await;
        assert!(!r.ok() && !r.is_error(), "{r:?}");
        let e = r.error().map(str::to_owned).unwrap_or_default();
        assert!(e.contains("may have run"), "{e}");
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("lost the database"), "{e}");
        assert!(e.contains("[REDACTED]") && !e.contains(secret), "{e}");
        assert_eq!(ctx.ledger().tool_calls, 1);
        let tl = ctx.timeline();
        assert!(tl.iter().all(|t| !t.json.contains(secret)));
        assert!(
            tl.iter()
                .any(|t| t.kind == "tool_error" && t.json.contains("exit status: 3")),
            "{tl:?}"
        );
        // The server is dead for the run: the next call does not start another child.
        let r2 = slot.call("echo", json!({ "text": "x" })).await;
        assert!(!r2.ok());
        assert!(r2.error().unwrap_or_default().contains("exit status: 3"));
        assert_eq!(ctx.ledger().tool_calls, 2);
        close_and_check(&ctx, &[&slot], &[]).await;
    });
}

#[test]
fn a_child_that_exits_at_start_names_its_exit_status() {
    let (ctx, slot) = fault(
        "exit-at-start",
        json!({}),
        Options::default().timeout_ms(60_000),
    );
    run_bounded(BOUND, async {
        let e = slot.list_tools().await.unwrap_err();
        assert!(e.message.contains("exit status: 7"), "{}", e.message);
        assert!(e.message.contains("cannot load config"), "{}", e.message);
        let r = slot.call("echo", json!({})).await;
        assert!(!r.ok());
        assert!(r.error().unwrap_or_default().contains("exit status: 7"));
        close_and_check(&ctx, &[&slot], &[]).await;
    });
}

/// Lines that are not JSON-RPC (not JSON, a bare number, a JSON log object) are skipped, as the
/// official SDK clients skip them: the call is answered. When a call then fails without an
/// answer, its error counts them and quotes the last three, cut and redacted.
#[test]
fn lines_that_are_not_json_rpc_are_skipped_and_quoted_when_a_call_then_fails() {
    let secret = "hunter2-db-password";
    let opts = Options::default()
        .timeout_ms(3_000)
        .secrets(Some(vec![secret.to_owned()]));
    let (ctx, slot) = fault("garbage", json!({ "FAULT_SECRET": secret }), opts);
    run_bounded(Duration::from_secs(30), async {
        let r = slot.call("echo", json!({ "text": "x" })).await;
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.text, "x");
        // Never answered: it ends at its deadline, saying what the server wrote instead.
        let r = slot.call("echo", json!({ "text": "hang" })).await;
        assert!(!r.ok(), "{r:?}");
        assert!(
            matches!(
                r.kind(),
                Kind::Unreachable(verifi_mcp_core::wire::failure::Cause::TimedOut)
            ),
            "{r:?}"
        );
        let e = r.error().unwrap_or_default();
        assert!(
            e.contains("wrote 10 lines that are not JSON-RPC (skipped), the last: "),
            "{e}"
        );
        assert!(e.contains("INFO: a log line on stdout"), "{e}");
        assert!(e.contains("… (800 more bytes)"), "{e}");
        assert!(e.contains("Traceback (most recent call last)"), "{e}");
        assert!(e.contains("[REDACTED]") && !e.contains(secret), "{e}");
        // Only the last three are quoted.
        assert!(!e.contains("listening"), "{e}");
        let tl = ctx.timeline();
        assert!(tl.iter().all(|t| !t.json.contains(secret)), "{tl:?}");
        close_and_check(&ctx, &[&slot], &[]).await;
    });
}

#[test]
fn a_line_over_the_cap_is_an_error_not_unbounded_memory() {
    let opts = Options::default().timeout_ms(600_000).reply_cap(1 << 20);
    let (ctx, slot) = fault("long-line", json!({ "FAULT_BYTES": "41943040" }), opts);
    run_bounded(Duration::from_secs(60), async {
        let r = slot.call("echo", json!({ "text": "x" })).await;
        assert!(!r.ok(), "{r:?}");
        let e = r.error().unwrap_or_default();
        assert!(e.contains("over the 1048576-byte cap"), "{e}");
        close_and_check(&ctx, &[&slot], &[]).await;
    });
}

#[test]
fn a_stderr_flood_is_drained_so_the_child_never_blocks() {
    let (ctx, slot) = fault(
        "stderr-flood",
        json!({ "FAULT_BYTES": "16777216" }),
        Options::default().timeout_ms(60_000),
    );
    run_bounded(BOUND, async {
        let r = slot
            .call("echo", json!({ "text": "after the flood" }))
            .await;
        assert!(r.ok(), "{:?}", r.error());
        assert_eq!(r.text, "after the flood");
        let pids = slot.stdio_pids();
        close_and_check(&ctx, &[&slot], &pids).await;
    });
}

/// stdin closed, then SIGTERM, then SIGKILL: a child that ignores both is gone within 10 s.
#[test]
fn a_child_that_ignores_eof_and_sigterm_is_killed_after_the_grace() {
    let script = "trap '' TERM; while :; do sleep 0.2; done";
    let ctx = stdio_ctx(
        json!({ "command": ["sh", "-c", script] }),
        Options::default().timeout_ms(500),
    );
    let slot = ctx.mcp("local").unwrap();
    run_bounded(BOUND, async {
        // It never answers: the ping times out, and the child keeps running.
        assert!(slot.ping().await.is_err());
        let pids = slot.stdio_pids();
        assert_eq!(pids.len(), 1);
        let started = Instant::now();
        close_and_check(&ctx, &[&slot], &pids).await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    });
}

/// What the child started and left behind when it exited (its process group) is killed at
/// `close()` too.
#[test]
fn what_the_child_started_is_gone_after_close() {
    let dir = std::env::temp_dir().join(format!("verifi-stdio-group-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("grandchild.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; while read line; do :; done",
        pidfile.display()
    );
    let ctx = stdio_ctx(
        json!({ "command": ["sh", "-c", script] }),
        Options::default().timeout_ms(500),
    );
    let slot = ctx.mcp("local").unwrap();
    run_bounded(BOUND, async {
        assert!(slot.ping().await.is_err());
        let pids = slot.stdio_pids();
        let mut grandchild = None;
        for _ in 0..100 {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                grandchild = Some(p);
                break;
            }
            async_io::Timer::after(Duration::from_millis(20)).await;
        }
        let grandchild = grandchild.expect("the child wrote its grandchild's pid");
        assert!(alive(grandchild));
        close_and_check(&ctx, &[&slot], &pids).await;
        // SIGKILL is sent by then; the kernel takes a moment to end the process.
        for _ in 0..100 {
            if !alive(grandchild) {
                break;
            }
            async_io::Timer::after(Duration::from_millis(10)).await;
        }
        let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
        assert!(
            !alive(grandchild),
            "the grandchild {grandchild} outlived close(): {stat} (children of the slot: {pids:?})"
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The 2026-07-28 era over stdio: the probe finds a modern server, no `initialize` is sent,
/// and every request carries its version in `_meta`; an old-era child refuses the probe and
/// gets the handshake.
#[test]
fn both_eras_over_stdio() {
    let ctx = context_with(
        json!({ "slotFills": {
            "new": { "command": [fault_bin(), "modern"] },
            "old": { "command": [fault_bin(), "plain"] }
        } }),
        "run-eras",
        Options::default().timeout_ms(1_000),
    );
    let (new, old) = (ctx.mcp("new").unwrap(), ctx.mcp("old").unwrap());
    run_bounded(BOUND, async {
        let r = new.call("echo", json!({ "text": "hi" })).await;
        assert!(r.ok(), "{:?}", r.error());
        assert_eq!(r.text, "hi at 2026-07-28");
        let st = new.call("stats", json!({})).await;
        assert!(st.text.starts_with("initializes=0 "), "{}", st.text);
        // A timed-out call is cancelled with a notification in both eras: on stdio there is
        // no stream whose closing would tell the server.
        for slot in [&new, &old] {
            let r = slot.call("wait", json!({})).await;
            assert!(
                r.error()
                    .is_some_and(|e| e.starts_with("tool call timed out after")),
                "{r:?}"
            );
            let st = slot.call("stats", json!({})).await;
            assert!(st.text.ends_with(" cancelled=1"), "{}", st.text);
        }
        let r = old.call("echo", json!({ "text": "hi" })).await;
        assert!(r.ok(), "{:?}", r.error());
        assert_eq!(r.text, "hi");
        let st = old.call("stats", json!({})).await;
        assert!(st.text.starts_with("initializes=1 "), "{}", st.text);
        let pids = [new.stdio_pids(), old.stdio_pids()].concat();
        assert_eq!(pids.len(), 2);
        close_and_check(&ctx, &[&new, &old], &pids).await;
    });
}

/// The child's environment is the allow-list plus the slot's `env`; its `cwd` is the slot's.
#[test]
fn the_child_gets_only_the_allow_list_and_the_slots_env_in_its_cwd() {
    let dir = std::env::temp_dir();
    let ctx = stdio_ctx(
        json!({ "command": [fault_bin(), "env"], "env": { "SLOT_VAR": "v1" },
                "cwd": dir.display().to_string() }),
        Options::default().timeout_ms(20_000),
    );
    let slot = ctx.mcp("local").unwrap();
    run_bounded(BOUND, async {
        let r = slot.call("echo", json!({})).await;
        assert!(r.ok(), "{:?}", r.error());
        let mut names = Vec::new();
        for line in r.text.lines() {
            let (k, v) = line.split_once('=').unwrap();
            if k == "cwd" {
                assert_eq!(
                    std::fs::canonicalize(v).unwrap(),
                    std::fs::canonicalize(&dir).unwrap()
                );
                continue;
            }
            names.push(k.to_owned());
        }
        assert!(names.iter().any(|n| n == "SLOT_VAR"), "{names:?}");
        for n in &names {
            assert!(
                n == "SLOT_VAR" || verifi_mcp_host::stdio::ENV_ALLOW.contains(&n.as_str()),
                "{n} reached the child"
            );
        }
        // Ours (cargo sets these for a test) did not.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        assert!(!names.iter().any(|n| n.starts_with("CARGO")), "{names:?}");
        let pids = slot.stdio_pids();
        close_and_check(&ctx, &[&slot], &pids).await;
    });
}

/// A stdio primary that dies fails over to an HTTP fallback (announced once), and an HTTP
/// primary that is down fails over to a stdio fallback.
#[test]
fn failover_between_stdio_and_http_both_ways() {
    let server = TestServer::start(Mode::Stateful).expect("rmcp server");
    let ctx = context_with(
        json!({ "slotFills": {
            "a": { "command": [fault_bin(), "exit-at-start"], "fallback": server.base_url() },
            "b": { "endpoint": "http://127.0.0.1:9", "fallback": { "command": [fault_bin(), "ok"] } }
        } }),
        "run-failover",
        Options::default().timeout_ms(20_000),
    );
    let (a, b) = (ctx.mcp("a").unwrap(), ctx.mcp("b").unwrap());
    run_bounded(BOUND, async {
        for _ in 0..2 {
            let r = a.call("echo", json!({ "text": "via http" })).await;
            assert!(r.ok(), "{:?}", r.error());
            assert_eq!(r.text, "via http");
            let r = b.call("echo", json!({ "text": "via stdio" })).await;
            assert!(r.ok(), "{:?}", r.error());
            assert_eq!(r.text, "via stdio");
        }
        let used: Vec<_> = ctx
            .timeline()
            .into_iter()
            .filter(|t| t.kind == "mcp.fallback_used")
            .collect();
        assert_eq!(used.len(), 2, "once per slot: {used:?}");
        assert!(used.iter().any(|t| t.json.contains("stdio:")), "{used:?}");
        // Every attempt is metered: each slot's first call paid its dead primary.
        assert_eq!(ctx.ledger().tool_calls, 6);
        let pids = b.stdio_pids();
        close_and_check(&ctx, &[&a, &b], &pids).await;
    });
}

/// Dropping the context without `close()` still ends the child.
#[test]
fn dropping_the_context_kills_the_child() {
    let (ctx, slot) = fault("ok", json!({}), Options::default().timeout_ms(20_000));
    let pids = run_bounded(BOUND, async {
        assert!(slot.call("echo", json!({ "text": "x" })).await.ok());
        slot.stdio_pids()
    });
    assert_eq!(pids.len(), 1);
    drop(slot);
    drop(ctx);
    for pid in pids {
        assert!(!alive(pid), "child {pid} outlived its context");
    }
}
