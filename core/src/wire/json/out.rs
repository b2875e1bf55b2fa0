//! [`JsonOut`]: the request encoders' writer (a JSON-RPC message, piece after piece).

use super::{Value, write_str_literal};
use crate::buf::{Overflow, Sink, put_u64};

/// A writer of a JSON-RPC message that keeps the first overflow and writes nothing after it:
/// the encoders write piece after piece without a branch per piece, and [`JsonOut::done`] says
/// whether all of it fit (the error is the first piece's that did not, as with `?` after each).
/// The edge writes every request through one of these over `&mut dyn Sink`, so each encoder
/// exists once in its binary, and each piece is a call (not inlined there: one call is
/// smaller than the check and the write).
pub(crate) struct JsonOut<S: Sink> {
    out: S,
    err: Option<Overflow>,
}

impl<S: Sink> JsonOut<S> {
    /// A writer into `out`.
    pub(crate) fn new(out: S) -> Self {
        JsonOut { out, err: None }
    }

    /// Runs `write` on the sink unless an earlier piece overflowed; keeps its overflow.
    pub(crate) fn run(&mut self, write: impl FnOnce(&mut S) -> Result<(), Overflow>) {
        if self.err.is_none()
            && let Err(o) = write(&mut self.out)
        {
            self.err = Some(o);
        }
    }

    /// Bytes as they are.
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub(crate) fn lit(&mut self, bytes: &[u8]) {
        self.run(|out| out.put(bytes));
    }

    /// A JSON string literal of `s` (quoted, escaped).
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub(crate) fn str(&mut self, s: &str) {
        self.run(|out| write_str_literal(out, s));
    }

    /// A decimal number.
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub(crate) fn num(&mut self, n: u64) {
        // Through `dyn Sink`: the one copy the failures' words use too.
        self.run(|out| put_u64(out as &mut dyn Sink, n));
    }

    /// A JSON value, compactly ([`Value::write_compact`]).
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub(crate) fn json(&mut self, v: Value<'_>) {
        self.run(|out| v.write_compact(out));
    }

    /// What was written: `Err` with the first overflow.
    pub(crate) fn done(&self) -> Result<(), Overflow> {
        match self.err {
            Some(o) => Err(o),
            None => Ok(()),
        }
    }
}

/// Writers that take any [`Sink`] (the head's, `ClientCapabilities::write`) write through it
/// too; their `?` never stops them, the overflow is kept here.
impl<S: Sink> Sink for JsonOut<S> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        self.lit(bytes);
        Ok(())
    }
}
