//! Short text of a stated size: what a failure keeps of a detail, and a sink that keeps what fits.
//!
//! These are the lowest layer of the wire's messages (the protocol eras, HTTP and failures all
//! write short text through them), so they live here rather than beside any one of those.

use heapless::string::StringView;
use heapless::{String, VecView};

use super::{Overflow, Sink, put_u64};

/// The most bytes of a detail kept in a failure (an adapter's words for a connect error, the
/// start of an HTTP error body, a server's message). A longer detail is cut at a character
/// boundary and ends in `…`, so a cut is never silent. The call's `error` buffer holds the whole
/// message built from it.
pub const DETAIL_BYTES: usize = 128;

/// A detail of a failure: at most [`DETAIL_BYTES`], a cut marked with `…`.
pub type Detail = String<DETAIL_BYTES>;

/// Copies `s` into a fixed string. A longer `s` is cut at a character boundary and ends in
/// `…` (when `N` has room for it), so a cut is never silent.
pub fn truncated<const N: usize>(s: &str) -> String<N> {
    let mut out = String::new();
    fill_truncated(out.as_mut_view(), s);
    out
}

/// The mark that ends a cut text.
const MARK: &str = "…";

/// [`truncated`]'s body, one copy for every size.
#[inline(never)]
fn fill_truncated(out: &mut StringView, s: &str) {
    if out.push_str(s).is_ok() {
        return;
    }
    let room = out.capacity().saturating_sub(MARK.len());
    let _ = out.push_str(s.get(..char_floor(s.as_bytes(), room)).unwrap_or(""));
    let _ = out.push_str(MARK);
}

/// The largest character boundary of the UTF-8 `bytes` at or before `at`.
pub(crate) fn char_floor(bytes: &[u8], at: usize) -> usize {
    let mut end = at.min(bytes.len());
    // A continuation byte (0b10xx_xxxx) is inside a character.
    while end > 0 && bytes.get(end).is_some_and(|&b| (b as i8) < -64) {
        end -= 1;
    }
    end
}

/// `char::is_whitespace` (Unicode `White_Space`) without core's lookup table and its code: a
/// bit mask below U+0021, the range U+2000..=U+200A and a list of the others (a test checks
/// every `char`).
pub(crate) fn is_white(c: char) -> bool {
    const OTHERS: [u16; 8] = [0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000];
    // Bits 9..=13 (TAB, LF, VT, FF, CR) and 32 (SPACE).
    const LOW: u64 = 0x1_0000_3E00;
    let c = c as u32;
    if c <= 0x20 {
        return LOW >> c & 1 != 0;
    }
    (0x2000..=0x200A).contains(&c) || OTHERS.iter().any(|&o| u32::from(o) == c)
}

/// `s` without leading and trailing whitespace: the same as `str::trim`, by a small test of its own
/// (on the edge, core's Unicode whitespace table is not in the flash).
pub fn trim(s: &str) -> &str {
    let (mut start, mut end) = (None, 0);
    for (i, c) in s.char_indices() {
        if !is_white(c) {
            start.get_or_insert(i);
            end = i + c.len_utf8();
        }
    }
    s.get(start.unwrap_or(0)..end).unwrap_or("")
}

/// The longest valid UTF-8 start of `bytes` (a cut in the middle of a character is dropped).
pub(crate) fn utf8_prefix(bytes: &[u8]) -> &str {
    match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => core::str::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    }
}

/// A `Sink` into a fixed string that keeps what fits (UTF-8 boundaries respected).
#[derive(Default)]
pub struct StrSink<const N: usize> {
    bytes: heapless::Vec<u8, N>,
}

impl<const N: usize> StrSink<N> {
    /// The text kept so far (a cut in the middle of a character is dropped).
    pub fn as_str(&self) -> &str {
        utf8_prefix(&self.bytes)
    }

    /// Ends a cut text with `…`: keeps the whole characters that leave room for it (none when
    /// `N` is under the mark's 3 bytes).
    pub(crate) fn mark_cut(&mut self) {
        mark_cut_view(self.bytes.as_mut_view());
    }
}

/// [`StrSink::mark_cut`]'s body, one copy for every size.
#[inline(never)]
fn mark_cut_view(v: &mut VecView<u8>) {
    let kept = utf8_prefix(v).len();
    let room = v.capacity().saturating_sub(MARK.len());
    let end = if kept > room {
        char_floor(v, room)
    } else {
        kept
    };
    v.truncate(end);
    let _ = v.extend_from_slice(MARK.as_bytes());
}

impl<const N: usize> Sink for StrSink<N> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        put_kept(self.bytes.as_mut_view(), bytes)
    }
}

/// [`StrSink`]'s `put`, one copy for every size: keeps what fits, and says when it did not.
#[inline(never)]
fn put_kept(v: &mut VecView<u8>, bytes: &[u8]) -> Result<(), Overflow> {
    let cap = v.capacity();
    let fits = bytes.len().min(cap.saturating_sub(v.len()));
    let (now, rest) = bytes.split_at_checked(fits).unwrap_or((bytes, &[]));
    let _ = v.extend_from_slice(now);
    if rest.is_empty() {
        Ok(())
    } else {
        Err(Overflow {
            limit: cap,
            needed: cap + 1,
        })
    }
}

/// Text said without `core::fmt`: a message written piece by piece (words and numbers) into a
/// [`Sink`]. The wire's errors and [`crate::wire::failure::Failure`] say themselves this way,
/// so writing a failure's words into an error buffer needs no `core::fmt` (its formatter and
/// argument tables are the larger code on the edge); their `Display` says the same words.
pub trait Words {
    /// Writes the message into `out` (an overflow stops it where it is).
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow>;
}

/// One piece of a message: words, or a signed number in decimal.
#[derive(Clone, Copy)]
pub(crate) enum Piece<'a> {
    /// Words, as they are.
    S(&'a str),
    /// A signed number.
    I(i64),
}

/// Writes `pieces` in order (one copy of the loop for every message: never inlined).
#[inline(never)]
pub(crate) fn say(out: &mut dyn Sink, pieces: &[Piece<'_>]) -> Result<(), Overflow> {
    for p in pieces {
        match *p {
            Piece::S(s) => out.put(s.as_bytes())?,
            Piece::I(n) => {
                if n < 0 {
                    out.put(b"-")?;
                }
                put_u64(out, n.unsigned_abs())?;
            }
        }
    }
    Ok(())
}

/// `Display` through [`Words`]: the same words, for `format!` and `{}`.
pub(crate) fn fmt_words(
    w: &(impl Words + ?Sized),
    f: &mut core::fmt::Formatter<'_>,
) -> core::fmt::Result {
    struct Out<'f, 'g>(&'f mut core::fmt::Formatter<'g>);
    impl Sink for Out<'_, '_> {
        fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
            // Every piece is whole UTF-8 (a `str`, digits or an ASCII byte).
            let s = core::str::from_utf8(bytes).unwrap_or("\u{fffd}");
            self.0.write_str(s).map_err(|_| Overflow {
                limit: 0,
                needed: bytes.len(),
            })
        }
    }
    w.words(&mut Out(f)).map_err(|_| core::fmt::Error)
}

/// Where `needle` first occurs in `hay`. The host (feature `std`) uses memchr's `memmem`; the
/// edge a plain loop over the windows (first byte, then the compare), which is a fraction of
/// `memmem`'s code (and of the `memchr` crate's word scan) and fast enough for the short
/// needles the core looks for (`"x-mcp-header"` in a tool's schema).
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    #[cfg(feature = "std")]
    {
        memchr::memmem::find(hay, needle)
    }
    #[cfg(not(feature = "std"))]
    {
        if needle.is_empty() {
            return Some(0);
        }
        // The first byte first: most windows end there, without a compare call.
        hay.windows(needle.len())
            .position(|w| w.first() == needle.first() && w == needle)
    }
}

/// How many times `needle` (not empty) occurs in `hay`, without overlaps.
pub(crate) fn count(mut hay: &[u8], needle: &[u8]) -> usize {
    let mut n = 0;
    while let Some(i) = find(hay, needle) {
        n += 1;
        hay = hay.get(i + needle.len().max(1)..).unwrap_or(&[]);
    }
    n
}

/// `s` split around the first `sep`, as `str::split_once` with a `&str` pattern, without its
/// two-way searcher (through [`find`]: a fraction of the code on the edge).
pub(crate) fn split_once_str<'s>(s: &'s str, sep: &str) -> Option<(&'s str, &'s str)> {
    let i = find(s.as_bytes(), sep.as_bytes())?;
    Some((s.get(..i)?, s.get(i + sep.len()..)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_white_is_char_is_whitespace() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(super::is_white(c), c.is_whitespace(), "{:#x}", c as u32);
        }
    }

    #[test]
    fn find_count_and_split_are_std_s() {
        let hay = "ab\"x-mcp-header\" aab \"x-mcp-header\"";
        for needle in ["", "a", "ab", "aab", "\"x-mcp-header\"", "zz", hay, "b \"x"] {
            assert_eq!(
                super::find(hay.as_bytes(), needle.as_bytes()),
                hay.find(needle)
            );
            if !needle.is_empty() {
                let n = hay.matches(needle).count();
                assert_eq!(super::count(hay.as_bytes(), needle.as_bytes()), n);
            }
            assert_eq!(super::split_once_str(hay, needle), hay.split_once(needle));
        }
        assert_eq!(super::find(b"ab", b"abc"), None);
    }

    #[test]
    fn decimal_is_display() {
        for n in [
            0u64,
            9,
            10,
            99,
            4_294_967_295,
            4_294_967_296,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut digits = [0u8; 20];
            assert_eq!(
                super::super::decimal(&mut digits, n),
                n.to_string().as_bytes()
            );
        }
    }

    #[test]
    fn trim_is_str_trim() {
        for s in [
            "",
            " ",
            "a",
            " a ",
            "\u{3000}x\u{85} y\u{2009}",
            "\t\r\n",
            "é \u{a0}",
            " \u{1}a\u{7f} ",
        ] {
            assert_eq!(super::trim(s), s.trim(), "{s:?}");
        }
    }
}
