//! Subresources beyond status: `scale` (the autoscaling/v1 `Scale` view of
//! `spec.replicas`), `binding` (the scheduler's write of `spec.nodeName`),
//! `log` (proxied to the pod's kubelet) and `eviction` (a deletion that
//! respects PodDisruptionBudgets).

use crate::params::Params;
use crate::rest::{Mode, WriteOpts};
use crate::strategy;
use crate::ApiServer;
use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::meta::{self, is_deleting, metadata_mut, now_rfc3339};
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::ApiError;
use minik8s_validation::FieldError;
use serde_json::{json, Value};

/// The `autoscaling/v1` Scale view of a scalable object.
pub fn to_scale(strategy: &dyn strategy::Strategy, obj: &Value) -> Value {
    let (spec, status, selector) = strategy.scale_of(obj);
    let m = &obj["metadata"];
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
           "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"], "resourceVersion": m["resourceVersion"],
                        "creationTimestamp": m["creationTimestamp"]},
           "spec": {"replicas": spec},
           "status": {"replicas": status, "selector": selector}})
}

impl ApiServer {
    /// Writes `spec.replicas` through the Scale view: `change` turns the
    /// current Scale into the wanted one (a PUT's body, a patched Scale).
    pub(crate) async fn update_scale(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: WriteOpts,
        change: impl Fn(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let strategy = self.strategy(info);
        let out = self
            .update_with(info, ns, name, Mode::Main, opts, |old| {
                let new_scale = change(&to_scale(&*strategy, old))?;
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
                strategy
                    .set_replicas(&mut obj, replicas.as_i64().unwrap_or(0))
                    .map_err(|why| {
                        let e = FieldError::invalid("spec.replicas", &replicas, why);
                        ApiError::invalid(info, meta::name(old), &[e])
                    })?;
                Ok(obj)
            })
            .await?;
        Ok(to_scale(&*strategy, &out))
    }

    /// Sets `spec.nodeName` through the binding subresource (the scheduler's write).
    pub(crate) async fn bind(
        &self,
        info: &ResourceInfo,
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
        self.update_with(info, ns, name, Mode::Whole, WriteOpts::default(), |old| {
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

    pub(crate) async fn pod_log(
        &self,
        ns: Option<&str>,
        name: &str,
        params: &Params,
        websocket: Option<(HeaderMap, OnUpgrade)>,
    ) -> Result<Response, ApiError> {
        let info = registry::of::<Pod>();
        let (pod, _) = self.read(info, ns, name).await?;
        let container = crate::proxy::pick_container(&pod, name, params.get("container"))?;
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let started = crate::proxy::container_status(&pod, &container)
            .is_some_and(|c| c.pointer("/state/waiting").is_none());
        if node.is_empty() || !started {
            return Err(ApiError::bad_request(format!("container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating")));
        }
        let node_info = registry::of::<Node>();
        let (node_obj, _) = self.read(node_info, None, node).await?;
        let mut url = format!(
            "{}/containerLogs/{}/{name}/{container}",
            self.kubelet_url(&node_obj),
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
        let resp = self.kubelet_http().get(&url).send().await.map_err(|e| {
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
        if let Some((headers, upgrade)) = websocket {
            return log_over_websocket(headers, upgrade, resp).await;
        }
        Ok((
            status,
            [(header::CONTENT_TYPE, "text/plain")],
            Body::from_stream(resp.bytes_stream()),
        )
            .into_response())
    }
}

/// How a PodDisruptionBudget answers an eviction of one of its pods.
#[derive(Debug, PartialEq)]
pub enum EvictionVerdict {
    /// Delete the pod, taking one disruption from the budget (if it has one).
    Allow,
    /// Delete the pod without taking a disruption: it is running but not
    /// ready, so it is no part of the budget's healthy pods.
    AllowUnhealthy,
    /// 429 TooManyRequests with this cause.
    Refuse(String),
}

/// The pure rule of `pods/eviction`, as Kubernetes applies it: pods that are
/// not running (pending, finished, deleting) may always go; otherwise the
/// one budget selecting the pod must allow a disruption and be up to date.
pub fn eviction_verdict(pod: &Value, pdb: Option<&Value>) -> EvictionVerdict {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if matches!(phase, "Pending" | "Succeeded" | "Failed") || is_deleting(pod) {
        return EvictionVerdict::Allow;
    }
    let Some(pdb) = pdb else {
        return EvictionVerdict::Allow;
    };
    // An unready running pod (spec.unhealthyPodEvictionPolicy): AlwaysAllow
    // lets it go; IfHealthyBudget, the default, only while the budget is met.
    let ready = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
    if !ready {
        let status = |f: &str| {
            pdb.pointer(&format!("/status/{f}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let always = pdb.pointer("/spec/unhealthyPodEvictionPolicy") == Some(&json!("AlwaysAllow"));
        let desired = status("desiredHealthy");
        if always || (desired > 0 && status("currentHealthy") >= desired) {
            return EvictionVerdict::AllowUnhealthy;
        }
    }
    let name = meta::name(pdb);
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = pdb
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if observed < generation {
        return EvictionVerdict::Refuse(format!(
            "The disruption budget {name} is still being processed by the server."
        ));
    }
    let allowed = pdb
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if allowed <= 0 {
        let int = |f: &str| {
            pdb.pointer(&format!("/status/{f}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        return EvictionVerdict::Refuse(format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            int("desiredHealthy"),
            int("currentHealthy")
        ));
    }
    EvictionVerdict::Allow
}

impl ApiServer {
    /// `POST .../pods/NAME/eviction` (policy/v1 Eviction): the pod is deleted
    /// unless that would take its PodDisruptionBudget below its bound (429).
    pub(crate) async fn pod_eviction(
        &self,
        ns: &str,
        name: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        let pods = registry::of::<Pod>();
        let pdbs = registry::of::<k8s_openapi::api::policy::v1::PodDisruptionBudget>();
        let body_name = meta::name(&body);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name} != {body_name}"
            )));
        }
        let (pod, _) = self.read(pods, Some(ns), name).await?;
        let labels = pod["metadata"]["labels"].clone();
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(labels).unwrap_or_default();
        let listed = self.list(pdbs, Some(ns), &Params::parse(None)?).await?;
        let matching: Vec<&Value> = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| {
                let ls = b.pointer("/spec/selector").cloned().unwrap_or(json!({}));
                serde_json::from_value(ls)
                    .ok()
                    .and_then(|ls| minik8s_api::selector::Selector::from_label_selector(&ls).ok())
                    .is_some_and(|s| s.matches(&labels))
            })
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        let pdb = matching.first().copied();
        let verdict = eviction_verdict(&pod, pdb);
        if let EvictionVerdict::Refuse(cause) = verdict {
            return Err(budget_violated(cause));
        }
        let takes_disruption = verdict == EvictionVerdict::Allow
            && pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
            && !is_deleting(&pod);
        if let (Some(pdb), true) = (pdb, takes_disruption) {
            // Take one disruption and remember the pod until the controller
            // sees it go. The verdict is taken again on the budget as written:
            // a concurrent eviction (kubectl drain sends them in parallel) that
            // won the write makes this one re-read, and maybe a 429.
            self.update_with(
                pdbs,
                Some(ns),
                meta::name(pdb),
                Mode::Status,
                WriteOpts::default(),
                |old| {
                    match eviction_verdict(&pod, Some(old)) {
                        EvictionVerdict::Refuse(cause) => return Err(budget_violated(cause)),
                        // The budget changed under us: the pod no longer takes a disruption.
                        EvictionVerdict::AllowUnhealthy => return Ok(old.clone()),
                        EvictionVerdict::Allow => {}
                    }
                    let mut new = old.clone();
                    let allowed = old
                        .pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    new["status"]["disruptionsAllowed"] = json!(allowed - 1);
                    new["status"]["disruptedPods"][name] = json!(now_rfc3339());
                    // The write is conditional on the version read: after a
                    // concurrent taker, update_with reads again and asks again.
                    Ok(new)
                },
            )
            .await?;
        }
        let opts = eviction_delete_options(&body);
        self.delete(pods, Some(ns), name, &opts).await?;
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}

/// 429: the eviction would violate the pod's disruption budget (`cause`).
fn budget_violated(cause: String) -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    e.details = Some(Box::new(
        json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]}),
    ));
    e
}

/// The Eviction's `deleteOptions` as the pod's delete takes them.
fn eviction_delete_options(eviction: &Value) -> crate::rest::DeleteOptions {
    let options = eviction.get("deleteOptions").cloned().unwrap_or(json!({}));
    let precondition = |f: &str| {
        options
            .pointer(&format!("/preconditions/{f}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    crate::rest::DeleteOptions {
        grace_period: options.get("gracePeriodSeconds").and_then(Value::as_i64),
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
        ..Default::default()
    }
}

/// The protocols a log WebSocket may speak: raw bytes in binary messages,
/// or base64 in text messages; no protocol at all means binary.
const LOG_PROTOCOLS: [&str; 2] = ["binary.k8s.io", "base64.binary.k8s.io"];

/// `pods/log` over a WebSocket (a browser, the conformance test): the log
/// from the kubelet, chunk by chunk, one message each, then a close.
async fn log_over_websocket(
    headers: HeaderMap,
    upgrade: OnUpgrade,
    log: reqwest::Response,
) -> Result<Response, ApiError> {
    use axum::extract::ws::{Message, WebSocketUpgrade};
    use axum::extract::FromRequestParts;
    use futures::{SinkExt, StreamExt};
    let mut req = axum::http::Request::builder()
        .method(axum::http::Method::GET)
        .body(())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    *req.headers_mut() = headers;
    req.extensions_mut().insert(upgrade);
    let (mut parts, ()) = req.into_parts();
    let ws = WebSocketUpgrade::from_request_parts(&mut parts, &())
        .await
        .map_err(|e| ApiError::bad_request(format!("websocket upgrade: {}", e.body_text())))?;
    Ok(ws
        .protocols(LOG_PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let base64 = socket
                .protocol()
                .is_some_and(|p| p.as_bytes() == LOG_PROTOCOLS[1].as_bytes());
            let (mut tx, _rx) = socket.split();
            let mut chunks = log.bytes_stream();
            while let Some(Ok(chunk)) = chunks.next().await {
                let message = if base64 {
                    use base64::Engine;
                    Message::Text(
                        base64::engine::general_purpose::STANDARD
                            .encode(&chunk)
                            .into(),
                    )
                } else {
                    Message::Binary(chunk)
                };
                if tx.send(message).await.is_err() {
                    return;
                }
            }
            let _ = tx.send(Message::Close(None)).await;
        })
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evictions_respect_the_budget_as_kubernetes_does() {
        let running = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}, "metadata": {}});
        let pending = json!({"status": {"phase": "Pending"}, "metadata": {}});
        let pdb = |allowed: i64, observed: i64| {
            json!({"metadata": {"name": "web", "generation": 2},
                   "status": {"observedGeneration": observed, "disruptionsAllowed": allowed,
                              "desiredHealthy": 2, "currentHealthy": 2}})
        };
        assert_eq!(eviction_verdict(&running, None), EvictionVerdict::Allow);
        assert_eq!(
            eviction_verdict(&running, Some(&pdb(1, 2))),
            EvictionVerdict::Allow
        );
        assert_eq!(
            eviction_verdict(&running, Some(&pdb(0, 2))),
            EvictionVerdict::Refuse(
                "The disruption budget web needs 2 healthy pods and has 2 currently".into()
            )
        );
        assert!(
            matches!(eviction_verdict(&running, Some(&pdb(5, 1))), EvictionVerdict::Refuse(m) if m.contains("still being processed"))
        );
        assert_eq!(
            eviction_verdict(&pending, Some(&pdb(0, 2))),
            EvictionVerdict::Allow
        );

        // A running pod that is not ready: it goes without taking a disruption
        // while the budget is met (IfHealthyBudget), or always (AlwaysAllow).
        let unready = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}]}, "metadata": {}});
        assert_eq!(
            eviction_verdict(&unready, Some(&pdb(0, 2))),
            EvictionVerdict::AllowUnhealthy
        );
        let mut short = pdb(0, 2);
        short["status"]["currentHealthy"] = json!(1);
        assert!(matches!(
            eviction_verdict(&unready, Some(&short)),
            EvictionVerdict::Refuse(_)
        ));
        short["spec"] = json!({"unhealthyPodEvictionPolicy": "AlwaysAllow"});
        assert_eq!(
            eviction_verdict(&unready, Some(&short)),
            EvictionVerdict::AllowUnhealthy
        );
    }
}
