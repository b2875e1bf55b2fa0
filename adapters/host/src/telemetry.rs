//! `tracing` spans and events for a harness that already uses `tracing` / OpenTelemetry: one
//! span per tool call (`mcp.call`: slot, tool, server, era, attempt, outcome, latency) and an
//! event per timeline event (era found, fallback used, task status, error).
//!
//! Owns: what is recorded, and that it never holds arguments, results or secrets: server
//! endpoints are masked ([`mask_url`](crate::mask::mask_url)), errors are the run's redacted ones. Decides nothing.

use tracing::field::Empty;
use verifi_mcp_core::harness::events::TimelineEvent;
use verifi_mcp_core::harness::result::Kind;

use crate::result::ToolResult;

/// An endpoint as it may be recorded: its URL secrets masked and the run's secrets redacted
/// (a stdio server's command line may hold a token).
pub(crate) fn clean_server(server: &str, secrets: &[Vec<u8>]) -> String {
    crate::run::redact_string(&crate::mask::mask_url(server), secrets)
}

/// The target every span and event of the crate carries (filter on it).
pub const TARGET: &str = "verifi_mcp";

/// An endpoint cleaned ([`clean_server`]) only when a subscriber records it: a call nobody
/// traces pays nothing for the masking and redaction (the span is disabled, its fields are
/// never formatted).
struct CleanServer<'a> {
    server: &'a str,
    secrets: &'a [Vec<u8>],
}

impl std::fmt::Display for CleanServer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&clean_server(self.server, self.secrets))
    }
}

/// The span of one tool call; its `era`, `attempt`, `outcome` and `latency_ms` are recorded
/// as they become known. `server` is recorded clean ([`clean_server`] with `secrets`), and
/// cleaned only if the span is recorded at all.
pub(crate) fn call_span(
    slot: &str,
    tool: &str,
    server: &str,
    secrets: &[Vec<u8>],
) -> tracing::Span {
    let server = CleanServer { server, secrets };
    tracing::info_span!(
        target: TARGET,
        "mcp.call",
        slot,
        tool,
        server = %server,
        era = Empty,
        attempt = 1u64,
        outcome = Empty,
        latency_ms = Empty,
    )
}

/// The outcome of a call as one word: `answered`, `tool_error`, `refused`, `unreachable`.
fn outcome(kind: &Kind) -> &'static str {
    match kind {
        Kind::Answered => "answered",
        Kind::ToolError => "tool_error",
        Kind::Refused { .. } => "refused",
        Kind::Unreachable(_) => "unreachable",
    }
}

/// Records the call's end on its span, and one event.
pub(crate) fn call_ended(span: &tracing::Span, r: &ToolResult) {
    let outcome = outcome(&r.kind());
    span.record("outcome", outcome);
    span.record("latency_ms", r.latency_ms);
    let _in = span.enter();
    if r.ok() {
        tracing::info!(target: TARGET, outcome, latency_ms = r.latency_ms, "mcp call ended");
    } else {
        // The error is the result's: redacted with the run's secrets.
        let error = r.error().unwrap_or("");
        tracing::warn!(target: TARGET, outcome, latency_ms = r.latency_ms, error, "mcp call failed");
    }
}

/// One timeline event as a `tracing` event (inside the call's span when there is one), with
/// what it says about the call recorded on that span (the era, a second attempt).
pub(crate) fn timeline(e: &TimelineEvent<'_>, secrets: &[Vec<u8>]) {
    let span = tracing::Span::current();
    let mask_url = |u: &str| clean_server(u, secrets);
    match *e {
        TimelineEvent::ToolError { slot, tool, error } => {
            let error = crate::run::redact_string(error, secrets);
            tracing::warn!(target: TARGET, kind = "tool_error", slot, tool, error)
        }
        TimelineEvent::FallbackUsed {
            slot,
            tool,
            primary,
            fallback,
        } => {
            span.record("attempt", 2u64);
            span.record("server", tracing::field::display(mask_url(fallback)));
            tracing::warn!(
                target: TARGET,
                kind = "mcp.fallback_used",
                slot,
                tool,
                primary = %mask_url(primary),
                fallback = %mask_url(fallback),
            )
        }
        TimelineEvent::NoHealthyTool { slot, tool } => {
            tracing::warn!(target: TARGET, kind = "mcp.no_healthy_tool", slot, tool)
        }
        TimelineEvent::Era {
            slot,
            tool,
            server,
            era,
        } => {
            span.record("era", era);
            tracing::info!(target: TARGET, kind = "mcp.era", slot, tool, server = %mask_url(server), era)
        }
        TimelineEvent::Task {
            slot,
            tool,
            task,
            status,
        } => tracing::info!(target: TARGET, kind = "mcp.task", slot, tool, task, status),
    }
}
