//! Trusting a server by a `caBundle` the way Kubernetes (Go's crypto/tls)
//! does, for the apiserver's calls to admission webhooks and extension
//! apiservers.
//!
//! Go accepts a serving certificate that is itself one of the trusted roots,
//! even when it is marked `CA:TRUE`: kopf, cert-manager's self-signed issuer
//! and many development setups make exactly such a certificate and put it in
//! the caBundle. WebPKI (rustls) refuses a CA certificate as an end entity.
//! So the chain is checked by WebPKI first; when that fails, a certificate
//! that is byte for byte one of the bundle's is accepted if it names the
//! server and is within its validity, as Go's verifier finds such a
//! certificate in its root pool. The handshake's signatures are always
//! checked by rustls.

use crate::serve::provider;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};
use std::sync::Arc;
use x509_parser::extensions::GeneralName;

/// A TLS client configuration trusting the certificates of `ca_bundle_pem`.
pub fn client_config(ca_bundle_pem: &str) -> anyhow::Result<rustls::ClientConfig> {
    let bundle: Vec<CertificateDer<'static>> = crate::pem_certificates(ca_bundle_pem)
        .into_iter()
        .map(CertificateDer::from)
        .collect();
    anyhow::ensure!(!bundle.is_empty(), "the caBundle holds no PEM certificate");
    let mut roots = rustls::RootCertStore::empty();
    for c in &bundle {
        // A certificate WebPKI cannot use as a root can still be pinned below.
        let _ = roots.add(c.clone());
    }
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build()?;
    let verifier = CaBundleVerifier { inner, bundle };
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

#[derive(Debug)]
struct CaBundleVerifier {
    inner: Arc<WebPkiServerVerifier>,
    bundle: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for CaBundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let err = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(ok) => return Ok(ok),
            Err(e) => e,
        };
        let pinned = self
            .bundle
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref());
        if pinned && names_and_current(end_entity, server_name, now) {
            return Ok(ServerCertVerified::assertion());
        }
        Err(err)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether `der` is valid at `now` and names `server` in its subject
/// alternative names (a DNS name, `*.` matching one label, or an IP).
fn names_and_current(der: &CertificateDer<'_>, server: &ServerName<'_>, now: UnixTime) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der.as_ref()) else {
        return false;
    };
    let now = x509_parser::time::ASN1Time::from_timestamp(now.as_secs() as i64);
    if !now.is_ok_and(|t| cert.validity().is_valid_at(t)) {
        return false;
    }
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    san.value.general_names.iter().any(|n| match (n, server) {
        (GeneralName::DNSName(d), ServerName::DnsName(want)) => dns_matches(d, want.as_ref()),
        (GeneralName::IPAddress(ip), ServerName::IpAddress(want)) => {
            let want: std::net::IpAddr = (*want).into();
            match want {
                std::net::IpAddr::V4(v4) => *ip == v4.octets(),
                std::net::IpAddr::V6(v6) => *ip == v6.octets(),
            }
        }
        _ => false,
    })
}

fn dns_matches(pattern: &str, name: &str) -> bool {
    let (pattern, name) = (pattern.to_ascii_lowercase(), name.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(rest) => name
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail == rest),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_one_label() {
        assert!(dns_matches("*.svc.example", "hook.svc.example"));
        assert!(!dns_matches("*.svc.example", "a.hook.svc.example"));
        assert!(!dns_matches("*.svc.example", "svc.example"));
        assert!(dns_matches("Hook.Default.svc", "hook.default.svc"));
    }
}
