//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the names and rules
//! the apiserver, the scheduler, the claim controller and the kubelet share.
//!
//! ```text
//!  ResourceClaimTemplate ─(claim controller, per pod)─▶ ResourceClaim
//!  ResourceSlice (a driver's devices on a node) ─┐
//!  DeviceClass (CEL selectors) ──────────────────┼─▶ scheduler: allocation + reservedFor in the claim's status
//!                                                 └─▶ kubelet: the driver prepares the devices, containers get them
//! ```
//!
//! Device selectors are CEL over one device (`minik8s_cel::device`); the
//! allocation itself is the scheduler's (`scheduler::dra`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

/// Keeps an allocated claim until it is deallocated (the scheduler adds it
/// before writing an allocation, the claim controller removes it).
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";
/// On a claim made from a template: the pod's claim entry it was made for.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// A namespace with this label `"true"` may ask for `adminAccess`.
pub const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access";
/// How many consumers a claim's `reservedFor` may hold.
pub const RESERVED_FOR_MAX: usize = 256;
/// The example driver built into the kubelet (`--fake-gpus N`).
pub const FAKE_GPU_DRIVER: &str = "gpu.minik8s.io";

/// The name of the ResourceClaim behind a pod's claim entry `entry`: the one
/// it names, or the one made for it from a template (from the pod's
/// `status.resourceClaimStatuses`); None while that one is not made yet.
pub fn pod_claim_name(pod: &Pod, entry: &str) -> Option<String> {
    let spec_entry = pod
        .spec
        .as_ref()?
        .resource_claims
        .as_ref()?
        .iter()
        .find(|c| c.name == entry)?;
    if let Some(name) = &spec_entry.resource_claim_name {
        return Some(name.clone());
    }
    pod.status
        .as_ref()?
        .resource_claim_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == entry)?
        .resource_claim_name
        .clone()
}

/// The pod's claim entries (name, whether made from a template).
pub fn pod_claim_entries(pod: &Pod) -> Vec<(String, bool)> {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .map(|claims| {
            claims
                .iter()
                .map(|c| (c.name.clone(), c.resource_claim_template_name.is_some()))
                .collect()
        })
        .unwrap_or_default()
}

/// Is the claim reserved for the pod (by uid)?
pub fn reserved_for(claim: &ResourceClaim, pod_uid: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| r.iter().any(|c| c.uid == pod_uid))
}

/// Does the claim carry the delete-protection finalizer?
pub fn protected(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == DELETE_PROTECTION)
}

/// Is the claim allocated?
pub fn allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// A fully qualified attribute or capacity name: `domain/id`; an unqualified
/// one belongs to the device's driver.
pub fn qualify<'a>(driver: &'a str, name: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((domain, id)) => (domain, id),
        None => (driver, name),
    }
}
