//! https on the edge: the edge client (`verifi-mcp-embassy` with `tls`, embedded-tls TLS 1.3)
//! on embassy-net over a real TAP device, against the real rmcp test server behind rustls
//! fronts, inside a network namespace this test makes (and deletes, also on failure).
//!
//! In the namespace, on 192.0.2.1: the rmcp `verifi-test-server` (plain, port 8001), a DNS
//! server answering `mcp.edge.test` (so the endpoint is a host name and SNI is sent), and three
//! TLS fronts to the rmcp server: one with a leaf for `mcp.edge.test` signed by the pinned CA,
//! one with a self-signed certificate for the same name (not trusted), one with a leaf of the
//! pinned CA for another name. The embassy stack is 192.0.2.2 on the other end of the TAP.
//! The handshake randomness comes from the OS here; on the board it is the HAL's RNG.
//!
//! Needs root (a namespace and a TAP device). Not root: the test FAILS and says why, unless
//! `VERIFI_ALLOW_NO_NETNS=1`, when it says loudly that it did not run.

mod edge_support;

use edge_support::netns::{Netns, can_run, ip};

use std::cell::RefCell;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use embassy_futures::select::select;
use embassy_net::{Config, Ipv4Address, Ipv4Cidr, StaticConfigV4};
use futures_rustls::TlsAcceptor;
use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use futures_rustls::rustls::{self, ServerConfig};
use smol::Async;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use verifi_mcp_core::drive::SlotConfig;
use verifi_mcp_core::harness::events::TimelineEvent;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::json::{JsonLimits, Value};
use verifi_mcp_embassy::{
    CallStorage, EdgeNet, EdgeSlot, ProbeCallStorage, TlsNet, TlsPool, TlsStorage, Trust,
};

const TAP: &str = "vtls0";
const SERVER: &str = "192.0.2.1";
const NAME: &str = "mcp.edge.test";
const RMCP: u16 = 8001;
const GOOD: u16 = 8443;
const ROGUE: u16 = 8444;
const WRONG_NAME: u16 = 8445;
/// Byte-level TLS peers: one accepts and never answers, one answers the ClientHello with a
/// record header announcing 65 535 bytes (more than any TLS record may hold).
const SILENT: u16 = 8446;
const HUGE_RECORD: u16 = 8447;
/// A byte-level peer answering with an encrypted record too short to hold content (which
/// embedded-tls itself would panic on once it could decrypt it).
const EMPTY_RECORD: u16 = 8449;
/// A leaf of the pinned CA (for another name) used as a CA: it signs a certificate for `NAME`
/// and sends both.
const LEAF_AS_CA: u16 = 8448;
/// The bearer token provisioned on the edge (a header of the slot's config).
const TOKEN: &str = "edge-bearer-7d1c9a4e5f";

/// Waits (bounded) until something accepts on `port`; this thread is inside the namespace.
fn wait_listening(port: u16) {
    let start = Instant::now();
    while TcpStream::connect_timeout(
        &format!("{SERVER}:{port}").parse().unwrap(),
        Duration::from_millis(200),
    )
    .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "server on {port} did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A private CA (ECDSA P-256, what the edge verifies) and the leaves it signs.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    der: Vec<u8>,
}

impl Ca {
    fn new() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "edge test CA");
        let cert = p.self_signed(&key).unwrap();
        Ca {
            der: cert.der().to_vec(),
            issuer: rcgen::Issuer::new(p, key),
        }
    }

    /// A leaf for `name`: (DER, PKCS#8 key).
    fn leaf(&self, name: &str) -> (Vec<u8>, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let p = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.der().to_vec(), key.serialize_der())
    }

    /// A certificate for `name` signed by the key of an ordinary leaf of this CA (issued for
    /// another name): (chain [forged, leaf], forged's key).
    fn forged_under_leaf(&self, name: &str) -> (Vec<Vec<u8>>, Vec<u8>) {
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf_params = rcgen::CertificateParams::new(vec!["other.edge.test".into()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &self.issuer).unwrap();
        let leaf_issuer = rcgen::Issuer::new(leaf_params, leaf_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let p = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        let forged = p.signed_by(&key, &leaf_issuer).unwrap();
        (
            vec![forged.der().to_vec(), leaf.der().to_vec()],
            key.serialize_der(),
        )
    }
}

/// What a TLS front saw: handshakes, the SNI of each, and the decrypted bytes the client sent.
#[derive(Default)]
struct FrontLog {
    handshakes: usize,
    sni: Vec<Option<String>>,
    plaintext: Vec<u8>,
}

/// A rustls front on `bind` forwarding each connection to the rmcp server; runs until `stop`.
fn start_front(
    bind: SocketAddr,
    upstream: SocketAddr,
    chain: Vec<Vec<u8>>,
    key: Vec<u8>,
    stop: Arc<AtomicBool>,
) -> Arc<Mutex<FrontLog>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            chain.into_iter().map(CertificateDer::from).collect(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = Async::new(std::net::TcpListener::bind(bind).unwrap()).unwrap();
    let log = Arc::new(Mutex::new(FrontLog::default()));
    let seen = log.clone();
    std::thread::spawn(move || {
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(async {
            loop {
                let accepted = smol::future::or(async { Some(listener.accept().await) }, async {
                    while !stop.load(Ordering::SeqCst) {
                        smol::Timer::after(Duration::from_millis(20)).await;
                    }
                    None
                })
                .await;
                let Some(Ok((tcp, _))) = accepted else { break };
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                ex.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    {
                        let mut s = seen.lock().unwrap();
                        s.handshakes += 1;
                        s.sni
                            .push(tls.get_ref().1.server_name().map(str::to_string));
                    }
                    let Ok(up) = Async::<TcpStream>::connect(upstream).await else {
                        return;
                    };
                    let (mut tr, mut tw) = smol::io::split(tls);
                    let (ur, mut uw) = smol::io::split(up);
                    let to_server = async {
                        let mut buf = vec![0u8; 4096];
                        loop {
                            let n = match tr.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            {
                                let mut s = seen.lock().unwrap();
                                if s.plaintext.len() < 1 << 20 {
                                    s.plaintext.extend_from_slice(&buf[..n]);
                                }
                            }
                            if uw.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let to_client = async {
                        let _ = smol::io::copy(ur, &mut tw).await;
                        let _ = tw.close().await;
                    };
                    smol::future::or(to_server, to_client).await;
                })
                .detach();
            }
        }));
    });
    log
}

/// A DNS server on 192.0.2.1:53 answering A queries for `names` with 192.0.2.1, NXDOMAIN for
/// anything else; runs until `stop`.
fn start_dns(names: &'static [&'static str], stop: Arc<AtomicBool>) {
    let sock = UdpSocket::bind((SERVER, 53)).expect("bind DNS on 192.0.2.1:53");
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::SeqCst) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            if let Some(reply) = dns_answer(&buf[..n], names) {
                let _ = sock.send_to(&reply, from);
            }
        }
    });
}

fn dns_answer(q: &[u8], names: &[&str]) -> Option<Vec<u8>> {
    // Header (12 bytes), one question: labels, type, class.
    let mut at = 12;
    let mut name = Vec::new();
    loop {
        let len = *q.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        name.push(
            std::str::from_utf8(q.get(at..at + len)?)
                .ok()?
                .to_ascii_lowercase(),
        );
        at += len;
    }
    let qtype = u16::from_be_bytes([*q.get(at)?, *q.get(at + 1)?]);
    let question = q.get(12..at + 4)?;
    let known = names.contains(&name.join(".").as_str());
    let answer = known && qtype == 1;
    let mut r = Vec::new();
    r.extend_from_slice(&q[..2]); // id
    r.extend_from_slice(&[0x81, if known { 0x80 } else { 0x83 }]); // response, RA, rcode
    r.extend_from_slice(&[0, 1, 0, u8::from(answer), 0, 0, 0, 0]);
    r.extend_from_slice(question);
    if answer {
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    }
    Some(r)
}

/// A byte-level peer on `port`: each accepted connection reads what comes, writes `answer` once
/// and stays open (never closing first) until `stop`.
fn start_hostile(port: u16, answer: &'static [u8], stop: Arc<AtomicBool>) {
    let listener = std::net::TcpListener::bind((SERVER, port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Ok((mut s, _)) = listener.accept() {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                let mut hello = [0u8; 1024];
                let _ = std::io::Read::read(&mut s, &mut hello);
                let _ = std::io::Write::write_all(&mut s, answer);
                held.push(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

fn args(json: &'static str) -> Option<Value<'static>> {
    Some(Value::parse(json.as_bytes(), JsonLimits::default()).unwrap())
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A slot for `url` carrying the provisioned bearer token.
fn config(slot: &'static str, url: &'static str) -> SlotConfig<'static> {
    let mut c = SlotConfig::new(slot, Endpoint::parse_base(url).unwrap(), url);
    c.headers = Box::leak(Box::new([(
        "authorization",
        leak(format!("Bearer {TOKEN}")),
    )]));
    c.timeout_ms = 15_000;
    c
}

struct Fronts {
    good: Arc<Mutex<FrontLog>>,
    rogue: Arc<Mutex<FrontLog>>,
    wrong_name: Arc<Mutex<FrontLog>>,
    leaf_as_ca: Arc<Mutex<FrontLog>>,
}

#[test]
fn edge_https_pinned_ca_bearer_and_refusals() {
    if !can_run("edge_tls") {
        return;
    }
    let ns = Netns::named(format!("verifi-edgetls-{}", std::process::id()));
    ip(&["netns", "add", &ns.name]);
    ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
    let ns_file = std::fs::File::open(format!("/run/netns/{}", ns.name)).expect("open netns");

    // A worker thread enters the namespace: the TAP device, the fronts, the DNS server and the
    // embassy stack live there (threads it spawns inherit it). Whatever happens in it, `ns`
    // kills the servers and deletes the namespace.
    let name = ns.name.clone();
    let servers = ns.servers.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_all = stop.clone();
    let worker = std::thread::spawn(move || {
        let rc = unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        let device = embassy_net_tuntap::TunTapDevice::new(TAP).expect("create TAP device");
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{SERVER}/24"),
            "dev",
            TAP,
        ]);
        ip(&["-n", &name, "link", "set", TAP, "up"]);
        let child = Command::new("ip")
            .args(["netns", "exec", &name])
            .arg(env!("CARGO_BIN_EXE_verifi-edge-test-server"))
            .args(["--mode", "stateful", "--bind", &format!("{SERVER}:{RMCP}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start verifi-test-server");
        servers.lock().unwrap().push((0, child));
        wait_listening(RMCP);

        let ca = Ca::new();
        let upstream: SocketAddr = format!("{SERVER}:{RMCP}").parse().unwrap();
        let at = |port: u16| -> SocketAddr { format!("{SERVER}:{port}").parse().unwrap() };
        let (cert, key) = ca.leaf(NAME);
        let good = start_front(at(GOOD), upstream, vec![cert], key, stop.clone());
        let own = rcgen::generate_simple_self_signed(vec![NAME.to_string()]).unwrap();
        let rogue = start_front(
            at(ROGUE),
            upstream,
            vec![own.cert.der().to_vec()],
            own.signing_key.serialize_der(),
            stop.clone(),
        );
        let (cert, key) = ca.leaf("other.edge.test");
        let wrong_name = start_front(at(WRONG_NAME), upstream, vec![cert], key, stop.clone());
        let (chain, key) = ca.forged_under_leaf(NAME);
        let leaf_as_ca = start_front(at(LEAF_AS_CA), upstream, chain, key, stop.clone());
        start_dns(&[NAME, "other.edge.test"], stop.clone());
        start_hostile(SILENT, b"", stop.clone());
        start_hostile(
            HUGE_RECORD,
            &[0x16, 0x03, 0x03, 0xff, 0xff, 0x02],
            stop.clone(),
        );
        let mut empty = vec![23, 3, 3, 0, 16];
        empty.extend_from_slice(&[0; 16]);
        start_hostile(EMPTY_RECORD, empty.leak(), stop.clone());
        for port in [
            GOOD,
            ROGUE,
            WRONG_NAME,
            SILENT,
            HUGE_RECORD,
            LEAF_AS_CA,
            EMPTY_RECORD,
        ] {
            wait_listening(port);
        }
        let fronts = Fronts {
            good,
            rogue,
            wrong_name,
            leaf_as_ca,
        };
        let ca_der: &'static [u8] = Box::leak(ca.der.into_boxed_slice());

        let net_config = Config::ipv4_static(StaticConfigV4 {
            address: Ipv4Cidr::new(Ipv4Address::new(192, 0, 2, 2), 24),
            gateway: None,
            dns_servers: heapless::Vec::from_slice(&[Ipv4Address::new(192, 0, 2, 1)]).unwrap(),
        });
        let (stack, mut runner) = edge_support::stack(device, net_config, 11);
        edge_support::run_bounded(Duration::from_secs(120), async move {
            select(runner.run(), scenario(stack, ca_der, &fronts)).await;
        });
    });
    let outcome = worker.join();
    stop_all.store(true, Ordering::SeqCst);
    drop(ns);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn scenario(stack: embassy_net::Stack<'static>, ca_der: &'static [u8], fronts: &Fronts) {
    stack.wait_config_up().await;
    let sockets = edge_support::pool::<3>(stack, 8192, 2048);
    let net = EdgeNet::new(sockets);
    let storage: &'static mut [TlsStorage; 2] =
        Box::leak(Box::new([TlsStorage::new(), TlsStorage::new()]));
    let [s0, s1] = storage;
    let tls_pool: &'static TlsPool<'static, rand_core::OsRng, 2> =
        Box::leak(Box::new(TlsPool::new(
            [s0.buffers(), s1.buffers()],
            Trust::pinned_ca(ca_der),
            rand_core::OsRng,
        )));
    let tls = TlsNet::new(&net, tls_pool);
    let st: &mut ProbeCallStorage = Box::leak(Box::new(ProbeCallStorage::new()));
    let events = RefCell::new(Vec::<String>::new());
    let on_event = |e: &TimelineEvent<'_>| events.borrow_mut().push(format!("{e:?}"));
    let mut outputs: Vec<String> = Vec::new();

    // The trusted server: handshake (SNI = the host name), tools/list and calls, with the
    // provisioned bearer token on every request and nowhere in what the client reports.
    let url = leak(format!("https://{NAME}:{GOOD}"));
    let slot = EdgeSlot::new(config("kali", url), "run-tls", &[])
        .unwrap()
        .with_timeline(&on_event);
    let mut names = Vec::new();
    slot.list_tools(&tls, &mut st.buffers(), |n| names.push(n.to_string()))
        .await
        .expect("tools/list over TLS");
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    let mut b = st.buffers();
    let r = slot
        .call(&tls, "echo", args(r#"{"text":"over TLS 1.3"}"#), &mut b)
        .await;
    assert!(r.ok(), "echo over TLS: {:?}", r.error());
    assert_eq!(r.text, "over TLS 1.3");
    outputs.push(format!("{r:?}"));
    let mut b = st.buffers();
    let leaky = leak(format!(r#"{{"text":"the token is {TOKEN}"}}"#));
    let r = slot.call(&tls, "echo", args(leaky), &mut b).await;
    assert!(r.ok(), "echo over TLS: {:?}", r.error());
    assert_eq!(
        r.text, "the token is [REDACTED]",
        "a tool echoing the token"
    );
    outputs.push(format!("{r:?}"));
    // A request and a reply over several TLS records each (the write buffer is 2 KiB).
    let big: &mut CallStorage<8192, 1024, 1024, 16384, 8192, 256, 0> =
        Box::leak(Box::new(CallStorage::new()));
    let long = "0123456789abcdef".repeat(375);
    let json = leak(format!(r#"{{"text":"{long}"}}"#));
    let mut b = big.buffers();
    let r = slot.call(&tls, "echo", args(json), &mut b).await;
    assert!(r.ok(), "6000-byte echo over TLS: {:?}", r.error());
    assert_eq!(r.text, long);
    let mut b = st.buffers();
    let r = slot
        .call(&tls, "fail", args(r#"{"message":"boom"}"#), &mut b)
        .await;
    assert!(
        !r.ok() && r.is_error(),
        "tool error over TLS: {:?}",
        r.error()
    );
    outputs.push(format!("{r:?}"));
    {
        let good = fronts.good.lock().unwrap();
        assert!(
            good.handshakes >= 3,
            "one handshake per connection: {}",
            good.handshakes
        );
        assert!(
            good.sni.iter().all(|s| s.as_deref() == Some(NAME)),
            "SNI is the endpoint's host name: {:?}",
            good.sni
        );
        let sent = String::from_utf8_lossy(&good.plaintext).to_ascii_lowercase();
        let header = format!("authorization: bearer {}", TOKEN.to_ascii_lowercase());
        let posts = sent.matches("post /mcp http/1.1").count();
        assert!(posts >= 5, "requests seen by the front: {posts}");
        assert_eq!(
            sent.matches(&header).count(),
            posts,
            "every request carries the provisioned bearer token"
        );
    }
    assert_eq!(
        tls_pool.available(),
        2,
        "every TLS buffer set is back in the pool"
    );
    eprintln!(
        "edge_tls: {} handshakes with {NAME}, counters {:?}",
        fronts.good.lock().unwrap().handshakes,
        slot.counters()
    );

    // Not trusted: a self-signed certificate for the right name. Refused at the handshake,
    // with the reason, long before the call's deadline; nothing reaches the tool.
    let refused = |url: &'static str, front: &'static str| {
        let tls = &tls;
        let on_event = &on_event;
        let st = &mut *Box::leak(Box::new(ProbeCallStorage::new()));
        async move {
            let slot = EdgeSlot::new(config(front, url), "run-tls", &[])
                .unwrap()
                .with_timeline(on_event);
            let started = Instant::now();
            let mut b = st.buffers();
            let r = slot
                .call(tls, "echo", args(r#"{"text":"x"}"#), &mut b)
                .await;
            assert!(
                !r.ok() && !r.is_error(),
                "{front}: unreachable shape: {r:?}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{front}: refused at once, not at the deadline ({:?})",
                started.elapsed()
            );
            let e = r.error().unwrap_or_default().to_string();
            eprintln!("edge_tls: {front}: {e}");
            (e, format!("{r:?}"))
        }
    };
    let (e, out) = refused(leak(format!("https://{NAME}:{ROGUE}")), "rogue").await;
    outputs.push(out);
    assert!(
        e.contains(
            "TLS handshake failed (server certificate refused: not signed by the pinned CA, or not issued for mcp.edge.test)"
        ),
        "{e}"
    );
    // The pinned CA's certificate for another host name.
    let (e, out) = refused(leak(format!("https://{NAME}:{WRONG_NAME}")), "wrong-name").await;
    outputs.push(out);
    assert!(e.contains("server certificate refused"), "{e}");
    // A certificate for the right name, signed by an ordinary leaf of the pinned CA that the
    // server sends along: a leaf is no CA.
    let (e, out) = refused(leak(format!("https://{NAME}:{LEAF_AS_CA}")), "leaf-as-ca").await;
    outputs.push(out);
    assert!(e.contains("server certificate refused"), "{e}");
    // The plain rmcp server spoken to with https://.
    let (e, out) = refused(leak(format!("https://{SERVER}:{RMCP}")), "plain").await;
    outputs.push(out);
    assert!(e.contains("TLS handshake failed"), "{e}");
    // A record header announcing more than the read buffer: refused by name, at once.
    let (e, out) = refused(leak(format!("https://{NAME}:{HUGE_RECORD}")), "huge").await;
    outputs.push(out);
    assert!(
        e.contains("TLS handshake failed (a TLS record (or the host name) is larger than"),
        "{e}"
    );
    let (e, out) = refused(leak(format!("https://{NAME}:{EMPTY_RECORD}")), "empty").await;
    outputs.push(out);
    assert!(
        e.contains(
            "TLS handshake failed (the server sent an encrypted TLS record with no content)"
        ),
        "{e}"
    );
    // A peer that never answers the ClientHello: the call's deadline ends it, no hang.
    {
        let mut c = config("silent", leak(format!("https://{NAME}:{SILENT}")));
        c.timeout_ms = 1_500;
        let silent = EdgeSlot::new(c, "run-tls", &[])
            .unwrap()
            .with_timeline(&on_event);
        let started = Instant::now();
        let mut b = st.buffers();
        let r = silent
            .call(&tls, "echo", args(r#"{"text":"x"}"#), &mut b)
            .await;
        let e = r.error().unwrap_or_default().to_string();
        eprintln!("edge_tls: silent after {:?}: {e}", started.elapsed());
        assert!(!r.ok() && e.contains("timed out"), "{e}");
        assert!(
            started.elapsed() >= Duration::from_millis(1_400)
                && started.elapsed() < Duration::from_secs(5),
            "ended by the call's deadline: {:?}",
            started.elapsed()
        );
        outputs.push(format!("{r:?}"));
    }
    for front in [&fronts.rogue, &fronts.wrong_name, &fronts.leaf_as_ca] {
        let f = front.lock().unwrap();
        assert!(
            f.plaintext.is_empty(),
            "no request may cross a refused handshake"
        );
    }
    assert_eq!(
        tls_pool.available(),
        2,
        "refused handshakes give the buffers back"
    );

    // http:// through the same TlsNet is plain TCP.
    let plain_url = leak(format!("http://{SERVER}:{RMCP}"));
    let plain = EdgeSlot::new(config("plain", plain_url), "run-tls", &[]).unwrap();
    let mut b = st.buffers();
    let r = plain
        .call(&tls, "echo", args(r#"{"text":"plain"}"#), &mut b)
        .await;
    assert!(r.ok(), "http through TlsNet: {:?}", r.error());

    // A bare EdgeNet refuses https with a typed error before any packet.
    let before = fronts.good.lock().unwrap().handshakes;
    let bare = EdgeSlot::new(config("bare", url), "run-tls", &[]).unwrap();
    let mut b = st.buffers();
    let r = bare
        .call(&net, "echo", args(r#"{"text":"x"}"#), &mut b)
        .await;
    let e = r.error().unwrap_or_default();
    assert!(
        e.contains("not supported by this adapter") && e.contains("TlsNet"),
        "{e}"
    );
    assert_eq!(
        fronts.good.lock().unwrap().handshakes,
        before,
        "nothing was sent"
    );
    outputs.push(format!("{r:?}"));

    // The token never reaches a result, an error, the timeline or the ledger.
    let ev = events.borrow();
    assert!(
        ev.iter().any(|e| e.contains("rogue")),
        "the refusal is on the timeline: {ev:?}"
    );
    for text in ev.iter().chain(outputs.iter()) {
        assert!(!text.contains(TOKEN), "token leaked into {text}");
    }
    assert!(!format!("{:?}", slot.counters()).contains(TOKEN));
}
