//! The end of an attempt (failover decides), the slot's close and a dropped call's cancel.

use super::*;

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// The attempt ended: failover decides whether another server is tried. (Inlined into
    /// the op's step: minimal 48 B, full 108 B less than the call.)
    pub(super) fn attempt_ended(&mut self, slot: &mut SlotState) -> Action {
        self.clear_in_flight();
        // A call's deadline or idle timeout names its limit and whether the tool may still
        // be running (issue 27).
        if self.is_call() {
            // (Changed where it lies: a failure is large.)
            let sent = self.attempt.call_sent;
            match &mut self.failure {
                Some(f @ Failure::TimedOut) => {
                    *f = Failure::CallTimedOut {
                        ms: self.cfg.timeout_ms,
                        sent,
                    }
                }
                Some(Failure::Stalled { call, .. }) => *call = sent,
                _ => {}
            }
        }
        let failed = self.failure.is_some();
        let (outcome, next, fallback_used, no_healthy_tool) = match &self.job {
            Job::Call { handler, tool, .. } => {
                let task = handler.task().is_some();
                // A local failure says nothing about the servers, and a task lives on its
                // server (never a second run on the fallback): no failover.
                if self.failure.as_ref().is_some_and(Failure::is_local) || (task && failed) {
                    (AttemptOutcome::Unreachable, None, false, false)
                } else if task && handler.answer.is_none() {
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
            // (Never taken where the op can only be a call.)
            _ if !LISTS && !OTHERS => (AttemptOutcome::Unreachable, None, false, false),
            job => {
                let answer = match job {
                    Job::List { handler, .. } if LISTS => handler.answer.as_ref(),
                    Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                        handler.answer.as_ref()
                    }
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
                // A task's request goes to the task's server alone.
                let next = match self.tasking.pinned() {
                    true => None,
                    false => slot.failover.after_list_attempt(self.target, outcome),
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
    #[cfg_attr(not(feature = "era-2025"), inline(always))]
    pub(super) fn close_next(&mut self, slot: &mut SlotState, now: Millis) {
        // A build without the 2025 era has no session ids: no `DELETE` to send, every session
        // is forgotten at once.
        if !cfg!(feature = "era-2025") {
            for target in [Target::Primary, Target::Fallback] {
                if self.cfg.endpoint(target).is_some()
                    && let Some(session) = slot.session_mut(target)
                {
                    session.reset();
                }
            }
            self.stage = Stage::Done;
            return;
        }
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
            let Some(snap) = slot.session(target).and_then(|x| x.snapshot()) else {
                continue;
            };
            // Copied straight to where the op keeps it (a snapshot is large), only when sent.
            let send = snap.session_id.is_some() && !slot.failover.is_dead(target);
            if send {
                self.snap = Some(snap.clone());
            }
            if let Some(session) = slot.session_mut(target) {
                session.reset();
            }
            if !send {
                continue;
            }
            self.target = target;
            self.start_trip(Purpose::Courtesy, now);
            return;
        }
    }

    /// A dropped call's cancel: only in a live server's session.
    pub(super) fn cancel_start(&mut self, slot: &mut SlotState, now: Millis, _id: u64) {
        // Without the 2025 era every session is a 2026 one: the closed connection was the
        // cancel.
        if !cfg!(feature = "era-2025") {
            self.stage = Stage::Done;
            return;
        }
        let snap = if slot.failover.is_dead(self.target) || self.cfg.endpoint(self.target).is_none()
        {
            None
        } else {
            slot.session(self.target).and_then(|x| x.snapshot())
        };
        match snap {
            // In the 2026 era the closed connection was the cancel. (Copied straight to where
            // the op keeps it: a snapshot is large.)
            Some(snap) if !snap.version.is_modern() => {
                self.snap = Some(snap.clone());
                self.start_trip(Purpose::Courtesy, now);
            }
            _ => self.stage = Stage::Done,
        }
    }
}
