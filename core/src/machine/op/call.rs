//! What a round trip's end means for the op: the probe's verdict, the handshake, the
//! header list, the call's or list's or request's answer (and the era and version retries).

use super::*;

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    /// A round trip ended: `ok` says whether its response is in (`Some(true)`) or its reply
    /// ended without it (`Some(false)`); `None`: it failed, and (unless it was a courtesy) its
    /// failure is in `Op::failure`.
    pub(super) fn trip_done(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        purpose: Purpose,
        ok: Option<bool>,
    ) {
        // A trip the build leaves out never ran (`start_trip` refuses it, naming what is not
        // built): never taken, but it lets every arm of such a trip fold away.
        if purpose.not_built().is_some() {
            return self.fail(Failure::NoResponse);
        }
        match purpose {
            Purpose::Probe { attempt } => self.probe_done(slot, now, attempt, ok),
            Purpose::HeaderList => self.header_list_done(slot, now, ok),
            Purpose::TaskGet => self.task_polled(now, ok),
            Purpose::TaskUpdate => self.task_updated(now, ok),
            Purpose::TaskResult => self.task_result_fetched(now, ok),
            Purpose::TaskCancel => {
                self.courtesy = None;
                self.stage = Stage::AttemptEnded;
            }
            // A failed handshake's failure is kept where it lies (`Op::failure`): it is large.
            Purpose::Initialize { attempt } => {
                if ok.is_some() {
                    match (self.init.version.take(), self.snap.as_mut()) {
                        (Some(Ok(version)), Some(snap)) => {
                            snap.version = version;
                            return self.start_trip(Purpose::Initialized { attempt }, now);
                        }
                        (Some(Err(f)), _) => self.failure = Some(f),
                        _ => self.failure = Some(Failure::NoResponse),
                    }
                }
                self.handshake_failed(slot, attempt)
            }
            Purpose::Initialized { attempt } => {
                if ok.is_none() {
                    return self.handshake_failed(slot, attempt);
                }
                self.handshake_done(slot, attempt, now);
            }
            Purpose::Main | Purpose::Resume => self.main_done(slot, now, ok),
            Purpose::Cancel => {
                self.courtesy = None;
                self.stage = Stage::AttemptEnded;
            }
            Purpose::Courtesy => {
                self.courtesy = None;
                match self.job {
                    Job::Close(_) if OTHERS => self.close_next(slot, now),
                    _ => self.stage = Stage::Done,
                }
            }
        }
    }

    /// The status code of a failed trip's failure, when it is an HTTP error status.
    fn failed_status(&self, ok: Option<bool>) -> Option<u16> {
        match (&self.failure, ok) {
            (Some(Failure::Status { code, .. }), None) => Some(*code),
            _ => None,
        }
    }

    /// The probe's answer, judged exactly as the era's verdict table says
    /// ([`era::judge_probe`]): modern, old era (then `initialize` in the same attempt, its
    /// waiters still waiting), a re-probe at a common version, or no verdict (the call fails
    /// naming the answer; nothing is kept). `ok` as [`trip_done`](Self::trip_done) has it; a
    /// failed probe's failure is read where it lies (it is large). (Inlined into its one
    /// caller: full 52 B less than the call, since the driver's ops are not lists.)
    pub(super) fn probe_done(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        attempt: u32,
        ok: Option<bool>,
    ) {
        let verdict = match (ok, &self.failure) {
            (Some(_), _) => match self.probe.modern {
                Some(true) => EraVerdict::Modern,
                Some(false) => EraVerdict::Legacy,
                None => EraVerdict::NoVerdict,
            },
            // An error status: its body (up to 512 bytes) is in the reply buffer.
            (None, Some(Failure::Status { code, .. })) => {
                era::judge_probe(*code, Some(self.reply.bytes()))
            }
            (None, _) => EraVerdict::NoVerdict,
        };
        // A failed probe that came to a verdict leaves no failure behind.
        if ok.is_none() && !matches!(verdict, EraVerdict::NoVerdict) {
            self.failure = None;
        }
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
                self.failure = Some(Failure::VersionRefused(era::supported_list(
                    self.reply.bytes(),
                )));
                self.handshake_failed(slot, attempt);
            }
            EraVerdict::Legacy => {
                slot.set_era(self.target, false);
                self.start_initialize(slot, attempt, now);
            }
            EraVerdict::NoVerdict => {
                if ok.is_some() {
                    self.failure = Some(Failure::EmptyReply);
                }
                self.handshake_failed(slot, attempt);
            }
        }
    }

    /// A page of the 2026 `tools/list` read for annotations: the next page, or the call.
    /// (Inlined into its one caller: minimal 48 B less than the call.)
    pub(super) fn header_list_done(&mut self, slot: &mut SlotState, now: Millis, ok: Option<bool>) {
        let status = self.failed_status(ok);
        let Job::Call { handler, .. } = &mut self.job else {
            return self.fail(Failure::NoResponse);
        };
        if ok.is_none() {
            slot.set_listing(self.target, 0);
            // The failure (or the refusal that replaces it) is the attempt's.
            return match self.version_refused(status) {
                Some(true) => self.start_main(slot, now),
                _ => self.stage = Stage::AttemptEnded,
            };
        }
        if handler.list_page == Some(true) && self.list_pages + 1 < MAX_PAGES {
            self.list_pages += 1;
            self.id = slot.next_id();
            handler.renumber(self.id);
            handler.list_page = None;
            return self.start_trip(Purpose::HeaderList, now);
        }
        slot.set_annotations(self.target, handler.error.bytes());
        slot.set_listing(self.target, 0);
        self.start_main(slot, now);
    }

    /// The handshake `attempt` failed with the op's failure (`NoResponse` when none is kept):
    /// the attempt ends with it, and its waiters get a copy.
    pub(super) fn handshake_failed(&mut self, slot: &mut SlotState, attempt: u32) {
        let f = self.failure.get_or_insert(Failure::NoResponse);
        if let Some(session) = slot.session_mut(self.target) {
            session.handshake_failed(attempt, f.clone());
        }
        slot.changed = true;
        self.stage = Stage::AttemptEnded;
    }

    /// The server answered 404 to a request in the op's session: forget that session so the
    /// retry re-initializes without it.
    pub(super) fn forget_session(&mut self, slot: &mut SlotState) {
        if let Some(old) = self.snap.as_ref().and_then(Snapshot::id)
            && let Some(session) = slot.session_mut(self.target)
        {
            session.session_gone(old);
        }
        self.attempt.retried_404 = true;
        self.stage = Stage::Ready;
    }

    /// The main request's (or its resumption's) round trip ended; a failure is in
    /// `Op::failure` and stays there when it is the attempt's.
    #[inline(never)]
    pub(super) fn main_done(&mut self, slot: &mut SlotState, now: Millis, ok: Option<bool>) {
        /// What comes after the main request's round trip (a failure to end with is in
        /// `Op::failure`).
        enum Then {
            Resume(Millis),
            CancelAfter,
            Forget,
            RetryAt(Millis),
            Fail,
            Ended,
            NextPage,
            Relist,
            Poll,
            Again,
            Resend,
        }
        let deadline = self.deadline.at;
        let modern = self.modern();
        let status = self.failed_status(ok);
        // An error status's body, parsed once for the checks below: whether it is a JSON-RPC
        // error response, and its error's code.
        let (is_error, code) = match status {
            Some(_) => error_of(self.reply.bytes()),
            None => (false, None),
        };
        // An answer that says the server now speaks the other era (a 4xx ran nothing): its
        // verdict is forgotten and it is probed once more, then the request goes again. (A
        // 2026-era answer is judged by its code, as `era::era_changed` does.)
        if let Some(s) = status
            && self.cfg.era.effective() == EraSetting::Auto
            && !self.era_reprobed
            && if modern {
                s == 400 && code.is_none_or(|c| (-32019..=-32000).contains(&c))
            } else {
                era::era_changed(false, s, self.reply.bytes())
            }
        {
            self.era_reprobed = true;
            self.failure = None;
            self.clear_in_flight();
            slot.forget_era(self.target);
            self.snap = None;
            self.stage = Stage::Ready;
            return;
        }
        // -32022 (our version refused; a 4xx ran nothing): once more at the newest version
        // both sides speak, under a new id; a second refusal fails naming both lists.
        if ok.is_none()
            && modern
            && let Some(retry) = self.version_refused(status)
        {
            self.clear_in_flight();
            return if retry {
                self.start_main(slot, now)
            } else {
                self.stage = Stage::AttemptEnded
            };
        }
        // A written `tools/call` whose reply broke before its response: the tool may have run
        // (issue 27), in both eras, wherever the stream broke.
        if ok.is_none() && self.call_unanswered() {
            let broken = match self.failure {
                Some(Failure::ClosedEarly(ReadStage::Head)) => Some(Broken::InHead),
                Some(Failure::ClosedEarly(ReadStage::Body)) => Some(Broken::InBody),
                Some(Failure::ReadFailed) => Some(Broken::Reset),
                Some(Failure::NoResponse) => Some(Broken::StreamEnded),
                _ => None,
            };
            if let Some(broken) = broken {
                self.failure = Some(Failure::MayHaveRun(broken));
            }
        }
        // -32020 (a header the server wanted is missing or wrong): list the tools again and
        // send the call once more, under a new id (a 400 ran nothing).
        let header_mismatch = modern && status == Some(400) && code == Some(era::HEADER_MISMATCH);
        // In the 2026 era a JSON-RPC error comes with an HTTP error status (400, 404): it is
        // the server's answer (a refusal), not a transport failure.
        let mut ok = ok;
        if matches!(status, Some(400 | 404))
            && modern
            && !header_mismatch
            && is_error
            && self.deliver_error_body()
        {
            self.failure = None;
            ok = Some(true);
        }
        // A 429 or 503 that says when to come back.
        let retry_later = match (&self.failure, ok) {
            (
                Some(Failure::Status {
                    code: code @ (429 | 503),
                    retry_after: Some(retry_after),
                    ..
                }),
                None,
            ) => Some((*code, *retry_after)),
            _ => None,
        };
        let may_have_run = ok.is_none() && matches!(self.failure, Some(Failure::MayHaveRun(_)));
        let then = match (&mut self.job, ok) {
            (Job::Call { .. }, None) if header_mismatch && !self.relisted => Then::Relist,
            // A broken 2026 stream may have run the tool: sent again (once, new id) only when
            // the server's list says the tool is idempotent.
            (Job::Call { tool, handler, .. }, None | Some(false))
                if (may_have_run || ok == Some(false))
                    && modern
                    && handler.answer.is_none()
                    && handler.task().is_none()
                    && !self.resent
                    && slot.idempotent(self.target, tool.as_bytes()) =>
            {
                Then::Resend
            }
            // The server asked for input and the round is answered: the call goes again.
            (Job::Call { handler, .. }, Some(_))
                if cfg!(feature = "input") && handler.input_ready && handler.answer.is_none() =>
            {
                Then::Again
            }
            // The call became a task: poll it (right away first).
            (Job::Call { handler, .. }, Some(_))
                if cfg!(feature = "tasks")
                    && handler.answer.is_none()
                    && handler.task().is_some() =>
            {
                Then::Poll
            }
            (Job::Call { handler, .. }, Some(done)) => match (&handler.answer, &self.resume) {
                // A reply stream that ended without the response, from a server that gave
                // event ids: resume with GET and Last-Event-ID after its retry delay.
                // The 2026 era has no resumption: a broken stream after a written call may
                // have run the tool.
                (None, _) if !done && modern => {
                    self.failure = Some(Failure::MayHaveRun(Broken::StreamEnded));
                    Then::Fail
                }
                (None, Some((_, retry)))
                    if cfg!(feature = "era-2025") && !done && self.resumes < MAX_RESUMES =>
                {
                    let wake = now.saturating_add(u64::from(retry.unwrap_or(0)));
                    if wake >= deadline {
                        self.failure = Some(Failure::TimedOut);
                        Then::CancelAfter
                    } else {
                        Then::Resume(wake)
                    }
                }
                (Some(Ok(_)), _) => Then::Ended,
                (Some(Err(u)), _) => {
                    self.failure = Some(u.failure());
                    Then::Fail
                }
                // The stream ended (and could not be resumed) after the call was written.
                (None, _) => {
                    self.failure = Some(Failure::MayHaveRun(Broken::StreamEnded));
                    Then::Fail
                }
            },
            (Job::Call { .. }, None)
                if matches!(
                    self.failure,
                    Some(Failure::TimedOut | Failure::Stalled { .. })
                ) =>
            {
                Then::CancelAfter
            }
            (_, None)
                if cfg!(feature = "era-2025")
                    && !self.attempt.retried_404
                    && matches!(self.failure, Some(Failure::SessionExpired)) =>
            {
                Then::Forget
            }
            (Job::Call { .. }, None) if let Some((code, retry_after)) = retry_later => {
                let wake = retry_after
                    .delay_ms()
                    .map(|d| now.saturating_add(d))
                    .filter(|&wake| wake < deadline);
                match wake {
                    Some(at) if !self.attempt.retried_later && slot.take_retry() => {
                        Then::RetryAt(at)
                    }
                    _ => {
                        self.failure = Some(Failure::RetryTooLate { code, retry_after });
                        Then::Fail
                    }
                }
            }
            (
                Job::List {
                    handler,
                    cursor,
                    previous,
                },
                Some(_),
            ) if LISTS => match &handler.answer {
                Some(Ok(())) if handler.has_next => {
                    self.list_pages += 1;
                    let pages = self.list_pages;
                    let next = fnv1a(handler.cursor.bytes());
                    if pages >= MAX_PAGES || (next == *cursor && pages > 1) || next == *previous {
                        self.failure = Some(Failure::EndlessPaging);
                        Then::Fail
                    } else {
                        *previous = core::mem::replace(cursor, next);
                        handler.answer = None;
                        Then::NextPage
                    }
                }
                Some(_) => Then::Ended,
                None => {
                    self.failure = Some(Failure::NoResponse);
                    Then::Fail
                }
            },
            (Job::Request(handler), Some(_)) if !crate::machine::handlers::ONE_ERA_EDGE => {
                match handler.answer {
                    Some(_) => Then::Ended,
                    None => {
                        self.failure = Some(Failure::NoResponse);
                        Then::Fail
                    }
                }
            }
            (_, None) => Then::Fail,
            (_, Some(_)) => Then::Ended,
        };
        // The ends that keep the call in flight; every other one clears it first.
        match then {
            Then::Resume(at) => {
                self.resumes += 1;
                return self.stage = Stage::ResumeWait { at };
            }
            Then::CancelAfter => return self.cancel_after(now),
            Then::NextPage => return self.stage = Stage::Ready,
            Then::Poll if self.tasking != TaskMode::Detach => {
                if let (Some(w), Some(id)) = (self.cfg.in_flight, self.task_id()) {
                    w.set_task(self.target, id);
                }
                self.task_news = true;
                self.reset_task_polling();
                return self.stage = Stage::TaskWait { at: now };
            }
            _ => {}
        }
        self.clear_in_flight();
        // The ends that go on drop the failure; a failure to end with stays.
        if matches!(
            then,
            Then::Forget | Then::RetryAt(_) | Then::Resend | Then::Relist
        ) {
            self.failure = None;
        }
        match then {
            Then::Forget => self.forget_session(slot),
            Then::RetryAt(at) => {
                self.attempt.retried_later = true;
                self.stage = Stage::RetryWait { at };
            }
            Then::Resend => {
                self.resent = true;
                self.start_main(slot, now);
            }
            Then::Again if self.input_rounds >= MAX_INPUT_ROUNDS => {
                self.fail(Failure::InputRequired(truncated(
                    "more rounds of input than a call answers (8)",
                )));
            }
            Then::Again => {
                self.input_rounds += 1;
                self.start_main(slot, now);
            }
            Then::Relist => {
                self.relisted = true;
                slot.forget_annotations(self.target);
                self.stage = Stage::Ready;
            }
            // (A detached call's task, a failure or an answer.)
            _ => self.stage = Stage::AttemptEnded,
        }
    }

    /// A call whose `tools/call` is written and that has neither its answer nor a task.
    pub(super) fn call_unanswered(&self) -> bool {
        self.attempt.call_sent
            && matches!(&self.job, Job::Call { handler, .. }
                if handler.answer.is_none() && handler.task().is_none())
    }

    /// A 2026-era request answered with a 4xx (`status`) whose JSON-RPC error is `-32022` (the
    /// version refused): `Some(true)` when it goes once more (the version to send is set, the
    /// failure dropped), `Some(false)` when it is the second refusal or no version is common
    /// (the failure, naming the server's versions, replaces the trip's); `None` for any other
    /// failure.
    pub(super) fn version_refused(&mut self, status: Option<u16>) -> Option<bool> {
        let body = self.reply.bytes();
        let refused =
            matches!(status, Some(400..=499)) && error_code(body) == Some(era::UNSUPPORTED_VERSION);
        if !refused {
            return None;
        }
        // (Each failure is made where it is kept: it is large.)
        match era::version_to_retry(body) {
            Ok(version) if !self.version_retried => {
                self.version_retried = true;
                self.modern_version = version;
                self.failure = None;
                Some(true)
            }
            Ok(_) => {
                self.failure = Some(Failure::VersionRefused(era::supported_list(body)));
                Some(false)
            }
            Err(theirs) => {
                self.failure = Some(Failure::VersionRefused(theirs));
                Some(false)
            }
        }
    }

    /// Hands an error status's body (a JSON-RPC error response) to the request's handler;
    /// true when the handler took it as the answer. (Forced inline on the edge only: with
    /// the old era, left to the compiler is 64 B less.)
    #[cfg_attr(not(feature = "era-2025"), inline(always))]
    pub(super) fn deliver_error_body(&mut self) -> bool {
        let body = self.reply.bytes();
        let handler: &mut dyn OnMessage = match &mut self.job {
            Job::Call { handler, .. } => handler,
            Job::List { handler, .. } if LISTS => handler,
            Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => handler,
            _ => return false,
        };
        matches!(handler.on_message(body, true), Ok(Verdict::Done))
    }
}
