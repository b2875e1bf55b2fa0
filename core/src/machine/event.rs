//! What happened in an op or a slot, for the adapter's ledger and timeline: [`Event`].
//!
//! The machine decides; it does not meter. An adapter takes the events after each poll
//! ([`Op::poll_event`](super::Op::poll_event), then
//! [`SlotState::poll_event`](super::SlotState::poll_event) when the op is done) and hands each
//! to the op's [`Metering`](super::Metering), which turns it into ledger records and timeline
//! events. Every event an adapter must forward:
//!
//! | event | from | becomes |
//! | --- | --- | --- |
//! | [`Event::Attempt`] | [`Op::poll_event`](super::Op::poll_event), after [`Action::Report`](super::Action::Report) | a ledger record for every attempt but a call's last; `mcp.fallback_used`, `mcp.no_healthy_tool` |
//! | [`Event::TaskStarted`] | [`Op::poll_event`](super::Op::poll_event), after [`Action::TaskStarted`](super::Action::TaskStarted) | a `task` event with status `working` |
//! | [`Event::Era`] | [`SlotState::poll_event`](super::SlotState::poll_event) | an `era` event, once per server and run |
//!
//! Two more things an adapter is told rather than works out: what a message on a session's
//! GET stream is ([`listen::heard`](super::listen::heard): a request to answer, or
//! `notifications/tools/list_changed`, which makes the slot's tool list stale, as
//! [`SlotState::take_tools_list_changed`](super::SlotState::take_tools_list_changed) does for
//! one on a call's stream), and which server a list came from (the `Ok` of
//! [`Driver::list`](crate::drive::Driver::list), [`Op::target`](super::Op::target) once done).
//!
//! The rest of a call's record (its result's ledger record, its `tool_error`, its task's end)
//! comes from the finished op itself ([`Metering::settle`](super::Metering::settle) and
//! [`Metering::finish`](super::Metering::finish)). A server's request on a call's stream
//! is an action, not an event ([`Action::Respond`](super::Action::Respond)): the adapter
//! answers it.
//!
//! Progress and log notifications are not events either: the call's reply handler hands each
//! to the slot's observers ([`SlotConfig::on_progress`](super::SlotConfig::on_progress),
//! [`SlotConfig::on_log`](super::SlotConfig::on_log)) redacted, the moment it is parsed, so
//! the caller sees it while the call runs. As an event it would have to wait in the op,
//! unescaped and redacted, until the adapter polled it (a message of up to
//! [`MAX_PROGRESS_MESSAGE`](super::MAX_PROGRESS_MESSAGE) bytes and its numbers: about 300
//! bytes more in every op, which stays under 2 624), and the reply parser would have to stop
//! after each one so that several in one read are not lost.

use crate::harness::failover::{AttemptOutcome, Target};

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

/// One thing that happened, once (see the module docs for where each comes from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// One server's attempt ended.
    Attempt {
        /// How, and what the failover says about it.
        report: Report,
        /// Bytes of the (redacted) answer the attempt left in `text`: its evidence bytes.
        text_len: usize,
    },
    /// The call became a task on its server, which polls it from now on.
    TaskStarted {
        /// The task's id.
        task: &'a str,
    },
    /// A server's era became known (each server's once per run).
    Era {
        /// Which server.
        target: Target,
        /// It speaks the 2026-07-28 era.
        modern: bool,
    },
}
