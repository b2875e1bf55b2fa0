"""Interop peer: a small MCP server on the official Python SDK (`mcp`, MCPServer, the class
FastMCP became in mcp 2.x), for the verifi-mcp-tests interop suite.

usage: server.py MODE PORT | server.py stdio
  MODE  stateful | stateless | json | stateless-json
  PORT  a TCP port on 127.0.0.1; 0 picks a free one. The chosen port is printed on stdout
        (one line, flushed) once the server accepts connections.

Tools: echo, regional {text, region} (region declared `x-mcp-header: Region`), run_command (formats a result, never runs anything), fail (isError), mixed
(text + image), big {bytes}, slow {ms, steps} (progress per step when a progressToken is given;
notices cancellation), peer_stats (what this process has seen, as JSON text), ports (structured
output with an outputSchema).
Resources: test://notes/readme (text), test://notes/blob (bytes), the template test://echo/{text}
(reads `echo: <text>`). Prompts: review {topic}.
"""

import asyncio
import json
import socket
import sys
from typing import Annotated, TypedDict

from pydantic import BaseModel, Field

import uvicorn
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp_types import CallToolResult, ImageContent, TextContent

BIG_MAX_BYTES = 64 * 1024 * 1024

STATS = {
    "connections": 0,
    "initializes": 0,
    "tool_calls": 0,
    "cancelled": 0,
    "slow_interrupted": 0,
    "slow_completed": 0,
    "progress_sent": 0,
}
_peers_seen = set()

server = MCPServer(name="verifi-peer-py", version="0.1.0", log_level="WARNING")


def exit_code_of(command: str) -> int:
    """The number after the last `exit ` in the command, else 0 (as the rmcp test server)."""
    i = command.rfind("exit ")
    while i >= 0:
        rest = command[i + 5 :]
        j = 0
        if rest[:1] == "-":
            j = 1
        while j < len(rest) and rest[j].isdigit():
            j += 1
        try:
            return int(rest[:j])
        except ValueError:
            i = command.rfind("exit ", 0, i)
    return 0


@server.tool(description="Returns its text argument")
def echo(text: str) -> str:
    STATS["tool_calls"] += 1
    return text


@server.tool(description="Returns its text and the region, which rides in the Mcp-Param-Region header (2026 era)")
def regional(text: str, region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    STATS["tool_calls"] += 1
    return f"{text} @ {region}"


class ScanPlan(BaseModel):
    """What confirm_scan asks the user (every field has a default)."""

    port: int = 443
    ok: bool = True


def ask_plan() -> Elicit[ScanPlan]:
    return Elicit("Scan which port?", ScanPlan)


@server.tool(description="Asks the user which port to scan (elicitation: input_required in the 2026 era, elicitation/create before), then says what it would scan")
def confirm_scan(host: str, plan: Annotated[ElicitationResult[ScanPlan], Resolve(ask_plan)]) -> str:
    if plan.action != "accept":
        return f"not scanning {host}: the user chose {plan.action}"
    return f"scanning {host}:{plan.data.port} ok={plan.data.ok}"


@server.tool(description="Formats a command result as a Kali box would, without running anything")
def run_command(command: str, timeout: int | float | None = None, workspace: str | None = None) -> str:
    STATS["tool_calls"] += 1
    return (
        f"$ {command}\n(exit {exit_code_of(command)})\n"
        f"workspace={workspace or ''} timeout={json.dumps(timeout)}\nran: {command}"
    )


@server.tool(description="Always reports a tool-level error")
def fail() -> CallToolResult:
    STATS["tool_calls"] += 1
    return CallToolResult(content=[TextContent(type="text", text="fail: this tool always fails")], is_error=True)


@server.tool(description="A text block and an image block")
def mixed() -> CallToolResult:
    STATS["tool_calls"] += 1
    return CallToolResult(
        content=[
            TextContent(type="text", text="mixed: text part"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]
    )


@server.tool(description="One text block of N bytes")
def big(bytes: int) -> str:
    STATS["tool_calls"] += 1
    return "x" * max(0, min(bytes, BIG_MAX_BYTES))


@server.tool(description="Sleeps ms in steps, sending progress when asked")
async def slow(ms: int = 1000, steps: int = 1, ctx: Context | None = None) -> str:
    STATS["tool_calls"] += 1
    ms = max(0, min(ms, 600_000))
    steps = max(1, min(steps, 10_000))
    meta = ctx.request_context.meta if ctx is not None else None
    if isinstance(meta, dict):
        token = meta.get("progressToken", meta.get("progress_token"))
    else:
        token = getattr(meta, "progress_token", None)
    done = False
    try:
        for step in range(1, steps + 1):
            await asyncio.sleep(ms / steps / 1000.0)
            if token is not None and ctx is not None:
                await ctx.report_progress(step, steps)
                STATS["progress_sent"] += 1
        done = True
        return f"slept {ms} ms in {steps} steps"
    except BaseException:
        STATS["cancelled"] += 1
        raise
    finally:
        STATS["slow_completed" if done else "slow_interrupted"] += 1


@server.tool(description="What this server process has seen, as JSON")
def peer_stats() -> str:
    return json.dumps(STATS, sort_keys=True)


class Ports(TypedDict):
    open: list[int]


@server.tool(description="Open ports, as structured output")
def ports() -> Ports:
    STATS["tool_calls"] += 1
    return {"open": [22, 80]}


# Resources and prompts, the same as the rmcp test server's (one page each here).
@server.resource("test://notes/readme", name="readme", description="A short text note", mime_type="text/plain")
def readme() -> str:
    return "hello from the readme"


@server.resource("test://notes/blob", name="blob", mime_type="application/octet-stream")
def blob() -> bytes:
    return bytes([0, 1, 2])


@server.resource("test://echo/{text}", name="echo", description="Echoes the text of its URI", mime_type="text/plain")
def echo_resource(text: str) -> str:
    return f"echo: {text}"


@server.prompt(name="review", description="Review a topic")
def review(topic: str) -> str:
    return f"Review the {topic} findings."


class Observe:
    """ASGI middleware that only watches: counts client connections (distinct peer address and
    port) and `initialize` requests, passing every byte through unchanged."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        client = scope.get("client")
        if client is not None and tuple(client) not in _peers_seen:
            _peers_seen.add(tuple(client))
            STATS["connections"] += 1
        body = bytearray()

        async def watched():
            msg = await receive()
            if msg.get("type") == "http.request":
                if len(body) < 1 << 20:
                    body.extend(msg.get("body", b""))
                if not msg.get("more_body", False):
                    try:
                        parsed = json.loads(body)
                        if isinstance(parsed, dict) and parsed.get("method") == "initialize":
                            STATS["initializes"] += 1
                    except ValueError:
                        pass
            return msg

        return await self.app(scope, watched, send)


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "stdio":
        # Newline-delimited JSON-RPC on stdin/stdout (the SDK's stdio transport).
        server.run(transport="stdio")
        return 0
    if len(sys.argv) != 3 or sys.argv[1] not in ("stateful", "stateless", "json", "stateless-json"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, port = sys.argv[1], int(sys.argv[2])
    app = server.streamable_http_app(
        stateless_http=mode in ("stateless", "stateless-json"),
        json_response=mode in ("json", "stateless-json"),
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(512)
    chosen = sock.getsockname()[1]
    config = uvicorn.Config(Observe(app), log_level="warning", lifespan="on", timeout_keep_alive=30)
    userver = uvicorn.Server(config)

    async def serve():
        task = asyncio.create_task(userver.serve(sockets=[sock]))
        while not userver.started and not task.done():
            await asyncio.sleep(0.01)
        print(chosen, flush=True)
        await task

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
