//! The protocol: everything between a request to make and the bytes on the wire.
//!
//! Nothing here knows the harness rules (`crate::harness`) or any adapter.

pub mod content;
pub mod endpoint;
pub mod era;
pub mod exchange;
pub mod failure;
pub mod http;
pub mod json;
pub mod jsonrpc;
pub mod session;
pub mod sse;
mod words;
