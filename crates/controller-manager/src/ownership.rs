//! What several controllers share, with one meaning each: who controls an
//! object (its controller ownerReference), adopting and releasing pods
//! (Kubernetes' `ControllerRefManager`), and the pod predicates every
//! controller counts with.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_client::rest::content;
use minik8s_client::{ClientError, DynamicApi};
use serde_json::{json, Value};

pub use minik8s_client::controller::controller_of;

/// A controller ownerReference to `owner` (with `blockOwnerDeletion`, so
/// foreground deletion waits for the dependent).
pub fn controller_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": owner.name, "uid": owner.uid,
           "controller": true, "blockOwnerDeletion": true})
}

fn owner_refs(meta: &ObjectMeta) -> Vec<Value> {
    serde_json::to_value(&meta.owner_references)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// The patch that adds `controller` to the object's ownerReferences, valid
/// only for the version read (a change meanwhile is a 409: look again).
pub fn adopt_patch(meta: &ObjectMeta, controller: &Value) -> Value {
    let mut refs = owner_refs(meta);
    refs.push(controller.clone());
    json!({"metadata": {"ownerReferences": refs, "resourceVersion": meta.resource_version}})
}

/// The patch that removes the reference to `owner_uid`, valid only for the
/// version read.
pub fn release_patch(meta: &ObjectMeta, owner_uid: &str) -> Value {
    let refs: Vec<Value> = owner_refs(meta)
        .into_iter()
        .filter(|r| r["uid"] != owner_uid)
        .collect();
    json!({"metadata": {"ownerReferences": refs, "resourceVersion": meta.resource_version}})
}

/// Adopts `pod`: Some(the pod as written), None when it changed or went
/// meanwhile (the next reconcile sees it afresh).
pub async fn adopt(
    api: &DynamicApi,
    pod: &Pod,
    controller: &Value,
) -> Result<Option<Pod>, ClientError> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let patch = adopt_patch(&pod.metadata, controller);
    match api.patch(name, None, content::MERGE_PATCH, &patch).await {
        Ok(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| ClientError::Decode(e.to_string())),
        Err(e) if e.is_conflict() || e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Releases `pod` from the owner with `owner_uid`; a pod that changed or went
/// meanwhile is left to the next reconcile.
pub async fn release(api: &DynamicApi, pod: &Pod, owner_uid: &str) -> Result<(), ClientError> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let patch = release_patch(&pod.metadata, owner_uid);
    match api.patch(name, None, content::MERGE_PATCH, &patch).await {
        Ok(_) | Err(ClientError::Api(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A pod still counts toward replicas: not finished and not being deleted.
pub fn is_active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// The pod's Ready condition is True (what Services, ReplicaSets and
/// StatefulSets count as ready).
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How long until a pod counts as available: Ready for `min_ready_seconds`
/// (Kubernetes' `IsPodAvailable`). None while it is not Ready; zero once
/// available.
pub fn available_in(
    p: &Pod,
    min_ready_seconds: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<std::time::Duration> {
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    if min_ready_seconds <= 0 {
        return Some(std::time::Duration::ZERO);
    }
    let since = ready
        .last_transition_time
        .as_ref()
        .map_or(now, minik8s_api::meta::utc_of);
    let at = since + chrono::Duration::seconds(min_ready_seconds.into());
    Some((at - now).to_std().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(refs: Value) -> ObjectMeta {
        serde_json::from_value(
            json!({"name": "p", "resourceVersion": "7", "ownerReferences": refs}),
        )
        .unwrap()
    }

    #[test]
    fn adopting_and_releasing_keep_the_other_owners() {
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u1"});
        let m = meta(json!([other]));
        let owner: ObjectMeta =
            serde_json::from_value(json!({"name": "web", "uid": "u2"})).unwrap();
        let me = controller_ref("apps/v1", "ReplicaSet", &owner);
        let adopted = adopt_patch(&m, &me);
        assert_eq!(adopted["metadata"]["ownerReferences"], json!([other, me]));
        assert_eq!(
            adopted["metadata"]["resourceVersion"], "7",
            "valid for the version read"
        );

        let m = meta(json!([other, me]));
        assert_eq!(
            controller_of(&m),
            Some(("u2".into(), "ReplicaSet".into(), "web".into()))
        );
        let released = release_patch(&m, "u2");
        assert_eq!(released["metadata"]["ownerReferences"], json!([other]));
    }

    #[test]
    fn ready_means_the_ready_condition_and_active_means_not_finished() {
        let pod = |phase: &str, ready: &str, deleting: bool| -> Pod {
            let mut v = json!({"metadata": {"name": "p"},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}});
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-11-24T00:00:00Z");
            }
            serde_json::from_value(v).unwrap()
        };
        assert!(is_ready(&pod("Running", "True", false)));
        assert!(!is_ready(&pod("Running", "False", false)));
        assert!(is_active(&pod("Pending", "False", false)));
        assert!(!is_active(&pod("Succeeded", "False", false)));
        assert!(!is_active(&pod("Running", "True", true)));
    }
}
