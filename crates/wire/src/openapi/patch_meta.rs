//! Strategic-merge metadata (`x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`) of the list fields that have it, as the
//! Go types' struct tags give it. kubectl's client-side apply computes its
//! patches from these, and the server merges them with the same keys
//! (`minik8s_api::patch`), so the two must agree.

use serde_json::{json, Value};

/// (strategy, merge key) of `field` in `message`.
fn lookup(message: &str, field: &str) -> Option<(&'static str, Option<&'static str>)> {
    let short = message.rsplit('.').next().unwrap_or("");
    Some(match (short, field) {
        ("PodSpec", "volumes" | "resourceClaims") => ("merge,retainKeys", Some("name")),
        (
            "PodSpec",
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "imagePullSecrets"
            | "schedulingGates",
        ) => ("merge", Some("name")),
        ("PodSpec", "hostAliases") => ("merge", Some("ip")),
        ("PodSpec", "topologySpreadConstraints") => ("merge", Some("topologyKey")),
        ("Container" | "EphemeralContainer", "ports") => ("merge", Some("containerPort")),
        ("Container" | "EphemeralContainer", "env") => ("merge", Some("name")),
        ("Container" | "EphemeralContainer", "volumeMounts") => ("merge", Some("mountPath")),
        ("Container" | "EphemeralContainer", "volumeDevices") => ("merge", Some("devicePath")),
        ("PodStatus", "podIPs" | "hostIPs") => ("merge", Some("ip")),
        ("ServiceSpec", "ports") => ("merge", Some("port")),
        ("NodeSpec", "podCIDRs") => ("merge", None),
        ("NodeStatus", "addresses") => ("merge", Some("type")),
        ("ObjectMeta", "finalizers") => ("merge", None),
        ("ObjectMeta", "ownerReferences") => ("merge", Some("uid")),
        ("DeploymentSpec", "strategy") => ("retainKeys", None),
        // Every status's conditions merge by type.
        (s, "conditions") if s.ends_with("Status") => ("merge", Some("type")),
        _ => return None,
    })
}

/// Adds the patch metadata of `field` in `message` to its schema.
pub(super) fn annotate(message: &str, field: &str, prop: &mut Value) {
    if let Some((strategy, key)) = lookup(message, field) {
        prop["x-kubernetes-patch-strategy"] = json!(strategy);
        if let Some(k) = key {
            prop["x-kubernetes-patch-merge-key"] = json!(k);
        }
    }
}
