#!/usr/bin/env bash
# Flash and static RAM of the MCP client on the edge (thumbv7em-none-eabihf, opt-level "z",
# fat LTO, codegen-units 1), apart from embassy-net and the chip HAL, per profile of the
# client's capabilities (examples/edge-probe: `minimal`, the 2026 era only; `full`, every
# capability), each against its budget.
#
# Method: the edge-probe firmware (examples/edge-probe) is built seven times, identical but for
# what its probe task runs and the capabilities it is built with:
#   baseline  (size-baseline)  raw TcpSocket + DNS over the same static buffers
#   parse     (size-parse)     baseline + the core's parse path alone (HTTP response
#                              decoder, chunked, SSE, JSON, JSON-RPC, content)
#   minimal   (profile minimal) the real probe: EdgeSlot/EdgeNet + the core's driver, the
#                              core built with `era-2026` only; it lists the tools once and
#                              calls a tool per probe (tools/list and tools/call)
#   full      (profile full)   the same with every capability (both eras, the era probe,
#                              tasks, input rounds): the default build
#   tls       (full + tls)     the full client + https: TlsNet over embedded-tls (TLS 1.3,
#                              AES-128-GCM, P-256, pinned-CA verification) with one TLS buffer
#                              set (TlsStorage) and the hardware RNG
#   minimal-call, full-call    the two profiles with a probe that only calls, never lists
#                              (size-call-only): what a firmware without list code pays
# Each ELF is measured with `llvm-size` (Berkeley: text = code + rodata + vector table; data;
# bss). HAL, executor, embassy-net/smoltcp, defmt and the caller's buffers (socket RX/TX, call
# storage, argument scratch: the same statics in every build) cancel out in the differences:
#   parse path  = parse  - baseline
#   profile P   = P - baseline
#   TLS         = tls - full            (apart from the client's budget; its RAM is shown with
#                                        and without the TLS buffer set, a caller buffer)
# Flash = text + data; static RAM = data + bss. The RAM difference includes the larger probe
# task (the client's future lives in the executor's static task arena), so it is all the RAM
# the client needs beyond the caller's buffers, stack use of non-async code aside.
#
# Prints, besides the table, exactly one line per profile:
#   edge profile minimal: flash N B, static RAM M B
#   edge profile full: flash N B, static RAM M B
# then where each profile's flash goes, part by part (scripts/edge-parts.awk), and exits 1
# when a figure is over its budget (minimal: 32 768 B flash, 4 096 B static RAM; full:
# 65 536 B and 6 144 B). EDGE_SIZE_GATE=0 prints the same and says by how much a budget
# is over, without failing ("budget not enforced"); a figure over its ceiling (below: the
# budget where it is met, else the last landing's figure plus about 1.5 KiB) fails in either
# case.
#
# Needs: the thumbv7em-none-eabihf target, a Berkeley-format size tool (llvm-size, else
# arm-none-eabi-size, else binutils' own `size`: it reads the ARM ELF the same) and a symbol
# lister (llvm-nm, else nm) for the breakdown; installs whichever is missing where it can
# (rustup target, apt-get llvm).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
probe="$root/examples/edge-probe"
out="${EDGE_SIZE_OUT:-$probe/target/edge-size}"
jobs="${EDGE_SIZE_JOBS:-2}"
gate="${EDGE_SIZE_GATE:-1}"
# Budgets per profile: flash, static RAM (bytes).
minimal_flash=32768 minimal_ram=4096
full_flash=65536 full_ram=6144
# Ceilings per profile: a figure over its ceiling fails the script even with EDGE_SIZE_GATE=0,
# so the client can shrink towards its budget but never grow back. Where a budget is met, its
# ceiling is the budget (full, and both static RAM figures). Minimal's flash, until its budget
# is met: the last landing's figure plus about 1.5 KiB (toolchain noise), rounded up to 256 B;
# lower it with each landing that shrinks it.
minimal_ceiling_flash=48640 minimal_ceiling_ram=4096
full_ceiling_flash=65536 full_ceiling_ram=6144
target=thumbv7em-none-eabihf

rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

# An LLVM binary tool (`size`, `nm`): the LLVM one on the PATH, the toolchain's, a versioned
# one, else binutils' (the ARM one, then the host's, which read the ARM ELF the same).
find_tool() {
  local t=$1 sysroot
  sysroot="$(rustc --print sysroot)"
  for c in "llvm-$t" "$sysroot"/lib/rustlib/*/bin/"llvm-$t" "llvm-$t-19" "llvm-$t-18" "llvm-$t-17" "llvm-$t-16" "arm-none-eabi-$t" "$t"; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}
# `size` for the figures; `nm` for the breakdown of where the flash goes.
if ! SIZE="$(find_tool size)" || ! NM="$(find_tool nm)"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "edge-size: installing llvm (for llvm-size and llvm-nm)" >&2
    (apt-get install -y -q llvm >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q llvm >/dev/null; }) || true
  fi
  SIZE="$(find_tool size)" || { echo "edge-size: no llvm-size or arm-none-eabi-size; install llvm or binutils-arm-none-eabi" >&2; exit 1; }
  NM="$(find_tool nm)" || { echo "edge-size: no llvm-nm or nm; install llvm or binutils" >&2; exit 1; }
fi

mkdir -p "$out"
# The checkout's and cargo's home paths remapped to fixed short names: panic locations carry
# the paths of the client's sources (a path dependency of the firmware, so absolute), and a
# clone at a longer path would otherwise measure bigger. Added to the firmware's own rustflags
# (cargo joins a `--config` array with the config file's).
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
remap="target.$target.rustflags=[\"--remap-path-prefix=$root=/verifi\", \"--remap-path-prefix=$cargo_home=/cargo\"]"
build() { # name, cargo feature args...
  local name="$1"; shift
  echo "edge-size: building $name" >&2
  (cd "$probe" && cargo build --release --target "$target" -j"$jobs" --config "$remap" "$@" >&2)
  cp "$probe/target/$target/release/edge-probe" "$out/$name.elf"
}
# The measuring builds have the minimal profile (they use no capability of the client).
build baseline --no-default-features --features minimal,size-baseline
build parse --no-default-features --features minimal,size-parse
build minimal --no-default-features --features minimal
build full
build tls --features tls
# The same two profiles with a probe that only calls (not gated: the budgets are on the probe
# that lists and calls, as the profiles are defined; this shows what listing costs).
build minimal-call --no-default-features --features minimal,size-call-only
build full-call --features size-call-only

# text data bss of an ELF (Berkeley format).
sizes() { "$SIZE" -B "$1" | awk 'NR==2 {print $1, $2, $3}'; }
read -r bt bd bb < <(sizes "$out/baseline.elf")
read -r pt pd pb < <(sizes "$out/parse.elf")
read -r mt md mb < <(sizes "$out/minimal.elf")
read -r ct cd cb < <(sizes "$out/full.elf")
read -r tt td tb < <(sizes "$out/tls.elf")
read -r lmt lmd lmb < <(sizes "$out/minimal-call.elf")
read -r lft lfd lfb < <(sizes "$out/full-call.elf")
# The old name of the full build, for tools that read it (nm breakdowns).
cp "$out/full.elf" "$out/client.elf"

kib() { awk -v b="$1" 'BEGIN { printf "%.1f KiB", b / 1024 }'; }
printf '\n%-28s %10s %8s %8s %12s %12s\n' "build ($target)" text data bss flash "static RAM"
for row in "baseline $bt $bd $bb" "parse $pt $pd $pb" "client-minimal $mt $md $mb" "client-full $ct $cd $cb" "client-full+tls $tt $td $tb"; do
  set -- $row
  printf '%-28s %10d %8d %8d %12d %12d\n' "$1" "$2" "$3" "$4" $(($2 + $3)) $(($3 + $4))
done
pf=$(( (pt + pd) - (bt + bd) )); pr=$(( (pd + pb) - (bd + bb) ))
mf=$(( (mt + md) - (bt + bd) )); mr=$(( (md + mb) - (bd + bb) ))
cf=$(( (ct + cd) - (bt + bd) )); cr=$(( (cd + cb) - (bd + bb) ))
echo
echo "core parse path alone : flash $pf B ($(kib $pf)), static RAM $pr B ($(kib $pr))"
echo "(caller buffers, the same in every build: sockets 2 x (4096 + 1536) B, call storage 15616 B, args 512 B)"
# TLS, apart from the client's budget: the tls build minus the full build.
tls_buf=$((16640 + 2048)) # TlsStorage: a whole TLS record to read, 2 KiB to write
tf=$(( (tt + td) - (ct + cd) )); tr=$(( (td + tb) - (cd + cb) )); trb=$(( tr - tls_buf ))
echo "https (tls - full)     : flash $tf B ($(kib $tf)), static RAM $tr B ($(kib $tr))"
echo "                        of which the TLS buffer set (caller's) $tls_buf B; beyond it $trb B ($(kib $trb))"
echo
echo "edge profile minimal: flash $mf B, static RAM $mr B"
echo "edge profile full: flash $cf B, static RAM $cr B"
lmf=$(( (lmt + lmd) - (bt + bd) )); lmr=$(( (lmd + lmb) - (bd + bb) ))
lff=$(( (lft + lfd) - (bt + bd) )); lfr=$(( (lfd + lfb) - (bd + bb) ))
echo "(calling only, not gated: minimal flash $lmf B ($((lmf - mf))), static RAM $lmr B; full flash $lff B ($((lff - cf))), static RAM $lfr B)"

# Where each profile's flash goes: code and named read-only data by symbol (scripts/
# edge-parts.awk names the parts), beyond the baseline firmware's; what has no symbol (string
# literals, tables, alignment) is the rest of the profile's figure.
parts() { "$NM" -S -C "$1" | awk -f "$root/scripts/edge-parts.awk"; }
{
  parts "$out/baseline.elf" | sed 's/^/b\t/'
  parts "$out/minimal.elf" | sed 's/^/m\t/'
  parts "$out/full.elf" | sed 's/^/f\t/'
} | awk -F'\t' -v mf="$mf" -v cf="$cf" '
  { label[$2] = $3; v[$1, $2] = $4 }
  END {
    printf "\nwhere the flash goes, beyond the baseline firmware (B; by symbol):\n"
    printf "  %-52s %9s %9s\n", "part", "minimal", "full"
    for (j = 1; j <= 100; j++) {
      if (!(j in label)) continue
      m = v["m", j] - v["b", j]; f = v["f", j] - v["b", j]
      if (m == 0 && f == 0) continue
      printf "  %-52s %9d %9d\n", label[j], m, f
      sm += m; sf += f
    }
    printf "  %-52s %9d %9d\n", "literals, tables, alignment (no symbol)", mf - sm, cf - sf
    printf "  %-52s %9d %9d\n", "total: the profile'"'"'s flash", mf, cf
    printf "  (a negative part: the baseline'"'"'s own raw-socket loop, inlined in its task, is gone)\n"
  }'

grew=0
ceiling() { # profile, what, figure, ceiling
  if [ "$3" -gt "$4" ]; then
    echo "edge-size: GREW past its ceiling: $1 $2 $3 B > $4 B (by $(($3 - $4)) B)" >&2
    grew=1
  fi
}
ceiling minimal flash "$mf" "$minimal_ceiling_flash"
ceiling minimal "static RAM" "$mr" "$minimal_ceiling_ram"
ceiling full flash "$cf" "$full_ceiling_flash"
ceiling full "static RAM" "$cr" "$full_ceiling_ram"
echo "ceilings (no growth): minimal <= $minimal_ceiling_flash B flash, <= $minimal_ceiling_ram B static RAM; full <= $full_ceiling_flash B flash, <= $full_ceiling_ram B static RAM"
[ "$grew" = 0 ] || exit 1

over=0
budget() { # profile, what, figure, budget
  if [ "$3" -gt "$4" ]; then
    echo "edge-size: OVER budget: $1 $2 $3 B > $4 B (over by $(($3 - $4)) B)" >&2
    over=$((over + $3 - $4))
  fi
}
budget minimal flash "$mf" "$minimal_flash"
budget minimal "static RAM" "$mr" "$minimal_ram"
budget full flash "$cf" "$full_flash"
budget full "static RAM" "$cr" "$full_ram"
echo "budgets: minimal <= $minimal_flash B flash, <= $minimal_ram B static RAM; full <= $full_flash B flash, <= $full_ram B static RAM (minimal's goal: 24 KiB flash)"
if [ "$over" -gt 0 ]; then
  if [ "$gate" = 0 ]; then
    echo "edge-size: budget not enforced (EDGE_SIZE_GATE=0): over by $over B in all"
    exit 0
  fi
  exit 1
fi
echo "edge-size: every profile within its budget"
