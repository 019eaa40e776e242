//! The minik8s scheduler: assigns each pod without a node to one.
//!
//! ```text
//!  pods informer ──(unbound pod)──▶ queue ──▶ schedule_one(key)
//!  nodes informer ─(node changed)──▶ requeue the unschedulable      │
//!                                                                   ▼
//!            filters (filters.rs) → feasible nodes → round-robin pick
//!               │ none fits                           │
//!               ▼                                     ▼
//!   preemption (preemption.rs):               POST pods/{name}/binding + Scheduled event
//!   victims of lower priority deleted,
//!   status.nominatedNodeName set;
//!   PodScheduled=False + FailedScheduling
//! ```
//!
//! One worker schedules pods one at a time, highest priority first, so
//! round-robin order and resource accounting see every earlier decision: a
//! pod just bound is "assumed" on its node until the watch reports it, and a
//! pod nominated to a node keeps its room there from pods of lower priority.

mod claims;
mod dra;
pub mod filters;
pub mod framework;
mod gang;
pub mod metrics;
mod prebind;
mod preemption;
pub mod score;
pub mod spread;
#[cfg(test)]
mod testutil;
pub mod victims;
pub mod volumes;

use filters::{RoundRobin, Snapshot, Usage};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup as WorkloadPodGroup;
use k8s_openapi::api::storage::v1::StorageClass;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use minik8s_client::controller::{self, Action, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::{
    Api, Cache, Client, ClientError, Informer, ListParams, WorkQueue, TRACE_POD_START,
};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

/// This component's client-side rate limit by default (`--kube-api-qps`,
/// `--kube-api-burst`).
pub const API_RATE_LIMIT: (f32, u32) = (1000.0, 2000);

/// Pods that name another scheduler are left alone.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The services cache's index by namespace.
const NAMESPACE: &str = "namespace";

/// An unschedulable pod is retried at least this often even if nothing changes.
const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Config {
    pub scheduler_name: String,
    /// Also schedule pods asking for Volcano (`schedulerName: volcano`),
    /// gang-scheduling them by their PodGroups, as minik8s runs no Volcano.
    pub serve_volcano: bool,
    /// Where attempts and the loop are counted; the maker of the Config
    /// keeps a clone to render them.
    pub metrics: metrics::Metrics,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scheduler_name: DEFAULT_SCHEDULER.into(),
            serve_volcano: true,
            metrics: metrics::Metrics::default(),
        }
    }
}

/// What one scheduling attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Bound(String),
    Unschedulable(String),
    /// Gone, already bound, deleting, or not ours.
    Skipped,
}

pub struct Scheduler {
    client: Client,
    /// The pods' trace contexts, as the apiserver keeps them.
    contexts: minik8s_client::traces::Contexts,
    /// Scheduled, FailedScheduling, Preempted: from the scheduler's name.
    recorder: Recorder,
    config: Config,
    pods: Cache<Pod>,
    nodes: Cache<Node>,
    claims: Cache<PersistentVolumeClaim>,
    volumes: Cache<PersistentVolume>,
    classes: Cache<StorageClass>,
    pod_groups: Cache<minik8s_api::podgroup::PodGroup>,
    /// The Workload API's PodGroups (`scheduling.k8s.io/v1beta1`).
    workload_groups: Cache<WorkloadPodGroup>,
    budgets: Cache<PodDisruptionBudget>,
    /// What selects a pod, for the cluster-default spreading.
    services: Cache<Service>,
    replica_sets: Cache<ReplicaSet>,
    stateful_sets: Cache<StatefulSet>,
    controllers: Cache<ReplicationController>,
    queue: WorkQueue<String>,
    round_robin: Mutex<RoundRobin>,
    /// Placed pods and per-node usage, kept from pod events and our own bindings.
    ledger: Mutex<Ledger>,
    /// Pods bound by us that the watch has not yet shown bound.
    assumed: Mutex<HashSet<String>>,
    /// Sorted nodes, dropped whenever a node changes.
    node_list: Mutex<Option<NodeList>>,
    /// Bounds the bindings in flight.
    binding_slots: Arc<tokio::sync::Semaphore>,
    unschedulable: Mutex<HashSet<String>>,
    /// Pods waiting for room made by preemption, by key.
    nominated: Mutex<HashMap<String, preemption::Nomination>>,
    /// The victims each preemptor (a pod's or a gang's key) is waiting for.
    preempting: Mutex<HashMap<String, Vec<String>>>,
    resource_claims: Cache<ResourceClaim>,
    device_classes: Cache<DeviceClass>,
    resource_slices: Cache<ResourceSlice>,
    /// The device inventory and which devices are taken.
    devices: Mutex<claims::DeviceState>,
    /// Compiled device selectors and what they match.
    matches: Mutex<dra::MatchCache>,
}

/// What the binding cycle writes before binding a pod: its volumes' and
/// its resource claims' plans.
#[derive(Debug, Clone, Default)]
pub(crate) struct BindPlan {
    volumes: volumes::Plan,
    devices: claims::DevicePlan,
}

/// Which pods are on which node and what they request, kept incrementally so a
/// scheduling decision costs O(nodes), not O(pods) (the role of Kubernetes'
/// scheduler cache).
/// The nodes sorted by name, their names, and what each offers (parsed once).
#[derive(Clone)]
struct NodeList {
    nodes: Arc<Vec<Arc<Node>>>,
    names: Arc<Vec<String>>,
    allocatable: Arc<HashMap<String, filters::Allocatable>>,
    /// Position of each node in `nodes`, by name.
    index: Arc<HashMap<String, usize>>,
}

/// One pod on one node, with its requests (cpu millicores, memory bytes).
struct Placement {
    node: String,
    requests: filters::PodRequests,
    pod: Arc<Pod>,
}

#[derive(Default)]
struct Ledger {
    by_pod: HashMap<String, Placement>,
    usage: HashMap<String, Usage>,
    /// Placed pods with pod (anti-)affinity terms: their required
    /// anti-affinity constrains every later pod, and all their terms score.
    with_affinity: HashSet<String>,
    /// Placed pods by namespace (topology spread counts only its own).
    by_namespace: HashMap<String, HashSet<String>>,
}

/// Which placed pods a decision has to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs<'a> {
    /// The pod has pod (anti-)affinity terms, which may select any namespace.
    All,
    /// The pod spreads: its namespace's pods, and those with affinity terms.
    Namespace(&'a str),
    /// Only the pods with affinity terms (their rules apply to every pod).
    WithAffinity,
}

impl<'a> Needs<'a> {
    fn of(pod: &'a Pod, spreads: bool) -> Self {
        if filters::has_any_pod_affinity(pod) {
            Needs::All
        } else if spreads {
            Needs::Namespace(pod.metadata.namespace.as_deref().unwrap_or("default"))
        } else {
            Needs::WithAffinity
        }
    }
}

/// The namespace part of a `namespace/name` key.
fn key_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

impl Ledger {
    fn place(&mut self, key: &str, pod: Arc<Pod>, node: &str) {
        self.remove(key);
        let req = filters::pod_requests(&pod);
        self.usage.entry(node.to_string()).or_default().add(req, 1);
        if filters::has_any_pod_affinity(&pod) {
            self.with_affinity.insert(key.to_string());
        }
        self.by_namespace
            .entry(key_namespace(key).to_string())
            .or_default()
            .insert(key.to_string());
        self.by_pod.insert(
            key.to_string(),
            Placement {
                node: node.to_string(),
                requests: req,
                pod,
            },
        );
    }

    fn remove(&mut self, key: &str) {
        if let Some(p) = self.by_pod.remove(key) {
            if let Some(u) = self.usage.get_mut(&p.node) {
                u.add(p.requests, -1);
            }
        }
        self.with_affinity.remove(key);
        let ns = key_namespace(key);
        if let Some(keys) = self.by_namespace.get_mut(ns) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_namespace.remove(ns);
            }
        }
    }

    /// The placed pods a decision needs, with their nodes.
    fn placed(&self, needs: Needs) -> Vec<(Arc<Pod>, String)> {
        let pick = |p: &Placement| (p.pod.clone(), p.node.clone());
        let with_affinity = self.with_affinity.iter().filter_map(|k| self.by_pod.get(k));
        match needs {
            Needs::All => self.by_pod.values().map(pick).collect(),
            Needs::WithAffinity => with_affinity.map(pick).collect(),
            Needs::Namespace(ns) => {
                let own = self.by_namespace.get(ns);
                let others = self
                    .with_affinity
                    .iter()
                    .filter(|k| key_namespace(k) != ns)
                    .filter_map(|k| self.by_pod.get(k));
                own.into_iter()
                    .flatten()
                    .filter_map(|k| self.by_pod.get(k))
                    .chain(others)
                    .map(pick)
                    .collect()
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl Scheduler {
    /// Does this scheduler own the (unbound, live) pod?
    fn wants(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER);
        // A gated pod waits until whoever added its gates removes them.
        let gated = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        bound_node(pod).is_none()
            && !gated
            && pod.metadata.deletion_timestamp.is_none()
            && filters::is_active(pod)
            && (name == self.config.scheduler_name
                || (self.config.serve_volcano && name == minik8s_api::podgroup::VOLCANO_SCHEDULER))
    }

    /// Every unschedulable pod gets another try (the cluster changed).
    fn retry_unschedulable(&self) {
        for key in lock(&self.unschedulable).drain() {
            self.queue.add(key);
        }
    }

    fn on_pod(&self, ev: &Event<Pod>) {
        match ev {
            Event::Added(p) | Event::Updated { new: p, .. } => {
                let key = object_key(&p.metadata);
                self.note_nomination(&key, p);
                match bound_node(p) {
                    Some(node) if filters::is_active(p) => {
                        lock(&self.ledger).place(&key, p.clone(), node);
                        lock(&self.assumed).remove(&key);
                    }
                    Some(_) => {
                        // A pod that finished frees its resources.
                        lock(&self.ledger).remove(&key);
                        lock(&self.assumed).remove(&key);
                        if matches!(ev, Event::Updated { old, .. } if filters::is_active(old)) {
                            self.retry_unschedulable();
                        }
                    }
                    None if self.wants(p) => self.queue.add(key),
                    None => {}
                }
            }
            Event::Deleted(p) => {
                let key = object_key(&p.metadata);
                lock(&self.ledger).remove(&key);
                lock(&self.assumed).remove(&key);
                lock(&self.unschedulable).remove(&key);
                lock(&self.nominated).remove(&key);
                lock(&self.preempting).remove(&key);
                if bound_node(p).is_some() {
                    self.retry_unschedulable();
                }
            }
        }
    }

    /// The nodes, sorted by name; rebuilt only after a node changed.
    fn node_list(&self) -> NodeList {
        let mut cached = lock(&self.node_list);
        if let Some(c) = cached.as_ref() {
            return c.clone();
        }
        let mut nodes: Vec<Arc<Node>> = self.nodes.list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let names: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let allocatable = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, filters::Allocatable::of(n))))
            .collect();
        let index = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((n.metadata.name.clone()?, i)))
            .collect();
        let built = NodeList {
            nodes: Arc::new(nodes),
            names: Arc::new(names),
            allocatable: Arc::new(allocatable),
            index: Arc::new(index),
        };
        *cached = Some(built.clone());
        built
    }

    /// Schedules one pod: filter, pick, assume it on the node, and bind in the
    /// background (as Kubernetes' binding cycle does) — or record why it cannot be placed.
    pub async fn schedule_one(self: &Arc<Self>, key: &str) -> Result<Outcome, ClientError> {
        let Some(pod) = self.pods.get(key) else {
            return Ok(Outcome::Skipped);
        };
        if !self.wants(&pod) || lock(&self.assumed).contains(key) {
            return Ok(Outcome::Skipped);
        }
        if let Some(gang) = self.gang_of(&pod) {
            return self.schedule_gang(&pod, gang).await;
        }
        let NodeList {
            nodes,
            names,
            allocatable,
            index,
        } = self.node_list();
        let pod_volumes = match self.pod_volumes(&pod) {
            Ok(v) => v,
            Err(why) => {
                let message = format!("0/{} nodes are available: {why}.", nodes.len());
                return self.unschedulable(key, &pod, message).await;
            }
        };
        let inventory = self.inventory();
        let pod_devices = match self.pod_devices(&pod, &inventory, &HashMap::new()) {
            Ok(d) => d,
            Err(why) => {
                let message = format!("0/{} nodes are available: {why}.", nodes.len());
                return self.unschedulable(key, &pod, message).await;
            }
        };
        // The cluster-default spreading selects by the pod's Services and controller.
        let default_spread = self.default_spread_selector(&pod);
        let spreads = spread::has_spread(&pod) || default_spread.is_some();
        let decision = {
            let ledger = lock(&self.ledger);
            let placed = ledger.placed(Needs::of(&pod, spreads));
            // Room kept for pods nominated by preemption counts as used.
            let reserved = self.with_nominations(&pod, &[key], &ledger.usage);
            let usage = reserved.as_ref().unwrap_or(&ledger.usage);
            let devices = lock(&self.devices);
            let taken = |d: &dra::DeviceId| devices.taken(d);
            let device_check = pod_devices.as_ref().map(|needs| dra::NodeCheck {
                needs,
                inventory: &inventory,
                in_use: &taken,
            });
            let snap = Snapshot::new(&nodes, usage, &placed)
                .with_allocatable(&allocatable)
                .with_volumes(pod_volumes.as_ref())
                .with_devices(device_check.as_ref());
            let mut rr = lock(&self.round_robin);
            rr.sync_shared(&names);
            let node = |name: &str| index.get(name).map(|&i| &*nodes[i]);
            score::select_node(&pod, &snap, &mut rr, node, default_spread.as_ref())
        };
        match decision {
            Ok(node) => {
                let plan = BindPlan {
                    volumes: self.volume_plan(pod_volumes.as_ref(), &nodes, &node),
                    devices: match index.get(&node) {
                        Some(&i) => self.device_plan(pod_devices.as_ref(), &inventory, &nodes[i]),
                        None => claims::DevicePlan::default(),
                    },
                };
                self.assume_and_bind(key, pod, &node, plan).await;
                Ok(Outcome::Bound(node))
            }
            Err(reasons) => {
                let mut message = filters::unschedulable_message(nodes.len(), &reasons);
                match self
                    .preempt(key, &pod, &reasons, pod_volumes.as_ref())
                    .await?
                {
                    preemption::Outcome::Nominated(node) => {
                        tracing::info!(pod = %key, %node, "nominated after preemption");
                    }
                    preemption::Outcome::Failed(why) => message = format!("{message} {why}"),
                }
                self.unschedulable(key, &pod, message).await
            }
        }
    }

    /// What the cluster-default spreading counts the pod's peers by: its
    /// Services' selectors and its ReplicaSet's, StatefulSet's or
    /// ReplicationController's (None for a pod of none of them).
    fn default_spread_selector(&self, pod: &Pod) -> Option<minik8s_api::selector::Selector> {
        use minik8s_api::selector::{Requirement, Selector};
        if spread::has_spread(pod) {
            return None;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let services = self.services.by_index(NAMESPACE, ns);
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        let controller = owner.and_then(|o| {
            let key = format!("{ns}/{}", o.name);
            match (o.api_version.as_str(), o.kind.as_str()) {
                ("v1", "ReplicationController") => {
                    let rc = self.controllers.get(&key)?;
                    let sel = rc.spec.as_ref()?.selector.clone()?;
                    Some(Selector {
                        requirements: sel
                            .into_iter()
                            .map(|(k, v)| Requirement::Equals(k, v))
                            .collect(),
                    })
                }
                ("apps/v1", "ReplicaSet") => {
                    let rs = self.replica_sets.get(&key)?;
                    Selector::from_label_selector(&rs.spec.selector).ok()
                }
                ("apps/v1", "StatefulSet") => {
                    let sts = self.stateful_sets.get(&key)?;
                    Selector::from_label_selector(&sts.spec.selector).ok()
                }
                _ => None,
            }
        });
        spread::default_selector(pod, services.iter().map(|s| &**s), controller)
    }

    /// The pod's claims for volume binding (None: it has none); Err(why) when
    /// no node can take it until a claim changes.
    fn pod_volumes(&self, pod: &Pod) -> Result<Option<volumes::PodVolumes>, String> {
        volumes::claims_of(
            pod,
            |k| self.claims.get(k),
            |v| self.volumes.get(v),
            |c| self.classes.get(c),
            || self.volumes.list(),
        )
    }

    /// What to write for the pod's claims once `node` is chosen.
    fn volume_plan(
        &self,
        v: Option<&volumes::PodVolumes>,
        nodes: &[Arc<Node>],
        node: &str,
    ) -> volumes::Plan {
        let chosen = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node));
        match (v, chosen) {
            (Some(v), Some(n)) => volumes::node_fit(v, n).unwrap_or_default(),
            _ => volumes::Plan::default(),
        }
    }

    /// Records why the pod cannot be placed (condition, event) and keeps it for a retry.
    async fn unschedulable(
        &self,
        key: &str,
        pod: &Pod,
        message: String,
    ) -> Result<Outcome, ClientError> {
        self.mark_unschedulable(pod, &message).await?;
        self.recorder
            .event(pod, EventType::Warning, "FailedScheduling", &message)
            .await;
        lock(&self.unschedulable).insert(key.to_string());
        Ok(Outcome::Unschedulable(message))
    }

    /// Assumes the pod is on `node` (the next decisions count it) until the watch
    /// says so, and binds it in the background.
    async fn assume_and_bind(
        self: &Arc<Self>,
        key: &str,
        pod: Arc<Pod>,
        node: &str,
        plan: BindPlan,
    ) {
        // The binding goes on by itself; nobody waits for its outcome.
        drop(self.assume_and_bind_tracked(key, pod, node, plan).await);
    }

    /// [`Self::assume_and_bind`], with the binding's outcome (true: bound).
    async fn assume_and_bind_tracked(
        self: &Arc<Self>,
        key: &str,
        pod: Arc<Pod>,
        node: &str,
        plan: BindPlan,
    ) -> tokio::task::JoinHandle<bool> {
        let mut placed = (*pod).clone();
        placed.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        lock(&self.ledger).place(key, Arc::new(placed), node);
        lock(&self.assumed).insert(key.to_string());
        lock(&self.unschedulable).remove(key);
        let (me, key, chosen) = (self.clone(), key.to_string(), node.to_string());
        let permit = self
            .binding_slots
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore open");
        // The binding cycle runs on after the scheduling cycle's span has
        // ended (as Kubernetes' does): its own span, in the same trace.
        let trace = minik8s_trace::context::current();
        tokio::spawn(async move {
            let span = match &trace {
                Some(trace) => {
                    let span = tracing::debug_span!(target: minik8s_trace::JOURNEY, parent: None, "binding cycle", pod = %key, node = %chosen);
                    minik8s_trace::context::follow(&span, Some(trace));
                    span
                }
                None => {
                    tracing::debug_span!(target: TRACE_POD_START, parent: None, "binding cycle", pod = %key, node = %chosen)
                }
            };
            let bound = me
                .binding_cycle(&key, &pod, &chosen, &plan)
                .instrument(span)
                .await;
            // The slot bounds bindings, not events: the Scheduled event is
            // written after it is given back (events are best effort and
            // would otherwise halve the bindings in flight).
            drop(permit);
            if bound {
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                let name = pod.metadata.name.as_deref().unwrap_or("");
                let message = format!("Successfully assigned {ns}/{name} to {chosen}");
                me.recorder
                    .event(&*pod, EventType::Normal, "Scheduled", &message)
                    .await;
            }
            bound
        })
    }

    /// Binds an assumed pod (true when bound); on failure the assumption is
    /// dropped (and retried unless someone else already placed or deleted the pod).
    async fn binding_cycle(&self, key: &str, pod: &Pod, node: &str, plan: &BindPlan) -> bool {
        if !plan.devices.is_empty() {
            if let Err(e) = self.write_device_plan(pod, &plan.devices).await {
                tracing::info!(pod = %key, %node, error = %e, "claim allocation failed; retrying");
                self.forget_device_plan(&plan.devices);
                let message = format!("running PreBind plugin \"DynamicResources\": {e}");
                self.prebind_failed(key, pod, &message).await;
                return false;
            }
        }
        let plan = &plan.volumes;
        if !plan.is_empty() {
            let bound = match self.write_volume_plan(plan, node).await {
                Ok(()) => self.wait_claims_bound(plan).await,
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = bound {
                tracing::info!(pod = %key, %node, error = %e, "volume binding failed; retrying");
                let message =
                    format!("running PreBind plugin \"VolumeBinding\": binding volumes: {e}");
                self.prebind_failed(key, pod, &message).await;
                return false;
            }
        }
        let span = tracing::debug_span!(target: TRACE_POD_START, "bind", pod = %key, %node);
        match self.bind(pod, node).instrument(span).await {
            Ok(()) => true,
            Err(e) => {
                lock(&self.ledger).remove(key);
                lock(&self.assumed).remove(key);
                if !(e.is_conflict() || e.is_not_found()) {
                    tracing::warn!(pod = %key, %node, error = %e, "binding failed; retrying");
                    self.queue.add_rate_limited(key.to_string());
                }
                false
            }
        }
    }

    /// A PreBind step failed: the event says which, the assumption is
    /// dropped and the pod tried again after a back-off.
    async fn prebind_failed(&self, key: &str, pod: &Pod, message: &str) {
        self.recorder
            .event(pod, EventType::Warning, "FailedScheduling", message)
            .await;
        lock(&self.ledger).remove(key);
        lock(&self.assumed).remove(key);
        self.queue.add_rate_limited(key.to_string());
    }

    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), ClientError> {
        let info = registry::of::<Pod>();
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
                             "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        let path = format!("{}/binding", info.object_path(Some(ns), name));
        self.client
            .request(
                reqwest::Method::POST,
                &path,
                Some((
                    content::JSON,
                    serde_json::to_vec(&binding).unwrap_or_default(),
                )),
                content::JSON,
            )
            .await?;
        Ok(())
    }

    async fn mark_unschedulable(&self, pod: &Pod, message: &str) -> Result<(), ClientError> {
        let current = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
        if current.is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message)) {
            return Ok(());
        }
        let patch = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                       "message": message, "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}]}});
        self.client
            .patch_status::<Pod>(&pod.metadata, content::STRATEGIC_MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }
}

/// Runs the scheduler until the process ends.
pub async fn run(client: Client, config: Config) -> anyhow::Result<()> {
    let (sched, informers) = build(client.with_user_agent("kube-scheduler"), config);
    // Owned by this future: dropping it (a deposed leader) stops the informers too.
    let mut tasks = tokio::task::JoinSet::new();
    for inf in informers {
        tasks.spawn(inf);
    }
    sched.pods.wait_synced().await;
    sched.nodes.wait_synced().await;
    tracing::info!("scheduler running");
    worker(sched).await;
    Ok(())
}

type InformerTask = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The scheduler and the informer loops feeding it (spawn them, then run [`worker`]).
pub fn build(client: Client, config: Config) -> (Arc<Scheduler>, Vec<InformerTask>) {
    let mut i = Informers::new(&client);
    // Kubernetes' PrioritySort: the pod of highest priority is tried first.
    let pods = i.pods.cache();
    let queue = WorkQueue::new().ranked_by(move |key: &String| {
        pods.get(key)
            .map_or(0, |p| i64::from(victims::priority(&p)))
    });
    let sched = Arc::new(Scheduler {
        contexts: Default::default(),
        recorder: Recorder::new(client.clone(), config.scheduler_name.as_str()),
        client,
        config,
        pods: i.pods.cache(),
        nodes: i.nodes.cache(),
        claims: i.claims.cache(),
        volumes: i.volumes.cache(),
        classes: i.classes.cache(),
        pod_groups: i.groups.cache(),
        workload_groups: i.workload_groups.cache(),
        budgets: i.budgets.cache(),
        services: i.services.cache(),
        replica_sets: i.replica_sets.cache(),
        stateful_sets: i.stateful_sets.cache(),
        controllers: i.controllers.cache(),
        queue,
        round_robin: Mutex::new(RoundRobin::default()),
        ledger: Mutex::default(),
        assumed: Mutex::default(),
        node_list: Mutex::default(),
        binding_slots: Arc::new(tokio::sync::Semaphore::new(64)),
        unschedulable: Mutex::default(),
        nominated: Mutex::default(),
        preempting: Mutex::default(),
        resource_claims: i.resource_claims.cache(),
        device_classes: i.device_classes.cache(),
        resource_slices: i.resource_slices.cache(),
        devices: Mutex::default(),
        matches: Mutex::default(),
    });
    i.wake(&sched);
    (sched, i.into_tasks())
}

fn informer<K>(client: &Client) -> Informer<K>
where
    K: minik8s_client::rest::Resource
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    Informer::new(Api::<K>::all(client), ListParams::default())
}

/// What the scheduler follows, one informer per kind.
struct Informers {
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    claims: Informer<PersistentVolumeClaim>,
    volumes: Informer<PersistentVolume>,
    classes: Informer<StorageClass>,
    groups: Informer<minik8s_api::podgroup::PodGroup>,
    workload_groups: Informer<WorkloadPodGroup>,
    budgets: Informer<PodDisruptionBudget>,
    services: Informer<Service>,
    replica_sets: Informer<ReplicaSet>,
    stateful_sets: Informer<StatefulSet>,
    controllers: Informer<ReplicationController>,
    resource_claims: Informer<ResourceClaim>,
    device_classes: Informer<DeviceClass>,
    resource_slices: Informer<ResourceSlice>,
}

impl Informers {
    fn new(client: &Client) -> Informers {
        let services = informer::<Service>(client);
        let by_namespace: minik8s_client::informer::IndexFn<Service> =
            Arc::new(|s: &Service| vec![s.metadata.namespace.clone().unwrap_or_default()]);
        services.cache().add_index(NAMESPACE, by_namespace);
        Informers {
            pods: informer(client),
            nodes: informer(client),
            claims: informer(client),
            volumes: informer(client),
            classes: informer(client),
            groups: informer(client),
            workload_groups: informer(client),
            budgets: informer(client),
            services,
            replica_sets: informer(client),
            stateful_sets: informer(client),
            controllers: informer(client),
            resource_claims: informer(client),
            device_classes: informer(client),
            resource_slices: informer(client),
        }
    }

    /// The events that wake the scheduler: a pod's own, a node that changed
    /// for scheduling, and any change that may make a waiting pod
    /// placeable (claims, volumes, classes, pod groups, devices).
    fn wake(&mut self, sched: &Arc<Scheduler>) {
        let weak = Arc::downgrade(sched);
        let s = weak.clone();
        self.pods.on_event(move |ev| {
            if let Some(s) = s.upgrade() {
                s.on_pod(ev);
            }
        });
        let s = weak.clone();
        self.nodes.on_event(move |ev| {
            if let Event::Updated { old, new } = ev {
                if !filters::node_changed_for_scheduling(old, new) {
                    return;
                }
            }
            if let Some(s) = s.upgrade() {
                *lock(&s.node_list) = None;
                s.retry_unschedulable();
            }
        });
        self.claims
            .on_event(noted_then_retry(&weak, nothing_to_note));
        self.volumes
            .on_event(noted_then_retry(&weak, nothing_to_note));
        self.classes
            .on_event(noted_then_retry(&weak, nothing_to_note));
        // A PodGroup made or resized lets its waiting gang try again.
        self.groups
            .on_event(noted_then_retry(&weak, nothing_to_note));
        self.workload_groups
            .on_event(noted_then_retry(&weak, nothing_to_note));
        // Devices: a claim, class or slice that changes may free or add room.
        self.resource_claims
            .on_event(noted_then_retry(&weak, Scheduler::on_resource_claim));
        self.device_classes
            .on_event(noted_then_retry(&weak, nothing_to_note));
        self.resource_slices
            .on_event(noted_then_retry(&weak, Scheduler::on_resource_slice));
    }

    fn into_tasks(self) -> Vec<InformerTask> {
        vec![
            Box::pin(self.pods.run()),
            Box::pin(self.nodes.run()),
            Box::pin(self.claims.run()),
            Box::pin(self.volumes.run()),
            Box::pin(self.classes.run()),
            Box::pin(self.groups.run()),
            Box::pin(self.workload_groups.run()),
            Box::pin(self.budgets.run()),
            Box::pin(self.services.run()),
            Box::pin(self.replica_sets.run()),
            Box::pin(self.stateful_sets.run()),
            Box::pin(self.controllers.run()),
            Box::pin(self.resource_claims.run()),
            Box::pin(self.device_classes.run()),
            Box::pin(self.resource_slices.run()),
        ]
    }
}

/// The scheduler as a reconciler of pod keys: an unschedulable pod comes back
/// after [`UNSCHEDULABLE_RETRY`] (sooner when a node changes); errors back off.
pub struct Scheduling(pub Arc<Scheduler>);

impl Reconciler for Scheduling {
    const NAME: &'static str = "scheduler";
    const COMPONENT: &'static str = "scheduler";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        // The scheduling joins the trace of the request that created the
        // pod; without one, the span is only the pod start logs'.
        let uid = self.0.pods.get(key).and_then(|p| p.metadata.uid.clone());
        let parent = match uid {
            Some(uid) => self.0.contexts.of(&self.0.client, &uid).await,
            None => None,
        };
        let span = match parent {
            Some(parent) => {
                let span = tracing::debug_span!(target: minik8s_trace::JOURNEY, "schedule_one", pod = %key);
                minik8s_trace::context::follow(&span, Some(&parent));
                span
            }
            None => tracing::debug_span!(target: TRACE_POD_START, "schedule_one", pod = %key),
        };
        let started = std::time::Instant::now();
        let outcome = self.0.schedule_one(key).instrument(span).await;
        let result = match &outcome {
            Ok(Outcome::Bound(_)) => Some("scheduled"),
            Ok(Outcome::Unschedulable(_)) => Some("unschedulable"),
            Ok(Outcome::Skipped) => None,
            Err(_) => Some("error"),
        };
        if let Some(result) = result {
            let profile = &self.0.config.scheduler_name;
            self.0
                .config
                .metrics
                .attempted(profile, result, started.elapsed());
        }
        let outcome = outcome?;
        tracing::debug!(pod = %key, ?outcome, "scheduled");
        Ok(match outcome {
            Outcome::Unschedulable(_) => Action::RequeueAfter(UNSCHEDULABLE_RETRY),
            Outcome::Bound(_) | Outcome::Skipped => Action::Done,
        })
    }
}

/// An informer handler: the scheduler (while it lives) notes the event, then
/// retries the pods waiting as unschedulable.
fn noted_then_retry<K>(
    scheduler: &std::sync::Weak<Scheduler>,
    note: fn(&Scheduler, &Event<K>),
) -> impl Fn(&Event<K>) + Send + Sync + 'static
where
    K: 'static,
{
    let scheduler = scheduler.clone();
    move |ev| {
        if let Some(s) = scheduler.upgrade() {
            note(&s, ev);
            s.retry_unschedulable();
        }
    }
}

/// For [`noted_then_retry`]: events whose only effect is the retry.
fn nothing_to_note<K>(_: &Scheduler, _: &Event<K>) {}

/// The scheduling loop: one pod at a time, on the controllers' runner.
pub async fn worker(sched: Arc<Scheduler>) {
    let queue = sched.queue.clone();
    let loops = sched.config.metrics.loops.clone();
    controller::run(Arc::new(Scheduling(sched)), queue, 1, loops).await
}
