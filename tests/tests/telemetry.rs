//! The host's `tracing` spans and events (issue 28 item 5): a call is one `mcp.call` span
//! with its slot, tool, server, era, attempt, outcome and latency, and nothing of its
//! arguments or result. Alone in its binary: `tracing` caches which callsites a subscriber
//! wants, and tests running beside it on other threads would race that cache.

mod support;

use std::sync::Arc;

use serde_json::json;
use support::{CHECK_BOUND, context, run_bounded};
use verifi_mcp_host::Options;
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Step, http_response, json_response, rpc_result,
};

const MODERN: &str = "2026-07-28";

/// A 2026-era server with one tool, `echo`.
fn server_of(modern: bool) -> HostileServer {
    assert!(modern);
    let responder = Arc::new(move |req: &Request| {
        let complete = r#","resultType":"complete""#;
        match req.method().as_deref() {
            Some("server/discover") => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"supportedVersions":["{MODERN}"],"capabilities":{{"tools":{{}}}}{complete}}}"#
                ),
            )),
            Some("tools/list") => json_response(&rpc_result(
                req,
                &format!(
                    r#"{{"tools":[{{"name":"echo","inputSchema":{{"type":"object"}}}}]{complete}}}"#
                ),
            )),
            Some("tools/call") => json_response(&rpc_result(
                req,
                &format!(r#"{{"content":[{{"type":"text","text":"echoed"}}]{complete}}}"#),
            )),
            _ => http_response(400, &[], b"unexpected"),
        }
    });
    HostileServer::start(move |_| {
        let mut steps = Vec::new();
        for _ in 0..8 {
            steps.push(Step::ReadRequest);
            steps.push(Step::SendWith(responder.clone()));
        }
        steps
    })
    .expect("server")
}

/// A span's or event's fields, as text.
type FieldList = Vec<(String, String)>;

/// A `tracing` subscriber that keeps every span's and event's fields as text.
#[derive(Default, Clone)]
struct Recorder {
    spans: Arc<std::sync::Mutex<Vec<(String, FieldList)>>>,
    events: Arc<std::sync::Mutex<Vec<FieldList>>>,
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push((span.metadata().name().to_owned(), fields));
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some((_, fields)) = spans.get_mut(span.into_u64() as usize - 1) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn a_call_is_a_tracing_span_with_its_outcome_and_never_its_arguments() {
    let server = server_of(true);
    let rec = Recorder::default();
    let ctx = context(&server.base_url(), "run-tracing", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = tracing::subscriber::with_default(rec.clone(), || {
        run_bounded(
            CHECK_BOUND,
            kali.call("echo", json!({"text": "arg-value-never-traced"})),
        )
    });
    assert!(r.ok(), "{r:?}");
    let spans = rec.spans.lock().unwrap().clone();
    let calls: Vec<_> = spans.iter().filter(|(n, _)| n == "mcp.call").collect();
    assert_eq!(calls.len(), 1, "{spans:?}");
    let field = |name: &str| {
        calls[0]
            .1
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("slot").as_deref(), Some("kali"));
    assert_eq!(field("tool").as_deref(), Some("echo"));
    assert_eq!(field("outcome").as_deref(), Some("answered"));
    assert_eq!(field("era").as_deref(), Some(MODERN));
    assert_eq!(field("attempt").as_deref(), Some("1"));
    assert!(field("server").unwrap().contains("127.0.0.1"));
    assert!(field("latency_ms").is_some());
    let events = rec.events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e.iter().any(|(k, v)| k == "kind" && v == "mcp.era")),
        "{events:?}"
    );
    let everything = format!("{spans:?}{events:?}");
    assert!(
        !everything.contains("arg-value-never-traced"),
        "{everything}"
    );
    assert!(
        !everything.contains("echoed"),
        "results are not traced: {everything}"
    );
}
