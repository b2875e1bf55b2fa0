//! Full reply decoding of a `tools/call` reply (HTTP head, chunked framing, SSE `message`
//! event, JSON-RPC result, text content flattened and redacted with 10 secrets), fed in
//! 1 500-byte reads, side by side with the floor (`memchr` over the same reads) and the peers'
//! pipelines. Throughput is in bytes of the wire reply per second.
//!
//! Run: `cargo bench -p verifi-mcp-core --bench reply -j2`.
//! `eventsource-stream` re-scans its partial line and needs minutes per 8 MiB reply: it runs
//! on the 1 KiB and 64 KiB replies only.
#![allow(missing_docs)] // criterion_group! makes an undocumented public fn

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use verifi_mcp_core::buf::Buf;

mod support;
use support::*;

fn reply(c: &mut Criterion) {
    for (label, size) in [
        ("1KiB", 1usize << 10),
        ("64KiB", 64 << 10),
        ("8MiB", 8 << 20),
    ] {
        let (json, text) = reply_json(size);
        let (wire, body) = wire_reply(&json);
        let body = Bytes::from(body);
        let want = expected_text(&text);
        let mut head = vec![0u8; 16 * 1024];
        let mut reply = VecBuf::new(16 << 20);
        let mut out = VecBuf::new(16 << 20);
        // Same text from every pipeline before anything is timed.
        ours(&wire, &mut head, &mut reply, &mut out);
        assert_eq!(out.bytes(), want.as_bytes(), "our text");
        assert_eq!(rmcp_style(&body), want.len(), "sse-stream text");

        let mut g = c.benchmark_group(format!("reply/{label}"));
        g.throughput(Throughput::Bytes(wire.len() as u64));
        g.warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        if size >= 8 << 20 {
            g.sample_size(20).measurement_time(Duration::from_secs(6));
        }
        g.bench_function(BenchmarkId::new("memchr-floor", label), |b| {
            b.iter(|| floor(black_box(&wire)))
        });
        g.bench_function(BenchmarkId::new("ours", label), |b| {
            b.iter(|| ours(black_box(&wire), &mut head, &mut reply, &mut out))
        });
        ours_with(&wire, &mut head, &mut reply, &mut out, false);
        assert_eq!(out.bytes(), want.as_bytes(), "our text, copied");
        g.bench_function(BenchmarkId::new("ours-copying", label), |b| {
            b.iter(|| ours_with(black_box(&wire), &mut head, &mut reply, &mut out, false))
        });
        g.bench_function(BenchmarkId::new("sse-stream+serde_json", label), |b| {
            b.iter(|| rmcp_style(black_box(&body)))
        });
        if size <= 64 << 10 {
            assert_eq!(eventsource_style(&body), want.len(), "eventsource text");
            g.bench_function(
                BenchmarkId::new("eventsource-stream+serde_json", label),
                |b| b.iter(|| eventsource_style(black_box(&body))),
            );
        }
        g.finish();
        if size >= 8 << 20 {
            stages(c, &json, &text);
        }
    }
}

/// Where our time goes on the big reply: each stage alone, over the JSON message.
fn stages(c: &mut Criterion, json: &[u8], text: &str) {
    use verifi_mcp_core::buf::CountingSink;
    use verifi_mcp_core::harness::redact::Redactor;
    use verifi_mcp_core::wire::json::{JsonLimits, Value};
    let mut g = c.benchmark_group("stages/8MiB");
    g.throughput(Throughput::Bytes(json.len() as u64))
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("json-parse", |b| {
        b.iter(|| Value::parse(black_box(json), JsonLimits::default()).map(|v| v.kind()))
    });
    let v = Value::parse(json, JsonLimits::default()).expect("valid");
    g.bench_function("flatten-unredacted", |b| {
        b.iter(|| {
            let r = v.get("result").expect("result");
            let mut n = CountingSink::default();
            verifi_mcp_core::wire::content::flatten(r, &mut n).map(|_| n.count)
        })
    });
    let t = v
        .get("result")
        .and_then(|r| r.get("content"))
        .and_then(|c| c.elements().next())
        .and_then(|b| b.get("text"))
        .and_then(|t| t.as_str())
        .expect("text");
    g.bench_function("unescape", |b| {
        b.iter(|| {
            let mut n = CountingSink::default();
            t.unescape_into(&mut n).map(|_| n.count)
        })
    });
    g.bench_function("redact-2KiB-writes", |b| {
        b.iter(|| {
            let mut r = Redactor::new(&SECRETS);
            let mut n = CountingSink::default();
            for c in text.as_bytes().chunks(2048) {
                r.write(c, &mut n).expect("counting");
            }
            r.finish(&mut n).map(|_| n.count)
        })
    });
    g.finish();
}

criterion_group!(benches, reply);
criterion_main!(benches);
