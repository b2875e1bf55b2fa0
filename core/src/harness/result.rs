//! `ToolResult` and the four failure shapes of DESIGN.md, each built by one constructor, plus
//! what each shape owes the run: its failover outcome, its ledger record and its timeline event.
//!
//! A call never panics and never returns `Err`: whatever happened becomes one of
//! [`ToolResult::answered`], [`ToolResult::tool_error`], [`ToolResult::refused`] or
//! [`ToolResult::unreachable`]. The strings borrow caller buffers (already redacted); this
//! module does not redact, meter or emit by itself.

use crate::buf::{Overflow, Sink, put_u64};
use crate::harness::events::TimelineEvent;
use crate::harness::failover::AttemptOutcome;
use crate::harness::meter::LedgerRecord;
use crate::wire::json::JsonStr;

/// The `error` of a result whose server reported a tool-level error.
pub const TOOL_ERROR_MESSAGE: &str = "the tool reported an error (isError: true)";

/// The `error` of a call that ran out of time.
pub const TIMED_OUT_MESSAGE: &str = "tool call timed out";

/// The outcome of one tool call, as the harness sees it (the seed's `ToolResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolResult<'b> {
    /// The tool ran and answered. False means it refused, errored, or was unreachable.
    pub ok: bool,
    /// Flattened, redacted text content of the response (empty when there was none).
    pub text: &'b str,
    /// True when the SERVER reported a tool-level error (not a transport failure).
    pub is_error: bool,
    /// Wall-clock of the call, for the run timeline.
    pub latency_ms: u64,
    /// Present exactly when `ok` is false.
    pub error: Option<&'b str>,
    /// The raw (redacted) reply body, when one was received.
    pub raw: Option<&'b [u8]>,
    /// Which of the four shapes this is.
    pub shape: AttemptOutcome,
}

impl<'b> ToolResult<'b> {
    /// The tool ran and answered: `ok`, no error.
    pub fn answered(text: &'b str, latency_ms: u64, raw: Option<&'b [u8]>) -> Self {
        ToolResult {
            ok: true,
            text,
            is_error: false,
            latency_ms,
            error: None,
            raw,
            shape: AttemptOutcome::Answered,
        }
    }

    /// The server reported `isError: true`: `text` holds the tool's text, `error` says so
    /// ([`TOOL_ERROR_MESSAGE`]).
    pub fn tool_error(text: &'b str, latency_ms: u64, raw: Option<&'b [u8]>) -> Self {
        ToolResult {
            ok: false,
            text,
            is_error: true,
            latency_ms,
            error: Some(TOOL_ERROR_MESSAGE),
            raw,
            shape: AttemptOutcome::ToolError,
        }
    }

    /// A JSON-RPC error: `error` holds its code and message ([`write_rpc_error`]).
    pub fn refused(
        error: &'b str,
        unknown_tool: bool,
        latency_ms: u64,
        raw: Option<&'b [u8]>,
    ) -> Self {
        ToolResult {
            ok: false,
            text: "",
            is_error: false,
            latency_ms,
            error: Some(error),
            raw,
            shape: AttemptOutcome::Refused { unknown_tool },
        }
    }

    /// Connect, TLS, HTTP status, malformed reply, stream ended early or timed out: `error`
    /// says what happened.
    pub fn unreachable(error: &'b str, latency_ms: u64) -> Self {
        ToolResult {
            ok: false,
            text: "",
            is_error: false,
            latency_ms,
            error: Some(error),
            raw: None,
            shape: AttemptOutcome::Unreachable,
        }
    }

    /// What this attempt means for failover.
    pub fn outcome(&self) -> AttemptOutcome {
        self.shape
    }

    /// What this attempt costs: a transport failure has no evidence bytes; every other shape
    /// counts the bytes of its (redacted) text.
    pub fn ledger_record(&self) -> LedgerRecord {
        match self.shape {
            AttemptOutcome::Unreachable => LedgerRecord::transport_failure(),
            _ => LedgerRecord::answered(self.text.len() as u64),
        }
    }

    /// The `tool_error` event every `ok: false` owes the timeline.
    pub fn timeline_event<'e>(&'e self, slot: &'e str, tool: &'e str) -> Option<TimelineEvent<'e>> {
        match (self.ok, self.error) {
            (false, Some(error)) => Some(TimelineEvent::ToolError { slot, tool, error }),
            (false, None) => Some(TimelineEvent::ToolError {
                slot,
                tool,
                error: "",
            }),
            (true, _) => None,
        }
    }
}

/// Writes a refusal's error text: `JSON-RPC error <code>: <message>` (message unescaped).
pub fn write_rpc_error(
    out: &mut impl Sink,
    code: i64,
    message: &JsonStr<'_>,
) -> Result<(), Overflow> {
    out.put(b"JSON-RPC error ")?;
    if code < 0 {
        out.put(b"-")?;
    }
    put_u64(out, code.unsigned_abs())?;
    out.put(b": ")?;
    message.unescape_into(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use crate::wire::json::{JsonLimits, Value};

    #[test]
    fn the_four_shapes() {
        let a = ToolResult::answered("22/tcp open", 12, Some(b"{}"));
        assert!(a.ok && !a.is_error && a.error.is_none());
        assert_eq!(a.outcome(), AttemptOutcome::Answered);
        assert_eq!(a.ledger_record(), LedgerRecord::answered(11));
        assert_eq!(a.timeline_event("kali", "nmap"), None);

        let t = ToolResult::tool_error("nikto: not found", 5, None);
        assert!(!t.ok && t.is_error);
        assert_eq!(t.error, Some(TOOL_ERROR_MESSAGE));
        assert_eq!(t.text, "nikto: not found");
        assert_eq!(t.outcome(), AttemptOutcome::ToolError);
        assert_eq!(t.ledger_record(), LedgerRecord::answered(16));
        assert_eq!(
            t.timeline_event("kali", "nikto"),
            Some(TimelineEvent::ToolError {
                slot: "kali",
                tool: "nikto",
                error: TOOL_ERROR_MESSAGE
            })
        );

        let r = ToolResult::refused("JSON-RPC error -32601: Unknown tool", true, 3, None);
        assert!(!r.ok && !r.is_error);
        assert_eq!(r.outcome(), AttemptOutcome::Refused { unknown_tool: true });
        assert_eq!(r.ledger_record(), LedgerRecord::answered(0));
        assert!(r.timeline_event("kali", "x").is_some());

        let u = ToolResult::unreachable(TIMED_OUT_MESSAGE, 300_000);
        assert!(!u.ok && !u.is_error);
        assert_eq!(u.error, Some("tool call timed out"));
        assert_eq!(u.outcome(), AttemptOutcome::Unreachable);
        assert_eq!(u.ledger_record(), LedgerRecord::transport_failure());
        assert_eq!(
            u.timeline_event("kali", "nmap"),
            Some(TimelineEvent::ToolError {
                slot: "kali",
                tool: "nmap",
                error: "tool call timed out"
            })
        );
    }

    #[test]
    fn rpc_error_text() {
        let v = Value::parse(br#""Unknown tool: \"nikto\"""#, JsonLimits::default()).unwrap();
        let msg = v.as_str().unwrap();
        let mut storage = [0u8; 64];
        let mut b = SliceBuf::new(&mut storage);
        write_rpc_error(&mut b, -32601, &msg).unwrap();
        assert_eq!(
            b.bytes(),
            br#"JSON-RPC error -32601: Unknown tool: "nikto""#
        );
        b.clear();
        write_rpc_error(&mut b, i64::MIN, &msg).unwrap();
        assert!(
            b.bytes()
                .starts_with(b"JSON-RPC error -9223372036854775808: ")
        );
    }
}
