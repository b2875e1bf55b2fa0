//! The probe on Linux: the same `probe::run` over embassy-net on a TAP device, with embassy's
//! std executor and clock. The TAP must exist and be up on the Linux side, e.g.
//!
//! ```text
//! ip tuntap add dev tap0 mode tap user $USER && ip addr add 192.0.2.1/24 dev tap0 && ip link set tap0 up
//! cargo run --release --target x86_64-unknown-linux-gnu -- --tap tap0 --ip 192.0.2.2/24 \
//!     --primary http://192.0.2.1:8001 --fallback http://192.0.2.1:8002 --count 3 --period 5
//! ```
//! `EDGE_PROBE_TOKEN` (read at start) is sent as `authorization: Bearer …` and redacted.
//! With `--features tls`, `https://` endpoints are verified against the DER file that
//! `EDGE_PROBE_CA` names (read at start).

use embassy_executor::{Executor, Spawner};
use embassy_net::{Config, Ipv4Address, Ipv4Cidr, Runner, StackResources, StaticConfigV4};
use embassy_net_tuntap::TunTapDevice;
use static_cell::StaticCell;

use crate::probe::{self, ProbeConfig};

const USAGE: &str = "usage: edge-probe --tap IFACE (--ip A.B.C.D/N [--gateway A.B.C.D] [--dns A.B.C.D] | --dhcp) \
--primary URL [--fallback URL] [--command CMD] [--period SECONDS] [--count N]";

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn ipv4(s: &str) -> Ipv4Address {
    s.parse()
        .unwrap_or_else(|_| fail(&format!("not an IPv4 address: {s}")))
}

fn fail(why: &str) -> ! {
    eprintln!("edge-probe: {why}\n{USAGE}");
    std::process::exit(2)
}

struct Args {
    tap: String,
    net: Config,
    probe: &'static ProbeConfig,
}

fn parse_args() -> Args {
    let mut tap = None;
    let mut net = None;
    let mut gateway = None;
    let mut dns: heapless::Vec<Ipv4Address, 3> = heapless::Vec::new();
    let (mut primary, mut fallback, mut command, mut period, mut count) =
        (None, None, None, 60u64, None);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--tap" => tap = Some(value()),
            "--dhcp" => net = Some(Config::dhcpv4(Default::default())),
            "--ip" => {
                let v = value();
                let (a, n) = v
                    .split_once('/')
                    .unwrap_or_else(|| fail("--ip wants A.B.C.D/N"));
                let n: u8 = n.parse().unwrap_or_else(|_| fail("bad prefix length"));
                net = Some(Config::ipv4_static(StaticConfigV4 {
                    address: Ipv4Cidr::new(ipv4(a), n),
                    gateway: None,
                    dns_servers: heapless::Vec::new(),
                }));
            }
            "--gateway" => gateway = Some(ipv4(&value())),
            "--dns" => {
                let _ = dns.push(ipv4(&value()));
            }
            "--primary" => primary = Some(leak(value())),
            "--fallback" => fallback = Some(leak(value())),
            "--command" => command = Some(leak(value())),
            "--period" => period = value().parse().unwrap_or_else(|_| fail("bad --period")),
            "--count" => count = Some(value().parse().unwrap_or_else(|_| fail("bad --count"))),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => fail(&format!("unknown argument {other}")),
        }
    }
    let mut net = net.unwrap_or_else(|| fail("give --ip or --dhcp"));
    if let embassy_net::ConfigV4::Static(v4) = &mut net.ipv4 {
        v4.gateway = gateway;
        v4.dns_servers = dns;
    }
    let token = std::env::var("EDGE_PROBE_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let (headers, secrets): (
        &'static [(&'static str, &'static str)],
        &'static [&'static [u8]],
    ) = match token {
        Some(t) => {
            let t = leak(t);
            let bearer = leak(format!("Bearer {t}"));
            (
                Box::leak(Box::new([("authorization", bearer)])),
                Box::leak(Box::new([t.as_bytes(), bearer.as_bytes()])),
            )
        }
        None => (&[], &[]),
    };
    Args {
        tap: tap.unwrap_or_else(|| fail("give --tap")),
        net,
        probe: Box::leak(Box::new(ProbeConfig {
            slot: "kali",
            primary: primary.unwrap_or_else(|| fail("give --primary")),
            fallback,
            command: command.unwrap_or("uname -a"),
            period_s: period,
            count,
            run_id: "edge-probe-host",
            headers,
            secrets,
            #[cfg(feature = "tls")]
            ca_der: match std::env::var("EDGE_PROBE_CA") {
                Ok(path) => Box::leak(
                    std::fs::read(&path)
                        .unwrap_or_else(|e| fail(&format!("read EDGE_PROBE_CA {path}: {e}")))
                        .into_boxed_slice(),
                ),
                Err(_) => &[],
            },
        })),
    }
}

#[embassy_executor::task]
async fn net_task(mut runner: Runner<'static, TunTapDevice>) -> ! {
    runner.run().await
}

#[embassy_executor::task]
async fn probe_task(stack: embassy_net::Stack<'static>, cfg: &'static ProbeConfig) {
    stack.wait_config_up().await;
    if let Some(c) = stack.config_v4() {
        println!("edge-probe: address {}", c.address);
    }
    #[cfg(not(feature = "tls"))]
    let outcome = probe::run(stack, cfg).await;
    // On Linux the handshake randomness comes from the OS (on the board: the hardware RNG).
    #[cfg(feature = "tls")]
    let outcome = probe::run(stack, cfg, rand_core::OsRng).await;
    match outcome {
        Ok(good) => {
            println!("edge-probe: done, {good} probes answered");
            std::process::exit(if good > 0 { 0 } else { 1 })
        }
        Err(why) => {
            eprintln!("edge-probe: {why}");
            std::process::exit(2)
        }
    }
}

async fn start(spawner: Spawner, args: Args) {
    let device = TunTapDevice::new(&args.tap)
        .unwrap_or_else(|e| fail(&format!("open TAP {}: {e}", args.tap)));
    static RESOURCES: StaticCell<StackResources<{ probe::SOCKETS + 2 }>> = StaticCell::new();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let (stack, runner) = embassy_net::new(
        device,
        args.net,
        RESOURCES.init(StackResources::new()),
        seed,
    );
    spawner.spawn(net_task(runner).expect("net task"));
    spawner.spawn(probe_task(stack, args.probe).expect("probe task"));
}

#[embassy_executor::task]
async fn main_task(spawner: Spawner, args: Args) {
    start(spawner, args).await;
}

/// Parses the arguments and runs the stack and the probe until the probe is done.
pub fn main() {
    let args = parse_args();
    static EXECUTOR: StaticCell<Executor> = StaticCell::new();
    EXECUTOR.init(Executor::new()).run(|spawner| {
        spawner.spawn(main_task(spawner, args).expect("main task"));
    });
}
