//! Discovery: where a slot's MCP server sends its clients for tokens. An unauthenticated
//! probe (its challenge), the protected-resource metadata (RFC 9728) checked against the
//! server, then the authorization server's metadata (RFC 8414, then OpenID discovery) with
//! its issuer checked.
//!
//! Owns: those requests and reading their JSON. Does not own: which URLs to try and the
//! checks (`decide`), the requests' transport (`client`), or the flow that uses the result
//! (the parent module).

use std::time::Instant;

use serde_json::Value;

use super::AuthError;
use super::client::{Request, send};
use super::decide::{
    Challenge, authorization_server_metadata_urls, check_issuer, check_resource,
    resource_metadata_urls,
};
use crate::net::{HostNet, Route};

/// The authorization server's metadata, as far as the client uses it.
#[derive(Debug, Clone, Default)]
pub struct ServerMetadata {
    /// `issuer`.
    pub issuer: String,
    /// `token_endpoint`.
    pub token_endpoint: String,
    /// `authorization_endpoint`.
    pub authorization_endpoint: Option<String>,
    /// `registration_endpoint`.
    pub registration_endpoint: Option<String>,
    /// `token_endpoint_auth_methods_supported` (None: absent).
    pub auth_methods: Option<Vec<String>>,
    /// `scopes_supported`.
    pub scopes_supported: Vec<String>,
    /// `code_challenge_methods_supported`.
    pub code_challenge_methods: Vec<String>,
    /// `authorization_response_iss_parameter_supported`.
    pub iss_parameter: bool,
    /// `client_id_metadata_document_supported`.
    pub client_id_metadata_documents: bool,
}

pub(super) fn strings(v: &Value, key: &str) -> Option<Vec<String>> {
    v.get(key)?.as_array().map(|a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    })
}

pub(super) fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key)?.as_str().map(str::to_owned)
}

impl ServerMetadata {
    /// Reads metadata JSON; `issuer` and `token_endpoint` are required.
    pub fn from_json(v: &Value) -> Result<ServerMetadata, String> {
        Ok(ServerMetadata {
            issuer: string(v, "issuer").ok_or("no issuer")?,
            token_endpoint: string(v, "token_endpoint").ok_or("no token_endpoint")?,
            authorization_endpoint: string(v, "authorization_endpoint"),
            registration_endpoint: string(v, "registration_endpoint"),
            auth_methods: strings(v, "token_endpoint_auth_methods_supported"),
            scopes_supported: strings(v, "scopes_supported").unwrap_or_default(),
            code_challenge_methods: strings(v, "code_challenge_methods_supported")
                .unwrap_or_default(),
            iss_parameter: v
                .get("authorization_response_iss_parameter_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            client_id_metadata_documents: v
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// What discovery found for one MCP server.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The resource, exactly as its metadata publishes it (sent as `resource`).
    pub resource: String,
    /// The resource's `scopes_supported`.
    pub resource_scopes: Vec<String>,
    /// The challenge of the unauthenticated probe, if there was one.
    pub challenge: Option<Challenge>,
    /// The authorization server's metadata.
    pub server: ServerMetadata,
}

/// What the server asked for, in words (for a 401 no flow can answer).
pub fn asked_for(d: &Discovered) -> String {
    let mut s = format!("authorization server {}", d.server.issuer);
    if let Some(c) = &d.challenge
        && let Some(sc) = &c.scope
    {
        s.push_str(&format!(", scope {sc:?}"));
    }
    s
}

/// GET `url` as JSON; `Ok(None)` for a 404 or other non-2xx (try the next URL).
async fn get_json(
    net: &HostNet,
    route: &Route,
    url: &str,
    deadline: Instant,
) -> Result<Option<Value>, AuthError> {
    let reply = send(
        net,
        route,
        &Request {
            method: "GET",
            url,
            headers: &[],
            body: None,
            accept: "application/json",
        },
        deadline,
    )
    .await?;
    if !(200..300).contains(&reply.status) {
        return Ok(None);
    }
    reply
        .json()
        .map(Some)
        .ok_or_else(|| AuthError::Metadata(format!("{url} is not JSON")))
}

/// The challenge of an unauthenticated request to the MCP endpoint (a `ping`, which runs
/// nothing), if it is refused with 401.
pub async fn probe(
    net: &HostNet,
    route: &Route,
    mcp_url: &str,
    bearer: Option<&str>,
    deadline: Instant,
) -> Result<Option<(u16, Challenge)>, AuthError> {
    let body = br#"{"jsonrpc":"2.0","id":"verifi-auth-probe","method":"ping"}"#;
    let auth = bearer.map(|b| format!("Bearer {b}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    let reply = send(
        net,
        route,
        &Request {
            method: "POST",
            url: mcp_url,
            headers: &headers,
            body: Some(("application/json", body)),
            accept: "application/json, text/event-stream",
        },
        deadline,
    )
    .await?;
    if reply.status == 401 || reply.status == 403 {
        let c = reply
            .header("www-authenticate")
            .and_then(Challenge::parse)
            .unwrap_or_default();
        return Ok(Some((reply.status, c)));
    }
    Ok(None)
}

/// Discovery for the MCP server at `mcp_url`: probe, protected-resource metadata (checked
/// against the server), then its first authorization server's metadata (checked issuer).
pub async fn discover(
    net: &HostNet,
    route: &Route,
    mcp_url: &str,
    deadline: Instant,
) -> Result<Discovered, AuthError> {
    discover_with(net, route, mcp_url, None, deadline).await
}

/// [`discover`] from a challenge already in hand (no probe), or with a probe when `None`.
pub async fn discover_with(
    net: &HostNet,
    route: &Route,
    mcp_url: &str,
    challenge: Option<Challenge>,
    deadline: Instant,
) -> Result<Discovered, AuthError> {
    let challenge = match challenge {
        Some(c) => Some(c),
        None => probe(net, route, mcp_url, None, deadline)
            .await?
            .map(|(_, c)| c),
    };
    let mut prm = None;
    for url in resource_metadata_urls(mcp_url, challenge.as_ref())? {
        if let Some(v) = get_json(net, route, &url, deadline).await? {
            prm = Some(v);
            break;
        }
    }
    let prm = prm.ok_or_else(|| {
        AuthError::Metadata(format!(
            "{mcp_url} publishes no protected-resource metadata (RFC 9728)"
        ))
    })?;
    let resource = string(&prm, "resource")
        .ok_or_else(|| AuthError::Metadata("protected-resource metadata has no resource".into()))?;
    check_resource(&resource, mcp_url)?;
    let issuer = strings(&prm, "authorization_servers")
        .and_then(|v| v.into_iter().next())
        .ok_or_else(|| {
            AuthError::Metadata("protected-resource metadata names no authorization server".into())
        })?;
    let mut server = None;
    for url in authorization_server_metadata_urls(&issuer)? {
        if let Some(v) = get_json(net, route, &url, deadline).await? {
            server = Some(
                ServerMetadata::from_json(&v)
                    .map_err(|e| AuthError::Metadata(format!("{url}: {e}")))?,
            );
            break;
        }
    }
    let server = server.ok_or_else(|| {
        AuthError::Metadata(format!(
            "{issuer} publishes no authorization-server metadata"
        ))
    })?;
    check_issuer(&server.issuer, &issuer)?;
    Ok(Discovered {
        resource,
        resource_scopes: strings(&prm, "scopes_supported").unwrap_or_default(),
        challenge,
        server,
    })
}
