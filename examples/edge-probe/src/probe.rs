//! The probe itself, the same on the board and on Linux: one MCP slot (a primary and an
//! optional fallback server), and every `period` a `run_command` through it, reported with the
//! tool's exit code, the latency and the slot's ledger counters.
//!
//! All storage is static: the socket buffers, the call buffers and the argument scratch.

use embassy_net::Stack;
use embassy_time::{Duration, Timer};
use static_cell::{ConstStaticCell, StaticCell};
use verifi_mcp_embassy::verifi_mcp_core::drive::SlotConfig;
use verifi_mcp_embassy::verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_embassy::{EdgeNet, EdgeSlot, ProbeCallStorage, SocketPool};

/// Sockets of the client (the embassy-net stack needs this many plus DHCP and DNS).
pub const SOCKETS: usize = 2;
pub(crate) const SOCKET_RX: usize = 4096;
pub(crate) const SOCKET_TX: usize = 1536;

/// What the probe does.
pub struct ProbeConfig {
    /// The slot's name, for events.
    pub slot: &'static str,
    /// The primary server's base URL (`http://host[:port]`; `/mcp` is appended).
    pub primary: &'static str,
    /// The fallback server, if any.
    pub fallback: Option<&'static str>,
    /// The command `run_command` runs.
    pub command: &'static str,
    /// Seconds between probes.
    pub period_s: u64,
    /// Probes before returning (`None`: forever).
    pub count: Option<u32>,
    /// The run id (the workspace on the tool box).
    pub run_id: &'static str,
    /// Static headers, e.g. `authorization` (their values are redacted from everything).
    pub headers: &'static [(&'static str, &'static str)],
    /// Secrets of the run, given at build or boot time.
    pub secrets: &'static [&'static [u8]],
    /// The pinned CA for `https` endpoints (DER, ECDSA P-256; feature `tls`).
    #[cfg(feature = "tls")]
    pub ca_der: &'static [u8],
}

/// Logs on the device through defmt, on Linux to stdout.
macro_rules! report {
    ($($t:tt)*) => {{
        #[cfg(target_os = "none")]
        defmt::info!($($t)*);
        #[cfg(not(target_os = "none"))]
        println!($($t)*);
    }};
}

pub(crate) static RX: ConstStaticCell<[[u8; SOCKET_RX]; SOCKETS]> =
    ConstStaticCell::new([[0; SOCKET_RX]; SOCKETS]);
pub(crate) static TX: ConstStaticCell<[[u8; SOCKET_TX]; SOCKETS]> =
    ConstStaticCell::new([[0; SOCKET_TX]; SOCKETS]);
static POOL: StaticCell<SocketPool<'static, SOCKETS>> = StaticCell::new();
pub(crate) static CALL: ConstStaticCell<ProbeCallStorage> =
    ConstStaticCell::new(ProbeCallStorage::new());
pub(crate) static ARGS: ConstStaticCell<[u8; 512]> = ConstStaticCell::new([0; 512]);
/// One TLS connection's buffers (a whole TLS record to read, 2 KiB to write).
#[cfg(feature = "tls")]
pub(crate) static TLS: ConstStaticCell<verifi_mcp_embassy::TlsStorage> =
    ConstStaticCell::new(verifi_mcp_embassy::TlsStorage::new());

/// Runs the probe on `stack` (already configured) until `count` probes are done.
/// Returns how many probes succeeded; `Err` when an endpoint does not parse. With `tls`,
/// `rng` (the board's hardware RNG) feeds the TLS handshakes.
pub async fn run(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
    #[cfg(feature = "tls")] rng: impl verifi_mcp_embassy::CryptoRngCore,
) -> Result<u32, &'static str> {
    let [rx0, rx1] = RX.take();
    let [tx0, tx1] = TX.take();
    let pool = POOL.init(SocketPool::new(
        stack,
        [(&mut rx0[..], &mut tx0[..]), (&mut rx1[..], &mut tx1[..])],
    ));
    let net = EdgeNet::new(pool);
    #[cfg(feature = "tls")]
    let tls = {
        use verifi_mcp_embassy::{TlsPool, Trust};
        // black_box: the CA is data the linker embeds, never a constant to fold away.
        let ca = core::hint::black_box(cfg.ca_der);
        let https = |u: &str| u.starts_with("https://");
        if ca.is_empty() && (https(cfg.primary) || cfg.fallback.is_some_and(https)) {
            return Err("an https endpoint needs a pinned CA: build with EDGE_PROBE_CA=ca.der");
        }
        TlsPool::new([TLS.take().buffers()], Trust::pinned_ca(ca), rng)
    };
    // https endpoints over TLS, http ones over the same sockets as before.
    #[cfg(feature = "tls")]
    let net = verifi_mcp_embassy::TlsNet::new(&net, &tls);
    let call = CALL.take();
    let scratch = ARGS.take();

    // One slot, kept for the whole run: one session, and failover state that lasts.
    let slot = slot_of(cfg)?;

    let mut done = 0u32;
    let mut good = 0u32;
    // The slot's tools, listed once before the probes (tools/list as well as tools/call, as
    // the minimal profile is defined); not in the call-only measuring build.
    #[cfg(not(feature = "size-call-only"))]
    {
        let mut bufs = call.buffers();
        let mut tools = 0u32;
        let listed = slot.list_tools(&net, &mut bufs, |_| tools += 1);
        // Its own poll function, as the exec's below.
        let listed = Apart(core::pin::pin!(core::mem::ManuallyDrop::new(listed))).await;
        report!("tools: {} listed, ok {}", tools, listed.is_ok());
    }
    loop {
        done += 1;
        let mut bufs = call.buffers();
        let x = slot.exec(&net, cfg.command, 30_000, &mut scratch[..], &mut bufs);
        // Its own poll function: merged into this loop's, the two cost more flash. Never
        // dropped: it is always run to its end, where it holds nothing, so no drop glue.
        let x = Apart(core::pin::pin!(core::mem::ManuallyDrop::new(x))).await;
        if x.call.ok() {
            good += 1;
            report!(
                "probe {}: exit {} in {} ms: {}",
                done,
                x.exit_code.unwrap_or(-1),
                x.call.latency_ms,
                first_line(x.output)
            );
        } else {
            report!(
                "probe {}: failed: {}",
                done,
                x.call.error().unwrap_or(x.output)
            );
        }
        let c = slot.counters();
        report!(
            "ledger: {} tool calls, {} evidence bytes, {} tool errors",
            c.tool_calls,
            c.evidence_bytes,
            c.tool_errors
        );
        if cfg.count.is_some_and(|n| done >= n) {
            let mut bufs = call.buffers();
            // With the old era, closing runs an op (a DELETE per session): its poll apart
            // too (full -184 B). Without it, closing is no more than forgetting the sessions.
            // Run to its end like the exec, so never dropped either.
            #[cfg(feature = "full")]
            Apart(core::pin::pin!(core::mem::ManuallyDrop::new(
                slot.close(&net, &mut bufs)
            )))
            .await;
            #[cfg(not(feature = "full"))]
            slot.close(&net, &mut bufs).await;
            return Ok(good);
        }
        Timer::after(Duration::from_secs(cfg.period_s)).await;
    }
}

/// Polls a pinned future in a function of its own, never inlined into the poll of the
/// future that awaits it (`Apart(core::pin::pin!(fut)).await`): the optimiser may merge a
/// large async body (the exec) into its caller's state machine (the probe's loop), and the
/// merged one costs more flash than both apart (about 500 B).
struct Apart<'f, F>(core::pin::Pin<&'f mut F>);

impl<F: core::future::Future> core::future::Future for Apart<'_, core::mem::ManuallyDrop<F>> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<F::Output> {
        // SAFETY: the future is pinned with its ManuallyDrop and never moved out of it.
        unsafe { self.0.as_mut().map_unchecked_mut(|f| &mut **f) }.poll(cx)
    }
}

/// The probe's slot: one that lists as well as calls (its calls and its list share one copy of
/// the client's op), or in the call-only measuring build one that only calls.
#[cfg(not(feature = "size-call-only"))]
type ProbeSlot = EdgeSlot<'static, true>;
#[cfg(feature = "size-call-only")]
type ProbeSlot = EdgeSlot<'static>;

/// The probe's slot, as `cfg` says (not inlined: made once, out of the probe's future).
#[inline(never)]
fn slot_of(cfg: &'static ProbeConfig) -> Result<ProbeSlot, &'static str> {
    let primary =
        Endpoint::parse_base(cfg.primary).map_err(|_| "the primary endpoint does not parse")?;
    let mut config = SlotConfig::new(cfg.slot, primary, cfg.primary);
    if let Some(f) = cfg.fallback {
        config.fallback =
            Some(Endpoint::parse_base(f).map_err(|_| "the fallback endpoint does not parse")?);
        config.fallback_label = f;
    }
    config.headers = cfg.headers;
    config.timeout_ms = 60_000;
    #[cfg(not(feature = "size-call-only"))]
    let slot = EdgeSlot::listing(config, cfg.run_id, cfg.secrets);
    #[cfg(feature = "size-call-only")]
    let slot = EdgeSlot::new(config, cfg.run_id, cfg.secrets);
    slot.map_err(|_| "too many secrets for one slot")
}

fn first_line(s: &str) -> &str {
    // A byte search, not `split` (no pattern searcher in the firmware for it).
    match s.bytes().position(|b| b == b'\n') {
        Some(end) => s.get(..end).unwrap_or(s),
        None => s,
    }
}
