//! Recording Events (`kubectl describe` shows them): what a component saw or
//! did to an object. Best effort, as client-go's recorder: a failed write is
//! logged, never an error for the caller.

use crate::rest::Client;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use serde_json::json;

/// The object an Event is about.
pub struct Involved<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub meta: &'a ObjectMeta,
}

/// Records one Event (`type_` is "Normal" or "Warning") from `component`.
pub async fn record(
    client: &Client,
    component: &str,
    about: Involved<'_>,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let ns = about.meta.namespace.as_deref().unwrap_or("default");
    let name = about.meta.name.as_deref().unwrap_or("");
    let now = now_rfc3339();
    // Kubernetes names events <object>.<unique hex suffix>.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let ev = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": ns},
        "involvedObject": {"apiVersion": about.api_version, "kind": about.kind, "namespace": ns, "name": name,
                           "uid": about.meta.uid, "resourceVersion": about.meta.resource_version},
        "reason": reason, "message": message, "type": type_, "source": {"component": component},
        "reportingComponent": component, "reportingInstance": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1});
    let api = client.dynamic(registry::of::<Event>(), Some(ns));
    if let Err(e) = api.create(&ev).await {
        tracing::debug!(%reason, error = %e, "recording event");
    }
}
