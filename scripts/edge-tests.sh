#!/usr/bin/env bash
# The code the edge ships, run in tests: every build here has the core WITHOUT its `std`
# feature, as the edge builds it.
#
# Why separate invocations: cargo unifies features over every package one invocation selects,
# and the host adapter turns the core's `std` on. `cargo test --workspace` therefore tests the
# host's build of the core only; here each invocation selects packages that never depend on
# the host adapter (resolver 3: features are unified over the selected packages and their
# dependencies, dev-dependencies included, nothing else):
#   core      `cargo test -p verifi-mcp-core --no-default-features --features F`, once per
#             edge profile's capabilities (minimal: `era-2026`; full: every capability, see
#             examples/edge-probe): the machine, exchange, HTTP, SSE, JSON, JSON-RPC and redaction
#             tests (unit and integration), the fuzz corpora replayed; tests that need `std`
#             are gated on it and run in `cargo test --workspace` only.
#   edge      `cargo test -p verifi-mcp-core -p verifi-mcp-embassy -p verifi-mcp-edge-tests`:
#             the core's tests again with `drive` (the driver's scripted tests and the fuzz
#             corpora replayed need it), the edge adapter's own tests, the edge replay, TAP and TLS
#             tests (tests/edge).
#   probe     examples/edge-probe (its own workspace), the host build on a TAP device
#             (`--release --target x86_64-unknown-linux-gnu`, as CI's step builds it) in both
#             profiles (`minimal`, `full`), each run in a network namespace against the rmcp
#             test server: one real `tools/list` (the tools counted) and one real `tools/call`
#             (`run_command`) each, the call's exit code and first line checked.
# Before each invocation runs, the features of that exact invocation are checked twice: with
# `cargo tree -e features` and with the features cargo reports for the core's compiled units
# (`--message-format=json`); `std` on the core fails the script.
#
# Needs root for the probe (a namespace and a TAP device), like tests/edge/tests/edge_tap.rs;
# not root fails, unless VERIFI_ALLOW_NO_NETNS=1 (then the probe is skipped, loudly).
# Prints the count of tests run per invocation.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${EDGE_TESTS_JOBS:-2}"
export CARGO_TERM_COLOR=never

# The core's feature sets tested alone (comma-separated): the edge profiles' capabilities
# (examples/edge-probe's `minimal` and `full`). `drive` (the edge adapter's) is tested by the
# edge invocation below, which selects the core too (with every capability: the adapter's
# default).
core_sets=("era-2026" "era-2025,era-2026,probe,tasks,input,observe,trace")
profiles=(minimal full)

fail() {
  echo "edge-tests: FAILED: $*" >&2
  exit 1
}

counts=()

# no_std LABEL CARGO-ARGS... : fails when the core has `std` in the invocation CARGO-ARGS
# (`cargo test` arguments, package and feature selection only).
no_std() {
  local label=$1; shift
  # Inverted on the core: every feature of it, the command line's included.
  local tree
  tree=$(cargo tree -e features -i verifi-mcp-core --prefix none "$@") \
    || fail "$label: cargo tree -e features -i verifi-mcp-core $* failed"
  if grep -q 'verifi-mcp-core feature "std"' <<<"$tree"; then
    fail "$label: cargo tree shows the core's std feature on (cargo tree -e features -i verifi-mcp-core $*)"
  fi
  # The same, from the build itself: the features of every unit of the core cargo compiles
  # (or finds fresh) for this invocation.
  local feats
  feats=$(cargo test --no-run -j"$jobs" --message-format=json "$@" | python3 -c '
import json, sys
seen = set()
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and "#verifi-mcp-core@" in m.get("package_id", ""):
        seen.add(",".join(m.get("features", [])) or "(none)")
print(" | ".join(sorted(seen)) or "NOT BUILT")
') || fail "$label: cargo test --no-run $* did not build"
  case "$feats" in
    "NOT BUILT") fail "$label: the core was not built by cargo test $*" ;;
    *std*) fail "$label: the core was built with std (features: $feats)" ;;
  esac
  echo "edge-tests: $label: the core's features: $feats (no std)"
}

# run_tests LABEL CARGO-ARGS... : runs cargo test, prints and records the count of tests run.
run_tests() {
  local label=$1; shift
  local log
  log=$(mktemp)
  if ! cargo test -j"$jobs" "$@" 2>&1 | tee "$log"; then
    rm -f "$log"
    fail "$label: cargo test $*"
  fi
  local n
  n=$(awk '/^test result: /{for(i=1;i<NF;i++){if($(i+1)~/^passed/)p+=$i; if($(i+1)~/^ignored/)g+=$i}} END{printf "%5d passed, %d ignored", p, g}' "$log")
  rm -f "$log"
  counts+=("$(printf '%-44s %s' "$label" "$n")")
}

# 1. The core alone, without std, once per feature set.
for set in "${core_sets[@]}"; do
  args=(-p verifi-mcp-core --no-default-features)
  [ -n "$set" ] && args+=(--features "$set")
  # The doc examples speak both eras (the machine's the handshake era): with one era built,
  # the unit and integration tests run, the doc examples do not.
  targets=()
  case ",$set," in *,era-2025,*) ;; *) targets=(--lib --tests) ;; esac
  label="core (no std${set:+, $set})"
  no_std "$label" "${args[@]}"
  run_tests "$label" "${args[@]}" "${targets[@]}"
done

# 2. The edge adapter and the edge integration tests, with the core as the edge has it.
edge=(-p verifi-mcp-core -p verifi-mcp-embassy -p verifi-mcp-edge-tests)
no_std "edge adapter + edge tests" "${edge[@]}"
run_tests "edge adapter + edge tests (core: drive)" "${edge[@]}"

# 3. The edge-probe's host build, in each profile, against the rmcp server in a network
# namespace.
probe_dir="$root/examples/edge-probe"
host_target=x86_64-unknown-linux-gnu
server_bin="$root/target/debug/verifi-edge-test-server"
[ -x "$server_bin" ] || fail "no $server_bin (built by the edge tests above)"
probe_out="$probe_dir/target/edge-tests"
mkdir -p "$probe_out"
for profile in "${profiles[@]}"; do
  pargs=(--target "$host_target")
  [ "$profile" = full ] || pargs+=(--no-default-features --features "$profile")
  probe_tree=$(cd "$probe_dir" && cargo tree -e features -i verifi-mcp-core --prefix none "${pargs[@]}") \
    || fail "edge-probe host build ($profile): cargo tree failed"
  if grep -q 'verifi-mcp-core feature "std"' <<<"$probe_tree"; then
    fail "edge-probe host build ($profile): cargo tree shows the core's std feature on"
  fi
  echo "edge-tests: edge-probe host build ($profile): the core's features: $(grep -o 'verifi-mcp-core feature "[^"]*"' <<<"$probe_tree" | sed 's/.*feature //' | sort -u | tr -d '"' | paste -sd, -) (no std)"
  (cd "$probe_dir" && cargo build --release -j"$jobs" "${pargs[@]}")
  cp "$probe_dir/target/$host_target/release/edge-probe" "$probe_out/edge-probe-$profile"
done

run_probe() { # profile
  local profile=$1 probe_bin="$probe_out/edge-probe-$1"
  local why=""
  if [ "$(id -u)" != 0 ]; then
    why="not root: a network namespace and a TAP device need root (CAP_NET_ADMIN)"
  elif ! command -v ip >/dev/null; then
    why="the ip command (iproute2) is missing"
  fi
  if [ -n "$why" ]; then
    if [ "${VERIFI_ALLOW_NO_NETNS:-}" = 1 ]; then
      echo "edge-tests: the edge-probe run DID NOT RUN ($why); allowed by VERIFI_ALLOW_NO_NETNS=1" >&2
      counts+=("$(printf '%-44s %5s (skipped: %s)' "edge-probe host build, $profile (TAP)" 0 "$why")")
      return 0
    fi
    fail "the edge-probe run: $why; run as root, or set VERIFI_ALLOW_NO_NETNS=1"
  fi
  local ns="verifi-probe-$$-$profile" tap=ptap0 work cleanup
  work=$(mktemp -d)
  cleanup="ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null; ip netns del $ns 2>/dev/null; rm -rf $work"
  # shellcheck disable=SC2064
  trap "$cleanup" EXIT
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" tuntap add dev "$tap" mode tap
  ip -n "$ns" addr add 192.0.2.1/24 dev "$tap"
  ip -n "$ns" link set "$tap" up
  ip netns exec "$ns" "$server_bin" --mode stateful --bind 192.0.2.1:8001 >"$work/server.out" 2>&1 &
  local t=0
  until [ -s "$work/server.out" ]; do
    sleep 0.1
    t=$((t + 1))
    [ "$t" -lt 200 ] || fail "the rmcp test server did not start: $(cat "$work/server.out")"
  done
  # One probe: `run_command` with a command whose exit code the test server reports back.
  local rc=0
  ip netns exec "$ns" timeout 60 "$probe_bin" --tap "$tap" --ip 192.0.2.2/24 \
    --primary http://192.0.2.1:8001 --command 'edge probe; exit 7' --count 1 --period 1 \
    >"$work/probe.out" 2>&1 || rc=$?
  cat "$work/probe.out"
  [ "$rc" = 0 ] || fail "edge-probe ($profile) exited $rc"
  # The server's reply, unwrapped by the client: the exit code, then its first line (the
  # probe's run id as the workspace, the call's timeout in seconds).
  grep -q '^probe 1: exit 7 in [0-9]* ms: workspace=edge-probe-host timeout=30$' "$work/probe.out" \
    || fail "edge-probe: no 'probe 1: exit 7 in N ms: workspace=edge-probe-host timeout=30' line"
  # The tools, listed once before the probe (tools/list on the edge's code; not metered).
  grep -Eq '^tools: [1-9][0-9]* listed, ok true$' "$work/probe.out" \
    || fail "edge-probe: no 'tools: N listed, ok true' line (the tools/list before the call)"
  grep -q '^ledger: 1 tool calls, ' "$work/probe.out" || fail "edge-probe: the ledger does not count one tool call"
  grep -q '^edge-probe: done, 1 probes answered$' "$work/probe.out" || fail "edge-probe: not done with 1 probe answered"
  counts+=("$(printf '%-44s %5s tools/list and tools/call checked' "edge-probe host build, $profile (TAP)" 2)")
  eval "$cleanup"
  trap - EXIT
}
for profile in "${profiles[@]}"; do
  run_probe "$profile"
done

echo
echo "edge tests (the core without std), tests run per invocation:"
printf '  %s\n' "${counts[@]}"
