//! The StatefulSet controller: pods with stable ordinal names (`web-0`,
//! `web-1`, ...), created in order or in parallel, updated from the highest
//! ordinal down to `partition`, scaled down from the highest ordinal.
//!
//! ```text
//!   StatefulSet web (replicas 3, ordinals.start 0)
//!       │ owns                         ControllerRevisions web-<hash>
//!       ▼                              (one per template seen; pods carry
//!   web-0   web-1   web-2                controller-revision-hash)
//!   hostname = pod name, subdomain = spec.serviceName
//! ```
//!
//! The pure core ([`plan`], [`status`]) decides from a [`SetView`] and the
//! pods' [`PodView`]s; `reconcile` is the I/O shell, as in Kubernetes'
//! `pkg/controller/statefulset` (`stateful_set_control.go`). The LeaderWorkerSet
//! controller builds its groups out of StatefulSets, so the semantics it relies
//! on (Parallel, `ordinals.start`, partition, maxUnavailable) are exact here.

pub mod claims;

use crate::history;
use crate::ns_of;
use crate::ownership::{controller_of, controller_ref, is_ready};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use minik8s_api::lws::scaled_value;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// What the core needs to know about a StatefulSet.
#[derive(Debug, Clone, PartialEq)]
pub struct SetView {
    pub name: String,
    pub replicas: i32,
    /// `spec.ordinals.start`: the first pod is `<name>-<start>`.
    pub start: i32,
    /// podManagementPolicy Parallel (else OrderedReady: one pod at a time,
    /// each Running and Ready before the next).
    pub parallel: bool,
    /// RollingUpdate `(partition, maxUnavailable)`; `None` means OnDelete.
    pub rolling: Option<(i32, i32)>,
}

impl SetView {
    pub fn from(set: &StatefulSet) -> SetView {
        let spec = set.spec.clone();
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let strategy = spec.update_strategy.unwrap_or_default();
        let rolling = match strategy.type_.as_deref() {
            Some("OnDelete") => None,
            _ => {
                let ru = strategy.rolling_update.unwrap_or_default();
                let max_unavailable = ru
                    .max_unavailable
                    .and_then(|v| serde_json::to_value(v).ok())
                    .and_then(|v| scaled_value(&v, replicas as i64, false))
                    .unwrap_or(1)
                    .max(1) as i32;
                Some((ru.partition.unwrap_or(0).max(0), max_unavailable))
            }
        };
        SetView {
            name: set.metadata.name.clone().unwrap_or_default(),
            replicas,
            start: spec.ordinals.and_then(|o| o.start).unwrap_or(0).max(0),
            parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
            rolling,
        }
    }
}

/// What the core needs to know about one of the set's pods.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub name: String,
    pub ordinal: i32,
    pub revision: String,
    pub terminating: bool,
    /// Phase Succeeded or Failed: the pod must be replaced.
    pub finished: bool,
    /// Running with Ready=True and not terminating.
    pub healthy: bool,
}

impl PodView {
    pub fn from(set_name: &str, pod: &Pod) -> Option<PodView> {
        let name = pod.metadata.name.clone()?;
        let ordinal = ordinal_of(set_name, &name)?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let terminating = pod.metadata.deletion_timestamp.is_some();
        Some(PodView {
            ordinal,
            revision: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_LABEL))
                .cloned()
                .unwrap_or_default(),
            terminating,
            finished: matches!(phase, Some("Succeeded") | Some("Failed")),
            healthy: !terminating && phase == Some("Running") && is_ready(pod),
            name,
        })
    }
}

/// The ordinal of a pod named `<set>-<n>`.
pub fn ordinal_of(set_name: &str, pod_name: &str) -> Option<i32> {
    let rest = pod_name.strip_prefix(set_name)?.strip_prefix('-')?;
    if rest.is_empty()
        || !rest.bytes().all(|b| b.is_ascii_digit())
        || rest.starts_with("0") && rest.len() > 1
    {
        return None;
    }
    rest.parse().ok()
}

/// Which revision a new pod is created from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    Current,
    Update,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Create { ordinal: i32, revision: Revision },
    Delete { name: String },
}

/// The next steps toward the set's desired pods, in Kubernetes' order:
/// replace finished pods and create missing ones (lowest ordinal first),
/// delete condemned ordinals (highest first), then roll outdated pods from the
/// highest ordinal down to the partition, at most `maxUnavailable` unhealthy
/// at a time. OrderedReady stops at the first step that must be waited for.
pub fn plan(set: &SetView, pods: &[PodView], update_revision: &str) -> Vec<Step> {
    let monotonic = !set.parallel;
    let slot = |i: i32| pods.iter().find(|p| p.ordinal == set.start + i);
    let mut steps = Vec::new();
    for i in 0..set.replicas {
        match slot(i) {
            None => {
                let revision = match set.rolling {
                    Some((partition, _)) if i < partition => Revision::Current,
                    _ => Revision::Update,
                };
                steps.push(Step::Create {
                    ordinal: set.start + i,
                    revision,
                });
                if monotonic {
                    return steps;
                }
            }
            Some(p) if p.finished && !p.terminating => {
                steps.push(Step::Delete {
                    name: p.name.clone(),
                });
                if monotonic {
                    return steps;
                }
            }
            Some(p) if monotonic && !p.healthy => return steps,
            Some(_) => {}
        }
    }
    let mut condemned: Vec<&PodView> = pods
        .iter()
        .filter(|p| p.ordinal < set.start || p.ordinal >= set.start + set.replicas)
        .collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(p.ordinal));
    for p in condemned {
        if !p.terminating {
            steps.push(Step::Delete {
                name: p.name.clone(),
            });
        }
        if monotonic {
            return steps;
        }
    }
    let Some((partition, max_unavailable)) = set.rolling else {
        return steps;
    };
    let mut unavailable = (0..set.replicas)
        .filter(|i| !slot(*i).is_some_and(|p| p.healthy))
        .count() as i32;
    for i in (partition.min(set.replicas)..set.replicas).rev() {
        let Some(p) = slot(i) else { continue };
        if p.revision == update_revision || p.terminating {
            continue;
        }
        if p.healthy {
            // Taking a healthy pod down spends the unavailability budget;
            // replacing a broken one costs nothing.
            if unavailable >= max_unavailable {
                continue;
            }
            unavailable += 1;
        }
        steps.push(Step::Delete {
            name: p.name.clone(),
        });
        if monotonic {
            break;
        }
    }
    steps
}

/// The status counters of the set (`currentRevision` completes to the update
/// revision once every replica is updated and ready, as Kubernetes does).
pub fn status(
    set: &SetView,
    pods: &[PodView],
    current_revision: &str,
    update_revision: &str,
    generation: i64,
) -> Value {
    let count = |f: &dyn Fn(&PodView) -> bool| pods.iter().filter(|p| f(p)).count() as i32;
    let replicas = count(&|_| true);
    let ready = count(&|p| p.healthy);
    let updated = count(&|p| p.revision == update_revision);
    let mut current = count(&|p| p.revision == current_revision);
    let mut current_revision = current_revision;
    if updated == set.replicas && ready == set.replicas && replicas == set.replicas {
        current_revision = update_revision;
        current = updated;
    }
    json!({
        "observedGeneration": generation,
        "replicas": replicas,
        "readyReplicas": ready,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "availableReplicas": ready,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": 0,
    })
}

/// The pod for ordinal `ordinal` from `template`: stable name and hostname,
/// subdomain from `serviceName`, identity and revision labels, controller ref.
pub fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    ordinal: i32,
    revision: &str,
) -> Value {
    let name = set.metadata.name.clone().unwrap_or_default();
    let pod_name = format!("{name}-{ordinal}");
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let mut spec = serde_json::to_value(&template.spec).unwrap_or(json!({}));
    if !spec.is_object() {
        spec = json!({});
    }
    spec["hostname"] = json!(pod_name);
    if let Some(svc) = set.spec.service_name.as_deref().filter(|s| !s.is_empty()) {
        spec["subdomain"] = json!(svc);
    }
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": ns_of(&set.metadata), "labels": labels,
                     "annotations": meta.annotations,
                     "ownerReferences": [controller_ref("apps/v1", "StatefulSet", &set.metadata)]},
        "spec": spec});
    claims::with_claim_volumes(&mut pod, set, ordinal);
    pod
}

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct StatefulSetController {
    client: Client,
    recorder: Recorder,
    sets: Cache<StatefulSet>,
    pods: Cache<Pod>,
    revisions: Cache<ControllerRevision>,
    claims: Cache<PersistentVolumeClaim>,
}

fn template_value(set: &StatefulSet) -> Value {
    serde_json::to_value(&set.spec.template).unwrap_or(Value::Null)
}

impl StatefulSetController {
    /// Builds the controller on the shared informers (StatefulSets, their pods
    /// and revisions).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(StatefulSetController {
            recorder: Recorder::new(client.clone(), "statefulset-controller"),
            client,
            sets: informers.cache(),
            pods: informers.cache(),
            revisions: informers.cache(),
            claims: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<StatefulSet>(informers)?
            .owns::<Pod>(informers, "StatefulSet")
    }

    fn owned_pods(&self, set: &StatefulSet) -> Vec<Arc<Pod>> {
        let uid = set.metadata.uid.clone().unwrap_or_default();
        self.pods
            .by_index(NAMESPACE_INDEX, &ns_of(&set.metadata))
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|(u, _, _)| u == uid))
            .collect()
    }

    fn owned_revisions(&self, set: &StatefulSet) -> Vec<Arc<ControllerRevision>> {
        let uid = set.metadata.uid.clone().unwrap_or_default();
        self.revisions
            .by_index(NAMESPACE_INDEX, &ns_of(&set.metadata))
            .into_iter()
            .filter(|r| controller_of(&r.metadata).is_some_and(|(u, _, _)| u == uid))
            .collect()
    }

    /// Makes sure the ControllerRevision of the live template exists.
    async fn ensure_revision(
        &self,
        set: &StatefulSet,
        existing: &[Arc<ControllerRevision>],
        name: &str,
    ) -> Result<(), ClientError> {
        let owner = history::Owner {
            kind: "StatefulSet",
            meta: &set.metadata,
            template: template_value(set),
            hash_label: "controller.kubernetes.io/hash",
        };
        history::ensure_revision(&self.client, &owner, existing, name).await
    }

    /// The template a revision recorded (`data.spec.template`).
    fn revision_template(&self, ns: &str, name: &str) -> Option<PodTemplateSpec> {
        let rev = self.revisions.get(&format!("{ns}/{name}"))?;
        let mut t = rev.data.0.pointer("/spec/template")?.clone();
        t.as_object_mut()?.remove("$patch");
        serde_json::from_value(t).ok()
    }
}

impl Reconciler for StatefulSetController {
    const NAME: &'static str = "statefulset";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let set = self.sets.get(key)?;
        let settled = crate::journey::statefulset_settled(&set);
        crate::journey::context_unless(&self.client, &set.metadata, settled).await
    }

    /// Converges one StatefulSet: revisions, pods, status.
    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(set) = self.sets.get(key) else {
            return Ok(Action::Done);
        };
        if set.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let ns = ns_of(&set.metadata);
        let view = SetView::from(&set);
        let update_revision = history::revision_name(&view.name, &template_value(&set));
        let revisions = self.owned_revisions(&set);
        self.ensure_revision(&set, &revisions, &update_revision)
            .await?;
        let current_revision = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| update_revision.clone());
        let owned = self.owned_pods(&set);
        let pods: Vec<PodView> = owned
            .iter()
            .filter_map(|p| PodView::from(&view.name, p))
            .collect();
        let mut first_error = None;
        if let Err(e) = self.sync_claim_owners(&set, &view, &owned).await {
            first_error.get_or_insert(e);
        }
        let revisions_in_use = (current_revision.as_str(), update_revision.as_str());
        let mut blocked = false;
        for step in plan(&view, &pods, &update_revision) {
            let result = match &step {
                Step::Create { ordinal, .. } if !self.ensure_claims(&set, *ordinal).await? => {
                    blocked = true;
                    Ok(())
                }
                Step::Create { ordinal, revision } => {
                    self.create_pod(&set, *ordinal, *revision, revisions_in_use)
                        .await
                }
                Step::Delete { name } => self.delete_pod(&set, name).await,
            };
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        let status = status(
            &view,
            &pods,
            &current_revision,
            &update_revision,
            set.metadata.generation.unwrap_or(0),
        );
        if let Err(e) = self.write_status(&set, &status).await {
            first_error.get_or_insert(e);
        }
        // Keep revisionHistoryLimit old revisions besides the ones in use.
        let limit = history::history_limit(set.spec.revision_history_limit);
        let live = status["currentRevision"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut keep: Vec<&str> = vec![&live, &update_revision];
        keep.extend(pods.iter().map(|p| p.revision.as_str()));
        history::prune(&self.client, &ns, &revisions, &keep, limit).await;
        match first_error {
            Some(e) => Err(e),
            // A claim being deleted holds its pod back until it is gone.
            None if blocked => Ok(Action::RequeueAfter(std::time::Duration::from_secs(2))),
            None => Ok(Action::Done),
        }
    }
}

impl StatefulSetController {
    /// Pod `ordinal` of the set from the template of `revision` (the
    /// current revision's stored template, or the set's own for the update
    /// revision); `(current, update)` name the two revisions.
    async fn create_pod(
        &self,
        set: &StatefulSet,
        ordinal: i32,
        revision: Revision,
        (current, update): (&str, &str),
    ) -> Result<(), ClientError> {
        let ns = ns_of(&set.metadata);
        let set_name = set.metadata.name.as_deref().unwrap_or_default();
        let (rev, template) = match revision {
            Revision::Current => (current, self.revision_template(&ns, current)),
            Revision::Update => (update, None),
        };
        let template = template.unwrap_or_else(|| set.spec.template.clone());
        let pod = new_pod(set, &template, ordinal, rev);
        let pod_name = format!("{set_name}-{ordinal}");
        let pod_api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        match pod_api.create(&pod).await {
            Ok(_) => {
                let msg = format!("create Pod {pod_name} in StatefulSet {set_name} successful");
                self.recorder
                    .event(set, EventType::Normal, "SuccessfulCreate", &msg)
                    .await;
                Ok(())
            }
            Err(e) if e.api().is_some_and(|a| a.code == 409) => Ok(()),
            Err(e) => {
                let msg =
                    format!("create Pod {pod_name} in StatefulSet {set_name} failed error: {e}");
                self.recorder
                    .event(set, EventType::Warning, "FailedCreate", &msg)
                    .await;
                Err(e)
            }
        }
    }

    async fn delete_pod(&self, set: &StatefulSet, name: &str) -> Result<(), ClientError> {
        let ns = ns_of(&set.metadata);
        let set_name = set.metadata.name.as_deref().unwrap_or_default();
        let pod_api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        match pod_api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                let msg = format!("delete Pod {name} in StatefulSet {set_name} successful");
                self.recorder
                    .event(set, EventType::Normal, "SuccessfulDelete", &msg)
                    .await;
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The set's status, written when a field differs from the stored one.
    async fn write_status(&self, set: &StatefulSet, status: &Value) -> Result<(), ClientError> {
        let old = serde_json::to_value(&set.status).unwrap_or(Value::Null);
        let changed = status
            .as_object()
            .into_iter()
            .flatten()
            .any(|(k, v)| old.get(k).unwrap_or(&json!(0)) != v);
        if !changed {
            return Ok(());
        }
        let ns = ns_of(&set.metadata);
        let name = set.metadata.name.as_deref().unwrap_or_default();
        let api = self
            .client
            .dynamic(registry::of::<StatefulSet>(), Some(&ns));
        let patch = json!({"status": status});
        match api
            .patch(name, Some("status"), content::MERGE_PATCH, &patch)
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }
}

impl StatefulSetController {
    /// Creates the missing claims of `ordinal`; false while one of them is
    /// still being deleted (the pod must wait for a fresh one).
    async fn ensure_claims(&self, set: &StatefulSet, ordinal: i32) -> Result<bool, ClientError> {
        let ns = ns_of(&set.metadata);
        let set_name = set.metadata.name.as_deref().unwrap_or("");
        let api = self
            .client
            .dynamic(registry::of::<PersistentVolumeClaim>(), Some(&ns));
        for claim in claims::claims_for(set, ordinal) {
            let name = claim["metadata"]["name"].as_str().unwrap_or("").to_string();
            match self.claims.get(&format!("{ns}/{name}")) {
                Some(c) if c.metadata.deletion_timestamp.is_some() => {
                    let msg = format!("create Pod {set_name}-{ordinal} in StatefulSet {set_name} failed error: pvc {name} is being deleted");
                    self.recorder
                        .event(set, EventType::Warning, "FailedCreate", &msg)
                        .await;
                    return Ok(false);
                }
                Some(_) => continue,
                None => {}
            }
            match api.create(&claim).await {
                Ok(_) => {
                    let msg = format!("create Claim {name} Pod {set_name}-{ordinal} in StatefulSet {set_name} success");
                    self.recorder
                        .event(set, EventType::Normal, "SuccessfulCreate", &msg)
                        .await;
                }
                Err(e) if e.is_conflict() => {}
                Err(e) => {
                    let msg = format!("create Claim {name} for Pod {set_name}-{ordinal} in StatefulSet {set_name} failed error: {e}");
                    self.recorder
                        .event(set, EventType::Warning, "FailedCreate", &msg)
                        .await;
                    return Err(e);
                }
            }
        }
        Ok(true)
    }

    /// Keeps each pod's claims owned as the retention policy says (before a
    /// condemned pod goes, so its claims go with it under `whenScaled: Delete`).
    async fn sync_claim_owners(
        &self,
        set: &StatefulSet,
        view: &SetView,
        pods: &[Arc<Pod>],
    ) -> Result<(), ClientError> {
        let ns = ns_of(&set.metadata);
        let api = self
            .client
            .dynamic(registry::of::<PersistentVolumeClaim>(), Some(&ns));
        for pod in pods {
            let Some(ordinal) = ordinal_of(&view.name, pod.metadata.name.as_deref().unwrap_or(""))
            else {
                continue;
            };
            let condemned = ordinal < view.start || ordinal >= view.start + view.replicas;
            for wanted in claims::claims_for(set, ordinal) {
                let name = wanted["metadata"]["name"].as_str().unwrap_or("");
                let Some(claim) = self.claims.get(&format!("{ns}/{name}")) else {
                    continue;
                };
                let owners = claims::desired_owners(&claim, set, Some(&pod.metadata), condemned);
                if owners.as_slice() == claim.metadata.owner_references.as_deref().unwrap_or(&[]) {
                    continue;
                }
                let patch = json!({"metadata": {"ownerReferences": owners, "resourceVersion": claim.metadata.resource_version}});
                match api.patch(name, None, content::MERGE_PATCH, &patch).await {
                    Err(e) if !(e.is_not_found() || e.is_conflict()) => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(replicas: i32, parallel: bool, rolling: Option<(i32, i32)>) -> SetView {
        SetView {
            name: "web".into(),
            replicas,
            start: 0,
            parallel,
            rolling,
        }
    }

    fn pod(ordinal: i32, revision: &str, healthy: bool) -> PodView {
        PodView {
            name: format!("web-{ordinal}"),
            ordinal,
            revision: revision.into(),
            terminating: false,
            finished: false,
            healthy,
        }
    }

    fn creates(steps: &[Step]) -> Vec<i32> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Create { ordinal, .. } => Some(*ordinal),
                _ => None,
            })
            .collect()
    }

    fn deletes(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Delete { name } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ordinals_parse_only_exact_names() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "web-1-2"), None);
        assert_eq!(ordinal_of("web", "web-01"), None);
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-"), None);
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time_and_waits_for_ready() {
        let s = set(3, false, Some((0, 1)));
        assert_eq!(creates(&plan(&s, &[], "r")), vec![0]);
        assert!(plan(&s, &[pod(0, "r", false)], "r").is_empty());
        assert_eq!(creates(&plan(&s, &[pod(0, "r", true)], "r")), vec![1]);
    }

    #[test]
    fn parallel_creates_everything_at_once_from_ordinals_start() {
        let mut s = set(3, true, Some((0, 1)));
        s.start = 1;
        assert_eq!(creates(&plan(&s, &[], "r")), vec![1, 2, 3]);
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let pods: Vec<PodView> = (0..4).map(|i| pod(i, "r", true)).collect();
        assert_eq!(
            deletes(&plan(&set(2, false, Some((0, 1))), &pods, "r")),
            vec!["web-3"]
        );
        assert_eq!(
            deletes(&plan(&set(2, true, Some((0, 1))), &pods, "r")),
            vec!["web-3", "web-2"]
        );
    }

    #[test]
    fn finished_pods_are_replaced() {
        let mut p = pod(0, "r", false);
        p.finished = true;
        assert_eq!(
            deletes(&plan(&set(1, true, None), &[p], "r")),
            vec!["web-0"]
        );
    }

    #[test]
    fn rolling_update_goes_down_to_the_partition_within_max_unavailable() {
        let pods: Vec<PodView> = (0..4).map(|i| pod(i, "old", true)).collect();
        assert_eq!(
            deletes(&plan(&set(4, true, Some((0, 1))), &pods, "new")),
            vec!["web-3"]
        );
        assert_eq!(
            deletes(&plan(&set(4, true, Some((0, 2))), &pods, "new")),
            vec!["web-3", "web-2"]
        );
        assert_eq!(
            deletes(&plan(&set(4, true, Some((3, 4))), &pods, "new")),
            vec!["web-3"]
        );
        // An updated pod that is not ready yet holds the next one back.
        let mut mid = pods.clone();
        mid[3] = pod(3, "new", false);
        assert!(deletes(&plan(&set(4, true, Some((0, 1))), &mid, "new")).is_empty());
        mid[3] = pod(3, "new", true);
        assert_eq!(
            deletes(&plan(&set(4, true, Some((0, 1))), &mid, "new")),
            vec!["web-2"]
        );
        // Replacing a broken outdated pod costs no availability.
        let mut broken = pods.clone();
        broken[1] = pod(1, "old", false);
        assert_eq!(
            deletes(&plan(&set(4, true, Some((0, 1))), &broken, "new")),
            vec!["web-1"]
        );
        // OnDelete never deletes for an update.
        assert!(plan(&set(4, true, None), &pods, "new").is_empty());
    }

    #[test]
    fn pods_below_the_partition_are_recreated_from_the_current_revision() {
        let pods = vec![pod(1, "new", true)];
        let steps = plan(&set(2, true, Some((1, 1))), &pods, "new");
        assert_eq!(
            steps,
            vec![Step::Create {
                ordinal: 0,
                revision: Revision::Current
            }]
        );
    }

    #[test]
    fn status_completes_the_rollout_when_all_are_updated_and_ready() {
        let s = set(2, true, Some((0, 1)));
        let mid = status(&s, &[pod(0, "a", true), pod(1, "b", true)], "a", "b", 3);
        assert_eq!(mid["currentRevision"], "a");
        assert_eq!(mid["currentReplicas"], 1);
        assert_eq!(mid["updatedReplicas"], 1);
        let done = status(&s, &[pod(0, "b", true), pod(1, "b", true)], "a", "b", 3);
        assert_eq!(done["currentRevision"], "b");
        assert_eq!(done["currentReplicas"], 2);
        assert_eq!(done["readyReplicas"], 2);
        assert_eq!(done["availableReplicas"], 2);
        assert_eq!(done["observedGeneration"], 3);
    }
}
