//! # verifi-mcp-core
//!
//! The sans-IO heart of the verifi MCP client: MCP streamable HTTP as pure transitions,
//! `#![no_std]`, allocation-free, and never reading a clock (time is an input).
//!
//! ## The run loop
//!
//! A slot's sequencing is a state machine ([`machine`]), in the style of quinn-proto: an
//! [`machine::Op`] (one call, list or request) says what to do next ([`machine::Action`]), the
//! caller does it and says how it went. Bytes and time are inputs; nothing awaits, locks or
//! reads a clock. This loop drives one whole `tools/call` against canned bytes (a 2026-era
//! server: its tool list, then the call's reply), as an adapter drives it over a socket:
//!
//! ```
//! # // The example speaks the 2026 era: a build without it has nothing to show.
//! # #[cfg(feature = "era-2026")] {
//! use verifi_mcp_core::buf::{Buf, SliceBuf};
//! use verifi_mcp_core::machine::{Action, Answer, CallBuffers, Op, SlotConfig, SlotState};
//! use verifi_mcp_core::wire::{endpoint::Endpoint, era::EraSetting};
//!
//! /// A JSON reply, as a server frames it.
//! fn reply(body: &str) -> Vec<u8> {
//!     format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
//!         .into_bytes()
//! }
//! // What the server answers to each request the op writes (ids 1 and 2).
//! let replies = [
//!     reply(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}"#),
//!     reply(r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi, key hunter2"}]}}"#),
//! ];
//!
//! let mut cfg = SlotConfig::new("kali", Endpoint::parse_base("http://127.0.0.1:8000")?, "kali-box");
//! cfg.era = EraSetting::Modern; // known to speak 2026-07-28: no probe
//! let mut slot = SlotState::new(cfg.version, false);
//! let (mut head, mut read) = ([0u8; 2048], [0u8; 512]);
//! let mut storage = [[0u8; 4096]; 5];
//! let [request, reply_buf, text, error, raw] = &mut storage;
//! let mut bufs = CallBuffers {
//!     request: SliceBuf::new(request),
//!     head: &mut head,
//!     read: &mut read,
//!     reply: SliceBuf::new(reply_buf),
//!     text: SliceBuf::new(text),
//!     error: SliceBuf::new(error),
//!     raw: SliceBuf::new(raw),
//! };
//! let secrets = ["hunter2"];
//! let mut op = Op::call(&cfg, &mut bufs, &secrets, "echo", None);
//!
//! let (mut now, mut sent, mut pending) = (0u64, 0, &[][..]);
//! loop {
//!     match op.poll(&mut slot, now) {
//!         Action::Connect { .. } => op.handle_connected(false),
//!         Action::Transmit => {
//!             // op.transmit() holds the request (head and body) to write.
//!             pending = &replies[sent];
//!             sent += 1;
//!             op.handle_sent(now, true);
//!         }
//!         Action::Receive => {
//!             // One socket read, split wherever the network splits it.
//!             let n = pending.len().min(op.read_buf().len());
//!             op.read_buf()[..n].copy_from_slice(&pending[..n]);
//!             pending = &pending[n..];
//!             op.handle_read(now, n);
//!         }
//!         Action::Sleep { .. } => now = op.timeout(),
//!         Action::Recycle | Action::Close | Action::Park | Action::Report => {}
//!         Action::Respond { .. } | Action::Listen { .. } | Action::TaskStarted => {}
//!         Action::Done => break,
//!     }
//! }
//! assert_eq!(op.answer(), Some(Answer::Result { is_error: false }));
//! drop(op);
//! assert_eq!(bufs.text.bytes(), b"hi, key [REDACTED]");
//! # }
//! # Ok::<(), verifi_mcp_core::wire::endpoint::EndpointError>(())
//! ```
//!
//! What happened on the way (an attempt ended, a fallback served, a call became a task, a
//! server's era became known) comes out of the op as events ([`machine::Op::poll_event`],
//! [`machine::Event`]), which [`machine::Metering`] turns into ledger records and timeline
//! events without awaiting.
//!
//! [`drive`] (feature `drive`) is that loop as one async pump over any `embedded_io_async`
//! connection, shared by both adapters: a [`drive::Driver`] (connections, the slot's config,
//! its state) whose methods run one op each and forward its events to the metering, which
//! they keep alive while an attempt runs, so that a call's dropped future is still metered.
//! An adapter implements [`drive::Net`] (open a connection, tell the time, sleep, answer a
//! server's request on the side), gives a closure that runs the pump's code with the slot's
//! state in hand (its own lock or cell: the core has no lock, and ops that wait on the slot
//! are woken through the state itself) and owns the buffers; it contains no protocol logic. The
//! reply parser under the machine stays a streaming scanner ([`wire::exchange`]): a reply is
//! never held whole to be parsed.
//!
//! ## Layers, top to bottom
//!
//! - [`machine`]: a slot's sequencing as states: the handshake or the 2026 era's probe,
//!   waiters, retries, resumption, failover, tasks, input rounds.
//! - [`harness`]: the run rules (docs/design.md#run-rules) as pure decisions: [`harness::result::ToolResult`] and
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

#[cfg(not(any(feature = "era-2025", feature = "era-2026")))]
compile_error!(
    "verifi-mcp-core needs at least one protocol era: turn on the feature `era-2026` (the \
     stateless era) or `era-2025` (the handshake era), or both (docs/design.md#capabilities)"
);

pub mod buf;
#[cfg(feature = "drive")]
pub mod drive;
pub mod harness;
pub mod machine;
pub mod wire;
