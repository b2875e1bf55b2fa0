//! `mcp` flags that map onto host adapter options: the offered protocol version, an exact MCP
//! URL mounted elsewhere than `/mcp`, and full tool descriptions.

use std::process::{Command, Output};

use serde_json::Value;
use verifi_mcp_examples::kali::KaliServer;

fn mcp(args: &[&str]) -> Output {
    // Each call is bounded by the client's own --timeout-ms (set below) and the loopback box.
    Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(args)
        .env("MCP_TOKEN_STORE", "memory")
        .args(["--timeout-ms", "20000"])
        .output()
        .expect("run mcp")
}

fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn protocol_version_flag_is_the_version_offered_in_initialize() {
    // (`--protocol-version 2026-07-28` forces the 2026 era; see `era_flags_force_an_era`.)
    let s = KaliServer::start("gap-version").expect("start");
    let o = mcp(&[
        "call",
        &s.base_url(),
        "session_info",
        "--era",
        "legacy",
        "--protocol-version",
        "2025-06-18",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "--protocol-version is offered in initialize: {}",
        describe(&o)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert!(
        v["text"]
            .as_str()
            .unwrap_or("")
            .ends_with("protocolVersion: 2025-06-18"),
        "{}",
        describe(&o)
    );
}

#[test]
fn exact_url_serves_an_mcp_url_whose_path_does_not_end_in_mcp() {
    let s = KaliServer::start_at("gap-exact", "/rpc").expect("start");
    let url = format!("{}/rpc", s.base_url());
    let o = mcp(&["tools", &url, "--exact-url"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "--exact-url takes the MCP URL as given: {}",
        describe(&o)
    );
}

#[test]
fn tools_json_gives_the_full_descriptions() {
    let s = KaliServer::start("gap-describe").expect("start");
    let o = mcp(&["tools", &s.base_url(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    let tools = v["tools"].as_array().cloned().unwrap_or_default();
    assert!(!tools.is_empty(), "{}", describe(&o));
    assert!(
        tools
            .iter()
            .all(|t| t["description"].is_string() && t["inputSchema"].is_object()),
        "tools --json gives each tool's description and input schema: {}",
        describe(&o)
    );
}

#[test]
fn era_flags_force_an_era() {
    let s = KaliServer::start("gap-era").expect("start");
    let url = s.base_url();
    for (flags, want) in [
        (&["--era", "modern"][..], "protocolVersion: 2026-07-28"),
        (
            &["--protocol-version", "2026-07-28"][..],
            "protocolVersion: 2026-07-28",
        ),
        (&["--era", "legacy"][..], "protocolVersion: 2025-11-25"),
        (&[][..], "protocolVersion: 2026-07-28"),
    ] {
        let mut args = vec!["call", &url, "session_info"];
        args.extend_from_slice(flags);
        let o = mcp(&args);
        assert_eq!(o.status.code(), Some(0), "{flags:?}: {}", describe(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        assert!(
            v["text"].as_str().unwrap_or("").ends_with(want),
            "{flags:?}: {}",
            describe(&o)
        );
    }
    let o = mcp(&["call", &url, "echo", "--era", "sideways"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let o = mcp(&[
        "call",
        &url,
        "echo",
        "--era",
        "legacy",
        "--protocol-version",
        "2026-07-28",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}
