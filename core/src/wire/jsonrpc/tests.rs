//! (Compiled only under `#[cfg(test)]`: see `mod tests;` in `jsonrpc.rs`.)
//! Encoder bytes, and decoding of real server replies from `core/tests/data/` (taken from
//! the shared wire captures; `synthetic-*` files are hand-written where no capture has the case).

use std::string::String;
use std::vec::Vec;

use super::*;
use crate::buf::{Buf, SliceBuf};
use crate::wire::json::JsonLimits;

macro_rules! data {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/", $name))
    };
}

fn parse(s: &[u8]) -> Value<'_> {
    Value::parse(s, JsonLimits::default()).unwrap()
}

fn encode(f: impl FnOnce(&mut SliceBuf<'_>) -> Result<(), Overflow>) -> String {
    let mut storage = [0u8; 1024];
    let mut b = SliceBuf::new(&mut storage);
    f(&mut b).unwrap();
    String::from_utf8(b.bytes().to_vec()).unwrap()
}

fn text(s: JsonStr<'_>) -> String {
    let mut storage = [0u8; 1024];
    let mut b = SliceBuf::new(&mut storage);
    s.unescape_into(&mut b).unwrap();
    String::from_utf8(b.bytes().to_vec()).unwrap()
}

#[test]
fn encodes_exact_requests() {
    assert_eq!(
        encode(|o| encode_initialize(o, 1, ProtocolVersion::SEED)),
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"verifi-harness-sdk","version":"1.0.0"}}}"#
    );
    assert_eq!(
        encode(|o| encode_initialize(o, 18446744073709551615, ProtocolVersion::V2025_11_25)),
        r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"verifi-harness-sdk","version":"1.0.0"}}}"#
    );
    assert_eq!(
        encode(|o| encode_initialized(o)),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    assert_eq!(
        encode(|o| encode_tools_list(o, 2, None)),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
    );
    let page = parse(br#"{"tools":[],"nextCursor":"p\u0032\/x\"y"}"#);
    // The driver keeps the cursor unescaped between pages and sends it back canonically.
    let next = parse_tools_page(page).unwrap().next_cursor.unwrap();
    let mut storage = [0u8; 64];
    let mut b = SliceBuf::new(&mut storage);
    next.unescape_into(&mut b).unwrap();
    let kept = String::from(core::str::from_utf8(b.bytes()).unwrap());
    assert_eq!(
        encode(|o| encode_tools_list(o, 3, Some(&kept))),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"p2/x\"y"}}"#
    );
    let args =
        parse(b" { \"command\" : \"ls -la\" , \"timeout\" : 30 , \"workspace\" : \"run-042\" } ");
    assert_eq!(
        encode(|o| encode_tools_call(o, 4, "run_command", Some(args), None)),
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"ls -la","timeout":30,"workspace":"run-042"}}}"#
    );
    assert_eq!(
        encode(|o| encode_tools_call(o, 9, "slow", Some(parse(br#"{"ms":400}"#)), Some(7))),
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":400},"_meta":{"progressToken":7}}}"#
    );
    assert_eq!(
        encode(|o| encode_tools_call(o, 5, "we\"ird\n", None, None)),
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"we\"ird\n","arguments":{}}}"#
    );
    assert_eq!(
        encode(|o| encode_cancelled(o, 9, "tool call timed out")),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"tool call timed out"}}"#
    );
    // An encoded request with escapes is valid JSON with the same name.
    let s = encode(|o| encode_tools_call(o, 5, "\u{1}é", Some(args), Some(0)));
    let back: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(back["params"]["name"], "\u{1}é");
}

#[test]
fn encoders_report_overflow_at_every_cap() {
    let args = parse(br#"{"a":[1,2,"x"]}"#);
    let full = encode(|o| encode_tools_call(o, 4, "echo", Some(args), Some(3)));
    for cap in 0..full.len() {
        let mut storage = std::vec![0u8; cap];
        let mut b = SliceBuf::new(&mut storage);
        assert!(encode_tools_call(&mut b, 4, "echo", Some(args), Some(3)).is_err());
    }
    let mut storage = std::vec![0u8; full.len()];
    let mut b = SliceBuf::new(&mut storage);
    assert!(encode_tools_call(&mut b, 4, "echo", Some(args), Some(3)).is_ok());
}

#[test]
fn protocol_versions() {
    for v in ProtocolVersion::ALL {
        assert_eq!(ProtocolVersion::parse(v.as_str().as_bytes()), Some(v));
    }
    // Issue 27: the newest of the handshake era is offered by default; the reference SDK's stays.
    assert_eq!(ProtocolVersion::DEFAULT.as_str(), "2025-11-25");
    assert_eq!(ProtocolVersion::SEED.as_str(), "2024-11-05");
    assert_eq!(ProtocolVersion::parse(b"2026-07-28"), None);
    assert_eq!(ProtocolVersion::parse(b"2024-11-05 "), None);
    assert!(!ProtocolVersion::V2024_11_05.sends_version_header());
    assert!(!ProtocolVersion::V2025_03_26.sends_version_header());
    assert!(ProtocolVersion::V2025_06_18.sends_version_header());
    assert!(ProtocolVersion::V2025_11_25.sends_version_header());
}

#[test]
fn initialize_results_from_each_sdk() {
    for (bytes, id, name) in [
        (&data!("ts-initialize.json")[..], 1, "peer-ts"),
        (data!("py-initialize.json"), 1, "peer-py"),
        (data!("rmcp-initialize.json"), 1, "peer-rmcp"),
    ] {
        let Found::Match(Outcome::Result(r)) = find_response(parse(bytes), id).unwrap() else {
            panic!("no result for {name}");
        };
        let init = parse_initialize_result(r).unwrap();
        assert_eq!(
            ProtocolVersion::parse(init.protocol_version.raw()),
            Some(ProtocolVersion::V2025_11_25)
        );
        assert!(init.server_name.unwrap().eq_str(name));
        assert!(init.server_version.unwrap().eq_str("0.1.0"));
        assert_eq!(find_response(parse(bytes), id + 1).unwrap(), Found::NoMatch);
    }
    assert_eq!(
        parse_initialize_result(parse(br#"{"serverInfo":{}}"#)),
        Err(RpcDecodeError::BadField("protocolVersion"))
    );
    assert_eq!(
        parse_initialize_result(parse(b"[]")),
        Err(RpcDecodeError::NotAnObject)
    );
}

#[test]
fn tools_pages_from_each_sdk() {
    for bytes in [
        &data!("ts-tools-list.json")[..],
        data!("py-tools-list.json"),
        data!("rmcp-tools-list.json"),
    ] {
        let Found::Match(Outcome::Result(r)) = find_response(parse(bytes), 2).unwrap() else {
            panic!("no tools/list result");
        };
        let page = parse_tools_page(r).unwrap();
        assert!(page.next_cursor.is_none());
        let mut names: Vec<String> = page.tools.map(|t| text(tool_name(t).unwrap())).collect();
        names.sort();
        assert_eq!(
            names,
            ["big", "echo", "fail", "mixed", "run_command", "slow"]
        );
    }
    let page = parse_tools_page(parse(
        br#"{"tools":[{"name":"a"},{"x":1}],"nextCursor":null}"#,
    ))
    .unwrap();
    assert!(page.next_cursor.is_none());
    let names: Vec<_> = page.tools.map(tool_name).collect();
    assert!(names[0].unwrap().eq_str("a"));
    assert!(names[1].is_none());
    assert_eq!(
        parse_tools_page(parse(br#"{"tools":{}}"#)).unwrap_err(),
        RpcDecodeError::BadField("tools")
    );
    assert_eq!(
        parse_tools_page(parse(br#"{"tools":[],"nextCursor":5}"#)).unwrap_err(),
        RpcDecodeError::BadField("nextCursor")
    );
}

#[test]
fn unknown_tool_as_each_sdk_reports_it() {
    // rmcp: a JSON-RPC error.
    let Found::Match(Outcome::Error(e)) =
        find_response(parse(data!("rmcp-call-unknown-tool.json")), 10).unwrap()
    else {
        panic!("rmcp should answer with an error");
    };
    assert_eq!(e.code, -32602);
    assert!(e.message.eq_str("tool not found"));
    assert!(is_unknown_tool(&e));
    // TypeScript 1.32 and Python: a tool-level error result, not a JSON-RPC error.
    for bytes in [
        &data!("ts-call-unknown-tool.json")[..],
        data!("py-call-unknown-tool.json"),
    ] {
        let Found::Match(Outcome::Result(r)) = find_response(parse(bytes), 10).unwrap() else {
            panic!("expected a result");
        };
        assert_eq!(r.get("isError").unwrap().as_bool(), Some(true));
    }
    let err = |code: i64, msg: &'static [u8]| {
        let v = Value::parse(msg, JsonLimits::default()).unwrap();
        RpcError {
            code,
            message: v.as_str().unwrap(),
            data: None,
        }
    };
    assert!(is_unknown_tool(&err(-32601, br#""Method not found""#)));
    assert!(is_unknown_tool(&err(
        -32602,
        br#""MCP error -32602: Tool no_such_tool not found""#
    )));
    assert!(is_unknown_tool(&err(
        -32602,
        br#""Unknown tool: no_such_tool""#
    )));
    assert!(is_unknown_tool(&err(-32602, br#""UNKNOWN TOOL""#)));
    assert!(!is_unknown_tool(&err(
        -32602,
        br#""Invalid arguments: text is required""#
    )));
    assert!(!is_unknown_tool(&err(-32602, br#""resource not found""#)));
    assert!(!is_unknown_tool(&err(-32000, br#""Tool not found""#)));
    assert!(!is_unknown_tool(&err(-32603, br#""unknown tool""#)));
}

#[test]
fn progress_notifications_from_each_sdk() {
    for (prefix, bytes) in [
        ("ts", &data!("ts-call-slow-progress-1.json")[..]),
        ("py", data!("py-call-slow-progress-1.json")),
        ("rmcp", data!("rmcp-call-slow-progress-1.json")),
    ] {
        let v = parse(bytes);
        assert_eq!(find_response(v, 9).unwrap(), Found::NoMatch, "{prefix}");
        let m = decode_message(v).unwrap();
        let p = as_progress(&m).unwrap();
        assert!(p.token.as_str().unwrap().eq_str("tok-1"));
        // TypeScript/Python send 2, rmcp 2.0: kept as written.
        assert!(matches!(p.progress.raw(), b"2" | b"2.0"), "{prefix}");
        assert!(matches!(p.total.unwrap().raw(), b"4" | b"4.0"));
        assert!(p.message.unwrap().eq_str("step 2/4"));
    }
    for (bytes, id) in [
        (&data!("ts-call-slow-progress-4.json")[..], 9),
        (data!("py-call-slow-progress-4.json"), 9),
        (data!("rmcp-call-slow-progress-4.json"), 9),
    ] {
        let m = decode_message(parse(bytes)).unwrap();
        assert!(as_progress(&m).is_none());
        assert!(matches!(
            find_response(parse(bytes), id).unwrap(),
            Found::Match(Outcome::Result(_))
        ));
    }
    let m = decode_message(parse(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3}}"#,
    ))
    .unwrap();
    assert!(as_progress(&m).is_none()); // progress is required
}

#[test]
fn server_requests_and_errors() {
    let m = decode_message(parse(data!("synthetic-server-request.json"))).unwrap();
    let Message::Request {
        id: Id::String(id),
        method,
        params,
    } = m
    else {
        panic!("{m:?}");
    };
    assert!(id.eq_str("srv-7"));
    assert!(method.eq_str("roots/list"));
    assert!(params.is_some());
    assert_eq!(
        find_response(parse(data!("synthetic-server-request.json")), 7).unwrap(),
        Found::NoMatch
    );
    let m = decode_message(parse(data!("ts-error-no-session.json"))).unwrap();
    let Message::Response {
        id: Id::Null,
        outcome: Outcome::Error(e),
    } = m
    else {
        panic!("{m:?}");
    };
    assert_eq!(e.code, -32000);
    assert!(text(e.message).starts_with("Bad Request"));
    // A response with no id member at all (seen from a stateless server).
    let m = decode_message(parse(
        br#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"no","data":{"x":1}}}"#,
    ))
    .unwrap();
    let Message::Response {
        id: Id::Null,
        outcome: Outcome::Error(e),
    } = m
    else {
        panic!("{m:?}");
    };
    assert_eq!(e.data.unwrap().raw(), br#"{"x":1}"#);
}

#[test]
fn ids_match_by_number_only() {
    let num = parse(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
    assert!(matches!(
        find_response(num, 7).unwrap(),
        Found::Match(Outcome::Result(_))
    ));
    assert_eq!(find_response(num, 8).unwrap(), Found::NoMatch);
    let string = parse(br#"{"jsonrpc":"2.0","id":"7","result":{}}"#);
    assert_eq!(find_response(string, 7).unwrap(), Found::NoMatch);
    let Message::Response {
        id: Id::String(s), ..
    } = decode_message(string).unwrap()
    else {
        panic!()
    };
    assert!(s.eq_str("7"));
    for bad in [
        &br#"{"jsonrpc":"2.0","id":true,"result":{}}"#[..],
        br#"{"jsonrpc":"2.0","id":[7],"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":{"n":7},"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":false,"method":"ping"}"#,
    ] {
        assert_eq!(
            find_response(parse(bad), 7).unwrap_err(),
            RpcDecodeError::BadId
        );
    }
    // Fractional or negative numbers never equal a request id we sent.
    assert_eq!(
        find_response(parse(br#"{"jsonrpc":"2.0","id":7.0,"result":{}}"#), 7).unwrap(),
        Found::NoMatch
    );
    assert_eq!(
        find_response(parse(br#"{"jsonrpc":"2.0","id":-7,"result":{}}"#), 7).unwrap(),
        Found::NoMatch
    );
}

#[test]
fn batches() {
    let batch = parse(data!("ts-json-batch-ping.json"));
    assert!(matches!(
        find_response(batch, 20).unwrap(),
        Found::Match(Outcome::Result(_))
    ));
    assert!(matches!(
        find_response(batch, 19).unwrap(),
        Found::Match(Outcome::Result(_))
    ));
    assert_eq!(find_response(batch, 21).unwrap(), Found::NoMatch);
    assert_eq!(
        find_response(parse(b"[]"), 1).unwrap_err(),
        RpcDecodeError::EmptyBatch
    );
    let mixed = parse(
        br#"[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},
             {"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"tool not found"}}]"#,
    );
    let Found::Match(Outcome::Error(e)) = find_response(mixed, 3).unwrap() else {
        panic!()
    };
    assert!(is_unknown_tool(&e));
    assert_eq!(
        find_response(parse(br#"[{"jsonrpc":"2.0","id":1,"result":{}}, 5]"#), 2).unwrap_err(),
        RpcDecodeError::NotAnObject
    );
    // Python rejects batches with a JSON-RPC error whose id is null.
    assert_eq!(
        find_response(parse(data!("py-batch-rejected.json")), 19).unwrap(),
        Found::NoMatch
    );
}

#[test]
fn malformed_messages_are_typed_errors() {
    for (src, want) in [
        (&b"5"[..], RpcDecodeError::NotAnObject),
        (br#"{"id":1,"result":{}}"#, RpcDecodeError::BadVersion),
        (
            br#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            RpcDecodeError::BadVersion,
        ),
        (
            br#"{"jsonrpc":2.0,"id":1,"result":{}}"#,
            RpcDecodeError::BadVersion,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1}"#,
            RpcDecodeError::NeitherResultNorError,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}"#,
            RpcDecodeError::BothResultAndError,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":""}}"#,
            RpcDecodeError::BadError,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":""}}"#,
            RpcDecodeError::BadError,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
            RpcDecodeError::BadError,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
            RpcDecodeError::BadError,
        ),
        (
            br#"{"jsonrpc":"2.0","method":5}"#,
            RpcDecodeError::BadMethod,
        ),
    ] {
        assert_eq!(
            decode_message(parse(src)).unwrap_err(),
            want,
            "{}",
            String::from_utf8_lossy(src)
        );
    }
    // Escaped member names are still recognised.
    let m = decode_message(parse(br#"{"json\u0072pc":"2.0","\u0069d":1,"result":1}"#)).unwrap();
    assert!(matches!(
        m,
        Message::Response {
            id: Id::Number(_),
            ..
        }
    ));
    let shown = std::format!("{}", RpcDecodeError::BadField("tools"));
    assert_eq!(
        shown,
        "result member \"tools\" is missing or has the wrong type"
    );
}

#[test]
fn encodes_the_other_methods_exactly() {
    assert_eq!(
        encode(|o| encode_list(o, 7, ListMethod::Resources, None)),
        r#"{"jsonrpc":"2.0","id":7,"method":"resources/list"}"#
    );
    assert_eq!(
        encode(|o| encode_list(o, 8, ListMethod::ResourceTemplates, Some("c\"1"))),
        r#"{"jsonrpc":"2.0","id":8,"method":"resources/templates/list","params":{"cursor":"c\"1"}}"#
    );
    assert_eq!(
        encode(|o| encode_list(o, 9, ListMethod::Prompts, Some("p2"))),
        r#"{"jsonrpc":"2.0","id":9,"method":"prompts/list","params":{"cursor":"p2"}}"#
    );
    assert_eq!(
        encode(|o| encode_request(
            o,
            10,
            &Request::ResourcesRead {
                uri: "file:///a b\"c"
            }
        )),
        r#"{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"file:///a b\"c"}}"#
    );
    let args = parse(br#" { "topic" : "dns" } "#);
    assert_eq!(
        encode(|o| encode_request(
            o,
            11,
            &Request::PromptsGet {
                name: "review",
                arguments: Some(args)
            }
        )),
        r#"{"jsonrpc":"2.0","id":11,"method":"prompts/get","params":{"name":"review","arguments":{"topic":"dns"}}}"#
    );
    assert_eq!(
        encode(|o| encode_request(
            o,
            12,
            &Request::PromptsGet {
                name: "plain",
                arguments: None
            }
        )),
        r#"{"jsonrpc":"2.0","id":12,"method":"prompts/get","params":{"name":"plain"}}"#
    );
    assert_eq!(
        encode(|o| encode_request(o, 13, &Request::Ping)),
        r#"{"jsonrpc":"2.0","id":13,"method":"ping"}"#
    );
    // Every cap short of the whole request is an overflow, never a panic.
    let full = encode(|o| encode_request(o, 10, &Request::ResourcesRead { uri: "u" }));
    for cap in 0..full.len() {
        let mut storage = [0u8; 128];
        let mut b = SliceBuf::new(&mut storage[..cap]);
        assert!(encode_request(&mut b, 10, &Request::ResourcesRead { uri: "u" }).is_err());
    }
}

#[test]
fn pages_and_results_of_the_other_methods() {
    let page = parse_page(
        parse(br#"{"resources":[{"uri":"a"},{"uri":"b"}],"nextCursor":"n"}"#),
        ListMethod::Resources,
    )
    .unwrap();
    assert_eq!(page.items.count(), 2);
    assert_eq!(text(page.next_cursor.unwrap()), "n");
    let last = parse_page(
        parse(br#"{"resourceTemplates":[],"nextCursor":null}"#),
        ListMethod::ResourceTemplates,
    )
    .unwrap();
    assert!(last.next_cursor.is_none());
    // The key is the method's own: a prompts page is not a resources page.
    assert_eq!(
        parse_page(parse(br#"{"prompts":[]}"#), ListMethod::Resources).unwrap_err(),
        RpcDecodeError::BadField("resources")
    );
    assert_eq!(
        parse_page(parse(b"[]"), ListMethod::Prompts).unwrap_err(),
        RpcDecodeError::NotAnObject
    );
    let read = Request::ResourcesRead { uri: "a" };
    assert!(check_request_result(&read, parse(br#"{"contents":[]}"#)).is_ok());
    assert_eq!(
        check_request_result(&read, parse(br#"{"contents":{}}"#)).unwrap_err(),
        RpcDecodeError::BadField("contents")
    );
    let get = Request::PromptsGet {
        name: "p",
        arguments: None,
    };
    assert_eq!(
        check_request_result(&get, parse(br#"{"contents":[]}"#)).unwrap_err(),
        RpcDecodeError::BadField("messages")
    );
    assert!(check_request_result(&Request::Ping, parse(b"{}")).is_ok());
    assert_eq!(
        check_request_result(&Request::Ping, parse(b"null")).unwrap_err(),
        RpcDecodeError::NotAnObject
    );
    assert!(Request::ResourcesRead { uri: "" }.bears_content());
    assert!(!Request::Ping.bears_content());
}
