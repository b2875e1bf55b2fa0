//! A slot's calls with OAuth: a bearer token before the call, one renewal on a 401, scope
//! step-ups on a 403 `insufficient_scope` (at most [`super::decide::MAX_STEP_UP`]), and a 401 that no flow
//! can answer explained with what the server asked for.
//!
//! Owns: that loop around the driver's call. Does not own: the call itself (the slot, which
//! it reaches through [`AuthSlot`], not by importing it) or the flow (`auth`).

use std::borrow::Cow;
use std::future::Future;
use std::time::{Duration, Instant};

use verifi_mcp_core::drive::ProgressObserver;
use verifi_mcp_core::harness::result::Kind;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::era::EraSetting;
use verifi_mcp_core::wire::failure::Cause;

use super::decide::Challenge;
use super::decide::step_up;
use super::{AuthError, Authorizer, discover_with, probe};
use crate::net::{HostNet, Route};
use crate::result::ToolResult;

/// What the OAuth loop needs of a slot, handed in as an argument (the slot implements it), so
/// that auth does not import the slot that calls it.
pub(crate) trait AuthSlot: Sync {
    /// The slot's name (for messages).
    fn name(&self) -> &str;
    /// The slot's primary and fallback endpoints, or why its manifest entry has none.
    fn endpoints(&self) -> Result<(Endpoint<'_>, Option<Endpoint<'_>>), String>;
    /// The slot's route (proxy and trust), or why it cannot be used.
    fn route(&self) -> Result<&Route, String>;
    /// The context's connections.
    fn net(&self) -> &HostNet;
    /// The slot's OAuth state, when it does OAuth.
    fn authorizer(&self) -> Option<&Authorizer>;
    /// The call timeout, which also bounds the authorization requests around it.
    fn timeout(&self) -> Duration;
    /// The era setting, and the era probed on the primary (`Some(true)`: 2026-07-28).
    fn era(&self) -> (EraSetting, Option<bool>);
    /// The secrets to redact now.
    fn secrets(&self) -> Cow<'_, [Vec<u8>]>;
    /// An `ok: false` for `tool` that the driver did not record: metered, on the timeline,
    /// redacted.
    fn failure(&self, tool: &str, error: &str) -> ToolResult;
    /// One call of `tool` with `bearer`: its result and the reply's `www-authenticate`.
    fn call_once(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
    ) -> impl Future<Output = (ToolResult, Option<String>)> + Send;
}

/// `http(s)://host:port/path?query` of an endpoint (the MCP URL the resource must match).
pub(crate) fn mcp_url(ep: &Endpoint<'_>) -> String {
    let mut b = crate::buf::VecBuf::with_limit(usize::MAX);
    let plain = ep.with_absolute_form(true);
    let _ = plain.write_target(&mut b);
    String::from_utf8_lossy(verifi_mcp_core::buf::Buf::bytes(&b)).into_owned()
}

fn primary_url(slot: &impl AuthSlot) -> Result<String, String> {
    let (primary, fallback) = slot.endpoints()?;
    if fallback.is_some() {
        return Err(format!(
            "slot '{}': OAuth on a slot with a fallback is not supported (a token is for one \
             server; it would reach the other)",
            slot.name()
        ));
    }
    Ok(mcp_url(&primary))
}

/// The bearer token for the slot's next request (None: the slot does no OAuth).
pub(crate) async fn bearer_for(slot: &impl AuthSlot) -> Result<Option<String>, String> {
    let Some(auth) = slot.authorizer() else {
        return Ok(None);
    };
    let url = primary_url(slot)?;
    let route = slot.route()?;
    auth.bearer(slot.net(), route, &url)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The HTTP status a call failed with (also a handshake's: its cause is the same), read from
/// its cause, never its text.
pub(crate) fn status_of(r: &ToolResult) -> Option<u16> {
    match r.kind() {
        Kind::Unreachable(Cause::HttpStatus(status)) => Some(status),
        _ => None,
    }
}

/// `call` on an OAuth slot.
pub(crate) async fn call_with_auth(
    slot: &impl AuthSlot,
    auth: &Authorizer,
    tool: &str,
    json: &[u8],
    on_progress: Option<ProgressObserver<'_>>,
) -> ToolResult {
    let url = match primary_url(slot) {
        Ok(u) => u,
        Err(e) => return slot.failure(tool, &e),
    };
    let Ok(route) = slot.route() else {
        return slot.failure(tool, "slot route unavailable");
    };
    let net = slot.net();
    let mut token = match auth.bearer(net, route, &url).await {
        Ok(t) => t,
        Err(e) => return slot.failure(tool, &e.to_string()),
    };
    let mut renewed = false;
    let mut step_ups = 0u32;
    loop {
        let (r, header) = slot.call_once(tool, json, on_progress, Some(&token)).await;
        match status_of(&r) {
            // A 401 is refused before the tool runs: renew once and send again.
            Some(401) if !renewed => {
                renewed = true;
                let challenge = header.as_deref().and_then(Challenge::parse);
                if let Err(e) = auth.rejected(net, route, &url, &token, challenge).await {
                    return slot.failure(tool, &e.to_string());
                }
                token = match auth.bearer(net, route, &url).await {
                    Ok(t) => t,
                    Err(e) => return slot.failure(tool, &e.to_string()),
                };
            }
            Some(403) => {
                // The reply's own challenge; a probe with the same token when it had none.
                let from_reply = header.as_deref().and_then(Challenge::parse);
                let challenge = match from_reply {
                    Some(c) if c.insufficient_scope() => c,
                    Some(_) => return r,
                    None => {
                        let deadline = Instant::now() + slot.timeout();
                        match probe(net, route, &url, Some(&token), deadline).await {
                            Ok(Some((403, c))) if c.insufficient_scope() => c,
                            _ => return r,
                        }
                    }
                };
                // A 2026-07-28 server gets the union of held and asked scopes (SEP-2350); a
                // handshake-era one what it asks for. The era is the forced one, else the
                // probed one. OAuth slots have no fallback.
                let (setting, probed) = slot.era();
                let union = super::decide::step_up_unions(setting, probed);
                let scopes = match step_up(&auth.held_scopes(), &challenge, step_ups, union) {
                    Ok(s) => s,
                    Err(e) => return slot.failure(tool, &AuthError::from(e).to_string()),
                };
                step_ups += 1;
                token = match auth.step_up(net, route, scopes).await {
                    Ok(t) => t,
                    Err(e) => return slot.failure(tool, &e.to_string()),
                };
            }
            _ => return r,
        }
    }
}

/// A 401 on a slot without OAuth: says what the server asked for (its challenge and
/// authorization server), so the caller knows which flow to configure.
pub(crate) async fn explain_401(
    slot: &impl AuthSlot,
    r: ToolResult,
    header: Option<String>,
) -> ToolResult {
    if status_of(&r) != Some(401) {
        return r;
    }
    let (Ok(url), Ok(route)) = (primary_url(slot), slot.route()) else {
        return r;
    };
    let deadline = Instant::now() + slot.timeout();
    let challenge = header.as_deref().and_then(Challenge::parse);
    let found = discover_with(slot.net(), route, &url, challenge, deadline).await;
    let asked = match found {
        Ok(d) => super::asked_for(&d),
        Err(_) => return r,
    };
    let mut r = r;
    let why = AuthError::NoFlow { asked }.to_string();
    let secrets = slot.secrets();
    r.reword(|e| crate::run::redact_string(&format!("{e}; {why}"), &secrets));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifi_mcp_core::harness::result::ToolResult as CoreResult;

    #[test]
    fn the_status_is_read_from_the_cause_never_the_text() {
        let of = |r: CoreResult<'_>| status_of(&ToolResult::from_core(&r));
        let unauthorized = "handshake failed: HTTP 401 Unauthorized";
        assert_eq!(
            of(CoreResult::unreachable(
                unauthorized,
                Cause::HttpStatus(401),
                1
            )),
            Some(401)
        );
        assert_eq!(
            of(CoreResult::unreachable(
                "HTTP 403 Forbidden",
                Cause::HttpStatus(403),
                1
            )),
            Some(403)
        );
        // The same words without the cause decide nothing.
        assert_eq!(
            of(CoreResult::unreachable(unauthorized, Cause::Malformed, 1)),
            None
        );
        let refused = "JSON-RPC error -32001: upstream said HTTP 401";
        assert_eq!(
            of(CoreResult::refused(refused, -32001, false, 1, None)),
            None
        );
        assert_eq!(of(CoreResult::answered("HTTP 401", 1, None)), None);
    }
}
