//! What one run is made of: the records (ledger totals, timeline, log) and the redaction
//! helpers. The run itself (what its slots share) is `run_state`'s, so that this file, which
//! nearly every other one uses, imports none of them.
//!
//! Apart from the context (which owns a `Run` and memoizes the slots) so that a slot reads its
//! run without importing the context: imports go one way, context → slot → run.

use std::fmt;
use std::sync::Mutex;

use serde_json::Value;
use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::redact::{
    JsonForm, collect_run_secrets, json_form_differs, redact, write_json_form,
};

use crate::buf::VecBuf;

/// `ctx.mcp(slot)` for a slot the manifest does not fill (owned copy of the core's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotNotFilledError {
    /// The slot asked for.
    pub slot: String,
    /// The slots the manifest does fill, sorted.
    pub filled: Vec<String>,
    /// The message (the TypeScript harness SDK's wording), naming the slot and the filled slots.
    pub message: String,
}

impl fmt::Display for SlotNotFilledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SlotNotFilledError {}

/// Totals of the run's ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerTotals {
    /// Tool calls metered (every attempt, whatever its outcome).
    pub tool_calls: u64,
    /// Bytes of redacted response text metered.
    pub evidence_bytes: u64,
}

/// One timeline event, owned: its kind (`tool_error`, `mcp.fallback_used`,
/// `mcp.no_healthy_tool`, …) and its stable JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    /// The event's kind.
    pub kind: String,
    /// The event as JSON (`{"kind":…,…}`).
    pub json: String,
}

impl TimelineEntry {
    /// The JSON form parsed (for tests and reports).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// What a run records; shared by the context and its slots.
#[derive(Debug, Default)]
pub(crate) struct Records {
    pub(crate) ledger: Mutex<LedgerTotals>,
    pub(crate) timeline: Mutex<Vec<TimelineEntry>>,
    pub(crate) log: Mutex<Vec<String>>,
}

/// The secrets of this process's environment, by the core's rule
/// ([`collect_run_secrets`]). Read as bytes: a value that is not UTF-8 is no panic, and still a
/// secret to redact.
pub fn env_secrets() -> Vec<Vec<u8>> {
    collect_run_secrets(
        std::env::vars_os().map(|(k, v)| (k.into_encoded_bytes(), v.into_encoded_bytes())),
    )
    .collect()
}

/// Adds to `secrets` every JSON form of each (escaped once or twice, ASCII-only or not; the
/// core's [`JsonForm`]) that differs from it and is not there yet: a secret with a `"` or `\`
/// shows up escaped in JSON a tool returned and in the raw reply around it.
pub fn add_json_forms(secrets: &mut Vec<Vec<u8>>) {
    let n = secrets.len();
    for i in 0..n {
        for form in JsonForm::ALL {
            let Some(s) = secrets.get(i) else { break };
            if s.len() < verifi_mcp_core::harness::redact::MIN_SECRET_LEN
                || !json_form_differs(s, form)
            {
                continue;
            }
            let mut out = VecBuf::with_limit(usize::MAX);
            // An unbounded VecBuf never overflows.
            let _ = write_json_form(s, form, &mut out);
            let v = out.bytes().to_vec();
            if !secrets.contains(&v) {
                secrets.push(v);
            }
        }
    }
}

/// `raw` (a reply's JSON text, already redacted by the core) with every secret removed from
/// each decoded string too: a server may escape a secret's characters any way JSON allows
/// (`\u0070` for `p`), which no byte pattern covers. Unchanged when nothing decoded holds a
/// secret (or it is not JSON); else written again from the redacted value.
pub(crate) fn redact_decoded(raw: String, secrets: &[Vec<u8>]) -> String {
    if secrets.is_empty() {
        return raw;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&raw) else {
        return raw;
    };
    let clean = redact_value(v.clone(), secrets);
    if clean == v { raw } else { clean.to_string() }
}

/// Every string of `v` (keys too) redacted: the core redacted the JSON text, and this catches
/// a secret the server wrote with escapes (`\u0041`, `\/`) that only unescaping reveals.
pub(crate) fn redact_value(v: Value, secrets: &[Vec<u8>]) -> Value {
    if secrets.is_empty() {
        return v;
    }
    match v {
        Value::String(s) => Value::String(redact_string(&s, secrets)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| redact_value(x, secrets)).collect()),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, x)| (redact_string(&k, secrets), redact_value(x, secrets)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` with every secret replaced by `[REDACTED]` (the core's rule).
pub(crate) fn redact_string(text: &str, secrets: &[Vec<u8>]) -> String {
    let mut out = VecBuf::with_limit(usize::MAX);
    // An unbounded VecBuf never overflows.
    let _ = redact(text.as_bytes(), secrets, &mut out);
    String::from_utf8_lossy(out.bytes()).into_owned()
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
