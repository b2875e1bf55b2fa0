//! The standalone GET stream of a 2025-era session: a server may send its requests there
//! instead of on the call's stream (the TypeScript SDK's servers do, for a request not tied to
//! one of the client's, and drop it when no GET stream is open). The client opens it before a
//! call goes out, keeps it while calls run, answers what comes on it as on a call's stream
//! (elicitation by the policy or the harness's handler, `ping`, the rest `-32601`), and ends
//! it at `close()`. Against the official TypeScript SDK (the peer's `ask_aside` tool), and the
//! byte-level hostile server for a stream that is refused (405), broken, or sends garbage.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{CHECK_BOUND, Peer, PeerKind, context, mcp_json, run_bounded};
use verifi_mcp_host::{ElicitAnswer, Elicitation, EraSetting, OnElicit, Options};
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Step, http_response, json_response, rpc_result,
};

/// Threads of this process that run a GET stream (named by the adapter).
fn get_stream_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "mcp-get-stream")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits (bounded) until no GET stream thread is left.
fn no_get_stream_left(within: Duration) -> bool {
    let end = Instant::now() + within;
    while get_stream_threads() > 0 {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn the_ts_servers_requests_on_the_get_stream_are_answered() {
    let peer = Peer::start(PeerKind::TsStateful);
    let tail = "ping=ok roots=error -32601";
    for (policy, want) in [
        (
            Elicitation::AcceptDefaults,
            r#"elicit={"action":"accept","content":{"port":443,"ok":true}}"#,
        ),
        (Elicitation::Decline, r#"elicit={"action":"decline"}"#),
        (Elicitation::Cancel, r#"elicit={"action":"cancel"}"#),
    ] {
        // A short deadline: a request nobody hears would hold the call until it.
        let opts = Options::default()
            .timeout_ms(15_000)
            .elicitation(Some(policy));
        let ctx = context(peer.base_url(), "run-get-stream", opts);
        let kali = ctx.mcp("kali").unwrap();
        // Twice: the second call finds the stream open (or opens it again).
        for _ in 0..2 {
            let r = run_bounded(CHECK_BOUND, kali.call("ask_aside", json!({})));
            assert!(r.ok(), "{policy:?}: {r:?}");
            assert_eq!(r.text, format!("{want} {tail}"), "{policy:?}");
        }
        assert_eq!(ctx.ledger().tool_calls, 2, "{policy:?}");
        // close() ends the stream: its thread is gone, nothing left behind.
        run_bounded(CHECK_BOUND, kali.close());
        assert!(
            no_get_stream_left(Duration::from_secs(3)),
            "a GET stream outlived close()"
        );
    }

    // The harness's own handler answers before any policy.
    let handler = OnElicit::new(|params| {
        assert_eq!(params["message"], "Scan which port?");
        ElicitAnswer::Accept(json!({"port": 8443}))
    });
    let opts = Options::default()
        .timeout_ms(15_000)
        .elicitation(Some(Elicitation::Decline))
        .on_elicit(Some(handler));
    let ctx = context(peer.base_url(), "run-get-stream-handler", opts);
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(CHECK_BOUND, kali.call("ask_aside", json!({})));
    assert!(r.ok(), "{r:?}");
    assert_eq!(
        r.text,
        format!(r#"elicit={{"action":"accept","content":{{"port":8443}}}} {tail}"#)
    );
    // With no call in flight the stream ends by itself, soon after the last call.
    assert!(
        no_get_stream_left(Duration::from_secs(6)),
        "a GET stream was kept with no call in flight"
    );
    run_bounded(CHECK_BOUND, kali.close());

    // The command line.
    let (code, v) = mcp_json(&[
        "call",
        peer.base_url(),
        "ask_aside",
        "--elicitation",
        "accept-defaults",
        "--timeout-ms",
        "15000",
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        v["text"],
        format!(r#"elicit={{"action":"accept","content":{{"port":443,"ok":true}}}} {tail}"#)
    );
}

// ---- a hostile server's GET stream ---------------------------------------------------------

const SESSION: &str = "sess-get-1";

/// Answers `initialize` with a session id, notifications with 202, `tools/list` with one tool
/// (`scan`), `tools/call` with `done`
/// (after `call_delay`), a JSON-RPC response the client POSTs with 202, and a GET with `get`.
fn responder(get: Arc<dyn Fn() -> Vec<u8> + Send + Sync>, call_delay: Duration) -> Step {
    Step::SendWith(Arc::new(move |req: &Request| {
        if req.request_line().starts_with("GET ") {
            return get();
        }
        match req.method().as_deref() {
            Some("initialize") => http_response(
                200,
                &[
                    ("content-type", "application/json"),
                    ("mcp-session-id", SESSION),
                ],
                rpc_result(
                    req,
                    r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"0"}}"#,
                )
                .as_bytes(),
            ),
            Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
            // Read for the tools that run only as tasks (2025-11-25).
            Some("tools/list") => json_response(&rpc_result(
                req,
                r#"{"tools":[{"name":"scan","inputSchema":{"type":"object"}}]}"#,
            )),
            Some("tools/call") => {
                std::thread::sleep(call_delay);
                json_response(&rpc_result(
                    req,
                    r#"{"content":[{"type":"text","text":"done"}]}"#,
                ))
            }
            // The client's answer to a request of ours.
            None if req.json().is_some_and(|j| j.get("id").is_some()) => {
                http_response(202, &[], b"")
            }
            _ => http_response(400, &[], b"unexpected request"),
        }
    }))
}

/// A server whose every connection serves requests with `responder` until the client closes
/// it (a GET answered with a stream head stays open: the next read waits for the client).
fn hostile(
    get: impl Fn() -> Vec<u8> + Send + Sync + 'static,
    call_delay: Duration,
) -> HostileServer {
    let respond = responder(Arc::new(get), call_delay);
    HostileServer::every_connection(
        std::iter::repeat_n([Step::ReadRequest, respond], 32)
            .flatten()
            .collect(),
    )
    .expect("hostile server")
}

fn gets(server: &HostileServer) -> Vec<Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.request_line().starts_with("GET "))
        .collect()
}

/// Three calls in a row: each must succeed, whatever the GET stream does.
fn three_calls(server: &HostileServer) {
    // The handshake era (the hostile server knows no `server/discover`).
    let opts = Options::default()
        .timeout_ms(10_000)
        .era(EraSetting::Legacy)
        .elicitation(Some(Elicitation::AcceptDefaults));
    let ctx = context(&server.base_url(), "run-hostile-get", opts);
    let kali = ctx.mcp("kali").unwrap();
    for i in 0..3 {
        let r = run_bounded(CHECK_BOUND, kali.call("scan", json!({})));
        assert!(r.ok() && r.text == "done", "call {i}: {r:?}");
    }
    run_bounded(CHECK_BOUND, kali.close());
    assert!(
        no_get_stream_left(Duration::from_secs(3)),
        "a GET stream outlived close()"
    );
}

#[test]
fn a_405_means_no_get_stream_and_is_not_asked_again() {
    // 405 is the spec's "none here"; another client error says the same for the session.
    for status in [405, 400, 403] {
        let server = hostile(move || http_response(status, &[], b""), Duration::ZERO);
        three_calls(&server);
        let gets = gets(&server);
        assert_eq!(gets.len(), 1, "{status}: asked again: {gets:?}");
        // The GET is the session's: its id, and it asks for an event stream.
        assert_eq!(gets[0].header("mcp-session-id").as_deref(), Some(SESSION));
        assert_eq!(
            gets[0].header("accept").as_deref(),
            Some("text/event-stream")
        );
        assert_eq!(
            gets[0].header("mcp-protocol-version").as_deref(),
            Some("2025-11-25")
        );
    }
}

#[test]
fn a_get_stream_that_sends_garbage_or_ends_fails_no_call() {
    for (name, get) in [
        (
            "garbage head",
            (|| b"NOT HTTP AT ALL\r\n\r\n\x00\xff".to_vec()) as fn() -> Vec<u8>,
        ),
        ("html", || {
            http_response(200, &[("content-type", "text/html")], b"<html>")
        }),
        ("ends at once", || {
            http_response(200, &[("content-type", "text/event-stream")], b": bye\n\n")
        }),
        ("garbage events", || {
            let mut b = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
            b.extend_from_slice(
                b"data: {not json\n\ndata: [1,2\n\nevent: message\ndata: \"x\"\n\n",
            );
            b
        }),
    ] {
        // Each call takes a while, so a broken stream is seen while it is in flight.
        let server = hostile(get, Duration::from_millis(200));
        three_calls(&server);
        let gets = gets(&server).len();
        // Opened by the first call; reopened at most once per call after that.
        assert!((1..=6).contains(&gets), "{name}: {gets} GETs for 3 calls");
    }
}

#[test]
fn an_elicitation_on_a_hostile_get_stream_is_answered_in_the_session() {
    // The GET stream asks once, then stays open; the call's reply comes a little later.
    let server = hostile(
        || {
            let mut b = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
            b.extend_from_slice(
                br#"event: message
data: {"jsonrpc":"2.0","id":"e-1","method":"elicitation/create","params":{"message":"Port?","requestedSchema":{"type":"object","properties":{"port":{"type":"integer","default":443},"who":{"type":"string"}},"required":["port"]}}}

data: {"jsonrpc":"2.0","id":7,"method":"ping"}

data: {"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{}}

"#,
            );
            b
        },
        Duration::from_millis(500),
    );
    three_calls(&server);
    let answers: Vec<serde_json::Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.method().is_none() && r.request_line().starts_with("POST "))
        .inspect(|r| {
            assert_eq!(
                r.header("mcp-session-id").as_deref(),
                Some(SESSION),
                "{r:?}"
            );
        })
        .filter_map(|r| r.json())
        .collect();
    let by_id = |id: serde_json::Value| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
            .clone()
    };
    assert_eq!(
        by_id(json!("e-1"))["result"],
        json!({"action": "accept", "content": {"port": 443}})
    );
    assert_eq!(by_id(json!(7))["result"], json!({}));
    assert_eq!(by_id(json!(8))["error"]["code"], json!(-32601));
}
