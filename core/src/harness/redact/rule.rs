//! Which variables are secrets of the run (the rule in the parent module's docs), the
//! forms a secret takes inside JSON text, and the `Redacted` wrapper for `Debug` output.

use crate::buf::{Overflow, Sink};
use core::fmt;

/// What replaces each maximal run of secret bytes.
pub const MARKER: &str = "[REDACTED]";

/// Secrets shorter than this many bytes are never redacted (a last-chance scrub, not a
/// design: `docs/design.md#redaction`).
pub const MIN_SECRET_LEN: usize = 4;

const SECRET_WORDS: &[&str] = &[
    "KEY",
    "SECRET",
    "SECRETS",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "PRIVATE",
    "AUTH",
    "APIKEY",
    "COOKIE",
];

const SECRET_SUFFIXES: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "SECRET",
    "TOKEN",
    "APIKEY",
    "CREDENTIALS",
];

const IDENTIFIER_SUFFIXES: &[&str] = &[
    "ID",
    "IDS",
    "URL",
    "URI",
    "ENDPOINT",
    "HOST",
    "HOSTNAME",
    "PORT",
    "ADDR",
    "ADDRESS",
    "DOMAIN",
    "NAME",
    "USER",
    "USERNAME",
    "EMAIL",
    "ACCOUNT",
    "FILE",
    "PATH",
    "DIR",
    "SOCK",
    "SOCKET",
    "REGION",
    "ARN",
    "TYPE",
    "MODE",
    "METHOD",
    "ALGORITHM",
    "VERSION",
    "ENABLED",
    "DISABLED",
    "TIMEOUT",
    "TTL",
    "EXPIRY",
    "LENGTH",
    "SIZE",
    "COUNT",
    "LIMIT",
    "SCOPE",
    "ISSUER",
    "AUDIENCE",
    "PROFILE",
    "PROVIDER",
    "FINGERPRINT",
];

const PUBLIC_WORDS: &[&str] = &["PUBLIC", "PUBLISHABLE"];

const PLACEHOLDERS: &[&str] = &[
    "disabled",
    "enabled",
    "none",
    "null",
    "nil",
    "undefined",
    "unset",
    "false",
    "true",
    "yes",
    "no",
    "on",
    "off",
    "0",
    "1",
    "empty",
    "changeme",
    "password",
    "secret",
    "token",
    "placeholder",
    "dummy",
    "example",
    "redacted",
    "n/a",
];

fn tokens(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    name.split(|&b| b == b'_' || b == b'-')
        .filter(|t| !t.is_empty())
}

fn in_list(token: &[u8], list: &[&str]) -> bool {
    list.iter()
        .any(|w| w.as_bytes().eq_ignore_ascii_case(token))
}

fn ends_with_ci(t: &[u8], suffix: &str) -> bool {
    let s = suffix.as_bytes();
    t.len() >= s.len()
        && t.get(t.len() - s.len()..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(s))
}

fn is_secret_token(token: &[u8]) -> bool {
    in_list(token, SECRET_WORDS) || SECRET_SUFFIXES.iter().any(|s| ends_with_ci(token, s))
}

/// Characters in `v`, counted leniently: every byte that does not continue a UTF-8 sequence
/// (so a value that is not UTF-8 still has a length).
fn char_count(v: &[u8]) -> usize {
    v.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// True when the variable `name=value` holds a secret of the run, by the rule in the module
/// docs: a secret-like name token, no identifier suffix, not public, and a real value of at
/// least 4 characters that is not a placeholder.
///
/// Names and values are bytes: an environment is not always UTF-8, and a value that is not
/// is still a secret to redact (as bytes).
pub fn is_secret_var(name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> bool {
    let (name, value) = (name.as_ref(), value.as_ref());
    if name.eq_ignore_ascii_case(b"PWD") || name.eq_ignore_ascii_case(b"OLDPWD") {
        return false;
    }
    if !tokens(name).any(is_secret_token) {
        return false;
    }
    if tokens(name).any(|t| in_list(t, PUBLIC_WORDS)) {
        return false;
    }
    if tokens(name)
        .last()
        .is_some_and(|t| in_list(t, IDENTIFIER_SUFFIXES))
    {
        return false;
    }
    let v = value.trim_ascii();
    if char_count(v) < MIN_SECRET_LEN {
        return false;
    }
    !in_list(v, PLACEHOLDERS)
}

/// The values among `(name, value)` pairs that are secrets of the run ([`is_secret_var`]).
///
/// An iterator adaptor, so the core allocates nothing. A host reads its environment as bytes
/// (`std::env::vars()` panics on a value that is not UTF-8):
/// `collect_run_secrets(std::env::vars_os().map(|(k, v)| (k.into_encoded_bytes(),
/// v.into_encoded_bytes())))`. Values are yielded as given (not trimmed).
pub fn collect_run_secrets<I, K, V>(vars: I) -> RunSecrets<I::IntoIter>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    RunSecrets {
        inner: vars.into_iter(),
    }
}

/// Iterator returned by [`collect_run_secrets`]: yields each secret value.
#[derive(Debug, Clone)]
pub struct RunSecrets<I> {
    inner: I,
}

impl<I, K, V> Iterator for RunSecrets<I>
where
    I: Iterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    type Item = V;
    fn next(&mut self) -> Option<V> {
        self.inner
            .by_ref()
            .find(|(k, v)| is_secret_var(k.as_ref(), v.as_ref()))
            .map(|(_, v)| v)
    }
}

/// Prints `[REDACTED]` in `Debug` and `Display`: wrap header values and session ids in it
/// wherever a type holding them derives or implements `Debug`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARKER)
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARKER)
    }
}

/// A form a secret takes inside JSON text, for [`write_json_form`].
///
/// A tool that returns JSON inside its text (a Kali-style `{"stdout": "…"}`) shows a secret
/// with a `"` or `\` (or a control character, or, for an encoder that writes ASCII only, a
/// non-ASCII character) escaped; the raw JSON-RPC reply around that text escapes it once more.
/// Each such form is one more pattern for the redactor when it differs from the secret: the
/// host adds them to the secret set ([`json_form_differs`]), so no form needs storage here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonForm {
    /// Escaped once, as most encoders write it: `"` `\` and the control characters only.
    Once,
    /// Escaped once, every non-ASCII character as `\uXXXX` (lower-case hex, surrogate pairs
    /// above U+FFFF), as Python's `json.dumps` writes by default.
    OnceAscii,
    /// [`JsonForm::Once`] escaped again (the JSON text inside a JSON string).
    Twice,
    /// [`JsonForm::OnceAscii`] escaped again.
    TwiceAscii,
}

impl JsonForm {
    /// Every form.
    pub const ALL: [JsonForm; 4] = [
        JsonForm::Once,
        JsonForm::OnceAscii,
        JsonForm::Twice,
        JsonForm::TwiceAscii,
    ];

    fn ascii(self) -> bool {
        matches!(self, JsonForm::OnceAscii | JsonForm::TwiceAscii)
    }
}

/// Whether `secret`'s `form` differs from the secret itself (else it is no new pattern).
pub fn json_form_differs(secret: &[u8], form: JsonForm) -> bool {
    secret
        .iter()
        .any(|&b| b == b'"' || b == b'\\' || b < 0x20 || (form.ascii() && b >= 0x80))
}

/// Writes `secret` in `form` to `out` (a byte that is not UTF-8 stays as it is).
pub fn write_json_form(secret: &[u8], form: JsonForm, out: &mut impl Sink) -> Result<(), Overflow> {
    let ascii = form.ascii();
    match form {
        JsonForm::Once | JsonForm::OnceAscii => escape_json(secret, ascii, out),
        JsonForm::Twice | JsonForm::TwiceAscii => {
            escape_json(secret, ascii, &mut Escaping { out, ascii })
        }
    }
}

/// A sink that JSON-escapes what is put into it on its way to `out`.
struct Escaping<'o, O> {
    out: &'o mut O,
    ascii: bool,
}

impl<O: Sink> Sink for Escaping<'_, O> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        escape_json(bytes, self.ascii, self.out)
    }
}

fn escape_json(s: &[u8], ascii: bool, out: &mut impl Sink) -> Result<(), Overflow> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let unit = |u: u16, out: &mut dyn FnMut(&[u8]) -> Result<(), Overflow>| {
        let h = |n: u16| HEX.get(usize::from(n & 0xf)).copied().unwrap_or(b'0');
        out(&[b'\\', b'u', h(u >> 12), h(u >> 8), h(u >> 4), h(u)])
    };
    let mut put = |b: &[u8]| out.put(b);
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            let mut buf = [0u8; 4];
            match c {
                '"' => put(b"\\\""),
                '\\' => put(b"\\\\"),
                '\n' => put(b"\\n"),
                '\r' => put(b"\\r"),
                '\t' => put(b"\\t"),
                '\u{8}' => put(b"\\b"),
                '\u{c}' => put(b"\\f"),
                c if (c as u32) < 0x20 => unit(c as u16, &mut put),
                c if ascii && !c.is_ascii() => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units).iter() {
                        unit(*u, &mut put)?;
                    }
                    Ok(())
                }
                c => put(c.encode_utf8(&mut buf).as_bytes()),
            }?;
        }
        put(chunk.invalid())?;
    }
    Ok(())
}
