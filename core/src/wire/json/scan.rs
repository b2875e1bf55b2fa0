//! The scanner: whitespace, numbers, literals and strings checked byte by byte or a word at a
//! time, the iterative validator with its bit stack, and skipping a value already validated.

use super::*;

/// One bit per open container (1 = object), up to [`MAX_SUPPORTED_DEPTH`].
pub(super) struct BitStack {
    bits: [u32; STACK_WORDS],
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
        let mask = 1u32 << (self.depth % 32);
        if let Some(word) = self.bits.get_mut(self.depth / 32) {
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
        let word = self.bits.get(d / 32)?;
        Some((word >> (d % 32)) & 1 == 1)
    }

    fn pop(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }
}

#[inline]
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[inline]
pub(super) fn skip_ws(input: &[u8], mut pos: usize) -> usize {
    while let Some(&b) = input.get(pos) {
        if !is_ws(b) {
            break;
        }
        pos += 1;
    }
    pos
}

#[inline]
pub(super) fn skip_digits(input: &[u8], mut pos: usize) -> usize {
    while let Some(b'0'..=b'9') = input.get(pos) {
        pos += 1;
    }
    pos
}

pub(super) fn hex_val(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'a'..=b'f' => Some(u16::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(b - b'A' + 10)),
        _ => None,
    }
}

/// The four hex digits at `input[pos..pos+4]` as a code unit.
pub(super) fn hex4(input: &[u8], pos: usize) -> Option<u16> {
    let digits = input.get(pos..pos.checked_add(4)?)?;
    digits
        .iter()
        .try_fold(0u16, |acc, &b| Some((acc << 4) | hex_val(b)?))
}

/// Checks one run of string bytes without escapes: no raw controls, valid UTF-8.
#[inline]
pub(super) fn check_span(span: &[u8], offset: usize) -> Result<(), JsonError> {
    // Branch-free OR per chunk vectorises; find the exact byte only on failure. The edge
    // looks for it at once (less code).
    let has_control = !cfg!(feature = "std")
        || span
            .chunks(64)
            .any(|c| c.iter().fold(false, |acc, &b| acc | (b < 0x20)));
    if has_control && let Some(i) = span.iter().position(|&b| b < 0x20) {
        return Err(err(JsonErrorKind::ControlInString, offset + i));
    }
    core::str::from_utf8(span)
        .map(|_| ())
        .map_err(|e| err(JsonErrorKind::InvalidUtf8, offset + e.valid_up_to()))
}

// ---- the string fast path: 64 bytes at a time ----

pub(super) const LO7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
pub(super) const HIGH: u64 = 0x8080_8080_8080_8080;
pub(super) const ONES: u64 = 0x0101_0101_0101_0101;
/// Bytes of a word whose value is zero get their high bit set (exact: no carry between bytes).
#[inline(always)]
pub(super) fn zero_bytes(x: u64) -> u64 {
    !((x & LO7).wrapping_add(LO7) | x) & HIGH
}

/// Bit `i` is set when `block[i]` is a quote, a backslash or a control character (below
/// U+0020): the only bytes a string scan must stop at. On the host's x86_64, 16 bytes per SSE2
/// compare (baseline there; `safe_arch` wraps the intrinsics without `unsafe`); elsewhere
/// [`specials_swar`].
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn specials(block: &[u8; 64]) -> u64 {
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
pub(super) fn specials_swar(block: &[u8; 64]) -> u64 {
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
pub(super) fn specials(block: &[u8; 64]) -> u64 {
    specials_swar(block)
}

/// The 64 bytes of `input` from `p` (padded with a plain byte past the end) and how many of
/// them are real.
#[inline(always)]
pub(super) fn block_at(input: &[u8], p: usize) -> ([u8; 64], usize) {
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
pub(super) fn find_backslash(hay: &[u8]) -> Option<usize> {
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
pub(super) fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
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
pub(super) fn is_utf8(bytes: &[u8]) -> bool {
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
    pub(super) base: usize,
    pub(super) len: usize,
    /// Containers: (offset of the opening bracket, offset after the closing one).
    pub(super) containers: heapless::Vec<(usize, usize), MAX_ENDS>,
    /// Deferred strings' contents: (after the opening quote, at the closing quote).
    pub(super) strings: heapless::Vec<(usize, usize), MAX_DEFERRED>,
}

#[cfg(feature = "std")]
impl Ends {
    pub(super) fn of(input: &[u8]) -> Self {
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
    pub(super) ends: Ends,
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
pub(super) struct Noting<'e> {
    pub(super) ends: &'e mut Ends,
    /// Where the open containers of depth below [`ENDS_DEPTH`] start.
    pub(super) starts: [usize; ENDS_DEPTH],
    pub(super) defer: bool,
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
pub(super) fn string_end(input: &[u8], pos: usize) -> Option<usize> {
    string_end_upto(input, pos, usize::MAX).ok()
}

/// [`string_end`], giving up (`Err(true)`) once `upto` bytes of the string were looked at
/// without reaching its end; `Err(false)` for anything `string_end` says `None` to.
#[inline(always)]
pub(super) fn string_end_upto(input: &[u8], pos: usize, upto: usize) -> Result<usize, bool> {
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
pub(super) fn scan_string(input: &[u8], pos: usize) -> Result<usize, JsonError> {
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
pub(super) fn scan_string_exact(input: &[u8], pos: usize) -> Result<usize, JsonError> {
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
pub(super) fn scan_number(input: &[u8], pos: usize) -> Result<usize, JsonError> {
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
    // The fraction, then the exponent: each a marker and at least one digit.
    for part in 0..2 {
        match (part, input.get(p)) {
            (0, Some(b'.')) => p += 1,
            (1, Some(b'e' | b'E')) => {
                p += 1;
                if let Some(b'+' | b'-') = input.get(p) {
                    p += 1;
                }
            }
            _ => continue,
        }
        let q = skip_digits(input, p);
        if q == p {
            return Err(bad(q));
        }
        p = q;
    }
    Ok(p)
}

pub(super) fn scan_literal(input: &[u8], pos: usize, lit: &[u8]) -> Result<usize, JsonError> {
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
pub(super) fn scan_key_colon(input: &[u8], pos: usize) -> Result<usize, JsonError> {
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
pub(super) trait Visitor {
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
pub(super) struct Checked;

impl Visitor for Checked {
    #[inline(always)]
    fn value_string(&mut self, input: &[u8], pos: usize) -> Result<usize, JsonError> {
        scan_string(input, pos)
    }
}

/// Validates one value starting at `pos` (after whitespace); returns the offset after it.
pub(super) fn validate(input: &[u8], pos: usize, limits: JsonLimits) -> Result<usize, JsonError> {
    validate_with(input, pos, limits, &mut Checked)
}

/// [`validate`], value strings checked by `strings`.
#[inline(always)]
pub(super) fn validate_with(
    input: &[u8],
    mut pos: usize,
    limits: JsonLimits,
    strings: &mut impl Visitor,
) -> Result<usize, JsonError> {
    let mut stack = BitStack::new(limits.max_depth);
    // A member's key comes before the value (one place scans keys).
    let mut key = false;
    'value: loop {
        pos = skip_ws(input, pos);
        if key {
            pos = skip_ws(input, scan_key_colon(input, pos)?);
            key = false;
        }
        match input.get(pos).copied() {
            None => return Err(err(JsonErrorKind::UnexpectedEnd, pos)),
            // An empty container is closed by the loop below, as any other.
            Some(b'{') => {
                strings.open(stack.depth, pos);
                stack.push(true, pos)?;
                pos = skip_ws(input, pos + 1);
                if input.get(pos) != Some(&b'}') {
                    key = true;
                    continue 'value;
                }
            }
            Some(b'[') => {
                strings.open(stack.depth, pos);
                stack.push(false, pos)?;
                pos = skip_ws(input, pos + 1);
                if input.get(pos) != Some(&b']') {
                    continue 'value;
                }
            }
            Some(b'"') => pos = strings.value_string(input, pos)?,
            Some(first @ (b't' | b'f' | b'n')) => {
                let lit: &[u8] = match first {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                pos = scan_literal(input, pos, lit)?;
            }
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
                    key = in_object;
                    continue 'value;
                }
                Some(b) if b == if in_object { b'}' } else { b']' } => {
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

pub(super) fn kind_of(first: u8) -> Kind {
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
pub(super) fn skip_string(input: &[u8], pos: usize) -> usize {
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
pub(super) const SHORT_STRING: usize = 24;

/// Offset after the value starting at `pos` (validated input assumed); at once when `hint`
/// knows where it ends.
#[inline]
pub(super) fn skip_value(input: &[u8], pos: usize, hint: Hint<'_>) -> usize {
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
