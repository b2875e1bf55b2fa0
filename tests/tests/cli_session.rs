//! The `mcp` binary across runs and to its end (issue 29): a login kept on disk is used by the
//! next run without a browser (and renewed with its refresh token), against the real
//! authorization server of `tests/peers/auth` (installed by `scripts/proxy-peers.sh`); and a
//! signal cancels what is on the wire (`notifications/cancelled`, or `tasks/cancel` for a task)
//! and ends the session, against the rmcp test server.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use verifi_mcp_tests::{AuthPeer, Mode, ServerOptions, TestServer};

const BOUND: Duration = Duration::from_secs(60);

/// A private home for one test: HOME and XDG_DATA_HOME under a fresh temp dir.
struct Home(PathBuf);

impl Home {
    fn new(name: &str) -> Home {
        let d = std::env::temp_dir().join(format!("mcp-session-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("data")).unwrap();
        Home(d)
    }
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), self.0.to_string_lossy().into_owned()),
            (
                "XDG_DATA_HOME".into(),
                self.0.join("data").to_string_lossy().into_owned(),
            ),
        ]
    }
    fn tokens(&self) -> PathBuf {
        self.0.join("data").join("verifi-mcp").join("tokens.json")
    }
    fn mcp(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let env = self.env();
        let mut all: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.push(("MCP_TOKEN_STORE", ""));
        all.extend_from_slice(extra);
        support::run_mcp(args, &all, BOUND)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn both(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn edit_tokens(path: &Path, f: impl Fn(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for t in v["tokens"].as_array_mut().unwrap() {
        f(t);
    }
    std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn stored_access(path: &Path) -> String {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["tokens"][0]["access_token"].as_str().unwrap().to_owned()
}

#[test]
fn a_login_is_kept_and_later_runs_use_it_without_a_browser() {
    let p = AuthPeer::start("header").unwrap_or_else(|e| panic!("cannot run this test: {e}"));
    let home = Home::new("login");
    let url = p.mcp.as_str();
    // Log in once (the server approves at once, as a person's browser would).
    let o = home.mcp(
        &["auth", "login", url, "--exact-url", "--client-id", "code"],
        &[],
    );
    assert!(o.status.success(), "{}", both(&o));
    let out = both(&o);
    assert!(out.contains(&format!("logged in to {url}")), "{out}");
    assert!(out.contains("token kept in"), "{out}");
    assert_eq!(p.stats()["auto_approved"], 1);
    assert_eq!(p.stats()["token_requests"], 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.tokens())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is private");
    }
    let first = stored_access(&home.tokens());

    // A second run, without any OAuth flag: the stored token, no authorization, no token
    // request; the leaky tool's echo of it is redacted.
    let o = home.mcp(&["call", url, "whoami", "{}", "--exact-url"], &[]);
    assert!(o.status.success(), "{}", both(&o));
    assert!(both(&o).contains("token=[REDACTED]"), "{}", both(&o));
    assert_eq!(p.stats()["auto_approved"], 1, "no second authorization");
    assert_eq!(p.stats()["token_requests"], 1, "no second token request");

    // Status shows the login, never a token.
    let o = home.mcp(&["auth", "status", url, "--exact-url"], &[]);
    let out = both(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains(url) && out.contains("renewable"), "{out}");
    let o = home.mcp(&["auth", "status", "--format", "json"], &[]);
    let line: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", both(&o)));
    assert_eq!(line["resource"], url);
    assert_eq!(line["refreshToken"], true);
    for t in p.tokens_seen() {
        assert!(
            !out.contains(&t) && !both(&o).contains(&t),
            "status printed a token"
        );
    }

    // An expired access token is renewed with the refresh token: a token request, still no
    // authorization.
    edit_tokens(&home.tokens(), |t| t["expires_at"] = Value::from(1));
    let o = home.mcp(&["call", url, "echo", "text=renewed", "--exact-url"], &[]);
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(p.stats()["auto_approved"], 1, "renewed without a person");
    assert_eq!(p.stats()["token_requests"], 2, "one refresh");
    let renewed = stored_access(&home.tokens());
    assert_ne!(renewed, first);

    // A stored token under another authorization server is never sent to this resource: a
    // new authorization is made instead.
    edit_tokens(&home.tokens(), |t| {
        t["issuer"] = Value::from("http://127.0.0.1:1");
    });
    let seen = |tok: &str| p.tokens_seen().iter().filter(|t| *t == tok).count();
    let before = seen(&renewed);
    let o = home.mcp(&["call", url, "echo", "text=rebound", "--exact-url"], &[]);
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(
        seen(&renewed),
        before,
        "a token bound to another issuer was sent"
    );
    assert_eq!(p.stats()["auto_approved"], 2);

    // --token-store memory: nothing is read or kept (a new authorization).
    let o = home.mcp(
        &[
            "call",
            url,
            "echo",
            "text=m",
            "--exact-url",
            "--client-id",
            "code",
        ],
        &[("MCP_TOKEN_STORE", "memory")],
    );
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(p.stats()["auto_approved"], 3);

    // Logout forgets it; status then says so (exit 1).
    let o = home.mcp(&["auth", "logout", url, "--exact-url"], &[]);
    assert!(o.status.success(), "{}", both(&o));
    assert!(both(&o).contains("logged out of"), "{}", both(&o));
    let o = home.mcp(&["auth", "status", url, "--exact-url"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(both(&o).contains("not logged in"), "{}", both(&o));
}

// ---- signals over HTTP ---------------------------------------------------------------------

/// Runs `mcp ARGS`, waits until `ready`, sends `sig`, and returns the exit code and stderr.
fn interrupted(args: &[&str], ready: impl Fn() -> bool, sig: &str) -> (Option<i32>, String) {
    let mut child = support::mcp_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcp");
    let t0 = Instant::now();
    while !ready() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the call never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "mcp ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
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
            return (s.code(), err);
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("mcp did not end within 15 s of {sig}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigint_cancels_an_http_call_on_the_wire_and_ends_its_session() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let url = server.mcp_url();
    let stats = server.stats();
    let (code, err) = interrupted(
        &["call", &url, "slow", "ms:=30000", "--era", "legacy"],
        || stats.calls_of("slow") == 1,
        "-INT",
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("mcp: SIGINT: cancelled slow; ending the session"),
        "{err}"
    );
    assert!(
        stats.wait_until(Duration::from_secs(5), |s| !s.cancelled().is_empty()),
        "the server never saw notifications/cancelled"
    );
    assert!(
        stats.wait_until(Duration::from_secs(5), |s| s.http_deletes() >= 1),
        "the session was not deleted"
    );
}

#[test]
fn sigterm_cancels_a_task_the_user_did_not_detach() {
    let server = TestServer::start_with(ServerOptions::new(Mode::Stateful).with_tasks()).unwrap();
    let url = server.mcp_url();
    let stats = server.stats();
    let (code, err) = interrupted(
        &["call", &url, "long_scan", "target=10.9.0.1", "seconds:=30"],
        || stats.scans_started() == 1,
        "-TERM",
    );
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("mcp: SIGTERM: cancelled long_scan"), "{err}");
    assert!(
        stats.wait_until(Duration::from_secs(5), |s| s.task_cancels() == 1),
        "the task was not cancelled on the server"
    );
}

#[test]
fn sigint_ends_task_wait_and_leaves_the_detached_task_running() {
    let server = TestServer::start_with(ServerOptions::new(Mode::Stateful).with_tasks()).unwrap();
    let url = server.mcp_url();
    let stats = server.stats();
    let out = support::run_mcp(
        &[
            "call",
            &url,
            "long_scan",
            "target=10.9.0.2",
            "seconds:=3",
            "--detach",
            "--format",
            "text",
        ],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!id.is_empty(), "{out:?}");
    // `task wait` is polling the task (the server saw a tasks/get from it) when SIGINT comes.
    let gets = stats.task_gets();
    let (code, err) = interrupted(
        &["task", "wait", &url, &id],
        || stats.task_gets() > gets,
        "-INT",
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains(&format!(
            "cancelled the wait for task {id} (the task runs on)"
        )),
        "{err}"
    );
    // The user detached it: the wait ends, the task runs on to its end.
    assert!(
        stats.wait_until(Duration::from_secs(10), |s| s.scans_finished() == 1),
        "the detached task did not run to its end: {err}"
    );
    assert_eq!(
        stats.task_cancels(),
        0,
        "the detached task was cancelled: {err}"
    );
    assert_eq!(stats.scans_cancelled(), 0);
}
