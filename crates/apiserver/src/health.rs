//! `/healthz`, `/livez` and `/readyz` with Kubernetes' named checks: a load
//! balancer or `kubectl get --raw='/readyz?verbose'` sees whether this
//! apiserver can reach its store, not just that the process answers.
//!
//! ```text
//!  GET /readyz?verbose        [+]ping ok
//!                             [+]log ok
//!                             [-]etcd failed: reason withheld      (store unreachable)
//!                             [+]etcd-readiness ok ...
//!                             readyz check failed                 → 500
//!  GET /readyz/etcd           one check: "ok" or 500
//!  GET /readyz?exclude=etcd   the others only
//! ```

use crate::ApiServer;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// How long the store may take to answer the check.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The checks of each endpoint, in Kubernetes' order.
fn checks_of(endpoint: &str) -> &'static [&'static str] {
    match endpoint {
        "readyz" => &["ping", "log", "etcd", "etcd-readiness", "shutdown"],
        _ => &["ping", "log", "etcd"],
    }
}

impl ApiServer {
    /// Why check `name` fails, None when it passes.
    async fn failing(&self, name: &str) -> Option<String> {
        match name {
            "etcd" | "etcd-readiness" => {
                match tokio::time::timeout(STORE_TIMEOUT, self.store.get("/registry/health")).await
                {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(format!("error getting data from the store: {e}")),
                    Err(_) => Some("the store did not answer within 2s".into()),
                }
            }
            "shutdown" if self.is_shutting_down() => Some("process is shutting down".into()),
            _ => None,
        }
    }
}

/// Answers `/<endpoint>[/<check>]` with `verbose` and `exclude` (repeatable) as sent.
pub async fn answer(srv: &ApiServer, path: &str, query: &str) -> Response {
    let text = |code: StatusCode, body: String| {
        (
            code,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    };
    let mut segs = path.trim_matches('/').split('/');
    let endpoint = segs.next().unwrap_or("healthz");
    let all = checks_of(endpoint);
    if let Some(one) = segs.next() {
        if !all.contains(&one) {
            return text(StatusCode::NOT_FOUND, "404 page not found\n".into());
        }
        return match srv.failing(one).await {
            None => text(StatusCode::OK, "ok".into()),
            Some(why) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {why}\n"),
            ),
        };
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let verbose = pairs.iter().any(|(k, _)| k == "verbose");
    let excluded: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut report = String::new();
    let mut failed = false;
    for name in all.iter().filter(|n| !excluded.contains(n)) {
        match srv.failing(name).await {
            None => report.push_str(&format!("[+]{name} ok\n")),
            Some(why) => {
                tracing::warn!(check = name, reason = %why, "{endpoint} check failed");
                failed = true;
                report.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    for name in excluded.iter().filter(|n| all.contains(n)) {
        report.push_str(&format!("[+]{name} excluded: ok\n"));
    }
    match (failed, verbose) {
        (true, _) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{report}{endpoint} check failed\n"),
        ),
        (false, true) => text(StatusCode::OK, format!("{report}{endpoint} check passed\n")),
        (false, false) => text(StatusCode::OK, "ok".into()),
    }
}
