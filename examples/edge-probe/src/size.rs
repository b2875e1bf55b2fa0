//! Measuring stand-ins for `probe::run` (see scripts/edge-size.sh): the same static buffers,
//! the same DNS and TCP use, without the MCP client (`baseline`) or with only the core's
//! parse path (`parse_only`). Never flashed for real use.

use embassy_net::Stack;
use embassy_net::dns::DnsQueryType;
use embassy_net::tcp::TcpSocket;
use embassy_time::{Duration, Timer};

use static_cell::ConstStaticCell;
use verifi_mcp_embassy::ProbeCallStorage;

use crate::probe::{ARGS, ProbeConfig, RX, TX};

/// As many bytes as the client's call storage, so both builds hold the same caller buffers.
static CALL_BYTES: ConstStaticCell<[u8; core::mem::size_of::<ProbeCallStorage>()]> =
    ConstStaticCell::new([0; core::mem::size_of::<ProbeCallStorage>()]);

/// Opens a socket to the primary with the probe's buffers, sends the argument scratch and
/// reads into the call storage's bytes; hands each read to `consume`.
async fn raw_probe(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
    mut consume: impl FnMut(&[u8], &mut [u8]) -> usize,
) -> Result<u32, &'static str> {
    let [rx0, _] = RX.take();
    let [tx0, _] = TX.take();
    let call = CALL_BYTES.take();
    let args = ARGS.take();
    let mut socket = TcpSocket::new(stack, &mut rx0[..], &mut tx0[..]);
    let host = cfg
        .primary
        .trim_start_matches("http://")
        .split([':', '/'])
        .next()
        .unwrap_or("");
    let addr = stack
        .dns_query(host, DnsQueryType::A)
        .await
        .map_err(|_| "dns")?;
    let addr = *addr.first().ok_or("dns")?;
    let mut good = 0;
    loop {
        if socket.connect((addr, 80)).await.is_ok() {
            let n = args.len().min(cfg.command.len());
            args[..n].copy_from_slice(&cfg.command.as_bytes()[..n]);
            if embedded_io_async::Write::write_all(&mut socket, &args[..n])
                .await
                .is_ok()
            {
                let (read, out) = call.split_at_mut(1024);
                while let Ok(k) = socket.read(read).await {
                    if k == 0 {
                        break;
                    }
                    good += consume(&read[..k], out) as u32;
                }
            }
            socket.abort();
        }
        defmt::info!("raw probe: {}", good);
        Timer::after(Duration::from_secs(cfg.period_s)).await;
    }
}

/// Everything but the client.
pub async fn baseline(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
) -> Result<u32, &'static str> {
    raw_probe(stack, cfg, |bytes, out| {
        let n = bytes.len().min(out.len());
        out[..n].copy_from_slice(&bytes[..n]);
        n
    })
    .await
}

/// The baseline plus the core's parse path alone.
pub async fn parse_only(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
) -> Result<u32, &'static str> {
    raw_probe(stack, cfg, crate::size_parse::feed).await
}
