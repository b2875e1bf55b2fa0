//! The handlers of replies and the writers of requests and error lines: what a round trip
//! sends and how each kind of reply is read. Pure functions and small structs; the machine in
//! [`super`] sequences them.

use heapless::String;

use super::MAX_CURSOR;
use super::config::{
    ElicitHandler, Elicitation, LogLevel, LogMessage, LogObserver, MAX_LOG_MESSAGE,
    MAX_PROGRESS_MESSAGE, ProgressObserver, ProgressUpdate, SlotConfig,
};
use crate::buf::Overflow;
use crate::buf::{Buf, Sink};
use crate::buf::{DETAIL_BYTES, StrSink, truncated};
use crate::harness::redact::Redactor;
use crate::wire::content;
use crate::wire::endpoint::Endpoint;
use crate::wire::era::ClientCapabilities;
use crate::wire::exchange::{Expect, OnMessage, Verdict};
use crate::wire::failure::{BufferName, Failure, HandshakeError};
use crate::wire::http::{McpHeaders, Method, RequestHead, write_request_head};
#[cfg(feature = "std")]
use crate::wire::json;
use crate::wire::json::{JsonLimits, Value};
use crate::wire::jsonrpc::{self, ListMethod, Message, Outcome, ProtocolVersion};
use crate::wire::session::Snapshot;

/// The longest message of an error line built here (a JSON-RPC refusal, a failure).
const ERROR_LINE_BYTES: usize = 2 * DETAIL_BYTES + 256;

mod call;
mod error;
mod init;
mod lines;
mod list;
mod request;

pub(crate) use call::*;
pub use call::{Answer, write_elicit_answer};
pub use error::*;
pub(crate) use init::*;
pub(crate) use lines::*;
pub(crate) use list::*;
pub(crate) use request::*;
