//! The `machine` check: one op of the call machine against a server that the input scripts,
//! byte by byte: which reply each request gets (a canned one that reaches deep states, or raw
//! bytes), how the reply is split, when the connection closes or fails, when connects and
//! writes fail, and when the clock jumps.
//!
//! Whatever the input, the op must: end with exactly one `Done` and say nothing after it;
//! take a bounded number of steps; never ask to wait past its deadlines (each attempt's, plus
//! the short courtesy of a cancel); never send a written `tools/call` again after its
//! connection ended without a reply byte (the tool may have run); and leave a consistent
//! outcome (a call that is not a failure has an answer).

use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::machine::{Action, CallBuffers, Elicitation, Op, SlotConfig, SlotState};
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::era::EraSetting;
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind};
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_core::wire::jsonrpc::ListMethod;
use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

use super::VecBuf;

/// Per-attempt timeout of the fuzzed slot.
const TIMEOUT_MS: u64 = 5_000;
/// Most machine steps a fuzzed op may take.
const MAX_STEPS: usize = 20_000;

/// The fuzz input as a stream of decisions; an exhausted input answers with closes.
struct Script<'a> {
    data: &'a [u8],
}

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

/// The id of the JSON-RPC request in `req` (0 when it has none).
fn request_id(req: &[u8]) -> u64 {
    let Some(at) = req.windows(5).position(|w| w == b"\"id\":") else {
        return 0;
    };
    req[at + 5..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, &d| {
            n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        })
}

fn json_reply(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s-1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn sse_reply(events: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{events}").into_bytes()
}

/// A canned reply to the request with `id`, chosen by `pick`.
fn canned(pick: u8, id: u64) -> Vec<u8> {
    match pick % 20 {
        16 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"q":{{"method":"elicitation/create","params":{{"message":"m","requestedSchema":{{"type":"object","properties":{{"p":{{"type":"integer","default":1}}}}}}}}}}}},"requestState":"st"}}}}"#
        )),
        17 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{}},"serverInfo":{{"name":"f","version":"1"}}}}}}"#
        )),
        18 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"t","inputSchema":{{}},"execution":{{"taskSupport":"required"}},"annotations":{{"idempotentHint":true}}}}]}}}}"#
        )),
        19 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"task":{{"taskId":"t-2","status":"working","pollInterval":{}}}}}}}"#,
            u32::from(pick) * 3
        )),
        12 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"t-1","status":"working","pollIntervalMs":{},"resultType":"task"}}}}"#,
            u32::from(pick) * 7
        )),
        13 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"t-1","status":"working","resultType":"complete"}}}}"#
        )),
        14 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"t-1","status":"completed","result":{{"content":[{{"type":"text","text":"done sekrit-value"}}]}},"resultType":"complete"}}}}"#
        )),
        15 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"taskId":"t-1","status":"input_required","inputRequests":{{"a":{{"method":"elicitation/create"}}}},"resultType":"complete"}}}}"#
        )),
        0 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"f","version":"1"}}}}}}"#
        )),
        1 => b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
        2 => sse_reply(&format!(
            "id: e1\nretry: 5\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"hi sekrit-value\"}}]}}}}\n\n"
        )),
        3 => sse_reply(&format!(
            "id: e2\nretry: 10\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{id},\"progress\":1}}}}\n\n"
        )),
        4 => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
        5 => b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 0\r\n\r\n"
            .to_vec(),
        6 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"Unknown tool: x"}}}}"#
        )),
        7 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"a","inputSchema":{{}}}}],"nextCursor":"c1"}}}}"#
        )),
        8 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"b","inputSchema":{{}}}}]}}}}"#
        )),
        9 => json_reply(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"x"}}],"isError":true}}}}"#
        )),
        10 => b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{\"js\r\n"
            .to_vec(),
        _ => b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 0\r\ncontent-length: 2\r\n\r\nno".to_vec(),
    }
}

/// What the check's op is.
enum Kind {
    Call,
    List,
    Close,
}

pub fn machine(data: &[u8]) {
    let mut script = Script { data };
    let flags = script.byte().unwrap_or(0);
    let primary = Endpoint::parse_base("http://127.0.0.1:1").expect("endpoint");
    let fallback = Endpoint::parse_base("http://127.0.0.1:2").expect("endpoint");
    let mut cfg = SlotConfig::new("fuzz", primary, "primary");
    cfg.timeout_ms = TIMEOUT_MS;
    if flags & 1 != 0 {
        cfg.fallback = Some(fallback);
        cfg.fallback_label = "fallback";
    }
    cfg.idle_timeout_ms = (flags & 2 != 0).then_some(1_000);
    cfg.progress_extends_to_ms = (flags & 4 != 0).then_some(3 * TIMEOUT_MS);
    // The era, the version offered, and how elicitations are answered.
    let more = script.byte().unwrap_or(0);
    cfg.era = match more % 3 {
        0 => EraSetting::Auto,
        1 => EraSetting::Legacy,
        _ => EraSetting::Modern,
    };
    if more & 4 != 0 {
        cfg.version = ProtocolVersion::V2025_11_25;
    }
    cfg.elicitation = match (more >> 3) % 4 {
        0 => None,
        1 => Some(Elicitation::AcceptDefaults),
        2 => Some(Elicitation::Decline),
        _ => Some(Elicitation::Cancel),
    };
    let kind = match (flags >> 3) % 4 {
        0 | 1 => Kind::Call,
        2 => Kind::List,
        _ => Kind::Close,
    };
    let mut slot = SlotState::new(cfg.version, cfg.fallback.is_some());
    let (mut head, mut read) = (
        vec![0u8; 2048],
        vec![0u8; 64 + usize::from(flags >> 5) * 64],
    );
    let mut bufs = CallBuffers {
        request: VecBuf::new(4096),
        head: &mut head,
        read: &mut read,
        reply: VecBuf::new(8192),
        text: VecBuf::new(1024),
        error: VecBuf::new(512),
        raw: VecBuf::new(0),
    };
    let secrets = [b"sekrit-value".as_slice()];
    let args = Value::parse(br#"{"a":1}"#, JsonLimits::default()).ok();
    let mut items = 0usize;
    let cfg = &cfg;
    match kind {
        Kind::Call => {
            let mut op = Op::call(cfg, &mut bufs, &secrets, "t", args);
            drive(&mut op, &mut slot, &mut script, true);
            if op.outcome().is_ok() {
                assert!(
                    op.answer().is_some(),
                    "a call that did not fail has an answer"
                );
            }
        }
        Kind::List => {
            let mut op = Op::list(cfg, &mut bufs, &secrets, ListMethod::Tools, |_| items += 1);
            drive(&mut op, &mut slot, &mut script, false);
            let _ = op.list_outcome();
        }
        Kind::Close => {
            let mut op = Op::<VecBuf, &[u8]>::close(cfg, &mut bufs);
            drive(&mut op, &mut slot, &mut script, false);
        }
    }
    assert!(bufs.text.bytes().len() <= 1024 && bufs.reply.bytes().len() <= 8192);
    assert!(
        !bufs.text.bytes().windows(12).any(|w| w == b"sekrit-value"),
        "a secret reached the text"
    );
}

/// Runs `op` against the scripted server until `Done`, checking the promises on the way.
fn drive<F: FnMut(Option<(Value<'_>, &[u8])>)>(
    op: &mut Op<'_, VecBuf, &[u8], F>,
    slot: &mut SlotState,
    script: &mut Script<'_>,
    is_call: bool,
) {
    // Two attempts (primary, fallback), each its deadline (progress may stretch it to three
    // times), a retry-after wait inside it, and a courtesy cancel (or tasks/cancel) after each.
    let bound = 2 * (3 * TIMEOUT_MS + 1_000) + 1_000;
    let mut now = 0u64;
    let mut pending: Vec<u8> = Vec::new();
    let mut connected = false;
    // The last tools/call written, and whether any reply byte came back for it since.
    let mut call_written: Option<bool> = None;
    let mut call_may_have_run = false;
    // A server that says a tool is idempotent may get its call again after a broken stream.
    let mut idempotent_listed = false;
    let mut task_told = false;
    for step in 0.. {
        assert!(step < MAX_STEPS, "the op did not end in {MAX_STEPS} steps");
        let action = op.poll(slot, now);
        let _ = slot.take_changed();
        if matches!(
            action,
            Action::Connect { .. } | Action::Transmit | Action::Receive | Action::Sleep { .. }
        ) {
            assert!(
                op.timeout() <= bound,
                "{action:?} may wait until {} ms, past every deadline ({bound} ms)",
                op.timeout()
            );
        }
        match action {
            Action::Connect { target, .. } => {
                assert!(target == Target::Primary || target == Target::Fallback);
                if call_written == Some(false) {
                    call_may_have_run = true;
                }
                connected = false;
                match script.byte() {
                    None => op.handle_connect_failed(ConnectError::new(
                        ConnectErrorKind::Refused,
                        "script ended",
                    )),
                    Some(b) if b % 7 == 0 => op.handle_connect_failed(ConnectError::new(
                        ConnectErrorKind::Refused,
                        "refused",
                    )),
                    Some(b) if b % 11 == 0 => {
                        now = op.timeout();
                        op.handle_timeout(now);
                    }
                    Some(b) => {
                        connected = true;
                        op.handle_connected(b & 1 != 0);
                    }
                }
            }
            Action::Transmit => {
                assert!(connected, "transmit without a connection");
                let req = op.transmit().to_vec();
                let is_tools_call = req.windows(19).any(|w| w == b"\"method\":\"tools/call");
                if is_tools_call && !idempotent_listed {
                    assert!(
                        !call_may_have_run,
                        "a tools/call was sent again after its connection ended without a reply"
                    );
                }
                match script.byte() {
                    Some(b) if b % 13 == 0 => op.handle_sent(now, false),
                    Some(b) if b % 17 == 0 => {
                        now = op.timeout();
                        op.handle_timeout(now);
                    }
                    pick => {
                        if is_tools_call {
                            call_written = Some(false);
                        }
                        let id = request_id(&req);
                        pending = match pick {
                            Some(b) if b >= 0xF0 => {
                                let n = usize::from(script.byte().unwrap_or(0));
                                script.take(n).to_vec()
                            }
                            Some(b) => canned(b, id),
                            None => canned(0, id),
                        };
                        idempotent_listed |= pending.windows(14).any(|w| w == b"idempotentHint");
                        op.handle_sent(now, true);
                    }
                }
            }
            Action::Receive => {
                assert!(connected, "receive without a connection");
                let got_byte = |w: &mut Option<bool>| {
                    if *w == Some(false) {
                        *w = Some(true);
                    }
                };
                match script.byte() {
                    Some(b) if b % 8 == 1 => {
                        if call_written == Some(false) {
                            call_may_have_run = true;
                        }
                        op.handle_read_failed()
                    }
                    Some(b) if b % 8 == 2 => {
                        now = now.max(op.timeout());
                        op.handle_timeout(now);
                    }
                    // Time passes with nothing read (a spurious wake-up).
                    Some(b) if b % 8 == 3 => now = (now + u64::from(b)).min(op.timeout()),
                    Some(b) if !pending.is_empty() => {
                        let n = (usize::from(b) + 1)
                            .min(pending.len())
                            .min(op.read_buf().len());
                        op.read_buf()[..n].copy_from_slice(&pending[..n]);
                        pending.drain(..n);
                        got_byte(&mut call_written);
                        op.handle_read(now, n);
                    }
                    None if !pending.is_empty() => {
                        let n = pending.len().min(op.read_buf().len());
                        op.read_buf()[..n].copy_from_slice(&pending[..n]);
                        pending.drain(..n);
                        got_byte(&mut call_written);
                        op.handle_read(now, n);
                    }
                    _ => {
                        if call_written == Some(false) {
                            call_may_have_run = true;
                        }
                        op.handle_read(now, 0)
                    }
                }
            }
            Action::Recycle | Action::Close | Action::Park => {
                if action == Action::Park {
                    // What is left of the stream, fed by a drainer: never a panic, whatever
                    // the server sends next.
                    let mut tail = op.take_tail().expect("a parked connection has its tail");
                    let _ = tail.feed(&pending);
                    let n = usize::from(script.byte().unwrap_or(0));
                    let _ = tail.feed(script.take(n));
                }
                connected = false;
                pending.clear();
                if action != Action::Recycle && call_written == Some(false) {
                    call_may_have_run = true;
                }
                if call_written == Some(true) {
                    call_written = None;
                }
            }
            Action::Sleep { .. } => now = now.max(op.timeout()),
            Action::Respond { .. } => {
                // An answer to the server's own request: never a tool call.
                let req = op.transmit();
                assert!(
                    !req.windows(19).any(|w| w == b"\"method\":\"tools/call"),
                    "an answer to the server carried a tools/call"
                );
            }
            Action::Listen { .. } => {
                // Asked before a call's request goes out: it must bound its wait.
                assert!(op.timeout() >= now, "a listen's wait has a deadline");
            }
            Action::TaskStarted => {
                assert!(op.task_id().is_some(), "a task start names its task");
                assert!(!task_told, "a call becomes a task once");
                task_told = true;
            }
            Action::Report => {
                assert!(op.report().is_some(), "a report says how the attempt ended");
                // A new attempt (another server, or none): what may have run there stays
                // there; the fallback is another server.
                call_written = None;
                call_may_have_run = false;
            }
            Action::Done => {
                for _ in 0..3 {
                    assert_eq!(
                        op.poll(slot, now),
                        Action::Done,
                        "an op says nothing after Done"
                    );
                }
                if is_call {
                    assert!(
                        op.report().is_some_and(|r| r.last),
                        "a call ends on its last report"
                    );
                }
                return;
            }
        }
    }
}
