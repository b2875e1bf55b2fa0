//! A tool call through the slot: its buffers, its cancel when dropped, its task.

use super::*;

impl SlotHandle {
    /// Calls `tool` with `args` (anything that serializes to a JSON object; `()` or `null`
    /// for none). Never panics and never fails: every outcome is a [`ToolResult`], metered and,
    /// when not ok, on the timeline. A call its server makes a task (the 2026-07-28 tasks
    /// extension) is followed to its result; [`start_task`](Self::start_task) hands the task
    /// back instead, to follow later (also after a restart, with [`task`](Self::task)).
    pub async fn call(&self, tool: &str, args: impl Serialize) -> ToolResult {
        // Arguments that do not serialize are sent to the core as a non-object, which it
        // reports (and meters) as bad arguments, the same as any non-object arguments.
        let json = serde_json::to_vec(&args).unwrap_or_else(|_| b"false".to_vec());
        self.call_json(tool, &json, None).await
    }

    /// [`call`](Self::call), telling `on_progress` of each progress notification the server
    /// sends for it (a progress token is sent; messages are redacted). For a status line.
    pub async fn call_with_progress(
        &self,
        tool: &str,
        args: impl Serialize,
        on_progress: impl Fn(&ProgressUpdate<'_>) + Sync,
    ) -> ToolResult {
        let json = serde_json::to_vec(&args).unwrap_or_else(|_| b"false".to_vec());
        self.call_json(tool, &json, Some(ProgressObserver(&on_progress)))
            .await
    }

    /// Calls `tool` with arguments already encoded as JSON; on an OAuth slot, with a bearer
    /// token (and its renewals: once on a 401, up to 3 scope step-ups on a 403).
    pub(crate) async fn call_json(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
    ) -> ToolResult {
        use tracing::Instrument;
        let (inner, primary) = (&self.inner, &self.inner.spec.primary);
        let span = crate::telemetry::call_span(&inner.spec.slot, tool, primary, &inner.secrets);
        // Pinned where it is made: `instrument` then wraps a pointer to it instead of moving
        // the whole call's state into its `Instrumented` (a large copy on every call).
        let call = std::pin::pin!(async {
            let Some(auth) = &self.inner.auth else {
                let (r, challenge) = self.call_once(tool, json, on_progress, None).await;
                return self.explain_401(r, challenge).await;
            };
            crate::auth::slot::call_with_auth(self, auth, tool, json, on_progress).await
        });
        let r = call.instrument(span.clone()).await;
        if let Some(s) = self.snapshot(Target::Primary) {
            span.record("era", s.version.as_str());
        }
        crate::telemetry::call_ended(&span, &r);
        r
    }

    /// One call through the driver, with `bearer` as the `authorization` header when given;
    /// with the `WWW-Authenticate` value of a 401 or 403 that ended it.
    pub(crate) async fn call_once(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
    ) -> (ToolResult, Option<String>) {
        match self
            .call_as(tool, json, on_progress, bearer, (Tasking::Wait, true))
            .await
        {
            (Ended::Done(r), challenge) => (r, challenge),
            // A call that waits for its task never comes back as a running task.
            (Ended::Task { .. }, challenge) => (
                ToolResult::local_failure("the call came back as a running task"),
                challenge,
            ),
        }
    }

    /// [`call_once`](Self::call_once), doing `how` with a task the server makes of the call:
    /// wait for its end, hand it back running (detach), or follow an earlier one (attach);
    /// `cancel_on_drop`: a dropped wait for an attached task cancels the task (a dropped call
    /// otherwise always cancels what it started).
    pub(crate) async fn call_as(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
        (how, cancel_on_drop): (Tasking<'_>, bool),
    ) -> (Ended, Option<String>) {
        let done = |r| (Ended::Done(r), None);
        if !matches!(how, Tasking::Attach { .. })
            && let Some(why) = self.tool_gate(tool).await
        {
            return done(self.local_failure(tool, &why));
        }
        let args = match Value::parse(json, JsonLimits::default()) {
            Ok(v) if v.is_null() => None,
            Ok(v) => Some(v),
            Err(e) => {
                let e = format!("arguments are not JSON: {e}");
                return done(self.local_failure(tool, &e));
            }
        };
        let endpoints = match self.endpoints() {
            Ok(e) => e,
            Err(e) => return done(self.local_failure(tool, &e)),
        };
        let authorization = bearer.map(|b| format!("Bearer {b}"));
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let mut cfg = self.config(endpoints, &headers);
        cfg.on_progress = on_progress;
        let on_log = |m: &LogMessage<'_>| self.server_log(Some(tool), m.level, m.logger, m.data);
        cfg.on_log = Some(LogObserver(&on_log));
        // A tool that declared an outputSchema has its reply kept, to check its
        // structuredContent (see `check_structured`).
        let schema = lock(&self.inner.output_schemas).get(tool).cloned();
        cfg.keep_raw |= schema.is_some();
        // If the caller drops this call while its tools/call is on the wire, the server is
        // told (the core meters the dropped call itself).
        let in_flight = InFlight::new();
        // The session's GET stream is kept while this call runs.
        let _listening = self.inner.get_streams.call();
        let cancel_if_dropped = CancelIfDropped {
            slot: self,
            in_flight: &in_flight,
            cancel_task: cancel_on_drop || !matches!(how, Tasking::Attach { .. }),
        };
        cfg.in_flight = Some(&in_flight);
        let run = &self.inner.run;
        let mut scratch = self.scratch();
        // Out of the pooled buffers while they are lent to the driver (back with them below;
        // a dropped call drops it, and the next call makes another).
        let alarm = std::mem::take(&mut scratch.get().alarm);
        let mut bufs = self.bufs_keeping_raw(scratch.get(), cfg.keep_raw);
        let mut ledger = RunLedger(&run.records);
        let mut timeline = NotedTimeline {
            inner: RunTimeline(&run.records),
            slot: self,
        };
        let Ok(mut net) = self.net() else {
            return done(self.local_failure(tool, "slot route unavailable"));
        };
        net.alarm = Some(&alarm);
        let state = &self.inner.state;
        let (r, started) = drive::Driver::new(&net, &cfg, |f| state.with(f))
            .tool_call(
                (tool, args),
                (how, &secrets[..]),
                (&mut ledger, &mut timeline),
                &mut bufs,
            )
            .await;
        if let Some((target, id)) = started {
            // Running on its server: nothing to cancel if this future is dropped.
            std::mem::forget(cancel_if_dropped);
            let id = id.as_str().to_owned();
            return (Ended::Task { target, id }, None);
        }
        // A server that said its tools changed (on this call's stream): the list is fetched
        // again before the next call.
        let list_changed = { state.with(SlotState::take_tools_list_changed) };
        if list_changed {
            lock(&self.inner.integrity).stale = true;
        }
        let mut owned = ToolResult::from_core_without_text(&r);
        owned.raw = owned
            .raw
            .map(|raw| crate::run::redact_decoded(raw, &secrets));
        if matches!(owned.kind(), Kind::Unreachable(_)) {
            owned.reword(|e| self.with_stdio_note(e.to_owned()));
        }
        let text_len = r.text.len();
        std::mem::forget(cancel_if_dropped);
        // The head and read borrows end with `bufs`; the growable buffers go back to the pool,
        // emptied, and without a big reply's storage (it is not held between calls).
        let CallBuffers {
            mut request,
            mut reply,
            mut text,
            mut error,
            ..
        } = bufs;
        // A big text is handed over whole instead of copied (it would not be kept in the pool
        // anyway); a small one is copied and its buffer pooled.
        owned.text = text.hand_out(text_len, KEEP_BYTES);
        for b in [&mut request, &mut reply, &mut text, &mut error] {
            b.reuse(0, KEEP_BYTES);
        }
        let s = scratch.get();
        (s.request, s.reply, s.text, s.error) = (request, reply, text, error);
        s.alarm = alarm;
        if let Some(schema) = schema {
            self.check_structured(tool, &schema, &mut owned);
        }
        // The last reply head is still in the head buffer: a 401 or 403 says in it what the
        // server wants (the core's failure keeps only the status and a snippet).
        let challenge = crate::auth::slot::status_of(&owned)
            .filter(|c| *c == 401 || *c == 403)
            .and_then(|c| crate::auth::client::challenge_in_head(&s.head, c));
        (Ended::Done(owned), challenge)
    }
}

/// Armed while a call runs: when the caller drops the call's future with a `tools/call` on the
/// wire, the server is told to cancel it (`notifications/cancelled`); when the call is a task
/// being polled (a transparent call, or a [`crate::TaskHandle::wait`]), the task is cancelled
/// on its server (`tasks/cancel`). A call that ends normally, or hands its task back running,
/// disarms it (`forget`).
pub(super) struct CancelIfDropped<'s> {
    slot: &'s SlotHandle,
    in_flight: &'s InFlight,
    /// Whether a dropped call is cancelled on the wire: not when it follows a task the caller
    /// only looks in on ([`crate::TaskHandle::leave_running`]).
    cancel_task: bool,
}

impl Drop for CancelIfDropped<'_> {
    fn drop(&mut self) {
        if !self.cancel_task {
            // A task the caller only looked in on runs on; a poll of it needs no cancel.
            return;
        }
        if let Some(request) = self.in_flight.get() {
            self.slot.cancel_dropped(request);
        } else if let Some((target, task)) = self.in_flight.task() {
            // The call had become a task that runs on: it is cancelled on its server.
            self.slot
                .cancel_dropped_task(target, task.as_str().to_owned());
        }
    }
}

/// How [`SlotHandle::call_as`] ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The call's result (answered, failed, or its task's end).
    Done(ToolResult),
    /// The call is the task `id` on `target`, still running (a detached call).
    Task {
        /// The task's server.
        target: Target,
        /// Its id.
        id: String,
    },
}
