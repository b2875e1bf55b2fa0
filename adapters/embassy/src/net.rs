//! Connections and time for the driver: [`EdgeNet`] implements the core's `Net` over
//! `embassy_net::tcp::TcpSocket`, with the stack's DNS and `embassy-time`.
//!
//! Owns: a fixed pool of TCP sockets built once from the caller's RX/TX buffers (a socket and
//! its buffers are never freed: a used socket goes back to the pool, idle or kept alive for its
//! endpoint), name resolution, and the mapping of socket errors to `ConnectError`.
//! Does not own: anything about HTTP or MCP (that is the core's driver), nor TLS: `EdgeNet`
//! refuses an `https` endpoint with `ConnectErrorKind::Unsupported` ([`NO_TLS`]) before any
//! packet is sent; with the `tls` feature, `crate::tls::TlsNet` wraps it and speaks TLS 1.3.

use core::cell::RefCell;
use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::{Poll, ready};

use embassy_net::dns::DnsQueryType;
use embassy_net::tcp::{self, State, TcpSocket};
use embassy_net::{IpAddress, IpEndpoint, Stack};
use embassy_time::{Duration, Instant, Timer};
use verifi_mcp_core::drive::{Millis, Net};
use verifi_mcp_core::wire::endpoint::{Endpoint, Scheme};
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind, ConnectWhy};

/// Why [`EdgeNet`] refuses an `https://` endpoint (before any packet is sent).
#[cfg(not(feature = "tls"))]
pub const NO_TLS: &str = "no TLS in this build (verifi-mcp-embassy's tls feature); use http://";
/// Why [`EdgeNet`] refuses an `https://` endpoint (before any packet is sent).
#[cfg(feature = "tls")]
pub const NO_TLS: &str =
    "EdgeNet is plain TCP, no TLS: give the call a TlsNet to reach https:// endpoints";

/// Longest host name a kept-alive socket remembers; longer hosts are served unpooled.
pub const MAX_POOLED_HOST: usize = 64;

/// Connect timeout applied to each TCP socket's SYN retransmissions (the driver's call
/// deadline still bounds the whole call).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint a kept-alive socket is connected to: its host (at most [`MAX_POOLED_HOST`]
/// bytes) and port; written in place when a socket is kept.
struct PoolKey {
    host: [u8; MAX_POOLED_HOST],
    len: u8,
    port: u16,
}

impl PoolKey {
    /// Becomes `ep`'s key; false (the key is then not to be used) for a host too long to
    /// remember.
    fn set(&mut self, ep: &Endpoint<'_>) -> bool {
        let name = ep.host().as_bytes();
        if name.len() > MAX_POOLED_HOST {
            return false;
        }
        // A zip, not `copy_from_slice` (no length check's panic path for equal lengths).
        for (d, s) in self.host.iter_mut().zip(name) {
            *d = *s;
        }
        // At most MAX_POOLED_HOST (64): fits.
        self.len = name.len() as u8;
        self.port = ep.port();
        true
    }

    /// True when this is `ep`'s key.
    fn is(&self, ep: &Endpoint<'_>) -> bool {
        self.port == ep.port()
            && self.host.get(..usize::from(self.len)) == Some(ep.host().as_bytes())
    }
}

/// A kept-alive socket is good for another request only while established with nothing
/// unread: a peer that closed (FIN), reset or left has let it go, and a byte waiting there
/// would be the start of a reply nobody asked for. (Established, both halves are open.)
fn still_good(socket: &TcpSocket<'_>) -> bool {
    socket.state() == State::Established && !socket.can_recv()
}

/// A place of the pool: its socket while it is not lent out, and the endpoint that socket is
/// still connected to, if `kept` (only while it is in).
struct Pooled<'s> {
    socket: Option<TcpSocket<'s>>,
    key: PoolKey,
    kept: bool,
}

/// A new socket of the pool over `rx` and `tx` (one copy of the socket's construction, not
/// one per buffer pair), without Nagle and (a new socket's own) without keep-alive, for
/// every connection it will carry: closing or aborting a socket does not change either.
#[inline(never)]
fn idle_socket<'s>(stack: Stack<'s>, (rx, tx): (&'s mut [u8], &'s mut [u8])) -> Pooled<'s> {
    let mut socket = TcpSocket::new(stack, rx, tx);
    socket.set_nagle_enabled(false);
    Pooled {
        socket: Some(socket),
        key: PoolKey {
            host: [0; MAX_POOLED_HOST],
            len: 0,
            port: 0,
        },
        kept: false,
    }
}

/// The caller's sockets: `N` TCP sockets over the caller's RX/TX buffers, made once at boot.
///
/// The embassy-net `StackResources` must have room for these `N` sockets besides DHCP and DNS.
pub struct SocketPool<'s, const N: usize> {
    places: RefCell<[Pooled<'s>; N]>,
    stack: Stack<'s>,
}

impl<'s, const N: usize> SocketPool<'s, N> {
    /// Builds the pool from `N` pairs of (RX, TX) buffers. Each buffer should hold at least one
    /// TCP segment (1460 bytes); the RX buffer is the TCP receive window.
    pub fn new(stack: Stack<'s>, buffers: [(&'s mut [u8], &'s mut [u8]); N]) -> Self {
        SocketPool {
            places: RefCell::new(buffers.map(|b| idle_socket(stack, b))),
            stack,
        }
    }

    /// Sockets not lent out right now (idle or kept alive).
    pub fn available(&self) -> usize {
        self.places
            .borrow()
            .iter()
            .filter(|p| p.socket.is_some())
            .count()
    }

    /// `ep`'s kept-alive socket, when it is [`still_good`]; a stale one is aborted and stays
    /// in, idle.
    fn take_kept(&self, ep: &Endpoint<'_>) -> Option<TcpSocket<'s>> {
        let mut places = self.places.borrow_mut();
        let place = places.iter_mut().find(|p| p.kept && p.key.is(ep))?;
        place.kept = false;
        let socket = place.socket.as_mut()?;
        if still_good(socket) {
            return place.socket.take();
        }
        socket.abort();
        None
    }

    /// A socket for a new connection: an idle one, else a kept one (aborted).
    fn take_any(&self) -> Option<TcpSocket<'s>> {
        let mut places = self.places.borrow_mut();
        // The first idle one, else the first kept one, in one walk.
        let mut pick = None;
        for place in places.iter_mut().filter(|p| p.socket.is_some()) {
            let idle = !place.kept;
            if pick.is_none() || idle {
                pick = Some(place);
            }
            if idle {
                break;
            }
        }
        let place = pick?;
        place.kept = false;
        let mut socket = place.socket.take()?;
        // A no-op on a closed socket.
        socket.abort();
        Some(socket)
    }

    /// Takes `socket` back, kept alive for `kept` (its endpoint) when that is given.
    fn put_back(&self, socket: TcpSocket<'s>, kept: Option<&Endpoint<'_>>) {
        // There is one free place for every socket lent out.
        if let Some(place) = self
            .places
            .borrow_mut()
            .iter_mut()
            .find(|p| p.socket.is_none())
        {
            place.socket = Some(socket);
            place.kept = kept.is_some_and(|ep| place.key.set(ep));
        }
    }
}

/// The adapter's `Net`: connects through a [`SocketPool`], resolves through the stack's DNS,
/// and tells time with `embassy-time` (milliseconds since boot).
pub struct EdgeNet<'p, 's, const N: usize> {
    pool: &'p SocketPool<'s, N>,
    connect_timeout: Duration,
}

impl<'p, 's, const N: usize> EdgeNet<'p, 's, N> {
    /// A `Net` over `pool`, with [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn new(pool: &'p SocketPool<'s, N>) -> Self {
        EdgeNet {
            pool,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Changes the per-socket connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// Why a connection could not be opened: its kind and words (one `ConnectError` is made of
/// it, in one place). The words are the core's (`ConnectWhy`): on the edge, fragments of its
/// packed text, no literal here.
type Why = (ConnectErrorKind, ConnectWhy);

/// The address of an IPv6 literal host (`Some` for a host with a `:`; without the
/// `proto-ipv6` feature, an error); `None` for a name or an IPv4 literal, which the stack's
/// `dns_query` answers (a literal without a packet).
fn ipv6_literal(host: &str) -> Option<Result<IpAddress, Why>> {
    // A byte search, not `str::contains` (no pattern searcher for it).
    if !host.bytes().any(|b| b == b':') {
        return None;
    }
    #[cfg(feature = "proto-ipv6")]
    let literal = match host.parse::<core::net::Ipv6Addr>() {
        Ok(a) => Ok(IpAddress::Ipv6(a)),
        Err(_) => Err((ConnectErrorKind::Dns, ConnectWhy::BadIpv6Literal)),
    };
    #[cfg(not(feature = "proto-ipv6"))]
    let literal = Err((ConnectErrorKind::Unsupported, ConnectWhy::NoIpv6));
    Some(literal)
}

fn dns_error_text(e: embassy_net::dns::Error) -> ConnectWhy {
    match e {
        embassy_net::dns::Error::InvalidName => ConnectWhy::InvalidHostName,
        embassy_net::dns::Error::NameTooLong => ConnectWhy::HostNameTooLong,
        embassy_net::dns::Error::Failed => ConnectWhy::LookupFailed,
    }
}

fn connect_error(e: tcp::ConnectError) -> Why {
    match e {
        tcp::ConnectError::ConnectionReset => (ConnectErrorKind::Refused, ConnectWhy::SynReset),
        tcp::ConnectError::TimedOut => (ConnectErrorKind::Unreachable, ConnectWhy::SynTimedOut),
        tcp::ConnectError::NoRoute => (ConnectErrorKind::Unreachable, ConnectWhy::NoRoute),
        tcp::ConnectError::InvalidState => (ConnectErrorKind::Io, ConnectWhy::InvalidState),
    }
}

impl<'p, 's, const N: usize> Net for EdgeNet<'p, 's, N> {
    type Conn = EdgeConn<'p, 's, N>;

    // The body itself (no wrapping future: the client's size is what it was before TLS),
    // polled apart where nothing else awaits it (see `connect_apart`).
    fn connect(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
    ) -> impl Future<Output = Result<(Self::Conn, bool), ConnectError>> {
        #[cfg(not(feature = "era-2025"))]
        return self.connect_apart(ep, fresh);
        #[cfg(feature = "era-2025")]
        self.connect_tcp(ep, fresh, false)
    }

    fn recycle(&self, ep: &Endpoint<'_>, mut conn: Self::Conn) {
        // Kept alive while established, unless its host is too long to remember; else dropped
        // (EdgeConn's Drop aborts it and puts it back, idle).
        if ep.host().len() <= MAX_POOLED_HOST
            && conn.socket.as_ref().map(TcpSocket::state) == Some(State::Established)
            && let Some(socket) = conn.socket.take()
        {
            self.pool.put_back(socket, Some(ep));
        }
    }

    fn now(&self) -> Millis {
        Instant::now().as_millis()
    }

    fn sleep_until(&self, at: Millis) -> impl Future<Output = ()> {
        Timer::at(Instant::from_millis(at))
    }

    // No GET stream beside the calls (the default `listen`, which does nothing).
    fn listens(&self) -> bool {
        false
    }

    // A connection whose reply did not end is dropped (the default `park`).
    fn parks(&self) -> bool {
        false
    }

    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
        // A socket of the pool's, fresh, beside the call's own.
        let Ok((mut side, _)) = self.connect_tcp(ep, true, false).await else {
            return;
        };
        // `post_answer` without its flush: the read waits for the server's reply, which comes
        // only after the request went out (one await point less in the call's future).
        use embedded_io_async::{Read, Write};
        if side.write_all(answer).await.is_ok() {
            let mut status = [0u8; 64];
            let _ = side.read(&mut status).await;
        }
    }
}

impl<'p, 's, const N: usize> EdgeNet<'p, 's, N> {
    /// [`connect_tcp`](Self::connect_tcp) without TLS, its poll in a function of its own:
    /// where the call's future is its only caller (no `respond` of the old era beside it),
    /// the resolver's and the socket's code would be merged into the call's poll, which then
    /// costs more flash than both apart (minimal -120 B). With `respond` it is apart already.
    #[cfg(not(feature = "era-2025"))]
    async fn connect_apart(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
    ) -> Result<(EdgeConn<'p, 's, N>, bool), ConnectError> {
        let mut connect = pin!(self.connect_tcp(ep, fresh, false));
        poll_fn(|cx| poll_apart(connect.as_mut(), cx)).await
    }

    /// A TCP connection to `ep`'s host and port, or a kept-alive one unless `fresh`. An
    /// `https` endpoint is refused ([`NO_TLS`]) unless `tls_above` (the caller, `crate::tls`,
    /// speaks TLS on it).
    pub(crate) async fn connect_tcp(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
        tls_above: bool,
    ) -> Result<(EdgeConn<'p, 's, N>, bool), ConnectError> {
        let (kind, why) = 'failed: {
            if ep.scheme() == Scheme::Https && !tls_above {
                // Without TLS: the same words as `NO_TLS`, the core's (a test says so).
                #[cfg(not(feature = "tls"))]
                break 'failed (ConnectErrorKind::Unsupported, ConnectWhy::NoTls);
                #[cfg(feature = "tls")]
                return Err(ConnectError::new(ConnectErrorKind::Unsupported, NO_TLS));
            }
            // Checked before a write (the driver never re-sends a written tools/call).
            if !fresh && let Some(socket) = self.pool.take_kept(ep) {
                crate::log::log_debug!("mcp: reusing a kept-alive connection");
                return Ok((EdgeConn::new(self.pool, socket), true));
            }
            let host = ep.host();
            let addr = match ipv6_literal(host) {
                Some(Ok(a)) => a,
                Some(Err(why)) => break 'failed why,
                None => match self.pool.stack.dns_query(host, DnsQueryType::A).await {
                    Ok(addrs) => match addrs.first() {
                        Some(a) => *a,
                        None => break 'failed (ConnectErrorKind::Dns, ConnectWhy::NoARecord),
                    },
                    Err(e) => break 'failed (ConnectErrorKind::Dns, dns_error_text(e)),
                },
            };
            let Some(socket) = self.pool.take_any() else {
                break 'failed (ConnectErrorKind::Io, ConnectWhy::PoolInUse);
            };
            // From here on the socket goes back to the pool whatever happens (EdgeConn's Drop).
            let mut conn = EdgeConn::new(self.pool, socket);
            let s = conn.socket_mut();
            // No keep-alive and no Nagle: set when the pool made the socket (a reset keeps
            // both).
            s.set_timeout(Some(self.connect_timeout));
            match s.connect(IpEndpoint::new(addr, ep.port())).await {
                Ok(()) => {
                    // Established: no idle timeout (the driver's deadline bounds every wait).
                    conn.socket_mut().set_timeout(None);
                    return Ok((conn, false));
                }
                Err(e) => break 'failed connect_error(e),
            }
        };
        Err(ConnectError::of(kind, why))
    }
}

/// Polls `f` in a function of its own, never inlined into the caller's poll.
#[cfg(not(feature = "era-2025"))]
#[inline(never)]
fn poll_apart<F: Future>(
    f: core::pin::Pin<&mut F>,
    cx: &mut core::task::Context<'_>,
) -> Poll<F::Output> {
    f.poll(cx)
}

/// One lent-out TCP connection. Dropping it aborts the connection (RST) and returns the
/// socket and its buffers to the pool.
pub struct EdgeConn<'p, 's, const N: usize> {
    pool: &'p SocketPool<'s, N>,
    socket: Option<TcpSocket<'s>>,
}

impl<'p, 's, const N: usize> EdgeConn<'p, 's, N> {
    fn new(pool: &'p SocketPool<'s, N>, socket: TcpSocket<'s>) -> Self {
        EdgeConn {
            pool,
            socket: Some(socket),
        }
    }

    fn socket_mut(&mut self) -> &mut TcpSocket<'s> {
        // `socket` is only None inside `recycle`/`drop`, after which self is gone.
        match &mut self.socket {
            Some(s) => s,
            None => unreachable_socket(),
        }
    }
}

#[cold]
fn unreachable_socket() -> ! {
    // EdgeConn's socket is taken only by recycle/drop, which consume the connection.
    loop {
        core::hint::spin_loop();
    }
}

impl<const N: usize> Drop for EdgeConn<'_, '_, N> {
    fn drop(&mut self) {
        if let Some(mut socket) = self.socket.take() {
            // A no-op on a closed socket.
            socket.abort();
            self.pool.put_back(socket, None);
        }
    }
}

impl<const N: usize> embedded_io_async::ErrorType for EdgeConn<'_, '_, N> {
    type Error = tcp::Error;
}

// The socket's own futures, not wrapped in another (each wrapper is a state machine more in
// the caller's future). Its read and write futures hold nothing between polls (one look at
// the socket each), so a `poll_fn` makes one anew at each poll: no `async` state of our own.
impl<const N: usize> embedded_io_async::Read for EdgeConn<'_, '_, N> {
    fn read(&mut self, buf: &mut [u8]) -> impl Future<Output = Result<usize, Self::Error>> {
        let socket = self.socket_mut();
        poll_fn(move |cx| pin!(socket.read(buf)).poll(cx))
    }
}

impl<const N: usize> embedded_io_async::Write for EdgeConn<'_, '_, N> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.socket_mut().write(buf).await
    }

    fn flush(&mut self) -> impl Future<Output = Result<(), Self::Error>> {
        self.socket_mut().flush()
    }

    /// One loop of the socket's `write` in one `poll_fn`: the socket waits for room itself
    /// and never reports 0 bytes written for a non-empty buffer, so the default's `Ok(0)`
    /// panic has no case here.
    fn write_all(&mut self, mut buf: &[u8]) -> impl Future<Output = Result<(), Self::Error>> {
        let socket = self.socket_mut();
        poll_fn(move |cx| {
            while !buf.is_empty() {
                let n = ready!(pin!(socket.write(buf)).poll(cx))?;
                buf = buf.get(n..).unwrap_or(&[]);
            }
            Poll::Ready(Ok(()))
        })
    }
}

// Without `tls` only: with it, `NO_TLS` is not built.
#[cfg(all(test, not(feature = "tls")))]
mod tests {
    use super::*;

    #[test]
    fn no_tls_is_the_cores_words() {
        let e = ConnectError::of(ConnectErrorKind::Unsupported, ConnectWhy::NoTls);
        assert_eq!(e.detail.as_str(), NO_TLS);
    }
}
