//! The LeaderWorkerSet controller (upstream's "LWS reconciler"): the leader
//! StatefulSet, the shared headless Service, ControllerRevisions, the
//! rolling-update arithmetic and the status. Its partner `group.rs` builds
//! each group's worker StatefulSet and handles restart policies; the pure
//! core is in `rollout.rs`.
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
//! Pure core: [`Rollout`], [`partition_and_replicas`] (upstream's
//! rolling-update rule, checked against worked traces),
//! [`status_of`] and [`set_conditions`], [`revision_payload`],
//! [`leader_statefulset`]. `reconcile` is the shell.

pub mod group;
mod group_hash;
pub mod hash;
pub mod podgroup;
pub mod restarts;
mod rollout;
#[cfg(test)]
mod tests;

pub use rollout::*;

use crate::ns_of;
use crate::ownership::{controller_of, is_ready};
use crate::workload_metrics::WorkloadMetrics;
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::scheduling::v1beta1::{PodGroup as WorkloadPodGroup, Workload};
use minik8s_api::hash::revision_hash;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::lws_pod::*;
use minik8s_api::podgroup::PodGroup;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::Event;
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How soon a reconcile that wrote against a stale cached leader set looks again.
const STALE_RETRY: Duration = Duration::from_millis(100);

/// What [`LwsController::apply_leader_sts`] did.
#[derive(Debug, PartialEq, Eq)]
enum Applied {
    Unchanged,
    Written,
    /// The write conflicted: the cached leader set was out of date.
    Stale,
}

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct LwsController {
    /// Where its workload metrics are counted (the controller manager's).
    metrics: WorkloadMetrics,
    client: Client,
    recorder: Recorder,
    sets: Cache<LeaderWorkerSet>,
    statefulsets: Cache<StatefulSet>,
    /// The leaders of Hash LWSes.
    deployments: Cache<Deployment>,
    pods: Cache<Pod>,
    services: Cache<Service>,
    revisions: Cache<ControllerRevision>,
    pod_groups: Cache<PodGroup>,
    /// The Workload API's PodGroups and Workloads (`spec.scheduling`).
    workload_groups: Cache<WorkloadPodGroup>,
    workloads: Cache<Workload>,
}

/// Whether group `idx` of `lws` is ready and updated, from the caches.
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
    let spec_replicas = workers.spec.replicas.unwrap_or(1);
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
        metrics: WorkloadMetrics,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(LwsController {
            metrics,
            recorder: Recorder::new(client.clone(), "lws-controller"),
            client,
            sets: informers.cache(),
            statefulsets: informers.cache(),
            deployments: informers.cache(),
            pods: informers.cache(),
            services: informers.cache(),
            revisions: informers.cache(),
            pod_groups: informers.cache(),
            workload_groups: informers.cache(),
            workloads: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<LeaderWorkerSet>(informers)?
            .watches::<StatefulSet, _>(informers, |_, ev| labelled(&ev.object().metadata))?
            .watches::<Deployment, _>(informers, |_, ev| labelled(&ev.object().metadata))?
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
            })?
            .watches::<Workload, _>(informers, |_, ev| match ev {
                Event::Deleted(w) => labelled(&w.metadata),
                _ => Vec::new(),
            })
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
        let number = existing
            .iter()
            .filter_map(|r| r.revision)
            .max()
            .unwrap_or(0)
            + 1;
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

    /// Replaces the leader set's (or Hash leader Deployment's) spec, labels
    /// and annotations when they differ from `desired`.
    async fn apply_leader(
        &self,
        api: &minik8s_client::DynamicApi,
        existing: &Value,
        desired: &Value,
    ) -> Result<Applied, ClientError> {
        let hash = revision_hash(desired);
        const APPLIED: &str = "minik8s.io/applied-hash";
        if existing["metadata"]["annotations"][APPLIED].as_str() == Some(hash.as_str()) {
            return Ok(Applied::Unchanged);
        }
        let mut obj = existing.clone();
        obj["metadata"]["labels"] = desired["metadata"]["labels"].clone();
        obj["metadata"]["annotations"] = desired["metadata"]["annotations"].clone();
        obj["metadata"]["annotations"][APPLIED] = json!(hash);
        obj["spec"] = desired["spec"].clone();
        obj.as_object_mut().map(|m| m.remove("status"));
        let name = existing["metadata"]["name"].as_str().unwrap_or_default();
        match api.replace(name, &obj).await {
            Ok(_) => Ok(Applied::Written),
            // Our cached copy is behind (the StatefulSet controller wrote):
            // the reconcile looks again once the watch has caught up.
            Err(e) if e.is_conflict() => Ok(Applied::Stale),
            Err(e) => Err(e),
        }
    }

    /// Creates the LWS's own PodGroup, or sets its gang size when the LWS
    /// was scaled (a Workload API or a Volcano PodGroup).
    async fn sync_lws_pod_group(
        &self,
        lws: &LeaderWorkerSet,
        pg: &Value,
    ) -> Result<(), ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = pg["metadata"]["name"].as_str().unwrap_or_default();
        let key = format!("{ns}/{name}");
        let (existing, info) = match pg["apiVersion"] == podgroup::WORKLOAD_API_VERSION {
            true => (
                self.workload_groups
                    .get(&key)
                    .and_then(|g| serde_json::to_value(&*g).ok()),
                registry::of::<WorkloadPodGroup>(),
            ),
            false => (
                self.pod_groups
                    .get(&key)
                    .and_then(|g| serde_json::to_value(&*g).ok()),
                registry::of::<PodGroup>(),
            ),
        };
        let api = self.client.dynamic(info, Some(&ns));
        let want = podgroup::pod_group_min(pg).unwrap_or(1);
        match existing {
            None => match api.create(pg).await {
                Err(e) if e.api().is_none_or(|a| a.code != 409) => Err(e),
                _ => Ok(()),
            },
            Some(existing) if podgroup::pod_group_min(&existing) != Some(want) => {
                let patch = podgroup::pod_group_min_patch(pg, want);
                api.patch(name, None, content::MERGE_PATCH, &patch)
                    .await
                    .map(|_| ())
            }
            Some(_) => Ok(()),
        }
    }

    /// The LWS's Workload (`spec.scheduling`): created, its gang size kept
    /// current; replaced when its template changes name (the gang's scope
    /// changed), as templates may not be added or removed.
    async fn sync_workload(
        &self,
        lws: &LeaderWorkerSet,
        desired: &Value,
    ) -> Result<(), ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let api = self.client.dynamic(registry::of::<Workload>(), Some(&ns));
        let Some(existing) = self.workloads.get(&format!("{ns}/{name}")) else {
            return match api.create(desired).await {
                Err(e) if e.api().is_none_or(|a| a.code != 409) => Err(e),
                _ => Ok(()),
            };
        };
        let templates =
            serde_json::to_value(&existing.spec.pod_group_templates).unwrap_or(Value::Null);
        let want = &desired["spec"]["podGroupTemplates"];
        if &templates == want {
            return Ok(());
        }
        if templates[0]["name"] != want[0]["name"] {
            match api.delete(&name, &DeleteParams::default()).await {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => return Ok(()), // Created again once the deletion is seen.
            }
        }
        let patch = json!({"spec": {"podGroupTemplates": want}});
        api.patch(&name, None, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }

    /// Recreates, with a fresh restart budget, the Failed groups below
    /// `replicas`, and forgets the history of the groups scaled away.
    async fn replace_failed_groups(
        &self,
        lws: &LeaderWorkerSet,
        replicas: i32,
    ) -> Result<(), ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let mut leaders = Vec::new();
        let mut scaled_away = Vec::new();
        for (idx, h) in group::history_of(lws) {
            let Ok(i) = idx.parse::<i32>() else { continue };
            if i >= replicas {
                scaled_away.push(idx);
                continue;
            }
            if !h.limited {
                continue;
            }
            if let Some(leader) = self.pods.get(&format!("{ns}/{name}-{i}")) {
                let note = format!("Scale-down: failed group {i} recreated with a fresh restart budget; groups from {replicas} up are removed");
                leaders.push((leader, note));
            }
        }
        if leaders.is_empty() && scaled_away.is_empty() {
            return Ok(());
        }
        group::recreate_with_fresh_budget(
            &self.client,
            &self.recorder,
            lws,
            &leaders,
            &scaled_away,
            "GroupReplaced",
        )
        .await
    }

    /// The shared headless Service unless each group has its own.
    async fn ensure_shared_service(&self, lws: &LeaderWorkerSet) -> Result<(), ClientError> {
        let (ns, name) = (
            ns_of(&lws.metadata),
            lws.metadata.name.clone().unwrap_or_default(),
        );
        if unique_per_replica(lws.spec.network_config.as_ref())
            || self.services.get(&format!("{ns}/{name}")).is_some()
        {
            return Ok(());
        }
        let svc = headless_service(&name, &ns, json!({NAME: name}), owner_ref(lws));
        self.create_service(lws, &svc).await
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
                self.recorder
                    .event(lws, EventType::Warning, "FailedCreate", &note)
                    .await;
                Err(e)
            }
        }
    }
}

/// A headless Service that publishes not-ready addresses.
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

    async fn trace_context(&self, key: &str) -> Option<String> {
        let lws = self.sets.get(key)?;
        let settled = crate::journey::lws_settled(&lws);
        crate::journey::context_unless(&self.client, &lws.metadata, settled).await
    }

    /// Converges one LeaderWorkerSet.
    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.metrics.timed(Self::NAME, self.sync(key)).await
    }
}

impl LwsController {
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        let Some(lws) = self.sets.get(key) else {
            if let Some((ns, name)) = key.split_once('/') {
                self.metrics.lws_gone(ns, name);
            }
            return Ok(Action::Done);
        };
        if lws.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        // The leaders: a StatefulSet (Ordinal) or a Deployment (Hash).
        let hash = lws.spec.is_hash();
        let sts = self.statefulsets.get(key).filter(|_| !hash);
        let deployment = self.deployments.get(key).filter(|_| hash);
        let leaders = sts
            .as_ref()
            .map(|s| &s.metadata)
            .or(deployment.as_ref().map(|d| &d.metadata));
        if leaders.is_some_and(|m| m.deletion_timestamp.is_some()) {
            // The old leader set is still going: look again shortly.
            return Ok(Action::RequeueAfter(Duration::from_secs(5)));
        }
        let revisions = self.owned_revisions(&lws);
        let sts_key = leaders.and_then(|m| m.labels.as_ref()?.get(REVISION_KEY).cloned());
        let rev_key = self
            .ensure_revision(&lws, &revisions, sts_key.as_deref(), leaders.is_some())
            .await?;
        let new_revision = sts_key.as_deref().is_some_and(|k| k != rev_key);
        if hash {
            return self
                .sync_hash(&lws, deployment, &rev_key, &revisions, new_revision)
                .await;
        }

        // Leader StatefulSet.
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
        let again = self
            .sync_leader_set(
                &lws,
                sts.as_deref(),
                &rev_key,
                new_revision,
                &rollout,
                &group,
            )
            .await?;

        // The Workload API (spec.scheduling): the Workload, and the gang of
        // the whole LWS at its LWS level.
        if let Some(w) = podgroup::workload(&lws) {
            self.sync_workload(&lws, &w).await?;
        }
        if let Some(pg) = podgroup::lws_pod_group(&lws) {
            self.sync_lws_pod_group(&lws, &pg).await?;
        }

        self.ensure_shared_service(&lws).await?;
        let sts_replicas = sts
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .map(|s| s.replicas)
            .unwrap_or(0);
        if !self
            .write_status(&lws, sts_replicas, &rollout, size, &group)
            .await?
        {
            return Ok(Action::Done);
        }

        // Prune revisions once the rollout is over.
        let done = rollout.partition == 0
            && (0..rollout.replicas).all(|i| {
                group(i)
                    == Group {
                        ready: true,
                        updated: true,
                    }
            });
        if done && !new_revision {
            self.prune_revisions(&ns, &revisions, &rev_key).await?;
        }
        Ok(again)
    }

    /// The revision key the LWS's groups should run: its template's, after
    /// recording a ControllerRevision for it (or the leader set's own key,
    /// adopted without a rollout, when no revision exists at all).
    async fn ensure_revision(
        &self,
        lws: &Arc<LeaderWorkerSet>,
        revisions: &[Arc<ControllerRevision>],
        sts_key: Option<&str>,
        has_leaders: bool,
    ) -> Result<String, ClientError> {
        let payload = revision_payload(lws);
        let rev_key = revision_hash(&payload);
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
        if let Some(old) = sts_key.filter(|k| !has_rev(k) && revisions.is_empty()) {
            // A leader set without any revision: adopt its key, do not roll.
            self.create_revision(lws, revisions, old, &payload).await?;
            let note =
                format!("Creating missing revision with key {old} for existing LeaderWorkerSet");
            self.recorder
                .event(&**lws, EventType::Normal, "CreatingRevision", &note)
                .await;
            return Ok(old.to_string());
        }
        if !has_rev(&rev_key) {
            self.create_revision(lws, revisions, &rev_key, &payload)
                .await?;
            let why = if has_leaders {
                "for updated LWS"
            } else {
                "for a newly created LeaderWorkerSet"
            };
            let note = format!("Creating revision with key {rev_key} {why}");
            self.recorder
                .event(&**lws, EventType::Normal, "CreatingRevision", &note)
                .await;
        }
        Ok(rev_key)
    }

    /// Creates or updates the leader StatefulSet toward the rollout's
    /// partition and replicas (a scale-down first replaces failed groups
    /// whose index survives), with the events of its progress.
    async fn sync_leader_set(
        &self,
        lws: &Arc<LeaderWorkerSet>,
        sts: Option<&StatefulSet>,
        rev_key: &str,
        new_revision: bool,
        rollout: &Rollout,
        group: &(dyn Fn(i32) -> Group + Sync),
    ) -> Result<Action, ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let mut again = Action::Done;
        let current = sts.map(|s| {
            let spec = s.spec.clone();
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
        // A scale-down takes failed groups out first: those whose index
        // survives are recreated with a fresh budget (StatefulSet ordinals
        // cannot leave a hole where a failed group was).
        if current
            .as_ref()
            .and_then(|c| c.applied_replicas)
            .is_some_and(|before| before > rollout.replicas)
        {
            self.replace_failed_groups(lws, rollout.replicas).await?;
        }
        let (partition, replicas) =
            partition_and_replicas(rollout, current.as_ref(), new_revision, group);
        let desired = leader_statefulset(lws, rev_key, partition, replicas);
        let sts_api = self
            .client
            .dynamic(registry::of::<StatefulSet>(), Some(&ns));
        match sts {
            None => match sts_api.create(&desired).await {
                Ok(_) => {
                    let note = format!("Created leader statefulset {name}");
                    self.recorder
                        .event(&**lws, EventType::Normal, "GroupsProgressing", &note)
                        .await;
                }
                Err(e) if e.api().is_some_and(|a| a.code == 409) => {}
                Err(e) => {
                    let note = format!("Failed to create leader statefulset {name}: {e}");
                    self.recorder
                        .event(&**lws, EventType::Warning, "FailedCreate", &note)
                        .await;
                    return Err(e);
                }
            },
            Some(existing) => {
                let existing = serde_json::to_value(existing)
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                let applied = self.apply_leader(&sts_api, &existing, &desired).await?;
                if applied == Applied::Stale {
                    again = Action::RequeueAfter(STALE_RETRY);
                }
                if applied == Applied::Written {
                    let cur = current.expect("exists");
                    if !new_revision {
                        if let Some(note) = updating_note(cur.partition, partition) {
                            self.recorder
                                .event(&**lws, EventType::Normal, "GroupsUpdating", &note)
                                .await;
                        }
                    }
                    let surge = surge_note(&name, cur.replicas, replicas, rollout.replicas)
                        .filter(|_| cur.applied_replicas == Some(rollout.replicas));
                    if let Some(note) = surge {
                        self.recorder
                            .event(&**lws, EventType::Normal, "GroupsProgressing", &note)
                            .await;
                    }
                }
            }
        }
        Ok(again)
    }

    /// Writes the status from the groups (a Failed group never counts as
    /// ready) when it changed, with an event for each group and condition
    /// that changed. False when the LWS is gone.
    async fn write_status(
        &self,
        lws: &Arc<LeaderWorkerSet>,
        sts_replicas: i32,
        rollout: &Rollout,
        size: i32,
        group: &(dyn Fn(i32) -> Group + Sync),
    ) -> Result<bool, ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let groups = self.group_statuses(lws, size, group);
        // Per-group states; a Failed group never counts as ready.
        let history = group::history_of(lws);
        let readiness: Vec<(i32, bool)> = groups.iter().map(|g| (g.index, g.ready)).collect();
        let states = restarts::group_states(&readiness, &history, chrono::Utc::now().timestamp());
        let groups: Vec<GroupStatus> = groups
            .into_iter()
            .map(|mut g| {
                if states
                    .iter()
                    .any(|s| s.index == g.index && s.state == restarts::FAILED)
                {
                    g.ready = false;
                }
                g
            })
            .collect();
        let (ready, updated, assert) = status_of(&groups, rollout);
        let old_status = lws.status.clone().unwrap_or_default();
        let generation = lws.metadata.generation.unwrap_or(0);
        let now = minik8s_api::meta::time_now();
        let old_conditions = old_status.conditions.clone().unwrap_or_default();
        let (mut conditions, first_new) = set_conditions(&old_conditions, assert, generation, &now);
        let old_failed = old_conditions.iter().find(|c| c.type_ == restarts::FAILED);
        let failed = restarts::failed_condition(&states, old_failed, generation, &now);
        if let Some(f) = &failed {
            conditions.retain(|c| c.type_ != restarts::FAILED);
            conditions.push(f.clone());
        }
        let old_groups = old_status.group_statuses.clone().unwrap_or_default();
        let names: Vec<&str> = states.iter().map(|g| g.state.as_str()).collect();
        self.metrics
            .lws_status(&ns, &name, &names, rollout.replicas, updated, ready);
        let selector = format!("{NAME}={name},{WORKER_INDEX}=0");
        let changed = old_status.ready_replicas != ready
            || old_status.updated_replicas != updated
            || old_status.replicas != sts_replicas
            || old_status.hpa_pod_selector.as_deref() != Some(selector.as_str())
            || old_status.observed_generation != Some(generation)
            || first_new.is_some()
            || old_groups != states
            || failed.as_ref().map(|f| (&f.status, &f.message))
                != old_failed.map(|f| (&f.status, &f.message))
            || conditions.len() != old_conditions.len()
            || conditions
                .iter()
                .zip(&old_conditions)
                .any(|(a, b)| a.status != b.status);
        if changed {
            let status = json!({"status": {"readyReplicas": ready, "updatedReplicas": updated,
                "replicas": sts_replicas, "hpaPodSelector": selector, "observedGeneration": generation,
                "conditions": conditions, "groupStatuses": states}});
            let api = self
                .client
                .dynamic(registry::of::<LeaderWorkerSet>(), Some(&ns));
            if !api
                .patch_status(&name, content::MERGE_PATCH, &status)
                .await?
            {
                return Ok(false);
            }
            for (type_, reason, note) in restarts::transitions(&old_groups, &states) {
                self.recorder.event(&**lws, type_, reason, &note).await;
            }
            if let Some(t) = first_new {
                let (reason, message) = condition_text(t);
                let note = format!(
                    "{message}, with {ready} groups ready of total {} groups",
                    rollout.replicas
                );
                self.recorder
                    .event(&**lws, EventType::Normal, reason, &note)
                    .await;
            }
        }

        Ok(true)
    }

    /// Each group whose leader exists (and, for groups of more than one,
    /// whose worker set exists): its index, readiness and revision.
    fn group_statuses(
        &self,
        lws: &LeaderWorkerSet,
        size: i32,
        group: &(dyn Fn(i32) -> Group + Sync),
    ) -> Vec<GroupStatus> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        self.pods
            .by_index(NAMESPACE_INDEX, &ns)
            .iter()
            .filter(|p| {
                let l = p.metadata.labels.clone().unwrap_or_default();
                l.get(NAME) == Some(&name) && l.get(WORKER_INDEX).map(String::as_str) == Some("0")
            })
            .filter_map(|p| {
                let idx: i32 = p.metadata.labels.as_ref()?.get(GROUP_INDEX)?.parse().ok()?;
                let set = format!("{ns}/{name}-{idx}");
                if size > 1 && self.statefulsets.get(&set).is_none() {
                    return None;
                }
                let g = group(idx);
                Some(GroupStatus {
                    index: idx,
                    ready: g.ready,
                    updated: g.updated,
                })
            })
            .collect()
    }

    /// Deletes the LWS's revisions other than `keep` (once a rollout is over).
    pub(super) async fn prune_revisions(
        &self,
        ns: &str,
        revisions: &[Arc<ControllerRevision>],
        keep: &str,
    ) -> Result<(), ClientError> {
        let api = self
            .client
            .dynamic(registry::of::<ControllerRevision>(), Some(ns));
        for r in revisions {
            let k = r.metadata.labels.as_ref().and_then(|l| l.get(REVISION_KEY));
            if k.map(String::as_str) != Some(keep) {
                let n = r.metadata.name.clone().unwrap_or_default();
                match api.delete(&n, &DeleteParams::default()).await {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
