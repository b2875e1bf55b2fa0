//! Typed arguments and results on the edge, without an allocator (feature `serde`).
//!
//! A harness passes any `Serialize` value as a tool's arguments: it is written once, by
//! `serde-json-core`, into a scratch slice the caller lends, and the call sends it from there
//! (the core validates it, and writes it compactly into each request). A tool's
//! `structuredContent` is read into any `Deserialize` type straight from the kept reply
//! ([`SlotConfig::keep_raw`](verifi_mcp_core::drive::SlotConfig::keep_raw)); strings with
//! escapes are unescaped into a second slice the caller lends. The reply parser stays the
//! core's streaming scanner: the reply is never parsed into a tree.

use serde::{Deserialize, Serialize};
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::drive::{self, CallBuffers, Net};
use verifi_mcp_core::harness::result::ToolResult;
use verifi_mcp_core::wire::json::{JsonLimits, Kind, Value};

use crate::slot::EdgeSlot;

/// Why typed arguments or a typed result could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TypedError {
    /// The arguments do not fit the scratch slice (its length).
    ArgsTooLarge(usize),
    /// The arguments are not a JSON object (MCP's `arguments` must be one).
    ArgsNotAnObject,
    /// The result kept no reply (`keep_raw` off) or has no `structuredContent`.
    NoStructuredContent,
    /// `structuredContent` is not the type asked for (or a string's unescaped form does not
    /// fit the escapes slice).
    Structured(serde_json_core::de::Error),
}

impl core::fmt::Display for TypedError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TypedError::ArgsTooLarge(cap) => {
                write!(f, "the arguments do not fit the {cap}-byte scratch slice")
            }
            TypedError::ArgsNotAnObject => f.write_str("the arguments are not a JSON object"),
            TypedError::NoStructuredContent => {
                f.write_str("the result has no structuredContent (or its reply was not kept)")
            }
            TypedError::Structured(e) => write!(f, "structuredContent is not of that type: {e}"),
        }
    }
}

/// Writes `args` as JSON into `scratch` and validates it as the arguments of a call.
pub fn write_args<'s, A: Serialize + ?Sized>(
    args: &A,
    scratch: &'s mut [u8],
) -> Result<Value<'s>, TypedError> {
    let cap = scratch.len();
    let n = serde_json_core::to_slice(args, scratch).map_err(|_| TypedError::ArgsTooLarge(cap))?;
    let json = scratch.get(..n).ok_or(TypedError::ArgsTooLarge(cap))?;
    match Value::parse(json, JsonLimits::default()) {
        Ok(v) if v.kind() == Kind::Object => Ok(v),
        _ => Err(TypedError::ArgsNotAnObject),
    }
}

/// A result's `structuredContent` as `T`, read from the kept reply. Strings without escapes
/// can be borrowed (`&str` fields); a string with escapes is unescaped into `escapes` (its
/// length caps the longest one) and needs an owned field type (e.g. `heapless::String` with
/// its `serde` feature): a borrowed field gets [`TypedError::Structured`].
pub fn structured<'r, T: Deserialize<'r>>(
    result: &ToolResult<'r>,
    escapes: &mut [u8],
) -> Result<T, TypedError> {
    let raw = result.raw.ok_or(TypedError::NoStructuredContent)?;
    let content = Value::parse(raw, JsonLimits::default())
        .ok()
        .and_then(|m| m.get("result"))
        .and_then(|r| r.get("structuredContent"))
        .ok_or(TypedError::NoStructuredContent)?;
    serde_json_core::from_slice_escaped::<T>(content.raw(), escapes)
        .map(|(value, _)| value)
        .map_err(TypedError::Structured)
}

impl<'a, const LISTS: bool> EdgeSlot<'a, LISTS> {
    /// [`call`](EdgeSlot::call) with any `Serialize` value as the arguments, written into
    /// `scratch` once (see the module docs). Arguments that do not fit or are not an object
    /// fail the call before anything is sent (metered, on the timeline, no failover).
    pub async fn call_typed<'b, N: Net, B: Buf + Send, A: Serialize + ?Sized>(
        &self,
        net: &N,
        tool: &str,
        args: &A,
        scratch: &mut [u8],
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        match write_args(args, scratch) {
            Ok(v) => self.call(net, tool, Some(v), bufs).await,
            Err(e) => {
                let (mut ledger, mut timeline) = self.sinks();
                let error = match e {
                    TypedError::ArgsTooLarge(_) => "the arguments do not fit the scratch slice",
                    _ => "the arguments are not a JSON object",
                };
                drive::local_failure(self.name(), tool, error, &mut ledger, &mut timeline)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifi_mcp_core::harness::result::ToolResult;

    #[derive(Serialize)]
    struct Scan<'a> {
        target: &'a str,
        ports: [u16; 2],
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Open<'a> {
        host: &'a str,
        open: [u16; 2],
        #[serde(default)]
        note: Option<&'a str>,
    }

    #[test]
    fn arguments_are_written_once_into_the_scratch_and_checked() {
        let mut scratch = [0u8; 64];
        let v = write_args(
            &Scan {
                target: "10.0.0.\"1\"",
                ports: [22, 443],
            },
            &mut scratch,
        )
        .unwrap();
        assert_eq!(v.raw(), br#"{"target":"10.0.0.\"1\"","ports":[22,443]}"#);
        let mut small = [0u8; 8];
        assert_eq!(
            write_args(
                &Scan {
                    target: "x",
                    ports: [1, 2]
                },
                &mut small
            )
            .unwrap_err(),
            TypedError::ArgsTooLarge(8)
        );
        assert_eq!(
            write_args(&[1, 2], &mut scratch).unwrap_err(),
            TypedError::ArgsNotAnObject
        );
    }

    #[test]
    fn structured_content_is_read_from_the_kept_reply() {
        let raw = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"host":"h1","open":[22,80],"note":"plain"}}}"#;
        let r = ToolResult::answered("", 1, Some(raw));
        let mut escapes = [0u8; 16];
        let open: Open<'_> = structured(&r, &mut escapes).unwrap();
        assert_eq!(
            (open.host, open.open, open.note),
            ("h1", [22, 80], Some("plain"))
        );
        // A string with escapes cannot be borrowed from the reply (its unescaped form lives in
        // `escapes`): a borrowed field says so as an error, never a panic; an owned string
        // type (e.g. `heapless::String` with its `serde` feature) takes it.
        let escaped = br#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"host":"a\"b","open":[1,2]}}}"#;
        let r = ToolResult::answered("", 1, Some(escaped));
        assert!(matches!(
            structured::<Open<'_>>(&r, &mut escapes),
            Err(TypedError::Structured(_))
        ));
        let none = ToolResult::answered("", 1, None);
        assert_eq!(
            structured::<Open<'_>>(&none, &mut escapes).unwrap_err(),
            TypedError::NoStructuredContent
        );
        let wrong = br#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"host":7}}}"#;
        let r = ToolResult::answered("", 1, Some(wrong));
        assert!(matches!(
            structured::<Open<'_>>(&r, &mut escapes),
            Err(TypedError::Structured(_))
        ));
    }
}
