//! Workspace-level interop, fault-matrix and soak tests against real MCP servers.
//!
//! The library holds what the tests share: [`servers`], real rmcp servers started in-process
//! (also as the `verifi-test-server` binary), and [`hostile`], a byte-level scripted server
//! for fault cases, [`tls`], a TLS-terminating proxy with an `rcgen` root, and [`tinyproxy`], a real forward proxy. The tests themselves live in `tests/`.

pub mod auth_peer;
pub mod hostile;
pub mod servers;
pub mod tinyproxy;
pub mod tls;

pub use auth_peer::AuthPeer;
pub use hostile::{HostileServer, Request, Step};
pub use servers::{Mode, SeenRequest, ServerOptions, Stats, TestServer};
pub use tinyproxy::Tinyproxy;
pub use tls::TlsProxy;
