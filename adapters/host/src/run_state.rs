//! The run itself: what every slot of a run shares (its id, options, secrets, connections,
//! records, learned tokens, trace context and server-log count).
//!
//! Apart from `run` (records and redaction helpers, used by nearly every file) so that those
//! helpers do not import the options, and the options' types can use them.

use std::sync::{Arc, Mutex};

use crate::net::HostNet;
use crate::options::Options;
use crate::run::Records;

/// What every slot of a run shares.
pub(crate) struct Run {
    pub(crate) run_id: String,
    pub(crate) options: Options,
    pub(crate) secrets: Vec<Vec<u8>>,
    pub(crate) net: HostNet,
    pub(crate) records: Records,
    /// Tokens, secrets and assertions the run's OAuth clients learned: redacted everywhere.
    pub(crate) learned: Arc<Mutex<Vec<String>>>,
    /// The run's W3C trace context, sent in every request's `_meta`.
    pub(crate) trace: crate::trace::RunTrace,
    /// Server log lines kept so far (capped: see [`crate::server_log`]).
    pub(crate) server_logs: std::sync::atomic::AtomicUsize,
}
