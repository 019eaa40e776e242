//! The ReplicaSet controller: keeps `spec.replicas` pods matching the selector.
//!
//! Pure core (`claim`, `plan`, `deletion_order`, `slow_start`, `status`) decides
//! from what is observed; `reconcile` is the I/O shell around it, as in
//! Kubernetes' `pkg/controller/replicaset`.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::selector::Selector;
use std::cmp::Ordering;
use std::sync::Arc;

/// The controller ownerReference of an object, if any: (uid, kind, name).
pub fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(String, String, String)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.uid.clone(), o.kind.clone(), o.name.clone()))
}

/// A pod still counts toward replicas: not finished and not being deleted.
pub fn is_active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded") | Some("Failed"))
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

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
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    scheduled(a)
        .cmp(&scheduled(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(is_ready(a).cmp(&is_ready(b)))
        .then(restarts(b).cmp(&restarts(a)))
        .then(created(b).cmp(&created(a)))
}

/// The status the ReplicaSet should report.
pub fn status(rs: &ReplicaSet, owned: &[Arc<Pod>]) -> serde_json::Value {
    let active: Vec<&Arc<Pod>> = owned.iter().filter(|p| is_active(p)).collect();
    let template_labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
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
    serde_json::json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": rs.metadata.generation.unwrap_or(0),
    })
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
        assert_eq!(
            status(&rs(), &owned),
            json!({"replicas": 2, "fullyLabeledReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 2})
        );
    }
}
