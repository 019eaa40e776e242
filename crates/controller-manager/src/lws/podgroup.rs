//! The PodGroups of a LeaderWorkerSet's gangs (`scheduling.volcano.sh/v1beta1`,
//! which the minik8s scheduler honours): one per group when the templates ask
//! for Volcano (`schedulerName: volcano`, upstream's Volcano provider, §6 of
//! `lws-since-v0.6.md`) or `spec.scheduling` asks for a gang per group or per
//! group's workers; one for the whole LWS for `spec.scheduling`'s LWS level.
//! Pure builders; the group controller and the LWS controller create them.

use super::size_of;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::lws_pod::*;
use minik8s_api::lws_scheduling::{scope, GangScope};
use minik8s_api::podgroup::{API_VERSION, KIND, VOLCANO_SCHEDULER};
use minik8s_api::quantity::Quantity;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// LWS annotation naming the Volcano queue of its PodGroups.
pub const QUEUE_NAME: &str = "scheduling.volcano.sh/queue-name";

/// Whether the LWS's pods ask for Volcano.
pub fn wants_volcano(lws: &LeaderWorkerSet) -> bool {
    let lwt = &lws.spec.leader_worker_template;
    let volcano = |s: Option<&PodSpec>| {
        s.and_then(|s| s.scheduler_name.as_deref()) == Some(VOLCANO_SCHEDULER)
    };
    volcano(lwt.worker_template.spec.as_ref())
        || volcano(lwt.leader_template.as_ref().and_then(|t| t.spec.as_ref()))
}

/// The gang scope of the LWS: `spec.scheduling`'s, else one gang per group
/// under Volcano.
pub fn gang_scope(lws: &LeaderWorkerSet) -> GangScope {
    match scope(lws.spec.scheduling.as_ref()) {
        GangScope::Off if wants_volcano(lws) => GangScope::Group,
        s => s,
    }
}

/// Kubernetes' pod request rule: max(sum of app containers, largest init
/// container), per resource.
fn pod_requests(spec: Option<&PodSpec>) -> BTreeMap<String, f64> {
    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
    let Some(spec) = spec else { return sum };
    let requests = |c: &k8s_openapi::api::core::v1::Container| -> Vec<(String, f64)> {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, q)| Some((k, Quantity::parse(&q.0).ok()?.0)))
            .collect()
    };
    for c in &spec.containers {
        for (k, v) in requests(c) {
            *sum.entry(k).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in requests(c) {
            let e = sum.entry(k).or_default();
            *e = e.max(v);
        }
    }
    sum
}

fn render(resource: &str, v: f64) -> String {
    if resource == "cpu" && v.fract() != 0.0 {
        format!("{}m", (v * 1000.0).round() as i64)
    } else {
        format!("{}", v.round() as i64)
    }
}

/// §6: one leader's requests plus (size − 1) workers'.
pub fn min_resources(lws: &LeaderWorkerSet) -> Map<String, Value> {
    let lwt = &lws.spec.leader_worker_template;
    let worker = pod_requests(lwt.worker_template.spec.as_ref());
    let leader = match &lwt.leader_template {
        Some(t) => pod_requests(t.spec.as_ref()),
        None => worker.clone(),
    };
    let mut total = leader;
    let n = f64::from(size_of(lwt) - 1);
    for (k, v) in worker {
        *total.entry(k).or_default() += v * n;
    }
    total
        .into_iter()
        .map(|(k, v)| {
            let s = render(&k, v);
            (k, json!(s))
        })
        .collect()
}

/// The PodGroup of `leader`'s group (or of its workers), owned by the
/// leader pod so it goes with the group; `None` when the LWS has no gang per
/// group.
pub fn group_pod_group(lws: &LeaderWorkerSet, leader: &Pod) -> Option<Value> {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let labels = leader.metadata.labels.clone().unwrap_or_default();
    let index = labels.get(GROUP_INDEX).cloned().unwrap_or_default();
    let revision = labels.get(REVISION_KEY).cloned().unwrap_or_default();
    let scope = gang_scope(lws);
    if !matches!(scope, GangScope::Group | GangScope::Worker) {
        return None;
    }
    let group = scope.group_name(&name, &index, &revision, false)?;
    let size = size_of(&lws.spec.leader_worker_template);
    let replicas = lws.spec.replicas.unwrap_or(1);
    let leader_ready = lws.spec.startup_policy.as_deref() == Some("LeaderReady");
    let min = if scope == GangScope::Group && leader_ready {
        1 // the workers only exist once the leader runs (upstream does the same)
    } else {
        scope.min_member(replicas, size)
    };
    let ann = lws.metadata.annotations.clone().unwrap_or_default();
    let volcano: BTreeMap<&String, &String> = ann
        .iter()
        .filter(|(k, _)| k.starts_with("volcano.sh/"))
        .collect();
    let mut spec = json!({"minMember": min, "minResources": min_resources(lws)});
    if let Some(q) = ann.get(QUEUE_NAME) {
        spec["queue"] = json!(q);
    }
    Some(json!({"apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": group, "namespace": leader.metadata.namespace,
            "labels": {NAME: name, GROUP_INDEX: index, REVISION_KEY: revision},
            "annotations": volcano,
            "ownerReferences": [crate::ownership::controller_ref("v1", "Pod", &leader.metadata)]},
        "spec": spec}))
}

/// The one PodGroup of an LWS-level gang, owned by the LWS.
pub fn lws_pod_group(lws: &LeaderWorkerSet) -> Option<Value> {
    let scope = gang_scope(lws);
    if scope != GangScope::Lws {
        return None;
    }
    let name = lws.metadata.name.clone().unwrap_or_default();
    let size = size_of(&lws.spec.leader_worker_template);
    let min = scope.min_member(lws.spec.replicas.unwrap_or(1), size);
    Some(json!({"apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": scope.group_name(&name, "", "", false), "namespace": lws.metadata.namespace,
            "labels": {NAME: name}, "ownerReferences": [super::owner_ref(lws)]},
        "spec": {"minMember": min}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lws(extra: Value) -> LeaderWorkerSet {
        let mut v = json!({"metadata": {"name": "d", "namespace": "ns",
                "annotations": {"volcano.sh/sla-waiting-time": "1h", QUEUE_NAME: "q1", "other": "x"}},
            "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4,
                "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "i",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}},
                "workerTemplate": {"spec": {"schedulerName": "volcano",
                    "initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "3"}}}],
                    "containers": [{"name": "w", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}},
                                   {"name": "s", "image": "i", "resources": {"requests": {"cpu": "250m"}}}]}}}}});
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    fn leader() -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "d-1", "namespace": "ns", "uid": "u1",
            "labels": {GROUP_INDEX: "1", REVISION_KEY: "abc"}}}),
        )
        .unwrap()
    }

    #[test]
    fn volcano_pod_groups_are_upstreams() {
        let l = lws(json!({}));
        assert!(wants_volcano(&l));
        let pg = group_pod_group(&l, &leader()).unwrap();
        assert_eq!(pg["metadata"]["name"], "d-1-abc");
        assert_eq!(pg["spec"]["minMember"], 4);
        assert_eq!(pg["spec"]["queue"], "q1");
        // Leader 1 cpu + 3 workers × max(0.75 cpu, init 3 cpu) = 10 cpu; memory 1Gi + 3 × 2Gi.
        assert_eq!(
            pg["spec"]["minResources"],
            json!({"cpu": "10", "memory": (7i64 << 30).to_string()})
        );
        assert_eq!(
            pg["metadata"]["annotations"],
            json!({"volcano.sh/sla-waiting-time": "1h"})
        );
        assert_eq!(pg["metadata"]["labels"][NAME], "d");
        assert_eq!(pg["metadata"]["ownerReferences"][0]["kind"], "Pod");
        let ready = lws(json!({"spec": {"startupPolicy": "LeaderReady"}}));
        assert_eq!(
            group_pod_group(&ready, &leader()).unwrap()["spec"]["minMember"],
            1
        );
        assert!(lws_pod_group(&l).is_none());
    }

    #[test]
    fn spec_scheduling_levels() {
        let plain = json!({"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"schedulerName": null}}}}});
        let mut off = plain.clone();
        json_patch::merge(&mut off, &json!({}));
        assert!(group_pod_group(&lws(off), &leader()).is_none());
        let mut per_group = plain.clone();
        json_patch::merge(&mut per_group, &json!({"spec": {"scheduling": {}}}));
        assert_eq!(
            group_pod_group(&lws(per_group), &leader()).unwrap()["spec"]["minMember"],
            4
        );
        let mut workers = plain.clone();
        json_patch::merge(
            &mut workers,
            &json!({"spec": {"scheduling": {"replica": {"worker": {}}}}}),
        );
        let pg = group_pod_group(&lws(workers), &leader()).unwrap();
        assert_eq!(
            (
                pg["metadata"]["name"].as_str(),
                pg["spec"]["minMember"].as_i64()
            ),
            (Some("d-1-abc-worker"), Some(3))
        );
        let mut whole = plain;
        json_patch::merge(
            &mut whole,
            &json!({"spec": {"scheduling": {"schedulingPolicy": {"gang": {}}}}}),
        );
        let l = lws(whole);
        assert!(group_pod_group(&l, &leader()).is_none());
        let pg = lws_pod_group(&l).unwrap();
        assert_eq!(
            (
                pg["metadata"]["name"].as_str(),
                pg["spec"]["minMember"].as_i64()
            ),
            (Some("d-lws"), Some(12))
        );
        assert_eq!(
            pg["metadata"]["ownerReferences"][0]["kind"],
            "LeaderWorkerSet"
        );
    }
}
