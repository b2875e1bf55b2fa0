#!/usr/bin/env bash
# The client under test for the official MCP conformance runner: maps the runner's scenario to
# the `mcp` command a user would type for it.
#
# The runner calls `client.sh URL` with MCP_CONFORMANCE_SCENARIO (the scenario's name),
# MCP_CONFORMANCE_PROTOCOL_VERSION (the spec version of the run) and, for some scenarios,
# MCP_CONFORMANCE_CONTEXT (JSON: pre-registered OAuth credentials, the calls to make).
# MCP_BIN names the `mcp` binary (tests/tests/conformance.rs sets it; default: `mcp` on PATH).
#
# Every invocation takes the URL as given (--exact-url: the runner hands out full MCP URLs, some
# at `/`) and offers the run's version with --protocol-version, in the default era (auto): the
# 2026-07-28 version speaks the 2026 era; 2025-11-25 probes and falls back to `initialize`,
# exactly as `mcp call URL …` does for a user. Each command's deadline is 20 s (--timeout-ms),
# inside the runner's 30 s per scenario, so a call that waits for something that never comes
# ends with the client's own error rather than the runner's kill. Exits with the last failing
# command's status.
set -uo pipefail
url=${1:?usage: client.sh URL (run by the conformance runner)}
scenario=${MCP_CONFORMANCE_SCENARIO:?MCP_CONFORMANCE_SCENARIO is not set}
version=${MCP_CONFORMANCE_PROTOCOL_VERSION:-2025-11-25}
context=${MCP_CONFORMANCE_CONTEXT:-}
{ [[ -n $context ]] || context='{}'; }
mcp=${MCP_BIN:-mcp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(--exact-url --protocol-version "$version" --timeout-ms 20000)
ctx() { jq -r "$1 // empty" <<<"$context"; }

status=0
run() {
  echo "+ mcp $*" >&2
  "$mcp" "$@"
  local rc=$?
  ((rc == 0)) || status=$rc
  return "$rc"
}

# The server's tools as the client lists them: {"tools": [...]} (tools --format json).
tools_json() { "$mcp" tools "$url" "${common[@]}" --format json "$@"; }

# Arguments for a tool from its input schema: every required property gets a plain value.
args_for() {
  jq -c --arg t "$1" '
    (.tools[] | select(.name == $t) | .inputSchema) as $s
    | reduce (($s.required // [])[]) as $k ({};
        . + {($k): (($s.properties[$k].type // "string") as $ty
          | if $ty == "integer" or $ty == "number" then 1
            elif $ty == "boolean" then true
            elif $ty == "object" then {}
            elif $ty == "array" then []
            else "us-west1" end)})'
}

case $scenario in
  initialize)
    run tools "$url" "${common[@]}"
    ;;
  tools_call)
    run call "$url" "${common[@]}" add_numbers a:=2 b:=3
    ;;
  elicitation-sep1034-client-defaults)
    run call "$url" "${common[@]}" --elicitation accept-defaults test_client_elicitation_defaults
    ;;
  sse-retry)
    run call "$url" "${common[@]}" test_reconnection
    ;;
  request-metadata)
    run tools "$url" "${common[@]}"
    ;;
  sep-2322-client-request-state)
    # One session, as a harness would: two tools that ask for input (with and without
    # requestState), one between them that asks nothing, one whose result has no resultType.
    printf '%s\n' \
      '{"tool":"test_mrtr_echo_state","args":{}}' \
      '{"tool":"test_mrtr_unrelated","args":{}}' \
      '{"tool":"test_mrtr_no_state","args":{}}' \
      '{"tool":"test_mrtr_no_result_type","args":{}}' >"$tmp/calls.jsonl"
    run batch "$url" "${common[@]}" --elicitation accept-defaults <"$tmp/calls.jsonl"
    ;;
  http-standard-headers)
    run tools "$url" "${common[@]}"
    run call "$url" "${common[@]}" test_headers
    run call "$url" "${common[@]}" my-hyphenated-tool
    run resources "$url" "${common[@]}"
    run read "$url" "${common[@]}" 'file:///path/to/file%20name.txt'
    run read "$url" "${common[@]}" 'https://example.com/resource?id=123'
    run prompts "$url" "${common[@]}"
    run prompt "$url" "${common[@]}" test_prompt
    ;;
  http-custom-headers)
    # The calls the scenario hands over, through one session.
    jq -c '.toolCalls[] | {tool: .name, args: .arguments}' <<<"$context" >"$tmp/calls.jsonl"
    run batch "$url" "${common[@]}" <"$tmp/calls.jsonl"
    ;;
  http-invalid-tool-headers)
    # What a user does: list the tools, then call each one the server lists (the client must
    # refuse, without sending, those whose x-mcp-header annotations are invalid).
    if tools_json >"$tmp/tools.json"; then
      for t in $(jq -r '.tools[].name' "$tmp/tools.json"); do
        run call "$url" "${common[@]}" "$t" --args "$(args_for "$t" <"$tmp/tools.json")"
      done
    else
      status=1
    fi
    ;;
  json-schema-ref-no-deref)
    run tools "$url" "${common[@]}" --format json
    ;;
  json-schema-2020-12-preservation)
    # Hand the focal tool's schema, as listed, back through the echo tool.
    if tools_json >"$tmp/tools.json"; then
      jq -c '{schema: (.tools[] | select(.name == "json_schema_2020_12_tool") | .inputSchema)}' \
        "$tmp/tools.json" >"$tmp/args.json"
      run call "$url" "${common[@]}" json_schema_echo --args "@$tmp/args.json"
    else
      status=1
    fi
    ;;
  auth/*)
    # List, then call (tools/list and tools/call may need different scopes), one session.
    auth=()
    cid=$(ctx .client_id)
    secret=$(ctx .client_secret)
    pem=$(ctx .private_key_pem)
    case $scenario in
      auth/client-credentials-*)
        auth+=(--auth-flow client-credentials --client-id "$cid")
        [[ -n $secret ]] && auth+=(--client-secret "$secret")
        if [[ -n $pem ]]; then
          printf '%s\n' "$pem" >"$tmp/key.pem"
          auth+=(--client-private-key "$tmp/key.pem")
        fi
        ;;
      *)
        auth+=(--auth-flow authorization-code)
        [[ -n $cid ]] && auth+=(--client-id "$cid")
        [[ -n $secret ]] && auth+=(--client-secret "$secret")
        # The scenario on client ID metadata documents: the URL it expects as the client id. The
        # others run as a user without such a document does (dynamic registration).
        [[ $scenario == auth/basic-cimd ]] &&
          auth+=(--client-metadata-url https://conformance-test.local/client-metadata.json)
        ;;
    esac
    run call "$url" "${common[@]}" --check-output "${auth[@]}" test-tool
    ;;
  *)
    echo "client.sh: no mcp command for scenario $scenario" >&2
    exit 3
    ;;
esac
exit "$status"
