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

/// Opens a socket to the primary with the probe's socket buffers, sends the command and
/// hands each read (into `read`) to `consume`, which says how many answers it saw.
async fn raw_probe(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
    read: &mut [u8],
    mut consume: impl FnMut(&[u8]) -> u32,
) -> Result<u32, &'static str> {
    let [rx0, _] = RX.take();
    let [tx0, _] = TX.take();
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
            if socket.write(&args[..n]).await.is_ok() {
                while let Ok(k) = socket.read(read).await {
                    if k == 0 {
                        break;
                    }
                    good += consume(&read[..k]);
                }
            }
            socket.abort();
        }
        defmt::info!("raw probe: {}", good);
        Timer::after(Duration::from_secs(cfg.period_s)).await;
    }
}

/// Everything but the client: the bytes are only copied.
#[cfg(feature = "size-baseline")]
pub async fn baseline(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
) -> Result<u32, &'static str> {
    let call = CALL_BYTES.take();
    let (read, rest) = call.split_at_mut(1024);
    raw_probe(stack, cfg, read, |bytes| {
        let n = bytes.len().min(rest.len());
        rest[..n].copy_from_slice(&bytes[..n]);
        n as u32
    })
    .await
}

/// The baseline plus the core's parse path alone: HTTP response decoder (head, chunked,
/// lengths), SSE decoder, JSON scanner, JSON-RPC response matching and content flattening,
/// into the same buffers the client would use.
#[cfg(feature = "size-parse")]
pub async fn parse_only(
    stack: Stack<'static>,
    cfg: &'static ProbeConfig,
) -> Result<u32, &'static str> {
    use verifi_mcp_embassy::verifi_mcp_core::buf::{Buf, Sink, SliceBuf};
    use verifi_mcp_embassy::verifi_mcp_core::wire::http::{
        Decoded, MediaType, ResponseDecoder, ResponseLimits,
    };
    use verifi_mcp_embassy::verifi_mcp_core::wire::sse::{SseDecoder, SseLimits, SseStep};

    let call = CALL_BYTES.take();
    let (read, rest) = call.split_at_mut(1024);
    let (head, rest) = rest.split_at_mut(1024);
    let (reply, rest) = rest.split_at_mut(8192);
    let (text, _) = rest.split_at_mut(4096);
    let mut http = ResponseDecoder::new(head, ResponseLimits::default());
    let mut sse = SseDecoder::new(SseLimits {
        max_event_bytes: 8192,
    });
    let mut reply = SliceBuf::new(reply);
    let mut text = SliceBuf::new(text);
    let mut is_sse = false;
    raw_probe(stack, cfg, read, move |mut input| {
        let mut found = 0;
        while !input.is_empty() {
            let Ok((used, step)) = http.decode(input) else {
                return found;
            };
            input = input.get(used..).unwrap_or(&[]);
            match step {
                Decoded::Head(h) => is_sse = matches!(h.media_type, MediaType::EventStream),
                Decoded::Body(mut body) if is_sse => {
                    while !body.is_empty() {
                        match sse.feed(body, &mut reply) {
                            Ok((u, SseStep::Event(_))) => {
                                found += answer(reply.bytes(), &mut text);
                                reply.clear();
                                body = body.get(u..).unwrap_or(&[]);
                            }
                            Ok((u, SseStep::NeedMore)) => body = body.get(u..).unwrap_or(&[]),
                            Err(_) => break,
                        }
                    }
                }
                Decoded::Body(body) => {
                    let _ = reply.put(body);
                }
                Decoded::End => {
                    if !is_sse {
                        found += answer(reply.bytes(), &mut text);
                    }
                    reply.clear();
                }
                Decoded::NeedMore => {}
            }
            if used == 0 {
                break;
            }
        }
        found
    })
    .await
}

/// One JSON-RPC message: the response to request 1, flattened into `text`.
#[cfg(feature = "size-parse")]
fn answer(bytes: &[u8], text: &mut impl verifi_mcp_embassy::verifi_mcp_core::buf::Buf) -> u32 {
    use verifi_mcp_embassy::verifi_mcp_core::wire::content;
    use verifi_mcp_embassy::verifi_mcp_core::wire::json::{JsonLimits, Value};
    use verifi_mcp_embassy::verifi_mcp_core::wire::jsonrpc::{Found, Outcome, find_response};
    text.clear();
    let Ok(v) = Value::parse(bytes, JsonLimits::default()) else {
        return 0;
    };
    match find_response(v, 1) {
        Ok(Found::Match(Outcome::Result(r))) => {
            content::flatten(r, text).map_or(0, |f| f.blocks as u32)
        }
        _ => 0,
    }
}
