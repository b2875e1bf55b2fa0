#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS each (default 30), one after another,
# and fails on the first crash, hang (-timeout=10) or memory blow-up (-rss_limit_mb=512).
# Installs what it needs: the nightly toolchain (rustup) and cargo-fuzz.
# New inputs go to fuzz/target/corpus-work/<target>/, never into the committed seeds.
# FUZZ_SEED=N fixes libFuzzer's seed (CI does, so a red run replays the same way on a
# developer's machine); without it every run explores from a new seed.
set -euo pipefail
SECONDS_EACH="${1:-30}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/fuzz"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

cd "$FUZZ"
TARGETS=(http_response sse json exchange redactor run_command endpoint manifest machine)
dict_for() {
    case "$1" in
        http_response|exchange) echo "dict/http.dict" ;;
        sse) echo "dict/sse.dict" ;;
        json|manifest) echo "dict/json.dict" ;;
        *) echo "" ;;
    esac
}

t0=$(date +%s)
cargo +nightly fuzz build
echo "fuzz: built all targets in $(( $(date +%s) - t0 )) s"

for t in "${TARGETS[@]}"; do
    work="$FUZZ/target/corpus-work/$t"
    mkdir -p "$work"
    args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=512 -print_final_stats=1)
    d="$(dict_for "$t")"
    [ -n "$d" ] && args+=(-dict="$d")
    [ -n "${FUZZ_SEED:-}" ] && args+=(-seed="$FUZZ_SEED")
    s=$(date +%s)
    if ! cargo +nightly fuzz run "$t" "$work" "corpus/$t" -- "${args[@]}" > "$FUZZ/target/$t.log" 2>&1; then
        tail -n 60 "$FUZZ/target/$t.log"
        echo "fuzz: $t FAILED after $(( $(date +%s) - s )) s; the input is in fuzz/artifacts/$t/" >&2
        exit 1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$FUZZ/target/$t.log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'exec/s: [0-9]*' "$FUZZ/target/$t.log" | tail -1 | grep -o '[0-9]*$' || echo "?")
    echo "fuzz: $t ok in $(( $(date +%s) - s )) s ($execs runs, ${rate} exec/s)"
done
echo "fuzz: all targets clean in $(( $(date +%s) - t0 )) s total"
