//! Every `mcp …` command a README shows runs. Each line of a `sh` code block that starts with
//! `mcp ` (or `VAR=value mcp `, or `cargo run … --bin mcp -- `) in the top-level README and the
//! examples README is run against the demo's rmcp box, with `http://127.0.0.1:8080` replaced by
//! the box's URL and the files it names (`args.json`, `calls.jsonl`, `mcp.json`, `run.json`)
//! made first in the folder it runs in. It must exit as its `# exit N` comment says (0
//! otherwise). Only `<` and `>` redirections are understood; a README command with anything
//! else (a pipe, `&&`) fails this test and says so. Each `demo` line is checked in its help-safe
//! form (its arguments, then `--help`): the demo's own runs are `tests/cli.rs`'s.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::*;

/// The URL README commands use for the demo box.
const README_URL: &str = "http://127.0.0.1:8080";

/// A command of a README: where it is, the words, the environment, redirections, the exit code
/// it expects.
#[derive(Debug)]
struct ReadmeCommand {
    at: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
    stdin: Option<String>,
    stdout: Option<String>,
    exit: i32,
}

/// Splits a shell line into words: single quotes literal, double quotes with `\` escapes,
/// a `#` that starts a word begins a comment. Returns the words and the comment.
fn shell_words(line: &str) -> Result<(Vec<String>, String), String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unclosed '".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(x) => cur.push(x),
                            None => return Err("trailing \\".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unclosed \"".into()),
                    }
                }
            }
            '#' if !in_word => {
                let comment: String = it.collect();
                return Ok((words, comment.trim().to_owned()));
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '|' | '&' | ';' | '`' | '$' => {
                return Err(format!("{c:?} is not understood by this test"));
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok((words, String::new()))
}

/// The `mcp` commands of one README.
fn commands_of(path: &Path) -> Vec<ReadmeCommand> {
    commands_for(path, "mcp")
}

/// The commands of one README that run `bin` (`bin …`, or `cargo run … --bin BIN -- …`).
fn commands_for(path: &Path, bin: &str) -> Vec<ReadmeCommand> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut out = Vec::new();
    let mut in_sh = false;
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{}:{}", path.display(), i + 1);
        let t = raw.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && (t == "```sh" || t == "```bash" || t == "```shell");
            continue;
        }
        if !in_sh {
            continue;
        }
        let (mut words, comment) = match shell_words(t) {
            Ok(x) => x,
            // Only the mcp lines must be runnable.
            Err(e) if t.contains("mcp ") => panic!("{at}: {e}: {t}"),
            Err(_) => continue,
        };
        let mut env = Vec::new();
        while let Some(w) = words.first() {
            match w.split_once('=') {
                Some((k, v))
                    if !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') =>
                {
                    env.push((k.to_owned(), v.to_owned()));
                    words.remove(0);
                }
                _ => break,
            }
        }
        // `cargo run … --bin BIN -- ARGS` is `BIN ARGS`.
        if words.first().map(String::as_str) == Some("cargo")
            && words.windows(2).any(|w| w[0] == "--bin" && w[1] == bin)
        {
            match words.iter().position(|w| w == "--") {
                Some(dashes) => {
                    words.drain(..dashes);
                }
                None => words.clear(),
            }
            words.insert(0, bin.into());
            if words.get(1).map(String::as_str) == Some("--") {
                words.remove(1);
            }
        }
        if words.first().map(String::as_str) != Some(bin) {
            continue;
        }
        words.remove(0);
        let mut args = Vec::new();
        let (mut stdin, mut stdout) = (None, None);
        let mut w = words.into_iter();
        while let Some(word) = w.next() {
            match word.as_str() {
                "<" => stdin = Some(w.next().unwrap_or_else(|| panic!("{at}: < needs a file"))),
                ">" => stdout = Some(w.next().unwrap_or_else(|| panic!("{at}: > needs a file"))),
                _ => args.push(word),
            }
        }
        let exit = match comment.strip_prefix("exit ") {
            Some(n) => n
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{at}: bad '# exit N' comment")),
            None => 0,
        };
        out.push(ReadmeCommand {
            at,
            env,
            args,
            stdin,
            stdout,
            exit,
        });
    }
    out
}

/// The files README commands name, made in `dir` for the box at `url`.
fn make_files(dir: &Path, url: &str) {
    let w = |name: &str, text: String| std::fs::write(dir.join(name), text).expect("write");
    w("args.json", json!({ "text": "from a file" }).to_string());
    w(
        "calls.jsonl",
        [
            json!({ "tool": "echo", "args": { "text": "one" } }),
            json!({ "tool": "run_command", "args": { "command": "echo two", "workspace": "w1" } }),
            json!({ "tool": "echo", "args": { "text": "three" } }),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect(),
    );
    w(
        "mcp.json",
        json!({ "mcpServers": { "kali": { "type": "http", "url": format!("{url}/mcp") } } })
            .to_string(),
    );
    w(
        "run.json",
        json!({ "slotFills": { "kali": { "endpoint": url } } }).to_string(),
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

#[test]
fn every_mcp_command_in_the_readmes_runs() {
    let root = repo_root();
    let mut cmds = Vec::new();
    for readme in ["README.md", "examples/README.md"] {
        cmds.extend(commands_of(&root.join(readme)));
    }
    assert!(
        cmds.len() >= 15,
        "the READMEs show the commands ({} found)",
        cmds.len()
    );
    let s = server();
    let url = s.base_url();
    let dir = std::env::temp_dir().join(format!("verifi-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    make_files(&dir, &url);
    let mut failed = Vec::new();
    for c in &cmds {
        let swap = |a: &String| a.replace(README_URL, &url);
        let args: Vec<String> = c.args.iter().map(swap).collect();
        let stdin = match &c.stdin {
            Some(f) => std::fs::read_to_string(dir.join(f))
                .unwrap_or_else(|e| panic!("{}: < {f}: {e}", c.at)),
            None => String::new(),
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp"));
        cmd.current_dir(&dir).args(&args).env_remove("MCP_ENDPOINT");
        for (k, v) in &c.env {
            cmd.env(k, swap(v));
        }
        let o = run_command(cmd, &stdin);
        if let Some(f) = &c.stdout {
            std::fs::write(dir.join(f), &o.stdout).expect("write the redirected stdout");
        }
        if code(&o) != c.exit {
            failed.push(format!(
                "{}: mcp {:?} exited {} (README says {}):\n{}",
                c.at,
                args,
                code(&o),
                c.exit,
                describe(&o)
            ));
        } else if c.exit == 0 && c.stdout.is_none() && o.stdout.is_empty() {
            failed.push(format!("{}: mcp {args:?} printed nothing", c.at));
        }
    }
    // The redirected outputs are what their commands say they are.
    let man = std::fs::read_to_string(dir.join("mcp.1")).unwrap_or_default();
    let bash = std::fs::read_to_string(dir.join("mcp.bash")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    assert!(man.contains(".TH"), "mcp man > mcp.1 wrote a man page");
    assert!(
        bash.contains("complete"),
        "mcp completions bash wrote a script"
    );
}

#[test]
fn every_demo_command_in_the_readmes_is_accepted() {
    // The demo's own runs are tests of tests/cli.rs; here each README line's arguments are
    // checked by the demo itself, in their help-safe form (the arguments, then --help).
    let root = repo_root();
    let mut cmds = Vec::new();
    for readme in ["README.md", "examples/README.md"] {
        cmds.extend(commands_for(&root.join(readme), "demo"));
    }
    assert!(
        cmds.len() >= 4,
        "the READMEs show the demo ({} found)",
        cmds.len()
    );
    for c in &cmds {
        let mut args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        args.push("--help");
        let o = run_exe(env!("CARGO_BIN_EXE_demo"), &args, "", &[]);
        assert_eq!(code(&o), 0, "{}: demo {:?}: {}", c.at, c.args, describe(&o));
        assert!(stdout(&o).contains("Examples:"), "{}", describe(&o));
    }
    let o = run_exe(env!("CARGO_BIN_EXE_demo"), &["--bogus", "--help"], "", &[]);
    assert_eq!(code(&o), 2, "a wrong argument is caught: {}", describe(&o));
}

#[test]
fn the_readme_parser_reads_quotes_redirections_and_exit_comments() {
    let (w, c) =
        shell_words(r#"mcp call U run_command command='uname -s' a="b \"c\"" # exit 1"#).unwrap();
    assert_eq!(
        w,
        vec![
            "mcp",
            "call",
            "U",
            "run_command",
            "command=uname -s",
            "a=b \"c\""
        ]
    );
    assert_eq!(c, "exit 1");
    assert!(shell_words("mcp tools U | head").is_err());
    assert!(shell_words("mcp call U echo 'open").is_err());
    let dir = std::env::temp_dir().join(format!("verifi-readme-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("R.md");
    std::fs::write(
        &f,
        "text\n```sh\nMCP_ENDPOINT=http://x mcp call echo < in.json > out.txt  # exit 2\n\
         cargo run -p verifi-mcp-examples --bin mcp -- tools U\necho not mcp\n```\n\
         ```rust\nmcp not shell\n```\n",
    )
    .expect("write");
    let cmds = commands_of(&f);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert_eq!(
        cmds[0].env,
        vec![("MCP_ENDPOINT".into(), "http://x".into())]
    );
    assert_eq!(cmds[0].args, vec!["call", "echo"]);
    assert_eq!(cmds[0].stdin.as_deref(), Some("in.json"));
    assert_eq!(cmds[0].stdout.as_deref(), Some("out.txt"));
    assert_eq!(cmds[0].exit, 2);
    assert_eq!(cmds[1].args, vec!["tools", "U"]);
}
