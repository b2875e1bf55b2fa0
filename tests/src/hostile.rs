//! A byte-level hostile HTTP server for fault tests: a raw `std::net::TcpListener` on
//! 127.0.0.1:0 whose every connection follows a script (read a request, send exact bytes,
//! wait, trickle, close), recording what the client sent.
//!
//! Owns: the scripting and the recording. It knows just enough HTTP/1.1 to find where a
//! request ends (head, then `content-length` bytes); everything it sends is what the test says.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The most a recorded request may be (head + body); bigger ones end the connection.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// How long a connection waits for client bytes before giving up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the bytes of a reply from the last request read on this connection.
pub type Responder = Arc<dyn Fn(&Request) -> Vec<u8> + Send + Sync>;

/// One step of a connection's script.
#[derive(Clone)]
pub enum Step {
    /// Read one whole request (head and `content-length` body) and record it.
    ReadRequest,
    /// Send these bytes, in one write.
    Send(Vec<u8>),
    /// Send the bytes `f` makes from the last request (e.g. to echo its JSON-RPC id).
    SendWith(Responder),
    /// Send `bytes` in pieces of `chunk` bytes with `every` between them.
    Trickle {
        /// What to send.
        bytes: Vec<u8>,
        /// Piece size (at least 1).
        chunk: usize,
        /// Pause between pieces.
        every: Duration,
    },
    /// Wait.
    Delay(Duration),
    /// Keep the connection open, reading and discarding, until the client closes or the time
    /// passes.
    Hold(Duration),
    /// Close the connection now (the script's end closes it too).
    Close,
    /// Close the connection now if the last request read matches (e.g. to break the reply
    /// of one method only).
    CloseIf(Arc<dyn Fn(&Request) -> bool + Send + Sync>),
}

/// A request the client sent.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Index of the connection it came on (0 = first accepted).
    pub connection: usize,
    /// The head, up to and including the blank line.
    pub head: Vec<u8>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The request line, e.g. `POST /mcp HTTP/1.1`.
    pub fn request_line(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        head.lines().next().unwrap_or_default().to_owned()
    }
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = String::from_utf8_lossy(&self.head);
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
    /// The body as JSON, when it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
    /// The JSON-RPC method of the body, when it has one.
    pub fn method(&self) -> Option<String> {
        self.json()?.get("method")?.as_str().map(str::to_owned)
    }
    /// The JSON-RPC id of the body as JSON text, when it has one.
    pub fn id_json(&self) -> Option<String> {
        self.json()?.get("id").map(|v| v.to_string())
    }
}

/// Picks the script of connection `n` (0 = first accepted).
pub type Script = Arc<dyn Fn(usize) -> Vec<Step> + Send + Sync>;

/// A running hostile server. Dropping it stops it.
pub struct HostileServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Request>>>,
    closed_by_client: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostileServer {
    /// Starts on 127.0.0.1:0; connection `n` follows `script(n)`.
    pub fn start(script: impl Fn(usize) -> Vec<Step> + Send + Sync + 'static) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let closed_by_client = Arc::new(AtomicUsize::new(0));
        let script: Script = Arc::new(script);
        let (s, a, r, c) = (
            stop.clone(),
            accepted.clone(),
            requests.clone(),
            closed_by_client.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("hostile-accept".into())
            .spawn(move || {
                let mut workers = Vec::new();
                for stream in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let n = a.fetch_add(1, Ordering::SeqCst);
                    let steps = script(n);
                    let (r, c) = (r.clone(), c.clone());
                    workers.push(std::thread::spawn(move || {
                        run_script(stream, n, steps, &r, &c);
                    }));
                }
                for w in workers {
                    let _ = w.join();
                }
            })?;
        Ok(HostileServer {
            addr,
            stop,
            accepted,
            requests,
            closed_by_client,
            thread: Some(thread),
        })
    }

    /// Serves the same script on every connection.
    pub fn every_connection(steps: Vec<Step>) -> io::Result<Self> {
        HostileServer::start(move |_| steps.clone())
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
    /// Every request read so far, in the order read.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.requests).clone()
    }
    /// Connections on which the client closed while the script was reading or holding.
    pub fn closed_by_client(&self) -> usize {
        self.closed_by_client.load(Ordering::SeqCst)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run_script(
    mut stream: TcpStream,
    n: usize,
    steps: Vec<Step>,
    requests: &Mutex<Vec<Request>>,
    closed_by_client: &AtomicUsize,
) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let mut pending = Vec::new();
    let mut last = Request {
        connection: n,
        ..Request::default()
    };
    for step in steps {
        let ok = match step {
            Step::ReadRequest => match read_request(&mut stream, &mut pending) {
                Some((head, body)) => {
                    last = Request {
                        connection: n,
                        head,
                        body,
                    };
                    lock(requests).push(last.clone());
                    true
                }
                None => {
                    closed_by_client.fetch_add(1, Ordering::SeqCst);
                    false
                }
            },
            Step::Send(bytes) => stream.write_all(&bytes).is_ok(),
            Step::SendWith(f) => stream.write_all(&f(&last)).is_ok(),
            Step::Trickle {
                bytes,
                chunk,
                every,
            } => bytes.chunks(chunk.max(1)).all(|piece| {
                let sent = stream.write_all(piece).is_ok();
                std::thread::sleep(every);
                sent
            }),
            Step::Delay(d) => {
                std::thread::sleep(d);
                true
            }
            Step::Hold(d) => {
                let _ = stream.set_read_timeout(Some(d));
                let mut sink = [0u8; 4096];
                loop {
                    match stream.read(&mut sink) {
                        Ok(0) => {
                            closed_by_client.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        Ok(_) => continue,
                        Err(_) => break,
                    }
                }
                let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
                true
            }
            Step::Close => false,
            Step::CloseIf(f) => !f(&last),
        };
        if !ok {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Reads one request; `None` when the client closed or timed out first, or it was too big.
fn read_request(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(pending, b"\r\n\r\n") {
            break i + 4;
        }
        if pending.len() > MAX_REQUEST_BYTES {
            return None;
        }
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        pending.extend_from_slice(&buf[..n]);
    };
    let head: Vec<u8> = pending.drain(..head_end).collect();
    let len = String::from_utf8_lossy(&head)
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    if len > MAX_REQUEST_BYTES {
        return None;
    }
    while pending.len() < len {
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        pending.extend_from_slice(&buf[..n]);
    }
    let body = pending.drain(..len).collect();
    Some((head, body))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An HTTP/1.1 response with `content-length`: `status` with its reason, the given headers,
/// and `body`.
pub fn http_response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

/// A 200 `application/json` reply with `body`.
pub fn json_response(body: &str) -> Vec<u8> {
    http_response(
        200,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
}

/// A 200 `text/event-stream` reply (close-delimited: `connection: close`) whose body is the
/// given raw SSE text.
pub fn sse_response(raw_events: &str) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    out.extend_from_slice(raw_events.as_bytes());
    out
}

/// The JSON-RPC result `result` (JSON text) for the request's id.
pub fn rpc_result(req: &Request, result: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        req.id_json().unwrap_or_else(|| "null".into())
    )
}

/// A responder that answers `initialize` like a minimal server, `notifications/*` with 202,
/// and `tools/call` with a text result `text`.
pub fn minimal_mcp(text: &'static str) -> Responder {
    Arc::new(move |req: &Request| match req.method().as_deref() {
        Some("initialize") => json_response(&rpc_result(
            req,
            r#"{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"0"}}"#,
        )),
        Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
        Some("tools/call") => json_response(&rpc_result(
            req,
            &format!(
                r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
                serde_json::Value::String(text.into())
            ),
        )),
        _ => http_response(400, &[], b"unexpected request"),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_a_request_and_sends_scripted_bytes() {
        let server = HostileServer::every_connection(vec![
            Step::ReadRequest,
            Step::Send(json_response("{}")),
            Step::Close,
        ])
        .unwrap();
        let mut c = TcpStream::connect(server.addr()).unwrap();
        c.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
            .unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(got.ends_with(b"\r\n\r\n{}"));
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].request_line(), "POST /mcp HTTP/1.1");
        assert_eq!(reqs[0].body, b"{}");
        assert_eq!(reqs[0].header("HOST").as_deref(), Some("x"));
    }
}
