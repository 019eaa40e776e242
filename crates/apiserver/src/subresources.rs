//! Subresources beyond status: `scale` (the autoscaling/v1 `Scale` view of
//! `spec.replicas`), `binding` (the scheduler's write of `spec.nodeName`) and
//! `log` (proxied to the pod's kubelet).

use crate::params::Params;
use crate::rest::{Mode, WriteOpts};
use crate::strategy;
use crate::ApiServer;
use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::meta::{self, is_deleting, metadata_mut, now_rfc3339};
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::validation::FieldError;
use minik8s_api::ApiError;
use serde_json::{json, Value};

/// The `autoscaling/v1` Scale view of a scalable object.
pub fn to_scale(info: &ResourceInfo, obj: &Value) -> Value {
    let selector = strategy::of(info).scale_selector(obj);
    let m = &obj["metadata"];
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
           "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"], "resourceVersion": m["resourceVersion"],
                        "creationTimestamp": m["creationTimestamp"]},
           "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
           "status": {"replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0), "selector": selector}})
}

impl ApiServer {
    /// Writes `spec.replicas` through the Scale view: `change` turns the
    /// current Scale into the wanted one (a PUT's body, a patched Scale).
    pub(crate) async fn update_scale(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: WriteOpts,
        change: impl Fn(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let out = self
            .update_with(info, ns, name, Mode::Main, opts, |old| {
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
        Ok(to_scale(info, &out))
    }

    /// Sets `spec.nodeName` through the binding subresource (the scheduler's write).
    pub(crate) async fn bind(
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
