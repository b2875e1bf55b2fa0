//! A strict RFC 8259 JSON scanner: validation, field lookup, string unescaping and compact
//! re-emission, over the caller's bytes, without a DOM and without allocation.
//!
//! [`Value::parse`] validates a whole input once, iteratively (an explicit bit stack records
//! whether each open container is an object or an array, so nesting depth costs bits, never
//! call-stack frames: safe on a Cortex-M stack). The [`Value`] it returns is just the exact,
//! validated span plus its [`Kind`]; the accessors ([`Value::get`], [`Value::members`],
//! [`Value::elements`] …) walk that span lazily without validating again, and return
//! `None`/empty rather than panic if ever handed something odd.
//!
//! Owns: the JSON grammar, depth limiting, UTF-8 validation of strings, `\uXXXX` escapes with
//! surrogate pairs, and the canonical (`JSON.stringify`-like) printing of strings and values.
//! Does not own: what any JSON-RPC or MCP field means (`wire::jsonrpc`, `wire::content`).
//!
//! Speed: on the host (x86_64, aarch64) a string is validated eight bytes per word for quotes,
//! backslashes and controls, and its UTF-8 once as a whole (`simdutf8`); unescaping finds
//! backslashes the same way and writes 2 KiB gathers. Anything not plainly valid goes to the
//! exact scanner (`memchr2` between escapes, each run checked on its own), which alone runs on
//! the edge and decides every error and its offset. Only numbers, literals and whitespace go
//! byte by byte.

use core::fmt;
use core::marker::PhantomData;

#[cfg(feature = "std")]
pub(crate) use memchr::{memchr, memchr2};

use crate::buf::{Overflow, Sink};

/// The first `needle` in `hay`: a plain loop on the edge, where it is far less code than the
/// `memchr` crate's word scans (the host keeps those: the reply path is benchmarked there).
#[cfg(not(feature = "std"))]
pub(crate) fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// The first `a` or `b` in `hay` (the edge's loop; see [`memchr`]).
#[cfg(not(feature = "std"))]
pub(crate) fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&x| x == a || x == b)
}

/// The deepest nesting [`Value::parse`] can track, whatever [`JsonLimits::max_depth`] says: the
/// bit stack is a fixed 128 bytes so that parsing never needs more than a small, known stack.
pub const MAX_SUPPORTED_DEPTH: usize = 1024;

const STACK_WORDS: usize = MAX_SUPPORTED_DEPTH / 32;

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JsonLimits {
    /// Most containers (arrays/objects) that may be open at once; a scalar at top level has
    /// depth 0, `[]` depth 1. Values above [`MAX_SUPPORTED_DEPTH`] act as that.
    pub max_depth: usize,
}

impl Default for JsonLimits {
    /// `max_depth: 128`.
    fn default() -> Self {
        JsonLimits { max_depth: 128 }
    }
}

/// The type of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
// A word on the edge: a value (slice and kind) then has no padding bytes, which moves of
// values and of the enums holding them (niches in the kind) would copy byte by byte.
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number, kept exactly as written.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// Why an input is not JSON, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JsonError {
    /// What is wrong.
    pub kind: JsonErrorKind,
    /// Byte offset into the input where it went wrong.
    pub offset: usize,
}

/// What is wrong with an input (see [`JsonError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum JsonErrorKind {
    /// The input ended inside a value (truncated reply?).
    UnexpectedEnd,
    /// A byte that cannot start or continue a value here.
    UnexpectedByte(u8),
    /// A backslash followed by something other than `" \ / b f n r t u`.
    BadEscape,
    /// `\u` not followed by four hex digits.
    BadUnicodeEscape,
    /// A string holds bytes that are not UTF-8.
    InvalidUtf8,
    /// A raw control character (below U+0020) inside a string; it must be escaped.
    ControlInString,
    /// A number outside the RFC 8259 grammar (`01`, `1.`, `-`, `1e`).
    BadNumber,
    /// Something starting like `true`/`false`/`null` that is not.
    BadLiteral,
    /// More containers open at once than the limit allows.
    TooDeep {
        /// The depth limit in force.
        limit: usize,
    },
    /// Something other than whitespace after the one top-level value.
    TrailingData,
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for JsonErrorKind {
    fn words(&self, out: &mut dyn crate::buf::Sink) -> Result<(), crate::buf::Overflow> {
        use crate::wire::words::{Arg, Msg};
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let hex = |n: u8| HEX.get(usize::from(n & 15)).copied().unwrap_or(b'0');
        // The byte as it is (a graphic ASCII one) or in hex: ASCII either way.
        let said: [u8; 2];
        let (message, arg) = match *self {
            JsonErrorKind::UnexpectedEnd => (Msg::JsonEnd, Arg::None),
            JsonErrorKind::UnexpectedByte(b) => {
                let (message, len) = if b.is_ascii_graphic() {
                    said = [b, 0];
                    (Msg::JsonByte, 1)
                } else {
                    said = [hex(b >> 4), hex(b)];
                    (Msg::JsonByteHex, 2)
                };
                let text = said.get(..len).unwrap_or(&[]);
                (message, Arg::Str(crate::buf::utf8_prefix(text)))
            }
            JsonErrorKind::BadEscape => (Msg::JsonEscape, Arg::None),
            JsonErrorKind::BadUnicodeEscape => (Msg::JsonUnicodeEscape, Arg::None),
            JsonErrorKind::InvalidUtf8 => (Msg::JsonUtf8, Arg::None),
            JsonErrorKind::ControlInString => (Msg::JsonControl, Arg::None),
            JsonErrorKind::BadNumber => (Msg::JsonNumber, Arg::None),
            JsonErrorKind::BadLiteral => (Msg::JsonLiteral, Arg::None),
            JsonErrorKind::TooDeep { limit } => (Msg::JsonTooDeep, Arg::Num(limit as u64)),
            JsonErrorKind::TrailingData => (Msg::JsonTrailing, Arg::None),
        };
        message.say(out, [arg, Arg::None])
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for JsonError {
    fn words(&self, out: &mut dyn crate::buf::Sink) -> Result<(), crate::buf::Overflow> {
        use crate::wire::words::{Arg, Msg};
        Msg::JsonAt.say(out, [Arg::Num(self.offset as u64), Arg::Says(&self.kind)])
    }
}

impl core::error::Error for JsonError {}

fn err(kind: JsonErrorKind, offset: usize) -> JsonError {
    JsonError { kind, offset }
}

/// A validated JSON value: its exact span in the input and its kind. Only [`Value::parse`]
/// (and the accessors of a parsed value) build one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Value<'a> {
    raw: &'a [u8],
    kind: Kind,
    /// Where the parse saw values of the message end (host only; nothing on the edge).
    hint: Hint<'a>,
}

/// What a [`Value`] knows of where values of its message end ([`Ends`]), handed on to every
/// value read from it. Never part of a value's identity: two values are equal by span and kind.
#[derive(Debug, Clone, Copy, Default)]
struct Hint<'a>(
    #[cfg(feature = "std")] Option<&'a Ends>,
    PhantomData<&'a ()>,
);

impl PartialEq for Hint<'_> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Hint<'_> {}

#[cfg(feature = "defmt")]
impl defmt::Format for Hint<'_> {
    fn format(&self, _: defmt::Formatter<'_>) {}
}

impl Hint<'_> {
    /// Nothing known.
    const NONE: Self = Hint(
        #[cfg(feature = "std")]
        None,
        PhantomData,
    );

    /// The offset after the value at `pos` of `input` (a slice of the message the ends are
    /// of), when the parse noted where it ends; `None` when it did not (always on the edge).
    #[inline(always)]
    fn end(self, input: &[u8], pos: usize) -> Option<usize> {
        #[cfg(feature = "std")]
        {
            let ends = self.0?;
            let at = (input.as_ptr() as usize)
                .wrapping_add(pos)
                .wrapping_sub(ends.base);
            let (first, close) = match input.get(pos)? {
                b'"' => (at.wrapping_add(1), b'"'),
                b'{' => (at, b'}'),
                b'[' => (at, b']'),
                _ => return None,
            };
            let len = if close == b'"' {
                // A deferred string: (start, end) of its contents.
                let &(_, b) = ends.strings.iter().find(|s| s.0 == first)?;
                b.checked_sub(at)? + 1
            } else {
                let &(_, e) = ends.containers.iter().find(|c| c.0 == first)?;
                e.checked_sub(at)?
            };
            let end = pos.checked_add(len)?;
            // Only ever the ends of this message: anything else is not taken.
            (input.get(end.checked_sub(1)?) == Some(&close)).then_some(end)
        }
        #[cfg(not(feature = "std"))]
        {
            let _ = (input, pos);
            None
        }
    }
}

/// A JSON string as it appears in the input: the raw, still escaped bytes between the quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JsonStr<'a> {
    raw: &'a [u8],
}

mod out;
mod scan;
mod unescape;
mod value;

pub(crate) use out::JsonOut;
#[cfg(feature = "std")]
pub use scan::{DEFER_FROM, Deferred, ENDS_DEPTH, Ends, MAX_DEFERRED, MAX_ENDS, check_deferred};
pub use unescape::{UNESCAPE_GATHER, write_str_literal};
#[cfg(feature = "std")]
pub(crate) use unescape::{unescape_chunk, unescape_chunk_checked};
pub(crate) use value::Walk;
pub use value::{Elements, Members};

use scan::*;
use unescape::*;

#[cfg(test)]
mod tests;
