//! A call that became a task (the tasks extension): its polls, input rounds, result and
//! deadline.

use super::*;
use crate::wire::failure::TaskEnd;

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// A `tasks/get` came back: the result, another poll, or the task's end.
    pub(super) fn task_polled(&mut self, now: Millis, ok: Option<bool>) {
        // An unknown or expired task: a JSON-RPC error with an HTTP error status.
        let answered = ok.is_none()
            && matches!(
                self.failure,
                Some(Failure::Status {
                    code: 400 | 404,
                    ..
                })
            )
            && error_of(self.reply.bytes()).0
            && self.deliver_error_body();
        let (failed, timed_out) = self.task_trip_failed(ok);
        let failed = failed && !answered;
        let Job::Call { handler, task, .. } = &mut self.job else {
            return self.fail(Failure::NoResponse);
        };
        let interval = handler.task().map_or(1_000, |t| t.interval_ms);
        if timed_out && now >= self.deadline.at {
            return self.task_timed_out();
        }
        if failed {
            // A lost poll loses nothing: `tasks/get` is asked again (new id, fresh
            // connection); only a server gone for good ends the call, naming the task.
            task.failures += 1;
            if task.failures >= MAX_TASK_POLL_FAILURES {
                return self.task_failed(TaskEnd::Lost);
            }
            return self.schedule_poll(now, interval);
        }
        task.failures = 0;
        match (&handler.answer, handler.task_status.take()) {
            (Some(Ok(_)), _) => self.stage = Stage::AttemptEnded,
            (Some(Err(u)), _) => {
                let f = u.failure();
                self.fail(f);
            }
            (None, Some(crate::machine::handlers::TaskStatus::Cancelled)) => {
                self.task_failed(TaskEnd::Cancelled)
            }
            (None, Some(crate::machine::handlers::TaskStatus::Gone)) => {
                self.task_failed(TaskEnd::Gone)
            }
            // Ended (2025-11-25 form): its result comes by `tasks/result`.
            (None, Some(crate::machine::handlers::TaskStatus::ResultReady)) => {
                self.stage = Stage::TaskSend(Purpose::TaskResult);
            }
            // The slot's policy answered the task's requests: `tasks/update`, then a poll.
            (None, Some(crate::machine::handlers::TaskStatus::InputAnswered))
                if self.input_rounds < MAX_INPUT_ROUNDS =>
            {
                self.input_rounds += 1;
                self.stage = Stage::TaskSend(Purpose::TaskUpdate);
            }
            (None, Some(crate::machine::handlers::TaskStatus::InputAnswered)) => {
                self.failure = Some(Failure::InputRequired(truncated(
                    "more rounds of input than a call answers (8)",
                )));
                self.stage = Stage::TaskSend(Purpose::TaskCancel);
            }
            // No input handler: the task is cancelled and the call says what was asked.
            (None, Some(crate::machine::handlers::TaskStatus::InputRequired(asked))) => {
                self.failure = Some(Failure::InputRequired(asked));
                self.stage = Stage::TaskSend(Purpose::TaskCancel);
            }
            (None, _) => self.schedule_poll(now, interval),
        }
    }

    /// `tasks/result` came back (the 2025-11-25 form): the tool's result or the server's
    /// refusal ends the call; a lost answer is asked for again after the next poll (both are
    /// safe to repeat).
    pub(super) fn task_result_fetched(&mut self, now: Millis, ok: Option<bool>) {
        let (failed, timed_out) = self.task_trip_failed(ok);
        let answered = match &self.job {
            Job::Call { handler, .. } => handler.answer.is_some(),
            _ => false,
        };
        if answered && !failed {
            self.stage = Stage::AttemptEnded;
        } else if timed_out && now >= self.deadline.at {
            self.task_timed_out();
        } else {
            if self.task_poll_lost() {
                return self.task_failed(TaskEnd::Lost);
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
    pub(super) fn task_updated(&mut self, now: Millis, ok: Option<bool>) {
        let timed_out = self.task_trip_failed(ok).1;
        if let Job::Call { handler, .. } = &mut self.job {
            handler.input_ready = false;
            handler.task_status = None;
            handler.answer = None;
            handler.text.clear();
        }
        if timed_out && now >= self.deadline.at {
            return self.task_timed_out();
        }
        self.stage = Stage::TaskWait { at: now };
    }

    /// A task trip's end (`ok` as [`trip_done`](Self::trip_done) has it): whether it failed
    /// and whether that was its deadline; a failure is taken out of the op (a task's trip
    /// ends with its own, or none). Read where it lies: a failure is large.
    fn task_trip_failed(&mut self, ok: Option<bool>) -> (bool, bool) {
        if ok.is_some() {
            return (false, false);
        }
        (true, matches!(self.failure.take(), Some(Failure::TimedOut)))
    }

    /// The call's end as a task that ended without its result (`end`): the attempt ends with
    /// a failure naming the task (one copy of the id, read where it lies; the failure made
    /// in place, it is large).
    fn task_failed(&mut self, end: TaskEnd) {
        let id = self.task_id().map(truncated).unwrap_or_default();
        self.fail(Failure::Task { id, end });
    }

    /// The call just became a task (or attached to one): its polling starts afresh.
    pub(super) fn reset_task_polling(&mut self) {
        if let Job::Call { task, .. } = &mut self.job {
            *task = TaskState::default();
        }
    }

    /// One more task request failed in a row: true when that many mean the task's server is
    /// lost (always for an op that is not a call, which has no task to poll).
    fn task_poll_lost(&mut self) -> bool {
        match &mut self.job {
            Job::Call { task, .. } => {
                task.failures += 1;
                task.failures >= MAX_TASK_POLL_FAILURES
            }
            _ => true,
        }
    }

    /// The next `tasks/get`: a ramp (20, 40, 80 … ms) up to the server's interval, never
    /// under the floor (a `0` must not spin), never past the deadline.
    pub(super) fn schedule_poll(&mut self, now: Millis, interval: u64) {
        let polls = match &self.job {
            Job::Call { task, .. } => task.polls,
            _ => 0,
        };
        let ramp = TASK_POLL_FLOOR_MS.saturating_mul(1 << polls.min(10));
        let delay = ramp.min(interval.max(TASK_POLL_FLOOR_MS));
        self.stage = Stage::TaskWait {
            at: now.saturating_add(delay).min(self.deadline.at),
        };
    }

    /// The deadline passed while the call was a task: one `tasks/cancel`, then the call fails
    /// naming the task.
    // (Inlined into its callers: 24 B less in `full` than the call.)
    #[inline(always)]
    pub(super) fn task_timed_out(&mut self) {
        self.task_failed(TaskEnd::TimedOut);
        self.stage = Stage::TaskSend(Purpose::TaskCancel);
    }

    pub(super) fn clear_in_flight(&self) {
        if self.is_call()
            && let Some(w) = self.cfg.in_flight
        {
            w.clear();
        }
    }

    /// The call timed out or stalled: tell the server (best effort), then fail with the
    /// failure kept (`Op::failure`). In the 2026 era closing the stream is the cancel.
    pub(super) fn cancel_after(&mut self, now: Millis) {
        self.clear_in_flight();
        // Over stdio there is no stream to close: the notification is the only cancel.
        if self.modern() && !self.cfg.is_stdio(self.target) {
            self.stage = Stage::AttemptEnded;
        } else {
            self.start_trip(Purpose::Cancel, now);
        }
    }
}
