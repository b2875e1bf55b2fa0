//! `route`: a slot's own way to its servers, from its manifest entry: `proxy` (a URL, or
//! `"none"` for direct) and `ca` (a PEM file path or PEM text), each winning over the
//! context's setting for that slot.
//!
//! Owns: reading those two fields and building the slot's [`Route`]. Does not own: the
//! proxy decision itself (`proxy`) or the root store (`trust`).

use serde_json::Value;

use crate::context::Options;
use crate::net::{HostNet, Route};
use crate::proxy::ProxyRule;
use crate::trust::{RootCert, Trust, client_config};

/// `slotFills[slot][field]` as a string (`false` reads as `"none"`), if the manifest has it.
pub(crate) fn slot_field(manifest_json: &str, slot: &str, field: &str) -> Option<String> {
    let v: Value = serde_json::from_str(manifest_json).ok()?;
    match v.get("slotFills")?.get(slot)?.get(field)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(false) => Some("none".into()),
        _ => None,
    }
}

/// The route of a slot: the context's, with the slot's `proxy` and `ca` put in.
pub(crate) fn slot_route(
    net: &HostNet,
    options: &Options,
    spec: &crate::slot::SlotSpec,
) -> Result<Route, String> {
    let base = net.route();
    let proxy = match &spec.proxy {
        Some(p) => ProxyRule::explicit(p).map_err(|e| format!("slot '{}': {e}", spec.slot))?,
        None => base.proxy.clone(),
    };
    let tls = match &spec.ca {
        None => base.tls.clone(),
        Some(ca) => {
            let root = if ca.trim_start().starts_with("-----BEGIN") {
                RootCert::Pem(ca.as_bytes().to_vec())
            } else {
                RootCert::pem_file(ca).map_err(|e| format!("slot '{}': {e}", spec.slot))?
            };
            let mut extra = options.root_certs.clone();
            extra.push(root);
            client_config(&Trust {
                extra,
                no_system_roots: false,
                insecure: options.insecure,
            })
            .map_err(|e| format!("slot '{}': {e}", spec.slot))?
        }
    };
    Ok(Route { proxy, tls })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HarnessContext;

    #[test]
    fn slot_proxy_and_ca_come_from_the_manifest() {
        let m = r#"{"slotFills":{"a":{"endpoint":"http://h","proxy":"http://u:pw1234@p:3"},
                    "b":{"endpoint":"http://h","proxy":false},
                    "c":{"endpoint":"http://h","ca":"/nonexistent/ca.pem"},
                    "d":"http://h"}}"#;
        assert_eq!(
            slot_field(m, "a", "proxy").as_deref(),
            Some("http://u:pw1234@p:3")
        );
        assert_eq!(slot_field(m, "b", "proxy").as_deref(), Some("none"));
        assert_eq!(slot_field(m, "d", "proxy"), None);
        let ctx = HarnessContext::from_manifest_str(
            m,
            "r",
            Options {
                proxy: Some("http://ctx:1".into()),
                secrets: Some(vec![]),
                ..Options::default()
            },
        )
        .unwrap();
        let spec = |s: &str| crate::slot::SlotSpec::resolve(m, s).unwrap();
        let net = &ctx.run_net();
        let a = slot_route(net, ctx.options(), &spec("a")).unwrap();
        assert_eq!(a.proxy.proxy_for(false, "h").unwrap().label(), "http://p:3");
        assert_eq!(a.proxy.secrets()[0], "pw1234");
        let b = slot_route(net, ctx.options(), &spec("b")).unwrap();
        assert_eq!(b.proxy.proxy_for(false, "h"), None);
        let d = slot_route(net, ctx.options(), &spec("d")).unwrap();
        assert_eq!(
            d.proxy.proxy_for(false, "127.0.0.1").unwrap().label(),
            "http://ctx:1"
        );
        let c = slot_route(net, ctx.options(), &spec("c")).unwrap_err();
        assert!(
            c.starts_with("slot 'c': TLS configuration: cannot read CA file"),
            "{c}"
        );
    }
}
