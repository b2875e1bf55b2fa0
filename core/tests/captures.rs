//! Decodes bodies and responses captured from the official TypeScript, Python and Rust SDK
//! servers (see `tests/data/README.md`): the HTTP decoder and the SSE decoder together, as the
//! exchange will use them.

use verifi_mcp_core::buf::{Buf, SliceBuf};
use verifi_mcp_core::wire::http::{
    Decoded, Framing, MediaType, ResponseDecoder, ResponseHead, ResponseLimits,
};
use verifi_mcp_core::wire::sse::{EventKind, SseDecoder, SseLimits, SseStep};

fn data(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

#[derive(Debug, PartialEq)]
struct Stream {
    events: Vec<(EventKind, String)>,
    last_id: Option<String>,
    retry: Option<u32>,
}

/// Feeds SSE bytes in the given pieces.
fn sse(pieces: &[&[u8]]) -> Stream {
    let mut dec = SseDecoder::new(SseLimits {
        max_event_bytes: 8192,
    });
    let mut storage = vec![0u8; 8192];
    let mut buf = SliceBuf::new(&mut storage);
    let mut events = Vec::new();
    for piece in pieces {
        let mut rest: &[u8] = piece;
        while !rest.is_empty() {
            let (n, step) = dec.feed(rest, &mut buf).expect("captured stream decodes");
            rest = &rest[n..];
            if let SseStep::Event(k) = step {
                events.push((k, String::from_utf8(buf.bytes().to_vec()).unwrap()));
                buf.clear();
            }
        }
    }
    dec.finish(&mut buf);
    Stream {
        events,
        last_id: dec.last_event_id().map(String::from),
        retry: dec.retry_ms(),
    }
}

/// Decodes a full HTTP response in the given pieces: the head and the de-chunked body.
fn http(pieces: &[&[u8]]) -> (ResponseHead, Vec<u8>) {
    let mut storage = [0u8; 4096];
    let mut dec = ResponseDecoder::new(&mut storage, ResponseLimits::default());
    let mut head = None;
    let mut body = Vec::new();
    let mut ended = false;
    for piece in pieces {
        let mut rest: &[u8] = piece;
        loop {
            let (n, step) = dec.decode(rest).expect("captured response decodes");
            rest = &rest[n..];
            match step {
                Decoded::NeedMore => break,
                Decoded::Head(h) => head = Some(h),
                Decoded::Body(b) => body.extend_from_slice(b),
                Decoded::End => {
                    ended = true;
                    break;
                }
            }
        }
        assert!(rest.is_empty(), "no bytes after the response");
    }
    assert!(ended, "the body ends by its own framing");
    assert_eq!(dec.finish(), Ok(false));
    assert_eq!(dec.body_bytes(), body.len() as u64);
    (head.expect("a head"), body)
}

/// Session and event ids are kept by the handshake era only (feature `era-2025`): a build
/// without it reads the same replies and keeps neither.
const IDS: bool = cfg!(feature = "era-2025");

#[test]
fn python_crlf_response() {
    let raw = data("py-initialize.http");
    let (head, body) = http(&[&raw]);
    assert_eq!(head.status, 200);
    assert_eq!(head.media_type, MediaType::EventStream);
    assert_eq!(head.framing, Framing::Chunked);
    assert!(head.keep_alive);
    assert_eq!(
        head.session_id.as_deref(),
        IDS.then_some("1b73854a2df34790971c7e77676e68dd")
    );
    assert_eq!(body, data("py-initialize.sse"));
    let s = sse(&[&body]);
    assert_eq!(s.events.len(), 1);
    assert_eq!(s.events[0].0, EventKind::Message);
    assert!(
        s.events[0]
            .1
            .starts_with("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":")
    );
    assert!(
        s.events[0].1.ends_with("\"version\":\"0.1.0\"}}}"),
        "no CR kept"
    );
}

#[test]
fn typescript_event_message_response() {
    let raw = data("ts-initialize.http");
    let (head, body) = http(&[&raw]);
    assert_eq!(head.media_type, MediaType::EventStream);
    assert_eq!(head.framing, Framing::Length(198));
    assert!(head.keep_alive);
    assert_eq!(head.session_id.is_some(), IDS);
    assert_eq!(body, data("ts-initialize.sse"));
    let s = sse(&[&body]);
    assert_eq!(s.events.len(), 1);
    assert_eq!(s.events[0].0, EventKind::Message);
    assert!(
        s.events[0]
            .1
            .contains("\"serverInfo\":{\"name\":\"peer-ts\"")
    );
    assert!(s.events[0].1.ends_with("\"id\":1}"));
}

#[test]
fn rmcp_priming_event_response() {
    let raw = data("rmcp-initialize.http");
    let (head, body) = http(&[&raw]);
    assert_eq!(head.framing, Framing::Chunked);
    assert_eq!(body, data("rmcp-initialize.sse"));
    assert_eq!(
        head.session_id.as_deref(),
        IDS.then_some("b90eb101-e091-4494-be26-97164af0a61a")
    );
    let s = sse(&[&body]);
    // The priming event (empty data, id 0, retry 3000) is not reported, but its id and retry are
    // kept.
    assert_eq!(s.events.len(), 1);
    assert!(s.events[0].1.starts_with("{\"jsonrpc\":\"2.0\",\"id\":1,"));
    assert_eq!(s.last_id.as_deref(), IDS.then_some("0"));
    assert_eq!(s.retry, Some(3000));
}

#[test]
fn progress_streams_from_all_three_servers() {
    for (name, last_id) in [
        ("py-progress.sse", None),
        ("ts-progress.sse", None),
        ("rmcp-progress.sse", Some("5/7")),
    ] {
        let raw = data(name);
        let s = sse(&[&raw]);
        let progress = s
            .events
            .iter()
            .filter(|(_, d)| d.contains("\"method\":\"notifications/progress\""))
            .count();
        assert_eq!(progress, 4, "{name}: {:?}", s.events);
        let last = &s.events.last().unwrap().1;
        assert!(last.contains("slept 400 ms"), "{name}: {last}");
        assert!(s.events.iter().all(|(k, _)| *k == EventKind::Message));
        assert_eq!(s.last_id.as_deref(), last_id.filter(|_| IDS), "{name}");
    }
}

#[test]
fn captured_responses_decode_the_same_at_every_split() {
    for name in [
        "py-initialize.http",
        "ts-initialize.http",
        "rmcp-initialize.http",
    ] {
        let raw = data(name);
        let whole = http(&[&raw]);
        let whole_events = sse(&[&whole.1]);
        for i in 0..=raw.len() {
            let (a, b) = raw.split_at(i);
            let split = http(&[a, b]);
            assert_eq!(split, whole, "{name} split at {i}");
        }
        let bytes: Vec<&[u8]> = raw.chunks(1).collect();
        assert_eq!(http(&bytes), whole);
        let body_bytes: Vec<&[u8]> = whole.1.chunks(1).collect();
        assert_eq!(sse(&body_bytes), whole_events, "{name}");
    }
}
