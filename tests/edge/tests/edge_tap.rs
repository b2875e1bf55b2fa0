//! The edge client on embassy-net over a real TAP device, against the real rmcp test server,
//! inside a network namespace this test makes (and deletes, also on failure). Nothing leaves
//! the namespace: the server listens on 192.0.2.1 on the namespace's TAP, the embassy stack
//! is 192.0.2.2 on the other end of the same TAP.
//!
//! Needs root (a namespace and a TAP device). Not root: the test FAILS and says why, unless
//! `VERIFI_ALLOW_NO_NETNS=1`, when it says loudly that it did not run.
//!
//! Covers: the era probe (rmcp 3.11 speaks 2026-07-28), tools/list, ok / tool error / refused / unreachable, SSE and JSON replies,
//! exec with the tool's exit code, failover to a second server, a server killed mid-reply.

mod edge_support;

use edge_support::netns::{Netns, can_run, ip};

use std::cell::RefCell;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use embassy_futures::select::select;
use verifi_mcp_core::drive::SlotConfig;
use verifi_mcp_core::harness::events::TimelineEvent;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_embassy::{EdgeNet, EdgeSlot, ProbeCallStorage};

const TAP: &str = "vtap0";
const SERVER: &str = "192.0.2.1";
const STATEFUL: u16 = 8001;
const JSON: u16 = 8002;
const DYING: u16 = 8003;
const NOTHING: u16 = 8009;

fn start_server(ns: &str, servers: &Mutex<Vec<(u16, Child)>>, mode: &str, port: u16) {
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            env!("CARGO_BIN_EXE_verifi-edge-test-server"),
        ])
        .args(["--mode", mode, "--bind", &format!("{SERVER}:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start verifi-test-server");
    servers.lock().unwrap().push((port, child));
}

fn kill_server(servers: &Mutex<Vec<(u16, Child)>>, port: u16) {
    for (p, child) in servers.lock().unwrap().iter_mut() {
        if *p == port {
            child.kill().expect("kill server");
            let _ = child.wait();
        }
    }
}

/// Waits (bounded) until something accepts on `port`; this thread is inside the namespace.
fn wait_listening(port: u16) {
    let start = Instant::now();
    while TcpStream::connect_timeout(
        &format!("{SERVER}:{port}").parse().unwrap(),
        Duration::from_millis(200),
    )
    .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "server on {port} did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn url(port: u16) -> &'static str {
    Box::leak(format!("http://{SERVER}:{port}").into_boxed_str())
}

fn config(slot: &'static str, primary: u16, fallback: Option<u16>) -> SlotConfig<'static> {
    let p = url(primary);
    let mut c = SlotConfig::new(slot, Endpoint::parse_base(p).unwrap(), p);
    if let Some(f) = fallback {
        let f = url(f);
        c.fallback = Some(Endpoint::parse_base(f).unwrap());
        c.fallback_label = f;
    }
    c.timeout_ms = 15_000;
    c
}

fn args(json: &'static str) -> Option<Value<'static>> {
    Some(Value::parse(json.as_bytes(), JsonLimits::default()).unwrap())
}

#[test]
fn edge_tap_real_rmcp_server_in_own_namespace() {
    if !can_run("edge_tap") {
        return;
    }
    let ns = Netns::named(format!("verifi-edge-{}", std::process::id()));
    ip(&["netns", "add", &ns.name]);
    ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
    let ns_file = std::fs::File::open(format!("/run/netns/{}", ns.name)).expect("open netns");

    // A worker thread enters the namespace: its TAP device, its readiness probes and the whole
    // embassy stack live there. The servers are started by `ip netns exec`. Whatever happens
    // in it, `ns` (this thread's) kills the servers and deletes the namespace.
    let name = ns.name.clone();
    let servers = ns.servers.clone();
    let worker = std::thread::spawn(move || {
        let rc = unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        let device = embassy_net_tuntap::TunTapDevice::new(TAP).expect("create TAP device");
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{SERVER}/24"),
            "dev",
            TAP,
        ]);
        ip(&["-n", &name, "link", "set", TAP, "up"]);
        start_server(&name, &servers, "stateful", STATEFUL);
        start_server(&name, &servers, "json", JSON);
        start_server(&name, &servers, "stateful", DYING);
        for port in [STATEFUL, JSON, DYING] {
            wait_listening(port);
        }
        let (stack, mut runner) =
            edge_support::stack(device, edge_support::static_v4([192, 0, 2, 2]), 7);
        edge_support::run_bounded(Duration::from_secs(120), async move {
            select(runner.run(), scenario(stack, &servers)).await;
        });
    });
    let outcome = worker.join();
    drop(ns);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn scenario(stack: embassy_net::Stack<'static>, servers: &Mutex<Vec<(u16, Child)>>) {
    stack.wait_config_up().await;
    let pool = edge_support::pool::<3>(stack, 8192, 2048);
    let net = EdgeNet::new(pool);
    let st: &mut ProbeCallStorage = Box::leak(Box::new(ProbeCallStorage::new()));
    let events = RefCell::new(Vec::<String>::new());
    let on_event = |e: &TimelineEvent<'_>| {
        events.borrow_mut().push(match e {
            TimelineEvent::ToolError { tool, .. } => format!("tool_error:{tool}"),
            TimelineEvent::FallbackUsed { tool, .. } => format!("fallback_used:{tool}"),
            TimelineEvent::NoHealthyTool { tool, .. } => format!("no_healthy_tool:{tool}"),
            TimelineEvent::Era { era, .. } => format!("era:{era}"),
            TimelineEvent::Task { status, .. } => format!("task:{status}"),
        })
    };

    // SSE replies, sessions.
    let sse = EdgeSlot::new(config("kali", STATEFUL, None), "run-tap", &[])
        .unwrap()
        .with_timeline(&on_event);
    let mut names = Vec::new();
    sse.list_tools(&net, &mut st.buffers(), |n| names.push(n.to_string()))
        .await
        .expect("tools/list");
    for want in ["echo", "fail", "run_command", "slow"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let mut b = st.buffers();
    let r = sse
        .call(&net, "echo", args(r#"{"text":"over the tap"}"#), &mut b)
        .await;
    assert!(r.ok(), "echo: {:?}", r.error());
    assert_eq!(r.text, "over the tap");
    // Typed arguments (serde-json-core into a scratch slice, no allocator).
    #[derive(serde::Serialize)]
    struct Echo<'s> {
        text: &'s str,
    }
    let mut scratch = [0u8; 128];
    let mut b = st.buffers();
    let r = sse
        .call_typed(
            &net,
            "echo",
            &Echo {
                text: "typed \"tap\"",
            },
            &mut scratch,
            &mut b,
        )
        .await;
    assert!(r.ok(), "typed echo: {:?}", r.error());
    assert_eq!(r.text, "typed \"tap\"");
    // A typed structuredContent, from a slot that keeps its replies.
    #[derive(serde::Deserialize)]
    struct Ports {
        open: [u16; 2],
    }
    let mut kept_cfg = config("kali", STATEFUL, None);
    kept_cfg.keep_raw = true;
    let kept = EdgeSlot::new(kept_cfg, "run-tap", &[]).unwrap();
    let kept_st: &mut verifi_mcp_embassy::CallStorage<1024, 1024, 1024, 4096, 1024, 256, 1024> =
        Box::leak(Box::new(verifi_mcp_embassy::CallStorage::new()));
    let mut b = kept_st.buffers();
    let r = kept.call(&net, "ports", None, &mut b).await;
    assert!(r.ok(), "ports: {:?}", r.error());
    let mut escapes = [0u8; 32];
    let ports: Ports = verifi_mcp_embassy::typed::structured(&r, &mut escapes).expect("typed");
    assert_eq!(ports.open, [22, 80]);
    let mut b = st.buffers();
    let r = sse
        .call(&net, "fail", args(r#"{"message":"boom"}"#), &mut b)
        .await;
    assert!(!r.ok() && r.is_error(), "tool error shape");
    let mut b = st.buffers();
    let r = sse.call(&net, "no_such_tool", None, &mut b).await;
    assert!(
        !r.ok() && !r.is_error() && r.error().is_some(),
        "refused shape"
    );
    let mut scratch = [0u8; 256];
    let mut b = st.buffers();
    let x = sse
        .exec(&net, "id; exit 3", 9_999_000, &mut scratch, &mut b)
        .await;
    assert!(x.call.ok(), "exec: {:?}", x.call.error());
    assert!(
        !x.ok,
        "exit 3 is a failed command although the call succeeded"
    );
    assert_eq!(
        x.exit_code,
        Some(3),
        "the tool's exit code, not the call's success"
    );
    eprintln!("edge_tap: exec exit {:?}: {:?}", x.exit_code, x.output);
    assert!(x.output.contains("workspace=run-tap"), "{}", x.output);
    assert!(
        x.output.contains("timeout=285"),
        "clamped to 285 s: {}",
        x.output
    );

    // JSON replies.
    let json = EdgeSlot::new(config("json", JSON, None), "run-tap", &[]).unwrap();
    let mut b = st.buffers();
    let r = json
        .call(&net, "echo", args(r#"{"text":"json reply"}"#), &mut b)
        .await;
    assert!(r.ok(), "json echo: {:?}", r.error());
    assert_eq!(r.text, "json reply");

    // Unreachable: nothing listens (the namespace's kernel answers RST).
    let dead = EdgeSlot::new(config("dead", NOTHING, None), "run-tap", &[]).unwrap();
    let mut b = st.buffers();
    let r = dead
        .call(&net, "echo", args(r#"{"text":"x"}"#), &mut b)
        .await;
    assert!(!r.ok() && !r.is_error(), "unreachable shape");
    eprintln!("edge_tap: nothing listening: {:?}", r.error());
    assert!(
        r.error().unwrap_or("").contains("refused"),
        "{:?}",
        r.error()
    );

    // Failover: the dead primary, then the JSON server; the second call goes straight there.
    let fo = EdgeSlot::new(config("fo", NOTHING, Some(JSON)), "run-tap", &[])
        .unwrap()
        .with_timeline(&on_event);
    let mut b = st.buffers();
    let r = fo
        .call(&net, "echo", args(r#"{"text":"via fallback"}"#), &mut b)
        .await;
    assert!(r.ok(), "failover: {:?}", r.error());
    assert_eq!(r.text, "via fallback");
    let mut b = st.buffers();
    assert!(
        fo.call(&net, "echo", args(r#"{"text":"again"}"#), &mut b)
            .await
            .ok()
    );
    assert_eq!(fo.counters().tool_calls, 3, "primary once, fallback twice");

    // A server killed mid-reply: `slow` streams progress for 5 s; the process dies at 600 ms.
    let dying = EdgeSlot::new(config("dying", DYING, None), "run-tap", &[]).unwrap();
    let mut b = st.buffers();
    let started = Instant::now();
    let call = dying.call(&net, "slow", args(r#"{"ms":5000,"steps":10}"#), &mut b);
    let killer = async {
        embassy_time::Timer::after_millis(600).await;
        kill_server(servers, DYING);
        embassy_time::Timer::after_secs(30).await;
    };
    let r = match select(call, killer).await {
        embassy_futures::select::Either::First(r) => r,
        embassy_futures::select::Either::Second(()) => {
            panic!("call did not end after its server died")
        }
    };
    eprintln!(
        "edge_tap: server killed mid-reply after {:?}: {:?}",
        started.elapsed(),
        r.error()
    );
    assert!(
        !r.ok() && !r.is_error(),
        "a server dying mid-reply is unreachable: {:?}",
        r.error()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ended by the dead server, not by the deadline"
    );

    let ev = events.borrow();
    assert_eq!(
        ev.iter().filter(|e| e.starts_with("fallback_used")).count(),
        1,
        "{ev:?}"
    );
    assert!(ev.contains(&"tool_error:fail".to_string()), "{ev:?}");
    // rmcp 3.11 speaks the 2026-07-28 era: the edge found it by the probe, with no flag.
    assert!(ev.contains(&"era:2026-07-28".to_string()), "{ev:?}");
}
