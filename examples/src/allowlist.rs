//! The demo Kali box's command policy and runner.
//!
//! Owns: splitting a `run_command` string into a program and its arguments (no shell, ever),
//! refusing anything outside a small allowlist of harmless commands, the per-workspace folder
//! under the OS temp dir, and running the command there with a hard kill at its timeout and a
//! cap on captured output. The reply text is `$ <cmd>\n(exit N)\n<output>`, as the production
//! box answers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// The most output (stdout and stderr each) a command may produce before it is cut.
pub const OUTPUT_CAP: usize = 256 * 1024;
/// The longest timeout the box accepts, in seconds (the clamp of the TypeScript harness SDK's
/// `exec`; see `docs/design.md`).
pub const MAX_TIMEOUT_S: u64 = 285;
/// The exit code reported for a command killed at its timeout (as coreutils `timeout` does).
pub const TIMEOUT_EXIT: i32 = 124;
/// The longest command string accepted.
pub const MAX_COMMAND_LEN: usize = 4096;

/// Environment variables `printenv` may read (and the only ones a command sees, with `PATH`).
pub const ENV_ALLOWLIST: &[&str] = &["HOME", "LANG", "USER", "DEMO_API_KEY", "DEMO_REGION"];

/// Characters that a shell would interpret; any of them refuses the command.
const METACHARACTERS: &[char] = &[
    ';', '|', '&', '$', '<', '>', '`', '(', ')', '{', '}', '*', '?', '[', ']', '~', '!', '\\',
    '\'', '"', '#', '\n', '\r', '\0', '=',
];

/// Why a command was refused before running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A command that passed the policy: the program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The program name (one of the allowlist).
    pub program: &'static str,
    /// Its arguments, exactly as split.
    pub args: Vec<String>,
}

fn refuse<T>(msg: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(msg.into()))
}

/// A workspace name is a short run id: letters, digits, `.`, `_`, `-`; not `.` or `..`.
pub fn check_workspace(ws: &str) -> Result<(), Refused> {
    let ok_chars = ws
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ws.is_empty() || ws.len() > 128 || !ok_chars || ws == "." || ws == ".." {
        return refuse(format!(
            "workspace {ws:?} is not a run id (1-128 of A-Z a-z 0-9 . _ -)"
        ));
    }
    Ok(())
}

fn plain_name(arg: &str) -> bool {
    !arg.is_empty() && !arg.starts_with('-') && !arg.contains('/') && arg != "." && arg != ".."
}

/// Splits and checks `command` against the allowlist.
pub fn plan(command: &str) -> Result<Planned, Refused> {
    if command.len() > MAX_COMMAND_LEN {
        return refuse(format!("command longer than {MAX_COMMAND_LEN} bytes"));
    }
    if let Some(c) = command.chars().find(|c| METACHARACTERS.contains(c)) {
        return refuse(format!(
            "shell metacharacter {c:?} refused: this box runs no shell"
        ));
    }
    let mut words = command.split_whitespace();
    let Some(program) = words.next() else {
        return refuse("empty command");
    };
    let args: Vec<String> = words.map(str::to_owned).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let program: &'static str = match program {
        "echo" => "echo",
        "true" => "true",
        "false" => "false",
        "whoami" if a.is_empty() => "whoami",
        "pwd" if a.is_empty() => "pwd",
        "uname"
            if a.iter()
                .all(|x| matches!(*x, "-a" | "-s" | "-r" | "-m" | "-n" | "-o")) =>
        {
            "uname"
        }
        "date" if a.iter().all(|x| *x == "-u" || *x == "-I" || *x == "-R") => "date",
        "printenv" if a.len() == 1 && ENV_ALLOWLIST.contains(&a[0]) => "printenv",
        "ls" if a
            .iter()
            .all(|x| matches!(*x, "-l" | "-a" | "-la" | "-1") || plain_name(x)) =>
        {
            "ls"
        }
        "sleep" if a.len() == 1 && a[0].parse::<u32>().is_ok_and(|n| n <= 300) => "sleep",
        "whoami" | "pwd" | "uname" | "date" | "printenv" | "ls" | "sleep" => {
            return refuse(format!("arguments refused for {program}: {}", a.join(" ")));
        }
        other => {
            return refuse(format!(
                "command not allowed: {other} (allowed: echo true false whoami pwd uname date printenv ls sleep)"
            ));
        }
    };
    Ok(Planned { program, args })
}

/// The folder a workspace's commands run in: `<temp>/<root_name>/<workspace>`, created.
pub fn workspace_dir(root: &Path, workspace: &str) -> std::io::Result<PathBuf> {
    let dir = root.join(workspace);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let Some(pipe) = pipe else {
        return (out, false);
    };
    let mut limited = pipe.take(OUTPUT_CAP as u64 + 1);
    let _ = limited.read_to_end(&mut out).await;
    let cut = out.len() > OUTPUT_CAP;
    out.truncate(OUTPUT_CAP);
    (out, cut)
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The exit code (`TIMEOUT_EXIT` when killed at the timeout, -1 when killed by a signal).
    pub exit: i32,
    /// Stdout then stderr, lossily decoded, with a note when cut or killed.
    pub output: String,
}

/// Runs `planned` in `dir` with only allowlisted variables, killed after `timeout`.
pub async fn run(planned: &Planned, dir: &Path, timeout: Duration) -> std::io::Result<Ran> {
    let mut cmd = tokio::process::Command::new(planned.program);
    cmd.args(&planned.args)
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for name in ENV_ALLOWLIST {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let ((out, out_cut), (err, err_cut)) =
            tokio::join!(read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (out, out_cut, err, err_cut, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((out, out_cut, err, err_cut, status)) => {
            let status = status?;
            let mut output = String::from_utf8_lossy(&out).into_owned();
            output.push_str(&String::from_utf8_lossy(&err));
            if out_cut || err_cut {
                output.push_str(&format!("\n[output cut at {OUTPUT_CAP} bytes]"));
            }
            Ok(Ran {
                exit: status.code().unwrap_or(-1),
                output,
            })
        }
        // Dropping `work` drops the child, and `kill_on_drop` kills it.
        Err(_) => Ok(Ran {
            exit: TIMEOUT_EXIT,
            output: format!("[killed after {} s timeout]", timeout.as_secs()),
        }),
    }
}

/// The reply text: `$ <cmd>\n(exit N)\n<output>`.
pub fn reply_text(command: &str, ran: &Ran) -> String {
    format!("$ {command}\n(exit {})\n{}", ran.exit, ran.output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_allowlisted_commands_and_refuses_the_rest() {
        assert_eq!(plan("echo hi there").unwrap().args, vec!["hi", "there"]);
        assert_eq!(plan("printenv DEMO_API_KEY").unwrap().program, "printenv");
        assert!(plan("printenv AWS_SECRET").is_err());
        assert!(
            plan("echo hi; rm -rf /")
                .unwrap_err()
                .0
                .contains("metacharacter")
        );
        assert!(plan("echo $(id)").is_err());
        assert!(plan("rm -rf x").unwrap_err().0.contains("not allowed"));
        assert!(plan("ls ../x").is_err());
        assert!(plan("ls /etc").is_err());
        assert!(plan("ls -la notes").is_ok());
        assert!(plan("uname -a").is_ok());
        assert!(plan("uname --help").is_err());
        assert!(plan("sleep 1000").is_err());
        assert!(plan("   ").is_err());
    }

    #[test]
    fn workspaces_are_run_ids() {
        assert!(check_workspace("run-2024.01_a").is_ok());
        for bad in ["", ".", "..", "a/b", "../x", "a b"] {
            assert!(check_workspace(bad).is_err(), "{bad:?}");
        }
    }
}
