//! `HarnessContext`: a run's manifest, run id, options and records (ledger totals, timeline,
//! log), and `ctx.mcp(slot)`, the only way a harness reaches a tool.
//!
//! Owns: loading the manifest, the options, memoizing one [`SlotHandle`] per slot, and owned
//! copies of what the core records. The context offers no raw HTTP client.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::redact::{collect_run_secrets, redact};
use verifi_mcp_core::harness::slots::Manifest;
use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

use crate::auth::AuthConfig;
use crate::buf::VecBuf;

use crate::buf::DEFAULT_REPLY_CAP;
use crate::net::{DEFAULT_CONNECTION_LIMIT, HostNet, RootCert, Route, TlsConfigError};
use crate::proxy::{EnvProxies, ProxyError, ProxyRule};
use crate::slot::{SlotHandle, SlotSpec};
use crate::trust::{Trust, client_config};

/// The seed's per-call timeout: 300 000 ms (5 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;

/// The run log's first line when certificate checks are off.
pub const INSECURE_WARNING: &str = "WARNING: TLS certificate checks are OFF (insecure): any \
    server certificate is accepted, so anyone on the path can read and change this run's traffic";

/// How a context behaves. `Options::default()` is the seed's behaviour.
#[derive(Debug, Clone)]
pub struct Options {
    /// Per call: connect + handshake + reply (default [`DEFAULT_TIMEOUT_MS`]).
    pub timeout_ms: u64,
    /// Open connections per slot endpoint, in use or pooled (default 64).
    pub connection_limit: usize,
    /// The run's secrets; `None` means `collect_run_secrets(std::env::vars())`.
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
    /// Keep the redacted JSON-RPC reply in `ToolResult::raw` (default false: it doubles the
    /// memory of a big reply).
    pub keep_raw: bool,
    /// The protocol version offered in `initialize` (default the seed's `2024-11-05`); the
    /// server's choice among the versions the core speaks is then followed.
    pub protocol_version: ProtocolVersion,
    /// Take the manifest's endpoints as exact MCP URLs, used as given, instead of base URLs
    /// with `/mcp` appended (default false, as the seed): for servers mounted elsewhere.
    pub exact_mcp_urls: bool,
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
            keep_raw: false,
            protocol_version: ProtocolVersion::DEFAULT,
            exact_mcp_urls: false,
        }
    }
}

/// A context could not be built.
#[derive(Debug)]
pub enum ContextError {
    /// The manifest file could not be read.
    Io(std::io::Error),
    /// The manifest is not JSON, or not an object.
    Manifest(String),
    /// The TLS configuration (a custom root) is unusable.
    Tls(TlsConfigError),
    /// The proxy (option or environment) is unusable.
    Proxy(ProxyError),
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContextError::Io(e) => write!(f, "cannot read the manifest: {e}"),
            ContextError::Manifest(e) => write!(f, "bad manifest: {e}"),
            ContextError::Tls(e) => write!(f, "{e}"),
            ContextError::Proxy(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ContextError {}

/// `ctx.mcp(slot)` for a slot the manifest does not fill (owned copy of the core's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotNotFilledError {
    /// The slot asked for.
    pub slot: String,
    /// The slots the manifest does fill, sorted.
    pub filled: Vec<String>,
    /// The seed's message, naming the slot and the filled slots.
    pub message: String,
}

impl fmt::Display for SlotNotFilledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SlotNotFilledError {}

/// Totals of the run's ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerTotals {
    /// Tool calls metered (every attempt, whatever its outcome).
    pub tool_calls: u64,
    /// Bytes of redacted response text metered.
    pub evidence_bytes: u64,
}

/// One timeline event, owned: its kind (`tool_error`, `mcp.fallback_used`,
/// `mcp.no_healthy_tool`, …) and its stable JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    /// The event's kind.
    pub kind: String,
    /// The event as JSON (`{"kind":…,…}`).
    pub json: String,
}

impl TimelineEntry {
    /// The JSON form parsed (for tests and reports).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// What a run records; shared by the context and its slots.
#[derive(Debug, Default)]
pub(crate) struct Records {
    pub(crate) ledger: Mutex<LedgerTotals>,
    pub(crate) timeline: Mutex<Vec<TimelineEntry>>,
    pub(crate) log: Mutex<Vec<String>>,
}

/// `text` with every secret replaced by `[REDACTED]` (the core's rule).
pub(crate) fn redact_string(text: &str, secrets: &[String]) -> String {
    let mut out = VecBuf::with_limit(usize::MAX);
    // An unbounded VecBuf never overflows.
    let _ = redact(text.as_bytes(), secrets, &mut out);
    String::from_utf8_lossy(out.bytes()).into_owned()
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What every slot of a run shares.
pub(crate) struct Run {
    pub(crate) run_id: String,
    pub(crate) options: Options,
    pub(crate) secrets: Vec<String>,
    pub(crate) net: HostNet,
    pub(crate) records: Records,
    /// Tokens, secrets and assertions the run's OAuth clients learned: redacted everywhere.
    pub(crate) learned: Arc<Mutex<Vec<String>>>,
}

/// A run: manifest, run id, options, records, and the memoized slots. Cheap to clone.
#[derive(Clone)]
pub struct HarnessContext {
    run: Arc<Run>,
    manifest: Arc<str>,
    slots: Arc<Mutex<HashMap<String, SlotHandle>>>,
}

impl fmt::Debug for HarnessContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HarnessContext")
            .field("run_id", &self.run.run_id)
            .finish_non_exhaustive()
    }
}

impl HarnessContext {
    /// A context from a manifest file (JSON).
    pub fn from_manifest_file(
        path: impl AsRef<Path>,
        run_id: impl Into<String>,
        options: Options,
    ) -> Result<Self, ContextError> {
        let text = std::fs::read_to_string(path).map_err(ContextError::Io)?;
        HarnessContext::from_manifest_str(&text, run_id, options)
    }

    /// A context from manifest JSON text.
    pub fn from_manifest_str(
        json: &str,
        run_id: impl Into<String>,
        options: Options,
    ) -> Result<Self, ContextError> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| ContextError::Manifest(e.to_string()))?;
        HarnessContext::from_manifest_value(value, run_id, options)
    }

    /// A context from a parsed manifest.
    pub fn from_manifest_value(
        manifest: Value,
        run_id: impl Into<String>,
        options: Options,
    ) -> Result<Self, ContextError> {
        let text = manifest.to_string();
        Manifest::parse(text.as_bytes()).map_err(|e| ContextError::Manifest(e.to_string()))?;
        let tls = client_config(&Trust {
            extra: options.root_certs.clone(),
            no_system_roots: false,
            insecure: options.insecure,
        })
        .map_err(ContextError::Tls)?;
        let proxy = match &options.proxy {
            Some(p) => ProxyRule::explicit(p),
            None if options.proxy_from_env => {
                EnvProxies::from_vars(std::env::vars()).map(|e| ProxyRule::Env(Arc::new(e)))
            }
            None => Ok(ProxyRule::Direct),
        }
        .map_err(ContextError::Proxy)?;
        let mut secrets = match &options.secrets {
            Some(s) => s.clone(),
            None => collect_run_secrets(std::env::vars()).collect(),
        };
        secrets.extend(proxy.secrets());
        let net = HostNet::with_route(options.connection_limit, Route { proxy, tls });
        let records = Records::default();
        if options.insecure {
            lock(&records.log).push(INSECURE_WARNING.to_owned());
        }
        Ok(HarnessContext {
            run: Arc::new(Run {
                run_id: run_id.into(),
                options,
                secrets,
                net,
                records,
                learned: Arc::default(),
            }),
            manifest: Arc::from(text),
            slots: Arc::default(),
        })
    }

    /// The run id (the `workspace` of every `run_command`).
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The context's pool (for the crate's own tests).
    #[cfg(test)]
    pub(crate) fn run_net(&self) -> HostNet {
        self.run.net.clone()
    }

    /// The options this context was built with.
    pub fn options(&self) -> &Options {
        &self.run.options
    }

    /// The slot handle for `slot`: the same handle (one session, one failover state) for the
    /// whole run. Nothing is sent until its first call.
    pub fn mcp(&self, slot: &str) -> Result<SlotHandle, SlotNotFilledError> {
        let mut slots = lock(&self.slots);
        if let Some(h) = slots.get(slot) {
            return Ok(h.clone());
        }
        let spec = SlotSpec::resolve(&self.manifest, slot)?;
        let handle = SlotHandle::new(self.run.clone(), spec);
        slots.insert(slot.to_owned(), handle.clone());
        Ok(handle)
    }

    /// Adds a line to the run log, with the run's secrets redacted.
    pub fn log(&self, line: impl AsRef<str>) {
        let mut secrets = self.run.secrets.clone();
        secrets.extend(lock(&self.run.learned).iter().cloned());
        let clean = redact_string(line.as_ref(), &secrets);
        lock(&self.run.records.log).push(clean);
    }

    /// The run log so far.
    pub fn log_lines(&self) -> Vec<String> {
        lock(&self.run.records.log).clone()
    }

    /// The ledger totals so far.
    pub fn ledger(&self) -> LedgerTotals {
        *lock(&self.run.records.ledger)
    }

    /// The timeline so far (owned copies).
    pub fn timeline(&self) -> Vec<TimelineEntry> {
        lock(&self.run.records.timeline).clone()
    }

    /// Timeline events of one kind.
    pub fn events_of(&self, kind: &str) -> Vec<TimelineEntry> {
        lock(&self.run.records.timeline)
            .iter()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    }

    /// Ends the run's sessions (HTTP DELETE of each open session; 405 is fine) and closes the
    /// pooled connections.
    pub async fn close(&self) {
        let handles: Vec<SlotHandle> = lock(&self.slots).values().cloned().collect();
        for h in handles {
            h.close().await;
        }
        self.run.net.clear_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_memoized_and_unfilled_slots_are_typed_errors() {
        let ctx = HarnessContext::from_manifest_str(
            r#"{"slotFills":{"kali":"http://127.0.0.1:9"}}"#,
            "run-1",
            Options::default(),
        )
        .unwrap();
        assert_eq!(ctx.run_id(), "run-1");
        let a = ctx.mcp("kali").unwrap();
        let b = ctx.clone().mcp("kali").unwrap();
        assert!(
            Arc::ptr_eq(&a.inner, &b.inner),
            "one handle per slot per run"
        );
        assert_eq!(a.slot(), "kali");
        assert_eq!(a.endpoint(), "http://127.0.0.1:9");
        let e = ctx.mcp("burp").unwrap_err();
        assert_eq!(e.filled, vec!["kali".to_owned()]);
        assert_eq!(ctx.ledger(), LedgerTotals::default());
        assert!(ctx.timeline().is_empty());
        ctx.log("hello");
        assert_eq!(ctx.log_lines(), vec!["hello".to_owned()]);
        let with_secret = HarnessContext::from_manifest_str(
            "{}",
            "r",
            Options {
                secrets: Some(vec!["hunter2-secret".into()]),
                ..Options::default()
            },
        )
        .unwrap();
        with_secret.log("token=hunter2-secret ok");
        assert_eq!(
            with_secret.log_lines(),
            vec!["token=[REDACTED] ok".to_owned()]
        );
        assert_eq!(ctx.options().timeout_ms, 300_000);
    }

    #[test]
    fn bad_manifests_and_roots_are_errors() {
        let o = Options::default;
        assert!(matches!(
            HarnessContext::from_manifest_str("[1]", "r", o()),
            Err(ContextError::Manifest(_))
        ));
        assert!(matches!(
            HarnessContext::from_manifest_str("{", "r", o()),
            Err(ContextError::Manifest(_))
        ));
        assert!(matches!(
            HarnessContext::from_manifest_file("/nonexistent/manifest.json", "r", o()),
            Err(ContextError::Io(_))
        ));
        let bad_root = Options {
            root_certs: vec![RootCert::Der(b"junk".to_vec())],
            ..Options::default()
        };
        assert!(matches!(
            HarnessContext::from_manifest_str("{}", "r", bad_root),
            Err(ContextError::Tls(_))
        ));
    }
}
