//! One operation of a slot as states: [`Op`], what it asks its adapter to do ([`Action`]) and
//! what an attempt on one server came to ([`Report`]).

use heapless::String;

use super::config::{CallBuffers, MAX_INPUT_ROUNDS, SlotConfig};
use super::handlers::{
    Accept, CallHandler, InitHandler, ListHandler, ProbeHandler, RequestHandler, Trip,
};
use super::{
    CANCEL_DROPPED, CANCEL_TIMED_OUT, Deadline, LISTEN_MS, MAX_PAGES, MAX_RESUMES, MAX_TAIL_BYTES,
    Millis, SlotState, TAIL_MS,
};
use crate::buf::Buf;
use crate::buf::truncated;
use crate::harness::failover::{AttemptOutcome, Target, fnv1a};
use crate::wire::era::{self, EraSetting, Verdict as EraVerdict};
use crate::wire::exchange::{Exchange, Expect, OnMessage, Step, Verdict};
use crate::wire::failure::{Broken, ConnectError, Failure};
use crate::wire::http::Method;
use crate::wire::http::Stage as ReadStage;
use crate::wire::json::{Kind, Value};
use crate::wire::jsonrpc::{self, ListMethod, ProtocolVersion};
use crate::wire::session::{Begin, Phase, Snapshot};
use crate::wire::sse::MAX_EVENT_ID;

pub use super::event::{Event, Report};
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

/// What an op does, with its reply handler. One lives per op, in its caller's storage (no
/// allocator to box the larger variants into), so the size difference costs nothing twice.
#[allow(clippy::large_enum_variant)]
#[cfg_attr(not(feature = "std"), repr(u32))]
enum Job<'o, B: Buf, Sec: AsRef<[u8]>, F: FnMut(Option<(Value<'_>, &[u8])>)> {
    Call {
        handler: CallHandler<'o, B, Sec>,
        tool: &'o str,
        args: Option<Value<'o>>,
        /// The polling of the task the call became (reset when it becomes one).
        task: TaskState,
    },
    List {
        handler: ListHandler<'o, F, B, Sec>,
        /// Hashes of the cursor sent and of the one before (a server that repeats one is
        /// paging without end).
        cursor: u64,
        previous: u64,
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

impl Purpose {
    /// A best-effort request whose failure changes nothing (it has a short deadline of its
    /// own); never one the build leaves out.
    fn is_courtesy(self) -> bool {
        matches!(
            self,
            Purpose::Cancel | Purpose::Courtesy | Purpose::TaskCancel
        ) && self.not_built().is_none()
    }

    /// The capability this purpose belongs to, when the build leaves it out
    /// (docs/design.md#capabilities): a trip for it is never started, and every branch that
    /// handles one folds away.
    fn not_built(self) -> Option<&'static str> {
        match self {
            Purpose::Probe { .. } if !cfg!(feature = "probe") => Some("probe"),
            Purpose::HeaderList if !cfg!(feature = "era-2026") => Some("era-2026"),
            Purpose::TaskGet | Purpose::TaskCancel | Purpose::TaskUpdate | Purpose::TaskResult
                if !cfg!(feature = "tasks") =>
            {
                Some("tasks")
            }
            // Without the 2025 era no session has an id (close sends no `DELETE`, a dropped
            // call's cancel nothing), and a timed-out call's cancel is the closed stream
            // (the notification only goes to a stdio server, which needs `std`).
            Purpose::Initialize { .. }
            | Purpose::Initialized { .. }
            | Purpose::Resume
            | Purpose::Courtesy
                if !cfg!(feature = "era-2025") =>
            {
                Some("era-2025")
            }
            Purpose::Cancel if !cfg!(feature = "era-2025") && !cfg!(feature = "std") => {
                Some("era-2025")
            }
            _ => None,
        }
    }
}

/// Some courtesy request is built ([`Purpose::is_courtesy`]): a task's cancel (`tasks`), the
/// 2025 era's `DELETE` and cancels, a stdio server's cancel (`std`).
const COURTESY_BUILT: bool =
    cfg!(feature = "era-2025") || cfg!(feature = "tasks") || cfg!(feature = "std");

/// Where an op is. Each state holds what it needs: a round trip holds its purpose, where it
/// is on the wire, and (once the request is written) the exchange that reads its reply, which
/// exists nowhere else.
// The trip is the big state (its exchange holds the reply decoder): without an allocator it
// cannot be boxed, and the op is the same size as when the exchange sat beside the stage
// (`an_op_stays_small`).
#[allow(clippy::large_enum_variant)]
#[cfg_attr(not(feature = "std"), repr(u32))]
enum Stage<'o> {
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
    /// A round trip for `purpose`; `wire` says where it is; `exchange` reads the reply
    /// from the moment the request is written until the trip ends (it owns the head
    /// storage meanwhile, given back to the op when the trip ends).
    Trip {
        purpose: Purpose,
        wire: Wire,
        exchange: Option<Exchange<'o>>,
    },
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
#[cfg_attr(not(feature = "std"), repr(u32))]
enum TripEnd {
    /// The response is in (or the notification was accepted).
    Done,
    /// The reply ended without the response (`Op::resume` says where it can go on).
    Ended,
    Failed,
}

/// The JSON-RPC error code of an error body, if it is one.
fn error_code(body: &[u8]) -> Option<i64> {
    error_of(body).1
}

/// What an error body is: a JSON-RPC error response (`error` and `jsonrpc` in it), and its
/// error's code, if it has one (one parse for both questions).
fn error_of(body: &[u8]) -> (bool, Option<i64>) {
    let Ok(v) = Value::parse(body, crate::wire::json::JsonLimits::default()) else {
        return (false, None);
    };
    let error = v.get("error");
    (
        error.is_some() && v.get("jsonrpc").is_some(),
        error.and_then(|e| e.get("code")).and_then(|c| c.as_i64()),
    )
}

/// The shortest wait between two `tasks/get` (a `pollIntervalMs` of 0 must not spin).
const TASK_POLL_FLOOR_MS: Millis = 20;
/// `tasks/get` failures in a row after which the task's server is taken as lost.
const MAX_TASK_POLL_FAILURES: u32 = 3;

/// [`fnv1a`] of no bytes (its offset basis): the hash of the first page's empty cursor, a
/// constant where a list starts (not a call of the hash).
const NO_CURSOR: u64 = 0xcbf2_9ce4_8422_2325;

/// The list callback type of ops that are not lists.
type NoItems = fn(Option<(Value<'_>, &[u8])>);

/// The list callback type of the driver's ops: one type whatever the callback behind it, so
/// the calls of a firmware that lists too share one copy of the op's code with its lists
/// ([`CallOp`]). `Send`, so an op is `Send` where its buffers are (the host's futures are).
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) type Items<'o> = &'o mut (dyn FnMut(Option<(Value<'_>, &[u8])>) + Send + 'o);

/// Whether the driver's calls can be another job than a call or a list: not in the edge's
/// one-era build (there the driver runs no request, close or cancel beside its calls).
const CALL_OTHERS: bool = !crate::machine::handlers::ONE_ERA_EDGE;

/// A tool call's op as the driver runs it: a list only when `LISTS` (a firmware that lists
/// as well as calls: then its calls and lists are one op type, one copy of the op's code),
/// and in the edge's one-era build nothing but a call or a list, so it has no code for the
/// other jobs.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) type CallOp<'o, B, Sec, const LISTS: bool> =
    Op<'o, B, Sec, Items<'o>, LISTS, CALL_OTHERS>;

/// A list's op as the driver runs it for a firmware that lists as well as calls: a call's
/// that can be a list ([`CallOp`]), never a request, a close or a cancel on the edge.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) type ListOp<'o, B, Sec> = CallOp<'o, B, Sec, true>;

/// A request's, a close's or a cancel's op as the driver runs it: a list only when `LISTS`
/// (as its calls', whose type it is where the build has those jobs).
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) type OtherOp<'o, B, Sec, const LISTS: bool> = Op<'o, B, Sec, Items<'o>, LISTS, true>;

/// One operation of a slot, as a state machine over the caller's buffers (see the module
/// docs). Its outcome, when [`Action::Done`] comes, is [`Op::outcome`] and what its handler
/// wrote into the buffers.
///
/// `LISTS` says whether the op can be a list, `OTHERS` whether it can be a request, a close
/// or a cancel: both true for every op made here. The driver makes its ops with the kinds
/// they never are left out, so their code has none of those kinds' arms (a list's handler,
/// pages and failover: about 1 KiB of the edge's flash).
pub struct Op<
    'o,
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>) = NoItems,
    const LISTS: bool = true,
    const OTHERS: bool = true,
> {
    cfg: &'o SlotConfig<'o>,
    request: &'o mut B,
    read: &'o mut [u8],
    reply: &'o mut B,
    head: Option<&'o mut [u8]>,
    job: Job<'o, B, Sec, F>,
    init: InitHandler,
    stage: Stage<'o>,
    target: Target,
    deadline: Deadline,
    /// A best-effort request's own deadline, while one runs.
    courtesy: Option<Deadline>,
    snap: Option<Snapshot>,
    /// The main request's id.
    id: u64,
    progress_seen: u32,
    /// What the current attempt has done (replaced when an attempt starts).
    attempt: Attempt,
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
    /// Pages read of the list: the header list's (a call's), or a list op's (one count for
    /// both, so one writer of a page's request reads it).
    list_pages: u32,
    /// What a call does with a task: wait for its end, hand it back, or attach to one.
    tasking: TaskMode,
    /// `input_required` rounds answered (2026 era).
    input_rounds: u32,
    /// An idempotent tool's call was sent again after a broken stream (once).
    resent: bool,
    /// The server was probed again after an answer from the other era (once).
    era_reprobed: bool,
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

/// How the polling of the task a call became goes: replaced when the call becomes a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TaskState {
    /// `tasks/get` polls sent.
    polls: u32,
    /// `tasks/get` failures in a row.
    failures: u32,
}

/// What one attempt (one server, one deadline) has done: replaced when an attempt starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Attempt {
    /// The session was re-initialized after a 404 (once an attempt).
    retried_404: bool,
    /// The request was sent again after a `retry-after` wait (once an attempt).
    retried_later: bool,
    /// The attempt's `tools/call` was written (a timeout then says the tool may be running).
    call_sent: bool,
}

/// What a call does with a task: the op's own, data-free form of [`super::Tasking`] (the
/// task's server and id are in its job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
enum TaskMode {
    /// Polls the task the call becomes until it ends (the default: a task is transparent).
    Wait,
    /// Ends as soon as the call is a task, handing its id back ([`Op::detached`]).
    Detach,
    /// Polls a task an earlier call became ([`Op::attach`]); sends no `tools/call`. Also a
    /// task's request ([`Op::pinned_request`]): to the task's server alone.
    Attach,
}

/// Whether an op can be [`TaskMode::Attach`]: with tasks, or where a task's request can be
/// pinned to its server. The edge's one-era build without tasks has neither.
const ATTACH_BUILT: bool = cfg!(feature = "tasks") || !crate::machine::handlers::ONE_ERA_EDGE;

impl TaskMode {
    /// The op is pinned to its target ([`TaskMode::Attach`]): never true where
    /// [`ATTACH_BUILT`] is false, so the compiler drops what it guards.
    fn pinned(self) -> bool {
        ATTACH_BUILT && self == TaskMode::Attach
    }
}

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// [`Op::call`], for an op of any `LISTS` and `OTHERS` (the driver's: false).
    pub(crate) fn call_as(
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
                task: TaskState::default(),
            },
        )
    }

    /// A call that ends as soon as its server makes it a task (the tasks extension), handing
    /// back the task's id ([`Op::task_id`], with [`Op::detached_task`] true) for a later
    /// [`Op::attach`]. A server that answers at once gives the result as any call does.
    pub fn detached(mut self) -> Self {
        self.tasking = TaskMode::Detach;
        self
    }

    /// [`Op::attach`], for an op of any `LISTS` and `OTHERS` (the driver's: false).
    pub(crate) fn attach_as(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        (target, tool): (Target, &'o str),
        task: &str,
    ) -> Self {
        let mut op = Self::call_as(cfg, bufs, secrets, tool, None);
        // The edge's one-era build without tasks fails at once, as its attached call would
        // when it got to the task (no server is asked): `TaskMode::Attach` is then never set
        // and its branches fold away ([`TaskMode::pinned`]).
        if !ATTACH_BUILT {
            op.failure = Some(match cfg.endpoint(target) {
                // (A slot without a fallback has no session there.)
                None => Failure::NoResponse,
                Some(_) => Failure::NotBuilt {
                    capability: "tasks",
                    need: "the tool requires a task",
                },
            });
            op.target = target;
            op.stage = Stage::Done;
            return op;
        }
        op.tasking = TaskMode::Attach;
        op.target = target;
        if let Job::Call { handler, .. } = &mut op.job {
            handler.attach(task);
        }
        op
    }

    /// [`Op::pinned_request`], for an op of any `LISTS` (the driver's: false).
    pub(crate) fn pinned_request_as(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        target: Target,
        req: jsonrpc::Request<'o>,
    ) -> Self {
        let mut op = Self::request_as(cfg, bufs, secrets, req);
        // (On the edge's one-era build the request is refused at once: never pinned.)
        if ATTACH_BUILT {
            op.tasking = TaskMode::Attach;
        }
        op.target = target;
        op
    }

    /// [`Op::request`], for an op of any `LISTS` (the driver's: false).
    pub(crate) fn request_as(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        req: jsonrpc::Request<'o>,
    ) -> Self {
        let (wire, text, _, _) = split(bufs);
        // The edge's one-era build (no `std`, no `era-2025`) makes no such request: its
        // adapter calls tools and lists them, nothing else. Refused there, so `Job::Request`
        // is never made and its arms (and its handler) fold away.
        if crate::machine::handlers::ONE_ERA_EDGE {
            // (Done before any attempt: no server is asked, none is judged by it.)
            let mut op = Op::new(cfg, wire, Job::Close(None));
            op.failure = Some(Failure::NotBuilt {
                capability: "era-2025",
                need: "a request other than tools/call and tools/list on the edge",
            });
            op.stage = Stage::Done;
            return op;
        }
        Op::new(
            cfg,
            wire,
            Job::Request(RequestHandler::new(req, secrets, text)),
        )
    }

    /// [`Op::close`], for an op of any `LISTS` (the driver's: false).
    pub(crate) fn close_as(cfg: &'o SlotConfig<'o>, bufs: &'o mut CallBuffers<'_, B>) -> Self {
        let (wire, _, _, _) = split(bufs);
        Op::new(cfg, wire, Job::Close(Some(Target::Primary)))
    }

    /// [`Op::cancel`], for an op of any `LISTS` (the driver's: false).
    pub(crate) fn cancel_as(
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
        Self::call_as(cfg, bufs, secrets, tool, args)
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
        Self::attach_as(cfg, bufs, secrets, (target, tool), task)
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
        Self::pinned_request_as(cfg, bufs, secrets, target, req)
    }

    /// A request other than `tools/call` and the lists (`resources/read`, `prompts/get`,
    /// `ping`): its whole result, redacted, goes to `bufs.text`.
    pub fn request(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        req: jsonrpc::Request<'o>,
    ) -> Self {
        Self::request_as(cfg, bufs, secrets, req)
    }

    /// The slot's close: `DELETE` for each open session (best effort), every session forgotten.
    pub fn close(cfg: &'o SlotConfig<'o>, bufs: &'o mut CallBuffers<'_, B>) -> Self {
        Self::close_as(cfg, bufs)
    }

    /// `notifications/cancelled` for the `tools/call` with `id` on `target` (its caller went
    /// away), best effort, in the server's session; nothing when the server is dead or has no
    /// session.
    pub fn cancel(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        call: (Target, u64),
    ) -> Self {
        Self::cancel_as(cfg, bufs, call)
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
        Self::list_as(cfg, bufs, secrets, list, on_item)
    }
}

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// [`Op::list`], for an op of any `OTHERS` (the driver's: as its calls', a [`ListOp`]).
    /// Made only for an op that `LISTS`: one that does not has no code for a list.
    pub(crate) fn list_as(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        list: ListMethod,
        on_item: F,
    ) -> Self {
        let (wire, text, cursor, _) = split(bufs);
        // The edge's one-era build lists tools alone (its adapter lists nothing else): any
        // other list is refused there before any server is asked, and the list is `Tools`
        // wherever it is read, so the others' writers and names fold away.
        let one_era_edge = crate::machine::handlers::ONE_ERA_EDGE;
        let refused = one_era_edge && list != ListMethod::Tools;
        let mut op = Op::new(
            cfg,
            wire,
            Job::List {
                handler: ListHandler::new(list, on_item, text, cursor, secrets),
                cursor: NO_CURSOR,
                previous: NO_CURSOR,
            },
        );
        if refused {
            op.failure = Some(Failure::NotBuilt {
                capability: "era-2025",
                need: "a list other than tools/list on the edge",
            });
            op.stage = Stage::Done;
        }
        op
    }
}

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    fn new(cfg: &'o SlotConfig<'o>, wire: WireBufs<'o, B>, job: Job<'o, B, Sec, F>) -> Self {
        // An op type that lists makes its ops in more than one place (a firmware's calls and
        // its list): one copy of the op's making for all of them, not one in each future.
        if LISTS {
            Self::new_apart(cfg, wire, job)
        } else {
            Self::new_here(cfg, wire, job)
        }
    }

    /// [`new`](Self::new) out of line (an op type that lists).
    #[inline(never)]
    fn new_apart(cfg: &'o SlotConfig<'o>, wire: WireBufs<'o, B>, job: Job<'o, B, Sec, F>) -> Self {
        Self::new_here(cfg, wire, job)
    }

    /// [`new`](Self::new)'s body.
    #[inline(always)]
    fn new_here(cfg: &'o SlotConfig<'o>, wire: WireBufs<'o, B>, job: Job<'o, B, Sec, F>) -> Self {
        Op {
            cfg,
            request: wire.request,
            read: wire.read,
            reply: wire.reply,
            head: Some(wire.head),
            job,
            init: InitHandler::default(),
            stage: Stage::Start,
            target: Target::Primary,
            // (Set when an attempt begins; nothing reads it before: a close's or a cancel's
            // trips run on their own courtesy deadline.)
            deadline: Deadline {
                at: 0,
                hard: 0,
                step: 0,
            },
            courtesy: None,
            snap: None,
            id: 0,
            progress_seen: 0,
            attempt: Attempt::default(),
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
            tasking: TaskMode::Wait,
            input_rounds: 0,
            resent: false,
            era_reprobed: false,
            modern_version: era::MODERN_VERSION,
            version_retried: false,
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

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
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

    /// Takes the op's failure out of it, when the op is done with
    /// ([`Metering::settle`](crate::machine::Metering::settle)).
    pub fn take_failure(&mut self) -> Option<Failure> {
        self.failure.take()
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
            Job::List { handler, .. } if LISTS => handler.answer.clone(),
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                handler.answer.clone()
            }
            _ => Some(Ok(())),
        };
        answer.unwrap_or(Err(super::ListError::Unreachable(Failure::NoResponse)))
    }

    /// [`list_outcome`](Self::list_outcome) of an op that is done with: the failure and the
    /// answer taken out of it, not copied (no `Failure` copy in the code of a list).
    #[cfg_attr(not(feature = "drive"), allow(dead_code))]
    pub(crate) fn take_list_outcome(&mut self) -> Result<(), super::ListError> {
        if let Some(f) = self.failure.take() {
            return Err(super::ListError::Unreachable(f));
        }
        let answer = match &mut self.job {
            Job::List { handler, .. } if LISTS => handler.answer.take(),
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                handler.answer.take()
            }
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
        matches!(self.wire(), Wire::Tail { .. })
    }

    /// Where the current round trip is ([`Wire::Idle`] outside a trip).
    fn wire(&self) -> Wire {
        match &self.stage {
            Stage::Trip { wire, .. } => *wire,
            _ => Wire::Idle,
        }
    }

    /// Moves the current round trip on (outside a trip a wire means nothing).
    fn set_wire(&mut self, to: Wire) {
        if let Stage::Trip { wire, .. } = &mut self.stage {
            *wire = to;
        }
    }

    /// The current round trip's exchange, once its request is written.
    fn exchange(&self) -> Option<&Exchange<'o>> {
        match &self.stage {
            Stage::Trip { exchange, .. } => exchange.as_ref(),
            _ => None,
        }
    }

    /// Takes the current round trip's exchange out of it (to feed it beside the op's other
    /// fields, or to end the trip).
    fn take_exchange(&mut self) -> Option<Exchange<'o>> {
        match &mut self.stage {
            Stage::Trip { exchange, .. } => exchange.take(),
            _ => None,
        }
    }

    /// Puts an exchange (back) into the current round trip; outside a trip it is given up
    /// and its head storage kept.
    fn put_exchange(&mut self, x: Exchange<'o>) {
        match &mut self.stage {
            Stage::Trip { exchange, .. } => *exchange = Some(x),
            _ => self.head = Some(x.into_head_storage()),
        }
    }

    /// Stops reading the end of the reply's framing ([`reading_tail`](Self::reading_tail)):
    /// the answer is handed back and the connection parked with what is left of its framing
    /// ([`Action::Park`]), as when the tail read times out.
    pub fn leave_tail(&mut self) {
        if self.reading_tail() {
            self.tail = self.exchange().and_then(Exchange::take_tail);
            self.finish_trip(true);
        }
    }

    /// The task this call became (the tasks extension), if it did: its id.
    pub fn task_id(&self) -> Option<&str> {
        match &self.job {
            Job::Call { handler, .. } => handler.task().map(|t| t.id.as_str()),
            _ => None,
        }
    }

    /// The call ended as a task that is still running (a [`detached`](Op::detached) call):
    /// [`Op::task_id`] is its id, to [`attach`](Op::attach) to later.
    pub fn detached_task(&self) -> bool {
        match &self.job {
            Job::Call { handler, .. } => {
                self.failure.is_none() && handler.answer.is_none() && handler.task().is_some()
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
            Job::List { handler, .. } if LISTS => handler.text.len(),
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => handler.text.len(),
            _ => 0,
        }
    }

    /// What to do next, given the slot's state and the time. Takes the slot only here: an
    /// adapter holds its lock for this call alone.
    pub fn poll(&mut self, slot: &mut SlotState, now: Millis) -> Action {
        // (Only a 2025-era call hears that its server's tool list changed.)
        if cfg!(feature = "era-2025")
            && let Job::Call { handler, .. } = &mut self.job
            && core::mem::take(&mut handler.tools_list_changed)
        {
            slot.tools_list_changed = true;
        }
        // A 2025-era list has no lifetime (its server says when it changed instead).
        let modern = self.modern();
        if LISTS
            && let Job::List { handler, .. } = &mut self.job
            // (Always tools/list in the edge's one-era build: its other lists are refused.)
            && crate::machine::handlers::BuiltList::built(handler.list) == ListMethod::Tools
            // Once, when its last page is read: not a list that failed on a later page.
            && matches!(handler.answer, Some(Ok(())))
            && !handler.has_next
            && let Some(ttl) = handler.ttl_ms.take()
            && modern
        {
            slot.tools_ttl_ms = Some(ttl);
        }
        loop {
            // A task or a GET stream only with its capability (features `tasks`, `era-2025`).
            if cfg!(feature = "tasks") && core::mem::take(&mut self.task_news) {
                self.news |= NEWS_TASK;
                return Action::TaskStarted;
            }
            if cfg!(feature = "era-2025") && core::mem::take(&mut self.listen_news) {
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
        // (A build without courtesy requests never has their deadline: the compiler sees it.)
        self.courtesy
            .filter(|_| COURTESY_BUILT)
            .unwrap_or(self.deadline)
    }

    fn fail(&mut self, f: Failure) {
        self.failure = Some(f);
        self.stage = Stage::AttemptEnded;
    }

    fn is_call(&self) -> bool {
        // (An op that can only be a call is one: the compiler sees it.)
        (!LISTS && !OTHERS) || matches!(self.job, Job::Call { .. })
    }

    // Out of the driver's step closure (where `poll` is inlined): 96 B less in `full`, and
    // since the driver's ops are never lists, 12 B less in `minimal` too.
    #[inline(never)]
    fn step(&mut self, slot: &mut SlotState, now: Millis) -> Option<Action> {
        match self.stage {
            Stage::Start => {
                match self.job {
                    Job::Close(_) if OTHERS => self.close_next(slot, now),
                    Job::Cancel(id) if OTHERS => self.cancel_start(slot, now, id),
                    _ => {
                        if self.is_call() {
                            slot.calls = slot.calls.saturating_add(1);
                        }
                        // A task's server is the task's; the others start where failover says.
                        if !self.tasking.pinned() {
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
            Stage::Waiting { attempt } if cfg!(feature = "era-2025") => {
                self.waiting(slot, now, attempt)
            }
            // A 2026-era session is ready within the poll that starts it: without the 2025 era
            // no op ever waits for another's handshake.
            Stage::Waiting { .. } => {
                self.fail(Failure::NoResponse);
                None
            }
            // Stages of a capability the build leaves out are never entered (a resumption's
            // trip is not built: `start_trip` fails it).
            Stage::TaskSend(_) | Stage::TaskWait { .. } if !cfg!(feature = "tasks") => {
                self.fail(Failure::NotBuilt {
                    capability: "tasks",
                    need: "the tool requires a task",
                });
                None
            }
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
            // (A task poll is never set past the deadline: it is slept here before that check.)
            Stage::RetryWait { at } | Stage::ResumeWait { at } | Stage::TaskWait { at }
                if now < at =>
            {
                self.timeout = at;
                Some(Action::Sleep { slot: false })
            }
            Stage::TaskWait { .. } if now >= self.deadline.at => {
                self.task_timed_out();
                None
            }
            // A `tasks/get` when its time came, or another task request.
            Stage::TaskSend(_) | Stage::TaskWait { .. } => {
                let purpose = match self.stage {
                    Stage::TaskSend(purpose) => purpose,
                    _ => Purpose::TaskGet,
                };
                // Every request has an id of its own (never the last poll's).
                self.id = slot.next_id();
                let id = self.id;
                if let Job::Call { handler, task, .. } = &mut self.job {
                    handler.renumber(id);
                    handler.task_status = None;
                    if purpose == Purpose::TaskGet {
                        task.polls += 1;
                    }
                }
                self.start_trip(purpose, now);
                None
            }
            Stage::Trip { purpose, .. } => self.trip_step(slot, now, purpose),
            // (Only the 2025 era resumes a reply: without it that wait is never entered.)
            Stage::ResumeWait { .. } if cfg!(feature = "era-2025") => {
                self.start_trip(Purpose::Resume, now);
                None
            }
            Stage::RetryWait { .. } | Stage::ResumeWait { .. } => {
                self.stage = Stage::Ready;
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

    // Out of the op's step: inlined there it costs more than the call (36 B in `full`).
    #[inline(never)]
    fn begin_attempt(&mut self, now: Millis) {
        self.attempts += 1;
        let restart = self.attempts > 1;
        self.deadline = Deadline::new(now, self.cfg);
        self.attempt = Attempt::default();
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
            } if LISTS => {
                if restart {
                    (handler.on_item)(None);
                }
                handler.answer = None;
                handler.ttl_ms = None;
                handler.cursor.clear();
                *cursor = NO_CURSOR;
                *previous = NO_CURSOR;
                self.list_pages = 0;
            }
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                handler.text.clear();
                handler.answer = None;
            }
            _ => {}
        }
    }

    fn ready(&mut self, slot: &mut SlotState, now: Millis) {
        let Some(session) = slot.session_mut(self.target) else {
            return self.fail(Failure::NoResponse);
        };
        // A ready session's snapshot is copied straight to where the op keeps it (it is
        // large): `begin` would hand over the same copy.
        if let Some(snap) = session.snapshot() {
            self.snap = Some(snap.clone());
            return self.start_main(slot, now);
        }
        match session.begin() {
            Begin::Ready(snap) => {
                self.snap = Some(snap);
                self.start_main(slot, now);
            }
            Begin::Start { attempt } => {
                self.snap = None;
                match (self.cfg.era.effective(), slot.era(self.target)) {
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
            Begin::Wait { attempt } => self.stage = Stage::Waiting { attempt },
        }
    }

    /// Another op runs the handshake `attempt`: wait for it; its failure is the op's too.
    // (Inlined into the op's step, its one caller: 16 B less in `full` than the call.)
    #[inline(always)]
    fn waiting(&mut self, slot: &mut SlotState, now: Millis, attempt: u32) -> Option<Action> {
        let session = slot.session(self.target);
        let phase = session.map(|s| s.phase());
        if phase == Some(&Phase::Initializing { attempt }) {
            if now >= self.deadline.at {
                self.fail(Failure::TimedOut);
                return None;
            }
            self.timeout = self.deadline.at;
            return Some(Action::Sleep { slot: true });
        }
        // A ready session's snapshot is taken by `ready` (one copy of that path); a session
        // that is fresh again starts over there.
        if !matches!(phase, Some(Phase::Ready(_)))
            && let Some(Err(f)) = session.and_then(|s| s.outcome_of(attempt))
        {
            self.fail(f);
            return None;
        }
        self.stage = Stage::Ready;
        None
    }

    fn start_initialize(&mut self, slot: &mut SlotState, attempt: u32, now: Millis) {
        self.init.id = slot.next_id();
        self.init.version = None;
        self.snap = None;
        self.start_trip(Purpose::Initialize { attempt }, now);
    }

    // Inlined into its callers (`ready`, and with the probe `probe_done`): 16 B less in
    // `full` than one copy.
    /// The server speaks the 2026-07-28 era: no handshake, no session.
    #[inline(always)]
    fn modern_ready(&mut self, slot: &mut SlotState, attempt: u32, now: Millis) {
        self.snap = Some(Snapshot {
            session_id: None,
            version: ProtocolVersion::V2026_07_28,
        });
        self.handshake_done(slot, attempt, now);
    }

    /// The handshake `attempt` is done with the op's snapshot: the session is ready for its
    /// waiters, and the request goes (one copy for both eras; one caller without the 2025
    /// era, inlined there).
    #[cfg_attr(not(feature = "era-2025"), inline(always))]
    fn handshake_done(&mut self, slot: &mut SlotState, attempt: u32, now: Millis) {
        if let (Some(session), Some(snap)) = (slot.session_mut(self.target), self.snap.as_ref()) {
            // (Only the 2025 era's handshake gives a session id: without it the compiler sees
            // there is none to keep.)
            let id = snap.id().filter(|_| cfg!(feature = "era-2025"));
            session.handshake_succeeded(attempt, id, snap.version);
        }
        slot.changed = true;
        self.start_main(slot, now);
    }

    /// The op's last request went to its server in the 2026-07-28 era (its error codes are
    /// read by that era's numbering).
    pub fn spoke_modern(&self) -> bool {
        self.modern()
    }

    fn modern(&self) -> bool {
        // A build with one era speaks it, snapshot or not (and the compiler sees it).
        if !cfg!(feature = "era-2025") || !cfg!(feature = "era-2026") {
            return cfg!(feature = "era-2026");
        }
        self.snap.as_ref().is_some_and(|s| s.version.is_modern())
    }

    /// Before a 2026 `tools/call`: the server's tools are listed once per run for their
    /// `x-mcp-header` annotations, then the call carries its tool's.
    fn start_main(&mut self, slot: &mut SlotState, now: Millis) {
        let (modern, target) = (self.modern(), self.target);
        // A 2025-11-25 session with the tasks extension on: the server's list says which
        // tools run only as tasks (`execution.taskSupport: "required"`).
        let session_tasks = !modern
            && self.cfg.capabilities.tasks_on()
            && self
                .snap
                .as_ref()
                .is_some_and(|s| s.version == ProtocolVersion::V2025_11_25);
        // The tasks extension is declared (and a task taken) in the 2026 era only (a build
        // without it never reads the flag, so never writes it).
        if cfg!(feature = "tasks")
            && let Job::Call { handler, .. } = &mut self.job
        {
            handler.tasks = modern && self.cfg.capabilities.tasks_on();
        }
        if self.tasking.pinned() && self.is_call() {
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
                handler.list_page = None;
                handler.error.clear();
                // The list's cursor goes to `text`: a round's answers there are lost, and the
                // server asks again. (Only a build with input rounds has them.)
                if cfg!(feature = "input") {
                    handler.input_ready = false;
                }
                handler.text.clear();
                self.start_trip(Purpose::HeaderList, now);
                return;
            }
            handler.error.clear();
            if !(cfg!(feature = "input") && handler.input_ready) {
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
        self.reset_task_polling();
        self.stage = Stage::TaskWait { at: now };
    }

    fn start_request(&mut self, slot: &mut SlotState, now: Millis) {
        // A 2025-era call in an HTTP session: the session's GET stream should be open. (Only
        // that era resumes or listens: without it these are never read, so never written.)
        if cfg!(feature = "era-2025") {
            self.resumes = 0;
            self.listen_news = self.is_call()
                && !self.modern()
                && !self.cfg.is_stdio(self.target)
                && self.snap.as_ref().is_some_and(|s| s.session_id.is_some());
        }
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
            Job::List { handler, .. } if LISTS => handler.renumber(id),
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                handler.renumber(id)
            }
            _ => {}
        }
    }
}

mod call;
mod close;
mod task;
mod trip;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::SliceBuf;

    /// An op lives in its caller's future (or static task on the edge) for the whole call: it
    /// stays small. Its largest parts are the reply decoder (about 1 KiB, SSE ids included),
    /// the session snapshot (256-byte session id), the resume point (128-byte event id) and,
    /// since the 2026 era and tasks, the probe's state and a task id (64 bytes): 2 440 bytes;
    /// Since the deferred tail, the framing left of a late-ending stream (48 bytes): 2 592.
    /// [`COURTESY_BUILT`] says whether any courtesy purpose is built.
    #[test]
    fn courtesy_built_matches_the_purposes() {
        let any = [Purpose::Cancel, Purpose::Courtesy, Purpose::TaskCancel]
            .into_iter()
            .any(Purpose::is_courtesy);
        assert_eq!(COURTESY_BUILT, any);
    }

    #[test]
    fn an_op_stays_small() {
        let call = core::mem::size_of::<Op<'static, SliceBuf<'static>, &'static [u8]>>();
        println!("Op: {call} bytes");
        assert!(call <= 2624, "an op is {call} bytes, over its cap of 2624");
    }
}
