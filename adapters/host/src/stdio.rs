//! `stdio`: MCP servers that are local processes, spoken to in newline-delimited JSON-RPC on
//! their stdin and stdout, through the same call machine as HTTP (one transport more).
//!
//! A slot's stdio server is one child process for the run, started on the first operation and
//! shared by all: each operation gets a virtual connection ([`StdioConn`]) whose writes are
//! whole lines to the child and whose reads are the lines routed to it by JSON-RPC id (a
//! response, and `notifications/progress` whose `progressToken` is that id). A message with a
//! `method` is the server's request or notification, whatever its id; the server's requests
//! are answered here (`ping`: an empty result; anything else: a JSON-RPC error) so the server
//! never waits on us. Its stderr is drained (the last lines kept, for errors).
//!
//! A line that is not JSON-RPC (not JSON, or JSON that is neither a request, a notification
//! nor a response: a log line a server prints on stdout) is skipped, as the official SDK
//! clients skip it: it is shown in a wire trace ([`WireEvent::Skipped`], `mcp -v`), and the
//! last [`SKIPPED_LINES`] of them are quoted (each cut to [`SKIPPED_LINE_BYTES`]) in the error
//! of an operation that then fails without an answer. A child that exits, closes its stdout,
//! or writes a line over the cap is an unreachable server at once: every operation waiting on
//! it ends, and the slot's error says what happened (`exit status: N` and its last stderr
//! lines).
//!
//! The child's environment is an allow-list ([`ENV_ALLOW`]) plus the slot's `env`; nothing
//! else of ours (secrets included) reaches it. It runs in its own process group, so closing it
//! also ends what it started: the slot's `close()` closes its stdin, waits a grace period,
//! then sends SIGTERM, waits again, then SIGKILL, and reaps it. Dropping a running server
//! kills its group at once.
//!
//! Owns: processes, pipes, routing lines. Does not own any protocol decision (the core's).

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use verifi_mcp_core::drive::{Millis, Net, TailDrain};
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind};
use verifi_mcp_core::wire::json::{JsonLimits, Kind, Value};

use crate::buf::VecBuf;
use crate::elicit::OnElicit;
use crate::net::{Conn, RoutedNet};
use crate::run::lock;
use crate::trace::{WireEvent, WireTrace};
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::machine::Elicitation;

/// The variables of our environment a child gets (when we have them): what programs need to
/// run (find executables, a home, a locale, a temp directory), nothing that carries secrets.
/// The slot's `env` is added on top.
pub const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    // Windows needs these to start most programs.
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
];

/// How long a closed child may take to exit after its stdin closed, and again after SIGTERM.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);
/// Lines of the child's stderr kept for errors.
const STDERR_LINES: usize = 8;
/// Bytes of one stderr line kept (the rest of the line is read and dropped).
const STDERR_LINE_BYTES: usize = 512;
/// Lines written to the child that may wait for its stdin at once.
const WRITE_QUEUE: usize = 64;
/// Lines routed to one operation that may wait for it to read them: past this, the oldest
/// progress notification is dropped (a response always gets in), so a server that floods
/// progress cannot grow memory without bound.
const MAILBOX: usize = 256;
/// How long the reader waits for an exiting child's status and its last stderr lines.
const EXIT_WAIT: Duration = Duration::from_millis(1_500);
/// Skipped stdout lines (not JSON-RPC) kept for errors: the last ones.
pub const SKIPPED_LINES: usize = 3;
/// Bytes of one skipped line kept for errors (the rest is left out, saying so).
pub const SKIPPED_LINE_BYTES: usize = 200;

/// What starts a stdio server: the program and its arguments, extra environment, directory.
#[derive(Clone, PartialEq, Eq)]
pub struct StdioSpec {
    /// The program and its arguments (at least the program).
    pub argv: Vec<String>,
    /// Variables added to the allow-listed environment (values may be secrets).
    pub env: Vec<(String, String)>,
    /// The working directory, if not ours.
    pub cwd: Option<String>,
}

impl std::fmt::Debug for StdioSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSpec")
            .field("argv", &self.argv)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl StdioSpec {
    /// A spec from a shell-like command line: words split on whitespace, `'…'` and `"…"`
    /// quote (no expansion, no escapes beyond `\` before a quote or space in `"…"`/bare text).
    pub fn parse_command_line(line: &str) -> Result<StdioSpec, String> {
        let mut argv = Vec::new();
        let mut word = String::new();
        let (mut in_word, mut quote) = (false, None::<char>);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') | (None, '\\') => match chars.next() {
                    Some(n) => word.push(n),
                    None => word.push('\\'),
                },
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    in_word = true;
                }
                (None, c) if c.is_whitespace() => {
                    if in_word {
                        argv.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                (None, c) => {
                    word.push(c);
                    in_word = true;
                }
            }
            if quote.is_some() {
                in_word = true;
            }
        }
        if quote.is_some() {
            return Err(format!("unclosed quote in command {line:?}"));
        }
        if in_word {
            argv.push(word);
        }
        if argv.is_empty() {
            return Err("empty command".into());
        }
        Ok(StdioSpec {
            argv,
            env: Vec::new(),
            cwd: None,
        })
    }

    /// `stdio:` and the command line, for events and messages.
    pub fn label(&self) -> String {
        format!("stdio:{}", self.argv.join(" "))
    }
}

/// One stdio server of a slot: its child, started lazily and kept for the run.
pub(crate) struct StdioServer {
    spec: StdioSpec,
    /// The longest line the child may write.
    line_cap: usize,
    grace: Duration,
    child: Mutex<Option<Arc<Running>>>,
    /// How the child's elicitations are answered.
    elicit: Elicit,
}

/// The largest elicitation answer written back to a stdio server (a larger one is a decline).
const ELICIT_ANSWER_CAP: usize = 64 * 1024;

/// Where a running child's output goes.
#[derive(Default)]
struct Routes {
    /// Request id → the connection waiting for its response (and progress).
    waiting: HashMap<u64, async_channel::Sender<Vec<u8>>>,
    /// Set once the child is unusable: what happened (before stderr and status are added).
    gone: Option<String>,
}

/// A started child.
struct Running {
    process: Mutex<Child>,
    pid: i32,
    /// Lines to its stdin; `None` once its stdin is closed.
    writer: Mutex<Option<async_channel::Sender<Vec<u8>>>>,
    routes: Mutex<Routes>,
    stderr: Mutex<VecDeque<String>>,
    stderr_done: AtomicBool,
    /// The exit status, once reaped.
    status: Mutex<Option<ExitStatus>>,
    /// How its elicitations are answered (the slot's policy and handler).
    elicit: Elicit,
    /// The lines of its stdout that were skipped (not JSON-RPC).
    skipped: Mutex<Skipped>,
    /// The wire observer, when the context traces (for the skipped lines).
    trace: Option<WireTrace>,
}

/// How many stdout lines were skipped, and the last few (cut), for errors.
#[derive(Default)]
struct Skipped {
    count: u64,
    last: VecDeque<String>,
}

/// A slot's elicitation policy and handler, for the requests a stdio server sends.
pub(crate) type Elicit = (Option<Elicitation>, Option<OnElicit>);

impl Running {
    fn try_status(&self) -> Option<ExitStatus> {
        let mut status = lock(&self.status);
        if status.is_none() {
            *status = lock(&self.process).try_wait().ok().flatten();
        }
        *status
    }

    /// SIGTERM (`kill: false`) or SIGKILL to the child's process group: the child and what it
    /// started (npx, uvx run a second process), also when the child itself already exited and
    /// left them (a group's id is not reused while any member lives). Elsewhere than Unix, a
    /// kill of the child.
    fn signal(&self, kill: bool) {
        #[cfg(unix)]
        {
            use rustix::process::{Pid, Signal, kill_process, kill_process_group};
            let sig = if kill { Signal::KILL } else { Signal::TERM };
            if let Some(pid) = Pid::from_raw(self.pid)
                && kill_process_group(pid, sig).is_err()
                // Only a child not yet reaped: its pid cannot have been reused.
                && self.try_status().is_none()
            {
                let _ = kill_process(pid, sig);
            }
        }
        #[cfg(not(unix))]
        if kill && self.try_status().is_none() {
            let _ = lock(&self.process).kill();
        }
    }

    /// Marks the child unusable (the first reason wins) and ends every waiting read.
    fn fail(&self, why: String) {
        let mut routes = lock(&self.routes);
        routes.gone.get_or_insert(why);
        routes.waiting.clear();
    }

    /// What happened to the child (with its exit status and last stderr lines), and the
    /// stdout lines it skipped: `None` while it runs and nothing was skipped.
    fn note(&self) -> Option<String> {
        let gone = lock(&self.routes).gone.clone();
        let skipped = self.skipped_note();
        let mut out = match (gone, skipped) {
            (None, None) => return None,
            (None, Some(skipped)) => return Some(skipped),
            (Some(why), _) => why,
        };
        if let Some(status) = self.try_status() {
            out.push_str(&format!(" ({status})"));
        }
        let tail = lock(&self.stderr);
        if !tail.is_empty() {
            out.push_str("; its stderr ends: ");
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            out.push_str(&lines.join(" | "));
        }
        if let Some(skipped) = self.skipped_note() {
            out.push_str("; ");
            out.push_str(&skipped);
        }
        Some(out)
    }

    /// `it wrote N lines that are not JSON-RPC (skipped), the last: "…" | "…"`.
    fn skipped_note(&self) -> Option<String> {
        let skipped = lock(&self.skipped);
        if skipped.count == 0 {
            return None;
        }
        let lines: Vec<String> = skipped.last.iter().map(|l| format!("{l:?}")).collect();
        let (n, s) = (skipped.count, if skipped.count == 1 { "" } else { "s" });
        let which = if skipped.count as usize > skipped.last.len() {
            "the last: "
        } else {
            ""
        };
        Some(format!(
            "it wrote {n} line{s} that {} not JSON-RPC (skipped), {which}{}",
            if n == 1 { "is" } else { "are" },
            lines.join(" | ")
        ))
    }

    /// Skips one line of stdout that is not JSON-RPC: traced, counted, kept (cut) for errors.
    fn skip(&self, line: &[u8]) {
        if let Some(t) = &self.trace {
            t.emit(&WireEvent::Skipped { bytes: line });
        }
        let mut shown =
            String::from_utf8_lossy(line.get(..SKIPPED_LINE_BYTES).unwrap_or(line)).into_owned();
        if line.len() > SKIPPED_LINE_BYTES {
            // A cut inside a character leaves a replacement character: dropped.
            shown = shown.trim_end_matches('\u{fffd}').to_owned();
            shown.push_str(&format!(
                "… ({} more bytes)",
                line.len() - SKIPPED_LINE_BYTES
            ));
        }
        let mut skipped = lock(&self.skipped);
        skipped.count = skipped.count.saturating_add(1);
        if skipped.last.len() == SKIPPED_LINES {
            skipped.last.pop_front();
        }
        skipped.last.push_back(shown);
    }
}

impl StdioServer {
    pub(crate) fn new(spec: StdioSpec, line_cap: usize, elicit: Elicit) -> Self {
        StdioServer {
            spec,
            line_cap,
            elicit,
            grace: DEFAULT_GRACE,
            child: Mutex::new(None),
        }
    }

    /// The spec it runs.
    pub(crate) fn spec(&self) -> &StdioSpec {
        &self.spec
    }

    /// What happened to the child, if it is no longer usable: `the server process … exited
    /// (exit status: 1); its stderr ends: …` (not redacted: the caller redacts).
    pub(crate) fn note(&self) -> Option<String> {
        let note = lock(&self.child).as_ref()?.note()?;
        Some(format!("{note}{}", self.env_note()))
    }

    /// `; its environment adds A, B` when the spec sets variables (names only: values may
    /// be secrets), so a failing server's error says what it was given.
    fn env_note(&self) -> String {
        if self.spec.env.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.spec.env.iter().map(|(k, _)| k.as_str()).collect();
        format!(
            "; its environment adds {} to the allow-list",
            names.join(", ")
        )
    }

    /// The child's process id, while one runs (tests check it is gone after close).
    pub(crate) fn pid(&self) -> Option<u32> {
        let child = lock(&self.child);
        let r = child.as_ref()?;
        r.try_status().is_none().then_some(r.pid as u32)
    }

    /// A virtual connection to the child, starting it if none runs yet. A child that is no
    /// longer usable is not restarted: its server is unreachable for the run (until close).
    // The error is the `Net::connect` error it becomes, returned once per operation.
    #[allow(clippy::result_large_err)]
    pub(crate) fn connect(
        &self,
        trace: impl FnOnce(&str) -> Option<(WireTrace, u64)>,
    ) -> Result<StdioConn, ConnectError> {
        let trace = trace(&self.spec.label());
        let running = {
            let mut child = lock(&self.child);
            match child.as_ref() {
                Some(r) => r.clone(),
                None => {
                    let r = self.start(trace.as_ref().map(|(t, _)| t.clone()))?;
                    *child = Some(r.clone());
                    r
                }
            }
        };
        if lock(&running.routes).gone.is_some() {
            return Err(ConnectError::new(ConnectErrorKind::Process, "it stopped"));
        }
        let (tx, rx) = async_channel::bounded(MAILBOX);
        Ok(StdioConn {
            trace,
            running,
            tx: Some(tx),
            rx,
            out: Vec::new(),
            pending: Vec::new(),
            at: 0,
            ids: Vec::new(),
        })
    }

    #[allow(clippy::result_large_err)] // as `connect`
    fn start(&self, trace: Option<WireTrace>) -> Result<Arc<Running>, ConnectError> {
        let program = self.spec.argv.first().map(String::as_str).unwrap_or("");
        let mut cmd = Command::new(program);
        cmd.args(self.spec.argv.iter().skip(1))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in ENV_ALLOW {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        cmd.envs(self.spec.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.spec.cwd {
            cmd.current_dir(dir);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| {
            let place = match &self.spec.cwd {
                Some(dir) => format!(" in {dir:?}"),
                None => String::new(),
            };
            ConnectError::new(
                ConnectErrorKind::Process,
                &format!("cannot start {program:?}{place}: {e}{}", self.env_note()),
            )
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ConnectError::new(ConnectErrorKind::Process, "no pipes"));
        };
        let (wtx, wrx) = async_channel::bounded(WRITE_QUEUE);
        let running = Arc::new(Running {
            pid: i32::try_from(child.id()).unwrap_or(0),
            process: Mutex::new(child),
            writer: Mutex::new(Some(wtx)),
            routes: Mutex::new(Routes::default()),
            stderr: Mutex::new(VecDeque::new()),
            stderr_done: AtomicBool::new(false),
            status: Mutex::new(None),
            elicit: self.elicit.clone(),
            skipped: Mutex::new(Skipped::default()),
            trace,
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map(drop)
        };
        let started = spawn("mcp-stdio-write", Box::new(move || write_loop(stdin, wrx)))
            .and_then(|()| {
                let r = running.clone();
                spawn(
                    "mcp-stdio-stderr",
                    Box::new(move || stderr_loop(stderr, &r)),
                )
            })
            .and_then(|()| {
                let (r, cap) = (running.clone(), self.line_cap);
                spawn(
                    "mcp-stdio-read",
                    Box::new(move || read_loop(stdout, &r, cap)),
                )
            });
        if let Err(e) = started {
            kill_now(&running);
            return Err(ConnectError::new(
                ConnectErrorKind::Process,
                &format!("cannot start its reader: {e}"),
            ));
        }
        Ok(running)
    }

    /// Ends the child: stdin closed, the grace period, SIGTERM, the grace period again,
    /// SIGKILL; reaped. The next operation would start a new one.
    pub(crate) async fn close(&self) {
        let Some(running) = lock(&self.child).take() else {
            return;
        };
        running.fail("the server process was closed".into());
        lock(&running.writer).take();
        if !wait_exit(&running, self.grace).await {
            running.signal(false);
            wait_exit(&running, self.grace).await;
        }
        // SIGKILL to whatever is left of its group (the child, or what it started and left).
        kill_now(&running);
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        if let Some(running) = lock(&self.child).take() {
            kill_now(&running);
        }
    }
}

/// SIGKILL to the group, then reaped (quick once killed).
fn kill_now(running: &Running) {
    running.signal(true);
    let deadline = Instant::now() + Duration::from_secs(2);
    while running.try_status().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True once the child has exited (within `grace`).
async fn wait_exit(running: &Running, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if running.try_status().is_some() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        async_io::Timer::after(Duration::from_millis(20)).await;
    }
}

fn write_loop(mut stdin: ChildStdin, lines: async_channel::Receiver<Vec<u8>>) {
    while let Ok(line) = lines.recv_blocking() {
        if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
            break;
        }
    }
    // Dropping stdin closes it: the child sees the end of its input.
}

fn stderr_loop(stderr: std::process::ChildStderr, running: &Running) {
    let mut r = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        let (done, used) = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    keep_some(&mut line, buf.get(..i).unwrap_or(&[]));
                    (true, i + 1)
                }
                None => {
                    keep_some(&mut line, buf);
                    (false, buf.len())
                }
            },
        };
        r.consume(used);
        if done {
            push_stderr(running, &line);
            line.clear();
        }
    }
    if !line.is_empty() {
        push_stderr(running, &line);
    }
    running.stderr_done.store(true, Ordering::Release);
}

fn keep_some(line: &mut Vec<u8>, bytes: &[u8]) {
    let room = STDERR_LINE_BYTES.saturating_sub(line.len());
    line.extend_from_slice(bytes.get(..room.min(bytes.len())).unwrap_or(&[]));
}

fn push_stderr(running: &Running, line: &[u8]) {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    if text.is_empty() {
        return;
    }
    let mut tail = lock(&running.stderr);
    if tail.len() == STDERR_LINES {
        tail.pop_front();
    }
    tail.push_back(text);
}

/// Reads the child's stdout line by line (each at most `cap` bytes) and routes each line.
fn read_loop(stdout: std::process::ChildStdout, running: &Running, cap: usize) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    // A line in the making, as the reads brought it (no doubling copies while it grows: a
    // line without its newline costs what was read, up to the cap), and its length.
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut len = 0usize;
    let why = loop {
        let (used, line) = match r.fill_buf() {
            Ok([]) => break None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Some(format!("the server process's output failed: {e}")),
            Ok(buf) => {
                let (part, complete) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (buf.get(..i).unwrap_or(&[]), true),
                    None => (buf, false),
                };
                if len.saturating_add(part.len()) > cap {
                    break Some(format!(
                        "the server process wrote a line over the {cap}-byte cap"
                    ));
                }
                let used = part.len() + usize::from(complete);
                if complete {
                    // The whole line in one allocation, with room for the newline it is
                    // handed on with.
                    let mut line = Vec::with_capacity(len + part.len() + 1);
                    for p in pieces.drain(..) {
                        line.extend_from_slice(&p);
                    }
                    line.extend_from_slice(part);
                    len = 0;
                    (used, Some(line))
                } else {
                    len += part.len();
                    pieces.push(part.to_vec());
                    (used, None)
                }
            }
        };
        r.consume(used);
        if let Some(line) = line {
            route(running, line);
        }
    };
    match why {
        // A broken child is stopped at once: it can no longer be trusted to answer.
        Some(why) => {
            running.fail(why);
            kill_now(running);
        }
        None => {
            // The output ended: give the child a moment to exit and its stderr to drain, so the
            // error can say how it ended.
            let deadline = Instant::now() + EXIT_WAIT;
            while Instant::now() < deadline
                && (running.try_status().is_none() || !running.stderr_done.load(Ordering::Acquire))
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let why = if running.try_status().is_some() {
                "the server process exited"
            } else {
                "the server process closed its output"
            };
            running.fail(why.into());
        }
    }
    // Nothing more is read: dropping stdout here means a child still writing gets EPIPE.
    drop(r);
}

/// Routes one line of the child's output (without its newline); a line that is not
/// JSON-RPC is skipped ([`Running::skip`]).
fn route(running: &Running, mut line: Vec<u8>) {
    if line.ends_with(b"\r") {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    // Where the line goes: (id, is the response). Worked out first, while it is parsed.
    let mut to: Vec<(u64, bool)> = Vec::new();
    {
        let Ok(value) = Value::parse(&line, JsonLimits::default()) else {
            return running.skip(&line);
        };
        let messages: Vec<Value<'_>> = match value.kind() {
            Kind::Object => vec![value],
            Kind::Array => value.elements().collect(),
            _ => return running.skip(&line),
        };
        // A message is something with a `method` or an `id`; a line with none is a log line.
        let mut any = false;
        for msg in messages {
            if msg.kind() != Kind::Object {
                continue;
            }
            let id = msg.get("id").filter(|i| !i.is_null());
            let method = msg.get("method");
            any |= method.is_some() || id.is_some();
            match (method, id) {
                // The server asks us something: answer, so it never waits.
                (Some(method), Some(id)) => answer(running, method, id, msg.get("params")),
                (Some(method), None) => {
                    let token = msg
                        .get("params")
                        .and_then(|p| p.get("progressToken"))
                        .and_then(|t| t.as_u64());
                    if method
                        .as_str()
                        .is_some_and(|m| m.eq_str("notifications/progress"))
                        && let Some(token) = token
                    {
                        to.push((token, false));
                    }
                }
                (None, Some(id)) => {
                    if let Some(id) = id.as_u64() {
                        to.push((id, true));
                    }
                }
                (None, None) => {}
            }
        }
        if !any {
            return running.skip(&line);
        }
    }
    line.push(b'\n');
    let last = to.len().saturating_sub(1);
    for (i, (id, response)) in to.into_iter().enumerate() {
        // The last (usually the only) one takes the line itself, not a copy.
        let owned = if i == last {
            std::mem::take(&mut line)
        } else {
            line.clone()
        };
        deliver(running, id, owned, response);
    }
}

/// Hands `line` (with its newline) to the connection waiting for `id`; a response ends the
/// wait.
fn deliver(running: &Running, id: u64, line: Vec<u8>, response: bool) {
    let tx = {
        let mut routes = lock(&running.routes);
        if response {
            routes.waiting.remove(&id)
        } else {
            routes.waiting.get(&id).cloned()
        }
    };
    if let Some(tx) = tx {
        if response {
            // Pushes out the oldest progress line when the mailbox is full.
            let _ = tx.force_send(line);
        } else {
            let _ = tx.try_send(line);
        }
    }
}

/// Answers a request of the server: `ping` with an empty result, an elicitation by the
/// slot's handler or policy (a decline without either), anything else with "method not
/// found" (this client offers no roots or sampling).
fn answer(running: &Running, method: Value<'_>, id: Value<'_>, params: Option<Value<'_>>) {
    let id = String::from_utf8_lossy(id.raw());
    let ping = method.as_str().is_some_and(|m| m.eq_str("ping"));
    let elicit = method
        .as_str()
        .is_some_and(|m| m.eq_str("elicitation/create"));
    let reply = if ping {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n")
    } else if elicit {
        let (policy, handler) = &running.elicit;
        let mut out = VecBuf::with_limit(ELICIT_ANSWER_CAP);
        let answered = verifi_mcp_core::machine::answer_elicitation(
            &mut out,
            params,
            (*policy, handler.as_ref().map(OnElicit::core)),
        );
        let result = match answered {
            Ok(()) => String::from_utf8_lossy(out.bytes()).into_owned(),
            Err(_) => "{\"action\":\"decline\"}".to_owned(),
        };
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n")
    } else {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"this client does not offer that method\"}}}}\n"
        )
    };
    if let Some(w) = lock(&running.writer).as_ref() {
        // Never block the reader on the child's stdin; a full queue drops the answer.
        let _ = w.try_send(reply.into_bytes());
    }
}

/// One operation's connection to a stdio server: a write is one line to the child (sent once
/// whole), a read gets the lines routed to the request it wrote. The end of the stream (a
/// read of 0) means the child is gone.
pub struct StdioConn {
    running: Arc<Running>,
    /// This connection's mailbox, until a request registers it (then only the route holds it,
    /// so the mailbox closes when the child is gone).
    tx: Option<async_channel::Sender<Vec<u8>>>,
    rx: async_channel::Receiver<Vec<u8>>,
    out: Vec<u8>,
    pending: Vec<u8>,
    at: usize,
    ids: Vec<u64>,
    /// The wire observer and this connection's number, when tracing.
    trace: Option<(WireTrace, u64)>,
}

fn broken() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the server process is gone")
}

impl StdioConn {
    async fn send_line(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.out);
        let request_id = Value::parse(
            line.strip_suffix(b"\n").unwrap_or(&line),
            JsonLimits::default(),
        )
        .ok()
        .filter(|v| v.get("method").is_some())
        .and_then(|v| v.get("id"))
        .and_then(|id| id.as_u64());
        {
            let mut routes = lock(&self.running.routes);
            if routes.gone.is_some() {
                return Err(broken());
            }
            if let (Some(id), Some(tx)) = (request_id, self.tx.take()) {
                routes.waiting.insert(id, tx);
                self.ids.push(id);
            }
        }
        let writer = lock(&self.running.writer).clone().ok_or_else(broken)?;
        if let Some((t, conn)) = &self.trace {
            t.emit(&WireEvent::Sent {
                conn: *conn,
                bytes: &line,
            });
        }
        writer.send(line).await.map_err(|_| broken())
    }
}

impl Drop for StdioConn {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let mut routes = lock(&self.running.routes);
        for id in &self.ids {
            routes.waiting.remove(id);
        }
    }
}

impl embedded_io_async::ErrorType for StdioConn {
    type Error = io::Error;
}

impl embedded_io_async::Read for StdioConn {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.at >= self.pending.len() {
            if self.tx.is_some() {
                // Nothing was asked on this connection: nothing will come.
                return Ok(0);
            }
            match self.rx.recv().await {
                Ok(line) => {
                    self.pending = line;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let rest = self.pending.get(self.at..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.at += n;
        if let (Some((t, conn)), Some(bytes)) = (&self.trace, rest.get(..n)) {
            t.emit(&WireEvent::Received { conn: *conn, bytes });
        }
        Ok(n)
    }
}

impl embedded_io_async::Write for StdioConn {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        self.out.extend_from_slice(buf);
        if self.out.ends_with(b"\n") {
            self.send_line().await?;
        }
        Ok(buf.len())
    }

    async fn flush(&mut self) -> Result<(), io::Error> {
        if !self.out.is_empty() {
            self.out.push(b'\n');
            self.send_line().await?;
        }
        Ok(())
    }
}

/// The endpoint that stands for a slot's stdio server in the core's config: a reserved name
/// (`.invalid` never resolves) that [`SlotNet`] recognises and never dials.
pub(crate) fn placeholder(target: Target) -> Endpoint<'static> {
    let url = match target {
        Target::Primary => PRIMARY_URL,
        Target::Fallback => FALLBACK_URL,
    };
    // Both parse (checked by a test); the fallback branch is never taken.
    Endpoint::parse_base(url).unwrap_or_else(|_| placeholder(Target::Primary))
}

const PRIMARY_URL: &str = "http://primary.stdio.invalid";
const FALLBACK_URL: &str = "http://fallback.stdio.invalid";

/// What keeps a slot's GET streams ([`Net::listen`]): the slot, which implements it (see
/// `crate::slot::get_stream`); a trait so that this file does not import the slot.
pub(crate) trait Listener: Sync {
    /// Has `target`'s GET stream open in its current session, or returns when it cannot be.
    fn listen(&self, target: Target) -> impl Future<Output = ()> + Send;
}

/// A slot's way to its servers: TCP/TLS through its route, and its stdio servers.
pub(crate) struct SlotNet<'a, L> {
    pub(crate) routed: RoutedNet<'a>,
    pub(crate) stdio: [Option<&'a StdioServer>; 2],
    /// The call's kept deadline timer, if it has one (see [`crate::net::Alarm`]).
    pub(crate) alarm: Option<&'a crate::net::Alarm>,
    /// The slot whose sessions' GET streams [`Net::listen`] keeps.
    pub(crate) slot: Option<&'a L>,
}

impl<L> Clone for SlotNet<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L> Copy for SlotNet<'_, L> {}

impl<L> SlotNet<'_, L> {
    fn stdio_of(&self, ep: &Endpoint<'_>) -> Option<&StdioServer> {
        match ep.host() {
            "primary.stdio.invalid" => self.stdio[0],
            "fallback.stdio.invalid" => self.stdio[1],
            _ => None,
        }
    }
}

/// A connection of a [`SlotNet`].
pub(crate) enum SlotConn {
    Tcp(Conn),
    Stdio(StdioConn),
}

impl embedded_io_async::ErrorType for SlotConn {
    type Error = io::Error;
}

impl embedded_io_async::Read for SlotConn {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        match self {
            SlotConn::Tcp(c) => c.read(buf).await,
            SlotConn::Stdio(c) => c.read(buf).await,
        }
    }
}

impl embedded_io_async::Write for SlotConn {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        match self {
            SlotConn::Tcp(c) => c.write(buf).await,
            SlotConn::Stdio(c) => c.write(buf).await,
        }
    }

    async fn flush(&mut self) -> Result<(), io::Error> {
        match self {
            SlotConn::Tcp(c) => c.flush().await,
            SlotConn::Stdio(c) => c.flush().await,
        }
    }
}

impl<L: Listener> Net for SlotNet<'_, L> {
    type Conn = SlotConn;

    async fn connect(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
    ) -> Result<(SlotConn, bool), ConnectError> {
        if let Some(server) = self.stdio_of(ep) {
            let net = self.routed.net;
            return server
                .connect(|label| net.trace_stdio(label))
                .map(|c| (SlotConn::Stdio(c), false));
        }
        let (c, reused) = self.routed.connect(ep, fresh).await?;
        Ok((SlotConn::Tcp(c), reused))
    }

    fn recycle(&self, ep: &Endpoint<'_>, conn: SlotConn) {
        if let SlotConn::Tcp(c) = conn {
            self.routed.recycle(ep, c);
        }
    }

    fn now(&self) -> Millis {
        self.routed.now()
    }

    async fn sleep_until(&self, at: Millis) {
        match self.alarm {
            Some(alarm) => alarm.sleep_until(self.routed.net.instant_at(at)).await,
            None => self.routed.sleep_until(at).await,
        }
    }

    /// A TCP connection whose reply stream has not ended goes to the pool with what is left
    /// of it, like any routed one (without this, the trait's default dropped it and every
    /// late stream end cost a new connection); a stdio server has no such stream.
    fn park(&self, ep: &Endpoint<'_>, conn: SlotConn, tail: TailDrain) {
        if let SlotConn::Tcp(c) = conn {
            self.routed.park(ep, c, tail);
        }
    }

    fn parks_tails(&self) -> bool {
        self.routed.parks_tails()
    }

    async fn listen(&self, target: Target) {
        if let Some(slot) = self.slot {
            slot.listen(target).await;
        }
    }

    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
        // A TCP server's answer goes as any routed one; a stdio server's on a connection of
        // its own to the process.
        if self.stdio_of(ep).is_none() {
            return self.routed.respond(ep, answer).await;
        }
        let Ok((mut side, _)) = self.connect(ep, true).await else {
            return;
        };
        verifi_mcp_core::drive::post_answer(&mut side, answer).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell_without_expansion() {
        let s =
            StdioSpec::parse_command_line(r#"uvx  nmap-mcp --flag 'a b' "c \"d\"" e\ f"#).unwrap();
        assert_eq!(
            s.argv,
            ["uvx", "nmap-mcp", "--flag", "a b", "c \"d\"", "e f"]
        );
        assert_eq!(
            StdioSpec::parse_command_line("''").unwrap().argv,
            [String::new()]
        );
        assert!(StdioSpec::parse_command_line("  ").is_err());
        assert!(StdioSpec::parse_command_line("x 'y").is_err());
        assert_eq!(s.label(), "stdio:uvx nmap-mcp --flag a b c \"d\" e f");
    }

    #[test]
    fn placeholders_parse_and_are_told_apart() {
        assert_eq!(placeholder(Target::Primary).host(), "primary.stdio.invalid");
        assert_eq!(
            placeholder(Target::Fallback).host(),
            "fallback.stdio.invalid"
        );
    }

    #[test]
    fn a_spec_debug_hides_env_values() {
        let s = StdioSpec {
            argv: vec!["x".into()],
            env: vec![("TOKEN".into(), "hunter2-secret".into())],
            cwd: None,
        };
        let d = format!("{s:?}");
        assert!(d.contains("TOKEN") && !d.contains("hunter2"), "{d}");
    }
}
