//! Flattening a `tools/call` result into the one text a harness sees, as the reference SDK
//! did (`docs/design.md#reading-a-reply`).
//!
//! Owns: the rule `text` block → its text, any other block → its `JSON.stringify` (compact
//! JSON), blocks joined with `\n`; `isError`; the `structuredContent` fallback.
//! Does not own: redaction or metering (the [`Sink`] given here is usually the redactor's
//! input), nor finding the result in a reply (`wire::jsonrpc`).

use core::fmt;

use crate::buf::{Overflow, Sink};
use crate::wire::json::{Kind, Value, Walk};

/// What [`flatten`] found besides the text it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Flattened {
    /// `isError: true` was set: the tool itself reported a failure.
    pub is_error: bool,
    /// Blocks written: the length of `content`, or 1 for the `structuredContent` fallback,
    /// or 0 when the result had neither.
    pub blocks: usize,
}

/// Why a result could not be flattened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ContentError {
    /// The text did not fit the output buffer.
    Overflow(Overflow),
    /// `result.content` is present but not an array (nor `null`).
    ContentNotArray,
    /// The `tools/call` result is not a JSON object.
    ResultNotObject,
}

impl From<Overflow> for ContentError {
    fn from(o: Overflow) -> Self {
        ContentError::Overflow(o)
    }
}

impl fmt::Display for ContentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::buf::fmt_words(self, f)
    }
}

impl crate::buf::Words for ContentError {
    fn words(&self, out: &mut dyn crate::buf::Sink) -> Result<(), crate::buf::Overflow> {
        match self {
            ContentError::Overflow(o) => {
                out.put_str("tool result text too large: ")?;
                o.words(out)
            }
            ContentError::ContentNotArray => {
                out.put_str("tools/call result \"content\" is not an array")
            }
            ContentError::ResultNotObject => out.put_str("tools/call result is not a JSON object"),
        }
    }
}

impl core::error::Error for ContentError {}

/// result.content: text blocks give their unescaped text, any other block its compact JSON,
/// joined with "\n"; `isError: true` sets is_error. No content but `structuredContent` => its
/// compact JSON. Writes into `out` (the redactor sits behind it).
///
/// Details: a block counts as text when it is an object whose `type` is `"text"` and whose
/// `text` is a string; anything else (including a malformed text block) is written as compact
/// JSON, which is exactly `JSON.stringify` of it except that numbers keep their source form
/// (see [`Value::write_compact`]). `content: null` is treated as absent. On overflow, `out`
/// may hold a prefix of the text.
///
/// On the host the result is walked once (the first member of each name counts, as
/// [`Value::get`] finds it), so a big text is crossed once, not once per lookup; the edge
/// looks each member up (less code). Both write the same bytes.
pub fn flatten(result: Value<'_>, out: &mut impl Sink) -> Result<Flattened, ContentError> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return flatten_by_lookup(result, out);
    }
    if result.kind() != Kind::Object {
        return Err(ContentError::ResultNotObject);
    }
    // One walk over the members (the first of each name counts, as `Value::get` would find
    // it), writing the content blocks as they are met: a big text is crossed once here, not
    // once per lookup.
    let mut is_error = false;
    let mut content_seen = false;
    let mut content_written = false;
    let mut structured = None;
    let mut seen_is_error = false;
    let mut blocks = 0usize;
    let mut walk = Walk::of(result);
    while let Some((key, at)) = walk.next_key() {
        if !content_seen && key.eq_str("content") {
            content_seen = true;
            if walk.byte(at) == Some(b'[') {
                let end = write_blocks(&walk, at, &mut blocks, out)?;
                walk.resume(end);
                content_written = true;
                continue;
            }
            // `content: null` is treated as absent; anything else is not a content list.
            let Some(v) = walk.take() else { break };
            if !v.is_null() {
                return Err(ContentError::ContentNotArray);
            }
            continue;
        }
        let Some(v) = walk.take() else { break };
        if !seen_is_error && key.eq_str("isError") {
            seen_is_error = true;
            is_error = v.as_bool() == Some(true);
        } else if structured.is_none() && key.eq_str("structuredContent") {
            structured = Some(v);
        }
    }
    if !content_written && let Some(s) = structured {
        s.write_compact(out)?;
        blocks = 1;
    }
    Ok(Flattened { is_error, blocks })
}

/// [`flatten`] by one [`Value::get`] per member, as the rules read: the edge's (less code; the
/// host's walk is held equal to it by a property test).
fn flatten_by_lookup(result: Value<'_>, out: &mut impl Sink) -> Result<Flattened, ContentError> {
    if result.kind() != Kind::Object {
        return Err(ContentError::ResultNotObject);
    }
    // `as_bool() == Some(true)`: the literal `true`.
    let is_error = result.get("isError").is_some_and(|v| v.raw() == b"true");
    let content = result.get("content").filter(|c| !c.is_null());
    let mut blocks = 0usize;
    // Every write's overflow is said once, at the end.
    let written = match content {
        Some(c) if c.kind() == Kind::Array => c.elements().try_for_each(|block| {
            if blocks > 0 {
                out.put(b"\n")?;
            }
            blocks += 1;
            let text = match block.get("type").and_then(|t| t.as_str()) {
                Some(t) if t.eq_str("text") => block.get("text").and_then(|t| t.as_str()),
                _ => None,
            };
            match text {
                Some(t) => t.unescape_into(out),
                None => block.write_compact(out),
            }
        }),
        Some(_) => return Err(ContentError::ContentNotArray),
        None => match result.get("structuredContent") {
            Some(s) => {
                blocks = 1;
                s.write_compact(out)
            }
            None => Ok(()),
        },
    };
    written?;
    Ok(Flattened { is_error, blocks })
}

/// Writes the blocks of the content array whose `[` is at `at` of `outer`'s bytes, joined with
/// `\n`; returns the offset after its `]`. A text block's members are looked at once; its text
/// is skipped once (to find the block's end) and unescaped once.
fn write_blocks(
    outer: &Walk<'_>,
    at: usize,
    blocks: &mut usize,
    out: &mut impl Sink,
) -> Result<usize, ContentError> {
    let mut list = outer.inner(at);
    while let Some(start) = list.next_element() {
        if *blocks > 0 {
            out.put(b"\n")?;
        }
        *blocks += 1;
        if list.byte(start) != Some(b'{') {
            if let Some(v) = list.take() {
                v.write_compact(out)?;
            }
            continue;
        }
        let mut members = list.inner(start);
        let (mut kind, mut text) = (None, None);
        let mut written = false;
        while let Some((key, at)) = members.next_key() {
            // `type: "text"` came first, and this is the first `text`, a string: it is the
            // block's text, whatever follows; unescape it while crossing it (once).
            if !written
                && text.is_none()
                && members.byte(at) == Some(b'"')
                && key.eq_str("text")
                && kind
                    .and_then(|t: Value<'_>| t.as_str())
                    .is_some_and(|t| t.eq_str("text"))
            {
                members.unescape_string(out)?;
                written = true;
                continue;
            }
            let Some(v) = members.take() else { break };
            if kind.is_none() && key.eq_str("type") {
                kind = Some(v);
            } else if text.is_none() && key.eq_str("text") {
                text = Some(v);
            }
        }
        let end = members.end();
        list.resume(end);
        if written {
            continue;
        }
        let text = kind
            .and_then(|t| t.as_str())
            .filter(|t| t.eq_str("text"))
            .and(text)
            .and_then(|t| t.as_str());
        match text {
            Some(t) => {
                // Unescaped text is never longer than its raw form.
                out.reserve(t.raw().len());
                t.unescape_into(out)?
            }
            None => {
                if let Some(block) = list.object(start, end) {
                    block.write_compact(out)?;
                }
            }
        }
    }
    Ok(list.end())
}

/// Where `inner` (a sub-slice of `outer`, such as a parsed value's [`Value::raw`]) lies in
/// `outer`, as offsets; `None` when it is not inside it.
pub fn span_in(outer: &[u8], inner: &[u8]) -> Option<core::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len()).then_some(start..end)
}

#[cfg(feature = "std")]
pub use in_place::{IN_PLACE_FROM, InPlacePlan, MAX_SEGMENTS, TextFilter};

/// Flattening a result where its message lies (see the module's docs).
#[cfg(feature = "std")]
mod in_place;

#[cfg(test)]
mod tests {
    use std::string::String;
    use std::vec::Vec;

    use proptest::prelude::*;

    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use crate::wire::json::JsonLimits;
    use crate::wire::jsonrpc::{Found, Outcome, find_response};

    const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    fn run(src: &[u8]) -> (Result<Flattened, ContentError>, String) {
        let v = Value::parse(src, JsonLimits::default()).unwrap();
        let mut storage = [0u8; 4096];
        let mut b = SliceBuf::new(&mut storage);
        let r = flatten(v, &mut b);
        (r, String::from_utf8(b.bytes().to_vec()).unwrap())
    }

    fn result_of(reply: &[u8], id: u64) -> Value<'_> {
        let v = Value::parse(reply, JsonLimits::default()).unwrap();
        match find_response(v, id).unwrap() {
            Found::Match(Outcome::Result(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mixed_text_and_image_from_each_sdk() {
        let ts = std::format!(
            "here is an image\n{{\"type\":\"image\",\"data\":\"{IMAGE}\",\"mimeType\":\"image/png\"}}"
        );
        // Python orders the block's members differently; JSON.stringify keeps source order.
        let py = std::format!(
            "here is an image\n{{\"data\":\"{IMAGE}\",\"mimeType\":\"image/png\",\"type\":\"image\"}}"
        );
        for (reply, want) in [
            (
                &include_bytes!("../../tests/data/ts-call-mixed.json")[..],
                &ts,
            ),
            (include_bytes!("../../tests/data/py-call-mixed.json"), &py),
            (include_bytes!("../../tests/data/rmcp-call-mixed.json"), &ts),
        ] {
            let r = result_of(reply, 6);
            let mut storage = [0u8; 4096];
            let mut b = SliceBuf::new(&mut storage);
            let f = flatten(r, &mut b).unwrap();
            assert_eq!(
                f,
                Flattened {
                    is_error: false,
                    blocks: 2
                }
            );
            assert_eq!(core::str::from_utf8(b.bytes()).unwrap(), want.as_str());
        }
    }

    #[test]
    fn is_error_from_each_sdk() {
        for reply in [
            &include_bytes!("../../tests/data/ts-call-fail.json")[..],
            include_bytes!("../../tests/data/py-call-fail.json"),
            include_bytes!("../../tests/data/rmcp-call-fail.json"),
        ] {
            let r = result_of(reply, 5);
            let mut storage = [0u8; 64];
            let mut b = SliceBuf::new(&mut storage);
            let f = flatten(r, &mut b).unwrap();
            assert!(f.is_error);
            assert_eq!(b.bytes(), b"boom");
        }
    }

    #[test]
    fn non_text_blocks_print_as_json_stringify() {
        // Whitespace dropped, escapes canonical, key order and numbers as sent.
        let (r, text) = run(br#"{"content":[
            {"type":"text","text":"$ ls\n(exit 0)\n\u00e9\ud83d\ude00"},
            { "type" : "resource" , "resource" : { "uri" : "file:\/\/a b" , "text" : "x\u0001\"" } },
            {"type":"text","text":5},
            {"type":"audio","n":[1.5e3, -0, true, null]},
            "odd"
        ],"isError":false}"#);
        assert_eq!(
            r.unwrap(),
            Flattened {
                is_error: false,
                blocks: 5
            }
        );
        assert_eq!(
            text,
            "$ ls\n(exit 0)\né😀\n\
             {\"type\":\"resource\",\"resource\":{\"uri\":\"file://a b\",\"text\":\"x\\u0001\\\"\"}}\n\
             {\"type\":\"text\",\"text\":5}\n\
             {\"type\":\"audio\",\"n\":[1.5e3,-0,true,null]}\n\
             \"odd\""
        );
    }

    #[test]
    fn structured_content_fallback_and_empty() {
        let (r, text) = run(br#"{"structuredContent": { "a" : [1, "b"] }, "isError": true}"#);
        assert_eq!(
            r.unwrap(),
            Flattened {
                is_error: true,
                blocks: 1
            }
        );
        assert_eq!(text, r#"{"a":[1,"b"]}"#);
        // content wins over structuredContent.
        let (_, text) = run(br#"{"content":[{"type":"text","text":"t"}],"structuredContent":{}}"#);
        assert_eq!(text, "t");
        let (r, text) = run(br#"{"content":null}"#);
        assert_eq!(r.unwrap().blocks, 0);
        assert_eq!(text, "");
        let (r, text) = run(br#"{"content":[]}"#);
        assert_eq!(r.unwrap().blocks, 0);
        assert_eq!(text, "");
        // isError must be the boolean true.
        assert!(
            !run(br#"{"content":[],"isError":"true"}"#)
                .0
                .unwrap()
                .is_error
        );
    }

    #[test]
    fn malformed_results_are_typed_errors() {
        assert_eq!(
            run(br#"{"content":{"type":"text"}}"#).0,
            Err(ContentError::ContentNotArray)
        );
        assert_eq!(
            run(br#"{"content":"text"}"#).0,
            Err(ContentError::ContentNotArray)
        );
        assert_eq!(run(b"[1]").0, Err(ContentError::ResultNotObject));
        assert_eq!(
            std::format!("{}", ContentError::ContentNotArray),
            "tools/call result \"content\" is not an array"
        );
    }

    #[test]
    fn overflow_is_a_typed_error_at_every_cap() {
        let src = br#"{"content":[{"type":"text","text":"hello\nworld"},{"type":"image","data":"AAAA"}]}"#;
        let v = Value::parse(src, JsonLimits::default()).unwrap();
        let full = "hello\nworld\n{\"type\":\"image\",\"data\":\"AAAA\"}";
        for cap in 0..full.len() {
            let mut storage = std::vec![0u8; cap];
            let mut b = SliceBuf::new(&mut storage);
            match flatten(v, &mut b) {
                Err(ContentError::Overflow(o)) => {
                    assert_eq!(o.limit, cap);
                    assert!(full.as_bytes().starts_with(b.bytes()));
                }
                other => panic!("cap {cap}: {other:?}"),
            }
        }
        let mut storage = std::vec![0u8; full.len()];
        let mut b = SliceBuf::new(&mut storage);
        assert_eq!(flatten(v, &mut b).unwrap().blocks, 2);
        assert_eq!(b.bytes(), full.as_bytes());
        let shown = std::format!(
            "{}",
            ContentError::Overflow(Overflow {
                limit: 4,
                needed: 9
            })
        );
        assert!(shown.contains("cap of 4"), "{shown}");
    }

    fn lit(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    /// Any JSON value, as text, from a few shapes (with whitespace).
    fn arb_scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".into()),
            Just("true".into()),
            Just("false".into()),
            Just(" 1.5e3 ".into()),
            Just("\"text\"".into()),
            any::<String>().prop_map(|s| lit(&s)),
            "[a-z\\n\"\\\\]{0,12}".prop_map(|s| lit(&s)),
        ]
    }

    /// A content block: an object with `type`/`text`/other members in any order (duplicates
    /// too), or a scalar.
    fn arb_block() -> impl Strategy<Value = String> {
        let member = (
            prop_oneof![Just("type"), Just("text"), Just("data"), Just("ty\\u0070e")],
            prop_oneof![3 => arb_scalar(), 1 => Just("{\"a\": [1, {\"b\": \"c\"}]}".into())],
        );
        prop_oneof![
            4 => prop::collection::vec(member, 0..4).prop_map(|ms| {
                let body: Vec<String> =
                    ms.iter().map(|(k, v)| std::format!("\"{k}\" : {v}")).collect();
                std::format!("{{ {} }}", body.join(" , "))
            }),
            1 => arb_scalar(),
        ]
    }

    /// A `tools/call` result: members `content` (a list, null or a scalar), `isError`,
    /// `structuredContent` and others, in any order and possibly repeated.
    fn arb_result() -> impl Strategy<Value = String> {
        let content = prop_oneof![
            4 => prop::collection::vec(arb_block(), 0..4)
                .prop_map(|bs| std::format!("[ {} ]", bs.join(", "))),
            1 => arb_scalar(),
        ];
        let member = prop_oneof![
            3 => content.prop_map(|c| ("content", c)),
            1 => arb_scalar().prop_map(|v| ("isError", v)),
            1 => Just(("isError", "true".into())),
            1 => arb_block().prop_map(|v| ("structuredContent", v)),
            1 => arb_scalar().prop_map(|v| ("other", v)),
        ];
        prop::collection::vec(member, 0..5).prop_map(|ms| {
            let body: Vec<String> = ms
                .iter()
                .map(|(k, v)| std::format!("\"{k}\":{v}"))
                .collect();
            std::format!("{{{}}}", body.join(","))
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1024, ..proptest::prelude::ProptestConfig::default()
        })]
        /// The one-walk flatten writes exactly what one lookup per member wrote, with the
        /// same outcome, at every output cap.
        #[test]
        fn one_walk_agrees_with_lookups(src in arb_result(), cap in 0usize..64) {
            let v = Value::parse(src.as_bytes(), JsonLimits::default()).unwrap();
            for cap in [cap, 4096] {
                let (mut a, mut b) = (std::vec![0u8; cap], std::vec![0u8; cap]);
                let (mut walked, mut looked) = (SliceBuf::new(&mut a), SliceBuf::new(&mut b));
                let ours = flatten(v, &mut walked);
                let theirs = flatten_by_lookup(v, &mut looked);
                proptest::prop_assert_eq!(ours, theirs, "{}", src);
                proptest::prop_assert_eq!(walked.bytes(), looked.bytes(), "{}", src);
            }
        }
    }

    /// The copy path the handler takes without in-place: flatten through the redactor into
    /// a text buffer capped at `cap`.
    #[cfg(feature = "std")]
    fn by_copy(msg: &[u8], secrets: &[String], cap: usize) -> Result<Vec<u8>, ContentError> {
        use crate::buf::VecBuf;
        use crate::harness::redact::Redactor;
        let v = Value::parse(msg, JsonLimits::default()).unwrap();
        let result = v.get("result").unwrap();
        let mut text = VecBuf::new(cap);
        let mut redactor = Redactor::new(secrets);
        let mut sink = redactor.sink(&mut text);
        flatten(result, &mut sink)?;
        sink.finish()?;
        Ok(text.bytes().to_vec())
    }

    /// The in-place path: plan on the parsed message, then write over it in the reply
    /// buffer; the text buffer adopts the reply's storage. `None`: no plan (copy instead).
    #[cfg(feature = "std")]
    fn by_place(
        msg: &[u8],
        secrets: &[String],
        cap: usize,
    ) -> Option<Result<Vec<u8>, ContentError>> {
        use crate::buf::VecBuf;
        use crate::harness::redact::Redactor;
        let mut reply = VecBuf::new(msg.len().max(cap));
        reply.put(msg).unwrap();
        let plan = {
            let m = reply.bytes();
            let v = Value::parse(m, JsonLimits::default()).unwrap();
            match InPlacePlan::new(m, v.get("result").unwrap()) {
                Ok(Some(p)) => p,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        };
        let flat = plan.flattened();
        let mut text = VecBuf::new(cap);
        text.put(b"old text").ok();
        let mut redactor = Redactor::new(secrets);
        Some(plan.run(&mut reply, &mut redactor, &mut text).map(|f| {
            assert_eq!(f, flat);
            assert!(reply.is_empty(), "the reply gave its storage");
            text.bytes().to_vec()
        }))
    }

    #[cfg(feature = "std")]
    fn wrap(result: &str) -> String {
        std::format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{result}}}")
    }

    #[cfg(feature = "std")]
    #[test]
    fn in_place_writes_what_the_copy_writes() {
        let secrets: Vec<String> = ["abcd", "hunter2-hunter2", "ééé!"].map(String::from).into();
        for result in [
            r#"{"content":[{"type":"text","text":"a\nabcd\"x\u00e9\ud83d\ude00 hunter2-hunter2"}],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"one"},{"type":"image","data":"abcdabcd","mimeType":"x"},{"text":"t","type":"text"},7,"abcd"]}"#,
            r#"{"structuredContent":{"a":["abcd",1.5e3,null]}}"#,
            r#"{"content":null,"structuredContent":{"a":1}}"#,
            r#"{"content":[]}"#,
            r#"{}"#,
        ] {
            let msg = wrap(result);
            let want = by_copy(msg.as_bytes(), &secrets, 4096).unwrap();
            let got = by_place(msg.as_bytes(), &secrets, 4096)
                .expect("planned")
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{result}"
            );
        }
        // Not compact as sent: flattened by copy instead.
        let msg = wrap(r#"{"content":[{"type":"image", "data":"x"}]}"#);
        assert!(by_place(msg.as_bytes(), &secrets, 4096).is_none());
        // The errors are flatten's.
        for (result, e) in [
            (r#"{"content":5}"#, ContentError::ContentNotArray),
            ("[1]", ContentError::ResultNotObject),
        ] {
            let msg = wrap(result);
            assert_eq!(by_copy(msg.as_bytes(), &secrets, 64), Err(e));
            assert_eq!(by_place(msg.as_bytes(), &secrets, 64), Some(Err(e)));
        }
    }

    #[cfg(feature = "std")]
    #[test]
    fn short_secrets_that_lengthen_the_text_wait_in_the_spill() {
        // Every `abcd` becomes the 10-byte marker: the text outgrows the message it is written
        // over, and right from the start (the result is the whole message: no gap before it).
        let secrets: Vec<String> = std::vec!["abcd".into()];
        let text = "abcd".repeat(3000);
        let msg = std::format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}"
        );
        let want = "[REDACTED]".as_bytes().to_vec();
        assert_eq!(by_copy(msg.as_bytes(), &secrets, 1 << 16).unwrap(), want);
        // One run of covered bytes: one marker. Now runs apart from each other.
        let text = "abcd.".repeat(3000);
        let msg = std::format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}"
        );
        let want = by_copy(msg.as_bytes(), &secrets, 1 << 16).unwrap();
        assert_eq!(want.len(), 3000 * 11);
        assert!(want.len() > msg.len());
        let got = by_place(msg.as_bytes(), &secrets, 1 << 16)
            .unwrap()
            .unwrap();
        assert_eq!(got, want);
        // At every cap around the text's length: the same outcome as the copy.
        for cap in [want.len() - 1, want.len(), 100, 0] {
            let copy = by_copy(msg.as_bytes(), &secrets, cap);
            let place = by_place(msg.as_bytes(), &secrets, cap).unwrap();
            match (copy, place) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(ContentError::Overflow(a)), Err(ContentError::Overflow(b))) => {
                    assert_eq!(a.limit, b.limit);
                    assert!(b.needed > cap);
                }
                other => panic!("cap {cap}: {other:?}"),
            }
        }
    }

    #[cfg(feature = "std")]
    fn arb_secret() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-d\n\"]{4,6}",
            "[a-d]{10,14}",
            Just("text".into()),
            Just("\"type\"".into()),
        ]
    }

    #[cfg(feature = "std")]
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1024, ..proptest::prelude::ProptestConfig::default()
        })]
        /// Flattened in place, redacted by any secrets (shorter than the marker too, so the
        /// text may outgrow its message): the same text, or the same error, as by copy, at
        /// any cap.
        #[test]
        fn in_place_agrees_with_the_copy(
            src in arb_result(),
            secrets in prop::collection::vec(arb_secret(), 0..4),
            cap in 0usize..96,
            wrapped in any::<bool>(),
            compact in any::<bool>(),
        ) {
            let src = if compact {
                // As most servers send it: no whitespace, escapes canonical (planned in place).
                let mut out = crate::buf::VecBuf::new(1 << 16);
                Value::parse(src.as_bytes(), JsonLimits::default()).unwrap().write_compact(&mut out).unwrap();
                String::from_utf8(out.into_vec()).unwrap()
            } else {
                src
            };
            let msg = if wrapped { wrap(&src) } else { std::format!("{{\"result\":{src}}}") };
            for cap in [cap, 4096] {
                let Some(place) = by_place(msg.as_bytes(), &secrets, cap) else {
                    proptest::prop_assert!(!compact, "compact JSON is planned: {}", msg);
                    continue;
                };
                let copy = by_copy(msg.as_bytes(), &secrets, cap);
                match (copy, place) {
                    (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b, "{}", msg),
                    (Err(ContentError::Overflow(a)), Err(ContentError::Overflow(b))) => {
                        proptest::prop_assert_eq!(a.limit, b.limit);
                    }
                    (a, b) => proptest::prop_assert_eq!(a, b, "{}", msg),
                }
            }
        }
    }

    /// The in-place path as the host's call handler takes a big message: parsed with its big
    /// strings deferred, each checked as it is written over. `Err`: the JSON error.
    #[cfg(feature = "std")]
    fn by_place_checked(
        msg: &[u8],
        secrets: &[String],
        cap: usize,
    ) -> Result<Result<Vec<u8>, ContentError>, crate::wire::json::JsonError> {
        use crate::buf::VecBuf;
        use crate::harness::redact::Redactor;
        let mut reply = VecBuf::new(msg.len().max(cap));
        reply.put(msg).unwrap();
        let (plan, deferred) = {
            let m = reply.bytes();
            let (v, deferred) = Value::parse_deferring(m, JsonLimits::default())?;
            // As the machine's handler does: the plan crosses the big texts at once.
            let v = v.knowing(deferred.ends());
            let plan = InPlacePlan::new(m, v.get("result").unwrap())
                .unwrap()
                .expect("planned");
            assert!(plan.covers(&deferred), "only texts are big");
            (plan, deferred)
        };
        let mut text = VecBuf::new(cap);
        let mut redactor = Redactor::new(secrets);
        Ok(plan
            .run_checking(&mut reply, &mut redactor, &mut text, &deferred)?
            .map(|_| text.bytes().to_vec()))
    }

    /// Pieces of a big text: escapes, characters of 2 and 4 bytes (so a piece can end
    /// inside one).
    #[cfg(feature = "std")]
    fn arb_fragment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            30 => "[a-z ]{1,60}".prop_map(String::into_bytes),
            6 => Just(b"\\n".to_vec()),
            3 => Just(b"\\\"x\\\\".to_vec()),
            4 => Just("é😀".as_bytes().to_vec()),
            2 => Just(b"\\u00e9\\ud83d\\ude00\\udc00".to_vec()),
        ]
    }

    /// What makes a string invalid: a raw control, bad escapes, bytes that are not UTF-8
    /// (a cut character among them).
    #[cfg(feature = "std")]
    fn arb_bad() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(std::vec![0x01]),
            Just(std::vec![0x1f]),
            Just(b"\\x".to_vec()),
            Just(b"\\u12g4".to_vec()),
            Just(std::vec![0xff]),
            Just(std::vec![0xe2, 0x82]),
            Just(std::vec![0xed, 0xa0, 0x80]),
        ]
    }

    /// A text of 4 to 20 KiB (over `DEFER_FROM`, across the 8 KiB pieces), with one bad
    /// fragment at any place (most often past the bytes checked before deferring) or none.
    #[cfg(feature = "std")]
    fn arb_big_text() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(arb_fragment(), 1..40),
            4200usize..20_000,
            prop::option::weighted(0.5, (arb_bad(), 0usize..20_000)),
        )
            .prop_map(|(f, len, bad)| {
                let mut out = Vec::new();
                let mut i = 0;
                while out.len() < len {
                    if let Some((b, at)) = &bad
                        && out.len() >= *at.min(&len)
                        && !out.ends_with(b)
                        && i > 0
                        && !out.windows(b.len()).any(|w| w == &b[..])
                    {
                        out.extend_from_slice(b);
                    }
                    out.extend_from_slice(&f[i % f.len()]);
                    i += 1;
                }
                out
            })
    }

    #[cfg(feature = "std")]
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256, ..proptest::prelude::ProptestConfig::default()
        })]
        /// Big texts checked as they are written over: the text the copy writes when the
        /// message is valid, and exactly `Value::parse`'s error (kind and offset, the first
        /// bad string first) when it is not.
        #[test]
        fn deferred_texts_are_checked_as_parse_checks_them(
            texts in prop::collection::vec(arb_big_text(), 1..4),
            small in "[a-z]{0,8}",
            secrets in prop::collection::vec(arb_secret(), 0..3),
        ) {
            let mut msg = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[".to_vec();
            for (i, t) in texts.iter().enumerate() {
                if i > 0 {
                    msg.push(b',');
                }
                msg.extend_from_slice(b"{\"type\":\"text\",\"text\":\"");
                msg.extend_from_slice(t);
                msg.extend_from_slice(b"\"}");
            }
            msg.extend_from_slice(b"],\"isError\":false,\"note\":\"");
            msg.extend_from_slice(small.as_bytes());
            msg.extend_from_slice(b"\"}}");
            let cap = 1 << 17;
            match Value::parse(&msg, JsonLimits::default()) {
                Err(e) => proptest::prop_assert_eq!(
                    by_place_checked(&msg, &secrets, cap).map(|_| ()),
                    Err(e)
                ),
                Ok(_) => {
                    let want = by_copy(&msg, &secrets, cap).unwrap();
                    let got = by_place_checked(&msg, &secrets, cap).unwrap().unwrap();
                    proptest::prop_assert_eq!(got, want);
                }
            }
        }
    }

    #[test]
    fn text_buffer_is_told_a_bound_of_the_text_length() {
        struct Hint(usize, usize);
        impl Sink for Hint {
            fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
                self.0 += bytes.len();
                Ok(())
            }
            fn reserve(&mut self, additional: usize) {
                self.1 = self.1.max(self.0 + additional);
            }
        }
        let src = br#"{"content":[{"type":"text","text":"a\nb\u00e9c"}]}"#;
        let v = Value::parse(src, JsonLimits::default()).unwrap();
        let mut h = Hint(0, 0);
        flatten(v, &mut h).unwrap();
        // Raw `a\nb\u00e9c` is 11 bytes (two escapes); the text is 6. On the host the text is
        // unescaped as it is crossed, before its end is known: the hint is then the rest of the
        // result after the opening quote (15 bytes), still a bound of what comes.
        assert_eq!(h.0, 6);
        let rest = src.len() - br#"{"content":[{"type":"text","text":""#.len();
        assert_eq!(rest, 15);
        let want = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            rest
        } else {
            11
        };
        assert_eq!(h.1, want);
    }
}
