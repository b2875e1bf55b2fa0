//! One operation of a slot as states: [`Op`], what it asks its adapter to do ([`Action`]) and
//! what an attempt on one server came to ([`Report`]).

use heapless::String;

use super::config::{CallBuffers, MAX_INPUT_ROUNDS, SlotConfig};
use super::handlers::{
    Accept, CallHandler, InitHandler, ListHandler, Modern, ProbeHandler, RequestHandler, Trip,
};
use super::{
    CANCEL_DROPPED, CANCEL_TIMED_OUT, Deadline, LISTEN_MS, MAX_PAGES, MAX_RESUMES, MAX_TAIL_BYTES,
    Millis, SlotState, TAIL_MS,
};
use crate::buf::Buf;
use crate::harness::failover::{AttemptOutcome, Target};
use crate::wire::era::{self, EraSetting, Verdict as EraVerdict};
use crate::wire::exchange::{Exchange, Expect, OnMessage, Step, Verdict};
use crate::wire::failure::{Broken, ConnectError, Failure, truncated};
use crate::wire::http::Method;
use crate::wire::http::Stage as ReadStage;
use crate::wire::json::{Kind, Value};
use crate::wire::jsonrpc::{self, ListMethod, ProtocolVersion};
use crate::wire::session::{Begin, Phase, Snapshot};
use crate::wire::sse::MAX_EVENT_ID;

pub use super::event::Event;
pub use super::handlers::Answer;

/// What the adapter does next for an op. After each, it tells the op how it went (or, when
/// the op's [`timeout`](Op::timeout) passed first, calls [`Op::handle_timeout`]) and polls
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open a connection to `target`'s server (TLS for `https`, SNI = its host), or take a
    /// pooled kept-alive one unless `fresh`; then [`Op::handle_connected`] or
    /// [`Op::handle_connect_failed`]. Any connection the adapter still holds for this op is
    /// dropped first.
    Connect {
        /// Which server of the slot.
        target: Target,
        /// A pooled connection must not be used (this is a retry after a stale one).
        fresh: bool,
    },
    /// Write all of [`Op::transmit`] on the connection; then [`Op::handle_sent`].
    Transmit,
    /// Read once into [`Op::read_buf`]; then [`Op::handle_read`] (0: the peer closed) or
    /// [`Op::handle_read_failed`].
    Receive,
    /// The response ended cleanly: give the connection back to the pool of its server.
    Recycle,
    /// Drop the connection (if one is open).
    Close,
    /// Nothing to do until [`Op::timeout`]; with `slot`, also look again as soon as the slot
    /// changed ([`SlotState::take_changed`] was true). Then poll again.
    Sleep {
        /// Wake on a change of the slot (another op's handshake ended).
        slot: bool,
    },
    /// One server's attempt ended: [`Op::report`] says how (for metering and events). Poll
    /// again.
    Report,
    /// Answer a request the server sent on the call's stream: POST [`Op::transmit`] to
    /// `target` on a fresh connection (best effort, about a second; its reply is not read
    /// beyond its status), keeping the call's own connection; then poll again.
    Respond {
        /// Which server of the slot.
        target: Target,
    },
    /// The response's answer is in but its stream has not ended within the tail read (a
    /// server that ends a reply stream late): hand the connection with [`Op::take_tail`] to
    /// a drainer that keeps it if the stream ends soon after (best effort; drop it otherwise).
    /// Poll again.
    Park,
    /// A 2025-era call is about to be sent in a session: the server may send its requests
    /// (an elicitation, `ping`) on the session's standalone GET stream instead of the call's
    /// own, so have that stream open (see [`crate::machine::listen`]), waiting for it at most
    /// until [`Op::timeout`]; an adapter that cannot listen does nothing. Poll again.
    Listen {
        /// Which server of the slot.
        target: Target,
    },
    /// The call became a task ([`Op::task_id`]) and polls it from now on: tell the timeline
    /// (once; a detached call says so when it ends). Poll again.
    TaskStarted,
    /// The op has ended; its answer is in its buffers ([`Op::outcome`]). Nothing more comes.
    Done,
}

/// How one server's attempt ended, for the adapter's ledger and timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// The server tried.
    pub target: Target,
    /// What the attempt came to.
    pub outcome: AttemptOutcome,
    /// The last attempt: the op's outcome is this attempt's.
    pub last: bool,
    /// Emit `mcp.fallback_used` now.
    pub fallback_used: bool,
    /// Emit `mcp.no_healthy_tool` now.
    pub no_healthy_tool: bool,
}

/// What an op does, with its reply handler. One lives per op, in its caller's storage (no
/// allocator to box the larger variants into), so the size difference costs nothing twice.
#[allow(clippy::large_enum_variant)]
enum Job<'o, B: Buf, Sec: AsRef<[u8]>, F: FnMut(Option<(Value<'_>, &[u8])>)> {
    Call {
        handler: CallHandler<'o, B, Sec>,
        tool: &'o str,
        args: Option<Value<'o>>,
    },
    List {
        handler: ListHandler<'o, F, B, Sec>,
        /// Hashes of the cursor sent and of the one before (a server that repeats one is
        /// paging without end).
        cursor: u64,
        previous: u64,
        pages: u32,
    },
    Request(RequestHandler<'o, B, Sec>),
    /// `DELETE` each open session; the next server to look at.
    Close(Option<Target>),
    /// `notifications/cancelled` for the call with this id.
    Cancel(u64),
}

/// Why a round trip runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// `server/discover`: which era the server speaks (the 2026 era's handshake).
    Probe {
        attempt: u32,
    },
    /// `tools/list` pages read for `x-mcp-header` annotations before a 2026 `tools/call`.
    HeaderList,
    /// `tasks/get` of the task the call became.
    TaskGet,
    /// `tasks/cancel` at the deadline (best effort; the call's failure is kept).
    TaskCancel,
    /// `tasks/update` with the answers to an `input_required` task's requests (then a poll).
    TaskUpdate,
    /// `tasks/result` of an ended task (the 2025-11-25 form: its result is not inline).
    TaskResult,
    Initialize {
        attempt: u32,
    },
    Initialized {
        attempt: u32,
    },
    Main,
    Resume,
    /// `notifications/cancelled` after a timeout (the attempt's failure is kept).
    Cancel,
    /// A courtesy request that is the whole op (close, a dropped call's cancel).
    Courtesy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The op's first poll: count the call and pick the first server.
    Start,
    /// A new attempt on `target`: a fresh deadline.
    Attempt,
    /// The session of `target` must be ready (handshake, join one, or use it).
    Ready,
    /// Another op runs the handshake `attempt`.
    Waiting {
        attempt: u32,
    },
    /// Another op lists the server's tools for their annotations (2026 era).
    WaitList,
    /// A task's request other than `tasks/get` (`tasks/update`, `tasks/result`,
    /// `tasks/cancel`): sent next, under an id of its own.
    TaskSend(Purpose),
    /// The call became a task: the next `tasks/get` at `at`.
    TaskWait {
        at: Millis,
    },
    /// A round trip; `Op::wire` says where it is.
    Trip(Purpose),
    /// Waiting for a `retry-after` time, then the request again.
    RetryWait {
        at: Millis,
    },
    /// Waiting for the server's `retry` time, then the GET that resumes the reply.
    ResumeWait {
        at: Millis,
    },
    /// The attempt ended (`Op::failure` or the handler's answer): failover decides.
    AttemptEnded,
    /// The report is out; the next attempt, or done.
    Next(Option<Target>),
    Done,
}

/// Where a round trip is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Connect {
        fresh: bool,
    },
    Write {
        retry_fresh: bool,
    },
    Read {
        retry_fresh: bool,
        last_byte: Millis,
    },
    Tail {
        until: Millis,
        bytes: usize,
    },
    /// The connection is released (recycled or closed); then the result is delivered.
    Release {
        recycle: bool,
    },
    Idle,
}

/// How a round trip ended (a failure is kept in `Op::failure`, unless the trip is a
/// courtesy whose outcome changes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TripEnd {
    /// The response is in (or the notification was accepted).
    Done,
    /// The reply ended without the response (`Op::resume` says where it can go on).
    Ended,
    Failed,
}

/// The JSON-RPC error code of an error body, if it is one.
fn error_code(body: &[u8]) -> Option<i64> {
    let v = Value::parse(body, crate::wire::json::JsonLimits::default()).ok()?;
    v.get("error")?.get("code")?.as_i64()
}

/// The shortest wait between two `tasks/get` (a `pollIntervalMs` of 0 must not spin).
const TASK_POLL_FLOOR_MS: Millis = 20;
/// `tasks/get` failures in a row after which the task's server is taken as lost.
const MAX_TASK_POLL_FAILURES: u32 = 3;

/// FNV-1a, 64 bits: a list remembers its last cursors by hash, not by copy.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The list callback type of ops that are not lists.
type NoItems = fn(Option<(Value<'_>, &[u8])>);

/// One operation of a slot, as a state machine over the caller's buffers (see the module
/// docs). Its outcome, when [`Action::Done`] comes, is [`Op::outcome`] and what its handler
/// wrote into the buffers.
pub struct Op<'o, B: Buf, Sec: AsRef<[u8]>, F: FnMut(Option<(Value<'_>, &[u8])>) = NoItems> {
    cfg: &'o SlotConfig<'o>,
    request: &'o mut B,
    read: &'o mut [u8],
    reply: &'o mut B,
    head: Option<&'o mut [u8]>,
    exchange: Option<Exchange<'o>>,
    job: Job<'o, B, Sec, F>,
    init: InitHandler,
    stage: Stage,
    wire: Wire,
    target: Target,
    deadline: Deadline,
    /// A best-effort request's own deadline, while one runs.
    courtesy: Option<Deadline>,
    snap: Option<Snapshot>,
    /// The main request's id.
    id: u64,
    progress_seen: u32,
    retried_404: bool,
    retried_later: bool,
    resumes: u32,
    resume: Option<(String<MAX_EVENT_ID>, Option<u32>)>,
    trip: Option<TripEnd>,
    failure: Option<Failure>,
    report: Option<Report>,
    attempts: u32,
    timeout: Millis,
    /// What the current round trip's reply must be, and whether it carried a session id.
    expect: Expect,
    sent_session_id: bool,
    probe: ProbeHandler,
    reprobed: bool,
    relisted: bool,
    list_pages: u32,
    /// `tasks/get` polls sent, and failed in a row.
    task_polls: u32,
    task_failures: u32,
    /// What a call does with a task: wait for its end, hand it back, or attach to one.
    tasking: Tasking,
    /// `input_required` rounds answered (2026 era).
    input_rounds: u32,
    /// An idempotent tool's call was sent again after a broken stream (once).
    resent: bool,
    /// The server was probed again after an answer from the other era (once).
    era_reprobed: bool,
    /// The attempt's `tools/call` was written (a timeout then says the tool may be running).
    call_sent: bool,
    /// The 2026-era version the op's requests carry: the newest both sides speak.
    modern_version: &'static str,
    /// A request was sent once more after a `-32022` (the next one fails the op).
    version_retried: bool,
    /// The call just became a task: [`Action::TaskStarted`] is due.
    task_news: bool,
    /// The framing left of a reply stream that did not end in the tail read (for
    /// [`Action::Park`]).
    tail: Option<crate::wire::exchange::TailDrain>,
    /// [`Action::Listen`] is due before the call's request.
    listen_news: bool,
    /// Events not yet taken by [`Op::poll_event`] (`NEWS_*` bits).
    news: u8,
}

/// [`Op::poll_event`] owes an [`Event::Attempt`].
const NEWS_REPORT: u8 = 1;
/// [`Op::poll_event`] owes an [`Event::TaskStarted`].
const NEWS_TASK: u8 = 2;

/// What a call does with a task (the tasks extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tasking {
    /// Polls the task the call becomes until it ends (the default: a task is transparent).
    Wait,
    /// Ends as soon as the call is a task, handing its id back ([`Op::detached`]).
    Detach,
    /// Polls a task an earlier call became ([`Op::attach`]); sends no `tools/call`. Also a
    /// task's request ([`Op::pinned_request`]): to the task's server alone.
    Attach,
}

impl<'o, B: Buf, Sec: AsRef<[u8]>> Op<'o, B, Sec> {
    /// A `tools/call` of `tool` with `args` (a JSON object, or none). `secrets` are the run's
    /// redaction set (the slot's header values included).
    pub fn call(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        tool: &'o str,
        args: Option<Value<'o>>,
    ) -> Self {
        let (wire, text, error, raw) = split(bufs);
        let handler = CallHandler::new(secrets, text, error, cfg.keep_raw.then_some(raw), cfg);
        Op::new(
            cfg,
            wire,
            Job::Call {
                handler,
                tool,
                args,
            },
        )
    }

    /// A call that ends as soon as its server makes it a task (the tasks extension), handing
    /// back the task's id ([`Op::task_id`], with [`Op::detached_task`] true) for a later
    /// [`Op::attach`]. A server that answers at once gives the result as any call does.
    pub fn detached(mut self) -> Self {
        self.tasking = Tasking::Detach;
        self
    }

    /// Follows the task `task` on `target` (made by an earlier call of `tool`, e.g. a
    /// [`detached`](Op::detached) one, maybe in another run) to its end, as a call does: the
    /// result flattened and redacted, a deadline that cancels it. Sends no `tools/call`, never
    /// fails over (a task lives on its server), and needs a 2026-07-28 server.
    pub fn attach(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        (target, tool): (Target, &'o str),
        task: &str,
    ) -> Self {
        let mut op = Op::call(cfg, bufs, secrets, tool, None);
        op.tasking = Tasking::Attach;
        op.target = target;
        if let Job::Call { handler, .. } = &mut op.job {
            handler.attach(task);
        }
        op
    }

    /// A request to `target` alone, with no failover: a task's (`tasks/get`, `tasks/cancel`),
    /// which lives on its server.
    pub fn pinned_request(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        target: Target,
        req: jsonrpc::Request<'o>,
    ) -> Self {
        let mut op = Op::request(cfg, bufs, secrets, req);
        op.tasking = Tasking::Attach;
        op.target = target;
        op
    }

    /// A request other than `tools/call` and the lists (`resources/read`, `prompts/get`,
    /// `ping`): its whole result, redacted, goes to `bufs.text`.
    pub fn request(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        req: jsonrpc::Request<'o>,
    ) -> Self {
        let (wire, text, _, _) = split(bufs);
        Op::new(
            cfg,
            wire,
            Job::Request(RequestHandler::new(req, secrets, text)),
        )
    }

    /// The slot's close: `DELETE` for each open session (best effort), every session forgotten.
    pub fn close(cfg: &'o SlotConfig<'o>, bufs: &'o mut CallBuffers<'_, B>) -> Self {
        let (wire, _, _, _) = split(bufs);
        Op::new(cfg, wire, Job::Close(Some(Target::Primary)))
    }

    /// `notifications/cancelled` for the `tools/call` with `id` on `target` (its caller went
    /// away), best effort, in the server's session; nothing when the server is dead or has no
    /// session.
    pub fn cancel(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        (target, id): (Target, u64),
    ) -> Self {
        let (wire, _, _, _) = split(bufs);
        let mut op = Op::new(cfg, wire, Job::Cancel(id));
        op.target = target;
        op
    }
}

impl<'o, B, Sec, F> Op<'o, B, Sec, F>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// A list (`tools/list`, `resources/list`, …) across pages; each item with its redacted
    /// JSON to `on_item`, and `None` when a failed server's items must be forgotten (the list
    /// starts again on the fallback).
    pub fn list(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        list: ListMethod,
        on_item: F,
    ) -> Self {
        let (wire, text, cursor, _) = split(bufs);
        Op::new(
            cfg,
            wire,
            Job::List {
                handler: ListHandler::new(list, on_item, text, cursor, secrets),
                cursor: fnv1a(b""),
                previous: fnv1a(b""),
                pages: 0,
            },
        )
    }

    fn new(cfg: &'o SlotConfig<'o>, wire: WireBufs<'o, B>, job: Job<'o, B, Sec, F>) -> Self {
        Op {
            cfg,
            request: wire.request,
            read: wire.read,
            reply: wire.reply,
            head: Some(wire.head),
            exchange: None,
            job,
            init: InitHandler::default(),
            stage: Stage::Start,
            wire: Wire::Idle,
            target: Target::Primary,
            deadline: Deadline::new(0, cfg),
            courtesy: None,
            snap: None,
            id: 0,
            progress_seen: 0,
            retried_404: false,
            retried_later: false,
            resumes: 0,
            resume: None,
            trip: None,
            failure: None,
            report: None,
            attempts: 0,
            timeout: 0,
            expect: Expect::Response,
            sent_session_id: false,
            probe: ProbeHandler::default(),
            reprobed: false,
            relisted: false,
            list_pages: 0,
            task_polls: 0,
            task_failures: 0,
            tasking: Tasking::Wait,
            input_rounds: 0,
            resent: false,
            era_reprobed: false,
            modern_version: era::MODERN_VERSION,
            version_retried: false,
            call_sent: false,
            task_news: false,
            news: 0,
            tail: None,
            listen_news: false,
        }
    }
}

/// The buffers of the wire side of an op.
struct WireBufs<'o, B> {
    request: &'o mut B,
    head: &'o mut [u8],
    read: &'o mut [u8],
    reply: &'o mut B,
}

/// Lends an op the caller's buffers: the wire side, then text, error and raw.
fn split<'o, B: Buf>(
    bufs: &'o mut CallBuffers<'_, B>,
) -> (WireBufs<'o, B>, &'o mut B, &'o mut B, &'o mut B) {
    (
        WireBufs {
            request: &mut bufs.request,
            head: &mut *bufs.head,
            read: &mut *bufs.read,
            reply: &mut bufs.reply,
        },
        &mut bufs.text,
        &mut bufs.error,
        &mut bufs.raw,
    )
}

/// A re-sent request's id: its first id with this bit flipped, so it differs from every id
/// the slot hands out (they count up from 1) and stays below 2^53 (JavaScript servers read ids
/// as doubles).
const RESENT_ID_BIT: u64 = 1 << 52;

impl<'o, B, Sec, F> Op<'o, B, Sec, F>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// By when the current action must have completed; when it has not, the adapter calls
    /// [`handle_timeout`](Self::handle_timeout). For [`Action::Sleep`], when to poll again.
    pub fn timeout(&self) -> Millis {
        self.timeout
    }

    /// The bytes to write for [`Action::Transmit`] (head and body, sent in one write).
    pub fn transmit(&self) -> &[u8] {
        self.request.bytes()
    }

    /// Where [`Action::Receive`] reads to.
    pub fn read_buf(&mut self) -> &mut [u8] {
        self.read
    }

    /// The server the current round trip is with (the one to connect to, or whose pool takes
    /// a recycled connection).
    pub fn target(&self) -> Target {
        self.target
    }

    /// How the last attempt ended, after [`Action::Report`].
    pub fn report(&self) -> Option<Report> {
        self.report
    }

    /// What happened since the last call, once each, for the adapter to forward to its ledger
    /// and timeline (see [`Event`]): call it after each [`Op::poll`] until it says `None`.
    /// The slot's own news ([`SlotState::poll_event`]) comes from the slot.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        if self.news & NEWS_REPORT != 0 {
            self.news &= !NEWS_REPORT;
            if let Some(report) = self.report {
                let text_len = self.text_len();
                return Some(Event::Attempt { report, text_len });
            }
        }
        if self.news & NEWS_TASK != 0 {
            self.news &= !NEWS_TASK;
            if let Some(task) = self.task_id() {
                return Some(Event::TaskStarted { task });
            }
        }
        None
    }

    /// The last attempt's failure, once the op is done: `None` when a server answered (a
    /// refusal or a tool error is an answer).
    pub fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    /// `Ok` when a server answered (the answer is in the buffers), else the last failure.
    pub fn outcome(&self) -> Result<(), &Failure> {
        self.failure.as_ref().map_or(Ok(()), Err)
    }

    /// A tool call's answer, when a server answered it.
    pub fn answer(&self) -> Option<Answer> {
        match &self.job {
            Job::Call { handler, .. } if self.failure.is_none() => match handler.answer {
                Some(Ok(a)) => Some(a),
                _ => None,
            },
            _ => None,
        }
    }

    /// A list's or a request's outcome: `Ok` when answered, the refusal or the failure.
    pub fn list_outcome(&self) -> Result<(), super::ListError> {
        if let Some(f) = &self.failure {
            return Err(super::ListError::Unreachable(f.clone()));
        }
        let answer = match &self.job {
            Job::List { handler, .. } => handler.answer.clone(),
            Job::Request(handler) => handler.answer.clone(),
            _ => Some(Ok(())),
        };
        answer.unwrap_or(Err(super::ListError::Unreachable(Failure::NoResponse)))
    }

    /// After [`Action::Park`]: the framing left of the reply stream, to feed what the
    /// connection still sends.
    pub fn take_tail(&mut self) -> Option<crate::wire::exchange::TailDrain> {
        self.tail.take()
    }

    /// True when the pending [`Action::Receive`] only reads the end of a reply's framing
    /// (the answer is in; the chunked terminator of an SSE reply often comes in a later
    /// segment). An adapter whose [`Net::park`](crate::drive::Net::park) keeps the connection
    /// and finishes that framing before its next request may [`leave_tail`](Self::leave_tail)
    /// instead of waiting for it here.
    pub fn reading_tail(&self) -> bool {
        matches!(self.stage, Stage::Trip(_)) && matches!(self.wire, Wire::Tail { .. })
    }

    /// Stops reading the end of the reply's framing ([`reading_tail`](Self::reading_tail)):
    /// the answer is handed back and the connection parked with what is left of its framing
    /// ([`Action::Park`]), as when the tail read times out.
    pub fn leave_tail(&mut self) {
        if self.reading_tail() {
            self.tail = self.exchange.as_ref().and_then(Exchange::take_tail);
            self.finish_trip(true);
        }
    }

    /// The task this call became (the tasks extension), if it did: its id.
    pub fn task_id(&self) -> Option<&str> {
        match &self.job {
            Job::Call { handler, .. } => handler.task.as_ref().map(|t| t.id.as_str()),
            _ => None,
        }
    }

    /// The call ended as a task that is still running (a [`detached`](Op::detached) call):
    /// [`Op::task_id`] is its id, to [`attach`](Op::attach) to later.
    pub fn detached_task(&self) -> bool {
        match &self.job {
            Job::Call { handler, .. } => {
                self.failure.is_none() && handler.answer.is_none() && handler.task.is_some()
            }
            _ => false,
        }
    }

    /// Where a call's task ended, for the timeline: `completed`, `failed`, `cancelled`,
    /// `timedOut`, `gone`, `lost`, `inputRequired` (or `ended` for another failure).
    pub fn task_end(&self) -> &'static str {
        use crate::wire::failure::TaskEnd;
        match (&self.failure, self.answer()) {
            (None, Some(Answer::Result { .. })) => "completed",
            (None, Some(Answer::Refused { .. })) => "failed",
            (Some(Failure::Task { end, .. }), _) => match end {
                TaskEnd::TimedOut => "timedOut",
                TaskEnd::Cancelled => "cancelled",
                TaskEnd::Gone => "gone",
                TaskEnd::Lost => "lost",
            },
            (Some(Failure::InputRequired(_)), _) => "inputRequired",
            _ => "ended",
        }
    }

    /// Bytes of the answer in `text` (for the ledger's evidence bytes).
    pub fn text_len(&self) -> usize {
        match &self.job {
            Job::Call { handler, .. } => handler.text.len(),
            Job::List { handler, .. } => handler.text.len(),
            Job::Request(handler) => handler.text.len(),
            _ => 0,
        }
    }

    /// What to do next, given the slot's state and the time. Takes the slot only here: an
    /// adapter holds its lock for this call alone.
    pub fn poll(&mut self, slot: &mut SlotState, now: Millis) -> Action {
        if let Job::Call { handler, .. } = &mut self.job
            && core::mem::take(&mut handler.tools_list_changed)
        {
            slot.tools_list_changed = true;
        }
        if let Job::List { handler, .. } = &mut self.job
            && handler.list == ListMethod::Tools
            && let Some(ttl) = handler.ttl_ms.take()
        {
            slot.tools_ttl_ms = Some(ttl);
        }
        loop {
            if core::mem::take(&mut self.task_news) {
                self.news |= NEWS_TASK;
                return Action::TaskStarted;
            }
            if core::mem::take(&mut self.listen_news) {
                self.timeout = now.saturating_add(LISTEN_MS).min(self.deadline.at);
                return Action::Listen {
                    target: self.target,
                };
            }
            if let Some(action) = self.step(slot, now) {
                return action;
            }
        }
    }

    fn active(&self) -> Deadline {
        self.courtesy.unwrap_or(self.deadline)
    }

    fn fail(&mut self, f: Failure) {
        self.failure = Some(f);
        self.stage = Stage::AttemptEnded;
    }

    fn is_call(&self) -> bool {
        matches!(self.job, Job::Call { .. })
    }

    fn step(&mut self, slot: &mut SlotState, now: Millis) -> Option<Action> {
        match self.stage {
            Stage::Start => {
                match self.job {
                    Job::Close(_) => self.close_next(slot, now),
                    Job::Cancel(id) => self.cancel_start(slot, now, id),
                    _ => {
                        if self.is_call() {
                            slot.calls = slot.calls.saturating_add(1);
                        }
                        // A task's server is the task's; the others start where failover says.
                        if self.tasking != Tasking::Attach {
                            self.target = slot.failover.first_target();
                        }
                        self.stage = Stage::Attempt;
                    }
                }
                None
            }
            Stage::Attempt => {
                self.begin_attempt(now);
                None
            }
            Stage::Ready => {
                self.ready(slot, now);
                None
            }
            Stage::Waiting { attempt } => self.waiting(slot, now, attempt),
            Stage::WaitList
                if slot.listed(self.target) || !slot.listing_elsewhere(self.target, now) =>
            {
                self.start_main(slot, now);
                None
            }
            Stage::WaitList if now >= self.deadline.at => {
                self.fail(Failure::TimedOut);
                None
            }
            Stage::WaitList => {
                self.timeout = self.deadline.at;
                Some(Action::Sleep { slot: true })
            }
            Stage::TaskSend(purpose) => {
                // Every request has an id of its own (never the last poll's).
                self.id = slot.next_id();
                let id = self.id;
                if let Job::Call { handler, .. } = &mut self.job {
                    handler.renumber(id);
                    // `tasks/update`'s empty answer is read as a poll's (no result in it).
                    handler.polling = purpose == Purpose::TaskUpdate;
                    handler.task_status = None;
                }
                self.start_trip(purpose, now);
                None
            }
            Stage::TaskWait { .. } if now >= self.deadline.at => {
                self.task_timed_out();
                None
            }
            Stage::TaskWait { at } if now < at => {
                self.timeout = at;
                Some(Action::Sleep { slot: false })
            }
            Stage::TaskWait { .. } => {
                self.id = slot.next_id();
                let id = self.id;
                if let Job::Call { handler, .. } = &mut self.job {
                    handler.renumber(id);
                    handler.polling = true;
                    handler.task_status = None;
                }
                self.task_polls += 1;
                self.start_trip(Purpose::TaskGet, now);
                None
            }
            Stage::Trip(purpose) => self.trip_step(slot, now, purpose),
            Stage::RetryWait { at } | Stage::ResumeWait { at } if now < at => {
                self.timeout = at;
                Some(Action::Sleep { slot: false })
            }
            Stage::RetryWait { .. } => {
                self.stage = Stage::Ready;
                None
            }
            Stage::ResumeWait { .. } => {
                self.start_trip(Purpose::Resume, now);
                None
            }
            Stage::AttemptEnded => Some(self.attempt_ended(slot)),
            Stage::Next(Some(t)) => {
                self.target = t;
                self.stage = Stage::Attempt;
                None
            }
            Stage::Next(None) | Stage::Done => {
                self.stage = Stage::Done;
                Some(Action::Done)
            }
        }
    }

    fn begin_attempt(&mut self, now: Millis) {
        self.attempts += 1;
        let restart = self.attempts > 1;
        self.deadline = Deadline::new(now, self.cfg);
        self.retried_404 = false;
        self.retried_later = false;
        self.call_sent = false;
        self.failure = None;
        self.report = None;
        self.stage = Stage::Ready;
        match &mut self.job {
            Job::Call { handler, args, .. } => {
                handler.begin_attempt();
                if args.is_some_and(|a| a.kind() != Kind::Object) {
                    self.fail(Failure::BadArguments);
                }
            }
            Job::List {
                handler,
                cursor,
                previous,
                pages,
            } => {
                if restart {
                    (handler.on_item)(None);
                }
                handler.answer = None;
                handler.cursor.clear();
                *cursor = fnv1a(b"");
                *previous = fnv1a(b"");
                *pages = 0;
            }
            Job::Request(handler) => {
                handler.text.clear();
                handler.answer = None;
            }
            Job::Close(_) | Job::Cancel(_) => {}
        }
    }

    fn ready(&mut self, slot: &mut SlotState, now: Millis) {
        let begin = slot.session_mut(self.target).map(|s| s.begin());
        match begin {
            None => self.fail(Failure::NoResponse),
            Some(Begin::Ready(snap)) => {
                self.snap = Some(snap);
                self.start_main(slot, now);
            }
            Some(Begin::Start { attempt }) => {
                self.snap = None;
                match (self.cfg.era, slot.era(self.target)) {
                    (EraSetting::Legacy, _) | (EraSetting::Auto, Some(false)) => {
                        self.start_initialize(slot, attempt, now)
                    }
                    (EraSetting::Modern, _) | (EraSetting::Auto, Some(true)) => {
                        self.modern_ready(slot, attempt, now)
                    }
                    (EraSetting::Auto, None) => {
                        self.probe.id = slot.next_id();
                        self.probe.modern = None;
                        self.start_trip(Purpose::Probe { attempt }, now);
                    }
                }
            }
            Some(Begin::Wait { attempt }) => self.stage = Stage::Waiting { attempt },
        }
    }

    fn waiting(&mut self, slot: &mut SlotState, now: Millis, attempt: u32) -> Option<Action> {
        let session = slot.session(self.target);
        match session.and_then(|s| s.outcome_of(attempt)) {
            Some(Ok(snap)) => {
                self.snap = Some(snap);
                self.start_main(slot, now);
                None
            }
            Some(Err(f)) => {
                self.fail(f);
                None
            }
            None if session.map(|s| s.phase()) == Some(&Phase::Initializing { attempt }) => {
                if now >= self.deadline.at {
                    self.fail(Failure::TimedOut);
                    return None;
                }
                self.timeout = self.deadline.at;
                Some(Action::Sleep { slot: true })
            }
            None => {
                self.stage = Stage::Ready;
                None
            }
        }
    }

    fn start_initialize(&mut self, slot: &mut SlotState, attempt: u32, now: Millis) {
        self.init.id = slot.next_id();
        self.init.version = None;
        self.snap = None;
        self.start_trip(Purpose::Initialize { attempt }, now);
    }

    /// The server speaks the 2026-07-28 era: no handshake, no session.
    fn modern_ready(&mut self, slot: &mut SlotState, attempt: u32, now: Millis) {
        let snap = Snapshot {
            session_id: None,
            version: ProtocolVersion::V2026_07_28,
        };
        if let Some(session) = slot.session_mut(self.target) {
            session.handshake_succeeded(attempt, None, snap.version);
        }
        slot.changed = true;
        self.snap = Some(snap);
        self.start_main(slot, now);
    }

    /// The op's last request went to its server in the 2026-07-28 era (its error codes are
    /// read by that era's numbering).
    pub fn spoke_modern(&self) -> bool {
        self.modern()
    }

    fn modern(&self) -> bool {
        self.snap.as_ref().is_some_and(|s| s.version.is_modern())
    }

    /// Before a 2026 `tools/call`: the server's tools are listed once per run for their
    /// `x-mcp-header` annotations, then the call carries its tool's.
    fn start_main(&mut self, slot: &mut SlotState, now: Millis) {
        let (modern, target) = (self.modern(), self.target);
        // A 2025-11-25 session with the tasks extension on: the server's list says which
        // tools run only as tasks (`execution.taskSupport: "required"`).
        let session_tasks = !modern
            && self.cfg.capabilities.tasks
            && self
                .snap
                .as_ref()
                .is_some_and(|s| s.version == ProtocolVersion::V2025_11_25);
        if let Job::Call { handler, .. } = &mut self.job {
            // The tasks extension is declared (and a task taken) in the 2026 era only.
            handler.tasks = modern && self.cfg.capabilities.tasks;
        }
        if self.tasking == Tasking::Attach && self.is_call() {
            return self.attached(now);
        }
        if let Job::Call { handler, tool, .. } = &mut self.job
            && (modern || session_tasks)
        {
            if !slot.listed(target) {
                // One list per server for concurrent calls: the others wait for it.
                if slot.listing_elsewhere(target, now) {
                    self.stage = Stage::WaitList;
                    return;
                }
                slot.set_listing(target, self.deadline.at);
                self.list_pages = 0;
                self.id = slot.next_id();
                handler.renumber(self.id);
                handler.listing = true;
                handler.list_page = None;
                handler.error.clear();
                // The list's cursor goes to `text`: a round's answers there are lost, and the
                // server asks again.
                handler.input_ready = false;
                handler.text.clear();
                self.start_trip(Purpose::HeaderList, now);
                return;
            }
            handler.listing = false;
            handler.error.clear();
            if !handler.input_ready {
                handler.text.clear();
            }
            if !modern {
                handler.session_task = slot.task_required(target, tool.as_bytes());
                return self.start_request(slot, now);
            }
            match slot.annotations_of(target, tool.as_bytes()) {
                Err(()) => return self.fail(Failure::ToolDropped),
                // Pairs that do not fit the error buffer are left out (the server then says
                // -32020 and the call is re-listed once).
                Ok(pairs) => {
                    let _ = handler.error.put(pairs);
                }
            }
        }
        self.start_request(slot, now);
    }

    /// An attached call polls its task from the start (tasks are a 2026-era extension).
    fn attached(&mut self, now: Millis) {
        if !self.modern() {
            return self.fail(Failure::NotModern);
        }
        if let (Some(w), Some(id)) = (self.cfg.in_flight, self.task_id()) {
            w.set_task(self.target, id);
        }
        self.task_polls = 0;
        self.task_failures = 0;
        self.stage = Stage::TaskWait { at: now };
    }

    fn start_request(&mut self, slot: &mut SlotState, now: Millis) {
        self.resumes = 0;
        // A 2025-era call in an HTTP session: the session's GET stream should be open.
        self.listen_news = self.is_call()
            && !self.modern()
            && !self.cfg.is_stdio(self.target)
            && self.snap.as_ref().is_some_and(|s| s.session_id.is_some());
        self.set_id(slot.next_id(), true);
        self.start_trip(Purpose::Main, now);
    }

    /// The op's request id from now on: its handler looks for the response to it, and a
    /// `tools/call` on the wire (`on_wire`) says so for an adapter that cancels dropped calls.
    fn set_id(&mut self, id: u64, on_wire: bool) {
        self.id = id;
        match &mut self.job {
            Job::Call { handler, .. } => {
                handler.renumber(id);
                if let Some(w) = self.cfg.in_flight.filter(|_| on_wire) {
                    w.set(self.target, id);
                }
            }
            Job::List { handler, .. } => handler.renumber(id),
            Job::Request(handler) => handler.renumber(id),
            Job::Close(_) | Job::Cancel(_) => {}
        }
    }

    fn start_trip(&mut self, purpose: Purpose, now: Millis) {
        self.stage = Stage::Trip(purpose);
        self.trip = None;
        self.courtesy = matches!(
            purpose,
            Purpose::Cancel | Purpose::Courtesy | Purpose::TaskCancel
        )
        .then(|| Deadline::courtesy(now));
        match self.write_request(purpose) {
            Ok(()) => self.wire = Wire::Connect { fresh: false },
            Err(f) => {
                self.trip_failed(f);
                self.wire = Wire::Idle;
            }
        }
    }

    /// Writes the request of `purpose` into the request buffer (head and body).
    fn write_request(&mut self, purpose: Purpose) -> Result<(), Failure> {
        use super::handlers::Body;
        let ep = self.cfg.endpoint(self.target).ok_or(Failure::NoResponse)?;
        let snap = self.snap.as_ref();
        let id = self.id;
        let trip = match purpose {
            Purpose::Probe { .. } => Trip::post(ep, None, Body::Discover { id: self.probe.id }),
            Purpose::HeaderList => Trip::post(
                ep,
                snap,
                match &self.job {
                    Job::Call { handler, .. } => Body::List {
                        id,
                        list: ListMethod::Tools,
                        cursor: (self.list_pages > 0)
                            .then(|| super::handlers::as_text(&*handler.text)),
                    },
                    _ => Body::None,
                },
            ),
            Purpose::TaskGet | Purpose::TaskCancel | Purpose::TaskUpdate | Purpose::TaskResult => {
                Trip::post(
                    ep,
                    snap,
                    match &self.job {
                        Job::Call { handler, .. } if let Some(task) = &handler.task => Body::Task {
                            id,
                            method: match purpose {
                                Purpose::TaskGet => "tasks/get",
                                Purpose::TaskUpdate => "tasks/update",
                                Purpose::TaskResult => "tasks/result",
                                _ => "tasks/cancel",
                            },
                            task: task.id.as_str(),
                            extra: if purpose == Purpose::TaskUpdate {
                                handler.text.bytes()
                            } else {
                                b""
                            },
                        },
                        _ => Body::None,
                    },
                )
            }
            Purpose::Initialize { .. } => Trip::post(
                ep,
                None,
                Body::Initialize {
                    id: self.init.id,
                    version: self.cfg.version,
                    elicitation: self.cfg.declared().elicitation,
                    elicitation_url: self.cfg.declared().elicitation_url,
                },
            ),
            Purpose::Initialized { .. } => Trip::post(ep, snap, Body::Initialized),
            Purpose::Main => Trip::post(
                ep,
                snap,
                match &self.job {
                    Job::Call {
                        handler,
                        tool,
                        args,
                    } => Body::ToolsCall {
                        id,
                        tool,
                        args: *args,
                        progress: handler.progress_token.then_some(id),
                        extra: if handler.input_ready {
                            handler.text.bytes()
                        } else if handler.session_task {
                            // The 2025-11-25 form: a task-required tool is called as a task.
                            b",\"task\":{}"
                        } else {
                            b""
                        },
                    },
                    Job::List { handler, pages, .. } => Body::List {
                        id,
                        list: handler.list,
                        cursor: (*pages > 0).then(|| super::handlers::as_text(&*handler.cursor)),
                    },
                    // The 2026 era has no `ping`: `server/discover` is its liveness check.
                    Job::Request(handler)
                        if handler.req == jsonrpc::Request::Ping
                            && snap.is_some_and(|s| s.version.is_modern()) =>
                    {
                        Body::Discover { id }
                    }
                    Job::Request(handler) => Body::request(id, handler.req),
                    Job::Close(_) | Job::Cancel(_) => Body::None,
                },
            ),
            Purpose::Resume => Trip {
                method: Method::Get,
                last_event_id: self.resume.as_ref().map(|(id, _)| id.as_str()),
                ..Trip::post(ep, snap, Body::None)
            },
            Purpose::Cancel => Trip::post(
                ep,
                snap,
                Body::Cancelled {
                    id,
                    reason: CANCEL_TIMED_OUT,
                },
            ),
            Purpose::Courtesy => match self.job {
                Job::Cancel(id) => Trip::post(
                    ep,
                    snap,
                    Body::Cancelled {
                        id,
                        reason: CANCEL_DROPPED,
                    },
                ),
                _ => Trip {
                    method: Method::Delete,
                    expect: Expect::Accepted,
                    ..Trip::post(ep, snap, Body::None)
                },
            },
        };
        let modern_era =
            matches!(purpose, Purpose::Probe { .. }) || snap.is_some_and(|s| s.version.is_modern());
        let modern = modern_era.then(|| match (&self.job, purpose) {
            (Job::Call { handler, args, .. }, Purpose::Main) => Modern {
                version: self.modern_version,
                caps: self.cfg.declared(),
                progress: handler.progress_token.then_some(id),
                log_level: self.cfg.on_log.map(|_| self.cfg.log_level),
                params: handler.error.bytes(),
                args: *args,
            },
            _ => Modern {
                version: self.modern_version,
                caps: self.cfg.declared(),
                progress: None,
                log_level: None,
                params: b"",
                args: None,
            },
        });
        // Every request carries the trace context, when there is one (SEP-414).
        let trace = self.cfg.trace.as_ref().and_then(|t| {
            let id = trip.body.request_id()?;
            Some(super::handlers::TraceMeta {
                parent: t.traceparent(id),
                state: t.state,
                progress: match trip.body {
                    Body::ToolsCall { progress, .. } if !modern_era => progress,
                    _ => None,
                },
            })
        });
        let trip = Trip {
            modern,
            trace,
            body: match trip.body {
                // In the 2026 era the progress token rides in `_meta` with the rest; so it
                // does in the old era beside the trace context (one `_meta`).
                Body::ToolsCall {
                    id,
                    tool,
                    args,
                    extra,
                    ..
                } if modern_era || trace.is_some() => Body::ToolsCall {
                    id,
                    tool,
                    args,
                    progress: None,
                    extra,
                },
                body => body,
            },
            ..trip
        };
        self.expect = trip.expect;
        self.sent_session_id = snap.is_some_and(|s| s.session_id.is_some())
            && !matches!(purpose, Purpose::Initialize { .. });
        if self.cfg.is_stdio(self.target) {
            return trip.write_line(self.request);
        }
        trip.write(self.request, self.cfg)
    }
}

impl<'o, B, Sec, F> Op<'o, B, Sec, F>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    fn trip_step(&mut self, slot: &mut SlotState, now: Millis, purpose: Purpose) -> Option<Action> {
        match self.wire {
            Wire::Connect { fresh } => {
                self.timeout = self.active().at;
                Some(Action::Connect {
                    target: self.target,
                    fresh,
                })
            }
            Wire::Write { .. } => {
                self.timeout = self.active().at;
                Some(Action::Transmit)
            }
            Wire::Read { last_byte, .. } => {
                if let Some(answer) = self.answer_server_request() {
                    return Some(answer);
                }
                self.timeout = self.read_until(last_byte).0;
                Some(Action::Receive)
            }
            Wire::Tail { until, .. } => {
                self.timeout = until;
                Some(Action::Receive)
            }
            Wire::Release { recycle } => {
                self.wire = Wire::Idle;
                Some(if recycle {
                    Action::Recycle
                } else if self.tail.is_some() {
                    Action::Park
                } else {
                    Action::Close
                })
            }
            Wire::Idle => {
                let courtesy = matches!(
                    purpose,
                    Purpose::Cancel | Purpose::Courtesy | Purpose::TaskCancel
                );
                let result = match self.trip.take() {
                    Some(TripEnd::Done) => Ok(true),
                    Some(TripEnd::Ended) => Ok(false),
                    // A courtesy's failure was never kept: the attempt's own stays.
                    _ if courtesy => Err(Failure::NoResponse),
                    _ => Err(self.failure.take().unwrap_or(Failure::NoResponse)),
                };
                self.trip_done(slot, now, purpose, result);
                None
            }
        }
    }

    /// A request from the server on an old-era call's stream gets its answer before the next
    /// read (the request buffer is free: a call that got reply bytes is never re-sent).
    fn answer_server_request(&mut self) -> Option<Action> {
        // (A stdio server's requests are answered by the adapter that reads its lines.)
        if self.modern() || self.cfg.is_stdio(self.target) {
            return None;
        }
        let Job::Call { handler, .. } = &mut self.job else {
            return None;
        };
        let request = handler.server_request.take()?;
        let ep = self.cfg.endpoint(self.target)?;
        let trip = Trip::post(
            ep,
            self.snap.as_ref(),
            super::handlers::Body::Answer(&request, handler.text.bytes()),
        );
        trip.write(self.request, self.cfg).ok()?;
        Some(Action::Respond {
            target: self.target,
        })
    }

    /// When a read must have returned: the deadline, or earlier the stall time; and whether
    /// that is the stall time.
    fn read_until(&self, last_byte: Millis) -> (Millis, bool) {
        let deadline = self.active().at;
        match self.cfg.idle_timeout_ms {
            Some(ms) if last_byte.saturating_add(ms) < deadline => {
                (last_byte.saturating_add(ms), true)
            }
            _ => (deadline, false),
        }
    }

    /// A connection is open; `reused`: it came from the pool.
    pub fn handle_connected(&mut self, reused: bool) {
        if let (Stage::Trip(_), Wire::Connect { fresh }) = (self.stage, self.wire) {
            self.wire = Wire::Write {
                retry_fresh: reused && !fresh,
            };
        }
    }

    /// The connection could not be opened.
    pub fn handle_connect_failed(&mut self, error: ConnectError) {
        if let (Stage::Trip(_), Wire::Connect { .. }) = (self.stage, self.wire) {
            self.end_trip(Failure::Connect(error));
        }
    }

    /// The request was written (`ok`) or writing it failed.
    pub fn handle_sent(&mut self, now: Millis, ok: bool) {
        let (Stage::Trip(_), Wire::Write { retry_fresh }) = (self.stage, self.wire) else {
            return;
        };
        if !ok {
            if retry_fresh {
                self.retry_on_fresh();
            } else {
                self.end_trip(Failure::SendFailed);
            }
            return;
        }
        if matches!(self.stage, Stage::Trip(Purpose::Main)) && self.is_call() {
            self.call_sent = true;
        }
        self.reply.clear();
        let Some(head) = self.head.take() else {
            self.end_trip(Failure::NoResponse);
            return;
        };
        let stdio = self.cfg.is_stdio(self.target);
        self.exchange = Some(if stdio {
            Exchange::lines(head, self.expect, self.cfg.limits)
        } else {
            Exchange::new(head, self.expect, self.sent_session_id, self.cfg.limits)
        });
        if stdio && self.expect == Expect::Accepted {
            // A notification over stdio has no reply: it is done once written.
            return self.finish_trip(true);
        }
        self.progress_seen = self.current_progress();
        self.wire = Wire::Read {
            retry_fresh,
            last_byte: now,
        };
    }

    fn current_progress(&self) -> u32 {
        match (&self.job, self.stage) {
            (Job::Call { handler, .. }, Stage::Trip(Purpose::Main | Purpose::Resume)) => {
                handler.progress_seen()
            }
            _ => 0,
        }
    }

    /// `n` bytes were read into [`read_buf`](Self::read_buf); 0: the peer closed.
    pub fn handle_read(&mut self, now: Millis, n: usize) {
        let Stage::Trip(purpose) = self.stage else {
            return;
        };
        match self.wire {
            Wire::Read { retry_fresh, .. } => {
                let Some(mut exchange) = self.exchange.take() else {
                    return self.end_trip(Failure::NoResponse);
                };
                if n == 0
                    && let Some(early) = self.ended_early(&exchange, retry_fresh, purpose)
                {
                    self.exchange = Some(exchange);
                    return self.apply_early(early);
                }
                let mut accept = Accept;
                let handler: &mut dyn OnMessage = match purpose {
                    Purpose::Initialize { .. } => &mut self.init,
                    Purpose::Probe { .. } => &mut self.probe,
                    Purpose::Main
                    | Purpose::Resume
                    | Purpose::HeaderList
                    | Purpose::TaskGet
                    | Purpose::TaskUpdate
                    | Purpose::TaskResult => match &mut self.job {
                        Job::Call { handler, .. } => handler,
                        Job::List { handler, .. } => handler,
                        Job::Request(handler) => handler,
                        Job::Close(_) | Job::Cancel(_) => &mut accept,
                    },
                    _ => &mut accept,
                };
                let step = if n == 0 {
                    exchange.finish(self.reply, handler)
                } else {
                    let bytes = self.read.get(..n).unwrap_or(&[]);
                    exchange
                        .feed(bytes, self.reply, handler)
                        .map(|(_, step)| step)
                };
                let progress = handler.progress_seen();
                self.exchange = Some(exchange);
                match step {
                    Err(f) => self.end_trip(f),
                    Ok(step) => {
                        if progress != self.progress_seen {
                            self.progress_seen = progress;
                            self.deadline.extend(now);
                        }
                        match step {
                            Step::NeedMore if n > 0 => {
                                self.wire = Wire::Read {
                                    retry_fresh,
                                    last_byte: now,
                                }
                            }
                            Step::Done
                                if self.exchange.as_ref().is_some_and(Exchange::awaits_end) =>
                            {
                                self.wire = Wire::Tail {
                                    until: now.saturating_add(TAIL_MS).min(self.active().at),
                                    bytes: 0,
                                }
                            }
                            step => self.finish_trip(step == Step::Done),
                        }
                    }
                }
            }
            Wire::Tail { until, bytes } => {
                let bytes = bytes.saturating_add(n);
                let more = n > 0
                    && match self.exchange.as_mut() {
                        Some(x) => {
                            x.drain_tail(self.read.get(..n).unwrap_or(&[]));
                            x.awaits_end()
                        }
                        None => false,
                    };
                if more && bytes < MAX_TAIL_BYTES {
                    self.wire = Wire::Tail { until, bytes };
                } else {
                    self.finish_trip(true);
                }
            }
            _ => {}
        }
    }

    /// Reading failed (a reset, an I/O error).
    pub fn handle_read_failed(&mut self) {
        let Stage::Trip(purpose) = self.stage else {
            return;
        };
        match self.wire {
            Wire::Read { retry_fresh, .. } => {
                let early = self
                    .exchange
                    .as_ref()
                    .and_then(|x| self.ended_early(x, retry_fresh, purpose));
                match early {
                    Some(early) => self.apply_early(early),
                    None => self.end_trip(Failure::ReadFailed),
                }
            }
            Wire::Tail { .. } => self.finish_trip(true),
            _ => {}
        }
    }

    /// The current action's [`timeout`](Self::timeout) passed before it completed (the
    /// adapter gave up on it; a connection in use is dropped with the next action).
    pub fn handle_timeout(&mut self, _now: Millis) {
        if !matches!(self.stage, Stage::Trip(_)) {
            return;
        }
        match self.wire {
            Wire::Connect { .. } | Wire::Write { .. } => self.end_trip(Failure::TimedOut),
            Wire::Read { last_byte, .. } => {
                let stalled = self.read_until(last_byte).1;
                self.end_trip(match (stalled, self.cfg.idle_timeout_ms) {
                    (true, Some(idle_ms)) => Failure::Stalled {
                        idle_ms,
                        call: false,
                    },
                    _ => Failure::TimedOut,
                });
            }
            Wire::Tail { .. } => {
                // The stream did not end in the tail read: drained on the side, after the
                // answer is handed back, so the connection may still be kept.
                self.tail = self.exchange.as_ref().and_then(Exchange::take_tail);
                self.finish_trip(true)
            }
            Wire::Release { .. } | Wire::Idle => {}
        }
    }

    /// The connection ended before any reply byte: `Some(true)` to send once more on a fresh
    /// connection (a request safe to repeat on a pooled connection), `Some(false)` when a
    /// written `tools/call` may have run, `None` to read the end as any other.
    fn ended_early(
        &self,
        exchange: &Exchange<'_>,
        retry_fresh: bool,
        purpose: Purpose,
    ) -> Option<bool> {
        let repeatable = !(purpose == Purpose::Main && self.is_call());
        if exchange.received_any() {
            None
        } else if !repeatable {
            Some(false)
        } else if retry_fresh {
            Some(true)
        } else {
            None
        }
    }

    fn apply_early(&mut self, retry: bool) {
        if retry {
            self.retry_on_fresh();
        } else {
            self.end_trip(Failure::MayHaveRun(Broken::BeforeReply));
        }
    }

    /// Sends the request again on a fresh connection, under a new id.
    fn retry_on_fresh(&mut self) {
        if let Some(x) = self.exchange.take() {
            self.head = Some(x.into_head_storage());
        }
        let purpose = match self.stage {
            Stage::Trip(p) => p,
            _ => return,
        };
        match purpose {
            Purpose::Initialize { .. } => {
                self.init.id ^= RESENT_ID_BIT;
            }
            Purpose::Probe { .. } => {
                self.probe.id ^= RESENT_ID_BIT;
            }
            Purpose::Main
            | Purpose::HeaderList
            | Purpose::TaskGet
            | Purpose::TaskUpdate
            | Purpose::TaskResult => {
                self.set_id(self.id ^ RESENT_ID_BIT, purpose == Purpose::Main);
            }
            _ => {}
        }
        match self.write_request(purpose) {
            Ok(()) => self.wire = Wire::Connect { fresh: true },
            Err(f) => self.end_trip(f),
        }
    }

    /// The round trip failed: the connection is dropped, then `f` is delivered.
    fn end_trip(&mut self, f: Failure) {
        if let Some(x) = self.exchange.take() {
            self.head = Some(x.into_head_storage());
        }
        self.trip_failed(f);
        self.wire = Wire::Release { recycle: false };
    }

    /// Keeps a round trip's failure for delivery; a courtesy's is dropped (the attempt's own
    /// failure, if any, stays).
    fn trip_failed(&mut self, f: Failure) {
        if !matches!(
            self.stage,
            Stage::Trip(Purpose::Cancel | Purpose::Courtesy | Purpose::TaskCancel)
        ) {
            self.failure = Some(f);
        }
        self.trip = Some(TripEnd::Failed);
    }

    /// The reply is read: the connection is recycled when the response ended cleanly.
    fn finish_trip(&mut self, done: bool) {
        let Some(x) = self.exchange.take() else {
            return self.end_trip(Failure::NoResponse);
        };
        if let Stage::Trip(Purpose::Initialize { .. }) = self.stage {
            // The version is the handler's, set when the trip is delivered.
            self.snap = Some(Snapshot {
                session_id: x.head().and_then(|h| h.session_id.clone()),
                version: self.cfg.version,
            });
        }
        self.resume = if done {
            None
        } else {
            x.resume_from()
                .map(|r| (truncated::<MAX_EVENT_ID>(r.last_event_id), r.retry_ms))
        };
        let recycle = x.reusable();
        self.head = Some(x.into_head_storage());
        self.trip = Some(if done { TripEnd::Done } else { TripEnd::Ended });
        self.wire = Wire::Release { recycle };
    }
}

impl<'o, B, Sec, F> Op<'o, B, Sec, F>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    fn trip_done(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        purpose: Purpose,
        result: Result<bool, Failure>,
    ) {
        match purpose {
            Purpose::Probe { attempt } => self.probe_done(slot, now, attempt, result),
            Purpose::HeaderList => self.header_list_done(slot, now, result),
            Purpose::TaskGet => self.task_polled(now, result),
            Purpose::TaskUpdate => self.task_updated(now, result),
            Purpose::TaskResult => self.task_result_fetched(now, result),
            Purpose::TaskCancel => {
                self.courtesy = None;
                self.stage = Stage::AttemptEnded;
            }
            Purpose::Initialize { attempt } => {
                let version = result.and_then(|_| match self.init.version.take() {
                    Some(version) => version,
                    None => Err(Failure::NoResponse),
                });
                match (version, self.snap.as_mut()) {
                    (Ok(version), Some(snap)) => {
                        snap.version = version;
                        self.start_trip(Purpose::Initialized { attempt }, now);
                    }
                    (Err(f), _) => self.handshake_failed(slot, attempt, f),
                    (Ok(_), None) => self.handshake_failed(slot, attempt, Failure::NoResponse),
                }
            }
            Purpose::Initialized { attempt } => match result {
                Ok(_) => {
                    if let (Some(session), Some(snap)) =
                        (slot.session_mut(self.target), self.snap.as_ref())
                    {
                        session.handshake_succeeded(attempt, snap.id(), snap.version);
                    }
                    slot.changed = true;
                    self.start_main(slot, now);
                }
                Err(f) => self.handshake_failed(slot, attempt, f),
            },
            Purpose::Main | Purpose::Resume => self.main_done(slot, now, result),
            Purpose::Cancel => {
                self.courtesy = None;
                self.stage = Stage::AttemptEnded;
            }
            Purpose::Courtesy => {
                self.courtesy = None;
                match self.job {
                    Job::Close(_) => self.close_next(slot, now),
                    _ => self.stage = Stage::Done,
                }
            }
        }
    }

    /// The probe's answer, judged exactly as the era's verdict table says
    /// ([`era::judge_probe`]): modern, old era (then `initialize` in the same attempt, its
    /// waiters still waiting), a re-probe at a common version, or no verdict (the call fails
    /// naming the answer; nothing is kept).
    fn probe_done(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        attempt: u32,
        result: Result<bool, Failure>,
    ) {
        let verdict = match &result {
            Ok(_) => match self.probe.modern {
                Some(true) => EraVerdict::Modern,
                Some(false) => EraVerdict::Legacy,
                None => EraVerdict::NoVerdict,
            },
            // An error status: its body (up to 512 bytes) is in the reply buffer.
            Err(Failure::Status { code, .. }) => era::judge_probe(*code, Some(self.reply.bytes())),
            Err(_) => EraVerdict::NoVerdict,
        };
        match verdict {
            EraVerdict::Modern => {
                slot.set_era(self.target, true);
                self.modern_ready(slot, attempt, now);
            }
            // `-32022`, also when its list names the version just sent (a rolling upgrade):
            // once more, under a new id, at the newest version both sides speak.
            EraVerdict::ReprobeAt(version) if !self.reprobed => {
                self.reprobed = true;
                self.modern_version = version;
                self.probe.id = slot.next_id();
                self.probe.modern = None;
                self.start_trip(Purpose::Probe { attempt }, now);
            }
            EraVerdict::ReprobeAt(_) | EraVerdict::NoCommonVersion => {
                slot.set_era(self.target, true);
                let f = Failure::VersionRefused(era::supported_list(self.reply.bytes()));
                self.handshake_failed(slot, attempt, f);
            }
            EraVerdict::Legacy => {
                slot.set_era(self.target, false);
                self.start_initialize(slot, attempt, now);
            }
            EraVerdict::NoVerdict => {
                let f = result.err().unwrap_or(Failure::EmptyReply);
                self.handshake_failed(slot, attempt, f);
            }
        }
    }

    /// A page of the 2026 `tools/list` read for annotations: the next page, or the call.
    fn header_list_done(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        result: Result<bool, Failure>,
    ) {
        let Job::Call { handler, .. } = &mut self.job else {
            return self.fail(Failure::NoResponse);
        };
        if let Err(f) = result {
            handler.listing = false;
            slot.set_listing(self.target, 0);
            return match self.version_refused(&f) {
                Some(Ok(())) => self.start_main(slot, now),
                Some(Err(refused)) => self.fail(refused),
                None => self.fail(f),
            };
        }
        if handler.list_page == Some(true) && self.list_pages + 1 < MAX_PAGES {
            self.list_pages += 1;
            self.id = slot.next_id();
            handler.renumber(self.id);
            handler.list_page = None;
            return self.start_trip(Purpose::HeaderList, now);
        }
        handler.listing = false;
        slot.set_annotations(self.target, handler.error.bytes());
        slot.set_listing(self.target, 0);
        self.start_main(slot, now);
    }

    fn handshake_failed(&mut self, slot: &mut SlotState, attempt: u32, f: Failure) {
        if let Some(session) = slot.session_mut(self.target) {
            session.handshake_failed(attempt, f.clone());
        }
        slot.changed = true;
        self.fail(f);
    }

    /// The server answered 404 to a request in the op's session: forget that session so the
    /// retry re-initializes without it.
    fn forget_session(&mut self, slot: &mut SlotState) {
        if let Some(old) = self.snap.as_ref().and_then(Snapshot::id)
            && let Some(session) = slot.session_mut(self.target)
        {
            session.session_gone(old);
        }
        self.retried_404 = true;
        self.stage = Stage::Ready;
    }

    fn main_done(&mut self, slot: &mut SlotState, now: Millis, result: Result<bool, Failure>) {
        /// What comes after the main request's round trip.
        enum Then {
            Resume(Millis),
            CancelAfter(Failure),
            Forget,
            RetryAt(Millis),
            Fail(Failure),
            Ended,
            NextPage,
            Relist,
            Poll,
            Again,
            Resend,
        }
        let deadline = self.deadline.at;
        let modern = self.modern();
        // An answer that says the server now speaks the other era (a 4xx ran nothing): its
        // verdict is forgotten and it is probed once more, then the request goes again.
        if let Err(Failure::Status { code, .. }) = &result
            && self.cfg.era == EraSetting::Auto
            && !self.era_reprobed
            && era::era_changed(modern, *code, self.reply.bytes())
        {
            self.era_reprobed = true;
            self.clear_in_flight();
            slot.forget_era(self.target);
            self.snap = None;
            self.stage = Stage::Ready;
            return;
        }
        // -32022 (our version refused; a 4xx ran nothing): once more at the newest version
        // both sides speak, under a new id; a second refusal fails naming both lists.
        if let Err(f) = &result
            && modern
            && let Some(retry) = self.version_refused(f)
        {
            self.clear_in_flight();
            return match retry {
                Ok(()) => self.start_main(slot, now),
                Err(refused) => self.fail(refused),
            };
        }
        // A written `tools/call` whose reply broke before its response: the tool may have run
        // (issue 27), in both eras, wherever the stream broke.
        let result = match result {
            Err(f) if self.call_unanswered() => Err(match f {
                Failure::ClosedEarly(ReadStage::Head) => Failure::MayHaveRun(Broken::InHead),
                Failure::ClosedEarly(ReadStage::Body) => Failure::MayHaveRun(Broken::InBody),
                Failure::ReadFailed => Failure::MayHaveRun(Broken::Reset),
                Failure::NoResponse => Failure::MayHaveRun(Broken::StreamEnded),
                f => f,
            }),
            other => other,
        };
        // -32020 (a header the server wanted is missing or wrong): list the tools again and
        // send the call once more, under a new id (a 400 ran nothing).
        let header_mismatch = modern
            && matches!(result, Err(Failure::Status { code: 400, .. }))
            && error_code(self.reply.bytes()) == Some(era::HEADER_MISMATCH);
        // In the 2026 era a JSON-RPC error comes with an HTTP error status (400, 404): it is
        // the server's answer (a refusal), not a transport failure.
        let result = match result {
            Err(Failure::Status {
                code: 400 | 404, ..
            }) if modern && !header_mismatch && self.deliver_error_body() => Ok(true),
            other => other,
        };
        let then = match (&mut self.job, result) {
            (Job::Call { .. }, Err(_)) if header_mismatch && !self.relisted => Then::Relist,
            // A broken 2026 stream may have run the tool: sent again (once, new id) only when
            // the server's list says the tool is idempotent.
            (Job::Call { tool, handler, .. }, Err(Failure::MayHaveRun(_)) | Ok(false))
                if modern
                    && handler.answer.is_none()
                    && handler.task.is_none()
                    && !self.resent
                    && slot.idempotent(self.target, tool.as_bytes()) =>
            {
                Then::Resend
            }
            // The server asked for input and the round is answered: the call goes again.
            (Job::Call { handler, .. }, Ok(_))
                if handler.input_ready && handler.answer.is_none() =>
            {
                Then::Again
            }
            // The call became a task: poll it (right away first).
            (Job::Call { handler, .. }, Ok(_))
                if handler.answer.is_none() && handler.task.is_some() =>
            {
                Then::Poll
            }
            (Job::Call { handler, .. }, Ok(done)) => match (&handler.answer, &self.resume) {
                // A reply stream that ended without the response, from a server that gave
                // event ids: resume with GET and Last-Event-ID after its retry delay.
                // The 2026 era has no resumption: a broken stream after a written call may
                // have run the tool.
                (None, _) if !done && modern => {
                    Then::Fail(Failure::MayHaveRun(Broken::StreamEnded))
                }
                (None, Some((_, retry))) if !done && self.resumes < MAX_RESUMES => {
                    let wake = now.saturating_add(u64::from(retry.unwrap_or(0)));
                    if wake >= deadline {
                        Then::CancelAfter(Failure::TimedOut)
                    } else {
                        Then::Resume(wake)
                    }
                }
                (Some(Ok(_)), _) => Then::Ended,
                (Some(Err(u)), _) => Then::Fail(Failure::from(u.clone())),
                // The stream ended (and could not be resumed) after the call was written.
                (None, _) => Then::Fail(Failure::MayHaveRun(Broken::StreamEnded)),
            },
            (Job::Call { .. }, Err(f @ (Failure::TimedOut | Failure::Stalled { .. }))) => {
                Then::CancelAfter(f)
            }
            (_, Err(Failure::SessionExpired)) if !self.retried_404 => Then::Forget,
            (
                Job::Call { .. },
                Err(Failure::Status {
                    code: code @ (429 | 503),
                    retry_after: Some(retry_after),
                    ..
                }),
            ) => {
                let wake = retry_after
                    .delay_ms()
                    .map(|d| now.saturating_add(d))
                    .filter(|&wake| wake < deadline);
                match wake {
                    Some(at) if !self.retried_later && slot.take_retry() => Then::RetryAt(at),
                    _ => Then::Fail(Failure::RetryTooLate { code, retry_after }),
                }
            }
            (
                Job::List {
                    handler,
                    cursor,
                    previous,
                    pages,
                },
                Ok(_),
            ) => match &handler.answer {
                Some(Ok(())) if handler.has_next => {
                    *pages += 1;
                    let next = fnv1a(handler.cursor.bytes());
                    if *pages >= MAX_PAGES || (next == *cursor && *pages > 1) || next == *previous {
                        Then::Fail(Failure::EndlessPaging)
                    } else {
                        *previous = core::mem::replace(cursor, next);
                        handler.answer = None;
                        Then::NextPage
                    }
                }
                Some(_) => Then::Ended,
                None => Then::Fail(Failure::NoResponse),
            },
            (Job::Request(handler), Ok(_)) => match handler.answer {
                Some(_) => Then::Ended,
                None => Then::Fail(Failure::NoResponse),
            },
            (_, Err(f)) => Then::Fail(f),
            (Job::Close(_) | Job::Cancel(_), Ok(_)) => Then::Ended,
        };
        match then {
            Then::Resume(at) => {
                self.resumes += 1;
                self.stage = Stage::ResumeWait { at };
            }
            Then::CancelAfter(f) => self.cancel_after(f, now),
            Then::Forget => {
                self.clear_in_flight();
                self.forget_session(slot);
            }
            Then::RetryAt(at) => {
                self.clear_in_flight();
                self.retried_later = true;
                self.stage = Stage::RetryWait { at };
            }
            Then::Fail(f) => {
                self.clear_in_flight();
                self.fail(f);
            }
            Then::Ended => {
                self.clear_in_flight();
                self.stage = Stage::AttemptEnded;
            }
            Then::NextPage => self.stage = Stage::Ready,
            Then::Poll if self.tasking == Tasking::Detach => {
                self.clear_in_flight();
                self.stage = Stage::AttemptEnded;
            }
            Then::Poll => {
                if let (Some(w), Some(id)) = (self.cfg.in_flight, self.task_id()) {
                    w.set_task(self.target, id);
                }
                self.task_news = true;
                self.task_polls = 0;
                self.task_failures = 0;
                self.stage = Stage::TaskWait { at: now };
            }
            Then::Resend => {
                self.clear_in_flight();
                self.resent = true;
                self.start_main(slot, now);
            }
            Then::Again if self.input_rounds >= MAX_INPUT_ROUNDS => {
                self.clear_in_flight();
                self.fail(Failure::InputRequired(truncated(
                    "more rounds of input than a call answers (8)",
                )));
            }
            Then::Again => {
                self.clear_in_flight();
                self.input_rounds += 1;
                self.start_main(slot, now);
            }
            Then::Relist => {
                self.clear_in_flight();
                self.relisted = true;
                slot.forget_annotations(self.target);
                self.stage = Stage::Ready;
            }
        }
    }

    /// A call whose `tools/call` is written and that has neither its answer nor a task.
    fn call_unanswered(&self) -> bool {
        self.call_sent
            && matches!(&self.job, Job::Call { handler, .. }
                if handler.answer.is_none() && handler.task.is_none())
    }

    /// A 2026-era request answered with a 4xx whose JSON-RPC error is `-32022` (the version
    /// refused): `Some(Ok(()))` when it goes once more (the version to send is set), `Some(Err)`
    /// naming the server's versions when it is the second refusal or no version is common;
    /// `None` for any other failure.
    fn version_refused(&mut self, f: &Failure) -> Option<Result<(), Failure>> {
        let body = self.reply.bytes();
        let refused = matches!(
            f,
            Failure::Status {
                code: 400..=499,
                ..
            }
        ) && error_code(body) == Some(era::UNSUPPORTED_VERSION);
        if !refused {
            return None;
        }
        Some(match era::version_to_retry(body) {
            Ok(version) if !self.version_retried => {
                self.version_retried = true;
                self.modern_version = version;
                Ok(())
            }
            Ok(_) => Err(Failure::VersionRefused(era::supported_list(body))),
            Err(theirs) => Err(Failure::VersionRefused(theirs)),
        })
    }

    /// Hands an error status's body to the request's handler when it is a JSON-RPC error
    /// response; true when the handler took it as the answer.
    fn deliver_error_body(&mut self) -> bool {
        let body = self.reply.bytes();
        let is_rpc_error = Value::parse(body, crate::wire::json::JsonLimits::default())
            .ok()
            .is_some_and(|v| v.get("error").is_some() && v.get("jsonrpc").is_some());
        if !is_rpc_error {
            return false;
        }
        let handler: &mut dyn OnMessage = match &mut self.job {
            Job::Call { handler, .. } => handler,
            Job::List { handler, .. } => handler,
            Job::Request(handler) => handler,
            Job::Close(_) | Job::Cancel(_) => return false,
        };
        matches!(handler.on_message(body, true), Ok(Verdict::Done))
    }

    /// A `tasks/get` came back: the result, another poll, or the task's end.
    fn task_polled(&mut self, now: Millis, result: Result<bool, Failure>) {
        let result = match result {
            // An unknown or expired task: a JSON-RPC error with an HTTP error status.
            Err(Failure::Status {
                code: 400 | 404, ..
            }) if self.deliver_error_body() => Ok(true),
            other => other,
        };
        let Job::Call { handler, .. } = &mut self.job else {
            return self.fail(Failure::NoResponse);
        };
        handler.polling = false;
        let id = handler
            .task
            .as_ref()
            .map(|t| t.id.clone())
            .unwrap_or_default();
        let interval = handler.task.as_ref().map_or(1_000, |t| t.interval_ms);
        if matches!(result, Err(Failure::TimedOut)) && now >= self.deadline.at {
            return self.task_timed_out();
        }
        if result.is_err() {
            // A lost poll loses nothing: `tasks/get` is asked again (new id, fresh
            // connection); only a server gone for good ends the call, naming the task.
            self.task_failures += 1;
            if self.task_failures >= MAX_TASK_POLL_FAILURES {
                return self.fail(Failure::Task {
                    id,
                    end: crate::wire::failure::TaskEnd::Lost,
                });
            }
            return self.schedule_poll(now, interval);
        }
        self.task_failures = 0;
        match (&handler.answer, handler.task_status.take()) {
            (Some(Ok(_)), _) => self.stage = Stage::AttemptEnded,
            (Some(Err(u)), _) => {
                let f = Failure::from(u.clone());
                self.fail(f);
            }
            (None, Some(super::handlers::TaskStatus::Cancelled)) => self.fail(Failure::Task {
                id,
                end: crate::wire::failure::TaskEnd::Cancelled,
            }),
            (None, Some(super::handlers::TaskStatus::Gone)) => self.fail(Failure::Task {
                id,
                end: crate::wire::failure::TaskEnd::Gone,
            }),
            // Ended (2025-11-25 form): its result comes by `tasks/result`.
            (None, Some(super::handlers::TaskStatus::ResultReady)) => {
                self.stage = Stage::TaskSend(Purpose::TaskResult);
            }
            // The slot's policy answered the task's requests: `tasks/update`, then a poll.
            (None, Some(super::handlers::TaskStatus::InputAnswered))
                if self.input_rounds < MAX_INPUT_ROUNDS =>
            {
                self.input_rounds += 1;
                self.stage = Stage::TaskSend(Purpose::TaskUpdate);
            }
            (None, Some(super::handlers::TaskStatus::InputAnswered)) => {
                self.failure = Some(Failure::InputRequired(truncated(
                    "more rounds of input than a call answers (8)",
                )));
                self.stage = Stage::TaskSend(Purpose::TaskCancel);
            }
            // No input handler: the task is cancelled and the call says what was asked.
            (None, Some(super::handlers::TaskStatus::InputRequired(asked))) => {
                self.failure = Some(Failure::InputRequired(asked));
                self.stage = Stage::TaskSend(Purpose::TaskCancel);
            }
            (None, _) => self.schedule_poll(now, interval),
        }
    }

    /// `tasks/result` came back (the 2025-11-25 form): the tool's result or the server's
    /// refusal ends the call; a lost answer is asked for again after the next poll (both are
    /// safe to repeat).
    fn task_result_fetched(&mut self, now: Millis, result: Result<bool, Failure>) {
        let answered = match &self.job {
            Job::Call { handler, .. } => handler.answer.is_some(),
            _ => false,
        };
        if answered && result.is_ok() {
            self.stage = Stage::AttemptEnded;
        } else if matches!(result, Err(Failure::TimedOut)) && now >= self.deadline.at {
            self.task_timed_out();
        } else {
            self.task_failures += 1;
            if self.task_failures >= MAX_TASK_POLL_FAILURES {
                let id = self.task_id().map(truncated).unwrap_or_default();
                return self.fail(Failure::Task {
                    id,
                    end: crate::wire::failure::TaskEnd::Lost,
                });
            }
            if let Job::Call { handler, .. } = &mut self.job {
                handler.answer = None;
            }
            self.stage = Stage::TaskWait {
                at: now.saturating_add(TASK_POLL_FLOOR_MS).min(self.deadline.at),
            };
        }
    }

    /// `tasks/update` came back (its answer is an empty result): the task's state is seen by
    /// the next poll, at once. A failed update is not the call's end either: the poll says.
    fn task_updated(&mut self, now: Millis, result: Result<bool, Failure>) {
        if let Job::Call { handler, .. } = &mut self.job {
            handler.polling = false;
            handler.input_ready = false;
            handler.task_status = None;
            handler.answer = None;
            handler.text.clear();
        }
        if matches!(result, Err(Failure::TimedOut)) && now >= self.deadline.at {
            return self.task_timed_out();
        }
        self.stage = Stage::TaskWait { at: now };
    }

    /// The next `tasks/get`: a ramp (20, 40, 80 … ms) up to the server's interval, never
    /// under the floor (a `0` must not spin), never past the deadline.
    fn schedule_poll(&mut self, now: Millis, interval: u64) {
        let ramp = TASK_POLL_FLOOR_MS.saturating_mul(1 << self.task_polls.min(10));
        let delay = ramp.min(interval.max(TASK_POLL_FLOOR_MS));
        self.stage = Stage::TaskWait {
            at: now.saturating_add(delay).min(self.deadline.at),
        };
    }

    /// The deadline passed while the call was a task: one `tasks/cancel`, then the call fails
    /// naming the task.
    fn task_timed_out(&mut self) {
        let id = match &self.job {
            Job::Call { handler, .. } => handler.task.as_ref().map(|t| t.id.clone()),
            _ => None,
        };
        self.failure = Some(Failure::Task {
            id: id.unwrap_or_default(),
            end: crate::wire::failure::TaskEnd::TimedOut,
        });
        self.stage = Stage::TaskSend(Purpose::TaskCancel);
    }

    fn clear_in_flight(&self) {
        if self.is_call()
            && let Some(w) = self.cfg.in_flight
        {
            w.clear();
        }
    }

    /// The call timed out or stalled: tell the server (best effort), then fail with `f`. In
    /// the 2026 era closing the stream is the cancel.
    fn cancel_after(&mut self, f: Failure, now: Millis) {
        self.clear_in_flight();
        self.failure = Some(f);
        // Over stdio there is no stream to close: the notification is the only cancel.
        if self.modern() && !self.cfg.is_stdio(self.target) {
            self.stage = Stage::AttemptEnded;
        } else {
            self.start_trip(Purpose::Cancel, now);
        }
    }

    /// The attempt ended: failover decides whether another server is tried.
    fn attempt_ended(&mut self, slot: &mut SlotState) -> Action {
        self.clear_in_flight();
        // A call's deadline or idle timeout names its limit and whether the tool may still
        // be running (issue 27).
        if self.is_call() {
            let sent = self.call_sent;
            self.failure = match self.failure.take() {
                Some(Failure::TimedOut) => Some(Failure::CallTimedOut {
                    ms: self.cfg.timeout_ms,
                    sent,
                }),
                Some(Failure::Stalled { idle_ms, .. }) => Some(Failure::Stalled {
                    idle_ms,
                    call: sent,
                }),
                other => other,
            };
        }
        let failed = self.failure.is_some();
        let (outcome, next, fallback_used, no_healthy_tool) = match &self.job {
            Job::Call { handler, tool, .. } => {
                if self.failure.as_ref().is_some_and(Failure::is_local) {
                    // Says nothing about the servers: no failover.
                    (AttemptOutcome::Unreachable, None, false, false)
                } else if handler.task.is_some() && failed {
                    // A task lives on its server: never a second run on the fallback.
                    (AttemptOutcome::Unreachable, None, false, false)
                } else if handler.task.is_some() && handler.answer.is_none() {
                    // Detached as a task: the server took the call.
                    (AttemptOutcome::Answered, None, false, false)
                } else {
                    let outcome = match handler.answer {
                        _ if failed => AttemptOutcome::Unreachable,
                        Some(Ok(Answer::Result { is_error: false })) => AttemptOutcome::Answered,
                        Some(Ok(Answer::Result { is_error: true })) => AttemptOutcome::ToolError,
                        Some(Ok(Answer::Refused { unknown_tool, .. })) => {
                            AttemptOutcome::Refused { unknown_tool }
                        }
                        _ => AttemptOutcome::Unreachable,
                    };
                    let d = slot.failover.after_attempt(self.target, outcome, tool);
                    (outcome, d.next, d.fallback_used, d.no_healthy_tool)
                }
            }
            job => {
                let answer = match job {
                    Job::List { handler, .. } => handler.answer.as_ref(),
                    Job::Request(handler) => handler.answer.as_ref(),
                    _ => None,
                };
                let outcome = match answer {
                    _ if failed => AttemptOutcome::Unreachable,
                    Some(Ok(())) => AttemptOutcome::Answered,
                    Some(Err(_)) => AttemptOutcome::Refused {
                        unknown_tool: false,
                    },
                    None => AttemptOutcome::Unreachable,
                };
                let next = match self.tasking {
                    // A task's request goes to the task's server alone.
                    Tasking::Attach => None,
                    _ => slot.failover.after_list_attempt(self.target, outcome),
                };
                (outcome, next, false, false)
            }
        };
        self.report = Some(Report {
            target: self.target,
            outcome,
            last: next.is_none(),
            fallback_used,
            no_healthy_tool,
        });
        self.news |= NEWS_REPORT;
        self.stage = Stage::Next(next);
        Action::Report
    }

    /// The slot's close: the next server with an open session gets its `DELETE`; every
    /// session is forgotten; nothing goes to a server the slot knows is dead.
    fn close_next(&mut self, slot: &mut SlotState, now: Millis) {
        loop {
            let Job::Close(next) = &mut self.job else {
                self.stage = Stage::Done;
                return;
            };
            let Some(target) = *next else {
                self.stage = Stage::Done;
                return;
            };
            *next = match target {
                Target::Primary => Some(Target::Fallback),
                Target::Fallback => None,
            };
            if self.cfg.endpoint(target).is_none() {
                continue;
            }
            let snap = slot.session(target).and_then(|x| x.snapshot().cloned());
            let dead = slot.failover.is_dead(target);
            let Some(snap) = snap else { continue };
            if let Some(session) = slot.session_mut(target) {
                session.reset();
            }
            if snap.session_id.is_none() || dead {
                continue;
            }
            self.target = target;
            self.snap = Some(snap);
            self.start_trip(Purpose::Courtesy, now);
            return;
        }
    }

    /// A dropped call's cancel: only in a live server's session.
    fn cancel_start(&mut self, slot: &mut SlotState, now: Millis, _id: u64) {
        let snap = if slot.failover.is_dead(self.target) || self.cfg.endpoint(self.target).is_none()
        {
            None
        } else {
            slot.session(self.target)
                .and_then(|x| x.snapshot().cloned())
        };
        match snap {
            // In the 2026 era the closed connection was the cancel.
            Some(snap) if !snap.version.is_modern() => {
                self.snap = Some(snap);
                self.start_trip(Purpose::Courtesy, now);
            }
            _ => self.stage = Stage::Done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::SliceBuf;

    /// An op lives in its caller's future (or static task on the edge) for the whole call: it
    /// stays small. Its largest parts are the reply decoder (about 1 KiB, SSE ids included),
    /// the session snapshot (256-byte session id), the resume point (128-byte event id) and,
    /// since the 2026 era and tasks, the probe's state and a task id (64 bytes): 2 440 bytes;
    /// Since the deferred tail, the framing left of a late-ending stream (48 bytes): 2 592.
    #[test]
    fn an_op_stays_small() {
        let call = core::mem::size_of::<Op<'static, SliceBuf<'static>, &'static [u8]>>();
        assert!(call <= 2624, "an op is {call} bytes, over its cap of 2624");
    }
}
