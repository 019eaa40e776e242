//! The serverless gateway: every call of a function passes here, so it knows
//! each function's calls in flight (the autoscaler's metric), holds calls
//! while an instance starts (scale from zero, as Knative's activator does),
//! and retries a call once when its instance dies.
//!
//! ```text
//!  POST /function/NS/NAME [?async=true]     GET /calls/ID
//!      │ Function (cache) ─ missing: 404; source broken: 503 with the reason
//!      │ in flight +1 ─────────────────────────────▶ autoscaler samples (scaler.rs)
//!      ▼ no ready instance? scale to ≥ 1 now, wait for one (≤ cold start timeout) ─▶ 504
//!        (a started pod answering /healthz is used before its endpoint is ready;
//!         its pods crash-looping or unable to pull their image: 503 at once, with why)
//!   ready endpoint with the fewest calls ─▶ POST http://POD:8080/ ─ transport error ─▶ once more,
//!                                            elsewhere if possible, on a new connection ─▶ 502
//!      ▼
//!   the function's answer (status and JSON), or 202 {"id"} at once for async
//! ```

use crate::calls::Calls;
use crate::scaler::Scaler;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s_api::serverless::{Function, RUNTIME_PORT};
use minik8s_client::Cache;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Gateway {
    pub(crate) functions: Cache<Function>,
    slices: Cache<EndpointSlice>,
    /// The functions' pods (labelled with the function), to see one that cannot start.
    pods: Cache<Pod>,
    /// Woken on every EndpointSlice change (a held call looks again).
    pub(crate) endpoints_changed: Arc<tokio::sync::Notify>,
    http: reqwest::Client,
    /// For the retry: a new connection, never a pooled one. A pooled
    /// connection may lead to a pod that is gone, whose address another pod
    /// now has (its RST is the first attempt's error).
    fresh_http: reqwest::Client,
    calls: Calls,
    pub(crate) scaler: Scaler,
    /// Calls in flight per instance, to send each call to the least busy one.
    load: Mutex<HashMap<SocketAddr, usize>>,
    /// How long a call waits for a first instance.
    cold_start_timeout: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn error(code: StatusCode, message: String) -> (StatusCode, Value) {
    (code, json!({"error": message}))
}

/// Counts a call in flight on one instance while it lives.
struct OnInstance<'a>(&'a Gateway, SocketAddr);

impl Drop for OnInstance<'_> {
    fn drop(&mut self) {
        if let Some(n) = lock(&self.0.load).get_mut(&self.1) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Gateway {
    pub fn new(
        functions: Cache<Function>,
        slices: Cache<EndpointSlice>,
        pods: Cache<Pod>,
        scaler: Scaler,
        cold_start_timeout: Duration,
    ) -> Gateway {
        Gateway {
            functions,
            slices,
            pods,
            endpoints_changed: Arc::new(tokio::sync::Notify::new()),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .expect("an HTTP client"),
            fresh_http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("an HTTP client"),
            calls: Calls::default(),
            scaler,
            load: Mutex::default(),
            cold_start_timeout,
        }
    }

    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/function/{ns}/{name}", any(invoke))
            .route("/function/{name}", any(invoke_default))
            .route("/calls/{id}", get(call_status))
            .with_state(self)
    }

    /// The ready instances of `ns/name` (its Service's ready endpoints).
    pub fn instances(&self, ns: &str, name: &str) -> Vec<SocketAddr> {
        let service = Function::child_name(name);
        let mut out = Vec::new();
        for s in self.slices.list() {
            if !minik8s_api::endpoints::of_service(&s, ns, &service) {
                continue;
            }
            for (ip, port) in minik8s_api::endpoints::ready(&s, "http") {
                if let Ok(ip) = ip.parse() {
                    out.push(SocketAddr::new(ip, port));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The least busy ready instance not in `failed`, waiting (with the
    /// function woken from zero) until one is ready or the deadline passes.
    async fn pick(
        &self,
        f: &Function,
        failed: &[SocketAddr],
    ) -> Result<SocketAddr, (StatusCode, Value)> {
        let ns = f.metadata.namespace.clone().unwrap_or_default();
        let name = f.metadata.name.clone().unwrap_or_default();
        let deadline = Instant::now() + self.cold_start_timeout;
        let mut woken = false;
        loop {
            let changed = self.endpoints_changed.notified();
            let all = self.instances(&ns, &name);
            let fresh: Vec<SocketAddr> = all
                .iter()
                .filter(|a| !failed.contains(a))
                .copied()
                .collect();
            let choice = if fresh.is_empty() { all } else { fresh };
            if !choice.is_empty() {
                let mut load = lock(&self.load);
                let best = *choice
                    .iter()
                    .min_by_key(|a| load.get(a).copied().unwrap_or(0))
                    .expect("not empty");
                *load.entry(best).or_default() += 1;
                return Ok(best);
            }
            if !woken {
                self.scaler.wake(f).await;
                woken = true;
            }
            let pods: Vec<Arc<Pod>> = self
                .pods
                .list()
                .into_iter()
                .filter(|p| {
                    p.metadata.namespace.as_deref() == Some(ns.as_str())
                        && p.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(minik8s_api::serverless::FUNCTION_LABEL))
                            == Some(&name)
                })
                .collect();
            if let Some(why) = cannot_start(&pods) {
                return Err(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("function {ns}/{name} cannot start an instance: {why}"),
                ));
            }
            // Not ready by its endpoints yet: ask the started pods directly (as
            // Knative's activator does) rather than wait for the readiness
            // probe's period, the kubelet's status write and the EndpointSlice.
            let started: Vec<SocketAddr> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| {
                    let status = p.status.as_ref()?;
                    let running = status
                        .container_statuses
                        .iter()
                        .flatten()
                        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
                    let ip = status.pod_ip.as_deref()?.parse().ok()?;
                    running.then_some(SocketAddr::new(ip, RUNTIME_PORT as u16))
                })
                .filter(|a| !failed.contains(a))
                .collect();
            for addr in &started {
                let healthy = self
                    .http
                    .get(format!("http://{addr}/healthz"))
                    .timeout(Duration::from_millis(300))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if healthy {
                    *lock(&self.load).entry(*addr).or_default() += 1;
                    return Ok(*addr);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(error(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "no instance of function {ns}/{name} became ready within {}s",
                        self.cold_start_timeout.as_secs()
                    ),
                ));
            }
            let poll = if started.is_empty() { 200 } else { 25 };
            let _ = tokio::time::timeout(left.min(Duration::from_millis(poll)), changed).await;
        }
    }

    /// One call, synchronously: the function's status and JSON answer.
    pub async fn call(&self, ns: &str, name: &str, body: Bytes) -> (StatusCode, Value) {
        let Some(f) = self.functions.get(&format!("{ns}/{name}")) else {
            return error(
                StatusCode::NOT_FOUND,
                format!("function \"{ns}/{name}\" not found"),
            );
        };
        let broken = f
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "SourceReady" && c.status == "False")
            });
        if let Some(c) = broken {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "function {ns}/{name} cannot serve: {}: {}",
                    c.reason, c.message
                ),
            );
        }
        let _in_flight = self.scaler.begin(ns, name);
        let mut failed = Vec::new();
        let mut last_error = String::new();
        // A call whose instance dies is tried once more, on another if there is one.
        for attempt in 0..2 {
            let addr = match self.pick(&f, &failed).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            let _on = OnInstance(self, addr);
            let http = if attempt == 0 {
                &self.http
            } else {
                &self.fresh_http
            };
            let sent = http
                .post(format!("http://{addr}/"))
                .header("content-type", "application/json")
                .timeout(f.timeout())
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(resp) => {
                    let code = StatusCode::from_u16(resp.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    return match resp.bytes().await {
                        Ok(b) => (
                            code,
                            serde_json::from_slice(&b)
                                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&b))),
                        ),
                        Err(e) => error(
                            StatusCode::BAD_GATEWAY,
                            format!("reading the answer of {addr}: {e}"),
                        ),
                    };
                }
                Err(e) if e.is_timeout() => {
                    return error(
                        StatusCode::GATEWAY_TIMEOUT,
                        format!(
                            "function {ns}/{name} did not answer within {}s",
                            f.timeout().as_secs()
                        ),
                    )
                }
                Err(e) => {
                    tracing::debug!(function = %format!("{ns}/{name}"), %addr, error = %e, "instance failed; retrying once");
                    last_error = format!("{e}");
                    failed.push(addr);
                }
            }
        }
        error(
            StatusCode::BAD_GATEWAY,
            format!("the instance running the call of {ns}/{name} failed, and so did the retry: {last_error}"),
        )
    }
}

/// Waiting reasons after which a container does not start by itself.
const STUCK: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Why none of a function's pods will become ready without a change (every
/// live pod has a container stuck), or None while one may still start.
pub fn cannot_start(pods: &[Arc<Pod>]) -> Option<String> {
    let live: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let mut why = None;
    for p in &live {
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        let stuck = statuses.into_iter().flatten().find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            if !STUCK.contains(&reason) {
                return None;
            }
            let last = c
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| {
                    let msg = t.message.as_deref().unwrap_or("").trim();
                    let msg = msg.lines().last().unwrap_or("");
                    format!(
                        " (last exit code {}{}{msg})",
                        t.exit_code,
                        if msg.is_empty() { "" } else { ": " }
                    )
                })
                .unwrap_or_default();
            Some(format!(
                "pod {}: {reason}{}{last}",
                p.metadata.name.as_deref().unwrap_or(""),
                waiting
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))
        });
        match stuck {
            Some(w) => why = why.or(Some(w)),
            None => return None,
        }
    }
    why
}

async fn invoke(
    State(gw): State<Arc<Gateway>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let asynchronous = q.get("async").is_some_and(|v| v != "false")
        || headers
            .get("prefer")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("respond-async"));
    if !asynchronous {
        let (code, value) = gw.call(&ns, &name, body).await;
        return (code, Json(value)).into_response();
    }
    if gw.functions.get(&format!("{ns}/{name}")).is_none() {
        let (code, value) = error(
            StatusCode::NOT_FOUND,
            format!("function \"{ns}/{name}\" not found"),
        );
        return (code, Json(value)).into_response();
    }
    let id = gw.calls.start(&format!("{ns}/{name}"));
    let (gw2, id2) = (gw.clone(), id.clone());
    tokio::spawn(async move {
        let (code, value) = gw2.call(&ns, &name, body).await;
        gw2.calls.finish(&id2, code.as_u16(), value);
    });
    (
        StatusCode::ACCEPTED,
        Json(json!({"id": id, "status": "Running", "url": format!("/calls/{id}")})),
    )
        .into_response()
}

/// `/function/NAME`: the `default` namespace, as the course project's gateway has it.
async fn invoke_default(
    state: State<Arc<Gateway>>,
    Path(name): Path<String>,
    q: Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    invoke(state, Path(("default".into(), name)), q, headers, body).await
}

async fn call_status(State(gw): State<Arc<Gateway>>, Path(id): Path<String>) -> Response {
    match gw.calls.get(&id) {
        Some(v) => (StatusCode::OK, Json(v)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no call {id} (calls are kept for an hour)")})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, waiting: Option<&str>, deleting: bool) -> Arc<Pod> {
        let mut p: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"containerStatuses": [{"name": "function", "image": "x", "imageID": "",
                "ready": false, "restartCount": 3,
                "state": match waiting {
                    Some(r) => json!({"waiting": {"reason": r, "message": "back-off 40s restarting failed container"}}),
                    None => json!({"running": {}}),
                },
                "lastState": {"terminated": {"exitCode": 1, "message": "Traceback...\nImportError: no module named x"}}}]}}))
        .unwrap();
        if deleting {
            p.metadata.deletion_timestamp = Some(minik8s_api::meta::time_now());
        }
        Arc::new(p)
    }

    #[test]
    fn a_function_whose_every_pod_is_stuck_cannot_start() {
        assert_eq!(cannot_start(&[]), None);
        let why = cannot_start(&[pod("a", Some("CrashLoopBackOff"), false)]).unwrap();
        assert_eq!(
            why,
            "pod a: CrashLoopBackOff: back-off 40s restarting failed container (last exit code 1: ImportError: no module named x)"
        );
        // One pod that may still start is enough to wait for it.
        assert_eq!(
            cannot_start(&[
                pod("a", Some("CrashLoopBackOff"), false),
                pod("b", Some("ContainerCreating"), false)
            ]),
            None
        );
        assert_eq!(cannot_start(&[pod("a", None, false)]), None);
        // A pod going away does not count either way.
        assert!(
            cannot_start(&[pod("a", Some("ErrImagePull"), false), pod("b", None, true)]).is_some()
        );
    }
}
