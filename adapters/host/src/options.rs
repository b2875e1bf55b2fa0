//! How a context behaves: [`Options`] and its defaults (the behaviour of the TypeScript
//! harness SDK this project replaces; see `docs/design.md`).
//!
//! Apart from the context so that the slots, the routes and the stdio servers read the
//! options without importing the context that owns them.

use std::fmt;
use std::sync::Arc;

use verifi_mcp_core::machine::{Elicitation, LogLevel};
use verifi_mcp_core::wire::era::EraSetting;
use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

use crate::auth::AuthConfig;
use crate::buf::DEFAULT_REPLY_CAP;
use crate::elicit::OnElicit;
use crate::integrity::{OnToolChange, ToolsLock};
use crate::net::{DEFAULT_CONNECTION_LIMIT, RootCert};
use crate::trace::WireTrace;

/// The per-call timeout: 300 000 ms (5 minutes), the TypeScript harness SDK's.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;

/// The run log's first line when certificate checks are off.
pub const INSECURE_WARNING: &str = "WARNING: TLS certificate checks are OFF (insecure): any \
    server certificate is accepted, so anyone on the path can read and change this run's traffic";

/// How a context behaves. `Options::default()` behaves as the TypeScript harness SDK did.
///
/// The struct is `#[non_exhaustive]`, so a new option is not a breaking change: start from
/// `Options::default()` and use the setter of each field, which has the field's name.
///
/// ```
/// use verifi_mcp_host::Options;
/// let o = Options::default().timeout_ms(20_000).reply_cap(1 << 20).keep_raw(true);
/// assert_eq!((o.timeout_ms, o.reply_cap, o.keep_raw), (20_000, 1 << 20, true));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Per call: connect + handshake + reply (default [`DEFAULT_TIMEOUT_MS`]).
    pub timeout_ms: u64,
    /// Open connections per slot endpoint, in use or pooled (default 64).
    pub connection_limit: usize,
    /// The run's secrets; `None` means those of the process environment
    /// ([`env_secrets`](crate::run::env_secrets), read as bytes).
    pub secrets: Option<Vec<String>>,
    /// When `Some(max)`, progress notifications in a reply reset the call's timer, up to `max`
    /// ms in all (off by default).
    pub progress_extends_to_ms: Option<u64>,
    /// Roots to trust for `https` besides the system's and the webpki roots (`--cacert`).
    pub root_certs: Vec<RootCert>,
    /// Accept any server certificate (lab boxes with self-signed certificates). Off by
    /// default; when on, the run log says so first.
    pub insecure: bool,
    /// A proxy for every slot (`--proxy URL`; `"none"` for direct): it wins over the
    /// environment and applies to loopback targets too. A slot's manifest `proxy` wins over it.
    pub proxy: Option<String>,
    /// Read `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` when no explicit proxy is set
    /// (default true).
    pub proxy_from_env: bool,
    /// OAuth for every slot (client credentials or authorization code; see
    /// [`crate::auth`]). None: no OAuth (a static `authorization` header still works).
    pub auth: Option<AuthConfig>,
    /// Largest reply (and flattened text) a call may hold (default 16 MiB).
    pub reply_cap: usize,
    /// Largest request (head and JSON body) a call may send (default 16 MiB); a larger one is
    /// an `ok: false` local failure, sent nowhere.
    pub request_cap: usize,
    /// A reply that sends no byte for this long fails with `server stalled` (progress
    /// notifications and SSE comments count as bytes). `None` (the default): only the call's
    /// timeout applies, so a tool that sends nothing until it ends (a long scan answered in
    /// JSON) is not cut short.
    pub idle_timeout_ms: Option<u64>,
    /// Keep the redacted JSON-RPC reply in `ToolResult::raw` (default false: it doubles the
    /// memory of a big reply).
    pub keep_raw: bool,
    /// The protocol version offered in `initialize` (default `2025-11-25`, the newest of the
    /// handshake era; the TypeScript harness SDK's `2024-11-05` on request); the
    /// server's choice among the versions the core speaks is then followed.
    pub protocol_version: ProtocolVersion,
    /// Which MCP era to speak (default [`EraSetting::Auto`]: each server is probed once per
    /// run with `server/discover`; a 2026-07-28 server is spoken to without a handshake, an
    /// old-era one gets `initialize`). `Modern` never sends `initialize`, `Legacy` never
    /// probes.
    pub era: EraSetting,
    /// Declare the tasks extension in the 2026 era (default true): a server may then run a
    /// long tool as a task, which the call polls to its result (transparent to the caller).
    pub tasks: bool,
    /// How a server's request for the user's input (elicitation) is answered (default `None`:
    /// no handler, none declared; a 2026 `input_required` call then fails saying what was
    /// asked). See [`Elicitation`].
    pub elicitation: Option<Elicitation>,
    /// The harness's own answers to elicitations (default none), asked before
    /// [`Options::elicitation`]'s policy; setting one declares elicitation.
    pub on_elicit: Option<OnElicit>,
    /// Take the manifest's endpoints as exact MCP URLs, used as given, instead of base URLs
    /// with `/mcp` appended (default false, as in the TypeScript harness SDK): for servers mounted elsewhere.
    pub exact_mcp_urls: bool,
    /// An observer of every connection opened and every byte sent and received (default none),
    /// for a wire trace; it sees the bytes unredacted (see [`WireTrace`]).
    pub wire_trace: Option<WireTrace>,
    /// The harness's W3C `traceparent` (`00-<trace id>-<span id>-<flags>`; the OpenTelemetry
    /// `TRACEPARENT` of a process): every request of the run carries its trace id in
    /// `_meta.traceparent` (SEP-414), with a span id of its own. `None` (the default), or a
    /// value that is not well formed (the run log says so): one random trace per context.
    pub trace_parent: Option<String>,
    /// The W3C `tracestate` sent beside [`Options::trace_parent`] (only with it).
    pub trace_state: Option<String>,
    /// The lowest level of a server's log messages (`notifications/message`) kept in the run
    /// log (default `warning`); in the 2026 era calls ask for them at this level.
    pub server_log_level: LogLevel,
    /// Told of each server log line as it is kept (default none), e.g. to print it.
    pub on_server_log: Option<ServerLogObserver>,
    /// What a tool whose definition changed within the run does to its calls (default
    /// [`OnToolChange::Warn`]: a `mcp.tool_changed` event, the call goes on; `Refuse`: the
    /// call is `ok: false` until [`SlotHandle::accept_tool_change`](crate::SlotHandle); the
    /// first call of the run lists the tools first, to have a definition to compare with).
    pub on_tool_change: OnToolChange,
    /// Tool fingerprints pinned across runs (default none; a manifest slot's `toolsLock` file
    /// wins): each called tool is checked against it before its call is sent.
    pub tools_lock: Option<ToolsLock>,
    /// What a called tool that differs from [`Options::tools_lock`] (or is missing from it or
    /// from the server's list) does (default [`OnToolChange::Refuse`]: `ok: false` naming the
    /// tool and the fields that differ; `Warn`: a `mcp.tool_changed` event with server
    /// `lock`, the call goes on).
    pub on_lock_mismatch: OnToolChange,
}

impl Options {
    /// Sets [`Options::timeout_ms`].
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms;
        self
    }
    /// Sets [`Options::connection_limit`].
    pub fn connection_limit(mut self, limit: usize) -> Self {
        self.connection_limit = limit;
        self
    }
    /// Sets [`Options::secrets`].
    pub fn secrets(mut self, secrets: Option<Vec<String>>) -> Self {
        self.secrets = secrets;
        self
    }
    /// Sets [`Options::progress_extends_to_ms`].
    pub fn progress_extends_to_ms(mut self, max: Option<u64>) -> Self {
        self.progress_extends_to_ms = max;
        self
    }
    /// Sets [`Options::root_certs`].
    pub fn root_certs(mut self, roots: Vec<RootCert>) -> Self {
        self.root_certs = roots;
        self
    }
    /// Sets [`Options::reply_cap`].
    pub fn reply_cap(mut self, bytes: usize) -> Self {
        self.reply_cap = bytes;
        self
    }
    /// Sets [`Options::insecure`].
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }
    /// Sets [`Options::proxy`].
    pub fn proxy(mut self, proxy: Option<String>) -> Self {
        self.proxy = proxy;
        self
    }
    /// Sets [`Options::proxy_from_env`].
    pub fn proxy_from_env(mut self, from_env: bool) -> Self {
        self.proxy_from_env = from_env;
        self
    }
    /// Sets [`Options::auth`].
    pub fn auth(mut self, auth: Option<AuthConfig>) -> Self {
        self.auth = auth;
        self
    }
    /// Sets [`Options::request_cap`].
    pub fn request_cap(mut self, bytes: usize) -> Self {
        self.request_cap = bytes;
        self
    }
    /// Sets [`Options::idle_timeout_ms`] (`None`: only the call's timeout applies).
    pub fn idle_timeout_ms(mut self, ms: Option<u64>) -> Self {
        self.idle_timeout_ms = ms;
        self
    }
    /// Sets [`Options::keep_raw`].
    pub fn keep_raw(mut self, keep: bool) -> Self {
        self.keep_raw = keep;
        self
    }
    /// Sets [`Options::protocol_version`].
    pub fn protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.protocol_version = version;
        self
    }
    /// Sets [`Options::tasks`].
    pub fn tasks(mut self, on: bool) -> Self {
        self.tasks = on;
        self
    }
    /// Sets [`Options::elicitation`].
    pub fn elicitation(mut self, answer: Option<Elicitation>) -> Self {
        self.elicitation = answer;
        self
    }

    /// Sets [`Options::on_elicit`].
    pub fn on_elicit(mut self, handler: Option<OnElicit>) -> Self {
        self.on_elicit = handler;
        self
    }

    /// Sets [`Options::era`].
    pub fn era(mut self, era: EraSetting) -> Self {
        self.era = era;
        self
    }
    /// Sets [`Options::exact_mcp_urls`].
    pub fn exact_mcp_urls(mut self, exact: bool) -> Self {
        self.exact_mcp_urls = exact;
        self
    }
    /// Sets [`Options::trace_parent`].
    pub fn trace_parent(mut self, traceparent: Option<String>) -> Self {
        self.trace_parent = traceparent;
        self
    }
    /// Sets [`Options::trace_state`].
    pub fn trace_state(mut self, tracestate: Option<String>) -> Self {
        self.trace_state = tracestate;
        self
    }
    /// Sets [`Options::server_log_level`].
    pub fn server_log_level(mut self, level: LogLevel) -> Self {
        self.server_log_level = level;
        self
    }
    /// Sets [`Options::on_server_log`].
    pub fn on_server_log(mut self, observer: Option<ServerLogObserver>) -> Self {
        self.on_server_log = observer;
        self
    }
    /// Sets [`Options::on_tool_change`].
    pub fn on_tool_change(mut self, on: OnToolChange) -> Self {
        self.on_tool_change = on;
        self
    }
    /// Sets [`Options::tools_lock`].
    pub fn tools_lock(mut self, lock: Option<ToolsLock>) -> Self {
        self.tools_lock = lock;
        self
    }
    /// Sets [`Options::on_lock_mismatch`].
    pub fn on_lock_mismatch(mut self, on: OnToolChange) -> Self {
        self.on_lock_mismatch = on;
        self
    }
    /// Sets [`Options::wire_trace`].
    pub fn wire_trace(mut self, trace: Option<WireTrace>) -> Self {
        self.wire_trace = trace;
        self
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            connection_limit: DEFAULT_CONNECTION_LIMIT,
            secrets: None,
            progress_extends_to_ms: None,
            root_certs: Vec::new(),
            insecure: false,
            proxy: None,
            proxy_from_env: true,
            auth: None,
            reply_cap: DEFAULT_REPLY_CAP,
            request_cap: DEFAULT_REPLY_CAP,
            idle_timeout_ms: None,
            keep_raw: false,
            protocol_version: ProtocolVersion::DEFAULT,
            era: EraSetting::Auto,
            tasks: true,
            elicitation: None,
            on_elicit: None,
            exact_mcp_urls: false,
            wire_trace: None,
            trace_parent: None,
            trace_state: None,
            server_log_level: LogLevel::Warning,
            on_server_log: None,
            on_tool_change: OnToolChange::Warn,
            tools_lock: None,
            on_lock_mismatch: OnToolChange::Refuse,
        }
    }
}

/// Told of each server log line the run keeps (e.g. to print it as it comes).
#[derive(Clone)]
pub struct ServerLogObserver(pub(crate) Arc<dyn Fn(&str) + Send + Sync>);

impl ServerLogObserver {
    /// An observer calling `f` with each line (already redacted).
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        ServerLogObserver(Arc::new(f))
    }
}

impl fmt::Debug for ServerLogObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerLogObserver(..)")
    }
}
