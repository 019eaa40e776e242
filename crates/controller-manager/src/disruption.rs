//! The disruption controller: each PodDisruptionBudget's status — how many
//! of its pods are healthy, how many must stay healthy, and so how many
//! voluntary disruptions (evictions, `kubectl drain`) are allowed right now.
//!
//! ```text
//!  pods matching spec.selector ──▶ expectedPods (controllers' replicas, or the pods themselves)
//!                               ──▶ currentHealthy (Ready, not deleting, not just evicted)
//!  minAvailable / maxUnavailable ──▶ desiredHealthy
//!  disruptionsAllowed = max(0, currentHealthy - desiredHealthy) ──▶ status, DisruptionAllowed
//! ```
//!
//! The apiserver's `pods/eviction` reads `disruptionsAllowed`, takes one and
//! records the pod in `disruptedPods` until this controller sees it go.

use crate::ownership::is_ready;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::registry;
use minik8s_api::selector::Selector;
use minik8s_client::controller::{controller_of, Action, Controller, Reconciler};
use minik8s_client::informer::object_key;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, Event, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long an eviction's pod counts as disrupted before the pod is seen going.
const DISRUPTED_POD_TIMEOUT: chrono::Duration = chrono::Duration::minutes(2);

/// What the status says, computed from the budget and its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub expected: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
    pub disruptions_allowed: i32,
    /// The evicted pods still counted as disrupted.
    pub disrupted: BTreeMap<String, String>,
}

/// `value` of `total`, a percentage rounded up as Kubernetes does.
fn scaled(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((p * i64::from(total) + 99) / 100) as i32
        }
    }
}

/// The pure decision: the budget's numbers from its pods (`pods` match its
/// selector), the controllers' desired replicas (`expected_from_owners`,
/// when known) and the time.
pub fn compute(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    expected_from_owners: Option<i32>,
    now: DateTime<Utc>,
) -> Budget {
    let spec = pdb.spec.clone().unwrap_or_default();
    let recorded = pdb
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default();
    // An evicted pod counts as disrupted until it is seen deleting, or for two minutes.
    let mut disrupted = BTreeMap::new();
    for (name, at) in recorded {
        let live = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&name))
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none());
        if live && now - minik8s_api::meta::utc_of(&at) < DISRUPTED_POD_TIMEOUT {
            disrupted.insert(
                name,
                minik8s_api::meta::utc_of(&at).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
        }
    }
    let current_healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or("")))
        .count() as i32;
    let pod_count = pods.len() as i32;
    let (expected, desired_healthy) = match (&spec.min_available, &spec.max_unavailable) {
        // An integer minAvailable needs no controller: the pods themselves are expected.
        (Some(IntOrString::Int(min)), _) => (pod_count, *min),
        (Some(min), _) => {
            let expected = expected_from_owners.unwrap_or(pod_count);
            (expected, scaled(min, expected))
        }
        (None, Some(max)) => {
            let expected = expected_from_owners.unwrap_or(pod_count);
            (expected, (expected - scaled(max, expected)).max(0))
        }
        // policy/v1 without a bound: nothing may be disrupted... unless no pod needs to stay.
        (None, None) => (pod_count, 0),
    };
    Budget {
        expected,
        current_healthy,
        desired_healthy,
        disruptions_allowed: (current_healthy - desired_healthy).max(0),
        disrupted,
    }
}

pub struct DisruptionController {
    client: Client,
    budgets: Cache<PodDisruptionBudget>,
    pods: Cache<Pod>,
}

impl DisruptionController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(DisruptionController {
            client,
            budgets: informers.cache(),
            pods: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<PodDisruptionBudget>(informers)?
            .watches::<Pod, _>(informers, |c, ev| c.pod_keys(ev))
    }

    fn selector(pdb: &PodDisruptionBudget) -> Option<Selector> {
        // policy/v1: an empty (or missing) selector selects every pod of the namespace.
        match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
            Some(ls) => Selector::from_label_selector(ls).ok(),
            None => Selector::from_label_selector(&Default::default()).ok(),
        }
    }

    /// The budgets of the pod's namespace that select it (before and after an update).
    fn pod_keys(&self, ev: &Event<Pod>) -> Vec<String> {
        let mut pods = vec![ev.object()];
        if let Event::Updated { old, .. } = ev {
            pods.push(old);
        }
        let mut keys = Vec::new();
        for pod in pods {
            let ns = crate::ns_of(&pod.metadata);
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            for pdb in self.budgets.by_index(NAMESPACE_INDEX, &ns) {
                if Self::selector(&pdb).is_some_and(|s| s.matches(&labels)) {
                    keys.push(object_key(&pdb.metadata));
                }
            }
        }
        keys
    }

    /// The desired replicas of the controllers owning `pods` (a Deployment
    /// for its ReplicaSets), as Kubernetes counts expected pods for
    /// percentages and maxUnavailable; None when a pod has no controller.
    async fn expected_from_owners(
        &self,
        ns: &str,
        pods: &[&Pod],
    ) -> Result<Option<i32>, ClientError> {
        let mut owners: BTreeMap<(String, String), i32> = BTreeMap::new();
        for pod in pods {
            let Some((_, kind, name)) = controller_of(&pod.metadata) else {
                return Ok(None);
            };
            let (kind, name) = self.top_owner(ns, &kind, &name).await?;
            if owners.contains_key(&(kind.clone(), name.clone())) {
                continue;
            }
            let Some(info) = registry::REGISTRY.iter().find(|r| r.kind == kind) else {
                return Ok(None);
            };
            let owner = self.client.dynamic(info, Some(ns)).get(&name).await?;
            let replicas = owner["spec"]["replicas"].as_i64().unwrap_or(1) as i32;
            owners.insert((kind, name), replicas);
        }
        Ok(Some(owners.values().sum()))
    }

    /// A ReplicaSet owned by a Deployment counts as that Deployment.
    async fn top_owner(
        &self,
        ns: &str,
        kind: &str,
        name: &str,
    ) -> Result<(String, String), ClientError> {
        if kind == "ReplicaSet" {
            let rs_info = registry::of::<k8s_openapi::api::apps::v1::ReplicaSet>();
            let rs = self.client.dynamic(rs_info, Some(ns)).get(name).await?;
            let owner = rs["metadata"]["ownerReferences"].as_array().and_then(|o| {
                o.iter()
                    .find(|r| r["controller"] == true && r["kind"] == "Deployment")
            });
            if let Some(d) = owner.and_then(|o| o["name"].as_str()) {
                return Ok(("Deployment".into(), d.to_string()));
            }
        }
        Ok((kind.to_string(), name.to_string()))
    }
}

impl Reconciler for DisruptionController {
    const NAME: &'static str = "disruption";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(pdb) = self.budgets.get(key) else {
            return Ok(Action::Done);
        };
        let ns = crate::ns_of(&pdb.metadata);
        let Some(selector) = Self::selector(&pdb) else {
            return Ok(Action::Done);
        };
        let pods: Vec<Arc<Pod>> = self
            .pods
            .by_index(NAMESPACE_INDEX, &ns)
            .into_iter()
            .filter(|p| selector.matches(&p.metadata.labels.clone().unwrap_or_default()))
            .collect();
        let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        let spec = pdb.spec.clone().unwrap_or_default();
        let needs_owners = !matches!(spec.min_available, Some(IntOrString::Int(_)));
        let owners = if needs_owners {
            match self.expected_from_owners(&ns, &refs).await {
                Ok(n) => n,
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let b = compute(&pdb, &refs, owners, Utc::now());
        let allowed = b.disruptions_allowed > 0;
        let status = json!({
            "observedGeneration": pdb.metadata.generation.unwrap_or(0),
            "expectedPods": b.expected,
            "currentHealthy": b.current_healthy,
            "desiredHealthy": b.desired_healthy,
            "disruptionsAllowed": b.disruptions_allowed,
            "disruptedPods": if b.disrupted.is_empty() { Value::Null } else { json!(b.disrupted) },
            "conditions": [{
                "type": "DisruptionAllowed",
                "status": if allowed { "True" } else { "False" },
                "reason": if allowed { "SufficientPods" } else { "InsufficientPods" },
                "message": "",
                "observedGeneration": pdb.metadata.generation.unwrap_or(0),
                "lastTransitionTime": transition_time(&pdb, allowed),
            }],
        });
        let unchanged = pdb.status.as_ref().is_some_and(|s| {
            let old = serde_json::to_value(s).unwrap_or_default();
            [
                "observedGeneration",
                "expectedPods",
                "currentHealthy",
                "desiredHealthy",
                "disruptionsAllowed",
            ]
            .iter()
            .all(|f| old[f] == status[f])
                && old["disruptedPods"].as_object().map_or(0, |m| m.len()) == b.disrupted.len()
        });
        if !unchanged {
            self.client
                .patch_status::<PodDisruptionBudget>(
                    &pdb.metadata,
                    "application/merge-patch+json",
                    &json!({"status": status}),
                )
                .await?;
        }
        // Disrupted pods expire: look again when the oldest one would.
        Ok(if b.disrupted.is_empty() {
            Action::Done
        } else {
            Action::RequeueAfter(Duration::from_secs(30))
        })
    }
}

/// The condition's transition time: kept while its status stays.
fn transition_time(pdb: &PodDisruptionBudget, allowed: bool) -> String {
    let want = if allowed { "True" } else { "False" };
    pdb.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "DisruptionAllowed" && c.status == want)
        })
        .map(|c| minik8s_api::meta::utc_of(&c.last_transition_time))
        .unwrap_or_else(Utc::now)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(spec: Value, disrupted: Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "b", "generation": 1}, "spec": spec,
                                      "status": {"disruptedPods": disrupted, "disruptionsAllowed": 0,
                                                 "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
        .unwrap()
    }

    fn pod(name: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    #[test]
    fn budgets_count_healthy_pods_against_their_bound() {
        let now = Utc::now();
        let pods = [
            pod("a", true),
            pod("b", true),
            pod("c", true),
            pod("d", false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let b = compute(
            &pdb(json!({"minAvailable": 2}), json!(null)),
            &refs,
            None,
            now,
        );
        assert_eq!(
            (
                b.expected,
                b.current_healthy,
                b.desired_healthy,
                b.disruptions_allowed
            ),
            (4, 3, 2, 1)
        );
        // 50% of 4 expected (from the controllers) rounds up to 2.
        let b = compute(
            &pdb(json!({"minAvailable": "50%"}), json!(null)),
            &refs,
            Some(4),
            now,
        );
        assert_eq!((b.desired_healthy, b.disruptions_allowed), (2, 1));
        // maxUnavailable 1 of 4: 3 must stay, 3 are healthy: none may go.
        let b = compute(
            &pdb(json!({"maxUnavailable": 1}), json!(null)),
            &refs,
            Some(4),
            now,
        );
        assert_eq!((b.desired_healthy, b.disruptions_allowed), (3, 0));
        let b = compute(
            &pdb(json!({"maxUnavailable": "30%"}), json!(null)),
            &refs,
            Some(10),
            now,
        );
        assert_eq!(b.desired_healthy, 7);
    }

    #[test]
    fn a_just_evicted_pod_counts_as_disrupted_for_a_while() {
        let now = Utc::now();
        let pods = [pod("a", true), pod("b", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let recent = (now - chrono::Duration::seconds(10)).to_rfc3339();
        let b = compute(
            &pdb(json!({"minAvailable": 1}), json!({"a": recent})),
            &refs,
            None,
            now,
        );
        assert_eq!((b.current_healthy, b.disruptions_allowed), (1, 0));
        let old = (now - chrono::Duration::minutes(5)).to_rfc3339();
        let b = compute(
            &pdb(
                json!({"minAvailable": 1}),
                json!({"a": old, "gone": recent}),
            ),
            &refs,
            None,
            now,
        );
        assert!(b.disrupted.is_empty(), "expired or gone: {:?}", b.disrupted);
        assert_eq!(b.disruptions_allowed, 1);
    }
}
