//! Node lifecycle: notices kubelets that stopped heartbeating, taints their
//! nodes, and evicts the pods that do not tolerate the taint (Kubernetes'
//! node lifecycle controller with its NoExecute taint manager).
//!
//! ```text
//!  Lease renewTime / Ready heartbeat changed? ──yes──▶ last seen = now (our clock)
//!        │ no change for --node-monitor-grace-period (50 s)
//!        ▼
//!  conditions → Unknown ("Kubelet stopped posting node status."), pods → Ready=False
//!        ▼
//!  taint node.kubernetes.io/unreachable (NoSchedule + NoExecute); Ready=False → not-ready
//!        ▼
//!  each pod on the node: untolerated → evict now; tolerated for N s → evict at
//!  timeAdded + N (DefaultTolerationSeconds gives every pod 300 s); forever → stay
//! ```
//!
//! A kubelet that comes back posts Ready=True: the taints go, new pods come.
//! Staleness is measured on the controller's own clock from the moment it saw
//! the heartbeat change, so clock skew between machines does not matter.

use crate::lock;
use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use minik8s_api::registry;
use minik8s_api::taints::toleration_matches;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::IndexFn;
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
const NO_EXECUTE: &str = "NoExecute";
const NO_SCHEDULE: &str = "NoSchedule";
/// The pod cache index: node name → pods bound to it.
const BY_NODE: &str = "nodeName";

/// The node's Ready condition status: "True", "False", "Unknown" or None.
pub fn ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// What the kubelet last wrote that proves it is alive: the Lease's renewTime
/// and the Ready condition's lastHeartbeatTime. A change means a heartbeat.
pub fn heartbeat_token(node: &Node, lease: Option<&Lease>) -> String {
    let renew = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let beat = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| minik8s_api::meta::utc_of(t).to_rfc3339())
        .unwrap_or_default();
    format!("{renew}|{beat}")
}

/// The conditions to write when the kubelet went silent: every condition it
/// reported becomes Unknown (transition time kept when already Unknown), and
/// Ready exists even if it never reported one. None when all are Unknown already.
pub fn unknown_conditions(node: &Node, now: DateTime<Utc>) -> Option<Vec<NodeCondition>> {
    let mut conds = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if !conds.iter().any(|c| c.type_ == "Ready") {
        conds.push(NodeCondition {
            type_: "Ready".into(),
            ..Default::default()
        });
    }
    if conds.iter().all(|c| c.status == "Unknown") {
        return None;
    }
    let t = minik8s_api::meta::time_of(now);
    for c in &mut conds {
        if c.status != "Unknown" {
            c.status = "Unknown".into();
            c.last_transition_time = Some(t.clone());
        }
        c.reason = Some("NodeStatusUnknown".into());
        c.message = Some("Kubelet stopped posting node status.".into());
    }
    Some(conds)
}

/// The node's taints as they should be: the user's taints kept, ours (unreachable,
/// not-ready) present exactly when the Ready condition calls for them. Existing
/// taints keep their timeAdded, so eviction deadlines do not move.
pub fn desired_taints(node: &Node, now: DateTime<Utc>) -> Vec<Taint> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let want_key = match ready_status(node) {
        Some("True") => None,
        Some("False") => Some(NOT_READY),
        Some(_) => Some(UNREACHABLE),
        // Never reported: nothing to say until it does or goes silent (then Unknown).
        None => None,
    };
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| {
            let ours = t.key == UNREACHABLE || t.key == NOT_READY;
            !ours
                || (Some(t.key.as_str()) == want_key
                    && (t.effect == NO_EXECUTE || t.effect == NO_SCHEDULE))
        })
        .cloned()
        .collect();
    if let Some(key) = want_key {
        for effect in [NO_SCHEDULE, NO_EXECUTE] {
            if !out.iter().any(|t| t.key == key && t.effect == effect) {
                out.push(Taint {
                    key: key.into(),
                    value: None,
                    effect: effect.into(),
                    time_added: (effect == NO_EXECUTE).then_some(minik8s_api::meta::time_of(now)),
                });
            }
        }
    }
    out
}

/// When a pod on a node with these taints must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// It tolerates every NoExecute taint forever (or there are none).
    Never,
    /// An untolerated taint, or its toleration ran out.
    Now,
    /// The earliest moment a tolerationSeconds runs out.
    At(DateTime<Utc>),
}

/// The NoExecute taint manager's decision for one pod (pure).
pub fn eviction(pod: &Pod, taints: &[Taint], now: DateTime<Utc>) -> Eviction {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    let mut earliest: Option<DateTime<Utc>> = None;
    for taint in taints.iter().filter(|t| t.effect == NO_EXECUTE) {
        let matching: Vec<_> = tolerations
            .iter()
            .filter(|t| toleration_matches(t, taint))
            .collect();
        if matching.is_empty() {
            return Eviction::Now;
        }
        // Several matching tolerations: the shortest bound wins; none bounded = forever.
        let Some(secs) = matching.iter().filter_map(|t| t.toleration_seconds).min() else {
            continue;
        };
        let added = taint
            .time_added
            .as_ref()
            .map(minik8s_api::meta::utc_of)
            .unwrap_or(now);
        let at = added + chrono::Duration::seconds(secs.max(0));
        earliest = Some(earliest.map_or(at, |e| e.min(at)));
    }
    match earliest {
        None => Eviction::Never,
        Some(at) if at <= now => Eviction::Now,
        Some(at) => Eviction::At(at),
    }
}

/// The node lifecycle settings (kube-controller-manager's flags).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How often every node is checked.
    pub monitor_period: Duration,
    /// Silence after which a node is Unknown.
    pub grace_period: Duration,
}

pub struct NodeLifecycleController {
    client: Client,
    recorder: Recorder,
    nodes: Cache<Node>,
    leases: Cache<Lease>,
    pods: Cache<Pod>,
    timing: Timing,
    /// Node → (last heartbeat token, when we saw it change).
    seen: Mutex<HashMap<String, (String, Instant)>>,
}

impl NodeLifecycleController {
    /// Builds the controller on the shared informers (Nodes, their Leases
    /// and Pods); every node is checked again each monitor period.
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        timing: Timing,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let pods = informers.cache::<Pod>();
        let by_node: IndexFn<Pod> = Arc::new(|p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        });
        pods.add_index(BY_NODE, by_node);
        let ctl = Arc::new(NodeLifecycleController {
            recorder: Recorder::new(client.clone(), "taint-eviction-controller"),
            client,
            nodes: informers.cache(),
            leases: informers.cache(),
            pods,
            timing,
            seen: Mutex::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .watches::<Node, _>(informers, |_, ev| {
                vec![ev.object().metadata.name.clone().unwrap_or_default()]
            })?
            .watches::<Lease, _>(informers, |_, ev| {
                let m = &ev.object().metadata;
                match m.namespace.as_deref() {
                    Some("kube-node-lease") => vec![m.name.clone().unwrap_or_default()],
                    _ => Vec::new(),
                }
            })?
            // A pod landing on a tainted node may have to go at once.
            .watches::<Pod, _>(informers, |_, ev| {
                ev.object()
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .into_iter()
                    .collect()
            })
    }

    /// Seconds since the node's heartbeat last changed (on our clock).
    fn silence(&self, name: &str, token: String) -> Duration {
        let mut seen = lock(&self.seen);
        let now = Instant::now();
        let entry = seen.entry(name.to_string()).or_insert((token.clone(), now));
        if entry.0 != token {
            *entry = (token, now);
        }
        now.duration_since(entry.1)
    }

    /// One node: conditions, taints, pod readiness and evictions. Returns
    /// when the next eviction is due, if one is.
    async fn sync(&self, name: &str) -> Result<Option<Duration>, ClientError> {
        let Some(node) = self.nodes.get(name) else {
            lock(&self.seen).remove(name);
            return Ok(None);
        };
        let lease = self.leases.get(&format!("kube-node-lease/{name}"));
        let silent_for = self.silence(name, heartbeat_token(&node, lease.as_deref()));
        let now = Utc::now();
        let nodes = self.client.dynamic(registry::of::<Node>(), None);
        let mut node = (*node).clone();
        if silent_for >= self.timing.grace_period {
            if let Some(conds) = unknown_conditions(&node, now) {
                tracing::info!(
                    node = name,
                    silent_secs = silent_for.as_secs(),
                    "node stopped heartbeating: conditions Unknown"
                );
                let patched = nodes
                    .patch(
                        name,
                        Some("status"),
                        content::MERGE_PATCH,
                        &json!({"status": {"conditions": conds}}),
                    )
                    .await;
                match patched {
                    Ok(v) => {
                        node = serde_json::from_value(v)
                            .map_err(|e| ClientError::Decode(e.to_string()))?
                    }
                    Err(e) if e.is_not_found() => return Ok(None),
                    Err(e) => return Err(e),
                }
                self.mark_pods_not_ready(name).await?;
            }
        }
        let taints = desired_taints(&node, now);
        let current = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if taints != current {
            tracing::info!(node = name, ?taints, "node taints");
            let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": taints}});
            match nodes.patch(name, None, content::MERGE_PATCH, &patch).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(None),
                // The node changed meanwhile: the watch brings it back to us.
                Err(e) if e.is_conflict() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        self.evict(name, &taints, now).await
    }

    /// Pods on a silent node are not ready (so Services stop sending them traffic).
    async fn mark_pods_not_ready(&self, node: &str) -> Result<(), ClientError> {
        for pod in self.pods.by_index(BY_NODE, node) {
            let Some(mut conds) = pod.status.as_ref().and_then(|s| s.conditions.clone()) else {
                continue;
            };
            let Some(ready) = conds
                .iter_mut()
                .find(|c| c.type_ == "Ready" && c.status != "False")
            else {
                continue;
            };
            ready.status = "False".into();
            ready.reason = Some("NodeNotReady".into());
            ready.last_transition_time = Some(minik8s_api::meta::time_now());
            let patch = json!({"status": {"conditions": conds}});
            self.client
                .patch_status::<Pod>(&pod.metadata, content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(())
    }

    /// Deletes the pods whose toleration ran out; returns how long until the
    /// next deadline, if any.
    async fn evict(
        &self,
        node: &str,
        taints: &[Taint],
        now: DateTime<Utc>,
    ) -> Result<Option<Duration>, ClientError> {
        let mut next: Option<DateTime<Utc>> = None;
        for pod in self.pods.by_index(BY_NODE, node) {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match eviction(&pod, taints, now) {
                Eviction::Never => {}
                Eviction::At(at) => next = Some(next.map_or(at, |n| n.min(at))),
                Eviction::Now => {
                    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
                    tracing::info!(node, pod = %format!("{ns}/{pod_name}"), "evicting pod from tainted node");
                    let api = self.client.dynamic(registry::of::<Pod>(), Some(ns));
                    let dp = DeleteParams {
                        precondition_uid: pod.metadata.uid.clone(),
                        ..Default::default()
                    };
                    match api.delete(pod_name, &dp).await {
                        Ok(_) => {
                            let note = format!(
                                "Marking for deletion Pod {ns}/{pod_name} (node {node} is tainted)"
                            );
                            self.recorder
                                .event(&*pod, EventType::Normal, "TaintManagerEviction", &note)
                                .await
                        }
                        Err(e) if e.is_not_found() || e.is_conflict() => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(next.map(|at| (at - now).to_std().unwrap_or_default() + Duration::from_millis(200)))
    }
}

impl Reconciler for NodeLifecycleController {
    const NAME: &'static str = "nodelifecycle";

    /// Every node comes back each monitor period (Kubernetes' monitorNodeHealth
    /// loop), sooner when a pod's toleration runs out.
    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let exists = self.nodes.get(name).is_some();
        let eviction_due = self.sync(name).await?;
        if !exists {
            return Ok(Action::Done);
        }
        let period = self.timing.monitor_period;
        Ok(Action::RequeueAfter(
            eviction_due.map_or(period, |due| due.min(period)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::Value;

    fn node(ready: Option<&str>, taints: Value) -> Node {
        let conds = match ready {
            Some(s) => {
                json!([{"type": "Ready", "status": s, "lastHeartbeatTime": "2026-01-01T00:00:00Z"},
                              {"type": "MemoryPressure", "status": "False"}])
            }
            None => json!([]),
        };
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "spec": {"taints": taints},
            "status": {"conditions": conds}}),
        )
        .unwrap()
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    fn pod(tolerations: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tolerations}})).unwrap()
    }

    #[test]
    fn silent_node_goes_unknown_once() {
        let n = node(Some("True"), json!([]));
        let conds = unknown_conditions(&n, at(0)).unwrap();
        assert!(conds.iter().all(|c| c.status == "Unknown"));
        assert_eq!(conds[0].reason.as_deref(), Some("NodeStatusUnknown"));
        let again = node(Some("Unknown"), json!([]));
        let mut again = again;
        again.status.as_mut().unwrap().conditions = Some(conds);
        assert_eq!(unknown_conditions(&again, at(5)), None, "already Unknown");
        let never = node(None, json!([]));
        assert_eq!(unknown_conditions(&never, at(0)).unwrap()[0].type_, "Ready");
    }

    #[test]
    fn taints_follow_the_ready_condition_and_keep_the_users() {
        let user = json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]);
        let unknown = desired_taints(&node(Some("Unknown"), user.clone()), at(0));
        let keys: Vec<_> = unknown
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("gpu", "NoSchedule"),
                (UNREACHABLE, "NoSchedule"),
                (UNREACHABLE, "NoExecute")
            ]
        );
        assert_eq!(
            minik8s_api::meta::utc_of(unknown[2].time_added.as_ref().unwrap()),
            at(0)
        );
        // Already tainted: the timeAdded stays.
        let tainted = node(Some("Unknown"), serde_json::to_value(&unknown).unwrap());
        assert_eq!(desired_taints(&tainted, at(30)), unknown);
        // Ready=False swaps unreachable for not-ready.
        let not_ready = desired_taints(
            &node(Some("False"), serde_json::to_value(&unknown).unwrap()),
            at(40),
        );
        assert!(not_ready.iter().all(|t| t.key != UNREACHABLE));
        assert_eq!(not_ready.iter().filter(|t| t.key == NOT_READY).count(), 2);
        // Back to Ready: only the user's taint is left.
        let back = desired_taints(
            &node(Some("True"), serde_json::to_value(&unknown).unwrap()),
            at(60),
        );
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].key, "gpu");
    }

    #[test]
    fn eviction_follows_tolerations() {
        let taints: Vec<Taint> = serde_json::from_value(json!([
            {"key": UNREACHABLE, "effect": "NoSchedule"},
            {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": at(0)}]))
        .unwrap();
        assert_eq!(
            eviction(&pod(json!([])), &taints, at(1)),
            Eviction::Now,
            "no toleration"
        );
        let default = pod(
            json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        );
        assert_eq!(eviction(&default, &taints, at(10)), Eviction::At(at(300)));
        assert_eq!(eviction(&default, &taints, at(300)), Eviction::Now);
        let forever = pod(json!([{"key": UNREACHABLE, "operator": "Exists"}]));
        assert_eq!(eviction(&forever, &taints, at(10_000)), Eviction::Never);
        let two = pod(
            json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                             {"operator": "Exists", "tolerationSeconds": 20}]),
        );
        assert_eq!(
            eviction(&two, &taints, at(1)),
            Eviction::At(at(20)),
            "the shortest bound wins"
        );
        assert_eq!(
            eviction(&pod(json!([])), &[], at(1)),
            Eviction::Never,
            "no taints"
        );
        let only_no_schedule: Vec<Taint> = taints[..1].to_vec();
        assert_eq!(
            eviction(&pod(json!([])), &only_no_schedule, at(1)),
            Eviction::Never
        );
    }
}
