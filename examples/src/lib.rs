//! Runnable harnesses: the demo sweep and the `mcp` command line, with the demo's own MCP
//! servers.
//!
//! Modules: [`allowlist`] (the demo box's command policy and runner), [`kali`] (the demo box, a
//! real rmcp streamable-HTTP server on loopback), [`common`] (manifests from flags, input checks,
//! scrubbing and rendering shared by the binaries), [`protocol_cmds`] (the `mcp` subcommands for
//! resources, prompts and ping), [`human`] (what `mcp` prints for a person: tool signatures, the
//! words of a failure), [`auth_cmd`] (where tokens are kept; `mcp auth`), [`child_env`] (a stdio
//! server's `--env`), [`signals`] (ending early and cleanly on a signal or a closed stdout),
//! [`out`] (writes that never panic).

pub mod allowlist;
pub mod auth_cmd;
pub mod child_env;
pub mod common;
pub mod human;
pub mod kali;
pub mod out;
pub mod protocol_cmds;
pub mod signals;
