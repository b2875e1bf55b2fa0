//! The properties every fuzz target asserts, in ONE place.
//!
//! Compiled twice: by each cargo-fuzz target in `fuzz/` (nightly, libFuzzer feeds it inputs)
//! and by `core/tests/fuzz_replay.rs` (stable, replays every file of `fuzz/corpus/<target>/`),
//! so a crash once found stays fixed without nightly. Every check takes the raw input bytes
//! (corpus files are real replies, unchanged); where feeding order matters, the first bytes of
//! the input also choose the split points of a chunked run ([`plan`]), and the result must equal
//! the whole-input run and (for small inputs) the byte-by-byte run.
//!
//! A check panics (with what broke) on a violated property; the core itself must never panic.
#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::OnceLock;

// HOST_ONLY: `#[cfg_attr(test, cfg(feature = "std"))]` marks what needs the core's `std` (its
// `VecBuf`, the in-place reply paths). It is on in the fuzz targets (not `test`: they build the
// core with `std`, and never read the condition, which names a feature of the core's) and in
// the replay with `std`; off in the replay of the edge's build (the core without `std`:
// scripts/edge-tests.sh), which then uses the tests' own `VecBuf`.
#[cfg_attr(test, cfg(feature = "std"))]
pub use verifi_mcp_core::buf::VecBuf;
#[cfg(test)]
#[cfg_attr(test, cfg(not(feature = "std")))]
#[path = "../support/vec_buf.rs"]
mod vec_buf;
#[cfg(test)]
#[cfg_attr(test, cfg(not(feature = "std")))]
pub use vec_buf::VecBuf;
use verifi_mcp_core::buf::{Buf, Sink};
use verifi_mcp_core::harness::exec::{exec_outcome, unwrap_run_command};
use verifi_mcp_core::harness::redact::{MARKER, MIN_SECRET_LEN, Redactor, redact};
use verifi_mcp_core::harness::slots::Manifest;
use verifi_mcp_core::wire::endpoint::{Endpoint, Scheme};
use verifi_mcp_core::wire::http::{Decoded, Framing, ResponseDecoder, ResponseLimits};
use verifi_mcp_core::wire::json::{JsonLimits, JsonStr, Kind, Value};
use verifi_mcp_core::wire::sse::{EventKind, MAX_EVENT_ID, SseDecoder, SseLimits, SseStep};

/// A check: takes one input, panics on a violated property.
pub type Check = fn(&[u8]);

/// Every target, by its corpus folder name, with its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("http_response", http_response),
    ("sse", sse),
    ("json", json),
    ("exchange", exchange),
    ("redactor", redactor),
    ("run_command", run_command),
    ("endpoint", endpoint),
    ("manifest", manifest),
    ("machine", machine),
];

mod machine;
pub use machine::machine;

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// Chunk sizes for a split run, chosen by the first (up to) four bytes of the input: small
/// pieces (1..=16) for bytes below 0x80, larger ones (1..=128) above; cycled over the input.
pub fn plan(data: &[u8]) -> Vec<usize> {
    let sizes: Vec<usize> = data
        .iter()
        .take(4)
        .map(|&b| {
            if b < 0x80 {
                usize::from(b % 16) + 1
            } else {
                usize::from(b - 0x80) + 1
            }
        })
        .collect();
    if sizes.is_empty() { vec![1] } else { sizes }
}

/// `data` cut into pieces of the given sizes, cycled.
pub fn split<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].min(rest.len());
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
        i += 1;
    }
    out
}

/// The ways every streaming check feeds its input: whole, by the plan, and byte by byte
/// (the last only for inputs small enough to keep the fuzzer fast).
fn feedings(data: &[u8]) -> Vec<(&'static str, Vec<&[u8]>)> {
    let mut ways = vec![("whole", vec![data]), ("planned", split(data, &plan(data)))];
    if data.len() <= 2048 {
        ways.push(("bytewise", split(data, &[1])));
    }
    ways
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    if n.is_empty() {
        return Some(0);
    }
    h.windows(n.len()).position(|w| w == n)
}

fn unescape(s: JsonStr<'_>) -> Vec<u8> {
    let mut b = VecBuf::new(usize::MAX);
    s.unescape_into(&mut b).expect("unbounded sink");
    b.into_vec()
}

// ---------------------------------------------------------------------------------------------
// http_response

#[derive(Debug, PartialEq, Eq)]
enum HttpEv {
    Head(String),
    Body(Vec<u8>),
    End,
    Err(String),
    Finish(String),
}

const HTTP_MAX_HEAD: usize = 2048;
const HTTP_MAX_BODY: u64 = 1 << 16;

fn http_run(chunks: &[&[u8]]) -> Vec<HttpEv> {
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let mut storage = vec![0u8; HTTP_MAX_HEAD];
    let mut dec = ResponseDecoder::new(
        &mut storage,
        ResponseLimits {
            max_head_bytes: HTTP_MAX_HEAD,
            max_body_bytes: HTTP_MAX_BODY,
        },
    );
    let mut evs: Vec<HttpEv> = Vec::new();
    let mut body_total = 0u64;
    let mut framing = None;
    let mut ended = false;
    let mut calls = 0usize;
    let bound = 4 * total + 8 * chunks.len() + 64;
    'feed: for chunk in chunks {
        let mut rest: &[u8] = chunk;
        loop {
            if ended && rest.is_empty() {
                break;
            }
            calls += 1;
            assert!(calls <= bound, "decode made no progress ({calls} calls)");
            let (n, d) = match dec.decode(rest) {
                Ok(x) => x,
                Err(e) => {
                    evs.push(HttpEv::Err(format!("{e:?}")));
                    // Display must not panic either.
                    let _ = e.to_string();
                    break 'feed;
                }
            };
            assert!(n <= rest.len(), "used {n} of {} bytes", rest.len());
            assert!(!ended || n == rest.len() || matches!(d, Decoded::NeedMore));
            rest = &rest[n..];
            match d {
                Decoded::NeedMore => {
                    if rest.is_empty() {
                        break;
                    }
                    assert!(n > 0, "NeedMore without using any of {} bytes", rest.len());
                }
                Decoded::Head(h) => {
                    assert!(!ended, "a head after End");
                    assert!((200..=599).contains(&h.status), "status {}", h.status);
                    if let Some(id) = &h.session_id {
                        assert!(
                            id.bytes().all(|b| b.is_ascii_graphic()),
                            "session id {id:?} not visible ASCII"
                        );
                    }
                    framing = Some(h.framing);
                    evs.push(HttpEv::Head(format!("{h:?}")));
                }
                Decoded::Body(b) => {
                    assert!(framing.is_some(), "body before head");
                    assert!(!ended, "body after End");
                    body_total += b.len() as u64;
                    match evs.last_mut() {
                        Some(HttpEv::Body(acc)) => acc.extend_from_slice(b),
                        _ => evs.push(HttpEv::Body(b.to_vec())),
                    }
                }
                Decoded::End => {
                    assert!(!ended, "End twice");
                    assert!(framing.is_some(), "End before head");
                    if let Some(Framing::Length(n)) = framing {
                        assert_eq!(body_total, n, "length-framed body ended early");
                    }
                    if framing == Some(Framing::Empty) {
                        assert_eq!(body_total, 0, "an empty-framed response has no body");
                    }
                    ended = true;
                    evs.push(HttpEv::End);
                }
            }
        }
    }
    assert!(
        body_total <= HTTP_MAX_BODY,
        "body {body_total} over its cap"
    );
    assert_eq!(dec.body_bytes(), body_total, "body_bytes() disagrees");
    if !matches!(evs.last(), Some(HttpEv::Err(_))) {
        let f = dec.finish();
        if let Ok(true) = f {
            assert_eq!(framing, Some(Framing::Close), "EOF ended a non-close body");
        }
        evs.push(HttpEv::Finish(format!("{f:?}")));
    }
    evs
}

/// HTTP response decoding (head + body framing): whole, planned and byte-wise feeding give the
/// same head, body, end and error; progress on every call; caps hold; framing is honoured.
pub fn http_response(data: &[u8]) {
    let mut first: Option<Vec<HttpEv>> = None;
    for (how, chunks) in feedings(data) {
        let evs = http_run(&chunks);
        match &first {
            None => first = Some(evs),
            Some(whole) => assert_eq!(&evs, whole, "{how} feeding differs from whole"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sse

const SSE_MAX_EVENT: usize = 512;

#[derive(Debug, PartialEq, Eq)]
enum SseEv {
    Event(bool, Vec<u8>),
    Err,
    State {
        last_id: Option<String>,
        saw_id: bool,
        retry: Option<u32>,
    },
}

fn kind_is_message(k: EventKind) -> bool {
    matches!(k, EventKind::Message)
}

fn sse_run(chunks: &[&[u8]]) -> Vec<SseEv> {
    let mut dec = SseDecoder::new(SseLimits {
        max_event_bytes: SSE_MAX_EVENT,
    });
    let mut data = VecBuf::new(1 << 16);
    let mut evs = Vec::new();
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let bound = 2 * total + chunks.len() + 8;
    let mut calls = 0usize;
    'feed: for chunk in chunks {
        let mut rest: &[u8] = chunk;
        while !rest.is_empty() {
            calls += 1;
            assert!(calls <= bound, "feed made no progress");
            match dec.feed(rest, &mut data) {
                Ok((n, step)) => {
                    assert!(n <= rest.len());
                    rest = &rest[n..];
                    match step {
                        SseStep::NeedMore => assert!(rest.is_empty(), "NeedMore with input left"),
                        SseStep::Event(k) => {
                            assert!(n > 0, "an event from no bytes");
                            assert!(!data.is_empty(), "an event with empty data");
                            assert!(data.len() <= SSE_MAX_EVENT, "event over its cap");
                            evs.push(SseEv::Event(kind_is_message(k), data.bytes().to_vec()));
                            data.clear();
                        }
                    }
                }
                Err(e) => {
                    let _ = e.to_string();
                    assert!(data.is_empty(), "a failed event left its bytes in data");
                    evs.push(SseEv::Err);
                    break 'feed;
                }
            }
        }
    }
    dec.finish(&mut data);
    assert!(data.is_empty(), "finish left partial event data");
    if evs.last() != Some(&SseEv::Err) {
        evs.push(SseEv::State {
            last_id: dec.last_event_id().map(str::to_owned),
            saw_id: dec.saw_event_id(),
            retry: dec.retry_ms(),
        });
    }
    evs
}

/// A plain WHATWG event-stream reader over the whole input (quadratic is fine), with the
/// decoder's documented choices: events with empty data are not reported, an `id` longer than
/// [`MAX_EVENT_ID`] or not UTF-8 gives no last id, `retry` past `u32` is ignored, and data over
/// the cap is an error as soon as the event's data passes it.
fn sse_reference(input: &[u8]) -> Vec<SseEv> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    // Lines with their terminated flag.
    let mut lines: Vec<(&[u8], bool)> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\r' => {
                lines.push((&input[start..i], true));
                if input.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            b'\n' => {
                lines.push((&input[start..i], true));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < input.len() {
        lines.push((&input[start..], false));
    }
    let mut evs = Vec::new();
    let mut data: Option<Vec<u8>> = None; // None: no data line yet in this event
    let mut event_type: Vec<u8> = Vec::new();
    let mut id_buffer: Option<Vec<u8>> = None;
    let mut last_id: Option<Vec<u8>> = None;
    let mut retry: Option<u32> = None;
    for (line, terminated) in lines {
        if line.is_empty() {
            last_id.clone_from(&id_buffer);
            if let Some(d) = data.take()
                && !d.is_empty()
            {
                let msg = event_type.is_empty() || event_type == b"message";
                evs.push(SseEv::Event(msg, d));
            }
            event_type.clear();
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        // An unterminated last line still adds its data once its colon is in (the decoder
        // streams data bytes), which matters for the size cap only.
        if name == b"data" && (terminated || line.len() > name.len()) {
            let d = match data.as_mut() {
                Some(d) => {
                    d.push(b'\n');
                    d
                }
                None => data.insert(Vec::new()),
            };
            d.extend_from_slice(value);
            if d.len() > SSE_MAX_EVENT {
                evs.push(SseEv::Err);
                return evs;
            }
        }
        if !terminated {
            break;
        }
        match name {
            b"event" => event_type = value.to_vec(),
            b"id" if !value.contains(&0) => id_buffer = Some(value.to_vec()),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(n) = std::str::from_utf8(value).unwrap_or("x").parse::<u32>() {
                    retry = Some(n);
                }
            }
            _ => {}
        }
    }
    let usable = last_id
        .as_ref()
        .filter(|v| !v.is_empty() && MAX_EVENT_ID.checked_sub(v.len()).is_some())
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(str::to_owned);
    evs.push(SseEv::State {
        last_id: usable,
        saw_id: last_id.is_some(),
        retry,
    });
    evs
}

/// SSE decoding: whole, planned and byte-wise feeding agree with each other and with the
/// reference reader; every event is non-empty and under its cap; `finish` leaves no data.
pub fn sse(data: &[u8]) {
    let expected = sse_reference(data);
    for (how, chunks) in feedings(data) {
        let got = sse_run(&chunks);
        assert_eq!(
            got, expected,
            "{how} feeding differs from the reference reader"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// json

/// True when this build's serde_json keeps number text and member order (the fuzz crate
/// enables `arbitrary_precision` and `preserve_order`; the workspace's dev-dependency does not),
/// so its compact form can be compared byte for byte with `write_compact`.
fn serde_is_exact() -> bool {
    static EXACT: OnceLock<bool> = OnceLock::new();
    *EXACT.get_or_init(|| {
        let probe = r#"{"b":1e2,"a":-0}"#;
        serde_json::from_str::<serde_json::Value>(probe)
            .ok()
            .and_then(|v| serde_json::to_string(&v).ok())
            .is_some_and(|s| s == probe)
    })
}

fn compact(v: Value<'_>) -> Vec<u8> {
    let mut out = VecBuf::new(usize::MAX);
    v.write_compact(&mut out).expect("unbounded sink");
    out.into_vec()
}

/// Walks every value (no recursion): accessors agree with each other and never panic.
/// Returns whether any object has a duplicate (unescaped) key.
fn walk(root: Value<'_>) -> bool {
    let mut dup = false;
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        let raw = v.raw();
        let first = raw.first().copied();
        match v.kind() {
            Kind::Null => assert!(v.is_null() && raw == b"null"),
            Kind::Bool => assert_eq!(v.as_bool(), Some(raw == b"true")),
            Kind::Number => {
                let text = std::str::from_utf8(raw).expect("numbers are ASCII");
                let integer = !text.contains(['.', 'e', 'E']);
                let want_u = if integer {
                    text.parse::<u64>().ok()
                } else {
                    None
                };
                let want_i = if integer {
                    text.parse::<i64>().ok()
                } else {
                    None
                };
                assert_eq!(v.as_u64(), want_u, "as_u64 of {text}");
                assert_eq!(v.as_i64(), want_i, "as_i64 of {text}");
            }
            Kind::String => {
                assert_eq!(first, Some(b'"'));
                let s = v.as_str().expect("a string value has as_str");
                assert_eq!(s.raw(), &raw[1..raw.len() - 1]);
                let un = unescape(s);
                if let Some(p) = s.as_plain() {
                    assert_eq!(p.as_bytes(), s.raw(), "as_plain is the raw text");
                    assert_eq!(un, s.raw(), "plain text unescapes to itself");
                }
                let un = String::from_utf8(un).expect("unescaped text is UTF-8");
                if !un.contains('\u{FFFD}') {
                    assert!(s.eq_str(&un), "eq_str of its own unescaped text");
                }
                assert!(
                    !s.eq_str(&format!("{un}\u{1}")),
                    "eq_str with an extra char"
                );
            }
            Kind::Array => {
                assert_eq!(first, Some(b'['));
                assert!(v.as_str().is_none() && v.members().next().is_none());
                stack.extend(v.elements());
            }
            Kind::Object => {
                assert_eq!(first, Some(b'{'));
                assert!(v.elements().next().is_none());
                let mut seen: HashSet<Vec<u8>> = HashSet::new();
                for (k, m) in v.members() {
                    let key = unescape(k);
                    if let Ok(key) = std::str::from_utf8(&key)
                        && !key.contains('\u{FFFD}')
                    {
                        let got = v.get(key).expect("get finds a member's key");
                        if seen.contains(key.as_bytes()) {
                            assert_ne!(got.raw().as_ptr(), m.raw().as_ptr(), "get gives the first");
                        } else {
                            assert_eq!(got.raw().as_ptr(), m.raw().as_ptr(), "get gives the first");
                        }
                    }
                    dup |= !seen.insert(key);
                    stack.push(m);
                }
            }
        }
    }
    dup
}

fn has_surrogate_escape(data: &[u8]) -> bool {
    data.windows(3)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && matches!(w[2], b'd' | b'D'))
}

/// The JSON scanner: accessors are consistent; `write_compact` parses back to the same value
/// and is a fixed point; it equals serde_json's compact form when serde_json accepts the input
/// (byte for byte when serde_json keeps number text and order); strict agreement on validity.
pub fn json(data: &[u8]) {
    // The host's in-place paths exist only with `std` (see `HOST_ONLY`).
    #[cfg_attr(test, cfg(feature = "std"))]
    deferred_is_parse(data);
    #[cfg_attr(test, cfg(feature = "std"))]
    noted_is_parse(data);
    let parsed = Value::parse(data, JsonLimits::default());
    let ours = parsed.as_ref().ok().copied();
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    match (&ours, &theirs) {
        (None, Ok(_)) => {
            let e = parsed.as_ref().expect_err("an error");
            // serde_json counts depth a little differently; everything else it takes, we take.
            assert!(
                matches!(
                    e.kind,
                    verifi_mcp_core::wire::json::JsonErrorKind::TooDeep { .. }
                ),
                "serde_json accepts what we reject: {e:?}"
            );
        }
        (Some(_), Err(e)) if serde_is_exact() && !has_surrogate_escape(data) && !e.is_eof() => {
            // With exact numbers serde_json rejects only lone surrogates and depth.
            assert!(
                e.to_string().contains("recursion"),
                "we accept what serde_json rejects: {e}"
            );
        }
        _ => {}
    }
    if let Err(e) = &parsed {
        let _ = e.to_string();
        assert!(e.offset <= data.len(), "error offset past the input");
        return;
    }
    let Some(v) = ours else { return };
    #[cfg_attr(test, cfg(feature = "std"))]
    in_place_is_the_copy(data);
    let dup = walk(v);
    let out = compact(v);
    let again = Value::parse(&out, JsonLimits::default())
        .unwrap_or_else(|e| panic!("write_compact output does not parse: {e:?}"));
    assert_eq!(again.kind(), v.kind());
    assert_eq!(compact(again), out, "write_compact is not a fixed point");
    if let Ok(t) = theirs {
        let back: serde_json::Value =
            serde_json::from_slice(&out).expect("serde_json takes our compact form");
        assert_eq!(back, t, "compact form is another value");
        if serde_is_exact() && !dup {
            let s = serde_json::to_string(&t).expect("serde_json writes");
            assert_eq!(
                String::from_utf8_lossy(&out),
                s,
                "write_compact differs from serde_json's compact form"
            );
        }
    }
}

/// Any bytes as (part of) a big text block, which the host's handler checks as it writes it
/// over its message (`Value::parse_deferring`, `InPlacePlan::run_checking`): exactly
/// `Value::parse`'s error when the message is not JSON, else the copy's text. The bytes come
/// repeated (an error inside the part the parse checks before deferring) and after 5 000
/// plain bytes (an error only the writer sees).
#[cfg_attr(test, cfg(feature = "std"))]
fn deferred_is_parse(data: &[u8]) {
    use verifi_mcp_core::wire::content::{self, InPlacePlan};
    if data.is_empty() {
        return;
    }
    const SECRETS: [&str; 2] = ["abcd", "hunter2-secret"];
    let repeated: Vec<u8> = data
        .iter()
        .copied()
        .cycle()
        .take(4200 + data.len())
        .collect();
    let late: Vec<u8> = [&b"ab\\n".repeat(1250)[..], data].concat();
    for text in [repeated, late] {
        let mut msg =
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#.to_vec();
        msg.extend_from_slice(&text);
        msg.extend_from_slice(br#""}],"isError":false}}"#);
        let exact = Value::parse(&msg, JsonLimits::default());
        let (v, deferred) = match Value::parse_deferring(&msg, JsonLimits::default()) {
            Ok(p) => p,
            Err(e) => {
                assert_eq!(
                    Err(e),
                    exact.map(|_| ()),
                    "the deferring parse's error is parse's"
                );
                continue;
            }
        };
        // As the machine's handler does: the walks cross the noted ends at once.
        let v = v.knowing(deferred.ends());
        let Some(result) = v.get("result") else {
            continue;
        };
        let Ok(Some(plan)) = InPlacePlan::new(&msg, result) else {
            continue;
        };
        if !plan.covers(&deferred) {
            continue;
        }
        let mut reply = VecBuf::new(1 << 20);
        reply.put(&msg).expect("fits");
        let mut text = VecBuf::new(1 << 20);
        let mut r = Redactor::new(&SECRETS);
        let got = plan.run_checking(&mut reply, &mut r, &mut text, &deferred);
        match exact {
            Err(e) => assert_eq!(
                got.map(|_| ()),
                Err(e),
                "checked as written: not parse's error"
            ),
            Ok(v) => {
                let mut copy = VecBuf::new(1 << 20);
                let mut r = Redactor::new(&SECRETS);
                let mut sink = r.sink(&mut copy);
                let copied = content::flatten(v.get("result").expect("result"), &mut sink)
                    .and_then(|f| Ok(sink.finish().map(|_| f)?));
                assert_eq!(got.expect("valid"), copied);
                assert_eq!(
                    text.bytes(),
                    copy.bytes(),
                    "checked in place differs from the copy"
                );
            }
        }
    }
}

/// `Value::parse_noting` is `Value::parse` (the same value or the same error), and every
/// value a walk finds with the noted ends (`Value::knowing`) is where the walk without them
/// finds it.
#[cfg_attr(test, cfg(feature = "std"))]
fn noted_is_parse(data: &[u8]) {
    let exact = Value::parse(data, JsonLimits::default());
    let noted = Value::parse_noting(data, JsonLimits::default());
    assert_eq!(
        exact.as_ref().err(),
        noted.as_ref().err(),
        "parse_noting's error is parse's"
    );
    let (Ok(v), Ok((n, ends))) = (exact, noted) else {
        return;
    };
    assert_eq!(v.raw().as_ptr(), n.raw().as_ptr());
    assert_eq!(
        spans(v),
        spans(n.knowing(&ends)),
        "the noted ends moved a value"
    );
}

/// Every value under `root`, depth first, as (address, length, kind); keys by address.
#[cfg_attr(test, cfg(feature = "std"))]
fn spans(root: Value<'_>) -> Vec<(usize, usize, Kind)> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        out.push((v.raw().as_ptr() as usize, v.raw().len(), v.kind()));
        for (k, m) in v.members() {
            out.push((k.raw().as_ptr() as usize, k.raw().len(), Kind::Null));
            stack.push(m);
        }
        stack.extend(v.elements());
    }
    out
}

/// Any JSON as a `tools/call` result: flattened where it lies (the host's way for big replies)
/// it gives what the copy gives, redacted by secrets that outgrow their text too, at a roomy
/// and a tight cap: the same text, or an overflow at the same cap, or the same error.
#[cfg_attr(test, cfg(feature = "std"))]
fn in_place_is_the_copy(msg: &[u8]) {
    use verifi_mcp_core::wire::content::{self, InPlacePlan};
    const SECRETS: [&str; 4] = ["text", "abcd", "hunter2-secret", "\"type\""];
    let v = Value::parse(msg, JsonLimits::default()).expect("valid");
    for cap in [1 << 16, msg.len() / 2] {
        let mut copy = VecBuf::new(cap);
        let mut r = Redactor::new(&SECRETS);
        let mut sink = r.sink(&mut copy);
        let copied = content::flatten(v, &mut sink).and_then(|f| Ok(sink.finish().map(|_| f)?));
        let plan = match InPlacePlan::new(msg, v) {
            Ok(Some(p)) => p,
            Ok(None) => continue,
            Err(e) => {
                assert_eq!(copied, Err(e), "the plan's error is flatten's");
                continue;
            }
        };
        let mut reply = VecBuf::new(msg.len().max(cap));
        reply.put(msg).expect("fits");
        let mut text = VecBuf::new(cap);
        let mut r = Redactor::new(&SECRETS);
        match (copied, plan.run(&mut reply, &mut r, &mut text)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b);
                assert_eq!(text.bytes(), copy.bytes(), "in place differs from the copy");
            }
            (Err(content::ContentError::Overflow(a)), Err(content::ContentError::Overflow(b))) => {
                assert_eq!(a.limit, b.limit)
            }
            (a, b) => panic!("copy {a:?}, in place {b:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// exchange: reply bytes -> Driver::call -> ToolResult, through a scripted in-memory server

mod script {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use verifi_mcp_core::drive::{Millis, Net, SlotState};
    use verifi_mcp_core::wire::endpoint::Endpoint;
    use verifi_mcp_core::wire::failure::ConnectError;

    /// The server: a good handshake, then `reply` (the fuzz input) to every `tools/call`, then
    /// close. Reads hand out at most `chunk` bytes. Nothing ever blocks: a reply that stops
    /// short ends in EOF.
    pub struct Server {
        pub reply: Vec<u8>,
        pub chunk: usize,
        pub now: Cell<Millis>,
        pub calls: Cell<u32>,
    }

    pub struct ServerRef(pub Rc<Server>);

    pub struct Conn {
        server: Rc<Server>,
        out: Vec<u8>,
        pos: usize,
    }

    #[derive(Debug)]
    pub struct IoErr;
    impl std::fmt::Display for IoErr {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("reset")
        }
    }
    impl std::error::Error for IoErr {}
    impl embedded_io_async::Error for IoErr {
        fn kind(&self) -> embedded_io_async::ErrorKind {
            embedded_io_async::ErrorKind::ConnectionReset
        }
    }
    impl embedded_io_async::ErrorType for Conn {
        type Error = IoErr;
    }

    fn http_json(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nmcp-session-id: fuzz-session\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    impl embedded_io_async::Write for Conn {
        async fn write(&mut self, buf: &[u8]) -> Result<usize, IoErr> {
            // One write is one whole request (the driver sends head + body together).
            let has = |n: &[u8]| buf.windows(n.len()).any(|w| w == n);
            self.out = if has(b"\"method\":\"initialize\"") {
                http_json(
                    "200 OK",
                    r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fuzz","version":"0"}}}"#,
                )
            } else if has(b"\"method\":\"tools/call\"") {
                self.server.calls.set(self.server.calls.get() + 1);
                self.server.reply.clone()
            } else {
                b"HTTP/1.1 202 Accepted\r\nconnection: close\r\ncontent-length: 0\r\n\r\n".to_vec()
            };
            self.pos = 0;
            Ok(buf.len())
        }
        async fn flush(&mut self) -> Result<(), IoErr> {
            Ok(())
        }
    }

    impl embedded_io_async::Read for Conn {
        async fn read(&mut self, buf: &mut [u8]) -> Result<usize, IoErr> {
            let rest = self.out.get(self.pos..).unwrap_or(&[]);
            let n = buf.len().min(rest.len()).min(self.server.chunk);
            buf[..n].copy_from_slice(&rest[..n]);
            self.pos += n;
            Ok(n)
        }
    }

    impl Net for ServerRef {
        type Conn = Conn;
        async fn connect(
            &self,
            _ep: &Endpoint<'_>,
            _fresh: bool,
        ) -> Result<(Conn, bool), ConnectError> {
            Ok((
                Conn {
                    server: self.0.clone(),
                    out: Vec::new(),
                    pos: 0,
                },
                false,
            ))
        }
        fn recycle(&self, _ep: &Endpoint<'_>, _conn: Conn) {}
        fn now(&self) -> Millis {
            self.0.now.get()
        }
        async fn sleep_until(&self, at: Millis) {
            if self.0.now.get() < at {
                self.0.now.set(at);
            }
        }
        async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
            let Ok((mut side, _)) = self.connect(ep, true).await else {
                return;
            };
            verifi_mcp_core::drive::post_answer(&mut side, answer).await;
        }
    }

    pub struct Cellular(pub RefCell<SlotState>);
    impl Cellular {
        pub fn with(&self, f: &mut dyn FnMut(&mut SlotState)) {
            f(&mut self.0.borrow_mut())
        }
    }
}

/// A secret of the run and a header value: neither may reach text, error or raw.
pub const EXCHANGE_SECRET: &str = "sk-fuzz-SECRET-7f3a";
/// The slot's authorization header value (a secret too).
pub const EXCHANGE_HEADER: &str = "Bearer tok-HEADER-9c2e";

#[derive(Debug, PartialEq, Eq)]
struct CallOutcome {
    ok: bool,
    text: String,
    is_error: bool,
    error: Option<String>,
    raw: Option<Vec<u8>>,
    shape: String,
    records: Vec<String>,
    events: Vec<String>,
}

struct Records(Vec<String>);
impl verifi_mcp_core::harness::meter::Ledger for Records {
    fn record(&mut self, r: verifi_mcp_core::harness::meter::LedgerRecord) {
        self.0.push(format!("{r:?}"))
    }
}
struct Events(Vec<String>);
impl verifi_mcp_core::harness::events::Timeline for Events {
    fn emit(&mut self, e: &verifi_mcp_core::harness::events::TimelineEvent<'_>) {
        let mut b = VecBuf::new(1 << 16);
        e.write_json(&mut b).expect("event JSON fits");
        let s = String::from_utf8(b.into_vec()).expect("event JSON is UTF-8");
        serde_json::from_str::<serde_json::Value>(&s).expect("event JSON parses");
        self.0.push(s);
    }
}

fn exchange_run(reply: &[u8], chunk: usize) -> CallOutcome {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;
    use verifi_mcp_core::drive::{self, CallBuffers, SlotConfig, SlotState};
    use verifi_mcp_core::wire::exchange::ReplyLimits;
    use verifi_mcp_core::wire::jsonrpc::ProtocolVersion;

    let net = script::ServerRef(Rc::new(script::Server {
        reply: reply.to_vec(),
        chunk,
        now: Cell::new(1_000),
        calls: Cell::new(0),
    }));
    let state = script::Cellular(RefCell::new(SlotState::new(
        ProtocolVersion::DEFAULT,
        false,
    )));
    let ep = Endpoint::parse_base("http://127.0.0.1:9/").expect("endpoint");
    let headers = [("authorization", EXCHANGE_HEADER)];
    let mut cfg = SlotConfig::new("fuzz", ep, "http://127.0.0.1:9/");
    cfg.headers = &headers;
    cfg.keep_raw = true;
    cfg.timeout_ms = 5_000;
    cfg.limits = ReplyLimits {
        max_head_bytes: 2048,
        max_body_bytes: 1 << 16,
        max_event_bytes: 1 << 14,
    };
    let secrets = [EXCHANGE_SECRET, EXCHANGE_HEADER];
    let mut head = vec![0u8; 2048];
    let mut read = vec![0u8; 512];
    let mut bufs = CallBuffers {
        request: VecBuf::new(1 << 14),
        head: &mut head,
        read: &mut read,
        reply: VecBuf::new(1 << 15),
        text: VecBuf::new(1 << 15),
        error: VecBuf::new(600),
        raw: VecBuf::new(1 << 15),
    };
    let args = Value::parse(br#"{"command":"id"}"#, JsonLimits::default()).expect("args");
    let mut records = Records(Vec::new());
    let mut events = Events(Vec::new());
    let r = embassy_futures::block_on(drive::Driver::new(&net, &cfg, |f| state.with(f)).call(
        ("run_command", Some(args)),
        &secrets,
        &mut records,
        &mut events,
        &mut bufs,
    ));
    assert!(net.0.calls.get() <= 2, "tools/call sent more than twice");
    CallOutcome {
        ok: r.ok(),
        text: r.text.to_owned(),
        is_error: r.is_error(),
        error: r.error().map(str::to_owned),
        raw: r.raw.map(<[u8]>::to_vec),
        shape: format!("{:?}", r.attempt()),
        records: records.0,
        events: events.0,
    }
}

/// Whole reply bytes → the JSON-RPC response → flatten → `ToolResult`, through `Driver::call`:
/// the result has one of the four shapes, carries no secret, is metered once per attempt, and
/// is the same whatever size the socket reads are.
pub fn exchange(data: &[u8]) {
    let whole = exchange_run(data, usize::MAX);
    let w = &whole;
    // The four shapes.
    assert_eq!(w.ok, w.error.is_none(), "error present exactly when not ok");
    if w.ok {
        assert!(!w.is_error);
    }
    if w.is_error {
        assert!(!w.ok);
    }
    if w.shape == "Unreachable" {
        assert!(w.text.is_empty() && w.raw.is_none() && !w.ok);
    }
    if !w.ok {
        assert!(!w.events.is_empty(), "every failure is a timeline event");
    }
    assert!(
        !w.records.is_empty() && w.records.len() <= 2,
        "metered per attempt"
    );
    // Redaction: no secret survives anywhere the harness can see.
    let mut seen: Vec<&[u8]> = vec![w.text.as_bytes()];
    if let Some(e) = &w.error {
        seen.push(e.as_bytes());
    }
    if let Some(r) = &w.raw {
        seen.push(r);
    }
    for ev in &w.events {
        seen.push(ev.as_bytes());
    }
    for s in [EXCHANGE_SECRET, EXCHANGE_HEADER] {
        for hay in &seen {
            assert!(find(hay, s.as_bytes()).is_none(), "secret {s:?} leaked");
        }
    }
    let planned = exchange_run(data, plan(data)[0]);
    assert_eq!(&planned, w, "planned reads differ from one read");
    if data.len() <= 1024 {
        let bytewise = exchange_run(data, 1);
        assert_eq!(&bytewise, w, "byte reads differ from one read");
    }
    exchange_lines(data);
}

/// What a stdio exchange ([`Exchange::lines`]) handed over: each message, and how it ended
/// (the step, or the failure's words).
#[derive(Debug, PartialEq, Eq)]
struct LinesOutcome {
    messages: Vec<Vec<u8>>,
    end: Result<String, String>,
}

/// The same bytes as a stdio server's output, fed in `pieces`: a message that holds
/// `"result"` is the answer; then the output ends.
fn lines_run(pieces: &[&[u8]], max_line: usize) -> LinesOutcome {
    use verifi_mcp_core::wire::exchange::{
        Exchange, Expect, OnMessage, ReplyLimits, Step, Verdict,
    };
    use verifi_mcp_core::wire::failure::Failure;
    struct Take(Vec<Vec<u8>>);
    impl OnMessage for Take {
        fn on_message(&mut self, msg: &[u8], _last: bool) -> Result<Verdict, Failure> {
            self.0.push(msg.to_vec());
            Ok(if find(msg, b"\"result\"").is_some() {
                Verdict::Done
            } else {
                Verdict::Continue
            })
        }
    }
    let mut head = [0u8; 16];
    let limits = ReplyLimits {
        max_event_bytes: max_line,
        ..ReplyLimits::default()
    };
    let mut ex = Exchange::lines(&mut head, Expect::Response, limits);
    let mut reply = VecBuf::new(1 << 15);
    let mut take = Take(Vec::new());
    let mut end = None;
    for piece in pieces {
        match ex.feed(piece, &mut reply, &mut take) {
            Ok((used, Step::NeedMore)) => {
                assert_eq!(used, piece.len(), "a line feed used part of its input");
            }
            // A feed may stop short at the answer; the rest is not part of it.
            Ok((used, step)) => {
                assert!(used <= piece.len());
                end = Some(Ok(format!("{step:?}")));
                break;
            }
            Err(f) => {
                end = Some(Err(f.to_string()));
                break;
            }
        }
    }
    let end = match end {
        Some(e) => e,
        None => match ex.finish(&mut reply, &mut take) {
            Ok(step) => Ok(format!("{step:?}")),
            Err(f) => Err(f.to_string()),
        },
    };
    LinesOutcome {
        messages: take.0,
        end,
    }
}

/// The stdio line mode on the same input: any split gives the same messages and end; no
/// message holds a newline or a trailing CR, or is over the line cap (or the reply buffer).
fn exchange_lines(data: &[u8]) {
    let max_line = 1 << 12;
    let whole = lines_run(&[data], max_line);
    for m in &whole.messages {
        assert!(!m.contains(&b'\n'), "a message holds a newline");
        assert!(!m.ends_with(b"\r"), "a message ends in CR");
        assert!(m.len() <= max_line, "a message over the line cap");
        assert!(
            !m.iter().all(u8::is_ascii_whitespace),
            "a blank line was handed over"
        );
    }
    let planned = lines_run(&split(data, &plan(data)), max_line);
    assert_eq!(planned, whole, "planned reads differ from one read (lines)");
    if data.len() <= 1024 {
        let bytes: Vec<&[u8]> = data.chunks(1).collect();
        assert_eq!(
            lines_run(&bytes, max_line),
            whole,
            "byte reads differ (lines)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// redactor

/// Input: secrets separated by 0x01, then 0x00, then the text (no 0x00: all text, no secrets).
fn redactor_input(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(p) => (
            data[..p].split(|&b| b == 1).take(8).collect(),
            &data[p + 1..],
        ),
        None => (Vec::new(), data),
    }
}

/// Which text bytes any occurrence of any secret (of at least MIN_SECRET_LEN bytes) covers.
fn covered(text: &[u8], secrets: &[&[u8]]) -> Vec<bool> {
    let mut cov = vec![false; text.len()];
    for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
        if s.len() > text.len() {
            continue;
        }
        for i in 0..=text.len() - s.len() {
            if &text[i..i + s.len()] == *s {
                cov[i..i + s.len()].iter_mut().for_each(|c| *c = true);
            }
        }
    }
    cov
}

/// The module's rule, directly: each maximal run of covered bytes becomes one marker.
fn redact_reference(text: &[u8], secrets: &[&[u8]]) -> Vec<u8> {
    let cov = covered(text, secrets);
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if cov[i] {
            out.extend_from_slice(MARKER.as_bytes());
            while i < text.len() && cov[i] {
                i += 1;
            }
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// No secret occurrence in `out` outside the markers it holds.
fn assert_no_secret(out: &[u8], secrets: &[&[u8]]) {
    let markers = covered(out, &[MARKER.as_bytes()]);
    for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
        if s.len() > out.len() {
            continue;
        }
        for i in 0..=out.len() - s.len() {
            if &out[i..i + s.len()] == *s {
                assert!(
                    markers[i..i + s.len()].iter().any(|&m| m),
                    "secret {:?} survives at {i}",
                    String::from_utf8_lossy(s)
                );
            }
        }
    }
}

/// The streaming redactor: equals the rule (every covered byte gone, one marker per run), so
/// no secret survives and text without secrets is unchanged; any chunking gives the same
/// output; a small hold still removes every secret.
pub fn redactor(data: &[u8]) {
    let (secrets, text) = redactor_input(data);
    let expected = redact_reference(text, &secrets);
    if covered(text, &secrets).iter().all(|c| !c) {
        assert_eq!(expected, text, "reference changed clean text");
    }
    let mut one = VecBuf::new(usize::MAX);
    redact(text, &secrets, &mut one).expect("unbounded sink");
    assert_eq!(one.bytes(), expected, "redact differs from the rule");
    for (how, chunks) in feedings(text) {
        let mut r = Redactor::new(&secrets);
        let mut out = VecBuf::new(usize::MAX);
        for c in &chunks {
            r.write(c, &mut out).expect("unbounded sink");
            assert!(r.held() < secrets.iter().map(|s| s.len()).max().unwrap_or(1).max(1));
        }
        r.finish(&mut out).expect("unbounded sink");
        assert_eq!(
            out.bytes(),
            expected,
            "Redactor ({how}) differs from the rule"
        );
        // Through the sink adapter too.
        let mut r = Redactor::new(&secrets);
        let mut out2 = VecBuf::new(usize::MAX);
        {
            let mut sink = r.sink(&mut out2);
            for c in &chunks {
                sink.put(c).expect("unbounded sink");
            }
            sink.finish().expect("unbounded sink");
        }
        assert_eq!(
            out2.bytes(),
            expected,
            "RedactingSink ({how}) differs from the rule"
        );
        // A tiny hold matches long secrets piecewise: still nothing survives.
        let mut small = Redactor::<_, 5>::with_hold(&secrets);
        let mut out3 = VecBuf::new(usize::MAX);
        for c in &chunks {
            small.write(c, &mut out3).expect("unbounded sink");
        }
        small.finish(&mut out3).expect("unbounded sink");
        assert_no_secret(out3.bytes(), &secrets);
    }
    assert_no_secret(&expected, &secrets);
    // A capped sink: overflow is a value, and poisons the redactor.
    let mut r = Redactor::new(&secrets);
    let mut capped = VecBuf::new(text.len() / 2);
    let first = r
        .write(text, &mut capped)
        .and_then(|()| r.finish(&mut capped));
    if first.is_err() {
        assert!(
            r.write(b"x", &mut capped).is_err(),
            "overflow did not poison"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// run_command

fn unwrap_reference(text: &str) -> Option<(i64, &str)> {
    let b = text.as_bytes();
    if !text.starts_with("$ ") {
        return None;
    }
    let nl = b.iter().position(|&c| c == b'\n')?;
    let rest = &text[nl + 1..];
    let rest = rest.strip_prefix("(exit ")?;
    let (neg, rest) = match rest.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let output = rest[digits..].strip_prefix(")\n")?;
    let mag = rest[..digits].bytes().fold(0u128, |n, d| {
        (n * 10 + u128::from(d - b'0')).min(u128::from(u64::MAX))
    });
    let mag = i64::try_from(mag).unwrap_or(i64::MAX);
    Some((if neg { -mag } else { mag }, output))
}

/// `run_command` unwrapping: agrees with a direct reading of `^\$ [^\n]*\n\(exit (-?\d+)\)\n`,
/// the output is a suffix of the text, and `exec_outcome` follows the exit code.
pub fn run_command(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let got = unwrap_run_command(&text);
    assert_eq!(
        got,
        unwrap_reference(&text),
        "unwrap differs from the pattern"
    );
    if let Some((code, out)) = got {
        assert!(text.ends_with(out));
        let o = exec_outcome(true, &text, None);
        assert_eq!((o.ok, o.exit_code, o.output), (code == 0, Some(code), out));
    }
    let o = exec_outcome(false, "", Some(&text));
    assert_eq!(o.exit_code, got.map(|g| g.0));
    let o = exec_outcome(false, &text, None);
    assert_eq!(
        (o.output, o.ok, o.exit_code),
        ("run_command failed", false, None)
    );
}

// ---------------------------------------------------------------------------------------------
// endpoint

fn target_of(e: &Endpoint<'_>) -> String {
    let mut b = VecBuf::new(usize::MAX);
    e.write_target(&mut b).expect("unbounded sink");
    String::from_utf8(b.into_vec()).expect("target is UTF-8")
}

fn host_header_of(e: &Endpoint<'_>) -> String {
    let mut b = VecBuf::new(usize::MAX);
    e.write_host_header(&mut b).expect("unbounded sink");
    String::from_utf8(b.into_vec()).expect("host header is UTF-8")
}

/// Endpoint parsing: accepted endpoints have a port, a clean ASCII host and a target starting
/// with `/` (base: ending in `/mcp`, no `//mcp`); scheme + host header + target parses back
/// exactly to the same endpoint.
pub fn endpoint(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for base in [true, false] {
        let parsed = if base {
            Endpoint::parse_base(s)
        } else {
            Endpoint::parse_exact(s)
        };
        let e = match parsed {
            Ok(e) => e,
            Err(err) => {
                let _ = err.to_string();
                continue;
            }
        };
        assert!(e.port() != 0);
        let host = e.host();
        assert!(!host.is_empty());
        assert!(
            host.bytes().all(|b| b.is_ascii_graphic()),
            "host {host:?} has spaces or controls"
        );
        assert!(!host.contains(['@', '#', '/', '?']), "host {host:?}");
        let target = target_of(&e);
        assert!(target.starts_with('/'), "target {target:?}");
        assert!(
            target.bytes().all(|b| b.is_ascii_graphic()),
            "target {target:?}"
        );
        assert!(!target.contains('#'));
        if base {
            let path = target.split('?').next().unwrap_or("");
            assert!(path.ends_with("/mcp"), "base target {target:?}");
            // A base that already ends in /mcp is taken as written (its own slashes are the
            // user's); a slash is never doubled by the /mcp the client appends.
            if e.appends_mcp() {
                assert!(!path.ends_with("//mcp"), "doubled slash in {target:?}");
            }
        }
        let hh = host_header_of(&e);
        let scheme = match e.scheme() {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let url = format!("{scheme}://{hh}{target}");
        let back = Endpoint::parse_exact(&url)
            .unwrap_or_else(|err| panic!("{url:?} (from {s:?}) does not parse: {err:?}"));
        assert_eq!(back.scheme(), e.scheme());
        assert_eq!(back.host(), host, "host of {url:?}");
        assert_eq!(back.port(), e.port(), "port of {url:?}");
        assert_eq!(target_of(&back), target, "target of {url:?}");
        assert_eq!(host_header_of(&back), hh);
    }
}

// ---------------------------------------------------------------------------------------------
// manifest

/// Manifest parsing and slot resolution: every filled slot (strictly ascending, no
/// duplicates) resolves; a slot that is not filled gives the error naming it; nothing panics.
pub fn manifest(data: &[u8]) {
    let m = match Manifest::parse(data) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            let _ = format!("{e:?}");
            return;
        }
    };
    let _ = format!("{m:?}");
    let slots: Vec<JsonStr<'_>> = m.filled_slots().collect();
    let names: Vec<Vec<u8>> = slots.iter().map(|s| unescape(*s)).collect();
    // The documented order: plain names by bytes; a name with escapes by its first 256
    // unescaped bytes.
    let key = |i: usize| -> &[u8] {
        if slots[i].as_plain().is_some() {
            &names[i]
        } else {
            &names[i][..names[i].len().min(256)]
        }
    };
    for i in 1..slots.len() {
        assert!(
            key(i - 1) < key(i),
            "filled slots not strictly ascending: {:?} then {:?}",
            String::from_utf8_lossy(&names[i - 1]),
            String::from_utf8_lossy(&names[i])
        );
    }
    for name in &names {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        if name.contains('\u{FFFD}') {
            continue;
        }
        let fill = m
            .resolve(name)
            .unwrap_or_else(|e| panic!("filled slot {name:?} does not resolve: {e}"));
        let ep = unescape(fill.endpoint);
        if let Ok(ep) = std::str::from_utf8(&ep) {
            let _ = Endpoint::parse_base(ep);
        }
        if let Some(f) = fill.fallback {
            let _ = unescape(f);
        }
        let _ = fill.headers.is_empty();
        for (k, v) in fill.headers.iter() {
            let _ = (unescape(k), unescape(v));
        }
        let _ = format!("{:?}", fill.headers);
    }
    let missing = "\u{1}not a slot\u{1}";
    match m.resolve(missing) {
        Ok(_) => assert!(names.iter().any(|n| n == missing.as_bytes())),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(missing), "error does not name the slot: {msg}");
            assert_eq!(e.filled_slots().count(), names.len());
        }
    }
}
