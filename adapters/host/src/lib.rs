//! # verifi-mcp-host
//!
//! The host adapter: drives `verifi-mcp-core` over async-io TCP and rustls. Only sockets,
//! TLS, time and memory live here; every protocol decision is the core's.
//!
//! **Any executor.** async-io brings its own reactor thread, so these futures run under tokio
//! (tested on its current-thread and multi-thread runtimes, with calls spawned as tokio tasks),
//! smol, or a plain `block_on`; nothing here needs a tokio runtime. [`SlotHandle`] is
//! `Send + Sync` and cheap to clone.
//!
//! Build a context from a run manifest (below) or in code with [`HarnessContext::builder`];
//! [`Options`] is `#[non_exhaustive]` with a setter per field.
//!
//! ```no_run
//! use serde_json::json;
//! use verifi_mcp_host::{Exec, HarnessContext, Options};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = HarnessContext::from_manifest_file("manifest.json", "run-7", Options::default())?;
//! let kali = ctx.mcp("kali")?; // nothing is sent yet
//! smol::block_on(async {
//!     let r = kali.call("echo", json!({ "text": "hello" })).await; // never panics, never Err
//!     if !r.ok() {
//!         ctx.log(format!("echo failed: {}", r.error().unwrap_or_default()));
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
//! Modules: [`context`] (`HarnessContext`, its builder, `Options`, `ctx.mcp(slot)`), [`slot`]
//! (slot handles), [`task`] (tool calls held as tasks: start, status, wait, cancel,
//! re-attach), [`tool`] (typed `Tool` from `tools/list`), [`exec`] (`run_command` on a
//! shared box), [`net`] (connections, pool, TLS, clock), [`stdio`] (local servers over
//! stdio: child processes, routed lines), [`proxy`] (forward proxies),
//! [`trust`] (roots and certificate errors), [`protocol`] (resources, prompts, ping,
//! structured output), [`auth`] (the OAuth client), [`trace`] (a wire
//! observer), [`result`] (owned results), [`buf`] (capped `Vec` buffers), [`shared`] (a slot's
//! state behind a lock with wake-ups).

pub mod auth;
pub mod buf;
pub mod context;
pub mod elicit;
pub mod exec;
pub mod integrity;
pub mod mask;
pub mod net;
pub mod options;
pub mod protocol;
pub mod proxy;
pub mod result;
pub mod route;
pub mod run;
mod run_state;
pub mod server_log;
pub mod shared;
pub mod slot;
mod slot_hooks;
pub mod stdio;
pub mod task;
pub mod telemetry;
pub mod tool;
pub mod trace;
pub mod trust;

pub use auth::store::FileTokenStore;
pub use auth::{
    AuthConfig, AuthFlow, AuthorizeHook, MemoryTokenStore, StoredClient, Token, TokenStore,
};
pub use buf::VecBuf;
pub use context::{
    ContextError, HarnessContext, HarnessContextBuilder, LedgerTotals, Options, SlotNotFilledError,
    TimelineEntry, env_secrets,
};
pub use elicit::{ElicitAnswer, OnElicit};
pub use exec::{Exec, ExecResult};
pub use integrity::{OnToolChange, ToolPrint, ToolsLock};
pub use mask::{mask_url, url_secrets};
pub use net::{ConnectFailure, FailureKind, HostNet, PoolKey, RootCert, Route};
pub use protocol::{
    GetPromptResult, Prompt, PromptArgument, PromptMessage, ProtocolError, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate,
};
pub use proxy::{Proxy, ProxyRule};
pub use result::{CallError, ListToolsError, ToolResult};
pub use run::add_json_forms;
pub use server_log::ServerLogObserver;
pub use shared::HostShared;
pub use slot::{SlotHandle, SlotSpec};
pub use task::{TaskHandle, TaskStart};
pub use tool::Tool;
pub use trace::{WireEvent, WireTrace};
pub use trust::{CertProblem, Trust};
pub use verifi_mcp_core::drive::ProgressUpdate;
pub use verifi_mcp_core::harness::result::Kind;
pub use verifi_mcp_core::machine::{Elicitation, LogLevel};
pub use verifi_mcp_core::wire::era::EraSetting;
pub use verifi_mcp_core::wire::failure::Cause;
pub use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

/// The README's harness example, compiled as a doctest so it cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// This crate's README example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct CrateReadmeDoctests;
