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

use memchr::{memchr, memchr2};

use crate::buf::{Overflow, Sink};

/// The deepest nesting [`Value::parse`] can track, whatever [`JsonLimits::max_depth`] says: the
/// bit stack is a fixed 128 bytes so that parsing never needs more than a small, known stack.
pub const MAX_SUPPORTED_DEPTH: usize = 1024;

const STACK_WORDS: usize = MAX_SUPPORTED_DEPTH / 64;

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
        match *self {
            JsonErrorKind::UnexpectedEnd => f.write_str("input ended inside a value (truncated?)"),
            JsonErrorKind::UnexpectedByte(b) if b.is_ascii_graphic() => {
                write!(f, "unexpected byte '{}'", b as char)
            }
            JsonErrorKind::UnexpectedByte(b) => write!(f, "unexpected byte 0x{b:02x}"),
            JsonErrorKind::BadEscape => f.write_str("invalid escape in string"),
            JsonErrorKind::BadUnicodeEscape => {
                f.write_str("\\u escape not followed by four hex digits")
            }
            JsonErrorKind::InvalidUtf8 => f.write_str("string is not valid UTF-8"),
            JsonErrorKind::ControlInString => f.write_str("unescaped control character in string"),
            JsonErrorKind::BadNumber => f.write_str("malformed number"),
            JsonErrorKind::BadLiteral => f.write_str("malformed literal (true/false/null)"),
            JsonErrorKind::TooDeep { limit } => {
                write!(f, "nested deeper than the limit of {limit}")
            }
            JsonErrorKind::TrailingData => f.write_str("data after the JSON value"),
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.kind)
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

/// One bit per open container (1 = object), up to [`MAX_SUPPORTED_DEPTH`].
struct BitStack {
    bits: [u64; STACK_WORDS],
    depth: usize,
    limit: usize,
}

impl BitStack {
    fn new(max_depth: usize) -> Self {
        BitStack {
            bits: [0; STACK_WORDS],
            depth: 0,
            limit: max_depth.min(MAX_SUPPORTED_DEPTH),
        }
    }

    fn push(&mut self, is_object: bool, offset: usize) -> Result<(), JsonError> {
        if self.depth >= self.limit {
            return Err(err(JsonErrorKind::TooDeep { limit: self.limit }, offset));
        }
        let mask = 1u64 << (self.depth % 64);
        if let Some(word) = self.bits.get_mut(self.depth / 64) {
            if is_object {
                *word |= mask;
            } else {
                *word &= !mask;
            }
        }
        self.depth += 1;
        Ok(())
    }

    /// `Some(true)` inside an object, `Some(false)` inside an array, `None` at top level.
    fn top_is_object(&self) -> Option<bool> {
        let d = self.depth.checked_sub(1)?;
        let word = self.bits.get(d / 64)?;
        Some((word >> (d % 64)) & 1 == 1)
    }

    fn pop(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[inline]
fn skip_ws(input: &[u8], mut pos: usize) -> usize {
    while let Some(&b) = input.get(pos) {
        if !is_ws(b) {
            break;
        }
        pos += 1;
    }
    pos
}

#[inline]
fn skip_digits(input: &[u8], mut pos: usize) -> usize {
    while let Some(b'0'..=b'9') = input.get(pos) {
        pos += 1;
    }
    pos
}

fn hex_val(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'a'..=b'f' => Some(u16::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(b - b'A' + 10)),
        _ => None,
    }
}

/// The four hex digits at `input[pos..pos+4]` as a code unit.
fn hex4(input: &[u8], pos: usize) -> Option<u16> {
    let digits = input.get(pos..pos.checked_add(4)?)?;
    digits
        .iter()
        .try_fold(0u16, |acc, &b| Some((acc << 4) | hex_val(b)?))
}

/// Checks one run of string bytes without escapes: no raw controls, valid UTF-8.
#[inline]
fn check_span(span: &[u8], offset: usize) -> Result<(), JsonError> {
    // Branch-free OR per chunk vectorises; find the exact byte only on failure.
    let has_control = span
        .chunks(64)
        .any(|c| c.iter().fold(false, |acc, &b| acc | (b < 0x20)));
    if has_control {
        let i = span.iter().position(|&b| b < 0x20).unwrap_or(0);
        return Err(err(JsonErrorKind::ControlInString, offset + i));
    }
    core::str::from_utf8(span)
        .map(|_| ())
        .map_err(|e| err(JsonErrorKind::InvalidUtf8, offset + e.valid_up_to()))
}

// ---- the string fast path: 64 bytes at a time ----

const LO7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
const HIGH: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;
/// Bytes of a word whose value is zero get their high bit set (exact: no carry between bytes).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !((x & LO7).wrapping_add(LO7) | x) & HIGH
}

/// Bit `i` is set when `block[i]` is a quote, a backslash or a control character (below
/// U+0020): the only bytes a string scan must stop at. On the host's x86_64, 16 bytes per SSE2
/// compare (baseline there; `safe_arch` wraps the intrinsics without `unsafe`); elsewhere
/// [`specials_swar`].
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn specials(block: &[u8; 64]) -> u64 {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, max_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let quote = set_splat_i8_m128i(b'"' as i8);
    let backslash = set_splat_i8_m128i(b'\\' as i8);
    let below = set_splat_i8_m128i(0x1F);
    let mut mask = 0u64;
    for (j, chunk) in block.chunks_exact(16).enumerate() {
        let Ok(lanes) = <&[u8; 16]>::try_from(chunk) else {
            continue;
        };
        let v = load_unaligned_m128i(lanes);
        // A byte is a control exactly when max(byte, 0x1F) is 0x1F (unsigned).
        let hits = cmp_eq_mask_i8_m128i(v, quote)
            | cmp_eq_mask_i8_m128i(v, backslash)
            | cmp_eq_mask_i8_m128i(max_u8_m128i(v, below), below);
        // The mask has 16 meaningful bits; the cast keeps exactly them.
        mask |= u64::from(move_mask_i8_m128i(hits) as u16) << (16 * j);
    }
    mask
}

/// [`specials`] eight bytes per word, no `unsafe`, no target features (the edge and
/// non-x86_64 hosts).
#[cfg_attr(all(feature = "std", target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
fn specials_swar(block: &[u8; 64]) -> u64 {
    let mut mask = 0u64;
    for (j, chunk) in block.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = zero_bytes(w ^ (ONES * u64::from(b'"')));
        let backslash = zero_bytes(w ^ (ONES * u64::from(b'\\')));
        // Below 0x20: the low seven bits plus 0x60 stay under 0x80, and the high bit is clear.
        let control = !((w & LO7).wrapping_add(0x6060_6060_6060_6060) | w) & HIGH;
        let flags = (quote | backslash | control) >> 7;
        // Gather the eight flags (one per byte, 0 or 1) into eight bits.
        mask |= (flags.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j);
    }
    mask
}

/// [`specials`] where SSE2 is not used: the word-at-a-time form.
#[cfg(not(all(feature = "std", target_arch = "x86_64")))]
#[inline(always)]
fn specials(block: &[u8; 64]) -> u64 {
    specials_swar(block)
}

/// The 64 bytes of `input` from `p` (padded with a plain byte past the end) and how many of
/// them are real.
#[inline(always)]
fn block_at(input: &[u8], p: usize) -> ([u8; 64], usize) {
    let mut block = [b'a'; 64];
    let rest = input.get(p..).unwrap_or(&[]);
    let n = rest.len().min(64);
    if let (Some(dst), Some(src)) = (block.get_mut(..n), rest.get(..n)) {
        dst.copy_from_slice(src);
    }
    (block, n)
}

/// The first backslash in `hay`. On the host the first 64 bytes are looked at eight at a time
/// (escapes in tool text are often a few dozen bytes apart, where setting up `memchr` costs
/// more than the search), then `memchr` takes the rest; the edge calls `memchr` alone.
#[inline]
fn find_backslash(hay: &[u8]) -> Option<usize> {
    let mut i = 0;
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        while i < 64 {
            let Some(word) = hay.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
                break;
            };
            let hits = zero_bytes(u64::from_le_bytes(word) ^ (ONES * u64::from(b'\\')));
            if hits != 0 {
                return Some(i + (hits.trailing_zeros() / 8) as usize);
            }
            i += 8;
        }
    }
    memchr(b'\\', hay.get(i..)?).map(|j| i + j)
}

/// The first quote or backslash in `hay`, as [`find_backslash`] finds a backslash.
#[inline]
fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < 64 {
        let Some(word) = hay.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
            break;
        };
        let w = u64::from_le_bytes(word);
        let hits =
            zero_bytes(w ^ (ONES * u64::from(b'\\'))) | zero_bytes(w ^ (ONES * u64::from(b'"')));
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    memchr2(b'"', b'\\', hay.get(i..)?).map(|j| i + j)
}

/// True when `bytes` are UTF-8: vectorised where the target has it (`simdutf8`), else `core`.
#[inline]
fn is_utf8(bytes: &[u8]) -> bool {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // Keys, ids and names: short and ASCII, a few words looked at, no call.
        if bytes.len() <= 32 && bytes.is_ascii() {
            return true;
        }
        simdutf8::basic::from_utf8(bytes).is_ok()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        core::str::from_utf8(bytes).is_ok()
    }
}

/// Strings longer than this are left unchecked by [`Value::parse_deferring`].
#[cfg(feature = "std")]
pub const DEFER_FROM: usize = 4096;
/// At most this many strings are left unchecked by [`Value::parse_deferring`] (the rest are
/// checked where they lie).
#[cfg(feature = "std")]
pub const MAX_DEFERRED: usize = 4;

/// Containers less deep than this (the message is at depth 0, its members' values at 1) have
/// their ends noted by [`Value::parse_noting`] and [`Value::parse_deferring`].
#[cfg(feature = "std")]
pub const ENDS_DEPTH: usize = 3;
/// At most this many containers' ends are noted (the first to close).
#[cfg(feature = "std")]
pub const MAX_ENDS: usize = 8;

/// Where a parse saw some values of a message end: the containers near the top (the message,
/// its members' values, theirs: [`ENDS_DEPTH`]) and the strings it deferred. A value that
/// knows them ([`Value::knowing`]), and every value read from it, crosses those values at once
/// when a walk passes over them, instead of scanning them again: the id lookup, `resultType`
/// and the in-place plan each skip the result or the big text in a few compares. Host only.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ends {
    /// The message's first byte's address and its length: the offsets are from it.
    base: usize,
    len: usize,
    /// Containers: (offset of the opening bracket, offset after the closing one).
    containers: heapless::Vec<(usize, usize), MAX_ENDS>,
    /// Deferred strings' contents: (after the opening quote, at the closing quote).
    strings: heapless::Vec<(usize, usize), MAX_DEFERRED>,
}

#[cfg(feature = "std")]
impl Ends {
    fn of(input: &[u8]) -> Self {
        Ends {
            base: input.as_ptr() as usize,
            len: input.len(),
            ..Ends::default()
        }
    }
}

/// The value strings [`Value::parse_deferring`] did not check: the offsets of their contents
/// (after the opening quote, at the closing quote), in the order they came; and the [`Ends`]
/// that parse noted.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deferred {
    ends: Ends,
}

#[cfg(feature = "std")]
impl Deferred {
    /// Nothing was deferred: the value is checked as [`Value::parse`] checks it.
    pub fn is_empty(&self) -> bool {
        self.ends.strings.is_empty()
    }

    /// The deferred strings' contents, as (start, end) offsets of the input, in order.
    pub fn spans(&self) -> &[(usize, usize)] {
        &self.ends.strings
    }

    /// Where the parse saw values end (the deferred strings among them), for
    /// [`Value::knowing`].
    pub fn ends(&self) -> &Ends {
        &self.ends
    }
}

/// What [`Value::parse_noting`] and [`Value::parse_deferring`] do as they validate: note the
/// ends of shallow containers, and (when deferring) leave big value strings unchecked.
#[cfg(feature = "std")]
struct Noting<'e> {
    ends: &'e mut Ends,
    /// Where the open containers of depth below [`ENDS_DEPTH`] start.
    starts: [usize; ENDS_DEPTH],
    defer: bool,
}

#[cfg(feature = "std")]
impl Visitor for Noting<'_> {
    #[inline(always)]
    fn value_string(&mut self, input: &[u8], pos: usize) -> Result<usize, JsonError> {
        let strings = &mut self.ends.strings;
        if !self.defer
            || !cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
            || strings.is_full()
        {
            return scan_string(input, pos);
        }
        match string_end_upto(input, pos, DEFER_FROM) {
            Ok(end) => Ok(end),
            Err(false) => scan_string_exact(input, pos),
            Err(true) => {
                let end = skip_string(input, pos);
                // Cut by the end of the input: the exact scanner says where.
                if end <= pos + 1
                    || input.get(end - 1) != Some(&b'"')
                    || strings.push((pos + 1, end - 1)).is_err()
                {
                    return scan_string(input, pos);
                }
                Ok(end)
            }
        }
    }

    #[inline(always)]
    fn open(&mut self, depth: usize, pos: usize) {
        if let Some(s) = self.starts.get_mut(depth) {
            *s = pos;
        }
    }

    #[inline(always)]
    fn close(&mut self, depth: usize, end: usize) {
        if let Some(&start) = self.starts.get(depth) {
            // Full: the rest are walked as before.
            let _ = self.ends.containers.push((start, end));
        }
    }
}

/// Checks a string that [`Value::parse_deferring`] deferred, from `from` (its start, or a
/// place after an escape and at a character boundary where everything before was checked)
/// to its closing quote at `end`: `Err` with what [`Value::parse`] says of the first error
/// there.
#[cfg(feature = "std")]
pub fn check_deferred(input: &[u8], from: usize, end: usize) -> Result<(), JsonError> {
    // The exact scanner starts after the byte at `from - 1` (the quote, at the start).
    let at = from
        .checked_sub(1)
        .ok_or(err(JsonErrorKind::UnexpectedEnd, from))?;
    match scan_string_exact(input, at) {
        Ok(e) if e == end + 1 => Ok(()),
        Ok(_) => Err(err(JsonErrorKind::UnexpectedEnd, end)),
        Err(e) => Err(e),
    }
}

/// The offset after the string whose opening quote is at `pos`, when the string is plainly
/// valid: escapes well formed, no raw control, and UTF-8 as a whole (escapes are ASCII, so the
/// whole is UTF-8 exactly when every run between escapes is). `None` for
/// anything else, including a string cut by the end of `input`: the exact scanner then says
/// what and where, so errors and their precedence are those of [`scan_string_exact`].
///
/// Looks at 64 bytes at a time and only at the bytes a string must stop at: text with an
/// escape every few dozen bytes is crossed without a call per escape.
#[inline]
fn string_end(input: &[u8], pos: usize) -> Option<usize> {
    string_end_upto(input, pos, usize::MAX).ok()
}

/// [`string_end`], giving up (`Err(true)`) once `upto` bytes of the string were looked at
/// without reaching its end; `Err(false)` for anything `string_end` says `None` to.
#[inline(always)]
fn string_end_upto(input: &[u8], pos: usize, upto: usize) -> Result<usize, bool> {
    let start = pos + 1;
    let mut p = start;
    'blocks: loop {
        if p - start >= upto {
            return Err(true);
        }
        let (n, mut mask) = match input.get(p..p + 64) {
            Some(b) => (64, specials(<&[u8; 64]>::try_from(b).map_err(|_| false)?)),
            // The padding is a plain byte: it never sets a bit.
            None => {
                let (block, n) = block_at(input, p);
                (n, specials(&block))
            }
        };
        while mask != 0 {
            let q = p + mask.trailing_zeros() as usize;
            match input.get(q).ok_or(false)? {
                b'"' => {
                    if !is_utf8(input.get(start..q).ok_or(false)?) {
                        return Err(false);
                    }
                    return Ok(q + 1);
                }
                b'\\' => {
                    let next = match input.get(q + 1).ok_or(false)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => q + 2,
                        b'u' => {
                            hex4(input, q + 2).ok_or(false)?;
                            q + 6
                        }
                        _ => return Err(false),
                    };
                    let skip = next - p;
                    if skip >= 64 {
                        p = next;
                        continue 'blocks;
                    }
                    mask &= u64::MAX << skip;
                }
                // A raw control character.
                _ => return Err(false),
            }
        }
        if n < 64 {
            // The input ended inside the string.
            return Err(false);
        }
        p += 64;
    }
}

/// Validates the string whose opening quote is at `pos`; returns the offset after the closing
/// quote.
#[inline]
fn scan_string(input: &[u8], pos: usize) -> Result<usize, JsonError> {
    // On the edge the exact scanner alone runs (no extra code in flash).
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
        && let Some(end) = string_end(input, pos)
    {
        return Ok(end);
    }
    scan_string_exact(input, pos)
}

/// [`scan_string`] one run between escapes at a time: the error and its offset for an invalid
/// string (and the end of a valid one).
#[cold]
fn scan_string_exact(input: &[u8], pos: usize) -> Result<usize, JsonError> {
    let mut p = pos + 1;
    loop {
        let rest = input.get(p..).unwrap_or(&[]);
        let Some(i) = memchr2(b'"', b'\\', rest) else {
            check_span(rest, p)?;
            return Err(err(JsonErrorKind::UnexpectedEnd, input.len()));
        };
        check_span(rest.get(..i).unwrap_or(&[]), p)?;
        let q = p + i;
        if input.get(q) == Some(&b'"') {
            return Ok(q + 1);
        }
        match input.get(q + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => p = q + 2,
            Some(b'u') => {
                if hex4(input, q + 2).is_none() {
                    if input.len() < q + 6
                        && input
                            .get(q + 2..)
                            .is_some_and(|t| t.iter().all(|&b| hex_val(b).is_some()))
                    {
                        return Err(err(JsonErrorKind::UnexpectedEnd, input.len()));
                    }
                    return Err(err(JsonErrorKind::BadUnicodeEscape, q));
                }
                p = q + 6;
            }
            Some(_) => return Err(err(JsonErrorKind::BadEscape, q)),
            None => return Err(err(JsonErrorKind::UnexpectedEnd, input.len())),
        }
    }
}

/// Validates the number starting at `pos`; returns the offset after it.
fn scan_number(input: &[u8], pos: usize) -> Result<usize, JsonError> {
    let bad = |at: usize| err(JsonErrorKind::BadNumber, at);
    let mut p = pos;
    if input.get(p) == Some(&b'-') {
        p += 1;
    }
    let leading_zero = match input.get(p) {
        Some(b'0') => {
            p += 1;
            true
        }
        Some(b'1'..=b'9') => {
            p = skip_digits(input, p + 1);
            false
        }
        _ => return Err(bad(p)),
    };
    if leading_zero && matches!(input.get(p), Some(b'0'..=b'9')) {
        return Err(bad(p));
    }
    if input.get(p) == Some(&b'.') {
        let q = skip_digits(input, p + 1);
        if q == p + 1 {
            return Err(bad(q));
        }
        p = q;
    }
    if let Some(b'e' | b'E') = input.get(p) {
        p += 1;
        if let Some(b'+' | b'-') = input.get(p) {
            p += 1;
        }
        let q = skip_digits(input, p);
        if q == p {
            return Err(bad(q));
        }
        p = q;
    }
    Ok(p)
}

fn scan_literal(input: &[u8], pos: usize, lit: &[u8]) -> Result<usize, JsonError> {
    let end = pos + lit.len();
    match input.get(pos..end) {
        Some(s) if s == lit => Ok(end),
        _ => {
            // A prefix of the literal at the end of input is a truncation, not a typo.
            let rest = input.get(pos..).unwrap_or(&[]);
            if rest.len() < lit.len() && lit.starts_with(rest) {
                Err(err(JsonErrorKind::UnexpectedEnd, input.len()))
            } else {
                Err(err(JsonErrorKind::BadLiteral, pos))
            }
        }
    }
}

/// Expects `"key"` ws `:` at `pos`; returns the offset after the colon.
fn scan_key_colon(input: &[u8], pos: usize) -> Result<usize, JsonError> {
    match input.get(pos) {
        Some(b'"') => {}
        Some(&b) => return Err(err(JsonErrorKind::UnexpectedByte(b), pos)),
        None => return Err(err(JsonErrorKind::UnexpectedEnd, pos)),
    }
    let p = skip_ws(input, scan_string(input, pos)?);
    match input.get(p) {
        Some(b':') => Ok(p + 1),
        Some(&b) => Err(err(JsonErrorKind::UnexpectedByte(b), p)),
        None => Err(err(JsonErrorKind::UnexpectedEnd, p)),
    }
}

/// How [`validate`] checks the strings that are values (keys are always checked), and what it
/// tells of containers as they open and close (nothing, for [`Value::parse`]).
trait Visitor {
    /// Checks the string whose opening quote is at `pos`; the offset after it.
    fn value_string(&mut self, input: &[u8], pos: usize) -> Result<usize, JsonError>;

    /// A container opens at `pos`, `depth` containers around it.
    #[inline(always)]
    fn open(&mut self, depth: usize, pos: usize) {
        let _ = (depth, pos);
    }

    /// The container opened at `depth` ends before `end`.
    #[inline(always)]
    fn close(&mut self, depth: usize, end: usize) {
        let _ = (depth, end);
    }
}

/// Every string checked where it lies (what [`Value::parse`] does).
struct Checked;

impl Visitor for Checked {
    #[inline(always)]
    fn value_string(&mut self, input: &[u8], pos: usize) -> Result<usize, JsonError> {
        scan_string(input, pos)
    }
}

/// Validates one value starting at `pos` (after whitespace); returns the offset after it.
fn validate(input: &[u8], pos: usize, limits: JsonLimits) -> Result<usize, JsonError> {
    validate_with(input, pos, limits, &mut Checked)
}

/// [`validate`], value strings checked by `strings`.
#[inline(always)]
fn validate_with(
    input: &[u8],
    mut pos: usize,
    limits: JsonLimits,
    strings: &mut impl Visitor,
) -> Result<usize, JsonError> {
    let mut stack = BitStack::new(limits.max_depth);
    'value: loop {
        pos = skip_ws(input, pos);
        match input.get(pos).copied() {
            None => return Err(err(JsonErrorKind::UnexpectedEnd, pos)),
            Some(b'{') => {
                strings.open(stack.depth, pos);
                stack.push(true, pos)?;
                pos = skip_ws(input, pos + 1);
                if input.get(pos) == Some(&b'}') {
                    stack.pop();
                    pos += 1;
                    strings.close(stack.depth, pos);
                } else {
                    pos = scan_key_colon(input, pos)?;
                    continue 'value;
                }
            }
            Some(b'[') => {
                strings.open(stack.depth, pos);
                stack.push(false, pos)?;
                pos = skip_ws(input, pos + 1);
                if input.get(pos) == Some(&b']') {
                    stack.pop();
                    pos += 1;
                    strings.close(stack.depth, pos);
                } else {
                    continue 'value;
                }
            }
            Some(b'"') => pos = strings.value_string(input, pos)?,
            Some(b't') => pos = scan_literal(input, pos, b"true")?,
            Some(b'f') => pos = scan_literal(input, pos, b"false")?,
            Some(b'n') => pos = scan_literal(input, pos, b"null")?,
            Some(b'-' | b'0'..=b'9') => pos = scan_number(input, pos)?,
            Some(b) => return Err(err(JsonErrorKind::UnexpectedByte(b), pos)),
        }
        // A value just ended: close containers until one wants another value.
        loop {
            let Some(in_object) = stack.top_is_object() else {
                return Ok(pos);
            };
            pos = skip_ws(input, pos);
            match input.get(pos).copied() {
                Some(b',') => {
                    pos += 1;
                    if in_object {
                        pos = scan_key_colon(input, skip_ws(input, pos))?;
                    }
                    continue 'value;
                }
                Some(b'}') if in_object => {
                    stack.pop();
                    pos += 1;
                    strings.close(stack.depth, pos);
                }
                Some(b']') if !in_object => {
                    stack.pop();
                    pos += 1;
                    strings.close(stack.depth, pos);
                }
                Some(b) => return Err(err(JsonErrorKind::UnexpectedByte(b), pos)),
                None => return Err(err(JsonErrorKind::UnexpectedEnd, pos)),
            }
        }
    }
}

fn kind_of(first: u8) -> Kind {
    match first {
        b'{' => Kind::Object,
        b'[' => Kind::Array,
        b'"' => Kind::String,
        b't' | b'f' => Kind::Bool,
        b'n' => Kind::Null,
        _ => Kind::Number,
    }
}

// ---- skipping inside an already validated span (no validation, never panics) ----

/// Offset after the string whose opening quote is at `pos` (validated input assumed).
///
/// Looks only for quotes: a quote preceded by an odd run of backslashes is escaped. Each run
/// ends at the quote after it, so every byte is looked at a bounded number of times, and text
/// with many `\n` escapes is skipped at `memchr` speed.
fn skip_string(input: &[u8], pos: usize) -> usize {
    let mut p = pos + 1;
    // Keys, ids and names are short: their quote is found byte by byte, with no `memchr`
    // call (whose set-up costs more than such a string). Host only (less code on the edge).
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        let upto = (pos + 1 + SHORT_STRING).min(input.len());
        while p < upto {
            match input.get(p) {
                Some(b'"') => return p + 1,
                // No quote before it: the search below starts here.
                Some(b'\\') => break,
                _ => p += 1,
            }
        }
    }
    loop {
        let rest = input.get(p..).unwrap_or(&[]);
        let Some(i) = memchr(b'"', rest) else {
            return input.len();
        };
        let q = p + i;
        let before = input.get(pos + 1..q).unwrap_or(&[]);
        let backslashes = before.iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 0 {
            return q + 1;
        }
        p = q + 1;
    }
}

/// How far [`skip_string`] looks byte by byte before it calls `memchr`.
const SHORT_STRING: usize = 24;

/// Offset after the value starting at `pos` (validated input assumed); at once when `hint`
/// knows where it ends.
#[inline]
fn skip_value(input: &[u8], pos: usize, hint: Hint<'_>) -> usize {
    if let Some(end) = hint.end(input, pos) {
        return end;
    }
    match input.get(pos) {
        Some(b'"') => skip_string(input, pos),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut p = pos;
            while let Some(&b) = input.get(p) {
                match b {
                    b'"' => {
                        p = skip_string(input, p);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return p + 1;
                        }
                    }
                    _ => {}
                }
                p += 1;
            }
            input.len()
        }
        Some(_) => {
            let mut p = pos;
            while let Some(&b) = input.get(p) {
                if is_ws(b) || matches!(b, b',' | b']' | b'}' | b':') {
                    break;
                }
                p += 1;
            }
            p
        }
        None => pos,
    }
}

fn value_at<'a>(input: &'a [u8], pos: usize, hint: Hint<'a>) -> Option<(Value<'a>, usize)> {
    let first = *input.get(pos)?;
    let end = skip_value(input, pos, hint);
    let raw = input.get(pos..end)?;
    Some((
        Value {
            raw,
            kind: kind_of(first),
            hint,
        },
        end,
    ))
}

impl<'a> Value<'a> {
    /// Parses `input` as exactly one JSON value (whitespace around it allowed), strictly per
    /// RFC 8259, iteratively, with at most `limits.max_depth` containers open at once.
    pub fn parse(input: &'a [u8], limits: JsonLimits) -> Result<Value<'a>, JsonError> {
        let start = skip_ws(input, 0);
        let end = validate(input, start, limits)?;
        Value::spanning(input, start, end)
    }

    /// The value validated between `start` and `end` of `input`, with nothing but whitespace
    /// after it (the end of [`Value::parse`] and [`Value::parse_noting`]).
    fn spanning(input: &'a [u8], start: usize, end: usize) -> Result<Value<'a>, JsonError> {
        let after = skip_ws(input, end);
        if after != input.len() {
            return Err(err(JsonErrorKind::TrailingData, after));
        }
        let raw = input
            .get(start..end)
            .ok_or(err(JsonErrorKind::UnexpectedEnd, start))?;
        let first = raw
            .first()
            .copied()
            .ok_or(err(JsonErrorKind::UnexpectedEnd, start))?;
        Ok(Value {
            raw,
            kind: kind_of(first),
            hint: Hint::NONE,
        })
    }

    /// [`Value::parse`] (the same value, the same errors), also noting where the shallow
    /// containers end ([`Ends`]): give them to the value with [`Value::knowing`] and a walk
    /// that passes over the result (the id lookup, `resultType`) crosses it at once. Host only.
    #[cfg(feature = "std")]
    pub fn parse_noting(
        input: &'a [u8],
        limits: JsonLimits,
    ) -> Result<(Value<'a>, Ends), JsonError> {
        let mut ends = Ends::of(input);
        let mut noting = Noting {
            ends: &mut ends,
            starts: [0; ENDS_DEPTH],
            defer: false,
        };
        let start = skip_ws(input, 0);
        let end = validate_with(input, start, limits, &mut noting)?;
        Ok((Value::spanning(input, start, end)?, ends))
    }

    /// This value, knowing `ends` (noted by the parse of its message: [`Value::parse_noting`],
    /// [`Deferred::ends`]), as is every value read from it. `ends` of another message are
    /// not taken (the value is returned as it is).
    #[cfg(feature = "std")]
    pub fn knowing<'b>(self, ends: &'b Ends) -> Value<'b>
    where
        'a: 'b,
    {
        let at = (self.raw.as_ptr() as usize).wrapping_sub(ends.base);
        let inside = at
            .checked_add(self.raw.len())
            .is_some_and(|e| e <= ends.len);
        Value {
            raw: self.raw,
            kind: self.kind,
            hint: if inside {
                Hint(Some(ends), PhantomData)
            } else {
                self.hint
            },
        }
    }

    /// [`Value::parse`], except that up to [`MAX_DEFERRED`] value strings longer than
    /// [`DEFER_FROM`] bytes are only crossed (their closing quote found), not checked: their
    /// contents are returned to be checked later, by whoever reads them next (the host's
    /// in-place text writer checks them as it unescapes). Any error is exactly
    /// [`Value::parse`]'s (a failed parse is redone by it). Host only.
    ///
    /// The returned value must not be read into a deferred string before that string is
    /// checked ([`check_deferred`] checks one as `parse` would have).
    #[cfg(feature = "std")]
    pub fn parse_deferring(
        input: &'a [u8],
        limits: JsonLimits,
    ) -> Result<(Value<'a>, Deferred), JsonError> {
        let mut deferred = Deferred {
            ends: Ends::of(input),
        };
        let mut noting = Noting {
            ends: &mut deferred.ends,
            starts: [0; ENDS_DEPTH],
            defer: true,
        };
        let start = skip_ws(input, 0);
        let ok = validate_with(input, start, limits, &mut noting)
            .ok()
            .filter(|&end| skip_ws(input, end) == input.len())
            .and_then(|end| input.get(start..end))
            .and_then(|raw| {
                let first = *raw.first()?;
                Some(Value {
                    raw,
                    kind: kind_of(first),
                    hint: Hint::NONE,
                })
            });
        match ok {
            Some(v) => Ok((v, deferred)),
            // The exact error, as `parse` says it (deferred strings come first if invalid).
            None => Value::parse(input, limits).map(|v| (v, Deferred::default())),
        }
    }

    /// The value's type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The exact bytes of the value in the input (no surrounding whitespace).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The first member named `key` (compared after unescaping), if this is an object.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v)
    }

    /// The members of an object, in order (duplicates included); empty for other kinds.
    pub fn members(&self) -> Members<'a> {
        Members {
            raw: if self.kind == Kind::Object {
                self.raw
            } else {
                &[]
            },
            pos: 1,
            hint: self.hint,
        }
    }

    /// The elements of an array, in order; empty for other kinds.
    pub fn elements(&self) -> Elements<'a> {
        Elements {
            raw: if self.kind == Kind::Array {
                self.raw
            } else {
                &[]
            },
            pos: 1,
            hint: self.hint,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<JsonStr<'a>> {
        if self.kind != Kind::String {
            return None;
        }
        let inner = self.raw.get(1..self.raw.len().checked_sub(1)?)?;
        Some(JsonStr { raw: inner })
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.raw {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is written as an integer (no fraction, no exponent) that
    /// fits. `-0` gives `0`.
    pub fn as_i64(&self) -> Option<i64> {
        if self.kind != Kind::Number {
            return None;
        }
        let (neg, digits) = match self.raw.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, self.raw),
        };
        let mut n: i64 = 0;
        for &b in digits {
            let d = match b {
                b'0'..=b'9' => i64::from(b - b'0'),
                _ => return None,
            };
            n = n.checked_mul(10)?;
            n = if neg {
                n.checked_sub(d)?
            } else {
                n.checked_add(d)?
            };
        }
        Some(n)
    }

    /// The number as a `u64`, if it is written as a non-negative integer (no sign, fraction or
    /// exponent) that fits.
    pub fn as_u64(&self) -> Option<u64> {
        if self.kind != Kind::Number || self.raw.is_empty() {
            return None;
        }
        self.raw.iter().try_fold(0u64, |n, &b| match b {
            b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
            _ => None,
        })
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        self.kind == Kind::Null
    }

    /// Writes the value compactly, as `JSON.stringify(JSON.parse(raw))` would print it: no
    /// insignificant whitespace, member order and duplicates kept, strings re-escaped
    /// canonically (only `"`, `\` and control characters escaped, with the `\b \f \n \r \t`
    /// short forms and lowercase `\u00xx` otherwise; `\/` and other escapes become the raw
    /// character; non-ASCII written raw; a lone surrogate, which has no UTF-8 form, stays a
    /// lowercase `\udxxx` escape as well-formed `JSON.stringify` prints it).
    ///
    /// Numbers are copied as written: `JSON.stringify` would normalise `1.0` to `1` or `1e2` to
    /// `100`; we deliberately do not, since that needs float formatting and loses nothing a
    /// reader cares about.
    pub fn write_compact(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        let raw = self.raw;
        let mut p = 0;
        while p < raw.len() {
            // Copy the run up to the next whitespace or string start in one put.
            let run_end = raw
                .get(p..)
                .and_then(|r| r.iter().position(|&b| b == b'"' || is_ws(b)))
                .map_or(raw.len(), |i| p + i);
            if run_end > p {
                out.put(raw.get(p..run_end).unwrap_or(&[]))?;
            }
            p = run_end;
            match raw.get(p) {
                Some(b'"') => {
                    let end = skip_string(raw, p);
                    let inner = raw.get(p + 1..end.saturating_sub(1)).unwrap_or(&[]);
                    write_json_str(out, JsonStr { raw: inner })?;
                    p = end;
                }
                Some(_) => p = skip_ws(raw, p),
                None => {}
            }
        }
        Ok(())
    }
}

/// Walks a validated container by offsets, one member or element at a time, so that a caller
/// looking for several members (and into them) crosses each value once: [`Value::get`] skips
/// every value before the one it finds, each time it is called. Crate-internal (for
/// `content::flatten`); like the accessors it returns `None` rather than panic on odd input.
pub(crate) struct Walk<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Walk<'a> {
    /// The members or elements of `v` (an object or an array).
    pub(crate) fn of(v: Value<'a>) -> Self {
        Walk {
            raw: v.raw,
            pos: 1,
            hint: v.hint,
        }
    }

    /// The container whose opening bracket is at `pos` of the walked bytes of `outer`, walked
    /// in the same bytes (so offsets carry over).
    pub(crate) fn inner(&self, pos: usize) -> Self {
        Walk {
            raw: self.raw,
            pos: pos + 1,
            hint: self.hint,
        }
    }

    /// The byte at `pos` (where a value starts: `{`, `[`, `"` …).
    pub(crate) fn byte(&self, pos: usize) -> Option<u8> {
        self.raw.get(pos).copied()
    }

    fn after_comma(&self) -> usize {
        let p = skip_ws(self.raw, self.pos);
        if self.raw.get(p) == Some(&b',') {
            skip_ws(self.raw, p + 1)
        } else {
            p
        }
    }

    /// The next member's key and where its value starts; then call [`Walk::take`] or walk
    /// into the value and [`Walk::resume`] after it. `None` at the closing brace.
    pub(crate) fn next_key(&mut self) -> Option<(JsonStr<'a>, usize)> {
        let raw = self.raw;
        let p = self.after_comma();
        if raw.get(p) != Some(&b'"') {
            self.pos = p;
            return None;
        }
        let key_end = skip_string(raw, p);
        let key = JsonStr {
            raw: raw.get(p + 1..key_end.saturating_sub(1))?,
        };
        let colon = skip_ws(raw, key_end);
        if raw.get(colon) != Some(&b':') {
            return None;
        }
        self.pos = skip_ws(raw, colon + 1);
        Some((key, self.pos))
    }

    /// Where the next element starts. `None` at the closing bracket.
    pub(crate) fn next_element(&mut self) -> Option<usize> {
        let p = self.after_comma();
        self.pos = p;
        match self.raw.get(p) {
            None | Some(b']' | b'}') => None,
            Some(_) => Some(p),
        }
    }

    /// The value that starts where the walk stands, whole; the walk goes on after it.
    pub(crate) fn take(&mut self) -> Option<Value<'a>> {
        let (v, end) = value_at(self.raw, self.pos, self.hint)?;
        self.pos = end;
        Some(v)
    }

    /// The value where the walk stands is a string: writes it unescaped to `out` (the hint
    /// given to [`Sink::reserve`] is the rest of the walked bytes, an upper bound) and goes on
    /// after it, crossing it once. On the edge: skipped, then unescaped (less code).
    pub(crate) fn unescape_string(&mut self, out: &mut impl Sink) -> Result<(), Overflow> {
        let raw = self.raw;
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
            && raw.get(self.pos) == Some(&b'"')
        {
            let body = raw.get(self.pos + 1..).unwrap_or(&[]);
            out.reserve(body.len());
            let end = unescape_run::<true>(body, out)?;
            self.pos = end.map_or(raw.len(), |q| self.pos + 1 + q + 1);
            return Ok(());
        }
        match self.take().and_then(|v| v.as_str()) {
            Some(s) => {
                out.reserve(s.raw().len());
                s.unescape_into(out)
            }
            None => Ok(()),
        }
    }

    /// Goes on after a value that ended at `end` (walked by an inner walk).
    pub(crate) fn resume(&mut self, end: usize) {
        self.pos = end;
    }

    /// After `next_key`/`next_element` said `None`: the offset after the closing bracket.
    pub(crate) fn end(&self) -> usize {
        self.pos + 1
    }

    /// The object `start..end` of the walked bytes, as a value.
    pub(crate) fn object(&self, start: usize, end: usize) -> Option<Value<'a>> {
        Some(Value {
            raw: self.raw.get(start..end)?,
            kind: Kind::Object,
            hint: self.hint,
        })
    }
}

/// Iterator over an object's members: `(key, value)` in input order. See [`Value::members`].
#[derive(Debug, Clone)]
pub struct Members<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JsonStr<'a>, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let raw = self.raw;
        let mut p = skip_ws(raw, self.pos);
        if raw.get(p) == Some(&b',') {
            p = skip_ws(raw, p + 1);
        }
        if raw.get(p) != Some(&b'"') {
            self.pos = raw.len();
            return None;
        }
        let key_end = skip_string(raw, p);
        let key = JsonStr {
            raw: raw.get(p + 1..key_end.saturating_sub(1))?,
        };
        p = skip_ws(raw, key_end);
        if raw.get(p) != Some(&b':') {
            self.pos = raw.len();
            return None;
        }
        p = skip_ws(raw, p + 1);
        let Some((value, end)) = value_at(raw, p, self.hint) else {
            self.pos = raw.len();
            return None;
        };
        self.pos = end;
        Some((key, value))
    }
}

/// Iterator over an array's elements in order. See [`Value::elements`].
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let raw = self.raw;
        let mut p = skip_ws(raw, self.pos);
        if raw.get(p) == Some(&b',') {
            p = skip_ws(raw, p + 1);
        }
        match raw.get(p) {
            None | Some(b']') => {
                self.pos = raw.len();
                return None;
            }
            Some(_) => {}
        }
        let Some((value, end)) = value_at(raw, p, self.hint) else {
            self.pos = raw.len();
            return None;
        };
        self.pos = end;
        Some(value)
    }
}

/// One decoded piece of a string.
enum Piece<'a> {
    /// Bytes without escapes (valid UTF-8, no `"`, `\` or controls: validated by `parse`).
    Span(&'a [u8]),
    /// A character from an escape (surrogate pairs already joined).
    Char(char),
    /// A surrogate code unit without its partner.
    Lone(u16),
}

/// Walks the escaped bytes of a string piece by piece.
struct Pieces<'a> {
    raw: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        let rest = self.raw.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let Some(i) = find_backslash(rest) else {
            self.pos = self.raw.len();
            return Some(Piece::Span(rest));
        };
        if i > 0 {
            self.pos += i;
            return rest.get(..i).map(Piece::Span);
        }
        let esc = rest.get(1).copied();
        self.pos += 2;
        let c = match esc {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let Some(unit) = hex4(rest, 2) else {
                    self.pos = self.raw.len();
                    return None;
                };
                self.pos += 4;
                return Some(match unit {
                    0xD800..=0xDBFF => {
                        let low = match (rest.get(6..8), hex4(rest, 8)) {
                            (Some(b"\\u"), Some(lo @ 0xDC00..=0xDFFF)) => Some(lo),
                            _ => None,
                        };
                        match low {
                            Some(lo) => {
                                self.pos += 6;
                                let cp = 0x10000
                                    + ((u32::from(unit) - 0xD800) << 10)
                                    + (u32::from(lo) - 0xDC00);
                                Piece::Char(char::from_u32(cp).unwrap_or('\u{FFFD}'))
                            }
                            None => Piece::Lone(unit),
                        }
                    }
                    0xDC00..=0xDFFF => Piece::Lone(unit),
                    _ => Piece::Char(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}')),
                });
            }
            _ => {
                self.pos = self.raw.len();
                return None;
            }
        };
        Some(Piece::Char(c))
    }
}

impl<'a> JsonStr<'a> {
    fn pieces(&self) -> Pieces<'a> {
        Pieces {
            raw: self.raw,
            pos: 0,
        }
    }

    /// The raw bytes between the quotes, escapes as written.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The string itself, borrowed, when it holds no escapes.
    pub fn as_plain(&self) -> Option<&'a str> {
        if memchr(b'\\', self.raw).is_some() {
            return None;
        }
        core::str::from_utf8(self.raw).ok()
    }

    /// Writes the unescaped text as UTF-8: surrogate pairs are joined, a lone surrogate
    /// becomes U+FFFD (as a `String` in JavaScript would print it, lossy).
    ///
    /// On the host the text goes out in puts of up to [`UNESCAPE_GATHER`] bytes (gathered on
    /// the stack, the common short escapes decoded inline), not one put per run between
    /// escapes; the edge writes piece by piece (less code, no stack buffer).
    pub fn unescape_into(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            return self.unescape_gathered(out);
        }
        let mut utf8 = [0u8; 4];
        for piece in self.pieces() {
            match piece {
                Piece::Span(s) => out.put(s)?,
                Piece::Char(c) => out.put(c.encode_utf8(&mut utf8).as_bytes())?,
                Piece::Lone(_) => out.put("\u{FFFD}".as_bytes())?,
            }
        }
        Ok(())
    }

    fn unescape_gathered(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        unescape_run::<false>(self.raw, out).map(|_| ())
    }

    /// Writes the string as a canonical JSON literal, quotes included (escaped as
    /// [`Value::write_compact`] does): for echoing a server's string (a cursor) back to it.
    pub fn write_literal(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        write_json_str(out, *self)
    }

    /// True when the unescaped string equals `s` (no allocation). A lone surrogate compares as
    /// U+FFFD.
    #[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), inline)]
    pub fn eq_str(&self, s: &str) -> bool {
        // An escape is longer than what it stands for, so a raw form no longer than `s` is
        // equal only as it is, and a longer one only through escapes: most keys that are not
        // `s` differ by length alone (no search for a backslash), inline where they are
        // compared. Host only (less code on the edge).
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            if self.raw.len() < s.len() {
                return false;
            }
            if self.raw.len() == s.len() {
                return self.raw == s.as_bytes() && !self.raw.contains(&b'\\');
            }
            return self.eq_longer(s);
        }
        if memchr(b'\\', self.raw).is_none() {
            return self.raw == s.as_bytes();
        }
        self.eq_escaped(s)
    }

    /// [`JsonStr::eq_str`] of a raw form longer than `s`: equal only through escapes.
    fn eq_longer(&self, s: &str) -> bool {
        memchr(b'\\', self.raw).is_some() && self.eq_escaped(s)
    }

    /// [`JsonStr::eq_str`] piece by piece, through the escapes.
    fn eq_escaped(&self, s: &str) -> bool {
        let mut rest = s.as_bytes();
        let mut utf8 = [0u8; 4];
        for piece in self.pieces() {
            let bytes: &[u8] = match piece {
                Piece::Span(b) => b,
                Piece::Char(c) => c.encode_utf8(&mut utf8).as_bytes(),
                Piece::Lone(_) => "\u{FFFD}".as_bytes(),
            };
            match rest.strip_prefix(bytes) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

/// Unescapes `raw` (string bytes, escapes as written) into `out` through a [`Gather`]. With
/// `TO_QUOTE`, `raw` runs on past the string and the unescaping stops at its closing quote,
/// whose offset is returned (`None`: no closing quote, or a malformed escape).
fn unescape_run<const TO_QUOTE: bool>(
    raw: &[u8],
    out: &mut impl Sink,
) -> Result<Option<usize>, Overflow> {
    let mut gather = Gather::new(out);
    let mut utf8 = [0u8; 4];
    // Bytes before `from` are written.
    let mut from = 0;
    loop {
        let rest = raw.get(from..).unwrap_or(&[]);
        let found = if TO_QUOTE {
            find_quote_or_backslash(rest)
        } else {
            find_backslash(rest)
        };
        let Some(i) = found else {
            gather.put(rest)?;
            return gather.flush().map(|_| None);
        };
        gather.put(rest.get(..i).unwrap_or(&[]))?;
        let q = from + i;
        if TO_QUOTE && raw.get(q) == Some(&b'"') {
            return gather.flush().map(|_| Some(q));
        }
        let short = short_escape(raw.get(q + 1));
        if let Some(b) = short {
            gather.byte(b)?;
            from = q + 2;
            continue;
        }
        // `\u` (surrogate pairs joined) and anything odd: the general decoder.
        let mut escape = Pieces { raw, pos: q };
        match escape.next() {
            Some(Piece::Char(c)) => gather.put(c.encode_utf8(&mut utf8).as_bytes())?,
            Some(Piece::Lone(_)) => gather.put("\u{FFFD}".as_bytes())?,
            Some(Piece::Span(s)) => gather.put(s)?,
            // A malformed escape (not from `parse`): the rest is dropped, as the edge does.
            None => return gather.flush().map(|_| None),
        }
        from = escape.pos;
    }
}

/// Unescapes the start of `raw` (string bytes, escapes as written) into `dst` until `dst`
/// is full or `raw` ends, never splitting an escape. Returns (bytes of `raw` used, bytes of
/// `dst` written); the caller goes on from there, so a string is unescaped in `dst`-sized
/// pieces where its bytes lie (`content::InPlacePlan`). Writes what
/// [`JsonStr::unescape_into`] writes; a malformed escape (not from `parse`) ends the string
/// there, as there. `dst` shorter than 4 bytes may stop before an escape it cannot hold.
///
/// On x86_64 the runs between escapes are copied 16 bytes at a time, each block's backslash
/// found by one SSE2 compare (no `memchr` or `memcpy` call per run: runs in tool text are a
/// few dozen bytes); the last few bytes on either side go through [`unescape_chunk_runs`].
#[cfg(feature = "std")]
pub(crate) fn unescape_chunk(raw: &[u8], dst: &mut [u8]) -> (usize, usize) {
    // Unchecked, it always goes on.
    unescape_chunk_with::<false>(raw, dst).unwrap_or((raw.len(), 0))
}

/// [`unescape_chunk`] over a string [`Value::parse_deferring`] left unchecked, checking it
/// as it goes: `None` at a raw control character, a malformed escape, or bytes that are not
/// UTF-8 in this piece (then [`check_deferred`] from the piece's start says what and where).
/// A piece ends at a character boundary, so the next one starts where a check can.
#[cfg(feature = "std")]
pub(crate) fn unescape_chunk_checked(raw: &[u8], dst: &mut [u8]) -> Option<(usize, usize)> {
    let (mut used, mut made) = unescape_chunk_with::<true>(raw, dst)?;
    // The bytes of a character cut at the end of `dst` are raw bytes of a run (an escape
    // writes whole characters): leave them for the next piece.
    let cut = incomplete_tail(dst.get(..made)?);
    if cut > 0 && used < raw.len() && used > cut {
        used -= cut;
        made -= cut;
    }
    is_utf8(dst.get(..made)?).then_some((used, made))
}

/// How many bytes at the end of `bytes` begin a UTF-8 character they do not finish (0 to 3).
#[cfg(feature = "std")]
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=3usize.min(bytes.len()) {
        let Some(&b) = bytes.get(bytes.len() - back) else {
            return 0;
        };
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xFF => 4,
            _ => 1,
        };
        return if need > back { back } else { 0 };
    }
    0
}

/// [`unescape_chunk`]; with `CHECK`, `None` at a raw control or a malformed escape.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn unescape_chunk_with<const CHECK: bool>(raw: &[u8], dst: &mut [u8]) -> Option<(usize, usize)> {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, max_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let backslash = set_splat_i8_m128i(b'\\' as i8);
    let below = set_splat_i8_m128i(0x1F);
    let (mut from, mut to) = (0, 0);
    // 64 bytes at a time while there is room for a block and a copy of 64 after any place
    // in it: the block is copied whole, and after an escape the rest of it is copied again
    // where it now goes (one copy, not a new look at the bytes): text with an escape every
    // few dozen bytes costs one mask per 64 bytes and one copy per escape.
    'blocks: while let (Some(window), true) = (raw.get(from..from + 128), dst.len() >= to + 128) {
        let base = from;
        let Ok(block) = <&[u8; 64]>::try_from(window.get(..64).unwrap_or(&[])) else {
            break;
        };
        if !copy64(raw, from, dst, to) {
            break;
        }
        let mut hits = 0u64;
        for (j, chunk) in block.chunks_exact(16).enumerate() {
            let Ok(lanes) = <&[u8; 16]>::try_from(chunk) else {
                continue;
            };
            let v = load_unaligned_m128i(lanes);
            let mut stops = cmp_eq_mask_i8_m128i(v, backslash);
            if CHECK {
                // A control byte is one whose max with 0x1F is 0x1F.
                stops |= cmp_eq_mask_i8_m128i(max_u8_m128i(v, below), below);
            }
            // 16 meaningful bits; the cast keeps exactly them.
            hits |= u64::from(move_mask_i8_m128i(stops) as u16) << (16 * j);
        }
        loop {
            if hits == 0 {
                // The rest of the block is plain, and already copied where it goes.
                to += base + 64 - from;
                from = base + 64;
                continue 'blocks;
            }
            let k = base + hits.trailing_zeros() as usize;
            to += k - from;
            from = k;
            if CHECK && raw.get(from) != Some(&b'\\') {
                return None;
            }
            match unescape_one(raw, from, dst, to) {
                Ok(next) => (from, to) = next,
                Err(end) => return unescape_stop::<CHECK>(raw, end),
            }
            if from >= base + 64 {
                continue 'blocks;
            }
            // The output is shorter than the escape: the rest of the block again.
            if !copy64(raw, from, dst, to) {
                break 'blocks;
            }
            hits &= u64::MAX.checked_shl((from - base) as u32).unwrap_or(0);
        }
    }
    while let (Some(s), Some(d)) = (raw.get(from..from + 16), dst.get_mut(to..to + 16)) {
        let (Ok(s), Ok(d)) = (<&[u8; 16]>::try_from(s), <&mut [u8; 16]>::try_from(d)) else {
            break;
        };
        // Bytes past a backslash are copied too: the escape's output writes over them, or
        // they lie past the returned end.
        *d = *s;
        let v = load_unaligned_m128i(s);
        let mut stops = cmp_eq_mask_i8_m128i(v, backslash);
        if CHECK {
            // A control byte is one whose max with 0x1F is 0x1F.
            stops |= cmp_eq_mask_i8_m128i(max_u8_m128i(v, below), below);
        }
        let hits = move_mask_i8_m128i(stops);
        if hits == 0 {
            from += 16;
            to += 16;
            continue;
        }
        let k = hits.trailing_zeros() as usize;
        from += k;
        to += k;
        if dst.len() - to < 4 {
            return Some((from, to));
        }
        if CHECK && raw.get(from) != Some(&b'\\') {
            return None;
        }
        match unescape_one(raw, from, dst, to) {
            Ok(next) => (from, to) = next,
            Err(end) => return unescape_stop::<CHECK>(raw, end),
        }
    }
    let (used, made) = unescape_chunk_runs::<CHECK>(
        raw.get(from..).unwrap_or(&[]),
        dst.get_mut(to..).unwrap_or(&mut []),
    )?;
    Some((from + used, to + made))
}

/// Copies the 64 bytes of `raw` at `from` to `dst` at `to`; false when either is short.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn copy64(raw: &[u8], from: usize, dst: &mut [u8], to: usize) -> bool {
    let (Some(s), Some(d)) = (raw.get(from..from + 64), dst.get_mut(to..to + 64)) else {
        return false;
    };
    let (Ok(s), Ok(d)) = (<&[u8; 64]>::try_from(s), <&mut [u8; 64]>::try_from(d)) else {
        return false;
    };
    *d = *s;
    true
}

/// Where [`unescape_one`] stopped: a malformed escape (it says the whole string is used) is
/// `None` when checking.
#[cfg(feature = "std")]
#[inline(always)]
fn unescape_stop<const CHECK: bool>(raw: &[u8], end: (usize, usize)) -> Option<(usize, usize)> {
    if CHECK && end.0 == raw.len() {
        return None;
    }
    Some(end)
}

/// What the one-letter escape `\<b>` stands for (`None`: not one; `\u` is handled apart).
#[inline]
fn short_escape(b: Option<&u8>) -> Option<u8> {
    match b {
        Some(b'n') => Some(b'\n'),
        Some(b'"') => Some(b'"'),
        Some(b'\\') => Some(b'\\'),
        Some(b't') => Some(b'\t'),
        Some(b'r') => Some(b'\r'),
        Some(b'/') => Some(b'/'),
        Some(b'b') => Some(0x08),
        Some(b'f') => Some(0x0c),
        _ => None,
    }
}

/// The escape at `raw[from]` (a backslash) written to `dst` at `to` (at least 4 bytes of
/// room): the positions after it, or `Err` with what [`unescape_chunk`] returns when it
/// cannot go on (a malformed escape ends the string; an escape that does not fit waits).
#[cfg(feature = "std")]
#[inline(always)]
fn unescape_one(
    raw: &[u8],
    from: usize,
    dst: &mut [u8],
    to: usize,
) -> Result<(usize, usize), (usize, usize)> {
    let short = short_escape(raw.get(from + 1));
    if let Some(b) = short {
        if let Some(d) = dst.get_mut(to) {
            *d = b;
        }
        return Ok((from + 2, to + 1));
    }
    let mut escape = Pieces { raw, pos: from };
    let mut utf8 = [0u8; 4];
    let bytes: &[u8] = match escape.next() {
        Some(Piece::Char(c)) => c.encode_utf8(&mut utf8).as_bytes(),
        Some(Piece::Lone(_)) => "\u{FFFD}".as_bytes(),
        Some(Piece::Span(s)) => s,
        // A malformed escape: the rest is dropped, as `unescape_into` does.
        None => return Err((raw.len(), to)),
    };
    let Some(d) = dst.get_mut(to..to + bytes.len()) else {
        return Err((from, to));
    };
    d.copy_from_slice(bytes);
    Ok((escape.pos, to + bytes.len()))
}

/// [`unescape_chunk`] a run between escapes at a time (`memchr` and a copy per run): the
/// whole of it off x86_64, and the last bytes there.
#[cfg(feature = "std")]
fn unescape_chunk_runs<const CHECK: bool>(raw: &[u8], dst: &mut [u8]) -> Option<(usize, usize)> {
    let (mut from, mut to) = (0, 0);
    loop {
        let rest = raw.get(from..).unwrap_or(&[]);
        let room = dst.len() - to;
        // Look no further than what fits: a long run without escapes is not searched again.
        let window = rest.get(..room.min(rest.len())).unwrap_or(&[]);
        let i = find_backslash(window).unwrap_or(window.len());
        if let (Some(d), Some(src)) = (dst.get_mut(to..to + i), window.get(..i)) {
            if CHECK && src.iter().any(|&b| b < 0x20) {
                return None;
            }
            d.copy_from_slice(src);
        }
        from += i;
        to += i;
        if i == window.len() || dst.len() - to < 4 {
            return Some((from, to));
        }
        match unescape_one(raw, from, dst, to) {
            Ok(next) => (from, to) = next,
            Err(end) => return unescape_stop::<CHECK>(raw, end),
        }
    }
}

/// [`unescape_chunk`] off x86_64: a run between escapes at a time.
#[cfg(all(feature = "std", not(target_arch = "x86_64")))]
#[inline(always)]
fn unescape_chunk_with<const CHECK: bool>(raw: &[u8], dst: &mut [u8]) -> Option<(usize, usize)> {
    unescape_chunk_runs::<CHECK>(raw, dst)
}

/// Bytes the host's [`JsonStr::unescape_into`] gathers on the stack before one put (the
/// redactor's stage size, so a redacting sink takes each gather whole).
pub const UNESCAPE_GATHER: usize = 2048;

/// Gathers small puts (runs between escapes, escaped characters) into one.
struct Gather<'o, O: Sink> {
    out: &'o mut O,
    buf: [u8; UNESCAPE_GATHER],
    len: usize,
}

impl<'o, O: Sink> Gather<'o, O> {
    fn new(out: &'o mut O) -> Self {
        Gather {
            out,
            buf: [0; UNESCAPE_GATHER],
            len: 0,
        }
    }

    #[inline]
    fn byte(&mut self, b: u8) -> Result<(), Overflow> {
        if self.len == UNESCAPE_GATHER {
            self.flush()?;
        }
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
        Ok(())
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
            return Ok(());
        }
        self.put_slow(bytes)
    }

    #[cold]
    fn put_slow(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        // Fill the gather up, hand it on, and keep the rest (a long run goes on whole).
        let room = UNESCAPE_GATHER - self.len;
        let (now, later) = bytes.split_at(room.min(bytes.len()));
        if let Some(dst) = self.buf.get_mut(self.len..self.len + now.len()) {
            dst.copy_from_slice(now);
            self.len += now.len();
        }
        self.flush()?;
        if later.len() >= UNESCAPE_GATHER {
            return self.out.put(later);
        }
        if let Some(dst) = self.buf.get_mut(..later.len()) {
            dst.copy_from_slice(later);
            self.len = later.len();
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Overflow> {
        let n = core::mem::take(&mut self.len);
        if n == 0 {
            return Ok(());
        }
        self.out.put(self.buf.get(..n).unwrap_or(&[]))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_digit(n: u16) -> u8 {
    HEX.get(usize::from(n & 0xF)).copied().unwrap_or(b'0')
}

/// Writes `c` escaped canonically (or raw when no escape is needed).
fn write_char(out: &mut impl Sink, c: char) -> Result<(), Overflow> {
    match c {
        '"' => out.put(b"\\\""),
        '\\' => out.put(b"\\\\"),
        '\u{8}' => out.put(b"\\b"),
        '\u{c}' => out.put(b"\\f"),
        '\n' => out.put(b"\\n"),
        '\r' => out.put(b"\\r"),
        '\t' => out.put(b"\\t"),
        c if (c as u32) < 0x20 => write_u_escape(out, c as u16),
        c => {
            let mut utf8 = [0u8; 4];
            out.put(c.encode_utf8(&mut utf8).as_bytes())
        }
    }
}

fn write_u_escape(out: &mut impl Sink, unit: u16) -> Result<(), Overflow> {
    out.put(&[
        b'\\',
        b'u',
        hex_digit(unit >> 12),
        hex_digit(unit >> 8),
        hex_digit(unit >> 4),
        hex_digit(unit),
    ])
}

/// Writes a parsed string canonically, quotes included.
fn write_json_str(out: &mut impl Sink, s: JsonStr<'_>) -> Result<(), Overflow> {
    out.put(b"\"")?;
    if memchr(b'\\', s.raw).is_none() {
        // Validated spans hold no quote, backslash or control: already canonical.
        out.put(s.raw)?;
    } else {
        for piece in s.pieces() {
            match piece {
                Piece::Span(b) => out.put(b)?,
                Piece::Char(c) => write_char(out, c)?,
                Piece::Lone(u) => write_u_escape(out, u)?,
            }
        }
    }
    out.put(b"\"")
}

/// Writes `s` as a JSON string literal, quotes included, escaped canonically as
/// [`Value::write_compact`] does (only `"`, `\` and control characters escaped).
pub fn write_str_literal(out: &mut impl Sink, s: &str) -> Result<(), Overflow> {
    out.put(b"\"")?;
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b < 0x20 || b == b'"' || b == b'\\' {
            if i > start {
                out.put(bytes.get(start..i).unwrap_or(&[]))?;
            }
            write_char(out, char::from(b))?;
            start = i + 1;
        }
    }
    if start < bytes.len() {
        out.put(bytes.get(start..).unwrap_or(&[]))?;
    }
    out.put(b"\"")
}

#[cfg(test)]
mod tests;
