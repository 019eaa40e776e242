//! Gang scheduling: the pods of a group are placed together on a simulated
//! copy of the cluster; only if enough fit are they all bound, so a partial
//! group never holds capacity another could use. A pod names its gang in
//! one of two ways:
//! - Kubernetes 1.37's Workload API: `spec.schedulingGroup.podGroupName`, a
//!   PodGroup (`scheduling.k8s.io/v1beta1`) whose `gang.minCount` is the
//!   gang's size and whose topology constraint keeps it in one domain; its
//!   `PodGroupInitiallyScheduled` condition records the first placement.
//! - Volcano's `scheduling.k8s.io/group-name` annotation (which upstream LWS
//!   stamps), sized by `minik8s.io/gang-min-member` or the Volcano PodGroup
//!   of that name (`scheduling.volcano.sh/v1beta1`), so manifests written
//!   for Volcano are gang-scheduled with no Volcano.
//!
//! Kubernetes' gang plugin holds placed members at Permit and releases them
//! after a timeout when the gang is not complete; here nothing is bound or
//! reserved until the whole gang fits, so there is never a partial gang
//! whose capacity a timeout would have to release.
//!
//! ```text
//!   pod of gang G ──▶ members of G (bound + pending) ≥ minMember? ── no ──▶ all wait
//!        │ yes
//!        ▼
//!   place every pending member on a copy of the cluster (first member on
//!   each node in turn when members have pod affinity: a topology domain
//!   that fits the whole gang is searched for)
//!        ├─ all placed ──▶ bind them all; PodGroup phase Running
//!        └─ one fails  ──▶ bind none; each PodScheduled=False with the reason
//! ```

use super::*;
use minik8s_api::lws_pod::{GANG_GROUP_NAME, GANG_MIN_MEMBER};
use minik8s_api::lws_scheduling::GANG_SCOPE;
use minik8s_api::podgroup::{PodGroup, VOLCANO_SCHEDULER};
use minik8s_client::events::EventType;

/// The group a pod names, by either way (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum GangRef {
    /// `spec.schedulingGroup.podGroupName` (Workload API).
    Workload(String),
    /// The `scheduling.k8s.io/group-name` annotation (Volcano's).
    Annotated(String),
}

impl GangRef {
    pub fn of(pod: &Pod) -> Option<GangRef> {
        let workload = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone());
        if let Some(name) = workload {
            return Some(GangRef::Workload(name));
        }
        let a = pod.metadata.annotations.as_ref()?;
        Some(GangRef::Annotated(a.get(GANG_GROUP_NAME)?.clone()))
    }

    pub fn name(&self) -> &str {
        match self {
            GangRef::Workload(n) | GangRef::Annotated(n) => n,
        }
    }
}

/// A pod's gang: its group, how many members must fit together (`Err`: why
/// the size is not known yet) and the node label whose one domain must hold
/// them all.
#[derive(Clone)]
pub(crate) struct Gang {
    pub group: GangRef,
    pub name: String,
    pub min: Result<usize, String>,
    pub topology: Option<String>,
}

/// The condition a Workload PodGroup records its first placement in.
pub const INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// A member placed in a simulation: the pod, its node, its volume plan.
pub(crate) type Placed = (Arc<Pod>, String, crate::BindPlan);

/// Why a gang cannot be placed, and whether removing pods could change that.
pub(crate) struct NoRoom {
    pub message: String,
    pub preemptable: bool,
}

impl NoRoom {
    fn fixed(message: String) -> NoRoom {
        NoRoom {
            message,
            preemptable: false,
        }
    }
}

/// The cluster a gang is placed on: per-node usage and the placed pods.
#[derive(Clone)]
pub(crate) struct Base {
    pub usage: HashMap<String, Usage>,
    pub placed: Vec<(Arc<Pod>, String)>,
}

impl Scheduler {
    /// The gang of `pod`, if it is in one of more than one pod (or one
    /// with a topology constraint).
    pub(crate) fn gang_of(&self, pod: &Pod) -> Option<Gang> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let group = GangRef::of(pod)?;
        let name = group.name().to_string();
        if let GangRef::Workload(_) = group {
            let Some(pg) = self.workload_groups.get(&format!("{ns}/{name}")) else {
                // The group may be created after its pods: they wait for it.
                let why = format!("pod group {name} not found");
                return Some(Gang {
                    group,
                    name,
                    min: Err(why),
                    topology: None,
                });
            };
            let topology = pg
                .spec
                .scheduling_constraints
                .as_ref()
                .and_then(|c| c.topology.as_ref())
                .and_then(|t| t.first())
                .map(|t| t.key.clone());
            let min = match &pg.spec.scheduling_policy.gang {
                Some(g) => g.min_count.max(1) as usize,
                None if topology.is_some() => 1,
                None => return None,
            };
            return Some(Gang {
                group,
                name,
                min: Ok(min),
                topology,
            });
        }
        let a = pod.metadata.annotations.as_ref()?;
        if let Some(min) = a.get(GANG_MIN_MEMBER).and_then(|m| m.parse::<usize>().ok()) {
            return (min > 1).then_some(Gang {
                group,
                name,
                min: Ok(min),
                topology: None,
            });
        }
        match self.pod_groups.get(&format!("{ns}/{name}")) {
            Some(g) => (g.min_member() > 1).then(|| Gang {
                group,
                name,
                min: Ok(g.min_member()),
                topology: None,
            }),
            // Volcano holds a pod whose PodGroup does not exist yet; so do
            // we for an LWS gang (`spec.scheduling`) whose group is being made.
            None if pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
                == Some(VOLCANO_SCHEDULER)
                || a.contains_key(GANG_SCOPE) =>
            {
                let why = format!("pod group {name} not found");
                Some(Gang {
                    group,
                    name,
                    min: Err(why),
                    topology: None,
                })
            }
            None => None,
        }
    }

    pub(crate) async fn schedule_gang(
        self: &Arc<Self>,
        pod: &Arc<Pod>,
        gang: Gang,
    ) -> Result<Outcome, ClientError> {
        let group = gang.name.clone();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let members: Vec<Arc<Pod>> = self
            .pods
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
            .filter(|p| GangRef::of(p).as_ref() == Some(&gang.group))
            .filter(|p| filters::is_active(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        let bound = members
            .iter()
            .filter(|p| {
                bound_node(p).is_some() || lock(&self.assumed).contains(&object_key(&p.metadata))
            })
            .count();
        let mut pending: Vec<Arc<Pod>> = members
            .iter()
            .filter(|p| self.wants(p) && !lock(&self.assumed).contains(&object_key(&p.metadata)))
            .cloned()
            .collect();
        pending.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if pending.is_empty() {
            return Ok(Outcome::Skipped);
        }
        let plan = match &gang.min {
            Err(why) => Err(NoRoom::fixed(format!("gang {group}: {why}"))),
            // The same words for every member until all exist: each pod's
            // condition is written once, not once per arriving sibling.
            Ok(min) if bound + pending.len() < *min => Err(NoRoom::fixed(format!(
                "gang {group}: waiting for its {min} pods to exist"
            ))),
            Ok(_) => {
                let base = self.base_for(pod, &pending);
                let bound: Vec<&Arc<Pod>> =
                    members.iter().filter(|p| bound_node(p).is_some()).collect();
                self.place_gang(&gang, &bound, &pending, &base, false)
            }
        };
        match plan {
            Ok(plan) => {
                let node = plan
                    .iter()
                    .find(|(p, _, _)| p.metadata.uid == pod.metadata.uid)
                    .map(|(_, n, _)| n.clone());
                let count = bound + plan.len();
                let mut bindings = Vec::new();
                for (p, n, volume_plan) in plan {
                    self.assume_device_plan(&volume_plan.devices);
                    let key = object_key(&p.metadata);
                    bindings.push(self.assume_and_bind_tracked(&key, p, &n, volume_plan).await);
                }
                // The group is scheduled once every member is bound (a
                // failed binding puts the gang back in the queue).
                let me = self.clone();
                tokio::spawn(async move {
                    let mut all_bound = true;
                    for b in bindings {
                        all_bound &= matches!(b.await, Ok(true));
                    }
                    if all_bound {
                        me.pod_group_status(&ns, &gang, Ok(count)).await;
                    }
                });
                Ok(node.map(Outcome::Bound).unwrap_or(Outcome::Skipped))
            }
            Err(NoRoom {
                mut message,
                preemptable,
            }) => {
                if preemptable {
                    if let Some(why) = self.preempt_for_gang(pod, &gang, &pending).await? {
                        message = format!("{message} {why}");
                    }
                }
                for p in &pending {
                    let key = object_key(&p.metadata);
                    self.mark_unschedulable(p, &message).await?;
                    lock(&self.unschedulable).insert(key.clone());
                    // The pod being scheduled comes back by its Action; its
                    // gang members are triggered here.
                    if p.metadata.uid != pod.metadata.uid {
                        self.queue.add_after(key, UNSCHEDULABLE_RETRY);
                    }
                }
                self.pod_group_status(&ns, &gang, Err(&message)).await;
                self.recorder
                    .event(&**pod, EventType::Warning, "FailedScheduling", &message)
                    .await;
                Ok(Outcome::Unschedulable(message))
            }
        }
    }

    /// Places every pending member on a copy of the cluster. With pod
    /// affinity among the members (a group kept in one topology domain) a
    /// greedy placement may pick a domain too small: then the first member
    /// is tried on every node in turn until the whole gang fits. A gang with
    /// a topology constraint is tried in each domain of its label (the one
    /// its `bound` members are in, if any), in name order.
    /// A dry run (`dry_run`) leaves the round-robin order as it was.
    pub(crate) fn place_gang(
        &self,
        gang: &Gang,
        bound: &[&Arc<Pod>],
        pending: &[Arc<Pod>],
        base: &Base,
        dry_run: bool,
    ) -> Result<Vec<Placed>, NoRoom> {
        let group = gang.name.as_str();
        let list = self.node_list();
        if let Some(key) = &gang.topology {
            let domain_of = |node: &str| {
                list.nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(node))
                    .and_then(|n| n.metadata.labels.as_ref()?.get(key).cloned())
            };
            let fixed: Option<String> =
                bound.iter().find_map(|p| bound_node(p)).and_then(domain_of);
            let mut domains: Vec<String> = match fixed {
                Some(d) => vec![d],
                None => list
                    .nodes
                    .iter()
                    .filter_map(|n| n.metadata.labels.as_ref()?.get(key).cloned())
                    .collect(),
            };
            domains.sort();
            domains.dedup();
            let mut last = NoRoom::fixed(format!(
                "gang {group}: no node has the topology label {key}"
            ));
            for d in domains {
                let allowed: HashSet<String> = list
                    .nodes
                    .iter()
                    .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get(key)) == Some(&d))
                    .filter_map(|n| n.metadata.name.clone())
                    .collect();
                match self.simulate(group, pending, &list, None, base, dry_run, Some(&allowed)) {
                    Ok(plan) => return Ok(plan),
                    Err(no) => {
                        last = NoRoom {
                            message: format!("{} (in {key}={d})", no.message),
                            preemptable: no.preemptable || last.preemptable,
                        }
                    }
                }
            }
            return Err(last);
        }
        let first = self.simulate(group, pending, &list, None, base, dry_run, None);
        if first.is_ok() || !pending.iter().any(|p| filters::has_pod_affinity(p)) {
            return first;
        }
        for node in list.names.iter() {
            if let Ok(plan) = self.simulate(group, pending, &list, Some(node), base, dry_run, None)
            {
                return Ok(plan);
            }
        }
        first
    }

    /// What a gang's placement starts from: the placed pods and their usage,
    /// with the room nominated pods of equal or higher priority keep.
    pub(crate) fn base_for(&self, pod: &Pod, members: &[Arc<Pod>]) -> Base {
        let keys: Vec<String> = members.iter().map(|p| object_key(&p.metadata)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let ledger = lock(&self.ledger);
        let usage = self
            .with_nominations(pod, &keys, &ledger.usage)
            .unwrap_or_else(|| ledger.usage.clone());
        let needs = if members.iter().any(|p| filters::has_pod_affinity(p)) {
            crate::Needs::All
        } else {
            crate::Needs::WithAffinity
        };
        let placed = ledger.placed(needs);
        Base { usage, placed }
    }

    /// One simulated placement of `pending`, the first member on `first` if
    /// given, only on the `allowed` nodes if given. Long on purpose: the
    /// members are placed one after another against one copy of the usage,
    /// the devices and the round-robin queue, whose locks are held for the
    /// whole simulation, and keeping it in one function keeps that visible.
    #[allow(clippy::too_many_arguments)]
    fn simulate(
        &self,
        group: &str,
        pending: &[Arc<Pod>],
        list: &NodeList,
        first: Option<&String>,
        base: &Base,
        dry_run: bool,
        allowed: Option<&HashSet<String>>,
    ) -> Result<Vec<Placed>, NoRoom> {
        let NodeList {
            nodes,
            names,
            allocatable,
            ..
        } = list;
        // The nodes a member may go to: all, or one topology domain's.
        let in_domain: Vec<Arc<Node>>;
        let candidates: &[Arc<Node>] = match allowed {
            Some(allowed) => {
                let name_allowed = |n: &&Arc<Node>| {
                    n.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| allowed.contains(n))
                };
                in_domain = nodes.iter().filter(name_allowed).cloned().collect();
                &in_domain
            }
            None => nodes,
        };
        let mut usage = base.usage.clone();
        let mut placed = base.placed.clone();
        // Devices: the gang's members see each other's allocations (a claim
        // shared by a group is allocated once, for the first of them).
        let inventory = self.inventory();
        let devices = lock(&self.devices);
        let mut simulated: HashMap<String, Arc<ResourceClaim>> = HashMap::new();
        let mut sim_taken: HashSet<dra::DeviceId> = HashSet::new();
        let mut shared = lock(&self.round_robin);
        shared.sync_shared(names);
        let mut copy = dry_run.then(|| shared.clone());
        let rr = match copy.as_mut() {
            Some(c) => c,
            None => &mut *shared,
        };
        let mut plan = Vec::new();
        for (i, p) in pending.iter().enumerate() {
            let pod_name = p.metadata.name.as_deref().unwrap_or("");
            let pod_volumes = self
                .pod_volumes(p)
                .map_err(|why| NoRoom::fixed(format!("gang {group}: {pod_name}: {why}")))?;
            let pod_devices = self
                .pod_devices(p, &inventory, &simulated)
                .map_err(|why| NoRoom::fixed(format!("gang {group}: {pod_name}: {why}")))?;
            let taken = |d: &dra::DeviceId| devices.taken(d) || sim_taken.contains(d);
            let device_check = pod_devices.as_ref().map(|needs| dra::NodeCheck {
                needs,
                inventory: &inventory,
                in_use: &taken,
            });
            let snap = Snapshot::new(candidates, &usage, &placed)
                .with_allocatable(allocatable)
                .with_volumes(pod_volumes.as_ref())
                .with_devices(device_check.as_ref());
            let feasible = filters::feasible(p, &snap).map_err(|reasons| {
                let why = filters::unschedulable_message(candidates.len(), &reasons);
                NoRoom {
                    message: format!(
                        "gang {group}: {} of {} pods fit; {pod_name}: {why}",
                        plan.len(),
                        pending.len()
                    ),
                    // Only room can be made by preemption, not a selector or taint.
                    preemptable: reasons.iter().any(victims::resolvable),
                }
            })?;
            let node = match first.filter(|_| i == 0) {
                Some(n) if feasible.contains(n) => n.clone(),
                Some(n) => {
                    return Err(NoRoom {
                        message: format!("gang {group}: {pod_name} does not fit on {n}"),
                        preemptable: true,
                    })
                }
                None => rr.pick(&feasible).expect("feasible nodes are in the queue"),
            };
            let chosen = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node.as_str()));
            let device_plan = match chosen {
                Some(n) => claims::plan_for(pod_devices.as_ref(), &inventory, n, &taken),
                None => claims::DevicePlan::default(),
            };
            for (key, allocation) in &device_plan.allocations {
                sim_taken.extend(dra::devices_of_allocation(allocation));
                let claim = pod_devices
                    .iter()
                    .flat_map(|d| d.claims.iter())
                    .find(|(k, _)| k == key)
                    .and_then(|(_, c)| claims::with_allocation(c, allocation));
                if let Some(c) = claim {
                    simulated.insert(key.clone(), Arc::new(c));
                }
            }
            let volume_plan = crate::BindPlan {
                volumes: self.volume_plan(pod_volumes.as_ref(), nodes, &node),
                devices: device_plan,
            };
            usage
                .entry(node.clone())
                .or_default()
                .add(filters::pod_requests(p), 1);
            let mut sim = (**p).clone();
            sim.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
            placed.push((Arc::new(sim), node.clone()));
            plan.push((p.clone(), node, volume_plan));
        }
        Ok(plan)
    }

    /// Mirrors the gang's state on its PodGroup, if one exists (as Volcano does).
    async fn pod_group_status(&self, ns: &str, gang: &Gang, outcome: Result<usize, &str>) {
        let group = gang.name.as_str();
        if let GangRef::Workload(_) = gang.group {
            return self.workload_group_status(ns, group, outcome).await;
        }
        let Some(pg) = self.pod_groups.get(&format!("{ns}/{group}")) else {
            return;
        };
        let old = pg.status.clone().unwrap_or_default();
        let patch = match outcome {
            Ok(running) => {
                if old.phase.as_deref() == Some("Running") && old.running == Some(running as i32) {
                    return;
                }
                json!({"status": {"phase": "Running", "running": running, "conditions": null}})
            }
            Err(message) => {
                if old.phase.as_deref() == Some("Pending") {
                    return;
                }
                json!({"status": {"phase": "Pending", "conditions": [{"type": "Unschedulable",
                    "status": "True", "reason": "NotEnoughResources", "message": message,
                    "lastTransitionTime": now_rfc3339()}]}})
            }
        };
        let api = self.client.dynamic(registry::of::<PodGroup>(), Some(ns));
        if let Err(e) = api
            .patch(group, Some("status"), content::MERGE_PATCH, &patch)
            .await
        {
            tracing::debug!(group, error = %e, "pod group status");
        }
    }

    /// A Workload PodGroup's `PodGroupInitiallyScheduled`: False (reason
    /// Unschedulable) while its gang does not fit, True once it is placed,
    /// and then never False again (Kubernetes' terminal state).
    async fn workload_group_status(&self, ns: &str, group: &str, outcome: Result<usize, &str>) {
        let Some(pg) = self.workload_groups.get(&format!("{ns}/{group}")) else {
            return;
        };
        let current = pg
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == INITIALLY_SCHEDULED));
        let Some(condition) = initially_scheduled(current, outcome, pg.metadata.generation) else {
            return;
        };
        let patch = json!({"status": {"conditions": [condition]}});
        let api = self
            .client
            .dynamic(registry::of::<WorkloadPodGroup>(), Some(ns));
        if let Err(e) = api
            .patch(
                group,
                Some("status"),
                content::STRATEGIC_MERGE_PATCH,
                &patch,
            )
            .await
        {
            tracing::debug!(group, error = %e, "pod group status");
        }
    }
}

/// The `PodGroupInitiallyScheduled` condition to write after an attempt, if
/// it changes: once True it stays (a terminal state).
pub(crate) fn initially_scheduled(
    current: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    outcome: Result<usize, &str>,
    generation: Option<i64>,
) -> Option<serde_json::Value> {
    if current.is_some_and(|c| c.status == "True") {
        return None;
    }
    let (status, reason, message) = match outcome {
        Ok(n) => (
            "True",
            "Scheduled",
            format!("{n} pods of the group are scheduled"),
        ),
        Err(why) => ("False", "Unschedulable", why.to_string()),
    };
    if current.is_some_and(|c| c.status == status && c.message == message) {
        return None;
    }
    Some(
        json!({"type": INITIALLY_SCHEDULED, "status": status, "reason": reason,
        "message": message, "observedGeneration": generation.unwrap_or(0),
        "lastTransitionTime": now_rfc3339()}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn condition(status: &str, message: &str) -> Condition {
        serde_json::from_value(json!({"type": INITIALLY_SCHEDULED, "status": status,
            "reason": "r", "message": message, "lastTransitionTime": "2026-11-29T00:00:00Z"}))
        .unwrap()
    }

    #[test]
    fn initially_scheduled_is_terminal_once_true() {
        let first = initially_scheduled(None, Err("gang g: 1 of 4 pods fit"), Some(2)).unwrap();
        assert_eq!(
            (
                &first["status"],
                &first["reason"],
                &first["observedGeneration"]
            ),
            (&json!("False"), &json!("Unschedulable"), &json!(2))
        );
        let unchanged = condition("False", "gang g: 1 of 4 pods fit");
        assert!(
            initially_scheduled(Some(&unchanged), Err("gang g: 1 of 4 pods fit"), None).is_none()
        );
        let placed = initially_scheduled(Some(&unchanged), Ok(4), None).unwrap();
        assert_eq!(
            (&placed["status"], &placed["reason"]),
            (&json!("True"), &json!("Scheduled"))
        );
        // Never back to False, whatever happens to the pods later.
        let done = condition("True", "4 pods of the group are scheduled");
        assert!(initially_scheduled(Some(&done), Err("evicted"), None).is_none());
    }

    #[test]
    fn a_pod_names_its_gang_by_scheduling_group_first() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p",
            "annotations": {GANG_GROUP_NAME: "volcano-group"}},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "wl-0"}}}))
        .unwrap();
        assert_eq!(GangRef::of(&pod), Some(GangRef::Workload("wl-0".into())));
        let annotated: Pod = serde_json::from_value(json!({"metadata": {"name": "p",
            "annotations": {GANG_GROUP_NAME: "volcano-group"}}, "spec": {"containers": []}}))
        .unwrap();
        assert_eq!(GangRef::of(&annotated).unwrap().name(), "volcano-group");
    }
}
