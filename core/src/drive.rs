//! The generic async driver: one loop that both adapters share.
//!
//! It sequences the pure parts of the core over any `embedded_io_async::{Read, Write}`
//! connection: the lazy handshake ([`Session`]), one request per [`Exchange`], the 404
//! re-initialization, failover ([`FailoverState`]), redaction, metering and timeline events.
//! An adapter supplies only [`Net`] (open a connection, give back a kept-alive one, tell the
//! time, sleep) and [`Shared`] (where a slot's state lives), and owns the buffers.
//!
//! Every wait is raced against the call's deadline; every buffer is the caller's and capped.

use core::fmt::Write as _;

use core::pin::pin;
use core::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use embassy_futures::select::{Either, select};
use embedded_io_async::{Read, Write};
use heapless::String;

use crate::buf::{Buf, Sink};
use crate::harness::events::{Timeline, TimelineEvent};
use crate::harness::failover::{AttemptOutcome, FailoverState, Target};
use crate::harness::meter::{Ledger, LedgerRecord};
use crate::harness::redact::Redactor;
use crate::harness::result::{ToolResult, write_tool_error};
use crate::wire::content;
use crate::wire::endpoint::Endpoint;
use crate::wire::exchange::{Exchange, Expect, OnMessage, ReplyLimits, Step, Verdict};
use crate::wire::failure::{
    BufferName, ConnectError, DETAIL_BYTES, Failure, HandshakeError, StrSink, truncated,
};
use crate::wire::http::{MAX_SESSION_ID, Method, RequestHead, write_request_head};
use crate::wire::json::{JsonLimits, Value};
use crate::wire::jsonrpc::{self, Found, Message, Outcome, ProtocolVersion};
use crate::wire::session::{Begin, Phase, Session, Snapshot};
use crate::wire::sse::MAX_EVENT_ID;

/// Milliseconds on the adapter's monotonic clock.
pub type Millis = u64;

/// How long a best-effort `notifications/cancelled` or `DELETE` may take.
const COURTESY_MS: Millis = 1_000;
/// Most tools/list pages followed.
const MAX_PAGES: u32 = 1_000;
/// Most GET resumptions of one SSE reply that ended without its response.
const MAX_RESUMES: u32 = 3;
/// How long the driver keeps reading after the response for the end of its framing.
const TAIL_MS: Millis = 10;
/// Most bytes read after the response while waiting for the end of its framing.
const MAX_TAIL_BYTES: usize = 64 * 1024;
/// Longest tools/list cursor kept between pages.
const MAX_CURSOR: usize = 1_024;
/// The default idle time after which a reply that sends nothing is `server stalled`.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// The slot's retry budget for 429/503 answers with `retry-after`: one retry in this many
/// calls of the slot (a fifth of them) …
pub const RETRY_BUDGET_CALLS_PER_RETRY: u64 = 5;
/// … and never fewer than this many in a run, so every call of a small run can take its one
/// retry; a storm in a long run is capped.
pub const RETRY_BUDGET_FLOOR: u64 = 10;
/// The longest message of an error line built here (a JSON-RPC refusal, a failure).
const ERROR_LINE_BYTES: usize = 2 * DETAIL_BYTES + 256;

/// What an adapter supplies: connections and time. Nothing about the protocol.
// `async fn` in a public trait: the futures carry no `Send` bound here, but each adapter is
// a concrete type, so its futures are `Send` exactly when its connections and state are (the
// host's are; the edge runs on one executor and needs no `Send`).
#[allow(async_fn_in_trait)]
pub trait Net {
    /// A connection (TCP, or TLS over TCP).
    type Conn: Read + Write;
    /// Opens a connection to `ep` (TLS for `https`, SNI = its host), or hands out a pooled
    /// kept-alive one to the same endpoint (then the `bool` is true). `fresh` forbids the pool.
    ///
    /// A pooled connection is checked before it is handed out: a zero-wait read that sees the
    /// end of the stream, a reset, or bytes nobody asked for means the server let it go, so
    /// it is dropped and another (or a new one) is used. Once a `tools/call` is written the
    /// driver never sends it again, so this check is what keeps a stale socket from costing
    /// a call.
    async fn connect(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
    ) -> Result<(Self::Conn, bool), ConnectError>;
    /// Takes back a connection whose response ended cleanly and may be kept alive.
    fn recycle(&self, ep: &Endpoint<'_>, conn: Self::Conn);
    /// Now, on a monotonic clock.
    fn now(&self) -> Millis;
    /// Sleeps until `at` on the same clock.
    async fn sleep_until(&self, at: Millis);
}

/// Where a slot's state lives: a lock on the host, a cell on the edge.
#[allow(async_fn_in_trait)] // as for `Net`
pub trait Shared<T> {
    /// Runs `f` on the state; never held across an await.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// A counter that [`notify`](Self::notify) increases.
    fn generation(&self) -> u64;
    /// Returns once the generation differs from `since` (no lost wake-ups).
    async fn changed(&self, since: u64);
    /// Increases the generation and wakes every waiter.
    fn notify(&self);
}

/// The state of one slot for the whole run: a session per server, failover, request ids.
#[derive(Debug)]
pub struct SlotState {
    primary: Session,
    fallback: Option<Session>,
    failover: FailoverState,
    next_id: u64,
    /// Calls started, and `retry-after` retries taken, in this run (the retry budget).
    calls: u64,
    retries: u64,
}

impl SlotState {
    /// Fresh state for a slot that offers `version` and has a fallback or not.
    pub fn new(version: ProtocolVersion, has_fallback: bool) -> Self {
        SlotState {
            primary: Session::new(version),
            fallback: has_fallback.then(|| Session::new(version)),
            failover: FailoverState::new(has_fallback),
            next_id: 1,
            calls: 0,
            retries: 0,
        }
    }

    /// Takes one `retry-after` retry from the slot's budget (one in
    /// [`RETRY_BUDGET_CALLS_PER_RETRY`] calls, and at least [`RETRY_BUDGET_FLOOR`]).
    fn take_retry(&mut self) -> bool {
        let budget = (self.calls / RETRY_BUDGET_CALLS_PER_RETRY).max(RETRY_BUDGET_FLOOR);
        let ok = self.retries < budget;
        if ok {
            self.retries += 1;
        }
        ok
    }

    /// The session of one server of the slot.
    pub fn session(&self, target: Target) -> Option<&Session> {
        match target {
            Target::Primary => Some(&self.primary),
            Target::Fallback => self.fallback.as_ref(),
        }
    }

    fn session_mut(&mut self, target: Target) -> Option<&mut Session> {
        match target {
            Target::Primary => Some(&mut self.primary),
            Target::Fallback => self.fallback.as_mut(),
        }
    }

    /// The failover state.
    pub fn failover(&self) -> &FailoverState {
        &self.failover
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }
}

/// How a slot is reached and what a call may take.
#[derive(Debug, Clone)]
pub struct SlotConfig<'a> {
    /// The slot's name (for events).
    pub slot: &'a str,
    /// The primary server.
    pub primary: Endpoint<'a>,
    /// The primary's endpoint as written in the manifest (for events).
    pub primary_label: &'a str,
    /// The fallback server, if any.
    pub fallback: Option<Endpoint<'a>>,
    /// The fallback's endpoint as written in the manifest (for events).
    pub fallback_label: &'a str,
    /// Static headers sent on every request (e.g. `authorization`). Their values are secrets
    /// of the run: adapters put them in the redaction set (see [`SlotConfig::header_values`]).
    pub headers: &'a [(&'a str, &'a str)],
    /// Offered in `initialize` (the seed's `2024-11-05` by default).
    pub version: ProtocolVersion,
    /// The per-call deadline: connect, handshake and reply (the seed's 300 000 ms by default).
    pub timeout_ms: u64,
    /// When set, progress notifications for a call reset its timer, up to this hard maximum.
    pub progress_extends_to_ms: Option<u64>,
    /// Caps on the reply.
    pub limits: ReplyLimits,
    /// Keep the redacted JSON-RPC reply as `raw`.
    pub keep_raw: bool,
    /// Told of each progress notification for a call (a progress token is sent when set).
    pub on_progress: Option<ProgressObserver<'a>>,
    /// A reply that sends no byte for this long fails with `server stalled` (progress
    /// notifications and SSE comments are bytes); `None`: only the deadline applies.
    pub idle_timeout_ms: Option<u64>,
    /// Where a call says which `tools/call` it has on the wire (for an adapter that cancels a
    /// call whose future was dropped).
    pub in_flight: Option<&'a InFlight>,
}

/// The `tools/call` a call has on the wire, if any: an adapter reads it when the caller drops
/// the call's future, to send the server a cancellation.
///
/// Plain 32-bit atomics (Cortex-M has no 64-bit ones); one writer, the call, and one reader,
/// its adapter after the call's future is gone.
#[derive(Debug, Default)]
pub struct InFlight {
    id_low: AtomicU32,
    id_high: AtomicU32,
    target: AtomicU8,
}

impl InFlight {
    /// Nothing on the wire.
    pub const fn new() -> Self {
        InFlight {
            id_low: AtomicU32::new(0),
            id_high: AtomicU32::new(0),
            target: AtomicU8::new(0),
        }
    }

    fn set(&self, target: Target, id: u64) {
        let t = match target {
            Target::Primary => 0,
            Target::Fallback => 1,
        };
        self.target.store(t, Ordering::Relaxed);
        self.id_high.store((id >> 32) as u32, Ordering::Relaxed);
        self.id_low.store(id as u32, Ordering::Relaxed);
    }

    fn clear(&self) {
        self.id_low.store(0, Ordering::Relaxed);
        self.id_high.store(0, Ordering::Relaxed);
    }

    /// The server and request id of the `tools/call` on the wire, if one is.
    pub fn get(&self) -> Option<(Target, u64)> {
        let id = (u64::from(self.id_high.load(Ordering::Relaxed)) << 32)
            | u64::from(self.id_low.load(Ordering::Relaxed));
        let target = match self.target.load(Ordering::Relaxed) {
            0 => Target::Primary,
            _ => Target::Fallback,
        };
        (id != 0).then_some((target, id))
    }
}

/// One progress notification of a call, as a person would show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressUpdate<'u> {
    /// `progress`, the number as the server wrote it (`3`, `1.0`).
    pub progress: &'u str,
    /// `total`, if the server gave one, as written.
    pub total: Option<&'u str>,
    /// `message`, unescaped and redacted, cut to [`MAX_PROGRESS_MESSAGE`] bytes.
    pub message: Option<&'u str>,
}

/// Longest progress message handed to an observer (longer ones are cut).
pub const MAX_PROGRESS_MESSAGE: usize = 240;

/// Where a slot's progress notifications go (e.g. a terminal's status line).
#[derive(Clone, Copy)]
pub struct ProgressObserver<'a>(pub &'a (dyn Fn(&ProgressUpdate<'_>) + Sync));

impl core::fmt::Debug for ProgressObserver<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ProgressObserver")
    }
}

impl<'a> SlotConfig<'a> {
    /// A config with the seed's defaults for everything but the slot and its servers.
    pub fn new(slot: &'a str, primary: Endpoint<'a>, primary_label: &'a str) -> Self {
        SlotConfig {
            slot,
            primary,
            primary_label,
            fallback: None,
            fallback_label: "",
            headers: &[],
            version: ProtocolVersion::DEFAULT,
            timeout_ms: 300_000,
            progress_extends_to_ms: None,
            limits: ReplyLimits::default(),
            keep_raw: false,
            on_progress: None,
            idle_timeout_ms: Some(DEFAULT_IDLE_TIMEOUT_MS),
            in_flight: None,
        }
    }

    /// The values of the static headers: secrets of the run.
    pub fn header_values(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().map(|(_, v)| *v)
    }

    fn endpoint(&self, target: Target) -> Option<&Endpoint<'a>> {
        match target {
            Target::Primary => Some(&self.primary),
            Target::Fallback => self.fallback.as_ref(),
        }
    }
}

/// Per-call scratch, owned by the adapter (capped `Vec`s on a host, static slices on the edge).
pub struct CallBuffers<'b, B: Buf> {
    /// The outgoing request, head and body (sent in one write).
    pub request: B,
    /// Storage for the response head.
    pub head: &'b mut [u8],
    /// One socket read.
    pub read: &'b mut [u8],
    /// The reply: a JSON body or one SSE event's data.
    pub reply: B,
    /// The flattened, redacted text.
    pub text: B,
    /// The redacted error message.
    pub error: B,
    /// The redacted raw reply (only with `keep_raw`; may have a zero cap otherwise).
    pub raw: B,
}

/// Why `list_tools` gave no list. Its `Display` reads `tools/list failed: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// No server answered.
    Unreachable(Failure),
    /// The server answered tools/list with a JSON-RPC error.
    Refused {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message, redacted (a longer one is cut and ends in `…`).
        message: String<DETAIL_BYTES>,
    },
}

impl core::fmt::Display for ListError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ListError::Unreachable(failure) => write!(f, "tools/list failed: {failure}"),
            ListError::Refused { code, message } => {
                write!(f, "tools/list failed: JSON-RPC error {code}: {message}")
            }
        }
    }
}

/// The call's deadline, which progress may push out up to a hard maximum.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Millis,
    hard: Millis,
    step: Millis,
}

impl Deadline {
    fn new(now: Millis, cfg: &SlotConfig<'_>) -> Self {
        let at = now.saturating_add(cfg.timeout_ms);
        let hard = cfg
            .progress_extends_to_ms
            .map_or(at, |max| now.saturating_add(max.max(cfg.timeout_ms)));
        Deadline {
            at,
            hard,
            step: cfg.timeout_ms,
        }
    }

    fn extend(&mut self, now: Millis) {
        self.at = now.saturating_add(self.step).min(self.hard).max(self.at);
    }
}

async fn before<N: Net, F: core::future::Future>(
    net: &N,
    at: Millis,
    f: F,
) -> Result<F::Output, Failure> {
    match select(f, net.sleep_until(at)).await {
        Either::First(out) => Ok(out),
        Either::Second(()) => Err(Failure::TimedOut),
    }
}

/// The JSON-RPC message a request carries.
enum Body<'x> {
    Initialize {
        id: u64,
        version: ProtocolVersion,
    },
    Initialized,
    ToolsList {
        id: u64,
        cursor: Option<&'x str>,
    },
    ToolsCall {
        id: u64,
        tool: &'x str,
        args: Option<Value<'x>>,
        progress: Option<u64>,
    },
    Cancelled {
        id: u64,
        reason: &'static str,
    },
    None,
}

impl Body<'_> {
    /// A request a server may see twice without harm (a `tools/call` may have run a tool).
    fn safe_to_repeat(&self) -> bool {
        !matches!(self, Body::ToolsCall { .. })
    }

    /// Gives the request a new id (a re-sent request always has one); the new id, if it has
    /// an id at all.
    fn renumber(&mut self) -> Option<u64> {
        match self {
            Body::Initialize { id, .. }
            | Body::ToolsList { id, .. }
            | Body::ToolsCall { id, .. } => {
                *id ^= RESENT_ID_BIT;
                Some(*id)
            }
            Body::Initialized | Body::Cancelled { .. } | Body::None => None,
        }
    }

    /// Through `dyn Sink`: it runs twice per request (to count, then to write), and the
    /// encoders exist once in the binary instead of once per sink type.
    fn write(&self, out: &mut dyn Sink) -> Result<(), crate::buf::Overflow> {
        let out = &mut &mut *out;
        match self {
            Body::Initialize { id, version } => jsonrpc::encode_initialize(out, *id, *version),
            Body::Initialized => jsonrpc::encode_initialized(out),
            Body::ToolsList { id, cursor } => jsonrpc::encode_tools_list(out, *id, *cursor),
            Body::ToolsCall {
                id,
                tool,
                args,
                progress,
            } => jsonrpc::encode_tools_call(out, *id, tool, *args, *progress),
            Body::Cancelled { id, reason } => jsonrpc::encode_cancelled(out, *id, reason),
            Body::None => Ok(()),
        }
    }
}

/// One request to one server: what to send, and what reply completes it.
struct Trip<'x> {
    ep: &'x Endpoint<'x>,
    method: Method,
    snap: Option<&'x Snapshot>,
    last_event_id: Option<&'x str>,
    body: Body<'x>,
    expect: Expect,
}

impl<'x> Trip<'x> {
    /// A POST of `body` in the session `snap` (none before the handshake).
    fn post(ep: &'x Endpoint<'x>, snap: Option<&'x Snapshot>, body: Body<'x>) -> Self {
        let expect = match body {
            Body::Initialized | Body::Cancelled { .. } => Expect::Accepted,
            _ => Expect::Response,
        };
        Trip {
            ep,
            method: Method::Post,
            snap,
            last_event_id: None,
            body,
            expect,
        }
    }

    /// Writes head and body into `out`, so the adapter sends them in one write.
    fn write<B: Buf>(&self, out: &mut B, cfg: &SlotConfig<'_>) -> Result<(), Failure> {
        out.clear();
        let mut count = crate::buf::CountingSink::default();
        self.body
            .write(&mut count)
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))?;
        let head = RequestHead {
            method: self.method,
            endpoint: self.ep,
            accept_json_and_sse: self.method != Method::Get,
            session_id: self.snap.and_then(|s| s.id()),
            protocol_version: self.snap.and_then(|s| s.version_header()),
            last_event_id: self.last_event_id,
            extra_headers: cfg.headers,
            content_length: (self.method == Method::Post).then_some(count.count),
        };
        write_request_head(&head, out).map_err(Failure::Request)?;
        self.body
            .write(out)
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))
    }
}

/// The buffers a round trip moves bytes through (borrowed apart from the output buffers,
/// which the handler writes into at the same time).
struct Wire<'x, B: Buf> {
    request: &'x mut B,
    head: &'x mut [u8],
    read: &'x mut [u8],
    reply: &'x mut B,
}

/// The buffers a tool call's result is written into.
struct Out<'x, B: Buf> {
    text: &'x mut B,
    error: &'x mut B,
    raw: &'x mut B,
}

impl<B: Buf> CallBuffers<'_, B> {
    fn split(&mut self) -> (Wire<'_, B>, Out<'_, B>) {
        (
            Wire {
                request: &mut self.request,
                head: &mut *self.head,
                read: &mut *self.read,
                reply: &mut self.reply,
            },
            Out {
                text: &mut self.text,
                error: &mut self.error,
                raw: &mut self.raw,
            },
        )
    }
}

/// A re-sent request's id: its first id with this bit flipped, so it differs from every id
/// the slot hands out (they count up from 1) and stays below 2^53 (JavaScript servers read ids
/// as doubles).
const RESENT_ID_BIT: u64 = 1 << 52;

/// Writes `trip`'s request and runs the round trip. A pooled connection that the server had
/// let go is retried once on a fresh one, with a new id: when writing failed, or when it
/// closed before any reply byte and the request is safe to repeat. A `tools/call` that was
/// written is never sent again ([`Failure::MayHaveRun`]).
async fn send<N: Net, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    trip: &mut Trip<'_>,
    wire: &mut Wire<'_, B>,
    deadline: &mut Deadline,
    handler: &mut (dyn OnMessage + Send),
) -> Result<RoundTrip, Failure> {
    let mut fresh = false;
    loop {
        trip.write(wire.request, cfg)?;
        let (conn, reused) = open(net, trip.ep, fresh, deadline.at).await?;
        let retry_fresh = reused && !fresh;
        match exchange(net, cfg, trip, wire, conn, retry_fresh, deadline, handler).await? {
            Some(rt) => return Ok(rt),
            None => {
                fresh = true;
                if let Some(id) = trip.body.renumber() {
                    handler.renumber(id);
                }
            }
        }
    }
}

/// What one round trip came to, beyond what its handler saw.
struct RoundTrip {
    /// The response is in (or the notification was accepted).
    done: bool,
    /// The `mcp-session-id` of the reply head.
    session_id: Option<String<MAX_SESSION_ID>>,
    /// Where an SSE reply that ended without its response can be resumed.
    resume: Option<(String<MAX_EVENT_ID>, Option<u32>)>,
}

impl RoundTrip {
    /// Where to resume a reply stream that ended without its response (none once done).
    fn resumable(self) -> Option<(String<MAX_EVENT_ID>, Option<u32>)> {
        if self.done { None } else { self.resume }
    }
}

/// Opens (or takes from the pool) a connection to `ep` before `at`.
async fn open<N: Net>(
    net: &N,
    ep: &Endpoint<'_>,
    fresh: bool,
    at: Millis,
) -> Result<(N::Conn, bool), Failure> {
    let connect = pin!(net.connect(ep, fresh));
    before(net, at, connect).await?.map_err(Failure::Connect)
}

/// Reads once from `conn`, before the deadline and before the reply has been idle for the
/// idle time (which is then [`Failure::Stalled`]).
async fn read_some<N: Net>(
    net: &N,
    conn: &mut N::Conn,
    buf: &mut [u8],
    deadline: &Deadline,
    idle: Option<(Millis, u64)>,
) -> Result<Result<usize, <N::Conn as embedded_io_async::ErrorType>::Error>, Failure> {
    let stall_at = idle.map(|(last, ms)| last.saturating_add(ms));
    let at = stall_at.map_or(deadline.at, |s| s.min(deadline.at));
    let r = pin!(conn.read(buf));
    match before(net, at, r).await {
        Err(Failure::TimedOut) if at < deadline.at => Err(Failure::Stalled {
            idle_ms: idle.map_or(0, |(_, ms)| ms),
        }),
        other => other,
    }
}

/// Writes the request on `conn` and reads the reply. `Ok(None)`: the connection failed before
/// any reply byte and `retry_fresh` allows one more try on a fresh connection (a written
/// `tools/call` never: that is [`Failure::MayHaveRun`]).
#[allow(clippy::too_many_arguments)]
async fn exchange<N: Net, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    trip: &Trip<'_>,
    wire: &mut Wire<'_, B>,
    mut conn: N::Conn,
    retry_fresh: bool,
    deadline: &mut Deadline,
    handler: &mut (dyn OnMessage + Send),
) -> Result<Option<RoundTrip>, Failure> {
    let ep = trip.ep;
    let sent_session_id = trip.snap.is_some_and(|s| s.session_id.is_some());
    let Wire {
        request,
        head,
        read,
        reply,
    } = wire;
    reply.clear();
    let mut exchange = Exchange::new(head, trip.expect, sent_session_id, cfg.limits);
    let sent = {
        let send = pin!(async {
            conn.write_all(request.bytes()).await?;
            conn.flush().await
        });
        before(net, deadline.at, send).await?
    };
    if sent.is_err() {
        if retry_fresh {
            return Ok(None);
        }
        return Err(Failure::SendFailed);
    }
    // The connection ended before any reply byte: once more on a fresh connection when the
    // request may be repeated; a written tools/call may have run, so never.
    let repeatable = trip.body.safe_to_repeat();
    let ended_early = |exchange: &Exchange<'_>| -> Option<Result<Option<RoundTrip>, Failure>> {
        if exchange.received_any() {
            None
        } else if !repeatable {
            Some(Err(Failure::MayHaveRun))
        } else if retry_fresh {
            Some(Ok(None))
        } else {
            None
        }
    };
    let idle_ms = cfg.idle_timeout_ms;
    let mut last_byte = net.now();
    let mut progress_seen = handler.progress_seen();
    let step = loop {
        let idle = idle_ms.map(|ms| (last_byte, ms));
        let got = read_some(net, &mut conn, read, deadline, idle).await?;
        let n = match got {
            Ok(n) => n,
            Err(_) => {
                if let Some(r) = ended_early(&exchange) {
                    return r;
                }
                return Err(Failure::ReadFailed);
            }
        };
        if n == 0 {
            if let Some(r) = ended_early(&exchange) {
                return r;
            }
            break exchange.finish(reply, handler)?;
        }
        last_byte = net.now();
        let (_, step) = exchange.feed(read.get(..n).unwrap_or(&[]), reply, handler)?;
        if handler.progress_seen() != progress_seen {
            progress_seen = handler.progress_seen();
            deadline.extend(net.now());
        }
        if step != Step::NeedMore {
            break step;
        }
    };
    if step == Step::Done && exchange.awaits_end() {
        // Read the rest of the framing for a moment, so the connection can be reused.
        let until = net.now().saturating_add(TAIL_MS).min(deadline.at);
        let mut tail = 0usize;
        while exchange.awaits_end() && tail < MAX_TAIL_BYTES {
            let got = {
                let r = pin!(conn.read(read));
                before(net, until, r).await
            };
            match got {
                Ok(Ok(n)) if n > 0 => {
                    tail += n;
                    exchange.drain_tail(read.get(..n).unwrap_or(&[]));
                }
                _ => break,
            }
        }
    }
    let session_id = exchange.head().and_then(|h| h.session_id.clone());
    let resume = exchange
        .resume_from()
        .map(|r| (truncated::<MAX_EVENT_ID>(r.last_event_id), r.retry_ms));
    let reusable = exchange.reusable();
    drop(exchange);
    if reusable {
        net.recycle(ep, conn);
    }
    Ok(Some(RoundTrip {
        done: step == Step::Done,
        session_id,
        resume,
    }))
}

/// Accepts any 2xx (a notification's reply).
struct Accept;
impl OnMessage for Accept {
    fn on_message(&mut self, _msg: &[u8], _last: bool) -> Result<Verdict, Failure> {
        Ok(Verdict::Done)
    }
}

/// Parses one message and looks for the response to `id`; `last_chance` also takes a
/// response whose id is `null`.
fn find<'m>(msg: &'m [u8], id: u64, last_chance: bool) -> Result<Lookup<'m>, Failure> {
    let value = Value::parse(msg, JsonLimits::default())?;
    match jsonrpc::find_response(value, id)? {
        Found::Match(outcome) => Ok(Lookup::Ours(outcome)),
        Found::NoMatch => match jsonrpc::decode_message(value) {
            // The seed's "last data line": a response that names no request (`id: null`) is
            // taken as ours when nothing matched. One that names another request never is.
            Ok(Message::Response {
                id: jsonrpc::Id::Null,
                outcome,
            }) if last_chance => Ok(Lookup::Ours(outcome)),
            Ok(Message::Response { .. }) => Ok(Lookup::OtherResponse),
            Ok(m) => Ok(Lookup::Other(m)),
            // A batch (or anything else) without our response.
            Err(_) => Ok(Lookup::OtherResponse),
        },
    }
}

enum Lookup<'m> {
    Ours(Outcome<'m>),
    OtherResponse,
    Other(Message<'m>),
}

/// Handles the reply to `initialize`.
struct InitHandler {
    id: u64,
    version: Option<Result<ProtocolVersion, Failure>>,
}
impl OnMessage for InitHandler {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        match find(msg, self.id, last_chance)? {
            Lookup::Ours(Outcome::Result(result)) => {
                let parsed = jsonrpc::parse_initialize_result(result)
                    .map_err(|_| Failure::Handshake(HandshakeError::BadResult))
                    .and_then(|init| {
                        let raw = init.protocol_version.raw();
                        ProtocolVersion::parse(raw).ok_or_else(|| {
                            let shown = core::str::from_utf8(raw).unwrap_or("?");
                            Failure::Handshake(HandshakeError::UnsupportedVersion(truncated(shown)))
                        })
                    });
                self.version = Some(parsed);
                Ok(Verdict::Done)
            }
            Lookup::Ours(Outcome::Error(err)) => {
                self.version = Some(Err(Failure::Handshake(HandshakeError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                })));
                Ok(Verdict::Done)
            }
            Lookup::OtherResponse => Ok(Verdict::Hold),
            Lookup::Other(_) => Ok(Verdict::Continue),
        }
    }
}

/// A server's message, unescaped, cut to [`DETAIL_BYTES`] with a marked cut.
fn unescaped_detail<const N: usize>(message: &crate::wire::json::JsonStr<'_>) -> String<N> {
    let mut out = StrSink::<N>::default();
    match message.unescape_into(&mut out) {
        Ok(()) => truncated(out.as_str()),
        // Cut: make room for the mark.
        Err(_) => {
            let mut s: String<N> = truncated(out.as_str());
            while s.len() + '…'.len_utf8() > N {
                if s.pop().is_none() {
                    break;
                }
            }
            let _ = s.push('…');
            s
        }
    }
}

/// Makes sure the session of `target` is ready, starting or joining the handshake.
async fn ready<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    target: Target,
    deadline: &mut Deadline,
    bufs: &mut CallBuffers<'_, B>,
) -> Result<Snapshot, Failure> {
    loop {
        let generation = state.generation();
        // `begin` (which may hold a snapshot) ends in this block: it is not kept across the
        // awaits below.
        let (start, attempt) = {
            let begin = state.with(|s| s.session_mut(target).map(|sess| sess.begin()));
            match begin {
                None => return Err(Failure::NoResponse),
                Some(Begin::Ready(snap)) => return Ok(snap),
                Some(Begin::Start { attempt }) => (true, attempt),
                Some(Begin::Wait { attempt }) => (false, attempt),
            }
        };
        match start {
            true => {
                let outcome = handshake(net, cfg, state, target, deadline, bufs).await;
                state.with(|s| {
                    if let Some(sess) = s.session_mut(target) {
                        match &outcome {
                            Ok(snap) => sess.handshake_succeeded(attempt, snap.id(), snap.version),
                            Err(f) => sess.handshake_failed(attempt, f.clone()),
                        }
                    }
                });
                state.notify();
                return outcome;
            }
            false => {
                if let Some(result) =
                    state.with(|s| s.session(target).and_then(|x| x.outcome_of(attempt)))
                {
                    return result;
                }
                let still = state.with(|s| {
                    s.session(target).map(|x| x.phase().clone())
                        == Some(Phase::Initializing { attempt })
                });
                if still {
                    let changed = pin!(state.changed(generation));
                    before(net, deadline.at, changed).await?;
                }
            }
        }
    }
}

/// `initialize`, then `notifications/initialized`.
async fn handshake<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    target: Target,
    deadline: &mut Deadline,
    bufs: &mut CallBuffers<'_, B>,
) -> Result<Snapshot, Failure> {
    let ep = cfg.endpoint(target).ok_or(Failure::NoResponse)?;
    let id = state.with(|s| s.next_id());
    let (mut wire, _) = bufs.split();
    // The initialize request and its handler end in this block (not kept across the
    // notification's await); only the session id and the version are.
    let (session_id, version) = {
        let mut init = Trip::post(
            ep,
            None,
            Body::Initialize {
                id,
                version: cfg.version,
            },
        );
        let mut handler = InitHandler { id, version: None };
        let RoundTrip { session_id, .. } =
            send(net, cfg, &mut init, &mut wire, deadline, &mut handler).await?;
        (session_id, handler.version.ok_or(Failure::NoResponse)??)
    };
    let snap = Snapshot {
        session_id,
        version,
    };
    let mut initialized = Trip::post(ep, Some(&snap), Body::Initialized);
    send(net, cfg, &mut initialized, &mut wire, deadline, &mut Accept).await?;
    Ok(snap)
}

/// What one server's attempt at a tool call came to.
enum Answer {
    Result { is_error: bool },
    Refused { code: i64, unknown_tool: bool },
}

/// Why a tool call's result could not be taken. Small on purpose: the handler holding it
/// lives in the call future across every read (a whole [`Failure`] would be larger).
#[derive(Debug, Clone, Copy)]
enum Untaken {
    /// The flattened text did not fit the text buffer.
    TextTooLarge(crate::buf::Overflow),
    /// The result is not a tool result object.
    NotAnObject,
}

impl From<Untaken> for Failure {
    fn from(u: Untaken) -> Self {
        match u {
            Untaken::TextTooLarge(o) => Failure::TooLarge(BufferName::Text, o),
            Untaken::NotAnObject => Failure::Rpc(jsonrpc::RpcDecodeError::NotAnObject),
        }
    }
}

/// Handles the reply to `tools/call`: flattens and redacts the text, or formats the refusal.
struct CallHandler<'x, B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    secrets: &'x [Sec],
    text: &'x mut B,
    error: &'x mut B,
    raw: Option<&'x mut B>,
    answer: Option<Result<Answer, Untaken>>,
    progress: u32,
    on_progress: Option<ProgressObserver<'x>>,
}

impl<B: Buf, Sec: AsRef<[u8]>> OnMessage for CallHandler<'_, B, Sec> {
    fn progress_seen(&self) -> u32 {
        self.progress
    }

    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(outcome) => outcome,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(m) => {
                if let Some(p) =
                    jsonrpc::as_progress(&m).filter(|p| p.token.as_u64() == Some(self.id))
                {
                    self.progress = self.progress.wrapping_add(1);
                    if let Some(observer) = self.on_progress {
                        tell_progress(observer, &p, self.secrets);
                    }
                }
                return Ok(Verdict::Continue);
            }
        };
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.clear();
            redact_into(self.secrets, msg, raw)
                .map_err(|o| Failure::TooLarge(BufferName::Raw, o))?;
        }
        self.answer = Some(match outcome {
            Outcome::Result(result) => {
                self.text.clear();
                let mut redactor = Redactor::new(self.secrets);
                let mut sink = redactor.sink(&mut *self.text);
                let flat = content::flatten(result, &mut sink).map_err(|e| match e {
                    content::ContentError::Overflow(o) => Untaken::TextTooLarge(o),
                    _ => Untaken::NotAnObject,
                });
                flat.and_then(|f| {
                    sink.finish()
                        .map_err(Untaken::TextTooLarge)
                        .map(|_| Answer::Result {
                            is_error: f.is_error,
                        })
                })
            }
            Outcome::Error(err) => {
                self.error.clear();
                let mut line = StrSink::<ERROR_LINE_BYTES>::default();
                // A message longer than the line is cut, and the cut marked; the code fits.
                if crate::harness::result::write_rpc_error(&mut line, err.code, &err.message)
                    .is_err()
                {
                    mark_cut(&mut line);
                }
                let _ = redact_into(self.secrets, line.as_str().as_bytes(), self.error);
                Ok(Answer::Refused {
                    code: err.code,
                    unknown_tool: jsonrpc::is_unknown_tool(&err),
                })
            }
        });
        Ok(Verdict::Done)
    }
}

/// Ends a cut line with `…` (dropping what it takes to make room).
fn mark_cut<const N: usize>(line: &mut StrSink<N>) {
    let kept: String<N> = truncated(line.as_str());
    let mut s = kept;
    while s.len() + '…'.len_utf8() > N {
        if s.pop().is_none() {
            break;
        }
    }
    let _ = s.push('…');
    *line = StrSink::default();
    let _ = line.put(s.as_bytes());
}

/// Hands one progress notification to the observer: numbers as written, the message
/// unescaped and redacted (cut to fit).
fn tell_progress<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    p: &jsonrpc::Progress<'_>,
    secrets: &[Sec],
) {
    fn number<'v>(v: &Value<'v>) -> &'v str {
        core::str::from_utf8(v.raw()).unwrap_or("")
    }
    let mut message = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    let mut clean = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    if let Some(m) = &p.message {
        // A longer message is cut; what fits is still redacted whole.
        let _ = m.unescape_into(&mut message);
        let _ = redact_into(secrets, message.as_str().as_bytes(), &mut clean);
    }
    (observer.0)(&ProgressUpdate {
        progress: number(&p.progress),
        total: p.total.as_ref().map(number),
        message: p.message.is_some().then(|| clean.as_str()),
    });
}

/// Redacts `text` whole into `out`.
fn redact_into<Sec: AsRef<[u8]>>(
    secrets: &[Sec],
    text: &[u8],
    out: &mut impl Sink,
) -> Result<(), crate::buf::Overflow> {
    let mut r = Redactor::new(secrets);
    r.write(text, out)?;
    r.finish(out)
}

/// `core::fmt::Write` over a `Sink` (for the error messages).
struct FmtSink<'s, S: Sink>(&'s mut S);
impl<S: Sink> core::fmt::Write for FmtSink<'_, S> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.put(s.as_bytes()).map_err(|_| core::fmt::Error)
    }
}

/// Writes a failure's message, redacted, into `out` (a cut ends in `…`).
fn write_failure<Sec: AsRef<[u8]>, B: Buf>(secrets: &[Sec], failure: &Failure, out: &mut B) {
    write_line(secrets, format_args!("{failure}"), out);
}

/// Writes one error line, redacted, into `out`; a line longer than `out` (or than
/// [`ERROR_LINE_BYTES`]) is cut at a character boundary and ends in `…`.
fn write_line<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    args: core::fmt::Arguments<'_>,
    out: &mut B,
) {
    out.clear();
    let mut line = StrSink::<ERROR_LINE_BYTES>::default();
    if FmtSink(&mut line).write_fmt(args).is_err() {
        mark_cut(&mut line);
    }
    if redact_into(secrets, line.as_str().as_bytes(), out).is_ok() {
        return;
    }
    out.clear();
    let mark = "…";
    let s = line.as_str();
    let mut end = out.limit().saturating_sub(mark.len()).min(s.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    // Redact what fits; a secret cut in half by the end is gone with the cut.
    let _ = redact_into(secrets, s.get(..end).unwrap_or("").as_bytes(), out);
    let _ = out.put(mark.as_bytes());
}

/// One server's attempt at a tool call: ready the session, send, retry once after a 404, and
/// once after a 429/503 whose `retry-after` fits the deadline and the slot's retry budget.
#[allow(clippy::too_many_arguments)]
async fn attempt_call<N: Net, S: Shared<SlotState>, B: Buf + Send, Sec: AsRef<[u8]> + Sync>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    target: Target,
    tool: &str,
    args: Option<Value<'_>>,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
) -> Result<Answer, Failure> {
    let ep = cfg.endpoint(target).ok_or(Failure::NoResponse)?;
    let mut deadline = Deadline::new(net.now(), cfg);
    let mut retried_404 = false;
    let mut retried_later = false;
    loop {
        // The handshake and the call are separate futures awaited in turn (they share bytes).
        let snap = ready(net, cfg, state, target, &mut deadline, bufs).await?;
        let call = CallIn {
            ep,
            target,
            snap: &snap,
            tool,
            args,
        };
        let answer = call_in_session(net, cfg, state, &call, secrets, &mut deadline, bufs).await;
        // Decided here, so no failure is held across the wait below.
        let wake = match answer {
            Err(Failure::SessionExpired) if !retried_404 => {
                retried_404 = true;
                forget_session(state, target, &snap);
                continue;
            }
            Err(Failure::Status {
                code: code @ (429 | 503),
                retry_after: Some(retry_after),
                ..
            }) => {
                let wake = retry_after
                    .delay_ms()
                    .map(|d| net.now().saturating_add(d))
                    .filter(|&wake| wake < deadline.at);
                match wake {
                    Some(w) if !retried_later && state.with(SlotState::take_retry) => w,
                    _ => return Err(Failure::RetryTooLate { code, retry_after }),
                }
            }
            other => return other,
        };
        retried_later = true;
        net.sleep_until(wake).await;
    }
}

/// A tool call in one ready session.
struct CallIn<'x> {
    ep: &'x Endpoint<'x>,
    target: Target,
    snap: &'x Snapshot,
    tool: &'x str,
    args: Option<Value<'x>>,
}

/// Why a call was cancelled, as `notifications/cancelled` says it.
const CANCEL_TIMED_OUT: &str = "tool call timed out";
/// The reason sent when the caller dropped the call.
pub const CANCEL_DROPPED: &str = "the caller cancelled the call";

/// Sends the tool call in its session, resumes a reply stream that ended early, and cancels
/// on timeout.
async fn call_in_session<N: Net, S: Shared<SlotState>, B: Buf + Send, Sec: AsRef<[u8]> + Sync>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    call: &CallIn<'_>,
    secrets: &[Sec],
    deadline: &mut Deadline,
    bufs: &mut CallBuffers<'_, B>,
) -> Result<Answer, Failure> {
    let CallIn {
        ep,
        target,
        snap,
        tool,
        args,
    } = *call;
    let id = state.with(|s| s.next_id());
    let progress =
        (cfg.progress_extends_to_ms.is_some() || cfg.on_progress.is_some()).then_some(id);
    let (mut wire, out) = bufs.split();
    let mut handler = CallHandler {
        id,
        secrets,
        text: out.text,
        error: out.error,
        raw: cfg.keep_raw.then_some(out.raw),
        answer: None,
        progress: 0,
        on_progress: cfg.on_progress,
    };
    let body = Body::ToolsCall {
        id,
        tool,
        args,
        progress,
    };
    if let Some(w) = cfg.in_flight {
        w.set(target, id);
    }
    // Only where the reply can be resumed outlives the round trip (not its session id, nor
    // the request): this future stays small.
    let mut rt = {
        let mut call = Trip::post(ep, Some(snap), body);
        send(net, cfg, &mut call, &mut wire, deadline, &mut handler)
            .await
            .map(RoundTrip::resumable)
    };
    // A reply stream that ended without the response, from a server that gave event
    // ids: resume with GET and Last-Event-ID after its retry delay (bounded).
    let mut resumes = 0;
    loop {
        let (last_id, retry) = match rt {
            Ok(Some(r)) if handler.answer.is_none() && resumes < MAX_RESUMES => r,
            other => {
                rt = other;
                break;
            }
        };
        resumes += 1;
        let wake = net.now().saturating_add(u64::from(retry.unwrap_or(0)));
        if wake >= deadline.at {
            rt = Err(Failure::TimedOut);
            break;
        }
        net.sleep_until(wake).await;
        let mut resume = Trip {
            method: Method::Get,
            last_event_id: Some(last_id.as_str()),
            body: Body::None,
            ..Trip::post(ep, Some(snap), Body::None)
        };
        rt = send(net, cfg, &mut resume, &mut wire, deadline, &mut handler)
            .await
            .map(RoundTrip::resumable);
    }
    let answer = handler.answer.take();
    if let Some(w) = cfg.in_flight {
        w.clear();
    }
    match rt {
        Err(f @ (Failure::TimedOut | Failure::Stalled { .. })) => {
            let mut cancel = Trip::post(
                ep,
                Some(snap),
                Body::Cancelled {
                    id,
                    reason: CANCEL_TIMED_OUT,
                },
            );
            courtesy(net, cfg, &mut cancel, &mut wire).await;
            Err(f)
        }
        Err(f) => Err(f),
        Ok(_) => match answer {
            Some(a) => a.map_err(Failure::from),
            None => Err(Failure::NoResponse),
        },
    }
}

/// The server answered 404 to a request in `snap`'s session: forget that session so the
/// retry re-initializes without it.
fn forget_session<S: Shared<SlotState>>(state: &S, target: Target, snap: &Snapshot) {
    if let Some(old) = snap.id() {
        state.with(|s| s.session_mut(target).map(|x| x.session_gone(old)));
    }
}

/// A best-effort request on its own short deadline (`notifications/cancelled`, `DELETE`):
/// its outcome changes nothing.
async fn courtesy<N: Net, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    trip: &mut Trip<'_>,
    wire: &mut Wire<'_, B>,
) {
    let at = net.now().saturating_add(COURTESY_MS);
    let mut deadline = Deadline {
        at,
        hard: at,
        step: COURTESY_MS,
    };
    let _ = send(net, cfg, trip, wire, &mut deadline, &mut Accept).await;
}

/// Tells `target`'s server, best effort, that the caller dropped the `tools/call` with `id`
/// (from [`InFlight::get`]): `notifications/cancelled` in its session. Nothing is sent to a
/// server the slot knows is dead, nor outside a session.
pub async fn cancel_dropped<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    (target, id): (Target, u64),
    bufs: &mut CallBuffers<'_, B>,
) {
    let Some(ep) = cfg.endpoint(target) else {
        return;
    };
    let snap = state.with(|s| {
        if s.failover.is_dead(target) {
            return None;
        }
        s.session(target).and_then(|x| x.snapshot().cloned())
    });
    let Some(snap) = snap else { return };
    let mut cancel = Trip::post(
        ep,
        Some(&snap),
        Body::Cancelled {
            id,
            reason: CANCEL_DROPPED,
        },
    );
    let (mut wire, _) = bufs.split();
    courtesy(net, cfg, &mut cancel, &mut wire).await;
}

fn as_text<B: Buf>(b: &B) -> &str {
    match core::str::from_utf8(b.bytes()) {
        Ok(s) => s,
        Err(e) => {
            core::str::from_utf8(b.bytes().get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or("")
        }
    }
}

/// Meters a call that is under way: if its future is dropped before the call ends, the
/// attempt is still on the ledger (`tool_calls: 1`, no evidence bytes) and on the timeline
/// (`tool_error`, "cancelled").
struct Metered<'m, L: Ledger, T: Timeline> {
    ledger: &'m mut L,
    timeline: &'m mut T,
    slot: &'m str,
    tool: &'m str,
    attempt_open: bool,
}

impl<L: Ledger, T: Timeline> Drop for Metered<'_, L, T> {
    fn drop(&mut self) {
        if self.attempt_open {
            self.ledger.record(LedgerRecord::transport_failure());
            let mut line = StrSink::<64>::default();
            let _ = write!(FmtSink(&mut line), "{}", Failure::Cancelled);
            self.timeline.emit(&TimelineEvent::ToolError {
                slot: self.slot,
                tool: self.tool,
                error: line.as_str(),
            });
        }
    }
}

/// A call that failed before anything was sent (bad endpoint, arguments, a request over its
/// cap): metered like any call (`tool_calls: 1`, no evidence bytes) and a `tool_error` on the
/// timeline, but it says nothing about the servers, so no failover and no
/// `mcp.no_healthy_tool`. Both adapters use it, also when they fail before the driver runs.
pub fn local_failure<'e, L: Ledger, T: Timeline>(
    slot: &str,
    tool: &str,
    error: &'e str,
    ledger: &mut L,
    timeline: &mut T,
) -> ToolResult<'e> {
    ledger.record(LedgerRecord::transport_failure());
    let out = ToolResult::unreachable(error, crate::wire::failure::Cause::Local, 0);
    if let Some(event) = out.timeline_event(slot, tool) {
        timeline.emit(&event);
    }
    out
}

/// One tool call through the slot: handshake if needed, failover, redaction, metering and
/// events. Never fails: every failure is an `ok: false` result borrowing `bufs`.
///
/// `secrets` is the run's redaction set (include the slot's header values). Each server
/// attempt gets the full `timeout_ms`; every attempt is metered, also one whose future is
/// dropped (then as a transport failure, with a `tool_error` event); a failure before
/// anything was sent is a [`local_failure`].
#[allow(clippy::too_many_arguments)]
pub async fn call<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    tool: &str,
    args: Option<Value<'_>>,
    secrets: &[Sec],
    ledger: &mut L,
    timeline: &mut T,
    bufs: &'b mut CallBuffers<'_, B>,
) -> ToolResult<'b>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    L: Ledger,
    T: Timeline,
{
    let start = net.now();
    let mut meter = Metered {
        ledger,
        timeline,
        slot: cfg.slot,
        tool,
        attempt_open: false,
    };
    let mut target = state.with(|s| {
        s.calls = s.calls.saturating_add(1);
        s.failover.first_target()
    });
    let result = loop {
        bufs.text.clear();
        bufs.error.clear();
        bufs.raw.clear();
        meter.attempt_open = true;
        let result = match args {
            Some(a) if a.kind() != crate::wire::json::Kind::Object => Err(Failure::BadArguments),
            _ => attempt_call(net, cfg, state, target, tool, args, secrets, bufs).await,
        };
        meter.attempt_open = false;
        if let Err(f) = &result
            && f.is_local()
        {
            break result;
        }
        let outcome = match &result {
            Ok(Answer::Result { is_error: false }) => AttemptOutcome::Answered,
            Ok(Answer::Result { is_error: true }) => AttemptOutcome::ToolError,
            Ok(Answer::Refused { unknown_tool, .. }) => AttemptOutcome::Refused {
                unknown_tool: *unknown_tool,
            },
            Err(_) => AttemptOutcome::Unreachable,
        };
        // Every attempt but the last is metered here; the last with the result below.
        let decision = state.with(|s| s.failover.after_attempt(target, outcome, tool));
        if decision.next.is_some() {
            meter.ledger.record(match &result {
                Ok(_) => LedgerRecord::answered(bufs.text.len() as u64),
                Err(_) => LedgerRecord::transport_failure(),
            });
        }
        if decision.fallback_used {
            meter.timeline.emit(&TimelineEvent::FallbackUsed {
                slot: cfg.slot,
                tool,
                primary: cfg.primary_label,
                fallback: cfg.fallback_label,
            });
        }
        if decision.no_healthy_tool {
            meter.timeline.emit(&TimelineEvent::NoHealthyTool {
                slot: cfg.slot,
                tool,
            });
        }
        match decision.next {
            Some(next) => target = next,
            None => break result,
        }
    };
    let latency = net.now().saturating_sub(start);
    match &result {
        Err(f) => write_failure(secrets, f, &mut bufs.error),
        Ok(Answer::Result { is_error: true }) => {
            bufs.error.clear();
            if write_tool_error(as_text(&bufs.text), &mut bufs.error).is_err() {
                bufs.error.clear();
            }
        }
        Ok(_) => {}
    }
    let keep_raw = cfg.keep_raw;
    let bufs: &'b CallBuffers<'_, B> = bufs;
    let raw = (keep_raw && !bufs.raw.is_empty()).then(|| bufs.raw.bytes());
    let out = match result {
        Ok(Answer::Result { is_error: false }) => {
            ToolResult::answered(as_text(&bufs.text), latency, raw)
        }
        Ok(Answer::Result { is_error: true }) => {
            ToolResult::tool_error(as_text(&bufs.text), as_text(&bufs.error), latency, raw)
        }
        Ok(Answer::Refused { code, unknown_tool }) => {
            ToolResult::refused(as_text(&bufs.error), code, unknown_tool, latency, raw)
        }
        Err(f) => ToolResult::unreachable(as_text(&bufs.error), f.cause(), latency),
    };
    meter.ledger.record(out.ledger_record());
    if let Some(event) = out.timeline_event(cfg.slot, tool) {
        meter.timeline.emit(&event);
    }
    out
}

/// Handles one tools/list page: names to the callback, the next cursor kept.
struct ListHandler<'x, F: FnMut(&str, &[u8]), B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    on_tool: &'x mut F,
    /// Scratch for each tool's redacted JSON.
    text: &'x mut B,
    secrets: &'x [Sec],
    cursor: &'x mut String<MAX_CURSOR>,
    has_next: bool,
    answer: Option<Result<(), ListError>>,
}
impl<F: FnMut(&str, &[u8]), B: Buf, Sec: AsRef<[u8]>> OnMessage for ListHandler<'_, F, B, Sec> {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(o) => o,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) => return Ok(Verdict::Continue),
        };
        match outcome {
            Outcome::Result(result) => {
                let page = jsonrpc::parse_tools_page(result)?;
                for tool in page.tools {
                    let Some(name) = jsonrpc::tool_name(tool) else {
                        continue;
                    };
                    // The description and schema are returned too, so they are redacted.
                    self.text.clear();
                    redact_into(self.secrets, tool.raw(), &mut *self.text)
                        .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
                    match name.as_plain() {
                        Some(s) => (self.on_tool)(s, self.text.bytes()),
                        None => {
                            let mut s = StrSink::<512>::default();
                            let _ = name.unescape_into(&mut s);
                            (self.on_tool)(s.as_str(), self.text.bytes());
                        }
                    }
                }
                self.cursor.clear();
                self.has_next = false;
                if let Some(next) = page.next_cursor {
                    let mut s = StrSink::<MAX_CURSOR>::default();
                    next.unescape_into(&mut s)
                        .map_err(|o| Failure::TooLarge(BufferName::Cursor, o))?;
                    // Fits: both are MAX_CURSOR bytes.
                    let _ = self.cursor.push_str(s.as_str());
                    self.has_next = true;
                }
                self.answer = Some(Ok(()));
            }
            Outcome::Error(err) => {
                self.answer = Some(Err(ListError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                }));
            }
        }
        Ok(Verdict::Done)
    }
}

/// tools/list on one server, following `nextCursor` pages.
async fn attempt_list<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    target: Target,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
    on_tool: &mut F,
) -> Result<(), ListError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    F: FnMut(&str, &[u8]) + Send,
{
    let ep = cfg
        .endpoint(target)
        .ok_or(ListError::Unreachable(Failure::NoResponse))?;
    let mut deadline = Deadline::new(net.now(), cfg);
    let mut cursor: String<MAX_CURSOR> = String::new();
    let mut previous: String<MAX_CURSOR> = String::new();
    let mut retried_404 = false;
    let mut pages = 0u32;
    loop {
        let snap = ready(net, cfg, state, target, &mut deadline, bufs)
            .await
            .map_err(ListError::Unreachable)?;
        let id = state.with(|s| s.next_id());
        let body = Body::ToolsList {
            id,
            cursor: (pages > 0).then_some(cursor.as_str()),
        };
        let mut next: String<MAX_CURSOR> = String::new();
        let (mut wire, out) = bufs.split();
        let mut handler = ListHandler {
            id,
            on_tool: &mut *on_tool,
            text: out.text,
            secrets,
            cursor: &mut next,
            has_next: false,
            answer: None,
        };
        let mut list = Trip::post(ep, Some(&snap), body);
        let rt = send(net, cfg, &mut list, &mut wire, &mut deadline, &mut handler).await;
        let has_next = handler.has_next;
        let answer = handler.answer.take();
        match rt {
            Err(Failure::SessionExpired) if !retried_404 => {
                retried_404 = true;
                forget_session(state, target, &snap);
                continue;
            }
            Err(f) => return Err(ListError::Unreachable(f)),
            Ok(_) => match answer {
                Some(Ok(())) if has_next => {
                    pages += 1;
                    if pages >= MAX_PAGES || (next == cursor && pages > 1) || next == previous {
                        return Err(ListError::Unreachable(Failure::EndlessPaging));
                    }
                    previous = core::mem::replace(&mut cursor, next);
                }
                Some(result) => return result,
                None => return Err(ListError::Unreachable(Failure::NoResponse)),
            },
        }
    }
}

/// tools/list across pages, each name to `on_tool`. A primary failure is retried on the
/// fallback; a fallback failure is returned (the seed's `FailoverSlot.listTools`). Listing is
/// not a tool call: it is not metered and emits no timeline event.
pub async fn list_tools<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
    mut on_tool: F,
) -> Result<(), ListError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    F: FnMut(&str) + Send,
{
    list_tools_described(net, cfg, state, secrets, bufs, |name, _| on_tool(name)).await
}

/// [`list_tools`], also handing over each tool's whole description (its JSON text as the
/// server sent it, `description` and `inputSchema` included), redacted, via `bufs.text`.
pub async fn list_tools_described<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
    mut on_tool: F,
) -> Result<(), ListError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    F: FnMut(&str, &[u8]) + Send,
{
    let mut target = state.with(|s| s.failover.first_target());
    loop {
        let result = attempt_list(net, cfg, state, target, secrets, bufs, &mut on_tool).await;
        let outcome = match &result {
            Ok(()) => AttemptOutcome::Answered,
            Err(ListError::Refused { .. }) => AttemptOutcome::Refused {
                unknown_tool: false,
            },
            Err(ListError::Unreachable(_)) => AttemptOutcome::Unreachable,
        };
        match state.with(|s| s.failover.after_list_attempt(target, outcome)) {
            Some(next) => target = next,
            None => return result.map_err(|e| redact_list_error(secrets, e)),
        }
    }
}

fn redact_list_error<Sec: AsRef<[u8]>>(secrets: &[Sec], e: ListError) -> ListError {
    match e {
        ListError::Refused { code, message } => {
            let mut out = StrSink::<DETAIL_BYTES>::default();
            let _ = redact_into(secrets, message.as_bytes(), &mut out);
            ListError::Refused {
                code,
                message: truncated(out.as_str()),
            }
        }
        other => other,
    }
}

/// Ends each open session with HTTP DELETE (best effort; 405 is fine) and forgets it.
/// Nothing goes to a server the slot knows is dead: its session is only forgotten.
pub async fn close<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    bufs: &mut CallBuffers<'_, B>,
) {
    for target in [Target::Primary, Target::Fallback] {
        let Some(ep) = cfg.endpoint(target) else {
            continue;
        };
        let (snap, dead) = state.with(|s| {
            let snap = s.session(target).and_then(|x| x.snapshot().cloned());
            (snap, s.failover.is_dead(target))
        });
        let Some(snap) = snap else { continue };
        state.with(|s| s.session_mut(target).map(|x| x.reset()));
        if snap.session_id.is_none() || dead {
            continue;
        }
        let mut delete = Trip {
            method: Method::Delete,
            expect: Expect::Accepted,
            ..Trip::post(ep, Some(&snap), Body::None)
        };
        let (mut wire, _) = bufs.split();
        courtesy(net, cfg, &mut delete, &mut wire).await;
    }
}
