//! `SlotHandle`: one slot of a run (primary, optional fallback), cheap to clone, `Send + Sync`,
//! usable from many tasks at once; and `SlotSpec`, what the manifest says about a slot.
//!
//! Owns: the slot's shared state and the per-call buffers. The calls themselves are the core
//! driver's.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::context::{Run, SlotNotFilledError};

/// What the manifest says about one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSpec {
    /// The slot's name.
    pub slot: String,
    /// The primary endpoint (base URL; MCP is at `/mcp` below it).
    pub primary: String,
    /// The fallback endpoint, if any.
    pub fallback: Option<String>,
    /// Static headers sent on every request (e.g. `authorization`).
    pub headers: Vec<(String, String)>,
}

fn endpoint_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => ["endpoint", "url", "primary"]
            .iter()
            .find_map(|k| o.get(*k))
            .and_then(endpoint_of),
        _ => None,
    }
}

fn filled_slots(manifest: &Value) -> Vec<String> {
    let mut names: Vec<String> = ["slotFills", "endpoints"]
        .iter()
        .filter_map(|k| manifest.get(*k)?.as_object())
        .flat_map(|o| {
            o.iter()
                .filter(|(_, v)| endpoint_of(v).is_some())
                .map(|(k, _)| k.clone())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

impl SlotSpec {
    /// `manifest.slotFills[slot]` first, then the older flat `manifest.endpoints[slot]`. A fill
    /// is an endpoint string, or an object with `endpoint` (or `url`/`primary`), an optional
    /// `fallback` (string or object) and optional `headers` (an object of strings).
    pub fn resolve(manifest: &Value, slot: &str) -> Result<SlotSpec, SlotNotFilledError> {
        let fill = ["slotFills", "endpoints"]
            .iter()
            .filter_map(|k| manifest.get(*k)?.get(slot))
            .find(|v| endpoint_of(v).is_some());
        let Some(fill) = fill else {
            return Err(SlotNotFilledError {
                slot: slot.to_owned(),
                filled: filled_slots(manifest),
            });
        };
        let primary = endpoint_of(fill).unwrap_or_default();
        let fallback = fill.get("fallback").and_then(endpoint_of);
        let headers = fill
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(SlotSpec {
            slot: slot.to_owned(),
            primary,
            fallback,
            headers,
        })
    }
}

pub(crate) struct SlotInner {
    #[allow(dead_code)] // read by the slot calls, wired to the core's driver
    pub(crate) run: Arc<Run>,
    pub(crate) spec: SlotSpec,
}

/// A slot of the run. Clones share one session and one failover state.
#[derive(Clone)]
pub struct SlotHandle {
    pub(crate) inner: Arc<SlotInner>,
}

impl fmt::Debug for SlotHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotHandle")
            .field("slot", &self.inner.spec.slot)
            .field("endpoint", &self.inner.spec.primary)
            .field("fallback", &self.inner.spec.fallback)
            .finish()
    }
}

impl SlotHandle {
    pub(crate) fn new(run: Arc<Run>, spec: SlotSpec) -> Self {
        SlotHandle {
            inner: Arc::new(SlotInner { run, spec }),
        }
    }

    /// The slot's name.
    pub fn slot(&self) -> &str {
        &self.inner.spec.slot
    }

    /// The primary endpoint, as the manifest gives it.
    pub fn endpoint(&self) -> &str {
        &self.inner.spec.primary
    }

    /// The fallback endpoint, if the manifest gives one.
    pub fn fallback(&self) -> Option<&str> {
        self.inner.spec.fallback.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slot_fills_win_over_endpoints_and_misses_name_the_filled_slots() {
        let m = json!({
            "slotFills": { "kali": { "endpoint": "http://a", "fallback": "http://b",
                                     "headers": { "authorization": "Bearer x" } } },
            "endpoints": { "kali": "http://old", "recon": "http://r", "web_proxy": "http://w" }
        });
        let s = SlotSpec::resolve(&m, "kali").unwrap();
        assert_eq!(s.primary, "http://a");
        assert_eq!(s.fallback.as_deref(), Some("http://b"));
        assert_eq!(s.headers, vec![("authorization".into(), "Bearer x".into())]);
        assert_eq!(SlotSpec::resolve(&m, "recon").unwrap().primary, "http://r");
        let err = SlotSpec::resolve(&m, "burp").unwrap_err();
        assert_eq!(
            err.to_string(),
            "slot 'burp' has no endpoint in this run's manifest.\nFilled slots: kali, recon, \
             web_proxy. The Service composition binds an MCP to every required slot; a missing \
             one is a provisioning fault, not something to work around."
        );
    }
}
