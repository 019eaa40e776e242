//! In-place resize: a running pod's CPU and memory change without a new pod,
//! as the real kubelet's allocation manager and `computePodActions` do it.
//!
//! ```text
//!  spec (desired) ──admit──▶ allocated (accepted; new containers start with it)
//!     │ too big for the node: PodResizePending Infeasible
//!     │ no room now:          PodResizePending Deferred (tried again every sync)
//!  allocated ──actuate──▶ actuated (what each running container has)
//!     │ resizePolicy NotRequired:     runtime update (cgroup), no restart
//!     │ resizePolicy RestartContainer: the container restarts with the new values
//!     └ until actuated = allocated: PodResizeInProgress
//! ```
//!
//! The allocation of each pod lives in the kubelet (the real one keeps it in
//! a checkpoint file); after a restart it is read back from the resources the
//! pod's status last reported.

use crate::runtime::{ContainerInfo, SANDBOX};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use minik8s_api::resources::{amount, pod_requests};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A container's CPU and memory requests and limits, as strings kept from
/// the spec (the status reports them as they were written).
pub type Resources = ResourceRequirements;

/// The CPU and memory of a container's resources (nothing else is resized).
pub fn cpu_memory(r: Option<&ResourceRequirements>) -> Resources {
    type List = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;
    let keep = |l: Option<&List>| {
        let kept: BTreeMap<String, _> = l
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k == "cpu" || *k == "memory")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!kept.is_empty()).then_some(kept)
    };
    ResourceRequirements {
        requests: keep(r.and_then(|r| r.requests.as_ref())),
        limits: keep(r.and_then(|r| r.limits.as_ref())),
        ..Default::default()
    }
}

/// The numbers of a container's resources: (cpu request, cpu limit) in
/// millicores, (memory request, memory limit) in bytes. Two spellings of one
/// amount (`0.5`, `500m`) are the same.
pub fn amounts(r: &Resources) -> [Option<i64>; 4] {
    let (req, lim) = (r.requests.as_ref(), r.limits.as_ref());
    [
        amount(req, "cpu"),
        amount(lim, "cpu"),
        amount(req, "memory"),
        amount(lim, "memory"),
    ]
}

/// What the runtime is given for a container's resources: (CPU limit in
/// billionths of a core, memory limit in bytes, CPU shares).
pub fn runtime_limits(r: &Resources) -> (Option<i64>, Option<i64>, Option<i64>) {
    let [cpu_req, cpu_lim, _, mem_lim] = amounts(r);
    (
        cpu_lim.map(|m| m * 1_000_000),
        mem_lim,
        cpu_req.map(|m| (m * 1024 / 1000).max(2)),
    )
}

/// The containers that may be resized: apps and sidecars, by name.
fn resizable(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.init_containers
        .iter()
        .flatten()
        .filter(|c| crate::actions::is_sidecar(c))
        .chain(&spec.containers)
}

/// Every container's CPU and memory as the spec asks now.
pub fn desired(spec: &PodSpec) -> BTreeMap<String, Resources> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.name.clone(), cpu_memory(c.resources.as_ref())))
        .collect()
}

/// The pod with its containers' resources replaced by `resources`.
fn with_resources(pod: &Pod, resources: &BTreeMap<String, Resources>) -> Pod {
    let mut p = pod.clone();
    if let Some(spec) = p.spec.as_mut() {
        for c in spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut())
        {
            if let Some(r) = resources.get(&c.name) {
                let mut all = c.resources.clone().unwrap_or_default();
                all.requests = r.requests.clone();
                all.limits = r.limits.clone();
                c.resources = Some(all);
            }
        }
    }
    p
}

/// The kubelet's verdict on a resize (Kubernetes' `canResizePod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    Accept,
    /// The pod would not fit the node even alone: `PodResizePending` Infeasible.
    Infeasible(String),
    /// It fits the node, not beside the other pods now: `PodResizePending` Deferred.
    Deferred(String),
}

/// Decides a resize from the pod's requests after it, the node's allocatable
/// and what the node's other pods have been allocated: (cpu millicores,
/// memory bytes) each.
pub fn admit(requests: (i64, i64), allocatable: (i64, i64), others: (i64, i64)) -> Admit {
    let (cpu, memory) = requests;
    if memory > allocatable.1 {
        return Admit::Infeasible(format!(
            "Node didn't have enough capacity: memory, requested: {memory}, capacity: {}",
            allocatable.1
        ));
    }
    if cpu > allocatable.0 {
        return Admit::Infeasible(format!(
            "Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {}",
            allocatable.0
        ));
    }
    if cpu + others.0 > allocatable.0 {
        return Admit::Deferred(format!(
            "Node didn't have enough resource: cpu, requested: {cpu}, used: {}, capacity: {}",
            others.0, allocatable.0
        ));
    }
    if memory + others.1 > allocatable.1 {
        return Admit::Deferred(format!(
            "Node didn't have enough resource: memory, requested: {memory}, used: {}, capacity: {}",
            others.1, allocatable.1
        ));
    }
    Admit::Accept
}

/// Whether carrying `to` out on a container that has `from` needs a restart:
/// a resource whose amounts change and whose `resizePolicy` is RestartContainer.
pub fn needs_restart(c: &Container, from: &Resources, to: &Resources) -> bool {
    let (a, b) = (amounts(from), amounts(to));
    let changed = |r: &str| match r {
        "cpu" => a[0] != b[0] || a[1] != b[1],
        _ => a[2] != b[2] || a[3] != b[3],
    };
    c.resize_policy
        .iter()
        .flatten()
        .any(|p| p.restart_policy == "RestartContainer" && changed(p.resource_name.as_str()))
}

/// One pod's allocation.
#[derive(Debug, Clone, Default)]
pub struct PodAllocation {
    /// The resources the kubelet accepted, by container name: what the pod
    /// was admitted with, then each accepted resize.
    pub allocated: BTreeMap<String, Resources>,
    /// The pod's requests under `allocated` (counted against other pods' resizes).
    pub requests: (i64, i64),
    /// What each running container has, by container id.
    pub actuated: HashMap<String, Resources>,
    /// A resize not accepted (yet): (reason, message) of `PodResizePending`.
    pub pending: Option<(String, String)>,
    /// The runtime's refusal of the last update: `PodResizeInProgress` Error.
    pub error: Option<String>,
}

/// What one sync does about resources: containers to restart (resizePolicy
/// RestartContainer) and containers to update in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResizeSteps {
    pub restart: HashSet<String>,
    /// (container id, container name, resources to give it).
    pub update: Vec<(String, String, Resources)>,
}

/// The allocations of the pods this kubelet runs, by pod uid.
#[derive(Default)]
pub struct Allocations(std::sync::Mutex<HashMap<String, PodAllocation>>);

impl Allocations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PodAllocation>> {
        crate::lock(&self.0)
    }

    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// The resources a container starts with: its allocation (a deferred
    /// resize does not apply to a restarted container either).
    pub fn for_start(&self, uid: &str, c: &Container) -> Resources {
        self.lock()
            .get(uid)
            .and_then(|a| a.allocated.get(&c.name).cloned())
            .unwrap_or_else(|| cpu_memory(c.resources.as_ref()))
    }

    /// A container started (or updated) with `resources`.
    pub fn actuated(&self, uid: &str, id: &str, resources: Resources) {
        if let Some(a) = self.lock().get_mut(uid) {
            a.actuated.insert(id.to_string(), resources);
            a.error = None;
        }
    }

    pub fn failed(&self, uid: &str, message: String) {
        if let Some(a) = self.lock().get_mut(uid) {
            a.error = Some(message);
        }
    }

    /// A copy of one pod's allocation, for its status.
    pub fn get(&self, uid: &str) -> Option<PodAllocation> {
        self.lock().get(uid).cloned()
    }

    /// Admits a pending resize of `pod` if the node has room, and says what
    /// to do about its running containers. `allocatable`: the node's
    /// (cpu millicores, memory bytes).
    pub fn plan(
        &self,
        pod: &Pod,
        observed: &[ContainerInfo],
        allocatable: (i64, i64),
    ) -> ResizeSteps {
        let (Some(uid), Some(spec)) = (pod.metadata.uid.as_deref(), pod.spec.as_ref()) else {
            return ResizeSteps::default();
        };
        let mut all = self.lock();
        let others = all
            .iter()
            .filter(|(u, _)| u.as_str() != uid)
            .fold((0, 0), |acc, (_, a)| {
                (acc.0 + a.requests.0, acc.1 + a.requests.1)
            });
        let a = all
            .entry(uid.to_string())
            .or_insert_with(|| first_allocation(pod));
        let want = desired(spec);
        if want != a.allocated {
            let r = pod_requests(&with_resources(pod, &want));
            let requests = (r.cpu, r.memory);
            match admit(requests, allocatable, others) {
                Admit::Accept => {
                    tracing::info!(pod = ?pod.metadata.name, "resize accepted");
                    a.allocated = want;
                    a.requests = requests;
                    a.pending = None;
                }
                Admit::Infeasible(m) => a.pending = Some(("Infeasible".into(), m)),
                Admit::Deferred(m) => a.pending = Some(("Deferred".into(), m)),
            }
        } else {
            a.pending = None;
        }
        let mut steps = ResizeSteps::default();
        for c in resizable(spec) {
            let Some(cur) = crate::actions::latest_of(observed, &c.name, 0)
                .filter(|x| x.name != SANDBOX && x.state.is_running())
            else {
                continue;
            };
            let Some(target) = a.allocated.get(&c.name).cloned() else {
                continue;
            };
            // A container met for the first time (the kubelet restarted)
            // has what the status said it had.
            let have = a
                .actuated
                .entry(cur.id.clone())
                .or_insert_with(|| target.clone())
                .clone();
            if amounts(&have) == amounts(&target) {
                continue;
            }
            if needs_restart(c, &have, &target) {
                steps.restart.insert(cur.id.clone());
            } else {
                steps.update.push((cur.id.clone(), c.name.clone(), target));
            }
        }
        steps
    }
}

/// The spec container (app or init) of a name.
pub fn spec_container(spec: &PodSpec, name: &str) -> Option<Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
        .cloned()
}

impl crate::Kubelet {
    /// Gives running containers their new CPU and memory through the
    /// runtime (the cgroup changes; the process keeps running).
    pub(crate) async fn resize_in_place(&self, pod: &Pod, update: &[(String, String, Resources)]) {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let mut done = Vec::new();
        for (id, name, resources) in update {
            let (nano_cpus, memory_limit_bytes, cpu_shares) = runtime_limits(resources);
            let limits = crate::runtime::ResourceLimits {
                nano_cpus,
                memory_limit_bytes,
                cpu_shares,
            };
            match self.runtime.update_resources(id, limits).await {
                Ok(()) => {
                    self.allocations.actuated(uid, id, resources.clone());
                    done.push(name.as_str());
                }
                Err(e) => {
                    tracing::warn!(pod = ?pod.metadata.name, container = %name, error = %e, "resizing a container");
                    self.allocations.failed(uid, e.to_string());
                }
            }
        }
        if !done.is_empty() {
            tracing::info!(pod = ?pod.metadata.name, containers = ?done, "resized in place");
            let message = format!("Pod resize completed: containers [{}]", done.join(" "));
            self.container_events(pod, vec![("ResizeCompleted", message)]);
        }
    }
}

/// A container's status gets its allocation (`allocatedResources`: the
/// requests accepted) and, while it runs, what it has (`resources`).
pub fn container_resources(
    status: &mut serde_json::Value,
    a: &PodAllocation,
    name: &str,
    current: Option<&ContainerInfo>,
) {
    if let Some(requests) = a.allocated.get(name).and_then(|r| r.requests.as_ref()) {
        status["allocatedResources"] = serde_json::json!(requests);
    }
    let running = current.filter(|c| c.state.is_running());
    if let Some(have) =
        running.and_then(|c| a.actuated.get(&c.id).or_else(|| a.allocated.get(name)))
    {
        status["resources"] = serde_json::to_value(have).unwrap_or_default();
    }
}

/// The pod's resize conditions: (type, reason, message), each True.
/// `PodResizePending` while a resize waits for room (Deferred) or can never
/// fit (Infeasible); `PodResizeInProgress` while running containers do not
/// have their allocation yet (reason `Error` when the runtime refused).
pub fn conditions(
    a: &PodAllocation,
    spec: &PodSpec,
    containers: &[ContainerInfo],
) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    if let Some((reason, message)) = &a.pending {
        out.push(("PodResizePending", reason.clone(), message.clone()));
    }
    let behind = resizable(spec).any(|c| {
        let cur =
            crate::actions::latest_of(containers, &c.name, 0).filter(|x| x.state.is_running());
        match (
            cur.and_then(|x| a.actuated.get(&x.id)),
            a.allocated.get(&c.name),
        ) {
            (Some(have), Some(want)) => amounts(have) != amounts(want),
            _ => false,
        }
    });
    if let Some(e) = &a.error {
        out.push(("PodResizeInProgress", "Error".into(), e.clone()));
    } else if behind {
        out.push(("PodResizeInProgress", String::new(), String::new()));
    }
    out
}

/// A pod's allocation when the kubelet first syncs it: what its status
/// last reported for the running containers (the kubelet restarted
/// mid-resize), else its spec.
fn first_allocation(pod: &Pod) -> PodAllocation {
    let mut allocated = pod.spec.as_ref().map(desired).unwrap_or_default();
    let status = pod.status.as_ref();
    for s in status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
    {
        if let (Some(r), Some(slot)) = (s.resources.as_ref(), allocated.get_mut(&s.name)) {
            *slot = cpu_memory(Some(r));
        }
    }
    let r = pod_requests(&with_resources(pod, &allocated));
    PodAllocation {
        requests: (r.cpu, r.memory),
        allocated,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resources(cpu: &str, memory: &str) -> Resources {
        serde_json::from_value(json!({"requests": {"cpu": cpu, "memory": memory},
                                      "limits": {"cpu": cpu, "memory": memory}}))
        .unwrap()
    }

    fn container(policy: serde_json::Value) -> Container {
        serde_json::from_value(json!({"name": "c", "resizePolicy": policy})).unwrap()
    }

    #[test]
    fn resizes_that_do_not_fit_are_infeasible_or_deferred() {
        let node = (2000, 4 << 30);
        assert_eq!(admit((300, 1 << 20), node, (1000, 0)), Admit::Accept);
        assert_eq!(
            admit((3000, 1 << 20), node, (0, 0)),
            Admit::Infeasible(
                "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000".into()
            )
        );
        assert_eq!(
            admit((1500, 1 << 20), node, (1000, 0)),
            Admit::Deferred(
                "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"
                    .into()
            )
        );
    }

    #[test]
    fn only_a_restart_policy_on_a_changed_resource_restarts() {
        let (from, more_cpu) = (resources("100m", "64Mi"), resources("0.3", "64Mi"));
        let none = container(json!([]));
        assert!(!needs_restart(&none, &from, &more_cpu));
        let memory_restarts =
            container(json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]));
        assert!(!needs_restart(&memory_restarts, &from, &more_cpu));
        assert!(needs_restart(
            &memory_restarts,
            &from,
            &resources("100m", "128Mi")
        ));
        // Two spellings of one amount are no change.
        assert_eq!(amounts(&resources("0.1", "64Mi")), amounts(&from));
        assert_eq!(
            runtime_limits(&more_cpu),
            (Some(300_000_000), Some(64 << 20), Some(307))
        );
    }

    fn pod(cpu: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}))
        .unwrap()
    }

    fn running(id: &str) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            pod_uid: "u1".into(),
            pod_name: "p".into(),
            pod_namespace: "ns".into(),
            name: "c".into(),
            hash: String::new(),
            restart_count: 0,
            image: String::new(),
            image_id: String::new(),
            state: crate::runtime::State::Running {
                started_at: String::new(),
            },
            ip: None,
            runtime_handler: None,
        }
    }

    #[test]
    fn an_accepted_resize_updates_the_running_container_once() {
        let allocations = Allocations::default();
        let node = (2000, 4 << 30);
        assert_eq!(
            allocations.plan(&pod("100m"), &[running("a")], node),
            ResizeSteps::default()
        );
        let steps = allocations.plan(&pod("300m"), &[running("a")], node);
        assert_eq!(steps.update.len(), 1);
        assert_eq!(amounts(&steps.update[0].2)[1], Some(300));
        allocations.actuated("u1", "a", steps.update[0].2.clone());
        assert_eq!(
            allocations.plan(&pod("300m"), &[running("a")], node),
            ResizeSteps::default()
        );
        // Too big for the node: pending, nothing done, the old allocation stays.
        let steps = allocations.plan(&pod("3"), &[running("a")], node);
        assert!(steps.update.is_empty());
        let a = allocations.get("u1").unwrap();
        assert_eq!(a.pending.as_ref().map(|p| p.0.as_str()), Some("Infeasible"));
        assert_eq!(amounts(&a.allocated["c"])[1], Some(300));
    }
}
