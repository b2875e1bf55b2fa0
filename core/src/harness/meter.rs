//! Metering: one ledger record per attempt, as a plain value, and running totals.
//!
//! Every attempt is metered whether or not it succeeded — a failed call still cost a round
//! trip and the server still did work. This module owns the record, the [`Ledger`] sink trait
//! and [`LedgerTotals`]; where records go (a run ledger, a log) is the host's business.

use crate::buf::{Overflow, Sink, put_u64};

/// What one attempt cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LedgerRecord {
    /// Tool calls made (1 per attempt).
    pub tool_calls: u32,
    /// Bytes of the *redacted* text the server answered with; `None` for a transport failure.
    pub evidence_bytes: Option<u64>,
}

impl LedgerRecord {
    /// The server answered (the tool ran, reported a tool error, or the call was refused):
    /// `{ tool_calls: 1, evidence_bytes: bytes }`, bytes counted after redaction.
    pub fn answered(bytes: u64) -> Self {
        LedgerRecord {
            tool_calls: 1,
            evidence_bytes: Some(bytes),
        }
    }

    /// The server was not reached or its reply was unusable: `{ tool_calls: 1 }` alone.
    pub fn transport_failure() -> Self {
        LedgerRecord {
            tool_calls: 1,
            evidence_bytes: None,
        }
    }
}

/// Where ledger records go.
pub trait Ledger {
    /// Records one attempt.
    fn record(&mut self, r: LedgerRecord);
}

impl<L: Ledger + ?Sized> Ledger for &mut L {
    fn record(&mut self, r: LedgerRecord) {
        (**self).record(r)
    }
}

/// Running totals of a run's ledger (saturating).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LedgerTotals {
    /// Tool calls made, failed ones included.
    pub tool_calls: u64,
    /// Redacted evidence bytes received.
    pub evidence_bytes: u64,
}

impl Ledger for LedgerTotals {
    fn record(&mut self, r: LedgerRecord) {
        self.tool_calls = self.tool_calls.saturating_add(u64::from(r.tool_calls));
        self.evidence_bytes = self
            .evidence_bytes
            .saturating_add(r.evidence_bytes.unwrap_or(0));
    }
}

impl LedgerTotals {
    /// The stable JSON form: `{"tool_calls":N,"evidence_bytes":N}`.
    pub fn write_json(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        out.put(b"{\"tool_calls\":")?;
        put_u64(out, self.tool_calls)?;
        out.put(b",\"evidence_bytes\":")?;
        put_u64(out, self.evidence_bytes)?;
        out.put(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};

    #[test]
    fn every_attempt_counts_and_failures_carry_no_bytes() {
        let mut t = LedgerTotals::default();
        t.record(LedgerRecord::answered(120));
        t.record(LedgerRecord::answered(0));
        t.record(LedgerRecord::transport_failure());
        assert_eq!(
            t,
            LedgerTotals {
                tool_calls: 3,
                evidence_bytes: 120
            }
        );
        assert_eq!(LedgerRecord::transport_failure().evidence_bytes, None);
        assert_eq!(LedgerRecord::answered(7).tool_calls, 1);
    }

    #[test]
    fn through_a_mutable_reference() {
        fn meter(mut l: impl Ledger) {
            l.record(LedgerRecord::answered(5));
        }
        let mut t = LedgerTotals::default();
        meter(&mut t);
        assert_eq!(t.evidence_bytes, 5);
    }

    #[test]
    fn totals_saturate() {
        let mut t = LedgerTotals {
            tool_calls: u64::MAX,
            evidence_bytes: u64::MAX - 1,
        };
        t.record(LedgerRecord::answered(10));
        assert_eq!((t.tool_calls, t.evidence_bytes), (u64::MAX, u64::MAX));
    }

    #[test]
    fn json_form() {
        let mut storage = [0u8; 64];
        let mut b = SliceBuf::new(&mut storage);
        let t = LedgerTotals {
            tool_calls: 3,
            evidence_bytes: 4096,
        };
        t.write_json(&mut b).unwrap();
        assert_eq!(b.bytes(), br#"{"tool_calls":3,"evidence_bytes":4096}"#);
        let mut small = [0u8; 8];
        assert!(t.write_json(&mut SliceBuf::new(&mut small)).is_err());
    }
}
