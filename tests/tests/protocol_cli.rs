//! The `mcp` command line's protocol subcommands (`resources`, `read`, `prompts`, `prompt`,
//! `ping`, and `call --raw`) against the TypeScript, Python and rmcp servers, by ENDPOINT and
//! by `--manifest FILE --slot NAME`.
//!
//! The binary is another crate's, found next to this test's executable (target/debug);
//! `cargo test --workspace` builds it. If it is missing the test fails and says what to build.

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::json;
use support::{Peer, PeerKind, json_of, peer_unavailable};

/// The most one `mcp` invocation may take.
const RUN_BOUND: Duration = Duration::from_secs(30);

/// A secret-named variable of the command line's environment (so a run secret).
const SECRET_VAR: (&str, &str) = ("PROTO_CLI_API_KEY", "sk-cli-9191wxyz");

/// Runs `mcp ARGS…` (with one secret in its environment), bounded.
fn mcp(args: &[&str]) -> Output {
    support::run_mcp(args, &[SECRET_VAR], RUN_BOUND)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn run(kind: PeerKind) {
    if peer_unavailable(kind) {
        return;
    }
    let peer = Peer::start(kind);
    let url = peer.base_url();

    // resources: every resource (rmcp pages them) and the template.
    let out = mcp(&["resources", url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    let mut uris: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    uris.sort();
    assert_eq!(uris, ["test://notes/blob", "test://notes/readme"]);
    assert_eq!(
        v["resourceTemplates"][0]["uriTemplate"],
        json!("test://echo/{text}")
    );

    // read: the contents; a secret the server echoes is redacted.
    let out = mcp(&["read", url, "test://notes/readme"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_of(&out)["contents"][0]["text"],
        json!("hello from the readme")
    );
    let secret_uri = format!("test://echo/{}", SECRET_VAR.1);
    let out = mcp(&["read", url, &secret_uri]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_of(&out)["contents"][0]["text"],
        json!("echo: [REDACTED]")
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(SECRET_VAR.1));

    // An unknown resource: exit 1, the server's refusal on stderr, with its timeline event.
    let out = mcp(&["read", url, "test://nope"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("mcp: resources/read failed: JSON-RPC error "),
        "{err}"
    );
    assert!(err.contains("event: tool_error"), "{err}");

    // prompts and prompt.
    let out = mcp(&["prompts", url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["prompts"][0]["name"], json!("review"));
    let out = mcp(&["prompt", url, "review", r#"{"topic":"dns"}"#]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_of(&out)["messages"][0]["content"]["text"],
        json!("Review the dns findings.")
    );

    // ping.
    let out = mcp(&["ping", url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], json!(true));
    assert!(v["latencyMs"].is_u64(), "{v}");

    // call --raw: the whole CallToolResult beside the flattened text.
    let out = mcp(&["call", "--raw", url, "ports"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["result"]["structuredContent"], json!({"open": [22, 80]}));
    let out = mcp(&["call", url, "ports"]);
    assert_eq!(json_of(&out).get("result"), None);
    // call --check-output: the tools are listed first and the real server's output matches.
    let out = mcp(&["call", "--check-output", url, "ports"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_of(&out)["ok"], json!(true));

    // Bad input is exit 2 with one line.
    let out = mcp(&["read", url]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("missing URI (the form is ENDPOINT URI)"),
        "{}",
        stderr(&out)
    );
    let out = mcp(&["prompt", url, "review", "[1]"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    // The same through a manifest slot.
    let dir = std::env::temp_dir().join(format!(
        "verifi-protocol-cli-{}-{kind:?}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("manifest.json");
    std::fs::write(
        &manifest,
        json!({ "slotFills": { "notes": url } }).to_string(),
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    for args in [
        vec!["ping", "--manifest", m, "--slot", "notes"],
        vec!["prompts", "--manifest", m, "--slot", "notes"],
        vec![
            "read",
            "--manifest",
            m,
            "--slot",
            "notes",
            "test://notes/blob",
        ],
    ] {
        let out = mcp(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ts_stateful() {
    run(PeerKind::TsStateful);
}
#[test]
fn py_stateful() {
    run(PeerKind::PyStateful);
}
#[test]
fn rmcp_stateful() {
    run(PeerKind::RmcpStateful);
}
#[test]
fn rmcp_json() {
    run(PeerKind::RmcpJson);
}

/// `call --check-output` against a tool whose structured content breaks its own schema: exit 1,
/// a tool error naming the path, and its timeline event.
#[test]
fn check_output_reports_a_mismatch_with_its_path() {
    use std::sync::Arc;
    use verifi_mcp_tests::hostile::{
        HostileServer, Request, Responder, Step, http_response, json_response, rpc_result,
    };
    let responder: Responder = Arc::new(|req: &Request| match req.method().as_deref() {
        Some("initialize") => json_response(&rpc_result(
            req,
            r#"{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"0"}}"#,
        )),
        Some(m) if m.starts_with("notifications/") => http_response(202, &[], b""),
        Some("tools/list") => json_response(&rpc_result(
            req,
            r#"{"tools":[{"name":"ports","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"open":{"type":"array","items":{"type":"integer"}}}}}]}"#,
        )),
        Some("tools/call") => json_response(&rpc_result(
            req,
            r#"{"content":[{"type":"text","text":"scan done"}],"structuredContent":{"open":["ssh"]}}"#,
        )),
        _ => http_response(400, &[], b"unexpected request"),
    });
    let steps: Vec<Step> = (0..20)
        .flat_map(|_| [Step::ReadRequest, Step::SendWith(responder.clone())])
        .collect();
    let server = HostileServer::every_connection(steps).unwrap();
    let url = server.base_url();
    let out = mcp(&["call", "--check-output", &url, "ports"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["isError"], json!(true));
    assert_eq!(
        v["error"],
        json!(
            "structured output check failed: structuredContent does not match the tool's \
             outputSchema at /open/0: \"ssh\" is not of type \"integer\""
        )
    );
    assert!(
        stderr(&out).contains("event: tool_error"),
        "{}",
        stderr(&out)
    );
    // Without the flag nothing was listed, so nothing is checked.
    let out = mcp(&["call", &url, "ports"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
