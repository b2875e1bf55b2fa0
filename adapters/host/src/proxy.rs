//! `proxy`: which forward proxy (if any) a connection goes through, and the `CONNECT` tunnel.
//!
//! Owns: parsing a proxy URL (`http://[user:pass@]host[:port]`), the environment's
//! `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` (either case), the choice for one target (an
//! explicit proxy wins over the environment and applies to loopback targets too; the
//! environment's proxies skip loopback and `NO_PROXY` targets), and opening a `CONNECT` tunnel
//! on a connected socket. Proxy credentials are secrets of the run.
//! Does not own: sockets or TLS (`net`); the request's absolute form is the core's `Endpoint`.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use verifi_mcp_core::wire::endpoint::Endpoint;

/// A forward proxy: where it listens and, optionally, its basic credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `user:password`, base64 (the `proxy-authorization: Basic` value).
    basic: Option<String>,
    /// The password as given and decoded (a secret of the run).
    password: Option<String>,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the credentials.
        write!(f, "Proxy({})", self.label())
    }
}

/// A proxy URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyError(pub String);

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad proxy: {}", self.0)
    }
}

impl std::error::Error for ProxyError {}

impl Proxy {
    /// Parses `http://[user[:password]@]host[:port][/]` (no scheme means `http://`; the port
    /// defaults to 80 as in the URL). `user` and `password` are percent-decoded.
    pub fn parse(url: &str) -> Result<Proxy, ProxyError> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err(ProxyError(format!(
                    "scheme {scheme}:// is not supported; give an http:// proxy"
                )));
            }
            None => url,
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let ep = host_port(hostport).map_err(|e| {
            ProxyError(format!(
                "{e} (in the proxy address; credentials are hidden)"
            ))
        })?;
        let (basic, password) = match userinfo {
            None => (None, None),
            Some(u) => {
                let (user, pass) = u.split_once(':').unwrap_or((u, ""));
                let dec = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8()
                        .map(|c| c.into_owned())
                        .map_err(|_| ProxyError("credentials are not UTF-8".into()))
                };
                let (user, pass) = (dec(user)?, dec(pass)?);
                (
                    Some(STANDARD.encode(format!("{user}:{pass}"))),
                    (!pass.is_empty()).then_some(pass),
                )
            }
        };
        Ok(Proxy {
            host: ep.0,
            port: ep.1,
            basic,
            password,
        })
    }

    /// The proxy's host (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://host:port`, without credentials: safe to print.
    pub fn label(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }

    /// Whether the proxy has credentials.
    pub fn has_credentials(&self) -> bool {
        self.basic.is_some()
    }

    /// The values to redact: the password and the basic header value.
    pub fn secrets(&self) -> impl Iterator<Item = String> + '_ {
        self.password.iter().chain(self.basic.iter()).cloned()
    }
}

/// `host[:port]` checked with the core's URL rules, owned.
fn host_port(hostport: &str) -> Result<(String, u16), String> {
    if hostport.contains(['/', '?', '#']) {
        return Err("a proxy URL has no path".into());
    }
    let url = format!("http://{hostport}");
    let ep = Endpoint::parse_exact(&url).map_err(|e| e.to_string())?;
    Ok((ep.host().to_owned(), ep.port()))
}

/// One `NO_PROXY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxyEntry {
    /// `*`: nothing goes through the environment's proxies.
    All,
    /// A host name: itself and its subdomains (`example.com`, `.example.com`).
    Domain(String),
    /// An address, or a network in CIDR form.
    Net(IpAddr, u8),
}

/// The environment's `NO_PROXY` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy(Vec<NoProxyEntry>);

impl NoProxy {
    /// Parses a comma- (or space-) separated list: `*`, host names, domains (`.corp`), IP
    /// addresses and CIDR networks; a `:port` suffix on a name is ignored.
    pub fn parse(list: &str) -> NoProxy {
        let mut out = Vec::new();
        for raw in list
            .split([',', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if raw == "*" {
                out.push(NoProxyEntry::All);
                continue;
            }
            let unbracketed = raw.trim_start_matches('[');
            let (addr, bits) = match unbracketed.split_once('/') {
                Some((a, b)) => (a, b.parse::<u8>().ok()),
                None => (unbracketed.split(']').next().unwrap_or(unbracketed), None),
            };
            if let Ok(ip) = addr.parse::<IpAddr>() {
                let max = if ip.is_ipv4() { 32 } else { 128 };
                out.push(NoProxyEntry::Net(ip, bits.unwrap_or(max).min(max)));
                continue;
            }
            let name = raw.rsplit_once(':').map_or(raw, |(h, _)| h);
            let name = name.trim_start_matches("*.").trim_start_matches('.');
            if !name.is_empty() {
                out.push(NoProxyEntry::Domain(name.to_ascii_lowercase()));
            }
        }
        NoProxy(out)
    }

    /// Whether `host` is excluded from the environment's proxies.
    pub fn excludes(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.0.iter().any(|e| match e {
            NoProxyEntry::All => true,
            NoProxyEntry::Domain(d) => {
                host == *d
                    || host
                        .strip_suffix(d.as_str())
                        .is_some_and(|p| p.ends_with('.'))
            }
            NoProxyEntry::Net(net, bits) => ip.is_some_and(|ip| in_net(ip, *net, *bits)),
        })
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Whether `host` is this machine (`localhost`, 127.0.0.0/8, `::1`).
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost"
        || h.ends_with(".localhost")
        || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The proxies the environment names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvProxies {
    /// For `https` targets (`HTTPS_PROXY`).
    pub https: Option<Proxy>,
    /// For `http` targets (`HTTP_PROXY`).
    pub http: Option<Proxy>,
    /// Targets that go direct (`NO_PROXY`).
    pub no_proxy: NoProxy,
}

impl EnvProxies {
    /// Reads `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` from `vars` (the lower-case spelling wins
    /// over the upper-case one, as curl reads them; empty means unset).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, ProxyError> {
        let (mut https, mut http, mut no) = ([None, None], [None, None], [None, None]);
        for (k, v) in vars {
            if v.trim().is_empty() {
                continue;
            }
            let slot = match k.as_str() {
                "https_proxy" => &mut https[0],
                "HTTPS_PROXY" => &mut https[1],
                "http_proxy" => &mut http[0],
                "HTTP_PROXY" => &mut http[1],
                "no_proxy" => &mut no[0],
                "NO_PROXY" => &mut no[1],
                _ => continue,
            };
            *slot = Some(v);
        }
        let pick = |[lower, upper]: [Option<String>; 2]| lower.or(upper);
        let parse = |name: &str, v: Option<String>| {
            v.map(|v| Proxy::parse(&v).map_err(|e| ProxyError(format!("{name}: {}", e.0))))
                .transpose()
        };
        Ok(EnvProxies {
            https: parse("HTTPS_PROXY", pick(https))?,
            http: parse("HTTP_PROXY", pick(http))?,
            no_proxy: pick(no).map(|s| NoProxy::parse(&s)).unwrap_or_default(),
        })
    }
}

/// How one slot's connections are routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyRule {
    /// Always direct.
    Direct,
    /// Always through this proxy, loopback targets included.
    Explicit(Arc<Proxy>),
    /// As the environment says: its proxy for the scheme, except loopback and `NO_PROXY`.
    Env(Arc<EnvProxies>),
}

impl ProxyRule {
    /// The proxy for a target, or `None` for a direct connection.
    pub fn proxy_for(&self, tls: bool, host: &str) -> Option<&Proxy> {
        match self {
            ProxyRule::Direct => None,
            ProxyRule::Explicit(p) => Some(p),
            ProxyRule::Env(env) => {
                if is_loopback(host) || env.no_proxy.excludes(host) {
                    return None;
                }
                if tls {
                    env.https.as_ref()
                } else {
                    env.http.as_ref()
                }
            }
        }
    }

    /// The rule a manifest's or option's `proxy` value sets: `""`, `"none"` or `"direct"` mean
    /// direct, anything else is a proxy URL.
    pub fn explicit(value: &str) -> Result<ProxyRule, ProxyError> {
        match value.trim() {
            "" | "none" | "direct" => Ok(ProxyRule::Direct),
            url => Ok(ProxyRule::Explicit(Arc::new(Proxy::parse(url)?))),
        }
    }

    /// The secrets the rule's proxies carry.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            ProxyRule::Direct => Vec::new(),
            ProxyRule::Explicit(p) => p.secrets().collect(),
            ProxyRule::Env(e) => e
                .https
                .iter()
                .chain(&e.http)
                .flat_map(Proxy::secrets)
                .collect(),
        }
    }
}

/// How a connection through a proxy is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A `CONNECT` tunnel (every `https` target, and `http` when the proxy has credentials,
    /// so they go to the proxy alone and never to a server).
    Tunnel,
    /// Plain requests in absolute form to the proxy (`http` targets, proxy without credentials).
    AbsoluteForm,
}

/// How a target is reached through `proxy`.
pub fn via(proxy: &Proxy, tls: bool) -> Via {
    if tls || proxy.has_credentials() {
        Via::Tunnel
    } else {
        Via::AbsoluteForm
    }
}

/// Largest `CONNECT` reply head read.
const MAX_CONNECT_HEAD: usize = 8 * 1024;

/// Why a `CONNECT` tunnel was not opened.
#[derive(Debug)]
pub enum TunnelError {
    /// Writing or reading the socket failed.
    Io(std::io::Error),
    /// The proxy answered with something other than 2xx.
    Refused {
        /// The status code.
        status: u16,
        /// The reason phrase (capped).
        reason: String,
    },
    /// The proxy wants credentials (407, or 401 as tinyproxy answers), or refused the ones
    /// sent.
    Credentials {
        /// The status code.
        status: u16,
        /// Whether credentials were sent.
        sent: bool,
    },
    /// The reply was not an HTTP head, or too big, or ended early.
    Malformed(&'static str),
}

impl fmt::Display for TunnelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunnelError::Io(e) => write!(f, "proxy: {e}"),
            TunnelError::Credentials {
                status,
                sent: false,
            } => write!(
                f,
                "proxy wants credentials ({status}); put user:pass@ in the proxy URL"
            ),
            TunnelError::Credentials { status, sent: true } => {
                write!(f, "proxy refused the credentials in its URL ({status})")
            }
            TunnelError::Refused { status, reason } => {
                write!(f, "proxy refused the tunnel: {status} {reason}")
            }
            TunnelError::Malformed(what) => write!(f, "proxy reply: {what}"),
        }
    }
}

impl std::error::Error for TunnelError {}

/// Asks `proxy` on `io` for a tunnel to `host:port` and reads its answer (no byte past the
/// head is consumed: the server speaks only after we do).
pub async fn connect_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    proxy: &Proxy,
    host: &str,
    port: u16,
) -> Result<(), TunnelError> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut req = format!("CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\n");
    if let Some(b) = &proxy.basic {
        req.push_str("proxy-authorization: Basic ");
        req.push_str(b);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    io.write_all(req.as_bytes())
        .await
        .map_err(TunnelError::Io)?;
    io.flush().await.map_err(TunnelError::Io)?;
    // One byte at a time: a head is short, and nothing after it may be taken from the stream.
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if head.len() >= MAX_CONNECT_HEAD {
            return Err(TunnelError::Malformed("head larger than 8 KiB"));
        }
        match io.read(&mut byte).await.map_err(TunnelError::Io)? {
            0 => return Err(TunnelError::Malformed("closed before the end of its head")),
            _ => head.push(byte[0]),
        }
    }
    parse_connect_reply(&head, proxy.has_credentials())
}

/// The verdict of a `CONNECT` reply head (`sent`: credentials were sent).
pub fn parse_connect_reply(head: &[u8], sent: bool) -> Result<(), TunnelError> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = std::str::from_utf8(line)
        .map_err(|_| TunnelError::Malformed("status line is not text"))?
        .trim_end();
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(TunnelError::Malformed("not an HTTP/1.x status line"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or(TunnelError::Malformed("status code is not a number"))?;
    if (200..300).contains(&status) {
        return Ok(());
    }
    if status == 407 || status == 401 {
        return Err(TunnelError::Credentials { status, sent });
    }
    let reason: String = parts.next().unwrap_or("").chars().take(40).collect();
    Err(TunnelError::Refused { status, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvProxies {
        EnvProxies::from_vars(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
        .unwrap()
    }

    #[test]
    fn proxy_urls_parse_and_hide_their_credentials() {
        let p = Proxy::parse("http://al%40ce:s3cr%3At@proxy.corp:3128/").unwrap();
        assert_eq!((p.host(), p.port()), ("proxy.corp", 3128));
        assert_eq!(p.label(), "http://proxy.corp:3128");
        assert_eq!(format!("{p:?}"), "Proxy(http://proxy.corp:3128)");
        let secrets: Vec<String> = p.secrets().collect();
        assert_eq!(secrets[0], "s3cr:t");
        assert_eq!(STANDARD.decode(&secrets[1]).unwrap(), b"al@ce:s3cr:t");
        let bare = Proxy::parse("127.0.0.1:8888").unwrap();
        assert_eq!(bare.label(), "http://127.0.0.1:8888");
        assert!(!bare.has_credentials());
        assert_eq!(
            Proxy::parse("http://[::1]").unwrap().label(),
            "http://[::1]:80"
        );
        for bad in [
            "socks5://h:1",
            "https://h:1",
            "http://h:0",
            "http://h:1/path",
            "http://",
        ] {
            let e = Proxy::parse(bad).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
        let e = Proxy::parse("http://user:hunter2@bad host:1").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn no_proxy_matches_names_domains_addresses_and_networks() {
        let n = NoProxy::parse("corp.example, .lab ,10.0.0.0/8,[::1],192.168.1.5, db:5432");
        assert!(n.excludes("corp.example"));
        assert!(n.excludes("a.corp.example"));
        assert!(!n.excludes("notcorp.example"));
        assert!(n.excludes("x.lab") && n.excludes("lab"));
        assert!(n.excludes("10.200.3.4") && !n.excludes("11.0.0.1"));
        assert!(n.excludes("::1") && n.excludes("192.168.1.5") && !n.excludes("192.168.1.6"));
        assert!(n.excludes("db"));
        assert!(NoProxy::parse("*").excludes("anything.at.all"));
        assert!(!NoProxy::parse("").excludes("x"));
        assert!(NoProxy::parse("0.0.0.0/0").excludes("8.8.8.8"));
    }

    #[test]
    fn explicit_wins_over_env_and_covers_loopback() {
        let e = Arc::new(env(&[
            ("HTTPS_PROXY", "http://up:1"),
            ("https_proxy", "http://low:2"),
            ("HTTP_PROXY", "http://plain:3"),
            ("NO_PROXY", "skip.me"),
        ]));
        let rule = ProxyRule::Env(e.clone());
        assert_eq!(
            rule.proxy_for(true, "mcp.example").unwrap().label(),
            "http://low:2"
        );
        assert_eq!(
            rule.proxy_for(false, "mcp.example").unwrap().label(),
            "http://plain:3"
        );
        assert_eq!(rule.proxy_for(true, "skip.me"), None);
        assert_eq!(
            rule.proxy_for(true, "127.0.0.1"),
            None,
            "env proxies skip loopback"
        );
        assert_eq!(rule.proxy_for(true, "localhost"), None);
        assert_eq!(rule.proxy_for(true, "::1"), None);
        let explicit = ProxyRule::explicit("http://127.0.0.1:9").unwrap();
        assert_eq!(explicit.proxy_for(false, "127.0.0.1").unwrap().port(), 9);
        assert_eq!(explicit.proxy_for(true, "skip.me").unwrap().port(), 9);
        assert_eq!(
            ProxyRule::explicit("none").unwrap().proxy_for(true, "x"),
            None
        );
        assert_eq!(ProxyRule::Env(Arc::default()).proxy_for(true, "x"), None);
        let bad = EnvProxies::from_vars([("HTTP_PROXY".into(), "ftp://x".into())]).unwrap_err();
        assert!(bad.to_string().contains("HTTP_PROXY"), "{bad}");
    }

    #[test]
    fn https_and_credentialed_proxies_tunnel() {
        let plain = Proxy::parse("http://p:1").unwrap();
        let cred = Proxy::parse("http://u:pw@p:1").unwrap();
        assert_eq!(via(&plain, true), Via::Tunnel);
        assert_eq!(via(&plain, false), Via::AbsoluteForm);
        assert_eq!(via(&cred, false), Via::Tunnel);
    }

    #[test]
    fn connect_replies_are_judged() {
        assert!(parse_connect_reply(b"HTTP/1.1 200 Connection established\r\n\r\n", false).is_ok());
        assert!(parse_connect_reply(b"HTTP/1.0 200 OK\r\n\r\n", true).is_ok());
        let e = parse_connect_reply(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", false);
        assert_eq!(
            e.unwrap_err().to_string(),
            "proxy wants credentials (407); put user:pass@ in the proxy URL"
        );
        let e = parse_connect_reply(b"HTTP/1.1 401 Unauthorized\r\n\r\n", true);
        assert_eq!(
            e.unwrap_err().to_string(),
            "proxy refused the credentials in its URL (401)"
        );
        let e = parse_connect_reply(b"HTTP/1.1 403 Forbidden\r\n\r\n", false).unwrap_err();
        assert_eq!(e.to_string(), "proxy refused the tunnel: 403 Forbidden");
        assert!(parse_connect_reply(b"SSH-2.0-x\r\n\r\n", false).is_err());
        assert!(parse_connect_reply(b"HTTP/1.1 abc\r\n\r\n", false).is_err());
    }

    #[test]
    fn tunnel_sends_credentials_only_in_connect_and_stops_at_the_head() {
        let proxy = Proxy::parse("http://u:pw@p:1").unwrap();
        let mut io = Duplex {
            input: b"HTTP/1.1 200 OK\r\nx: y\r\n\r\nSERVER".to_vec(),
            output: Vec::new(),
        };
        futures_lite::future::block_on(connect_tunnel(&mut io, &proxy, "::1", 8443)).unwrap();
        let sent = String::from_utf8(io.output.clone()).unwrap();
        assert!(sent.starts_with("CONNECT [::1]:8443 HTTP/1.1\r\nhost: [::1]:8443\r\n"));
        assert!(sent.contains(&format!(
            "proxy-authorization: Basic {}\r\n",
            STANDARD.encode("u:pw")
        )));
        assert_eq!(
            io.input, b"SERVER",
            "bytes after the head stay in the stream"
        );
        let mut short = Duplex {
            input: b"HTTP/1.1 200".to_vec(),
            output: Vec::new(),
        };
        let e = futures_lite::future::block_on(connect_tunnel(&mut short, &proxy, "h", 1));
        assert!(matches!(e, Err(TunnelError::Malformed(_))));
        let mut huge = Duplex {
            input: vec![b'a'; 20_000],
            output: Vec::new(),
        };
        let e = futures_lite::future::block_on(connect_tunnel(&mut huge, &proxy, "h", 1));
        assert!(matches!(e, Err(TunnelError::Malformed(_))));
    }

    /// An in-memory byte pipe: reads drain `input`, writes fill `output`.
    struct Duplex {
        input: Vec<u8>,
        output: Vec<u8>,
    }

    impl AsyncRead for Duplex {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.input.len());
            buf[..n].copy_from_slice(&self.input[..n]);
            self.input.drain(..n);
            std::task::Poll::Ready(Ok(n))
        }
    }

    impl AsyncWrite for Duplex {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.output.extend_from_slice(buf);
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }
}
