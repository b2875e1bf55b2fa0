//! Shared plumbing of the edge tests: embassy-net stacks on std, socket pools for the edge
//! client, and a small block_on that parks the thread (embassy-time's std driver and the TAP
//! device's reactor wake it).
//!
//! Owns nothing the user runs: the client is the real `verifi-mcp-embassy` over real
//! embassy-net sockets; this module only builds stacks and leaks their storage (tests may).
#![allow(dead_code)]

pub mod netns;
pub mod replay;

use std::time::Duration as StdDuration;

use embassy_net::{Config, Ipv4Address, Ipv4Cidr, Runner, Stack, StackResources, StaticConfigV4};
use verifi_mcp_embassy::SocketPool;

/// Sockets per stack (client pool + DNS + a server's acceptors).
pub const SOCKETS: usize = 8;

/// One stack's IPv4 config: `addr/24`, no gateway, no DNS.
pub fn static_v4(addr: [u8; 4]) -> Config {
    Config::ipv4_static(StaticConfigV4 {
        address: Ipv4Cidr::new(Ipv4Address::new(addr[0], addr[1], addr[2], addr[3]), 24),
        gateway: None,
        dns_servers: Default::default(),
    })
}

/// A stack over `device` whose storage lives for the rest of the test process.
pub fn stack<D: embassy_net::driver::Driver>(
    device: D,
    config: Config,
    seed: u64,
) -> (Stack<'static>, Runner<'static, D>) {
    let resources: &'static mut StackResources<SOCKETS> =
        Box::leak(Box::new(StackResources::new()));
    embassy_net::new(device, config, resources, seed)
}

/// A client socket pool of `N` sockets, each with `rx`/`tx` bytes of leaked buffers.
pub fn pool<const N: usize>(
    stack: Stack<'static>,
    rx: usize,
    tx: usize,
) -> &'static SocketPool<'static, N> {
    let buffers = std::array::from_fn(|_| {
        let r: &'static mut [u8] = Box::leak(vec![0u8; rx].into_boxed_slice());
        let t: &'static mut [u8] = Box::leak(vec![0u8; tx].into_boxed_slice());
        (r, t)
    });
    Box::leak(Box::new(SocketPool::new(stack, buffers)))
}

/// Leaked bytes for a server socket.
pub fn leak(n: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; n].into_boxed_slice())
}

/// Runs `f` to completion on this thread, parking between wake-ups, and fails the test when
/// it has not finished after `limit` (a hung client is a failure, not a stuck CI run).
pub fn run_bounded<F: std::future::Future>(limit: StdDuration, f: F) -> F::Output {
    let deadline =
        embassy_time::Timer::after(embassy_time::Duration::from_millis(limit.as_millis() as u64));
    futures_lite::future::block_on(async {
        match embassy_futures::select::select(f, deadline).await {
            embassy_futures::select::Either::First(out) => out,
            embassy_futures::select::Either::Second(()) => {
                panic!("edge test did not finish within {limit:?}")
            }
        }
    })
}
