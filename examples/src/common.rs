//! What the demo and the `mcp` command line share: building a one-slot manifest from command
//! line endpoints and headers, checking user input (URLs, headers, JSON arguments) into typed
//! errors, scrubbing everything printed of the run's secrets, and rendering the run records
//! (timeline events, ledger totals, tool results) for people and as JSON.

use serde_json::{Map, Value, json};
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::redact::redact;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_smol::{LedgerTotals, TimelineEntry, ToolResult, VecBuf};

/// The slot name the command line uses for an ENDPOINT given on the command line.
pub const CLI_SLOT: &str = "cli";

/// Bad input from the user: one clear line, exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // One line, whatever the message was.
        f.write_str(&self.0.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

impl std::error::Error for UsageError {}

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Checks an ENDPOINT argument for the manifest. Without `exact`, `arg` is a base URL (MCP is
/// at `/mcp` below it); with `exact`, it is the full MCP URL, and the context is built with
/// `Options::exact_mcp_urls` so it is used as given.
pub fn endpoint_base(arg: &str, exact: bool) -> Result<String, UsageError> {
    let parsed = if exact {
        Endpoint::parse_exact(arg)
    } else {
        Endpoint::parse_base(arg)
    };
    match parsed {
        Ok(_) => Ok(arg.to_owned()),
        Err(e) if exact => usage(format!("bad MCP URL {arg:?}: {e}")),
        Err(e) => usage(format!("bad endpoint URL {arg:?}: {e}")),
    }
}

/// Parses `--header 'Name: value'`.
pub fn parse_header(h: &str) -> Result<(String, String), UsageError> {
    let Some((name, value)) = h.split_once(':') else {
        return usage("--header must look like 'Name: value'");
    };
    let name = name.trim();
    let value = value.trim();
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return usage(format!("--header name {name:?} is not an HTTP header name"));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return usage(format!("--header {name}: the value has a line break"));
    }
    let lower = name.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "host"
            | "content-length"
            | "transfer-encoding"
            | "connection"
            | "accept"
            | "content-type"
            | "mcp-session-id"
            | "mcp-protocol-version"
    ) {
        return usage(format!(
            "--header {name}: the client sets this header itself"
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Parses JSON tool arguments: an object, or nothing.
pub fn parse_args(text: Option<&str>) -> Result<Value, UsageError> {
    let Some(text) = text else {
        return Ok(Value::Object(Map::new()));
    };
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => usage(format!(
            "tool arguments must be a JSON object, got {}",
            kind_of(&other)
        )),
        Err(e) => usage(format!("tool arguments are not JSON: {e}")),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A one-slot manifest: `slotFills[slot] = {endpoint, fallback?, headers?}`.
pub fn one_slot_manifest(
    slot: &str,
    primary: &str,
    fallback: Option<&str>,
    headers: &[(String, String)],
) -> Value {
    let mut fill = Map::new();
    fill.insert("endpoint".into(), json!(primary));
    if let Some(f) = fallback {
        fill.insert("fallback".into(), json!(f));
    }
    if !headers.is_empty() {
        let h: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        fill.insert("headers".into(), Value::Object(h));
    }
    json!({ "slotFills": { slot: Value::Object(fill) } })
}

/// Adds `--fallback` and `--header`s to `slot` of a loaded manifest (moving a flat
/// `endpoints[slot]` into `slotFills`). A slot the manifest does not fill is left alone, so the
/// context reports it as not filled.
pub fn amend_manifest(
    manifest: &mut Value,
    slot: &str,
    fallback: Option<&str>,
    headers: &[(String, String)],
) {
    if fallback.is_none() && headers.is_empty() {
        return;
    }
    let Some(root) = manifest.as_object_mut() else {
        return;
    };
    let existing = root
        .get("slotFills")
        .and_then(|f| f.get(slot))
        .cloned()
        .or_else(|| root.get("endpoints").and_then(|f| f.get(slot)).cloned());
    let mut fill = match existing {
        Some(Value::String(e)) => {
            let mut m = Map::new();
            m.insert("endpoint".into(), json!(e));
            m
        }
        Some(Value::Object(m)) => m,
        _ => return,
    };
    if let Some(f) = fallback {
        fill.insert("fallback".into(), json!(f));
    }
    if !headers.is_empty() {
        let mut h = match fill.remove("headers") {
            Some(Value::Object(h)) => h,
            _ => Map::new(),
        };
        for (k, v) in headers {
            h.insert(k.clone(), json!(v));
        }
        fill.insert("headers".into(), Value::Object(h));
    }
    let fills = root
        .entry("slotFills")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(f) = fills.as_object_mut() {
        f.insert(slot.to_owned(), Value::Object(fill));
    }
}

/// The run's secrets as the adapter collects them (the environment read as bytes: a value
/// that is not UTF-8 is no panic, and still a secret), plus extra values (header values).
pub fn run_secrets(extra: impl IntoIterator<Item = String>) -> Vec<Vec<u8>> {
    let mut s = verifi_mcp_smol::env_secrets();
    s.extend(
        extra
            .into_iter()
            .filter(|v| v.len() >= 4)
            .map(String::into_bytes),
    );
    s
}

/// `text` with every secret replaced by `[REDACTED]` (the core's redactor).
pub fn scrub(text: &str, secrets: &[Vec<u8>]) -> String {
    if secrets.is_empty() {
        return text.to_owned();
    }
    let mut out = VecBuf::with_limit(text.len().saturating_mul(2).saturating_add(1024));
    match redact(text.as_bytes(), secrets, &mut out) {
        Ok(()) => String::from_utf8_lossy(out.bytes()).into_owned(),
        // Cannot happen with this limit; never print unscrubbed text.
        Err(_) => "[REDACTED: output too large to scrub]".to_owned(),
    }
}

/// A tool result as the command line prints it: `ok`, `text`, `isError`, `latencyMs`, `error`
/// (null when none).
pub fn result_json(r: &ToolResult) -> Value {
    json!({
        "ok": r.ok,
        "text": r.text,
        "isError": r.is_error,
        "latencyMs": r.latency_ms,
        "error": r.error,
        // The outcome as a type (`{"type": "unreachable", "cause": "timedOut"}` …).
        "kind": serde_json::to_value(r).ok().and_then(|v| v.get("kind").cloned()),
    })
}

/// The ledger totals as JSON (`toolCalls`, `evidenceBytes`).
pub fn ledger_json(l: &LedgerTotals) -> Value {
    serde_json::to_value(l).unwrap_or(Value::Null)
}

/// One timeline event for a person: `kind  slot/tool  detail`.
pub fn event_line(e: &TimelineEntry) -> String {
    let v = e.value();
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let detail = match e.kind.as_str() {
        "tool_error" => s("error"),
        "mcp.fallback_used" => format!(
            "primary {} is down; served by {}",
            s("primary"),
            s("fallback")
        ),
        "mcp.no_healthy_tool" => "no server could serve this tool".to_owned(),
        _ => e.json.clone(),
    };
    format!("{:<20} {}/{}  {}", e.kind, s("slot"), s("tool"), detail)
}

/// The timeline as a JSON array of its events.
pub fn timeline_json(t: &[TimelineEntry]) -> Value {
    Value::Array(t.iter().map(TimelineEntry::value).collect())
}

/// The `q` quantile (0..=1) of sorted `v` (nearest rank), 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_args_are_checked() {
        assert_eq!(
            parse_header("Authorization: Bearer abc").unwrap(),
            ("Authorization".into(), "Bearer abc".into())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: x").is_err());
        assert!(parse_header("Host: x").is_err());
        assert!(parse_args(Some("{\"a\":1}")).is_ok());
        assert!(parse_args(Some("[1]")).unwrap_err().0.contains("an array"));
        assert!(parse_args(Some("{")).is_err());
        assert_eq!(parse_args(None).unwrap(), json!({}));
    }

    #[test]
    fn exact_urls_map_to_base_endpoints() {
        assert_eq!(
            endpoint_base("http://h:1/rpc", true).unwrap(),
            "http://h:1/rpc"
        );
        assert!(endpoint_base("ftp://x", false).is_err());
        assert!(endpoint_base("not a url", true).is_err());
    }

    #[test]
    fn amending_a_flat_endpoint_moves_it_into_slot_fills() {
        let mut m = json!({ "endpoints": { "kali": "http://a" } });
        amend_manifest(
            &mut m,
            "kali",
            Some("http://b"),
            &[("X-K".into(), "v".into())],
        );
        assert_eq!(
            m["slotFills"]["kali"],
            json!({ "endpoint": "http://a", "fallback": "http://b", "headers": { "X-K": "v" } })
        );
        let mut m2 = json!({ "endpoints": { "kali": "http://a" } });
        amend_manifest(&mut m2, "burp", Some("http://b"), &[]);
        assert!(m2.get("slotFills").is_none());
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
