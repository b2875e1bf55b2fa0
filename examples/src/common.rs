//! What the demo and the `mcp` command line share: building a one-slot manifest from command
//! line endpoints and headers, checking user input (URLs, headers, JSON arguments) into typed
//! errors, scrubbing everything printed of the run's secrets, and rendering the run records
//! (timeline events, ledger totals, tool results) for people and as JSON.

use serde_json::{Map, Value, json};
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::redact::redact;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_host::{LedgerTotals, TimelineEntry, ToolResult, VecBuf, mask_url, url_secrets};

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
        Err(e) if exact => usage(format!("bad MCP URL {:?}: {e}", mask_url(arg))),
        Err(e) => usage(format!("bad endpoint URL {:?}: {e}", mask_url(arg))),
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

/// The URL the client posts to for an ENDPOINT argument: the base with `/mcp` appended, the URL
/// as given when it already ends in `/mcp`, or (with `exact`) always as given. For messages
/// ("HTTP 404 from …").
pub fn mcp_url(arg: &str, exact: bool) -> Result<String, UsageError> {
    endpoint_base(arg, exact)?;
    let parsed = if exact {
        Endpoint::parse_exact(arg)
    } else {
        Endpoint::parse_base(arg)
    };
    let Ok(e) = parsed else {
        return usage(format!("bad endpoint URL {arg:?}"));
    };
    let mut target = VecBuf::with_limit(arg.len() + 16);
    if e.write_target(&mut target).is_err() {
        return usage(format!("bad endpoint URL {arg:?}"));
    }
    // Scheme and authority as written (the URL parsed, so both are there).
    let (scheme, rest) = arg.split_once("://").unwrap_or(("http", arg));
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    Ok(format!(
        "{}://{authority}{}",
        scheme.to_ascii_lowercase(),
        String::from_utf8_lossy(target.bytes())
    ))
}

/// Largest `--args @FILE` or `--args -` accepted.
pub const MAX_ARGS_BYTES: u64 = 64 * 1024 * 1024;

/// Reads tool arguments from `--args SRC`: `-` is stdin, `@PATH` a file, anything else JSON
/// text. Whatever the source, the result is a JSON object or a typed error naming the source.
pub fn args_from_source(src: &str, stdin: impl std::io::Read) -> Result<Value, UsageError> {
    use std::io::Read as _;
    let (what, text) = if src == "-" {
        let mut b = Vec::new();
        stdin
            .take(MAX_ARGS_BYTES + 1)
            .read_to_end(&mut b)
            .map_err(|e| UsageError(format!("--args -: cannot read stdin: {e}")))?;
        ("stdin".to_owned(), b)
    } else if let Some(path) = src.strip_prefix('@') {
        let f = std::fs::File::open(path)
            .map_err(|e| UsageError(format!("--args @{path}: cannot read the file: {e}")))?;
        let mut b = Vec::new();
        f.take(MAX_ARGS_BYTES + 1)
            .read_to_end(&mut b)
            .map_err(|e| UsageError(format!("--args @{path}: cannot read the file: {e}")))?;
        (format!("file {path}"), b)
    } else {
        return parse_args(Some(src));
    };
    if text.len() as u64 > MAX_ARGS_BYTES {
        return usage(format!(
            "tool arguments from {what} are larger than {MAX_ARGS_BYTES} bytes"
        ));
    }
    let text = String::from_utf8(text)
        .map_err(|_| UsageError(format!("tool arguments from {what} are not UTF-8")))?;
    parse_args(Some(&text)).map_err(|e| UsageError(format!("{what}: {}", e.0)))
}

/// Adds httpie-style pairs to `args` (a JSON object): `key=value` sets a string, `key:=json`
/// any JSON value (`count:=3`, `flags:='["-v"]'`). A later pair wins over an earlier one and
/// over `--args`.
pub fn add_pairs(args: &mut Value, pairs: &[String]) -> Result<(), UsageError> {
    let Some(obj) = args.as_object_mut() else {
        return usage("tool arguments must be a JSON object");
    };
    for p in pairs {
        let Some(eq) = p.find('=') else {
            return usage(format!(
                "argument {p:?} is not key=value, key:=json or a JSON object"
            ));
        };
        let (key, raw) = (&p[..eq], &p[eq + 1..]);
        let (key, value) = match key.strip_suffix(':') {
            Some(k) => {
                let v = serde_json::from_str::<Value>(raw)
                    .map_err(|e| UsageError(format!("{k}:= takes JSON, {raw:?} is not: {e}")))?;
                (k, v)
            }
            None => (key, Value::String(raw.to_owned())),
        };
        if key.is_empty() {
            return usage(format!("argument {p:?} has an empty key"));
        }
        obj.insert(key.to_owned(), value);
    }
    Ok(())
}

/// The keys whose value, after [`add_pairs`], came from a `key=value` pair (a string the
/// tool's schema may type); a later `key:=json` of the same key takes it off the list.
pub fn string_pair_keys(pairs: &[String]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in pairs {
        let Some((key, _)) = p.split_once('=') else {
            continue;
        };
        match key.strip_suffix(':') {
            Some(k) => keys.retain(|x| x != k),
            None if !keys.iter().any(|x| x == key) => keys.push(key.to_owned()),
            None => {}
        }
    }
    keys
}

/// The JSON types a schema property allows: its `type` (a string, or an array of them).
fn schema_types(prop: &Value) -> Vec<&str> {
    match prop.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Types the `key=value` pairs in `keys` as the tool's `inputSchema` says: a property whose
/// type is `integer`, `number` or `boolean` (alone, or with `null`, as `["integer","null"]`)
/// gets its string parsed as that type; a string that does not parse is a usage error naming
/// the key and the type. A property that also allows `string`, or has no type, keeps the
/// string; `null` is taken for the word `null` where the type allows it.
pub fn type_pairs(args: &mut Value, keys: &[String], schema: &Value) -> Result<(), UsageError> {
    let Some(obj) = args.as_object_mut() else {
        return Ok(());
    };
    for key in keys {
        let Some(prop) = schema.get("properties").and_then(|p| p.get(key)) else {
            continue;
        };
        let types = schema_types(prop);
        if types.contains(&"string") || types.is_empty() {
            continue;
        }
        let Some(Value::String(raw)) = obj.get(key) else {
            continue;
        };
        let t = raw.trim();
        let typed = if types.contains(&"null") && t == "null" {
            Some(Value::Null)
        } else if types.contains(&"integer") && !types.contains(&"number") {
            t.parse::<i64>()
                .map(Value::from)
                .or_else(|_| t.parse::<u64>().map(Value::from))
                .ok()
        } else if types.contains(&"number") {
            serde_json::from_str::<Value>(t)
                .ok()
                .filter(Value::is_number)
        } else if types.contains(&"boolean") {
            match t {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            }
        } else {
            // An object or array property: the pair stays a string (key:=json types it).
            continue;
        };
        let Some(v) = typed else {
            let want = types
                .iter()
                .filter(|t| **t != "null")
                .copied()
                .collect::<Vec<_>>()
                .join(" or ");
            return usage(format!(
                "argument {key}={raw:?}: the tool's schema says {key} is {}, and {raw:?} is \
                 not one (write {key}:=JSON to send it as JSON)",
                if types.contains(&"null") {
                    format!("{want} (or null)")
                } else {
                    want
                }
            ));
        };
        obj.insert(key.clone(), v);
    }
    Ok(())
}

/// A server from an `mcpServers` config file (the format MCP clients share).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigServer {
    /// Its full MCP URL (`url`, or `serverUrl`); empty for a local server (`command`).
    pub url: String,
    /// A local server spoken to over stdio: the manifest fill `{command, env, cwd}` made of
    /// the entry's `command`, `args`, `env` and `cwd`.
    pub stdio: Option<Value>,
    /// Its `headers`, in file order.
    pub headers: Vec<(String, String)>,
}

/// Finds `name` in the `mcpServers` JSON `text` (read from `file`): an entry with a `url`
/// (streamable HTTP) or a `command` (a local server over stdio, with `args`, `env`, `cwd`); an
/// older HTTP+SSE entry is refused with the reason, and a missing name lists the names there
/// are.
pub fn config_server(text: &str, file: &str, name: &str) -> Result<ConfigServer, UsageError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| UsageError(format!("config {file} is not JSON: {e}")))?;
    let servers = config_servers(&v, file)?;
    let Some(entry) = servers.get(name) else {
        let mut names: Vec<&str> = servers.keys().map(String::as_str).collect();
        names.sort_unstable();
        return usage(format!(
            "config {file} has no server {name:?}; it has: {}",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ));
    };
    let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
    if kind.eq_ignore_ascii_case("sse") {
        return usage(format!(
            "server {name:?} in {file} uses the older HTTP+SSE transport (\"type\": \"sse\"); mcp \
             speaks streamable HTTP and stdio"
        ));
    }
    let url = entry
        .get("url")
        .or_else(|| entry.get("serverUrl"))
        .and_then(Value::as_str);
    let Some(url) = url else {
        if let Some(command) = entry.get("command") {
            return stdio_entry(entry, command, file, name);
        }
        return usage(format!(
            "server {name:?} in {file} has no \"url\" (nor a \"command\")"
        ));
    };
    let mut headers = Vec::new();
    match entry.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                let Some(v) = v.as_str() else {
                    return usage(format!(
                        "server {name:?} in {file}: header {k:?} must be a string"
                    ));
                };
                headers.push(parse_header(&format!("{k}: {v}"))?);
            }
        }
        Some(_) => {
            return usage(format!(
                "server {name:?} in {file}: \"headers\" must be an object"
            ));
        }
    }
    Ok(ConfigServer {
        url: url.to_owned(),
        stdio: None,
        headers,
    })
}

fn config_servers<'a>(v: &'a Value, file: &str) -> Result<&'a Map<String, Value>, UsageError> {
    v.get("mcpServers")
        .or_else(|| v.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| UsageError(format!("config {file} has no \"mcpServers\" object")))
}

/// The one server of the `mcpServers` JSON `text` (for `--config` without `--server`); a file
/// with none, or with several, is a usage error listing the names there are.
pub fn only_config_server(text: &str, file: &str) -> Result<String, UsageError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| UsageError(format!("config {file} is not JSON: {e}")))?;
    let servers = config_servers(&v, file)?;
    let mut names: Vec<&str> = servers.keys().map(String::as_str).collect();
    match names.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => usage(format!("config {file} has no servers")),
        _ => {
            names.sort_unstable();
            usage(format!(
                "config {file} has {} servers; name one with --server: {}",
                names.len(),
                names.join(", ")
            ))
        }
    }
}

/// A `command` entry of an mcpServers file as a manifest fill: `command` (a string, or an
/// array) and `args` make the command line; `env` (strings) and `cwd` go as they are.
fn stdio_entry(
    entry: &Value,
    command: &Value,
    file: &str,
    name: &str,
) -> Result<ConfigServer, UsageError> {
    let strings = |v: &Value, what: &str| -> Result<Vec<Value>, UsageError> {
        match v {
            Value::String(s) => Ok(vec![json!(s)]),
            Value::Array(a) if a.iter().all(Value::is_string) => Ok(a.clone()),
            _ => usage(format!(
                "server {name:?} in {file}: \"{what}\" must be a string or an array of strings"
            )),
        }
    };
    let mut argv = strings(command, "command")?;
    if let Some(args) = entry.get("args").filter(|a| !a.is_null()) {
        argv.extend(strings(args, "args")?);
    }
    if argv
        .first()
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return usage(format!("server {name:?} in {file}: \"command\" is empty"));
    }
    let mut fill = Map::new();
    fill.insert("command".into(), Value::Array(argv));
    match entry.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(e)) if e.values().all(Value::is_string) => {
            fill.insert("env".into(), Value::Object(e.clone()));
        }
        Some(_) => {
            return usage(format!(
                "server {name:?} in {file}: \"env\" must be an object of strings"
            ));
        }
    }
    match entry.get("cwd") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) => {
            fill.insert("cwd".into(), json!(d));
        }
        Some(_) => {
            return usage(format!(
                "server {name:?} in {file}: \"cwd\" must be a string"
            ));
        }
    }
    Ok(ConfigServer {
        url: String::new(),
        stdio: Some(Value::Object(fill)),
        headers: Vec::new(),
    })
}

/// JSON for printing: pretty with ANSI colors on a terminal (`pretty`, `color`), compact
/// otherwise. The text is the same JSON either way, colors aside.
pub fn render_json(v: &Value, pretty: bool, color: bool) -> String {
    if !pretty {
        return v.to_string();
    }
    let mut out = String::new();
    write_pretty(v, 0, color, &mut out);
    out
}

fn write_pretty(v: &Value, depth: usize, color: bool, out: &mut String) {
    let paint = |out: &mut String, code: &str, text: &str| {
        if color {
            out.push_str("\x1b[");
            out.push_str(code);
            out.push('m');
            out.push_str(text);
            out.push_str("\x1b[0m");
        } else {
            out.push_str(text);
        }
    };
    let pad = |out: &mut String, d: usize| {
        for _ in 0..d {
            out.push_str("  ");
        }
    };
    match v {
        Value::Null => paint(out, "2", "null"),
        Value::Bool(b) => paint(out, "33", if *b { "true" } else { "false" }),
        Value::Number(n) => paint(out, "33", &n.to_string()),
        Value::String(_) => paint(out, "32", &v.to_string()),
        Value::Array(a) if a.is_empty() => out.push_str("[]"),
        Value::Object(o) if o.is_empty() => out.push_str("{}"),
        Value::Array(a) => {
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                pad(out, depth + 1);
                write_pretty(x, depth + 1, color, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(o) => {
            out.push_str("{\n");
            for (i, (k, x)) in o.iter().enumerate() {
                pad(out, depth + 1);
                paint(out, "34", &Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_pretty(x, depth + 1, color, out);
                out.push_str(if i + 1 < o.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
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
    let mut s = verifi_mcp_host::env_secrets();
    s.extend(
        extra
            .into_iter()
            .filter(|v| v.len() >= 4)
            .map(String::into_bytes),
    );
    // Their JSON-escaped forms too (a secret with a quote shows up escaped in JSON output).
    verifi_mcp_host::add_json_forms(&mut s);
    s
}

/// The secrets of every URL in a run manifest (endpoints and fallbacks, from the command
/// line, a config file or a manifest file): userinfo passwords and secret-looking query
/// values ([`url_secrets`]).
pub fn url_secrets_in(manifest: &Value) -> Vec<String> {
    match manifest {
        Value::String(s) if s.contains("://") => url_secrets(s),
        Value::Array(a) => a.iter().flat_map(url_secrets_in).collect(),
        Value::Object(m) => m.values().flat_map(url_secrets_in).collect(),
        _ => Vec::new(),
    }
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
        "ok": r.ok(),
        "text": r.text,
        "isError": r.is_error(),
        "latencyMs": r.latency_ms,
        "error": r.error(),
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

/// What a call's live status line shows: the latest progress (number and total, as the server
/// wrote them) and the latest status message (a task's `statusMessage` or a progress message).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallStatus {
    /// `progress` and `total` of the latest progress notification with a number.
    pub progress: Option<(String, Option<String>)>,
    /// The latest message (already redacted by the core).
    pub message: Option<String>,
}

/// Width of the status line's progress bar, in cells.
const BAR_CELLS: usize = 20;
/// Most characters of a status line (a longer one would wrap and could not be cleared).
pub const STATUS_LINE_CHARS: usize = 100;

impl CallStatus {
    /// Takes a progress update: a number updates the progress, a message the message (a
    /// task's status message comes with an empty `progress`).
    pub fn update(&mut self, progress: &str, total: Option<&str>, message: Option<&str>) {
        if !progress.is_empty() {
            self.progress = Some((progress.to_owned(), total.map(str::to_owned)));
        }
        if let Some(m) = message {
            self.message = Some(m.to_owned());
        }
    }

    /// The line: `LABEL 12 s [#########-----------] 9/20 message`; the bar only when the
    /// progress has a total (a number above 0), control characters of the message dropped,
    /// at most [`STATUS_LINE_CHARS`] characters.
    pub fn line(&self, label: &str, elapsed_s: u64) -> String {
        let mut line = format!("{label} {elapsed_s} s");
        if let Some((p, total)) = &self.progress {
            let ratio = total.as_deref().and_then(|t| {
                let (p, t) = (p.parse::<f64>().ok()?, t.parse::<f64>().ok()?);
                (t > 0.0 && p.is_finite() && t.is_finite()).then(|| (p / t).clamp(0.0, 1.0))
            });
            if let Some(r) = ratio {
                let filled = (r * BAR_CELLS as f64).round() as usize;
                line.push_str(&format!(
                    " [{}{}]",
                    "#".repeat(filled),
                    "-".repeat(BAR_CELLS - filled)
                ));
            }
            line.push(' ');
            line.push_str(p);
            if let Some(t) = total {
                line.push('/');
                line.push_str(t);
            }
        }
        if let Some(m) = &self.message {
            line.push(' ');
            line.extend(m.chars().map(|c| if c.is_control() { ' ' } else { c }));
        }
        match line.char_indices().nth(STATUS_LINE_CHARS - 1) {
            Some((at, _)) => {
                line.truncate(at);
                line.push('…');
                line
            }
            None => line,
        }
    }
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
    fn pairs_are_strings_and_colon_equals_is_json() {
        let mut a = json!({"keep": 1, "n": 0});
        add_pairs(
            &mut a,
            &[
                "text=hello world".into(),
                "n:=3".into(),
                "flags:=[\"-v\"]".into(),
                "eq=a=b".into(),
                "empty=".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            a,
            json!({"keep": 1, "n": 3, "text": "hello world", "flags": ["-v"], "eq": "a=b", "empty": ""})
        );
        assert!(add_pairs(&mut a, &["novalue".into()]).is_err());
        assert!(add_pairs(&mut a, &["=x".into()]).is_err());
        let e = add_pairs(&mut a, &["n:=nope".into()]).unwrap_err();
        assert!(e.0.contains("n:= takes JSON"), "{e}");
    }

    #[test]
    fn string_pairs_are_typed_by_the_schema() {
        let pairs: Vec<String> = ["n=3", "x=1", "x:=\"s\"", "b=false", "t=7"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let keys = string_pair_keys(&pairs);
        assert_eq!(keys, ["n", "b", "t"]);
        let mut a = json!({});
        add_pairs(&mut a, &pairs).unwrap();
        let schema = json!({"properties": {
            "n": {"type": ["integer", "null"]}, "x": {"type": "integer"},
            "b": {"type": "boolean"}, "t": {"type": ["string", "number"]}
        }});
        type_pairs(&mut a, &keys, &schema).unwrap();
        assert_eq!(a, json!({"n": 3, "x": "s", "b": false, "t": "7"}));
        let mut bad = json!({"n": "1.5"});
        let e = type_pairs(&mut bad, &["n".into()], &schema).unwrap_err();
        assert!(e.0.contains("n is integer (or null)"), "{e}");
    }

    #[test]
    fn args_come_from_text_stdin_or_a_file() {
        assert_eq!(
            args_from_source("{\"a\":1}", std::io::empty()).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            args_from_source("-", &b"{\"b\":2}"[..]).unwrap(),
            json!({"b": 2})
        );
        let e = args_from_source("-", &b"[1]"[..]).unwrap_err();
        assert!(e.0.starts_with("stdin: "), "{e}");
        let e = args_from_source("@/nonexistent/args.json", std::io::empty()).unwrap_err();
        assert!(e.0.contains("/nonexistent/args.json"), "{e}");
    }

    #[test]
    fn config_servers_need_a_url_or_a_command_and_list_the_names_there_are() {
        let cfg = r#"{"mcpServers": {
            "kali": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t0ken"}},
            "local": {"command": "npx", "args": ["-y", "some-server"], "env": {"K": "v"}, "cwd": "/tmp"},
            "bad_args": {"command": "npx", "args": [1]},
            "bare": {},
            "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
        }}"#;
        let s = config_server(cfg, "c.json", "kali").unwrap();
        assert_eq!(s.url, "http://127.0.0.1:9/mcp");
        assert_eq!(
            s.headers,
            vec![("Authorization".into(), "Bearer t0ken".into())]
        );
        let s = config_server(cfg, "c.json", "local").unwrap();
        assert_eq!(
            s.stdio,
            Some(
                json!({ "command": ["npx", "-y", "some-server"], "env": { "K": "v" }, "cwd": "/tmp" })
            )
        );
        let e = config_server(cfg, "c.json", "bad_args").unwrap_err();
        assert!(e.0.contains("\"args\" must be"), "{e}");
        let e = config_server(cfg, "c.json", "bare").unwrap_err();
        assert!(e.0.contains("no \"url\""), "{e}");
        let e = config_server(cfg, "c.json", "old").unwrap_err();
        assert!(e.0.contains("older HTTP+SSE transport"), "{e}");
        let e = config_server(cfg, "c.json", "nope").unwrap_err();
        assert!(e.0.contains("bad_args, bare, kali, local, old"), "{e}");
        assert!(config_server("{}", "c.json", "x").is_err());
        assert!(config_server("{", "c.json", "x").is_err());
    }

    #[test]
    fn mcp_urls_are_what_the_client_posts_to() {
        assert_eq!(mcp_url("http://h:1", false).unwrap(), "http://h:1/mcp");
        assert_eq!(mcp_url("http://h:1/mcp", false).unwrap(), "http://h:1/mcp");
        assert_eq!(
            mcp_url("http://h:1/api/", false).unwrap(),
            "http://h:1/api/mcp"
        );
        assert_eq!(mcp_url("http://h/rpc", true).unwrap(), "http://h/rpc");
        assert_eq!(mcp_url("HTTP://h?x=1", false).unwrap(), "http://h/mcp?x=1");
    }

    #[test]
    fn pretty_json_is_the_same_json() {
        let v = json!({"ok": true, "text": "a\"b", "n": [1, null], "o": {}});
        for color in [false, true] {
            let s = render_json(&v, true, color);
            let plain = if color {
                // Strip the color codes.
                let mut o = String::new();
                let mut it = s.chars();
                while let Some(c) = it.next() {
                    if c == '\x1b' {
                        for d in it.by_ref() {
                            if d == 'm' {
                                break;
                            }
                        }
                    } else {
                        o.push(c);
                    }
                }
                o
            } else {
                s.clone()
            };
            assert_eq!(serde_json::from_str::<Value>(&plain).unwrap(), v);
        }
        assert_eq!(render_json(&v, false, false), v.to_string());
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn the_status_line_shows_the_message_the_time_and_a_bar_only_with_a_total() {
        let mut st = CallStatus::default();
        assert_eq!(st.line("scan", 0), "scan 0 s");
        st.update("", None, Some("scanning 10.0.0.5"));
        assert_eq!(st.line("scan", 3), "scan 3 s scanning 10.0.0.5");
        st.update("3", None, None);
        assert_eq!(st.line("scan", 4), "scan 4 s 3 scanning 10.0.0.5");
        st.update("1", Some("4"), Some("step\n2"));
        assert_eq!(
            st.line("scan", 5),
            "scan 5 s [#####---------------] 1/4 step 2"
        );
        // A status message without a number keeps the bar.
        st.update("", None, Some("almost"));
        assert_eq!(
            st.line("scan", 6),
            "scan 6 s [#####---------------] 1/4 almost"
        );
        st.update("9", Some("4"), None);
        assert!(st.line("s", 1).contains("[####################] 9/4"));
        st.update("1", Some("0"), None);
        assert_eq!(st.line("s", 1), "s 1 s 1/0 almost");
        st.update("", None, Some(&"x".repeat(500)));
        let long = st.line("s", 1);
        assert_eq!(long.chars().count(), STATUS_LINE_CHARS);
        assert!(long.ends_with('…'));
    }
}
