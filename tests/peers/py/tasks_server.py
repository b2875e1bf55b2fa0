"""Tasks peer: a FastMCP server with the tasks extension (fastmcp-tasks, in memory: no Redis),
for the verifi-mcp-tests tasks suite.

usage: tasks_server.py PORT
  PORT  a TCP port on 127.0.0.1; 0 picks a free one. The chosen port is printed on stdout
        (one line, flushed) once the server accepts connections.

Tools: scan {target, seconds} (task required: sleeps, with a statusMessage per tenth of a second,
then reports), scan_fail (task required:
raises "nmap: host down"), echo {text} (no task), runs {} (what this process has seen, as JSON:
how many times each task tool started and finished, and how many were cancelled).
"""

import asyncio
import json
import socket
import sys
from datetime import timedelta

import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

RUNS = {"scan_started": 0, "scan_finished": 0, "scan_cancelled": 0, "scan_fail_started": 0}

mcp = FastMCP("tasks-peer")
mcp.add_extension(TasksExtension(url="memory://"))
TASK = TaskConfig(mode="required", poll_interval=timedelta(milliseconds=200))


@mcp.tool(task=TASK)
async def scan(target: str, ctx: Context, seconds: float = 1.0) -> str:
    """Scans a target (sleeps `seconds`) as a task, saying how far it got in the task's
    statusMessage ("scanning TARGET: step I/N", ten steps a second)."""
    RUNS["scan_started"] += 1
    steps = max(1, round(seconds * 10))
    try:
        for i in range(steps):
            await ctx.report_progress(i, steps, f"scanning {target}: step {i}/{steps}")
            await asyncio.sleep(seconds / steps)
    except asyncio.CancelledError:
        RUNS["scan_cancelled"] += 1
        raise
    RUNS["scan_finished"] += 1
    return f"scanned {target} in {seconds:g}s"


@mcp.tool(task=TASK)
async def scan_fail() -> str:
    """Always fails, as a task."""
    RUNS["scan_fail_started"] += 1
    await asyncio.sleep(0.2)
    raise ToolError("nmap: host down")


@mcp.tool
def echo(text: str) -> str:
    """Returns its text argument."""
    return text


@mcp.tool
def runs() -> str:
    """What this server process has seen, as JSON."""
    return json.dumps(RUNS)


def main() -> int:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = mcp.http_app(path="/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def serve():
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        print(sock.getsockname()[1], flush=True)
        await task

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
