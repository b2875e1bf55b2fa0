//! The writers of requests: the JSON-RPC message of each round trip, its `_meta`, and its
//! HTTP head.

use super::*;
use crate::wire::json::JsonOut;
use crate::wire::jsonrpc::{join, joined_len, plain};

/// A build without the handshake era and without stdio (the edge's one-era build): a
/// timed-out call's cancel and the courtesy requests are never written there (in the 2026 era
/// the closed stream is the cancel, and there is no session to end), nor is a handshake, a
/// session id, an event to resume from or (without `tasks`) a task's request; their writers
/// fold away. (A host build writes whatever trip it is given, as its tests do.)
pub(crate) const ONE_ERA_EDGE: bool = !cfg!(feature = "era-2025") && !cfg!(feature = "std");

/// Whether a `server/discover` is ever written: by the era probe (feature `probe`), and as the
/// 2026 era's ping, which the edge's one-era build never sends (`Op::request`); there, with
/// no probe, its writer folds away.
const DISCOVER_BUILT: bool =
    cfg!(feature = "era-2026") && (cfg!(feature = "probe") || !ONE_ERA_EDGE);

/// What the build lists: the edge's one-era build lists tools alone (`Op::list` refuses any
/// other list there), so a list read from a value is `Tools` and the others' names fold away.
pub(crate) trait BuiltList {
    /// `self`, or `Tools` in the edge's one-era build.
    fn built(self) -> Self;
}

impl BuiltList for ListMethod {
    fn built(self) -> Self {
        if ONE_ERA_EDGE {
            ListMethod::Tools
        } else {
            self
        }
    }
}

/// The JSON-RPC message a request carries.
#[cfg_attr(not(feature = "std"), repr(u32))]
pub(crate) enum Body<'x> {
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
    },
    ToolsCall {
        id: u64,
        tool: &'x str,
        args: Option<Value<'x>>,
        /// The call's `progressToken` (its id), when someone listens for progress: in the
        /// params' own `_meta`, or in the one `_meta` of a 2026 or traced request.
        progress: Option<u64>,
        /// The tool's `x-mcp-header` pairs (`argument\0Header\0`…), for the 2026 era's
        /// `Mcp-Param-*` headers.
        params: &'x [u8],
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
    /// The client's answer to a server's request (an elicitation's result object with it):
    /// the handshake era's (on a call's stream or the session's GET stream; a 2026 server asks
    /// through input rounds). A build without that era never makes one ([`Trip::write`] says
    /// so if asked).
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
    pub(crate) fn request(id: u64, req: jsonrpc::Request<'x>) -> Self {
        Body::Request { id, req }
    }

    /// Writes the message but its end, which it returns: `}}` when it ends its `params`, `}`
    /// when it has none, nothing when it is written whole (an answer, no body), so that
    /// `_meta` can go into the params before the end. The arms of a capability the build
    /// leaves out (docs/design.md#capabilities) are never taken, and are not compiled.
    /// A call's progress token goes into its params when `own_meta` (no other `_meta`).
    fn write_open<S: Sink>(&self, out: &mut JsonOut<S>, own_meta: bool) -> &'static [u8] {
        match *self {
            Body::Initialize {
                id,
                version,
                elicitation,
                elicitation_url,
            } if cfg!(feature = "era-2025") => {
                let caps = ClientCapabilities {
                    elicitation,
                    elicitation_url,
                    ..ClientCapabilities::default()
                };
                jsonrpc::initialize_open(out, id, version, &caps)
            }
            Body::Initialized if cfg!(feature = "era-2025") => jsonrpc::initialized_open(out),
            Body::List { id, list, cursor } => jsonrpc::list_open(out, id, list.built(), cursor),
            // (Never made in the edge's one-era build: `Op::request`.)
            Body::Request { id, ref req } if !ONE_ERA_EDGE => jsonrpc::request_open(out, id, req),
            Body::ToolsCall {
                id,
                tool,
                args,
                progress,
                extra,
                ..
            } => jsonrpc::tools_call_open(
                out,
                id,
                (tool, args),
                progress.filter(|_| own_meta),
                extra,
            ),
            Body::Cancelled { id, reason } if !ONE_ERA_EDGE => {
                jsonrpc::cancelled_open(out, id, reason)
            }
            // `_meta` is added by the modern writer, as to every 2026 request.
            Body::Discover { id } if DISCOVER_BUILT => {
                jsonrpc::put_request_head(out, id, "server/discover");
                jsonrpc::BARE_END
            }
            Body::Task {
                id,
                method,
                task,
                extra,
            } if cfg!(feature = "tasks") => {
                jsonrpc::put_request_head(out, id, method);
                out.lit(b",\"params\":{\"taskId\":");
                out.str(task);
                out.lit(extra);
                jsonrpc::PARAMS_END
            }
            Body::Answer(request, answer) if cfg!(feature = "era-2025") => {
                request.write(out, answer);
                b""
            }
            _ => b"",
        }
    }

    /// The id of a request (none for a notification, an answer or no body): a request is what
    /// carries trace context.
    pub(crate) fn request_id(&self) -> Option<u64> {
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
            // (What the edge's one-era build never writes folds away there.)
            Body::Initialize { .. } if !ONE_ERA_EDGE => ("initialize", None),
            Body::Initialized if !ONE_ERA_EDGE => ("notifications/initialized", None),
            Body::List { list, .. } => (list.built().method(), None),
            Body::Request { req, .. } if !ONE_ERA_EDGE => (
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
            Body::Cancelled { .. } if !ONE_ERA_EDGE => ("notifications/cancelled", None),
            Body::Discover { .. } if DISCOVER_BUILT => ("server/discover", None),
            Body::Task { method, task, .. } if !ONE_ERA_EDGE || cfg!(feature = "tasks") => {
                (method, Some(task))
            }
            _ => ("", None),
        }
    }
}

/// The pieces of [`crate::wire::era::write_meta_keys`] before the capabilities, for
/// [`crate::wire::era::MODERN_VERSION`]: every 2026 request writes them, and they never change.
const MODERN_KEY_PARTS: [&[u8]; 7] = [
    b"\"io.modelcontextprotocol/protocolVersion\":\"",
    crate::wire::era::MODERN_VERSION.as_bytes(),
    b"\",\"io.modelcontextprotocol/clientInfo\":{\"name\":\"",
    crate::wire::era::CLIENT_NAME.as_bytes(),
    b"\",\"version\":\"",
    crate::wire::era::SDK_VERSION.as_bytes(),
    b"\"},\"io.modelcontextprotocol/clientCapabilities\":",
];

/// True when the three strings in [`MODERN_KEY_PARTS`] need no JSON escaping (what
/// `write_str_literal` escapes: control bytes, `"` and `\\`), so the parts joined are what
/// `write_meta_keys` writes. Else the writer is used.
const MODERN_KEYS_PLAIN: bool = plain(crate::wire::era::MODERN_VERSION.as_bytes())
    && plain(crate::wire::era::CLIENT_NAME.as_bytes())
    && plain(crate::wire::era::SDK_VERSION.as_bytes());

/// [`MODERN_KEY_PARTS`] joined, at compile time.
const MODERN_KEYS: [u8; joined_len(&MODERN_KEY_PARTS)] = join(&MODERN_KEY_PARTS);

/// What a 2026-07-28 request's `_meta` adds: the version (also in `MCP-Protocol-Version`),
/// the capabilities declared and, on a call, the lowest level of log messages asked for
/// (`io.modelcontextprotocol/logLevel`) when someone keeps them.
type ModernMeta<'m> = (&'m str, ClientCapabilities, Option<LogLevel>);

/// Writes the `_meta` member of a request: the progress token, the trace context
/// (`traceparent`, `tracestate`) and, in the 2026 era, the era's keys.
#[cfg(all(test, feature = "std"))]
fn write_meta_member(
    out: &mut impl Sink,
    modern: Option<ModernMeta<'_>>,
    progress: Option<u64>,
    trace: Option<(&crate::machine::TraceContext<'_>, u64)>,
) -> Result<(), Overflow> {
    let mut w = JsonOut::new(out);
    meta_member_to(&mut w, modern, progress, trace);
    w.done()
}

/// [`write_meta_member`] through a request's writer (the trace context's `traceparent` for
/// request `id` made where it is written, never moved).
fn meta_member_to<S: Sink>(
    out: &mut JsonOut<S>,
    modern: Option<ModernMeta<'_>>,
    progress: Option<u64>,
    trace: Option<(&crate::machine::TraceContext<'_>, u64)>,
) {
    out.lit(b"\"_meta\":{");
    // The separator before the next member: none before the first.
    let mut sep: &[u8] = b"";
    if let Some(token) = progress {
        out.lit(b"\"progressToken\":");
        out.num(token);
        sep = b",";
    }
    if let Some((t, id)) = trace {
        out.lit(sep);
        // The value is hex digits and dashes: no escaping needed.
        out.lit(b"\"traceparent\":\"");
        out.lit(&t.traceparent(id));
        out.lit(b"\"");
        let state = t.state;
        if !state.is_empty() {
            out.lit(b",\"tracestate\":");
            out.str(state);
        }
        sep = b",";
    }
    if let Some((version, caps, log_level)) = modern {
        out.lit(sep);
        // A version sent is one this client speaks (`MODERN_VERSIONS`): with one, it is
        // `MODERN_VERSION`, and the edge does not compare (the host's tests write others).
        let only = !cfg!(feature = "std") && crate::wire::era::MODERN_VERSIONS.len() == 1;
        if MODERN_KEYS_PLAIN && (only || version == crate::wire::era::MODERN_VERSION) {
            // What `write_meta_keys` writes for this version, in one piece.
            out.lit(&MODERN_KEYS);
            caps.write_to(out);
        } else {
            crate::wire::era::meta_keys_to(out, version, &caps);
        }
        if let Some(level) = log_level {
            out.lit(b",\"io.modelcontextprotocol/logLevel\":\"");
            out.lit(level.as_str().as_bytes());
            out.lit(b"\"");
        }
    }
    out.lit(b"}");
}

/// One request to one server: what to send, and what reply completes it.
pub(crate) struct Trip<'x> {
    pub(crate) ep: &'x Endpoint<'x>,
    pub(crate) method: Method,
    pub(crate) snap: Option<&'x Snapshot>,
    pub(crate) last_event_id: Option<&'x str>,
    pub(crate) body: Body<'x>,
    pub(crate) expect: Expect,
    /// In the 2026-07-28 era, its version: `_meta` (with the slot's capabilities and, on a
    /// call, its log level) and the `Mcp-*` headers.
    pub(crate) modern: Option<&'static str>,
}

impl<'x> Trip<'x> {
    /// A POST of `body` in the session `snap` (none before the handshake).
    pub(crate) fn post(ep: &'x Endpoint<'x>, snap: Option<&'x Snapshot>, body: Body<'x>) -> Self {
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
        }
    }

    /// [`Trip::modern`]: in the edge's one-era build every trip is a 2026 one (the compiler
    /// sees it there, and the old era's paths fold away).
    fn era_version(&self) -> Option<&'static str> {
        if ONE_ERA_EDGE {
            Some(self.modern.unwrap_or(crate::wire::era::MODERN_VERSION))
        } else {
            self.modern
        }
    }

    /// Writes the body, with `_meta` (2026 era, the slot's trace context on a request) put
    /// into its params before their end: `…}}` becomes `…,"_meta":{…}}}`, and a message
    /// without params (`…"}`) becomes `…","params":{"_meta":{…}}}`.
    fn write_body<S: Sink>(&self, cfg: &SlotConfig<'_>, out: &mut JsonOut<S>) {
        // Every request carries the trace context, when there is one (SEP-414).
        let trace = cfg.trace_context().zip(self.body.request_id());
        let modern = self.era_version();
        let own_meta = modern.is_none() && trace.is_none();
        let end = self.body.write_open(out, own_meta);
        if own_meta {
            return out.lit(end);
        }
        // (`PARAMS_END` is the one end of two bytes.)
        out.lit(if end.len() == jsonrpc::PARAMS_END.len() {
            b","
        } else {
            b",\"params\":{"
        });
        // A call's progress token and log level ride in this one `_meta`.
        let (progress, log_level) = match self.body {
            Body::ToolsCall { progress, .. } => {
                (progress, cfg.log_observer().map(|(_, level)| level))
            }
            _ => (None, None),
        };
        meta_member_to(
            out,
            modern.map(|v| (v, cfg.declared(), log_level)),
            progress,
            trace,
        );
        out.lit(b"}}");
    }

    /// [`Failure::NotBuilt`] for a body of an era the build leaves out (an answer to a
    /// server's request without `era-2025`), whose writer is not compiled.
    fn built(&self) -> Result<(), Failure> {
        if !cfg!(feature = "era-2025") && matches!(self.body, Body::Answer(..)) {
            return Err(Failure::NotBuilt {
                capability: "era-2025",
                need: "an answer to the server's request",
            });
        }
        Ok(())
    }

    /// Writes the body alone (with `_meta` in the 2026 era) and `\n` into `out`: one line of
    /// newline-delimited JSON-RPC, for a stdio server (the encoders never write a raw newline;
    /// strings escape it). There are no headers on stdio.
    pub(crate) fn write_line<B: Buf>(
        &self,
        out: &mut B,
        cfg: &SlotConfig<'_>,
    ) -> Result<(), Failure> {
        // (Never an answer: a stdio server's requests are answered by the adapter.)
        out.clear();
        // The host writes into its buffer's type; the edge through the one writer it has
        // for requests anyway.
        #[cfg(feature = "std")]
        let mut w = JsonOut::new(&mut *out);
        #[cfg(not(feature = "std"))]
        let mut w = JsonOut::new(&mut *out as &mut dyn Sink);
        self.write_body(cfg, &mut w);
        w.lit(b"\n");
        w.done()
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))
    }

    /// The request head for a body of `content_length` bytes.
    fn head<'h>(&'h self, cfg: &'h SlotConfig<'_>, content_length: usize) -> RequestHead<'h> {
        let (method, name) = self.body.method_and_name();
        let (params, args) = match self.body {
            Body::ToolsCall { params, args, .. } => (params, args),
            _ => (&[][..], None),
        };
        let modern = self.era_version();
        let mcp = modern.map(|_| McpHeaders {
            method,
            name,
            params,
            args,
        });
        RequestHead {
            method: self.method,
            endpoint: self.ep,
            accept_json_and_sse: self.method != Method::Get,
            session_id: self.snap.filter(|_| !ONE_ERA_EDGE).and_then(|s| s.id()),
            protocol_version: modern.or_else(|| self.snap.and_then(|s| s.version_header())),
            last_event_id: self.last_event_id.filter(|_| !ONE_ERA_EDGE),
            extra_headers: cfg.headers,
            content_length: (self.method == Method::Post).then_some(content_length),
            mcp,
        }
    }

    /// Writes head and body into `out`, so the adapter sends them in one write.
    pub(crate) fn write<B: Buf>(&self, out: &mut B, cfg: &SlotConfig<'_>) -> Result<(), Failure> {
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
        self.write_counted(out, cfg)
    }

    /// [`write`](Self::write) in two passes through `dyn Sink` (one copy of every writer):
    /// the body counted, the head with its length written, then the body.
    fn write_counted(&self, mut out: &mut dyn Sink, cfg: &SlotConfig<'_>) -> Result<(), Failure> {
        self.built()?;
        let mut count = crate::buf::CountingSink::default();
        self.write_body(cfg, &mut JsonOut::new(&mut count as &mut dyn Sink));
        // (The head's writer on the edge is the body's: through `dyn Sink`.)
        write_request_head(&self.head(cfg, count.count), &mut out).map_err(Failure::Request)?;
        let mut w = JsonOut::new(out);
        self.write_body(cfg, &mut w);
        w.done()
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))
    }

    /// [`write`](Self::write) in one encoding of the body: body, then head, then rotated so
    /// the head comes first. `Err` when anything did not fit (nothing is reported: the caller
    /// writes again the two-pass way, which says what).
    #[cfg(feature = "std")]
    fn write_once(&self, out: &mut crate::buf::VecBuf, cfg: &SlotConfig<'_>) -> Result<(), ()> {
        // What is not built is said by the path below.
        self.built().map_err(drop)?;
        out.clear();
        let mut w = JsonOut::new(&mut *out);
        self.write_body(cfg, &mut w);
        w.done().map_err(drop)?;
        let body = out.len();
        write_request_head(&self.head(cfg, body), out).map_err(drop)?;
        out.bytes_mut().rotate_left(body);
        Ok(())
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;
    use crate::buf::SliceBuf;
    use crate::wire::jsonrpc::decode_message;

    /// An answer to a server's request is written in a build with the handshake era, and is
    /// `NotBuilt` in one without it (its writer is left out).
    #[test]
    fn an_answer_is_the_handshake_eras() {
        let ep = Endpoint::parse_base("http://127.0.0.1:8000/x").unwrap();
        let cfg = SlotConfig::new("kali", ep, "http://127.0.0.1:8000/x");
        let msg = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        let value = Value::parse(msg, JsonLimits::default()).unwrap();
        let Ok(Message::Request { id, method, .. }) = decode_message(value) else {
            panic!("a request")
        };
        let request = ServerRequest::new(id, &method).unwrap();
        let mut storage = [0u8; 1024];
        let mut out = SliceBuf::new(&mut storage);
        let written =
            Trip::post(&cfg.primary, None, Body::Answer(&request, b"")).write(&mut out, &cfg);
        if cfg!(feature = "era-2025") {
            written.unwrap();
            let text = core::str::from_utf8(out.bytes()).unwrap();
            assert!(
                text.ends_with(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
                "{text}"
            );
        } else {
            assert_eq!(
                written,
                Err(Failure::NotBuilt {
                    capability: "era-2025",
                    need: "an answer to the server's request",
                })
            );
        }
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
        // Someone keeps log messages from `notice` up: a 2026 call asks for them (feature
        // `observe`).
        let keep = |_: &crate::machine::LogMessage<'_>| {};
        #[cfg(feature = "observe")]
        {
            cfg.on_log = Some(crate::machine::LogObserver(&keep));
            cfg.log_level = LogLevel::Notice;
        }
        let _ = &keep;
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
                    params: b"text\0Mcp-Param-Text\0",
                    extra: b"",
                },
                Body::ToolsCall {
                    id: 8,
                    tool: "e\"cho",
                    args: None,
                    progress: None,
                    params: b"text\0Mcp-Param-Text\0",
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
            // Without the `trace` feature there is no trace context to set: the "traced"
            // rounds write what the others do.
            #[cfg(feature = "trace")]
            {
                cfg.trace = traced.then_some(trace);
            }
            let _ = (traced, &trace);
            for (with_snap, body) in bodies()
                .into_iter()
                .enumerate()
                .map(|(i, b)| (i % 2 == 0, b))
            {
                let mut trip = Trip::post(&cfg.primary, with_snap.then_some(&snap), body);
                trip.modern = modern.then_some(crate::wire::era::MODERN_VERSION);
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
            // A line for stdio: the body the HTTP request carries (after its head), and `\n`.
            let mut line = VecBuf::with_limit(4096);
            trip.write_line(&mut line, cfg).unwrap();
            let head_end = two
                .bytes()
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .unwrap();
            let mut body = two.bytes()[head_end + 4..].to_vec();
            body.push(b'\n');
            assert_eq!(line.bytes(), &body[..]);
            cases += 1;
        });
        assert_eq!(cases, 80);
    }

    #[test]
    fn a_traced_request_has_one_meta_with_its_trace_context_and_progress() {
        let mut traced = 0;
        each_trip(&mut |trip, cfg| {
            let mut body = VecBuf::with_limit(4096);
            let mut w = JsonOut::new(&mut body);
            trip.write_body(cfg, &mut w);
            w.done().unwrap();
            let text = core::str::from_utf8(body.bytes()).unwrap();
            // A request of a capability this build leaves out is not written.
            let built = match trip.body {
                Body::Initialize { .. } => cfg!(feature = "era-2025"),
                Body::Discover { .. } => cfg!(feature = "era-2026"),
                Body::Task { .. } => cfg!(feature = "tasks"),
                _ => true,
            };
            if !built {
                return;
            }
            let Some((t, id)) = cfg.trace_context().zip(trip.body.request_id()) else {
                assert!(!text.contains("traceparent"), "{text}");
                return;
            };
            // serde_json keeps the last of duplicate keys: count `_meta` in the text too.
            assert_eq!(text.matches("\"_meta\"").count(), 1, "{text}");
            let v: serde_json::Value = serde_json::from_str(text).expect(text);
            let meta = &v["params"]["_meta"];
            let parent = meta["traceparent"].as_str().unwrap();
            assert_eq!(parent.as_bytes(), &t.traceparent(id)[..]);
            assert_eq!(
                crate::machine::TraceContext::parse_traceparent(parent),
                Some(([0xab; 16], 1)),
                "{parent}"
            );
            assert_eq!(meta["tracestate"], "k=v");
            // A call's progress token moves into this one `_meta`.
            let progress = match trip.body {
                Body::ToolsCall { progress, .. } => progress,
                _ => None,
            };
            assert_eq!(meta.get("progressToken").and_then(|p| p.as_u64()), progress);
            assert_eq!(
                meta.get("io.modelcontextprotocol/protocolVersion")
                    .is_some(),
                trip.modern.is_some()
            );
            traced += 1;
        });
        // Two calls, list, ping, and initialize, discover and task where the build has
        // them; both eras; GET and POST. A build without `trace` traces none (and its
        // requests have no `traceparent`, above).
        let requests = 4
            + usize::from(cfg!(feature = "era-2025"))
            + usize::from(cfg!(feature = "era-2026"))
            + usize::from(cfg!(feature = "tasks"));
        let expected = if cfg!(feature = "trace") {
            requests * 2 * 2
        } else {
            0
        };
        assert_eq!(traced, expected);
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
    fn the_joined_modern_keys_are_the_writers_bytes() {
        const { assert!(MODERN_KEYS_PLAIN) };
        let mut joined = VecBuf::with_limit(4096);
        let mut written = VecBuf::with_limit(4096);
        for bits in 0u8..32 {
            let caps = ClientCapabilities {
                elicitation: bits & 1 != 0,
                elicitation_url: bits & 2 != 0,
                roots: bits & 4 != 0,
                sampling: bits & 8 != 0,
                tasks: bits & 16 != 0,
            };
            for version in [crate::wire::era::MODERN_VERSION, "2099-01-01"] {
                joined.clear();
                write_meta_member(&mut joined, Some((version, caps, None)), None, None).unwrap();
                written.clear();
                written.put(b"\"_meta\":{").unwrap();
                crate::wire::era::write_meta_keys(&mut written, version, &caps).unwrap();
                written.put(b"}").unwrap();
                assert_eq!(
                    core::str::from_utf8(joined.bytes()).unwrap(),
                    core::str::from_utf8(written.bytes()).unwrap()
                );
            }
        }
        assert!(!plain(b"a\"b") && !plain(b"a\\b") && !plain(b"a\nb") && plain(b"1.0.0"));
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
