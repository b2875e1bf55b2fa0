//! How a slot is reached and what a call may take: the configuration every operation of the
//! machine reads, and the buffers an adapter lends it.

use core::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use crate::buf::{Buf, Overflow, Sink};
use crate::harness::failover::Target;
use crate::wire::endpoint::Endpoint;
use crate::wire::era::{ClientCapabilities, EraSetting};
use crate::wire::exchange::ReplyLimits;
use crate::wire::json::Value;
use crate::wire::jsonrpc::ProtocolVersion;

/// How a slot is reached and what a call may take.
#[derive(Debug, Clone)]
pub struct SlotConfig<'a> {
    /// The slot's name (for events).
    pub slot: &'a str,
    /// The primary server.
    pub primary: Endpoint<'a>,
    /// The primary's endpoint as written in the manifest (for events).
    pub primary_label: &'a str,
    /// The fallback server, if any.
    pub fallback: Option<Endpoint<'a>>,
    /// The fallback's endpoint as written in the manifest (for events).
    pub fallback_label: &'a str,
    /// Static headers sent on every request (e.g. `authorization`). Their values are secrets
    /// of the run: adapters put them in the redaction set (see [`SlotConfig::header_values`]).
    pub headers: &'a [(&'a str, &'a str)],
    /// Offered in `initialize` (`2025-11-25`, the newest of that era, by default; the first
    /// version, `2024-11-05`, is [`ProtocolVersion::SEED`]).
    pub version: ProtocolVersion,
    /// The per-call deadline: connect, handshake and reply (300 000 ms by default, docs/design.md#timeouts).
    pub timeout_ms: u64,
    /// When set, progress notifications for a call reset its timer, up to this hard maximum.
    pub progress_extends_to_ms: Option<u64>,
    /// Caps on the reply.
    pub limits: ReplyLimits,
    /// Keep the redacted JSON-RPC reply as `raw`.
    pub keep_raw: bool,
    /// Told of each progress notification for a call (a progress token is sent when set).
    /// Feature `observe`.
    #[cfg(feature = "observe")]
    pub on_progress: Option<ProgressObserver<'a>>,
    /// A reply that sends no byte for this long fails with `server stalled` (progress
    /// notifications and SSE comments are bytes); `None` (the default): only the deadline
    /// applies, so a tool that sends nothing until it ends (a long scan) is not cut short.
    pub idle_timeout_ms: Option<u64>,
    /// Where a call says which `tools/call` it has on the wire (for an adapter that cancels a
    /// call whose future was dropped).
    pub in_flight: Option<&'a InFlight>,
    /// Which era to speak: probe each server once (`Auto`, the default), or force one.
    pub era: EraSetting,
    /// What the client declares (in `initialize` and in the 2026 `_meta`); `elicitation` is
    /// declared exactly when [`SlotConfig::elicitation`] is set (see [`SlotConfig::declared`]).
    pub capabilities: ClientCapabilities,
    /// How a server's request for the user's input (elicitation) is answered with no person
    /// at hand: on the call's stream (old era) and in `input_required` rounds (2026 era).
    /// `None`: the client has no handler, declares none, and an `input_required` call fails
    /// saying what was asked.
    pub elicitation: Option<Elicitation>,
    /// The caller's own answers to elicitations (before [`SlotConfig::elicitation`]): it gets
    /// each request's `params` and writes the result object.
    pub elicit_with: Option<ElicitHandler<'a>>,
    /// Which servers of the slot are local processes spoken to over stdio (`[primary,
    /// fallback]`): their requests are newline-delimited JSON-RPC (no HTTP head), their
    /// replies read line by line, and a notification is done once written.
    /// The adapter's `Net` tells these targets' endpoints (placeholders) from the others.
    /// Only a build with the `std` feature speaks stdio (a process to spawn needs an OS): without
    /// it these flags are not read.
    pub stdio: [bool; 2],
    /// W3C trace context for every request (SEP-414, `_meta.traceparent`), in both eras;
    /// `None` (the default): none sent. Feature `trace`.
    #[cfg(feature = "trace")]
    pub trace: Option<TraceContext<'a>>,
    /// Told of each log message (`notifications/message`) a server sends on a call's stream at
    /// or above [`SlotConfig::log_level`]; in the 2026 era, set, it asks for them (the
    /// `io.modelcontextprotocol/logLevel` `_meta` key). `None` (the default): none kept.
    /// Feature `observe`.
    #[cfg(feature = "observe")]
    pub on_log: Option<LogObserver<'a>>,
    /// The lowest level of a server log message handed to [`SlotConfig::on_log`] (default
    /// `warning`). Feature `observe`.
    #[cfg(feature = "observe")]
    pub log_level: LogLevel,
}

/// How an elicitation (a server asking the user for input) is answered without a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Elicitation {
    /// `accept`, with the `default` of each field of the requested schema (SEP-1034); a
    /// required field without a default cannot be answered, so that request is declined.
    AcceptDefaults,
    /// `decline`.
    Decline,
    /// `cancel`.
    Cancel,
}

/// A caller's elicitation handler: given an elicitation's `params` (`message`,
/// `requestedSchema` …), it writes the result object, `{"action":"accept","content":{…}}`,
/// `{"action":"decline"}` or `{"action":"cancel"}`, as JSON. What it writes is sent as it is
/// (old era: on the side; 2026: in `inputResponses`); a write over the buffer's cap is a
/// decline (old era) or fails the round (2026).
#[derive(Clone, Copy)]
pub struct ElicitHandler<'a>(
    pub &'a (dyn Fn(Value<'_>, &mut dyn Sink) -> Result<(), Overflow> + Sync),
);

impl core::fmt::Debug for ElicitHandler<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ElicitHandler")
    }
}

/// Most `input_required` rounds one call answers (2026 era) before it fails.
pub const MAX_INPUT_ROUNDS: u32 = 8;

/// The `tools/call` a call has on the wire, if any: an adapter reads it when the caller drops
/// the call's future, to send the server a cancellation.
///
/// Plain 32-bit atomics (Cortex-M has no 64-bit ones); one writer, the call, and one reader,
/// its adapter after the call's future is gone.
///
/// Once the call became a task (the tasks extension), it holds the task's id instead: a
/// dropped call's task is cancelled with `tasks/cancel`.
#[derive(Debug)]
pub struct InFlight {
    id_low: AtomicU32,
    id_high: AtomicU32,
    target: AtomicU8,
    task_len: AtomicU8,
    task: [AtomicU8; MAX_TASK_ID],
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight::new()
    }
}

/// The longest task id a call keeps (a longer one is a malformed reply); none in a build
/// without tasks (feature `tasks`).
pub const MAX_TASK_ID: usize = crate::wire::failure::TASK_ID_BYTES;

impl InFlight {
    /// Nothing on the wire.
    pub const fn new() -> Self {
        InFlight {
            id_low: AtomicU32::new(0),
            id_high: AtomicU32::new(0),
            target: AtomicU8::new(0),
            task_len: AtomicU8::new(0),
            task: [const { AtomicU8::new(0) }; MAX_TASK_ID],
        }
    }

    fn set_target(&self, target: Target) {
        let t = match target {
            Target::Primary => 0,
            Target::Fallback => 1,
        };
        self.target.store(t, Ordering::Relaxed);
    }

    pub(crate) fn set(&self, target: Target, id: u64) {
        self.set_target(target);
        self.task_len.store(0, Ordering::Relaxed);
        self.id_high.store((id >> 32) as u32, Ordering::Relaxed);
        self.id_low.store(id as u32, Ordering::Relaxed);
    }

    /// The call became the task `id` on `target`: no request is on the wire any more.
    pub(crate) fn set_task(&self, target: Target, id: &str) {
        self.clear();
        self.set_target(target);
        for (slot, b) in self.task.iter().zip(id.bytes()) {
            slot.store(b, Ordering::Relaxed);
        }
        // The ids kept: all that fit (none in a build without tasks, where MAX_TASK_ID is 0).
        let kept = self.task.iter().zip(id.bytes()).count();
        self.task_len.store(kept as u8, Ordering::Relaxed);
    }

    pub(crate) fn clear(&self) {
        self.id_low.store(0, Ordering::Relaxed);
        self.id_high.store(0, Ordering::Relaxed);
        self.task_len.store(0, Ordering::Relaxed);
    }

    /// The server and id of the task the call became and that has not ended, if one.
    pub fn task(&self) -> Option<(Target, heapless::String<MAX_TASK_ID>)> {
        let len = usize::from(self.task_len.load(Ordering::Relaxed));
        let mut bytes = heapless::Vec::<u8, MAX_TASK_ID>::new();
        for slot in self.task.iter().take(len) {
            let _ = bytes.push(slot.load(Ordering::Relaxed));
        }
        let id = heapless::String::from_utf8(bytes).ok()?;
        (!id.is_empty()).then(|| (self.target(), id))
    }

    fn target(&self) -> Target {
        match self.target.load(Ordering::Relaxed) {
            0 => Target::Primary,
            _ => Target::Fallback,
        }
    }

    /// The server and request id of the `tools/call` on the wire, if one is.
    pub fn get(&self) -> Option<(Target, u64)> {
        let id = (u64::from(self.id_high.load(Ordering::Relaxed)) << 32)
            | u64::from(self.id_low.load(Ordering::Relaxed));
        (id != 0).then_some((self.target(), id))
    }
}

/// One progress notification of a call, as a person would show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressUpdate<'u> {
    /// `progress`, the number as the server wrote it (`3`, `1.0`); empty for a task's
    /// `statusMessage`, which comes without a number.
    pub progress: &'u str,
    /// `total`, if the server gave one, as written.
    pub total: Option<&'u str>,
    /// `message`, unescaped and redacted, cut to [`MAX_PROGRESS_MESSAGE`] bytes.
    pub message: Option<&'u str>,
}

impl ProgressUpdate<'_> {
    /// `progress` as a number (JSON numbers are decimal text; `None` if it is not one).
    pub fn progress_value(&self) -> Option<f64> {
        self.progress.parse().ok()
    }

    /// `total` as a number, when the server gave one.
    pub fn total_value(&self) -> Option<f64> {
        self.total?.parse().ok()
    }

    /// How far along, `0.0..=1.0`: `progress / total` when both are numbers and the total is
    /// positive (clamped, as servers overshoot).
    pub fn fraction(&self) -> Option<f64> {
        let (p, t) = (self.progress_value()?, self.total_value()?);
        (t > 0.0).then(|| (p / t).clamp(0.0, 1.0))
    }
}

/// Longest progress message handed to an observer (longer ones are cut).
pub const MAX_PROGRESS_MESSAGE: usize = 240;

/// Where a slot's progress notifications go (e.g. a terminal's status line).
#[derive(Clone, Copy)]
pub struct ProgressObserver<'a>(pub &'a (dyn Fn(&ProgressUpdate<'_>) + Sync));

impl core::fmt::Debug for ProgressObserver<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ProgressObserver")
    }
}

impl<'a> SlotConfig<'a> {
    /// A config with the defaults of docs/design.md for everything but the slot and its servers.
    pub fn new(slot: &'a str, primary: Endpoint<'a>, primary_label: &'a str) -> Self {
        SlotConfig {
            slot,
            primary,
            primary_label,
            fallback: None,
            fallback_label: "",
            headers: &[],
            version: ProtocolVersion::DEFAULT,
            timeout_ms: 300_000,
            progress_extends_to_ms: None,
            limits: ReplyLimits::default(),
            keep_raw: false,
            #[cfg(feature = "observe")]
            on_progress: None,
            idle_timeout_ms: None,
            in_flight: None,
            era: EraSetting::Auto,
            // The tasks extension is declared by default (2026 era): a long tool can run as a
            // task that outlives a dropped connection.
            capabilities: ClientCapabilities {
                tasks: true,
                ..ClientCapabilities::default()
            },
            stdio: [false; 2],
            elicitation: None,
            elicit_with: None,
            #[cfg(feature = "trace")]
            trace: None,
            #[cfg(feature = "observe")]
            on_log: None,
            #[cfg(feature = "observe")]
            log_level: LogLevel::Warning,
        }
    }

    /// [`SlotConfig::on_progress`]; always `None` without the `observe` feature (the
    /// notification's progress still counts, and still extends a call, without it).
    pub(crate) fn progress_observer(&self) -> Option<ProgressObserver<'a>> {
        #[cfg(feature = "observe")]
        return self.on_progress;
        #[cfg(not(feature = "observe"))]
        None
    }

    /// [`SlotConfig::on_log`] and [`SlotConfig::log_level`]; always `None` without the
    /// `observe` feature (a server's log lines are then read past, and none are asked for).
    pub(crate) fn log_observer(&self) -> Option<(LogObserver<'a>, LogLevel)> {
        #[cfg(feature = "observe")]
        return self.on_log.map(|o| (o, self.log_level));
        #[cfg(not(feature = "observe"))]
        None
    }

    /// [`SlotConfig::trace`]; always `None` without the `trace` feature.
    pub(crate) fn trace_context(&self) -> Option<&TraceContext<'a>> {
        #[cfg(feature = "trace")]
        return self.trace.as_ref();
        #[cfg(not(feature = "trace"))]
        None
    }

    /// The capabilities declared: [`SlotConfig::capabilities`], with `elicitation` exactly
    /// when there is a handler for it.
    pub fn declared(&self) -> ClientCapabilities {
        let elicitation = self.elicitation.is_some() || self.elicit_with.is_some();
        ClientCapabilities {
            elicitation,
            // URLs only go to a caller's handler that takes them; a policy never opens one.
            elicitation_url: self.capabilities.elicitation_url && self.elicit_with.is_some(),
            ..self.capabilities
        }
    }

    /// True when `target` is a stdio server (see [`SlotConfig::stdio`]).
    pub fn is_stdio(&self, target: Target) -> bool {
        // A stdio server is a process the host spawns: only a build with `std` has one, and
        // without it every stdio branch folds away (the edge's flash).
        cfg!(feature = "std")
            && match target {
                Target::Primary => self.stdio[0],
                Target::Fallback => self.stdio[1],
            }
    }

    /// The values of the static headers: secrets of the run.
    pub fn header_values(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().map(|(_, v)| *v)
    }

    /// The endpoint of `target` (none for a fallback the slot does not have).
    pub fn endpoint(&self, target: Target) -> Option<&Endpoint<'a>> {
        match target {
            Target::Primary => Some(&self.primary),
            Target::Fallback => self.fallback.as_ref(),
        }
    }
}

/// Per-call scratch, owned by the adapter (capped `Vec`s on a host, static slices on the edge).
pub struct CallBuffers<'b, B: Buf> {
    /// The outgoing request, head and body (sent in one write).
    pub request: B,
    /// Storage for the response head.
    pub head: &'b mut [u8],
    /// One socket read.
    pub read: &'b mut [u8],
    /// The reply: a JSON body or one SSE event's data.
    pub reply: B,
    /// The flattened, redacted text.
    pub text: B,
    /// The redacted error message.
    pub error: B,
    /// The redacted raw reply (only with `keep_raw`; may have a zero cap otherwise).
    pub raw: B,
}

/// W3C trace context (SEP-414) for the requests of an operation: each request carries
/// `_meta.traceparent` (`00-<trace id>-<span id>-<flags>`, a new span id per request, all in
/// one trace) and, when not empty, `_meta.tracestate`. Notifications and answers carry none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext<'a> {
    /// The trace id (not all zeros).
    pub trace_id: [u8; 16],
    /// The trace flags (`01`: sampled).
    pub flags: u8,
    /// Mixed with each request's id to make its span id (so two operations with different
    /// seeds never share one).
    pub span_seed: u64,
    /// The `tracestate` value, sent as given (empty: none sent).
    pub state: &'a str,
}

/// Length of a version-00 `traceparent` value.
pub const TRACEPARENT_LEN: usize = 55;

impl TraceContext<'_> {
    /// The span id of request `id`: never all zeros.
    pub fn span_id(&self, id: u64) -> [u8; 8] {
        // splitmix64 of the seed and the id: distinct ids give distinct span ids.
        let mut z = self
            .span_seed
            .wrapping_add(id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (if z == 0 { 1 } else { z }).to_be_bytes()
    }

    /// The `traceparent` value of request `id`.
    pub fn traceparent(&self, id: u64) -> [u8; TRACEPARENT_LEN] {
        let span = self.span_id(id);
        // Version `00`, trace id, span id, flags: 26 bytes as 52 lower-case hex digits, a `-`
        // before each field but the first (one loop: the fields are read by position).
        let mut out = [b'-'; TRACEPARENT_LEN];
        let mut at = 0;
        for i in 0..26 {
            let b = match i {
                0 => 0,
                1..=16 => self.trace_id.get(i - 1).copied().unwrap_or(0),
                17..=24 => span.get(i - 17).copied().unwrap_or(0),
                _ => self.flags,
            };
            if matches!(i, 1 | 17 | 25) {
                at += 1;
            }
            for n in [b >> 4, b & 15] {
                if let Some(o) = out.get_mut(at) {
                    *o = if n < 10 { b'0' + n } else { b'a' - 10 + n };
                }
                at += 1;
            }
        }
        out
    }

    /// Reads a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`, lower-case, trace id not
    /// all zeros; a later version's longer value is read by its first 55 bytes, as W3C says):
    /// its trace id and flags, or `None` when it is not well formed.
    pub fn parse_traceparent(value: &str) -> Option<([u8; 16], u8)> {
        let b = value.as_bytes();
        let version = hex_bytes::<1>(b.get(0..2)?)?;
        let well_formed = b.get(2) == Some(&b'-')
            && b.get(35) == Some(&b'-')
            && b.get(52) == Some(&b'-')
            && version != [0xff]
            && (b.len() == TRACEPARENT_LEN || (version != [0] && b.get(55) == Some(&b'-')));
        if !well_formed {
            return None;
        }
        let trace_id = hex_bytes::<16>(b.get(3..35)?)?;
        let span = hex_bytes::<8>(b.get(36..52)?)?;
        let [flags] = hex_bytes::<1>(b.get(53..55)?)?;
        (trace_id != [0; 16] && span != [0; 8]).then_some((trace_id, flags))
    }
}

/// `2 * N` lower-case hex digits as `N` bytes.
fn hex_bytes<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if text.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (hi, lo) = (pair.first().copied()?, pair.get(1).copied()?);
        *o = (digit(hi)? << 4) | digit(lo)?;
    }
    Some(out)
}

/// The severity of a server's log message (RFC 5424 as MCP names them), lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LogLevel {
    /// `debug`.
    Debug,
    /// `info`.
    Info,
    /// `notice`.
    Notice,
    /// `warning` (the default lowest level kept).
    #[default]
    Warning,
    /// `error`.
    Error,
    /// `critical`.
    Critical,
    /// `alert`.
    Alert,
    /// `emergency`.
    Emergency,
}

impl LogLevel {
    /// Every level, lowest first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The level's name on the wire (`warning`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    /// The level named `name` (as on the wire), if one is.
    pub fn parse(name: &str) -> Option<Self> {
        LogLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

/// Longest log message (its `data`) handed to a [`LogObserver`] (longer ones are cut).
pub const MAX_LOG_MESSAGE: usize = 512;

/// One log message of a server, as a person would read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogMessage<'u> {
    /// Its level.
    pub level: LogLevel,
    /// `logger`, if the server named one (unescaped, redacted, cut).
    pub logger: Option<&'u str>,
    /// `data`: a string unescaped, anything else as its JSON text; redacted, cut to
    /// [`MAX_LOG_MESSAGE`] bytes.
    pub data: &'u str,
}

/// Where a slot's server log messages go (e.g. the run log).
#[derive(Clone, Copy)]
pub struct LogObserver<'a>(pub &'a (dyn Fn(&LogMessage<'_>) + Sync));

impl core::fmt::Debug for LogObserver<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LogObserver")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `traceparent` is exactly its fields in lower-case hex (W3C trace context).
    #[test]
    fn a_traceparent_is_its_fields_in_hex() {
        let t = TraceContext {
            trace_id: *b"0123456789abcdef",
            flags: 0xaf,
            span_seed: 0x1234,
            state: "",
        };
        assert_eq!(
            &t.traceparent(77)[..],
            b"00-30313233343536373839616263646566-02a72fec12a0fe45-af"
        );
        let t = TraceContext {
            trace_id: [0xfe; 16],
            flags: 1,
            span_seed: 0,
            state: "",
        };
        assert_eq!(
            &t.traceparent(1)[..],
            b"00-fefefefefefefefefefefefefefefefe-e220a8397b1dcdaf-01"
        );
    }
}
