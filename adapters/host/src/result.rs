//! Owned results a harness keeps: [`ToolResult`] (the seed's shape, serialized with its
//! camelCase names) and [`ListToolsError`].
//!
//! Owns: copying the core's borrowed result out of the call buffers. Decides nothing.

use std::fmt;

use serde::ser::SerializeMap;
use verifi_mcp_core::harness::result::{Kind, ToolResult as CoreResult};

/// The outcome of one tool call. `call()` always gives one; it never panics or errors.
///
/// The seed's fields (`ok`, `text`, `isError`, `latencyMs`, `error`, `raw`) plus `kind`, the
/// same outcome as a type to branch on (tool error, refused with its JSON-RPC code, or
/// unreachable with its cause) without matching strings.
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
    /// What went wrong, when `ok` is false (a tool error carries the tool's own first line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The raw (redacted) JSON-RPC reply, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// What the call came to, as a type: serialized as
    /// `{"type": "answered" | "toolError" | "refused" | "unreachable", "code"?, "cause"?,
    /// "status"?}`.
    #[serde(serialize_with = "kind_json")]
    pub kind: Kind,
}

fn kind_json<S: serde::Serializer>(kind: &Kind, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    match kind {
        Kind::Answered => m.serialize_entry("type", "answered")?,
        Kind::ToolError => m.serialize_entry("type", "toolError")?,
        Kind::Refused { code, .. } => {
            m.serialize_entry("type", "refused")?;
            m.serialize_entry("code", code)?;
        }
        Kind::Unreachable(cause) => {
            m.serialize_entry("type", "unreachable")?;
            m.serialize_entry("cause", cause.as_str())?;
            if let verifi_mcp_core::wire::failure::Cause::HttpStatus(status) = cause {
                m.serialize_entry("status", status)?;
            }
        }
    }
    m.end()
}

/// What a `-32042` refusal's error line says before the URLs a person must open.
const MUST_OPEN: &str = "(URL elicitation required: a person must open ";

impl ToolResult {
    /// The URLs a person must open before the call can succeed, when the server refused it
    /// with `-32042` (URL elicitation required; its `error` names them too); empty otherwise.
    pub fn elicitation_urls(&self) -> Vec<&str> {
        if !matches!(self.kind, Kind::Refused { code: -32042, .. }) {
            return Vec::new();
        }
        let Some(rest) = self
            .error
            .as_deref()
            .and_then(|e| e.rfind(MUST_OPEN).map(|i| &e[i + MUST_OPEN.len()..]))
        else {
            return Vec::new();
        };
        let rest = rest.strip_suffix(')').unwrap_or(rest);
        rest.split(", ").filter(|u| !u.is_empty()).collect()
    }

    /// An owned copy of the core's result (borrowed from the call's buffers).
    pub fn from_core(r: &CoreResult<'_>) -> Self {
        ToolResult {
            ok: r.ok(),
            text: r.text.to_owned(),
            is_error: r.is_error(),
            latency_ms: r.latency_ms,
            error: r.error().map(str::to_owned),
            raw: r.raw.map(|b| String::from_utf8_lossy(b).into_owned()),
            kind: r.kind(),
        }
    }

    /// [`from_core`](Self::from_core) with an empty `text`, for a caller that moves the text
    /// buffer in instead of copying it.
    pub(crate) fn from_core_without_text(r: &CoreResult<'_>) -> Self {
        ToolResult {
            text: String::new(),
            ..ToolResult::from_core(&CoreResult { text: "", ..*r })
        }
    }

    /// An `ok: false` result for something that never became a call (e.g. a caller's own
    /// input line that is not JSON). Not metered: a call that fails before sending goes
    /// through the slot, which meters it.
    pub fn local_failure(error: impl Into<String>) -> Self {
        ToolResult {
            ok: false,
            text: String::new(),
            is_error: false,
            latency_ms: 0,
            error: Some(error.into()),
            raw: None,
            kind: Kind::Unreachable(verifi_mcp_core::wire::failure::Cause::Local),
        }
    }

    /// For `?`-style code: `Ok(self)` when the tool ran and answered, else a [`CallError`]
    /// with the same kind and error. `call()` itself never fails; this is the caller's choice.
    pub fn into_result(self) -> Result<ToolResult, CallError> {
        if self.ok {
            Ok(self)
        } else {
            Err(CallError {
                kind: self.kind,
                message: self.error.unwrap_or_default(),
                text: self.text,
            })
        }
    }
}

/// A call that did not answer, as an error ([`ToolResult::into_result`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What the call came to.
    pub kind: Kind,
    /// The result's `error`.
    pub message: String,
    /// The result's `text` (a tool error's whole output).
    pub text: String,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// `list_tools()` failed (every server that was tried). Reads `tools/list failed: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListToolsError {
    /// The whole message, `tools/list failed: …` (the core's wording, redacted).
    pub message: String,
    /// Why, as a type: `Refused { code, .. }` (a JSON-RPC error) or `Unreachable(cause)`.
    pub kind: Kind,
}

impl ListToolsError {
    /// A failure before anything was sent (an endpoint, a route, an authorization step).
    pub(crate) fn local(message: String) -> Self {
        ListToolsError {
            message,
            kind: Kind::Unreachable(verifi_mcp_core::wire::failure::Cause::Local),
        }
    }

    /// The kind of a driver's list failure.
    pub(crate) fn kind_of(e: &verifi_mcp_core::drive::ListError) -> Kind {
        match e {
            verifi_mcp_core::drive::ListError::Refused { code, .. } => Kind::Refused {
                code: *code,
                unknown_tool: false,
            },
            verifi_mcp_core::drive::ListError::Unreachable(f) => Kind::Unreachable(f.cause()),
        }
    }
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
            kind: Kind::ToolError,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"ok":false,"text":"t","isError":true,"latencyMs":12,"error":"e","kind":{"type":"toolError"}}"#
        );
        let e = ListToolsError {
            message: "tools/list failed: x".into(),
            kind: Kind::Refused {
                code: -32601,
                unknown_tool: false,
            },
        };
        assert_eq!(e.to_string(), "tools/list failed: x");
    }

    #[test]
    fn kinds_serialize_for_branching_and_into_result_gives_the_error() {
        use verifi_mcp_core::wire::failure::Cause;
        let r = ToolResult {
            ok: false,
            text: String::new(),
            is_error: false,
            latency_ms: 1,
            error: Some("HTTP 503 Service Unavailable".into()),
            raw: None,
            kind: Kind::Unreachable(Cause::HttpStatus(503)),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["kind"],
            serde_json::json!({"type": "unreachable", "cause": "httpStatus", "status": 503})
        );
        let e = r.into_result().unwrap_err();
        assert_eq!(e.kind, Kind::Unreachable(Cause::HttpStatus(503)));
        assert_eq!(e.to_string(), "HTTP 503 Service Unavailable");
    }
}
