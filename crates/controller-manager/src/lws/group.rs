//! The LWS group controller (upstream's "pod reconciler"): for every leader
//! pod, its worker StatefulSet (`L-i`, owned by the leader pod, built from the
//! revision the leader was created from) and, under UniquePerReplica, its
//! headless Service; for every LWS pod, the restart policy.
//!
//! ```text
//!   leader pod L-i event ──▶ restart policy? ──▶ LeaderReady? ──▶ revision of the leader
//!                                                          └──▶ create StatefulSet L-i (once)
//!   any pod of group i restarted or deleted (RecreateGroupOnPodRestart)
//!       ──▶ backoff / limit (minik8s) ──▶ delete leader L-i with Foreground propagation
//!           (GC removes the worker set and pods, the leader set recreates L-i)
//! ```
//!
//! Beyond upstream, two LWS annotations tame a group that keeps failing
//! (lws#1048, lws#877): `minik8s.io/group-restart-backoff` (default `10s`,
//! doubling per consecutive restart up to 5 minutes; `0s` restarts at once as
//! upstream does) and `minik8s.io/max-group-restarts` (no limit by default).
//! The restart history lives in the LWS annotation `minik8s.io/group-restarts`,
//! so a restarted controller keeps it.

use super::hash::held_for_replacement;
use super::restarts::*;
use crate::lws::{
    from_revision, headless_service, size_of, template_annotations, unique_per_replica,
    GROUP_RESTARTS,
};
use crate::ownership::{controller_of, controller_ref, is_ready};
use crate::workload_metrics::WorkloadMetrics;
use crate::{lock, ns_of, parse_duration};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::scheduling::v1beta1::PodGroup as WorkloadPodGroup;
use minik8s_api::lws::{LeaderWorkerSet, LeaderWorkerTemplate, NetworkConfig};
use minik8s_api::lws_pod::*;
use minik8s_api::podgroup::PodGroup;
use minik8s_api::registry;
use minik8s_client::controller::{controller_key, Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EXPERIMENTAL_AFTER_START: &str =
    "leaderworkerset.sigs.k8s.io/experimental-recreate-group-after-start";

/// Upstream's trigger: the pod is being deleted, or it runs (or waits)
/// with a container that has restarted.
pub fn restart_triggered(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return true;
    }
    let Some(st) = &pod.status else { return false };
    if !matches!(st.phase.as_deref(), Some("Running") | Some("Pending")) {
        return false;
    }
    st.container_statuses
        .iter()
        .flatten()
        .chain(st.init_container_statuses.iter().flatten())
        .any(|c| c.restart_count > 0)
}

/// The worker StatefulSet of `leader`, from the revision it was created from.
pub fn worker_statefulset(
    lws: &LeaderWorkerSet,
    leader: &Pod,
    lwt: &LeaderWorkerTemplate,
    nc: &NetworkConfig,
    node_selector: Option<(String, String)>,
) -> Value {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let leader_name = leader.metadata.name.clone().unwrap_or_default();
    let l = leader.metadata.labels.clone().unwrap_or_default();
    let get = |k: &str| l.get(k).cloned().unwrap_or_default();
    let mut selector = BTreeMap::new();
    selector.insert(NAME.to_string(), name.clone());
    selector.insert(GROUP_INDEX.to_string(), get(GROUP_INDEX));
    selector.insert(GROUP_KEY.to_string(), get(GROUP_KEY));
    let mut labels = lws.metadata.labels.clone().unwrap_or_default();
    labels.extend(selector.clone());
    labels.insert(REVISION_KEY.into(), get(REVISION_KEY));
    labels.insert(ROLE.into(), "worker".into());
    let mut annotations = lws.metadata.annotations.clone().unwrap_or_default();
    annotations.remove(GROUP_RESTARTS);
    let mut template = lwt.worker_template.clone();
    let mut tmeta = template.metadata.take().unwrap_or_default();
    let mut tlabels = tmeta.labels.take().unwrap_or_default();
    tlabels.extend(selector.clone());
    tlabels.insert(REVISION_KEY.into(), get(REVISION_KEY));
    let mut tann = tmeta.annotations.take().unwrap_or_default();
    tann.extend(template_annotations(lws, lwt, false));
    tann.insert(SIZE.into(), size_of(lwt).to_string());
    tann.insert(LEADER_NAME.into(), leader_name.clone());
    let leader_spec = serde_json::to_value(&leader.spec).unwrap_or(Value::Null);
    if pod_requests_tpus(&leader_spec) {
        tann.insert(LEADER_REQUESTS_TPUS.into(), "true".into());
    }
    tmeta.labels = Some(tlabels);
    tmeta.annotations = Some(tann);
    template.metadata = Some(tmeta);
    let mut template = serde_json::to_value(&template).unwrap_or(json!({}));
    if let Some((k, v)) = node_selector {
        template["spec"]["nodeSelector"][k] = json!(v);
    }
    let service = match (unique_per_replica(Some(nc)), lws.spec.is_hash()) {
        (true, true) => hash_group_service(&name, &get(GROUP_KEY)),
        (true, false) => leader_name.clone(),
        (false, _) => name.clone(),
    };
    if lws.spec.is_hash() {
        // Workers reach a Hash leader by its pod IP (upstream v0.11).
        let ip = leader.status.as_ref().and_then(|s| s.pod_ip.clone());
        template["metadata"]["annotations"][LEADER_ADDRESS] = json!(ip.unwrap_or_default());
        template["metadata"]["labels"][ROLE] = json!("worker");
    }
    let mut sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": leader_name, "namespace": ns_of(&lws.metadata), "labels": labels, "annotations": annotations,
            "ownerReferences": [controller_ref("v1", "Pod", &leader.metadata)]},
        "spec": {"replicas": size_of(lwt) - 1, "ordinals": {"start": 1}, "podManagementPolicy": "Parallel",
            "serviceName": service, "selector": {"matchLabels": selector}, "template": template}});
    super::rollout::add_claim_templates(&mut sts, lwt);
    super::rollout::add_group_resource_claims(&mut sts, lwt, &name, &get(GROUP_INDEX));
    sts
}

fn label<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(k).map(String::as_str)
}

fn pod_annotation<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

/// Annotation on a Failed group's leader (lws#877): recreate the group with
/// a fresh restart budget.
pub const RECOVER: &str = "leaderworkerset.sigs.k8s.io/recover";

/// The restart history kept in the LWS annotation, by group index.
pub fn history_of(lws: &LeaderWorkerSet) -> BTreeMap<String, History> {
    lws.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_RESTARTS))
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// Forgets the groups' restarts and recreates them (foreground deletion of
/// their leaders): how a Failed group comes back, by `recover=true` on its
/// leader or by a scale-down that keeps its index. One event per group.
/// `forget` names more groups whose history goes (groups scaled away).
pub async fn recreate_with_fresh_budget(
    client: &Client,
    recorder: &Recorder,
    lws: &LeaderWorkerSet,
    leaders: &[(Arc<Pod>, String)],
    forget: &[String],
    reason: &str,
) -> Result<(), ClientError> {
    let mut all = history_of(lws);
    for (leader, _) in leaders {
        all.remove(label(leader, GROUP_INDEX).unwrap_or_default());
    }
    for idx in forget {
        all.remove(idx);
    }
    let ns = ns_of(&lws.metadata);
    let patch = json!({"metadata": {"annotations": {GROUP_RESTARTS: serde_json::to_string(&all).unwrap_or_default()}}});
    client
        .dynamic(registry::of::<LeaderWorkerSet>(), Some(&ns))
        .patch(
            lws.metadata.name.as_deref().unwrap_or(""),
            None,
            content::MERGE_PATCH,
            &patch,
        )
        .await?;
    for (leader, note) in leaders {
        let dp = DeleteParams {
            propagation_policy: Some("Foreground".into()),
            precondition_uid: leader.metadata.uid.clone(),
            ..Default::default()
        };
        match client
            .dynamic(registry::of::<Pod>(), Some(&ns))
            .delete(leader.metadata.name.as_deref().unwrap_or(""), &dp)
            .await
        {
            Err(e) if !(e.is_not_found() || e.is_conflict()) => return Err(e),
            _ => {}
        }
        recorder.event(lws, EventType::Normal, reason, note).await;
    }
    Ok(())
}

fn is_leader(p: &Pod) -> bool {
    label(p, WORKER_INDEX) == Some("0")
}

fn has_condition(p: &Pod, type_: &str) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct GroupController {
    /// Where its workload metrics are counted (the controller manager's).
    pub(super) metrics: WorkloadMetrics,
    pub(super) client: Client,
    pub(super) recorder: Recorder,
    sets: Cache<LeaderWorkerSet>,
    pub(super) pods: Cache<Pod>,
    pub(super) statefulsets: Cache<StatefulSet>,
    services: Cache<Service>,
    revisions: Cache<ControllerRevision>,
    nodes: Cache<Node>,
    pod_groups: Cache<PodGroup>,
    /// The Workload API's PodGroups (`spec.scheduling` gangs).
    workload_groups: Cache<WorkloadPodGroup>,
    /// The groups' own ResourceClaims (lws#444), owned by their leaders.
    claims: Cache<ResourceClaim>,
    /// Pods whose deletion was seen but not yet handled: a worker that its
    /// StatefulSet recreates at once must still restart the group (lws#998).
    deleted: Mutex<HashMap<String, Arc<Pod>>>,
}

impl GroupController {
    /// Builds the controller on the shared informers. Its keys are leader
    /// pods: any LWS pod event (a deleted one is kept for the restart policy),
    /// a change of a worker set or the deletion of a group Service (owned by
    /// the leader pod), and a new LWS revision (for the leaders waiting on it).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        metrics: WorkloadMetrics,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(GroupController {
            metrics,
            recorder: Recorder::new(client.clone(), "lws-controller"),
            client,
            sets: informers.cache(),
            pods: informers.cache(),
            statefulsets: informers.cache(),
            services: informers.cache(),
            revisions: informers.cache(),
            nodes: informers.cache(),
            pod_groups: informers.cache(),
            workload_groups: informers.cache(),
            claims: informers.cache(),
            deleted: Mutex::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .watches::<Pod, _>(informers, |c, ev| {
                let p = ev.object();
                if label(p, NAME).is_none() {
                    return Vec::new();
                }
                let key = object_key(&p.metadata);
                let mut keys = match ev {
                    // A pod of a Hash set came or went: its held leaders look again.
                    Event::Added(_) | Event::Deleted(_) => super::hash::held_leaders(&c.pods, p),
                    _ => Vec::new(),
                };
                if let Event::Deleted(p) = ev {
                    lock(&c.deleted).insert(key.clone(), p.clone());
                }
                keys.push(key);
                keys
            })?
            .owns::<StatefulSet>(informers, "Pod")?
            .watches::<Service, _>(informers, |_, ev| match ev {
                Event::Deleted(s) => controller_key(&s.metadata, "Pod").into_iter().collect(),
                _ => Vec::new(),
            })?
            // A recreated group's leader waits for the old group's claim to go.
            .watches::<ResourceClaim, _>(informers, |_, ev| match ev {
                Event::Deleted(c) => controller_key(&c.metadata, "Pod").into_iter().collect(),
                _ => Vec::new(),
            })?
            .watches::<ControllerRevision, _>(informers, |c, ev| {
                let Event::Added(r) = ev else {
                    return Vec::new();
                };
                let Some(n) = r.metadata.labels.as_ref().and_then(|l| l.get(NAME)) else {
                    return Vec::new();
                };
                c.pods
                    .by_index(NAMESPACE_INDEX, &ns_of(&r.metadata))
                    .into_iter()
                    .filter(|p| label(p, NAME) == Some(n) && is_leader(p))
                    .map(|p| object_key(&p.metadata))
                    .collect()
            })
    }

    /// Plus the minik8s backoff and limit. Returns whether the group's
    /// leader was deleted to recreate the group.
    async fn restart_policy(
        &self,
        lws: &LeaderWorkerSet,
        pod: &Arc<Pod>,
        gone: bool,
    ) -> Result<Restart, ClientError> {
        let lwt = &lws.spec.leader_worker_template;
        let ann = lws.metadata.annotations.clone().unwrap_or_default();
        let after_start = lwt.restart_policy.as_deref() == Some("RecreateGroupAfterStart")
            || ann.contains_key(EXPERIMENTAL_AFTER_START);
        let recreate = after_start
            || lwt
                .restart_policy
                .as_deref()
                .unwrap_or("RecreateGroupOnPodRestart")
                == "RecreateGroupOnPodRestart";
        if !recreate || !(gone || restart_triggered(pod)) {
            return Ok(Restart::NotNeeded);
        }
        let group_index = label(pod, GROUP_INDEX).unwrap_or_default().to_string();
        if after_start && self.group_still_starting(lws, pod, &group_index) {
            return Ok(Restart::NotNeeded);
        }
        let Some(leader) = self.leader_to_restart(pod, gone) else {
            return Ok(Restart::NotNeeded);
        };
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        if lws.spec.is_hash() {
            // A Hash group is recreated with a new key: no budget to follow.
            return self
                .recreate_group(lws, &leader, &pod_name, &group_index)
                .await;
        }
        self.restart_within_budget(lws, pod, gone, &leader, &group_index)
            .await
    }

    /// RecreateGroupAfterStart: a group not all created, or with a pod
    /// still Pending, is not restarted yet.
    fn group_still_starting(&self, lws: &LeaderWorkerSet, pod: &Pod, group_index: &str) -> bool {
        let lws_name = lws.metadata.name.clone().unwrap_or_default();
        let group: Vec<Arc<Pod>> = self
            .pods
            .by_index(NAMESPACE_INDEX, &ns_of(&pod.metadata))
            .into_iter()
            .filter(|p| {
                label(p, NAME) == Some(&lws_name) && label(p, GROUP_INDEX) == Some(group_index)
            })
            .collect();
        group.len() as i32 != size_of(&lws.spec.leader_worker_template)
            || group
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
    }

    /// The leader whose group `pod`'s restart (or loss: `gone`) recreates;
    /// None when it does not: the leader is gone or going (its set
    /// recreates it), or the worker is not of the leader's current group.
    fn leader_to_restart(&self, pod: &Pod, gone: bool) -> Option<Arc<Pod>> {
        let ns = ns_of(&pod.metadata);
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let leader_name = match is_leader(pod) {
            true => pod_name,
            false => pod_name
                .rsplit_once('-')
                .map(|(l, _)| l.to_string())
                .unwrap_or_default(),
        };
        let leader = self.pods.get(&format!("{ns}/{leader_name}"))?;
        if !is_leader(pod) {
            if label(pod, REVISION_KEY) != label(&leader, REVISION_KEY) {
                return None;
            }
            let current_set = self
                .statefulsets
                .get(&format!("{ns}/{leader_name}"))
                .filter(|s| controller_of(&s.metadata).map(|o| o.0) == leader.metadata.uid);
            let owner = controller_of(&pod.metadata).map(|o| o.0);
            if current_set.is_none_or(|s| s.metadata.uid != owner) {
                return None;
            }
        } else if gone {
            return None; // The leader itself went: its set recreates it.
        }
        leader
            .metadata
            .deletion_timestamp
            .is_none()
            .then_some(leader)
    }

    /// minik8s' backoff and limit on group restarts: the group is recreated
    /// now, later (its history records when), or not again (Failed).
    async fn restart_within_budget(
        &self,
        lws: &LeaderWorkerSet,
        pod: &Arc<Pod>,
        gone: bool,
        leader: &Pod,
        group_index: &str,
    ) -> Result<Restart, ClientError> {
        let ann = lws.metadata.annotations.clone().unwrap_or_default();
        let mut all = history_of(lws);
        let history = all.get(group_index).copied().unwrap_or_default();
        let base = ann
            .get(RESTART_BACKOFF)
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(DEFAULT_BACKOFF);
        let limit = ann.get(MAX_RESTARTS).and_then(|s| s.parse().ok());
        let now = chrono::Utc::now().timestamp();
        match decide(history, now, base, limit) {
            Decision::Wait(left) => {
                if gone {
                    lock(&self.deleted).insert(object_key(&pod.metadata), pod.clone());
                }
                // The status shows the group Restarting until then.
                let due = now + left.as_secs() as i64;
                if history.waiting_until != due {
                    let waiting = History {
                        waiting_until: due,
                        ..history
                    };
                    all.insert(group_index.to_string(), waiting);
                    self.save_history(lws, &all).await?;
                }
                Ok(Restart::Backoff(left + Duration::from_millis(100)))
            }
            Decision::LimitReached => {
                // The group is Failed (the LWS controller reports it); its
                // pods stay for debugging.
                if !history.limited {
                    let limited = History {
                        limited: true,
                        waiting_until: 0,
                        ..history
                    };
                    all.insert(group_index.to_string(), limited);
                    self.save_history(lws, &all).await?;
                }
                Ok(Restart::NotNeeded)
            }
            Decision::RestartNow => {
                all.insert(group_index.to_string(), record(history, now));
                self.save_history(lws, &all).await?;
                let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                self.recreate_group(lws, leader, pod_name, group_index)
                    .await
            }
        }
    }

    /// Deletes a group's leader (foreground: GC takes its workers first) so
    /// the group is recreated.
    async fn recreate_group(
        &self,
        lws: &LeaderWorkerSet,
        leader: &Pod,
        pod_name: &str,
        group_index: &str,
    ) -> Result<Restart, ClientError> {
        let ns = ns_of(&leader.metadata);
        let lws_name = lws.metadata.name.clone().unwrap_or_default();
        let leader_name = leader.metadata.name.clone().unwrap_or_default();
        let api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        let dp = DeleteParams {
            propagation_policy: Some("Foreground".into()),
            precondition_uid: leader.metadata.uid.clone(),
            ..Default::default()
        };
        match api.delete(&leader_name, &dp).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => return Ok(Restart::NotNeeded),
            Err(e) => return Err(e),
        }
        let note = format!("Worker pod {pod_name} failed, deleted leader pod {leader_name} to recreate group {group_index}");
        self.recorder
            .event(lws, EventType::Normal, "RecreateGroup", &note)
            .await;
        self.metrics.lws_group_restarted(&ns, &lws_name);
        Ok(Restart::Recreated)
    }

    async fn save_history(
        &self,
        lws: &LeaderWorkerSet,
        all: &BTreeMap<String, History>,
    ) -> Result<(), ClientError> {
        let api = self.client.dynamic(
            registry::of::<LeaderWorkerSet>(),
            Some(&ns_of(&lws.metadata)),
        );
        let patch = json!({"metadata": {"annotations": {GROUP_RESTARTS: serde_json::to_string(all).unwrap_or_default()}}});
        api.patch(
            lws.metadata.name.as_deref().unwrap_or(""),
            None,
            content::MERGE_PATCH,
            &patch,
        )
        .await
        .map(|_| ())
    }
}

/// What the restart policy did about a pod.
enum Restart {
    NotNeeded,
    /// The leader was deleted: the group is recreated.
    Recreated,
    /// A recreation is due after this backoff.
    Backoff(Duration),
}

impl Reconciler for GroupController {
    const NAME: &'static str = "lws-group";

    /// A group's work is in its leader pod's journey until the workers'
    /// StatefulSet exists (which then follows its own, the same trace).
    async fn trace_context(&self, key: &str) -> Option<String> {
        let pod = self.pods.get(key)?;
        let ns = ns_of(&pod.metadata);
        let lws = self.sets.get(&format!("{ns}/{}", label(&pod, NAME)?))?;
        let settled = !is_leader(&pod)
            || size_of(&lws.spec.leader_worker_template) <= 1
            || self.statefulsets.get(key).is_some();
        crate::journey::context_unless(&self.client, &pod.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.metrics.timed(Self::NAME, self.sync(key)).await
    }
}

impl GroupController {
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        let (pod, gone) = match self.pods.get(key) {
            Some(p) => {
                lock(&self.deleted).remove(key);
                (p, false)
            }
            None => match lock(&self.deleted).remove(key) {
                Some(p) => (p, true),
                None => return Ok(Action::Done),
            },
        };
        let ns = ns_of(&pod.metadata);
        let Some(lws_name) = label(&pod, NAME) else {
            return Ok(Action::Done);
        };
        let Some(lws) = self.sets.get(&format!("{ns}/{lws_name}")) else {
            return Ok(Action::Done);
        };
        if !gone && is_leader(&pod) && pod_annotation(&pod, RECOVER) == Some("true") {
            let idx = label(&pod, GROUP_INDEX).unwrap_or_default().to_string();
            if history_of(&lws).get(&idx).is_some_and(|h| h.limited) {
                let note = format!(
                    "Group {idx} recovered ({RECOVER}): recreated with a fresh restart budget"
                );
                recreate_with_fresh_budget(
                    &self.client,
                    &self.recorder,
                    &lws,
                    &[(pod, note)],
                    &[],
                    "GroupRecovered",
                )
                .await?;
                return Ok(Action::Done);
            }
        }
        let backoff = match self.restart_policy(&lws, &pod, gone).await? {
            Restart::Recreated => return Ok(Action::Done),
            Restart::NotNeeded => None,
            Restart::Backoff(wait) => Some(wait),
        };
        if gone || !is_leader(&pod) {
            return Ok(backoff.map_or(Action::Done, Action::RequeueAfter));
        }
        if lws.spec.is_hash() && held_for_replacement(&pod) {
            return self.admit_replacements(&lws, &pod).await;
        }
        // A leader whose group is backing off still builds its group; it
        // comes back when the backoff ends.
        let action = self.build_group(key, &lws, &pod).await?;
        if lws.spec.is_hash() {
            self.set_group_ready(&lws, &pod).await?;
        }
        Ok(match backoff {
            Some(wait) => action.no_later_than(wait),
            None => action,
        })
    }
}

impl GroupController {
    /// A leader pod's group: its headless Service (UniquePerReplica) and its
    /// worker StatefulSet.
    async fn build_group(
        &self,
        key: &str,
        lws: &LeaderWorkerSet,
        pod: &Arc<Pod>,
    ) -> Result<Action, ClientError> {
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        if annotations.contains_key(LEADER_NAME) {
            let note = format!(
                "leader pod {} carries {LEADER_NAME}; refusing to build its group",
                pod.metadata.name.as_deref().unwrap_or("")
            );
            self.recorder
                .event(lws, EventType::Warning, "FailedCreate", &note)
                .await;
            return Ok(Action::Done);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        // The group's gang first: its pods wait for it.
        self.ensure_pod_group(lws, pod).await?;
        let Some((lwt, nc)) = self.leader_revision(lws, pod) else {
            tracing::debug!(%key, "waiting for the leader's revision");
            return Ok(Action::RequeueAfter(Duration::from_secs(1)));
        };
        if unique_per_replica(Some(&nc)) {
            self.ensure_group_service(lws, pod).await?;
        }
        if let Some(wait) = self.ensure_group_claims(lws, pod, &lwt).await? {
            return Ok(Action::RequeueAfter(wait));
        }
        if size_of(&lwt) <= 1 || !workers_may_start(lws, pod) {
            return Ok(Action::Done);
        }
        if let Some(existing) = self.statefulsets.get(key) {
            if controller_of(&existing.metadata).map(|o| o.0) != pod.metadata.uid {
                // The previous leader's set is still being collected.
                return Ok(Action::RequeueAfter(Duration::from_secs(1)));
            }
            return Ok(Action::Done);
        }
        let Some(node_selector) = self.worker_node_selector(lws, pod)? else {
            return Ok(Action::Done); // Placed once the leader is scheduled.
        };
        let sts = worker_statefulset(lws, pod, &lwt, &nc, node_selector);
        let leader_name = pod.metadata.name.as_deref().unwrap_or_default();
        let ns = ns_of(&pod.metadata);
        let what = format!("worker statefulset for leader pod {leader_name}");
        let created = self
            .create_for_group(lws, registry::of::<StatefulSet>(), &ns, &sts, &what)
            .await?;
        if created {
            let note = format!("Created {what}");
            self.recorder
                .event(lws, EventType::Normal, "GroupsProgressing", &note)
                .await;
        }
        Ok(Action::Done)
    }

    /// Creates an object of the leader's group; one that exists already is
    /// left as it is (false). A failure is a FailedCreate event on the LWS.
    async fn create_for_group(
        &self,
        lws: &LeaderWorkerSet,
        info: &'static registry::ResourceInfo,
        ns: &str,
        obj: &serde_json::Value,
        what: &str,
    ) -> Result<bool, ClientError> {
        match self.client.dynamic(info, Some(ns)).create(obj).await {
            Ok(_) => Ok(true),
            Err(e) if e.api().is_some_and(|a| a.code == 409) => Ok(false),
            Err(e) => {
                let note = format!("Failed to create {what}: {e}");
                self.recorder
                    .event(lws, EventType::Warning, "FailedCreate", &note)
                    .await;
                Err(e)
            }
        }
    }

    /// The gang the group's pods wait for (a Workload API PodGroup or
    /// Volcano's), when the LWS asks for one and it does not exist yet.
    async fn ensure_pod_group(&self, lws: &LeaderWorkerSet, pod: &Pod) -> Result<(), ClientError> {
        let Some(pg) = super::podgroup::group_pod_group(lws, pod) else {
            return Ok(());
        };
        let ns = ns_of(&pod.metadata);
        let name = pg["metadata"]["name"].as_str().unwrap_or_default();
        let key = format!("{ns}/{name}");
        let (exists, info) = match pg["apiVersion"] == super::podgroup::WORKLOAD_API_VERSION {
            true => (
                self.workload_groups.get(&key).is_some(),
                registry::of::<WorkloadPodGroup>(),
            ),
            false => (
                self.pod_groups.get(&key).is_some(),
                registry::of::<PodGroup>(),
            ),
        };
        if !exists {
            let what = format!("pod group {name}");
            self.create_for_group(lws, info, &ns, &pg, &what).await?;
        }
        Ok(())
    }

    /// The template and network config of the revision the leader was
    /// created from (its group is built from that one, not the newest).
    fn leader_revision(
        &self,
        lws: &LeaderWorkerSet,
        pod: &Pod,
    ) -> Option<(LeaderWorkerTemplate, NetworkConfig)> {
        let hash = label(pod, REVISION_KEY).unwrap_or_default();
        // Only the LWS's own revisions: the StatefulSet controller's revisions
        // of the leader set carry the same labels.
        let revision = self
            .revisions
            .by_index(NAMESPACE_INDEX, &ns_of(&pod.metadata))
            .into_iter()
            .find(|r| {
                let l = r.metadata.labels.clone().unwrap_or_default();
                controller_of(&r.metadata).map(|o| o.0) == lws.metadata.uid
                    && l.get(REVISION_KEY).map(String::as_str) == Some(hash)
            })?;
        from_revision(&revision.data.0)
    }

    /// The group's headless Service under UniquePerReplica (named after the
    /// leader; a Hash group's after its group), owned by the leader pod.
    async fn ensure_group_service(
        &self,
        lws: &LeaderWorkerSet,
        pod: &Pod,
    ) -> Result<(), ClientError> {
        let ns = ns_of(&pod.metadata);
        let lws_name = label(pod, NAME).unwrap_or_default();
        let leader_name = pod.metadata.name.clone().unwrap_or_default();
        let svc_name = match lws.spec.is_hash() {
            true => hash_group_service(lws_name, label(pod, GROUP_KEY).unwrap_or_default()),
            false => leader_name.clone(),
        };
        if self.services.get(&format!("{ns}/{svc_name}")).is_some() {
            return Ok(());
        }
        let owner = controller_ref("v1", "Pod", &pod.metadata);
        let svc = if lws.spec.is_hash() {
            super::hash::group_service(lws_name, pod, owner)
        } else {
            let group_index = label(pod, GROUP_INDEX).unwrap_or_default();
            headless_service(
                &leader_name,
                &ns,
                json!({NAME: lws_name, GROUP_INDEX: group_index}),
                owner,
            )
        };
        let what = format!("headless service {leader_name}");
        self.create_for_group(lws, registry::of::<Service>(), &ns, &svc, &what)
            .await
            .map(drop)
    }

    /// The workers' nodeSelector under exclusive placement: the leader's
    /// node's value of the topology label. `Ok(None)`: wait, the leader is
    /// not scheduled yet; `Ok(Some(None))`: no selector. A gang is placed in
    /// one domain as a whole by the scheduler (its workers carry the
    /// exclusive affinity): the workers must exist before the leader is
    /// placed, so no selector waits for it.
    #[allow(clippy::type_complexity)]
    fn worker_node_selector(
        &self,
        lws: &LeaderWorkerSet,
        pod: &Pod,
    ) -> Result<Option<Option<(String, String)>>, ClientError> {
        let annotations = lws.metadata.annotations.as_ref();
        let gang = annotations
            .and_then(|a| a.get(super::GANG_SCHEDULING))
            .is_some_and(|v| v == "true")
            || super::podgroup::wants_volcano(lws);
        let topology = annotations.and_then(|a| a.get(EXCLUSIVE_TOPOLOGY));
        let Some(topology) = topology.filter(|_| !gang) else {
            return Ok(Some(None));
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return Ok(None);
        };
        let value = self
            .nodes
            .get(&node)
            .and_then(|n| n.metadata.labels.as_ref()?.get(topology).cloned());
        match value {
            Some(v) => Ok(Some(Some((topology.clone(), v)))),
            None => Err(ClientError::Decode(format!(
                "node {node} has no label {topology} for exclusive placement"
            ))),
        }
    }
}

/// Whether a leader's workers may be created now: under LeaderReady once
/// the leader is ready (a Hash leader's Ready waits for its group, so its
/// containers being ready is what the workers wait for), and a Hash group
/// once the leader has its address (it comes with its sandbox).
fn workers_may_start(lws: &LeaderWorkerSet, pod: &Pod) -> bool {
    let leader_ready = match lws.spec.is_hash() {
        true => has_condition(pod, "ContainersReady"),
        false => is_ready(pod),
    };
    if lws.spec.startup_policy.as_deref() == Some("LeaderReady") && !leader_ready {
        return false;
    }
    let has_ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .is_some();
    !lws.spec.is_hash() || has_ip
}

impl GroupController {
    /// The group's own ResourceClaims (minik8s, lws#444): one per entry of
    /// `resourceClaimTemplates`, made from its template and owned by the
    /// leader, so a recreated group releases its devices and gets new ones.
    /// Some(wait) while one cannot be made yet (the old group's still going,
    /// the template missing).
    async fn ensure_group_claims(
        &self,
        lws: &LeaderWorkerSet,
        leader: &Pod,
        lwt: &LeaderWorkerTemplate,
    ) -> Result<Option<Duration>, ClientError> {
        let entries = lwt.resource_claim_templates.as_deref().unwrap_or(&[]);
        if entries.is_empty() {
            return Ok(None);
        }
        let ns = ns_of(&leader.metadata);
        let lws_name = lws.metadata.name.as_deref().unwrap_or("");
        let group = label(leader, GROUP_INDEX).unwrap_or_default();
        let claims = self
            .client
            .dynamic(registry::of::<ResourceClaim>(), Some(&ns));
        for e in entries {
            let name = group_claim_name(lws_name, group, &e.name);
            if let Some(existing) = self.claims.get(&format!("{ns}/{name}")) {
                if controller_of(&existing.metadata).map(|o| o.0) != leader.metadata.uid {
                    // The previous group's claim is still being released.
                    return Ok(Some(Duration::from_secs(1)));
                }
                continue;
            }
            let template = match self
                .client
                .dynamic(registry::of::<ResourceClaimTemplate>(), Some(&ns))
                .get(&e.resource_claim_template_name)
                .await
            {
                Ok(t) => t,
                Err(err) if err.is_not_found() => {
                    let note = format!(
                        "Failed to create resource claim {name}: resourceclaimtemplate.resource.k8s.io \"{}\" not found",
                        e.resource_claim_template_name
                    );
                    self.recorder
                        .event(lws, EventType::Warning, "FailedCreate", &note)
                        .await;
                    return Ok(Some(Duration::from_secs(10)));
                }
                Err(err) => return Err(err),
            };
            let mut labels = template
                .pointer("/spec/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            labels[NAME] = json!(lws_name);
            labels[GROUP_INDEX] = json!(group);
            let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns, "labels": labels,
                    "annotations": template.pointer("/spec/metadata/annotations"),
                    "ownerReferences": [controller_ref("v1", "Pod", &leader.metadata)]},
                "spec": template.pointer("/spec/spec").cloned().unwrap_or(json!({}))});
            match claims.create(&claim).await {
                Ok(_) => {
                    let note = format!("Created resource claim {name} for group {group}");
                    self.recorder
                        .event(lws, EventType::Normal, "GroupsProgressing", &note)
                        .await;
                }
                Err(err) if err.api().is_some_and(|a| a.code == 409) => {}
                Err(err) => {
                    let note = format!("Failed to create resource claim {name}: {err}");
                    self.recorder
                        .event(lws, EventType::Warning, "FailedCreate", &note)
                        .await;
                    return Err(err);
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn restarts_and_deletions_trigger_group_recreation() {
        let running = |restarts: i32| {
            pod(
                json!({"metadata": {"name": "d-0-1"}, "status": {"phase": "Running",
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": restarts}]}}),
            )
        };
        assert!(!restart_triggered(&running(0)));
        assert!(restart_triggered(&running(1)));
        let deleting =
            pod(json!({"metadata": {"name": "d-0", "deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        assert!(restart_triggered(&deleting));
        let failed = pod(
            json!({"metadata": {"name": "d-0"}, "status": {"phase": "Failed",
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 3}]}}),
        );
        assert!(!restart_triggered(&failed));
    }

    #[test]
    fn worker_set_follows_its_leader_and_revision() {
        let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "ns",
                "labels": {"team": "a"}, "annotations": {GROUP_RESTARTS: "{}", "minik8s.io/gang-scheduling": "true"}},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {}}}}))
        .unwrap();
        let leader = pod(json!({"metadata": {"name": "d-1", "uid": "leader-uid",
            "labels": {NAME: "d", WORKER_INDEX: "0", GROUP_INDEX: "1", GROUP_KEY: "gk", REVISION_KEY: "r1"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {TPU_RESOURCE: "4"}}}]}}));
        let lwt: LeaderWorkerTemplate = serde_json::from_value(json!({"size": 3,
            "workerTemplate": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "w", "image": "i"}]}}}))
        .unwrap();
        let nc = NetworkConfig {
            subdomain_policy: Some("UniquePerReplica".into()),
        };
        let s = worker_statefulset(&lws, &leader, &lwt, &nc, Some(("zone".into(), "a".into())));
        assert_eq!(s["metadata"]["name"], "d-1");
        assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], "leader-uid");
        assert_eq!(
            s["metadata"]["labels"],
            json!({"team": "a", GROUP_INDEX: "1", GROUP_KEY: "gk", NAME: "d", REVISION_KEY: "r1", ROLE: "worker"})
        );
        assert!(s["metadata"]["annotations"].get(GROUP_RESTARTS).is_none());
        assert_eq!(
            s["spec"]["replicas"], 2,
            "size comes from the revision, not the live spec"
        );
        assert_eq!(s["spec"]["ordinals"]["start"], 1);
        assert_eq!(s["spec"]["serviceName"], "d-1");
        assert_eq!(
            s["spec"]["selector"]["matchLabels"],
            json!({GROUP_INDEX: "1", GROUP_KEY: "gk", NAME: "d"})
        );
        let t = &s["spec"]["template"];
        assert_eq!(t["metadata"]["labels"]["app"], "w");
        assert_eq!(t["metadata"]["labels"][REVISION_KEY], "r1");
        assert_eq!(t["metadata"]["annotations"][LEADER_NAME], "d-1");
        assert_eq!(t["metadata"]["annotations"][SIZE], "3");
        assert_eq!(t["metadata"]["annotations"][LEADER_REQUESTS_TPUS], "true");
        assert_eq!(t["metadata"]["annotations"][GANG_MIN_MEMBER], "3");
        assert_eq!(t["spec"]["nodeSelector"], json!({"zone": "a"}));
    }
}
