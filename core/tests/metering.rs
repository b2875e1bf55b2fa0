//! The metering and timeline rules as plain input and output: an op is fed bytes and closes,
//! its events go to a [`Metering`], and the ledger records and timeline events are read back.
//! No executor, no `Net`, no clock but a number.
// Most tests here speak the handshake era, the probe, tasks or input (each gated on its
// feature); in an edge profile without them their helpers go unused.
#![cfg_attr(
    not(all(
        feature = "era-2025",
        feature = "probe",
        feature = "tasks",
        feature = "input"
    )),
    allow(dead_code, unused_imports)
)]

// With `std` the core's own `VecBuf` (the host's in-place reply path); without it, the tests'.
#[cfg(feature = "std")]
use verifi_mcp_core::buf::VecBuf;
#[cfg(not(feature = "std"))]
#[path = "support/vec_buf.rs"]
mod vec_buf;
#[cfg(not(feature = "std"))]
use vec_buf::VecBuf;
use verifi_mcp_core::harness::events::{Timeline, TimelineEvent};
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::harness::meter::{Ledger, LedgerRecord};
use verifi_mcp_core::machine::{
    Action, CallBuffers, Event, Metering, Op, SlotConfig, SlotState, Tasking,
};
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::era::EraSetting;
use verifi_mcp_core::wire::failure::{ConnectError, ConnectErrorKind};

#[derive(Default)]
struct Records(Vec<LedgerRecord>);
impl Ledger for Records {
    fn record(&mut self, r: LedgerRecord) {
        self.0.push(r);
    }
}

#[derive(Default)]
struct Events(Vec<String>);
impl Timeline for Events {
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        self.0.push(format!("{e:?}"));
    }
}

fn cfg() -> SlotConfig<'static> {
    let mut c = SlotConfig::new(
        "kali",
        Endpoint::parse_base("http://127.0.0.1:8000").unwrap(),
        "primary-box",
    );
    c.timeout_ms = 10_000;
    c.era = EraSetting::Legacy;
    c.fallback = Some(Endpoint::parse_base("http://127.0.0.1:9000").unwrap());
    c.fallback_label = "fallback-box";
    c
}

fn json(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The server's answer to one request: the handshake, then `call` for the tool call.
fn answer(req: &str, call: &str) -> Vec<u8> {
    let id = req
        .split("\"id\":")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or("0")
        .to_string();
    if req.contains("\"initialize\"") {
        json(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18"}}}}"#
        ))
    } else if req.contains("notifications/initialized") {
        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec()
    } else {
        json(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{call}"}}]{}}}}}"#,
            if call.starts_with("boom") {
                r#","isError":true"#
            } else {
                ""
            }
        ))
    }
}

/// Runs one call of `echo` whose primary refuses connections when `primary_down`, its events
/// forwarded to a metering; `drop_mid_attempt` drops the metering (as a dropped future
/// does) while the second attempt runs. Returns the ledger and the timeline.
fn run(primary_down: bool, call: &str, drop_mid_attempt: bool) -> (Vec<LedgerRecord>, Vec<String>) {
    let c = cfg();
    let mut slot = SlotState::new(c.version, true);
    let secrets: [&str; 0] = [];
    let (mut head, mut read) = (vec![0u8; 4096], vec![0u8; 1024]);
    let mut bufs = CallBuffers {
        request: VecBuf::with_limit(8192),
        head: &mut head,
        read: &mut read,
        reply: VecBuf::with_limit(65536),
        text: VecBuf::with_limit(65536),
        error: VecBuf::with_limit(1024),
        raw: VecBuf::with_limit(0),
    };
    let (mut ledger, mut timeline) = (Records::default(), Events::default());
    {
        let mut meter = Metering::call(&c, "echo", &Tasking::Wait, (&mut ledger, &mut timeline), 0);
        let settled = {
            let mut op = Op::tool_call(&c, &mut bufs, &secrets, ("echo", None), Tasking::Wait);
            let (mut now, mut pending) = (0u64, Vec::new());
            meter.begin();
            loop {
                let action = op.poll(&mut slot, now);
                match action {
                    Action::Connect { target, .. } => {
                        if primary_down && target == Target::Primary {
                            op.handle_connect_failed(ConnectError::new(
                                ConnectErrorKind::Refused,
                                "",
                            ));
                        } else {
                            op.handle_connected(false);
                        }
                    }
                    Action::Transmit => {
                        pending = answer(&String::from_utf8_lossy(op.transmit()), call);
                        op.handle_sent(now, true);
                    }
                    Action::Receive => {
                        let n = pending.len().min(op.read_buf().len());
                        op.read_buf()[..n].copy_from_slice(&pending[..n]);
                        pending.drain(..n);
                        op.handle_read(now, n);
                    }
                    Action::Sleep { .. } => now = op.timeout(),
                    _ => {}
                }
                if matches!(action, Action::Report | Action::TaskStarted | Action::Done) {
                    meter.end();
                    while let Some(event) = op.poll_event() {
                        meter.forward(event);
                    }
                    if action == Action::Done {
                        break;
                    }
                    if drop_mid_attempt {
                        // The caller drops the call while its next attempt runs.
                        meter.begin();
                        drop(op);
                        drop(meter);
                        return (ledger.0, timeline.0);
                    }
                    meter.begin();
                }
            }
            meter.settle(&mut op)
        };
        meter.forward_slot(&mut slot);
        let out = meter.finish(&settled, (&secrets, false), &mut bufs, 7);
        assert_eq!(out.latency_ms, 7);
    }
    (ledger.0, timeline.0)
}

#[cfg(feature = "era-2025")]
#[test]
fn an_answered_call_is_one_record_of_its_bytes_and_no_event() {
    let (ledger, timeline) = run(false, "hello", false);
    assert_eq!(ledger, [LedgerRecord::answered(5)]);
    assert!(timeline.is_empty(), "{timeline:?}");
}

#[cfg(feature = "era-2025")]
#[test]
fn a_failover_meters_each_attempt_and_tells_the_fallback_once() {
    let (ledger, timeline) = run(true, "hello", false);
    assert_eq!(
        ledger,
        [LedgerRecord::transport_failure(), LedgerRecord::answered(5)]
    );
    assert_eq!(timeline.len(), 1, "{timeline:?}");
    assert!(timeline[0].starts_with("FallbackUsed"), "{timeline:?}");
    assert!(timeline[0].contains("fallback-box"), "{timeline:?}");
}

#[cfg(feature = "era-2025")]
#[test]
fn a_tool_error_is_metered_as_answered_and_is_a_tool_error_event() {
    let (ledger, timeline) = run(false, "boom: no such host", false);
    assert_eq!(ledger, [LedgerRecord::answered(18)]);
    assert_eq!(timeline.len(), 1, "{timeline:?}");
    assert!(timeline[0].starts_with("ToolError"), "{timeline:?}");
    assert!(timeline[0].contains("boom: no such host"), "{timeline:?}");
}

#[cfg(feature = "era-2025")]
#[test]
fn a_call_dropped_mid_attempt_is_still_metered_and_said_cancelled() {
    let (ledger, timeline) = run(true, "hello", true);
    assert_eq!(
        ledger,
        [
            LedgerRecord::transport_failure(),
            LedgerRecord::transport_failure()
        ]
    );
    // The fallback never served (its attempt did not end): only the cancel is told.
    assert_eq!(timeline.len(), 1, "{timeline:?}");
    assert!(timeline[0].starts_with("ToolError"), "{timeline:?}");
    assert!(timeline[0].contains("cancelled"), "{timeline:?}");
}

#[cfg(feature = "era-2025")]
#[test]
fn a_fresh_slot_has_no_news() {
    let mut slot = SlotState::new(cfg().version, true);
    assert_eq!(slot.poll_event(), None::<Event<'static>>);
}
