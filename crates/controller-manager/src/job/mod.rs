//! The Job controller: runs pods until enough of them succeed, or the Job
//! fails (Kubernetes' `pkg/controller/job`).
//!
//! ```text
//!  Job ─▶ its pods: active │ succeeded │ failed
//!     1. count finished pods exactly once (uncountedTerminatedPods, then
//!        drop the batch.kubernetes.io/job-tracking finalizer)
//!     2. terminal?  success criteria met ─▶ SuccessCriteriaMet ─(no pods left)─▶ Complete
//!                   backoffLimit / deadline ─▶ FailureTarget ─(no pods left)─▶ Failed
//!     3. suspended? delete the active pods, Suspended=True
//!     4. otherwise  create (after the failure backoff) or delete pods toward
//!                   parallelism; Indexed: one pod per missing index
//!     5. status: active, ready, terminating, succeeded, failed, completedIndexes
//! ```
//!
//! The decisions are pure functions in [`decide`].

pub mod decide;
pub mod policy;
mod sync;

use crate::expectations::Expectations;
use crate::ns_of;
use crate::ownership::{controller_of, controller_ref, is_ready};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::controller::{Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::Event;
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Keeps a finished pod until the Job controller has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The completion index of an Indexed Job's pod (annotation and label).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

pub struct JobController {
    client: Client,
    recorder: Recorder,
    jobs: Cache<Job>,
    pods: Cache<Pod>,
    /// When each Job (by uid) last saw a pod fail: the backoff runs from
    /// there (in memory, as in Kubernetes).
    last_failure: Mutex<HashMap<String, Instant>>,
    /// Pods (by uid, per Job uid) already in the totals whose finalizer
    /// removal the pod cache has not shown yet: a stale cache must not make
    /// them count twice (Kubernetes' finalizer expectations).
    counted: Mutex<HashMap<String, HashSet<String>>>,
    /// Pod creates and deletes not yet seen through the pod informer.
    expectations: Expectations,
}

/// How a pod of the Job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    Active,
    Terminating,
    Succeeded,
    Failed,
}

pub fn pod_state(p: &Pod) -> PodState {
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => PodState::Succeeded,
        Some("Failed") => PodState::Failed,
        _ if p.metadata.deletion_timestamp.is_some() => PodState::Terminating,
        _ => PodState::Active,
    }
}

pub fn has_tracking_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == TRACKING_FINALIZER))
}

pub fn index_of(p: &Pod) -> Option<i32> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_INDEX))
        .and_then(|i| i.parse().ok())
}

impl JobController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(JobController {
            recorder: Recorder::new(client.clone(), "job-controller"),
            client,
            jobs: informers.cache(),
            pods: informers.cache(),
            last_failure: Mutex::default(),
            counted: Mutex::default(),
            expectations: Expectations::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Job>(informers)?
            // Owned pods, also those of a Job already gone (their finalizer must go).
            .watches::<Pod, _>(informers, |me, ev| me.pod_keys(ev))
    }

    fn note_failure(&self, uid: &str) {
        crate::lock(&self.last_failure).insert(uid.to_string(), Instant::now());
    }

    /// How long until the next pod may start after `failed` failures, if it may not yet.
    fn backoff_left(&self, uid: &str, failed: i32) -> Option<std::time::Duration> {
        let since = crate::lock(&self.last_failure).get(uid).copied()?;
        decide::backoff(failed)
            .checked_sub(since.elapsed())
            .filter(|d| !d.is_zero())
    }

    /// Forgets counted pods the cache no longer shows with our finalizer;
    /// returns those it still does (not to be counted again).
    fn still_counted(&self, job_uid: &str, pods: &[Arc<Pod>]) -> HashSet<String> {
        let mut all = crate::lock(&self.counted);
        let set = all.entry(job_uid.to_string()).or_default();
        set.retain(|uid| {
            pods.iter().any(|p| {
                p.metadata.uid.as_deref() == Some(uid.as_str()) && has_tracking_finalizer(p)
            })
        });
        set.clone()
    }

    fn mark_counted(&self, job_uid: &str, uids: impl Iterator<Item = String>) {
        crate::lock(&self.counted)
            .entry(job_uid.to_string())
            .or_default()
            .extend(uids);
    }

    /// The Jobs a pod event concerns; creations and deletions count against
    /// the expectations.
    fn pod_keys(&self, ev: &Event<Pod>) -> Vec<String> {
        self.expectations.pod_event(ev, |p| {
            minik8s_client::controller::controller_key(&p.metadata, "Job")
        })
    }

    /// The Job read from the apiserver (None when it is gone).
    async fn fresh_job(&self, ns: &str, name: &str) -> Result<Option<Arc<Job>>, ClientError> {
        let api = self.client.dynamic(registry::of::<Job>(), Some(ns));
        match api.get(name).await {
            Ok(v) => serde_json::from_value(v)
                .map(|j| Some(Arc::new(j)))
                .map_err(|e| ClientError::Decode(e.to_string())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The pods whose controller is the Job with `uid`.
    fn owned_pods(&self, ns: &str, uid: &str) -> Vec<Arc<Pod>> {
        self.pods
            .by_index(NAMESPACE_INDEX, ns)
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|(u, _, _)| u == uid))
            .collect()
    }

    /// Lets a counted pod go (removes only our finalizer).
    async fn release_pod(&self, p: &Pod) -> Result<(), ClientError> {
        let kept: Vec<&String> = p
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != TRACKING_FINALIZER)
            .collect();
        let api = self
            .client
            .dynamic(registry::of::<Pod>(), p.metadata.namespace.as_deref());
        let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": p.metadata.resource_version}});
        let name = p.metadata.name.as_deref().unwrap_or("");
        match api.patch(name, None, content::MERGE_PATCH, &patch).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn delete_pod(&self, job: &Job, p: &Pod) -> Result<(), ClientError> {
        let api = self
            .client
            .dynamic(registry::of::<Pod>(), p.metadata.namespace.as_deref());
        let name = p.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                self.recorder
                    .event(
                        job,
                        EventType::Normal,
                        "SuccessfulDelete",
                        &format!("Deleted pod: {name}"),
                    )
                    .await;
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates one pod from the template (`index` for Indexed Jobs).
    async fn create_pod(
        &self,
        job: &Job,
        index: Option<i32>,
        failures: i32,
    ) -> Result<(), ClientError> {
        let ns = ns_of(&job.metadata);
        let name = job.metadata.name.clone().unwrap_or_default();
        let template = job.spec.as_ref().map(|s| &s.template);
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "namespace": ns, "generateName": format!("{name}-"),
            "labels": template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone()),
            "annotations": template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.clone()),
            "finalizers": [TRACKING_FINALIZER],
            "ownerReferences": [controller_ref("batch/v1", "Job", &job.metadata)]},
            "spec": serde_json::to_value(template.and_then(|t| t.spec.as_ref())).unwrap_or(json!({}))});
        if let Some(i) = index {
            pod["metadata"]["generateName"] = json!(format!("{name}-{i}-"));
            for key in ["labels", "annotations"] {
                if !pod["metadata"][key].is_object() {
                    pod["metadata"][key] = json!({});
                }
                pod["metadata"][key][COMPLETION_INDEX] = json!(i.to_string());
            }
            let per_index = job.spec.as_ref().and_then(|s| s.backoff_limit_per_index);
            if per_index.is_some() {
                pod["metadata"]["annotations"][policy::INDEX_FAILURE_COUNT] =
                    json!(failures.to_string());
            }
            if pod["spec"]["hostname"].is_null() {
                pod["spec"]["hostname"] = json!(format!("{name}-{i}"));
            }
            let env = json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": format!("metadata.annotations['{COMPLETION_INDEX}']")}}});
            for kind in ["containers", "initContainers"] {
                for c in pod["spec"][kind].as_array_mut().into_iter().flatten() {
                    if !c["env"].is_array() {
                        c["env"] = json!([]);
                    }
                    if let Some(list) = c["env"].as_array_mut() {
                        list.retain(|e| e["name"] != "JOB_COMPLETION_INDEX");
                        list.push(env.clone());
                    }
                }
            }
        }
        let api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        let created = api.create(&pod).await?;
        let pod_name = created["metadata"]["name"].as_str().unwrap_or("");
        self.recorder
            .event(
                job,
                EventType::Normal,
                "SuccessfulCreate",
                &format!("Created pod: {pod_name}"),
            )
            .await;
        Ok(())
    }

    /// Writes the status (a merge patch, nulls removing fields) if it changed.
    async fn write_status(&self, job: &Job, status: Value) -> Result<(), ClientError> {
        let before =
            serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
        let changed = status
            .as_object()
            .into_iter()
            .flatten()
            .any(|(k, v)| strip_nulls(before.get(k).unwrap_or(&Value::Null)) != strip_nulls(v));
        if changed {
            self.client
                .patch_status::<Job>(
                    &job.metadata,
                    content::MERGE_PATCH,
                    &json!({"status": status}),
                )
                .await?;
        }
        Ok(())
    }
}

/// A value without its null fields (what a merge patch leaves behind).
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A condition in a Job's status.
pub fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastProbeTime": now, "lastTransitionTime": now})
}

pub fn has_condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Counts ready active pods.
pub fn ready_count(pods: &[Arc<Pod>]) -> i32 {
    pods.iter()
        .filter(|p| pod_state(p) == PodState::Active && is_ready(p))
        .count() as i32
}
