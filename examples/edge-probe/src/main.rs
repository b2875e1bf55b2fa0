//! Edge-probe: DHCP on the board's Ethernet, then a periodic MCP probe.
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]
// The measuring builds (scripts/edge-size.sh) leave the client out on purpose.
#![cfg_attr(
    any(feature = "size-baseline", feature = "size-parse"),
    allow(dead_code)
)]

#[cfg(target_os = "none")]
mod board;
#[cfg(not(target_os = "none"))]
mod host;
mod probe;
#[cfg(all(
    target_os = "none",
    any(feature = "size-baseline", feature = "size-parse")
))]
mod size;

#[cfg(not(target_os = "none"))]
fn main() {
    host::main();
}
