//! The host adapter under tokio: the same calls, concurrent tokio tasks and one session, on
//! tokio's current-thread and multi-thread runtimes, against the demo's rmcp box on 127.0.0.1.
//! (The adapter runs on async-io's own reactor, so it needs nothing from the executor.)

use std::time::Duration;

use serde_json::json;
use verifi_mcp_examples::kali::KaliServer;
use verifi_mcp_host::{HarnessContext, LedgerTotals};

fn exercise(rt: tokio::runtime::Runtime, label: &str) {
    // The box runs its own tokio runtime; it is started outside ours.
    let server = KaliServer::start(label).expect("start the rmcp box");
    let ctx = HarnessContext::builder()
        .run_id(format!("tokio-{label}"))
        .slot("kali", server.base_url())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("context");
    let kali = ctx.mcp("kali").expect("slot");
    let texts = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            let tools = kali.tools().await.expect("tools/list");
            let echo = tools
                .iter()
                .find(|t| t.name == "echo")
                .expect("echo listed");
            assert_eq!(echo.input_schema["type"], json!("object"), "{echo:?}");
            let mut tasks = Vec::new();
            for i in 0..8 {
                let kali = kali.clone();
                tasks.push(tokio::spawn(async move {
                    kali.call("echo", json!({ "text": format!("t{i}") })).await
                }));
            }
            let mut texts = Vec::new();
            for t in tasks {
                let r = t.await.expect("task");
                assert!(r.ok(), "{r:?}");
                texts.push(r.text);
            }
            // A tool error is still a result, not a panic or an Err, under tokio too.
            let r = kali.call("nikto", json!({ "target": "x" })).await;
            assert!(!r.ok() && r.is_error(), "{r:?}");
            ctx.close().await;
            texts
        })
        .await
        .expect("the tokio run finished in time")
    });
    let want: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    assert_eq!(texts, want, "each task got its own reply");
    assert_eq!(ctx.ledger().tool_calls, 9, "{:?}", ctx.ledger());
    assert_ne!(ctx.ledger(), LedgerTotals::default());
    assert_eq!(ctx.events_of("tool_error").len(), 1);
    assert_eq!(server.tool_calls(), 9);
}

#[test]
fn the_host_adapter_runs_on_a_tokio_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    exercise(rt, "current");
}

#[test]
fn the_host_adapter_runs_on_a_tokio_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    exercise(rt, "multi");
}
