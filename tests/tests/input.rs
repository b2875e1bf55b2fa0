//! A server that asks the user for input (elicitation), answered without a person by the
//! slot's policy (`Options::elicitation`, `mcp --elicitation`), against real servers: the
//! Python SDK 2.3 (`confirm_scan`, which elicits through a resolver: `input_required` rounds in
//! the 2026 era, `elicitation/create` on the call's stream in the old one), also over stdio.
//! The official `everything` server's elicitation is in `everything.rs`.

mod support;

use serde_json::json;
use support::{CHECK_BOUND, Peer, PeerKind, context, context_with, mcp_json, run_bounded};
use verifi_mcp_host::{ElicitAnswer, Elicitation, EraSetting, OnElicit, Options};

#[test]
fn the_python_server_elicits_in_both_eras_and_the_policy_answers() {
    let peer = Peer::start(PeerKind::PyStateful);
    for era in [EraSetting::Auto, EraSetting::Legacy] {
        for (policy, want) in [
            (Elicitation::AcceptDefaults, "scanning 10.0.0.1:443 ok=True"),
            (
                Elicitation::Decline,
                "not scanning 10.0.0.1: the user chose decline",
            ),
            (
                Elicitation::Cancel,
                "not scanning 10.0.0.1: the user chose cancel",
            ),
        ] {
            let opts = Options::default().era(era).elicitation(Some(policy));
            let ctx = context(peer.base_url(), "run-elicit", opts);
            let kali = ctx.mcp("kali").unwrap();
            let r = run_bounded(
                CHECK_BOUND,
                kali.call("confirm_scan", json!({"host": "10.0.0.1"})),
            );
            assert!(r.ok(), "{era:?} {policy:?}: {r:?}");
            assert_eq!(r.text, want, "{era:?} {policy:?}");
            // The tool ran to its result once: one call on the ledger.
            assert_eq!(ctx.ledger().tool_calls, 1, "{era:?} {policy:?}");
        }
    }
    // No handler: none declared, and the server says it needs one; one call, no success.
    let ctx = context(peer.base_url(), "run-no-elicit", Options::default());
    let kali = ctx.mcp("kali").unwrap();
    let r = run_bounded(
        CHECK_BOUND,
        kali.call("confirm_scan", json!({"host": "10.0.0.1"})),
    );
    assert!(!r.ok() && !r.is_error(), "{r:?}");
    assert!(r.error().unwrap_or("").contains("elicitation"), "{r:?}");

    // The command line.
    let url = peer.base_url().to_owned();
    let (code, v) = mcp_json(&[
        "call",
        &url,
        "confirm_scan",
        "host=10.0.0.1",
        "--elicitation",
        "accept-defaults",
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["text"], "scanning 10.0.0.1:443 ok=True");
}

/// The harness's own handler: it sees the server's question and its answer is what the tool
/// gets, in both eras, before any policy.
#[test]
fn the_harnesss_handler_answers_the_python_server_in_both_eras() {
    let peer = Peer::start(PeerKind::PyStateful);
    let handler = OnElicit::new(|params| {
        assert_eq!(params["message"], "Scan which port?");
        assert!(params["requestedSchema"]["properties"]["port"].is_object());
        ElicitAnswer::Accept(json!({"port": 8443, "ok": false}))
    });
    for era in [EraSetting::Auto, EraSetting::Legacy] {
        let opts = Options::default()
            .era(era)
            .elicitation(Some(Elicitation::Decline))
            .on_elicit(Some(handler.clone()));
        let ctx = context(peer.base_url(), "run-handler", opts);
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(
            CHECK_BOUND,
            kali.call("confirm_scan", json!({"host": "10.0.0.1"})),
        );
        assert!(r.ok(), "{era:?}: {r:?}");
        assert_eq!(r.text, "scanning 10.0.0.1:8443 ok=False", "{era:?}");
    }
}

/// A stdio server's elicitation (its requests are answered by the adapter that reads its
/// lines) follows the same policy.
#[test]
fn a_stdio_servers_elicitation_follows_the_policy() {
    let root = support::workspace_root();
    let python = std::env::var_os("VERIFI_PEERS_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/peers/venv"))
        .join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/peers.sh",
        python.display()
    );
    let argv = [
        python.display().to_string(),
        root.join("tests/peers/py/server.py").display().to_string(),
        "stdio".into(),
    ];
    // The old era sends `elicitation/create` on stdout (the adapter answers it); the 2026 era
    // answers `input_required` rounds in the machine.
    let accepted = "scanning 10.0.0.1:443 ok=True";
    let cancelled = "not scanning 10.0.0.1: the user chose cancel";
    for (era, policy, want) in [
        (EraSetting::Legacy, Elicitation::AcceptDefaults, accepted),
        (EraSetting::Legacy, Elicitation::Cancel, cancelled),
        (EraSetting::Auto, Elicitation::AcceptDefaults, accepted),
    ] {
        let opts = Options::default()
            .timeout_ms(60_000)
            .era(era)
            .elicitation(Some(policy));
        let ctx = context_with(
            json!({"slotFills": {"kali": {"command": argv}}}),
            "run-stdio-elicit",
            opts,
        );
        let kali = ctx.mcp("kali").unwrap();
        let r = run_bounded(
            std::time::Duration::from_secs(90),
            kali.call("confirm_scan", json!({"host": "10.0.0.1"})),
        );
        assert!(r.ok(), "{era:?} {policy:?}: {r:?}");
        assert_eq!(r.text, want, "{era:?} {policy:?}");
        run_bounded(CHECK_BOUND, kali.close());
    }
}
