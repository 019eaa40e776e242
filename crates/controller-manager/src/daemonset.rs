//! The DaemonSet controller: one pod on every node that should run one
//! (Kubernetes' `pkg/controller/daemon`).
//!
//! ```text
//!  every node ─ should_run? (nodeSelector, node affinity, taints against the
//!     │          pod's tolerations plus the ones every daemon pod gets)
//!     ├─ yes, no pod ─────▶ create one, pinned by node affinity (the scheduler binds it)
//!     ├─ no, a pod ───────▶ delete it (misscheduled)
//!     └─ more than one, or a failed one ─▶ delete the extra/failed
//!  RollingUpdate: delete pods of an old template, at most maxUnavailable
//!  nodes without a ready pod at a time; the next pass creates the new ones
//!  status: desired, current, misscheduled, ready, updated, available
//! ```

use crate::expectations::Expectations;
use crate::history;
use crate::ns_of;
use crate::ownership::{available_in, controller_of, controller_ref, is_ready};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Toleration};
use minik8s_api::hash::revision_hash;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The label naming the template a daemon pod was made from.
pub const REVISION_HASH: &str = "controller-revision-hash";

/// The tolerations Kubernetes gives every daemon pod, so that node
/// conditions do not evict or keep out what must run everywhere.
pub fn daemon_tolerations(spec: &PodSpec) -> Vec<Toleration> {
    let t = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut out = vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        out.push(t("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let mut all = spec.tolerations.clone().unwrap_or_default();
    for extra in out {
        if !all
            .iter()
            .any(|x| x.key == extra.key && x.effect == extra.effect)
        {
            all.push(extra);
        }
    }
    all
}

/// The pod the DaemonSet would put on `node`: its template with the daemon
/// tolerations and a node affinity naming that node.
pub fn daemon_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let template = ds.spec.template.clone();
    let mut spec = template.spec.unwrap_or_default();
    spec.tolerations = Some(daemon_tolerations(&spec));
    let mut pod = Pod {
        metadata: template.metadata.unwrap_or_default(),
        spec: Some(spec),
        status: None,
    };
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(REVISION_HASH.into(), hash.into());
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    if let Some(s) = pod.spec.as_mut() {
        s.affinity = serde_json::from_value(affinity).ok();
    }
    pod
}

/// Whether a daemon pod should run on `node` (the scheduler's own predicates,
/// on the pod as the DaemonSet would make it).
pub fn should_run(ds: &DaemonSet, node: &Node) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or("");
    let mut pod = daemon_pod(ds, name, "");
    // The template's own node affinity decides; the pinning one is ours.
    if let Some(s) = pod.spec.as_mut() {
        s.affinity = ds
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|t| t.affinity.clone());
    }
    minik8s_api::node_selection::matches_node_selector(&pod, node)
        && minik8s_api::node_selection::untolerated_taint(&pod, node).is_none()
}

/// The node a daemon pod is for: where it is bound, or what its affinity names.
pub fn node_of(p: &Pod) -> Option<String> {
    let spec = p.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let v = serde_json::to_value(spec.affinity.as_ref()?).ok()?;
    v.pointer("/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")?
        .as_str()
        .map(str::to_string)
}

pub struct DaemonSetController {
    client: Client,
    sets: Cache<DaemonSet>,
    pods: Cache<Pod>,
    nodes: Cache<Node>,
    revisions: Cache<ControllerRevision>,
    expectations: Expectations,
}

impl DaemonSetController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(DaemonSetController {
            client,
            sets: informers.cache(),
            pods: informers.cache(),
            nodes: informers.cache(),
            revisions: informers.cache(),
            expectations: Expectations::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<DaemonSet>(informers)?
            .watches::<Pod, _>(informers, |me, ev| me.pod_keys(ev))?
            // A node coming, going, or changing its labels or spec (taints)
            // may change where daemons run; its heartbeats do not.
            .watches::<Node, _>(informers, |me, ev| {
                let relevant = match ev {
                    Event::Updated { old, new } => {
                        old.metadata.labels != new.metadata.labels || old.spec != new.spec
                    }
                    _ => true,
                };
                if !relevant {
                    return Vec::new();
                }
                me.sets
                    .list()
                    .iter()
                    .map(|d| object_key(&d.metadata))
                    .collect()
            })
    }

    fn pod_keys(&self, ev: &Event<Pod>) -> Vec<String> {
        self.expectations.pod_event(ev, |p| {
            minik8s_client::controller::controller_key(&p.metadata, "DaemonSet")
        })
    }

    async fn create_pod(&self, ds: &DaemonSet, node: &str, hash: &str) -> Result<(), ClientError> {
        let ns = ns_of(&ds.metadata);
        let mut pod = serde_json::to_value(daemon_pod(ds, node, hash)).unwrap_or(json!({}));
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        pod["metadata"]["namespace"] = json!(ns);
        pod["metadata"]["generateName"] =
            json!(format!("{}-", ds.metadata.name.as_deref().unwrap_or("")));
        pod["metadata"]["ownerReferences"] =
            json!([controller_ref("apps/v1", "DaemonSet", &ds.metadata)]);
        self.client
            .dynamic(registry::of::<Pod>(), Some(&ns))
            .create(&pod)
            .await?;
        Ok(())
    }

    /// Deletes a pod; false when it was already gone.
    async fn delete_pod(&self, p: &Pod) -> Result<bool, ClientError> {
        let api = self
            .client
            .dynamic(registry::of::<Pod>(), p.metadata.namespace.as_deref());
        match api
            .delete(
                p.metadata.name.as_deref().unwrap_or(""),
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl DaemonSetController {
    /// The ControllerRevision of the live template (`kubectl rollout
    /// history ds`), and no more old ones than revisionHistoryLimit besides
    /// those the pods still run.
    async fn record_history(
        &self,
        ds: &DaemonSet,
        by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    ) -> Result<(), ClientError> {
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let ns = ns_of(&ds.metadata);
        let name = ds.metadata.name.clone().unwrap_or_default();
        let template = serde_json::to_value(&ds.spec.template).unwrap_or(Value::Null);
        let current = history::revision_name(&name, &template);
        let revisions: Vec<Arc<ControllerRevision>> = self
            .revisions
            .by_index(NAMESPACE_INDEX, &ns)
            .into_iter()
            .filter(|r| controller_of(&r.metadata).is_some_and(|(u, _, _)| u == uid))
            .collect();
        let owner = history::Owner {
            kind: "DaemonSet",
            meta: &ds.metadata,
            template,
            hash_label: REVISION_HASH,
        };
        history::ensure_revision(&self.client, &owner, &revisions, &current).await?;
        let in_use: Vec<String> = by_node
            .values()
            .flatten()
            .filter_map(|p| p.metadata.labels.as_ref()?.get(REVISION_HASH))
            .map(|h| format!("{name}-{h}"))
            .collect();
        let mut keep: Vec<&str> = in_use.iter().map(String::as_str).collect();
        keep.push(&current);
        let limit = history::history_limit(ds.spec.revision_history_limit);
        history::prune(&self.client, &ns, &revisions, &keep, limit).await;
        Ok(())
    }
}

impl Reconciler for DaemonSetController {
    const NAME: &'static str = "daemonset";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let ds = self.sets.get(key)?;
        let settled = crate::journey::daemonset_settled(&ds);
        crate::journey::context_unless(&self.client, &ds.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(ds) = self.sets.get(key) else {
            self.expectations.forget(key);
            return Ok(Action::Done);
        };
        let spec = ds.spec.clone();
        let hash = revision_hash(&serde_json::to_value(&spec.template).unwrap_or(Value::Null));
        let by_node = self.pods_by_node(&ds);
        let wanted: BTreeMap<String, bool> = self
            .nodes
            .list()
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    should_run(&ds, n),
                )
            })
            .collect();
        let new_hash = |p: &Pod| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_HASH))
                == Some(&hash)
        };
        // A pod is available once Ready for minReadySeconds.
        let now = chrono::Utc::now();
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let mut next_available: Option<std::time::Duration> = None;
        let mut is_available = |p: &Pod| match available_in(p, min_ready, now) {
            Some(d) if d.is_zero() => true,
            Some(d) => {
                next_available = Some(next_available.map_or(d, |n| n.min(d)));
                false
            }
            None => false,
        };
        let counts = count(&wanted, &by_node, &new_hash, &mut is_available);
        let settled = self.expectations.satisfied(key);
        if ds.metadata.deletion_timestamp.is_none() {
            self.record_history(&ds, &by_node).await?;
        }
        if ds.metadata.deletion_timestamp.is_none() && settled {
            let update = Update::of(&spec, counts.desired, counts.available);
            let Plan { create, delete } =
                plan(&by_node, &wanted, &update, &new_hash, &mut is_available);
            self.expectations
                .expect(key, create.len() as i64, delete.len() as i64);
            for p in &delete {
                if !self.delete_pod(p).await? {
                    // Already gone: its deletion will never show.
                    self.expectations.observed(key, 0, 1);
                }
            }
            for node in &create {
                if let Err(e) = self.create_pod(&ds, node, &hash).await {
                    self.expectations.forget(key);
                    return Err(e);
                }
            }
        }
        self.write_status(&ds, &counts).await?;
        // A pod that becomes available by itself (minReadySeconds) changes the status.
        Ok(crate::expectations::action_or_wake(settled, next_available))
    }
}

impl DaemonSetController {
    /// The set's live pods, by the node they are bound to.
    fn pods_by_node(&self, ds: &DaemonSet) -> BTreeMap<String, Vec<Arc<Pod>>> {
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for p in self.pods.by_index(NAMESPACE_INDEX, &ns_of(&ds.metadata)) {
            let mine = controller_of(&p.metadata).is_some_and(|(u, _, _)| u == uid);
            if mine && p.metadata.deletion_timestamp.is_none() {
                by_node
                    .entry(node_of(&p).unwrap_or_default())
                    .or_default()
                    .push(p);
            }
        }
        by_node
    }

    /// The counts as the set's status, written when one differs.
    async fn write_status(&self, ds: &DaemonSet, c: &Counts) -> Result<(), ClientError> {
        let status = json!({"status": {
            "desiredNumberScheduled": c.desired, "currentNumberScheduled": c.current,
            "numberMisscheduled": c.misscheduled, "numberReady": c.ready,
            "updatedNumberScheduled": c.updated, "numberAvailable": c.available,
            "numberUnavailable": (c.desired - c.available).max(0),
            "observedGeneration": ds.metadata.generation.unwrap_or(0)}});
        let before = serde_json::to_value(&ds.status).unwrap_or(Value::Null);
        let changed = status["status"]
            .as_object()
            .into_iter()
            .flatten()
            .any(|(k, v)| before.get(k).cloned().unwrap_or(json!(0)) != *v);
        if changed {
            self.client
                .patch_status::<DaemonSet>(&ds.metadata, content::MERGE_PATCH, &status)
                .await?;
        }
        Ok(())
    }
}

/// The nodes a DaemonSet's status counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    desired: i32,
    current: i32,
    misscheduled: i32,
    ready: i32,
    updated: i32,
    available: i32,
}

/// Per node that should run the set: whether it has a pod, a ready one,
/// one of the new revision, an available one; per node that should not,
/// whether a pod is there anyway.
fn count(
    wanted: &BTreeMap<String, bool>,
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    new_hash: &dyn Fn(&Pod) -> bool,
    is_available: &mut dyn FnMut(&Pod) -> bool,
) -> Counts {
    let mut c = Counts::default();
    for (node, run) in wanted {
        let pods = by_node.get(node).map(Vec::as_slice).unwrap_or_default();
        if *run {
            c.desired += 1;
            c.current += i32::from(!pods.is_empty());
            c.ready += i32::from(pods.iter().any(|p| is_ready(p)));
            c.updated += i32::from(pods.iter().any(|p| new_hash(p)));
            c.available += i32::from(pods.iter().any(|p| is_available(p)));
        } else if !pods.is_empty() {
            c.misscheduled += 1;
        }
    }
    c
}

/// How the DaemonSet's pods are updated in this sync.
#[derive(Clone, Copy)]
struct Update {
    /// RollingUpdate (else OnDelete: old pods stay until deleted).
    rolling: bool,
    /// Nodes that may run an old and a new pod at once.
    max_surge: i32,
    /// Nodes that may lack an available pod while old pods go (at least 1).
    max_unavailable: i32,
    /// Nodes that lack an available pod now.
    unavailable: i32,
}

impl Update {
    /// The set's update strategy for `desired` nodes, `available` of which
    /// have an available pod.
    fn of(
        spec: &k8s_openapi::api::apps::v1::DaemonSetSpec,
        desired: i32,
        available: i32,
    ) -> Update {
        let strategy = spec.update_strategy.as_ref();
        let rolling = strategy.and_then(|s| s.type_.as_deref()) != Some("OnDelete");
        let ru = strategy
            .and_then(|s| s.rolling_update.clone())
            .unwrap_or_default();
        let scaled = |v| crate::deployment::rollout::scaled_value(v, desired, true);
        Update {
            rolling,
            max_surge: if rolling {
                scaled(ru.max_surge.as_ref())
            } else {
                0
            },
            max_unavailable: scaled(ru.max_unavailable.as_ref()).max(1),
            unavailable: desired - available,
        }
    }
}

/// What one sync does: the nodes to create a pod on, the pods to delete.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    create: Vec<String>,
    delete: Vec<Arc<Pod>>,
}

/// Kubernetes' `manage` and `rollingUpdate` for one sync, without I/O:
/// pods on nodes that should not run one go (misscheduled, or the node is
/// gone), failed pods and duplicates go, nodes without a pod get one; then
/// the rollout: with maxSurge a new pod joins the old one on up to
/// maxSurge nodes and the old one goes once the new one is available,
/// else old pods go while at most maxUnavailable nodes lack an available
/// pod (not-ready ones first: replacing them costs no availability).
/// `by_node` holds the set's live pods by node; `wanted` says for every
/// node whether it should run one.
fn plan(
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    wanted: &BTreeMap<String, bool>,
    update: &Update,
    new_hash: &dyn Fn(&Pod) -> bool,
    is_available: &mut dyn FnMut(&Pod) -> bool,
) -> Plan {
    let mut create = Vec::new();
    let mut delete: Vec<Arc<Pod>> = Vec::new();
    for (node, pods) in by_node {
        if !wanted.get(node).copied().unwrap_or(false) {
            delete.extend(pods.iter().cloned()); // misscheduled, or its node is gone
        }
    }
    let max_surge = update.max_surge;
    for node in wanted.iter().filter(|(_, run)| **run).map(|(n, _)| n) {
        let mut pods = by_node.get(node).cloned().unwrap_or_default();
        pods.sort_by_key(|p| {
            p.metadata
                .creation_timestamp
                .as_ref()
                .map(minik8s_api::meta::utc_of)
        });
        let failed: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
            .cloned()
            .collect();
        let healthy: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| !failed.iter().any(|f| Arc::ptr_eq(f, p)))
            .cloned()
            .collect();
        delete.extend(failed);
        if max_surge > 0 {
            // maxSurge: a new pod joins the old one, which goes once
            // the new one is available.
            let (new, old): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
                healthy.iter().cloned().partition(|p| new_hash(p));
            delete.extend(new.iter().skip(1).cloned());
            delete.extend(old.iter().skip(1).cloned());
            match (new.first(), old.first()) {
                (None, None) => create.push(node.clone()),
                (Some(n), Some(o)) if is_available(n) => delete.push(o.clone()),
                _ => {}
            }
            continue;
        }
        delete.extend(healthy.iter().skip(1).cloned());
        if healthy.is_empty() {
            create.push(node.clone());
        }
    }
    if max_surge > 0 && update.rolling {
        // Up to maxSurge nodes run an old and a new pod at once.
        let both =
            |ps: &Vec<Arc<Pod>>| ps.iter().any(|p| new_hash(p)) && ps.iter().any(|p| !new_hash(p));
        let surging = by_node.values().filter(|ps| both(ps)).count() as i32;
        let room = (max_surge - surging).max(0) as usize;
        let only_old = wanted
            .iter()
            .filter(|(_, run)| **run)
            .filter(|(n, _)| {
                by_node
                    .get(*n)
                    .is_some_and(|ps| !ps.is_empty() && ps.iter().all(|p| !new_hash(p)))
            })
            .map(|(n, _)| n.clone());
        create.extend(only_old.take(room));
    } else if update.rolling && create.is_empty() && delete.is_empty() {
        // RollingUpdate: old pods go while at most maxUnavailable nodes
        // lack an available pod.
        let mut old: Vec<Arc<Pod>> = by_node
            .iter()
            .filter(|(n, _)| wanted.get(*n).copied().unwrap_or(false))
            .flat_map(|(_, ps)| ps.iter().filter(|p| !new_hash(p)).cloned())
            .collect();
        // Not-ready old pods first: replacing them costs no availability.
        old.sort_by_key(|p| is_ready(p));
        let budget = (update.max_unavailable - update.unavailable).max(0) as usize;
        let not_ready = old.iter().filter(|p| !is_ready(p)).count();
        delete.extend(old.into_iter().take(budget.max(not_ready)));
    }
    Plan { create, delete }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(spec: Value) -> DaemonSet {
        let mut v = json!({"metadata": {"name": "agent", "namespace": "kube-system", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        for (k, val) in spec.as_object().unwrap() {
            v["spec"]["template"]["spec"][k] = val.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn node(name: &str, labels: Value, taints: Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    #[test]
    fn where_daemons_run() {
        let plain = ds(json!({}));
        assert!(should_run(&plain, &node("a", json!({}), json!([]))));
        // Node conditions do not keep daemons out; other taints do.
        let cordoned = node(
            "b",
            json!({}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        );
        assert!(should_run(&plain, &cordoned));
        let gpu = node(
            "c",
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        );
        assert!(!should_run(&plain, &gpu));
        let tolerant = ds(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        assert!(should_run(&tolerant, &gpu));
        let picky = ds(json!({"nodeSelector": {"disk": "ssd"}}));
        assert!(!should_run(&picky, &node("d", json!({}), json!([]))));
        assert!(should_run(
            &picky,
            &node("e", json!({"disk": "ssd"}), json!([]))
        ));
    }

    #[test]
    fn daemon_pods_are_pinned_and_tolerant() {
        let pod = daemon_pod(&ds(json!({})), "node-7", "h1");
        assert_eq!(node_of(&pod).as_deref(), Some("node-7"));
        assert_eq!(pod.metadata.labels.as_ref().unwrap()[REVISION_HASH], "h1");
        let keys: Vec<String> = pod
            .spec
            .unwrap()
            .tolerations
            .unwrap()
            .into_iter()
            .filter_map(|t| t.key)
            .collect();
        assert!(keys.contains(&"node.kubernetes.io/unreachable".to_string()));
        assert!(keys.contains(&"node.kubernetes.io/unschedulable".to_string()));
    }

    fn daemon(name: &str, hash: &str, ready: bool) -> Arc<Pod> {
        let status = if ready { "True" } else { "False" };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {REVISION_HASH: hash},
                             "creationTimestamp": "2026-11-30T10:00:00Z"},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": status}]}}))
            .unwrap(),
        )
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or(""))
            .collect()
    }

    fn run(
        by_node: &[(&str, Vec<Arc<Pod>>)],
        wanted: &[(&str, bool)],
        update: Update,
    ) -> (Vec<String>, Vec<String>) {
        let by_node = by_node
            .iter()
            .map(|(n, ps)| (n.to_string(), ps.clone()))
            .collect();
        let wanted = wanted.iter().map(|(n, w)| (n.to_string(), *w)).collect();
        let new_hash = |p: &Pod| p.metadata.labels.as_ref().unwrap()[REVISION_HASH] == "new";
        let mut available = |p: &Pod| is_ready(p);
        let plan = plan(&by_node, &wanted, &update, &new_hash, &mut available);
        let delete = names(&plan.delete).into_iter().map(String::from).collect();
        (plan.create, delete)
    }

    const ON_DELETE: Update = Update {
        rolling: false,
        max_surge: 0,
        max_unavailable: 1,
        unavailable: 0,
    };

    #[test]
    fn a_pod_per_wanted_node_and_none_elsewhere() {
        let (create, delete) = run(
            &[("b", vec![daemon("on-b", "old", true)])],
            &[("a", true), ("b", false)],
            ON_DELETE,
        );
        assert_eq!(
            (create, delete),
            (vec!["a".to_string()], vec!["on-b".to_string()])
        );
        // A node that is gone takes its pod with it; duplicates go.
        let (create, delete) = run(
            &[
                ("gone", vec![daemon("x", "old", true)]),
                (
                    "a",
                    vec![daemon("a1", "old", true), daemon("a2", "old", true)],
                ),
            ],
            &[("a", true)],
            ON_DELETE,
        );
        assert!(create.is_empty());
        assert_eq!(delete, ["x", "a2"]);
    }

    #[test]
    fn a_rolling_update_replaces_old_pods_within_max_unavailable() {
        let nodes = [
            ("a", vec![daemon("a-old", "old", true)]),
            ("b", vec![daemon("b-old", "old", false)]),
            ("c", vec![daemon("c-new", "new", true)]),
        ];
        let wanted = [("a", true), ("b", true), ("c", true)];
        let rolling = |unavailable| Update {
            rolling: true,
            max_surge: 0,
            max_unavailable: 1,
            unavailable,
        };
        // b is not ready, so unavailable already: it goes first, and alone.
        let (create, delete) = run(&nodes, &wanted, rolling(1));
        assert!(create.is_empty());
        assert_eq!(delete, ["b-old"]);
        // OnDelete leaves old pods alone.
        assert_eq!(run(&nodes, &wanted, ON_DELETE), (vec![], vec![]));
    }

    #[test]
    fn max_surge_adds_new_pods_beside_old_ones() {
        let wanted = [("a", true), ("b", true)];
        let surge = Update {
            rolling: true,
            max_surge: 1,
            max_unavailable: 1,
            unavailable: 0,
        };
        // Room for one node to run both: a gets a new pod, b waits.
        let (create, delete) = run(
            &[
                ("a", vec![daemon("a-old", "old", true)]),
                ("b", vec![daemon("b-old", "old", true)]),
            ],
            &wanted,
            surge,
        );
        assert_eq!((create, delete), (vec!["a".to_string()], vec![]));
        // Once a's new pod is available, a's old one goes.
        let (create, delete) = run(
            &[
                (
                    "a",
                    vec![daemon("a-old", "old", true), daemon("a-new", "new", true)],
                ),
                ("b", vec![daemon("b-old", "old", true)]),
            ],
            &wanted,
            surge,
        );
        assert!(create.is_empty());
        assert_eq!(delete, ["a-old"]);
    }
}
