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
//!            provisioner = minik8s.io/nfs? nfs.rs: a directory of the class's export, an nfs volume
//!  claim deleted ──▶ reclaim.rs: volume Released ─▶ Retain: kept │ Delete: the directory goes (a helper
//!                                                              pod on its node; over NFS), then the volume
//!  protection.rs: kubernetes.io/pvc-protection leaves once no pod uses the claim,
//!                 kubernetes.io/pv-protection once the volume is not Bound
//! ```

pub mod binder;
pub mod local_path;
pub mod nfs;
pub mod protection;
pub mod reclaim;

pub use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
pub use minik8s_api::storage::*;

/// What every provisioned volume has: the name `pvc-<claim uid>`, the
/// claim's size and access modes, the class's name and reclaim policy, the
/// provisioner's annotation, and a claimRef pre-binding it to the claim.
/// The provisioner adds the volume source (and node affinity).
pub fn provisioned_volume(
    claim: &PersistentVolumeClaim,
    class: &k8s_openapi::api::storage::v1::StorageClass,
    provisioner: &str,
) -> serde_json::Value {
    let spec = claim.spec.clone().unwrap_or_default();
    let size = requested_quantity(claim).unwrap_or("0");
    serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or("")),
                     "annotations": {PROVISIONED_BY: provisioner}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.access_modes,
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "storageClassName": class.metadata.name,
            "volumeMode": "Filesystem",
            "claimRef": claim_ref(claim),
        }
    })
}
