//! # verifi-mcp-embassy
//!
//! The edge adapter of the verifi MCP client: the core's protocol driver over
//! [`embassy_net`] TCP sockets and [`embassy_time`], `#![no_std]` and without an allocator.
//! Every byte of storage is the caller's: socket RX/TX buffers go into a [`SocketPool`] at
//! boot, and each call borrows a [`CallStorage`] (or any `CallBuffers`).
//!
//! The shape of a probe (the whole, compiled program is `examples/edge-probe/src/probe.rs`,
//! which CI builds for the board and for Linux; this sketch needs a running stack, so it is
//! not a doctest):
//!
//! ```text
//! // At boot (buffers in statics):
//! let pool = SocketPool::new(stack, [(&mut RX0[..], &mut TX0[..]), (&mut RX1[..], &mut TX1[..])]);
//! let net = EdgeNet::new(&pool);
//! let slot = EdgeSlot::new(config, RUN_ID, SECRETS);          // one per slot, kept for the run
//! // (EdgeSlot::listing(...) instead where the firmware also lists the tools: its calls and
//! // its list then share one copy of the core's op, a few KiB less flash than two.)
//! // Each probe:
//! let r = slot.exec(&net, "uname -a", 30, &mut args, &mut storage.buffers()).await;
//! ```
//!
//! Layers, top to bottom: [`slot`] (a slot's counters, timeline and `exec`), the core's
//! `drive` (handshake, failover, redaction, metering), [`net`] (sockets, DNS, time) and
//! [`shared`] (the slot state's cell). With the `tls` feature, `tls::TlsNet` wraps `EdgeNet`
//! and reaches `https://` endpoints over TLS 1.3 verified against a pinned CA; without it (or
//! through a bare `EdgeNet`) an `https://` endpoint gives `ok: false` with [`net::NO_TLS`].
#![no_std]
#![cfg_attr(not(feature = "tls"), forbid(unsafe_code))]

mod log;
pub mod net;
pub mod shared;
pub mod slot;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "serde")]
pub mod typed;

pub use net::{EdgeConn, EdgeNet, SocketPool};
pub use shared::CellShared;
pub use slot::{
    CallStorage, Counters, EdgeSlot, ExecResult, MAX_SECRETS, OnEvent, ProbeCallStorage,
    TooManySecrets,
};
#[cfg(feature = "tls")]
pub use tls::{CryptoRngCore, TlsNet, TlsPool, TlsStorage, Trust};
pub use verifi_mcp_core;
