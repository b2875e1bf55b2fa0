//! Owned results a harness keeps: [`ToolResult`] (serialized as
//! `{ok, text, isError, latencyMs, error?, raw?, kind}`, the field names every harness of this
//! project reads) and [`ListToolsError`].
//!
//! Owns: copying the core's borrowed result out of the call buffers, keeping its one outcome
//! (so `ok`, `isError`, `error` and `kind` cannot disagree). Decides nothing.

use std::fmt;

use serde::ser::SerializeMap;
use verifi_mcp_core::harness::result::{Kind, Outcome, ToolResult as CoreResult};
use verifi_mcp_core::wire::failure::Cause;

/// The outcome of one tool call. `call()` always gives one; it never panics or errors.
///
/// The outcome is one value: [`ok`](Self::ok), [`is_error`](Self::is_error),
/// [`error`](Self::error) and [`kind`](Self::kind) are read from it (the kind is the same
/// outcome as a type to branch on: tool error, refused with its JSON-RPC code, or unreachable
/// with its cause, without matching strings). It is the core's [`Outcome`] with its error
/// text owned, so an `ok` result has no error and a failed one always has one; these methods
/// delegate to it. `text`, `latency_ms` and `raw` are plain fields.
///
/// Serialized as `{"ok", "text", "isError", "latencyMs", "error"?, "raw"?, "kind"}`.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolResult {
    outcome: Outcome<String>,
    /// Flattened, redacted text of the response.
    pub text: String,
    /// Wall-clock of this call in ms, for the run timeline.
    pub latency_ms: u64,
    /// The raw (redacted) JSON-RPC reply, when there was one.
    pub raw: Option<String>,
}

/// The same fields as the JSON, in its order (`ok`, `text`, `is_error`, `latency_ms`,
/// `error`, `raw`, `kind`), each derived from the one outcome.
impl fmt::Debug for ToolResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResult")
            .field("ok", &self.ok())
            .field("text", &self.text)
            .field("is_error", &self.is_error())
            .field("latency_ms", &self.latency_ms)
            .field("error", &self.error())
            .field("raw", &self.raw)
            .field("kind", &self.kind())
            .finish()
    }
}

impl serde::Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let error = self.error();
        let len = 5 + usize::from(error.is_some()) + usize::from(self.raw.is_some());
        let mut m = s.serialize_map(Some(len))?;
        m.serialize_entry("ok", &self.ok())?;
        m.serialize_entry("text", &self.text)?;
        m.serialize_entry("isError", &self.is_error())?;
        m.serialize_entry("latencyMs", &self.latency_ms)?;
        if let Some(error) = error {
            m.serialize_entry("error", error)?;
        }
        if let Some(raw) = &self.raw {
            m.serialize_entry("raw", raw)?;
        }
        m.serialize_entry("kind", &KindJson(self.kind()))?;
        m.end()
    }
}

/// A [`Kind`] as JSON: `{"type": "answered" | "toolError" | "refused" | "unreachable",
/// "code"?, "cause"?, "status"?}`.
struct KindJson(Kind);

impl serde::Serialize for KindJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self.0 {
            Kind::Answered => m.serialize_entry("type", "answered")?,
            Kind::ToolError => m.serialize_entry("type", "toolError")?,
            Kind::Refused { code, .. } => {
                m.serialize_entry("type", "refused")?;
                m.serialize_entry("code", &code)?;
            }
            Kind::Unreachable(cause) => {
                m.serialize_entry("type", "unreachable")?;
                m.serialize_entry("cause", cause.as_str())?;
                if let Cause::HttpStatus(status) = cause {
                    m.serialize_entry("status", &status)?;
                }
            }
        }
        m.end()
    }
}

/// What a `-32042` refusal's error line says before the URLs a person must open.
const MUST_OPEN: &str = "(URL elicitation required: a person must open ";

impl ToolResult {
    /// The tool ran and answered. False: it refused, errored, or was unreachable.
    pub fn ok(&self) -> bool {
        self.outcome.ok()
    }

    /// True when the SERVER reported a tool-level error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.outcome.is_error()
    }

    /// What went wrong, exactly when [`ok`](Self::ok) is false (a tool error carries the
    /// tool's own first line).
    pub fn error(&self) -> Option<&str> {
        self.outcome.error().map(String::as_str)
    }

    /// What the call came to, as a type.
    pub fn kind(&self) -> Kind {
        self.outcome.kind()
    }

    /// The URLs a person must open before the call can succeed, when the server refused it
    /// with `-32042` (URL elicitation required; its `error` names them too); empty otherwise.
    pub fn elicitation_urls(&self) -> Vec<&str> {
        let Outcome::Refused {
            code: -32042,
            error,
            ..
        } = &self.outcome
        else {
            return Vec::new();
        };
        let Some(rest) = error
            .rfind(MUST_OPEN)
            .map(|i| &error[i + MUST_OPEN.len()..])
        else {
            return Vec::new();
        };
        let rest = rest.strip_suffix(')').unwrap_or(rest);
        rest.split(", ").filter(|u| !u.is_empty()).collect()
    }

    /// An owned copy of the core's result (borrowed from the call's buffers).
    pub fn from_core(r: &CoreResult<'_>) -> Self {
        ToolResult {
            outcome: r.outcome.map(str::to_owned),
            text: r.text.to_owned(),
            latency_ms: r.latency_ms,
            raw: r.raw.map(|b| String::from_utf8_lossy(b).into_owned()),
        }
    }

    /// [`from_core`](Self::from_core) with an empty `text`, for a caller that moves the text
    /// buffer in instead of copying it.
    pub(crate) fn from_core_without_text(r: &CoreResult<'_>) -> Self {
        ToolResult::from_core(&CoreResult { text: "", ..*r })
    }

    /// An `ok: false` result for something that never became a call (e.g. a caller's own
    /// input line that is not JSON): unreachable, cause `local`. Not metered: a call that
    /// fails before sending goes through the slot, which meters it.
    pub fn local_failure(error: impl Into<String>) -> Self {
        ToolResult {
            outcome: Outcome::Unreachable {
                cause: Cause::Local,
                error: error.into(),
            },
            text: String::new(),
            latency_ms: 0,
            raw: None,
        }
    }

    /// The result of a call that was not made because the server's tools could not be
    /// listed first: the list's kind and message, no text, latency 0. `list_tools()` only
    /// fails refused or unreachable; any other kind (a hand-built error) reads as
    /// unreachable, cause `local`. Not metered (the list was).
    pub fn not_called(e: &ListToolsError) -> Self {
        let error = e.message.clone();
        let outcome = match e.kind {
            Kind::Refused { code, unknown_tool } => Outcome::Refused {
                code,
                unknown_tool,
                error,
            },
            Kind::Unreachable(cause) => Outcome::Unreachable { cause, error },
            Kind::Answered | Kind::ToolError => Outcome::Unreachable {
                cause: Cause::Local,
                error,
            },
        };
        ToolResult {
            outcome,
            text: String::new(),
            latency_ms: 0,
            raw: None,
        }
    }

    /// Rewrites the error of a failed result with `f` (e.g. in a command line's words), its
    /// kind kept; an answered result has no error and stays as it is.
    pub fn reword(&mut self, f: impl FnOnce(&str) -> String) {
        let outcome = std::mem::replace(&mut self.outcome, Outcome::Answered);
        self.outcome = outcome.map(|error| f(&error));
    }

    /// An answered call whose output failed a check of the host's (its `outputSchema`):
    /// it becomes a tool-level error (`ok: false, isError: true`) saying `error`; `text` and
    /// `raw` stay. Any other result is left as it is.
    pub(crate) fn fail_check(&mut self, error: String) {
        if self.ok() {
            self.outcome = Outcome::ToolError { error };
        }
    }

    /// For `?`-style code: `Ok(self)` when the tool ran and answered, else a [`CallError`]
    /// with the same kind and error. `call()` itself never fails; this is the caller's choice.
    pub fn into_result(self) -> Result<ToolResult, CallError> {
        let kind = self.kind();
        match self.outcome {
            Outcome::Answered => Ok(self),
            Outcome::ToolError { error }
            | Outcome::Refused { error, .. }
            | Outcome::Unreachable { error, .. } => Err(CallError {
                kind,
                message: error,
                text: self.text,
            }),
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
            kind: Kind::Unreachable(Cause::Local),
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
    fn serializes_with_the_harness_field_names() {
        let r = ToolResult::from_core(&CoreResult::tool_error("t", "e", 12, None));
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
    fn every_kind_serializes_in_one_form_with_its_fields_derived() {
        let cases = [
            (
                CoreResult::answered("22/tcp open", 7, Some(b"{\"id\":1}")),
                r#"{"ok":true,"text":"22/tcp open","isError":false,"latencyMs":7,"raw":"{\"id\":1}","kind":{"type":"answered"}}"#,
            ),
            (
                CoreResult::tool_error("no such host", "tool error: no such host", 5, None),
                r#"{"ok":false,"text":"no such host","isError":true,"latencyMs":5,"error":"tool error: no such host","kind":{"type":"toolError"}}"#,
            ),
            (
                CoreResult::refused("JSON-RPC error -32602: bad", -32602, false, 3, Some(b"{}")),
                r#"{"ok":false,"text":"","isError":false,"latencyMs":3,"error":"JSON-RPC error -32602: bad","raw":"{}","kind":{"type":"refused","code":-32602}}"#,
            ),
            (
                CoreResult::unreachable("HTTP 503 Service Unavailable", Cause::HttpStatus(503), 9),
                r#"{"ok":false,"text":"","isError":false,"latencyMs":9,"error":"HTTP 503 Service Unavailable","kind":{"type":"unreachable","cause":"httpStatus","status":503}}"#,
            ),
            (
                CoreResult::unreachable("tool call timed out", Cause::TimedOut, 30000),
                r#"{"ok":false,"text":"","isError":false,"latencyMs":30000,"error":"tool call timed out","kind":{"type":"unreachable","cause":"timedOut"}}"#,
            ),
        ];
        for (core, json) in cases {
            let r = ToolResult::from_core(&core);
            assert_eq!(serde_json::to_string(&r).unwrap(), json);
            assert_eq!(
                (r.ok(), r.is_error(), r.error(), r.kind()),
                (core.ok(), core.is_error(), core.error(), core.kind())
            );
        }
        let local = ToolResult::local_failure("line 3: not JSON");
        assert_eq!(
            serde_json::to_string(&local).unwrap(),
            r#"{"ok":false,"text":"","isError":false,"latencyMs":0,"error":"line 3: not JSON","kind":{"type":"unreachable","cause":"local"}}"#
        );
    }

    #[test]
    fn kinds_serialize_for_branching_and_into_result_gives_the_error() {
        let r = ToolResult::from_core(&CoreResult::unreachable(
            "HTTP 503 Service Unavailable",
            Cause::HttpStatus(503),
            1,
        ));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["kind"],
            serde_json::json!({"type": "unreachable", "cause": "httpStatus", "status": 503})
        );
        let e = r.into_result().unwrap_err();
        assert_eq!(e.kind, Kind::Unreachable(Cause::HttpStatus(503)));
        assert_eq!(e.to_string(), "HTTP 503 Service Unavailable");
    }

    #[test]
    fn rewording_and_failing_a_check_keep_the_outcome_whole() {
        let mut a = ToolResult::from_core(&CoreResult::answered("x", 1, None));
        a.reword(|e| format!("never: {e}"));
        assert_eq!((a.ok(), a.error()), (true, None));
        a.fail_check("output does not match".into());
        assert_eq!(
            (a.ok(), a.is_error(), a.error(), a.kind(), a.text.as_str()),
            (
                false,
                true,
                Some("output does not match"),
                Kind::ToolError,
                "x"
            )
        );
        a.reword(|e| format!("{e}!"));
        assert_eq!(a.error(), Some("output does not match!"));
        a.fail_check("again".into());
        assert_eq!(
            a.error(),
            Some("output does not match!"),
            "only an answered call"
        );

        let listed = ListToolsError {
            message: "no server".into(),
            kind: Kind::Unreachable(Cause::Connect),
        };
        let r = ToolResult::not_called(&listed);
        assert_eq!(
            (r.ok(), r.error(), r.kind()),
            (false, Some("no server"), Kind::Unreachable(Cause::Connect))
        );
        let odd = ListToolsError {
            message: "m".into(),
            kind: Kind::Answered,
        };
        assert_eq!(
            ToolResult::not_called(&odd).kind(),
            Kind::Unreachable(Cause::Local)
        );
    }
}
