#!/usr/bin/env bash
# Installs what the proxy and OAuth tests need (idempotent; fast when already installed):
#   - tinyproxy (Debian package), the real forward proxy of tests/tests/proxy_trust.rs and
#     tests/tests/oauth.rs;
#   - the auth peer's npm packages (oidc-provider, the TypeScript MCP SDK; pinned in
#     tests/peers/auth/package.json and package-lock.json) with npm ci, then a smoke start.
# Needs root for apt-get (CI runs as root), node + npm.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
if command -v tinyproxy >/dev/null || [[ -x /usr/sbin/tinyproxy || -x /usr/bin/tinyproxy ]]; then
  echo "proxy-peers: tinyproxy present ($(tinyproxy -v 2>/dev/null || echo installed))"
else
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends tinyproxy >/dev/null
  echo "proxy-peers: tinyproxy installed"
fi

auth_dir=tests/peers/auth
hash_of() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }
stamp=$auth_dir/node_modules/.verifi-peers-stamp
want=$(hash_of "$auth_dir/package.json" "$auth_dir/package-lock.json")
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "proxy-peers: auth peer up to date"
else
  (cd "$auth_dir" && npm ci --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved)
  echo "$want" >"$stamp"
  echo "proxy-peers: auth peer installed"
fi
# Smoke: the peer starts and prints its two URLs.
key=$(mktemp)
out=$(mktemp)
node "$auth_dir/server.mjs" header "$key" >"$out" 2>/dev/null &
pid=$!
ok=""
for _ in $(seq 1 200); do # 20 s at most
  if grep -q '^{' "$out"; then ok=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
rm -f "$key"
if [[ -z $ok ]]; then
  echo "proxy-peers: the auth peer did not start" >&2
  cat "$out" >&2
  rm -f "$out"
  exit 1
fi
rm -f "$out"
echo "proxy-peers: auth peer starts"
echo "proxy-peers: $((SECONDS - t0))s"
