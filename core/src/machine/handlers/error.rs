//! The public error types of lists and requests, and what a request hands back.

use super::*;
use crate::buf::{I, S, Words, fmt_words, say};

/// Why `list_tools` gave no list. Its `Display` reads `tools/list failed: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// No server answered.
    Unreachable(Failure),
    /// The server answered tools/list with a JSON-RPC error.
    Refused {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message, redacted (a longer one is cut and ends in `…`).
        message: String<DETAIL_BYTES>,
    },
}

impl ListError {
    /// What happened, without the method: `JSON-RPC error -32002: …` or the failure.
    fn reason(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        match self {
            ListError::Unreachable(failure) => failure.words(f),
            ListError::Refused { code, message } => {
                say(f, &[S("JSON-RPC error "), I(*code), S(": "), S(message)])
            }
        }
    }
}

impl Words for ListError {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        f.put_str("tools/list failed: ")?;
        self.reason(f)
    }
}

impl core::fmt::Display for ListError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        fmt_words(self, f)
    }
}

/// Why a list or a request other than `tools/list` and `tools/call` gave no answer. Its
/// `Display` reads `<method> failed: …`, e.g.
/// `resources/read failed: JSON-RPC error -32002: Resource not found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodError {
    /// The JSON-RPC method, e.g. `resources/read`.
    pub method: &'static str,
    /// What happened (no server answered, or the server refused).
    pub error: ListError,
    /// The answer came in the 2026-07-28 era (error codes are read by era).
    pub modern: bool,
}

/// `resources/read`'s "not found" in the old era (and still sent by some 2026 servers).
pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
/// `resources/read`'s "not found" in the 2026 era (SEP-2164: JSON-RPC's invalid params).
pub const RESOURCE_NOT_FOUND_MODERN: i64 = -32602;

impl MethodError {
    /// A `resources/read` the server refused because the resource does not exist, read by
    /// era: `-32002` in the old era (where `-32602` is only "invalid params"); `-32602` in
    /// the 2026 era, which renumbered it (the old `-32002` is still taken).
    pub fn not_found(&self) -> bool {
        let ListError::Refused { code, .. } = self.error else {
            return false;
        };
        self.method == "resources/read"
            && (code == RESOURCE_NOT_FOUND_LEGACY
                || (self.modern && code == RESOURCE_NOT_FOUND_MODERN))
    }
}

impl Words for MethodError {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        say(f, &[S(self.method), S(" failed: ")])?;
        self.error.reason(f)
    }
}

impl core::fmt::Display for MethodError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        fmt_words(self, f)
    }
}

/// What `Driver::list` hands its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListItem<'i> {
    /// One item's whole JSON (a resource, template, prompt or tool object), redacted.
    Item(&'i [u8]),
    /// The server failed part-way and the list starts again on the fallback: forget the items
    /// handed over so far.
    Restart,
}

/// The answer to a request (`resources/read`, `prompts/get`, `ping`): the whole `result` object as the server sent it, redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered<'b> {
    /// The redacted JSON text of `result` (valid JSON: a secret is replaced inside strings).
    pub result: &'b [u8],
    /// Wall-clock of the request in ms, failover included.
    pub latency_ms: u64,
}

#[cfg(test)]
mod method_error_tests {
    use super::*;

    #[test]
    fn resource_not_found_is_read_by_era() {
        let refused = |method, code, modern| MethodError {
            method,
            error: ListError::Refused {
                code,
                message: truncated("x"),
            },
            modern,
        };
        assert!(refused("resources/read", -32002, false).not_found());
        assert!(refused("resources/read", -32002, true).not_found());
        assert!(refused("resources/read", -32602, true).not_found());
        assert!(!refused("resources/read", -32602, false).not_found());
        assert!(!refused("prompts/get", -32602, true).not_found());
    }

    #[test]
    fn list_and_method_errors_say_their_words() {
        use std::string::ToString;
        let refused = ListError::Refused {
            code: -32601,
            message: truncated("Method not found"),
        };
        assert_eq!(
            refused.to_string(),
            "tools/list failed: JSON-RPC error -32601: Method not found"
        );
        let e = MethodError {
            method: "resources/read",
            error: ListError::Unreachable(Failure::TimedOut),
            modern: false,
        };
        assert_eq!(e.to_string(), "resources/read failed: tool call timed out");
        let e = MethodError {
            method: "prompts/get",
            error: refused,
            modern: true,
        };
        assert_eq!(
            e.to_string(),
            "prompts/get failed: JSON-RPC error -32601: Method not found"
        );
    }
}
