//! Full reply decoding of a `tools/call` reply (HTTP head, chunked framing, SSE `message`
//! event, JSON-RPC result, text content flattened and redacted with 10 secrets), fed in
//! 1 500-byte reads, side by side with the floor (`memchr` over the same reads) and the peers'
//! pipelines. Throughput is in bytes of the wire reply per second.
//!
//! Bench ids, per size (`reply/1KiB/…`):
//! - `product`: the product's path, a `tools/call` through the machine's own `Op` (its call
//!   handler and tail read), with the host adapter's buffer policy (storage over 64 KiB given
//!   back after each call, so a big reply is decoded into fresh storage every iteration, as
//!   every call gets it) and its text hand-out (`take_utf8`): [`support::Product`];
//! - `sse-stream`: the peer as rmcp's client does it: `sse-stream` over the de-chunked body,
//!   `serde_json` to a `Value`, the text joined and each secret `replace`d, all allocated fresh;
//! - `core`, `core-copying`: the core's reply pieces driven by the bench's own copy of the
//!   call handler over buffers kept across iterations (issue 19's figure; not the product's);
//! - `serde_json-alone` (the JSON message into a `Value`), `memchr-floor`, and on the small
//!   replies `eventsource-stream`.
//!
//! After criterion's runs the bench prints the targets per size from the medians criterion
//! saved this run (`<target>/criterion/<group>/<id>/new/estimates.json`); a figure whose
//! estimate this run did not write prints as "not measured".
//!
//! Run: `cargo bench -p verifi-mcp-core --bench reply -j2`.
//! `eventsource-stream` re-scans its partial line and needs minutes per 8 MiB reply: it runs
//! on the 1 KiB and 64 KiB replies only.
#![allow(missing_docs)] // a bench binary

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use verifi_mcp_core::buf::Buf;

mod support;
use support::*;

/// The reply sizes, by label.
const SIZES: [(&str, usize); 3] = [("1KiB", 1 << 10), ("64KiB", 64 << 10), ("8MiB", 8 << 20)];

fn reply(c: &mut Criterion) {
    for (label, size) in SIZES {
        let (json, text) = reply_json(size);
        let (wire, body) = wire_reply(&json);
        let body = Bytes::from(body);
        let want = expected_text(&text);
        let mut head = vec![0u8; 16 * 1024];
        let mut reply = VecBuf::new(16 << 20);
        let mut out = VecBuf::new(16 << 20);
        // Same text from every pipeline before anything is timed.
        let mut product = Product::new(&json);
        assert_eq!(product.call(), want, "the product's text");
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
        g.bench_function("memchr-floor", |b| b.iter(|| floor(black_box(&wire))));
        g.bench_function("product", |b| b.iter(|| product.call().len()));
        g.bench_function("core", |b| {
            b.iter(|| ours(black_box(&wire), &mut head, &mut reply, &mut out))
        });
        ours_with(&wire, &mut head, &mut reply, &mut out, false);
        assert_eq!(out.bytes(), want.as_bytes(), "our text, copied");
        g.bench_function("core-copying", |b| {
            b.iter(|| ours_with(black_box(&wire), &mut head, &mut reply, &mut out, false))
        });
        g.bench_function("sse-stream", |b| b.iter(|| rmcp_style(black_box(&body))));
        // The JSON message alone (no HTTP, SSE or redaction), parsed into a `Value`.
        g.bench_function("serde_json-alone", |b| {
            b.iter(|| serde_json_alone(black_box(&json)))
        });
        if size <= 64 << 10 {
            assert_eq!(eventsource_style(&body), want.len(), "eventsource text");
            g.bench_function("eventsource-stream", |b| {
                b.iter(|| eventsource_style(black_box(&body)))
            });
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

/// `serde_json` parsing the message into a `Value`: the "faster than `serde_json` alone" bar.
fn serde_json_alone(json: &[u8]) -> usize {
    serde_json::from_slice::<serde_json::Value>(json).map_or(0, |v| match v {
        serde_json::Value::Object(m) => m.len(),
        _ => 1,
    })
}

fn main() {
    let started = SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    reply(&mut c);
    targets(started);
}

/// Where criterion writes its estimates, found as criterion finds it: `CRITERION_HOME`, else
/// `CARGO_TARGET_DIR/criterion`, else the target directory this bench binary was built in
/// (`<target>/release/deps/reply-<hash>`).
fn criterion_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// The median time in nanoseconds criterion measured for `group`/`id` in this run: `None`
/// when its estimate is missing, unreadable, or older than `started` (not run this time).
fn median_ns(dir: &Path, group: &str, id: &str, started: SystemTime) -> Option<f64> {
    // Criterion's directory names: `/` (and a few others) become `_` in the group's name.
    let file = dir
        .join(group.replace('/', "_"))
        .join(id)
        .join("new")
        .join("estimates.json");
    let modified = std::fs::metadata(&file).ok()?.modified().ok()?;
    if modified < started {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
    v.get("median")?
        .get("point_estimate")?
        .as_f64()
        .filter(|ns| *ns > 0.0)
}

/// Prints the targets as ratios of this run's medians (times of the same reply, so a ratio
/// above 1 means ours is faster): the product path against the peer (issue 30: at least 5x at
/// 8 MiB) and against `serde_json` alone, and the core's own path beside it (issue 19).
fn targets(started: SystemTime) {
    println!("\nTargets, from this run's criterion medians:");
    let Some(dir) = criterion_dir() else {
        println!("  not measured: no criterion directory found");
        return;
    };
    let ratio = |ours: Option<f64>, peer: Option<f64>, target: &str| match (ours, peer) {
        (Some(o), Some(p)) => format!("{:.2}x (target {target})", p / o),
        _ => "not measured".to_string(),
    };
    for (label, size) in SIZES {
        let (json, _) = reply_json(size);
        let (wire, _) = wire_reply(&json);
        let group = format!("reply/{label}");
        let t = |id: &str| median_ns(&dir, &group, id, started);
        let speed = |ns: Option<f64>| {
            ns.map_or("not measured".to_string(), |ns| {
                // Bytes per nanosecond are GB/s.
                let gbs = wire.len() as f64 / ns;
                format!(
                    "{:.0} MiB/s = {gbs:.2} GB/s",
                    gbs * 1e9 / f64::from(1 << 20)
                )
            })
        };
        let (product, core) = (t("product"), t("core"));
        let big = size >= 8 << 20;
        println!(
            "  {label}: product {}, core {}",
            speed(product),
            speed(core)
        );
        println!(
            "    product vs sse-stream: {}",
            ratio(product, t("sse-stream"), if big { ">= 5" } else { "> 1" })
        );
        println!(
            "    core vs sse-stream: {}",
            ratio(core, t("sse-stream"), if big { ">= 7" } else { "> 1" })
        );
        println!(
            "    product vs serde_json-alone ({} B message): {}",
            json.len(),
            ratio(product, t("serde_json-alone"), "> 1")
        );
    }
}
