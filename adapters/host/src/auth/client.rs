//! The authorization client's own HTTP: one request on a fresh connection (through the slot's
//! proxy and trust), `connection: close`, a capped reply read under a deadline. Metadata GETs,
//! token and registration POSTs, the authorization-URL GET, and the challenge probe.
//!
//! Owns: request bytes and reading the reply (head by `httparse`, body framing by the core's
//! `ResponseDecoder`). Does not own: what to request (the `decide` module and the flow).

use std::time::Instant;

use async_io::Timer;
use embedded_io_async::{Read, Write};
use verifi_mcp_core::buf::{Buf, Sink};
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::http::{Decoded, ResponseDecoder, ResponseLimits};

use crate::buf::VecBuf;
use crate::net::{HostNet, Route, key_of};

/// Largest reply (head and body) the authorization client reads.
pub const MAX_AUTH_REPLY: usize = 256 * 1024;
/// Largest reply head.
const MAX_HEAD: usize = 16 * 1024;

/// A reply: status, the headers (names lower-case), the body without framing.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// Every header, lower-case name, value as text (lossy).
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl HttpReply {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// Why a request of the authorization client failed (before any reply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFailure {
    /// The URL (never with credentials: URLs here carry none).
    pub url: String,
    /// What happened.
    pub detail: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.url, self.detail)
    }
}

/// One request.
pub struct Request<'a> {
    /// `GET` or `POST`.
    pub method: &'a str,
    /// The absolute URL.
    pub url: &'a str,
    /// Extra headers (names as given).
    pub headers: &'a [(&'a str, &'a str)],
    /// `(content-type, body)` for a POST.
    pub body: Option<(&'a str, &'a [u8])>,
    /// `accept`.
    pub accept: &'a str,
}

/// Sends `req` on a fresh connection over `route` and reads the reply, by `deadline`.
pub async fn send(
    net: &HostNet,
    route: &Route,
    req: &Request<'_>,
    deadline: Instant,
) -> Result<HttpReply, HttpFailure> {
    let fail = |detail: String| HttpFailure {
        url: req.url.to_owned(),
        detail,
    };
    let work = async {
        let ep = Endpoint::parse_exact(req.url).map_err(|e| fail(e.to_string()))?;
        let ep = route.endpoint(ep);
        let mut head = VecBuf::with_limit(MAX_HEAD + req.body.map_or(0, |(_, b)| b.len()));
        let sink_err = |_| fail("request too large".into());
        head.put(req.method.as_bytes()).map_err(sink_err)?;
        head.put(b" ").map_err(sink_err)?;
        ep.write_target(&mut head).map_err(sink_err)?;
        head.put(b" HTTP/1.1\r\nhost: ").map_err(sink_err)?;
        ep.write_host_header(&mut head).map_err(sink_err)?;
        let mut text = format!(
            "\r\nuser-agent: {}\r\naccept: {}\r\nconnection: close\r\n",
            verifi_mcp_core::wire::http::USER_AGENT,
            req.accept
        );
        for (n, v) in req.headers {
            if v.contains(['\r', '\n']) || n.contains(['\r', '\n', ':']) {
                return Err(fail("header with CR, LF or ':' in its name".into()));
            }
            text.push_str(&format!("{n}: {v}\r\n"));
        }
        if let Some((ct, b)) = req.body {
            text.push_str(&format!(
                "content-type: {ct}\r\ncontent-length: {}\r\n",
                b.len()
            ));
        }
        text.push_str("\r\n");
        head.put(text.as_bytes()).map_err(sink_err)?;
        if let Some((_, b)) = req.body {
            head.put(b).map_err(sink_err)?;
        }
        let (mut conn, _) = net
            .open_routed(&key_of(&ep), route, true)
            .await
            .map_err(|e| fail(format!("could not connect: {e}")))?;
        conn.write_all(head.bytes())
            .await
            .map_err(|e| fail(format!("send failed: {e}")))?;
        conn.flush()
            .await
            .map_err(|e| fail(format!("send failed: {e}")))?;
        let mut raw = Vec::new();
        let mut storage = vec![0u8; MAX_HEAD];
        let mut dec = ResponseDecoder::new(
            &mut storage,
            ResponseLimits {
                max_head_bytes: MAX_HEAD,
                max_body_bytes: MAX_AUTH_REPLY as u64,
            },
        );
        let mut status = 0u16;
        let mut body = Vec::new();
        let mut buf = vec![0u8; 8 * 1024];
        'read: loop {
            let n = conn
                .read(&mut buf)
                .await
                .map_err(|e| fail(format!("read failed: {e}")))?;
            if n == 0 {
                match dec.finish() {
                    Ok(_) => break,
                    Err(e) => return Err(fail(format!("reply cut short: {e}"))),
                }
            }
            if raw.len() + n > MAX_AUTH_REPLY + MAX_HEAD {
                return Err(fail(format!("reply larger than {MAX_AUTH_REPLY} bytes")));
            }
            let chunk = buf.get(..n).unwrap_or(&[]);
            if status == 0 {
                raw.extend_from_slice(chunk);
            }
            // Decode until the decoder wants more: `End` may come on an empty input, right
            // after the last body byte.
            let mut input = chunk;
            loop {
                let (used, d) = dec
                    .decode(input)
                    .map_err(|e| fail(format!("reply refused: {e}")))?;
                input = input.get(used..).unwrap_or(&[]);
                match d {
                    Decoded::NeedMore => break,
                    Decoded::Head(h) => status = h.status,
                    Decoded::Body(b) => {
                        body.extend_from_slice(b);
                        if used == 0 {
                            break;
                        }
                    }
                    Decoded::End => break 'read,
                }
            }
        }
        let headers = parse_headers(&raw);
        Ok(HttpReply {
            status,
            headers,
            body,
        })
    };
    futures_lite::future::or(work, async {
        Timer::at(deadline).await;
        Err(fail("timed out".into()))
    })
    .await
}

/// The `WWW-Authenticate` value of the reply head at the start of `head` (a call's head
/// buffer), when that head's status is `status`.
pub fn challenge_in_head(head: &[u8], status: u16) -> Option<String> {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) if resp.code == Some(status) => resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("www-authenticate"))
            .map(|h| String::from_utf8_lossy(h.value).into_owned()),
        _ => None,
    }
}

/// The headers of the final head in `raw` (1xx heads skipped).
fn parse_headers(mut raw: &[u8]) -> Vec<(String, String)> {
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut hs);
        match resp.parse(raw) {
            Ok(httparse::Status::Complete(len)) => {
                if resp.code.is_some_and(|c| (100..200).contains(&c)) {
                    raw = raw.get(len..).unwrap_or(&[]);
                    continue;
                }
                return resp
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
            }
            _ => return Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_the_final_head() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer scope=\"a\"\r\ncontent-length: 0\r\n\r\n";
        let h = parse_headers(raw);
        assert_eq!(
            h[0],
            ("www-authenticate".into(), "Bearer scope=\"a\"".into())
        );
        assert!(parse_headers(b"garbage").is_empty());
    }

    #[test]
    fn challenges_are_read_from_a_head_buffer_of_that_status() {
        let mut buf = vec![0u8; 256];
        let head = b"HTTP/1.1 403 Forbidden\r\nWWW-Authenticate: Bearer error=\"insufficient_scope\"\r\ncontent-length: 0\r\n\r\n";
        buf[..head.len()].copy_from_slice(head);
        assert_eq!(
            challenge_in_head(&buf, 403).as_deref(),
            Some("Bearer error=\"insufficient_scope\"")
        );
        assert_eq!(challenge_in_head(&buf, 401), None);
        assert_eq!(challenge_in_head(b"HTTP/1.1 403 X\r\n\r\n", 403), None);
        assert_eq!(challenge_in_head(&[0u8; 64], 403), None);
    }
}
