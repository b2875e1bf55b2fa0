//! Flattening a result where its message lies (the host's way to hold one copy of a big reply,
//! not two): what [`flatten`](super::flatten) writes, written over the message it comes from.
//!
//! Unescaping never lengthens a string, and a compact block is copied as it is, so the text
//! written stays behind the bytes still to be read. Only the filter (the redactor) can
//! lengthen it (a secret shorter than its marker); what would overtake the reading waits in
//! the text buffer (the spill) until there is room, and is appended at the end.

use super::{ContentError, Flattened, span_in};
use crate::buf::{Buf, Overflow, Sink, VecBuf};
use crate::wire::json::{
    Deferred, JsonError, Kind, Value, Walk, check_deferred, unescape_chunk, unescape_chunk_checked,
};

/// What the text goes through on its way out, in pieces, then [`finish`](Self::finish):
/// the redactor.
pub trait TextFilter {
    /// The next piece of text.
    fn write(&mut self, bytes: &[u8], out: &mut impl Sink) -> Result<(), Overflow>;
    /// The text ended: whatever was held back.
    fn finish(&mut self, out: &mut impl Sink) -> Result<(), Overflow>;
}

/// Messages shorter than this are flattened by copy: a second buffer of a few KiB costs
/// nothing worth saving, and the copy is the quicker way there (no plan, no swap).
pub const IN_PLACE_FROM: usize = 32 * 1024;

/// Content blocks an in-place plan holds; a result with more is flattened by copy.
pub const MAX_SEGMENTS: usize = 32;

/// Bytes unescaped (or copied) on the stack at a time on their way to the filter.
const PIECE: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    /// The `\n` between blocks.
    Newline,
    /// A text block's string, escapes as written (message offsets).
    Text(usize, usize),
    /// A block written as compact JSON that already is compact (message offsets).
    Json(usize, usize),
}

/// How to flatten one result where its message lies: the pieces of the message the text is
/// made of, in order, as offsets (it borrows nothing, so the message can then be written
/// over). Made by [`InPlacePlan::new`], run by [`InPlacePlan::run`].
#[derive(Debug, Clone)]
pub struct InPlacePlan {
    segments: heapless::Vec<Segment, MAX_SEGMENTS>,
    flat: Flattened,
}

impl InPlacePlan {
    /// The plan for `result`, a value parsed from `msg`, by [`flatten`](super::flatten)'s
    /// rules. `Ok(None)`: not one this can do (a block that is not compact JSON as sent,
    /// more than [`MAX_SEGMENTS`] pieces); flatten it by copy. The errors are
    /// [`flatten`](super::flatten)'s.
    pub fn new(msg: &[u8], result: Value<'_>) -> Result<Option<Self>, ContentError> {
        if result.kind() != Kind::Object {
            return Err(ContentError::ResultNotObject);
        }
        let mut plan = InPlacePlan {
            segments: heapless::Vec::new(),
            flat: Flattened {
                is_error: false,
                blocks: 0,
            },
        };
        let (mut content_seen, mut content_written, mut seen_is_error) = (false, false, false);
        let mut structured = None;
        let mut walk = Walk::of(result);
        while let Some((key, at)) = walk.next_key() {
            if !content_seen && key.eq_str("content") {
                content_seen = true;
                if walk.byte(at) == Some(b'[') {
                    let Some(end) = plan.blocks(msg, &walk, at) else {
                        return Ok(None);
                    };
                    walk.resume(end);
                    content_written = true;
                    continue;
                }
                let Some(v) = walk.take() else { break };
                if !v.is_null() {
                    return Err(ContentError::ContentNotArray);
                }
                continue;
            }
            let Some(v) = walk.take() else { break };
            if !seen_is_error && key.eq_str("isError") {
                seen_is_error = true;
                plan.flat.is_error = v.as_bool() == Some(true);
            } else if structured.is_none() && key.eq_str("structuredContent") {
                structured = Some(v);
            }
        }
        if !content_written && let Some(s) = structured {
            if !plan.json(msg, s) {
                return Ok(None);
            }
            plan.flat.blocks = 1;
        }
        Ok(Some(plan))
    }

    /// The blocks of the content array at `at` of `outer`'s bytes; the offset after its
    /// `]`, or `None` when the plan cannot hold them.
    fn blocks(&mut self, msg: &[u8], outer: &Walk<'_>, at: usize) -> Option<usize> {
        let mut list = outer.inner(at);
        while let Some(start) = list.next_element() {
            if self.flat.blocks > 0 {
                self.segments.push(Segment::Newline).ok()?;
            }
            self.flat.blocks += 1;
            if list.byte(start) != Some(b'{') {
                if let Some(v) = list.take()
                    && !self.json(msg, v)
                {
                    return None;
                }
                continue;
            }
            let mut members = list.inner(start);
            let (mut kind, mut text) = (None, None);
            while let Some((key, _)) = members.next_key() {
                let Some(v) = members.take() else { break };
                if kind.is_none() && key.eq_str("type") {
                    kind = Some(v);
                } else if text.is_none() && key.eq_str("text") {
                    text = Some(v);
                }
            }
            let end = members.end();
            list.resume(end);
            let text = kind
                .and_then(|t: Value<'_>| t.as_str())
                .filter(|t| t.eq_str("text"))
                .and(text)
                .and_then(|t| t.as_str());
            match text {
                Some(t) => {
                    let at = span_in(msg, t.raw())?;
                    self.segments.push(Segment::Text(at.start, at.end)).ok()?;
                }
                None => {
                    if let Some(block) = list.object(start, end)
                        && !self.json(msg, block)
                    {
                        return None;
                    }
                }
            }
        }
        Some(list.end())
    }

    /// `v` as compact JSON: its own bytes when they already are; false when they are not
    /// (or the plan is full).
    fn json(&mut self, msg: &[u8], v: Value<'_>) -> bool {
        let mut same = SameAs {
            raw: v.raw(),
            at: 0,
            same: true,
        };
        let compact = v.write_compact(&mut same).is_ok() && same.same && same.at == v.raw().len();
        compact
            && span_in(msg, v.raw())
                .is_some_and(|at| self.segments.push(Segment::Json(at.start, at.end)).is_ok())
    }

    /// What the flattened result is (`isError`, blocks), known before it is written.
    pub fn flattened(&self) -> Flattened {
        self.flat
    }

    /// Writes the text through `filter` over the message, the first `reply.len()` bytes
    /// of which `self` was made from, and moves it into `text` (the reply's storage: no
    /// copy; `reply` gets `text`'s old storage, empty). `text` is also where output that
    /// would overtake the reading waits. An error leaves `reply`'s message written over.
    pub fn run(
        self,
        reply: &mut VecBuf,
        filter: &mut impl TextFilter,
        text: &mut VecBuf,
    ) -> Result<Flattened, ContentError> {
        let none = Deferred::default();
        // Nothing deferred: nothing to check, so no JSON error.
        self.run_checking(reply, filter, text, &none)
            .unwrap_or(Err(ContentError::ResultNotObject))
    }

    /// True when every string [`Value::parse_deferring`] left unchecked is the text of
    /// one of this plan's text blocks: [`run_checking`](Self::run_checking) then checks
    /// them all, in order, as it writes them. (Otherwise check them before using the
    /// message, or parse it with [`Value::parse`].)
    pub fn covers(&self, deferred: &Deferred) -> bool {
        deferred
            .spans()
            .iter()
            .all(|&(a, b)| self.segments.contains(&Segment::Text(a, b)))
    }

    /// [`run`](Self::run) for a message parsed by [`Value::parse_deferring`] whose
    /// deferred strings this plan [`covers`](Self::covers): each is checked as it is
    /// unescaped. `Err` is what [`Value::parse`] would have said of the message (the
    /// first error of the first bad deferred string); the message is then written over
    /// in part and the text is to be dropped.
    pub fn run_checking(
        self,
        reply: &mut VecBuf,
        filter: &mut impl TextFilter,
        text: &mut VecBuf,
        deferred: &Deferred,
    ) -> Result<Result<Flattened, ContentError>, JsonError> {
        let r = self.run_inner(reply, filter, text, deferred);
        match r {
            Ok(f) => Ok(Ok(f)),
            Err(Stop::Content(e)) => Ok(Err(e)),
            Err(Stop::Json(e)) => Err(e),
        }
    }

    fn run_inner(
        self,
        reply: &mut VecBuf,
        filter: &mut impl TextFilter,
        text: &mut VecBuf,
        deferred: &Deferred,
    ) -> Result<Flattened, Stop> {
        text.clear();
        let limit = text.limit();
        let mut out = InPlace {
            buf: reply.bytes_mut(),
            w: 0,
            read: 0,
            spill: text,
            limit,
        };
        let mut piece = [0u8; PIECE];
        let mut segments = self.segments.iter().peekable();
        while let Some(&segment) = segments.next() {
            let (a, b, unescape) = match segment {
                Segment::Newline => {
                    // The bytes up to the next block are read past already.
                    if let Some(Segment::Text(a, _) | Segment::Json(a, _)) = segments.peek() {
                        out.advance(*a);
                    }
                    filter.write(b"\n", &mut out)?;
                    continue;
                }
                Segment::Text(a, b) => (a, b, true),
                Segment::Json(a, b) => (a, b, false),
            };
            let mut check = unescape && deferred.spans().contains(&(a, b));
            let mut p = a;
            out.advance(p);
            while p < b {
                let src = out.buf.get(p..b).unwrap_or(&[]);
                let (used, made) = if check {
                    match unescape_chunk_checked(src, &mut piece) {
                        Some(r) => r,
                        // Bytes before `p` are checked and may be written over; from
                        // `p` on, the message is as it came.
                        None => {
                            check_deferred(out.buf, p, b).map_err(Stop::Json)?;
                            // The rest of the string is checked now (a piece that
                            // stopped early is not an error).
                            check = false;
                            unescape_chunk(src, &mut piece)
                        }
                    }
                } else if unescape {
                    unescape_chunk(src, &mut piece)
                } else {
                    let n = src.len().min(PIECE);
                    if let (Some(d), Some(s)) = (piece.get_mut(..n), src.get(..n)) {
                        d.copy_from_slice(s);
                    }
                    (n, n)
                };
                if used == 0 {
                    break;
                }
                p += used;
                out.advance(p);
                filter
                    .write(piece.get(..made).unwrap_or(&[]), &mut out)
                    .map_err(|o| Stop::Content(o.into()))?;
            }
        }
        out.advance(out.buf.len());
        filter
            .finish(&mut out)
            .map_err(|o| Stop::Content(o.into()))?;
        let (w, spilled) = (out.w, out.spill.len());
        if spilled > 0 {
            // Room at the end of the message, or past it: the reply's cap is at least the
            // text's (the caller's check), and the text fits its cap.
            reply.truncate(w);
            reply.put(text.bytes())?;
            text.clear();
        }
        text.adopt(reply, w + spilled)?;
        Ok(self.flat)
    }
}

/// Why [`InPlacePlan::run_inner`] stopped.
enum Stop {
    Content(ContentError),
    Json(JsonError),
}

impl From<Overflow> for Stop {
    fn from(o: Overflow) -> Self {
        Stop::Content(ContentError::Overflow(o))
    }
}

/// Compares what is written with `raw`, from its start.
struct SameAs<'a> {
    raw: &'a [u8],
    at: usize,
    same: bool,
}

impl Sink for SameAs<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let end = self.at + bytes.len();
        self.same = self.same && self.raw.get(self.at..end) == Some(bytes);
        self.at = end;
        if self.same {
            Ok(())
        } else {
            // Stop the writing: it is not the same.
            Err(Overflow {
                limit: self.raw.len(),
                needed: end,
            })
        }
    }
}

/// The message being written over: bytes before `read` are read already and free for
/// the text, whose end is `w`. Output that does not fit there waits in `spill`.
struct InPlace<'b> {
    buf: &'b mut [u8],
    w: usize,
    read: usize,
    spill: &'b mut VecBuf,
    limit: usize,
}

impl InPlace<'_> {
    /// Everything before `read` is read; what waits in the spill goes in if it now fits.
    fn advance(&mut self, read: usize) {
        self.read = self.read.max(read).min(self.buf.len());
        let s = self.spill.len();
        if s > 0
            && self.w + s <= self.read
            && let Some(dst) = self.buf.get_mut(self.w..self.w + s)
        {
            dst.copy_from_slice(self.spill.bytes());
            self.w += s;
            self.spill.clear();
        }
    }
}

impl Sink for InPlace<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let needed = self.w + self.spill.len() + bytes.len();
        if needed > self.limit {
            return Err(Overflow {
                limit: self.limit,
                needed,
            });
        }
        if self.spill.is_empty()
            && self.w + bytes.len() <= self.read
            && let Some(dst) = self.buf.get_mut(self.w..self.w + bytes.len())
        {
            dst.copy_from_slice(bytes);
            self.w += bytes.len();
            return Ok(());
        }
        self.spill.put(bytes)
    }
}
