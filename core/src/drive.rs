//! The async pump: drives the call machine ([`crate::machine`]) over any
//! `embedded_io_async::{Read, Write}` connection, for both adapters.
//!
//! The machine decides everything (what to send, when to give up, which server is next); the
//! pump only does what an [`Action`] says: open a connection ([`Net::connect`]), write, read,
//! give the connection back, sleep, each raced against the op's timeout. An adapter supplies
//! [`Net`] (connections and time) and [`Shared`] (where the slot's state lives, and how ops
//! sleeping on it are woken), and owns the buffers. This module also meters calls and puts
//! their events on the timeline, because a dropped future must still be metered.

use core::fmt::Write as _;

use embassy_futures::select::{Either, select};
use embedded_io_async::{Read, Write};

use crate::buf::Buf;
use crate::buf::{StrSink, truncated};
use crate::harness::events::{Timeline, TimelineEvent};
use crate::harness::failover::{AttemptOutcome, Target};
use crate::harness::meter::{Ledger, LedgerRecord};
use crate::harness::result::{ToolResult, write_tool_error};
use crate::machine::handlers::{FmtSink, as_text, redact_list_error, write_failure, write_line};
use crate::machine::{Action, Answer, Op};
use crate::wire::endpoint::Endpoint;
pub use crate::wire::exchange::TailDrain;
use crate::wire::failure::{ConnectError, ConnectErrorKind, Failure};
use crate::wire::json::Value;
use crate::wire::jsonrpc::{self, ListMethod};

pub use crate::machine::{
    Answered, CANCEL_DROPPED, CallBuffers, DEFAULT_IDLE_TIMEOUT_MS, InFlight, ListError, ListItem,
    MAX_PROGRESS_MESSAGE, MAX_TASK_ID, MethodError, Millis, ProgressObserver, ProgressUpdate,
    RETRY_BUDGET_CALLS_PER_RETRY, RETRY_BUDGET_FLOOR, SlotConfig, SlotState,
};

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
    /// Takes a connection whose reply stream has not ended, with what is left of its framing
    /// ([`TailDrain`]): an adapter that can run work on the side reads on (briefly) and
    /// [`recycle`](Self::recycle)s it once `tail` says the response ended. The default drops
    /// it, as an adapter that cannot must.
    fn park(&self, ep: &Endpoint<'_>, conn: Self::Conn, tail: TailDrain) {
        let _ = (ep, conn, tail);
    }
    /// True when [`park`](Self::park) keeps the connection and finishes its framing before it
    /// carries another request (the end usually is in the socket by then): the driver then
    /// hands an answer back at once instead of reading the end of its reply first, which for
    /// an SSE reply whose terminator comes in its own segment is one more wait a call. The
    /// default (false) keeps that read, as an adapter that drops parked connections must.
    fn parks_tails(&self) -> bool {
        false
    }
    /// Has `target`'s standalone GET stream open in its current session, for the server's
    /// requests that come on it ([`Action::Listen`]; [`crate::machine::listen`] writes the
    /// request and the answers). Returns once the stream is open, or refused, or at once when
    /// it is already; the driver races it against the op's timeout. The default does nothing,
    /// as an adapter that cannot hold a stream beside its calls must.
    async fn listen(&self, target: Target) {
        let _ = target;
    }
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

/// How long answering a server's request on the side may take.
const ANSWER_MS: Millis = 1_000;

/// Does what `op` asks until it reports an attempt ([`Action::Report`]) or is done
/// ([`Action::Done`]), which it returns. `conn` is the op's connection between calls.
async fn pump<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    op: &mut Op<'_, B, Sec, F>,
    conn: &mut Option<N::Conn>,
) -> Action
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    loop {
        let now = net.now();
        // Read before the poll, so a change between the poll and the wait is not lost.
        let generation = state.generation();
        let (action, changed) = state.with(|s| (op.poll(s, now), s.take_changed()));
        if changed {
            state.notify();
        }
        let at = op.timeout();
        match action {
            Action::Connect { target, fresh } => {
                *conn = None;
                let Some(ep) = cfg.endpoint(target) else {
                    op.handle_connect_failed(ConnectError::new(
                        ConnectErrorKind::Unreachable,
                        "no such server",
                    ));
                    continue;
                };
                match select(net.connect(ep, fresh), net.sleep_until(at)).await {
                    Either::First(Ok((c, reused))) => {
                        *conn = Some(c);
                        op.handle_connected(reused);
                    }
                    Either::First(Err(e)) => op.handle_connect_failed(e),
                    Either::Second(()) => op.handle_timeout(net.now()),
                }
            }
            Action::Transmit => {
                let Some(c) = conn.as_mut() else {
                    op.handle_sent(now, false);
                    continue;
                };
                let bytes = op.transmit();
                let send = async {
                    c.write_all(bytes).await?;
                    c.flush().await
                };
                match select(send, net.sleep_until(at)).await {
                    Either::First(sent) => op.handle_sent(net.now(), sent.is_ok()),
                    Either::Second(()) => op.handle_timeout(net.now()),
                }
            }
            Action::Receive => {
                if net.parks_tails() && op.reading_tail() {
                    op.leave_tail();
                    continue;
                }
                let Some(c) = conn.as_mut() else {
                    op.handle_read_failed();
                    continue;
                };
                match select(c.read(op.read_buf()), net.sleep_until(at)).await {
                    Either::First(Ok(n)) => op.handle_read(net.now(), n),
                    Either::First(Err(_)) => op.handle_read_failed(),
                    Either::Second(()) => op.handle_timeout(net.now()),
                }
            }
            Action::Recycle => {
                if let (Some(c), Some(ep)) = (conn.take(), cfg.endpoint(op.target())) {
                    net.recycle(ep, c);
                }
            }
            Action::Close => *conn = None,
            Action::Park => {
                if let (Some(c), Some(ep), Some(tail)) =
                    (conn.take(), cfg.endpoint(op.target()), op.take_tail())
                {
                    net.park(ep, c, tail);
                }
            }
            Action::Sleep { slot: true } => {
                let _ = select(state.changed(generation), net.sleep_until(at)).await;
            }
            Action::Sleep { slot: false } => net.sleep_until(at).await,
            Action::Respond { target } => {
                // On the side, best effort: the call's own connection stays as it is.
                if let Some(ep) = cfg.endpoint(target) {
                    let until = net.now().saturating_add(ANSWER_MS).min(at);
                    let answer = async {
                        let (mut side, _) = net.connect(ep, true).await.ok()?;
                        side.write_all(op.transmit()).await.ok()?;
                        side.flush().await.ok()?;
                        let mut status = [0u8; 64];
                        side.read(&mut status).await.ok()
                    };
                    let _ = select(answer, net.sleep_until(until)).await;
                }
            }
            Action::Listen { target } => {
                let _ = select(net.listen(target), net.sleep_until(at)).await;
            }
            Action::Report | Action::Done | Action::TaskStarted => return action,
        }
    }
}

/// Runs `op` to its end (a list, a request without metering, a courtesy).
async fn run<N, S, B, Sec, F>(net: &N, cfg: &SlotConfig<'_>, state: &S, op: &mut Op<'_, B, Sec, F>)
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    let mut conn = None;
    while pump(net, cfg, state, op, &mut conn).await != Action::Done {}
}

/// Tells `target`'s server, best effort, that the caller dropped the `tools/call` with `id`
/// (from [`InFlight::get`]): `notifications/cancelled` in its session. Nothing is sent to a
/// server the slot knows is dead, nor outside a session.
pub async fn cancel_dropped<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    call: (Target, u64),
    bufs: &mut CallBuffers<'_, B>,
) {
    let mut op = Op::<B, &[u8]>::cancel(cfg, bufs, call);
    run(net, cfg, state, &mut op).await;
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
    /// The call counts as a tool call (not so a call that follows an earlier call's task).
    counts_call: bool,
}

impl<L: Ledger, T: Timeline> Drop for Metered<'_, L, T> {
    fn drop(&mut self) {
        if self.attempt_open {
            let mut record = LedgerRecord::transport_failure();
            record.tool_calls = u32::from(self.counts_call);
            self.ledger.record(record);
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
    let meter = Meter { ledger, timeline };
    call_as(
        net,
        cfg,
        state,
        (tool, args),
        Tasking::Wait,
        secrets,
        meter,
        bufs,
    )
    .await
    .0
}

/// How a call started with [`start_task`] came back.
#[derive(Debug)]
pub enum Started<'b> {
    /// The server made the call a task, which runs on: follow it with [`attach_task`].
    Task {
        /// The server that runs it.
        target: Target,
        /// The task's id, as the server gave it.
        id: heapless::String<MAX_TASK_ID>,
    },
    /// The server answered at once (or the call failed): the call's result, as [`call`]'s.
    Done(ToolResult<'b>),
}

/// [`call`], but a call its server makes a task (the tasks extension) comes back at once as
/// [`Started::Task`], for [`attach_task`] now or later. The call is metered once here
/// (`tool_calls: 1`); the task's result bytes are metered when it is followed.
#[allow(clippy::too_many_arguments)]
pub async fn start_task<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    tool: &str,
    args: Option<Value<'_>>,
    secrets: &[Sec],
    ledger: &mut L,
    timeline: &mut T,
    bufs: &'b mut CallBuffers<'_, B>,
) -> Started<'b>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    L: Ledger,
    T: Timeline,
{
    let meter = Meter { ledger, timeline };
    match call_as(
        net,
        cfg,
        state,
        (tool, args),
        Tasking::Detach,
        secrets,
        meter,
        bufs,
    )
    .await
    {
        (_, Some((target, id))) => Started::Task { target, id },
        (result, None) => Started::Done(result),
    }
}

/// Follows the task `task` on `target` (a call of `tool` became it, maybe in an earlier run)
/// to its end, as [`call`] does a call: the result flattened, redacted and metered (its bytes;
/// no second tool call counted), a deadline of `timeout_ms` from now that cancels the task
/// (`tasks/cancel`), no failover. The server must speak the 2026-07-28 era.
#[allow(clippy::too_many_arguments)]
pub async fn attach_task<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    (target, tool): (Target, &str),
    task: &str,
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
    let meter = Meter { ledger, timeline };
    let how = Tasking::Attach { target, task };
    call_as(net, cfg, state, (tool, None), how, secrets, meter, bufs)
        .await
        .0
}

/// Where a call's ledger records and events go.
struct Meter<'m, L, T> {
    ledger: &'m mut L,
    timeline: &'m mut T,
}

/// What a call does with a task its server makes of it.
#[derive(Clone, Copy)]
enum Tasking<'t> {
    Wait,
    Detach,
    Attach { target: Target, task: &'t str },
}

/// A running task's id, when a detached call became one.
type TaskStarted = Option<(Target, heapless::String<MAX_TASK_ID>)>;

/// The one body of [`call`], [`start_task`] and [`attach_task`].
#[allow(clippy::too_many_arguments)]
async fn call_as<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    (tool, args): (&str, Option<Value<'_>>),
    tasking: Tasking<'_>,
    secrets: &[Sec],
    Meter { ledger, timeline }: Meter<'_, L, T>,
    bufs: &'b mut CallBuffers<'_, B>,
) -> (ToolResult<'b>, TaskStarted)
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    L: Ledger,
    T: Timeline,
{
    let start = net.now();
    let attached = matches!(tasking, Tasking::Attach { .. });
    let mut meter = Metered {
        ledger,
        timeline,
        slot: cfg.slot,
        tool,
        attempt_open: false,
        counts_call: !attached,
    };
    let (failure, answer, started) = {
        let mut op = match tasking {
            Tasking::Wait => Op::call(cfg, bufs, secrets, tool, args),
            Tasking::Detach => Op::call(cfg, bufs, secrets, tool, args).detached(),
            Tasking::Attach { target, task } => {
                Op::attach(cfg, bufs, secrets, (target, tool), task)
            }
        };
        let mut conn = None;
        let mut start_told = false;
        loop {
            meter.attempt_open = true;
            let action = pump(net, cfg, state, &mut op, &mut conn).await;
            meter.attempt_open = false;
            if action == Action::Done {
                break;
            }
            if action == Action::TaskStarted {
                // When the call becomes a task: a dropped call's task is on the timeline too.
                if let Some(task) = op.task_id() {
                    meter.timeline.emit(&TimelineEvent::Task {
                        slot: cfg.slot,
                        tool,
                        task,
                        status: "working",
                    });
                    start_told = true;
                }
                continue;
            }
            let Some(report) = op.report() else { continue };
            // Every attempt but the last is metered here; the last with the result below.
            if !report.last {
                meter.ledger.record(match report.outcome {
                    AttemptOutcome::Unreachable => LedgerRecord::transport_failure(),
                    _ => LedgerRecord::answered(op.text_len() as u64),
                });
            }
            if report.fallback_used {
                meter.timeline.emit(&TimelineEvent::FallbackUsed {
                    slot: cfg.slot,
                    tool,
                    primary: cfg.primary_label,
                    fallback: cfg.fallback_label,
                });
            }
            if report.no_healthy_tool {
                meter.timeline.emit(&TimelineEvent::NoHealthyTool {
                    slot: cfg.slot,
                    tool,
                });
            }
        }
        let started = op
            .detached_task()
            .then(|| op.task_id().map(|id| (op.target(), truncated(id))))
            .flatten();
        if let Some(task) = op.task_id() {
            // The task's start and end, once each (the tool ran once, on its server); a
            // detached call says only its start, the call that follows it only its end.
            let start = (!attached && !start_told).then_some("working");
            let end = (started.is_none()).then(|| op.task_end());
            for status in start.into_iter().chain(end) {
                meter.timeline.emit(&TimelineEvent::Task {
                    slot: cfg.slot,
                    tool,
                    task,
                    status,
                });
            }
        }
        let answer = op.answer();
        let failure = match (op.failure(), answer) {
            (Some(f), _) => Some(f.clone()),
            (None, None) if started.is_some() => None,
            (None, None) => Some(Failure::NoResponse),
            (None, Some(_)) => None,
        };
        (failure, answer, started)
    };
    // Each server's era, once per run, on the timeline of the call that found it.
    while let Some((target, modern)) = state.with(SlotState::take_era_news) {
        meter.timeline.emit(&TimelineEvent::Era {
            slot: cfg.slot,
            tool,
            server: match target {
                Target::Primary => cfg.primary_label,
                Target::Fallback => cfg.fallback_label,
            },
            era: if modern {
                crate::wire::era::MODERN_VERSION
            } else {
                "legacy"
            },
        });
    }
    let latency = net.now().saturating_sub(start);
    match (&failure, answer) {
        (Some(f), _) => write_failure(secrets, f, &mut bufs.error),
        (None, Some(Answer::Result { is_error: true })) => {
            bufs.error.clear();
            if write_tool_error(as_text(&bufs.text), &mut bufs.error).is_err() {
                bufs.error.clear();
            }
        }
        _ => {}
    }
    let keep_raw = cfg.keep_raw;
    let bufs: &'b CallBuffers<'_, B> = bufs;
    let raw = (keep_raw && !bufs.raw.is_empty()).then(|| bufs.raw.bytes());
    let out = match (failure, answer) {
        (Some(f), _) => ToolResult::unreachable(as_text(&bufs.error), f.cause(), latency),
        (None, Some(Answer::Result { is_error: false })) => {
            ToolResult::answered(as_text(&bufs.text), latency, raw)
        }
        (None, Some(Answer::Result { is_error: true })) => {
            ToolResult::tool_error(as_text(&bufs.text), as_text(&bufs.error), latency, raw)
        }
        (None, Some(Answer::Refused { code, unknown_tool })) => {
            ToolResult::refused(as_text(&bufs.error), code, unknown_tool, latency, raw)
        }
        (None, None) if started.is_some() => ToolResult::answered("", latency, None),
        (None, None) => {
            ToolResult::unreachable(as_text(&bufs.error), Failure::NoResponse.cause(), latency)
        }
    };
    let mut record = out.ledger_record();
    if attached {
        // The call that made the task counted the tool call.
        record.tool_calls = 0;
    }
    meter.ledger.record(record);
    if let Some(event) = out.timeline_event(cfg.slot, tool) {
        meter.timeline.emit(&event);
    }
    (out, started)
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
    let on_item = |item: Option<(Value<'_>, &[u8])>| {
        // A restart on the fallback is not told (the seed's listTools never was).
        let Some((tool, json)) = item else { return };
        let Some(name) = jsonrpc::tool_name(tool) else {
            return;
        };
        match name.as_plain() {
            Some(s) => on_tool(s, json),
            None => {
                let mut s = StrSink::<512>::default();
                let _ = name.unescape_into(&mut s);
                on_tool(s.as_str(), json);
            }
        }
    };
    list_paged(net, cfg, state, ListMethod::Tools, secrets, bufs, on_item)
        .await
        .map_err(|(e, _)| e)
}

/// A list across pages with failover: a primary failure is retried on the fallback (after
/// `on_item(None)`: the items of the failed attempt are not the list); a fallback failure is
/// returned, redacted.
async fn list_paged<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    list: ListMethod,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
    on_item: F,
) -> Result<(), (ListError, bool)>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    F: FnMut(Option<(Value<'_>, &[u8])>) + Send,
{
    let mut op = Op::list(cfg, bufs, secrets, list, on_item);
    run(net, cfg, state, &mut op).await;
    let modern = op.spoke_modern();
    op.list_outcome()
        .map_err(|e| (redact_list_error(secrets, e), modern))
}

/// Ends each open session with HTTP DELETE (best effort; 405 is fine) and forgets it.
/// Nothing goes to a server the slot knows is dead: its session is only forgotten.
pub async fn close<N: Net, S: Shared<SlotState>, B: Buf>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    bufs: &mut CallBuffers<'_, B>,
) {
    let mut op = Op::<B, &[u8]>::close(cfg, bufs);
    run(net, cfg, state, &mut op).await;
}

/// Any list (`resources/list`, `resources/templates/list`, `prompts/list`, or `tools/list`)
/// across pages, each item to `on_item`. Fails over like [`list_tools`]: a primary failure is
/// retried on the fallback (after a [`ListItem::Restart`]), a fallback failure returned. A
/// server that repeats its cursor (or pages past 1 000) is stopped. Listing is not metered and
/// emits no timeline event.
pub async fn list<N, S, B, Sec, F>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    list: ListMethod,
    secrets: &[Sec],
    bufs: &mut CallBuffers<'_, B>,
    mut on_item: F,
) -> Result<(), MethodError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    F: FnMut(ListItem<'_>) + Send,
{
    let each = |item: Option<(Value<'_>, &[u8])>| match item {
        Some((_, json)) => on_item(ListItem::Item(json)),
        None => on_item(ListItem::Restart),
    };
    list_paged(net, cfg, state, list, secrets, bufs, each)
        .await
        .map_err(|(error, modern)| MethodError {
            method: list.method(),
            error,
            modern,
        })
}

/// One request that is not a tool call (`resources/read`, `prompts/get`, `ping`) through the
/// slot: handshake if needed, failover like [`list_tools`] (a primary failure, refusal
/// included, is retried on the fallback), redaction of the whole result.
///
/// Metering: a content-bearing request ([`jsonrpc::Request::bears_content`]) is metered like a
/// tool call, each attempt `{tool_calls: 1, evidence_bytes: <redacted result bytes>}` (a
/// refusal 0 bytes, a transport failure none; also when its future is dropped), and its
/// failure is a `tool_error` event naming the method as the tool. `ping` carries no evidence:
/// it is neither metered nor on the timeline, like `tools/list`.
#[allow(clippy::too_many_arguments)]
pub async fn request<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    req: jsonrpc::Request<'_>,
    secrets: &[Sec],
    ledger: &mut L,
    timeline: &mut T,
    bufs: &'b mut CallBuffers<'_, B>,
) -> Result<Answered<'b>, MethodError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    L: Ledger,
    T: Timeline,
{
    let meter = Meter { ledger, timeline };
    request_as(net, cfg, state, (None, req), secrets, meter, bufs).await
}

/// A task's request (`tasks/get`, `tasks/cancel`: [`jsonrpc::Request::TaskGet`],
/// [`jsonrpc::Request::TaskCancel`]) to `target`, the task's server, alone: no failover, not
/// metered (the call that follows the task meters its result). The answer is the whole
/// result, redacted.
pub async fn task_request<'b, N, S, B, Sec>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    (target, req): (Target, jsonrpc::Request<'_>),
    secrets: &[Sec],
    bufs: &'b mut CallBuffers<'_, B>,
) -> Result<Answered<'b>, MethodError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
{
    /// Nothing to meter or tell.
    struct Unmetered;
    impl Ledger for Unmetered {
        fn record(&mut self, _: LedgerRecord) {}
    }
    impl Timeline for Unmetered {
        fn emit(&mut self, _: &TimelineEvent<'_>) {}
    }
    let meter = Meter {
        ledger: &mut Unmetered,
        timeline: &mut Unmetered,
    };
    request_as(net, cfg, state, (Some(target), req), secrets, meter, bufs).await
}

/// The one body of [`request`] and [`task_request`]: failover, or `pin`ned to one server.
async fn request_as<'b, N, S, B, Sec, L, T>(
    net: &N,
    cfg: &SlotConfig<'_>,
    state: &S,
    (pin, req): (Option<Target>, jsonrpc::Request<'_>),
    secrets: &[Sec],
    Meter { ledger, timeline }: Meter<'_, L, T>,
    bufs: &'b mut CallBuffers<'_, B>,
) -> Result<Answered<'b>, MethodError>
where
    N: Net,
    S: Shared<SlotState>,
    B: Buf + Send,
    Sec: AsRef<[u8]> + Sync,
    L: Ledger,
    T: Timeline,
{
    let start = net.now();
    let content = req.bears_content();
    let method = req.method();
    let mut meter = Metered {
        ledger,
        timeline,
        slot: cfg.slot,
        tool: method,
        attempt_open: false,
        counts_call: true,
    };
    let result = {
        let mut op = match pin {
            Some(target) => Op::pinned_request(cfg, bufs, secrets, target, req),
            None => Op::request(cfg, bufs, secrets, req),
        };
        let mut conn = None;
        loop {
            meter.attempt_open = content;
            let action = pump(net, cfg, state, &mut op, &mut conn).await;
            meter.attempt_open = false;
            if action == Action::Done {
                break;
            }
            if let Some(report) = op.report()
                && content
            {
                meter.ledger.record(match report.outcome {
                    AttemptOutcome::Answered => LedgerRecord::answered(op.text_len() as u64),
                    AttemptOutcome::Unreachable => LedgerRecord::transport_failure(),
                    _ => LedgerRecord::answered(0),
                });
            }
        }
        (op.list_outcome(), op.spoke_modern())
    };
    let (result, modern) = result;
    match result {
        Ok(()) => Ok(Answered {
            result: bufs.text.bytes(),
            latency_ms: net.now().saturating_sub(start),
        }),
        Err(e) => {
            let error = MethodError {
                method,
                error: redact_list_error(secrets, e),
                modern,
            };
            if content {
                write_line(secrets, format_args!("{error}"), &mut bufs.error);
                meter.timeline.emit(&TimelineEvent::ToolError {
                    slot: cfg.slot,
                    tool: method,
                    error: as_text(&bufs.error),
                });
            }
            Err(error)
        }
    }
}
