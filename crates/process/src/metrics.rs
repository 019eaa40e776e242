//! What every component needs to be scraped by Prometheus: its metrics in the
//! text exposition format and a plain HTTP `/metrics` endpoint.
//!
//! Components keep their own metric families (`prometheus-client`
//! registries, or hand-written text) and pass a render function here.
//!
//! ```text
//!   Prometheus ──GET /metrics──▶ serve(addr, render) ──▶ render() ──▶ text
//! ```

use prometheus_client::registry::Registry;

/// The content type of the text exposition format (what Prometheus asks for
/// first and every Kubernetes component answers).
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `registry` in the text format. The OpenMetrics `# EOF` marker is left
/// out, so the text can be joined with other components' families.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
        return String::new();
    }
    out.trim_end_matches("# EOF\n").to_string()
}

/// Histogram buckets for request and sync latencies, in seconds: 1 ms to
/// about 60 s, as Kubernetes' latency histograms span.
pub fn latency_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 17)
}

/// Serves `/metrics` (what `render` returns) and `/healthz` over plain HTTP
/// on `addr` until the process ends; anything else is a 404.
pub async fn serve<F>(addr: &str, render: F) -> std::io::Result<()>
where
    F: Fn() -> String + Send + Sync + 'static,
{
    serve_paths(addr, move |path, _| {
        (path == "/metrics").then(|| (TEXT_FORMAT, render()))
    })
    .await
}

/// Serves GET requests over plain HTTP on `addr` until the process ends:
/// `answer(path, query)` gives the content type and body, or `None` for a
/// 404; `/healthz` answers `ok`.
pub async fn serve_paths<F>(addr: &str, answer: F) -> std::io::Result<()>
where
    F: Fn(&str, &str) -> Option<(&'static str, String)> + Send + Sync + 'static,
{
    use http_body_util::Full;
    use hyper::body::Bytes;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("listening on {addr}: {e}")))?;
    let answer = std::sync::Arc::new(answer);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let answer = answer.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
            let path = req.uri().path();
            let query = req.uri().query().unwrap_or("");
            let (status, kind, body) = match answer(path, query) {
                Some((kind, body)) => (200, kind, body),
                None if path == "/healthz" => (200, "text/plain", "ok".to_string()),
                None => (404, "text/plain", "404 page not found\n".to_string()),
            };
            std::future::ready(
                hyper::Response::builder()
                    .status(status)
                    .header(hyper::header::CONTENT_TYPE, kind)
                    .body(Full::new(Bytes::from(body))),
            )
        });
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    #[tokio::test]
    async fn metrics_are_served_as_text() {
        let mut registry = prometheus_client::registry::Registry::default();
        let requests: Counter = Counter::default();
        registry.register("unit_requests", "Requests.", requests.clone());
        requests.inc();
        let text = super::encode(&registry);
        assert!(text.contains("unit_requests_total 1"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        fn render() -> String {
            "unit_up 1\n".into()
        }
        tokio::spawn({
            let addr = addr.clone();
            async move { super::serve(&addr, render).await }
        });
        let client = reqwest::Client::new();
        let mut tries = 0;
        let answer = loop {
            match client.get(format!("http://{addr}/metrics")).send().await {
                Ok(answer) => break answer,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("GET /metrics: {e}"),
            }
        };
        assert_eq!(answer.status(), 200);
        assert_eq!(
            answer.headers()["content-type"].to_str().unwrap(),
            super::TEXT_FORMAT
        );
        assert_eq!(answer.text().await.unwrap(), "unit_up 1\n");
    }
}
