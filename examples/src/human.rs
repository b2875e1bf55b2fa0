//! What the `mcp` command line prints for a person: a tool as a one-line signature
//! (`echo(text: string, count?: integer)`), and the words a failure is told in (what happened,
//! and the flag that changes it), instead of the library's terse wording.
//!
//! Owns: only wording. The JSON a command prints keeps its typed `kind`, so a script never
//! has to read these words.

use serde_json::Value;
use verifi_mcp_core::wire::failure::Cause;
use verifi_mcp_host::Kind;

/// Longest description shown on a tool's line (the rest is cut with `…`).
const DESCRIPTION_CHARS: usize = 100;

/// A tool's argument signature from its `inputSchema`: `name(a: string, b?: integer)`, an
/// argument not in `required` marked `?`, a type list written `integer|null`.
pub fn signature(tool: &Value) -> String {
    let name = tool["name"].as_str().unwrap_or("?");
    let schema = &tool["inputSchema"];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Vec::new();
    if let Some(props) = schema["properties"].as_object() {
        // Required arguments first, each group in the schema's order.
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort_by_key(|k| !required.contains(&k.as_str()));
        for k in keys {
            let p = &props[k.as_str()];
            let ty = match &p["type"] {
                Value::String(t) => t.clone(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ if p.get("enum").is_some() => "enum".to_owned(),
                _ => "any".to_owned(),
            };
            let opt = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            args.push(format!("{k}{opt}: {ty}"));
        }
    }
    format!("{name}({})", args.join(", "))
}

/// A tool on one line for a person: its signature, then the first line of its description.
pub fn tool_line(tool: &Value) -> String {
    let sig = signature(tool);
    let d = tool["description"]
        .as_str()
        .unwrap_or("")
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if d.is_empty() {
        return sig;
    }
    let mut d: String = d.chars().take(DESCRIPTION_CHARS).collect();
    if tool["description"]
        .as_str()
        .unwrap_or("")
        .trim()
        .chars()
        .count()
        > d.chars().count()
    {
        d.push('…');
    }
    format!("{sig}\n    {d}")
}

/// What a failure's words need to know of the run.
#[derive(Debug, Clone, Default)]
pub struct Setting {
    /// The per-call timeout in ms (`--timeout-ms`).
    pub timeout_ms: u64,
    /// The server tried last: `host:port` of the fallback if there is one, else the primary's.
    pub last_server: String,
    /// The era setting (`auto`, `modern`, `legacy`): which handshake a stall is blamed on.
    pub era: String,
    /// Whether a handshake with the server ended (a protocol version is known).
    pub handshake_done: bool,
}

/// `error` (the library's words for a failure of `kind`) told as what happened, naming the
/// flag that changes it: a timeout with `--timeout-ms` (or the handshake it stalled in), a
/// 413 as a request the server found too large, a refused connection with the server's
/// address, a cap with its flag, an exited stdio server with its status.
pub fn failure(error: &str, kind: &Kind, s: &Setting) -> String {
    match kind {
        Kind::Unreachable(Cause::TimedOut) if !s.handshake_done => format!(
            "the server did not answer the handshake ({}) within {} ms (--timeout-ms)",
            handshake(&s.era),
            s.timeout_ms
        ),
        Kind::Unreachable(Cause::TimedOut) => {
            let task = error
                .find("(task ")
                .map(|i| format!(" {}", &error[i..]))
                .unwrap_or_default();
            format!(
                "the call timed out after {} ms (--timeout-ms){task}",
                s.timeout_ms
            )
        }
        Kind::Unreachable(Cause::Stalled) => {
            let base = error.replace("(the idle timeout)", "(--idle-timeout-ms)");
            if s.handshake_done {
                base
            } else {
                format!("{base}, in the handshake ({})", handshake(&s.era))
            }
        }
        Kind::Unreachable(Cause::HttpStatus(413)) => {
            let said = error
                .split_once("413")
                .map(|(_, r)| {
                    r.trim_start_matches(" Content Too Large")
                        .trim_start_matches(": ")
                })
                .filter(|r| !r.is_empty())
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            format!("the server refused the request as too large (413){said}")
        }
        // A proxy's refusal says so already (its own words name the proxy and its status).
        Kind::Unreachable(Cause::Connect)
            if error.to_ascii_lowercase().contains("refused") && !error.contains("proxy") =>
        {
            format!("connection refused by {}", s.last_server)
        }
        _ if error.contains("the server process exited") => stdio_exit(error),
        Kind::Unreachable(Cause::Local) if error.contains("request buffer too small") => {
            let needs = number_after(error, "needs at least ");
            let cap = number_after(error, "cap of ");
            format!(
                "the request is {} bytes, over its cap of {} bytes (raise it with \
                 --max-request-bytes)",
                needs.unwrap_or_else(|| "too many".into()),
                cap.unwrap_or_else(|| "?".into())
            )
        }
        _ if error.contains("raise the event limit or the reply buffer") => error.replace(
            "raise the event limit or the reply buffer",
            "raise it with --max-reply-bytes",
        ),
        Kind::Unreachable(Cause::TooLarge) if !error.contains("--max-") => {
            format!("{error} (raise it with --max-reply-bytes)")
        }
        _ => error.to_owned(),
    }
}

/// [`failure`] for a failure of a method (`METHOD failed: …`, e.g. a list's) whose kind is
/// known. The `METHOD failed: ` prefix is kept, except when the handshake stalled (the method
/// was never sent).
pub fn method_failure(error: &str, kind: &Kind, s: &Setting) -> String {
    match error.split_once(" failed: ") {
        Some((method, rest)) if !method.contains(' ') => {
            let w = failure(rest, kind, s);
            // `failure`'s words for it: a handshake stall names no method.
            if matches!(kind, Kind::Unreachable(Cause::TimedOut)) && !s.handshake_done {
                w
            } else {
                format!("{method} failed: {w}")
            }
        }
        _ => failure(error, kind, s),
    }
}

/// [`method_failure`] for an error known only by its text (a request's, a timeline
/// event's: they carry no kind): the kind is read from the library's words.
pub fn failure_text(error: &str, s: &Setting) -> String {
    let kind = if error.contains("tool call timed out") {
        Kind::Unreachable(Cause::TimedOut)
    } else if error.contains("server stalled") {
        Kind::Unreachable(Cause::Stalled)
    } else if error.contains("HTTP 413") {
        Kind::Unreachable(Cause::HttpStatus(413))
    } else if error.contains("could not connect") {
        Kind::Unreachable(Cause::Connect)
    } else if error.contains("request buffer too small") {
        Kind::Unreachable(Cause::Local)
    } else {
        Kind::Answered
    };
    method_failure(error, &kind, s)
}

/// Which handshake the era setting sends.
fn handshake(era: &str) -> &'static str {
    match era {
        "legacy" => "initialize",
        "modern" => "the server/discover probe",
        _ => "the server/discover probe, then initialize",
    }
}

/// `the server process exited (status N)` and what its stderr said, from the library's
/// `… (stdio:CMD: the server process exited (exit status: N); its stderr ends: …)`.
fn stdio_exit(error: &str) -> String {
    let Some(i) = error.find("the server process exited") else {
        return error.to_owned();
    };
    let note = &error[i..];
    // The note closes the parenthesis the library opened before `stdio:`.
    let note = match error[..i].rfind("(stdio:") {
        Some(_) => note.strip_suffix(')').unwrap_or(note),
        None => note,
    };
    note.replace("(exit status: ", "(status ")
}

/// The number after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!n.is_empty()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signatures_mark_optional_arguments_and_type_lists() {
        let t = json!({"name": "echo", "description": "Says it back\nmore", "inputSchema": {
            "type": "object",
            "properties": {"count": {"type": ["integer", "null"]}, "text": {"type": "string"}},
            "required": ["text"]
        }});
        assert_eq!(signature(&t), "echo(text: string, count?: integer|null)");
        assert_eq!(
            tool_line(&t),
            "echo(text: string, count?: integer|null)\n    Says it back…"
        );
        assert_eq!(signature(&json!({"name": "x"})), "x()");
    }

    #[test]
    fn failures_say_what_happened_and_the_flag() {
        let s = Setting {
            timeout_ms: 500,
            last_server: "127.0.0.1:9".into(),
            era: "auto".into(),
            handshake_done: true,
        };
        let u = |c| Kind::Unreachable(c);
        assert_eq!(
            failure("tool call timed out", &u(Cause::TimedOut), &s),
            "the call timed out after 500 ms (--timeout-ms)"
        );
        assert_eq!(
            failure(
                "could not connect: connection refused (x)",
                &u(Cause::Connect),
                &s
            ),
            "connection refused by 127.0.0.1:9"
        );
        assert_eq!(
            failure(
                "HTTP 413 Content Too Large: Payload Too Large: body exceeds 4 bytes",
                &u(Cause::HttpStatus(413)),
                &s
            ),
            "the server refused the request as too large (413): Payload Too Large: body exceeds 4 bytes"
        );
        assert_eq!(
            failure(
                "reply has no body; expected a JSON-RPC response (stdio:sh -c x: the server \
                 process exited (exit status: 3); its stderr ends: boom)",
                &u(Cause::Malformed),
                &s
            ),
            "the server process exited (status 3); its stderr ends: boom"
        );
        assert!(
            failure(
                "request buffer too small: needs at least 20 bytes, over its cap of 16 by 4",
                &u(Cause::Local),
                &s
            )
            .contains("over its cap of 16 bytes (raise it with --max-request-bytes)")
        );
        assert_eq!(
            failure_text("tools/list failed: tool call timed out", &s),
            "tools/list failed: the call timed out after 500 ms (--timeout-ms)"
        );
        let legacy = Setting {
            handshake_done: false,
            era: "legacy".into(),
            ..s
        };
        assert_eq!(
            failure("tool call timed out", &u(Cause::TimedOut), &legacy),
            "the server did not answer the handshake (initialize) within 500 ms (--timeout-ms)"
        );
        assert_eq!(
            failure_text("tools/list failed: tool call timed out", &legacy),
            "the server did not answer the handshake (initialize) within 500 ms (--timeout-ms)"
        );
    }
}
