//! A real forward proxy for tests: Debian's `tinyproxy`, started on 127.0.0.1 with a config
//! of its own (optionally with basic credentials), logging every connection and request line.
//!
//! Owns: the config file, the child process and its log. `scripts/proxy-peers.sh` installs
//! tinyproxy (CI calls it); when it is missing, [`Tinyproxy::start`] says what to run.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running tinyproxy. Dropping it kills the process it started.
pub struct Tinyproxy {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Tinyproxy {
    /// Starts tinyproxy on a free loopback port; with `basic`, it asks for those credentials.
    pub fn start(basic: Option<(&str, &str)>) -> io::Result<Tinyproxy> {
        let bin = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or_else(|| {
                io::Error::other("tinyproxy is not installed: run `bash scripts/proxy-peers.sh`")
            })?;
        let mut last = io::Error::other("tinyproxy did not start");
        // A free port can be taken between our probe and tinyproxy's bind: a few tries.
        for attempt in 0..3 {
            let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
            let dir = std::env::temp_dir().join(format!(
                "verifi-tinyproxy-{}-{port}-{attempt}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir)?;
            let mut conf = format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 64\nLogLevel Connect\n"
            );
            if let Some((user, pass)) = basic {
                conf.push_str(&format!("BasicAuth {user} {pass}\n"));
            }
            std::fs::write(dir.join("tinyproxy.conf"), conf)?;
            let log = std::fs::File::create(dir.join("tinyproxy.log"))?;
            let child = Command::new(bin)
                .arg("-d")
                .arg("-c")
                .arg(dir.join("tinyproxy.conf"))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut proxy = Tinyproxy { child, addr, dir };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(status)) = proxy.child.try_wait() {
                    last =
                        io::Error::other(format!("tinyproxy exited ({status}): {}", proxy.log()));
                    break;
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return Ok(proxy);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Err(last)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://USER:PASS@127.0.0.1:PORT`.
    pub fn url_with(&self, user: &str, pass: &str) -> String {
        format!("http://{user}:{pass}@{}", self.addr)
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tinyproxy.log")).unwrap_or_default()
    }

    /// The request lines it logged (`CONNECT h:p HTTP/1.1`, `POST http://… HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter_map(|l| l.split_once("): ").filter(|_| l.contains("Request (")))
            .map(|(_, r)| r.to_owned())
            .collect()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
