//! Fuzz target `machine`: one op of the call machine against a server the input scripts (the
//! check lives in core/tests/fuzz_checks/machine.rs, shared with the stable replay test).
#![no_main]

#[path = "../../core/tests/fuzz_checks/mod.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::machine(data));
