//! Peak heap of one reply's decoding, per reply size, with a counting global allocator:
//! the product's path (one `tools/call` through the machine with the host's buffer policy:
//! [`support::Product`]), the core's pieces over the bench's own capped `Vec` buffers, and
//! the `sse-stream` + `serde_json` path. Prints peak heap / wire reply size.
//!
//! Run: `cargo bench -p verifi-mcp-core --bench reply_heap -j2`.
//! The allocator counts a reallocation as a new block, a copy, then the old block freed (the
//! strict view: old and new storage coexist while a buffer grows).
use bytes::Bytes;
use peak_alloc::PeakAlloc;

mod support;
use support::*;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// Peak heap above what was live before `f` ran.
fn peak_of(f: impl FnOnce() -> usize) -> usize {
    let base = HEAP.current_usage();
    HEAP.reset_peak_usage();
    std::hint::black_box(f());
    HEAP.peak_usage() - base
}

fn main() {
    println!("peak heap / wire reply size (reply fed in {CHUNK}-byte reads, 10 secrets)");
    println!(
        "{:>8} {:>10} {:>14} {:>8} {:>14} {:>8} {:>14} {:>8} {:>22} {:>8}",
        "reply",
        "wire bytes",
        "product peak",
        "ratio",
        "core peak",
        "ratio",
        "copying peak",
        "ratio",
        "sse-stream+serde peak",
        "ratio"
    );
    for (label, size) in [
        ("1KiB", 1usize << 10),
        ("64KiB", 64 << 10),
        ("8MiB", 8 << 20),
    ] {
        let (json, _) = reply_json(size);
        let (wire, body) = wire_reply(&json);
        let body = Bytes::from(body);
        // Ours: the buffers a host adapter hands the driver, created and grown inside; the
        // text flattened in place (the host's path), then by copy (the edge's, for comparison).
        // The product: one call through the machine with the host's buffer policy (its
        // buffers pooled from an earlier call, big storage given back): what one call costs.
        let mut product = Product::new(&json);
        product.call();
        let product_peak = peak_of(|| product.call().len());
        let ours_peak = peak_of_ours(&wire, true);
        let copying_peak = peak_of_ours(&wire, false);
        // The peer: the body is already in memory (hyper's buffers), as in ours the wire is.
        let peer_peak = peak_of(|| rmcp_style(&body));
        let w = wire.len() as f64;
        println!(
            "{label:>8} {:>10} {product_peak:>14} {:>8.2} {ours_peak:>14} {:>8.2} {copying_peak:>14} {:>8.2} {peer_peak:>22} {:>8.2}",
            wire.len(),
            product_peak as f64 / w,
            ours_peak as f64 / w,
            copying_peak as f64 / w,
            peer_peak as f64 / w
        );
    }
}

/// Peak heap of our path over `wire`, from empty buffers.
fn peak_of_ours(wire: &[u8], in_place: bool) -> usize {
    peak_of(|| {
        let mut head = vec![0u8; 16 * 1024];
        let mut read = vec![0u8; CHUNK];
        let mut reply = VecBuf::new(16 << 20);
        let mut text = VecBuf::new(16 << 20);
        for c in wire.chunks(CHUNK) {
            // The socket read lands in the read buffer first.
            let r = read.get_mut(..c.len()).expect("fits");
            r.copy_from_slice(c);
        }
        let n = ours_with(wire, &mut head, &mut reply, &mut text, in_place);
        n + read.len()
    })
}
