//! The rest of the protocol as owned, typed results: resources, resource templates, prompts,
//! `ping`; a tool call's whole `CallToolResult`; and the structured-output check.
//!
//! Owns: turning the core's redacted JSON into typed values (every string redacted once more
//! after unescaping, so a secret the server wrote with JSON escapes is caught too), the
//! [`ProtocolError`] of these methods, and checking `structuredContent` against a tool's
//! `outputSchema` (JSON Schema 2020-12; `$ref`s to the network or files are never fetched).
//! Does not own: how the requests are sent (the core's driver, through [`crate::SlotHandle`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result::ToolResult;
use crate::run::{redact_string, redact_value};

/// A resource a server offers (`resources/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its URI (what [`read_resource`](crate::SlotHandle::read_resource) takes).
    pub uri: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// A display title, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Annotations (audience, priority …), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// A resource template (`resources/templates/list`): a URI template such as `file:///{path}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// A display title, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of what it names, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Annotations, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// One item of a `resources/read` result: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The URI it is the contents of.
    pub uri: String,
    /// Its MIME type, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text (redacted), for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The base64 bytes, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// A `resources/read` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// The contents (a resource may come in several parts).
    pub contents: Vec<ResourceContents>,
}

impl ReadResourceResult {
    /// Every text part, joined with `\n` (blobs are left out).
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .contents
            .iter()
            .filter_map(|c| c.text.as_deref())
            .collect();
        parts.join("\n")
    }
}

/// An argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    #[serde(default)]
    pub required: bool,
}

/// A prompt a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// Its name (what [`get_prompt`](crate::SlotHandle::get_prompt) takes).
    pub name: String,
    /// A display title, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// One content block (`{"type":"text","text":…}`, an image, a resource …), as sent.
    pub content: Value,
}

/// A `prompts/get` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    /// What the prompt is, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its messages.
    pub messages: Vec<PromptMessage>,
}

/// A list or request of these methods failed. Reads `<method> failed: …`, redacted, e.g.
/// `resources/read failed: JSON-RPC error -32002: Resource not found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// The JSON-RPC method, e.g. `prompts/get`.
    pub method: &'static str,
    /// The JSON-RPC error code when the server refused; `None` when no server answered or
    /// the answer could not be read.
    pub code: Option<i64>,
    /// The whole message, `<method> failed: …`.
    pub message: String,
    /// A `resources/read` refused because the resource does not exist, read by the server's
    /// era (`-32002` in the old era; `-32602`, or the old `-32002`, in the 2026 era).
    pub not_found: bool,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProtocolError {}

impl ProtocolError {
    pub(crate) fn from_core(e: &verifi_mcp_core::drive::MethodError, secrets: &[Vec<u8>]) -> Self {
        let code = match &e.error {
            verifi_mcp_core::drive::ListError::Refused { code, .. } => Some(*code),
            verifi_mcp_core::drive::ListError::Unreachable(_) => None,
        };
        ProtocolError {
            method: e.method,
            code,
            message: redact_string(&e.to_string(), secrets),
            not_found: e.not_found(),
        }
    }

    pub(crate) fn local(method: &'static str, why: &str, secrets: &[Vec<u8>]) -> Self {
        ProtocolError {
            method,
            code: None,
            message: redact_string(&format!("{method} failed: {why}"), secrets),
            not_found: false,
        }
    }
}

/// Collects the items of a list through [`drive::ListItem`](verifi_mcp_core::drive::ListItem):
/// a restart on the fallback forgets what came before, and the items kept are capped in total
/// bytes (past the cap the rest is dropped and [`finish`](Self::finish) says so).
pub(crate) struct ListCollector {
    pub(crate) items: Vec<Vec<u8>>,
    bytes: usize,
    cap: usize,
    over: bool,
}

impl ListCollector {
    pub(crate) fn new(cap: usize) -> Self {
        ListCollector {
            items: Vec::new(),
            bytes: 0,
            cap,
            over: false,
        }
    }

    pub(crate) fn take(&mut self, item: verifi_mcp_core::drive::ListItem<'_>) {
        match item {
            verifi_mcp_core::drive::ListItem::Item(json) => {
                self.bytes = self.bytes.saturating_add(json.len());
                if self.bytes > self.cap {
                    self.over = true;
                } else {
                    self.items.push(json.to_vec());
                }
            }
            verifi_mcp_core::drive::ListItem::Restart => {
                self.items.clear();
                self.bytes = 0;
                self.over = false;
            }
        }
    }

    /// The items, or why the list is too large to hold.
    pub(crate) fn finish(self) -> Result<Vec<Vec<u8>>, String> {
        if self.over {
            Err(format!(
                "the list is larger than its cap of {} bytes (the reply cap)",
                self.cap
            ))
        } else {
            Ok(self.items)
        }
    }
}

/// Parses the core's redacted JSON into `T`, redacting every string once more.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    method: &'static str,
    json: &[u8],
    secrets: &[Vec<u8>],
) -> Result<T, ProtocolError> {
    let v: Value = serde_json::from_slice(json).map_err(|e| {
        ProtocolError::local(method, &format!("the result is not JSON: {e}"), secrets)
    })?;
    serde_json::from_value(redact_value(v, secrets)).map_err(|e| {
        ProtocolError::local(
            method,
            &format!("the result does not have the MCP shape: {e}"),
            secrets,
        )
    })
}

impl ToolResult {
    /// The whole `CallToolResult` (`content` with images and annotations, `structuredContent`,
    /// `isError`, `_meta` …), redacted, when the reply was kept: with `Options::keep_raw`, or
    /// for a tool whose `outputSchema` was checked. `None` otherwise (and for a call that had
    /// no result: a refusal, an unreachable server).
    pub fn call_result(&self) -> Option<Value> {
        let raw: Value = serde_json::from_str(self.raw.as_deref()?).ok()?;
        let result = match raw {
            Value::Object(mut m) => m.remove("result")?,
            // A batch reply: the response that has a result (the core took only ours).
            Value::Array(items) => items.into_iter().find_map(|i| match i {
                Value::Object(mut m) if m.contains_key("id") => m.remove("result"),
                _ => None,
            })?,
            _ => return None,
        };
        result.is_object().then_some(result)
    }
}

/// A tool's declared `outputSchema`, compiled (JSON Schema 2020-12 unless its `$schema` names
/// another draft).
pub(crate) enum OutputSchema {
    /// Ready to check results against.
    Ready(Box<jsonschema::Validator>),
    /// The schema cannot be used (an unresolvable `$ref`, an invalid schema): every answered
    /// call of the tool fails with this, rather than going unchecked.
    Unusable(String),
}

impl OutputSchema {
    /// Compiles `schema`. Nothing is ever fetched: the crate is built without its network and
    /// file resolvers, so an external `$ref` makes the schema [`Unusable`](Self::Unusable).
    pub(crate) fn compile(schema: &Value) -> Self {
        // No `$schema`: 2020-12, the crate's default and MCP's; a `$schema` naming another
        // known draft (zod writes draft-07) is followed.
        let built = jsonschema::options().build(schema);
        match built {
            Ok(v) => OutputSchema::Ready(Box::new(v)),
            Err(e) => {
                OutputSchema::Unusable(format!("the tool's outputSchema cannot be used: {e}"))
            }
        }
    }

    /// Checks a call's result object: `structuredContent` must be there and match. The
    /// mismatch, if any, names the failing path (a JSON pointer, `/` for the whole value).
    pub(crate) fn check(&self, call_result: Option<&Value>) -> Result<(), String> {
        let validator = match self {
            OutputSchema::Ready(v) => v,
            OutputSchema::Unusable(why) => return Err(why.clone()),
        };
        let Some(structured) = call_result.and_then(|r| r.get("structuredContent")) else {
            return Err(
                "structured output check failed: the tool declares an outputSchema but sent no \
                 structuredContent"
                    .to_owned(),
            );
        };
        let errors: Vec<String> = validator
            .iter_errors(structured)
            .take(3)
            .map(|e| {
                let path = e.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                format!("at {path}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "structured output check failed: structuredContent does not match the tool's \
                 outputSchema {}",
                errors.join("; ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mismatch_names_its_path_and_a_match_passes() {
        let schema = OutputSchema::compile(&json!({
            "type": "object",
            "properties": { "open": { "type": "array", "items": { "type": "integer" } } },
            "required": ["open"]
        }));
        let ok = json!({ "content": [], "structuredContent": { "open": [22, 80] } });
        assert_eq!(schema.check(Some(&ok)), Ok(()));
        let bad = json!({ "content": [], "structuredContent": { "open": [22, "http"] } });
        let err = schema.check(Some(&bad)).unwrap_err();
        assert!(err.contains("at /open/1: "), "{err}");
        assert!(err.contains("\"http\" is not of type \"integer\""), "{err}");
        let missing = json!({ "content": [] });
        assert!(
            schema
                .check(Some(&missing))
                .unwrap_err()
                .contains("sent no structuredContent")
        );
        let whole = json!({ "structuredContent": 5 });
        assert!(schema.check(Some(&whole)).unwrap_err().contains("at /: "));
    }

    #[test]
    fn an_external_ref_is_never_fetched_and_the_schema_is_unusable() {
        let schema = OutputSchema::compile(&json!({ "$ref": "http://127.0.0.1:9/schema.json" }));
        let err = schema
            .check(Some(&json!({ "structuredContent": {} })))
            .unwrap_err();
        assert!(
            err.starts_with("the tool's outputSchema cannot be used: "),
            "{err}"
        );
    }

    #[test]
    fn typed_results_are_redacted_after_unescaping() {
        let secrets = vec![b"hunter22".to_vec()];
        // `\u0068` is `h`: the JSON text has no secret, the string has.
        let json = br#"{"contents":[{"uri":"file:///a","text":"pw=\u0068unter22"}]}"#;
        let r: ReadResourceResult = typed("resources/read", json, &secrets).unwrap();
        assert_eq!(r.text(), "pw=[REDACTED]");
        let err = typed::<ReadResourceResult>("resources/read", br#"{"contents":5}"#, &secrets)
            .unwrap_err();
        assert!(
            err.message
                .starts_with("resources/read failed: the result does not have the MCP shape"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_list_collector_restarts_and_caps_its_bytes() {
        use verifi_mcp_core::drive::ListItem;
        let mut c = ListCollector::new(10);
        c.take(ListItem::Item(b"{\"a\":1}"));
        c.take(ListItem::Restart);
        c.take(ListItem::Item(b"{\"b\":2}"));
        assert_eq!(c.finish().unwrap(), vec![b"{\"b\":2}".to_vec()]);
        let mut c = ListCollector::new(10);
        c.take(ListItem::Item(b"{\"a\":1}"));
        c.take(ListItem::Item(b"{\"b\":2}"));
        assert_eq!(c.items.len(), 1, "past the cap nothing more is kept");
        assert_eq!(
            c.finish().unwrap_err(),
            "the list is larger than its cap of 10 bytes (the reply cap)"
        );
    }

    #[test]
    fn call_result_is_the_result_object_of_the_raw_reply() {
        let mut r = ToolResult::from_core(&verifi_mcp_core::harness::result::ToolResult::answered(
            "",
            0,
            Some(
                br#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"a":1}}}"#,
            ),
        ));
        assert_eq!(
            r.call_result(),
            Some(json!({"content": [], "structuredContent": {"a": 1}}))
        );
        r.raw = Some(
            r#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":3,"result":{"content":[]}}]"#
                .into(),
        );
        assert_eq!(r.call_result(), Some(json!({"content": []})));
        r.raw = None;
        assert_eq!(r.call_result(), None);
    }
}
