//! Proxies and trust (issue 15), against real servers on loopback: Debian's `tinyproxy` as the
//! forward proxy (installed by `scripts/proxy-peers.sh`), the rmcp test server behind it, and
//! rustls servers with `rcgen` certificates (self-signed, expired, wrong name, unknown issuer,
//! a private CA).
//!
//! Each test asserts what crossed the proxy from tinyproxy's own log of request lines: a
//! `CONNECT` tunnel for `https` (and for a proxy with credentials), absolute-form requests for
//! plain `http`.

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;
use verifi_mcp_host::context::INSECURE_WARNING;
use verifi_mcp_host::{HarnessContext, Options, RootCert};
use verifi_mcp_tests::{Mode, TestServer, Tinyproxy, TlsProxy};

fn one_slot(url: &str) -> String {
    json!({ "slotFills": { "s": { "endpoint": url } } }).to_string()
}

fn options() -> Options {
    {
        let mut o = Options::default();
        o.timeout_ms = 10_000;
        o.secrets = Some(Vec::new());
        o.proxy_from_env = false;
        o
    }
}

fn tinyproxy(basic: Option<(&str, &str)>) -> Tinyproxy {
    Tinyproxy::start(basic).unwrap_or_else(|e| panic!("cannot run this test: {e}"))
}

fn echo(ctx: &HarnessContext, slot: &str, text: &str) -> verifi_mcp_host::ToolResult {
    let h = ctx.mcp(slot).unwrap();
    smol::block_on(h.call("echo", json!({ "text": text })))
}

/// Everything a run can show: results' errors, text, the timeline and the log.
fn everything(ctx: &HarnessContext, results: &[&verifi_mcp_host::ToolResult]) -> String {
    let mut all = String::new();
    for r in results {
        all.push_str(&format!("{r:?}\n{}\n", serde_json::to_string(r).unwrap()));
    }
    for e in ctx.timeline() {
        all.push_str(&e.json);
    }
    all.push_str(&ctx.log_lines().join("\n"));
    all
}

#[test]
fn https_goes_through_tinyproxy_in_a_connect_tunnel() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let tls = TlsProxy::start(server.addr()).unwrap();
    let tp = tinyproxy(None);
    let ctx = HarnessContext::from_manifest_str(&one_slot(&tls.base_url()), "r", {
        let mut o = options();
        o.proxy = Some(tp.url());
        o.root_certs = vec![RootCert::Pem(tls.root_pem().as_bytes().to_vec())];
        o
    })
    .unwrap();
    // The first call lists the tools, then calls. rmcp ends a reply stream when its handler
    // task ends, which on a loaded machine comes tens of ms after the answer (40-55 ms
    // measured through both proxies); a request that finds the last reply's end not come after
    // 25 ms rightly takes a new connection (one is reused only once its reply ended exactly),
    // so this first call may open a second tunnel, never a third.
    let r = echo(&ctx, "s", "warm");
    assert!(r.ok(), "{r:?}");
    std::thread::sleep(Duration::from_millis(500));
    let warm = tp.requests().len();
    assert!((1..=2).contains(&warm), "{:?}", tp.requests());
    // After a pause longer than that lag, each reply's end is waiting in the socket when the
    // next call takes the connection: the tunnel is a kept-alive connection like any other,
    // and three calls open none.
    for i in 0..3 {
        let r = echo(&ctx, "s", &format!("through the tunnel {i}"));
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.text, format!("through the tunnel {i}"));
        std::thread::sleep(Duration::from_millis(500));
    }
    let port = tls.addr().port();
    let requests = tp.requests();
    for line in &requests {
        assert_eq!(
            line,
            &format!("CONNECT localhost:{port} HTTP/1.1"),
            "{requests:?}"
        );
    }
    assert_eq!(requests.len(), warm, "a call opened a tunnel: {requests:?}");
    assert_eq!(tls.handshakes(), requests.len());
}

#[test]
fn http_goes_through_tinyproxy_in_absolute_form() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let tp = tinyproxy(None);
    let ctx = HarnessContext::from_manifest_str(&one_slot(&server.base_url()), "r", {
        let mut o = options();
        o.proxy = Some(tp.url());
        o
    })
    .unwrap();
    for i in 0..5 {
        let r = echo(&ctx, "s", &format!("absolute {i}"));
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.text, format!("absolute {i}"));
    }
    let want = format!("POST http://{}/mcp HTTP/1.1", server.addr());
    let requests = tp.requests();
    assert!(requests.contains(&want), "{want} not in {requests:?}");
    assert!(
        requests
            .iter()
            .all(|l| l.contains(&format!("http://{}/mcp", server.addr()))),
        "every request went through the proxy in absolute form: {requests:?}"
    );
    // Every request reached the server (in the 2026 era: the probe, tools/list and the calls).
    assert!(server.stats().http_requests() as usize >= requests.len());
    // Absolute-form connections are not pooled (a proxy may close them unannounced): one
    // client connection per request.
    // (The first connection logged is `Tinyproxy::start`'s readiness check.)
    let connects = tp.log().matches("Connect (file descriptor").count() - 1;
    assert_eq!(connects, requests.len(), "{}", tp.log());
}

#[test]
fn proxy_credentials_work_and_never_show() {
    const PASS: &str = "pr0xy-Sekr1t-pass";
    const WRONG: &str = "wr0ng-Sekr1t-pass";
    let server = TestServer::start(Mode::Stateful).unwrap();
    let tp = tinyproxy(Some(("alice", PASS)));
    let good = HarnessContext::from_manifest_str(&one_slot(&server.base_url()), "r", {
        let mut o = options();
        o.proxy = Some(tp.url_with("alice", PASS));
        o
    })
    .unwrap();
    let r = echo(&good, "s", &format!("the proxy password is {PASS}"));
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.text, "the proxy password is [REDACTED]");
    // With credentials, plain http is tunnelled too: they go to the proxy alone.
    let requests = tp.requests();
    assert!(
        !requests.is_empty() && requests.iter().all(|l| l.starts_with("CONNECT ")),
        "{requests:?}"
    );
    let bad = HarnessContext::from_manifest_str(&one_slot(&server.base_url()), "r", {
        let mut o = options();
        o.proxy = Some(tp.url_with("alice", WRONG));
        o
    })
    .unwrap();
    let r2 = echo(&bad, "s", "never arrives");
    assert!(!r2.ok());
    assert_eq!(
        r2.error(),
        Some("could not connect: socket error (proxy refused the credentials in its URL (401))")
    );
    // No credentials at all: refused (tinyproxy answers an absolute-form request with 401 and
    // may reset the connection before its reply is read, so only the refusal is asserted).
    let none = HarnessContext::from_manifest_str(&one_slot(&server.base_url()), "r", {
        let mut o = options();
        o.proxy = Some(tp.url());
        o
    })
    .unwrap();
    let r3 = echo(&none, "s", "never arrives");
    assert!(!r3.ok(), "{r3:?}");
    for (ctx, r) in [(&good, &r), (&bad, &r2)] {
        let all = everything(ctx, &[r]);
        for secret in [PASS, WRONG] {
            assert!(!all.contains(secret), "a proxy password leaked: {all}");
        }
    }
}

#[test]
fn explicit_proxy_covers_loopback_and_a_slots_proxy_wins() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let tp = tinyproxy(None);
    // Nothing listens on port 1: the context's proxy is refused.
    let manifest = json!({ "slotFills": {
        "default": { "endpoint": server.base_url() },
        "via": { "endpoint": server.base_url(), "proxy": tp.url() },
        "direct": { "endpoint": server.base_url(), "proxy": "none" },
    }})
    .to_string();
    let ctx = HarnessContext::from_manifest_str(&manifest, "r", {
        let mut o = options();
        o.proxy = Some("http://127.0.0.1:1".into());
        o
    })
    .unwrap();
    let r = echo(&ctx, "default", "x");
    assert!(!r.ok());
    let e = r.error().unwrap();
    assert!(
        e.starts_with("could not connect: connection refused (proxy http://127.0.0.1:1:"),
        "{e}"
    );
    let before = tp.requests().len();
    let r = echo(&ctx, "direct", "straight");
    assert!(r.ok() && r.text == "straight", "{r:?}");
    assert_eq!(tp.requests().len(), before, "the direct slot used no proxy");
    let r = echo(&ctx, "via", "proxied");
    assert!(r.ok() && r.text == "proxied", "{r:?}");
    assert!(tp.requests().len() > before);
    let bad = json!({ "slotFills": { "b": { "endpoint": server.base_url(),
                                            "proxy": "socks5://u:hunter22@h:1" } } })
    .to_string();
    let ctx = HarnessContext::from_manifest_str(&bad, "r", options()).unwrap();
    let r = echo(&ctx, "b", "x");
    assert!(!r.ok());
    let e = r.error().unwrap();
    assert!(e.contains("slot 'b': bad proxy: scheme socks5://"), "{e}");
    assert!(!e.contains("hunter22"), "{e}");
}

/// A CA and certificates it signs.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(p, key),
        }
    }

    /// A leaf for `names`, valid now unless `expired`: (chain, key).
    fn leaf(&self, names: &[&str], expired: bool) -> (Vec<Vec<u8>>, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (vec![cert.der().to_vec()], key.serialize_der())
    }

    fn serve(&self, upstream: &TestServer, names: &[&str], expired: bool) -> TlsProxy {
        let (chain, key) = self.leaf(names, expired);
        TlsProxy::start_with(upstream.addr(), chain, key, self.pem.clone()).unwrap()
    }
}

fn trusting(url: &str, pem: Option<&str>, insecure: bool) -> HarnessContext {
    HarnessContext::from_manifest_str(&one_slot(url), "r", {
        let mut o = options();
        o.root_certs = pem
            .map(|p| vec![RootCert::Pem(p.as_bytes().to_vec())])
            .unwrap_or_default();
        o.insecure = insecure;
        o
    })
    .unwrap()
}

fn tls_error(ctx: &HarnessContext) -> String {
    let r = echo(ctx, "s", "x");
    assert!(!r.ok(), "{r:?}");
    r.error().unwrap().to_owned()
}

#[test]
fn refused_certificates_say_why_in_plain_words() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let say = |words: &str| format!("could not connect: TLS handshake failed ({words})");

    let own = TlsProxy::start(server.addr()).unwrap();
    assert_eq!(
        tls_error(&trusting(&own.base_url(), None, false)),
        say("self-signed certificate; trust it with --cacert FILE")
    );
    let ok = echo(
        &trusting(&own.base_url(), Some(own.root_pem()), false),
        "s",
        "t",
    );
    assert!(ok.ok() && ok.text == "t", "{ok:?}");

    let ca = Ca::new("private CA");
    let expired = ca.serve(&server, &["localhost"], true);
    assert_eq!(
        tls_error(&trusting(&expired.base_url(), Some(&ca.pem), false)),
        say("server certificate expired (or not yet valid)")
    );
    let other_name = ca.serve(&server, &["other.test"], false);
    assert_eq!(
        tls_error(&trusting(&other_name.base_url(), Some(&ca.pem), false)),
        say("certificate is for another host name than the URL's")
    );
    let good = ca.serve(&server, &["localhost"], false);
    assert_eq!(
        tls_error(&trusting(&good.base_url(), None, false)),
        say("unknown certificate issuer; trust its CA: --cacert")
    );
    let r = echo(
        &trusting(&good.base_url(), Some(&ca.pem), false),
        "s",
        "private CA",
    );
    assert!(r.ok() && r.text == "private CA", "{r:?}");
}

#[test]
fn insecure_accepts_any_certificate_and_says_so_first() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let own = TlsProxy::start(server.addr()).unwrap();
    let ca = Ca::new("nobody trusts me");
    let expired = ca.serve(&server, &["other.test"], true);
    for url in [own.base_url(), expired.base_url()] {
        let ctx = trusting(&url, None, true);
        assert_eq!(
            ctx.log_lines().first().map(String::as_str),
            Some(INSECURE_WARNING)
        );
        let r = echo(&ctx, "s", "lab box");
        assert!(r.ok() && r.text == "lab box", "{r:?}");
    }
    let strict = trusting(&own.base_url(), None, false);
    assert!(strict.log_lines().is_empty());
}

#[test]
fn a_slots_ca_is_trusted_for_that_slot_only() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let ca = Ca::new("slot CA");
    let tls = ca.serve(&server, &["localhost"], false);
    let dir = std::env::temp_dir().join(format!("verifi-slot-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ca.pem");
    std::fs::write(&file, &ca.pem).unwrap();
    let manifest = json!({ "slotFills": {
        "file": { "endpoint": tls.base_url(), "ca": file.to_str().unwrap() },
        "inline": { "endpoint": tls.base_url(), "ca": ca.pem },
        "plain": { "endpoint": tls.base_url() },
    }})
    .to_string();
    let ctx = HarnessContext::from_manifest_str(&manifest, "r", options()).unwrap();
    for slot in ["file", "inline"] {
        let r = echo(&ctx, slot, slot);
        assert!(r.ok() && r.text == slot, "{slot}: {r:?}");
    }
    let r = echo(&ctx, "plain", "x");
    assert!(r.error().unwrap().contains("unknown certificate issuer"));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the `mcp` command line ----------------------------------------------------------------

/// Runs `mcp ARGS…` with `env` (proxy and OAuth variables cleared first), bounded.
fn mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    support::run_mcp(args, env, Duration::from_secs(30))
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn mcp_cli_proxy_cacert_insecure_and_the_environment() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let tls = TlsProxy::start(server.addr()).unwrap();
    const PASS: &str = "cli-pr0xy-Sekr1t";
    let tp = tinyproxy(Some(("bob", PASS)));
    let dir = std::env::temp_dir().join(format!("verifi-cli-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tls.root_pem()).unwrap();
    let url = tls.base_url();
    let proxy = tp.url_with("bob", PASS);
    let args = json!({ "text": format!("pw {PASS}") }).to_string();

    // --proxy with credentials and --cacert: through the tunnel, the password redacted.
    let o = mcp(
        &[
            "call",
            &url,
            "echo",
            &args,
            "--proxy",
            &proxy,
            "--cacert",
            ca.to_str().unwrap(),
        ],
        &[],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("pw [REDACTED]"), "{out}");
    assert!(!out.contains(PASS) && !err.contains(PASS), "{out}\n{err}");
    assert!(
        tp.requests()
            .iter()
            .any(|l| l.starts_with("CONNECT localhost:"))
    );

    // Without --cacert: the plain-words refusal.
    let o = mcp(&["call", &url, "echo", "{}"], &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("self-signed certificate; trust it with --cacert FILE"),
        "{out}\n{err}"
    );

    // --insecure: accepted, and said on stderr.
    let o = mcp(
        &["call", &url, "echo", r#"{"text":"lab"}"#, "--insecure"],
        &[],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(err.contains(INSECURE_WARNING), "{err}");

    // The environment's proxy skips loopback targets (a dead proxy does not matter)…
    let dead = [("HTTPS_PROXY", "http://127.0.0.1:1")];
    let o = mcp(
        &["call", &url, "echo", "{}", "--cacert", ca.to_str().unwrap()],
        &dead,
    );
    assert!(o.status.success(), "{:?}", text(&o));
    // …but is used for other names: only the proxy could have answered for this one.
    let before = tp.requests().len();
    let env = [("HTTPS_PROXY", proxy.as_str())];
    let o = mcp(&["call", "https://mcp.invalid:9", "echo", "{}"], &env);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("proxy refused the tunnel"),
        "{out}\n{err}"
    );
    assert!(!out.contains(PASS) && !err.contains(PASS), "{out}\n{err}");
    assert!(
        tp.requests()[before..]
            .iter()
            .any(|l| l == "CONNECT mcp.invalid:9 HTTP/1.1")
    );
    // HTTP_PROXY for plain http: the request goes to the proxy in absolute form.
    let before = tp.requests().len();
    let env = [("HTTP_PROXY", tp.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = mcp(&["call", "http://mcp.invalid:9", "echo", "{}"], &env);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        tp.requests()[before..]
            .iter()
            .any(|l| l == "POST http://mcp.invalid:9/mcp HTTP/1.1"),
        "{:?}",
        tp.requests()
    );
    // NO_PROXY sends it direct, where the name does not resolve.
    let env = [("HTTPS_PROXY", proxy.as_str()), ("NO_PROXY", ".invalid")];
    let o = mcp(&["call", "https://mcp.invalid:9", "echo", "{}"], &env);
    let (out, err) = text(&o);
    assert!(
        format!("{out}{err}").contains("host name did not resolve"),
        "{out}\n{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hostile_proxy_is_a_typed_error_within_the_deadline() {
    use verifi_mcp_tests::{HostileServer, Step};
    let cases: [(Vec<Step>, &str); 3] = [
        (
            vec![
                Step::ReadRequest,
                Step::Send(b"HTTP/1.1 502 Bad Gateway\r\n\r\n".to_vec()),
            ],
            "could not connect: socket error (proxy refused the tunnel: 502 Bad Gateway)",
        ),
        (
            vec![
                Step::ReadRequest,
                Step::Send(b"SSH-2.0-OpenSSH\r\n\r\n".to_vec()),
            ],
            "could not connect: socket error (proxy reply: not an HTTP/1.x status line)",
        ),
        (
            vec![Step::ReadRequest, Step::Send(vec![b'x'; 9000])],
            "could not connect: socket error (proxy reply: head larger than 8 KiB)",
        ),
    ];
    for (steps, want) in cases {
        let proxy = HostileServer::every_connection(steps).unwrap();
        let ctx = HarnessContext::from_manifest_str(&one_slot("https://mcp.example:443"), "r", {
            let mut o = options();
            o.proxy = Some(proxy.base_url());
            o
        })
        .unwrap();
        let r = echo(&ctx, "s", "x");
        assert_eq!(r.error(), Some(want));
        let line = proxy.requests()[0].request_line();
        assert_eq!(line, "CONNECT mcp.example:443 HTTP/1.1");
    }
    // A proxy that never answers: the call's timeout.
    let silent = HostileServer::every_connection(vec![
        Step::ReadRequest,
        Step::Hold(Duration::from_secs(5)),
    ])
    .unwrap();
    let ctx = HarnessContext::from_manifest_str(&one_slot("https://mcp.example"), "r", {
        let mut o = options();
        o.proxy = Some(silent.base_url());
        o.timeout_ms = 500;
        o
    })
    .unwrap();
    let t0 = Instant::now();
    let r = echo(&ctx, "s", "x");
    assert!(
        r.error()
            .is_some_and(|e| e.starts_with("tool call timed out after")),
        "{r:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
}
