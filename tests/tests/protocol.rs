//! More of the protocol than tools: `resources/list` (paged), `resources/read`,
//! `resources/templates/list`, `prompts/list` (paged), `prompts/get`, `ping`, the whole
//! `CallToolResult`, and the structured-output check, through the host adapter.
//!
//! The first half runs one check list against every server mode we can run (the TypeScript,
//! Python and rmcp SDKs' servers, which offer the same resources, prompts and `ports` tool);
//! the second half is byte-level: a scripted server pages forever, refuses, leaks a secret,
//! and sends structured content that does not match its schema.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::{CHECK_BOUND, Check, Peer, PeerKind, Sdk, context, context_with, run_bounded};
use verifi_mcp_host::{HarnessContext, LedgerTotals, Options, ProtocolError};
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Responder, Step, http_response, json_response, rpc_result,
};

/// The text of `test://notes/readme` on every peer.
const README_TEXT: &str = "hello from the readme";

/// A secret of the run that a server echoes back.
const SECRET: &str = "sk-proto-4242abcd";

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        const CHECKS: &[(&str, Check)] = &[
            $((stringify!($name), |p: &Peer| run_bounded(CHECK_BOUND, $name(p)))),*
        ];
    };
}

checks!(
    resources_listed_across_pages_and_not_metered,
    text_and_blob_resources_read_and_metered,
    template_read_is_redacted,
    unknown_resource_is_a_refusal_on_the_timeline,
    prompts_listed_and_got,
    ping_answers_unmetered,
    structured_output_matches_its_schema,
);

fn run_all(kind: PeerKind) {
    support::run_checks(kind, CHECKS);
}

crate::peer_tests!(run_all);

fn with_secret() -> Options {
    {
        let mut o = Options::default();
        o.secrets = Some(vec![SECRET.to_owned()]);
        o
    }
}

// ---- the checks against real servers --------------------------------------------------------

/// Every resource, whatever the paging (rmcp serves one per page), and nothing metered.
async fn resources_listed_across_pages_and_not_metered(p: &Peer) {
    let ctx = context(p.base_url(), "run-res-list", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let resources = kali.list_resources().await.expect("resources/list");
    let mut uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    uris.sort();
    assert_eq!(uris, ["test://notes/blob", "test://notes/readme"]);
    let readme = resources
        .iter()
        .find(|r| r.uri == "test://notes/readme")
        .unwrap();
    assert_eq!(readme.name, "readme");
    assert_eq!(readme.mime_type.as_deref(), Some("text/plain"));
    assert_eq!(readme.description.as_deref(), Some("A short text note"));
    let templates = kali
        .list_resource_templates()
        .await
        .expect("resources/templates/list");
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert_eq!(templates[0].uri_template, "test://echo/{text}");
    assert_eq!(templates[0].name, "echo");
    assert_eq!(ctx.ledger(), LedgerTotals::default());
    assert!(ctx.timeline().is_empty());
}

async fn text_and_blob_resources_read_and_metered(p: &Peer) {
    let ctx = context(p.base_url(), "run-res-read", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = kali
        .read_resource("test://notes/readme")
        .await
        .expect("resources/read");
    assert_eq!(r.contents.len(), 1);
    assert_eq!(r.contents[0].uri, "test://notes/readme");
    assert_eq!(r.text(), README_TEXT);
    let after_one = ctx.ledger();
    assert_eq!(after_one.tool_calls, 1);
    // The evidence is the redacted result as sent: at least the text, and a JSON object.
    assert!(
        after_one.evidence_bytes > README_TEXT.len() as u64,
        "{after_one:?}"
    );
    let b = kali
        .read_resource("test://notes/blob")
        .await
        .expect("resources/read");
    assert_eq!(b.contents[0].blob.as_deref(), Some("AAEC"));
    assert_eq!(b.contents[0].text, None);
    assert_eq!(ctx.ledger().tool_calls, 2);
    assert!(ctx.timeline().is_empty());
}

async fn template_read_is_redacted(p: &Peer) {
    let ctx = context(p.base_url(), "run-res-secret", with_secret());
    let kali = ctx.mcp("kali").unwrap();
    let uri = format!("test://echo/{SECRET}");
    let r = kali.read_resource(&uri).await.expect("resources/read");
    assert_eq!(r.text(), "echo: [REDACTED]");
    // The URI the server echoes in the contents is redacted too.
    assert_eq!(r.contents[0].uri, "test://echo/[REDACTED]");
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains(SECRET), "{json}");
}

async fn unknown_resource_is_a_refusal_on_the_timeline(p: &Peer) {
    let ctx = context(p.base_url(), "run-res-unknown", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let err: ProtocolError = kali
        .read_resource("test://nope")
        .await
        .expect_err("no such resource");
    assert_eq!(err.method, "resources/read");
    // Each SDK's own refusal of an unknown resource.
    // rmcp renumbers it in the 2026 era (-32602, as the 2026-07-28 schema has it; -32002 in
    // the old era).
    let (code, message) = match p.kind.sdk() {
        Sdk::Rmcp if p.kind.modern() => (-32602, "resource not found: test://nope"),
        Sdk::Rmcp => (-32002, "resource not found: test://nope"),
        Sdk::Ts => (-32602, "MCP error -32602: Resource test://nope not found"),
        Sdk::Py => (-32602, "Unknown resource: test://nope"),
    };
    assert_eq!(err.code, Some(code), "{err}");
    assert_eq!(
        err.to_string(),
        format!("resources/read failed: JSON-RPC error {code}: {message}")
    );
    // "Not found" read by era: -32002 in the old era, -32602 in the 2026 era (an old-era
    // -32602 is only "invalid params").
    assert_eq!(err.not_found, code == -32002 || p.kind.modern(), "{err}");
    // Metered like a refused call, and on the timeline with the method as the tool.
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: 0
        }
    );
    let timeline = support::failure_events(&ctx);
    assert_eq!(timeline.len(), 1, "{timeline:?}");
    assert_eq!(timeline[0].kind, "tool_error");
    let event: Value = serde_json::from_str(&timeline[0].json).unwrap();
    assert_eq!(
        event,
        json!({"kind": "tool_error", "slot": "kali", "tool": "resources/read",
               "error": err.to_string()})
    );
}

async fn prompts_listed_and_got(p: &Peer) {
    let ctx = context(p.base_url(), "run-prompts", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let prompts = kali.list_prompts().await.expect("prompts/list");
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(prompts[0].name, "review");
    assert_eq!(prompts[0].description.as_deref(), Some("Review a topic"));
    assert_eq!(prompts[0].arguments.len(), 1);
    assert_eq!(prompts[0].arguments[0].name, "topic");
    assert!(prompts[0].arguments[0].required);
    assert_eq!(ctx.ledger(), LedgerTotals::default());
    let got = kali
        .get_prompt("review", json!({"topic": "dns"}))
        .await
        .expect("prompts/get");
    assert_eq!(got.messages.len(), 1);
    assert_eq!(got.messages[0].role, "user");
    assert_eq!(
        got.messages[0].content,
        json!({"type": "text", "text": "Review the dns findings."})
    );
    assert_eq!(ctx.ledger().tool_calls, 1);
    assert!(ctx.ledger().evidence_bytes > 0);
}

async fn ping_answers_unmetered(p: &Peer) {
    let ctx = context(p.base_url(), "run-ping", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    kali.ping().await.expect("ping");
    kali.ping().await.expect("second ping, same session");
    assert_eq!(ctx.ledger(), LedgerTotals::default());
    assert!(ctx.timeline().is_empty());
}

async fn structured_output_matches_its_schema(p: &Peer) {
    let ctx = context(p.base_url(), "run-structured", {
        let mut o = Options::default();
        o.keep_raw = true;
        o
    });
    let kali = ctx.mcp("kali").unwrap();
    let tools = kali.list_tools_described().await.expect("tools/list");
    let ports = tools.iter().find(|t| t["name"] == "ports").expect("ports");
    assert!(ports["outputSchema"].is_object(), "{ports}");
    let r = kali.call("ports", json!({})).await;
    assert!(r.ok(), "{r:?}");
    let result = r.call_result().expect("the CallToolResult");
    assert_eq!(result["structuredContent"], json!({"open": [22, 80]}));
    assert!(result["content"].is_array(), "{result}");
    assert!(support::failure_events(&ctx).is_empty());
}

/// A session the server forgot (404) is re-initialized once and the request retried, as for
/// calls.
#[test]
fn a_forgotten_session_is_reinitialized_for_a_read() {
    let server =
        verifi_mcp_tests::servers::TestServer::start(verifi_mcp_tests::servers::Mode::Stateful)
            .unwrap();
    // Sessions (and their 404) are the handshake era's.
    let ctx = context(
        &server.base_url(),
        "run-404",
        Options::default().era(verifi_mcp_host::EraSetting::Legacy),
    );
    let kali = ctx.mcp("kali").unwrap();
    run_bounded(CHECK_BOUND, kali.ping()).expect("ping");
    assert_eq!(server.stats().initializes(), 1);
    assert_eq!(server.drop_sessions(), 1);
    let r = run_bounded(CHECK_BOUND, kali.read_resource("test://notes/readme")).expect("read");
    assert_eq!(r.text(), README_TEXT);
    assert_eq!(server.stats().initializes(), 2);
    assert_eq!(ctx.ledger().tool_calls, 1);
}

// ---- byte level -------------------------------------------------------------------------------

/// A server that answers the handshake and notifications itself, and every other request with
/// the JSON-RPC message `answer` makes (or 400 when it gives none).
fn scripted(answer: impl Fn(&Request) -> Option<String> + Send + Sync + 'static) -> HostileServer {
    let responder: Responder = Arc::new(move |req: &Request| match req.method().as_deref() {
        Some("initialize") => json_response(&rpc_result(
            req,
            r#"{"protocolVersion":"2024-11-05","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"scripted","version":"0"}}"#,
        )),
        Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
        _ => match answer(req) {
            Some(body) => json_response(&body),
            None => http_response(400, &[], b"unexpected request"),
        },
    });
    let steps: Vec<Step> = (0..200)
        .flat_map(|_| [Step::ReadRequest, Step::SendWith(responder.clone())])
        .collect();
    HostileServer::every_connection(steps).expect("scripted server starts")
}

fn cursor_of(req: &Request) -> Option<Value> {
    req.json()?.get("params")?.get("cursor").cloned()
}

fn ctx_for(server: &HostileServer, opts: Options) -> HarnessContext {
    context(&server.base_url(), "run-scripted", opts)
}

#[test]
fn prompts_list_follows_every_page_and_sends_each_cursor_back() {
    let server = scripted(|req| {
        if req.method().as_deref() != Some("prompts/list") {
            return None;
        }
        let page = match cursor_of(req) {
            None => r#"{"prompts":[{"name":"a"}],"nextCursor":"p2"}"#,
            Some(c) if c == "p2" => r#"{"prompts":[{"name":"b"}],"nextCursor":"p3"}"#,
            Some(_) => r#"{"prompts":[{"name":"c","arguments":[{"name":"x"}]}]}"#,
        };
        Some(rpc_result(req, page))
    });
    let ctx = ctx_for(&server, Options::default());
    let prompts = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().list_prompts()).unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(!prompts[2].arguments[0].required);
    let cursors: Vec<Option<Value>> = server
        .requests()
        .iter()
        .filter(|r| r.method().as_deref() == Some("prompts/list"))
        .map(cursor_of)
        .collect();
    assert_eq!(cursors, vec![None, Some(json!("p2")), Some(json!("p3"))]);
}

#[test]
fn resources_list_stops_a_server_that_repeats_its_cursor() {
    let server = scripted(|req| match req.method().as_deref() {
        Some("resources/list") => Some(rpc_result(
            req,
            r#"{"resources":[{"uri":"x://1","name":"1"}],"nextCursor":"again"}"#,
        )),
        Some("ping") => Some(rpc_result(req, "{}")),
        _ => None,
    });
    let ctx = ctx_for(&server, Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let err = run_bounded(CHECK_BOUND, kali.list_resources()).expect_err("endless paging");
    assert_eq!(
        err.to_string(),
        "resources/list failed: the server kept paging (repeated cursor or over 1000 pages)"
    );
    assert_eq!(err.code, None);
    let pages = server
        .requests()
        .iter()
        .filter(|r| r.method().as_deref() == Some("resources/list"))
        .count();
    assert!(pages <= 3, "stopped at the repeat, after {pages} pages");
    // The slot still works, and listing was not metered.
    run_bounded(CHECK_BOUND, kali.ping()).expect("ping after");
    assert_eq!(ctx.ledger(), LedgerTotals::default());
}

#[test]
fn a_refused_prompt_is_metered_with_the_servers_words_redacted() {
    let server = scripted(|req| {
        (req.method().as_deref() == Some("prompts/get")).then(|| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32602,"message":"bad topic for key {SECRET}"}}}}"#,
                req.id_json().unwrap_or_default()
            )
        })
    });
    let ctx = ctx_for(&server, with_secret());
    let kali = ctx.mcp("kali").unwrap();
    let err = run_bounded(
        CHECK_BOUND,
        kali.get_prompt("review", json!({"topic": "dns"})),
    )
    .expect_err("refused");
    assert_eq!(err.code, Some(-32602));
    assert_eq!(
        err.to_string(),
        "prompts/get failed: JSON-RPC error -32602: bad topic for key [REDACTED]"
    );
    // The request carried the name and arguments as given.
    let sent = server
        .requests()
        .into_iter()
        .find(|r| r.method().as_deref() == Some("prompts/get"))
        .unwrap();
    // Besides the trace context every request carries (issue 28 item 5).
    let mut params = sent.json().unwrap()["params"].clone();
    let meta = params.as_object_mut().unwrap().remove("_meta").unwrap();
    assert!(meta["traceparent"].is_string(), "{meta}");
    assert_eq!(
        params,
        json!({"name": "review", "arguments": {"topic": "dns"}})
    );
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: 0
        }
    );
    let timeline = ctx.timeline();
    assert_eq!(timeline.len(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(&timeline[0].json).unwrap(),
        json!({"kind": "tool_error", "slot": "kali", "tool": "prompts/get",
               "error": "prompts/get failed: JSON-RPC error -32602: bad topic for key [REDACTED]"})
    );
    // Arguments that are not an object never leave the client.
    let before = server.requests().len();
    let err = run_bounded(CHECK_BOUND, kali.get_prompt("review", json!([1]))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "prompts/get failed: arguments must be a JSON object"
    );
    assert_eq!(server.requests().len(), before);
    // … and are metered like a call's local failure, with their event.
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 2,
            evidence_bytes: 0
        }
    );
    assert_eq!(
        serde_json::from_str::<Value>(&ctx.timeline()[1].json).unwrap(),
        json!({"kind": "tool_error", "slot": "kali", "tool": "prompts/get",
               "error": "prompts/get failed: arguments must be a JSON object"})
    );
}

#[test]
fn a_secret_in_a_resources_text_is_redacted_escaped_or_not_and_metered_redacted() {
    // Once plainly, once with a JSON escape (`\u0073` is `s`) that only unescaping reveals.
    let escaped = format!("\\u0073{}", &SECRET[1..]);
    let result = format!(
        r#"{{"contents":[{{"uri":"file:///etc/app.env","mimeType":"text/plain","text":"API_KEY={SECRET}\nOTHER={escaped}"}}]}}"#
    );
    let redacted_len = result.replace(SECRET, "[REDACTED]").len() as u64;
    let server = scripted(move |req| {
        (req.method().as_deref() == Some("resources/read")).then(|| rpc_result(req, &result))
    });
    let ctx = ctx_for(&server, with_secret());
    let r = run_bounded(
        CHECK_BOUND,
        ctx.mcp("kali")
            .unwrap()
            .read_resource("file:///etc/app.env"),
    )
    .expect("read");
    assert_eq!(r.text(), "API_KEY=[REDACTED]\nOTHER=[REDACTED]");
    assert_eq!(
        ctx.ledger(),
        LedgerTotals {
            tool_calls: 1,
            evidence_bytes: redacted_len
        }
    );
}

#[test]
fn a_result_without_contents_is_malformed_not_a_panic() {
    let server = scripted(|req| {
        (req.method().as_deref() == Some("resources/read"))
            .then(|| rpc_result(req, r#"{"contents":"nope"}"#))
    });
    let ctx = ctx_for(&server, Options::default());
    let err =
        run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().read_resource("x://1")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "resources/read failed: reply is not a JSON-RPC response: result member \"contents\" is missing or has the wrong type"
    );
    assert_eq!(ctx.ledger().tool_calls, 1);
}

#[test]
fn a_dead_primary_fails_over_to_the_fallback_for_a_read() {
    let fallback = scripted(|req| {
        (req.method().as_deref() == Some("resources/read")).then(|| {
            rpc_result(
                req,
                r#"{"contents":[{"uri":"x://1","text":"from the fallback"}]}"#,
            )
        })
    });
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let ctx = context_with(
        json!({ "slotFills": { "kali": { "endpoint": dead_url, "fallback": fallback.base_url() } } }),
        "run-failover",
        Options::default(),
    );
    let r = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().read_resource("x://1"))
        .expect("served by the fallback");
    assert_eq!(r.text(), "from the fallback");
    // Both attempts are metered: the primary's failure and the fallback's answer.
    let l = ctx.ledger();
    assert_eq!(l.tool_calls, 2, "{l:?}");
}

/// `ports` declares `{open: integer[]}`; the scripted tool answers with `bad` as its
/// structured content.
fn structured_server(bad: &'static str) -> HostileServer {
    scripted(move |req| match req.method().as_deref() {
        Some("tools/list") => Some(rpc_result(
            req,
            r#"{"tools":[{"name":"ports","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"open":{"type":"array","items":{"type":"integer"}}},"required":["open"]}},{"name":"plain","inputSchema":{"type":"object"}}]}"#,
        )),
        Some("tools/call") => Some(rpc_result(
            req,
            &format!(r#"{{"content":[{{"type":"text","text":"scan done"}}]{bad}}}"#),
        )),
        _ => None,
    })
}

#[test]
fn structured_content_that_does_not_match_is_a_tool_error_naming_the_path() {
    let server = structured_server(r#","structuredContent":{"open":[22,"http"]}"#);
    let ctx = ctx_for(&server, Options::default());
    let kali = ctx.mcp("kali").unwrap();
    // Before the tools are listed, no schema is known: the call is taken as it is.
    let r = run_bounded(CHECK_BOUND, kali.call("ports", json!({})));
    assert!(r.ok(), "{r:?}");
    run_bounded(CHECK_BOUND, kali.list_tools()).unwrap();
    let r = run_bounded(CHECK_BOUND, kali.call("ports", json!({})));
    assert!(!r.ok());
    assert!(r.is_error());
    assert_eq!(r.text, "scan done");
    let error = r.error().map(str::to_owned).unwrap();
    assert_eq!(
        error,
        "structured output check failed: structuredContent does not match the tool's \
         outputSchema at /open/1: \"http\" is not of type \"integer\""
    );
    assert_eq!(
        serde_json::to_value(&r).unwrap()["kind"],
        json!({"type": "toolError"})
    );
    // The raw reply was kept only for the check: the run did not ask for it.
    assert_eq!(r.raw, None);
    // Both calls metered; one tool_error, for the mismatch.
    assert_eq!(ctx.ledger().tool_calls, 2);
    let timeline = support::failure_events(&ctx);
    assert_eq!(timeline.len(), 1, "{timeline:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&timeline[0].json).unwrap(),
        json!({"kind": "tool_error", "slot": "kali", "tool": "ports", "error": error})
    );
    // A tool without a schema is not checked.
    let r = run_bounded(CHECK_BOUND, kali.call("plain", json!({})));
    assert!(r.ok(), "{r:?}");
}

#[test]
fn structured_content_missing_for_a_tool_with_a_schema_is_a_tool_error() {
    let server = structured_server("");
    let ctx = ctx_for(&server, {
        let mut o = Options::default();
        o.keep_raw = true;
        o
    });
    let kali = ctx.mcp("kali").unwrap();
    run_bounded(CHECK_BOUND, kali.list_tools()).unwrap();
    let r = run_bounded(CHECK_BOUND, kali.call("ports", json!({})));
    assert!(!r.ok() && r.is_error(), "{r:?}");
    assert_eq!(
        r.error(),
        Some(
            "structured output check failed: the tool declares an outputSchema but sent no \
             structuredContent"
        )
    );
    // The run asked for the raw reply: it is kept, and the CallToolResult is readable.
    assert_eq!(
        r.call_result().unwrap(),
        json!({"content": [{"type": "text", "text": "scan done"}]})
    );
}

/// A primary that fails part-way through its pages: the list is the fallback's whole list, not
/// the primary's first page and the fallback's list together.
#[test]
fn a_primary_failing_mid_list_leaves_only_the_fallbacks_items() {
    let primary = scripted(|req| {
        if req.method().as_deref() != Some("resources/list") {
            return None;
        }
        // The first page, then nothing usable (a 400) for the second.
        cursor_of(req).is_none().then(|| {
            rpc_result(
                req,
                r#"{"resources":[{"uri":"p://1","name":"from the primary"}],"nextCursor":"p2"}"#,
            )
        })
    });
    let fallback = scripted(|req| {
        (req.method().as_deref() == Some("resources/list")).then(|| {
            rpc_result(
                req,
                r#"{"resources":[{"uri":"f://1","name":"a"},{"uri":"f://2","name":"b"}]}"#,
            )
        })
    });
    let ctx = context_with(
        json!({ "slotFills": { "kali": { "endpoint": primary.base_url(),
                                         "fallback": fallback.base_url() } } }),
        "run-mid-list",
        Options::default(),
    );
    let resources = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().list_resources())
        .expect("served by the fallback");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["f://1", "f://2"]);
    assert_eq!(ctx.ledger(), LedgerTotals::default());
}

/// The same for `tools/list` through the host adapter: the names are the fallback's alone.
#[test]
fn tools_listed_after_a_mid_list_failover_are_the_fallbacks_alone() {
    let primary = scripted(|req| {
        (req.method().as_deref() == Some("tools/list") && cursor_of(req).is_none()).then(|| {
            rpc_result(
                req,
                r#"{"tools":[{"name":"primary_only","inputSchema":{"type":"object"}}],"nextCursor":"p2"}"#,
            )
        })
    });
    let fallback = scripted(|req| {
        (req.method().as_deref() == Some("tools/list")).then(|| {
            rpc_result(
                req,
                r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"n\u0061me","inputSchema":{"type":"object"}}]}"#,
            )
        })
    });
    let ctx = context_with(
        json!({ "slotFills": { "kali": { "endpoint": primary.base_url(),
                                         "fallback": fallback.base_url() } } }),
        "run-mid-tools",
        Options::default(),
    );
    let names = run_bounded(CHECK_BOUND, ctx.mcp("kali").unwrap().list_tools()).unwrap();
    assert_eq!(names, ["echo", "name"]);
}
