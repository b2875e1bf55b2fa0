//! Shared by the interop, fault and soak tests: the peer servers (official TypeScript and
//! Python SDK servers of ours as child processes, the rmcp kit in-process), a context builder,
//! and small assertion helpers.
//!
//! Owns: starting a peer (with a startup deadline, its port read from stdout, killed on drop),
//! the missing-peer policy (`VERIFI_REQUIRE_PEERS`, `VERIFI_ALLOW_NO_PEERS`), and reading what a
//! peer has seen (`peer_stats`).

#![allow(dead_code)] // each test file uses its own part of this module

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use verifi_mcp_host::{HarnessContext, Options, SlotHandle};
use verifi_mcp_tests::{Mode, TestServer};

/// How long a peer process may take to print its port.
pub const PEER_STARTUP: Duration = Duration::from_secs(30);

/// Every server a test list runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// TypeScript SDK, sessions, SSE replies.
    TsStateful,
    /// TypeScript SDK, sessions, `application/json` replies (`enableJsonResponse`).
    TsJson,
    /// Python SDK (MCPServer, formerly FastMCP), sessions, SSE replies.
    PyStateful,
    /// Python SDK, `stateless_http=True`, SSE replies.
    PyStateless,
    /// Python SDK, sessions, `json_response=True`.
    PyJson,
    /// Python SDK, `stateless_http=True` and `json_response=True`.
    PyStatelessJson,
    /// The rmcp kit, sessions, SSE with a priming event.
    RmcpStateful,
    /// The rmcp kit, no sessions, SSE.
    RmcpStateless,
    /// The rmcp kit, no sessions, JSON replies.
    RmcpJson,
}

/// Which SDK a peer is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `@modelcontextprotocol/sdk`.
    Ts,
    /// `mcp` (Python).
    Py,
    /// `rmcp`.
    Rmcp,
}

impl PeerKind {
    /// The SDK behind it.
    pub fn sdk(self) -> Sdk {
        match self {
            PeerKind::TsStateful | PeerKind::TsJson => Sdk::Ts,
            PeerKind::PyStateful
            | PeerKind::PyStateless
            | PeerKind::PyJson
            | PeerKind::PyStatelessJson => Sdk::Py,
            _ => Sdk::Rmcp,
        }
    }
    /// The server keeps sessions (`mcp-session-id`).
    pub fn stateful(self) -> bool {
        matches!(
            self,
            PeerKind::TsStateful
                | PeerKind::TsJson
                | PeerKind::PyStateful
                | PeerKind::PyJson
                | PeerKind::RmcpStateful
        )
    }
    /// Replies are `application/json` (TS and Python then drop progress notifications).
    /// The era a client in `auto` speaks to this peer: the Python SDK 2.3 and rmcp 3.11 are
    /// dual-era (2026-07-28 first), the TypeScript SDK 1.32 stops at 2025-11-25.
    pub fn modern(self) -> bool {
        self.sdk() != Sdk::Ts
    }

    /// The era named on the timeline's `mcp.era` event for this peer.
    pub fn era_name(self) -> &'static str {
        if self.modern() {
            "2026-07-28"
        } else {
            "legacy"
        }
    }

    /// Replies come as a JSON body: the JSON modes, and the Python SDK in the 2026 era (it
    /// answers every 2026 request with `application/json`, even in its SSE modes).
    pub fn json_bodies(self) -> bool {
        self.json_replies() || (self.modern() && self.sdk() == Sdk::Py)
    }

    pub fn json_replies(self) -> bool {
        matches!(
            self,
            PeerKind::TsJson | PeerKind::PyJson | PeerKind::PyStatelessJson | PeerKind::RmcpJson
        )
    }
    fn mode_arg(self) -> &'static str {
        match self {
            PeerKind::TsStateful | PeerKind::PyStateful | PeerKind::RmcpStateful => "stateful",
            PeerKind::TsJson | PeerKind::PyJson | PeerKind::RmcpJson => "json",
            PeerKind::PyStateless | PeerKind::RmcpStateless => "stateless",
            PeerKind::PyStatelessJson => "stateless-json",
        }
    }
}

/// The workspace root (the tests crate's parent).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

pub fn ts_dir() -> PathBuf {
    workspace_root().join("tests/peers/ts")
}

pub fn py_venv() -> PathBuf {
    std::env::var_os("VERIFI_PEERS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/peers/venv"))
}

/// Why an SDK's peer cannot run here, if it cannot.
pub fn missing(sdk: Sdk) -> Option<String> {
    match sdk {
        Sdk::Rmcp => None,
        Sdk::Ts => {
            let sdk_pkg = ts_dir().join("node_modules/@modelcontextprotocol/sdk/package.json");
            if !sdk_pkg.exists() {
                return Some(format!("{} is missing", sdk_pkg.display()));
            }
            match Command::new("node").arg("--version").output() {
                Ok(o) if o.status.success() => None,
                _ => Some("node is not on PATH".into()),
            }
        }
        Sdk::Py => {
            let python = py_venv().join("bin/python");
            if python.exists() {
                None
            } else {
                Some(format!("{} is missing", python.display()))
            }
        }
    }
}

/// Why the official `everything` server cannot run here, if it cannot (its package, pinned in
/// `tests/peers/ts/package.json`, is installed by `scripts/peers.sh`).
pub fn everything_missing() -> Option<String> {
    missing(Sdk::Ts).or_else(|| {
        let main = everything_main();
        (!main.exists()).then(|| format!("{} is missing", main.display()))
    })
}

/// The official `everything` server's entry point (`… stdio` runs it over stdio).
pub fn everything_main() -> PathBuf {
    ts_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// What to do when a peer is not installed: `true` = the caller returns early (loudly), only
/// when `VERIFI_ALLOW_NO_PEERS=1` and not `VERIFI_REQUIRE_PEERS=1`; otherwise this panics, so
/// the test fails and says what to run.
pub fn peer_unavailable(kind: PeerKind) -> bool {
    let Some(why) = missing(kind.sdk()) else {
        return false;
    };
    let flag = |n: &str| std::env::var(n).is_ok_and(|v| v == "1");
    let msg = format!(
        "interop peer {kind:?} is not installed ({why}): run scripts/peers.sh \
         (VERIFI_ALLOW_NO_PEERS=1 turns this failure into a printed skip)"
    );
    if flag("VERIFI_REQUIRE_PEERS") || !flag("VERIFI_ALLOW_NO_PEERS") {
        panic!("{msg}");
    }
    eprintln!("NOT RUN (VERIFI_ALLOW_NO_PEERS=1): {msg}");
    true
}

/// A running peer server. Dropping it kills the child process (or stops the rmcp server).
pub struct Peer {
    /// Which server.
    pub kind: PeerKind,
    base_url: String,
    child: Option<Child>,
    rmcp: Option<TestServer>,
    stderr_tail: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Peer {
    /// Starts the FastMCP tasks peer (`tests/peers/py/tasks_server.py`: the tasks extension in
    /// memory) on 127.0.0.1. Its `kind` is the SDK it runs on.
    #[allow(dead_code)]
    pub fn start_tasks() -> Peer {
        let script = workspace_root().join("tests/peers/py/tasks_server.py");
        Peer::spawn(
            PeerKind::PyStateful,
            py_venv().join("bin/python"),
            vec![script.display().to_string(), "0".into()],
            workspace_root(),
        )
    }

    /// Starts the official `everything` test server (`tests/peers/ts/everything.mjs`, on the
    /// TypeScript SDK 1.32: old era only, stateful, SSE replies with event ids) on 127.0.0.1.
    #[allow(dead_code)]
    pub fn start_everything() -> Peer {
        if let Some(why) = everything_missing() {
            panic!("{why}: run scripts/peers.sh");
        }
        Peer::spawn(
            PeerKind::TsStateful,
            PathBuf::from("node"),
            vec!["everything.mjs".into()],
            ts_dir(),
        )
    }

    /// Starts `kind` on 127.0.0.1 (a free port). Panics (the test fails) with the reason when it
    /// cannot; callers check [`peer_unavailable`] first.
    pub fn start(kind: PeerKind) -> Peer {
        let (program, args, dir): (PathBuf, Vec<String>, PathBuf) = match kind.sdk() {
            Sdk::Rmcp => {
                let mode = Mode::parse(kind.mode_arg()).expect("rmcp mode");
                let server = TestServer::start(mode).expect("start the rmcp test server");
                return Peer {
                    kind,
                    base_url: server.base_url(),
                    child: None,
                    rmcp: Some(server),
                    stderr_tail: None,
                };
            }
            Sdk::Ts => (
                PathBuf::from("node"),
                vec!["server.mjs".into(), kind.mode_arg().into(), "0".into()],
                ts_dir(),
            ),
            Sdk::Py => (
                py_venv().join("bin/python"),
                vec![
                    workspace_root()
                        .join("tests/peers/py/server.py")
                        .display()
                        .to_string(),
                    kind.mode_arg().into(),
                    "0".into(),
                ],
                workspace_root(),
            ),
        };
        Peer::spawn(kind, program, args, dir)
    }

    fn spawn(kind: PeerKind, program: PathBuf, args: Vec<String>, dir: PathBuf) -> Peer {
        let mut child = Command::new(&program)
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {kind:?} ({}): {e}; run scripts/peers.sh",
                    program.display()
                )
            });
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut reader = BufReader::new(stdout);
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining so the child never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        // The last few KiB of stderr, for the failure message.
        let stderr_tail = std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut r = BufReader::new(stderr);
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut r, &mut buf) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 8192 {
                    tail.drain(..tail.len() - 8192);
                }
            }
            String::from_utf8_lossy(&tail).into_owned()
        });
        let mut peer = Peer {
            kind,
            base_url: String::new(),
            child: Some(child),
            rmcp: None,
            stderr_tail: Some(stderr_tail),
        };
        let port: u16 = match rx.recv_timeout(PEER_STARTUP) {
            Ok(line) => match line.trim().parse() {
                Ok(p) => p,
                Err(_) => {
                    let err = peer.kill_and_stderr();
                    panic!("{kind:?} printed {line:?} instead of its port; stderr:\n{err}")
                }
            },
            Err(_) => {
                let err = peer.kill_and_stderr();
                panic!("{kind:?} did not print its port within {PEER_STARTUP:?}; stderr:\n{err}")
            }
        };
        peer.base_url = format!("http://127.0.0.1:{port}");
        peer
    }

    fn kill_and_stderr(&mut self) -> String {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stderr_tail
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT` (MCP is at `/mcp` below it).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The in-process rmcp server, for rmcp peers.
    pub fn rmcp(&self) -> Option<&TestServer> {
        self.rmcp.as_ref()
    }

    /// Kills the peer now (a server that goes away mid-run).
    pub fn kill(&mut self) {
        if let Some(s) = &self.rmcp {
            s.stop();
        }
        let _ = self.kill_and_stderr();
    }
}

/// What a peer has seen, the same counters for every SDK.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerStats {
    /// `initialize` requests received.
    pub initializes: u64,
    /// TCP connections accepted.
    pub connections: u64,
    /// `slow` calls that stopped before their end.
    pub slow_interrupted: u64,
    /// `slow` calls that ran to their end.
    pub slow_completed: u64,
    /// Progress notifications sent.
    pub progress_sent: u64,
}

/// Reads a peer's counters: the rmcp kit's `Stats`, or the `peer_stats` tool of our TS and
/// Python servers called through `slot` (so it adds no handshake of its own).
pub async fn peer_stats(peer: &Peer, slot: &SlotHandle) -> PeerStats {
    if let Some(s) = peer.rmcp() {
        let st = s.stats();
        return PeerStats {
            initializes: st.initializes(),
            connections: st.connections(),
            slow_interrupted: st.slow_interrupted(),
            slow_completed: st.slow_completed(),
            progress_sent: st.progress_sent(),
        };
    }
    let r = slot.call("peer_stats", json!({})).await;
    assert!(r.ok(), "peer_stats failed on {:?}: {r:?}", peer.kind);
    let v: Value = serde_json::from_str(&r.text).expect("peer_stats is JSON");
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(u64::MAX);
    PeerStats {
        initializes: n("initializes"),
        connections: n("connections"),
        slow_interrupted: n("slow_interrupted"),
        slow_completed: n("slow_completed"),
        progress_sent: n("progress_sent"),
    }
}

/// A context whose slot `kali` is `base_url`, with `opts` (secrets empty unless given).
pub fn context(base_url: &str, run_id: &str, opts: Options) -> HarnessContext {
    context_with(json!({ "slotFills": { "kali": base_url } }), run_id, opts)
}

/// A context from a manifest value.
pub fn context_with(manifest: Value, run_id: &str, mut opts: Options) -> HarnessContext {
    if opts.secrets.is_none() {
        opts.secrets = Some(Vec::new());
    }
    HarnessContext::from_manifest_value(manifest, run_id, opts).expect("context builds")
}

/// The timeline without its `mcp.era` entries (what failures and failovers put there).
#[allow(dead_code)]
pub fn failure_events(ctx: &HarnessContext) -> Vec<verifi_mcp_host::TimelineEntry> {
    ctx.timeline()
        .into_iter()
        .filter(|e| e.kind != "mcp.era")
        .collect()
}

/// Options with a per-call timeout.
pub fn with_timeout(ms: u64) -> Options {
    Options::default().timeout_ms(ms)
}

/// Runs `fut` on smol, failing the test if it takes longer than `bound` (nothing hangs).
pub fn run_bounded<T>(bound: Duration, fut: impl std::future::Future<Output = T>) -> T {
    smol::block_on(async {
        let timer = async {
            async_io_timer(bound).await;
            None
        };
        match futures_or(async { Some(fut.await) }, timer).await {
            Some(v) => v,
            None => panic!("did not settle within {bound:?}"),
        }
    })
}

async fn async_io_timer(d: Duration) {
    smol::Timer::after(d).await;
}

async fn futures_or<T>(
    a: impl std::future::Future<Output = T>,
    b: impl std::future::Future<Output = T>,
) -> T {
    smol::future::or(a, b).await
}

/// Measures how long `fut` takes.
pub async fn timed<T>(fut: impl std::future::Future<Output = T>) -> (T, Duration) {
    let t0 = Instant::now();
    let v = fut.await;
    (v, t0.elapsed())
}

/// Waits (polling, bounded) until `pred` holds; returns whether it did.
pub async fn eventually(within: Duration, mut pred: impl AsyncFnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if pred().await {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        smol::Timer::after(Duration::from_millis(20)).await;
    }
}

// ---- the peer check lists ------------------------------------------------------------------

/// One check of a peer's check list.
pub type Check = fn(&Peer);

/// The most any single check may take (a hang fails the check, not the whole run).
pub const CHECK_BOUND: Duration = Duration::from_secs(60);

/// Starts the peer `kind` (unless it is allowed to be missing) and runs every check on it; a
/// failing check is reported with the others' results, not alone.
pub fn run_checks(kind: PeerKind, checks: &[(&str, Check)]) {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    if peer_unavailable(kind) {
        return;
    }
    let peer = Peer::start(kind);
    let mut failed = Vec::new();
    for (name, check) in checks {
        eprintln!("[{kind:?}] {name} ...");
        match catch_unwind(AssertUnwindSafe(|| check(&peer))) {
            Ok(()) => eprintln!("[{kind:?}] {name} ok"),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                eprintln!("[{kind:?}] {name} FAILED: {msg}");
                failed.push(format!("{name}: {msg}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{kind:?}: {} of {} checks failed:\n{}",
        failed.len(),
        checks.len(),
        failed.join("\n")
    );
}

// ---- the `mcp` command line ----------------------------------------------------------------

/// The `mcp` binary of this build, next to this test's executable (`cargo test --workspace`
/// builds it); a missing one fails the test and says what to build.
pub fn mcp_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("mcp");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p verifi-mcp-examples --bin mcp` \
         (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

/// A `Command` for `mcp` that keeps tokens in memory: a test never reads or writes the
/// logins in the home of whoever runs it. Every test that runs `mcp` starts from this.
#[allow(dead_code)]
pub fn mcp_command() -> Command {
    let mut cmd = Command::new(mcp_bin());
    cmd.env("MCP_TOKEN_STORE", "memory");
    cmd
}

/// `mcp ARGS…`: its exit code and its JSON result (the test fails if stdout is not JSON).
#[allow(dead_code)]
pub fn mcp_json(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = mcp_command().args(args).output().expect("run mcp");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code(), v)
}

/// Runs `mcp ARGS…` with `env`, after clearing the variables it reads for itself (proxies,
/// OAuth, the missing-peer policy) and keeping tokens in memory; killed with a failure if it
/// overruns `bound`.
pub fn run_mcp(args: &[&str], env: &[(&str, &str)], bound: Duration) -> std::process::Output {
    let mut cmd = mcp_command();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
        "MCP_CLIENT_ID",
        "MCP_CLIENT_SECRET",
        "MCP_BEARER_TOKEN",
        "VERIFI_ALLOW_NO_PEERS",
    ] {
        cmd.env_remove(v);
    }
    // Tokens in memory (from `mcp_command`) unless `env` says otherwise.
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn mcp");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait mcp").is_some() {
            return child.wait_with_output().expect("mcp output");
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            let out = child.wait_with_output().expect("mcp output");
            panic!(
                "mcp {args:?} did not finish within {bound:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one JSON result on `out`'s stdout.
pub fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON result ({e}): {:?}, stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// One `#[test]` per peer server mode, each calling `$run(PeerKind::…)`.
#[macro_export]
macro_rules! peer_tests {
    ($run:ident) => {
        #[test]
        fn ts_stateful() {
            $run(PeerKind::TsStateful);
        }
        #[test]
        fn ts_json() {
            $run(PeerKind::TsJson);
        }
        #[test]
        fn py_stateful() {
            $run(PeerKind::PyStateful);
        }
        #[test]
        fn py_stateless() {
            $run(PeerKind::PyStateless);
        }
        #[test]
        fn py_json() {
            $run(PeerKind::PyJson);
        }
        #[test]
        fn py_stateless_json() {
            $run(PeerKind::PyStatelessJson);
        }
        #[test]
        fn rmcp_stateful() {
            $run(PeerKind::RmcpStateful);
        }
        #[test]
        fn rmcp_stateless() {
            $run(PeerKind::RmcpStateless);
        }
        #[test]
        fn rmcp_json() {
            $run(PeerKind::RmcpJson);
        }
    };
}
