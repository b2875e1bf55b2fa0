//! `VecBuf`: the host's `Buf`, a `Vec` that grows on demand up to a stated cap (the core's
//! [`verifi_mcp_core::buf::VecBuf`]).
//!
//! Owns: storage and its cap. Overflow is the core's `Overflow` value, never a panic, and
//! nothing is written by a `put` that does not fit.

/// Default cap of a reply buffer: 16 MiB.
pub const DEFAULT_REPLY_CAP: usize = 16 * 1024 * 1024;

/// The host's `Buf`: the core's `Vec`-backed buffer with a cap.
pub use verifi_mcp_core::buf::VecBuf;

#[cfg(test)]
mod tests {
    use super::*;
    use verifi_mcp_core::buf::{Buf, Overflow, Sink};

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
        assert!(b.capacity() >= 10, "small storage is kept");
        let mut big = VecBuf::with_limit(1 << 20);
        big.put(&vec![0; 1 << 16]).unwrap();
        big.reuse(1 << 20, 1024);
        assert_eq!(big.capacity(), 0, "large storage is given back");
    }
}
