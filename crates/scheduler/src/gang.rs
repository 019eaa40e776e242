//! Gang scheduling: the pods of a group are placed together on a simulated
//! copy of the cluster; only if enough fit are they all bound, so a partial
//! group never holds capacity another could use. A pod's gang is named by
//! its `scheduling.k8s.io/group-name` annotation (Volcano's, which upstream
//! LWS stamps); its size comes from `minik8s.io/gang-min-member` or from the
//! PodGroup of that name (`scheduling.volcano.sh/v1beta1`), so manifests
//! written for Volcano are gang-scheduled with no Volcano.
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

/// A pod's gang: its name and how many members must fit together
/// (`Err`: why the size is not known yet).
pub(crate) struct Gang {
    pub name: String,
    pub min: Result<usize, String>,
}

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
    /// The gang of `pod`, if it is in one of more than one pod.
    pub(crate) fn gang_of(&self, pod: &Pod) -> Option<Gang> {
        let a = pod.metadata.annotations.as_ref()?;
        let name = a.get(GANG_GROUP_NAME)?.clone();
        if let Some(min) = a.get(GANG_MIN_MEMBER).and_then(|m| m.parse::<usize>().ok()) {
            return (min > 1).then_some(Gang { name, min: Ok(min) });
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        match self.pod_groups.get(&format!("{ns}/{name}")) {
            Some(g) => (g.min_member() > 1).then(|| Gang {
                name,
                min: Ok(g.min_member()),
            }),
            // Volcano holds a pod whose PodGroup does not exist yet; so do
            // we for an LWS gang (`spec.scheduling`) whose group is being made.
            None if pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
                == Some(VOLCANO_SCHEDULER)
                || a.contains_key(GANG_SCOPE) =>
            {
                let why = format!("pod group {name} not found");
                Some(Gang {
                    name,
                    min: Err(why),
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
            .filter(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(GANG_GROUP_NAME))
                    == Some(&group)
            })
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
        let plan = match gang.min {
            Err(why) => Err(NoRoom::fixed(format!("gang {group}: {why}"))),
            // The same words for every member until all exist: each pod's
            // condition is written once, not once per arriving sibling.
            Ok(min) if bound + pending.len() < min => Err(NoRoom::fixed(format!(
                "gang {group}: waiting for its {min} pods to exist"
            ))),
            Ok(_) => {
                let base = self.base_for(pod, &pending);
                self.place_gang(&group, &pending, &base, false)
            }
        };
        match plan {
            Ok(plan) => {
                let node = plan
                    .iter()
                    .find(|(p, _, _)| p.metadata.uid == pod.metadata.uid)
                    .map(|(_, n, _)| n.clone());
                let count = bound + plan.len();
                for (p, n, volume_plan) in plan {
                    self.assume_device_plan(&volume_plan.devices);
                    self.assume_and_bind(&object_key(&p.metadata), p, &n, volume_plan)
                        .await;
                }
                self.pod_group_status(&ns, &group, Ok(count)).await;
                Ok(node.map(Outcome::Bound).unwrap_or(Outcome::Skipped))
            }
            Err(NoRoom {
                mut message,
                preemptable,
            }) => {
                if preemptable {
                    if let Some(why) = self.preempt_for_gang(pod, &group, &pending).await? {
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
                self.pod_group_status(&ns, &group, Err(&message)).await;
                self.event(pod, "Warning", "FailedScheduling", &message)
                    .await;
                Ok(Outcome::Unschedulable(message))
            }
        }
    }

    /// Places every pending member on a copy of the cluster. With pod
    /// affinity among the members (a group kept in one topology domain) a
    /// greedy placement may pick a domain too small: then the first member
    /// is tried on every node in turn until the whole gang fits.
    /// A dry run (`dry_run`) leaves the round-robin order as it was.
    pub(crate) fn place_gang(
        &self,
        group: &str,
        pending: &[Arc<Pod>],
        base: &Base,
        dry_run: bool,
    ) -> Result<Vec<Placed>, NoRoom> {
        let list = self.node_list();
        let first = self.simulate(group, pending, &list, None, base, dry_run);
        if first.is_ok() || !pending.iter().any(|p| filters::has_pod_affinity(p)) {
            return first;
        }
        for node in list.names.iter() {
            if let Ok(plan) = self.simulate(group, pending, &list, Some(node), base, dry_run) {
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

    /// One simulated placement of `pending`, the first member on `first` if given.
    fn simulate(
        &self,
        group: &str,
        pending: &[Arc<Pod>],
        list: &NodeList,
        first: Option<&String>,
        base: &Base,
        dry_run: bool,
    ) -> Result<Vec<Placed>, NoRoom> {
        let NodeList {
            nodes,
            names,
            allocatable,
            ..
        } = list;
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
            let snap = Snapshot::new(nodes, &usage, &placed)
                .with_allocatable(allocatable)
                .with_volumes(pod_volumes.as_ref())
                .with_devices(device_check.as_ref());
            let feasible = filters::feasible(p, &snap).map_err(|reasons| {
                let why = filters::unschedulable_message(nodes.len(), &reasons);
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
    async fn pod_group_status(&self, ns: &str, group: &str, outcome: Result<usize, &str>) {
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
}
