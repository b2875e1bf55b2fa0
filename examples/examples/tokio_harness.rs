//! The host adapter inside a tokio program. The adapter runs on async-io, which brings its own
//! reactor thread, so its futures run under any executor: tokio, smol, async-std or
//! `futures::executor::block_on`. Nothing tokio-specific is needed, and slot handles are `Send`,
//! so calls can be spawned as tokio tasks.
//!
//! ```sh
//! cargo run -p verifi-mcp-examples --example tokio_harness                       # starts its own box
//! cargo run -p verifi-mcp-examples --example tokio_harness -- http://127.0.0.1:8080  # or uses yours
//! ```

use std::time::Duration;

use serde_json::json;
use verifi_mcp_examples::kali::KaliServer;
use verifi_mcp_host::HarnessContext;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A demo box on loopback unless a server is named (it runs its own tokio runtime, so it is
    // started before ours).
    let (_own_box, endpoint) = match std::env::args().nth(1) {
        Some(url) => (None, url),
        None => {
            let b = KaliServer::start("tokio-example")?;
            let url = b.base_url();
            (Some(b), url)
        }
    };
    let ctx = HarnessContext::builder()
        .run_id("tokio-example")
        .slot("kali", endpoint)
        .timeout(Duration::from_secs(30))
        .build()?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let kali = ctx.mcp("kali")?;
        for tool in kali.tools().await? {
            println!("{}: {}", tool.name, tool.description.unwrap_or_default());
        }
        // Four calls as tokio tasks, one session.
        let mut tasks = Vec::new();
        for i in 0..4 {
            let kali = kali.clone();
            tasks.push(tokio::spawn(async move {
                kali.call("echo", json!({ "text": format!("hello {i}") }))
                    .await
            }));
        }
        for t in tasks {
            let r = t.await?;
            println!("ok={} text={:?} in {} ms", r.ok(), r.text, r.latency_ms);
        }
        ctx.close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    println!("ledger: {:?}", ctx.ledger());
    Ok(())
}
