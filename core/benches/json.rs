//! Throughput of `wire::json` on reply shapes seen in the captures (plain `cargo bench`, no
//! framework): a big text block (the `big` tool), and a tools/list page.
use std::hint::black_box;
use std::time::Instant;

use verifi_mcp_core::buf::CountingSink;
use verifi_mcp_core::wire::json::{JsonLimits, Value};

fn measure(name: &str, input: &[u8], rounds: u32) {
    let start = Instant::now();
    for _ in 0..rounds {
        let v = Value::parse(black_box(input), JsonLimits::default()).expect("valid");
        black_box(v);
    }
    let parse = start.elapsed();
    let v = Value::parse(input, JsonLimits::default()).expect("valid");
    let start = Instant::now();
    for _ in 0..rounds {
        let mut sink = CountingSink::default();
        v.write_compact(&mut sink)
            .expect("counting never overflows");
        black_box(sink.count);
    }
    let compact = start.elapsed();
    let gbps =
        |d: std::time::Duration| input.len() as f64 * f64::from(rounds) / d.as_secs_f64() / 1e9;
    println!(
        "{name}: {} bytes x {rounds}: parse {:.2} GB/s, write_compact {:.2} GB/s",
        input.len(),
        gbps(parse),
        gbps(compact)
    );
}

fn main() {
    let big_ascii = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}",
        "x".repeat(4 << 20)
    );
    measure("big text (ascii)", big_ascii.as_bytes(), 50);
    let big_mixed = format!(
        "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}",
        "line of nmap output, é ü 😀\\n".repeat(150_000)
    );
    measure("big text (escapes, utf-8)", big_mixed.as_bytes(), 50);
    let page = include_str!("../tests/data/ts-tools-list.json");
    measure("tools/list page", page.as_bytes(), 20_000);
}
