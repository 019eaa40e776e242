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
    let stream = if opts.follow && idx == 0 {
        let who = Following {
            k: k.clone(),
            ns,
            pod,
            container,
            timestamps: opts.timestamps,
            restarts: target.restart_count,
        };
        follow_across_restarts(who, k.runtime.logs(&target.id, opts)).boxed()
    } else {
        k.runtime.logs(&target.id, opts)
    };
    let stream = stream.map(|r| r.map_err(std::io::Error::other));
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

/// The container whose log `kubectl logs -f` follows.
struct Following {
    k: Arc<Kubelet>,
    ns: String,
    pod: String,
    container: String,
    timestamps: bool,
    /// The restart count of the instance being streamed.
    restarts: i32,
}

/// How long a followed log waits for a crashed container to start again
/// (the longest crash-loop back-off).
const RESTART_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl Following {
    /// The container's next instance, once the pod has started it; None when
    /// the pod will not start it again (gone, deleting, finished) or it did
    /// not come within [`RESTART_WAIT`].
    async fn next_instance(&self) -> Option<ContainerInfo> {
        let deadline = tokio::time::Instant::now() + RESTART_WAIT;
        while tokio::time::Instant::now() < deadline {
            let pod = self.k.pods.get(&format!("{}/{}", self.ns, self.pod))?;
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
            if pod.metadata.deletion_timestamp.is_some()
                || matches!(phase, Some("Succeeded" | "Failed"))
                || policy == Some("Never")
            {
                return None;
            }
            let all = self.k.runtime.list(None).await.ok()?;
            let next = all.into_iter().find(|c| {
                c.pod_namespace == self.ns
                    && c.pod_name == self.pod
                    && c.name == self.container
                    && c.restart_count > self.restarts
            });
            if next.is_some() {
                return next;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        None
    }
}

/// A followed log that goes on through restarts: when one instance's log
/// ends and the pod starts the container again, the next instance's log
/// follows, from its beginning, on the same stream.
fn follow_across_restarts(
    who: Following,
    first: futures::stream::BoxStream<'static, crate::runtime::Result<bytes::Bytes>>,
) -> impl futures::Stream<Item = crate::runtime::Result<bytes::Bytes>> + Send + 'static {
    futures::stream::unfold((who, Some(first)), |(mut who, mut current)| async move {
        loop {
            if let Some(stream) = current.as_mut() {
                if let Some(item) = stream.next().await {
                    return Some((item, (who, current)));
                }
            }
            let next = who.next_instance().await?;
            who.restarts = next.restart_count;
            let opts = LogOptions {
                follow: true,
                tail: None,
                timestamps: who.timestamps,
                since: 0,
            };
            current = Some(who.k.runtime.logs(&next.id, opts));
        }
    })
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

/// Prometheus' text, or a 500 saying why the runtime could not be read.
fn metrics_answer(text: anyhow::Result<String>) -> Response {
    match text {
        Ok(text) => (
            [(header::CONTENT_TYPE, minik8s_process::metrics::TEXT_FORMAT)],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response(),
    }
}

async fn kubelet_metrics(State(k): State<Arc<Kubelet>>) -> Response {
    metrics_answer(k.kubelet_metrics().await)
}

async fn cadvisor_metrics(State(k): State<Arc<Kubelet>>) -> Response {
    metrics_answer(k.cadvisor_metrics().await)
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
        .route("/metrics", get(kubelet_metrics))
        .route("/metrics/cadvisor", get(cadvisor_metrics));
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
    let Some(client_ca) = kubelet.config.client_ca_pem.clone() else {
        // Without a cluster CA (a kubelet on the apiserver's plain loopback
        // port, in tests) the port is plain HTTP and open, as it used to be.
        axum::serve(listener, app.with_state(kubelet)).await?;
        return Ok(());
    };
    let app = app
        .layer(axum::middleware::from_fn_with_state(
            kubelet.clone(),
            crate::auth::authenticate_and_authorize,
        ))
        .with_state(kubelet.clone());
    // A self-signed serving certificate, as the kubelet makes one without
    // --tls-cert-file (the apiserver does not check it).
    let ca = minik8s_pki::Ca::generate(&format!(
        "{}-ca@{}",
        kubelet.config.node_name,
        chrono::Utc::now().timestamp()
    ))?;
    let names = vec![
        kubelet.config.node_ip.clone(),
        kubelet.config.node_name.clone(),
        "localhost".into(),
    ];
    let serving = ca.issue(
        &kubelet.config.node_name,
        &[],
        &names,
        minik8s_pki::Usage::Server,
        365,
    )?;
    let tls = minik8s_pki::serve::server_config(&serving.cert_pem, &serving.key_pem, &client_ca)?;
    minik8s_pki::serve::serve(
        listener,
        std::sync::Arc::new(tls),
        app,
        std::future::pending(),
    )
    .await;
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
