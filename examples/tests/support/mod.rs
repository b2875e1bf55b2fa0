//! What the command-line tests share: running a binary with a deadline, reading its output,
//! and the demo box.
#![allow(dead_code)] // each test file uses a part

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use verifi_mcp_examples::kali::KaliServer;

/// No run of a binary may take longer than this.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// Runs `exe` with `args` and `stdin`, killed at [`DEADLINE`].
pub fn run_exe(exe: &str, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_command(cmd, stdin)
}

/// Runs `cmd` with `stdin`, killed at [`DEADLINE`]. Tokens stay in memory
/// (`MCP_TOKEN_STORE=memory`) unless `cmd` says otherwise: a test never reads or writes the
/// logins in the home of whoever runs it.
pub fn run_command(mut cmd: Command, stdin: &str) -> Output {
    if !cmd.get_envs().any(|(k, _)| k == "MCP_TOKEN_STORE") {
        cmd.env("MCP_TOKEN_STORE", "memory");
    }
    let exe = format!("{:?}", cmd.get_program());
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the binary");
    let mut input = child.stdin.take().expect("stdin");
    let bytes = stdin.as_bytes().to_vec();
    // A child that exits without reading all of stdin closes the pipe: not a test failure.
    let t_in = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let end = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{exe} {args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = t_in.join();
    Output {
        status,
        stdout: t_out.join().expect("stdout thread"),
        stderr: t_err.join().expect("stderr thread"),
    }
}

pub fn mcp(args: &[&str]) -> Output {
    run_exe(env!("CARGO_BIN_EXE_mcp"), args, "", &[])
}

pub fn mcp_stdin(args: &[&str], stdin: &str) -> Output {
    run_exe(env!("CARGO_BIN_EXE_mcp"), args, stdin, &[])
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

pub fn json_line(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not a JSON line ({e}): {s}"))
}

pub fn server() -> KaliServer {
    KaliServer::start("test").expect("start the rmcp test box")
}

/// Runs `mcp` with `args`, `stdin` and extra environment.
pub fn mcp_env(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    run_exe(env!("CARGO_BIN_EXE_mcp"), args, stdin, env)
}

/// Every key of every object in `v` is camelCase (no `_`, no `-`, lower-case first letter),
/// except under the keys in `free` (maps keyed by data, e.g. error texts).
pub fn assert_camel(v: &Value, free: &[&str], at: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let camel = k.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && k.chars().all(|c| c.is_ascii_alphanumeric());
                assert!(camel, "key {k:?} at {at} is not camelCase");
                if !free.contains(&k.as_str()) {
                    assert_camel(x, free, &format!("{at}.{k}"));
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| assert_camel(x, free, at)),
        _ => {}
    }
}
