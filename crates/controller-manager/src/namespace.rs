//! Namespace deletion: a deleted namespace is `Terminating` (the apiserver
//! refuses new content in it); this controller deletes everything inside,
//! kind by kind — the built-in kinds and every namespaced resource discovery
//! lists besides them (custom resources, aggregated APIs) — and once nothing
//! is left releases the namespace's `kubernetes` finalizer through
//! `PUT .../finalize`, so the namespace goes. Meanwhile the namespace's five
//! deletion conditions say what remains and which finalizers hold it.
//!
//! ```text
//!  Namespace deletionTimestamp set ─▶ discovery: built-in kinds + /apis groups
//!        ─▶ for each namespaced resource: DELETE every object
//!        (background propagation; objects with finalizers may take a while)
//!        ─▶ status.conditions: NamespaceContentRemaining, NamespaceFinalizersRemaining, …
//!  all lists empty, discovery complete ─▶ spec.finalizers = [] via /finalize ─▶ apiserver removes it
//! ```

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use minik8s_api::registry::{self, Info, REGISTRY};
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::object_key;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{
    Cache, Client, ClientError, DeleteParams, ListParams, SharedInformers, WorkQueue,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One object left in a terminating namespace, with its resource.
pub type Remaining = (Info, Value);

/// What is left to do for a terminating namespace (pure).
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Not terminating: nothing to do.
    Nothing,
    /// Objects remain: delete the ones not yet being deleted, come back later.
    Delete(Vec<(Info, String)>),
    /// Some objects are still finishing (finalizers, graceful pods): wait.
    Wait,
    /// Empty: release the finalizer.
    Finalize,
}

/// Decides from the namespace and its remaining objects.
pub fn step(ns: &Namespace, remaining: &[Remaining]) -> Step {
    if ns.metadata.deletion_timestamp.is_none() {
        return Step::Nothing;
    }
    if remaining.is_empty() {
        return Step::Finalize;
    }
    let to_delete: Vec<(Info, String)> = remaining
        .iter()
        .filter(|(_, o)| o["metadata"]["deletionTimestamp"].is_null())
        .map(|(info, o)| {
            (
                info.clone(),
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    if to_delete.is_empty() {
        Step::Wait
    } else {
        Step::Delete(to_delete)
    }
}

/// The five conditions the namespace controller keeps on a terminating
/// namespace, in Kubernetes' order, with their "all is well" reason and message.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

/// One deletion condition as a pass decides it: True with what went wrong
/// or remains, False with its "all is well" reason and message.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What one pass of deletion saw, for the namespace's conditions.
#[derive(Debug, Default)]
pub struct PassReport {
    /// `group/version: error` for each group discovery could not read.
    pub discovery_failures: Vec<String>,
    /// Errors listing or deleting a resource.
    pub content_failures: Vec<String>,
}

/// The namespace's deletion conditions after a pass (pure): a condition is
/// True with what went wrong or remains, else False with its "ok" message —
/// the messages `kubectl describe namespace` shows while one is stuck.
/// `remaining` counts objects already being deleted (finalizers, graceful
/// pods), as Kubernetes counts what is left after its delete calls.
pub fn deletion_conditions(remaining: &[Remaining], report: &PassReport) -> Vec<Verdict> {
    let mut per_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for (info, obj) in remaining {
        if obj["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        *per_resource
            .entry(format!("{}.{}", info.plural, info.group))
            .or_default() += 1;
        for f in obj["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(f) = f.as_str() {
                *per_finalizer.entry(f.to_string()).or_default() += 1;
            }
        }
    }
    let counted = |m: &BTreeMap<String, usize>, verb: &str| {
        m.iter()
            .map(|(what, n)| format!("{what} {verb} {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut failures = report.content_failures.clone();
    failures.sort();
    CONDITIONS
        .iter()
        .map(|(kind, ok_reason, ok_message)| {
            let problem = match *kind {
                "NamespaceDeletionDiscoveryFailure" if !report.discovery_failures.is_empty() => {
                    Some((
                        "DiscoveryFailed",
                        format!(
                            "Discovery failed for some groups, {} failing: unable to retrieve the complete list of server APIs: {}",
                            report.discovery_failures.len(),
                            report.discovery_failures.join(", ")
                        ),
                    ))
                }
                "NamespaceDeletionContentFailure" if !failures.is_empty() => Some((
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        failures.len(),
                        failures.join(", ")
                    ),
                )),
                "NamespaceContentRemaining" if !per_resource.is_empty() => Some((
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        counted(&per_resource, "has")
                    ),
                )),
                "NamespaceFinalizersRemaining" if !per_finalizer.is_empty() => Some((
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        counted(&per_finalizer, "in")
                    ),
                )),
                _ => None,
            };
            match problem {
                Some((reason, message)) => Verdict {
                    type_: kind,
                    status: true,
                    reason: reason.to_string(),
                    message,
                },
                None => Verdict {
                    type_: kind,
                    status: false,
                    reason: ok_reason.to_string(),
                    message: ok_message.to_string(),
                },
            }
        })
        .collect()
}

/// Merges the pass's conditions into the namespace's (pure); true when
/// anything changed. A condition's transition time moves only with its status.
pub fn merge_conditions(
    current: &mut Vec<NamespaceCondition>,
    new: Vec<Verdict>,
    now: &Time,
) -> bool {
    let mut changed = false;
    for Verdict {
        type_,
        status,
        reason,
        message,
    } in new
    {
        let status = if status { "True" } else { "False" }.to_string();
        match current.iter_mut().find(|c| c.type_ == type_) {
            None => {
                current.push(NamespaceCondition {
                    type_: type_.to_string(),
                    status,
                    reason: Some(reason),
                    message: Some(message),
                    last_transition_time: Some(now.clone()),
                });
                changed = true;
            }
            Some(c) => {
                if c.status != status
                    || c.reason.as_ref() != Some(&reason)
                    || c.message.as_ref() != Some(&message)
                {
                    if c.status != status {
                        c.last_transition_time = Some(now.clone());
                    }
                    c.status = status;
                    c.reason = Some(reason);
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed
}

/// How soon a deleting namespace is looked at again while objects go.
const RECHECK: Duration = Duration::from_millis(500);

pub struct NamespaceController {
    client: Client,
    namespaces: Cache<Namespace>,
}

impl NamespaceController {
    /// Builds the controller on the shared Namespace informer: it wakes for
    /// namespaces being deleted.
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(NamespaceController {
            client,
            namespaces: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new()).watches::<Namespace, _>(informers, |_, ev| {
            let meta = &ev.object().metadata;
            match meta.deletion_timestamp {
                Some(_) => vec![object_key(meta)],
                None => Vec::new(),
            }
        })
    }

    /// Every namespaced resource to empty: the built-in kinds and what
    /// discovery serves besides them (custom resources, aggregated APIs).
    async fn resources(&self, report: &mut PassReport) -> Result<Vec<Info>, ClientError> {
        let served = self.client.served_custom_resources().await?;
        report.discovery_failures = served.failed;
        Ok(REGISTRY
            .iter()
            .filter(|i| i.namespaced)
            .map(registry::shared)
            .chain(served.namespaced)
            .collect())
    }

    /// Live lists (not caches) of every resource in the namespace: it may
    /// only go once it is really empty. Every resource at once: one round
    /// trip, not forty. A resource that went away meanwhile (its CRD
    /// deleted) has nothing left; other errors are reported.
    async fn remaining(
        &self,
        name: &str,
        resources: &[Info],
        report: &mut PassReport,
    ) -> Vec<Remaining> {
        let lists = resources.iter().map(|info| async move {
            let list = self
                .client
                .dynamic(info, Some(name))
                .list(&ListParams::default())
                .await;
            (info.clone(), list)
        });
        let mut remaining = Vec::new();
        for (info, list) in futures::future::join_all(lists).await {
            match list {
                Ok(list) => remaining.extend(
                    list["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|item| (info.clone(), item.clone())),
                ),
                Err(e) if e.is_not_found() => {}
                Err(e) => report
                    .content_failures
                    .push(format!("{}.{}: {e}", info.plural, info.group)),
            }
        }
        remaining
    }

    /// Writes the pass's conditions on the namespace when they changed.
    async fn report(
        &self,
        ns: &Namespace,
        remaining: &[Remaining],
        report: &PassReport,
    ) -> Result<(), ClientError> {
        let mut updated = ns.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let now = minik8s_api::meta::time_now();
        if !merge_conditions(conditions, deletion_conditions(remaining, report), &now) {
            return Ok(());
        }
        let api = self.client.dynamic(registry::of::<Namespace>(), None);
        let body =
            serde_json::to_value(&updated).map_err(|e| ClientError::Decode(e.to_string()))?;
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        match api.replace_sub(name, "status", &body).await {
            // A newer namespace (conflict) or none: the next pass writes again.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl Reconciler for NamespaceController {
    const NAME: &'static str = "namespace";

    /// Empties a deleting namespace, says on it what remains, then releases
    /// its finalizer.
    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let Some(ns) = self.namespaces.get(name) else {
            return Ok(Action::Done);
        };
        if ns.metadata.deletion_timestamp.is_none() {
            return Ok(Action::Done);
        }
        let mut report = PassReport::default();
        let resources = self.resources(&mut report).await?;
        let remaining = self.remaining(name, &resources, &mut report).await;
        let complete = report.discovery_failures.is_empty() && report.content_failures.is_empty();
        let action = match step(&ns, &remaining) {
            Step::Nothing => return Ok(Action::Done),
            Step::Delete(objects) => {
                let dp = DeleteParams {
                    propagation_policy: Some("Background".into()),
                    ..Default::default()
                };
                for (info, obj) in objects {
                    match self
                        .client
                        .dynamic(&info, Some(name))
                        .delete(&obj, &dp)
                        .await
                    {
                        Err(e) if !e.is_not_found() && !e.is_conflict() => report
                            .content_failures
                            .push(format!("{}.{} {obj}: {e}", info.plural, info.group)),
                        _ => {}
                    }
                }
                Action::RequeueAfter(RECHECK)
            }
            Step::Wait => Action::RequeueAfter(RECHECK),
            // Something could not be seen: the namespace is not known empty.
            Step::Finalize if !complete => Action::RequeueAfter(RECHECK * 10),
            Step::Finalize => {
                let api = self.client.dynamic(registry::of::<Namespace>(), None);
                let mut body =
                    serde_json::to_value(&*ns).map_err(|e| ClientError::Decode(e.to_string()))?;
                body["spec"]["finalizers"] = serde_json::json!([]);
                return match api.replace_sub(name, "finalize", &body).await {
                    Ok(_) => {
                        tracing::info!(namespace = name, "namespace emptied and finalized");
                        Ok(Action::Done)
                    }
                    Err(e) if e.is_not_found() => Ok(Action::Done),
                    Err(e) => Err(e),
                };
            }
        };
        self.report(&ns, &remaining, &report).await?;
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps() {
        let pods = registry::shared(registry::of::<k8s_openapi::api::core::v1::Pod>());
        let live: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
        assert_eq!(step(&live, &[]), Step::Nothing);
        let dying: Namespace = serde_json::from_value(
            json!({"metadata": {"name": "team", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        )
        .unwrap();
        assert_eq!(step(&dying, &[]), Step::Finalize);
        let pod = json!({"metadata": {"name": "a"}});
        let going = json!({"metadata": {"name": "b", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            step(
                &dying,
                &[(pods.clone(), pod), (pods.clone(), going.clone())]
            ),
            Step::Delete(vec![(pods.clone(), "a".into())])
        );
        assert_eq!(step(&dying, &[(pods, going)]), Step::Wait);
    }

    #[test]
    fn conditions_say_what_remains_and_which_finalizers_hold_it() {
        let pods = registry::shared(registry::of::<k8s_openapi::api::core::v1::Pod>());
        let widgets = minik8s_api::registry::ResourceSpec {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            singular: "widget".into(),
            short_names: vec![],
            namespaced: true,
            subresources: vec![],
            categories: vec![],
            columns: vec![],
        }
        .entry();
        let widgets = std::sync::Arc::new(widgets);
        let held = |f: &str| json!({"metadata": {"name": "w", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": [f]}});
        let remaining = vec![
            (widgets.clone(), held("example.com/hold")),
            (widgets, held("example.com/hold")),
            (
                pods.clone(),
                json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ),
            // Not yet being deleted: deleted in this pass, not counted.
            (pods, json!({"metadata": {"name": "q"}})),
        ];
        let conds = deletion_conditions(&remaining, &PassReport::default());
        let by_type = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap().clone();
        assert_eq!(conds.len(), 5);
        assert_eq!(
            by_type("NamespaceContentRemaining"),
            Verdict {
                type_: "NamespaceContentRemaining",
                status: true,
                reason: "SomeResourcesRemain".into(),
                message: "Some resources are remaining: pods. has 1 resource instances, widgets.example.com has 2 resource instances".into()
            }
        );
        assert_eq!(
            by_type("NamespaceFinalizersRemaining").message,
            "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"
        );
        assert_eq!(
            by_type("NamespaceDeletionDiscoveryFailure").reason,
            "ResourcesDiscovered"
        );
        let report = PassReport {
            discovery_failures: vec!["metrics.example.com/v1: 503".into()],
            content_failures: vec![],
        };
        let failed = deletion_conditions(&[], &report);
        assert!(failed[0].status);
        assert_eq!(failed[0].reason, "DiscoveryFailed");
        assert!(!failed[3].status, "nothing remains: {failed:?}");

        // Merging moves a transition time only when the status changes.
        let t0 = Time(k8s_openapi::jiff::Timestamp::new(0, 0).unwrap());
        let t1 = Time(k8s_openapi::jiff::Timestamp::new(60, 0).unwrap());
        let mut current = Vec::new();
        assert!(merge_conditions(&mut current, conds.clone(), &t0));
        assert!(!merge_conditions(&mut current, conds, &t1), "unchanged");
        assert!(merge_conditions(
            &mut current,
            deletion_conditions(&[], &PassReport::default()),
            &t1
        ));
        let content = current
            .iter()
            .find(|c| c.type_ == "NamespaceContentRemaining")
            .unwrap();
        assert_eq!(
            (
                content.status.as_str(),
                content.last_transition_time.as_ref()
            ),
            ("False", Some(&t1))
        );
        let parsing = current
            .iter()
            .find(|c| c.type_ == "NamespaceDeletionGroupVersionParsingFailure")
            .unwrap();
        assert_eq!(parsing.last_transition_time.as_ref(), Some(&t0));
    }
}
