//! The small cryptography of the OAuth client: random values, the PKCE S256 challenge
//! (RFC 7636), the ES256 client assertion of `private_key_jwt` (RFC 7523), and reading the
//! query of a redirect URL.
//!
//! Owns: those byte recipes, on `ring`. Does not own: when they are used (the flow's).

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;

use super::b64url;

/// `n` random bytes, base64url without padding.
pub fn random_urlsafe(n: usize) -> String {
    let mut b = vec![0u8; n];
    // The system's generator; it does not fail on the platforms this adapter runs on, and a
    // zeroed value would only be a weak nonce, never a leak.
    let _ = SystemRandom::new().fill(&mut b);
    b64url(&b)
}

/// The S256 code challenge of `verifier`: base64url(SHA-256(verifier)).
pub fn s256(verifier: &str) -> String {
    b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

/// A signed ES256 client assertion: iss = sub = `client_id`, aud = `audience` (the issuer),
/// a fresh `jti`, valid for 60 s. `key_pem` is a PKCS#8 P-256 private key, PEM.
pub fn es256_assertion(key_pem: &[u8], client_id: &str, audience: &str) -> Result<String, String> {
    let der = PrivatePkcs8KeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("client private key is not a PKCS#8 PEM key: {e}"))?;
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        der.secret_pkcs8_der(),
        &rng,
    )
    .map_err(|_| "client private key is not a P-256 (ES256) key".to_owned())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let header = serde_json::json!({ "alg": "ES256", "typ": "JWT" });
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 60,
        "jti": random_urlsafe(16),
    });
    let signing_input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let sig = key
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| "signing the client assertion failed".to_owned())?;
    Ok(format!("{signing_input}.{}", b64url(sig.as_ref())))
}

/// The query parameters of a redirect URL (or of a bare query), decoded.
pub fn redirect_params(url: &str) -> Vec<(String, String)> {
    let query = url.split_once('?').map_or(url, |(_, q)| q);
    let query = query.split('#').next().unwrap_or("");
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let a = random_urlsafe(32);
        assert_eq!(a.len(), 43);
        assert_ne!(a, random_urlsafe(32));
    }

    #[test]
    fn es256_assertion_verifies_and_names_the_client() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let jwt = es256_assertion(pem.as_bytes(), "client-7", "https://as.example").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-7");
        assert_eq!(claims["sub"], "client-7");
        assert_eq!(claims["aud"], "https://as.example");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        use ring::signature::KeyPair;
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            key.public_key().as_ref(),
        );
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
        assert!(es256_assertion(b"not pem", "c", "a").is_err());
    }

    #[test]
    fn redirect_params_decode() {
        let p = redirect_params("http://127.0.0.1:9/cb?code=a%2Bb&state=s&iss=https%3A%2F%2Fas#f");
        assert_eq!(
            p,
            vec![
                ("code".into(), "a+b".into()),
                ("state".into(), "s".into()),
                ("iss".into(), "https://as".into())
            ]
        );
    }
}
