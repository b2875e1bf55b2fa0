//! Interop: one test list, run through the host adapter against every server mode we can run —
//! our servers on the official TypeScript SDK (stateful SSE, JSON replies), on the official
//! Python SDK (stateful, stateless, JSON replies) and the rmcp kit (stateful, stateless, JSON).
//!
//! Each `#[test]` starts one peer and runs every check of [`CHECKS`] against it; a failing check
//! does not hide the others: the test fails at the end naming every failed check. Where the
//! SDKs really differ (an unknown tool, the key order of a non-text block, progress in JSON
//! mode, what reaches a handler on cancellation) the expectation says which does what.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{
    CHECK_BOUND, Check, Peer, PeerKind, Sdk, context, eventually, failure_events, peer_stats,
    run_bounded, timed, with_timeout,
};
use verifi_mcp_host::{LedgerTotals, Options};

/// The `error` of an `isError` result: the tool's own first line.
const TOOL_ERROR: &str = "tool error: fail: this tool always fails";

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        /// Every check, by name.
        const CHECKS: &[(&str, Check)] = &[
            $((stringify!($name), |p: &Peer| run_bounded(CHECK_BOUND, $name(p)))),*
        ];
    };
}

checks!(
    handshake_once_and_session_reused,
    list_tools_names_every_tool,
    answered_call,
    is_error_call,
    unknown_tool,
    mixed_content_flattened,
    ten_mib_reply,
    progress_during_slow,
    no_progress_token_unless_asked,
    timeout_then_cancellation,
    thirty_two_concurrent_calls,
    exec_reports_the_tools_exit_code,
);

fn run_all(kind: PeerKind) {
    support::run_checks(kind, CHECKS);
}

crate::peer_tests!(run_all);

// ---- the checks ---------------------------------------------------------------------------

/// The era is found once per server per context (`auto`): a dual-era server (Python, rmcp) is
/// spoken to in the 2026 era with no `initialize` at all; an old-era one (TypeScript) gets one
/// lazy handshake for the context, and later calls ride the same session (a stateful TS server
/// refuses a call without its session id, so calls that succeed after the first prove the id
/// was sent back). The verdict is one `mcp.era` event.
async fn handshake_once_and_session_reused(p: &Peer) {
    let ctx = context(p.base_url(), "run-handshake", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let before = peer_stats(p, &kali).await;
    // peer_stats on TS/Python is itself a call, so the handshake already happened for them.
    let first_init = if p.kind.sdk() == Sdk::Rmcp { 0 } else { 1 };
    for i in 0..5 {
        let r = kali
            .call("echo", json!({ "text": format!("hello {i}") }))
            .await;
        assert!(r.ok(), "call {i}: {r:?}");
        assert_eq!(r.text, format!("hello {i}"));
    }
    let after = peer_stats(p, &kali).await;
    let want = if p.kind.modern() { 0 } else { 1 - first_init };
    assert_eq!(
        after.initializes - before.initializes,
        want,
        "initialize only in the old era, once for the whole context (before {before:?}, after {after:?})"
    );
    let eras = ctx.events_of("mcp.era");
    assert_eq!(eras.len(), 1, "{eras:?}");
    assert_eq!(eras[0].value()["era"], p.kind.era_name());
    if let Some(s) = p.rmcp().filter(|_| !p.kind.modern()) {
        let hello = s.stats().client_hello().expect("rmcp saw initialize");
        assert_eq!(hello.name, "verifi-harness-sdk");
        assert_eq!(hello.version, "1.0.0");
        assert_eq!(hello.protocol_version, "2024-11-05");
    }
    // A second context is a second session.
    let ctx2 = context(p.base_url(), "run-handshake-2", Options::default());
    let r = ctx2
        .mcp("kali")
        .unwrap()
        .call("echo", json!({"text": "x"}))
        .await;
    assert!(r.ok(), "{r:?}");
    let again = peer_stats(p, &kali).await;
    let want = if p.kind.modern() { 0 } else { 1 };
    assert_eq!(again.initializes, after.initializes + want);
    ctx.close().await;
    ctx2.close().await;
}

async fn list_tools_names_every_tool(p: &Peer) {
    let ctx = context(p.base_url(), "run-list", Options::default());
    let mut names = ctx
        .mcp("kali")
        .unwrap()
        .list_tools()
        .await
        .expect("tools/list");
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
    if p.kind.sdk() != Sdk::Rmcp {
        want.push("peer_stats");
    }
    if p.kind.sdk() == Sdk::Py {
        want.extend(["regional", "confirm_scan"]);
    }
    if p.kind.sdk() == Sdk::Ts {
        want.extend(["ask_aside", "logs"]);
    }
    want.sort();
    assert_eq!(names, want);
    // list_tools is not a tool call: nothing metered.
    assert_eq!(ctx.ledger(), LedgerTotals::default());
}

async fn answered_call(p: &Peer) {
    let ctx = context(p.base_url(), "run-answered", Options::default());
    let r = ctx
        .mcp("kali")
        .unwrap()
        .call("echo", json!({"text": "héllo wörld"}))
        .await;
    assert!(r.ok() && !r.is_error(), "{r:?}");
    assert_eq!(r.text, "héllo wörld");
    assert_eq!(r.error(), None);
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: "héllo wörld".len() as u64
        }
    );
    assert!(failure_events(&ctx).is_empty(), "{:?}", ctx.timeline());
}

async fn is_error_call(p: &Peer) {
    let ctx = context(p.base_url(), "run-iserror", Options::default());
    let r = ctx.mcp("kali").unwrap().call("fail", json!({})).await;
    assert!(!r.ok() && r.is_error(), "{r:?}");
    assert_eq!(r.text, "fail: this tool always fails");
    assert_eq!(r.error(), Some(TOOL_ERROR));
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: r.text.len() as u64
        }
    );
    let ev = ctx.events_of("tool_error");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        ev[0].value(),
        json!({"kind": "tool_error", "slot": "kali", "tool": "fail", "error": TOOL_ERROR})
    );
}

/// rmcp refuses an unknown tool with a JSON-RPC error; the TypeScript and Python SDKs answer it
/// with an `isError` result (each in its own words). The client reports what the server did.
async fn unknown_tool(p: &Peer) {
    let ctx = context(p.base_url(), "run-unknown", Options::default());
    let r = ctx
        .mcp("kali")
        .unwrap()
        .call("no_such_tool", json!({}))
        .await;
    match p.kind.sdk() {
        Sdk::Rmcp => {
            assert!(!r.ok() && !r.is_error(), "{r:?}");
            assert_eq!(
                r.error(),
                Some("JSON-RPC error -32602: tool not found: no_such_tool")
            );
        }
        Sdk::Ts => {
            assert!(!r.ok() && r.is_error(), "{r:?}");
            assert_eq!(r.text, "MCP error -32602: Tool no_such_tool not found");
            assert_eq!(
                r.error(),
                Some("tool error: MCP error -32602: Tool no_such_tool not found")
            );
        }
        Sdk::Py => {
            assert!(!r.ok() && r.is_error(), "{r:?}");
            assert_eq!(r.text, "Unknown tool: no_such_tool");
            assert_eq!(r.error(), Some("tool error: Unknown tool: no_such_tool"));
        }
    }
    assert_eq!(ctx.ledger().tool_calls, 1);
    let ev = ctx.events_of("tool_error");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].value()["tool"], "no_such_tool");
    assert_eq!(
        ev[0].value()["error"],
        r.error().map(str::to_owned).unwrap_or_default()
    );
}

/// A text block gives its text, an image block its compact JSON as the server wrote it (so the
/// key order is the server's: TS and rmcp write `type` first, Python sorts its keys).
async fn mixed_content_flattened(p: &Peer) {
    let ctx = context(p.base_url(), "run-mixed", Options::default());
    let r = ctx.mcp("kali").unwrap().call("mixed", json!({})).await;
    assert!(r.ok(), "{r:?}");
    let image = match p.kind.sdk() {
        Sdk::Py => r#"{"data":"iVBORw0KGgo=","mimeType":"image/png","type":"image"}"#,
        Sdk::Ts | Sdk::Rmcp => r#"{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}"#,
    };
    assert_eq!(r.text, format!("mixed: text part\n{image}"));
    assert_eq!(ctx.ledger().evidence_bytes, r.text.len() as u64);
}

/// A 10 MiB text reply arrives whole. The Python SDK sends a `str`-returning tool's output twice
/// (`content` and `structuredContent`), so its 10 MiB reply is a 20 MiB body: over the default
/// 16 MiB reply cap it is refused with the cap's message, and with a 32 MiB cap it arrives.
async fn ten_mib_reply(p: &Peer) {
    const N: usize = 10 * 1024 * 1024;
    if p.kind.sdk() == Sdk::Py {
        let ctx = context(p.base_url(), "run-big-default-cap", Options::default());
        let r = ctx
            .mcp("kali")
            .unwrap()
            .call("big", json!({"bytes": N}))
            .await;
        assert!(
            !r.ok() && !r.is_error(),
            "ok: {} error: {:?}",
            r.ok(),
            r.error()
        );
        let error = r.error().map(str::to_owned).unwrap_or_default();
        if p.kind.json_bodies() {
            // A JSON body meets the reply buffer's cap, which says by how much at least.
            assert!(
                error.starts_with("reply buffer too small: needs at least ")
                    && error.contains("over its cap of 16777216 by "),
                "{error}"
            );
        } else {
            assert_eq!(
                error,
                "server-sent event is larger than its cap of 16777216 bytes; raise the event limit or the reply buffer"
            );
        }
        assert_eq!(
            ctx.ledger(),
            LedgerTotals {
                tool_calls: 1,
                evidence_bytes: 0
            }
        );
    }
    let opts = Options::default().reply_cap(32 * 1024 * 1024);
    let ctx = context(p.base_url(), "run-big", opts);
    let r = ctx
        .mcp("kali")
        .unwrap()
        .call("big", json!({"bytes": N}))
        .await;
    assert!(r.ok(), "ok: {} error: {:?}", r.ok(), r.error());
    assert_eq!(r.text.len(), N);
    assert!(r.text.bytes().all(|b| b == b'x'));
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: N as u64
        }
    );
    if p.kind.sdk() != Sdk::Py {
        // Under the default cap too, when the server sends the text once.
        let ctx = context(p.base_url(), "run-big-default", Options::default());
        let r = ctx
            .mcp("kali")
            .unwrap()
            .call("big", json!({"bytes": N}))
            .await;
        assert!(
            r.ok() && r.text.len() == N,
            "ok: {} error: {:?}",
            r.ok(),
            r.error()
        );
    }
}

/// With `progress_extends_to_ms`, progress in the reply stream keeps a slow call alive past the
/// per-call timeout. TS and Python drop progress in JSON-reply mode, so there the call times
/// out (what a client of those servers really gets); rmcp's JSON mode switches to SSE when a
/// notification precedes the reply, so progress reaches the client there too.
async fn progress_during_slow(p: &Peer) {
    let opts = Options::default()
        .timeout_ms(1200)
        .progress_extends_to_ms(Some(20_000));
    let ctx = context(p.base_url(), "run-progress", opts);
    let kali = ctx.mcp("kali").unwrap();
    let stats_ctx = context(p.base_url(), "run-progress-stats", Options::default());
    let before = peer_stats(p, &stats_ctx.mcp("kali").unwrap()).await;
    let (r, took) = timed(kali.call("slow", json!({"ms": 3000, "steps": 12}))).await;
    let progress_reaches_client = !(p.kind.json_replies() && p.kind.sdk() != Sdk::Rmcp);
    if progress_reaches_client {
        assert!(r.ok(), "{r:?} after {took:?}");
        assert_eq!(r.text, "slept 3000 ms in 12 steps");
        assert!(took >= Duration::from_millis(3000), "{took:?}");
        let after = peer_stats(p, &stats_ctx.mcp("kali").unwrap()).await;
        assert_eq!(
            after.progress_sent - before.progress_sent,
            12,
            "{before:?} {after:?}"
        );
    } else {
        assert!(!r.ok() && !r.is_error(), "{r:?}");
        assert!(
            r.error()
                .is_some_and(|e| e.starts_with("tool call timed out after")),
            "{r:?}"
        );
        assert!(took < Duration::from_millis(3000), "timed out at {took:?}");
        // Let the abandoned handler end (or be stopped) so later checks count only their own.
        let settled = eventually(Duration::from_secs(8), async || {
            let now = peer_stats(p, &stats_ctx.mcp("kali").unwrap()).await;
            now.slow_completed + now.slow_interrupted
                > before.slow_completed + before.slow_interrupted
        })
        .await;
        assert!(settled, "the server's slow handler never ended");
    }
}

/// Without the option, no `progressToken` is sent, so the server sends no progress.
async fn no_progress_token_unless_asked(p: &Peer) {
    let ctx = context(p.base_url(), "run-no-progress", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let before = peer_stats(p, &kali).await;
    let r = kali.call("slow", json!({"ms": 300, "steps": 3})).await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "slept 300 ms in 3 steps");
    let after = peer_stats(p, &kali).await;
    assert_eq!(
        after.progress_sent, before.progress_sent,
        "{before:?} {after:?}"
    );
    assert_eq!(after.slow_completed, before.slow_completed + 1);
}

/// A call past its deadline settles as `tool call timed out` close to the deadline, is metered
/// as a transport failure, and the server is told (`notifications/cancelled`) or sees the
/// connection drop; the slot stays usable. Whether the server's handler actually stops depends
/// on the SDK and mode: see the expectations below.
async fn timeout_then_cancellation(p: &Peer) {
    let ctx = context(p.base_url(), "run-timeout", with_timeout(500));
    let kali = ctx.mcp("kali").unwrap();
    let stats_ctx = context(p.base_url(), "run-timeout-stats", Options::default());
    let stats_slot = stats_ctx.mcp("kali").unwrap();
    // Handshake first, so the deadline covers the slow call only.
    assert!(kali.call("echo", json!({"text": "warm"})).await.ok());
    let before = peer_stats(p, &stats_slot).await;
    let (r, took) = timed(kali.call("slow", json!({"ms": 6000, "steps": 6}))).await;
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert!(
        r.error()
            .is_some_and(|e| e.starts_with("tool call timed out after")),
        "{r:?}"
    );
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(2500),
        "settled after {took:?}"
    );
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 2,
            evidence_bytes: 4
        }
    );
    let ev = ctx.events_of("tool_error");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].value()["error"].as_str(), r.error());
    // What the server did about it.
    let stopped = eventually(Duration::from_secs(4), async || {
        peer_stats(p, &stats_slot).await.slow_interrupted > before.slow_interrupted
    })
    .await;
    // The old era tells the server with notifications/cancelled; in the 2026 era closing the
    // stream is the cancellation, and nothing else is sent.
    if let Some(s) = p.rmcp() {
        let cancels = s.stats().cancelled();
        assert_eq!(
            cancels.is_empty(),
            p.kind.modern(),
            "rmcp's notifications/cancelled at the HTTP layer: {cancels:?}"
        );
    }
    let handler_stops = handler_stops_on_cancel(p.kind);
    assert_eq!(
        stopped, handler_stops,
        "{:?}: slow handler interrupted = {stopped}, expected {handler_stops}",
        p.kind
    );
    // Still usable.
    let r = kali.call("echo", json!({"text": "after"})).await;
    assert!(r.ok() && r.text == "after", "{r:?}");
}

/// Whether the `slow` handler is interrupted once the client gives up (measured, per SDK/mode):
/// with a session the cancellation reaches the handler; without one the server still stops it
/// when the client drops the reply's connection, except Python's stateless JSON mode.
///
/// In the 2026 era (Python, rmcp under `auto`) closing the reply stream is the only cancel:
/// Python's JSON replies then do not stop the handler (measured), its SSE ones do.
fn handler_stops_on_cancel(kind: PeerKind) -> bool {
    match kind {
        PeerKind::PyJson => false,
        PeerKind::TsStateful | PeerKind::TsJson | PeerKind::PyStateful => true,
        PeerKind::RmcpStateful => true,
        PeerKind::PyStateless | PeerKind::RmcpStateless | PeerKind::RmcpJson => true,
        // Python without sessions and with JSON replies: the handler does not notice the
        // dropped connection and runs to its end (measured).
        PeerKind::PyStatelessJson => false,
    }
}

async fn thirty_two_concurrent_calls(p: &Peer) {
    let stats_ctx = context(p.base_url(), "run-concurrent-stats", Options::default());
    let stats_slot = stats_ctx.mcp("kali").unwrap();
    let before = peer_stats(p, &stats_slot).await;
    let ctx = context(p.base_url(), "run-concurrent", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let k = kali.clone();
            smol::spawn(async move {
                let text = format!("concurrent-{i:02}");
                let r = k.call("echo", json!({ "text": text })).await;
                (text, r)
            })
        })
        .collect();
    let mut bytes = 0u64;
    for t in tasks {
        let (text, r) = t.await;
        assert!(r.ok(), "{text}: {r:?}");
        assert_eq!(r.text, text);
        bytes += text.len() as u64;
    }
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 32,
            evidence_bytes: bytes
        }
    );
    let after = peer_stats(p, &stats_slot).await;
    assert_eq!(
        after.initializes - before.initializes,
        if p.kind.modern() { 0 } else { 1 },
        "32 concurrent first calls share one handshake (none in the 2026 era)"
    );
}

/// `Exec` sends `run_command` with the run id as workspace and the clamped timeout, and reports
/// the tool's exit code.
async fn exec_reports_the_tools_exit_code(p: &Peer) {
    let ctx = context(p.base_url(), "run-exec-42", Options::default());
    let exec = verifi_mcp_host::Exec::new(&ctx, "kali").unwrap();
    let r = exec.exec("id; exit 3", 1_000_000).await;
    assert!(r.call.ok(), "the MCP call itself succeeded: {r:?}");
    assert!(!r.ok, "exit 3 is not ok, whatever the MCP call did: {r:?}");
    assert_eq!(r.exit_code, Some(3), "{r:?}");
    assert_eq!(
        r.output, "workspace=run-exec-42 timeout=285\nran: id; exit 3",
        "{r:?}"
    );
    let r = exec.exec("true", 10).await;
    assert!(r.ok && r.exit_code == Some(0), "{r:?}");
    assert_eq!(r.output, "workspace=run-exec-42 timeout=1\nran: true");
}
