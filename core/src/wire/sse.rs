//! `sse`: a streaming decoder for `text/event-stream` bodies (the WHATWG event-stream format).
//!
//! Owns: splitting lines (LF, CR, CRLF, also when CR and LF arrive in different feeds), the BOM
//! at stream start, comments, the `data`, `event`, `id` and `retry` fields, the sticky last event
//! id, and a per-event size cap. Each byte is looked at once: data values are bulk-copied
//! between line ends found with `memchr2`, and a partial line is never scanned again.
//! Does not own: what the data means (JSON-RPC is `jsonrpc`'s), reconnecting, or HTTP framing.

use core::fmt;

use crate::buf::Buf;

/// Caps on one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SseLimits {
    /// The most data bytes one event may carry (data lines and the LFs joining them).
    pub max_event_bytes: usize,
}

/// What kind of event was dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventKind {
    /// No `event:` field, an empty one, or `event: message`: an MCP message.
    Message,
    /// Any other event type.
    Other,
}

/// One step of decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SseStep {
    /// All given bytes were used; give more.
    NeedMore,
    /// An event is complete; its data is in the caller's buffer.
    Event(EventKind),
}

/// Why a stream could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SseError {
    /// An event's data went over its cap (the smaller of the limit and the data buffer).
    EventTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for SseError {
    fn words(&self, out: &mut dyn crate::buf::Sink) -> Result<(), crate::buf::Overflow> {
        use crate::wire::words::{Arg, Msg};
        match self {
            SseError::EventTooLarge { limit } => {
                Msg::SseTooLarge.say(out, [Arg::Num(*limit as u64), Arg::None])
            }
        }
    }
}

impl core::error::Error for SseError {}

/// The longest `id` kept; a longer one makes [`SseDecoder::last_event_id`] `None`. Event ids
/// resume a reply stream, which only the handshake era does (feature `era-2025`): a build
/// without it keeps none.
pub const MAX_EVENT_ID: usize = if cfg!(feature = "era-2025") { 128 } else { 0 };

/// The longest `event`, `id` or `retry` value read: an id's cap, and never less than what an
/// event type (`message`) and a retry delay need.
const VALUE_BYTES: usize = at_least(MAX_EVENT_ID, 16);

const fn at_least(n: usize, floor: usize) -> usize {
    if n > floor { n } else { floor }
}

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    Id,
    Retry,
    Ignore,
}

impl Field {
    fn from_name(name: &[u8]) -> Self {
        // By the first byte, then one comparison with that field's name.
        let (field, full): (Field, &[u8]) = match name.first() {
            Some(b'd') => (Field::Data, b"data"),
            Some(b'e') => (Field::Event, b"event"),
            Some(b'i') => (Field::Id, b"id"),
            Some(b'r') => (Field::Retry, b"retry"),
            _ => return Field::Ignore,
        };
        if name == full { field } else { Field::Ignore }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// At the start of a line.
    Start,
    /// Reading a field name (kept when at most 5 bytes: the longest known name).
    Name { len: u8 },
    /// Just after the colon: one space may follow.
    ValueStart(Field),
    /// In the value, up to the line end.
    Value(Field),
}

/// An id value: set, or set but not representable (too long, not UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Id {
    Unset,
    Unusable,
    Text(heapless::String<MAX_EVENT_ID>),
}

/// A streaming event-stream decoder. Push bytes with [`SseDecoder::feed`]; no allocation.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    limits: SseLimits,
    /// BOM bytes matched so far at stream start; `None` once past it.
    bom: Option<u8>,
    /// The last byte was a CR: an LF right after it belongs to the same line end.
    after_cr: bool,
    line: Line,
    name: [u8; 5],
    /// The value of the current event/id/retry line (values are short; longer ones overflow).
    value: heapless::Vec<u8, VALUE_BYTES>,
    value_over: bool,
    /// The current line's value had a NUL (an `id` with one is ignored, however long); on a
    /// `retry` line: it had leading zeros (which are not kept).
    value_nul: bool,
    /// The current event: a data line was seen; data bytes written; its type.
    has_data: bool,
    event_len: usize,
    kind: EventKind,
    /// WHATWG "last event ID buffer" (sticky across events) and the dispatched string.
    id_buffer: Id,
    last_id: Id,
    retry: Option<u32>,
    failed: Option<SseError>,
    /// Bytes examined, for the linear-work test.
    #[cfg(test)]
    work: usize,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new(limits: SseLimits) -> Self {
        SseDecoder {
            limits,
            bom: Some(0),
            after_cr: false,
            line: Line::Start,
            name: [0; 5],
            value: heapless::Vec::new(),
            value_over: false,
            value_nul: false,
            has_data: false,
            event_len: 0,
            kind: EventKind::Message,
            id_buffer: Id::Unset,
            last_id: Id::Unset,
            retry: None,
            failed: None,
            #[cfg(test)]
            work: 0,
        }
    }

    /// Appends this event's data (data lines joined by `\n`, no trailing `\n`) into `data`.
    /// On `Event`, `data` holds the whole event; the caller reads it and MUST `data.clear()`
    /// before feeding more. Events whose data is empty are not reported (id/retry still apply).
    /// Returns bytes used; call again with the rest. An error is final for this stream: later
    /// feeds return it again until [`SseDecoder::finish`].
    pub fn feed(
        &mut self,
        input: &[u8],
        data: &mut impl Buf,
    ) -> Result<(usize, SseStep), SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.feed_inner(input, data);
        if let Err(e) = r {
            self.failed = Some(e);
            data.truncate(data.len().saturating_sub(self.event_len));
            self.event_len = 0;
        }
        r
    }

    /// End of stream: an unterminated event is discarded (WHATWG) and its bytes removed from
    /// `data`; clears partial state (and an error), so the next stream may start, BOM and all.
    /// The last event id and retry stay.
    pub fn finish(&mut self, data: &mut impl Buf) {
        data.truncate(data.len().saturating_sub(self.event_len));
        self.bom = Some(0);
        self.after_cr = false;
        self.line = Line::Start;
        self.value.clear();
        self.value_over = false;
        self.value_nul = false;
        self.has_data = false;
        self.event_len = 0;
        self.kind = EventKind::Message;
        self.failed = None;
    }

    /// The WHATWG last event id (sticky): `None` if never set, set empty, too long, not UTF-8.
    pub fn last_event_id(&self) -> Option<&str> {
        match &self.last_id {
            Id::Text(s) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        }
    }

    /// True once a dispatched event carried an id (even one [`Self::last_event_id`] cannot give).
    pub fn saw_event_id(&self) -> bool {
        self.last_id != Id::Unset
    }

    /// The last valid `retry` value, in milliseconds.
    pub fn retry_ms(&self) -> Option<u32> {
        self.retry
    }

    fn feed_inner(
        &mut self,
        input: &[u8],
        data: &mut impl Buf,
    ) -> Result<(usize, SseStep), SseError> {
        let mut i = 0;
        while let Some(matched) = self.bom {
            let Some(&b) = input.get(i) else {
                return Ok((i, SseStep::NeedMore));
            };
            #[cfg(test)]
            {
                self.work += 1;
            }
            let m = usize::from(matched);
            if BOM.get(m) == Some(&b) {
                i += 1;
                self.bom = if m + 1 == BOM.len() {
                    None
                } else {
                    Some(matched + 1)
                };
            } else {
                // Not a BOM after all: the bytes matched so far are ordinary line bytes.
                self.bom = None;
                let replay = BOM.get(..m).unwrap_or(&[]);
                self.lines(replay, data)?;
            }
        }
        let (n, step) = self.lines(input.get(i..).unwrap_or(&[]), data)?;
        Ok((i + n, step))
    }

    /// The line machine over `input` (after the BOM).
    fn lines(&mut self, input: &[u8], data: &mut impl Buf) -> Result<(usize, SseStep), SseError> {
        let mut i = 0;
        loop {
            let Some(&b) = input.get(i) else {
                return Ok((i, SseStep::NeedMore));
            };
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    #[cfg(test)]
                    {
                        self.work += 1;
                    }
                    i += 1;
                    continue;
                }
            }
            match self.line {
                Line::Start => {
                    #[cfg(test)]
                    {
                        self.work += 1;
                    }
                    match b {
                        b'\r' | b'\n' => {
                            i += 1;
                            self.after_cr = b == b'\r';
                            if let Some(kind) = self.dispatch() {
                                return Ok((i, SseStep::Event(kind)));
                            }
                        }
                        b':' => {
                            i += 1;
                            self.line = Line::Value(Field::Ignore);
                        }
                        _ => self.line = Line::Name { len: 0 },
                    }
                }
                Line::Name { len } => {
                    #[cfg(test)]
                    {
                        self.work += 1;
                    }
                    let name = self.name.get(..usize::from(len)).unwrap_or(&[]);
                    match b {
                        b':' | b'\r' | b'\n' => {
                            i += 1;
                            // (`after_cr` is false here: it was cleared above.)
                            self.after_cr = b == b'\r';
                            let field = Field::from_name(name);
                            if field == Field::Data {
                                self.begin_data(data)?;
                            }
                            if b == b':' {
                                self.line = Line::ValueStart(field);
                            } else {
                                // A field name alone: the value is empty.
                                self.end_line(field);
                            }
                        }
                        _ => {
                            i += 1;
                            match self.name.get_mut(usize::from(len)) {
                                Some(slot) => {
                                    *slot = b;
                                    self.line = Line::Name { len: len + 1 };
                                }
                                None => self.line = Line::Value(Field::Ignore),
                            }
                        }
                    }
                }
                Line::ValueStart(field) => {
                    if b == b' ' {
                        #[cfg(test)]
                        {
                            self.work += 1;
                        }
                        i += 1;
                    }
                    self.line = Line::Value(field);
                }
                Line::Value(field) => {
                    let rest = input.get(i..).unwrap_or(&[]);
                    let end = crate::wire::json::memchr2(b'\r', b'\n', rest);
                    let seg = rest.get(..end.unwrap_or(rest.len())).unwrap_or(&[]);
                    #[cfg(test)]
                    {
                        self.work += end.map_or(rest.len(), |p| p + 1);
                    }
                    self.value_bytes(field, seg, data)?;
                    i += seg.len();
                    if let Some(p) = end {
                        self.after_cr = rest.get(p) == Some(&b'\r');
                        i += 1;
                        self.end_line(field);
                    }
                }
            }
        }
    }

    fn cap(&self, data: &impl Buf) -> usize {
        self.limits.max_event_bytes.min(data.limit())
    }

    fn put_data(&mut self, bytes: &[u8], data: &mut impl Buf) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let limit = self.cap(data);
        let total = self.event_len.saturating_add(bytes.len());
        if total > limit || data.put(bytes).is_err() {
            return Err(SseError::EventTooLarge { limit });
        }
        self.event_len = total;
        Ok(())
    }

    /// A `data` line starts: join it to the previous one with LF.
    fn begin_data(&mut self, data: &mut impl Buf) -> Result<(), SseError> {
        if self.has_data {
            self.put_data(b"\n", data)?;
        }
        self.has_data = true;
        Ok(())
    }

    fn value_bytes(
        &mut self,
        field: Field,
        seg: &[u8],
        data: &mut impl Buf,
    ) -> Result<(), SseError> {
        match field {
            Field::Data => self.put_data(seg, data),
            Field::Event | Field::Id | Field::Retry => {
                if field == Field::Id && !self.value_nul {
                    self.value_nul = crate::wire::json::memchr(0, seg).is_some();
                }
                let seg = if field == Field::Retry && self.value.is_empty() {
                    self.retry_leading_zeros(seg)
                } else {
                    seg
                };
                if !self.value_over {
                    self.value_over = self.value.extend_from_slice(seg).is_err();
                }
                Ok(())
            }
            Field::Ignore => Ok(()),
        }
    }

    /// Leading zeros of a `retry` value do not count toward the value's cap: WHATWG reads
    /// `retry: 000…0123` (any number of zeros) as 123. Before the first other byte (the value
    /// is empty) they are dropped, however the line is split, and only remembered: a value of
    /// zeros alone is 0.
    fn retry_leading_zeros<'a>(&mut self, seg: &'a [u8]) -> &'a [u8] {
        let zeros = seg.iter().take_while(|&&b| b == b'0').count();
        self.value_nul |= zeros > 0;
        seg.get(zeros..).unwrap_or(&[])
    }

    /// A line ended: apply its field.
    fn end_line(&mut self, field: Field) {
        let value = self.value.as_slice();
        match field {
            Field::Event => {
                self.kind = if !self.value_over && (value.is_empty() || value == b"message") {
                    EventKind::Message
                } else {
                    EventKind::Other
                };
            }
            Field::Id if self.value_nul => {}
            Field::Id if self.value_over => self.id_buffer = Id::Unusable,
            // A build that keeps no id (`MAX_EVENT_ID` 0): any id is set but gives no text,
            // as an empty one does, without the UTF-8 check.
            Field::Id if MAX_EVENT_ID == 0 => self.id_buffer = Id::Unusable,
            Field::Id => {
                self.id_buffer = core::str::from_utf8(value)
                    .ok()
                    .and_then(|s| heapless::String::try_from(s).ok())
                    .map_or(Id::Unusable, Id::Text);
            }
            // Digits only; a value past u32 is ignored like any unusable one, in the same pass.
            // (Zeros alone left the value empty: 0.)
            Field::Retry if !self.value_over && (!value.is_empty() || self.value_nul) => {
                let n = value.iter().try_fold(0u32, |n, &d| {
                    let d = d.wrapping_sub(b'0');
                    if d > 9 {
                        return None;
                    }
                    n.checked_mul(10)?.checked_add(u32::from(d))
                });
                if n.is_some() {
                    self.retry = n;
                }
            }
            _ => {}
        }
        self.value.clear();
        self.value_over = false;
        self.value_nul = false;
        self.line = Line::Start;
    }

    /// A blank line: the event is dispatched when it has data.
    fn dispatch(&mut self) -> Option<EventKind> {
        self.last_id = self.id_buffer.clone();
        let kind = self.kind;
        let report = self.event_len > 0;
        self.has_data = false;
        self.event_len = 0;
        self.kind = EventKind::Message;
        report.then_some(kind)
    }
}

#[cfg(test)]
mod tests;
