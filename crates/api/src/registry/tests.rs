//! The registry's lookups and key layout.

use super::*;

#[test]
fn aliases_resolve() {
    for (alias, kind) in [
        ("po", "Pod"),
        ("pods", "Pod"),
        ("Pod", "Pod"),
        ("no", "Node"),
        ("ns", "Namespace"),
        ("svc", "Service"),
        ("ep", "Endpoints"),
        ("rs", "ReplicaSet"),
        ("sts", "StatefulSet"),
        ("hpa", "HorizontalPodAutoscaler"),
        ("lws", "LeaderWorkerSet"),
        ("dsrs", "DisaggregatedSetRoleScaler"),
        ("pg", "PodGroup"),
        ("ing", "Ingress"),
        ("ingressclasses", "IngressClass"),
        ("disaggregatedsets", "DisaggregatedSet"),
        ("replicasets.apps", "ReplicaSet"),
    ] {
        assert_eq!(by_alias(alias).map(|r| &*r.kind), Some(kind), "{alias}");
    }
    assert!(by_alias("frobs").is_none());
}

#[test]
fn keys_and_paths() {
    let rs = by_kind("apps/v1", "ReplicaSet").unwrap();
    assert_eq!(
        rs.key(Some("default"), "web"),
        "/registry/apps/replicasets/default/web"
    );
    assert_eq!(
        rs.object_path(Some("ns1"), "web"),
        "/apis/apps/v1/namespaces/ns1/replicasets/web"
    );
    let node = by_kind("v1", "Node").unwrap();
    assert_eq!(node.key(Some("ignored"), "n1"), "/registry/core/nodes/n1");
    assert_eq!(node.collection_path(None), "/api/v1/nodes");
    assert_eq!(rs.group_resource(), "replicasets.apps");
}

#[test]
fn one_prefix_never_contains_another() {
    // A list of one resource must never pick up keys of another.
    for a in REGISTRY {
        for b in REGISTRY {
            if a.plural != b.plural || a.group != b.group {
                assert!(!a.key_prefix(None).starts_with(&b.key_prefix(None)));
            }
        }
    }
}

#[test]
fn a_kind_is_told_by_its_type() {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use k8s_openapi::api::scheduling::v1beta1::PodGroup as WorkloadPodGroup;
    assert!(of::<Namespace>().is::<Namespace>());
    assert!(!of::<Namespace>().is::<Pod>());
    // Same kind name, another group: not the same kind.
    assert!(of::<crate::podgroup::PodGroup>().is::<crate::podgroup::PodGroup>());
    assert!(!of::<crate::podgroup::PodGroup>().is::<WorkloadPodGroup>());
}
