//! `VecBuf`: a [`Buf`] over a `Vec` that grows on demand up to a stated cap (the host's
//! buffers, and every test's). Only with the `std` feature.

extern crate std;

use std::string::String;
use std::vec::Vec;

use super::{Buf, Overflow, Sink};

/// A `Vec` that grows on demand up to its cap. A `put` that does not fit writes nothing and
/// reports the [`Overflow`]; nothing panics.
#[derive(Debug, Clone, Default)]
pub struct VecBuf {
    bytes: Vec<u8>,
    limit: usize,
}

impl VecBuf {
    /// An empty buffer that holds at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        VecBuf {
            bytes: Vec::new(),
            limit,
        }
    }

    /// [`VecBuf::with_limit`].
    pub fn new(limit: usize) -> Self {
        Self::with_limit(limit)
    }

    /// Empties the buffer for another use with `limit`, giving its storage back when it grew
    /// past `keep` bytes (one huge reply does not pin its memory for the run).
    pub fn reuse(&mut self, limit: usize, keep: usize) {
        if self.bytes.capacity() > keep {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
        self.limit = limit;
    }

    /// The first `len` bytes as a `String` (moved, not copied; invalid UTF-8 replaced), leaving
    /// the buffer empty.
    pub fn take_utf8(&mut self, len: usize) -> String {
        let mut bytes = core::mem::take(&mut self.bytes);
        bytes.truncate(len);
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The first `len` bytes as the text a caller is handed: moved out when they are more
    /// than `keep` bytes (storage that big is not kept for the next use anyway), else copied,
    /// so the buffer keeps its small storage for reuse. Invalid UTF-8 is replaced either way.
    pub fn hand_out(&mut self, len: usize, keep: usize) -> String {
        if len > keep {
            self.take_utf8(len)
        } else {
            // Checked by the vectorised validator and copied (the lossy path's chunk iterator
            // costs several times more); lossy only for invalid text.
            let bytes = self.bytes.get(..len).unwrap_or(&[]);
            match simdutf8::basic::from_utf8(bytes) {
                Ok(text) => String::from(text),
                Err(_) => String::from_utf8_lossy(bytes).into_owned(),
            }
        }
    }

    /// Takes `from`'s storage holding its first `len` bytes, without copying them; `from` gets
    /// this buffer's old storage, emptied. Each keeps its own cap. Refused (nothing changes)
    /// when `len` is over this buffer's cap or past what `from` holds.
    pub fn adopt(&mut self, from: &mut VecBuf, len: usize) -> Result<(), Overflow> {
        if len > self.limit || len > from.bytes.len() {
            return Err(Overflow {
                limit: self.limit,
                needed: len,
            });
        }
        core::mem::swap(&mut self.bytes, &mut from.bytes);
        self.bytes.truncate(len);
        from.bytes.clear();
        Ok(())
    }

    /// The bytes written, to rewrite in place.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// The storage's capacity (what it holds in memory, written or not).
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// The bytes written.
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }
}

impl Sink for VecBuf {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let needed = self.bytes.len().saturating_add(bytes.len());
        if needed > self.limit {
            return Err(Overflow {
                limit: self.limit,
                needed,
            });
        }
        if needed > self.bytes.capacity() {
            // Grow by doubling, as `Vec` does, but never past the cap: a capped buffer's
            // storage is at most its cap.
            let grown = needed
                .max(self.bytes.len().saturating_mul(2))
                .max(64)
                .min(self.limit);
            self.bytes.reserve_exact(grown - self.bytes.len());
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn reserve(&mut self, additional: usize) {
        // Sized once from the core's hint (the rest of an HTTP body or chunk), never past the cap.
        let want = self.bytes.len().saturating_add(additional).min(self.limit);
        if want > self.bytes.capacity() {
            self.bytes.reserve_exact(want - self.bytes.len());
        }
    }
}

impl Buf for VecBuf {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn clear(&mut self) {
        self.bytes.clear();
    }
    fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }
    fn limit(&self) -> usize {
        self.limit
    }
    fn vec_buf(&mut self) -> Option<&mut VecBuf> {
        Some(self)
    }
}
