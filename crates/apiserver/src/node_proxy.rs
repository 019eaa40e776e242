//! `nodes/NAME/proxy/PATH`: a request passed to the node's kubelet, as
//! kube-apiserver passes it (what `kubectl get --raw
//! /api/v1/nodes/NODE/proxy/metrics/cadvisor` and dashboards read). The
//! caller needs `nodes/proxy`; the apiserver then calls the kubelet with its
//! own client certificate, which the kubelet authorizes in turn.
//!
//! ```text
//!  GET /api/v1/nodes/n1/proxy/metrics?x=1 ──▶ node n1 ──▶ GET https://INTERNAL_IP:10250/metrics?x=1
//!      status, content type and body of the kubelet's answer ◀──┘
//! ```
//!
//! Only GET is passed on (reads are what it is used for); other methods get
//! 405. Exec, attach, logs and port-forward have their own pod subresources.

use crate::ApiServer;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Node;
use minik8s_api::registry;
use minik8s_api::ApiError;
use std::time::Duration;

/// `(node, path after proxy/)` when `path` is a node proxy path.
pub fn route(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/api/v1/nodes/")?;
    let (node, rest) = rest.split_once('/').unwrap_or((rest, ""));
    let proxied = rest
        .strip_prefix("proxy")
        .filter(|r| r.is_empty() || r.starts_with('/'))?;
    (!node.is_empty()).then(|| {
        (
            node.to_string(),
            proxied.trim_start_matches('/').to_string(),
        )
    })
}

impl ApiServer {
    /// The kubelet's answer to `GET /PATH?QUERY` on `node`.
    pub(crate) async fn node_proxy(
        &self,
        node: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<Response, ApiError> {
        let (obj, _) = self.read(registry::of::<Node>(), None, node).await?;
        let mut url = format!("{}/{path}", self.kubelet_url(&obj));
        if let Some(q) = query.filter(|q| !q.is_empty()) {
            url = format!("{url}?{q}");
        }
        let unreachable = |e: reqwest::Error| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("error trying to reach service: {e}"),
            )
        };
        let answer = self
            .kubelet_http()
            .get(&url)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(unreachable)?;
        let status =
            StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let kind = answer
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
        let body = answer.bytes().await.map_err(unreachable)?;
        let mut resp = (status, body).into_response();
        if let Some(kind) = kind {
            resp.headers_mut().insert(header::CONTENT_TYPE, kind);
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_proxy_paths() {
        assert_eq!(
            super::route("/api/v1/nodes/n1/proxy/metrics/cadvisor"),
            Some(("n1".into(), "metrics/cadvisor".into()))
        );
        assert_eq!(
            super::route("/api/v1/nodes/n1/proxy"),
            Some(("n1".into(), "".into()))
        );
        assert_eq!(super::route("/api/v1/nodes/n1/proxyx"), None);
        assert_eq!(super::route("/api/v1/nodes/n1/status"), None);
        assert_eq!(super::route("/api/v1/nodes/n1"), None);
    }
}
