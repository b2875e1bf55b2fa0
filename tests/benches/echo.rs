//! `echo` calls/s through the host adapter against the rmcp test server, after the handshake:
//! sequential and 16 in flight, per reply mode, with the server's TCP_NODELAY on and off (off
//! is how rmcp's examples are built; the adapter's TCP_QUICKACK is what keeps reuse fast then).
//!
//! `cargo bench -p verifi-mcp-tests --bench echo`. Every loop is bounded in count and time.

use std::time::{Duration, Instant};

use serde_json::json;
use verifi_mcp_host::{HarnessContext, Options};
use verifi_mcp_tests::{Mode, ServerOptions, TestServer};

const CALLS: usize = 3000;
const MAX_TIME: Duration = Duration::from_secs(5);

fn run(mode: Mode, nodelay: bool, in_flight: usize) -> (usize, f64) {
    let mut opts = ServerOptions::new(mode);
    opts.nodelay = nodelay;
    let server = TestServer::start_with(opts).unwrap();
    let ctx = HarnessContext::from_manifest_value(
        json!({ "endpoints": { "kali": server.base_url() } }),
        "bench",
        Options::default().secrets(Some(Vec::new())),
    )
    .unwrap();
    let kali = ctx.mcp("kali").unwrap();
    let ex = smol::Executor::new();
    smol::block_on(ex.run(async {
        assert!(kali.call("echo", json!({ "text": "warm" })).await.ok());
        let start = Instant::now();
        let workers: Vec<_> = (0..in_flight)
            .map(|_| {
                let kali = kali.clone();
                ex.spawn(async move {
                    let mut done = 0usize;
                    while done < CALLS / in_flight && start.elapsed() < MAX_TIME {
                        let r = kali.call("echo", json!({ "text": "ping" })).await;
                        assert!(r.ok(), "{r:?}");
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        let mut total = 0;
        for w in workers {
            total += w.await;
        }
        (total, total as f64 / start.elapsed().as_secs_f64())
    }))
}

fn main() {
    for mode in Mode::ALL {
        for nodelay in [true, false] {
            for in_flight in [1, 16] {
                let (n, rate) = run(mode, nodelay, in_flight);
                println!(
                    "{:<9} server nodelay={:<5} in flight {:>2}: {:>7.0} calls/s ({n} calls)",
                    mode.name(),
                    nodelay,
                    in_flight,
                    rate
                );
            }
        }
    }
}
