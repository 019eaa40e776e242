//! The REST handlers: Kubernetes URL layout, verbs, subresources and watch.
//!
//! Every write goes through one path:
//! decode → type meta and server fields → defaulting → admission → validation
//! (422 with field causes) → typed normalization (400 on type errors, unknown
//! fields under `fieldValidation=Strict`) → store with a revision precondition.

use crate::discovery;
use crate::table;
use crate::watch_cache::decode_object;
use crate::ApiServer;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::meta::{self, finalizers, is_deleting, metadata_mut, now_rfc3339};
use minik8s_api::patch::{apply_patch, PatchType};
use minik8s_api::registry::{self, Registry, ResourceInfo, Subresource};
use minik8s_api::selector::{supported_fields, FieldSelector, Selector};
use minik8s_api::validation::{self, FieldError};
use minik8s_api::{defaults, ApiError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

use crate::store::StoreError;

/// How many times a write is re-read and re-applied on a conflict before the
/// client sees 409 (each conflict means another writer made progress, so this
/// is only a guard; Kubernetes' GuaranteedUpdate has none).
const RETRIES: usize = 64;

pub fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub fn error_response(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

/// Query parameters (last value wins).
pub struct Params(HashMap<String, String>);

impl Params {
    pub fn parse(q: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
        Ok(Params(pairs.into_iter().collect()))
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }
    /// apimachinery's rule: only missing, "0" and "false" (any case) are false.
    pub fn flag(&self, k: &str) -> bool {
        match self.0.get(k) {
            None => false,
            Some(v) => !(v == "0" || v.eq_ignore_ascii_case("false")),
        }
    }
    fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        self.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid {k}: {v:?}")))
            })
            .transpose()
    }
}

/// A request on a resource.
pub struct Target {
    pub info: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

enum Route {
    Version,
    Api,
    Apis,
    Group(String),
    ResourceList(String, String),
    OpenApiRoot,
    OpenApiGv(String),
    OpenApiV2,
    Health,
    Resource(Target),
}

fn route(reg: &Registry, path: &str) -> Option<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Some(Route::Version),
        ["healthz"] | ["readyz"] | ["livez"] => return Some(Route::Health),
        ["healthz" | "readyz" | "livez", ..] => return Some(Route::Health),
        ["openapi", "v3"] => return Some(Route::OpenApiRoot),
        ["openapi", "v2"] => return Some(Route::OpenApiV2),
        ["openapi", "v3", rest @ ..] => return Some(Route::OpenApiGv(rest.join("/"))),
        ["api"] => return Some(Route::Api),
        ["apis"] => return Some(Route::Apis),
        ["apis", g] => return Some(Route::Group(g.to_string())),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if rest.is_empty() {
        return Some(Route::ResourceList(group.into(), version.into()));
    }
    let namespaced_res = match rest {
        ["namespaces", _, res, ..] => reg.by_plural(group, version, res).filter(|i| i.namespaced),
        _ => None,
    };
    let (info, namespace, name, sub, extra) = match namespaced_res {
        Some(info) => (
            info,
            Some(rest[1].to_string()),
            rest.get(3),
            rest.get(4),
            rest.len() > 5,
        ),
        None => {
            let info = reg.by_plural(group, version, rest[0])?;
            if info.namespaced && rest.len() > 1 {
                return None;
            }
            (info, None, rest.get(1), rest.get(2), rest.len() > 3)
        }
    };
    if extra {
        return None;
    }
    if let Some(sub) = sub {
        let known = info.subresources.iter().any(|s| s.name() == *sub)
            || (info.kind == "Namespace" && *sub == "finalize");
        if !known {
            return None;
        }
    }
    Some(Route::Resource(Target {
        info,
        namespace,
        name: name.map(|s| s.to_string()),
        sub: sub.map(|s| s.to_string()),
    }))
}

/// The single entry point for every request.
pub async fn handle(
    srv: Arc<ApiServer>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = match Params::parse(uri.query()) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let found = |v: Option<Value>| match v {
        Some(v) => json_response(StatusCode::OK, &v),
        None => error_response(&ApiError::unknown_path()),
    };
    let metrics_prefix = format!(
        "/apis/{}/{}/",
        crate::metrics_api::GROUP,
        crate::metrics_api::VERSION
    );
    if let Some(rest) = uri.path().strip_prefix(&metrics_prefix) {
        let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        if method != Method::GET {
            return error_response(&ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )));
        }
        return match srv.metrics(&segs, &params).await {
            Ok(v) => json_response(StatusCode::OK, &v),
            Err(e) => error_response(&e),
        };
    }
    match route(&srv.registry, uri.path()) {
        None => error_response(&ApiError::unknown_path()),
        Some(r) if method != Method::GET && !matches!(r, Route::Resource(_)) => {
            error_response(&ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )))
        }
        Some(Route::Version) => json_response(StatusCode::OK, &discovery::version()),
        Some(Route::Health) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response()
        }
        Some(Route::Api) => json_response(StatusCode::OK, &discovery::api_versions()),
        Some(Route::Apis) => {
            json_response(StatusCode::OK, &discovery::api_group_list(&srv.registry))
        }
        Some(Route::Group(g)) => found(discovery::api_group(&srv.registry, &g)),
        Some(Route::ResourceList(g, v)) => found(discovery::resource_list(&srv.registry, &g, &v)),
        Some(Route::OpenApiRoot) => {
            json_response(StatusCode::OK, &discovery::openapi_root(&srv.registry))
        }
        Some(Route::OpenApiGv(p)) => found(discovery::openapi_gv(&srv.registry, &p)),
        // An empty OpenAPI v2 document: kubectl falls back to it for kinds the v3
        // documents do not list and then reports them as unknown kinds itself.
        Some(Route::OpenApiV2) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Vec::new(),
        )
            .into_response(),
        Some(Route::Resource(t)) => {
            let ctx = Request {
                srv,
                params,
                accept,
                headers,
                body,
            };
            match ctx.dispatch(method, t).await {
                Ok(resp) => resp,
                Err(e) => error_response(&e),
            }
        }
    }
}

struct Request {
    srv: Arc<ApiServer>,
    params: Params,
    accept: String,
    headers: HeaderMap,
    body: Bytes,
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

/// Decodes a JSON or YAML request body into an object.
pub fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    if ct.contains("protobuf") {
        return Err(ApiError::unsupported_media_type(&ct));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let v: Value = if ct.contains("yaml") {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(v)
}

impl Request {
    async fn dispatch(self, method: Method, t: Target) -> Result<Response, ApiError> {
        let ns = t.namespace.clone();
        let ns = ns.as_deref();
        let table = table::wants_table(&self.accept);
        match (&method, t.name.as_deref(), t.sub.as_deref()) {
            (&Method::GET, None, None) if self.params.flag("watch") => {
                Ok(self.srv.watch(t.info, ns, &self.params, table).await)
            }
            (&Method::GET, None, None) => {
                let list = self.srv.list(t.info, ns, &self.params).await?;
                if table {
                    let items: Vec<&Value> = list["items"]
                        .as_array()
                        .map(|a| a.iter().collect())
                        .unwrap_or_default();
                    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("");
                    return Ok(json_response(
                        StatusCode::OK,
                        &table::render(t.info, &items, rv, true),
                    ));
                }
                Ok(json_response(StatusCode::OK, &list))
            }
            (&Method::POST, None, None) => {
                let ns = self.required_ns(t.info, ns)?;
                let obj = decode_body(&self.headers, &self.body)?;
                let created = self.srv.create(t.info, ns, obj, self.strict()).await?;
                Ok(json_response(StatusCode::CREATED, &created))
            }
            (&Method::DELETE, None, None) => {
                let opts = self.delete_options()?;
                Ok(json_response(
                    StatusCode::OK,
                    &self
                        .srv
                        .delete_collection(t.info, ns, &self.params, &opts)
                        .await?,
                ))
            }
            (&Method::GET, Some(name), None) | (&Method::GET, Some(name), Some("status")) => {
                let (obj, _) = self.srv.read(t.info, ns, name).await?;
                if table {
                    let rv = meta::resource_version(&obj).to_string();
                    return Ok(json_response(
                        StatusCode::OK,
                        &table::render(t.info, &[&obj], &rv, true),
                    ));
                }
                Ok(json_response(StatusCode::OK, &obj))
            }
            (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
                let body = decode_body(&self.headers, &self.body)?;
                let mode = if sub.is_some() {
                    Mode::Status
                } else {
                    Mode::Main
                };
                let strict = self.strict();
                let out = self
                    .srv
                    .update_with(t.info, ns, name, mode, strict, |_| Ok(body.clone()))
                    .await?;
                Ok(json_response(StatusCode::OK, &out))
            }
            (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
                let (kind, patch) = self.patch_body(t.info)?;
                let mode = if sub.is_some() {
                    Mode::Status
                } else {
                    Mode::Main
                };
                let strategic = t.info.group != "leaderworkerset.x-k8s.io";
                let strict = self.strict();
                let out = self
                    .srv
                    .update_with(t.info, ns, name, mode, strict, |old| {
                        apply_patch(old, &patch, kind, strategic).map_err(ApiError::bad_request)
                    })
                    .await?;
                Ok(json_response(StatusCode::OK, &out))
            }
            (&Method::DELETE, Some(name), None) => {
                let opts = self.delete_options()?;
                Ok(json_response(
                    StatusCode::OK,
                    &self.srv.delete(t.info, ns, name, &opts).await?,
                ))
            }
            (&Method::GET, Some(name), Some("scale")) => {
                let (obj, _) = self.srv.read(t.info, ns, name).await?;
                Ok(json_response(StatusCode::OK, &to_scale(t.info, &obj)))
            }
            (&Method::PUT | &Method::PATCH, Some(name), Some("scale")) => {
                // PUT replaces the Scale, PATCH patches the current one.
                let patch = if method == Method::PATCH {
                    Some(self.patch_body(t.info)?)
                } else {
                    None
                };
                let body = if patch.is_none() {
                    Some(decode_body(&self.headers, &self.body)?)
                } else {
                    None
                };
                let change = |scale: &Value| -> Result<Value, ApiError> {
                    match (&patch, &body) {
                        (Some((kind, p)), _) => {
                            apply_patch(scale, p, *kind, true).map_err(ApiError::bad_request)
                        }
                        (None, Some(b)) => Ok(b.clone()),
                        (None, None) => Err(ApiError::bad_request("the request body is empty")),
                    }
                };
                let info = t.info;
                let out = self
                    .srv
                    .update_with(info, ns, name, Mode::Main, false, |old| {
                        let new_scale = change(&to_scale(info, old))?;
                        let mut obj = old.clone();
                        if let Some(rv) = new_scale.pointer("/metadata/resourceVersion") {
                            metadata_mut(&mut obj).insert("resourceVersion".into(), rv.clone());
                        }
                        let replicas = new_scale
                            .pointer("/spec/replicas")
                            .cloned()
                            .unwrap_or(json!(0));
                        if replicas.as_i64().is_none_or(|r| r < 0) {
                            return Err(ApiError::invalid(
                                info,
                                meta::name(old),
                                &[FieldError::invalid(
                                    "spec.replicas",
                                    &replicas,
                                    "must be greater than or equal to 0",
                                )],
                            ));
                        }
                        obj["spec"]["replicas"] = replicas;
                        Ok(obj)
                    })
                    .await?;
                Ok(json_response(StatusCode::OK, &to_scale(info, &out)))
            }
            (&Method::POST, Some(name), Some("binding")) => {
                let body = decode_body(&self.headers, &self.body)?;
                self.srv.bind(t.info, ns, name, &body).await?;
                Ok(json_response(
                    StatusCode::CREATED,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                ))
            }
            (&Method::PUT, Some(name), Some("finalize")) => {
                let body = decode_body(&self.headers, &self.body)?;
                let fin = body
                    .pointer("/spec/finalizers")
                    .cloned()
                    .unwrap_or(json!([]));
                let out = self
                    .srv
                    .update_with(t.info, None, name, Mode::Main, false, |old| {
                        let mut o = old.clone();
                        o["spec"]["finalizers"] = fin.clone();
                        Ok(o)
                    })
                    .await?;
                Ok(json_response(StatusCode::OK, &out))
            }
            (&Method::GET, Some(name), Some("log")) => {
                self.srv.pod_log(ns, name, &self.params).await
            }
            _ => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            ))),
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

    fn strict(&self) -> bool {
        self.params.get("fieldValidation") == Some("Strict")
    }

    fn patch_body(&self, info: &ResourceInfo) -> Result<(PatchType, Value), ApiError> {
        let ct = content_type(&self.headers);
        let kind = PatchType::from_content_type(&ct)
            .ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
        if kind == PatchType::Strategic && info.group == "leaderworkerset.x-k8s.io" {
            // Kubernetes refuses strategic merge patch on custom resources; we accept it as merge patch.
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
        Ok(DeleteOptions {
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
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The main resource: status is kept as stored.
    Main,
    /// The status subresource: only status changes.
    Status,
    /// Spec and status together, for the server's own writes (binding).
    Whole,
}

#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub grace_period: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The `autoscaling/v1` Scale view of a scalable object.
pub fn to_scale(info: &ResourceInfo, obj: &Value) -> Value {
    let selector = if info.kind == "LeaderWorkerSet" {
        obj.pointer("/status/hpaPodSelector")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    } else {
        obj.pointer("/spec/selector")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .and_then(|ls| Selector::from_label_selector(&ls).ok())
            .map(|s| s.to_string())
            .unwrap_or_default()
    };
    let m = &obj["metadata"];
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
           "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"], "resourceVersion": m["resourceVersion"],
                        "creationTimestamp": m["creationTimestamp"]},
           "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
           "status": {"replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0), "selector": selector}})
}

fn store_err(info: &ResourceInfo, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound(_) => ApiError::not_found(info, name),
        StoreError::AlreadyExists(_) => ApiError::already_exists(info, name),
        StoreError::Conflict { .. } => ApiError::modified(info, name),
        StoreError::Gone {
            requested,
            compacted,
        } => ApiError::gone(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        StoreError::Internal(m) => ApiError::internal(m),
    }
}

/// The stored form: the object without `resourceVersion` (the store's revision is it).
fn encode(obj: &Value) -> Bytes {
    if obj.pointer("/metadata/resourceVersion").is_none() {
        return Bytes::from(serde_json::to_vec(obj).unwrap_or_default());
    }
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    Bytes::from(serde_json::to_vec(&o).unwrap_or_default())
}

fn with_rv(mut obj: Value, rev: i64) -> Value {
    metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rev.to_string()));
    obj
}

/// The part of an object whose changes bump `metadata.generation`.
fn generation_relevant(obj: &Value) -> Value {
    match obj.get("spec") {
        Some(spec) => spec.clone(),
        None => {
            let mut o = obj.clone();
            if let Some(m) = o.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            o
        }
    }
}

/// Re-encodes through the typed (k8s-openapi) structs: rejects wrong types and,
/// under `fieldValidation=Strict`, unknown fields.
fn normalize(info: &ResourceInfo, obj: Value, strict: bool) -> Result<Value, ApiError> {
    use k8s_openapi::api::{
        apps::v1 as apps, autoscaling::v2 as autoscaling, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery,
    };
    // The input is kept only when unknown fields must be reported.
    let input = strict.then(|| obj.clone());
    macro_rules! roundtrip {
        ($t:ty) => {{
            let typed: $t = serde_json::from_value(obj)
                .map_err(|e| ApiError::bad_request(format!("{} in body: {e}", info.kind)))?;
            serde_json::to_value(typed).map_err(|e| ApiError::internal(e.to_string()))?
        }};
    }
    let out = match info.kind {
        "Namespace" => roundtrip!(core::Namespace),
        "Pod" => roundtrip!(core::Pod),
        "Node" => roundtrip!(core::Node),
        "Service" => roundtrip!(core::Service),
        "Endpoints" => roundtrip!(core::Endpoints),
        "Event" => roundtrip!(core::Event),
        "EndpointSlice" => roundtrip!(discovery::EndpointSlice),
        "Lease" => roundtrip!(coordination::Lease),
        "ReplicaSet" => roundtrip!(apps::ReplicaSet),
        "StatefulSet" => roundtrip!(apps::StatefulSet),
        "ControllerRevision" => roundtrip!(apps::ControllerRevision),
        "HorizontalPodAutoscaler" => roundtrip!(autoscaling::HorizontalPodAutoscaler),
        "LeaderWorkerSet" => roundtrip!(minik8s_api::lws::LeaderWorkerSet),
        _ => obj,
    };
    if let Some(input) = input {
        let mut unknown = Vec::new();
        find_unknown(&input, &out, "", &mut unknown);
        if !unknown.is_empty() {
            let list: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                info.kind,
                info.version,
                info.kind,
                list.join(", ")
            )));
        }
    }
    Ok(out)
}

/// Fields present in `input` that the typed decode dropped.
fn find_unknown(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match o.get(k) {
                    None if !v.is_null() => out.push(p),
                    Some(ov) => find_unknown(v, ov, &p, out),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (idx, (iv, ov)) in i.iter().zip(o).enumerate() {
                find_unknown(iv, ov, &format!("{path}[{idx}]"), out);
            }
        }
        _ => {}
    }
}

fn pod_qos(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(r));
            if l.is_none() || req.and_then(|q| q.get(r)) != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Kubernetes' DefaultTolerationSeconds admission: pods tolerate a not-ready or
/// unreachable node for `seconds` (300 by default) before eviction unless they
/// say otherwise.
fn add_default_tolerations(pod: &mut Value, (not_ready, unreachable): (i64, i64)) {
    let spec = &mut pod["spec"];
    if !spec.get("tolerations").is_some_and(Value::is_array) {
        spec["tolerations"] = json!([]);
    }
    let tolerations = spec["tolerations"].as_array_mut().expect("array");
    for (key, seconds) in [
        ("node.kubernetes.io/not-ready", not_ready),
        ("node.kubernetes.io/unreachable", unreachable),
    ] {
        let present = tolerations.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str);
            let effect = t.get("effect").and_then(Value::as_str);
            (k == Some(key)
                || (k.is_none() && t.get("operator").and_then(Value::as_str) == Some("Exists")))
                && effect.is_none_or(|e| e == "NoExecute")
        });
        if !present {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}));
        }
    }
}

fn random_suffix() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::thread_rng();
    (0..5)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect()
}

/// Checks or fills `apiVersion`/`kind` against the URL's resource.
fn check_type_meta(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let api_version = info.api_version();
    for (field, want) in [("apiVersion", api_version.as_str()), ("kind", info.kind)] {
        match obj.get(field).and_then(Value::as_str) {
            None | Some("") => obj[field] = json!(want),
            Some(have) if have == want => {}
            Some(have) => {
                return Err(ApiError::bad_request(format!("the API version in the data ({}) does not match the expected API version ({api_version}) or kind ({have}) does not match {}", obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""), info.kind)));
            }
        }
    }
    Ok(())
}

impl ApiServer {
    /// Reads one object with its revision.
    pub async fn read(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(Value, i64), ApiError> {
        let kv = self
            .store
            .get(&info.key(ns, name))
            .await
            .map_err(|e| store_err(info, name, e))?
            .ok_or_else(|| ApiError::not_found(info, name))?;
        let obj = decode_object(&kv.value, kv.mod_revision)
            .ok_or_else(|| ApiError::internal(format!("stored object {} is not JSON", kv.key)))?;
        Ok((obj, kv.mod_revision))
    }

    async fn check_namespace(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| info.namespaced) else {
            return Ok(());
        };
        let forbidden = || {
            ApiError::forbidden(
                info,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )
        };
        // Known namespaces are answered from memory; unknown ones are read from the store
        // (a namespace created a moment ago may not have reached the cache yet).
        match self.namespaces.lookup(ns) {
            Some(true) => return Err(forbidden()),
            Some(false) => return Ok(()),
            None => {}
        }
        let ns_info = registry::of::<Namespace>();
        match self.read(ns_info, None, ns).await {
            Err(e) if e.is_not_found() => Err(ApiError::not_found(ns_info, ns)),
            Err(e) => Err(e),
            Ok((nso, _)) if is_deleting(&nso) => Err(forbidden()),
            Ok(_) => Ok(()),
        }
    }

    /// Creates an object (POST).
    pub async fn create(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        mut obj: Value,
        strict: bool,
    ) -> Result<Value, ApiError> {
        check_type_meta(info, &mut obj)?;
        {
            let m = metadata_mut(&mut obj);
            let body_ns = m
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            if info.namespaced {
                if let (Some(b), Some(u)) = (&body_ns, ns) {
                    if b != u {
                        return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                    }
                }
                m.insert("namespace".into(), json!(ns.unwrap_or("default")));
            } else {
                m.remove("namespace");
            }
            let has_name = m
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !has_name {
                if let Some(prefix) = m
                    .get("generateName")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
                {
                    let generated = format!("{prefix}{}", random_suffix());
                    m.insert("name".into(), json!(generated));
                }
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now_rfc3339()));
            m.insert("generation".into(), json!(1));
            for f in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                m.remove(f);
            }
        }
        let name = meta::name(&obj).to_string();
        // Status is the controllers' to write; a created object starts without one.
        if info.has(Subresource::Status) && info.kind != "Node" {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        defaults::apply(info.kind, &mut obj);
        match info.kind {
            "Pod" => {
                add_default_tolerations(&mut obj, self.default_toleration_seconds);
                // Built-in admission of LeaderWorkerSet pods (upstream's pod webhook).
                if let Err(e) = minik8s_api::lws_pod::admit_pod(&mut obj) {
                    return Err(ApiError::invalid(info, &name, &[e]));
                }
                obj["status"] = json!({"phase": "Pending", "qosClass": pod_qos(&obj)});
            }
            "Namespace" => obj["status"] = json!({"phase": "Active"}),
            _ => {}
        }
        let mut errs = validation::validate_metadata(&obj, info.kind, info.namespaced);
        errs.extend(validation::validate(info.kind, &obj, None));
        if !errs.is_empty() {
            return Err(ApiError::invalid(info, &name, &errs));
        }
        self.check_namespace(info, ns, &name).await?;
        let mut obj = normalize(info, obj, strict)?;
        let allocated = if info.kind == "Service" {
            self.allocate_service(info, &name, &mut obj)?
        } else {
            Vec::new()
        };
        let key = info.key(ns, &name);
        match self.store.create(&key, encode(&obj)).await {
            Ok(rev) => Ok(with_rv(obj, rev)),
            Err(e) => {
                self.release(&allocated);
                Err(store_err(info, &name, e))
            }
        }
    }

    /// Reads, changes (with `change`), validates and writes an object, retrying on
    /// conflicts that the client did not ask to see.
    pub async fn update_with<F>(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        mode: Mode,
        strict: bool,
        change: F,
    ) -> Result<Value, ApiError>
    where
        F: Fn(&Value) -> Result<Value, ApiError>,
    {
        for _ in 0..RETRIES {
            let (old, rev) = self.read(info, ns, name).await?;
            let mut new = change(&old)?;
            if !new.is_object() {
                return Err(ApiError::bad_request("the object must be a JSON object"));
            }
            check_type_meta(info, &mut new)?;
            let client_rv = new
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            if let Some(rv) = &client_rv {
                let parsed: i64 = rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?;
                if parsed != rev {
                    return Err(ApiError::modified(info, name));
                }
            }
            let body_name = meta::name(&new);
            if !body_name.is_empty() && body_name != name {
                return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
            }
            if let (Some(b), Some(u)) = (meta::namespace(&new), ns) {
                if info.namespaced && b != u {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
            }
            let mut merged = match mode {
                Mode::Main => {
                    let mut m = new;
                    if info.has(Subresource::Status) {
                        match old.get("status") {
                            Some(s) => m["status"] = s.clone(),
                            None => {
                                if let Some(o) = m.as_object_mut() {
                                    o.remove("status");
                                }
                            }
                        }
                    }
                    m
                }
                Mode::Whole => new,
                Mode::Status => {
                    let mut m = old.clone();
                    match new.get("status") {
                        Some(s) => m["status"] = s.clone(),
                        None => {
                            if let Some(o) = m.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                    m
                }
            };
            {
                let om = old["metadata"].clone();
                let m = metadata_mut(&mut merged);
                m.insert("name".into(), json!(name));
                if info.namespaced {
                    m.insert("namespace".into(), om["namespace"].clone());
                } else {
                    m.remove("namespace");
                }
                for f in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    match om.get(f) {
                        Some(v) => m.insert(f.into(), v.clone()),
                        None => m.remove(f),
                    };
                }
                m.remove("resourceVersion");
            }
            // Status writers may not set finalizers on a deleting object; nobody may add them then.
            if is_deleting(&old) {
                let added = finalizers(&merged)
                    .into_iter()
                    .any(|f| !finalizers(&old).contains(&f));
                if added {
                    return Err(ApiError::invalid(
                        info,
                        name,
                        &[FieldError::forbidden(
                            "metadata.finalizers",
                            "no new finalizers can be added if the object is being deleted",
                        )],
                    ));
                }
            }
            defaults::apply(info.kind, &mut merged);
            if generation_relevant(&merged) != generation_relevant(&old) {
                let g = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    + 1;
                merged["metadata"]["generation"] = json!(g);
            }
            let mut errs = validation::validate_metadata(&merged, info.kind, info.namespaced);
            errs.extend(validation::validate_metadata_update(&merged, &old));
            errs.extend(validation::validate(info.kind, &merged, Some(&old)));
            if !errs.is_empty() {
                return Err(ApiError::invalid(info, name, &errs));
            }
            let mut merged = normalize(info, merged, strict)?;
            let mut old_cmp = old.clone();
            metadata_mut(&mut old_cmp).remove("resourceVersion");
            if merged == old_cmp {
                // No change: no write, same resourceVersion, no watch event (as Kubernetes).
                return Ok(old);
            }
            if info.kind == "Service" {
                self.allocate_service_update(info, name, &old, &mut merged)?;
            }
            // The last finalizer removed from a deleting object completes the deletion.
            if is_deleting(&merged)
                && finalizers(&merged).is_empty()
                && !namespace_finalizers_pending(info, &merged)
            {
                match self.store.delete(&info.key(ns, name), Some(rev)).await {
                    Ok((_, drev)) => {
                        self.after_delete(info, &merged);
                        return Ok(with_rv(merged, drev));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(store_err(info, name, e)),
                }
            }
            match self
                .store
                .update(&info.key(ns, name), encode(&merged), Some(rev))
                .await
            {
                Ok(new_rev) => return Ok(with_rv(merged, new_rev)),
                // Someone wrote in between: read again and re-apply the change. A
                // client's own resourceVersion precondition is checked against the
                // fresh read above, so it still fails with 409 (Kubernetes'
                // GuaranteedUpdate); a patch carries the current version it was
                // applied to, so it is simply re-applied.
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_err(info, name, e)),
            }
        }
        Err(ApiError::modified(info, name))
    }

    /// Deletes an object: gracefully for bound pods, after finalizers for any object.
    pub async fn delete(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        if info.kind == "Namespace" && ["default", "kube-system", "kube-public"].contains(&name) {
            return Err(ApiError::forbidden(
                info,
                name,
                "this namespace may not be deleted",
            ));
        }
        for _ in 0..RETRIES {
            let (obj, rev) = self.read(info, ns, name).await?;
            if opts.uid.as_deref().is_some_and(|u| u != meta::uid(&obj)) {
                return Err(ApiError::conflict(
                    info,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                        opts.uid.as_deref().unwrap_or(""),
                        meta::uid(&obj)
                    ),
                ));
            }
            if opts
                .resource_version
                .as_deref()
                .is_some_and(|v| v != rev.to_string())
            {
                return Err(ApiError::conflict(info, name, &format!("Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {rev}", opts.resource_version.as_deref().unwrap_or(""))));
            }
            let mut updated = obj.clone();
            metadata_mut(&mut updated).remove("resourceVersion");
            let mut fin = finalizers(&obj);
            // Propagation is carried out by the garbage collector through these finalizers.
            match opts.propagation.as_deref() {
                Some("Orphan") if !fin.iter().any(|f| f == "orphan") && !is_deleting(&obj) => {
                    fin.push("orphan".into())
                }
                Some("Foreground")
                    if !fin.iter().any(|f| f == "foregroundDeletion") && !is_deleting(&obj) =>
                {
                    fin.push("foregroundDeletion".into())
                }
                _ => {}
            }
            if fin != finalizers(&obj) {
                metadata_mut(&mut updated).insert("finalizers".into(), json!(fin));
            }
            let graceful = if info.kind == "Pod" {
                self.pod_grace(&obj, opts)
            } else {
                None
            };
            if let Some(grace) = graceful {
                let m = metadata_mut(&mut updated);
                let deadline = chrono::Utc::now() + chrono::Duration::seconds(grace);
                let current = m.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
                if current.is_none_or(|c| grace < c) {
                    m.insert(
                        "deletionTimestamp".into(),
                        json!(deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                    );
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
            } else if !fin.is_empty() || (info.kind == "Namespace") {
                let m = metadata_mut(&mut updated);
                if !m.contains_key("deletionTimestamp") {
                    m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                if info.kind == "Namespace" {
                    updated["status"]["phase"] = json!("Terminating");
                }
            }
            let immediate = graceful.is_none()
                && fin.is_empty()
                && !namespace_finalizers_pending(info, &updated);
            if immediate {
                match self.store.delete(&info.key(ns, name), Some(rev)).await {
                    Ok(_) => {
                        self.after_delete(info, &obj);
                        return Ok(obj);
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(store_err(info, name, e)),
                }
            }
            let mut obj_cmp = obj.clone();
            metadata_mut(&mut obj_cmp).remove("resourceVersion");
            if updated == obj_cmp {
                return Ok(obj);
            }
            match self
                .store
                .update(&info.key(ns, name), encode(&updated), Some(rev))
                .await
            {
                Ok(new_rev) => {
                    let out = with_rv(updated, new_rev);
                    if info.kind == "Namespace" {
                        // Refuse new content at once, before the cache hears of it.
                        // (The controller manager's namespace controller empties it.)
                        self.namespaces.set(name, true);
                    }
                    return Ok(out);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_err(info, name, e)),
            }
        }
        Err(ApiError::modified(info, name))
    }

    /// The grace period of a pod deletion, or None if it is deleted at once
    /// (unbound, finished, or a grace period of 0).
    fn pod_grace(&self, pod: &Value, opts: &DeleteOptions) -> Option<i64> {
        let bound = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !bound || phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let grace = opts
            .grace_period
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30);
        (grace > 0).then_some(grace)
    }

    pub async fn delete_collection(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        params: &Params,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let list = self.list(info, ns, params).await?;
        let mut items = Vec::new();
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            match self
                .delete(info, meta::namespace(&item), meta::name(&item), opts)
                .await
            {
                Ok(v) => items.push(v),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(
            json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {}, "items": items}),
        )
    }

    fn selectors(
        info: &ResourceInfo,
        params: &Params,
    ) -> Result<(Selector, FieldSelector), ApiError> {
        let labels = Selector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(
            params.get("fieldSelector").unwrap_or(""),
            &supported_fields(info.kind),
        )
        .map_err(ApiError::bad_request)?;
        Ok((labels, fields))
    }

    /// Lists objects (LIST), filtered by selectors.
    pub async fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Value, ApiError> {
        let (labels, fields) = Self::selectors(info, params)?;
        let (kvs, rev) = self
            .store
            .list(&info.key_prefix(ns), None)
            .await
            .map_err(|e| store_err(info, "", e))?;
        let items: Vec<Value> = kvs
            .iter()
            .filter_map(|kv| decode_object(&kv.value, kv.mod_revision))
            .filter(|o| labels.matches_object(o) && fields.matches(o))
            .collect();
        Ok(
            json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {"resourceVersion": rev.to_string()}, "items": items}),
        )
    }

    /// Sets `spec.nodeName` through the binding subresource (the scheduler's write).
    async fn bind(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        binding: &Value,
    ) -> Result<(), ApiError> {
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let Some(node) = node else {
            return Err(ApiError::invalid(
                info,
                name,
                &[FieldError::required("target.name", "")],
            ));
        };
        // nodeName and PodScheduled=True in one write.
        self.update_with(info, ns, name, Mode::Whole, false, |old| {
            if let Some(existing) = old.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(info, name, &format!("pod {name} is already assigned to node \"{existing}\"")));
            }
            if is_deleting(old) {
                return Err(ApiError::conflict(info, name, "pod is being deleted, cannot be assigned to a host"));
            }
            let mut o = old.clone();
            o["spec"]["nodeName"] = json!(node);
            let conds = o["status"].get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut conds: Vec<Value> = conds.into_iter().filter(|c| c.get("type") != Some(&json!("PodScheduled"))).collect();
            conds.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}));
            o["status"]["conditions"] = json!(conds);
            Ok(o)
        })
        .await?;
        Ok(())
    }

    /// Called once an object is really gone from the store.
    fn after_delete(&self, info: &ResourceInfo, obj: &Value) {
        if info.kind == "Service" {
            self.release(&service_allocations(obj));
        }
    }

    async fn pod_log(
        &self,
        ns: Option<&str>,
        name: &str,
        params: &Params,
    ) -> Result<Response, ApiError> {
        let info = registry::of::<Pod>();
        let (pod, _) = self.read(info, ns, name).await?;
        let containers: Vec<String> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let container = match params.get("container") {
            Some(c) => c.to_string(),
            None if containers.len() == 1 => containers[0].clone(),
            None => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                )))
            }
        };
        if !containers.contains(&container) {
            return Err(ApiError::bad_request(format!(
                "container {container} is not valid for pod {name}"
            )));
        }
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let started = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some(container.as_str()))
            })
            .is_some_and(|c| c.pointer("/state/waiting").is_none());
        if node.is_empty() || !started {
            return Err(ApiError::bad_request(format!("container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating")));
        }
        let node_info = registry::of::<Node>();
        let (node_obj, _) = self.read(node_info, None, node).await?;
        let mut url = format!(
            "{}/containerLogs/{}/{name}/{container}",
            crate::metrics_api::kubelet_url(&node_obj),
            ns.unwrap_or("default")
        );
        let passthrough: Vec<String> = [
            "follow",
            "tailLines",
            "timestamps",
            "sinceSeconds",
            "sinceTime",
            "previous",
            "limitBytes",
        ]
        .iter()
        .filter_map(|k| params.get(k).map(|v| format!("{k}={}", v)))
        .collect();
        if !passthrough.is_empty() {
            url.push('?');
            url.push_str(&passthrough.join("&"));
        }
        let resp = self.http.get(&url).send().await.map_err(|e| {
            ApiError::internal(format!(
                "error fetching logs from kubelet on node {node}: {e}"
            ))
        })?;
        let status =
            StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(ApiError::new(status.as_u16(), "BadRequest", text));
        }
        Ok((
            status,
            [(header::CONTENT_TYPE, "text/plain")],
            Body::from_stream(resp.bytes_stream()),
        )
            .into_response())
    }
}

/// True while a Namespace still has `spec.finalizers` (the namespace controller's).
fn namespace_finalizers_pending(info: &ResourceInfo, obj: &Value) -> bool {
    info.kind == "Namespace"
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
}

/// The allocations a Service holds: ("ip", addr) and ("port", n).
pub fn service_allocations(svc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(ip) = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
    {
        out.push(("ip".into(), ip.to_string()));
    }
    for p in svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(np) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
            out.push(("port".into(), np.to_string()));
        }
    }
    out
}

impl ApiServer {
    fn release(&self, allocs: &[(String, String)]) {
        for (kind, v) in allocs {
            match kind.as_str() {
                "ip" => self.alloc.release_ip(v),
                _ => self.alloc.release_port(v.parse().unwrap_or(0)),
            }
        }
    }

    /// Allocates the ClusterIP and node ports of a new Service; returns what it took.
    fn allocate_service(
        &self,
        info: &ResourceInfo,
        name: &str,
        svc: &mut Value,
    ) -> Result<Vec<(String, String)>, ApiError> {
        let mut taken = Vec::new();
        let ty = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        let result = (|| {
            if ty != "ExternalName" {
                let requested = svc
                    .pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let ip = match requested.as_str() {
                    "None" => "None".to_string(),
                    "" => {
                        let ip = self
                            .alloc
                            .allocate_ip()
                            .map_err(|e| {
                                FieldError::invalid("spec.clusterIP", &json!(""), e.to_string())
                            })?
                            .to_string();
                        taken.push(("ip".to_string(), ip.clone()));
                        ip
                    }
                    ip => {
                        self.alloc.reserve_ip(ip).map_err(|e| {
                            FieldError::invalid("spec.clusterIP", &json!(ip), e.to_string())
                        })?;
                        taken.push(("ip".to_string(), ip.to_string()));
                        ip.to_string()
                    }
                };
                svc["spec"]["clusterIP"] = json!(ip);
                svc["spec"]["clusterIPs"] = json!([ip]);
            }
            if ty == "NodePort" || ty == "LoadBalancer" {
                self.allocate_node_ports(svc, &mut taken)?;
            }
            Ok::<(), FieldError>(())
        })();
        match result {
            Ok(()) => Ok(taken),
            Err(fe) => {
                self.release(&taken);
                Err(ApiError::invalid(info, name, &[fe]))
            }
        }
    }

    fn allocate_node_ports(
        &self,
        svc: &mut Value,
        taken: &mut Vec<(String, String)>,
    ) -> Result<(), FieldError> {
        if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for (i, p) in ports.iter_mut().enumerate() {
                let np = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
                if np == 0 {
                    let n = self.alloc.allocate_port().map_err(|e| {
                        FieldError::invalid(
                            format!("spec.ports[{i}].nodePort"),
                            &json!(0),
                            e.to_string(),
                        )
                    })?;
                    p["nodePort"] = json!(n);
                    taken.push(("port".into(), n.to_string()));
                } else {
                    self.alloc.reserve_port(np).map_err(|e| {
                        FieldError::invalid(
                            format!("spec.ports[{i}].nodePort"),
                            &json!(np),
                            e.to_string(),
                        )
                    })?;
                    taken.push(("port".into(), np.to_string()));
                }
            }
        }
        Ok(())
    }

    /// On update, a Service keeps its ClusterIP; node ports newly needed are allocated.
    fn allocate_service_update(
        &self,
        info: &ResourceInfo,
        name: &str,
        old: &Value,
        new: &mut Value,
    ) -> Result<(), ApiError> {
        let ty = new
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        if ty != "NodePort" && ty != "LoadBalancer" {
            return Ok(());
        }
        let old_ports: Vec<i64> = service_allocations(old)
            .iter()
            .filter(|(k, _)| k == "port")
            .filter_map(|(_, v)| v.parse().ok())
            .collect();
        let mut taken = Vec::new();
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for (i, p) in ports.iter_mut().enumerate() {
                let np = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
                if np != 0 && old_ports.contains(&np) {
                    continue;
                }
                let r = if np == 0 {
                    self.alloc.allocate_port().map(|n| {
                        p["nodePort"] = json!(n);
                        n as i64
                    })
                } else {
                    self.alloc.reserve_port(np).map(|_| np)
                };
                match r {
                    Ok(n) => taken.push(("port".to_string(), n.to_string())),
                    Err(e) => {
                        self.release(&taken);
                        return Err(ApiError::invalid(
                            info,
                            name,
                            &[FieldError::invalid(
                                format!("spec.ports[{i}].nodePort"),
                                &json!(np),
                                e.to_string(),
                            )],
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
