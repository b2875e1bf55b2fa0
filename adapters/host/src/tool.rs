//! `Tool`: one entry of a server's `tools/list`, typed (name, title, description, input and
//! output schema, annotations), and [`SlotHandle::tools`], which lists them.
//!
//! Owns: reading a tool's JSON (as the core validated and redacted it) into owned fields.
//! Decides nothing about the protocol: the listing itself is the driver's.

use serde_json::Value;

use crate::result::ListToolsError;
use crate::slot::SlotHandle;

/// A tool as the server describes it in `tools/list`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Tool {
    /// Its name, what `call` takes.
    pub name: String,
    /// A display title, when the server gives one (`title`).
    pub title: Option<String>,
    /// What it does, in the server's words (`description`).
    pub description: Option<String>,
    /// The JSON Schema of its arguments (`inputSchema`; `{"type":"object"}` when missing).
    pub input_schema: Value,
    /// The JSON Schema of its structured output (`outputSchema`), when the server gives one.
    pub output_schema: Option<Value>,
    /// Hints such as `readOnlyHint` or `idempotentHint` (`annotations`), when given.
    pub annotations: Option<Value>,
}

impl Tool {
    /// The tool described by one `tools/list` entry; `None` when the entry has no string
    /// `name`.
    pub fn from_json(v: &Value) -> Option<Tool> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let present = |k: &str| v.get(k).filter(|x| !x.is_null()).cloned();
        Some(Tool {
            name: s("name")?,
            title: s("title"),
            description: s("description"),
            input_schema: present("inputSchema")
                .unwrap_or_else(|| serde_json::json!({ "type": "object" })),
            output_schema: present("outputSchema"),
            annotations: present("annotations"),
        })
    }

    /// Whether the server says the tool is safe to repeat (`annotations.idempotentHint`).
    pub fn idempotent(&self) -> bool {
        self.annotations
            .as_ref()
            .and_then(|a| a.get("idempotentHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

impl SlotHandle {
    /// The slot's tools, typed (every page). Fails over like
    /// [`list_tools`](Self::list_tools); an entry without a name is left out.
    pub async fn tools(&self) -> Result<Vec<Tool>, ListToolsError> {
        Ok(self
            .list_tools_described()
            .await?
            .iter()
            .filter_map(Tool::from_json)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tools_list_entry_becomes_a_tool() {
        let t = Tool::from_json(&json!({
            "name": "echo",
            "description": "Returns its text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"idempotentHint": true}
        }))
        .unwrap();
        assert_eq!(t.name, "echo");
        assert_eq!(t.description.as_deref(), Some("Returns its text"));
        assert_eq!(t.input_schema["properties"]["text"]["type"], "string");
        assert_eq!(t.output_schema, Some(json!({"type": "object"})));
        assert!(t.idempotent());
        let bare = Tool::from_json(&json!({"name": "x"})).unwrap();
        assert_eq!(bare.input_schema, json!({"type": "object"}));
        assert!(!bare.idempotent());
        assert_eq!(
            (bare.title, bare.description, bare.output_schema),
            (None, None, None)
        );
        assert!(Tool::from_json(&json!({"description": "no name"})).is_none());
    }
}
