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
use crate::run::{Records, Run, SlotNotFilledError, TimelineEntry, lock, redact_string};
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
    pub(crate) get_streams: crate::get_stream::GetStreams,
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
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        if let TimelineEvent::ToolError { slot, tool, error } = e
            && !error.starts_with("tool error")
            && !error.starts_with("JSON-RPC")
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
        let route = crate::route::slot_route(&run.net, &run.options, &spec);
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
                get_streams: crate::get_stream::GetStreams::default(),
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
        use verifi_mcp_core::drive::Shared;
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
        use verifi_mcp_core::drive::Shared;
        self.inner
            .state
            .with(|s| s.session(target).and_then(|s| s.snapshot()).cloned())
    }

    /// The slot's route (proxy and trust), or why the manifest's entry cannot be used.
    pub(crate) fn route(&self) -> Result<&Route, String> {
        self.inner.route.as_ref().map_err(Clone::clone)
    }

    /// The context's pool and clock through this slot's route, and the slot's stdio servers.
    pub(crate) fn net(&self) -> Result<crate::stdio::SlotNet<'_>, String> {
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

    /// Calls `tool` with `args` (anything that serializes to a JSON object; `()` or `null`
    /// for none). Never panics and never fails: every outcome is a [`ToolResult`], metered and,
    /// when not ok, on the timeline. A call its server makes a task (the 2026-07-28 tasks
    /// extension) is followed to its result; [`start_task`](Self::start_task) hands the task
    /// back instead, to follow later (also after a restart, with [`task`](Self::task)).
    pub async fn call(&self, tool: &str, args: impl Serialize) -> ToolResult {
        // Arguments that do not serialize are sent to the core as a non-object, which it
        // reports (and meters) as bad arguments, the same as any non-object arguments.
        let json = serde_json::to_vec(&args).unwrap_or_else(|_| b"false".to_vec());
        self.call_json(tool, &json, None).await
    }

    /// [`call`](Self::call), telling `on_progress` of each progress notification the server
    /// sends for it (a progress token is sent; messages are redacted). For a status line.
    pub async fn call_with_progress(
        &self,
        tool: &str,
        args: impl Serialize,
        on_progress: impl Fn(&ProgressUpdate<'_>) + Sync,
    ) -> ToolResult {
        let json = serde_json::to_vec(&args).unwrap_or_else(|_| b"false".to_vec());
        self.call_json(tool, &json, Some(ProgressObserver(&on_progress)))
            .await
    }

    /// Calls `tool` with arguments already encoded as JSON; on an OAuth slot, with a bearer
    /// token (and its renewals: once on a 401, up to 3 scope step-ups on a 403).
    pub(crate) async fn call_json(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
    ) -> ToolResult {
        use tracing::Instrument;
        let server = crate::telemetry::clean_server(&self.inner.spec.primary, &self.inner.secrets);
        let span = crate::telemetry::call_span(&self.inner.spec.slot, tool, &server);
        let r = async {
            let Some(auth) = &self.inner.auth else {
                let (r, challenge) = self.call_once(tool, json, on_progress, None).await;
                return self.explain_401(r, challenge).await;
            };
            crate::auth::slot::call_with_auth(self, auth, tool, json, on_progress).await
        }
        .instrument(span.clone())
        .await;
        if let Some(s) = self.snapshot(Target::Primary) {
            span.record("era", s.version.as_str());
        }
        crate::telemetry::call_ended(&span, &r);
        r
    }

    /// One call through the driver, with `bearer` as the `authorization` header when given;
    /// with the `WWW-Authenticate` value of a 401 or 403 that ended it.
    pub(crate) async fn call_once(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
    ) -> (ToolResult, Option<String>) {
        match self
            .call_as(tool, json, on_progress, bearer, Tasking::Wait)
            .await
        {
            (Ended::Done(r), challenge) => (r, challenge),
            // A call that waits for its task never comes back as a running task.
            (Ended::Task { .. }, challenge) => (
                ToolResult::local_failure("the call came back as a running task"),
                challenge,
            ),
        }
    }

    /// [`call_once`](Self::call_once), doing `how` with a task the server makes of the call:
    /// wait for its end, hand it back running (detach), or follow an earlier one (attach).
    pub(crate) async fn call_as(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
        how: Tasking<'_>,
    ) -> (Ended, Option<String>) {
        let done = |r| (Ended::Done(r), None);
        if !matches!(how, Tasking::Attach { .. })
            && let Some(why) = self.tool_gate(tool).await
        {
            return done(self.local_failure(tool, &why));
        }
        let args = match Value::parse(json, JsonLimits::default()) {
            Ok(v) if v.is_null() => None,
            Ok(v) => Some(v),
            Err(e) => {
                let e = format!("arguments are not JSON: {e}");
                return done(self.local_failure(tool, &e));
            }
        };
        let endpoints = match self.endpoints() {
            Ok(e) => e,
            Err(e) => return done(self.local_failure(tool, &e)),
        };
        let authorization = bearer.map(|b| format!("Bearer {b}"));
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let mut cfg = self.config(endpoints, &headers);
        cfg.on_progress = on_progress;
        let on_log = |m: &LogMessage<'_>| self.server_log(Some(tool), m.level, m.logger, m.data);
        cfg.on_log = Some(LogObserver(&on_log));
        // A tool that declared an outputSchema has its reply kept, to check its
        // structuredContent (see `check_structured`).
        let schema = lock(&self.inner.output_schemas).get(tool).cloned();
        cfg.keep_raw |= schema.is_some();
        // If the caller drops this call while its tools/call is on the wire, the server is
        // told (the core meters the dropped call itself).
        let in_flight = InFlight::new();
        // The session's GET stream is kept while this call runs.
        let _listening = self.inner.get_streams.call();
        let cancel_if_dropped = CancelIfDropped {
            slot: self,
            in_flight: &in_flight,
            cancel_task: !matches!(
                how,
                Tasking::Attach {
                    cancel_on_drop: false,
                    ..
                }
            ),
        };
        cfg.in_flight = Some(&in_flight);
        let run = &self.inner.run;
        let mut scratch = self.scratch();
        // Out of the pooled buffers while they are lent to the driver (back with them below;
        // a dropped call drops it, and the next call makes another).
        let alarm = std::mem::take(&mut scratch.get().alarm);
        let mut bufs = self.bufs_keeping_raw(scratch.get(), cfg.keep_raw);
        let mut ledger = RunLedger(&run.records);
        let mut timeline = NotedTimeline {
            inner: RunTimeline(&run.records),
            slot: self,
        };
        let Ok(mut net) = self.net() else {
            return done(self.local_failure(tool, "slot route unavailable"));
        };
        net.alarm = Some(&alarm);
        let state = &self.inner.state;
        let r = match how {
            Tasking::Wait => {
                drive::Driver::new(&net, &cfg, state)
                    .call(
                        (tool, args),
                        &secrets,
                        &mut ledger,
                        &mut timeline,
                        &mut bufs,
                    )
                    .await
            }
            Tasking::Detach => {
                match drive::Driver::new(&net, &cfg, state)
                    .start_task(
                        (tool, args),
                        &secrets,
                        &mut ledger,
                        &mut timeline,
                        &mut bufs,
                    )
                    .await
                {
                    drive::Started::Done(r) => r,
                    drive::Started::Task { target, id } => {
                        // Running on its server: nothing to cancel if this future is dropped.
                        std::mem::forget(cancel_if_dropped);
                        let id = id.as_str().to_owned();
                        return (Ended::Task { target, id }, None);
                    }
                }
            }
            Tasking::Attach { target, task, .. } => {
                drive::Driver::new(&net, &cfg, state)
                    .attach_task(
                        (target, tool, task),
                        &secrets,
                        &mut ledger,
                        &mut timeline,
                        &mut bufs,
                    )
                    .await
            }
        };
        // A server that said its tools changed (on this call's stream): the list is fetched
        // again before the next call.
        let list_changed = {
            use verifi_mcp_core::drive::Shared;
            state.with(SlotState::take_tools_list_changed)
        };
        if list_changed {
            lock(&self.inner.integrity).stale = true;
        }
        let mut owned = ToolResult::from_core_without_text(&r);
        owned.raw = owned
            .raw
            .map(|raw| crate::run::redact_decoded(raw, &secrets));
        if matches!(owned.kind, Kind::Unreachable(_))
            && let Some(e) = owned.error.take()
        {
            owned.error = Some(self.with_stdio_note(e));
        }
        let text_len = r.text.len();
        std::mem::forget(cancel_if_dropped);
        // The head and read borrows end with `bufs`; the growable buffers go back to the pool,
        // emptied, and without a big reply's storage (it is not held between calls).
        let CallBuffers {
            mut request,
            mut reply,
            mut text,
            mut error,
            ..
        } = bufs;
        // A big text is handed over whole instead of copied (it would not be kept in the pool
        // anyway); a small one is copied and its buffer pooled.
        owned.text = text.hand_out(text_len, KEEP_BYTES);
        for b in [&mut request, &mut reply, &mut text, &mut error] {
            b.reuse(0, KEEP_BYTES);
        }
        let s = scratch.get();
        (s.request, s.reply, s.text, s.error) = (request, reply, text, error);
        s.alarm = alarm;
        if let Some(schema) = schema {
            self.check_structured(tool, &schema, &mut owned);
        }
        // The last reply head is still in the head buffer: a 401 or 403 says in it what the
        // server wants (the core's failure keeps only the status and a snippet).
        let challenge = crate::auth::slot::status_of(&owned)
            .filter(|c| *c == 401 || *c == 403)
            .and_then(|c| crate::auth::client::challenge_in_head(&s.head, c));
        (Ended::Done(owned), challenge)
    }

    /// The names of the slot's tools (every page). Fails over like a call; a failure of the
    /// last server tried is returned, reading `tools/list failed: …`.
    pub async fn list_tools(&self) -> Result<Vec<String>, ListToolsError> {
        let mut names = Vec::new();
        self.each_tool(|name, _| names.push(name.to_owned()))
            .await?;
        Ok(names)
    }

    /// The slot's tools with their whole descriptions (each as the server sent it: `name`,
    /// `description`, `inputSchema` …, redacted), every page. Fails over like
    /// [`list_tools`](Self::list_tools).
    pub async fn list_tools_described(&self) -> Result<Vec<serde_json::Value>, ListToolsError> {
        let mut tools = Vec::new();
        // The core validated each tool's JSON, so it parses.
        self.each_tool(|_, json| {
            tools.push(serde_json::from_slice(json).unwrap_or(serde_json::Value::Null))
        })
        .await?;
        Ok(tools)
    }

    /// tools/list through the driver, each tool's name and redacted JSON to `on_tool`.
    pub(crate) async fn each_tool(
        &self,
        mut on_tool: impl FnMut(&str, &[u8]),
    ) -> Result<(), ListToolsError> {
        let endpoints = self
            .endpoints()
            .map_err(|e| ListToolsError::local(format!("tools/list failed: {e}")))?;
        let authorization = match self.authorization().await {
            Ok(a) => a,
            Err(e) => return Err(ListToolsError::local(format!("tools/list failed: {e}"))),
        };
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self
            .net()
            .map_err(|e| ListToolsError::local(format!("tools/list failed: {e}")))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        // Collected first: a primary that fails part-way restarts the list on the fallback,
        // and only the list that ends is handed over.
        let mut tools = ListCollector::new(self.inner.run.options.reply_cap);
        // Which server answers: the fallback when the list starts there (the primary known
        // dead, a live fallback) or restarts there after a primary failure.
        let mut on_fallback = {
            use verifi_mcp_core::drive::Shared;
            self.inner.state.with(|s| {
                let f = s.failover();
                f.primary_dead() && f.has_fallback() && !f.fallback_dead()
            })
        };
        drive::Driver::new(&net, &cfg, &self.inner.state)
            .list(ListMethod::Tools, &secrets, &mut bufs, |item| {
                on_fallback |= matches!(item, drive::ListItem::Restart);
                tools.take(item)
            })
            .await
            .map_err(|e| ListToolsError {
                message: self.with_stdio_note(redact_string(&e.to_string(), &secrets)),
                kind: ListToolsError::kind_of(&e.error),
            })?;
        let tools = tools.finish().map_err(|why| ListToolsError {
            message: format!("tools/list failed: {why}"),
            kind: Kind::Unreachable(verifi_mcp_core::wire::failure::Cause::TooLarge),
        })?;
        // Each tool's outputSchema is learned (a new list replaces the old one).
        let mut schemas = HashMap::new();
        let mut prints = Vec::with_capacity(tools.len());
        for json in &tools {
            // The core validated the JSON; a tool without a string name is skipped.
            let Some(name) = Value::parse(json, JsonLimits::default())
                .ok()
                .and_then(verifi_mcp_core::wire::jsonrpc::tool_name)
            else {
                continue;
            };
            let name = owned(&name);
            learn_output_schema(&mut schemas, &name, json);
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) {
                prints.push((name.clone(), crate::integrity::ToolPrint::of(&v)));
            }
            on_tool(&name, json);
        }
        *lock(&self.inner.output_schemas) = schemas;
        // A 2026 list says how long it may be kept: fetched again, when it is up, before the
        // next call.
        let ttl = {
            use verifi_mcp_core::drive::Shared;
            self.inner.state.with(SlotState::take_tools_ttl_ms)
        };
        lock(&self.inner.integrity).expires = ttl.map(|ms| {
            std::time::Instant::now()
                + std::time::Duration::from_millis(ms.min(u64::from(u32::MAX)))
        });
        self.observe_tools(usize::from(on_fallback), prints);
        Ok(())
    }

    /// Tells the server, best effort and off the caller's task, that a dropped call's
    /// `tools/call` is cancelled.
    fn cancel_dropped(&self, request: (verifi_mcp_core::harness::failover::Target, u64)) {
        let slot = self.clone();
        // The caller's future is gone and its executor unknown: a short-lived thread sends
        // the notification on its own 1 s deadline (the core's courtesy timeout).
        let sent = std::thread::Builder::new()
            .name("mcp-cancel".into())
            .spawn(move || {
                async_io::block_on(async {
                    let Ok(endpoints) = slot.endpoints() else {
                        return;
                    };
                    // An OAuth slot's notification carries the token held (never a new one).
                    let authorization = slot.held_authorization();
                    let headers = slot.headers_with(&authorization);
                    let cfg = slot.config(endpoints, &headers);
                    let Ok(net) = slot.net() else {
                        return;
                    };
                    let mut scratch = slot.scratch();
                    let mut bufs = slot.bufs(scratch.get());
                    drive::Driver::new(&net, &cfg, &slot.inner.state)
                        .cancel_dropped(request, &mut bufs)
                        .await;
                })
            });
        self.keep_courtesy(sent);
    }

    /// Keeps a courtesy thread's handle for [`close`](Self::close) (finished ones are let go).
    fn keep_courtesy(&self, sent: std::io::Result<std::thread::JoinHandle<()>>) {
        if let Ok(h) = sent {
            let mut all = lock(&self.inner.courtesy);
            all.retain(|t| !t.is_finished());
            all.push(h);
        }
    }

    /// Waits (at most [`COURTESY_WAIT`]) for the cancellations of dropped calls to be sent,
    /// so they reach the server before its session ends or its process is closed.
    async fn courtesy_sent(&self) {
        let deadline = std::time::Instant::now() + COURTESY_WAIT;
        loop {
            let left = {
                let mut all = lock(&self.inner.courtesy);
                all.retain(|t| !t.is_finished());
                all.len()
            };
            if left == 0 || std::time::Instant::now() >= deadline {
                return;
            }
            async_io::Timer::after(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Tells the task's server, best effort and off the caller's task, that a dropped call's
    /// task is cancelled (`tasks/cancel`), as [`cancel_dropped`](Self::cancel_dropped) does a
    /// `tools/call`.
    fn cancel_dropped_task(&self, target: Target, task: String) {
        let slot = self.clone();
        let sent = std::thread::Builder::new()
            .name("mcp-task-cancel".into())
            .spawn(move || {
                async_io::block_on(async {
                    let Ok(endpoints) = slot.endpoints() else {
                        return;
                    };
                    let authorization = slot.held_authorization();
                    let headers = slot.headers_with(&authorization);
                    let mut cfg = slot.config(endpoints, &headers);
                    // A courtesy on its own short deadline, never the call's whole timeout.
                    cfg.timeout_ms = cfg.timeout_ms.min(TASK_CANCEL_MS);
                    let Ok(net) = slot.net() else {
                        return;
                    };
                    let secrets = slot.secrets_now();
                    let mut scratch = slot.scratch();
                    let mut bufs = slot.bufs(scratch.get());
                    let req = Request::TaskCancel { task: &task };
                    let _ = drive::Driver::new(&net, &cfg, &slot.inner.state)
                        .task_request((target, req), &secrets, &mut bufs)
                        .await;
                })
            });
        self.keep_courtesy(sent);
    }

    /// One `tasks/get` or `tasks/cancel` to `target` alone (a task lives on its server): the
    /// whole result, redacted. Not metered; on an OAuth slot, with its bearer token.
    pub(crate) async fn task_request(
        &self,
        target: Target,
        req: Request<'_>,
    ) -> Result<Vec<u8>, ProtocolError> {
        let method = req.method();
        let local = |e: &str| ProtocolError::local(method, e, &self.secrets_now());
        let endpoints = self.endpoints().map_err(|e| local(&e))?;
        let authorization = self.authorization().await.map_err(|e| local(&e))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self.net().map_err(|e| local(&e))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        let answered = drive::Driver::new(&net, &cfg, &self.inner.state)
            .task_request((target, req), &secrets, &mut bufs)
            .await
            .map_err(|e| self.noted(ProtocolError::from_core(&e, &secrets)))?;
        Ok(answered.result.to_vec())
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
        drive::Driver::new(&net, &cfg, &self.inner.state)
            .close(&mut bufs)
            .await;
        for server in self.inner.stdio.iter().flatten() {
            server.close().await;
        }
    }
}

/// Keeps `name`'s `outputSchema`, compiled, if its tools/list entry declares one.
fn learn_output_schema(schemas: &mut HashMap<String, Arc<OutputSchema>>, name: &str, json: &[u8]) {
    // Most tools declare none: only those whose JSON names one are parsed.
    if !json.windows(14).any(|w| w == b"\"outputSchema\"") {
        return;
    }
    let Ok(serde_json::Value::Object(mut tool)) = serde_json::from_slice(json) else {
        return;
    };
    if let Some(schema) = tool.remove("outputSchema").filter(|s| !s.is_null()) {
        schemas.insert(name.to_owned(), Arc::new(OutputSchema::compile(&schema)));
    }
}

/// The rest of the protocol: resources, prompts, ping, and the structured-output check.
impl SlotHandle {
    /// An answered call of a tool with an `outputSchema`: its `structuredContent` must match,
    /// or the call becomes a tool-level failure (`ok: false, isError: true`) whose error names
    /// the failing path, with its `tool_error` event. It is already metered (the same record
    /// as a tool error's). The kept reply stays only if the run asked for it.
    fn check_structured(&self, tool: &str, schema: &OutputSchema, owned: &mut ToolResult) {
        let checked = if owned.ok {
            schema.check(owned.call_result().as_ref())
        } else {
            Ok(())
        };
        if !self.inner.run.options.keep_raw {
            owned.raw = None;
        }
        if let Err(why) = checked {
            let why = redact_string(&why, &self.inner.secrets);
            owned.ok = false;
            owned.is_error = true;
            owned.kind = Kind::ToolError;
            RunTimeline(&self.inner.run.records).emit(&TimelineEvent::ToolError {
                slot: &self.inner.spec.slot,
                tool,
                error: &why,
            });
            owned.error = Some(why);
        }
    }

    /// A list through the driver, each item (or a restart on the fallback) to `on_item`.
    async fn each_item(
        &self,
        list: ListMethod,
        on_item: impl FnMut(drive::ListItem<'_>) + Send,
    ) -> Result<(), ProtocolError> {
        let local = |e: &str, secrets: &[Vec<u8>]| ProtocolError::local(list.method(), e, secrets);
        let endpoints = self
            .endpoints()
            .map_err(|e| local(&e, &self.secrets_now()))?;
        // The slot's route (proxy, trust) and, on an OAuth slot, its bearer token: as a call.
        let authorization = self
            .authorization()
            .await
            .map_err(|e| local(&e, &self.secrets_now()))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self.net().map_err(|e| local(&e, &secrets))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        drive::Driver::new(&net, &cfg, &self.inner.state)
            .list(list, &secrets, &mut bufs, on_item)
            .await
            .map_err(|e| self.noted(ProtocolError::from_core(&e, &secrets)))
    }

    /// A protocol error with the note of a stopped stdio server, when no server answered.
    fn noted(&self, mut e: ProtocolError) -> ProtocolError {
        if e.code.is_none() {
            e.message = self.with_stdio_note(e.message);
        }
        e
    }

    /// Every page of `list`, each item typed.
    async fn list_typed<T: serde::de::DeserializeOwned>(
        &self,
        list: ListMethod,
    ) -> Result<Vec<T>, ProtocolError> {
        let secrets = &self.inner.secrets;
        let mut items = ListCollector::new(self.inner.run.options.reply_cap);
        self.each_item(list, |item| items.take(item)).await?;
        let items = items
            .finish()
            .map_err(|why| ProtocolError::local(list.method(), &why, secrets))?;
        items
            .iter()
            .map(|json| typed(list.method(), json, &self.inner.secrets))
            .collect()
    }

    /// The slot's resources (`resources/list`, every page; a server that repeats its cursor
    /// is stopped). Fails over like [`list_tools`](Self::list_tools); not metered.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ProtocolError> {
        self.list_typed(ListMethod::Resources).await
    }

    /// The slot's resource templates (`resources/templates/list`, every page).
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ProtocolError> {
        self.list_typed(ListMethod::ResourceTemplates).await
    }

    /// The slot's prompts (`prompts/list`, every page).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ProtocolError> {
        self.list_typed(ListMethod::Prompts).await
    }

    /// A request that failed before anything was sent: a content-bearing one is metered and on
    /// the timeline like a call's local failure (no failover); `ping` is not.
    fn request_failed_locally(&self, req: &Request<'_>, why: &str) -> ProtocolError {
        let err = ProtocolError::local(req.method(), why, &self.inner.secrets);
        if req.bears_content() {
            let run = &self.inner.run;
            drive::local_failure(
                &self.inner.spec.slot,
                req.method(),
                &err.message,
                &mut RunLedger(&run.records),
                &mut RunTimeline(&run.records),
            );
        }
        err
    }

    /// One request through the driver: the redacted result JSON and the latency.
    async fn request(&self, req: Request<'_>) -> Result<(Vec<u8>, u64), ProtocolError> {
        let endpoints = self
            .endpoints()
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        // The slot's route (proxy, trust) and, on an OAuth slot, its bearer token: as a call.
        let authorization = self
            .authorization()
            .await
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let secrets = &secrets[..];
        let cfg = self.config(endpoints, &headers);
        let net = self
            .net()
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        let run = &self.inner.run;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        let answered = drive::Driver::new(&net, &cfg, &self.inner.state)
            .request(
                req,
                secrets,
                &mut RunLedger(&run.records),
                &mut RunTimeline(&run.records),
                &mut bufs,
            )
            .await
            .map_err(|e| self.noted(ProtocolError::from_core(&e, secrets)))?;
        Ok((answered.result.to_vec(), answered.latency_ms))
    }

    /// Reads the resource at `uri` (`resources/read`): its contents, redacted. Metered like a
    /// tool call (evidence bytes: the redacted result); a failure is also a `tool_error`
    /// event with `resources/read` as the tool. Fails over like a list.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ProtocolError> {
        let (json, _) = self.request(Request::ResourcesRead { uri }).await?;
        typed("resources/read", &json, &self.inner.secrets)
    }

    /// Gets the prompt `name` with `args` (an object of strings; `()` or `null` for none)
    /// (`prompts/get`): its messages, redacted. Metered like
    /// [`read_resource`](Self::read_resource).
    pub async fn get_prompt(
        &self,
        name: &str,
        args: impl Serialize,
    ) -> Result<GetPromptResult, ProtocolError> {
        let secrets = &self.inner.secrets;
        let here = Request::PromptsGet {
            name,
            arguments: None,
        };
        let json = serde_json::to_vec(&args)
            .map_err(|e| self.request_failed_locally(&here, &format!("arguments: {e}")))?;
        let arguments = match Value::parse(&json, JsonLimits::default()) {
            Ok(v) if v.is_null() => None,
            Ok(v) if v.kind() == verifi_mcp_core::wire::json::Kind::Object => Some(v),
            Ok(_) => {
                return Err(self.request_failed_locally(&here, "arguments must be a JSON object"));
            }
            Err(e) => {
                return Err(
                    self.request_failed_locally(&here, &format!("arguments are not JSON: {e}"))
                );
            }
        };
        let (json, _) = self
            .request(Request::PromptsGet { name, arguments })
            .await?;
        typed("prompts/get", &json, secrets)
    }

    /// `ping`: the server's round trip in ms (the handshake first, if the session is new).
    /// Not metered, like `tools/list`. Fails over like a list.
    pub async fn ping(&self) -> Result<u64, ProtocolError> {
        self.request(Request::Ping).await.map(|(_, ms)| ms)
    }
}

/// Armed while a call runs: when the caller drops the call's future with a `tools/call` on the
/// wire, the server is told to cancel it (`notifications/cancelled`); when the call is a task
/// being polled (a transparent call, or a [`crate::TaskHandle::wait`]), the task is cancelled
/// on its server (`tasks/cancel`). A call that ends normally, or hands its task back running,
/// disarms it (`forget`).
struct CancelIfDropped<'s> {
    slot: &'s SlotHandle,
    in_flight: &'s InFlight,
    /// Whether a dropped call is cancelled on the wire: not when it follows a task the caller
    /// only looks in on ([`crate::TaskHandle::leave_running`]).
    cancel_task: bool,
}

impl Drop for CancelIfDropped<'_> {
    fn drop(&mut self) {
        if !self.cancel_task {
            // A task the caller only looked in on runs on; a poll of it needs no cancel.
            return;
        }
        if let Some(request) = self.in_flight.get() {
            self.slot.cancel_dropped(request);
        } else if let Some((target, task)) = self.in_flight.task() {
            // The call had become a task that runs on: it is cancelled on its server.
            self.slot
                .cancel_dropped_task(target, task.as_str().to_owned());
        }
    }
}

/// What a call does with a task its server makes of it (the tasks extension).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tasking<'a> {
    /// Polls it to its end ([`SlotHandle::call`]).
    Wait,
    /// Hands it back running ([`SlotHandle::start_task`]).
    Detach,
    /// Follows the task `task` on `target`, which an earlier call became.
    Attach {
        /// The task's server.
        target: Target,
        /// Its id.
        task: &'a str,
        /// Whether a dropped wait cancels the task.
        cancel_on_drop: bool,
    },
}

/// How [`SlotHandle::call_as`] ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The call's result (answered, failed, or its task's end).
    Done(ToolResult),
    /// The call is the task `id` on `target`, still running (a detached call).
    Task {
        /// The task's server.
        target: Target,
        /// Its id.
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

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
