//! The call machine: a slot's whole sequencing as sans-IO transitions.
//!
//! An [`Op`] is one operation of a slot (a tool call, a list, a request, the slot's close, a
//! courtesy cancel). It owns no connection, reads no clock and awaits nothing: its adapter
//! asks it what to do ([`Op::poll`], with the slot's [`SlotState`] and the time), does that
//! ([`Action`]: open a connection, write the request bytes, read into the op's read buffer,
//! give a connection back, sleep), and tells it what happened (`handle_*`). Everything a call
//! goes through lives here as states: the lazy handshake and its waiters, the request, the
//! stale-connection retry (never for a written `tools/call`), the stall timer and the deadline,
//! the tail read that keeps a connection reusable, the 404 re-initialization, `Retry-After`,
//! the SSE resume, paging, the cancel on timeout and failover; and the 2026-07-28 era: the
//! `server/discover` probe (judged by [`crate::wire::era::judge_probe`], once per server per
//! run, its waiters queued like a handshake's), `_meta` and `Mcp-*` headers on every request,
//! the `tools/list` that learns a tool's `x-mcp-header` parameters (and `idempotentHint`)
//! before its first call, the `-32020` re-list, a second probe when an answer says the server
//! changed era, `input_required` rounds answered by the slot's elicitation policy, and the
//! tasks extension (a call that becomes a task is polled to its end, or handed back detached
//! and followed later by an attached op).
//!
//! The slot's state is shared by every op of the slot and passed in to [`Op::poll`] only, so
//! an adapter holds its lock for one short transition, never across I/O or parsing. An op that
//! finds another op's handshake under way waits ([`Action::Sleep`] with `slot: true`); the
//! state says when a handshake ended ([`SlotState::take_changed`]) so the adapter wakes them;
//! it keeps its own change counter and the sleepers' wakers ([`SlotState::notify`],
//! [`SlotState::changed_since`]), so waiting needs no lock of the core's.
//!
//! The reply parser stays the streaming scanner of [`crate::wire`]: a reply is parsed as it
//! arrives into caller buffers with caps, never held whole.
//!
//! ```
//! # // The example speaks the 2025 era: a build without it has nothing to show.
//! # #[cfg(feature = "era-2025")] {
//! use verifi_mcp_core::buf::{Buf, SliceBuf};
//! use verifi_mcp_core::machine::{Action, CallBuffers, Op, SlotConfig, SlotState};
//! use verifi_mcp_core::wire::endpoint::Endpoint;
//! use verifi_mcp_core::wire::json::{JsonLimits, Value};
//!
//! let endpoint = Endpoint::parse_base("http://10.0.0.5:8000").unwrap();
//! let mut cfg = SlotConfig::new("kali", endpoint, "http://10.0.0.5:8000");
//! // An old-era server, spoken to without the era probe (`EraSetting::Auto` would send
//! // `server/discover` first).
//! cfg.era = verifi_mcp_core::wire::era::EraSetting::Legacy;
//! let mut slot = SlotState::new(cfg.version, false);
//! let (mut request, mut head, mut read) = ([0u8; 1024], [0u8; 1024], [0u8; 512]);
//! let (mut reply, mut text, mut error) = ([0u8; 1024], [0u8; 256], [0u8; 256]);
//! let mut bufs = CallBuffers {
//!     request: SliceBuf::new(&mut request),
//!     head: &mut head,
//!     read: &mut read,
//!     reply: SliceBuf::new(&mut reply),
//!     text: SliceBuf::new(&mut text),
//!     error: SliceBuf::new(&mut error),
//!     raw: SliceBuf::new(&mut []),
//! };
//! let secrets: [&str; 0] = [];
//! let args = Value::parse(br#"{"text":"hi"}"#, JsonLimits::default()).ok();
//! let mut op = Op::call(&cfg, &mut bufs, &secrets, "echo", args);
//!
//! // The server's replies, one per request: initialize, notifications/initialized, tools/call.
//! let mut replies = [
//!     &b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n\
//!        {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2024-11-05\"}}"[..],
//!     b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
//!     b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
//!       data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":\
//!       [{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n",
//! ]
//! .into_iter();
//! let (mut now, mut pending) = (0u64, &b""[..]);
//! loop {
//!     match op.poll(&mut slot, now) {
//!         Action::Connect { .. } => op.handle_connected(false),
//!         Action::Transmit => {
//!             // A real adapter writes `op.transmit()` on its connection.
//!             pending = replies.next().unwrap_or(b"");
//!             op.handle_sent(now, true);
//!         }
//!         Action::Receive => {
//!             let n = pending.len().min(op.read_buf().len());
//!             op.read_buf()[..n].copy_from_slice(&pending[..n]);
//!             pending = &pending[n..];
//!             op.handle_read(now, n); // 0: the server closed
//!         }
//!         Action::Sleep { .. } => now = op.timeout(),
//!         Action::Recycle | Action::Close | Action::Park | Action::Report => {}
//!         Action::Respond { .. } | Action::Listen { .. } | Action::TaskStarted => {}
//!         Action::Done => break,
//!     }
//! }
//! assert!(op.outcome().is_ok());
//! drop(op);
//! assert_eq!(bufs.text.bytes(), b"hi");
//! # }
//! ```

mod config;
mod event;
pub(crate) mod handlers;
pub mod listen;
mod metering;
mod op;
mod tools;
mod waiters;

pub use config::{
    CallBuffers, ElicitHandler, Elicitation, InFlight, LogLevel, LogMessage, LogObserver,
    MAX_INPUT_ROUNDS, MAX_LOG_MESSAGE, MAX_PROGRESS_MESSAGE, MAX_TASK_ID, ProgressObserver,
    ProgressUpdate, SlotConfig, TRACEPARENT_LEN, TraceContext,
};
pub use event::Event;
/// An elicitation's answer under a policy and a handler, for an adapter that answers a
/// server's requests itself (stdio): see [`SlotConfig::elicitation`].
pub use handlers::write_elicit_answer as answer_elicitation;
pub use handlers::{Answered, ListError, ListItem, MethodError};
pub use metering::{Metering, Settled, Tasking};
pub use op::{Action, Answer, Op, Report};
#[cfg(feature = "drive")]
pub(crate) use op::{CallOp, ListOp, OtherOp};
pub use waiters::MAX_WAITERS;
use waiters::Waiters;

use crate::harness::failover::{FailoverState, Target};
use crate::wire::jsonrpc::ProtocolVersion;
use crate::wire::session::Session;
use tools::ToolRecord;

/// Milliseconds on the adapter's monotonic clock.
pub type Millis = u64;

/// How long a best-effort `notifications/cancelled` or `DELETE` may take.
const COURTESY_MS: Millis = 1_000;
/// Most pages of a list followed.
const MAX_PAGES: u32 = 1_000;
/// Most GET resumptions of one SSE reply that ended without its response.
const MAX_RESUMES: u32 = 3;
/// How long a call waits for its session's standalone GET stream to open ([`Action::Listen`])
/// before it is sent anyway.
pub const LISTEN_MS: Millis = 1_000;
/// How long the machine keeps reading after the response for the end of its framing.
const TAIL_MS: Millis = 25;
/// Most bytes read after the response while waiting for the end of its framing.
const MAX_TAIL_BYTES: usize = 64 * 1024;
/// Longest list cursor kept between pages.
const MAX_CURSOR: usize = 1_024;
/// A suggested idle time after which a reply that sends nothing is `server stalled`, for a
/// caller that turns the idle timeout on ([`SlotConfig::idle_timeout_ms`]); it is off by
/// default: a call's deadline bounds it.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// The slot's retry budget for 429/503 answers with `retry-after`: one retry in this many
/// calls of the slot (a fifth of them) …
pub const RETRY_BUDGET_CALLS_PER_RETRY: u64 = 5;
/// … and never fewer than this many in a run, so every call of a small run can take its one
/// retry; a storm in a long run is capped.
pub const RETRY_BUDGET_FLOOR: u64 = 10;
/// Why a call was cancelled, as `notifications/cancelled` says it.
const CANCEL_TIMED_OUT: &str = "tool call timed out";
/// The reason sent when the caller dropped the call.
pub const CANCEL_DROPPED: &str = "the caller cancelled the call";

/// The state of one slot for the whole run: a session per server, failover, request ids, and
/// whether a handshake ended since the adapter last looked (its waiters are then woken).
#[derive(Debug)]
pub struct SlotState {
    primary: Session,
    fallback: Option<Session>,
    failover: FailoverState,
    next_id: u64,
    /// Calls started, and `retry-after` retries taken, in this run (the retry budget).
    calls: u64,
    retries: u64,
    /// A handshake ended (or a session was forgotten): ops waiting on the slot should look.
    changed: bool,
    /// Per server (primary, fallback): the era found (`Some(true)`: 2026-07-28), whether the
    /// verdict is news for the timeline, whether its tools were listed for their
    /// `x-mcp-header` annotations (2026 era), and those annotations.
    eras: [Option<bool>; 2],
    era_news: [bool; 2],
    listed: [bool; 2],
    /// A 2026 `tools/list` for annotations is under way until this time (its op's deadline):
    /// other calls wait for it instead of listing again. 0: none.
    listing_until: [Millis; 2],
    annotations: [heapless::Vec<u8, ANNOTATIONS>; 2],
    /// A server said `notifications/tools/list_changed` on a call's stream since the adapter
    /// last looked.
    tools_list_changed: bool,
    /// The least `ttlMs` of the pages of the last `tools/list` read to its end (2026 era),
    /// until the adapter takes it.
    tools_ttl_ms: Option<u64>,
    /// The change counter and the wakers of ops sleeping on the slot.
    waiters: Waiters,
}

/// Bytes kept per server for its tools' `x-mcp-header` annotations (tools without any take
/// none; a server whose annotations do not fit has the rest re-listed on `-32020`).
pub const ANNOTATIONS: usize = 512;

fn index(target: Target) -> usize {
    match target {
        Target::Primary => 0,
        Target::Fallback => 1,
    }
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
            changed: false,
            eras: [None; 2],
            era_news: [false; 2],
            listed: [false; 2],
            listing_until: [0; 2],
            annotations: [heapless::Vec::new(), heapless::Vec::new()],
            tools_list_changed: false,
            tools_ttl_ms: None,
            waiters: Waiters::default(),
        }
    }

    /// The era a server was found to speak: `Some(true)` for 2026-07-28, `Some(false)` for the
    /// handshake era, `None` before its probe.
    pub fn era(&self, target: Target) -> Option<bool> {
        self.eras.get(index(target)).copied().flatten()
    }

    fn set_era(&mut self, target: Target, modern: bool) {
        let i = index(target);
        if let (Some(e), Some(n)) = (self.eras.get_mut(i), self.era_news.get_mut(i)) {
            *n = *e != Some(modern);
            *e = Some(modern);
        }
    }

    /// The server seems to have changed era: its verdict, session and tool list are forgotten,
    /// so the next op probes it again.
    fn forget_era(&mut self, target: Target) {
        let i = index(target);
        if let Some(e) = self.eras.get_mut(i) {
            *e = None;
        }
        if let Some(l) = self.listed.get_mut(i) {
            *l = false;
        }
        if let Some(session) = self.session_mut(target) {
            session.reset();
        }
        self.changed = true;
    }

    /// The slot's news: a server's era verdict not yet told ([`Event::Era`], each server's
    /// once per run), for the timeline of the call that takes it.
    pub fn poll_event(&mut self) -> Option<Event<'static>> {
        // Only the era probe finds an era to tell (feature `probe`).
        if !cfg!(feature = "probe") {
            return None;
        }
        self.take_era_news()
            .map(|(target, modern)| Event::Era { target, modern })
    }

    /// The era of a server whose era became known and was not told yet, once: `(target,
    /// modern)`. [`SlotState::poll_event`] says the same as an [`Event::Era`].
    pub fn take_era_news(&mut self) -> Option<(Target, bool)> {
        for target in [Target::Primary, Target::Fallback] {
            let i = index(target);
            if let Some(news) = self.era_news.get_mut(i)
                && core::mem::take(news)
            {
                return self.era(target).map(|m| (target, m));
            }
        }
        None
    }

    fn listed(&self, target: Target) -> bool {
        self.listed.get(index(target)).copied().unwrap_or(false)
    }

    /// Keeps a server's annotations (records as the call handler writes them).
    fn set_annotations(&mut self, target: Target, records: &[u8]) {
        let i = index(target);
        if let Some(l) = self.listed.get_mut(i) {
            *l = true;
        }
        if let Some(a) = self.annotations.get_mut(i) {
            a.clear();
            // Whole records only.
            let mut keep = records.len().min(ANNOTATIONS);
            while keep > 0 && records.get(keep - 1) != Some(&0x1e) {
                keep -= 1;
            }
            let _ = a.extend_from_slice(records.get(..keep).unwrap_or(&[]));
        }
    }

    /// Another op lists the server's tools (and has not given up on it by `now`).
    fn listing_elsewhere(&self, target: Target, now: Millis) -> bool {
        self.listing_until
            .get(index(target))
            .is_some_and(|&until| until > now)
    }

    fn set_listing(&mut self, target: Target, until: Millis) {
        if let Some(u) = self.listing_until.get_mut(index(target)) {
            *u = until;
        }
        if until == 0 {
            self.changed = true;
        }
    }

    fn forget_annotations(&mut self, target: Target) {
        if let Some(l) = self.listed.get_mut(index(target)) {
            *l = false;
        }
    }

    /// The record the server's list gave `tool`, if it gave one.
    fn record_of(&self, target: Target, tool: &[u8]) -> Option<ToolRecord<'_>> {
        let arena = self.annotations.get(index(target))?;
        ToolRecord::find(arena, tool)
    }

    /// A tool's annotation pairs (`argument\0Header\0`…); `Err` when the tool is dropped for
    /// invalid ones; empty when it has none.
    fn annotations_of(&self, target: Target, tool: &[u8]) -> Result<&[u8], ()> {
        match self.record_of(target, tool) {
            None => Ok(&[]),
            Some(record) => record.pairs.ok_or(()),
        }
    }

    /// The server's list annotates the tool `idempotentHint: true`.
    fn idempotent(&self, target: Target, tool: &[u8]) -> bool {
        self.record_of(target, tool).is_some_and(|r| r.idempotent)
    }

    /// The server's list says the tool runs only as a task (`execution.taskSupport:
    /// "required"`, 2025-11-25).
    fn task_required(&self, target: Target, tool: &[u8]) -> bool {
        self.record_of(target, tool)
            .is_some_and(|r| r.task_required)
    }

    /// True once after a handshake ended: the adapter then wakes the ops that sleep on the
    /// slot ([`Action::Sleep`] with `slot: true`), with [`notify`](Self::notify) or its own
    /// means.
    pub fn take_changed(&mut self) -> bool {
        core::mem::take(&mut self.changed)
    }

    /// The slot's change counter, which [`notify`](Self::notify) bumps: read it in the same
    /// hold of the state as the [`Op::poll`] that said [`Action::Sleep`], then wait with
    /// [`changed_since`](Self::changed_since).
    pub fn generation(&self) -> u64 {
        self.waiters.generation()
    }

    /// Bumps the change counter and wakes every op registered with
    /// [`changed_since`](Self::changed_since) (call it when [`take_changed`](Self::take_changed)
    /// was true).
    pub fn notify(&mut self) {
        self.waiters.notify();
    }

    /// True when the slot changed since the counter read `since`; else keeps `waker` (a few
    /// are kept, [`MAX_WAITERS`]; past that all are woken to make room) for the next
    /// [`notify`](Self::notify). A change between the read and this call is never lost: both
    /// happen with the state in hand.
    pub fn changed_since(&mut self, since: u64, waker: &core::task::Waker) -> bool {
        self.waiters.changed_since(since, waker)
    }

    /// True once after a server said `notifications/tools/list_changed` on a call's stream
    /// (2025 era): the adapter's tool list is stale, to be fetched again before the next call.
    pub fn take_tools_list_changed(&mut self) -> bool {
        core::mem::take(&mut self.tools_list_changed)
    }

    /// How long the last `tools/list` read to its end may be kept (2026 era): the least
    /// `ttlMs` of its pages, a page without one counting 0 (the spec's default: stale at
    /// once), handed once; `None` after a 2025-era list (its server says when it changed).
    pub fn take_tools_ttl_ms(&mut self) -> Option<u64> {
        self.tools_ttl_ms.take()
    }

    /// Takes one `retry-after` retry from the slot's budget (one in
    /// [`RETRY_BUDGET_CALLS_PER_RETRY`] calls, and at least [`RETRY_BUDGET_FLOOR`]).
    fn take_retry(&mut self) -> bool {
        // (No 64-bit division: `retries < calls / N` is `(retries + 1) * N <= calls`, which
        // cannot wrap: retries stay at most `calls / N` or the floor.)
        let ok = self.retries < RETRY_BUDGET_FLOOR
            || self
                .retries
                .wrapping_add(1)
                .wrapping_mul(RETRY_BUDGET_CALLS_PER_RETRY)
                <= self.calls;
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

    /// Forgets every session (the slot's close when no server can have one to end: a build
    /// without the handshake era, feature `era-2025`).
    #[cfg(all(feature = "drive", not(feature = "era-2025")))]
    pub(crate) fn forget_sessions(&mut self) {
        self.primary.reset();
        if let Some(f) = self.fallback.as_mut() {
            f.reset();
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

    // Out of line: inlined, its 64-bit step is copied into each caller (32 B more in
    // `minimal`, 44 in `full`).
    #[inline(never)]
    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
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

    /// A best-effort request's own short deadline.
    fn courtesy(now: Millis) -> Self {
        let at = now.saturating_add(COURTESY_MS);
        Deadline {
            at,
            hard: at,
            step: COURTESY_MS,
        }
    }

    fn extend(&mut self, now: Millis) {
        self.at = now.saturating_add(self.step).min(self.hard).max(self.at);
    }
}
