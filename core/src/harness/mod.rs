//! The seed's run rules as plain data and pure decisions: redaction, failover, metering,
//! the run timeline, slot resolution, the `run_command` helpers, and `ToolResult` with the
//! four failure shapes (`result`).
//!
//! Built on `crate::wire` values only; no I/O, no clock, no allocation.

pub mod events;
pub mod exec;
pub mod failover;
pub mod meter;
pub mod redact;
pub mod result;
pub mod slots;
