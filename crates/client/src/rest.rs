//! The REST client: a dynamic API over JSON values (kubectl's view, driven by
//! the registry) and a typed [`Api<K>`] over k8s-openapi types on top of it.

use futures::{Stream, StreamExt};
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::ApiError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

pub use crate::error::{retry_on_conflict, ClientError};

/// A connection to one apiserver.
#[derive(Clone)]
pub struct Client {
    /// The apiservers this client may talk to (one, or several of an HA
    /// control plane), and the one it talks to now; a server that cannot be
    /// reached makes the client move on to the next.
    servers: std::sync::Arc<[String]>,
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    http: reqwest::Client,
    /// The namespace used when none is given (from the kubeconfig context).
    pub default_namespace: String,
    /// Sent as `User-Agent`; its part before `/` names the field manager of
    /// this client's writes in `managedFields` (as client-go's does).
    user_agent: std::sync::Arc<str>,
    /// The client-side rate limit, shared by the clones (None: unlimited).
    limiter: Option<std::sync::Arc<crate::throttle::RateLimiter>>,
}

/// Body content types the client sends.
pub mod content {
    pub const JSON: &str = "application/json";
    pub const MERGE_PATCH: &str = "application/merge-patch+json";
    pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
    pub const JSON_PATCH: &str = "application/json-patch+json";
    pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
}

impl Client {
    pub fn new(base: &str) -> Client {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .build()
            .expect("building the HTTP client");
        Client {
            servers: split_servers(base),
            current: Default::default(),
            http,
            default_namespace: "default".into(),
            user_agent: default_user_agent().into(),
            limiter: None,
        }
    }

    /// A client for `target`: its server, default namespace, CA, client
    /// certificate or token.
    pub fn for_target(
        target: &crate::config::Target,
    ) -> Result<Client, crate::config::ConfigError> {
        let c = &target.credentials;
        let bad = |m: String| crate::config::ConfigError::Invalid(target.server.clone().into(), m);
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true);
        if let Some(ca) = &c.ca_pem {
            builder = builder.tls_built_in_root_certs(false);
            for cert in reqwest::Certificate::from_pem_bundle(ca.as_bytes())
                .map_err(|e| bad(format!("certificate authority: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        if c.insecure {
            builder = builder.danger_accept_invalid_certs(true);
        }
        if let Some(pem) = &c.client_pem {
            let id = reqwest::Identity::from_pem(pem.as_bytes())
                .map_err(|e| bad(format!("client certificate: {e}")))?;
            builder = builder.identity(id);
        }
        if let Some(token) = &c.token {
            let mut headers = reqwest::header::HeaderMap::new();
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| bad("the token is not a valid header value".into()))?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
            builder = builder.default_headers(headers);
        }
        let http = builder
            .build()
            .map_err(|e| bad(format!("building the HTTP client: {e}")))?;
        Ok(Client {
            servers: split_servers(&target.server),
            current: Default::default(),
            http,
            default_namespace: target.namespace.clone(),
            user_agent: default_user_agent().into(),
            limiter: None,
        })
    }

    /// The same connection, naming its writes after `component` (for
    /// example `kube-scheduler`, which then owns `spec.nodeName`).
    pub fn with_user_agent(&self, component: &str) -> Client {
        Client {
            user_agent: format!("{component}/{}", env!("CARGO_PKG_VERSION")).into(),
            ..self.clone()
        }
    }

    /// The same connection, sending at most `qps` requests a second after a
    /// burst of `burst` (client-go's `--kube-api-qps`/`--kube-api-burst`);
    /// `qps` 0 means unlimited.
    pub fn with_rate_limit(&self, qps: f32, burst: u32) -> Client {
        Client {
            limiter: (qps > 0.0)
                .then(|| crate::throttle::RateLimiter::new(f64::from(qps), burst).into()),
            ..self.clone()
        }
    }

    /// The apiserver this client talks to now.
    pub fn base_url(&self) -> &str {
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        &self.servers[i % self.servers.len()]
    }

    /// Moves on to the next apiserver after `failed` could not be reached
    /// (unless another request already did).
    fn fail_over(&self, failed: &str) {
        if self.servers.len() < 2 {
            return;
        }
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        if self.servers[i % self.servers.len()] == failed {
            let next = (i + 1) % self.servers.len();
            if self
                .current
                .compare_exchange(
                    i,
                    next,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                )
                .is_ok()
            {
                tracing::warn!(from = %failed, to = %self.servers[next], "apiserver unreachable; failing over");
            }
        }
    }

    fn connect_error(&self, e: reqwest::Error) -> ClientError {
        let host = self
            .base_url()
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        if e.is_connect() {
            ClientError::Connect(format!("The connection to the server {host} was refused - did you specify the right host or port?"))
        } else if e.is_timeout() {
            ClientError::Connect(format!("the server {host} did not answer in time"))
        } else {
            ClientError::Connect(format!("talking to {host}: {e}"))
        }
    }

    /// Sends a request and returns the raw response after turning error statuses into `ApiError`.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        accept: &str,
    ) -> Result<reqwest::Response, ClientError> {
        use crate::throttle;
        let body = body.map(|(ct, bytes)| (ct, bytes::Bytes::from(bytes)));
        let (mut retries, mut connect_retries) = (0, 0);
        let idempotent = method == reqwest::Method::GET || method == reqwest::Method::HEAD;
        loop {
            let base = self.base_url().to_string();
            let url = format!("{base}{path}");
            if let Some(limiter) = &self.limiter {
                limiter.acquire().await;
            }
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header("Accept", accept)
                .header("User-Agent", &*self.user_agent);
            // The work this request is part of (a reconcile, a pod's
            // scheduling), so the apiserver's span joins its trace.
            if let Some(parent) = minik8s_trace::context::current() {
                req = req.header(minik8s_trace::HEADER, parent);
            }
            if let Some((ct, bytes)) = &body {
                req = req.header("Content-Type", *ct).body(bytes.clone());
            }
            let resp = match req.send().await {
                Ok(resp) => resp,
                // Nothing reached the server: trying again is safe for any verb.
                // Every server gets its tries before the client gives up.
                // A read whose kept-alive connection the server closed as it
                // was reused (an apiserver shutting down or closing idle
                // connections) got no answer either; reads are safe to resend,
                // as client-go resends GETs on a reset connection.
                Err(e)
                    if (e.is_connect() || (idempotent && e.is_request() && !e.is_timeout()))
                        && connect_retries
                            < throttle::CONNECT_RETRIES * self.servers.len() as u32 =>
                {
                    self.fail_over(&base);
                    tokio::time::sleep(throttle::backoff(
                        connect_retries / self.servers.len() as u32,
                    ))
                    .await;
                    connect_retries += 1;
                    continue;
                }
                Err(e) => return Err(self.connect_error(e)),
            };
            if resp.status().is_success() {
                return Ok(resp);
            }
            let code = resp.status().as_u16();
            let wait = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| throttle::retry_after(code, Some(v)));
            if let Some(wait) = wait.filter(|_| retries < throttle::MAX_RETRIES) {
                tracing::debug!(%url, code, ?wait, "the server asked to retry later");
                tokio::time::sleep(throttle::with_jitter(wait)).await;
                retries += 1;
                continue;
            }
            let bytes = resp.bytes().await.map_err(|e| self.connect_error(e))?;
            return Err(ClientError::Api(ApiError::from_body(code, &bytes)));
        }
    }

    /// A request whose answer is JSON.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        accept: &str,
    ) -> Result<Value, ClientError> {
        let resp = self.send(method, path, body, accept).await?;
        let bytes = resp.bytes().await.map_err(|e| self.connect_error(e))?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        self.request(reqwest::Method::GET, path, None, content::JSON)
            .await
    }

    /// A dynamic API for one resource in one namespace (None: cluster scope or all namespaces).
    pub fn dynamic(&self, info: impl registry::IntoInfo, namespace: Option<&str>) -> DynamicApi {
        let info = info.into_info();
        DynamicApi {
            client: self.clone(),
            namespace: namespace.filter(|_| info.namespaced).map(str::to_string),
            info,
        }
    }

    /// Patches the `status` of the built-in object `meta` names. Ok(false)
    /// when the object is gone: a status about a deleted object has nobody
    /// left to tell.
    pub async fn patch_status<K: k8s_openapi::Resource>(
        &self,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        content_type: &str,
        patch: &Value,
    ) -> Result<bool, ClientError> {
        self.dynamic(registry::of::<K>(), meta.namespace.as_deref())
            .patch_status(meta.name.as_deref().unwrap_or(""), content_type, patch)
            .await
    }
}

/// `https://a:6443,https://b:6443` (several apiservers) as a list; never empty.
fn split_servers(servers: &str) -> std::sync::Arc<[String]> {
    let list: Vec<String> = servers
        .split(',')
        .map(|s| s.trim().trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() {
        return vec![servers.trim_end_matches('/').to_string()].into();
    }
    list.into()
}

/// `<program>/<version>`, the program being this process's executable.
fn default_user_agent() -> String {
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "minik8s".into());
    format!("{program}/{}", env!("CARGO_PKG_VERSION"))
}

/// List and watch options.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Server-side timeout of a watch.
    pub timeout_seconds: Option<u64>,
    pub allow_bookmarks: bool,
}

impl ListParams {
    pub fn labels(mut self, s: &str) -> Self {
        self.label_selector = Some(s.to_string());
        self
    }
    pub fn fields(mut self, s: &str) -> Self {
        self.field_selector = Some(s.to_string());
        self
    }
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(l) = &self.label_selector {
            q.push(("labelSelector", l.clone()));
        }
        if let Some(f) = &self.field_selector {
            q.push(("fieldSelector", f.clone()));
        }
        q
    }
}

/// Delete options.
#[derive(Debug, Clone, Default)]
pub struct DeleteParams {
    /// "Background", "Foreground" or "Orphan".
    pub propagation_policy: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

impl DeleteParams {
    fn body(&self) -> Value {
        let mut b = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if let Some(p) = &self.propagation_policy {
            b["propagationPolicy"] = json!(p);
        }
        if let Some(g) = self.grace_period_seconds {
            b["gracePeriodSeconds"] = json!(g);
        }
        if self.precondition_uid.is_some() || self.precondition_resource_version.is_some() {
            b["preconditions"] = json!({"uid": self.precondition_uid, "resourceVersion": self.precondition_resource_version});
        }
        b
    }
}

/// One watch event.
#[derive(Debug, Clone)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    /// The resourceVersion the server has reached.
    Bookmark(String),
    /// An ERROR event (410 Gone when the start version is too old).
    Error(ApiError),
}

pub type WatchStream<T> = Pin<Box<dyn Stream<Item = Result<WatchEvent<T>, ClientError>> + Send>>;

fn encode_query(q: &[(&str, String)]) -> String {
    if q.is_empty() {
        return String::new();
    }
    format!("?{}", serde_urlencoded::to_string(q).unwrap_or_default())
}

/// A JSON-level API for one resource.
#[derive(Clone)]
pub struct DynamicApi {
    client: Client,
    pub info: registry::Info,
    pub namespace: Option<String>,
}

impl DynamicApi {
    fn collection(&self) -> String {
        self.info.collection_path(self.namespace.as_deref())
    }
    fn object(&self, name: &str) -> String {
        self.info.object_path(self.namespace.as_deref(), name)
    }

    pub async fn get(&self, name: &str) -> Result<Value, ClientError> {
        self.client.get_json(&self.object(name)).await
    }

    /// Any subresource (`status`, `scale`).
    pub async fn get_sub(&self, name: &str, sub: &str) -> Result<Value, ClientError> {
        self.client
            .get_json(&format!("{}/{sub}", self.object(name)))
            .await
    }

    pub async fn list(&self, lp: &ListParams) -> Result<Value, ClientError> {
        self.client
            .get_json(&format!(
                "{}{}",
                self.collection(),
                encode_query(&lp.query())
            ))
            .await
    }

    /// A server-side Table of the collection (or of one object).
    pub async fn table(&self, name: Option<&str>, lp: &ListParams) -> Result<Value, ClientError> {
        let path = match name {
            Some(n) => self.object(n),
            None => format!("{}{}", self.collection(), encode_query(&lp.query())),
        };
        self.client
            .request(reqwest::Method::GET, &path, None, content::TABLE)
            .await
    }

    pub async fn create(&self, obj: &Value) -> Result<Value, ClientError> {
        let body = serde_json::to_vec(obj).map_err(|e| ClientError::Decode(e.to_string()))?;
        self.client
            .request(
                reqwest::Method::POST,
                &format!("{}?fieldValidation=Strict", self.collection()),
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
    }

    pub async fn replace(&self, name: &str, obj: &Value) -> Result<Value, ClientError> {
        let body = serde_json::to_vec(obj).map_err(|e| ClientError::Decode(e.to_string()))?;
        self.client
            .request(
                reqwest::Method::PUT,
                &self.object(name),
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
    }

    /// PUT to a subresource (`status`, `scale`).
    pub async fn replace_sub(
        &self,
        name: &str,
        sub: &str,
        obj: &Value,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_vec(obj).map_err(|e| ClientError::Decode(e.to_string()))?;
        self.client
            .request(
                reqwest::Method::PUT,
                &format!("{}/{sub}", self.object(name)),
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
    }

    /// PATCH with the given content type; `sub` targets a subresource.
    pub async fn patch(
        &self,
        name: &str,
        sub: Option<&str>,
        content_type: &str,
        patch: &Value,
    ) -> Result<Value, ClientError> {
        let body = serde_json::to_vec(patch).map_err(|e| ClientError::Decode(e.to_string()))?;
        let path = match sub {
            Some(s) => format!("{}/{s}", self.object(name)),
            None => self.object(name),
        };
        self.client
            .request(
                reqwest::Method::PATCH,
                &path,
                Some((content_type, body)),
                content::JSON,
            )
            .await
    }

    /// Patches `name`'s status, as controllers report what they saw;
    /// `Ok(false)` when the object is gone meanwhile (a status about a
    /// deleted object has nobody left to tell).
    pub async fn patch_status(
        &self,
        name: &str,
        content_type: &str,
        patch: &Value,
    ) -> Result<bool, ClientError> {
        match self.patch(name, Some("status"), content_type, patch).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<Value, ClientError> {
        let body = serde_json::to_vec(&dp.body()).unwrap_or_default();
        self.client
            .request(
                reqwest::Method::DELETE,
                &self.object(name),
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
    }

    /// Watches from `resource_version` ("" = current state first, as ADDED events).
    pub async fn watch(
        &self,
        lp: &ListParams,
        resource_version: &str,
        table: bool,
    ) -> Result<WatchStream<Value>, ClientError> {
        let mut q = lp.query();
        q.push(("watch", "true".into()));
        q.push(("resourceVersion", resource_version.to_string()));
        if let Some(t) = lp.timeout_seconds {
            q.push(("timeoutSeconds", t.to_string()));
        }
        if lp.allow_bookmarks {
            q.push(("allowWatchBookmarks", "true".into()));
        }
        let accept = if table { content::TABLE } else { content::JSON };
        let resp = self
            .client
            .send(
                reqwest::Method::GET,
                &format!("{}{}", self.collection(), encode_query(&q)),
                None,
                accept,
            )
            .await?;
        Ok(Box::pin(decode_watch(resp.bytes_stream())))
    }
}

/// Splits a watch body into lines and decodes each event.
fn decode_watch<S>(bytes: S) -> impl Stream<Item = Result<WatchEvent<Value>, ClientError>> + Send
where
    S: Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
{
    futures::stream::unfold(
        (Box::pin(bytes), Vec::<u8>::new(), false),
        |(mut bytes, mut buf, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some((parse_event(&line), (bytes, buf, false)));
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => {
                        return Some((
                            Err(ClientError::Connect(format!("watch stream: {e}"))),
                            (bytes, buf, true),
                        ))
                    }
                    None => return None,
                }
            }
        },
    )
}

fn parse_event(line: &[u8]) -> Result<WatchEvent<Value>, ClientError> {
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| ClientError::Decode(format!("watch event: {e}")))?;
    let object = v.get("object").cloned().unwrap_or(Value::Null);
    Ok(match v.get("type").and_then(Value::as_str) {
        Some("ADDED") => WatchEvent::Added(object),
        Some("MODIFIED") => WatchEvent::Modified(object),
        Some("DELETED") => WatchEvent::Deleted(object),
        Some("BOOKMARK") => WatchEvent::Bookmark(
            object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        Some("ERROR") => WatchEvent::Error(ApiError::from_body(
            500,
            &serde_json::to_vec(&object).unwrap_or_default(),
        )),
        other => {
            return Err(ClientError::Decode(format!(
                "unknown watch event type {other:?}"
            )))
        }
    })
}

/// A resource type the typed client can serve: a k8s-openapi type (or our LWS).
pub trait Resource:
    k8s_openapi::Resource + Serialize + DeserializeOwned + Clone + Send + Sync + 'static
{
}
impl<K> Resource for K where
    K: k8s_openapi::Resource + Serialize + DeserializeOwned + Clone + Send + Sync + 'static
{
}

/// A typed API for one resource kind in one namespace.
pub struct Api<K> {
    pub dynamic: DynamicApi,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            dynamic: self.dynamic.clone(),
            _k: PhantomData,
        }
    }
}

fn decode<K: DeserializeOwned>(v: Value) -> Result<K, ClientError> {
    serde_json::from_value(v).map_err(|e| ClientError::Decode(e.to_string()))
}

fn info_of<K: k8s_openapi::Resource>() -> &'static ResourceInfo {
    registry::of::<K>()
}

impl<K: Resource> Api<K> {
    /// Objects in `namespace`.
    pub fn namespaced(client: &Client, namespace: &str) -> Self {
        Api {
            dynamic: client.dynamic(info_of::<K>(), Some(namespace)),
            _k: PhantomData,
        }
    }
    /// Cluster-scoped objects, or namespaced objects in all namespaces.
    pub fn all(client: &Client) -> Self {
        Api {
            dynamic: client.dynamic(info_of::<K>(), None),
            _k: PhantomData,
        }
    }

    pub async fn get(&self, name: &str) -> Result<K, ClientError> {
        decode(self.dynamic.get(name).await?)
    }

    /// Items and the list's resourceVersion.
    pub async fn list(&self, lp: &ListParams) -> Result<(Vec<K>, String), ClientError> {
        let list = self.dynamic.list(lp).await?;
        let rv = list
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let items = items
            .into_iter()
            .map(decode)
            .collect::<Result<Vec<K>, _>>()?;
        Ok((items, rv))
    }

    pub async fn create(&self, obj: &K) -> Result<K, ClientError> {
        decode(
            self.dynamic
                .create(&serde_json::to_value(obj).map_err(|e| ClientError::Decode(e.to_string()))?)
                .await?,
        )
    }

    pub async fn replace(&self, name: &str, obj: &K) -> Result<K, ClientError> {
        decode(
            self.dynamic
                .replace(
                    name,
                    &serde_json::to_value(obj).map_err(|e| ClientError::Decode(e.to_string()))?,
                )
                .await?,
        )
    }

    pub async fn replace_status(&self, name: &str, obj: &K) -> Result<K, ClientError> {
        decode(
            self.dynamic
                .replace_sub(
                    name,
                    "status",
                    &serde_json::to_value(obj).map_err(|e| ClientError::Decode(e.to_string()))?,
                )
                .await?,
        )
    }

    /// JSON merge patch.
    pub async fn merge_patch(&self, name: &str, patch: &Value) -> Result<K, ClientError> {
        decode(
            self.dynamic
                .patch(name, None, content::MERGE_PATCH, patch)
                .await?,
        )
    }

    /// JSON merge patch of the status subresource.
    pub async fn merge_patch_status(&self, name: &str, patch: &Value) -> Result<K, ClientError> {
        decode(
            self.dynamic
                .patch(name, Some("status"), content::MERGE_PATCH, patch)
                .await?,
        )
    }

    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<Value, ClientError> {
        self.dynamic.delete(name, dp).await
    }

    /// Typed watch events from `resource_version`.
    pub async fn watch(
        &self,
        lp: &ListParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, ClientError> {
        let raw = self.dynamic.watch(lp, resource_version, false).await?;
        Ok(Box::pin(raw.map(|ev| {
            ev.and_then(|e| {
                Ok(match e {
                    WatchEvent::Added(v) => WatchEvent::Added(decode(v)?),
                    WatchEvent::Modified(v) => WatchEvent::Modified(decode(v)?),
                    WatchEvent::Deleted(v) => WatchEvent::Deleted(decode(v)?),
                    WatchEvent::Bookmark(rv) => WatchEvent::Bookmark(rv),
                    WatchEvent::Error(e) => WatchEvent::Error(e),
                })
            })
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict() -> ClientError {
        let info = registry::of::<k8s_openapi::api::core::v1::Pod>();
        ClientError::Api(ApiError::modified(info, "p"))
    }

    #[tokio::test]
    async fn retry_on_conflict_reads_again_until_the_write_lands() {
        let mut attempts = 0;
        let got = retry_on_conflict(|| {
            attempts += 1;
            let n = attempts;
            async move {
                if n < 3 {
                    Err(conflict())
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
    }

    #[tokio::test]
    async fn retry_on_conflict_gives_up_and_passes_other_errors_through() {
        let mut attempts = 0;
        let always = retry_on_conflict(|| {
            attempts += 1;
            async { Err::<(), _>(conflict()) }
        })
        .await;
        assert!(always.unwrap_err().is_conflict());
        assert_eq!(attempts, 10);

        let mut attempts = 0;
        let other = retry_on_conflict(|| {
            attempts += 1;
            async { Err::<(), _>(ClientError::Connect("refused".into())) }
        })
        .await;
        assert!(matches!(other, Err(ClientError::Connect(_))));
        assert_eq!(attempts, 1, "only conflicts are retried");
    }
}
