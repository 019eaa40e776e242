//! The ReplicaSet controller: keeps `spec.replicas` pods matching the selector.
//!
//! Pure core (`claim`, `plan`, `deletion_order`, `slow_start`, `status`) decides
//! from what is observed; `reconcile` is the I/O shell around it, as in
//! Kubernetes' `pkg/controller/replicaset`.

use crate::expectations::Expectations;
use crate::{ns_of, ownership};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use minik8s_api::registry;
use minik8s_api::selector::Selector;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Involved, Recorder};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::sync::atomic::{self, AtomicU64};
use std::sync::Arc;

pub use crate::ownership::{controller_of, is_active, is_ready};

/// Which pods the ReplicaSet owns, should adopt, or must release.
#[derive(Debug, Default)]
pub struct Claims {
    pub owned: Vec<Arc<Pod>>,
    pub adopt: Vec<Arc<Pod>>,
    pub release: Vec<Arc<Pod>>,
}

/// Sorts the namespace's pods by their relation to `rs` (Kubernetes' ControllerRefManager).
pub fn claim(rs: &ReplicaSet, selector: &Selector, pods: &[Arc<Pod>]) -> Claims {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let deleting = rs.metadata.deletion_timestamp.is_some();
    let mut c = Claims::default();
    for p in pods {
        let matches = selector.matches(p.metadata.labels.as_ref().unwrap_or(&Default::default()));
        match controller_of(&p.metadata) {
            Some((owner, _, _)) if owner == uid => {
                if matches {
                    c.owned.push(p.clone());
                } else {
                    c.release.push(p.clone());
                }
            }
            Some(_) => {}
            None if matches && !deleting && p.metadata.deletion_timestamp.is_none() => {
                c.adopt.push(p.clone())
            }
            None => {}
        }
    }
    c
}

/// Pods to create (positive) or delete (negative).
pub fn plan(replicas: i32, active: usize) -> i64 {
    replicas as i64 - active as i64
}

/// Kubernetes' slow start: batches of 1, 2, 4, ... until `n` are done, so a
/// failing create does not fail a thousand times.
pub fn slow_start(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut done, mut batch) = (0, 1);
    while done < n {
        let b = batch.min(n - done);
        out.push(b);
        done += b;
        batch *= 2;
    }
    out
}

fn phase_rank(p: &Pod) -> u8 {
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") | None => 0,
        Some("Running") => 2,
        _ => 1,
    }
}

/// The least valuable pods first (Kubernetes' ActivePods order): unscheduled before
/// scheduled, Pending before Unknown before Running, not ready before ready,
/// more restarts first, newer before older.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let restarts = |p: &Pod| -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| cs.iter().map(|c| c.restart_count).sum())
            .unwrap_or(0)
    };
    let created = |p: &Pod| {
        p.metadata
            .creation_timestamp
            .as_ref()
            .map(minik8s_api::meta::utc_of)
    };
    scheduled(a)
        .cmp(&scheduled(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(is_ready(a).cmp(&is_ready(b)))
        .then(restarts(b).cmp(&restarts(a)))
        .then(created(b).cmp(&created(a)))
}

/// The status the ReplicaSet should report at `now` (a pod is available once
/// Ready for minReadySeconds), and when the next pod becomes available.
pub fn status(
    rs: &ReplicaSet,
    owned: &[Arc<Pod>],
    now: chrono::DateTime<chrono::Utc>,
) -> (serde_json::Value, Option<std::time::Duration>) {
    let active: Vec<&Arc<Pod>> = owned.iter().filter(|p| is_active(p)).collect();
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully = active
        .iter()
        .filter(|p| {
            template_labels
                .iter()
                .all(|(k, v)| p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = active.iter().filter(|p| is_ready(p)).count();
    let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
    let waits: Vec<std::time::Duration> = active
        .iter()
        .filter_map(|p| ownership::available_in(p, min_ready, now))
        .collect();
    let available = waits.iter().filter(|w| w.is_zero()).count();
    let next = waits.into_iter().filter(|w| !w.is_zero()).min();
    let status = serde_json::json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": rs.metadata.generation.unwrap_or(0),
    });
    (status, next)
}

// ---------------------------------------------------------------------------
// The I/O shell: caches in, API writes out.

/// The objects the controller keeps pods for: ReplicaSets, or (the same
/// logic, Kubernetes' replication manager) ReplicationControllers, seen as
/// ReplicaSets.
pub enum Owners {
    ReplicaSets(Cache<ReplicaSet>),
    ReplicationControllers(Cache<ReplicationController>),
}

/// A ReplicationController as the ReplicaSet it behaves like: its map
/// selector (or, without one, its template's labels) as `matchLabels`.
pub fn as_replica_set(rc: &ReplicationController) -> ReplicaSet {
    let spec = rc.spec.clone().unwrap_or_default();
    let template = spec.template.unwrap_or_default();
    let labels = spec
        .selector
        .filter(|s| !s.is_empty())
        .or_else(|| template.metadata.as_ref().and_then(|m| m.labels.clone()));
    let status = rc.status.clone().map(|s| ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        ..Default::default()
    });
    ReplicaSet {
        metadata: rc.metadata.clone(),
        spec: ReplicaSetSpec {
            replicas: spec.replicas,
            min_ready_seconds: spec.min_ready_seconds,
            selector: LabelSelector {
                match_labels: labels,
                ..Default::default()
            },
            template: Some(template),
        },
        status,
    }
}

impl Owners {
    /// (apiVersion, kind) of the owners.
    fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Owners::ReplicaSets(_) => ("apps/v1", "ReplicaSet"),
            Owners::ReplicationControllers(_) => ("v1", "ReplicationController"),
        }
    }

    fn info(&self) -> &'static minik8s_api::registry::ResourceInfo {
        match self {
            Owners::ReplicaSets(_) => registry::of::<ReplicaSet>(),
            Owners::ReplicationControllers(_) => registry::of::<ReplicationController>(),
        }
    }

    fn get(&self, key: &str) -> Option<Arc<ReplicaSet>> {
        match self {
            Owners::ReplicaSets(c) => c.get(key),
            Owners::ReplicationControllers(c) => c.get(key).map(|rc| Arc::new(as_replica_set(&rc))),
        }
    }

    fn in_namespace(&self, ns: &str) -> Vec<Arc<ReplicaSet>> {
        match self {
            Owners::ReplicaSets(c) => c.by_index(NAMESPACE_INDEX, ns),
            Owners::ReplicationControllers(c) => c
                .by_index(NAMESPACE_INDEX, ns)
                .iter()
                .map(|rc| Arc::new(as_replica_set(rc)))
                .collect(),
        }
    }
}

pub struct ReplicaSetController {
    client: Client,
    recorder: Recorder,
    sets: Owners,
    pods: Cache<Pod>,
    expectations: Expectations,
    pub reconciles: AtomicU64,
}

impl ReplicaSetController {
    fn observed(&self, rs_key: &str, add: i64, del: i64) {
        self.expectations.observed(rs_key, add, del);
    }

    fn satisfied(&self, rs_key: &str) -> bool {
        self.expectations.satisfied(rs_key)
    }

    /// Every ReplicaSet in the pod's namespace whose selector matches it (for adoption).
    fn matching(&self, pod: &Pod) -> Vec<String> {
        let ns = ns_of(&pod.metadata);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.sets
            .in_namespace(&ns)
            .into_iter()
            .filter(|rs| {
                let sel = Selector::from_label_selector(&rs.spec.selector).ok();
                sel.is_some_and(|s| !s.is_empty() && s.matches(&labels))
            })
            .map(|rs| object_key(&rs.metadata))
            .collect()
    }

    fn owner_key(&self, pod: &Pod) -> Option<String> {
        minik8s_client::controller::controller_key(&pod.metadata, self.sets.kind().1)
    }

    /// The ReplicaSets a pod event concerns: its owners before and after,
    /// and on a label change or for an orphan the sets that may adopt it.
    /// Creations and deletions of owned pods count against expectations.
    fn pod_keys(&self, ev: &Event<Pod>) -> Vec<String> {
        match ev {
            Event::Added(p) => match self.owner_key(p) {
                Some(k) => {
                    self.observed(&k, 1, 0);
                    vec![k]
                }
                None => self.matching(p),
            },
            Event::Updated { old, new } => {
                let mut keys: Vec<String> = [self.owner_key(old), self.owner_key(new)]
                    .into_iter()
                    .flatten()
                    .collect();
                if old.metadata.labels != new.metadata.labels || self.owner_key(new).is_none() {
                    keys.extend(self.matching(new));
                }
                keys
            }
            Event::Deleted(p) => match self.owner_key(p) {
                Some(k) => {
                    self.observed(&k, 0, 1);
                    vec![k]
                }
                None => Vec::new(),
            },
        }
    }

    /// Creates `n` pods from the template in slow-start batches (1, 2, 4, ...).
    async fn create_pods(&self, key: &str, rs: &ReplicaSet, n: usize) -> Result<(), ClientError> {
        let ns = ns_of(&rs.metadata);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let template = rs.spec.template.clone().unwrap_or_default();
        let tmeta = template.metadata.clone().unwrap_or_default();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": format!("{name}-"), "namespace": ns, "labels": tmeta.labels, "annotations": tmeta.annotations,
                         "ownerReferences": [ownership::controller_ref(self.sets.kind().0, self.sets.kind().1, &rs.metadata)]},
            "spec": template.spec});
        let api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        self.expectations.expect(key, n as i64, 0);
        let mut left = n;
        for batch in slow_start(n) {
            let results = futures::future::join_all((0..batch).map(|_| api.create(&pod))).await;
            left -= batch;
            let mut failed = Vec::new();
            let mut said = Vec::new();
            for r in results {
                match r {
                    Ok(created) => {
                        let name = created["metadata"]["name"].as_str().unwrap_or_default();
                        said.push((
                            EventType::Normal,
                            "SuccessfulCreate",
                            format!("Created pod: {name}"),
                        ));
                    }
                    Err(e) => {
                        said.push((
                            EventType::Warning,
                            "FailedCreate",
                            format!("Error creating: {e}"),
                        ));
                        failed.push(e);
                    }
                }
            }
            self.events(rs, said);
            if !failed.is_empty() {
                // Creates that failed (and the batches skipped) will never be observed.
                self.observed(key, (failed.len() + left) as i64, 0);
                return Err(failed.into_iter().next().expect("non-empty"));
            }
        }
        Ok(())
    }
    /// Events on the set (SuccessfulCreate, SuccessfulDelete and their
    /// failures), recorded in order in the background as client-go's
    /// broadcaster does: a scale-up of 1,000 does not wait for 1,000 events.
    fn events(&self, rs: &ReplicaSet, said: Vec<(EventType, &'static str, String)>) {
        if said.is_empty() {
            return;
        }
        let (api_version, kind) = self.sets.kind();
        let recorder = self.recorder.clone();
        let meta = rs.metadata.clone();
        tokio::spawn(async move {
            for (type_, reason, message) in said {
                let about = Involved {
                    api_version,
                    kind,
                    meta: &meta,
                };
                recorder.record(about, type_, reason, &message).await;
            }
        });
    }

    /// Builds the controller on the shared informers (ReplicaSets and Pods).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(Self::on(
            client,
            informers,
            Owners::ReplicaSets(informers.cache()),
        ));
        Controller::new(ctl, WorkQueue::new())
            .for_own::<ReplicaSet>(informers)?
            .watches::<Pod, _>(informers, |c, ev| c.pod_keys(ev))
    }

    fn on(client: Client, informers: &SharedInformers, sets: Owners) -> ReplicaSetController {
        let component = match sets {
            Owners::ReplicaSets(_) => "replicaset-controller",
            Owners::ReplicationControllers(_) => "replication-controller",
        };
        ReplicaSetController {
            recorder: Recorder::new(client.clone(), component),
            client,
            sets,
            pods: informers.cache(),
            expectations: Expectations::default(),
            reconciles: AtomicU64::new(0),
        }
    }
}

/// Kubernetes' replication manager: ReplicationControllers (v1) kept by the
/// ReplicaSet logic.
pub struct ReplicationManager(ReplicaSetController);

impl ReplicationManager {
    /// Builds the controller on the shared informers (ReplicationControllers and Pods).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let sets = Owners::ReplicationControllers(informers.cache());
        let ctl = Arc::new(ReplicationManager(ReplicaSetController::on(
            client, informers, sets,
        )));
        Controller::new(ctl, WorkQueue::new())
            .for_own::<ReplicationController>(informers)?
            .watches::<Pod, _>(informers, |c, ev| c.0.pod_keys(ev))
    }
}

impl Reconciler for ReplicationManager {
    const NAME: &'static str = "replicationcontroller";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.0.sync(key).await
    }
}

impl Reconciler for ReplicaSetController {
    const NAME: &'static str = "replicaset";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let rs = self.sets.get(key)?;
        let settled = crate::journey::replicaset_settled(&rs);
        crate::journey::context_unless(&self.client, &rs.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.sync(key).await
    }
}

impl ReplicaSetController {
    /// Converges one ReplicaSet: claim pods, create or delete, report status.
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        self.reconciles.fetch_add(1, atomic::Ordering::Relaxed);
        let Some(rs) = self.sets.get(key) else {
            self.expectations.forget(key);
            return Ok(Action::Done);
        };
        let ns = ns_of(&rs.metadata);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let spec = rs.spec.clone();
        let Ok(selector) = Selector::from_label_selector(&spec.selector) else {
            return Ok(Action::Done);
        };
        let pods = self.pods.by_index(NAMESPACE_INDEX, &ns);
        let claims = claim(&rs, &selector, &pods);
        let pod_api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        let mut owned = claims.owned.clone();
        let (api_version, kind) = self.sets.kind();
        let me = ownership::controller_ref(api_version, kind, &rs.metadata);
        for p in &claims.adopt {
            if let Some(adopted) = ownership::adopt(&pod_api, p, &me).await? {
                owned.push(Arc::new(adopted));
            }
        }
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        for p in &claims.release {
            ownership::release(&pod_api, p, &uid).await?;
        }
        let mut active: Vec<Arc<Pod>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
        let settled = self.satisfied(key);
        if rs.metadata.deletion_timestamp.is_none() && settled {
            let diff = plan(spec.replicas.unwrap_or(1), active.len());
            if diff > 0 {
                self.create_pods(key, &rs, diff as usize).await?;
            } else if diff < 0 {
                active.sort_by(|a, b| deletion_order(a, b));
                let victims: Vec<Arc<Pod>> =
                    active.iter().take((-diff) as usize).cloned().collect();
                self.expectations.expect(key, 0, victims.len() as i64);
                let mut said = Vec::new();
                let mut failure = None;
                for v in victims {
                    let victim = v.metadata.name.as_deref().unwrap_or("");
                    match pod_api.delete(victim, &DeleteParams::default()).await {
                        Ok(_) => said.push((
                            EventType::Normal,
                            "SuccessfulDelete",
                            format!("Deleted pod: {victim}"),
                        )),
                        Err(e) => {
                            self.observed(key, 0, 1);
                            if !e.is_not_found() {
                                said.push((
                                    EventType::Warning,
                                    "FailedDelete",
                                    format!("Error deleting: {e}"),
                                ));
                                failure = Some(e);
                                break;
                            }
                        }
                    }
                }
                self.events(&rs, said);
                if let Some(e) = failure {
                    return Err(e);
                }
            }
        }
        let (status, next_available) = status(&rs, &owned, chrono::Utc::now());
        let current = serde_json::to_value(&rs.status).unwrap_or(Value::Null);
        let changed = [
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ]
        .iter()
        .any(|f| current.get(*f).cloned().unwrap_or(json!(0)) != status[*f]);
        if changed {
            let rs_api = self.client.dynamic(self.sets.info(), Some(&ns));
            match rs_api
                .patch(
                    &name,
                    Some("status"),
                    content::MERGE_PATCH,
                    &json!({"status": status}),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        // A pod that becomes available by itself (minReadySeconds) changes the status.
        Ok(crate::expectations::action_or_wake(settled, next_available))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs() -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d", "uid": "rs-uid", "generation": 2},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .unwrap()
    }

    fn pod(
        name: &str,
        labels: serde_json::Value,
        owner: Option<&str>,
        extra: serde_json::Value,
    ) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "namespace": "d", "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"containers": []}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": o, "controller": true}]);
        }
        json_patch::merge(&mut v, &extra);
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn claims_adopt_orphans_and_release_mismatches() {
        let sel = Selector::parse("app=web").unwrap();
        let pods = vec![
            pod("mine", json!({"app": "web"}), Some("rs-uid"), json!({})),
            pod("orphan", json!({"app": "web"}), None, json!({})),
            pod("theirs", json!({"app": "web"}), Some("other"), json!({})),
            pod(
                "relabelled",
                json!({"app": "db"}),
                Some("rs-uid"),
                json!({}),
            ),
            pod("unrelated", json!({"app": "db"}), None, json!({})),
        ];
        let c = claim(&rs(), &sel, &pods);
        let names = |v: &[Arc<Pod>]| {
            v.iter()
                .map(|p| p.metadata.name.clone().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&c.owned), vec!["mine"]);
        assert_eq!(names(&c.adopt), vec!["orphan"]);
        assert_eq!(names(&c.release), vec!["relabelled"]);
    }

    #[test]
    fn replica_arithmetic_and_slow_start() {
        assert_eq!(plan(3, 1), 2);
        assert_eq!(plan(1, 4), -3);
        assert_eq!(plan(0, 0), 0);
        assert_eq!(slow_start(0), Vec::<usize>::new());
        assert_eq!(slow_start(1), vec![1]);
        assert_eq!(slow_start(10), vec![1, 2, 4, 3]);
        assert_eq!(slow_start(16).iter().sum::<usize>(), 16);
    }

    #[test]
    fn least_valuable_pods_go_first() {
        let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, "spec": {"nodeName": "n"}});
        let mut pods = [
            pod("ready-old", json!({}), None, ready.clone()),
            pod("ready-new", json!({}), None, {
                let mut r = ready.clone();
                r["metadata"] = json!({"creationTimestamp": "2026-06-01T00:00:00Z"});
                r
            }),
            pod(
                "running-unready",
                json!({}),
                None,
                json!({"status": {"phase": "Running"}, "spec": {"nodeName": "n"}}),
            ),
            pod(
                "pending-scheduled",
                json!({}),
                None,
                json!({"status": {"phase": "Pending"}, "spec": {"nodeName": "n"}}),
            ),
            pod(
                "unscheduled",
                json!({}),
                None,
                json!({"status": {"phase": "Pending"}}),
            ),
            pod("crashy", json!({}), None, {
                let mut r = ready.clone();
                r["status"]["containerStatuses"] = json!([{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 5}]);
                r
            }),
        ];
        pods.sort_by(|a, b| deletion_order(a, b));
        let order: Vec<String> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            order,
            vec![
                "unscheduled",
                "pending-scheduled",
                "running-unready",
                "crashy",
                "ready-new",
                "ready-old"
            ]
        );
    }

    #[test]
    fn status_counts() {
        let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let owned = vec![
            pod(
                "a",
                json!({"app": "web", "tier": "fe"}),
                Some("rs-uid"),
                ready.clone(),
            ),
            pod(
                "b",
                json!({"app": "web"}),
                Some("rs-uid"),
                json!({"status": {"phase": "Pending"}}),
            ),
            pod(
                "done",
                json!({"app": "web"}),
                Some("rs-uid"),
                json!({"status": {"phase": "Succeeded"}}),
            ),
        ];
        let now = chrono::Utc::now();
        assert_eq!(
            status(&rs(), &owned, now),
            (
                json!({"replicas": 2, "fullyLabeledReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 2}),
                None
            )
        );

        // minReadySeconds: ready 4 s ago, available after 10 s: 6 s to go.
        let since = (now - chrono::Duration::seconds(4)).to_rfc3339();
        let just_ready = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": since}]}});
        let mut slow = rs();
        slow.spec.min_ready_seconds = Some(10);
        let owned = vec![pod(
            "a",
            json!({"app": "web", "tier": "fe"}),
            Some("rs-uid"),
            just_ready,
        )];
        let (st, next) = status(&slow, &owned, now);
        assert_eq!(
            (&st["readyReplicas"], &st["availableReplicas"]),
            (&json!(1), &json!(0))
        );
        let next = next.unwrap().as_secs_f64();
        assert!((5.0..=6.0).contains(&next), "{next}");
    }
}
