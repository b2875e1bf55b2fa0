//! Owned results a harness keeps: [`ToolResult`] (the seed's shape, serialized with its
//! camelCase names) and [`ListToolsError`].
//!
//! Owns: copying the core's borrowed result out of the call buffers. Decides nothing.

use std::fmt;

/// The outcome of one tool call. `call()` always gives one; it never panics or errors.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The tool ran and answered. False: it refused, errored, or was unreachable.
    pub ok: bool,
    /// Flattened, redacted text of the response.
    pub text: String,
    /// True when the SERVER reported a tool-level error (`isError: true`).
    pub is_error: bool,
    /// Wall-clock of this call in ms, for the run timeline.
    pub latency_ms: u64,
    /// What went wrong, when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The raw (redacted) JSON-RPC reply, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl ToolResult {
    /// An `ok: false` result that never reached the wire (e.g. arguments that do not
    /// serialize).
    pub fn local_failure(error: impl Into<String>) -> Self {
        ToolResult {
            ok: false,
            text: String::new(),
            is_error: false,
            latency_ms: 0,
            error: Some(error.into()),
            raw: None,
        }
    }
}

/// `list_tools()` failed (every server that was tried). Reads `tools/list failed: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListToolsError {
    /// The whole message, `tools/list failed: …` (the core's wording, redacted).
    pub message: String,
}

impl fmt::Display for ListToolsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ListToolsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_the_seeds_field_names() {
        let r = ToolResult {
            ok: false,
            text: "t".into(),
            is_error: true,
            latency_ms: 12,
            error: Some("e".into()),
            raw: None,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"ok":false,"text":"t","isError":true,"latencyMs":12,"error":"e"}"#
        );
        let e = ListToolsError {
            message: "tools/list failed: x".into(),
        };
        assert_eq!(e.to_string(), "tools/list failed: x");
    }
}
