//! `endpoint`: see the module contract (filled in by its own change).
