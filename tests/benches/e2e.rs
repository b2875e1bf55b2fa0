//! End to end, side by side in one run: `echo` calls after the handshake against one in-process
//! rmcp server (TCP_NODELAY on), sequential and at 16 and 64 in flight, for
//!
//! - **ours** (the headline row): `SlotHandle::call` with the options a harness gets by
//!   default (`era auto`, which finds the 2026-07-28 era on rmcp: sessionless requests with
//!   `_meta` and `Mcp-*` headers; no progress token unless asked), and the run's ten secrets,
//!   so every reply is redacted. One `smol::Executor` driven by one thread; in-flight calls are
//!   tasks spawned on it, all sharing one slot handle (what a harness fanning out tool calls
//!   does);
//! - **ours-legacy**: the same with `EraSetting::Legacy` and `2025-06-18` (the handshake and a
//!   session), the ten secrets too: what the legacy floor and rmcp's client speak;
//! - **rmcp**: rmcp's own client (`ServiceExt::serve` + `StreamableHttpClientTransport`,
//!   reqwest; `serve` does the `initialize` handshake), `peer.call_tool`, on a one-thread tokio
//!   runtime; in-flight calls are tasks on that runtime sharing one peer; no redaction;
//! - **floor**: a hand-written HTTP/1.1 client on the same one-thread smol executor sending the
//!   very bytes ours sent for a `tools/call` in the 2026 era (captured with a wire trace; only
//!   the id is patched), so the server does the same work for both; **floor-legacy**: the same
//!   client with its own handshake, one session every connection reuses, `2025-06-18`. Each
//!   keeps one connection per in-flight slot, parses just enough to find the answer (the end of
//!   the SSE event holding the `result`, or a JSON body's `content-length`) and checks it holds
//!   a `result`. Like ours, a call returns at its answer's event and the SSE stream's end is
//!   read before that connection's next request; when it has not come 25 ms after the answer
//!   (the host pool's rule) the floor opens a new connection (ours drains the old one aside and
//!   pools it again). The floors count those replacements. No redaction.
//!
//! Each client gets one thread, the server its own two-worker tokio runtime. The clients run
//! interleaved in rounds (ours, ours-legacy, rmcp, floor, floor-legacy; three times after an
//! untimed warm-up that also fills the connection pools), and the round with the median calls/s
//! is reported. Every loop is bounded by a count and a time. Then one 10 MiB `big` reply
//! (stateful SSE, legacy era), ours vs rmcp: the time and the peak heap of the client thread
//! during the call (a counting global allocator that counts only threads marked as the
//! client's, so the in-process server is not counted).
//!
//! Targets (issue 30): ours/floor >= 0.9 at 1, 16 and 64 in flight; ours/ours-legacy >= 0.95 at
//! 1 in flight; (issue 19, same protocol on both sides) ours-legacy/rmcp >= 1.5.
//!
//! `cargo bench -p verifi-mcp-tests --bench e2e` (`-- quick` for a short run; `-- only=stateful`,
//! `only=json` or `only=big` for one part; `-- quick ours-only` runs just our loops, for a
//! profiler, `floor-only` the floor's; with `only=json` in JSON mode, `in=N` at one concurrency,
//! `calls=N` calls per case, `secs=N` seconds per case at most, `era=legacy` for the legacy
//! era's client instead of the default one).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use async_io::Async;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use verifi_mcp_host::{EraSetting, HarnessContext, Options, ProtocolVersion, SlotHandle};
use verifi_mcp_tests::{Mode, ServerOptions, TestServer};

// ---------------------------------------------------------------------------------------------
// Counting allocator: current and peak bytes allocated by threads marked as "the client".

struct Counting;

static CURRENT: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

fn add(n: isize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counted() {
            add(l.size() as isize);
        }
        // SAFETY: same layout, as the caller promised.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if counted() {
            CURRENT.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: `p` came from `System.alloc` with `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if counted() {
            add(new as isize - l.size() as isize);
        }
        // SAFETY: as `GlobalAlloc::realloc` requires, passed through.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap growth (bytes) of the counted threads while `f` runs on this thread.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, isize) {
    COUNTED.with(|c| c.set(true));
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    COUNTED.with(|c| c.set(false));
    (out, peak)
}

// ---------------------------------------------------------------------------------------------
// Measurement.

struct Bounds {
    calls: usize,
    time: Duration,
    rounds: usize,
}

/// One timed case: per-call latencies and the wall time.
struct Sample {
    lat: Vec<Duration>,
    wall: Duration,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.lat.len() as f64 / self.wall.as_secs_f64()
    }
    fn pct(&self, p: f64) -> Duration {
        if self.lat.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.lat.len() as f64 * p).ceil() as usize).clamp(1, self.lat.len()) - 1;
        self.lat[i]
    }
}

fn sample(lat: Vec<Vec<Duration>>, wall: Duration) -> Sample {
    let mut lat: Vec<Duration> = lat.into_iter().flatten().collect();
    lat.sort_unstable();
    Sample { lat, wall }
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let mid = v.len() / 2;
    v.swap_remove(mid)
}

// ---------------------------------------------------------------------------------------------
// (a) ours.

/// Which protocol era our client speaks (see [`Ours::new`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// The handshake era with `2025-06-18`, as the legacy floor and rmcp's client speak it.
    Legacy,
    /// Default options: the era probe finds the 2026-07-28 era on rmcp, sessionless.
    Default,
}

/// Ten secrets of the run, as a harness has them (API tokens, a password, a cookie), so the
/// redaction runs on every reply as it does for users: the reply benches' own.
#[path = "../../core/benches/secrets.rs"]
mod secrets;
use secrets::SECRETS;

struct Ours {
    _ctx: HarnessContext,
    slot: SlotHandle,
    ex: smol::Executor<'static>,
    /// The last `tools/call` request our client wrote (head and body), for the floor of the
    /// same era to send the same bytes.
    call_request: Vec<u8>,
}

/// A context on `server` whose slot made one call (the handshake or the probe and the tool
/// list, untimed).
fn warmed(
    server: &TestServer,
    era: Era,
    trace: Option<verifi_mcp_host::WireTrace>,
) -> (HarnessContext, SlotHandle) {
    let options = Options::default()
        .secrets(Some(SECRETS.iter().map(|s| s.to_string()).collect()))
        .wire_trace(trace);
    let options = match era {
        Era::Legacy => options
            .era(EraSetting::Legacy)
            .protocol_version(ProtocolVersion::V2025_06_18),
        Era::Default => options,
    };
    let ctx = HarnessContext::from_manifest_value(
        json!({ "endpoints": { "kali": server.base_url() } }),
        "bench",
        options,
    )
    .expect("context");
    let slot = ctx.mcp("kali").expect("slot");
    let r = smol::block_on(slot.call("echo", json!({ "text": "warm" })));
    assert!(r.ok() && r.text == "warm", "ours: warm-up failed: {r:?}");
    (ctx, slot)
}

impl Ours {
    /// Options as a harness gets them by default, with the run's ten secrets; `Era::Legacy`
    /// also fixes the handshake era and `2025-06-18` (what the legacy floor and rmcp's client
    /// speak). Progress tokens: none, as by default.
    fn new(server: &TestServer, era: Era) -> Ours {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let trace = {
            let seen = seen.clone();
            verifi_mcp_host::WireTrace::new(move |e| {
                if let verifi_mcp_host::WireEvent::Sent { bytes, .. } = e
                    && find(bytes, b"\"tools/call\"").is_some()
                    && let Ok(mut s) = seen.lock()
                {
                    s.clear();
                    s.extend_from_slice(bytes);
                }
            })
        };
        // A context whose wire trace keeps the call's request, for the floor's template; then
        // the measured one, without a trace (as users run it).
        let (traced, slot) = warmed(server, era, Some(trace));
        let r = smol::block_on(slot.call("echo", json!({ "text": "ping" })));
        assert!(r.ok() && r.text == "ping", "ours: {r:?}");
        drop((traced, slot));
        let call_request = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert!(!call_request.is_empty(), "ours: the call request was seen");
        let (ctx, slot) = warmed(server, era, None);
        Ours {
            _ctx: ctx,
            slot,
            ex: smol::Executor::new(),
            call_request,
        }
    }

    fn run(&self, in_flight: usize, b: &Bounds) -> Sample {
        let start = Instant::now();
        let per = b.calls.div_ceil(in_flight);
        let time = b.time;
        let lat = smol::block_on(self.ex.run(async {
            let tasks: Vec<_> = (0..in_flight)
                .map(|_| {
                    let slot = self.slot.clone();
                    self.ex.spawn(async move {
                        let mut lat = Vec::with_capacity(per);
                        while lat.len() < per && start.elapsed() < time {
                            let t = Instant::now();
                            let r = slot.call("echo", json!({ "text": "ping" })).await;
                            lat.push(t.elapsed());
                            assert!(r.ok() && r.text == "ping", "ours: {r:?}");
                        }
                        lat
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(in_flight);
            for t in tasks {
                all.push(t.await);
            }
            all
        }));
        sample(lat, start.elapsed())
    }
}

// ---------------------------------------------------------------------------------------------
// (b) rmcp's own client.

struct Rmcp {
    rt: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ()>>,
    peer: Peer<RoleClient>,
}

fn echo_params(text: &str) -> CallToolRequestParams {
    let args = match json!({ "text": text }) {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    };
    CallToolRequestParams::new("echo").with_arguments(args)
}

fn first_text(r: &rmcp::model::CallToolResult) -> Option<&str> {
    r.content.first()?.as_text().map(|t| t.text.as_str())
}

impl Rmcp {
    fn new(server: &TestServer) -> Rmcp {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let url = server.mcp_url();
        let client = rt
            .block_on(async {
                let transport = StreamableHttpClientTransport::from_uri(url);
                ().serve(transport).await
            })
            .expect("rmcp handshake");
        let peer = client.peer().clone();
        let r = rt
            .block_on(peer.call_tool(echo_params("warm")))
            .expect("rmcp warm-up");
        assert_eq!(first_text(&r), Some("warm"));
        Rmcp {
            rt,
            client: Some(client),
            peer,
        }
    }

    fn run(&self, in_flight: usize, b: &Bounds) -> Sample {
        let start = Instant::now();
        let per = b.calls.div_ceil(in_flight);
        let time = b.time;
        let lat = self.rt.block_on(async {
            let tasks: Vec<_> = (0..in_flight)
                .map(|_| {
                    let peer = self.peer.clone();
                    tokio::spawn(async move {
                        let mut lat = Vec::with_capacity(per);
                        while lat.len() < per && start.elapsed() < time {
                            let t = Instant::now();
                            let r = peer.call_tool(echo_params("ping")).await;
                            lat.push(t.elapsed());
                            let r = r.expect("rmcp call");
                            assert_eq!(first_text(&r), Some("ping"));
                        }
                        lat
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(in_flight);
            for t in tasks {
                all.push(t.await.expect("rmcp task"));
            }
            all
        });
        sample(lat, start.elapsed())
    }
}

impl Drop for Rmcp {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), c.cancel()).await });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (c) the floor: minimal HTTP/1.1 over kept-alive connections.

const PROTOCOL: &str = "2025-06-18";

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn post(addr: SocketAddr, session: Option<&str>, body: &str) -> Vec<u8> {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: {PROTOCOL}\r\n"
    );
    if let Some(s) = session {
        req.push_str(&format!("mcp-session-id: {s}\r\n"));
    }
    req.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    req.into_bytes()
}

/// Where a response ends in `buf` (or `None`: read more). Knows the two framings rmcp (hyper)
/// uses: `content-length`, else chunked, whose last chunk is `0\r\n\r\n`.
fn response_end(buf: &[u8]) -> Option<usize> {
    let head = find(buf, b"\r\n\r\n")? + 4;
    if let Some(i) = find(&buf[..head], b"content-length: ") {
        let digits = &buf[i + 16..head];
        let n = digits
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .fold(0usize, |n, d| n * 10 + usize::from(d - b'0'));
        return (buf.len() >= head + n).then_some(head + n);
    }
    buf.ends_with(b"\r\n0\r\n\r\n").then_some(buf.len())
}

/// A blocking exchange for the handshake.
fn blocking_exchange(c: &mut TcpStream, req: &[u8]) -> Vec<u8> {
    c.write_all(req).expect("floor write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(n) = response_end(&buf) {
            buf.truncate(n);
            return buf;
        }
        assert!(Instant::now() < end, "floor: handshake reply too slow");
        let n = c.read(&mut chunk).expect("floor read");
        assert!(n > 0, "floor: server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct Floor {
    addr: SocketAddr,
    /// The echo request with a placeholder id; `ID_DIGITS` digits at `id_at` are patched.
    request: Vec<u8>,
    id_at: usize,
    conns: Vec<Async<TcpStream>>,
    ex: smol::Executor<'static>,
    /// Connections opened because a reply stream's end had not come in time (all runs).
    replaced: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

const ID_DIGITS: usize = 9;
/// How long after an answer its stream's end may come and the connection still be reused: the
/// host pool's rule (`adapters/host/src/net.rs`, 25 ms from the answer).
const TAIL: Duration = Duration::from_millis(25);

/// `request` (head and body) with its JSON-RPC id made the floor's fixed-width string id
/// `"f00-000000000"` and its `content-length` set again.
fn with_floor_id(request: &[u8]) -> Vec<u8> {
    let split = find(request, b"\r\n\r\n").expect("a head") + 4;
    let (head, body) = request.split_at(split);
    let at = find(body, b"\"id\":").expect("an id") + 5;
    let end = at + body[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut new_body = body[..at].to_vec();
    new_body.extend_from_slice(format!("\"f00-{}\"", "0".repeat(ID_DIGITS)).as_bytes());
    new_body.extend_from_slice(&body[end..]);
    let head = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in head.split("\r\n") {
        if line.to_ascii_lowercase().starts_with("content-length:") {
            out.push_str(&format!("content-length: {}", new_body.len()));
        } else {
            out.push_str(line);
        }
        out.push_str("\r\n");
    }
    // `split("\r\n")` of a head ending in a blank line gives two empty pieces: one too many.
    out.truncate(out.len() - 2);
    let mut req = out.into_bytes();
    req.extend_from_slice(&new_body);
    req
}

/// Where the answer ends in `buf`, and whether the reply ended there too (`None`: read more).
/// A `content-length` body is whole at once; a chunked SSE stream is answered at the end of
/// the event that holds the `result`, and ends with its last chunk `0\r\n\r\n`.
fn answer_end(buf: &[u8]) -> Option<(usize, bool)> {
    if let Some(n) = response_end(buf)
        && find(&buf[..find(buf, b"\r\n\r\n")? + 4], b"content-length: ").is_some()
    {
        return Some((n, true));
    }
    let result = find(buf, b"\"result\"")?;
    let event_end = result + find(&buf[result..], b"\n\n")? + 2;
    Some((event_end, buf.ends_with(b"\r\n0\r\n\r\n")))
}

/// Reads the end of a chunked reply whose first `len` bytes are in `buf`, until `deadline`.
async fn end_tail(
    c: &mut Async<TcpStream>,
    buf: &mut Vec<u8>,
    mut len: usize,
    deadline: Instant,
) -> bool {
    futures_lite::future::or(
        async {
            while !buf[..len].ends_with(b"\r\n0\r\n\r\n") {
                if len == buf.len() {
                    buf.resize(len * 2, 0);
                }
                match c.read(&mut buf[len..]).await {
                    Ok(n) if n > 0 => len += n,
                    _ => return false,
                }
            }
            true
        },
        async {
            async_io::Timer::at(deadline).await;
            false
        },
    )
    .await
}

/// A new connection to `addr` (TCP_NODELAY on), for one whose reply did not end in time.
async fn reconnect(addr: SocketAddr) -> Async<TcpStream> {
    let c = Async::<TcpStream>::connect(addr)
        .await
        .expect("floor connect");
    c.get_ref().set_nodelay(true).expect("nodelay");
    c
}

impl Floor {
    /// The legacy floor: its own handshake, a session, `2025-06-18`.
    fn legacy(server: &TestServer) -> Floor {
        let addr = server.addr();
        let mut c = TcpStream::connect(addr).expect("floor connect");
        c.set_nodelay(true).expect("nodelay");
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL}","capabilities":{{}},"clientInfo":{{"name":"floor","version":"0"}}}}}}"#
        );
        let reply = blocking_exchange(&mut c, &post(addr, None, &init));
        assert!(
            reply.starts_with(b"HTTP/1.1 200"),
            "floor: initialize failed"
        );
        let session = find(&reply, b"mcp-session-id: ").map(|i| {
            let rest = &reply[i + 16..];
            let n = find(rest, b"\r\n").unwrap_or(rest.len());
            String::from_utf8_lossy(&rest[..n]).into_owned()
        });
        let note = blocking_exchange(
            &mut c,
            &post(
                addr,
                session.as_deref(),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            ),
        );
        assert!(
            note.starts_with(b"HTTP/1.1 202"),
            "floor: initialized refused"
        );
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"f00-{}","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"ping"}}}}}}"#,
            "0".repeat(ID_DIGITS)
        );
        c.set_nonblocking(true).expect("nonblocking");
        Floor::with_request(addr, post(addr, session.as_deref(), &body), vec![c])
    }

    /// The 2026-07-28 floor: sessionless, no handshake, sending the very request bytes our
    /// client sent in that era (its `_meta`, `Mcp-*` headers and all; only the id differs), so
    /// the server does the same work for both.
    fn modern(server: &TestServer, ours: &Ours) -> Floor {
        let addr = server.addr();
        Floor::with_request(addr, with_floor_id(&ours.call_request), Vec::new())
    }

    fn with_request(addr: SocketAddr, request: Vec<u8>, conns: Vec<TcpStream>) -> Floor {
        let id_at = find(&request, b"\"f00-").expect("id") + 2;
        Floor {
            addr,
            request,
            id_at,
            conns: conns
                .into_iter()
                .map(|c| Async::new(c).expect("async"))
                .collect(),
            ex: smol::Executor::new(),
            replaced: Default::default(),
        }
    }

    fn run(&mut self, in_flight: usize, b: &Bounds) -> Sample {
        while self.conns.len() < in_flight {
            let c = TcpStream::connect(self.addr).expect("floor connect");
            c.set_nodelay(true).expect("nodelay");
            self.conns.push(Async::new(c).expect("async"));
        }
        let conns: Vec<_> = self.conns.drain(..).collect();
        let start = Instant::now();
        let per = b.calls.div_ceil(in_flight);
        let time = b.time;
        let (request, id_at, addr) = (&self.request, self.id_at, self.addr);
        let ex = &self.ex;
        let replaced = &self.replaced;
        let done = smol::block_on(ex.run(async {
            let tasks: Vec<_> = conns
                .into_iter()
                .enumerate()
                .map(|(slot, mut c)| {
                    let mut req = request.clone();
                    let replaced = replaced.clone();
                    ex.spawn(async move {
                        req[id_at] = b'0' + (slot / 10 % 10) as u8;
                        req[id_at + 1] = b'0' + (slot % 10) as u8;
                        let digits = id_at + 3;
                        let mut buf = vec![0u8; 64 * 1024];
                        let mut lat = Vec::with_capacity(per);
                        let mut n_call = 0usize;
                        // The answer's end and when it came, while the stream's end is unread.
                        let mut tail: Option<(usize, Instant)> = None;
                        while lat.len() < per && start.elapsed() < time {
                            n_call += 1;
                            let mut k = n_call;
                            for d in req[digits..digits + ID_DIGITS].iter_mut().rev() {
                                *d = b'0' + (k % 10) as u8;
                                k /= 10;
                            }
                            let t = Instant::now();
                            // The last reply's end is read before this request, as the host's
                            // pool does: 25 ms from its answer, else a new connection.
                            if let Some((len, answered)) = tail.take()
                                && !end_tail(&mut c, &mut buf, len, answered + TAIL).await
                            {
                                replaced.fetch_add(1, Ordering::Relaxed);
                                c = reconnect(addr).await;
                            }
                            c.write_all(&req).await.expect("floor write");
                            let mut len = 0;
                            let (answer, ended) = loop {
                                if len == buf.len() {
                                    buf.resize(len * 2, 0);
                                }
                                let n = c.read(&mut buf[len..]).await.expect("floor read");
                                assert!(n > 0, "floor: server closed");
                                len += n;
                                if let Some(e) = answer_end(&buf[..len]) {
                                    break e;
                                }
                            };
                            lat.push(t.elapsed());
                            assert!(
                                buf.starts_with(b"HTTP/1.1 200")
                                    && find(&buf[..answer], b"\"result\"").is_some(),
                                "floor: bad reply {:?}",
                                String::from_utf8_lossy(&buf[..len])
                            );
                            if !ended {
                                tail = Some((len, Instant::now()));
                            }
                        }
                        // Untimed: the connection goes back with its last reply ended.
                        if let Some((len, answered)) = tail
                            && !end_tail(&mut c, &mut buf, len, answered + Duration::from_secs(1))
                                .await
                        {
                            c = reconnect(addr).await;
                        }
                        (c, lat)
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(in_flight);
            for t in tasks {
                all.push(t.await);
            }
            all
        }));
        let wall = start.elapsed();
        let mut lat = Vec::with_capacity(done.len());
        for (c, l) in done {
            self.conns.push(c);
            lat.push(l);
        }
        sample(lat, wall)
    }
}

// ---------------------------------------------------------------------------------------------

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn verdict(ratio: f64, target: f64) -> &'static str {
    if ratio >= target { "met" } else { "MISSED" }
}

/// `ours-only` / `floor-only`: just one client's loops, for a profiler (`in=N` for one
/// concurrency instead of 1, 16 and 64).
fn one_client(mode: Mode, b: &Bounds, floor: bool, only_in: Option<usize>, era: Era) {
    let server = TestServer::start_with(ServerOptions::new(mode)).expect("server");
    let cases = only_in.map_or(vec![1, 16, 64], |n| vec![n]);
    let ours = Ours::new(&server, era);
    let mut floor_client = floor.then(|| match era {
        Era::Legacy => Floor::legacy(&server),
        Era::Default => Floor::modern(&server, &ours),
    });
    for in_flight in cases {
        let (who, s) = match &mut floor_client {
            Some(f) => ("floor", f.run(in_flight, b)),
            None => ("ours", ours.run(in_flight, b)),
        };
        println!(
            "{in_flight:>3} in flight: {who} {:.0} calls/s ({} calls)",
            s.rate(),
            s.lat.len()
        );
    }
}

fn echo_cases(mode: Mode, b: &Bounds) {
    let server = TestServer::start_with(ServerOptions::new(mode)).expect("server");
    let ours = Ours::new(&server, Era::Default);
    let legacy = Ours::new(&server, Era::Legacy);
    let rmcp = Rmcp::new(&server);
    let mut floor = Floor::modern(&server, &ours);
    let mut floor_legacy = Floor::legacy(&server);
    println!(
        "\n== echo, rmcp server {} mode, TCP_NODELAY on; median of {} interleaved rounds, each \
         at most {} calls or {:?} ==",
        mode.name(),
        b.rounds,
        b.calls,
        b.time
    );
    println!(
        "{:>9} {:<12} {:>9} {:>9} {:>9}",
        "in flight", "client", "calls/s", "p50 ms", "p99 ms"
    );
    for in_flight in [1, 16, 64] {
        let warm = Bounds {
            calls: (in_flight * 8).max(200),
            time: Duration::from_secs(2),
            rounds: 1,
        };
        ours.run(in_flight, &warm);
        legacy.run(in_flight, &warm);
        rmcp.run(in_flight, &warm);
        floor.run(in_flight, &warm);
        floor_legacy.run(in_flight, &warm);
        let mut runs: [Vec<Sample>; 5] = Default::default();
        for _ in 0..b.rounds {
            runs[0].push(ours.run(in_flight, b));
            runs[1].push(legacy.run(in_flight, b));
            runs[2].push(rmcp.run(in_flight, b));
            runs[3].push(floor.run(in_flight, b));
            runs[4].push(floor_legacy.run(in_flight, b));
        }
        let [o, ol, r, f, fl] = runs.map(median);
        for (name, s) in [
            ("ours", &o),
            ("ours-legacy", &ol),
            ("rmcp", &r),
            ("floor", &f),
            ("floor-legacy", &fl),
        ] {
            println!(
                "{:>9} {:<12} {:>9.0} {:>9.3} {:>9.3}   ({} calls)",
                in_flight,
                name,
                s.rate(),
                ms(s.pct(0.50)),
                ms(s.pct(0.99)),
                s.lat.len()
            );
        }
        let (vf, vl) = (o.rate() / f.rate(), o.rate() / ol.rate());
        let (vfl, vr) = (ol.rate() / fl.rate(), ol.rate() / r.rate());
        println!(
            "{in_flight:>9} ratios: ours/floor {vf:.2} (target >= 0.9: {}), ours/ours-legacy \
             {vl:.2}{}, ours-legacy/floor-legacy {vfl:.2}, ours-legacy/rmcp {vr:.2} (target >= \
             1.5: {})",
            verdict(vf, 0.9),
            if in_flight == 1 {
                format!(" (target >= 0.95: {})", verdict(vl, 0.95))
            } else {
                String::new()
            },
            verdict(vr, 1.5)
        );
    }
    println!(
        "floors' connections replaced after a reply's end came over 25 ms late (all runs): \
         floor {}, floor-legacy {}",
        floor.replaced.load(Ordering::Relaxed),
        floor_legacy.replaced.load(Ordering::Relaxed)
    );
    drop(rmcp);
    drop(ours);
    drop(legacy);
}

fn big_case(rounds: usize) {
    const BYTES: usize = 10 * 1024 * 1024;
    let server = TestServer::start_with(ServerOptions::new(Mode::Stateful)).expect("server");
    let ours = Ours::new(&server, Era::Legacy);
    let rmcp = Rmcp::new(&server);
    println!("\n== one 10 MiB `big` reply, rmcp server stateful (SSE) mode; median of {rounds} ==");
    println!(
        "{:<6} {:>9} {:>14} {:>12}",
        "client", "ms", "peak heap B", "peak/reply"
    );
    let (mut o, mut r) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let (len, peak) = peak_during(|| {
            let res = smol::block_on(ours.slot.call("big", json!({ "bytes": BYTES })));
            assert!(res.ok(), "ours big: {:?}", res.error());
            res.text.len()
        });
        assert_eq!(len, BYTES);
        o.push((t.elapsed(), peak));
        let t = Instant::now();
        let (len, peak) = peak_during(|| {
            let mut p = CallToolRequestParams::new("big");
            p = p.with_arguments(match json!({ "bytes": BYTES }) {
                serde_json::Value::Object(m) => m,
                _ => unreachable!(),
            });
            let res = rmcp.rt.block_on(rmcp.peer.call_tool(p)).expect("rmcp big");
            first_text(&res).map_or(0, str::len)
        });
        assert_eq!(len, BYTES);
        r.push((t.elapsed(), peak));
    }
    let pick = |mut v: Vec<(Duration, isize)>| {
        v.sort_by_key(|x| x.0);
        v[v.len() / 2]
    };
    let (o, r) = (pick(o), pick(r));
    for (name, (t, peak)) in [("ours", o), ("rmcp", r)] {
        println!(
            "{:<6} {:>9.1} {:>14} {:>11.2}x",
            name,
            ms(t),
            peak,
            peak as f64 / BYTES as f64
        );
    }
    println!(
        "ratios: time rmcp/ours {:.2}, peak heap ours/rmcp {:.2}",
        r.0.as_secs_f64() / o.0.as_secs_f64(),
        o.1 as f64 / r.1 as f64
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let only = std::env::args().find_map(|a| a.strip_prefix("only=").map(str::to_owned));
    let mut b = if quick {
        Bounds {
            calls: 1000,
            time: Duration::from_secs(2),
            rounds: 1,
        }
    } else {
        Bounds {
            calls: 3000,
            time: Duration::from_secs(5),
            rounds: 3,
        }
    };
    if let Some(n) = std::env::args().find_map(|a| a.strip_prefix("calls=")?.parse().ok()) {
        b.calls = n;
    }
    // Under a profiler the calls are slower: `secs=N` lets `calls=N` be reached.
    if let Some(n) = std::env::args().find_map(|a| a.strip_prefix("secs=")?.parse().ok()) {
        b.time = Duration::from_secs(n);
    }
    let floor_only = std::env::args().any(|a| a == "floor-only");
    if floor_only || std::env::args().any(|a| a == "ours-only") {
        let mode = match only.as_deref() {
            Some("json") => Mode::Json,
            _ => Mode::Stateful,
        };
        let only_in = std::env::args().find_map(|a| a.strip_prefix("in=")?.parse().ok());
        let era = if std::env::args().any(|a| a == "era=legacy") {
            Era::Legacy
        } else {
            Era::Default
        };
        one_client(mode, &b, floor_only, only_in, era);
        return;
    }
    for mode in [Mode::Stateful, Mode::Json] {
        if only.as_deref().is_none_or(|o| o == mode.name()) {
            echo_cases(mode, &b);
        }
    }
    if only.as_deref().is_none_or(|o| o == "big") {
        big_case(if quick { 1 } else { 3 });
    }
}
