//! The ingress proxy's data path (hyper): a request is routed by the current
//! table (swapped whole on every change, so open connections keep going),
//! sent straight to a ready endpoint picked round robin (the next one when a
//! connect fails), and the answer streamed back. HTTP/1.1 and HTTP/2 in
//! (h2c, or h2 over TLS by ALPN), HTTP/1.1 to the pods, WebSocket upgrades
//! spliced through, TLS terminated with the Ingress's Secret chosen by SNI.
//!
//! ```text
//!   client ─▶ accept (TLS: SNI → Secret's cert) ─▶ route(host, path)
//!              ├─ no rule, no default backend ─▶ 404
//!              ├─ backend unservable / no ready endpoint ─▶ 503
//!              └─ endpoint i, i+1, … (connect) ─▶ forward ─▶ 101? splice both ways
//!                                                └─ all refuse ─▶ 502
//! ```

use super::endpoints::Unservable;
use super::routes::{Backend, Table};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, CONNECTION, HOST, UPGRADE};
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

type Body = BoxBody<Bytes, hyper::Error>;

/// How long a connect to a pod may take before the next endpoint is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Idle connections kept per endpoint.
const POOL_PER_ENDPOINT: usize = 32;

/// Headers that belong to one hop (RFC 9110 §7.6.1), not forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
];

/// What the data path reads: the table, each backend's endpoints, the
/// certificates. Replaced whole by the sync loop.
#[derive(Default)]
pub struct Config {
    pub table: Table,
    pub endpoints: HashMap<Backend, Result<Vec<SocketAddr>, Unservable>>,
    /// Secret (namespace, name) → certificate and key.
    pub certs: HashMap<(String, String), Arc<rustls::sign::CertifiedKey>>,
}

#[derive(Default)]
pub struct Proxy {
    config: RwLock<Arc<Config>>,
    next: Mutex<HashMap<Backend, usize>>,
    pool: Arc<Mutex<HashMap<SocketAddr, Vec<SendRequest<Body>>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("text/plain"));
    r
}

fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.version() == Version::HTTP_11
        && req.headers().contains_key(UPGRADE)
        && req
            .headers()
            .get(CONNECTION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("upgrade"))
}

impl Proxy {
    /// Replaces what requests are routed by (open connections are untouched).
    pub fn set(&self, config: Config) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The endpoints to try for `b`, starting at the next in round robin.
    fn endpoints(&self, cfg: &Config, b: &Backend) -> Option<Vec<SocketAddr>> {
        let all = cfg.endpoints.get(b)?.as_ref().ok()?;
        if all.is_empty() {
            return None;
        }
        let mut next = lock(&self.next);
        let i = next.entry(b.clone()).or_default();
        let start = *i % all.len();
        *i = i.wrapping_add(1);
        Some(all[start..].iter().chain(&all[..start]).copied().collect())
    }

    /// A ready connection to `addr`: an idle pooled one, else a new one.
    async fn connect(&self, addr: SocketAddr) -> std::io::Result<SendRequest<Body>> {
        loop {
            let idle = lock(&self.pool).get_mut(&addr).and_then(Vec::pop);
            match idle {
                Some(s) if s.is_ready() => return Ok(s),
                Some(_) => continue,
                None => break,
            }
        }
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(%addr, error = %e, "ingress backend connection");
            }
        });
        Ok(sender)
    }

    /// Puts `sender` back in the pool once its response is read.
    fn recycle(&self, addr: SocketAddr, mut sender: SendRequest<Body>) {
        let pool = self.pool.clone();
        tokio::spawn(async move {
            if sender.ready().await.is_ok() {
                let mut pool = lock(&pool);
                let idle = pool.entry(addr).or_default();
                if idle.len() < POOL_PER_ENDPOINT {
                    idle.push(sender);
                }
            }
        });
    }

    /// One request: route, pick an endpoint, forward.
    pub async fn handle(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: SocketAddr,
        scheme: &'static str,
    ) -> Result<Response<Body>, Infallible> {
        let host = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                req.headers()
                    .get(HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let cfg = self.config();
        let backend = match cfg.table.route(&host, req.uri().path()) {
            None => return Ok(text(StatusCode::NOT_FOUND, "default backend - 404\n")),
            Some(None) => {
                return Ok(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "503 Service Temporarily Unavailable\n",
                ))
            }
            Some(Some(b)) => b.clone(),
        };
        let Some(endpoints) = self.endpoints(&cfg, &backend) else {
            return Ok(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "503 Service Temporarily Unavailable\n",
            ));
        };
        let upgrade = is_upgrade(&req);
        let client_side = upgrade.then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        for_the_pod(&mut parts, &host, peer, scheme, upgrade);
        // The first endpoint that accepts a connection gets the request.
        let chosen = self.first_reachable(endpoints).await;
        let Some((addr, mut sender)) = chosen else {
            return Ok(text(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n"));
        };
        let mut resp = match sender
            .send_request(Request::from_parts(parts, body.boxed()))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(%addr, error = %e, "ingress: forwarding failed");
                return Ok(text(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n"));
            }
        };
        if upgrade && resp.status() == StatusCode::SWITCHING_PROTOCOLS {
            let pod_side = hyper::upgrade::on(&mut resp);
            if let Some(client_side) = client_side {
                tokio::spawn(async move {
                    if let (Ok(c), Ok(p)) = (client_side.await, pod_side.await) {
                        let (mut c, mut p) = (TokioIo::new(c), TokioIo::new(p));
                        let _ = tokio::io::copy_bidirectional(&mut c, &mut p).await;
                    }
                });
            }
        } else {
            self.recycle(addr, sender);
        }
        Ok(resp.map(|b| b.boxed()))
    }

    /// The first of `endpoints` that accepts a connection, with it.
    async fn first_reachable<I>(&self, endpoints: I) -> Option<(SocketAddr, SendRequest<Body>)>
    where
        I: IntoIterator<Item = SocketAddr>,
    {
        for addr in endpoints {
            match self.connect(addr).await {
                Ok(s) => return Some((addr, s)),
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "ingress: endpoint refused, trying the next")
                }
            }
        }
        None
    }

    /// Serves one accepted connection (plain or TLS) until it closes.
    pub async fn serve_connection<I>(self: Arc<Self>, io: I, peer: SocketAddr, scheme: &'static str)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = self.clone();
        let service =
            hyper::service::service_fn(move |req| proxy.clone().handle(req, peer, scheme));
        let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        if let Err(e) = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .await
        {
            tracing::debug!(%peer, error = %e, "ingress connection");
        }
    }

    /// Accepts plain HTTP (HTTP/1.1 and h2c) on `listener` until the process ends.
    pub async fn serve_http(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(self.clone().serve_connection(stream, peer, "http"));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "ingress accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Accepts TLS on `listener`, the certificate chosen by SNI.
    pub async fn serve_https(self: Arc<Self>, listener: tokio::net::TcpListener) {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(self.tls_config()));
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "ingress accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (acceptor, proxy) = (acceptor.clone(), self.clone());
            tokio::spawn(async move {
                match acceptor.accept(stream).await {
                    Ok(tls) => proxy.serve_connection(tls, peer, "https").await,
                    Err(e) => tracing::debug!(%peer, error = %e, "ingress TLS handshake"),
                }
            });
        }
    }

    fn tls_config(self: &Arc<Self>) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports the default versions")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(BySni(self.clone())));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config
    }
}

/// Picks the certificate of the Ingress TLS entry naming the SNI host.
struct BySni(Arc<Proxy>);

impl std::fmt::Debug for BySni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BySni")
    }
}

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let cfg = self.0.config();
        let secret = cfg.table.tls_secret(hello.server_name()?)?;
        cfg.certs.get(secret).cloned()
    }
}

/// A Secret's `tls.crt` and `tls.key` (PEM) as a serving certificate.
pub fn certified_key(crt: &[u8], key: &[u8]) -> Result<rustls::sign::CertifiedKey, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(crt)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls.crt: {e}"))?;
    if certs.is_empty() {
        return Err("tls.crt: no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("tls.key: {e}"))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| format!("tls.key: {e}"))?;
    Ok(rustls::sign::CertifiedKey::new(certs, signing))
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;

/// The request as the pod gets it: HTTP/1.1, an origin-form target, the
/// client's host kept, hop-by-hop headers gone (but an upgrade's), and the
/// X-Forwarded-* headers an ingress controller adds.
fn for_the_pod(
    parts: &mut hyper::http::request::Parts,
    host: &str,
    peer: SocketAddr,
    scheme: &str,
    upgrade: bool,
) {
    parts.version = Version::HTTP_11;
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    parts.uri = target.parse().unwrap_or_default();
    if let Ok(h) = HeaderValue::from_str(host) {
        parts.headers.insert(HOST, h);
    }
    for h in HOP_BY_HOP {
        parts.headers.remove(*h);
    }
    if upgrade {
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        parts.headers.remove(UPGRADE);
    }
    let forwarded_for = match parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        Some(prev) => format!("{prev}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    for (k, v) in [
        ("x-forwarded-for", forwarded_for),
        ("x-forwarded-host", host.to_string()),
        ("x-forwarded-proto", scheme.to_string()),
        ("x-real-ip", peer.ip().to_string()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            parts.headers.insert(k, v);
        }
    }
}
