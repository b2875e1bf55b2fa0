//! The `mcp` command line with stdio servers: `--stdio 'CMD ARGS…'` and a manifest slot that
//! names a `command`, for every command (call, tools, resources, read, prompts, prompt, ping,
//! batch); an exited child's error; a batch uses one child and one handshake; the command
//! line's memory stays bounded while a child writes 40 MiB without a newline.

mod support;

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most one `mcp` invocation may take (a hang guard).
const RUN_BOUND: Duration = Duration::from_secs(60);

fn mcp(args: &[&str]) -> Output {
    support::run_mcp(args, &[], RUN_BOUND)
}

fn fault(mode: &str) -> String {
    format!("{} {mode}", env!("CARGO_BIN_EXE_verifi-stdio-fault"))
}

fn rmcp_stdio() -> String {
    format!("{} --stdio", env!("CARGO_BIN_EXE_verifi-test-server"))
}

fn stdout_json(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON value ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn every_command_works_with_stdio() {
    let server = rmcp_stdio();
    let s = server.as_str();
    let o = mcp(&["call", "--stdio", s, "echo", "text=hello stdio"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = stdout_json(&o);
    assert_eq!(v["ok"], true);
    assert_eq!(v["text"], "hello stdio");

    let o = mcp(&["tools", "--stdio", s]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let names = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(names.lines().any(|l| l == "echo"), "{names}");

    let o = mcp(&["resources", "--stdio", s]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("test://notes/readme"));

    let o = mcp(&["read", "--stdio", s, "test://notes/readme"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("hello from the readme"));

    let o = mcp(&["prompts", "--stdio", s]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("review"));

    let o = mcp(&["prompt", "--stdio", s, "review", r#"{"topic":"TLS"}"#]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Review the TLS findings."));

    let o = mcp(&["ping", "--stdio", s]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(stdout_json(&o)["ok"], true);

    // Prompt arguments as key=value pairs, and each command's text for a person.
    let o = mcp(&[
        "prompt",
        "--stdio",
        s,
        "review",
        "topic=TLS",
        "--format",
        "text",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains(": Review the TLS findings."), "{text}");
    for (args, want) in [
        (vec!["resources"], "test://notes/readme"),
        (vec!["read", "test://notes/readme"], "hello from the readme"),
        (vec!["prompts"], "review("),
    ] {
        let mut a = vec![args[0], "--stdio", s, "--format", "text"];
        a.extend(&args[1..]);
        let o = mcp(&a);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(text.contains(want), "{args:?}: {text}");
        assert!(!text.trim_start().starts_with('{'), "not JSON: {text}");
    }
}

#[test]
fn a_manifest_slot_with_a_command() {
    let dir = std::env::temp_dir().join(format!("verifi-stdio-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("run.json");
    let fill = serde_json::json!({ "slotFills": { "local": {
        "command": [env!("CARGO_BIN_EXE_verifi-stdio-fault"), "env"],
        "env": { "SLOT_VAR": "from-the-manifest" },
        "cwd": dir.display().to_string(),
    } } });
    std::fs::write(&manifest, fill.to_string()).unwrap();
    let m = manifest.display().to_string();
    let o = mcp(&["call", "--manifest", &m, "--slot", "local", "echo"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = stdout_json(&o)["text"].as_str().unwrap_or("").to_owned();
    assert!(text.contains("SLOT_VAR=from-the-manifest"), "{text}");
    let cwd = text.lines().find_map(|l| l.strip_prefix("cwd=")).unwrap();
    assert_eq!(
        std::fs::canonicalize(cwd).unwrap(),
        std::fs::canonicalize(&dir).unwrap()
    );
    let o = mcp(&["tools", "--manifest", &m, "--slot", "local"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // Piped, tools prints names one a line.
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "echo");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-v` traces the lines sent to and read from a stdio server, redacted.
#[test]
fn verbose_traces_stdio_lines() {
    let server = fault("plain");
    let o = mcp(&["call", "-v", "--stdio", &server, "echo", "text=traced"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("connected to stdio:"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("> #") && l.contains("\"tools/call\"") && l.contains("traced")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("< #") && l.contains("\"text\":\"traced\"")),
        "{err}"
    );
    assert!(
        !err.lines().any(|l| l.trim().is_empty()),
        "no blank lines: {err}"
    );
}

/// A real server (the official Python SDK's, behind `sh`) that prints a log line on stdout
/// before it serves, as Kali-style servers do: the line is skipped (shown by `-v`), and its
/// tools are listed, as the official SDK clients list them.
#[test]
fn a_server_that_logs_on_stdout_is_listed_and_its_log_line_shown_by_verbose() {
    if support::peer_unavailable(support::PeerKind::PyStateful) {
        return;
    }
    let python = support::py_venv().join("bin/python");
    let script = support::workspace_root().join("tests/peers/py/server.py");
    let server = format!(
        "sh -c 'echo \"INFO: MCP server starting on stdout\"; exec {} {} stdio'",
        python.display(),
        script.display()
    );
    let o = mcp(&["tools", "--stdio", &server]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let names = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(names.lines().any(|l| l == "echo"), "{names}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("INFO: MCP server"), "only -v shows it: {err}");

    let o = mcp(&["tools", "-v", "--stdio", &server]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().any(|l| l
            == "! stdio: skipped a line that is not JSON-RPC: INFO: MCP server starting on stdout"),
        "{err}"
    );
}

/// `tools --format json` prints each tool as the server sent it: `execution` and a field no
/// client knows are kept, and nothing is added (no default `inputSchema` fields).
#[test]
fn tools_json_prints_each_tool_as_the_server_sent_it() {
    let o = mcp(&["tools", "--stdio", &fault("plain"), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = stdout_json(&o);
    assert_eq!(
        v,
        serde_json::json!({"tools": [{
            "name": "echo",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"},
            "x-vendor-extension": {"owner": "fault", "rank": 3}
        }]}),
    );
}

/// An mcpServers config entry with a `command` (the format desktop hosts share) runs over stdio.
#[test]
fn a_config_file_command_entry() {
    let dir = std::env::temp_dir().join(format!("verifi-stdio-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mcp.json");
    let cfg = serde_json::json!({ "mcpServers": { "local": {
        "command": env!("CARGO_BIN_EXE_verifi-stdio-fault"),
        "args": ["env"],
        "env": { "FROM_CONFIG": "yes-it-is" },
    } } });
    std::fs::write(&file, cfg.to_string()).unwrap();
    let f = file.display().to_string();
    let o = mcp(&["call", "--config", &f, "--server", "local", "echo"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = stdout_json(&o)["text"].as_str().unwrap_or("").to_owned();
    assert!(text.contains("FROM_CONFIG=yes-it-is"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exited_child_is_an_unreachable_server_with_its_status_and_stderr() {
    let server = fault("exit-at-start");
    let o = mcp(&["call", "--stdio", &server, "echo", r#"{"text":"x"}"#]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v = stdout_json(&o);
    assert_eq!(v["ok"], false);
    assert_eq!(v["kind"]["type"], "unreachable");
    let e = v["error"].as_str().unwrap_or("");
    assert!(e.starts_with("the server process exited (status 7)"), "{e}");
    assert!(e.contains("cannot load config"), "{e}");
    // The timeline on stderr says it too.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines()
            .any(|l| l.contains("tool_error") && l.contains("exited (status 7)")),
        "{err}"
    );
    // A command that cannot start says so.
    let o = mcp(&["call", "--stdio", "/nonexistent/mcp-server --x", "echo"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e = stdout_json(&o)["error"].as_str().unwrap_or("").to_owned();
    assert!(
        e.contains("cannot start") && e.contains("/nonexistent/mcp-server"),
        "{e}"
    );
    // A command line that is not one is a usage error.
    let o = mcp(&["call", "--stdio", "x 'unclosed", "echo"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn a_batch_uses_one_child_and_one_handshake() {
    let server = fault("plain");
    let mut child = support::mcp_command()
        .args(["batch", "--stdio", &server, "--concurrency", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::from("{\"tool\":\"stats\"}\n");
    for i in 0..12 {
        input.push_str(&format!(
            "{{\"tool\":\"echo\",\"args\":{{\"text\":\"b{i}\"}}}}\n"
        ));
    }
    input.push_str("{\"tool\":\"stats\"}\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = wait_bounded(child);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    let results: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &Value| v.get("line").is_some())
        .collect();
    assert_eq!(results.len(), 14, "{out}");
    let mut stats = Vec::new();
    for r in &results {
        assert_eq!(r["ok"], true, "{r}");
        if r["tool"] == "stats" {
            stats.push(r["text"].as_str().unwrap_or("").to_owned());
        }
    }
    assert_eq!(stats.len(), 2);
    assert!(stats[0].starts_with("initializes=1 pid="), "{stats:?}");
    assert_eq!(stats[0], stats[1], "one child, one handshake");
}

/// Peak resident memory of `mcp` while the child writes 40 MiB without a newline: the line is
/// capped (at the reply cap, 16 MiB by default), so the command line stays under 40 MiB.
#[test]
fn a_line_without_a_newline_is_capped_and_memory_stays_bounded() {
    let server = fault("long-line");
    let mut child = support::mcp_command()
        .args(["call", "--stdio", &server, "echo", "text=x"])
        .env("FAULT_BYTES", (40u64 << 20).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak_kib = 0u64;
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < RUN_BOUND, "mcp did not end");
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e = stdout_json(&o)["error"].as_str().unwrap_or("").to_owned();
    assert!(e.contains("byte cap"), "{e}");
    assert!(peak_kib > 0, "no memory reading of mcp");
    assert!(peak_kib < 40 * 1024, "mcp peaked at {peak_kib} KiB");
}

fn wait_bounded(mut child: std::process::Child) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > RUN_BOUND {
            let _ = child.kill();
            panic!("mcp did not end within {RUN_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}
