//! The conventions a newcomer brings from curl, httpie, the MCP Inspector's CLI and wrk/hey,
//! each run against the demo's real rmcp box on 127.0.0.1: full MCP URLs, arguments from files,
//! stdin and pairs, results on stdout and diagnostics on stderr, `--format`, camelCase JSON,
//! `mcpServers` config files and `MCP_ENDPOINT`, the `-v` wire trace, help, completions and the
//! man page, one identity, and `bench`'s measurements.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;
use verifi_mcp_examples::kali::KaliServer;

/// A fresh temp folder for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("verifi-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn a_full_mcp_url_is_not_given_a_second_mcp() {
    let s = server();
    for url in [
        s.base_url(),
        format!("{}/mcp", s.base_url()),
        format!("{}/mcp/", s.base_url()),
    ] {
        let o = mcp(&["call", &url, "echo", "text=full url"]);
        assert_eq!(code(&o), 0, "{url}: {}", describe(&o));
        assert_eq!(json_line(stdout(&o).trim())["text"], json!("full url"));
    }
}

#[test]
fn a_404_names_the_url_tried_and_hints_at_exact_url() {
    let s = KaliServer::start_at("mounted-404", "/rpc").expect("start");
    let url = format!("{}/rpc", s.base_url());
    let o = mcp(&["call", &url, "echo", "text=x"]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let err = stderr(&o);
    let tried = format!("{}/rpc/mcp", s.base_url());
    assert!(
        err.lines()
            .any(|l| l.contains(&format!("HTTP 404 from {tried}")) && l.contains("--exact-url")),
        "{}",
        describe(&o)
    );
    // stdout still carries only the result.
    assert_eq!(json_line(stdout(&o).trim())["ok"], json!(false));
    let o = mcp(&["tools", &url]);
    assert!(
        stderr(&o).contains(&format!("HTTP 404 from {tried}")),
        "{}",
        describe(&o)
    );
    let o = mcp(&["call", &url, "echo", "text=x", "--exact-url"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
}

#[test]
fn arguments_from_a_file_stdin_and_httpie_pairs() {
    let s = server();
    let dir = temp_dir("args");
    // 200 KB of argument: over what one command-line argument may be on many systems.
    let big = "a".repeat(200 * 1024);
    let file = dir.join("args.json");
    std::fs::write(&file, json!({ "text": big }).to_string()).expect("write args");
    let at = format!("@{}", file.display());
    let o = mcp(&["call", &s.base_url(), "echo", "--args", &at]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(json_line(stdout(&o).trim())["text"].as_str(), Some(&*big));
    // The same file right after TOOL.
    let o = mcp(&["call", &s.base_url(), "echo", &at]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(json_line(stdout(&o).trim())["text"].as_str(), Some(&*big));

    let o = mcp_stdin(
        &["call", &s.base_url(), "echo", "--args", "-"],
        r#"{"text":"from stdin"}"#,
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(json_line(stdout(&o).trim())["text"], json!("from stdin"));

    // key=value is a string, key:=json any JSON; the box's run_command takes a number timeout.
    let o = mcp(&[
        "call",
        &s.base_url(),
        "run_command",
        "command=echo paired",
        "timeout:=30",
        "workspace=ws-pairs",
    ]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(
        json_line(stdout(&o).trim())["text"],
        json!("$ echo paired\n(exit 0)\npaired\n")
    );
    // A wrong type for a :=, a missing file, a bare word: bad input, nothing sent.
    let before = s.tool_calls();
    for bad in [
        vec!["timeout:=thirty"],
        vec!["@/nonexistent/verifi-args.json"],
        vec!["justaword"],
    ] {
        let mut a = vec!["call", "URL", "run_command"];
        a.extend(bad.iter().copied());
        let url = s.base_url();
        a[1] = &url;
        let o = mcp(&a);
        assert_eq!(code(&o), 2, "{a:?}: {}", describe(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", describe(&o));
        assert!(stdout(&o).is_empty(), "{}", describe(&o));
    }
    assert_eq!(
        s.tool_calls(),
        before,
        "bad arguments never reach the server"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn format_text_prints_the_tools_text_and_errors_go_to_stderr() {
    let s = server();
    let o = mcp(&[
        "call",
        &s.base_url(),
        "echo",
        "text=plain words",
        "--format",
        "text",
    ]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "plain words\n");
    assert!(stderr(&o).is_empty(), "{}", describe(&o));

    let o = mcp(&[
        "call",
        &s.base_url(),
        "nikto",
        "target=x",
        "--format",
        "text",
    ]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stdout(&o).contains("scanner not installed"),
        "the tool's own text: {}",
        describe(&o)
    );
    assert!(
        stderr(&o).contains("mcp: nikto: tool error in "),
        "{}",
        describe(&o)
    );

    let o = mcp(&["tools", &s.base_url(), "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let v = json_line(stdout(&o).trim());
    let echo = v["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo listed")
        .clone();
    assert!(echo["description"].is_string(), "{echo}");
    assert_eq!(echo["inputSchema"]["type"], json!("object"), "{echo}");

    let o = mcp(&["exec", &s.base_url(), "echo as json", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let v = json_line(stdout(&o).trim());
    assert_eq!(v["exitCode"], json!(0), "{v}");
    assert_eq!(v["output"], json!("as json\n"), "{v}");
}

#[test]
fn every_json_the_tools_print_is_camel_case() {
    let s = server();
    let mut printed = Vec::new();
    for args in [
        vec!["call", "URL", "echo", "text=x"],
        vec!["call", "URL", "nikto", "target=x"],
        vec!["exec", "URL", "echo x", "--format", "json"],
        vec!["bench", "URL", "--calls", "5", "--warmup", "0"],
    ] {
        let url = s.base_url();
        let a: Vec<&str> = args
            .iter()
            .map(|x| if *x == "URL" { &*url } else { x })
            .collect();
        let o = mcp(&a);
        for l in stdout(&o).lines() {
            printed.push(json_line(l));
        }
    }
    let o = mcp_stdin(
        &["batch", &s.base_url()],
        "{\"tool\":\"echo\",\"args\":{\"text\":\"b\"}}\n{\"tool\":\"nikto\"}\n",
    );
    for l in stdout(&o).lines() {
        printed.push(json_line(l));
    }
    // Bench's summary with a failing tool, for its error breakdown.
    let o = mcp(&[
        "bench",
        &s.base_url(),
        "--tool",
        "nikto",
        "--args",
        "target=x",
        "--calls",
        "3",
        "--warmup",
        "0",
    ]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let summary = json_line(stdout(&o).trim());
    assert_eq!(summary["errors"], json!(3), "{summary}");
    assert_eq!(
        summary["errorKinds"],
        json!({ "tool error: nikto: scanner not installed on box test (target x)": 3 }),
        "{summary}"
    );
    printed.push(summary);
    assert!(printed.len() >= 8, "{printed:?}");
    for v in &printed {
        assert_camel(v, &["errorKinds"], "$");
    }
}

#[test]
fn batch_reports_blank_lines_and_runs_lines_concurrently() {
    let s = server();
    let mut input = String::new();
    for i in 1..=12 {
        if i == 4 || i == 9 {
            input.push_str("   \n");
        } else {
            input.push_str(&format!(
                "{{\"tool\":\"echo\",\"args\":{{\"text\":\"n{i}\"}}}}\n"
            ));
        }
    }
    let o = mcp_stdin(&["batch", &s.base_url(), "--concurrency", "4"], &input);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let lines: Vec<Value> = stdout(&o).lines().map(json_line).collect();
    assert_eq!(
        lines.len(),
        11,
        "10 results + the summary: {}",
        describe(&o)
    );
    let mut seen: Vec<u64> = lines[..10]
        .iter()
        .map(|v| {
            assert_eq!(v["tool"], json!("echo"), "{v}");
            let n = v["line"].as_u64().expect("line number");
            assert_eq!(
                v["text"],
                json!(format!("n{n}")),
                "each result is its line's: {v}"
            );
            n
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, vec![1, 2, 3, 5, 6, 7, 8, 10, 11, 12]);
    let summary = &lines[10];
    assert_eq!(summary["lines"], json!(12), "{summary}");
    assert_eq!(summary["blankLines"], json!(2), "{summary}");
    assert_eq!(summary["ledger"]["toolCalls"], json!(10), "{summary}");
    let err = stderr(&o);
    for n in [4, 9] {
        assert!(
            err.contains(&format!("line {n} is blank")),
            "blank line {n} reported: {}",
            describe(&o)
        );
    }
    assert_eq!(s.tool_calls(), 10);
}

#[test]
fn config_files_and_the_environment_name_the_server() {
    let s = server();
    let dir = temp_dir("config");
    let cfg = dir.join("mcp.json");
    let token = "cfg-header-value-7f3a9";
    std::fs::write(
        &cfg,
        json!({ "mcpServers": {
            "kali": { "type": "http", "url": format!("{}/mcp", s.base_url()),
                      "headers": { "X-Tenant-Token": token } },
            "local": { "command": "/nonexistent/stdio-server", "args": ["--x"] }
        }})
        .to_string(),
    )
    .expect("write config");
    let c = cfg.to_string_lossy().into_owned();
    let o = mcp(&["call", "--config", &c, "--server", "kali", "headers"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let out = stdout(&o);
    assert!(
        out.contains("x-tenant-token") && !out.contains(token),
        "the file's header is sent and its value redacted: {}",
        describe(&o)
    );
    // A `command` entry is run over stdio (this one cannot start, and says so).
    let o = mcp(&["tools", "--config", &c, "--server", "local"]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stderr(&o).contains("cannot start") && stderr(&o).contains("/nonexistent/stdio-server"),
        "{}",
        describe(&o)
    );
    let o = mcp(&["tools", "--config", &c, "--server", "nope"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("kali, local"), "{}", describe(&o));

    // MCP_ENDPOINT stands in for ENDPOINT; an ENDPOINT given wins over it.
    let env = [("MCP_ENDPOINT", s.base_url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = mcp_env(&["call", "echo", "text=from env"], "", &env);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(json_line(stdout(&o).trim())["text"], json!("from env"));
    let o = mcp_env(&["exec", "echo env exec"], "", &env);
    assert_eq!(stdout(&o), "env exec\n", "{}", describe(&o));
    let dead = [("MCP_ENDPOINT", "http://127.0.0.1:1")];
    let o = mcp_env(&["call", &s.base_url(), "echo", "text=given"], "", &dead);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // Neither: one line naming every way to give it.
    let o = mcp_env(&["call", "echo"], "", &[("MCP_ENDPOINT", "")]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    let err = stderr(&o);
    for want in ["missing ENDPOINT", "--config", "--manifest", "MCP_ENDPOINT"] {
        assert!(err.contains(want), "{want}: {}", describe(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn verbose_prints_a_redacted_wire_trace_on_stderr_only() {
    let s = server();
    let token = "Bearer trace-secret-0d9c1";
    let secret = "env-secret-value-55ab7e";
    let o = mcp_env(
        &[
            "call",
            &s.base_url(),
            "echo",
            &format!("text=echo {secret}"),
            "-H",
            &format!("Authorization: {token}"),
            "-H",
            "X-Custom: custom-header-val",
            "-v",
        ],
        "",
        &[("TRACE_TEST_API_KEY", secret)],
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(out.lines().count(), 1, "stdout is the result only: {out}");
    assert_eq!(json_line(out.trim())["text"], json!("echo [REDACTED]"));
    for want in [
        "* #1 connected to 127.0.0.1:",
        "> #1 POST /mcp HTTP/1.1",
        "> #1 user-agent: verifi-mcp/",
        "> #1 authorization: [REDACTED]",
        "> #1 x-custom: [REDACTED]",
        // The era probe, then the call in the 2026 era with its headers.
        "\"method\":\"server/discover\"",
        "\"method\":\"tools/call\"",
        "> #1 mcp-method: tools/call",
        "< #1 HTTP/1.1 200 OK",
        "< #1 content-type: text/event-stream",
        "< #1 data: {\"jsonrpc\":\"2.0\"",
    ] {
        assert!(
            err.to_ascii_lowercase()
                .contains(&want.to_ascii_lowercase()),
            "{want:?} in the trace: {err}"
        );
    }
    for secret in [token, "trace-secret-0d9c1", secret, "custom-header-val"] {
        assert!(
            !err.contains(secret) && !out.contains(secret),
            "{secret} leaked"
        );
    }
    // Without -v, no trace.
    let o = mcp(&["call", &s.base_url(), "echo", "text=quiet"]);
    assert!(stderr(&o).is_empty(), "{}", describe(&o));
}

#[test]
fn every_help_has_examples_and_explains_its_words() {
    for sub in [
        "",
        "tools",
        "call",
        "exec",
        "batch",
        "bench",
        "completions",
        "man",
    ] {
        let args: Vec<&str> = if sub.is_empty() {
            vec!["--help"]
        } else {
            vec![sub, "--help"]
        };
        let o = mcp(&args);
        assert_eq!(code(&o), 0, "{args:?}: {}", describe(&o));
        assert!(
            stdout(&o).contains("Examples:"),
            "{args:?}: {}",
            describe(&o)
        );
    }
    let top = stdout(&mcp(&["--help"]));
    assert!(top.contains("A slot is"), "slot explained: {top}");
    let batch = stdout(&mcp(&["batch", "--help"]));
    assert!(
        batch.contains("ledger (the") && batch.contains("evidenceBytes, the bytes"),
        "ledger and evidence bytes explained: {batch}"
    );
    let o = run_exe(env!("CARGO_BIN_EXE_demo"), &["--help"], "", &[]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let demo = stdout(&o);
    assert!(
        demo.contains("Examples:") && demo.contains("--serve") && demo.contains("ledger (the"),
        "{demo}"
    );
    let o = run_exe(env!("CARGO_BIN_EXE_demo"), &["--bogus"], "", &[]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
}

#[test]
fn clap_errors_name_what_is_missing_in_one_line() {
    let o = mcp(&["call"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("<TOOL>"), "names the missing argument: {err}");
    let o = mcp(&["bench", "http://127.0.0.1:1", "--concurrency", "many"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--concurrency"), "{}", describe(&o));
}

#[test]
fn completions_and_the_man_page() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef mcp"),
        ("fish", "complete -c mcp"),
    ] {
        let o = mcp(&["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}: {}", describe(&o));
        let out = stdout(&o);
        assert!(out.contains(marker), "{shell}: {out}");
        assert!(out.contains("bench"), "{shell} completes subcommands");
    }
    let o = mcp(&["completions", "tcsh"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    let o = mcp(&["man"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let man = stdout(&o);
    assert!(man.starts_with(".ie") || man.contains(".TH mcp"), "{man}");
    assert!(man.contains("completions"), "{man}");
}

#[test]
fn version_user_agent_and_client_info_say_one_thing() {
    let version = env!("CARGO_PKG_VERSION");
    let o = mcp(&["-V"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o).trim(), format!("mcp {version}"));
    let o = mcp(&["--version"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let long = stdout(&o);
    assert!(long.starts_with(&format!("mcp {version}\n")), "{long}");
    assert!(
        long.contains(&format!("User-Agent: verifi-mcp/{version}"))
            && long.contains("clientInfo: verifi-harness-sdk 1.0.0")
            && long.contains("not bumped with the crate"),
        "the long version names both and says why they differ: {long}"
    );

    // What the server sees: the User-Agent carries this version, clientInfo the
    // TypeScript harness SDK's handshake string, and the long version says both and why.
    let s = server();
    let o = mcp(&["call", &s.base_url(), "headers"]);
    let text = json_line(stdout(&o).trim())["text"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(
        text.contains(&format!("user-agent: verifi-mcp/{version}")),
        "{text}"
    );
    let o = mcp(&["call", &s.base_url(), "session_info"]);
    let info = json_line(stdout(&o).trim())["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(info.contains("client: verifi-harness-sdk 1.0.0"), "{info}");
}

#[test]
fn bench_checks_the_tool_first_and_runs_for_a_duration() {
    let s = server();
    let o = mcp(&["bench", &s.base_url(), "--tool", "no_such_tool"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    let err = stderr(&o);
    assert!(
        err.contains("\"no_such_tool\" is not on this server") && err.contains("echo"),
        "{}",
        describe(&o)
    );
    assert_eq!(s.tool_calls(), 0, "nothing is timed against a missing tool");

    let t0 = std::time::Instant::now();
    let o = mcp(&[
        "bench",
        &s.base_url(),
        "--duration",
        "600ms",
        "--concurrency",
        "2",
        "--warmup",
        "3",
    ]);
    let took = t0.elapsed();
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let v = json_line(stdout(&o).trim());
    let calls = v["calls"].as_u64().expect("calls");
    assert!(calls > 0, "{v}");
    assert!(
        v["durationMs"].as_f64().unwrap_or(0.0) >= 600.0,
        "ran for the duration: {v}"
    );
    assert!(took.as_secs() < 60, "stopped after its duration: {took:?}");
    assert_eq!(
        s.tool_calls(),
        calls + 3,
        "3 warm-up calls, then the timed ones"
    );
    let o = mcp(&["bench", &s.base_url(), "--duration", "10 parsecs"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
}

/// Runs `mcp ARGS` on a pseudo-terminal (util-linux `script`), stdout and stderr both on it.
fn mcp_on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> String {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_mcp"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &quoted.join(" "), "/dev/null"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = run_command(cmd, "");
    assert_eq!(
        code(&o),
        0,
        "needs `script` (util-linux) to run mcp on a terminal: {}",
        describe(&o)
    );
    stdout(&o)
}

#[test]
fn on_a_terminal_json_is_pretty_and_colored_and_bench_draws_a_histogram() {
    let s = server();
    let url = s.base_url();
    let out = mcp_on_a_terminal(
        &["call", &url, "echo", "text=tty", "--format", "json"],
        &[("NO_COLOR", "")],
    );
    assert!(
        out.contains("\x1b[34m\"text\"\x1b[0m: \x1b[32m\"tty\"\x1b[0m"),
        "colored keys and strings: {out:?}"
    );
    assert!(out.lines().count() >= 7, "one key a line: {out:?}");
    let plain = mcp_on_a_terminal(
        &["call", &url, "echo", "text=tty", "--format", "json"],
        &[("NO_COLOR", "1")],
    );
    assert!(!plain.contains('\x1b'), "NO_COLOR: {plain:?}");
    assert!(plain.contains("\"text\": \"tty\""), "{plain:?}");
    let bench = mcp_on_a_terminal(
        &[
            "bench", &url, "--calls", "30", "--warmup", "0", "--format", "text",
        ],
        &[],
    );
    assert!(bench.contains("latency histogram (ms):"), "{bench:?}");
    assert!(bench.contains("30 calls to echo"), "{bench:?}");
}
