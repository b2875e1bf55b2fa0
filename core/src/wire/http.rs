//! `http`: the HTTP/1.1 bytes of one exchange.
//!
//! Owns: writing a request head ([`write_request_head`]) and decoding a response as a push
//! parser ([`ResponseDecoder`]): the head (via `httparse` on the host, a small reader with the same
//! verdicts on the edge; 1xx skipped), then the body under
//! `Content-Length`, `chunked` or close-delimited framing, with caps on head and body size.
//! Does not own: sockets, time, TLS, or what the body means (JSON or SSE is the caller's call,
//! from [`ResponseHead::media_type`]).

use core::fmt;

use crate::buf::{Overflow, Sink, Words, put_u64};
use crate::wire::endpoint::Endpoint;
use crate::wire::json::JsonOut;

/// The request methods an MCP client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Method {
    /// `POST`: every JSON-RPC message.
    Post,
    /// `GET`: opening or resuming a server event stream.
    Get,
    /// `DELETE`: ending a session.
    Delete,
}

impl Method {
    /// The method token as sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Post => "POST",
            Method::Get => "GET",
            Method::Delete => "DELETE",
        }
    }
}

/// Everything that goes into one request head.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: Method,
    /// Where the request goes (target and `host`).
    pub endpoint: &'a Endpoint<'a>,
    /// `true`: `accept: application/json, text/event-stream`; `false`: `accept: text/event-stream`.
    pub accept_json_and_sse: bool,
    /// `mcp-session-id`, when a session is open.
    pub session_id: Option<&'a str>,
    /// `mcp-protocol-version`, when Some.
    pub protocol_version: Option<&'a str>,
    /// `last-event-id`, when resuming a stream.
    pub last_event_id: Option<&'a str>,
    /// The slot's static headers, e.g. `authorization`; names are written in lower case.
    pub extra_headers: &'a [(&'a str, &'a str)],
    /// Some(n): `content-type: application/json` and `content-length: n`.
    pub content_length: Option<usize>,
    /// The 2026-07-28 era's `Mcp-*` headers, when the request is in that era.
    pub mcp: Option<McpHeaders<'a>>,
}

/// The `Mcp-*` headers of a 2026-07-28 request (values that are not header-safe go as
/// `=?base64?…?=`).
#[derive(Debug, Clone, Copy)]
pub struct McpHeaders<'a> {
    /// `mcp-method`: the JSON-RPC method.
    pub method: &'a str,
    /// `mcp-name`: the tool (`tools/call`), the prompt (`prompts/get`) or the URI
    /// (`resources/read`).
    pub name: Option<&'a str>,
    /// The tool's `x-mcp-header` annotations as `argument\0Header\0` pairs (a nested
    /// argument's path has its names joined by [`crate::wire::era::PATH_SEPARATOR`]): each
    /// argument present in `args` with a primitive value is mirrored as `Mcp-Param-{Header}`.
    pub params: &'a [u8],
    /// The call's arguments.
    pub args: Option<crate::wire::json::Value<'a>>,
}

impl McpHeaders<'_> {
    fn write_to<S: Sink>(&self, out: &mut JsonOut<S>) {
        put_line(out, b"mcp-method: ", self.method);
        if let Some(name) = self.name {
            out.lit(b"mcp-name: ");
            // (The writer keeps the first overflow: its `Ok` says nothing.)
            let _ = crate::wire::era::write_header_value(out, name.as_bytes());
            out.lit(b"\r\n");
        }
        let mut parts = self.params.split(|&b| b == 0);
        while let (Some(argument), Some(header)) = (parts.next(), parts.next()) {
            let value = self
                .args
                .and_then(|args| crate::wire::era::param_at(args, argument));
            if let Some(value) = value {
                let _ = crate::wire::era::param_line_to(out, header, value);
            }
        }
    }
}

/// Why a request head could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RequestError {
    /// The output buffer is too small.
    Overflow(Overflow),
    /// A header name that is not a token, or a value with CR, LF or NUL.
    InvalidHeader,
}

impl From<Overflow> for RequestError {
    fn from(o: Overflow) -> Self {
        RequestError::Overflow(o)
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl Words for RequestError {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        use crate::wire::words::{Arg, Msg};
        match self {
            RequestError::Overflow(o) => Msg::HeadNotFit.say(out, [Arg::Says(o), Arg::None]),
            RequestError::InvalidHeader => Msg::InvalidHeader.say(out, [Arg::None, Arg::None]),
        }
    }
}

impl core::error::Error for RequestError {}

/// An HTTP token character (RFC 9110 `tchar`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

fn valid_value(value: &str) -> bool {
    !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

/// `name` (with its `: `, lower case already) and `value`, one header line.
fn put_line<S: Sink>(out: &mut JsonOut<S>, name: &[u8], value: &str) {
    out.lit(name);
    out.lit(value.as_bytes());
    out.lit(b"\r\n");
}

fn put_header<S: Sink>(out: &mut JsonOut<S>, name: &str, value: &str) {
    // The edge: byte by byte, lower-cased (names are short; less code than a buffer).
    #[cfg(not(feature = "std"))]
    for b in name.bytes() {
        out.lit(&[b.to_ascii_lowercase()]);
    }
    // The host: a name in lower case already (the usual `authorization`) goes as it is.
    #[cfg(feature = "std")]
    if !name.bytes().any(|b| b.is_ascii_uppercase()) {
        out.lit(name.as_bytes());
    } else {
        // Otherwise lower-case the name through a small stack buffer (names are short; long
        // ones in pieces).
        let mut lower = [0u8; 32];
        let last = name.len().saturating_sub(1);
        for (i, b) in name.bytes().enumerate() {
            let at = i % lower.len();
            if let Some(d) = lower.get_mut(at) {
                *d = b.to_ascii_lowercase();
            }
            // A piece ends when the buffer is full or the name ends.
            if at == lower.len() - 1 || i == last {
                out.lit(lower.get(..=at).unwrap_or(&[]));
            }
        }
    }
    out.lit(b": ");
    out.lit(value.as_bytes());
    out.lit(b"\r\n");
}

/// Writes the head (request line, host, user-agent `verifi-mcp/<crate version>`, headers, blank line).
/// The caller appends the body to the SAME sink, so head + body go out in one write.
///
/// Every header is checked before anything is written, so an invalid header writes nothing.
pub fn write_request_head(head: &RequestHead<'_>, out: &mut impl Sink) -> Result<(), RequestError> {
    // The edge: one copy of the head's writer, whatever the sink (the one a request's body
    // is written through).
    #[cfg(not(feature = "std"))]
    let mut w = JsonOut::new(out as &mut dyn Sink);
    #[cfg(feature = "std")]
    let mut w = JsonOut::new(out);
    request_head_to(head, &mut w)?;
    Ok(w.done()?)
}

/// [`write_request_head`] through a writer that keeps the first overflow (what a request's
/// writer holds already): the head's pieces are written without a check after each, and a
/// piece after an overflow writes nothing, as a `?` after each would. `Err` only for an
/// invalid header (nothing written then); the overflow is the writer's.
fn request_head_to<S: Sink>(
    head: &RequestHead<'_>,
    out: &mut JsonOut<S>,
) -> Result<(), RequestError> {
    let fixed = [head.session_id, head.protocol_version, head.last_event_id];
    let fixed_ok = fixed.iter().flatten().all(|v| valid_value(v));
    let extra_ok = head
        .extra_headers
        .iter()
        .all(|(n, v)| valid_name(n) && valid_value(v));
    if !fixed_ok || !extra_ok {
        return Err(RequestError::InvalidHeader);
    }
    out.lit(head.method.as_str().as_bytes());
    out.lit(b" ");
    head.endpoint.target_to(out);
    out.lit(VERSION_HOST);
    head.endpoint.host_to(out);
    // The fixed lines in as few writes as they allow (each write checks the cap).
    out.lit(AGENT_LINE.as_bytes());
    out.lit(if head.accept_json_and_sse {
        ACCEPT_BOTH
    } else {
        ACCEPT_SSE
    });
    if let Some(n) = head.content_length {
        out.lit(CONTENT_LINES);
        out.num(n as u64);
        out.lit(b"\r\n");
    }
    // These names are lower case already. With the handshake era, one loop over the three
    // (each may come); without it, plain lines (the edge then has a version alone, and the
    // other two fold away).
    #[cfg(feature = "era-2025")]
    {
        let names: [&[u8]; 3] = [SESSION_LINE, b"mcp-protocol-version: ", b"last-event-id: "];
        for (name, value) in names.into_iter().zip(fixed) {
            if let Some(v) = value {
                put_line(out, name, v);
            }
        }
    }
    #[cfg(not(feature = "era-2025"))]
    {
        if let Some(v) = head.session_id {
            put_line(out, SESSION_LINE, v);
        }
        if let Some(v) = head.protocol_version {
            put_line(out, b"mcp-protocol-version: ", v);
        }
        if let Some(v) = head.last_event_id {
            put_line(out, b"last-event-id: ", v);
        }
    }
    for (n, v) in head.extra_headers {
        put_header(out, n, v);
    }
    if let Some(mcp) = &head.mcp {
        mcp.write_to(out);
    }
    out.lit(b"\r\n");
    Ok(())
}

/// The request head's fixed pieces. The names and media types the response reader matches are
/// slices of them ([`part`]), so each text is in the binary once.
const VERSION_HOST: &[u8] = b" HTTP/1.1\r\nhost: ";
/// The `accept` value of a POST (its end alone is a GET's, [`ACCEPT_SSE`]).
const ACCEPT_BOTH: &[u8] = b"application/json, text/event-stream\r\n";
/// A body's two lines, but the length.
const CONTENT_LINES: &[u8] = b"content-type: application/json\r\ncontent-length: ";
/// The session's line, but the id.
const SESSION_LINE: &[u8] = b"mcp-session-id: ";

/// `len` bytes of `s` from `from` (at compile time: a range outside `s` does not build).
const fn part(s: &'static [u8], from: usize, len: usize) -> &'static [u8] {
    s.split_at(from).1.split_at(len).0
}

/// `text/event-stream` and its line end: a GET's `accept` value.
const ACCEPT_SSE: &[u8] = part(ACCEPT_BOTH, 18, 19);
/// `application/json`.
const JSON: &[u8] = part(ACCEPT_BOTH, 0, 16);
/// `text/event-stream`.
const EVENT_STREAM: &[u8] = part(ACCEPT_BOTH, 18, 17);
/// `content-type`.
const CONTENT_TYPE: &[u8] = part(CONTENT_LINES, 0, 12);
/// `content-length`.
const CONTENT_LENGTH: &[u8] = part(CONTENT_LINES, 32, 14);
/// `mcp-session-id`.
const SESSION_ID: &[u8] = part(SESSION_LINE, 0, 14);
/// `transfer-encoding`.
const TRANSFER_ENCODING: &[u8] = b"transfer-encoding";
/// `HTTP/1.`, how a status line starts but its minor version (the edge's head reader's).
#[cfg(any(test, not(feature = "std")))]
const HTTP_1: &[u8] = part(VERSION_HOST, 1, 7);

/// The `user-agent` this crate sends.
pub const USER_AGENT: &str = concat!("verifi-mcp/", env!("CARGO_PKG_VERSION"));

/// The end of the `host` line, the `user-agent` line and the `accept` name.
const AGENT_LINE: &str = concat!(
    "\r\nuser-agent: verifi-mcp/",
    env!("CARGO_PKG_VERSION"),
    "\r\naccept: "
);

/// The response's media type, parsed case-insensitively with parameters ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum MediaType {
    /// `application/json`.
    Json,
    /// `text/event-stream`.
    EventStream,
    /// Any other type.
    Other,
    /// No `content-type` header.
    Missing,
}

impl MediaType {
    /// Parses a `content-type` value: `Application/JSON; charset=utf-8` is [`MediaType::Json`].
    pub fn parse(value: &[u8]) -> Self {
        let essence = value.split(|&b| b == b';').next().unwrap_or(&[]);
        let essence = essence.trim_ascii();
        if essence.eq_ignore_ascii_case(JSON) {
            MediaType::Json
        } else if essence.eq_ignore_ascii_case(EVENT_STREAM) {
            MediaType::EventStream
        } else {
            MediaType::Other
        }
    }
}

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Framing {
    /// `content-length: n`.
    Length(u64),
    /// `transfer-encoding: chunked` (wins over `content-length`).
    Chunked,
    /// Neither: the body ends when the peer closes.
    Close,
    /// No body at all (204, 304).
    Empty,
}

/// The longest `mcp-session-id` kept. Sessions are the handshake era's (feature `era-2025`): a
/// build without it keeps none (the header is ignored) and holds no room for one.
pub const MAX_SESSION_ID: usize = if cfg!(feature = "era-2025") { 256 } else { 0 };

/// The parts of a response head a client acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResponseHead {
    /// The status code (never 1xx: those are skipped).
    pub status: u16,
    /// The parsed `content-type`.
    pub media_type: MediaType,
    /// The raw `content-type` value, truncated to 64 bytes at a character boundary, for messages.
    pub content_type: heapless::String<64>,
    /// `mcp-session-id`, visible ASCII only (else [`HttpError::BadSessionId`]).
    pub session_id: Option<heapless::String<MAX_SESSION_ID>>,
    /// How the body is delimited.
    pub framing: Framing,
    /// HTTP/1.1 without `connection: close` (1.0: only with `keep-alive`); false for
    /// close-delimited bodies and when both `transfer-encoding` and `content-length` came.
    pub keep_alive: bool,
    /// `retry-after`, as sent (read on 429 and 503 answers).
    pub retry_after: Option<RetryAfter>,
}

/// A `retry-after` header: a number of seconds, or an HTTP date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum RetryAfter {
    /// `retry-after: <seconds>`, as sent.
    Seconds(u64),
    /// `retry-after: <HTTP-date>` (this core reads no wall clock, so it cannot wait for one;
    /// the date itself is not kept, to keep every response head small).
    Date,
}

impl RetryAfter {
    /// Parses a `retry-after` value: delay-seconds, else (anything else) an HTTP date.
    pub fn parse(value: &[u8]) -> Option<Self> {
        let v = value.trim_ascii();
        if v.is_empty() {
            return None;
        }
        Some(match decimal(v) {
            Some(n) => RetryAfter::Seconds(n),
            None => RetryAfter::Date,
        })
    }

    /// The delay in ms, when it is a number of seconds.
    pub fn delay_ms(&self) -> Option<u64> {
        match self {
            RetryAfter::Seconds(s) => Some(s.saturating_mul(1000)),
            RetryAfter::Date => None,
        }
    }
}

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl Words for RetryAfter {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        match self {
            RetryAfter::Seconds(s) => put_u64(out, *s),
            RetryAfter::Date => out.put_str("an HTTP date"),
        }
    }
}

/// Caps on one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResponseLimits {
    /// The most bytes a head (and, separately, the chunked trailers) may take.
    pub max_head_bytes: usize,
    /// The most body bytes (after chunked framing is removed).
    pub max_body_bytes: u64,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

/// One step of decoding.
///
/// `Head` is large (the session id is stored inline), but it comes once per response and there
/// is no allocator to box it into.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Decoded<'i> {
    /// All given bytes were used; give more.
    NeedMore,
    /// The final (non-1xx) head.
    Head(ResponseHead),
    /// Body bytes, a sub-slice of the input.
    Body(&'i [u8]),
    /// The response is complete.
    End,
}

/// Where in the response something went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Stage {
    /// Reading the head.
    Head,
    /// Reading the body.
    Body,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl Words for Stage {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        use crate::wire::words::{Arg, Fr, tell};
        let stage = match self {
            Stage::Head => Fr::Head,
            Stage::Body => Fr::Body,
        };
        tell(out, &[stage], [Arg::None, Arg::None])
    }
}

/// Why a response could not be decoded. Every error is final for the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum HttpError {
    /// The head did not end within the cap.
    HeadTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The head is not valid HTTP/1.x; the fault says what was wrong.
    BadHead(HeadFault),
    /// More header lines than the decoder keeps room for.
    TooManyHeaders,
    /// `content-length` is not a number, or two differ.
    BadContentLength,
    /// A chunk size line is malformed (or longer than its cap).
    BadChunk,
    /// A chunk size does not fit in 64 bits.
    ChunkTooLarge,
    /// The body is larger than its cap.
    BodyTooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// `mcp-session-id` is empty, longer than [`MAX_SESSION_ID`] or not visible ASCII.
    BadSessionId,
    /// Bytes arrived after the response had ended.
    TrailingData,
    /// The peer closed before the response ended.
    UnexpectedEof(Stage),
    /// The reply does not start like an HTTP response (said at the first bytes, not at the
    /// deadline).
    NotHttp,
    /// The reply starts with a TLS record: the server speaks TLS on this port.
    TlsRecord,
    /// The chunked trailers did not end within the head cap (an addition to the contract).
    TrailersTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
}

/// What is wrong with a malformed response head ([`HttpError::BadHead`]); the comment of
/// each variant is its text (its `Display`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HeadFault {
    /// `incomplete head`
    Incomplete,
    /// `invalid header name`
    HeaderName,
    /// `invalid header value`
    HeaderValue,
    /// `invalid line ending`
    NewLine,
    /// `invalid status line`
    StatusLine,
    /// `not HTTP/1.0 or HTTP/1.1`
    Version,
    /// `status code outside 100..=599`
    StatusRange,
    /// `unexpected 101 Switching Protocols`
    SwitchingProtocols,
    /// `unsupported transfer-encoding`
    UnsupportedCoding,
    /// `missing status code`
    MissingStatus,
    /// `invalid token`
    Token,
}

impl fmt::Display for HeadFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl Words for HeadFault {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        use crate::wire::words::{Arg, Msg};
        // On the edge: fragments of the failures' packed text, not a literal each.
        let message = match self {
            HeadFault::Incomplete => Msg::HeadIncomplete,
            HeadFault::HeaderName => Msg::HeadName,
            HeadFault::HeaderValue => Msg::HeadValue,
            HeadFault::NewLine => Msg::HeadNewLine,
            HeadFault::StatusLine => Msg::HeadStatus,
            HeadFault::Version => Msg::HeadVersion,
            HeadFault::StatusRange => Msg::HeadStatusRange,
            HeadFault::SwitchingProtocols => Msg::HeadSwitching,
            HeadFault::UnsupportedCoding => Msg::HeadCoding,
            HeadFault::MissingStatus => Msg::HeadNoStatus,
            HeadFault::Token => Msg::HeadToken,
        };
        message.say(out, [Arg::None, Arg::None])
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl Words for HttpError {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        use crate::wire::words::{Arg, Msg};
        let (message, arg) = match self {
            HttpError::HeadTooLarge { limit } => (Msg::HeadTooLarge, Arg::Num(*limit as u64)),
            HttpError::BadHead(what) => (Msg::BadHead, Arg::Says(what)),
            HttpError::TooManyHeaders => (Msg::TooManyHeaders, Arg::Num(MAX_HEADERS as u64)),
            HttpError::BadContentLength => (Msg::BadContentLength, Arg::None),
            HttpError::BadChunk => (Msg::BadChunk, Arg::None),
            HttpError::ChunkTooLarge => (Msg::ChunkTooLarge, Arg::None),
            HttpError::BodyTooLarge { limit } => (Msg::BodyTooLarge, Arg::Num(*limit)),
            HttpError::BadSessionId => (Msg::BadSessionId, Arg::Num(MAX_SESSION_ID as u64)),
            HttpError::TrailingData => (Msg::TrailingData, Arg::None),
            HttpError::UnexpectedEof(Stage::Head) => (Msg::EofInHead, Arg::None),
            HttpError::UnexpectedEof(Stage::Body) => (Msg::EofInBody, Arg::None),
            HttpError::TrailersTooLarge { limit } => {
                (Msg::TrailersTooLarge, Arg::Num(*limit as u64))
            }
            HttpError::NotHttp => (Msg::NotHttp, Arg::None),
            HttpError::TlsRecord => (Msg::TlsRecord, Arg::None),
        };
        message.say(out, [arg, Arg::None])
    }
}

impl core::error::Error for HttpError {}

/// Header lines kept per head by the decoder.
pub const MAX_HEADERS: usize = 64;
/// The longest chunk size line (size, extensions, line end).
pub const MAX_CHUNK_LINE: u32 = 4096;

/// The decoder's body counters (lengths, chunk sizes, bytes so far): 64-bit on the host, 32-bit
/// on the edge, where a body never comes near 4 GiB and 64-bit arithmetic costs code in every
/// step. A larger length or chunk size saturates there, and the body cap is at most
/// `u32::MAX - 1` (see [`ResponseDecoder::new`]), so a saturated one is always over the cap.
#[cfg(feature = "std")]
type Count = u64;
/// The decoder's body counters (see the host's alias): 32-bit on the edge.
#[cfg(not(feature = "std"))]
type Count = u32;

/// `n` as a [`Count`], saturated.
fn count(n: u64) -> Count {
    Count::try_from(n).unwrap_or(Count::MAX)
}

/// A [`Count`] as the `u64` the API says (the same type on the host).
#[allow(clippy::useless_conversion)]
fn wide(n: Count) -> u64 {
    u64::from(n)
}

/// A chunk size line's significant hex digits, beyond which the size does not fit in 64 bits
/// ([`HttpError::ChunkTooLarge`]).
const MAX_CHUNK_DIGITS: u8 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of a size line; `digits` is 0 before the first digit, else 1 + the
    /// significant digits so far (leading zeros are not).
    Size { value: Count, digits: u8, line: u32 },
    /// After the digits: whitespace and extensions up to the line end.
    Ext { value: Count, line: u32 },
    /// Saw CR at the end of a size line.
    SizeLf { value: Count },
    /// Inside chunk data.
    Data { left: Count },
    /// After chunk data: CR LF (or a bare LF).
    DataEnd { saw_cr: bool },
    /// Trailer lines after the last chunk; `empty` while the current line has no bytes.
    Trailer { empty: bool, total: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Accumulating a head; `nl` is the end-of-head detector state (0, 1 = after LF, 2 = LF CR).
    Head {
        len: usize,
        nl: u8,
    },
    Length {
        left: Count,
    },
    Chunked(Chunk),
    Close,
    /// The body is complete; `End` not reported yet.
    Ending,
    Done,
    Failed(HttpError),
}

/// A streaming HTTP/1.x response decoder; the head accumulates in caller storage.
#[derive(Debug)]
pub struct ResponseDecoder<'h> {
    storage: &'h mut [u8],
    max_head: usize,
    max_body: Count,
    state: State,
    body: Count,
    /// Head bytes scanned and heads parsed, for the linear-work test.
    #[cfg(test)]
    work: (usize, usize),
}

/// Where a response's body framing stands, without the head storage (which the body never
/// uses): what is left of a response whose answer was taken. Small on purpose: an op keeps
/// one across a poll.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyRest {
    state: BodyState,
    body: Count,
    max_body: Count,
    /// The trailer lines' cap (the head's).
    max_head: usize,
}

#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "std"), repr(u32))]
enum BodyState {
    Length { left: Count },
    Chunked(Chunk),
    Ending,
}

impl BodyRest {
    /// Decodes the next framing bytes of `input` (as [`ResponseDecoder::decode`] does).
    pub(crate) fn decode<'i>(
        &mut self,
        input: &'i [u8],
    ) -> Result<(usize, Decoded<'i>), HttpError> {
        let mut d = ResponseDecoder {
            storage: &mut [],
            max_head: self.max_head,
            max_body: self.max_body,
            state: match self.state {
                BodyState::Length { left } => State::Length { left },
                BodyState::Chunked(c) => State::Chunked(c),
                BodyState::Ending => State::Ending,
            },
            body: self.body,
            #[cfg(test)]
            work: (0, 0),
        };
        let out = d.decode(input);
        self.body = d.body;
        self.state = match d.state {
            State::Length { left } => BodyState::Length { left },
            State::Chunked(c) => BodyState::Chunked(c),
            State::Ending => BodyState::Ending,
            // Done, failed, or a state a body never returns to: nothing more to read.
            _ => BodyState::Length { left: 0 },
        };
        out
    }
}

impl ResponseDecoder<'_> {
    /// The body's framing state alone, when the head was read and the body has not ended.
    pub(crate) fn body_only(&self) -> Option<BodyRest> {
        let state = match self.state {
            State::Length { left } => BodyState::Length { left },
            State::Chunked(c) => BodyState::Chunked(c),
            State::Ending => BodyState::Ending,
            _ => return None,
        };
        Some(BodyRest {
            state,
            body: self.body,
            max_body: self.max_body,
            max_head: self.max_head,
        })
    }
}

impl<'h> ResponseDecoder<'h> {
    /// Gives the head storage back (for the next response).
    pub fn into_head_storage(self) -> &'h mut [u8] {
        self.storage
    }

    /// A decoder whose head cap is `min(head_storage.len(), limits.max_head_bytes)`. Without
    /// `std` (the edge) the body cap is at most `u32::MAX - 1` bytes.
    pub fn new(head_storage: &'h mut [u8], limits: ResponseLimits) -> Self {
        let max_head = head_storage.len().min(limits.max_head_bytes);
        let max_body = count(limits.max_body_bytes);
        ResponseDecoder {
            storage: head_storage,
            max_head,
            // A saturated length (32-bit counters) must stay over the cap.
            max_body: if Count::BITS < 64 {
                max_body.min(Count::MAX - 1)
            } else {
                max_body
            },
            state: State::Head { len: 0, nl: 0 },
            body: 0,
            #[cfg(test)]
            work: (0, 0),
        }
    }

    /// Body bytes decoded so far (chunked framing not counted).
    pub fn body_bytes(&self) -> u64 {
        wide(self.body)
    }

    /// Body bytes the framing says are still to come in the current `Content-Length` body or
    /// chunk (0 when unknown): a sizing hint, as the server states it, never a promise.
    pub fn body_left_hint(&self) -> u64 {
        match self.state {
            State::Length { left } | State::Chunked(Chunk::Data { left }) => wide(left),
            _ => 0,
        }
    }

    /// Push parser: returns how many input bytes it used and what they were. `Body` is a sub-slice
    /// of `input` (zero copy; chunked framing removed). The caller loops until input is used up.
    /// 1xx heads are skipped. Trailers are ignored. After `End` further input is an error.
    /// An error is final: later calls return it again.
    // One copy on the edge, never inlined into a caller's loop (the host's inlining is kept).
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub fn decode<'i>(&mut self, input: &'i [u8]) -> Result<(usize, Decoded<'i>), HttpError> {
        let r = self.step(input);
        if let Err(e) = r {
            self.state = State::Failed(e);
        }
        r
    }

    /// The peer closed: `Ok(true)` when that ends a close-delimited body (`End`), `Ok(false)` when
    /// the response had already ended, else `Err(HttpError::UnexpectedEof(stage))`.
    /// A body that was complete but whose `End` was not yet reported also gives `Ok(true)`.
    pub fn finish(&mut self) -> Result<bool, HttpError> {
        let r = match self.state {
            State::Head { .. } => Err(HttpError::UnexpectedEof(Stage::Head)),
            State::Length { left: 0 } | State::Close | State::Ending => Ok(true),
            State::Length { .. } | State::Chunked(_) => Err(HttpError::UnexpectedEof(Stage::Body)),
            State::Done => Ok(false),
            State::Failed(e) => Err(e),
        };
        self.state = match r {
            Ok(_) => State::Done,
            Err(e) => State::Failed(e),
        };
        r
    }

    fn step<'i>(&mut self, input: &'i [u8]) -> Result<(usize, Decoded<'i>), HttpError> {
        let mut used = 0usize;
        loop {
            let rest = input.get(used..).unwrap_or(&[]);
            match self.state {
                State::Failed(e) => return Err(e),
                State::Done => {
                    return if rest.is_empty() {
                        Ok((used, Decoded::End))
                    } else {
                        Err(HttpError::TrailingData)
                    };
                }
                State::Ending => {
                    self.state = State::Done;
                    return Ok((used, Decoded::End));
                }
                State::Head { len, nl } => return self.head(input, used, len, nl),
                State::Length { left: 0 } => self.state = State::Ending,
                s @ (State::Length { .. } | State::Close | State::Chunked(Chunk::Data { .. })) => {
                    // What the framing still allows (close-delimited: all that comes), checked
                    // against the cap as it is known: a length at once, a chunk at its start.
                    let left = match s {
                        State::Length { left } => {
                            self.check_body(left)?;
                            left
                        }
                        State::Chunked(Chunk::Data { left }) => left,
                        _ => {
                            self.check_body(rest.len() as Count)?;
                            Count::MAX
                        }
                    };
                    if rest.is_empty() {
                        return Ok((used, Decoded::NeedMore));
                    }
                    let n = take_len(rest.len(), left);
                    let body = rest.get(..n).unwrap_or(&[]);
                    self.body += n as Count;
                    let left = left - n as Count;
                    self.state = match s {
                        State::Length { .. } => State::Length { left },
                        State::Chunked(_) if left == 0 => {
                            State::Chunked(Chunk::DataEnd { saw_cr: false })
                        }
                        State::Chunked(_) => State::Chunked(Chunk::Data { left }),
                        _ => State::Close,
                    };
                    return Ok((used + n, Decoded::Body(body)));
                }
                State::Chunked(c) => {
                    let Some((&b, _)) = rest.split_first() else {
                        return Ok((used, Decoded::NeedMore));
                    };
                    if let Chunk::Trailer { empty: false, .. } = c {
                        // Skip the bulk of a trailer line at once.
                        let skip = crate::wire::json::memchr(b'\n', rest).unwrap_or(rest.len());
                        if skip > 0 {
                            self.trailer_bytes(c, skip)?;
                            used += skip;
                            continue;
                        }
                    }
                    used += 1;
                    self.state = self.chunk_byte(c, b)?;
                }
            }
        }
    }

    /// The head arm of [`Self::step`]: accumulates head bytes from `input[used..]` (1xx heads
    /// skipped) and returns `NeedMore` or the final head. Out of line on the edge, so the
    /// large head is built straight in the caller's result, never moved through the body loop.
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn head<'i>(
        &mut self,
        input: &'i [u8],
        mut used: usize,
        mut len: usize,
        mut nl: u8,
    ) -> Result<(usize, Decoded<'i>), HttpError> {
        loop {
            let rest = input.get(used..).unwrap_or(&[]);
            // Garbage is said at its first bytes, not when the deadline passes; before
            // any other check, so the verdict is the same however the bytes are split.
            if len < STATUS_PREFIX.len() {
                // The reply's k-th byte: what was kept, then what came.
                let kept = self.storage.get(..len).unwrap_or(&[]);
                not_http(|k| match kept.get(k) {
                    Some(&b) => Some(b),
                    None => rest.get(k - kept.len()).copied(),
                })?;
            }
            let (n, end) = find_head_end(rest, nl);
            #[cfg(test)]
            {
                self.work.0 += n;
            }
            let total = len.saturating_add(n);
            if total > self.max_head {
                return Err(HttpError::HeadTooLarge {
                    limit: self.max_head,
                });
            }
            let src = rest.get(..n).unwrap_or(&[]);
            if let Some(dst) = self.storage.get_mut(len..total) {
                // (Equal lengths.) The edge copies by a zip, which has no length check to
                // fail and so no panic path (and its location) in the binary.
                #[cfg(not(feature = "std"))]
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = *s;
                }
                #[cfg(feature = "std")]
                dst.copy_from_slice(src);
            }
            used += n;
            match end {
                Err(nl) => {
                    self.state = State::Head { len: total, nl };
                    return Ok((used, Decoded::NeedMore));
                }
                Ok(()) => {
                    #[cfg(test)]
                    {
                        self.work.1 += 1;
                    }
                    let head = self.storage.get(..total).unwrap_or(&[]);
                    match parse_head(head)? {
                        None => {
                            len = 0;
                            nl = 0;
                        }
                        Some(h) => {
                            self.body = 0;
                            self.state = match h.framing {
                                Framing::Length(n) => State::Length { left: count(n) },
                                Framing::Chunked => State::Chunked(Chunk::Size {
                                    value: 0,
                                    digits: 0,
                                    line: 0,
                                }),
                                Framing::Close => State::Close,
                                Framing::Empty => State::Ending,
                            };
                            return Ok((used, Decoded::Head(h)));
                        }
                    }
                }
            }
        }
    }

    /// Fails when `more` body bytes would go over the cap.
    fn check_body(&self, more: Count) -> Result<(), HttpError> {
        if self.body.saturating_add(more) > self.max_body {
            Err(HttpError::BodyTooLarge {
                limit: wide(self.max_body),
            })
        } else {
            Ok(())
        }
    }

    fn trailer_bytes(&mut self, c: Chunk, n: usize) -> Result<(), HttpError> {
        if let Chunk::Trailer { total, .. } = c {
            let total = total.saturating_add(n);
            if total > self.max_head {
                return Err(HttpError::TrailersTooLarge {
                    limit: self.max_head,
                });
            }
            self.state = State::Chunked(Chunk::Trailer {
                empty: false,
                total,
            });
        }
        Ok(())
    }

    /// One framing byte of a chunked body: the next state.
    // Out of line on the edge: the body loop then keeps no chunk state in registers across
    // its arms (less spill code); the host keeps its inlining.
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn chunk_byte(&self, c: Chunk, b: u8) -> Result<State, HttpError> {
        let line_cap = |line: u32| {
            if line >= MAX_CHUNK_LINE {
                Err(HttpError::BadChunk)
            } else {
                Ok(line + 1)
            }
        };
        Ok(State::Chunked(match c {
            Chunk::Size {
                value,
                digits,
                line,
            } => {
                let line = line_cap(line)?;
                if let Some(d) = hex(b) {
                    // Leading zeros are not significant; a 17th significant digit is over 64
                    // bits (the counter saturates earlier on the edge: over the cap).
                    let digits = digits.max(1) + u8::from(value != 0 || d != 0);
                    if digits > MAX_CHUNK_DIGITS + 1 {
                        return Err(HttpError::ChunkTooLarge);
                    }
                    Chunk::Size {
                        value: value
                            .checked_mul(16)
                            .map_or(Count::MAX, |v| v | Count::from(d)),
                        digits,
                        line,
                    }
                } else if digits == 0 {
                    return Err(HttpError::BadChunk);
                } else {
                    match b {
                        b' ' | b'\t' | b';' => Chunk::Ext { value, line },
                        b'\r' => Chunk::SizeLf { value },
                        b'\n' => self.chunk_start(value)?,
                        _ => return Err(HttpError::BadChunk),
                    }
                }
            }
            Chunk::Ext { value, line } => {
                let line = line_cap(line)?;
                match b {
                    b'\r' => Chunk::SizeLf { value },
                    b'\n' => self.chunk_start(value)?,
                    0 => return Err(HttpError::BadChunk),
                    _ => Chunk::Ext { value, line },
                }
            }
            Chunk::SizeLf { value } => match b {
                b'\n' => self.chunk_start(value)?,
                _ => return Err(HttpError::BadChunk),
            },
            Chunk::DataEnd { saw_cr } => match b {
                b'\r' if !saw_cr => Chunk::DataEnd { saw_cr: true },
                b'\n' => Chunk::Size {
                    value: 0,
                    digits: 0,
                    line: 0,
                },
                _ => return Err(HttpError::BadChunk),
            },
            Chunk::Trailer { empty, total } => {
                let total = total.saturating_add(1);
                if total > self.max_head {
                    return Err(HttpError::TrailersTooLarge {
                        limit: self.max_head,
                    });
                }
                match b {
                    b'\n' if empty => return Ok(State::Ending),
                    b'\n' => Chunk::Trailer { empty: true, total },
                    b'\r' => Chunk::Trailer { empty, total },
                    _ => Chunk::Trailer {
                        empty: false,
                        total,
                    },
                }
            }
            Chunk::Data { .. } => c,
        }))
    }

    /// A size line ended: data of `size` bytes follows, or the trailers when it is 0.
    fn chunk_start(&self, size: Count) -> Result<Chunk, HttpError> {
        if size == 0 {
            return Ok(Chunk::Trailer {
                empty: true,
                total: 0,
            });
        }
        self.check_body(size)?;
        Ok(Chunk::Data { left: size })
    }
}

/// `min(available, left)` as a usize.
fn take_len(available: usize, left: Count) -> usize {
    usize::try_from(left).map_or(available, |l| l.min(available))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Scans `input` for the end of a head (an LF, an optional CR, an LF), carrying the detector
/// state `nl` across calls. Returns the bytes that belong to the head and `Ok` when it ended,
/// or `Err(new_state)` when all of `input` was head and it has not ended yet.
fn find_head_end(input: &[u8], mut nl: u8) -> (usize, Result<(), u8>) {
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        if nl == 0 {
            // Nothing pending: jump straight to the next LF.
            match crate::wire::json::memchr(b'\n', input.get(i..).unwrap_or(&[])) {
                Some(p) => {
                    i += p + 1;
                    nl = 1;
                    continue;
                }
                None => return (input.len(), Err(0)),
            }
        }
        i += 1;
        nl = match (b, nl) {
            (b'\n', _) => return (i, Ok(())),
            (b'\r', 1) => 2,
            _ => 0,
        };
    }
    (input.len(), Err(nl))
}

/// Parses a complete head. `Ok(None)` for an interim 1xx head, which is skipped.
/// How every HTTP/1.x response starts.
const STATUS_PREFIX: &[u8] = part(VERSION_HOST, 1, 5);

/// Rejects a reply whose first bytes cannot start an HTTP response (a TLS record from an
/// `https` port says so).
fn not_http(at: impl Fn(usize) -> Option<u8>) -> Result<(), HttpError> {
    // A TLS record: content type (alert 0x15, handshake 0x16 …), then major version 3; one
    // byte that could start one waits for the second.
    if let Some(0x14..=0x17) = at(0) {
        match at(1) {
            None => return Ok(()),
            Some(0x03) => return Err(HttpError::TlsRecord),
            Some(_) => {}
        }
    }
    for (k, &p) in STATUS_PREFIX.iter().enumerate() {
        match at(k) {
            None => break,
            Some(b) if b != p => return Err(HttpError::NotHttp),
            Some(_) => {}
        }
    }
    Ok(())
}

fn parse_head(bytes: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    #[cfg(feature = "std")]
    return parse_head_httparse(bytes);
    #[cfg(not(feature = "std"))]
    parse_head_small(bytes)
}

/// [`parse_head`] by `httparse` (the host's: its vector scans).
#[cfg(any(test, feature = "std"))]
fn parse_head_httparse(bytes: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(INCOMPLETE),
        Err(e) => return Err(map_httparse(e)),
    }
    let status = resp
        .code
        .ok_or(HttpError::BadHead(HeadFault::MissingStatus))?;
    let lines = resp.headers.iter().map(|h| (h.name.as_bytes(), h.value));
    head_of(status, resp.version == Some(1), lines)
}

/// [`parse_head`] by [`small`] (the edge's: less code than `httparse`, the same verdicts as
/// its default configuration, held equal to it by a property test): the head's lines are
/// checked whole first, as `httparse` does, then read.
#[cfg(any(test, not(feature = "std")))]
fn parse_head_small(bytes: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    let checked = small::status_line(bytes).and_then(|(status, http11, at)| {
        let mut lines = small::Lines { bytes, pos: at };
        let mut count = 0usize;
        while lines.next_line()?.is_some() {
            count += 1;
            if count > MAX_HEADERS {
                return Err(small::Bad::TooMany);
            }
        }
        Ok((status, http11, at))
    });
    let (status, http11, at) = checked.map_err(|bad| match bad {
        small::Bad::TooMany => HttpError::TooManyHeaders,
        small::Bad::Incomplete => INCOMPLETE,
        small::Bad::Name => BAD_NAME,
        small::Bad::Value => BAD_VALUE,
        small::Bad::NewLine => BAD_NEWLINE,
        small::Bad::Status => BAD_STATUS,
        small::Bad::Version => BAD_VERSION,
    })?;
    let mut lines = small::Lines { bytes, pos: at };
    head_of(
        status,
        http11,
        core::iter::from_fn(move || lines.next_line().ok().flatten()),
    )
}

/// `httparse`'s verdicts, as texts.
const INCOMPLETE: HttpError = HttpError::BadHead(HeadFault::Incomplete);
const BAD_NAME: HttpError = HttpError::BadHead(HeadFault::HeaderName);
const BAD_VALUE: HttpError = HttpError::BadHead(HeadFault::HeaderValue);
const BAD_NEWLINE: HttpError = HttpError::BadHead(HeadFault::NewLine);
const BAD_STATUS: HttpError = HttpError::BadHead(HeadFault::StatusLine);
const BAD_VERSION: HttpError = HttpError::BadHead(HeadFault::Version);

/// A response head read line by line as `httparse` reads it with its default configuration
/// (no leading space, no space before a colon, no folded lines, no invalid line skipped):
/// the same verdict for every head, without its tables and vector scans.
#[cfg(any(test, not(feature = "std")))]
mod small {
    use super::is_tchar;

    /// What is wrong with a head (`httparse`'s errors; the caller says them as it does).
    #[derive(Debug, Clone, Copy)]
    #[cfg_attr(not(feature = "std"), repr(u32))]
    pub(super) enum Bad {
        Incomplete,
        Name,
        Value,
        NewLine,
        Status,
        Version,
        TooMany,
    }

    /// A byte `httparse` takes in a header value (HTAB, SP, VCHAR, obs-text).
    fn is_value_byte(b: u8) -> bool {
        b == b'\t' || (b >= b' ' && b != 0x7f)
    }

    /// The byte at `at`, or the head is incomplete.
    fn at(bytes: &[u8], at: usize) -> Result<u8, Bad> {
        bytes.get(at).copied().ok_or(Bad::Incomplete)
    }

    /// An LF at `p` (after a CR), else `err`: the offset after it.
    fn lf(bytes: &[u8], p: usize, err: Bad) -> Result<usize, Bad> {
        if at(bytes, p)? == b'\n' {
            Ok(p + 1)
        } else {
            Err(err)
        }
    }

    /// The status line: (code, HTTP/1.1, offset of the first header line).
    pub(super) fn status_line(bytes: &[u8]) -> Result<(u16, bool, usize), Bad> {
        let mut p = 0;
        // Empty lines before it.
        loop {
            match at(bytes, p)? {
                b'\r' => p = lf(bytes, p + 1, Bad::NewLine)?,
                b'\n' => p += 1,
                _ => break,
            }
        }
        // `HTTP/1.` (as much of it as came), then the minor version.
        let version = bytes.get(p..).unwrap_or(&[]);
        let n = version.len().min(7);
        if version.get(..n) != super::HTTP_1.get(..n) {
            return Err(Bad::Version);
        }
        let http11 = match version.get(7) {
            Some(b'1') => true,
            Some(b'0') => false,
            Some(_) => return Err(Bad::Version),
            None => return Err(Bad::Incomplete),
        };
        p += 8;
        if at(bytes, p)? != b' ' {
            return Err(Bad::Version);
        }
        p += 1;
        let mut code = 0u16;
        for _ in 0..3 {
            let d = at(bytes, p)?;
            if !d.is_ascii_digit() {
                return Err(Bad::Status);
            }
            code = code * 10 + u16::from(d - b'0');
            p += 1;
        }
        // A space and a reason phrase (HTAB, SP, VCHAR, obs-text), or the line end at once.
        let mut first = true;
        loop {
            let b = at(bytes, p)?;
            p += 1;
            match b {
                b'\r' => return Ok((code, http11, lf(bytes, p, Bad::Status)?)),
                b'\n' => return Ok((code, http11, p)),
                b' ' => {}
                b'\t' | 0x21..=0x7e | 0x80.. if !first => {}
                _ => return Err(Bad::Status),
            }
            first = false;
        }
    }

    /// A header line: its name and its value.
    pub(super) type Line<'a> = (&'a [u8], &'a [u8]);

    /// The header lines after the status line.
    pub(super) struct Lines<'a> {
        pub(super) bytes: &'a [u8],
        pub(super) pos: usize,
    }

    impl<'a> Lines<'a> {
        /// The next header line's name and value (leading whitespace skipped, trailing kept),
        /// `None` at the blank line that ends the head.
        pub(super) fn next_line(&mut self) -> Result<Option<Line<'a>>, Bad> {
            let bytes = self.bytes;
            let start = self.pos;
            let mut p = start + 1;
            match at(bytes, start)? {
                b'\r' => {
                    self.pos = lf(bytes, p, Bad::NewLine)?;
                    return Ok(None);
                }
                b'\n' => {
                    self.pos = p;
                    return Ok(None);
                }
                b if !is_tchar(b) => return Err(Bad::Name),
                _ => {}
            }
            while is_tchar(at(bytes, p)?) {
                p += 1;
            }
            let name = bytes.get(start..p).unwrap_or(&[]);
            if at(bytes, p)? != b':' {
                return Err(Bad::Name);
            }
            p += 1;
            while matches!(at(bytes, p)?, b' ' | b'\t') {
                p += 1;
            }
            let from = p;
            while is_value_byte(at(bytes, p)?) {
                p += 1;
            }
            let value = bytes.get(from..p).unwrap_or(&[]);
            self.pos = match at(bytes, p)? {
                b'\r' => lf(bytes, p + 1, Bad::Value)?,
                b'\n' => p + 1,
                _ => return Err(Bad::Value),
            };
            // Trailing whitespace stays: the head's reader trims every value.
            Ok(Some((name, value)))
        }
    }
}

/// The header names a response's head is read for, by their place: `content-type`,
/// `retry-after`, `content-length`, `transfer-encoding`, `connection`, and (sessions are the
/// handshake era's: a build without it reads the first five) `mcp-session-id`.
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const READ_NAMES: [&[u8]; if cfg!(feature = "era-2025") { 6 } else { 5 }] = {
    const ALL: [&[u8]; 6] = [
        CONTENT_TYPE,
        b"retry-after",
        CONTENT_LENGTH,
        TRANSFER_ENCODING,
        b"connection",
        SESSION_ID,
    ];
    let mut out = [ALL[0]; if cfg!(feature = "era-2025") { 6 } else { 5 }];
    let mut i = 0;
    while i < out.len() {
        out[i] = ALL[i];
        i += 1;
    }
    out
};

/// The place of `word` in `names`, compared case-insensitively (`names.len()` when it is
/// none of them): one walk for every name and item a head is read for.
fn name_at(word: &[u8], names: &[&[u8]]) -> usize {
    names
        .iter()
        .position(|n| word.eq_ignore_ascii_case(n))
        .unwrap_or(names.len())
}

/// The head of a response whose lines were read: its status and its headers' meaning.
fn head_of<'a>(
    status: u16,
    http11: bool,
    lines: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Option<ResponseHead>, HttpError> {
    // httparse takes any three digits; RFC 9110 §15: valid codes are 100..=599.
    if !(100..=599).contains(&status) {
        return Err(HttpError::BadHead(HeadFault::StatusRange));
    }
    if status == 101 {
        return Err(HttpError::BadHead(HeadFault::SwitchingProtocols));
    }
    if (100..200).contains(&status) {
        return Ok(None);
    }
    let mut media_type = MediaType::Missing;
    let mut content_type = heapless::String::new();
    let mut session_id = None;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut close = false;
    let mut keep = false;
    let mut retry_after = None;
    for (name, value) in lines {
        let value = value.trim_ascii();
        // One walk over the names read (one comparison's code, not one per name).
        let which = name_at(name, &READ_NAMES);
        match which {
            0 => {
                media_type = MediaType::parse(value);
                truncated_into(&mut content_type, value);
            }
            // (`value` is trimmed already: `RetryAfter::parse` without its own trim.)
            1 => {
                retry_after = (!value.is_empty())
                    .then(|| decimal(value).map_or(RetryAfter::Date, RetryAfter::Seconds));
            }
            2 => {
                let n = parse_length(value)?;
                if length.is_some_and(|m| m != n) {
                    return Err(HttpError::BadContentLength);
                }
                length = Some(n);
            }
            // `transfer-encoding` and `connection`: two comma lists, read by one loop.
            3 | 4 => {
                let coding = which == 3;
                for item in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    if !coding {
                        close |= item.eq_ignore_ascii_case(b"close");
                        keep |= item.eq_ignore_ascii_case(b"keep-alive");
                    } else if item.eq_ignore_ascii_case(b"chunked") && !chunked {
                        chunked = true;
                    } else if !item.is_empty() {
                        return Err(HttpError::BadHead(HeadFault::UnsupportedCoding));
                    }
                }
            }
            5 if cfg!(feature = "era-2025") => session_id = Some(parse_session_id(value)?),
            _ => {}
        }
    }
    let framing = if status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    let keep_alive = (if http11 { !close } else { keep && !close })
        && framing != Framing::Close
        && !(chunked && length.is_some());
    Ok(Some(ResponseHead {
        status,
        media_type,
        content_type,
        session_id,
        framing,
        keep_alive,
        retry_after,
    }))
}

#[cfg(any(test, feature = "std"))]
fn map_httparse(e: httparse::Error) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::HeaderName => BAD_NAME,
        httparse::Error::HeaderValue => BAD_VALUE,
        httparse::Error::NewLine => BAD_NEWLINE,
        httparse::Error::Status => BAD_STATUS,
        httparse::Error::Version => BAD_VERSION,
        httparse::Error::Token => HttpError::BadHead(HeadFault::Token),
    }
}

fn parse_length(v: &[u8]) -> Result<u64, HttpError> {
    // At most 19 digits: never saturated.
    decimal(v)
        .filter(|_| v.len() <= 19)
        .ok_or(HttpError::BadContentLength)
}

/// `v` as a decimal number (saturated), when it is one or more ASCII digits: one reader for
/// `content-length` and `retry-after`.
fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.saturating_mul(10).saturating_add(u64::from(d));
    }
    Some(n)
}

fn parse_session_id(v: &[u8]) -> Result<heapless::String<MAX_SESSION_ID>, HttpError> {
    if v.is_empty() || !v.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(HttpError::BadSessionId);
    }
    let s = core::str::from_utf8(v).map_err(|_| HttpError::BadSessionId)?;
    let mut out = heapless::String::new();
    out.push_str(s).map_err(|_| HttpError::BadSessionId)?;
    Ok(out)
}

/// The value as text into `out` (in place: the head's own string, not a copy of one), cut
/// to 64 bytes at a character boundary; invalid UTF-8 is cut before it.
fn truncated_into(out: &mut heapless::String<64>, v: &[u8]) {
    // The first 64 bytes' valid prefix: a character cut at 64 ends it as an invalid byte would.
    let text = crate::buf::utf8_prefix(v.get(..64).unwrap_or(v));
    out.clear();
    let _ = out.push_str(text);
}

#[cfg(test)]
mod tests;
