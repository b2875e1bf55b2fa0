//! The `mcp` subcommands for the rest of the protocol: `resources`, `read`, `prompts`,
//! `prompt` and `ping`, and what `call --raw` adds to a result.
//!
//! Owns: the arguments after ENDPOINT (or `--manifest FILE --slot NAME`), the JSON each command
//! prints, and its exit status (0 answered, 1 the server failed or refused, 2 bad input). It
//! does not build the run or scrub output: the binary hands in the slot and its printers.

use serde_json::{Value, json};
use verifi_mcp_host::{SlotHandle, ToolResult};

use crate::common::{UsageError, add_pairs, parse_args};

/// Which of the protocol subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoCmd {
    /// `mcp resources ENDPOINT`: `{"resources": […], "resourceTemplates": […]}`.
    Resources,
    /// `mcp read ENDPOINT URI`: the `resources/read` result, `{"contents": […]}`.
    Read,
    /// `mcp prompts ENDPOINT`: `{"prompts": […]}`.
    Prompts,
    /// `mcp prompt ENDPOINT NAME [JSON_ARGS | key=value…]`: the `prompts/get` result.
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
                Err(e) if e.code == Some(METHOD_NOT_FOUND) => {
                    err("mcp: this server offers no resources (it does not know resources/list)");
                    return Ok(1);
                }
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
                Err(e) if e.code == Some(METHOD_NOT_FOUND) => {
                    err("mcp: this server offers no prompts (it does not know prompts/list)");
                    1
                }
                Err(e) => failed(&e),
            })
        }
        ProtoCmd::Prompt => {
            let (name, prompt_args) = match args {
                [name] => (name, Value::Null),
                [name, a] if a.trim_start().starts_with('{') => (
                    name,
                    parse_args(Some(a)).map_err(|e| {
                        UsageError(e.0.replace("tool arguments", "prompt arguments"))
                    })?,
                ),
                [name, pairs @ ..] if !pairs.is_empty() => {
                    // Prompt arguments are strings: key=value as it is (key:=json still sends
                    // JSON, for a server that takes more).
                    let mut v = json!({});
                    add_pairs(&mut v, pairs).map_err(|e| {
                        UsageError(format!(
                            "{} (the form is ENDPOINT NAME [JSON_ARGS | key=value…])",
                            e.0
                        ))
                    })?;
                    (name, v)
                }
                _ => {
                    return Err(usage(
                        args,
                        "ENDPOINT NAME [JSON_ARGS | key=value…]",
                        "NAME",
                    ));
                }
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

/// What `cmd` printed as JSON (`v`), for a person (`--format text`, or stdout a terminal):
/// resources and templates one a line (`uri  name  mimeType  description`), a read's text
/// parts (a blob is named, not printed), prompts with their arguments (`review(topic,
/// depth?)  description`), a prompt's messages (`role: text`), a ping's time.
pub fn text_of(cmd: ProtoCmd, v: &Value) -> String {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let list = |k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let cols = |parts: Vec<String>| {
        parts
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(|p| one_line(&p))
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut lines = Vec::new();
    match cmd {
        ProtoCmd::Resources => {
            for r in list("resources") {
                lines.push(cols(vec![
                    s(&r, "uri"),
                    s(&r, "name"),
                    s(&r, "mimeType"),
                    s(&r, "description"),
                ]));
            }
            for t in list("resourceTemplates") {
                lines.push(cols(vec![
                    s(&t, "uriTemplate"),
                    s(&t, "name"),
                    "(template)".to_owned(),
                    s(&t, "description"),
                ]));
            }
            if lines.is_empty() {
                lines.push("(no resources)".to_owned());
            }
        }
        ProtoCmd::Read => {
            for c in list("contents") {
                match (c.get("text").and_then(Value::as_str), c.get("blob")) {
                    (Some(t), _) => lines.push(t.trim_end_matches('\n').to_owned()),
                    (None, Some(Value::String(b))) => lines.push(format!(
                        "[{}: binary, {} bytes of base64{}; --format json prints it]",
                        s(&c, "uri"),
                        b.len(),
                        match s(&c, "mimeType") {
                            m if m.is_empty() => String::new(),
                            m => format!(", {m}"),
                        }
                    )),
                    _ => {}
                }
            }
        }
        ProtoCmd::Prompts => {
            for p in list("prompts") {
                let args: Vec<String> = p
                    .get("arguments")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|x| {
                                let opt = if x["required"] == json!(true) {
                                    ""
                                } else {
                                    "?"
                                };
                                format!("{}{opt}", s(x, "name"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                lines.push(cols(vec![
                    format!("{}({})", s(&p, "name"), args.join(", ")),
                    s(&p, "description"),
                ]));
            }
            if lines.is_empty() {
                lines.push("(no prompts)".to_owned());
            }
        }
        ProtoCmd::Prompt => {
            for m in list("messages") {
                let c = &m["content"];
                let body = match c.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => format!("[{} content]", s(c, "type")),
                };
                lines.push(format!("{}: {body}", s(&m, "role")));
            }
        }
        ProtoCmd::Ping => {
            lines.push(format!("pong in {} ms", v["latencyMs"]));
        }
    }
    lines.join("\n")
}

/// `t` on one line (line breaks and tabs made spaces).
fn one_line(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
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
