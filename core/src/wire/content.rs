//! Flattening a `tools/call` result into the one text a harness sees, as the seed SDK does.
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
        match self {
            ContentError::Overflow(o) => write!(f, "tool result text too large: {o}"),
            ContentError::ContentNotArray => {
                f.write_str("tools/call result \"content\" is not an array")
            }
            ContentError::ResultNotObject => f.write_str("tools/call result is not a JSON object"),
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
    let is_error = result.get("isError").and_then(|v| v.as_bool()) == Some(true);
    let content = result.get("content").filter(|c| !c.is_null());
    let mut blocks = 0usize;
    match content {
        Some(c) if c.kind() == Kind::Array => {
            for block in c.elements() {
                if blocks > 0 {
                    out.put(b"\n")?;
                }
                blocks += 1;
                let text = block
                    .get("type")
                    .and_then(|t| t.as_str())
                    .filter(|t| t.eq_str("text"))
                    .and_then(|_| block.get("text"))
                    .and_then(|t| t.as_str());
                match text {
                    Some(t) => t.unescape_into(out)?,
                    None => block.write_compact(out)?,
                }
            }
        }
        Some(_) => return Err(ContentError::ContentNotArray),
        None => {
            if let Some(s) = result.get("structuredContent") {
                s.write_compact(out)?;
                blocks = 1;
            }
        }
    }
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
