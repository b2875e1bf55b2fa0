# Sums an ELF's code and named read-only data (symbol types t, T, r, R of `nm -S -C`) by part
# of the edge firmware, for scripts/edge-size.sh's "where the flash goes" table. A symbol
# belongs to the first-named of the patterns below that occurs earliest in its name, so a
# generic's copy counts where its type lives (`<A as B>::f` is A's) and a module's pattern
# comes before its parent's. Prints "order<TAB>part<TAB>bytes" per part.
BEGIN {
  n = split( \
    "verifi_mcp_core::machine::op::call::|machine: the call (attempts, failover, results);" \
    "verifi_mcp_core::machine::op::trip::|machine: trips (request written, reply read);" \
    "verifi_mcp_core::machine::op::task::|machine: tasks;" \
    "verifi_mcp_core::machine::op::|machine: the op (steps, outcomes);" \
    "verifi_mcp_core::machine::handlers::call::|replies: a call's;" \
    "verifi_mcp_core::machine::handlers::list::|replies: a tools/list page;" \
    "verifi_mcp_core::machine::handlers::init::|replies: handshake, probe (a shared key search);" \
    "verifi_mcp_core::machine::handlers::|replies: other (requests, errors);" \
    "verifi_mcp_core::machine::|machine: metering, config, waits;" \
    "verifi_mcp_core::drive::|drive: the async pump;" \
    "verifi_mcp_core::wire::jsonrpc::|wire: JSON-RPC;" \
    "verifi_mcp_core::wire::json::|wire: JSON (scan, values, unescape);" \
    "verifi_mcp_core::wire::http::|wire: HTTP/1.1 (head, chunked);" \
    "verifi_mcp_core::wire::sse::|wire: SSE;" \
    "verifi_mcp_core::wire::words::|wire: failure words (packed text, writer);" \
    "verifi_mcp_core::wire::failure::|wire: failure words (packed text, writer);" \
    "verifi_mcp_core::wire::era::|wire: era (headers, _meta, capabilities);" \
    "verifi_mcp_core::wire::session::|wire: sessions;" \
    "verifi_mcp_core::wire::endpoint::|wire: endpoint URLs;" \
    "verifi_mcp_core::wire::exchange::|wire: exchange (a reply's route);" \
    "verifi_mcp_core::wire::content|wire: content flattening;" \
    "verifi_mcp_core::wire::|wire: other;" \
    "verifi_mcp_core::harness::redact::|harness: redaction;" \
    "verifi_mcp_core::harness::|harness: failover, results;" \
    "verifi_mcp_core::buf::|buffers and text;" \
    "verifi_mcp_core::|core: other;" \
    "verifi_mcp_embassy::tls::|adapter: TLS;" \
    "verifi_mcp_embassy::net::|adapter: sockets, DNS, connect;" \
    "verifi_mcp_embassy::|adapter: the slot;" \
    "edge_probe::|probe: its futures polled apart;" \
    "embassy_executor::raw::TaskStorage|executor: task polls (the probe's future inlined);" \
    "smoltcp::|embassy-net and smoltcp;" \
    "embassy_net::|embassy-net and smoltcp;" \
    "core::|Rust core library;" \
    "compiler_builtins::|Rust core library;" \
    "aeabi_|Rust core library;" \
    "<\\[u8\\]>|Rust core library;" \
    "<&str|Rust core library;" \
    "str::|Rust core library", pats, ";")
  for (i = 1; i <= n; i++) { split(pats[i], pp, "|"); re[i] = pp[1]; part[i] = pp[2] }
  other = n + 1; part[other] = "other named code and data"
}
function hex(s,   i, v) {
  v = 0; s = tolower(s)
  for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
  return v
}
$3 ~ /^[tTrR]$/ && NF >= 4 {
  name = $0; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, "", name)
  # Names the demangler left mangled: `..` for `::`, `$LT$`/`$GT$` for `<`/`>`.
  gsub(/\.\./, "::", name); gsub(/\$LT\$/, "<", name); gsub(/\$GT\$/, ">", name)
  best = other; at = length(name) + 1
  for (i = 1; i <= n; i++) if (match(name, re[i]) && RSTART < at) { at = RSTART; best = i }
  # The first pattern of a part names its order (its rows stay together).
  for (j = 1; j < best && part[j] != part[best]; j++) ;
  sum[j] += hex($2)
}
END { for (j in sum) printf "%d\t%s\t%d\n", j, part[j], sum[j] }
