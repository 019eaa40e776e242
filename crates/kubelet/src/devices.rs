//! Dynamic Resource Allocation on the node: the kubelet's side (Kubernetes'
//! DRA manager) and the example driver built into it (`--fake-gpus N`, as
//! kubernetes-sigs/dra-example-driver does it, for learning without hardware).
//!
//! ```text
//!  begin ─────▶ each driver's devices published as ResourceSlice <node>-<driver>
//!               (pool = the node, owned by the Node so they go with it)
//!  pod start ─▶ each of its claims read: allocated, reserved for this pod, every
//!               device of a driver registered here ─ else FailedPrepareDynamicResources
//!            ─▶ per container: the devices of the claims (and requests) it names,
//!               handed to their driver for its edits (env, device nodes), as CDI edits are
//! ```
//!
//! [`DeviceDriver`] is the boundary: a driver for real hardware gives its
//! devices and the edits that expose them (`/dev/nvidia0` as a device node,
//! its libraries as mounts) and the rest of the kubelet does not change.

use crate::Kubelet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{Device, ResourceClaim, ResourceSlice};
use minik8s_api::dra;
use minik8s_api::registry;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// What a driver does to a container for the devices it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerEdits {
    pub env: Vec<(String, String)>,
    /// Host device nodes made available in the container at the same path.
    pub device_nodes: Vec<String>,
}

impl ContainerEdits {
    fn extend(&mut self, other: ContainerEdits) {
        self.env.extend(other.env);
        self.device_nodes.extend(other.device_nodes);
    }
}

/// A DRA driver running on this node.
pub trait DeviceDriver: Send + Sync {
    /// Its name (`spec.driver` of its slices, `driver` of allocation results).
    fn name(&self) -> &str;
    /// The devices it publishes for this node.
    fn devices(&self) -> Vec<Device>;
    /// The edits that give a container these of its devices (by name, in
    /// allocation order).
    fn container_edits(&self, devices: &[String]) -> Result<ContainerEdits, String>;
    /// Checks an opaque configuration a claim or its class gives the
    /// driver: Err(why) refuses the pod's start rather than ignore it.
    fn check_config(&self, parameters: &serde_json::Value) -> Result<(), String>;
}

/// The example driver: `count` make-believe GPUs.
pub struct FakeGpus {
    node: String,
    count: usize,
}

/// Every fake GPU's memory.
pub const FAKE_GPU_MEMORY: &str = "16Gi";
/// Every fake GPU's model attribute.
pub const FAKE_GPU_MODEL: &str = "minik8s-fake-gpu";

impl FakeGpus {
    pub fn new(node: &str, count: usize) -> FakeGpus {
        FakeGpus {
            node: node.to_string(),
            count,
        }
    }

    /// A stable uuid per (node, index), shaped as NVIDIA's `GPU-…` ids.
    pub fn uuid(&self, index: usize) -> String {
        // FNV-1a over the node name and index: stable across restarts.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.node.bytes().chain(index.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        let hex = format!("{h:016x}{:016x}", h.rotate_left(17) ^ index as u64);
        format!(
            "GPU-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

impl DeviceDriver for FakeGpus {
    fn name(&self) -> &str {
        dra::FAKE_GPU_DRIVER
    }

    fn devices(&self) -> Vec<Device> {
        (0..self.count)
            .filter_map(|i| {
                serde_json::from_value(json!({
                    "name": format!("gpu-{i}"),
                    "attributes": {
                        "model": {"string": FAKE_GPU_MODEL},
                        "index": {"int": i},
                        "uuid": {"string": self.uuid(i)},
                        "driverVersion": {"version": "1.0.0"},
                    },
                    "capacity": {"memory": {"value": FAKE_GPU_MEMORY}},
                }))
                .ok()
            })
            .collect()
    }

    /// `GPU_DEVICE_<k>=<uuid>` for the container's k-th GPU, and
    /// `NVIDIA_VISIBLE_DEVICES` listing them, as the NVIDIA runtime reads it.
    fn container_edits(&self, devices: &[String]) -> Result<ContainerEdits, String> {
        let mut uuids = Vec::new();
        for name in devices {
            let index = name
                .strip_prefix("gpu-")
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|i| *i < self.count)
                .ok_or_else(|| format!("{} has no device {name}", self.name()))?;
            uuids.push(self.uuid(index));
        }
        let mut env: Vec<(String, String)> = uuids
            .iter()
            .enumerate()
            .map(|(k, u)| (format!("GPU_DEVICE_{k}"), u.clone()))
            .collect();
        env.push(("NVIDIA_VISIBLE_DEVICES".into(), uuids.join(",")));
        Ok(ContainerEdits {
            env,
            device_nodes: Vec::new(),
        })
    }

    /// Make-believe GPUs have nothing to configure (no sharing strategy, no
    /// time slices): a configuration is refused, not ignored.
    fn check_config(&self, _parameters: &serde_json::Value) -> Result<(), String> {
        Err(format!(
            "driver {} (minik8s' example driver) takes no opaque configuration",
            self.name()
        ))
    }
}

/// The opaque configurations of a claim's allocation: (driver, parameters).
pub fn configs_of(claim: &ResourceClaim) -> Vec<(String, serde_json::Value)> {
    let configs = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.config.as_ref());
    configs
        .into_iter()
        .flatten()
        .filter_map(|c| c.opaque.as_ref())
        .map(|o| (o.driver.clone(), o.parameters.0.clone()))
        .collect()
}

/// The drivers this kubelet runs.
pub fn drivers(config: &crate::Config) -> Vec<Arc<dyn DeviceDriver>> {
    let mut out: Vec<Arc<dyn DeviceDriver>> = Vec::new();
    if config.fake_gpus > 0 {
        out.push(Arc::new(FakeGpus::new(&config.node_name, config.fake_gpus)));
    }
    out
}

/// The slice a driver publishes for `node`.
pub fn slice_of(node: &Node, driver: &dyn DeviceDriver) -> serde_json::Value {
    let name = node.metadata.name.as_deref().unwrap_or("");
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": format!("{name}-{}", driver.name()),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                 "uid": node.metadata.uid, "controller": true}],
        },
        "spec": {
            "driver": driver.name(),
            "nodeName": name,
            "pool": {"name": name, "generation": 0, "resourceSliceCount": 1},
            "devices": driver.devices(),
        },
    })
}

/// Which of a claim's allocated devices a container gets: those of the
/// requests it names (all, when it names none), by driver.
pub fn devices_for(claim: &ResourceClaim, request: Option<&str>) -> Vec<(String, String)> {
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref());
    results
        .into_iter()
        .flatten()
        .filter(|r| {
            request.is_none_or(|q| r.request == q || r.request.starts_with(&format!("{q}/")))
        })
        .map(|r| (r.driver.clone(), r.device.clone()))
        .collect()
}

impl Kubelet {
    /// Publishes each driver's slice (replacing an older one) and removes
    /// the slices of drivers no longer run here.
    pub(crate) async fn publish_resource_slices(&self) -> anyhow::Result<()> {
        let node_name = &self.config.node_name;
        let slices = self.client.dynamic(registry::of::<ResourceSlice>(), None);
        // A driver this kubelet no longer runs: its devices are gone.
        if !self
            .drivers
            .iter()
            .any(|d| d.name() == dra::FAKE_GPU_DRIVER)
        {
            let ours = format!("{node_name}-{}", dra::FAKE_GPU_DRIVER);
            match slices.delete(&ours, &Default::default()).await {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
        }
        if self.drivers.is_empty() {
            return Ok(());
        }
        let node: Node = serde_json::from_value(
            self.client
                .dynamic(registry::of::<Node>(), None)
                .get(node_name)
                .await?,
        )?;
        for driver in &self.drivers {
            let slice = slice_of(&node, driver.as_ref());
            let name = slice["metadata"]["name"].as_str().unwrap_or("").to_string();
            match slices.get(&name).await {
                Ok(old) => {
                    let same = old.get("spec") == slice.get("spec")
                        && old.pointer("/metadata/ownerReferences/0/uid")
                            == slice.pointer("/metadata/ownerReferences/0/uid");
                    if !same {
                        let mut slice = slice.clone();
                        slice["metadata"]["resourceVersion"] =
                            old["metadata"]["resourceVersion"].clone();
                        let generation = old
                            .pointer("/spec/pool/generation")
                            .and_then(|g| g.as_i64())
                            .unwrap_or(0);
                        slice["spec"]["pool"]["generation"] = json!(generation + 1);
                        slices.replace(&name, &slice).await?;
                    }
                }
                Err(e) if e.is_not_found() => {
                    slices.create(&slice).await?;
                }
                Err(e) => return Err(e.into()),
            }
            tracing::info!(node = %node_name, driver = driver.name(), devices = driver.devices().len(), "published a resource slice");
        }
        Ok(())
    }

    /// The device edits for each of the pod's containers (by name); Err(why)
    /// when a claim is not ready for the pod on this node (the pod waits, as
    /// Kubernetes' FailedPrepareDynamicResources).
    pub(crate) async fn prepare_resources(
        &self,
        pod: &Pod,
    ) -> anyhow::Result<Result<HashMap<String, ContainerEdits>, String>> {
        let entries = dra::pod_claim_entries(pod);
        if entries.is_empty() {
            return Ok(Ok(HashMap::new()));
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let api = self
            .client
            .dynamic(registry::of::<ResourceClaim>(), Some(ns));
        let mut claims: HashMap<String, ResourceClaim> = HashMap::new();
        for (entry, _) in entries {
            let Some(name) = dra::pod_claim_name(pod, &entry) else {
                return Ok(Err(format!(
                    "the resource claim of entry {entry:?} is not created yet"
                )));
            };
            let claim: ResourceClaim = match api.get(&name).await {
                Ok(v) => serde_json::from_value(v)?,
                Err(e) if e.is_not_found() => {
                    return Ok(Err(format!("resourceclaim {ns}/{name} not found")))
                }
                Err(e) => return Err(e.into()),
            };
            if !dra::reserved_for(&claim, uid) || !dra::allocated(&claim) {
                return Ok(Err(format!(
                    "pod {ns}/{pod_name} ({uid}) is not allowed to use resource claim {name}: it is not reserved for the pod"
                )));
            }
            for (driver, _) in devices_for(&claim, None) {
                if !self.drivers.iter().any(|d| d.name() == driver) {
                    return Ok(Err(format!(
                        "DRA driver {driver} is not registered on node {}",
                        self.config.node_name
                    )));
                }
            }
            for (driver, parameters) in configs_of(&claim) {
                if let Some(d) = self.drivers.iter().find(|d| d.name() == driver) {
                    if let Err(why) = d.check_config(&parameters) {
                        return Ok(Err(format!("resource claim {name}: {why}")));
                    }
                }
            }
            claims.insert(entry, claim);
        }
        let spec = pod.spec.as_ref();
        let containers = spec.into_iter().flat_map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
        });
        let mut out = HashMap::new();
        for c in containers {
            let mut by_driver: Vec<(String, Vec<String>)> = Vec::new();
            for r in c.resources.iter().flat_map(|r| r.claims.iter().flatten()) {
                let Some(claim) = claims.get(&r.name) else {
                    continue;
                };
                for (driver, device) in devices_for(claim, r.request.as_deref()) {
                    match by_driver.iter_mut().find(|(d, _)| *d == driver) {
                        Some((_, list)) => list.push(device),
                        None => by_driver.push((driver, vec![device])),
                    }
                }
            }
            let mut edits = ContainerEdits::default();
            for (driver, devices) in by_driver {
                let Some(d) = self.drivers.iter().find(|d| d.name() == driver) else {
                    continue;
                };
                match d.container_edits(&devices) {
                    Ok(e) => edits.extend(e),
                    Err(why) => return Ok(Err(why)),
                }
            }
            out.insert(c.name.clone(), edits);
        }
        Ok(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_gpus_publish_stable_ids_and_give_containers_their_uuids() {
        let gpus = FakeGpus::new("node1", 4);
        let devices = gpus.devices();
        assert_eq!(devices.len(), 4);
        assert_eq!(devices[2].name, "gpu-2");
        let uuid = gpus.uuid(2);
        assert!(uuid.starts_with("GPU-") && uuid.len() == 40, "{uuid}");
        assert_eq!(uuid, FakeGpus::new("node1", 4).uuid(2));
        assert_ne!(uuid, FakeGpus::new("node2", 4).uuid(2));
        let edits = gpus
            .container_edits(&["gpu-2".into(), "gpu-0".into()])
            .unwrap();
        assert_eq!(edits.env[0], ("GPU_DEVICE_0".to_string(), gpus.uuid(2)));
        assert_eq!(edits.env[1], ("GPU_DEVICE_1".to_string(), gpus.uuid(0)));
        assert_eq!(edits.env[2].1, format!("{},{}", gpus.uuid(2), gpus.uuid(0)));
        assert!(gpus.container_edits(&["gpu-7".into()]).is_err());
        let refused = gpus.check_config(&json!({"sharing": {"strategy": "TimeSlicing"}}));
        assert!(refused
            .unwrap_err()
            .contains("takes no opaque configuration"));
    }

    #[test]
    fn a_container_gets_the_devices_of_the_requests_it_names() {
        let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [
                {"request": "a", "driver": "gpu.minik8s.io", "pool": "n", "device": "gpu-0"},
                {"request": "b/small", "driver": "gpu.minik8s.io", "pool": "n", "device": "gpu-1"}]}}}})).unwrap();
        let names = |r| {
            devices_for(&claim, r)
                .into_iter()
                .map(|(_, d)| d)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(None), ["gpu-0", "gpu-1"]);
        assert_eq!(names(Some("a")), ["gpu-0"]);
        assert_eq!(names(Some("b")), ["gpu-1"]);
    }
}
