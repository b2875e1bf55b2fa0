//! (Compiled only under `#[cfg(test)]`: see `mod tests;` in `http.rs`.)
use super::*;
use crate::buf::{Buf, SliceBuf};
use proptest::prelude::*;
use std::string::String;
use std::vec::Vec;

#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Head(ResponseHead),
    Body(Vec<u8>),
    End,
}

fn limits() -> ResponseLimits {
    ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: 1 << 20,
    }
}

/// Feeds `pieces` in order, then `finish()` when `eof`; merges adjacent body slices.
fn run_with(pieces: &[&[u8]], eof: bool, lim: ResponseLimits) -> (Vec<Out>, Result<(), HttpError>) {
    let mut storage = [0u8; 8192];
    let mut d = ResponseDecoder::new(&mut storage, lim);
    let mut out = Vec::new();
    let push = |out: &mut Vec<Out>, o: Out| match (out.last_mut(), o) {
        (Some(Out::Body(a)), Out::Body(b)) => a.extend_from_slice(&b),
        (_, o) => out.push(o),
    };
    for piece in pieces {
        let mut rest: &[u8] = piece;
        let mut guard = 0;
        loop {
            guard += 1;
            assert!(guard < 100_000, "decoder made no progress");
            match d.decode(rest) {
                Err(e) => return (out, Err(e)),
                Ok((n, step)) => {
                    assert!(n <= rest.len());
                    let done = matches!(step, Decoded::NeedMore);
                    match step {
                        Decoded::NeedMore => {}
                        Decoded::Head(h) => push(&mut out, Out::Head(h)),
                        Decoded::Body(b) => {
                            assert!(!b.is_empty());
                            push(&mut out, Out::Body(b.to_vec()))
                        }
                        Decoded::End => {
                            if out.last() != Some(&Out::End) {
                                push(&mut out, Out::End)
                            }
                        }
                    }
                    rest = &rest[n..];
                    if done || (rest.is_empty() && out.last() == Some(&Out::End)) {
                        break;
                    }
                    if rest.is_empty() {
                        // Let a pending End surface without more input.
                        continue;
                    }
                }
            }
        }
    }
    if eof {
        match d.finish() {
            Ok(true) => {
                if out.last() != Some(&Out::End) {
                    out.push(Out::End)
                }
            }
            Ok(false) => {}
            Err(e) => return (out, Err(e)),
        }
    }
    (out, Ok(()))
}

fn run(input: &[u8]) -> (Vec<Out>, Result<(), HttpError>) {
    run_with(&[input], true, limits())
}

fn head_of(out: &[Out]) -> &ResponseHead {
    match out.first() {
        Some(Out::Head(h)) => h,
        other => panic!("no head: {other:?}"),
    }
}

fn body_of(out: &[Out]) -> Vec<u8> {
    out.iter()
        .filter_map(|o| match o {
            Out::Body(b) => Some(b.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

// ---- request head ----

fn write(head: &RequestHead<'_>) -> Result<String, RequestError> {
    let mut s = [0u8; 1024];
    let mut b = SliceBuf::new(&mut s);
    write_request_head(head, &mut b)?;
    Ok(String::from_utf8(b.bytes().to_vec()).unwrap())
}

#[test]
fn request_head_has_every_header_in_lower_case() {
    let ep = Endpoint::parse_base("http://127.0.0.1:8080").unwrap();
    let head = RequestHead {
        method: Method::Post,
        endpoint: &ep,
        accept_json_and_sse: true,
        session_id: Some("abc-123"),
        protocol_version: Some("2025-06-18"),
        last_event_id: None,
        extra_headers: &[("Authorization", "Bearer t0k")],
        content_length: Some(57),
        mcp: None,
    };
    let want = std::format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: verifi-mcp/{}\r\n\
         accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
         content-length: 57\r\nmcp-session-id: abc-123\r\nmcp-protocol-version: 2025-06-18\r\n\
         authorization: Bearer t0k\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(write(&head).unwrap(), want);
}

#[test]
fn get_resume_head_accepts_sse_only_and_sends_last_event_id() {
    let ep = Endpoint::parse_exact("http://[::1]:9000/rpc?x=1").unwrap();
    let head = RequestHead {
        method: Method::Get,
        endpoint: &ep,
        accept_json_and_sse: false,
        session_id: None,
        protocol_version: None,
        last_event_id: Some("0/3"),
        extra_headers: &[],
        content_length: None,
        mcp: None,
    };
    let s = write(&head).unwrap();
    assert!(
        s.starts_with("GET /rpc?x=1 HTTP/1.1\r\nhost: [::1]:9000\r\n"),
        "{s}"
    );
    assert!(s.contains("\r\naccept: text/event-stream\r\n"), "{s}");
    assert!(s.contains("\r\nlast-event-id: 0/3\r\n"), "{s}");
    assert!(!s.contains("content-length"), "{s}");
    assert!(s.ends_with("\r\n\r\n"));
    let del = RequestHead {
        method: Method::Delete,
        ..head
    };
    assert!(write(&del).unwrap().starts_with("DELETE /rpc?x=1 "));
}

#[test]
fn request_head_refuses_header_injection_and_writes_nothing() {
    let ep = Endpoint::parse_base("http://h").unwrap();
    let base = RequestHead {
        method: Method::Post,
        endpoint: &ep,
        accept_json_and_sse: true,
        session_id: None,
        protocol_version: None,
        last_event_id: None,
        extra_headers: &[],
        content_length: Some(2),
        mcp: None,
    };
    let bad: &[RequestHead<'_>] = &[
        RequestHead {
            session_id: Some("a\r\nx: y"),
            ..base
        },
        RequestHead {
            protocol_version: Some("v\n"),
            ..base
        },
        RequestHead {
            last_event_id: Some("a\0b"),
            ..base
        },
        RequestHead {
            extra_headers: &[("x-a", "ok"), ("bad name", "v")],
            ..base
        },
        RequestHead {
            extra_headers: &[("", "v")],
            ..base
        },
        RequestHead {
            extra_headers: &[("x:y", "v")],
            ..base
        },
        RequestHead {
            extra_headers: &[("x-a", "v\r")],
            ..base
        },
    ];
    for h in bad {
        let mut s = [0u8; 512];
        let mut b = SliceBuf::new(&mut s);
        assert_eq!(
            write_request_head(h, &mut b),
            Err(RequestError::InvalidHeader)
        );
        assert!(b.is_empty());
    }
    let mut s = [0u8; 20];
    let mut b = SliceBuf::new(&mut s);
    assert!(matches!(
        write_request_head(&base, &mut b),
        Err(RequestError::Overflow(_))
    ));
}

// ---- response decoder ----

// Session and event ids are the handshake era's (feature `era-2025`).
#[cfg(feature = "era-2025")]
#[test]
fn content_length_response() {
    let (out, r) = run(
        b"HTTP/1.1 200 OK\r\nContent-Type: Application/JSON; charset=utf-8\r\n\
        Mcp-Session-Id: s-1\r\ncontent-length: 5\r\n\r\nhello",
    );
    r.unwrap();
    let h = head_of(&out);
    assert_eq!(h.status, 200);
    assert_eq!(h.media_type, MediaType::Json);
    assert_eq!(h.content_type.as_str(), "Application/JSON; charset=utf-8");
    assert_eq!(h.session_id.as_deref(), Some("s-1"));
    assert_eq!(h.framing, Framing::Length(5));
    assert!(h.keep_alive);
    assert_eq!(body_of(&out), b"hello");
    assert_eq!(out.last(), Some(&Out::End));
}

#[test]
fn media_types() {
    assert_eq!(
        MediaType::parse(b"text/event-stream"),
        MediaType::EventStream
    );
    assert_eq!(
        MediaType::parse(b" TEXT/Event-Stream ;x=1"),
        MediaType::EventStream
    );
    assert_eq!(MediaType::parse(b"application/json"), MediaType::Json);
    assert_eq!(MediaType::parse(b"application/jsonx"), MediaType::Other);
    assert_eq!(MediaType::parse(b"text/plain"), MediaType::Other);
    let (out, _) = run(b"HTTP/1.1 406 Not Acceptable\r\ncontent-length: 2\r\n\r\nno");
    assert_eq!(head_of(&out).media_type, MediaType::Missing);
    assert_eq!(head_of(&out).status, 406);
}

#[test]
fn chunked_response_with_extensions_trailers_and_bare_lf() {
    let (out, r) = run(b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n\
        5;name=val\r\nhello\r\n1 \n \n00A\r\n0123456789\n0\r\nx-trailer: t\r\n\r\n");
    r.unwrap();
    assert_eq!(head_of(&out).framing, Framing::Chunked);
    assert_eq!(body_of(&out), b"hello 0123456789");
    assert_eq!(out.last(), Some(&Out::End));
}

#[test]
fn interim_heads_are_skipped() {
    let (out, r) = run(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: x\r\n\r\n\
        HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
    );
    r.unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(head_of(&out).status, 202);
    assert_eq!(out[1], Out::End);
}

#[test]
fn empty_and_close_delimited_framing() {
    let (out, r) = run(b"HTTP/1.1 204 No Content\r\ncontent-length: 10\r\n\r\n");
    r.unwrap();
    assert_eq!(head_of(&out).framing, Framing::Empty);
    assert_eq!(out.len(), 2);

    let (out, r) = run(b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil close");
    r.unwrap();
    let h = head_of(&out);
    assert_eq!(h.framing, Framing::Close);
    assert!(!h.keep_alive);
    assert_eq!(body_of(&out), b"until close");
    assert_eq!(out.last(), Some(&Out::End));
}

#[test]
fn keep_alive_rules() {
    let ka = |raw: &[u8]| head_of(&run(raw).0).keep_alive;
    assert!(ka(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
    assert!(!ka(
        b"HTTP/1.1 200 OK\r\nConnection: Close\r\ncontent-length: 0\r\n\r\n"
    ));
    assert!(!ka(b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n"));
    assert!(ka(
        b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n"
    ));
}

#[test]
fn chunked_wins_over_content_length_but_drops_keep_alive() {
    let (out, r) = run(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\
        transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    r.unwrap();
    let h = head_of(&out);
    assert_eq!(h.framing, Framing::Chunked);
    assert!(!h.keep_alive);
    assert_eq!(body_of(&out), b"hello");
}

#[test]
fn finish_reports_state() {
    let mut st = [0u8; 256];
    let mut d = ResponseDecoder::new(&mut st, limits());
    assert_eq!(d.finish(), Err(HttpError::UnexpectedEof(Stage::Head)));

    let mut st = [0u8; 256];
    let mut d = ResponseDecoder::new(&mut st, limits());
    let raw = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nab";
    let (n, s) = d.decode(raw).unwrap();
    assert!(matches!(s, Decoded::Head(_)));
    let (m, s) = d.decode(&raw[n..]).unwrap();
    assert_eq!((m, s), (2, Decoded::Body(b"ab")));
    assert_eq!(d.body_bytes(), 2);
    assert_eq!(d.finish(), Err(HttpError::UnexpectedEof(Stage::Body)));

    let mut st = [0u8; 256];
    let mut d = ResponseDecoder::new(&mut st, limits());
    let raw = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
    let (n, _) = d.decode(raw).unwrap();
    assert_eq!(d.decode(&raw[n..]).unwrap(), (0, Decoded::End));
    assert_eq!(d.finish(), Ok(false));
    assert_eq!(d.decode(b"x"), Err(HttpError::TrailingData));
}

#[test]
fn trailing_data_after_end_is_an_error() {
    let (_, r) = run(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nab");
    assert_eq!(r, Err(HttpError::TrailingData));
    let (_, r) = run(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nX");
    assert_eq!(r, Err(HttpError::TrailingData));
}

// ---- hostile ----

#[test]
fn truncated_heads_and_bodies() {
    for raw in [
        &b""[..],
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r",
        b"HTTP/1.1 100 Continue\r\n\r\n",
    ] {
        assert_eq!(
            run(raw).1,
            Err(HttpError::UnexpectedEof(Stage::Head)),
            "{raw:?}"
        );
    }
    for raw in [
        &b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nab"[..],
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx: y\r\n",
    ] {
        assert_eq!(
            run(raw).1,
            Err(HttpError::UnexpectedEof(Stage::Body)),
            "{raw:?}"
        );
    }
}

#[test]
fn malformed_heads() {
    for raw in [
        &b"HTTP/2 200 OK\r\n\r\n"[..],
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, chunked\r\n\r\n",
    ] {
        assert!(
            matches!(run(raw).1, Err(HttpError::BadHead(_))),
            "{:?} gave {:?}",
            String::from_utf8_lossy(raw),
            run(raw).1
        );
    }
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..(MAX_HEADERS + 1) {
        many.extend_from_slice(std::format!("x-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(run(&many).1, Err(HttpError::TooManyHeaders));
}

#[test]
fn a_reply_that_cannot_be_http_is_refused_at_its_first_bytes() {
    // No head end in sight: the decoder must not wait for one (nor for the deadline).
    for (first, want) in [
        (&b"HTTX"[..], HttpError::NotHttp),
        (b"\r\n\r\n", HttpError::NotHttp),
        (b"\x00\x01\x02", HttpError::NotHttp),
        (b"SSH-2.0-OpenSSH_9.6\r\n", HttpError::NotHttp),
        (b"{\"jsonrpc\"", HttpError::NotHttp),
        // A TLS alert or handshake record: an https port spoken to in plain http.
        (b"\x15\x03\x03\x00\x02\x02\x32", HttpError::TlsRecord),
        (b"\x16\x03\x01\x00", HttpError::TlsRecord),
    ] {
        let mut storage = [0u8; 1024];
        let mut d = ResponseDecoder::new(&mut storage, limits());
        assert_eq!(d.decode(first).map(|(_, x)| x), Err(want), "{first:?}");
    }
    // One byte at a time, the verdict comes as soon as a byte cannot continue "HTTP/".
    let mut storage = [0u8; 1024];
    let mut d = ResponseDecoder::new(&mut storage, limits());
    assert_eq!(d.decode(b"H").map(|(_, x)| x), Ok(Decoded::NeedMore));
    assert_eq!(d.decode(b"T").map(|(_, x)| x), Ok(Decoded::NeedMore));
    assert_eq!(d.decode(b"X").map(|(_, x)| x), Err(HttpError::NotHttp));
    // A real head split anywhere in its prefix is fine.
    for cut in 1..6 {
        let raw = b"HTTP/1.1 204 No Content\r\n\r\n";
        let (out, end) = run_with(&[&raw[..cut], &raw[cut..]], true, limits());
        assert_eq!(end, Ok(()), "cut at {cut}");
        assert_eq!(head_of(&out).status, 204);
    }
    // After a 1xx, the next head is checked the same way.
    assert_eq!(
        run(b"HTTP/1.1 100 Continue\r\n\r\nGARBAGE").1,
        Err(HttpError::NotHttp)
    );
}

#[test]
fn retry_after_is_kept_from_the_head() {
    let (out, _) =
        run(b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 3600\r\ncontent-length: 0\r\n\r\n");
    assert_eq!(head_of(&out).retry_after, Some(RetryAfter::Seconds(3600)));
    let (out, _) = run(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
    assert_eq!(head_of(&out).retry_after, None);
}

#[test]
fn oversized_head_is_refused_at_the_cap() {
    let mut raw = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
    raw.resize(5000, b'a');
    let lim = ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: 10,
    };
    for pieces in [vec![&raw[..]], raw.chunks(7).collect::<Vec<_>>()] {
        assert_eq!(
            run_with(&pieces, false, lim).1,
            Err(HttpError::HeadTooLarge { limit: 4096 })
        );
    }
    // The storage caps too.
    let mut st = [0u8; 64];
    let mut d = ResponseDecoder::new(&mut st, lim);
    assert_eq!(d.decode(&raw), Err(HttpError::HeadTooLarge { limit: 64 }));
    assert_eq!(d.decode(b""), Err(HttpError::HeadTooLarge { limit: 64 }));
    assert_eq!(
        std::format!("{}", HttpError::HeadTooLarge { limit: 16384 }),
        "HTTP response head is larger than its cap of 16384 bytes"
    );
}

#[test]
fn bad_content_lengths() {
    for raw in [
        &b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 3, 3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: \r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nContent-Length: 4\r\n\r\n",
    ] {
        assert_eq!(run(raw).1, Err(HttpError::BadContentLength), "{raw:?}");
    }
    // Repeated equal values are one length.
    let (out, r) = run(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok");
    r.unwrap();
    assert_eq!(body_of(&out), b"ok");
}

#[test]
fn bad_chunks() {
    let pre = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    let with = |s: &[u8]| [&pre[..], s].concat();
    for body in [
        &b"\r\n"[..],
        b"x\r\n",
        b"-1\r\n",
        b";ext\r\n",
        b"5\rX",
        b"5 x\0\r\n",
        b"2\r\nabX\r\n",
        b"2\r\nab\r\r\n",
    ] {
        assert_eq!(run(&with(body)).1, Err(HttpError::BadChunk), "{body:?}");
    }
    // 10^20 = 0x56BC75E2D63100000: 17 hex digits, over 64 bits; must not wrap.
    assert_eq!(
        run(&with(b"56BC75E2D63100000\r\n")).1,
        Err(HttpError::ChunkTooLarge)
    );
    assert_eq!(
        run(&with(b"10000000000000000\r\n")).1,
        Err(HttpError::ChunkTooLarge)
    );
    // Leading zeros are fine; an endless size line is not.
    let (out, r) = run(&with(b"00000000000000000000001\r\nz\r\n0\r\n\r\n"));
    r.unwrap();
    assert_eq!(body_of(&out), b"z");
    let mut long = b"1;".to_vec();
    long.resize(10_000, b'e');
    assert_eq!(run(&with(&long)).1, Err(HttpError::BadChunk));
    // A chunk over the body cap is refused before its bytes arrive.
    let lim = ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: 100,
    };
    assert_eq!(
        run_with(&[&with(b"FFFFFFFF\r\n")], false, lim).1,
        Err(HttpError::BodyTooLarge { limit: 100 })
    );
    // Endless trailers are capped.
    let mut tr = b"0\r\n".to_vec();
    for _ in 0..1000 {
        tr.extend_from_slice(b"x-t: aaaaaaaa\r\n");
    }
    assert_eq!(
        run(&with(&tr)).1,
        Err(HttpError::TrailersTooLarge { limit: 4096 })
    );
}

/// Lengths and chunk sizes past 32 bits: the edge's counters saturate, the verdicts stay.
#[test]
fn huge_lengths() {
    let lim = ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: 100,
    };
    let over = Err(HttpError::BodyTooLarge { limit: 100 });
    let raw = b"HTTP/1.1 200 OK\r\ncontent-length: 5000000000\r\n\r\nab";
    assert_eq!(run_with(&[raw], true, lim).1, over);
    let pre = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
    for size in [&b"100000000"[..], b"0FFFFFFFFFFFFFFFF", b"123456789abcdef0"] {
        let raw = [&pre[..], size, b"\r\nab"].concat();
        assert_eq!(run_with(&[&raw], true, lim).1, over, "{size:?}");
    }
    // No cap to speak of: the host takes a 5 GB length; the edge's cap is 32-bit.
    let lim = ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: u64::MAX,
    };
    let (out, r) = run_with(&[raw], false, lim);
    if cfg!(feature = "std") {
        r.unwrap();
        assert_eq!(out.last(), Some(&Out::Body(b"ab".to_vec())));
    } else {
        let limit = u64::from(u32::MAX - 1);
        assert_eq!(r, Err(HttpError::BodyTooLarge { limit }));
    }
}

#[test]
fn body_caps() {
    let lim = ResponseLimits {
        max_head_bytes: 4096,
        max_body_bytes: 4,
    };
    let raw = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let (out, r) = run_with(&[raw], true, lim);
    assert_eq!(r, Err(HttpError::BodyTooLarge { limit: 4 }));
    assert_eq!(out.len(), 1, "the head is still reported");
    let raw = b"HTTP/1.1 200 OK\r\n\r\nhello";
    assert_eq!(
        run_with(&[raw], true, lim).1,
        Err(HttpError::BodyTooLarge { limit: 4 })
    );
    let raw =
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n";
    assert_eq!(
        run_with(&[raw], true, lim).1,
        Err(HttpError::BodyTooLarge { limit: 4 })
    );
}

// Session and event ids are the handshake era's (feature `era-2025`).
#[cfg(feature = "era-2025")]
#[test]
fn bad_session_ids() {
    for raw in [
        &b"HTTP/1.1 200 OK\r\nmcp-session-id: a b\r\ncontent-length: 0\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nmcp-session-id: \r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nmcp-session-id: caf\xc3\xa9\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nmcp-session-id: a\tb\r\ncontent-length: 0\r\n\r\n",
    ] {
        assert_eq!(run(raw).1, Err(HttpError::BadSessionId), "{raw:?}");
    }
    let long = std::format!(
        "HTTP/1.1 200 OK\r\nmcp-session-id: {}\r\ncontent-length: 0\r\n\r\n",
        "a".repeat(MAX_SESSION_ID + 1)
    );
    assert_eq!(run(long.as_bytes()).1, Err(HttpError::BadSessionId));
    let ok = std::format!(
        "HTTP/1.1 200 OK\r\nmcp-session-id: {}\r\ncontent-length: 0\r\n\r\n",
        "a".repeat(MAX_SESSION_ID)
    );
    assert_eq!(
        head_of(&run(ok.as_bytes()).0)
            .session_id
            .as_ref()
            .map(|s| s.len()),
        Some(MAX_SESSION_ID)
    );
}

#[test]
fn errors_are_sticky() {
    let mut st = [0u8; 256];
    let mut d = ResponseDecoder::new(&mut st, limits());
    let e = d.decode(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n");
    assert_eq!(e, Err(HttpError::BadContentLength));
    assert_eq!(d.decode(b"more"), Err(HttpError::BadContentLength));
    assert_eq!(d.finish(), Err(HttpError::BadContentLength));
}

#[test]
fn content_type_is_truncated_at_a_char_boundary() {
    let ct = std::format!("text/plain; x={}", "é".repeat(40));
    let raw = std::format!("HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: 0\r\n\r\n");
    let (out, _) = run(raw.as_bytes());
    let h = head_of(&out);
    assert!(h.content_type.len() <= 64 && h.content_type.len() >= 63);
    assert!(ct.starts_with(h.content_type.as_str()));
    assert_eq!(h.media_type, MediaType::Other);
}

#[test]
fn head_end_search_is_linear() {
    // Fed byte by byte, each head byte is scanned once and httparse runs once per head (not once
    // per feed, which would be quadratic).
    let mut raw = b"HTTP/1.1 103 Early Hints\r\nlink: a\r\n\r\nHTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..50 {
        raw.extend_from_slice(std::format!("x-{i}: {}\r\n", "v".repeat(60)).as_bytes());
    }
    raw.extend_from_slice(b"content-length: 0\r\n\r\n");
    let mut st = [0u8; 4096];
    let mut d = ResponseDecoder::new(&mut st, limits());
    let mut heads = 0;
    for b in raw.chunks(1) {
        let mut rest = b;
        loop {
            match d.decode(rest) {
                Err(e) => panic!("{e}"),
                Ok((n, s)) => {
                    heads += usize::from(matches!(s, Decoded::Head(_)));
                    rest = &rest[n..];
                    if rest.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    assert_eq!(d.work.0, raw.len(), "each head byte scanned once");
    assert_eq!(d.work.1, 2, "one parse per head (interim and final)");
    assert_eq!(heads, 1);
}

// ---- split invariance ----

fn samples() -> Vec<Vec<u8>> {
    vec![
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
          transfer-encoding: chunked\r\nmcp-session-id: abc\r\n\r\n\
          7;x=y\r\ndata: a\r\n3\r\n\n\n\n\r\n0\r\ntrailer: 1\r\n\r\n"
            .to_vec(),
        b"HTTP/1.1 200 OK\ncontent-length: 11\n\nhello world".to_vec(),
        b"HTTP/1.0 200 OK\r\n\r\nclose delimited body\r\n\r\n".to_vec(),
        b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab".to_vec(),
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n56BC75E2D63100000\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nabc".to_vec(),
    ]
}

fn pieces_at<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts {
        out.push(&input[last..c]);
        last = c;
    }
    out.push(&input[last..]);
    out
}

#[test]
fn whole_byte_by_byte_and_every_split_agree() {
    for input in samples() {
        let whole = run_with(&[&input], true, limits());
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run_with(&bytes, true, limits()), whole);
        for i in 0..=input.len() {
            let (a, b) = input.split_at(i);
            assert_eq!(run_with(&[a, b], true, limits()), whole, "split at {i}");
        }
    }
}

proptest! {
    #[test]
    fn random_multi_splits_agree(which in 0usize..7, cuts in proptest::collection::vec(0usize..10_000, 0..12)) {
        let input = &samples()[which];
        let whole = run_with(&[input], true, limits());
        let pieces = pieces_at(input, &cuts);
        prop_assert_eq!(run_with(&pieces, true, limits()), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_agrees(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in proptest::collection::vec(0usize..400, 0..6),
        chunked in any::<bool>(),
    ) {
        let mut input = if chunked {
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec()
        } else {
            std::vec::Vec::new()
        };
        input.extend_from_slice(&body);
        let whole = run_with(&[&input], true, limits());
        prop_assert_eq!(run_with(&pieces_at(&input, &cuts), true, limits()), whole);
    }
}

/// Pieces a response head is made of, right and wrong: the small head reader must say what
/// `httparse` says of any sequence of them.
const HEAD_PIECES: &[&[u8]] = &[
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"HTTP/1.",
    b"HTTP/2",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b" ",
    b"  ",
    b"\t",
    b"200",
    b"20",
    b"101",
    b"700",
    b"OK",
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b": ",
    b"content-length",
    b"Content-Type",
    b"transfer-encoding: chunked\r\n",
    b"content-length: 5\r\n",
    b"x-a",
    b"application/json",
    b"\xc3\xa9",
    b"\x7f",
    b"\x00",
    b"\x0c",
    b"\x80",
    b"(",
    b"/",
    b"5",
];

fn head_from(picks: &[usize], raw: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for &i in picks {
        head.extend_from_slice(HEAD_PIECES[i % HEAD_PIECES.len()]);
    }
    head.extend_from_slice(raw);
    head
}

#[test]
fn small_head_reader_says_what_httparse_says() {
    let mut cases: Vec<Vec<u8>> = std::vec![
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n".to_vec(),
        b"HTTP/1.0 204\r\n\r\n".to_vec(),
        b"HTTP/1.1 200\n\n".to_vec(),
        b"\r\n\nHTTP/1.1 200 OK\r\n\r\n".to_vec(),
        b"\r\rHTTP/1.1 200 OK\r\n\r\n".to_vec(),
        b"HTTP/1.1  200 OK\r\n\r\n".to_vec(),
        b"HTTP/1.1 200\tOK\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 O\x01K\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\n a: b\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na : b\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na:\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na:   \t \r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na: b \t \r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na: b\rc\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na: b\r\n\r".to_vec(),
        b"HTTP/1.1 200 OK\r\na: b\r\n\rx".to_vec(),
        b"HTTP/1.1 200 OK\r\na: b\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\na".to_vec(),
        b"HTTP/1.1 20".to_vec(),
        b"HTTP/1".to_vec(),
        b"HTTX".to_vec(),
        b"".to_vec(),
    ];
    for n in [63usize, 64, 65, 66] {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..n {
            head.extend_from_slice(std::format!("x-h{i}: {i}\r\n").as_bytes());
        }
        let mut bad = head.clone();
        head.extend_from_slice(b"\r\n");
        bad.extend_from_slice(b"x-bad: \x01\r\n\r\n");
        cases.push(head);
        cases.push(bad);
    }
    for case in &cases {
        assert_eq!(
            parse_head_small(case),
            parse_head_httparse(case),
            "{:?}",
            String::from_utf8_lossy(case)
        );
    }
}

proptest! {
    #[test]
    fn small_head_reader_agrees_with_httparse(
        picks in proptest::collection::vec(0usize..1000, 0..24),
        raw in proptest::collection::vec(any::<u8>(), 0..8),
        end in any::<bool>(),
    ) {
        let mut head = head_from(&picks, &raw);
        if end {
            head.extend_from_slice(b"\r\n\r\n");
        }
        prop_assert_eq!(parse_head_small(&head), parse_head_httparse(&head));
    }

    #[test]
    fn small_head_reader_agrees_on_real_heads_cut_and_changed(
        at in 0usize..200,
        byte in prop_oneof![
            any::<u8>(),
            proptest::sample::select(std::vec![0u8, 1, 9, 10, 12, 13, 32, 58, 97, 127, 128, 255]),
        ],
        which in 0usize..3,
    ) {
        let good: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n",
            b"HTTP/1.0 503 Service Unavailable\nretry-after: 3\ncontent-length: 0\n\n",
            b"HTTP/1.1 404 Not Found\r\nmcp-session-id: abc\r\ncontent-length: 4\r\n\r\n",
        ];
        let mut head = good[which].to_vec();
        let at = at % head.len();
        head[at] = byte;
        prop_assert_eq!(parse_head_small(&head), parse_head_httparse(&head));
        prop_assert_eq!(parse_head_small(&head[..at]), parse_head_httparse(&head[..at]));
    }

    #[test]
    fn small_head_reader_agrees_line_by_line(
        status in 0usize..6,
        lines in proptest::collection::vec(
            (0usize..5, 0usize..5, proptest::collection::vec(0usize..9, 0..4), 0usize..5),
            0..6,
        ),
        end in 0usize..4,
    ) {
        const STATUS: [&[u8]; 6] = [
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.0 404\n",
            b"HTTP/1.1 100 Continue\r\n",
            b"HTTP/1.1 200 \x80\tok\r\n",
            b"HTTP/1.1 200 O\x7fK\r\n",
            b"HTTP/1.1 200 OK\r\r\n",
        ];
        const NAMES: [&[u8]; 5] = [b"content-length", b"x-a", b"", b" x", b"x\x80"];
        const SEPS: [&[u8]; 5] = [b":", b": ", b":\t ", b" :", b";"];
        const VALUES: [&[u8]; 9] =
            [b"5", b"a b", b" ", b"\t", b"\x7f", b"\x00", b"\xc3\xa9", b"\r", b"chunked"];
        const EOLS: [&[u8]; 5] = [b"\r\n", b"\n", b"\r", b"\rx", b""];
        const ENDS: [&[u8]; 4] = [b"\r\n", b"\n", b"\r", b""];
        let mut head = STATUS[status].to_vec();
        for (n, s, vs, e) in &lines {
            head.extend_from_slice(NAMES[*n]);
            head.extend_from_slice(SEPS[*s]);
            for v in vs {
                head.extend_from_slice(VALUES[*v]);
            }
            head.extend_from_slice(EOLS[*e]);
        }
        head.extend_from_slice(ENDS[end]);
        prop_assert_eq!(parse_head_small(&head), parse_head_httparse(&head));
    }
}

/// The texts the reader matches are slices of the head's pieces: each is the text it names.
#[test]
fn the_shared_texts_are_what_they_name() {
    for (part, text) in [
        (ACCEPT_SSE, &b"text/event-stream\r\n"[..]),
        (JSON, b"application/json"),
        (EVENT_STREAM, b"text/event-stream"),
        (CONTENT_TYPE, b"content-type"),
        (CONTENT_LENGTH, b"content-length"),
        (SESSION_ID, b"mcp-session-id"),
        (TRANSFER_ENCODING, b"transfer-encoding"),
        (HTTP_1, b"HTTP/1."),
        (STATUS_PREFIX, b"HTTP/"),
    ] {
        assert_eq!(
            core::str::from_utf8(part).unwrap(),
            core::str::from_utf8(text).unwrap()
        );
    }
}

#[test]
fn head_faults_say_their_texts() {
    use std::string::ToString;
    for (fault, text) in [
        (HeadFault::Incomplete, "incomplete head"),
        (HeadFault::HeaderName, "invalid header name"),
        (HeadFault::HeaderValue, "invalid header value"),
        (HeadFault::NewLine, "invalid line ending"),
        (HeadFault::StatusLine, "invalid status line"),
        (HeadFault::Version, "not HTTP/1.0 or HTTP/1.1"),
        (HeadFault::StatusRange, "status code outside 100..=599"),
        (
            HeadFault::SwitchingProtocols,
            "unexpected 101 Switching Protocols",
        ),
        (
            HeadFault::UnsupportedCoding,
            "unsupported transfer-encoding",
        ),
        (HeadFault::MissingStatus, "missing status code"),
        (HeadFault::Token, "invalid token"),
    ] {
        assert_eq!(fault.to_string(), text);
        assert_eq!(
            HttpError::BadHead(fault).to_string(),
            std::format!("HTTP response head is malformed: {text}")
        );
    }
}
