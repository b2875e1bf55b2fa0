//! OAuth (issue 15) against a real authorization server on loopback: `oidc-provider` in front
//! of an MCP server on the official TypeScript SDK with its bearer-auth middleware
//! (`tests/peers/auth/server.mjs`, installed by `scripts/proxy-peers.sh`).
//!
//! Every test that obtains a token also greps every output of the run (results, errors, raw
//! replies, timeline, log, ledger, and the command line's stdout and stderr) for every token the
//! MCP server was shown, and for the client's secret.

mod support;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use verifi_mcp_host::auth::AuthConfig;
use verifi_mcp_host::{HarnessContext, Options, ToolResult};
use verifi_mcp_tests::auth_peer::{CC_BASIC_SECRET, CC_POST_SECRET, CC_SHORT_SECRET};
use verifi_mcp_tests::{AuthPeer, Tinyproxy};

fn peer(mode: &str) -> AuthPeer {
    AuthPeer::start(mode).unwrap_or_else(|e| panic!("cannot run this test: {e}"))
}

fn ctx(peer: &AuthPeer, auth: Option<AuthConfig>) -> HarnessContext {
    let manifest = json!({ "slotFills": { "s": { "endpoint": peer.mcp } } }).to_string();
    HarnessContext::from_manifest_str(&manifest, "run-oauth", {
        let mut o = Options::default();
        o.timeout_ms = 15_000;
        o.secrets = Some(Vec::new());
        o.proxy_from_env = false;
        o.exact_mcp_urls = true;
        o.keep_raw = true;
        o.auth = auth;
        o
    })
    .unwrap()
}

fn secret_client(id: &str, secret: &str) -> AuthConfig {
    AuthConfig {
        client_id: Some(id.into()),
        client_secret: Some(secret.into()),
        ..AuthConfig::default()
    }
}

fn call(ctx: &HarnessContext, tool: &str, args: serde_json::Value) -> ToolResult {
    smol::block_on(ctx.mcp("s").unwrap().call(tool, args))
}

/// Every output of a run, as one string.
fn outputs(ctx: &HarnessContext, results: &[&ToolResult]) -> String {
    let mut all = String::new();
    for r in results {
        all.push_str(&format!("{r:?}\n{}\n", serde_json::to_string(r).unwrap()));
    }
    for e in ctx.timeline() {
        all.push_str(&e.json);
        all.push('\n');
    }
    all.push_str(&ctx.log_lines().join("\n"));
    all.push_str(&format!("{:?}", ctx.ledger()));
    all
}

fn assert_no_leak(all: &str, peer: &AuthPeer, secrets: &[&str]) {
    let tokens = peer.tokens_seen();
    assert!(!tokens.is_empty(), "the MCP server was shown no token");
    for t in tokens
        .iter()
        .map(String::as_str)
        .chain(secrets.iter().copied())
    {
        assert!(
            !all.contains(t),
            "a credential reached an output: {t}\n{all}"
        );
    }
}

#[test]
fn client_credentials_with_each_client_authentication() {
    let p = peer("header");
    let key = std::fs::read(&p.key_file).unwrap();
    let clients = [
        (
            "cc-basic",
            secret_client("cc-basic", CC_BASIC_SECRET),
            CC_BASIC_SECRET,
        ),
        (
            "cc-post",
            secret_client("cc-post", CC_POST_SECRET),
            CC_POST_SECRET,
        ),
        (
            "cc-jwt",
            AuthConfig {
                client_id: Some("cc-jwt".into()),
                client_private_key: Some(key.clone()),
                ..AuthConfig::default()
            },
            "-----",
        ),
    ];
    let mut requests = 0;
    for (name, auth, secret) in clients {
        let ctx = ctx(&p, Some(auth));
        let r = call(
            &ctx,
            "echo",
            json!({ "text": format!("hello from {name}") }),
        );
        assert!(r.ok(), "{name}: {r:?}");
        assert_eq!(r.text, format!("hello from {name}"));
        // The leaky tool hands the token back: the client has it among the run's secrets.
        let who = call(&ctx, "whoami", json!({}));
        assert!(who.ok(), "{name}: {who:?}");
        assert_eq!(who.text, "token=[REDACTED]", "{name}");
        requests += 1;
        assert_eq!(
            p.stats()["token_requests"],
            requests,
            "{name}: one token request for the run (tokens are kept)"
        );
        assert_eq!(ctx.ledger().tool_calls, 2);
        let all = outputs(&ctx, &[&r, &who]);
        assert_no_leak(&all, &p, &[secret]);
        let key_text = String::from_utf8_lossy(&key);
        let key_line = key_text.lines().nth(1).unwrap();
        assert!(!all.contains(key_line));
    }
}

#[test]
fn discovery_through_the_path_aware_well_known_url() {
    let p = peer("wellknown");
    let ctx = ctx(&p, Some(secret_client("cc-basic", CC_BASIC_SECRET)));
    let r = call(&ctx, "echo", json!({ "text": "found it" }));
    assert!(r.ok() && r.text == "found it", "{r:?}");
    let paths: Vec<String> = serde_json::from_value(p.stats()["token_paths"].clone()).unwrap();
    assert!(paths.iter().any(|x| x == "POST /token"), "{paths:?}");
    assert_no_leak(&outputs(&ctx, &[&r]), &p, &[CC_BASIC_SECRET]);
}

#[test]
fn a_resource_mismatch_stops_before_any_credential_is_sent() {
    let p = peer("mismatch");
    let ctx = ctx(&p, Some(secret_client("cc-basic", CC_BASIC_SECRET)));
    let r = call(&ctx, "echo", json!({ "text": "x" }));
    assert!(!r.ok());
    let e = r.error().map(str::to_owned).unwrap();
    assert!(
        e.starts_with("authorization stopped: protected-resource metadata is for ")
            && e.contains("/elsewhere")
            && e.contains("nothing was sent"),
        "{e}"
    );
    let stats = p.stats();
    assert_eq!(stats["token_requests"], 0, "no token request: {stats}");
    assert_eq!(stats["tool_calls"], 0);
    // Metered as a failed round trip, and on the timeline.
    assert_eq!(ctx.ledger().tool_calls, 1);
    assert_eq!(ctx.events_of("tool_error").len(), 1);
}

#[test]
fn tokens_near_expiry_are_renewed_and_a_401_is_answered_once() {
    let p = peer("header");
    // cc-short's tokens live 3 s, inside the 30 s renewal margin: each call gets a new one.
    let short = ctx(&p, Some(secret_client("cc-short", CC_SHORT_SECRET)));
    for i in 0..2 {
        let r = call(&short, "echo", json!({ "text": format!("short {i}") }));
        assert!(r.ok(), "{r:?}");
    }
    assert_eq!(p.stats()["token_requests"], 2);

    let ctx = ctx(&p, Some(secret_client("cc-basic", CC_BASIC_SECRET)));
    let r = call(&ctx, "echo", json!({ "text": "before" }));
    assert!(r.ok(), "{r:?}");
    assert_eq!(p.stats()["token_requests"], 3);
    p.revoke_all();
    let r2 = call(&ctx, "echo", json!({ "text": "after revocation" }));
    assert!(r2.ok() && r2.text == "after revocation", "{r2:?}");
    let stats = p.stats();
    assert_eq!(
        stats["token_requests"], 4,
        "one renewal after the 401: {stats}"
    );
    assert_no_leak(&outputs(&ctx, &[&r, &r2]), &p, &[CC_BASIC_SECRET]);
}

#[test]
fn a_401_no_flow_can_answer_names_what_the_server_asked_for() {
    let p = peer("header");
    let ctx = ctx(&p, None);
    let r = call(&ctx, "echo", json!({ "text": "x" }));
    assert!(!r.ok());
    let e = r.error().unwrap();
    assert!(e.starts_with("HTTP 401 Unauthorized"), "{e}");
    assert!(
        e.contains(&format!(
            "the server wants OAuth authorization (authorization server {}, scope \"mcp:tools\")",
            p.issuer
        )),
        "{e}"
    );
    let wrong = ctx_with_wrong_secret(&p);
    let r = call(&wrong, "echo", json!({ "text": "x" }));
    let e = r.error().unwrap();
    assert!(
        e.starts_with("authorization server refused the token request (401): invalid_client"),
        "{e}"
    );
    assert!(!e.contains("wrong-secret-for-cc-basic"), "{e}");
}

fn ctx_with_wrong_secret(p: &AuthPeer) -> HarnessContext {
    ctx(
        p,
        Some(secret_client("cc-basic", "wrong-secret-for-cc-basic")),
    )
}

// ---- the `mcp` command line ----------------------------------------------------------------

/// Runs `mcp ARGS…` with `env` (proxy and OAuth variables cleared first), bounded.
fn mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    support::run_mcp(args, env, Duration::from_secs(60))
}

fn both(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn mcp_cli_client_credentials_bearer_and_env_through_a_proxy() {
    let p = peer("header");
    let tp = Tinyproxy::start(None).unwrap_or_else(|e| panic!("cannot run this test: {e}"));
    let proxy = tp.url();
    let o = mcp(
        &[
            "call",
            &p.mcp,
            "whoami",
            "{}",
            "--exact-url",
            "--client-id",
            "cc-basic",
            "--client-secret",
            CC_BASIC_SECRET,
            "--proxy",
            &proxy,
        ],
        &[],
    );
    let out = both(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("token=[REDACTED]"), "{out}");
    // Discovery, the token request and the calls all went through the proxy.
    let lines = tp.requests();
    for want in [
        "/.well-known/oauth-protected-resource/mcp",
        "/token",
        "/mcp",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(want)),
            "{want} not in {lines:?}"
        );
    }
    // The environment's spelling.
    let o2 = mcp(
        &[
            "call",
            &p.mcp,
            "echo",
            r#"{"text":"env"}"#,
            "--exact-url",
            "--scope",
            "mcp:tools",
        ],
        &[
            ("MCP_CLIENT_ID", "cc-post"),
            ("MCP_CLIENT_SECRET", CC_POST_SECRET),
        ],
    );
    let out2 = both(&o2);
    assert!(o2.status.success(), "{out2}");
    // A static bearer token (one the server issued) with --bearer and MCP_BEARER_TOKEN.
    let token = p.tokens_seen().pop().unwrap();
    let o3 = mcp(
        &[
            "call",
            &p.mcp,
            "whoami",
            "{}",
            "--exact-url",
            "--bearer",
            &token,
        ],
        &[],
    );
    let out3 = both(&o3);
    assert!(
        o3.status.success() && out3.contains("token=[REDACTED]"),
        "{out3}"
    );
    let o4 = mcp(
        &["call", &p.mcp, "whoami", "{}", "--exact-url"],
        &[("MCP_BEARER_TOKEN", token.as_str())],
    );
    let out4 = both(&o4);
    assert!(
        o4.status.success() && out4.contains("token=[REDACTED]"),
        "{out4}"
    );
    // Nothing configured: exit 1 and what the server asked for.
    let o5 = mcp(&["call", &p.mcp, "echo", "{}", "--exact-url"], &[]);
    let out5 = both(&o5);
    assert_eq!(o5.status.code(), Some(1), "{out5}");
    assert!(
        out5.contains("the server wants OAuth authorization"),
        "{out5}"
    );
    let all = [out, out2, out3, out4, out5].join("\n");
    for t in p.tokens_seen() {
        assert!(
            !all.contains(&t),
            "a token reached the command line's output\n{all}"
        );
    }
    for s in [CC_BASIC_SECRET, CC_POST_SECRET] {
        assert!(
            !all.contains(s),
            "a client secret reached the output\n{all}"
        );
    }
}

// ---- authorization code with PKCE ----------------------------------------------------------

/// A plain GET on loopback that follows no redirect: (status, location).
fn get_no_follow(url: &str) -> (u16, Option<String>) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    let status = reply.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let location = reply
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location)
}

/// A person at a browser, scripted: opens the URL at the server's auto-approving twin, then
/// hands back the redirect, changed by `tamper` (to prove the checks).
struct ScriptedPerson {
    calls: std::sync::atomic::AtomicUsize,
    tamper: fn(String) -> String,
}

impl verifi_mcp_host::auth::AuthorizeHook for ScriptedPerson {
    fn authorize<'a>(
        &'a self,
        req: &'a verifi_mcp_host::auth::AuthorizeRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>
    {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let url = req.url.replacen("/auth?", "/auto-auth?", 1);
        let tamper = self.tamper;
        Box::pin(async move {
            let (status, location) = blocking_get(url).await;
            match location {
                Some(l) if status == 302 => Ok(tamper(l)),
                _ => Err(format!("the server answered {status}")),
            }
        })
    }
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:9/callback".into()
    }
}

/// [`get_no_follow`] on a thread of its own, awaited without blocking the executor.
async fn blocking_get(url: String) -> (u16, Option<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(get_no_follow(&url));
    });
    loop {
        if let Ok(v) = rx.try_recv() {
            return v;
        }
        smol::Timer::after(Duration::from_millis(10)).await;
    }
}

fn person(tamper: fn(String) -> String) -> std::sync::Arc<ScriptedPerson> {
    std::sync::Arc::new(ScriptedPerson {
        calls: Default::default(),
        tamper,
    })
}

fn code_client(hook: std::sync::Arc<ScriptedPerson>) -> AuthConfig {
    AuthConfig {
        client_id: Some("code".into()),
        authorize: Some(hook),
        ..AuthConfig::default()
    }
}

#[test]
fn authorization_code_auto_approved_and_through_a_person() {
    // An auto-approving server: the flow's own GET gets the code; the hook is never asked.
    let p = peer("header");
    let hook = person(|l| l);
    let ctx1 = ctx(&p, Some(code_client(hook.clone())));
    let r = call(&ctx1, "whoami", json!({}));
    assert!(r.ok() && r.text == "token=[REDACTED]", "{r:?}");
    assert_eq!(hook.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let stats = p.stats();
    assert_eq!(stats["auto_approved"], 1, "{stats}");
    assert_eq!(stats["token_requests"], 1, "{stats}");
    assert_no_leak(&outputs(&ctx1, &[&r]), &p, &[]);

    // A server that wants a person: the hook is asked once, and its redirect is checked.
    let p = peer("person");
    let hook = person(|l| l);
    let ctx2 = ctx(&p, Some(code_client(hook.clone())));
    let r = call(&ctx2, "echo", json!({ "text": "approved by a person" }));
    assert!(r.ok() && r.text == "approved by a person", "{r:?}");
    assert_eq!(hook.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let r = call(&ctx2, "echo", json!({ "text": "again" }));
    assert!(r.ok(), "{r:?}");
    assert_eq!(
        hook.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the token is kept"
    );
    assert_no_leak(&outputs(&ctx2, &[&r]), &p, &[]);
}

#[test]
fn a_wrong_state_or_iss_stops_before_the_code_is_exchanged() {
    let p = peer("person");
    let wrong_state = ctx(
        &p,
        Some(code_client(person(|l| {
            let i = l.find("state=").unwrap();
            format!("{}state=forged{}", &l[..i], &l[i + 6 + 22..])
        }))),
    );
    let r = call(&wrong_state, "echo", json!({ "text": "x" }));
    assert_eq!(
        r.error(),
        Some("authorization stopped: authorization response state does not match the request's")
    );
    let wrong_iss = ctx(
        &p,
        Some(code_client(person(|l| {
            let i = l.find("iss=").unwrap();
            format!("{}iss=http%3A%2F%2Fevil.example", &l[..i])
        }))),
    );
    let r = call(&wrong_iss, "echo", json!({ "text": "x" }));
    let e = r.error().unwrap();
    assert!(
        e.starts_with(
            "authorization stopped: authorization response came from issuer \"http://evil.example\""
        ),
        "{e}"
    );
    let no_iss = ctx(
        &p,
        Some(code_client(person(|l| {
            l[..l.find("&iss=").unwrap()].to_owned()
        }))),
    );
    let r = call(&no_iss, "echo", json!({ "text": "x" }));
    assert!(r.error().unwrap().contains("has no iss"));
    assert_eq!(p.stats()["token_requests"], 0, "no code was exchanged");
}

#[test]
fn mcp_cli_authorization_code_auto_approved_through_a_proxy_and_by_a_person() {
    let p = peer("header");
    let tp = Tinyproxy::start(None).unwrap_or_else(|e| panic!("cannot run this test: {e}"));
    let o = mcp(
        &[
            "call",
            &p.mcp,
            "whoami",
            "{}",
            "--exact-url",
            "--client-id",
            "code",
            "--proxy",
            &tp.url(),
        ],
        &[],
    );
    let out = both(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("token=[REDACTED]"), "{out}");
    let lines = tp.requests();
    for want in ["/auth?", "/token", "/mcp"] {
        assert!(
            lines.iter().any(|l| l.contains(want)),
            "{want} not in {lines:?}"
        );
    }
    assert_eq!(p.stats()["auto_approved"], 1);

    // A server that wants a person: the command prints the URL and waits for the browser.
    let p = peer("person");
    let mut child = support::mcp_command()
        .args([
            "call",
            &p.mcp,
            "echo",
            r#"{"text":"hi person"}"#,
            "--exact-url",
        ])
        .args(["--client-id", "code", "--auth-flow", "authorization-code"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("mcp printed no authorization URL");
        if let Some(u) = line.trim().strip_prefix("http://") {
            break format!("http://{u}");
        }
    };
    assert!(
        url.contains("code_challenge_method=S256") && url.contains("state="),
        "{url}"
    );
    // The "browser": the server approves, the redirect goes to mcp's loopback listener.
    let (status, location) = get_no_follow(&url.replacen("/auth?", "/auto-auth?", 1));
    assert_eq!(status, 302);
    let (status, _) = get_no_follow(&location.unwrap());
    assert_eq!(status, 200);
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "mcp did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        rest.join("\n")
    );
    assert!(o.status.success(), "{out}");
    assert!(out.contains("hi person"), "{out}");
    for t in p.tokens_seen() {
        assert!(!out.contains(&t), "{out}");
    }
}

#[test]
fn dynamic_registration_when_no_client_id_is_given() {
    let p = peer("header");
    // Unattended: register a confidential client for client credentials, then use it.
    let cc = ctx(
        &p,
        Some(AuthConfig {
            flow: verifi_mcp_host::auth::AuthFlow::ClientCredentials,
            ..AuthConfig::default()
        }),
    );
    let r = call(&cc, "whoami", json!({}));
    assert!(r.ok() && r.text == "token=[REDACTED]", "{r:?}");
    // A person's flow: a public native client with the hook's loopback redirect URI.
    let hook = person(|l| l);
    let code = ctx(
        &p,
        Some(AuthConfig {
            authorize: Some(hook.clone()),
            ..AuthConfig::default()
        }),
    );
    let r2 = call(&code, "echo", json!({ "text": "registered" }));
    assert!(r2.ok() && r2.text == "registered", "{r2:?}");
    let paths: Vec<String> = serde_json::from_value(p.stats()["token_paths"].clone()).unwrap();
    assert_eq!(
        paths.iter().filter(|x| *x == "POST /reg").count(),
        2,
        "{paths:?}"
    );
    assert_no_leak(&outputs(&cc, &[&r]), &p, &[]);
    assert_no_leak(&outputs(&code, &[&r2]), &p, &[]);
}

/// SEP-2352: the server moves to another authorization server during the run (a second
/// oidc-provider; the first one's tokens get a 401 from then on). The 401 makes the client read
/// the metadata again, register with the new issuer and take its token there; the new issuer
/// never sees a client id of the old one. A client id the caller gave (registered with the
/// first issuer) is refused rather than shown to the second.
#[test]
fn a_moved_authorization_server_gets_a_new_registration_and_never_the_old_client() {
    let p = peer("migrate");
    let moving = ctx(
        &p,
        Some(AuthConfig {
            authorize: Some(person(|l| l)),
            ..AuthConfig::default()
        }),
    );
    let r1 = call(&moving, "echo", json!({ "text": "before" }));
    assert!(r1.ok() && r1.text == "before", "{r1:?}");
    p.migrate();
    let r2 = call(&moving, "echo", json!({ "text": "after" }));
    assert!(r2.ok() && r2.text == "after", "{r2:?}");
    let stats = p.stats();
    let as2: Vec<String> = serde_json::from_value(stats["as2_paths"].clone()).unwrap();
    assert_eq!(
        as2.iter().filter(|x| *x == "POST /reg").count(),
        1,
        "one registration with the new issuer: {as2:?}"
    );
    let ids = |which: &str| -> Vec<String> {
        serde_json::from_value(stats["auth_client_ids"][which].clone()).unwrap()
    };
    let (at1, at2) = (ids("1"), ids("2"));
    assert_eq!((at1.len(), at2.len()), (1, 1), "{stats}");
    assert_ne!(at1[0], at2[0], "the old client id went to the new issuer");
    assert_eq!(
        stats["tokens_taken_from"].as_array().and_then(|a| a.last()),
        Some(&json!(2)),
        "the call went through with the new issuer's token: {stats}"
    );
    assert_no_leak(&outputs(&moving, &[&r1, &r2]), &p, &[]);

    // A client id the caller gave: `code`, registered with the first issuer only.
    let p = peer("migrate");
    let given = ctx(&p, Some(code_client(person(|l| l))));
    let r1 = call(&given, "echo", json!({ "text": "before" }));
    assert!(r1.ok(), "{r1:?}");
    p.migrate();
    let r2 = call(&given, "echo", json!({ "text": "after" }));
    let e = r2.error().map(str::to_owned).unwrap_or_default();
    assert!(
        !r2.ok()
            && e.contains("authorization server changed from")
            && e.contains("client id given"),
        "{r2:?}"
    );
    let stats = p.stats();
    assert_eq!(
        stats["as2_paths"].as_array().map(|a| a
            .iter()
            .filter(|x| !x
                .as_str()
                .is_some_and(|x| x.starts_with("GET /.well-known/")))
            .count()),
        Some(0),
        "only the new issuer's metadata was read there: {stats}"
    );
    assert_no_leak(&outputs(&given, &[&r1, &r2]), &p, &[]);
}

/// Issue 27 item 6: a server whose token endpoint takes only `none` (a public client with
/// PKCE) while its registration hands out a `client_secret` anyway; and a pre-registered
/// public client given a secret. The secret is never sent (oidc-provider refuses a `none`
/// client that authenticates) and never printed; the calls go through.
#[test]
fn a_public_client_leaves_an_unusable_secret_unsent() {
    let p = peer("public");
    // Dynamic registration: the reply carries a secret the server offers no way of sending.
    let registered = ctx(
        &p,
        Some(AuthConfig {
            authorize: Some(person(|l| l)),
            ..AuthConfig::default()
        }),
    );
    let r = call(&registered, "echo", json!({ "text": "public" }));
    assert!(r.ok() && r.text == "public", "{r:?}");
    // Pre-registered: `code` is a public client; a secret given with it is left unused.
    let given_secret = "given-but-unusable-secret-42";
    let pre = ctx(
        &p,
        Some(AuthConfig {
            flow: verifi_mcp_host::auth::AuthFlow::AuthorizationCode,
            client_secret: Some(given_secret.into()),
            ..code_client(person(|l| l))
        }),
    );
    let r2 = call(&pre, "whoami", json!({}));
    assert!(r2.ok() && r2.text == "token=[REDACTED]", "{r2:?}");
    let stats = p.stats();
    let paths: Vec<String> = serde_json::from_value(stats["token_paths"].clone()).unwrap();
    assert_eq!(
        paths.iter().filter(|x| *x == "POST /reg").count(),
        1,
        "{paths:?}"
    );
    assert_eq!(stats["token_requests"], 2, "{stats}");
    assert_eq!(
        stats["token_basic_auth"],
        json!([false, false]),
        "no secret in an authorization header: {stats}"
    );
    let secret = verifi_mcp_tests::auth_peer::PUBLIC_REG_SECRET;
    assert_no_leak(&outputs(&registered, &[&r]), &p, &[secret]);
    assert_no_leak(&outputs(&pre, &[&r2]), &p, &[given_secret]);
}

#[test]
fn the_manifest_takes_oauth_settings_per_slot() {
    let p = peer("header");
    let manifest = json!({ "slotFills": {
        "basic": { "endpoint": p.mcp,
                   "auth": { "client_id": "cc-basic", "client_secret": CC_BASIC_SECRET } },
        "jwt": { "endpoint": p.mcp,
                 "auth": { "client_id": "cc-jwt",
                           "client_private_key": p.key_file.to_str().unwrap(),
                           "scope": "mcp:tools" } },
        "none": { "endpoint": p.mcp },
    }})
    .to_string();
    let ctx = HarnessContext::from_manifest_str(&manifest, "run-manifest-auth", {
        let mut o = Options::default();
        o.timeout_ms = 15_000;
        o.secrets = Some(Vec::new());
        o.proxy_from_env = false;
        o.exact_mcp_urls = true;
        o
    })
    .unwrap();
    let mut results = Vec::new();
    for slot in ["basic", "jwt"] {
        let r = smol::block_on(ctx.mcp(slot).unwrap().call("whoami", json!({})));
        assert!(r.ok() && r.text == "token=[REDACTED]", "{slot}: {r:?}");
        results.push(r);
    }
    let r = smol::block_on(ctx.mcp("none").unwrap().call("echo", json!({"text": "x"})));
    assert!(r.error().unwrap_or("").starts_with("HTTP 401"), "{r:?}");
    assert_eq!(p.stats()["token_requests"], 2);
    let refs: Vec<&ToolResult> = results.iter().chain([&r]).collect();
    assert_no_leak(&outputs(&ctx, &refs), &p, &[CC_BASIC_SECRET]);
}

#[test]
fn concurrent_first_calls_share_one_authorization_and_list_tools_is_authorized() {
    let p = peer("header");
    let ctx = ctx(&p, Some(secret_client("cc-basic", CC_BASIC_SECRET)));
    let slot = ctx.mcp("s").unwrap();
    let results = smol::block_on(async {
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let slot = slot.clone();
                smol::spawn(
                    async move { slot.call("echo", json!({ "text": format!("c{i}") })).await },
                )
            })
            .collect();
        let mut out = Vec::new();
        for c in calls {
            out.push(c.await);
        }
        out
    });
    for (i, r) in results.iter().enumerate() {
        assert!(r.ok() && r.text == format!("c{i}"), "{r:?}");
    }
    assert_eq!(
        p.stats()["token_requests"],
        1,
        "one token for 16 concurrent first calls"
    );
    let tools = smol::block_on(slot.list_tools()).unwrap();
    assert!(tools.contains(&"whoami".to_owned()), "{tools:?}");
    smol::block_on(ctx.close());
    let refs: Vec<&ToolResult> = results.iter().collect();
    assert_no_leak(&outputs(&ctx, &refs), &p, &[CC_BASIC_SECRET]);
}

#[test]
fn a_dropped_calls_cancellation_carries_the_token() {
    let p = peer("header");
    let ctx = ctx(&p, Some(secret_client("cc-basic", CC_BASIC_SECRET)));
    let slot = ctx.mcp("s").unwrap();
    // The caller gives up on a slow call: the driver tells the server, with the held token.
    let gave_up = smol::block_on(smol::future::or(
        async {
            slot.call("slow", json!({ "ms": 5000 })).await;
            false
        },
        async {
            smol::Timer::after(Duration::from_millis(800)).await;
            true
        },
    ));
    assert!(gave_up);
    let t0 = Instant::now();
    loop {
        let methods = p.stats()["methods"].clone();
        if methods
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x == "notifications/cancelled"))
        {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no authorized notifications/cancelled reached the server: {methods}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(p.stats()["token_requests"], 1);
}
