//! Puts `memory.x` where the linker finds it (firmware only), and the pinned CA for the `tls`
//! feature in `OUT_DIR/ca.der` (the file `EDGE_PROBE_CA` names, else empty: then an https
//! endpoint is refused at start), and rebuilds when either changes.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=EDGE_PROBE_CA");
    let ca = match env::var_os("EDGE_PROBE_CA") {
        Some(path) => {
            println!("cargo:rerun-if-changed={}", PathBuf::from(&path).display());
            fs::read(&path).expect("read the DER file EDGE_PROBE_CA names")
        }
        None => Vec::new(),
    };
    fs::write(out.join("ca.der"), ca).expect("write ca.der");
    println!("cargo:rerun-if-changed=build.rs");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return;
    }
    fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
}
