//! `WireTrace`: an observer of the bytes a context's connections send and receive, for a
//! wire trace such as `mcp -v`; and the run's W3C trace context (`RunTrace`).
//!
//! Owns: the event type and the observer handle. It sees the bytes exactly as they cross the
//! socket (inside TLS), unredacted: an observer that prints them must redact them itself (the
//! `mcp` command line scrubs every line with the run's secrets and header values). Decides
//! nothing and changes nothing on the wire.

use std::fmt;
use std::sync::Arc;

use verifi_mcp_core::machine::TraceContext;

/// One thing that happened on a connection. `conn` numbers the connections of a context from 1,
/// so the bytes of concurrent requests can be told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireEvent<'a> {
    /// A new connection is open (TCP connected, and the TLS handshake done for `https`).
    Connected {
        /// The connection's number.
        conn: u64,
        /// The host as given in the endpoint.
        host: &'a str,
        /// The port.
        port: u16,
        /// Whether it is TLS.
        tls: bool,
    },
    /// Bytes written to the connection (a request head and body).
    Sent {
        /// The connection's number.
        conn: u64,
        /// The bytes, unredacted.
        bytes: &'a [u8],
    },
    /// Bytes read from the connection (any split of a reply).
    Received {
        /// The connection's number.
        conn: u64,
        /// The bytes, unredacted.
        bytes: &'a [u8],
    },
    /// A line of a stdio server's stdout that is not JSON-RPC (a log line), skipped.
    Skipped {
        /// The line (without its newline), unredacted.
        bytes: &'a [u8],
    },
}

/// The observer a context calls for every [`WireEvent`] (set with
/// [`Options::wire_trace`](crate::Options::wire_trace)). Called inline on the connection's
/// task: keep it quick.
#[derive(Clone)]
pub struct WireTrace(Arc<dyn Fn(&WireEvent<'_>) + Send + Sync>);

impl WireTrace {
    /// An observer calling `f`.
    pub fn new(f: impl Fn(&WireEvent<'_>) + Send + Sync + 'static) -> Self {
        WireTrace(Arc::new(f))
    }

    pub(crate) fn emit(&self, e: &WireEvent<'_>) {
        (self.0)(e)
    }
}

impl fmt::Debug for WireTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WireTrace(..)")
    }
}

/// The run's W3C trace context (SEP-414): one trace for the whole run, the one the harness
/// gave ([`Options::trace_parent`](crate::Options::trace_parent)) or a random one made once,
/// and a new span id for every request.
#[derive(Debug)]
pub(crate) struct RunTrace {
    trace_id: [u8; 16],
    flags: u8,
    state: String,
    seed: u64,
    next: std::sync::atomic::AtomicU64,
}

/// Longest `tracestate` value W3C allows (a longer one is not sent).
const MAX_TRACESTATE: usize = 512;

impl RunTrace {
    /// The run's trace from the harness's `traceparent` and `tracestate`, when given and well
    /// formed; else a new random trace. The second value says why a given one was not used.
    pub(crate) fn new(parent: Option<&str>, state: Option<&str>) -> (Self, Option<String>) {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut random = [0u8; 24];
        // A failing system RNG still leaves a trace; the ids are then derived from the clock.
        if SystemRandom::new().fill(&mut random).is_err() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(1);
            random[..16].copy_from_slice(&now.to_le_bytes());
            random[16..].copy_from_slice(&(std::process::id() as u64 | 1).to_le_bytes());
        }
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&random[16..]);
        let given = parent.map(str::trim).filter(|p| !p.is_empty());
        let parsed = given.and_then(TraceContext::parse_traceparent);
        let mut warning = match (given, parsed) {
            (Some(_), None) => {
                Some("the given traceparent is not well formed: a new trace is used".to_owned())
            }
            _ => None,
        };
        let (trace_id, flags, state) = match parsed {
            Some((id, flags)) => {
                let state = state.map(str::trim).unwrap_or("");
                let ok = state.len() <= MAX_TRACESTATE
                    && state.bytes().all(|b| (b' '..=b'~').contains(&b));
                if !ok {
                    warning = Some("the given tracestate is not well formed: not sent".to_owned());
                }
                (id, flags, if ok { state.to_owned() } else { String::new() })
            }
            None => {
                let mut id = [0u8; 16];
                id.copy_from_slice(&random[..16]);
                if id == [0; 16] {
                    id[15] = 1;
                }
                // Sampled: the harness asked for no sampling decision, so the server may trace.
                (id, 1, String::new())
            }
        };
        let run = RunTrace {
            trace_id,
            flags,
            state,
            seed: u64::from_le_bytes(seed),
            next: std::sync::atomic::AtomicU64::new(0),
        };
        (run, warning)
    }

    /// The trace context of one operation: the run's trace, a seed of its own for span ids.
    pub(crate) fn context(&self) -> TraceContext<'_> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        TraceContext {
            trace_id: self.trace_id,
            flags: self.flags,
            span_seed: self
                .seed
                .wrapping_add(n.wrapping_mul(0xD6E8_FEB8_6659_FD93)),
            state: &self.state,
        }
    }

    /// The trace id, 32 lower-case hex digits.
    pub(crate) fn trace_id_hex(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }
}
