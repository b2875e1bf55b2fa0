//! The tests' growable buffer when the core is built without `std` (the edge's build, where
//! the core has no `VecBuf`): a `Vec` with a cap, implementing the core's public `Buf` and
//! `Sink` as any caller's buffer would. With `std` the tests use the core's own `VecBuf`
//! (whose in-place reply path is the host's); this one always takes the copying path, as the
//! edge's `SliceBuf` does.
#![allow(dead_code)]

use verifi_mcp_core::buf::{Buf, Overflow, Sink};

/// A `Vec` that grows on demand up to its cap; a `put` that does not fit writes nothing.
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

    /// The bytes, as a `Vec`.
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }
}

impl Sink for VecBuf {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let needed = self.bytes.len() + bytes.len();
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
