//! Shared by the reply benches: the reply a real server sends, our reply path (the same public
//! pieces `drive`'s call handler uses), and the pipelines a user of the peers gets.
#![allow(dead_code)]

use bytes::Bytes;
use futures_util::StreamExt;
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::redact::Redactor;
use verifi_mcp_core::wire::content;
use verifi_mcp_core::wire::exchange::{Exchange, Expect, OnMessage, ReplyLimits, Step, Verdict};
use verifi_mcp_core::wire::failure::{BufferName, Failure};
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_core::wire::jsonrpc::{self, Found, Outcome};

/// Bytes per socket read, as the issue says (one Ethernet MTU's worth).
pub const CHUNK: usize = 1500;
/// The request id the reply answers.
pub const ID: u64 = 7;

/// Ten secrets of the run: API tokens, a password, a cookie; two of them occur in the text.
#[path = "../secrets.rs"]
mod secrets;
pub use secrets::SECRETS;

/// One line group of nmap-like output: quotes, a tab, non-ASCII, and sometimes a secret.
fn nmap_block(i: usize) -> String {
    let host = i % 250 + 1;
    let mut s = format!(
        "Nmap scan report for host-{i}.lab.example (10.0.{}.{host})\nHost is up (0.00{}s latency).\nPORT     STATE SERVICE VERSION\n22/tcp   open  ssh     OpenSSH 9.6p1 Ubuntu 3ubuntu13 (Ubuntu Linux; protocol 2.0)\n| ssh-hostkey: \n|   256 3f:a1:9c:0d:77:2e:b4:41 (ECDSA)\n80/tcp   open  http    nginx 1.24.0\n|_http-title: \"Bienvenue — café résumé\" \u{1F512}\n443/tcp  open  ssl/https\n| ssl-cert: Subject: commonName=*.lab.example/organizationName=Ünïcødé GmbH\n|\tNot valid after:  2027-01-01T00:00:00\n",
        i % 256,
        i % 10
    );
    if i % 97 == 5 {
        s.push_str("|_http-auth: leaked token ");
        s.push_str(SECRETS[i % 2]);
        s.push('\n');
    }
    s
}

/// The JSON-RPC response to `tools/call` whose text makes the message about `size` bytes.
pub fn reply_json(size: usize) -> (Vec<u8>, String) {
    let escaped = |s: &str| serde_json::to_string(s).map_or(0, |e| e.len() - 2);
    let overhead = 120;
    let mut text = String::new();
    let mut len = overhead;
    for i in 0.. {
        let block = nmap_block(i);
        let n = escaped(&block);
        if len + n > size {
            break;
        }
        text.push_str(&block);
        len += n;
    }
    // Pad with plain ASCII to hit the size closely.
    text.push_str(&"x".repeat(size.saturating_sub(len)));
    let msg = serde_json::json!({
        "jsonrpc": "2.0",
        "id": ID,
        "result": {
            "content": [ { "type": "text", "text": text } ],
            "isError": false
        }
    });
    (serde_json::to_vec(&msg).expect("serialises"), text)
}

/// The whole reply as the TypeScript SDK server sends it: HTTP head, one chunk holding the
/// `message` event (id, data line), the last chunk. Returns (wire bytes, de-chunked body).
pub fn wire_reply(json: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut body = Vec::new();
    body.extend_from_slice(b"event: message\nid: 1f0c6a3e_0\ndata: ");
    body.extend_from_slice(json);
    body.extend_from_slice(b"\n\n");
    let mut wire = Vec::new();
    wire.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
connection: keep-alive\r\nmcp-session-id: 0b0f4cde-8a34-4b9e-9a9e-2f1c5d3e7a10\r\n\
date: Wed, 02 Dec 2026 13:48:33 GMT\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    wire.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
    wire.extend_from_slice(&body);
    wire.extend_from_slice(b"\r\n0\r\n\r\n");
    (wire, body)
}

/// The host adapter's buffer: a capped `Vec` that sizes itself once from the core's
/// `Sink::reserve` hint and never grows past its cap.
pub use verifi_mcp_core::buf::VecBuf;

/// What the machine's call handler does with each message: parse, find our response, flatten
/// its content through the streaming redactor: where the message lies, the text then taking
/// the reply's storage (the host's way, `in_place`), or into the text buffer (the copying
/// path, the edge's).
pub struct Handler<'x, B: Buf> {
    pub secrets: &'x [&'x str],
    pub text: &'x mut B,
    pub done: bool,
    pub in_place: bool,
}

impl<B: Buf> OnMessage for Handler<'_, B> {
    fn on_reply(
        &mut self,
        reply: &mut dyn Buf,
        len: usize,
        last_chance: bool,
    ) -> Result<Verdict, Failure> {
        let msg = reply.bytes().get(..len).unwrap_or(&[]);
        // What the machine's handler does: small messages by copy.
        if !self.in_place || len < content::IN_PLACE_FROM {
            return self.on_message(msg, last_chance);
        }
        // The big text is checked as it is written over (the machine's way).
        let (value, deferred) = Value::parse_deferring(msg, JsonLimits::default())?;
        let value = value.knowing(deferred.ends());
        let Found::Match(Outcome::Result(result)) = jsonrpc::find_response(value, ID)? else {
            return Ok(Verdict::Continue);
        };
        let plan = content::InPlacePlan::new(msg, result)
            .ok()
            .flatten()
            .expect("planned in place");
        assert!(plan.covers(&deferred), "every deferred string is a text");
        let mut redactor = Redactor::new(self.secrets);
        let (Some(text), Some(reply)) = (self.text.vec_buf(), reply.vec_buf()) else {
            panic!("host buffers")
        };
        plan.run_checking(reply, &mut redactor, text, &deferred)?
            .map_err(|_| Failure::Rpc(jsonrpc::RpcDecodeError::NotAnObject))?;
        self.done = true;
        Ok(Verdict::Done)
    }

    fn on_message(&mut self, msg: &[u8], _last_chance: bool) -> Result<Verdict, Failure> {
        let (value, ends) = Value::parse_noting(msg, JsonLimits::default())?;
        let value = value.knowing(&ends);
        let Found::Match(Outcome::Result(result)) = jsonrpc::find_response(value, ID)? else {
            return Ok(Verdict::Continue);
        };
        self.text.clear();
        let mut redactor = Redactor::new(self.secrets);
        let mut sink = redactor.sink(&mut *self.text);
        content::flatten(result, &mut sink).map_err(|e| match e {
            content::ContentError::Overflow(o) => Failure::TooLarge(BufferName::Text, o),
            _ => Failure::Rpc(jsonrpc::RpcDecodeError::NotAnObject),
        })?;
        sink.finish()
            .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
        self.done = true;
        Ok(Verdict::Done)
    }
}

/// Our whole reply path over `wire`, fed in [`CHUNK`]-byte reads, as the host runs it (the
/// text flattened in place). Returns the text length.
pub fn ours(wire: &[u8], head: &mut [u8], reply: &mut VecBuf, text: &mut VecBuf) -> usize {
    ours_with(wire, head, reply, text, true)
}

/// [`ours`], or with `in_place` false the copying path (text buffer apart from the reply).
pub fn ours_with(
    wire: &[u8],
    head: &mut [u8],
    reply: &mut VecBuf,
    text: &mut VecBuf,
    in_place: bool,
) -> usize {
    reply.clear();
    let mut ex = Exchange::new(head, Expect::Response, true, ReplyLimits::default());
    let mut handler = Handler {
        secrets: &SECRETS,
        text,
        done: false,
        in_place,
    };
    for chunk in wire.chunks(CHUNK) {
        let (_, step) = ex.feed(chunk, reply, &mut handler).expect("valid reply");
        if step != Step::NeedMore {
            break;
        }
    }
    assert!(handler.done, "the response came");
    handler.text.len()
}

/// The floor: `memchr` over the same reads.
pub fn floor(wire: &[u8]) -> usize {
    wire.chunks(CHUNK)
        .map(|c| memchr::memchr(0, c).unwrap_or(c.len()))
        .sum()
}

/// The body as a peer's HTTP client hands it on (framing already removed by hyper): the
/// same read grid, zero-copy slices of one `Bytes`.
pub fn body_stream(
    body: &Bytes,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + '_ {
    let n = body.len();
    futures_util::stream::iter(
        (0..n)
            .step_by(CHUNK)
            .map(move |a| Ok(body.slice(a..(a + CHUNK).min(n)))),
    )
}

/// What a user of the peers writes after getting the event's data: `serde_json` to a
/// `Value`, our response by id, the text blocks joined, each secret `replace`d.
pub fn flatten_serde(data: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    if v.get("id")?.as_u64()? != ID {
        return None;
    }
    let blocks = v.get("result")?.get("content")?.as_array()?;
    let mut text = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(|t| t.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    for s in SECRETS {
        text = text.replace(s, "[REDACTED]");
    }
    Some(text)
}

/// rmcp's transport pieces: `sse-stream` over the body, then [`flatten_serde`].
pub fn rmcp_style(body: &Bytes) -> usize {
    embassy_futures::block_on(async {
        let mut events = sse_stream::SseStream::from_bytes_stream(body_stream(body));
        while let Some(ev) = events.next().await {
            let ev = ev.expect("valid event stream");
            if let Some(text) = ev.data.as_deref().and_then(flatten_serde) {
                return text.len();
            }
        }
        panic!("no response in the stream")
    })
}

/// `eventsource-stream` over the body, then [`flatten_serde`].
pub fn eventsource_style(body: &Bytes) -> usize {
    use eventsource_stream::Eventsource;
    embassy_futures::block_on(async {
        let mut events = body_stream(body).eventsource();
        while let Some(ev) = events.next().await {
            let ev = ev.expect("valid event stream");
            if let Some(text) = flatten_serde(&ev.data) {
                return text.len();
            }
        }
        panic!("no response in the stream")
    })
}

/// Every pipeline must produce the same text (checked once before measuring).
pub fn expected_text(text: &str) -> String {
    let mut t = text.to_owned();
    for s in SECRETS {
        t = t.replace(s, "[REDACTED]");
    }
    t
}

/// The product's reply path: a `tools/call` driven through the machine's own [`Op`] (its call
/// handler, its buffers' limits, its tail read), with the host adapter's buffer policy (pooled
/// buffers emptied for each call and given back when they grew past [`KEEP_BYTES`], so a big
/// reply gets fresh storage every call, as in `adapters/host/src/slot.rs`) and its text
/// hand-out (a big text moved out with `take_utf8`, a small one copied).
///
/// The slot is an old-era one whose handshake was done once at [`Product::new`]; each
/// [`Product::call`] is one call's request and reply, the reply's id patched to the id the op
/// wrote (the template carries it in [`ID_WIDTH`] bytes, padded with JSON whitespace).
pub struct Product {
    cfg: verifi_mcp_core::machine::SlotConfig<'static>,
    slot: verifi_mcp_core::machine::SlotState,
    pool: [VecBuf; 4],
    head: Vec<u8>,
    read: Vec<u8>,
    wire: Vec<u8>,
    id_at: usize,
}

/// The host's `KEEP_BYTES`: pooled storage past this is given back after a call.
pub const KEEP_BYTES: usize = 64 * 1024;
/// The host's default reply cap (16 MiB) and request cap.
const REPLY_CAP: usize = 16 << 20;
/// Bytes the reply template keeps for the response id.
pub const ID_WIDTH: usize = 12;

impl Product {
    /// A slot with its handshake done, replying `json` (whose id is [`ID`]) as an SSE reply.
    pub fn new(json: &[u8]) -> Self {
        use verifi_mcp_core::machine::{SlotConfig, SlotState};
        use verifi_mcp_core::wire::endpoint::Endpoint;
        let endpoint = Endpoint::parse_base("http://127.0.0.1:8000/mcp").expect("endpoint");
        let mut cfg = SlotConfig::new("kali", endpoint, "http://127.0.0.1:8000/mcp");
        cfg.era = verifi_mcp_core::wire::era::EraSetting::Legacy;
        let slot = SlotState::new(cfg.version, false);
        // The id as `7` followed by spaces (JSON whitespace), so another id fits in place.
        let pattern = format!("\"id\":{ID},");
        let at = find(json, pattern.as_bytes()).expect("the reply's id");
        let mut padded = json.get(..at + 5).expect("id").to_vec();
        padded.extend_from_slice(format!("{ID:<ID_WIDTH$}").as_bytes());
        padded.extend_from_slice(json.get(at + pattern.len() - 1..).expect("rest"));
        let (wire, _) = wire_reply(&padded);
        let id_at = find(&wire, b"\"id\":").expect("id in wire") + 5;
        let mut p = Product {
            cfg,
            slot,
            pool: Default::default(),
            head: vec![0; 16 * 1024],
            read: vec![0; 16 * 1024],
            wire,
            id_at,
        };
        p.handshake();
        p
    }

    fn handshake(&mut self) {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}}"#;
        let init = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
mcp-session-id: 0b0f4cde-8a34-4b9e-9a9e-2f1c5d3e7a10\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let (mut request, mut reply, mut text, mut error) = (
            VecBuf::new(REPLY_CAP),
            VecBuf::new(REPLY_CAP),
            VecBuf::new(REPLY_CAP),
            VecBuf::new(4096),
        );
        let mut bufs = verifi_mcp_core::machine::CallBuffers {
            request: std::mem::take(&mut request),
            head: &mut self.head,
            read: &mut self.read,
            reply: std::mem::take(&mut reply),
            text: std::mem::take(&mut text),
            error: std::mem::take(&mut error),
            raw: VecBuf::new(0),
        };
        let secrets: [&str; 0] = [];
        let mut op =
            verifi_mcp_core::machine::Op::call(&self.cfg, &mut bufs, &secrets, "warm", None);
        // initialize, notifications/initialized, then the call itself (a short answer).
        let mut replies = vec![
            init.into_bytes(),
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
        ]
        .into_iter();
        let mut pending: Vec<u8> = Vec::new();
        let mut now = 0;
        loop {
            use verifi_mcp_core::machine::Action;
            match op.poll(&mut self.slot, now) {
                Action::Connect { .. } => op.handle_connected(false),
                Action::Transmit => {
                    pending = replies.next().unwrap_or_else(|| {
                        let id = request_id(op.transmit());
                        let body = format!(
                            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}"
                        );
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                        .into_bytes()
                    });
                    op.handle_sent(now, true);
                }
                Action::Receive => {
                    let n = pending.len().min(op.read_buf().len());
                    op.read_buf()[..n].copy_from_slice(&pending[..n]);
                    pending.drain(..n);
                    op.handle_read(now, n);
                }
                Action::Sleep { .. } => now = op.timeout(),
                Action::Done => break,
                _ => {}
            }
        }
        assert!(op.outcome().is_ok(), "the handshake: {:?}", op.outcome());
    }

    /// One call: the request written, the reply fed in [`CHUNK`]-byte reads, the text handed
    /// out as the host does. Returns the text.
    pub fn call(&mut self) -> String {
        use verifi_mcp_core::machine::{Action, CallBuffers, Op};
        let limits = [REPLY_CAP, REPLY_CAP, REPLY_CAP, 4096];
        for (b, limit) in self.pool.iter_mut().zip(limits) {
            b.reuse(limit, KEEP_BYTES);
        }
        let [request, reply, text, error] = &mut self.pool;
        let mut bufs = CallBuffers {
            request: std::mem::take(request),
            head: &mut self.head,
            read: &mut self.read,
            reply: std::mem::take(reply),
            text: std::mem::take(text),
            error: std::mem::take(error),
            raw: VecBuf::new(0),
        };
        let args = verifi_mcp_core::wire::json::Value::parse(
            br#"{"command":"nmap -sV 10.0.0.0/24"}"#,
            verifi_mcp_core::wire::json::JsonLimits::default(),
        )
        .ok();
        let mut op = Op::call(&self.cfg, &mut bufs, &SECRETS, "run_command", args);
        let mut sent = 0;
        let mut now = 1;
        loop {
            match op.poll(&mut self.slot, now) {
                Action::Connect { .. } => op.handle_connected(false),
                Action::Transmit => {
                    let id = request_id(op.transmit());
                    let digits = id.to_string();
                    let slot = self
                        .wire
                        .get_mut(self.id_at..self.id_at + ID_WIDTH)
                        .expect("id slot");
                    slot.fill(b' ');
                    slot[..digits.len()].copy_from_slice(digits.as_bytes());
                    sent = 0;
                    op.handle_sent(now, true);
                }
                Action::Receive => {
                    let rest = self.wire.get(sent..).unwrap_or(&[]);
                    let n = rest.len().min(CHUNK).min(op.read_buf().len());
                    op.read_buf()[..n].copy_from_slice(&rest[..n]);
                    sent += n;
                    op.handle_read(now, n);
                }
                Action::Sleep { .. } => now = op.timeout(),
                Action::Done => break,
                _ => {}
            }
        }
        assert!(op.outcome().is_ok(), "the call: {:?}", op.outcome());
        drop(op);
        let CallBuffers {
            mut request,
            mut reply,
            mut text,
            mut error,
            ..
        } = bufs;
        let out = text.hand_out(text.len(), KEEP_BYTES);
        for b in [&mut request, &mut reply, &mut text, &mut error] {
            b.reuse(0, KEEP_BYTES);
        }
        self.pool = [request, reply, text, error];
        out
    }
}

/// The JSON-RPC id of the request in `bytes` (head and body).
fn request_id(bytes: &[u8]) -> u64 {
    let at = find(bytes, b"\"id\":").expect("an id") + 5;
    bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0, |n, d| n * 10 + u64::from(d - b'0'))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}
