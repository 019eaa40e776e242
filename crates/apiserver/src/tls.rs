//! The secure port: TLS (rustls) in front of the same router as the plain
//! port. Each connection's verified client certificate becomes the
//! [`Connection`](crate::auth::Connection) every request on it carries, which
//! authentication reads (CN = user, O = groups).
//!
//! ```text
//!  TCP accept ─▶ TLS handshake (server cert; client cert optional, checked
//!               against the cluster CA) ─▶ HTTP/1.1 or HTTP/2 (ALPN)
//!             ─▶ request + Connection{client_cert} ─▶ router ─▶ http::handle
//! ```

use crate::auth::{Connection, UserInfo};
use anyhow::Context;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// The provider every TLS configuration here uses (one crypto backend).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    minik8s_pki::pem_certificates(pem)
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

/// The user a verified client certificate names.
fn client_user(conn: &rustls::ServerConnection) -> Option<UserInfo> {
    let der = conn.peer_certificates()?.first()?;
    let (cn, orgs) = minik8s_pki::certificate_subject(der)?;
    Some(UserInfo {
        username: cn,
        groups: orgs,
        ..Default::default()
    })
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
            let conn = Connection {
                client_cert: client_user(tls.get_ref().1),
            };
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(conn.clone());
                    router.clone().oneshot(req.map(axum::body::Body::new))
                },
            );
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
}
