//! The edge adapter's integration tests live in `tests/` (replay, TAP, TLS); this library is
//! empty. The crate exists so that those tests can be selected without the host adapter:
//! `cargo test -p verifi-mcp-edge-tests` builds the core as the edge does (no `std`), which a
//! test in the `tests` crate (it depends on the host adapter) never can. See its Cargo.toml.
