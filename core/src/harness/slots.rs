//! Slots: the run manifest and resolving a slot to its endpoint(s), with the
//! [`SlotNotFilledError`] the reference SDK words (docs/design.md#slots).
//!
//! Owns reading the manifest JSON (borrowed, validated once in [`Manifest::parse`]) and the
//! resolution order: `slotFills[slot]` first, then the older flat `endpoints[slot]`. It does not
//! parse endpoint URLs (`wire::endpoint` does) nor memoize slots per run (the driver does).
//!
//! # Manifest shape
//!
//! ```json
//! { "slotFills": { "kali": "http://10.0.0.5:8080",
//!                  "burp": { "endpoint": "http://b1", "fallback": "http://b2",
//!                            "headers": { "authorization": "Bearer …" } } },
//!   "endpoints": { "recon": "http://10.0.0.7" } }
//! ```
//!
//! A server may also be a local process spoken to over stdio: an object fill names a
//! `command` (a non-empty array of strings: the program and its arguments) instead of an
//! `endpoint`, with an optional `env` (an object of strings, added to the child's allow-listed
//! environment) and `cwd` (a string); `fallback` may be such an object too (or
//! `{"endpoint": …}`):
//!
//! ```json
//! { "slotFills": { "nmap": { "command": ["uvx", "nmap-mcp"], "env": { "LOG": "1" },
//!                            "cwd": "/tmp", "fallback": "http://10.0.0.5:8080" },
//!                  "web": { "endpoint": "http://w1", "fallback": { "command": ["web-mcp"] } } } }
//! ```
//!
//! Other top-level fields are ignored. `null` for `slotFills`, `endpoints`, `fallback` or
//! `headers` means absent. Anything else of the wrong type is a [`ManifestError`] naming the
//! field, e.g. `manifest field slotFills.kali.endpoint must be a string`.
//!
//! **Header values are secrets of the run**: an `authorization` value must never show up in
//! tool output, errors or logs. The driver adds every header value to the redaction set, and
//! the `Debug` forms here print them as `[REDACTED]`.

use crate::buf::{Buf, Overflow, Sink, SliceBuf};
use crate::harness::redact::Redacted;
use crate::wire::json::{JsonError, JsonLimits, JsonStr, Kind, Value};
use core::cmp::Ordering;
use core::fmt;

/// The run manifest, borrowed from its JSON text and validated.
#[derive(Clone, Copy)]
pub struct Manifest<'a> {
    slot_fills: Option<Value<'a>>,
    endpoints: Option<Value<'a>>,
}

/// Which field of the manifest is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPath<'a> {
    /// `slotFills` or `endpoints`.
    pub map: &'static str,
    /// The slot, when the fault is inside one.
    pub slot: Option<JsonStr<'a>>,
    /// `endpoint`, `fallback` or `headers`, when the fault is inside a slot's object.
    pub key: Option<&'static str>,
    /// The header's name, when one header value is wrong.
    pub header: Option<JsonStr<'a>>,
}

/// A manifest that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestError<'a> {
    /// The manifest is not JSON.
    Json(JsonError),
    /// The manifest is JSON but not an object.
    NotAnObject,
    /// A field has the wrong type (or a required one is missing).
    Field {
        /// The field.
        field: FieldPath<'a>,
        /// What it must be: `an object`, `a string`, `a string or an object`.
        expected: &'static str,
    },
}

/// Writes unescaped JSON string pieces to a formatter.
struct FmtSink<'f, 'g>(&'f mut fmt::Formatter<'g>);

impl Sink for FmtSink<'_, '_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let overflow = Overflow {
            limit: 0,
            needed: bytes.len(),
        };
        // Pieces of an unescaped string are whole UTF-8 sequences.
        let s = core::str::from_utf8(bytes).unwrap_or("\u{FFFD}");
        self.0.write_str(s).map_err(|_| overflow)
    }
}

fn write_name(f: &mut fmt::Formatter<'_>, s: &JsonStr<'_>) -> fmt::Result {
    s.unescape_into(&mut FmtSink(f)).map_err(|_| fmt::Error)
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.map)?;
        if let Some(slot) = &self.slot {
            f.write_str(".")?;
            write_name(f, slot)?;
        }
        if let Some(key) = self.key {
            write!(f, ".{key}")?;
        }
        if let Some(h) = &self.header {
            f.write_str(".")?;
            write_name(f, h)?;
        }
        Ok(())
    }
}

impl fmt::Display for ManifestError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestError::Json(e) => write!(f, "manifest is not valid JSON: {e}"),
            ManifestError::NotAnObject => f.write_str("manifest must be a JSON object"),
            ManifestError::Field { field, expected } => {
                write!(f, "manifest field {field} must be {expected}")
            }
        }
    }
}

impl core::error::Error for ManifestError<'_> {}

fn present(v: Option<Value<'_>>) -> Option<Value<'_>> {
    v.filter(|v| !v.is_null())
}

fn field_err<'a>(
    map: &'static str,
    slot: Option<JsonStr<'a>>,
    key: Option<&'static str>,
    header: Option<JsonStr<'a>>,
    expected: &'static str,
) -> ManifestError<'a> {
    ManifestError::Field {
        field: FieldPath {
            map,
            slot,
            key,
            header,
        },
        expected,
    }
}

/// Checks a `command` object's fields (`command`, `env`, `cwd`); `prefix` names them in errors.
fn check_command<'a>(
    slot: JsonStr<'a>,
    v: Value<'a>,
    keys: [&'static str; 3],
) -> Result<(), ManifestError<'a>> {
    const MAP: &str = "slotFills";
    let [command, env, cwd] = keys;
    let argv = v.get("command").filter(|c| c.kind() == Kind::Array);
    let ok = argv.is_some_and(|a| {
        a.elements().next().is_some() && a.elements().all(|e| e.kind() == Kind::String)
    });
    if !ok {
        return Err(field_err(
            MAP,
            Some(slot),
            Some(command),
            None,
            "a non-empty array of strings",
        ));
    }
    if let Some(e) = present(v.get("env")) {
        if e.kind() != Kind::Object {
            return Err(field_err(MAP, Some(slot), Some(env), None, "an object"));
        }
        for (name, value) in e.members() {
            if value.kind() != Kind::String {
                return Err(field_err(
                    MAP,
                    Some(slot),
                    Some(env),
                    Some(name),
                    "a string",
                ));
            }
        }
    }
    if let Some(c) = present(v.get("cwd"))
        && c.kind() != Kind::String
    {
        return Err(field_err(MAP, Some(slot), Some(cwd), None, "a string"));
    }
    Ok(())
}

fn check_fill<'a>(slot: JsonStr<'a>, v: Value<'a>) -> Result<(), ManifestError<'a>> {
    const MAP: &str = "slotFills";
    match v.kind() {
        Kind::String => Ok(()),
        Kind::Object => {
            if present(v.get("command")).is_some() {
                check_command(slot, v, ["command", "env", "cwd"])?;
            } else if v.get("endpoint").and_then(|e| e.as_str()).is_none() {
                return Err(field_err(
                    MAP,
                    Some(slot),
                    Some("endpoint"),
                    None,
                    "a string",
                ));
            }
            if let Some(fb) = present(v.get("fallback")) {
                match fb.kind() {
                    Kind::String => {}
                    Kind::Object if present(fb.get("command")).is_some() => check_command(
                        slot,
                        fb,
                        ["fallback.command", "fallback.env", "fallback.cwd"],
                    )?,
                    Kind::Object if fb.get("endpoint").and_then(|e| e.as_str()).is_some() => {}
                    _ => {
                        return Err(field_err(
                            MAP,
                            Some(slot),
                            Some("fallback"),
                            None,
                            "a string or an object with an endpoint or a command",
                        ));
                    }
                }
            }
            if let Some(h) = present(v.get("headers")) {
                if h.kind() != Kind::Object {
                    return Err(field_err(
                        MAP,
                        Some(slot),
                        Some("headers"),
                        None,
                        "an object",
                    ));
                }
                for (name, value) in h.members() {
                    if value.kind() != Kind::String {
                        return Err(field_err(
                            MAP,
                            Some(slot),
                            Some("headers"),
                            Some(name),
                            "a string",
                        ));
                    }
                }
            }
            Ok(())
        }
        _ => Err(field_err(
            MAP,
            Some(slot),
            None,
            None,
            "a string or an object",
        )),
    }
}

/// A validated `{command, env, cwd}` object as a [`StdioCommand`], with its program's name.
fn command_of(v: Value<'_>) -> Option<(JsonStr<'_>, StdioCommand<'_>)> {
    let argv = present(v.get("command"))?;
    let program = argv.elements().next()?.as_str()?;
    Some((
        program,
        StdioCommand {
            argv,
            env: Headers(present(v.get("env"))),
            cwd: present(v.get("cwd")).and_then(|c| c.as_str()),
        },
    ))
}

impl<'a> Manifest<'a> {
    /// Parses and validates the manifest (see the module docs for its shape).
    pub fn parse(json: &'a [u8]) -> Result<Manifest<'a>, ManifestError<'a>> {
        let root = Value::parse(json, JsonLimits::default()).map_err(ManifestError::Json)?;
        if root.kind() != Kind::Object {
            return Err(ManifestError::NotAnObject);
        }
        let slot_fills = present(root.get("slotFills"));
        if let Some(m) = slot_fills {
            if m.kind() != Kind::Object {
                return Err(field_err("slotFills", None, None, None, "an object"));
            }
            for (slot, v) in m.members() {
                check_fill(slot, v)?;
            }
        }
        let endpoints = present(root.get("endpoints"));
        if let Some(m) = endpoints {
            if m.kind() != Kind::Object {
                return Err(field_err("endpoints", None, None, None, "an object"));
            }
            for (slot, v) in m.members() {
                if v.kind() != Kind::String {
                    return Err(field_err("endpoints", Some(slot), None, None, "a string"));
                }
            }
        }
        Ok(Manifest {
            slot_fills,
            endpoints,
        })
    }

    /// Resolves `slot`: `slotFills[slot]` first, then `endpoints[slot]`.
    pub fn resolve<'s>(&self, slot: &'s str) -> Result<SlotFill<'a>, SlotNotFilledError<'a, 's>> {
        if let Some(v) = self.slot_fills.and_then(|m| m.get(slot)) {
            if let Some(endpoint) = v.as_str() {
                return Ok(SlotFill {
                    endpoint,
                    fallback: None,
                    headers: Headers(None),
                    command: None,
                    fallback_command: None,
                });
            }
            let primary = match command_of(v) {
                Some((program, command)) => Some((program, Some(command))),
                None => v
                    .get("endpoint")
                    .and_then(|e| e.as_str())
                    .map(|e| (e, None)),
            };
            if let Some((endpoint, command)) = primary {
                let fb = present(v.get("fallback"));
                let (fallback, fallback_command) = match fb.and_then(command_of) {
                    Some((program, c)) => (Some(program), Some(c)),
                    None => (
                        fb.and_then(|f| f.as_str().or_else(|| f.get("endpoint")?.as_str())),
                        None,
                    ),
                };
                return Ok(SlotFill {
                    endpoint,
                    fallback,
                    headers: Headers(present(v.get("headers"))),
                    command,
                    fallback_command,
                });
            }
        }
        if let Some(endpoint) = self
            .endpoints
            .and_then(|m| m.get(slot))
            .and_then(|v| v.as_str())
        {
            return Ok(SlotFill {
                endpoint,
                fallback: None,
                headers: Headers(None),
                command: None,
                fallback_command: None,
            });
        }
        Err(SlotNotFilledError {
            slot,
            manifest: *self,
        })
    }

    /// The filled slots of both maps, deduplicated, in byte order of their names (no
    /// allocation: each step scans the keys again, fine for a manifest's handful of slots).
    pub fn filled_slots(&self) -> FilledSlots<'a> {
        FilledSlots {
            manifest: *self,
            last: None,
        }
    }

    fn keys(&self) -> impl Iterator<Item = JsonStr<'a>> {
        let fills = self.slot_fills.into_iter().flat_map(|m| m.members());
        let flat = self.endpoints.into_iter().flat_map(|m| m.members());
        fills.chain(flat).map(|(k, _)| k)
    }
}

impl fmt::Debug for Manifest<'_> {
    /// Lists the filled slots only: fills may carry header secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Manifest { slots: [")?;
        for (i, s) in self.filled_slots().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write_name(f, &s)?;
        }
        f.write_str("] }")
    }
}

/// Longest slot name compared exactly when it has escapes; longer escaped names compare by
/// their first this-many unescaped bytes.
const MAX_ESCAPED_NAME: usize = 256;

fn cmp_names(a: &JsonStr<'_>, b: &JsonStr<'_>) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_plain(), b.as_plain()) {
        return x.cmp(y);
    }
    let mut sa = [0u8; MAX_ESCAPED_NAME];
    let mut sb = [0u8; MAX_ESCAPED_NAME];
    let mut ba = Prefix(SliceBuf::new(&mut sa));
    let mut bb = Prefix(SliceBuf::new(&mut sb));
    // On overflow the buffer keeps the first MAX_ESCAPED_NAME bytes.
    let _ = a.unescape_into(&mut ba);
    let _ = b.unescape_into(&mut bb);
    ba.0.bytes().cmp(bb.0.bytes())
}

/// A sink that keeps as much of every piece as fits (a plain `SliceBuf` drops a whole piece
/// that does not fit, which would leave a long name's prefix empty).
struct Prefix<'s>(SliceBuf<'s>);

impl Sink for Prefix<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let room = self.0.limit().saturating_sub(self.0.len());
        let (fits, _) = bytes.split_at_checked(room).unwrap_or((bytes, &[]));
        self.0.put(fits)?;
        if fits.len() < bytes.len() {
            return Err(Overflow {
                limit: self.0.limit(),
                needed: self.0.len().saturating_add(bytes.len() - fits.len()),
            });
        }
        Ok(())
    }
}

/// Iterator over the filled slot names, sorted and deduplicated. See [`Manifest::filled_slots`].
#[derive(Clone)]
pub struct FilledSlots<'a> {
    manifest: Manifest<'a>,
    last: Option<JsonStr<'a>>,
}

impl<'a> Iterator for FilledSlots<'a> {
    type Item = JsonStr<'a>;
    fn next(&mut self) -> Option<JsonStr<'a>> {
        let last = self.last;
        let next = self
            .manifest
            .keys()
            .filter(|k| {
                last.as_ref()
                    .is_none_or(|l| cmp_names(k, l) == Ordering::Greater)
            })
            .min_by(cmp_names)?;
        self.last = Some(next);
        Some(next)
    }
}

/// A slot's static headers: `(name, value)` pairs. The values are secrets of the run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a>(Option<Value<'a>>);

impl<'a> Headers<'a> {
    /// The headers in manifest order.
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter(self.0.map(|v| v.members()))
    }

    /// No headers.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl<'a> IntoIterator for Headers<'a> {
    type Item = (JsonStr<'a>, JsonStr<'a>);
    type IntoIter = HeaderIter<'a>;
    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Headers<'_> {
    /// Names as written, values as `[REDACTED]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (name, _) in self.iter() {
            m.entry(&name, &Redacted(""));
        }
        m.finish()
    }
}

/// Iterator over a slot's headers. See [`Headers::iter`].
#[derive(Clone)]
pub struct HeaderIter<'a>(Option<crate::wire::json::Members<'a>>);

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (JsonStr<'a>, JsonStr<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let members = self.0.as_mut()?;
        members.find_map(|(k, v)| v.as_str().map(|s| (k, s)))
    }
}

/// What a slot resolved to. Strings are raw JSON strings (unescape or `as_plain` them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotFill<'a> {
    /// The primary server's base endpoint.
    pub endpoint: JsonStr<'a>,
    /// The fallback server's base endpoint, if any.
    pub fallback: Option<JsonStr<'a>>,
    /// Static headers sent on every request to this slot (values are secrets of the run).
    pub headers: Headers<'a>,
    /// The primary server is a local process spoken to over stdio (then `endpoint` is its
    /// program's name, a label only).
    pub command: Option<StdioCommand<'a>>,
    /// The fallback server is a local process (then `fallback` is its program's name).
    pub fallback_command: Option<StdioCommand<'a>>,
}

/// A server that is a local process: its command line, extra environment and directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioCommand<'a> {
    argv: Value<'a>,
    /// Variables added to the child's allow-listed environment (values may be secrets: its
    /// `Debug` prints them as `[REDACTED]`).
    pub env: Headers<'a>,
    /// The child's working directory, if given.
    pub cwd: Option<JsonStr<'a>>,
}

impl<'a> StdioCommand<'a> {
    /// The program and its arguments (at least one; every element a string).
    pub fn argv(&self) -> impl Iterator<Item = JsonStr<'a>> + 'a {
        self.argv.elements().filter_map(|e| e.as_str())
    }
}

/// The slot is in neither `slotFills` nor `endpoints`: a provisioning fault.
///
/// Its `Display` is the reference SDK's message (docs/design.md#slots), naming the slot and the filled slots.
#[derive(Clone, Copy)]
pub struct SlotNotFilledError<'a, 's> {
    /// The slot asked for.
    pub slot: &'s str,
    manifest: Manifest<'a>,
}

impl<'a> SlotNotFilledError<'a, '_> {
    /// The slots that are filled, sorted and deduplicated.
    pub fn filled_slots(&self) -> FilledSlots<'a> {
        self.manifest.filled_slots()
    }
}

impl fmt::Display for SlotNotFilledError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "slot '{}' has no endpoint in this run's manifest.\nFilled slots: ",
            self.slot
        )?;
        let mut any = false;
        for s in self.filled_slots() {
            if any {
                f.write_str(", ")?;
            }
            write_name(f, &s)?;
            any = true;
        }
        if !any {
            f.write_str("(none)")?;
        }
        f.write_str(
            ". The Service composition binds an MCP to every required slot; a missing one is a \
             provisioning fault, not something to work around.",
        )
    }
}

impl fmt::Debug for SlotNotFilledError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotNotFilledError(\"{self}\")")
    }
}

impl core::error::Error for SlotNotFilledError<'_, '_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::string::{String, ToString};
    use std::vec::Vec;

    fn s(j: &JsonStr<'_>) -> String {
        let mut storage = [0u8; 256];
        let mut b = SliceBuf::new(&mut storage);
        j.unescape_into(&mut b).unwrap();
        String::from_utf8(b.bytes().to_vec()).unwrap()
    }

    const SEED_MESSAGE: &str = "slot 'kali' has no endpoint in this run's manifest.\nFilled slots: recon, web_proxy. The Service composition binds an MCP to every required slot; a missing one is a provisioning fault, not something to work around.";

    #[test]
    fn seed_message_exactly() {
        let m = Manifest::parse(
            br#"{"slotFills":{"web_proxy":"http://burp:8080","recon":"http://r"},"endpoints":{"recon":"http://old-r"}}"#,
        )
        .unwrap();
        let e = m.resolve("kali").unwrap_err();
        assert_eq!(e.to_string(), SEED_MESSAGE);
        assert_eq!(e.slot, "kali");
    }

    #[test]
    fn no_filled_slots_says_none() {
        let m = Manifest::parse(br#"{"runId":"r1"}"#).unwrap();
        let e = m.resolve("kali").unwrap_err();
        assert!(e.to_string().starts_with(
            "slot 'kali' has no endpoint in this run's manifest.\nFilled slots: (none). The Service"
        ));
    }

    #[test]
    fn slot_fills_first_then_endpoints() {
        let m = Manifest::parse(
            br#"{"endpoints":{"kali":"http://old","recon":"http://r"},
                 "slotFills":{"kali":"http://new"}}"#,
        )
        .unwrap();
        assert_eq!(s(&m.resolve("kali").unwrap().endpoint), "http://new");
        let recon = m.resolve("recon").unwrap();
        assert_eq!(s(&recon.endpoint), "http://r");
        assert_eq!(recon.fallback, None);
        assert!(recon.headers.is_empty());
    }

    #[test]
    fn object_fill_with_fallback_and_headers() {
        let m = Manifest::parse(
            br#"{"slotFills":{"burp":{"endpoint":"http://b1","fallback":"http://b2",
                 "headers":{"authorization":"Bearer s3cr3t-t0ken","x-team":"red"}}}}"#,
        )
        .unwrap();
        let f = m.resolve("burp").unwrap();
        assert_eq!(s(&f.endpoint), "http://b1");
        assert_eq!(s(&f.fallback.unwrap()), "http://b2");
        let hs: Vec<(String, String)> = f.headers.iter().map(|(k, v)| (s(&k), s(&v))).collect();
        assert_eq!(
            hs,
            [
                ("authorization".into(), "Bearer s3cr3t-t0ken".into()),
                ("x-team".into(), "red".into())
            ]
        );
        let dbg = std::format!("{f:?} {m:?}");
        assert!(!dbg.contains("s3cr3t"), "{dbg}");
        assert!(dbg.contains("[REDACTED]"), "{dbg}");
        assert!(dbg.contains("Manifest { slots: [burp] }"), "{dbg}");
    }

    #[test]
    fn command_fills_and_command_fallbacks() {
        let json = br#"{"slotFills":{
            "nmap":{"command":["uvx","nmap-mcp","--x"],"env":{"K":"v1"},"cwd":"/tmp",
                    "fallback":"http://f"},
            "web":{"endpoint":"http://w","fallback":{"command":["web-mcp"]}},
            "old":{"endpoint":"http://o","fallback":{"endpoint":"http://o2"}}}}"#;
        let m = Manifest::parse(json).unwrap();
        let f = m.resolve("nmap").unwrap();
        let c = f.command.unwrap();
        assert_eq!(
            c.argv().map(|a| s(&a)).collect::<std::vec::Vec<_>>(),
            ["uvx", "nmap-mcp", "--x"]
        );
        assert_eq!(s(&f.endpoint), "uvx");
        assert_eq!(
            c.env
                .iter()
                .map(|(k, v)| (s(&k), s(&v)))
                .collect::<std::vec::Vec<_>>(),
            [("K".into(), "v1".into())]
        );
        assert_eq!(c.cwd.map(|d| s(&d)).as_deref(), Some("/tmp"));
        assert_eq!(f.fallback.map(|x| s(&x)).as_deref(), Some("http://f"));
        assert!(f.fallback_command.is_none());
        let w = m.resolve("web").unwrap();
        assert!(w.command.is_none());
        assert_eq!(
            s(&w.fallback_command.unwrap().argv().next().unwrap()),
            "web-mcp"
        );
        let o = m.resolve("old").unwrap();
        assert_eq!(o.fallback.map(|x| s(&x)).as_deref(), Some("http://o2"));
        for (bad, msg) in [
            (
                &br#"{"slotFills":{"a":{"command":[]}}}"#[..],
                "slotFills.a.command must be a non-empty array of strings",
            ),
            (
                br#"{"slotFills":{"a":{"command":["x",1]}}}"#,
                "slotFills.a.command must be a non-empty array of strings",
            ),
            (
                br#"{"slotFills":{"a":{"command":["x"],"env":{"K":1}}}}"#,
                "slotFills.a.env.K must be a string",
            ),
            (
                br#"{"slotFills":{"a":{"command":["x"],"cwd":3}}}"#,
                "slotFills.a.cwd must be a string",
            ),
            (
                br#"{"slotFills":{"a":{"endpoint":"http://a","fallback":{"command":"x"}}}}"#,
                "slotFills.a.fallback.command must be a non-empty array of strings",
            ),
            (
                br#"{"slotFills":{"a":{"endpoint":"http://a","fallback":3}}}"#,
                "slotFills.a.fallback must be a string or an object with an endpoint or a command",
            ),
        ] {
            let e = Manifest::parse(bad).unwrap_err().to_string();
            assert!(e.ends_with(msg), "{e}");
        }
    }

    #[test]
    fn nulls_mean_absent() {
        let m = Manifest::parse(
            br#"{"slotFills":{"a":{"endpoint":"http://a","fallback":null,"headers":null}},"endpoints":null}"#,
        )
        .unwrap();
        let f = m.resolve("a").unwrap();
        assert_eq!(f.fallback, None);
        assert!(f.headers.is_empty());
        assert!(Manifest::parse(br#"{"slotFills":null}"#).is_ok());
    }

    #[test]
    fn filled_slots_sorted_and_deduplicated() {
        let m = Manifest::parse(
            br#"{"slotFills":{"zeta":"z","alpha":"a","mid":"m"},"endpoints":{"mid":"m2","beta":"b","alpha":"a2"}}"#,
        )
        .unwrap();
        let got: Vec<String> = m.filled_slots().map(|k| s(&k)).collect();
        assert_eq!(got, ["alpha", "beta", "mid", "zeta"]);
        // Escaped names compare by their unescaped text.
        let m = Manifest::parse(br#"{"slotFills":{"b":"x","\u0061":"y"},"endpoints":{"a":"z"}}"#)
            .unwrap();
        let got: Vec<String> = m.filled_slots().map(|k| s(&k)).collect();
        assert_eq!(got, ["a", "b"]);
        assert_eq!(s(&m.resolve("a").unwrap().endpoint), "y");
    }

    #[test]
    fn malformed_manifests_name_the_field() {
        let cases: [(&[u8], &str); 10] = [
            (
                br#"{"slotFills":{"kali":{"endpoint":5}}}"#,
                "manifest field slotFills.kali.endpoint must be a string",
            ),
            (
                br#"{"slotFills":{"kali":{}}}"#,
                "manifest field slotFills.kali.endpoint must be a string",
            ),
            (
                br#"{"slotFills":{"kali":{"endpoint":"e","fallback":1}}}"#,
                "manifest field slotFills.kali.fallback must be a string or an object with an endpoint or a command",
            ),
            (
                br#"{"slotFills":{"kali":{"endpoint":"e","headers":[]}}}"#,
                "manifest field slotFills.kali.headers must be an object",
            ),
            (
                br#"{"slotFills":{"kali":{"endpoint":"e","headers":{"authorization":true}}}}"#,
                "manifest field slotFills.kali.headers.authorization must be a string",
            ),
            (
                br#"{"slotFills":{"kali":7}}"#,
                "manifest field slotFills.kali must be a string or an object",
            ),
            (
                br#"{"slotFills":[]}"#,
                "manifest field slotFills must be an object",
            ),
            (
                br#"{"endpoints":"x"}"#,
                "manifest field endpoints must be an object",
            ),
            (
                br#"{"endpoints":{"recon":null}}"#,
                "manifest field endpoints.recon must be a string",
            ),
            (br#"[1]"#, "manifest must be a JSON object"),
        ];
        for (json, msg) in cases {
            let e = Manifest::parse(json).unwrap_err();
            assert_eq!(e.to_string(), msg, "{}", String::from_utf8_lossy(json));
        }
        let e = Manifest::parse(b"{\"slotFills\":").unwrap_err();
        assert!(matches!(e, ManifestError::Json(_)));
        assert!(
            e.to_string().starts_with("manifest is not valid JSON: "),
            "{e}"
        );
    }

    fn manifest_strategy() -> impl Strategy<Value = (Vec<(String, u8)>, Vec<String>)> {
        let name = "[a-z_]{1,6}";
        (
            proptest::collection::vec((name, 0u8..4), 0..6),
            proptest::collection::vec(name, 0..6),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            match Manifest::parse(&bytes) {
                Ok(m) => {
                    let _ = std::format!("{m:?}");
                    if let Err(e) = m.resolve("kali") {
                        prop_assert!(e.to_string().starts_with("slot 'kali' has no endpoint"));
                    }
                }
                Err(e) => prop_assert!(e.to_string().starts_with("manifest ")),
            }
        }

        #[test]
        fn resolution_follows_the_maps((fills, flat) in manifest_strategy(), probe in "[a-z_]{1,6}") {
            // Build slotFills entries of several shapes and a flat endpoints map.
            let mut j = String::from("{\"slotFills\":{");
            for (i, (name, shape)) in fills.iter().enumerate() {
                if i > 0 { j.push(','); }
                let v = match shape {
                    0 => std::format!("\"http://f-{name}\""),
                    1 => std::format!("{{\"endpoint\":\"http://f-{name}\"}}"),
                    2 => std::format!("{{\"endpoint\":\"http://f-{name}\",\"fallback\":\"http://b-{name}\"}}"),
                    _ => std::format!("{{\"endpoint\":\"http://f-{name}\",\"headers\":{{\"authorization\":\"Bearer x\"}}}}"),
                };
                j.push_str(&std::format!("\"{name}\":{v}"));
            }
            j.push_str("},\"endpoints\":{");
            for (i, name) in flat.iter().enumerate() {
                if i > 0 { j.push(','); }
                j.push_str(&std::format!("\"{name}\":\"http://e-{name}\""));
            }
            j.push_str("}}");
            let m = Manifest::parse(j.as_bytes()).unwrap();
            let in_fills = fills.iter().find(|(n, _)| *n == probe);
            let in_flat = flat.contains(&probe);
            match m.resolve(&probe) {
                Ok(f) => {
                    let want = if in_fills.is_some() { std::format!("http://f-{probe}") } else { std::format!("http://e-{probe}") };
                    prop_assert!(in_fills.is_some() || in_flat);
                    prop_assert_eq!(s(&f.endpoint), want);
                    prop_assert_eq!(f.fallback.is_some(), matches!(in_fills, Some((_, 2))));
                }
                Err(e) => {
                    prop_assert!(in_fills.is_none() && !in_flat);
                    let mut names: Vec<String> = fills.iter().map(|(n, _)| n.clone()).chain(flat.iter().cloned()).collect();
                    names.sort();
                    names.dedup();
                    let list = if names.is_empty() { String::from("(none)") } else { names.join(", ") };
                    let want = std::format!("slot '{probe}' has no endpoint in this run's manifest.\nFilled slots: {list}. The Service composition");
                    prop_assert!(e.to_string().starts_with(&want), "{}", e);
                }
            }
        }
    }
}
