#!/usr/bin/env bash
# Installs what the proxy and OAuth tests need (idempotent; fast when already installed):
#   - tinyproxy (Debian package), the real forward proxy of tests/tests/proxy_trust.rs.
# Needs root for apt-get (CI runs as root).
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
echo "proxy-peers: $((SECONDS - t0))s"
