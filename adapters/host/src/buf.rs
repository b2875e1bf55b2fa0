//! `VecBuf`: the host's [`Buf`], a `Vec` that grows on demand up to a stated cap.
//!
//! Owns: storage and its cap. Overflow is the core's [`Overflow`] value, never a panic, and
//! nothing is written by a `put` that does not fit.

use verifi_mcp_core::buf::{Buf, Overflow, Sink};

/// Default cap of a reply buffer: 16 MiB.
pub const DEFAULT_REPLY_CAP: usize = 16 * 1024 * 1024;

/// A capped, growable byte buffer.
#[derive(Debug, Clone, Default)]
pub struct VecBuf {
    bytes: Vec<u8>,
    limit: usize,
}

impl VecBuf {
    /// An empty buffer that will hold at most `limit` bytes (allocates lazily).
    pub fn with_limit(limit: usize) -> Self {
        VecBuf {
            bytes: Vec::new(),
            limit,
        }
    }

    /// Empties the buffer for another use with `limit`, keeping its storage unless that grew
    /// past `keep` bytes (a big reply's storage is given back, not pooled).
    pub fn reuse(&mut self, limit: usize, keep: usize) {
        if self.bytes.capacity() > keep {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
        self.limit = limit;
    }

    /// The first `len` bytes as a `String`, taking the storage (the buffer is left empty).
    /// The core hands out the valid UTF-8 prefix of its text, so `len` ends on a character;
    /// anything else is replaced, not a panic.
    pub fn take_utf8(&mut self, len: usize) -> String {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.truncate(len);
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The contents, consuming the buffer.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_cap_without_writing() {
        let mut b = VecBuf::with_limit(5);
        b.put(b"abc").unwrap();
        assert_eq!(
            b.put(b"def"),
            Err(Overflow {
                limit: 5,
                needed: 6
            })
        );
        assert_eq!(b.bytes(), b"abc");
        b.put(b"de").unwrap();
        assert_eq!(b.bytes(), b"abcde");
        b.truncate(1);
        assert_eq!(b.bytes(), b"a");
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.limit(), 5);
    }

    #[test]
    fn reuse_empties_sets_the_cap_and_drops_storage_past_keep() {
        let mut b = VecBuf::with_limit(100);
        b.put(&[1; 10]).unwrap();
        b.reuse(4, 64);
        assert!(b.is_empty());
        assert_eq!(b.limit(), 4);
        assert!(b.put(b"abcde").is_err());
        assert!(b.bytes.capacity() >= 10, "small storage is kept");
        let mut big = VecBuf::with_limit(1 << 20);
        big.put(&vec![0; 1 << 16]).unwrap();
        big.reuse(1 << 20, 1024);
        assert_eq!(big.bytes.capacity(), 0, "large storage is given back");
    }
}
