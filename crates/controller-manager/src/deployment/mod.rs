//! The Deployment controller: rolls a pod template out through ReplicaSets,
//! one per template, named `<deployment>-<pod-template-hash>` (Kubernetes'
//! `pkg/controller/deployment`).
//!
//! ```text
//!  Deployment ──claim──▶ its ReplicaSets ──▶ new one (template matches) + old ones
//!      │
//!      ├─ deleting ─────────────────────────▶ status only
//!      ├─ paused, or replicas changed ──────▶ scale (proportionally) + status
//!      ├─ Recreate ─────▶ old to 0 ▶ wait for their pods ▶ new to replicas
//!      └─ RollingUpdate ▶ new grows within maxSurge ▶ old shrink within maxUnavailable
//!                                                            │
//!  status: counts, Available, Progressing (deadline) ◀───────┘ clean up history
//! ```
//!
//! The arithmetic is in [`rollout`], pure; this file reads the caches, writes
//! ReplicaSets and the status, and records ScalingReplicaSet events.

pub mod rollout;

use crate::ns_of;
use crate::ownership::{controller_of, controller_ref};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use minik8s_api::hash::revision_hash;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use minik8s_api::selector::Selector;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use rollout::RsView;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const TEMPLATE_HASH: &str = "pod-template-hash";
/// Annotations of the Deployment that are not copied to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS,
    MAX_REPLICAS,
];

/// A Progressing condition's (reason, message) to report.
pub type Note = (&'static str, String);

pub struct DeploymentController {
    client: Client,
    recorder: Recorder,
    deployments: Cache<Deployment>,
    sets: Cache<ReplicaSet>,
    pods: Cache<Pod>,
}

fn annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

fn revision_of(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn view(rs: &ReplicaSet) -> RsView {
    let status = rs.status.clone().unwrap_or_default();
    RsView {
        name: rs.metadata.name.clone().unwrap_or_default(),
        replicas: rs.spec.replicas.unwrap_or(0),
        status_replicas: status.replicas,
        ready: status.ready_replicas.unwrap_or(0),
        available: status.available_replicas.unwrap_or(0),
        max_replicas: annotation(&rs.metadata, MAX_REPLICAS).and_then(|v| v.parse().ok()),
    }
}

/// The template without the hash label the controller adds, for comparing a
/// ReplicaSet's template with the Deployment's.
fn template_without_hash(t: Option<&PodTemplateSpec>) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(TEMPLATE_HASH);
        if labels.is_empty() {
            v["metadata"].as_object_mut().map(|m| m.remove("labels"));
        }
    }
    v
}

/// The `pod-template-hash` of a template (with the collision count when a
/// name was already taken by another template).
pub fn template_hash(template: &Value, collision_count: i32) -> String {
    if collision_count == 0 {
        revision_hash(template)
    } else {
        revision_hash(&json!([template, collision_count]))
    }
}

/// The deployment's strategy numbers: (is rolling, max surge, max unavailable).
fn strategy_numbers(d: &Deployment) -> (bool, i32, i32) {
    let spec = d.spec.clone();
    let replicas = spec.replicas.unwrap_or(1);
    let strategy = spec.strategy.unwrap_or_default();
    if strategy.type_.as_deref() == Some("Recreate") {
        return (false, 0, 0);
    }
    let ru = strategy.rolling_update.unwrap_or_default();
    let (surge, unavailable) =
        rollout::fenceposts(ru.max_surge.as_ref(), ru.max_unavailable.as_ref(), replicas);
    (true, surge, unavailable.min(replicas))
}

impl DeploymentController {
    /// Builds the controller on the shared informers (Deployments, ReplicaSets
    /// and, for Recreate's wait, Pods).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(DeploymentController {
            recorder: Recorder::new(client.clone(), "deployment-controller"),
            client,
            deployments: informers.cache(),
            sets: informers.cache(),
            pods: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Deployment>(informers)?
            .owns::<ReplicaSet>(informers, "Deployment")?
            .watches::<Pod, _>(informers, |me, ev| me.deployment_of_pod(ev))
    }

    /// A pod's Deployment (through its ReplicaSet): Recreate waits for old pods to go.
    fn deployment_of_pod(&self, ev: &Event<Pod>) -> Vec<String> {
        let Event::Deleted(pod) = ev else {
            return Vec::new();
        };
        let ns = ns_of(&pod.metadata);
        controller_of(&pod.metadata)
            .filter(|(_, kind, _)| kind == "ReplicaSet")
            .and_then(|(_, _, rs)| self.sets.get(&format!("{ns}/{rs}")))
            .and_then(|rs| controller_of(&rs.metadata))
            .filter(|(_, kind, _)| kind == "Deployment")
            .map(|(_, _, d)| vec![format!("{ns}/{d}")])
            .unwrap_or_default()
    }

    /// The ReplicaSets the Deployment controls, adopting orphans its selector matches.
    async fn claim_sets(
        &self,
        d: &Deployment,
        selector: &Selector,
    ) -> Result<Vec<Arc<ReplicaSet>>, ClientError> {
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let ns = ns_of(&d.metadata);
        let api = self.client.dynamic(registry::of::<ReplicaSet>(), Some(&ns));
        let mut owned = Vec::new();
        for rs in self.sets.by_index(NAMESPACE_INDEX, &ns) {
            let labels = rs.metadata.labels.clone().unwrap_or_default();
            match controller_of(&rs.metadata) {
                Some((owner, _, _)) if owner == uid => owned.push(rs),
                None if selector.matches(&labels)
                    && d.metadata.deletion_timestamp.is_none()
                    && rs.metadata.deletion_timestamp.is_none() =>
                {
                    let me = controller_ref("apps/v1", "Deployment", &d.metadata);
                    let patch = crate::ownership::adopt_patch(&rs.metadata, &me);
                    let name = rs.metadata.name.as_deref().unwrap_or("");
                    match api.patch(name, None, content::MERGE_PATCH, &patch).await {
                        Ok(v) => owned.push(Arc::new(
                            serde_json::from_value(v)
                                .map_err(|e| ClientError::Decode(e.to_string()))?,
                        )),
                        Err(e) if e.is_conflict() || e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                }
                _ => {}
            }
        }
        Ok(owned)
    }

    /// Scales `rs` to `to` (with the annotations proportional scaling reads)
    /// and records the event. Returns the ReplicaSet as written.
    async fn scale(
        &self,
        d: &Deployment,
        rs: &ReplicaSet,
        to: i32,
        surge: i32,
    ) -> Result<ReplicaSet, ClientError> {
        let from = rs.spec.replicas.unwrap_or(0);
        let replicas = d.spec.replicas.unwrap_or(1);
        let (desired, max) = (replicas.to_string(), (replicas + surge).to_string());
        if from == to
            && annotation(&rs.metadata, DESIRED_REPLICAS).as_deref() == Some(desired.as_str())
            && annotation(&rs.metadata, MAX_REPLICAS).as_deref() == Some(max.as_str())
        {
            return Ok(rs.clone());
        }
        let api = self.client.dynamic(
            registry::of::<ReplicaSet>(),
            rs.metadata.namespace.as_deref(),
        );
        let patch = json!({"metadata": {"annotations": {DESIRED_REPLICAS: desired, MAX_REPLICAS: max}},
                           "spec": {"replicas": to}});
        let name = rs.metadata.name.clone().unwrap_or_default();
        let written = api.patch(&name, None, content::MERGE_PATCH, &patch).await?;
        if from != to {
            let way = if to > from { "up" } else { "down" };
            let note = format!("Scaled {way} replica set {name} from {from} to {to}");
            self.recorder
                .event(d, EventType::Normal, "ScalingReplicaSet", &note)
                .await;
        }
        serde_json::from_value(written).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// Creates the ReplicaSet of the current template with `replicas` pods,
    /// under `revision`; returns it with the Progressing note it deserves.
    /// On a name taken by another template, bumps `status.collisionCount`
    /// and returns None: the next reconcile picks a new name.
    async fn create_new_set(
        &self,
        d: &Deployment,
        revision: i64,
        replicas: i32,
        surge: i32,
    ) -> Result<Option<(Arc<ReplicaSet>, Note)>, ClientError> {
        let count = d
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let template = template_without_hash(Some(&d.spec.template));
        let hash = &template_hash(&template, count);
        let ns = ns_of(&d.metadata);
        let name = format!("{}-{hash}", d.metadata.name.as_deref().unwrap_or(""));
        let spec = d.spec.clone();
        let mut template = serde_json::to_value(&spec.template).unwrap_or(json!({}));
        template["metadata"]["labels"][TEMPLATE_HASH] = json!(hash);
        let mut selector = serde_json::to_value(&spec.selector).unwrap_or(json!({}));
        selector["matchLabels"][TEMPLATE_HASH] = json!(hash);
        let mut labels = serde_json::to_value(
            spec.template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone()),
        )
        .unwrap_or(json!({}));
        if !labels.is_object() {
            labels = json!({});
        }
        labels[TEMPLATE_HASH] = json!(hash);
        let mut annotations = json!({});
        for (k, v) in d.metadata.annotations.iter().flatten() {
            if !NOT_COPIED.contains(&k.as_str()) {
                annotations[k] = json!(v);
            }
        }
        annotations[REVISION] = json!(revision.to_string());
        annotations[DESIRED_REPLICAS] = json!(spec.replicas.unwrap_or(1).to_string());
        annotations[MAX_REPLICAS] = json!((spec.replicas.unwrap_or(1) + surge).to_string());
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations,
                         "ownerReferences": [controller_ref("apps/v1", "Deployment", &d.metadata)]},
            "spec": {"replicas": replicas, "minReadySeconds": spec.min_ready_seconds.unwrap_or(0),
                     "selector": selector, "template": template}});
        let api = self.client.dynamic(registry::of::<ReplicaSet>(), Some(&ns));
        match api.create(&rs).await {
            Ok(v) => {
                if replicas > 0 {
                    let note = format!("Scaled up replica set {name} from 0 to {replicas}");
                    self.recorder
                        .event(d, EventType::Normal, "ScalingReplicaSet", &note)
                        .await;
                }
                let rs: ReplicaSet =
                    serde_json::from_value(v).map_err(|e| ClientError::Decode(e.to_string()))?;
                let note = (
                    "NewReplicaSetCreated",
                    format!("Created new replica set \"{name}\""),
                );
                Ok(Some((Arc::new(rs), note)))
            }
            Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
                let count = d
                    .status
                    .as_ref()
                    .and_then(|s| s.collision_count)
                    .unwrap_or(0)
                    + 1;
                self.client
                    .patch_status::<Deployment>(
                        &d.metadata,
                        content::MERGE_PATCH,
                        &json!({"status": {"collisionCount": count}}),
                    )
                    .await?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Old ReplicaSets beyond `revisionHistoryLimit` that are empty go, oldest first.
    async fn clean_up(&self, d: &Deployment, old: &[Arc<ReplicaSet>]) -> Result<(), ClientError> {
        let Some(limit) = d.spec.revision_history_limit else {
            return Ok(());
        };
        let mut empty: Vec<&Arc<ReplicaSet>> = old
            .iter()
            .filter(|rs| {
                let v = view(rs);
                v.replicas == 0
                    && v.status_replicas == 0
                    && rs.metadata.deletion_timestamp.is_none()
            })
            .collect();
        let excess = empty.len().saturating_sub(limit.max(0) as usize);
        empty.sort_by_key(|rs| revision_of(rs));
        let api = self
            .client
            .dynamic(registry::of::<ReplicaSet>(), Some(&ns_of(&d.metadata)));
        for rs in empty.into_iter().take(excess) {
            let name = rs.metadata.name.as_deref().unwrap_or("");
            match api.delete(name, &DeleteParams::default()).await {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Pods of the old ReplicaSets that have not finished (Recreate waits for them).
    fn old_pods_running(&self, ns: &str, old: &[Arc<ReplicaSet>]) -> bool {
        let uids: Vec<String> = old
            .iter()
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        self.pods.by_index(NAMESPACE_INDEX, ns).iter().any(|p| {
            let finished = matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            !finished && controller_of(&p.metadata).is_some_and(|(uid, _, _)| uids.contains(&uid))
        })
    }
}

mod sync;

#[cfg(test)]
mod tests;
