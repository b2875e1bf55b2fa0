//! # verifi-mcp-smol
//!
//! The host adapter: drives `verifi-mcp-core` over smol / async-io TCP and rustls. Only
//! sockets, TLS, time and memory live here; every protocol decision is the core's.
//!
//! Modules: [`net`] (connections, pool, TLS, clock), [`buf`] (capped `Vec` buffers),
//! [`shared`] (a slot's state behind a lock with wake-ups).

pub mod buf;
pub mod net;
pub mod shared;

pub use buf::VecBuf;
pub use net::{ConnectFailure, FailureKind, HostNet, PoolKey, RootCert};
pub use shared::HostShared;
