//! The DisaggregatedSet controller (upstream kubernetes-sigs/lws'
//! `pkg/controllers/disaggregatedset`): a set's roles become LeaderWorkerSets,
//! one per (slice, revision, role); a template change rolls every role in
//! lockstep by moving replicas from the old LWS to new ones; each slice gets
//! headless `-prv` Services once all its roles serve; External roles get a
//! DisaggregatedSetRoleScaler for an autoscaler to drive.
//!
//! ```text
//!   reconcile(ns/D)
//!     ├─ LWS and Services of removed slices ──▶ delete
//!     ├─ scalers: create for External roles, delete for the others
//!     ├─ per slice: rollout::plan_slice ──▶ create / scale / delete LWS
//!     │             rollout::plan_services ──▶ create / delete -prv Services
//!     ├─ scalers' status (replicas, selector)
//!     └─ status: roleStatuses, Available | Progressing
//! ```
//!
//! Pure cores: `planner.rs`, `rollout.rs`, `children.rs`.
//! This file is the I/O shell. Upstream's v0.9 legacy names
//! (`D-r-R` without a slice) are never made by minik8s, so nothing here
//! migrates them.

pub mod children;
pub mod planner;
pub mod rollout;

use crate::ns_of;
use crate::ownership::controller_of;
use crate::workload_metrics::WorkloadMetrics;
use children::{child_lws, child_scaler, child_service};
use k8s_openapi::api::core::v1::Service;
use minik8s_api::disaggregatedset::*;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use rollout::{plan_services, plan_slice, Op, RoleView};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One LWS of a set, as the pure cores see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Child {
    pub name: String,
    pub role: String,
    pub revision: String,
    pub slice: i32,
    /// `spec.replicas` (unset counts as 1).
    pub replicas: i64,
    /// The `initial-replicas` annotation of an old LWS during a rollout.
    pub initial: Option<i64>,
    pub ready: i64,
    pub status_replicas: i64,
    pub updated: i64,
    /// Creation time (Unix seconds), to drain the newest old revision first.
    pub created: i64,
}

impl Child {
    pub fn of(lws: &LeaderWorkerSet) -> Child {
        let labels = lws.metadata.labels.clone().unwrap_or_default();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let status = lws.status.clone().unwrap_or_default();
        Child {
            name: lws.metadata.name.clone().unwrap_or_default(),
            role: label(ROLE_LABEL),
            revision: label(REVISION_LABEL),
            slice: label(SLICE_LABEL).parse().unwrap_or(0),
            replicas: lws.spec.replicas.map_or(1, i64::from),
            initial: lws
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INITIAL_REPLICAS))
                .and_then(|v| v.parse().ok()),
            ready: status.ready_replicas.into(),
            status_replicas: status.replicas.into(),
            updated: status.updated_replicas.into(),
            created: lws
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_second()),
        }
    }
}

/// What a write to an LWS will look like once the informer shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Replicas(i64),
    Exists,
    Gone,
}

/// An LWS write not yet seen: the LWS, what it will show, when it was made.
type Expected = (String, Expect, std::time::Instant);

/// How long an unobserved write holds a set back.
const EXPECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How soon a set waiting for its writes to show looks again.
const EXPECT_RECHECK: Duration = Duration::from_millis(200);

pub struct DisaggregatedSetController {
    /// Where its workload metrics are counted (the controller manager's).
    metrics: WorkloadMetrics,
    client: Client,
    recorder: Recorder,
    sets: Cache<DisaggregatedSet>,
    lws: Cache<LeaderWorkerSet>,
    scalers: Cache<DisaggregatedSetRoleScaler>,
    services: Cache<Service>,
    /// Per set: LWS writes not yet seen in the cache. Until they are, the
    /// set is not planned again, so a stale cache never repeats a step.
    expected: std::sync::Mutex<BTreeMap<String, Vec<Expected>>>,
}

impl DisaggregatedSetController {
    /// A set wakes for its own changes and for its LWS and scalers (a
    /// `/scale` write to a scaler reaches the LWS this way).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        metrics: WorkloadMetrics,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(DisaggregatedSetController {
            metrics,
            recorder: Recorder::new(client.clone(), "disaggregatedset-controller"),
            client,
            sets: informers.cache(),
            lws: informers.cache(),
            scalers: informers.cache(),
            services: informers.cache(),
            expected: Default::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<DisaggregatedSet>(informers)?
            .owns::<LeaderWorkerSet>(informers, KIND)?
            .owns::<DisaggregatedSetRoleScaler>(informers, KIND)
    }

    fn expect(&self, ds: &DisaggregatedSet, lws: &str, what: Expect) {
        let key = format!(
            "{}/{}",
            ns_of(&ds.metadata),
            ds.metadata.name.as_deref().unwrap_or("")
        );
        crate::lock(&self.expected).entry(key).or_default().push((
            lws.to_string(),
            what,
            std::time::Instant::now(),
        ));
    }

    /// Whether every write made for the set `key` shows in the cache (or expired).
    fn settled(&self, key: &str) -> bool {
        let ns = key.split_once('/').map_or("default", |(ns, _)| ns);
        let mut all = crate::lock(&self.expected);
        let Some(list) = all.get_mut(key) else {
            return true;
        };
        list.retain(|(name, what, at)| {
            let seen = self.lws.get(&format!("{ns}/{name}"));
            let shows = match what {
                Expect::Exists => seen.is_some(),
                Expect::Gone => seen.is_none_or(|l| l.metadata.deletion_timestamp.is_some()),
                Expect::Replicas(n) => {
                    seen.is_none_or(|l| l.spec.replicas.map_or(1, i64::from) == *n)
                }
            };
            !shows && at.elapsed() < EXPECT_TIMEOUT
        });
        let settled = list.is_empty();
        if settled {
            all.remove(key);
        }
        settled
    }

    fn api<K: k8s_openapi::Resource>(&self, ds: &DisaggregatedSet) -> minik8s_client::DynamicApi {
        self.client
            .dynamic(registry::of::<K>(), Some(&ns_of(&ds.metadata)))
    }

    /// The set's live LWS (labelled with its name and controlled by it).
    fn children(&self, ds: &DisaggregatedSet) -> Vec<Child> {
        let name = ds.metadata.name.as_deref().unwrap_or("");
        self.lws
            .by_index(NAMESPACE_INDEX, &ns_of(&ds.metadata))
            .into_iter()
            .filter(|l| owned(&l.metadata, ds) && label(&l.metadata, NAME_LABEL) == Some(name))
            .filter(|l| l.metadata.deletion_timestamp.is_none())
            .map(|l| Child::of(&l))
            .collect()
    }

    async fn delete(
        &self,
        api: &minik8s_client::DynamicApi,
        name: &str,
    ) -> Result<(), ClientError> {
        match api.delete(name, &DeleteParams::default()).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Applies one slice's plan.
    async fn apply(
        &self,
        ds: &DisaggregatedSet,
        slice: i32,
        revision: &str,
        ops: Vec<Op>,
    ) -> Result<(), ClientError> {
        let api = self.api::<LeaderWorkerSet>(ds);
        let set_name = ds.metadata.name.clone().unwrap_or_default();
        for op in ops {
            match op {
                Op::Create { role, replicas } => {
                    let Some(spec) = ds.spec.roles.iter().find(|r| r.name == role) else {
                        continue;
                    };
                    let obj = child_lws(ds, spec, slice, revision, replicas);
                    let name = children::lws_name(&set_name, slice, revision, &role);
                    if let Some(other) = self.lws.get(&format!("{}/{name}", ns_of(&ds.metadata))) {
                        if !owned(&other.metadata, ds) {
                            let msg = format!("LeaderWorkerSet {name} exists but is not controlled by DisaggregatedSet {set_name}; refusing to adopt it");
                            return Err(ClientError::Decode(msg));
                        }
                        continue;
                    }
                    match api.create(&obj).await {
                        Err(e) if e.api().is_some_and(|a| a.code == 409) => {}
                        Err(e) => {
                            let note = format!("Failed to create LWS {name}: {e}");
                            self.recorder
                                .event(ds, EventType::Warning, "FailedCreate", &note)
                                .await;
                            return Err(e);
                        }
                        Ok(_) => self.expect(ds, &name, Expect::Exists),
                    }
                }
                Op::Scale { name, to, event } => {
                    let patch = json!({"spec": {"replicas": to}});
                    api.patch(&name, None, content::MERGE_PATCH, &patch).await?;
                    self.expect(ds, &name, Expect::Replicas(to));
                    if let Some((reason, note)) = event {
                        let ns = ns_of(&ds.metadata);
                        self.metrics.ds_step(&ns, &set_name, reason == "ScalingUp");
                        self.recorder
                            .event(ds, EventType::Normal, reason, &note)
                            .await;
                    }
                }
                Op::SetInitial { name, replicas } => {
                    let patch = json!({"metadata": {"annotations": {INITIAL_REPLICAS: replicas.to_string()}}});
                    api.patch(&name, None, content::MERGE_PATCH, &patch).await?;
                }
                Op::Delete { name, note } => {
                    self.delete(&api, &name).await?;
                    self.expect(ds, &name, Expect::Gone);
                    self.recorder
                        .event(ds, EventType::Normal, "LWSDeleted", &note)
                        .await;
                }
                Op::Event { reason, note } => {
                    self.recorder
                        .event(ds, EventType::Normal, reason, &note)
                        .await
                }
            }
        }
        Ok(())
    }

    /// For one slice.
    async fn sync_services(
        &self,
        ds: &DisaggregatedSet,
        slice: i32,
        revision: &str,
        children: &[Child],
    ) -> Result<(), ClientError> {
        let name = ds.metadata.name.clone().unwrap_or_default();
        let existing: Vec<(String, String)> = self
            .services
            .by_index(NAMESPACE_INDEX, &ns_of(&ds.metadata))
            .into_iter()
            .filter(|s| owned(&s.metadata, ds))
            .filter(|s| label(&s.metadata, SLICE_LABEL) == Some(&slice.to_string()))
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap_or_default(),
                    label(&s.metadata, REVISION_LABEL)
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        let roles: Vec<String> = ds.spec.roles.iter().map(|r| r.name.clone()).collect();
        let (create, delete) = plan_services(&name, slice, revision, &roles, children, &existing);
        let api = self.api::<Service>(ds);
        for role in create {
            match api.create(&child_service(ds, slice, revision, &role)).await {
                Err(e) if e.api().is_some_and(|a| a.code == 409) => {}
                other => {
                    other?;
                }
            }
        }
        for svc in delete {
            self.delete(&api, &svc).await?;
        }
        Ok(())
    }

    /// LWS and Services of slices ≥ `slices`.
    async fn remove_slices(
        &self,
        ds: &DisaggregatedSet,
        children: &[Child],
        slices: i32,
    ) -> Result<(), ClientError> {
        let api = self.api::<LeaderWorkerSet>(ds);
        for c in children.iter().filter(|c| c.slice >= slices) {
            self.delete(&api, &c.name).await?;
            let note = format!("Deleted LWS {} for removed slice {}", c.name, c.slice);
            self.recorder
                .event(ds, EventType::Normal, "LWSDeleted", &note)
                .await;
        }
        let api = self.api::<Service>(ds);
        let stale: Vec<String> = self
            .services
            .by_index(NAMESPACE_INDEX, &ns_of(&ds.metadata))
            .into_iter()
            .filter(|s| owned(&s.metadata, ds))
            .filter(|s| {
                label(&s.metadata, SLICE_LABEL)
                    .and_then(|v| v.parse::<i32>().ok())
                    .is_some_and(|v| v >= slices)
            })
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        for s in stale {
            self.delete(&api, &s).await?;
        }
        Ok(())
    }

    /// One scaler per External role; returns role → scaler replicas.
    async fn sync_scalers(
        &self,
        ds: &DisaggregatedSet,
        children: &[Child],
    ) -> Result<BTreeMap<String, i64>, ClientError> {
        let set_name = ds.metadata.name.clone().unwrap_or_default();
        let ns = ns_of(&ds.metadata);
        let api = self.api::<DisaggregatedSetRoleScaler>(ds);
        let mut out = BTreeMap::new();
        let all = self.scalers.by_index(NAMESPACE_INDEX, &ns);
        for s in all.iter().filter(|s| owned(&s.metadata, ds)) {
            let role = label(&s.metadata, ROLE_LABEL).unwrap_or_default();
            let external = ds
                .spec
                .roles
                .iter()
                .any(|r| r.name == role && r.is_external());
            let name = s.metadata.name.clone().unwrap_or_default();
            if external && name == scaler_name(&set_name, role) {
                if s.metadata.deletion_timestamp.is_none() {
                    out.insert(role.to_string(), i64::from(s.spec.replicas));
                }
            } else {
                self.delete(&api, &name).await?;
                let note = format!("Deleted scaler {name} (role {role} is no longer External)");
                self.recorder
                    .event(ds, EventType::Normal, "ScalerDeleted", &note)
                    .await;
            }
        }
        for role in ds.spec.roles.iter().filter(|r| r.is_external()) {
            if out.contains_key(&role.name) {
                continue;
            }
            let name = scaler_name(&set_name, &role.name);
            if all
                .iter()
                .any(|s| s.metadata.name.as_deref() == Some(&name))
            {
                let note = format!(
                    "Scaler {name} exists but is not controlled by this DisaggregatedSet; not adopting"
                );
                self.recorder
                    .event(ds, EventType::Warning, "ScalerConflict", &note)
                    .await;
                continue;
            }
            let seed = children::scaler_seed(children, &role.name);
            match api.create(&child_scaler(ds, &role.name, seed)).await {
                Err(e) if e.api().is_some_and(|a| a.code == 409) => continue,
                other => {
                    other?;
                }
            }
            let note = format!("Created scaler {name} for role {}", role.name);
            self.recorder
                .event(ds, EventType::Normal, "ScalerCreated", &note)
                .await;
            out.insert(role.name.clone(), seed);
        }
        Ok(out)
    }

    /// Each owned scaler's status: the role's groups and its selector.
    async fn scaler_status(
        &self,
        ds: &DisaggregatedSet,
        children: &[Child],
    ) -> Result<(), ClientError> {
        let set_name = ds.metadata.name.clone().unwrap_or_default();
        let api = self.api::<DisaggregatedSetRoleScaler>(ds);
        for s in self
            .scalers
            .by_index(NAMESPACE_INDEX, &ns_of(&ds.metadata))
            .into_iter()
            .filter(|s| owned(&s.metadata, ds) && s.metadata.deletion_timestamp.is_none())
        {
            let role = label(&s.metadata, ROLE_LABEL).unwrap_or_default();
            let replicas: i64 = children
                .iter()
                .filter(|c| c.role == role)
                .map(|c| c.status_replicas)
                .sum();
            let selector = scaler_selector(&set_name, role);
            let old = s.status.clone().unwrap_or_default();
            let bound = old
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            if i64::from(old.replicas) == replicas
                && old.selector.as_deref() == Some(&selector)
                && old.observed_generation == s.metadata.generation
                && bound
            {
                continue;
            }
            let now = minik8s_api::meta::time_now();
            let patch = json!({"status": {"replicas": replicas, "selector": selector,
                "observedGeneration": s.metadata.generation,
                "conditions": [{"type": "Ready", "status": "True", "reason": "Bound",
                    "message": "Scaler bound to a live DisaggregatedSet role",
                    "lastTransitionTime": old.conditions.iter().find(|c| c.type_ == "Ready")
                        .map_or(now.clone(), |c| c.last_transition_time.clone())}]}});
            let name = s.metadata.name.clone().unwrap_or_default();
            api.patch_status(&name, content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(())
    }

    /// RoleStatuses and Available | Progressing, written when changed.
    async fn write_status(
        &self,
        ds: &DisaggregatedSet,
        revision: &str,
        scalers: &BTreeMap<String, i64>,
    ) -> Result<(), ClientError> {
        // After this reconcile's writes the cache may lag; the LWS events
        // that follow bring the set back here with fresh numbers.
        let children = self.children(ds);
        let statuses = children::role_statuses(ds, &children, revision);
        let targets: BTreeMap<String, i64> = ds
            .spec
            .roles
            .iter()
            .map(|r| {
                let current_new = children
                    .iter()
                    .find(|c| c.slice == 0 && c.revision == revision && c.role == r.name)
                    .map_or(0, |c| c.replicas);
                let scaler = scalers.get(&r.name).copied();
                (r.name.clone(), children::target(r, scaler, current_new))
            })
            .collect();
        let available = children::available(ds, &statuses, &targets, scalers);
        let slices = i64::from(ds.slices());
        let per_role: Vec<(String, [i64; 4])> = statuses
            .iter()
            .map(|s| {
                let target = targets.get(&s.name).copied().unwrap_or(0) * slices;
                let v = [s.replicas, s.ready_replicas, s.updated_replicas].map(i64::from);
                (s.name.clone(), [v[0], v[1], v[2], target])
            })
            .collect();
        let rolling = children.iter().any(|c| c.revision != revision);
        let (ns, name) = (
            ns_of(&ds.metadata),
            ds.metadata.name.clone().unwrap_or_default(),
        );
        self.metrics.ds_status(&ns, &name, &per_role, rolling);
        let old = ds.status.clone().unwrap_or_default();
        let generation = ds.metadata.generation.unwrap_or(0);
        let now = minik8s_api::meta::time_now();
        let conditions = children::set_conditions(&old.conditions, available, generation, &now);
        let status = DisaggregatedSetStatus {
            observed_generation: Some(generation),
            role_statuses: statuses,
            conditions,
        };
        if status == old {
            return Ok(());
        }
        let api = self.api::<DisaggregatedSet>(ds);
        let name = ds.metadata.name.clone().unwrap_or_default();
        let patch = json!({"status": status});
        api.patch_status(&name, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }
}

fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether `meta` is controlled by this very set (same UID).
fn owned(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ds: &DisaggregatedSet,
) -> bool {
    controller_of(meta).map(|o| o.0) == ds.metadata.uid
}

impl Reconciler for DisaggregatedSetController {
    const NAME: &'static str = "disaggregatedset";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let ds = self.sets.get(key)?;
        let settled = crate::journey::disaggregatedset_settled(&ds);
        crate::journey::context_unless(&self.client, &ds.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.metrics.timed(Self::NAME, self.sync(key)).await
    }
}

impl DisaggregatedSetController {
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        let Some(ds) = self.sets.get(key) else {
            return Ok(Action::Done);
        };
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        if !self.settled(key) {
            return Ok(Action::RequeueAfter(EXPECT_RECHECK));
        }
        let revision = revision(&ds.spec);
        let slices = ds.slices();
        let children = self.children(&ds);
        self.remove_slices(&ds, &children, slices).await?;
        let scalers = self.sync_scalers(&ds, &children).await?;
        let roles: Vec<RoleView> = ds
            .spec
            .roles
            .iter()
            .map(|r| (r, scalers.get(&r.name).copied()))
            .collect();
        let mut requeue: Option<Duration> = None;
        let mut first_error = None;
        for slice in 0..slices {
            let mine: Vec<Child> = children
                .iter()
                .filter(|c| c.slice == slice)
                .cloned()
                .collect();
            let plan = plan_slice(&revision, &roles, &mine);
            if let Some(d) = plan.requeue {
                requeue = Some(requeue.map_or(d, |r| r.min(d)));
            }
            let result = match self.apply(&ds, slice, &revision, plan.ops).await {
                Ok(()) => self.sync_services(&ds, slice, &revision, &mine).await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                tracing::warn!(set = key, slice, error = %e, "disaggregatedset slice");
                first_error.get_or_insert(e);
            }
        }
        self.scaler_status(&ds, &children).await?;
        self.write_status(&ds, &revision, &scalers).await?;
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(requeue.map_or(Action::Done, Action::RequeueAfter))
    }
}
