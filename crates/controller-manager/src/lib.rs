//! The minik8s controller manager: controllers that drive observed state
//! toward desired state, each a pure core plus a thin I/O shell.
//!
//! ```text
//!  informers (one watch per kind) ──events──▶ queue (keys) ──▶ workers ──▶ reconcile(key)
//!                                                                           │
//!                       create / delete / patch through the apiserver ◀─────┘
//! ```
//!
//! Controllers so far: ReplicaSet (`replicaset.rs`), the garbage collector (`gc.rs`)
//! and Endpoints/EndpointSlices (`endpoints.rs`).

pub mod endpoints;
pub mod gc;
pub mod leader;
pub mod metrics;
pub mod replicaset;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_api::selector::Selector;
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::{
    Api, Cache, Client, ClientError, DeleteParams, Informer, ListParams, WorkQueue,
};
use replicaset::{claim, controller_of, deletion_order, is_active, plan, slow_start};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long unobserved creates/deletes hold back a ReplicaSet (Kubernetes: 5 min).
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates and deletes a ReplicaSet has asked for but not yet seen through the watch,
/// so a slow watch never causes double creates (Kubernetes' ControllerExpectations).
#[derive(Debug, Clone, Copy)]
struct Expectation {
    adds: i64,
    dels: i64,
    deadline: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct ReplicaSetController {
    client: Client,
    sets: Cache<ReplicaSet>,
    pods: Cache<Pod>,
    queue: WorkQueue<String>,
    expectations: Mutex<HashMap<String, Expectation>>,
    pub reconciles: AtomicU64,
}

fn ns_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".into())
}

impl ReplicaSetController {
    fn observed(&self, rs_key: &str, add: i64, del: i64) {
        if let Some(e) = lock(&self.expectations).get_mut(rs_key) {
            e.adds -= add;
            e.dels -= del;
        }
    }

    fn satisfied(&self, rs_key: &str) -> bool {
        match lock(&self.expectations).get(rs_key) {
            None => true,
            Some(e) => (e.adds <= 0 && e.dels <= 0) || Instant::now() > e.deadline,
        }
    }

    /// Queues every ReplicaSet in the pod's namespace whose selector matches it (for adoption).
    fn enqueue_matching(&self, pod: &Pod) {
        let ns = ns_of(&pod.metadata);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        for rs in self.sets.by_index("namespace", &ns) {
            let sel = rs
                .spec
                .as_ref()
                .and_then(|s| Selector::from_label_selector(&s.selector).ok());
            if sel.is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                self.queue.add(object_key(&rs.metadata));
            }
        }
    }

    fn owner_key(pod: &Pod) -> Option<String> {
        controller_of(&pod.metadata)
            .filter(|(_, kind, _)| kind == "ReplicaSet")
            .map(|(_, _, name)| format!("{}/{}", ns_of(&pod.metadata), name))
    }

    fn on_pod(&self, ev: &Event<Pod>) {
        match ev {
            Event::Added(p) => match Self::owner_key(p) {
                Some(k) => {
                    self.observed(&k, 1, 0);
                    self.queue.add(k);
                }
                None => self.enqueue_matching(p),
            },
            Event::Updated { old, new } => {
                for k in [Self::owner_key(old), Self::owner_key(new)]
                    .into_iter()
                    .flatten()
                {
                    self.queue.add(k);
                }
                if old.metadata.labels != new.metadata.labels || Self::owner_key(new).is_none() {
                    self.enqueue_matching(new);
                }
            }
            Event::Deleted(p) => {
                if let Some(k) = Self::owner_key(p) {
                    self.observed(&k, 0, 1);
                    self.queue.add(k);
                }
            }
        }
    }

    /// Converges one ReplicaSet: claim pods, create or delete, report status.
    pub async fn reconcile(&self, key: &str) -> Result<(), ClientError> {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let Some(rs) = self.sets.get(key) else {
            lock(&self.expectations).remove(key);
            return Ok(());
        };
        let ns = ns_of(&rs.metadata);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let spec = rs.spec.clone().unwrap_or_default();
        let Ok(selector) = Selector::from_label_selector(&spec.selector) else {
            return Ok(());
        };
        let pods = self.pods.by_index("namespace", &ns);
        let claims = claim(&rs, &selector, &pods);
        let pod_api = self
            .client
            .dynamic(registry::by_kind("v1", "Pod").expect("pods"), Some(&ns));
        let mut owned = claims.owned.clone();
        let me = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": rs.metadata.uid, "controller": true, "blockOwnerDeletion": true});
        for p in &claims.adopt {
            let mut refs: Vec<Value> = serde_json::to_value(&p.metadata.owner_references)
                .ok()
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            refs.push(me.clone());
            let patch = json!({"metadata": {"ownerReferences": refs, "resourceVersion": p.metadata.resource_version}});
            match pod_api
                .patch(
                    p.metadata.name.as_deref().unwrap_or(""),
                    None,
                    content::MERGE_PATCH,
                    &patch,
                )
                .await
            {
                Ok(v) => owned.push(Arc::new(
                    serde_json::from_value(v).map_err(|e| ClientError::Decode(e.to_string()))?,
                )),
                Err(e) if e.is_conflict() || e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        for p in &claims.release {
            let uid = rs.metadata.uid.clone().unwrap_or_default();
            let refs: Vec<Value> = serde_json::to_value(&p.metadata.owner_references)
                .ok()
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r["uid"] != uid.as_str())
                .collect();
            let patch = json!({"metadata": {"ownerReferences": refs, "resourceVersion": p.metadata.resource_version}});
            match pod_api
                .patch(
                    p.metadata.name.as_deref().unwrap_or(""),
                    None,
                    content::MERGE_PATCH,
                    &patch,
                )
                .await
            {
                Ok(_) | Err(ClientError::Api(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let mut active: Vec<Arc<Pod>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
        if rs.metadata.deletion_timestamp.is_none() && self.satisfied(key) {
            let diff = plan(spec.replicas.unwrap_or(1), active.len());
            if diff > 0 {
                self.create_pods(key, &rs, diff as usize).await?;
            } else if diff < 0 {
                active.sort_by(|a, b| deletion_order(a, b));
                let victims: Vec<Arc<Pod>> =
                    active.iter().take((-diff) as usize).cloned().collect();
                lock(&self.expectations).insert(
                    key.to_string(),
                    Expectation {
                        adds: 0,
                        dels: victims.len() as i64,
                        deadline: Instant::now() + EXPECTATION_TIMEOUT,
                    },
                );
                for v in victims {
                    if let Err(e) = pod_api
                        .delete(
                            v.metadata.name.as_deref().unwrap_or(""),
                            &DeleteParams::default(),
                        )
                        .await
                    {
                        self.observed(key, 0, 1);
                        if !e.is_not_found() {
                            return Err(e);
                        }
                    }
                }
            }
        }
        let status = replicaset::status(&rs, &owned);
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
            let rs_api = self.client.dynamic(
                registry::by_kind("apps/v1", "ReplicaSet").expect("replicasets"),
                Some(&ns),
            );
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
        Ok(())
    }

    /// Creates `n` pods from the template in slow-start batches (1, 2, 4, ...).
    async fn create_pods(&self, key: &str, rs: &ReplicaSet, n: usize) -> Result<(), ClientError> {
        let ns = ns_of(&rs.metadata);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let template = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.clone())
            .unwrap_or_default();
        let tmeta = template.metadata.clone().unwrap_or_default();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": format!("{name}-"), "namespace": ns, "labels": tmeta.labels, "annotations": tmeta.annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": rs.metadata.uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": template.spec});
        let api = self
            .client
            .dynamic(registry::by_kind("v1", "Pod").expect("pods"), Some(&ns));
        lock(&self.expectations).insert(
            key.to_string(),
            Expectation {
                adds: n as i64,
                dels: 0,
                deadline: Instant::now() + EXPECTATION_TIMEOUT,
            },
        );
        let mut left = n;
        for batch in slow_start(n) {
            let results = futures::future::join_all((0..batch).map(|_| api.create(&pod))).await;
            left -= batch;
            let failed: Vec<ClientError> = results.into_iter().filter_map(Result::err).collect();
            if !failed.is_empty() {
                // Creates that failed (and the batches skipped) will never be observed.
                self.observed(key, (failed.len() + left) as i64, 0);
                return Err(failed.into_iter().next().expect("non-empty"));
            }
        }
        Ok(())
    }
}

/// An informer whose cache is indexed by namespace.
fn namespaced_informer<K>(client: &Client) -> Informer<K>
where
    K: minik8s_client::rest::Resource
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    let informer = Informer::new(Api::<K>::all(client), ListParams::default());
    let by_namespace: minik8s_client::informer::IndexFn<K> =
        Arc::new(|o: &K| vec![ns_of(o.metadata())]);
    informer.cache().add_index("namespace", by_namespace);
    informer
}

/// Queues each changed object's own key (the controller reconciles that object).
fn enqueue_own_key<K>(informer: &mut Informer<K>, queue: &WorkQueue<String>)
where
    K: minik8s_client::rest::Resource
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    let queue = queue.clone();
    informer.on_event(move |ev| queue.add(object_key(ev.object().metadata())));
}

/// `workers` workers draining `queue` with `reconcile`; a failed key comes back with backoff.
async fn run_workers<F, Fut>(
    queue: WorkQueue<String>,
    workers: usize,
    what: &'static str,
    reconcile: F,
) where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), ClientError>> + Send,
{
    metrics::register(what, &queue);
    let mut tasks = Vec::new();
    for _ in 0..workers.max(1) {
        let (queue, reconcile) = (queue.clone(), reconcile.clone());
        tasks.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                let result = reconcile(key.clone()).await;
                metrics::reconciled(what, result.is_ok());
                match result {
                    Ok(()) => queue.forget(&key),
                    Err(e) => {
                        tracing::warn!(controller = what, %key, error = %e, "reconcile failed; retrying");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        }));
    }
    futures::future::join_all(tasks).await;
}

/// Runs the ReplicaSet controller with `workers` workers until the process ends.
pub async fn run_replicasets(client: Client, workers: usize) -> anyhow::Result<()> {
    let (ctl, informers) = replicaset_controller(client);
    for inf in informers {
        tokio::spawn(inf);
    }
    ctl.sets.wait_synced().await;
    ctl.pods.wait_synced().await;
    let c = ctl.clone();
    run_workers(ctl.queue.clone(), workers, "replicaset", move |key| {
        let c = c.clone();
        async move { c.reconcile(&key).await }
    })
    .await;
    Ok(())
}

type InformerTask = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The controller and its informer loops (spawn them, then run the workers).
pub fn replicaset_controller(client: Client) -> (Arc<ReplicaSetController>, Vec<InformerTask>) {
    let mut set_informer = namespaced_informer::<ReplicaSet>(&client);
    let mut pod_informer = namespaced_informer::<Pod>(&client);
    let ctl = Arc::new(ReplicaSetController {
        client,
        sets: set_informer.cache(),
        pods: pod_informer.cache(),
        queue: WorkQueue::new(),
        expectations: Mutex::default(),
        reconciles: AtomicU64::new(0),
    });
    enqueue_own_key(&mut set_informer, &ctl.queue);
    let c = Arc::downgrade(&ctl);
    pod_informer.on_event(move |ev| {
        if let Some(c) = c.upgrade() {
            c.on_pod(ev);
        }
    });
    (
        ctl,
        vec![Box::pin(set_informer.run()), Box::pin(pod_informer.run())],
    )
}

/// Runs the garbage collector: a sweep after any change (debounced) and every 5 s.
pub async fn run_gc(client: Client) -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
    let wake = Arc::new(tokio::sync::Notify::new());
    let mut sources: Vec<Arc<dyn gc::Source>> = Vec::new();
    macro_rules! watch_kind {
        ($t:ty, $api_version:expr, $kind:expr) => {{
            let mut inf = Informer::new(Api::<$t>::all(&client), ListParams::default());
            let w = wake.clone();
            inf.on_event(move |_| w.notify_one());
            let info = registry::by_kind($api_version, $kind).expect("registered");
            sources.push(Arc::new((info, inf.cache())));
            let cache = inf.cache();
            tokio::spawn(inf.run());
            cache
        }};
    }
    let pods = watch_kind!(Pod, "v1", "Pod");
    let sets = watch_kind!(ReplicaSet, "apps/v1", "ReplicaSet");
    let stss = watch_kind!(StatefulSet, "apps/v1", "StatefulSet");
    let revs = watch_kind!(ControllerRevision, "apps/v1", "ControllerRevision");
    pods.wait_synced().await;
    sets.wait_synced().await;
    stss.wait_synced().await;
    revs.wait_synced().await;
    let collector = gc::GarbageCollector { client, sources };
    loop {
        if let Err(e) = collector.sweep().await {
            tracing::warn!(error = %e, "garbage collection sweep failed");
        }
        tokio::select! {
            _ = wake.notified() => tokio::time::sleep(Duration::from_millis(100)).await,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// Keeps each Service's Endpoints and EndpointSlices in line with its pods.
pub struct EndpointsController {
    client: Client,
    services: Cache<k8s_openapi::api::core::v1::Service>,
    pods: Cache<Pod>,
    queue: WorkQueue<String>,
}

impl EndpointsController {
    /// Services in the pod's namespace whose selector matches the pod.
    fn services_for(&self, pod: &Pod) -> Vec<String> {
        let ns = ns_of(&pod.metadata);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.services
            .by_index("namespace", &ns)
            .iter()
            .filter(|s| {
                endpoints::selector(s)
                    .is_some_and(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
            .map(|s| object_key(&s.metadata))
            .collect()
    }

    fn on_pod(&self, ev: &Event<Pod>) {
        let mut keys = self.services_for(ev.object());
        if let Event::Updated { old, .. } = ev {
            keys.extend(self.services_for(old));
        }
        for k in keys {
            self.queue.add(k);
        }
    }

    /// Converges one Service's Endpoints and EndpointSlices.
    pub async fn reconcile(&self, key: &str) -> Result<(), ClientError> {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let ep_api = self.client.dynamic(
            registry::by_kind("v1", "Endpoints").expect("endpoints"),
            Some(ns),
        );
        let slice_api = self.client.dynamic(
            registry::by_kind("discovery.k8s.io/v1", "EndpointSlice").expect("endpointslices"),
            Some(ns),
        );
        let existing: Vec<Value> = slice_api
            .list(
                &ListParams::default().labels(&format!("{}={name}", endpoints::SERVICE_NAME_LABEL)),
            )
            .await?["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let svc = self.services.get(key);
        let Some(svc) = svc.filter(|s| endpoints::selector(s).is_some()) else {
            // Gone, or without a selector (then its endpoints are the user's to manage).
            if self.services.get(key).is_none() {
                match ep_api.delete(name, &DeleteParams::default()).await {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
            for sl in existing {
                let n = sl["metadata"]["name"].as_str().unwrap_or("");
                match slice_api.delete(n, &DeleteParams::default()).await {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
            return Ok(());
        };
        let (want_ep, want_slices) = endpoints::desired(&svc, &self.pods.by_index("namespace", ns));
        match ep_api.get(name).await {
            Err(e) if e.is_not_found() => {
                ep_api.create(&want_ep).await?;
            }
            Err(e) => return Err(e),
            Ok(cur) => {
                if cur["subsets"].as_array().cloned().unwrap_or_default()
                    != want_ep["subsets"].as_array().cloned().unwrap_or_default()
                {
                    let mut next = want_ep.clone();
                    next["metadata"]["resourceVersion"] =
                        cur["metadata"]["resourceVersion"].clone();
                    ep_api.replace(name, &next).await?;
                }
            }
        }
        for want in &want_slices {
            let n = want["metadata"]["name"].as_str().unwrap_or("");
            match existing.iter().find(|e| e["metadata"]["name"] == n) {
                None => {
                    slice_api.create(want).await?;
                }
                Some(cur)
                    if cur["endpoints"].as_array().cloned().unwrap_or_default()
                        != want["endpoints"].as_array().cloned().unwrap_or_default()
                        || cur["ports"] != want["ports"] =>
                {
                    let mut next = want.clone();
                    next["metadata"]["resourceVersion"] =
                        cur["metadata"]["resourceVersion"].clone();
                    slice_api.replace(n, &next).await?;
                }
                Some(_) => {}
            }
        }
        for stale in existing.iter().filter(|e| {
            !want_slices
                .iter()
                .any(|w| w["metadata"]["name"] == e["metadata"]["name"])
        }) {
            match slice_api
                .delete(
                    stale["metadata"]["name"].as_str().unwrap_or(""),
                    &DeleteParams::default(),
                )
                .await
            {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Runs the Endpoints/EndpointSlice controller until the process ends.
pub async fn run_endpoints(client: Client, workers: usize) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Service;
    let mut svc_informer = namespaced_informer::<Service>(&client);
    let mut pod_informer = namespaced_informer::<Pod>(&client);
    let ctl = Arc::new(EndpointsController {
        client,
        services: svc_informer.cache(),
        pods: pod_informer.cache(),
        queue: WorkQueue::new(),
    });
    enqueue_own_key(&mut svc_informer, &ctl.queue);
    let c = Arc::downgrade(&ctl);
    pod_informer.on_event(move |ev| {
        if let Some(c) = c.upgrade() {
            c.on_pod(ev);
        }
    });
    let (svcs, pods) = (svc_informer.cache(), pod_informer.cache());
    tokio::spawn(svc_informer.run());
    tokio::spawn(pod_informer.run());
    svcs.wait_synced().await;
    pods.wait_synced().await;
    let c = ctl.clone();
    run_workers(ctl.queue.clone(), workers, "endpoints", move |key| {
        let c = c.clone();
        async move { c.reconcile(&key).await }
    })
    .await;
    Ok(())
}

/// Runs every controller until the process ends.
pub async fn run(client: Client, workers: usize) -> anyhow::Result<()> {
    tokio::select! {
        r = run_replicasets(client.clone(), workers) => r,
        r = run_gc(client.clone()) => r,
        r = run_endpoints(client, workers) => r,
    }
}
