#!/usr/bin/env bash
# The publishable crates (core, host adapter, edge adapter): `cargo package` packs and builds
# each from its packed sources, then each crate's docs are built the way docs.rs builds them
# (its [package.metadata.docs.rs] features and `--cfg docsrs`), with warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(verifi-mcp-core verifi-mcp-host verifi-mcp-embassy)
# `cargo package` verifies each crate against the others through a local registry whose crates
# it unpacks under $CARGO_HOME/registry/src/<registry>/NAME-VERSION, and it never unpacks a
# NAME-VERSION again: a second run on the same machine would verify against the sources of the
# first (our version stays 0.1.0). Remove those unpacked copies first.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for c in "${crates[@]}"; do
  rm -rf "$cargo_home"/registry/src/*/"$c"-[0-9]*
done
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
cargo package "${args[@]}" -j2 "$@"
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-core --features drive
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-host
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-embassy --features proto-ipv6,tls
echo "package.sh: ${crates[*]} packaged; docs build with docs.rs settings"
