//! `verifi-stdio-fault MODE`: a byte-level stdio MCP server for the fault tests. It speaks
//! newline-delimited JSON-RPC on stdin/stdout just well enough (`initialize`, `tools/list`,
//! `tools/call` of `echo`, `ping`), and misbehaves as MODE says when a tool is called:
//!
//! - `ok`: behaves; before each answer it asks the client `ping` (with the call's own id) and
//!   `roots/list` (and checks the answers came), and sends a notification carrying the call's
//!   id.
//! - `exit-mid-reply`: writes half a response, a stderr line naming `$FAULT_SECRET`, exits 3.
//! - `exit-at-start`: writes a stderr line and exits 7 before reading anything.
//! - `garbage`: before each answer writes five lines that are not JSON-RPC (a JSON log object,
//!   a bare number, a log line, a 1000-byte line, a traceback naming `$FAULT_SECRET`), then
//!   answers; a call whose `text` is `hang` it never answers (it waits forever).
//! - `long-line`: writes `$FAULT_BYTES` (default 40 MiB) without a newline, then waits.
//! - `stderr-flood`: writes `$FAULT_BYTES` (default 8 MiB) to stderr before answering.
//! - `plain`: behaves, and asks nothing (for concurrent calls).
//! - `env`: answers a call with its environment (`K=V` lines) and working directory.
//!
//! - `modern`: a 2026-07-28 server: answers `server/discover` with a result (other modes
//!   refuse it as an unknown method, as old-era servers do), and answers a call with the
//!   protocol version in its `_meta`, or `no _meta`.
//!
//! In every mode, a call of the tool `stats` answers `initializes=N pid=P cancelled=C`, and a
//! call of `wait` is never answered: it waits for its `notifications/cancelled` (counted in C).
//!
//! Waiting forever means until stdin ends (it then exits 0).

use std::io::{BufRead, Read, Write};

fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(line.as_bytes());
    let _ = o.write_all(b"\n");
    let _ = o.flush();
}

fn wait_for_eof() -> ! {
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    std::process::exit(0)
}

fn bytes() -> usize {
    std::env::var("FAULT_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "exit-at-start" {
        eprintln!("fault: cannot load config, giving up");
        std::process::exit(7);
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut asked = 0u64;
    let mut initializes = 0u64;
    let mut cancelled = 0u64;
    while let Some(Ok(line)) = lines.next() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let id = msg.get("id").cloned().unwrap_or(serde_json::Value::Null);
        let method = msg.get("method").and_then(|m| m.as_str()).unwrap_or("");
        let reply = |result: serde_json::Value| {
            out(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
        };
        match method {
            "initialize" => {
                initializes += 1;
                reply(serde_json::json!({
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "verifi-stdio-fault", "version": "0.1.0"}
                }))
            }
            // `execution` and a field no client knows, for `mcp tools --format json`.
            "tools/list" => reply(serde_json::json!({"tools": [
                {"name": "echo", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "optional"},
                 "x-vendor-extension": {"owner": "fault", "rank": 3}}
            ]})),
            "ping" => reply(serde_json::json!({})),
            "server/discover" if mode == "modern" => reply(serde_json::json!({
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "verifi-stdio-fault", "version": "0.1.0"}
            })),
            "tools/call" if msg["params"]["name"] == "stats" => {
                let text = format!(
                    "initializes={initializes} pid={} cancelled={cancelled}",
                    std::process::id()
                );
                reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
            }
            "tools/call" => {
                let text = msg["params"]["arguments"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                match mode.as_str() {
                    "exit-mid-reply" => {
                        let id = id.to_string();
                        print!(
                            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"te"
                        );
                        let _ = std::io::stdout().flush();
                        let secret = std::env::var("FAULT_SECRET").unwrap_or_default();
                        eprintln!("fault: lost the database (password {secret})");
                        std::process::exit(3);
                    }
                    "garbage" => {
                        let secret = std::env::var("FAULT_SECRET").unwrap_or_default();
                        out(r#"{"level":"info","msg":"listening"}"#);
                        out("42");
                        out("INFO: a log line on stdout");
                        out(&"y".repeat(1000));
                        out(&format!(
                            "Traceback (most recent call last): login with password {secret} failed"
                        ));
                        if text == "hang" {
                            wait_for_eof();
                        }
                        reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
                    }
                    "long-line" => {
                        let n = match bytes() {
                            0 => 40 << 20,
                            n => n,
                        };
                        let chunk = vec![b'x'; 64 * 1024];
                        let mut o = std::io::stdout().lock();
                        let mut left = n;
                        while left > 0 {
                            let k = left.min(chunk.len());
                            if o.write_all(&chunk[..k]).is_err() {
                                std::process::exit(1);
                            }
                            left -= k;
                        }
                        let _ = o.flush();
                        drop(o);
                        wait_for_eof();
                    }
                    "stderr-flood" => {
                        let n = match bytes() {
                            0 => 8 << 20,
                            n => n,
                        };
                        let line = format!("{}\n", "e".repeat(1023));
                        let mut e = std::io::stderr().lock();
                        for _ in 0..n / 1024 {
                            let _ = e.write_all(line.as_bytes());
                        }
                        drop(e);
                        reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
                    }
                    // Never answers: waits for the call's `notifications/cancelled`.
                    _ if msg["params"]["name"] == "wait" => loop {
                        match lines.next() {
                            Some(Ok(l)) => {
                                let v: serde_json::Value =
                                    serde_json::from_str(&l).unwrap_or_default();
                                if v["method"] == "notifications/cancelled"
                                    && v["params"]["requestId"] == id
                                {
                                    cancelled += 1;
                                    break;
                                }
                            }
                            _ => std::process::exit(0),
                        }
                    },
                    "modern" => {
                        let meta =
                            &msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"];
                        let text = meta
                            .as_str()
                            .map_or("no _meta".to_owned(), |v| format!("{text} at {v}"));
                        reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
                    }
                    "plain" => {
                        reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
                    }
                    "env" => {
                        let mut vars: Vec<String> =
                            std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
                        vars.sort();
                        let cwd = std::env::current_dir()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default();
                        vars.push(format!("cwd={cwd}"));
                        reply(
                            serde_json::json!({"content": [{"type": "text", "text": vars.join("\n")}]}),
                        );
                    }
                    _ => {
                        // Ask the client two things (the ping with the call's own id: it is
                        // still our request, not the call's answer); a notification carries
                        // the call's id too.
                        asked += 2;
                        out(
                            &serde_json::json!({"jsonrpc":"2.0","id":id,"method":"ping"})
                                .to_string(),
                        );
                        out(&serde_json::json!({"jsonrpc":"2.0","id":9000 + asked,"method":"roots/list"}).to_string());
                        out(&serde_json::json!({"jsonrpc":"2.0","id":id,"method":"notifications/message","params":{"level":"info","data":"same id"}}).to_string());
                        // The client's two answers come before anything else we read.
                        let mut answers = Vec::new();
                        for _ in 0..2 {
                            match lines.next() {
                                Some(Ok(l)) => answers.push(l),
                                _ => std::process::exit(4),
                            }
                        }
                        let ok = answers.iter().any(|a| {
                            a.contains("\"result\":{}") && a.contains(&format!("\"id\":{id},"))
                        }) && answers.iter().any(|a| {
                            a.contains("\"error\"") && a.contains(&format!("{}", 9000 + asked))
                        });
                        let text = if ok {
                            text
                        } else {
                            format!("bad answers: {answers:?}")
                        };
                        reply(serde_json::json!({"content": [{"type": "text", "text": text}]}));
                    }
                }
            }
            _ => {
                if !id.is_null() {
                    out(&serde_json::json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"no such method"}}).to_string());
                }
            }
        }
    }
}
