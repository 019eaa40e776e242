//! Persistent storage: the controllers that bind PersistentVolumeClaims to
//! PersistentVolumes, provision volumes for classes served here, give
//! volumes back per their reclaim policy, and keep in-use objects from being
//! deleted (Kubernetes' `pkg/controller/volume/*`).
//!
//! ```text
//!  claim created ──▶ binder.rs: a fitting volume? ── yes ─▶ bind both ways (claimRef, volumeName), Bound
//!                          │ no
//!                          ▼
//!            class provisioner = minik8s.io/local-path?
//!              WaitForFirstConsumer: wait for the scheduler's selected-node annotation
//!              then local_path.rs: a hostPath volume on that node, pre-bound to the claim
//!  claim deleted ──▶ reclaim.rs: volume Released ─▶ Retain: kept │ Delete: helper pod removes the
//!                                                              directory on its node, volume deleted
//!  protection.rs: kubernetes.io/pvc-protection leaves once no pod uses the claim,
//!                 kubernetes.io/pv-protection once the volume is not Bound
//! ```

pub mod binder;
pub mod local_path;
pub mod protection;
pub mod reclaim;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use minik8s_api::quantity::Quantity;

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

/// The storage a claim requests, in bytes.
pub fn requested(claim: &PersistentVolumeClaim) -> f64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
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
