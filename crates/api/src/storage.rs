//! What the storage controllers and the scheduler both need to know about
//! claims and volumes: their well-known annotations, sizes, classes and
//! phases, and whether a volume can serve a claim (Kubernetes'
//! `pkg/controller/volume/persistentvolume/util`).

use crate::quantity::Quantity;
use crate::selector::Selector;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};

/// Set on a claim once the binder completed its binding.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on claims and volumes the binder (not the user) bound.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a WaitForFirstConsumer claim's first pod.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The provisioner asked to make a claim's volume.
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The same, by its older name (still set by Kubernetes).
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Which provisioner made a volume.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// The claim's class name; unset and "" both mean "no class".
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

pub fn volume_class(pv: &PersistentVolume) -> &str {
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The storage a claim requests, as written (`1Gi`).
pub fn requested_quantity(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.as_str())
}

/// The storage a claim requests, in bytes.
pub fn requested(claim: &PersistentVolumeClaim) -> f64 {
    requested_quantity(claim)
        .and_then(|q| Quantity::parse(q).ok())
        .map_or(0.0, |q| q.0)
}

/// A volume's capacity in bytes.
pub fn capacity(pv: &PersistentVolume) -> f64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .map_or(0.0, |q| q.0)
}

pub fn volume_phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// The claims a pod's volumes name.
pub fn pod_claims(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

/// The node a volume's required node affinity pins it to (`kubernetes.io/hostname In [node]`).
pub fn pinned_node(pv: &PersistentVolume) -> Option<String> {
    pv.spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|e| e.key == "kubernetes.io/hostname" && e.operator == "In")
        .and_then(|e| e.values.as_ref()?.first().cloned())
}

fn access_modes(modes: Option<&Vec<String>>) -> &[String] {
    modes.map(Vec::as_slice).unwrap_or(&[])
}

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map(String::as_str).unwrap_or("Filesystem")
}

/// Does the volume's claimRef name this claim (by uid when it has one)?
pub fn claim_ref_names(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == claim.metadata.name
        && r.namespace == claim.metadata.namespace
        && (r.uid.is_none() || r.uid == claim.metadata.uid)
}

/// Can this volume serve this claim (class, mode, access modes, size, selector)?
pub fn fits(claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let (Some(cs), Some(vs)) = (claim.spec.as_ref(), pv.spec.as_ref()) else {
        return false;
    };
    if pv.metadata.deletion_timestamp.is_some() || volume_phase(pv) == "Failed" {
        return false;
    }
    if vs.claim_ref.is_some() && !claim_ref_names(pv, claim) {
        return false;
    }
    let selected = cs.selector.as_ref().is_none_or(|sel| {
        Selector::from_label_selector(sel)
            .is_ok_and(|s| s.matches(pv.metadata.labels.as_ref().unwrap_or(&Default::default())))
    });
    let modes = access_modes(vs.access_modes.as_ref());
    volume_class(pv) == claim_class(claim)
        && volume_mode(vs.volume_mode.as_ref()) == volume_mode(cs.volume_mode.as_ref())
        && access_modes(cs.access_modes.as_ref())
            .iter()
            .all(|m| modes.contains(m))
        && capacity(pv) >= requested(claim)
        && selected
}

/// A PersistentVolume's `claimRef` to `claim` (with its uid: bound to this
/// claim, not to a later one of the same name).
pub fn claim_ref(claim: &PersistentVolumeClaim) -> serde_json::Value {
    serde_json::json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
        "namespace": claim.metadata.namespace, "name": claim.metadata.name,
        "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version})
}
