//! The LeaderWorkerSet controller (upstream's "LWS reconciler"): the leader
//! StatefulSet, the shared headless Service, ControllerRevisions, the
//! rolling-update arithmetic and the status. Its partner `lws_group.rs` builds
//! each group's worker StatefulSet and handles restart policies.
//!
//! ```text
//!   LeaderWorkerSet demo (replicas 2, size 3)
//!     ├── StatefulSet demo (leaders; partition moves down during a rollout)
//!     │     ├── Pod demo-0 ── owns ── StatefulSet demo-0 ── Pods demo-0-1, demo-0-2
//!     │     └── Pod demo-1 ── owns ── StatefulSet demo-1 ── Pods demo-1-1, demo-1-2
//!     ├── Service demo (headless; Shared subdomain policy)
//!     └── ControllerRevision demo-<hash>-<n> (leaderWorkerTemplate + networkConfig)
//! ```
//!
//! Pure core: [`Rollout`], [`partition_and_replicas`] (§5.10 of
//! `shared/reference/lws.md`, checked against every worked trace there),
//! [`status_of`] and [`set_conditions`] (§5.12), [`revision_payload`],
//! [`leader_statefulset`]. `reconcile` is the shell.

use crate::ns_of;
use crate::reconciler::{Action, Controller, Reconciler};
use crate::replicaset::{controller_of, is_ready};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use minik8s_api::hash::revision_hash;
use minik8s_api::lws::{scaled_value, LeaderWorkerSet, LeaderWorkerTemplate, NetworkConfig};
use minik8s_api::lws_pod::*;
use minik8s_api::registry;
use minik8s_client::events::{self, Involved};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Annotation (minik8s): opt an LWS into gang scheduling (`"true"`).
pub const GANG_SCHEDULING: &str = "minik8s.io/gang-scheduling";
/// Annotations of the LWS that are controller state, not user intent, and are
/// not copied onto the StatefulSets.
pub const GROUP_RESTARTS: &str = "minik8s.io/group-restarts";

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const UPDATE_IN_PROGRESS: &str = "UpdateInProgress";

/// The rollout settings of an LWS, scaled against `spec.replicas`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rollout {
    /// R: `spec.replicas`.
    pub replicas: i32,
    /// U: maxUnavailable, rounded down.
    pub max_unavailable: i32,
    /// G: maxSurge, rounded up, capped at R.
    pub max_surge: i32,
    /// Plws: groups below it are never updated.
    pub partition: i32,
}

impl Rollout {
    pub fn of(lws: &LeaderWorkerSet) -> Rollout {
        let r = lws.spec.replicas.unwrap_or(1).max(0);
        let ru = lws
            .spec
            .rollout_strategy
            .as_ref()
            .and_then(|s| s.rolling_update_configuration.clone())
            .unwrap_or_default();
        let scaled = |v: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
                      up: bool,
                      default: i64| {
            v.and_then(|v| serde_json::to_value(v).ok())
                .and_then(|v| scaled_value(&v, r as i64, up))
                .unwrap_or(default)
                .max(0) as i32
        };
        Rollout {
            replicas: r,
            max_unavailable: scaled(ru.max_unavailable, false, 1),
            max_surge: scaled(ru.max_surge, true, 0).min(r),
            partition: ru.partition.unwrap_or(0).max(0),
        }
    }

    fn burst(&self) -> i32 {
        self.replicas + self.max_surge
    }

    /// `want(unready)`: leader StatefulSet replicas while `unready` groups are
    /// not ready and updated.
    fn want(&self, unready: i32) -> i32 {
        if unready <= self.max_surge {
            self.replicas + (unready - self.max_unavailable).max(0)
        } else {
            self.burst()
        }
    }
}

/// The leader StatefulSet as it is now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderSts {
    /// S: its spec.replicas.
    pub replicas: i32,
    /// P: its partition.
    pub partition: i32,
    /// The `leaderworkerset.sigs.k8s.io/replicas` annotation: R at the last apply.
    pub applied_replicas: Option<i32>,
}

/// One group as the rollout sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Group {
    pub ready: bool,
    pub updated: bool,
}

/// §5.10: the leader StatefulSet's `(partition, replicas)`.
pub fn partition_and_replicas(
    r: &Rollout,
    sts: Option<&LeaderSts>,
    new_revision: bool,
    group: impl Fn(i32) -> Group,
) -> (i32, i32) {
    let with_floor = |(p, n): (i32, i32)| (p.max(r.partition), n);
    let Some(sts) = sts else {
        return with_floor((0, r.replicas));
    };
    let (s, p) = (sts.replicas, sts.partition);
    let unready = (0..r.replicas)
        .filter(|i| {
            let g = group(*i);
            !(g.ready && g.updated)
        })
        .count() as i32;
    if new_revision {
        let partition = r.replicas.min(s);
        if s < r.replicas {
            return with_floor((partition, r.replicas));
        }
        return with_floor((partition, r.want(r.replicas)));
    }
    if p == 0 && s == r.replicas {
        return with_floor((0, r.replicas));
    }
    if s < r.replicas {
        return with_floor((p, r.replicas));
    }
    if sts.applied_replicas != Some(r.replicas) {
        return with_floor((p.min(r.burst()), r.want(unready)));
    }
    let step = r.max_unavailable + r.max_surge - (r.burst() - s);
    let tail = (0..s)
        .rev()
        .take_while(|i| {
            let g = group(*i);
            g.ready && g.updated
        })
        .count() as i32;
    let base = (s - tail - step).max(0);
    let mut partition = base + (0..base).filter(|i| !group(*i).ready).count() as i32;
    let mut idx = partition.min(s - 1);
    while idx >= base {
        let g = group(idx);
        if !g.ready || g.updated {
            partition = idx;
        } else {
            break;
        }
        idx -= 1;
    }
    with_floor((partition.min(p), r.want(unready)))
}

/// A group as the status sees it: its index and state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupStatus {
    pub index: i32,
    pub ready: bool,
    pub updated: bool,
}

/// Which conditions the status asserts (§5.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assert {
    Updating,
    Available,
    Progressing,
}

/// §5.12: `(readyReplicas, updatedReplicas, which conditions)`.
pub fn status_of(groups: &[GroupStatus], r: &Rollout) -> (i32, i32, Assert) {
    let count = |f: &dyn Fn(&GroupStatus) -> bool| groups.iter().filter(|g| f(g)).count() as i32;
    let ready = count(&|g| g.ready);
    let updated = count(&|g| g.updated);
    let in_window = |g: &GroupStatus| r.partition <= g.index && g.index < r.replicas;
    let current_non_burst = count(&|g| in_window(g));
    let updated_non_burst = count(&|g| in_window(g) && g.updated);
    let ready_non_burst = count(&|g| g.index < r.replicas && g.ready);
    let updated_ready_non_burst = count(&|g| in_window(g) && g.ready && g.updated);
    let assert = if updated_non_burst < current_non_burst {
        Assert::Updating
    } else if ready_non_burst == r.replicas && updated_ready_non_burst == current_non_burst {
        Assert::Available
    } else {
        Assert::Progressing
    };
    (ready, updated, assert)
}

fn condition_text(type_: &str) -> (&'static str, &'static str) {
    match type_ {
        AVAILABLE => ("AllGroupsReady", "All replicas are ready"),
        UPDATE_IN_PROGRESS => ("GroupsUpdating", "Rolling Upgrade is in progress"),
        _ => ("GroupsProgressing", "Replicas are progressing"),
    }
}

fn exclusive(a: &str, b: &str) -> bool {
    matches!(
        (a, b),
        (AVAILABLE, PROGRESSING)
            | (PROGRESSING, AVAILABLE)
            | (AVAILABLE, UPDATE_IN_PROGRESS)
            | (UPDATE_IN_PROGRESS, AVAILABLE)
    )
}

/// Sets the asserted conditions True (their exclusive partners False, keeping
/// their reason and message), refreshes every observedGeneration, and returns
/// the new list plus the type of the first condition that became True.
pub fn set_conditions(
    existing: &[Condition],
    assert: Assert,
    generation: i64,
    now: &Time,
) -> (Vec<Condition>, Option<&'static str>) {
    let types: &[&str] = match assert {
        Assert::Updating => &[UPDATE_IN_PROGRESS, PROGRESSING],
        Assert::Available => &[AVAILABLE],
        Assert::Progressing => &[PROGRESSING],
    };
    let mut out = existing.to_vec();
    let mut first_new = None;
    for t in types {
        let (reason, message) = condition_text(t);
        match out.iter_mut().find(|c| c.type_ == *t) {
            Some(c) if c.status == "True" => {}
            Some(c) => {
                c.status = "True".into();
                c.reason = reason.into();
                c.message = message.into();
                c.last_transition_time = now.clone();
                first_new.get_or_insert(condition_type(t));
            }
            None => {
                out.push(Condition {
                    type_: t.to_string(),
                    status: "True".into(),
                    reason: reason.into(),
                    message: message.into(),
                    last_transition_time: now.clone(),
                    observed_generation: Some(generation),
                });
                first_new.get_or_insert(condition_type(t));
            }
        }
        for c in out.iter_mut() {
            if exclusive(t, &c.type_) && c.status == "True" {
                c.status = "False".into();
                c.last_transition_time = now.clone();
            }
        }
    }
    for c in out.iter_mut() {
        c.observed_generation = Some(generation);
    }
    (out, first_new)
}

fn condition_type(t: &str) -> &'static str {
    match t {
        AVAILABLE => AVAILABLE,
        UPDATE_IN_PROGRESS => UPDATE_IN_PROGRESS,
        _ => PROGRESSING,
    }
}

/// §5.3: what a revision holds, `leaderWorkerTemplate` and `networkConfig`
/// (nil treated as Shared), each marked "replace".
pub fn revision_payload(lws: &LeaderWorkerSet) -> Value {
    let mut lwt = serde_json::to_value(&lws.spec.leader_worker_template).unwrap_or(json!({}));
    lwt["$patch"] = json!("replace");
    let mut nc = lws
        .spec
        .network_config
        .as_ref()
        .filter(|n| n.subdomain_policy.is_some())
        .and_then(|n| serde_json::to_value(n).ok())
        .unwrap_or(json!({"subdomainPolicy": "Shared"}));
    nc["$patch"] = json!("replace");
    json!({"spec": {"leaderWorkerTemplate": lwt, "networkConfig": nc}})
}

/// The template and network config a revision recorded.
pub fn from_revision(payload: &Value) -> Option<(LeaderWorkerTemplate, NetworkConfig)> {
    let strip = |v: Option<&Value>| {
        let mut v = v.cloned().unwrap_or(json!({}));
        if let Some(m) = v.as_object_mut() {
            m.remove("$patch");
        }
        v
    };
    let lwt = serde_json::from_value(strip(payload.pointer("/spec/leaderWorkerTemplate"))).ok()?;
    let nc = serde_json::from_value(strip(payload.pointer("/spec/networkConfig"))).ok()?;
    Some((lwt, nc))
}

pub fn size_of(lwt: &LeaderWorkerTemplate) -> i32 {
    lwt.size.unwrap_or(1).max(1)
}

pub fn unique_per_replica(nc: Option<&NetworkConfig>) -> bool {
    nc.and_then(|n| n.subdomain_policy.as_deref()) == Some("UniquePerReplica")
}

/// Labels and annotations of the LWS that the StatefulSets inherit.
fn inherited(m: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut out = m.clone().unwrap_or_default();
    out.remove(GROUP_RESTARTS);
    out
}

/// Annotations both pod templates carry (§5.4, §5.7): size, placement,
/// subgroups, gang scheduling.
pub fn template_annotations(
    lws: &LeaderWorkerSet,
    lwt: &LeaderWorkerTemplate,
    leader: bool,
) -> BTreeMap<String, String> {
    let ann = lws.metadata.annotations.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    out.insert(SIZE.to_string(), size_of(lwt).to_string());
    if let Some(t) = ann.get(EXCLUSIVE_TOPOLOGY) {
        out.insert(EXCLUSIVE_TOPOLOGY.into(), t.clone());
    }
    if let Some(sg) = &lwt.sub_group_policy {
        if let Some(s) = sg.sub_group_size {
            out.insert(SUBGROUP_SIZE.into(), s.to_string());
        }
        if let Some(t) = ann.get(SUBGROUP_EXCLUSIVE_TOPOLOGY) {
            out.insert(SUBGROUP_EXCLUSIVE_TOPOLOGY.into(), t.clone());
        }
        let policy = sg.sub_group_policy_type.clone();
        if leader || policy.is_some() {
            out.insert(
                SUBGROUP_POLICY_TYPE.into(),
                policy.unwrap_or_else(|| "LeaderWorker".into()),
            );
        }
    }
    if ann.get(GANG_SCHEDULING).map(String::as_str) == Some("true") {
        // Under LeaderReady the workers only exist once the leader runs, so the
        // gang is the leader alone (upstream's Volcano provider does the same).
        let min = match lws.spec.startup_policy.as_deref() {
            Some("LeaderReady") => 1,
            _ => size_of(lwt),
        };
        out.insert(GANG_MIN_MEMBER.into(), min.to_string());
    }
    out
}

/// §5.4: the leader StatefulSet.
pub fn leader_statefulset(
    lws: &LeaderWorkerSet,
    key: &str,
    partition: i32,
    replicas: i32,
) -> Value {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let lwt = &lws.spec.leader_worker_template;
    let r = Rollout::of(lws);
    let mut labels = inherited(&lws.metadata.labels);
    labels.insert(NAME.into(), name.clone());
    labels.insert(REVISION_KEY.into(), key.into());
    let mut annotations = inherited(&lws.metadata.annotations);
    annotations.insert(REPLICAS.into(), r.replicas.to_string());
    let mut template = lwt
        .leader_template
        .clone()
        .unwrap_or_else(|| lwt.worker_template.clone());
    let mut tmeta = template.metadata.take().unwrap_or_default();
    let mut tlabels = tmeta.labels.take().unwrap_or_default();
    tlabels.insert(WORKER_INDEX.into(), "0".into());
    tlabels.insert(NAME.into(), name.clone());
    tlabels.insert(REVISION_KEY.into(), key.into());
    let mut tann = tmeta.annotations.take().unwrap_or_default();
    tann.extend(template_annotations(lws, lwt, true));
    if unique_per_replica(lws.spec.network_config.as_ref()) {
        tann.insert(SUBDOMAIN_POLICY.into(), "UniquePerReplica".into());
    }
    tmeta.labels = Some(tlabels);
    tmeta.annotations = Some(tann);
    template.metadata = Some(tmeta);
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns_of(&lws.metadata), "labels": labels, "annotations": annotations,
            "ownerReferences": [owner_ref(lws)]},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {NAME: name, WORKER_INDEX: "0"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition,
                "maxUnavailable": (r.max_unavailable + r.max_surge).max(1)}},
            "template": template}})
}

pub fn owner_ref(lws: &LeaderWorkerSet) -> Value {
    json!({"apiVersion": minik8s_api::lws::API_VERSION, "kind": "LeaderWorkerSet", "name": lws.metadata.name,
           "uid": lws.metadata.uid, "controller": true, "blockOwnerDeletion": true})
}

/// The event note for surge groups being removed, if any.
pub fn surge_note(name: &str, from: i32, to: i32, r: i32) -> Option<String> {
    let first = r.max(to);
    (from > first).then(|| {
        if from - 1 == first {
            format!("deleting surge replica {name}-{first}")
        } else {
            format!(
                "deleting surge replicas from {name}-{first} to {name}-{}",
                from - 1
            )
        }
    })
}

/// The event note for a partition moving down from `old` to `new`.
pub fn updating_note(old: i32, new: i32) -> Option<String> {
    (new < old).then(|| {
        if old - 1 == new {
            format!("Updating replica {new}")
        } else {
            format!("Updating replicas {new} to {} (inclusive)", old - 1)
        }
    })
}

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct LwsController {
    client: Client,
    sets: Cache<LeaderWorkerSet>,
    statefulsets: Cache<StatefulSet>,
    pods: Cache<Pod>,
    services: Cache<Service>,
    revisions: Cache<ControllerRevision>,
    queue: WorkQueue<String>,
}

/// Whether group `idx` of `lws` is ready and updated (§5.10), from the caches.
pub fn group_state(
    pods: &Cache<Pod>,
    statefulsets: &Cache<StatefulSet>,
    ns: &str,
    name: &str,
    idx: i32,
    size: i32,
    key: &str,
) -> Group {
    let Some(leader) = pods.get(&format!("{ns}/{name}-{idx}")) else {
        return Group::default();
    };
    if leader.metadata.deletion_timestamp.is_some() {
        return Group::default();
    }
    let hash = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.labels.as_ref().and_then(|l| l.get(REVISION_KEY)).cloned()
    };
    let leader_ready = leader.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && is_ready(&leader);
    let leader_updated = hash(&leader.metadata).as_deref() == Some(key);
    if size <= 1 {
        return Group {
            ready: leader_ready,
            updated: leader_updated,
        };
    }
    let workers = statefulsets
        .get(&format!("{ns}/{name}-{idx}"))
        .filter(|s| controller_of(&s.metadata).map(|o| o.0) == leader.metadata.uid);
    let Some(workers) = workers else {
        return Group::default();
    };
    let spec_replicas = workers.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = workers.status.clone().unwrap_or_default();
    let workers_ready = st.observed_generation.is_some()
        && spec_replicas == st.available_replicas.unwrap_or(0)
        && st.current_revision == st.update_revision;
    Group {
        ready: leader_ready && workers_ready,
        updated: leader_updated && hash(&workers.metadata).as_deref() == Some(key),
    }
}

impl LwsController {
    /// Builds the controller on the shared informers: an LWS wakes for its
    /// own changes and for any StatefulSet, pod or (deleted) Service labelled
    /// with its name (the leader set, the worker sets, whose readiness is the
    /// groups').
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let queue = WorkQueue::new();
        let ctl = Arc::new(LwsController {
            client,
            sets: informers.cache(),
            statefulsets: informers.cache(),
            pods: informers.cache(),
            services: informers.cache(),
            revisions: informers.cache(),
            queue: queue.clone(),
        });
        Controller::new(ctl, queue)
            .for_own::<LeaderWorkerSet>(informers)?
            .watches::<StatefulSet, _>(informers, |_, ev| labelled(&ev.object().metadata))?
            .watches::<Pod, _>(informers, |_, ev| match ev {
                Event::Updated { old, new }
                    if old.status == new.status && old.metadata.labels == new.metadata.labels =>
                {
                    Vec::new()
                }
                _ => labelled(&ev.object().metadata),
            })?
            .watches::<Service, _>(informers, |_, ev| match ev {
                Event::Deleted(s) => labelled(&s.metadata),
                _ => Vec::new(),
            })
    }

    async fn event(&self, lws: &LeaderWorkerSet, type_: &str, reason: &str, message: &str) {
        record_event(&self.client, lws, type_, reason, message).await;
    }

    fn owned_revisions(&self, lws: &LeaderWorkerSet) -> Vec<Arc<ControllerRevision>> {
        let uid = lws.metadata.uid.clone();
        self.revisions
            .by_index(NAMESPACE_INDEX, &ns_of(&lws.metadata))
            .into_iter()
            .filter(|r| controller_of(&r.metadata).map(|o| o.0) == uid)
            .collect()
    }

    async fn create_revision(
        &self,
        lws: &LeaderWorkerSet,
        existing: &[Arc<ControllerRevision>],
        key: &str,
        payload: &Value,
    ) -> Result<(), ClientError> {
        let name = lws.metadata.name.clone().unwrap_or_default();
        let number = existing.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let prefix: String = name.chars().take(220).collect();
        let rev = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": format!("{prefix}-{key}-{number}"), "namespace": ns_of(&lws.metadata),
                "labels": {NAME: name, REVISION_KEY: key}, "ownerReferences": [owner_ref(lws)]},
            "data": payload, "revision": number});
        let api = self.client.dynamic(
            registry::of::<ControllerRevision>(),
            Some(&ns_of(&lws.metadata)),
        );
        match api.create(&rev).await {
            Ok(_) => Ok(()),
            Err(e) if e.api().is_some_and(|a| a.code == 409) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Converges one LeaderWorkerSet (§5.2).
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        let Some(lws) = self.sets.get(key) else {
            return Ok(Action::Done);
        };
        if lws.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let sts = self.statefulsets.get(key);
        if sts
            .as_ref()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
        {
            // The old leader set is still going: look again shortly.
            return Ok(Action::RequeueAfter(Duration::from_secs(5)));
        }
        // Revisions (§5.3).
        let payload = revision_payload(&lws);
        let mut rev_key = revision_hash(&payload);
        let revisions = self.owned_revisions(&lws);
        let has_rev = |k: &str| {
            revisions.iter().any(|r| {
                r.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_KEY))
                    .map(String::as_str)
                    == Some(k)
            })
        };
        let sts_key = sts
            .as_ref()
            .and_then(|s| s.metadata.labels.as_ref()?.get(REVISION_KEY).cloned());
        if let Some(old) = sts_key
            .as_deref()
            .filter(|k| !has_rev(k) && revisions.is_empty())
        {
            // A leader set without any revision: adopt its key, do not roll.
            self.create_revision(&lws, &revisions, old, &payload)
                .await?;
            let note =
                format!("Creating missing revision with key {old} for existing LeaderWorkerSet");
            self.event(&lws, "Normal", "CreatingRevision", &note).await;
            rev_key = old.to_string();
        } else if !has_rev(&rev_key) {
            self.create_revision(&lws, &revisions, &rev_key, &payload)
                .await?;
            let why = if sts.is_some() {
                "for updated LWS"
            } else {
                "for a newly created LeaderWorkerSet"
            };
            let note = format!("Creating revision with key {rev_key} {why}");
            self.event(&lws, "Normal", "CreatingRevision", &note).await;
        }
        let new_revision = sts_key.as_deref().is_some_and(|k| k != rev_key);

        // Leader StatefulSet (§5.4, §5.10).
        let rollout = Rollout::of(&lws);
        let size = size_of(&lws.spec.leader_worker_template);
        let group = |i: i32| {
            group_state(
                &self.pods,
                &self.statefulsets,
                &ns,
                &name,
                i,
                size,
                &rev_key,
            )
        };
        let current = sts.as_ref().map(|s| {
            let spec = s.spec.clone().unwrap_or_default();
            LeaderSts {
                replicas: spec.replicas.unwrap_or(1),
                partition: spec
                    .update_strategy
                    .and_then(|u| u.rolling_update)
                    .and_then(|r| r.partition)
                    .unwrap_or(0),
                applied_replicas: s
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(REPLICAS))
                    .and_then(|v| v.parse().ok()),
            }
        });
        let (partition, replicas) =
            partition_and_replicas(&rollout, current.as_ref(), new_revision, group);
        let desired = leader_statefulset(&lws, &rev_key, partition, replicas);
        let sts_api = self
            .client
            .dynamic(registry::of::<StatefulSet>(), Some(&ns));
        match &sts {
            None => match sts_api.create(&desired).await {
                Ok(_) => {
                    let note = format!("Created leader statefulset {name}");
                    self.event(&lws, "Normal", "GroupsProgressing", &note).await;
                }
                Err(e) if e.api().is_some_and(|a| a.code == 409) => {}
                Err(e) => {
                    let note = format!("Failed to create leader statefulset {name}: {e}");
                    self.event(&lws, "Warning", "FailedCreate", &note).await;
                    return Err(e);
                }
            },
            Some(existing) => {
                if self.apply_leader_sts(&sts_api, existing, &desired).await? {
                    let cur = current.expect("exists");
                    if !new_revision {
                        if let Some(note) = updating_note(cur.partition, partition) {
                            self.event(&lws, "Normal", "GroupsUpdating", &note).await;
                        }
                    }
                    let surge = surge_note(&name, cur.replicas, replicas, rollout.replicas)
                        .filter(|_| cur.applied_replicas == Some(rollout.replicas));
                    if let Some(note) = surge {
                        self.event(&lws, "Normal", "GroupsProgressing", &note).await;
                    }
                }
            }
        }

        // The shared headless Service (§3).
        if !unique_per_replica(lws.spec.network_config.as_ref()) && self.services.get(key).is_none()
        {
            let svc = headless_service(&name, &ns, json!({NAME: name}), owner_ref(&lws));
            self.create_service(&lws, &svc).await?;
        }

        // Status (§5.12).
        let groups: Vec<GroupStatus> = self
            .pods
            .by_index(NAMESPACE_INDEX, &ns)
            .iter()
            .filter(|p| {
                let l = p.metadata.labels.clone().unwrap_or_default();
                l.get(NAME) == Some(&name) && l.get(WORKER_INDEX).map(String::as_str) == Some("0")
            })
            .filter_map(|p| {
                let idx: i32 = p.metadata.labels.as_ref()?.get(GROUP_INDEX)?.parse().ok()?;
                if size > 1
                    && self
                        .statefulsets
                        .get(&format!("{ns}/{name}-{idx}"))
                        .is_none()
                {
                    return None;
                }
                let g = group(idx);
                Some(GroupStatus {
                    index: idx,
                    ready: g.ready,
                    updated: g.updated,
                })
            })
            .collect();
        let (ready, updated, assert) = status_of(&groups, &rollout);
        let old_status = lws.status.clone().unwrap_or_default();
        let generation = lws.metadata.generation.unwrap_or(0);
        let now = Time(chrono::Utc::now());
        let old_conditions = old_status.conditions.clone().unwrap_or_default();
        let (conditions, first_new) = set_conditions(&old_conditions, assert, generation, &now);
        let sts_replicas = sts
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .map(|s| s.replicas)
            .unwrap_or(0);
        let selector = format!("{NAME}={name},{WORKER_INDEX}=0");
        let changed = old_status.ready_replicas != ready
            || old_status.updated_replicas != updated
            || old_status.replicas != sts_replicas
            || old_status.hpa_pod_selector.as_deref() != Some(selector.as_str())
            || old_status.observed_generation != Some(generation)
            || first_new.is_some()
            || conditions.len() != old_conditions.len()
            || conditions
                .iter()
                .zip(&old_conditions)
                .any(|(a, b)| a.status != b.status);
        if changed {
            let status = json!({"status": {"readyReplicas": ready, "updatedReplicas": updated,
                "replicas": sts_replicas, "hpaPodSelector": selector, "observedGeneration": generation,
                "conditions": conditions}});
            let api = self
                .client
                .dynamic(registry::of::<LeaderWorkerSet>(), Some(&ns));
            match api
                .patch(&name, Some("status"), content::MERGE_PATCH, &status)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(Action::Done),
                Err(e) => return Err(e),
            }
            if let Some(t) = first_new {
                let (reason, message) = condition_text(t);
                let note = format!(
                    "{message}, with {ready} groups ready of total {} groups",
                    rollout.replicas
                );
                self.event(&lws, "Normal", reason, &note).await;
            }
        }

        // Prune revisions once the rollout is over (§5.2 step 9).
        let done = rollout.partition == 0
            && (0..rollout.replicas).all(|i| {
                group(i)
                    == Group {
                        ready: true,
                        updated: true,
                    }
            });
        if done && !new_revision {
            let api = self
                .client
                .dynamic(registry::of::<ControllerRevision>(), Some(&ns));
            for r in &revisions {
                let k = r.metadata.labels.as_ref().and_then(|l| l.get(REVISION_KEY));
                if k.map(String::as_str) != Some(rev_key.as_str()) {
                    let n = r.metadata.name.clone().unwrap_or_default();
                    if let Err(e) = api.delete(&n, &DeleteParams::default()).await {
                        if !e.is_not_found() {
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(Action::Done)
    }

    /// Replaces the leader set's spec, labels and annotations when they differ
    /// from `desired`. Returns whether it wrote.
    async fn apply_leader_sts(
        &self,
        api: &minik8s_client::DynamicApi,
        existing: &StatefulSet,
        desired: &Value,
    ) -> Result<bool, ClientError> {
        let hash = revision_hash(desired);
        const APPLIED: &str = "minik8s.io/applied-hash";
        if existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(APPLIED))
            == Some(&hash)
        {
            return Ok(false);
        }
        let mut obj =
            serde_json::to_value(existing).map_err(|e| ClientError::Decode(e.to_string()))?;
        obj["metadata"]["labels"] = desired["metadata"]["labels"].clone();
        obj["metadata"]["annotations"] = desired["metadata"]["annotations"].clone();
        obj["metadata"]["annotations"][APPLIED] = json!(hash);
        obj["spec"] = desired["spec"].clone();
        obj.as_object_mut().map(|m| m.remove("status"));
        let name = existing.metadata.name.clone().unwrap_or_default();
        match api.replace(&name, &obj).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_conflict() => {
                self.queue.add(object_key(&existing.metadata));
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    async fn create_service(&self, lws: &LeaderWorkerSet, svc: &Value) -> Result<(), ClientError> {
        let api = self
            .client
            .dynamic(registry::of::<Service>(), Some(&ns_of(&lws.metadata)));
        match api.create(svc).await {
            Ok(_) => Ok(()),
            Err(e) if e.api().is_some_and(|a| a.code == 409) => Ok(()),
            Err(e) => {
                let note = format!(
                    "Failed to create headless service {}: {e}",
                    svc["metadata"]["name"]
                );
                self.event(lws, "Warning", "FailedCreate", &note).await;
                Err(e)
            }
        }
    }
}

/// Records an Event on the LWS (both LWS controllers report there, as upstream).
pub(crate) async fn record_event(
    client: &Client,
    lws: &LeaderWorkerSet,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let about = Involved {
        api_version: minik8s_api::lws::API_VERSION,
        kind: "LeaderWorkerSet",
        meta: &lws.metadata,
    };
    events::record(client, "lws-controller", about, type_, reason, message).await;
}

/// A headless Service that publishes not-ready addresses (§3).
pub fn headless_service(name: &str, ns: &str, selector: Value, owner: Value) -> Value {
    let lws = selector[NAME].clone();
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {NAME: lws}, "ownerReferences": [owner]},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": selector}})
}

/// `namespace/<lws>` of an object labelled with an LWS name.
fn labelled(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(NAME))
        .map(|n| vec![format!("{}/{n}", ns_of(meta))])
        .unwrap_or_default()
}

impl Reconciler for LwsController {
    const NAME: &'static str = "leaderworkerset";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.sync(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(r: i32, u: i32, g: i32) -> Rollout {
        Rollout {
            replicas: r,
            max_unavailable: u,
            max_surge: g.min(r),
            partition: 0,
        }
    }

    /// A simulated cluster for the reference's traces: per group (ready, updated).
    struct Sim {
        r: Rollout,
        sts: LeaderSts,
        groups: Vec<Group>,
    }

    impl Sim {
        fn new(r: Rollout) -> Sim {
            let groups = vec![
                Group {
                    ready: true,
                    updated: true
                };
                r.replicas as usize
            ];
            Sim {
                sts: LeaderSts {
                    replicas: r.replicas,
                    partition: 0,
                    applied_replicas: Some(r.replicas),
                },
                r,
                groups,
            }
        }

        /// One reconcile: compute, apply to the set, let the set create new
        /// groups (born updated, not ready) and drop removed ones.
        fn step(&mut self, new_revision: bool) -> (i32, i32) {
            let snapshot = self.groups.clone();
            let g = |i: i32| snapshot.get(i as usize).copied().unwrap_or_default();
            let (p, n) = partition_and_replicas(&self.r, Some(&self.sts), new_revision, g);
            self.sts = LeaderSts {
                replicas: n,
                partition: p,
                applied_replicas: Some(self.r.replicas),
            };
            self.groups.resize(
                n as usize,
                Group {
                    ready: false,
                    updated: true,
                },
            );
            (p, n)
        }

        /// A template change: every group becomes outdated, then reconcile
        /// until stable (the partition countdown runs as far as it can).
        fn update(&mut self) -> (i32, i32) {
            for g in &mut self.groups {
                g.updated = false;
            }
            self.step(true);
            self.settle()
        }

        fn settle(&mut self) -> (i32, i32) {
            let mut last = (self.sts.partition, self.sts.replicas);
            loop {
                let now = self.step(false);
                if now == last {
                    return now;
                }
                last = now;
            }
        }

        /// The set recreated group i from the new template and it became ready.
        fn ready(&mut self, i: usize) -> (i32, i32) {
            self.groups[i] = Group {
                ready: true,
                updated: true,
            };
            self.settle()
        }
    }

    #[test]
    fn fresh_lws_creates_every_group_without_surge() {
        let r = rollout(4, 1, 2);
        assert_eq!(
            partition_and_replicas(&r, None, false, |_| Group::default()),
            (0, 4)
        );
    }

    #[test]
    fn trace_r4_u1_g0() {
        let mut s = Sim::new(rollout(4, 1, 0));
        assert_eq!(s.update(), (3, 4));
        assert_eq!(s.ready(3), (2, 4));
        assert_eq!(s.ready(1), (2, 4), "g1 alone does not move the partition");
        s.groups[3].ready = false;
        assert_eq!(s.settle(), (2, 4), "the partition only moves down");
        s.groups[3].ready = true;
        s.groups[2] = Group {
            ready: true,
            updated: true,
        };
        s.groups[0] = Group {
            ready: true,
            updated: true,
        };
        assert_eq!(s.settle(), (0, 4));
    }

    #[test]
    fn trace_r4_u2() {
        let mut s = Sim::new(rollout(4, 2, 0));
        assert_eq!(s.update(), (2, 4));
        assert_eq!(s.ready(3), (1, 4));
        assert_eq!(s.ready(2), (0, 4));
    }

    #[test]
    fn trace_r4_u10_updates_all_groups_at_once() {
        let mut s = Sim::new(rollout(4, 10, 0));
        assert_eq!(s.update(), (0, 4));
    }

    #[test]
    fn trace_r4_u1_g1() {
        let mut s = Sim::new(rollout(4, 1, 1));
        assert_eq!(s.update(), (3, 5), "surge group 4 is born new");
        assert_eq!(s.ready(4), (2, 5));
        assert_eq!(s.ready(3), (1, 5));
        assert_eq!(s.ready(2), (0, 5));
        assert_eq!(s.ready(1), (0, 4), "the surge is reclaimed");
        assert_eq!(s.ready(0), (0, 4));
    }

    #[test]
    fn trace_r4_u0_g1() {
        let mut s = Sim::new(rollout(4, 0, 1));
        assert_eq!(s.update(), (4, 5));
        assert_eq!(s.ready(4), (3, 5));
        assert_eq!(s.ready(3), (2, 5));
        assert_eq!(s.ready(2), (1, 5));
        assert_eq!(s.ready(1), (0, 5));
        assert_eq!(s.ready(0), (0, 4));
    }

    #[test]
    fn trace_r4_u2_g2() {
        let mut s = Sim::new(rollout(4, 2, 2));
        assert_eq!(s.update(), (2, 6));
        s.groups[3] = Group {
            ready: true,
            updated: true,
        };
        assert_eq!(s.ready(2), (0, 4), "both surge groups are reclaimed");
    }

    #[test]
    fn trace_r2_surge_capped() {
        let mut s = Sim::new(rollout(2, 1, 4));
        assert_eq!(s.update(), (1, 3));
    }

    #[test]
    fn trace_r4_g4_u1_bursts_to_seven() {
        let r = rollout(4, 1, 4);
        let sts = LeaderSts {
            replicas: 4,
            partition: 0,
            applied_replicas: Some(4),
        };
        let (_, n) = partition_and_replicas(&r, Some(&sts), true, |_| Group {
            ready: true,
            updated: false,
        });
        assert_eq!(n, 7);
        let mut s = Sim::new(r);
        s.update();
        for i in (0..7).rev() {
            s.groups[i] = Group {
                ready: true,
                updated: true,
            };
        }
        assert_eq!(s.settle().1, 4);
    }

    #[test]
    fn trace_scale_up_with_template_change() {
        // R 4 → 6 with a template change (U=2, G=2): scale up first, new groups
        // are born new; once they are ready, old groups 0 and 1 stay old for now.
        let mut s = Sim::new(rollout(4, 2, 2));
        s.r = rollout(6, 2, 2);
        for g in &mut s.groups {
            g.updated = false;
        }
        assert_eq!(s.step(true), (4, 6));
        s.groups[4] = Group {
            ready: true,
            updated: true,
        };
        // Four old groups are still to update (more than G): burst to R + G.
        assert_eq!(s.ready(5), (2, 8));
    }

    #[test]
    fn trace_template_change_then_scale_down() {
        let r6 = rollout(6, 1, 0);
        let sts = LeaderSts {
            replicas: 6,
            partition: 0,
            applied_replicas: Some(6),
        };
        let outdated = |_| Group {
            ready: true,
            updated: false,
        };
        assert_eq!(partition_and_replicas(&r6, Some(&sts), true, outdated).0, 6);
        let sts = LeaderSts {
            replicas: 6,
            partition: 5,
            applied_replicas: Some(6),
        };
        let r3 = rollout(3, 1, 0);
        let (p, n) = partition_and_replicas(&r3, Some(&sts), false, outdated);
        assert_eq!((p, n), (3, 3), "capped at the new burst");
        let sts = LeaderSts {
            replicas: 3,
            partition: 3,
            applied_replicas: Some(3),
        };
        assert_eq!(
            partition_and_replicas(&r3, Some(&sts), false, outdated),
            (2, 3)
        );
    }

    #[test]
    fn trace_budget_already_consumed_by_a_broken_group() {
        let mut s = Sim::new(rollout(4, 2, 0));
        s.groups[1].ready = false;
        assert_eq!(s.update(), (3, 4));
    }

    #[test]
    fn trace_every_group_unready() {
        let mut s = Sim::new(rollout(2, 1, 0));
        s.groups[0].ready = false;
        s.groups[1].ready = false;
        assert_eq!(s.update(), (1, 2));
        assert_eq!(s.ready(1), (0, 2));
    }

    #[test]
    fn trace_lws_partition_holds_groups_back() {
        let mut r = rollout(6, 1, 0);
        r.partition = 4;
        let mut s = Sim::new(r);
        assert_eq!(s.settle(), (4, 6), "at rest the partition stays 4");
        assert_eq!(s.update(), (5, 6));
        assert_eq!(s.ready(5), (4, 6));
        assert_eq!(s.ready(4), (4, 6));
        s.r.partition = 2;
        assert_eq!(s.settle(), (3, 6));
        assert_eq!(s.ready(3), (2, 6));
    }

    #[test]
    fn trace_partition_with_surge_keeps_the_surge_until_partition_zero() {
        let mut r = rollout(3, 1, 1);
        r.partition = 2;
        let mut s = Sim::new(r);
        assert_eq!(s.update(), (2, 4));
        assert_eq!(s.ready(3), (2, 4));
        assert_eq!(s.ready(2), (2, 4), "surge group 3 stays");
        s.r.partition = 0;
        s.settle();
        s.ready(1);
        assert_eq!(s.ready(0), (0, 3));
    }

    fn g(index: i32, ready: bool, updated: bool) -> GroupStatus {
        GroupStatus {
            index,
            ready,
            updated,
        }
    }

    #[test]
    fn status_branches() {
        let r = rollout(2, 1, 1);
        assert_eq!(
            status_of(&[g(0, true, true), g(1, true, true)], &r),
            (2, 2, Assert::Available)
        );
        assert_eq!(
            status_of(&[g(0, false, true), g(1, true, true)], &r),
            (1, 2, Assert::Progressing)
        );
        assert_eq!(
            status_of(
                &[g(0, true, false), g(1, true, true), g(2, false, true)],
                &r
            ),
            (2, 2, Assert::Updating)
        );
        // Groups below the LWS partition need not be updated to be Available.
        let mut rp = rollout(2, 1, 0);
        rp.partition = 1;
        assert_eq!(
            status_of(&[g(0, true, false), g(1, true, true)], &rp).2,
            Assert::Available
        );
    }

    #[test]
    fn conditions_flip_their_partners_but_keep_their_text() {
        let t0 = Time(chrono::Utc::now());
        let (c, first) = set_conditions(&[], Assert::Progressing, 1, &t0);
        assert_eq!(first, Some(PROGRESSING));
        assert_eq!(c.len(), 1);
        let (c, first) = set_conditions(&c, Assert::Available, 1, &t0);
        assert_eq!(first, Some(AVAILABLE));
        let p = c.iter().find(|c| c.type_ == PROGRESSING).unwrap();
        assert_eq!(p.status, "False");
        assert_eq!(p.message, "Replicas are progressing");
        let (c, first) = set_conditions(&c, Assert::Updating, 2, &t0);
        assert_eq!(
            first,
            Some(UPDATE_IN_PROGRESS),
            "the update's reason leads the event"
        );
        let a = c.iter().find(|c| c.type_ == AVAILABLE).unwrap();
        assert_eq!(
            (a.status.as_str(), a.message.as_str()),
            ("False", "All replicas are ready")
        );
        assert!(c.iter().all(|c| c.observed_generation == Some(2)));
        let (same, first) = set_conditions(&c, Assert::Updating, 2, &t0);
        assert_eq!(first, None);
        assert_eq!(same, c);
    }

    #[test]
    fn revision_ignores_replicas_and_rollout_but_not_templates() {
        let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}}}))
        .unwrap();
        let base = revision_hash(&revision_payload(&lws));
        let mut other = lws.clone();
        other.spec.replicas = Some(5);
        other.spec.startup_policy = Some("LeaderReady".into());
        assert_eq!(revision_hash(&revision_payload(&other)), base);
        other.spec.network_config = Some(NetworkConfig {
            subdomain_policy: Some("Shared".into()),
        });
        assert_eq!(
            revision_hash(&revision_payload(&other)),
            base,
            "nil networkConfig is Shared"
        );
        other.spec.leader_worker_template.size = Some(4);
        assert_ne!(revision_hash(&revision_payload(&other)), base);
        let (lwt, nc) = from_revision(&revision_payload(&other)).unwrap();
        assert_eq!(lwt.size, Some(4));
        assert_eq!(nc.subdomain_policy.as_deref(), Some("Shared"));
    }

    #[test]
    fn leader_set_shape() {
        let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "ns", "uid": "u",
                "labels": {"team": "a"}, "annotations": {EXCLUSIVE_TOPOLOGY: "zone", GROUP_RESTARTS: "{}"}},
            "spec": {"replicas": 2, "networkConfig": {"subdomainPolicy": "UniquePerReplica"},
                "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 1}},
                "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}}}}))
        .unwrap();
        let s = leader_statefulset(&lws, "k1", 1, 3);
        assert_eq!(
            s["metadata"]["labels"],
            json!({"team": "a", NAME: "d", REVISION_KEY: "k1"})
        );
        assert_eq!(s["metadata"]["annotations"][REPLICAS], "2");
        assert!(s["metadata"]["annotations"].get(GROUP_RESTARTS).is_none());
        assert_eq!(s["spec"]["serviceName"], "d");
        assert_eq!(s["spec"]["podManagementPolicy"], "Parallel");
        assert_eq!(
            s["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"partition": 1, "maxUnavailable": 3})
        );
        assert_eq!(
            s["spec"]["selector"]["matchLabels"],
            json!({NAME: "d", WORKER_INDEX: "0"})
        );
        let t = &s["spec"]["template"]["metadata"];
        assert_eq!(t["labels"]["app"], "x");
        assert_eq!(t["labels"][WORKER_INDEX], "0");
        assert_eq!(t["annotations"][SIZE], "3");
        assert_eq!(t["annotations"][EXCLUSIVE_TOPOLOGY], "zone");
        assert_eq!(t["annotations"][SUBDOMAIN_POLICY], "UniquePerReplica");
        assert_eq!(
            s["metadata"]["ownerReferences"][0]["kind"],
            "LeaderWorkerSet"
        );
    }

    #[test]
    fn event_notes() {
        assert_eq!(updating_note(4, 3).as_deref(), Some("Updating replica 3"));
        assert_eq!(
            updating_note(4, 2).as_deref(),
            Some("Updating replicas 2 to 3 (inclusive)")
        );
        assert_eq!(updating_note(2, 2), None);
        assert_eq!(
            surge_note("d", 5, 4, 4).as_deref(),
            Some("deleting surge replica d-4")
        );
        assert_eq!(
            surge_note("d", 6, 4, 4).as_deref(),
            Some("deleting surge replicas from d-4 to d-5")
        );
    }
}
