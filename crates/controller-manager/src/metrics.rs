//! `/metrics` in the Prometheus text format: the runner's per-controller
//! queue depth and reconcile counts (`minik8s_client::controller::metrics`).

pub use minik8s_client::controller::metrics::render;

/// Serves `/metrics` (and `/healthz`) on `addr` until the process ends.
pub async fn serve(addr: &str) -> anyhow::Result<()> {
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|| async {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4",
                    )],
                    render(),
                )
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
    axum::serve(listener, app).await?;
    Ok(())
}
