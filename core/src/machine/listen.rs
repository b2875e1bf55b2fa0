//! The standalone GET stream of a 2025-era session (streamable HTTP): what opens it, what each
//! message on it asks, and when not to open it again.
//!
//! In the handshake era a server may send its requests (`elicitation/create`, `ping`,
//! `sampling/createMessage`, `roots/list` …) on the session's GET stream instead of a call's
//! POST stream; the TypeScript SDK's servers do, and drop them when no GET stream is open. A
//! call asks for the stream with [`Action::Listen`](super::Action::Listen) before its request
//! goes out; the adapter holds the connection (one per session, kept while calls are in
//! flight), feeds what comes through an [`Exchange`](crate::wire::exchange::Exchange), and
//! POSTs what [`answer`] writes for each message, exactly as a call answers the requests on
//! its own stream. No I/O here.

use super::config::SlotConfig;
use super::handlers::{Body, ServerRequest, Trip, write_elicit_answer};
use crate::buf::Buf;
use crate::harness::failover::Target;
use crate::wire::failure::{BufferName, Failure};
use crate::wire::http::Method;
use crate::wire::json::{JsonLimits, Value};
use crate::wire::jsonrpc::{Message, decode_message};
use crate::wire::session::Snapshot;

/// Writes the GET that opens `target`'s standalone stream in the session `snap` (its
/// `mcp-session-id`, its version header, `accept: text/event-stream`, the slot's headers).
pub fn write_open<B: Buf>(
    cfg: &SlotConfig<'_>,
    target: Target,
    snap: &Snapshot,
    out: &mut B,
) -> Result<(), Failure> {
    let ep = cfg.endpoint(target).ok_or(Failure::NoResponse)?;
    Trip {
        method: Method::Get,
        ..Trip::post(ep, Some(snap), Body::None)
    }
    .write(out, cfg)
}

/// One message that came on the stream: when it is a request from the server, writes into
/// `out` the POST of its answer in the session `snap` and returns `true`; `false` for anything
/// else (a notification, a response, a message that is not JSON-RPC: nothing to answer). The
/// answer is what a call's own stream gets: `ping` an empty result, `elicitation/create` the
/// caller's handler's answer or the slot's policy's ([`SlotConfig::elicitation`];
/// decline when there is none), anything else JSON-RPC `-32601`. `scratch` holds the
/// elicitation's answer while the request is written.
pub fn answer<B: Buf>(
    cfg: &SlotConfig<'_>,
    (target, snap): (Target, &Snapshot),
    msg: &[u8],
    scratch: &mut B,
    out: &mut B,
) -> Result<bool, Failure> {
    let Ok(value) = Value::parse(msg, JsonLimits::default()) else {
        return Ok(false);
    };
    let Ok(Message::Request { id, method, params }) = decode_message(value) else {
        return Ok(false);
    };
    let Some(request) = ServerRequest::new(id, &method) else {
        return Ok(false);
    };
    scratch.clear();
    if method.eq_str("elicitation/create")
        && (!cfg!(feature = "input")
            || write_elicit_answer(scratch, params, (cfg.elicitation, cfg.elicit_with)).is_err())
    {
        // An answer that does not fit is a decline, as on a call's stream; so is every answer
        // of a build without input (feature `input`), as of a client without a handler.
        scratch.clear();
        scratch
            .put(b"{\"action\":\"decline\"}")
            .map_err(|o| Failure::TooLarge(BufferName::Request, o))?;
    }
    let ep = cfg.endpoint(target).ok_or(Failure::NoResponse)?;
    Trip::post(ep, Some(snap), Body::Answer(&request, scratch.bytes())).write(out, cfg)?;
    Ok(true)
}

/// What a message on the stream is, as [`heard`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A request from the server: [`answer`] writes its answer, to POST.
    Request,
    /// `notifications/tools/list_changed`: the slot's tool list is stale (to be fetched
    /// again before the next call).
    ToolsListChanged,
    /// Anything else (another notification, a response, what is not JSON-RPC): nothing to
    /// answer; an adapter may keep it as a log line.
    Other,
}

/// What `msg`, one message on the stream, is: an adapter decides nothing from its bytes.
pub fn heard(msg: &[u8]) -> Heard {
    let Ok(value) = Value::parse(msg, JsonLimits::default()) else {
        return Heard::Other;
    };
    match decode_message(value) {
        Ok(Message::Request { .. }) => Heard::Request,
        Ok(Message::Notification { method, .. })
            if method.eq_str("notifications/tools/list_changed") =>
        {
            Heard::ToolsListChanged
        }
        _ => Heard::Other,
    }
}

/// The server will not give the session a standalone stream: `405 Method Not Allowed` (the
/// spec's way to say it has none), or another client error (`4xx` but a timeout or too many
/// requests): not asked again in this session. A server error, a broken or ended stream may
/// be asked again.
pub fn has_none(failure: &Failure) -> bool {
    matches!(failure, Failure::Status { code, .. }
        if (400..500).contains(code) && *code != 408 && *code != 429)
}
