//! The PodGroups of a LeaderWorkerSet's gangs, which the minik8s scheduler
//! honours: one per group, or one for the whole LWS at `spec.scheduling`'s
//! LWS level.
//!
//! - `spec.scheduling` (KEP-666) writes Kubernetes 1.37's Workload API: a
//!   Workload named after the LWS whose one pod group template is the gang,
//!   and PodGroups (`scheduling.k8s.io/v1beta1`) made from it that the pods
//!   name in `spec.schedulingGroup`.
//! - Templates asking for Volcano (`schedulerName: volcano`, upstream's
//!   Volcano provider) get Volcano PodGroups (`scheduling.volcano.sh/v1beta1`).
//!
//! Pure builders; the group controller and the LWS controller create them.

use super::size_of;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::lws_pod::*;
use minik8s_api::lws_scheduling::{gang_constraints, scope, GangScope};
use minik8s_api::podgroup::{API_VERSION, KIND, VOLCANO_SCHEDULER};

/// The Workload API's group and version.
pub const WORKLOAD_API_VERSION: &str = "scheduling.k8s.io/v1beta1";
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

/// One leader's requests plus (size − 1) workers'.
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

/// Whether the LWS's gangs are the Workload API's (`spec.scheduling`).
pub fn uses_workload_api(lws: &LeaderWorkerSet) -> bool {
    scope(lws.spec.scheduling.as_ref()) != GangScope::Off
}

/// The gang size of one group (or the LWS, or a group's workers).
fn min_count(lws: &LeaderWorkerSet, scope: GangScope) -> i32 {
    let size = size_of(&lws.spec.leader_worker_template);
    let leader_ready = lws.spec.startup_policy.as_deref() == Some("LeaderReady");
    if scope == GangScope::Group && leader_ready {
        1 // the workers only exist once the leader runs (upstream does the same)
    } else {
        scope.min_member(lws.spec.replicas.unwrap_or(1), size)
    }
}

/// The Workload of an LWS under `spec.scheduling`: one pod group template,
/// named after the gang's scope, owned by the LWS.
pub fn workload(lws: &LeaderWorkerSet) -> Option<Value> {
    if !uses_workload_api(lws) {
        return None;
    }
    let scope = gang_scope(lws);
    let name = lws.metadata.name.clone().unwrap_or_default();
    let mut template = json!({"name": scope.as_str(),
        "schedulingPolicy": {"gang": {"minCount": min_count(lws, scope)}}});
    if let Some(c) = gang_constraints(lws.spec.scheduling.as_ref()) {
        template["schedulingConstraints"] = c;
    }
    Some(
        json!({"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload",
        "metadata": {"name": name, "namespace": lws.metadata.namespace,
            "labels": {NAME: name}, "ownerReferences": [super::owner_ref(lws)]},
        "spec": {"controllerRef": {"apiGroup": minik8s_api::lws::GROUP, "kind": "LeaderWorkerSet", "name": name},
            "podGroupTemplates": [template]}}),
    )
}

/// A Workload API PodGroup `group` made from the LWS's Workload template.
fn workload_pod_group(lws: &LeaderWorkerSet, scope: GangScope, group: &str, meta: Value) -> Value {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let mut metadata = meta;
    metadata["name"] = json!(group);
    metadata["namespace"] = json!(lws.metadata.namespace);
    let mut pg = json!({"apiVersion": WORKLOAD_API_VERSION, "kind": "PodGroup", "metadata": metadata,
        "spec": {"workloadRef": {"workloadName": name, "templateName": scope.as_str()},
            "schedulingPolicy": {"gang": {"minCount": min_count(lws, scope)}}}});
    if let Some(c) = gang_constraints(lws.spec.scheduling.as_ref()) {
        pg["spec"]["schedulingConstraints"] = c;
    }
    pg
}

/// The gang size a PodGroup of either API asks for.
pub fn pod_group_min(pg: &Value) -> Option<i64> {
    pg.pointer("/spec/schedulingPolicy/gang/minCount")
        .or_else(|| pg.pointer("/spec/minMember"))
        .and_then(Value::as_i64)
}

/// The merge patch that sets a PodGroup's gang size, for either API.
pub fn pod_group_min_patch(pg: &Value, min: i64) -> Value {
    if pg["apiVersion"] == WORKLOAD_API_VERSION {
        json!({"spec": {"schedulingPolicy": {"gang": {"minCount": min}}}})
    } else {
        json!({"spec": {"minMember": min}})
    }
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
    let owner = crate::ownership::controller_ref("v1", "Pod", &leader.metadata);
    if uses_workload_api(lws) {
        let meta = json!({"labels": {NAME: name, GROUP_INDEX: index, REVISION_KEY: revision},
            "ownerReferences": [owner]});
        return Some(workload_pod_group(lws, scope, &group, meta));
    }
    let min = min_count(lws, scope);
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
            "ownerReferences": [owner]},
        "spec": spec}))
}

/// The one PodGroup of an LWS-level gang, owned by the LWS.
pub fn lws_pod_group(lws: &LeaderWorkerSet) -> Option<Value> {
    let scope = gang_scope(lws);
    if scope != GangScope::Lws {
        return None;
    }
    let name = lws.metadata.name.clone().unwrap_or_default();
    let group = scope.group_name(&name, "", "", false)?;
    let meta = json!({"labels": {NAME: name}, "ownerReferences": [super::owner_ref(lws)]});
    Some(workload_pod_group(lws, scope, &group, meta))
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
            pod_group_min(&group_pod_group(&lws(per_group.clone()), &leader()).unwrap()).unwrap(),
            4
        );
        let mut workers = plain.clone();
        json_patch::merge(
            &mut workers,
            &json!({"spec": {"scheduling": {"replica": {"worker": {}}}}}),
        );
        let pg = group_pod_group(&lws(workers), &leader()).unwrap();
        assert_eq!(
            (pg["metadata"]["name"].as_str(), pod_group_min(&pg)),
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
            (pg["metadata"]["name"].as_str(), pod_group_min(&pg)),
            (Some("d-lws"), Some(12))
        );
        assert_eq!(
            pg["metadata"]["ownerReferences"][0]["kind"],
            "LeaderWorkerSet"
        );
    }

    #[test]
    fn spec_scheduling_writes_the_workload_api() {
        let mut per_group = json!({"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"schedulerName": null}}}}});
        json_patch::merge(&mut per_group, &json!({"spec": {"scheduling": {}}}));
        let l = lws(per_group);
        assert!(uses_workload_api(&l));
        let w = workload(&l).unwrap();
        assert_eq!(w["apiVersion"], WORKLOAD_API_VERSION);
        assert_eq!(w["kind"], "Workload");
        assert_eq!(w["metadata"]["name"], "d");
        assert_eq!(
            w["metadata"]["ownerReferences"][0]["kind"],
            "LeaderWorkerSet"
        );
        assert_eq!(
            w["spec"]["controllerRef"],
            json!({"apiGroup": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet", "name": "d"})
        );
        assert_eq!(
            w["spec"]["podGroupTemplates"],
            json!([{"name": "group", "schedulingPolicy": {"gang": {"minCount": 4}}}])
        );
        let pg = group_pod_group(&l, &leader()).unwrap();
        assert_eq!(pg["apiVersion"], WORKLOAD_API_VERSION);
        assert_eq!(pg["metadata"]["name"], "d-1-abc");
        assert_eq!(pg["metadata"]["ownerReferences"][0]["kind"], "Pod");
        assert_eq!(
            pg["spec"]["workloadRef"],
            json!({"workloadName": "d", "templateName": "group"})
        );
        assert_eq!(pod_group_min(&pg), Some(4));
        assert_eq!(
            pod_group_min_patch(&pg, 6),
            json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}})
        );
        // The gang level's topology constraint goes with the template and groups.
        let mut zoned = json!({"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"schedulerName": null}}}}});
        json_patch::merge(
            &mut zoned,
            &json!({"spec": {"scheduling": {"replica": {
            "schedulingConstraints": {"topology": [{"key": "zone"}]}}}}}),
        );
        let z = lws(zoned);
        let topology = json!({"topology": [{"key": "zone"}]});
        assert_eq!(
            workload(&z).unwrap()["spec"]["podGroupTemplates"][0]["schedulingConstraints"],
            topology
        );
        assert_eq!(
            group_pod_group(&z, &leader()).unwrap()["spec"]["schedulingConstraints"],
            topology
        );
        // Volcano templates keep Volcano's PodGroups and write no Workload.
        let v = lws(json!({}));
        assert!(workload(&v).is_none());
        assert_eq!(
            group_pod_group(&v, &leader()).unwrap()["apiVersion"],
            API_VERSION
        );
    }
}
