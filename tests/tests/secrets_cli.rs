//! Secrets in every form (issue 27 items 9 and 11), through the `mcp` command line and the
//! library, against a scripted server on loopback (`verifi_mcp_tests::hostile`) that answers
//! as a Kali-style server does: the command's output as JSON inside the tool's text, and the
//! same in `structuredContent`; it also reflects the request line it got (a server that echoes
//! its URL, as error pages and debug tools do).

mod support;

use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use verifi_mcp_host::{HarnessContext, Options};
use verifi_mcp_tests::hostile::{
    HostileServer, Request, Responder, Step, http_response, json_response, rpc_result,
};

/// The secret of item 11: a quote and a backslash.
const SECRET: &str = r#"pa"ss\word-12345"#;
/// The tail every form of [`SECRET`] shares: none of it may be printed.
const TAIL: &str = "word-12345";

fn mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    support::run_mcp(args, env, Duration::from_secs(30))
}

fn both(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A Kali-style server: `run_command` answers with `{"stdout": "… SECRET …"}` as text and as
/// `structuredContent` (there once more with `p` written as `\u0070`, an escape no byte
/// pattern covers), plus the request line it was sent.
fn kali() -> HostileServer {
    let responder: Responder = Arc::new(|req: &Request| match req.method().as_deref() {
        Some("initialize") => json_response(&rpc_result(
            req,
            r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"kali","version":"0"}}"#,
        )),
        Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
        // `key=value` pairs are typed by the tool's schema, so the command line lists first.
        Some("tools/list") => json_response(&rpc_result(
            req,
            r#"{"tools":[{"name":"run_command","inputSchema":{"type":"object","properties":{"command":{"type":"string"}}}}]}"#,
        )),
        Some("tools/call") => {
            let stdout = format!("uid=0(root)\nfound {SECRET} in /etc/app.conf\n");
            let text = json!({ "stdout": stdout, "stderr": "", "return_code": 0 }).to_string();
            let escaped = serde_json::to_string(SECRET).unwrap();
            let unicode = escaped.replacen('p', "\\u0070", 1);
            let result = format!(
                r#"{{"content":[{{"type":"text","text":{}}},{{"type":"text","text":{}}}],"structuredContent":{{"stdout":{},"again":{}}}}}"#,
                serde_json::to_string(&text).unwrap(),
                serde_json::to_string(&format!("request: {}", req.request_line())).unwrap(),
                escaped,
                unicode,
            );
            json_response(&rpc_result(req, &result))
        }
        _ => http_response(400, &[], b"unexpected request"),
    });
    let steps: Vec<Step> = (0..20)
        .flat_map(|_| [Step::ReadRequest, Step::SendWith(responder.clone())])
        .collect();
    HostileServer::every_connection(steps).unwrap()
}

#[test]
fn a_secret_with_a_quote_is_redacted_in_text_raw_structured_content_and_verbose_bodies() {
    let server = kali();
    let url = format!("{}/mcp", server.base_url());
    let out = mcp(
        &["call", "-v", "--raw", &url, "run_command", "command=id"],
        &[("KALI_PASSWORD", SECRET)],
    );
    let all = both(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("uid=0(root)"), "{all}");
    assert!(all.contains("[REDACTED]"), "{all}");
    // Neither the secret, nor its escaped forms (once in the text, twice in the -v body and
    // --raw), nor its \u-escaped spelling in structuredContent.
    assert!(
        !all.contains(TAIL),
        "a form of the secret was printed:\n{all}"
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.method().as_deref() == Some("tools/call")),
        "the tool was called"
    );
}

#[test]
fn a_url_password_and_secret_query_values_are_never_printed() {
    let server = kali();
    let key = "apikey-value-0123456789";
    let sig = "signature-value-987654";
    let fb_token = "fallback-token-555555";
    let url = format!(
        "{}/mcp?api_key={key}&page=2&X-Amz-Signature={sig}",
        server.base_url()
    );
    let fallback = format!("http://127.0.0.1:1/mcp?access_token={fb_token}");
    // -v shows the request line; the server reflects it in the tool's text.
    let out = mcp(
        &[
            "call",
            "-v",
            "--raw",
            "--exact-url",
            &url,
            "--fallback",
            &fallback,
            "run_command",
            "command=id",
        ],
        &[],
    );
    let all = both(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("request: POST /mcp?api_key=[REDACTED]&page=2"),
        "{all}"
    );
    for s in [key, sig, fb_token] {
        assert!(!all.contains(s), "{s} was printed:\n{all}");
    }
    // The server did get them (the URL is used as given).
    let first = server.requests()[0].request_line();
    assert!(first.contains(key) && first.contains(sig), "{first}");
    // A password in the userinfo: refused, and the refusal masks it.
    let out = mcp(
        &[
            "call",
            "http://user:userinfo-pass-4242@127.0.0.1:1/mcp",
            "echo",
        ],
        &[],
    );
    let all = both(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("user:[REDACTED]@"), "{all}");
    assert!(!all.contains("userinfo-pass-4242"), "{all}");
    // A fallback that is down, the primary too: the errors name neither value.
    let out = mcp(
        &[
            "call",
            "-v",
            "--exact-url",
            "http://127.0.0.1:1/mcp?token=primary-token-31337",
            "--fallback",
            &fallback,
            "echo",
        ],
        &[],
    );
    let all = both(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        !all.contains("primary-token-31337") && !all.contains(fb_token),
        "{all}"
    );
}

#[test]
fn the_library_keeps_url_secrets_out_of_results_timeline_and_log() {
    let server = kali();
    let key = "library-key-0123456789";
    let manifest = json!({ "slotFills": { "kali": {
        "endpoint": format!("{}/mcp?session_token={key}", server.base_url()),
    } } })
    .to_string();
    let ctx = HarnessContext::from_manifest_str(&manifest, "run-secrets", {
        let mut o = Options::default();
        o.secrets = Some(vec![SECRET.to_owned()]);
        o.proxy_from_env = false;
        o.exact_mcp_urls = true;
        o.keep_raw = true;
        o
    })
    .unwrap();
    let slot = ctx.mcp("kali").unwrap();
    let r = smol::block_on(slot.call("run_command", json!({ "command": "id" })));
    assert!(r.ok(), "{r:?}");
    let mut all = format!("{r:?}\n{}\n", serde_json::to_string(&r).unwrap());
    for e in ctx.timeline() {
        all.push_str(&e.json);
    }
    all.push_str(&ctx.log_lines().join("\n"));
    all.push_str(&format!("{:?}", ctx.ledger()));
    assert!(r.text.contains("session_token=[REDACTED]"), "{}", r.text);
    assert!(!all.contains(key), "{all}");
    assert!(!all.contains(TAIL), "{all}");
    let raw = r.raw.as_deref().unwrap();
    let v: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(
        v["result"]["structuredContent"],
        json!({ "stdout": "[REDACTED]", "again": "[REDACTED]" }),
        "{raw}"
    );
}
