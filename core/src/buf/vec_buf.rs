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
        self.bytes.extend_from_slice(bytes);
        Ok(())
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
}
