//! A fixed number of runs of our reply path, for instruction counts that the machine's load
//! does not move (`perf stat -e instructions:u`), to compare two builds on a shared machine.
//!
//! Run: `cargo bench -p verifi-mcp-core --bench reply_count -j2 -- 8MiB 100 [peer|copying]`
//! (size `1KiB`, `64KiB` or `8MiB`, the number of runs, and `peer` to run the
//! `sse-stream` + `serde_json` pipeline instead of ours, `copying` for our copying path,
//! `product` for the product's path, [`support::Product`]; prints the mean time per run).
use std::time::Instant;

mod support;
use support::*;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let size = match args.next().as_deref() {
        Some("1KiB") => 1usize << 10,
        Some("64KiB") => 64 << 10,
        _ => 8 << 20,
    };
    let runs: u32 = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
        .max(1);
    let mode = args.next();
    let peer = mode.as_deref() == Some("peer");
    let product = mode.as_deref() == Some("product");
    // `copying`: the text flattened into its own buffer (the edge's way), not in place.
    let in_place = mode.as_deref() != Some("copying");
    let (json, text) = reply_json(size);
    let (wire, body) = wire_reply(&json);
    let want = expected_text(&text);
    let mut head = vec![0u8; 16 * 1024];
    let mut reply = VecBuf::new(16 << 20);
    let mut out = VecBuf::new(16 << 20);
    ours(&wire, &mut head, &mut reply, &mut out);
    assert_eq!(
        verifi_mcp_core::buf::Buf::bytes(&out),
        want.as_bytes(),
        "our text"
    );
    let body = bytes::Bytes::from(body);
    assert_eq!(rmcp_style(&body), want.len(), "sse-stream text");
    let mut call = Product::new(&json);
    assert_eq!(call.call(), want, "the product's text");
    let start = Instant::now();
    for _ in 0..runs {
        if product {
            std::hint::black_box(std::hint::black_box(&mut call).call());
            continue;
        }
        if peer {
            std::hint::black_box(rmcp_style(std::hint::black_box(&body)));
            continue;
        }
        std::hint::black_box(ours_with(
            std::hint::black_box(&wire),
            &mut head,
            &mut reply,
            &mut out,
            in_place,
        ));
    }
    let per = start.elapsed() / runs;
    println!(
        "{} wire bytes x {runs}: {per:?} per run, {:.0} MiB/s",
        wire.len(),
        wire.len() as f64 / per.as_secs_f64() / f64::from(1 << 20)
    );
}
