//! `https://` on the edge (feature `tls`): [`TlsNet`] wraps an [`EdgeNet`] and speaks TLS 1.3
//! ([`embedded_tls`], no allocator) on the TCP socket when an endpoint is `https`; plain `http`
//! endpoints go through the wrapped `EdgeNet` unchanged.
//!
//! Owns: the TLS buffer sets ([`TlsPool`], caller's storage, lent to one connection at a time),
//! the trust anchor ([`Trust`]: a pinned CA certificate, or the server's own self-signed
//! certificate), the RNG handle, and the mapping of handshake failures to
//! `ConnectErrorKind::Tls` with words a person can act on.
//! Does not own: anything about HTTP or MCP (the core's driver), sockets (`crate::net`).
//!
//! Trust is a pin, never "any certificate": the server's leaf must be signed by the pinned
//! certificate itself (ECDSA P-256 with SHA-256: a private CA, the issuing intermediate of a
//! larger PKI, or the server's own self-signed certificate; other certificates the server sends
//! are not used, so no leaf can act as a CA) and must name the endpoint's host (DNS SAN, else
//! CN; SNI = that host name, none for an IP literal). There is no insecure mode. The board
//! has no wall clock, so validity dates are **not** checked: rotating a pinned CA means new
//! firmware. The handshake must prove the certificate (a `CertificateVerify` signed by its key)
//! or the connection is refused.
//!
//! Cost: every TLS connection is a full handshake (one ECDHE on P-256 and two ECDSA
//! verifications); TLS connections are not kept alive, so a buffer set is never parked idle.
//! A buffer set is a 16 640-byte read buffer (one whole TLS record) and a write buffer (2 KiB by
//! default) per connection open at once; [`TlsStorage`] holds one.
//!
//! The RNG is the caller's: on the board, the HAL's hardware RNG (e.g. `embassy_stm32::rng::Rng`);
//! in host tests, one seeded from the operating system.

use core::cell::{Cell, RefCell, RefMut};
use core::fmt::Write as _;
use core::marker::PhantomData;

use embassy_net::tcp;
use embedded_tls::pki::CertVerifier;
use embedded_tls::{
    Aes128GcmSha256, Certificate, CertificateRef, CertificateVerifyRef, CryptoProvider, NoClock,
    TlsConfig, TlsConnection, TlsContext, TlsError, TlsVerifier,
};
use heapless::String;
use verifi_mcp_core::drive::{Millis, Net};
use verifi_mcp_core::wire::endpoint::{Endpoint, Scheme};
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind, DETAIL_BYTES};

use crate::net::{EdgeConn, EdgeNet};

/// The bound on the RNG a [`TlsPool`] takes (rand_core 0.6's `RngCore + CryptoRng`, which the
/// embassy HALs' hardware RNGs implement).
pub use embedded_tls::CryptoRngCore;

/// Bytes of the read buffer that hold any TLS record (2^14 of data plus the record overhead).
pub const TLS_READ_BUFFER: usize = 16_640;
/// The default write buffer: requests larger than this go out as several records.
pub const TLS_WRITE_BUFFER: usize = 2_048;
/// The largest certificate chain (DER, all the entries the server sends) the client takes; a
/// longer one is refused with a message that names this cap. An ECDSA leaf and one
/// intermediate (a public CA's usual chain) fit; a private CA's leaf alone is well under it.
pub const MAX_CERT_CHAIN: usize = 3_072;

/// The only cipher suite offered: TLS_AES_128_GCM_SHA256 (mandatory for every TLS 1.3 server).
type Suite = Aes128GcmSha256;

/// What the client trusts: one pinned certificate (DER).
#[derive(Clone, Copy, Debug)]
pub struct Trust<'t> {
    ca_der: &'t [u8],
}

impl<'t> Trust<'t> {
    /// Trusts servers whose certificate is signed by `ca_der` (DER of an ECDSA P-256
    /// certificate) itself: a private CA, the intermediate that issues the servers'
    /// certificates, or the server's own self-signed certificate. The leaf must still name the
    /// endpoint's host.
    pub const fn pinned_ca(ca_der: &'t [u8]) -> Self {
        Trust { ca_der }
    }
}

/// Storage for one TLS connection: `READ` bytes of read buffer (at least one whole record:
/// [`TLS_READ_BUFFER`]) and `WRITE` bytes of write buffer. Place it in a `static`.
pub struct TlsStorage<const READ: usize = TLS_READ_BUFFER, const WRITE: usize = TLS_WRITE_BUFFER> {
    read: [u8; READ],
    write: [u8; WRITE],
}

impl<const READ: usize, const WRITE: usize> TlsStorage<READ, WRITE> {
    /// Zeroed storage (const, so it can live in `.bss`).
    pub const fn new() -> Self {
        TlsStorage {
            read: [0; READ],
            write: [0; WRITE],
        }
    }

    /// The buffers, for [`TlsPool::new`].
    pub fn buffers(&mut self) -> TlsBuffers<'_> {
        TlsBuffers {
            read: &mut self.read,
            write: &mut self.write,
        }
    }
}

impl<const READ: usize, const WRITE: usize> Default for TlsStorage<READ, WRITE> {
    fn default() -> Self {
        Self::new()
    }
}

/// One connection's TLS buffers (read, write), borrowed for the pool's lifetime.
pub struct TlsBuffers<'t> {
    /// The record read buffer.
    pub read: &'t mut [u8],
    /// The record write buffer.
    pub write: &'t mut [u8],
}

/// A buffer set that is lent to one connection at a time.
///
/// `embedded_tls::TlsConnection` takes its buffers as `&mut [u8]` for its whole life and never
/// gives them back, so a pool that reuses them for the next connection has to hand out the
/// same exclusive borrow again. The set keeps the pointers of the `&'t mut` it was built from
/// (that borrow is consumed here, so nothing else can reach the bytes) and `busy` makes the
/// lending exclusive: a slice is made only when `busy` was false, and `busy` turns false again
/// only when the connection holding the slice has been dropped ([`TlsConn`]'s field order).
struct Lendable<'t> {
    read: *mut u8,
    read_len: usize,
    write: *mut u8,
    write_len: usize,
    busy: Cell<bool>,
    _bytes: PhantomData<&'t mut [u8]>,
}

impl<'t> Lendable<'t> {
    fn new(b: TlsBuffers<'t>) -> Self {
        Lendable {
            read_len: b.read.len(),
            read: b.read.as_mut_ptr(),
            write_len: b.write.len(),
            write: b.write.as_mut_ptr(),
            busy: Cell::new(false),
            _bytes: PhantomData,
        }
    }

    /// The buffers, when no connection holds them.
    #[allow(unsafe_code)]
    // Lending `&mut` from `&self` is the point; `busy` makes it exclusive (see the type).
    #[allow(clippy::mut_from_ref)]
    fn lend(&'t self) -> Option<(&'t mut [u8], &'t mut [u8], Lent<'t>)> {
        if self.busy.get() {
            return None;
        }
        self.busy.set(true);
        // SAFETY: the pointers come from two distinct `&'t mut [u8]` consumed in `new`, so
        // they are valid for 't and nothing else refers to the bytes. `busy` was false, so no
        // slice made by an earlier call is still used: `Lent` clears `busy` only when dropped,
        // and the slices are never used after their `Lent` is gone (`TlsConn` drops its
        // connection first; `TlsNet::connect_tls` returns on an error before touching them).
        // `Lendable` is not `Sync` (`Cell`), so no other thread races.
        let read = unsafe { core::slice::from_raw_parts_mut(self.read, self.read_len) };
        // SAFETY: as above, for the write buffer.
        let write = unsafe { core::slice::from_raw_parts_mut(self.write, self.write_len) };
        Some((read, write, Lent(&self.busy)))
    }
}

// SAFETY: a `Lendable` stands for the `&'t mut [u8]` pair it was made from, which is `Send`;
// moving it to another thread needs no outstanding lend (every lend borrows it for 't), and
// `Cell` is `Send`. It stays `!Sync`. So a `TlsPool` can live in a `StaticCell`.
#[allow(unsafe_code)]
unsafe impl Send for Lendable<'_> {}

/// Gives a buffer set back to its pool when dropped.
struct Lent<'t>(&'t Cell<bool>);

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// `K` TLS buffer sets (so `K` TLS connections can be open at once), the trust anchor and the
/// RNG, made once at boot from the caller's storage.
pub struct TlsPool<'t, R, const K: usize> {
    sets: [Lendable<'t>; K],
    rng: RefCell<R>,
    trust: Trust<'t>,
}

impl<'t, R: CryptoRngCore, const K: usize> TlsPool<'t, R, K> {
    /// A pool over `buffers`, trusting `trust`, drawing handshake randomness from `rng` (a
    /// cryptographic RNG: the board's hardware RNG).
    pub fn new(buffers: [TlsBuffers<'t>; K], trust: Trust<'t>, rng: R) -> Self {
        TlsPool {
            sets: buffers.map(Lendable::new),
            rng: RefCell::new(rng),
            trust,
        }
    }

    /// Buffer sets not lent to a connection right now.
    pub fn available(&self) -> usize {
        self.sets.iter().filter(|s| !s.busy.get()).count()
    }

    fn lend(&'t self) -> Option<(&'t mut [u8], &'t mut [u8], Lent<'t>)> {
        self.sets.iter().find_map(Lendable::lend)
    }
}

/// The adapter's `Net` with TLS: `https` endpoints get a TLS 1.3 connection verified against
/// the pool's [`Trust`], `http` endpoints the wrapped [`EdgeNet`]'s plain TCP.
pub struct TlsNet<'e, 'p, 's, 't, R, const N: usize, const K: usize> {
    net: &'e EdgeNet<'p, 's, N>,
    pool: &'t TlsPool<'t, R, K>,
}

impl<'e, 'p: 't, 's: 't, 't, R: CryptoRngCore, const N: usize, const K: usize>
    TlsNet<'e, 'p, 's, 't, R, N, K>
{
    /// TLS over `net`'s sockets with `pool`'s buffers, trust and RNG.
    pub fn new(net: &'e EdgeNet<'p, 's, N>, pool: &'t TlsPool<'t, R, K>) -> Self {
        TlsNet { net, pool }
    }

    async fn connect_tls(&self, ep: &Endpoint<'_>) -> Result<TlsConn<'p, 's, 't, N>, ConnectError> {
        if self.pool.trust.ca_der.is_empty() {
            return Err(ConnectError::new(
                ConnectErrorKind::Tls,
                "no pinned CA: Trust::pinned_ca was given no certificate bytes",
            ));
        }
        let Some((read, write, lent)) = self.pool.lend() else {
            return Err(ConnectError::new(
                ConnectErrorKind::Io,
                "every TLS buffer set is in use (give the TlsPool more)",
            ));
        };
        let host = ep.host();
        let mut provider = Provider {
            rng: &self.pool.rng,
            verifier: PinnedVerifier::new(self.pool.trust),
        };
        // Before any packet: a host name too long to check is refused here.
        provider
            .verifier
            .set_hostname_verification(host)
            .map_err(|e| handshake_error(e, host))?;
        // A fresh socket: a kept-alive one would be a plain-HTTP connection.
        let (tcp, _) = self.net.connect_tcp(ep, true, true).await?;
        let mut conn = TlsConn {
            tls: TlsConnection::new(
                Guarded {
                    tcp,
                    scan: RecordScan::new(),
                },
                read,
                write,
            ),
            _lent: lent,
        };
        let ip_literal = host.contains(':') || host.parse::<core::net::Ipv4Addr>().is_ok();
        let config = if ip_literal {
            // RFC 6066: no SNI for an address; the certificate must still name it.
            TlsConfig::new()
        } else {
            TlsConfig::new().with_server_name(host)
        };
        conn.tls
            .open(TlsContext::new(&config, &mut provider))
            .await
            .map_err(|e| handshake_error(e, host))?;
        if !provider.verifier.proved() {
            return Err(ConnectError::new(
                ConnectErrorKind::Tls,
                "the server finished the handshake without proving a certificate",
            ));
        }
        crate::log::log_debug!("mcp: TLS 1.3 handshake done");
        Ok(conn)
    }
}

impl<'e, 'p: 't, 's: 't, 't, R: CryptoRngCore, const N: usize, const K: usize> Net
    for TlsNet<'e, 'p, 's, 't, R, N, K>
{
    type Conn = TlsNetConn<'p, 's, 't, N>;

    async fn connect(
        &self,
        ep: &Endpoint<'_>,
        fresh: bool,
    ) -> Result<(Self::Conn, bool), ConnectError> {
        match ep.scheme() {
            Scheme::Http => {
                let (conn, reused) = self.net.connect(ep, fresh).await?;
                Ok((TlsNetConn::Plain(conn), reused))
            }
            Scheme::Https => Ok((TlsNetConn::Tls(self.connect_tls(ep).await?), false)),
        }
    }

    fn recycle(&self, ep: &Endpoint<'_>, conn: Self::Conn) {
        match conn {
            TlsNetConn::Plain(c) => self.net.recycle(ep, c),
            // Not kept alive: an idle TLS session would hold a buffer set, and its socket
            // cannot be checked for staleness under the TLS layer. Dropping it gives both back.
            TlsNetConn::Tls(c) => drop(c),
        }
    }

    fn now(&self) -> Millis {
        self.net.now()
    }

    async fn sleep_until(&self, at: Millis) {
        self.net.sleep_until(at).await
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
        let Ok((mut side, _)) = self.connect(ep, true).await else {
            return;
        };
        verifi_mcp_core::drive::post_answer(&mut side, answer).await;
    }
}

/// One TLS connection: the TLS state over a lent TCP socket and a lent buffer set. Dropping it
/// resets the TCP connection and gives the socket and the buffers back.
pub struct TlsConn<'p: 't, 's: 't, 't, const N: usize> {
    // Declared first, so dropped first: the buffers are given back (`_lent`) only after the
    // connection that borrows them is gone.
    tls: TlsConnection<'t, Guarded<'p, 's, N>, Suite>,
    _lent: Lent<'t>,
}

/// A connection of [`TlsNet`]: plain TCP for `http`, TLS for `https`.
// No allocator to box the TLS state (key schedule, about 1.3 KiB): a plain connection through a
// TlsNet costs as much room in the call's future as a TLS one, as it must be able to be either.
#[allow(clippy::large_enum_variant)]
pub enum TlsNetConn<'p: 't, 's: 't, 't, const N: usize> {
    /// An `http` endpoint's TCP connection.
    Plain(EdgeConn<'p, 's, N>),
    /// An `https` endpoint's TLS connection.
    Tls(TlsConn<'p, 's, 't, N>),
}

/// An I/O error of a [`TlsNetConn`]: the socket's, or the TLS layer's.
#[derive(Debug, Clone, Copy)]
pub enum EdgeIoError {
    /// The TCP socket failed.
    Tcp(tcp::Error),
    /// A TLS record could not be read, decrypted or written.
    Tls(TlsError),
}

impl core::fmt::Display for EdgeIoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EdgeIoError::Tcp(e) => write!(f, "TCP: {e:?}"),
            EdgeIoError::Tls(e) => write!(f, "TLS: {e:?}"),
        }
    }
}

impl core::error::Error for EdgeIoError {}

impl embedded_io_async::Error for EdgeIoError {
    fn kind(&self) -> embedded_io_async::ErrorKind {
        match self {
            EdgeIoError::Tcp(e) => embedded_io_async::Error::kind(e),
            EdgeIoError::Tls(TlsError::Io(k)) => *k,
            EdgeIoError::Tls(_) => embedded_io_async::ErrorKind::InvalidData,
        }
    }
}

impl<const N: usize> embedded_io_async::ErrorType for TlsNetConn<'_, '_, '_, N> {
    type Error = EdgeIoError;
}

impl<const N: usize> embedded_io_async::Read for TlsNetConn<'_, '_, '_, N> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        match self {
            TlsNetConn::Plain(c) => c.read(buf).await.map_err(EdgeIoError::Tcp),
            TlsNetConn::Tls(c) => match c.tls.read(buf).await {
                // The server's close_notify is the end of the stream.
                Err(TlsError::ConnectionClosed) => Ok(0),
                other => other.map_err(EdgeIoError::Tls),
            },
        }
    }
}

impl<const N: usize> embedded_io_async::Write for TlsNetConn<'_, '_, '_, N> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        match self {
            TlsNetConn::Plain(c) => c.write(buf).await.map_err(EdgeIoError::Tcp),
            TlsNetConn::Tls(c) => c.tls.write(buf).await.map_err(EdgeIoError::Tls),
        }
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        match self {
            TlsNetConn::Plain(c) => c.flush().await.map_err(EdgeIoError::Tcp),
            TlsNetConn::Tls(c) => c.tls.flush().await.map_err(EdgeIoError::Tls),
        }
    }
}

/// The TCP connection under the TLS layer, with the incoming records' framing watched.
///
/// embedded-tls 0.19 panics (`last().unwrap()`) on an encrypted record whose plaintext is
/// empty, and the handshake keys it decrypts with are not yet authenticated: anyone who answers
/// the ClientHello could reset the board. A TLS 1.3 record of type application_data is at
/// least 17 bytes (a content-type byte and the 16-byte AES-GCM tag); a shorter one is refused
/// here, before embedded-tls reads it.
pub struct Guarded<'p, 's, const N: usize> {
    tcp: EdgeConn<'p, 's, N>,
    scan: RecordScan,
}

/// An I/O error under the TLS layer.
#[derive(Debug, Clone, Copy)]
pub enum GuardError {
    /// The socket failed.
    Tcp(tcp::Error),
    /// The server sent an encrypted record too short to hold any content.
    EmptyRecord,
}

impl core::fmt::Display for GuardError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GuardError::Tcp(e) => write!(f, "TCP: {e:?}"),
            GuardError::EmptyRecord => f.write_str("an encrypted TLS record with no content"),
        }
    }
}

impl core::error::Error for GuardError {}

impl embedded_io_async::Error for GuardError {
    fn kind(&self) -> embedded_io_async::ErrorKind {
        match self {
            GuardError::Tcp(e) => embedded_io_async::Error::kind(e),
            GuardError::EmptyRecord => embedded_io_async::ErrorKind::InvalidData,
        }
    }
}

impl<const N: usize> embedded_io_async::ErrorType for Guarded<'_, '_, N> {
    type Error = GuardError;
}

impl<const N: usize> embedded_io_async::Read for Guarded<'_, '_, N> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = self.tcp.read(buf).await.map_err(GuardError::Tcp)?;
        self.scan.feed(buf.get(..n).unwrap_or(&[]))?;
        Ok(n)
    }
}

impl<const N: usize> embedded_io_async::Write for Guarded<'_, '_, N> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.tcp.write(buf).await.map_err(GuardError::Tcp)
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        self.tcp.flush().await.map_err(GuardError::Tcp)
    }
}

/// Where the incoming byte stream is in its TLS records: in a 5-byte header, or in a body.
struct RecordScan {
    header: [u8; 5],
    have: usize,
    body_left: usize,
}

impl RecordScan {
    /// application_data: every record after the ServerHello is one.
    const APPLICATION_DATA: u8 = 23;
    /// A content-type byte and the AES-GCM tag.
    const MIN_ENCRYPTED: usize = 17;

    fn new() -> Self {
        RecordScan {
            header: [0; 5],
            have: 0,
            body_left: 0,
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), GuardError> {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(bytes.len());
                self.body_left -= n;
                bytes = bytes.get(n..).unwrap_or(&[]);
                continue;
            }
            let n = (self.header.len() - self.have).min(bytes.len());
            if let (Some(to), Some(from)) = (
                self.header.get_mut(self.have..self.have + n),
                bytes.get(..n),
            ) {
                to.copy_from_slice(from);
            }
            self.have += n;
            bytes = bytes.get(n..).unwrap_or(&[]);
            if self.have == self.header.len() {
                self.have = 0;
                let [kind, _, _, hi, lo] = self.header;
                let len = usize::from(u16::from_be_bytes([hi, lo]));
                if kind == Self::APPLICATION_DATA && len < Self::MIN_ENCRYPTED {
                    return Err(GuardError::EmptyRecord);
                }
                self.body_left = len;
            }
        }
        Ok(())
    }
}

/// What embedded-tls asks of the client for one handshake: randomness and the verifier.
struct Provider<'x, R> {
    rng: &'x RefCell<R>,
    verifier: PinnedVerifier<'x>,
}

/// A borrow of the pool's RNG for one synchronous draw (the ClientHello's random and key).
struct RngBorrow<'x, R>(RefMut<'x, R>);

impl<R: CryptoRngCore> embedded_tls::CryptoRng for RngBorrow<'_, R> {}

impl<R: CryptoRngCore> rand_core::RngCore for RngBorrow<'_, R> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.0.try_fill_bytes(dest)
    }
}

impl<R: CryptoRngCore> CryptoProvider for Provider<'_, R> {
    type CipherSuite = Suite;
    // The client never signs (no client certificate).
    type Signature = [u8; 0];

    fn rng(&mut self) -> impl CryptoRngCore {
        // Used only inside the ClientHello's construction, which does not await: the borrow
        // ends before any other task can run.
        RngBorrow(self.rng.borrow_mut())
    }

    fn verifier(&mut self) -> Result<&mut impl TlsVerifier<Self::CipherSuite>, TlsError> {
        Ok(&mut self.verifier)
    }
}

/// The pinned-CA verifier, with the order of the handshake enforced: a certificate first, then
/// exactly one signature over the transcript, and both before the handshake may finish.
struct PinnedVerifier<'x> {
    inner: CertVerifier<'x, Suite, NoClock, MAX_CERT_CHAIN>,
    certificate: bool,
    signature: bool,
}

impl<'x> PinnedVerifier<'x> {
    fn new(trust: Trust<'x>) -> Self {
        PinnedVerifier {
            inner: CertVerifier::new(Certificate::X509(trust.ca_der)),
            certificate: false,
            signature: false,
        }
    }

    /// The server sent a certificate that verified and proved it holds its key.
    fn proved(&self) -> bool {
        self.certificate && self.signature
    }
}

impl TlsVerifier<Suite> for PinnedVerifier<'_> {
    fn set_hostname_verification(&mut self, hostname: &str) -> Result<(), TlsError> {
        self.inner.set_hostname_verification(hostname)
    }

    fn verify_certificate(
        &mut self,
        transcript: &<Suite as embedded_tls::TlsCipherSuite>::Hash,
        mut cert: CertificateRef,
    ) -> Result<(), TlsError> {
        if self.certificate {
            return Err(TlsError::InvalidHandshake);
        }
        // The leaf alone, checked against the pin: embedded-tls would walk any intermediates
        // the server sends without looking at their CA flag, so one host's leaf could sign a
        // certificate for another. Chains are one level: pin the leaf's issuer.
        cert.entries.truncate(1);
        self.inner.verify_certificate(transcript, cert)?;
        self.certificate = true;
        Ok(())
    }

    fn verify_signature(&mut self, verify: CertificateVerifyRef) -> Result<(), TlsError> {
        if !self.certificate || self.signature {
            return Err(TlsError::InvalidHandshake);
        }
        self.inner.verify_signature(verify)?;
        self.signature = true;
        Ok(())
    }
}

/// A handshake failure in words a person can act on.
fn handshake_error(e: TlsError, host: &str) -> ConnectError {
    let mut d: String<DETAIL_BYTES> = String::new();
    let _ = match e {
        TlsError::InvalidCertificate => write!(
            d,
            "server certificate refused: not signed by the pinned CA, or not issued for {host}"
        ),
        TlsError::InvalidSignature => {
            write!(
                d,
                "the server's handshake signature does not match its certificate"
            )
        }
        TlsError::InvalidSignatureScheme => write!(
            d,
            "server certificate needs a signature this client cannot check (ECDSA P-256 only)"
        ),
        TlsError::OutOfMemory => write!(
            d,
            "the server's certificate chain is larger than the client's cap of {MAX_CERT_CHAIN} bytes"
        ),
        TlsError::InsufficientSpace => write!(
            d,
            "a TLS record (or the host name) is larger than the client's buffer for it"
        ),
        TlsError::HandshakeAborted(_, why) => write!(d, "the server sent the alert {why:?}"),
        TlsError::InvalidCipherSuite
        | TlsError::InvalidKeyShare
        | TlsError::InvalidSupportedVersions => write!(
            d,
            "the server does not offer TLS 1.3 with AES-128-GCM and P-256"
        ),
        TlsError::UnknownContentType | TlsError::InvalidRecord => {
            write!(
                d,
                "the server does not speak TLS on this port (use http://?)"
            )
        }
        TlsError::Io(embedded_io_async::ErrorKind::InvalidData) => {
            write!(d, "the server sent an encrypted TLS record with no content")
        }
        TlsError::Io(_) | TlsError::IoError | TlsError::ConnectionClosed => {
            write!(d, "the connection closed during the TLS handshake")
        }
        TlsError::DecodeError | TlsError::ParseError(_) => {
            write!(d, "malformed TLS handshake or certificate from the server")
        }
        other => write!(d, "TLS error {other:?}"),
    };
    ConnectError::new(ConnectErrorKind::Tls, &d)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    /// Never used for a handshake here; only to build a pool.
    struct NoRng;
    impl rand_core::RngCore for NoRng {
        fn next_u32(&mut self) -> u32 {
            0
        }
        fn next_u64(&mut self) -> u64 {
            0
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            dest.fill(0)
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            dest.fill(0);
            Ok(())
        }
    }
    impl embedded_tls::CryptoRng for NoRng {}

    #[test]
    fn a_buffer_set_is_lent_once_and_comes_back_when_its_holder_is_dropped() {
        let mut a = TlsStorage::<64, 32>::new();
        let mut b = TlsStorage::<64, 32>::new();
        let pool = TlsPool::new([a.buffers(), b.buffers()], Trust::pinned_ca(b"x"), NoRng);
        assert_eq!(pool.available(), 2);
        let (r1, w1, l1) = pool.lend().expect("first set");
        let (r2, w2, l2) = pool.lend().expect("second set");
        assert!(pool.lend().is_none(), "both sets are out");
        assert_eq!((r1.len(), w1.len(), r2.len(), w2.len()), (64, 32, 64, 32));
        r1[0] = 1;
        r2[0] = 2;
        drop((r1, w1, l1));
        assert_eq!(pool.available(), 1);
        let (r3, _w3, _l3) = pool.lend().expect("the first set again");
        assert_eq!(r3[0], 1, "the same bytes, lent again");
        drop((r2, w2, l2));
        assert_eq!(pool.available(), 1);
    }

    #[test]
    fn a_pool_can_move_into_a_static_cell() {
        fn send<T: Send>() {}
        send::<TlsPool<'static, NoRng, 2>>();
    }

    #[test]
    fn an_encrypted_record_too_short_for_content_is_refused_in_any_split() {
        // A handshake record, a ChangeCipherSpec, a 17-byte application_data record (the
        // smallest real one), then a 16-byte one (only a tag: empty plaintext).
        let mut stream = std::vec::Vec::new();
        stream.extend_from_slice(&[22, 3, 3, 0, 4, 1, 2, 3, 4]);
        stream.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
        stream.extend_from_slice(&[23, 3, 3, 0, 17]);
        stream.extend_from_slice(&[0xaa; 17]);
        let good = stream.len();
        stream.extend_from_slice(&[23, 3, 3, 0, 16]);
        stream.extend_from_slice(&[0xbb; 16]);
        for split in 0..=stream.len() {
            let mut scan = RecordScan::new();
            let (a, b) = stream.split_at(split);
            let first = scan.feed(a);
            let refused = first.is_err() || scan.feed(b).is_err();
            assert!(refused, "split at {split}");
            if split <= good {
                assert!(first.is_ok(), "the good records pass (split {split})");
            }
        }
        let mut scan = RecordScan::new();
        for byte in &stream[..good] {
            assert!(scan.feed(core::slice::from_ref(byte)).is_ok());
        }
    }

    #[test]
    fn handshake_failures_say_what_to_do() {
        let e = handshake_error(TlsError::InvalidCertificate, "mcp.example");
        assert_eq!(e.kind, ConnectErrorKind::Tls);
        assert_eq!(
            e.detail.as_str(),
            "server certificate refused: not signed by the pinned CA, or not issued for mcp.example"
        );
        let e = handshake_error(TlsError::InvalidRecord, "h");
        assert!(e.detail.contains("does not speak TLS"), "{}", e.detail);
        let e = handshake_error(TlsError::OutOfMemory, "h");
        assert!(e.detail.contains("3072"), "{}", e.detail);
    }
}
