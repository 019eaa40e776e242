//! Serving HTTPS (feature `serve`): TLS (rustls) in front of an axum router,
//! as the apiserver's secure port and the kubelet's port do. Client
//! certificates are optional and checked against the cluster CA; each
//! connection's verified certificate subject (CN = user, O = groups) is put
//! into every request it carries, for authentication to read.
//!
//! ```text
//!  TCP accept ─▶ TLS handshake (server cert; client cert optional, checked
//!               against the cluster CA) ─▶ HTTP/1.1 or HTTP/2 (ALPN)
//!             ─▶ request + ClientCert(subject) ─▶ router
//! ```

use anyhow::Context;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The provider every TLS configuration here uses (one crypto backend).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    crate::pem_certificates(pem)
        .into_iter()
        .map(CertificateDer::from)
        .collect()
}

fn key(pem: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).context("reading the private key")
}

/// A server configuration: `cert`/`key` served, client certificates
/// optional and verified against `client_ca`.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> anyhow::Result<rustls::ServerConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(client_ca_pem) {
        roots.add(c).context("adding the client CA")?;
    }
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .allow_unauthenticated()
            .build()
            .context("building the client certificate verifier")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert_pem), key(key_pem)?)
        .context("loading the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The verified client certificate each request carries (made by the accept loop).
pub use crate::connections::ClientCert;

/// A client configuration that presents `cert`/`key` and does not check the
/// server's certificate (the apiserver towards kubelets, as Kubernetes does
/// without --kubelet-certificate-authority).
pub fn insecure_client_config(
    cert_pem: &str,
    key_pem: &str,
) -> anyhow::Result<rustls::ClientConfig> {
    #[derive(Debug)]
    struct AnyServer(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AnyServer {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider())))
        .with_client_auth_cert(certs(cert_pem), key(key_pem)?)
        .context("loading the client certificate")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, with
/// the default connection [`Limits`](crate::connections::Limits).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    crate::connections::serve_connections(
        listener,
        Some(acceptor),
        router,
        shutdown,
        crate::connections::Limits::default(),
    )
    .await
}
