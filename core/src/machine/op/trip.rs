//! A round trip: the request written, the connection opened, the reply read to its end
//! (or its failure), the connection given back.

use super::*;

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    pub(super) fn start_trip(&mut self, purpose: Purpose, now: Millis) {
        if let Some(capability) = purpose.not_built() {
            // The edge's one-era build starts no trip it leaves out (no handshake, probe,
            // resumption, courtesy or cancel there; a task's stages refuse before): never
            // taken there, the guard needs no names (their table and texts: 176 B of its flash).
            return self.fail(if crate::machine::handlers::ONE_ERA_EDGE {
                Failure::NoResponse
            } else {
                Failure::NotBuilt {
                    capability,
                    need: "the server asked for it",
                }
            });
        }
        // No exchange is here to give back: one lives from the request's write to the trip's
        // end, and every end (`finish_trip`, `end_trip`, `retry_on_fresh`) takes it back into
        // `head` before any trip can start (a lost one would fail the next trip, never panic).
        self.stage = Stage::Trip {
            purpose,
            wire: Wire::Idle,
            exchange: None,
        };
        self.trip = None;
        // (A build without courtesy requests never has their deadline, nor reads it.)
        if COURTESY_BUILT {
            self.courtesy = purpose.is_courtesy().then(|| Deadline::courtesy(now));
        }
        match self.write_request(purpose) {
            Ok(()) => self.set_wire(Wire::Connect { fresh: false }),
            Err(f) => {
                self.trip_failed(f);
                self.set_wire(Wire::Idle);
            }
        }
    }

    /// Writes the request of `purpose` into the request buffer (head and body). Only for a
    /// trip that started: a purpose the build leaves out (`Purpose::not_built`) never does
    /// (`start_trip` refuses it), so its arms below are never taken.
    pub(super) fn write_request(&mut self, purpose: Purpose) -> Result<(), Failure> {
        use crate::machine::handlers::Body;
        // The edge's one-era build never starts a cancel or a courtesy request (they are not
        // built there): their writers (`notifications/cancelled`, the GET and DELETE heads)
        // fold away.
        let one_era_edge = crate::machine::handlers::ONE_ERA_EDGE;
        let ep = self.cfg.endpoint(self.target).ok_or(Failure::NoResponse)?;
        let snap = self.snap.as_ref();
        let id = self.id;
        // What differs between purposes is the body, and for a few the method, the session
        // (none before the handshake) and the event to resume from: the trip is made once.
        let mut method = Method::Post;
        let mut session = snap;
        let mut last_event_id = None;
        let body = match purpose {
            Purpose::Probe { .. } if cfg!(feature = "probe") => {
                session = None;
                Body::Discover { id: self.probe.id }
            }
            // A page of a list: the header list's (a call's) or a list op's, one writer of
            // its body for both (one page count for both).
            Purpose::HeaderList | Purpose::Main
                if let Some((pages, cursor, list)) = match (purpose, &self.job) {
                    (Purpose::HeaderList, Job::Call { handler, .. }) => {
                        Some((self.list_pages, &*handler.text, ListMethod::Tools))
                    }
                    // (Always tools/list in the edge's one-era build: its other lists are
                    // refused before any trip.)
                    (Purpose::Main, Job::List { handler, .. }) if LISTS => Some((
                        self.list_pages,
                        &*handler.cursor,
                        crate::machine::handlers::BuiltList::built(handler.list),
                    )),
                    _ => None,
                } =>
            {
                Body::List {
                    id,
                    list,
                    cursor: (pages > 0).then(|| crate::machine::handlers::as_text(cursor)),
                }
            }
            Purpose::HeaderList => Body::None,
            Purpose::TaskGet | Purpose::TaskCancel | Purpose::TaskUpdate | Purpose::TaskResult => {
                match &self.job {
                    Job::Call { handler, .. }
                        if cfg!(feature = "tasks")
                            && let Some(task) = &handler.task =>
                    {
                        Body::Task {
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
                        }
                    }
                    _ => Body::None,
                }
            }
            Purpose::Initialize { .. } if cfg!(feature = "era-2025") => {
                session = None;
                let declared = self.cfg.declared();
                Body::Initialize {
                    id: self.init.id,
                    version: self.cfg.version,
                    elicitation: declared.elicitation,
                    elicitation_url: declared.elicitation_url,
                }
            }
            Purpose::Initialized { .. } if cfg!(feature = "era-2025") => Body::Initialized,
            Purpose::Main => match &self.job {
                Job::Call {
                    handler,
                    tool,
                    args,
                    ..
                } => Body::ToolsCall {
                    id,
                    tool,
                    args: *args,
                    progress: handler.progress_token.then_some(id),
                    params: handler.error.bytes(),
                    // (Only a build with input rounds, feature `input`, ever has one ready.)
                    extra: if cfg!(feature = "input") && handler.input_ready {
                        handler.text.bytes()
                    } else if cfg!(feature = "era-2025") && handler.session_task {
                        // The 2025-11-25 form: a task-required tool is called as a task.
                        b",\"task\":{}"
                    } else {
                        b""
                    },
                },
                // The 2026 era has no `ping`: `server/discover` is its liveness check.
                Job::Request(handler)
                    if !crate::machine::handlers::ONE_ERA_EDGE
                        && handler.req == jsonrpc::Request::Ping
                        && self.modern() =>
                {
                    Body::Discover { id }
                }
                Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => {
                    Body::request(id, handler.req)
                }
                _ => Body::None,
            },
            Purpose::Resume if cfg!(feature = "era-2025") => {
                method = Method::Get;
                last_event_id = self.resume.as_ref().map(|(id, _)| id.as_str());
                Body::None
            }
            Purpose::Cancel if !one_era_edge => Body::Cancelled {
                id,
                reason: CANCEL_TIMED_OUT,
            },
            Purpose::Courtesy if !one_era_edge => match self.job {
                Job::Cancel(id) => Body::Cancelled {
                    id,
                    reason: CANCEL_DROPPED,
                },
                _ => {
                    method = Method::Delete;
                    Body::None
                }
            },
            _ => Body::None,
        };
        let mut trip = Trip::post(ep, session, body);
        trip.method = method;
        trip.last_event_id = last_event_id;
        if method == Method::Delete {
            trip.expect = Expect::Accepted;
        }
        // (A one-era build speaks its era, as the op does: the compiler sees it.) The writer
        // reads the rest of `_meta` (capabilities, log level, trace context) from the slot.
        if matches!(purpose, Purpose::Probe { .. }) || self.modern() {
            trip.modern = Some(self.modern_version);
        }
        self.expect = trip.expect;
        // (Sessions are the handshake era's.)
        self.sent_session_id = cfg!(feature = "era-2025")
            && snap.is_some_and(|s| s.session_id.is_some())
            && !matches!(purpose, Purpose::Initialize { .. });
        if self.cfg.is_stdio(self.target) {
            return trip.write_line(self.request, self.cfg);
        }
        trip.write(self.request, self.cfg)
    }
}

impl<'o, B, Sec, F, const LISTS: bool, const OTHERS: bool> Op<'o, B, Sec, F, LISTS, OTHERS>
where
    B: Buf,
    Sec: AsRef<[u8]>,
    F: FnMut(Option<(Value<'_>, &[u8])>),
{
    pub(super) fn trip_step(
        &mut self,
        slot: &mut SlotState,
        now: Millis,
        purpose: Purpose,
    ) -> Option<Action> {
        match self.wire() {
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
                self.set_wire(Wire::Idle);
                Some(if recycle {
                    Action::Recycle
                } else if self.tail.is_some() {
                    Action::Park
                } else {
                    Action::Close
                })
            }
            Wire::Idle => {
                let courtesy = purpose.is_courtesy();
                // A failed trip's failure stays where it is kept (`Op::failure`): it is large,
                // and most ends keep it as the attempt's.
                let ok = match self.trip.take() {
                    Some(TripEnd::Done) => Some(true),
                    Some(TripEnd::Ended) => Some(false),
                    // A courtesy's failure was never kept: the attempt's own stays.
                    _ if courtesy => None,
                    _ => {
                        if self.failure.is_none() {
                            self.failure = Some(Failure::NoResponse);
                        }
                        None
                    }
                };
                self.trip_done(slot, now, purpose, ok);
                None
            }
        }
    }

    /// A request from the server on an old-era call's stream gets its answer before the next
    /// read (the request buffer is free: a call that got reply bytes is never re-sent).
    pub(super) fn answer_server_request(&mut self) -> Option<Action> {
        // (A stdio server's requests are answered by the adapter that reads its lines.)
        if !cfg!(feature = "era-2025") || self.modern() || self.cfg.is_stdio(self.target) {
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
            crate::machine::handlers::Body::Answer(&request, handler.text.bytes()),
        );
        trip.write(self.request, self.cfg).ok()?;
        Some(Action::Respond {
            target: self.target,
        })
    }

    /// When a read must have returned: the deadline, or earlier the stall time; and whether
    /// that is the stall time.
    pub(super) fn read_until(&self, last_byte: Millis) -> (Millis, bool) {
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
        if let Stage::Trip {
            wire: Wire::Connect { fresh },
            ..
        } = self.stage
        {
            self.set_wire(Wire::Write {
                retry_fresh: reused && !fresh,
            });
        }
    }

    /// The connection could not be opened.
    pub fn handle_connect_failed(&mut self, error: ConnectError) {
        if let Stage::Trip {
            wire: Wire::Connect { .. },
            ..
        } = self.stage
        {
            self.end_trip(Failure::Connect(error));
        }
    }

    /// The request was written (`ok`) or writing it failed.
    pub fn handle_sent(&mut self, now: Millis, ok: bool) {
        let Stage::Trip {
            wire: Wire::Write { retry_fresh },
            ..
        } = self.stage
        else {
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
        if matches!(
            self.stage,
            Stage::Trip {
                purpose: Purpose::Main,
                ..
            }
        ) && self.is_call()
        {
            self.attempt.call_sent = true;
        }
        self.reply.clear();
        let Some(head) = self.head.take() else {
            self.end_trip(Failure::NoResponse);
            return;
        };
        let stdio = self.cfg.is_stdio(self.target);
        self.put_exchange(if stdio {
            Exchange::lines(head, self.expect, self.cfg.limits)
        } else {
            Exchange::new(head, self.expect, self.sent_session_id, self.cfg.limits)
        });
        if stdio && self.expect == Expect::Accepted {
            // A notification over stdio has no reply: it is done once written.
            return self.finish_trip(true);
        }
        self.progress_seen = self.current_progress();
        self.set_wire(Wire::Read {
            retry_fresh,
            last_byte: now,
        });
    }

    pub(super) fn current_progress(&self) -> u32 {
        match (&self.job, &self.stage) {
            (
                Job::Call { handler, .. },
                Stage::Trip {
                    purpose: Purpose::Main | Purpose::Resume,
                    ..
                },
            ) => handler.progress_seen(),
            _ => 0,
        }
    }

    /// `n` bytes were read into [`read_buf`](Self::read_buf); 0: the peer closed.
    // Out of the pump's `feed` with the old era (8 B less in `full`); inlined there without
    // it (20 B less in `minimal`).
    #[cfg_attr(feature = "era-2025", inline(never))]
    pub fn handle_read(&mut self, now: Millis, n: usize) {
        let Stage::Trip { purpose, .. } = self.stage else {
            return;
        };
        match self.wire() {
            Wire::Read { retry_fresh, .. } => {
                if n == 0
                    && let Some(early) = self
                        .exchange()
                        .and_then(|x| self.ended_early(x, retry_fresh, purpose))
                {
                    return self.apply_early(early);
                }
                // The exchange is fed where it lies in the stage, beside the handler in the
                // job and the op's buffers (disjoint fields: nothing moved out and back).
                let Op {
                    stage,
                    job,
                    init,
                    probe,
                    reply,
                    read,
                    ..
                } = self;
                let Stage::Trip {
                    exchange: Some(exchange),
                    ..
                } = stage
                else {
                    return self.end_trip(Failure::NoResponse);
                };
                let mut accept = Accept;
                let handler: &mut dyn OnMessage = match purpose {
                    Purpose::Initialize { .. } if cfg!(feature = "era-2025") => init,
                    Purpose::Probe { .. } if cfg!(feature = "probe") => probe,
                    Purpose::Main
                    | Purpose::Resume
                    | Purpose::HeaderList
                    | Purpose::TaskGet
                    | Purpose::TaskUpdate
                    | Purpose::TaskResult => match job {
                        // A call's handler reads a header list's pages while that trip runs
                        // (said here, where the trip's purpose is known, not kept beside it).
                        Job::Call { handler, .. } => {
                            handler.listing = purpose == Purpose::HeaderList;
                            // (Likewise a task's poll: `tasks/update`'s empty answer is read as
                            // a poll's, with no result in it.)
                            if cfg!(feature = "tasks") {
                                handler.polling =
                                    matches!(purpose, Purpose::TaskGet | Purpose::TaskUpdate);
                            }
                            handler
                        }
                        Job::List { handler, .. } if LISTS => handler,
                        Job::Request(handler) if !crate::machine::handlers::ONE_ERA_EDGE => handler,
                        // (Never taken in the edge's one-era build: a close or a dropped
                        // call's cancel sends nothing there.)
                        _ if crate::machine::handlers::ONE_ERA_EDGE => {
                            return self.end_trip(Failure::NoResponse);
                        }
                        _ => &mut accept,
                    },
                    // (Never taken: a trip the build leaves out never starts.)
                    _ if purpose.not_built().is_some() => {
                        return self.end_trip(Failure::NoResponse);
                    }
                    _ => &mut accept,
                };
                let step = if n == 0 {
                    exchange.finish(*reply, handler)
                } else {
                    let bytes = read.get(..n).unwrap_or(&[]);
                    exchange.feed_step(bytes, *reply, handler)
                };
                let progress = handler.progress_seen();
                match step {
                    Err(f) => self.end_trip(f),
                    Ok(step) => {
                        if progress != self.progress_seen {
                            self.progress_seen = progress;
                            self.deadline.extend(now);
                        }
                        match step {
                            Step::NeedMore if n > 0 => self.set_wire(Wire::Read {
                                retry_fresh,
                                last_byte: now,
                            }),
                            Step::Done if self.exchange().is_some_and(Exchange::awaits_end) => self
                                .set_wire(Wire::Tail {
                                    until: now.saturating_add(TAIL_MS).min(self.active().at),
                                    bytes: 0,
                                }),
                            step => self.finish_trip(step == Step::Done),
                        }
                    }
                }
            }
            Wire::Tail { until, bytes } => {
                let bytes = bytes.saturating_add(n);
                let more = n > 0
                    && match &mut self.stage {
                        Stage::Trip {
                            exchange: Some(x), ..
                        } => {
                            x.drain_tail(self.read.get(..n).unwrap_or(&[]));
                            x.awaits_end()
                        }
                        _ => false,
                    };
                if more && bytes < MAX_TAIL_BYTES {
                    self.set_wire(Wire::Tail { until, bytes });
                } else {
                    self.finish_trip(true);
                }
            }
            _ => {}
        }
    }

    /// Reading failed (a reset, an I/O error).
    pub fn handle_read_failed(&mut self) {
        let Stage::Trip { purpose, .. } = self.stage else {
            return;
        };
        match self.wire() {
            Wire::Read { retry_fresh, .. } => {
                let early = self
                    .exchange()
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
        if !matches!(self.stage, Stage::Trip { .. }) {
            return;
        }
        match self.wire() {
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
                self.tail = self.exchange().and_then(Exchange::take_tail);
                self.finish_trip(true)
            }
            Wire::Release { .. } | Wire::Idle => {}
        }
    }

    /// The connection ended before any reply byte: `Some(true)` to send once more on a fresh
    /// connection (a request safe to repeat on a pooled connection), `Some(false)` when a
    /// written `tools/call` may have run, `None` to read the end as any other.
    // (Inlined into its two callers: with the old era 64 B less in `full` than the call;
    // without it the compiler, left to itself, now makes it a call: minimal-call 24 B more.)
    #[inline(always)]
    pub(super) fn ended_early(
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

    #[inline(always)]
    pub(super) fn apply_early(&mut self, retry: bool) {
        if retry {
            self.retry_on_fresh();
        } else {
            self.end_trip(Failure::MayHaveRun(Broken::BeforeReply));
        }
    }

    /// Sends the request again on a fresh connection, under a new id.
    pub(super) fn retry_on_fresh(&mut self) {
        if let Some(x) = self.take_exchange() {
            self.head = Some(x.into_head_storage());
        }
        let purpose = match self.stage {
            Stage::Trip { purpose: p, .. } => p,
            _ => return,
        };
        match purpose {
            // (Not for a trip the build leaves out: it never starts.)
            _ if purpose.not_built().is_some() => {}
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
            Ok(()) => self.set_wire(Wire::Connect { fresh: true }),
            Err(f) => self.end_trip(f),
        }
    }

    /// The round trip failed: the connection is dropped, then `f` is delivered.
    pub(super) fn end_trip(&mut self, f: Failure) {
        if let Some(x) = self.take_exchange() {
            self.head = Some(x.into_head_storage());
        }
        self.trip_failed(f);
        self.set_wire(Wire::Release { recycle: false });
    }

    /// Keeps a round trip's failure for delivery; a courtesy's is dropped (the attempt's own
    /// failure, if any, stays).
    pub(super) fn trip_failed(&mut self, f: Failure) {
        if !matches!(self.stage, Stage::Trip { purpose, .. } if purpose.is_courtesy()) {
            self.failure = Some(f);
        }
        self.trip = Some(TripEnd::Failed);
    }

    /// The reply is read: the connection is recycled when the response ended cleanly.
    pub(super) fn finish_trip(&mut self, done: bool) {
        // Read where it lies in the stage (an exchange is large), then taken for its head
        // storage.
        let Stage::Trip {
            purpose,
            exchange: Some(x),
            ..
        } = &self.stage
        else {
            return self.end_trip(Failure::NoResponse);
        };
        if let purpose @ Purpose::Initialize { .. } = *purpose
            && purpose.not_built().is_none()
        {
            // The version is the handler's, set when the trip is delivered.
            self.snap = Some(Snapshot {
                session_id: x.head().and_then(|h| h.session_id.clone()),
                version: self.cfg.version,
            });
        }
        // (Only the 2025 era resumes a reply stream.)
        self.resume = if done || !cfg!(feature = "era-2025") {
            None
        } else {
            x.resume_from()
                .map(|r| (truncated::<MAX_EVENT_ID>(r.last_event_id), r.retry_ms))
        };
        let recycle = x.reusable();
        if let Some(x) = self.take_exchange() {
            self.head = Some(x.into_head_storage());
        }
        self.trip = Some(if done { TripEnd::Done } else { TripEnd::Ended });
        self.set_wire(Wire::Release { recycle });
    }
}
