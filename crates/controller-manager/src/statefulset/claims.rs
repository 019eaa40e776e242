//! A StatefulSet's `volumeClaimTemplates`: each pod gets its own claims,
//! `<template>-<set>-<ordinal>`, made before the pod and reused when the pod
//! is recreated; `persistentVolumeClaimRetentionPolicy` decides, through
//! ownerReferences the garbage collector follows, whether they go with the
//! set (`whenDeleted: Delete` — owned by the set) or with a pod removed by a
//! scale-down (`whenScaled: Delete` — owned by that pod). Retain keeps them.
//! As Kubernetes' `stateful_set_utils.go` (StatefulSetAutoDeletePVC).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{json, Value};

/// `<template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

fn templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec.volume_claim_templates.as_deref().unwrap_or(&[])
}

/// The claims of ordinal `ordinal`: each template with its name, the set's
/// namespace and the template's labels plus the set's selector labels.
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<Value> {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let selector = set.spec.selector.match_labels.clone().unwrap_or_default();
    templates(set)
        .iter()
        .map(|t| {
            let template = t.metadata.name.as_deref().unwrap_or("");
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector.clone());
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": claim_name(template, set_name, ordinal),
                                "namespace": set.metadata.namespace, "labels": labels,
                                "annotations": t.metadata.annotations},
                   "spec": t.spec})
        })
        .collect()
}

/// The pod's volumes with each template's claim in place of any volume of
/// the same name (Kubernetes' updateStorage).
pub fn with_claim_volumes(pod: &mut Value, set: &StatefulSet, ordinal: i32) {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    if templates(set).is_empty() {
        return;
    }
    if !pod["spec"]["volumes"].is_array() {
        pod["spec"]["volumes"] = json!([]);
    }
    let Some(volumes) = pod["spec"]["volumes"].as_array_mut() else {
        return;
    };
    for t in templates(set) {
        let template = t.metadata.name.as_deref().unwrap_or("");
        volumes.retain(|v| v["name"] != template);
        volumes.push(json!({"name": template,
            "persistentVolumeClaim": {"claimName": claim_name(template, set_name, ordinal)}}));
    }
}

fn reference(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// The ownerReferences a claim should have under the set's retention
/// policy: the pod's alone when `whenScaled: Delete` and its ordinal is being
/// scaled away (`condemned`), else the set's when `whenDeleted: Delete`.
/// References to other objects are kept; stale ones to the set or a pod of
/// the set are dropped.
pub fn desired_owners(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: Option<&ObjectMeta>,
    condemned: bool,
) -> Vec<OwnerReference> {
    let policy = set.spec.persistent_volume_claim_retention_policy.as_ref();
    let when =
        |f: fn(
            &k8s_openapi::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy,
        ) -> Option<&String>| { policy.and_then(f).map(String::as_str) == Some("Delete") };
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let ours = |r: &OwnerReference| {
        (r.kind == "StatefulSet" && r.name == set_name)
            || (r.kind == "Pod" && r.name.starts_with(&format!("{set_name}-")))
    };
    let mut out: Vec<OwnerReference> = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !ours(r))
        .cloned()
        .collect();
    // A claim scaled away goes with its pod alone; otherwise with the set.
    match pod {
        Some(pod) if condemned && when(|p| p.when_scaled.as_ref()) => {
            out.push(reference("v1", "Pod", pod));
        }
        _ if when(|p| p.when_deleted.as_ref()) => {
            out.push(reference("apps/v1", "StatefulSet", &set.metadata));
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(policy: Value) -> StatefulSet {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
                     "template": {"spec": {"containers": [], "volumes": [{"name": "data", "emptyDir": {}}, {"name": "keep", "emptyDir": {}}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
                         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                     "persistentVolumeClaimRetentionPolicy": policy}}))
        .unwrap()
    }

    #[test]
    fn each_ordinal_gets_its_own_claim_in_place_of_the_template_volume() {
        let s = set(json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        let claims = claims_for(&s, 2);
        assert_eq!(claims[0]["metadata"]["name"], "data-web-2");
        assert_eq!(
            claims[0]["metadata"]["labels"],
            json!({"app": "web", "tier": "db"})
        );
        let mut pod = json!({"spec": serde_json::to_value(&s.spec.template.spec).unwrap()});
        with_claim_volumes(&mut pod, &s, 2);
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "keep", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-2"}}])
        );
    }

    #[test]
    fn retention_policy_sets_the_owners() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "data-web-2",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-2", "uid": "old-pod"},
                                {"apiVersion": "x/v1", "kind": "Backup", "name": "b", "uid": "b"}]}})).unwrap();
        let pod = ObjectMeta {
            name: Some("web-2".into()),
            uid: Some("pod-uid".into()),
            ..Default::default()
        };
        let retain = set(json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        let kinds = |refs: Vec<OwnerReference>| {
            refs.into_iter()
                .map(|r| format!("{}/{}", r.kind, r.uid))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(desired_owners(&claim, &retain, Some(&pod), true)),
            ["Backup/b"]
        );
        let delete = set(json!({"whenDeleted": "Delete", "whenScaled": "Delete"}));
        assert_eq!(
            kinds(desired_owners(&claim, &delete, Some(&pod), false)),
            ["Backup/b", "StatefulSet/set-uid"]
        );
        assert_eq!(
            kinds(desired_owners(&claim, &delete, Some(&pod), true)),
            ["Backup/b", "Pod/pod-uid"]
        );
    }
}
