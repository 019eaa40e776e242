//! The kubelet's own HTTP server: container logs (which the apiserver proxies
//! for `kubectl logs`) and health.

use crate::runtime::{ContainerInfo, LogOptions};
use crate::Kubelet;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;

fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k)
        .is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

async fn container_logs(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let all = match k.runtime.list(None).await {
        Ok(c) => c,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let mut mine: Vec<&ContainerInfo> = all
        .iter()
        .filter(|c| c.pod_namespace == ns && c.pod_name == pod && c.name == container)
        .collect();
    mine.sort_by_key(|c| std::cmp::Reverse(c.restart_count));
    let idx = if flag(&q, "previous") { 1 } else { 0 };
    let Some(target) = mine.get(idx) else {
        let what = if idx == 1 {
            "previous terminated container"
        } else {
            "container"
        };
        return (
            StatusCode::NOT_FOUND,
            format!("{what} \"{container}\" in pod \"{pod}\" not found"),
        )
            .into_response();
    };
    let tail = q.get("tailLines").and_then(|t| t.parse().ok());
    // sinceSeconds, or sinceTime (RFC 3339), as Unix seconds.
    let since = q
        .get("sinceSeconds")
        .and_then(|s| s.parse::<i64>().ok())
        .map(|s| chrono::Utc::now().timestamp() - s)
        .or_else(|| {
            q.get("sinceTime")
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp())
        })
        .unwrap_or(0);
    let limit = q.get("limitBytes").and_then(|b| b.parse::<usize>().ok());
    let opts = LogOptions {
        follow: flag(&q, "follow"),
        tail,
        timestamps: flag(&q, "timestamps"),
        since,
    };
    let stream = k
        .runtime
        .logs(&target.id, opts)
        .map(|r| r.map_err(std::io::Error::other));
    let stream = match limit {
        None => stream.boxed(),
        Some(limit) => limit_bytes(stream, limit).boxed(),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The first `limit` bytes of a log stream (`limitBytes`), then its end.
fn limit_bytes(
    stream: impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static,
    limit: usize,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    stream.scan(limit, |left, chunk| {
        let out = match chunk {
            Ok(_) if *left == 0 => None,
            Ok(mut b) => {
                b.truncate(*left);
                *left -= b.len();
                Some(Ok(b))
            }
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(out)
    })
}

async fn summary(State(k): State<Arc<Kubelet>>) -> Response {
    match k.summary().await {
        Ok(v) => ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Serves on `--port` until the process ends.
pub async fn serve(kubelet: Arc<Kubelet>) -> anyhow::Result<()> {
    let addr = format!("0.0.0.0:{}", kubelet.config.port);
    let app = axum::Router::new()
        .route("/containerLogs/{ns}/{pod}/{container}", get(container_logs))
        .route("/exec/{ns}/{pod}/{container}", get(crate::exec::exec))
        .route("/attach/{ns}/{pod}/{container}", get(crate::exec::attach))
        .route(
            "/portforward/{ns}/{pod}",
            get(crate::portforward::port_forward),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/stats/summary", get(summary))
        .with_state(kubelet);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limit_bytes_cuts_across_chunks_and_ends_the_stream() {
        let chunks =
            futures::stream::iter(["abc", "defg", "hij"].map(|c| Ok(bytes::Bytes::from(c))));
        let got: Vec<bytes::Bytes> = limit_bytes(chunks, 5).map(|c| c.unwrap()).collect().await;
        assert_eq!(got.concat(), b"abcde");
    }
}
