//! The handlers of replies and the writers of requests and error lines: what a round trip
//! sends and how each kind of reply is read. Pure functions and small structs; the machine in
//! [`super`] sequences them.

use core::fmt::Write as _;

use heapless::String;

use super::MAX_CURSOR;
use super::config::{
    ElicitHandler, Elicitation, LogLevel, LogMessage, LogObserver, MAX_LOG_MESSAGE,
    MAX_PROGRESS_MESSAGE, ProgressObserver, ProgressUpdate, SlotConfig,
};
use crate::buf::Overflow;
use crate::buf::{Buf, Sink};
use crate::buf::{DETAIL_BYTES, StrSink, truncated};
use crate::harness::redact::Redactor;
use crate::wire::content;
use crate::wire::endpoint::Endpoint;
use crate::wire::era::ClientCapabilities;
use crate::wire::exchange::{Expect, OnMessage, Verdict};
use crate::wire::failure::{BufferName, Failure, HandshakeError};
use crate::wire::http::{McpHeaders, Method, RequestHead, write_request_head};
#[cfg(feature = "std")]
use crate::wire::json;
use crate::wire::json::{JsonLimits, Value};
use crate::wire::jsonrpc::{self, Found, ListMethod, Message, Outcome, ProtocolVersion};
use crate::wire::session::Snapshot;

/// The longest message of an error line built here (a JSON-RPC refusal, a failure).
const ERROR_LINE_BYTES: usize = 2 * DETAIL_BYTES + 256;

/// Why `list_tools` gave no list. Its `Display` reads `tools/list failed: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// No server answered.
    Unreachable(Failure),
    /// The server answered tools/list with a JSON-RPC error.
    Refused {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message, redacted (a longer one is cut and ends in `…`).
        message: String<DETAIL_BYTES>,
    },
}

impl ListError {
    /// What happened, without the method: `JSON-RPC error -32002: …` or the failure.
    fn write_reason(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ListError::Unreachable(failure) => write!(f, "{failure}"),
            ListError::Refused { code, message } => {
                write!(f, "JSON-RPC error {code}: {message}")
            }
        }
    }
}

impl core::fmt::Display for ListError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("tools/list failed: ")?;
        self.write_reason(f)
    }
}

/// Why a list or a request other than `tools/list` and `tools/call` gave no answer. Its
/// `Display` reads `<method> failed: …`, e.g.
/// `resources/read failed: JSON-RPC error -32002: Resource not found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodError {
    /// The JSON-RPC method, e.g. `resources/read`.
    pub method: &'static str,
    /// What happened (no server answered, or the server refused).
    pub error: ListError,
    /// The answer came in the 2026-07-28 era (error codes are read by era).
    pub modern: bool,
}

/// `resources/read`'s "not found" in the old era (and still sent by some 2026 servers).
pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
/// `resources/read`'s "not found" in the 2026 era (SEP-2164: JSON-RPC's invalid params).
pub const RESOURCE_NOT_FOUND_MODERN: i64 = -32602;

impl MethodError {
    /// A `resources/read` the server refused because the resource does not exist, read by
    /// era: `-32002` in the old era (where `-32602` is only "invalid params"); `-32602` in
    /// the 2026 era, which renumbered it (the old `-32002` is still taken).
    pub fn not_found(&self) -> bool {
        let ListError::Refused { code, .. } = self.error else {
            return false;
        };
        self.method == "resources/read"
            && (code == RESOURCE_NOT_FOUND_LEGACY
                || (self.modern && code == RESOURCE_NOT_FOUND_MODERN))
    }
}

impl core::fmt::Display for MethodError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} failed: ", self.method)?;
        self.error.write_reason(f)
    }
}

/// What `drive::list` hands its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListItem<'i> {
    /// One item's whole JSON (a resource, template, prompt or tool object), redacted.
    Item(&'i [u8]),
    /// The server failed part-way and the list starts again on the fallback: forget the items
    /// handed over so far.
    Restart,
}

/// The answer to a request (`resources/read`, `prompts/get`, `ping`): the whole `result` object as the server sent it, redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered<'b> {
    /// The redacted JSON text of `result` (valid JSON: a secret is replaced inside strings).
    pub result: &'b [u8],
    /// Wall-clock of the request in ms, failover included.
    pub latency_ms: u64,
}

/// The JSON-RPC message a request carries.
pub(super) enum Body<'x> {
    Initialize {
        id: u64,
        version: ProtocolVersion,
        /// Declare elicitation (the client has a handler for it).
        elicitation: bool,
        /// Declare URL-mode elicitation too.
        elicitation_url: bool,
    },
    Initialized,
    List {
        id: u64,
        list: ListMethod,
        cursor: Option<&'x str>,
    },
    Request {
        id: u64,
        req: jsonrpc::Request<'x>,
        /// [`jsonrpc::encode_request`], named where such a request is made, so a client that
        /// never makes one (the edge's) does not carry the encoder.
        encode: EncodeRequest,
    },
    ToolsCall {
        id: u64,
        tool: &'x str,
        args: Option<Value<'x>>,
        progress: Option<u64>,
        /// A 2026 round's `,"inputResponses":…,"requestState":…` (or nothing).
        extra: &'x [u8],
    },
    Cancelled {
        id: u64,
        reason: &'static str,
    },
    /// The 2026-07-28 era's probe, `server/discover`.
    Discover {
        id: u64,
    },
    /// The client's answer to a server's request (an elicitation's result object with it).
    Answer(&'x ServerRequest, &'x [u8]),
    /// `tasks/get` or `tasks/cancel` (the tasks extension) of a task.
    Task {
        id: u64,
        method: &'static str,
        task: &'x str,
        /// `tasks/update`'s `,"inputResponses":{…}` (or nothing).
        extra: &'x [u8],
    },
    None,
}

impl<'x> Body<'x> {
    /// A request other than the lists and `tools/call`.
    pub(super) fn request(id: u64, req: jsonrpc::Request<'x>) -> Self {
        Body::Request {
            id,
            req,
            encode: encode_request_dyn,
        }
    }

    /// Through `dyn Sink`: it runs twice per request (to count, then to write), and the
    /// encoders exist once in the binary instead of once per sink type.
    fn write(&self, out: &mut dyn Sink) -> Result<(), crate::buf::Overflow> {
        let out = &mut &mut *out;
        match self {
            Body::Initialize {
                id,
                version,
                elicitation,
                elicitation_url,
            } => {
                let caps = ClientCapabilities {
                    elicitation: *elicitation,
                    elicitation_url: *elicitation_url,
                    ..ClientCapabilities::default()
                };
                jsonrpc::encode_initialize_with(out, *id, *version, &caps)
            }
            Body::Initialized => jsonrpc::encode_initialized(out),
            Body::List { id, list, cursor } => jsonrpc::encode_list(out, *id, *list, *cursor),
            Body::Request { id, req, encode } => encode(out, *id, req),
            Body::ToolsCall {
                id,
                tool,
                args,
                progress,
                extra,
            } => jsonrpc::encode_tools_call_with(out, *id, (tool, *args), *progress, extra),
            Body::Cancelled { id, reason } => jsonrpc::encode_cancelled(out, *id, reason),
            // `_meta` is added by the modern writer, as to every 2026 request.
            Body::Discover { id } => {
                out.put(b"{\"jsonrpc\":\"2.0\",\"id\":")?;
                crate::buf::put_u64(out, *id)?;
                out.put(b",\"method\":\"server/discover\"}")
            }
            Body::Task {
                id,
                method,
                task,
                extra,
            } => {
                out.put(b"{\"jsonrpc\":\"2.0\",\"id\":")?;
                crate::buf::put_u64(out, *id)?;
                out.put(b",\"method\":\"")?;
                out.put(method.as_bytes())?;
                out.put(b"\",\"params\":{\"taskId\":")?;
                crate::wire::json::write_str_literal(out, task)?;
                out.put(extra)?;
                out.put(b"}}")
            }
            Body::Answer(request, answer) => request.write(*out, answer),
            Body::None => Ok(()),
        }
    }

    /// The id of a request (none for a notification, an answer or no body): a request is what
    /// carries trace context.
    pub(super) fn request_id(&self) -> Option<u64> {
        match *self {
            Body::Initialize { id, .. }
            | Body::List { id, .. }
            | Body::Request { id, .. }
            | Body::ToolsCall { id, .. }
            | Body::Discover { id }
            | Body::Task { id, .. } => Some(id),
            Body::Initialized | Body::Cancelled { .. } | Body::Answer(..) | Body::None => None,
        }
    }

    /// The JSON-RPC method and the `mcp-name` value, for the 2026 era's headers.
    fn method_and_name(&self) -> (&'x str, Option<&'x str>) {
        match *self {
            Body::Initialize { .. } => ("initialize", None),
            Body::Initialized => ("notifications/initialized", None),
            Body::List { list, .. } => (list.method(), None),
            Body::Request { req, .. } => (
                req.method(),
                match req {
                    jsonrpc::Request::ResourcesRead { uri } => Some(uri),
                    jsonrpc::Request::PromptsGet { name, .. } => Some(name),
                    jsonrpc::Request::Ping => None,
                    // If `Mcp-Name` rides on `tasks/*`, it carries the task id.
                    jsonrpc::Request::TaskGet { task } | jsonrpc::Request::TaskCancel { task } => {
                        Some(task)
                    }
                },
            ),
            Body::ToolsCall { tool, .. } => ("tools/call", Some(tool)),
            Body::Cancelled { .. } => ("notifications/cancelled", None),
            Body::Discover { .. } => ("server/discover", None),
            Body::Task { method, task, .. } => (method, Some(task)),
            Body::Answer(..) => ("", None),
            Body::None => ("", None),
        }
    }
}

/// What a 2026-07-28 request adds: `_meta` in its params, `Mcp-*` headers.
#[derive(Clone, Copy)]
pub(super) struct Modern<'x> {
    /// The version in `_meta` and `MCP-Protocol-Version`.
    pub(super) version: &'static str,
    pub(super) caps: ClientCapabilities,
    /// A `progressToken` for `_meta` (the request's id), when someone listens for progress.
    pub(super) progress: Option<u64>,
    /// The lowest level of log messages asked for (`io.modelcontextprotocol/logLevel`), when
    /// someone keeps them.
    pub(super) log_level: Option<LogLevel>,
    /// The tool's `x-mcp-header` pairs (`argument\0Header\0`…) and the call's arguments.
    pub(super) params: &'x [u8],
    pub(super) args: Option<Value<'x>>,
}

/// What a request of either era adds to `_meta` for W3C trace context (SEP-414).
#[derive(Clone, Copy)]
pub(super) struct TraceMeta<'x> {
    /// The request's `traceparent` value.
    pub(super) parent: [u8; crate::machine::config::TRACEPARENT_LEN],
    /// The `tracestate` value (empty: none).
    pub(super) state: &'x str,
    /// An old-era `progressToken`, moved into this `_meta` from the `tools/call` params.
    pub(super) progress: Option<u64>,
}

/// Writes the `_meta` member of a request: the progress token, the trace context and, in the
/// 2026 era, the era's keys.
fn write_meta_member(
    out: &mut impl Sink,
    modern: Option<&Modern<'_>>,
    trace: Option<&TraceMeta<'_>>,
) -> Result<(), Overflow> {
    out.put(b"\"_meta\":{")?;
    let progress = modern
        .and_then(|m| m.progress)
        .or(trace.and_then(|t| t.progress));
    let mut first = true;
    if let Some(token) = progress {
        out.put(b"\"progressToken\":")?;
        crate::buf::put_u64(out, token)?;
        first = false;
    }
    if let Some(t) = trace {
        out.put(if first { b"" } else { b"," })?;
        // The value is hex digits and dashes: no escaping needed.
        out.put(b"\"traceparent\":\"")?;
        out.put(&t.parent)?;
        out.put(b"\"")?;
        if !t.state.is_empty() {
            out.put(b",\"tracestate\":")?;
            crate::wire::json::write_str_literal(out, t.state)?;
        }
        first = false;
    }
    if let Some(m) = modern {
        out.put(if first { b"" } else { b"," })?;
        crate::wire::era::write_meta_keys(out, m.version, &m.caps)?;
        if let Some(level) = m.log_level {
            out.put(b",\"io.modelcontextprotocol/logLevel\":\"")?;
            out.put(level.as_str().as_bytes())?;
            out.put(b"\"")?;
        }
    }
    out.put(b"}")
}

/// Passes a JSON-RPC message through, holding back its last two bytes, so that `_meta` can be
/// put into its `params` at the end: `…}}` (params) becomes `…,"_meta":{…}}}`, and `…"}` (no
/// params) becomes `…","params":{"_meta":{…}}}`. One pass, for counting and for writing.
struct MetaSink<'s> {
    inner: &'s mut dyn Sink,
    held: [u8; 2],
    len: usize,
}

impl Sink for MetaSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        if bytes.len() >= 2 {
            self.inner.put(self.held.get(..self.len).unwrap_or(&[]))?;
            let (body, last) = bytes.split_at(bytes.len() - 2);
            self.inner.put(body)?;
            self.held = [
                last.first().copied().unwrap_or(0),
                last.get(1).copied().unwrap_or(0),
            ];
            self.len = 2;
            return Ok(());
        }
        for &b in bytes {
            if self.len == 2 {
                self.inner.put(&self.held[..1])?;
                self.held = [self.held[1], b];
            } else {
                if let Some(slot) = self.held.get_mut(self.len) {
                    *slot = b;
                }
                self.len += 1;
            }
        }
        Ok(())
    }
}

impl MetaSink<'_> {
    /// Writes `_meta` into the params and the held end.
    fn finish(self, m: Option<&Modern<'_>>, t: Option<&TraceMeta<'_>>) -> Result<(), Overflow> {
        let MetaSink { inner, held, len } = self;
        let mut out = inner;
        if len == 2 && held == *b"}}" {
            out.put(b",")?;
        } else {
            out.put(held.get(..len.saturating_sub(1)).unwrap_or(&[]))?;
            out.put(b",\"params\":{")?;
        }
        write_meta_member(&mut out, m, t)?;
        out.put(b"}}")
    }
}

/// The encoder of a [`Body::Request`].
type EncodeRequest =
    fn(&mut &mut dyn Sink, u64, &jsonrpc::Request<'_>) -> Result<(), crate::buf::Overflow>;

/// [`jsonrpc::encode_request`] through `dyn Sink`, as a [`Body::Request`] carries it.
fn encode_request_dyn(
    out: &mut &mut dyn Sink,
    id: u64,
    req: &jsonrpc::Request<'_>,
) -> Result<(), crate::buf::Overflow> {
    jsonrpc::encode_request(out, id, req)
}

/// One request to one server: what to send, and what reply completes it.
pub(super) struct Trip<'x> {
    pub(super) ep: &'x Endpoint<'x>,
    pub(super) method: Method,
    pub(super) snap: Option<&'x Snapshot>,
    pub(super) last_event_id: Option<&'x str>,
    pub(super) body: Body<'x>,
    pub(super) expect: Expect,
    /// In the 2026-07-28 era: `_meta` and the `Mcp-*` headers.
    pub(super) modern: Option<Modern<'x>>,
    /// W3C trace context in `_meta` (either era).
    pub(super) trace: Option<TraceMeta<'x>>,
}

impl<'x> Trip<'x> {
    /// A POST of `body` in the session `snap` (none before the handshake).
    pub(super) fn post(ep: &'x Endpoint<'x>, snap: Option<&'x Snapshot>, body: Body<'x>) -> Self {
        let expect = match body {
            Body::Initialized | Body::Cancelled { .. } | Body::Answer(..) => Expect::Accepted,
            _ => Expect::Response,
        };
        Trip {
            ep,
            method: Method::Post,
            snap,
            last_event_id: None,
            body,
            expect,
            modern: None,
            trace: None,
        }
    }

    /// Writes the body, with `_meta` in the 2026 era.
    fn write_body(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        if self.modern.is_none() && self.trace.is_none() {
            return self.body.write(out);
        }
        let mut sink = MetaSink {
            inner: out,
            held: [0; 2],
            len: 0,
        };
        self.body.write(&mut sink)?;
        sink.finish(self.modern.as_ref(), self.trace.as_ref())
    }

    /// Appends the body (with `_meta` in the 2026 era) to `out`: the same bytes as
    /// [`write_body`](Self::write_body), but `_meta` goes in by cutting the written end
    /// (`}}` or `}`) instead of holding back two bytes of every `put` ([`MetaSink`]).
    #[cfg(feature = "std")]
    fn append_body<B: Buf>(&self, out: &mut B) -> Result<(), Overflow> {
        let start = out.len();
        self.body.write(out)?;
        if self.modern.is_none() && self.trace.is_none() {
            return Ok(());
        }
        let end = out.len();
        if out.bytes().get(start..).is_some_and(|b| b.ends_with(b"}}")) {
            out.truncate(end - 2);
            out.put(b",")?;
        } else {
            out.truncate(end.saturating_sub(1).max(start));
            out.put(b",\"params\":{")?;
        }
        write_meta_member(out, self.modern.as_ref(), self.trace.as_ref())?;
        out.put(b"}}")
    }

    /// Writes the body alone (with `_meta` in the 2026 era) and `\n` into `out`: one line of
    /// newline-delimited JSON-RPC, for a stdio server (the encoders never write a raw newline;
    /// strings escape it). There are no headers on stdio.
    pub(super) fn write_line<B: Buf>(&self, out: &mut B) -> Result<(), Failure> {
        out.clear();
        // The edge keeps the one (`MetaSink`) writer it needs anyway for counting.
        #[cfg(feature = "std")]
        let body = self.append_body(out);
        #[cfg(not(feature = "std"))]
        let body = self.write_body(out);
        body.and_then(|()| out.put(b"\n"))
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))
    }

    /// The request head for a body of `content_length` bytes.
    fn head<'h>(&'h self, cfg: &'h SlotConfig<'_>, content_length: usize) -> RequestHead<'h> {
        let (method, name) = self.body.method_and_name();
        let mcp = self.modern.as_ref().map(|m| McpHeaders {
            method,
            name,
            params: m.params,
            args: m.args,
        });
        RequestHead {
            method: self.method,
            endpoint: self.ep,
            accept_json_and_sse: self.method != Method::Get,
            session_id: self.snap.and_then(|s| s.id()),
            protocol_version: match &self.modern {
                Some(m) => Some(m.version),
                None => self.snap.and_then(|s| s.version_header()),
            },
            last_event_id: self.last_event_id,
            extra_headers: cfg.headers,
            content_length: (self.method == Method::Post).then_some(content_length),
            mcp,
        }
    }

    /// Writes head and body into `out`, so the adapter sends them in one write.
    pub(super) fn write<B: Buf>(&self, out: &mut B, cfg: &SlotConfig<'_>) -> Result<(), Failure> {
        // The host's buffer: the body is encoded once (not counted first, then written), the
        // head after it, and the two swapped in place. Anything that does not fit takes the
        // path below, so its error is the same as ever.
        #[cfg(feature = "std")]
        if let Some(v) = out.vec_buf()
            && self.write_once(v, cfg).is_ok()
        {
            return Ok(());
        }
        out.clear();
        let mut count = crate::buf::CountingSink::default();
        self.write_body(&mut count)
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))?;
        write_request_head(&self.head(cfg, count.count), out).map_err(Failure::Request)?;
        self.write_body(out)
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))
    }

    /// [`write`](Self::write) in one encoding of the body: body, then head, then rotated so
    /// the head comes first. `Err` when anything did not fit (nothing is reported: the caller
    /// writes again the two-pass way, which says what).
    #[cfg(feature = "std")]
    fn write_once(&self, out: &mut crate::buf::VecBuf, cfg: &SlotConfig<'_>) -> Result<(), ()> {
        out.clear();
        self.append_body(out).map_err(drop)?;
        let body = out.len();
        write_request_head(&self.head(cfg, body), out).map_err(drop)?;
        out.bytes_mut().rotate_left(body);
        Ok(())
    }
}

/// Accepts any 2xx (a notification's reply).
pub(super) struct Accept;
impl OnMessage for Accept {
    fn on_message(&mut self, _msg: &[u8], _last: bool) -> Result<Verdict, Failure> {
        Ok(Verdict::Done)
    }
}

/// Handles the answer to the `server/discover` probe: a result naming a version we speak in
/// `supportedVersions` says modern; any other result, or a JSON-RPC error in a 2xx, says an
/// old-era server.
#[derive(Default)]
pub(super) struct ProbeHandler {
    pub(super) id: u64,
    /// `Some(true)`: modern; `Some(false)`: old era.
    pub(super) modern: Option<bool>,
}

impl OnMessage for ProbeHandler {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        match find(msg, self.id, last_chance)? {
            Lookup::Ours(Outcome::Result(r)) => {
                self.modern = Some(crate::wire::era::discover_result_is_modern(r));
                Ok(Verdict::Done)
            }
            Lookup::Ours(Outcome::Error(_)) => {
                self.modern = Some(false);
                Ok(Verdict::Done)
            }
            Lookup::OtherResponse => Ok(Verdict::Hold),
            Lookup::Other(_) => Ok(Verdict::Continue),
        }
    }
}

/// Parses one message and looks for the response to `id`; `last_chance` also takes a
/// response whose id is `null`.
fn find<'m>(msg: &'m [u8], id: u64, last_chance: bool) -> Result<Lookup<'m>, Failure> {
    find_in(Value::parse(msg, JsonLimits::default())?, id, last_chance)
}

/// [`find`] in a message already parsed.
fn find_in(value: Value<'_>, id: u64, last_chance: bool) -> Result<Lookup<'_>, Failure> {
    match jsonrpc::find_response(value, id)? {
        Found::Match(outcome) => Ok(Lookup::Ours(outcome)),
        Found::NoMatch => match jsonrpc::decode_message(value) {
            // The seed's "last data line": a response that names no request (`id: null`) is
            // taken as ours when nothing matched. One that names another request never is.
            Ok(Message::Response {
                id: jsonrpc::Id::Null,
                outcome,
            }) if last_chance => Ok(Lookup::Ours(outcome)),
            Ok(Message::Response { .. }) => Ok(Lookup::OtherResponse),
            Ok(m) => Ok(Lookup::Other(m)),
            // A batch (or anything else) without our response.
            Err(_) => Ok(Lookup::OtherResponse),
        },
    }
}

enum Lookup<'m> {
    Ours(Outcome<'m>),
    OtherResponse,
    Other(Message<'m>),
}

/// Handles the reply to `initialize`.
#[derive(Default)]
pub(super) struct InitHandler {
    pub(super) id: u64,
    pub(super) version: Option<Result<ProtocolVersion, Failure>>,
}
impl OnMessage for InitHandler {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        match find(msg, self.id, last_chance)? {
            Lookup::Ours(Outcome::Result(result)) => {
                let parsed = jsonrpc::parse_initialize_result(result)
                    .map_err(|_| Failure::Handshake(HandshakeError::BadResult))
                    .and_then(|init| {
                        let raw = init.protocol_version.raw();
                        ProtocolVersion::parse(raw).ok_or_else(|| {
                            let shown = core::str::from_utf8(raw).unwrap_or("?");
                            Failure::Handshake(HandshakeError::UnsupportedVersion(truncated(shown)))
                        })
                    });
                self.version = Some(parsed);
                Ok(Verdict::Done)
            }
            Lookup::Ours(Outcome::Error(err)) => {
                self.version = Some(Err(Failure::Handshake(HandshakeError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                })));
                Ok(Verdict::Done)
            }
            Lookup::OtherResponse => Ok(Verdict::Hold),
            Lookup::Other(_) => Ok(Verdict::Continue),
        }
    }
}

/// A server's message, unescaped, cut to [`DETAIL_BYTES`] with a marked cut.
fn unescaped_detail<const N: usize>(message: &crate::wire::json::JsonStr<'_>) -> String<N> {
    let mut out = StrSink::<N>::default();
    match message.unescape_into(&mut out) {
        Ok(()) => truncated(out.as_str()),
        // Cut: make room for the mark.
        Err(_) => {
            let mut s: String<N> = truncated(out.as_str());
            while s.len() + '…'.len_utf8() > N {
                if s.pop().is_none() {
                    break;
                }
            }
            let _ = s.push('…');
            s
        }
    }
}

/// What one server's attempt at a tool call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The tool ran; `is_error`: it reported an error (`isError: true`).
    Result {
        /// The tool's `isError`.
        is_error: bool,
    },
    /// The server refused the call with a JSON-RPC error.
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The error says the tool is unknown.
        unknown_tool: bool,
    },
}

/// Why a tool call's result could not be taken. Small on purpose: the handler holding it
/// lives in the call future across every read (a whole [`Failure`] would be larger).
#[derive(Debug, Clone)]
pub(super) enum Untaken {
    /// The flattened text did not fit the text buffer.
    TextTooLarge(crate::buf::Overflow),
    /// The result is not a tool result object.
    NotAnObject,
    /// `resultType: "input_required"` and no input handler: what the server asked for.
    InputRequired(crate::wire::failure::Detail),
    /// A `resultType` the call did not ask for.
    ResultType(String<32>),
}

impl From<Untaken> for Failure {
    fn from(u: Untaken) -> Self {
        match u {
            Untaken::TextTooLarge(o) => Failure::TooLarge(BufferName::Text, o),
            Untaken::NotAnObject => Failure::Rpc(jsonrpc::RpcDecodeError::NotAnObject),
            Untaken::InputRequired(asked) => Failure::InputRequired(asked),
            Untaken::ResultType(t) => Failure::UnexpectedResultType(t),
        }
    }
}

/// Handles the reply to `tools/call`: flattens and redacts the text, or formats the refusal.
pub(super) struct CallHandler<'x, B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    secrets: &'x [Sec],
    pub(super) text: &'x mut B,
    pub(super) error: &'x mut B,
    raw: Option<&'x mut B>,
    pub(super) answer: Option<Result<Answer, Untaken>>,
    progress: u32,
    /// The slot's config: its progress and log observers.
    cfg: &'x SlotConfig<'x>,
    /// The call sends a progress token (its id): someone listens for progress.
    pub(super) progress_token: bool,
    /// Reading `tools/list` pages for the tools' `x-mcp-header` annotations (2026 era): the
    /// records go to `error` (`name\0` + `argument\0Header\0`… + `\x1e`; a dropped tool's
    /// pairs are `\x15`), the cursor to `text`.
    pub(super) listing: bool,
    /// The listed page came and has a next one.
    pub(super) list_page: Option<bool>,
    /// The call declared the tasks extension (a `resultType: "task"` reply is then taken).
    pub(super) tasks: bool,
    /// The task this call became, once the server answered with one.
    pub(super) task: Option<TaskRef>,
    /// Reading `tasks/get` replies: what the last one said, when it was not the result.
    pub(super) polling: bool,
    pub(super) task_status: Option<TaskStatus>,
    /// A request from the server on the call's stream, not yet answered.
    pub(super) server_request: Option<ServerRequest>,
    /// Follows a task an earlier call became (no `tools/call` of its own).
    attached: bool,
    /// The call is a 2025-11-25 task (`params.task` sent; the result comes by `tasks/result`).
    pub(super) session_task: bool,
    /// How elicitations are answered (none: no handler).
    elicitation: Option<Elicitation>,
    /// The caller's own elicitation handler (before the policy).
    elicit_with: Option<ElicitHandler<'x>>,
    /// A 2026 `input_required` round was answered: `text` holds the next request's
    /// `,"inputResponses":{…},"requestState":…` members; the call is sent again with them.
    pub(super) input_ready: bool,
    /// The server said `notifications/tools/list_changed` on the call's stream (2025 era):
    /// the slot's tool list is stale (see [`SlotState::take_tools_list_changed`]).
    ///
    /// [`SlotState::take_tools_list_changed`]: super::SlotState::take_tools_list_changed
    pub(super) tools_list_changed: bool,
}

/// A request a server sent on a call's stream (old era): `ping`, `elicitation/create`,
/// `sampling/createMessage`, `roots/list` … Without a handler for it the client still answers,
/// so the server does not hold the call waiting: `ping` with an empty result, an elicitation
/// with `decline`, anything else with JSON-RPC `-32601`.
#[derive(Debug, Clone)]
pub(super) struct ServerRequest {
    /// The request's id as JSON text (a number, or a quoted string as written).
    id: String<72>,
    kind: ServerAsks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerAsks {
    Ping,
    Elicitation,
    Other,
}

/// Writes the answer to an elicitation whose `params` are given, as a result object
/// (`{"action":"accept","content":{…}}`, `decline`, `cancel`): the caller's handler's when
/// there is one, else under `policy`: `decline`, `cancel`, or `accept` with the requested
/// schema's defaults (SEP-1034). Accept-defaults fills every field whose `default` fits the
/// field (`usable_default`: a string, integer, number, enum or boolean, or a multi-select
/// enum's strings); a request it cannot answer (a required field without such a default, no
/// requested schema, a URL-mode elicitation) is declined.
pub fn write_elicit_answer(
    out: &mut dyn Sink,
    params: Option<Value<'_>>,
    (policy, handler): (Option<Elicitation>, Option<ElicitHandler<'_>>),
) -> Result<(), Overflow> {
    if let (Some(handler), Some(params)) = (handler, params) {
        return (handler.0)(params, out);
    }
    let policy = policy.unwrap_or(Elicitation::Decline);
    let schema = params.and_then(|p| p.get("requestedSchema"));
    let properties = schema.and_then(|s| s.get("properties"));
    let url_mode = params
        .and_then(|p| p.get("mode"))
        .and_then(|m| m.as_str())
        .is_some_and(|m| m.eq_str("url"));
    let answerable = !url_mode
        && schema.is_some()
        && schema
            .and_then(|s| s.get("required"))
            .into_iter()
            .flat_map(|r| r.elements())
            .all(|name| {
                let name = name.as_str();
                properties
                    .into_iter()
                    .flat_map(|p| p.members())
                    .any(|(k, v)| {
                        name.is_some_and(|n| n.raw() == k.raw()) && usable_default(v).is_some()
                    })
            });
    match policy {
        Elicitation::AcceptDefaults if answerable => {
            out.put(b"{\"action\":\"accept\",\"content\":{")?;
            let mut first = true;
            for (name, prop) in properties.into_iter().flat_map(|p| p.members()) {
                let Some(default) = usable_default(prop) else {
                    continue;
                };
                out.put(if first { b"\"" } else { b",\"" })?;
                first = false;
                out.put(name.raw())?;
                out.put(b"\":")?;
                default.write_compact(&mut &mut *out)?;
            }
            out.put(b"}}")
        }
        Elicitation::Cancel => out.put(b"{\"action\":\"cancel\"}"),
        _ => out.put(b"{\"action\":\"decline\"}"),
    }
}

/// A requested field's `default`, when it is one accept-defaults may send: a value of the
/// field's primitive type (`string`, and so an enum's; `integer`; `number`; `boolean`), or for
/// a multi-select enum (`array`) an array of strings; with no `type`, any string, number or
/// boolean. Anything else (an object, `null`, a value of another type) is no default.
fn usable_default<'v>(prop: Value<'v>) -> Option<Value<'v>> {
    use crate::wire::json::Kind;
    let default = prop.get("default")?;
    let ty = prop.get("type").and_then(|t| t.as_str());
    let is = |name: &str| ty.is_some_and(|t| t.eq_str(name));
    let fits = match default.kind() {
        Kind::String => ty.is_none() || is("string"),
        Kind::Number if is("integer") => default.as_i64().is_some(),
        Kind::Number => ty.is_none() || is("number"),
        Kind::Bool => ty.is_none() || is("boolean"),
        Kind::Array => is("array") && default.elements().all(|e| e.kind() == Kind::String),
        Kind::Null | Kind::Object => false,
    };
    fits.then_some(default)
}

impl ServerRequest {
    pub(super) fn new(
        id: jsonrpc::Id<'_>,
        method: &crate::wire::json::JsonStr<'_>,
    ) -> Option<Self> {
        let mut text: String<72> = String::new();
        match id {
            jsonrpc::Id::Number(n) => text.push_str(core::str::from_utf8(n.raw()).ok()?).ok()?,
            jsonrpc::Id::String(s) => {
                text.push('"').ok()?;
                text.push_str(core::str::from_utf8(s.raw()).ok()?).ok()?;
                text.push('"').ok()?;
            }
            jsonrpc::Id::Null => return None,
        }
        let kind = match method.as_plain() {
            Some("ping") => ServerAsks::Ping,
            Some("elicitation/create") => ServerAsks::Elicitation,
            _ => ServerAsks::Other,
        };
        Some(ServerRequest { id: text, kind })
    }

    /// The answer, as a JSON-RPC response (`answer`: an elicitation's result object).
    pub(super) fn write(&self, out: &mut dyn Sink, answer: &[u8]) -> Result<(), Overflow> {
        out.put(b"{\"jsonrpc\":\"2.0\",\"id\":")?;
        out.put(self.id.as_bytes())?;
        match self.kind {
            ServerAsks::Ping => out.put(b",\"result\":{}}"),
            ServerAsks::Elicitation => {
                out.put(b",\"result\":")?;
                out.put(answer)?;
                out.put(b"}")
            }
            ServerAsks::Other => out.put(
                b",\"error\":{\"code\":-32601,\"message\":\"this client has no handler for it\"}}",
            ),
        }
    }
}

pub(super) use super::config::MAX_TASK_ID;

/// A task a call became: its id and the server's poll interval.
#[derive(Debug, Clone)]
pub(super) struct TaskRef {
    pub(super) id: String<MAX_TASK_ID>,
    pub(super) interval_ms: u64,
}

/// What a `tasks/get` said, when it was not the result.
#[derive(Debug, Clone)]
pub(super) enum TaskStatus {
    /// Not done yet (`working`, or any other status that is not an end).
    Working,
    /// `cancelled`.
    Cancelled,
    /// `input_required`: what the server asked for.
    InputRequired(crate::wire::failure::Detail),
    /// `input_required`, answered under the slot's policy (`text` holds the
    /// `inputResponses` for `tasks/update`).
    InputAnswered,
    /// Ended, its result to be fetched with `tasks/result` (the 2025-11-25 form).
    ResultReady,
    /// A JSON-RPC error: the task is unknown or expired.
    Gone,
}

impl<'x, B: Buf, Sec: AsRef<[u8]>> CallHandler<'x, B, Sec> {
    pub(super) fn new(
        secrets: &'x [Sec],
        text: &'x mut B,
        error: &'x mut B,
        raw: Option<&'x mut B>,
        cfg: &'x SlotConfig<'x>,
    ) -> Self {
        CallHandler {
            id: 0,
            secrets,
            text,
            error,
            raw,
            answer: None,
            progress: 0,
            cfg,
            progress_token: cfg.progress_extends_to_ms.is_some() || cfg.on_progress.is_some(),
            listing: false,
            list_page: None,
            tasks: cfg.capabilities.tasks,
            task: None,
            polling: false,
            task_status: None,
            server_request: None,
            attached: false,
            session_task: false,
            elicitation: cfg.elicitation,
            elicit_with: cfg.elicit_with,
            input_ready: false,
            tools_list_changed: false,
        }
    }

    /// Answers a 2026 `input_required` result under the slot's policy: the next request's
    /// `inputResponses` (one answer per key of `inputRequests`) and the echoed `requestState`
    /// go to `text`. `false` (and `text` empty) when the call cannot answer: no handler, a
    /// request that is not an elicitation, requests not keyed by name, or no room.
    fn answer_input(&mut self, result: Value<'_>) -> bool {
        self.text.clear();
        if self.elicitation.is_none() && self.elicit_with.is_none() {
            return false;
        }
        let policy = (self.elicitation, self.elicit_with);
        let requests = result.get("inputRequests");
        let state = result.get("requestState");
        let keyed = requests.is_some_and(|r| r.kind() == crate::wire::json::Kind::Object);
        let all_elicitations = requests
            .into_iter()
            .flat_map(|r| r.members())
            .all(|(_, r)| {
                r.get("method")
                    .and_then(|m| m.as_str())
                    .is_some_and(|m| m.eq_str("elicitation/create"))
            });
        if !(keyed || requests.is_none() && state.is_some()) || !all_elicitations {
            return false;
        }
        let out: &mut dyn Sink = &mut *self.text;
        let written = (|| {
            out.put(b",\"inputResponses\":{")?;
            let mut first = true;
            for (key, request) in requests.into_iter().flat_map(|r| r.members()) {
                out.put(if first { b"\"" } else { b",\"" })?;
                first = false;
                out.put(key.raw())?;
                out.put(b"\":")?;
                write_elicit_answer(out, request.get("params"), policy)?;
            }
            out.put(b"}")?;
            if let Some(state) = state {
                out.put(b",\"requestState\":")?;
                state.write_compact(&mut &mut *out)?;
            }
            Ok::<(), Overflow>(())
        })();
        if written.is_err() {
            self.text.clear();
            return false;
        }
        self.input_ready = true;
        true
    }

    /// A task's poll interval from a task object (`pollIntervalMs`, absent: none given).
    fn interval_of(task: Value<'_>) -> u64 {
        task.get("pollIntervalMs")
            // The 2025-11-25 form's name for it.
            .or_else(|| task.get("pollInterval"))
            .and_then(|v| v.as_u64())
            .unwrap_or(1_000)
    }

    /// The tool's result (inline in a task's `result`, or the reply itself): flattened and
    /// redacted into `text`.
    fn take_result(&mut self, result: Value<'_>) -> Result<Answer, Untaken> {
        self.text.clear();
        let mut redactor = Redactor::new(self.secrets);
        let mut sink = redactor.sink(&mut *self.text);
        let flat = content::flatten(result, &mut sink).map_err(|e| match e {
            content::ContentError::Overflow(o) => Untaken::TextTooLarge(o),
            _ => Untaken::NotAnObject,
        });
        flat.and_then(|f| {
            sink.finish()
                .map_err(Untaken::TextTooLarge)
                .map(|_| Answer::Result {
                    is_error: f.is_error,
                })
        })
    }

    /// A JSON-RPC error as the call's refusal: its line, redacted, into `error`.
    fn take_refusal(
        &mut self,
        code: i64,
        message: &crate::wire::json::JsonStr<'_>,
        unknown_tool: bool,
    ) -> Answer {
        self.error.clear();
        let mut line = StrSink::<ERROR_LINE_BYTES>::default();
        // A message longer than the line is cut, and the cut marked; the code fits.
        if crate::harness::result::write_rpc_error(&mut line, code, message).is_err() {
            mark_cut(&mut line);
        }
        let _ = redact_into(self.secrets, line.as_str().as_bytes(), self.error);
        Answer::Refused { code, unknown_tool }
    }

    /// A `-32042` (URL elicitation required) as the call's refusal: its line names each URL
    /// the server wants a person to open (`error.data.elicitations[].url`), redacted.
    #[inline(never)]
    fn take_url_elicitation(&mut self, err: &jsonrpc::RpcError<'_>) -> Answer {
        self.error.clear();
        let mut line = StrSink::<ERROR_LINE_BYTES>::default();
        let mut cut =
            crate::harness::result::write_rpc_error(&mut line, err.code, &err.message).is_err();
        let urls = err
            .data
            .and_then(|d| d.get("elicitations"))
            .into_iter()
            .flat_map(|e| e.elements())
            .filter_map(|e| e.get("url").and_then(|u| u.as_str()));
        let mut first = true;
        for url in urls {
            let lead: &[u8] = if first {
                b" (URL elicitation required: a person must open "
            } else {
                b", "
            };
            first = false;
            cut |= line.put(lead).is_err() || url.unescape_into(&mut line).is_err();
        }
        if !first {
            cut |= line.put(b")").is_err();
        }
        if cut {
            mark_cut(&mut line);
        }
        let _ = redact_into(self.secrets, line.as_str().as_bytes(), self.error);
        Answer::Refused {
            code: err.code,
            unknown_tool: false,
        }
    }

    /// One `tasks/get` reply.
    fn on_task_poll(&mut self, outcome: Outcome<'_>) {
        let result = match outcome {
            Outcome::Error(_) => {
                self.task_status = Some(TaskStatus::Gone);
                return;
            }
            Outcome::Result(r) => r,
        };
        let status = result.get("status").and_then(|s| s.as_str());
        let status = status.and_then(|s| s.as_plain()).unwrap_or("");
        if let Some(task) = self.task.as_mut() {
            task.interval_ms = Self::interval_of(result);
        }
        // The task's own words on how it goes (`statusMessage`) go to whoever watches
        // progress, redacted, as a progress update without a number.
        if let (Some(observer), Some(m)) = (
            self.cfg.on_progress,
            result.get("statusMessage").and_then(|m| m.as_str()),
        ) {
            tell_status(observer, &m, self.secrets);
        }
        match status {
            // The 2025-11-25 form: the result (or the tool's error) comes by `tasks/result`.
            "completed" | "failed" if self.session_task && result.get("result").is_none() => {
                self.task_status = Some(TaskStatus::ResultReady);
            }
            "completed" => {
                self.answer = Some(match result.get("result") {
                    Some(inner) => self.take_result(inner),
                    None => Err(Untaken::NotAnObject),
                });
            }
            "failed" => {
                let error = result.get("error");
                let code = error
                    .and_then(|e| e.get("code"))
                    .and_then(|c| c.as_i64())
                    .unwrap_or(-32603);
                let message = error
                    .and_then(|e| e.get("message"))
                    .and_then(|m| m.as_str());
                self.answer = Some(match message {
                    Some(m) => Ok(self.take_refusal(code, &m, false)),
                    None => Err(Untaken::NotAnObject),
                });
            }
            "cancelled" => self.task_status = Some(TaskStatus::Cancelled),
            "input_required" if self.answer_input(result) => {
                self.task_status = Some(TaskStatus::InputAnswered);
            }
            "input_required" => {
                self.task_status = Some(TaskStatus::InputRequired(input_asked(result)));
            }
            _ => self.task_status = Some(TaskStatus::Working),
        }
    }

    /// One `tools/list` page read for its `x-mcp-header` annotations.
    fn on_list_page(&mut self, outcome: Outcome<'_>) -> Result<(), Failure> {
        let Outcome::Result(result) = outcome else {
            // A server that cannot list: the call goes on without annotations.
            self.list_page = Some(false);
            return Ok(());
        };
        let page = jsonrpc::parse_page(result, ListMethod::Tools)?;
        for tool in page.items {
            let Some(name) = jsonrpc::tool_name(tool) else {
                continue;
            };
            let schema = tool.get("inputSchema");
            let headers = schema
                .is_some_and(|s| memchr::memmem::find(s.raw(), b"\"x-mcp-header\"").is_some());
            // `annotations.idempotentHint`: a call of it may be sent again after a broken
            // stream (it does no harm twice).
            let idempotent = tool
                .get("annotations")
                .and_then(|a| a.get("idempotentHint"))
                .is_some_and(|v| v.raw() == b"true");
            // `execution.taskSupport: "required"` (2025-11-25): callable only as a task.
            let task_required = tool
                .get("execution")
                .and_then(|e| e.get("taskSupport"))
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.eq_str("required"));
            if !headers && !idempotent && !task_required {
                continue;
            }
            // A record that does not fit is left out whole (the arena is capped).
            let mark = self.error.len();
            let written = (|| -> Result<(), Overflow> {
                self.error.put(name.raw())?;
                self.error.put(b"\0")?;
                if let Some(schema) = schema.filter(|_| headers) {
                    let pairs = self.error.len();
                    let mut wrote = Ok(());
                    let found = crate::wire::era::header_params(schema, |p| {
                        if wrote.is_ok() {
                            wrote = (|| {
                                p.write_path(&mut *self.error)?;
                                self.error.put(b"\0")?;
                                self.error.put(p.header)?;
                                self.error.put(b"\0")
                            })();
                        }
                    });
                    wrote?;
                    if found.is_err() {
                        self.error.truncate(pairs);
                        self.error.put(b"\x15")?;
                    }
                }
                if idempotent {
                    self.error.put(b"\x06")?;
                }
                if task_required {
                    self.error.put(b"\x07")?;
                }
                self.error.put(b"\x1e")
            })();
            if written.is_err() {
                self.error.truncate(mark);
            }
        }
        let mut next = false;
        if let Some(cursor) = page.next_cursor {
            self.text.clear();
            next = cursor.unescape_into(&mut *self.text).is_ok();
        }
        self.list_page = Some(next);
        Ok(())
    }

    /// The call follows a task an earlier call became (an attached call).
    pub(super) fn attach(&mut self, id: &str) {
        self.attached = true;
        self.task = Some(TaskRef {
            id: truncated(id),
            interval_ms: 1_000,
        });
    }

    /// A new attempt: nothing of the last one is kept.
    pub(super) fn begin_attempt(&mut self) {
        if !self.attached {
            self.task = None;
        }
        self.input_ready = false;
        self.session_task = false;
        self.polling = false;
        self.task_status = None;
        self.text.clear();
        self.error.clear();
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.clear();
        }
        self.answer = None;
    }
}

impl<B: Buf, Sec: AsRef<[u8]>> OnMessage for CallHandler<'_, B, Sec> {
    fn progress_seen(&self) -> u32 {
        self.progress
    }

    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        self.handle(msg, last_chance, None)
    }

    /// On the host, a result is flattened where its message lies and the text takes the
    /// reply's storage (one copy of a big reply in memory, not two).
    #[cfg(feature = "std")]
    fn on_reply(
        &mut self,
        reply: &mut dyn Buf,
        len: usize,
        last_chance: bool,
    ) -> Result<Verdict, Failure> {
        let text_limit = self.text.limit();
        let in_place = len >= content::IN_PLACE_FROM
            && self.text.vec_buf().is_some()
            && reply.vec_buf().is_some_and(|r| r.limit() >= text_limit);
        let msg = reply.bytes().get(..len).unwrap_or(&[]);
        if !in_place {
            return self.handle(msg, last_chance, None);
        }
        let mut slot = Deferral::default();
        let limits = JsonLimits::default();
        // A big text is checked as it is written (`Value::parse_deferring`), when the result
        // is ours and its plan writes every string left unchecked; otherwise parsed whole.
        let (verdict, deferred) = if self.listing || self.polling || self.raw.is_some() {
            (self.handle(msg, last_chance, Some(&mut slot))?, None)
        } else {
            let (value, deferred) = Value::parse_deferring(msg, limits)?;
            // The lookups below cross the result and the big text at once.
            let value = value.knowing(deferred.ends());
            if deferred.is_empty() {
                (
                    self.handle_in(msg, value, last_chance, Some(&mut slot))?,
                    None,
                )
            } else {
                // Looked up once: the lookup reads no deferred string (ids, method names
                // and member names are short), and is used only if the plan covers them.
                let found = find_in(value, self.id, last_chance);
                slot.prebuilt = match found {
                    Ok(Lookup::Ours(Outcome::Result(r))) => content::InPlacePlan::new(msg, r)
                        .ok()
                        .flatten()
                        .filter(|p| p.covers(&deferred)),
                    _ => None,
                };
                if let (Some(_), Ok(found)) = (&slot.prebuilt, found) {
                    let verdict = self.handle_found(msg, found, Some(&mut slot))?;
                    if slot.prebuilt.is_some() {
                        // Not flattened (a task, an input round …): checked now, as `parse`.
                        for &(a, b) in deferred.spans() {
                            json::check_deferred(msg, a, b)?;
                        }
                    }
                    (verdict, Some(deferred))
                } else {
                    let value = Value::parse(msg, limits)?;
                    (
                        self.handle_in(msg, value, last_chance, Some(&mut slot))?,
                        None,
                    )
                }
            }
        };
        if let Some(plan) = slot.plan {
            self.answer = Some(self.take_in_place(plan, reply, deferred.as_ref())?);
        }
        Ok(verdict)
    }
}

/// Where the host's handler leaves a result to flatten in place (see `on_reply`): `prebuilt`
/// is the plan `on_reply` made for the message (taken, not made again), `plan` the one to run.
#[cfg(feature = "std")]
#[derive(Default)]
struct Deferral {
    prebuilt: Option<content::InPlacePlan>,
    plan: Option<content::InPlacePlan>,
}

#[cfg(feature = "std")]
type Defer<'d> = Option<&'d mut Deferral>;
#[cfg(not(feature = "std"))]
type Defer<'d> = Option<&'d mut core::convert::Infallible>;

impl<B: Buf, Sec: AsRef<[u8]>> CallHandler<'_, B, Sec> {
    /// [`InPlacePlan::run`](content::InPlacePlan::run) through the redactor.
    #[cfg(feature = "std")]
    /// `deferred`: the strings `Value::parse_deferring` left for the run to check; a bad one
    /// is the `Failure` the parse would have been.
    fn take_in_place(
        &mut self,
        plan: content::InPlacePlan,
        reply: &mut dyn Buf,
        deferred: Option<&json::Deferred>,
    ) -> Result<Result<Answer, Untaken>, Failure> {
        let mut redactor = Redactor::new(self.secrets);
        let (Some(text), Some(reply)) = (self.text.vec_buf(), reply.vec_buf()) else {
            return Ok(Err(Untaken::NotAnObject));
        };
        let none = json::Deferred::default();
        let run = plan.run_checking(reply, &mut redactor, text, deferred.unwrap_or(&none));
        Ok(match run.inspect_err(|_| text.clear())? {
            Ok(f) => Ok(Answer::Result {
                is_error: f.is_error,
            }),
            Err(content::ContentError::Overflow(o)) => Err(Untaken::TextTooLarge(o)),
            Err(_) => Err(Untaken::NotAnObject),
        })
    }

    /// The result, or (`defer` given) its in-place plan left in `defer`.
    #[cfg(feature = "std")]
    fn take_or_defer(
        &mut self,
        msg: &[u8],
        result: Value<'_>,
        defer: Defer<'_>,
    ) -> Option<Result<Answer, Untaken>> {
        if let Some(slot) = defer {
            self.text.clear();
            if let Some(plan) = slot.prebuilt.take() {
                slot.plan = Some(plan);
                return None;
            }
            match content::InPlacePlan::new(msg, result) {
                Ok(Some(plan)) => {
                    slot.plan = Some(plan);
                    return None;
                }
                Ok(None) => {}
                Err(_) => return Some(Err(Untaken::NotAnObject)),
            }
        }
        Some(self.take_result(result))
    }

    /// `on_message`, and on the host `on_reply` with somewhere to leave an in-place plan.
    #[inline(always)]
    fn handle(
        &mut self,
        msg: &[u8],
        last_chance: bool,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        // On the host the parse notes where the result ends: the id lookup and `resultType`
        // then cross it at once, not by walking it again.
        #[cfg(feature = "std")]
        {
            let (value, ends) = Value::parse_noting(msg, JsonLimits::default())?;
            self.handle_in(msg, value.knowing(&ends), last_chance, defer)
        }
        #[cfg(not(feature = "std"))]
        self.handle_in(
            msg,
            Value::parse(msg, JsonLimits::default())?,
            last_chance,
            defer,
        )
    }

    /// [`handle`](Self::handle) of a message already parsed (`value`, from `msg`).
    #[inline(always)]
    fn handle_in(
        &mut self,
        msg: &[u8],
        value: Value<'_>,
        last_chance: bool,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        self.handle_found(msg, find_in(value, self.id, last_chance)?, defer)
    }

    /// [`handle_in`](Self::handle_in) of a message already looked up.
    #[inline(always)]
    fn handle_found(
        &mut self,
        msg: &[u8],
        found: Lookup<'_>,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        let outcome = match found {
            Lookup::Ours(outcome) if self.listing => {
                self.on_list_page(outcome)?;
                return Ok(Verdict::Done);
            }
            Lookup::Ours(outcome) if self.polling => {
                self.on_task_poll(outcome);
                return Ok(Verdict::Done);
            }
            Lookup::Ours(outcome) => {
                // The round's answers were sent with the request this answers, and a server
                // that answered no longer waits for a request's answer (`text` is the result's
                // from here).
                self.input_ready = false;
                self.server_request = None;
                outcome
            }
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) if self.listing => return Ok(Verdict::Continue),
            Lookup::Other(Message::Request { id, method, params }) => {
                // The server asks the client something on the call's stream: it must get an
                // answer or it may hold the call (`Op` sends it on the side).
                self.server_request = ServerRequest::new(id, &method);
                if self
                    .server_request
                    .as_ref()
                    .is_some_and(|r| r.kind == ServerAsks::Elicitation)
                {
                    // The answer waits in `text` (empty until the call's result) for `Op`
                    // to send; one that does not fit is a decline.
                    self.text.clear();
                    let policy = (self.elicitation, self.elicit_with);
                    if write_elicit_answer(&mut *self.text, params, policy).is_err() {
                        self.text.clear();
                        let _ = self.text.put(b"{\"action\":\"decline\"}");
                    }
                }
                return Ok(Verdict::Continue);
            }
            Lookup::Other(m) => {
                if let Message::Notification { method, .. } = &m
                    && method.eq_str("notifications/tools/list_changed")
                {
                    self.tools_list_changed = true;
                }
                if let Some(p) =
                    jsonrpc::as_progress(&m).filter(|p| p.token.as_u64() == Some(self.id))
                {
                    self.progress = self.progress.wrapping_add(1);
                    if let Some(observer) = self.cfg.on_progress {
                        tell_progress(observer, &p, self.secrets);
                    }
                } else if let Some(observer) = self.cfg.on_log
                    && let Some(note) = jsonrpc::as_log(&m)
                {
                    tell_log(observer, self.cfg.log_level, &note, self.secrets);
                }
                return Ok(Verdict::Continue);
            }
        };
        // The annotation pairs the request was written with are done with.
        self.error.clear();
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.clear();
            redact_into(self.secrets, msg, raw)
                .map_err(|o| Failure::TooLarge(BufferName::Raw, o))?;
        }
        // A task (the tasks extension): taken only when this call declared it; in the
        // 2025-11-25 form (`params.task` sent), the task object is wrapped in `task`.
        // `resultType` is looked up once (each lookup walks the result's members).
        let rtype = match outcome {
            Outcome::Result(result) => result_type(result),
            Outcome::Error(_) => None,
        };
        let task_object = match outcome {
            Outcome::Result(result) if self.tasks && rtype == Some("task") => Some(result),
            Outcome::Result(result) if self.session_task => result.get("task"),
            _ => None,
        };
        if let Some(result) = task_object {
            let id = result
                .get("taskId")
                .and_then(|t| t.as_str())
                .and_then(|t| t.as_plain())
                .filter(|t| !t.is_empty() && t.len() <= MAX_TASK_ID);
            match id {
                Some(id) => {
                    self.task = Some(TaskRef {
                        id: truncated(id),
                        interval_ms: Self::interval_of(result),
                    });
                }
                None => self.answer = Some(Err(Untaken::NotAnObject)),
            }
            return Ok(Verdict::Done);
        }
        // A round of input (2026 era): answered under the slot's policy, the call goes again.
        if let Outcome::Result(result) = outcome
            && rtype == Some("input_required")
            && self.answer_input(result)
        {
            return Ok(Verdict::Done);
        }
        self.answer = Some(match outcome {
            Outcome::Result(result) if rtype.is_some_and(|t| t != "complete") => {
                Err(untaken_result_type(result))
            }
            #[cfg(feature = "std")]
            Outcome::Result(result) => match self.take_or_defer(msg, result, defer) {
                Some(answer) => answer,
                // Taken by `on_reply` once the message may be written over.
                None => return Ok(Verdict::Done),
            },
            #[cfg(not(feature = "std"))]
            Outcome::Result(result) => {
                let _ = defer;
                self.take_result(result)
            }
            Outcome::Error(err) if err.code == jsonrpc::URL_ELICITATION_REQUIRED => {
                Ok(self.take_url_elicitation(&err))
            }
            Outcome::Error(err) => {
                Ok(self.take_refusal(err.code, &err.message, jsonrpc::is_unknown_tool(&err)))
            }
        });
        Ok(Verdict::Done)
    }
}

/// A 2026 result's `resultType` (missing means complete).
fn result_type<'v>(result: Value<'v>) -> Option<&'v str> {
    let t = result.get("resultType")?.as_str()?;
    Some(t.as_plain().unwrap_or("?"))
}

/// Why a result of another `resultType` than `complete` is not the call's answer.
fn untaken_result_type(result: Value<'_>) -> Untaken {
    match result_type(result) {
        Some("input_required") => Untaken::InputRequired(input_asked(result)),
        other => Untaken::ResultType(truncated(other.unwrap_or(""))),
    }
}

/// What a server asked for in `inputRequests`: each request's method (and message), cut to
/// fit.
pub(super) fn input_asked(result: Value<'_>) -> crate::wire::failure::Detail {
    let mut asked = StrSink::<DETAIL_BYTES>::default();
    let requests = result.get("inputRequests");
    let mut first = true;
    let each = requests.into_iter().flat_map(|r| {
        // An object of named requests, or an array of them.
        r.members().map(|(_, v)| v).chain(r.elements())
    });
    for request in each {
        if !first {
            let _ = asked.put(b"; ");
        }
        first = false;
        if let Some(m) = request.get("method").and_then(|m| m.as_str()) {
            let _ = m.unescape_into(&mut asked);
        }
        if let Some(msg) = request
            .get("params")
            .and_then(|p| p.get("message"))
            .and_then(|m| m.as_str())
        {
            let _ = asked.put(b": ");
            let _ = msg.unescape_into(&mut asked);
        }
    }
    if first {
        let _ = asked.put(b"input");
    }
    truncated(asked.as_str())
}

/// Ends a cut line with `…` (dropping what it takes to make room).
pub(crate) fn mark_cut<const N: usize>(line: &mut StrSink<N>) {
    let kept: String<N> = truncated(line.as_str());
    let mut s = kept;
    while s.len() + '…'.len_utf8() > N {
        if s.pop().is_none() {
            break;
        }
    }
    let _ = s.push('…');
    *line = StrSink::default();
    let _ = line.put(s.as_bytes());
}

/// Hands one progress notification to the observer: numbers as written, the message
/// unescaped and redacted (cut to fit).
fn tell_progress<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    p: &jsonrpc::Progress<'_>,
    secrets: &[Sec],
) {
    fn number<'v>(v: &Value<'v>) -> &'v str {
        core::str::from_utf8(v.raw()).unwrap_or("")
    }
    let mut message = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    let mut clean = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    if let Some(m) = &p.message {
        // A longer message is cut; what fits is still redacted whole.
        let _ = m.unescape_into(&mut message);
        let _ = redact_into(secrets, message.as_str().as_bytes(), &mut clean);
    }
    (observer.0)(&ProgressUpdate {
        progress: number(&p.progress),
        total: p.total.as_ref().map(number),
        message: p.message.is_some().then(|| clean.as_str()),
    });
}

/// Hands one server log message at or above `lowest` to the observer: data and logger
/// unescaped and redacted (cut to fit). Out of line: its buffers are on the stack only while
/// a log message is handed over.
#[inline(never)]
fn tell_log<Sec: AsRef<[u8]>>(
    observer: LogObserver<'_>,
    lowest: LogLevel,
    note: &jsonrpc::LogNote<'_>,
    secrets: &[Sec],
) {
    // A level MCP does not name is taken as the lowest: kept only when everything is.
    let level = LogLevel::parse(note.level).unwrap_or(LogLevel::Debug);
    if level < lowest {
        return;
    }
    let mut data = StrSink::<MAX_LOG_MESSAGE>::default();
    let _ = match note.data.as_str() {
        Some(s) => s.unescape_into(&mut data),
        None => data.put(note.data.raw()),
    };
    let mut clean = StrSink::<MAX_LOG_MESSAGE>::default();
    let _ = redact_into(secrets, data.as_str().as_bytes(), &mut clean);
    let mut logger = StrSink::<64>::default();
    let mut clean_logger = StrSink::<64>::default();
    if let Some(l) = &note.logger {
        let _ = l.unescape_into(&mut logger);
        let _ = redact_into(secrets, logger.as_str().as_bytes(), &mut clean_logger);
    }
    (observer.0)(&LogMessage {
        level,
        logger: note.logger.is_some().then(|| clean_logger.as_str()),
        data: clean.as_str(),
    });
}

/// A task's `statusMessage` to a progress observer: `progress` is empty (no number).
fn tell_status<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    m: &crate::wire::json::JsonStr<'_>,
    secrets: &[Sec],
) {
    let mut message = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    let mut clean = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    let _ = m.unescape_into(&mut message);
    let _ = redact_into(secrets, message.as_str().as_bytes(), &mut clean);
    (observer.0)(&ProgressUpdate {
        progress: "",
        total: None,
        message: Some(clean.as_str()),
    });
}

/// Redacts `text` whole into `out`.
pub(crate) fn redact_into<Sec: AsRef<[u8]>>(
    secrets: &[Sec],
    text: &[u8],
    out: &mut impl Sink,
) -> Result<(), crate::buf::Overflow> {
    let mut r = Redactor::new(secrets);
    r.write(text, out)?;
    r.finish(out)
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// `core::fmt::Write` over a `Sink` (for the error messages).
pub(crate) struct FmtSink<'s, S: Sink>(pub(crate) &'s mut S);
impl<S: Sink> core::fmt::Write for FmtSink<'_, S> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.put(s.as_bytes()).map_err(|_| core::fmt::Error)
    }
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// Writes a failure's message, redacted, into `out` (a cut ends in `…`).
pub(crate) fn write_failure<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    failure: &Failure,
    out: &mut B,
) {
    write_line(secrets, format_args!("{failure}"), out);
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// Writes one error line, redacted, into `out`; a line longer than `out` (or than
/// [`ERROR_LINE_BYTES`]) is cut at a character boundary and ends in `…`.
pub(crate) fn write_line<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    args: core::fmt::Arguments<'_>,
    out: &mut B,
) {
    out.clear();
    let mut line = StrSink::<ERROR_LINE_BYTES>::default();
    if FmtSink(&mut line).write_fmt(args).is_err() {
        mark_cut(&mut line);
    }
    if redact_into(secrets, line.as_str().as_bytes(), out).is_ok() {
        return;
    }
    out.clear();
    let mark = "…";
    let s = line.as_str();
    let mut end = out.limit().saturating_sub(mark.len()).min(s.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    // Redact what fits; a secret cut in half by the end is gone with the cut.
    let _ = redact_into(secrets, s.get(..end).unwrap_or("").as_bytes(), out);
    let _ = out.put(mark.as_bytes());
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) fn as_text<B: Buf>(b: &B) -> &str {
    match core::str::from_utf8(b.bytes()) {
        Ok(s) => s,
        Err(e) => {
            core::str::from_utf8(b.bytes().get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or("")
        }
    }
}

/// Handles one page of a list: each item (and its redacted JSON) to the callback, the next
/// cursor kept.
pub(super) struct ListHandler<'x, F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    pub(super) list: ListMethod,
    pub(super) on_item: F,
    /// Scratch for each tool's redacted JSON.
    pub(super) text: &'x mut B,
    secrets: &'x [Sec],
    /// The cursor: the one sent, until a page brings its `nextCursor` (unescaped). Kept in a
    /// caller buffer (a list has no error text), so a list op is no larger than a call.
    pub(super) cursor: &'x mut B,
    pub(super) has_next: bool,
    pub(super) answer: Option<Result<(), ListError>>,
    /// The least `ttlMs` of the pages read (2026 era: how long the list may be kept).
    pub(super) ttl_ms: Option<u64>,
}

impl<'x, F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>>
    ListHandler<'x, F, B, Sec>
{
    pub(super) fn new(
        list: ListMethod,
        on_item: F,
        text: &'x mut B,
        cursor: &'x mut B,
        secrets: &'x [Sec],
    ) -> Self {
        ListHandler {
            id: 0,
            list,
            on_item,
            text,
            secrets,
            cursor,
            has_next: false,
            answer: None,
            ttl_ms: None,
        }
    }
}
impl<F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>> OnMessage
    for ListHandler<'_, F, B, Sec>
{
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(o) => o,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) => return Ok(Verdict::Continue),
        };
        match outcome {
            Outcome::Result(result) => {
                let page = jsonrpc::parse_page(result, self.list)?;
                if let Some(ttl) = result.get("ttlMs").and_then(|t| t.as_u64()) {
                    self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
                }
                for item in page.items {
                    // Everything of an item is returned, so it is redacted.
                    self.text.clear();
                    redact_into(self.secrets, item.raw(), &mut *self.text)
                        .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
                    (self.on_item)(Some((item, self.text.bytes())));
                }
                self.has_next = false;
                if let Some(next) = page.next_cursor {
                    let mut s = StrSink::<MAX_CURSOR>::default();
                    next.unescape_into(&mut s)
                        .map_err(|o| Failure::TooLarge(BufferName::Cursor, o))?;
                    self.cursor.clear();
                    self.cursor
                        .put(s.as_str().as_bytes())
                        .map_err(|o| Failure::TooLarge(BufferName::Cursor, o))?;
                    self.has_next = true;
                }
                self.answer = Some(Ok(()));
            }
            Outcome::Error(err) => {
                self.answer = Some(Err(ListError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                }));
            }
        }
        Ok(Verdict::Done)
    }
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) fn redact_list_error<Sec: AsRef<[u8]>>(secrets: &[Sec], e: ListError) -> ListError {
    match e {
        ListError::Refused { code, message } => {
            let mut out = StrSink::<DETAIL_BYTES>::default();
            let _ = redact_into(secrets, message.as_bytes(), &mut out);
            ListError::Refused {
                code,
                message: truncated(out.as_str()),
            }
        }
        other => other,
    }
}

/// Handles the reply to a [`jsonrpc::Request`]: checks its shape and keeps it, redacted.
pub(super) struct RequestHandler<'x, B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    pub(super) req: jsonrpc::Request<'x>,
    secrets: &'x [Sec],
    pub(super) text: &'x mut B,
    pub(super) answer: Option<Result<(), ListError>>,
}

impl<'x, B: Buf, Sec: AsRef<[u8]>> RequestHandler<'x, B, Sec> {
    pub(super) fn new(req: jsonrpc::Request<'x>, secrets: &'x [Sec], text: &'x mut B) -> Self {
        RequestHandler {
            id: 0,
            req,
            secrets,
            text,
            answer: None,
        }
    }
}

impl<B: Buf, Sec: AsRef<[u8]>> OnMessage for RequestHandler<'_, B, Sec> {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(o) => o,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) => return Ok(Verdict::Continue),
        };
        self.answer = Some(match outcome {
            Outcome::Result(result) => {
                jsonrpc::check_request_result(&self.req, result)?;
                self.text.clear();
                redact_into(self.secrets, result.raw(), &mut *self.text)
                    .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
                Ok(())
            }
            Outcome::Error(err) => Err(ListError::Refused {
                code: err.code,
                message: unescaped_detail(&err.message),
            }),
        });
        Ok(Verdict::Done)
    }
}

#[cfg(test)]
mod method_error_tests {
    use super::*;

    #[test]
    fn resource_not_found_is_read_by_era() {
        let refused = |method, code, modern| MethodError {
            method,
            error: ListError::Refused {
                code,
                message: truncated("x"),
            },
            modern,
        };
        assert!(refused("resources/read", -32002, false).not_found());
        assert!(refused("resources/read", -32002, true).not_found());
        assert!(refused("resources/read", -32602, true).not_found());
        assert!(!refused("resources/read", -32602, false).not_found());
        assert!(!refused("prompts/get", -32602, true).not_found());
    }
}

#[cfg(all(test, feature = "std"))]
mod request_writing_tests {
    use super::*;
    use crate::buf::{SliceBuf, VecBuf};

    /// Every shape of request, in both eras, with a session and extra headers.
    fn each_trip(check: &mut dyn FnMut(&Trip<'_>, &SlotConfig<'_>)) {
        let ep = Endpoint::parse_base("http://127.0.0.1:8000/x").unwrap();
        let mut cfg = SlotConfig::new("kali", ep, "http://127.0.0.1:8000/x");
        let headers = [("authorization", "Bearer abcd"), ("x-team", "red")];
        cfg.headers = &headers;
        let args = Value::parse(
            br#"{ "text" : "p\u0069ng", "n": [1, 2] }"#,
            JsonLimits::default(),
        )
        .ok();
        let snap = Snapshot {
            session_id: String::try_from("sess-1").ok(),
            version: ProtocolVersion::V2025_06_18,
        };
        let bodies = || {
            [
                Body::ToolsCall {
                    id: 7,
                    tool: "echo",
                    args,
                    progress: Some(7),
                    extra: b"",
                },
                Body::ToolsCall {
                    id: 8,
                    tool: "e\"cho",
                    args: None,
                    progress: None,
                    extra: b",\"task\":{}",
                },
                Body::Initialize {
                    id: 1,
                    version: ProtocolVersion::V2024_11_05,
                    elicitation: true,
                    elicitation_url: true,
                },
                Body::Initialized,
                Body::List {
                    id: 3,
                    list: ListMethod::Tools,
                    cursor: Some("c1"),
                },
                Body::Cancelled { id: 4, reason: "r" },
                Body::Discover { id: 5 },
                Body::Task {
                    id: 6,
                    method: "tasks/get",
                    task: "t-1",
                    extra: b"",
                },
                Body::request(9, jsonrpc::Request::Ping),
                Body::None,
            ]
        };
        let trace = crate::machine::TraceContext {
            trace_id: [0xab; 16],
            flags: 1,
            span_seed: 42,
            state: "k=v",
        };
        for (modern, traced) in [(false, false), (true, false), (false, true), (true, true)] {
            for (with_snap, body) in bodies()
                .into_iter()
                .enumerate()
                .map(|(i, b)| (i % 2 == 0, b))
            {
                // As the operation writes it: with trace context, the progress token moves
                // into the one `_meta`.
                let body = match body {
                    Body::ToolsCall {
                        id,
                        tool,
                        args,
                        extra,
                        ..
                    } if traced => Body::ToolsCall {
                        id,
                        tool,
                        args,
                        progress: None,
                        extra,
                    },
                    body => body,
                };
                let mut trip = Trip::post(&cfg.primary, with_snap.then_some(&snap), body);
                trip.trace = trip
                    .body
                    .request_id()
                    .filter(|_| traced)
                    .map(|id| TraceMeta {
                        parent: trace.traceparent(id),
                        state: trace.state,
                        progress: Some(3),
                    });
                trip.modern = modern.then(|| Modern {
                    version: crate::wire::era::MODERN_VERSION,
                    caps: cfg.declared(),
                    progress: Some(7),
                    log_level: Some(LogLevel::Notice),
                    params: b"text\0Mcp-Param-Text\0",
                    args,
                });
                check(&trip, &cfg);
                let get = Trip {
                    method: Method::Get,
                    last_event_id: Some("ev-3"),
                    ..trip
                };
                check(&get, &cfg);
            }
        }
    }

    #[test]
    fn one_pass_writes_the_bytes_of_two_passes() {
        let mut cases = 0;
        each_trip(&mut |trip, cfg| {
            let mut storage = [0u8; 4096];
            let mut two = SliceBuf::new(&mut storage);
            trip.write(&mut two, cfg).unwrap();
            let mut one = VecBuf::with_limit(4096);
            trip.write(&mut one, cfg).unwrap();
            assert_eq!(
                core::str::from_utf8(one.bytes()).unwrap(),
                core::str::from_utf8(two.bytes()).unwrap()
            );
            // A line for stdio: the body as `write_body` (through `MetaSink`) writes it.
            let mut line = VecBuf::with_limit(4096);
            trip.write_line(&mut line).unwrap();
            let mut held = VecBuf::with_limit(4096);
            trip.write_body(&mut held).unwrap();
            held.put(b"\n").unwrap();
            assert_eq!(line.bytes(), held.bytes());
            cases += 1;
        });
        assert_eq!(cases, 80);
    }

    #[test]
    fn a_traced_request_has_one_meta_with_its_trace_context_and_progress() {
        let mut traced = 0;
        each_trip(&mut |trip, _| {
            let mut body = VecBuf::with_limit(4096);
            trip.write_body(&mut body).unwrap();
            let text = core::str::from_utf8(body.bytes()).unwrap();
            let Some(t) = &trip.trace else {
                assert!(!text.contains("traceparent"), "{text}");
                return;
            };
            // serde_json keeps the last of duplicate keys: count `_meta` in the text too.
            assert_eq!(text.matches("\"_meta\"").count(), 1, "{text}");
            let v: serde_json::Value = serde_json::from_str(text).expect(text);
            let meta = &v["params"]["_meta"];
            let parent = meta["traceparent"].as_str().unwrap();
            assert_eq!(parent.as_bytes(), &t.parent[..]);
            assert_eq!(
                crate::machine::TraceContext::parse_traceparent(parent),
                Some(([0xab; 16], 1)),
                "{parent}"
            );
            assert_eq!(meta["tracestate"], "k=v");
            assert_eq!(
                meta["progressToken"],
                if trip.modern.is_some() { 7 } else { 3 }
            );
            assert_eq!(
                meta.get("io.modelcontextprotocol/protocolVersion")
                    .is_some(),
                trip.modern.is_some()
            );
            traced += 1;
        });
        // Initialize, list, two calls, discover, task, ping; both eras; GET and POST.
        assert_eq!(traced, 7 * 2 * 2);
    }

    #[test]
    fn traceparents_are_well_formed_and_a_span_per_request() {
        use crate::machine::TraceContext;
        let t = TraceContext {
            trace_id: *b"0123456789abcdef",
            flags: 0,
            span_seed: 0,
            state: "",
        };
        let a = t.traceparent(1);
        let a = core::str::from_utf8(&a).unwrap();
        assert!(a.starts_with("00-30313233343536373839616263646566-"), "{a}");
        assert!(a.ends_with("-00"), "{a}");
        let b = t.traceparent(2);
        assert_ne!(a.as_bytes(), &b[..]);
        assert_eq!(
            TraceContext::parse_traceparent(a),
            Some((*b"0123456789abcdef", 0))
        );
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
        ] {
            assert_eq!(TraceContext::parse_traceparent(bad), None, "{bad}");
        }
        assert!(
            TraceContext::parse_traceparent(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later"
            )
            .is_some()
        );
    }

    #[test]
    fn a_request_over_its_cap_fails_as_on_two_passes() {
        each_trip(&mut |trip, cfg| {
            let mut full = VecBuf::with_limit(4096);
            trip.write(&mut full, cfg).unwrap();
            // Every cap short of the request: in the body, in the head, at the very end.
            for cap in [0, 10, full.len() / 2, full.len() - 1] {
                let mut storage = vec![0u8; cap];
                let mut two = SliceBuf::new(&mut storage);
                let mut one = VecBuf::with_limit(cap);
                let expected = trip.write(&mut two, cfg).unwrap_err();
                assert_eq!(
                    trip.write(&mut one, cfg).unwrap_err(),
                    expected,
                    "cap {cap}"
                );
            }
        });
    }
}

#[cfg(all(test, feature = "std"))]
mod elicit_default_tests {
    use super::*;
    use crate::buf::VecBuf;
    use crate::wire::json::JsonLimits;

    /// The answer accept-defaults gives to an elicitation with `schema` as its requested one.
    fn accept_defaults(schema: &str) -> std::string::String {
        let params = std::format!(r#"{{"message":"m","requestedSchema":{schema}}}"#);
        let params = Value::parse(params.as_bytes(), JsonLimits::default()).unwrap();
        let mut out = VecBuf::with_limit(4096);
        write_elicit_answer(
            &mut out,
            Some(params),
            (Some(Elicitation::AcceptDefaults), None),
        )
        .unwrap();
        std::string::String::from_utf8(out.bytes().to_vec()).unwrap()
    }

    #[test]
    fn every_primitive_default_is_filled_and_accepted() {
        // The official SEP-1034 scenario's schema: string, integer, number, enum, boolean.
        let got = accept_defaults(
            r#"{"type":"object","properties":{
                "name":{"type":"string","default":"John Doe"},
                "age":{"type":"integer","default":30},
                "score":{"type":"number","default":95.5},
                "status":{"type":"string","enum":["active","inactive"],"default":"active"},
                "verified":{"type":"boolean","default":true},
                "tags":{"type":"array","items":{"enum":["a","b"]},"default":["a"]},
                "note":{"type":"string"}},"required":[]}"#,
        );
        assert_eq!(
            got,
            r#"{"action":"accept","content":{"name":"John Doe","age":30,"score":95.5,"status":"active","verified":true,"tags":["a"]}}"#
        );
    }

    #[test]
    fn a_default_that_does_not_fit_its_field_is_no_default() {
        // Not sent: an object, a null, a value of another type than the field's.
        let got = accept_defaults(
            r#"{"type":"object","properties":{
                "o":{"type":"object","default":{"x":1}},
                "n":{"type":"string","default":null},
                "i":{"type":"integer","default":2.5},
                "b":{"type":"boolean","default":"yes"},
                "ok":{"type":"boolean","default":false}}}"#,
        );
        assert_eq!(got, r#"{"action":"accept","content":{"ok":false}}"#);
        // A required field whose only default does not fit is a required field without one.
        let got = accept_defaults(
            r#"{"type":"object","properties":{"port":{"type":"integer","default":"443"}},
                "required":["port"]}"#,
        );
        assert_eq!(got, r#"{"action":"decline"}"#);
        let got = accept_defaults(
            r#"{"type":"object","properties":{"who":{"type":"string","default":null}},
                "required":["who"]}"#,
        );
        assert_eq!(got, r#"{"action":"decline"}"#);
    }
}
