//! # verifi-mcp-smol
//!
//! The host adapter: drives `verifi-mcp-core` over smol / async-io TCP and rustls. Only
//! sockets, TLS, time and memory live here; every protocol decision is the core's.
//!
//! Modules: [`context`] (`HarnessContext`, `ctx.mcp(slot)`), [`slot`] (slot handles), [`net`] (connections, pool, TLS, clock), [`buf`] (capped `Vec` buffers),
//! [`shared`] (a slot's state behind a lock with wake-ups).

pub mod buf;
pub mod context;
pub mod net;
pub mod result;
pub mod shared;
pub mod slot;

pub use buf::VecBuf;
pub use context::{
    ContextError, HarnessContext, LedgerTotals, Options, SlotNotFilledError, TimelineEntry,
};
pub use net::{ConnectFailure, FailureKind, HostNet, PoolKey, RootCert};
pub use result::{ListToolsError, ToolResult};
pub use shared::HostShared;
pub use slot::{SlotHandle, SlotSpec};
