//! Preemption: when a pod fits on no node, pods of lower priority make room
//! (Kubernetes' `DefaultPreemption` PostFilter). The decisions are pure, in
//! [`crate::victims`]; this file gathers the cluster state they read and
//! carries them out.
//!
//! ```text
//!  pod P fits nowhere ──▶ eligible? (preemptionPolicy ≠ Never, not already
//!        │                waiting for its victims to go)
//!        ▼
//!  per node: victims (victims.rs) ──▶ pick the node losing least
//!        │ none                              │
//!        ▼                                   ▼
//!  "preemption: 0/3 nodes are        each victim: DisruptionTarget condition,
//!   available: ..." in the           graceful DELETE, Preempted event;
//!   FailedScheduling message         P: status.nominatedNodeName = node
//!                                          │ the victims' deletions
//!                                          ▼
//!                                    P retried; the room on its node is kept
//!                                    from pods of lower priority meanwhile
//! ```

use super::*;
use crate::filters::Unfit;
use crate::victims::{self, Budget, NotCandidate, Unit, Victims};
use minik8s_client::events::EventType;
use minik8s_client::rest::DeleteParams;

/// A pod waiting on a node for the room its preemption makes.
#[derive(Debug, Clone)]
pub(crate) struct Nomination {
    pub node: String,
    pub priority: i32,
    pub requests: filters::PodRequests,
}

/// What preemption did for a pod that fits nowhere.
pub(crate) enum Outcome {
    /// Victims are going; the pod waits for their room on this node.
    Nominated(String),
    /// Why not (`preemption: ...`), for the FailedScheduling message.
    Failed(String),
}

/// The gang a pod belongs to, by namespace and group (either way of naming one).
fn gang_key(pod: &Pod) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(match gang::GangRef::of(pod)? {
        gang::GangRef::Workload(g) => format!("gang:{ns}/podgroup/{g}"),
        gang::GangRef::Annotated(g) => format!("gang:{ns}/{g}"),
    })
}

/// The placed pods of priority below `priority`, as units: a gang is one
/// unit, and only when every placed member is below (never half a group).
fn lower_units(ledger: &Ledger, priority: i32, except_gang: Option<&str>) -> Vec<Unit> {
    let mut gangs: HashMap<String, Vec<(Arc<Pod>, String)>> = HashMap::new();
    let mut units = Vec::new();
    for placement in ledger.by_pod.values() {
        let member = (placement.pod.clone(), placement.node.clone());
        match gang_key(&placement.pod) {
            Some(g) => gangs.entry(g).or_default().push(member),
            None if victims::priority(&placement.pod) < priority => {
                units.push(Unit::new(vec![member]))
            }
            None => {}
        }
    }
    for (gang, members) in gangs {
        if Some(gang.as_str()) != except_gang
            && members.iter().all(|(p, _)| victims::priority(p) < priority)
        {
            units.push(Unit::new(members));
        }
    }
    units
}

/// `base` without the pods of `gone`.
fn without(base: &gang::Base, gone: &[&Unit]) -> gang::Base {
    let mut out = base.clone();
    let mut keys = HashSet::new();
    for (p, node) in gone.iter().flat_map(|u| u.pods.iter()) {
        keys.insert(object_key(&p.metadata));
        if let Some(u) = out.usage.get_mut(node) {
            u.add(filters::pod_requests(p), -1);
        }
    }
    if !keys.is_empty() {
        out.placed
            .retain(|(p, _)| !keys.contains(&object_key(&p.metadata)));
    }
    out
}

impl Scheduler {
    /// Keeps the nominations the watch shows (this scheduler writes them); a
    /// pod bound, finished or going has none.
    pub(crate) fn note_nomination(&self, key: &str, pod: &Pod) {
        let nominated = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty());
        let waiting = bound_node(pod).is_none()
            && pod.metadata.deletion_timestamp.is_none()
            && filters::is_active(pod);
        let mut noms = lock(&self.nominated);
        match nominated {
            Some(node) if waiting => {
                noms.insert(
                    key.to_string(),
                    Nomination {
                        node: node.to_string(),
                        priority: victims::priority(pod),
                        requests: filters::pod_requests(pod),
                    },
                );
            }
            _ if !waiting => {
                noms.remove(key);
                drop(noms);
                lock(&self.preempting).remove(key);
            }
            _ => {}
        }
    }

    /// `usage` plus the room kept for pods nominated by preemption with a
    /// priority at least the pod's (except the pods `except`); None when no
    /// such nomination exists.
    pub(crate) fn with_nominations(
        &self,
        pod: &Pod,
        except: &[&str],
        usage: &HashMap<String, Usage>,
    ) -> Option<HashMap<String, Usage>> {
        let priority = victims::priority(pod);
        let noms = lock(&self.nominated);
        let mut kept = noms
            .iter()
            .filter(|(k, n)| n.priority >= priority && !except.contains(&k.as_str()))
            .peekable();
        kept.peek()?;
        let mut out = usage.clone();
        for (_, n) in kept {
            out.entry(n.node.clone()).or_default().add(n.requests, 1);
        }
        Some(out)
    }

    /// Whether the victims `preemptor` chose earlier still exist (then it
    /// waits for them rather than choosing more).
    fn still_preempting(&self, preemptor: &str) -> bool {
        let mut preempting = lock(&self.preempting);
        let Some(victims) = preempting.get(preemptor) else {
            return false;
        };
        let waiting = victims.iter().any(|v| self.pods.get(v).is_some());
        if !waiting {
            preempting.remove(preemptor);
        }
        waiting
    }

    fn budget_list(&self) -> Vec<Budget> {
        self.budgets
            .list()
            .iter()
            .filter_map(|b| Budget::of(b))
            .collect()
    }

    /// Tries to make room for `pod`, which failed on each node for `reasons`
    /// (in node order).
    pub(crate) async fn preempt(
        &self,
        key: &str,
        pod: &Arc<Pod>,
        reasons: &[Unfit],
        pod_volumes: Option<&volumes::PodVolumes>,
    ) -> Result<Outcome, ClientError> {
        if let Some(why) = victims::ineligible(pod, self.still_preempting(key)) {
            return Ok(Outcome::Failed(format!("preemption: {why}")));
        }
        let list = self.node_list();
        let budgets = self.budget_list();
        let priority = victims::priority(pod);
        let mut candidates: Vec<(String, Victims)> = Vec::new();
        let mut why_not = Vec::new();
        {
            let ledger = lock(&self.ledger);
            let placed = ledger.placed(crate::Needs::of(pod, spread::has_spread(pod)));
            let usage = self
                .with_nominations(pod, &[key], &ledger.usage)
                .unwrap_or_else(|| ledger.usage.clone());
            let units = lower_units(&ledger, priority, None);
            let base = gang::Base { usage, placed };
            for (i, node) in list.nodes.iter().enumerate() {
                let name = filters::node_name(node);
                if !reasons.get(i).is_some_and(victims::resolvable) {
                    why_not.push(NotCandidate::NotHelpful);
                    continue;
                }
                let on_node: Vec<Unit> = units
                    .iter()
                    .filter(|u| u.pods.iter().any(|(_, n)| n == name))
                    .cloned()
                    .collect();
                // Only this node's usage is read; the placed pods matter
                // for affinity and spreading across nodes.
                let fits = |gone: &[&Unit]| {
                    let mut used = base.usage.get(name).copied().unwrap_or_default();
                    let mut keys = HashSet::new();
                    for (p, n) in gone.iter().flat_map(|u| u.pods.iter()) {
                        keys.insert(object_key(&p.metadata));
                        if n == name {
                            used.add(filters::pod_requests(p), -1);
                        }
                    }
                    let usage = HashMap::from([(name.to_string(), used)]);
                    let placed: Vec<(Arc<Pod>, String)> = base
                        .placed
                        .iter()
                        .filter(|(p, _)| !keys.contains(&object_key(&p.metadata)))
                        .cloned()
                        .collect();
                    let snap = Snapshot::new(&list.nodes, &usage, &placed)
                        .with_allocatable(&list.allocatable)
                        .with_volumes(pod_volumes);
                    filters::check(pod, node, &snap)
                };
                match victims::select_victims(on_node, &budgets, fits) {
                    Ok(v) => candidates.push((name.to_string(), v)),
                    Err(e) => why_not.push(e),
                }
            }
        }
        let Some(best) = victims::pick_candidate(&candidates) else {
            self.clear_nomination(key, pod).await;
            return Ok(Outcome::Failed(victims::failure_message(
                list.nodes.len(),
                &why_not,
            )));
        };
        let (node, chosen) = candidates.swap_remove(best);
        self.evict(pod, &chosen, false).await?;
        self.clear_lower_nominations(priority, &node).await;
        lock(&self.preempting).insert(
            key.to_string(),
            chosen
                .pods()
                .map(|(p, _)| object_key(&p.metadata))
                .collect(),
        );
        self.nominate(key, pod, &node).await?;
        Ok(Outcome::Nominated(node))
    }

    /// Preemption for a gang that fits nowhere as a whole: the fewest and
    /// least important units of lower priority anywhere in the cluster whose
    /// removal lets every pending member be placed. Returns why it did not
    /// preempt, if it did not.
    pub(crate) async fn preempt_for_gang(
        &self,
        pod: &Arc<Pod>,
        group: &gang::Gang,
        pending: &[Arc<Pod>],
    ) -> Result<Option<String>, ClientError> {
        let Some(gang) = gang_key(pod) else {
            return Ok(None);
        };
        if let Some(why) = victims::ineligible(pod, self.still_preempting(&gang)) {
            return Ok(Some(format!("preemption: {why}")));
        }
        let priority = pending
            .iter()
            .map(|p| victims::priority(p))
            .min()
            .unwrap_or(0);
        let base = self.base_for(pod, pending);
        let units = lower_units(&lock(&self.ledger), priority, Some(&gang));
        let budgets = self.budget_list();
        let fits = |gone: &[&Unit]| {
            self.place_gang(group, &[], pending, &without(&base, gone), true)
                .map(|_| ())
        };
        let chosen =
            match victims::select_victims(units, &budgets, fits) {
                Ok(v) => v,
                Err(NotCandidate::StillUnfit(_)) => return Ok(Some(
                    "preemption: the gang does not fit even without every pod of lower priority."
                        .into(),
                )),
                Err(_) => {
                    return Ok(Some(
                        "preemption: No preemption victims found for incoming pod group.".into(),
                    ))
                }
            };
        let gone: Vec<&Unit> = chosen.units.iter().collect();
        let plan = match self.place_gang(group, &[], pending, &without(&base, &gone), true) {
            Ok(plan) => plan,
            Err(no) => return Ok(Some(format!("preemption: {}", no.message))),
        };
        self.evict(pod, &chosen, true).await?;
        lock(&self.preempting).insert(
            gang,
            chosen
                .pods()
                .map(|(p, _)| object_key(&p.metadata))
                .collect(),
        );
        for (member, node, _) in plan {
            self.nominate(&object_key(&member.metadata), &member, &node)
                .await?;
        }
        Ok(None)
    }

    /// Deletes the victims gracefully, each first marked with the
    /// DisruptionTarget condition, and tells them why with an event.
    async fn evict(
        &self,
        preemptor: &Pod,
        chosen: &Victims,
        group: bool,
    ) -> Result<(), ClientError> {
        let scheduler = preemptor
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER);
        let what = if group { "pod group" } else { "pod" };
        let uid = preemptor.metadata.uid.as_deref().unwrap_or("");
        for (victim, node) in chosen.pods() {
            // Graceful deletion already started: nothing to ask (as Kubernetes).
            if victim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            tracing::info!(preemptor = %object_key(&preemptor.metadata),
                           victim = %object_key(&victim.metadata), %node, "preempting");
            let condition = json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                "reason": "PreemptionByScheduler", "lastTransitionTime": now_rfc3339(),
                "message": format!("{scheduler}: preempting to accommodate a higher priority {what}")}]}});
            if !self
                .client
                .patch_status::<Pod>(&victim.metadata, content::STRATEGIC_MERGE_PATCH, &condition)
                .await?
            {
                continue; // already gone
            }
            let api = Api::<Pod>::namespaced(
                &self.client,
                victim.metadata.namespace.as_deref().unwrap_or("default"),
            );
            let name = victim.metadata.name.as_deref().unwrap_or("");
            let dp = DeleteParams {
                precondition_uid: victim.metadata.uid.clone(),
                ..Default::default()
            };
            match api.delete(name, &dp).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => continue,
                Err(e) => return Err(e),
            }
            self.recorder
                .event(
                    &**victim,
                    EventType::Normal,
                    "Preempted",
                    &format!("Preempted by pod {uid} on node {node}"),
                )
                .await;
        }
        Ok(())
    }

    /// Pods of lower priority nominated to `node` may no longer fit there:
    /// their nomination goes, so they look for room elsewhere.
    async fn clear_lower_nominations(&self, priority: i32, node: &str) {
        let lower: Vec<String> = lock(&self.nominated)
            .iter()
            .filter(|(_, n)| n.node == node && n.priority < priority)
            .map(|(k, _)| k.clone())
            .collect();
        for key in lower {
            if let Some(p) = self.pods.get(&key) {
                self.clear_nomination(&key, &p).await;
                self.queue.add(key);
            }
        }
    }

    async fn clear_nomination(&self, key: &str, pod: &Pod) {
        lock(&self.preempting).remove(key);
        if lock(&self.nominated).remove(key).is_none() {
            return;
        }
        let patch = json!({"status": {"nominatedNodeName": null}});
        if let Err(e) = self
            .client
            .patch_status::<Pod>(&pod.metadata, content::MERGE_PATCH, &patch)
            .await
        {
            tracing::debug!(pod = %key, error = %e, "clearing a nomination");
        }
    }

    async fn nominate(&self, key: &str, pod: &Pod, node: &str) -> Result<(), ClientError> {
        lock(&self.nominated).insert(
            key.to_string(),
            Nomination {
                node: node.to_string(),
                priority: victims::priority(pod),
                requests: filters::pod_requests(pod),
            },
        );
        let patch = json!({"status": {"nominatedNodeName": node}});
        self.client
            .patch_status::<Pod>(&pod.metadata, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }
}
