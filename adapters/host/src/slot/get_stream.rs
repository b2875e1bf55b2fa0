//! The standalone GET stream of a slot's 2025-era sessions: the server's requests that come
//! on it (an elicitation, `ping` …) are answered as on a call's own stream.
//!
//! Owns: one stream per server of the slot, its thread, and when it runs. The core says when a
//! call wants the stream ([`Action::Listen`](verifi_mcp_core::machine::Action::Listen)), what
//! opens it and what each message on it gets
//! ([`verifi_mcp_core::machine::listen`]); this module does the I/O.
//!
//! A call that asks finds the stream open, or opens it and waits for its response head (the
//! core bounds the wait): the TypeScript SDK's servers drop a request sent while no stream is
//! open. The stream runs on a thread of its own beside the calls (the caller's executor is
//! unknown), on a connection outside the slot's pool and limit (it must not hold a permit a
//! call waits for); each answer is POSTed on another such connection, on its own deadline. It
//! is kept while calls are in flight and closed [`LINGER`] after the last one ends, when the
//! session changes, or at [`crate::SlotHandle::close`]; the next call opens it again. A `405`
//! means the server has none: not asked again in that session. A stream that fails, sends
//! what is not an event stream, or ends is reopened at most once per call that asked for it;
//! none of that fails a call (`mcp -v` shows its bytes).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_io::Timer;
use embedded_io_async::{Read, Write};
use event_listener::Event;
use futures_lite::future;
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::machine::{SlotConfig, listen};
use verifi_mcp_core::wire::exchange::{Exchange, Expect, OnMessage, ReplyLimits, Step, Verdict};
use verifi_mcp_core::wire::failure::Failure;
use verifi_mcp_core::wire::session::Snapshot;

use super::SlotHandle;
use crate::buf::VecBuf;
use crate::run::lock;

/// How long the stream stays open after the last call in flight ended (a next call soon after
/// finds it open).
pub const LINGER: Duration = Duration::from_millis(2_000);
/// How long opening the stream may take: connecting, writing the GET, and its response head.
const OPEN: Duration = Duration::from_secs(10);
/// How long one answer's POST may take.
const ANSWER: Duration = Duration::from_secs(2);
/// Most answers waiting to be sent from one read (a server that sends more requests at once
/// has the rest refused by silence: it asked faster than it can be answered).
const MAX_PENDING: usize = 32;
/// Storage for the stream's response head.
const HEAD_BYTES: usize = 16 * 1024;
/// One socket read.
const READ_BYTES: usize = 16 * 1024;
/// How long [`GetStreams::close`] waits for the streams' threads to end.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The GET streams of one slot (primary, fallback).
#[derive(Default)]
pub(crate) struct GetStreams {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    streams: [Mutex<Stream>; 2],
    /// Calls of the slot in flight.
    in_flight: AtomicUsize,
    /// Stream threads running.
    running: AtomicUsize,
    /// Any change: a stream's state, the calls in flight, a close.
    changed: Event,
}

/// One server's stream.
#[derive(Default)]
struct Stream {
    /// The session the stream (or its verdict) is for.
    session: Option<String>,
    state: State,
    /// Reopens left: one for each call that asked while the stream was open.
    reopens: usize,
}

#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// None open (none yet, or it ended).
    #[default]
    Idle,
    /// A thread is opening it.
    Opening,
    /// The server answered the GET with an event stream.
    Open,
    /// The server has none (`405`): not asked again in this session.
    None,
}

fn index(target: Target) -> usize {
    match target {
        Target::Primary => 0,
        Target::Fallback => 1,
    }
}

/// Marks a call in flight until dropped.
pub(crate) struct CallInFlight(Arc<Inner>);

impl Drop for CallInFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify(usize::MAX);
    }
}

impl GetStreams {
    /// A call starts: the streams are kept until it ends (the guard is dropped).
    pub(crate) fn call(&self) -> CallInFlight {
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        self.inner.changed.notify(usize::MAX);
        CallInFlight(Arc::clone(&self.inner))
    }

    /// Ends every stream (their sessions are about to end) and waits, briefly, for their
    /// threads to be gone.
    pub(crate) async fn close(&self) {
        for stream in &self.inner.streams {
            *lock(stream) = Stream::default();
        }
        self.inner.changed.notify(usize::MAX);
        let wait = async {
            loop {
                let changed = self.inner.changed.listen();
                if self.inner.running.load(Ordering::SeqCst) == 0 {
                    return;
                }
                changed.await;
            }
        };
        future::or(wait, async {
            Timer::after(CLOSE_WAIT).await;
        })
        .await;
    }

    /// The session this stream is for is still `session` (a close, or a new session, ends it).
    fn is_for(&self, i: usize, session: &str) -> bool {
        self.inner
            .streams
            .get(i)
            .is_some_and(|s| lock(s).session.as_deref() == Some(session))
    }

    /// Sets stream `i`'s state, when it is still for `session`.
    fn set(&self, i: usize, session: &str, state: State) {
        if let Some(s) = self.inner.streams.get(i) {
            let mut s = lock(s);
            if s.session.as_deref() == Some(session) {
                s.state = state;
            }
        }
        self.inner.changed.notify(usize::MAX);
    }
}

/// Has `target`'s GET stream open in its current session ([`Action::Listen`]): returns at once
/// when it is open or the server has none; else opens it (once, for every call that asks) and
/// returns when its response head came or it failed. The core bounds the wait.
///
/// [`Action::Listen`]: verifi_mcp_core::machine::Action::Listen
pub(crate) async fn ensure(slot: &SlotHandle, target: Target) {
    let Some(session) = slot.snapshot(target).and_then(|s| s.session_id) else {
        return;
    };
    let session = session.as_str().to_owned();
    let streams = &slot.inner.get_streams;
    let i = index(target);
    let Some(stream) = streams.inner.streams.get(i) else {
        return;
    };
    let mut started = false;
    loop {
        let changed = streams.inner.changed.listen();
        {
            let mut s = lock(stream);
            if s.session.as_deref() != Some(&session) {
                // A new session (the old one's thread sees it and ends).
                *s = Stream {
                    session: Some(session.clone()),
                    ..Stream::default()
                };
            }
            match s.state {
                State::Open if !started => {
                    // This call may have the stream reopened once if it ends under it.
                    let calls = streams.inner.in_flight.load(Ordering::SeqCst);
                    s.reopens = s.reopens.saturating_add(1).min(calls.max(1));
                    return;
                }
                State::Open | State::None => return,
                // Opened for this call, and it ended already: the call goes on without it.
                State::Idle if started => return,
                State::Idle => {
                    s.state = State::Opening;
                    s.reopens = 0;
                    started = true;
                    spawn(slot.clone(), target, session.clone());
                }
                State::Opening => {}
            }
        }
        changed.await;
    }
}

/// Runs `target`'s stream for `session` on a thread of its own.
fn spawn(slot: SlotHandle, target: Target, session: String) {
    let inner = Arc::clone(&slot.inner.get_streams.inner);
    inner.running.fetch_add(1, Ordering::SeqCst);
    let ran = std::thread::Builder::new()
        .name("mcp-get-stream".into())
        .spawn(move || {
            async_io::block_on(run(&slot, target, &session));
            let inner = &slot.inner.get_streams.inner;
            inner.running.fetch_sub(1, Ordering::SeqCst);
            inner.changed.notify(usize::MAX);
        });
    if ran.is_err() {
        // No thread: no stream; the calls go on without it.
        inner.running.fetch_sub(1, Ordering::SeqCst);
        if let Some(s) = inner.streams.get(index(target)) {
            lock(s).state = State::Idle;
        }
        inner.changed.notify(usize::MAX);
    }
}

/// How one opening of the stream ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The server has none (405).
    NoStream,
    /// Closed on purpose: no call in flight, a close, another session.
    Stopped,
    /// It failed or ended (what is not an event stream, a reset, the server closed it).
    Broken,
}

/// Opens the stream, and again once per call that asked while it ran, until it is stopped.
async fn run(slot: &SlotHandle, target: Target, session: &str) {
    let streams = &slot.inner.get_streams;
    let i = index(target);
    loop {
        let end = open_once(slot, target, session).await;
        match end {
            End::NoStream => return streams.set(i, session, State::None),
            End::Stopped => return streams.set(i, session, State::Idle),
            End::Broken => {
                let Some(stream) = streams.inner.streams.get(i) else {
                    return;
                };
                let again = {
                    let mut s = lock(stream);
                    let calls = streams.inner.in_flight.load(Ordering::SeqCst);
                    let again = s.session.as_deref() == Some(session) && calls > 0 && s.reopens > 0;
                    if again {
                        s.reopens -= 1;
                        s.state = State::Opening;
                    }
                    again
                };
                if !again {
                    return streams.set(i, session, State::Idle);
                }
                streams.inner.changed.notify(usize::MAX);
            }
        }
    }
}

/// Returns when the stream should close: the slot closed it or has another session, or no call
/// was in flight for [`LINGER`].
async fn until_stopped(streams: &GetStreams, i: usize, session: &str) {
    loop {
        let changed = streams.inner.changed.listen();
        if !streams.is_for(i, session) {
            return;
        }
        if streams.inner.in_flight.load(Ordering::SeqCst) == 0 {
            let lingered = future::or(
                async {
                    changed.await;
                    false
                },
                async {
                    Timer::after(LINGER).await;
                    true
                },
            )
            .await;
            if lingered && streams.inner.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
        } else {
            changed.await;
        }
    }
}

/// Hands each message on the stream to the core, keeping the answers to send.
struct Answers<'c> {
    /// The slot: server logs on the stream are kept in its run log, and a
    /// `notifications/tools/list_changed` here makes its tool list stale.
    slot: &'c SlotHandle,
    cfg: &'c SlotConfig<'c>,
    target: Target,
    snap: &'c Snapshot,
    scratch: VecBuf,
    pending: Vec<Vec<u8>>,
    request_cap: usize,
}

impl OnMessage for Answers<'_> {
    fn on_message(&mut self, msg: &[u8], _last_chance: bool) -> Result<Verdict, Failure> {
        if listen::heard(msg) == listen::Heard::ToolsListChanged {
            lock(&self.slot.inner.integrity).stale = true;
            return Ok(Verdict::Continue);
        }
        if self.pending.len() >= MAX_PENDING {
            return Ok(Verdict::Continue);
        }
        let mut out = VecBuf::with_limit(self.request_cap);
        // A message that cannot be answered (an answer over the request cap) gets none.
        match listen::answer(
            self.cfg,
            (self.target, self.snap),
            msg,
            &mut self.scratch,
            &mut out,
        ) {
            Ok(true) => self.pending.push(out.bytes().to_vec()),
            // Not a request: a log message is kept.
            _ => self.slot.server_log_json(msg),
        }
        Ok(Verdict::Continue)
    }
}

/// What a read of the stream came to.
enum Got {
    Bytes(usize),
    Closed,
    Stop,
}

/// One opening of the stream: the GET, then its events until it ends or is stopped.
async fn open_once(slot: &SlotHandle, target: Target, session: &str) -> End {
    let streams = &slot.inner.get_streams;
    let i = index(target);
    let Some(snap) = slot.snapshot(target) else {
        return End::Stopped;
    };
    if snap.session_id.as_deref() != Some(session) || !streams.is_for(i, session) {
        return End::Stopped;
    }
    let (Ok(endpoints), Ok(net)) = (slot.endpoints(), slot.net()) else {
        return End::Stopped;
    };
    let authorization = slot.held_authorization();
    let headers = slot.headers_with(&authorization);
    let cfg = slot.config(endpoints, &headers);
    let Some(ep) = cfg.endpoint(target) else {
        return End::Stopped;
    };
    let options = &slot.inner.run.options;
    let mut request = VecBuf::with_limit(options.request_cap);
    if listen::write_open(&cfg, target, &snap, &mut request).is_err() {
        return End::Stopped;
    }
    // Connect and send the GET on the opening's deadline.
    let opened = future::or(
        async {
            let mut conn = net.routed.connect_aside(ep).await.ok()?;
            conn.write_all(request.bytes()).await.ok()?;
            conn.flush().await.ok()?;
            Some(conn)
        },
        async {
            Timer::after(OPEN).await;
            None
        },
    );
    let Some(mut conn) = future::or(opened, async {
        until_stopped(streams, i, session).await;
        None
    })
    .await
    else {
        return if streams.is_for(i, session) {
            End::Broken
        } else {
            End::Stopped
        };
    };
    let mut head = vec![0u8; HEAD_BYTES];
    let limits = ReplyLimits {
        max_head_bytes: HEAD_BYTES,
        // A stream has no end to cap; each event is capped, and memory with it.
        max_body_bytes: u64::MAX,
        max_event_bytes: options.reply_cap,
    };
    let mut exchange = Exchange::new(&mut head, Expect::Response, true, limits);
    let mut reply = VecBuf::with_limit(options.reply_cap);
    let mut answers = Answers {
        slot,
        cfg: &cfg,
        target,
        snap: &snap,
        scratch: VecBuf::with_limit(options.request_cap),
        pending: Vec::new(),
        request_cap: options.request_cap,
    };
    let mut read = vec![0u8; READ_BYTES];
    let head_by = std::time::Instant::now() + OPEN;
    loop {
        let open = exchange
            .head()
            .is_some_and(|h| (200..300).contains(&h.status));
        let got = future::or(
            async {
                match conn.read(&mut read).await {
                    Ok(0) | Err(_) => Got::Closed,
                    Ok(n) => Got::Bytes(n),
                }
            },
            async {
                if open {
                    until_stopped(streams, i, session).await;
                } else {
                    // Before its head: the opening's deadline, or a stop.
                    future::or(until_stopped(streams, i, session), async {
                        Timer::at(head_by).await;
                    })
                    .await;
                }
                Got::Stop
            },
        )
        .await;
        // None: the stream goes on.
        let ended = match got {
            Got::Stop if !open && streams.is_for(i, session) => return End::Broken,
            Got::Stop => return End::Stopped,
            Got::Closed => Some(ending(exchange.finish(&mut reply, &mut answers).err())),
            Got::Bytes(n) => feed_all(
                &mut exchange,
                read.get(..n).unwrap_or(&[]),
                &mut reply,
                &mut answers,
            ),
        };
        let answered = exchange
            .head()
            .is_some_and(|h| (200..300).contains(&h.status));
        if !open && answered && ended.is_none() {
            streams.set(i, session, State::Open);
        }
        for answer in std::mem::take(&mut answers.pending) {
            post(&net.routed, ep, &answer).await;
        }
        if let Some(end) = ended {
            return end;
        }
    }
}

/// How a stream that ended (with `failure`, or none) ended.
fn ending(failure: Option<Failure>) -> End {
    match failure {
        Some(f) if listen::has_none(&f) => End::NoStream,
        _ => End::Broken,
    }
}

/// Feeds `bytes` through the exchange to their end: `None` while the stream goes on, else how
/// it ended (an event stream has no response to stop at: its end, or any failure, ends it).
fn feed_all(
    exchange: &mut Exchange<'_>,
    mut bytes: &[u8],
    reply: &mut VecBuf,
    answers: &mut Answers<'_>,
) -> Option<End> {
    loop {
        match exchange.feed(bytes, reply, answers) {
            Ok((used, Step::NeedMore)) => {
                bytes = bytes.get(used..).unwrap_or(&[]);
                if bytes.is_empty() || used == 0 {
                    return None;
                }
            }
            Ok(_) => return Some(End::Broken),
            Err(f) => return Some(ending(Some(f))),
        }
    }
}

/// POSTs one answer on a connection of its own, best effort, on its own deadline (its reply
/// is read as far as its first bytes, so the server has it before the connection is dropped).
async fn post(
    net: &crate::net::RoutedNet<'_>,
    ep: &verifi_mcp_core::wire::endpoint::Endpoint<'_>,
    bytes: &[u8],
) {
    let send = async {
        let mut conn = net.connect_aside(ep).await.ok()?;
        conn.write_all(bytes).await.ok()?;
        conn.flush().await.ok()?;
        let mut status = [0u8; 64];
        conn.read(&mut status).await.ok()
    };
    let _ = future::or(send, async {
        Timer::after(ANSWER).await;
        None
    })
    .await;
}
