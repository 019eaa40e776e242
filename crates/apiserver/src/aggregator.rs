//! The aggregation layer (apiregistration.k8s.io/v1 APIService): every
//! group/version the apiserver serves itself has a *Local* APIService (as
//! Kubernetes' autoregister controller creates them, the metrics API among
//! them), and an APIService with a `service` registers an extension
//! apiserver: its group joins discovery and its requests are proxied.
//!
//! ```text
//!  GET /apis/demo.example.com/v1/... ─▶ remote APIService? ─▶ Service ─▶ Endpoints ─▶ HTTPS (caBundle)
//!                                         with X-Remote-User / X-Remote-Group of the requester
//!  every 5 s: GET /apis/<group>/<version> on each remote one ─▶ status Available True/False
//! ```

use crate::auth::UserInfo;
use crate::rest::Mode;
use crate::ApiServer;
use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::{registry, ApiError};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn info() -> &'static registry::ResourceInfo {
    registry::of::<APIService>()
}

/// `v1.apps`, or `v1.` for the core group.
pub fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

fn remote_group_entry(group: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
}

/// `(group, version)` of an `/apis/<group>/<version>[/...]` path.
pub fn group_version(path: &str) -> Option<(&str, &str)> {
    let mut segs = path.trim_start_matches('/').split('/');
    match (segs.next(), segs.next(), segs.next()) {
        (Some("apis"), Some(g), Some(v)) if !g.is_empty() && !v.is_empty() => Some((g, v)),
        _ => None,
    }
}

fn available(status: &str, reason: &str, message: &str) -> Value {
    json!({"conditions": [{"type": "Available", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now_rfc3339()}]})
}

impl ApiServer {
    /// Creates the Local APIService of every group/version served here, all
    /// at once (the store commits them together; a restart writes nothing).
    pub(crate) async fn ensure_local_apiservices(&self) -> anyhow::Result<()> {
        let mut wanted = Vec::new();
        for (group, versions) in crate::discovery::served_groups(&self.served()) {
            for (i, version) in versions.iter().enumerate() {
                wanted.push((group.clone(), version.clone(), 15 - i.min(14) as i64));
            }
        }
        let results = futures::future::join_all(wanted.into_iter().map(|(group, version, priority)| async move {
            let name = name_of(&group, &version);
            let obj = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name, "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 18000,
                         "versionPriority": priority}});
            match self.create(info(), None, obj, Default::default()).await {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => anyhow::bail!("creating APIService {name}: {e}"),
            }
            self.set_apiservice_status(&name, available("True", "Local", "Local APIServices are always available")).await;
            Ok(())
        }))
        .await;
        results.into_iter().collect()
    }

    async fn set_apiservice_status(&self, name: &str, status: Value) {
        let r = self
            .update_with(
                info(),
                None,
                name,
                Mode::Status,
                Default::default(),
                |old| {
                    let mut o = old.clone();
                    o["status"] = status.clone();
                    // The transition time moves only with the condition's status.
                    let before = &old["status"]["conditions"][0];
                    if before["status"] == status["conditions"][0]["status"] {
                        o["status"]["conditions"][0]["lastTransitionTime"] =
                            before["lastTransitionTime"].clone();
                    }
                    Ok(o)
                },
            )
            .await;
        if let Err(e) = r {
            tracing::warn!(apiservice = name, error = %e, "APIService status not written");
        }
    }

    /// The registered extension apiserver serving `group/version`, if any.
    pub(crate) fn remote_apiservice(&self, group: &str, version: &str) -> Option<Arc<Value>> {
        self.apiservices.all().into_iter().find(|a| {
            a["spec"]["group"] == group
                && a["spec"]["version"] == version
                && a["spec"]["service"].is_object()
        })
    }

    /// Groups of registered extension apiservers, with their versions.
    pub(crate) fn remote_groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for a in self
            .apiservices
            .all()
            .iter()
            .filter(|a| a["spec"]["service"].is_object())
        {
            let (g, v) = (
                a["spec"]["group"].as_str().unwrap_or(""),
                a["spec"]["version"].as_str().unwrap_or(""),
            );
            match out.iter_mut().find(|(name, _)| name == g) {
                Some((_, vs)) => vs.push(v.to_string()),
                None => out.push((g.to_string(), vec![v.to_string()])),
            }
        }
        out
    }

    /// `/apis` with the extension apiservers' groups added.
    pub(crate) fn with_remote_groups(&self, mut list: Value) -> Value {
        for (g, versions) in self.remote_groups() {
            let Some(groups) = list["groups"].as_array_mut() else {
                break;
            };
            if !groups.iter().any(|e| e["name"] == g.as_str()) {
                groups.push(remote_group_entry(&g, &versions));
            }
        }
        list
    }

    /// `/apis/<group>` of an extension apiserver's group.
    pub(crate) fn remote_group(&self, group: &str) -> Option<Value> {
        let (g, versions) = self.remote_groups().into_iter().find(|(g, _)| g == group)?;
        let mut e = remote_group_entry(&g, &versions);
        e["kind"] = json!("APIGroup");
        e["apiVersion"] = json!("v1");
        Some(e)
    }

    /// The extension apiserver's address and a client that trusts its certificate.
    async fn extension_client(
        &self,
        apiservice: &Value,
    ) -> Result<(reqwest::Client, String), String> {
        let spec = &apiservice["spec"];
        let port = spec["service"]["port"].as_i64().unwrap_or(443);
        let (host, addr) = self.service_endpoint(&spec["service"]).await?;
        let mut b = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .resolve(&host, addr);
        if spec["insecureSkipTLSVerify"] == true {
            b = b.danger_accept_invalid_certs(true);
        } else if let Some(ca) = spec["caBundle"].as_str() {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(ca)
                .map_err(|e| format!("caBundle: {e}"))?;
            let tls = minik8s_pki::trust::client_config(&String::from_utf8_lossy(&pem))
                .map_err(|e| format!("caBundle: {e}"))?;
            b = b.use_preconfigured_tls(tls);
        }
        Ok((
            b.build().map_err(|e| e.to_string())?,
            format!("https://{host}:{port}"),
        ))
    }

    /// Proxies a request to the extension apiserver of `apiservice`.
    pub(crate) async fn proxy_to_extension(
        &self,
        apiservice: &Value,
        user: &UserInfo,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Response {
        let (client, base) = match self.extension_client(apiservice).await {
            Ok(c) => c,
            Err(e) => {
                return crate::params::error_response(&ApiError::new(503, "ServiceUnavailable", e))
            }
        };
        let mut req = client
            .request(method, format!("{base}{path_and_query}"))
            .header("X-Remote-User", &user.username)
            .timeout(Duration::from_secs(60))
            .body(body);
        for g in &user.groups {
            req = req.header("X-Remote-Group", g);
        }
        for h in [header::CONTENT_TYPE, header::ACCEPT] {
            if let Some(v) = headers.get(&h) {
                req = req.header(h, v);
            }
        }
        match req.send().await {
            Ok(resp) => {
                let status =
                    StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
                let ct = resp
                    .headers()
                    .get(reqwest::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("application/json")
                    .to_string();
                let bytes = resp.bytes().await.unwrap_or_default();
                (status, [(header::CONTENT_TYPE, ct)], bytes).into_response()
            }
            Err(e) => crate::params::error_response(&ApiError::new(
                503,
                "ServiceUnavailable",
                format!(
                    "error trying to reach service: {}",
                    crate::proxy::error_chain(&e)
                ),
            )),
        }
    }

    /// Checks every remote APIService now and every 5 s (the availability controller).
    pub(crate) fn spawn_apiservice_availability(self: &Arc<Self>) {
        let server = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(srv) = server.upgrade() else { return };
                for a in srv
                    .apiservices
                    .all()
                    .iter()
                    .filter(|a| a["spec"]["service"].is_object())
                {
                    let status = srv.check_available(a).await;
                    if a["status"]["conditions"][0]["status"] != status["conditions"][0]["status"]
                        || a["status"]["conditions"][0]["reason"]
                            != status["conditions"][0]["reason"]
                    {
                        srv.set_apiservice_status(minik8s_api::meta::name(a), status)
                            .await;
                    }
                }
                drop(srv);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
    }

    async fn check_available(&self, a: &Value) -> Value {
        let (client, base) = match self.extension_client(a).await {
            Ok(c) => c,
            Err(e) => {
                let key = format!(
                    "{}/{}",
                    a["spec"]["group"].as_str().unwrap_or(""),
                    a["spec"]["version"].as_str().unwrap_or("")
                );
                self.remote_discovery
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                let reason = if e.contains("endpoints") {
                    "MissingEndpoints"
                } else {
                    "ServiceNotFound"
                };
                return available("False", reason, &e);
            }
        };
        let path = format!(
            "/apis/{}/{}",
            a["spec"]["group"].as_str().unwrap_or(""),
            a["spec"]["version"].as_str().unwrap_or("")
        );
        let key = path.trim_start_matches("/apis/").to_string();
        let answer = client
            .get(format!("{base}{path}"))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        let remote = |list: Option<Value>| {
            let mut cache = self
                .remote_discovery
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match list {
                Some(l) => cache.insert(key.clone(), l),
                None => cache.remove(&key),
            };
        };
        match answer {
            Ok(r) if r.status().is_success() => {
                remote(r.json::<Value>().await.ok());
                available("True", "Passed", "all checks passed")
            }
            Ok(r) => {
                remote(None);
                available("False", "FailedDiscoveryCheck", &format!("failing or missing response from {base}{path}: bad status from {base}{path}: {}", r.status().as_u16()))
            }
            Err(e) => {
                remote(None);
                let e = crate::proxy::error_chain(&e);
                available(
                    "False",
                    "FailedDiscoveryCheck",
                    &format!("failing or missing response from {base}{path}: {e}"),
                )
            }
        }
    }
}
