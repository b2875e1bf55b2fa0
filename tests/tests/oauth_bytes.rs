//! OAuth at the byte level (issue 15): a scripted server on 127.0.0.1 plays the MCP server
//! and its authorization server at once, exactly as each case says, and records every
//! request. One case per discovery variant, a wrong issuer, a resource mismatch, a scope
//! step-up (the 2026 era's union of scopes too), a step-up loop, a refresh, a client ID
//! metadata document, and an authorization server that changes during a run.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use verifi_mcp_host::auth::{AuthConfig, AuthorizeHook, AuthorizeRequest};
use verifi_mcp_host::{EraSetting, HarnessContext, Options, ProtocolVersion, ToolResult};
use verifi_mcp_tests::{HostileServer, Request, Step};

type Handler = dyn Fn(&Request, &str) -> Vec<u8> + Send + Sync;

/// A server whose every request is answered by `handler(request, origin)`.
fn server(handler: impl Fn(&Request, &str) -> Vec<u8> + Send + Sync + 'static) -> HostileServer {
    let origin: Arc<OnceLock<String>> = Arc::default();
    let handler: Arc<Handler> = Arc::new(handler);
    let o = origin.clone();
    let s = HostileServer::start(move |_| {
        let (o, h) = (o.clone(), handler.clone());
        let respond: verifi_mcp_tests::hostile::Responder =
            Arc::new(move |r: &Request| h(r, o.get().map(String::as_str).unwrap_or("")));
        (0..64)
            .flat_map(|_| [Step::ReadRequest, Step::SendWith(respond.clone())])
            .collect()
    })
    .unwrap();
    let _ = origin.set(format!("http://{}", s.addr()));
    s
}

fn reply(status: u16, headers: &[(&str, String)], body: &str) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h.push_str(body);
    h.into_bytes()
}

fn json_reply(status: u16, v: &Value) -> Vec<u8> {
    reply(
        status,
        &[("content-type", "application/json".into())],
        &v.to_string(),
    )
}

fn not_found() -> Vec<u8> {
    reply(404, &[], "")
}

fn path(r: &Request) -> String {
    r.request_line().split(' ').nth(1).unwrap_or("").to_owned()
}

/// The MCP server's answer once authorized.
fn mcp(r: &Request) -> Vec<u8> {
    let id = r.id_json().unwrap_or_else(|| "null".into());
    match r.method().as_deref() {
        Some("initialize") => json_reply(
            200,
            &json!({"jsonrpc":"2.0","id":serde_json::from_str::<Value>(&id).unwrap(),
                    "result":{"protocolVersion":"2024-11-05","capabilities":{},
                              "serverInfo":{"name":"bytes","version":"1"}}}),
        ),
        Some(m) if m.starts_with("notifications/") => reply(202, &[], ""),
        Some("tools/call") => json_reply(
            200,
            &json!({"jsonrpc":"2.0","id":serde_json::from_str::<Value>(&id).unwrap(),
                    "result":{"content":[{"type":"text","text":"served"}]}}),
        ),
        _ => json_reply(
            200,
            &json!({"jsonrpc":"2.0","id":serde_json::from_str::<Value>(&id).unwrap(),
                    "error":{"code":-32601,"message":"no"}}),
        ),
    }
}

fn form(r: &Request) -> Vec<(String, String)> {
    form_urlencoded(&String::from_utf8_lossy(&r.body))
}

fn form_urlencoded(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |x: &str| {
                let x = x.replace('+', " ");
                let mut out = Vec::new();
                let b = x.as_bytes();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'%' && i + 2 < b.len() {
                        out.push(u8::from_str_radix(&x[i + 1..i + 3], 16).unwrap_or(b'?'));
                        i += 3;
                    } else {
                        out.push(b[i]);
                        i += 1;
                    }
                }
                String::from_utf8_lossy(&out).into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

fn get<'a>(f: &'a [(String, String)], k: &str) -> Option<&'a str> {
    f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

fn token_reply(access: &str, extra: Value) -> Vec<u8> {
    let mut v = json!({"access_token": access, "token_type": "Bearer"});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    json_reply(200, &v)
}

fn as_meta(issuer: &str, extra: Value) -> Value {
    let mut v = json!({
        "issuer": issuer,
        "token_endpoint": format!("{issuer}/token"),
        "authorization_endpoint": format!("{issuer}/authorize"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

fn unauthorized(challenge: &str) -> Vec<u8> {
    reply(401, &[("www-authenticate", challenge.to_owned())], "")
}

fn context(url: &str, auth: AuthConfig) -> HarnessContext {
    context_with(url, auth, |_| {})
}

/// [`context`] with `tune` applied to its options.
fn context_with(url: &str, auth: AuthConfig, tune: impl FnOnce(&mut Options)) -> HarnessContext {
    HarnessContext::from_manifest_str(
        &json!({ "slotFills": { "s": { "endpoint": url } } }).to_string(),
        "run-bytes",
        {
            let mut o = Options::default();
            o.timeout_ms = 10_000;
            o.secrets = Some(Vec::new());
            o.proxy_from_env = false;
            o.exact_mcp_urls = true;
            o.auth = Some(auth);
            tune(&mut o);
            o
        },
    )
    .unwrap()
}

fn client() -> AuthConfig {
    AuthConfig {
        client_id: Some("c1".into()),
        client_secret: Some("client-secret-of-c1".into()),
        ..AuthConfig::default()
    }
}

fn call(ctx: &HarnessContext) -> ToolResult {
    smol::block_on(ctx.mcp("s").unwrap().call("echo", json!({})))
}

/// The request lines, in order, without the MCP posts.
fn trail(s: &HostileServer) -> Vec<String> {
    s.requests()
        .iter()
        .map(|r| {
            let l = r.request_line();
            let mut p = l.split(' ');
            format!("{} {}", p.next().unwrap_or(""), p.next().unwrap_or(""))
        })
        .collect()
}

#[test]
fn discovery_from_the_challenges_resource_metadata_url() {
    let s = server(|r, o| match (path(r).as_str(), r.header("authorization")) {
        ("/mcp", Some(a)) if a == "Bearer access-from-challenge" => mcp(r),
        ("/mcp", _) => unauthorized(&format!(
            r#"Bearer error="invalid_token", resource_metadata="{o}/custom/prm""#
        )),
        ("/custom/prm", _) => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        ("/.well-known/oauth-authorization-server", _) => json_reply(200, &as_meta(o, json!({}))),
        ("/token", _) => token_reply("access-from-challenge", json!({"expires_in": 3600})),
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", s.base_url()), client());
    let r = call(&ctx);
    assert!(r.ok() && r.text == "served", "{r:?}");
    let t = trail(&s);
    assert_eq!(
        t[..4],
        [
            "POST /mcp",
            "GET /custom/prm",
            "GET /.well-known/oauth-authorization-server",
            "POST /token"
        ],
        "{t:?}"
    );
    assert!(
        !t.iter().any(|l| l.contains("oauth-protected-resource")),
        "{t:?}"
    );
    let tok = s
        .requests()
        .into_iter()
        .find(|r| path(r) == "/token")
        .unwrap();
    let f = form(&tok);
    assert_eq!(get(&f, "grant_type"), Some("client_credentials"));
    assert_eq!(
        get(&f, "resource"),
        Some(format!("{}/mcp", s.base_url()).as_str())
    );
    // client_secret_post, as the only secret method the metadata lists.
    assert_eq!(get(&f, "client_id"), Some("c1"));
    assert_eq!(get(&f, "client_secret"), Some("client-secret-of-c1"));
}

#[test]
fn discovery_path_aware_then_root_and_issuer_paths_in_order() {
    let s = server(|r, o| {
        let issuer = format!("{o}/tenant");
        match (path(r).as_str(), r.header("authorization")) {
            ("/api/mcp", Some(a)) if a == "Bearer access-by-well-known" => mcp(r),
            ("/api/mcp", _) => unauthorized("Bearer"),
            ("/.well-known/oauth-protected-resource", _) => json_reply(
                200,
                &json!({"resource": o, "authorization_servers": [issuer],
                        "scopes_supported": ["tools:read"]}),
            ),
            ("/tenant/.well-known/openid-configuration", _) => {
                json_reply(200, &as_meta(&issuer, json!({})))
            }
            ("/tenant/token", _) => token_reply("access-by-well-known", json!({})),
            _ => not_found(),
        }
    });
    let ctx = context(&format!("{}/api/mcp", s.base_url()), client());
    let r = call(&ctx);
    assert!(r.ok(), "{r:?}");
    let t = trail(&s);
    assert_eq!(
        t[..7],
        [
            "POST /api/mcp",
            "GET /.well-known/oauth-protected-resource/api/mcp",
            "GET /.well-known/oauth-protected-resource",
            "GET /.well-known/oauth-authorization-server/tenant",
            "GET /.well-known/openid-configuration/tenant",
            "GET /tenant/.well-known/openid-configuration",
            "POST /tenant/token",
        ],
        "{t:?}"
    );
    let tok = s
        .requests()
        .into_iter()
        .find(|r| path(r) == "/tenant/token")
        .unwrap();
    let f = form(&tok);
    // The resource exactly as published; the scope from scopes_supported (no challenge scope).
    assert_eq!(get(&f, "resource"), Some(s.base_url().as_str()));
    assert_eq!(get(&f, "scope"), Some("tools:read"));
}

#[test]
fn a_wrong_issuer_or_a_foreign_resource_stops_before_any_secret() {
    let wrong_issuer = server(|r, o| match path(r).as_str() {
        "/mcp" => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
        "/prm" => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        "/.well-known/oauth-authorization-server" => {
            json_reply(200, &as_meta("https://evil.example", json!({})))
        }
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", wrong_issuer.base_url()), client());
    let r = call(&ctx);
    assert_eq!(
        r.error(),
        Some(
            format!(
                "authorization stopped: authorization-server metadata names issuer \
                 \"https://evil.example\", not \"{}\"; nothing secret was sent",
                wrong_issuer.base_url()
            )
            .as_str()
        )
    );
    assert!(!trail(&wrong_issuer).iter().any(|l| l.contains("token")));

    let foreign = server(|r, o| match path(r).as_str() {
        "/mcp" => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
        "/prm" => json_reply(
            200,
            &json!({"resource": "https://other.example/mcp", "authorization_servers": [o]}),
        ),
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", foreign.base_url()), client());
    let r = call(&ctx);
    let e = r.error().unwrap();
    assert!(
        e.contains("metadata is for \"https://other.example/mcp\""),
        "{e}"
    );
    let t = trail(&foreign);
    assert_eq!(
        t,
        ["POST /mcp", "GET /prm"],
        "nothing went to any authorization server"
    );
    for r in foreign.requests() {
        assert!(!String::from_utf8_lossy(&r.body).contains("client-secret-of-c1"));
        assert!(r.header("authorization").is_none());
    }
}

/// `tok:<scopes>` for what the token request asked.
fn scoped_token(r: &Request) -> Vec<u8> {
    let f = form(r);
    let scope = get(&f, "scope").unwrap_or("").to_owned();
    token_reply(&format!("tok:{scope}"), json!({"scope": scope}))
}

#[test]
fn a_403_insufficient_scope_steps_up_once() {
    let s = server(|r, o| match (path(r).as_str(), r.header("authorization")) {
        ("/mcp", Some(a)) if a == "Bearer tok:admin" => mcp(r),
        ("/mcp", Some(_)) => reply(
            403,
            &[(
                "www-authenticate",
                r#"Bearer error="insufficient_scope", scope="admin""#.into(),
            )],
            "",
        ),
        ("/mcp", None) => unauthorized(&format!(
            r#"Bearer resource_metadata="{o}/prm", scope="read""#
        )),
        ("/prm", _) => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        ("/.well-known/oauth-authorization-server", _) => json_reply(200, &as_meta(o, json!({}))),
        ("/token", _) => scoped_token(r),
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", s.base_url()), client());
    let r = call(&ctx);
    assert!(r.ok() && r.text == "served", "{r:?}");
    let scopes: Vec<String> = s
        .requests()
        .iter()
        .filter(|r| path(r) == "/token")
        .map(|r| get(&form(r), "scope").unwrap_or("").to_owned())
        .collect();
    assert_eq!(scopes, ["read", "admin"]);
}

#[test]
fn a_server_that_always_wants_more_scope_is_stopped_after_three_step_ups() {
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = server(
        move |r, o| match (path(r).as_str(), r.header("authorization")) {
            ("/mcp", Some(_)) => {
                let k = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                reply(
                    403,
                    &[(
                        "www-authenticate",
                        format!(r#"Bearer error="insufficient_scope", scope="more{k}""#),
                    )],
                    "",
                )
            }
            ("/mcp", None) => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
            ("/prm", _) => json_reply(
                200,
                &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
            ),
            ("/.well-known/oauth-authorization-server", _) => {
                json_reply(200, &as_meta(o, json!({})))
            }
            ("/token", _) => scoped_token(r),
            _ => not_found(),
        },
    );
    let ctx = context(&format!("{}/mcp", s.base_url()), client());
    let r = call(&ctx);
    assert_eq!(
        r.error(),
        Some("authorization stopped: the server still wants more scope after 3 step-up attempts")
    );
    let tokens = s.requests().iter().filter(|r| path(r) == "/token").count();
    assert_eq!(tokens, 4, "the first token and three step-ups");
}

#[test]
fn a_token_near_expiry_is_refreshed_with_its_refresh_token() {
    let s = server(|r, o| match (path(r).as_str(), r.header("authorization")) {
        ("/mcp", Some(a)) if a == "Bearer access-one-aaaa" || a == "Bearer access-two-bbbb" => {
            mcp(r)
        }
        ("/mcp", _) => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
        ("/prm", _) => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        ("/.well-known/oauth-authorization-server", _) => json_reply(200, &as_meta(o, json!({}))),
        ("/token", _) => {
            let f = form(r);
            if get(&f, "grant_type") == Some("refresh_token") {
                token_reply("access-two-bbbb", json!({"expires_in": 3600}))
            } else {
                token_reply(
                    "access-one-aaaa",
                    json!({"expires_in": 5, "refresh_token": "refresh-token-rrrr"}),
                )
            }
        }
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", s.base_url()), client());
    for _ in 0..3 {
        let r = call(&ctx);
        assert!(r.ok(), "{r:?}");
    }
    let forms: Vec<Vec<(String, String)>> = s
        .requests()
        .iter()
        .filter(|r| path(r) == "/token")
        .map(form)
        .collect();
    assert_eq!(
        forms.len(),
        2,
        "one grant, then one refresh (the new token lasts)"
    );
    assert_eq!(get(&forms[1], "grant_type"), Some("refresh_token"));
    assert_eq!(get(&forms[1], "refresh_token"), Some("refresh-token-rrrr"));
    assert_eq!(
        get(&forms[1], "resource"),
        Some(format!("{}/mcp", s.base_url()).as_str())
    );
    let last = s
        .requests()
        .into_iter()
        .rfind(|r| path(r) == "/mcp")
        .unwrap();
    assert_eq!(
        last.header("authorization").as_deref(),
        Some("Bearer access-two-bbbb")
    );
}

/// A hook that must not be called (the server approves at once).
struct NeverAsked;

impl AuthorizeHook for NeverAsked {
    fn authorize<'a>(
        &'a self,
        _req: &'a AuthorizeRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>
    {
        Box::pin(async { Err("a person was asked".to_owned()) })
    }
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:7/callback".into()
    }
}

#[test]
fn a_client_id_metadata_document_is_the_client_id_where_supported() {
    let s = server(|r, o| {
        match (
            path(r).split('?').next().unwrap_or(""),
            r.header("authorization"),
        ) {
            ("/mcp", Some(a)) if a == "Bearer access-by-code-cccc" => mcp(r),
            ("/mcp", _) => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
            ("/prm", _) => json_reply(
                200,
                &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
            ),
            ("/.well-known/oauth-authorization-server", _) => json_reply(
                200,
                &as_meta(
                    o,
                    json!({"client_id_metadata_document_supported": true,
                       "authorization_response_iss_parameter_supported": true}),
                ),
            ),
            ("/authorize", _) => {
                let q = path(r);
                let f = form_urlencoded(q.split_once('?').map_or("", |(_, q)| q));
                let state = get(&f, "state").unwrap_or("");
                let iss: String = o.replace(':', "%3A").replace('/', "%2F");
                reply(
                    302,
                    &[(
                        "location",
                        format!(
                            "http://127.0.0.1:7/callback?code=the-code-xyz&state={state}&iss={iss}"
                        ),
                    )],
                    "",
                )
            }
            ("/token", _) => token_reply("access-by-code-cccc", json!({})),
            _ => not_found(),
        }
    });
    let ctx = context(
        &format!("{}/mcp", s.base_url()),
        AuthConfig {
            client_metadata_url: Some("https://client.example/verifi.json".into()),
            authorize: Some(Arc::new(NeverAsked)),
            ..AuthConfig::default()
        },
    );
    let r = call(&ctx);
    assert!(r.ok(), "{r:?}");
    let auth = s
        .requests()
        .into_iter()
        .find(|r| path(r).starts_with("/authorize?"))
        .unwrap();
    let p = path(&auth);
    let q = form_urlencoded(p.split_once('?').unwrap().1);
    assert_eq!(
        get(&q, "client_id"),
        Some("https://client.example/verifi.json")
    );
    assert_eq!(get(&q, "code_challenge_method"), Some("S256"));
    assert_eq!(
        get(&q, "resource"),
        Some(format!("{}/mcp", s.base_url()).as_str())
    );
    let tok = s
        .requests()
        .into_iter()
        .find(|r| path(r) == "/token")
        .unwrap();
    let f = form(&tok);
    assert_eq!(get(&f, "grant_type"), Some("authorization_code"));
    assert_eq!(get(&f, "code"), Some("the-code-xyz"));
    assert_eq!(
        get(&f, "client_id"),
        Some("https://client.example/verifi.json")
    );
    assert!(get(&f, "code_verifier").is_some_and(|v| v.len() >= 43));
    assert!(!trail(&s).iter().any(|l| l.contains("register")));
}

#[test]
fn authorization_replies_are_capped_and_bounded_in_time() {
    // A 1 MiB metadata document: refused by the cap, not buffered.
    let big = server(|r, o| match path(r).as_str() {
        "/mcp" => unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#)),
        "/prm" => json_reply(200, &json!({ "resource": "x".repeat(1 << 20) })),
        _ => not_found(),
    });
    let r = call(&context(&format!("{}/mcp", big.base_url()), client()));
    let e = r.error().unwrap();
    assert!(
        e.ends_with(
            "/prm: reply refused: HTTP response body is larger than its cap of 262144 bytes"
        ),
        "{e}"
    );

    // A metadata server that never answers: the call's timeout ends it.
    let slow = HostileServer::start(|n| {
        if n == 0 {
            vec![
                Step::ReadRequest,
                Step::Send(unauthorized(
                    r#"Bearer resource_metadata="http://127.0.0.1:9/x""#,
                )),
            ]
        } else {
            vec![
                Step::ReadRequest,
                Step::Hold(std::time::Duration::from_secs(5)),
            ]
        }
    })
    .unwrap();
    let url = format!("{}/mcp", slow.base_url());
    let ctx = HarnessContext::from_manifest_str(
        &json!({ "slotFills": { "s": { "endpoint": url } } }).to_string(),
        "r",
        {
            let mut o = Options::default();
            o.timeout_ms = 800;
            o.secrets = Some(Vec::new());
            o.proxy_from_env = false;
            o.exact_mcp_urls = true;
            o.auth = Some(client());
            o
        },
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let r = call(&ctx);
    let took = t0.elapsed();
    let e = r.error().unwrap();
    assert!(e.starts_with("authorization request failed: "), "{e}");
    assert!(took < std::time::Duration::from_secs(4), "took {took:?}");
}

#[test]
fn a_step_up_follows_the_403_of_the_call_itself() {
    // Only tools/call needs `admin`: a probe (ping) with the first token would pass, so the
    // challenge must come from the refused reply.
    let s = server(|r, o| match (path(r).as_str(), r.header("authorization")) {
        ("/mcp", None) => unauthorized(&format!(
            r#"Bearer resource_metadata="{o}/prm", scope="read""#
        )),
        ("/mcp", Some(a))
            if r.method().as_deref() == Some("tools/call") && a != "Bearer tok:admin" =>
        {
            reply(
                403,
                &[(
                    "www-authenticate",
                    r#"Bearer error="insufficient_scope", scope="admin""#.into(),
                )],
                r#"{"error":"insufficient_scope"}"#,
            )
        }
        ("/mcp", Some(_)) => mcp(r),
        ("/prm", _) => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        ("/.well-known/oauth-authorization-server", _) => json_reply(200, &as_meta(o, json!({}))),
        ("/token", _) => scoped_token(r),
        _ => not_found(),
    });
    let ctx = context(&format!("{}/mcp", s.base_url()), client());
    let r = call(&ctx);
    assert!(r.ok() && r.text == "served", "{r:?}");
    let scopes: Vec<String> = s
        .requests()
        .iter()
        .filter(|r| path(r) == "/token")
        .map(|r| get(&form(r), "scope").unwrap_or("").to_owned())
        .collect();
    assert_eq!(scopes, ["read", "admin"]);
    let pings = s
        .requests()
        .iter()
        .filter(|r| r.method().as_deref() == Some("ping") && r.header("authorization").is_some())
        .count();
    assert_eq!(
        pings, 0,
        "the challenge came from the call's own 403, not a probe"
    );
}

/// The MCP server's answer in the 2026-07-28 era (no handshake): `server/discover`,
/// `tools/list` and `tools/call`.
fn mcp_2026(r: &Request) -> Vec<u8> {
    let id: Value = serde_json::from_str(&r.id_json().unwrap_or_else(|| "null".into())).unwrap();
    let result = match r.method().as_deref() {
        Some("server/discover") => json!({"supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "resultType": "complete"}),
        Some("tools/list") => json!({"tools": [{"name": "echo",
            "inputSchema": {"type": "object"}}], "resultType": "complete"}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": "served"}],
            "resultType": "complete"}),
        _ => {
            return json_reply(
                200,
                &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"no"}}),
            );
        }
    };
    json_reply(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// A 2026-07-28 server whose `tools/call` needs `admin` and everything else `read`: a token
/// `tok:<scopes, + for a space>` holds the scopes it names.
fn step_up_2026_server() -> HostileServer {
    server(|r, o| match (path(r).as_str(), r.header("authorization")) {
        ("/mcp", None) => unauthorized(&format!(
            r#"Bearer resource_metadata="{o}/prm", scope="read""#
        )),
        ("/mcp", Some(a)) => {
            let held: Vec<String> = a
                .strip_prefix("Bearer tok:")
                .unwrap_or("")
                .split('+')
                .map(str::to_owned)
                .collect();
            let need = if r.method().as_deref() == Some("tools/call") {
                "admin"
            } else {
                "read"
            };
            if held.iter().any(|s| s == need) {
                mcp_2026(r)
            } else {
                reply(
                    403,
                    &[(
                        "www-authenticate",
                        format!(r#"Bearer error="insufficient_scope", scope="{need}""#),
                    )],
                    r#"{"error":"insufficient_scope"}"#,
                )
            }
        }
        ("/prm", _) => json_reply(
            200,
            &json!({"resource": format!("{o}/mcp"), "authorization_servers": [o]}),
        ),
        ("/.well-known/oauth-authorization-server", _) => json_reply(200, &as_meta(o, json!({}))),
        ("/token", _) => {
            let scope = get(&form(r), "scope").unwrap_or("").to_owned();
            token_reply(
                &format!("tok:{}", scope.replace(' ', "+")),
                json!({"scope": scope}),
            )
        }
        _ => not_found(),
    })
}

#[test]
fn a_2026_step_up_asks_for_the_union_whether_the_era_is_forced_or_probed() {
    // Forced: `--protocol-version 2026-07-28` (the era is never probed, so no probe records
    // it), as the official auth/scope-step-up runs; and found by the probe.
    for forced in [true, false] {
        let s = step_up_2026_server();
        let ctx = context_with(&format!("{}/mcp", s.base_url()), client(), |o| {
            if forced {
                o.era = EraSetting::Modern;
                o.protocol_version = ProtocolVersion::V2026_07_28;
            }
        });
        let r = call(&ctx);
        assert!(r.ok() && r.text == "served", "forced {forced}: {r:?}");
        let scopes: Vec<String> = s
            .requests()
            .iter()
            .filter(|r| path(r) == "/token")
            .map(|r| get(&form(r), "scope").unwrap_or("").to_owned())
            .collect();
        assert_eq!(
            scopes,
            ["read", "read admin"],
            "forced {forced}: the step-up keeps what was held (SEP-2350)"
        );
        let methods: Vec<String> = s.requests().iter().filter_map(|r| r.method()).collect();
        assert!(
            !methods.iter().any(|m| m == "initialize"),
            "forced {forced}: {methods:?}"
        );
    }
}

/// A server whose authorization server moves from `{o}/as1` to `{o}/as2` once a tool has
/// been called with an `as1` token: from then on the protected-resource metadata names `as2`
/// and only `as2`'s tokens are taken (401 for the rest). Each issuer registers clients
/// (`as1-client`, `as2-client`) and approves at once.
fn migrating_server() -> HostileServer {
    let moved = Arc::new(std::sync::atomic::AtomicBool::new(false));
    server(move |r, o| {
        use std::sync::atomic::Ordering::SeqCst;
        let p = path(r);
        let (route, query) = p.split_once('?').unwrap_or((p.as_str(), ""));
        let now = if moved.load(SeqCst) { "as2" } else { "as1" };
        match route {
            "/mcp" => {
                let a = r.header("authorization").unwrap_or_default();
                let ok = a.starts_with(&format!("Bearer {now}-token-"));
                if !ok {
                    return unauthorized(&format!(r#"Bearer resource_metadata="{o}/prm""#));
                }
                if r.method().as_deref() == Some("tools/call") {
                    moved.store(true, SeqCst);
                }
                mcp(r)
            }
            "/prm" => json_reply(
                200,
                &json!({"resource": format!("{o}/mcp"),
                        "authorization_servers": [format!("{o}/{now}")]}),
            ),
            "/.well-known/oauth-authorization-server/as1"
            | "/.well-known/oauth-authorization-server/as2" => {
                let which = &route[route.len() - 3..];
                let issuer = format!("{o}/{which}");
                json_reply(
                    200,
                    &as_meta(
                        &issuer,
                        json!({"registration_endpoint": format!("{issuer}/register")}),
                    ),
                )
            }
            "/as1/register" | "/as2/register" => json_reply(
                201,
                &json!({"client_id": format!("{}-client", &route[1..4]),
                        "token_endpoint_auth_method": "none"}),
            ),
            "/as1/authorize" | "/as2/authorize" => {
                let f = form_urlencoded(query);
                let state = get(&f, "state").unwrap_or("");
                reply(
                    302,
                    &[(
                        "location",
                        format!(
                            "http://127.0.0.1:7/callback?code={}-code&state={state}",
                            &route[1..4]
                        ),
                    )],
                    "",
                )
            }
            "/as1/token" | "/as2/token" => token_reply(
                &format!("{}-token-{}", &route[1..4], r.body.len()),
                json!({}),
            ),
            _ => not_found(),
        }
    })
}

/// The client id each request to `/asN/…` named (authorization query or token form).
fn client_ids_at(s: &HostileServer, prefix: &str) -> Vec<String> {
    s.requests()
        .iter()
        .filter(|r| path(r).starts_with(prefix))
        .filter_map(|r| {
            let p = path(r);
            let query = form_urlencoded(p.split_once('?').map_or("", |(_, q)| q));
            let body = form(r);
            get(&query, "client_id")
                .or_else(|| get(&body, "client_id"))
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn a_new_authorization_server_gets_a_new_registration_and_never_the_old_credentials() {
    let s = migrating_server();
    let code_flow = AuthConfig {
        flow: verifi_mcp_host::AuthFlow::AuthorizationCode,
        authorize: Some(Arc::new(NeverAsked)),
        ..AuthConfig::default()
    };
    let ctx = context(&format!("{}/mcp", s.base_url()), code_flow);
    let first = call(&ctx);
    assert!(first.ok(), "{first:?}");
    // The server has moved: the as1 token gets a 401, the metadata now names as2.
    let second = call(&ctx);
    assert!(second.ok(), "{second:?}");
    let lines = trail(&s);
    let registrations: Vec<&String> = lines.iter().filter(|l| l.contains("/register")).collect();
    assert_eq!(
        registrations,
        ["POST /as1/register", "POST /as2/register"],
        "{lines:#?}"
    );
    let at_as2 = client_ids_at(&s, "/as2/");
    assert!(
        !at_as2.is_empty() && at_as2.iter().all(|c| c == "as2-client"),
        "{at_as2:?}"
    );
    // After the move, nothing more goes to as1, and only as2's token goes to the server.
    let moved_at = lines
        .iter()
        .position(|l| l == "POST /as2/register")
        .unwrap();
    assert!(
        !lines[moved_at..].iter().any(|l| l.contains("/as1/")),
        "{lines:#?}"
    );
    let last = s
        .requests()
        .into_iter()
        .rfind(|r| path(r) == "/mcp")
        .unwrap();
    assert!(
        last.header("authorization")
            .is_some_and(|a| a.starts_with("Bearer as2-token-")),
        "{:?}",
        last.header("authorization")
    );

    // A client id the caller gave was registered with as1 only: refused at as2, and never
    // shown there.
    let s = migrating_server();
    let given = AuthConfig {
        flow: verifi_mcp_host::AuthFlow::AuthorizationCode,
        client_id: Some("given-client".into()),
        authorize: Some(Arc::new(NeverAsked)),
        ..AuthConfig::default()
    };
    let ctx = context(&format!("{}/mcp", s.base_url()), given);
    assert!(call(&ctx).ok());
    let r = call(&ctx);
    let o = s.base_url();
    assert_eq!(
        r.error(),
        Some(
            format!(
                "authorization stopped: the server's authorization server changed from {o}/as1 \
                 to {o}/as2; the client id given is for {o}/as1 and is not sent to another: give \
                 a client id registered with {o}/as2, or none (then the client registers there)"
            )
            .as_str()
        )
    );
    assert!(
        !trail(&s).iter().any(|l| l.contains("/as2/")),
        "{:#?}",
        trail(&s)
    );
}
