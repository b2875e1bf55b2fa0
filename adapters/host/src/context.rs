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
use verifi_mcp_core::harness::slots::Manifest;

use crate::net::{HostNet, Route, TlsConfigError};
use crate::proxy::{EnvProxies, ProxyError, ProxyRule};
use crate::slot::{SlotHandle, SlotSpec};
use crate::trust::{Trust, client_config};

pub use crate::options::{DEFAULT_TIMEOUT_MS, INSECURE_WARNING, Options};
pub use crate::run::{LedgerTotals, SlotNotFilledError, TimelineEntry, env_secrets};
pub(crate) use crate::run::{Records, lock, redact_string};
pub(crate) use crate::run_state::Run;

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
            // Read as bytes (a value that is not UTF-8 is no panic; as a proxy URL it is
            // then refused with the reason).
            None if options.proxy_from_env => {
                EnvProxies::from_vars(std::env::vars_os().map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                }))
                .map(|e| ProxyRule::Env(Arc::new(e)))
            }
            None => Ok(ProxyRule::Direct),
        }
        .map_err(ContextError::Proxy)?;
        let mut secrets = match &options.secrets {
            Some(s) => s.iter().map(|s| s.as_bytes().to_vec()).collect(),
            None => env_secrets(),
        };
        secrets.extend(proxy.secrets().into_iter().map(String::into_bytes));
        crate::run::add_json_forms(&mut secrets);
        let net = HostNet::with_route_traced(
            options.connection_limit,
            Route { proxy, tls },
            options.wire_trace.clone(),
        );
        let records = Records::default();
        if options.insecure {
            lock(&records.log).push(INSECURE_WARNING.to_owned());
        }
        let (trace, warning) = crate::trace::RunTrace::new(
            options.trace_parent.as_deref(),
            options.trace_state.as_deref(),
        );
        lock(&records.log).extend(warning);
        Ok(HarnessContext {
            run: Arc::new(Run {
                run_id: run_id.into(),
                options,
                secrets,
                net,
                records,
                learned: Arc::default(),
                trace,
                server_logs: Default::default(),
            }),
            manifest: Arc::from(text),
            slots: Arc::default(),
        })
    }

    /// A context built in code instead of from a manifest (a manifest stays the other way):
    ///
    /// ```
    /// use std::time::Duration;
    /// use verifi_mcp_host::HarnessContext;
    ///
    /// let ctx = HarnessContext::builder()
    ///     .run_id("run-7")
    ///     .slot("kali", "http://10.0.0.5:8080")
    ///     .fallback("http://10.0.0.6:8080")
    ///     .header("authorization", "Bearer t0ken")
    ///     .timeout(Duration::from_secs(60))
    ///     .build()?;
    /// assert_eq!(ctx.mcp("kali")?.fallback(), Some("http://10.0.0.6:8080"));
    /// assert_eq!(ctx.options().timeout_ms, 60_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder() -> HarnessContextBuilder {
        HarnessContextBuilder::default()
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

    /// The run's trace id (32 lower-case hex digits): every request of the run carries it in
    /// `_meta.traceparent` (W3C trace context, SEP-414). The one of
    /// [`Options::trace_parent`] when given, else a random one made for this context.
    pub fn trace_id(&self) -> String {
        self.run.trace.trace_id_hex()
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
        secrets.extend(
            lock(&self.run.learned)
                .iter()
                .map(|s| s.as_bytes().to_vec()),
        );
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

/// Builds a [`HarnessContext`] in code: [`HarnessContext::builder`]. `fallback` and `header`
/// apply to the slot added last; a mistake (a fallback before any slot, a slot added twice, a
/// bad header) is reported by [`build`](Self::build), not by a panic.
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until build() is called"]
pub struct HarnessContextBuilder {
    run_id: Option<String>,
    slots: Vec<(String, serde_json::Map<String, Value>)>,
    options: Options,
    error: Option<String>,
}

impl HarnessContextBuilder {
    fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }

    /// The run id (the `workspace` of every `run_command`). Default: `run-<pid>-<ms since
    /// 1970>`, unique enough for one machine; a harness should pass the platform's run id.
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// Adds a slot with its primary endpoint (a base URL, as in a manifest's `slotFills`).
    pub fn slot(mut self, name: impl Into<String>, endpoint: impl Into<String>) -> Self {
        let name = name.into();
        if self.slots.iter().any(|(n, _)| *n == name) {
            self.fail(format!("slot '{name}' is added twice"));
        }
        let mut fill = serde_json::Map::new();
        fill.insert("endpoint".into(), Value::String(endpoint.into()));
        self.slots.push((name, fill));
        self
    }

    /// Adds a slot whose primary server is a local process spoken to over stdio: `argv` is
    /// the program and its arguments (as a manifest's `command`). It starts on the slot's
    /// first operation, gets an allow-listed environment ([`crate::stdio::ENV_ALLOW`]) plus
    /// [`env`](Self::env), and ends with [`HarnessContext::close`] (or when dropped).
    pub fn stdio_slot<S: Into<String>>(
        mut self,
        name: impl Into<String>,
        argv: impl IntoIterator<Item = S>,
    ) -> Self {
        let name = name.into();
        if self.slots.iter().any(|(n, _)| *n == name) {
            self.fail(format!("slot '{name}' is added twice"));
        }
        let mut fill = serde_json::Map::new();
        fill.insert("command".into(), argv_value(argv));
        self.slots.push((name, fill));
        self
    }

    /// The fallback of the slot added last is a local process (see
    /// [`stdio_slot`](Self::stdio_slot)).
    pub fn fallback_command<S: Into<String>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        match self.slots.last_mut() {
            Some((_, fill)) => {
                let mut fb = serde_json::Map::new();
                fb.insert("command".into(), argv_value(argv));
                fill.insert("fallback".into(), Value::Object(fb));
            }
            None => self.fail("fallback_command() before any slot()".into()),
        }
        self
    }

    /// A variable for the process of the slot added last (its primary if that is a command,
    /// else its fallback). A value whose name looks like a secret is redacted like one.
    /// Repeatable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self.slots.last_mut().and_then(|(_, f)| command_fill(f)) {
            Some(fill) => {
                let env = fill
                    .entry("env")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Value::Object(e) = env {
                    e.insert(name, Value::String(value));
                }
            }
            None => self.fail(format!("env({name:?}) before any stdio slot")),
        }
        self
    }

    /// The working directory of the process of the slot added last (as for [`env`](Self::env)).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        let dir = dir.into();
        match self.slots.last_mut().and_then(|(_, f)| command_fill(f)) {
            Some(fill) => {
                fill.insert("cwd".into(), Value::String(dir));
            }
            None => self.fail(format!("cwd({dir:?}) before any stdio slot")),
        }
        self
    }

    /// The fallback endpoint of the slot added last.
    pub fn fallback(mut self, endpoint: impl Into<String>) -> Self {
        match self.slots.last_mut() {
            Some((_, fill)) => {
                fill.insert("fallback".into(), Value::String(endpoint.into()));
            }
            None => self.fail("fallback() before any slot()".into()),
        }
        self
    }

    /// A header sent on every request of the slot added last (its value is redacted like a
    /// secret). Repeatable.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        let Some((_, fill)) = self.slots.last_mut() else {
            self.fail(format!("header({name:?}) before any slot()"));
            return self;
        };
        let headers = fill
            .entry("headers")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(h) = headers {
            h.insert(name, Value::String(value));
        }
        self
    }

    /// The per-call timeout (connect, handshake and reply; default 300 s), in whole ms.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Every other option (replaces any set before, the timeout included).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The context, or what was wrong ([`ContextError::Manifest`] for a builder mistake or a
    /// bad endpoint or header, [`ContextError::Tls`] for a bad root).
    pub fn build(self) -> Result<HarnessContext, ContextError> {
        if let Some(e) = self.error {
            return Err(ContextError::Manifest(e));
        }
        let run_id = self.run_id.unwrap_or_else(|| {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            format!("run-{}-{ms}", std::process::id())
        });
        let fills: serde_json::Map<String, Value> = self
            .slots
            .into_iter()
            .map(|(n, f)| (n, Value::Object(f)))
            .collect();
        let mut manifest = serde_json::Map::new();
        manifest.insert("slotFills".into(), Value::Object(fills));
        HarnessContext::from_manifest_value(Value::Object(manifest), run_id, self.options)
    }
}

/// A manifest `command` array.
fn argv_value<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> Value {
    Value::Array(argv.into_iter().map(|a| Value::String(a.into())).collect())
}

/// The fill object that holds a slot's process: the slot's own, or its fallback's.
fn command_fill(
    fill: &mut serde_json::Map<String, Value>,
) -> Option<&mut serde_json::Map<String, Value>> {
    if fill.contains_key("command") {
        return Some(fill);
    }
    match fill.get_mut("fallback") {
        Some(Value::Object(fb)) if fb.contains_key("command") => Some(fb),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::RootCert;
    use crate::trace::WireTrace;
    use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

    #[test]
    fn the_builder_makes_stdio_slots() {
        let ctx = HarnessContext::builder()
            .run_id("r")
            .stdio_slot("nmap", ["uvx", "nmap-mcp"])
            .env("NMAP_TOKEN", "tok-123456")
            .cwd("/tmp")
            .fallback("http://127.0.0.1:9")
            .slot("web", "http://127.0.0.1:9")
            .fallback_command(["web-mcp", "--x"])
            .env("LEVEL", "debug")
            .options(Options::default().secrets(Some(vec![])))
            .build()
            .unwrap();
        let nmap = ctx.mcp("nmap").unwrap();
        assert_eq!(nmap.endpoint(), "stdio:uvx nmap-mcp");
        assert_eq!(nmap.fallback(), Some("http://127.0.0.1:9"));
        let spec = nmap.inner.spec.primary_command.clone().unwrap();
        assert_eq!(spec.env, vec![("NMAP_TOKEN".into(), "tok-123456".into())]);
        assert_eq!(spec.cwd.as_deref(), Some("/tmp"));
        // A secret-named value the slot hands its process is redacted like a run secret.
        assert!(nmap.secrets_now().iter().any(|s| s == b"tok-123456"));
        let web = ctx.mcp("web").unwrap();
        assert_eq!(web.fallback(), Some("stdio:web-mcp --x"));
        let fb = web.inner.spec.fallback_command.clone().unwrap();
        assert_eq!(fb.env, vec![("LEVEL".into(), "debug".into())]);
        assert!(!web.secrets_now().iter().any(|s| s == b"debug"));
        let e = HarnessContext::builder()
            .slot("a", "http://h")
            .env("K", "v")
            .build();
        assert!(e.is_err());
    }

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
            Options::default().secrets(Some(vec!["hunter2-secret".into()])),
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
        let bad_root = Options::default().root_certs(vec![RootCert::Der(b"junk".to_vec())]);
        assert!(matches!(
            HarnessContext::from_manifest_str("{}", "r", bad_root),
            Err(ContextError::Tls(_))
        ));
    }

    #[test]
    fn the_builder_makes_the_same_slots_a_manifest_would() {
        let ctx = HarnessContext::builder()
            .run_id("run-b")
            .slot("kali", "http://127.0.0.1:9")
            .fallback("http://127.0.0.1:10")
            .header("authorization", "Bearer abc-123")
            .header("x-tenant", "t1")
            .slot("recon", "http://127.0.0.1:11/api")
            .timeout(std::time::Duration::from_millis(1500))
            .build()
            .unwrap();
        assert_eq!(ctx.run_id(), "run-b");
        assert_eq!(ctx.options().timeout_ms, 1500);
        let kali = ctx.mcp("kali").unwrap();
        let from_manifest = SlotSpec::resolve(
            r#"{"slotFills":{"kali":{"endpoint":"http://127.0.0.1:9","fallback":"http://127.0.0.1:10","headers":{"authorization":"Bearer abc-123","x-tenant":"t1"}}}}"#,
            "kali",
        )
        .unwrap();
        assert_eq!(kali.inner.spec, from_manifest);
        assert_eq!(ctx.mcp("recon").unwrap().fallback(), None);
        assert_eq!(ctx.mcp("burp").unwrap_err().filled, vec!["kali", "recon"]);
        // A default run id is made when none is given.
        let anon = HarnessContext::builder().build().unwrap();
        assert!(anon.run_id().starts_with("run-"), "{}", anon.run_id());
    }

    #[test]
    fn builder_mistakes_are_errors_at_build() {
        for (b, want) in [
            (
                HarnessContext::builder().fallback("http://a"),
                "fallback() before any slot()",
            ),
            (
                HarnessContext::builder().header("a", "b"),
                "before any slot()",
            ),
            (
                HarnessContext::builder()
                    .slot("k", "http://a")
                    .slot("k", "http://b"),
                "slot 'k' is added twice",
            ),
        ] {
            match b.build() {
                Err(ContextError::Manifest(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("expected a builder error, got {other:?}"),
            }
        }
    }

    #[test]
    fn setters_set_their_field() {
        let o = Options::default()
            .timeout_ms(1)
            .connection_limit(2)
            .secrets(Some(vec!["s".into()]))
            .progress_extends_to_ms(Some(3))
            .reply_cap(4)
            .keep_raw(true)
            .protocol_version(ProtocolVersion::ALL[0])
            .exact_mcp_urls(true)
            .wire_trace(Some(WireTrace::new(|_| {})));
        assert_eq!(o.timeout_ms, 1);
        assert_eq!(o.connection_limit, 2);
        assert_eq!(o.secrets, Some(vec!["s".to_owned()]));
        assert_eq!(o.progress_extends_to_ms, Some(3));
        assert_eq!(o.reply_cap, 4);
        assert!(o.keep_raw && o.exact_mcp_urls && o.wire_trace.is_some());
        assert_eq!(o.protocol_version, ProtocolVersion::ALL[0]);
    }
}
