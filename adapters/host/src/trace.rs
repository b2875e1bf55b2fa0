//! `WireTrace`: an observer of the bytes a context's connections send and receive, for a
//! wire trace such as `mcp -v`.
//!
//! Owns: the event type and the observer handle. It sees the bytes exactly as they cross the
//! socket (inside TLS), unredacted: an observer that prints them must redact them itself (the
//! `mcp` command line scrubs every line with the run's secrets and header values). Decides
//! nothing and changes nothing on the wire.

use std::fmt;
use std::sync::Arc;

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
