//! Runnable harnesses: the demo sweep and the `mcp` command line, with the demo's own MCP
//! servers.
//!
//! Modules: [`allowlist`] (the demo box's command policy and runner), [`kali`] (the demo box, a
//! real rmcp streamable-HTTP server on loopback), [`common`] (manifests from flags, input checks,
//! scrubbing and rendering shared by the binaries), [`protocol_cmds`] (the `mcp` subcommands for
//! resources, prompts and ping), [`human`] (what `mcp` prints for a person: tool signatures, the
//! words of a failure).

pub mod allowlist;
pub mod common;
pub mod human;
pub mod kali;
pub mod protocol_cmds;
