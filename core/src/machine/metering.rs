//! A call's or a request's metering and timeline, as plain functions of what the op did:
//! [`Metering`].
//!
//! The run rules: every attempt of a tool call is on the ledger (`tool_calls: 1`, its evidence
//! bytes; a transport failure none), also one whose future is dropped (then a transport
//! failure and a `tool_error` "cancelled" on the timeline); a call's failover is told
//! (`mcp.fallback_used`, `mcp.no_healthy_tool`); a task's start and end are told once each;
//! each server's era once per run, on the timeline of the call that found it; the result's
//! failure is a `tool_error`. A content-bearing request is metered like a call, each attempt
//! its own record. None of this awaits: an adapter (or a test) feeds it the op's events
//! ([`Metering::forward`]) and the finished op ([`Metering::settle`], [`Metering::finish`]),
//! and keeps the value alive while the op runs, so that dropping it mid-attempt meters the
//! attempt ([`Metering::begin`]).

#[cfg(feature = "tasks")]
use heapless::String;

#[cfg(feature = "tasks")]
use super::config::MAX_TASK_ID;
use super::config::{CallBuffers, SlotConfig};
use super::event::Event;
use super::handlers::{
    Answered, ListError, MethodError, as_text, redact_list_error, write_failure, write_words,
};
use super::op::{Answer, Op};
use super::{Millis, SlotState};
use crate::buf::Buf;
use crate::buf::StrSink;
use crate::harness::events::{Timeline, TimelineEvent};
use crate::harness::failover::{AttemptOutcome, Target};
use crate::harness::meter::{Ledger, LedgerRecord};
use crate::harness::result::{Kind, ToolResult, write_tool_error};
use crate::wire::failure::Failure;
use crate::wire::json::Value;

/// What a tool call does with a task its server makes of it (the tasks extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tasking<'t> {
    /// Polls the task the call becomes until it ends (a task is transparent).
    Wait,
    /// Ends as soon as the call is a task, handing its id back.
    Detach,
    /// Sends no `tools/call`: follows the task `task` an earlier call became on `target`.
    Attach {
        /// The task's server.
        target: Target,
        /// The task's id.
        task: &'t str,
    },
}

impl<'o, B: Buf, Sec: AsRef<[u8]>> Op<'o, B, Sec> {
    /// A call of `tool` with `args` as `tasking` says: [`Op::call`], [`Op::detached`] or
    /// [`Op::attach`].
    pub fn tool_call(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        call: (&'o str, Option<Value<'o>>),
        tasking: Tasking<'o>,
    ) -> Self {
        Self::tool_call_as(cfg, bufs, secrets, call, tasking)
    }
}

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// [`Op::tool_call`], for an op of any `LISTS` and `OTHERS` (the driver's: false).
    pub(crate) fn tool_call_as(
        cfg: &'o SlotConfig<'o>,
        bufs: &'o mut CallBuffers<'_, B>,
        secrets: &'o [Sec],
        (tool, args): (&'o str, Option<Value<'o>>),
        tasking: Tasking<'o>,
    ) -> Self {
        match tasking {
            Tasking::Wait => Self::call_as(cfg, bufs, secrets, tool, args),
            Tasking::Detach => Self::call_as(cfg, bufs, secrets, tool, args).detached(),
            Tasking::Attach { target, task } => {
                Self::attach_as(cfg, bufs, secrets, (target, tool), task)
            }
        }
    }
}

/// What is metered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metered {
    /// A tool call; `attached` follows an earlier call's task (which counted the call).
    Call { attached: bool },
    /// A request; `content`: it bears content and is metered like a call.
    Request { content: bool },
}

/// How a finished call came out, read from its op ([`Metering::settle`]) before the op lets
/// go of the buffers its answer is in.
#[derive(Debug, Clone)]
pub struct Settled {
    failure: Option<Failure>,
    answer: Option<Answer>,
    /// Only a build with tasks has a task to hand back (a smaller value to move without).
    #[cfg(feature = "tasks")]
    started: Option<(Target, String<MAX_TASK_ID>)>,
}

impl Settled {
    /// The running task a detached call became: its server and id.
    pub fn started(&self) -> Option<(Target, &str)> {
        #[cfg(feature = "tasks")]
        return self.started.as_ref().map(|(t, id)| (*t, id.as_str()));
        #[cfg(not(feature = "tasks"))]
        None
    }

    /// Takes [`started`](Self::started) out, for the caller to keep: moved where it lies,
    /// not copied again. `None` after the first take.
    pub fn take_started(
        &mut self,
    ) -> Option<(Target, heapless::String<{ super::config::MAX_TASK_ID }>)> {
        #[cfg(feature = "tasks")]
        return self.started.take();
        #[cfg(not(feature = "tasks"))]
        None
    }
}

/// One call's (or request's) ledger and timeline: what the events and the finished op say,
/// and a dropped attempt (see the module docs).
pub struct Metering<'m, L: Ledger, T: Timeline> {
    ledger: &'m mut L,
    timeline: &'m mut T,
    cfg: &'m SlotConfig<'m>,
    tool: &'m str,
    what: Metered,
    /// An attempt is under way: dropping the value now meters it.
    open: bool,
    /// The task's start was told.
    start_told: bool,
    start: Millis,
}

impl<'m, L: Ledger, T: Timeline> Metering<'m, L, T> {
    /// A tool call of `tool` through `cfg`'s slot, begun at `now`.
    pub fn call(
        cfg: &'m SlotConfig<'m>,
        tool: &'m str,
        tasking: &Tasking<'_>,
        (ledger, timeline): (&'m mut L, &'m mut T),
        now: Millis,
    ) -> Self {
        let attached = matches!(tasking, Tasking::Attach { .. });
        Self::new(
            cfg,
            tool,
            Metered::Call { attached },
            (ledger, timeline),
            now,
        )
    }

    /// A request of `method` (`content`: it bears content, [`crate::wire::jsonrpc::Request::
    /// bears_content`]), begun at `now`.
    pub fn request(
        cfg: &'m SlotConfig<'m>,
        method: &'m str,
        content: bool,
        (ledger, timeline): (&'m mut L, &'m mut T),
        now: Millis,
    ) -> Self {
        Self::new(
            cfg,
            method,
            Metered::Request { content },
            (ledger, timeline),
            now,
        )
    }

    fn new(
        cfg: &'m SlotConfig<'m>,
        tool: &'m str,
        what: Metered,
        (ledger, timeline): (&'m mut L, &'m mut T),
        start: Millis,
    ) -> Self {
        Metering {
            ledger,
            timeline,
            cfg,
            tool,
            what,
            open: false,
            start_told: false,
            start,
        }
    }

    /// An attempt may be under way (the op is being pumped): dropping the value before
    /// [`end`](Self::end) meters it as a transport failure with a `tool_error` "cancelled".
    pub fn begin(&mut self) {
        self.open = !matches!(self.what, Metered::Request { content: false });
    }

    /// [`begin`](Self::begin) for a tool call's metering (the driver's calls): a call's
    /// attempt is always metered when dropped.
    #[cfg(feature = "drive")]
    pub(crate) fn begin_call(&mut self) {
        self.open = true;
    }

    /// The op stopped (it reports an attempt, or is done): nothing is open.
    pub fn end(&mut self) {
        self.open = false;
    }

    /// Forwards one event of the op or the slot to the ledger and the timeline.
    pub fn forward(&mut self, event: Event<'_>) {
        self.forward_as(event, self.what);
    }

    /// [`forward`](Self::forward) for a tool call's metering (the driver's calls): no code for
    /// a request's ledger where only calls are metered.
    #[cfg(feature = "drive")]
    pub(crate) fn forward_call(&mut self, event: Event<'_>) {
        self.forward_as(event, Metered::Call { attached: false });
    }

    /// [`forward`](Self::forward) as `what` is metered (where it is known, the compiler sees
    /// it).
    #[inline(always)]
    fn forward_as(&mut self, event: Event<'_>, what: Metered) {
        match (event, what) {
            (Event::Attempt { report, text_len }, Metered::Call { .. }) => {
                // Every attempt but the last is metered here; the last with the result.
                if !report.last {
                    self.ledger.record(match report.outcome {
                        AttemptOutcome::Unreachable => LedgerRecord::transport_failure(),
                        _ => LedgerRecord::answered(text_len as u64),
                    });
                }
                if report.fallback_used {
                    self.timeline.emit(&TimelineEvent::FallbackUsed {
                        slot: self.cfg.slot,
                        tool: self.tool,
                        primary: self.cfg.primary_label,
                        fallback: self.cfg.fallback_label,
                    });
                }
                if report.no_healthy_tool {
                    self.timeline.emit(&TimelineEvent::NoHealthyTool {
                        slot: self.cfg.slot,
                        tool: self.tool,
                    });
                }
            }
            (Event::Attempt { report, text_len }, Metered::Request { content: true }) => {
                self.ledger.record(match report.outcome {
                    AttemptOutcome::Answered => LedgerRecord::answered(text_len as u64),
                    AttemptOutcome::Unreachable => LedgerRecord::transport_failure(),
                    _ => LedgerRecord::answered(0),
                });
            }
            (Event::Attempt { .. }, Metered::Request { content: false }) => {}
            (Event::TaskStarted { task }, _) if cfg!(feature = "tasks") => {
                // When the call becomes a task: a dropped call's task is on the timeline too.
                self.timeline.emit(&TimelineEvent::Task {
                    slot: self.cfg.slot,
                    tool: self.tool,
                    task,
                    status: "working",
                });
                self.start_told = true;
            }
            // Only with their capabilities (features `tasks`, `probe`).
            (Event::TaskStarted { .. }, _) => {}
            (Event::Era { .. }, _) if !cfg!(feature = "probe") => {}
            (Event::Era { target, modern }, _) => {
                self.timeline.emit(&TimelineEvent::Era {
                    slot: self.cfg.slot,
                    tool: self.tool,
                    server: match target {
                        Target::Primary => self.cfg.primary_label,
                        Target::Fallback => self.cfg.fallback_label,
                    },
                    era: if modern {
                        crate::wire::era::MODERN_VERSION
                    } else {
                        "legacy"
                    },
                });
            }
        }
    }

    /// Forwards the slot's news ([`SlotState::poll_event`]): call it once the op is done.
    pub fn forward_slot(&mut self, slot: &mut SlotState) {
        while let Some(event) = slot.poll_event() {
            self.forward(event);
        }
    }

    /// Reads how a finished call's op came out (its failure taken out of it), and tells its
    /// task's start and end (once each: a detached call says only its start, the call that
    /// follows it only its end).
    pub fn settle<B, Sec, F>(&mut self, op: &mut Op<'_, B, Sec, F>) -> Settled
    where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
    {
        self.settle_as(op)
    }

    /// [`settle`](Self::settle), for an op of any `LISTS` and `OTHERS` (the driver's calls).
    pub(crate) fn settle_as<B, Sec, F, const LISTS: bool, const OTHERS: bool>(
        &mut self,
        op: &mut Op<'_, B, Sec, F, LISTS, OTHERS>,
    ) -> Settled
    where
        B: Buf,
        Sec: AsRef<[u8]>,
        F: FnMut(Option<(Value<'_>, &[u8])>),
    {
        let attached = matches!(self.what, Metered::Call { attached: true });
        // Looked up once (one call for every use below).
        let task = op.task_id();
        // A detached call that became a task hands it back.
        let detached = op.detached_task() && task.is_some();
        #[cfg(feature = "tasks")]
        let started = task
            .filter(|_| detached)
            .map(|id| (op.target(), crate::buf::truncated(id)));
        if let Some(task) = task {
            let start = (!attached && !self.start_told).then_some("working");
            let end = (!detached).then(|| op.task_end());
            for status in start.into_iter().chain(end) {
                self.timeline.emit(&TimelineEvent::Task {
                    slot: self.cfg.slot,
                    tool: self.tool,
                    task,
                    status,
                });
            }
        }
        let answer = op.answer();
        // Taken, not cloned: the op is done with (one `Failure` copy less in the code).
        let failure = match (op.take_failure(), answer) {
            (Some(f), _) => Some(f),
            (None, None) if detached => None,
            (None, None) => Some(Failure::NoResponse),
            (None, Some(_)) => None,
        };
        Settled {
            failure,
            answer,
            #[cfg(feature = "tasks")]
            started,
        }
    }

    /// The call's result from how it [`settle`](Self::settle)d and what its op left in
    /// `bufs` (the failure text written, redacted, into `bufs.error`), at `now`: metered
    /// (no second tool call for an attached call) and its failure on the timeline.
    pub fn finish<'b, B: Buf, Sec: AsRef<[u8]>>(
        &mut self,
        settled: &Settled,
        (secrets, keep_raw): (&[Sec], bool),
        bufs: &'b mut CallBuffers<'_, B>,
        now: Millis,
    ) -> ToolResult<'b> {
        let latency = now.saturating_sub(self.start);
        let (failure, answer) = (&settled.failure, settled.answer);
        error_text_apart(secrets, failure, answer, bufs);
        let bufs: &'b CallBuffers<'_, B> = bufs;
        let raw = (keep_raw && !bufs.raw.is_empty()).then(|| bufs.raw.bytes());
        // Each text read once, for every shape.
        let (text, error) = (as_text(&bufs.text), as_text(&bufs.error));
        let out = match (failure, answer) {
            (Some(f), _) => ToolResult::unreachable(error, f.cause(), latency),
            (None, Some(Answer::Result { is_error: false })) => {
                ToolResult::answered(text, latency, raw)
            }
            (None, Some(Answer::Result { is_error: true })) => {
                ToolResult::tool_error(text, error, latency, raw)
            }
            (None, Some(Answer::Refused { code, unknown_tool })) => {
                ToolResult::refused(error, code, unknown_tool, latency, raw)
            }
            (None, None) if settled.started().is_some() => ToolResult::answered("", latency, None),
            (None, None) => ToolResult::unreachable(error, Failure::NoResponse.cause(), latency),
        };
        let mut record = out.ledger_record();
        if matches!(self.what, Metered::Call { attached: true }) {
            // The call that made the task counted the tool call.
            record.tool_calls = 0;
        }
        self.ledger.record(record);
        if let Some(event) = out.timeline_event(self.cfg.slot, self.tool) {
            let answered = matches!(out.kind(), Kind::ToolError | Kind::Refused { .. });
            self.timeline.emit_failure(&event, answered);
        }
        out
    }

    /// A request's answer from its op's outcome (`modern`: it came in the 2026 era) and what
    /// it left in `bufs`, at `now`: a content-bearing request's failure is a `tool_error`
    /// naming the method (the attempts were metered as they ended).
    pub fn finish_request<'b, B: Buf, Sec: AsRef<[u8]>>(
        &mut self,
        (outcome, modern): (Result<(), ListError>, bool),
        (method, secrets): (&'static str, &[Sec]),
        bufs: &'b mut CallBuffers<'_, B>,
        now: Millis,
    ) -> Result<Answered<'b>, MethodError> {
        match outcome {
            Ok(()) => Ok(Answered {
                result: bufs.text.bytes(),
                latency_ms: now.saturating_sub(self.start),
            }),
            Err(e) => {
                let error = MethodError {
                    method,
                    error: redact_list_error(secrets, e),
                    modern,
                };
                if self.what == (Metered::Request { content: true }) {
                    write_words(secrets, &error, &mut bufs.error);
                    let event = TimelineEvent::ToolError {
                        slot: self.cfg.slot,
                        tool: self.tool,
                        error: as_text(&bufs.error),
                    };
                    self.timeline.emit_failure(&event, false);
                }
                Err(error)
            }
        }
    }
}

impl<L: Ledger, T: Timeline> Drop for Metering<'_, L, T> {
    fn drop(&mut self) {
        if self.open {
            let mut record = LedgerRecord::transport_failure();
            record.tool_calls = u32::from(!matches!(self.what, Metered::Call { attached: true }));
            self.ledger.record(record);
            let mut line = StrSink::<64>::default();
            let _ = crate::buf::Words::words(&Failure::Cancelled, &mut line);
            let event = TimelineEvent::ToolError {
                slot: self.cfg.slot,
                tool: self.tool,
                error: line.as_str(),
            };
            self.timeline.emit_failure(&event, false);
        }
    }
}

/// A call's `error` text, as its failure or tool error says, out of the call's future (its
/// words and numbers not in the future's poll).
#[inline(never)]
fn error_text_apart<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    failure: &Option<Failure>,
    answer: Option<Answer>,
    bufs: &mut CallBuffers<'_, B>,
) {
    match (failure, answer) {
        (Some(f), _) => write_failure(secrets, f, &mut bufs.error),
        (None, Some(Answer::Result { is_error: true })) => {
            bufs.error.clear();
            if write_tool_error(as_text(&bufs.text), &mut bufs.error).is_err() {
                bufs.error.clear();
            }
        }
        _ => {}
    }
}
