//! Real MCP servers for the tests: the official Rust SDK (`rmcp`) serving streamable HTTP on
//! 127.0.0.1, in-process, on its own tokio runtime (so tests driven by smol can use it).
//!
//! Owns: the test tools (`echo`, `run_command`, `fail`, `mixed`, `big`, `slow`, and `ports` with
//! an `outputSchema`), the resources and the prompt the peers share, the three reply modes, what the server saw ([`Stats`]), and the faults a test injects (stop mid-run, drop
//! every session). It does not own any client code.
//!
//! With [`ServerOptions::tasks`] the server also offers the 2026 tasks extension
//! (`io.modelcontextprotocol/tasks`, SEP-2663) through rmcp's own `TaskManager`, with two tools
//! that run as tasks: `long_scan` (status messages, cooperative cancel) and `confirm_task` (asks
//! for input mid-task with `input_required`). Off by default, so every other test sees the server
//! exactly as before.
//!
//! Every accepted socket gets `TCP_NODELAY`, unlike rmcp's examples: without it a client that
//! keeps its connection alive stalls ~40 ms per call (the server's Nagle against the client's
//! delayed ACK), which would hide our own latency.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{
    CancelTaskParams, ClientCapabilities, CreateTaskResult, GetTaskParams, GetTaskResult,
    InputRequest, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The largest reply `big` will make (protects the test machine from a typo).
pub const BIG_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The server's reply mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sessions (`mcp-session-id`), replies as SSE with rmcp's priming event.
    Stateful,
    /// No sessions, replies as SSE.
    Stateless,
    /// No sessions, replies as `application/json` (SSE only when a notification precedes the reply).
    Json,
}

impl Mode {
    /// Every mode, for tests that run against each.
    pub const ALL: [Mode; 3] = [Mode::Stateful, Mode::Stateless, Mode::Json];

    /// The name used on the command line (`stateful`, `stateless`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stateful => "stateful",
            Mode::Stateless => "stateless",
            Mode::Json => "json",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// What the server saw. Every counter only grows; read it at any time from any thread.
#[derive(Debug, Default)]
pub struct Stats {
    connections: AtomicU64,
    open_connections: AtomicU64,
    max_open_connections: AtomicU64,
    cancelled_in_session: AtomicU64,
    http_requests: AtomicU64,
    http_deletes: AtomicU64,
    initializes: AtomicU64,
    tool_calls: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    slow_interrupted: AtomicU64,
    slow_completed: AtomicU64,
    progress_sent: AtomicU64,
    cancelled: Mutex<Vec<Cancelled>>,
    client_info: Mutex<Option<ClientHello>>,
    calls_by_tool: Mutex<BTreeMap<String, u64>>,
    tasks: TaskStats,
}

/// What the task tools and the `tasks/*` methods saw (only with [`ServerOptions::tasks`]).
#[derive(Debug, Default)]
struct TaskStats {
    created: AtomicU64,
    gets: AtomicU64,
    updates: AtomicU64,
    cancels: AtomicU64,
    scans_started: AtomicU64,
    scans_finished: AtomicU64,
    scans_cancelled: AtomicU64,
    confirms_cancelled: AtomicU64,
    input_responses: Mutex<Vec<Value>>,
    cancelled_ids: Mutex<Vec<String>>,
    /// Every JSON-RPC request POSTed, in order (seen at the HTTP layer).
    requests: Mutex<Vec<SeenRequest>>,
}

/// One `notifications/cancelled` the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    /// The cancelled request id as JSON text (`7`, or `"abc"` for a string id).
    pub request_id: Option<String>,
    /// The reason the client gave.
    pub reason: Option<String>,
}

/// One JSON-RPC request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// Its `method`.
    pub method: String,
    /// Its `id` as JSON text (`7`, or `"abc"` for a string id).
    pub id: String,
    /// The `Mcp-Name` header of the HTTP request that carried it.
    pub mcp_name: Option<String>,
}

/// What the last `initialize` request said about the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    pub version: String,
    /// `protocolVersion` the client offered.
    pub protocol_version: String,
}

impl Stats {
    /// TCP connections accepted.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
    /// The most TCP connections that were open at the same time.
    pub fn max_open_connections(&self) -> u64 {
        self.max_open_connections.load(Ordering::SeqCst)
    }
    /// `notifications/cancelled` that reached the handler through a session (stateful mode;
    /// rmcp's stateless mode answers notifications with 202 and drops them).
    pub fn cancelled_in_session(&self) -> u64 {
        self.cancelled_in_session.load(Ordering::SeqCst)
    }
    /// HTTP requests received (any method).
    pub fn http_requests(&self) -> u64 {
        self.http_requests.load(Ordering::SeqCst)
    }
    /// HTTP `DELETE` requests received.
    pub fn http_deletes(&self) -> u64 {
        self.http_deletes.load(Ordering::SeqCst)
    }
    /// `initialize` requests that reached the handler.
    pub fn initializes(&self) -> u64 {
        self.initializes.load(Ordering::SeqCst)
    }
    /// `tools/call` requests that reached the handler (any tool, known or not).
    pub fn tool_calls(&self) -> u64 {
        self.tool_calls.load(Ordering::SeqCst)
    }
    /// `tools/call` requests for one tool name.
    pub fn calls_of(&self, tool: &str) -> u64 {
        lock(&self.calls_by_tool).get(tool).copied().unwrap_or(0)
    }
    /// The most tool calls that were running at the same time.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }
    /// `slow` calls that stopped before their end (cancelled or their reply stream dropped).
    pub fn slow_interrupted(&self) -> u64 {
        self.slow_interrupted.load(Ordering::SeqCst)
    }
    /// `slow` calls that ran to their end.
    pub fn slow_completed(&self) -> u64 {
        self.slow_completed.load(Ordering::SeqCst)
    }
    /// `notifications/progress` the `slow` tool sent.
    pub fn progress_sent(&self) -> u64 {
        self.progress_sent.load(Ordering::SeqCst)
    }
    /// Every `notifications/cancelled` POSTed to the server, in order (seen at the HTTP
    /// layer, so in every mode).
    pub fn cancelled(&self) -> Vec<Cancelled> {
        lock(&self.cancelled).clone()
    }
    /// The last `initialize`'s client identity.
    pub fn client_hello(&self) -> Option<ClientHello> {
        lock(&self.client_info).clone()
    }
    /// Tasks the server created (a `tools/call` answered with `resultType: "task"`).
    pub fn tasks_created(&self) -> u64 {
        self.tasks.created.load(Ordering::SeqCst)
    }
    /// `tasks/get` requests that reached the handler.
    pub fn task_gets(&self) -> u64 {
        self.tasks.gets.load(Ordering::SeqCst)
    }
    /// `tasks/update` requests that reached the handler.
    pub fn task_updates(&self) -> u64 {
        self.tasks.updates.load(Ordering::SeqCst)
    }
    /// `tasks/cancel` requests that reached the handler.
    pub fn task_cancels(&self) -> u64 {
        self.tasks.cancels.load(Ordering::SeqCst)
    }
    /// The task ids named by `tasks/cancel`, in order.
    pub fn cancelled_task_ids(&self) -> Vec<String> {
        lock(&self.tasks.cancelled_ids).clone()
    }
    /// `long_scan` runs that started (as a task or inline).
    pub fn scans_started(&self) -> u64 {
        self.tasks.scans_started.load(Ordering::SeqCst)
    }
    /// `long_scan` runs that reached their end.
    pub fn scans_finished(&self) -> u64 {
        self.tasks.scans_finished.load(Ordering::SeqCst)
    }
    /// `long_scan` tasks that stopped on a `tasks/cancel`.
    pub fn scans_cancelled(&self) -> u64 {
        self.tasks.scans_cancelled.load(Ordering::SeqCst)
    }
    /// `confirm_task` tasks whose question was ended by a `tasks/cancel` instead of an answer.
    pub fn confirms_cancelled(&self) -> u64 {
        self.tasks.confirms_cancelled.load(Ordering::SeqCst)
    }
    /// Every answer `confirm_task` got through `tasks/update`, in order.
    pub fn input_responses(&self) -> Vec<Value> {
        lock(&self.tasks.input_responses).clone()
    }
    /// Every JSON-RPC request POSTed to the server, in order (seen at the HTTP layer, so in
    /// every mode; notifications have no id and are left out). Kept only by a server with
    /// [`ServerOptions::tasks`], and only the first [`REQUESTS_KEPT`].
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.tasks.requests).clone()
    }
    /// Waits (polling, bounded by `within`) until `pred` holds; returns whether it did.
    pub fn wait_until(&self, within: Duration, pred: impl Fn(&Stats) -> bool) -> bool {
        let end = Instant::now() + within;
        loop {
            if pred(self) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Largest request body the server reads (as rmcp's own default order of magnitude).
const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;

/// Counts a connection as open until dropped.
struct OpenConnection<'a>(&'a Stats);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Records a `notifications/cancelled` body (single message or in a batch).
fn note_cancellation(stats: &Stats, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let messages = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    for m in messages {
        if m.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let params = m.get("params");
            lock(&stats.cancelled).push(Cancelled {
                request_id: params
                    .and_then(|p| p.get("requestId"))
                    .map(Value::to_string),
                reason: params
                    .and_then(|p| p.get("reason"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
    }
}

/// The most entries each of the task lists of [`Stats`] keeps ([`Stats::requests`],
/// [`Stats::cancelled_task_ids`], [`Stats::input_responses`]): the first ones.
pub const REQUESTS_KEPT: usize = 4096;

/// Records the method, id and `Mcp-Name` of each request in a body (single message or a batch),
/// up to [`REQUESTS_KEPT`]. Only a server with [`ServerOptions::tasks`] records them.
fn note_requests(stats: &Stats, mcp_name: Option<&str>, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let messages = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    for m in messages {
        if let (Some(method), Some(id)) = (m.get("method").and_then(Value::as_str), m.get("id")) {
            push_capped(
                &stats.tasks.requests,
                SeenRequest {
                    method: method.to_owned(),
                    id: id.to_string(),
                    mcp_name: mcp_name.map(str::to_owned),
                },
            );
        }
    }
}

/// Appends `v` unless `list` already holds [`REQUESTS_KEPT`] entries.
fn push_capped<T>(list: &Mutex<Vec<T>>, v: T) {
    let mut list = lock(list);
    if list.len() < REQUESTS_KEPT {
        list.push(v);
    }
}

/// Counts a tool call as running until dropped.
struct InFlight<'a>(&'a Stats);

impl<'a> InFlight<'a> {
    fn enter(stats: &'a Stats) -> Self {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Marks a `slow` call interrupted unless it reached its end.
struct SlowGuard<'a> {
    stats: &'a Stats,
    done: bool,
}

impl Drop for SlowGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            self.stats.slow_completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.stats.slow_interrupted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The tool server: one instance per rmcp service, all sharing one [`Stats`].
#[derive(Clone)]
struct Tools {
    stats: Arc<Stats>,
    /// The tasks extension's store, shared by every instance (rmcp makes one per session, or one
    /// per request without sessions); `None`: the extension is not offered.
    tasks: Option<TaskManager>,
}

fn schema(props: Value) -> JsonObject {
    match json!({ "type": "object", "properties": props }) {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

fn tool_list(tasks: bool) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "echo",
            "Returns its text argument",
            schema(json!({ "text": { "type": "string" } })),
        ),
        Tool::new(
            "run_command",
            "Formats a command result as a Kali box would, without running anything",
            schema(json!({
                "command": { "type": "string" },
                "timeout": { "type": "integer" },
                "workspace": { "type": "string" }
            })),
        ),
        Tool::new(
            "fail",
            "Always reports a tool-level error",
            schema(json!({})),
        ),
        Tool::new(
            "mixed",
            "A text block and an image block",
            schema(json!({})),
        ),
        Tool::new(
            "big",
            "One text block of N bytes",
            schema(json!({ "bytes": { "type": "integer" } })),
        ),
        Tool::new(
            "slow",
            "Sleeps ms in steps, sending progress when asked",
            schema(json!({ "ms": { "type": "integer" }, "steps": { "type": "integer" } })),
        ),
        ports_tool(),
    ];
    if tasks {
        tools.extend(task_tools());
    }
    tools
}

/// The tools that run as tasks (offered only with [`ServerOptions::tasks`]).
fn task_tools() -> [Tool; 2] {
    [
        Tool::new(
            "long_scan",
            "Scans a target for some seconds as a task, with a status message per step; \
             stops on tasks/cancel. Without the tasks extension it runs inline. `fail`: \
             \"tool\" ends with isError, \"task\" fails the task; `ttl_ms`: the task's TTL \
             (rmcp fails a task that outlives it, then forgets it one TTL later)",
            schema(json!({
                "target": { "type": "string" },
                "seconds": { "type": "number" },
                "fail": { "type": "string", "enum": ["tool", "task"] },
                "ttl_ms": { "type": "integer" }
            })),
        ),
        Tool::new(
            "confirm_task",
            "As a task, asks the client for a port and a yes/no (with defaults) through \
             input_required, then answers with what it got. Needs the tasks extension",
            schema(json!({ "target": { "type": "string" } })),
        ),
    ]
}

/// `long_scan`'s poll interval and step: short, so a test is quick, and a few polls long.
const TASK_POLL_MS: u64 = 100;
const SCAN_STEP: Duration = Duration::from_millis(200);

/// What `confirm_task` asks: an elicitation whose every field has a default.
pub fn confirm_task_question(target: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "message": format!("Scan {target}? Which port?"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "port": { "type": "integer", "default": 443 },
                    "confirm": { "type": "boolean", "default": true }
                },
                "required": ["port", "confirm"]
            }
        }
    })
}

/// The text `confirm_task` answers for the client's `tasks/update` answer `got`.
pub fn confirm_task_text(target: &str, got: &Value) -> String {
    format!("confirm_task {target} got {got}")
}

/// The text `long_scan` answers when it ran to its end.
pub fn long_scan_text(target: &str, seconds: f64) -> String {
    format!("long_scan {target}: done in {seconds}s")
}

/// The status message `long_scan` reports at `step` of `steps`.
pub fn long_scan_status(target: &str, step: u64, steps: u64) -> String {
    format!("scanning {target}: step {step} of {steps}")
}

/// `ports`: structured output with a declared `outputSchema` (the same on every peer).
fn ports_tool() -> Tool {
    let mut tool = Tool::new(
        "ports",
        "Open ports, as structured output",
        schema(json!({})),
    );
    if let Value::Object(m) = ports_output_schema() {
        tool.output_schema = Some(Arc::new(m));
    }
    tool
}

/// The `outputSchema` of `ports`.
pub fn ports_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "open": { "type": "array", "items": { "type": "integer" } } },
        "required": ["open"]
    })
}

// ---- resources and prompts (the same on the TypeScript and Python peers) ----
//
// resources/list: `test://notes/readme` (text) and `test://notes/blob` (base64 `AAEC`); rmcp
// pages them, one per page (cursor `page-2`). resources/templates/list: `test://echo/{text}`,
// whose read answers `echo: <text>`. prompts/list: `review` (argument `topic`, required),
// whose messages are one user text `Review the <topic> findings.`

/// The text of `test://notes/readme`.
pub const README_TEXT: &str = "hello from the readme";

fn resource_page(cursor: Option<&str>) -> Result<ListResourcesResult, ErrorData> {
    let page = match cursor {
        None => json!({
            "resources": [{ "uri": "test://notes/readme", "name": "readme",
                            "mimeType": "text/plain", "description": "A short text note" }],
            "nextCursor": "page-2"
        }),
        Some("page-2") => json!({
            "resources": [{ "uri": "test://notes/blob", "name": "blob",
                            "mimeType": "application/octet-stream" }]
        }),
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!("unknown cursor: {other}"),
                None,
            ));
        }
    };
    serde_json::from_value(page).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn read_test_resource(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = if uri == "test://notes/readme" {
        json!({ "uri": uri, "mimeType": "text/plain", "text": README_TEXT })
    } else if uri == "test://notes/blob" {
        json!({ "uri": uri, "mimeType": "application/octet-stream", "blob": "AAEC" })
    } else if let Some(text) = uri.strip_prefix("test://echo/") {
        json!({ "uri": uri, "mimeType": "text/plain", "text": format!("echo: {text}") })
    } else {
        return Err(ErrorData::resource_not_found(
            format!("resource not found: {uri}"),
            None,
        ));
    };
    serde_json::from_value(json!({ "contents": [contents] }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// Serves the tools over stdio (rmcp's stdio transport: newline-delimited JSON-RPC on this
/// process's stdin and stdout) until stdin ends: `verifi-test-server --stdio`.
pub fn serve_stdio() -> io::Result<()> {
    use rmcp::ServiceExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let tools = Tools {
            stats: Arc::new(Stats::default()),
            tasks: None,
        };
        let running = tools
            .serve(rmcp::transport::io::stdio())
            .await
            .map_err(io::Error::other)?;
        running.waiting().await.map_err(io::Error::other)?;
        Ok(())
    })
}

/// The exit code `run_command` reports: the number after the last `exit ` in the command,
/// else 0.
pub fn scripted_exit_code(command: &str) -> i64 {
    command
        .rmatch_indices("exit ")
        .find_map(|(i, _)| {
            let rest = &command[i + 5..];
            let end = rest
                .char_indices()
                .find(|&(j, c)| !(c.is_ascii_digit() || (j == 0 && c == '-')))
                .map_or(rest.len(), |(j, _)| j);
            rest[..end].parse::<i64>().ok()
        })
        .unwrap_or(0)
}

/// The exact text `run_command` answers (so tests can compare whole strings).
pub fn run_command_text(command: &str, timeout: &Value, workspace: &str) -> String {
    format!(
        "$ {command}\n(exit {})\nworkspace={workspace} timeout={timeout}\nran: {command}",
        scripted_exit_code(command)
    )
}

fn arg<'a>(args: &'a Option<JsonObject>, name: &str) -> Option<&'a Value> {
    args.as_ref().and_then(|a| a.get(name))
}

fn text_result(text: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl Tools {
    async fn slow(
        &self,
        args: &Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ms = arg(args, "ms")
            .and_then(Value::as_u64)
            .unwrap_or(1000)
            .min(600_000);
        let steps = arg(args, "steps")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .clamp(1, 10_000);
        let token = context.meta.get_progress_token();
        let mut guard = SlowGuard {
            stats: &self.stats,
            done: false,
        };
        let per_step = Duration::from_millis(ms / steps);
        for step in 1..=steps {
            tokio::select! {
                _ = tokio::time::sleep(per_step) => {}
                _ = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("slow: cancelled", None));
                }
            }
            if let Some(token) = &token {
                let p = ProgressNotificationParam::new(token.clone(), step as f64)
                    .with_total(steps as f64);
                if context.peer.notify_progress(p).await.is_ok() {
                    self.stats.progress_sent.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        guard.done = true;
        drop(guard);
        Ok(text_result(format!("slept {ms} ms in {steps} steps")))
    }

    /// `long_scan` and `confirm_task`: a task through rmcp's `TaskManager` when the request
    /// declared the extension; otherwise `long_scan` runs inline and `confirm_task` is refused
    /// with rmcp's own `-32021` (it cannot ask anything without a task).
    async fn task_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(manager) = &self.tasks else {
            return Err(ErrorData::invalid_params(
                format!("tool not found: {}", request.name),
                None,
            ));
        };
        let args = &request.arguments;
        let target = arg(args, "target")
            .and_then(Value::as_str)
            .unwrap_or("localhost")
            .to_owned();
        let declared = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let stats = self.stats.clone();
        if request.name == "long_scan" {
            let seconds = arg(args, "seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 600.0);
            let fail = arg(args, "fail").and_then(Value::as_str).map(str::to_owned);
            let ttl_ms = arg(args, "ttl_ms").and_then(Value::as_u64);
            if !declared {
                return match long_scan(&stats, None, &target, seconds, fail.as_deref()).await {
                    Ok(r) => Ok(r.into()),
                    Err(TaskExit::Error(e)) => Err(e),
                    Err(TaskExit::Cancelled) => {
                        Err(ErrorData::internal_error("long_scan: cancelled", None))
                    }
                };
            }
            let mut options = TaskOptions::new()
                .with_poll_interval_ms(TASK_POLL_MS)
                .with_status_message(format!("starting a scan of {target}"));
            if let Some(ttl_ms) = ttl_ms {
                options = options.with_ttl_ms(ttl_ms);
            }
            let task = manager.spawn(options, move |ctx| {
                Box::pin(async move {
                    long_scan(&stats, Some(&ctx), &target, seconds, fail.as_deref()).await
                })
            });
            self.stats.tasks.created.fetch_add(1, Ordering::SeqCst);
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        if !declared {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let question: InputRequest = from_json(confirm_task_question(&target))?;
        let options = TaskOptions::new().with_poll_interval_ms(TASK_POLL_MS);
        let task = manager.spawn(options, move |ctx| {
            Box::pin(async move {
                match ctx.request_input("confirm", question).await {
                    Ok(got) => {
                        push_capped(&stats.tasks.input_responses, got.clone());
                        Ok(CallToolResult::success(vec![ContentBlock::text(
                            confirm_task_text(&target, &got),
                        )]))
                    }
                    Err(exit) => {
                        if matches!(exit, TaskExit::Cancelled) {
                            stats
                                .tasks
                                .confirms_cancelled
                                .fetch_add(1, Ordering::SeqCst);
                        }
                        Err(exit)
                    }
                }
            })
        });
        self.stats.tasks.created.fetch_add(1, Ordering::SeqCst);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
}

/// `long_scan`'s work: one step per [`SCAN_STEP`], each told as the task's status message;
/// a `tasks/cancel` stops it between steps. `ctx` is `None` when it runs inline.
async fn long_scan(
    stats: &Stats,
    ctx: Option<&TaskContext>,
    target: &str,
    seconds: f64,
    fail: Option<&str>,
) -> Result<CallToolResult, TaskExit> {
    stats.tasks.scans_started.fetch_add(1, Ordering::SeqCst);
    let total = Duration::from_secs_f64(seconds);
    let steps = (total.as_millis() / SCAN_STEP.as_millis()).max(1) as u64;
    let per_step = total / steps as u32;
    for step in 1..=steps {
        if let Some(ctx) = ctx {
            ctx.set_status_message(long_scan_status(target, step, steps));
            tokio::select! {
                _ = tokio::time::sleep(per_step) => {}
                _ = ctx.cancelled() => {
                    stats.tasks.scans_cancelled.fetch_add(1, Ordering::SeqCst);
                    return Err(TaskExit::Cancelled);
                }
            }
        } else {
            tokio::time::sleep(per_step).await;
        }
    }
    stats.tasks.scans_finished.fetch_add(1, Ordering::SeqCst);
    match fail {
        Some("tool") => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "long_scan {target}: host down"
        ))])),
        Some("task") => Err(TaskExit::Error(ErrorData::internal_error(
            format!("long_scan {target}: scanner crashed"),
            None,
        ))),
        _ => Ok(CallToolResult::success(vec![ContentBlock::text(
            long_scan_text(target, seconds),
        )])),
    }
}

impl Tools {
    /// The task store, or rmcp's own "method not found" for `M` when tasks are not offered
    /// (rmcp answers that before the handler is asked; this keeps the handler honest too).
    fn task_manager<M: rmcp::model::ConstString + Default>(
        &self,
    ) -> Result<&TaskManager, ErrorData> {
        self.tasks
            .as_ref()
            .ok_or_else(ErrorData::method_not_found::<M>)
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts();
        let capabilities = if self.tasks.is_some() {
            builder.enable_tasks().build()
        } else {
            builder.build()
        };
        let mut info = InitializeResult::new(capabilities);
        info.server_info = rmcp::model::Implementation::new("verifi-test-server", "0.1.0");
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.stats.initializes.fetch_add(1, Ordering::SeqCst);
        *lock(&self.stats.client_info) = Some(ClientHello {
            name: request.client_info.name.clone(),
            version: request.client_info.version.clone(),
            protocol_version: request.protocol_version.to_string(),
        });
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tool_list(
            self.tasks.is_some(),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.stats.tool_calls.fetch_add(1, Ordering::SeqCst);
        *lock(&self.stats.calls_by_tool)
            .entry(request.name.to_string())
            .or_default() += 1;
        let _running = InFlight::enter(&self.stats);
        let args = &request.arguments;
        match request.name.as_ref() {
            "echo" => Ok(text_result(
                arg(args, "text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            )),
            "run_command" => {
                let command = arg(args, "command")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let workspace = arg(args, "workspace")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let timeout = arg(args, "timeout").cloned().unwrap_or(Value::Null);
                Ok(text_result(run_command_text(command, &timeout, workspace)))
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "fail: this tool always fails",
            )])
            .into()),
            "mixed" => Ok(CallToolResult::success(vec![
                ContentBlock::text("mixed: text part"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ])
            .into()),
            "big" => {
                let n = arg(args, "bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
                Ok(text_result("x".repeat(n.min(BIG_MAX_BYTES))))
            }
            "slow" => self.slow(args, &context).await,
            "ports" => Ok(CallToolResult::structured(json!({ "open": [22, 80] })).into()),
            "long_scan" | "confirm_task" if self.tasks.is_some() => {
                self.task_tool(&request, &context).await
            }
            other => Err(ErrorData::invalid_params(
                format!("tool not found: {other}"),
                None,
            )),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resource_page(request.as_ref().and_then(|r| r.cursor.as_deref()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(json!({ "resourceTemplates": [{
            "uriTemplate": "test://echo/{text}", "name": "echo", "mimeType": "text/plain",
            "description": "Echoes the text of its URI"
        }] }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        read_test_resource(&request.uri).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        from_json(json!({ "prompts": [{
            "name": "review", "description": "Review a topic",
            "arguments": [{ "name": "topic", "description": "What to review", "required": true }]
        }] }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "review" {
            return Err(ErrorData::invalid_params(
                format!("prompt not found: {}", request.name),
                None,
            ));
        }
        let topic = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("topic"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("missing argument: topic", None))?;
        let result: GetPromptResult = from_json(json!({
            "description": "Review a topic",
            "messages": [{ "role": "user",
                           "content": { "type": "text", "text": format!("Review the {topic} findings.") } }]
        }))?;
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let manager = self.task_manager::<rmcp::model::GetTaskMethod>()?;
        self.stats.tasks.gets.fetch_add(1, Ordering::SeqCst);
        Ok(GetTaskResult::new(manager.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let manager = self.task_manager::<rmcp::model::UpdateTaskMethod>()?;
        self.stats.tasks.updates.fetch_add(1, Ordering::SeqCst);
        manager.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let manager = self.task_manager::<rmcp::model::CancelTaskMethod>()?;
        self.stats.tasks.cancels.fetch_add(1, Ordering::SeqCst);
        push_capped(&self.stats.tasks.cancelled_ids, request.task_id.clone());
        manager.cancel_task(&request.task_id)
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let _ = notification;
        self.stats
            .cancelled_in_session
            .fetch_add(1, Ordering::SeqCst);
    }
}

/// How to start a [`TestServer`].
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The reply mode.
    pub mode: Mode,
    /// Where to listen; port 0 picks a free one.
    pub bind: SocketAddr,
    /// Set `TCP_NODELAY` on accepted sockets (default true; false reproduces rmcp's examples).
    pub nodelay: bool,
    /// Offer the 2026 tasks extension and the tools that run as tasks (`long_scan`,
    /// `confirm_task`); default false, which leaves the server as every other test knows it.
    pub tasks: bool,
}

impl ServerOptions {
    /// `mode` on 127.0.0.1, a free port, with `TCP_NODELAY`.
    pub fn new(mode: Mode) -> Self {
        ServerOptions {
            mode,
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodelay: true,
            tasks: false,
        }
    }

    /// The same, offering the tasks extension (see [`ServerOptions::tasks`]).
    pub fn with_tasks(mut self) -> Self {
        self.tasks = true;
        self
    }
}

struct Running {
    runtime: tokio::runtime::Runtime,
    stop: CancellationToken,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

/// A running rmcp server. Dropping it stops it.
pub struct TestServer {
    mode: Mode,
    addr: SocketAddr,
    stats: Arc<Stats>,
    sessions: Arc<LocalSessionManager>,
    handle: tokio::runtime::Handle,
    running: Mutex<Option<Running>>,
}

impl TestServer {
    /// Starts `mode` on 127.0.0.1 with a free port and `TCP_NODELAY`.
    pub fn start(mode: Mode) -> io::Result<TestServer> {
        TestServer::start_with(ServerOptions::new(mode))
    }

    /// Starts a server as `opts` says.
    pub fn start_with(opts: ServerOptions) -> io::Result<TestServer> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rmcp-test-server")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(opts.bind))?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let sessions = Arc::new(LocalSessionManager::default());
        let stop = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(None)
            .with_legacy_session_mode(opts.mode == Mode::Stateful)
            .with_json_response(opts.mode == Mode::Json)
            .with_cancellation_token(stop.child_token());
        let factory_stats = stats.clone();
        let task_store = opts.tasks.then(TaskManager::new);
        let service = StreamableHttpService::new(
            move || {
                Ok(Tools {
                    stats: factory_stats.clone(),
                    tasks: task_store.clone(),
                })
            },
            sessions.clone(),
            config,
        );
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let conns = connections.clone();
        let accept_stop = stop.clone();
        let accept_stats = stats.clone();
        let nodelay = opts.nodelay;
        let record_requests = opts.tasks;
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
                if nodelay {
                    let _ = stream.set_nodelay(true);
                }
                accept_stats.connections.fetch_add(1, Ordering::SeqCst);
                let svc = service.clone();
                let req_stats = accept_stats.clone();
                let counted =
                    tower_service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let stats = req_stats.clone();
                        let mut svc = svc.clone();
                        async move {
                            stats.http_requests.fetch_add(1, Ordering::SeqCst);
                            if req.method() == hyper::Method::DELETE {
                                stats.http_deletes.fetch_add(1, Ordering::SeqCst);
                            }
                            let (parts, body) = req.into_parts();
                            let bytes = match Limited::new(body, MAX_REQUEST_BODY).collect().await {
                                Ok(c) => c.to_bytes(),
                                Err(_) => Bytes::new(),
                            };
                            note_cancellation(&stats, &bytes);
                            let mcp_name =
                                parts.headers.get("mcp-name").and_then(|v| v.to_str().ok());
                            if record_requests {
                                note_requests(&stats, mcp_name, &bytes);
                            }
                            let req = hyper::Request::from_parts(parts, Full::new(bytes));
                            tower_service::Service::call(&mut svc, req).await
                        }
                    });
                let open_stats = accept_stats.clone();
                let task = tokio::spawn(async move {
                    let now = open_stats.open_connections.fetch_add(1, Ordering::SeqCst) + 1;
                    open_stats
                        .max_open_connections
                        .fetch_max(now, Ordering::SeqCst);
                    let _open = OpenConnection(&open_stats);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(counted))
                        .await;
                });
                let mut list = lock(&conns);
                list.retain(|h| !h.is_finished());
                list.push(task.abort_handle());
            }
        });
        Ok(TestServer {
            mode: opts.mode,
            addr,
            stats,
            sessions,
            handle: runtime.handle().clone(),
            running: Mutex::new(Some(Running {
                runtime,
                stop,
                connections,
            })),
        })
    }

    /// The reply mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://127.0.0.1:PORT`: the manifest endpoint (MCP is at `/mcp` below it).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// `http://127.0.0.1:PORT/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base_url())
    }
    /// What the server saw.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Live sessions (stateful mode; always 0 otherwise).
    pub fn session_count(&self) -> usize {
        let sessions = self.sessions.clone();
        self.on_runtime(async move { sessions.sessions.read().await.len() })
            .unwrap_or(0)
    }

    /// Ends every server-side session, as a restarted server would have lost them: the next
    /// request with an old `mcp-session-id` gets 404. Returns how many were dropped.
    /// (rmcp's `LocalSessionManager` exposes its session map; each is closed through
    /// `SessionManager::close_session`.)
    pub fn drop_sessions(&self) -> usize {
        let sessions = self.sessions.clone();
        self.on_runtime(async move {
            let ids: Vec<_> = sessions.sessions.read().await.keys().cloned().collect();
            for id in &ids {
                let _ = sessions.close_session(id).await;
            }
            ids.len()
        })
        .unwrap_or(0)
    }

    /// Stops accepting AND drops every live connection (a primary dying mid-run). Idempotent;
    /// returns once the listener and the connections are closed (bounded by 5 s).
    pub fn stop(&self) {
        let Some(running) = lock(&self.running).take() else {
            return;
        };
        running.stop.cancel();
        for h in lock(&running.connections).drain(..) {
            h.abort();
        }
        // Shut the runtime down from a plain thread: that is allowed from any context and
        // drops every task (listener, connections, sessions) before it returns.
        let _ = std::thread::spawn(move || {
            running.runtime.shutdown_timeout(Duration::from_secs(5));
        })
        .join();
    }

    /// Drops every live connection (a reset, as a NAT or a proxy that forgets a quiet
    /// connection would) while the server, its sessions and its tasks keep running. Returns how
    /// many connections were dropped.
    pub fn drop_connections(&self) -> usize {
        let running = lock(&self.running);
        let Some(running) = running.as_ref() else {
            return 0;
        };
        let mut list = lock(&running.connections);
        let live = list.iter().filter(|h| !h.is_finished()).count();
        for h in list.drain(..) {
            h.abort();
        }
        live
    }

    /// True once [`TestServer::stop`] ran.
    pub fn is_stopped(&self) -> bool {
        lock(&self.running).is_none()
    }

    fn on_runtime<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        if self.is_stopped() {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tower service from a closure (what `tower::service_fn` does, without the dependency).
fn tower_service_fn<F>(f: F) -> ServiceFn<F> {
    ServiceFn(f)
}

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
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// One request on `c`; returns (status, head, body) of a content-length or chunked reply
    /// (chunked bodies are returned raw; the tests only look at status and headers there).
    fn post(c: &mut TcpStream, session: Option<&str>, body: &str) -> (u16, String) {
        let sid = session
            .map(|s| format!("mcp-session-id: {s}\r\n"))
            .unwrap_or_default();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\n{sid}content-length: {}\r\n\r\n{body}",
            body.len()
        );
        c.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Read until the head is in and the body looks finished (content-length or last chunk).
        loop {
            let n = c.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "server closed early: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(i) = text.find("\r\n\r\n") {
                let head = &text[..i];
                let rest = &text[i + 4..];
                let lower = head.to_ascii_lowercase();
                let done = if let Some(l) = lower.split("content-length: ").nth(1) {
                    let len: usize = l.lines().next().unwrap().trim().parse().unwrap();
                    rest.len() >= len
                } else {
                    rest.ends_with("0\r\n\r\n")
                };
                if done {
                    let status = head[9..12].parse().unwrap();
                    return (status, head.to_owned());
                }
            }
        }
    }

    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    #[test]
    fn dropped_sessions_answer_404_and_stop_closes_live_connections() {
        let server = TestServer::start(Mode::Stateful).unwrap();
        let mut c = TcpStream::connect(server.addr()).unwrap();
        let (status, head) = post(&mut c, None, INIT);
        assert_eq!(status, 200);
        let sid = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .expect("stateful initialize carries a session id")
            .trim()
            .to_owned();
        assert_eq!(server.session_count(), 1);
        assert_eq!(server.stats().initializes(), 1);
        assert_eq!(server.stats().client_hello().unwrap().name, "t");
        assert_eq!(post(&mut c, Some(&sid), LIST).0, 200);
        assert_eq!(server.drop_sessions(), 1);
        assert_eq!(server.session_count(), 0);
        assert_eq!(post(&mut c, Some(&sid), LIST).0, 404);
        assert_eq!(server.stats().connections(), 1, "one kept-alive connection");

        server.stop();
        let mut buf = [0u8; 16];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = c.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "a live connection is closed by stop()");
        assert!(TcpStream::connect_timeout(&server.addr(), Duration::from_secs(2)).is_err());
    }

    #[test]
    fn stateless_and_json_modes_answer_without_sessions() {
        for mode in [Mode::Stateless, Mode::Json] {
            let server = TestServer::start(mode).unwrap();
            let mut c = TcpStream::connect(server.addr()).unwrap();
            let (status, head) = post(&mut c, None, INIT);
            assert_eq!(status, 200);
            assert!(
                !head.to_ascii_lowercase().contains("mcp-session-id"),
                "{mode:?}"
            );
            let json = head
                .to_ascii_lowercase()
                .contains("content-type: application/json");
            assert_eq!(json, mode == Mode::Json, "{mode:?}: {head}");
            assert_eq!(post(&mut c, None, LIST).0, 200);
        }
    }

    #[test]
    fn exit_code_follows_the_command() {
        assert_eq!(scripted_exit_code("nmap -sV x"), 0);
        assert_eq!(scripted_exit_code("false; exit 3"), 3);
        assert_eq!(scripted_exit_code("exit -2"), -2);
        assert_eq!(scripted_exit_code("exit 1; exit 7"), 7);
    }
}
