//! # verifi-mcp-core
//!
//! The sans-IO heart of the verifi MCP client: MCP streamable HTTP as pure transitions,
//! `#![no_std]`, allocation-free, and never reading a clock (time is an input).
//!
//! ## The run loop
//!
//! One request is one [`wire::exchange::Exchange`]: the caller writes the request bytes, then
//! feeds whatever the socket returns, in any split, until the exchange says it is done. Every
//! complete JSON-RPC message of the reply (a JSON body or one SSE event) goes to a handler that
//! says whether it was the response. That is the whole contract between bytes and protocol:
//!
//! ```
//! use verifi_mcp_core::buf::{Buf, SliceBuf};
//! use verifi_mcp_core::wire::exchange::{Exchange, Expect, OnMessage, ReplyLimits, Step, Verdict};
//! use verifi_mcp_core::wire::failure::Failure;
//!
//! // What a server sent back to a request with id 7 (two reads' worth, split anywhere).
//! let reads: [&[u8]; 2] = [
//!     b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: message\ndata: {\"jsonrpc\"",
//!     b":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n",
//! ];
//!
//! struct Wants7(bool);
//! impl OnMessage for Wants7 {
//!     fn on_message(&mut self, msg: &[u8], _last_chance: bool) -> Result<Verdict, Failure> {
//!         self.0 = msg.windows(6).any(|w| w == b"\"id\":7");
//!         Ok(if self.0 { Verdict::Done } else { Verdict::Continue })
//!     }
//! }
//!
//! let mut head = [0u8; 1024];
//! let mut storage = [0u8; 4096];
//! let mut reply = SliceBuf::new(&mut storage);
//! let mut exchange = Exchange::new(&mut head, Expect::Response, false, ReplyLimits::default());
//! let mut handler = Wants7(false);
//! let mut step = Step::NeedMore;
//! for bytes in reads {                       // for each socket read …
//!     let (_used, s) = exchange.feed(bytes, &mut reply, &mut handler)?;
//!     step = s;
//!     if step != Step::NeedMore { break }    // … until the response is in
//! }
//! assert_eq!(step, Step::Done);
//! assert!(reply.bytes().starts_with(b"{\"jsonrpc\""));
//! # Ok::<(), Failure>(())
//! ```
//!
//! Around that loop, [`drive`] (feature `drive`) sequences a whole tool call over any
//! `embedded_io_async` connection: the lazy, never-poisoned handshake
//! ([`wire::session`]), the 404 re-initialization, failover ([`harness::failover`]),
//! redaction ([`harness::redact`]), metering and the run timeline. An adapter implements
//! [`drive::Net`] (open a connection, tell the time, sleep) and [`drive::Shared`] (where a
//! slot's state lives) and owns the buffers; it contains no protocol logic.
//!
//! ## Layers, top to bottom
//!
//! - [`harness`]: the seed's run rules as pure decisions: [`harness::result::ToolResult`] and
//!   its four shapes, redaction, failover, ledger, timeline, slots, `run_command` helpers.
//! - [`wire`]: the protocol: [`wire::endpoint`], [`wire::http`] (request head, streaming
//!   response decoder), [`wire::sse`], [`wire::json`], [`wire::jsonrpc`], [`wire::content`],
//!   [`wire::exchange`], [`wire::session`], [`wire::failure`].
//! - [`buf`]: caller-provided storage with stated caps; overflow is a value, never a panic.
//!
//! Imports run one way, down: nothing in `wire` knows `harness`, and nothing here knows an
//! adapter.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]
// A `Failure` keeps its details inline (up to `wire::failure::DETAIL_BYTES` each) because there
// is no allocator to box them into; results that carry one are larger than clippy's default.
#![allow(clippy::result_large_err)]

pub mod buf;
#[cfg(feature = "drive")]
pub mod drive;
pub mod harness;
pub mod machine;
pub mod wire;
