//! One request/response: the reply bytes in, complete JSON-RPC messages out.
//!
//! An [`Exchange`] is fed the reply bytes as they arrive (any split). It decodes the HTTP
//! framing, picks JSON or SSE by the parsed media type, and hands every complete JSON-RPC
//! message (a JSON body, or the data of one `message` event) to an [`OnMessage`] handler,
//! which says whether that was the response it waits for. It stops as soon as the handler has
//! its response, and classifies every failure into a [`Failure`] a person can act on.
//!
//! It does not parse JSON-RPC itself (the handler does, once per message) and does no I/O.
//! The reference SDK took "the last data line" of an SSE reply; for every conformant server
//! that is the response whose id matches, which the handler looks for. When the stream ends and
//! no id matched, the last response-shaped message the handler chose to hold is offered once
//! more as a last chance (the machine takes it only when its id is `null`; see
//! `docs/design.md#reading-a-reply`).
//!
//! [`Exchange::lines`] is the same for a stdio server: no HTTP, each `\n`-terminated line is
//! one JSON-RPC message (a trailing `\r` and blank lines are ignored), a line longer than
//! [`ReplyLimits::max_event_bytes`] (or the reply buffer) is an error, never held whole.

use super::failure::{BufferName, Failure};
use super::http::{Decoded, Framing, MediaType, ResponseDecoder, ResponseHead, ResponseLimits};
use super::sse::{EventKind, SseDecoder, SseLimits, SseStep};
use crate::buf::{Buf, Overflow, Sink};

/// Bytes of an error body kept for the failure's snippet (in the reply buffer, which an error
/// reply does not otherwise use; a reply buffer under this cap keeps what fits).
const ERROR_BODY_BYTES: usize = 4096;

/// What the request was, and so what reply completes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A request: a JSON-RPC response must come back.
    Response,
    /// A notification: any 2xx (202, 200 with or without a body) completes it.
    Accepted,
}

/// The caps of one exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyLimits {
    /// Largest response head accepted.
    pub max_head_bytes: usize,
    /// Largest response body accepted (all events together).
    pub max_body_bytes: u64,
    /// Largest single SSE event's data accepted.
    pub max_event_bytes: usize,
}

impl Default for ReplyLimits {
    fn default() -> Self {
        ReplyLimits {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 64 * 1024 * 1024,
            max_event_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The handler's word on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Verdict {
    /// Not the response (a notification, a server request): keep reading.
    Continue,
    /// A response with another id: keep reading, but keep this one as the last chance.
    Hold,
    /// The response is in: stop.
    Done,
}

/// Receives each complete JSON-RPC message of a reply.
pub trait OnMessage {
    /// `msg` is one JSON text. `last_chance` is true when the reply has ended and no matching
    /// response came: a response-shaped message should then be taken as the answer.
    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure>;

    /// The same message as the first `len` bytes of the reply buffer, which the exchange
    /// calls instead on the host (`std` feature; the edge calls `on_message`, less code): a
    /// handler may rewrite the buffer (flatten the text where the message lies) or take its
    /// storage, but only when it answers [`Verdict::Done`], since nothing of the reply is read
    /// after that. The default hands the bytes to [`on_message`](Self::on_message).
    #[cfg(feature = "std")]
    fn on_reply(
        &mut self,
        reply: &mut dyn Buf,
        len: usize,
        last_chance: bool,
    ) -> Result<Verdict, Failure> {
        self.on_message(reply.bytes().get(..len).unwrap_or(&[]), last_chance)
    }

    /// How many progress notifications for the request this handler has seen so far; the
    /// call machine extends the deadline when it changes. Handlers that do not track progress keep
    /// the default (always 0).
    fn progress_seen(&self) -> u32 {
        0
    }

    /// The request is being sent again under a new id (a safe-to-repeat request whose
    /// connection closed before any reply byte): look for the response to `id` from now on.
    fn renumber(&mut self, _id: u64) {}
}

/// Where an exchange stands after a feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Step {
    /// Feed more bytes (or call [`Exchange::finish`] at end of stream).
    NeedMore,
    /// The response is in (or the notification was accepted): stop reading.
    Done,
    /// The reply ended without the response; see [`Exchange::resume_from`].
    Ended,
}

/// Where an SSE reply can be resumed with GET and `Last-Event-ID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume<'a> {
    /// The last event id the server gave.
    pub last_event_id: &'a str,
    /// The server's `retry` delay, if it gave one.
    pub retry_ms: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
enum Mode {
    Head,
    Json,
    Sse,
    ErrorBody(u16),
    /// Response done: only framing is decoded, to learn whether the connection can be reused.
    Drain,
    /// Newline-delimited JSON-RPC (stdio): each line is one message.
    Lines,
    Finished,
}

/// The rest of a response's HTTP framing after its answer was handed back
/// ([`Exchange::take_tail`]): an adapter feeds it what the connection still sends, and keeps
/// the connection when the response ends exactly at the end of a read.
#[derive(Debug)]
pub struct TailDrain {
    http: super::http::BodyRest,
}

impl TailDrain {
    /// Feeds bytes that follow. `Some(true)`: the response ended with the last of `input`
    /// (the connection may be kept); `Some(false)`: not yet; `None`: the bytes are not this
    /// response's framing, or run past its end (drop the connection).
    pub fn feed(&mut self, input: &[u8]) -> Option<bool> {
        let mut used = 0;
        loop {
            let rest = input.get(used..).unwrap_or(&[]);
            match self.http.decode(rest) {
                Ok((n, Decoded::End)) => return (used + n == input.len()).then_some(true),
                Ok((n, Decoded::NeedMore)) => {
                    return (used + n == input.len()).then_some(false);
                }
                Ok((n, Decoded::Body(_))) if n > 0 => used += n,
                _ => return None,
            }
        }
    }
}

/// One request's reply, decoded as it arrives.
pub struct Exchange<'h> {
    http: ResponseDecoder<'h>,
    sse: SseDecoder,
    expect: Expect,
    sent_session_id: bool,
    mode: Mode,
    head: Option<ResponseHead>,
    /// The reply buffer holds a message to keep until the next event's data begins.
    held: bool,
    http_ended: bool,
    /// Any reply byte arrived (all a count of them would be read for).
    received: bool,
    /// The longest line of a [`Mode::Lines`] exchange.
    max_line: usize,
}

impl<'h> Exchange<'h> {
    /// A new exchange whose response head accumulates in `head_storage`.
    pub fn new(
        head_storage: &'h mut [u8],
        expect: Expect,
        sent_session_id: bool,
        limits: ReplyLimits,
    ) -> Self {
        Exchange {
            http: ResponseDecoder::new(
                head_storage,
                ResponseLimits {
                    max_head_bytes: limits.max_head_bytes,
                    max_body_bytes: limits.max_body_bytes,
                },
            ),
            sse: SseDecoder::new(SseLimits {
                max_event_bytes: limits.max_event_bytes,
            }),
            expect,
            sent_session_id,
            mode: Mode::Head,
            head: None,
            held: false,
            http_ended: false,
            received: false,
            max_line: limits.max_event_bytes,
        }
    }

    /// An exchange over newline-delimited JSON-RPC (a stdio server): every line is handed to
    /// the handler; `Expect::Accepted` completes at the first byte (an adapter usually does
    /// not read at all after a notification). `head_storage` is only kept, to give back.
    pub fn lines(head_storage: &'h mut [u8], expect: Expect, limits: ReplyLimits) -> Self {
        let mut ex = Exchange::new(head_storage, expect, false, limits);
        ex.mode = Mode::Lines;
        ex
    }

    /// Gives the head storage back (for the next exchange on the same buffers).
    pub fn into_head_storage(self) -> &'h mut [u8] {
        self.http.into_head_storage()
    }

    /// The response head, once it is in.
    pub fn head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// True once any reply byte arrived (a pooled connection that fails before that is retried).
    pub fn received_any(&self) -> bool {
        self.received
    }

    /// True when the HTTP response ended cleanly and the server allows keep-alive.
    pub fn reusable(&self) -> bool {
        self.http_ended
            && self
                .head
                .as_ref()
                .is_some_and(|h| h.keep_alive && h.framing != Framing::Close)
    }

    /// After [`Step::Done`]: true while the HTTP response has not ended but may still end on
    /// this connection (kept alive, length or chunked framing). An SSE reply's chunked
    /// terminator often arrives in a read after the response event; feeding it through
    /// [`drain_tail`](Self::drain_tail) lets the connection be reused instead of dropped.
    pub fn awaits_end(&self) -> bool {
        self.mode == Mode::Finished
            && !self.http_ended
            && self.head.as_ref().is_some_and(|h| {
                h.keep_alive && matches!(h.framing, Framing::Length(_) | Framing::Chunked)
            })
    }

    /// While [`awaits_end`](Self::awaits_end): the rest of the response's framing, to drain
    /// after the answer was handed back (a reply stream that ends late), so the connection
    /// can still be kept.
    pub fn take_tail(&self) -> Option<TailDrain> {
        if !self.awaits_end() {
            return None;
        }
        self.http.body_only().map(|http| TailDrain { http })
    }

    /// Feeds bytes that follow the response through the HTTP framing only (they are not part
    /// of the answer). Returns true once the HTTP response has ended.
    pub fn drain_tail(&mut self, input: &[u8]) -> bool {
        self.received |= !input.is_empty();
        self.drain(input);
        self.http_ended
    }

    /// After [`Step::Ended`]: where the stream can be resumed, when the server gave event ids.
    pub fn resume_from(&self) -> Option<Resume<'_>> {
        if self.mode != Mode::Finished || !self.sse.saw_event_id() {
            return None;
        }
        self.sse.last_event_id().map(|id| Resume {
            last_event_id: id,
            retry_ms: self.sse.retry_ms(),
        })
    }

    /// Feeds reply bytes. Returns how many were used and where the exchange stands; after
    /// [`Step::Done`] or [`Step::Ended`] the rest of `input` is not part of this reply.
    pub fn feed<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        input: &[u8],
        reply: &mut B,
        handler: &mut H,
    ) -> Result<(usize, Step), Failure> {
        let mut used = 0;
        let step = self.feed_counting(input, reply, handler, &mut used)?;
        Ok((used, step))
    }

    /// [`feed`](Self::feed) for a caller that needs no count of the bytes used (the op: a
    /// reply's read is all its own). A failure passes through one result type, not moved
    /// from one to another at each step.
    pub(crate) fn feed_step<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        input: &[u8],
        reply: &mut B,
        handler: &mut H,
    ) -> Result<Step, Failure> {
        self.feed_counting(input, reply, handler, &mut 0)
    }

    /// [`feed`](Self::feed), the bytes used counted in `used`.
    #[inline(always)]
    fn feed_counting<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        input: &[u8],
        reply: &mut B,
        handler: &mut H,
        used: &mut usize,
    ) -> Result<Step, Failure> {
        self.received |= !input.is_empty();
        // Lines are a stdio server's, and stdio needs `std` (a process to spawn): without it
        // the mode is never set, and the compiler sees it.
        if cfg!(feature = "std") && self.mode == Mode::Lines {
            let (n, step) = self.feed_lines(input, reply, handler)?;
            *used = n;
            return Ok(step);
        }
        // Decode until the decoder asks for more input: a body that ends exactly at the end
        // of `input` reports its end on one more (empty) decode.
        while self.mode != Mode::Finished {
            let rest = input.get(*used..).unwrap_or(&[]);
            let (n, decoded) = self.http.decode(rest)?;
            *used += n;
            let step = match decoded {
                Decoded::NeedMore => break,
                Decoded::Head(head) => self.on_head(head, reply)?,
                Decoded::Body(body) => {
                    if matches!(self.mode, Mode::Json | Mode::Sse) {
                        // Size the reply buffer for what the framing says is coming.
                        let left =
                            usize::try_from(self.http.body_left_hint()).unwrap_or(usize::MAX);
                        reply.reserve(body.len().saturating_add(left));
                    }
                    self.on_body(body, reply, handler)?
                }
                Decoded::End => {
                    self.http_ended = true;
                    self.on_end(reply, handler)?
                }
            };
            if step == Step::Done && self.mode == Mode::Drain {
                *used += self.drain(input.get(*used..).unwrap_or(&[]));
                self.mode = Mode::Finished;
                return Ok(Step::Done);
            }
            if step != Step::NeedMore {
                return Ok(step);
            }
        }
        Ok(Step::NeedMore)
    }

    /// After the response: decodes only the framing of what is already here, to learn whether
    /// the HTTP response ends (and the connection can be reused). Returns bytes used.
    fn drain(&mut self, input: &[u8]) -> usize {
        let mut used = 0;
        while !self.http_ended {
            match self.http.decode(input.get(used..).unwrap_or(&[])) {
                Ok((n, Decoded::End)) => {
                    used += n;
                    self.http_ended = true;
                }
                Ok((n, Decoded::Body(_) | Decoded::Head(_))) => used += n,
                Ok((n, Decoded::NeedMore)) => {
                    used += n;
                    break;
                }
                Err(_) => break,
            }
        }
        used
    }

    /// The peer closed the connection.
    pub fn finish<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        reply: &mut B,
        handler: &mut H,
    ) -> Result<Step, Failure> {
        match self.mode {
            Mode::Finished | Mode::Drain => return Ok(Step::Done),
            Mode::ErrorBody(code) => return Err(self.error_failure(code, reply.bytes())),
            Mode::Lines if cfg!(feature = "std") => {
                // The server's output ended; a last line without its newline still counts.
                self.mode = Mode::Finished;
                let line = trim_cr(reply.bytes());
                // A blank last line (a lone CR, spaces) is no message, as a blank line never is.
                let (blank, len) = (line.iter().all(u8::is_ascii_whitespace), line.len());
                if !blank && deliver(handler, reply, len, true)? == Verdict::Done {
                    return Ok(Step::Done);
                }
                return Ok(Step::Ended);
            }
            _ => {}
        }
        match self.http.finish()? {
            true => {
                self.http_ended = true;
                self.on_end(reply, handler)
            }
            // Already ended (we would have stopped); treat as the end of the stream.
            false => self.on_end(reply, handler),
        }
    }

    /// [`Mode::Lines`]: splits `input` at `\n`, each whole line to the handler.
    fn feed_lines<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        input: &[u8],
        reply: &mut B,
        handler: &mut H,
    ) -> Result<(usize, Step), Failure> {
        if self.expect == Expect::Accepted {
            self.mode = Mode::Finished;
            return Ok((0, Step::Done));
        }
        let mut used = 0;
        while let Some(rest) = input.get(used..).filter(|r| !r.is_empty()) {
            let (part, complete) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (rest.get(..i).unwrap_or(&[]), true),
                None => (rest, false),
            };
            used += part.len() + usize::from(complete);
            if reply.len().saturating_add(part.len()) > self.max_line {
                self.mode = Mode::Finished;
                // How far past the cap the line goes depends on where the reads split it; the
                // error does not (the line needs at least one byte more than the cap).
                return Err(Failure::TooLarge(
                    BufferName::Reply,
                    Overflow {
                        needed: self.max_line.saturating_add(1),
                        limit: self.max_line,
                    },
                ));
            }
            reply
                .put(part)
                .map_err(|o| Failure::TooLarge(BufferName::Reply, o))?;
            if !complete {
                break;
            }
            let line = trim_cr(reply.bytes());
            let (blank, len) = (line.iter().all(u8::is_ascii_whitespace), line.len());
            let verdict = if blank {
                Verdict::Continue
            } else {
                deliver(handler, reply, len, false)?
            };
            reply.clear();
            if verdict == Verdict::Done {
                self.mode = Mode::Finished;
                return Ok((used, Step::Done));
            }
        }
        Ok((used, Step::NeedMore))
    }

    #[inline(never)]
    fn on_head<B: Buf>(&mut self, head: ResponseHead, reply: &mut B) -> Result<Step, Failure> {
        let status = head.status;
        let media = head.media_type;
        let framing = head.framing;
        self.head = Some(head);
        if !(200..300).contains(&status) {
            if status == 404 && self.session_sent() {
                self.mode = Mode::Finished;
                return Err(Failure::SessionExpired);
            }
            self.mode = Mode::ErrorBody(status);
            // The error body's start is kept in the reply buffer.
            reply.clear();
            if matches!(framing, Framing::Empty | Framing::Length(0)) {
                return Err(self.error_failure(status, &[]));
            }
            return Ok(Step::NeedMore);
        }
        if self.expect == Expect::Accepted {
            // 202, or 200 with any body (even junk): the notification is accepted.
            self.mode = Mode::Drain;
            return Ok(Step::Done);
        }
        if matches!(framing, Framing::Empty | Framing::Length(0)) {
            self.mode = Mode::Finished;
            return Err(Failure::EmptyReply);
        }
        match media {
            MediaType::Json => self.mode = Mode::Json,
            MediaType::EventStream => self.mode = Mode::Sse,
            MediaType::Other | MediaType::Missing => {
                self.mode = Mode::Finished;
                let ct = self
                    .head
                    .as_ref()
                    .map(|h| h.content_type.as_str())
                    .unwrap_or("");
                return Err(Failure::UnexpectedContentType(crate::buf::truncated(ct)));
            }
        }
        Ok(Step::NeedMore)
    }

    fn on_body<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        body: &[u8],
        reply: &mut B,
        handler: &mut H,
    ) -> Result<Step, Failure> {
        match self.mode {
            Mode::Json => {
                reply
                    .put(body)
                    .map_err(|o| Failure::TooLarge(BufferName::Reply, o))?;
                Ok(Step::NeedMore)
            }
            Mode::Sse => self.on_sse_bytes(body, reply, handler),
            Mode::ErrorBody(code) => {
                let keep = ERROR_BODY_BYTES.min(reply.limit());
                let room = keep.saturating_sub(reply.len());
                let take = body.get(..room.min(body.len())).unwrap_or(&[]);
                // Cannot fail: `take` fits the room left.
                let _ = reply.put(take);
                if reply.len() >= keep {
                    // Enough to say what happened; do not wait for the rest of the body.
                    self.mode = Mode::Finished;
                    return Err(self.error_failure(code, reply.bytes()));
                }
                Ok(Step::NeedMore)
            }
            Mode::Drain | Mode::Head | Mode::Finished | Mode::Lines => Ok(Step::NeedMore),
        }
    }

    fn on_sse_bytes<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        mut body: &[u8],
        reply: &mut B,
        handler: &mut H,
    ) -> Result<Step, Failure> {
        while !body.is_empty() {
            let mut data = LazyClear::new(&mut *reply, self.held);
            let (n, step) = self
                .sse
                .feed(body, &mut data)
                .map_err(|e| match data.overflow {
                    Some(o) => Failure::TooLarge(BufferName::Reply, o),
                    None => Failure::Sse(e),
                })?;
            if !data.pending_clear {
                self.held = false;
            }
            body = body.get(n..).unwrap_or(&[]);
            if let SseStep::Event(kind) = step {
                // Only unnamed and `message` events carry JSON-RPC.
                let verdict = if kind == EventKind::Message {
                    deliver_all(handler, reply, false)?
                } else {
                    Verdict::Continue
                };
                match verdict {
                    Verdict::Done => {
                        self.mode = Mode::Drain;
                        return Ok(Step::Done);
                    }
                    Verdict::Hold => self.held = true,
                    Verdict::Continue => {
                        reply.clear();
                        self.held = false;
                    }
                }
            } else if n == 0 {
                break;
            }
        }
        Ok(Step::NeedMore)
    }

    fn on_end<B: Buf, H: OnMessage + ?Sized>(
        &mut self,
        reply: &mut B,
        handler: &mut H,
    ) -> Result<Step, Failure> {
        let mode = self.mode;
        self.mode = Mode::Finished;
        match mode {
            Mode::Json => match deliver_all(handler, reply, true)? {
                Verdict::Done => Ok(Step::Done),
                _ => Ok(Step::Ended),
            },
            Mode::Sse => {
                let mut discard = LazyClear::new(&mut *reply, self.held);
                self.sse.finish(&mut discard);
                if self.held
                    && discard.pending_clear
                    && deliver_all(handler, reply, true)? == Verdict::Done
                {
                    return Ok(Step::Done);
                }
                Ok(Step::Ended)
            }
            Mode::ErrorBody(code) => Err(self.error_failure(code, reply.bytes())),
            Mode::Head => Err(Failure::EmptyReply),
            Mode::Drain | Mode::Finished | Mode::Lines => Ok(Step::Done),
        }
    }

    /// The request carried a session id (only the 2025 era has them).
    fn session_sent(&self) -> bool {
        cfg!(feature = "era-2025") && self.sent_session_id
    }

    fn error_failure(&self, code: u16, body: &[u8]) -> Failure {
        if code == 404 && self.session_sent() {
            Failure::SessionExpired
        } else {
            let mut f = Failure::status(code, body);
            if let Failure::Status { retry_after, .. } = &mut f {
                *retry_after = self.head.as_ref().and_then(|h| h.retry_after);
            }
            f
        }
    }
}

/// Hands the message, the first `len` bytes of `reply`, to the handler: with the reply buffer
/// on the host (`OnMessage::on_reply`), as bytes on the edge.
#[inline]
fn deliver<B: Buf, H: OnMessage + ?Sized>(
    handler: &mut H,
    reply: &mut B,
    len: usize,
    last_chance: bool,
) -> Result<Verdict, Failure> {
    #[cfg(feature = "std")]
    {
        handler.on_reply(reply, len, last_chance)
    }
    #[cfg(not(feature = "std"))]
    {
        handler.on_message(reply.bytes().get(..len).unwrap_or(&[]), last_chance)
    }
}

/// [`deliver`] of the whole reply buffer.
#[inline]
fn deliver_all<B: Buf, H: OnMessage + ?Sized>(
    handler: &mut H,
    reply: &mut B,
    last_chance: bool,
) -> Result<Verdict, Failure> {
    #[cfg(feature = "std")]
    {
        let len = reply.len();
        handler.on_reply(reply, len, last_chance)
    }
    #[cfg(not(feature = "std"))]
    {
        handler.on_message(reply.bytes(), last_chance)
    }
}

/// `line` without its trailing `\r`s (a CRLF line, or a stray CR before it: JSON whitespace
/// either way; found by the `exchange` fuzz target).
fn trim_cr(line: &[u8]) -> &[u8] {
    let keep = line.iter().rposition(|&b| b != b'\r').map_or(0, |i| i + 1);
    line.get(..keep).unwrap_or(&[])
}

/// The reply buffer seen by the SSE decoder: a held message is cleared only when the next
/// event's data starts, so a response kept as the last chance survives to the end of the
/// stream without a second buffer.
struct LazyClear<'b, B: Buf> {
    buf: &'b mut B,
    pending_clear: bool,
    overflow: Option<Overflow>,
}

impl<'b, B: Buf> LazyClear<'b, B> {
    fn new(buf: &'b mut B, pending_clear: bool) -> Self {
        LazyClear {
            buf,
            pending_clear,
            overflow: None,
        }
    }
}

impl<B: Buf> Sink for LazyClear<'_, B> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        if self.pending_clear {
            self.buf.clear();
            self.pending_clear = false;
        }
        self.buf
            .put(bytes)
            .inspect_err(|o| self.overflow = Some(*o))
    }
    fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional)
    }
}

impl<B: Buf> Buf for LazyClear<'_, B> {
    fn bytes(&self) -> &[u8] {
        if self.pending_clear {
            &[]
        } else {
            self.buf.bytes()
        }
    }
    fn clear(&mut self) {
        self.pending_clear = false;
        self.buf.clear();
    }
    fn truncate(&mut self, len: usize) {
        if !self.pending_clear {
            self.buf.truncate(len);
        }
    }
    fn limit(&self) -> usize {
        self.buf.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// A buffer that records the largest size hint it was given.
    #[derive(Default)]
    struct Hinted {
        v: Vec<u8>,
        hint: usize,
    }
    impl Sink for Hinted {
        fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
            self.v.extend_from_slice(bytes);
            Ok(())
        }
        fn reserve(&mut self, additional: usize) {
            self.hint = self.hint.max(self.v.len() + additional);
        }
    }
    impl Buf for Hinted {
        fn bytes(&self) -> &[u8] {
            &self.v
        }
        fn clear(&mut self) {
            self.v.clear()
        }
        fn truncate(&mut self, len: usize) {
            self.v.truncate(len)
        }
        fn limit(&self) -> usize {
            usize::MAX
        }
    }

    struct Take;
    impl OnMessage for Take {
        fn on_message(&mut self, _msg: &[u8], _last: bool) -> Result<Verdict, Failure> {
            Ok(Verdict::Done)
        }
    }

    fn run(reply: &[u8], read: usize) -> Hinted {
        let mut head = [0u8; 1024];
        let mut ex = Exchange::new(&mut head, Expect::Response, false, ReplyLimits::default());
        let mut buf = Hinted::default();
        for c in reply.chunks(read) {
            let (_, step) = ex.feed(c, &mut buf, &mut Take).unwrap();
            if step == Step::Done {
                break;
            }
        }
        buf
    }

    /// A reply stream whose end comes after its answer: what is left of its chunked framing
    /// is drained on the side, and says when the connection may be kept (never past the
    /// response's end, never on bytes that are not its framing).
    #[test]
    fn a_late_stream_end_is_drained_by_its_tail() {
        let reply = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
            1c\r\ndata: {\"id\":7,\"result\":{}}\n\n\r\n";
        let tail = |rest: &[&[u8]]| {
            let mut head = [0u8; 1024];
            let mut ex = Exchange::new(&mut head, Expect::Response, false, ReplyLimits::default());
            let mut buf = Hinted::default();
            let (_, step) = ex.feed(reply, &mut buf, &mut Take).unwrap();
            assert_eq!(step, Step::Done);
            assert!(ex.awaits_end());
            let mut t = ex.take_tail().expect("a tail");
            rest.iter().map(|r| t.feed(r)).collect::<Vec<_>>()
        };
        assert_eq!(tail(&[b"0\r\n\r\n"]), [Some(true)]);
        assert_eq!(tail(&[b"0\r", b"\n\r\n"]), [Some(false), Some(true)]);
        assert_eq!(
            tail(&[b"5\r\nping\n\r\n", b"0\r\n\r\n"]),
            [Some(false), Some(true)]
        );
        // Bytes past the end (a second response nobody asked for), or not framing at all.
        assert_eq!(tail(&[b"0\r\n\r\nHTTP/1.1"]), [None]);
        assert_eq!(tail(&[b"zz\r\n"]), [None]);
        // A response that ended has no tail.
        let mut head = [0u8; 1024];
        let mut ex = Exchange::new(&mut head, Expect::Response, false, ReplyLimits::default());
        let mut buf = Hinted::default();
        let mut whole = reply.to_vec();
        whole.extend_from_slice(b"0\r\n\r\n");
        let _ = ex.feed(&whole, &mut buf, &mut Take).unwrap();
        let _ = ex.drain_tail(&[]);
        assert!(ex.take_tail().is_none() || !ex.awaits_end());
    }

    /// Takes the message whose text contains `"id":7`; counts the others (the line mode's
    /// tests: stdio is the `std` build's).
    #[cfg(feature = "std")]
    #[derive(Default)]
    struct Seven {
        seen: usize,
        last: bool,
    }
    #[cfg(feature = "std")]
    impl OnMessage for Seven {
        fn on_message(&mut self, msg: &[u8], last: bool) -> Result<Verdict, Failure> {
            self.seen += 1;
            self.last = last;
            let ours = msg.windows(6).any(|w| w == br#""id":7"#);
            Ok(if ours {
                Verdict::Done
            } else {
                Verdict::Continue
            })
        }
    }

    #[cfg(feature = "std")]
    #[test]
    fn lines_mode_hands_each_line_over_at_any_split() {
        let input = b"{\"method\":\"x\"}\r\n\n  \n{\"id\":3}\n{\"id\":7}\n{\"id\":8}\n";
        for read in [1, 2, 5, input.len()] {
            let mut head = [0u8; 8];
            let mut ex = Exchange::lines(&mut head, Expect::Response, ReplyLimits::default());
            let (mut buf, mut h) = (Hinted::default(), Seven::default());
            let mut done = false;
            for c in input.chunks(read) {
                let (_, step) = ex.feed(c, &mut buf, &mut h).unwrap();
                if step == Step::Done {
                    done = true;
                    break;
                }
            }
            assert!(done, "read {read}");
            // The blank lines are skipped; the line after ours is not read.
            assert_eq!(h.seen, 3, "read {read}");
            assert!(!ex.reusable() && !ex.awaits_end() && ex.resume_from().is_none());
        }
    }

    #[cfg(feature = "std")]
    #[test]
    fn lines_mode_caps_a_line_and_ends_without_a_newline() {
        let limits = ReplyLimits {
            max_event_bytes: 16,
            ..ReplyLimits::default()
        };
        let mut head = [0u8; 8];
        let mut ex = Exchange::lines(&mut head, Expect::Response, limits);
        let mut buf = Hinted::default();
        let mut h = Seven::default();
        assert_eq!(
            ex.feed(b"0123456789", &mut buf, &mut h).unwrap().1,
            Step::NeedMore
        );
        let err = ex.feed(b"0123456789", &mut buf, &mut h).unwrap_err();
        assert!(
            matches!(err, Failure::TooLarge(BufferName::Reply, o) if o.limit == 16),
            "{err:?}"
        );
        // The output ends in a line without its newline: it is the last chance.
        let mut head = [0u8; 8];
        let mut ex = Exchange::lines(&mut head, Expect::Response, ReplyLimits::default());
        let mut buf = Hinted::default();
        let mut h = Seven::default();
        ex.feed(br#"{"id":7}"#, &mut buf, &mut h).unwrap();
        assert_eq!(h.seen, 0);
        assert_eq!(ex.finish(&mut buf, &mut h).unwrap(), Step::Done);
        assert!(h.last);
        // Nothing at all: ended without the response.
        let mut head = [0u8; 8];
        let mut ex = Exchange::lines(&mut head, Expect::Response, ReplyLimits::default());
        assert_eq!(
            ex.finish(&mut Hinted::default(), &mut h).unwrap(),
            Step::Ended
        );
        assert!(!ex.received_any());
    }

    #[test]
    fn reply_buffer_is_told_the_framed_size_up_front() {
        let msg = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        // Content-Length JSON: the hint is the whole body at the first byte of it.
        let mut json = std::format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            msg.len()
        )
        .into_bytes();
        json.extend_from_slice(msg);
        for read in [1, 7, json.len()] {
            let b = run(&json, read);
            assert_eq!(b.v, msg);
            assert_eq!(b.hint, msg.len(), "read {read}");
        }
        // Chunked SSE: the hint is the chunk (the event with its field names), not more.
        let event = std::format!("data: {}\n\n", std::str::from_utf8(msg).unwrap());
        let sse = std::format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n0\r\n\r\n",
            event.len()
        )
        .into_bytes();
        for read in [1, 7, sse.len()] {
            let b = run(&sse, read);
            assert_eq!(b.v, msg);
            assert!(
                b.hint >= msg.len() && b.hint <= event.len(),
                "read {read}: {}",
                b.hint
            );
        }
    }
}
