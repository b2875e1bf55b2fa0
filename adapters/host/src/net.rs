//! Connections and time for the core's driver: `async-io` TCP (with `TCP_NODELAY`, and
//! `TCP_QUICKACK` on Linux), DNS through the blocking resolver on `blocking`'s thread pool,
//! `https` through rustls (ring; roots and certificate words in [`crate::trust`]), forward
//! proxies ([`crate::proxy`]: a `CONNECT` tunnel or absolute-form requests), a keep-alive pool
//! per endpoint and route bounded by a connection limit, and `async_io::Timer` for time.
//!
//! Owns: sockets, TLS, the pool, the clock. Does not own any protocol decision: whether a
//! connection may be reused and when to retry are the driver's.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use async_lock::{Semaphore, SemaphoreGuardArc};
use embedded_io_adapters::futures_03::FromFutures;
use event_listener::Event;
use futures_lite::io::{AsyncRead, AsyncWrite};
use futures_rustls::TlsConnector;
use futures_rustls::client::TlsStream;
use futures_rustls::rustls::{self, ClientConfig};
use rustls_pki_types::ServerName;
use verifi_mcp_core::drive::{Millis, Net, TailDrain};
use verifi_mcp_core::wire::endpoint::{Endpoint, Scheme};
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind};

use crate::proxy::{ProxyRule, Via, connect_tunnel, via};
use crate::trace::{WireEvent, WireTrace};
use crate::trust::{Trust, cert_problem, client_config};

/// Default number of connections one slot endpoint may have open at once.
pub const DEFAULT_CONNECTION_LIMIT: usize = 64;

/// Which endpoint a connection belongs to (the pool's key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// `https` (TLS) or `http`.
    pub tls: bool,
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// Why a connection could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The name did not resolve.
    Dns,
    /// The peer refused the connection.
    Refused,
    /// No route, network down, or similar.
    Unreachable,
    /// The TLS handshake failed.
    Tls,
    /// The proxy refused the tunnel or answered nonsense.
    Proxy,
    /// Any other I/O error.
    Io,
}

/// A connection that could not be opened, with what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectFailure {
    /// The kind of failure.
    pub kind: FailureKind,
    /// What the OS or TLS said.
    pub detail: String,
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FailureKind::Dns => "name resolution failed",
            FailureKind::Refused => "connection refused",
            FailureKind::Unreachable => "host unreachable",
            FailureKind::Tls => "TLS handshake failed",
            FailureKind::Proxy => "proxy tunnel failed",
            FailureKind::Io => "connect failed",
        };
        write!(f, "{what}: {}", self.detail)
    }
}

impl std::error::Error for ConnectFailure {}

fn io_failure(e: &io::Error) -> ConnectFailure {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => FailureKind::Refused,
        io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
            FailureKind::Unreachable
        }
        _ => FailureKind::Io,
    };
    ConnectFailure {
        kind,
        detail: e.to_string(),
    }
}

pub use crate::trust::{RootCert, TlsConfigError};

/// The rustls client configuration: ring, the webpki and system roots and `extra` roots, ALPN
/// http/1.1 (see [`crate::trust::client_config`] for the other trust settings).
pub fn tls_config(extra: &[RootCert]) -> Result<Arc<ClientConfig>, TlsConfigError> {
    client_config(&Trust {
        extra: extra.to_vec(),
        ..Trust::default()
    })
}

/// How one slot's connections are made: its proxy rule and its TLS configuration.
#[derive(Clone)]
pub struct Route {
    /// Which proxy, if any, a target goes through.
    pub proxy: ProxyRule,
    /// The TLS configuration for `https` targets.
    pub tls: Arc<ClientConfig>,
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

impl Route {
    /// Direct connections with `tls`.
    pub fn direct(tls: Arc<ClientConfig>) -> Route {
        Route {
            proxy: ProxyRule::Direct,
            tls,
        }
    }

    /// Whether requests to `ep` go to a proxy in absolute form (plain `http` through a proxy
    /// without credentials).
    pub fn absolute_form(&self, ep: &Endpoint<'_>) -> bool {
        let tls = ep.scheme() == Scheme::Https;
        self.proxy
            .proxy_for(tls, ep.host())
            .is_some_and(|p| via(p, tls) == Via::AbsoluteForm)
    }

    /// `ep` as it is written on this route (absolute form through a proxy when needed).
    pub fn endpoint<'a>(&self, ep: Endpoint<'a>) -> Endpoint<'a> {
        ep.with_absolute_form(self.absolute_form(&ep))
    }
}

/// A pool's full key: the endpoint, and how it is reached (proxy, TLS configuration).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ConnKey {
    target: PoolKey,
    /// The proxy's label and whether it has credentials (none: direct).
    proxy: Option<(String, Option<u64>)>,
    /// The identity of the TLS configuration (its `Arc`'s address).
    tls: usize,
}

impl ConnKey {
    fn new(target: &PoolKey, route: &Route) -> ConnKey {
        let proxy = route.proxy.proxy_for(target.tls, &target.host).map(|p| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            p.secrets().collect::<Vec<_>>().hash(&mut h);
            (p.label(), p.has_credentials().then(|| h.finish()))
        });
        ConnKey {
            target: target.clone(),
            proxy,
            tls: Arc::as_ptr(&route.tls) as usize,
        }
    }

    /// Whether this is the key of `ep` (on the route it was made for).
    fn is_of(&self, ep: &Endpoint<'_>) -> bool {
        self.target.port == ep.port()
            && self.target.tls == (ep.scheme() == Scheme::Https)
            && self.target.host == ep.host()
    }
}

/// A slot's pool keys, made once per endpoint instead of once per call (each is two `String`s
/// and a proxy-rule lookup): the slot's route and endpoints do not change.
#[derive(Default)]
pub(crate) struct KeyCache(Mutex<Vec<Arc<ConnKey>>>);

/// Most keys a [`KeyCache`] keeps (a slot has a primary and a fallback).
const CACHED_KEYS: usize = 4;

/// A TCP or TLS byte stream (futures-io traits).
pub enum Stream {
    /// Plain TCP.
    Plain(Async<TcpStream>),
    /// TLS over TCP.
    Tls(Box<TlsStream<Async<TcpStream>>>),
}

impl Stream {
    fn tcp(&self) -> &Async<TcpStream> {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// One open connection as the driver sees it (`embedded_io_async::{Read, Write}`). It holds a
/// permit of its endpoint's connection limit until dropped.
pub struct Conn {
    io: FromFutures<Stream>,
    key: Arc<ConnKey>,
    _permit: SemaphoreGuardArc,
    /// The wire observer and this connection's number, when tracing.
    trace: Option<(WireTrace, u64)>,
    /// The end of the last reply's framing when it had not come yet as the answer was handed
    /// back ([`Net::park`]), and until when it may come: read before the connection carries
    /// another request.
    tail: Option<(TailDrain, Instant)>,
}

impl Conn {
    /// The endpoint this connection goes to.
    pub fn key(&self) -> &PoolKey {
        &self.key.target
    }
    /// True when nothing is waiting on the socket and the peer has not closed it: a peek
    /// that would block. (The socket is non-blocking, so the peek never waits.)
    fn is_idle_and_open(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            self.io.inner().tcp().get_ref().peek(&mut byte),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        )
    }

    /// The local address (tests use it to tell connections apart).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.inner().tcp().get_ref().local_addr()
    }
}

impl embedded_io_async::ErrorType for Conn {
    type Error = io::Error;
}

impl embedded_io_async::Read for Conn {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        let n = self.io.read(buf).await?;
        if let Some((t, conn)) = &self.trace {
            t.emit(&WireEvent::Received {
                conn: *conn,
                bytes: buf.get(..n).unwrap_or_default(),
            });
        }
        Ok(n)
    }
}

impl embedded_io_async::Write for Conn {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        // Linux clears quick-ACK mode by itself; re-arm it once per request (the driver writes
        // a request in one write), so the reply is ACKed at once instead of after the
        // delayed-ACK timer. Once per request, not once per read: one setsockopt a call.
        quickack(self.io.inner().tcp());
        let n = self.io.write(buf).await?;
        if let Some((t, conn)) = &self.trace {
            t.emit(&WireEvent::Sent {
                conn: *conn,
                bytes: buf.get(..n).unwrap_or_default(),
            });
        }
        Ok(n)
    }
    async fn flush(&mut self) -> Result<(), io::Error> {
        self.io.flush().await
    }
}

#[cfg(target_os = "linux")]
fn quickack(s: &Async<TcpStream>) {
    let _ = socket2::SockRef::from(s.get_ref()).set_tcp_quickack(true);
}

#[cfg(not(target_os = "linux"))]
fn quickack(_s: &Async<TcpStream>) {}

struct Pool {
    idle: Vec<Conn>,
    permits: Arc<Semaphore>,
    /// Notified when a connection is put back: a call waiting at the limit takes it (a pooled
    /// connection keeps its permit, so a waiter on the permits alone would not see it).
    returned: Arc<Event>,
}

/// FNV-1a for the pool's keys: two lookups a call, and the keys are the manifest's endpoints
/// (not a peer's input), so the default hasher's flooding resistance buys nothing here and
/// costs several hundred instructions per lookup.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

struct NetInner {
    pools: Mutex<HashMap<Arc<ConnKey>, Pool, BuildHasherDefault<Fnv>>>,
    limit: usize,
    route: Route,
    epoch: Instant,
    trace: Option<WireTrace>,
    conns: AtomicU64,
}

/// Connections and time for one context (shared by its slots; cheap to clone).
#[derive(Clone)]
pub struct HostNet {
    inner: Arc<NetInner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostNet {
    /// A pool with at most `limit` connections per endpoint (at least 1), TLS as `tls`,
    /// direct connections.
    pub fn new(limit: usize, tls: Arc<ClientConfig>) -> Self {
        HostNet::with_route(limit, Route::direct(tls))
    }

    /// [`HostNet::new`], telling `trace` of every connection opened and every byte sent and
    /// received.
    pub fn with_trace(limit: usize, tls: Arc<ClientConfig>, trace: Option<WireTrace>) -> Self {
        HostNet::with_route_traced(limit, Route::direct(tls), trace)
    }

    /// A pool with at most `limit` connections per endpoint (at least 1), `route` for
    /// [`HostNet::open`] (slots may bring their own to [`HostNet::open_routed`]).
    pub fn with_route(limit: usize, route: Route) -> Self {
        HostNet::with_route_traced(limit, route, None)
    }

    /// [`HostNet::with_route`], with a wire observer.
    pub fn with_route_traced(limit: usize, route: Route, trace: Option<WireTrace>) -> Self {
        HostNet {
            inner: Arc::new(NetInner {
                pools: Mutex::new(HashMap::default()),
                limit: limit.max(1),
                route,
                epoch: Instant::now(),
                trace,
                conns: AtomicU64::new(0),
            }),
        }
    }

    /// A number for a new connection to a stdio server (`label`, e.g. `stdio:uvx nmap-mcp`),
    /// told to the wire observer as connected (port 0), when there is an observer.
    pub(crate) fn trace_stdio(&self, label: &str) -> Option<(WireTrace, u64)> {
        self.inner.trace.as_ref().map(|t| {
            let conn = self.inner.conns.fetch_add(1, Ordering::Relaxed) + 1;
            t.emit(&WireEvent::Connected {
                conn,
                host: label,
                port: 0,
                tls: false,
            });
            (t.clone(), conn)
        })
    }

    /// The route of [`HostNet::open`].
    pub fn route(&self) -> &Route {
        &self.inner.route
    }

    /// The connection limit per endpoint.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Idle pooled connections to `key` (on any route).
    pub fn idle(&self, key: &PoolKey) -> usize {
        lock(&self.inner.pools)
            .iter()
            .filter(|(k, _)| k.target == *key)
            .map(|(_, p)| p.idle.len())
            .sum()
    }

    /// The permits of `key`'s connections and the event of one being put back.
    fn permits(&self, key: &Arc<ConnKey>) -> (Arc<Semaphore>, Arc<Event>) {
        let mut pools = lock(&self.inner.pools);
        let pool = pools.entry(Arc::clone(key)).or_insert_with(|| Pool {
            idle: Vec::new(),
            permits: Arc::new(Semaphore::new(self.inner.limit)),
            returned: Arc::new(Event::new()),
        });
        (pool.permits.clone(), pool.returned.clone())
    }

    /// True when `key` has an idle connection (unchecked).
    fn has_idle(&self, key: &ConnKey) -> bool {
        lock(&self.inner.pools)
            .get(key)
            .is_some_and(|p| !p.idle.is_empty())
    }

    /// A pooled connection to `key`, unchecked.
    fn take_idle(&self, key: &ConnKey) -> Option<Conn> {
        lock(&self.inner.pools).get_mut(key)?.idle.pop()
    }

    /// A pooled connection to `key` that is still usable. Each is checked before it is handed
    /// out (a written tools/call is never re-sent, so a stale socket must not be written to):
    /// the end of its last reply is read first if it had not come when the answer was handed
    /// back (the connection is not used before that reply ended exactly; one whose end has
    /// not come in time goes to the side drain, and back to the pool if it ends); then a
    /// zero-wait peek that sees the end of the stream, an error, or bytes nobody asked for
    /// means the server let it go, and it is dropped.
    async fn take_usable(&self, key: &ConnKey) -> Option<Conn> {
        loop {
            let mut conn = self.take_idle(key)?;
            if let Some((tail, until)) = conn.tail.take() {
                match end_tail(&mut conn, tail, until).await {
                    TailEnd::Ended => {}
                    TailEnd::Late(tail) => {
                        self.drain_aside(conn, tail);
                        continue;
                    }
                    TailEnd::Broken => continue,
                }
            }
            if conn.is_idle_and_open() {
                return Some(conn);
            }
        }
    }

    /// Reads `conn`'s reply stream to its end off the caller's task (see
    /// [`drain_then_recycle`]); a call waiting at the limit takes it when it is put back.
    fn drain_aside(&self, conn: Conn, tail: TailDrain) {
        // The adapter runs under any executor: the drain runs on the blocking pool's thread,
        // for at most `PARK_MS` (usually a few ms).
        let net = self.clone();
        blocking::unblock(move || async_io::block_on(drain_then_recycle(net, conn, tail))).detach();
    }

    /// A pooled connection to `key` (`true`: reused) unless `fresh`, else a new one. Waits for
    /// a permit when the endpoint is at its limit (closing an idle one first if there is one).
    pub async fn open(&self, key: &PoolKey, fresh: bool) -> Result<(Conn, bool), ConnectFailure> {
        let route = self.inner.route.clone();
        self.open_routed(key, &route, fresh).await
    }

    /// [`HostNet::open`] on `route` (a slot's own proxy and trust). Connections of different
    /// routes are pooled apart.
    pub async fn open_routed(
        &self,
        target: &PoolKey,
        route: &Route,
        fresh: bool,
    ) -> Result<(Conn, bool), ConnectFailure> {
        self.open_keyed(&Arc::new(ConnKey::new(target, route)), route, fresh)
            .await
    }

    /// [`HostNet::open_routed`] with the full key made already (see [`KeyCache`]).
    async fn open_keyed(
        &self,
        key: &Arc<ConnKey>,
        route: &Route,
        fresh: bool,
    ) -> Result<(Conn, bool), ConnectFailure> {
        if !fresh && let Some(conn) = self.take_usable(key).await {
            return Ok((conn, true));
        }
        let (permits, returned) = self.permits(key);
        let permit = loop {
            if let Some(p) = permits.try_acquire_arc() {
                break p;
            }
            if fresh {
                // A fresh one is wanted: closing an idle one frees its permit.
                if let Some(idle) = self.take_idle(key) {
                    drop(idle);
                    continue;
                }
            } else if let Some(conn) = self.take_usable(key).await {
                // Put back while this call looked: what it wanted (checked as any).
                return Ok((conn, true));
            }
            // At the limit, none idle: wait for a permit (a connection closed) or for a
            // connection put back (a call's end, or a parked one drained on the side).
            let put_back = returned.listen();
            if self.has_idle(key) {
                // Put back between the look above and `listen`: look again.
                continue;
            }
            let next =
                futures_lite::future::or(async { Some(permits.acquire_arc().await) }, async {
                    put_back.await;
                    None
                });
            if let Some(p) = next.await {
                break p;
            }
        };
        Ok((self.dial_with(key, route, permit).await?, false))
    }

    /// A new connection to `key` outside its pool and its limit: for a long-lived stream
    /// beside the calls (a session's GET stream, and the answers to what comes on it), which
    /// must not hold a permit a call waits for. It is never pooled: drop it when done.
    async fn open_aside(&self, key: &Arc<ConnKey>, route: &Route) -> Result<Conn, ConnectFailure> {
        // A permit of its own (a fresh one-permit semaphore always has it).
        let permit = loop {
            if let Some(p) = Arc::new(Semaphore::new(1)).try_acquire_arc() {
                break p;
            }
        };
        self.dial_with(key, route, permit).await
    }

    /// Dials `key` on `route`, the connection holding `permit`.
    async fn dial_with(
        &self,
        key: &Arc<ConnKey>,
        route: &Route,
        permit: SemaphoreGuardArc,
    ) -> Result<Conn, ConnectFailure> {
        let target = &key.target;
        let stream = dial(target, route).await?;
        let trace = self.inner.trace.as_ref().map(|t| {
            let conn = self.inner.conns.fetch_add(1, Ordering::Relaxed) + 1;
            t.emit(&WireEvent::Connected {
                conn,
                host: &target.host,
                port: target.port,
                tls: target.tls,
            });
            (t.clone(), conn)
        });
        Ok(Conn {
            io: FromFutures::new(stream),
            key: Arc::clone(key),
            _permit: permit,
            trace,
            tail: None,
        })
    }

    /// Puts back a connection whose response ended cleanly and may be kept alive.
    pub fn recycle(&self, conn: Conn) {
        let returned = {
            let mut pools = lock(&self.inner.pools);
            let Some(pool) = pools.get_mut(&conn.key) else {
                return;
            };
            pool.idle.push(conn);
            pool.returned.clone()
        };
        returned.notify(1);
    }

    /// Drops every idle connection.
    pub fn clear_idle(&self) {
        for pool in lock(&self.inner.pools).values_mut() {
            pool.idle.clear();
        }
    }

    /// Milliseconds since this pool was made (a monotonic clock).
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.inner.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Sleeps until [`HostNet::now_ms`] reaches `at`.
    pub async fn sleep_until_ms(&self, at: u64) {
        Timer::at(self.instant_at(at)).await;
    }

    /// The instant [`HostNet::now_ms`] reaches `at`.
    pub(crate) fn instant_at(&self, at: u64) -> Instant {
        self.inner.epoch + Duration::from_millis(at)
    }
}

/// A deadline timer kept from one call to the next (in a slot's pooled call buffers), so a
/// call whose deadline is later than the one the timer is registered for leaves it as it is:
/// registering an `async-io` timer wakes the reactor (an `eventfd` write and one more turn of
/// its loop), and a call that waits once for its reply would otherwise pay that every time.
/// A timer that fires before a sleeper's deadline only makes it register again for its own.
#[derive(Default)]
pub(crate) struct Alarm(Mutex<Option<(Instant, Timer)>>);

impl Alarm {
    /// Sleeps until `deadline`, reusing the kept timer when it fires no later than that.
    pub(crate) async fn sleep_until(&self, deadline: Instant) {
        /// Puts the timer back when the sleep ends or is dropped (its I/O won the race).
        struct Held<'a>(&'a Alarm, Option<(Instant, Timer)>);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                if let Some(t) = self.1.take() {
                    *lock(&(self.0).0) = Some(t);
                }
            }
        }
        let mut held = Held(self, lock(&self.0).take());
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            // Held while waiting, so a drop of this future keeps the registration.
            let kept = held.1.take();
            let (_, timer) = held.1.insert(match kept {
                // Fires before the deadline and is still ahead: as it is (no registration).
                Some((when, t)) if when <= deadline && when > now => (when, t),
                Some((_, mut t)) => {
                    t.set_at(deadline);
                    (deadline, t)
                }
                None => (deadline, Timer::at(deadline)),
            });
            timer.await;
            // Fired: nothing is registered any more; the next turn registers anew if needed.
            held.1 = None;
        }
    }
}

impl From<&ConnectFailure> for ConnectError {
    fn from(f: &ConnectFailure) -> Self {
        let kind = match f.kind {
            FailureKind::Dns => ConnectErrorKind::Dns,
            FailureKind::Refused => ConnectErrorKind::Refused,
            FailureKind::Unreachable => ConnectErrorKind::Unreachable,
            FailureKind::Tls => ConnectErrorKind::Tls,
            FailureKind::Proxy | FailureKind::Io => ConnectErrorKind::Io,
        };
        ConnectError::new(kind, &f.detail)
    }
}

/// A TCP connection to `host:port` (names resolved on the blocking pool).
async fn tcp(host: &str, port: u16) -> Result<Async<TcpStream>, ConnectFailure> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let name = host.to_owned();
            blocking::unblock(move || (name.as_str(), port).to_socket_addrs())
                .await
                .map_err(|e| ConnectFailure {
                    kind: FailureKind::Dns,
                    detail: format!("{host}: {e}"),
                })?
                .collect()
        }
    };
    let mut last = ConnectFailure {
        kind: FailureKind::Dns,
        detail: format!("{host}: no address"),
    };
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(tcp) => {
                let _ = tcp.get_ref().set_nodelay(true);
                quickack(&tcp);
                return Ok(tcp);
            }
            Err(e) => last = io_failure(&e),
        }
    }
    Err(last)
}

/// A connection to `key` on `route`: direct, or to the proxy (a `CONNECT` tunnel for `https`
/// and for a proxy with credentials), then TLS for `https`.
async fn dial(key: &PoolKey, route: &Route) -> Result<Stream, ConnectFailure> {
    let Some(proxy) = route.proxy.proxy_for(key.tls, &key.host) else {
        let tcp = tcp(&key.host, key.port).await?;
        return secure(key, &route.tls, tcp).await;
    };
    let mut tcp = tcp(proxy.host(), proxy.port())
        .await
        .map_err(|f| ConnectFailure {
            kind: f.kind,
            detail: format!("proxy {}: {}", proxy.label(), f.detail),
        })?;
    match via(proxy, key.tls) {
        Via::AbsoluteForm => Ok(Stream::Plain(tcp)),
        Via::Tunnel => {
            connect_tunnel(&mut tcp, proxy, &key.host, key.port)
                .await
                .map_err(|e| ConnectFailure {
                    kind: FailureKind::Proxy,
                    detail: e.to_string(),
                })?;
            secure(key, &route.tls, tcp).await
        }
    }
}

async fn secure(
    key: &PoolKey,
    tls: &Arc<ClientConfig>,
    tcp: Async<TcpStream>,
) -> Result<Stream, ConnectFailure> {
    if !key.tls {
        return Ok(Stream::Plain(tcp));
    }
    let name = ServerName::try_from(key.host.clone()).map_err(|e| ConnectFailure {
        kind: FailureKind::Tls,
        detail: format!("bad server name {:?}: {e}", key.host),
    })?;
    TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .map(|s| Stream::Tls(Box::new(s)))
        .map_err(|e| ConnectFailure {
            kind: FailureKind::Tls,
            detail: tls_words(&e),
        })
}

/// A TLS failure in plain words when it is about the certificate, else as rustls says it.
fn tls_words(e: &io::Error) -> String {
    let rustls_error = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error.and_then(cert_problem) {
        Some(p) => p.message().to_owned(),
        None => e.to_string(),
    }
}

/// A [`HostNet`] seen through one slot's [`Route`]: what the driver gets for that slot.
#[derive(Clone, Copy)]
pub struct RoutedNet<'a> {
    /// The context's pool and clock.
    pub net: &'a HostNet,
    /// The slot's proxy and trust.
    pub route: &'a Route,
    /// The slot's pool keys, kept between calls (none: made per connection).
    pub(crate) keys: Option<&'a KeyCache>,
}

impl<'a> RoutedNet<'a> {
    /// `net` through `route`.
    pub fn new(net: &'a HostNet, route: &'a Route) -> Self {
        RoutedNet {
            net,
            route,
            keys: None,
        }
    }

    /// The full pool key of `ep` on this route: the slot's kept one when there is one.
    fn key(&self, ep: &Endpoint<'_>) -> Arc<ConnKey> {
        let make = || Arc::new(ConnKey::new(&key_of(ep), self.route));
        let Some(cache) = self.keys else {
            return make();
        };
        let mut keys = lock(&cache.0);
        if let Some(k) = keys.iter().find(|k| k.is_of(ep)) {
            return Arc::clone(k);
        }
        let k = make();
        if keys.len() < CACHED_KEYS {
            keys.push(Arc::clone(&k));
        }
        k
    }
}

impl RoutedNet<'_> {
    /// A connection to `ep` outside the pool and the limit (see `HostNet::open_aside`).
    pub(crate) async fn connect_aside(&self, ep: &Endpoint<'_>) -> Result<Conn, ConnectError> {
        self.net
            .open_aside(&self.key(ep), self.route)
            .await
            .map_err(|f| ConnectError::from(&f))
    }
}

impl Net for RoutedNet<'_> {
    type Conn = Conn;

    async fn connect(&self, ep: &Endpoint<'_>, fresh: bool) -> Result<(Conn, bool), ConnectError> {
        self.net
            .open_keyed(&self.key(ep), self.route, fresh)
            .await
            .map_err(|f| ConnectError::from(&f))
    }

    fn recycle(&self, ep: &Endpoint<'_>, conn: Conn) {
        // A forward proxy taking absolute-form requests often closes its client connection
        // after each reply without saying so (tinyproxy does); a request written on such a
        // connection is lost, and a tool call is never sent twice. So these are not pooled:
        // each request gets its own connection to the proxy. (CONNECT tunnels are pooled.)
        if ep.absolute_form() {
            drop(conn);
            return;
        }
        self.net.recycle(conn);
    }

    fn now(&self) -> Millis {
        self.net.now_ms()
    }

    async fn sleep_until(&self, at: Millis) {
        self.net.sleep_until_ms(at).await;
    }

    fn park(&self, ep: &Endpoint<'_>, mut conn: Conn, tail: TailDrain) {
        // Not pooled anyway (see `recycle`).
        if ep.absolute_form() {
            return;
        }
        // Pooled with the end of its reply still to read: the next request on it reads that
        // first (usually already in the socket by then; see `HostNet::take_usable`). It gets
        // as long to come as the core's tail read gives it, counted from the answer.
        conn.tail = Some((tail, Instant::now() + TAIL_WAIT));
        self.net.recycle(conn);
    }

    fn parks_tails(&self) -> bool {
        true
    }

    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
        // A fresh connection of the pool's, beside the call's own.
        let Ok((mut side, _)) = self.connect(ep, true).await else {
            return;
        };
        verifi_mcp_core::drive::post_answer(&mut side, answer).await;
    }
}

/// How long after its answer the end of a parked reply may come before the next request on
/// the connection stops waiting for it (the connection then goes to the side drain and the
/// request takes another): as long as the core's tail read waits.
const TAIL_WAIT: Duration = Duration::from_millis(25);

/// How long a connection in the side drain may take to end its reply stream before it is
/// dropped.
const PARK_MS: u64 = 2_000;

/// How the end of a parked reply went ([`end_tail`]).
enum TailEnd {
    /// It ended exactly at the end of a read: the connection may carry another request.
    Ended,
    /// It did not come in time: what is left of it, for the side drain.
    Late(TailDrain),
    /// The connection sent anything else, closed or failed: it is dropped.
    Broken,
}

/// Reads the end of `conn`'s last reply, waiting until `until` at most (past: only what is in
/// already).
async fn end_tail(conn: &mut Conn, mut tail: TailDrain, until: Instant) -> TailEnd {
    let mut buf = [0u8; 64];
    loop {
        // The timer is made only if the read has to wait.
        let read = futures_lite::future::or(
            async { Some(embedded_io_async::Read::read(conn, &mut buf).await) },
            async {
                Timer::at(until).await;
                None
            },
        )
        .await;
        match read {
            Some(Ok(n)) if n > 0 => match tail.feed(buf.get(..n).unwrap_or_default()) {
                Some(true) => return TailEnd::Ended,
                Some(false) => {}
                None => return TailEnd::Broken,
            },
            Some(_) => return TailEnd::Broken,
            None => return TailEnd::Late(tail),
        }
    }
}

/// Reads a parked connection until its reply stream ends (then it goes back to the pool), it
/// sends what is not that stream's framing, it closes, or [`PARK_MS`] pass (then it is
/// dropped). The call it served has its answer already: a server that ends its stream late
/// (rmcp in the 2026 era, under load) costs no new connection.
async fn drain_then_recycle(net: HostNet, mut conn: Conn, mut tail: TailDrain) {
    let mut buf = [0u8; 512];
    let ended = futures_lite::future::or(
        async {
            loop {
                match embedded_io_async::Read::read(&mut conn, &mut buf).await {
                    Ok(n) if n > 0 => match tail.feed(buf.get(..n).unwrap_or_default()) {
                        Some(true) => return true,
                        Some(false) => {}
                        None => return false,
                    },
                    _ => return false,
                }
            }
        },
        async {
            Timer::after(Duration::from_millis(PARK_MS)).await;
            false
        },
    )
    .await;
    if ended {
        net.recycle(conn);
    }
}

/// The pool key of a parsed endpoint.
pub fn key_of(ep: &Endpoint<'_>) -> PoolKey {
    PoolKey {
        tls: ep.scheme() == Scheme::Https,
        host: ep.host().to_owned(),
        port: ep.port(),
    }
}

impl Net for HostNet {
    type Conn = Conn;

    async fn connect(&self, ep: &Endpoint<'_>, fresh: bool) -> Result<(Conn, bool), ConnectError> {
        self.open(&key_of(ep), fresh)
            .await
            .map_err(|f| ConnectError::from(&f))
    }

    fn recycle(&self, _ep: &Endpoint<'_>, conn: Conn) {
        HostNet::recycle(self, conn);
    }

    fn now(&self) -> Millis {
        self.now_ms()
    }

    async fn sleep_until(&self, at: Millis) {
        self.sleep_until_ms(at).await;
    }

    async fn respond(&self, ep: &Endpoint<'_>, answer: &[u8]) {
        let Ok((mut side, _)) = self.connect(ep, true).await else {
            return;
        };
        verifi_mcp_core::drive::post_answer(&mut side, answer).await;
    }
}

#[cfg(test)]
mod alarm_tests {
    use super::*;
    use futures_lite::future;

    /// Runs `f` with a 10 s bound (every wait a deadline).
    fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
        async_io::block_on(future::or(async { Some(f.await) }, async {
            Timer::after(Duration::from_secs(10)).await;
            None
        }))
        .expect("an alarm test ran past its 10 s bound")
    }

    #[test]
    fn a_sleep_never_ends_before_its_deadline() {
        let alarm = Alarm::default();
        let start = Instant::now();
        bounded(alarm.sleep_until(start + Duration::from_millis(40)));
        assert!(start.elapsed() >= Duration::from_millis(40));
        // A deadline already passed ends at once.
        bounded(alarm.sleep_until(start));
    }

    #[test]
    fn a_kept_timer_for_a_later_deadline_is_moved_earlier() {
        let alarm = Alarm::default();
        // A sleep until +60 s that loses its race keeps its timer in the alarm.
        bounded(future::or(
            alarm.sleep_until(Instant::now() + Duration::from_secs(60)),
            future::ready(()),
        ));
        assert!(lock(&alarm.0).is_some(), "the timer was kept");
        // The next sleep's deadline is earlier: it must not wait for the kept one.
        let start = Instant::now();
        bounded(alarm.sleep_until(start + Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_kept_timer_that_fires_early_does_not_end_a_later_sleep() {
        let alarm = Alarm::default();
        let start = Instant::now();
        // Kept, registered for +20 ms.
        bounded(future::or(
            alarm.sleep_until(start + Duration::from_millis(20)),
            future::ready(()),
        ));
        // A sleep until +80 ms reuses it: it fires at +20 ms, and the sleep goes on.
        bounded(alarm.sleep_until(start + Duration::from_millis(80)));
        assert!(start.elapsed() >= Duration::from_millis(80));
    }
}
