//! The demo's "kali" box: a real MCP server on the official Rust SDK (`rmcp`, streamable HTTP),
//! in-process on 127.0.0.1 with its own tokio runtime, so a smol-driven harness can use it.
//!
//! Owns: the box's tools, its listener and live connections, and stopping it mid-run (the
//! primary dying). Tools:
//! - `run_command {command, timeout, workspace}`: runs an allowlisted command (see
//!   [`crate::allowlist`]) in the workspace's temp folder, killed at its timeout, answering
//!   `$ <cmd>\n(exit N)\n<output>`;
//! - `dns_posture {domain}`: a posture check from local facts only (name syntax, `/etc/hosts`,
//!   `/etc/resolv.conf`); no network at all;
//! - `nikto {target}`: a scanner that is not installed on this box, so it always reports a
//!   tool-level error (`isError: true`);
//! - `echo {text}`: returns its text (what `mcp bench` calls by default);
//! - `typed {count, ratio, loud, limit, label}`: returns its arguments as JSON (an integer, a
//!   number, a boolean, an integer or null, and a string, as its schema says);
//! - `session_info {}`: what the client said of itself (client info, protocol version): in the
//!   2026 era from the call's `_meta`, else from the last `initialize`;
//! - `headers {}`: the request's HTTP headers, one `name: value` a line (to show redaction of
//!   the client's own header values).
//!
//! Every accepted socket gets `TCP_NODELAY`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::allowlist;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tools one box serves; cloned per rmcp session.
#[derive(Clone)]
struct Box_ {
    name: Arc<str>,
    root: Arc<PathBuf>,
    calls: Arc<AtomicU64>,
    /// What the last `initialize` said: `clientInfo` and the offered `protocolVersion`.
    hello: Arc<Mutex<String>>,
}

fn schema(props: Value, required: &[&str]) -> JsonObject {
    match json!({ "type": "object", "properties": props, "required": required }) {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The tools the box lists.
fn tool_list() -> Vec<Tool> {
    vec![
        Tool::new(
            "run_command",
            "Runs an allowlisted command (no shell) in the run's workspace; answers `$ <cmd>\\n(exit N)\\n<output>`",
            schema(
                json!({
                    "command": { "type": "string" },
                    "timeout": { "type": "integer", "description": "seconds, 1..=285" },
                    "workspace": { "type": "string", "description": "the run id" }
                }),
                &["command", "workspace"],
            ),
        ),
        Tool::new(
            "dns_posture",
            "DNS posture of a domain from local facts only (name syntax, hosts file, resolvers)",
            schema(json!({ "domain": { "type": "string" } }), &["domain"]),
        ),
        Tool::new(
            "nikto",
            "Web server scanner (not installed on this box: always a tool error)",
            schema(json!({ "target": { "type": "string" } }), &["target"]),
        ),
        Tool::new(
            "echo",
            "Returns its text argument",
            schema(json!({ "text": { "type": "string" } }), &[]),
        ),
        Tool::new(
            "typed",
            "Returns its arguments as JSON",
            schema(
                json!({
                    "count": { "type": "integer" },
                    "ratio": { "type": "number" },
                    "loud": { "type": "boolean" },
                    "limit": { "type": ["integer", "null"] },
                    "label": { "type": "string" }
                }),
                &[],
            ),
        ),
        Tool::new(
            "session_info",
            "What the last initialize offered: client name, version and protocol version",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "headers",
            "The HTTP request headers this call arrived with",
            schema(json!({}), &[]),
        ),
    ]
}

fn arg<'a>(args: &'a Option<JsonObject>, name: &str) -> Option<&'a Value> {
    args.as_ref().and_then(|a| a.get(name))
}

fn text(t: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(t.into())]).into()
}

fn tool_error(t: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(t.into())]).into()
}

/// Checks a DNS name's syntax (RFC 1035 lengths, LDH labels); returns the findings.
fn name_findings(domain: &str) -> Vec<String> {
    let mut f = Vec::new();
    let d = domain.strip_suffix('.').unwrap_or(domain);
    if d.is_empty() || d.len() > 253 {
        f.push(format!("name length {} outside 1..=253", d.len()));
    }
    for label in d.split('.') {
        let ldh = label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if label.is_empty() || label.len() > 63 {
            f.push(format!("label {label:?} length outside 1..=63"));
        } else if !ldh || label.starts_with('-') || label.ends_with('-') {
            f.push(format!("label {label:?} is not letters-digits-hyphen"));
        }
        if label.to_ascii_lowercase().starts_with("xn--") {
            f.push(format!(
                "label {label:?} is punycode (check for homographs)"
            ));
        }
    }
    f
}

fn dns_posture(domain: &str) -> String {
    let mut out = vec![format!("domain: {domain}")];
    let findings = name_findings(domain);
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let pinned: Vec<&str> = hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter(|l| {
            l.split_whitespace()
                .skip(1)
                .any(|n| n.eq_ignore_ascii_case(domain))
        })
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let resolvers: Vec<&str> = resolv
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .map(str::trim)
        .collect();
    out.push(format!(
        "syntax: {}",
        if findings.is_empty() {
            "ok"
        } else {
            "problems"
        }
    ));
    out.push(format!(
        "hosts file: {}",
        if pinned.is_empty() {
            "not pinned".to_owned()
        } else {
            format!("pinned to {}", pinned.join(", "))
        }
    ));
    out.push(format!(
        "resolvers: {} ({})",
        resolvers.len(),
        if resolvers.is_empty() {
            "none configured".to_owned()
        } else {
            resolvers.join(", ")
        }
    ));
    if resolvers.len() == 1 {
        out.push("finding: a single resolver is a single point of failure".to_owned());
    }
    for f in findings {
        out.push(format!("finding: {f}"));
    }
    out.join("\n")
}

impl Box_ {
    async fn run_command(&self, args: &Option<JsonObject>) -> CallToolResponse {
        let Some(command) = arg(args, "command").and_then(Value::as_str) else {
            return tool_error("run_command: `command` (string) is required");
        };
        let workspace = arg(args, "workspace").and_then(Value::as_str).unwrap_or("");
        if let Err(e) = allowlist::check_workspace(workspace) {
            return tool_error(format!("run_command: {e}"));
        }
        let timeout_s = arg(args, "timeout")
            .and_then(Value::as_u64)
            .unwrap_or(30)
            .clamp(1, allowlist::MAX_TIMEOUT_S);
        let planned = match allowlist::plan(command) {
            Ok(p) => p,
            Err(e) => {
                let ran = allowlist::Ran {
                    exit: 126,
                    output: format!("refused: {e}"),
                };
                return text(allowlist::reply_text(command, &ran));
            }
        };
        let dir = match allowlist::workspace_dir(&self.root, workspace) {
            Ok(d) => d,
            Err(e) => return tool_error(format!("run_command: workspace folder: {e}")),
        };
        match allowlist::run(&planned, &dir, Duration::from_secs(timeout_s)).await {
            Ok(ran) => text(allowlist::reply_text(command, &ran)),
            Err(e) => {
                let ran = allowlist::Ran {
                    exit: 127,
                    output: format!("could not start {}: {e}", planned.program),
                };
                text(allowlist::reply_text(command, &ran))
            }
        }
    }
}

impl ServerHandler for Box_ {
    fn get_info(&self) -> ServerConfig {
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info =
            rmcp::model::Implementation::new(format!("demo-kali-{}", self.name), "0.1.0");
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        *lock(&self.hello) = format!(
            "client: {} {}\nprotocolVersion: {}",
            request.client_info.name, request.client_info.version, request.protocol_version
        );
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let args = &request.arguments;
        match request.name.as_ref() {
            "run_command" => Ok(self.run_command(args).await),
            "dns_posture" => match arg(args, "domain").and_then(Value::as_str) {
                Some(d) => Ok(text(dns_posture(d))),
                None => Err(ErrorData::invalid_params(
                    "dns_posture: `domain` is required",
                    None,
                )),
            },
            "nikto" => Ok(tool_error(format!(
                "nikto: scanner not installed on box {} (target {})",
                self.name,
                arg(args, "target").and_then(Value::as_str).unwrap_or("?")
            ))),
            "echo" => Ok(text(
                arg(args, "text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )),
            "typed" => Ok(text(
                Value::Object(request.arguments.clone().unwrap_or_default()).to_string(),
            )),
            // The old era's `initialize`, or in the 2026 era what this request's `_meta` says.
            "session_info" => match (context.meta.client_info(), context.meta.protocol_version()) {
                (Some(client), Some(version)) => Ok(text(format!(
                    "client: {} {}\nprotocolVersion: {}",
                    client.name, client.version, version
                ))),
                _ => Ok(text(lock(&self.hello).clone())),
            },
            "headers" => {
                let lines: Vec<String> = context
                    .extensions
                    .get::<http::request::Parts>()
                    .map(|p| {
                        p.headers
                            .iter()
                            .map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v.as_bytes())))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(text(lines.join("\n")))
            }
            other => Err(ErrorData::invalid_params(
                format!("tool not found: {other}"),
                None,
            )),
        }
    }
}

struct Running {
    runtime: tokio::runtime::Runtime,
    stop: CancellationToken,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

/// A running box. Dropping it stops it and removes its temp folder.
pub struct KaliServer {
    name: String,
    addr: SocketAddr,
    root: PathBuf,
    calls: Arc<AtomicU64>,
    running: Mutex<Option<Running>>,
}

impl std::fmt::Debug for KaliServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KaliServer")
            .field("name", &self.name)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl KaliServer {
    /// Starts a box called `name` (`primary`, `fallback`) on 127.0.0.1, a free port.
    /// `path` is where MCP is mounted (`/mcp` normally).
    pub fn start(name: &str) -> std::io::Result<KaliServer> {
        KaliServer::start_at(name, "/mcp")
    }

    /// Starts a box whose MCP endpoint is mounted at `path` (e.g. `/rpc`); other paths 404.
    pub fn start_at(name: &str, path: &str) -> std::io::Result<KaliServer> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("kali-{name}"))
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::from((
            [127, 0, 0, 1],
            0,
        ))))?;
        let addr = listener.local_addr()?;
        let root = std::env::temp_dir().join(format!(
            "verifi-kali-{}-{}-{}",
            std::process::id(),
            name,
            addr.port()
        ));
        std::fs::create_dir_all(&root)?;
        let calls = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop.child_token());
        let tools = Box_ {
            name: Arc::from(name),
            root: Arc::new(root.clone()),
            calls: calls.clone(),
            hello: Arc::default(),
        };
        let service = StreamableHttpService::new(
            move || Ok(tools.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let conns = connections.clone();
        let accept_stop = stop.clone();
        let mount: Arc<str> = Arc::from(path);
        runtime.spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = accept_stop.cancelled() => break,
                    a = listener.accept() => a,
                };
                let Ok((stream, _peer)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let svc = service.clone();
                let mount = mount.clone();
                let routed = ServiceFn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let mut svc = svc.clone();
                    let hit = req.uri().path() == &*mount;
                    async move {
                        if hit {
                            tower_service::Service::call(&mut svc, req).await
                        } else {
                            Ok(not_found())
                        }
                    }
                });
                let task = tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(routed))
                        .await;
                });
                let mut list = lock(&conns);
                list.retain(|h| !h.is_finished());
                list.push(task.abort_handle());
            }
        });
        Ok(KaliServer {
            name: name.to_owned(),
            addr,
            root,
            calls,
            running: Mutex::new(Some(Running {
                runtime,
                stop,
                connections,
            })),
        })
    }

    /// The box's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://127.0.0.1:PORT`: the manifest endpoint.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// `tools/call` requests this box has received.
    pub fn tool_calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Stops accepting and drops every live connection, as a dying primary would. Idempotent;
    /// returns once they are closed (bounded by 5 s).
    pub fn stop(&self) {
        let Some(running) = lock(&self.running).take() else {
            return;
        };
        running.stop.cancel();
        for h in lock(&running.connections).drain(..) {
            h.abort();
        }
        let _ =
            std::thread::spawn(move || running.runtime.shutdown_timeout(Duration::from_secs(5)))
                .join();
    }

    /// True once [`KaliServer::stop`] ran.
    pub fn is_stopped(&self) -> bool {
        lock(&self.running).is_none()
    }
}

impl Drop for KaliServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

fn not_found() -> http::Response<Body> {
    use http_body_util::BodyExt;
    let mut r = http::Response::new(http_body_util::Full::new(bytes::Bytes::new()).boxed());
    *r.status_mut() = http::StatusCode::NOT_FOUND;
    r
}

/// A tower service from a closure.
#[derive(Clone)]
struct ServiceFn<F>(F);

impl<F, Req, Fut, R, E> tower_service::Service<Req> for ServiceFn<F>
where
    F: FnMut(Req) -> Fut,
    Fut: std::future::Future<Output = Result<R, E>>,
{
    type Response = R;
    type Error = E;
    type Future = Fut;
    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), E>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Req) -> Fut {
        (self.0)(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_syntax_findings() {
        assert!(name_findings("example.com").is_empty());
        assert!(!name_findings("-bad-.com").is_empty());
        assert!(!name_findings("xn--80ak6aa92e.com").is_empty());
        assert!(!name_findings(&"a".repeat(64)).is_empty());
    }
}
