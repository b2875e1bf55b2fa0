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
pub use super::words::reason_phrase;
use super::words::{Arg, Fr, Msg, detail_at, reason, tell};
pub use crate::buf::{DETAIL_BYTES, Detail};
use crate::buf::{Overflow, Sink, StrSink, Words, fmt_words, truncated};

/// The longest task id kept (in [`Failure::Task`] and by a call that became a task); none in
/// a build without tasks (feature `tasks`).
pub const TASK_ID_BYTES: usize = if cfg!(feature = "tasks") { 64 } else { 0 };

/// Bytes of an HTTP error body kept for the message (after trimming).
pub const SNIPPET_BYTES: usize = DETAIL_BYTES;

/// Why an adapter could not open a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
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

impl ConnectError {
    /// A connect error with one of the adapters' own details ([`ConnectWhy`]), the same words
    /// as [`ConnectError::new`] with its text.
    pub fn of(kind: ConnectErrorKind, why: ConnectWhy) -> Self {
        // On the edge: the words are fragments of the failures' packed text, no literal of
        // the adapter's own; `ConnectWhy` runs in the fragments' order (checked at build
        // time), so its fragment is an offset, not a table.
        ConnectError {
            kind,
            detail: detail_at(Fr::ConnInvalidName as usize + why as usize),
        }
    }
}

// `ConnectWhy`'s variants in the order of their fragments.
const _: () = {
    let first = Fr::ConnInvalidName as usize;
    assert!(Fr::ConnNameTooLong as usize - first == ConnectWhy::HostNameTooLong as usize);
    assert!(Fr::ConnLookupFailed as usize - first == ConnectWhy::LookupFailed as usize);
    assert!(Fr::ConnNoARecord as usize - first == ConnectWhy::NoARecord as usize);
    assert!(Fr::ConnPoolInUse as usize - first == ConnectWhy::PoolInUse as usize);
    assert!(Fr::ConnSynReset as usize - first == ConnectWhy::SynReset as usize);
    assert!(Fr::ConnSynTimedOut as usize - first == ConnectWhy::SynTimedOut as usize);
    assert!(Fr::ConnNoRoute as usize - first == ConnectWhy::NoRoute as usize);
    assert!(Fr::ConnInvalidState as usize - first == ConnectWhy::InvalidState as usize);
    assert!(Fr::ConnNoIpv6 as usize - first == ConnectWhy::NoIpv6 as usize);
    assert!(Fr::ConnBadIpv6 as usize - first == ConnectWhy::BadIpv6Literal as usize);
    assert!(Fr::ConnNoTls as usize - first == ConnectWhy::NoTls as usize);
};

/// An adapter's detail of a [`ConnectError`] that the core holds the words of
/// ([`ConnectError::of`]); the comment of each variant is its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ConnectWhy {
    /// `invalid host name`
    InvalidHostName,
    /// `host name too long`
    HostNameTooLong,
    /// `lookup failed (no DNS server answered or no such name)`
    LookupFailed,
    /// `no A record`
    NoARecord,
    /// `every socket of the pool is in use`
    PoolInUse,
    /// `peer answered the SYN with RST`
    SynReset,
    /// `no answer to SYN (timed out)`
    SynTimedOut,
    /// `no route to host`
    NoRoute,
    /// `socket in an invalid state`
    InvalidState,
    /// `IPv6 is not enabled in this build (feature proto-ipv6)`
    NoIpv6,
    /// `bad IPv6 literal`
    BadIpv6Literal,
    /// `no TLS in this build (verifi-mcp-embassy's tls feature); use http://`
    NoTls,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

impl Words for ConnectError {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        let what = match self.kind {
            ConnectErrorKind::Dns => Fr::HostNotResolved,
            ConnectErrorKind::Refused => Fr::Refused,
            ConnectErrorKind::Unreachable => Fr::Unreachable,
            ConnectErrorKind::Tls => Fr::TlsFailed,
            ConnectErrorKind::Io => Fr::SocketError,
            ConnectErrorKind::Unsupported => Fr::Unsupported,
            ConnectErrorKind::Process => Fr::NoProcess,
        };
        // Without a detail the message ends after its kind.
        let open = if self.detail.is_empty() {
            Fr::End
        } else {
            Fr::OpenParen
        };
        let message = [what, open, Fr::A0, Fr::Close];
        tell(f, &message, [Arg::Str(&self.detail), Arg::None])
    }
}

/// Which buffer of a call was too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
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
    /// The message of this buffer's overflow: its name is a fragment of the failures' packed
    /// text on the edge, not a literal.
    fn too_large(self) -> Msg {
        match self {
            BufferName::Request => Msg::TooLargeRequest,
            BufferName::Reply => Msg::TooLargeReply,
            BufferName::Text => Msg::TooLargeText,
            BufferName::Raw => Msg::TooLargeRaw,
            BufferName::Cursor => Msg::TooLargeCursor,
        }
    }
}

/// Why a handshake failed although the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
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
            HandshakeError::UnsupportedVersion(v) => {
                Msg::UnsupportedVersion.say(f, [Arg::Str(v), Arg::None])
            }
            HandshakeError::Refused { code, message } => (if *code < 0 {
                Msg::InitRefusedMinus
            } else {
                Msg::InitRefused
            })
            .say(f, [Arg::Num(code.unsigned_abs()), Arg::Str(message)]),
            HandshakeError::BadResult => Msg::BadInitResult.say(f, [Arg::None, Arg::None]),
        }
    }
}

/// A round trip that did not get an answer from the server.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
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

/// A failure is cloned where a call settles and where a failed handshake is handed to every
/// waiter: one copy of the clone for all of them (a derived `Clone` is inlined at each).
impl Clone for Failure {
    #[inline(never)]
    fn clone(&self) -> Self {
        match self {
            Failure::Endpoint(e) => Failure::Endpoint(*e),
            Failure::Connect(e) => Failure::Connect(e.clone()),
            Failure::TimedOut => Failure::TimedOut,
            Failure::SendFailed => Failure::SendFailed,
            Failure::ReadFailed => Failure::ReadFailed,
            Failure::ClosedEarly(s) => Failure::ClosedEarly(*s),
            Failure::Http(e) => Failure::Http(*e),
            Failure::Status {
                code,
                snippet,
                retry_after,
            } => Failure::Status {
                code: *code,
                snippet: snippet.clone(),
                retry_after: *retry_after,
            },
            Failure::SessionExpired => Failure::SessionExpired,
            Failure::UnexpectedContentType(t) => Failure::UnexpectedContentType(t.clone()),
            Failure::EmptyReply => Failure::EmptyReply,
            Failure::Sse(e) => Failure::Sse(*e),
            Failure::Json(e) => Failure::Json(*e),
            Failure::Rpc(e) => Failure::Rpc(*e),
            Failure::NoResponse => Failure::NoResponse,
            Failure::TooLarge(b, o) => Failure::TooLarge(*b, *o),
            Failure::Request(e) => Failure::Request(*e),
            Failure::Handshake(e) => Failure::Handshake(e.clone()),
            Failure::BadArguments => Failure::BadArguments,
            Failure::EndlessPaging => Failure::EndlessPaging,
            Failure::Stalled { idle_ms, call } => Failure::Stalled {
                idle_ms: *idle_ms,
                call: *call,
            },
            Failure::CallTimedOut { ms, sent } => Failure::CallTimedOut {
                ms: *ms,
                sent: *sent,
            },
            Failure::MayHaveRun(b) => Failure::MayHaveRun(*b),
            Failure::Cancelled => Failure::Cancelled,
            Failure::RetryTooLate { code, retry_after } => Failure::RetryTooLate {
                code: *code,
                retry_after: *retry_after,
            },
            Failure::InputRequired(d) => Failure::InputRequired(d.clone()),
            Failure::UnexpectedResultType(t) => Failure::UnexpectedResultType(t.clone()),
            Failure::ToolDropped => Failure::ToolDropped,
            Failure::NotModern => Failure::NotModern,
            Failure::VersionRefused(d) => Failure::VersionRefused(d.clone()),
            Failure::NotBuilt { capability, need } => Failure::NotBuilt { capability, need },
            Failure::Task { id, end } => Failure::Task {
                id: id.clone(),
                end: *end,
            },
        }
    }
}

/// Where a written `tools/call`'s reply broke ([`Failure::MayHaveRun`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
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
#[cfg_attr(not(feature = "std"), repr(u32))]
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

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_words(self, f)
    }
}

impl Words for Failure {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        use Arg::{Num, Says, Str};
        const NO: Arg<'static> = Arg::None;
        let (message, a0, a1): (Msg, Arg<'_>, Arg<'_>) = match self {
            // The failures of a capability the build leaves out never happen there: their
            // words are not kept (docs/design.md#capabilities).
            Failure::Handshake(_) | Failure::SessionExpired if !cfg!(feature = "era-2025") => {
                (Msg::EraMissing, NO, NO)
            }
            Failure::Task { .. } | Failure::NotModern if !cfg!(feature = "tasks") => {
                (Msg::TasksMissing, NO, NO)
            }
            Failure::Endpoint(e) => (Msg::Endpoint, Says(e), NO),
            Failure::Connect(e) => (Msg::Connect, Says(e), NO),
            Failure::TimedOut => (Msg::TimedOut, NO, NO),
            Failure::SendFailed => (Msg::SendFailed, NO, NO),
            Failure::ReadFailed => (Msg::ReadFailed, NO, NO),
            Failure::ClosedEarly(Stage::Head) => (Msg::ClosedInHead, NO, NO),
            Failure::ClosedEarly(Stage::Body) => (Msg::ClosedInBody, NO, NO),
            // A cap is a limit, not a malformation: say only what was too large.
            Failure::Http(
                e @ (HttpError::HeadTooLarge { .. }
                | HttpError::BodyTooLarge { .. }
                | HttpError::TrailersTooLarge { .. }
                | HttpError::TlsRecord),
            ) => (Msg::Said, Says(e), NO),
            Failure::Http(e) => (Msg::MalformedHttp, Says(e), NO),
            Failure::Status {
                code,
                snippet,
                retry_after,
            } => {
                status_line(f, *code)?;
                if !snippet.is_empty() {
                    Msg::Snippet.say(f, [Str(snippet), NO])?;
                }
                match retry_after {
                    Some(r) => (Msg::RetryAfter, Says(r), NO),
                    None => return Ok(()),
                }
            }
            Failure::Stalled { idle_ms, call } => (
                if *call {
                    Msg::StalledInCall
                } else {
                    Msg::Stalled
                },
                Num(*idle_ms),
                NO,
            ),
            Failure::CallTimedOut { ms, sent } => (
                if *sent {
                    Msg::CallTimedOutSent
                } else {
                    Msg::CallTimedOut
                },
                Num(*ms),
                NO,
            ),
            Failure::MayHaveRun(broken) => (
                match broken {
                    Broken::BeforeReply => Msg::BrokenBeforeReply,
                    Broken::InHead => Msg::BrokenInHead,
                    Broken::InBody => Msg::BrokenInBody,
                    Broken::Reset => Msg::BrokenReset,
                    Broken::StreamEnded => Msg::BrokenStreamEnded,
                },
                NO,
                NO,
            ),
            Failure::Cancelled => (Msg::Cancelled, NO, NO),
            Failure::InputRequired(asked) => (Msg::InputRequired, Str(asked), NO),
            Failure::UnexpectedResultType(t) => (Msg::UnexpectedResultType, Str(t), NO),
            Failure::Task { id, end } => return task_words(f, id, *end),
            Failure::VersionRefused(theirs) => (
                // An empty list is said by words of its own (a fragment, not a literal).
                if theirs.is_empty() {
                    Msg::VersionRefusedNone
                } else {
                    Msg::VersionRefused
                },
                Str(theirs),
                // One version (the 2026 era has one so far) is said as it is.
                match crate::wire::era::MODERN_VERSIONS {
                    [only] => Str(only),
                    _ => Says(&OurVersions),
                },
            ),
            Failure::NotModern => (Msg::NotModern, NO, NO),
            Failure::NotBuilt { capability, need } => (Msg::NotBuilt, Str(capability), Str(need)),
            Failure::ToolDropped => (Msg::ToolDropped, NO, NO),
            Failure::RetryTooLate { code, retry_after } => {
                status_line(f, *code)?;
                (Msg::RetryTooLate, Says(retry_after), NO)
            }
            Failure::SessionExpired => (Msg::SessionExpired, Num(404), NO),
            Failure::UnexpectedContentType(ct) => (Msg::ContentType, Str(ct), NO),
            Failure::EmptyReply => (Msg::EmptyReply, NO, NO),
            // The decoder's only error is its event cap: a limit, said as such.
            Failure::Sse(e) => (Msg::Said, Says(e), NO),
            Failure::Json(e) => (Msg::NotJson, Says(e), NO),
            Failure::Rpc(e) => (Msg::NotRpc, Says(e), NO),
            Failure::NoResponse => (Msg::NoResponse, NO, NO),
            Failure::TooLarge(which, o) => (which.too_large(), Says(o), NO),
            Failure::Request(e) => (Msg::NotWritten, Says(e), NO),
            Failure::Handshake(e) => (Msg::Handshake, Says(e), NO),
            Failure::BadArguments => (Msg::BadArguments, NO, NO),
            Failure::EndlessPaging => (Msg::EndlessPaging, NO, NO),
        };
        message.say(f, [a0, a1])
    }
}

/// `HTTP <code>` and the status's reason phrase, when it has one.
fn status_line(f: &mut dyn Sink, code: u16) -> Result<(), Overflow> {
    let (space, r) = match reason(code) {
        Some(r) => (Fr::Space, r),
        None => (Fr::End, Fr::End),
    };
    tell(
        f,
        &[Fr::Http, Fr::A0, space, r],
        [Arg::Num(u64::from(code)), Arg::None],
    )
}

/// The words of a task that ended without its result (feature `tasks`).
fn task_words(f: &mut dyn Sink, id: &str, end: TaskEnd) -> Result<(), Overflow> {
    let message = match end {
        TaskEnd::TimedOut => Msg::TaskTimedOut,
        TaskEnd::Cancelled => Msg::TaskCancelled,
        TaskEnd::Gone => Msg::TaskGone,
        TaskEnd::Lost => Msg::TaskLost,
    };
    message.say(f, [Arg::Str(id), Arg::None])
}

/// The protocol versions this client speaks in the 2026 era, as a list (`a, b`).
struct OurVersions;

impl Words for OurVersions {
    fn words(&self, f: &mut dyn Sink) -> Result<(), Overflow> {
        for (i, v) in crate::wire::era::MODERN_VERSIONS.iter().enumerate() {
            if i > 0 {
                f.put_str(", ")?;
            }
            f.put_str(v)?;
        }
        Ok(())
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
    one_line(crate::buf::utf8_prefix(body))
}

fn one_line<const N: usize>(s: &str) -> String<N> {
    let mut out = String::new();
    let mut pending_space = false;
    // No trim first: leading whitespace leaves no pending space, trailing never gets written.
    for ch in s.chars() {
        if crate::buf::is_white(ch) {
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
    // The whole characters that leave room for the mark (as popping them one by one would).
    let mut end = out.len().min(N - MARK.len());
    while !out.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    out.truncate(end);
    let _ = out.push_str(MARK);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn mark_cut_keeps_the_characters_popping_would() {
        // The former shape: pop characters until the mark fits.
        fn by_pops<const N: usize>(out: &mut String<N>) {
            if out.ends_with("…") || N < 3 {
                return;
            }
            while out.len() + 3 > N {
                out.pop();
            }
            let _ = out.push_str("…");
        }
        for text in [
            "",
            "a",
            "abcdefgh",
            "ééééé",
            "a€b€c€",
            "a😀b😀",
            "ab…",
            "abcde…",
        ] {
            let mut cut = String::<8>::new();
            let _ = cut.push_str(text);
            let mut want = cut.clone();
            mark_cut(&mut cut);
            by_pops(&mut want);
            assert_eq!(cut, want, "{text:?}");
        }
    }

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
    fn connect_why_says_the_adapters_words() {
        for (why, text) in [
            (ConnectWhy::InvalidHostName, "invalid host name"),
            (ConnectWhy::HostNameTooLong, "host name too long"),
            (
                ConnectWhy::LookupFailed,
                "lookup failed (no DNS server answered or no such name)",
            ),
            (ConnectWhy::NoARecord, "no A record"),
            (ConnectWhy::PoolInUse, "every socket of the pool is in use"),
            (ConnectWhy::SynReset, "peer answered the SYN with RST"),
            (ConnectWhy::SynTimedOut, "no answer to SYN (timed out)"),
            (ConnectWhy::NoRoute, "no route to host"),
            (ConnectWhy::InvalidState, "socket in an invalid state"),
            (
                ConnectWhy::NoIpv6,
                "IPv6 is not enabled in this build (feature proto-ipv6)",
            ),
            (ConnectWhy::BadIpv6Literal, "bad IPv6 literal"),
            (
                ConnectWhy::NoTls,
                "no TLS in this build (verifi-mcp-embassy's tls feature); use http://",
            ),
        ] {
            let e = ConnectError::of(ConnectErrorKind::Io, why);
            assert_eq!(e, ConnectError::new(ConnectErrorKind::Io, text));
        }
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
    /// Every failure's words, byte for byte (the edge's compact writer must say the same).
    fn every_failure() -> std::vec::Vec<Failure> {
        use super::super::json::JsonErrorKind;
        let o = Overflow {
            limit: 10,
            needed: 25,
        };
        let mut v = std::vec![
            Failure::Endpoint(EndpointError::BadPort),
            Failure::Endpoint(EndpointError::MissingScheme),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Dns, "")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Refused, "port 80")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Unreachable, "")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Tls, "bad cert")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Io, "")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Unsupported, "x")),
            Failure::Connect(ConnectError::new(ConnectErrorKind::Process, "")),
            Failure::TimedOut,
            Failure::SendFailed,
            Failure::ReadFailed,
            Failure::ClosedEarly(Stage::Head),
            Failure::ClosedEarly(Stage::Body),
            Failure::Http(HttpError::HeadTooLarge { limit: 16384 }),
            Failure::Http(HttpError::BadHead(super::super::http::HeadFault::Token)),
            Failure::Http(HttpError::TooManyHeaders),
            Failure::Http(HttpError::BadContentLength),
            Failure::Http(HttpError::BadChunk),
            Failure::Http(HttpError::ChunkTooLarge),
            Failure::Http(HttpError::BodyTooLarge { limit: u64::MAX }),
            Failure::Http(HttpError::BadSessionId),
            Failure::Http(HttpError::TrailingData),
            Failure::Http(HttpError::UnexpectedEof(Stage::Head)),
            Failure::Http(HttpError::UnexpectedEof(Stage::Body)),
            Failure::Http(HttpError::NotHttp),
            Failure::Http(HttpError::TlsRecord),
            Failure::Http(HttpError::TrailersTooLarge { limit: 0 }),
            Failure::status(500, b""),
            Failure::status(302, b"moved"),
            Failure::status(418, b"teapot"),
            Failure::status(999, b""),
            Failure::Status {
                code: 503,
                snippet: truncated("busy"),
                retry_after: Some(RetryAfter::Seconds(30)),
            },
            Failure::Status {
                code: 429,
                snippet: truncated(""),
                retry_after: Some(RetryAfter::Date),
            },
            Failure::SessionExpired,
            Failure::UnexpectedContentType(truncated("text/html")),
            Failure::EmptyReply,
            Failure::Sse(SseError::EventTooLarge { limit: 4096 }),
            Failure::Rpc(RpcDecodeError::BadField("tools")),
            Failure::Rpc(RpcDecodeError::NotAnObject),
            Failure::NoResponse,
            Failure::Request(RequestError::InvalidHeader),
            Failure::Request(RequestError::Overflow(o)),
            Failure::Handshake(HandshakeError::UnsupportedVersion(truncated("1999-01-01"))),
            Failure::Handshake(HandshakeError::Refused {
                code: -32600,
                message: truncated("no"),
            }),
            Failure::Handshake(HandshakeError::BadResult),
            Failure::BadArguments,
            Failure::EndlessPaging,
            Failure::Stalled {
                idle_ms: 1500,
                call: false,
            },
            Failure::Stalled {
                idle_ms: 0,
                call: true,
            },
            Failure::CallTimedOut {
                ms: 30000,
                sent: false,
            },
            Failure::CallTimedOut {
                ms: 4294967296,
                sent: true,
            },
            Failure::MayHaveRun(Broken::BeforeReply),
            Failure::MayHaveRun(Broken::InHead),
            Failure::MayHaveRun(Broken::InBody),
            Failure::MayHaveRun(Broken::Reset),
            Failure::MayHaveRun(Broken::StreamEnded),
            Failure::Cancelled,
            Failure::RetryTooLate {
                code: 429,
                retry_after: RetryAfter::Seconds(3600),
            },
            Failure::RetryTooLate {
                code: 599,
                retry_after: RetryAfter::Date,
            },
            Failure::InputRequired(truncated("a name")),
            Failure::UnexpectedResultType(truncated("task")),
            Failure::ToolDropped,
            Failure::NotModern,
            Failure::VersionRefused(truncated("")),
            Failure::VersionRefused(truncated("2025-06-18, 2030-01-01")),
            Failure::NotBuilt {
                capability: "tasks",
                need: "the tool requires a task",
            },
            Failure::TooLarge(BufferName::Request, o),
            Failure::TooLarge(BufferName::Reply, o),
            Failure::TooLarge(BufferName::Text, o),
            Failure::TooLarge(BufferName::Raw, o),
            Failure::TooLarge(BufferName::Cursor, o),
        ];
        for kind in [
            JsonErrorKind::UnexpectedEnd,
            JsonErrorKind::UnexpectedByte(b'x'),
            JsonErrorKind::UnexpectedByte(0x07),
            JsonErrorKind::BadEscape,
            JsonErrorKind::BadUnicodeEscape,
            JsonErrorKind::InvalidUtf8,
            JsonErrorKind::ControlInString,
            JsonErrorKind::BadNumber,
            JsonErrorKind::BadLiteral,
            JsonErrorKind::TooDeep { limit: 64 },
            JsonErrorKind::TrailingData,
        ] {
            v.push(Failure::Json(JsonError { kind, offset: 7 }));
        }
        for end in [
            TaskEnd::TimedOut,
            TaskEnd::Cancelled,
            TaskEnd::Gone,
            TaskEnd::Lost,
        ] {
            v.push(Failure::Task {
                id: truncated("t-1"),
                end,
            });
        }
        v
    }

    #[test]
    fn every_failure_says_its_words() {
        let said: std::vec::Vec<std::string::String> =
            every_failure().iter().map(|f| f.to_string()).collect();
        // Words and Display say the same.
        for (f, text) in every_failure().iter().zip(&said) {
            let mut out = StrSink::<1024>::default();
            f.words(&mut out).unwrap();
            assert_eq!(out.as_str(), text);
        }
        if let Ok(path) = std::env::var("WORDS_DUMP") {
            std::fs::write(path, said.join("\n")).unwrap();
        }
        let golden: std::vec::Vec<&str> = GOLDEN.lines().collect();
        assert_eq!(said.len(), golden.len());
        for ((f, got), want) in every_failure().iter().zip(&said).zip(golden) {
            // A capability the build leaves out says so instead.
            let want = match f {
                Failure::Handshake(_) | Failure::SessionExpired if !cfg!(feature = "era-2025") => {
                    "handshake failed (this build has no era-2025 support)"
                }
                Failure::Task { .. } | Failure::NotModern if !cfg!(feature = "tasks") => {
                    "task failed (this build has no tasks support)"
                }
                _ => want,
            };
            // The session id's cap is the handshake era's (none in a build without it).
            let cap = std::format!("than {} bytes", super::super::http::MAX_SESSION_ID);
            let want = want.replace("than 256 bytes", &cap);
            assert_eq!(*got, want, "{f:?}");
        }
    }

    const GOLDEN: &str = r##"bad endpoint: endpoint URL port must be a decimal number in 1..=65535
bad endpoint: endpoint URL has no scheme; write it as http://host[:port]/path
could not connect: host name did not resolve
could not connect: connection refused (port 80)
could not connect: network unreachable
could not connect: TLS handshake failed (bad cert)
could not connect: socket error
could not connect: not supported by this adapter (x)
could not connect: server process not running
tool call timed out
server closed the connection while the request was being sent
reading the reply failed (connection reset)
server closed the connection before the reply head was complete
server closed the connection in the middle of the reply body
HTTP response head is larger than its cap of 16384 bytes
malformed HTTP reply: HTTP response head is malformed: invalid token
malformed HTTP reply: HTTP response has more than 64 header lines
malformed HTTP reply: HTTP response content-length is not a decimal number, or two of them differ
malformed HTTP reply: HTTP chunked body has a malformed chunk size line
malformed HTTP reply: HTTP chunked body has a chunk size that does not fit in 64 bits
HTTP response body is larger than its cap of 18446744073709551615 bytes
malformed HTTP reply: mcp-session-id is empty, longer than 256 bytes or not visible ASCII
malformed HTTP reply: server sent bytes after the end of the HTTP response
malformed HTTP reply: connection closed in the middle of the HTTP response head
malformed HTTP reply: connection closed in the middle of the HTTP response body
malformed HTTP reply: the reply does not start with HTTP/ (is this an MCP HTTP server?)
the server speaks TLS on this port: use https:// for this endpoint
HTTP chunked trailers are larger than their cap of 0 bytes
HTTP 500 Internal Server Error
HTTP 302 Redirect (not followed): moved
HTTP 418: teapot
HTTP 999
HTTP 503 Service Unavailable: busy (retry-after: 30)
HTTP 429 Too Many Requests (retry-after: an HTTP date)
HTTP 404 Not Found: the server no longer knows this session
reply has content-type 'text/html', expected application/json or text/event-stream
reply has no body; expected a JSON-RPC response
server-sent event is larger than its cap of 4096 bytes; raise the event limit or the reply buffer
reply is not a JSON-RPC response: result member "tools" is missing or has the wrong type
reply is not a JSON-RPC response: JSON-RPC message is not a JSON object
reply stream ended without a response to this request
could not write the request: request header is invalid: names must be HTTP tokens and values must not contain CR, LF or NUL
could not write the request: HTTP request head does not fit: needs at least 25 bytes, over its cap of 10 by 15
handshake failed: server chose protocol version '1999-01-01', which this client does not speak (it speaks 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25)
handshake failed: server refused initialize: JSON-RPC error -32600: no
handshake failed: initialize result has no protocolVersion string
tool arguments must be a JSON object
the server kept paging (repeated cursor or over 1000 pages)
server stalled: no byte of the reply for 1500 ms, the idle timeout (--idle-timeout-ms, Options::idle_timeout_ms; off by default)
server stalled: no byte of the reply for 0 ms, the idle timeout (--idle-timeout-ms, Options::idle_timeout_ms; off by default): the tool may still be running on the server
tool call timed out after 30000 ms, the call's deadline (--timeout-ms, Options::timeout_ms), before the tool call was sent
tool call timed out after 4294967296 ms, the call's deadline (--timeout-ms, Options::timeout_ms): the tool may still be running on the server
the connection ended after the tool call was sent and before any reply: the tool may have run, so the call was not sent again
server closed the connection before the reply head was complete, after the tool call was sent: the tool may have run, so the call was not sent again
server closed the connection in the middle of the reply body, before the tool call's response: the tool may have run, so the call was not sent again
reading the reply failed (connection reset) before the tool call's response: the tool may have run, so the call was not sent again
the reply stream ended without the tool call's response: the tool may have run, so the call was not sent again
the call was cancelled by its caller
HTTP 429 Too Many Requests with retry-after: 3600, longer than the call can wait
HTTP 599 with retry-after: an HTTP date, longer than the call can wait
the server asked for input (a name) and this call has no input handler
the server answered with resultType "task", which this call did not ask for
the tool's x-mcp-header annotations are invalid, so its server's tool list drops it
the server does not speak the 2026-07-28 protocol, which tasks need
the server refused our protocol version (JSON-RPC -32022): it speaks [none listed]; this client speaks [2026-07-28]
the server refused our protocol version (JSON-RPC -32022): it speaks [2025-06-18, 2030-01-01]; this client speaks [2026-07-28]
this build has no tasks support: the tool requires a task
request buffer too small: needs at least 25 bytes, over its cap of 10 by 15
reply buffer too small: needs at least 25 bytes, over its cap of 10 by 15
text buffer too small: needs at least 25 bytes, over its cap of 10 by 15
raw reply buffer too small: needs at least 25 bytes, over its cap of 10 by 15
tools/list cursor buffer too small: needs at least 25 bytes, over its cap of 10 by 15
reply is not valid JSON: invalid JSON at byte 7: input ended inside a value (truncated?)
reply is not valid JSON: invalid JSON at byte 7: unexpected byte 'x'
reply is not valid JSON: invalid JSON at byte 7: unexpected byte 0x07
reply is not valid JSON: invalid JSON at byte 7: invalid escape in string
reply is not valid JSON: invalid JSON at byte 7: \u escape not followed by four hex digits
reply is not valid JSON: invalid JSON at byte 7: string is not valid UTF-8
reply is not valid JSON: invalid JSON at byte 7: unescaped control character in string
reply is not valid JSON: invalid JSON at byte 7: malformed number
reply is not valid JSON: invalid JSON at byte 7: malformed literal (true/false/null)
reply is not valid JSON: invalid JSON at byte 7: nested deeper than the limit of 64
reply is not valid JSON: invalid JSON at byte 7: data after the JSON value
tool call timed out (task t-1 was cancelled)
the server cancelled task t-1
task t-1 is not found or expired on the server
lost the server while it ran task t-1; the task may still be running there"##;
}
