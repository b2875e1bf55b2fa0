//! The async pump: drives the call machine ([`crate::machine`]) over any
//! `embedded_io_async::{Read, Write}` connection, for both adapters.
//!
//! The machine decides everything (what to send, when to give up, which server is next); the
//! pump only does what an [`Action`] says: open a connection ([`Net::connect`]), write, read,
//! give the connection back, sleep, each raced against the op's timeout. An adapter supplies
//! [`Net`] (connections and time) and a closure that runs the pump's code with the slot's
//! [`SlotState`] in hand, and owns the buffers; a [`Driver`] holds both with the slot's
//! config. What a call's op did goes to the ledger and the timeline through the
//! machine's [`Metering`] (events in, records out, no await); the pump only forwards the
//! op's events to it and keeps it alive while an attempt runs, so that a dropped future is
//! still metered.
//!
//! The core holds no lock and defines no lock trait: where the slot's state lives is the
//! adapter's (a `Mutex` on the host, a `RefCell` on the edge), as in quinn's async face. The
//! pump needs two things of it, one transition with the state in hand and a wait until
//! another op changed it. The first is the adapter's closure (`Fn(&mut dyn FnMut(&mut
//! SlotState))`: take the lock or borrow the cell, call, let go; never across an await). The
//! second needs nothing more: the state keeps its own change counter and a few wakers
//! ([`SlotState::changed_since`]), so "wait until it changed" is a `poll_fn` here that looks
//! and registers in one hold of the state, and the op that changes it wakes the sleepers in
//! the same hold ([`SlotState::notify`]). No wake-up is lost, and no future has to be handed
//! over boxed, which without an allocator was why a trait stood here before.
use core::future::{Future, poll_fn};
use core::task::Poll;

use embassy_futures::select::{Either, select};
use embedded_io_async::{Read, Write};

use crate::buf::Buf;
use crate::buf::StrSink;
use crate::harness::events::{Timeline, TimelineEvent};
use crate::harness::failover::Target;
use crate::harness::meter::{Ledger, LedgerRecord};
use crate::harness::result::ToolResult;
use crate::machine::handlers::{redact_list_error, redact_list_error_in};
use crate::machine::{Action, CallOp, ListOp, Metering, Op, OtherOp, Settled, Tasking};
use crate::wire::endpoint::Endpoint;
pub use crate::wire::exchange::TailDrain;
use crate::wire::failure::ConnectError;
use crate::wire::json::Value;
use crate::wire::jsonrpc::{self, ListMethod};

pub use crate::machine::{
    Answered, CANCEL_DROPPED, CallBuffers, DEFAULT_IDLE_TIMEOUT_MS, InFlight, ListError, ListItem,
    MAX_PROGRESS_MESSAGE, MAX_TASK_ID, MAX_WAITERS, MethodError, Millis, ProgressObserver,
    ProgressUpdate, RETRY_BUDGET_CALLS_PER_RETRY, RETRY_BUDGET_FLOOR, SlotConfig, SlotState,
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
    /// False when [`park`](Self::park) only drops the connection (as the default does): the
    /// driver then drops it itself and leaves the op's tail where it lies, no code for handing
    /// it over. The default (true) has the driver call `park`, as an adapter that overrides it
    /// needs.
    fn parks(&self) -> bool {
        true
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
    /// False when [`listen`](Self::listen) does nothing (the default's): the driver then
    /// skips the wait for it, whose await point would otherwise stay in every call's future.
    /// The default (true) has the driver await `listen`, as an adapter that overrides it needs.
    fn listens(&self) -> bool {
        true
    }
    /// Answers a request the server sent on a call's stream ([`Action::Respond`]): POSTs
    /// `answer` (a whole HTTP request) to `ep` beside the call's own connection, best effort;
    /// the driver races it against about a second. The connection is the adapter's to open
    /// (a fresh one, or one outside its pool): the core opens none. [`post_answer`] writes
    /// the bytes on it and reads no more than the status line's first bytes.
    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]);
}

/// Writes `answer` (a whole HTTP request, from [`Net::respond`]) on `conn`, a connection the
/// adapter opened for it, and reads no more than the first bytes of the status line: the
/// answer is best effort, its reply is not looked at.
pub async fn post_answer<C: Read + Write>(conn: &mut C, answer: &[u8]) {
    if conn.write_all(answer).await.is_ok() && conn.flush().await.is_ok() {
        let mut status = [0u8; 64];
        let _ = conn.read(&mut status).await;
    }
}

/// How long answering a server's request on the side may take.
#[cfg(feature = "era-2025")]
const ANSWER_MS: Millis = 1_000;

/// One slot's driver: the adapter's connections and time (`net`), the slot's config, and
/// the adapter's way to the slot's state (`state`). Each method runs one op of the slot to its
/// end.
pub struct Driver<'d, N, S> {
    /// Connections and time.
    pub net: &'d N,
    /// The slot's config.
    pub cfg: &'d SlotConfig<'d>,
    /// Runs the closure it is given, once, with the slot's state in hand (the adapter's lock
    /// or cell, held for that call only). The state is shared by the slot's ops.
    pub state: S,
}

impl<'d, N, S: Fn(&mut dyn FnMut(&mut SlotState))> Driver<'d, N, S> {
    /// The driver of the slot `cfg` over `net`; `state` runs a closure with the slot's state
    /// in hand, e.g. `|f| mutex.lock().map(|mut s| f(&mut s))` (an adapter whose `state`
    /// does not call it ends the op).
    pub fn new(net: &'d N, cfg: &'d SlotConfig<'d>, state: S) -> Self {
        Driver { net, cfg, state }
    }

    /// Runs `f` with the slot's state in hand (not at all when the adapter does not call it):
    /// the adapter's closure itself, one `dyn` call, no wrapper made per use.
    fn with(&self, f: &mut dyn FnMut(&mut SlotState)) {
        (self.state)(f);
    }

    /// Returns once the slot's state changed since its counter read `since` (another op's
    /// handshake ended, ...). Looks and registers in one hold of the state, so no wake-up is
    /// lost; at most [`MAX_WAITERS`] wakers are kept, more make spurious wake-ups, never
    /// missed ones. Never returns unless `watch` (a sleep that only its deadline ends).
    #[cfg(feature = "era-2025")]
    fn changed(&self, watch: bool, since: u64) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            if !watch {
                return Poll::Pending;
            }
            // An adapter that does not run the closure ends the wait.
            let mut changed = true;
            self.with(&mut |s| changed = s.changed_since(since, cx.waker()));
            if changed {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

impl<'d, N, S: Fn(&mut dyn FnMut(&mut SlotState))> Driver<'d, N, S> {
    /// [`changed`](Self::changed)'s one look: true when the slot's state changed since its
    /// counter read `since`, else `cx`'s waker is kept for the change (in the same hold).
    #[cfg(not(feature = "era-2025"))]
    fn changed(&self, since: u64, cx: &core::task::Context<'_>) -> bool {
        // An adapter that does not run the closure ends the wait.
        let mut changed = true;
        self.with(&mut |s| changed = s.changed_since(since, cx.waker()));
        changed
    }
}

impl<N, S: Copy> Clone for Driver<'_, N, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N, S: Copy> Copy for Driver<'_, N, S> {}

/// How a call started with [`Driver::start_task`] came back.
#[derive(Debug)]
pub enum Started<'b> {
    /// The server made the call a task, which runs on: follow it with
    /// [`Driver::attach_task`].
    Task {
        /// The server that runs it.
        target: Target,
        /// The task's id, as the server gave it.
        id: heapless::String<MAX_TASK_ID>,
    },
    /// The server answered at once (or the call failed): the call's result, as
    /// [`Driver::call`]'s.
    Done(ToolResult<'b>),
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
        timeline.emit_failure(&event, false);
    }
    out
}

/// Hands a listed tool's name and JSON to `on_tool` (a restart on the fallback is not told:
/// a tool list never was).
fn each_tool(item: Option<(Value<'_>, &[u8])>, on_tool: &mut impl FnMut(&str, &[u8])) {
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
}

/// Hands a listed item (or the restart on the fallback) to `on_item`.
fn each_item(item: Option<(Value<'_>, &[u8])>, on_item: &mut impl FnMut(ListItem<'_>)) {
    match item {
        Some((_, json)) => on_item(ListItem::Item(json)),
        None => on_item(ListItem::Restart),
    }
}

/// After the pump came back with `action`: the attempt's meter is closed and the op's events
/// forwarded to it. True when the op is done.
fn settle_attempt<B, Sec, F, L, T, const LISTS: bool, const OTHERS: bool>(
    op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
    meter: &mut Metering<'_, L, T>,
    action: Action,
) -> bool
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
    L: Ledger,
    T: Timeline,
{
    meter.end();
    while let Some(event) = op.poll_event() {
        meter.forward(event);
    }
    action == Action::Done
}

/// What an action's I/O came to, handed to the op in one place ([`feed`]).
#[cfg_attr(not(feature = "std"), repr(u32))]
enum Io {
    /// A connection is open; from the pool when true.
    Connected(bool),
    /// No connection.
    ConnectFailed(ConnectError),
    /// The request was written (true) or writing it failed.
    Sent(bool),
    /// Bytes read; 0: the peer closed.
    Read(usize),
    /// Reading failed.
    ReadFailed,
    /// The action's deadline passed first.
    TimedOut,
}

/// Hands `io` to `op` at `now`: one copy of the op's I/O transitions, out of the pump's
/// future (not inlined: a call from each await point's arm instead of the transitions' code
/// in the future's poll).
#[inline(never)]
fn feed<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
    op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
    io: Io,
    now: Millis,
) where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    match io {
        Io::Connected(reused) => op.handle_connected(reused),
        Io::ConnectFailed(e) => op.handle_connect_failed(e),
        Io::Sent(ok) => op.handle_sent(now, ok),
        Io::Read(n) => op.handle_read(now, n),
        Io::ReadFailed => op.handle_read_failed(),
        Io::TimedOut => op.handle_timeout(now),
    }
}

/// What a finished list op says: which server's list it is, or its failure (redacted, with the
/// method and the era it was spoken in).
fn list_result<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
    op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
    list: ListMethod,
    secrets: &[Sec],
) -> Result<Target, MethodError>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    let (modern, target) = (op.spoke_modern(), op.target());
    op.take_list_outcome()
        .map(|()| target)
        .map_err(|e| MethodError {
            method: list.method(),
            error: redact_list_error(secrets, e),
            modern,
        })
}

/// Nothing to meter or tell (a task's request).
struct Unmetered;

impl Ledger for Unmetered {
    fn record(&mut self, _: LedgerRecord) {}
}

impl Timeline for Unmetered {
    fn emit(&mut self, _: &TimelineEvent<'_>) {}
}

/// How [`Driver::tool_call`] treats a task the call becomes: a [`Tasking`] picked at run
/// time, or [`Waits`], which is [`Tasking::Wait`] known at build time.
pub trait CallMode<'t>: Copy {
    /// The tasking itself.
    fn tasking(self) -> Tasking<'t>;
}

impl<'t> CallMode<'t> for Tasking<'t> {
    fn tasking(self) -> Tasking<'t> {
        self
    }
}

/// [`Tasking::Wait`] as a type: a constant in the call's future, not a value it stores and
/// branches on, so the future has no code for building a detached or an attached op.
#[derive(Debug, Clone, Copy)]
pub struct Waits;

impl<'t> CallMode<'t> for Waits {
    fn tasking(self) -> Tasking<'t> {
        Tasking::Wait
    }
}

impl<'d, N: Net, S: Fn(&mut dyn FnMut(&mut SlotState)) + Copy> Driver<'d, N, S> {
    /// The adapter's clock, read through one copy of its code where there is no old era (a
    /// clock that converts ticks divides, and a call reads it in several places: minimal
    /// 16 B less; with the old era, inlined is 24 B less).
    #[cfg_attr(not(feature = "era-2025"), inline(never))]
    fn now(&self) -> Millis {
        self.net.now()
    }

    /// One transition of `op` with the slot's state in hand: its action, and the slot's
    /// change counter read in the same hold, so a change after it is seen by a wait. Wakes the
    /// ops sleeping on the slot when the transition changed it. `None` when the adapter did
    /// not run the closure. (The adapter's closure is called directly, not through `with`:
    /// about 550 B less flash on the edge.)
    fn step<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
        &self,
        op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
        now: Millis,
    ) -> Option<(Action, u64)>
    where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
    {
        let mut step = None;
        (self.state)(&mut |s: &mut SlotState| {
            let action = op.poll(s, now);
            if s.take_changed() {
                s.notify();
            }
            step = Some((action, s.generation()));
        });
        step
    }

    /// Does what `op` asks until it reports an attempt ([`Action::Report`]), becomes a task
    /// ([`Action::TaskStarted`]) or is done ([`Action::Done`]), which it returns. `conn` is
    /// the op's connection between calls.
    async fn pump<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
        self,
        op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
        conn: &mut Option<N::Conn>,
    ) -> Action
    where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
    {
        'pump: loop {
            let now = self.now();
            let Some((action, generation)) = self.step(op, now) else {
                return Action::Done;
            };
            let at = op.timeout();
            // Every outcome goes to the op through one call of `feed` (the waits' and the
            // ones without a connection alike).
            let io = 'io: {
                match action {
                    Action::Connect { target, fresh } => {
                        *conn = None;
                        // Never taken: a trip is written (then connected) only to a server
                        // with an endpoint (`write_request`); a timeout, not a made-up connect
                        // error (its text, and its copy, are 40 B of the edge's flash).
                        let Some(ep) = self.cfg.endpoint(target) else {
                            break 'io Io::TimedOut;
                        };
                        match select(self.net.connect(ep, fresh), self.net.sleep_until(at)).await {
                            Either::First(Ok((c, reused))) => {
                                *conn = Some(c);
                                Io::Connected(reused)
                            }
                            Either::First(Err(e)) => Io::ConnectFailed(e),
                            Either::Second(()) => Io::TimedOut,
                        }
                    }
                    Action::Transmit => {
                        let Some(c) = conn.as_mut() else {
                            break 'io Io::Sent(false);
                        };
                        let bytes = op.transmit();
                        let send = async {
                            c.write_all(bytes).await?;
                            c.flush().await
                        };
                        match select(send, self.net.sleep_until(at)).await {
                            Either::First(sent) => Io::Sent(sent.is_ok()),
                            Either::Second(()) => Io::TimedOut,
                        }
                    }
                    Action::Receive => {
                        if self.net.parks_tails() && op.reading_tail() {
                            op.leave_tail();
                            continue 'pump;
                        }
                        let Some(c) = conn.as_mut() else {
                            break 'io Io::ReadFailed;
                        };
                        match select(c.read(op.read_buf()), self.net.sleep_until(at)).await {
                            Either::First(Ok(n)) => Io::Read(n),
                            Either::First(Err(_)) => Io::ReadFailed,
                            Either::Second(()) => Io::TimedOut,
                        }
                    }
                    Action::Recycle => {
                        if let (Some(c), Some(ep)) = (conn.take(), self.cfg.endpoint(op.target())) {
                            self.net.recycle(ep, c);
                        }
                        continue 'pump;
                    }
                    Action::Park if self.net.parks() => {
                        if let (Some(c), Some(ep), Some(tail)) =
                            (conn.take(), self.cfg.endpoint(op.target()), op.take_tail())
                        {
                            self.net.park(ep, c, tail);
                        }
                        continue 'pump;
                    }
                    // Parking with an adapter that does not park would only drop it: a close
                    // (the op's tail is then never taken, and nothing else reads it).
                    Action::Close | Action::Park => {
                        *conn = None;
                        continue 'pump;
                    }
                    Action::Sleep { slot } => {
                        // One await point for both sleeps: without `slot`, no change ends it.
                        #[cfg(feature = "era-2025")]
                        let _ =
                            select(self.changed(slot, generation), self.net.sleep_until(at)).await;
                        // Without the old era, one `poll_fn` over both waits, the change looked
                        // at first as in the `select`: minimal 68 B less than the `select` of
                        // two futures (with the old era, the `select` is the smaller).
                        #[cfg(not(feature = "era-2025"))]
                        {
                            let mut sleep = core::pin::pin!(self.net.sleep_until(at));
                            poll_fn(|cx| {
                                if slot && self.changed(generation, cx) {
                                    return Poll::Ready(());
                                }
                                sleep.as_mut().poll(cx)
                            })
                            .await;
                        }
                        continue 'pump;
                    }
                    // Only an old-era stream's requests are answered, and only the old era has a
                    // GET stream (feature `era-2025`). `#[cfg]`, not `cfg!`: an await point stays
                    // in the future's code even when its branch is never taken.
                    #[cfg(not(feature = "era-2025"))]
                    Action::Respond { .. } | Action::Listen { .. } => continue 'pump,
                    #[cfg(feature = "era-2025")]
                    Action::Respond { target } => {
                        // On the side, best effort: the call's own connection stays as it is.
                        if let Some(ep) = self.cfg.endpoint(target) {
                            let until = self.now().saturating_add(ANSWER_MS).min(at);
                            let answer = self.net.respond(ep, op.transmit());
                            let _ = select(answer, self.net.sleep_until(until)).await;
                        }
                        continue 'pump;
                    }
                    #[cfg(feature = "era-2025")]
                    Action::Listen { target } => {
                        if !self.net.listens() {
                            continue 'pump;
                        }
                        let _ = select(self.net.listen(target), self.net.sleep_until(at)).await;
                        continue 'pump;
                    }
                    Action::Report | Action::Done | Action::TaskStarted => return action,
                }
            };
            feed(op, io, self.now());
        }
    }

    /// Runs `op` to its end with `meter` open while it runs, forwarding the op's events to it.
    async fn metered<B, Sec, F, L, T, const LISTS: bool, const OTHERS: bool>(
        self,
        op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
        meter: &mut Metering<'_, L, T>,
    ) where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
        L: Ledger,
        T: Timeline,
    {
        let mut conn = None;
        loop {
            meter.begin();
            let action = self.pump(op, &mut conn).await;
            if settle_attempt(op, meter, action) {
                return;
            }
        }
    }

    /// Runs `op` to its end (a list, a courtesy).
    async fn run<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
        self,
        op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
    ) where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
    {
        let mut conn = None;
        while self.pump(op, &mut conn).await != Action::Done {}
    }

    /// Tells `target`'s server, best effort, that the caller dropped the `tools/call` with `id`
    /// (from [`InFlight::get`]): `notifications/cancelled` in its session. Nothing is sent to a
    /// server the slot knows is dead, nor outside a session.
    pub async fn cancel_dropped<B: Buf>(self, call: (Target, u64), bufs: &mut CallBuffers<'_, B>) {
        // Only the handshake era has sessions to cancel in (in the 2026 era the closed
        // connection was the cancel): without it there is nothing to send and no op to run.
        #[cfg(not(feature = "era-2025"))]
        let _ = (call, bufs);
        #[cfg(feature = "era-2025")]
        self.run(&mut OtherOp::<B, &[u8], false>::cancel_as(
            self.cfg, bufs, call,
        ))
        .await;
    }

    /// Ends each open session with HTTP DELETE (best effort; 405 is fine) and forgets it.
    /// Nothing goes to a server the slot knows is dead: its session is only forgotten.
    pub fn close<B: Buf>(self, bufs: &mut CallBuffers<'_, B>) -> impl Future<Output = ()> {
        self.close_on::<false, B>(bufs)
    }

    /// [`close`](Self::close), its op of the type the driver's calls run on with the same
    /// `LISTS` ([`tool_call_on`](Self::tool_call_on)): where the build has closes that send
    /// (the old era), a firmware that lists as well as calls then closes on the one op type
    /// its calls and lists share, not on one of its own.
    pub async fn close_on<const LISTS: bool, B: Buf>(self, bufs: &mut CallBuffers<'_, B>) {
        // Without the handshake era no server has a session to `DELETE`: forgetting them is
        // the whole close, with no op to run.
        #[cfg(not(feature = "era-2025"))]
        {
            let _ = bufs;
            self.with(&mut SlotState::forget_sessions);
        }
        // `run`'s loop written out: one future less around the pump's.
        #[cfg(feature = "era-2025")]
        {
            let mut op = OtherOp::<B, &[u8], LISTS>::close_as(self.cfg, bufs);
            let mut conn = None;
            while self.pump(&mut op, &mut conn).await != Action::Done {}
        }
    }

    /// One tool call through the slot: handshake if needed, failover, redaction, metering and
    /// events. Never fails: every failure is an `ok: false` result borrowing `bufs`.
    ///
    /// `secrets` is the run's redaction set (include the slot's header values). Each server
    /// attempt gets the full `timeout_ms`; every attempt is metered, also one whose future is
    /// dropped (then as a transport failure, with a `tool_error` event); a failure before
    /// anything was sent is a [`local_failure`].
    pub async fn call<'b, B: Buf, Sec: AsRef<[u8]>>(
        self,
        (tool, args): (&str, Option<Value<'_>>),
        secrets: &[Sec],
        ledger: &mut impl Ledger,
        timeline: &mut impl Timeline,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        let how = (Waits, secrets);
        self.tool_call((tool, args), how, (ledger, timeline), bufs)
            .await
            .0
    }

    /// [`call`](Self::call), but a call its server makes a task (the tasks extension) comes
    /// back at once as [`Started::Task`], for [`attach_task`](Self::attach_task) now or later.
    /// The call is metered once here (`tool_calls: 1`); the task's result bytes are metered
    /// when it is followed.
    pub async fn start_task<'b, B: Buf, Sec: AsRef<[u8]>>(
        self,
        (tool, args): (&str, Option<Value<'_>>),
        secrets: &[Sec],
        ledger: &mut impl Ledger,
        timeline: &mut impl Timeline,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> Started<'b> {
        let how = (Tasking::Detach, secrets);
        match self
            .tool_call((tool, args), how, (ledger, timeline), bufs)
            .await
        {
            (_, Some((target, id))) => Started::Task { target, id },
            (result, None) => Started::Done(result),
        }
    }

    /// Follows the task `task` on `target` (a call of `tool` became it, maybe in an earlier
    /// run) to its end, as [`call`](Self::call) does a call: the result flattened, redacted and
    /// metered (its bytes; no second tool call counted), a deadline of `timeout_ms` from now
    /// that cancels the task (`tasks/cancel`), no failover. The server must speak the
    /// 2026-07-28 era.
    pub async fn attach_task<'b, B: Buf, Sec: AsRef<[u8]>>(
        self,
        (target, tool, task): (Target, &str, &str),
        secrets: &[Sec],
        ledger: &mut impl Ledger,
        timeline: &mut impl Timeline,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        let how = (Tasking::Attach { target, task }, secrets);
        self.tool_call((tool, None), how, (ledger, timeline), bufs)
            .await
            .0
    }

    /// The one body of [`call`](Self::call), [`start_task`](Self::start_task) and
    /// [`attach_task`](Self::attach_task), for a caller that picks among them at run time
    /// (a [`Tasking`]) or at build time ([`Waits`], as `call` does: then the future has no
    /// code for the other cases): the result, and the running task a [`Tasking::Detach`]
    /// call became (its server and id; the result is then an empty answer). `args` are not
    /// sent with [`Tasking::Attach`].
    pub fn tool_call<'b, 't, M: CallMode<'t>, B: Buf, Sec: AsRef<[u8]>, L: Ledger, T: Timeline>(
        self,
        call: (&str, Option<Value<'_>>),
        how: (M, &[Sec]),
        sinks: (&mut L, &mut T),
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> impl Future<
        Output = (
            ToolResult<'b>,
            Option<(Target, heapless::String<MAX_TASK_ID>)>,
        ),
    > {
        self.tool_call_on::<false, M, B, Sec, L, T>(call, how, sinks, bufs)
    }

    /// [`tool_call`](Self::tool_call), its op of the type the driver's lists run on when
    /// `LISTS` (false: `tool_call` itself). For a firmware that lists as well as calls: its
    /// calls and lists then share one copy of the op's code (and of the pump around it)
    /// instead of one each, at the cost of the list's arms in every call's; a firmware that
    /// only calls keeps `LISTS` false and has no list arms at all. Behaviour is the same.
    pub async fn tool_call_on<
        'b,
        't,
        const LISTS: bool,
        M: CallMode<'t>,
        B: Buf,
        Sec: AsRef<[u8]>,
        L: Ledger,
        T: Timeline,
    >(
        self,
        (tool, args): (&str, Option<Value<'_>>),
        (mode, secrets): (M, &[Sec]),
        sinks: (&mut L, &mut T),
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> (
        ToolResult<'b>,
        Option<(Target, heapless::String<MAX_TASK_ID>)>,
    ) {
        let mut meter = Metering::call(self.cfg, tool, &mode.tasking(), sinks, self.now());
        let mut settled = {
            // Never a list: unless `LISTS`, its op has no code for one.
            let mut op = CallOp::<B, Sec, LISTS>::tool_call_as(
                self.cfg,
                bufs,
                secrets,
                (tool, args),
                mode.tasking(),
            );
            // `metered`'s loop written out: one future less around the pump's (full -196 B,
            // minimal -28 B and 40 B less of the call's future in RAM).
            {
                let mut conn = None;
                loop {
                    meter.begin_call();
                    let action = self.pump(&mut op, &mut conn).await;
                    // `settle_attempt` for a call: its events forwarded as a call's.
                    meter.end();
                    while let Some(event) = op.poll_event() {
                        meter.forward_call(event);
                    }
                    if action == Action::Done {
                        break;
                    }
                }
            }
            // Inlined: an out-of-line copy of it cost more (full 40 B, minimal 8 B).
            meter.settle_as(&mut op)
        };
        let out = self.conclude(&mut meter, &mut settled, secrets, bufs);
        // Settled, so nothing is open: its drop would do nothing. Forgotten (it holds only
        // borrows), its drop's code is only in the future's drop glue (a dropped call).
        core::mem::forget(meter);
        out
    }

    /// The end of a tool call, after its op settled: the slot's news forwarded (each server's
    /// era, once per run, on the timeline of the call that found it), the result made and
    /// metered. Not async: no state of the future holds its locals. (Inlined in every build:
    /// since the call's op is a call alone, out of line costs the edge 84 B more.)
    fn conclude<'b, B: Buf, Sec: AsRef<[u8]>, L: Ledger, T: Timeline>(
        &self,
        meter: &mut Metering<'_, L, T>,
        settled: &mut Settled,
        secrets: &[Sec],
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> (
        ToolResult<'b>,
        Option<(Target, heapless::String<MAX_TASK_ID>)>,
    ) {
        self.with(&mut |s| meter.forward_slot(s));
        let keep = (secrets, self.cfg.keep_raw);
        let out = meter.finish(settled, keep, bufs, self.now());
        // Moved out of `settled`, where it lies (no second copy of the id).
        (out, settled.take_started())
    }

    /// tools/list across pages, each name to `on_tool`. A primary failure is retried on the
    /// fallback; a fallback failure is returned (see `docs/design.md`, the list rule). Listing
    /// is not a tool call: it is not metered and emits no timeline event.
    pub async fn list_tools<B: Buf, Sec: AsRef<[u8]>>(
        self,
        secrets: &[Sec],
        bufs: &mut CallBuffers<'_, B>,
        mut on_tool: impl FnMut(&str),
    ) -> Result<(), ListError> {
        self.list_tools_described(secrets, bufs, |name, _| on_tool(name))
            .await
    }

    /// [`list_tools`](Self::list_tools), its callback `Send`, on the op type the driver's
    /// calls run on with `LISTS` ([`tool_call_on`](Self::tool_call_on)): a firmware that
    /// lists as well as calls links one copy of the op and its pump for both, not one each.
    /// The callback goes behind `dyn` (a `Send` one, so the op stays `Send` wherever a
    /// call's is). Behaviour is `list_tools`'s.
    pub async fn list_tools_shared<B: Buf, Sec: AsRef<[u8]>>(
        self,
        secrets: &[Sec],
        bufs: &mut CallBuffers<'_, B>,
        mut on_tool: impl FnMut(&str) + Send,
    ) -> Result<(), ListError> {
        let mut on_item = |item: Option<(Value<'_>, &[u8])>| {
            each_tool(item, &mut |name: &str, _: &[u8]| on_tool(name))
        };
        let mut op = ListOp::list_as(self.cfg, bufs, secrets, ListMethod::Tools, &mut on_item);
        // `run`'s loop written out: one future less around the pump's.
        let mut conn = None;
        while self.pump(&mut op, &mut conn).await != Action::Done {}
        // Taken, not cloned: the op is done with (no `Failure` copy in a list's code); its
        // refusal redacted where it lies.
        let mut out = op.take_list_outcome();
        if let Err(e) = &mut out {
            redact_list_error_in(secrets, e);
        }
        out
    }

    /// [`list_tools`](Self::list_tools), also handing over each tool's whole description (its
    /// JSON text as the server sent it, `description` and `inputSchema` included), redacted,
    /// via `bufs.text`.
    pub async fn list_tools_described<B: Buf, Sec: AsRef<[u8]>>(
        self,
        secrets: &[Sec],
        bufs: &mut CallBuffers<'_, B>,
        mut on_tool: impl FnMut(&str, &[u8]),
    ) -> Result<(), ListError> {
        let on_item = |item: Option<(Value<'_>, &[u8])>| each_tool(item, &mut on_tool);
        let mut op = Op::list(self.cfg, bufs, secrets, ListMethod::Tools, on_item);
        self.run(&mut op).await;
        op.take_list_outcome()
            .map_err(|e| redact_list_error(secrets, e))
    }

    /// Any list (`resources/list`, `resources/templates/list`, `prompts/list`, or
    /// `tools/list`) across pages, each item to `on_item`. Fails over like
    /// [`list_tools`](Self::list_tools): a primary failure is retried on the fallback (after a
    /// [`ListItem::Restart`]), a fallback failure returned. A server that repeats its cursor
    /// (or pages past 1 000) is stopped. Listing is not metered and emits no timeline event.
    /// `Ok` says which server's list it is.
    pub async fn list<B: Buf, Sec: AsRef<[u8]>>(
        self,
        list: ListMethod,
        secrets: &[Sec],
        bufs: &mut CallBuffers<'_, B>,
        mut on_item: impl FnMut(ListItem<'_>),
    ) -> Result<Target, MethodError> {
        let each = |item: Option<(Value<'_>, &[u8])>| each_item(item, &mut on_item);
        let mut op = Op::list(self.cfg, bufs, secrets, list, each);
        self.run(&mut op).await;
        list_result(&mut op, list, secrets)
    }

    /// One request that is not a tool call (`resources/read`, `prompts/get`, `ping`) through
    /// the slot: handshake if needed, failover like [`list_tools`](Self::list_tools) (a
    /// primary failure, refusal included, is retried on the fallback), redaction of the whole
    /// result.
    ///
    /// Metering: a content-bearing request ([`jsonrpc::Request::bears_content`]) is metered
    /// like a tool call, each attempt `{tool_calls: 1, evidence_bytes: <redacted result
    /// bytes>}` (a refusal 0 bytes, a transport failure none; also when its future is
    /// dropped), and its failure is a `tool_error` event naming the method as the tool.
    /// `ping` carries no evidence: it is neither metered nor on the timeline, like
    /// `tools/list`.
    pub async fn request<'b, B: Buf, Sec: AsRef<[u8]>>(
        self,
        req: jsonrpc::Request<'_>,
        secrets: &[Sec],
        ledger: &mut impl Ledger,
        timeline: &mut impl Timeline,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> Result<Answered<'b>, MethodError> {
        self.request_as((None, req), secrets, (ledger, timeline), bufs)
            .await
    }

    /// A task's request (`tasks/get`, `tasks/cancel`: [`jsonrpc::Request::TaskGet`],
    /// [`jsonrpc::Request::TaskCancel`]) to `target`, the task's server, alone: no failover,
    /// not metered (the call that follows the task meters its result). The answer is the whole
    /// result, redacted.
    pub async fn task_request<'b, B: Buf, Sec: AsRef<[u8]>>(
        self,
        (target, req): (Target, jsonrpc::Request<'_>),
        secrets: &[Sec],
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> Result<Answered<'b>, MethodError> {
        let sinks = (&mut Unmetered, &mut Unmetered);
        self.request_as((Some(target), req), secrets, sinks, bufs)
            .await
    }

    /// The one body of [`request`](Self::request) and [`task_request`](Self::task_request):
    /// failover, or `pin`ned to one server.
    async fn request_as<'b, B: Buf, Sec: AsRef<[u8]>, L: Ledger, T: Timeline>(
        self,
        (pin, req): (Option<Target>, jsonrpc::Request<'_>),
        secrets: &[Sec],
        sinks: (&mut L, &mut T),
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> Result<Answered<'b>, MethodError> {
        let (method, content) = (req.method(), req.bears_content());
        let mut meter = Metering::request(self.cfg, method, content, sinks, self.now());
        let outcome = {
            let mut op = match pin {
                Some(target) => OtherOp::<B, Sec, false>::pinned_request_as(
                    self.cfg, bufs, secrets, target, req,
                ),
                None => OtherOp::<B, Sec, false>::request_as(self.cfg, bufs, secrets, req),
            };
            self.metered(&mut op, &mut meter).await;
            (op.take_list_outcome(), op.spoke_modern())
        };
        meter.finish_request(outcome, (method, secrets), bufs, self.now())
    }
}

#[cfg(all(test, feature = "era-2026"))]
mod tests {
    //! The driver's op types are a matter of flash only: a slot whose calls run on its lists'
    //! op type (`LISTS` true) says and sends exactly what one whose calls cannot list does,
    //! and a list on that type (`list_tools_shared`) what `list_tools` does.
    use core::cell::{Cell, RefCell};
    use std::rc::Rc;
    use std::vec::Vec;

    use super::*;
    use crate::buf::SliceBuf;
    use crate::wire::era::EraSetting;
    use crate::wire::json::JsonLimits;

    /// A 2026-era server in memory: each request is answered by its method, each connection
    /// is new. Every request it is sent is kept.
    struct Script {
        seen: Rc<RefCell<Vec<Vec<u8>>>>,
        clock: Cell<Millis>,
    }

    struct Conn {
        seen: Rc<RefCell<Vec<Vec<u8>>>>,
        out: Vec<u8>,
        reply: Vec<u8>,
        at: usize,
    }

    fn framed(body: &str) -> Vec<u8> {
        std::format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    impl Conn {
        fn answer(&self, request: &[u8]) -> Vec<u8> {
            self.seen.borrow_mut().push(request.to_vec());
            let at = request.windows(4).position(|w| w == b"\r\n\r\n");
            let body = at.and_then(|i| request.get(i + 4..)).unwrap_or(&[]);
            let v = Value::parse(body, JsonLimits::default()).ok();
            let id = v.and_then(|v| v.get("id")).and_then(|i| i.as_u64());
            let method = v.and_then(|v| v.get_str("method"));
            let is = |m: &str| method.is_some_and(|s| s.eq_str(m));
            let id = id.unwrap_or(0);
            if is("tools/list") {
                framed(&std::format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo","inputSchema":{{"type":"object"}}}},{{"name":"t\u0041","inputSchema":{{"type":"object"}}}}],"resultType":"complete"}}}}"#
                ))
            } else if is("tools/call") {
                framed(&std::format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"hello, key hunter2"}}],"isError":false,"resultType":"complete"}}}}"#
                ))
            } else {
                b"HTTP/1.1 405 No\r\ncontent-length: 0\r\n\r\n".to_vec()
            }
        }
    }

    impl embedded_io_async::ErrorType for Conn {
        type Error = embedded_io_async::ErrorKind;
    }

    impl embedded_io_async::Write for Conn {
        async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
            self.out.extend_from_slice(buf);
            Ok(buf.len())
        }
        async fn flush(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    impl embedded_io_async::Read for Conn {
        async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
            if self.at == self.reply.len() && !self.out.is_empty() {
                let out = core::mem::take(&mut self.out);
                self.reply = self.answer(&out);
                self.at = 0;
            }
            let rest = self.reply.get(self.at..).unwrap_or(&[]);
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.at += n;
            Ok(n)
        }
    }

    impl Net for Script {
        type Conn = Conn;
        async fn connect(
            &self,
            _: &Endpoint<'_>,
            _: bool,
        ) -> Result<(Self::Conn, bool), ConnectError> {
            let conn = Conn {
                seen: self.seen.clone(),
                out: Vec::new(),
                reply: Vec::new(),
                at: 0,
            };
            Ok((conn, false))
        }
        fn recycle(&self, _: &Endpoint<'_>, _: Self::Conn) {}
        fn now(&self) -> Millis {
            self.clock.get()
        }
        async fn sleep_until(&self, at: Millis) {
            self.clock.set(self.clock.get().max(at));
        }
        async fn respond(&self, _: &Endpoint<'_>, _: &[u8]) {}
    }

    /// What one slot's list, call and close came to: the names listed, the call's result
    /// (ok, text, error), the ledger's records, the timeline's events and the bytes sent.
    type Seen = (
        Vec<std::string::String>,
        (bool, std::string::String, Option<std::string::String>),
        Vec<LedgerRecord>,
        usize,
        Vec<Vec<u8>>,
    );

    struct Records(Vec<LedgerRecord>);
    impl Ledger for Records {
        fn record(&mut self, r: LedgerRecord) {
            self.0.push(r);
        }
    }
    struct Events(usize);
    impl Timeline for Events {
        fn emit(&mut self, _: &TimelineEvent<'_>) {
            self.0 += 1;
        }
    }

    /// Lists, calls `echo` and closes through a fresh slot, its calls on the op type `LISTS`
    /// says.
    fn run<const LISTS: bool>() -> Seen {
        let script = Script {
            seen: Rc::new(RefCell::new(Vec::new())),
            clock: Cell::new(1_000),
        };
        let Ok(primary) = Endpoint::parse_base("http://127.0.0.1:8000") else {
            unreachable!("a valid endpoint")
        };
        let mut cfg = SlotConfig::new("s", primary, "box");
        cfg.era = EraSetting::Modern;
        let state = RefCell::new(SlotState::new(cfg.version, false));
        let driver = Driver::new(&script, &cfg, |f: &mut dyn FnMut(&mut SlotState)| {
            f(&mut state.borrow_mut())
        });
        let (mut head, mut read) = ([0u8; 2048], [0u8; 512]);
        let mut storage = [[0u8; 4096]; 5];
        let [request, reply, text, error, raw] = &mut storage;
        let mut bufs = CallBuffers {
            request: SliceBuf::new(request),
            head: &mut head,
            read: &mut read,
            reply: SliceBuf::new(reply),
            text: SliceBuf::new(text),
            error: SliceBuf::new(error),
            raw: SliceBuf::new(raw),
        };
        let secrets = ["hunter2"];
        let mut names = Vec::new();
        let listed =
            embassy_futures::block_on(driver.list_tools_shared(&secrets, &mut bufs, |n| {
                names.push(std::string::String::from(n))
            }));
        assert!(listed.is_ok(), "{listed:?}");
        // The generic list says the same, and asks the same.
        let mut again = Vec::new();
        let listed = embassy_futures::block_on(driver.list_tools(&secrets, &mut bufs, |n| {
            again.push(std::string::String::from(n))
        }));
        assert!(listed.is_ok(), "{listed:?}");
        assert_eq!(again, names);
        let seen = script.seen.borrow().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].len(), seen[1].len());
        script.seen.borrow_mut().truncate(1);
        let (mut ledger, mut timeline) = (Records(Vec::new()), Events(0));
        let how = (Waits, &secrets[..]);
        let (result, started) =
            embassy_futures::block_on(driver.tool_call_on::<LISTS, _, _, _, _, _>(
                ("echo", None),
                how,
                (&mut ledger, &mut timeline),
                &mut bufs,
            ));
        assert!(started.is_none());
        let result = (
            result.ok(),
            std::string::String::from(result.text),
            result.error().map(std::string::String::from),
        );
        embassy_futures::block_on(driver.close_on::<LISTS, _>(&mut bufs));
        let sent = script.seen.borrow().clone();
        (names, result, ledger.0, timeline.0, sent)
    }

    #[test]
    fn a_slot_whose_calls_run_on_its_lists_op_type_does_exactly_what_the_other_does() {
        let calls_only = run::<false>();
        let listing = run::<true>();
        assert_eq!(calls_only.0, ["echo", "tA"]);
        assert_eq!(calls_only.1, (true, "hello, key [REDACTED]".into(), None));
        assert_eq!(calls_only.2.len(), 1, "{:?}", calls_only.2);
        // The list, the call's own list of its tools' annotations, then the call.
        let methods: Vec<bool> = calls_only
            .4
            .iter()
            .map(|r| r.windows(10).any(|w| w == b"tools/call"))
            .collect();
        assert_eq!(methods, [false, false, true]);
        assert_eq!(listing.0, calls_only.0);
        assert_eq!(listing.1, calls_only.1);
        assert_eq!(listing.2, calls_only.2);
        assert_eq!(listing.3, calls_only.3);
        assert_eq!(listing.4, calls_only.4);
    }
}
