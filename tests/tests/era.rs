//! The 2026-07-28 era and the era probe over real TCP: against the real Python SDK 2.3 server
//! (an `x-mcp-header` parameter it checks), the real rmcp 3.11 server (many concurrent calls
//! share one probe and one tool list), a byte-level modern-only server (no flag needed), and the
//! probe's traps (auth, server errors, resets, empty answers, silence), which must fail the
//! call naming what happened and never send `initialize` or a `tools/call`.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{CHECK_BOUND, Peer, PeerKind, context, run_bounded, with_timeout};
use verifi_mcp_host::{EraSetting, Options};
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Responder, Step, http_response, json_response, rpc_result,
};
use verifi_mcp_tests::{Mode, TestServer};

/// A modern-only server: answers `server/discover`, `tools/list` and `tools/call` as the 2026
/// era does, and refuses `initialize` (HTTP 400, `-32601`) like a server without the old era.
fn modern_only(req: &Request) -> Vec<u8> {
    let modern = req.header("mcp-protocol-version").as_deref() == Some("2026-07-28");
    match req.method().as_deref() {
        Some("server/discover") if modern => json_response(&rpc_result(
            req,
            r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"resultType":"complete"}"#,
        )),
        Some("tools/list") if modern => json_response(&rpc_result(
            req,
            r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"resultType":"complete"}"#,
        )),
        Some("tools/call") if modern && req.header("mcp-name").as_deref() == Some("echo") => {
            json_response(&rpc_result(
                req,
                r#"{"content":[{"type":"text","text":"modern only"}],"resultType":"complete"}"#,
            ))
        }
        _ => http_response(
            400,
            &[("content-type", "application/json")],
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}"#,
        ),
    }
}

fn serve_forever(responder: fn(&Request) -> Vec<u8>) -> HostileServer {
    HostileServer::start(move |_| {
        let mut steps = Vec::new();
        for _ in 0..16 {
            steps.push(Step::ReadRequest);
            steps.push(Step::SendWith(std::sync::Arc::new(responder)));
        }
        steps
    })
    .expect("server")
}

#[test]
fn a_modern_only_server_works_with_no_flag_from_the_library_and_the_command_line() {
    let server = serve_forever(modern_only);
    let ctx = context(&server.base_url(), "run-modern-only", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(CHECK_BOUND, kali.call("echo", json!({"text": "x"})));
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "modern only");
    let methods: Vec<String> = server
        .requests()
        .iter()
        .filter_map(|r| r.method())
        .collect();
    assert_eq!(methods, ["server/discover", "tools/list", "tools/call"]);
    let eras = ctx.events_of("mcp.era");
    assert_eq!(eras.len(), 1);
    assert_eq!(eras[0].value()["era"], "2026-07-28");

    let out = support::mcp_command()
        .args(["call", &server.base_url(), "echo", r#"{"text":"y"}"#])
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["text"], "modern only");
    // --era legacy never probes: the modern-only server refuses initialize, and the error
    // names the status.
    let out = support::mcp_command()
        .args(["call", &server.base_url(), "echo", "--era", "legacy"])
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["error"].as_str().unwrap_or("").contains("400"), "{v}");
}

#[test]
fn probe_traps_fail_the_call_naming_them_and_never_run_a_tool() {
    let cases: Vec<(&str, Vec<Step>, &str)> = vec![
        (
            "401",
            vec![
                Step::ReadRequest,
                Step::Send(http_response(401, &[("www-authenticate", "Bearer")], b"")),
            ],
            "HTTP 401",
        ),
        (
            "403",
            vec![
                Step::ReadRequest,
                Step::Send(http_response(403, &[], b"no")),
            ],
            "HTTP 403",
        ),
        (
            "500",
            vec![
                Step::ReadRequest,
                Step::Send(http_response(500, &[], b"boom")),
            ],
            "HTTP 500",
        ),
        ("reset", vec![Step::ReadRequest, Step::Close], ""),
        (
            "empty 200",
            vec![Step::ReadRequest, Step::Send(http_response(200, &[], b""))],
            "",
        ),
        (
            "silence",
            vec![Step::ReadRequest, Step::Hold(Duration::from_secs(5))],
            "tool call timed out",
        ),
    ];
    for (name, script, says) in cases {
        let server = HostileServer::start(move |_| script.clone()).expect("server");
        let ctx = context(&server.base_url(), "run-trap", with_timeout(1_000));
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(CHECK_BOUND, kali.call("echo", json!({"text": "x"})));
        assert!(!r.ok() && !r.is_error(), "{name}: {r:?}");
        let error = r.error().map(str::to_owned).unwrap_or_default();
        assert!(error.contains(says), "{name}: {error}");
        let methods: Vec<String> = server
            .requests()
            .iter()
            .filter_map(|r| r.method())
            .collect();
        assert_eq!(
            methods,
            ["server/discover"],
            "{name}: a probe, nothing else"
        );
        assert!(ctx.events_of("mcp.era").is_empty(), "{name}: no verdict");
        assert_eq!(ctx.events_of("tool_error").len(), 1, "{name}");
    }
}

#[test]
fn sixty_four_concurrent_calls_share_one_probe_and_one_tool_list() {
    for mode in Mode::ALL {
        let server = TestServer::start(mode).unwrap();
        let ctx = context(&server.base_url(), "run-64", Options::default());
        let kali = ctx.mcp("kali").unwrap();
        let ex = smol::Executor::new();
        let results = smol::block_on(ex.run(async {
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let kali = kali.clone();
                    ex.spawn(
                        async move { kali.call("echo", json!({ "text": format!("n{i}") })).await },
                    )
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await);
            }
            out
        }));
        for (i, r) in results.iter().enumerate() {
            assert!(r.ok() && r.text == format!("n{i}"), "{mode:?} #{i}: {r:?}");
        }
        let st = server.stats();
        assert_eq!(
            st.initializes(),
            0,
            "{mode:?}: the 2026 era has no handshake"
        );
        assert_eq!(
            st.http_requests(),
            64 + 2,
            "{mode:?}: one server/discover, one tools/list, 64 calls"
        );
        assert_eq!(ctx.events_of("mcp.era").len(), 1, "{mode:?}");
    }
}

#[test]
fn forced_legacy_against_a_dual_era_server_never_probes() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let ctx = context(
        &server.base_url(),
        "run-legacy",
        Options::default().era(EraSetting::Legacy),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("echo", json!({"text": "old"})),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(server.stats().initializes(), 1);
    assert!(
        ctx.events_of("mcp.era").is_empty(),
        "forced: no probe, no verdict"
    );
}

/// The real Python SDK server checks `x-mcp-header` parameters: without the header a call with
/// the argument is refused (`-32020`). The client learns the annotation from `tools/list` and
/// mirrors the argument, base64-encoded when it is not header-safe.
#[test]
fn the_python_server_gets_its_x_mcp_header_parameter() {
    let peer = Peer::start(PeerKind::PyStateful);
    let ctx = context(peer.base_url(), "run-header", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    for region in ["eu-west", "Zürich "] {
        let r = run_bounded(
            CHECK_BOUND,
            kali.call("regional", json!({"text": "hi", "region": region})),
        );
        assert!(r.ok(), "{region:?}: {r:?}");
        assert_eq!(r.text, format!("hi @ {region}"));
    }
    let eras = ctx.events_of("mcp.era");
    assert_eq!(eras.len(), 1);
    assert_eq!(eras[0].value()["era"], "2026-07-28");
}

/// A tool's schema may point anywhere with `$ref`; the client never dereferences it (the list
/// and the call of that tool make no connection but to the server itself).
#[test]
fn a_network_ref_in_a_tool_schema_is_never_fetched() {
    use std::net::TcpListener;
    use std::sync::OnceLock;
    static TRAP: OnceLock<String> = OnceLock::new();
    let trap = TcpListener::bind("127.0.0.1:0").expect("bind the trap");
    trap.set_nonblocking(true).expect("nonblocking");
    TRAP.set(format!("http://{}/schema.json", trap.local_addr().unwrap()))
        .unwrap();
    fn responder(req: &Request) -> Vec<u8> {
        let trap = TRAP.get().map(String::as_str).unwrap_or("");
        match req.method().as_deref() {
            Some("server/discover") => json_response(&rpc_result(
                req,
                r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}"#,
            )),
            Some("tools/list") => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"tools":[{{"name":"scan","inputSchema":{{"type":"object","properties":{{"target":{{"$ref":"{trap}"}},"region":{{"type":"string","x-mcp-header":"Region"}}}},"$defs":{{"x":{{"$ref":"{trap}#/x"}}}}}}}}],"resultType":"complete"}}"#
                ),
            )),
            Some("tools/call") => json_response(&rpc_result(
                req,
                r#"{"content":[{"type":"text","text":"scanned"}],"resultType":"complete"}"#,
            )),
            _ => http_response(400, &[], b""),
        }
    }
    let server = serve_forever(responder);
    let ctx = context(&server.base_url(), "run-ref", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let tools = run_bounded(CHECK_BOUND, kali.list_tools_described()).expect("tools/list");
    assert_eq!(tools.len(), 1);
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("scan", json!({"target": "10.0.0.1", "region": "eu"})),
    );
    assert!(r.ok(), "{r:?}");
    let accepted = std::iter::from_fn(|| trap.accept().ok()).count();
    assert_eq!(accepted, 0, "the $ref was fetched");
}

/// One HTTP/1.1 chunk of `text`.
fn chunk(text: &str) -> String {
    format!("{:x}\r\n{text}\r\n", text.len())
}

/// Issue 27, item 1: an old-era server that answers every method, `server/discover` included,
/// with `200 {"result":{}}` and a session id (the official conformance suite's `sse-retry`
/// server) is old era: the call goes out after `initialize`, and when its reply stream ends
/// after a priming event it is resumed with GET and `Last-Event-ID` after the server's `retry`.
#[test]
fn a_server_that_answers_discover_with_an_empty_result_is_old_era_and_its_stream_resumes() {
    use std::sync::{Arc, Mutex};
    let pending: Arc<Mutex<Option<String>>> = Arc::default();
    let responder: Responder = {
        let pending = pending.clone();
        Arc::new(move |req: &Request| -> Vec<u8> {
            let session = [
                ("content-type", "application/json"),
                ("mcp-session-id", "legacy-1"),
            ];
            if req.request_line().starts_with("GET") {
                // The resumed stream: a priming event, then the call's response; it stays open.
                let id = pending
                    .lock()
                    .unwrap()
                    .take()
                    .unwrap_or_else(|| "null".into());
                let body = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: legacy-1\r\ntransfer-encoding: chunked\r\n\r\n{}{}",
                    chunk("id: event-2\nretry: 100\ndata: \n\n"),
                    chunk(&format!(
                        "event: message\nid: event-3\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"resumed\"}}]}}}}\n\n"
                    )),
                );
                return body.into_bytes();
            }
            match req.method().as_deref() {
                Some("initialize") => http_response(
                    200,
                    &session,
                    rpc_result(
                        req,
                        r#"{"protocolVersion":"2025-11-25","serverInfo":{"name":"sse-retry","version":"1"},"capabilities":{"tools":{}}}"#,
                    )
                    .as_bytes(),
                ),
                Some("tools/list") => http_response(
                    200,
                    &session,
                    rpc_result(
                        req,
                        r#"{"tools":[{"name":"test_reconnection","inputSchema":{"type":"object","properties":{}}}]}"#,
                    )
                    .as_bytes(),
                ),
                Some("tools/call") => {
                    // A priming event, then the stream ends cleanly without the response.
                    *pending.lock().unwrap() = req.id_json();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: legacy-1\r\ntransfer-encoding: chunked\r\n\r\n{}0\r\n\r\n",
                        chunk("id: event-1\nretry: 100\ndata: \n\n")
                    )
                    .into_bytes()
                }
                _ if req.id_json().is_none() => http_response(202, &[], b""),
                // Anything else with an id, `server/discover` included: an empty result.
                _ => http_response(200, &session, rpc_result(req, "{}").as_bytes()),
            }
        })
    };
    let server = HostileServer::start(move |_| {
        let mut steps = Vec::new();
        for _ in 0..16 {
            steps.push(Step::ReadRequest);
            steps.push(Step::SendWith(responder.clone()));
        }
        steps
    })
    .expect("server");
    let ctx = context(&server.base_url(), "run-sse-retry", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(CHECK_BOUND, kali.call("test_reconnection", json!({})));
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "resumed");
    let requests = server.requests();
    let methods: Vec<String> = requests
        .iter()
        .map(|r| {
            r.method()
                .unwrap_or_else(|| r.request_line().split(' ').next().unwrap_or("").into())
        })
        .collect();
    assert_eq!(methods[0], "server/discover");
    assert_eq!(methods[1], "initialize", "{methods:?}");
    assert!(
        methods.ends_with(&["tools/call".into(), "GET".into()]),
        "{methods:?}"
    );
    let get = requests.last().unwrap();
    assert_eq!(get.header("last-event-id").as_deref(), Some("event-1"));
    let eras = ctx.events_of("mcp.era");
    assert_eq!(eras.len(), 1);
    assert_ne!(
        eras[0].value()["era"],
        "2026-07-28",
        "{:?}",
        eras[0].value()
    );
}

/// Issue 27, item 3, on the wire: a tool whose annotated property is `number`-typed is never
/// called (the official `invalid_number_header` check), and a property reached through nested
/// `properties` (`opts.zone`) is mirrored as its header from that path of the arguments.
#[test]
fn a_number_header_tool_is_refused_and_a_nested_header_is_mirrored() {
    fn responder(req: &Request) -> Vec<u8> {
        match req.method().as_deref() {
            Some("server/discover") => json_response(&rpc_result(
                req,
                r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}"#,
            )),
            Some("tools/list") => json_response(&rpc_result(
                req,
                r#"{"tools":[{"name":"invalid_number_header","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}},{"name":"zoned","inputSchema":{"type":"object","properties":{"opts":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}}],"resultType":"complete"}"#,
            )),
            Some("tools/call") => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"content":[{{"type":"text","text":"zone={}"}}],"resultType":"complete"}}"#,
                    req.header("mcp-param-zone").unwrap_or_default()
                ),
            )),
            _ => http_response(400, &[], b""),
        }
    }
    let server = serve_forever(responder);
    let ctx = context(&server.base_url(), "run-headers", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("invalid_number_header", json!({"n": 1.5})),
    );
    assert!(!r.ok(), "{r:?}");
    assert!(r.error().unwrap_or("").contains("x-mcp-header"), "{r:?}");
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("zoned", json!({"opts": {"zone": "eu-west"}})),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "zone=eu-west");
    let called: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.method().as_deref() == Some("tools/call"))
        .filter_map(|r| r.header("mcp-name"))
        .collect();
    assert_eq!(called, ["zoned"], "the number-typed tool is never called");
}

/// Issue 27, item 4, on the wire: during a rolling upgrade one instance answers a call with
/// `-32022` listing our own version too: the call goes once more under a new id and succeeds;
/// a server that refuses every time fails the call after two, naming both lists.
#[test]
fn an_unsupported_version_is_retried_once_with_a_new_id_then_names_both_lists() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static REFUSALS: AtomicUsize = AtomicUsize::new(0);
    fn responder(req: &Request) -> Vec<u8> {
        match req.method().as_deref() {
            Some("server/discover") => json_response(&rpc_result(
                req,
                r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}"#,
            )),
            Some("tools/list") => json_response(&rpc_result(
                req,
                r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"resultType":"complete"}"#,
            )),
            Some("tools/call") if REFUSALS.fetch_sub(1, Ordering::SeqCst) > 0 => http_response(
                400,
                &[("content-type", "application/json")],
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32022,"message":"Unsupported protocol version","data":{{"supported":["2025-11-25","2026-07-28"],"requested":"2026-07-28"}}}}}}"#,
                    req.id_json().unwrap_or_default()
                )
                .as_bytes(),
            ),
            Some("tools/call") => json_response(&rpc_result(
                req,
                r#"{"content":[{"type":"text","text":"upgraded"}],"resultType":"complete"}"#,
            )),
            _ => http_response(400, &[], b""),
        }
    }
    for refusals in [1, 2] {
        REFUSALS.store(refusals, Ordering::SeqCst);
        let server = serve_forever(responder);
        let ctx = context(&server.base_url(), "run-32022", Options::default());
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(CHECK_BOUND, kali.call("echo", json!({})));
        let calls: Vec<String> = server
            .requests()
            .iter()
            .filter(|r| r.method().as_deref() == Some("tools/call"))
            .filter_map(|r| r.id_json())
            .collect();
        assert_eq!(calls.len(), 2, "{refusals}: {calls:?}");
        assert_ne!(calls[0], calls[1], "a new id");
        if refusals == 1 {
            assert!(r.ok(), "{r:?}");
            assert_eq!(r.text, "upgraded");
        } else {
            assert!(!r.ok(), "{r:?}");
            let error = r.error().map(str::to_owned).unwrap_or_default();
            assert!(
                error.contains("[2025-11-25, 2026-07-28]") && error.contains("[2026-07-28]"),
                "{error}"
            );
        }
    }
}

/// Issue 27, item 5, in the 2026 era on the wire: a `tools/call` whose reply is cut in the
/// middle of its body is `ok: false` saying the tool may have run, and is not sent again.
#[test]
fn a_2026_reply_cut_mid_body_says_the_tool_may_have_run_and_is_not_resent() {
    fn responder(req: &Request) -> Vec<u8> {
        match req.method().as_deref() {
            Some("server/discover") => json_response(&rpc_result(
                req,
                r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}"#,
            )),
            Some("tools/list") => json_response(&rpc_result(
                req,
                r#"{"tools":[{"name":"scan","inputSchema":{"type":"object"}}],"resultType":"complete"}"#,
            )),
            Some("tools/call") => {
                let full = json_response(&rpc_result(
                    req,
                    r#"{"content":[{"type":"text","text":"a long scan result"}],"resultType":"complete"}"#,
                ));
                full[..full.len() - 20].to_vec()
            }
            _ => http_response(400, &[], b""),
        }
    }
    let server = HostileServer::start(|_| {
        let mut steps = Vec::new();
        for _ in 0..8 {
            steps.push(Step::ReadRequest);
            steps.push(Step::SendWith(std::sync::Arc::new(responder)));
            steps.push(Step::CloseIf(std::sync::Arc::new(|r: &Request| {
                r.method().as_deref() == Some("tools/call")
            })));
        }
        steps
    })
    .expect("server");
    let ctx = context(&server.base_url(), "run-cut", Options::default());
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali").unwrap().call("scan", json!({})),
    );
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    let error = r.error().map(str::to_owned).unwrap_or_default();
    assert!(error.contains("may have run"), "{error}");
    let calls = server
        .requests()
        .iter()
        .filter(|r| r.method().as_deref() == Some("tools/call"))
        .count();
    assert_eq!(calls, 1, "never sent again");
    assert_eq!(
        ctx.events_of("mcp.era")[0].value()["era"],
        "2026-07-28",
        "spoken in the 2026 era"
    );
}

/// Issue 27, item 12: the library's default has no idle timeout (a call's deadline bounds it).
#[test]
fn no_idle_timeout_by_default() {
    assert_eq!(Options::default().idle_timeout_ms, None);
}
