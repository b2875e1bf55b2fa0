//! The host adapter's transport against real servers: keep-alive reuse, the per-endpoint
//! connection limit (and a call waiting at it taking a connection put back), refusal, DNS through `localhost`, TLS with an `rcgen` root (and without
//! it), and the clock.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use embedded_io_async::{Read, Write};
use verifi_mcp_host::net::{Conn, FailureKind, HostNet, PoolKey, RootCert, tls_config};
use verifi_mcp_tests::{Mode, TestServer, TlsProxy};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn key(tls: bool, host: &str, port: u16) -> PoolKey {
    PoolKey {
        tls,
        host: host.into(),
        port,
    }
}

/// Sends an initialize in one write and reads until the reply's head and a JSON-RPC result
/// are in (bounded); returns the bytes read.
async fn initialize_over(conn: &mut Conn, host: &str) -> String {
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{INIT}",
        INIT.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    conn.flush().await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&got).contains("\"result\"") {
        assert!(
            Instant::now() < end,
            "no reply: {}",
            String::from_utf8_lossy(&got)
        );
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn plain_net(limit: usize) -> HostNet {
    HostNet::new(limit, tls_config(&[]).unwrap())
}

#[test]
fn a_recycled_connection_is_reused_and_fresh_forbids_the_pool() {
    let server = TestServer::start(Mode::Json).unwrap();
    let net = plain_net(4);
    let k = key(false, "127.0.0.1", server.addr().port());
    smol::block_on(async {
        let (mut c, reused) = net.open(&k, false).await.unwrap();
        assert!(!reused);
        let first = c.local_addr().unwrap();
        assert!(
            initialize_over(&mut c, "127.0.0.1")
                .await
                .starts_with("HTTP/1.1 200")
        );
        net.recycle(c);
        assert_eq!(net.idle(&k), 1);
        let (mut c, reused) = net.open(&k, false).await.unwrap();
        assert!(reused);
        assert_eq!(c.local_addr().unwrap(), first, "the same socket came back");
        assert!(
            initialize_over(&mut c, "127.0.0.1")
                .await
                .starts_with("HTTP/1.1 200")
        );
        net.recycle(c);
        let (c, reused) = net.open(&k, true).await.unwrap();
        assert!(!reused, "fresh never hands out a pooled connection");
        assert_ne!(c.local_addr().unwrap(), first);
    });
    // The server counts a connection when its accept loop gets to it: wait for it.
    assert!(
        server
            .stats()
            .wait_until(Duration::from_secs(5), |s| s.connections() == 2),
        "{} connections",
        server.stats().connections()
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(server.stats().connections(), 2);
}

#[test]
fn the_connection_limit_bounds_open_connections() {
    let server = TestServer::start(Mode::Json).unwrap();
    let net = plain_net(2);
    let k = key(false, "127.0.0.1", server.addr().port());
    smol::block_on(async {
        let (a, _) = net.open(&k, true).await.unwrap();
        let (_b, _) = net.open(&k, true).await.unwrap();
        let third = smol::future::or(async { Some(net.open(&k, true).await) }, async {
            smol::Timer::after(Duration::from_millis(300)).await;
            None
        })
        .await;
        assert!(
            third.is_none(),
            "a third connection opened past the limit of 2"
        );
        // A pooled idle connection is closed to make room for a fresh one.
        net.recycle(a);
        let (c, reused) = net.open(&k, true).await.unwrap();
        assert!(!reused);
        assert_eq!(net.idle(&k), 0);
        drop(c);
        let (_d, _) = net.open(&k, true).await.unwrap();
    });
}

#[test]
fn a_call_waiting_at_the_limit_takes_a_connection_put_back() {
    // A pooled connection keeps its permit, so a call waiting at the limit must be woken by a
    // connection put back (a call's end, a parked stream drained), not only by one closed.
    let server = TestServer::start(Mode::Json).unwrap();
    let net = plain_net(1);
    let k = key(false, "127.0.0.1", server.addr().port());
    smol::block_on(async {
        let (a, _) = net.open(&k, true).await.unwrap();
        let first = a.local_addr().unwrap();
        let got = smol::future::or(async { Some(net.open(&k, false).await) }, async {
            smol::Timer::after(Duration::from_millis(100)).await;
            net.recycle(a);
            smol::Timer::after(Duration::from_secs(5)).await;
            None
        })
        .await;
        let (c, reused) = got
            .expect("the waiting call did not take the connection put back within 5 s")
            .unwrap();
        assert!(reused, "the waiting call dialled instead of reusing");
        assert_eq!(c.local_addr().unwrap(), first, "the same socket came back");
    });
}

#[test]
fn a_closed_port_is_refused_and_localhost_resolves() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let net = plain_net(1);
    smol::block_on(async {
        let err = net
            .open(&key(false, "127.0.0.1", port), false)
            .await
            .err()
            .unwrap();
        assert_eq!(err.kind, FailureKind::Refused, "{err}");
        assert!(err.to_string().starts_with("connection refused"), "{err}");
    });
    let server = TestServer::start(Mode::Json).unwrap();
    smol::block_on(async {
        let (mut c, _) = net
            .open(&key(false, "localhost", server.addr().port()), false)
            .await
            .expect("localhost resolves (to 127.0.0.1 among others)");
        assert!(
            initialize_over(&mut c, "localhost")
                .await
                .starts_with("HTTP/1.1 200")
        );
    });
}

#[test]
fn tls_with_a_custom_root_works_and_without_it_fails() {
    let server = TestServer::start(Mode::Stateful).unwrap();
    let proxy = TlsProxy::start(server.addr()).unwrap();
    let k = key(true, "localhost", proxy.addr().port());
    let trusted = HostNet::new(
        2,
        tls_config(&[RootCert::Pem(proxy.root_pem().as_bytes().to_vec())]).unwrap(),
    );
    smol::block_on(async {
        let (mut c, _) = trusted.open(&k, false).await.unwrap();
        let reply = initialize_over(&mut c, "localhost").await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("verifi-test-server"));
    });
    assert_eq!(proxy.handshakes(), 1);
    let untrusted = plain_net(2);
    smol::block_on(async {
        let err = untrusted.open(&k, false).await.err().unwrap();
        assert_eq!(err.kind, FailureKind::Tls, "{err}");
    });
    assert!(tls_config(&[RootCert::Pem(b"not a pem".to_vec())]).is_err());
}

#[test]
fn the_clock_moves_and_sleep_until_waits() {
    let net = plain_net(1);
    smol::block_on(async {
        let t0 = net.now_ms();
        net.sleep_until_ms(t0 + 30).await;
        assert!(net.now_ms() >= t0 + 30);
    });
}
