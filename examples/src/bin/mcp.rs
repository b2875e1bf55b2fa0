//! `mcp`: the everyday command line for MCP tools, through the same `HarnessContext` and slot
//! handle a harness uses (one session, one failover state, one ledger per invocation).
//!
//! stdout carries only results; the run timeline goes to stderr, one line per event. Exit
//! status: 0 ok, 1 a result was `ok: false` (exec: the tool's own exit code), 2 bad input.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use verifi_mcp_examples::common::{
    self, CLI_SLOT, UsageError, amend_manifest, endpoint_base, event_line, ledger_json,
    one_slot_manifest, parse_args, parse_header, result_json, run_secrets, scrub, timeline_json,
};
use verifi_mcp_examples::protocol_cmds::{self, ProtoCmd};
use verifi_mcp_smol::{Exec, HarnessContext, Options, ProgressUpdate, ProtocolVersion, SlotHandle};

/// Longest stdin line `batch` accepts.
const MAX_BATCH_LINE: usize = 4 * 1024 * 1024;
/// Most calls `bench` makes, and most in flight.
const MAX_BENCH_CALLS: u64 = 10_000_000;
const MAX_BENCH_CONC: usize = 1024;

#[derive(Parser, Debug)]
#[command(
    name = "mcp",
    version,
    about = "Call MCP tools over streamable HTTP, as a harness would"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// How to reach the slot: ENDPOINT or `--manifest FILE --slot NAME`, and the call options.
#[derive(Args, Debug, Clone)]
struct Common {
    /// ENDPOINT is the full MCP URL as given (else `/mcp` is appended to it).
    #[arg(long)]
    exact_url: bool,
    /// A fallback endpoint for the slot (same form as ENDPOINT).
    #[arg(long, value_name = "ENDPOINT")]
    fallback: Option<String>,
    /// Per-call timeout in ms (connect, handshake and reply; default 300000). For `exec`: the
    /// command's own timeout (clamped to 1..=285 s; the call keeps the 300 s ceiling).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// A reply that sends no byte for this long fails with `server stalled` (default 60000;
    /// progress and keep-alive comments count; 0 turns it off, leaving only the timeout).
    #[arg(long, value_name = "MS")]
    idle_timeout_ms: Option<u64>,
    /// The protocol version offered in `initialize` (default 2024-11-05).
    #[arg(long, value_name = "V")]
    protocol_version: Option<String>,
    /// A header sent on every request, 'Name: value' (its value is redacted in any output).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    headers: Vec<String>,
    /// Take the slot from this run manifest instead of an ENDPOINT.
    #[arg(long, value_name = "FILE", requires = "slot")]
    manifest: Option<String>,
    /// The manifest slot to use (with --manifest).
    #[arg(long, value_name = "NAME", requires = "manifest")]
    slot: Option<String>,
    /// Largest reply accepted, in bytes (a larger one is an ok:false naming the cap).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_reply_bytes: usize,
    /// call: also print `result`, the whole CallToolResult (structured content, images,
    /// annotations), redacted.
    #[arg(long)]
    raw: bool,
    /// call: list the tools first, so a tool's declared outputSchema is checked against its
    /// structuredContent (a mismatch is a tool error naming the failing path).
    #[arg(long)]
    check_output: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List the tool names: `mcp tools ENDPOINT [--json]`.
    Tools {
        /// ENDPOINT (omit with --manifest).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        /// Print JSON instead of one name a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Call a tool and print its ToolResult JSON: `mcp call ENDPOINT TOOL [JSON_ARGS]`.
    Call {
        /// `ENDPOINT TOOL [JSON_ARGS]` (ENDPOINT omitted with --manifest).
        #[arg(value_name = "ENDPOINT TOOL [JSON_ARGS]", required = true)]
        pos: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Run a command on a Kali-style box (`run_command`); exits with the tool's exit code.
    Exec {
        /// ENDPOINT COMMAND (ENDPOINT omitted with --manifest).
        #[arg(value_name = "ENDPOINT COMMAND", required = true)]
        pos: Vec<String>,
        /// The workspace (default: a run id made for this invocation).
        #[arg(long, value_name = "W")]
        workspace: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Run JSON lines `{"tool":…,"args":{…}}` from stdin through one slot handle.
    Batch {
        /// ENDPOINT (omit with --manifest).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// N calls after the handshake, C in flight; last line is a JSON summary.
    Bench {
        /// ENDPOINT (omit with --manifest).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        /// The tool to call.
        #[arg(long, default_value = "echo")]
        tool: String,
        /// Its JSON arguments.
        #[arg(long, default_value = "{\"text\":\"bench\"}")]
        args: String,
        /// How many calls.
        #[arg(long, default_value_t = 1000)]
        calls: u64,
        /// How many in flight.
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        #[command(flatten)]
        common: Common,
    },
    /// List resources and resource templates: `mcp resources ENDPOINT`.
    Resources(ProtoArgs),
    /// Read a resource: `mcp read ENDPOINT URI`.
    Read(ProtoArgs),
    /// List prompts: `mcp prompts ENDPOINT`.
    Prompts(ProtoArgs),
    /// Get a prompt: `mcp prompt ENDPOINT NAME [JSON_ARGS]`.
    Prompt(ProtoArgs),
    /// Ping the server: `mcp ping ENDPOINT`.
    Ping(ProtoArgs),
}

/// The arguments of the protocol subcommands (see `protocol_cmds`).
#[derive(Args, Debug)]
struct ProtoArgs {
    /// ENDPOINT and the command's own arguments (ENDPOINT omitted with --manifest).
    #[arg(value_name = "ENDPOINT ARGS")]
    pos: Vec<String>,
    #[command(flatten)]
    common: Common,
}

/// Runs one protocol subcommand.
async fn proto(cmd: ProtoCmd, mut a: ProtoArgs) -> Result<ExitCode, Fail> {
    let run = build(&a.common, &mut a.pos, &run_id())?;
    let code = protocol_cmds::run(cmd, &run.slot, &a.pos, &|v| run.out(v), &|l| run.err(l)).await?;
    Ok(finish(&run, code).await)
}

/// What a command ended with.
enum Fail {
    Usage(UsageError),
}

impl From<UsageError> for Fail {
    fn from(e: UsageError) -> Self {
        Fail::Usage(e)
    }
}

/// A built run: the context, its one slot, and what to scrub from output.
struct Run {
    ctx: HarnessContext,
    slot: SlotHandle,
    secrets: Vec<Vec<u8>>,
}

impl Run {
    fn out(&self, v: &Value) {
        let line = scrub(&v.to_string(), &self.secrets);
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }

    fn err(&self, line: &str) {
        eprintln!("{}", scrub(line, &self.secrets));
    }

    /// The timeline, one line per event, on stderr.
    fn timeline_to_stderr(&self) {
        for e in self.ctx.timeline() {
            self.err(&format!("event: {}", event_line(&e)));
        }
    }
}

/// Builds the context and the slot from ENDPOINT (the first of `pos`, removed) or the manifest.
fn build(common: &Common, pos: &mut Vec<String>, run_id: &str) -> Result<Run, Fail> {
    let headers = common
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let protocol_version = match &common.protocol_version {
        None => ProtocolVersion::DEFAULT,
        Some(v) => ProtocolVersion::parse(v.as_bytes()).ok_or_else(|| {
            let known: Vec<&str> = ProtocolVersion::ALL.iter().map(|p| p.as_str()).collect();
            UsageError(format!(
                "--protocol-version {v:?} is not one of {}",
                known.join(", ")
            ))
        })?,
    };
    if common.timeout_ms == Some(0) {
        return Err(UsageError("--timeout-ms must be at least 1".into()).into());
    }
    if common.max_reply_bytes < 1024 {
        return Err(UsageError("--max-reply-bytes must be at least 1024".into()).into());
    }
    let fallback = match &common.fallback {
        Some(f) => Some(endpoint_base(f, common.exact_url)?),
        None => None,
    };
    let (manifest, slot_name) = match (&common.manifest, &common.slot) {
        (Some(file), Some(slot)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| UsageError(format!("cannot read manifest {file}: {e}")))?;
            let mut m: Value = serde_json::from_str(&text)
                .map_err(|e| UsageError(format!("manifest {file} is not JSON: {e}")))?;
            amend_manifest(&mut m, slot, fallback.as_deref(), &headers);
            (m, slot.clone())
        }
        _ => {
            if pos.is_empty() {
                return Err(
                    UsageError("missing ENDPOINT (or --manifest FILE --slot NAME)".into()).into(),
                );
            }
            let ep = pos.remove(0);
            let base = endpoint_base(&ep, common.exact_url)?;
            (
                one_slot_manifest(CLI_SLOT, &base, fallback.as_deref(), &headers),
                CLI_SLOT.to_owned(),
            )
        }
    };
    let secrets = run_secrets(headers.iter().map(|(_, v)| v.clone()));
    let options = Options {
        timeout_ms: common.timeout_ms.unwrap_or(Options::default().timeout_ms),
        reply_cap: common.max_reply_bytes,
        idle_timeout_ms: match common.idle_timeout_ms {
            Some(0) => None,
            Some(ms) => Some(ms),
            None => Options::default().idle_timeout_ms,
        },
        protocol_version,
        exact_mcp_urls: common.exact_url,
        keep_raw: common.raw,
        ..Options::default()
    };
    let ctx = HarnessContext::from_manifest_value(manifest, run_id, options)
        .map_err(|e| UsageError(scrub(&e.to_string(), &secrets)))?;
    let slot = ctx
        .mcp(&slot_name)
        .map_err(|e| UsageError(scrub(&e.to_string(), &secrets)))?;
    Ok(Run { ctx, slot, secrets })
}

fn run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("mcp-cli-{}-{t}", std::process::id())
}

/// Runs `fut`; on a terminal, shows the elapsed time on stderr while it takes over a second.
/// `progress 2/3: message` (the message already redacted by the core).
fn progress_line(u: &ProgressUpdate<'_>) -> String {
    let mut line = format!("progress {}", u.progress);
    if let Some(total) = u.total {
        line.push('/');
        line.push_str(total);
    }
    if let Some(m) = u.message {
        line.push_str(": ");
        line.push_str(m);
    }
    line
}

/// Runs `fut`; on a terminal, shows the elapsed time (and `status`, the latest progress)
/// on stderr while it runs.
async fn with_elapsed<T>(
    label: &str,
    status: Option<&std::sync::Mutex<String>>,
    fut: impl std::future::Future<Output = T>,
) -> T {
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let start = Instant::now();
    let shown = std::sync::atomic::AtomicBool::new(false);
    let ticker = async {
        loop {
            async_io_sleep(Duration::from_millis(500)).await;
            let s = start.elapsed().as_secs_f64();
            if s >= 1.0 {
                shown.store(true, Ordering::Relaxed);
                let progress = status
                    .and_then(|m| m.lock().ok().map(|s| s.clone()))
                    .filter(|s| !s.is_empty())
                    .map(|s| format!(", {s}"))
                    .unwrap_or_default();
                eprint!("\r\x1b[K{label}: {s:.0} s elapsed{progress}");
            }
        }
    };
    let out = futures_lite::future::or(fut, async {
        ticker.await;
        unreachable_forever().await
    })
    .await;
    if shown.load(Ordering::Relaxed) {
        eprint!("\r\x1b[K");
    }
    out
}

async fn unreachable_forever<T>() -> T {
    futures_lite::future::pending().await
}

async fn async_io_sleep(d: Duration) {
    smol::Timer::after(d).await;
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            let first = e.to_string();
            let line = first.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{line} (see mcp --help)");
            return ExitCode::from(2);
        }
    };
    match smol::block_on(dispatch(cli.cmd)) {
        Ok(code) => code,
        Err(Fail::Usage(e)) => {
            eprintln!("mcp: {e}");
            ExitCode::from(2)
        }
    }
}

async fn dispatch(cmd: Cmd) -> Result<ExitCode, Fail> {
    match cmd {
        Cmd::Tools {
            mut pos,
            json,
            common,
        } => {
            let run = build(&common, &mut pos, &run_id())?;
            no_extra(&pos)?;
            let code = tools(&run, json).await;
            Ok(finish(&run, code).await)
        }
        Cmd::Call { mut pos, common } => {
            let run = build(&common, &mut pos, &run_id())?;
            let (tool, args) = match pos.as_slice() {
                [tool] => (tool.clone(), parse_args(None)?),
                [tool, args] => (tool.clone(), parse_args(Some(args))?),
                [] => return Err(UsageError("missing TOOL".into()).into()),
                _ => {
                    return Err(
                        UsageError("too many arguments: ENDPOINT TOOL [JSON_ARGS]".into()).into(),
                    );
                }
            };
            if common.check_output
                && let Err(e) = run.slot.list_tools().await
            {
                run.err(&format!("mcp: {e}"));
                return Ok(finish(&run, 1).await);
            }
            // On a terminal, the status line shows the call's progress notifications too.
            let status = std::sync::Mutex::new(String::new());
            let on_progress = |u: &ProgressUpdate<'_>| {
                if let Ok(mut s) = status.lock() {
                    *s = progress_line(u);
                }
            };
            let r = with_elapsed(
                &tool,
                Some(&status),
                run.slot.call_with_progress(&tool, &args, on_progress),
            )
            .await;
            let printed = match common.raw {
                true => protocol_cmds::with_call_result(result_json(&r), &r),
                false => result_json(&r),
            };
            run.out(&printed);
            Ok(finish(&run, if r.ok { 0 } else { 1 }).await)
        }
        Cmd::Exec {
            mut pos,
            workspace,
            mut common,
        } => {
            // For exec, --timeout-ms is the command's own timeout (sent in whole seconds,
            // clamped to 1..=285 s); the call keeps the seed's 300 s ceiling above it.
            let cmd_timeout_ms = common.timeout_ms.take();
            let id = match &workspace {
                Some(w) => {
                    if w.is_empty() {
                        return Err(UsageError("--workspace must not be empty".into()).into());
                    }
                    w.clone()
                }
                None => run_id(),
            };
            let run = build(&common, &mut pos, &id)?;
            let command = match pos.as_slice() {
                [c] => c.clone(),
                [] => return Err(UsageError("missing COMMAND".into()).into()),
                _ => {
                    return Err(UsageError(
                        "too many arguments: ENDPOINT COMMAND (quote the command)".into(),
                    )
                    .into());
                }
            };
            let exec =
                Exec::new(&run.ctx, run.slot.slot()).map_err(|e| UsageError(e.to_string()))?;
            let r = with_elapsed(
                "run_command",
                None,
                exec.exec(&command, cmd_timeout_ms.unwrap_or(285_000)),
            )
            .await;
            let text = scrub(&r.output, &run.secrets);
            {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(text.as_bytes());
                if !text.is_empty() && !text.ends_with('\n') {
                    let _ = o.write_all(b"\n");
                }
                let _ = o.flush();
            }
            let code = match r.exit_code {
                Some(c) => u8::try_from(c).unwrap_or(1),
                None => {
                    if !r.call.ok {
                        run.err(&format!(
                            "mcp: run_command failed: {}",
                            r.call
                                .error
                                .as_deref()
                                .unwrap_or("no exit line in the reply")
                        ));
                    }
                    if r.ok { 0 } else { 1 }
                }
            };
            Ok(finish(&run, code).await)
        }
        Cmd::Batch { mut pos, common } => {
            let run = build(&common, &mut pos, &run_id())?;
            no_extra(&pos)?;
            let code = batch(&run).await;
            Ok(finish(&run, code).await)
        }
        Cmd::Bench {
            mut pos,
            tool,
            args,
            calls,
            concurrency,
            common,
        } => {
            let run = build(&common, &mut pos, &run_id())?;
            no_extra(&pos)?;
            let args = parse_args(Some(&args))?;
            if calls == 0 || calls > MAX_BENCH_CALLS {
                return Err(UsageError(format!("--calls must be 1..={MAX_BENCH_CALLS}")).into());
            }
            if concurrency == 0 || concurrency > MAX_BENCH_CONC {
                return Err(
                    UsageError(format!("--concurrency must be 1..={MAX_BENCH_CONC}")).into(),
                );
            }
            let code = bench(&run, &tool, args, calls, concurrency).await;
            Ok(finish(&run, code).await)
        }
        Cmd::Resources(a) => proto(ProtoCmd::Resources, a).await,
        Cmd::Read(a) => proto(ProtoCmd::Read, a).await,
        Cmd::Prompts(a) => proto(ProtoCmd::Prompts, a).await,
        Cmd::Prompt(a) => proto(ProtoCmd::Prompt, a).await,
        Cmd::Ping(a) => proto(ProtoCmd::Ping, a).await,
    }
}

fn no_extra(pos: &[String]) -> Result<(), UsageError> {
    match pos {
        [] => Ok(()),
        [x, ..] => Err(UsageError(format!("unexpected argument {x:?}"))),
    }
}

/// Prints the timeline to stderr, closes the sessions and gives the exit status.
async fn finish(run: &Run, code: u8) -> ExitCode {
    run.timeline_to_stderr();
    run.ctx.close().await;
    ExitCode::from(code)
}

async fn tools(run: &Run, json: bool) -> u8 {
    if json {
        return match with_elapsed("tools/list", None, run.slot.list_tools_described()).await {
            Ok(tools) => {
                run.out(&json!({ "tools": tools }));
                0
            }
            Err(e) => {
                run.err(&format!("mcp: {e}"));
                1
            }
        };
    }
    match with_elapsed("tools/list", None, run.slot.list_tools()).await {
        Ok(names) => {
            {
                let mut o = std::io::stdout().lock();
                for n in &names {
                    let _ = writeln!(o, "{}", scrub(n, &run.secrets));
                }
            }
            0
        }
        Err(e) => {
            run.err(&format!("mcp: {e}"));
            1
        }
    }
}

async fn batch(run: &Run) -> u8 {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut worst = 0u8;
    let mut line_no = 0u64;
    loop {
        let mut buf = Vec::new();
        let n = match (&mut input)
            .take(MAX_BATCH_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(e) => {
                run.err(&format!("mcp: reading stdin: {e}"));
                return 2;
            }
        };
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.len() > MAX_BATCH_LINE {
            run.err(&format!(
                "mcp: line {line_no}: longer than {MAX_BATCH_LINE} bytes"
            ));
            return 2;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let result = match parse_batch_line(text) {
            Ok((tool, args)) => {
                let r = run.slot.call(&tool, &args).await;
                result_json(&r)
            }
            Err(e) => {
                json!({ "ok": false, "text": "", "isError": false, "latencyMs": 0,
                        "error": format!("line {line_no}: {e}") })
            }
        };
        if result["ok"] != json!(true) {
            worst = 1;
        }
        run.out(&result);
    }
    run.out(&json!({
        "ledger": ledger_json(&run.ctx.ledger()),
        "timeline": timeline_json(&run.ctx.timeline()),
    }));
    worst
}

fn parse_batch_line(text: &str) -> Result<(String, Value), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let tool = v
        .get("tool")
        .and_then(Value::as_str)
        .ok_or("expected {\"tool\": NAME, \"args\": {…}}")?
        .to_owned();
    let args = match v.get("args") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err("\"args\" must be an object".into()),
    };
    Ok((tool, args))
}

async fn bench(run: &Run, tool: &str, args: Value, calls: u64, conc: usize) -> u8 {
    if let Err(e) = run.slot.list_tools().await {
        run.err(&format!("mcp: handshake failed: {e}"));
        return 1;
    }
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let args = Arc::new(args);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc.min(calls as usize) {
        let slot = run.slot.clone();
        let (next, done, errors, args) = (next.clone(), done.clone(), errors.clone(), args.clone());
        let tool = tool.to_owned();
        tasks.push(smol::spawn(async move {
            let mut lat = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let t0 = Instant::now();
                let r = slot.call(&tool, &*args).await;
                lat.push(t0.elapsed().as_secs_f64() * 1000.0);
                if !r.ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            lat
        }));
    }
    let progress = std::io::stderr().is_terminal();
    let all = futures_lite::future::or(
        async {
            let mut all = Vec::with_capacity(calls as usize);
            for t in tasks {
                all.extend(t.await);
            }
            all
        },
        async {
            loop {
                smol::Timer::after(Duration::from_millis(250)).await;
                if progress {
                    eprint!("\r{}/{calls} calls", done.load(Ordering::Relaxed));
                }
            }
        },
    )
    .await;
    let secs = start.elapsed().as_secs_f64();
    if progress {
        eprint!("\r\x1b[K");
    }
    let mut sorted = all;
    sorted.sort_by(f64::total_cmp);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let errs = errors.load(Ordering::Relaxed);
    run.out(&json!({
        "calls_per_sec": round(sorted.len() as f64 / secs.max(1e-9)),
        "p50_ms": round(common::quantile(&sorted, 0.50)),
        "p99_ms": round(common::quantile(&sorted, 0.99)),
        "errors": errs,
        "n": sorted.len(),
        "conc": conc,
    }));
    if errs == 0 { 0 } else { 1 }
}
