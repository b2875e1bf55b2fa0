//! `SlotHandle`: one slot of a run (primary, optional fallback), cheap to clone, `Send + Sync`,
//! usable from many tasks at once; and `SlotSpec`, what the manifest says about a slot.
//!
//! Owns: the slot's shared state and the per-call buffers. The calls themselves are the core
//! driver's.

use std::fmt;
use std::sync::{Arc, Mutex};

use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::slots::Manifest;
use verifi_mcp_core::wire::json::JsonStr;

use crate::buf::VecBuf;
use crate::elicit::OnElicit;

use serde::Serialize;
use verifi_mcp_core::drive::{
    self, CallBuffers, InFlight, ProgressObserver, ProgressUpdate, SlotConfig, SlotState,
};
use verifi_mcp_core::harness::events::{Timeline, TimelineEvent};
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::harness::meter::{Ledger, LedgerRecord};
use verifi_mcp_core::machine::{LogMessage, LogObserver};
use verifi_mcp_core::wire::endpoint::{Endpoint, EndpointShape};
use verifi_mcp_core::wire::json::{JsonLimits, Value};

use crate::net::{Route, RoutedNet};
use crate::protocol::{
    GetPromptResult, ListCollector, OutputSchema, Prompt, ProtocolError, ReadResourceResult,
    Resource, ResourceTemplate, typed,
};
use crate::result::{ListToolsError, ToolResult};
use crate::run::{Records, SlotNotFilledError, TimelineEntry, lock, redact_string};
use crate::run_state::Run;
use crate::shared::HostShared;
use std::collections::HashMap;
use verifi_mcp_core::harness::result::Kind;
use verifi_mcp_core::wire::jsonrpc::{ListMethod, Request};

/// What the manifest says about one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSpec {
    /// The slot's name.
    pub slot: String,
    /// The primary endpoint (base URL; MCP is at `/mcp` below it).
    pub primary: String,
    /// The fallback endpoint, if any.
    pub fallback: Option<String>,
    /// Static headers sent on every request (e.g. `authorization`).
    pub headers: Vec<(String, String)>,
    /// The slot's own `proxy` (a URL, or `"none"` for direct), winning over the context's.
    pub proxy: Option<String>,
    /// The slot's own `ca`: a PEM file path, or PEM text, trusted besides the context's roots.
    pub ca: Option<String>,
    /// The slot's own OAuth settings (`auth` in the manifest), winning over the context's.
    pub auth: Option<crate::route::SlotAuth>,
    /// The primary is a local process spoken to over stdio (then `primary` is its label,
    /// `stdio:<command line>`).
    pub primary_command: Option<crate::stdio::StdioSpec>,
    /// The fallback is a local process (then `fallback` is its label).
    pub fallback_command: Option<crate::stdio::StdioSpec>,
    /// The slot's own `toolsLock`: a lock file's path (see [`crate::integrity::ToolsLock`]),
    /// winning over [`Options::tools_lock`](crate::Options).
    pub tools_lock: Option<String>,
}

/// A manifest `command` object as an owned spec.
fn stdio_spec(c: &verifi_mcp_core::harness::slots::StdioCommand<'_>) -> crate::stdio::StdioSpec {
    crate::stdio::StdioSpec {
        argv: c.argv().map(|a| owned(&a)).collect(),
        env: c.env.iter().map(|(k, v)| (owned(&k), owned(&v))).collect(),
        cwd: c.cwd.as_ref().map(owned),
    }
}

fn owned(j: &JsonStr<'_>) -> String {
    let mut b = VecBuf::with_limit(usize::MAX);
    // An unbounded VecBuf never overflows.
    let _ = j.unescape_into(&mut b);
    String::from_utf8_lossy(b.bytes()).into_owned()
}

impl SlotSpec {
    /// Resolves `slot` in the manifest JSON with the core's rules (`slotFills[slot]` first, then
    /// the flat `endpoints[slot]`), copied out into owned strings.
    pub fn resolve(manifest_json: &str, slot: &str) -> Result<SlotSpec, SlotNotFilledError> {
        let manifest = match Manifest::parse(manifest_json.as_bytes()) {
            Ok(m) => m,
            // Validated when the context was built; a failure here still names the slot.
            Err(e) => {
                return Err(SlotNotFilledError {
                    slot: slot.to_owned(),
                    filled: Vec::new(),
                    message: format!("slot '{slot}' cannot be resolved: {e}"),
                });
            }
        };
        match manifest.resolve(slot) {
            Ok(fill) => Ok(SlotSpec {
                slot: slot.to_owned(),
                primary: match &fill.command {
                    Some(c) => stdio_spec(c).label(),
                    None => owned(&fill.endpoint),
                },
                fallback: match &fill.fallback_command {
                    Some(c) => Some(stdio_spec(c).label()),
                    None => fill.fallback.as_ref().map(owned),
                },
                primary_command: fill.command.as_ref().map(stdio_spec),
                fallback_command: fill.fallback_command.as_ref().map(stdio_spec),
                headers: fill
                    .headers
                    .iter()
                    .map(|(k, v)| (owned(&k), owned(&v)))
                    .chain(crate::route::slot_bearer(manifest_json, slot))
                    .collect(),
                auth: crate::route::slot_auth(manifest_json, slot),
                proxy: crate::route::slot_field(manifest_json, slot, "proxy"),
                ca: crate::route::slot_field(manifest_json, slot, "ca"),
                tools_lock: crate::route::slot_field(manifest_json, slot, "toolsLock"),
            }),
            Err(e) => Err(SlotNotFilledError {
                slot: slot.to_owned(),
                filled: e.filled_slots().map(|s| owned(&s)).collect(),
                message: e.to_string(),
            }),
        }
    }
}

pub(crate) struct SlotInner {
    pub(crate) run: Arc<Run>,
    pub(crate) spec: SlotSpec,
    /// The run's secrets plus this slot's header values (the core says both are redacted).
    secrets: Vec<Vec<u8>>,
    pub(crate) state: HostShared<SlotState>,
    /// The slot's OAuth client, when the context has OAuth settings.
    pub(crate) auth: Option<crate::auth::Authorizer>,
    /// The slot's proxy and trust, or why its manifest entry cannot be used.
    route: Result<Route, String>,
    /// Per-call scratch buffers put back after each call, so a call does not allocate and
    /// zero 32 KiB of head and read buffers (at most one per connection is kept).
    scratch: Mutex<Vec<Scratch>>,
    /// The `outputSchema` of each tool that declared one in the slot's latest `tools/list`.
    output_schemas: Mutex<HashMap<String, Arc<OutputSchema>>>,
    /// The stdio servers of the slot (`[primary, fallback]`), for targets that are commands.
    pub(crate) stdio: [Option<crate::stdio::StdioServer>; 2],
    /// Whether requests to the primary and the fallback go in absolute form (see
    /// [`Route::absolute_form`]), once the endpoints were first parsed.
    absolute_form: std::sync::OnceLock<[bool; 2]>,
    /// The pool keys of the slot's endpoints, made on its first connections.
    keys: crate::net::KeyCache,
    /// Where the primary's and the fallback's parts lie in their manifest strings, once
    /// parsed (none for a slot with a stdio server): each call rebuilds its endpoints from
    /// them instead of parsing and checking the strings again.
    shapes: std::sync::OnceLock<Option<EndpointShapes>>,
    /// The standalone GET streams of the slot's 2025-era sessions.
    pub(crate) get_streams: crate::slot::get_stream::GetStreams,
    /// The threads telling servers of dropped calls (`notifications/cancelled`,
    /// `tasks/cancel`): [`SlotHandle::close`] lets them finish before it ends the sessions.
    courtesy: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Tool fingerprints seen in this run, changes pending, and the list's freshness.
    pub(crate) integrity: Mutex<crate::integrity::Integrity>,
    /// The pins calls are checked against (the slot's `toolsLock`, else the options'), or
    /// why the slot's lock file cannot be used (every call is then refused saying so).
    tools_lock: Option<Result<crate::integrity::ToolsLock, String>>,
}

/// The shapes of a slot's primary and fallback endpoints (see [`SlotInner::shapes`]).
type EndpointShapes = (EndpointShape, Option<EndpointShape>);

/// A slot of the run. Clones share one session and one failover state.
#[derive(Clone)]
pub struct SlotHandle {
    pub(crate) inner: Arc<SlotInner>,
}

impl fmt::Debug for SlotHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotHandle")
            .field("slot", &self.inner.spec.slot)
            .field("endpoint", &self.inner.spec.primary)
            .field("fallback", &self.inner.spec.fallback)
            .finish()
    }
}

/// Head storage and one socket read, per call.
const HEAD_BYTES: usize = 16 * 1024;
const READ_BYTES: usize = 16 * 1024;
/// Cap of an error message.
const ERROR_BYTES: usize = 4 * 1024;
/// Deadline of the `tasks/cancel` sent for a dropped call's task.
const TASK_CANCEL_MS: u64 = 2_000;
/// Longest [`SlotHandle::close`] waits for the cancellations of dropped calls to be sent.
const COURTESY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Adds each attempt to the run's totals.
struct RunLedger<'a>(&'a Records);

impl Ledger for RunLedger<'_> {
    fn record(&mut self, r: LedgerRecord) {
        let mut t = lock(&self.0.ledger);
        t.tool_calls = t.tool_calls.saturating_add(u64::from(r.tool_calls));
        t.evidence_bytes = t
            .evidence_bytes
            .saturating_add(r.evidence_bytes.unwrap_or(0));
    }
}

/// Copies each event into the run's timeline.
struct RunTimeline<'a>(&'a Records);

impl Timeline for RunTimeline<'_> {
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        self.push(e, &[]);
    }
}

impl RunTimeline<'_> {
    /// Adds `e`, with `secrets` redacted from its JSON (an event may name the server's URL,
    /// whose query may carry one).
    fn push(&self, e: &TimelineEvent<'_>, secrets: &[Vec<u8>]) {
        let mut json = VecBuf::with_limit(usize::MAX);
        let _ = e.write_json(&mut json);
        let json = String::from_utf8_lossy(json.bytes());
        let json = if secrets.is_empty() {
            json.into_owned()
        } else {
            redact_string(&json, secrets)
        };
        lock(&self.0.timeline).push(TimelineEntry {
            kind: e.kind().to_owned(),
            json,
        });
    }
}

/// The run's timeline, with what happened to a stopped stdio server added to a call's
/// `tool_error` when no server answered it (the result's error says the same).
struct NotedTimeline<'a> {
    inner: RunTimeline<'a>,
    slot: &'a SlotHandle,
}

impl Timeline for NotedTimeline<'_> {
    fn emit_failure(&mut self, e: &TimelineEvent<'_>, answered: bool) {
        // No server answered: what happened to a stopped stdio server is added.
        if let TimelineEvent::ToolError { slot, tool, error } = e
            && !answered
            && let Some(note) = self.slot.stdio_note()
        {
            let error = format!("{error} ({note})");
            return self.inner.push(
                &TimelineEvent::ToolError {
                    slot,
                    tool,
                    error: &error,
                },
                &self.slot.secrets_now(),
            );
        }
        self.emit(e);
    }

    fn emit(&mut self, e: &TimelineEvent<'_>) {
        let secrets = self.slot.secrets_now();
        crate::telemetry::timeline(e, &secrets);
        self.inner.push(e, &secrets);
    }
}

/// Storage a pooled reply buffer may keep between calls; a bigger one is given back.
const KEEP_BYTES: usize = 64 * 1024;

/// Owned per-call buffers, and the call's deadline timer.
struct Scratch {
    head: Vec<u8>,
    read: Vec<u8>,
    request: VecBuf,
    reply: VecBuf,
    text: VecBuf,
    error: VecBuf,
    alarm: crate::net::Alarm,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            head: vec![0; HEAD_BYTES],
            read: vec![0; READ_BYTES],
            request: VecBuf::default(),
            reply: VecBuf::default(),
            text: VecBuf::default(),
            error: VecBuf::default(),
            alarm: crate::net::Alarm::default(),
        }
    }
}

/// A pooled [`Scratch`], put back into its slot's pool when dropped (also when a call's future
/// is dropped mid-way: the buffers hold no state between calls).
struct PooledScratch<'a> {
    scratch: Option<Scratch>,
    pool: &'a Mutex<Vec<Scratch>>,
    keep: usize,
}

impl PooledScratch<'_> {
    fn get(&mut self) -> &mut Scratch {
        self.scratch.get_or_insert_with(Scratch::new)
    }
}

impl Drop for PooledScratch<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.scratch.take() {
            let mut pool = lock(self.pool);
            if pool.len() < self.keep {
                pool.push(s);
            }
        }
    }
}

impl SlotHandle {
    pub(crate) fn new(run: Arc<Run>, spec: SlotSpec) -> Self {
        let mut secrets = run.secrets.clone();
        secrets.extend(spec.headers.iter().map(|(_, v)| v.as_bytes().to_vec()));
        // A password in the URL's userinfo, a secret-looking query value (`?api_key=…`).
        secrets.extend(
            std::iter::once(&spec.primary)
                .chain(spec.fallback.as_ref())
                .flat_map(|u| crate::mask::url_secrets(u))
                .map(String::into_bytes),
        );
        // The credential of an `authorization` value on its own too (a tool may echo it).
        secrets.extend(spec.headers.iter().filter_map(|(_, v)| {
            let (scheme, cred) = v.split_once(' ')?;
            let known =
                ["bearer", "basic", "token"].contains(&scheme.to_ascii_lowercase().as_str());
            (known && cred.trim().len() >= 4).then(|| cred.trim().as_bytes().to_vec())
        }));
        let route = crate::route::slot_route(
            &run.net,
            &run.options,
            &spec.slot,
            spec.proxy.as_deref(),
            spec.ca.as_deref(),
        );
        let auth = spec
            .auth
            .as_ref()
            .map(|a| a.config(run.options.auth.as_ref()))
            .or_else(|| run.options.auth.clone())
            .filter(crate::auth::AuthConfig::is_configured)
            .map(|cfg| {
                let timeout = std::time::Duration::from_millis(run.options.timeout_ms);
                crate::auth::Authorizer::new(cfg, run.learned.clone(), timeout)
            });
        if let Ok(r) = &route {
            secrets.extend(r.proxy.secrets().into_iter().map(String::into_bytes));
        }
        let line_cap = run.options.reply_cap;
        let elicit = (run.options.elicitation, run.options.on_elicit.clone());
        let stdio = [&spec.primary_command, &spec.fallback_command].map(|c| {
            c.clone()
                .map(|c| crate::stdio::StdioServer::new(c, line_cap, elicit.clone()))
        });
        // A secret the slot hands its process (by the run's rule: a secret-looking name) is a
        // secret of the run too, even when our own environment does not have it.
        secrets.extend(
            stdio
                .iter()
                .flatten()
                .flat_map(|s| s.spec().env.iter())
                .filter(|(k, v)| verifi_mcp_core::harness::redact::is_secret_var(k, v))
                .map(|(_, v)| v.as_bytes().to_vec()),
        );
        crate::run::add_json_forms(&mut secrets);
        let tools_lock = match &spec.tools_lock {
            Some(path) => Some(crate::integrity::ToolsLock::read(path)),
            None => run.options.tools_lock.clone().map(Ok),
        };
        let state = HostShared::new(SlotState::new(
            run.options.protocol_version,
            spec.fallback.is_some(),
        ));
        SlotHandle {
            inner: Arc::new(SlotInner {
                run,
                spec,
                secrets,
                state,
                auth,
                route,
                scratch: Mutex::new(Vec::new()),
                output_schemas: Mutex::new(HashMap::new()),
                stdio,
                absolute_form: std::sync::OnceLock::new(),
                keys: crate::net::KeyCache::default(),
                shapes: std::sync::OnceLock::new(),
                get_streams: crate::slot::get_stream::GetStreams::default(),
                courtesy: Mutex::new(Vec::new()),
                integrity: Mutex::new(crate::integrity::Integrity::default()),
                tools_lock,
            }),
        }
    }

    /// The tools lock calls are checked against, or why the slot's lock file cannot be used.
    pub(crate) fn tools_lock(&self) -> Option<Result<&crate::integrity::ToolsLock, &String>> {
        self.inner.tools_lock.as_ref().map(Result::as_ref)
    }

    /// The slot's name.
    pub fn slot(&self) -> &str {
        &self.inner.spec.slot
    }

    /// The primary endpoint, as the manifest gives it.
    pub fn endpoint(&self) -> &str {
        &self.inner.spec.primary
    }

    /// The fallback endpoint, if the manifest gives one.
    pub fn fallback(&self) -> Option<&str> {
        self.inner.spec.fallback.as_deref()
    }

    /// The protocol version spoken with the slot's server, once an operation reached it (the
    /// primary's, else the fallback's); `None` before. A task of a 2025-11-25 session lives as
    /// long as the session (this run); a 2026-07-28 task outlives the run.
    pub fn protocol_version(&self) -> Option<verifi_mcp_core::wire::jsonrpc::ProtocolVersion> {
        self.inner.state.with(|s| {
            [Target::Primary, Target::Fallback]
                .into_iter()
                .find_map(|t| s.session(t)?.snapshot().map(|snap| snap.version))
        })
    }

    /// Scratch buffers from the slot's pool (or new ones).
    fn scratch(&self) -> PooledScratch<'_> {
        let scratch = lock(&self.inner.scratch).pop();
        PooledScratch {
            scratch,
            pool: &self.inner.scratch,
            keep: self.inner.run.options.connection_limit.max(1),
        }
    }

    fn bufs<'s>(&self, scratch: &'s mut Scratch) -> CallBuffers<'s, VecBuf> {
        self.bufs_keeping_raw(scratch, self.inner.run.options.keep_raw)
    }

    fn bufs_keeping_raw<'s>(
        &self,
        scratch: &'s mut Scratch,
        keep_raw: bool,
    ) -> CallBuffers<'s, VecBuf> {
        let o = &self.inner.run.options;
        let pooled = |b: &mut VecBuf, limit: usize| {
            b.reuse(limit, KEEP_BYTES);
            std::mem::take(b)
        };
        CallBuffers {
            request: pooled(&mut scratch.request, o.request_cap),
            reply: pooled(&mut scratch.reply, o.reply_cap),
            text: pooled(&mut scratch.text, o.reply_cap),
            error: pooled(&mut scratch.error, ERROR_BYTES),
            head: &mut scratch.head,
            read: &mut scratch.read,
            raw: VecBuf::with_limit(if keep_raw { o.reply_cap } else { 0 }),
        }
    }

    /// The slot's endpoints parsed, or why the manifest's endpoints cannot be used: rebuilt
    /// from their kept shapes after the first parse.
    pub(crate) fn endpoints(&self) -> Result<(Endpoint<'_>, Option<Endpoint<'_>>), String> {
        let spec = &self.inner.spec;
        if let Some(Some((p, f))) = self.inner.shapes.get() {
            let primary = p.endpoint(&spec.primary);
            let fallback = match (f, spec.fallback.as_deref()) {
                (Some(f), Some(s)) => f.endpoint(s).map(Some),
                (None, None) => Some(None),
                _ => None,
            };
            // Always both: the shapes were taken from these very strings.
            if let (Some(p), Some(f)) = (primary, fallback) {
                return Ok((p, f));
            }
        }
        let (primary, fallback) = self.parse_endpoints()?;
        let _ = self.inner.shapes.set(
            (spec.primary_command.is_none() && spec.fallback_command.is_none())
                .then(|| {
                    let f = match (&fallback, spec.fallback.as_deref()) {
                        (Some(f), Some(s)) => Some(f.shape(s)?),
                        _ => None,
                    };
                    Some((primary.shape(&spec.primary)?, f))
                })
                .flatten(),
        );
        Ok((primary, fallback))
    }

    /// [`endpoints`](Self::endpoints), parsed from the manifest's strings.
    fn parse_endpoints(&self) -> Result<(Endpoint<'_>, Option<Endpoint<'_>>), String> {
        let spec = &self.inner.spec;
        let parse = if self.inner.run.options.exact_mcp_urls {
            Endpoint::parse_exact
        } else {
            Endpoint::parse_base
        };
        let route = self.route()?;
        // A stdio server's endpoint is a placeholder the slot's net knows (never dialled).
        let primary = match spec.primary_command {
            Some(_) => {
                crate::stdio::placeholder(verifi_mcp_core::harness::failover::Target::Primary)
            }
            None => parse(&spec.primary).map_err(|e| {
                format!("slot '{}': bad endpoint {:?}: {e}", spec.slot, spec.primary)
            })?,
        };
        let fallback = match (&spec.fallback, &spec.fallback_command) {
            (_, Some(_)) => Some(crate::stdio::placeholder(
                verifi_mcp_core::harness::failover::Target::Fallback,
            )),
            (Some(f), None) => Some(
                parse(f).map_err(|e| format!("slot '{}': bad fallback {f:?}: {e}", spec.slot))?,
            ),
            (None, None) => None,
        };
        // Whether each goes to a proxy in absolute form: fixed for the slot (its route and
        // endpoints are), so worked out once rather than per call.
        let [p, f] = *self.inner.absolute_form.get_or_init(|| {
            [
                route.absolute_form(&primary),
                fallback.as_ref().is_some_and(|f| route.absolute_form(f)),
            ]
        });
        Ok((
            primary.with_absolute_form(p),
            fallback.map(|fb| fb.with_absolute_form(f)),
        ))
    }

    /// The `authorization` value of this slot's requests: `Bearer <token>` on an OAuth slot
    /// (fetched or renewed as needed), none otherwise.
    async fn authorization(&self) -> Result<Option<String>, String> {
        Ok(crate::auth::slot::bearer_for(self)
            .await?
            .map(|b| format!("Bearer {b}")))
    }

    /// `Bearer <the token held>`, if any: never starts an authorization (for a cancellation
    /// or the end of a session).
    pub(crate) fn held_authorization(&self) -> Option<String> {
        self.inner
            .auth
            .as_ref()
            .and_then(crate::auth::Authorizer::held_token)
            .map(|t| format!("Bearer {t}"))
    }

    /// The slot's static headers, and `authorization` when there is one.
    pub(crate) fn headers_with<'a>(
        &'a self,
        authorization: &'a Option<String>,
    ) -> Vec<(&'a str, &'a str)> {
        let mut headers = self.headers();
        if let Some(a) = authorization {
            headers.push(("authorization", a));
        }
        headers
    }

    /// The secrets to redact now: the run's and the slot's, plus every token and assertion
    /// learned so far (an OAuth slot learns them as it goes).
    pub(crate) fn secrets_now(&self) -> std::borrow::Cow<'_, [Vec<u8>]> {
        let learned = lock(&self.inner.run.learned);
        if learned.is_empty() {
            return std::borrow::Cow::Borrowed(&self.inner.secrets);
        }
        let mut more: Vec<Vec<u8>> = learned.iter().map(|s| s.as_bytes().to_vec()).collect();
        crate::run::add_json_forms(&mut more);
        let mut all = self.inner.secrets.clone();
        all.extend(more);
        std::borrow::Cow::Owned(all)
    }

    /// Records an `ok: false` that the driver did not (an authorization failure): metered as a
    /// transport failure, a `tool_error` on the timeline, redacted.
    pub(crate) fn failure(&self, tool: &str, error: &str) -> ToolResult {
        let secrets = self.secrets_now();
        let clean = crate::run::redact_string(error, &secrets);
        let run = &self.inner.run;
        RunLedger(&run.records).record(LedgerRecord {
            tool_calls: 1,
            evidence_bytes: None,
        });
        RunTimeline(&run.records).emit(&TimelineEvent::ToolError {
            slot: &self.inner.spec.slot,
            tool,
            error: &clean,
        });
        ToolResult::local_failure(clean)
    }

    /// The session of `target` when it is ready (its id and version).
    pub(crate) fn snapshot(
        &self,
        target: Target,
    ) -> Option<verifi_mcp_core::wire::session::Snapshot> {
        self.inner
            .state
            .with(|s| s.session(target).and_then(|s| s.snapshot()).cloned())
    }

    /// The slot's route (proxy and trust), or why the manifest's entry cannot be used.
    pub(crate) fn route(&self) -> Result<&Route, String> {
        self.inner.route.as_ref().map_err(Clone::clone)
    }

    /// The context's pool and clock through this slot's route, and the slot's stdio servers.
    pub(crate) fn net(&self) -> Result<crate::stdio::SlotNet<'_, SlotHandle>, String> {
        Ok(crate::stdio::SlotNet {
            routed: RoutedNet {
                net: &self.inner.run.net,
                route: self.route()?,
                keys: Some(&self.inner.keys),
            },
            stdio: [self.inner.stdio[0].as_ref(), self.inner.stdio[1].as_ref()],
            alarm: None,
            slot: Some(self),
        })
    }

    /// What happened to the slot's stdio servers that stopped, redacted (for an error), e.g.
    /// `the server process exited (exit status: 3); its stderr ends: …`.
    pub(crate) fn stdio_note(&self) -> Option<String> {
        let notes: Vec<String> = self
            .inner
            .stdio
            .iter()
            .flatten()
            .filter_map(|s| s.note().map(|n| format!("{}: {n}", s.spec().label())))
            .collect();
        (!notes.is_empty()).then(|| redact_string(&notes.join("; "), &self.secrets_now()))
    }

    /// The process ids of the slot's running stdio servers (for tests that check none is left).
    pub fn stdio_pids(&self) -> Vec<u32> {
        self.inner
            .stdio
            .iter()
            .flatten()
            .filter_map(|s| s.pid())
            .collect()
    }

    /// `message` with the note of a stopped stdio server added, when there is one.
    fn with_stdio_note(&self, message: String) -> String {
        match self.stdio_note() {
            Some(note) => format!("{message} ({note})"),
            None => message,
        }
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        self.inner
            .spec
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The driver's config for this slot.
    pub(crate) fn config<'a>(
        &'a self,
        (primary, fallback): (Endpoint<'a>, Option<Endpoint<'a>>),
        headers: &'a [(&'a str, &'a str)],
    ) -> SlotConfig<'a> {
        let spec = &self.inner.spec;
        let o = &self.inner.run.options;
        let mut cfg = SlotConfig::new(&spec.slot, primary, &spec.primary);
        cfg.fallback = fallback;
        cfg.fallback_label = spec.fallback.as_deref().unwrap_or("");
        cfg.headers = headers;
        cfg.timeout_ms = o.timeout_ms;
        cfg.progress_extends_to_ms = o.progress_extends_to_ms;
        // Memory is bounded by the reply buffer (a JSON body) and the per-event cap (SSE);
        // time by the deadline. A whole-body cap on top would stop a long SSE stream of small
        // progress events, and would pre-empt the event cap's clearer error.
        cfg.limits.max_body_bytes = u64::MAX;
        cfg.limits.max_event_bytes = o.reply_cap;
        cfg.keep_raw = o.keep_raw;
        cfg.version = o.protocol_version;
        cfg.era = o.era;
        cfg.capabilities.tasks = o.tasks;
        cfg.elicitation = o.elicitation;
        cfg.elicit_with = o.on_elicit.as_ref().map(OnElicit::core);
        cfg.capabilities.elicitation_url = o.on_elicit.as_ref().is_some_and(OnElicit::takes_urls);
        cfg.idle_timeout_ms = o.idle_timeout_ms;
        cfg.trace = Some(self.inner.run.trace.context());
        cfg.log_level = o.server_log_level;
        cfg.stdio = [
            spec.primary_command.is_some(),
            spec.fallback_command.is_some(),
        ];
        cfg
    }

    /// A call that failed before anything was sent: the core's one rule (metered, a
    /// `tool_error` event, no failover), as on the edge.
    pub(crate) fn local_failure(&self, tool: &str, error: &str) -> ToolResult {
        let run = &self.inner.run;
        let error = crate::run::redact_string(error, &self.inner.secrets);
        let r = drive::local_failure(
            &self.inner.spec.slot,
            tool,
            &error,
            &mut RunLedger(&run.records),
            &mut RunTimeline(&run.records),
        );
        ToolResult::from_core(&r)
    }

    /// Ends this slot's sessions (best-effort HTTP DELETE; 405 is fine), after the
    /// cancellations of dropped calls were sent (at most 3 s), and closes its stdio servers.
    pub async fn close(&self) {
        self.courtesy_sent().await;
        let (Ok(endpoints), Ok(net)) = (self.endpoints(), self.net()) else {
            for server in self.inner.stdio.iter().flatten() {
                server.close().await;
            }
            return;
        };
        // The token held, if any (ending a session never starts an authorization).
        let authorization = self.held_authorization();
        let headers = self.headers_with(&authorization);
        let cfg = self.config(endpoints, &headers);
        // The sessions' GET streams end before the sessions do.
        self.inner.get_streams.close().await;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        drive::Driver::new(&net, &cfg, |f| self.inner.state.with(f))
            .close(&mut bufs)
            .await;
        for server in self.inner.stdio.iter().flatten() {
            server.close().await;
        }
    }
}

mod call;
pub(crate) mod get_stream;
mod list;
mod task;

pub(crate) use call::Ended;
pub(crate) use verifi_mcp_core::machine::Tasking;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slots_bearer_is_a_header_of_its_spec() {
        let m =
            r#"{"slotFills":{"b":{"endpoint":"http://h","auth":{"bearer":"static-token-1234"}}}}"#;
        let spec = SlotSpec::resolve(m, "b").unwrap();
        assert!(
            spec.headers
                .contains(&("authorization".into(), "Bearer static-token-1234".into()))
        );
    }

    #[test]
    fn slot_fills_win_over_endpoints_and_misses_name_the_filled_slots() {
        let m = r#"{
            "slotFills": { "kali": { "endpoint": "http://a", "fallback": "http://b",
                                     "headers": { "authorization": "Bearer x" } } },
            "endpoints": { "kali": "http://old", "recon": "http://r", "web_proxy": "http://w" }
        }"#;
        let s = SlotSpec::resolve(m, "kali").unwrap();
        assert_eq!(s.primary, "http://a");
        assert_eq!(s.fallback.as_deref(), Some("http://b"));
        assert_eq!(s.headers, vec![("authorization".into(), "Bearer x".into())]);
        assert_eq!(SlotSpec::resolve(m, "recon").unwrap().primary, "http://r");
        let err = SlotSpec::resolve(m, "burp").unwrap_err();
        assert_eq!(err.filled, vec!["kali", "recon", "web_proxy"]);
        assert_eq!(
            err.to_string(),
            "slot 'burp' has no endpoint in this run's manifest.\nFilled slots: kali, recon, \
             web_proxy. The Service composition binds an MCP to every required slot; a missing \
             one is a provisioning fault, not something to work around."
        );
    }
}
