//! What the machine keeps of a server's listed tools between calls: a [`ToolRecord`] per tool
//! that has `x-mcp-header` annotations, an `idempotentHint` or a required task, stored back to
//! back in the slot's fixed arena (no allocator) and read back typed.
//!
//! A record is the tool's name, a NUL, its annotation pairs (`argument\0Header\0`…), one byte
//! of [`ToolRecord`] flags, and the record separator. Only [`ToolRecord::write_head`],
//! [`ToolRecord::write_tail`] and [`ToolRecord::find`] know that layout.

use crate::buf::{Buf, Overflow};

/// Ends each record.
const SEP: u8 = 0x1e;
/// Flag: the tool is annotated `idempotentHint: true`.
const IDEMPOTENT: u8 = 1;
/// Flag: the tool runs only as a task (`execution.taskSupport: "required"`, 2025-11-25).
const TASK_REQUIRED: u8 = 2;
/// Flag: the tool's header annotations are invalid: it is dropped, never called.
const INVALID: u8 = 4;

/// One listed tool, as the slot keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ToolRecord<'a> {
    /// Its annotation pairs (`argument\0Header\0`…); `None` when they are invalid (the tool
    /// is dropped).
    pub(crate) pairs: Option<&'a [u8]>,
    /// A call of it may be sent again after a broken stream.
    pub(crate) idempotent: bool,
    /// It is callable only as a task.
    pub(crate) task_required: bool,
}

impl<'a> ToolRecord<'a> {
    /// Starts the record of the tool `name` (its raw JSON string bytes); its pairs follow.
    pub(crate) fn write_head(out: &mut impl Buf, name: &[u8]) -> Result<(), Overflow> {
        out.put(name)?;
        out.put(b"\0")
    }

    /// Ends a record whose pairs were written (or, with `invalid`, dropped).
    pub(crate) fn write_tail(
        out: &mut impl Buf,
        idempotent: bool,
        task_required: bool,
        invalid: bool,
    ) -> Result<(), Overflow> {
        let flags = [
            (idempotent, IDEMPOTENT),
            (task_required, TASK_REQUIRED),
            (invalid, INVALID),
        ]
        .iter()
        .fold(0, |f, &(on, bit)| if on { f | bit } else { f });
        out.put(&[flags, SEP])
    }

    /// The record of `tool` in `arena`, if it has one.
    pub(crate) fn find(arena: &'a [u8], tool: &[u8]) -> Option<Self> {
        arena
            .split(|&b| b == SEP)
            .filter_map(|record| {
                let nul = record.iter().position(|&b| b == 0)?;
                let (name, rest) = (record.get(..nul)?, record.get(nul + 1..)?);
                let (&flags, pairs) = rest.split_last()?;
                Some((name, pairs, flags))
            })
            .find(|(name, _, _)| *name == tool)
            .map(|(_, pairs, flags)| ToolRecord {
                pairs: (flags & INVALID == 0).then_some(pairs),
                idempotent: flags & IDEMPOTENT != 0,
                task_required: flags & TASK_REQUIRED != 0,
            })
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::buf::{Sink, VecBuf};

    #[test]
    fn records_read_back_as_written() -> Result<(), Overflow> {
        let mut arena = VecBuf::with_limit(256);
        ToolRecord::write_head(&mut arena, b"scan")?;
        arena.put(b"host\0Mcp-Param-Host\0")?;
        ToolRecord::write_tail(&mut arena, false, true, false)?;
        ToolRecord::write_head(&mut arena, b"echo")?;
        ToolRecord::write_tail(&mut arena, true, false, false)?;
        ToolRecord::write_head(&mut arena, b"bad")?;
        ToolRecord::write_tail(&mut arena, false, false, true)?;
        let a = arena.bytes();
        assert_eq!(
            ToolRecord::find(a, b"scan"),
            Some(ToolRecord {
                pairs: Some(b"host\0Mcp-Param-Host\0"),
                idempotent: false,
                task_required: true
            })
        );
        assert_eq!(
            ToolRecord::find(a, b"echo"),
            Some(ToolRecord {
                pairs: Some(b""),
                idempotent: true,
                task_required: false
            })
        );
        assert_eq!(ToolRecord::find(a, b"bad").map(|r| r.pairs), Some(None));
        assert_eq!(ToolRecord::find(a, b"nope"), None);
        assert_eq!(ToolRecord::find(a, b"sca"), None);
        Ok(())
    }
}
