//! The resource claim controller (Kubernetes' `pkg/controller/resourceclaim`):
//! a pod's claims from templates are made, named in the pod's status, and
//! released once no pod uses them.
//!
//! ```text
//!  pod with spec.resourceClaims[].resourceClaimTemplateName
//!     └─▶ ResourceClaim <pod>-<entry>-xxxxx (owned by the pod, annotated with the entry)
//!         └─▶ pod status.resourceClaimStatuses[{name, resourceClaimName}]
//!  claim reservedFor a pod that is gone or finished ─▶ reservation removed
//!  claim reserved for nobody ─▶ allocation cleared, delete-protection finalizer removed
//!  claim made for a pod that finished ─▶ deleted
//! ```
//!
//! One queue holds both kinds of key: `pod:<ns>/<name>` and `claim:<ns>/<name>`.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use minik8s_api::dra::{DELETE_PROTECTION, POD_CLAIM_NAME};
use minik8s_api::registry;
use minik8s_client::controller::{controller_of, Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How soon a pod whose template is missing is tried again.
const TEMPLATE_RETRY: Duration = Duration::from_secs(10);

pub struct ResourceClaimController {
    client: Client,
    recorder: Recorder,
    pods: Cache<Pod>,
    claims: Cache<ResourceClaim>,
    templates: Cache<ResourceClaimTemplate>,
}

/// A pod that no longer needs its claims: finished, or deleted before it
/// reached a node (Kubernetes' `isPodDone`).
pub fn pod_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let unbound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some() && unbound)
}

/// The claim made for `pod`'s entry `entry`, among the namespace's claims.
pub fn claim_for_entry<'a>(
    pod: &Pod,
    entry: &str,
    claims: &'a [Arc<ResourceClaim>],
) -> Option<&'a Arc<ResourceClaim>> {
    let uid = pod.metadata.uid.as_deref()?;
    claims.iter().find(|c| {
        controller_of(&c.metadata).is_some_and(|(u, kind, _)| u == uid && kind == "Pod")
            && c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME))
                .is_some_and(|e| e == entry)
    })
}

/// `<pod>-<entry>-`: Kubernetes' generateName for a pod's claim, each part
/// cut so the whole stays a valid name.
pub fn generate_name(pod: &str, entry: &str) -> String {
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    format!("{}-{}-", cut(pod, 28), cut(entry, 28))
}

/// The claim made from `template` for `pod`'s entry `entry`.
pub fn claim_from_template(pod: &Pod, entry: &str, template: &ResourceClaimTemplate) -> Value {
    let spec = template.spec.as_ref();
    let meta = spec.and_then(|s| s.metadata.as_ref());
    let mut annotations = meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME.into(), entry.into());
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": generate_name(pod.metadata.name.as_deref().unwrap_or(""), entry),
            "namespace": pod.metadata.namespace,
            "labels": meta.and_then(|m| m.labels.clone()),
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                 "name": pod.metadata.name, "uid": pod.metadata.uid,
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec.and_then(|s| s.spec.clone()).unwrap_or_default(),
    })
}

/// What a claim needs done about its reservations and allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAction {
    Nothing,
    /// Keep only these reservations (by uid); the rest are gone or finished.
    Reserve(Vec<String>),
    /// Nobody uses it: clear the allocation (and the reservations).
    Deallocate,
    /// Made for a pod that finished: delete it.
    Delete,
    /// Deallocated: the delete-protection finalizer may go.
    Unprotect,
}

/// Decides for one claim; `pod` looks a pod up by namespace/name.
pub fn claim_action(claim: &ResourceClaim, pod: impl Fn(&str) -> Option<Arc<Pod>>) -> ClaimAction {
    let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let status = claim.status.as_ref();
    let reserved = status
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or(&[]);
    let valid: Vec<String> = reserved
        .iter()
        .filter(|r| {
            r.resource != "pods"
                || pod(&format!("{ns}/{}", r.name)).is_some_and(|p| {
                    p.metadata.uid.as_deref() == Some(r.uid.as_str()) && !pod_done(&p)
                })
        })
        .map(|r| r.uid.clone())
        .collect();
    if valid.len() != reserved.len() {
        return ClaimAction::Reserve(valid);
    }
    let allocated = status.is_some_and(|s| s.allocation.is_some());
    if valid.is_empty() {
        let generated_for_done_pod = controller_of(&claim.metadata)
            .filter(|(_, kind, _)| kind == "Pod")
            .is_some_and(|(uid, _, name)| {
                pod(&format!("{ns}/{name}"))
                    .is_none_or(|p| p.metadata.uid.as_deref() != Some(uid.as_str()) || pod_done(&p))
            })
            && claim
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(POD_CLAIM_NAME));
        if generated_for_done_pod && claim.metadata.deletion_timestamp.is_none() {
            return ClaimAction::Delete;
        }
        if allocated {
            return ClaimAction::Deallocate;
        }
    }
    if minik8s_api::dra::protected(claim) && !allocated {
        return ClaimAction::Unprotect;
    }
    ClaimAction::Nothing
}

impl ResourceClaimController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ResourceClaimController {
            recorder: Recorder::new(client.clone(), "resource_claim"),
            client,
            pods: informers.cache(),
            claims: informers.cache(),
            templates: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .watches::<Pod, _>(informers, |_, ev| pod_keys(ev))
            .and_then(|c| c.watches::<ResourceClaim, _>(informers, |_, ev| claim_keys(ev)))
    }

    async fn sync_pod(&self, key: &str) -> Result<Action, ClientError> {
        let Some(pod) = self.pods.get(key) else {
            return Ok(Action::Done);
        };
        let entries = minik8s_api::dra::pod_claim_entries(&pod);
        if entries.iter().all(|(_, templated)| !templated)
            || pod_done(&pod)
            || pod.metadata.deletion_timestamp.is_some()
        {
            return Ok(Action::Done);
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let claims = self.claims.by_index(NAMESPACE_INDEX, ns);
        let spec_claims = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.clone())
            .unwrap_or_default();
        let mut statuses = Vec::new();
        let mut waiting = false;
        for entry in spec_claims {
            let Some(template_name) = entry.resource_claim_template_name.as_deref() else {
                continue;
            };
            let name = match claim_for_entry(&pod, &entry.name, &claims) {
                Some(c) => c.metadata.name.clone().unwrap_or_default(),
                None => match self.templates.get(&format!("{ns}/{template_name}")) {
                    None => {
                        let message = format!(
                            "PodResourceClaim {}: resource claim template \"{template_name}\": resourceclaimtemplate.resource.k8s.io \"{template_name}\" not found",
                            entry.name
                        );
                        self.recorder
                            .event(
                                &*pod,
                                EventType::Warning,
                                "FailedResourceClaimCreation",
                                &message,
                            )
                            .await;
                        waiting = true;
                        continue;
                    }
                    Some(template) => {
                        let body = claim_from_template(&pod, &entry.name, &template);
                        let made = self
                            .client
                            .dynamic(registry::of::<ResourceClaim>(), Some(ns))
                            .create(&body)
                            .await?;
                        tracing::info!(pod = key, entry = %entry.name, claim = %minik8s_api::meta::name(&made), "created a resource claim from a template");
                        minik8s_api::meta::name(&made).to_string()
                    }
                },
            };
            statuses.push(json!({"name": entry.name, "resourceClaimName": name}));
        }
        let current = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .map(|l| serde_json::to_value(l).unwrap_or_default())
            .unwrap_or(json!([]));
        if current != json!(statuses) && !statuses.is_empty() {
            let patch = json!({"status": {"resourceClaimStatuses": statuses}});
            self.client
                .patch_status::<Pod>(&pod.metadata, content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(match waiting {
            true => Action::RequeueAfter(TEMPLATE_RETRY),
            false => Action::Done,
        })
    }

    async fn sync_claim(&self, key: &str) -> Result<Action, ClientError> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(Action::Done);
        };
        let api = self.client.dynamic(
            registry::of::<ResourceClaim>(),
            claim.metadata.namespace.as_deref(),
        );
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let rv = &claim.metadata.resource_version;
        let done = |r: Result<Value, ClientError>| match r {
            Err(e) if !(e.is_not_found() || e.is_conflict()) => Err(e),
            _ => Ok(Action::Done),
        };
        match claim_action(&claim, |k| self.pods.get(k)) {
            ClaimAction::Nothing => Ok(Action::Done),
            ClaimAction::Reserve(uids) => {
                let kept: Vec<Value> = claim
                    .status
                    .iter()
                    .flat_map(|s| s.reserved_for.iter().flatten())
                    .filter(|r| uids.contains(&r.uid))
                    .map(|r| serde_json::to_value(r).unwrap_or_default())
                    .collect();
                let patch = json!({"metadata": {"resourceVersion": rv},
                                   "status": {"reservedFor": if kept.is_empty() { Value::Null } else { json!(kept) }}});
                done(
                    api.patch(name, Some("status"), content::MERGE_PATCH, &patch)
                        .await,
                )
            }
            ClaimAction::Deallocate => {
                tracing::info!(claim = key, "deallocating a claim no pod uses");
                let patch = json!({"metadata": {"resourceVersion": rv},
                                   "status": {"allocation": null, "reservedFor": null}});
                done(
                    api.patch(name, Some("status"), content::MERGE_PATCH, &patch)
                        .await,
                )
            }
            ClaimAction::Delete => {
                let dp = DeleteParams {
                    precondition_uid: claim.metadata.uid.clone(),
                    ..Default::default()
                };
                done(api.delete(name, &dp).await)
            }
            ClaimAction::Unprotect => {
                let rest: Vec<&String> = claim
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .filter(|f| *f != DELETE_PROTECTION)
                    .collect();
                let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": rest}});
                done(api.patch(name, None, content::MERGE_PATCH, &patch).await)
            }
        }
    }
}

/// A pod change queues the pod (its claims to make) and the claims it
/// names (their reservations may have to go).
fn pod_keys(ev: &Event<Pod>) -> Vec<String> {
    let pod = ev.object();
    if minik8s_api::dra::pod_claim_entries(pod).is_empty() {
        return Vec::new();
    }
    let key = object_key(&pod.metadata);
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut keys = vec![format!("pod:{key}")];
    for (entry, _) in minik8s_api::dra::pod_claim_entries(pod) {
        if let Some(claim) = minik8s_api::dra::pod_claim_name(pod, &entry) {
            keys.push(format!("claim:{ns}/{claim}"));
        }
    }
    keys
}

/// A claim change queues the claim and, for one made for a pod, that pod.
fn claim_keys(ev: &Event<ResourceClaim>) -> Vec<String> {
    let claim = ev.object();
    let mut keys = vec![format!("claim:{}", object_key(&claim.metadata))];
    if let Some((_, kind, name)) = controller_of(&claim.metadata) {
        if kind == "Pod" {
            let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
            keys.push(format!("pod:{ns}/{name}"));
        }
    }
    keys
}

impl Reconciler for ResourceClaimController {
    const NAME: &'static str = "resourceclaim";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        match key.split_once(':') {
            Some(("pod", k)) => self.sync_pod(k).await,
            Some(("claim", k)) => self.sync_claim(k).await,
            _ => Ok(Action::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, phase: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "ns", "uid": uid},
                "spec": {"containers": [], "nodeName": "n1"}, "status": {"phase": phase}}),
            )
            .unwrap(),
        )
    }

    fn claim(
        reserved: &[(&str, &str)],
        allocated: bool,
        owner: Option<(&str, &str)>,
    ) -> ResourceClaim {
        let mut c = json!({"metadata": {"name": "c", "namespace": "ns",
                                        "finalizers": [DELETE_PROTECTION]},
                           "spec": {}, "status": {}});
        if allocated {
            c["status"]["allocation"] = json!({"devices": {"results": []}});
        }
        if !reserved.is_empty() {
            c["status"]["reservedFor"] = json!(reserved
                .iter()
                .map(|(n, u)| json!({"resource": "pods", "name": n, "uid": u}))
                .collect::<Vec<_>>());
        }
        if let Some((name, uid)) = owner {
            c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
                "name": name, "uid": uid, "controller": true}]);
            c["metadata"]["annotations"] = json!({POD_CLAIM_NAME: "gpu"});
        }
        serde_json::from_value(c).unwrap()
    }

    #[test]
    fn reservations_of_gone_or_finished_pods_go_then_the_allocation() {
        let pods = [pod("a", "1", "Running"), pod("b", "2", "Succeeded")];
        let lookup = |k: &str| {
            pods.iter()
                .find(|p| format!("ns/{}", p.metadata.name.as_deref().unwrap()) == k)
                .cloned()
        };
        // b finished, c is gone: only a's reservation stays.
        let shared = claim(&[("a", "1"), ("b", "2"), ("c", "3")], true, None);
        assert_eq!(
            claim_action(&shared, lookup),
            ClaimAction::Reserve(vec!["1".into()])
        );
        // A pod recreated under the same name (another uid) does not hold it.
        let stale = claim(&[("a", "9")], true, None);
        assert_eq!(claim_action(&stale, lookup), ClaimAction::Reserve(vec![]));
        // Reserved for nobody: deallocated, then unprotected.
        assert_eq!(
            claim_action(&claim(&[], true, None), lookup),
            ClaimAction::Deallocate
        );
        assert_eq!(
            claim_action(&claim(&[], false, None), lookup),
            ClaimAction::Unprotect
        );
        assert_eq!(
            claim_action(&claim(&[("a", "1")], true, None), lookup),
            ClaimAction::Nothing
        );
        // Made for a pod that finished: deleted.
        assert_eq!(
            claim_action(&claim(&[], true, Some(("b", "2"))), lookup),
            ClaimAction::Delete
        );
        // Made for a running pod and not yet reserved (being scheduled): kept.
        assert_eq!(
            claim_action(&claim(&[], false, Some(("a", "1"))), lookup),
            ClaimAction::Unprotect
        );
    }

    #[test]
    fn claims_from_templates_are_owned_and_annotated() {
        let p = pod("a-very-long-pod-name-that-goes-on-and-on", "1", "Pending");
        let t: ResourceClaimTemplate = serde_json::from_value(json!({"metadata": {"name": "t", "namespace": "ns"},
            "spec": {"metadata": {"labels": {"app": "x"}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.minik8s.io"}}]}}}})).unwrap();
        let c = claim_from_template(&p, "gpu", &t);
        assert_eq!(
            c["metadata"]["generateName"],
            "a-very-long-pod-name-that-go-gpu-"
        );
        assert_eq!(c["metadata"]["annotations"][POD_CLAIM_NAME], "gpu");
        assert_eq!(c["metadata"]["labels"]["app"], "x");
        assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "1");
        assert_eq!(c["spec"]["devices"]["requests"][0]["name"], "gpu");
        let made: ResourceClaim =
            serde_json::from_value(json!({"metadata": c["metadata"].clone()})).unwrap();
        assert!(claim_for_entry(&p, "gpu", &[Arc::new(made)]).is_some());
    }
}
