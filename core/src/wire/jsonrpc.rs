//! JSON-RPC 2.0 as MCP uses it: the requests this client sends, and the messages a server sends
//! back.
//!
//! Owns: the exact bytes of `initialize`, `notifications/initialized`, the list methods
//! (`tools/list`, `resources/list`, `resources/templates/list`, `prompts/list`, with cursor
//! paging), `tools/call` (with an optional progress token), `resources/read`, `prompts/get`,
//! `ping` and `notifications/cancelled`; the MCP protocol versions this client can speak;
//! classifying a received message (response, server request, notification), finding the
//! response to a request id (also inside a batch array), reading the `initialize` result and
//! a page of any list, and checking the shape of the other results.
//! Does not own: JSON syntax (`wire::json`), the content of a `tools/call` result
//! (`wire::content`), HTTP/SSE framing, or what the harness does with an error.
//!
//! Every encoder writes compact JSON through a [`Sink`]; overflow is a value.

use core::fmt;

use crate::buf::{Overflow, Sink};
pub(crate) use crate::wire::json::JsonOut;
use crate::wire::json::{Elements, JsonStr, Kind, Value};

pub use super::era::{CLIENT_NAME, SDK_VERSION};

/// An MCP protocol revision this client can ask for in `initialize`.
///
/// All but one belong to the handshake era (an `initialize` handshake, then `mcp-session-id`).
/// [`ProtocolVersion::V2026_07_28`] is the era without a handshake: it is never offered in
/// `initialize`, and its requests are written by `crate::wire::era` (`server/discover`, the
/// per-request `_meta` envelope; `docs/design.md#two-eras`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum ProtocolVersion {
    /// `2024-11-05`, the reference SDK's choice (still offered on request:
    /// [`ProtocolVersion::SEED`]; `docs/design.md#handshake`).
    V2024_11_05,
    /// `2025-03-26`.
    V2025_03_26,
    /// `2025-06-18`: the first that requires the `MCP-Protocol-Version` header.
    V2025_06_18,
    /// `2025-11-25`: the newest of the handshake era, offered by default.
    V2025_11_25,
    /// `2026-07-28`: the era without a handshake or sessions. Never offered in `initialize`
    /// (not in [`ProtocolVersion::ALL`]); a server speaks it after a `server/discover` probe
    /// or when the slot forces the modern era.
    V2026_07_28,
}

impl ProtocolVersion {
    /// The version offered in `initialize` by default: the newest this client speaks in the
    /// handshake era, `2025-11-25` (a server answers with its own when it speaks an older one).
    pub const DEFAULT: Self = ProtocolVersion::V2025_11_25;

    /// The version the reference SDK sends, `2024-11-05` (hence the name: the SDK this one
    /// re-creates, `docs/design.md#what-the-product-is`): still offered when asked for.
    pub const SEED: Self = ProtocolVersion::V2024_11_05;

    /// Every supported version, oldest first.
    pub const ALL: [Self; 4] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ];

    /// The wire form, e.g. `"2024-11-05"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// The version named by `s` exactly, if we support it.
    pub fn parse(s: &[u8]) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str().as_bytes() == s)
    }

    /// True when requests after the handshake must carry `MCP-Protocol-Version` (2025-06-18
    /// and later).
    pub fn sends_version_header(self) -> bool {
        self >= ProtocolVersion::V2025_06_18
    }

    /// True for the 2026-07-28 era: `_meta` and `Mcp-*` headers on every request, no session.
    /// A build with one era (docs/design.md#capabilities) answers for that era whatever the
    /// version, so the other era's paths fold away.
    pub fn is_modern(self) -> bool {
        if !cfg!(feature = "era-2025") {
            return true;
        }
        if !cfg!(feature = "era-2026") {
            return false;
        }
        self == ProtocolVersion::V2026_07_28
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{"jsonrpc":"2.0","id":N,"method":"M"`. `method` is one of the client's own names (plain
/// ASCII: its JSON literal is itself in quotes, written by one call).
pub(crate) fn put_request_head<S: Sink>(out: &mut JsonOut<S>, id: u64, method: &'static str) {
    out.lit(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.num(id);
    out.lit(b",\"method\":");
    out.str(method);
}

/// The end of a message whose `params` are open (`}}`) or that has none (`}`).
pub(crate) const PARAMS_END: &[u8] = b"}}";
/// See [`PARAMS_END`].
pub(crate) const BARE_END: &[u8] = b"}";

/// Writes a whole message: `open` writes it but its end, which it returns.
fn encode_whole<S: Sink>(
    out: S,
    open: impl FnOnce(&mut JsonOut<S>) -> &'static [u8],
) -> Result<(), Overflow> {
    let mut w = JsonOut::new(out);
    let end = open(&mut w);
    w.lit(end);
    w.done()
}

/// Writes the `initialize` request, e.g.
/// `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"verifi-harness-sdk","version":"1.0.0"}}}`.
pub fn encode_initialize(
    out: &mut impl Sink,
    id: u64,
    version: ProtocolVersion,
) -> Result<(), Overflow> {
    encode_initialize_declaring(out, id, version, false)
}

/// [`encode_initialize`], declaring `"capabilities":{"elicitation":{}}` when `elicitation`
/// (the client has a handler for it).
pub fn encode_initialize_declaring(
    out: &mut impl Sink,
    id: u64,
    version: ProtocolVersion,
    elicitation: bool,
) -> Result<(), Overflow> {
    let caps = crate::wire::era::ClientCapabilities {
        elicitation,
        ..Default::default()
    };
    encode_initialize_with(out, id, version, &caps)
}

/// [`encode_initialize`], declaring the elicitation capabilities of `caps` (form mode, and
/// URL mode when [`elicitation_url`](crate::wire::era::ClientCapabilities::elicitation_url)).
pub fn encode_initialize_with(
    out: &mut impl Sink,
    id: u64,
    version: ProtocolVersion,
    caps: &crate::wire::era::ClientCapabilities,
) -> Result<(), Overflow> {
    encode_whole(out, |w| initialize_open(w, id, version, caps))
}

/// [`encode_initialize_with`] but its end, which is returned.
pub(crate) fn initialize_open<S: Sink>(
    out: &mut JsonOut<S>,
    id: u64,
    version: ProtocolVersion,
    caps: &crate::wire::era::ClientCapabilities,
) -> &'static [u8] {
    put_request_head(out, id, "initialize");
    out.lit(b",\"params\":{\"protocolVersion\":\"");
    out.lit(version.as_str().as_bytes());
    out.lit(b"\",\"capabilities\":");
    // The old era declares elicitation alone here (tasks ride the 2026 `_meta`).
    crate::wire::era::ClientCapabilities {
        elicitation: caps.elicitation,
        elicitation_url: caps.elicitation_url,
        ..Default::default()
    }
    .write_to(out);
    if CLIENT_INFO_PLAIN {
        // What the writer below writes, in one piece.
        out.lit(&CLIENT_INFO);
    } else {
        out.lit(b",\"clientInfo\":{\"name\":");
        out.str(CLIENT_NAME);
        out.lit(b",\"version\":");
        out.str(SDK_VERSION);
        out.lit(b"}");
    }
    PARAMS_END
}

/// The pieces of `initialize`'s `clientInfo` member, when [`CLIENT_INFO_PLAIN`].
const CLIENT_INFO_PARTS: [&[u8]; 5] = [
    b",\"clientInfo\":{\"name\":\"",
    CLIENT_NAME.as_bytes(),
    b"\",\"version\":\"",
    SDK_VERSION.as_bytes(),
    b"\"}",
];

/// True when the name and version need no JSON escaping, so [`CLIENT_INFO`] is what the
/// writer writes.
const CLIENT_INFO_PLAIN: bool = plain(CLIENT_NAME.as_bytes()) && plain(SDK_VERSION.as_bytes());

/// [`CLIENT_INFO_PARTS`] joined, at compile time.
const CLIENT_INFO: [u8; joined_len(&CLIENT_INFO_PARTS)] = join(&CLIENT_INFO_PARTS);

/// True when `s` holds no byte a JSON string literal escapes.
pub(crate) const fn plain(mut s: &[u8]) -> bool {
    while let [b, rest @ ..] = s {
        if *b < 0x20 || *b == b'"' || *b == b'\\' {
            return false;
        }
        s = rest;
    }
    true
}

/// The length of `parts` joined.
pub(crate) const fn joined_len(mut parts: &[&[u8]]) -> usize {
    let mut n = 0;
    while let [p, rest @ ..] = parts {
        n += p.len();
        parts = rest;
    }
    n
}

/// `parts` joined into an array of [`joined_len`] bytes (a shorter array takes what fits).
pub(crate) const fn join<const N: usize>(mut parts: &[&[u8]]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut free: &mut [u8] = &mut out;
    while let [p, rest @ ..] = parts {
        let mut bytes: &[u8] = p;
        while let [b, more @ ..] = bytes {
            if let [slot, tail @ ..] = free {
                *slot = *b;
                free = tail;
            }
            bytes = more;
        }
        parts = rest;
    }
    out
}

/// Writes the `notifications/initialized` notification (no id, no reply expected).
pub fn encode_initialized(out: &mut impl Sink) -> Result<(), Overflow> {
    encode_whole(out, initialized_open)
}

/// [`encode_initialized`] but its end, which is returned.
pub(crate) fn initialized_open<S: Sink>(out: &mut JsonOut<S>) -> &'static [u8] {
    out.lit(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"");
    BARE_END
}

/// Writes a `tools/list` request; with `cursor` (a previous page's `nextCursor`, echoed
/// canonically) it asks for the next page: `…,"params":{"cursor":"…"}}`.
pub fn encode_tools_list(
    out: &mut impl Sink,
    id: u64,
    cursor: Option<&str>,
) -> Result<(), Overflow> {
    encode_list(out, id, ListMethod::Tools, cursor)
}

/// A list method of MCP, paged by `cursor` / `nextCursor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum ListMethod {
    /// `tools/list`, items under `tools`.
    Tools,
    /// `resources/list`, items under `resources`.
    Resources,
    /// `resources/templates/list`, items under `resourceTemplates`.
    ResourceTemplates,
    /// `prompts/list`, items under `prompts`.
    Prompts,
}

impl ListMethod {
    /// The JSON-RPC method, e.g. `resources/list`.
    pub fn method(self) -> &'static str {
        match self {
            ListMethod::Tools => "tools/list",
            ListMethod::Resources => "resources/list",
            ListMethod::ResourceTemplates => "resources/templates/list",
            ListMethod::Prompts => "prompts/list",
        }
    }

    /// The member of the result that holds the page's items, e.g. `resources`.
    pub fn key(self) -> &'static str {
        match self {
            ListMethod::Tools => "tools",
            ListMethod::Resources => "resources",
            ListMethod::ResourceTemplates => "resourceTemplates",
            ListMethod::Prompts => "prompts",
        }
    }
}

/// Writes a list request (`tools/list`, `resources/list` …); with `cursor` (a previous page's
/// `nextCursor`, echoed canonically) it asks for the next page: `…,"params":{"cursor":"…"}}`.
pub fn encode_list(
    out: &mut impl Sink,
    id: u64,
    list: ListMethod,
    cursor: Option<&str>,
) -> Result<(), Overflow> {
    encode_whole(out, |w| list_open(w, id, list, cursor))
}

/// [`encode_list`] but its end, which is returned.
pub(crate) fn list_open<S: Sink>(
    out: &mut JsonOut<S>,
    id: u64,
    list: ListMethod,
    cursor: Option<&str>,
) -> &'static [u8] {
    put_request_head(out, id, list.method());
    match cursor {
        Some(c) => {
            out.lit(b",\"params\":{\"cursor\":");
            out.str(c);
            PARAMS_END
        }
        None => BARE_END,
    }
}

/// A request with one answer that is not a tool call: it runs nothing, so it may be sent
/// again (on a fresh connection, or to the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Request<'a> {
    /// `resources/read` of `uri`.
    ResourcesRead {
        /// The resource's URI, as listed.
        uri: &'a str,
    },
    /// `prompts/get` of `name`, with its `arguments` (an object of strings, re-emitted
    /// compactly; `None` sends none).
    PromptsGet {
        /// The prompt's name.
        name: &'a str,
        /// Its arguments.
        arguments: Option<Value<'a>>,
    },
    /// `ping` (the answer is an empty object).
    Ping,
    /// `tasks/get` of a task (the tasks extension, 2026 era): its status, and its result or
    /// error once it ended.
    TaskGet {
        /// The task's id.
        task: &'a str,
    },
    /// `tasks/cancel` of a task (the tasks extension, 2026 era).
    TaskCancel {
        /// The task's id.
        task: &'a str,
    },
}

impl Request<'_> {
    /// The JSON-RPC method, e.g. `resources/read`.
    pub fn method(&self) -> &'static str {
        match self {
            Request::ResourcesRead { .. } => "resources/read",
            Request::PromptsGet { .. } => "prompts/get",
            Request::Ping => "ping",
            Request::TaskGet { .. } => "tasks/get",
            Request::TaskCancel { .. } => "tasks/cancel",
        }
    }

    /// Whether the answer is content a harness uses as evidence (metered like a tool call):
    /// `resources/read` and `prompts/get`, not `ping` nor a task's status (a task's result is
    /// metered by the call that follows it).
    pub fn bears_content(&self) -> bool {
        matches!(
            self,
            Request::ResourcesRead { .. } | Request::PromptsGet { .. }
        )
    }
}

/// Writes `req`, e.g. `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///a"}}`
/// or `{"jsonrpc":"2.0","id":5,"method":"ping"}`.
pub fn encode_request(out: &mut impl Sink, id: u64, req: &Request<'_>) -> Result<(), Overflow> {
    encode_whole(out, |w| request_open(w, id, req))
}

/// [`encode_request`] but its end, which is returned.
pub(crate) fn request_open<S: Sink>(
    out: &mut JsonOut<S>,
    id: u64,
    req: &Request<'_>,
) -> &'static [u8] {
    put_request_head(out, id, req.method());
    let (key, value): (&[u8], &str) = match *req {
        Request::ResourcesRead { uri } => (b"uri", uri),
        Request::PromptsGet { name, .. } => (b"name", name),
        Request::Ping => return BARE_END,
        Request::TaskGet { task } | Request::TaskCancel { task } => (b"taskId", task),
    };
    out.lit(b",\"params\":{\"");
    out.lit(key);
    out.lit(b"\":");
    out.str(value);
    if let Request::PromptsGet {
        arguments: Some(args),
        ..
    } = *req
    {
        out.lit(b",\"arguments\":");
        out.json(args);
    }
    PARAMS_END
}

/// Checks the shape of `req`'s result: an object, with `contents` (resources/read) or
/// `messages` (prompts/get) an array. The members inside are the caller's to read.
pub fn check_request_result(req: &Request<'_>, result: Value<'_>) -> Result<(), RpcDecodeError> {
    if result.kind() != Kind::Object {
        return Err(RpcDecodeError::NotAnObject);
    }
    let key = match req {
        Request::ResourcesRead { .. } => "contents",
        Request::PromptsGet { .. } => "messages",
        Request::Ping | Request::TaskGet { .. } | Request::TaskCancel { .. } => return Ok(()),
    };
    match result.get(key) {
        Some(v) if v.kind() == Kind::Array => Ok(()),
        _ => Err(RpcDecodeError::BadField(key)),
    }
}

/// Writes a `tools/call` request:
/// `{"jsonrpc":"2.0","id":N,"method":"tools/call","params":{"name":…,"arguments":{…}}}`, with
/// `,"_meta":{"progressToken":T}` inside `params` when `progress_token` is given.
///
/// `arguments` is re-emitted compactly ([`Value::write_compact`]); `None` sends `{}`. MCP
/// requires an object: passing any other kind is the caller's error, and is not checked here
/// (the signature is the shared contract's, whose only error is overflow). It is written as
/// given, so the server refuses it with its own JSON-RPC error (-32602), which the caller sees
/// as a refused call; check [`Value::kind`] first to refuse it locally.
pub fn encode_tools_call(
    out: &mut impl Sink,
    id: u64,
    name: &str,
    arguments: Option<Value<'_>>,
    progress_token: Option<u64>,
) -> Result<(), Overflow> {
    encode_tools_call_with(out, id, (name, arguments), progress_token, b"")
}

/// [`encode_tools_call`], with `extra` (members that start with `,`, already JSON: e.g. a
/// 2026 round's `,"inputResponses":{…},"requestState":"…"`) at the end of `params`.
pub fn encode_tools_call_with(
    out: &mut impl Sink,
    id: u64,
    (name, arguments): (&str, Option<Value<'_>>),
    progress_token: Option<u64>,
    extra: &[u8],
) -> Result<(), Overflow> {
    encode_whole(out, |w| {
        tools_call_open(w, id, (name, arguments), progress_token, extra)
    })
}

/// [`encode_tools_call_with`] but its end, which is returned.
pub(crate) fn tools_call_open<S: Sink>(
    out: &mut JsonOut<S>,
    id: u64,
    (name, arguments): (&str, Option<Value<'_>>),
    progress_token: Option<u64>,
    extra: &[u8],
) -> &'static [u8] {
    put_request_head(out, id, "tools/call");
    out.lit(b",\"params\":{\"name\":");
    out.str(name);
    out.lit(b",\"arguments\":");
    match arguments {
        Some(args) => out.json(args),
        None => out.lit(b"{}"),
    }
    out.lit(extra);
    if let Some(token) = progress_token {
        out.lit(b",\"_meta\":{\"progressToken\":");
        out.num(token);
        out.lit(b"}");
    }
    PARAMS_END
}

/// Writes `notifications/cancelled` for the request `request_id`, with a reason for the
/// server's log: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":N,"reason":"…"}}`.
pub fn encode_cancelled(
    out: &mut impl Sink,
    request_id: u64,
    reason: &str,
) -> Result<(), Overflow> {
    encode_whole(out, |w| cancelled_open(w, request_id, reason))
}

/// [`encode_cancelled`] but its end, which is returned.
pub(crate) fn cancelled_open<S: Sink>(
    out: &mut JsonOut<S>,
    request_id: u64,
    reason: &str,
) -> &'static [u8] {
    out.lit(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":",
    );
    out.num(request_id);
    out.lit(b",\"reason\":");
    out.str(reason);
    PARAMS_END
}

/// A JSON-RPC id as the server sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Id<'a> {
    /// A number (kept as written; our requests use non-negative integers).
    Number(Value<'a>),
    /// A string.
    String(JsonStr<'a>),
    /// `null`, or (in a response) no id at all: servers answer that way when they could not
    /// read the request's id.
    Null,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcError<'a> {
    /// The error code (`-32601` method not found, `-32602` invalid params, …).
    pub code: i64,
    /// The human-readable message, still escaped.
    pub message: JsonStr<'a>,
    /// The optional `data` member.
    pub data: Option<Value<'a>>,
}

/// What a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome<'a> {
    /// `result`.
    Result(Value<'a>),
    /// `error`.
    Error(RpcError<'a>),
}

/// One JSON-RPC message from a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Message<'a> {
    /// A response to a request (ours, if the id matches).
    Response {
        /// The id it answers.
        id: Id<'a>,
        /// Result or error.
        outcome: Outcome<'a>,
    },
    /// A request from the server to this client (ping, roots/list, sampling …).
    Request {
        /// The id to answer with.
        id: Id<'a>,
        /// The method name.
        method: JsonStr<'a>,
        /// The params, if present.
        params: Option<Value<'a>>,
    },
    /// A notification (no id), e.g. `notifications/progress`.
    Notification {
        /// The method name.
        method: JsonStr<'a>,
        /// The params, if present.
        params: Option<Value<'a>>,
    },
}

/// Why a JSON value is not a usable JSON-RPC message or MCP result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum RpcDecodeError {
    /// The message (or result) is not a JSON object.
    NotAnObject,
    /// `jsonrpc` is missing or not `"2.0"`.
    BadVersion,
    /// The id is not a number, string or null.
    BadId,
    /// `error` is not an object with an integer `code` and a string `message`.
    BadError,
    /// A response carries both `result` and `error`.
    BothResultAndError,
    /// A response carries neither `result` nor `error`.
    NeitherResultNorError,
    /// `method` is not a string.
    BadMethod,
    /// A batch array with no messages in it.
    EmptyBatch,
    /// A result lacks a required member, or a member has the wrong type (the name says which,
    /// e.g. `"protocolVersion"`, `"tools"`, `"nextCursor"`). An addition to the contract's
    /// variants, for the result readers.
    BadField(&'static str),
}

impl fmt::Display for RpcDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for RpcDecodeError {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        use crate::wire::words::{Arg, Msg};
        let (message, arg) = match self {
            RpcDecodeError::NotAnObject => (Msg::RpcNotObject, Arg::None),
            RpcDecodeError::BadVersion => (Msg::RpcBadVersion, Arg::None),
            RpcDecodeError::BadId => (Msg::RpcBadId, Arg::None),
            RpcDecodeError::BadError => (Msg::RpcBadError, Arg::None),
            RpcDecodeError::BothResultAndError => (Msg::RpcBoth, Arg::None),
            RpcDecodeError::NeitherResultNorError => (Msg::RpcNeither, Arg::None),
            RpcDecodeError::BadMethod => (Msg::RpcBadMethod, Arg::None),
            RpcDecodeError::EmptyBatch => (Msg::RpcEmptyBatch, Arg::None),
            RpcDecodeError::BadField(name) => (Msg::RpcBadField, Arg::Str(name)),
        };
        message.say(out, [arg, Arg::None])
    }
}

impl core::error::Error for RpcDecodeError {}

fn decode_id(v: Value<'_>) -> Result<Id<'_>, RpcDecodeError> {
    match v.kind() {
        Kind::Number => Ok(Id::Number(v)),
        Kind::String => v.as_str().map(Id::String).ok_or(RpcDecodeError::BadId),
        Kind::Null => Ok(Id::Null),
        _ => Err(RpcDecodeError::BadId),
    }
}

fn decode_error(v: Value<'_>) -> Result<RpcError<'_>, RpcDecodeError> {
    let mut code = None;
    let mut message = None;
    let mut data = None;
    if v.kind() != Kind::Object {
        return Err(RpcDecodeError::BadError);
    }
    for (k, m) in v.members() {
        if code.is_none() && k.eq_str("code") {
            code = Some(m.as_i64().ok_or(RpcDecodeError::BadError)?);
        } else if message.is_none() && k.eq_str("message") {
            message = Some(m.as_str().ok_or(RpcDecodeError::BadError)?);
        } else if data.is_none() && k.eq_str("data") {
            data = Some(m);
        }
    }
    match (code, message) {
        (Some(code), Some(message)) => Ok(RpcError {
            code,
            message,
            data,
        }),
        _ => Err(RpcDecodeError::BadError),
    }
}

/// Classifies one JSON-RPC message (one pass over its members; the first of duplicate members
/// counts). A response without an `id` member gets [`Id::Null`], as servers send for errors
/// about unreadable requests.
pub fn decode_message(v: Value<'_>) -> Result<Message<'_>, RpcDecodeError> {
    if v.kind() != Kind::Object {
        return Err(RpcDecodeError::NotAnObject);
    }
    let (mut version, mut id, mut method, mut params, mut result, mut error) =
        (None, None, None, None, None, None);
    for (k, m) in v.members() {
        let slot = if k.eq_str("jsonrpc") {
            &mut version
        } else if k.eq_str("id") {
            &mut id
        } else if k.eq_str("method") {
            &mut method
        } else if k.eq_str("params") {
            &mut params
        } else if k.eq_str("result") {
            &mut result
        } else if k.eq_str("error") {
            &mut error
        } else {
            continue;
        };
        if slot.is_none() {
            *slot = Some(m);
        }
    }
    if !version
        .and_then(|v| v.as_str())
        .is_some_and(|s| s.eq_str("2.0"))
    {
        return Err(RpcDecodeError::BadVersion);
    }
    // A bad method is said before a bad id.
    let method = match method {
        Some(m) => Some(m.as_str().ok_or(RpcDecodeError::BadMethod)?),
        None => None,
    };
    let id = match id {
        Some(id) => Some(decode_id(id)?),
        None => None,
    };
    if let Some(method) = method {
        return Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        });
    }
    let id = id.unwrap_or(Id::Null);
    let outcome = match (result, error) {
        (Some(_), Some(_)) => return Err(RpcDecodeError::BothResultAndError),
        (None, None) => return Err(RpcDecodeError::NeitherResultNorError),
        (Some(r), None) => Outcome::Result(r),
        (None, Some(e)) => Outcome::Error(decode_error(e)?),
    };
    Ok(Message::Response { id, outcome })
}

/// Whether a message (or batch) held the response being waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Found<'a> {
    /// The response to the expected id.
    Match(Outcome<'a>),
    /// Not it: a notification, a server request, or a response to another id (including
    /// `id: null` errors; decode those with [`decode_message`] to show them).
    NoMatch,
}

/// What one message (or batch) is to the request being waited for (the call machine's
/// lookup): small, the message is not moved out.
#[cfg_attr(not(feature = "std"), repr(u32))]
pub(crate) enum Lookup<'m> {
    /// The response to the request.
    Ours(Outcome<'m>),
    /// A response to another request, or a batch without ours.
    OtherResponse,
    /// A server's request or notification: the message, checked.
    Other(Value<'m>),
}

/// Why a lookup found nothing: the message is not JSON, or not JSON-RPC. Small on purpose:
/// the handler's `?` makes its `Failure` in place, not by copying a whole one out of the
/// lookup's result.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FindError {
    /// Not JSON.
    Json(crate::wire::json::JsonError),
    /// Not a JSON-RPC message (or batch).
    Rpc(RpcDecodeError),
}

impl From<crate::wire::json::JsonError> for FindError {
    fn from(e: crate::wire::json::JsonError) -> Self {
        FindError::Json(e)
    }
}

impl From<RpcDecodeError> for FindError {
    fn from(e: RpcDecodeError) -> Self {
        FindError::Rpc(e)
    }
}

/// [`Lookup`] of one message; `null_ok` also takes a response whose id is `null`.
fn look_one(v: Value<'_>, expected: u64, null_ok: bool) -> Result<Lookup<'_>, FindError> {
    Ok(match decode_message(v)? {
        Message::Response {
            id: Id::Number(n),
            outcome,
        } if n.as_u64() == Some(expected) => Lookup::Ours(outcome),
        Message::Response {
            id: Id::Null,
            outcome,
        } if null_ok => Lookup::Ours(outcome),
        Message::Response { .. } => Lookup::OtherResponse,
        _ => Lookup::Other(v),
    })
}

/// Looks for the response to numeric request id `expected` in one message or a batch array
/// ([`find_response`]'s rules); `last_chance` also takes a lone message's response whose id
/// is `null` (never a batch's).
pub(crate) fn look_up(
    v: Value<'_>,
    expected: u64,
    last_chance: bool,
) -> Result<Lookup<'_>, FindError> {
    if v.kind() != Kind::Array {
        return look_one(v, expected, last_chance);
    }
    let mut any = false;
    for element in v.elements() {
        any = true;
        if let Lookup::Ours(outcome) = look_one(element, expected, false)? {
            return Ok(Lookup::Ours(outcome));
        }
    }
    if any {
        Ok(Lookup::OtherResponse)
    } else {
        Err(FindError::Rpc(RpcDecodeError::EmptyBatch))
    }
}

/// Looks for the response to numeric request id `expected` in one message or a batch array.
/// String ids never match a numeric request; ids of another type are `BadId`. In a batch, the
/// first matching response wins, and any malformed element is an error.
pub fn find_response(v: Value<'_>, expected: u64) -> Result<Found<'_>, RpcDecodeError> {
    match look_up(v, expected, false) {
        Ok(Lookup::Ours(outcome)) => Ok(Found::Match(outcome)),
        Ok(_) => Ok(Found::NoMatch),
        Err(FindError::Rpc(e)) => Err(e),
        // `look_up` parses nothing.
        Err(FindError::Json(_)) => Err(RpcDecodeError::NotAnObject),
    }
}

/// A `notifications/progress` notification's params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Progress<'a> {
    /// `progressToken` (number or string, as sent).
    pub token: Value<'a>,
    /// `progress` (a number; Python sends `1.0`, TypeScript `1`).
    pub progress: Value<'a>,
    /// `total`, if given.
    pub total: Option<Value<'a>>,
    /// `message`, if given.
    pub message: Option<JsonStr<'a>>,
}

/// The params of `m` when it is the notification `name` with params.
fn notification_params<'a>(m: &Message<'a>, name: &str) -> Option<Value<'a>> {
    match m {
        Message::Notification {
            method,
            params: Some(params),
        } if method.eq_str(name) => Some(*params),
        _ => None,
    }
}

/// The progress report in `m`, if it is a well-formed `notifications/progress`.
pub fn as_progress<'a>(m: &Message<'a>) -> Option<Progress<'a>> {
    progress_in(notification_params(m, PROGRESS)?)
}

/// The method of a progress notification.
pub(crate) const PROGRESS: &str = "notifications/progress";

/// The method of a log message.
pub(crate) const LOG_MESSAGE: &str = "notifications/message";

/// The params of a `notifications/progress` read as [`as_progress`] reads them (for a caller
/// that has matched the method already).
pub(crate) fn progress_in(params: Value<'_>) -> Option<Progress<'_>> {
    let token = params.get("progressToken")?;
    if !matches!(token.kind(), Kind::Number | Kind::String) {
        return None;
    }
    let progress = params.get("progress")?;
    if progress.kind() != Kind::Number {
        return None;
    }
    let total = params.get("total").filter(|t| t.kind() == Kind::Number);
    let message = params.get_str("message");
    Some(Progress {
        token,
        progress,
        total,
        message,
    })
}

/// The JSON-RPC error code of "URL elicitation required" (`-32042`): the server needs a
/// person to open a URL (`error.data.elicitations[].url`) before the request can succeed.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// A server's log message (`notifications/message`): its level, logger and data as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogNote<'a> {
    /// `level` (a plain string, e.g. `warning`).
    pub level: &'a str,
    /// `logger`, if given.
    pub logger: Option<JsonStr<'a>>,
    /// `data` (any JSON).
    pub data: Value<'a>,
}

/// The log message in `m`, if it is a well-formed `notifications/message`.
pub fn as_log<'a>(m: &Message<'a>) -> Option<LogNote<'a>> {
    log_in(notification_params(m, LOG_MESSAGE)?)
}

/// The params of a `notifications/message` read as [`as_log`] reads them (for a caller that
/// has matched the method already).
pub(crate) fn log_in(params: Value<'_>) -> Option<LogNote<'_>> {
    Some(LogNote {
        level: params.get_str("level")?.as_plain()?,
        logger: params.get_str("logger"),
        data: params.get("data")?,
    })
}

/// What an `initialize` result says about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InitializeResult<'a> {
    /// The negotiated `protocolVersion` (may be one we do not know; see
    /// [`ProtocolVersion::parse`]).
    pub protocol_version: JsonStr<'a>,
    /// `serverInfo.name`, if given.
    pub server_name: Option<JsonStr<'a>>,
    /// `serverInfo.version`, if given.
    pub server_version: Option<JsonStr<'a>>,
}

/// Reads an `initialize` result: `protocolVersion` is required, `serverInfo` optional.
pub fn parse_initialize_result(result: Value<'_>) -> Result<InitializeResult<'_>, RpcDecodeError> {
    if result.kind() != Kind::Object {
        return Err(RpcDecodeError::NotAnObject);
    }
    let protocol_version = result
        .get("protocolVersion")
        .and_then(|v| v.as_str())
        .ok_or(RpcDecodeError::BadField("protocolVersion"))?;
    let info = result.get("serverInfo");
    let field = |name: &str| info.and_then(|i| i.get(name)).and_then(|v| v.as_str());
    Ok(InitializeResult {
        protocol_version,
        server_name: field("name"),
        server_version: field("version"),
    })
}

/// One page of a `tools/list` result.
#[derive(Debug, Clone)]
pub struct ToolsPage<'a> {
    /// The tool objects of this page (read each name with [`tool_name`]).
    pub tools: Elements<'a>,
    /// `nextCursor`, when there is another page (`null` or absent: last page).
    pub next_cursor: Option<JsonStr<'a>>,
}

/// Reads a `tools/list` result: `tools` must be an array; `nextCursor` a string, null or
/// absent.
pub fn parse_tools_page(result: Value<'_>) -> Result<ToolsPage<'_>, RpcDecodeError> {
    let page = parse_page(result, ListMethod::Tools)?;
    Ok(ToolsPage {
        tools: page.items,
        next_cursor: page.next_cursor,
    })
}

/// One page of any list result.
#[derive(Debug, Clone)]
pub struct Page<'a> {
    /// The items of this page (tool, resource, template or prompt objects).
    pub items: Elements<'a>,
    /// `nextCursor`, when there is another page (`null` or absent: last page).
    pub next_cursor: Option<JsonStr<'a>>,
}

/// Reads a page of `list`'s result: its key (`tools`, `resources` …) must be an array;
/// `nextCursor` a string, null or absent.
pub fn parse_page(result: Value<'_>, list: ListMethod) -> Result<Page<'_>, RpcDecodeError> {
    if result.kind() != Kind::Object {
        return Err(RpcDecodeError::NotAnObject);
    }
    let items = result
        .get(list.key())
        .filter(|t| t.kind() == Kind::Array)
        .ok_or(RpcDecodeError::BadField(list.key()))?;
    let next_cursor = match result.get("nextCursor") {
        None => None,
        Some(c) if c.is_null() => None,
        Some(c) => Some(c.as_str().ok_or(RpcDecodeError::BadField("nextCursor"))?),
    };
    Ok(Page {
        items: items.elements(),
        next_cursor,
    })
}

/// A tool object's `name`, if it has a string one.
pub fn tool_name(tool: Value<'_>) -> Option<JsonStr<'_>> {
    tool.get_str("name")
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// True when a JSON-RPC error to tools/call says the tool does not exist on that server
/// (-32601; -32602 whose message says unknown/not found), so failover may try the fallback.
///
/// What the official servers send for an unknown tool (captures of 2026-12, and their sources):
/// rmcp answers JSON-RPC `-32602 "tool not found"`; the TypeScript SDK's newer line answers
/// `-32602` `Tool <name> not found` (1.32 still returns it as an `isError: true` *result* with
/// text `MCP error -32602: Tool <name> not found`); the Python SDK returns an `isError: true`
/// result `Unknown tool: <name>`. So the -32602 test is: the message (ASCII case-insensitive)
/// contains `unknown tool`, or contains both `tool` and `not found`. Results with `isError`
/// are not JSON-RPC errors and are not judged here. The message is matched as sent (escapes not
/// decoded), which is enough for these ASCII phrases.
pub fn is_unknown_tool(err: &RpcError<'_>) -> bool {
    match err.code {
        -32601 => true,
        -32602 => {
            let m = err.message.raw();
            contains_ignore_case(m, b"unknown tool")
                || (contains_ignore_case(m, b"tool") && contains_ignore_case(m, b"not found"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
