#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from the captured real replies
(core/tests/data) plus hand-made hostile cases. Re-run after adding captures; files are named by
what they are, so a re-run overwrites only seeds (crash inputs kept by hand use other names)."""
import json, os, re, glob

ROOT = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(ROOT, "..", "core", "tests", "data")
CORPUS = os.path.join(ROOT, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def http_json(body, status="200 OK", extra=""):
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def chunked(body, size=7, head="HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"):
    out = (head + "transfer-encoding: chunked\r\n\r\n").encode()
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def with_id(body, new_id=2):
    """The same bytes with the response's top-level numeric id replaced (tools/call is id 2)."""
    m = list(re.finditer(rb'"id":\s*\d+', body))
    if not m:
        return body
    last = m[-1]
    return body[:last.start()] + b'"id":' + str(new_id).encode() + body[last.end():]


jsons = sorted(glob.glob(os.path.join(DATA, "*.json")))
sses = sorted(glob.glob(os.path.join(DATA, "*.sse")))
https = sorted(glob.glob(os.path.join(DATA, "*.http")))

# ---- json
for p in jsons:
    put("json", "cap-" + os.path.basename(p), read(p))
for p in sses:
    for i, m in enumerate(re.findall(rb"^data: ?(.*)$", read(p), re.M)):
        put("json", f"cap-{os.path.basename(p)}-{i}.json", m.rstrip(b"\r"))
hostile_json = {
    "deep-array-200": "[" * 200 + "]" * 200,
    "deep-array-128": "[" * 128 + "]" * 128,
    "deep-array-unclosed": "[" * 5000,
    "deep-object": '{"a":' * 150 + "1" + "}" * 150,
    "invalid-utf8-string": b'"\xff\xfe"',
    "overlong-utf8": b'"\xc0\xaf"',
    "surrogate-in-utf8": b'"\xed\xa0\x80"',
    "lone-surrogate-escape": r'"\ud800"',
    "surrogate-pair": r'"\ud83d\ude00 \u00e9 \u0000 \u001f"',
    "reversed-pair": r'"\ude00\ud83d"',
    "controls": '"a\\b\\f\\n\\r\\t\\"\\\\\\/"',
    "raw-control": b'"a\x01b"',
    "del-char": b'"a\x7fb"',
    "numbers": "[0,-0,1e2,1E+2,-1.5e-3,123456789012345678901234567890,18446744073709551615,18446744073709551616,-9223372036854775808,1e400]",
    "bad-numbers": "[01]",
    "bad-number-dot": "[1.]",
    "bad-minus": "-",
    "dup-keys": '{"a":1,"a":2,"b":{"a":3}}',
    "escaped-key": '{"\\u0061":1,"a":2}',
    "ws": " \t\r\n{ \"a\" : [ 1 , true , false , null ] } \n",
    "trailing": '{"a":1} x',
    "truncated": '{"a":[1,2,',
    "empty": "",
    "literal-typo": "[tru]",
    "unicode-raw": '"ünïcødé ☃ 😀"',
    "form-feed-ws": b'\x0c{}',
}
for k, v in hostile_json.items():
    put("json", k, v)

# ---- sse
for p in sses:
    put("sse", "cap-" + os.path.basename(p), read(p))
hostile_sse = {
    "crlf-mixed": b"data: a\r\ndata: b\rdata: c\n\r\n",
    "bom": b"\xef\xbb\xbfdata: x\n\n",
    "bom-twice": b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n",
    "bom-partial": b"\xef\xbbdata: x\n\n",
    "comments": b": hi\n:\ndata:x\n\n",
    "no-space": b"data:x\ndata:  y\n\n",
    "event-types": b"event: ping\ndata: a\n\nevent: message\ndata: b\n\nevent:\ndata: c\n\n",
    "ids": b"id: 1\ndata: a\n\nid\ndata: b\n\nid: a\x00b\n\nid: " + b"9" * 200 + b"\n\n",
    "id-no-data": b"id: 42\n\n",
    "id-unterminated-event": b"id: 7\ndata: x",
    "retry": b"retry: 1500\n\nretry: 15a\n\nretry: 99999999999\n\nretry:\n\n",
    "field-no-colon": b"data\ndata\n\n",
    "unknown-fields": b"foo: bar\ndatas: x\ndat: y\ndata: z\n\n",
    "long-field-name": b"dataaaaaaaaaa: x\ndata: y\n\n",
    "oversized-event": b"data: " + b"x" * 600 + b"\n\n",
    "oversized-many-lines": b"data: xx\n" * 200 + b"\n",
    "under-cap": b"data: " + b"y" * 500 + b"\n\ndata: z\n\n",
    "empty-data": b"data:\n\ndata: \n\n",
    "two-empty-lines": b"data:\ndata:\n\n",
    "cr-only": b"data: a\r\rdata: b\r\r",
    "unterminated": b"data: a\n\ndata: b",
    "nul-in-data": b"data: a\x00b\n\n",
    "invalid-utf8": b"data: \xff\xfe\n\nid: \xff\n\n",
    "blank-lines": b"\n\n\r\n\r\r",
}
for k, v in hostile_sse.items():
    put("sse", k, v)

# ---- http_response
for p in https:
    put("http_response", "cap-" + os.path.basename(p), read(p))
for p in jsons:
    put("http_response", "cap-json-" + os.path.basename(p), http_json(read(p)))
for p in sses:
    put("http_response", "cap-chunked-" + os.path.basename(p), chunked(read(p)))
H = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
hostile_http = {
    "truncated-head": "HTTP/1.1 200 OK\r\ncontent-ty",
    "truncated-status": "HTTP/1.",
    "lf-only": "HTTP/1.1 200 OK\ncontent-length: 2\n\n{}",
    "chunk-10e20": H + "transfer-encoding: chunked\r\n\r\n56BC75E2D63100000\r\nx",
    "chunk-hex-overflow": H + "transfer-encoding: chunked\r\n\r\nffffffffffffffffffff\r\n",
    "chunk-ext": H + "transfer-encoding: chunked\r\n\r\n2;name=val\r\n{}\r\n0\r\n\r\n",
    "chunk-long-ext": H + "transfer-encoding: chunked\r\n\r\n2;" + "e" * 5000 + "\r\n{}\r\n0\r\n\r\n",
    "chunk-bare-lf": H + "transfer-encoding: chunked\r\n\r\n2\n{}\n0\n\n",
    "chunk-trailers": H + "transfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-t: 1\r\n\r\n",
    "chunk-bad": H + "transfer-encoding: chunked\r\n\r\nzz\r\n",
    "chunk-missing-crlf": H + "transfer-encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
    "te-and-cl": H + "transfer-encoding: chunked\r\ncontent-length: 100\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "cl-dup-conflict": H + "content-length: 2\r\ncontent-length: 3\r\n\r\n{}x",
    "cl-dup-same": H + "content-length: 2\r\ncontent-length: 2\r\n\r\n{}",
    "cl-huge": H + "content-length: 99999999999999999999999\r\n\r\n",
    "cl-negative": H + "content-length: -1\r\n\r\n",
    "cl-over-cap": H + "content-length: 70000\r\n\r\n",
    "cl-plus": H + "content-length: +2\r\n\r\n{}",
    "close-delimited": H + "\r\n{\"a\":1}",
    "http10-keepalive": "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n",
    "204": "HTTP/1.1 204 No Content\r\n\r\n",
    "304-with-cl": "HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\n\r\n",
    "100-continue": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
    "many-1xx": "HTTP/1.1 103 Early Hints\r\n\r\n" * 20 + "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
    "too-many-headers": "HTTP/1.1 200 OK\r\n" + "x: y\r\n" * 80 + "\r\n",
    "head-too-large": "HTTP/1.1 200 OK\r\nx: " + "a" * 3000 + "\r\n\r\n",
    "session-id-bad": "HTTP/1.1 200 OK\r\nmcp-session-id: a b\x01\r\ncontent-length: 0\r\n\r\n",
    "session-id-long": "HTTP/1.1 200 OK\r\nmcp-session-id: " + "s" * 300 + "\r\ncontent-length: 0\r\n\r\n",
    "trailing-data": H + "content-length: 2\r\n\r\n{}EXTRA",
    "status-weird": "HTTP/1.1 999 Odd\r\ncontent-length: 0\r\n\r\n",
    "status-short": "HTTP/1.1 20 OK\r\n\r\n",
    "obs-fold": "HTTP/1.1 200 OK\r\nx: a\r\n b\r\ncontent-length: 0\r\n\r\n",
    "ctype-params": "HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream; charset=utf-8\r\ncontent-length: 0\r\n\r\n",
    "empty": "",
}
for k, v in hostile_http.items():
    put("http_response", k, v)

# ---- exchange (the reply to tools/call, request id 2)
for p in jsons:
    body = with_id(read(p))
    put("exchange", "cap-json-" + os.path.basename(p), http_json(body))
for p in sses:
    put("exchange", "cap-sse-" + os.path.basename(p), chunked(with_id(read(p)), 64))
SECRET = "sk-fuzz-SECRET-7f3a"
def ok_text(text, id_=2):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}]}}, separators=(",", ":")).encode()
hostile_x = {
    "text-with-secret": http_json(ok_text("key=" + SECRET + " and Bearer tok-HEADER-9c2e")),
    "error-with-secret": http_json(json.dumps({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "bad " + SECRET}}).encode()),
    "is-error": http_json(b'{"jsonrpc":"2.0","id":2,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}'),
    "structured": http_json(b'{"jsonrpc":"2.0","id":2,"result":{"structuredContent":{"a":[1,2]}}}'),
    "content-not-array": http_json(b'{"jsonrpc":"2.0","id":2,"result":{"content":{}}}'),
    "wrong-id-only": http_json(ok_text("other", 9)),
    "string-id": http_json(b'{"jsonrpc":"2.0","id":"2","result":{"content":[]}}'),
    "batch": http_json(b'[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}},' + ok_text("in batch") + b']'),
    "sse-progress-then-result": chunked(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":2,\"progress\":1}}\n\nevent: message\ndata: " + ok_text("done") + b"\n\n", 5),
    "sse-no-response": chunked(b"id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n", 9),
    "sse-truncated": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,",
    "sse-oversized-event": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: " + b"x" * 20000 + b"\n\n",
    "status-404": b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found",
    "status-500-secret": http_json(("oops " + SECRET).encode(), "500 Internal Server Error"),
    "html": b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 6\r\n\r\n<html>",
    "bad-json": http_json(b'{"jsonrpc":"2.0","id":2,"result":'),
    "deep-json": http_json(b'{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"x","v":' + b"[" * 300 + b"]" * 300 + b"}]}}"),
    "chunk-10e20": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n56BC75E2D63100000\r\n{",
    "202": b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
    "empty": b"",
    "truncated-head": b"HTTP/1.1 200 OK\r\ncontent-",
}
for k, v in hostile_x.items():
    put("exchange", k, v)

# ---- redactor: secrets joined by 0x01, then 0x00, then the text
def red(secrets, text):
    return b"\x01".join(s.encode() if isinstance(s, str) else s for s in secrets) + b"\x00" + (text.encode() if isinstance(text, str) else text)
hostile_r = {
    "basic": red(["hunter22"], "pw=hunter22 ok"),
    "overlap": red(["abcd", "cdef"], "xxabcdefyy"),
    "nested": red(["secret", "secretsecret"], "secretsecretsecret"),
    "adjacent": red(["aaaa"], "aaaaaaaaa"),
    "short-ignored": red(["abc"], "abc abc"),
    "no-secrets": b"plain text without a separator",
    "clean": red(["zzzz"], "nothing to see here"),
    "marker-in-text": red(["[REDACTED]"], "a [REDACTED] b"),
    "marker-like-secret": red(["TED]"], "aaaa TED] x"),
    "empty-secret": red(["", "abcd"], "abcd"),
    "binary": red([b"\xff\xfe\xfd\xfc"], b"\x00\xff\xfe\xfd\xfc\xff"),
    "long-secret": red(["k" * 40], "x" + "k" * 100 + "y"),
    "many": red(["one1", "two2", "thr3", "fou4", "fiv5"], "one1two2thr3 fou4-fiv5"),
    "prefix-of-other": red(["passw", "password9"], "password9 passw passwor"),
}
for k, v in hostile_r.items():
    put("redactor", k, v)

# ---- run_command
for k, v in {
    "ok": "$ id\n(exit 0)\nuid=0(root)\n",
    "fail": "$ false\n(exit 1)\n",
    "negative": "$ x\n(exit -9)\nkilled",
    "huge": "$ x\n(exit 99999999999999999999999)\nout",
    "min": "$ x\n(exit -9223372036854775808)\n",
    "no-prefix": "id\n(exit 0)\n",
    "no-newline": "$ id",
    "bad-code": "$ id\n(exit 1a)\n",
    "empty-code": "$ id\n(exit )\n",
    "paren-in-output": "$ id\n(exit 0)\n(exit 1)\nmore",
    "crlf": "$ id\r\n(exit 0)\r\nout",
    "unicode": "$ échø ☃\n(exit 0)\n😀",
    "empty": "",
}.items():
    put("run_command", k, v)

# ---- endpoint
for k, v in {
    "http": "http://127.0.0.1:8080",
    "https-path": "https://example.test/api/",
    "query": "http://h/api?x=1&y=2",
    "ipv6": "http://[::1]:3000/mcp",
    "ipv6-scoped": "http://[fe80::1%25eth0]/",
    "userinfo": "http://user:pw@h/",
    "fragment": "http://h/#frag",
    "port-0": "http://h:0/",
    "port-big": "http://h:65536/",
    "port-empty": "http://h:/",
    "port-sign": "http://h:+80/",
    "no-scheme": "h:80/mcp",
    "ftp": "ftp://h/",
    "empty-host": "http:///mcp",
    "space-host": "http://a b/",
    "upper-scheme": "HTTPS://H:443",
    "double-slash": "http://h//",
    "unicode-host": "http://ü.example/",
    "bracket-unclosed": "http://[::1/",
    "bracket-junk": "http://[::1]x:80/",
    "control": "http://h/\x01",
}.items():
    put("endpoint", k, v)

# ---- manifest
for k, v in {
    "fills": '{"slotFills":{"kali":{"endpoint":"http://127.0.0.1:3000","fallback":"http://127.0.0.1:3001","headers":{"authorization":"Bearer x"}},"kb":"http://h/"}}',
    "flat": '{"endpoints":{"kali":"http://h/","kb":"http://k/"}}',
    "both": '{"slotFills":{"a":"http://a/"},"endpoints":{"a":"http://z/","b":"http://b/"}}',
    "escaped-names": '{"slotFills":{"k\\u0061li":"http://a/","\\ud800":"http://b/"}}',
    "dup": '{"slotFills":{"a":"http://a/","a":"http://b/"}}',
    "bad-fill": '{"slotFills":{"a":1}}',
    "bad-headers": '{"slotFills":{"a":{"endpoint":"http://a/","headers":{"x":1}}}}',
    "null-fields": '{"slotFills":null,"endpoints":null}',
    "not-object": "[]",
    "empty-object": "{}",
    "deep": '{"slotFills":{"a":{"endpoint":"http://a/","x":' + "[" * 200 + "]" * 200 + "}}}",
    "invalid": '{"slotFills":',
}.items():
    put("manifest", k, v)
print("seeds written")
