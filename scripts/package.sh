#!/usr/bin/env bash
# The publishable crates (core, host adapter, edge adapter): `cargo package` packs and builds
# each from its packed sources, then each crate's docs are built the way docs.rs builds them
# (its [package.metadata.docs.rs] features and `--cfg docsrs`), with warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(verifi-mcp-core verifi-mcp-host verifi-mcp-embassy)
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
cargo package "${args[@]}" -j2 "$@"
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-core --features drive
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-host
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps -j2 -p verifi-mcp-embassy --features proto-ipv6
echo "package.sh: ${crates[*]} packaged; docs build with docs.rs settings"
