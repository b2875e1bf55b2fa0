//! A TLS-terminating proxy for tests: a self-signed certificate made by `rcgen` for
//! `localhost` and `127.0.0.1`, served with rustls on 127.0.0.1:0, forwarding each connection's
//! bytes to a plain TCP upstream (e.g. a [`crate::TestServer`]).
//!
//! Owns: the certificate and the proxy thread. The client side trusts [`TlsProxy::root_pem`].

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_rustls::TlsAcceptor;
use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use futures_rustls::rustls::{self, ServerConfig};
use smol::Async;

/// A running TLS proxy. Dropping it stops accepting (live tunnels end with their peers).
pub struct TlsProxy {
    addr: SocketAddr,
    root_pem: String,
    handshakes: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TlsProxy {
    /// Starts a proxy to `upstream` with a fresh self-signed certificate.
    pub fn start(upstream: SocketAddr) -> io::Result<TlsProxy> {
        let other = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| other(&e))?;
        let root_pem = cert.cert.pem();
        let chain = vec![cert.cert.der().to_vec()];
        TlsProxy::start_with(upstream, chain, cert.signing_key.serialize_der(), root_pem)
    }

    /// Starts a proxy to `upstream` serving `chain` (DER, leaf first) with `key` (PKCS#8 DER);
    /// `root_pem` is what [`TlsProxy::root_pem`] hands to clients.
    pub fn start_with(
        upstream: SocketAddr,
        chain: Vec<Vec<u8>>,
        key: Vec<u8>,
        root_pem: String,
    ) -> io::Result<TlsProxy> {
        let other = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
        let chain = chain.into_iter().map(CertificateDer::from).collect();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| other(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| other(&e))?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let listener = Async::new(listener)?;
        let stop = Arc::new(AtomicBool::new(false));
        let handshakes = Arc::new(AtomicUsize::new(0));
        let (s, h) = (stop.clone(), handshakes.clone());
        let thread = std::thread::Builder::new()
            .name("tls-proxy".into())
            .spawn(move || {
                let ex = smol::LocalExecutor::new();
                smol::block_on(ex.run(async {
                    loop {
                        let accepted =
                            smol::future::or(async { Some(listener.accept().await) }, async {
                                while !s.load(Ordering::SeqCst) {
                                    smol::Timer::after(Duration::from_millis(20)).await;
                                }
                                None
                            })
                            .await;
                        let Some(Ok((tcp, _))) = accepted else { break };
                        let _ = tcp.get_ref().set_nodelay(true);
                        let acceptor = acceptor.clone();
                        let h = h.clone();
                        ex.spawn(async move {
                            let Ok(tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            h.fetch_add(1, Ordering::SeqCst);
                            let Ok(up) = Async::<TcpStream>::connect(upstream).await else {
                                return;
                            };
                            let _ = up.get_ref().set_nodelay(true);
                            let (tr, tw) = smol::io::split(tls);
                            let (ur, uw) = smol::io::split(up);
                            let _ =
                                smol::future::or(smol::io::copy(tr, uw), smol::io::copy(ur, tw))
                                    .await;
                        })
                        .detach();
                    }
                }));
            })?;
        Ok(TlsProxy {
            addr,
            root_pem,
            handshakes,
            stop,
            thread: Some(thread),
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `https://localhost:PORT` (the certificate's name).
    pub fn base_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }
    /// The self-signed certificate, PEM, to trust as a root.
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }
    /// TLS handshakes completed.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
