//! # verifi-mcp-core
//!
//! The sans-IO heart of the verifi MCP client: MCP streamable HTTP as pure transitions,
//! `#![no_std]`, allocation-free, and never reading a clock.
//!
//! (The crate docs open with the driver loop once `drive` lands.)
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

pub mod buf;
pub mod harness;
pub mod wire;
