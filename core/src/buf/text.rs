//! Short text of a stated size: what a failure keeps of a detail, and a sink that keeps what fits.
//!
//! These are the lowest layer of the wire's messages (the protocol eras, HTTP and failures all
//! write short text through them), so they live here rather than beside any one of those.

use heapless::String;

use super::{Overflow, Sink};

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
    if out.push_str(s).is_ok() {
        return out;
    }
    const MARK: &str = "…";
    let room = N.saturating_sub(MARK.len());
    for ch in s.chars() {
        if out.len() + ch.len_utf8() > room {
            break;
        }
        let _ = out.push(ch);
    }
    let _ = out.push_str(MARK);
    out
}

/// A `Sink` into a fixed string that keeps what fits (UTF-8 boundaries respected).
#[derive(Default)]
pub struct StrSink<const N: usize> {
    bytes: heapless::Vec<u8, N>,
}

impl<const N: usize> StrSink<N> {
    /// The text kept so far (a cut in the middle of a character is dropped).
    pub fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.bytes) {
            Ok(s) => s,
            Err(e) => {
                core::str::from_utf8(self.bytes.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or("")
            }
        }
    }
}

impl<const N: usize> Sink for StrSink<N> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        for &b in bytes {
            if self.bytes.push(b).is_err() {
                return Err(Overflow {
                    limit: N,
                    needed: N + 1,
                });
            }
        }
        Ok(())
    }
}
