//! The generic driver against a scripted in-memory server, on a virtual clock.
//!
//! The server here is a byte-level script (it answers each request with exactly the bytes a
//! case needs), so the driver's sequencing is tested at every step without sockets: lazy
//! handshake, session reuse, the 404 re-initialization, SSE and JSON replies, failover,
//! metering, the timeline, redaction and timeouts (the clock jumps, nothing sleeps).
//! The same behaviours are tested against real servers over real TCP in the `tests` crate.
// Its script is a handshake-era server (feature `era-2025`); a one-era 2026 build skips it.
#![cfg(all(feature = "drive", feature = "era-2025"))]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

// With `std` the core's own `VecBuf` (the host's in-place reply path); without it, the tests'.
#[cfg(feature = "std")]
use verifi_mcp_core::buf::VecBuf;
#[cfg(not(feature = "std"))]
#[path = "support/vec_buf.rs"]
mod vec_buf;
#[cfg(not(feature = "std"))]
use vec_buf::VecBuf;
use verifi_mcp_core::drive::{self, CallBuffers, Millis, Net, SlotConfig, SlotState};
use verifi_mcp_core::harness::events::{Timeline, TimelineEvent};
use verifi_mcp_core::harness::meter::{Ledger, LedgerRecord};
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind};
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

/// The head and read scratch of one call (16 KiB head, 4 KiB reads).
fn scratch() -> (Vec<u8>, Vec<u8>) {
    (vec![0u8; 16 * 1024], vec![0u8; 4096])
}

/// Roomy call buffers over `scratch()`: 64 KiB requests, 1 MiB replies and texts.
fn call_buffers<'b>(head: &'b mut [u8], read: &'b mut [u8]) -> CallBuffers<'b, VecBuf> {
    CallBuffers {
        request: VecBuf::new(64 * 1024),
        head,
        read,
        reply: VecBuf::new(1 << 20),
        text: VecBuf::new(1 << 20),
        error: VecBuf::new(1024),
        raw: VecBuf::new(0),
    }
}

/// A request as the script server saw it.
#[derive(Debug, Clone)]
struct Seen {
    port: u16,
    method: String,
    headers: Vec<(String, String)>,
    body: serde_json::Value,
}
impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn rpc_method(&self) -> &str {
        self.body
            .get("method")
            .and_then(|m| m.as_str())
            .unwrap_or("")
    }
    fn id(&self) -> u64 {
        self.body.get("id").and_then(|m| m.as_u64()).unwrap_or(0)
    }
}

/// What the server does with one request.
enum Act {
    /// Reply with these bytes, then keep the connection open (keep-alive).
    Reply(Vec<u8>),
    /// Reply with these bytes, then close.
    ReplyClose(Vec<u8>),
    /// Never answer.
    Silent,
}

type Script = Box<dyn FnMut(&Seen) -> Act>;

struct ScriptNet {
    now: Cell<Millis>,
    script: RefCell<Script>,
    seen: RefCell<Vec<Seen>>,
    dead_ports: RefCell<Vec<u16>>,
    pool: RefCell<Vec<(u16, Conn)>>,
    connects: Cell<u32>,
    /// Every port a connection was asked for (also refused ones).
    attempted: RefCell<Vec<u16>>,
    /// While set, sleeps never end (a caller's future can be left pending and dropped).
    frozen: Cell<bool>,
    /// Bytes per read handed to the client (exercise every split).
    chunk: usize,
}

struct Conn {
    port: u16,
    inbox: Vec<u8>,
    outbox: VecDeque<u8>,
    close_after: bool,
    silent: bool,
    /// Closed by the server while idle in the pool: writes are swallowed, reads see EOF.
    dead: bool,
    net: Rc<ScriptNet>,
}

#[derive(Debug)]
struct IoErr;
impl std::fmt::Display for IoErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reset")
    }
}
impl std::error::Error for IoErr {}
impl embedded_io_async::Error for IoErr {
    fn kind(&self) -> embedded_io_async::ErrorKind {
        embedded_io_async::ErrorKind::ConnectionReset
    }
}
impl embedded_io_async::ErrorType for Conn {
    type Error = IoErr;
}
impl embedded_io_async::Write for Conn {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, IoErr> {
        self.inbox.extend_from_slice(buf);
        self.serve();
        Ok(buf.len())
    }
    async fn flush(&mut self) -> Result<(), IoErr> {
        Ok(())
    }
}
impl embedded_io_async::Read for Conn {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, IoErr> {
        if self.dead {
            return Ok(0);
        }
        if self.silent {
            std::future::pending::<()>().await;
        }
        if self.outbox.is_empty() {
            if self.close_after {
                return Ok(0);
            }
            // Keep-alive and nothing to say: wait (the deadline ends it).
            std::future::pending::<()>().await;
        }
        let n = buf.len().min(self.outbox.len()).min(self.net.chunk);
        for b in buf.iter_mut().take(n) {
            *b = self.outbox.pop_front().unwrap();
        }
        Ok(n)
    }
}

impl Conn {
    /// Once a whole request is in, ask the script what to do.
    fn serve(&mut self) {
        if self.dead {
            return;
        }
        let Some(end) = find(&self.inbox, b"\r\n\r\n") else {
            return;
        };
        let head = std::str::from_utf8(&self.inbox[..end]).unwrap().to_string();
        let mut lines = head.split("\r\n");
        let method = lines.next().unwrap().split(' ').next().unwrap().to_string();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(": ").unwrap();
                (n.to_ascii_lowercase(), v.to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        if self.inbox.len() < end + 4 + len {
            return;
        }
        let body_bytes = self.inbox[end + 4..end + 4 + len].to_vec();
        self.inbox.drain(..end + 4 + len);
        let body = if body_bytes.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&body_bytes).expect("client sent invalid JSON")
        };
        let seen = Seen {
            port: self.port,
            method,
            headers,
            body,
        };
        self.net.seen.borrow_mut().push(seen.clone());
        match (self.net.script.borrow_mut())(&seen) {
            Act::Reply(b) => self.outbox.extend(b),
            Act::ReplyClose(b) => {
                self.outbox.extend(b);
                self.close_after = true;
            }
            Act::Silent => self.silent = true,
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

struct NetRef(Rc<ScriptNet>);
impl Net for NetRef {
    type Conn = Conn;
    async fn connect(&self, ep: &Endpoint<'_>, fresh: bool) -> Result<(Conn, bool), ConnectError> {
        let port = ep.port();
        self.0.attempted.borrow_mut().push(port);
        if self.0.dead_ports.borrow().contains(&port) {
            return Err(ConnectError::new(ConnectErrorKind::Refused, ""));
        }
        if !fresh {
            let mut pool = self.0.pool.borrow_mut();
            // As the adapters do: a pooled connection the server closed is found stale
            // before anything is written to it, and dropped.
            pool.retain(|(_, c)| !c.dead);
            if let Some(i) = pool.iter().position(|(p, _)| *p == port) {
                return Ok((pool.remove(i).1, true));
            }
        }
        self.0.connects.set(self.0.connects.get() + 1);
        Ok((
            Conn {
                port,
                inbox: Vec::new(),
                outbox: VecDeque::new(),
                close_after: false,
                silent: false,
                dead: false,
                net: self.0.clone(),
            },
            false,
        ))
    }
    fn recycle(&self, ep: &Endpoint<'_>, conn: Conn) {
        self.0.pool.borrow_mut().push((ep.port(), conn));
    }
    fn now(&self) -> Millis {
        self.0.now.get()
    }
    async fn sleep_until(&self, at: Millis) {
        if self.0.frozen.get() {
            std::future::pending::<()>().await;
        }
        // Virtual time: a sleep that is awaited while nothing else is ready jumps the clock.
        if self.0.now.get() < at {
            self.0.now.set(at);
        }
    }
    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
        let Ok((mut side, _)) = self.connect(ep, true).await else {
            return;
        };
        drive::post_answer(&mut side, answer).await;
    }
}

struct Cellular(RefCell<SlotState>);
impl Cellular {
    fn with(&self, f: &mut dyn FnMut(&mut SlotState)) {
        f(&mut self.0.borrow_mut())
    }
}

#[derive(Default)]
struct Records(Vec<LedgerRecord>);
impl Ledger for Records {
    fn record(&mut self, r: LedgerRecord) {
        self.0.push(r)
    }
}
#[derive(Default)]
struct Events(Vec<String>);
impl Timeline for Events {
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        let mut b = VecBuf::new(4096);
        e.write_json(&mut b).unwrap();
        self.0.push(String::from_utf8(b.into_vec()).unwrap());
    }
}

fn http_json(status: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A 200 carrying `message`: one SSE `message` event when `sse`, else a JSON body.
fn http_reply(sse: bool, message: &str) -> Vec<u8> {
    if sse {
        http_sse("", &format!("event: message\ndata: {message}\n\n"))
    } else {
        http_json("200 OK", "", message)
    }
}

fn http_sse(extra: &str, events: &str) -> Vec<u8> {
    // Chunked, as the TypeScript and rmcp servers send it.
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{extra}transfer-encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for piece in events.as_bytes().chunks(7) {
        out.extend(format!("{:x}\r\n", piece.len()).into_bytes());
        out.extend(piece);
        out.extend(b"\r\n");
    }
    out.extend(b"0\r\n\r\n");
    out
}

fn accepted() -> Vec<u8> {
    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec()
}

fn init_result(id: u64, version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"{version}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"script","version":"0"}}}}}}"#
    )
}

fn text_result(id: u64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":{}}}]}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

/// A well-behaved server: JSON replies, a session id, `echo`.
fn good_server(session: &'static str) -> impl FnMut(&Seen) -> Act {
    move |seen: &Seen| match seen.rpc_method() {
        "initialize" => Act::Reply(http_json(
            "200 OK",
            &format!("mcp-session-id: {session}\r\n"),
            &init_result(seen.id(), "2025-06-18"),
        )),
        "notifications/initialized" | "notifications/cancelled" => Act::Reply(accepted()),
        "" if seen.method == "DELETE" => Act::Reply(http_json("200 OK", "", "")),
        "tools/call" => {
            let text = seen.body["params"]["arguments"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string();
            Act::Reply(http_json("200 OK", "", &text_result(seen.id(), &text)))
        }
        other => panic!("unexpected {other}"),
    }
}

struct Rig {
    net: NetRef,
    state: Cellular,
    ledger: Records,
    events: Events,
}

impl Rig {
    fn new(script: impl FnMut(&Seen) -> Act + 'static, chunk: usize, has_fallback: bool) -> Self {
        Rig {
            net: NetRef(Rc::new(ScriptNet {
                now: Cell::new(1_000),
                script: RefCell::new(Box::new(script)),
                seen: RefCell::new(Vec::new()),
                dead_ports: RefCell::new(Vec::new()),
                pool: RefCell::new(Vec::new()),
                connects: Cell::new(0),
                attempted: RefCell::new(Vec::new()),
                frozen: Cell::new(false),
                chunk,
            })),
            state: Cellular(RefCell::new(SlotState::new(
                ProtocolVersion::DEFAULT,
                has_fallback,
            ))),
            ledger: Records::default(),
            events: Events::default(),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.net.0.seen.borrow().clone()
    }

    /// One call; returns (ok, text, is_error, error).
    fn call(
        &mut self,
        cfg: &SlotConfig<'_>,
        tool: &str,
        args: &str,
        secrets: &[&str],
    ) -> (bool, String, bool, Option<String>) {
        let (mut head, mut read) = scratch();
        let mut bufs = call_buffers(&mut head, &mut read);
        let args = Value::parse(args.as_bytes(), JsonLimits::default()).unwrap();
        let r = embassy_futures::block_on(
            drive::Driver::new(&self.net, cfg, |f| self.state.with(f)).call(
                (tool, Some(args)),
                secrets,
                &mut self.ledger,
                &mut self.events,
                &mut bufs,
            ),
        );
        (
            r.ok(),
            r.text.to_string(),
            r.is_error(),
            r.error().map(str::to_string),
        )
    }
}

/// A slot in the handshake era (these scripts are old-era servers; the 2026 era and the probe
/// are tested in `machine.rs`).
fn cfg<'a>(primary: &'a Endpoint<'a>, fallback: Option<&'a Endpoint<'a>>) -> SlotConfig<'a> {
    let mut c = SlotConfig::new("kali", *primary, "http://127.0.0.1:9001");
    c.era = verifi_mcp_core::wire::era::EraSetting::Legacy;
    if let Some(f) = fallback {
        c.fallback = Some(*f);
        c.fallback_label = "http://127.0.0.1:9002";
    }
    c
}

#[test]
fn lazy_handshake_then_session_reuse_at_every_read_size() {
    for chunk in [1usize, 2, 3, 7, 64, 4096] {
        let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
        let c = cfg(&ep, None);
        let mut rig = Rig::new(good_server("sess-1"), chunk, false);
        assert!(
            rig.seen().is_empty(),
            "nothing is sent before the first call"
        );
        let r = rig.call(&c, "echo", r#"{"text":"hello"}"#, &[]);
        assert_eq!(r, (true, "hello".into(), false, None), "chunk {chunk}");
        let r = rig.call(&c, "echo", r#"{"text":"again"}"#, &[]);
        assert_eq!(r.1, "again");
        let seen = rig.seen();
        let methods: Vec<_> = seen.iter().map(|s| s.rpc_method().to_string()).collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "notifications/initialized",
                "tools/call",
                "tools/call"
            ]
        );
        assert_eq!(seen[0].header("mcp-session-id"), None);
        assert_eq!(seen[0].body["params"]["protocolVersion"], "2025-11-25");
        assert_eq!(
            seen[0].body["params"]["clientInfo"]["name"],
            "verifi-harness-sdk"
        );
        assert_eq!(seen[0].body["params"]["clientInfo"]["version"], "1.0.0");
        for s in &seen {
            assert_eq!(s.method, "POST");
            assert_eq!(
                s.header("accept"),
                Some("application/json, text/event-stream")
            );
        }
        for s in &seen[1..] {
            assert_eq!(s.header("mcp-session-id"), Some("sess-1"));
            assert_eq!(s.header("mcp-protocol-version"), Some("2025-06-18"));
        }
        assert_eq!(
            rig.net.0.connects.get(),
            1,
            "one kept-alive connection serves the run"
        );
        assert_eq!(
            rig.ledger.0,
            vec![LedgerRecord::answered(5), LedgerRecord::answered(5)]
        );
        assert!(rig.events.0.is_empty());
    }
}

#[test]
fn sse_reply_takes_the_matching_response_after_notifications() {
    for chunk in [1usize, 5, 4096] {
        let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
        let c = cfg(&ep, None);
        let mut rig = Rig::new(
            |seen: &Seen| match seen.rpc_method() {
                "initialize" => Act::Reply(http_sse(
                    "",
                    &format!(
                        "event: message\ndata: {}\n\n",
                        init_result(seen.id(), "2024-11-05")
                    ),
                )),
                "notifications/initialized" => Act::Reply(accepted()),
                "tools/call" => {
                    let id = seen.id();
                    let events = format!(
                        ": keep-alive\r\n\r\nid: 0\r\nretry: 3000\r\ndata:\r\n\r\n\
                         data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"x\"}}}}\r\n\r\n\
                         data: {{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}}\r\n\r\n\
                         data: {{\"jsonrpc\":\"2.0\",\"id\":{other},\"result\":{{\"content\":[]}}}}\r\n\r\n\
                         data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\r\ndata: \"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"mine\"}},{{\"type\":\"image\",\"data\":\"AA==\",\"mimeType\":\"image/png\"}}]}}}}\r\n\r\n",
                        other = id + 100
                    );
                    Act::Reply(http_sse("", &events))
                }
                // The client's answer to the server's ping (on the side).
                "" => Act::Reply(accepted()),
                m => panic!("{m}"),
            },
            chunk,
            false,
        );
        let r = rig.call(&c, "mixed", "{}", &[]);
        assert_eq!(
            r,
            (
                true,
                "mine\n{\"type\":\"image\",\"data\":\"AA==\",\"mimeType\":\"image/png\"}".into(),
                false,
                None
            ),
            "chunk {chunk}"
        );
        // The chunked terminator came after the response event (in later reads at small
        // read sizes): the driver read it, so the second call reuses the connection.
        let again = rig.call(&c, "mixed", "{}", &[]);
        assert!(again.0, "chunk {chunk}");
        // The server's ping is answered on a connection of its own when it came before the
        // response in another read (at 4 096-byte reads the response came with it, and the
        // call was over); the call's SSE connection is reused.
        let answers: Vec<_> = rig
            .seen()
            .iter()
            .filter(|s| s.rpc_method().is_empty() && s.body.get("result").is_some())
            .map(|s| s.body.clone())
            .collect();
        for a in &answers {
            assert_eq!(a.get("id").and_then(|i| i.as_str()), Some("srv-1"));
        }
        assert_eq!(answers.is_empty(), chunk == 4096, "chunk {chunk}");
        assert_eq!(
            rig.net.0.connects.get(),
            1 + answers.len() as u32,
            "chunk {chunk}: the SSE connection is reused"
        );
        // No session id was given, and none is sent.
        assert!(
            rig.seen()
                .iter()
                .all(|s| s.header("mcp-session-id").is_none())
        );
        assert!(
            rig.seen()
                .iter()
                .all(|s| s.header("mcp-protocol-version").is_none())
        );
    }
}

#[test]
fn sse_stream_without_a_matching_id_falls_back_to_the_last_response() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "initialize" => Act::Reply(http_json(
                "200 OK",
                "",
                &init_result(seen.id(), "2024-11-05"),
            )),
            "notifications/initialized" => Act::Reply(accepted()),
            _ => Act::Reply(http_sse(
                "",
                "data: {\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"last\"}]}}\n\n",
            )),
        },
        3,
        false,
    );
    assert_eq!(rig.call(&c, "echo", "{}", &[]).1, "last");
}

#[test]
fn a_stream_that_ends_without_a_response_settles_at_once() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "initialize" => Act::Reply(http_json(
                "200 OK",
                "",
                &init_result(seen.id(), "2024-11-05"),
            )),
            "notifications/initialized" => Act::Reply(accepted()),
            _ => Act::ReplyClose(http_sse("", ": nothing\n\n")),
        },
        4096,
        false,
    );
    let before = rig.net.0.now.get();
    let r = rig.call(&c, "echo", "{}", &[]);
    assert_eq!(
        r.3.as_deref(),
        Some(
            "the reply stream ended without the tool call's response: the tool may have run, so the call was not sent again"
        )
    );
    assert_eq!(rig.net.0.now.get(), before, "no waiting for the timeout");
    assert_eq!(rig.ledger.0, vec![LedgerRecord::transport_failure()]);
    // No server could serve it (there is no fallback): loud, then the tool_error.
    assert_eq!(rig.events.0.len(), 2, "{:?}", rig.events.0);
    assert_eq!(
        rig.events.0[0],
        r#"{"kind":"mcp.no_healthy_tool","slot":"kali","tool":"echo"}"#
    );
    assert!(
        rig.events.0[1].starts_with(r#"{"kind":"tool_error","slot":"kali","tool":"echo""#),
        "{}",
        rig.events.0[1]
    );
}

#[test]
fn a_404_with_a_session_id_reinitializes_and_retries_once() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let sessions = Rc::new(Cell::new(0u32));
    let s2 = sessions.clone();
    let mut rig = Rig::new(
        move |seen: &Seen| match seen.rpc_method() {
            "initialize" => {
                s2.set(s2.get() + 1);
                Act::Reply(http_json(
                    "200 OK",
                    &format!("mcp-session-id: s{}\r\n", s2.get()),
                    &init_result(seen.id(), "2025-03-26"),
                ))
            }
            "notifications/initialized" => Act::Reply(accepted()),
            _ if seen.header("mcp-session-id") == Some("s1") => Act::Reply(http_json(
                "404 Not Found",
                "",
                r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32001,"message":"Session not found"}}"#,
            )),
            _ => Act::Reply(http_json("200 OK", "", &text_result(seen.id(), "ok"))),
        },
        4096,
        false,
    );
    let r = rig.call(&c, "echo", "{}", &[]);
    assert_eq!(r, (true, "ok".into(), false, None));
    assert_eq!(sessions.get(), 2);
    let calls: Vec<_> = rig
        .seen()
        .into_iter()
        .filter(|s| s.rpc_method() == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].header("mcp-session-id"), Some("s2"));
}

#[test]
fn a_404_that_persists_is_retried_once_not_forever() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "initialize" => Act::Reply(http_json(
                "200 OK",
                "mcp-session-id: s\r\n",
                &init_result(seen.id(), "2025-03-26"),
            )),
            "notifications/initialized" => Act::Reply(accepted()),
            _ => Act::Reply(http_json("404 Not Found", "", "{}")),
        },
        4096,
        false,
    );
    let r = rig.call(&c, "echo", "{}", &[]);
    assert!(!r.0);
    assert_eq!(
        r.3.as_deref(),
        Some("HTTP 404 Not Found: the server no longer knows this session")
    );
    let inits = rig
        .seen()
        .iter()
        .filter(|s| s.rpc_method() == "initialize")
        .count();
    assert_eq!(inits, 2);
}

#[test]
fn a_failed_handshake_is_not_cached() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let mut c = cfg(&ep, None);
    // The deadline, not the stall timer, ends the silent handshake here.
    c.idle_timeout_ms = None;
    let first = Rc::new(Cell::new(true));
    let f2 = first.clone();
    let mut rig = Rig::new(
        move |seen: &Seen| match seen.rpc_method() {
            "initialize" if f2.replace(false) => Act::Silent,
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let r = rig.call(&c, "echo", r#"{"text":"a"}"#, &[]);
    assert_eq!(
        r.3.as_deref(),
        Some(
            "tool call timed out after 300000 ms, the call's deadline (--timeout-ms, Options::timeout_ms), before the tool call was sent"
        )
    );
    let r = rig.call(&c, "echo", r#"{"text":"b"}"#, &[]);
    assert_eq!(
        r,
        (true, "b".into(), false, None),
        "the next call makes a real attempt"
    );
}

#[test]
fn tool_errors_refusals_and_redaction() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/call" => match seen.body["params"]["name"].as_str().unwrap() {
                "fail" => Act::Reply(http_json(
                    "200 OK",
                    "",
                    &format!(
                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"nmap: hunter2-secret leaked"}}],"isError":true}}}}"#,
                        seen.id()
                    ),
                )),
                "nope" => Act::Reply(http_json(
                    "200 OK",
                    "",
                    &format!(
                        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32602,"message":"Unknown tool: nope hunter2-secret"}}}}"#,
                        seen.id()
                    ),
                )),
                _ => good_server("s")(seen),
            },
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let r = rig.call(&c, "fail", "{}", &["hunter2-secret"]);
    assert_eq!(
        r,
        (
            false,
            "nmap: [REDACTED] leaked".into(),
            true,
            Some("tool error: nmap: [REDACTED] leaked".into())
        )
    );
    let r = rig.call(&c, "nope", "{}", &["hunter2-secret"]);
    assert_eq!(
        r,
        (
            false,
            "".into(),
            false,
            Some("JSON-RPC error -32602: Unknown tool: nope [REDACTED]".into())
        )
    );
    let r = rig.call(
        &c,
        "echo",
        r#"{"text":"key=hunter2-secret"}"#,
        &["hunter2-secret"],
    );
    assert_eq!(r.1, "key=[REDACTED]");
    assert_eq!(
        rig.ledger.0,
        vec![
            LedgerRecord::answered(23),
            LedgerRecord::answered(0),
            LedgerRecord::answered(14)
        ]
    );
    // fail: tool_error; nope (unknown everywhere): no_healthy_tool, then tool_error.
    let kinds: Vec<_> = rig
        .events
        .0
        .iter()
        .map(|e| e.split('"').nth(3).unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["tool_error", "mcp.no_healthy_tool", "tool_error"],
        "{:?}",
        rig.events.0
    );
    assert!(rig.events.0[2].contains("[REDACTED]") && !rig.events.0[2].contains("hunter2"));
}

#[test]
fn a_dead_primary_fails_over_loudly_once_and_is_not_paid_again() {
    let p = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let f = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&p, Some(&f));
    let mut rig = Rig::new(good_server("s"), 4096, true);
    assert!(rig.call(&c, "echo", r#"{"text":"on primary"}"#, &[]).0);
    rig.net.0.dead_ports.borrow_mut().push(9001);
    rig.net.0.pool.borrow_mut().clear(); // the primary died: its connections are gone
    for i in 0..3 {
        let r = rig.call(&c, "echo", &format!(r#"{{"text":"fb{i}"}}"#), &[]);
        assert_eq!(r, (true, format!("fb{i}"), false, None));
    }
    assert_eq!(rig.events.0.len(), 1, "{:?}", rig.events.0);
    assert_eq!(
        rig.events.0[0],
        r#"{"kind":"mcp.fallback_used","slot":"kali","tool":"echo","primary":"http://127.0.0.1:9001","fallback":"http://127.0.0.1:9002"}"#
    );
    // primary ok, then: primary refused + fallback ok, fallback ok, fallback ok.
    assert_eq!(
        rig.ledger.0,
        vec![
            LedgerRecord::answered(10),
            LedgerRecord::transport_failure(),
            LedgerRecord::answered(3),
            LedgerRecord::answered(3),
            LedgerRecord::answered(3),
        ]
    );
    let to_fallback = rig
        .seen()
        .iter()
        .filter(|s| s.port == 9002 && s.rpc_method() == "tools/call")
        .count();
    assert_eq!(to_fallback, 3);
}

#[test]
fn no_server_serves_then_no_healthy_tool_once_per_tool() {
    let p = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let f = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&p, Some(&f));
    let mut rig = Rig::new(good_server("s"), 4096, true);
    rig.net.0.dead_ports.borrow_mut().extend([9001, 9002]);
    for _ in 0..2 {
        let r = rig.call(&c, "echo", "{}", &[]);
        assert!(!r.0);
        assert!(
            r.3.unwrap()
                .starts_with("could not connect: connection refused")
        );
    }
    let kinds: Vec<_> = rig
        .events
        .0
        .iter()
        .map(|e| e.split('"').nth(3).unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["mcp.no_healthy_tool", "tool_error", "tool_error"],
        "{:?}",
        rig.events.0
    );
}

#[test]
fn a_pooled_connection_the_server_closed_is_found_stale_before_the_write() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(good_server("s"), 4096, false);
    assert!(rig.call(&c, "echo", r#"{"text":"1"}"#, &[]).0);
    // The server closes its idle keep-alive connection.
    for (_, conn) in rig.net.0.pool.borrow_mut().iter_mut() {
        conn.dead = true;
    }
    // The request goes out on the pooled connection, which EOFs before any reply byte.
    let r = rig.call(&c, "echo", r#"{"text":"2"}"#, &[]);
    assert_eq!(r.1, "2");
    assert_eq!(rig.net.0.connects.get(), 2);
}

#[test]
fn timeout_sends_a_best_effort_cancellation() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let mut c = cfg(&ep, None);
    c.timeout_ms = 5_000;
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/call" => Act::Silent,
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let t0 = rig.net.0.now.get();
    let r = rig.call(&c, "slow", "{}", &[]);
    assert_eq!(
        r.3.as_deref(),
        Some(
            "tool call timed out after 5000 ms, the call's deadline (--timeout-ms, Options::timeout_ms): the tool may still be running on the server"
        )
    );
    assert!(rig.net.0.now.get() - t0 >= 5_000);
    let seen = rig.seen();
    let call_id = seen
        .iter()
        .find(|s| s.rpc_method() == "tools/call")
        .unwrap()
        .id();
    let cancel = seen
        .iter()
        .find(|s| s.rpc_method() == "notifications/cancelled")
        .expect("cancel sent");
    assert_eq!(cancel.body["params"]["requestId"], call_id);
}

#[test]
fn http_errors_say_what_happened() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    for (reply, expected) in [
        (
            http_json(
                "406 Not Acceptable",
                "",
                r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Not Acceptable: Client must accept both application/json and text/event-stream"}}"#,
            ),
            "HTTP 406 Not Acceptable: Not Acceptable: Client must accept both application/json and text/event-stream",
        ),
        (
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 5\r\n\r\noops!".to_vec(),
            "HTTP 500 Internal Server Error: oops!",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 2\r\n\r\nhi".to_vec(),
            "reply has content-type 'text/html', expected application/json or text/event-stream",
        ),
    ] {
        let reply = Rc::new(reply);
        let r2 = reply.clone();
        let mut rig = Rig::new(
            move |seen: &Seen| match seen.rpc_method() {
                "initialize" => Act::ReplyClose((*r2).clone()),
                _ => good_server("s")(seen),
            },
            4096,
            false,
        );
        let r = rig.call(&c, "echo", "{}", &[]);
        assert_eq!(r.3.as_deref(), Some(expected));
        assert!(!r.0 && !r.2);
    }
}

#[test]
fn unsupported_protocol_version_fails_the_handshake_clearly() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "initialize" => Act::Reply(http_json(
                "200 OK",
                "",
                &init_result(seen.id(), "1999-01-01"),
            )),
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let r = rig.call(&c, "echo", "{}", &[]);
    assert!(
        r.3.unwrap()
            .starts_with("handshake failed: server chose protocol version '1999-01-01'")
    );
}

#[test]
fn non_object_arguments_are_an_ok_false_result() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(good_server("s"), 4096, false);
    let r = rig.call(&c, "echo", "[1,2]", &[]);
    assert_eq!(r.3.as_deref(), Some("tool arguments must be a JSON object"));
    assert!(rig.seen().is_empty(), "nothing was sent");
}

#[test]
fn list_tools_follows_pages_and_hands_over_redacted_descriptions() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/list" => {
                let id = seen.id();
                let body = match seen.body["params"]["cursor"].as_str() {
                    None => format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo","description":"uses hunter2-secret","inputSchema":{{"type":"object"}}}}],"nextCursor":"p\/2"}}}}"#
                    ),
                    Some("p/2") => format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"r\u00e9sum\u00e9","inputSchema":{{"type":"object"}}}}]}}}}"#
                    ),
                    Some(other) => panic!("cursor {other}"),
                };
                Act::Reply(http_json("200 OK", "", &body))
            }
            _ => good_server("s")(seen),
        },
        3,
        false,
    );
    let (mut head, mut read) = scratch();
    let mut bufs = call_buffers(&mut head, &mut read);
    let mut tools = Vec::new();
    embassy_futures::block_on(
        drive::Driver::new(&rig.net, &c, |f| rig.state.with(f)).list_tools_described(
            &["hunter2-secret"],
            &mut bufs,
            |name, json| tools.push((name.to_string(), String::from_utf8(json.to_vec()).unwrap())),
        ),
    )
    .unwrap();
    assert_eq!(
        tools,
        [
            (
                "echo".to_string(),
                r#"{"name":"echo","description":"uses [REDACTED]","inputSchema":{"type":"object"}}"#.to_string()
            ),
            (
                "résumé".to_string(),
                r#"{"name":"r\u00e9sum\u00e9","inputSchema":{"type":"object"}}"#.to_string()
            ),
        ]
    );
    assert!(rig.ledger.0.is_empty(), "listing is not metered");
}

#[test]
fn a_response_to_another_request_is_never_taken_as_ours() {
    for sse in [false, true] {
        let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
        let c = cfg(&ep, None);
        let mut rig = Rig::new(
            move |seen: &Seen| match seen.rpc_method() {
                "tools/call" => {
                    let other = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"another run's output"}}]}}}}"#,
                        seen.id() + 1
                    );
                    Act::Reply(http_reply(sse, &other))
                }
                _ => good_server("s")(seen),
            },
            4096,
            false,
        );
        let r = rig.call(&c, "echo", "{}", &[]);
        assert_eq!(
            r,
            (
                false,
                String::new(),
                false,
                Some(
                    "the reply stream ended without the tool call's response: the tool may have run, so the call was not sent again"
                        .into()
                )
            ),
            "sse {sse}"
        );
    }
}

/// The call future is what an edge executor keeps in its static task arena: its size is the
/// client's static RAM there. Printed (run with `--nocapture`), and held under a cap so a
/// large local kept across an await does not creep back in. The figure is for this host
/// (64-bit pointers); on the 32-bit edge target the same future is smaller.
#[test]
fn the_call_future_stays_small() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(good_server("sess-1"), 4096, false);
    let mut head = vec![0u8; 1024];
    let mut read = vec![0u8; 1024];
    let mut bufs = CallBuffers {
        request: VecBuf::new(1024),
        head: &mut head,
        read: &mut read,
        reply: VecBuf::new(8192),
        text: VecBuf::new(4096),
        error: VecBuf::new(256),
        raw: VecBuf::new(0),
    };
    let secrets: &[&str] = &[];
    let fut = drive::Driver::new(&rig.net, &c, |f| rig.state.with(f)).call(
        ("echo", None),
        secrets,
        &mut rig.ledger,
        &mut rig.events,
        &mut bufs,
    );
    let size = core::mem::size_of_val(&fut);
    println!("drive::call future: {size} bytes");
    // The cap was 3 200 bytes until failures kept 128-byte details (64 before, cut mid-word)
    // and the call learnt Retry-After, the stall timer and metering of a dropped call: 3 504
    // bytes then. The call machine (a state machine in place of this future) replaces it.
    assert!(
        size <= 3 * 1024 + 512,
        "drive::call future is {size} bytes, over its cap of 3584 bytes"
    );
    let r = embassy_futures::block_on(fut);
    assert!(r.ok(), "the measured future also runs: {:?}", r.error());
}

#[cfg(feature = "observe")]
#[test]
fn progress_notifications_reach_the_observer_redacted() {
    use std::sync::Mutex;
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    type Update = (String, Option<String>, Option<String>);
    let seen_updates: Mutex<Vec<Update>> = Mutex::new(Vec::new());
    let observer = |u: &drive::ProgressUpdate<'_>| {
        seen_updates.lock().unwrap().push((
            u.progress.to_string(),
            u.total.map(str::to_string),
            u.message.map(str::to_string),
        ));
    };
    let mut c = cfg(&ep, None);
    c.on_progress = Some(drive::ProgressObserver(&observer));
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/call" => {
                let id = seen.id();
                assert_eq!(
                    seen.body["params"]["_meta"]["progressToken"], id,
                    "a token is sent"
                );
                let p = |token: u64, n: &str, msg: &str| {
                    format!(
                        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{token},\"progress\":{n},\"total\":3,\"message\":\"{msg}\"}}}}\n\n"
                    )
                };
                let events = format!(
                    "{}{}{}data: {}\n\n",
                    p(id, "1", "scanning with hunter2-secret"),
                    p(id + 7, "9", "not ours"),
                    p(id, "2.0", "port 443 \\u00e9"),
                    text_result(id, "done")
                );
                Act::Reply(http_sse("", &events))
            }
            _ => good_server("s")(seen),
        },
        5,
        false,
    );
    let r = rig.call(&c, "slow", "{}", &["hunter2-secret"]);
    assert_eq!(r.1, "done");
    assert_eq!(
        *seen_updates.lock().unwrap(),
        vec![
            (
                "1".into(),
                Some("3".into()),
                Some("scanning with [REDACTED]".into())
            ),
            ("2.0".into(), Some("3".into()), Some("port 443 é".into())),
        ]
    );
}

// ---- issue 16: never twice, always say why -----------------------------------------------

fn rpc_methods(rig: &Rig) -> Vec<(String, u64)> {
    rig.seen()
        .iter()
        .map(|s| (s.rpc_method().to_string(), s.id()))
        .collect()
}

#[test]
fn a_tools_call_the_server_read_and_dropped_is_never_sent_again() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    for warm in [false, true] {
        // The server reads the tools/call, then closes without a byte: the tool may have run.
        let mut rig = Rig::new(
            |seen: &Seen| match (seen.rpc_method(), seen.body["params"]["name"].as_str()) {
                ("tools/call", Some("scan")) => Act::ReplyClose(Vec::new()),
                _ => good_server("s")(seen),
            },
            4096,
            false,
        );
        if warm {
            // The connection is pooled and alive when the scan goes out on it.
            assert!(rig.call(&c, "echo", r#"{"text":"1"}"#, &[]).0);
        }
        let r = rig.call(&c, "scan", "{}", &[]);
        assert!(!r.0 && !r.2, "{r:?}");
        let error = r.3.unwrap();
        assert!(error.contains("may have run"), "{error}");
        let scans = rig
            .seen()
            .iter()
            .filter(|s| s.rpc_method() == "tools/call" && s.body["params"]["name"] == "scan")
            .count();
        assert_eq!(scans, 1, "the tools/call went out once (warm: {warm})");
        assert_eq!(
            rig.ledger.0.last(),
            Some(&LedgerRecord::transport_failure()),
            "metered as a call that got no answer"
        );
    }
}

#[test]
fn a_safe_request_is_re_sent_once_with_a_new_id() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let lists = Rc::new(Cell::new(0));
    let l2 = lists.clone();
    let mut rig = Rig::new(
        move |seen: &Seen| match seen.rpc_method() {
            // The first tools/list arrives on a pooled connection that the server then drops.
            "tools/list" if l2.replace(l2.get() + 1) == 0 => Act::ReplyClose(Vec::new()),
            "tools/list" => Act::Reply(http_json(
                "200 OK",
                "",
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[{{"name":"echo"}}]}}}}"#,
                    seen.id()
                ),
            )),
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    assert!(rig.call(&c, "echo", r#"{"text":"1"}"#, &[]).0);
    let (mut head, mut read) = scratch();
    let mut bufs = call_buffers(&mut head, &mut read);
    let mut names = Vec::new();
    let secrets: &[&str] = &[];
    embassy_futures::block_on(
        drive::Driver::new(&rig.net, &c, |f| rig.state.with(f)).list_tools(
            secrets,
            &mut bufs,
            |n| names.push(n.to_string()),
        ),
    )
    .unwrap();
    assert_eq!(names, ["echo"]);
    let ids: Vec<u64> = rpc_methods(&rig)
        .into_iter()
        .filter(|(m, _)| m == "tools/list")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(ids.len(), 2, "sent twice: once lost, once answered");
    assert_ne!(ids[0], ids[1], "a re-sent request has a new id");
    assert!(ids[1] < (1 << 53), "ids stay exact as JavaScript numbers");
}

#[test]
fn a_tls_reply_on_a_plain_port_fails_at_once_naming_https() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    for chunk in [1, 4096] {
        let mut rig = Rig::new(
            |_: &Seen| Act::Reply(b"\x15\x03\x03\x00\x02\x02\x32".to_vec()),
            chunk,
            false,
        );
        let t0 = rig.net.0.now.get();
        let r = rig.call(&c, "echo", "{}", &[]);
        let error = r.3.unwrap();
        assert!(error.contains("TLS") && error.contains("https"), "{error}");
        assert_eq!(rig.net.0.now.get(), t0, "at once, not at the deadline");
    }
    // Plain garbage too.
    let mut rig = Rig::new(|_: &Seen| Act::Reply(b"\x00\x01garbage".to_vec()), 1, false);
    let t0 = rig.net.0.now.get();
    let r = rig.call(&c, "echo", "{}", &[]);
    assert!(r.3.unwrap().contains("does not start with HTTP/"));
    assert_eq!(rig.net.0.now.get(), t0);
}

#[test]
fn a_reply_that_goes_quiet_is_stalled_at_the_idle_time_not_the_deadline() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let mut c = cfg(&ep, None);
    c.idle_timeout_ms = Some(60_000);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            // A head and one keep-alive comment, then nothing.
            "tools/call" => Act::Reply(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n: ping\n\n".to_vec(),
            ),
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let t0 = rig.net.0.now.get();
    let r = rig.call(&c, "slow", "{}", &[]);
    let error = r.3.unwrap();
    assert!(error.contains("stall"), "{error}");
    let took = rig.net.0.now.get() - t0;
    assert!((60_000..300_000).contains(&took), "stalled after {took} ms");
    // The server is told, as on a timeout.
    assert!(
        rpc_methods(&rig)
            .iter()
            .any(|(m, _)| m == "notifications/cancelled")
    );
}

#[test]
fn retry_after_that_fits_is_waited_for_once_with_a_new_id() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    for status in ["429 Too Many Requests", "503 Service Unavailable"] {
        let first = Rc::new(Cell::new(true));
        let f2 = first.clone();
        let mut rig = Rig::new(
            move |seen: &Seen| match seen.rpc_method() {
                "tools/call" if f2.replace(false) => {
                    Act::Reply(http_json(status, "retry-after: 2\r\n", ""))
                }
                _ => good_server("s")(seen),
            },
            4096,
            false,
        );
        let t0 = rig.net.0.now.get();
        let r = rig.call(&c, "echo", r#"{"text":"later"}"#, &[]);
        assert_eq!(r, (true, "later".into(), false, None), "{status}");
        let calls: Vec<u64> = rpc_methods(&rig)
            .into_iter()
            .filter(|(m, _)| m == "tools/call")
            .map(|(_, id)| id)
            .collect();
        assert_eq!(calls.len(), 2, "one retry");
        assert_ne!(calls[0], calls[1], "with a new id");
        assert!(
            rig.net.0.now.get() - t0 >= 2_000,
            "no sooner than the delay"
        );
        assert_eq!(rig.ledger.0.len(), 1, "one call, one record");
    }
}

#[test]
fn retry_after_that_does_not_fit_fails_at_once_naming_the_delay() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/call" => Act::Reply(http_json(
                "429 Too Many Requests",
                "retry-after: 3600\r\n",
                "",
            )),
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let t0 = rig.net.0.now.get();
    let r = rig.call(&c, "echo", "{}", &[]);
    let error = r.3.unwrap();
    assert!(error.contains("429") && error.contains("3600"), "{error}");
    assert_eq!(rig.net.0.now.get(), t0, "at once");
    assert_eq!(
        rpc_methods(&rig)
            .iter()
            .filter(|(m, _)| m == "tools/call")
            .count(),
        1
    );
    // With a fallback, it fails over at once instead.
    let fb = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&ep, Some(&fb));
    let mut rig = Rig::new(
        |seen: &Seen| match (seen.port, seen.rpc_method()) {
            (9001, "tools/call") => Act::Reply(http_json(
                "503 Service Unavailable",
                "retry-after: 3600\r\n",
                "",
            )),
            _ => good_server("s")(seen),
        },
        4096,
        true,
    );
    let r = rig.call(&c, "echo", r#"{"text":"fb"}"#, &[]);
    assert_eq!(r, (true, "fb".into(), false, None));
    assert!(rig.events.0.iter().any(|e| e.contains("mcp.fallback_used")));
}

#[test]
fn a_503_without_retry_after_is_a_dead_primary_as_before() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let fb = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&ep, Some(&fb));
    let mut rig = Rig::new(
        |seen: &Seen| match (seen.port, seen.rpc_method()) {
            (9001, "tools/call") => Act::Reply(http_json("503 Service Unavailable", "", "")),
            _ => good_server("s")(seen),
        },
        4096,
        true,
    );
    assert!(rig.call(&c, "echo", r#"{"text":"x"}"#, &[]).0);
    let primary_calls = rig
        .seen()
        .iter()
        .filter(|s| s.port == 9001 && s.rpc_method() == "tools/call")
        .count();
    assert_eq!(primary_calls, 1, "no retry without retry-after");
    assert!(rig.state.0.borrow().failover().primary_dead());
}

#[test]
fn nothing_goes_to_a_dead_server_at_close() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let fb = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&ep, Some(&fb));
    let mut rig = Rig::new(good_server("s"), 4096, true);
    assert!(
        rig.call(&c, "echo", r#"{"text":"1"}"#, &[]).0,
        "primary has a session"
    );
    // The primary dies; the next call fails over and marks it dead.
    rig.net.0.dead_ports.borrow_mut().push(9001);
    rig.net.0.pool.borrow_mut().clear();
    assert!(rig.call(&c, "echo", r#"{"text":"2"}"#, &[]).0);
    let before = rig.net.0.attempted.borrow().len();
    let mut head = vec![0u8; 4096];
    let mut read = vec![0u8; 4096];
    let mut bufs = CallBuffers {
        request: VecBuf::new(4096),
        head: &mut head,
        read: &mut read,
        reply: VecBuf::new(4096),
        text: VecBuf::new(4096),
        error: VecBuf::new(1024),
        raw: VecBuf::new(0),
    };
    embassy_futures::block_on(
        drive::Driver::new(&rig.net, &c, |f| rig.state.with(f)).close(&mut bufs),
    );
    let after: Vec<u16> = rig.net.0.attempted.borrow()[before..].to_vec();
    assert!(
        !after.contains(&9001),
        "no connection to the dead primary: {after:?}"
    );
    assert!(
        rig.seen()
            .iter()
            .any(|s| s.port == 9002 && s.method == "DELETE"),
        "the live fallback's session is ended"
    );
}

#[test]
fn a_call_that_fails_before_sending_is_metered_once_and_names_no_server() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let fb = Endpoint::parse_base("http://127.0.0.1:9002").unwrap();
    let c = cfg(&ep, Some(&fb));
    let mut rig = Rig::new(good_server("s"), 4096, true);
    // A handshake first, so the request buffer is what fails.
    assert!(rig.call(&c, "echo", r#"{"text":"1"}"#, &[]).0);
    let seen = rig.seen().len();
    let records = rig.ledger.0.len();
    let events = rig.events.0.len();
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(70 * 1024));
    let r = rig.call(&c, "echo", &big, &[]);
    assert!(!r.0 && !r.2);
    assert!(r.3.unwrap().starts_with("request buffer too small"));
    assert_eq!(rig.seen().len(), seen, "nothing was sent");
    assert_eq!(
        &rig.ledger.0[records..],
        &[LedgerRecord::transport_failure()]
    );
    let new_events = &rig.events.0[events..];
    assert_eq!(new_events.len(), 1, "{new_events:?}");
    assert!(new_events[0].contains("tool_error"));
    assert!(
        !rig.state.0.borrow().failover().primary_dead(),
        "no server was blamed"
    );
    // Non-object arguments: the same rule.
    let r = rig.call(&c, "echo", "[1]", &[]);
    assert_eq!(r.3.as_deref(), Some("tool arguments must be a JSON object"));
    assert_eq!(rig.ledger.0.len(), records + 2);
    assert!(!rig.events.0.iter().any(|e| e.contains("no_healthy_tool")));
}

#[test]
fn a_dropped_call_is_metered_and_says_which_request_to_cancel() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let mut c = cfg(&ep, None);
    let in_flight = drive::InFlight::new();
    c.in_flight = Some(&in_flight);
    let mut rig = Rig::new(
        |seen: &Seen| match seen.rpc_method() {
            "tools/call" => Act::Silent,
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    rig.net.0.frozen.set(true);
    let (mut head, mut read) = scratch();
    let mut bufs = call_buffers(&mut head, &mut read);
    let secrets: &[&str] = &[];
    {
        let fut = drive::Driver::new(&rig.net, &c, |f| rig.state.with(f)).call(
            ("scan", None),
            secrets,
            &mut rig.ledger,
            &mut rig.events,
            &mut bufs,
        );
        let mut fut = std::pin::pin!(fut);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "waiting for the reply"
        );
        // The caller gives up (its own timeout): the future is dropped here.
    }
    let call_id = rig
        .seen()
        .iter()
        .find(|s| s.rpc_method() == "tools/call")
        .expect("the call was sent")
        .id();
    assert_eq!(rig.ledger.0, [LedgerRecord::transport_failure()], "metered");
    assert_eq!(rig.events.0.len(), 1);
    assert!(rig.events.0[0].contains("tool_error") && rig.events.0[0].contains("cancelled"));
    let (target, id) = in_flight.get().expect("the adapter is told what to cancel");
    assert_eq!(target, verifi_mcp_core::harness::failover::Target::Primary);
    assert_eq!(id, call_id);
}

#[test]
fn the_retry_after_budget_caps_a_storm_and_says_the_delay() {
    let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
    let c = cfg(&ep, None);
    let seen_texts = Rc::new(RefCell::new(std::collections::HashSet::new()));
    let s2 = seen_texts.clone();
    let mut rig = Rig::new(
        move |seen: &Seen| match seen.rpc_method() {
            // The first attempt of every call is rate-limited.
            "tools/call" => {
                let text = seen.body["params"]["arguments"]["text"].to_string();
                if s2.borrow_mut().insert(text) {
                    Act::Reply(http_json("429 Too Many Requests", "retry-after: 1\r\n", ""))
                } else {
                    good_server("s")(seen)
                }
            }
            _ => good_server("s")(seen),
        },
        4096,
        false,
    );
    let floor = drive::RETRY_BUDGET_FLOOR as usize;
    let mut outcomes = Vec::new();
    for i in 0..floor + 2 {
        outcomes.push(rig.call(&c, "echo", &format!(r#"{{"text":"{i}"}}"#), &[]));
    }
    assert!(
        outcomes[..floor].iter().all(|r| r.0),
        "each small-run call took its retry"
    );
    for r in &outcomes[floor..] {
        let error = r.3.as_deref().unwrap_or("");
        assert!(
            !r.0 && error.contains("429") && error.contains("retry-after: 1"),
            "{r:?}"
        );
    }
}

#[test]
fn progress_updates_read_as_numbers() {
    let u = |progress, total| drive::ProgressUpdate {
        progress,
        total,
        message: None,
    };
    assert_eq!(u("3", Some("4.0")).fraction(), Some(0.75));
    assert_eq!(u("1.5e1", None).progress_value(), Some(15.0));
    assert_eq!(u("12", None).fraction(), None, "no total");
    assert_eq!(u("5", Some("0")).fraction(), None, "a zero total");
    assert_eq!(
        u("9", Some("4")).fraction(),
        Some(1.0),
        "overshoot is clamped"
    );
    assert_eq!(u("x", Some("4")).progress_value(), None);
}

#[cfg(feature = "std")]
#[test]
fn a_big_result_flattened_in_place_is_the_whole_redacted_text_over_sse_and_json() {
    // Big enough for the host's in-place flatten (content::IN_PLACE_FROM): escapes, non-ASCII,
    // a long secret and a short one (shorter than the marker: the text outgrows its message).
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!(
            "line {i}\t\"quoted\" é😀 abcd token=hunter2-secret \\ end\n"
        ));
    }
    assert!(text.len() > verifi_mcp_core::wire::content::IN_PLACE_FROM);
    let want = text
        .replace("hunter2-secret", "[REDACTED]")
        .replace("abcd", "[REDACTED]");
    for sse in [false, true] {
        let reply_text = text.clone();
        let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
        let c = cfg(&ep, None);
        let mut rig = Rig::new(
            move |seen: &Seen| match seen.rpc_method() {
                "tools/call" => {
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":{}}},{{"type":"image","data":"abcd","mimeType":"image/png"}}],"isError":true}}}}"#,
                        seen.id(),
                        serde_json::to_string(&reply_text).unwrap()
                    );
                    Act::Reply(http_reply(sse, &body))
                }
                _ => good_server("s")(seen),
            },
            1500,
            false,
        );
        let (ok, got, is_error, error) = rig.call(&c, "big", "{}", &["hunter2-secret", "abcd"]);
        let want = format!(
            "{want}\n{{\"type\":\"image\",\"data\":\"[REDACTED]\",\"mimeType\":\"image/png\"}}"
        );
        assert!(!ok && is_error, "sse {sse}");
        assert_eq!(got.len(), want.len(), "sse {sse}");
        assert!(got == want, "sse {sse}: the text differs");
        assert_eq!(
            error.as_deref(),
            Some("tool error: line 0\t\"quoted\" é😀 [REDACTED] token=[REDACTED] \\ end…")
        );
        assert_eq!(
            rig.ledger.0,
            vec![LedgerRecord::answered(want.len() as u64)]
        );
    }
}

#[cfg(feature = "std")]
#[test]
fn a_big_text_that_is_not_valid_json_fails_the_call_as_the_parse_does() {
    // The host checks a big text as it writes it over its message (its check deferred by the
    // parse): a bad byte anywhere in it must fail the call with the error `Value::parse`
    // gives the same message, early in the text (checked by the parse) or late (checked as
    // it is written), over SSE and JSON.
    let line = "line\\t\\\"quoted\\\" é😀 abcd \\\\ end\\n";
    let good = line.repeat(3000);
    assert!(good.len() > verifi_mcp_core::wire::content::IN_PLACE_FROM);
    let valid = format!(r#"{{"t":"{good}"}}"#);
    assert!(Value::parse(valid.as_bytes(), JsonLimits::default()).is_ok());
    for (at, bad) in [
        (10, "\u{1}"),
        (good.len() - 40, "\u{1f}"),
        (good.len() / 2, "\\x"),
        (good.len() - 3, "\\u12g4"),
    ] {
        // `at` falls on a plain byte of some line.
        let at = (at..).find(|&i| good.is_char_boundary(i)).unwrap();
        let reply_text = format!("{}{bad}{}", &good[..at], &good[at..]);
        for sse in [false, true] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":ID,"result":{{"content":[{{"type":"text","text":"{reply_text}"}}]}}}}"#
            );
            let ep = Endpoint::parse_base("http://127.0.0.1:9001").unwrap();
            let c = cfg(&ep, None);
            let served = body.clone();
            let call_id = Rc::new(Cell::new(0u64));
            let seen_id = Rc::clone(&call_id);
            let mut rig = Rig::new(
                move |seen: &Seen| match seen.rpc_method() {
                    "tools/call" => {
                        seen_id.set(seen.id());
                        let body = served.replace("ID", &seen.id().to_string());
                        Act::Reply(http_reply(sse, &body))
                    }
                    _ => good_server("s")(seen),
                },
                1500,
                false,
            );
            let (ok, got, _, error) = rig.call(&c, "big", "{}", &["abcd"]);
            assert!(!ok, "bad {bad:?} at {at}, sse {sse}");
            assert!(got.is_empty(), "no text from a bad reply");
            // The parse's error (kind and offset) of the message as served.
            let served = body.replace("ID", &call_id.get().to_string());
            let want = Value::parse(served.as_bytes(), JsonLimits::default())
                .expect_err("not valid JSON")
                .to_string();
            let error = error.expect("an error");
            assert!(
                error.contains(want.as_str()),
                "bad {bad:?} at {at}, sse {sse}: {error} does not say {want}"
            );
        }
    }
}
