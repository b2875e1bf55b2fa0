//! Caller-provided storage with a stated cap.
//!
//! The core never allocates: every place that must hold bytes (a reply, a flattened text, an
//! outgoing request) writes through [`Sink`] into a [`Buf`] the caller owns. On a host the
//! adapter backs it with a capped `Vec`; on the edge, [`SliceBuf`] wraps a static array.
//! Overflow is a value ([`Overflow`]), never a panic.

use core::fmt;

/// A write that did not fit: the cap and how many bytes were needed at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Overflow {
    /// The buffer's cap in bytes.
    pub limit: usize,
    /// The length the write would have needed (a lower bound of the final size).
    pub needed: usize,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

mod text;
pub(crate) use text::Piece::{I, S};
pub use text::{DETAIL_BYTES, Detail, StrSink, Words, trim, truncated};
pub(crate) use text::{
    char_floor, count, find, fmt_words, is_white, say, split_once_str, utf8_prefix,
};

#[cfg(feature = "std")]
mod vec_buf;
#[cfg(feature = "std")]
pub use vec_buf::VecBuf;

impl dyn Sink + '_ {
    /// Appends the bytes of `s` (see [`Sink::put`]).
    pub fn put_str(&mut self, s: &str) -> Result<(), Overflow> {
        self.put(s.as_bytes())
    }
}

/// Somewhere bytes can be appended to, up to a cap.
pub trait Sink {
    /// Appends `bytes` whole, or appends nothing and reports the overflow.
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow>;

    /// A hint that about `additional` more bytes are coming (the rest of an HTTP chunk, the raw
    /// length of a string). A growable sink may size its storage once instead of growing in
    /// steps; it must still never go past its cap. Ignoring the hint is always correct.
    fn reserve(&mut self, additional: usize) {
        let _ = additional;
    }
}

/// A growable byte buffer with a cap that the caller owns.
pub trait Buf: Sink {
    /// The bytes written so far.
    fn bytes(&self) -> &[u8];
    /// Forgets the contents (keeps the storage).
    fn clear(&mut self);
    /// Shortens the contents to `len` bytes (no-op when already shorter).
    fn truncate(&mut self, len: usize);
    /// The most bytes this buffer will ever hold.
    fn limit(&self) -> usize;
    /// Number of bytes written so far.
    fn len(&self) -> usize {
        self.bytes().len()
    }
    /// True when nothing is written.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The host's [`VecBuf`] behind this buffer, when it is one: a reply can then be rewritten
    /// where it lies and its storage handed to another buffer instead of copied (see
    /// `content::InPlacePlan`). `None` (the default) keeps every caller on the copying
    /// path.
    #[cfg(feature = "std")]
    fn vec_buf(&mut self) -> Option<&mut VecBuf> {
        None
    }
}

impl<T: Sink + ?Sized> Sink for &mut T {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        (**self).put(bytes)
    }
    fn reserve(&mut self, additional: usize) {
        (**self).reserve(additional)
    }
}

impl<T: Buf + ?Sized> Buf for &mut T {
    fn bytes(&self) -> &[u8] {
        (**self).bytes()
    }
    fn clear(&mut self) {
        (**self).clear()
    }
    fn truncate(&mut self, len: usize) {
        (**self).truncate(len)
    }
    fn limit(&self) -> usize {
        (**self).limit()
    }
    #[cfg(feature = "std")]
    fn vec_buf(&mut self) -> Option<&mut VecBuf> {
        (**self).vec_buf()
    }
}

/// A [`Buf`] over a borrowed slice: the edge's storage, and the tests'.
pub struct SliceBuf<'a> {
    storage: &'a mut [u8],
    len: usize,
}

impl<'a> SliceBuf<'a> {
    /// An empty buffer whose cap is `storage.len()`.
    pub fn new(storage: &'a mut [u8]) -> Self {
        SliceBuf { storage, len: 0 }
    }
}

impl Sink for SliceBuf<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let end = self.len.saturating_add(bytes.len());
        match self.storage.get_mut(self.len..end) {
            Some(dst) => {
                // (Equal lengths.) The edge copies by a zip: no length check to fail, so no
                // panic path and its location in the binary.
                #[cfg(not(feature = "std"))]
                for (d, s) in dst.iter_mut().zip(bytes) {
                    *d = *s;
                }
                #[cfg(feature = "std")]
                dst.copy_from_slice(bytes);
                self.len = end;
                Ok(())
            }
            None => Err(Overflow {
                limit: self.storage.len(),
                needed: end,
            }),
        }
    }
}

impl Buf for SliceBuf<'_> {
    fn bytes(&self) -> &[u8] {
        self.storage.get(..self.len).unwrap_or(&[])
    }
    fn clear(&mut self) {
        self.len = 0;
    }
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
    fn limit(&self) -> usize {
        self.storage.len()
    }
}

/// Counts bytes without storing them (for sizing, and for metering what was discarded).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingSink {
    /// Bytes seen so far.
    pub count: usize,
}

impl Sink for CountingSink {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        self.count = self.count.saturating_add(bytes.len());
        Ok(())
    }
}

/// Formats a decimal number into a sink (no `core::fmt` machinery on the hot path).
pub fn put_u64(sink: &mut (impl Sink + ?Sized), n: u64) -> Result<(), Overflow> {
    let mut digits = [0u8; 20];
    sink.put(decimal(&mut digits, n))
}

/// The decimal digits of `n`, written at the end of `digits` (one copy for every sink). On the
/// host the 64-bit division runs only for the digits above `u32::MAX` and the rest divide in
/// 32 bits; the edge divides in 64 bits throughout (one loop: the compiler turns the division
/// by ten into multiplications, no library call, in less code than two loops).
#[inline(never)]
fn decimal(digits: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = digits.len();
    if cfg!(not(feature = "std")) {
        loop {
            i = i.saturating_sub(1);
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 {
                return digits.get(i..).unwrap_or(&[]);
            }
        }
    }
    while n > u64::from(u32::MAX) {
        i = i.saturating_sub(1);
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
    }
    let mut m = n as u32;
    loop {
        i = i.saturating_sub(1);
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (m % 10) as u8;
        }
        m /= 10;
        if m == 0 {
            break;
        }
    }
    digits.get(i..).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_buf_reports_overflow_without_writing() {
        let mut storage = [0u8; 4];
        let mut b = SliceBuf::new(&mut storage);
        assert_eq!(b.put(b"abc"), Ok(()));
        assert_eq!(
            b.put(b"de"),
            Err(Overflow {
                limit: 4,
                needed: 5
            })
        );
        assert_eq!(b.bytes(), b"abc");
        b.truncate(1);
        assert_eq!(b.bytes(), b"a");
    }

    #[test]
    fn put_u64_formats_edges() {
        for n in [0u64, 7, 10, 1234567890, u64::MAX] {
            let mut storage = [0u8; 20];
            let mut b = SliceBuf::new(&mut storage);
            put_u64(&mut b, n).unwrap();
            assert_eq!(
                core::str::from_utf8(b.bytes()).unwrap(),
                std::format!("{n}")
            );
        }
    }
}
