//! `trust`: which server certificates a context believes, and why one was refused, in plain
//! words.
//!
//! Owns: the root store (the system's roots through `rustls-native-certs`, the bundled webpki
//! roots, and the caller's `--cacert` / manifest `ca` roots), the explicit `insecure` mode for
//! lab boxes, and turning a rustls certificate error into a sentence a person can act on
//! (self-signed, expired, wrong name, unknown issuer, with a hint at `--cacert`).
//! Does not own: connecting or the handshake itself (`net`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use futures_rustls::rustls::client::WebPkiServerVerifier;
use futures_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use futures_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use futures_rustls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// A root certificate to trust in addition to the system and webpki roots.
#[derive(Debug, Clone)]
pub enum RootCert {
    /// PEM text (one or more `CERTIFICATE` blocks).
    Pem(Vec<u8>),
    /// One DER certificate.
    Der(Vec<u8>),
}

impl RootCert {
    /// The PEM file at `path` (a `--cacert FILE` or a manifest `ca`), read now.
    pub fn pem_file(path: impl AsRef<std::path::Path>) -> Result<RootCert, TlsConfigError> {
        let path = path.as_ref();
        std::fs::read(path)
            .map(RootCert::Pem)
            .map_err(|e| TlsConfigError(format!("cannot read CA file {}: {e}", path.display())))
    }
}

/// A TLS configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfigError(pub(crate) String);

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS configuration: {}", self.0)
    }
}

impl std::error::Error for TlsConfigError {}

/// What a context (or one slot) trusts.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// Roots trusted besides the system's and the bundled ones.
    pub extra: Vec<RootCert>,
    /// Leave the system's root store out (the bundled webpki roots and `extra` remain).
    pub no_system_roots: bool,
    /// Accept any server certificate (signatures are still checked). For lab boxes with
    /// self-signed certificates only; the context says so loudly in its log.
    pub insecure: bool,
}

/// The system's roots, read once per process (an unreadable store gives none, and the bundled
/// roots still apply).
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls client configuration: ring, the webpki roots, the system's roots (unless
/// [`Trust::no_system_roots`]) and [`Trust::extra`], ALPN http/1.1, and certificate errors in
/// plain words.
pub fn client_config(trust: &Trust) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if !trust.no_system_roots {
        // Some system stores hold certificates webpki cannot parse; those are skipped.
        let _ = roots.add_parsable_certificates(system_roots().iter().cloned());
    }
    for root in &trust.extra {
        let certs: Vec<CertificateDer<'static>> = match root {
            RootCert::Der(der) => vec![CertificateDer::from(der.clone())],
            RootCert::Pem(pem) => CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|e| TlsConfigError(format!("bad PEM root: {e}")))?,
        };
        if certs.is_empty() {
            return Err(TlsConfigError("PEM root holds no certificate".into()));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| TlsConfigError(format!("bad root certificate: {e}")))?;
        }
    }
    let provider = provider();
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsConfigError(e.to_string()))?;
    let verifier = Arc::new(PlainWords {
        inner: webpki,
        provider: provider.clone(),
        insecure: trust.insecure,
    });
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Why a server certificate was refused, as a person would say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertProblem {
    /// The certificate signs itself (issuer = subject) and is not among the trusted roots.
    SelfSigned,
    /// Past its `notAfter` (or before its `notBefore`).
    Expired,
    /// Issued for other names than the one connected to.
    WrongName,
    /// Signed by a CA that is not trusted here.
    UnknownIssuer,
}

impl CertProblem {
    /// The sentence (short: it travels in a 64-byte connect-error detail).
    pub fn message(self) -> &'static str {
        match self {
            CertProblem::SelfSigned => "self-signed certificate; trust it with --cacert FILE",
            CertProblem::Expired => "server certificate expired (or not yet valid)",
            CertProblem::WrongName => "certificate is for another host name than the URL's",
            CertProblem::UnknownIssuer => "unknown certificate issuer; trust its CA: --cacert",
        }
    }
}

impl fmt::Display for CertProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CertProblem {}

/// The plain-words reading of a rustls error, when it is about the certificate.
pub fn cert_problem(e: &rustls::Error) -> Option<CertProblem> {
    let rustls::Error::InvalidCertificate(c) = e else {
        return None;
    };
    match c {
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => Some(CertProblem::Expired),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            Some(CertProblem::WrongName)
        }
        CertificateError::UnknownIssuer => Some(CertProblem::UnknownIssuer),
        CertificateError::Other(o) => o.0.downcast_ref::<CertProblem>().copied(),
        _ => None,
    }
}

/// The webpki verifier, with a refusal of a self-issued certificate named as such (webpki
/// calls it an unknown issuer, or `CaUsedAsEndEntity`), and the `insecure` mode.
#[derive(Debug)]
struct PlainWords {
    inner: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
    insecure: bool,
}

impl ServerCertVerifier for PlainWords {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.insecure {
            return Ok(ServerCertVerified::assertion());
        }
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Ok(v) => Ok(v),
            Err(e) => {
                // Expiry and name are the more precise words even for a self-signed one.
                let precise = matches!(
                    cert_problem(&e),
                    Some(CertProblem::Expired | CertProblem::WrongName)
                );
                if !precise && self_issued(end_entity.as_ref()) {
                    Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                        rustls::OtherError(Arc::new(CertProblem::SelfSigned)),
                    )))
                } else {
                    Err(e)
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// One DER element: (tag, contents, rest).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        let len = bytes.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b));
        (len, rest)
    };
    if rest.len() < len {
        return None;
    }
    let (body, rest) = rest.split_at(len);
    Some((tag, body, rest))
}

/// [`self_issued`] for the crate's property tests.
#[cfg(test)]
pub(crate) fn self_issued_for_tests(cert: &[u8]) -> bool {
    self_issued(cert)
}

/// Whether an X.509 certificate's issuer name equals its subject name (byte for byte).
fn self_issued(cert: &[u8]) -> bool {
    let parse = || {
        let (_, certificate, _) = der(cert)?;
        let (_, tbs, _) = der(certificate)?;
        let (tag, _, mut rest) = der(tbs)?;
        if tag != 0xa0 {
            // No explicit version: what we read was the serial number.
            rest = der(tbs)?.2;
        } else {
            rest = der(rest)?.2; // serial
        }
        let rest = der(rest)?.2; // signature algorithm
        let (_, issuer, rest) = der(rest)?;
        let rest = der(rest)?.2; // validity
        let (_, subject, _) = der(rest)?;
        Some(issuer == subject)
    };
    parse().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_issued_reads_issuer_and_subject() {
        let own = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        assert!(self_issued(own.cert.der()));
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["b.test".into()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        assert!(self_issued(ca.der()));
        assert!(!self_issued(leaf.der()));
        assert!(!self_issued(b"\x30\x03junk"));
        assert!(!self_issued(b""));
    }

    #[test]
    fn certificate_errors_read_in_plain_words() {
        use CertificateError as C;
        let of = |c| cert_problem(&rustls::Error::InvalidCertificate(c));
        assert_eq!(of(C::Expired), Some(CertProblem::Expired));
        assert_eq!(of(C::NotValidYet), Some(CertProblem::Expired));
        assert_eq!(of(C::NotValidForName), Some(CertProblem::WrongName));
        assert_eq!(of(C::UnknownIssuer), Some(CertProblem::UnknownIssuer));
        assert_eq!(of(C::BadSignature), None);
        assert_eq!(cert_problem(&rustls::Error::HandshakeNotComplete), None);
        for p in [
            CertProblem::SelfSigned,
            CertProblem::Expired,
            CertProblem::WrongName,
            CertProblem::UnknownIssuer,
        ] {
            assert!(
                p.message().len() <= 64,
                "{p} must fit a connect-error detail"
            );
        }
    }

    #[test]
    fn bad_roots_are_errors() {
        let t = |extra| Trust {
            extra,
            ..Trust::default()
        };
        assert!(client_config(&t(vec![RootCert::Der(b"junk".to_vec())])).is_err());
        assert!(client_config(&t(vec![RootCert::Pem(b"not a pem".to_vec())])).is_err());
        assert!(client_config(&t(vec![])).is_ok());
        assert!(RootCert::pem_file("/nonexistent/ca.pem").is_err());
    }
}
