//! `ToolResult`: one [`Outcome`] enum of the four shapes of docs/design.md#result-shapes,
//! with the reference SDK's field view (`ok`, `is_error`, `error`) and the [`Kind`] derived
//! from it so the fields can never contradict each other; plus what each shape owes the run:
//! its failover outcome, its ledger record and its timeline event.
//!
//! [`Outcome`] is generic over how it holds its error text: the core borrows it
//! (`Outcome<&str>`, no allocation); an adapter that keeps results owns it (`Outcome<String>`)
//! and reads the same derived view through the same methods.
//!
//! A call never panics and never returns `Err`: whatever happened becomes one of
//! [`ToolResult::answered`], [`ToolResult::tool_error`], [`ToolResult::refused`] or
//! [`ToolResult::unreachable`]. The strings borrow caller buffers (already redacted); this
//! module does not redact, meter or emit by itself.

use crate::buf::{Buf, Overflow, Sink, put_u64};
use crate::harness::events::TimelineEvent;
use crate::harness::failover::AttemptOutcome;
use crate::harness::meter::LedgerRecord;
use crate::wire::failure::Cause;
use crate::wire::json::JsonStr;

/// The `error` of a tool error whose tool gave no text.
pub const TOOL_ERROR_MESSAGE: &str =
    "tool error: the tool reported an error (isError: true) and gave no text";

/// The `error` of a call that ran out of time.
pub const TIMED_OUT_MESSAGE: &str = "tool call timed out";

/// The most bytes of a tool's own text carried in a tool error's `error` (the first line, or
/// this much of it; a cut ends in `…`). `text` keeps all of it.
pub const TOOL_ERROR_TEXT_BYTES: usize = 1024;

/// What a call came to, as a type a harness can branch on without matching strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// The tool ran and answered.
    Answered,
    /// The server reported a tool-level error (`isError: true`).
    ToolError,
    /// A JSON-RPC error (unknown tool, bad arguments …).
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The error says the server does not have the tool.
        unknown_tool: bool,
    },
    /// No answer from a server, and why.
    Unreachable(Cause),
}

impl Kind {
    /// What this means for failover.
    pub fn attempt(self) -> AttemptOutcome {
        match self {
            Kind::Answered => AttemptOutcome::Answered,
            Kind::ToolError => AttemptOutcome::ToolError,
            Kind::Refused { unknown_tool, .. } => AttemptOutcome::Refused { unknown_tool },
            Kind::Unreachable(_) => AttemptOutcome::Unreachable,
        }
    }
}

/// The outcome of one call: its shape, and for every shape but `Answered` the (redacted)
/// error text, so an `ok` result cannot carry an error nor a failed one lack it.
///
/// `E` is how the error text is held: `&str` in the core (borrowed from the call's buffers),
/// an owned string in an adapter that keeps results ([`map`](Self::map) converts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<E> {
    /// The tool ran and answered.
    Answered,
    /// The server reported a tool-level error; `error` carries the tool's own words.
    ToolError {
        /// `tool error: <the tool's first line …>`.
        error: E,
    },
    /// A JSON-RPC error.
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The error says the server does not have the tool.
        unknown_tool: bool,
        /// `JSON-RPC error <code>: <message>`.
        error: E,
    },
    /// No answer from a server.
    Unreachable {
        /// Why, as a type.
        cause: Cause,
        /// What happened, said so a person can act on it.
        error: E,
    },
}

impl<E> Outcome<E> {
    /// The reference SDK's `ok`: the tool ran and answered.
    pub fn ok(&self) -> bool {
        matches!(self, Outcome::Answered)
    }

    /// The reference SDK's `isError`: the server reported a tool-level error.
    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::ToolError { .. })
    }

    /// The reference SDK's `error`: present exactly when `ok` is false.
    pub fn error(&self) -> Option<&E> {
        match self {
            Outcome::Answered => None,
            Outcome::ToolError { error }
            | Outcome::Refused { error, .. }
            | Outcome::Unreachable { error, .. } => Some(error),
        }
    }

    /// The outcome without its text: what a harness branches on.
    pub fn kind(&self) -> Kind {
        match *self {
            Outcome::Answered => Kind::Answered,
            Outcome::ToolError { .. } => Kind::ToolError,
            Outcome::Refused {
                code, unknown_tool, ..
            } => Kind::Refused { code, unknown_tool },
            Outcome::Unreachable { cause, .. } => Kind::Unreachable(cause),
        }
    }

    /// The same outcome with its error text converted by `f` (e.g. `map(str::to_owned)` to
    /// keep a borrowed outcome past its buffers).
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> Outcome<F> {
        match self {
            Outcome::Answered => Outcome::Answered,
            Outcome::ToolError { error } => Outcome::ToolError { error: f(error) },
            Outcome::Refused {
                code,
                unknown_tool,
                error,
            } => Outcome::Refused {
                code,
                unknown_tool,
                error: f(error),
            },
            Outcome::Unreachable { cause, error } => Outcome::Unreachable {
                cause,
                error: f(error),
            },
        }
    }
}

/// The outcome of one tool call, as the harness sees it (the reference SDK's `ToolResult`,
/// docs/design.md#result-shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolResult<'b> {
    /// What the call came to.
    pub outcome: Outcome<&'b str>,
    /// Flattened, redacted text content of the response (empty when there was none).
    pub text: &'b str,
    /// Wall-clock of the call, for the run timeline.
    pub latency_ms: u64,
    /// The raw (redacted) reply body, when one was received and kept.
    pub raw: Option<&'b [u8]>,
}

impl<'b> ToolResult<'b> {
    /// The tool ran and answered: `ok`, no error.
    pub fn answered(text: &'b str, latency_ms: u64, raw: Option<&'b [u8]>) -> Self {
        ToolResult {
            outcome: Outcome::Answered,
            text,
            latency_ms,
            raw,
        }
    }

    /// The server reported `isError: true`: `text` holds the tool's text, `error` its first
    /// line (see [`write_tool_error`]).
    pub fn tool_error(
        text: &'b str,
        error: &'b str,
        latency_ms: u64,
        raw: Option<&'b [u8]>,
    ) -> Self {
        ToolResult {
            outcome: Outcome::ToolError { error },
            text,
            latency_ms,
            raw,
        }
    }

    /// A JSON-RPC error: `error` holds its code and message ([`write_rpc_error`]).
    pub fn refused(
        error: &'b str,
        code: i64,
        unknown_tool: bool,
        latency_ms: u64,
        raw: Option<&'b [u8]>,
    ) -> Self {
        ToolResult {
            outcome: Outcome::Refused {
                code,
                unknown_tool,
                error,
            },
            text: "",
            latency_ms,
            raw,
        }
    }

    /// Connect, TLS, HTTP status, malformed reply, stream ended early, timed out, stalled,
    /// cancelled, or a local failure: `error` says what happened.
    pub fn unreachable(error: &'b str, cause: Cause, latency_ms: u64) -> Self {
        ToolResult {
            outcome: Outcome::Unreachable { cause, error },
            text: "",
            latency_ms,
            raw: None,
        }
    }

    /// The reference SDK's `ok`: the tool ran and answered ([`Outcome::ok`]).
    pub fn ok(&self) -> bool {
        self.outcome.ok()
    }

    /// The reference SDK's `isError`: the server reported a tool-level error
    /// ([`Outcome::is_error`]).
    pub fn is_error(&self) -> bool {
        self.outcome.is_error()
    }

    /// The reference SDK's `error`: present exactly when `ok` is false ([`Outcome::error`]).
    pub fn error(&self) -> Option<&'b str> {
        self.outcome.error().copied()
    }

    /// The outcome as a borrow-free type ([`Outcome::kind`]).
    pub fn kind(&self) -> Kind {
        self.outcome.kind()
    }

    /// What this attempt means for failover.
    pub fn attempt(&self) -> AttemptOutcome {
        self.kind().attempt()
    }

    /// What this call costs: a transport failure has no evidence bytes; every other shape
    /// counts the bytes of its (redacted) text.
    pub fn ledger_record(&self) -> LedgerRecord {
        match self.outcome {
            Outcome::Unreachable { .. } => LedgerRecord::transport_failure(),
            _ => LedgerRecord::answered(self.text.len() as u64),
        }
    }

    /// The `tool_error` event every `ok: false` owes the timeline.
    pub fn timeline_event<'e>(&'e self, slot: &'e str, tool: &'e str) -> Option<TimelineEvent<'e>> {
        self.error()
            .map(|error| TimelineEvent::ToolError { slot, tool, error })
    }
}

/// Writes a tool error's `error`: `tool error: ` and the tool's first line, or its first
/// [`TOOL_ERROR_TEXT_BYTES`] (and what fits `out`), cut at a character boundary and ended with
/// `…` when cut. A tool that gave no text gets [`TOOL_ERROR_MESSAGE`].
pub fn write_tool_error(text: &str, out: &mut impl Buf) -> Result<(), Overflow> {
    const PREFIX: &str = "tool error: ";
    const MARK: &str = "…";
    let Some((line, more_lines)) = first_line(text) else {
        return out.put(TOOL_ERROR_MESSAGE.as_bytes());
    };
    let room = out
        .limit()
        .saturating_sub(out.len())
        .saturating_sub(PREFIX.len())
        .min(TOOL_ERROR_TEXT_BYTES);
    let fits = line.len() <= room;
    let cut = if fits {
        line.len()
    } else {
        let mut end = room.saturating_sub(MARK.len());
        while end > 0 && !line.is_char_boundary(end) {
            end -= 1;
        }
        end
    };
    out.put(PREFIX.as_bytes())?;
    out.put(line.get(..cut).unwrap_or("").as_bytes())?;
    if !fits || more_lines {
        // The mark fits: room was kept for it when cut; after a whole line it may not.
        let _ = out.put(MARK.as_bytes());
    }
    Ok(())
}

/// A text's first line and whether more text follows it, whitespace (`char::is_whitespace`,
/// as `str::trim` reads it) trimmed from both; `None` when the text is all whitespace. Lines
/// end at CR or LF.
fn first_line(text: &str) -> Option<(&str, bool)> {
    if cfg!(feature = "std") {
        first_line_by_trims(text)
    } else {
        first_line_by_scan(text)
    }
}

/// [`first_line`] by `str`'s trims (the host's: its searches are the fast ones).
fn first_line_by_trims(text: &str) -> Option<(&str, bool)> {
    let trimmed = text.trim_start();
    let whole = trimmed.trim_end();
    if whole.is_empty() {
        return None;
    }
    // The first line: up to the first CR or LF (ASCII, so a byte search finds it).
    let first_end = trimmed
        .bytes()
        .position(|b| b == b'\n' || b == b'\r')
        .unwrap_or(trimmed.len());
    let line = trimmed.get(..first_end).unwrap_or("").trim_end();
    Some((line, line.len() < whole.len()))
}

/// [`first_line`] in one pass over the characters (the edge's: one decoding loop, not three
/// inlined trims; a property test holds it equal to [`first_line_by_trims`]).
fn first_line_by_scan(text: &str) -> Option<(&str, bool)> {
    // Where the first non-whitespace character starts, where the last one ends, and where the
    // last one before the first line's end ends.
    let (mut start, mut end, mut line_end) = (None, 0, 0);
    let mut first = true;
    for (i, c) in text.char_indices() {
        if crate::buf::is_white(c) {
            // A CR or LF before any text is leading whitespace, not a line's end.
            if start.is_some() && (c == '\n' || c == '\r') {
                first = false;
            }
            continue;
        }
        start.get_or_insert(i);
        end = i + c.len_utf8();
        if first {
            line_end = end;
        }
    }
    let line = text.get(start?..line_end).unwrap_or("");
    Some((line, line_end < end))
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
    use crate::buf::SliceBuf;
    use crate::wire::json::{JsonLimits, Value};
    use proptest::prelude::*;

    #[test]
    fn the_four_shapes() {
        let a = ToolResult::answered("22/tcp open", 12, Some(b"{}"));
        assert!(a.ok() && !a.is_error() && a.error().is_none());
        assert_eq!(a.attempt(), AttemptOutcome::Answered);
        assert_eq!(a.kind(), Kind::Answered);
        assert_eq!(a.ledger_record(), LedgerRecord::answered(11));
        assert_eq!(a.timeline_event("kali", "nmap"), None);

        let t = ToolResult::tool_error("nikto: not found", "tool error: nikto: not found", 5, None);
        assert!(!t.ok() && t.is_error());
        assert_eq!(t.error(), Some("tool error: nikto: not found"));
        assert_eq!(t.text, "nikto: not found");
        assert_eq!(t.attempt(), AttemptOutcome::ToolError);
        assert_eq!(t.ledger_record(), LedgerRecord::answered(16));
        assert_eq!(
            t.timeline_event("kali", "nikto"),
            Some(TimelineEvent::ToolError {
                slot: "kali",
                tool: "nikto",
                error: "tool error: nikto: not found"
            })
        );

        let r = ToolResult::refused("JSON-RPC error -32601: Unknown tool", -32601, true, 3, None);
        assert!(!r.ok() && !r.is_error());
        assert_eq!(r.attempt(), AttemptOutcome::Refused { unknown_tool: true });
        assert_eq!(
            r.kind(),
            Kind::Refused {
                code: -32601,
                unknown_tool: true
            }
        );
        assert_eq!(r.ledger_record(), LedgerRecord::answered(0));
        assert!(r.timeline_event("kali", "x").is_some());

        let u = ToolResult::unreachable(TIMED_OUT_MESSAGE, Cause::TimedOut, 300_000);
        assert!(!u.ok() && !u.is_error());
        assert_eq!(u.error(), Some("tool call timed out"));
        assert_eq!(u.kind(), Kind::Unreachable(Cause::TimedOut));
        assert_eq!(u.attempt(), AttemptOutcome::Unreachable);
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
    fn an_outcome_keeps_its_view_whatever_holds_its_text() {
        let outcomes: [Outcome<&str>; 4] = [
            Outcome::Answered,
            Outcome::ToolError {
                error: "tool error: x",
            },
            Outcome::Refused {
                code: -32602,
                unknown_tool: false,
                error: "JSON-RPC error -32602: bad",
            },
            Outcome::Unreachable {
                cause: Cause::HttpStatus(503),
                error: "HTTP 503",
            },
        ];
        for o in outcomes {
            let owned = o.map(std::string::String::from);
            assert_eq!(
                (owned.ok(), owned.is_error(), owned.kind()),
                (o.ok(), o.is_error(), o.kind())
            );
            assert_eq!(owned.error().map(|e| e.as_str()), o.error().copied());
            assert_eq!(o.ok(), o.error().is_none());
            assert_eq!(
                owned.map(|e| e.len()).error(),
                o.error().map(|e| e.len()).as_ref()
            );
        }
    }

    fn tool_error_of(text: &str, cap: usize) -> std::string::String {
        let mut storage = std::vec![0u8; cap];
        let mut b = SliceBuf::new(&mut storage);
        write_tool_error(text, &mut b).unwrap();
        std::string::String::from_utf8(b.bytes().to_vec()).unwrap()
    }

    #[test]
    fn a_tool_error_carries_the_tools_own_words() {
        assert_eq!(
            tool_error_of("nmap: host down", 4096),
            "tool error: nmap: host down"
        );
        assert_eq!(
            tool_error_of("\n  disk full\n", 4096),
            "tool error: disk full"
        );
        // More lines: the first, marked as cut.
        assert_eq!(
            tool_error_of("nmap: host down\nretrying 3 more times", 4096),
            "tool error: nmap: host down…"
        );
        assert_eq!(tool_error_of("", 4096), TOOL_ERROR_MESSAGE);
        assert_eq!(tool_error_of(" \n ", 4096), TOOL_ERROR_MESSAGE);
        // A long line: 1 KiB of it, cut at a character boundary, marked.
        let long = "é".repeat(2000);
        let e = tool_error_of(&long, 4096);
        assert!(e.starts_with("tool error: é"));
        assert!(e.ends_with('…'));
        assert!(e.len() <= "tool error: ".len() + TOOL_ERROR_TEXT_BYTES);
        // A small error buffer (the edge's): what fits, still marked.
        let e = tool_error_of(&long, 64);
        assert!(e.len() <= 64 && e.ends_with('…'), "{e}");
    }

    proptest! {
        /// The edge's one-pass first line is the host's trims' (whitespace of every kind,
        /// CR and LF anywhere).
        #[test]
        fn first_line_by_scan_is_by_trims(
            chars in proptest::collection::vec(
                proptest::sample::select(&[
                    ' ', '\n', '\r', '\t', '\u{a0}', '\u{2028}', '\u{3000}', 'a', 'é', '€', '😀',
                ][..]),
                0..24,
            )
        ) {
            let text: std::string::String = chars.into_iter().collect();
            prop_assert_eq!(first_line_by_scan(&text), first_line_by_trims(&text));
        }
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
