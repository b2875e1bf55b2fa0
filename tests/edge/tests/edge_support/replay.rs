//! A minimal HTTP/1.1 server on an embassy-net stack that answers MCP requests with the raw
//! replies real servers sent (tests/data/edge/<server>/): the same status line, headers and
//! body bytes, with the JSON-RPC `"id"` set to the request's and chunked bodies framed again.
//!
//! It is a replayer, not an MCP server: it picks the recorded reply by the request's method and
//! tool name, logs what it saw, and can cut a reply short to play a server dying mid-reply.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;

use embassy_futures::select::select;
use embassy_net::Stack;
use embassy_net::tcp::TcpSocket;
use embassy_time::{Duration, Timer};
use embedded_io_async::Write as _;

/// What the replayer saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    /// HTTP method.
    pub method: String,
    /// JSON-RPC method (empty for DELETE).
    pub rpc: String,
    /// The `mcp-session-id` header, if sent.
    pub session_id: Option<String>,
    /// The `mcp-protocol-version` header, if sent.
    pub protocol_version: Option<String>,
    /// The tool of a tools/call.
    pub tool: Option<String>,
    /// The request body.
    pub body: String,
}

/// One recorded server: its replies and what it was asked.
pub struct Replay {
    replies: HashMap<String, Vec<u8>>,
    /// When set, the next tools/call reply is cut after this many body bytes, then the
    /// connection is closed (FIN), as a server dying mid-reply would.
    pub cut_next_call_at: Cell<Option<usize>>,
    /// Every request, in order.
    pub seen: RefCell<Vec<Seen>>,
    /// Connections accepted.
    pub connections: Cell<usize>,
}

impl Replay {
    /// Loads `tests/data/edge/<server>/*.http` (beside this crate, in the `tests` crate).
    pub fn load(server: &str) -> &'static Replay {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../data/edge")
            .join(server);
        let mut replies = HashMap::new();
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            // "06-call-echo" -> "call-echo"
            let key = name
                .split_once('-')
                .map(|(_, k)| k.to_string())
                .unwrap_or(name);
            replies.insert(key, std::fs::read(&path).unwrap());
        }
        assert!(replies.len() >= 10, "replies missing in {}", dir.display());
        Box::leak(Box::new(Replay {
            replies,
            cut_next_call_at: Cell::new(None),
            seen: RefCell::new(Vec::new()),
            connections: Cell::new(0),
        }))
    }

    /// How many requests had JSON-RPC method `rpc`.
    pub fn count(&self, rpc: &str) -> usize {
        self.seen.borrow().iter().filter(|s| s.rpc == rpc).count()
    }

    fn pick(&self, seen: &Seen) -> &[u8] {
        let key = if seen.method == "DELETE" {
            "delete"
        } else {
            match seen.rpc.as_str() {
                "initialize" => "initialize",
                "notifications/initialized" | "notifications/cancelled" => "initialized",
                "tools/list" => "tools-list",
                "tools/call" => match seen.tool.as_deref() {
                    Some("echo") if seen.body.contains("\"text\"") => "call-echo",
                    Some("echo") => "call-invalid-args",
                    Some("run_command") => "call-run-command",
                    Some("fail") => "call-fail",
                    Some("mixed") => "call-mixed",
                    Some("slow") => "call-slow-progress",
                    _ => "call-unknown-tool",
                },
                _ => "initialized",
            }
        };
        &self.replies[key]
    }
}

/// The first `"key":"value"` string value in `s`.
fn str_field(s: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":\"");
    let at = s.find(&pat)? + pat.len();
    let end = s[at..].find('"')?;
    Some(s[at..at + end].to_string())
}

/// The first `"id":<digits>` number in `s`, as text.
fn first_id(s: &str) -> Option<(usize, usize)> {
    let at = s.find("\"id\":")? + 5;
    let len = s[at..].bytes().take_while(u8::is_ascii_digit).count();
    (len > 0).then_some((at, len))
}

/// The recorded reply with the request's id, framed for the wire: (head, body frames).
fn render(recorded: &[u8], request_id: Option<&str>) -> (Vec<u8>, Vec<u8>) {
    let split = recorded
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("recorded head");
    let head = std::str::from_utf8(&recorded[..split]).unwrap();
    let mut body = recorded[split + 4..].to_vec();
    if let (Some(id), Ok(text)) = (request_id, std::str::from_utf8(&body))
        && let Some((at, len)) = first_id(text)
    {
        let mut b = text[..at].to_string();
        b.push_str(id);
        b.push_str(&text[at + len..]);
        body = b.into_bytes();
    }
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let mut out = String::new();
    for line in head.split("\r\n") {
        if line.to_ascii_lowercase().starts_with("content-length:") {
            out.push_str(&format!("content-length: {}\r\n", body.len()));
        } else {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    let framed = if chunked {
        // Two chunks, split mid-body, so the client's chunk decoder meets a boundary.
        let mut f = Vec::new();
        let (a, b) = body.split_at(body.len() / 2);
        for part in [a, b] {
            if !part.is_empty() {
                f.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                f.extend_from_slice(part);
                f.extend_from_slice(b"\r\n");
            }
        }
        f.extend_from_slice(b"0\r\n\r\n");
        f
    } else {
        body
    };
    (out.into_bytes(), framed)
}

/// Reads one request (head and content-length body); None at EOF or on error.
async fn read_request(sock: &mut TcpSocket<'_>, pending: &mut Vec<u8>) -> Option<Seen> {
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        assert!(pending.len() < 64 * 1024, "request head without end");
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let method = lines.next()?.split(' ').next()?.to_string();
    let mut length = 0usize;
    let mut session_id = None;
    let mut protocol_version = None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim().to_string();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().ok()?,
            "mcp-session-id" => session_id = Some(value),
            "mcp-protocol-version" => protocol_version = Some(value),
            _ => {}
        }
    }
    let want = head_end + 4 + length;
    while pending.len() < want {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&pending[head_end + 4..want]).to_string();
    pending.drain(..want);
    Some(Seen {
        rpc: str_field(&body, "method").unwrap_or_default(),
        tool: str_field(&body, "name"),
        method,
        session_id,
        protocol_version,
        body,
    })
}

async fn serve(sock: &mut TcpSocket<'_>, replay: &Replay) {
    let mut pending = Vec::new();
    while let Some(seen) = read_request(sock, &mut pending).await {
        let id = first_id(&seen.body).map(|(at, len)| seen.body[at..at + len].to_string());
        let (head, body) = render(replay.pick(&seen), id.as_deref());
        let cut = if seen.rpc == "tools/call" {
            replay.cut_next_call_at.take()
        } else {
            None
        };
        replay.seen.borrow_mut().push(seen);
        if sock.write_all(&head).await.is_err() {
            return;
        }
        if let Some(at) = cut {
            let _ = sock.write_all(&body[..at.min(body.len())]).await;
            let _ = sock.flush().await;
            return; // the caller closes: the reply ends early
        }
        if sock.write_all(&body).await.is_err() || sock.flush().await.is_err() {
            return;
        }
    }
}

/// Accepts connections on `port` forever, one at a time, answering from `replay`.
pub async fn acceptor(stack: Stack<'static>, port: u16, replay: &'static Replay) {
    let mut sock = TcpSocket::new(stack, super::leak(4096), super::leak(16 * 1024));
    loop {
        if sock.accept(port).await.is_err() {
            sock.abort();
            Timer::after(Duration::from_millis(5)).await;
            continue;
        }
        replay.connections.set(replay.connections.get() + 1);
        serve(&mut sock, replay).await;
        sock.close();
        let _ = select(sock.flush(), Timer::after(Duration::from_millis(500))).await;
        sock.abort();
        let _ = select(sock.flush(), Timer::after(Duration::from_millis(50))).await;
    }
}
