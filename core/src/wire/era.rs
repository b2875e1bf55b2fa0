//! The 2026-07-28 era of MCP, as pure decisions and encoders: what a `server/discover` probe's
//! answer says about a server, the `_meta` envelope every modern request carries, the
//! `Mcp-*` header values (with the `=?base64?…?=` form for values that cannot ride as plain
//! header text), and the `x-mcp-header` annotations of a tool's input schema.
//!
//! Owns no sequencing: when to probe, when to fall back to `initialize` and when to re-list
//! after `-32020` are the call sequencing's; this module says what each answer means.
//!
//! The verdict rules (issue "Speak the 2026-07-28 protocol", and issue 27): a server is modern
//! only on a `server/discover` result whose `supportedVersions` names a version this client
//! speaks (a result without it, `{}` included, is an old-era server that answers any method),
//! a 400 whose body is a JSON-RPC error `-32020`, `-32021` or
//! `-32022`, or a 404 whose body is a JSON-RPC `-32601`. Every other answer a server gives
//! (another 400 body, a 200 carrying a JSON-RPC error, another 404, a 405) is old era. A failure
//! (401, 403, 5xx, an empty or malformed 2xx; a timeout, reset or TLS error never reaches here)
//! is no verdict: the call fails naming it (the table: `docs/design.md#era-verdict`). What real
//! servers answered in captures of their traffic: the TypeScript SDK 1.32 answers the probe with
//! 400 `-32000`; the Python SDK, FastMCP and rmcp answer it with a result.

use crate::buf::{DETAIL_BYTES, Detail, Overflow, Sink, StrSink, truncated};
use crate::wire::json::{JsonLimits, JsonOut, Kind, Value};

/// The `clientInfo.version` this client announces in the handshake. It is the handshake
/// string of the reference SDK (`docs/design.md#handshake`), deliberately separate from this
/// crate's version: servers log it, and harness operators match on it.
pub const SDK_VERSION: &str = "1.0.0";

/// The `clientInfo.name` this client announces in the handshake.
pub const CLIENT_NAME: &str = "verifi-harness-sdk";

/// The modern protocol version this client speaks.
pub const MODERN_VERSION: &str = "2026-07-28";

/// The modern versions this client speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &[MODERN_VERSION];

/// A header mismatch (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` or the version header against
/// the body): re-list the tools and retry once.
pub const HEADER_MISMATCH: i64 = -32020;
/// A capability or extension the request needs was not declared (e.g. the tasks extension).
pub const MISSING_CAPABILITY: i64 = -32021;
/// The protocol version is not supported; `data.supported` lists the server's.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// JSON-RPC "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Which era to speak to a server: found by a probe, or forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EraSetting {
    /// Probe once per server per run with `server/discover` (the default).
    #[default]
    Auto,
    /// The 2026-07-28 era only: never `initialize`.
    Modern,
    /// The handshake era only: never `server/discover`.
    Legacy,
}

impl EraSetting {
    /// The era this build speaks under the setting (docs/design.md#capabilities): the one era
    /// built when only one is (feature `era-2025` or `era-2026`); without the probe (feature
    /// `probe`), `Auto` is the 2026 era. Otherwise the setting itself.
    pub fn effective(self) -> EraSetting {
        match self {
            _ if !cfg!(feature = "era-2025") => EraSetting::Modern,
            _ if !cfg!(feature = "era-2026") => EraSetting::Legacy,
            EraSetting::Auto if !cfg!(feature = "probe") => EraSetting::Modern,
            setting => setting,
        }
    }
}

/// What a probe's answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// A modern server: speak the 2026-07-28 era.
    Modern,
    /// A modern server that does not speak the version offered, but speaks this one, which
    /// this client speaks too: probe once more at it.
    ReprobeAt(&'static str),
    /// A modern server with no version in common (its `supported` list names none of ours):
    /// the call fails, naming what the server speaks.
    NoCommonVersion,
    /// An old-era server: fall back to `initialize`.
    Legacy,
    /// Not an answer about eras (auth, a server error, an empty or malformed reply): the call
    /// fails, naming the status; no era is recorded.
    NoVerdict,
}

/// Judges the answer to a `server/discover` probe.
///
/// `status` is the HTTP status. `body` is what came with it: for a 2xx, the JSON-RPC message
/// the reply carried (the JSON body or the SSE event), `None` when there was none; for any
/// other status, the start of the body as received.
pub fn judge_probe(status: u16, body: Option<&[u8]>) -> Verdict {
    let message = body.and_then(|b| Value::parse(b, JsonLimits::default()).ok());
    let error_code = member_at(message, &["error", "code"]).and_then(|c| c.as_i64());
    match status {
        200..=299 => match message {
            Some(m) if let Some(r) = m.get("result") => {
                if discover_result_is_modern(r) {
                    Verdict::Modern
                } else {
                    Verdict::Legacy
                }
            }
            // A 200 carrying a JSON-RPC error: a server that read the request and does not
            // know the method (an old-era dispatcher).
            Some(_) if error_code.is_some() => Verdict::Legacy,
            // Empty, not JSON, not JSON-RPC: a gateway's answer, not the server's.
            _ => Verdict::NoVerdict,
        },
        400 => match error_code {
            Some(HEADER_MISMATCH | MISSING_CAPABILITY) => Verdict::Modern,
            Some(UNSUPPORTED_VERSION) => supported_versions(message).map_or(
                Verdict::Modern,
                |supported| match newest_common(supported) {
                    Some(v) => Verdict::ReprobeAt(v),
                    None => Verdict::NoCommonVersion,
                },
            ),
            _ => Verdict::Legacy,
        },
        404 if error_code == Some(METHOD_NOT_FOUND) => Verdict::Modern,
        401 | 403 | 407 | 408 | 429 | 500..=599 => Verdict::NoVerdict,
        300..=399 => Verdict::NoVerdict,
        _ => Verdict::Legacy,
    }
}

/// True when a `server/discover` result says the server speaks the 2026-07-28 era: an object
/// whose `supportedVersions` names a version this client speaks (the newest of them is then
/// spoken). Anything else (`{}`, no list, a list of none of ours) is an old-era server's answer
/// to a method it does not check: fall back to `initialize`.
pub fn discover_result_is_modern(result: Value<'_>) -> bool {
    result
        .get("supportedVersions")
        .filter(|s| s.kind() == Kind::Array)
        .and_then(newest_common)
        .is_some()
}

/// A request to a server whose era is known failed with `status` and `body`: does the answer
/// say the server now speaks the other era (then it is probed once more)?
///
/// Known modern: a 400 whose JSON-RPC error is implementation-defined (`-32000`…`-32019`, an
/// old-era server's "not initialized" or "no session"), or that is no JSON-RPC error at all.
/// Known old era: an answer the probe's table reads as modern (a 400 with `-32020`, `-32021`
/// or `-32022`, a 404 with `-32601`).
pub fn era_changed(was_modern: bool, status: u16, body: &[u8]) -> bool {
    if was_modern {
        let message = Value::parse(body, JsonLimits::default()).ok();
        let code = member_at(message, &["error", "code"]).and_then(|c| c.as_i64());
        status == 400 && code.is_none_or(|c| (-32019..=-32000).contains(&c))
    } else {
        matches!(status, 400 | 404)
            && matches!(
                judge_probe(status, Some(body)),
                Verdict::Modern | Verdict::ReprobeAt(_) | Verdict::NoCommonVersion
            )
    }
}

/// `error.data.supported` of a `-32022` answer.
fn supported_versions(message: Option<Value<'_>>) -> Option<Value<'_>> {
    member_at(message, &["error", "data", "supported"]).filter(|s| s.kind() == Kind::Array)
}

/// The member of `value` at `path` (one name a level), as a loop of one `get`.
fn member_at<'a>(value: Option<Value<'a>>, path: &[&str]) -> Option<Value<'a>> {
    let mut value = value?;
    for name in path {
        value = value.get(name)?;
    }
    Some(value)
}

/// What a `-32022` answer (its JSON-RPC body) allows: `Ok` with the newest version both sides
/// speak (ours when the server lists none: a retry can only tell), or `Err` with the server's
/// list, written plainly (`2025-11-25, 2027-01-01`), when it names none of ours.
pub fn version_to_retry(body: &[u8]) -> Result<&'static str, Detail> {
    let message = Value::parse(body, JsonLimits::default()).ok();
    match supported_versions(message) {
        None => Ok(MODERN_VERSION),
        Some(list) => newest_common(list).ok_or_else(|| supported_list(body)),
    }
}

/// The server's `data.supported` of a `-32022` body, written plainly for a message.
pub fn supported_list(body: &[u8]) -> Detail {
    let mut out = StrSink::<DETAIL_BYTES>::default();
    let message = Value::parse(body, JsonLimits::default()).ok();
    if let Some(list) = supported_versions(message) {
        for (i, v) in list.elements().enumerate() {
            let sep = if i > 0 { ", " } else { "" };
            let written = out.put(sep.as_bytes()).is_ok()
                && match v.as_str() {
                    Some(s) => s.unescape_into(&mut out).is_ok(),
                    None => out.put(v.raw()).is_ok(),
                };
            if !written {
                break;
            }
        }
    }
    truncated(out.as_str())
}

/// The newest version that this client speaks and `supported` (a JSON array) lists.
pub fn newest_common(supported: Value<'_>) -> Option<&'static str> {
    MODERN_VERSIONS.iter().copied().find(|ours| {
        supported
            .elements()
            .any(|v| v.as_str().is_some_and(|s| s.eq_str(ours)))
    })
}

/// What the client declares it can do, in `initialize` and in the 2026 `_meta`: a capability
/// exactly when there is a handler for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClientCapabilities {
    /// Answers `elicitation/create` (old era) and elicitation `input_required` rounds.
    pub elicitation: bool,
    /// With [`ClientCapabilities::elicitation`]: the handler also takes URL-mode elicitations
    /// (declared `"elicitation":{"form":{},"url":{}}`; without it `{}`, form mode only).
    pub elicitation_url: bool,
    /// Answers `sampling/createMessage`.
    pub sampling: bool,
    /// Answers `roots/list`.
    pub roots: bool,
    /// Declares the tasks extension (`io.modelcontextprotocol/tasks`).
    pub tasks: bool,
}

impl ClientCapabilities {
    /// The tasks extension is declared: [`ClientCapabilities::tasks`] in a build with the
    /// feature `tasks` (docs/design.md#capabilities), never without it.
    pub fn tasks_on(&self) -> bool {
        cfg!(feature = "tasks") && self.tasks
    }

    /// Elicitation is declared: [`ClientCapabilities::elicitation`] in a build with the feature
    /// `input`, never without it.
    pub fn elicitation_on(&self) -> bool {
        cfg!(feature = "input") && self.elicitation
    }

    /// Writes the capabilities object, e.g. `{}` or
    /// `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`.
    pub fn write(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        let mut w = JsonOut::new(out);
        self.write_to(&mut w);
        w.done()
    }

    /// [`ClientCapabilities::write`] through a request's writer.
    pub(crate) fn write_to<S: Sink>(&self, out: &mut JsonOut<S>) {
        // One member after another, `{` before the first and `,` between: a capability the
        // build leaves out (`input`, `tasks`) is never written, and its code folds away.
        let mut sep: &[u8] = b"{";
        if self.elicitation_on() {
            out.lit(sep);
            out.lit(if self.elicitation_url {
                b"\"elicitation\":{\"form\":{},\"url\":{}}"
            } else {
                b"\"elicitation\":{}"
            });
            sep = b",";
        }
        if self.roots {
            out.lit(sep);
            out.lit(b"\"roots\":{}");
            sep = b",";
        }
        if self.sampling {
            out.lit(sep);
            out.lit(b"\"sampling\":{}");
            sep = b",";
        }
        if self.tasks_on() {
            out.lit(sep);
            out.lit(b"\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}");
            sep = b",";
        }
        // No member (`{` still, the one byte): `{}`.
        out.lit(if sep.len() == 1 && sep != b"," {
            b"{}"
        } else {
            b"}"
        });
    }
}

/// Writes the `_meta` member every 2026-era request carries in its `params`:
/// `"_meta":{"io.modelcontextprotocol/protocolVersion":V,"io.modelcontextprotocol/clientInfo":
/// {"name":"verifi-harness-sdk","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{…}}`
/// (the version here equals the `MCP-Protocol-Version` header).
pub fn write_meta(
    out: &mut impl Sink,
    version: &str,
    caps: &ClientCapabilities,
) -> Result<(), Overflow> {
    write_meta_with_progress(out, version, caps, None)
}

/// [`write_meta`], with a `progressToken` first when the request wants progress.
pub fn write_meta_with_progress(
    out: &mut impl Sink,
    version: &str,
    caps: &ClientCapabilities,
    progress_token: Option<u64>,
) -> Result<(), Overflow> {
    out.put(b"\"_meta\":{")?;
    if let Some(token) = progress_token {
        out.put(b"\"progressToken\":")?;
        crate::buf::put_u64(out, token)?;
        out.put(b",")?;
    }
    write_meta_keys(out, version, caps)?;
    out.put(b"}")
}

/// The members of the 2026 `_meta` (protocol version, client info, capabilities), without the
/// braces, for a writer that puts other keys (`progressToken`, `traceparent`) beside them.
pub fn write_meta_keys(
    out: &mut impl Sink,
    version: &str,
    caps: &ClientCapabilities,
) -> Result<(), Overflow> {
    let mut w = JsonOut::new(out);
    meta_keys_to(&mut w, version, caps);
    w.done()
}

/// [`write_meta_keys`] through a request's writer.
pub(crate) fn meta_keys_to<S: Sink>(
    out: &mut JsonOut<S>,
    version: &str,
    caps: &ClientCapabilities,
) {
    out.lit(b"\"io.modelcontextprotocol/protocolVersion\":");
    out.str(version);
    out.lit(b",\"io.modelcontextprotocol/clientInfo\":{\"name\":");
    out.str(CLIENT_NAME);
    out.lit(b",\"version\":");
    out.str(SDK_VERSION);
    out.lit(b"},\"io.modelcontextprotocol/clientCapabilities\":");
    caps.write_to(out);
}

/// Writes the probe: `{"jsonrpc":"2.0","id":N,"method":"server/discover","params":{"_meta":…}}`.
pub fn encode_server_discover(
    out: &mut impl Sink,
    id: u64,
    version: &str,
    caps: &ClientCapabilities,
) -> Result<(), Overflow> {
    out.put(b"{\"jsonrpc\":\"2.0\",\"id\":")?;
    crate::buf::put_u64(out, id)?;
    out.put(b",\"method\":\"server/discover\",\"params\":{")?;
    write_meta(out, version, caps)?;
    out.put(b"}}")
}

/// True when `value` can be sent as a header value as it is: visible ASCII and inner spaces,
/// no leading or trailing blank, not empty.
pub fn header_safe(value: &[u8]) -> bool {
    !value.is_empty()
        && value.iter().all(|&b| (0x20..=0x7e).contains(&b))
        && value.first() != Some(&b' ')
        && value.last() != Some(&b' ')
}

/// Writes a `Mcp-Name` / `Mcp-Param-*` header value: as it is when [`header_safe`], else
/// `=?base64?<standard base64 of the UTF-8 bytes>?=` (e.g. `"Zürich "` is
/// `=?base64?WsO8cmljaCA=?=`).
pub fn write_header_value(out: &mut impl Sink, value: &[u8]) -> Result<(), Overflow> {
    header_value_to(out, value)
}

/// [`write_header_value`] through `dyn Sink`: one copy for every sink (the `mcp-name` line's
/// and a parameter's), the values are short.
fn header_value_to(out: &mut dyn Sink, value: &[u8]) -> Result<(), Overflow> {
    if header_safe(value) {
        return out.put(value);
    }
    out.put(b"=?base64?")?;
    write_base64(out, value)?;
    out.put(b"?=")
}

/// Standard base64 with padding (RFC 4648 §4), written in small pieces (no allocation).
fn write_base64(out: &mut dyn Sink, bytes: &[u8]) -> Result<(), Overflow> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sym = |i: u32| ALPHABET.get((i & 63) as usize).copied().unwrap_or(b'=');
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        let quad = [
            sym(n >> 18),
            sym(n >> 12),
            if chunk.len() > 1 { sym(n >> 6) } else { b'=' },
            if chunk.len() > 2 { sym(n) } else { b'=' },
        ];
        out.put(&quad)?;
    }
    Ok(())
}

/// Why a tool's `x-mcp-header` annotations make it unusable (the tool is not called, as the
/// specification asks of a client that finds them invalid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum HeaderAnnotationError {
    /// The header name is not an RFC 9110 token.
    BadName,
    /// Two parameters name the same header (names compare case-insensitively).
    Duplicate,
    /// The annotated parameter's `type` is not `string`, `integer` or `boolean` (a `null`
    /// beside one is allowed; `number`, objects, arrays and a missing type are not).
    NotPrimitive,
    /// An annotation the arguments cannot reach through `properties` alone (under `items`,
    /// `anyOf`, `$ref`, `additionalProperties` …, or nested deeper than [`MAX_HEADER_DEPTH`]).
    Unreachable,
    /// More annotations than this client keeps ([`MAX_HEADER_PARAMS`]).
    TooMany,
}

/// The most `x-mcp-header` parameters one tool may declare here.
pub const MAX_HEADER_PARAMS: usize = 16;

/// The deepest `properties` nesting an annotated parameter may sit at (`opts.zone` is 2).
pub const MAX_HEADER_DEPTH: usize = 8;

/// Separates the property names of a nested parameter's path in [`HeaderParam::write_path`]
/// (a byte that raw JSON string contents never hold).
pub const PATH_SEPARATOR: u8 = 0x1f;

/// One argument of a tool mirrored into a header: the path of property names from the
/// arguments' root to it, and the header's suffix (`Mcp-Param-{header}`), as the schema
/// writes them (raw JSON string contents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderParam<'p, 'a> {
    /// The property names from the root, outermost first (`["opts", "zone"]`).
    pub path: &'p [&'a [u8]],
    /// The header suffix.
    pub header: &'a [u8],
}

impl HeaderParam<'_, '_> {
    /// Writes the path with [`PATH_SEPARATOR`] between its names (what [`param_at`] reads).
    pub fn write_path(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        for (i, name) in self.path.iter().enumerate() {
            if i > 0 {
                out.put(&[PATH_SEPARATOR])?;
            }
            out.put(name)?;
        }
        Ok(())
    }
}

/// Reads a tool's `inputSchema` for its `x-mcp-header` parameters and validates them: RFC
/// 9110 token names, unique case-insensitively, on a property of type `string`, `integer` or
/// `boolean` (a `null` beside one is allowed) that is reached from the root through
/// `properties` keys only (nested `properties` included: `opts.zone`). Each valid parameter
/// goes to `each`, and only when all of them are valid (an invalid one makes the tool
/// uncallable); the count is returned.
pub fn header_params<'a>(
    input_schema: Value<'a>,
    mut each: impl FnMut(HeaderParam<'_, 'a>),
) -> Result<usize, HeaderAnnotationError> {
    // First every annotation is checked, then (all valid) handed out.
    header_params_to(input_schema, None)?;
    header_params_to(input_schema, Some(&mut each))
}

/// [`header_params`] in one walk, for a caller that undoes what `each` did when an error is
/// returned: each valid parameter goes to `each` as it is found, before the rest are checked.
pub(crate) fn header_params_to<'a>(
    input_schema: Value<'a>,
    each: Option<&mut dyn FnMut(HeaderParam<'_, 'a>)>,
) -> Result<usize, HeaderAnnotationError> {
    let mut headers = heapless::Vec::<&'a [u8], MAX_HEADER_PARAMS>::new();
    let mut path = heapless::Vec::<&'a [u8], MAX_HEADER_DEPTH>::new();
    let mut walk = Walk {
        headers: &mut headers,
        each,
    };
    walk_properties(input_schema, &mut path, &mut walk)?;
    // Every annotation in the schema must be one of those: anything else is unreachable.
    let all = crate::buf::count(input_schema.raw(), b"\"x-mcp-header\"");
    if all != headers.len() {
        return Err(HeaderAnnotationError::Unreachable);
    }
    Ok(headers.len())
}

/// What [`walk_properties`] does with each annotated property: checks it (a header named
/// once, case-insensitively), keeps its header name, and hands it out to `each` if given.
struct Walk<'w, 'e, 'a> {
    headers: &'w mut heapless::Vec<&'a [u8], MAX_HEADER_PARAMS>,
    each: Option<&'e mut dyn FnMut(HeaderParam<'_, 'a>)>,
}

/// Visits the annotated properties under `schema.properties`, depth first, with their paths.
fn walk_properties<'a>(
    schema: Value<'a>,
    path: &mut heapless::Vec<&'a [u8], MAX_HEADER_DEPTH>,
    walk: &mut Walk<'_, '_, 'a>,
) -> Result<(), HeaderAnnotationError> {
    let Some(props) = schema
        .get("properties")
        .filter(|p| p.kind() == Kind::Object)
    else {
        return Ok(());
    };
    for (name, prop) in props.members() {
        if path.push(name.raw()).is_err() {
            // Deeper than kept: what is below stays uncounted, so it reads as unreachable.
            return Ok(());
        }
        if let Some(header) = prop.get("x-mcp-header") {
            let header = header
                .as_str()
                .map(|h| h.raw())
                .filter(|h| !h.is_empty() && h.iter().all(|&b| is_tchar(b)))
                .ok_or(HeaderAnnotationError::BadName)?;
            if !primitive_type(prop) {
                return Err(HeaderAnnotationError::NotPrimitive);
            }
            if walk.headers.iter().any(|h| h.eq_ignore_ascii_case(header)) {
                return Err(HeaderAnnotationError::Duplicate);
            }
            walk.headers
                .push(header)
                .map_err(|_| HeaderAnnotationError::TooMany)?;
            if let Some(each) = walk.each.as_mut() {
                each(HeaderParam {
                    path: path.as_slice(),
                    header,
                });
            }
        }
        walk_properties(prop, path, walk)?;
        path.pop();
    }
    Ok(())
}

/// A property's `type` is one header-safe primitive: `string`, `integer` or `boolean`, alone
/// or in an array beside `null` (`["string","null"]`).
fn primitive_type(prop: Value<'_>) -> bool {
    const PRIMITIVE: [&str; 3] = ["string", "integer", "boolean"];
    let is = |t: Value<'_>, names: &[&str]| {
        t.as_str()
            .is_some_and(|t| names.iter().any(|name| t.eq_str(name)))
    };
    match prop.get("type") {
        Some(t) if t.kind() == Kind::String => is(t, &PRIMITIVE),
        Some(t) if t.kind() == Kind::Array => {
            // One pass: one primitive, at most one `null`, nothing else.
            let (mut primitives, mut nulls) = (0u32, 0u32);
            for e in t.elements() {
                if is(e, &PRIMITIVE) {
                    primitives += 1;
                } else if is(e, &["null"]) {
                    nulls += 1;
                } else {
                    return false;
                }
            }
            primitives == 1 && nulls <= 1
        }
        _ => false,
    }
}

/// The argument a header parameter mirrors: `path` (names joined by [`PATH_SEPARATOR`], as
/// [`HeaderParam::write_path`] writes them) followed from the arguments' root.
pub fn param_at<'a>(args: Value<'a>, path: &[u8]) -> Option<Value<'a>> {
    let mut value = args;
    for name in path.split(|&b| b == PATH_SEPARATOR) {
        let name = core::str::from_utf8(name).ok()?;
        value = value.get(name)?;
    }
    Some(value)
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Writes the header value of one mirrored argument: a string's text (unescaped, encoded
/// when not header-safe), a number or boolean as written. `None` for `null` or any other kind:
/// the header is then left out.
pub fn write_param_value(out: &mut impl Sink, argument: Value<'_>) -> Option<Result<(), Overflow>> {
    match argument.kind() {
        Kind::String => {
            let s = argument.as_str()?;
            match s.as_plain() {
                Some(plain) => Some(write_header_value(out, plain.as_bytes())),
                None => {
                    // Escaped: unescape into a small stack buffer first (header values are
                    // short; a longer one is not mirrored and the server says so).
                    let mut text = StrSink::<256>::default();
                    s.unescape_into(&mut text).ok()?;
                    Some(write_header_value(out, text.as_str().as_bytes()))
                }
            }
        }
        Kind::Number | Kind::Bool => Some(out.put(argument.raw())),
        _ => None,
    }
}

/// The longest `Mcp-Param-*` value sent: a longer one is left out, line and all (the server
/// then says the header is missing).
pub(crate) const PARAM_VALUE_MAX: usize = 1024;

/// Writes the `Mcp-Param-{header}` line of one mirrored argument: its value as
/// [`write_param_value`] writes it, when there is one (not for `null` or another kind, nor for
/// an escaped string over 256 bytes unescaped) of at most [`PARAM_VALUE_MAX`] bytes. The value's
/// length is known before anything is written, so it goes straight into `out`.
pub(crate) fn param_line_to(
    out: &mut dyn Sink,
    header: &[u8],
    argument: Value<'_>,
) -> Result<(), Overflow> {
    let mut text = StrSink::<256>::default();
    let (value, as_is) = match argument.kind() {
        Kind::String => {
            let Some(s) = argument.as_str() else {
                return Ok(());
            };
            let value = match s.as_plain() {
                Some(plain) => plain.as_bytes(),
                None if s.unescape_into(&mut text).is_ok() => text.as_str().as_bytes(),
                None => return Ok(()),
            };
            (value, header_safe(value))
        }
        Kind::Number | Kind::Bool => (argument.raw(), true),
        _ => return Ok(()),
    };
    // `=?base64?` and `?=` around four symbols for every three bytes (or fewer).
    let len = if as_is {
        value.len()
    } else {
        11 + value.len().div_ceil(3) * 4
    };
    if len > PARAM_VALUE_MAX {
        return Ok(());
    }
    out.put(b"Mcp-Param-")?;
    out.put(header)?;
    out.put(b": ")?;
    // (A number's or a boolean's text is header-safe: it goes as it is there too.)
    header_value_to(out, value)?;
    out.put(b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use std::string::String;

    fn text(f: impl FnOnce(&mut SliceBuf<'_>) -> Result<(), Overflow>) -> String {
        let mut storage = [0u8; 1024];
        let mut b = SliceBuf::new(&mut storage);
        f(&mut b).unwrap();
        String::from_utf8(b.bytes().to_vec()).unwrap()
    }

    #[test]
    fn probe_verdicts_hold_exactly() {
        let rpc_error = |code: i64| {
            std::format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{code},"message":"m"}}}}"#)
        };
        let discover = br#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{},"resultType":"complete"}}"#;
        // Modern, and only these.
        assert_eq!(judge_probe(200, Some(discover)), Verdict::Modern);
        for code in [-32020, -32021] {
            assert_eq!(
                judge_probe(400, Some(rpc_error(code).as_bytes())),
                Verdict::Modern
            );
        }
        assert_eq!(
            judge_probe(404, Some(rpc_error(-32601).as_bytes())),
            Verdict::Modern
        );
        // Old era: every other answer a server gives. (TS 1.32's answers, as captured.)
        for body in [
            rpc_error(-32000),
            r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#.into(),
            "Bad Request".into(),
            String::new(),
        ] {
            assert_eq!(judge_probe(400, Some(body.as_bytes())), Verdict::Legacy, "{body}");
        }
        assert_eq!(
            judge_probe(200, Some(rpc_error(-32601).as_bytes())),
            Verdict::Legacy
        );
        assert_eq!(judge_probe(404, Some(b"Not Found")), Verdict::Legacy);
        assert_eq!(
            judge_probe(404, Some(rpc_error(-32000).as_bytes())),
            Verdict::Legacy
        );
        assert_eq!(judge_probe(405, Some(b"")), Verdict::Legacy);
        // A result is modern only with a `supportedVersions` naming ours (issue 27): an old-era
        // server that answers any method with `{}` is not.
        for result in [
            r#"{}"#,
            r#"{"capabilities":{}}"#,
            r#"{"supportedVersions":["2027-01-01"]}"#,
            r#"{"supportedVersions":"2026-07-28"}"#,
            r#"[]"#,
        ] {
            let body = std::format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
            assert_eq!(
                judge_probe(200, Some(body.as_bytes())),
                Verdict::Legacy,
                "{result}"
            );
        }
        // No verdict: failures of the call.
        for status in [401, 403, 500, 502, 503, 504] {
            assert_eq!(
                judge_probe(status, Some(rpc_error(-32020).as_bytes())),
                Verdict::NoVerdict
            );
        }
        assert_eq!(judge_probe(200, None), Verdict::NoVerdict, "an empty 2xx");
        assert_eq!(
            judge_probe(200, Some(b"<html>")),
            Verdict::NoVerdict,
            "a malformed 2xx"
        );
        assert_eq!(judge_probe(202, Some(b"")), Verdict::NoVerdict);
    }

    #[test]
    fn an_unsupported_version_reprobes_only_at_a_version_both_speak() {
        let with = |supported: &str| {
            std::format!(
                r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32022,"message":"x","data":{{"supported":{supported},"requested":"2027-01-01"}}}}}}"#
            )
        };
        // rmcp lists all five; ours is among them.
        let rmcp = with(r#"["2024-11-05","2025-03-26","2025-06-18","2025-11-25","2026-07-28"]"#);
        assert_eq!(
            judge_probe(400, Some(rmcp.as_bytes())),
            Verdict::ReprobeAt("2026-07-28")
        );
        // Only a version we do not speak: never probe at it.
        let future = with(r#"["2027-01-01"]"#);
        assert_eq!(
            judge_probe(400, Some(future.as_bytes())),
            Verdict::NoCommonVersion
        );
        // No list at all: still a modern server's error.
        let bare = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#;
        assert_eq!(judge_probe(400, Some(bare)), Verdict::Modern);
    }

    // The capabilities written are those built (`tasks`, `input`).
    #[cfg(all(feature = "tasks", feature = "input"))]
    #[test]
    fn the_meta_envelope_and_the_probe() {
        let caps = ClientCapabilities {
            tasks: true,
            ..ClientCapabilities::default()
        };
        let probe = text(|b| encode_server_discover(b, 1, MODERN_VERSION, &caps));
        assert_eq!(
            probe,
            r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"verifi-harness-sdk","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&probe).unwrap();
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
            "verifi-harness-sdk"
        );
        let all = ClientCapabilities {
            elicitation: true,
            elicitation_url: false,
            sampling: true,
            roots: true,
            tasks: false,
        };
        assert_eq!(
            text(|b| all.write(b)),
            r#"{"elicitation":{},"roots":{},"sampling":{}}"#
        );
        // URL mode is declared beside form mode; alone (no handler) it is nothing.
        let url = ClientCapabilities {
            elicitation_url: true,
            ..all
        };
        assert_eq!(
            text(|b| url.write(b)),
            r#"{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}"#
        );
        let url_alone = ClientCapabilities {
            elicitation_url: true,
            ..ClientCapabilities::default()
        };
        assert_eq!(text(|b| url_alone.write(b)), "{}");
        assert_eq!(text(|b| ClientCapabilities::default().write(b)), "{}");
    }

    #[test]
    fn header_values_ride_plain_or_as_base64() {
        assert_eq!(text(|b| write_header_value(b, b"eu-west-1")), "eu-west-1");
        assert_eq!(text(|b| write_header_value(b, b"a b")), "a b");
        // The captured example: a trailing blank and a non-ASCII letter.
        assert_eq!(
            text(|b| write_header_value(b, "Zürich ".as_bytes())),
            "=?base64?WsO8cmljaCA=?="
        );
        assert_eq!(text(|b| write_header_value(b, b"")), "=?base64??=");
        assert_eq!(
            text(|b| write_header_value(b, b"a\r\nb")),
            "=?base64?YQ0KYg==?="
        );
        assert_eq!(text(|b| write_header_value(b, b" x")), "=?base64?IHg=?=");
    }

    fn schema(json: &str) -> Value<'_> {
        Value::parse(json.as_bytes(), JsonLimits::default()).unwrap()
    }

    /// The parameters of a schema as `(path with dots, header)`, or why it is invalid.
    fn params_of(json: &str) -> Result<std::vec::Vec<(String, String)>, HeaderAnnotationError> {
        let mut found = std::vec::Vec::new();
        let n = header_params(schema(json), |p| {
            let mut path = StrSink::<256>::default();
            p.write_path(&mut path).unwrap();
            let path = path.as_str().replace('\u{1f}', ".");
            found.push((path, String::from_utf8(p.header.to_vec()).unwrap()));
        })?;
        assert_eq!(n, found.len());
        Ok(found)
    }

    #[test]
    fn header_annotations_are_read_and_bad_ones_refused() {
        let pair = |a: &str, h: &str| (String::from(a), String::from(h));
        assert_eq!(
            params_of(
                r#"{"type":"object","properties":{"text":{"type":"string"},"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"Count"},"b":{"type":["boolean","null"],"x-mcp-header":"Flag"}}}"#,
            )
            .unwrap(),
            [
                pair("region", "Region"),
                pair("n", "Count"),
                pair("b", "Flag")
            ]
        );
        // Issue 27: a property reached through nested `properties` only is valid, and its
        // path is kept for mirroring.
        assert_eq!(
            params_of(
                r#"{"type":"object","properties":{"opts":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}"#,
            )
            .unwrap(),
            [pair("opts.zone", "Zone")]
        );
        let bad = [
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"Bad Name"}}}"#,
                HeaderAnnotationError::BadName,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
                HeaderAnnotationError::BadName,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}"#,
                HeaderAnnotationError::Duplicate,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"X"},"o":{"properties":{"b":{"type":"string","x-mcp-header":"X"}}}}}"#,
                HeaderAnnotationError::Duplicate,
            ),
            (
                r#"{"properties":{"a":{"type":"object","x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            // Issue 27: `number` is not a header type (the official check
            // `invalid_number_header`), nor `null` alone, nor two primitives at once.
            (
                r#"{"properties":{"a":{"type":"number","x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":["number","null"],"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":"null","x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":["string","integer"],"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":["null","string","null"],"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":["string",1],"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":[],"x-mcp-header":"X"}}}"#,
                HeaderAnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"X"}}}}"#,
                HeaderAnnotationError::Unreachable,
            ),
        ];
        for (json, want) in bad {
            assert_eq!(params_of(json).unwrap_err(), want, "{json}");
        }
        // Reachable only through `properties` keys: never through another keyword.
        let leaf = r#"{"type":"string","x-mcp-header":"X"}"#;
        for keyword in [
            std::format!(r#""items":{leaf}"#),
            std::format!(r#""anyOf":[{leaf}]"#),
            std::format!(r#""oneOf":[{leaf}]"#),
            std::format!(r#""allOf":[{leaf}]"#),
            std::format!(r#""not":{leaf}"#),
            std::format!(r#""if":{leaf}"#),
            std::format!(r#""then":{leaf}"#),
            std::format!(r#""else":{leaf}"#),
            std::format!(r#""$defs":{{"d":{leaf}}}"#),
            std::format!(r#""additionalProperties":{leaf}"#),
            std::format!(r#""patternProperties":{{"^a":{leaf}}}"#),
        ] {
            for json in [
                std::format!(r#"{{"type":"object",{keyword}}}"#),
                std::format!(r#"{{"properties":{{"o":{{"type":"object",{keyword}}}}}}}"#),
            ] {
                assert_eq!(
                    params_of(&json).unwrap_err(),
                    HeaderAnnotationError::Unreachable,
                    "{json}"
                );
            }
        }
        assert!(params_of(r#"{"type":"object"}"#).unwrap().is_empty());
        // As deep as kept: found; deeper: unreachable, never a panic.
        let mut deep = String::from(leaf);
        for _ in 0..MAX_HEADER_DEPTH {
            deep = std::format!(r#"{{"properties":{{"p":{deep}}}}}"#);
        }
        assert_eq!(params_of(&deep).unwrap().len(), 1);
        let deep = std::format!(r#"{{"properties":{{"p":{deep}}}}}"#);
        assert_eq!(
            params_of(&deep).unwrap_err(),
            HeaderAnnotationError::Unreachable
        );
    }

    #[test]
    fn a_nested_parameter_is_found_by_its_path() {
        let args = schema(r#"{"opts":{"zone":"eu"},"zone":"top"}"#);
        let at = |path: &[u8]| param_at(args, path).map(|v| v.raw());
        assert_eq!(at(b"opts\x1fzone"), Some(&br#""eu""#[..]));
        assert_eq!(at(b"zone"), Some(&br#""top""#[..]));
        assert_eq!(at(b"opts\x1fnone"), None);
        assert_eq!(at(b"zone\x1fdeeper"), None);
    }

    /// A parameter's line is the value [`write_param_value`] writes into a buffer of
    /// [`PARAM_VALUE_MAX`] bytes, when all of it fits there, and nothing otherwise.
    #[test]
    fn a_parameter_line_is_its_value_when_it_fits() {
        let mut jsons: std::vec::Vec<String> = [
            r#""eu-west-1""#,
            r#""Z\u00fcrich ""#,
            r#""a\"b""#,
            r#""""#,
            r#"" ""#,
            "42",
            "-1.5e3",
            "true",
            "null",
            "[1]",
            "{}",
        ]
        .iter()
        .map(|s| String::from(*s))
        .collect();
        for n in [
            250, 255, 256, 257, 300, 755, 756, 757, 758, 764, 765, 766, 767, 768, 769, 1023, 1024,
            1025, 2000,
        ] {
            let plain = "x".repeat(n);
            jsons.push(std::format!(r#""{plain}""#));
            jsons.push(std::format!(r#""{}""#, "\\u00e9".repeat(n / 2)));
            jsons.push(std::format!(r#""\t{}""#, "y".repeat(n)));
            jsons.push(std::format!(r#""é{}""#, "z".repeat(n)));
            jsons.push("1".repeat(n));
        }
        for json in &jsons {
            let value =
                Value::parse(json.as_bytes(), crate::wire::json::JsonLimits::default()).unwrap();
            let mut line = StrSink::<PARAM_VALUE_MAX>::default();
            let expected = match write_param_value(&mut line, value) {
                Some(Ok(())) => std::format!("Mcp-Param-Zone: {}\r\n", line.as_str()),
                _ => String::new(),
            };
            let mut storage = std::vec![0u8; 4096];
            let mut b = SliceBuf::new(&mut storage);
            param_line_to(&mut b, b"Zone", value).unwrap();
            assert_eq!(core::str::from_utf8(b.bytes()).unwrap(), expected, "{json}");
        }
    }

    #[test]
    fn argument_values_become_header_values() {
        let v = |json: &str| {
            let value = schema(json);
            let mut storage = [0u8; 256];
            let mut b = SliceBuf::new(&mut storage);
            write_param_value(&mut b, value).map(|r| {
                r.unwrap();
                String::from_utf8(b.bytes().to_vec()).unwrap()
            })
        };
        assert_eq!(v(r#""eu-west-1""#).as_deref(), Some("eu-west-1"));
        assert_eq!(
            v(r#""Z\u00fcrich ""#).as_deref(),
            Some("=?base64?WsO8cmljaCA=?=")
        );
        assert_eq!(v("42").as_deref(), Some("42"));
        assert_eq!(v("true").as_deref(), Some("true"));
        assert_eq!(v("null"), None, "null: the header is left out");
        assert_eq!(v("[1]"), None);
    }
}
