//! `endpoint`: parsing a server address `http(s)://host[:port][/path][?query]`.
//!
//! Owns: checking the URL once, up front (scheme, host, port, no userinfo, no fragment, no bytes
//! that could break a request line), and writing the request target and the `host` header.
//! Does not own: name resolution, connecting, TLS, or percent-decoding (paths are sent as given).

use core::fmt;

use crate::buf::{Overflow, Sink};
use crate::wire::json::JsonOut;

/// The URL scheme: plain TCP or TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Scheme {
    /// `http://`, default port 80.
    Http,
    /// `https://`, default port 443.
    Https,
}

impl Scheme {
    /// The port used when the URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Why a URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum EndpointError {
    /// No `scheme://` prefix.
    MissingScheme,
    /// A scheme other than `http` or `https`.
    UnsupportedScheme,
    /// Nothing between `://` and the path.
    EmptyHost,
    /// A port that is empty, not decimal, 0 or above 65535.
    BadPort,
    /// A host with characters a host name or IP literal cannot hold.
    BadHost,
    /// `user@host`: credentials belong in headers, not in the URL.
    Userinfo,
    /// `#fragment`: a fragment is never sent, so it is refused rather than dropped.
    Fragment,
    /// A path or query with spaces, control or non-ASCII characters.
    BadPath,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for EndpointError {
    fn words(&self, out: &mut dyn crate::buf::Sink) -> Result<(), crate::buf::Overflow> {
        use crate::wire::words::{Arg, Msg};
        let what = match self {
            EndpointError::MissingScheme => Msg::NoScheme,
            EndpointError::UnsupportedScheme => Msg::BadScheme,
            EndpointError::EmptyHost => Msg::EmptyHost,
            EndpointError::BadPort => Msg::BadPort,
            EndpointError::BadHost => Msg::BadHost,
            EndpointError::Userinfo => Msg::Userinfo,
            EndpointError::Fragment => Msg::UrlFragment,
            EndpointError::BadPath => Msg::BadPath,
        };
        what.say(out, [Arg::None, Arg::None])
    }
}

impl core::error::Error for EndpointError {}

/// A checked server address. Borrowed from the string it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Endpoint<'a> {
    scheme: Scheme,
    host: &'a str,
    ipv6: bool,
    port: u16,
    path: &'a str,
    query: Option<&'a str>,
    append_mcp: bool,
    absolute_form: bool,
}

impl<'a> Endpoint<'a> {
    /// A manifest endpoint: `http(s)://host[:port][/base][?query]`; the MCP URL is base + "/mcp"
    /// (no doubled slash: "http://h/" and "http://h" give "/mcp"; "http://h/api/" gives "/api/mcp").
    /// A base whose last path segment already is `mcp` ("http://h/mcp", "http://h/api/mcp/") is
    /// taken as the full MCP URL (without a trailing slash, as for any base) and gets no second one: people paste the URL their server
    /// prints. A server really mounted at `/mcp/mcp` is reached with [`Endpoint::parse_exact`].
    pub fn parse_base(s: &'a str) -> Result<Self, EndpointError> {
        let mut e = Self::parse(s, true)?;
        let trimmed = trim_slashes(e.path);
        if trimmed.ends_with("/mcp") {
            e.append_mcp = false;
            e.path = trimmed;
        }
        Ok(e)
    }

    /// Whether the MCP URL is this endpoint's path with `/mcp` appended (a base URL), or the path
    /// as given.
    pub fn appends_mcp(&self) -> bool {
        self.append_mcp
    }

    /// An exact MCP URL, used as given (servers mounted elsewhere); an empty path is `/`.
    pub fn parse_exact(s: &'a str) -> Result<Self, EndpointError> {
        Self::parse(s, false)
    }

    // Byte by byte, on offsets into `s` (every delimiter is ASCII, so every cut is at a
    // character boundary; the parts are cut from `s` once, at the end): the checks in this
    // order, each error the first that applies.
    fn parse(s: &'a str, append_mcp: bool) -> Result<Self, EndpointError> {
        use EndpointError::*;
        let bytes = s.as_bytes();
        let sep = crate::buf::find(bytes, b"://")
            .filter(|&i| i > 0)
            .ok_or(MissingScheme)?;
        let scheme_str = bytes.get(..sep).unwrap_or(&[]);
        let scheme = if scheme_str.eq_ignore_ascii_case(b"http") {
            Scheme::Http
        } else if scheme_str.eq_ignore_ascii_case(b"https") {
            Scheme::Https
        } else {
            return Err(UnsupportedScheme);
        };
        let at = |t: &[u8], c: u8| t.iter().position(|&b| b == c);
        // The authority and what follows it start here.
        let start = sep + 3;
        let rest = bytes.get(start..).unwrap_or(&[]);
        if at(rest, b'#').is_some() {
            return Err(Fragment);
        }
        let auth_len = rest
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .unwrap_or(rest.len());
        let authority = rest.get(..auth_len).unwrap_or(&[]);
        let tail = rest.get(auth_len..).unwrap_or(&[]);
        if at(authority, b'@').is_some() {
            return Err(Userinfo);
        }
        // The path and the query (after the first `?`) are checked at once: `?` is graphic.
        if !tail.iter().all(u8::is_ascii_graphic) {
            return Err(BadPath);
        }
        if authority.is_empty() {
            return Err(EmptyHost);
        }
        // The host's span in `authority`, and the port's digits when a port is written.
        let (host, ipv6, port_str) = if authority.first() == Some(&b'[') {
            let close = at(authority, b']').ok_or(BadHost)?;
            let h = authority.get(1..close).unwrap_or(&[]);
            let ok = at(h, b':').is_some()
                && h.iter()
                    .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
            if !ok {
                return Err(BadHost);
            }
            let port = match authority.get(close + 1..).unwrap_or(&[]).split_first() {
                None => None,
                Some((b':', p)) => Some(p),
                Some(_) => return Err(BadHost),
            };
            ((1, close), true, port)
        } else {
            let colon = at(authority, b':');
            let end = colon.unwrap_or(authority.len());
            let h = authority.get(..end).unwrap_or(&[]);
            if h.is_empty() {
                return Err(EmptyHost);
            }
            let ok = h
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
            if !ok {
                return Err(BadHost);
            }
            let port = colon.map(|i| authority.get(i + 1..).unwrap_or(&[]));
            ((0, end), false, port)
        };
        let port = match port_str {
            None => scheme.default_port(),
            Some(p) => parse_port(p)?,
        };
        let tail_at = start + auth_len;
        let query_at = at(tail, b'?');
        Ok(Endpoint {
            scheme,
            host: cut(s, start + host.0, start + host.1),
            ipv6,
            port,
            path: cut(s, tail_at, tail_at + query_at.unwrap_or(tail.len())),
            query: query_at.map(|i| cut(s, tail_at + i + 1, bytes.len())),
            append_mcp,
            absolute_form: false,
        })
    }

    /// The same endpoint, with its request target in absolute form
    /// (`http://host:port/path`) when `on`: what a plain-HTTP request through a forward proxy
    /// carries (RFC 9112, section 3.2.2). The adapter that routes through a proxy says so.
    pub fn with_absolute_form(mut self, on: bool) -> Self {
        self.absolute_form = on;
        self
    }

    /// Whether the request target is written in absolute form.
    pub fn absolute_form(&self) -> bool {
        self.absolute_form
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host as used for connecting, DNS and TLS SNI (IPv6 without brackets).
    pub fn host(&self) -> &'a str {
        self.host
    }

    /// The port: as written, else 80 for `http` and 443 for `https`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Writes the request target, e.g. `/api/mcp?x=1` (or `http://h:80/api/mcp?x=1` in
    /// absolute form).
    pub fn write_target(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        let mut w = JsonOut::new(out);
        self.target_to(&mut w);
        w.done()
    }

    /// Writes the `host` header value, always with the port: `h:8080`, `[::1]:80`.
    pub fn write_host_header(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        let mut w = JsonOut::new(out);
        self.host_to(&mut w);
        w.done()
    }

    /// [`Self::write_target`] through a writer that keeps the first overflow (a request
    /// head's), without a check after each piece.
    pub(crate) fn target_to<S: Sink>(&self, out: &mut JsonOut<S>) {
        if self.absolute_form {
            out.lit(match self.scheme {
                Scheme::Http => b"http://",
                Scheme::Https => b"https://",
            });
            self.host_to(out);
        }
        if self.append_mcp {
            out.lit(trim_slashes(self.path).as_bytes());
            out.lit(b"/mcp");
        } else if self.path.is_empty() {
            out.lit(b"/");
        } else {
            out.lit(self.path.as_bytes());
        }
        if let Some(q) = self.query {
            out.lit(b"?");
            out.lit(q.as_bytes());
        }
    }

    /// [`Self::write_host_header`] through a writer that keeps the first overflow.
    pub(crate) fn host_to<S: Sink>(&self, out: &mut JsonOut<S>) {
        if self.ipv6 {
            out.lit(b"[");
            out.lit(self.host.as_bytes());
            out.lit(b"]");
        } else {
            out.lit(self.host.as_bytes());
        }
        out.lit(b":");
        out.num(u64::from(self.port));
    }
}

/// Where a parsed endpoint's parts lie in the string it was parsed from, with its flags: an
/// adapter that keeps the string (a slot's manifest endpoint) rebuilds the endpoint from it
/// per call ([`EndpointShape::endpoint`]) instead of parsing and checking it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointShape {
    scheme: Scheme,
    ipv6: bool,
    port: u16,
    len: usize,
    host: (usize, usize),
    path: (usize, usize),
    query: Option<(usize, usize)>,
    append_mcp: bool,
    absolute_form: bool,
}

/// Where `part` lies in `whole`, when it is a slice of it.
fn span(whole: &str, part: &str) -> Option<(usize, usize)> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some((start, end))
}

impl Endpoint<'_> {
    /// This endpoint's shape in `s`, the string it was parsed from (`None` when its parts do
    /// not lie in `s`; found by address, so only that string gives a meaningful shape).
    pub fn shape(&self, s: &str) -> Option<EndpointShape> {
        Some(EndpointShape {
            scheme: self.scheme,
            ipv6: self.ipv6,
            port: self.port,
            len: s.len(),
            host: span(s, self.host)?,
            path: span(s, self.path)?,
            query: match self.query {
                Some(q) => Some(span(s, q)?),
                None => None,
            },
            append_mcp: self.append_mcp,
            absolute_form: self.absolute_form,
        })
    }
}

impl EndpointShape {
    /// The endpoint again, borrowed from `s`, which must be the string the shape was taken
    /// from: nothing is checked again (a string of another length gives `None`).
    pub fn endpoint<'a>(&self, s: &'a str) -> Option<Endpoint<'a>> {
        if s.len() != self.len {
            return None;
        }
        let part = |(a, b): (usize, usize)| s.get(a..b);
        Some(Endpoint {
            scheme: self.scheme,
            host: part(self.host)?,
            ipv6: self.ipv6,
            port: self.port,
            path: part(self.path)?,
            query: match self.query {
                Some(q) => Some(part(q)?),
                None => None,
            },
            append_mcp: self.append_mcp,
            absolute_form: self.absolute_form,
        })
    }
}

/// `s[from..to]` (empty when that is not a slice of it; the parser cuts at ASCII bytes).
fn cut(s: &str, from: usize, to: usize) -> &str {
    s.get(from..to).unwrap_or("")
}

/// `path` without its trailing slashes.
fn trim_slashes(path: &str) -> &str {
    let mut end = path.len();
    while end > 0 && path.as_bytes().get(end - 1) == Some(&b'/') {
        end -= 1;
    }
    cut(path, 0, end)
}

/// A port: 1 to 5 decimal digits, 1..=65535.
fn parse_port(p: &[u8]) -> Result<u16, EndpointError> {
    let mut n: u32 = 0;
    for &b in p {
        if !b.is_ascii_digit() || p.len() > 5 {
            return Err(EndpointError::BadPort);
        }
        n = n * 10 + u32::from(b - b'0');
    }
    match u16::try_from(n) {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(EndpointError::BadPort),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::SliceBuf;
    use std::string::String;

    fn target(e: &Endpoint<'_>) -> String {
        let mut s = [0u8; 256];
        let mut b = SliceBuf::new(&mut s);
        e.write_target(&mut b).unwrap();
        String::from_utf8(crate::buf::Buf::bytes(&b).to_vec()).unwrap()
    }

    fn host_header(e: &Endpoint<'_>) -> String {
        let mut s = [0u8; 256];
        let mut b = SliceBuf::new(&mut s);
        e.write_host_header(&mut b).unwrap();
        String::from_utf8(crate::buf::Buf::bytes(&b).to_vec()).unwrap()
    }

    #[test]
    fn a_shape_rebuilds_the_endpoint_it_was_taken_from() {
        for url in [
            "http://h",
            "http://h:8080/api/?x=1",
            "https://[::1]:9/mcp/",
            "http://h/a/mcp?q",
            "HTTPS://Example.com",
        ] {
            for e in [Endpoint::parse_base(url), Endpoint::parse_exact(url)] {
                let e = e.unwrap();
                for e in [e, e.with_absolute_form(true)] {
                    let shape = e.shape(url).unwrap();
                    assert_eq!(shape.endpoint(url), Some(e), "{url}");
                    // Another string: refused, never a wrong endpoint of the same length.
                    let longer = std::format!("{url}x");
                    assert_eq!(shape.endpoint(&longer), None, "{url}");
                }
            }
        }
    }

    #[test]
    fn absolute_form_carries_scheme_host_and_port() {
        for (url, t) in [
            ("http://h", "http://h:80/mcp"),
            ("http://h:8080/api/?x=1", "http://h:8080/api/mcp?x=1"),
            ("http://[::1]:9/", "http://[::1]:9/mcp"),
            ("https://h", "https://h:443/mcp"),
        ] {
            let e = Endpoint::parse_base(url).unwrap().with_absolute_form(true);
            assert!(e.absolute_form());
            assert_eq!(target(&e), t, "{url}");
            assert_eq!(host_header(&e), host_header(&e.with_absolute_form(false)));
        }
        let exact = Endpoint::parse_exact("http://h:1").unwrap();
        assert_eq!(target(&exact.with_absolute_form(true)), "http://h:1/");
        assert_eq!(target(&exact), "/");
    }

    #[test]
    fn base_urls_append_mcp_without_doubled_slash() {
        for (url, t) in [
            ("http://h", "/mcp"),
            ("http://h/", "/mcp"),
            ("http://h/api", "/api/mcp"),
            ("http://h/api/", "/api/mcp"),
            ("http://h?x=1", "/mcp?x=1"),
            ("http://h/api/?x=1&y=2", "/api/mcp?x=1&y=2"),
            ("http://h/mcpx", "/mcpx/mcp"),
            ("http://h/xmcp", "/xmcp/mcp"),
        ] {
            let e = Endpoint::parse_base(url).unwrap();
            assert_eq!(target(&e), t, "{url}");
            assert!(e.appends_mcp(), "{url}");
        }
    }

    #[test]
    fn base_urls_that_already_end_in_mcp_get_no_second_one() {
        for (url, t) in [
            ("http://h/mcp", "/mcp"),
            ("http://h/mcp/", "/mcp"),
            ("http://h/api/mcp//", "/api/mcp"),
            ("http://h:8080/api/mcp", "/api/mcp"),
            ("http://h/mcp?x=1", "/mcp?x=1"),
            ("http://h/mcp/mcp", "/mcp/mcp"),
        ] {
            let e = Endpoint::parse_base(url).unwrap();
            assert_eq!(target(&e), t, "{url}");
            assert!(!e.appends_mcp(), "{url}");
        }
    }

    #[test]
    fn exact_urls_are_used_as_given() {
        for (url, t) in [
            ("http://h", "/"),
            ("http://h/", "/"),
            ("http://h/custom/rpc", "/custom/rpc"),
            ("http://h/custom/rpc/", "/custom/rpc/"),
            ("http://h?q", "/?q"),
        ] {
            let e = Endpoint::parse_exact(url).unwrap();
            assert_eq!(target(&e), t, "{url}");
        }
    }

    #[test]
    fn hosts_ports_and_schemes() {
        let e = Endpoint::parse_base("http://127.0.0.1:8080/").unwrap();
        assert_eq!(
            (e.scheme(), e.host(), e.port()),
            (Scheme::Http, "127.0.0.1", 8080)
        );
        assert_eq!(host_header(&e), "127.0.0.1:8080");

        let e = Endpoint::parse_base("HTTPS://Example.com").unwrap();
        assert_eq!(
            (e.scheme(), e.host(), e.port()),
            (Scheme::Https, "Example.com", 443)
        );
        assert_eq!(host_header(&e), "Example.com:443");

        let e = Endpoint::parse_base("http://[::1]/x").unwrap();
        assert_eq!((e.host(), e.port()), ("::1", 80));
        assert_eq!(host_header(&e), "[::1]:80");

        let e = Endpoint::parse_exact("http://[fe80::1:2]:65535?a").unwrap();
        assert_eq!((e.host(), e.port()), ("fe80::1:2", 65535));
        assert_eq!(host_header(&e), "[fe80::1:2]:65535");
        assert_eq!(target(&e), "/?a");

        let e = Endpoint::parse_base("http://[::ffff:127.0.0.1]:1").unwrap();
        assert_eq!((e.host(), e.port()), ("::ffff:127.0.0.1", 1));
    }

    #[test]
    fn bad_urls_give_typed_errors() {
        use EndpointError::*;
        for (url, err) in [
            ("", MissingScheme),
            ("127.0.0.1:8080/mcp", MissingScheme),
            ("://h", MissingScheme),
            ("ftp://h", UnsupportedScheme),
            ("ws://h/mcp", UnsupportedScheme),
            ("http://", EmptyHost),
            ("http:///mcp", EmptyHost),
            ("http://:80/", EmptyHost),
            ("http://h:", BadPort),
            ("http://h:0", BadPort),
            ("http://h:65536", BadPort),
            ("http://h:99999999999", BadPort),
            ("http://h:8a", BadPort),
            ("http://h:+80", BadPort),
            ("http://[::1]:", BadPort),
            ("http://h:80:81", BadPort),
            ("http://ho st/", BadHost),
            ("http://h\r\n/", BadHost),
            ("http://hé/", BadHost),
            ("http://[::1/", BadHost),
            ("http://[]/", BadHost),
            ("http://[zz::1]/", BadHost),
            ("http://[::1]x/", BadHost),
            ("http://user@h/", Userinfo),
            ("http://user:pw@h:80/", Userinfo),
            ("http://h/mcp#frag", Fragment),
            ("http://h#", Fragment),
            ("http://h/a b", BadPath),
            ("http://h/a\r\nx: y", BadPath),
            ("http://h/?q=a b", BadPath),
            ("http://h/ü", BadPath),
        ] {
            assert_eq!(Endpoint::parse_base(url), Err(err), "{url:?}");
            assert_eq!(Endpoint::parse_exact(url), Err(err), "{url:?}");
        }
    }

    #[test]
    fn errors_display_something_actionable() {
        let s = std::format!("{}", EndpointError::Userinfo);
        assert!(s.contains("headers"), "{s}");
        let s = std::format!("{}", EndpointError::BadPort);
        assert!(s.contains("65535"), "{s}");
    }
}
