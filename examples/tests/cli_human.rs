//! The `mcp` command line as a person meets it (issue 29, items 5 to 10), run as the built
//! binary against the demo's real rmcp box and real stdio children: arguments typed by the
//! tool's schema, text on a terminal (a pseudo-terminal from util-linux `script`), `exec
//! --tool`, a bench that stops on a failing warm-up and counts failures, failures told in words
//! that say what happened, and help that says what the binary does.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("verifi-human-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs `mcp ARGS` on a pseudo-terminal (util-linux `script`): stdout and stderr both on it.
/// The exit status is `script`'s (`-e`: the command's).
fn on_a_terminal(args: &[&str]) -> (i32, String) {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_mcp"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &quoted.join(" "), "/dev/null"]);
    cmd.env("NO_COLOR", "1");
    let o = run_command(cmd, "");
    (code(&o), stdout(&o).replace("\r\n", "\n"))
}

/// The text the `typed` tool answered: its arguments, as the server received them.
fn received(o: &std::process::Output) -> Value {
    let v = json_line(stdout(o).trim());
    assert_eq!(v["ok"], json!(true), "{}", describe(o));
    serde_json::from_str(v["text"].as_str().unwrap_or("")).expect("typed answers JSON")
}

#[test]
fn key_value_pairs_are_typed_by_the_tools_schema_and_batch_and_prompt_take_mcps_spellings() {
    let s = server();
    let url = s.base_url();
    // integer, number, boolean, ["integer","null"] and string, as the schema says.
    let o = mcp(&[
        "call",
        &url,
        "typed",
        "count=3",
        "ratio=1.5",
        "loud=true",
        "limit=null",
        "label=7",
    ]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(
        received(&o),
        json!({"count": 3, "ratio": 1.5, "loud": true, "limit": null, "label": "7"})
    );
    let o = mcp(&["call", &url, "typed", "limit=12"]);
    assert_eq!(received(&o), json!({"limit": 12}));
    // key:=json still forces JSON, whatever the schema says.
    let o = mcp(&["call", &url, "typed", "count:=\"x\""]);
    assert_eq!(received(&o), json!({"count": "x"}));
    // A value that is not of the schema's type: bad input naming the key and the type, and
    // no call is made.
    let before = s.tool_calls();
    for (pair, key, ty) in [
        ("count=three", "count", "integer"),
        ("ratio=fast", "ratio", "number"),
        ("loud=yes", "loud", "boolean"),
        ("limit=none", "limit", "integer (or null)"),
    ] {
        let o = mcp(&["call", &url, "typed", pair]);
        assert_eq!(code(&o), 2, "{}", describe(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("the tool's schema says {key} is {ty}")),
            "{pair}: {}",
            describe(&o)
        );
        assert!(stdout(&o).is_empty(), "{}", describe(&o));
    }
    assert_eq!(s.tool_calls(), before, "no call with bad arguments");
    // bench types its --args pairs the same way.
    let o = mcp(&[
        "bench", &url, "--tool", "typed", "--args", "count=2", "--calls", "3", "--warmup", "1",
    ]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // batch: MCP's own {"name", "arguments"} as well as {"tool", "args"}.
    let o = mcp_stdin(
        &["batch", &url],
        "{\"name\":\"echo\",\"arguments\":{\"text\":\"native\"}}\n\
         {\"tool\":\"echo\",\"args\":{\"text\":\"short\"}}\n\
         {\"name\":\"echo\",\"arguments\":{\"text\":\"a\"},\"args\":{\"text\":\"b\"}}\n",
    );
    let lines: Vec<Value> = stdout(&o).lines().map(json_line).collect();
    assert_eq!(lines[0]["text"], json!("native"), "{}", describe(&o));
    assert_eq!(lines[1]["text"], json!("short"), "{}", describe(&o));
    assert_eq!(lines[2]["ok"], json!(false), "{}", describe(&o));
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap_or("")
            .contains("give \"args\" or \"arguments\", not both"),
        "{}",
        describe(&o)
    );
    // prompt takes key=value pairs: against a box without prompts the server's refusal comes
    // back (exit 1), not "tool arguments are not JSON" (exit 2).
    let o = mcp(&["prompt", &url, "review", "city=Paris"]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(!stderr(&o).contains("not JSON"), "{}", describe(&o));
}

#[test]
fn on_a_terminal_tools_and_call_speak_to_a_person_and_piped_output_stays_json() {
    let s = server();
    let url = s.base_url();
    let (c, out) = on_a_terminal(&["tools", &url]);
    assert_eq!(c, 0, "{out}");
    assert!(
        out.contains("echo(text?: string)\n    Returns its text argument"),
        "{out}"
    );
    assert!(
        out.contains("run_command(command: string, workspace: string, timeout?: integer)"),
        "{out}"
    );
    assert!(
        out.contains("typed(count?: integer, label?: string, limit?: integer|null"),
        "{out}"
    );
    let (c, out) = on_a_terminal(&["call", &url, "echo", "text=hello person"]);
    assert_eq!(c, 0, "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("hello person"), "{out}");
    let status = lines.next().unwrap_or("");
    assert!(
        status.starts_with("mcp: echo: ok in ") && status.ends_with(" ms"),
        "{out}"
    );
    // --format json overrides on a terminal; --format text overrides when piped.
    let (c, out) = on_a_terminal(&["call", &url, "echo", "text=x", "--format", "json"]);
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("\"text\": \"x\""), "{out}");
    let (_, out) = on_a_terminal(&["ping", &url]);
    assert!(out.starts_with("pong in "), "{out}");
    let o = mcp(&["ping", &url, "--format", "text"]);
    assert!(stdout(&o).starts_with("pong in "), "{}", describe(&o));
    let o = mcp(&["ping", &url]);
    assert_eq!(json_line(stdout(&o).trim())["ok"], json!(true));
    let o = mcp(&["call", &url, "echo", "text=piped"]);
    assert_eq!(json_line(stdout(&o).trim())["text"], json!("piped"));
    assert!(stderr(&o).is_empty(), "{}", describe(&o));
    let o = mcp(&["tools", &url, "--format", "text"]);
    assert!(
        stdout(&o).contains("echo(text?: string)"),
        "{}",
        describe(&o)
    );
}

#[test]
fn exec_takes_the_tool_name_and_a_missing_one_is_bad_input_on_stderr() {
    let s = server();
    let url = s.base_url();
    let o = mcp(&["exec", &url, "id", "--tool", "execute_command"]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stdout(&o).is_empty(), "never on stdout: {}", describe(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no tool \"execute_command\"")
            && err.contains("look like a command runner: run_command"),
        "{}",
        describe(&o)
    );
    assert!(!err.contains("echo"), "only command runners: {err}");
    let o = mcp(&["exec", &url, "echo named", "--tool", "run_command"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "named\n");
}

#[test]
fn bench_stops_on_a_failing_warm_up_and_counts_failures_by_reason() {
    let s = server();
    let url = s.base_url();
    let o = mcp(&[
        "bench", &url, "--tool", "nikto", "--args", "target=x", "--warmup", "3",
    ]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(stdout(&o).is_empty(), "{}", describe(&o));
    assert!(
        stderr(&o).contains(
            "bench stopped: warm-up call 1 of 3 to nikto failed: tool error: nikto: scanner not \
             installed"
        ),
        "{}",
        describe(&o)
    );
    assert_eq!(s.tool_calls(), 1, "the first failure stops it");
    // Without a warm-up: hundreds of failures, counted, not a line each.
    let o = mcp(&[
        "bench",
        &url,
        "--tool",
        "nikto",
        "--args",
        "target=x",
        "--warmup",
        "0",
        "--duration",
        "1s",
    ]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let v = json_line(stdout(&o).trim());
    let n = v["errors"].as_u64().unwrap_or(0);
    assert!(n > 20, "{v}");
    assert_eq!(
        v["errorKinds"],
        json!({ "tool error: nikto: scanner not installed on box test (target x)": n }),
        "{v}"
    );
    let err = stderr(&o);
    assert!(err.lines().count() <= 3, "{err}");
    assert!(err.contains(&format!("(x{n})")), "{err}");
}

#[test]
fn failures_say_what_happened_and_the_flag_that_changes_it() {
    let s = server();
    let url = s.base_url();
    let misleading = "no server could serve this tool";
    // A timeout.
    let o = mcp(&[
        "call",
        &url,
        "run_command",
        "command=sleep 5",
        "workspace=w1",
        "timeout:=10",
        "--timeout-ms",
        "800",
    ]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let v = json_line(stdout(&o).trim());
    assert_eq!(
        v["error"],
        json!("the call timed out after 800 ms (--timeout-ms)"),
        "{v}"
    );
    assert!(!stderr(&o).contains(misleading), "{}", describe(&o));
    // A request the server finds too large: rmcp's 4 MiB limit answers 413.
    let dir = temp_dir("413");
    let big = dir.join("big.json");
    std::fs::write(&big, json!({ "text": "a".repeat(5 << 20) }).to_string()).expect("write");
    let arg = format!("@{}", big.display());
    let o = mcp(&["call", &url, "echo", "--args", &arg]);
    let v = json_line(stdout(&o).trim());
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("the server refused the request as too large (413)"),
        "{v}"
    );
    assert!(!stderr(&o).contains(misleading), "{}", describe(&o));
    // A request over the client's own cap names the flag that raises it.
    let o = mcp(&[
        "call",
        &url,
        "echo",
        "--args",
        &arg,
        "--max-request-bytes",
        "4096",
    ]);
    let v = json_line(stdout(&o).trim());
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .contains("(raise it with --max-request-bytes)"),
        "{v}"
    );
    // A refused connection names where.
    let o = mcp(&["call", "http://127.0.0.1:9", "echo", "{}"]);
    let v = json_line(stdout(&o).trim());
    assert_eq!(
        v["error"],
        json!("connection refused by 127.0.0.1:9"),
        "{v}"
    );
    assert!(!stderr(&o).contains(misleading), "{}", describe(&o));
    // A stdio child that exits.
    let o = mcp(&[
        "call",
        "--stdio",
        "sh -c 'echo boom >&2; exit 3'",
        "echo",
        "{}",
    ]);
    let v = json_line(stdout(&o).trim());
    let e = v["error"].as_str().unwrap_or("");
    assert!(
        e.starts_with("the server process exited (status 3)") && e.contains("boom"),
        "{v}"
    );
    assert!(!e.contains("reply has no body"), "{v}");
    // A stalled handshake is blamed on the handshake, not on tools/list.
    for (era, what) in [
        ("legacy", "(initialize)"),
        ("auto", "(the server/discover probe, then initialize)"),
    ] {
        let o = mcp(&[
            "tools",
            "--stdio",
            "sleep 30",
            "--timeout-ms",
            "800",
            "--era",
            era,
        ]);
        assert_eq!(code(&o), 1, "{}", describe(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "the server did not answer the handshake {what} within 800 ms"
            )),
            "{}",
            describe(&o)
        );
        assert!(!err.contains("tools/list"), "{}", describe(&o));
    }
    // A server without resources or prompts says so.
    let o = mcp(&["resources", &url]);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stderr(&o).contains("this server offers no resources"),
        "{}",
        describe(&o)
    );
    assert!(!stderr(&o).contains("-32601"), "{}", describe(&o));
    let o = mcp(&["prompts", &url]);
    assert!(
        stderr(&o).contains("this server offers no prompts"),
        "{}",
        describe(&o)
    );
    // -v: one "connected" per stdio child, however many messages it is sent (`cat` answers
    // each request with itself, so the probe and the handshake both go out).
    let o = mcp(&["ping", "--stdio", "cat", "--timeout-ms", "5000", "-v"]);
    let err = stderr(&o);
    let sent = err.lines().filter(|l| l.starts_with("> #")).count();
    assert!(sent >= 2, "{}", describe(&o));
    assert_eq!(
        err.lines().filter(|l| l.contains("connected to")).count(),
        1,
        "{}",
        describe(&o)
    );
    assert!(
        err.lines()
            .filter(|l| l.starts_with("> #") || l.starts_with("< #"))
            .all(|l| l.starts_with("> #1 ") || l.starts_with("< #1 ")),
        "one child, one number: {err}"
    );
    // Usage lines say mcp whatever the binary file is called.
    let dir = temp_dir("name");
    let link = dir.join("mcp-cli");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_mcp"), &link).expect("symlink");
    let o = run_exe(link.to_str().unwrap_or(""), &["tools", "--help"], "", &[]);
    assert!(stdout(&o).contains("Usage: mcp tools"), "{}", describe(&o));
    assert!(!stdout(&o).contains("mcp-cli"), "{}", describe(&o));
}

#[test]
fn help_is_true_flags_where_they_apply_endpointless_forms_and_one_server_configs() {
    let help = |args: &[&str]| stdout(&mcp(args));
    let call = help(&["call", "--help"]);
    assert!(
        call.contains("--raw") && call.contains("--check-output"),
        "{call}"
    );
    assert!(call.contains("bad input (exit 2)"), "{call}");
    for cmd in ["tools", "exec", "batch", "bench", "resources", "ping"] {
        let h = help(&[cmd, "--help"]);
        assert!(
            !h.contains("--raw") && !h.contains("--check-output"),
            "{cmd}: {h}"
        );
    }
    assert!(help(&["task", "wait", "--help"]).contains("--raw"));
    for cmd in ["resources", "read", "prompts", "prompt", "ping"] {
        let h = help(&[cmd, "--help"]);
        for form in ["MCP_ENDPOINT", "--config", "--stdio", "--manifest"] {
            assert!(h.contains(form), "{cmd} --help names {form}: {h}");
        }
        assert!(
            h.contains(&format!("Usage: mcp {cmd} [OPTIONS] [ENDPOINT]")),
            "{h}"
        );
    }
    // A config file with one server needs no --server; with two it names them.
    let s = server();
    let dir = temp_dir("config");
    let one = dir.join("one.json");
    std::fs::write(
        &one,
        json!({"mcpServers": {"kali": {"url": format!("{}/mcp", s.base_url())}}}).to_string(),
    )
    .expect("write");
    let one = one.to_str().unwrap_or("");
    let o = mcp(&["call", "--config", one, "echo", "text=only"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(json_line(stdout(&o).trim())["text"], json!("only"));
    let two = dir.join("two.json");
    std::fs::write(
        &two,
        json!({"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp"}, "b": {"command": "x"}}})
            .to_string(),
    )
    .expect("write");
    let o = mcp(&["ping", "--config", two.to_str().unwrap_or("")]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(
        stderr(&o).contains("has 2 servers; name one with --server: a, b"),
        "{}",
        describe(&o)
    );
}
