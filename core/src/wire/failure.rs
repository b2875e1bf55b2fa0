//! Every way a round trip can fail before a server answered, said so a person can act on it.
//!
//! A `Failure` is the "unreachable" shape (`docs/design.md#result-shapes`): connect, TLS, HTTP
//! status, malformed reply, stream ended early, timed out. A JSON-RPC error or an `isError`
//! result is not a failure (the server answered); those are shaped by `crate::harness::result`.
//! Failures are small values (`Clone`, no allocation) so every waiter of a failed handshake can
//! be handed the same one.

use core::fmt;

use heapless::String;

use super::endpoint::EndpointError;
use super::http::{HttpError, RequestError, RetryAfter, Stage};
use super::json::JsonError;
use super::jsonrpc::RpcDecodeError;
use super::sse::SseError;
pub use crate::buf::{DETAIL_BYTES, Detail};
use crate::buf::{I, Overflow, S, Sink, StrSink, U, Words, fmt_words, say, truncated};

/// The longest task id kept (in [`Failure::Task`] and by a call that became a task); none in
/// a build without tasks (feature `tasks`).
pub const TASK_ID_BYTES: usize = if cfg!(feature = "tasks") { 64 } else { 0 };

/// Bytes of an HTTP error body kept for the message (after trimming).
pub const SNIPPET_BYTES: usize = DETAIL_BYTES;

/// Why an adapter could not open a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConnectErrorKind {
    /// The host name did not resolve.
    Dns,
    /// The peer refused the connection (nothing listens there).
    Refused,
    /// No route, network down, or the connection was reset while opening.
    Unreachable,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// Any other socket error.
    Io,
    /// The endpoint needs something this adapter does not offer (e.g. TLS on the edge).
    Unsupported,
    /// A stdio server's process could not be started, or is no longer running.
    Process,
}

/// A connection that could not be opened: a kind, and the adapter's words for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    /// What kind of failure.
    pub kind: ConnectErrorKind,
    /// The adapter's detail, e.g. the TLS alert (a longer one is cut and ends in `…`).
    pub detail: Detail,
}

impl ConnectError {
    /// A connect error with `detail` cut to [`DETAIL_BYTES`] at a character boundary.
    pub fn new(kind: ConnectErrorKind, detail: &str) -> Self {
        ConnectError {
            kind,
            detail: truncated(detail),
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

impl Words for ConnectError {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        let what = match self.kind {
            ConnectErrorKind::Dns => "host name did not resolve",
            ConnectErrorKind::Refused => "connection refused",
            ConnectErrorKind::Unreachable => "network unreachable",
            ConnectErrorKind::Tls => "TLS handshake failed",
            ConnectErrorKind::Io => "socket error",
            ConnectErrorKind::Unsupported => "not supported by this adapter",
            ConnectErrorKind::Process => "server process not running",
        };
        if self.detail.is_empty() {
            f.put_str(what)
        } else {
            say(f, &[S(what), S(" ("), S(&self.detail), S(")")])
        }
    }
}

/// Which buffer of a call was too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BufferName {
    /// The outgoing request (head and body).
    Request,
    /// The reply: a JSON body, or one SSE event's data.
    Reply,
    /// The flattened, redacted text.
    Text,
    /// The redacted raw reply kept for `raw`.
    Raw,
    /// The tools/list pagination cursor.
    Cursor,
}

impl BufferName {
    fn as_str(self) -> &'static str {
        match self {
            BufferName::Request => "request",
            BufferName::Reply => "reply",
            BufferName::Text => "text",
            BufferName::Raw => "raw reply",
            BufferName::Cursor => "tools/list cursor",
        }
    }
}

/// Why a handshake failed although the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// The server chose a protocol version this client does not speak.
    UnsupportedVersion(String<32>),
    /// The server answered `initialize` with a JSON-RPC error.
    Refused {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message (a longer one is cut and ends in `…`).
        message: Detail,
    },
    /// The `initialize` result lacks a `protocolVersion` string.
    BadResult,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

impl Words for HandshakeError {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        match self {
            HandshakeError::UnsupportedVersion(v) => say(
                f,
                &[
                    S("server chose protocol version '"),
                    S(v),
                    S(
                        "', which this client does not speak (it speaks 2024-11-05, 2025-03-26, \
                       2025-06-18 and 2025-11-25)",
                    ),
                ],
            ),
            HandshakeError::Refused { code, message } => say(
                f,
                &[
                    S("server refused initialize: JSON-RPC error "),
                    I(*code),
                    S(": "),
                    S(message),
                ],
            ),
            HandshakeError::BadResult => {
                f.put_str("initialize result has no protocolVersion string")
            }
        }
    }
}

/// A round trip that did not get an answer from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The endpoint of the slot is not a usable URL.
    Endpoint(EndpointError),
    /// The connection could not be opened.
    Connect(ConnectError),
    /// The call's deadline passed: `tool call timed out`, words harnesses match on
    /// (`docs/design.md#result-shapes`).
    TimedOut,
    /// Writing the request failed: the server closed or reset the connection.
    SendFailed,
    /// Reading the reply failed with a socket error.
    ReadFailed,
    /// The server closed the connection before the reply was complete.
    ClosedEarly(Stage),
    /// The reply's HTTP framing is malformed or over a cap.
    Http(HttpError),
    /// The server answered with a non-success HTTP status.
    Status {
        /// The status code.
        code: u16,
        /// The start of the body (or a JSON-RPC error's message in it), trimmed.
        snippet: String<SNIPPET_BYTES>,
        /// The `retry-after` header, as the server sent it.
        retry_after: Option<RetryAfter>,
    },
    /// The session the request named is gone (404 to a request with a session id).
    SessionExpired,
    /// A 2xx reply that is neither JSON nor an event stream.
    UnexpectedContentType(String<64>),
    /// A 2xx reply to a request that carried no body at all.
    EmptyReply,
    /// The event stream is malformed or over a cap.
    Sse(SseError),
    /// The reply is not valid JSON.
    Json(JsonError),
    /// The reply is JSON but not a JSON-RPC response.
    Rpc(RpcDecodeError),
    /// The reply ended without the response to this request.
    NoResponse,
    /// A buffer of the call was too small.
    TooLarge(BufferName, Overflow),
    /// The request could not be written (a header with CR/LF, …).
    Request(RequestError),
    /// The handshake failed although the server answered.
    Handshake(HandshakeError),
    /// The tool arguments are not a JSON object.
    BadArguments,
    /// A list (tools/list, resources/list …) kept paging past the page cap, or repeated a cursor.
    EndlessPaging,
    /// The reply sent no byte for the idle time (progress and SSE comments count as bytes);
    /// only when an idle timeout is set (`--idle-timeout-ms`, `Options::idle_timeout_ms`).
    Stalled {
        /// The idle time that passed, in ms.
        idle_ms: u64,
        /// It ended a `tools/call` that was written: the tool may still be running.
        call: bool,
    },
    /// A tool call's deadline passed (`--timeout-ms`, `Options::timeout_ms`).
    CallTimedOut {
        /// The call's timeout, in ms.
        ms: u64,
        /// Its `tools/call` was written: the tool may still be running on the server.
        sent: bool,
    },
    /// The connection or the reply stream ended after a `tools/call` was written and before
    /// its response: the server may have run the tool, so it is not sent again.
    MayHaveRun(Broken),
    /// The caller dropped the call before it ended.
    Cancelled,
    /// The server answered 429 or 503 with a `retry-after` the call cannot wait for.
    RetryTooLate {
        /// The status code.
        code: u16,
        /// The delay as the server sent it.
        retry_after: RetryAfter,
    },
    /// A 2026-era server asked for input (`resultType: "input_required"`) and the call has no
    /// input handler: what the server asked for.
    InputRequired(Detail),
    /// A `resultType` this request did not ask for (e.g. `task` without the tasks extension).
    UnexpectedResultType(String<32>),
    /// The tool's `x-mcp-header` annotations are invalid, so its server's list drops it.
    ToolDropped,
    /// The request needs the 2026-07-28 era (e.g. following a task) and the server speaks
    /// an older one.
    NotModern,
    /// The server refused our protocol version (JSON-RPC `-32022`) twice, or listed none we
    /// speak: its versions (`data.supported`, as it listed them, cut to [`DETAIL_BYTES`]).
    VersionRefused(Detail),
    /// The server asked for a capability this build leaves out (a cargo feature of the core,
    /// docs/design.md#capabilities): "this build has no `capability` support: `need`".
    NotBuilt {
        /// The capability, as the feature names it (`tasks`, `input`, …).
        capability: &'static str,
        /// What needed it, e.g. "the tool requires a task".
        need: &'static str,
    },
    /// A call that became a task (the tasks extension) ended without its result.
    Task {
        /// The task's id, as the server gave it.
        id: String<TASK_ID_BYTES>,
        /// How it ended.
        end: TaskEnd,
    },
}

/// Where a written `tools/call`'s reply broke ([`Failure::MayHaveRun`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Broken {
    /// Closed or reset before any byte of the reply.
    BeforeReply,
    /// Closed in the reply's head.
    InHead,
    /// Closed in the middle of the reply body.
    InBody,
    /// A read failed (connection reset) during the reply.
    Reset,
    /// The reply stream ended (and could not be resumed) without the response.
    StreamEnded,
}

/// How a task ended without its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TaskEnd {
    /// The call's deadline passed; the client cancelled the task (`tasks/cancel`).
    TimedOut,
    /// The server says the task was cancelled.
    Cancelled,
    /// The server does not know the task (unknown or expired).
    Gone,
    /// Polling the task failed again and again: the server is unreachable.
    Lost,
}

impl Failure {
    /// An HTTP error status, keeping a trimmed snippet of `body` (no allocation).
    pub fn status(code: u16, body: &[u8]) -> Self {
        Failure::Status {
            code,
            snippet: snippet_of(body),
            retry_after: None,
        }
    }

    /// The failure happened before anything was sent: it says nothing about the server.
    pub fn is_local(&self) -> bool {
        matches!(
            self,
            Failure::Endpoint(_)
                | Failure::BadArguments
                | Failure::Request(_)
                | Failure::TooLarge(BufferName::Request, _)
        )
    }

    /// What kind of unreachable this is, for a harness to branch on.
    pub fn cause(&self) -> Cause {
        match self {
            Failure::Endpoint(_)
            | Failure::BadArguments
            | Failure::Request(_)
            | Failure::TooLarge(BufferName::Request, _) => Cause::Local,
            Failure::Connect(ConnectError {
                kind: ConnectErrorKind::Tls,
                ..
            })
            | Failure::Http(HttpError::TlsRecord) => Cause::Tls,
            Failure::Connect(_) => Cause::Connect,
            Failure::TimedOut | Failure::CallTimedOut { .. } => Cause::TimedOut,
            Failure::Stalled { .. } => Cause::Stalled,
            Failure::Cancelled => Cause::Cancelled,
            Failure::Status { code, .. } | Failure::RetryTooLate { code, .. } => {
                Cause::HttpStatus(*code)
            }
            Failure::SessionExpired => Cause::HttpStatus(404),
            Failure::SendFailed
            | Failure::ReadFailed
            | Failure::ClosedEarly(_)
            | Failure::NoResponse
            | Failure::MayHaveRun(_) => Cause::Truncated,
            Failure::TooLarge(..) => Cause::TooLarge,
            Failure::Http(_)
            | Failure::UnexpectedContentType(_)
            | Failure::EmptyReply
            | Failure::Sse(_)
            | Failure::Json(_)
            | Failure::Rpc(_)
            | Failure::Handshake(_)
            | Failure::UnexpectedResultType(_)
            | Failure::ToolDropped
            | Failure::NotModern
            | Failure::NotBuilt { .. }
            | Failure::VersionRefused(_)
            | Failure::EndlessPaging => Cause::Malformed,
            Failure::InputRequired(_) => Cause::InputRequired,
            Failure::Task {
                end: TaskEnd::TimedOut,
                ..
            } => Cause::TimedOut,
            Failure::Task {
                end: TaskEnd::Lost, ..
            } => Cause::Truncated,
            Failure::Task { .. } => Cause::Malformed,
        }
    }
}

/// Why a call was unreachable, as a type a harness can branch on (the `error` text says more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Cause {
    /// No connection could be opened (DNS, refused, unreachable).
    Connect,
    /// TLS failed (certificate, protocol), or TLS met a plain-HTTP URL.
    Tls,
    /// The server answered with this non-success HTTP status.
    HttpStatus(u16),
    /// The reply is not a valid HTTP / event-stream / JSON-RPC answer.
    Malformed,
    /// The reply ended (closed, reset) before it was complete.
    Truncated,
    /// The call's deadline passed.
    TimedOut,
    /// The reply sent no byte for the idle time.
    Stalled,
    /// The caller dropped the call.
    Cancelled,
    /// A reply (or its text) was over its cap.
    TooLarge,
    /// The call failed before anything was sent (arguments, endpoint, request cap).
    Local,
    /// The server asked for input that the call has no handler for.
    InputRequired,
}

impl Cause {
    /// A short camelCase name (`timedOut`, `httpStatus` …), for JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Connect => "connect",
            Cause::Tls => "tls",
            Cause::HttpStatus(_) => "httpStatus",
            Cause::Malformed => "malformed",
            Cause::Truncated => "truncated",
            Cause::TimedOut => "timedOut",
            Cause::Stalled => "stalled",
            Cause::Cancelled => "cancelled",
            Cause::TooLarge => "tooLarge",
            Cause::Local => "local",
            Cause::InputRequired => "inputRequired",
        }
    }
}

impl From<HttpError> for Failure {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::UnexpectedEof(stage) => Failure::ClosedEarly(stage),
            other => Failure::Http(other),
        }
    }
}

impl From<SseError> for Failure {
    fn from(e: SseError) -> Self {
        Failure::Sse(e)
    }
}

impl From<JsonError> for Failure {
    fn from(e: JsonError) -> Self {
        Failure::Json(e)
    }
}

impl From<RpcDecodeError> for Failure {
    fn from(e: RpcDecodeError) -> Self {
        Failure::Rpc(e)
    }
}

impl From<HandshakeError> for Failure {
    fn from(e: HandshakeError) -> Self {
        Failure::Handshake(e)
    }
}

/// The standard reason phrase of an HTTP status, for messages.
pub fn reason_phrase(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        300..=399 => "Redirect (not followed)",
        _ => "",
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

impl Words for Failure {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        match self {
            // The failures of a capability the build leaves out never happen there: their
            // words are not kept (docs/design.md#capabilities).
            Failure::Handshake(_) | Failure::SessionExpired if !cfg!(feature = "era-2025") => {
                f.put_str("handshake failed (this build has no era-2025 support)")
            }
            Failure::Task { .. } | Failure::NotModern if !cfg!(feature = "tasks") => {
                f.put_str("task failed (this build has no tasks support)")
            }
            Failure::Endpoint(e) => {
                f.put_str("bad endpoint: ")?;
                e.words(f)
            }
            Failure::Connect(e) => {
                f.put_str("could not connect: ")?;
                e.words(f)
            }
            Failure::TimedOut => f.put_str("tool call timed out"),
            Failure::SendFailed => {
                f.put_str("server closed the connection while the request was being sent")
            }
            Failure::ReadFailed => f.put_str("reading the reply failed (connection reset)"),
            Failure::ClosedEarly(Stage::Head) => {
                f.put_str("server closed the connection before the reply head was complete")
            }
            Failure::ClosedEarly(Stage::Body) => {
                f.put_str("server closed the connection in the middle of the reply body")
            }
            // A cap is a limit, not a malformation: say only what was too large.
            Failure::Http(
                e @ (HttpError::HeadTooLarge { .. }
                | HttpError::BodyTooLarge { .. }
                | HttpError::TrailersTooLarge { .. }),
            ) => e.words(f),
            Failure::Http(e @ HttpError::TlsRecord) => e.words(f),
            Failure::Http(e) => {
                f.put_str("malformed HTTP reply: ")?;
                e.words(f)
            }
            Failure::Status {
                code,
                snippet,
                retry_after,
            } => {
                say(f, &[S("HTTP "), U(u64::from(*code))])?;
                let reason = reason_phrase(*code);
                if !reason.is_empty() {
                    say(f, &[S(" "), S(reason)])?;
                }
                if !snippet.is_empty() {
                    say(f, &[S(": "), S(snippet)])?;
                }
                if let Some(r) = retry_after {
                    f.put_str(" (retry-after: ")?;
                    r.words(f)?;
                    f.put_str(")")?;
                }
                Ok(())
            }
            Failure::Stalled { idle_ms, call } => {
                say(
                    f,
                    &[
                        S("server stalled: no byte of the reply for "),
                        U(*idle_ms),
                        S(" ms, the idle timeout (--idle-timeout-ms, Options::idle_timeout_ms; \
                           off by default)"),
                    ],
                )?;
                if *call {
                    f.put_str(": the tool may still be running on the server")?;
                }
                Ok(())
            }
            Failure::CallTimedOut { ms, sent } => {
                say(
                    f,
                    &[
                        S("tool call timed out after "),
                        U(*ms),
                        S(" ms, the call's deadline (--timeout-ms, Options::timeout_ms)"),
                    ],
                )?;
                f.put_str(if *sent {
                    ": the tool may still be running on the server"
                } else {
                    ", before the tool call was sent"
                })
            }
            Failure::MayHaveRun(broken) => {
                f.put_str(match broken {
                    Broken::BeforeReply => {
                        "the connection ended after the tool call was sent and before any reply"
                    }
                    Broken::InHead => {
                        "server closed the connection before the reply head was complete, \
                         after the tool call was sent"
                    }
                    Broken::InBody => {
                        "server closed the connection in the middle of the reply body, before \
                         the tool call's response"
                    }
                    Broken::Reset => {
                        "reading the reply failed (connection reset) before the tool call's \
                         response"
                    }
                    Broken::StreamEnded => {
                        "the reply stream ended without the tool call's response"
                    }
                })?;
                f.put_str(": the tool may have run, so the call was not sent again")
            }
            Failure::Cancelled => f.put_str("the call was cancelled by its caller"),
            Failure::InputRequired(asked) => say(
                f,
                &[
                    S("the server asked for input ("),
                    S(asked),
                    S(") and this call has no input handler"),
                ],
            ),
            Failure::UnexpectedResultType(t) => say(
                f,
                &[
                    S("the server answered with resultType \""),
                    S(t),
                    S("\", which this call did not ask for"),
                ],
            ),
            Failure::Task { id, end } => match end {
                TaskEnd::TimedOut => say(
                    f,
                    &[S("tool call timed out (task "), S(id), S(" was cancelled)")],
                ),
                TaskEnd::Cancelled => say(f, &[S("the server cancelled task "), S(id)]),
                TaskEnd::Gone => say(
                    f,
                    &[S("task "), S(id), S(" is not found or expired on the server")],
                ),
                TaskEnd::Lost => say(
                    f,
                    &[
                        S("lost the server while it ran task "),
                        S(id),
                        S("; the task may still be running there"),
                    ],
                ),
            },
            Failure::VersionRefused(theirs) => {
                f.put_str("the server refused our protocol version (JSON-RPC -32022): it speaks [")?;
                f.put_str(if theirs.is_empty() { "none listed" } else { theirs })?;
                f.put_str("]; this client speaks [")?;
                for (i, v) in crate::wire::era::MODERN_VERSIONS.iter().enumerate() {
                    if i > 0 {
                        f.put_str(", ")?;
                    }
                    f.put_str(v)?;
                }
                f.put_str("]")
            }
            Failure::NotModern => f.put_str(
                "the server does not speak the 2026-07-28 protocol, which tasks need",
            ),
            Failure::NotBuilt { capability, need } => {
                f.put_str("this build has no ")?;
                f.put_str(capability)?;
                f.put_str(" support: ")?;
                f.put_str(need)
            }
            Failure::ToolDropped => f.put_str(
                "the tool's x-mcp-header annotations are invalid, so its server's tool list drops it",
            ),
            Failure::RetryTooLate { code, retry_after } => {
                say(f, &[S("HTTP "), U(u64::from(*code))])?;
                let reason = reason_phrase(*code);
                if !reason.is_empty() {
                    say(f, &[S(" "), S(reason)])?;
                }
                f.put_str(" with retry-after: ")?;
                retry_after.words(f)?;
                f.put_str(", longer than the call can wait")
            }
            Failure::SessionExpired => {
                f.put_str("HTTP 404 Not Found: the server no longer knows this session")
            }
            Failure::UnexpectedContentType(ct) => say(
                f,
                &[
                    S("reply has content-type '"),
                    S(ct),
                    S("', expected application/json or text/event-stream"),
                ],
            ),
            Failure::EmptyReply => f.put_str("reply has no body; expected a JSON-RPC response"),
            // The decoder's only error is its event cap: a limit, said as such.
            Failure::Sse(e) => e.words(f),
            Failure::Json(e) => {
                f.put_str("reply is not valid JSON: ")?;
                e.words(f)
            }
            Failure::Rpc(e) => {
                f.put_str("reply is not a JSON-RPC response: ")?;
                e.words(f)
            }
            Failure::NoResponse => {
                f.put_str("reply stream ended without a response to this request")
            }
            Failure::TooLarge(which, o) => {
                say(f, &[S(which.as_str()), S(" buffer too small: ")])?;
                o.words(f)
            }
            Failure::Request(e) => {
                f.put_str("could not write the request: ")?;
                e.words(f)
            }
            Failure::Handshake(e) => {
                f.put_str("handshake failed: ")?;
                e.words(f)
            }
            Failure::BadArguments => f.put_str("tool arguments must be a JSON object"),
            Failure::EndlessPaging => {
                f.put_str("the server kept paging (repeated cursor or over 1000 pages)")
            }
        }
    }
}

/// A one-line, trimmed, valid-UTF-8 start of an error body. A JSON-RPC error body gives its
/// `error.message` (what TypeScript and Python servers put there); anything else its text.
fn snippet_of(body: &[u8]) -> String<SNIPPET_BYTES> {
    use super::json::{JsonLimits, Value};
    let message = Value::parse(body, JsonLimits::default())
        .ok()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str());
    if let Some(msg) = message {
        let mut out = StrSink::<SNIPPET_BYTES>::default();
        // A message longer than the snippet is cut, and the cut is marked.
        let cut = msg.unescape_into(&mut out).is_err();
        let mut line = one_line(out.as_str());
        if cut {
            mark_cut(&mut line);
        }
        return line;
    }
    let text = match core::str::from_utf8(body) {
        Ok(s) => s,
        Err(e) => core::str::from_utf8(body.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    };
    one_line(text)
}

fn one_line<const N: usize>(s: &str) -> String<N> {
    let mut out = String::new();
    let mut pending_space = false;
    for ch in s.trim().chars() {
        if ch.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if ch.is_control() {
            continue;
        }
        if (pending_space && out.push(' ').is_err()) || out.push(ch).is_err() {
            mark_cut(&mut out);
            break;
        }
        pending_space = false;
    }
    out
}

/// Ends a string that was cut with `…`, dropping characters to make room for it.
fn mark_cut<const N: usize>(out: &mut String<N>) {
    const MARK: &str = "…";
    if out.ends_with(MARK) || N < MARK.len() {
        return;
    }
    while out.len() + MARK.len() > N {
        if out.pop().is_none() {
            break;
        }
    }
    let _ = out.push_str(MARK);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn timed_out_reads_as_the_seed_says() {
        assert_eq!(Failure::TimedOut.to_string(), "tool call timed out");
    }

    #[test]
    fn status_keeps_the_json_rpc_message_of_the_body() {
        let body = br#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: No valid session ID provided"}}"#;
        assert_eq!(
            Failure::status(400, body).to_string(),
            "HTTP 400 Bad Request: Bad Request: No valid session ID provided"
        );
    }

    #[test]
    fn status_keeps_a_one_line_trimmed_text_body() {
        let body = b"  Not Acceptable: Client must accept\r\n both types \xff\xfe";
        assert_eq!(
            Failure::status(406, body).to_string(),
            "HTTP 406 Not Acceptable: Not Acceptable: Client must accept both types"
        );
        assert_eq!(
            Failure::status(503, b"").to_string(),
            "HTTP 503 Service Unavailable"
        );
    }

    #[test]
    fn snippets_are_capped_and_the_cut_is_marked() {
        let body = [b'a'; 1000];
        match Failure::status(500, &body) {
            Failure::Status { snippet, .. } => {
                assert!(snippet.len() <= SNIPPET_BYTES);
                assert!(snippet.ends_with('…'), "{snippet}");
            }
            other => panic!("{other:?}"),
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-1,"message":"{}"}}}}"#,
            "word ".repeat(200)
        );
        let text = Failure::status(400, body.as_bytes()).to_string();
        assert!(text.ends_with('…'), "{text}");
    }

    #[test]
    fn details_keep_their_whole_text_up_to_the_cap() {
        // Seen in the wild: rustls's detail cut at 64 bytes, mid-word. Now kept whole.
        let detail = "invalid peer certificate: certificate not valid for name \"127.0.0.1\"; \
                      certificate is only valid for DnsName(\"localhost\")";
        let e = ConnectError::new(ConnectErrorKind::Tls, detail);
        assert_eq!(e.detail.as_str(), detail);
        let long = "é".repeat(DETAIL_BYTES);
        let e = ConnectError::new(ConnectErrorKind::Io, &long);
        assert!(e.detail.len() <= DETAIL_BYTES);
        assert!(e.detail.ends_with('…'));
        assert!(e.detail.trim_end_matches('…').chars().all(|c| c == 'é'));
        // Exactly at the cap: no mark.
        let exact = "a".repeat(DETAIL_BYTES);
        assert_eq!(truncated::<DETAIL_BYTES>(&exact).as_str(), exact);
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_kept_as_a_date() {
        assert_eq!(
            RetryAfter::parse(b" 3600 "),
            Some(RetryAfter::Seconds(3600))
        );
        assert_eq!(RetryAfter::Seconds(2).delay_ms(), Some(2000));
        let d = RetryAfter::parse(b"Wed, 21 Oct 2026 07:28:00 GMT").unwrap();
        assert_eq!(d.delay_ms(), None);
        assert_eq!(d.to_string(), "an HTTP date");
        assert_eq!(RetryAfter::parse(b""), None);
        let f = Failure::RetryTooLate {
            code: 429,
            retry_after: RetryAfter::Seconds(3600),
        };
        assert!(f.to_string().contains("3600"), "{f}");
        assert_eq!(f.cause(), Cause::HttpStatus(429));
    }
}
