//! The edge client over a real embassy-net stack, with no root and no OS network: two stacks
//! back to back in memory (embassy-net-driver-channel, Ethernet frames copied between them),
//! one running a replayer of real servers' captured replies, the other the edge client.
//!
//! Covers: handshake once per slot with the session id kept, tools/list, each result shape
//! (ok, tool error, refused, unreachable), SSE (LF and CRLF) and JSON replies, `exec`,
//! failover to a second server, a reply cut short, a buffer too small, and an https endpoint.

mod edge_support;

use std::cell::RefCell;
use std::pin::Pin;
use std::time::Duration;

use edge_support::replay::{Replay, acceptor};
use embassy_futures::join::{join, join_array};
use embassy_futures::select::select;
use embassy_net::Stack;
use embassy_net_driver_channel as ch;
use verifi_mcp_core::drive::SlotConfig;
use verifi_mcp_core::harness::events::TimelineEvent;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_embassy::{CallStorage, EdgeNet, EdgeSlot, ProbeCallStorage};

const MTU: usize = 1514;
const CLIENT_IP: [u8; 4] = [192, 0, 2, 2];
const SERVER_IP: [u8; 4] = [192, 0, 2, 1];
/// Replayers listen here; ports not listed have nothing behind them (the stack answers RST).
const PORT_A: u16 = 8080;
const PORT_B: u16 = 8081;
const PORT_CLOSED: u16 = 8099;

type Background = Pin<Box<dyn std::future::Future<Output = ()>>>;

/// Copies every frame the `from` stack sends into the `to` stack.
async fn pump(mut from: ch::TxRunner<'static, MTU>, mut to: ch::RxRunner<'static, MTU>) {
    loop {
        let frame = from.tx_buf().await;
        let dst = to.rx_buf().await;
        let n = frame.len().min(dst.len());
        dst[..n].copy_from_slice(&frame[..n]);
        to.rx_done(n);
        from.tx_done();
    }
}

/// The client stack, and the background that runs both stacks, the wire between them and the
/// replayers (`a` on PORT_A, `b` on PORT_B).
fn rig(a: &'static Replay, b: Option<&'static Replay>) -> (Stack<'static>, Background) {
    let mac = |last| embassy_net::driver::HardwareAddress::Ethernet([0x02, 0, 0, 0, 0, last]);
    let sa: &'static mut ch::State<MTU, 4, 4> = Box::leak(Box::new(ch::State::new()));
    let sb: &'static mut ch::State<MTU, 4, 4> = Box::leak(Box::new(ch::State::new()));
    let (mut run_a, dev_a) = ch::new(sa, mac(1));
    let (mut run_b, dev_b) = ch::new(sb, mac(2));
    run_a.set_link_state(embassy_net::driver::LinkState::Up);
    run_b.set_link_state(embassy_net::driver::LinkState::Up);
    let (client, mut client_runner) =
        edge_support::stack(dev_a, edge_support::static_v4(CLIENT_IP), 1);
    let (server, mut server_runner) =
        edge_support::stack(dev_b, edge_support::static_v4(SERVER_IP), 2);
    let (_, rx_a, tx_a) = run_a.split();
    let (_, rx_b, tx_b) = run_b.split();
    let bg = async move {
        let stacks = join(client_runner.run(), server_runner.run());
        let wire = join(pump(tx_a, rx_b), pump(tx_b, rx_a));
        let servers_a = join_array([acceptor(server, PORT_A, a), acceptor(server, PORT_A, a)]);
        let b = b.unwrap_or(a);
        let servers_b = join_array([acceptor(server, PORT_B, b), acceptor(server, PORT_B, b)]);
        join(join(stacks, wire), join(servers_a, servers_b)).await;
    };
    (client, Box::pin(bg))
}

/// Runs `scenario` while the rig runs, bounded.
fn run<F: std::future::Future<Output = ()>>(bg: Background, scenario: F) {
    edge_support::run_bounded(Duration::from_secs(60), async move {
        select(bg, scenario).await;
    });
}

fn url(port: u16) -> &'static str {
    Box::leak(format!("http://192.0.2.1:{port}").into_boxed_str())
}

fn config(slot: &'static str, primary: u16, fallback: Option<u16>) -> SlotConfig<'static> {
    let p = url(primary);
    let mut c = SlotConfig::new(slot, Endpoint::parse_base(p).unwrap(), p);
    if let Some(f) = fallback {
        let f = url(f);
        c.fallback = Some(Endpoint::parse_base(f).unwrap());
        c.fallback_label = f;
    }
    c.timeout_ms = 10_000;
    // The replayed transcripts are old-era servers' (captured before 2026-07-28); the edge in
    // the 2026 era runs against real rmcp in `edge_tap.rs`.
    c.era = verifi_mcp_core::wire::era::EraSetting::Legacy;
    c
}

fn storage() -> &'static mut ProbeCallStorage {
    Box::leak(Box::new(ProbeCallStorage::new()))
}

fn args(json: &'static str) -> Option<Value<'static>> {
    Some(Value::parse(json.as_bytes(), JsonLimits::default()).unwrap())
}

/// Collects the timeline as `kind` strings.
fn kind(e: &TimelineEvent<'_>) -> &'static str {
    match e {
        TimelineEvent::ToolError { .. } => "mcp.tool_error",
        TimelineEvent::FallbackUsed { .. } => "mcp.fallback_used",
        TimelineEvent::NoHealthyTool { .. } => "mcp.no_healthy_tool",
        TimelineEvent::Era { .. } => "mcp.era",
        TimelineEvent::Task { .. } => "mcp.task",
    }
}

#[test]
fn edge_replay_rmcp_sessions_every_result_shape() {
    let server = Replay::load("rmcp-stateful");
    let (stack, bg) = rig(server, None);
    run(bg, async move {
        let pool = edge_support::pool::<2>(stack, 4096, 2048);
        let net = EdgeNet::new(pool);
        let events = RefCell::new(Vec::new());
        let on_event = |e: &TimelineEvent<'_>| events.borrow_mut().push(kind(e));
        let slot = EdgeSlot::new(config("scanner", PORT_A, None), "run-042", &[])
            .unwrap()
            .with_timeline(&on_event);
        let st = storage();

        let mut names = Vec::new();
        slot.list_tools(&net, &mut st.buffers(), |n| names.push(n.to_string()))
            .await
            .expect("tools/list");
        for want in ["echo", "fail", "mixed", "run_command", "slow"] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }

        let mut b = st.buffers();
        let r = slot
            .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
            .await;
        assert!(r.ok(), "echo: {:?}", r.error());
        assert!(!r.is_error());
        assert_eq!(r.text, "hello wire");

        let mut b = st.buffers();
        let r = slot.call(&net, "fail", None, &mut b).await;
        assert!(!r.ok() && r.is_error(), "fail gives a tool error");
        assert!(!r.text.is_empty(), "the tool's own text is kept");

        let mut b = st.buffers();
        let r = slot.call(&net, "no_such_tool", None, &mut b).await;
        assert!(
            !r.ok() && !r.is_error(),
            "unknown tool is refused, not a tool error"
        );
        let e = r.error().expect("refusal message");
        assert!(e.contains("-32602") && e.contains("tool not found"), "{e}");

        let mut b = st.buffers();
        let r = slot.call(&net, "mixed", None, &mut b).await;
        assert!(r.ok(), "mixed: {:?}", r.error());
        let (first, second) = r.text.split_once('\n').expect("two blocks joined by LF");
        assert_eq!(first, "here is an image");
        assert!(
            second.starts_with('{') && second.contains("\"type\":\"image\""),
            "{second}"
        );

        let mut scratch = [0u8; 256];
        let mut b = st.buffers();
        let x = slot
            .exec(&net, "ls -la", 30_000, &mut scratch, &mut b)
            .await;
        assert!(x.call.ok() && x.ok, "exec: {:?}", x.call.error());
        assert_eq!(x.exit_code, Some(0));
        assert_eq!(x.output, "ran in workspace run-042");
        let sent = server.seen.borrow().last().unwrap().body.clone();
        assert!(
            sent.contains(r#""workspace":"run-042""#) && sent.contains(r#""timeout":30"#),
            "{sent}"
        );

        // One handshake for the slot; every later request carried the session the server gave.
        assert_eq!(server.count("initialize"), 1);
        assert_eq!(server.count("notifications/initialized"), 1);
        let seen = server.seen.borrow();
        for s in seen.iter().filter(|s| s.rpc != "initialize") {
            assert_eq!(
                s.session_id.as_deref(),
                Some("b90eb101-e091-4494-be26-97164af0a61a"),
                "{} without the session",
                s.rpc
            );
        }
        drop(seen);

        // Kept-alive sockets of the pool were reused: fewer connections than requests.
        let (requests, connections) = (server.seen.borrow().len(), server.connections.get());
        eprintln!("{requests} requests over {connections} connections");
        assert!(
            connections < requests,
            "{requests} requests over {connections} connections"
        );

        let c = slot.counters();
        assert_eq!(c.tool_calls, 5, "echo, fail, unknown, mixed, run_command");
        assert!(c.evidence_bytes > 0);
        // fail: a tool error; the unknown tool: no server of the slot has it, then its error.
        assert_eq!(
            *events.borrow(),
            ["mcp.tool_error", "mcp.no_healthy_tool", "mcp.tool_error"]
        );
        assert_eq!(c.tool_errors, 2);
    });
}

#[test]
fn edge_replay_every_server_flavour_sse_and_json() {
    for flavour in ["ts-stateful", "py-stateful", "rmcp-stateless-json"] {
        let server = Replay::load(flavour);
        let (stack, bg) = rig(server, None);
        run(bg, async move {
            let pool = edge_support::pool::<2>(stack, 4096, 2048);
            let net = EdgeNet::new(pool);
            let slot = EdgeSlot::new(config("s", PORT_A, None), "run-1", &[]).unwrap();
            let st = storage();
            let mut names = Vec::new();
            slot.list_tools(&net, &mut st.buffers(), |n| names.push(n.to_string()))
                .await
                .unwrap_or_else(|e| panic!("{flavour}: tools/list: {e}"));
            assert!(names.iter().any(|n| n == "echo"), "{flavour}: {names:?}");
            let mut b = st.buffers();
            let r = slot
                .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
                .await;
            assert!(r.ok(), "{flavour}: {:?}", r.error());
            assert_eq!(r.text, "hello wire", "{flavour}");
            let mut b = st.buffers();
            let r = slot.call(&net, "fail", None, &mut b).await;
            assert!(!r.ok() && r.is_error(), "{flavour}: fail is a tool error");
            assert_eq!(server.count("initialize"), 1, "{flavour}: one handshake");
        });
    }
}

#[test]
fn edge_replay_failover_to_second_server_and_stays_there() {
    let fallback = Replay::load("rmcp-stateless-json");
    let (stack, bg) = rig(fallback, Some(fallback));
    run(bg, async move {
        let pool = edge_support::pool::<2>(stack, 4096, 2048);
        let net = EdgeNet::new(pool);
        let events = RefCell::new(Vec::new());
        let on_event = |e: &TimelineEvent<'_>| events.borrow_mut().push(kind(e));
        let slot = EdgeSlot::new(config("kali", PORT_CLOSED, Some(PORT_B)), "run-7", &[])
            .unwrap()
            .with_timeline(&on_event);
        let st = storage();
        let mut b = st.buffers();
        let r = slot
            .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
            .await;
        assert!(r.ok(), "served by the fallback: {:?}", r.error());
        assert_eq!(r.text, "hello wire");
        assert_eq!(
            slot.counters().tool_calls,
            2,
            "the refused primary attempt is metered too"
        );
        let mut b = st.buffers();
        let r = slot
            .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
            .await;
        assert!(r.ok());
        assert_eq!(
            slot.counters().tool_calls,
            3,
            "the dead primary is not tried again"
        );
        assert_eq!(
            *events.borrow(),
            ["mcp.fallback_used"],
            "emitted once per slot"
        );
    });
}

#[test]
fn edge_replay_reply_cut_short_then_next_call_works() {
    let server = Replay::load("rmcp-stateful");
    let (stack, bg) = rig(server, None);
    run(bg, async move {
        let pool = edge_support::pool::<2>(stack, 4096, 2048);
        let net = EdgeNet::new(pool);
        let slot = EdgeSlot::new(config("s", PORT_A, None), "run-1", &[]).unwrap();
        let st = storage();
        server.cut_next_call_at.set(Some(40));
        let mut b = st.buffers();
        let r = slot
            .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
            .await;
        assert!(!r.ok() && !r.is_error(), "a reply cut short is unreachable");
        eprintln!("cut short: {:?}", r.error());
        assert!(!r.error().unwrap_or("").is_empty());
        let mut b = st.buffers();
        let r = slot
            .call(&net, "echo", args(r#"{"text":"hello wire"}"#), &mut b)
            .await;
        assert!(r.ok(), "the slot is not poisoned: {:?}", r.error());
        assert_eq!(r.text, "hello wire");
    });
}

#[test]
fn edge_replay_small_text_buffer_is_named_with_its_cap() {
    let server = Replay::load("rmcp-stateful");
    let (stack, bg) = rig(server, None);
    run(bg, async move {
        let pool = edge_support::pool::<1>(stack, 4096, 2048);
        let net = EdgeNet::new(pool);
        let slot = EdgeSlot::new(config("s", PORT_A, None), "run-1", &[]).unwrap();
        // 8 bytes of text: "here is an image\n{...}" cannot fit.
        let st: &mut CallStorage<1024, 1024, 1024, 8192, 8, 256, 0> =
            Box::leak(Box::new(CallStorage::new()));
        let mut b = st.buffers();
        let r = slot.call(&net, "mixed", None, &mut b).await;
        assert!(!r.ok() && !r.is_error());
        let e = r.error().expect("overflow message");
        eprintln!("overflow: {e}");
        assert!(
            e.contains("text buffer too small") && e.contains("cap of 8"),
            "names the buffer and its cap: {e}"
        );

        // The exec argument scratch is the caller's too: 8 bytes cannot hold the arguments.
        let mut tiny = [0u8; 8];
        let mut b = st.buffers();
        let x = slot.exec(&net, "ls", 1_000, &mut tiny, &mut b).await;
        assert!(!x.ok && !x.call.ok());
        let e = x.call.error().expect("overflow message");
        assert!(
            e.contains("exec arguments buffer is too small: 8 bytes"),
            "{e}"
        );
        // Word for word (`{"command":` is the first write: 11 bytes).
        assert_eq!(
            e,
            "the exec arguments buffer is too small: 8 bytes, needs at least 11 (3 more)"
        );
        // Nothing was sent for the exec, and still it is metered like any call (the core's one
        // rule for a call that fails before sending, the same on the host).
        assert_eq!(
            slot.counters().tool_calls,
            2,
            "the local failure is metered"
        );
    });
}

#[test]
fn edge_replay_https_endpoint_says_no_tls_on_the_edge() {
    let server = Replay::load("rmcp-stateful");
    let (stack, bg) = rig(server, None);
    run(bg, async move {
        let pool = edge_support::pool::<1>(stack, 4096, 2048);
        let net = EdgeNet::new(pool);
        let ep = "https://192.0.2.1:8080";
        let slot = EdgeSlot::new(
            SlotConfig::new("s", Endpoint::parse_base(ep).unwrap(), ep),
            "run-1",
            &[],
        )
        .unwrap();
        let st = storage();
        let mut b = st.buffers();
        let r = slot.call(&net, "echo", None, &mut b).await;
        assert!(!r.ok() && !r.is_error());
        let e = r.error().expect("message");
        eprintln!("https: {e}");
        assert!(e.contains("TLS"), "{e}");
        assert!(
            server.seen.borrow().is_empty(),
            "no packet reached the server"
        );
    });
}
