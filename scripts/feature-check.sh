#!/usr/bin/env bash
# Every feature combination of the edge crates builds: `cargo check` of verifi-mcp-core and
# verifi-mcp-embassy for the board target (thumbv7em-none-eabihf), with no feature, each
# feature alone, each pair, and all together (what `cargo hack --feature-powerset --depth 2`
# does, plus "all"), each with `--no-default-features`.
#
# The features are read from the manifests (`cargo metadata`), so a new one is checked as soon
# as it is declared. Left out: `default` and the host-only ones (HOST_ONLY below: `std` needs
# an allocator and the OS, never on the board). A combination that lacks every feature of a
# package's NEEDS_ONE_OF group (e.g. the eras, once a `compile_error!` asks for one) is
# skipped, and said so.
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
  [verifi-mcp-core]=""
  [verifi-mcp-embassy]=""
)

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
check() { # package, comma-separated features ("" = none)
  local pkg=$1 set=$2 need=${NEEDS_ONE_OF[$1]:-}
  if [ -n "$need" ]; then
    local ok=0 f
    for f in $need; do
      case ",$set," in *",$f,"*) ok=1 ;; esac
    done
    if [ "$ok" = 0 ]; then
      echo "feature-check: $pkg [${set:-no features}] skipped (needs one of: $need)"
      skipped=$((skipped + 1))
      return 0
    fi
  fi
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
  run() { # each set once (a pair can equal "all")
    [ -n "${done_sets[k$1]+x}" ] && return 0
    done_sets[k$1]=1
    check "$pkg" "$1"
  }
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
