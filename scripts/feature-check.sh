#!/usr/bin/env bash
# Every feature combination of the edge crates builds: `cargo check` of verifi-mcp-core and
# verifi-mcp-embassy for the board target (thumbv7em-none-eabihf), with no feature, each
# feature alone, each pair, and all together (what `cargo hack --feature-powerset --depth 2`
# does, plus "all"), each with `--no-default-features`.
#
# The features are read from the manifests (`cargo metadata`), so a new one is checked as soon
# as it is declared. Left out: `default` and the host-only ones (HOST_ONLY below: `std` needs
# an allocator and the OS, never on the board). A combination that lacks every feature of a
# package's NEEDS_ONE_OF group (the protocol eras: a `compile_error!` asks for one) must not
# build: it is checked with the group's first feature added instead (`era-2026`, the minimal
# profile's era), once, and said so; and the package with no feature at all is checked to fail
# with that compile_error.
#
# Prints one line per check and the count; exits non-zero on the first failure.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${FEATURE_CHECK_JOBS:-2}"
target=thumbv7em-none-eabihf
export CARGO_TERM_COLOR=never

rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

# Host-only features, never checked for the board.
HOST_ONLY="std"
# Per package, space-separated: a combination must hold at least one of these (empty: none).
declare -A NEEDS_ONE_OF=(
  [verifi-mcp-core]="era-2026 era-2025 probe"
  [verifi-mcp-embassy]="era-2026 era-2025 probe"
)
# What the compile_error says when no era is on.
NO_ERA_ERROR="needs at least one protocol era"

# The features of a package, one per line (its declared ones, `default` and host-only left out).
features_of() {
  cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
pkg, skip = sys.argv[1], set(sys.argv[2].split()) | {"default"}
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == pkg:
        for f in sorted(p["features"]):
            if f not in skip:
                print(f)
' "$1" "$HOST_ONLY"
}

checks=0
skipped=0
# A package with no era must not build, and must say why.
no_era_fails() { # package
  local log
  log=$(mktemp)
  if cargo check -p "$1" --target "$target" --no-default-features -j"$jobs" --quiet >"$log" 2>&1; then
    rm -f "$log"
    echo "feature-check: FAILED: $1 builds with no protocol era (its compile_error! is gone)" >&2
    exit 1
  fi
  if ! grep -q "$NO_ERA_ERROR" "$log"; then
    cat "$log" >&2
    rm -f "$log"
    echo "feature-check: FAILED: $1 with no era fails, but not with the compile_error ('$NO_ERA_ERROR')" >&2
    exit 1
  fi
  rm -f "$log"
  checks=$((checks + 1))
  echo "feature-check: $1 [no era] fails as it must: $NO_ERA_ERROR"
}
check() { # package, comma-separated features ("" = none)
  local pkg=$1 set=$2
  local args=(-p "$pkg" --target "$target" --no-default-features -j"$jobs" --quiet)
  [ -n "$set" ] && args+=(--features "$set")
  local t0=$SECONDS
  if ! cargo check "${args[@]}"; then
    echo "feature-check: FAILED: cargo check ${args[*]}" >&2
    exit 1
  fi
  checks=$((checks + 1))
  echo "feature-check: $pkg [${set:-no features}] ok ($((SECONDS - t0)) s)"
}

for pkg in verifi-mcp-core verifi-mcp-embassy; do
  mapfile -t feats < <(features_of "$pkg")
  declare -A done_sets=()
  need=${NEEDS_ONE_OF[$pkg]:-}
  run() { # each set once (a pair can equal "all"); a set without an era gets the first one
    local set=$1 f ok=1
    if [ -n "$need" ]; then
      ok=0
      for f in $need; do
        case ",$set," in *",$f,"*) ok=1 ;; esac
      done
    fi
    if [ "$ok" = 0 ]; then
      f=${need%% *}
      set=${set:+$set,}$f
      echo "feature-check: $pkg [${1:-no features}] has no era: skipped, checked as [$set]"
      skipped=$((skipped + 1))
    fi
    set=$(tr , '\n' <<<"$set" | sort | paste -sd, -)
    [ -n "${done_sets[k$set]+x}" ] && return 0
    done_sets[k$set]=1
    check "$pkg" "$set"
  }
  [ -n "$need" ] && no_era_fails "$pkg"
  run ""
  for ((i = 0; i < ${#feats[@]}; i++)); do
    run "${feats[i]}"
  done
  for ((i = 0; i < ${#feats[@]}; i++)); do
    for ((j = i + 1; j < ${#feats[@]}; j++)); do
      run "${feats[i]},${feats[j]}"
    done
  done
  all=$(IFS=,; echo "${feats[*]}")
  run "$all"
  unset done_sets
done

echo "feature-check: $checks combinations build for $target ($skipped skipped)"
