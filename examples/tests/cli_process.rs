//! The `mcp` binary as a process among processes (issue 29): signals end it cleanly and leave
//! no stdio server behind, `-e/--env` and `--env-pass` reach a stdio server, and a closed
//! stdout ends it quietly. Each drives the built binary; the stdio servers are real processes
//! (a shell that ignores SIGTERM and stdin's end, a small Python MCP server).

mod support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{code, describe, mcp_env, stderr, stdout};

const MCP: &str = env!("CARGO_BIN_EXE_mcp");

/// A stdio MCP server in Python: `getenv {name}` answers `NAME=value`; `slow` sleeps a minute.
/// It ignores SIGTERM, like a server busy in a scan.
const SERVER_PY: &str = r#"
import sys, json, os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "env-test", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "getenv", "inputSchema": {"type": "object"}},
                       {"name": "slow", "inputSchema": {"type": "object"}}]}
    elif meth == "tools/call" and m["params"]["name"] == "getenv":
        n = m["params"]["arguments"]["name"]
        r = {"content": [{"type": "text", "text": n + "=" + os.environ.get(n, "<unset>")}]}
    elif meth == "tools/call":
        time.sleep(60)
        r = {"content": []}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

fn server_file() -> String {
    let dir = std::env::temp_dir().join(format!("mcp-cli-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("server.py");
    std::fs::write(&f, SERVER_PY).unwrap();
    f.to_string_lossy().into_owned()
}

fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn py() -> &'static str {
    python().expect("this test needs python3 for its stdio MCP server")
}

// ---- signals -------------------------------------------------------------------------------

/// (pid, state, ppid, pgrp) of every process, from /proc.
fn processes() -> Vec<(u32, char, u32, u32)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(s), Some(pp), Some(pg)) = (f.first(), f.get(1), f.get(2)) {
            all.push((
                pid,
                s.chars().next().unwrap_or('?'),
                pp.parse().unwrap_or(0),
                pg.parse().unwrap_or(0),
            ));
        }
    }
    all
}

/// The live (not zombie) members of process group `pgrp`.
fn group_members(pgrp: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, s, _, g)| *g == pgrp && *s != 'Z')
        .map(|(p, ..)| p)
        .collect()
}

/// Waits (bounded) for `parent`'s child process whose group it leads (the stdio server), and
/// for that group to hold `members` live processes.
fn server_group(parent: u32, members: usize) -> u32 {
    let t0 = Instant::now();
    loop {
        let leader = processes()
            .into_iter()
            .find(|(p, s, pp, g)| *pp == parent && p == g && *s != 'Z')
            .map(|(p, ..)| p);
        if let Some(g) = leader
            && group_members(g).len() >= members
        {
            return g;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "mcp started no stdio server in its own group"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(MCP)
        .args(args)
        .env("MCP_TOKEN_STORE", "memory")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcp")
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(ok.success());
}

/// Waits (bounded) for `child` to exit: its exit code, stderr, and how long it took.
fn exit_of(mut child: Child, bound: Duration) -> (Option<i32>, String, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (s.code(), err, t0.elapsed());
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            panic!("mcp did not exit within {bound:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_group_gone(pgrp: u32, within: Duration) {
    let t0 = Instant::now();
    while !group_members(pgrp).is_empty() {
        assert!(
            t0.elapsed() < within,
            "the stdio server's group {pgrp} outlived mcp: {:?}",
            group_members(pgrp)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn each_signal_closes_a_stdio_server_that_ignores_eof_and_sigterm_and_exits_128_plus_it() {
    // `sh` waits on `sleep` (two processes in the group); it ignores SIGTERM, and stdin's end
    // means nothing to it: only the close sequence's SIGKILL ends it.
    let stdio = r#"sh -c 'trap "" TERM; sleep 120; echo'"#;
    for (sig, want) in [("-INT", 130), ("-TERM", 143), ("-HUP", 129)] {
        let child = spawn(&["call", "--stdio", stdio, "slow"]);
        let pid = child.id();
        let group = server_group(pid, 2);
        signal(pid, sig);
        let (code, err, took) = exit_of(child, Duration::from_secs(15));
        assert_eq!(code, Some(want), "{sig}: {err}");
        let name = format!("SIG{}", &sig[1..]);
        assert!(
            err.contains(&format!("mcp: {name}: cancelled slow;"))
                && err.contains("closing the server process"),
            "{sig}: {err}"
        );
        // The close sequence: stdin closed, 2 s, SIGTERM (ignored), 2 s, SIGKILL.
        assert!(took < Duration::from_secs(9), "{sig}: {took:?}");
        assert_group_gone(group, Duration::from_secs(3));
    }
}

#[test]
fn a_second_signal_ends_mcp_at_once_and_still_kills_the_server() {
    let stdio = r#"sh -c 'trap "" TERM; sleep 120; echo'"#;
    let child = spawn(&["call", "--stdio", stdio, "slow"]);
    let pid = child.id();
    let group = server_group(pid, 2);
    signal(pid, "-INT");
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    signal(pid, "-INT");
    let (code, err, _) = exit_of(child, Duration::from_secs(10));
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("mcp: SIGINT: ended at once"), "{err}");
    assert_group_gone(group, Duration::from_secs(3));
}

#[test]
fn a_python_server_busy_in_a_tool_is_closed_on_sigint() {
    let file = server_file();
    let stdio = format!("{} {file}", py());
    let child = spawn(&["call", "--stdio", &stdio, "slow", "--era", "legacy"]);
    let pid = child.id();
    let group = server_group(pid, 1);
    // The call is on the wire once the handshake is done: give it a moment.
    std::thread::sleep(Duration::from_millis(800));
    signal(pid, "-INT");
    let (code, err, _) = exit_of(child, Duration::from_secs(15));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("cancelled slow"), "{err}");
    assert_group_gone(group, Duration::from_secs(3));
}

// ---- --env ---------------------------------------------------------------------------------

#[test]
fn env_and_env_pass_reach_a_stdio_server_and_nothing_else_does() {
    let file = server_file();
    let stdio = format!("{} {file}", py());
    let getenv = |name: &str, extra: &[&str], env: &[(&str, &str)]| {
        let arg = format!("name={name}");
        let mut args = vec!["call", "--stdio", stdio.as_str(), "getenv", arg.as_str()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--format", "text"]);
        mcp_env(&args, "", env)
    };
    let o = getenv(
        "MEMORY_FILE_PATH",
        &["-e", "MEMORY_FILE_PATH=/srv/m.json"],
        &[],
    );
    assert_eq!(
        stdout(&o),
        "MEMORY_FILE_PATH=/srv/m.json\n",
        "{}",
        describe(&o)
    );
    let o = getenv("B", &["--env", "A=1", "--env", "B=x=y"], &[("B", "ours")]);
    assert_eq!(stdout(&o), "B=x=y\n", "{}", describe(&o));
    // Ours reaches the server only when passed by name.
    let o = getenv("MCP_TEST_PASS", &[], &[("MCP_TEST_PASS", "p1")]);
    assert_eq!(stdout(&o), "MCP_TEST_PASS=<unset>\n", "{}", describe(&o));
    let o = getenv(
        "MCP_TEST_PASS",
        &["--env-pass", "MCP_TEST_PASS"],
        &[("MCP_TEST_PASS", "p1")],
    );
    assert_eq!(stdout(&o), "MCP_TEST_PASS=p1\n", "{}", describe(&o));
    // Mistakes are usage errors that name the flag.
    let o = getenv("X", &["--env-pass", "MCP_TEST_UNSET_VAR"], &[]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(
        stderr(&o).contains("MCP_TEST_UNSET_VAR is not set"),
        "{}",
        describe(&o)
    );
    let o = getenv("X", &["-e", "NOEQUALS"], &[]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("NAME=VALUE"), "{}", describe(&o));
    let o = mcp_env(&["tools", "http://127.0.0.1:9", "-e", "A=1"], "", &[]);
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--stdio server"), "{}", describe(&o));
}

#[test]
fn a_failing_stdio_server_names_the_variables_it_was_given_never_their_values() {
    let o = mcp_env(
        &[
            "call",
            "--stdio",
            "sh -c 'echo cannot open the database >&2; exit 3'",
            "getenv",
            "-e",
            "DB_PATH=/nowhere/db.sqlite",
            "-e",
            "API_TOKEN=tok-0123456789abcdef",
        ],
        "",
        &[],
    );
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        all.contains("its environment adds API_TOKEN, DB_PATH to the allow-list"),
        "{all}"
    );
    assert!(
        all.contains("the server process exited (status 3)"),
        "{all}"
    );
    assert!(!all.contains("tok-0123456789abcdef"), "{all}");
}

// ---- a closed stdout -----------------------------------------------------------------------

/// Runs `mcp ARGS` with stdout a pipe whose reader is already gone (`| head -0`).
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (r, w) = std::io::pipe().expect("pipe");
    drop(r);
    let mut child = Command::new(MCP)
        .args(args)
        .env("MCP_TOKEN_STORE", "memory")
        .stdin(Stdio::null())
        .stdout(w)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcp");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s.code(), err);
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "mcp {args:?} hung");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_closed_stdout_ends_each_command_quietly() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["man"],
        &["--help"],
        &["call", "--help"],
        &["auth", "status", "--token-store", "memory"],
    ] {
        let (code, err) = with_closed_stdout(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.to_lowercase().contains("error"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    }
    // A call whose result cannot be delivered: the server is still closed, the exit quiet.
    let file = server_file();
    let stdio = format!("{} {file}", py());
    let (code, err) = with_closed_stdout(&[
        "call", "--stdio", &stdio, "getenv", "name=X", "--format", "text",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}
