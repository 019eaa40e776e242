//! The web view of the loops, served at `/ui/` beside the API, behind the
//! same authentication and authorization (see `crate::auth::sessions` for
//! how a browser signs in):
//!
//! ```text
//!  GET  /ui/                 the page (index.html, app.js, style.css)
//!  GET  /ui/login            sign-in page; ?code=… trades a login code for the session cookie
//!  POST /ui/session          a one-time login code for the caller (any credentials)
//!  GET  /ui/api/overview     nodes and the pods on them, as the user may see them
//!  GET  /ui/api/journey      one object's journey (?resource=pods&namespace=…&name=…)
//!  GET  /ui/api/controllers  work queue depths and reconciles (who may read /metrics)
//!  GET  /ui/api/watch        server-sent events: "change" whenever a pod or node changes
//!  POST /ui/v1/traces        OTLP/HTTP: the kubelets' spans into the master's store
//!  GET  /ui/v1/contexts      an object's trace context (?uid=), for the components
//! ```

pub mod data;

use crate::auth::UserInfo;
use crate::params::{error_response, json_response, Params};
use crate::ApiServer;
use axum::body::Body;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use minik8s_api::registry;
use minik8s_api::status::ApiError;
use minik8s_trace::SpanStore;
use serde_json::json;
use std::sync::Arc;

pub const PREFIX: &str = "/ui";
pub use crate::auth::sessions::{is_view as is_ui, LOGIN};
pub const TRACES: &str = "/ui/v1/traces";
/// An object's trace context, for the components that continue its journey.
pub const CONTEXTS: &str = "/ui/v1/contexts";
/// The change feed (server-sent events), long-running as a watch.
pub const WATCH: &str = "/ui/api/watch";

const INDEX: &str = include_str!("assets/index.html");
const APP: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");
const LOGIN_PAGE: &str = include_str!("assets/login.html");
const UNAUTHORIZED_PAGE: &str = include_str!("assets/unauthorized.html");

/// The view's state: the recent traces (None: this apiserver keeps none).
/// (The browsers' sessions are an authenticator's: `crate::auth::sessions`.)
#[derive(Default)]
pub struct WebView {
    store: Option<Arc<SpanStore>>,
}

impl WebView {
    pub fn new(store: Option<Arc<SpanStore>>) -> WebView {
        WebView { store }
    }

    pub fn store(&self) -> Option<&Arc<SpanStore>> {
        self.store.as_ref()
    }
}

/// The 401 a browser gets for the view without credentials: the Status
/// code Kubernetes gives, with a page that says how to sign in.
pub fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        UNAUTHORIZED_PAGE,
    )
        .into_response()
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn answer(r: Result<serde_json::Value, ApiError>) -> Response {
    match r {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

/// Serves a request under `/ui` (the caller checked [`is_ui`]).
pub async fn serve(
    srv: &Arc<ApiServer>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    params: &Params,
    user: &UserInfo,
) -> Response {
    let path = uri.path();
    match (method, path) {
        (&Method::GET, "/ui") => {
            (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, "/ui/")]).into_response()
        }
        (&Method::GET, "/ui/") => asset("text/html; charset=utf-8", INDEX),
        (&Method::GET, "/ui/app.js") => asset("text/javascript; charset=utf-8", APP),
        (&Method::GET, "/ui/style.css") => asset("text/css; charset=utf-8", STYLE),
        (&Method::GET, LOGIN) => login(srv, params),
        (&Method::POST, "/ui/session") => {
            let code = srv.sessions.code_for(user);
            json_response(
                StatusCode::CREATED,
                &json!({
                    "kind": "WebViewLogin",
                    "user": user.username,
                    "code": code,
                    "loginPath": format!("{LOGIN}?code={code}"),
                    "expiresInSeconds": crate::auth::sessions::CODE_TTL.as_secs(),
                }),
            )
        }
        (&Method::GET, "/ui/api/overview") => answer(data::overview(srv, user, params).await),
        (&Method::GET, "/ui/api/journey") => answer(data::journey(srv, user, params).await),
        (&Method::GET, "/ui/api/controllers") => answer(data::controllers(srv, user)),
        (&Method::GET, WATCH) => changes(srv),
        (&Method::POST, TRACES) => receive(srv, user, headers, body).await,
        (&Method::GET, CONTEXTS) => context_of(srv, params),
        (
            _,
            "/ui" | "/ui/" | "/ui/app.js" | "/ui/style.css" | LOGIN | "/ui/session" | TRACES
            | CONTEXTS,
        )
        | (_, "/ui/api/overview" | "/ui/api/journey" | "/ui/api/controllers" | "/ui/api/watch") => {
            error_response(&ApiError::new(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource: {method}"
                ),
            ))
        }
        _ => error_response(&ApiError::unknown_path()),
    }
}

/// `GET /ui/v1/contexts?uid=`: the trace context the apiserver keeps for
/// an object (`{"traceparent": …}`), 404 when it has none.
fn context_of(srv: &ApiServer, params: &Params) -> Response {
    let uid = params.get("uid").unwrap_or("");
    match srv.trace_contexts.get(uid) {
        Some(tp) => json_response(StatusCode::OK, &json!({ "traceparent": tp })),
        None => error_response(&ApiError::new(
            404,
            "NotFound",
            format!("no trace context for uid {uid:?}"),
        )),
    }
}

/// `/ui/login`: the sign-in page, or with `?code=` the session cookie
/// and on to the view.
fn login(srv: &ApiServer, params: &Params) -> Response {
    let Some(code) = params.get("code") else {
        return asset("text/html; charset=utf-8", LOGIN_PAGE);
    };
    match srv.sessions.redeem(code) {
        Some(session) => {
            let cookie = format!(
                "{}={session}; Path=/ui/; Max-Age={}; HttpOnly; Secure; SameSite=Strict",
                crate::auth::sessions::COOKIE,
                crate::auth::sessions::SESSION_TTL.as_secs()
            );
            (
                StatusCode::SEE_OTHER,
                [
                    (header::SET_COOKIE, cookie),
                    (header::LOCATION, "/ui/".to_string()),
                ],
            )
                .into_response()
        }
        None => error_response(&ApiError::new(
            401,
            "Unauthorized",
            "the login code is unknown, used or expired: ask for a new one (POST /ui/session)",
        )),
    }
}

/// Server-sent events: `change` whenever a pod or a node changes (from
/// the watch caches), at most every quarter second; a comment every 15 s
/// keeps proxies from closing the stream.
fn changes(srv: &Arc<ApiServer>) -> Response {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let caches = [registry::of::<Pod>(), registry::of::<Node>()]
        .into_iter()
        .filter_map(|info| srv.watch_cache(info));
    let mut feeds = Vec::new();
    for cache in caches {
        if let Ok(sub) = cache.subscribe(cache.latest()) {
            feeds.push(sub.live);
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(4);
    let (note_tx, mut note_rx) = tokio::sync::mpsc::channel::<()>(1);
    for mut feed in feeds {
        let note_tx = note_tx.clone();
        tokio::spawn(async move {
            loop {
                match feed.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if note_tx.is_closed() {
                            return;
                        }
                        let _ = note_tx.try_send(());
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    drop(note_tx);
    tokio::spawn(async move {
        if tx
            .send(Ok(Bytes::from_static(b"retry: 2000\n\n")))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let event =
                tokio::time::timeout(std::time::Duration::from_secs(15), note_rx.recv()).await;
            let chunk: &'static [u8] = match event {
                Ok(Some(())) => b"event: change\ndata: {}\n\n",
                Ok(None) => return,
                Err(_) => b": keep-alive\n\n",
            };
            if tx.send(Ok(Bytes::from_static(chunk))).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    });
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// OTLP/HTTP from a kubelet (or an admin's collector) into the store. A
/// node's spans are kept only for traces of pods bound to it: a node can
/// tell of its own pods' journeys, not write into anyone else's.
async fn receive(
    srv: &Arc<ApiServer>,
    user: &UserInfo,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-protobuf"));
    if !protobuf {
        return error_response(&ApiError::new(
            415,
            "UnsupportedMediaType",
            "OTLP/HTTP traces are accepted as application/x-protobuf",
        ));
    }
    let spans = match minik8s_trace::store::decode_otlp(body) {
        Ok(s) => s,
        Err(e) => return error_response(&ApiError::bad_request(e)),
    };
    let Some(store) = srv.web_view.store() else {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
        )
            .into_response();
    };
    let total = spans.len();
    let kept = match crate::auth::node::node_name(user) {
        Some(node) => own_pods_spans(srv, store, node, spans).await,
        None if user.username == KUBE_PROXY => endpoint_change_spans(store, spans),
        None => spans,
    };
    let rejected = total - kept.len();
    store.add(kept);
    let reply = minik8s_trace::store::export_response(
        rejected,
        "spans of traces this sender has no part in",
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        reply,
    )
        .into_response()
}

/// kube-proxy's user (on every node).
const KUBE_PROXY: &str = "system:kube-proxy";

/// Of kube-proxy's spans, those of traces in which an EndpointSlice was
/// written (its rule syncs follow such a write, and no other trace).
fn endpoint_change_spans(
    store: &SpanStore,
    spans: Vec<minik8s_trace::SpanRecord>,
) -> Vec<minik8s_trace::SpanRecord> {
    let mut verdicts: std::collections::HashMap<String, bool> = Default::default();
    spans
        .into_iter()
        .filter(|s| {
            *verdicts.entry(s.trace_id.clone()).or_insert_with(|| {
                store.any(&s.trace_id, |w| {
                    w.component == "apiserver"
                        && w.attributes.get("resource").map(String::as_str)
                            == Some("endpointslices")
                })
            })
        })
        .collect()
}

/// Of a node's spans, those of traces a pod bound to `node` belongs to.
async fn own_pods_spans(
    srv: &ApiServer,
    store: &SpanStore,
    node: &str,
    spans: Vec<minik8s_trace::SpanRecord>,
) -> Vec<minik8s_trace::SpanRecord> {
    use std::collections::HashMap;
    let mut by_trace: HashMap<String, Vec<minik8s_trace::SpanRecord>> = HashMap::new();
    for s in spans {
        by_trace.entry(s.trace_id.clone()).or_default().push(s);
    }
    let pods = registry::of::<k8s_openapi::api::core::v1::Pod>();
    let mut kept = Vec::new();
    for (trace, spans) in by_trace {
        // The pods the spans name first (a kubelet's sync_pod has `pod`),
        // then those created in the trace; at most a few reads per trace.
        let named = spans
            .iter()
            .filter_map(|s| s.attributes.get("pod"))
            .filter_map(|key| key.split_once('/'))
            .map(|(ns, name)| (ns.to_string(), name.to_string()));
        let created = store
            .created_in(&trace)
            .into_iter()
            .filter(|(resource, _, _)| resource == "pods")
            .map(|(_, ns, name)| (ns, name));
        let mut candidates: Vec<(String, String)> = Vec::new();
        for pod in named.chain(created) {
            if !candidates.contains(&pod) {
                candidates.push(pod);
            }
        }
        let mut own = false;
        for (ns, name) in candidates.into_iter().take(16) {
            let Ok((pod, _)) = srv.read(pods, Some(&ns), &name).await else {
                continue;
            };
            let on_node = pod["spec"]["nodeName"].as_str() == Some(node);
            let uid = pod["metadata"]["uid"].as_str().unwrap_or("");
            let in_trace = srv
                .trace_contexts
                .get(uid)
                .and_then(|tp| minik8s_trace::context::trace_id(&tp))
                .is_some_and(|t| t == trace);
            if on_node && in_trace {
                own = true;
                break;
            }
        }
        if own {
            kept.extend(spans);
        }
    }
    kept
}
