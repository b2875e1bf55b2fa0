//! The authorization decisions, as plain functions with no network: reading a
//! `WWW-Authenticate` challenge, which metadata URLs to try and in what order, whether a
//! resource or issuer may be trusted, which scope to ask for, which client authentication to
//! use, and when to refresh or step up.
//!
//! Owns: every "what next" of the OAuth client (MCP authorization, RFC 9728, 8414, 8707, 9207).
//! Does not own: any request (the `client` module sends them).

use std::fmt;

use verifi_mcp_core::wire::era::EraSetting;

/// A `Bearer` challenge from a `WWW-Authenticate` header (RFC 6750, RFC 9728 section 5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the resource wants for this request.
    pub scope: Option<String>,
    /// `error` (`invalid_token`, `insufficient_scope`, …).
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge in a `WWW-Authenticate` value (which may hold several
    /// challenges), if there is one. Parameter names are case-insensitive; values are tokens
    /// or quoted strings with `\` escapes.
    pub fn parse(header: &str) -> Option<Challenge> {
        let mut rest = header.trim_start();
        let mut found: Option<Challenge> = None;
        while !rest.is_empty() {
            // A scheme token, then its parameters up to the next scheme.
            let end = rest.find([' ', ',']).unwrap_or(rest.len());
            let (scheme, after) = rest.split_at(end);
            let bearer = scheme.eq_ignore_ascii_case("bearer");
            let mut c = Challenge::default();
            rest = after.trim_start_matches([' ', ',']);
            while let Some((name, value, after)) = param(rest) {
                rest = after.trim_start_matches([' ', ',']);
                match name.to_ascii_lowercase().as_str() {
                    "resource_metadata" => c.resource_metadata = Some(value),
                    "scope" => c.scope = Some(value),
                    "error" => c.error = Some(value),
                    "error_description" => c.error_description = Some(value),
                    _ => {}
                }
            }
            if bearer && found.is_none() {
                found = Some(c);
            }
            if rest.len() == header.len() {
                break;
            }
        }
        found
    }

    /// The scopes of [`Challenge::scope`], split.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    /// Whether this is a step-up request (`error="insufficient_scope"`).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// One `name=value` auth-param at the start of `s`: (name, value unquoted, rest).
fn param(s: &str) -> Option<(&str, String, &str)> {
    let eq = s.find('=')?;
    let name = s.get(..eq)?.trim();
    if name.is_empty() || name.contains([' ', ',', '"']) {
        return None; // the next challenge's scheme
    }
    let v = s.get(eq + 1..)?.trim_start();
    if let Some(q) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.char_indices();
        while let Some((i, ch)) = chars.next() {
            match ch {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        out.push(e);
                    }
                }
                '"' => return Some((name, out, q.get(i + 1..).unwrap_or(""))),
                c => out.push(c),
            }
        }
        Some((name, out, ""))
    } else {
        let end = v.find([',', ' ']).unwrap_or(v.len());
        Some((name, v.get(..end)?.to_owned(), v.get(end..).unwrap_or("")))
    }
}

/// Space-separated scopes, without empties or repeats, in order.
pub fn split_scopes(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in s.split_ascii_whitespace() {
        if !out.iter().any(|x| x == w) {
            out.push(w.to_owned());
        }
    }
    out
}

/// A URL split into origin (`scheme://host[:port]`) and path (without query), enough for the
/// comparisons here. Only `http` and `https`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    /// `https://host:port`, lower-case scheme and host, default port dropped.
    pub origin: String,
    /// The path, `/` when empty, without a trailing slash (except `/` itself).
    pub path: String,
}

impl UrlParts {
    /// Parses `url`, or says why it cannot be used.
    pub fn parse(url: &str) -> Result<UrlParts, AuthDecisionError> {
        let bad = || AuthDecisionError::BadUrl(url.to_owned());
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "https" => "443",
            "http" => "80",
            _ => return Err(bad()),
        };
        let rest = rest.split('#').next().unwrap_or("");
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(cut);
        if authority.is_empty() || authority.contains('@') {
            return Err(bad());
        }
        let authority = authority.to_ascii_lowercase();
        let authority = match authority.rsplit_once(':') {
            Some((h, p)) if p == default && !h.ends_with(':') => h.to_owned(),
            _ => authority,
        };
        let path = tail.split('?').next().unwrap_or("");
        let path = path.trim_end_matches('/');
        Ok(UrlParts {
            origin: format!("{scheme}://{authority}"),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        })
    }
}

/// Why a decision refuses to go on (before anything secret is sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthDecisionError {
    /// A URL in metadata or a challenge is not an http(s) URL.
    BadUrl(String),
    /// The protected-resource metadata names another resource than the server's.
    ResourceMismatch {
        /// What the metadata says.
        published: String,
        /// The MCP server's URL.
        server: String,
    },
    /// The authorization server's metadata names another issuer than the one asked.
    IssuerMismatch {
        /// What the metadata says.
        published: String,
        /// The issuer whose metadata was fetched.
        expected: String,
    },
    /// The authorization response's `iss` is missing (when required) or another issuer's.
    WrongIss {
        /// What came back (None: missing).
        got: Option<String>,
        /// The issuer.
        expected: String,
    },
    /// The authorization response's `state` is not the one sent.
    StateMismatch,
    /// No client authentication both sides support with the credentials given.
    NoAuthMethod {
        /// What the server supports.
        supported: Vec<String>,
        /// What the client holds (`a secret`, `no credential`, …).
        held: &'static str,
        /// Whether the grant could have gone as a public client (the code flow).
        public_ok: bool,
    },
    /// The scope step-up did not settle within its attempts.
    StepUpExhausted(u32),
    /// A plain-http issuer or endpoint that is not on loopback.
    InsecureEndpoint(String),
    /// The server now names another authorization server, and the client id in use was given
    /// for the one before (SEP-2352: client credentials are bound to their authorization
    /// server, never presented to another).
    AuthorizationServerMoved {
        /// The issuer the client id was used with.
        from: String,
        /// The issuer the server names now.
        to: String,
    },
}

impl fmt::Display for AuthDecisionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthDecisionError::BadUrl(u) => write!(f, "not an http(s) URL: {u:?}"),
            AuthDecisionError::ResourceMismatch { published, server } => write!(
                f,
                "protected-resource metadata is for {published:?}, not this server \
                 ({server}); nothing was sent to its authorization server"
            ),
            AuthDecisionError::IssuerMismatch {
                published,
                expected,
            } => write!(
                f,
                "authorization-server metadata names issuer {published:?}, not {expected:?}; \
                 nothing secret was sent"
            ),
            AuthDecisionError::WrongIss {
                got: None,
                expected,
            } => write!(
                f,
                "authorization response has no iss, but {expected} promised one (RFC 9207)"
            ),
            AuthDecisionError::WrongIss {
                got: Some(g),
                expected,
            } => write!(
                f,
                "authorization response came from issuer {g:?}, not {expected:?} (RFC 9207)"
            ),
            AuthDecisionError::StateMismatch => {
                f.write_str("authorization response state does not match the request's")
            }
            AuthDecisionError::NoAuthMethod {
                supported,
                held,
                public_ok,
            } => {
                write!(
                    f,
                    "no client authentication fits: the server takes [{}] and the client holds \
                     {held}",
                    supported.join(", ")
                )?;
                if *public_ok {
                    f.write_str("; give --client-secret or --client-private-key accordingly")
                } else {
                    f.write_str(
                        "; give --client-secret or --client-private-key accordingly, or use \
                         --auth-flow authorization-code (a public client with PKCE)",
                    )
                }
            }
            AuthDecisionError::StepUpExhausted(n) => write!(
                f,
                "the server still wants more scope after {n} step-up attempts"
            ),
            AuthDecisionError::InsecureEndpoint(u) => write!(
                f,
                "refusing to send credentials over plain http to {u} (only loopback may be \
                 plain http)"
            ),
            AuthDecisionError::AuthorizationServerMoved { from, to } => write!(
                f,
                "the server's authorization server changed from {from} to {to}; the client id \
                 given is for {from} and is not sent to another: give a client id registered \
                 with {to}, or none (then the client registers there)"
            ),
        }
    }
}

impl std::error::Error for AuthDecisionError {}

/// Where to look for the protected-resource metadata (RFC 9728), in order: the challenge's
/// `resource_metadata` alone when given; else the path-aware well-known URL, then the root one.
pub fn resource_metadata_urls(
    mcp_url: &str,
    challenge: Option<&Challenge>,
) -> Result<Vec<String>, AuthDecisionError> {
    if let Some(u) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        UrlParts::parse(u)?;
        return Ok(vec![u.to_owned()]);
    }
    let p = UrlParts::parse(mcp_url)?;
    let root = format!("{}/.well-known/oauth-protected-resource", p.origin);
    if p.path == "/" {
        Ok(vec![root])
    } else {
        Ok(vec![format!("{root}{}", p.path), root])
    }
}

/// Where to look for an issuer's metadata, in order (RFC 8414 section 3.1, then OpenID
/// Connect Discovery, path-aware first as the MCP authorization specification lists them).
pub fn authorization_server_metadata_urls(issuer: &str) -> Result<Vec<String>, AuthDecisionError> {
    let p = UrlParts::parse(issuer)?;
    let o = &p.origin;
    if p.path == "/" {
        Ok(vec![
            format!("{o}/.well-known/oauth-authorization-server"),
            format!("{o}/.well-known/openid-configuration"),
        ])
    } else {
        let path = &p.path;
        Ok(vec![
            format!("{o}/.well-known/oauth-authorization-server{path}"),
            format!("{o}/.well-known/openid-configuration{path}"),
            format!("{o}{path}/.well-known/openid-configuration"),
        ])
    }
}

/// Whether the metadata's `resource` may stand for the MCP server at `mcp_url`: the same
/// origin, and the server's path at or below the resource's path (segment-wise).
pub fn check_resource(published: &str, mcp_url: &str) -> Result<(), AuthDecisionError> {
    let r = UrlParts::parse(published)?;
    let s = UrlParts::parse(mcp_url)?;
    let under = r.path == "/"
        || s.path == r.path
        || s.path
            .strip_prefix(r.path.as_str())
            .is_some_and(|rest| rest.starts_with('/'));
    if r.origin == s.origin && under {
        Ok(())
    } else {
        Err(AuthDecisionError::ResourceMismatch {
            published: published.to_owned(),
            server: mcp_url.to_owned(),
        })
    }
}

/// RFC 8414 section 3.3: the metadata's `issuer` must be the issuer asked for, exactly.
pub fn check_issuer(published: &str, expected: &str) -> Result<(), AuthDecisionError> {
    if published == expected {
        Ok(())
    } else {
        Err(AuthDecisionError::IssuerMismatch {
            published: published.to_owned(),
            expected: expected.to_owned(),
        })
    }
}

/// RFC 9207: the `iss` of an authorization response. It must equal the issuer when present;
/// when the server advertises `authorization_response_iss_parameter_supported`, it must be
/// present.
pub fn check_iss(got: Option<&str>, issuer: &str, required: bool) -> Result<(), AuthDecisionError> {
    match got {
        Some(g) if g == issuer => Ok(()),
        None if !required => Ok(()),
        g => Err(AuthDecisionError::WrongIss {
            got: g.map(str::to_owned),
            expected: issuer.to_owned(),
        }),
    }
}

/// Credentials and tokens go over TLS, or plain http to loopback only (labs and tests).
pub fn check_transport(url: &str) -> Result<(), AuthDecisionError> {
    let p = UrlParts::parse(url)?;
    if p.origin.starts_with("https://") {
        return Ok(());
    }
    let host = p.origin.trim_start_matches("http://");
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.split(']').next())
        .unwrap_or_else(|| host.rsplit_once(':').map_or(host, |(h, _)| h));
    if crate::proxy::is_loopback(host) {
        Ok(())
    } else {
        Err(AuthDecisionError::InsecureEndpoint(p.origin))
    }
}

/// The scopes to request: the caller's when given; else the challenge's `scope`; else the
/// resource's `scopes_supported`; else none. `offline_access` is added only when the
/// authorization server lists it and a refresh token is wanted.
pub fn choose_scopes(
    configured: Option<&str>,
    challenge: Option<&Challenge>,
    scopes_supported: &[String],
    as_scopes_supported: &[String],
    want_refresh: bool,
) -> Vec<String> {
    let mut s = if let Some(c) = configured {
        split_scopes(c)
    } else if let Some(c) = challenge.filter(|c| c.scope.is_some()) {
        c.scopes()
    } else {
        scopes_supported.to_vec()
    };
    let offline = "offline_access";
    if want_refresh
        && as_scopes_supported.iter().any(|x| x == offline)
        && !s.iter().any(|x| x == offline)
    {
        s.push(offline.to_owned());
    }
    s
}

/// Most step-up attempts after a 403 `insufficient_scope`.
pub const MAX_STEP_UP: u32 = 3;

/// The scopes for a step-up after a 403 `insufficient_scope` challenge, or why not: on 2026
/// servers the union of what was held and what is asked, else what is asked (falling back to
/// the union when the challenge names none). `attempts` counts the step-ups already made.
pub fn step_up(
    held: &[String],
    challenge: &Challenge,
    attempts: u32,
    union: bool,
) -> Result<Vec<String>, AuthDecisionError> {
    if attempts >= MAX_STEP_UP {
        return Err(AuthDecisionError::StepUpExhausted(attempts));
    }
    let asked = challenge.scopes();
    if union || asked.is_empty() {
        let mut all = held.to_vec();
        for s in asked {
            if !all.contains(&s) {
                all.push(s);
            }
        }
        Ok(all)
    } else {
        Ok(asked)
    }
}

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// HTTP basic with the client id and secret.
    SecretBasic,
    /// `client_id` and `client_secret` in the form.
    SecretPost,
    /// An ES256 JWT assertion (iss = sub = client id, aud = the issuer).
    PrivateKeyJwt,
    /// `client_id` alone (a public client: authorization code with PKCE).
    None,
}

impl ClientAuth {
    /// The RFC 8414 / 7591 name.
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::SecretBasic => "client_secret_basic",
            ClientAuth::SecretPost => "client_secret_post",
            ClientAuth::PrivateKeyJwt => "private_key_jwt",
            ClientAuth::None => "none",
        }
    }
}

/// What the client holds for the token endpoint, and what it may do without a credential.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held<'a> {
    /// A client secret: pre-registered (`--client-secret`) or returned by registration.
    pub secret: bool,
    /// A private key for `private_key_jwt`.
    pub key: bool,
    /// The `token_endpoint_auth_method` the registration reply named, if any.
    pub registered: Option<&'a str>,
    /// The grant proves the client by other means (the authorization code with PKCE, and the
    /// refresh of its tokens), so a public client (`none`) may ask for it even when it holds a
    /// credential the server takes no way of sending.
    pub public_ok: bool,
}

impl ClientAuth {
    /// The method of an RFC 8414 / 7591 name (None: one this client does not speak).
    pub fn from_name(name: &str) -> Option<ClientAuth> {
        [
            ClientAuth::SecretBasic,
            ClientAuth::SecretPost,
            ClientAuth::PrivateKeyJwt,
            ClientAuth::None,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

/// The client authentication to use at the token endpoint.
///
/// `supported` is the server's `token_endpoint_auth_methods_supported` (None: absent, which
/// RFC 8414 reads as `client_secret_basic`). A method is used only when the server offers it
/// and the client holds what it needs; among those, the one the registration reply named
/// first, then `private_key_jwt`, `client_secret_basic`, `client_secret_post`, then `none`.
/// `none` (a public client: `client_id` in the form, no secret) fits a client that holds no
/// credential, or a grant that needs none ([`Held::public_ok`]): a secret from registration
/// that the server offers no way of sending is then left unused. When the metadata is absent
/// and the client holds no secret, the default `client_secret_basic` cannot be meant for it:
/// in the code flow it goes as a public client.
pub fn choose_client_auth(
    supported: Option<&[String]>,
    held: Held<'_>,
) -> Result<ClientAuth, AuthDecisionError> {
    let default = [ClientAuth::SecretBasic.name().to_owned()];
    let absent = supported.is_none();
    let supported = supported.unwrap_or(&default);
    let offers = |m: ClientAuth| supported.iter().any(|s| s == m.name());
    let holds = |m: ClientAuth| match m {
        ClientAuth::PrivateKeyJwt => held.key,
        ClientAuth::SecretBasic | ClientAuth::SecretPost => held.secret,
        ClientAuth::None => held.public_ok || (!held.secret && !held.key),
    };
    let fits = |m: ClientAuth| offers(m) && holds(m);
    if let Some(m) = held.registered.and_then(ClientAuth::from_name)
        && fits(m)
    {
        return Ok(m);
    }
    let order = [
        ClientAuth::PrivateKeyJwt,
        ClientAuth::SecretBasic,
        ClientAuth::SecretPost,
        ClientAuth::None,
    ];
    if let Some(m) = order.into_iter().find(|m| fits(*m)) {
        return Ok(m);
    }
    if absent && !held.secret && held.public_ok {
        return Ok(ClientAuth::None);
    }
    Err(AuthDecisionError::NoAuthMethod {
        supported: supported.to_vec(),
        held: match (held.secret, held.key) {
            (true, true) => "a secret and a private key",
            (true, false) => "a secret",
            (false, true) => "a private key",
            (false, false) => "no credential",
        },
        public_ok: held.public_ok,
    })
}

/// The dynamic client registration request (RFC 7591). The code flow registers a public
/// client (`none`) with `authorization_code` and `refresh_token` and its redirect URI; client
/// credentials a confidential one. `application_type` is sent on 2026 servers (where the MCP
/// specification asks for it) and whenever the redirect URI is on loopback (a native app,
/// RFC 8252, which is how a server learns to accept any loopback port).
pub fn registration_request(
    code_flow: bool,
    redirect_uri: Option<&str>,
    era_2026: bool,
) -> serde_json::Value {
    let mut body = if code_flow {
        serde_json::json!({
            "client_name": "verifi-mcp",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })
    } else {
        serde_json::json!({
            "client_name": "verifi-mcp",
            "grant_types": ["client_credentials"],
            "response_types": [],
            "token_endpoint_auth_method": "client_secret_basic",
        })
    };
    let loopback = redirect_uri.is_some_and(|r| {
        UrlParts::parse(r).is_ok_and(|p| {
            let host = p.origin.trim_start_matches("http://");
            let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
            p.origin.starts_with("http://")
                && crate::proxy::is_loopback(host.trim_matches(['[', ']']))
        })
    });
    if let Some(r) = redirect_uri.filter(|_| code_flow) {
        body["redirect_uris"] = serde_json::json!([r]);
    }
    if era_2026 || loopback {
        body["application_type"] = serde_json::json!(if code_flow { "native" } else { "web" });
    }
    body
}

/// Discovery was run again after a 401 and names the authorization server `now`, where the
/// client's credentials came from `before` (SEP-2352). `Ok(false)`: the same issuer, go on.
/// `Ok(true)`: it moved; what came from `before` (its tokens, a client registered there) is
/// forgotten and never shown to `now`: the client registers anew with `now` (or keeps a client
/// ID metadata document URL, which names no server). A client id given by the caller
/// (`pre_registered`) was registered with `before` only: refused.
pub fn authorization_server_moved(
    before: &str,
    now: &str,
    pre_registered: bool,
) -> Result<bool, AuthDecisionError> {
    if before == now {
        Ok(false)
    } else if pre_registered {
        Err(AuthDecisionError::AuthorizationServerMoved {
            from: before.to_owned(),
            to: now.to_owned(),
        })
    } else {
        Ok(true)
    }
}

/// Whether a step-up asks for the union of held and challenged scopes: on 2026-07-28 servers
/// (SEP-2350). The era is the one the slot speaks: forced by `setting` (`--protocol-version
/// 2026-07-28` forces the 2026 era, and no probe then records one), else what the server's
/// probe found (`probed`, None before it).
pub fn step_up_unions(setting: EraSetting, probed: Option<bool>) -> bool {
    match setting {
        EraSetting::Modern => true,
        EraSetting::Legacy => false,
        EraSetting::Auto => probed == Some(true),
    }
}

/// Seconds before expiry at which a token is renewed rather than used.
pub const REFRESH_MARGIN_S: u64 = 30;

/// What to do with a held token at `now` (seconds on any clock the token's `expires_at` uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenUse {
    /// Send it.
    Use,
    /// Renew it first with its refresh token.
    Refresh,
    /// Get a new one (no refresh token).
    Renew,
}

/// [`TokenUse`] for a token expiring at `expires_at` (None: no stated expiry).
pub fn token_use(expires_at: Option<u64>, has_refresh: bool, now: u64) -> TokenUse {
    match expires_at {
        Some(at) if now.saturating_add(REFRESH_MARGIN_S) >= at => {
            if has_refresh {
                TokenUse::Refresh
            } else {
                TokenUse::Renew
            }
        }
        _ => TokenUse::Use,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn challenges_parse_with_quotes_escapes_and_other_schemes() {
        let c = Challenge::parse(
            r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="files:read  files:write", error="insufficient_scope", error_description="need \"write\"""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scopes(), v(&["files:read", "files:write"]));
        assert!(c.insufficient_scope());
        assert_eq!(c.error_description.as_deref(), Some("need \"write\""));
        let two = Challenge::parse(r#"Basic realm="x", Bearer error=invalid_token"#).unwrap();
        assert_eq!(two.error.as_deref(), Some("invalid_token"));
        assert_eq!(two.resource_metadata, None);
        assert_eq!(Challenge::parse("bearer").unwrap(), Challenge::default());
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse(""), None);
        // Hostile input ends.
        assert!(Challenge::parse(r#"Bearer scope="unterminated"#).is_some());
        assert!(Challenge::parse("Bearer ===,,,   ").is_some());
    }

    #[test]
    fn resource_metadata_urls_are_path_aware_then_root() {
        let c = Challenge {
            resource_metadata: Some("https://m.example/prm".into()),
            ..Challenge::default()
        };
        assert_eq!(
            resource_metadata_urls("https://m.example/api/mcp", Some(&c)).unwrap(),
            v(&["https://m.example/prm"])
        );
        assert_eq!(
            resource_metadata_urls("https://m.example:443/api/mcp/?x=1", None).unwrap(),
            v(&[
                "https://m.example/.well-known/oauth-protected-resource/api/mcp",
                "https://m.example/.well-known/oauth-protected-resource"
            ])
        );
        assert_eq!(
            resource_metadata_urls("http://127.0.0.1:8080", None).unwrap(),
            v(&["http://127.0.0.1:8080/.well-known/oauth-protected-resource"])
        );
        let bad = Challenge {
            resource_metadata: Some("ftp://x".into()),
            ..Challenge::default()
        };
        assert!(resource_metadata_urls("https://m", Some(&bad)).is_err());
    }

    #[test]
    fn authorization_server_metadata_urls_in_spec_order() {
        assert_eq!(
            authorization_server_metadata_urls("https://as.example").unwrap(),
            v(&[
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ])
        );
        assert_eq!(
            authorization_server_metadata_urls("https://as.example/tenant1/").unwrap(),
            v(&[
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ])
        );
    }

    #[test]
    fn resources_must_be_this_server_or_above_it() {
        let s = "https://m.example/api/mcp";
        assert!(check_resource("https://m.example/api/mcp", s).is_ok());
        assert!(check_resource("https://m.example/api/mcp/", s).is_ok());
        assert!(check_resource("https://M.example:443/api", s).is_ok());
        assert!(check_resource("https://m.example", s).is_ok());
        for bad in [
            "https://evil.example/api/mcp",
            "http://m.example/api/mcp",
            "https://m.example:8443/api/mcp",
            "https://m.example/ap",
            "https://m.example/api/mcp/other",
            "not a url",
        ] {
            assert!(check_resource(bad, s).is_err(), "{bad}");
        }
        let e = check_resource("https://evil.example/mcp", s).unwrap_err();
        assert!(e.to_string().contains("nothing was sent"), "{e}");
    }

    #[test]
    fn issuers_and_iss_must_match_exactly() {
        assert!(check_issuer("https://as.example", "https://as.example").is_ok());
        assert!(check_issuer("https://as.example/", "https://as.example").is_err());
        assert!(check_issuer("https://evil.example", "https://as.example").is_err());
        let i = "https://as.example";
        assert!(check_iss(Some(i), i, true).is_ok());
        assert!(check_iss(None, i, false).is_ok());
        assert!(check_iss(None, i, true).is_err());
        assert!(check_iss(Some("https://evil.example"), i, false).is_err());
    }

    #[test]
    fn credentials_go_over_tls_or_to_loopback() {
        assert!(check_transport("https://as.example/token").is_ok());
        assert!(check_transport("http://127.0.0.1:9/token").is_ok());
        assert!(check_transport("http://localhost:9/token").is_ok());
        assert!(check_transport("http://[::1]:9/token").is_ok());
        assert!(check_transport("http://as.example/token").is_err());
    }

    #[test]
    fn scopes_come_from_the_caller_then_the_challenge_then_the_metadata() {
        let ch = Challenge {
            scope: Some("a b".into()),
            ..Challenge::default()
        };
        let supported = v(&["x", "y"]);
        let as_s = v(&["offline_access"]);
        assert_eq!(
            choose_scopes(Some("c"), Some(&ch), &supported, &[], false),
            v(&["c"])
        );
        assert_eq!(
            choose_scopes(None, Some(&ch), &supported, &[], false),
            v(&["a", "b"])
        );
        assert_eq!(
            choose_scopes(None, Some(&Challenge::default()), &supported, &[], false),
            supported
        );
        assert_eq!(
            choose_scopes(None, None, &[], &[], true),
            Vec::<String>::new()
        );
        assert_eq!(
            choose_scopes(None, None, &[], &as_s, true),
            v(&["offline_access"]),
            "offline_access only when the server lists it"
        );
        assert_eq!(
            choose_scopes(None, None, &[], &as_s, false),
            Vec::<String>::new()
        );
    }

    #[test]
    fn step_up_unions_on_2026_and_stops_after_three() {
        let held = v(&["a"]);
        let ch = Challenge {
            scope: Some("b".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(step_up(&held, &ch, 0, true).unwrap(), v(&["a", "b"]));
        assert_eq!(step_up(&held, &ch, 2, false).unwrap(), v(&["b"]));
        assert_eq!(
            step_up(&held, &ch, 3, true).unwrap_err(),
            AuthDecisionError::StepUpExhausted(3)
        );
        let bare = Challenge::default();
        assert_eq!(step_up(&held, &bare, 0, false).unwrap(), held);
    }

    fn held(secret: bool, key: bool, public_ok: bool) -> Held<'static> {
        Held {
            secret,
            key,
            registered: None,
            public_ok,
        }
    }

    #[test]
    fn client_auth_prefers_key_then_basic_then_post() {
        let all = v(&[
            "client_secret_post",
            "private_key_jwt",
            "client_secret_basic",
        ]);
        assert_eq!(
            choose_client_auth(Some(&all), held(true, true, false)).unwrap(),
            ClientAuth::PrivateKeyJwt
        );
        assert_eq!(
            choose_client_auth(Some(&all), held(true, false, false)).unwrap(),
            ClientAuth::SecretBasic
        );
        let post = v(&["client_secret_post"]);
        let e = choose_client_auth(Some(&post), held(false, true, false)).unwrap_err();
        assert!(e.to_string().contains("client_secret_post"), "{e}");
        assert!(e.to_string().contains("holds a private key"), "{e}");
        assert_eq!(
            choose_client_auth(
                Some(&v(&["private_key_jwt", "none"])),
                held(false, true, true)
            )
            .unwrap(),
            ClientAuth::PrivateKeyJwt
        );
    }

    /// The whole table of issue 27 item 6: (a secret from registration / a pre-registered
    /// secret / no secret) × (each offer of the three methods, and no metadata) × (the code
    /// flow / client credentials). A registered secret and a pre-registered one are the same
    /// input to the decision (a secret is held); the registration's named method is below.
    #[test]
    fn client_auth_table_for_basic_post_and_none() {
        use ClientAuth::{None as Public, SecretBasic as Basic, SecretPost as Post};
        const B: &str = "client_secret_basic";
        const P: &str = "client_secret_post";
        const N: &str = "none";
        // (offered (None: metadata absent), secret, code flow, expected (None: refused))
        type Row = (
            Option<&'static [&'static str]>,
            bool,
            bool,
            Option<ClientAuth>,
        );
        let table: &[Row] = &[
            // The code flow with PKCE: a public client whenever no secret method fits.
            (Some(&[N]), true, true, Some(Public)),
            (Some(&[N]), false, true, Some(Public)),
            (Some(&[B]), true, true, Some(Basic)),
            (Some(&[B]), false, true, None),
            (Some(&[P]), true, true, Some(Post)),
            (Some(&[P]), false, true, None),
            (Some(&[B, P]), true, true, Some(Basic)),
            (Some(&[P, B]), true, true, Some(Basic)),
            (Some(&[B, N]), true, true, Some(Basic)),
            (Some(&[B, N]), false, true, Some(Public)),
            (Some(&[P, N]), true, true, Some(Post)),
            (Some(&[P, N]), false, true, Some(Public)),
            (Some(&[B, P, N]), true, true, Some(Basic)),
            (Some(&[B, P, N]), false, true, Some(Public)),
            (Some(&["private_key_jwt"]), true, true, None),
            (Some(&[]), true, true, None),
            (Some(&[]), false, true, None),
            (None, true, true, Some(Basic)),
            (None, false, true, Some(Public)),
            // Client credentials: the secret is the only proof, so `none` never replaces it.
            (Some(&[N]), true, false, None),
            (Some(&[N]), false, false, Some(Public)),
            (Some(&[B]), true, false, Some(Basic)),
            (Some(&[B]), false, false, None),
            (Some(&[P]), true, false, Some(Post)),
            (Some(&[P]), false, false, None),
            (Some(&[B, P]), true, false, Some(Basic)),
            (Some(&[P, N]), true, false, Some(Post)),
            (Some(&[B, P, N]), false, false, Some(Public)),
            (None, true, false, Some(Basic)),
            (None, false, false, None),
        ];
        for &(offered, secret, code, want) in table {
            let offered = offered.map(v);
            let got = choose_client_auth(offered.as_deref(), held(secret, false, code));
            assert_eq!(
                got.as_ref().ok().copied(),
                want,
                "offered {offered:?}, secret {secret}, code flow {code}: {got:?}"
            );
            if let Err(e) = got {
                let text = e.to_string();
                assert!(text.starts_with("no client authentication fits"), "{text}");
                if !code {
                    assert!(text.contains("authorization-code"), "{text}");
                }
            }
        }
    }

    #[test]
    fn the_method_registration_named_comes_first_when_offered_and_held() {
        let reg = |m: &'static str, secret: bool| Held {
            secret,
            key: false,
            registered: Some(m),
            public_ok: true,
        };
        let all = v(&["client_secret_basic", "client_secret_post", "none"]);
        assert_eq!(
            choose_client_auth(Some(&all), reg("client_secret_post", true)).unwrap(),
            ClientAuth::SecretPost
        );
        // Registered as public though a secret came back: `none`.
        assert_eq!(
            choose_client_auth(Some(&all), reg("none", true)).unwrap(),
            ClientAuth::None
        );
        // Named but not offered, or not held: the table decides.
        assert_eq!(
            choose_client_auth(
                Some(&v(&["client_secret_basic"])),
                reg("client_secret_post", true)
            )
            .unwrap(),
            ClientAuth::SecretBasic
        );
        assert_eq!(
            choose_client_auth(Some(&all), reg("client_secret_post", false)).unwrap(),
            ClientAuth::None
        );
        assert_eq!(
            choose_client_auth(Some(&all), reg("tls_client_auth", true)).unwrap(),
            ClientAuth::SecretBasic
        );
        for m in [
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt",
            "none",
        ] {
            assert_eq!(ClientAuth::from_name(m).map(ClientAuth::name), Some(m));
        }
        assert_eq!(ClientAuth::from_name("tls_client_auth"), None);
    }

    #[test]
    fn registration_requests_fit_the_flow_and_the_era() {
        let code = registration_request(true, Some("http://127.0.0.1:5/callback"), false);
        assert_eq!(
            code["grant_types"],
            serde_json::json!(["authorization_code", "refresh_token"])
        );
        assert_eq!(code["token_endpoint_auth_method"], "none");
        assert_eq!(
            code["redirect_uris"],
            serde_json::json!(["http://127.0.0.1:5/callback"])
        );
        assert_eq!(code["application_type"], "native");
        let cc = registration_request(false, None, false);
        assert_eq!(cc["grant_types"], serde_json::json!(["client_credentials"]));
        assert!(cc.get("application_type").is_none());
        assert!(cc.get("redirect_uris").is_none());
        assert_eq!(
            registration_request(false, None, true)["application_type"],
            "web"
        );
        let remote = registration_request(true, Some("https://app.example/cb"), false);
        assert!(remote.get("application_type").is_none());
        assert_eq!(
            registration_request(true, Some("https://app.example/cb"), true)["application_type"],
            "native"
        );
    }

    #[test]
    fn a_moved_authorization_server_gets_a_new_client_never_a_given_one() {
        assert_eq!(
            authorization_server_moved("https://as.example", "https://as.example", true),
            Ok(false)
        );
        assert_eq!(
            authorization_server_moved("https://as.example", "https://as.example", false),
            Ok(false)
        );
        // Registered (or a metadata document URL): forget the old, register with the new.
        assert_eq!(
            authorization_server_moved("https://as1.example", "https://as2.example", false),
            Ok(true)
        );
        // Issuers compare exactly (RFC 8414): a trailing slash is another issuer.
        assert_eq!(
            authorization_server_moved("https://as.example", "https://as.example/", false),
            Ok(true)
        );
        let e = authorization_server_moved("https://as1.example", "https://as2.example", true)
            .unwrap_err();
        assert_eq!(
            e,
            AuthDecisionError::AuthorizationServerMoved {
                from: "https://as1.example".into(),
                to: "https://as2.example".into(),
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("from https://as1.example to https://as2.example"),
            "{text}"
        );
    }

    #[test]
    fn step_up_unions_where_the_slot_speaks_2026_forced_or_probed() {
        // Forced to 2026 (no probe ever records an era then): the union.
        assert!(step_up_unions(EraSetting::Modern, None));
        assert!(step_up_unions(EraSetting::Modern, Some(false)));
        // Auto: as the probe found, nothing before it.
        assert!(step_up_unions(EraSetting::Auto, Some(true)));
        assert!(!step_up_unions(EraSetting::Auto, Some(false)));
        assert!(!step_up_unions(EraSetting::Auto, None));
        // The handshake era: what the challenge asks for.
        assert!(!step_up_unions(EraSetting::Legacy, None));
        assert!(!step_up_unions(EraSetting::Legacy, Some(true)));
    }

    #[test]
    fn tokens_are_renewed_before_expiry() {
        assert_eq!(token_use(None, false, 1_000), TokenUse::Use);
        assert_eq!(token_use(Some(2_000), true, 1_000), TokenUse::Use);
        assert_eq!(token_use(Some(1_020), true, 1_000), TokenUse::Refresh);
        assert_eq!(token_use(Some(900), false, 1_000), TokenUse::Renew);
    }
}
