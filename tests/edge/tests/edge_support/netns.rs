//! A network namespace for one edge test, and the server processes in it: dropping it kills
//! them and deletes the namespace, also when the test fails.

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};

/// The namespace and its servers (each with the port it serves, 0 when none matters).
pub struct Netns {
    /// The namespace's name.
    pub name: String,
    /// The server processes, killed on drop.
    pub servers: Arc<Mutex<Vec<(u16, Child)>>>,
}

impl Netns {
    /// A namespace named `name` (not created here: the test does that with [`ip`]).
    pub fn named(name: String) -> Netns {
        Netns {
            name,
            servers: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for (_, child) in self
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs `ip ARGS`, failing the test with its stderr when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// True when the test `test` can run; panics with the reason when it cannot and may not skip
/// (`VERIFI_ALLOW_NO_NETNS=1` allows a loud skip).
pub fn can_run(test: &str) -> bool {
    let reason = if unsafe { libc::geteuid() } != 0 {
        Some("not root: a network namespace and a TAP device need root (CAP_NET_ADMIN)")
    } else if Command::new("ip").arg("-V").output().is_err() {
        Some("the `ip` command (iproute2) is missing: apt-get install iproute2")
    } else {
        None
    };
    match reason {
        None => true,
        Some(why) if std::env::var("VERIFI_ALLOW_NO_NETNS").as_deref() == Ok("1") => {
            eprintln!("{test} DID NOT RUN ({why}); allowed by VERIFI_ALLOW_NO_NETNS=1");
            false
        }
        Some(why) => panic!(
            "{test} cannot run: {why}. Run as root, or set VERIFI_ALLOW_NO_NETNS=1 to allow this."
        ),
    }
}
