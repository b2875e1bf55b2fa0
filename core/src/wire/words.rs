//! The words of every failure and wire error, written once: a text of shared fragments
//! ([`Fr`]), each message a list of them with at most two arguments ([`Msg`], [`Arg`]), and
//! one small writer ([`tell`]). Phrases that several messages share are stored once, and no
//! message goes through `core::fmt` (flash on the edge).
//!
//! A leaf of the wire: it needs nothing of the error types whose words it holds (they use it,
//! and [`super::failure`] holds them all), so no module of the wire reaches itself through it.

#[cfg(not(feature = "std"))]
use crate::buf::utf8_prefix;
use crate::buf::{Detail, Overflow, Sink, Words, put_u64, truncated};

impl Words for Overflow {
    fn words(&self, out: &mut dyn Sink) -> Result<(), Overflow> {
        Msg::Overflow.say(
            out,
            [Arg::Num(self.needed as u64), Arg::Num(self.limit as u64)],
        )?;
        put_u64(out, self.needed.saturating_sub(self.limit) as u64)
    }
}

/// The standard reason phrase of an HTTP status, for messages.
pub fn reason_phrase(code: u16) -> &'static str {
    /// The phrases as written, at build time (the edge's fragments are packed: no `&str` of a
    /// fragment exists at run time there).
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const PHRASES: [(u16, &str); 19] = {
        let mut out = [(300, LITERALS[Fr::Redirect as usize]); 19];
        let mut i = 0;
        while i < REASONS.len() {
            let (code, fr) = REASONS[i];
            out[i + 1] = (400 + code as u16, LITERALS[fr as usize]);
            i += 1;
        }
        out
    };
    let code = if (300..=399).contains(&code) {
        300
    } else {
        code
    };
    PHRASES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("", |&(_, r)| r)
}

/// The statuses that have a reason phrase in messages (less 400: a byte each), and their
/// phrases.
const REASONS: [(u8, Fr); 18] = [
    (less_400(400), Fr::BadRequest),
    (less_400(401), Fr::Unauthorized),
    (less_400(403), Fr::Forbidden),
    (less_400(404), Fr::NotFound),
    (less_400(405), Fr::MethodNotAllowed),
    (less_400(406), Fr::NotAcceptable),
    (less_400(408), Fr::RequestTimeout),
    (less_400(409), Fr::Conflict),
    (less_400(413), Fr::ContentTooLarge),
    (less_400(415), Fr::UnsupportedMedia),
    (less_400(421), Fr::Misdirected),
    (less_400(422), Fr::Unprocessable),
    (less_400(429), Fr::TooManyRequests),
    (less_400(500), Fr::InternalError),
    (less_400(501), Fr::NotImplemented),
    (less_400(502), Fr::BadGateway),
    (less_400(503), Fr::Unavailable),
    (less_400(504), Fr::GatewayTimeout),
];

/// A 4xx or 5xx status as a byte (at build time: another fails the build).
const fn less_400(code: u16) -> u8 {
    assert!(code >= 400 && code < 400 + 256);
    (code - 400) as u8
}

/// [`reason_phrase`] as a fragment.
pub(crate) fn reason(code: u16) -> Option<Fr> {
    if (300..=399).contains(&code) {
        return Some(Fr::Redirect);
    }
    let code = code.checked_sub(400)?;
    REASONS
        .iter()
        .find(|(c, _)| u16::from(*c) == code)
        .map(|&(_, r)| r)
}

/// The fragments of the failures' words, in one text: a phrase that several messages share
/// is written once, and a message is a short list of fragments and arguments ([`tell`]). On
/// the edge this is a fraction of the code that a `match` writing each message piece by
/// piece takes; the words are the same.
macro_rules! fragments {
    ($($name:ident = $text:literal $(if $kept:expr)?,)*) => {
        /// A fragment of the failures' words, or an argument of a message ([`tell`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Fr {
            $(
                #[doc = concat!("`", $text, "`")]
                $name,
            )*
            /// The message's first argument.
            A0,
            /// The message's second argument.
            A1,
            /// The end of a message ([`Msg::program`]).
            End,
        }
        /// Every fragment's text, as written (used at build time, and where a `&'static str` is
        /// asked for: [`reason_phrase`]).
        const LITERALS: [&str; Fr::A0 as usize] = [$($text),*];
        /// Every fragment's text, one after the other (the host's shape).
        #[cfg(feature = "std")]
        const TEXT: &str = concat!($($text),*);
        /// Where each fragment ends in [`TEXT`].
        #[cfg(feature = "std")]
        const ENDS: [u16; Fr::A0 as usize] = ends([$($text.len()),*]);
        /// Whether the edge's text holds the fragment: one that only a capability the build
        /// leaves out says (`if` its feature), or only a build without one (`if !` its
        /// feature: that it is missing), is spelled empty there (never said).
        #[cfg(any(test, not(feature = "std")))]
        const KEPT: [bool; Fr::A0 as usize] = [$(true $(&& $kept)?),*];
    };
}

/// How many entries of a table the build holds: up to its last kept one (the entries after
/// it are left out whole, not even ended: a lookup past the end finds none, which is empty).
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const fn held(kept: &[bool]) -> usize {
    let mut n = kept.len();
    while n > 0 && !kept[n - 1] {
        n -= 1;
    }
    n
}

/// The length of the edge's text: every kept fragment's, and a NUL after each fragment held.
#[cfg(any(test, not(feature = "std")))]
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const fn spelled_len(literals: &[&str], kept: &[bool]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < held(kept) {
        if kept[i] {
            n += literals[i].len();
        }
        n += 1;
        i += 1;
    }
    n
}

/// The edge's text: every kept fragment's text (an empty one for the others), each ended by
/// a NUL.
#[cfg(any(test, not(feature = "std")))]
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const fn spell<const N: usize>(literals: &[&str], kept: &[bool]) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut at, mut i) = (0, 0);
    while i < held(kept) {
        if kept[i] {
            let bytes = literals[i].as_bytes();
            let mut j = 0;
            while j < bytes.len() {
                out[at] = bytes[j];
                at += 1;
                j += 1;
            }
        }
        at += 1;
        i += 1;
    }
    out
}

/// Every fragment's text, each ended by a NUL: what the edge's [`packed`] text packs.
#[cfg(any(test, not(feature = "std")))]
const SPELLED: &[u8] = &SPELLED_BYTES;
#[cfg(any(test, not(feature = "std")))]
const SPELLED_BYTES: [u8; spelled_len(&LITERALS, &KEPT)] = spell(&LITERALS, &KEPT);

/// The running sums of `lens` (at build time: an index out of range fails the build).
#[cfg(feature = "std")]
#[allow(clippy::indexing_slicing)]
const fn ends<const K: usize>(lens: [usize; K]) -> [u16; K] {
    let mut out = [0u16; K];
    let mut sum = 0;
    let mut i = 0;
    while i < K {
        sum += lens[i];
        assert!(sum <= u16::MAX as usize);
        out[i] = sum as u16;
        i += 1;
    }
    out
}

fragments! {
    BadEndpoint = "bad endpoint: ",
    CouldNotConnect = "could not connect: ",
    ToolCallTimedOut = "tool call timed out",
    After = " after ",
    Deadline = " ms, the call's deadline (--timeout-ms, Options::timeout_ms)",
    NotSent = ", before the tool call was sent",
    ServerClosed = "server closed the connection",
    WhileSending = " while the request was being sent",
    BeforeHead = " before the reply head was complete",
    InBody = " in the middle of the reply body",
    ReadFailed = "reading the reply failed (connection reset)",
    ConnectionEnded = "the connection ended ",
    AfterSent = "after the tool call was sent",
    BeforeAnyReply = " and before any reply",
    Comma = ",",
    CommaSpace = ", ",
    BeforeResponse = " before",
    ToolResponse = " the tool call's response",
    StreamEnded = "the reply stream ended without",
    ToolMay = ": the tool may ",
    HaveRun = "have run, so the call was not sent again",
    StillRunning = "still be running on the server",
    MalformedHttp = "malformed HTTP reply: ",
    Http = "HTTP ",
    Space = " ",
    Colon = ": ",
    OpenParen = " (",
    Close = ")",
    RetryAfterOpen = " (retry-after: ",
    WithRetryAfter = " with retry-after: ",
    LongerThanWait = ", longer than the call can wait",
    Stalled = "server stalled: no byte of the reply for ",
    IdleTimeout = " ms, the idle timeout (--idle-timeout-ms, Options::idle_timeout_ms; off by default)",
    Cancelled = "the call was cancelled by its caller",
    TheServer = "the server ",
    AskedForInput = "asked for input (",
    NoInputHandler = " and this call has no input handler",
    AnsweredResultType = "answered with resultType \"",
    NotAskedFor = "\", which this call did not ask for",
    RefusedVersion = "refused our protocol version (JSON-RPC -32022): it speaks [",
    ClientSpeaks = "]; this client speaks [",
    CloseBracket = "]",
    ThisBuild = "this build has no ",
    Support = " support",
    HandshakeFailed = "handshake failed",
    Era2025 = "era-2025" if !cfg!(feature = "era-2025"),
    TaskFailed = "task failed" if !cfg!(feature = "tasks"),
    Tasks = "tasks" if !cfg!(feature = "tasks"),
    ToolDropped = "the tool's x-mcp-header annotations are invalid, so its server's tool list drops it",
    ContentType = "reply has content-type '",
    Expected = "', expected application/json or text/event-stream",
    EmptyReply = "reply has no body; expected a JSON-RPC response",
    NotJson = "reply is not valid JSON: ",
    NotRpc = "reply is not a JSON-RPC response: ",
    NoResponse = "reply stream ended without a response to this request",
    BufferTooSmall = " buffer too small: ",
    NotWritten = "could not write the request: ",
    BadArguments = "tool arguments must be a JSON object",
    EndlessPaging = "kept paging (repeated cursor or over 1000 pages)",
    HostNotResolved = "host name did not resolve",
    Refused = "connection refused",
    Unreachable = "network unreachable",
    TlsFailed = "TLS handshake failed",
    SocketError = "socket error",
    Unsupported = "not supported by this adapter",
    NoProcess = "server process not running",
    HttpResponse = "HTTP response ",
    Head = "head",
    Body = "body",
    IsLarger = " is larger than",
    ItsCapOf = " its cap of ",
    Bytes = " bytes",
    IsMalformed = " is malformed: ",
    MoreThan = "has more than ",
    HeaderLines = " header lines",
    BadContentLength = "content-length is not a decimal number, or two of them differ",
    HttpChunked = "HTTP chunked ",
    BodyHasA = "body has a ",
    BadChunk = "malformed chunk size line",
    ChunkTooLarge = "chunk size that does not fit in 64 bits",
    TrailersLarger = "trailers are larger than their cap of ",
    SessionId = "mcp-session-id is empty, longer than ",
    NotVisible = " or not visible ASCII",
    SentAfterEnd = "server sent bytes after the end of",
    TheHttpResponse = " the HTTP response",
    ClosedInMiddle = "connection closed in the middle of",
    NotHttp = "the reply does not start with HTTP/ (is this an MCP HTTP server?)",
    SpeaksTls = "speaks TLS on this port: use https:// for this endpoint",
    BadRequest = "Bad Request",
    Unauthorized = "Unauthorized",
    Forbidden = "Forbidden",
    NotFound = "Not Found",
    MethodNotAllowed = "Method Not Allowed",
    NotAcceptable = "Not Acceptable",
    RequestTimeout = "Request Timeout",
    Conflict = "Conflict",
    ContentTooLarge = "Content Too Large",
    UnsupportedMedia = "Unsupported Media Type",
    Misdirected = "Misdirected Request",
    Unprocessable = "Unprocessable Content",
    TooManyRequests = "Too Many Requests",
    InternalError = "Internal Server Error",
    NotImplemented = "Not Implemented",
    BadGateway = "Bad Gateway",
    Unavailable = "Service Unavailable",
    GatewayTimeout = "Gateway Timeout",
    Redirect = "Redirect (not followed)",
    InvalidJsonAt = "invalid JSON at byte ",
    UnexpectedEnd = "input ended inside a value (truncated?)",
    UnexpectedByte = "unexpected byte ",
    Quote = "'",
    Hex = "0x",
    InvalidEscape = "invalid escape",
    InString = " in string",
    BadUnicodeEscape = "\\u escape not followed by four hex digits",
    InvalidUtf8 = "string is not valid UTF-8",
    ControlCharacter = "unescaped control character",
    Malformed = "malformed ",
    Number = "number",
    Literal = "literal (true/false/null)",
    TooDeep = "nested deeper than the limit of ",
    AfterJson = "data after the JSON value",
    JsonRpc = "JSON-RPC ",
    RpcNotObject = "message is not a JSON object",
    RpcBadVersion = "message lacks \"jsonrpc\":\"2.0\"",
    RpcBadId = "id is not a number, string or null",
    RpcBadError = "error is not an object with an integer code and a string message",
    RpcBoth = "response has both result and error",
    RpcNeither = "response has neither result nor error",
    RpcBadMethod = "method is not a string",
    RpcEmptyBatch = "batch array is empty",
    ResultMember = "result member \"",
    MissingMember = "\" is missing or has the wrong type",
    SseEvent = "server-sent event",
    RaiseLimit = "; raise the event limit or the reply buffer",
    EndpointUrl = "endpoint URL ",
    NoScheme = "has no scheme; write it as http://host[:port]/path",
    BadScheme = "scheme is not supported; use http:// or https://",
    EmptyHost = "has an empty host",
    BadPort = "port must be a decimal number in 1..=65535",
    BadHost = "host has characters a host name or IP address cannot hold",
    Userinfo = "carries user@ credentials; put credentials in headers instead",
    UrlFragment = "has a #fragment; remove it",
    BadPath = "path or query has spaces, control or non-ASCII characters",
    HeadNotFit = "HTTP request head does not fit: ",
    InvalidHeader = "request header is invalid: names must be HTTP tokens and values must not contain CR, LF or NUL",
    NeedsAtLeast = "needs at least ",
    CommaOver = ", over",
    By = " by ",
    ConnInvalidName = "invalid host name",
    ConnNameTooLong = "host name too long",
    ConnLookupFailed = "lookup failed (no DNS server answered or no such name)",
    ConnNoARecord = "no A record",
    ConnPoolInUse = "every socket of the pool is in use",
    ConnSynReset = "peer answered the SYN with RST",
    ConnSynTimedOut = "no answer to SYN (timed out)",
    ConnNoRoute = "no route to host",
    ConnInvalidState = "socket in an invalid state",
    ConnNoIpv6 = "IPv6 is not enabled in this build (feature proto-ipv6)",
    ConnBadIpv6 = "bad IPv6 literal",
    ConnNoTls = "no TLS in this build (verifi-mcp-embassy's tls feature); use http://",
    BufRequest = "request",
    BufReply = "reply",
    BufText = "text",
    BufRaw = "raw reply",
    BufCursor = "tools/list cursor",
    NoneListed = "none listed",
    HeadIncomplete = "incomplete ",
    Invalid = "invalid ",
    HeaderWord = "header ",
    NameWord = "name",
    ValueWord = "value",
    LineEnding = "line ending",
    StatusLine = "status line",
    NotHttp1 = "not HTTP/1.0 or HTTP/1.1",
    StatusOutside = "status code outside 100..=599",
    Unexpected101 = "unexpected 101 Switching Protocols",
    UnsupportedCoding = "unsupported transfer-encoding",
    MissingStatus = "missing status code",
    Token = "token",
    ServerChose = "server chose protocol version '" if cfg!(feature = "era-2025"),
    NotSpoken = "', which this client does not speak (it speaks 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25)" if cfg!(feature = "era-2025"),
    InitRefused = "server refused initialize: " if cfg!(feature = "era-2025"),
    ErrorWord = "error " if cfg!(feature = "era-2025"),
    Minus = "-" if cfg!(feature = "era-2025"),
    BadInitResult = "initialize result has no protocolVersion string" if cfg!(feature = "era-2025"),
    TaskOpen = " (task " if cfg!(feature = "tasks"),
    WasCancelled = " was cancelled)" if cfg!(feature = "tasks"),
    CancelledTask = "cancelled task " if cfg!(feature = "tasks"),
    TaskWord = "task " if cfg!(feature = "tasks"),
    NotFoundOrExpired = " is not found or expired on the server" if cfg!(feature = "tasks"),
    LostServer = "lost the server while it ran task " if cfg!(feature = "tasks"),
    MayStillRunThere = "; the task may still be running there" if cfg!(feature = "tasks"),
    NoLongerKnows = "no longer knows this session" if cfg!(feature = "era-2025"),
    NotSpeakModern = "does not speak the 2026-07-28 protocol, which tasks need" if cfg!(feature = "tasks"),
}

/// The messages said through [`tell`], each a list of fragments and arguments, in one table: a
/// message is named by a byte ([`Msg`]), not by a pointer and a length.
macro_rules! messages {
    ($($name:ident = [$($fr:ident),*] $(if $kept:expr)?,)*) => {
        /// A message of the failures' words: its fragments and arguments ([`Msg::program`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Msg {
            $(
                #[doc = concat!($("`", stringify!($fr), "` "),*)]
                $name,
            )*
        }
        /// Every message's fragments, one after the other, each message ended by [`Fr::End`]
        /// (a byte a message, not an offset table); a message that only a capability the
        /// build leaves out says (`if` its feature), or only a build without one (`if !` its
        /// feature), is empty (never said).
        const PROGRAMS: &[Fr] = &PROGRAM_BYTES;
        /// Every message's fragments, as written.
        const WRITTEN: &[&[Fr]] = &[$(&[$(Fr::$fr),*]),*];
        /// Whether the build holds the message.
        const SAID: &[bool] = &[$(true $(&& $kept)?),*];
        const PROGRAM_BYTES: [Fr; programs_len(WRITTEN, SAID)] = programs(WRITTEN, SAID);
    };
}

messages! {
    EraMissing = [HandshakeFailed, OpenParen, ThisBuild, Era2025, Support, Close] if !cfg!(feature = "era-2025"),
    TasksMissing = [TaskFailed, OpenParen, ThisBuild, Tasks, Support, Close] if !cfg!(feature = "tasks"),
    Endpoint = [BadEndpoint, A0],
    Connect = [CouldNotConnect, A0],
    TimedOut = [ToolCallTimedOut],
    SendFailed = [ServerClosed, WhileSending],
    ReadFailed = [ReadFailed],
    ClosedInHead = [ServerClosed, BeforeHead],
    ClosedInBody = [ServerClosed, InBody],
    Said = [A0],
    MalformedHttp = [MalformedHttp, A0],
    Snippet = [Colon, A0],
    RetryAfter = [RetryAfterOpen, A0, Close],
    Stalled = [Stalled, A0, IdleTimeout],
    StalledInCall = [Stalled, A0, IdleTimeout, ToolMay, StillRunning],
    CallTimedOut = [ToolCallTimedOut, After, A0, Deadline, NotSent],
    CallTimedOutSent = [ToolCallTimedOut, After, A0, Deadline, ToolMay, StillRunning],
    BrokenBeforeReply = [ConnectionEnded, AfterSent, BeforeAnyReply, ToolMay, HaveRun],
    BrokenInHead = [ServerClosed, BeforeHead, CommaSpace, AfterSent, ToolMay, HaveRun],
    BrokenInBody = [ServerClosed, InBody, Comma, BeforeResponse, ToolResponse, ToolMay, HaveRun],
    BrokenReset = [ReadFailed, BeforeResponse, ToolResponse, ToolMay, HaveRun],
    BrokenStreamEnded = [StreamEnded, ToolResponse, ToolMay, HaveRun],
    Cancelled = [Cancelled],
    InputRequired = [TheServer, AskedForInput, A0, Close, NoInputHandler],
    UnexpectedResultType = [TheServer, AnsweredResultType, A0, NotAskedFor],
    VersionRefused = [TheServer, RefusedVersion, A0, ClientSpeaks, A1, CloseBracket],
    VersionRefusedNone = [TheServer, RefusedVersion, NoneListed, ClientSpeaks, A1, CloseBracket],
    NotBuilt = [ThisBuild, A0, Support, Colon, A1],
    ToolDropped = [ToolDropped],
    RetryTooLate = [WithRetryAfter, A0, LongerThanWait],
    ContentType = [ContentType, A0, Expected],
    EmptyReply = [EmptyReply],
    NotJson = [NotJson, A0],
    NotRpc = [NotRpc, A0],
    NoResponse = [NoResponse],
    TooLargeRequest = [BufRequest, BufferTooSmall, A0],
    TooLargeReply = [BufReply, BufferTooSmall, A0],
    TooLargeText = [BufText, BufferTooSmall, A0],
    TooLargeRaw = [BufRaw, BufferTooSmall, A0],
    TooLargeCursor = [BufCursor, BufferTooSmall, A0],
    NotWritten = [NotWritten, A0],
    Handshake = [HandshakeFailed, Colon, A0] if cfg!(feature = "era-2025"),
    BadArguments = [BadArguments],
    EndlessPaging = [TheServer, EndlessPaging],
    HeadTooLarge = [HttpResponse, Head, IsLarger, ItsCapOf, A0, Bytes],
    BadHead = [HttpResponse, Head, IsMalformed, A0],
    TooManyHeaders = [HttpResponse, MoreThan, A0, HeaderLines],
    BadContentLength = [HttpResponse, BadContentLength],
    BadChunk = [HttpChunked, BodyHasA, BadChunk],
    ChunkTooLarge = [HttpChunked, BodyHasA, ChunkTooLarge],
    BodyTooLarge = [HttpResponse, Body, IsLarger, ItsCapOf, A0, Bytes],
    BadSessionId = [SessionId, A0, Bytes, NotVisible],
    TrailingData = [SentAfterEnd, TheHttpResponse],
    EofInHead = [ClosedInMiddle, TheHttpResponse, Space, Head],
    EofInBody = [ClosedInMiddle, TheHttpResponse, Space, Body],
    TrailersTooLarge = [HttpChunked, TrailersLarger, A0, Bytes],
    NotHttp = [NotHttp],
    TlsRecord = [TheServer, SpeaksTls],
    HeadNotFit = [HeadNotFit, A0],
    InvalidHeader = [InvalidHeader],
    JsonAt = [InvalidJsonAt, A0, Colon, A1],
    JsonEnd = [UnexpectedEnd],
    JsonByte = [UnexpectedByte, Quote, A0, Quote],
    JsonByteHex = [UnexpectedByte, Hex, A0],
    JsonEscape = [InvalidEscape, InString],
    JsonUnicodeEscape = [BadUnicodeEscape],
    JsonUtf8 = [InvalidUtf8],
    JsonControl = [ControlCharacter, InString],
    JsonNumber = [Malformed, Number],
    JsonLiteral = [Malformed, Literal],
    JsonTooDeep = [TooDeep, A0],
    JsonTrailing = [AfterJson],
    RpcNotObject = [JsonRpc, RpcNotObject],
    RpcBadVersion = [JsonRpc, RpcBadVersion],
    RpcBadId = [JsonRpc, RpcBadId],
    RpcBadError = [JsonRpc, RpcBadError],
    RpcBoth = [JsonRpc, RpcBoth],
    RpcNeither = [JsonRpc, RpcNeither],
    RpcBadMethod = [JsonRpc, RpcBadMethod],
    RpcEmptyBatch = [JsonRpc, RpcEmptyBatch],
    RpcBadField = [ResultMember, A0, MissingMember],
    SseTooLarge = [SseEvent, IsLarger, ItsCapOf, A0, Bytes, RaiseLimit],
    NoScheme = [EndpointUrl, NoScheme],
    BadScheme = [EndpointUrl, BadScheme],
    EmptyHost = [EndpointUrl, EmptyHost],
    BadPort = [EndpointUrl, BadPort],
    BadHost = [EndpointUrl, BadHost],
    Userinfo = [EndpointUrl, Userinfo],
    UrlFragment = [EndpointUrl, UrlFragment],
    BadPath = [EndpointUrl, BadPath],
    Overflow = [NeedsAtLeast, A0, Bytes, CommaOver, ItsCapOf, A1, By],
    HeadIncomplete = [HeadIncomplete, Head],
    HeadName = [Invalid, HeaderWord, NameWord],
    HeadValue = [Invalid, HeaderWord, ValueWord],
    HeadNewLine = [Invalid, LineEnding],
    HeadStatus = [Invalid, StatusLine],
    HeadVersion = [NotHttp1],
    HeadStatusRange = [StatusOutside],
    HeadSwitching = [Unexpected101],
    HeadCoding = [UnsupportedCoding],
    HeadNoStatus = [MissingStatus],
    HeadToken = [Invalid, Token],
    UnsupportedVersion = [ServerChose, A0, NotSpoken] if cfg!(feature = "era-2025"),
    InitRefused = [InitRefused, JsonRpc, ErrorWord, A0, Colon, A1] if cfg!(feature = "era-2025"),
    InitRefusedMinus = [InitRefused, JsonRpc, ErrorWord, Minus, A0, Colon, A1] if cfg!(feature = "era-2025"),
    BadInitResult = [BadInitResult] if cfg!(feature = "era-2025"),
    TaskTimedOut = [ToolCallTimedOut, TaskOpen, A0, WasCancelled] if cfg!(feature = "tasks"),
    TaskCancelled = [TheServer, CancelledTask, A0] if cfg!(feature = "tasks"),
    TaskGone = [TaskWord, A0, NotFoundOrExpired] if cfg!(feature = "tasks"),
    TaskLost = [LostServer, A0, MayStillRunThere] if cfg!(feature = "tasks"),
    SessionExpired = [Http, A0, Space, NotFound, Colon, TheServer, NoLongerKnows] if cfg!(feature = "era-2025"),
    NotModern = [TheServer, NotSpeakModern] if cfg!(feature = "tasks"),
}

/// The length of [`PROGRAMS`]: every message held, and an end after each message.
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const fn programs_len(written: &[&[Fr]], said: &[bool]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < held(said) {
        if said[i] {
            n += written[i].len();
        }
        n += 1;
        i += 1;
    }
    n
}

/// [`PROGRAMS`]: every message held (none for the others), each ended by [`Fr::End`].
#[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
const fn programs<const N: usize>(written: &[&[Fr]], said: &[bool]) -> [Fr; N] {
    let mut out = [Fr::End; N];
    let (mut at, mut i) = (0, 0);
    while i < held(said) {
        if said[i] {
            let mut j = 0;
            while j < written[i].len() {
                out[at] = written[i][j];
                at += 1;
                j += 1;
            }
        }
        at += 1;
        i += 1;
    }
    out
}

impl Msg {
    /// The message's fragments and arguments, up to its [`Fr::End`] (and the messages after
    /// it: [`tell`] stops at the end).
    pub(crate) fn program(self) -> &'static [Fr] {
        let mut rest = PROGRAMS;
        for _ in 0..self as usize {
            let next = rest
                .iter()
                .position(|&fr| fr == Fr::End)
                .map_or(0, |e| e + 1);
            rest = rest.get(next..).unwrap_or(&[]);
        }
        rest
    }

    /// Says the message with its arguments (see [`tell`]).
    pub(crate) fn say(self, f: &mut dyn Sink, args: [Arg<'_>; 2]) -> Result<(), Overflow> {
        tell(f, self.program(), args)
    }
}

impl Fr {
    /// Writes the fragment's text (none for an argument) in one piece, as [`Sink::put`] takes
    /// it.
    fn put(self, f: &mut dyn Sink) -> Result<(), Overflow> {
        #[cfg(feature = "std")]
        {
            f.put(text_at(self as usize))
        }
        #[cfg(not(feature = "std"))]
        {
            let mut out = [0u8; packed::LONGEST];
            f.put(packed::text(self as usize, &mut out))
        }
    }
}

/// The text of the fragment numbered `index` (`Fr::X as usize`, or an offset from one in a
/// run of fragments in the order of a public enum's) as a failure's detail, cut as
/// [`truncated`] cuts.
pub(crate) fn detail_at(index: usize) -> Detail {
    #[cfg(feature = "std")]
    {
        truncated(core::str::from_utf8(text_at(index)).unwrap_or(""))
    }
    #[cfg(not(feature = "std"))]
    {
        let mut out = [0u8; packed::LONGEST];
        truncated(utf8_prefix(packed::text(index, &mut out)))
    }
}

/// The text of the fragment numbered `i` (none for an argument).
#[cfg(feature = "std")]
fn text_at(i: usize) -> &'static [u8] {
    {
        let start = i.checked_sub(1).and_then(|p| ENDS.get(p)).copied();
        let end = ENDS.get(i).copied().unwrap_or(0);
        TEXT.as_bytes()
            .get(usize::from(start.unwrap_or(0))..usize::from(end))
            .unwrap_or(&[])
    }
}

/// An argument of a message ([`tell`]).
#[derive(Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// Words as they are.
    Str(&'a str),
    /// A number in decimal.
    Num(u64),
    /// What a value says of itself.
    Says(&'a dyn Words),
    /// Nothing (a message without this argument).
    None,
}

/// Writes `message`: its fragments, and `args` where it names them ([`Fr::A0`], [`Fr::A1`]),
/// up to its end ([`Fr::End`] or the slice's). One copy of the loop for every message: never
/// inlined.
#[inline(never)]
pub(crate) fn tell(f: &mut dyn Sink, message: &[Fr], args: [Arg<'_>; 2]) -> Result<(), Overflow> {
    let [a0, a1] = args;
    for &fr in message {
        let arg = match fr {
            Fr::End => break,
            Fr::A0 => a0,
            Fr::A1 => a1,
            _ => {
                fr.put(f)?;
                continue;
            }
        };
        match arg {
            Arg::Str(s) => f.put_str(s)?,
            Arg::Num(n) => put_u64(f, n)?,
            Arg::Says(w) => w.words(f)?,
            Arg::None => {}
        }
    }
    Ok(())
}

/// The edge's shape of the fragments' text: packed at build time by a static Huffman code
/// (the text's own byte counts, computed by `const fn`s from the same literals), each fragment
/// ended by a NUL symbol; [`text`](packed::text) decodes one fragment (into a buffer of the
/// longest fragment's size, so that the sink gets it in one piece, as from the plain text).
/// About 60 % of the plain text, with no table of offsets. Error paths only: a fragment is
/// found by decoding from the start.
#[cfg(any(test, not(feature = "std")))]
mod packed {
    use super::SPELLED;

    /// The end of a fragment in [`SPELLED`].
    const END: u8 = 0;

    /// The first symbol that stands for a pair ([`MERGES`]); the text's bytes are below it
    /// (ASCII: a build-time check).
    const FIRST_PAIR: u8 = 0x80;

    /// Pairs of symbols (bytes, or pairs before them) that the text is rewritten with before
    /// it is packed, in order: pair `i` becomes the one symbol `FIRST_PAIR + i` (a byte-pair
    /// encoding). Found offline over the fragments of the smallest build (the 2026 era
    /// alone), greedily, each the pair that saves the most bits by its count and its halves'
    /// code lengths, less its table bytes (`th`, `er`, ` the `, `HTTP`, `JSON`, `server`,
    /// `invalid `…); a pair no longer in the text costs its two bytes here and changes
    /// nothing else. On the edge: the packed text about 250 B smaller, for a few bytes of
    /// table and decoding.
    const MERGES: [[u8; 2]; 128] = pairs(&[
        b"therreorined\x80es i\x87\x86 t \x85 o\x8an\x8conal\x84gHT\x91T\x92Penanv\x81v\x8fON",
        b"JS\x99\x98a\x87h\x9b \x89y id\x97\x9f\x80\x88\x88\x8d\x81\x96e qu\x8flc\xa6, pl",
        b"\xa9\x9e\x82\xaa\x83 ch: \x84\xa0ouadols\xa3uns\x8a\x82sst\xb0t\x94t\x94dcte\xbb",
        b"c\x8eme\xa5ee\xb1h\xc0\xbe\xb8i\x8ew\x9bto\xc5\xb2no\xc7 \xb6p\xc9\x8e\xcasN\x8c",
        b"\xbc\xc3\x81 \xbdn\xcf\xcd\x94\x8a; iliti\xc2i\x80w\xd6\x80\x95\xce\xd8\x95dodho",
        b"\xdc\xb5ofp\x83\xdft:/\xe1/\xbf\xb7\xbf\xb5'\x87\x9d\xabg\xd9atna\xdd\xe9a\xd3ag",
        b"\xc1\xcem\x8fPCR\xeff\xeb\xbdtar-\xf0\x9a\xf4ex\x90 \xa7 \xf8\xc4\x93 \x93/\xc6 a ",
        b"\xa2\xfd\x9d\xfc",
    ]);

    /// The pairs of [`MERGES`] from lines of them (at build time: an odd line fails it).
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const fn pairs<const N: usize>(lines: &[&[u8]]) -> [[u8; 2]; N] {
        let mut out = [[0u8; 2]; N];
        let (mut n, mut l) = (0, 0);
        while l < lines.len() {
            let line = lines[l];
            assert!(line.len().is_multiple_of(2));
            let mut i = 0;
            while i < line.len() {
                out[n] = [line[i], line[i + 1]];
                n += 1;
                i += 2;
            }
            l += 1;
        }
        assert!(n == N);
        out
    }

    /// [`SPELLED`] rewritten with [`MERGES`], and its length (at build time).
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const PAIRED: ([u8; SPELLED.len()], usize) = {
        let mut text = [0u8; SPELLED.len()];
        let mut len = 0;
        while len < SPELLED.len() {
            // A byte that would read as a pair, or a pair holding an end, fails the build.
            assert!(SPELLED[len] < FIRST_PAIR);
            text[len] = SPELLED[len];
            len += 1;
        }
        assert!(MERGES.len() <= 256 - FIRST_PAIR as usize);
        let mut m = 0;
        while m < MERGES.len() {
            let [a, b] = MERGES[m];
            assert!(a != END && b != END && a < FIRST_PAIR + m as u8 && b < FIRST_PAIR + m as u8);
            let (mut read, mut write) = (0, 0);
            while read < len {
                if read + 1 < len && text[read] == a && text[read + 1] == b {
                    text[write] = FIRST_PAIR + m as u8;
                    read += 2;
                } else {
                    text[write] = text[read];
                    read += 1;
                }
                write += 1;
            }
            len = write;
            m += 1;
        }
        (text, len)
    };
    /// The symbols that are packed: [`SPELLED`] with its pairs ([`PAIRED`]).
    const SYMBOL_TEXT: &[u8] = PAIRED.0.split_at(PAIRED.1).0;
    /// The code length of every symbol of [`SYMBOL_TEXT`] (0: not in the text).
    const LENGTHS: [u8; 256] = lengths(SYMBOL_TEXT);
    /// The longest code.
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const MAX_LENGTH: usize = {
        let mut max = 0;
        let mut i = 0;
        while i < 256 {
            if LENGTHS[i] as usize > max {
                max = LENGTHS[i] as usize;
            }
            i += 1;
        }
        max
    };
    /// How many symbols the code has.
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const SYMBOL_COUNT: usize = {
        let mut n = 0;
        let mut i = 0;
        while i < 256 {
            if LENGTHS[i] > 0 {
                n += 1;
            }
            i += 1;
        }
        n
    };
    /// How many symbols have each code length (index 0: length 1).
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    static COUNTS: [u8; MAX_LENGTH] = {
        let mut out = [0u8; MAX_LENGTH];
        let mut i = 0;
        while i < 256 {
            if LENGTHS[i] > 0 {
                out[LENGTHS[i] as usize - 1] += 1;
            }
            i += 1;
        }
        out
    };
    /// The symbols in canonical order (by code length, then by value).
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    static SYMBOLS: [u8; SYMBOL_COUNT] = {
        let mut out = [0u8; SYMBOL_COUNT];
        let mut n = 0;
        let mut len = 1;
        while len <= MAX_LENGTH {
            let mut i = 0;
            while i < 256 {
                if LENGTHS[i] as usize == len {
                    out[n] = i as u8;
                    n += 1;
                }
                i += 1;
            }
            len += 1;
        }
        out
    };
    /// The packed text's length in bits.
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const BITS: usize = {
        let mut bits = 0;
        let mut i = 0;
        while i < SYMBOL_TEXT.len() {
            bits += LENGTHS[SYMBOL_TEXT[i] as usize] as usize;
            i += 1;
        }
        bits
    };
    /// The packed text: each symbol's code, first bit first, from each byte's low bit up.
    static PACKED: [u8; BITS.div_ceil(8)] = pack(SYMBOL_TEXT);
    /// The longest fragment in bytes.
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    pub(super) const LONGEST: usize = {
        let (mut max, mut run, mut i) = (0, 0, 0);
        while i < SPELLED.len() {
            if SPELLED[i] == END {
                run = 0;
            } else {
                run += 1;
                if run > max {
                    max = run;
                }
            }
            i += 1;
        }
        max
    };
    // Every NUL in the text ends a fragment: no fragment holds one.
    #[allow(clippy::indexing_slicing)] // At build time: out of range fails the build.
    const _: () = {
        let (mut ends, mut i) = (0, 0);
        while i < SPELLED.len() {
            if SPELLED[i] == END {
                ends += 1;
            }
            i += 1;
        }
        assert!(ends == super::held(&super::KEPT));
    };

    /// The Huffman code lengths of the bytes of `text`, by their counts in it (at build time:
    /// two lightest subtrees joined until one is left; the depth of a leaf is its length).
    #[allow(clippy::indexing_slicing)]
    const fn lengths(text: &[u8]) -> [u8; 256] {
        // Nodes 0..256 are the byte values, 256.. the joined subtrees.
        let mut weight = [0usize; 512];
        let mut parent = [0usize; 512];
        let mut open = [false; 512];
        let mut i = 0;
        while i < text.len() {
            weight[text[i] as usize] += 1;
            open[text[i] as usize] = true;
            i += 1;
        }
        let mut next = 256;
        loop {
            let (mut a, mut b) = (usize::MAX, usize::MAX);
            let mut n = 0;
            while n < next {
                if open[n] {
                    if a == usize::MAX || weight[n] < weight[a] {
                        b = a;
                        a = n;
                    } else if b == usize::MAX || weight[n] < weight[b] {
                        b = n;
                    }
                }
                n += 1;
            }
            if b == usize::MAX {
                break;
            }
            weight[next] = weight[a] + weight[b];
            open[a] = false;
            open[b] = false;
            open[next] = true;
            parent[a] = next;
            parent[b] = next;
            next += 1;
        }
        let mut out = [0u8; 256];
        let mut s = 0;
        while s < 256 {
            if weight[s] > 0 {
                let (mut depth, mut n) = (0, s);
                while parent[n] != 0 {
                    n = parent[n];
                    depth += 1;
                }
                assert!(depth > 0 && depth <= 16);
                out[s] = depth;
            }
            s += 1;
        }
        out
    }

    /// `text` packed in the canonical code of [`LENGTHS`] (at build time).
    #[allow(clippy::indexing_slicing)]
    const fn pack<const N: usize>(text: &[u8]) -> [u8; N] {
        // The canonical codes: by length, then by value, counting up.
        let mut codes = [0usize; 256];
        let (mut code, mut len) = (0, 1);
        while len <= MAX_LENGTH {
            let mut s = 0;
            while s < 256 {
                if LENGTHS[s] as usize == len {
                    codes[s] = code;
                    code += 1;
                }
                s += 1;
            }
            code <<= 1;
            len += 1;
        }
        let mut out = [0u8; N];
        let (mut at, mut i) = (0, 0);
        while i < text.len() {
            let s = text[i] as usize;
            let mut k = LENGTHS[s] as usize;
            while k > 0 {
                k -= 1;
                out[at / 8] |= ((codes[s] >> k & 1) as u8) << (at % 8);
                at += 1;
            }
            i += 1;
        }
        out
    }

    /// The text of fragment `index`, decoded into `out` (the symbols before it are decoded
    /// and skipped).
    pub(super) fn text(index: usize, out: &mut [u8; LONGEST]) -> &[u8] {
        let (mut at, mut seen, mut n) = (0usize, 0, 0);
        'symbols: while at < BITS {
            // One symbol, a bit at a time: the canonical code's first code of each length.
            let (mut code, mut first, mut rank) = (0usize, 0usize, 0usize);
            for &count in &COUNTS {
                let byte = PACKED.get(at / 8).copied().unwrap_or(0);
                code |= usize::from(byte >> (at % 8) & 1);
                at += 1;
                let count = usize::from(count);
                let offset = code.wrapping_sub(first);
                if offset < count {
                    let symbol = SYMBOLS.get(rank + offset).copied().unwrap_or(END);
                    if symbol == END {
                        if seen == index {
                            break 'symbols;
                        }
                        seen += 1;
                    } else if seen == index {
                        expand(symbol, out, &mut n);
                    }
                    continue 'symbols;
                }
                rank += count;
                first = (first + count) << 1;
                code <<= 1;
            }
            break;
        }
        out.get(..n).unwrap_or(&[])
    }

    /// Writes the bytes `symbol` stands for at `out[*n..]`: a byte itself, a pair its two
    /// halves (nested pairs are a few levels deep).
    fn expand(symbol: u8, out: &mut [u8; LONGEST], n: &mut usize) {
        // A byte (below `FIRST_PAIR`) wraps past every pair: no pair of its own.
        match MERGES.get(usize::from(symbol.wrapping_sub(FIRST_PAIR))) {
            Some(&[a, b]) => {
                expand(a, out, n);
                expand(b, out, n);
            }
            None => {
                if let Some(o) = out.get_mut(*n) {
                    *o = symbol;
                    *n += 1;
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn every_fragment_unpacks_to_its_literal() {
            let mut out = [0u8; super::LONGEST];
            for (i, literal) in super::super::LITERALS.iter().enumerate() {
                let literal = if super::super::KEPT[i] { literal } else { "" };
                assert_eq!(super::text(i, &mut out), literal.as_bytes(), "fragment {i}");
            }
            assert_eq!(super::text(super::super::LITERALS.len(), &mut out), b"");
            assert!(super::PACKED.len() * 100 < super::SPELLED.len() * 60);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reason_phrases_are_the_statuses_own() {
        for (code, phrase) in [
            (200, ""),
            (300, "Redirect (not followed)"),
            (399, "Redirect (not followed)"),
            (400, "Bad Request"),
            (404, "Not Found"),
            (418, ""),
            (429, "Too Many Requests"),
            (504, "Gateway Timeout"),
            (505, ""),
            (656, ""),
        ] {
            assert_eq!(super::reason_phrase(code), phrase, "{code}");
        }
    }
}
