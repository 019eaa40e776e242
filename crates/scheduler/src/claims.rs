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
        let reference =
            json!({"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid});
        for key in &plan.reserve {
            let (ns, name) = key.split_once('/').unwrap_or(("default", key));
            let api = self
                .client
                .dynamic(registry::of::<ResourceClaim>(), Some(ns));
            let Some(claim) = self.resource_claims.get(key) else {
                return Err(ClientError::Decode(format!("resourceclaim {key} is gone")));
            };
            let allocation = plan
                .allocations
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, a)| a);
            let mut rv = claim.metadata.resource_version.clone();
            if allocation.is_some() && !minik8s_api::dra::protected(&claim) {
                let mut finalizers: Vec<String> =
                    claim.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(DELETE_PROTECTION.into());
                let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}});
                let updated = api.patch(name, None, content::MERGE_PATCH, &patch).await?;
                rv = updated
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            let mut reserved: Vec<Value> = claim
                .status
                .iter()
                .flat_map(|s| s.reserved_for.iter().flatten())
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .collect();
            if reserved.iter().any(|r| r["uid"] == reference["uid"]) && allocation.is_none() {
                continue;
            }
            reserved.retain(|r| r["uid"] != reference["uid"]);
            reserved.push(reference.clone());
            let mut status = json!({"reservedFor": reserved});
            if let Some(a) = allocation {
                let mut a = a.clone();
                a["allocationTimestamp"] = json!(minik8s_api::meta::now_rfc3339());
                status["allocation"] = a;
            }
            let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
            api.patch(name, Some("status"), content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(())
    }
}
