#!/usr/bin/env bash
# Flash and static RAM of the MCP client on the edge (thumbv7em-none-eabihf, opt-level "z",
# fat LTO, codegen-units 1), apart from embassy-net and the chip HAL.
#
# Method: the edge-probe firmware (examples/edge-probe) is built four times, identical but for
# what its probe task runs:
#   baseline  (--features size-baseline)  raw TcpSocket + DNS over the same static buffers
#   parse     (--features size-parse)     baseline + the core's parse path alone (HTTP response
#                                          decoder, chunked, SSE, JSON, JSON-RPC, content)
#   client    (default)                   the real probe: EdgeSlot/EdgeNet + the core's driver
#   tls       (--features tls)            the client + https: TlsNet over embedded-tls (TLS 1.3,
#                                          AES-128-GCM, P-256, pinned-CA verification) with one
#                                          TLS buffer set (TlsStorage) and the hardware RNG
# Each ELF is measured with `llvm-size` (Berkeley: text = code + rodata + vector table; data;
# bss). HAL, executor, embassy-net/smoltcp, defmt and the caller's buffers (socket RX/TX, call
# storage, argument scratch: the same statics in every build) cancel out in the differences:
#   parse path  = parse  - baseline
#   MCP client  = client - baseline
#   TLS         = tls - client          (apart from the client's budget; its RAM is shown with
#                                        and without the TLS buffer set, a caller buffer)
# Flash = text + data; static RAM = data + bss. The RAM difference includes the larger probe
# task (the client's future lives in the executor's static task arena), so it is all the RAM
# the client needs beyond the caller's buffers, stack use of non-async code aside.
#
# Needs: the thumbv7em-none-eabihf target and a Berkeley-format size tool: llvm-size, else
# arm-none-eabi-size, else binutils' own `size` (it reads the ARM ELF the same); installs
# whichever is missing where it can (rustup target, apt-get llvm).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
probe="$root/examples/edge-probe"
out="${EDGE_SIZE_OUT:-$probe/target/edge-size}"
jobs="${EDGE_SIZE_JOBS:-2}"
target=thumbv7em-none-eabihf

rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

find_size() {
  local sysroot
  sysroot="$(rustc --print sysroot)"
  for c in llvm-size "$sysroot"/lib/rustlib/*/bin/llvm-size llvm-size-19 llvm-size-18 llvm-size-17 llvm-size-16 arm-none-eabi-size size; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}
if ! SIZE="$(find_size)"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "edge-size: installing llvm (for llvm-size)" >&2
    (apt-get install -y -q llvm >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q llvm >/dev/null; }) || true
  fi
  SIZE="$(find_size)" || { echo "edge-size: no llvm-size or arm-none-eabi-size; install llvm or binutils-arm-none-eabi" >&2; exit 1; }
fi

mkdir -p "$out"
build() { # name, cargo feature args...
  local name="$1"; shift
  echo "edge-size: building $name" >&2
  (cd "$probe" && cargo build --release --target "$target" -j"$jobs" "$@" >&2)
  cp "$probe/target/$target/release/edge-probe" "$out/$name.elf"
}
build baseline --features size-baseline
build parse --features size-parse
build client
build tls --features tls

# text data bss of an ELF (Berkeley format).
sizes() { "$SIZE" -B "$1" | awk 'NR==2 {print $1, $2, $3}'; }
read -r bt bd bb < <(sizes "$out/baseline.elf")
read -r pt pd pb < <(sizes "$out/parse.elf")
read -r ct cd cb < <(sizes "$out/client.elf")
read -r tt td tb < <(sizes "$out/tls.elf")

kib() { awk -v b="$1" 'BEGIN { printf "%.1f KiB", b / 1024 }'; }
printf '\n%-28s %10s %8s %8s %12s %12s\n' "build ($target)" text data bss flash "static RAM"
for row in "baseline $bt $bd $bb" "parse $pt $pd $pb" "client $ct $cd $cb" "client+tls $tt $td $tb"; do
  set -- $row
  printf '%-28s %10d %8d %8d %12d %12d\n' "$1" "$2" "$3" "$4" $(($2 + $3)) $(($3 + $4))
done
pf=$(( (pt + pd) - (bt + bd) )); pr=$(( (pd + pb) - (bd + bb) ))
cf=$(( (ct + cd) - (bt + bd) )); cr=$(( (cd + cb) - (bd + bb) ))
echo
echo "core parse path alone : flash $pf B ($(kib $pf)), static RAM $pr B ($(kib $pr))"
echo "whole MCP edge client : flash $cf B ($(kib $cf)), static RAM $cr B ($(kib $cr))"
verdict() { if [ "$1" -le "$2" ]; then echo "within"; else echo "OVER"; fi; }
echo "target: client flash < 24 KiB: $(verdict $cf $((24 * 1024))); static RAM < 4 KiB: $(verdict $cr $((4 * 1024)))"
echo "(caller buffers, the same in every build: sockets 2 x (4096 + 1536) B, call storage 15616 B, args 512 B)"
# TLS, apart from the client's budget: the tls build minus the client build.
tls_buf=$((16640 + 2048)) # TlsStorage: a whole TLS record to read, 2 KiB to write
tf=$(( (tt + td) - (ct + cd) )); tr=$(( (td + tb) - (cd + cb) )); trb=$(( tr - tls_buf ))
echo
echo "https (tls - client)  : flash $tf B ($(kib $tf)), static RAM $tr B ($(kib $tr))"
echo "                        of which the TLS buffer set (caller's) $tls_buf B; beyond it $trb B ($(kib $trb))"
