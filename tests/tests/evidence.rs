//! What a run keeps and passes on besides tool results (issue 28 items 4-6), against a
//! byte-level server that records every request: W3C trace context in every request's
//! `_meta` (SEP-414) in both eras, from the library and the command line; the server's log
//! messages kept in the run log (and printed by the command line) at or above a level;
//! URL-mode elicitation (declared for a handler that takes URLs, the URL handed to it, and a
//! `-32042` refusal that names the URL a person must open).

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::{CHECK_BOUND, context, run_bounded};
use verifi_mcp_host::{ElicitAnswer, EraSetting, Kind, LogLevel, OnElicit, Options};
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Step, http_response, json_response, rpc_result, sse_response,
};

const OLD: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// A server of one era: the 2026 one answers `server/discover`; the old one refuses it and
/// answers `initialize`. Both list one tool, `echo`, and answer its calls and `ping`.
fn server_of(modern: bool) -> HostileServer {
    // Set when the client answered the URL elicitation of `asks_url` (on another connection).
    let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_answer = answered.clone();
    let responder = Arc::new(move |req: &Request| {
        let complete = if modern {
            r#","resultType":"complete""#
        } else {
            ""
        };
        match req.method().as_deref() {
            Some("server/discover") if modern => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"supportedVersions":["{MODERN}"],"capabilities":{{"tools":{{}}}}{complete}}}"#
                ),
            )),
            Some("initialize") if !modern => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"protocolVersion":"{OLD}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"hostile","version":"0"}}}}"#
                ),
            )),
            Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
            Some("tools/list") => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"tools":[{}]{complete}}}"#,
                    ["echo", "noisy", "needs_url", "asks_url"]
                        .map(|t| format!(r#"{{"name":"{t}","inputSchema":{{"type":"object"}}}}"#))
                        .join(",")
                ),
            )),
            Some("tools/call") if req.json().unwrap()["params"]["name"] == "noisy" => {
                sse_response(&noisy_events(req, complete))
            }
            Some("tools/call") if req.json().unwrap()["params"]["name"] == "needs_url" => {
                json_response(&format!(
                    r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32042,"message":"This request requires more information.","data":{{"elicitations":[{{"mode":"url","elicitationId":"e-1","url":"{CONSENT_URL}","message":"Authorize access to your files."}}]}}}}}}"#,
                    req.id_json().unwrap()
                ))
            }
            Some("tools/call") if req.json().unwrap()["params"]["name"] == "asks_url" => {
                // The request for input; the result follows once it is answered (`tail`).
                sse_response(&format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"id\":\"s-1\",\"method\":\"elicitation/create\",\"params\":{{\"mode\":\"url\",\"elicitationId\":\"e-2\",\"url\":\"{CONSENT_URL}\",\"message\":\"Sign in\"}}}}\n\n"
                ))
            }
            Some("tools/call") => json_response(&rpc_result(
                req,
                &format!(r#"{{"content":[{{"type":"text","text":"echoed"}}]{complete}}}"#),
            )),
            // The client's answer to a server's request.
            None if req.json().is_some_and(|v| v.get("result").is_some()) => {
                seen_answer.store(true, std::sync::atomic::Ordering::SeqCst);
                http_response(202, &[], b"")
            }
            Some("ping") => json_response(&rpc_result(req, "{}")),
            _ => http_response(
                400,
                &[("content-type", "application/json")],
                br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}"#,
            ),
        }
    });
    // After `asks_url`'s request for input: its result, once the client answered (nothing
    // after any other reply).
    let tail: verifi_mcp_tests::hostile::Responder = Arc::new(move |req: &Request| {
        if req.json().is_none_or(|v| v["params"]["name"] != "asks_url") {
            return Vec::new();
        }
        for _ in 0..500 {
            if answered.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"signed\"}}]}}}}\n\n",
            req.id_json().unwrap()
        )
        .into_bytes()
    });
    HostileServer::start(move |_| {
        let mut steps = Vec::new();
        for _ in 0..32 {
            steps.push(Step::ReadRequest);
            steps.push(Step::SendWith(responder.clone()));
            steps.push(Step::SendWith(tail.clone()));
        }
        steps
    })
    .expect("server")
}

/// The URL a server wants a person to open.
const CONSENT_URL: &str = "https://auth.example.test/consent?session=9";

/// A secret of the run that a server's log message repeats.
const SECRET: &str = "hunter2-secret-value";

/// The call's stream of the tool `noisy`: a progress notification, log messages at `info`,
/// `warning` (with the run's secret in it) and `error` (JSON data, a logger), then the result.
fn noisy_events(req: &Request, complete: &str) -> String {
    let id = req.id_json().unwrap();
    let note = |params: &str| {
        format!("data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/{params}}}\n\n")
    };
    [
        note(r#"progress","params":{"progressToken":1,"progress":1,"message":"half way"}"#),
        note(r#"message","params":{"level":"info","data":"chatty detail"}"#),
        note(&format!(
            r#"message","params":{{"level":"warning","data":"disk almost full, token {SECRET}"}}"#
        )),
        note(r#"message","params":{"level":"error","logger":"db","data":{"code":7,"msg":"lost"}}"#),
        format!(
            "data: {}\n\n",
            format_args!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]{complete}}}}}"#
            )
        ),
    ]
    .concat()
}

/// The `_meta.traceparent` of every request (a JSON-RPC message with an id and a method) the
/// server got, with its method; panics naming a request without one.
fn traceparents(server: &HostileServer) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for r in server.requests() {
        let Some(v) = r.json() else { continue };
        let (Some(method), Some(_)) = (v["method"].as_str(), v.get("id")) else {
            continue;
        };
        let parent = v["params"]["_meta"]["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} has no _meta.traceparent: {v}"));
        out.push((method.to_owned(), parent.to_owned()));
    }
    out
}

/// `00-<32 hex>-<16 hex>-<2 hex>`, lower case, ids not all zeros: the trace id.
fn well_formed(parent: &str) -> String {
    let parts: Vec<&str> = parent.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    assert!(
        parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && hex(parts[3], 2)
            && parts[1].bytes().any(|b| b != b'0')
            && parts[2].bytes().any(|b| b != b'0'),
        "not a well-formed traceparent: {parent}"
    );
    parts[1].to_owned()
}

/// Calls `echo` twice and pings, then checks every request's trace context: one trace id
/// (returned), well formed, a span id per request.
fn run_and_check(modern: bool, options: Options) -> (String, Vec<Value>) {
    let server = server_of(modern);
    let ctx = context(&server.base_url(), "run-trace", options);
    let kali = ctx.mcp("kali").unwrap();
    for _ in 0..2 {
        let r = run_bounded(CHECK_BOUND, kali.call("echo", json!({"text": "x"})));
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.text, "echoed");
    }
    assert!(run_bounded(CHECK_BOUND, kali.ping()).is_ok());
    let parents = traceparents(&server);
    let methods: Vec<&str> = parents.iter().map(|(m, _)| m.as_str()).collect();
    // The probe (`server/discover`) first; then `initialize` exactly in the old era.
    assert_eq!(methods.first(), Some(&"server/discover"), "{methods:?}");
    assert_eq!(methods.contains(&"initialize"), !modern, "{methods:?}");
    assert_eq!(
        methods.iter().filter(|m| **m == "tools/call").count(),
        2,
        "{methods:?}"
    );
    let ids: Vec<String> = parents.iter().map(|(_, p)| well_formed(p)).collect();
    assert!(
        ids.iter().all(|i| *i == ids[0]),
        "one trace per run: {parents:?}"
    );
    assert_eq!(ids[0], ctx.trace_id());
    let mut spans: Vec<&str> = parents.iter().map(|(_, p)| &p[36..52]).collect();
    spans.sort_unstable();
    spans.dedup();
    assert_eq!(
        spans.len(),
        parents.len(),
        "a span per request: {parents:?}"
    );
    let metas = server
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .map(|v| v["params"]["_meta"].clone())
        .collect();
    (ids[0].clone(), metas)
}

#[test]
fn every_request_of_a_run_carries_one_trace_in_both_eras() {
    for (modern, era) in [(false, EraSetting::Auto), (true, EraSetting::Auto)] {
        let (a, _) = run_and_check(modern, Options::default().era(era));
        let (b, _) = run_and_check(modern, Options::default().era(era));
        assert_ne!(a, b, "a new trace per context when none is given");
    }
}

#[test]
fn the_harness_trace_parent_and_state_are_honoured() {
    let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for modern in [false, true] {
        let options = Options::default()
            .trace_parent(Some(given.into()))
            .trace_state(Some("vendor=opaque".into()));
        let (id, metas) = run_and_check(modern, options);
        assert_eq!(id, "4bf92f3577b34da6a3ce929d0e0e4736");
        for m in metas.iter().filter(|m| m.get("traceparent").is_some()) {
            assert_eq!(m["tracestate"], "vendor=opaque", "{m}");
            assert!(m["traceparent"].as_str().unwrap().ends_with("-01"), "{m}");
            // The harness's span is the parent: each request is a span of its own.
            assert_ne!(m["traceparent"], given, "{m}");
        }
    }
    // A value that is not a traceparent is not sent: a new trace, and the run log says so.
    let server = server_of(false);
    let ctx = context(
        &server.base_url(),
        "run-bad-trace",
        Options::default().trace_parent(Some("00-nothex-01".into())),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali").unwrap().call("echo", json!({})),
    );
    assert!(r.ok(), "{r:?}");
    assert!(
        ctx.log_lines()
            .iter()
            .any(|l| l.contains("traceparent is not well formed")),
        "{:?}",
        ctx.log_lines()
    );
    for (_, p) in traceparents(&server) {
        assert_eq!(well_formed(&p), ctx.trace_id());
    }
}

#[test]
fn the_command_line_takes_traceparent_from_the_environment() {
    let server = server_of(false);
    let out = support::mcp_command()
        .args(["call", &server.base_url(), "echo", r#"{"text":"y"}"#])
        .env(
            "TRACEPARENT",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .env("TRACESTATE", "congo=t61rcWkgMzE")
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let parents = traceparents(&server);
    assert!(
        parents.iter().any(|(m, _)| m == "tools/call"),
        "{parents:?}"
    );
    for (_, p) in &parents {
        assert_eq!(well_formed(p), "0af7651916cd43dd8448eb211c80319c");
    }
    let states: Vec<Value> = server
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|v| v.get("id").is_some() && v.get("method").is_some())
        .map(|v| v["params"]["_meta"]["tracestate"].clone())
        .collect();
    assert!(
        states.iter().all(|s| s == "congo=t61rcWkgMzE"),
        "{states:?}"
    );
}

#[test]
fn server_log_messages_at_or_above_the_level_are_kept_redacted_in_the_run_log() {
    for modern in [false, true] {
        for (level, kept) in [
            (None, vec!["warning", "error"]),
            (Some(LogLevel::Error), vec!["error"]),
            (Some(LogLevel::Debug), vec!["info", "warning", "error"]),
        ] {
            let server = server_of(modern);
            let mut options = Options::default().secrets(Some(vec![SECRET.into()]));
            if let Some(level) = level {
                options = options.server_log_level(level);
            }
            let ctx = context(&server.base_url(), "run-logs", options);
            let r = run_bounded(
                CHECK_BOUND,
                ctx.mcp("kali").unwrap().call("noisy", json!({})),
            );
            assert!(r.ok(), "{r:?}");
            assert_eq!(r.text, "done");
            let logs: Vec<String> = ctx
                .log_lines()
                .into_iter()
                .filter(|l| l.starts_with("log: "))
                .collect();
            let levels: Vec<&str> = logs
                .iter()
                .map(|l| l.split(['[', ']']).nth(1).unwrap_or(""))
                .collect();
            assert_eq!(levels, kept, "modern {modern}: {logs:?}");
            let all = logs.join("\n");
            assert!(!all.contains(SECRET), "{all}");
            assert!(!all.contains("half way"), "progress stays progress: {all}");
            if kept.contains(&"warning") {
                assert!(
                    logs.iter()
                        .any(|l| l
                            == "log: [warning] kali/noisy: disk almost full, token [REDACTED]"),
                    "{logs:?}"
                );
            }
            assert!(
                logs.iter()
                    .any(|l| l == r#"log: [error] kali/noisy (db): {"code":7,"msg":"lost"}"#),
                "{logs:?}"
            );
            // The 2026 era asks for them on the call, at the level kept.
            let call = server
                .requests()
                .into_iter()
                .filter_map(|r| r.json())
                .find(|v| v["method"] == "tools/call")
                .unwrap();
            let asked = &call["params"]["_meta"]["io.modelcontextprotocol/logLevel"];
            if modern {
                assert_eq!(asked, level.unwrap_or_default().as_str(), "{call}");
            } else {
                assert!(asked.is_null(), "{call}");
            }
        }
    }
}

#[test]
fn the_command_line_prints_server_logs_on_stderr() {
    let server = server_of(false);
    let out = support::mcp_command()
        .args([
            "call",
            &server.base_url(),
            "noisy",
            "--server-log-level",
            "error",
        ])
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"log: [error] cli/noisy (db): {"code":7,"msg":"lost"}"#),
        "{stderr}"
    );
    assert!(!stderr.contains("disk almost full"), "{stderr}");
    let out = support::mcp_command()
        .args(["call", &server.base_url(), "noisy"])
        .output()
        .expect("run mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("log: [warning] "), "{stderr}");
    assert!(!stderr.contains("chatty detail"), "{stderr}");
}

/// The `capabilities` the client's `initialize` declared.
fn declared(server: &HostileServer) -> Value {
    let init = server
        .requests()
        .into_iter()
        .filter_map(|r| r.json())
        .find(|v| v["method"] == "initialize")
        .expect("an initialize");
    init["params"]["capabilities"].clone()
}

#[test]
fn url_mode_elicitation_is_declared_for_a_handler_that_takes_urls_and_gets_the_url() {
    // A handler that takes URLs: both modes declared, the URL handed to it, its consent sent.
    let server = server_of(false);
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let seen2 = seen.clone();
    let handler = OnElicit::with_urls(move |params| {
        seen2.lock().unwrap().push(params.clone());
        ElicitAnswer::Accept(Value::Null)
    });
    assert!(handler.takes_urls());
    let ctx = context(
        &server.base_url(),
        "run-url",
        Options::default().on_elicit(Some(handler)),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali").unwrap().call("asks_url", json!({})),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "signed");
    assert_eq!(
        declared(&server),
        json!({"elicitation": {"form": {}, "url": {}}})
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["mode"], "url");
    assert_eq!(seen[0]["url"], CONSENT_URL);
    assert_eq!(seen[0]["elicitationId"], "e-2");
    let answer = server
        .requests()
        .into_iter()
        .filter_map(|r| r.json())
        .find(|v| v["id"] == "s-1")
        .expect("the elicitation was answered");
    assert_eq!(answer["result"], json!({"action": "accept"}), "{answer}");

    // A form-only handler declares form mode alone (`{}`); no handler declares none.
    for (options, expected) in [
        (
            Options::default().on_elicit(Some(OnElicit::new(|_| ElicitAnswer::Decline))),
            json!({"elicitation": {}}),
        ),
        (Options::default(), json!({})),
    ] {
        let server = server_of(false);
        let ctx = context(&server.base_url(), "run-form", options);
        let r = run_bounded(
            CHECK_BOUND,
            ctx.mcp("kali").unwrap().call("echo", json!({})),
        );
        assert!(r.ok(), "{r:?}");
        assert_eq!(declared(&server), expected);
    }
}

#[test]
fn a_url_elicitation_required_refusal_names_the_url_a_person_must_open() {
    for modern in [false, true] {
        let server = server_of(modern);
        let ctx = context(&server.base_url(), "run-32042", Options::default());
        let r = run_bounded(
            CHECK_BOUND,
            ctx.mcp("kali").unwrap().call("needs_url", json!({})),
        );
        assert!(!r.ok(), "{r:?}");
        assert!(
            matches!(r.kind(), Kind::Refused { code: -32042, .. }),
            "{r:?}"
        );
        let error = r.error().map(str::to_owned).unwrap_or_default();
        assert_eq!(
            error,
            format!(
                "JSON-RPC error -32042: This request requires more information. \
                 (URL elicitation required: a person must open {CONSENT_URL})"
            )
        );
        assert_eq!(r.elicitation_urls(), [CONSENT_URL]);
        // Refused, not failed over or retried: one tools/call.
        let calls = server
            .requests()
            .iter()
            .filter(|r| r.method().as_deref() == Some("tools/call"))
            .count();
        assert_eq!(calls, 1);
    }
    // The command line prints it, and the call exits 1.
    let server = server_of(false);
    let out = support::mcp_command()
        .args(["call", &server.base_url(), "needs_url"])
        .output()
        .expect("run mcp");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains(&format!("a person must open {CONSENT_URL}")),
        "{printed}"
    );
}

#[test]
fn the_typescript_servers_log_messages_are_kept() {
    use support::{Peer, PeerKind, peer_unavailable};
    // SSE replies (in JSON-reply mode the SDK has no stream to put a call's notifications on).
    let kind = PeerKind::TsStateful;
    if peer_unavailable(kind) {
        return;
    }
    let peer = Peer::start(kind);
    let ctx = context(
        peer.base_url(),
        "run-ts-logs",
        Options::default().secrets(Some(vec![SECRET.into()])),
    );
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .call("logs", json!({"secret": SECRET})),
    );
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "logged");
    let logs: Vec<String> = ctx
        .log_lines()
        .into_iter()
        .filter(|l| l.starts_with("log: "))
        .collect();
    assert_eq!(
        logs,
        [
            "log: [warning] kali/logs: peer warning with [REDACTED]",
            r#"log: [error] kali/logs (peer-db): {"code":5,"what":"peer error"}"#,
        ]
    );
}
