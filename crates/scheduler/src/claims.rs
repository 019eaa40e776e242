//! The scheduler's side of Dynamic Resource Allocation (I/O and state
//! around the pure [`crate::dra`]): the device inventory built from the
//! ResourceSlices, which devices are taken, and the PreBind that writes a
//! claim's allocation and reservation before the pod is bound.
//!
//! ```text
//!  slices watch ─▶ inventory dropped ─▶ rebuilt on the next attempt
//!  claims watch ─▶ devices taken by allocated claims (counted per device)
//!  decision ────▶ allocation assumed (taken at once) ─▶ PreBind: finalizer, then
//!                 status {allocation, reservedFor += pod} guarded by resourceVersion
//!                 ─▶ the watch shows it: the assumption is dropped
//! ```

use crate::dra::{self, DeviceId, Inventory, PodDevices};
use crate::{lock, Scheduler};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use minik8s_api::dra::DELETE_PROTECTION;
use minik8s_api::registry;
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::ClientError;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What to write for a pod's claims once its node is chosen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevicePlan {
    /// New allocations: (claim key, `status.allocation`).
    pub allocations: Vec<(String, Value)>,
    /// Every claim of the pod, to reserve for it.
    pub reserve: Vec<String>,
}

impl DevicePlan {
    pub fn is_empty(&self) -> bool {
        self.reserve.is_empty()
    }
}

/// Devices taken, from the claims watch and from decisions made here.
#[derive(Default)]
pub(crate) struct DeviceState {
    inventory: Option<Arc<Inventory>>,
    /// Devices of allocated claims as the watch shows them.
    by_claim: HashMap<String, Vec<DeviceId>>,
    /// Allocations decided here that the watch does not show yet.
    assumed: HashMap<String, Vec<DeviceId>>,
    in_use: HashMap<DeviceId, usize>,
}

impl DeviceState {
    fn count(&mut self, devices: &[DeviceId], delta: isize) {
        for d in devices {
            let n = self.in_use.entry(d.clone()).or_default();
            *n = n.saturating_add_signed(delta);
            if *n == 0 {
                self.in_use.remove(d);
            }
        }
    }

    fn set_claim(&mut self, key: &str, devices: Vec<DeviceId>) {
        if let Some(old) = self.by_claim.remove(key) {
            self.count(&old, -1);
        }
        if !devices.is_empty() {
            // The watch caught up with a decision made here.
            if let Some(assumed) = self.assumed.remove(key) {
                self.count(&assumed, -1);
            }
            self.count(&devices, 1);
            self.by_claim.insert(key.to_string(), devices);
        }
    }

    pub(crate) fn taken(&self, d: &DeviceId) -> bool {
        self.in_use.contains_key(d)
    }

    fn assume(&mut self, key: &str, devices: Vec<DeviceId>) {
        self.forget(key);
        self.count(&devices, 1);
        self.assumed.insert(key.to_string(), devices);
    }

    fn forget(&mut self, key: &str) {
        if let Some(old) = self.assumed.remove(key) {
            self.count(&old, -1);
        }
    }
}

/// The plan for the pod's claims on `node`, with `taken` devices in use.
pub(crate) fn plan_for(
    needs: Option<&PodDevices>,
    inventory: &Inventory,
    node: &Node,
    taken: &dyn Fn(&DeviceId) -> bool,
) -> DevicePlan {
    let Some(needs) = needs else {
        return DevicePlan::default();
    };
    DevicePlan {
        allocations: dra::allocate(needs, node, inventory, taken).unwrap_or_default(),
        reserve: needs.claims.iter().map(|(k, _)| k.clone()).collect(),
    }
}

/// A claim as it will be once `allocation` is written (for the next
/// members of a gang being placed).
pub(crate) fn with_allocation(claim: &ResourceClaim, allocation: &Value) -> Option<ResourceClaim> {
    let mut c = claim.clone();
    c.status.get_or_insert_with(Default::default).allocation =
        Some(serde_json::from_value(allocation.clone()).ok()?);
    Some(c)
}

impl Scheduler {
    /// A claim changed: the devices it takes.
    pub(crate) fn on_resource_claim(&self, ev: &Event<ResourceClaim>) {
        let mut state = lock(&self.devices);
        match ev {
            Event::Added(c) | Event::Updated { new: c, .. } => {
                state.set_claim(&object_key(&c.metadata), dra::devices_of(c))
            }
            Event::Deleted(c) => {
                let key = object_key(&c.metadata);
                state.set_claim(&key, Vec::new());
                state.forget(&key);
            }
        }
    }

    /// A slice changed: the inventory is rebuilt on the next attempt.
    pub(crate) fn on_resource_slice(&self, _ev: &Event<ResourceSlice>) {
        lock(&self.devices).inventory = None;
        lock(&self.matches).inventory_changed();
    }

    pub(crate) fn inventory(&self) -> Arc<Inventory> {
        let mut state = lock(&self.devices);
        if let Some(inv) = &state.inventory {
            return inv.clone();
        }
        let inv = Arc::new(Inventory::new(&self.resource_slices.list()));
        state.inventory = Some(inv.clone());
        inv
    }

    /// The pod's claims as allocation needs them (None: it has none);
    /// Err(why) when no node can take it until a claim or class changes.
    /// `simulated` replaces claims allocated earlier in a gang's placement.
    pub(crate) fn pod_devices(
        &self,
        pod: &Pod,
        inventory: &Inventory,
        simulated: &HashMap<String, Arc<ResourceClaim>>,
    ) -> Result<Option<PodDevices>, String> {
        dra::prepare(
            pod,
            |k| {
                simulated
                    .get(k)
                    .cloned()
                    .or_else(|| self.resource_claims.get(k))
            },
            |c| self.device_classes.get(c),
            inventory,
            &self.matches,
        )
    }

    /// The allocation for the chosen node, taken at once so the next pod
    /// does not get the same devices.
    pub(crate) fn device_plan(
        &self,
        needs: Option<&PodDevices>,
        inventory: &Inventory,
        node: &Node,
    ) -> DevicePlan {
        let plan = {
            let state = lock(&self.devices);
            plan_for(needs, inventory, node, &|d| state.taken(d))
        };
        self.assume_device_plan(&plan);
        plan
    }

    /// Takes a plan's devices until the watch shows its claims allocated.
    pub(crate) fn assume_device_plan(&self, plan: &DevicePlan) {
        let mut state = lock(&self.devices);
        for (key, allocation) in &plan.allocations {
            state.assume(key, dra::devices_of_allocation(allocation));
        }
    }

    /// Gives back what a plan took (its binding failed).
    pub(crate) fn forget_device_plan(&self, plan: &DevicePlan) {
        let mut state = lock(&self.devices);
        for (key, _) in &plan.allocations {
            state.forget(key);
        }
    }

    /// PreBind: each claim gets its allocation (protected by the
    /// delete-protection finalizer first) and the pod in `reservedFor`,
    /// each write guarded by the claim's resourceVersion.
    pub(crate) async fn write_device_plan(
        &self,
        pod: &Pod,
        plan: &DevicePlan,
    ) -> Result<(), ClientError> {
        for key in &plan.reserve {
            let allocation = plan
                .allocations
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, a)| a);
            self.reserve_claim(pod, key, allocation).await?;
        }
        Ok(())
    }

    /// Writes one claim's allocation (if this pod allocates it) and adds the
    /// pod to its `reservedFor`. Members of a gang sharing a claim write it
    /// at the same time: a write that lost the race reads the claim again
    /// and retries, and a pod whose sibling allocates the claim waits for
    /// that allocation (a reservation needs one).
    async fn reserve_claim(
        &self,
        pod: &Pod,
        key: &str,
        allocation: Option<&Value>,
    ) -> Result<(), ClientError> {
        const ATTEMPTS: u32 = 20;
        let reference =
            json!({"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid});
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let api = self
            .client
            .dynamic(registry::of::<ResourceClaim>(), Some(ns));
        let mut claim = self
            .resource_claims
            .get(key)
            .ok_or_else(|| ClientError::Decode(format!("resourceclaim {key} is gone")))?;
        for attempt in 1..=ATTEMPTS {
            match claim_write(&claim, allocation, &reference) {
                ClaimWrite::Done => return Ok(()),
                ClaimWrite::Conflict(why) => return Err(ClientError::Decode(why)),
                ClaimWrite::WaitForAllocation => {}
                ClaimWrite::Patch { finalizer, status } => {
                    let mut rv = claim.metadata.resource_version.clone();
                    let mut result = Ok(());
                    if finalizer {
                        let mut finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
                        finalizers.push(DELETE_PROTECTION.into());
                        let patch =
                            json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}});
                        match api.patch(name, None, content::MERGE_PATCH, &patch).await {
                            Ok(updated) => {
                                rv = updated
                                    .pointer("/metadata/resourceVersion")
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                            }
                            Err(e) => result = Err(e),
                        }
                    }
                    if result.is_ok() {
                        let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
                        result = api
                            .patch(name, Some("status"), content::MERGE_PATCH, &patch)
                            .await
                            .map(|_| ());
                    }
                    match result {
                        Ok(()) => return Ok(()),
                        Err(e) if e.is_conflict() && attempt < ATTEMPTS => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            if attempt == ATTEMPTS {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let fresh = api.get(name).await?;
            claim = Arc::new(
                serde_json::from_value(fresh).map_err(|e| ClientError::Decode(e.to_string()))?,
            );
        }
        Err(ClientError::Decode(format!(
            "resourceclaim {key}: not allocated by the pod that shares it"
        )))
    }
}

/// What writing a pod's use of one claim takes, from the claim as it is.
#[derive(Debug, PartialEq)]
pub(crate) enum ClaimWrite {
    /// The pod holds it already.
    Done,
    /// Write the status (and first the delete-protection finalizer).
    Patch { finalizer: bool, status: Value },
    /// A sibling allocates the claim; reserve once it has.
    WaitForAllocation,
    /// Allocated to other devices than this plan's.
    Conflict(String),
}

/// The pure decision of [`Scheduler::reserve_claim`].
pub(crate) fn claim_write(
    claim: &ResourceClaim,
    allocation: Option<&Value>,
    reference: &Value,
) -> ClaimWrite {
    let existing = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    let mut reserved: Vec<Value> = claim
        .status
        .iter()
        .flat_map(|s| s.reserved_for.iter().flatten())
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .collect();
    let holds = reserved.iter().any(|r| r["uid"] == reference["uid"]);
    // A claim a sibling allocated already: the same devices are fine.
    let allocation = match (allocation, existing) {
        (Some(mine), Some(theirs)) => {
            let theirs = serde_json::to_value(theirs).unwrap_or_default();
            let devices = |a: &Value| {
                let mut d = dra::devices_of_allocation(a);
                d.sort();
                d
            };
            if devices(mine) != devices(&theirs) {
                return ClaimWrite::Conflict(format!(
                    "resourceclaim {} is allocated to other devices",
                    claim.metadata.name.as_deref().unwrap_or("")
                ));
            }
            None
        }
        (None, None) => return ClaimWrite::WaitForAllocation,
        (mine, _) => mine,
    };
    if holds && allocation.is_none() {
        return ClaimWrite::Done;
    }
    reserved.retain(|r| r["uid"] != reference["uid"]);
    reserved.push(reference.clone());
    let mut status = json!({"reservedFor": reserved});
    if let Some(a) = allocation {
        let mut a = a.clone();
        a["allocationTimestamp"] = json!(minik8s_api::meta::now_rfc3339());
        status["allocation"] = a;
    }
    ClaimWrite::Patch {
        finalizer: allocation.is_some() && !minik8s_api::dra::protected(claim),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(allocation: Option<Value>, reserved: &[&str]) -> ResourceClaim {
        let reserved: Vec<Value> = reserved
            .iter()
            .map(|u| json!({"resource": "pods", "name": u, "uid": u}))
            .collect();
        let mut status = json!({"reservedFor": reserved});
        if let Some(a) = allocation {
            status["allocation"] = a;
        }
        serde_json::from_value(json!({"metadata": {"name": "g-gpu", "namespace": "ns"},
            "spec": {"devices": {}}, "status": status}))
        .unwrap()
    }

    fn allocation(device: &str) -> Value {
        json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.minik8s.io",
            "pool": "n1", "device": device}]}})
    }

    fn pod(uid: &str) -> Value {
        json!({"resource": "pods", "name": uid, "uid": uid})
    }

    #[test]
    fn gang_members_sharing_a_claim_allocate_once_and_all_reserve() {
        // The first member allocates: finalizer, allocation, reservation.
        match claim_write(&claim(None, &[]), Some(&allocation("gpu-0")), &pod("a")) {
            ClaimWrite::Patch { finalizer, status } => {
                assert!(finalizer);
                assert_eq!(status["reservedFor"], json!([pod("a")]));
                assert_eq!(
                    status["allocation"]["devices"],
                    allocation("gpu-0")["devices"]
                );
            }
            other => panic!("{other:?}"),
        }
        // A sibling that got there first with the same devices: only reserve.
        let taken = claim(Some(allocation("gpu-0")), &["b"]);
        match claim_write(&taken, Some(&allocation("gpu-0")), &pod("a")) {
            ClaimWrite::Patch { finalizer, status } => {
                assert!(!finalizer && status.get("allocation").is_none());
                assert_eq!(status["reservedFor"], json!([pod("b"), pod("a")]));
            }
            other => panic!("{other:?}"),
        }
        // Another pod's devices: refused, never overwritten.
        assert!(matches!(
            claim_write(&taken, Some(&allocation("gpu-1")), &pod("a")),
            ClaimWrite::Conflict(_)
        ));
        // A member that only reserves waits for the allocation.
        assert_eq!(
            claim_write(&claim(None, &[]), None, &pod("c")),
            ClaimWrite::WaitForAllocation
        );
        assert_eq!(claim_write(&taken, None, &pod("b")), ClaimWrite::Done);
    }
}
