//! The `mcp` subcommands for the rest of the protocol: `resources`, `read`, `prompts`,
//! `prompt` and `ping`, and what `call --raw` adds to a result.
//!
//! Owns: the arguments after ENDPOINT (or `--manifest FILE --slot NAME`), the JSON each command
//! prints, and its exit status (0 answered, 1 the server failed or refused, 2 bad input). It
//! does not build the run or scrub output: the binary hands in the slot and its printers.

use serde_json::{Value, json};
use verifi_mcp_host::{SlotHandle, ToolResult};

use crate::common::{UsageError, parse_args};

/// Which of the protocol subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoCmd {
    /// `mcp resources ENDPOINT`: `{"resources": […], "resourceTemplates": […]}`.
    Resources,
    /// `mcp read ENDPOINT URI`: the `resources/read` result, `{"contents": […]}`.
    Read,
    /// `mcp prompts ENDPOINT`: `{"prompts": […]}`.
    Prompts,
    /// `mcp prompt ENDPOINT NAME [JSON_ARGS]`: the `prompts/get` result.
    Prompt,
    /// `mcp ping ENDPOINT`: `{"ok": true, "latencyMs": N}`.
    Ping,
}

/// JSON-RPC "method not found": a server without resource templates may say so.
const METHOD_NOT_FOUND: i64 = -32601;

/// Runs `cmd` on `slot` with the arguments left after ENDPOINT. `out` prints one JSON line on
/// stdout, `err` one line on stderr (both scrub). The exit status: 0 answered, 1 not.
pub async fn run(
    cmd: ProtoCmd,
    slot: &SlotHandle,
    args: &[String],
    out: &dyn Fn(&Value),
    err: &dyn Fn(&str),
) -> Result<u8, UsageError> {
    let failed = |e: &dyn std::fmt::Display| {
        err(&format!("mcp: {e}"));
        1
    };
    match cmd {
        ProtoCmd::Resources => {
            no_more(args, 0, "ENDPOINT")?;
            let resources = match slot.list_resources().await {
                Ok(r) => r,
                Err(e) => return Ok(failed(&e)),
            };
            let templates = match slot.list_resource_templates().await {
                Ok(t) => t,
                // A server with resources but no templates may not know the method at all.
                Err(e) if e.code == Some(METHOD_NOT_FOUND) => Vec::new(),
                Err(e) => return Ok(failed(&e)),
            };
            out(&json!({ "resources": resources, "resourceTemplates": templates }));
            Ok(0)
        }
        ProtoCmd::Read => {
            let [uri] = args else {
                return Err(usage(args, "ENDPOINT URI", "URI"));
            };
            Ok(match slot.read_resource(uri).await {
                Ok(r) => {
                    out(&json!(r));
                    0
                }
                Err(e) => failed(&e),
            })
        }
        ProtoCmd::Prompts => {
            no_more(args, 0, "ENDPOINT")?;
            Ok(match slot.list_prompts().await {
                Ok(p) => {
                    out(&json!({ "prompts": p }));
                    0
                }
                Err(e) => failed(&e),
            })
        }
        ProtoCmd::Prompt => {
            let (name, prompt_args) = match args {
                [name] => (name, Value::Null),
                [name, a] => (name, parse_args(Some(a))?),
                _ => return Err(usage(args, "ENDPOINT NAME [JSON_ARGS]", "NAME")),
            };
            Ok(match slot.get_prompt(name, &prompt_args).await {
                Ok(r) => {
                    out(&json!(r));
                    0
                }
                Err(e) => failed(&e),
            })
        }
        ProtoCmd::Ping => {
            no_more(args, 0, "ENDPOINT")?;
            Ok(match slot.ping().await {
                Ok(ms) => {
                    out(&json!({ "ok": true, "latencyMs": ms }));
                    0
                }
                Err(e) => failed(&e),
            })
        }
    }
}

fn no_more(args: &[String], n: usize, form: &str) -> Result<(), UsageError> {
    match args.get(n) {
        None => Ok(()),
        Some(x) => Err(UsageError(format!(
            "unexpected argument {x:?}: the form is {form}"
        ))),
    }
}

fn usage(args: &[String], form: &str, first: &str) -> UsageError {
    if args.is_empty() {
        UsageError(format!("missing {first} (the form is {form})"))
    } else {
        UsageError(format!("too many arguments: the form is {form}"))
    }
}

/// `call --raw`: the result JSON the command line prints, plus `result`, the whole
/// `CallToolResult` (structured content, images, annotations), redacted; `null` when the
/// call had none (a refusal, an unreachable server).
pub fn with_call_result(mut printed: Value, r: &ToolResult) -> Value {
    if let Value::Object(m) = &mut printed {
        m.insert("result".to_owned(), r.call_result().unwrap_or(Value::Null));
    }
    printed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_forms_are_checked() {
        let e = usage(&[], "ENDPOINT URI", "URI");
        assert_eq!(e.to_string(), "missing URI (the form is ENDPOINT URI)");
        let e = usage(&["a".into(), "b".into()], "ENDPOINT URI", "URI");
        assert_eq!(
            e.to_string(),
            "too many arguments: the form is ENDPOINT URI"
        );
        assert!(no_more(&[], 0, "ENDPOINT").is_ok());
        assert_eq!(
            no_more(&["x".into()], 0, "ENDPOINT")
                .unwrap_err()
                .to_string(),
            "unexpected argument \"x\": the form is ENDPOINT"
        );
    }
}
