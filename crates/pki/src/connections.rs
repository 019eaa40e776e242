//! The accept loop every minik8s HTTP server runs (feature `serve`): plain or
//! TLS, with the limits Kubernetes' servers have, so idle or abandoned
//! connections cannot exhaust the process's file descriptors.
//!
//! ```text
//!  accept ─▶ permit (≤ max_connections open; the next accept waits)
//!         ─▶ [TLS handshake, ≤ 10 s] ─▶ HTTP/1.1 or HTTP/2 (headers ≤ 32 s)
//!         ─▶ requests ... idle (no request in flight) for idle_timeout ─▶ closed
//! ```
//!
//! A watch or a log stream is a request in flight, however quiet: only a
//! connection with nothing in flight counts as idle.

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// The verified client certificate of a connection, as every request on it
/// carries it (an extension): its subject's CN and O values, None without one.
#[derive(Debug, Clone, Default)]
pub struct ClientCert(pub Option<(String, Vec<String>)>);

fn client_cert(conn: &rustls::ServerConnection) -> ClientCert {
    ClientCert(
        conn.peer_certificates()
            .and_then(|c| c.first())
            .and_then(|der| crate::certificate_subject(der)),
    )
}

/// Limits of one server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed
    /// (Kubernetes' servers: 90 s, the Go transport's keep-alive).
    pub idle_timeout: Duration,
    /// Time a client has to send a request's headers (Kubernetes: 32 s).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 10_000,
            idle_timeout: Duration::from_secs(90),
            header_read_timeout: Duration::from_secs(32),
        }
    }
}

/// Requests in flight on one connection, and when it was last busy.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `started` of the last request's start or end.
    last_busy_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_busy_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_busy_ms.load(Ordering::Relaxed));
        Some(self.started.elapsed().saturating_sub(last))
    }
}

/// Counts a request as in flight until its response body is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds `guard` until it is sent or dropped (a
/// request's in-flight mark, a concurrency permit).
struct GuardedBody<G> {
    inner: axum::body::Body,
    _guard: G,
}

/// `body`, holding `guard` until it has been sent (or dropped): what keeps a
/// watch counted as in flight for as long as it streams.
pub fn body_with_guard<G: Send + Unpin + 'static>(
    body: axum::body::Body,
    guard: G,
) -> axum::body::Body {
    axum::body::Body::new(GuardedBody {
        inner: body,
        _guard: guard,
    })
}

impl<G: Send + Unpin + 'static> hyper::body::Body for GuardedBody<G> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `router` on `listener` until `shutdown` resolves: over TLS with
/// `tls` (each request then carries the connection's [`ClientCert`]), plain
/// HTTP without.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    limits: Limits,
) {
    let max = limits.max_connections.clamp(1, u32::MAX as usize);
    let permits = Arc::new(tokio::sync::Semaphore::new(max));
    // Tells open connections to finish their requests and close.
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let drained = async {
        closing.send_replace(true);
        // Every connection gives its permit back when it has closed.
        let all = permits.acquire_many(max as u32);
        if tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .is_err()
        {
            tracing::warn!("connections still open 10 s after shutdown");
        }
    };
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return drained.await,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => {
                drop(permit);
                return drained.await;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (tls, router, closing) = (tls.clone(), router.clone(), closing_rx.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => serve_one(TokioIo::new(tcp), None, router, limits, closing).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(tcp);
                    let stream =
                        match tokio::time::timeout(Duration::from_secs(10), handshake).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        };
                    let cert = client_cert(stream.get_ref().1);
                    serve_one(TokioIo::new(stream), Some(cert), router, limits, closing).await
                }
            }
        });
    }
}

/// One connection: HTTP/1.1 or HTTP/2, closed once idle for too long or
/// when the server shuts down (after the requests in flight).
async fn serve_one<I>(
    io: I,
    cert: Option<ClientCert>,
    router: axum::Router,
    limits: Limits,
    mut server_closing: tokio::sync::watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity {
        started: Instant::now(),
        in_flight: AtomicUsize::new(0),
        last_busy_ms: AtomicU64::new(0),
    });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            let in_flight = InFlight::start(&activity);
            if let Some(cert) = &cert {
                req.extensions_mut().insert(cert.clone());
            }
            let router = router.clone();
            async move {
                let resp = router.oneshot(req.map(axum::body::Body::new)).await?;
                Ok::<_, std::convert::Infallible>(
                    resp.map(|inner| body_with_guard(inner, in_flight)),
                )
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    let check_every = (limits.idle_timeout / 4).max(Duration::from_millis(100));
    let mut closing = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            _ = tokio::time::sleep(check_every), if !closing => {
                if activity.idle_for().is_some_and(|idle| idle >= limits.idle_timeout) {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = server_closing.wait_for(|c| *c), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
