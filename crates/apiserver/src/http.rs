//! HTTP routing and parameters: the Kubernetes URL layout, onto the verbs of
//! the generic REST operations (`rest.rs`) and the subresources
//! (`subresources.rs`); discovery and OpenAPI (`discovery.rs`).
//!
//! ```text
//!  request ─▶ route(registry, path) ─▶ Target { resource, namespace, name, subresource }
//!          ─▶ Request::dispatch(method) ─▶ ApiServer::{create, update_with, delete, list, watch, …}
//! ```

use crate::apply::ApplyRequest;
use crate::auth;
use crate::decode::{content_type, decode_body, FieldValidation};
use crate::discovery;
use crate::discovery_aggregated;
pub use crate::params::{error_response, json_response, Params};
use crate::proxy::Stream;
use crate::rest::{DeleteOptions, Mode, WriteOpts};
use crate::strategy::ServedKinds;
use crate::subresources::to_scale;
use crate::table;
use crate::ApiServer;
use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use minik8s_api::meta;
use minik8s_api::patch::{apply_patch, PatchType};
use minik8s_api::registry::{Info, Registry, ResourceInfo};
use minik8s_api::ApiError;
use minik8s_wire::versions::AlternateVersion;
use serde_json::{json, Value};
use std::sync::Arc;
use tracing::Instrument;

/// 405 for a method the resource (or path) does not serve, in Kubernetes' words.
fn not_allowed(method: &Method) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    ))
}

/// A request on a resource.
pub struct Target {
    pub info: Info,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
    /// Set when the URL names an older version than the stored one
    /// (autoscaling/v1 HPAs): bodies and answers are converted.
    pub served: Option<Arc<AlternateVersion>>,
}

/// The resource at group/version/plural: a registry entry, or the stored
/// entry of a version served besides it.
fn lookup(
    reg: &ServedKinds,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<(Info, Option<Arc<AlternateVersion>>)> {
    if let Some(info) = reg.by_plural(group, version, plural) {
        // A custom resource's other served version works on the stored one.
        return match reg.strategy(&info).stored_in() {
            Some(alt) => Some((
                reg.by_plural(group, &alt.storage_version, plural)?,
                Some(alt),
            )),
            None => Some((info, None)),
        };
    }
    let alt = minik8s_wire::versions::alternate(group, version, plural)?;
    Some((
        reg.by_plural(&alt.storage_group, &alt.storage_version, plural)?,
        Some(alt),
    ))
}

enum Route {
    /// A document about the server (all GET).
    Document(Document),
    Resource(Target),
}

/// Version, metrics, health, discovery and OpenAPI documents.
enum Document {
    Version,
    /// `/metrics`: Prometheus' text.
    Metrics,
    Api,
    Apis,
    Group(String),
    ResourceList(String, String),
    OpenApiRoot,
    OpenApiGv(String),
    OpenApiV2,
    Health,
}

fn route(reg: &ServedKinds, path: &str) -> Option<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Some(Route::Document(Document::Version)),
        ["metrics"] => return Some(Route::Document(Document::Metrics)),
        ["healthz"] | ["readyz"] | ["livez"] => return Some(Route::Document(Document::Health)),
        ["healthz" | "readyz" | "livez", ..] => return Some(Route::Document(Document::Health)),
        ["openapi", "v3"] => return Some(Route::Document(Document::OpenApiRoot)),
        ["openapi", "v2"] => return Some(Route::Document(Document::OpenApiV2)),
        ["openapi", "v3", rest @ ..] => {
            return Some(Route::Document(Document::OpenApiGv(rest.join("/"))))
        }
        ["api"] => return Some(Route::Document(Document::Api)),
        ["apis"] => return Some(Route::Document(Document::Apis)),
        ["apis", g] => return Some(Route::Document(Document::Group(g.to_string()))),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if rest.is_empty() {
        return Some(Route::Document(Document::ResourceList(
            group.into(),
            version.into(),
        )));
    }
    let namespaced_res = match rest {
        ["namespaces", _, res, ..] => {
            lookup(reg, group, version, res).filter(|(i, _)| i.namespaced)
        }
        _ => None,
    };
    let ((info, served), namespace, name, sub, extra) = match namespaced_res {
        Some(found) => (
            found,
            Some(rest[1].to_string()),
            rest.get(3),
            rest.get(4),
            rest.len() > 5,
        ),
        None => {
            let found = lookup(reg, group, version, rest[0])?;
            if found.0.namespaced && rest.len() > 1 {
                return None;
            }
            (found, None, rest.get(1), rest.get(2), rest.len() > 3)
        }
    };
    if extra {
        return None;
    }
    if let Some(sub) = sub {
        let known = info.subresources.iter().any(|s| s.name() == *sub)
            || reg.strategy(&info).extra_subresources().contains(sub);
        if !known {
            return None;
        }
    }
    Some(Route::Resource(Target {
        info,
        namespace,
        name: name.map(|s| s.to_string()),
        sub: sub.map(|s| s.to_string()),
        served,
    }))
}

/// The largest request body served (kube-apiserver's MaxRequestBodyBytes):
/// above the 1 MiB object limits, so those get their 422.
pub const MAX_REQUEST_BODY: usize = 3 * 1024 * 1024;

/// How much of a too-large body is read and dropped so that the client,
/// still sending, receives the 413 instead of a reset connection.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// The request body, or `Err(drained)` when it is over [`MAX_REQUEST_BODY`]:
/// the rest is read and dropped (up to [`DRAIN_LIMIT`], for at most 30 s)
/// before the answer, as Go's server reads what is left of a body; `drained`
/// says whether it all was.
async fn read_body(body: axum::body::Body) -> Result<Bytes, bool> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept = bytes::BytesMut::new();
    let mut total = 0usize;
    let read = async {
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else {
                return false;
            };
            total += chunk.len();
            if total <= MAX_REQUEST_BODY {
                kept.extend_from_slice(&chunk);
            } else if total > DRAIN_LIMIT {
                return false;
            }
        }
        true
    };
    let complete = tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .unwrap_or(false);
    if total > MAX_REQUEST_BODY {
        return Err(complete);
    }
    // A body the client cut off short: what arrived fails to decode (400).
    Ok(kept.freeze())
}

/// The single entry point for every request: served, then counted and timed
/// (`/metrics`, [`crate::request_metrics`]).
pub async fn handle(
    srv: Arc<ApiServer>,
    conn: Option<auth::Connection>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Response {
    let params = Params::parse(uri.query());
    let watch = params.as_ref().is_ok_and(|p| p.flag("watch"));
    let apply = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/apply-patch"));
    let metric =
        crate::request_metrics::RequestMetric::of(method.as_str(), uri.path(), watch, apply);
    let resp = match params {
        Ok(params) => {
            let srv = srv.clone();
            handle_request(srv, conn, method, uri, headers, body, upgrade, params).await
        }
        Err(e) => error_response(&e),
    };
    srv.request_metrics.done(metric, resp.status().as_u16());
    resp
}

#[allow(clippy::too_many_arguments)]
async fn handle_request(
    srv: Arc<ApiServer>,
    conn: Option<auth::Connection>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    params: Params,
) -> Response {
    let watch = params.flag("watch");
    let user = match srv
        .admit_request(conn.as_ref(), &method, uri.path(), &headers, watch)
        .await
    {
        Ok(user) => user,
        Err(e) if e.code == 401 && crate::ui::is_ui(uri.path()) => {
            return crate::ui::unauthorized()
        }
        Err(e) => return error_response(&e),
    };
    let class = crate::inflight::classify(&method, uri.path(), watch);
    let permit = match srv.inflight.admit(class, &user) {
        Ok(permit) => permit,
        Err(e) => {
            let mut resp = error_response(&e);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return resp;
        }
    };
    let span =
        crate::request_trace::request_span(&user, &method, uri.path(), &headers, &srv.journeys);
    let admitted = handle_admitted(srv, method, uri, headers, body, upgrade, params, user);
    let resp = match span {
        Some(span) => {
            let resp = admitted.instrument(span.clone()).await;
            span.record("status", resp.status().as_u16());
            resp
        }
        None => admitted.await,
    };
    // Held until the answer is sent: a watch counts for as long as it streams.
    match permit {
        Some(p) => resp.map(|b| minik8s_pki::connections::body_with_guard(b, p)),
        None => resp,
    }
}

/// The join script (anyone) and the node bundle's files (joining and
/// joined nodes: RBAC's `system:minik8s:node-bundle`).
async fn node_bundle(
    srv: &ApiServer,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let Some(bundle) = srv.node_bundle.get() else {
        return Err(ApiError::new(
            503,
            "ServiceUnavailable",
            "the node bundle is served on the secure port only (its CA vouches for it)",
        ));
    };
    if uri.path() == crate::node_bundle::JOIN_SCRIPT {
        // HTTP/2 carries the address in the URI, HTTP/1.1 in Host.
        let host = uri.authority().map(|a| a.as_str().to_string()).or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        });
        return bundle.join_script(host.as_deref()).await;
    }
    let rest = uri
        .path()
        .strip_prefix(crate::node_bundle::PREFIX)
        .unwrap_or("");
    bundle.serve(rest).await
}

/// Everything after authentication, authorization and the in-flight limits.
#[allow(clippy::too_many_arguments)]
async fn handle_admitted(
    srv: Arc<ApiServer>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    params: Params,
    user: auth::UserInfo,
) -> Response {
    let body: Bytes = match read_body(body).await {
        Ok(b) => b,
        Err(drained) => return too_large(drained),
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let req = Incoming {
        method,
        uri,
        headers,
        body,
        params,
        user,
        accept,
    };
    if crate::ui::is_ui(req.uri.path()) {
        let Incoming {
            method,
            uri,
            headers,
            body,
            params,
            user,
            ..
        } = &req;
        return crate::ui::serve(&srv, method, uri, headers, body, params, user).await;
    }
    if let Some(resp) = beside_the_api(&srv, &req).await {
        return resp;
    }
    // A group/version registered by an extension apiserver is proxied to it.
    let remote = crate::aggregator::group_version(req.uri.path())
        .and_then(|(g, v)| srv.remote_apiservice(g, v));
    if let Some(apiservice) = remote {
        let pq = req
            .uri
            .path_and_query()
            .map_or(req.uri.path(), |p| p.as_str());
        return srv
            .proxy_to_extension(
                &apiservice,
                &req.user,
                req.method,
                pq,
                &req.headers,
                req.body,
            )
            .await;
    }
    match route(&srv.served(), req.uri.path()) {
        None => error_response(&ApiError::unknown_path()),
        Some(Route::Resource(t)) => serve_resource(srv, req, upgrade, t).await,
        Some(Route::Document(_)) if req.method != Method::GET => {
            error_response(&not_allowed(&req.method))
        }
        Some(Route::Document(d)) => document(&srv, d, &req).await,
    }
}

/// A request as read: its body whole, its `Accept` header.
struct Incoming {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    params: Params,
    user: auth::UserInfo,
    accept: String,
}

/// 413 for a body over the limit.
fn too_large(drained: bool) -> Response {
    let message = format!("Request entity too large: limit is {MAX_REQUEST_BODY}");
    let mut resp = error_response(&ApiError::new(413, "RequestEntityTooLarge", message));
    if !drained {
        // The rest of the body was never read, so this connection
        // cannot carry another request: say so, or the client's pool
        // reuses it and its next request fails.
        resp.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    resp
}

/// The paths served beside the resources: a node's join bundle, the
/// metrics API, the node proxy and the access reviews.
async fn beside_the_api(srv: &Arc<ApiServer>, req: &Incoming) -> Option<Response> {
    let (method, uri) = (&req.method, &req.uri);
    let answer = |r: Result<Response, ApiError>| r.unwrap_or_else(|e| error_response(&e));
    if uri.path() == crate::node_bundle::JOIN_SCRIPT
        || uri.path().starts_with(crate::node_bundle::PREFIX)
    {
        if method != Method::GET {
            return Some(error_response(&not_allowed(method)));
        }
        return Some(answer(node_bundle(srv, uri, &req.headers).await));
    }
    if let Some(rest) = uri.path().strip_prefix(crate::metrics_api::PATH_PREFIX) {
        let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        if method != Method::GET {
            return Some(error_response(&not_allowed(method)));
        }
        let metrics = srv.metrics(&segs, &req.params).await;
        return Some(answer(metrics.map(|v| json_response(StatusCode::OK, &v))));
    }
    if let Some((node, path)) = crate::node_proxy::route(uri.path()) {
        if method != Method::GET {
            return Some(error_response(&not_allowed(method)));
        }
        return Some(answer(srv.node_proxy(&node, &path, uri.query()).await));
    }
    let (review, ns) = auth::reviews::route(uri.path())?;
    if method != Method::POST {
        return Some(error_response(&not_allowed(method)));
    }
    // Reviews have no Table form: a client that accepts only one gets
    // Kubernetes' 406 (conformance: "API metadata HTTP return").
    if let Some(e) = not_acceptable_without_table(&req.accept) {
        return Some(error_response(&e));
    }
    let answered = match decode_body(&req.headers, &req.body) {
        Ok(obj) => {
            srv.review(&review.kind, ns.as_deref(), obj, &req.user)
                .await
        }
        Err(e) => Err(e),
    };
    Some(answer(
        answered.map(|v| json_response(StatusCode::CREATED, &v)),
    ))
}

/// Version, metrics, health, discovery and OpenAPI documents (all GET).
async fn document(srv: &Arc<ApiServer>, r: Document, req: &Incoming) -> Response {
    let accept = &req.accept;
    let found = |v: Option<Value>| match v {
        Some(v) => json_response(StatusCode::OK, &v),
        None => error_response(&ApiError::unknown_path()),
    };
    match r {
        Document::Version => json_response(StatusCode::OK, &discovery::version()),
        Document::Metrics => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, minik8s_process::metrics::TEXT_FORMAT)],
            srv.request_metrics.render(&srv.extra_metrics),
        )
            .into_response(),
        Document::Health => {
            let (path, query) = (req.uri.path(), req.uri.query().unwrap_or(""));
            crate::health::answer(srv, path, query).await
        }
        Document::Api | Document::Apis if discovery_aggregated::wants_aggregated(accept) => {
            let doc = srv.aggregated_discovery(matches!(r, Document::Api));
            aggregated_response(&req.headers, &doc)
        }
        Document::Api => json_response(StatusCode::OK, &discovery::api_versions()),
        Document::Apis => {
            let list = discovery::api_group_list(&srv.served());
            json_response(StatusCode::OK, &srv.with_remote_groups(list))
        }
        Document::Group(g) => {
            found(discovery::api_group(&srv.served(), &g).or_else(|| srv.remote_group(&g)))
        }
        Document::ResourceList(g, v) => found(discovery::resource_list(&srv.served(), &g, &v)),
        Document::OpenApiRoot => {
            json_response(StatusCode::OK, &discovery::openapi_root(&srv.served()))
        }
        Document::OpenApiGv(p) => found(discovery::openapi_gv(&srv.served(), &p)),
        // JSON for whoever asks for it (`kubectl get --raw /openapi/v2`). kubectl's
        // own schema client asks for protobuf only; it gets an empty document,
        // falls back to it for kinds the v3 documents do not list and then
        // reports them as unknown kinds itself.
        Document::OpenApiV2
            if accept.is_empty() || accept.contains("json") || accept.contains("*/*") =>
        {
            json_response(StatusCode::OK, &discovery::openapi_v2(&srv.served()))
        }
        Document::OpenApiV2 => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Vec::new(),
        )
            .into_response(),
    }
}

/// A request on a resource: dispatched, then its warnings added and the
/// answer converted to the version and encoding the client asked for.
async fn serve_resource(
    srv: Arc<ApiServer>,
    req: Incoming,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    t: Target,
) -> Response {
    let streams = req.params.flag("watch")
        || matches!(
            t.sub.as_deref(),
            Some("log" | "exec" | "attach" | "portforward")
        );
    let protobuf = !streams && minik8s_wire::protobuf::preferred(&req.accept);
    let served = t.served.clone();
    let method = req.method;
    let ctx = Request {
        srv,
        params: req.params,
        accept: req.accept,
        headers: req.headers,
        body: req.body,
        raw_query: req.uri.query().unwrap_or("").to_string(),
        upgrade,
        served: served.clone(),
        user: req.user,
        warnings: Default::default(),
        body_duplicates: Default::default(),
        options_kind: match method {
            Method::PUT => "UpdateOptions",
            Method::PATCH => "PatchOptions",
            _ => "CreateOptions",
        },
    };
    let warnings = ctx.warnings.clone();
    let mut resp = match ctx.dispatch(method, t).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    };
    crate::params::add_warnings(&mut resp, warnings.take());
    if let Some(alt) = served {
        resp = crate::answer::convert_answer(resp, alt, streams).await;
    }
    if protobuf {
        crate::answer::to_protobuf(resp).await
    } else {
        resp
    }
}

struct Request {
    srv: Arc<ApiServer>,
    params: Params,
    accept: String,
    headers: HeaderMap,
    body: Bytes,
    /// The query as sent (exec repeats `command=`).
    raw_query: String,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    served: Option<Arc<AlternateVersion>>,
    /// Who is asking (after impersonation).
    user: auth::UserInfo,
    /// Admission's warnings, sent back as `Warning` headers.
    warnings: crate::rest::Warnings,
    /// The options kind of this verb, for errors in its parameters.
    options_kind: &'static str,
    /// Whether the JSON body, once decoded, set a field twice.
    body_duplicates: std::sync::OnceLock<bool>,
}

impl Request {
    /// Routes a resource request by verb, name and subresource: one arm per
    /// route (the table Kubernetes' API installer builds), so it is long
    /// by design; each arm's work is a method of its own or the server's.
    async fn dispatch(self, method: Method, t: Target) -> Result<Response, ApiError> {
        let ns = t.namespace.clone();
        let ns = ns.as_deref();
        let table = table::wants_table(&self.accept);
        match (&method, t.name.as_deref(), t.sub.as_deref()) {
            (&Method::GET, None, None) if self.params.flag("watch") => {
                Ok(self.srv.watch(&t.info, ns, &self.params, table).await)
            }
            (&Method::GET, None, None) => self.list(&t, table).await,
            (&Method::POST, None, None) => {
                let ns = self.required_ns(&t.info, ns)?;
                let obj = self.body_object()?;
                let created = self
                    .srv
                    .create(&t.info, ns, obj, self.write_opts(&t.info, "")?)
                    .await?;
                Ok(json_response(StatusCode::CREATED, &created))
            }
            (&Method::DELETE, None, None) if !self.srv.strategy(&t.info).delete_collection() => {
                Err(not_allowed(&method))
            }
            (&Method::DELETE, None, None) => {
                let opts = self.delete_options()?;
                Ok(json_response(
                    StatusCode::OK,
                    &self
                        .srv
                        .delete_collection(&t.info, ns, &self.params, &opts)
                        .await?,
                ))
            }
            (
                &Method::GET,
                Some(name),
                None | Some("status" | "ephemeralcontainers" | "resize" | "approval"),
            ) => self.read(&t, name, table).await,
            (
                &Method::PUT,
                Some(name),
                sub @ (None | Some("status" | "ephemeralcontainers" | "resize" | "approval")),
            ) => {
                let body = self.body_object()?;
                let (mode, write) = self.mode_and_opts(&t.info, sub)?;
                let out = self
                    .srv
                    .update_with(&t.info, ns, name, mode, write, |_| Ok(body.clone()))
                    .await?;
                Ok(json_response(StatusCode::OK, &out))
            }
            (
                &Method::PATCH,
                Some(name),
                sub @ (None | Some("status" | "ephemeralcontainers" | "resize" | "approval")),
            ) => self.patch(&t, name, sub).await,
            (&Method::DELETE, Some(name), None) => {
                let opts = self.delete_options()?;
                Ok(json_response(
                    StatusCode::OK,
                    &self.srv.delete(&t.info, ns, name, &opts).await?,
                ))
            }
            (&Method::POST, Some(name), Some("token")) => {
                let ns = self.required_ns(&t.info, ns)?.unwrap_or("default");
                let out = self
                    .srv
                    .token_request(ns, name, self.body_object()?)
                    .await?;
                Ok(json_response(StatusCode::CREATED, &out))
            }
            (&Method::GET, Some(name), Some("scale")) => {
                let (obj, _) = self.srv.read(&t.info, ns, name).await?;
                Ok(json_response(
                    StatusCode::OK,
                    &to_scale(&*self.srv.strategy(&t.info), &obj),
                ))
            }
            (&Method::PUT | &Method::PATCH, Some(name), Some("scale")) => {
                self.write_scale(&t, name, method == Method::PATCH).await
            }
            (&Method::POST, Some(name), Some("binding")) => {
                let body = self.body_object()?;
                self.srv.bind(&t.info, ns, name, &body).await?;
                Ok(json_response(
                    StatusCode::CREATED,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                ))
            }
            (&Method::PUT, Some(name), Some("finalize")) => self.finalize(&t, name).await,
            (
                &Method::GET | &Method::POST,
                Some(name),
                Some(sub @ ("exec" | "attach" | "portforward")),
            ) => {
                let ns = ns.unwrap_or("default");
                let sub = match sub {
                    "exec" => Stream::Exec,
                    "attach" => Stream::Attach,
                    _ => Stream::PortForward,
                };
                self.srv
                    .pod_stream(sub, ns, name, &self.raw_query, &self.headers, self.upgrade)
                    .await
            }
            (&Method::POST, Some(name), Some("eviction")) => {
                let body = self.body_object()?;
                let ns = ns.unwrap_or("default");
                let status = self.srv.pod_eviction(ns, name, body).await?;
                Ok(json_response(StatusCode::CREATED, &status))
            }
            (&Method::GET, Some(name), Some("log")) => {
                let websocket = self
                    .headers
                    .get(header::UPGRADE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
                let ws = match (websocket, self.upgrade) {
                    (true, Some(up)) => Some((self.headers.clone(), up)),
                    _ => None,
                };
                self.srv.pod_log(ns, name, &self.params, ws).await
            }
            _ => Err(not_allowed(&method)),
        }
    }

    fn required_ns<'a>(
        &self,
        info: &ResourceInfo,
        ns: Option<&'a str>,
    ) -> Result<Option<&'a str>, ApiError> {
        if info.namespaced && ns.is_none() {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource (post {})",
                info.plural
            )));
        }
        Ok(ns)
    }

    /// The request body as an object of the stored version.
    fn body_object(&self) -> Result<Value, ApiError> {
        let (obj, duplicates) =
            crate::decode::decode_body_noting_duplicates(&self.headers, &self.body)?;
        let _ = self.body_duplicates.set(duplicates);
        Ok(match &self.served {
            // A body without kind or apiVersion is of the URL's version, as in Kubernetes.
            Some(alt)
                if obj.get("kind").is_none_or(|k| *k == *alt.kind)
                    && obj
                        .get("apiVersion")
                        .is_none_or(|v| *v == alt.api_version()) =>
            {
                alt.to_storage(&obj)
            }
            _ => obj,
        })
    }

    fn write_opts(
        &self,
        info: &ResourceInfo,
        subresource: &'static str,
    ) -> Result<WriteOpts, ApiError> {
        let field_validation =
            FieldValidation::parse(self.params.get("fieldValidation"), self.options_kind)?;
        self.check_duplicate_fields(info, field_validation)?;
        Ok(WriteOpts {
            field_validation,
            dry_run: self.dry_run()?,
            manager: Some(self.field_manager()?),
            api_version: match &self.served {
                Some(alt) => alt.api_version(),
                None => info.api_version(),
            },
            subresource,
            warnings: self.warnings.clone(),
            user: Some(self.user.clone()),
        })
    }

    /// A JSON create or update body that sets a field twice: refused
    /// (Strict) or warned about (Warn), as Kubernetes' strict decoder does.
    fn check_duplicate_fields(
        &self,
        info: &ResourceInfo,
        validation: FieldValidation,
    ) -> Result<(), ApiError> {
        let json = content_type(&self.headers).starts_with("application/json");
        // Most bodies were decoded already and found to have none.
        let none_seen = self.body_duplicates.get() == Some(&false);
        if validation == FieldValidation::Ignore
            || self.options_kind == "PatchOptions"
            || !json
            || none_seen
        {
            return Ok(());
        }
        let duplicates: Vec<String> = crate::decode::duplicate_fields(&self.body)
            .into_iter()
            .map(|f| format!("duplicate field \"{f}\""))
            .collect();
        if duplicates.is_empty() {
            return Ok(());
        }
        if validation == FieldValidation::Warn {
            for d in duplicates {
                self.warnings.push(d);
            }
            return Ok(());
        }
        Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            info.kind,
            info.version,
            info.kind,
            duplicates.join(", ")
        )))
    }

    /// GET on a collection: the list, as JSON or as a Table.
    async fn list(&self, t: &Target, table: bool) -> Result<Response, ApiError> {
        let ns = t.namespace.as_deref();
        if table {
            let out = self.srv.list_table(&t.info, ns, &self.params).await?;
            return Ok(json_response(StatusCode::OK, &out));
        }
        let body = self.srv.list_json(&t.info, ns, &self.params).await?;
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response())
    }

    /// GET on one object (or its status-like subresources): as JSON or as
    /// a one-row Table.
    async fn read(&self, t: &Target, name: &str, table: bool) -> Result<Response, ApiError> {
        let ns = t.namespace.as_deref();
        if table {
            let (obj, _) = self.srv.read(&t.info, ns, name).await?;
            let rv = meta::resource_version(&obj).to_string();
            let strategy = self.srv.strategy(&t.info);
            let cells = |o: &Value| strategy.cells(o);
            let table = table::render(&t.info, &cells, &[&obj], &rv, true);
            return Ok(json_response(StatusCode::OK, &table));
        }
        let body = self.srv.read_json(&t.info, ns, name).await?;
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response())
    }

    /// PATCH on one object or a status-like subresource: server-side apply,
    /// or a JSON, merge or strategic merge patch written against the
    /// version in the URL.
    async fn patch(&self, t: &Target, name: &str, sub: Option<&str>) -> Result<Response, ApiError> {
        let (kind, patch) = self.patch_body(&t.info)?;
        let (mode, write) = self.mode_and_opts(&t.info, sub)?;
        if kind == PatchType::Apply {
            return self.server_side_apply(t, name, mode, patch, write).await;
        }
        if self.params.get("force").is_some() {
            return Err(ApiError::new(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"));
        }
        let strategic = self.srv.strategy(&t.info).strategic_merge();
        let ns = t.namespace.as_deref();
        let out = self
            .srv
            .update_with(&t.info, ns, name, mode, write, |old| match &self.served {
                // The patch is written against the version in the URL.
                Some(alt) => {
                    let patched = apply_patch(&alt.from_storage(old), &patch, kind, strategic)?;
                    Ok(alt.to_storage(&patched))
                }
                None => apply_patch(old, &patch, kind, strategic),
            })
            .await?;
        Ok(json_response(StatusCode::OK, &out))
    }

    /// PUT (a new Scale) or PATCH (a patch of the current one) on `scale`.
    async fn write_scale(
        &self,
        t: &Target,
        name: &str,
        patched: bool,
    ) -> Result<Response, ApiError> {
        let patch = if patched {
            Some(self.patch_body(&t.info)?)
        } else {
            None
        };
        let body = if patch.is_none() {
            Some(self.body_object()?)
        } else {
            None
        };
        let change = |scale: &Value| -> Result<Value, ApiError> {
            match (&patch, &body) {
                (Some((kind, p)), _) => apply_patch(scale, p, *kind, true),
                (None, Some(b)) => Ok(b.clone()),
                (None, None) => Err(ApiError::bad_request("the request body is empty")),
            }
        };
        let write = self.write_opts(&t.info, "scale")?;
        let ns = t.namespace.as_deref();
        let out = self
            .srv
            .update_scale(&t.info, ns, name, write, change)
            .await?;
        Ok(json_response(StatusCode::OK, &out))
    }

    /// PUT on a namespace's `finalize`: only `spec.finalizers` changes.
    async fn finalize(&self, t: &Target, name: &str) -> Result<Response, ApiError> {
        let body = self.body_object()?;
        let fin = body
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(json!([]));
        let out = self
            .srv
            .update_with(
                &t.info,
                None,
                name,
                Mode::Main,
                WriteOpts::default(),
                |old| {
                    let mut o = old.clone();
                    o["spec"]["finalizers"] = fin.clone();
                    Ok(o)
                },
            )
            .await?;
        Ok(json_response(StatusCode::OK, &out))
    }

    /// A write to the object or its status subresource.
    fn mode_and_opts(
        &self,
        info: &ResourceInfo,
        sub: Option<&str>,
    ) -> Result<(Mode, WriteOpts), ApiError> {
        Ok(match sub {
            Some("ephemeralcontainers") => (
                Mode::EphemeralContainers,
                self.write_opts(info, "ephemeralcontainers")?,
            ),
            Some("resize") => (Mode::Resize, self.write_opts(info, "resize")?),
            Some(_) => (Mode::Status, self.write_opts(info, "status")?),
            None => (Mode::Main, self.write_opts(info, "")?),
        })
    }

    fn field_manager(&self) -> Result<String, ApiError> {
        let agent = self.headers.get(header::USER_AGENT);
        crate::apply::field_manager(&self.params, agent.and_then(|v| v.to_str().ok()))
    }

    /// PATCH with `application/apply-patch+yaml` (see `apply.rs`).
    async fn server_side_apply(
        &self,
        t: &Target,
        name: &str,
        mode: Mode,
        patch: Value,
        write: WriteOpts,
    ) -> Result<Response, ApiError> {
        let (manager, force) = crate::apply::apply_params(&self.params)?;
        // A configuration in the URL's version is applied in the stored one.
        let applied = match &self.served {
            Some(alt) if patch.is_object() => alt.to_storage(&patch),
            _ => patch,
        };
        let req = ApplyRequest {
            applied,
            manager,
            force,
        };
        let ns = t.namespace.as_deref();
        let (created, out) = self.srv.apply(&t.info, ns, name, mode, req, write).await?;
        let code = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok(json_response(code, &out))
    }

    /// `dryRun=All` (the only value Kubernetes knows).
    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.params.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}: supported values: \"All\""
            ))),
        }
    }

    fn patch_body(&self, info: &ResourceInfo) -> Result<(PatchType, Value), ApiError> {
        let ct = content_type(&self.headers);
        let kind = PatchType::from_content_type(&ct)
            .ok_or_else(|| ApiError::unsupported_media_type(crate::decode::PATCH_MEDIA_TYPES))?;
        if kind == PatchType::Strategic && !Registry::is_builtin(info) {
            // Custom resources have no patch strategies, so Kubernetes refuses it.
            return Err(ApiError::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        if kind == PatchType::Strategic && !self.srv.strategy(info).strategic_merge() {
            // The built-in LWS (a CRD upstream) takes it as a merge patch.
            tracing::debug!("strategic merge patch on a custom resource treated as merge patch");
        }
        let v: Value = if ct.contains("yaml") {
            serde_yaml::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
        } else {
            serde_json::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
        };
        Ok((kind, v))
    }

    /// DeleteOptions from the body (kubectl) or the query (Python client).
    fn delete_options(&self) -> Result<DeleteOptions, ApiError> {
        let body: Value = if self.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else if content_type(&self.headers).starts_with(minik8s_wire::protobuf::MEDIA_TYPE) {
            self.body_object()?
        } else {
            serde_json::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let policy = body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.params.get("propagationPolicy").map(str::to_string))
            .or_else(|| {
                match body
                    .get("orphanDependents")
                    .and_then(Value::as_bool)
                    .or_else(|| self.params.get("orphanDependents").map(|v| v != "false"))
                {
                    Some(true) => Some("Orphan".to_string()),
                    _ => None,
                }
            });
        if let Some(p) = &policy {
            if !["Background", "Foreground", "Orphan"].contains(&p.as_str()) {
                return Err(ApiError::bad_request(format!("propagationPolicy: Unsupported value: {p:?}: supported values: \"Background\", \"Foreground\", \"Orphan\"")));
            }
        }
        let grace = match body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            Some(g) => Some(g),
            None => self.params.int("gracePeriodSeconds")?,
        };
        let dry_run = match body.get("dryRun").and_then(Value::as_array) {
            Some(modes) => modes.iter().any(|m| m == "All"),
            None => self.dry_run()?,
        };
        Ok(DeleteOptions {
            dry_run,
            propagation: policy,
            grace_period: grace,
            uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            resource_version: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            user: Some(self.user.clone()),
        })
    }
}

/// An aggregated discovery document with its ETag, or 304 when the client
/// already holds it (`If-None-Match`).
fn aggregated_response(headers: &HeaderMap, doc: &Value) -> Response {
    let body = serde_json::to_vec(doc).unwrap_or_default();
    let etag = discovery_aggregated::etag(&body);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let ct = (
        header::CONTENT_TYPE,
        discovery_aggregated::AGGREGATED_MEDIA_TYPE,
    );
    if cached {
        return (
            StatusCode::NOT_MODIFIED,
            [ct, (header::ETAG, etag.as_str())],
        )
            .into_response();
    }
    (StatusCode::OK, [ct, (header::ETAG, etag.as_str())], body).into_response()
}

/// The 406 of an endpoint that has no Table or metadata-only form, when
/// `accept` asks only for such forms; None when a plain media type it
/// serves (JSON, YAML, protobuf, a wildcard) is acceptable too.
fn not_acceptable_without_table(accept: &str) -> Option<ApiError> {
    if accept.trim().is_empty() {
        return None;
    }
    let plain = accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let converted = parts.any(|p| p.starts_with("as="));
        !converted
            && matches!(
                media,
                "application/json"
                    | "application/yaml"
                    | "application/vnd.kubernetes.protobuf"
                    | "application/*"
                    | "*/*"
            )
    });
    (!plain).then(|| {
        ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )
    })
}

#[cfg(test)]
mod negotiation_tests {
    use super::not_acceptable_without_table;

    #[test]
    fn only_a_table_request_is_refused_where_no_table_exists() {
        let e =
            not_acceptable_without_table("application/json;as=Table;v=v1;g=meta.k8s.io").unwrap();
        assert_eq!((e.code, e.reason.as_str()), (406, "NotAcceptable"));
        for ok in [
            "",
            "application/json",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "*/*",
            "application/vnd.kubernetes.protobuf, application/json",
        ] {
            assert!(not_acceptable_without_table(ok).is_none(), "{ok}");
        }
    }
}
