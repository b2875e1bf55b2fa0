//! The call machine as plain input and output: each test hands an op bytes, closes and time,
//! and reads what it asks for. No executor, no scripted `Net`, no clock but a number.
// Most tests here speak the handshake era, the probe, tasks or input (each gated on its
// feature); in an edge profile without them their helpers go unused.
#![cfg_attr(
    not(all(
        feature = "era-2025",
        feature = "probe",
        feature = "tasks",
        feature = "input"
    )),
    allow(dead_code, unused_imports)
)]

use verifi_mcp_core::buf::Buf;
// With `std` the core's own `VecBuf` (the host's in-place reply path); without it, the tests'.
#[cfg(feature = "std")]
use verifi_mcp_core::buf::VecBuf;
#[cfg(not(feature = "std"))]
#[path = "support/vec_buf.rs"]
mod vec_buf;
#[cfg(not(feature = "std"))]
use vec_buf::VecBuf;
use verifi_mcp_core::harness::failover::{AttemptOutcome, Target};
use verifi_mcp_core::machine::{Action, Answer, CallBuffers, Op, SlotConfig, SlotState};
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::era::EraSetting;
use verifi_mcp_core::wire::failure::Failure;
use verifi_mcp_core::wire::json::Value;
use verifi_mcp_core::wire::jsonrpc::ListMethod;

fn vb(cap: usize) -> VecBuf {
    VecBuf::with_limit(cap)
}

/// Storage for one op's buffers.
struct Store {
    head: Vec<u8>,
    read: Vec<u8>,
}
impl Store {
    fn new() -> Self {
        Store {
            head: vec![0; 4096],
            read: vec![0; 1024],
        }
    }
    fn bufs(&mut self) -> CallBuffers<'_, VecBuf> {
        CallBuffers {
            request: vb(8192),
            head: &mut self.head,
            read: &mut self.read,
            reply: vb(65536),
            text: vb(65536),
            error: vb(1024),
            raw: vb(0),
        }
    }
}

fn cfg(fallback: bool) -> SlotConfig<'static> {
    let mut c = SlotConfig::new(
        "kali",
        Endpoint::parse_base("http://127.0.0.1:8000").unwrap(),
        "http://127.0.0.1:8000",
    );
    c.timeout_ms = 10_000;
    c.era = EraSetting::Legacy;
    if fallback {
        c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
        c.fallback_label = "http://127.0.0.1:9000";
    }
    c
}

/// How the scripted server answers one request.
#[derive(Clone)]
enum Reply {
    /// These bytes, then the connection stays open (keep-alive) or closes when they end
    /// the response by close framing.
    Bytes(Vec<u8>),
    /// Closes the connection without a byte.
    Close,
    /// Sends nothing until the op gives up.
    Silence,
    /// Sends nothing for this many ms, then these bytes (if the op still waits).
    After(u64, Vec<u8>),
}

/// What one run of an op saw.
#[derive(Default)]
struct Seen {
    /// Each request written: (server, bytes).
    requests: Vec<(Target, String)>,
    /// Each connect: (server, fresh).
    connects: Vec<(Target, bool)>,
    reports: Vec<AttemptOutcome>,
    /// How many times the op said the call became a task.
    task_started: u32,
    /// Connections handed over with a reply stream that had not ended.
    parked: u32,
    /// When each request was written.
    times: Vec<u64>,
    /// When the op ended.
    ended_at: u64,
    /// Each ask for the session's GET stream: (server, how long it may wait, requests
    /// written before it).
    listens: Vec<(Target, u64, usize)>,
}

impl Seen {
    fn methods(&self) -> Vec<String> {
        self.requests.iter().map(|(_, r)| method_of(r)).collect()
    }
}

/// `POST:initialize`, `GET`, `DELETE`, …: a request's HTTP method and JSON-RPC method.
fn method_of(req: &str) -> String {
    let verb = req.split(' ').next().unwrap_or("");
    match req.find("\"method\":\"") {
        Some(at) => {
            let rest = &req[at + 10..];
            format!("{verb}:{}", &rest[..rest.find('"').unwrap_or(0)])
        }
        None => verb.to_string(),
    }
}

/// The id of a request (0 if none).
fn id_of(req: &str) -> u64 {
    req.find("\"id\":")
        .map(|at| {
            req[at + 5..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The reply's head says the connection closes after it.
fn close_framed(bytes: &[u8]) -> bool {
    bytes
        .windows(17)
        .any(|w| w.eq_ignore_ascii_case(b"connection: close"))
}

fn json(body: &str) -> Reply {
    Reply::Bytes(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s-1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

fn status(code: u16, extra: &str) -> Reply {
    Reply::Bytes(format!("HTTP/1.1 {code} X\r\n{extra}content-length: 0\r\n\r\n").into_bytes())
}

fn init_ok(id: u64) -> Reply {
    json(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
    ))
}

fn call_ok(id: u64, text: &str) -> Reply {
    json(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    ))
}

/// The handshake half of a server: `initialize` and `notifications/initialized` answered well,
/// everything else to `rest`.
fn with_handshake(mut rest: impl FnMut(&str, u64) -> Reply) -> impl FnMut(&str) -> Reply {
    move |req: &str| match method_of(req).as_str() {
        "POST:initialize" => init_ok(id_of(req)),
        "POST:notifications/initialized" => status(202, ""),
        _ => rest(req, id_of(req)),
    }
}

/// Runs `op` to its end against `server`, from `now`.
fn run<F: FnMut(Option<(Value<'_>, &[u8])>)>(
    op: &mut Op<'_, VecBuf, &str, F>,
    slot: &mut SlotState,
    mut now: u64,
    mut server: impl FnMut(&str) -> Reply,
) -> Seen {
    let mut seen = Seen::default();
    let mut pending: Option<Reply> = None;
    let mut pooled = false;
    let mut closing = false;
    for _ in 0..10_000 {
        match op.poll(slot, now) {
            Action::Connect { target, fresh } => {
                seen.connects.push((target, fresh));
                let reused = pooled && !fresh;
                pooled = false;
                op.handle_connected(reused);
            }
            Action::Transmit => {
                let req = String::from_utf8_lossy(op.transmit()).into_owned();
                let target = seen.connects.last().map_or(Target::Primary, |c| c.0);
                seen.requests.push((target, req.clone()));
                seen.times.push(now);
                pending = Some(server(&req));
                closing = false;
                op.handle_sent(now, true);
            }
            Action::Receive => match pending.take() {
                Some(Reply::Bytes(b)) if !b.is_empty() => {
                    let n = b.len().min(op.read_buf().len());
                    op.read_buf()[..n].copy_from_slice(&b[..n]);
                    if n < b.len() {
                        pending = Some(Reply::Bytes(b[n..].to_vec()));
                    } else if close_framed(&b) || closing {
                        // A reply framed by the close: the server closes once it is out.
                        closing = true;
                        pending = Some(Reply::Close);
                    }
                    if n < b.len() && close_framed(&b) {
                        closing = true;
                    }
                    op.handle_read(now, n);
                }
                Some(Reply::Silence) => {
                    pending = Some(Reply::Silence);
                    now = op.timeout();
                    op.handle_timeout(now);
                }
                Some(Reply::After(delay, bytes)) => {
                    if now + delay < op.timeout() {
                        // The bytes come with the next Receive (the op asks again).
                        now += delay;
                        pending = Some(Reply::Bytes(bytes));
                    } else {
                        now = op.timeout();
                        op.handle_timeout(now);
                    }
                }
                // Nothing more: the server waits (a kept-alive connection) until the tail
                // read gives up, or closes.
                Some(Reply::Bytes(_)) | None => {
                    now = op.timeout();
                    op.handle_timeout(now);
                }
                Some(Reply::Close) => op.handle_read(now, 0),
            },
            Action::Recycle => pooled = true,
            Action::Close => pooled = false,
            Action::Park => {
                pooled = false;
                seen.parked += 1;
                assert!(
                    op.take_tail().is_some(),
                    "a parked connection comes with its tail"
                );
            }
            Action::Sleep { .. } => now = now.max(op.timeout()),
            Action::Respond { target } => {
                // An answer to the server, on the side: recorded, the call's stream goes on.
                let req = String::from_utf8_lossy(op.transmit()).into_owned();
                seen.requests.push((target, req));
                seen.times.push(now);
            }
            Action::Report => seen.reports.push(op.report().unwrap().outcome),
            Action::TaskStarted => seen.task_started += 1,
            Action::Listen { target } => {
                seen.listens
                    .push((target, op.timeout() - now, seen.requests.len()));
            }
            Action::Done => {
                seen.ended_at = now;
                return seen;
            }
        }
    }
    panic!("the op did not end");
}

/// One call op from start to end against `server`, on its own buffers: what it saw and how it
/// ended.
struct Called {
    seen: Seen,
    failure: Option<Failure>,
    answer: Option<Answer>,
    text: Vec<u8>,
}

fn call_with(
    c: &SlotConfig<'static>,
    slot: &mut SlotState,
    secrets: &[&str],
    tool: &str,
    args: Option<Value<'static>>,
    server: impl FnMut(&str) -> Reply,
) -> Called {
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(c, &mut bufs, secrets, tool, args);
    let seen = run(&mut op, slot, 0, server);
    let (failure, answer) = (op.failure().cloned(), op.answer());
    drop(op);
    Called {
        seen,
        failure,
        answer,
        text: bufs.text.bytes().to_vec(),
    }
}

#[cfg(feature = "era-2025")]
#[test]
fn a_call_handshakes_once_and_the_session_is_reused() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    for round in 0..2 {
        let r = call_with(
            &c,
            &mut slot,
            &secrets,
            "echo",
            None,
            with_handshake(|_, id| call_ok(id, "hi")),
        );
        assert_eq!(r.answer, Some(Answer::Result { is_error: false }));
        assert_eq!(&r.text[..], b"hi");
        let want: &[&str] = if round == 0 {
            &[
                "POST:initialize",
                "POST:notifications/initialized",
                "POST:tools/call",
            ]
        } else {
            &["POST:tools/call"]
        };
        assert_eq!(r.seen.methods(), want, "round {round}");
        assert!(
            r.seen
                .requests
                .last()
                .unwrap()
                .1
                .contains("mcp-session-id: s-1")
        );
    }
}

/// A 2025-era call in a session asks for the session's GET stream (where the server may send
/// its requests) before its request goes out, with a bounded wait; a list does not, nor a
/// session without an id.
#[cfg(feature = "era-2025")]
#[test]
fn a_call_in_a_session_asks_for_its_get_stream_before_its_request() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    for round in 0..2 {
        let r = call_with(
            &c,
            &mut slot,
            &secrets,
            "echo",
            None,
            with_handshake(|_, id| call_ok(id, "hi")),
        );
        assert_eq!(r.answer, Some(Answer::Result { is_error: false }));
        // After the handshake's two requests (round 0), before the call's.
        let before = if round == 0 { 2 } else { 0 };
        assert_eq!(r.seen.listens.len(), 1, "round {round}");
        let (target, wait, written) = r.seen.listens[0];
        assert_eq!(
            (target, written),
            (Target::Primary, before),
            "round {round}"
        );
        assert!(wait > 0 && wait <= 1_000, "a bounded wait: {wait}");
    }
    // A list in the same session: no.
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::list(&c, &mut bufs, &secrets, ListMethod::Tools, |_| {});
    let seen = run(&mut op, &mut slot, 0, |req: &str| {
        json(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[]}}}}"#,
            id_of(req)
        ))
    });
    assert!(seen.listens.is_empty());
    // A server without sessions: no stream to ask for.
    let mut slot = SlotState::new(c.version, false);
    let no_session = |body: String| {
        Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    };
    let r = call_with(&c, &mut slot, &secrets, "echo", None, |req: &str| {
        let id = id_of(req);
        match method_of(req).as_str() {
            "POST:initialize" => no_session(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
            )),
            "POST:notifications/initialized" => status(202, ""),
            _ => no_session(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#
            )),
        }
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(r.seen.listens.is_empty());
}

/// What opens the GET stream, and what each message on it gets (as on a call's stream).
#[cfg(all(feature = "era-2025", feature = "input"))]
#[test]
fn the_get_stream_request_and_its_answers() {
    use verifi_mcp_core::machine::{Elicitation, listen};
    use verifi_mcp_core::wire::session::Snapshot;
    let mut c = cfg(false);
    c.elicitation = Some(Elicitation::AcceptDefaults);
    let snap = Snapshot {
        session_id: Some("s-1".try_into().unwrap()),
        version: verifi_mcp_core::wire::jsonrpc::ProtocolVersion::V2025_06_18,
    };
    let mut out = vb(4096);
    listen::write_open(&c, Target::Primary, &snap, &mut out).unwrap();
    let get = String::from_utf8_lossy(out.bytes()).into_owned();
    assert!(get.starts_with("GET /mcp HTTP/1.1\r\n"), "{get}");
    for line in [
        "accept: text/event-stream\r\n",
        "mcp-session-id: s-1\r\n",
        "mcp-protocol-version: 2025-06-18\r\n",
    ] {
        assert!(get.to_ascii_lowercase().contains(line), "{line}: {get}");
    }
    assert!(
        !get.to_ascii_lowercase().contains("content-length"),
        "{get}"
    );
    let answer = |msg: &str| {
        let (mut scratch, mut out) = (vb(4096), vb(4096));
        let sent = listen::answer(
            &c,
            (Target::Primary, &snap),
            msg.as_bytes(),
            &mut scratch,
            &mut out,
        )
        .unwrap();
        sent.then(|| String::from_utf8_lossy(out.bytes()).into_owned())
    };
    let body = |post: String| {
        assert!(post.starts_with("POST /mcp HTTP/1.1\r\n"), "{post}");
        assert!(post.contains("mcp-session-id: s-1\r\n"), "{post}");
        post.split("\r\n\r\n").nth(1).unwrap().to_owned()
    };
    assert_eq!(
        body(answer(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#).unwrap()),
        r#"{"jsonrpc":"2.0","id":3,"result":{}}"#
    );
    assert_eq!(
        body(answer(r#"{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{"n":{"type":"integer","default":2}}}}}"#).unwrap()),
        r#"{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"n":2}}}"#
    );
    assert!(
        body(answer(r#"{"jsonrpc":"2.0","id":4,"method":"roots/list"}"#).unwrap())
            .contains(r#""id":4,"error":{"code":-32601"#)
    );
    // Nothing to answer: a notification, a response, what is not JSON-RPC.
    for msg in [
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        "{not json",
        "",
    ] {
        assert_eq!(answer(msg), None, "{msg}");
    }
}

#[cfg(feature = "era-2025")]
#[test]
fn ops_that_arrive_during_a_handshake_wait_for_it_in_the_machine() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let (mut s1, mut s2) = (Store::new(), Store::new());
    let (mut b1, mut b2) = (s1.bufs(), s2.bufs());
    let mut first = Op::call(&c, &mut b1, &secrets, "echo", None);
    let mut second = Op::call(&c, &mut b2, &secrets, "echo", None);
    // The first starts the handshake; the second waits on the slot, not on a connection.
    assert!(matches!(first.poll(&mut slot, 0), Action::Connect { .. }));
    assert_eq!(second.poll(&mut slot, 0), Action::Sleep { slot: true });
    assert!(!slot.take_changed());
    assert_eq!(
        second.timeout(),
        10_000,
        "a waiter waits no longer than its deadline"
    );
    // The first op's handshake and call complete.
    first.handle_connected(false);
    let seen = run(
        &mut first,
        &mut slot,
        0,
        with_handshake(|_, id| call_ok(id, "one")),
    );
    assert_eq!(seen.methods()[0], "POST:initialize");
    assert!(
        slot.take_changed(),
        "the end of a handshake wakes the waiters"
    );
    // The second goes straight to its call in the new session.
    let seen = run(&mut second, &mut slot, 0, |req| call_ok(id_of(req), "two"));
    assert_eq!(seen.methods(), ["POST:tools/call"]);
    assert!(second.outcome().is_ok());
}

#[cfg(feature = "era-2025")]
#[test]
fn a_failed_handshake_fails_its_waiters_and_is_not_cached() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let (mut s1, mut s2) = (Store::new(), Store::new());
    let (mut b1, mut b2) = (s1.bufs(), s2.bufs());
    let mut first = Op::call(&c, &mut b1, &secrets, "echo", None);
    let mut waiter = Op::call(&c, &mut b2, &secrets, "echo", None);
    assert!(matches!(first.poll(&mut slot, 0), Action::Connect { .. }));
    assert_eq!(waiter.poll(&mut slot, 0), Action::Sleep { slot: true });
    first.handle_connected(false);
    run(&mut first, &mut slot, 0, |_| status(500, ""));
    assert!(matches!(
        first.failure(),
        Some(Failure::Status { code: 500, .. })
    ));
    assert!(slot.take_changed());
    let seen = run(&mut waiter, &mut slot, 0, |_| {
        panic!("the waiter sends nothing")
    });
    assert!(seen.requests.is_empty());
    assert!(matches!(
        waiter.failure(),
        Some(Failure::Status { code: 500, .. })
    ));
    // A later op starts a new handshake (the failure was not cached).
    let mut s3 = Store::new();
    let mut b3 = s3.bufs();
    let mut later = Op::call(&c, &mut b3, &secrets, "echo", None);
    let seen = run(
        &mut later,
        &mut slot,
        0,
        with_handshake(|_, id| call_ok(id, "ok")),
    );
    assert_eq!(seen.methods()[0], "POST:initialize");
    assert!(later.outcome().is_ok());
}

#[cfg(feature = "era-2025")]
#[test]
fn a_written_tools_call_is_never_sent_again_when_the_server_closes_before_replying() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "nmap", None);
    // The handshake's connection is kept alive and recycled, so the call goes out on a pooled
    // connection, which the server then closes without a byte.
    let seen = run(&mut op, &mut slot, 0, with_handshake(|_, _| Reply::Close));
    let calls = seen
        .methods()
        .iter()
        .filter(|m| *m == "POST:tools/call")
        .count();
    assert_eq!(
        calls,
        1,
        "the tools/call went out once: {:?}",
        seen.methods()
    );
    assert!(matches!(op.failure(), Some(Failure::MayHaveRun(_))));
}

#[cfg(feature = "era-2025")]
#[test]
fn a_safe_request_on_a_stale_pooled_connection_is_sent_again_fresh_with_a_new_id() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::list(&c, &mut bufs, &secrets, ListMethod::Tools, |_| {});
    let mut lists = 0;
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|_, id| {
            lists += 1;
            if lists == 1 {
                Reply::Close
            } else {
                json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"a","inputSchema":{{}}}}]}}}}"#
                ))
            }
        }),
    );
    assert!(op.list_outcome().is_ok(), "{:?}", op.list_outcome());
    let lists: Vec<&(Target, String)> = seen
        .requests
        .iter()
        .filter(|(_, r)| method_of(r) == "POST:tools/list")
        .collect();
    assert_eq!(lists.len(), 2);
    assert_ne!(
        id_of(&lists[0].1),
        id_of(&lists[1].1),
        "a re-sent request has a new id"
    );
    assert_eq!(
        seen.connects.last(),
        Some(&(Target::Primary, true)),
        "on a fresh connection"
    );
}

#[cfg(feature = "era-2025")]
#[test]
fn a_404_in_a_session_reinitializes_once() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    let mut calls = 0;
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|_, id| {
            calls += 1;
            if calls == 1 {
                status(404, "")
            } else {
                call_ok(id, "again")
            }
        }),
    );
    assert_eq!(
        seen.methods(),
        [
            "POST:initialize",
            "POST:notifications/initialized",
            "POST:tools/call",
            "POST:initialize",
            "POST:notifications/initialized",
            "POST:tools/call"
        ]
    );
    assert!(op.outcome().is_ok());
}

#[cfg(feature = "era-2025")]
#[test]
fn a_stalled_reply_fails_as_stalled_and_the_call_is_cancelled() {
    let mut c = cfg(false);
    c.idle_timeout_ms = Some(2_000);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "scan",
        None,
        with_handshake(|req, _| {
            if req.contains("notifications/cancelled") {
                status(202, "")
            } else {
                Reply::Silence
            }
        }),
    );
    assert!(matches!(
        r.failure.as_ref(),
        Some(Failure::Stalled {
            idle_ms: 2_000,
            call: true
        })
    ));
    let text = r.failure.as_ref().unwrap().to_string();
    assert!(
        text.contains("--idle-timeout-ms") && text.contains("the tool may still be running"),
        "{text}"
    );
    assert_eq!(
        r.seen.methods().last().unwrap(),
        "POST:notifications/cancelled"
    );
    assert!(
        r.seen.ended_at < 10_000,
        "stalled at the idle time, before the deadline"
    );
}

/// Issue 27, item 12: no idle timeout on a call by default (a scan that sends nothing for
/// 164 s is answered within its 300 s deadline); a deadline that ends a call names the limit
/// and its flag and says whether the tool may still be running.
#[cfg(feature = "era-2025")]
#[test]
fn a_silent_call_is_bounded_by_its_deadline_alone_which_the_error_names() {
    let secrets: [&str; 0] = [];
    let mut c = cfg(false);
    c.timeout_ms = 300_000;
    assert_eq!(c.idle_timeout_ms, None, "off by default");
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "nmap",
        None,
        with_handshake(|_, id| match call_ok(id, "scanned") {
            Reply::Bytes(b) => Reply::After(164_000, b),
            other => other,
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"scanned");
    assert!(r.seen.ended_at >= 164_000);
    // Past the deadline: the call's timeout, its flag, and the tool may still be running.
    let mut c = cfg(false);
    c.timeout_ms = 5_000;
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "nmap",
        None,
        with_handshake(|req, _| {
            if req.contains("notifications/cancelled") {
                status(202, "")
            } else {
                Reply::Silence
            }
        }),
    );
    let f = r.failure.expect("timed out");
    assert_eq!(
        f,
        Failure::CallTimedOut {
            ms: 5_000,
            sent: true
        }
    );
    let text = f.to_string();
    assert!(
        text.starts_with("tool call timed out after 5000 ms")
            && text.contains("--timeout-ms")
            && text.contains("Options::timeout_ms")
            && text.contains("the tool may still be running on the server"),
        "{text}"
    );
    assert_eq!(r.seen.ended_at, 5_000);
    // A deadline that passes before the call went out says so.
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(&c, &mut slot, &secrets, "nmap", None, |_| Reply::Silence);
    let f = r.failure.expect("timed out");
    assert_eq!(
        f,
        Failure::CallTimedOut {
            ms: 5_000,
            sent: false
        }
    );
    assert!(
        f.to_string().contains("before the tool call was sent"),
        "{f}"
    );
}

/// Issue 27, item 5: a stream that breaks after a written `tools/call` and before its
/// response fails saying the tool may have run, is never sent again, in both eras, wherever it
/// broke (mid-body, mid-head, a stream that ends without the response and cannot resume).
#[cfg(all(feature = "era-2025", feature = "probe"))]
#[test]
fn a_broken_stream_after_a_written_call_says_the_tool_may_have_run_in_both_eras() {
    let secrets: [&str; 0] = [];
    let cut_body = |id: u64| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"x"}}]}}}}"#
        );
        Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{}",
                body.len(),
                &body[..body.len() / 2]
            )
            .into_bytes(),
        )
    };
    let cut_head =
        |_: u64| Reply::Bytes(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-ty".to_vec());
    let ended = |_: u64| {
        let event =
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n";
        Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n0\r\n\r\n",
                event.len()
            )
            .into_bytes(),
        )
    };
    type Fault = fn(u64) -> Reply;
    let faults: [(&str, Fault, &str); 3] = [
        ("mid-body", cut_body, "in the middle of the reply body"),
        ("mid-head", cut_head, "before the reply head was complete"),
        ("ended", ended, "the reply stream ended"),
    ];
    for modern in [false, true] {
        for (name, fault, says) in faults {
            let c = if modern { auto_cfg() } else { cfg(false) };
            let mut slot = SlotState::new(c.version, false);
            let mut calls = 0;
            let rest = |_: &str, id: u64| {
                calls += 1;
                fault(id)
            };
            let r = if modern {
                call_with(&c, &mut slot, &secrets, "echo", None, modern_server(rest))
            } else {
                call_with(&c, &mut slot, &secrets, "echo", None, with_handshake(rest))
            };
            let f = r.failure.expect("fails");
            assert!(
                matches!(f, Failure::MayHaveRun(_)),
                "{modern} {name}: {f:?}"
            );
            let text = f.to_string();
            assert!(
                text.contains("may have run") && text.contains(says),
                "{modern} {name}: {text}"
            );
            assert_eq!(calls, 1, "{modern} {name}: never sent again");
        }
    }
}

/// Issue 27, item 7: `initialize` offers `2025-11-25` by default (the newest of the handshake
/// era); a server that answers an older version is followed; the first version, `2024-11-05`, is still
/// offered when asked for.
#[cfg(feature = "era-2025")]
#[test]
fn initialize_offers_2025_11_25_by_default_and_an_older_answer_is_followed() {
    let secrets: [&str; 0] = [];
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(&c, &mut slot, &secrets, "echo", None, |req: &str| {
        let id = id_of(req);
        match method_of(req).as_str() {
            "POST:initialize" => json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2024-11-05","capabilities":{{}},"serverInfo":{{"name":"old","version":"1"}}}}}}"#
            )),
            "POST:notifications/initialized" => status(202, ""),
            _ => call_ok(id, "old server"),
        }
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"old server");
    let init = &r.seen.requests[0].1;
    assert!(
        init.contains(r#""protocolVersion":"2025-11-25""#),
        "offered by default: {init}"
    );
    // The server's answer is the session's version from then on.
    let call = &r.seen.requests.last().unwrap().1;
    assert!(
        call.contains("mcp-protocol-version: 2024-11-05\r\n")
            || !call.contains("mcp-protocol-version"),
        "{call}"
    );
    let mut c = cfg(false);
    c.version = verifi_mcp_core::wire::jsonrpc::ProtocolVersion::SEED;
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        with_handshake(|_, id| call_ok(id, "x")),
    );
    assert!(
        r.seen.requests[0]
            .1
            .contains(r#""protocolVersion":"2024-11-05""#)
    );
}

#[cfg(feature = "era-2025")]
#[test]
fn retry_after_waits_then_sends_the_call_again_within_the_deadline() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    let mut calls = 0;
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|_, id| {
            calls += 1;
            if calls == 1 {
                status(429, "retry-after: 3\r\n")
            } else {
                call_ok(id, "ok")
            }
        }),
    );
    assert!(op.outcome().is_ok(), "{:?}", op.failure());
    assert_eq!(seen.ended_at, 3_000, "the retry waited the server's 3 s");
    // A retry-after past the deadline is not waited for.
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    run(&mut op, &mut slot, 0, |_| {
        status(503, "retry-after: 60\r\n")
    });
    assert!(matches!(
        op.failure(),
        Some(Failure::RetryTooLate { code: 503, .. })
    ));
}

#[cfg(feature = "era-2025")]
#[test]
fn a_reply_stream_that_ends_early_is_resumed_with_last_event_id() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    let mut call_id = 0;
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|req, id| {
            if method_of(req) == "GET" {
                assert!(req.contains("last-event-id: ev-7"), "{req}");
                Reply::Bytes(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                         id: ev-8\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{call_id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"resumed\"}}]}}}}\n\n"
                    )
                    .into_bytes(),
                )
            } else {
                call_id = id;
                Reply::Bytes(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nid: ev-7\nretry: 250\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n".to_vec(),
                )
            }
        }),
    );
    assert_eq!(seen.methods().last().unwrap(), "GET");
    assert!(op.outcome().is_ok(), "{:?}", op.failure());
    drop(op);
    assert_eq!(bufs.text.bytes(), b"resumed");
}

#[cfg(feature = "era-2025")]
#[test]
fn a_server_that_repeats_its_cursor_is_stopped() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut items = 0;
    let mut op = Op::list(&c, &mut bufs, &secrets, ListMethod::Tools, |_| items += 1);
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|_, id| {
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"a","inputSchema":{{}}}}],"nextCursor":"same"}}}}"#
            ))
        }),
    );
    assert!(matches!(op.failure(), Some(Failure::EndlessPaging)));
    let lists = seen
        .methods()
        .iter()
        .filter(|m| *m == "POST:tools/list")
        .count();
    assert_eq!(lists, 2, "the second page repeating the cursor ends it");
    drop(op);
    assert_eq!(items, 2);
}

#[cfg(all(feature = "era-2025", feature = "tasks"))]
#[test]
fn an_unreachable_primary_fails_over_and_reports_each_attempt() {
    let c = cfg(true);
    let mut slot = SlotState::new(c.version, true);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    let mut target = Target::Primary;
    let mut seen = Seen::default();
    let mut now = 0;
    // A connect to the primary fails; the fallback answers.
    let mut pending: Option<Reply> = None;
    let mut server = with_handshake(|_, id| call_ok(id, "from fallback"));
    loop {
        match op.poll(&mut slot, now) {
            Action::Connect { target: t, .. } => {
                target = t;
                if t == Target::Primary {
                    op.handle_connect_failed(verifi_mcp_core::wire::failure::ConnectError::new(
                        verifi_mcp_core::wire::failure::ConnectErrorKind::Refused,
                        "",
                    ));
                } else {
                    op.handle_connected(false);
                }
            }
            Action::Transmit => {
                let req = String::from_utf8_lossy(op.transmit()).into_owned();
                seen.requests.push((target, req.clone()));
                pending = Some(server(&req));
                op.handle_sent(now, true);
            }
            Action::Receive => match pending.take() {
                Some(Reply::Bytes(b)) if !b.is_empty() => {
                    let n = b.len().min(op.read_buf().len());
                    op.read_buf()[..n].copy_from_slice(&b[..n]);
                    op.handle_read(now, n);
                }
                _ => {
                    now = op.timeout();
                    op.handle_timeout(now);
                }
            },
            Action::Report => seen.reports.push(op.report().unwrap().outcome),
            Action::TaskStarted => seen.task_started += 1,
            Action::Sleep { .. } => now = op.timeout(),
            Action::Recycle
            | Action::Close
            | Action::Park
            | Action::Respond { .. }
            | Action::Listen { .. } => {}
            Action::Done => break,
        }
    }
    assert_eq!(
        seen.reports,
        [AttemptOutcome::Unreachable, AttemptOutcome::Answered]
    );
    assert!(seen.requests.iter().all(|(t, _)| *t == Target::Fallback));
    assert!(op.report().unwrap().fallback_used);
    drop(op);
    assert_eq!(bufs.text.bytes(), b"from fallback");
}

// ---------------------------------------------------------------------------------------------
// The 2026-07-28 era and the probe.

fn auto_cfg() -> SlotConfig<'static> {
    let mut c = cfg(false);
    c.era = EraSetting::Auto;
    c
}

fn discover_ok(id: u64) -> Reply {
    json(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}"#
    ))
}

fn error_body(status_code: u16, code: i64, id: &str) -> Reply {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"m","data":{{"supported":["2026-07-28"]}}}}}}"#
    );
    Reply::Bytes(
        format!(
            "HTTP/1.1 {status_code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// A 2026-era server: discover, one page of tools (`echo` with `region` as `x-mcp-header:
/// Region`), and `rest` for everything else.
fn modern_server(mut rest: impl FnMut(&str, u64) -> Reply) -> impl FnMut(&str) -> Reply {
    move |req: &str| {
        let id = id_of(req);
        match method_of(req).as_str() {
            "POST:server/discover" => discover_ok(id),
            "POST:tools/list" => json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo","inputSchema":{{"type":"object","properties":{{"text":{{"type":"string"}},"region":{{"type":"string","x-mcp-header":"Region"}}}}}}}},{{"name":"bad","inputSchema":{{"type":"object","properties":{{"a":{{"type":"string","x-mcp-header":"A B"}}}}}}}}],"ttlMs":0,"resultType":"complete"}}}}"#
            )),
            "POST:initialize" | "POST:notifications/initialized" => {
                panic!("a 2026 server is never sent the old handshake: {req}")
            }
            _ => rest(req, id),
        }
    }
}

fn args(json: &'static str) -> Option<Value<'static>> {
    Value::parse(
        json.as_bytes(),
        verifi_mcp_core::wire::json::JsonLimits::default(),
    )
    .ok()
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn auto_probes_once_then_speaks_2026_with_meta_and_headers() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut calls = Vec::new();
    for round in 0..2 {
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut op = Op::call(
            &c,
            &mut bufs,
            &secrets,
            "echo",
            args(r#"{"text":"hi","region":"Zürich "}"#),
        );
        let seen = run(
            &mut op,
            &mut slot,
            0,
            modern_server(|req, id| {
                calls.push(req.to_string());
                call_ok(id, "hi")
            }),
        );
        assert!(op.outcome().is_ok(), "{:?}", op.failure());
        let want: &[&str] = if round == 0 {
            &["POST:server/discover", "POST:tools/list", "POST:tools/call"]
        } else {
            &["POST:tools/call"]
        };
        assert_eq!(
            seen.methods(),
            want,
            "round {round}: one probe and one list per run"
        );
        let probe = &seen.requests[0].1;
        if round == 0 {
            assert!(
                probe.contains("mcp-protocol-version: 2026-07-28\r\n"),
                "{probe}"
            );
            assert!(probe.contains("mcp-method: server/discover\r\n"), "{probe}");
            assert!(
                probe.contains(r#""params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"verifi-harness-sdk","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}"#),
                "{probe}"
            );
        }
    }
    assert_eq!(slot.era(Target::Primary), Some(true));
    assert_eq!(slot.take_era_news(), Some((Target::Primary, true)));
    assert_eq!(slot.take_era_news(), None, "a verdict is news once");
    let call = &calls[0];
    for header in [
        "mcp-protocol-version: 2026-07-28\r\n",
        "mcp-method: tools/call\r\n",
        "mcp-name: echo\r\n",
        "Mcp-Param-Region: =?base64?WsO8cmljaCA=?=\r\n",
    ] {
        assert!(call.contains(header), "missing {header:?} in {call}");
    }
    assert!(!call.contains("mcp-session-id"));
    assert!(
        call.contains(r#""arguments":{"text":"hi","region":"Zürich "},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28""#),
        "{call}"
    );
}

#[cfg(all(feature = "era-2025", feature = "probe"))]
#[test]
fn an_old_era_server_gets_initialize_after_its_400_and_the_verdict_is_kept() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    for round in 0..2 {
        let r = call_with(&c, &mut slot, &secrets, "echo", None, |req: &str| {
            match method_of(req).as_str() {
                // TS 1.32 stateful, as captured.
                "POST:server/discover" => error_body(400, -32000, "null"),
                "POST:initialize" => init_ok(id_of(req)),
                "POST:notifications/initialized" => status(202, ""),
                _ => {
                    assert!(
                        !req.contains("mcp-method"),
                        "old-era requests carry no Mcp-Method"
                    );
                    call_ok(id_of(req), "old")
                }
            }
        });
        assert!(r.failure.is_none(), "{:?}", r.failure.as_ref());
        if round == 0 {
            assert_eq!(
                r.seen.methods(),
                [
                    "POST:server/discover",
                    "POST:initialize",
                    "POST:notifications/initialized",
                    "POST:tools/call"
                ]
            );
        } else {
            assert_eq!(r.seen.methods(), ["POST:tools/call"]);
        }
    }
    assert_eq!(slot.era(Target::Primary), Some(false));
}

#[cfg(all(feature = "era-2025", feature = "probe"))]
#[test]
fn the_probe_verdict_table() {
    // (answer to the probe, what follows): modern answers go on in 2026, old-era ones to
    // initialize, failures fail the call naming the status and keep no verdict.
    #[derive(Debug, PartialEq)]
    enum Then {
        Modern,
        Legacy,
        Fails,
    }
    let cases: Vec<(&str, Reply, Then)> = vec![
        ("400 -32020", error_body(400, -32020, "1"), Then::Modern),
        ("400 -32021", error_body(400, -32021, "1"), Then::Modern),
        ("404 -32601", error_body(404, -32601, "1"), Then::Modern),
        ("400 -32000", error_body(400, -32000, "null"), Then::Legacy),
        ("400 -32602", error_body(400, -32602, "1"), Then::Legacy),
        ("404 plain", status(404, ""), Then::Legacy),
        ("405", status(405, ""), Then::Legacy),
        (
            "200 with an error",
            json(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#,
            ),
            Then::Legacy,
        ),
        // Issue 27: a result is modern only when its `supportedVersions` names ours; an old
        // server that answers any method with `{}` (with or without a session id) is old era.
        (
            "200 {} with a session id",
            json(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Then::Legacy,
        ),
        (
            "200 {} without a session id",
            Reply::Bytes(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}".to_vec(),
            ),
            Then::Legacy,
        ),
        (
            "200 with only versions we do not speak",
            json(r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2027-01-01"]}}"#),
            Then::Legacy,
        ),
        (
            "401",
            status(401, "www-authenticate: Bearer\r\n"),
            Then::Fails,
        ),
        ("403", status(403, ""), Then::Fails),
        ("500", status(500, ""), Then::Fails),
        ("503", status(503, ""), Then::Fails),
        (
            "empty 200",
            Reply::Bytes(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec()),
            Then::Fails,
        ),
        ("reset", Reply::Close, Then::Fails),
        ("timeout", Reply::Silence, Then::Fails),
    ];
    for (name, answer, then) in cases {
        let c = auto_cfg();
        let mut slot = SlotState::new(c.version, false);
        let secrets: [&str; 0] = [];
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
        let mut answer = Some(answer);
        let seen = run(&mut op, &mut slot, 0, |req: &str| {
            let id = id_of(req);
            match method_of(req).as_str() {
                "POST:server/discover" => answer.take().unwrap_or(Reply::Close),
                "POST:initialize" => init_ok(id),
                "POST:notifications/initialized" => status(202, ""),
                "POST:tools/list" => json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[]}}}}"#
                )),
                _ => call_ok(id, "x"),
            }
        });
        let methods = seen.methods();
        let got = if methods.contains(&"POST:initialize".to_string()) {
            Then::Legacy
        } else if methods.contains(&"POST:tools/call".to_string()) {
            Then::Modern
        } else {
            Then::Fails
        };
        assert_eq!(got, then, "{name}: {methods:?} {:?}", op.failure());
        match then {
            Then::Fails => {
                assert_eq!(slot.era(Target::Primary), None, "{name}: no verdict kept");
                assert_eq!(
                    methods,
                    ["POST:server/discover"],
                    "{name}: a probe never runs a tool"
                );
            }
            Then::Modern => assert_eq!(slot.era(Target::Primary), Some(true), "{name}"),
            Then::Legacy => assert_eq!(slot.era(Target::Primary), Some(false), "{name}"),
        }
    }
}

#[cfg(all(feature = "era-2025", feature = "probe"))]
#[test]
fn forced_eras_never_send_the_other_eras_opening() {
    let secrets: [&str; 0] = [];
    let mut c = cfg(false);
    c.era = EraSetting::Modern;
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, id| call_ok(id, "m")),
    );
    assert_eq!(r.seen.methods(), ["POST:tools/list", "POST:tools/call"]);
    // A legacy-only server under --era modern: the call fails naming the status.
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(&c, &mut slot, &secrets, "echo", None, |_| {
        error_body(400, -32000, "null")
    });
    assert!(!r.seen.methods().iter().any(|m| m == "POST:initialize"));
    assert!(matches!(
        r.failure.as_ref(),
        Some(Failure::Status { code: 400, .. })
    ));
    // --era legacy never probes.
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        with_handshake(|_, id| call_ok(id, "l")),
    );
    assert!(!r.seen.methods().iter().any(|m| m.contains("discover")));
}

#[cfg(feature = "probe")]
#[test]
fn a_header_mismatch_relists_and_sends_the_call_once_more_with_a_new_id() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", args(r#"{"region":"eu"}"#));
    let mut ids = Vec::new();
    let seen = run(
        &mut op,
        &mut slot,
        0,
        modern_server(|_, id| {
            ids.push(id);
            if ids.len() == 1 {
                error_body(400, -32020, &id.to_string())
            } else {
                call_ok(id, "ok")
            }
        }),
    );
    assert!(op.outcome().is_ok(), "{:?}", op.failure());
    assert_eq!(
        seen.methods(),
        [
            "POST:server/discover",
            "POST:tools/list",
            "POST:tools/call",
            "POST:tools/list",
            "POST:tools/call"
        ]
    );
    assert_ne!(ids[0], ids[1]);
    // A second -32020 is the call's failure (one re-list only).
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, id| error_body(400, -32020, &id.to_string())),
    );
    let calls = r
        .seen
        .methods()
        .iter()
        .filter(|m| *m == "POST:tools/call")
        .count();
    assert_eq!(calls, 2);
    assert!(matches!(
        r.failure.as_ref(),
        Some(Failure::Status { code: 400, .. })
    ));
}

#[cfg(feature = "probe")]
#[test]
fn a_tool_with_invalid_header_annotations_is_dropped_and_never_called() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "bad",
        None,
        modern_server(|_, _| panic!("never called")),
    );
    assert_eq!(
        r.seen.methods(),
        ["POST:server/discover", "POST:tools/list"]
    );
    assert!(matches!(r.failure.as_ref(), Some(Failure::ToolDropped)));
}

/// Issue 27, item 3: a `number`-typed annotated property makes its tool uncallable (the
/// official `invalid_number_header` check), a property reached through nested `properties`
/// (`opts.zone`) is valid and mirrored from that path of the arguments, and the server's other
/// tools stay callable.
#[cfg(feature = "probe")]
#[test]
fn header_annotations_number_is_refused_and_a_nested_property_is_mirrored() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut calls = Vec::new();
    let mut server = |req: &str| {
        let id = id_of(req);
        match method_of(req).as_str() {
            "POST:server/discover" => discover_ok(id),
            "POST:tools/list" => json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"num","inputSchema":{{"type":"object","properties":{{"n":{{"type":"number","x-mcp-header":"N"}}}}}}}},{{"name":"nested","inputSchema":{{"type":"object","properties":{{"opts":{{"type":"object","properties":{{"zone":{{"type":["string","null"],"x-mcp-header":"Zone"}}}}}}}}}}}}],"resultType":"complete"}}}}"#
            )),
            _ => {
                calls.push(req.to_string());
                call_ok(id, "ok")
            }
        }
    };
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "num",
        args(r#"{"n":1.5}"#),
        &mut server,
    );
    assert!(
        matches!(r.failure.as_ref(), Some(Failure::ToolDropped)),
        "{:?}",
        r.failure
    );
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "nested",
        args(r#"{"opts":{"zone":"eu-west"},"zone":"not this"}"#),
        &mut server,
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(calls.len(), 1, "the number-typed tool is never called");
    assert!(calls[0].contains("mcp-name: nested\r\n"), "{}", calls[0]);
    assert!(
        calls[0].contains("Mcp-Param-Zone: eu-west\r\n"),
        "{}",
        calls[0]
    );
}

fn unsupported(id: u64, supported: &str) -> Reply {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32022,"message":"Unsupported protocol version","data":{{"supported":{supported},"requested":"2026-07-28"}}}}}}"#
    );
    Reply::Bytes(
        format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// Issue 27, item 4: a `-32022` (also one that lists the very version we sent, as one
/// instance does during a rolling upgrade) sends the request once more under a new id at the
/// newest version both sides speak; a second one fails naming both lists; a list with no
/// version in common fails at once.
#[cfg(feature = "probe")]
#[test]
fn an_unsupported_version_is_retried_once_then_fails_naming_both_lists() {
    let secrets: [&str; 0] = [];
    // A rolling upgrade: the first instance refuses, the second answers.
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let mut ids = Vec::new();
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|req, id| {
            ids.push(id);
            assert!(
                req.contains("mcp-protocol-version: 2026-07-28\r\n"),
                "{req}"
            );
            if ids.len() == 1 {
                unsupported(id, r#"["2025-11-25","2026-07-28"]"#)
            } else {
                call_ok(id, "upgraded")
            }
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"upgraded");
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "a new id");
    // Refused twice: fails naming both lists, after exactly two calls.
    let mut slot = SlotState::new(c.version, false);
    let mut calls = 0;
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, id| {
            calls += 1;
            unsupported(id, r#"["2025-11-25","2026-07-28"]"#)
        }),
    );
    assert_eq!(calls, 2);
    let f = r.failure.expect("fails");
    assert!(matches!(f, Failure::VersionRefused(_)), "{f:?}");
    let text = f.to_string();
    assert!(
        text.contains("it speaks [2025-11-25, 2026-07-28]")
            && text.contains("this client speaks [2026-07-28]"),
        "{text}"
    );
    // No version in common: no retry.
    let mut slot = SlotState::new(c.version, false);
    let mut calls = 0;
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, id| {
            calls += 1;
            unsupported(id, r#"["2027-01-01"]"#)
        }),
    );
    assert_eq!(calls, 1);
    assert!(
        r.failure
            .as_ref()
            .is_some_and(|f| f.to_string().contains("it speaks [2027-01-01]")),
        "{:?}",
        r.failure
    );
    // The probe: refused twice with our own version listed, two probes, both lists named.
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(&c, &mut slot, &secrets, "echo", None, |req: &str| {
        unsupported(id_of(req), r#"["2026-07-28"]"#)
    });
    assert_eq!(
        r.seen.methods(),
        ["POST:server/discover", "POST:server/discover"]
    );
    let ids: Vec<u64> = r.seen.requests.iter().map(|(_, q)| id_of(q)).collect();
    assert_ne!(ids[0], ids[1]);
    let text = r.failure.expect("fails").to_string();
    assert!(
        text.contains("it speaks [2026-07-28]") && text.contains("this client speaks"),
        "{text}"
    );
}

#[cfg(all(feature = "probe", feature = "input"))]
#[test]
fn input_required_without_a_handler_is_one_call_and_says_what_was_asked() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, id| {
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"q":{{"method":"elicitation/create","params":{{"message":"Which port?"}}}}}},"requestState":"s"}}}}"#
            ))
        }),
    );
    let calls = r
        .seen
        .methods()
        .iter()
        .filter(|m| *m == "POST:tools/call")
        .count();
    assert_eq!(calls, 1);
    let f = r.failure.as_ref().expect("a failure");
    let text = f.to_string();
    assert!(
        text.contains("input") && text.contains("Which port?"),
        "{text}"
    );
    assert!(matches!(f, Failure::InputRequired(_)));
}

#[cfg(feature = "probe")]
#[test]
fn a_broken_2026_stream_after_a_written_call_may_have_run_and_is_not_sent_again() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        modern_server(|_, _| {
            Reply::Bytes(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":9,\"progress\":1}}\n\n".to_vec(),
            )
        }),
    );
    let calls = r
        .seen
        .methods()
        .iter()
        .filter(|m| *m == "POST:tools/call")
        .count();
    assert_eq!(calls, 1, "{:?}", r.seen.methods());
    assert!(
        !r.seen
            .methods()
            .iter()
            .any(|m| m == "GET" || m.contains("cancelled"))
    );
    assert!(matches!(r.failure.as_ref(), Some(Failure::MayHaveRun(_))));
    assert!(
        r.failure
            .as_ref()
            .unwrap()
            .to_string()
            .contains("may have run")
    );
}

#[cfg(feature = "probe")]
#[test]
fn concurrent_2026_calls_share_one_probe_and_one_tool_list() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let (mut s1, mut s2) = (Store::new(), Store::new());
    let (mut b1, mut b2) = (s1.bufs(), s2.bufs());
    let mut first = Op::call(&c, &mut b1, &secrets, "echo", None);
    let mut second = Op::call(&c, &mut b2, &secrets, "echo", None);
    // The first probes; the second waits on the slot.
    assert!(matches!(first.poll(&mut slot, 0), Action::Connect { .. }));
    assert_eq!(second.poll(&mut slot, 0), Action::Sleep { slot: true });
    // The first's probe is answered; it goes on to list the tools.
    first.handle_connected(false);
    assert_eq!(first.poll(&mut slot, 0), Action::Transmit);
    first.handle_sent(0, true);
    assert_eq!(first.poll(&mut slot, 0), Action::Receive);
    let Reply::Bytes(probe) = discover_ok(1) else {
        unreachable!()
    };
    first.read_buf()[..probe.len()].copy_from_slice(&probe);
    first.handle_read(0, probe.len());
    // (The probe's reply may leave the connection to recycle or to tail.)
    let mut action = first.poll(&mut slot, 0);
    while !matches!(action, Action::Connect { .. } | Action::Transmit) {
        if action == Action::Receive {
            first.handle_timeout(0);
        }
        action = first.poll(&mut slot, 0);
    }
    assert!(slot.take_changed(), "the probe's verdict wakes the waiter");
    // The waiter finds the list under way and waits for it, not a second tools/list.
    assert_eq!(second.poll(&mut slot, 0), Action::Sleep { slot: true });
    // The first ends (list, call); then the second calls straight away.
    if let Action::Connect { .. } = action {
        first.handle_connected(true);
    }
    let seen = run(
        &mut first,
        &mut slot,
        0,
        modern_server(|_, id| call_ok(id, "1")),
    );
    assert_eq!(seen.methods(), ["POST:tools/list", "POST:tools/call"]);
    assert!(slot.take_changed());
    let seen = run(
        &mut second,
        &mut slot,
        0,
        modern_server(|_, id| call_ok(id, "2")),
    );
    assert_eq!(seen.methods(), ["POST:tools/call"]);
    assert!(first.outcome().is_ok() && second.outcome().is_ok());
}

/// Found by the `machine` fuzz target: a call that timed out keeps its failure when the
/// courtesy `notifications/cancelled` fails too (it was lost, and the call looked answered).
#[cfg(feature = "era-2025")]
#[test]
fn a_timed_out_call_stays_timed_out_when_its_cancel_fails() {
    let c = cfg(false);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "scan",
        None,
        with_handshake(|req, _| {
            if req.contains("notifications/cancelled") {
                Reply::Close
            } else {
                Reply::Silence
            }
        }),
    );
    assert_eq!(
        r.seen.methods().last().unwrap(),
        "POST:notifications/cancelled"
    );
    assert!(
        matches!(
            r.failure.as_ref(),
            Some(Failure::CallTimedOut { sent: true, .. })
        ),
        "{:?}",
        r.failure.as_ref()
    );
    assert_eq!(r.answer, None);
}

// ---------------------------------------------------------------------------------------------
// Tasks (the 2026 era's tasks extension).

const TASK: &str = "tsk-6NkSxChLt69";

fn task_created(id: u64, interval: u64) -> Reply {
    json(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"{TASK}","status":"working","createdAt":"t","lastUpdatedAt":"t","ttlMs":900000,"pollIntervalMs":{interval},"resultType":"task"}}}}"#
    ))
}

fn task_status(id: u64, status: &str, extra: &str) -> Reply {
    json(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"{TASK}","status":"{status}","resultType":"complete"{extra}}}}}"#
    ))
}

/// A 2026 server whose `tools/call` becomes a task; `poll(n, req)` answers the n-th
/// `tasks/get` (from 0), `cancel` counts `tasks/cancel`.
fn task_server(
    interval: u64,
    mut poll: impl FnMut(usize, &str, u64) -> Reply,
) -> impl FnMut(&str) -> Reply {
    let mut polls = 0;
    modern_server(move |req, id| match method_of(req).as_str() {
        "POST:tools/call" => task_created(id, interval),
        "POST:tasks/get" => {
            polls += 1;
            poll(polls - 1, req, id)
        }
        "POST:tasks/cancel" => task_status(id, "cancelled", ""),
        other => panic!("unexpected {other}"),
    })
}

fn count(seen: &Seen, method: &str) -> usize {
    seen.methods().iter().filter(|m| *m == method).count()
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_task_is_polled_to_its_result_which_is_redacted_and_the_tool_ran_once() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets = ["hunter2-secret"];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(200, |n, req, id| {
            assert!(req.contains(&format!("mcp-name: {TASK}\r\n")), "{req}");
            assert!(req.contains(r#""io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#), "{req}");
            if n < 2 {
                task_status(id, "working", "")
            } else {
                task_status(
                    id,
                    "completed",
                    r#","result":{"content":[{"type":"text","text":"scanned; key hunter2-secret"}],"isError":false,"resultType":"complete"}"#,
                )
            }
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure.as_ref());
    assert_eq!(r.answer, Some(Answer::Result { is_error: false }));
    assert_eq!(count(&r.seen, "POST:tools/call"), 1);
    assert_eq!(count(&r.seen, "POST:tasks/get"), 3);
    assert_eq!(
        r.seen.task_started, 1,
        "the call says once that it became a task"
    );
    // The first poll at once, then a ramp from the floor.
    let polls: Vec<u64> = r
        .seen
        .requests
        .iter()
        .zip(&r.seen.times)
        .filter(|((_, r), _)| method_of(r) == "POST:tasks/get")
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(polls[0], 0);
    assert!(polls.windows(2).all(|w| w[1] - w[0] >= 20), "{polls:?}");
    assert_eq!(&r.text[..], b"scanned; key [REDACTED]");
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_tool_error_and_a_failed_task_say_the_tools_and_the_servers_words() {
    for (status, extra, want) in [
        (
            "completed",
            r#","result":{"content":[{"type":"text","text":"nmap: host down"}],"isError":true}"#,
            Answer::Result { is_error: true },
        ),
        (
            "failed",
            r#","error":{"code":-32000,"message":"scanner crashed"}"#,
            Answer::Refused {
                code: -32000,
                unknown_tool: false,
            },
        ),
    ] {
        let c = auto_cfg();
        let mut slot = SlotState::new(c.version, false);
        let secrets: [&str; 0] = [];
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
        run(
            &mut op,
            &mut slot,
            0,
            task_server(20, |_, _, id| task_status(id, status, extra)),
        );
        assert_eq!(op.answer(), Some(want), "{status}");
        drop(op);
        if status == "failed" {
            assert_eq!(
                bufs.error.bytes(),
                b"JSON-RPC error -32000: scanner crashed"
            );
        } else {
            assert_eq!(bufs.text.bytes(), b"nmap: host down");
        }
    }
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_reset_between_polls_loses_nothing_and_a_zero_interval_does_not_spin() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(0, |n, _, id| match n {
            1 => Reply::Close,
            _ if n < 40 => task_status(id, "working", r#","pollIntervalMs":0"#),
            _ => task_status(
                id,
                "completed",
                r#","result":{"content":[{"type":"text","text":"done"}]}"#,
            ),
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure.as_ref());
    assert_eq!(count(&r.seen, "POST:tools/call"), 1, "the tool ran once");
    // 41 polls (the first at once) at a 20 ms floor take at least 0.78 s: a 1 s task gets at
    // most ~50.
    assert!(
        r.seen.ended_at >= 39 * 20,
        "polls spun: ended at {} ms",
        r.seen.ended_at
    );
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn at_the_deadline_a_task_gets_exactly_one_cancel_and_the_error_names_it() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None);
    // An interval of 10^9 ms is capped by the deadline.
    let seen = run(
        &mut op,
        &mut slot,
        0,
        task_server(1_000_000_000, |_, _, id| task_status(id, "working", "")),
    );
    assert_eq!(count(&seen, "POST:tasks/cancel"), 1);
    assert_eq!(
        seen.methods().last().unwrap(),
        "POST:tasks/cancel",
        "no poll after it"
    );
    let text = op.failure().unwrap().to_string();
    assert!(text.contains("timed out") && text.contains(TASK), "{text}");
    assert!(
        seen.ended_at <= 10_000 + 1_000,
        "ended at {}",
        seen.ended_at
    );
}

#[cfg(all(feature = "probe", feature = "tasks", feature = "input"))]
#[test]
fn an_expired_task_a_cancelled_task_and_input_required_end_the_call_clearly() {
    let secrets: [&str; 0] = [];
    // Unknown or expired: 400 with -32602.
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(20, |_, _, id| error_body(400, -32602, &id.to_string())),
    );
    let text = r.failure.as_ref().unwrap().to_string();
    assert!(
        text.contains("not found or expired") && text.contains(TASK),
        "{text}"
    );
    assert_eq!(count(&r.seen, "POST:tools/call"), 1, "no new tools/call");
    // input_required with no handler: one tasks/cancel, no tasks/update.
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(20, |_, _, id| {
            task_status(
                id,
                "input_required",
                r#","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Which subnet?"}}}"#,
            )
        }),
    );
    assert_eq!(count(&r.seen, "POST:tasks/cancel"), 1);
    assert!(!r.seen.methods().iter().any(|m| m.contains("tasks/update")));
    let text = r.failure.as_ref().unwrap().to_string();
    assert!(
        text.contains("input") && text.contains("Which subnet?"),
        "{text}"
    );
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn with_tasks_off_a_task_reply_is_a_failure_and_never_polled() {
    let mut c = auto_cfg();
    c.capabilities.tasks = false;
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(20, |_, _, _| panic!("never polled")),
    );
    assert!(
        !r.seen.requests[0]
            .1
            .contains("io.modelcontextprotocol/tasks")
    );
    let text = r.failure.as_ref().unwrap().to_string();
    assert!(text.contains("task"), "{text}");
}

#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_task_never_fails_over_and_a_lost_server_is_named_with_the_task() {
    let mut c = auto_cfg();
    c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
    c.fallback_label = "http://127.0.0.1:9000";
    let mut slot = SlotState::new(c.version, true);
    let secrets: [&str; 0] = [];
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        None,
        task_server(20, |_, _, _| Reply::Close),
    );
    let text = r.failure.as_ref().unwrap().to_string();
    assert!(text.contains(TASK) && text.contains("lost"), "{text}");
    assert!(
        r.seen.requests.iter().all(|(t, _)| *t == Target::Primary),
        "nothing went to the fallback"
    );
    assert_eq!(count(&r.seen, "POST:tools/call"), 1);
}

/// The old era: a server's request on the call's stream gets an answer on the side (so a
/// server that waits for it does not hold the call), in the call's session, and the call goes
/// on to its result.
#[cfg(all(feature = "era-2025", feature = "tasks", feature = "input"))]
#[test]
fn requests_from_the_server_on_a_calls_stream_are_answered() {
    for (request, answer) in [
        (
            r#"{"jsonrpc":"2.0","id":"e-1","method":"elicitation/create","params":{"message":"Port?","requestedSchema":{}}}"#,
            r#"{"jsonrpc":"2.0","id":"e-1","result":{"action":"decline"}}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"this client has no handler for it"}}"#,
        ),
    ] {
        let c = cfg(false);
        let mut slot = SlotState::new(c.version, false);
        let secrets: [&str; 0] = [];
        let r = call_with(
            &c,
            &mut slot,
            &secrets,
            "ask",
            None,
            with_handshake(|_, id| {
                // The request, then (past one read) the result.
                let padding = format!(": {}\n\n", "x".repeat(1100));
                Reply::Bytes(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                         data: {request}\n\n{padding}\
                         data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ok\"}}]}}}}\n\n"
                    )
                    .into_bytes(),
                )
            }),
        );
        assert!(r.failure.is_none(), "{:?}", r.failure.as_ref());
        let answers: Vec<&String> = r
            .seen
            .requests
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.contains("\"result\"") || r.contains("\"error\""))
            .collect();
        assert_eq!(answers.len(), 1, "{:?}", r.seen.methods());
        assert!(answers[0].ends_with(answer), "{}", answers[0]);
        assert!(
            answers[0].contains("mcp-session-id: s-1\r\n"),
            "in the call's session"
        );
    }
}

/// A detached call ends as soon as its server makes it a task: the task's id comes back, no
/// `tasks/get` was sent, and the attempt counts as answered (no failover).
#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_detached_call_hands_back_its_task_without_polling() {
    let mut c = auto_cfg();
    c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
    c.fallback_label = "http://127.0.0.1:9000";
    let mut slot = SlotState::new(c.version, true);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::call(&c, &mut bufs, &secrets, "scan", None).detached();
    let seen = run(
        &mut op,
        &mut slot,
        0,
        task_server(20, |_, _, _| panic!("a detached call polls nothing")),
    );
    assert!(op.detached_task());
    assert_eq!(op.task_id(), Some(TASK));
    assert!(op.failure().is_none());
    assert_eq!(seen.reports, vec![AttemptOutcome::Answered]);
    assert_eq!(count(&seen, "POST:tools/call"), 1);
    assert!(seen.requests.iter().all(|(t, _)| *t == Target::Primary));

    // A server that answers at once: a detached call is an ordinary call.
    let mut slot = SlotState::new(c.version, true);
    let mut op = Op::call(&c, &mut bufs, &secrets, "echo", None).detached();
    run(
        &mut op,
        &mut slot,
        0,
        modern_server(|_, id| call_ok(id, "at once")),
    );
    assert!(!op.detached_task());
    assert_eq!(op.answer(), Some(Answer::Result { is_error: false }));
}

/// Attaching to a task polls it to its end with no `tools/call`, on the task's server alone,
/// and the server's `statusMessage` reaches the progress observer, redacted.
#[cfg(all(feature = "probe", feature = "tasks", feature = "observe"))]
#[test]
fn an_attached_call_polls_the_task_to_its_result_and_tells_its_status() {
    use std::sync::Mutex;
    use verifi_mcp_core::machine::{ProgressObserver, ProgressUpdate};
    let statuses = Mutex::new(Vec::<String>::new());
    let observe = |p: &ProgressUpdate<'_>| {
        assert_eq!(p.progress, "");
        statuses
            .lock()
            .unwrap()
            .push(p.message.unwrap_or("").to_owned());
    };
    let mut c = auto_cfg();
    c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
    c.fallback_label = "http://127.0.0.1:9000";
    c.on_progress = Some(ProgressObserver(&observe));
    let mut slot = SlotState::new(c.version, true);
    let secrets = ["hunter2-secret"];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::attach(&c, &mut bufs, &secrets, (Target::Fallback, "scan"), TASK);
    let seen = run(
        &mut op,
        &mut slot,
        0,
        task_server(20, |n, req, id| {
            assert!(req.contains(&format!(r#""taskId":"{TASK}""#)), "{req}");
            if n == 0 {
                task_status(
                    id,
                    "working",
                    r#","statusMessage":"host 3 of 9 (key hunter2-secret)""#,
                )
            } else {
                task_status(
                    id,
                    "completed",
                    r#","result":{"content":[{"type":"text","text":"9 hosts up"}]}"#,
                )
            }
        }),
    );
    assert!(op.failure().is_none(), "{:?}", op.failure());
    assert_eq!(op.answer(), Some(Answer::Result { is_error: false }));
    assert_eq!(count(&seen, "POST:tools/call"), 0);
    assert_eq!(count(&seen, "POST:tasks/get"), 2);
    assert!(
        seen.requests.iter().all(|(t, _)| *t == Target::Fallback),
        "the task's server alone"
    );
    drop(op);
    assert_eq!(bufs.text.bytes(), b"9 hosts up");
    assert_eq!(
        *statuses.lock().unwrap(),
        vec!["host 3 of 9 (key [REDACTED])".to_owned()]
    );
}

/// Attaching needs a 2026 server: an old-era one is told apart by the probe, and the call
/// fails saying so, sending nothing else.
#[cfg(all(feature = "era-2025", feature = "probe", feature = "tasks"))]
#[test]
fn attaching_to_a_task_on_an_old_era_server_fails_clearly() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::attach(&c, &mut bufs, &secrets, (Target::Primary, "scan"), TASK);
    let seen = run(
        &mut op,
        &mut slot,
        0,
        with_handshake(|req, _| match method_of(req).as_str() {
            "POST:server/discover" => status(400, ""),
            other => panic!("unexpected {other}"),
        }),
    );
    let f = op.failure().unwrap().to_string();
    assert!(f.contains("2026-07-28"), "{f}");
    assert_eq!(count(&seen, "POST:tasks/get"), 0);
    assert_eq!(count(&seen, "POST:tools/call"), 0);
}

/// While a call is a task, its in-flight record holds the task (for a dropped call's
/// `tasks/cancel`), not a request id; at the end it holds nothing.
#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_calls_in_flight_record_holds_its_task_while_it_polls() {
    use verifi_mcp_core::machine::InFlight;
    let in_flight = Box::leak(Box::new(InFlight::new()));
    let mut c = auto_cfg();
    c.in_flight = Some(in_flight);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let seen_task = std::cell::RefCell::new(Vec::new());
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "scan",
        None,
        task_server(20, |n, _, id| {
            seen_task
                .borrow_mut()
                .push((in_flight.get(), in_flight.task()));
            if n == 0 {
                task_status(id, "working", "")
            } else {
                task_status(id, "completed", r#","result":{"content":[]}"#)
            }
        }),
    );
    assert!(r.failure.is_none());
    for (request, task) in seen_task.borrow().iter() {
        assert_eq!(*request, None);
        let (target, id) = task.clone().unwrap();
        assert_eq!((target, id.as_str()), (Target::Primary, TASK));
    }
    assert_eq!(in_flight.get(), None);
    assert_eq!(in_flight.task(), None);
}

/// A task's own request (`tasks/get`, `tasks/cancel`) goes to its server alone, with the
/// task id as `Mcp-Name` and the extension declared; a refusal is the answer, not a failover.
#[cfg(all(feature = "probe", feature = "tasks"))]
#[test]
fn a_pinned_task_request_never_fails_over() {
    use verifi_mcp_core::wire::jsonrpc::Request;
    let mut c = auto_cfg();
    c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
    c.fallback_label = "http://127.0.0.1:9000";
    let mut slot = SlotState::new(c.version, true);
    let secrets: [&str; 0] = [];
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::pinned_request(
        &c,
        &mut bufs,
        &secrets,
        Target::Primary,
        Request::TaskCancel { task: TASK },
    );
    let seen = run(
        &mut op,
        &mut slot,
        0,
        modern_server(|req, id| {
            assert!(req.contains(&format!("mcp-name: {TASK}\r\n")), "{req}");
            assert!(req.contains("io.modelcontextprotocol/tasks"), "{req}");
            error_body(400, -32602, &id.to_string())
        }),
    );
    assert!(op.list_outcome().is_err());
    assert!(seen.requests.iter().all(|(t, _)| *t == Target::Primary));
    assert_eq!(count(&seen, "POST:tasks/cancel"), 1);
}

// ---------------------------------------------------------------------------------------------
// Input: elicitation answered by the slot's policy, in both eras.

/// The body of the request in `req` (after the head).
fn body_of(req: &str) -> serde_json::Value {
    let body = req.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const ASK_PORT: &str = r#""inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Scan which port?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","default":true},"port":{"type":"integer","default":443},"note":{"type":"string"}},"required":["ok"]}}}},"requestState":"st-\u00e9-1""#;

/// A 2026 server whose first `tools/call` asks [`ASK_PORT`]; the next one must answer
/// `confirm` with `want`, and gets `text` back.
fn asks_once(want: serde_json::Value, text: &'static str) -> impl FnMut(&str) -> Reply {
    let mut rounds = 0;
    modern_server(move |req, id| {
        rounds += 1;
        if rounds == 1 {
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required",{ASK_PORT}}}}}"#
            ))
        } else {
            assert_eq!(body_of(req)["params"]["inputResponses"]["confirm"], want);
            call_ok(id, text)
        }
    })
}

/// With `accept-defaults`, an `input_required` round is answered with the schema's defaults,
/// the `requestState` echoed, under a new id; the next answer is the result. Elicitation is
/// declared in `_meta`.
#[cfg(all(feature = "probe", feature = "input"))]
#[test]
fn input_required_with_a_handler_answers_with_defaults_and_echoes_the_state() {
    use verifi_mcp_core::machine::Elicitation;
    let mut c = auto_cfg();
    c.elicitation = Some(Elicitation::AcceptDefaults);
    let mut slot = SlotState::new(c.version, false);
    let secrets: [&str; 0] = [];
    let mut rounds = 0;
    let r = call_with(
        &c,
        &mut slot,
        &secrets,
        "echo",
        args(r#"{"text":"x","region":"eu"}"#),
        modern_server(|req, id| {
            assert!(req.contains(r#""elicitation":{}"#), "declared: {req}");
            assert!(req.contains("Mcp-Param-Region: eu\r\n"), "{req}");
            rounds += 1;
            let params = &body_of(req)["params"];
            if rounds == 1 {
                assert!(params.get("inputResponses").is_none());
                json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required",{ASK_PORT}}}}}"#
                ))
            } else {
                assert_eq!(
                    params["inputResponses"],
                    serde_json::json!({"confirm": {"action": "accept", "content": {"ok": true, "port": 443}}})
                );
                assert_eq!(params["requestState"], "st-é-1");
                assert_eq!(
                    params["arguments"],
                    serde_json::json!({"text":"x","region":"eu"})
                );
                call_ok(id, "scanned 443")
            }
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"scanned 443");
    let ids: Vec<u64> = r
        .seen
        .requests
        .iter()
        .filter(|(_, q)| method_of(q) == "POST:tools/call")
        .map(|(_, q)| id_of(q))
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "each round has a fresh id");
}

/// `decline` and `cancel` answer with that action; a request that is not an elicitation
/// (sampling) cannot be answered, so the call fails after one `tools/call`, saying what was
/// asked; a server that keeps asking is stopped after 8 rounds.
#[cfg(all(feature = "probe", feature = "input"))]
#[test]
fn input_rounds_decline_cancel_unanswerable_requests_and_the_round_cap() {
    use verifi_mcp_core::machine::Elicitation;
    for (policy, action) in [
        (Elicitation::Decline, "decline"),
        (Elicitation::Cancel, "cancel"),
    ] {
        let mut c = auto_cfg();
        c.elicitation = Some(policy);
        let mut slot = SlotState::new(c.version, false);
        let want = serde_json::json!({ "action": action });
        let r = call_with(&c, &mut slot, &[], "echo", None, asks_once(want, "done"));
        assert!(r.failure.is_none(), "{policy:?}: {:?}", r.failure);
    }

    let mut c = auto_cfg();
    c.elicitation = Some(Elicitation::AcceptDefaults);
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "echo",
        None,
        modern_server(|_, id| {
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"s":{{"method":"sampling/createMessage","params":{{"messages":[]}}}}}}}}}}"#
            ))
        }),
    );
    assert_eq!(count(&r.seen, "POST:tools/call"), 1);
    let f = r.failure.expect("a failure").to_string();
    assert!(
        f.contains("input") && f.contains("sampling/createMessage"),
        "{f}"
    );

    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "echo",
        None,
        modern_server(|_, id| {
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required",{ASK_PORT}}}}}"#
            ))
        }),
    );
    assert_eq!(
        count(&r.seen, "POST:tools/call"),
        9,
        "the first call and 8 answered rounds"
    );
    let f = r.failure.expect("a failure").to_string();
    assert!(f.contains("input") && f.contains("8"), "{f}");
}

/// The old era: elicitation is declared in `initialize` exactly when there is a handler, and
/// an `elicitation/create` on the call's stream is answered under the policy (defaults filled
/// in; a required field without a default is declined).
#[cfg(all(feature = "era-2025", feature = "tasks", feature = "input"))]
#[test]
fn old_era_elicitation_is_declared_and_answered_under_the_policy() {
    use verifi_mcp_core::machine::Elicitation;
    let schema_ok = r#"{"type":"object","properties":{"ok":{"type":"boolean","default":true}},"required":["ok"]}"#;
    let schema_no_default =
        r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;
    for (policy, schema, answer, declared) in [
        (
            Some(Elicitation::AcceptDefaults),
            schema_ok,
            r#"{"action":"accept","content":{"ok":true}}"#,
            true,
        ),
        (
            Some(Elicitation::AcceptDefaults),
            schema_no_default,
            r#"{"action":"decline"}"#,
            true,
        ),
        (
            Some(Elicitation::Cancel),
            schema_ok,
            r#"{"action":"cancel"}"#,
            true,
        ),
        (None, schema_ok, r#"{"action":"decline"}"#, false),
    ] {
        let mut c = cfg(false);
        c.elicitation = policy;
        let mut slot = SlotState::new(c.version, false);
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let secrets: [&str; 0] = [];
        let mut op = Op::call(&c, &mut bufs, &secrets, "ask", None);
        let seen = run(&mut op, &mut slot, 0, move |req: &str| {
            let id = id_of(req);
            match method_of(req).as_str() {
                "POST:initialize" => {
                    let caps = &body_of(req)["params"]["capabilities"];
                    assert_eq!(caps.get("elicitation").is_some(), declared, "{req}");
                    init_ok(id)
                }
                "POST:notifications/initialized" => status(202, ""),
                _ => {
                    let request = format!(
                        r#"{{"jsonrpc":"2.0","id":"e-1","method":"elicitation/create","params":{{"message":"Go?","requestedSchema":{schema}}}}}"#
                    );
                    let padding = format!(": {}\n\n", "x".repeat(1100));
                    Reply::Bytes(format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                         data: {request}\n\n{padding}\
                         data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ok\"}}]}}}}\n\n"
                    ).into_bytes())
                }
            }
        });
        assert!(op.failure().is_none(), "{:?}", op.failure());
        let answered: Vec<&String> = seen
            .requests
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.contains(r#""id":"e-1""#))
            .collect();
        assert_eq!(answered.len(), 1, "{policy:?}");
        let body = body_of(answered[0]);
        let want: serde_json::Value = serde_json::from_str(answer).unwrap();
        assert_eq!(body["result"], want, "{policy:?}");
    }
}

/// A task that needs input: with a policy, its requests are answered with one `tasks/update`
/// (the task id and `inputResponses`), then polling goes on to the result; the tool ran once.
#[cfg(all(feature = "probe", feature = "tasks", feature = "input"))]
#[test]
fn a_task_that_needs_input_gets_a_tasks_update_under_the_policy() {
    use verifi_mcp_core::machine::Elicitation;
    let mut c = auto_cfg();
    c.elicitation = Some(Elicitation::AcceptDefaults);
    let mut slot = SlotState::new(c.version, false);
    let mut updated = false;
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "scan",
        None,
        modern_server(move |req, id| match method_of(req).as_str() {
            "POST:tools/call" => task_created(id, 20),
            "POST:tasks/update" => {
                let params = &body_of(req)["params"];
                assert_eq!(params["taskId"], TASK);
                assert_eq!(
                    params["inputResponses"],
                    serde_json::json!({"confirm": {"action": "accept", "content": {"ok": true, "port": 443}}})
                );
                assert!(req.contains(&format!("mcp-name: {TASK}\r\n")), "{req}");
                updated = true;
                json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete"}}}}"#
                ))
            }
            "POST:tasks/get" if !updated => task_status(
                id,
                "input_required",
                &format!(
                    ",{}",
                    ASK_PORT.replace(r#","requestState":"st-\u00e9-1""#, "")
                ),
            ),
            "POST:tasks/get" => task_status(
                id,
                "completed",
                r#","result":{"content":[{"type":"text","text":"scanned 443"}]}"#,
            ),
            other => panic!("unexpected {other}"),
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"scanned 443");
    assert_eq!(count(&r.seen, "POST:tools/call"), 1);
    assert_eq!(count(&r.seen, "POST:tasks/update"), 1);
    assert_eq!(count(&r.seen, "POST:tasks/cancel"), 0);
}

/// A broken 2026 stream after a written call: a tool the server's list annotates
/// `idempotentHint: true` is sent once more (new id) and answers; any other is not sent
/// again and may have run.
#[cfg(feature = "probe")]
#[test]
fn only_an_idempotent_tool_is_sent_again_after_a_broken_stream() {
    let broken = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n".to_vec();
    for (tool, calls, ok) in [("lookup", 2, true), ("scan", 1, false)] {
        let c = auto_cfg();
        let mut slot = SlotState::new(c.version, false);
        let mut n = 0;
        let broken = broken.clone();
        let r = call_with(&c, &mut slot, &[], tool, None, move |req: &str| {
            let id = id_of(req);
            match method_of(req).as_str() {
                "POST:server/discover" => discover_ok(id),
                "POST:tools/list" => json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"lookup","inputSchema":{{"type":"object"}},"annotations":{{"idempotentHint":true,"readOnlyHint":true}}}},{{"name":"scan","inputSchema":{{"type":"object"}},"annotations":{{"idempotentHint":false}}}}]}}}}"#
                )),
                "POST:tools/call" => {
                    n += 1;
                    if n == 1 {
                        Reply::Bytes(broken.clone())
                    } else {
                        call_ok(id, "found")
                    }
                }
                other => panic!("unexpected {other}"),
            }
        });
        assert_eq!(count(&r.seen, "POST:tools/call"), calls, "{tool}");
        assert_eq!(r.failure.is_none(), ok, "{tool}: {:?}", r.failure);
        if ok {
            assert_eq!(r.text, b"found");
            let ids: Vec<u64> = r
                .seen
                .requests
                .iter()
                .filter(|(_, q)| method_of(q) == "POST:tools/call")
                .map(|(_, q)| id_of(q))
                .collect();
            assert_ne!(ids[0], ids[1]);
        } else {
            assert!(
                matches!(r.failure, Some(Failure::MayHaveRun(_))),
                "{:?}",
                r.failure
            );
        }
    }
}

/// A server that changed era between calls (upgraded to 2026, or rolled back to the old era)
/// says so in its answer; the slot probes it once more and the call goes on in the new era.
#[cfg(all(feature = "era-2025", feature = "probe", feature = "input"))]
#[test]
fn a_server_that_changed_era_is_probed_once_more() {
    let rpc_error = |status_code: u16, code: i64, id: u64| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"Bad Request: Server not initialized"}}}}"#
        );
        Reply::Bytes(
            format!(
                "HTTP/1.1 {status_code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    };
    for upgrade in [true, false] {
        let c = auto_cfg();
        let mut slot = SlotState::new(c.version, false);
        let modern_now = std::cell::Cell::new(!upgrade);
        let mut server = |req: &str| {
            let id = id_of(req);
            let method = method_of(req);
            let modern_req = req.contains("mcp-protocol-version: 2026-07-28");
            match (modern_now.get(), method.as_str()) {
                (true, "POST:server/discover") => discover_ok(id),
                (true, "POST:tools/list") => json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[]}}}}"#
                )),
                (true, "POST:tools/call") if modern_req => call_ok(id, "modern"),
                (true, _) => rpc_error(400, -32021, id),
                (false, "POST:initialize") => init_ok(id),
                (false, "POST:notifications/initialized") => status(202, ""),
                (false, "POST:tools/call") if !modern_req => call_ok(id, "legacy"),
                (false, _) => rpc_error(400, -32000, id),
            }
        };
        let first = call_with(&c, &mut slot, &[], "echo", None, &mut server);
        assert!(first.failure.is_none(), "{:?}", first.failure);
        modern_now.set(upgrade);
        let second = call_with(&c, &mut slot, &[], "echo", None, &mut server);
        assert!(
            second.failure.is_none(),
            "upgrade {upgrade}: {:?}",
            second.failure
        );
        assert_eq!(
            second.text,
            if upgrade {
                b"modern".as_slice()
            } else {
                b"legacy"
            }
        );
        assert_eq!(
            count(&second.seen, "POST:server/discover"),
            1,
            "one probe more"
        );
        assert_eq!(slot.era(Target::Primary), Some(upgrade));
    }
}

/// The caller's own elicitation handler answers before any policy, in both eras: it gets the
/// request's params and its result object is sent as written.
#[cfg(all(
    feature = "era-2025",
    feature = "probe",
    feature = "tasks",
    feature = "input"
))]
#[test]
fn a_callers_elicitation_handler_answers_in_both_eras() {
    use verifi_mcp_core::buf::{Overflow, Sink};
    use verifi_mcp_core::machine::{ElicitHandler, Elicitation};
    fn answer(params: Value<'_>, out: &mut dyn Sink) -> Result<(), Overflow> {
        let message = params.get("message").and_then(|m| m.as_str());
        assert!(message.is_some_and(|m| m.eq_str("Scan which port?")));
        out.put(br#"{"action":"accept","content":{"ok":true,"port":8443}}"#)
    }
    let handler = ElicitHandler(&answer);
    let want = serde_json::json!({"action":"accept","content":{"ok":true,"port":8443}});

    // 2026: input_required rounds.
    let mut c = auto_cfg();
    c.elicit_with = Some(handler);
    c.elicitation = Some(Elicitation::Decline); // the handler goes first
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "echo",
        None,
        asks_once(want.clone(), "scanned 8443"),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"scanned 8443");

    // The old era: elicitation/create on the call's stream.
    let mut c = cfg(false);
    c.elicit_with = Some(handler);
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "ask",
        None,
        with_handshake(|_, id| {
            let request = r#"{"jsonrpc":"2.0","id":"e-1","method":"elicitation/create","params":{"message":"Scan which port?","requestedSchema":{"type":"object","properties":{}}}}"#;
            let padding = format!(": {}\n\n", "x".repeat(1100));
            Reply::Bytes(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
             data: {request}\n\n{padding}\
             data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ok\"}}]}}}}\n\n"
        ).into_bytes())
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let answered: Vec<&String> = r
        .seen
        .requests
        .iter()
        .map(|(_, q)| q)
        .filter(|q| q.contains(r#""id":"e-1""#))
        .collect();
    assert_eq!(answered.len(), 1);
    assert_eq!(body_of(answered[0])["result"], want);
    assert_eq!(r.text, b"ok");
}

/// The 2025-11-25 form of tasks (SEP-1686): in a session at that version, the server's list
/// says which tools run only as tasks; such a call carries `params.task`, its wrapped task is
/// polled with `tasks/get`, and the result is fetched with `tasks/result`. Other tools are
/// called as always.
#[cfg(all(feature = "era-2025", feature = "tasks"))]
#[test]
fn a_task_required_tool_in_a_2025_11_25_session_runs_as_a_task() {
    use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;
    let mut c = cfg(false);
    c.version = ProtocolVersion::V2025_11_25;
    let mut slot = SlotState::new(c.version, false);
    let server = |polls: std::rc::Rc<std::cell::Cell<u32>>| {
        move |req: &str| {
            let id = id_of(req);
            let params = if req.contains("\r\n\r\n{") {
                body_of(req)["params"].clone()
            } else {
                serde_json::Value::Null
            };
            match method_of(req).as_str() {
                "POST:initialize" => json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tasks":{{"requests":{{"tools":{{"call":{{}}}}}}}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
                )),
                "POST:notifications/initialized" => status(202, ""),
                "POST:tools/list" => json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"research","inputSchema":{{"type":"object"}},"execution":{{"taskSupport":"required"}}}},{{"name":"echo","inputSchema":{{"type":"object"}},"execution":{{"taskSupport":"forbidden"}}}}]}}}}"#
                )),
                "POST:tools/call" if params["name"] == "research" => {
                    assert_eq!(params["task"], serde_json::json!({}), "called as a task");
                    json(&format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"task":{{"taskId":"{TASK}","status":"working","ttl":300000,"pollInterval":20,"statusMessage":"Gathering sources..."}}}}}}"#
                    ))
                }
                "POST:tools/call" => {
                    assert!(params.get("task").is_none(), "{req}");
                    call_ok(id, "echoed")
                }
                "POST:tasks/get" => {
                    assert_eq!(params["taskId"], TASK);
                    polls.set(polls.get() + 1);
                    let status = if polls.get() < 2 {
                        "working"
                    } else {
                        "completed"
                    };
                    json(&format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"{TASK}","status":"{status}","pollInterval":20}}}}"#
                    ))
                }
                "POST:tasks/result" => {
                    assert_eq!(params["taskId"], TASK);
                    json(&format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"Research Report"}}],"_meta":{{"io.modelcontextprotocol/related-task":{{"taskId":"{TASK}"}}}}}}}}"#
                    ))
                }
                other => panic!("unexpected {other}"),
            }
        }
    };
    let polls = std::rc::Rc::new(std::cell::Cell::new(0));
    let r = call_with(&c, &mut slot, &[], "research", None, server(polls.clone()));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"Research Report");
    assert_eq!(
        r.seen.methods(),
        [
            "POST:initialize",
            "POST:notifications/initialized",
            "POST:tools/list",
            "POST:tools/call",
            "POST:tasks/get",
            "POST:tasks/get",
            "POST:tasks/result"
        ]
    );
    // The list is kept: the next call of another tool is an ordinary call.
    let r = call_with(&c, &mut slot, &[], "echo", None, server(polls));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.seen.methods(), ["POST:tools/call"]);
    assert_eq!(r.text, b"echoed");
}

/// Every request of a task has an id of its own: a `tasks/update` or `tasks/cancel` never
/// reuses the `tasks/get` before it.
#[cfg(all(feature = "probe", feature = "tasks", feature = "input"))]
#[test]
fn a_tasks_update_and_cancel_have_ids_of_their_own() {
    use verifi_mcp_core::machine::Elicitation;
    let mut c = auto_cfg();
    c.elicitation = Some(Elicitation::AcceptDefaults);
    c.timeout_ms = 2_000;
    let mut slot = SlotState::new(c.version, false);
    let mut updated = false;
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "scan",
        None,
        modern_server(move |req, id| {
            match method_of(req).as_str() {
                "POST:tools/call" => task_created(id, 50),
                "POST:tasks/update" => {
                    updated = true;
                    json(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#))
                }
                "POST:tasks/get" if !updated => task_status(
                    id,
                    "input_required",
                    &format!(
                        ",{}",
                        ASK_PORT.replace(r#","requestState":"st-\u00e9-1""#, "")
                    ),
                ),
                // Working after the update until the deadline: then one tasks/cancel.
                "POST:tasks/get" => task_status(id, "working", ""),
                "POST:tasks/cancel" => task_status(id, "cancelled", ""),
                other => panic!("unexpected {other}"),
            }
        }),
    );
    let f = r.failure.expect("timed out").to_string();
    assert!(f.contains("timed out") && f.contains(TASK), "{f}");
    assert_eq!(count(&r.seen, "POST:tasks/update"), 1);
    assert_eq!(count(&r.seen, "POST:tasks/cancel"), 1);
    let ids: Vec<u64> = r
        .seen
        .requests
        .iter()
        .map(|(_, q)| id_of(q))
        .filter(|&i| i != 0)
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "an id was sent twice: {ids:?}");
}

/// A reply stream that has not ended when the tail read gives up: the answer is handed back
/// and the connection is parked with what is left of its framing (not closed), so an adapter
/// can keep it once the stream ends.
#[cfg(feature = "probe")]
#[test]
fn a_late_ending_stream_is_parked_with_its_tail() {
    let c = auto_cfg();
    let mut slot = SlotState::new(c.version, false);
    let r = call_with(
        &c,
        &mut slot,
        &[],
        "echo",
        None,
        modern_server(|_, id| {
            let event = format!(
                "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"late\"}}]}}}}\n\n"
            );
            // Chunked, and the terminating chunk does not come.
            Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                event.len()
            )
            .into_bytes(),
        )
        }),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.text, b"late");
    assert_eq!(
        r.seen.parked, 1,
        "the call's connection is parked, not closed"
    );
}

/// A request other than `tools/call` and the lists (`ping`, `resources/read`, …), or a list
/// other than `tools/list`, is made by
/// every build but the edge's one-era build (no `std`, no `era-2025`), where it is refused
/// before any server is asked (that adapter makes none, and its machine leaves them out).
#[test]
fn a_request_or_other_list_is_refused_only_by_the_one_era_edge_build() {
    let one_era_edge = !cfg!(feature = "std") && !cfg!(feature = "era-2025");
    let c = cfg(false);
    let secrets: [&[u8]; 0] = [];
    let mut slot = SlotState::new(c.version, false);
    let mut store = Store::new();
    let mut bufs = store.bufs();
    let mut op = Op::request(
        &c,
        &mut bufs,
        &secrets,
        verifi_mcp_core::wire::jsonrpc::Request::Ping,
    );
    let first = op.poll(&mut slot, 0);
    refused_as_not_built(one_era_edge, first, op.list_outcome());
    // So is a list other than `tools/list`; that one is listed by every build.
    for list in [ListMethod::Resources, ListMethod::Tools] {
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut op = Op::list(&c, &mut bufs, &secrets, list, |_| {});
        let first = op.poll(&mut slot, 0);
        refused_as_not_built(
            one_era_edge && list != ListMethod::Tools,
            first,
            op.list_outcome(),
        );
    }
}

/// When `refused`, the op ended at its first poll, refused as not built; else it went on.
fn refused_as_not_built(
    refused: bool,
    first: Action,
    outcome: Result<(), verifi_mcp_core::machine::ListError>,
) {
    if refused {
        assert!(matches!(first, Action::Done), "{first:?}");
        assert!(matches!(
            outcome,
            Err(verifi_mcp_core::machine::ListError::Unreachable(
                Failure::NotBuilt {
                    capability: "era-2025",
                    ..
                }
            ))
        ));
    } else {
        assert!(!matches!(first, Action::Done), "{first:?}");
    }
}

/// A 2026 call's stream carries a progress notification and a server log line before its
/// result. Every build reads past both and takes the result, and progress still counts (the
/// call asks for it with a progress token whenever progress extends it). Only a build with
/// the `observe` feature hands them to the slot's observers (redacted) and asks for log lines
/// at the observer's level (the `logLevel` `_meta` key); without it neither is asked for nor
/// told, and its `SlotConfig` has no observer to set.
#[cfg(feature = "era-2026")]
#[test]
fn progress_and_log_lines_reach_observers_only_in_a_build_that_observes() {
    use std::sync::Mutex;
    let mut c = cfg(false);
    c.era = EraSetting::Modern;
    c.progress_extends_to_ms = Some(60_000);
    // The slot's config is `'static` here: so are its observers and what they keep.
    let logs: &'static Mutex<Vec<String>> = Box::leak(Box::default());
    let progress: &'static Mutex<Vec<String>> = Box::leak(Box::default());
    let keep_log: &'static _ = Box::leak(Box::new(
        move |m: &verifi_mcp_core::machine::LogMessage<'_>| {
            logs.lock()
                .unwrap()
                .push(format!("{}: {}", m.level.as_str(), m.data));
        },
    ));
    let keep_progress: &'static _ = Box::leak(Box::new(
        move |p: &verifi_mcp_core::machine::ProgressUpdate<'_>| {
            progress
                .lock()
                .unwrap()
                .push(format!("{} {:?}", p.progress, p.message));
        },
    ));
    #[cfg(feature = "observe")]
    {
        c.on_log = Some(verifi_mcp_core::machine::LogObserver(keep_log));
        c.log_level = verifi_mcp_core::machine::LogLevel::Info;
        c.on_progress = Some(verifi_mcp_core::machine::ProgressObserver(keep_progress));
    }
    let _ = (keep_log, keep_progress);
    let mut slot = SlotState::new(c.version, false);
    let mut call_request = String::new();
    let called = call_with(
        &c,
        &mut slot,
        &["s3cret"],
        "echo",
        args(r#"{"text":"hi"}"#),
        modern_server(|req, id| {
            call_request = req.to_string();
            let events = [
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":1,"total":2,"message":"half of s3cret"}}}}"#
                ),
                r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"disk","data":"s3cret almost full"}}"#.to_string(),
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}],"isError":false,"resultType":"complete"}}}}"#
                ),
            ];
            let mut reply = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            );
            for e in events {
                reply.push_str(&format!("data: {e}\n\n"));
            }
            Reply::Bytes(reply.into_bytes())
        }),
    );
    assert!(called.failure.is_none(), "{:?}", called.failure);
    assert_eq!(called.text, b"done");
    assert!(
        call_request.contains(r#""progressToken":"#),
        "progress extends the call, so it is asked for: {call_request}"
    );
    let observes = cfg!(feature = "observe");
    assert_eq!(
        call_request.contains(r#""io.modelcontextprotocol/logLevel":"info""#),
        observes,
        "{call_request}"
    );
    let (logs, progress) = (
        logs.lock().unwrap().clone(),
        progress.lock().unwrap().clone(),
    );
    if observes {
        assert_eq!(logs, ["warning: [REDACTED] almost full"]);
        assert_eq!(progress, [r#"1 Some("half of [REDACTED]")"#]);
    } else {
        assert!(logs.is_empty() && progress.is_empty());
    }
}

/// A 2026 tools/list of two pages keeps the list as long as the least `ttlMs` of its pages
/// (the whole list is fresh only while every page is), a page without one, or with a negative
/// one, counting 0 (the spec's default), handed to the slot once, when the list is read to its end; a list that
/// fails hands none.
#[cfg(feature = "era-2026")]
#[test]
fn a_paged_lists_ttl_is_the_least_of_its_pages() {
    let mut c = cfg(false);
    c.era = EraSetting::Modern;
    let secrets: [&str; 0] = [];
    for (ttls, second_fails, expect) in [
        ((Some("5000"), Some("60000")), false, Some(5_000)),
        ((Some("60000"), Some("5000")), false, Some(5_000)),
        ((Some("5000"), None), false, Some(0)),
        ((None, None), false, Some(0)),
        // A negative one is read as 0 (the spec: ignored, treated as 0).
        ((Some("5000"), Some("-1")), false, Some(0)),
        ((Some("5000"), Some("60000")), true, None),
    ] {
        let mut slot = SlotState::new(c.version, false);
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut items = 0;
        let mut op = Op::list(&c, &mut bufs, &secrets, ListMethod::Tools, |_| items += 1);
        run(&mut op, &mut slot, 0, |req| {
            let id = id_of(req);
            let (page, ttl) = if req.contains(r#""cursor":"p2""#) {
                if second_fails {
                    return status(500, "");
                }
                (r#"{"name":"b","inputSchema":{"type":"object"}}], "#, ttls.1)
            } else {
                (
                    r#"{"name":"a","inputSchema":{"type":"object"}}], "nextCursor":"p2", "#,
                    ttls.0,
                )
            };
            let ttl = ttl.map_or(String::new(), |t| format!(r#""ttlMs":{t},"#));
            json(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{page}{ttl}"resultType":"complete"}}}}"#
            ))
        });
        let ok = op.list_outcome().is_ok();
        drop(op);
        assert_eq!(ok, !second_fails);
        assert_eq!(items, if second_fails { 1 } else { 2 });
        assert_eq!(slot.take_tools_ttl_ms(), expect, "pages' ttlMs {ttls:?}");
    }
}

/// A 2025-era tools/list has no lifetime, whatever its result carries: the slot is handed
/// none, and the list is kept until its server says it changed.
#[cfg(feature = "era-2025")]
#[test]
fn a_2025_list_hands_no_ttl() {
    let c = cfg(false);
    let secrets: [&str; 0] = [];
    for page in [r#""tools":[]"#, r#""tools":[],"ttlMs":5000"#] {
        let mut slot = SlotState::new(c.version, false);
        let mut store = Store::new();
        let mut bufs = store.bufs();
        let mut op = Op::list(&c, &mut bufs, &secrets, ListMethod::Tools, |_| {});
        run(
            &mut op,
            &mut slot,
            0,
            with_handshake(|_, id| {
                json(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{{page}}}}}"#
                ))
            }),
        );
        assert!(op.list_outcome().is_ok(), "{:?}", op.failure());
        drop(op);
        assert_eq!(slot.take_tools_ttl_ms(), None, "{page}");
    }
}
