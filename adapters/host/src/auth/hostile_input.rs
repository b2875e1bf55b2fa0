//! Property tests: every parser of the proxy, trust and OAuth code takes any bytes without a
//! panic, and ends (each input is bounded; work is linear in it).

use proptest::prelude::*;

use super::client::challenge_in_head;
use super::decide::{
    Challenge, UrlParts, authorization_server_metadata_urls, check_resource, resource_metadata_urls,
};
use super::pkce::redirect_params;
use crate::proxy::{NoProxy, Proxy, parse_connect_reply};

/// Strings drawn from the characters these grammars care about, plus letters, digits,
/// controls and non-ASCII.
fn syntaxy() -> impl Strategy<Value = String> {
    let alphabet: Vec<char> = "\"\\, =:/@[]%?#.*\r\n\t\0aZ09_-xé€😀".chars().collect();
    proptest::collection::vec(proptest::sample::select(alphabet), 0..200)
        .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn challenge_parsing_takes_anything(s in syntaxy()) {
        let _ = Challenge::parse(&s);
        let _ = Challenge::parse(&format!("Bearer {s}"));
        let _ = Challenge::parse(&format!("Bearer scope=\"{s}\", resource_metadata={s}"));
    }

    #[test]
    fn url_decisions_take_anything(a in syntaxy(), b in syntaxy()) {
        let _ = UrlParts::parse(&a);
        let _ = UrlParts::parse(&format!("https://{a}"));
        let _ = resource_metadata_urls(&format!("http://{a}"), None);
        let _ = authorization_server_metadata_urls(&format!("https://{b}"));
        let _ = check_resource(&format!("https://{a}"), &format!("https://{b}"));
        let _ = redirect_params(&a);
    }

    #[test]
    fn proxy_settings_take_anything(s in syntaxy(), host in syntaxy()) {
        let _ = Proxy::parse(&s);
        let _ = Proxy::parse(&format!("http://{s}"));
        let n = NoProxy::parse(&s);
        let _ = n.excludes(&host);
    }

    #[test]
    fn heads_take_anything(bytes in proptest::collection::vec(any::<u8>(), 0..600), code in 0u16..1000) {
        let _ = parse_connect_reply(&bytes, true);
        let _ = challenge_in_head(&bytes, code);
        let mut framed = b"HTTP/1.1 ".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = parse_connect_reply(&framed, false);
        let _ = challenge_in_head(&framed, code);
    }

    #[test]
    fn the_der_walker_takes_anything(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = crate::trust::self_issued_for_tests(&bytes);
        let mut seq = vec![0x30, 0x82, 0x02, 0x00];
        seq.extend_from_slice(&bytes);
        let _ = crate::trust::self_issued_for_tests(&seq);
    }
}
