#!/usr/bin/env python3
"""Turns the wire captures (transcripts of the official SDK servers, kept outside this repository; their folder is the first argument) into raw HTTP replies for the edge replay test.

Each output file is one response exactly as the real server sent it: the status line and the
headers as captured (CRLF line ends), a blank line, then the body bytes (chunked framing was
already removed by the capture; the replay server frames it again). The plain copy of the body keeps
the real bytes but not its trailing newlines; the `cat -A` copy tells how many line feeds the
body really has. The length is checked against `content-length` where the server sent one.

Usage: extract.py CAPTURES_DIR OUT_DIR
"""
import re
import sys
from pathlib import Path

SERVERS = ["rmcp-stateful", "rmcp-stateless-json", "ts-stateful", "py-stateful"]
WANTED = {
    3: "initialize",
    4: "initialized",
    5: "tools-list",
    6: "call-echo",
    7: "call-run-command",
    8: "call-fail",
    9: "call-mixed",
    12: "call-slow-progress",
    13: "call-unknown-tool",
    14: "call-invalid-args",
    26: "delete",
}


def exchanges(data: bytes):
    parts = re.split(rb"\n### (\d+)\. [^\n]*\n", data)
    for i in range(1, len(parts), 2):
        yield int(parts[i]), parts[i + 1]


def reply(section: bytes) -> bytes:
    lines = section.split(b"\n")
    head = []
    i = 0
    while i < len(lines) and not lines[i].startswith(b"< HTTP/"):
        i += 1
    while i < len(lines) and lines[i] != b"<":
        head.append(lines[i][2:])
        i += 1
    rest = b"\n".join(lines[i + 1 :])
    plain, sep, shown = rest.partition(b"\n--- body framing (cat -A) ---\n")
    if not sep:
        body = b""  # "(empty body)": the capture prints no framing section
    else:
        # The plain copy has the real bytes (CRs included) but its trailing newlines are the
        # capture's; the cat -A copy (lines up to the first empty one) has one `$` per real LF.
        body = plain.rstrip(b"\n")
        shown_lines = shown.split(b"\n")
        shown_lines = shown_lines[: shown_lines.index(b"")] if b"" in shown_lines else shown_lines
        real_lfs = sum(1 for l in shown_lines if l.endswith(b"$"))
        body += b"\n" * (real_lfs - body.count(b"\n"))
    for h in head:
        if h.lower().startswith(b"content-length:"):
            want = int(h.split(b":", 1)[1])
            assert want == len(body), (want, len(body), head[0])
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def main():
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    for server in SERVERS:
        data = (src / f"{server}.txt").read_bytes()
        (out / server).mkdir(parents=True, exist_ok=True)
        for n, section in exchanges(data):
            if n in WANTED:
                (out / server / f"{n:02}-{WANTED[n]}.http").write_bytes(reply(section))


if __name__ == "__main__":
    main()
