//! The auth peer for tests: `tests/peers/auth/server.mjs` (`oidc-provider` as the
//! authorization server, in front of an MCP server on the official TypeScript SDK with its
//! bearer-auth middleware), started on 127.0.0.1 as a child process.
//!
//! Owns: the child, its key file and its debug endpoints. `scripts/proxy-peers.sh` installs
//! its npm packages; when they are missing, [`AuthPeer::start`] says what to run.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The fixed secrets of the peer's confidential clients.
pub const CC_BASIC_SECRET: &str = "cc-basic-secret-0123456789abcdef";
/// `cc-post`'s secret.
pub const CC_POST_SECRET: &str = "cc-post-secret-0123456789abcdef";
/// `cc-short`'s secret (its tokens live 3 s).
pub const CC_SHORT_SECRET: &str = "cc-short-secret-0123456789abcdef";

/// The `client_secret` the peer's registration hands out in `public` mode (its token endpoint
/// takes none).
pub const PUBLIC_REG_SECRET: &str = "public-reg-secret-0123456789abcdef";

/// A running auth peer. Dropping it kills the process.
pub struct AuthPeer {
    child: Child,
    /// The issuer URL (`http://127.0.0.1:A`).
    pub issuer: String,
    /// The MCP URL (`http://127.0.0.1:B/mcp`).
    pub mcp: String,
    /// The `cc-jwt` client's private key (PKCS#8 PEM).
    pub key_file: PathBuf,
}

fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/auth")
}

impl AuthPeer {
    /// Starts the peer in `mode` (`header`, `wellknown`, `mismatch`, `person`, `public` or
    /// `migrate`).
    pub fn start(mode: &str) -> io::Result<AuthPeer> {
        let dir = peer_dir();
        if !dir.join("node_modules/oidc-provider").exists() {
            return Err(io::Error::other(
                "the auth peer is not installed: run `bash scripts/proxy-peers.sh`",
            ));
        }
        let key_file = std::env::temp_dir().join(format!(
            "verifi-auth-peer-{}-{mode}-{}.pem",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut child = Command::new("node")
            .arg(dir.join("server.mjs"))
            .arg(mode)
            .arg(&key_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.find_map(|l| l.ok().filter(|l| l.starts_with('{')));
            let _ = tx.send(first);
            for _ in lines {} // keep the pipe drained
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(l)) => l,
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("the auth peer did not start within 30 s"));
            }
        };
        let v: serde_json::Value = serde_json::from_str(&line).map_err(io::Error::other)?;
        let s = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| io::Error::other(k.to_owned()))
        };
        Ok(AuthPeer {
            issuer: s("issuer")?,
            mcp: s("mcp")?,
            child,
            key_file,
        })
    }

    /// The MCP port's origin, `http://127.0.0.1:B`.
    pub fn mcp_origin(&self) -> String {
        self.mcp.trim_end_matches("/mcp").to_owned()
    }

    fn debug(&self, method: &str, path: &str) -> io::Result<serde_json::Value> {
        let addr = self.mcp_origin().trim_start_matches("http://").to_owned();
        let mut s = TcpStream::connect(&addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )?;
        let mut reply = String::new();
        s.read_to_string(&mut reply)?;
        let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).map_err(io::Error::other)
    }

    /// What the peer saw: `token_requests`, `tokens_seen`, `mcp_requests`, `tool_calls`, …
    pub fn stats(&self) -> serde_json::Value {
        self.debug("GET", "/debug/stats").expect("auth peer stats")
    }

    /// Every token seen so far is refused from now on.
    pub fn revoke_all(&self) {
        self.debug("POST", "/debug/revoke")
            .expect("auth peer revoke");
    }

    /// `migrate` mode: the protected-resource metadata names the second issuer from now on,
    /// and only its tokens are taken.
    pub fn migrate(&self) {
        self.debug("POST", "/debug/migrate")
            .expect("auth peer migrate");
    }

    /// Every access token the MCP server was shown.
    pub fn tokens_seen(&self) -> Vec<String> {
        self.stats()["tokens_seen"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for AuthPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.key_file);
    }
}
