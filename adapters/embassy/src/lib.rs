#![no_std]
//! Edge adapter: drives verifi-mcp-core over embassy-net on Cortex-M, without an allocator.
