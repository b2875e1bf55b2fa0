//! A slot's calls with OAuth: a bearer token before the call, one renewal on a 401, scope
//! step-ups on a 403 `insufficient_scope` (at most [`super::decide::MAX_STEP_UP`]), and a 401 that no flow
//! can answer explained with what the server asked for.
//!
//! Owns: that loop around the driver's call. Does not own: the call itself (`slot`) or the
//! flow (`auth`).

use std::time::{Duration, Instant};

use verifi_mcp_core::drive::{ProgressObserver, Shared};
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::harness::result::Kind;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::failure::Cause;

use super::decide::Challenge;
use super::decide::step_up;
use super::{AuthError, Authorizer, discover_with, probe};
use crate::result::ToolResult;
use crate::slot::SlotHandle;

/// `http(s)://host:port/path?query` of an endpoint (the MCP URL the resource must match).
pub(crate) fn mcp_url(ep: &Endpoint<'_>) -> String {
    let mut b = crate::buf::VecBuf::with_limit(usize::MAX);
    let plain = ep.with_absolute_form(true);
    let _ = plain.write_target(&mut b);
    String::from_utf8_lossy(verifi_mcp_core::buf::Buf::bytes(&b)).into_owned()
}

fn primary_url(slot: &SlotHandle) -> Result<String, String> {
    let (primary, fallback) = slot.endpoints()?;
    if fallback.is_some() {
        return Err(format!(
            "slot '{}': OAuth on a slot with a fallback is not supported (a token is for one \
             server; it would reach the other)",
            slot.slot()
        ));
    }
    Ok(mcp_url(&primary))
}

/// The call timeout, which also bounds the authorization requests around it.
fn timeout(slot: &SlotHandle) -> Duration {
    Duration::from_millis(slot.inner.run.options.timeout_ms)
}

/// The bearer token for the slot's next request (None: the slot does no OAuth).
pub(crate) async fn bearer_for(slot: &SlotHandle) -> Result<Option<String>, String> {
    let Some(auth) = &slot.inner.auth else {
        return Ok(None);
    };
    let url = primary_url(slot)?;
    let route = slot.route()?;
    auth.bearer(&slot.inner.run.net, route, &url)
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
    slot: &SlotHandle,
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
    let net = &slot.inner.run.net;
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
                        let deadline = Instant::now() + timeout(slot);
                        match probe(net, route, &url, Some(&token), deadline).await {
                            Ok(Some((403, c))) if c.insufficient_scope() => c,
                            _ => return r,
                        }
                    }
                };
                // A 2026-07-28 server gets the union of held and asked scopes (SEP-2350); a
                // handshake-era one what it asks for. The era is the forced one, else the
                // probed one. OAuth slots have no fallback.
                let probed = slot.inner.state.with(|s| s.era(Target::Primary));
                let union = super::decide::step_up_unions(slot.inner.run.options.era, probed);
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

impl SlotHandle {
    /// A 401 on a slot without OAuth: says what the server asked for (its challenge and
    /// authorization server), so the caller knows which flow to configure.
    pub(crate) async fn explain_401(&self, r: ToolResult, header: Option<String>) -> ToolResult {
        if status_of(&r) != Some(401) {
            return r;
        }
        let (Ok(url), Ok(route)) = (primary_url(self), self.route()) else {
            return r;
        };
        let deadline = Instant::now() + timeout(self);
        let challenge = header.as_deref().and_then(Challenge::parse);
        let found = discover_with(&self.inner.run.net, route, &url, challenge, deadline).await;
        let asked = match found {
            Ok(d) => super::asked_for(&d),
            Err(_) => return r,
        };
        let mut r = r;
        let why = AuthError::NoFlow { asked }.to_string();
        let secrets = self.secrets_now();
        r.reword(|e| crate::run::redact_string(&format!("{e}; {why}"), &secrets));
        r
    }
}
