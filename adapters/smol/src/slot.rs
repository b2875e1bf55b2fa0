//! `SlotHandle`: one slot of a run (primary, optional fallback), cheap to clone, `Send + Sync`,
//! usable from many tasks at once; and `SlotSpec`, what the manifest says about a slot.
//!
//! Owns: the slot's shared state and the per-call buffers. The calls themselves are the core
//! driver's.

use std::fmt;
use std::sync::Arc;

use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::slots::Manifest;
use verifi_mcp_core::wire::json::JsonStr;

use crate::buf::VecBuf;

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

fn owned(j: &JsonStr<'_>) -> String {
    let mut b = VecBuf::with_limit(usize::MAX);
    // An unbounded VecBuf never overflows.
    let _ = j.unescape_into(&mut b);
    String::from_utf8_lossy(b.bytes()).into_owned()
}

impl SlotSpec {
    /// Resolves `slot` in the manifest JSON with the core's rules (`slotFills[slot]` first, then
    /// the flat `endpoints[slot]`), copied out into owned strings.
    pub fn resolve(manifest_json: &str, slot: &str) -> Result<SlotSpec, SlotNotFilledError> {
        let manifest = match Manifest::parse(manifest_json.as_bytes()) {
            Ok(m) => m,
            // Validated when the context was built; a failure here still names the slot.
            Err(e) => {
                return Err(SlotNotFilledError {
                    slot: slot.to_owned(),
                    filled: Vec::new(),
                    message: format!("slot '{slot}' cannot be resolved: {e}"),
                });
            }
        };
        match manifest.resolve(slot) {
            Ok(fill) => Ok(SlotSpec {
                slot: slot.to_owned(),
                primary: owned(&fill.endpoint),
                fallback: fill.fallback.as_ref().map(owned),
                headers: fill
                    .headers
                    .iter()
                    .map(|(k, v)| (owned(&k), owned(&v)))
                    .collect(),
            }),
            Err(e) => Err(SlotNotFilledError {
                slot: slot.to_owned(),
                filled: e.filled_slots().map(|s| owned(&s)).collect(),
                message: e.to_string(),
            }),
        }
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

    #[test]
    fn slot_fills_win_over_endpoints_and_misses_name_the_filled_slots() {
        let m = r#"{
            "slotFills": { "kali": { "endpoint": "http://a", "fallback": "http://b",
                                     "headers": { "authorization": "Bearer x" } } },
            "endpoints": { "kali": "http://old", "recon": "http://r", "web_proxy": "http://w" }
        }"#;
        let s = SlotSpec::resolve(m, "kali").unwrap();
        assert_eq!(s.primary, "http://a");
        assert_eq!(s.fallback.as_deref(), Some("http://b"));
        assert_eq!(s.headers, vec![("authorization".into(), "Bearer x".into())]);
        assert_eq!(SlotSpec::resolve(m, "recon").unwrap().primary, "http://r");
        let err = SlotSpec::resolve(m, "burp").unwrap_err();
        assert_eq!(err.filled, vec!["kali", "recon", "web_proxy"]);
        assert_eq!(
            err.to_string(),
            "slot 'burp' has no endpoint in this run's manifest.\nFilled slots: kali, recon, \
             web_proxy. The Service composition binds an MCP to every required slot; a missing \
             one is a provisioning fault, not something to work around."
        );
    }
}
