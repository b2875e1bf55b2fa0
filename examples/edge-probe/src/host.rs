//! Linux build of the probe over a TAP device.
pub fn main() {}
