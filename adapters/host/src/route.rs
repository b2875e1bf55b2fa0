//! `route`: a slot's own way to its servers, from its manifest entry: `proxy` (a URL, or
//! `"none"` for direct), `ca` (a PEM file path or PEM text) and `auth` (OAuth settings, or a
//! static `bearer`), each winning over the context's setting for that slot.
//!
//! Owns: reading those fields and building the slot's [`Route`]. Does not own: the proxy
//! decision itself (`proxy`), the root store (`trust`) or the OAuth flow (`auth`).

use serde_json::Value;

use crate::auth::{AuthConfig, AuthFlow};
use crate::net::{HostNet, Route};
use crate::options::Options;
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

/// A slot's `auth` object in the manifest: `flow`, `client_id`, `client_secret`,
/// `client_private_key` (a PEM file path or PEM text), `client_metadata_url`, `scope`
/// (`bearer` becomes an `authorization` header instead).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SlotAuth {
    /// `auto`, `client-credentials` or `authorization-code`.
    pub flow: Option<String>,
    /// The client id.
    pub client_id: Option<String>,
    /// The client secret.
    pub client_secret: Option<String>,
    /// The private key (PEM text, or a file path read when the slot is made).
    pub client_private_key: Option<String>,
    /// A client ID metadata document URL.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for.
    pub scope: Option<String>,
}

impl std::fmt::Debug for SlotAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotAuth")
            .field("flow", &self.flow)
            .field("client_id", &self.client_id)
            .field("has_secret", &self.client_secret.is_some())
            .field("has_key", &self.client_private_key.is_some())
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scope", &self.scope)
            .finish()
    }
}

impl SlotAuth {
    /// The OAuth settings for the slot: these fields, the context's hook and token store.
    pub fn config(&self, context: Option<&AuthConfig>) -> AuthConfig {
        let key = self.client_private_key.as_ref().map(|k| {
            if k.trim_start().starts_with("-----BEGIN") {
                k.as_bytes().to_vec()
            } else {
                // An unreadable file is an empty key, which the flow reports as not PEM.
                std::fs::read(k).unwrap_or_default()
            }
        });
        AuthConfig {
            flow: self
                .flow
                .as_deref()
                .and_then(AuthFlow::parse)
                .unwrap_or_default(),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            client_private_key: key,
            client_metadata_url: self.client_metadata_url.clone(),
            scope: self.scope.clone(),
            authorize: context.and_then(|c| c.authorize.clone()),
            store: context.and_then(|c| c.store.clone()),
        }
    }
}

/// `slotFills[slot].auth`, if the manifest has one.
pub(crate) fn slot_auth(manifest_json: &str, slot: &str) -> Option<SlotAuth> {
    let v: Value = serde_json::from_str(manifest_json).ok()?;
    let a = v.get("slotFills")?.get(slot)?.get("auth")?;
    let s = |k: &str| a.get(k).and_then(Value::as_str).map(str::to_owned);
    let auth = SlotAuth {
        flow: s("flow"),
        client_id: s("client_id"),
        client_secret: s("client_secret"),
        client_private_key: s("client_private_key"),
        client_metadata_url: s("client_metadata_url"),
        scope: s("scope"),
    };
    (auth != SlotAuth::default()).then_some(auth)
}

/// `slotFills[slot].auth.bearer` as an `authorization` header.
pub(crate) fn slot_bearer(manifest_json: &str, slot: &str) -> Option<(String, String)> {
    let v: Value = serde_json::from_str(manifest_json).ok()?;
    let b = v
        .get("slotFills")?
        .get(slot)?
        .get("auth")?
        .get("bearer")?
        .as_str()?;
    Some(("authorization".to_owned(), format!("Bearer {b}")))
}

/// The route of `slot`: the context's, with the slot's `proxy` and `ca` (its manifest
/// fields) put in.
pub(crate) fn slot_route(
    net: &HostNet,
    options: &Options,
    slot: &str,
    proxy: Option<&str>,
    ca: Option<&str>,
) -> Result<Route, String> {
    let base = net.route();
    let proxy = match proxy {
        Some(p) => ProxyRule::explicit(p).map_err(|e| format!("slot '{slot}': {e}"))?,
        None => base.proxy.clone(),
    };
    let tls = match ca {
        None => base.tls.clone(),
        Some(ca) => {
            let root = if ca.trim_start().starts_with("-----BEGIN") {
                RootCert::Pem(ca.as_bytes().to_vec())
            } else {
                RootCert::pem_file(ca).map_err(|e| format!("slot '{slot}': {e}"))?
            };
            let mut extra = options.root_certs.clone();
            extra.push(root);
            client_config(&Trust {
                extra,
                no_system_roots: false,
                insecure: options.insecure,
            })
            .map_err(|e| format!("slot '{slot}': {e}"))?
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
        let route = |s: &str| {
            // As a slot's spec takes them (`SlotSpec::resolve`).
            let (proxy, ca) = (slot_field(m, s, "proxy"), slot_field(m, s, "ca"));
            slot_route(
                &ctx.run_net(),
                ctx.options(),
                s,
                proxy.as_deref(),
                ca.as_deref(),
            )
        };
        let a = route("a").unwrap();
        assert_eq!(a.proxy.proxy_for(false, "h").unwrap().label(), "http://p:3");
        assert_eq!(a.proxy.secrets()[0], "pw1234");
        let b = route("b").unwrap();
        assert_eq!(b.proxy.proxy_for(false, "h"), None);
        let d = route("d").unwrap();
        assert_eq!(
            d.proxy.proxy_for(false, "127.0.0.1").unwrap().label(),
            "http://ctx:1"
        );
        let c = route("c").unwrap_err();
        assert!(
            c.starts_with("slot 'c': TLS configuration: cannot read CA file"),
            "{c}"
        );
    }

    #[test]
    fn slot_auth_and_bearer_come_from_the_manifest() {
        let m = r#"{"slotFills":{
            "a":{"endpoint":"http://h","auth":{"flow":"client-credentials","client_id":"c",
                 "client_secret":"s3cret-value","scope":"x y"}},
            "b":{"endpoint":"http://h","auth":{"bearer":"static-token-1234"}},
            "c":"http://h"}}"#;
        let a = slot_auth(m, "a").unwrap();
        let cfg = a.config(None);
        assert_eq!(cfg.flow, AuthFlow::ClientCredentials);
        assert_eq!(cfg.client_secret.as_deref(), Some("s3cret-value"));
        assert!(!format!("{a:?}").contains("s3cret-value"));
        assert_eq!(slot_auth(m, "b"), None);
        assert_eq!(
            slot_bearer(m, "b"),
            Some(("authorization".into(), "Bearer static-token-1234".into()))
        );
        assert_eq!(slot_auth(m, "c"), None);
        // The token alone is a secret of the slot too.
        let ctx = HarnessContext::from_manifest_str(
            m,
            "r",
            Options {
                secrets: Some(vec![]),
                ..Options::default()
            },
        )
        .unwrap();
        let b = ctx.mcp("b").unwrap();
        assert!(b.secrets_now().iter().any(|s| s == b"static-token-1234"));
    }
}
