//! `demo`: the whole product with nothing else installed. Starts two real MCP servers (a
//! primary and a fallback "kali" box, rmcp on 127.0.0.1), writes their run manifest, and runs an
//! ASM-style sweep through `HarnessContext` exactly as the TypeScript harness SDK's usage
//! pattern shows (see `docs/design.md`): `exec`
//! steps, a tool error, a refused call, a secret from the environment that a tool echoes (shown
//! redacted), then the primary is stopped mid-run and the sweep finishes on the fallback.
//!
//! Prints each step with its latency and outcome, the run timeline and the ledger totals
//! (`--json`: the same as JSON lines). Exit status 0 only when the sweep behaved as designed;
//! otherwise 1, naming each check that failed. `demo --serve [SECS]` only starts one box and
//! prints its URL, for trying `mcp` against it; it serves until SECS pass or it is stopped.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::{Value, json};
use verifi_mcp_examples::common::{event_line, ledger_json, scrub, timeline_json};
use verifi_mcp_examples::kali::KaliServer;
use verifi_mcp_host::{Exec, HarnessContext, Kind, Options, SlotHandle, ToolResult};

/// The variable whose value the sweep echoes through the box.
const SECRET_VAR: &str = "DEMO_API_KEY";
/// Set in the re-executed child so it does not re-exec again.
const CHILD_MARK: &str = "VERIFI_DEMO_CHILD";

/// Everything printed, kept to check that the secret never appeared.
struct Out {
    json: bool,
    all: String,
}

impl Out {
    fn line(&mut self, human: &str, v: Value) {
        let line = if self.json {
            v.to_string()
        } else {
            human.to_owned()
        };
        self.all.push_str(&line);
        self.all.push('\n');
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }
}

/// One step of the sweep, as recorded.
struct Step {
    n: usize,
    what: String,
    latency_ms: u64,
    outcome: String,
    ok: bool,
    result: Option<ToolResult>,
}

fn first_line(s: &str) -> String {
    let l = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if l.chars().count() > 72 {
        format!("{}…", l.chars().take(71).collect::<String>())
    } else {
        l.to_owned()
    }
}

struct Sweep<'a> {
    out: &'a mut Out,
    secrets: Vec<Vec<u8>>,
    steps: Vec<Step>,
    exec: Exec,
    kali: SlotHandle,
}

impl Sweep<'_> {
    fn record(
        &mut self,
        what: String,
        latency_ms: u64,
        ok: bool,
        outcome: String,
        result: Option<ToolResult>,
    ) {
        let n = self.steps.len() + 1;
        let outcome = scrub(&outcome, &self.secrets);
        let human = format!("{n:>3}  {what:<48} {latency_ms:>6} ms  {outcome}");
        self.out.line(
            &human,
            json!({ "type": "step", "n": n, "step": what, "latencyMs": latency_ms, "ok": ok, "outcome": outcome }),
        );
        self.steps.push(Step {
            n,
            what,
            latency_ms,
            outcome,
            ok,
            result,
        });
    }

    /// The TypeScript harness SDK's `exec(command, timeoutMs)`: clamped, workspace = run id, the tool's exit code.
    async fn exec(&mut self, command: &str, timeout_ms: u64) -> bool {
        let r = self.exec.exec(command, timeout_ms).await;
        let ms = r.call.latency_ms;
        let outcome = match r.exit_code {
            Some(code) => format!("exit {code}  {}", first_line(&r.output)),
            None => format!("failed: {}", first_line(&r.output)),
        };
        let asked_s = timeout_ms.div_ceil(1000);
        let what = if asked_s > 285 {
            format!("exec {command} [timeout {asked_s} s, sent 285 s]")
        } else {
            format!("exec {command}")
        };
        self.record(what, ms, r.ok, outcome, Some(r.call));
        r.ok
    }

    async fn call(&mut self, tool: &str, args: Value) -> ToolResult {
        let r = self.kali.call(tool, &args).await;
        let outcome = if r.ok() {
            format!("ok  {}", first_line(&r.text))
        } else if r.is_error() {
            format!("tool error  {}", first_line(&r.text))
        } else {
            let error = r.error().unwrap_or("");
            let shape = match r.kind() {
                Kind::Refused { .. } => "refused",
                _ => "unreachable",
            };
            format!("{shape}  {error}")
        };
        self.record(
            format!("call {tool}"),
            r.latency_ms,
            r.ok(),
            outcome,
            Some(r.clone()),
        );
        r
    }
}

const DEMO_ABOUT: &str =
    "The whole product on loopback: an ASM-style sweep through two real MCP servers";

const DEMO_LONG_ABOUT: &str = "\
The whole product with nothing else installed. demo starts two real MCP servers (a primary
and a fallback \"kali\" box, built on the official Rust SDK rmcp) on 127.0.0.1, writes their
run manifest and runs an ASM-style sweep through them, as a harness would: commands on the
box, a tool error, a refused call, a secret the box echoes (shown redacted), then the primary
is stopped and the sweep finishes on the fallback.

It prints each step, the run timeline (events such as tool_error and mcp.fallback_used) and
the ledger (the run's metering: tool calls, and evidence bytes, the bytes of redacted tool
output received). Exit status 0 only when every check holds; otherwise 1, naming each failed
check on stderr.

demo --serve starts one box only, prints its URL on stdout and serves it for SECS seconds
(default 3600) or until it is stopped (Ctrl-C, kill); closing stdin does not stop it, so
`demo --serve &` works in a script.";

const DEMO_EXAMPLES: &str = "\
Examples:
  demo                      # the sweep, for a person
  demo --json               # the same as JSON lines
  demo --serve              # one box for trying mcp; prints its URL
  url=$(demo --serve 600 | head -1) &   # in a script";

/// The demo's command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "demo",
    version,
    about = DEMO_ABOUT,
    long_about = DEMO_LONG_ABOUT,
    after_help = DEMO_EXAMPLES
)]
struct Cli {
    /// Print the sweep as JSON lines.
    #[arg(long, conflicts_with = "serve")]
    json: bool,
    /// Only start one box, print its URL and serve it for SECS seconds (default 3600).
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "3600",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    serve: Option<u64>,
}

/// `demo --serve [SECS]`: only start one demo box, print its base URL, and serve it for SECS
/// seconds or until SIGINT / SIGTERM, whatever stdin does.
fn serve(secs: u64) -> ExitCode {
    let server = match KaliServer::start("serve") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("demo: cannot start the box: {e}");
            return ExitCode::from(1);
        }
    };
    println!("{}", server.base_url());
    let _ = std::io::stdout().flush();
    eprintln!(
        "demo: serving {} for {secs} s; stop it with Ctrl-C or kill",
        server.base_url()
    );
    let waited = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|rt| {
            rt.block_on(async {
                let term = terminated();
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(secs)) => {}
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term => {}
                }
            })
        });
    if let Err(e) = waited {
        eprintln!("demo: cannot wait: {e}");
    }
    // Dropping the box stops it and removes its workspace folders.
    drop(server);
    ExitCode::SUCCESS
}

/// Returns when the process is asked to terminate (SIGTERM); never where there is no such signal.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            term.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await
}

fn main() -> ExitCode {
    let cli = match <Cli as clap::Parser>::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            let ok = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
            let _ = e.print();
            return ExitCode::from(if ok { 0 } else { 2 });
        }
    };
    if let Some(secs) = cli.serve {
        return serve(secs);
    }
    let json = cli.json;
    // The secret must be in the process environment, where `collect_run_secrets` and the box's
    // `printenv` find it; setting a variable in-process is unsafe in Rust 2024, so the demo
    // re-runs itself once with the variable set.
    if std::env::var_os(CHILD_MARK).is_none() {
        let secret = format!(
            "sk-demo-{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(7)
        );
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("demo: cannot find its own executable: {e}");
                return ExitCode::from(1);
            }
        };
        return match std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(SECRET_VAR, secret)
            .env(CHILD_MARK, "1")
            .status()
        {
            Ok(s) => ExitCode::from(s.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)),
            Err(e) => {
                eprintln!("demo: cannot run the sweep: {e}");
                ExitCode::from(1)
            }
        };
    }
    let mut out = Out {
        json,
        all: String::new(),
    };
    match smol::block_on(run(&mut out)) {
        Ok(failures) if failures.is_empty() => ExitCode::SUCCESS,
        Ok(failures) => {
            for f in failures {
                eprintln!("demo: check failed: {f}");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(out: &mut Out) -> Result<Vec<String>, String> {
    let secret = std::env::var(SECRET_VAR).map_err(|_| format!("{SECRET_VAR} is not set"))?;
    let primary =
        KaliServer::start("primary").map_err(|e| format!("cannot start the primary box: {e}"))?;
    let fallback =
        KaliServer::start("fallback").map_err(|e| format!("cannot start the fallback box: {e}"))?;
    let run_id = format!("demo-run-{}", std::process::id());
    let manifest = json!({
        "slotFills": { "kali": { "endpoint": primary.base_url(), "fallback": fallback.base_url() } }
    });
    let manifest_path =
        std::env::temp_dir().join(format!("verifi-demo-manifest-{}.json", std::process::id()));
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write the manifest: {e}"))?;
    let ctx =
        HarnessContext::from_manifest_file(&manifest_path, run_id.clone(), Options::default())
            .map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&manifest_path);
    let ctx = ctx?;
    let kali = ctx.mcp("kali").map_err(|e| e.to_string())?;
    let exec = Exec::new(&ctx, "kali").map_err(|e| e.to_string())?;
    let secrets = verifi_mcp_examples::common::run_secrets([]);

    out.line(
        &format!(
            "verifi-mcp demo: an ASM-style sweep through ctx.mcp(\"kali\")\n  primary  {}\n  fallback {}\n  run id   {run_id} (the workspace of every run_command)\n  manifest {} (read, then removed)\n\n  #  step                                             latency  outcome",
            primary.base_url(),
            fallback.base_url(),
            manifest_path.display()
        ),
        json!({ "type": "start", "primary": primary.base_url(), "fallback": fallback.base_url(),
                "runId": run_id, "manifest": manifest_path.display().to_string() }),
    );

    let mut sweep = Sweep {
        out,
        secrets: secrets.clone(),
        steps: Vec::new(),
        exec,
        kali,
    };
    sweep.exec("uname -s", 10_000).await;
    sweep.exec("whoami", 10_000).await;
    sweep.exec("date -u", 10_000).await;
    sweep
        .call("dns_posture", json!({ "domain": "example.com" }))
        .await;
    // A tool exit code that is not 0: the MCP call succeeded, the command did not.
    sweep.exec("ls no-such-report", 10_000).await;
    // A dead scanner says nothing about the DNS checks: record it and carry on.
    let tool_error = sweep
        .call("nikto", json!({ "target": "https://example.com" }))
        .await;
    let refused = sweep
        .call("masscan", json!({ "target": "203.0.113.0/24" }))
        .await;
    // A long tool: the timeout is clamped to 285 s before it reaches the box.
    sweep.exec("sleep 1", 900_000).await;
    sweep.exec(&format!("printenv {SECRET_VAR}"), 10_000).await;
    let secret_step = sweep.steps.last().and_then(|s| s.result.clone());

    sweep.out.line(
        "       -- the primary box is stopped mid-run (listener and live connections dropped) --",
        json!({ "type": "primary_stopped", "primary": primary.base_url() }),
    );
    primary.stop();
    let after = sweep.steps.len();
    sweep
        .exec("echo sweep continues after the primary died", 10_000)
        .await;
    sweep.exec("uname -a", 10_000).await;
    sweep
        .call("dns_posture", json!({ "domain": "xn--80ak6aa92e.com" }))
        .await;
    let last = sweep.exec("echo sweep finished", 10_000).await;
    let steps = std::mem::take(&mut sweep.steps);
    let out = sweep.out;

    let timeline = ctx.timeline();
    out.line(
        "\ntimeline:",
        json!({ "type": "timeline", "events": timeline.len() }),
    );
    for e in &timeline {
        let line = scrub(&event_line(e), &secrets);
        out.line(
            &format!("  {line}"),
            json!({ "type": "event", "event": e.value() }),
        );
    }
    let ledger = ctx.ledger();
    out.line(
        &format!(
            "\nledger (the run's metering): {} tool calls, every attempt counted, a failed-over one \
             too; {} evidence bytes, the bytes of redacted tool output received",
            ledger.tool_calls, ledger.evidence_bytes
        ),
        json!({ "type": "ledger", "ledger": ledger_json(&ledger) }),
    );
    ctx.close().await;

    // The checks: the sweep behaved as designed.
    let mut checks: Vec<(String, bool)> = Vec::new();
    let fb = ctx.events_of("mcp.fallback_used").len();
    checks.push((
        format!("the failover was announced exactly once (got {fb})"),
        fb == 1,
    ));
    // The refused tool does not exist on either box, so no server could serve it: that one
    // may (and, with this core, does) raise mcp.no_healthy_tool. No other tool may.
    let nht = ctx.events_of("mcp.no_healthy_tool");
    let others: Vec<String> = nht
        .iter()
        .filter_map(|e| {
            e.value()
                .get("tool")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|t| t != "masscan")
        .collect();
    checks.push((
        format!("mcp.no_healthy_tool only for the refused tool, at most once (got {}; others: {others:?})", nht.len()),
        nht.len() <= 1 && others.is_empty(),
    ));
    checks.push((
        format!(
            "the tool error came back ok:false, isError:true ({})",
            tool_error.error().unwrap_or("")
        ),
        !tool_error.ok() && tool_error.is_error(),
    ));
    checks.push((
        format!(
            "the refused call came back ok:false, isError:false ({})",
            refused.error().unwrap_or("")
        ),
        !refused.ok() && !refused.is_error(),
    ));
    let te = ctx.events_of("tool_error").len();
    checks.push((
        format!("every ok:false is a tool_error event (at least 2, got {te})"),
        te >= 2,
    ));
    checks.push((
        "the echoed secret came back as [REDACTED]".to_owned(),
        secret_step
            .as_ref()
            .is_some_and(|r| r.ok() && r.text.contains("[REDACTED]") && !r.text.contains(&secret)),
    ));
    let after_ok = steps.get(after..).unwrap_or(&[]).iter().all(|s| s.ok);
    checks.push((
        "every step after the primary stopped succeeded on the fallback".to_owned(),
        after_ok,
    ));
    checks.push((
        "the sweep finished".to_owned(),
        last && steps.len() == after + 4,
    ));
    checks.push((
        format!("the fallback served calls ({})", fallback.tool_calls()),
        fallback.tool_calls() >= 4,
    ));
    checks.push((
        format!(
            "every call was metered ({} calls, {} steps)",
            ledger.tool_calls,
            steps.len()
        ),
        ledger.tool_calls >= steps.len() as u64,
    ));
    let leaked = out.all.contains(&secret)
        || timeline_json(&timeline).to_string().contains(&secret)
        || ctx.log_lines().iter().any(|l| l.contains(&secret));
    checks.push(("the secret never appears in any output".to_owned(), !leaked));

    out.line(
        "\nchecks:",
        json!({ "type": "checks", "count": checks.len() }),
    );
    for (what, ok) in &checks {
        let what = scrub(what, &secrets);
        out.line(
            &format!("  {}  {what}", if *ok { "ok  " } else { "FAIL" }),
            json!({ "type": "check", "ok": ok, "check": what }),
        );
    }
    let failures: Vec<String> = checks
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(w, _)| scrub(w, &secrets))
        .collect();
    let slowest = steps
        .iter()
        .max_by_key(|s| s.latency_ms)
        .map(|s| (s.n, s.what.clone(), s.latency_ms));
    out.line(
        &format!(
            "\n{}  ({} steps{})",
            if failures.is_empty() { "sweep behaved as designed" } else { "sweep did NOT behave as designed" },
            steps.len(),
            slowest.as_ref().map(|(n, w, ms)| format!(", slowest #{n} {w} {ms} ms")).unwrap_or_default()
        ),
        json!({ "type": "result", "ok": failures.is_empty(), "steps": steps.len(), "failures": failures,
                "outcomes": steps.iter().map(|s| s.outcome.clone()).collect::<Vec<_>>() }),
    );
    drop(fallback);
    Ok(failures)
}
