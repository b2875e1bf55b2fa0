//! Strings: decoding a [`JsonStr`] piece by piece, the host's block unescaper, and writing
//! strings back as canonical JSON.

use super::*;

/// One decoded piece of a string.
pub(super) enum Piece<'a> {
    /// Bytes without escapes (valid UTF-8, no `"`, `\` or controls: validated by `parse`).
    Span(&'a [u8]),
    /// A character from an escape (surrogate pairs already joined).
    Char(char),
    /// A surrogate code unit without its partner.
    Lone(u16),
}

/// Walks the escaped bytes of a string piece by piece.
pub(super) struct Pieces<'a> {
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
    pub(super) fn pieces(&self) -> Pieces<'a> {
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
        // The edge writes through one copy, whatever the sink.
        #[cfg(not(feature = "std"))]
        return self.unescape_pieces(&mut (out as &mut dyn Sink));
        #[cfg(feature = "std")]
        self.unescape_pieces(out)
    }

    /// [`JsonStr::unescape_into`] piece by piece (the edge's).
    fn unescape_pieces(&self, out: &mut impl Sink) -> Result<(), Overflow> {
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

    pub(super) fn unescape_gathered(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        unescape_run::<false>(self.raw, out).map(|_| ())
    }

    /// Writes the string as a canonical JSON literal, quotes included (escaped as
    /// [`Value::write_compact`] does): for echoing a server's string (a cursor) back to it.
    pub fn write_literal(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        #[cfg(not(feature = "std"))]
        return write_json_str(&mut (out as &mut dyn Sink), *self);
        #[cfg(feature = "std")]
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
pub(super) fn unescape_run<const TO_QUOTE: bool>(
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
pub(super) fn incomplete_tail(bytes: &[u8]) -> usize {
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
pub(super) fn unescape_chunk_with<const CHECK: bool>(
    raw: &[u8],
    dst: &mut [u8],
) -> Option<(usize, usize)> {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, max_u8_m128i, min_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i, store_unaligned_m128i,
    };
    let backslash = set_splat_i8_m128i(b'\\' as i8);
    let below = set_splat_i8_m128i(0x1F);
    // 64 bytes at a time while there is room for a block and a copy of 64 after any place
    // in it: the block is copied whole, and after an escape the rest of it is copied again
    // where it now goes (one copy, not a new look at the bytes): text with an escape every
    // few dozen bytes costs one mask per 64 bytes and one copy per escape. Both sides are
    // taken as 128-byte windows, so places in a block need (almost) no bounds checks, and
    // what is left of both is kept as slices: a window is one length check, a step one more.
    // A one-letter escape (nearly all of them in tool text) is one table load.
    let size = dst.len();
    let mut least = set_splat_i8_m128i(-1);
    let (mut rest, mut room) = (raw, &mut *dst);
    'blocks: while let (Some(src), true) = (rest.first_chunk::<128>(), room.len() >= 128) {
        let Some(out) = room.first_chunk_mut::<128>() else {
            break;
        };
        let lanes = load64(src);
        for (chunk, &v) in out.chunks_exact_mut(16).zip(&lanes) {
            if let Ok(d) = <&mut [u8; 16]>::try_from(chunk) {
                store_unaligned_m128i(d, v);
            }
        }
        if CHECK {
            // The least byte seen at each place, looked at once the blocks are done.
            let [a, b, c, d] = lanes;
            least = min_u8_m128i(least, min_u8_m128i(min_u8_m128i(a, b), min_u8_m128i(c, d)));
        }
        let mut hits = 0u64;
        for (j, &v) in lanes.iter().enumerate() {
            // 16 meaningful bits; the cast keeps exactly them.
            hits |= u64::from(move_mask_i8_m128i(cmp_eq_mask_i8_m128i(v, backslash)) as u16)
                << (16 * j);
        }
        // Places in the block's windows: `f` read, `t` written (`t <= f`: escapes shrink).
        let (mut f, mut t) = (0usize, 0usize);
        while hits != 0 {
            let k = hits.trailing_zeros() as usize;
            t += k - f;
            let letter = src.get(k + 1).copied().unwrap_or(0);
            let short = SHORT.get(usize::from(letter)).copied().unwrap_or(0);
            if short != 0 {
                // One check for the character and the copy after it.
                let Some((c, d)) = out
                    .get_mut(t..)
                    .and_then(|d| d.first_chunk_mut::<65>())
                    .and_then(|d| d.split_first_mut())
                else {
                    break 'blocks;
                };
                *c = short;
                (f, t) = (k + 2, t + 1);
                if f >= 64 {
                    (rest, room) = step(rest, room, f, t);
                    continue 'blocks;
                }
                // The output is shorter than the escape: the rest of the block again.
                if let Some(s) = src.get(f..f + 64) {
                    d.copy_from_slice(s);
                }
            } else {
                // `\u` (surrogate pairs joined) and anything odd, within the windows (an
                // escape is at most 12 bytes, its output shorter, and `k < 64`).
                match unescape_one(src, k, out, t) {
                    Ok(next) => (f, t) = next,
                    // A malformed escape ends the string, as there.
                    Err(_) => {
                        let to = size - room.len() + t;
                        return unescape_stop::<CHECK>(raw, (raw.len(), to));
                    }
                }
                if f >= 64 {
                    (rest, room) = step(rest, room, f, t);
                    continue 'blocks;
                }
                let (Some(d), Some(s)) = (out.get_mut(t..t + 64), src.get(f..f + 64)) else {
                    break 'blocks;
                };
                d.copy_from_slice(s);
            }
            hits &= u64::MAX.checked_shl(f as u32).unwrap_or(0);
        }
        // The rest of the block is plain, and already copied where it goes.
        (rest, room) = step(rest, room, 64, t + 64 - f);
    }
    // A control anywhere in the blocks: `None`, and the caller's exact check says where (a
    // piece that stops early is not an error). A byte is a control exactly when its max
    // with 0x1F is 0x1F.
    if CHECK && move_mask_i8_m128i(cmp_eq_mask_i8_m128i(max_u8_m128i(least, below), below)) != 0 {
        return None;
    }
    let (mut from, mut to) = (raw.len() - rest.len(), size - room.len());
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

/// The first 64 bytes of `src` as four SSE2 registers.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn load64(src: &[u8; 128]) -> [safe_arch::m128i; 4] {
    let mut lanes = [safe_arch::m128i::default(); 4];
    for (v, chunk) in lanes.iter_mut().zip(src.chunks_exact(16)) {
        if let Ok(bytes) = <&[u8; 16]>::try_from(chunk) {
            *v = safe_arch::load_unaligned_m128i(bytes);
        }
    }
    lanes
}

/// `rest` and `room` past `used` and `made` bytes (both less than the 128 their windows
/// hold).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn step<'r, 'd>(
    rest: &'r [u8],
    room: &'d mut [u8],
    used: usize,
    made: usize,
) -> (&'r [u8], &'d mut [u8]) {
    (
        rest.get(used..).unwrap_or(&[]),
        room.get_mut(made..).unwrap_or(&mut []),
    )
}

/// What each one-letter escape `\<b>` stands for, by `b` (0: not one; `\u` is handled
/// apart): one load, not a jump through the letters, per escape on the host's block path.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const SHORT: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'n' => b'\n',
            b'"' => b'"',
            b'\\' => b'\\',
            b't' => b'\t',
            b'r' => b'\r',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// Where [`unescape_one`] stopped: a malformed escape (it says the whole string is used) is
/// `None` when checking.
#[cfg(feature = "std")]
#[inline(always)]
pub(super) fn unescape_stop<const CHECK: bool>(
    raw: &[u8],
    end: (usize, usize),
) -> Option<(usize, usize)> {
    if CHECK && end.0 == raw.len() {
        return None;
    }
    Some(end)
}

/// What the one-letter escape `\<b>` stands for (`None`: not one; `\u` is handled apart).
#[inline]
pub(super) fn short_escape(b: Option<&u8>) -> Option<u8> {
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
pub(super) fn unescape_one(
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
pub(super) fn unescape_chunk_runs<const CHECK: bool>(
    raw: &[u8],
    dst: &mut [u8],
) -> Option<(usize, usize)> {
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
pub(super) fn unescape_chunk_with<const CHECK: bool>(
    raw: &[u8],
    dst: &mut [u8],
) -> Option<(usize, usize)> {
    unescape_chunk_runs::<CHECK>(raw, dst)
}

/// Bytes the host's [`JsonStr::unescape_into`] gathers on the stack before one put (the
/// redactor's stage size, so a redacting sink takes each gather whole).
pub const UNESCAPE_GATHER: usize = 2048;

/// Gathers small puts (runs between escapes, escaped characters) into one.
pub(super) struct Gather<'o, O: Sink> {
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

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

pub(super) fn hex_digit(n: u16) -> u8 {
    HEX.get(usize::from(n & 0xF)).copied().unwrap_or(b'0')
}

/// Writes `c` escaped canonically (or raw when no escape is needed).
pub(super) fn write_char(out: &mut impl Sink, c: char) -> Result<(), Overflow> {
    // The short escapes' letters: one put of two bytes for all of them.
    let letter = match c {
        '"' => b'"',
        '\\' => b'\\',
        '\u{8}' => b'b',
        '\u{c}' => b'f',
        '\n' => b'n',
        '\r' => b'r',
        '\t' => b't',
        c if (c as u32) < 0x20 => return write_u_escape(out, c as u16),
        c => {
            let mut utf8 = [0u8; 4];
            return out.put(c.encode_utf8(&mut utf8).as_bytes());
        }
    };
    out.put(&[b'\\', letter])
}

pub(super) fn write_u_escape(out: &mut impl Sink, unit: u16) -> Result<(), Overflow> {
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
pub(super) fn write_json_str(out: &mut impl Sink, s: JsonStr<'_>) -> Result<(), Overflow> {
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
    // The edge writes through one copy, whatever the sink (the host keeps one per sink).
    #[cfg(not(feature = "std"))]
    return str_literal(&mut (out as &mut dyn Sink), s);
    #[cfg(feature = "std")]
    str_literal(out, s)
}

/// [`write_str_literal`].
fn str_literal(out: &mut impl Sink, s: &str) -> Result<(), Overflow> {
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

#[cfg(all(test, feature = "std"))]
mod tests {
    use std::vec::Vec;

    use super::*;

    /// `raw` through [`unescape_chunk_checked`] in pieces of `piece` bytes, as the in-place
    /// run takes a deferred string: `None` when a piece says the string is bad, else the text.
    fn checked_in_chunks(raw: &[u8], piece: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut dst = std::vec![0u8; piece];
        let mut from = 0;
        while from < raw.len() {
            let (used, made) = unescape_chunk_checked(&raw[from..], &mut dst)?;
            out.extend_from_slice(&dst[..made]);
            assert!(used > 0, "no progress at {from}");
            from += used;
        }
        Some(out)
    }

    /// What `parse` says of `raw` as a string, and its text when it is one.
    fn reference(raw: &[u8]) -> Option<Vec<u8>> {
        let mut src = std::vec![b'"'];
        src.extend_from_slice(raw);
        src.push(b'"');
        let v = Value::parse(&src, JsonLimits::default()).ok()?;
        let mut out = crate::buf::VecBuf::new(1 << 20);
        v.as_str()?.unescape_into(&mut out).ok()?;
        Some(crate::buf::Buf::bytes(&out).to_vec())
    }

    #[test]
    fn checked_pieces_find_every_bad_byte_around_the_blocks() {
        // Text with an escape every few bytes (so blocks go through the escape path), a bad
        // thing (or a good one) at every offset around the 64- and 128-byte edges, pieces of
        // several sizes: a piece says `None` exactly when `parse` refuses the string, and
        // the text is `unescape_into`'s otherwise.
        let text = "ab\\ncd\\\"e\\\\f é\\tg\\u00e9h\\ud83d\\ude00i\\/j".repeat(12);
        let bad: [&[u8]; 9] = [
            b"",
            &[0x01],
            &[0x1f],
            b"\\x",
            b"\\u12g4",
            &[0xff],
            &[0xe2, 0x82],
            &[0xed, 0xa0, 0x80],
            "😀".as_bytes(),
        ];
        for b in bad {
            for at in 0..200 {
                let mut raw = text.as_bytes()[..at].to_vec();
                // Cut where a character of the text is not.
                while core::str::from_utf8(&raw).is_err() {
                    raw.pop();
                }
                raw.extend_from_slice(b);
                raw.extend_from_slice(text.as_bytes());
                let want = reference(&raw);
                for piece in [8192, 300, 129, 64, 17] {
                    assert_eq!(
                        checked_in_chunks(&raw, piece),
                        want,
                        "{b:?} at {at}, pieces of {piece}"
                    );
                }
            }
        }
    }
}
