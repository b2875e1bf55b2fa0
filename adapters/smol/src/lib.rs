//! # verifi-mcp-smol
//!
//! The host adapter: drives `verifi-mcp-core` over smol / async-io TCP and rustls. Only
//! sockets, TLS, time and memory live here; every protocol decision is the core's.
//!
//! ```no_run
//! use serde_json::json;
//! use verifi_mcp_smol::{Exec, HarnessContext, Options};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = HarnessContext::from_manifest_file("manifest.json", "run-7", Options::default())?;
//! let kali = ctx.mcp("kali")?; // nothing is sent yet
//! smol::block_on(async {
//!     let r = kali.call("echo", json!({ "text": "hello" })).await; // never panics, never Err
//!     if !r.ok {
//!         ctx.log(format!("echo failed: {}", r.error.unwrap_or_default()));
//!     }
//!     let nmap = Exec::new(&ctx, "kali")?.exec("nmap -sV example.com", 600_000).await;
//!     println!("exit {:?}: {}", nmap.exit_code, nmap.output);
//!     ctx.close().await; // DELETE the sessions
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! println!("{:?} {:?}", ctx.ledger(), ctx.timeline());
//! # Ok(())
//! # }
//! ```
//!
//! Modules: [`auth`] (the OAuth client), [`context`] (`HarnessContext`, `ctx.mcp(slot)`), [`slot`] (slot handles), [`exec`] (`run_command` on a shared box), [`net`] (connections, pool, TLS, clock), [`proxy`] (forward proxies), [`trust`] (roots and certificate errors), [`buf`] (capped `Vec` buffers),
//! [`shared`] (a slot's state behind a lock with wake-ups).

pub mod auth;
pub mod buf;
pub mod context;
pub mod exec;
pub mod net;
pub mod proxy;
pub mod result;
pub mod route;
pub mod shared;
pub mod slot;
pub mod trust;

pub use auth::{AuthConfig, AuthFlow, AuthorizeHook, MemoryTokenStore, Token, TokenStore};
pub use buf::VecBuf;
pub use context::{
    ContextError, HarnessContext, LedgerTotals, Options, SlotNotFilledError, TimelineEntry,
};
pub use exec::{Exec, ExecResult};
pub use net::{ConnectFailure, FailureKind, HostNet, PoolKey, RootCert, Route};
pub use proxy::{Proxy, ProxyRule};
pub use result::{ListToolsError, ToolResult};
pub use shared::HostShared;
pub use slot::{SlotHandle, SlotSpec};
pub use trust::{CertProblem, Trust};
pub use verifi_mcp_core::drive::ProgressUpdate;
pub use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

/// The README's harness example, compiled as a doctest so it cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
