//! When a workload's reconciles are part of its journey. A workload
//! controller follows the trace context the apiserver keeps for its object
//! ([`Reconciler::trace_context`](minik8s_client::controller::Reconciler))
//! while the object rolls out: the pods (or sets) it creates then join the
//! trace of the user's create, down to the scheduler and the kubelet. Once
//! settled nothing is traced, so a steady cluster records nothing.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_api::disaggregatedset::DisaggregatedSet;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_client::Client;

/// The context the apiserver keeps for `meta`'s object, unless `settled`
/// (then nobody is asked).
pub async fn context_unless(client: &Client, meta: &ObjectMeta, settled: bool) -> Option<String> {
    if settled || meta.deletion_timestamp.is_some() {
        return None;
    }
    let uid = meta.uid.as_deref().unwrap_or("");
    minik8s_client::traces::context_of(client, uid).await
}

/// Whether the status has caught up with this generation of the spec.
fn observed(meta: &ObjectMeta, observed_generation: Option<i64>) -> bool {
    observed_generation.unwrap_or(0) >= meta.generation.unwrap_or(0)
}

/// Every replica of the new template and ready, and no old one left.
pub fn deployment_settled(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(s) = &d.status else {
        return false;
    };
    observed(&d.metadata, s.observed_generation)
        && s.updated_replicas.unwrap_or(0) == want
        && s.ready_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
}

/// Every replica there and ready.
pub fn replicaset_settled(rs: &ReplicaSet) -> bool {
    let want = rs.spec.replicas.unwrap_or(1);
    let Some(s) = &rs.status else {
        return false;
    };
    observed(&rs.metadata, s.observed_generation)
        && s.replicas == want
        && s.ready_replicas.unwrap_or(0) == want
}

/// Every replica updated and ready.
pub fn statefulset_settled(set: &StatefulSet) -> bool {
    let want = set.spec.replicas.unwrap_or(1);
    let Some(s) = &set.status else {
        return false;
    };
    observed(&set.metadata, s.observed_generation)
        && s.replicas == want
        && s.ready_replicas.unwrap_or(0) == want
        && s.updated_replicas.unwrap_or(0) == want
}

/// A daemon pod updated and ready on every node that should run one.
pub fn daemonset_settled(ds: &DaemonSet) -> bool {
    let Some(s) = &ds.status else {
        return false;
    };
    observed(&ds.metadata, s.observed_generation)
        && s.number_ready == s.desired_number_scheduled
        && s.updated_number_scheduled.unwrap_or(0) == s.desired_number_scheduled
}

/// A Job's journey lasts until it finished (Complete or Failed).
pub fn job_settled(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// Every group updated and ready.
pub fn lws_settled(lws: &LeaderWorkerSet) -> bool {
    let want = lws.spec.replicas.unwrap_or(1);
    let Some(s) = &lws.status else {
        return false;
    };
    observed(&lws.metadata, s.observed_generation)
        && s.replicas == want
        && s.ready_replicas == want
        && s.updated_replicas == want
}

/// Every role's groups ready and updated: its controller says Available
/// for this generation.
pub fn disaggregatedset_settled(ds: &DisaggregatedSet) -> bool {
    let Some(s) = &ds.status else {
        return false;
    };
    observed(&ds.metadata, s.observed_generation)
        && s.conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{from_value, json};

    #[test]
    fn a_deployment_rolls_out_until_every_replica_is_new_and_ready_and_the_old_are_gone() {
        let d = |replicas: i32, updated: i32, ready: i32| -> Deployment {
            from_value(
                json!({"metadata": {"generation": 3}, "spec": {"replicas": 2,
                "selector": {}, "template": {}}, "status": {"observedGeneration": 3,
                "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready}}),
            )
            .unwrap()
        };
        assert!(deployment_settled(&d(2, 2, 2)));
        assert!(!deployment_settled(&d(3, 2, 2)), "an old pod still there");
        assert!(!deployment_settled(&d(2, 1, 2)));
        assert!(!deployment_settled(&d(2, 2, 1)));
    }

    #[test]
    fn a_replicaset_is_followed_until_its_replicas_are_ready() {
        let rs = |observed: i64, ready: i32| -> ReplicaSet {
            from_value(
                json!({"metadata": {"generation": 2}, "spec": {"replicas": 2, "selector": {}},
                "status": {"observedGeneration": observed, "replicas": 2, "readyReplicas": ready}}),
            )
            .unwrap()
        };
        assert!(replicaset_settled(&rs(2, 2)));
        assert!(
            !replicaset_settled(&rs(1, 2)),
            "its status is of an older spec"
        );
        assert!(!replicaset_settled(&rs(2, 1)));
    }

    #[test]
    fn a_statefulset_rolls_out_until_every_replica_is_updated_and_ready() {
        let set = |status: serde_json::Value| -> StatefulSet {
            from_value(
                json!({"metadata": {"generation": 2}, "spec": {"replicas": 2,
                "selector": {}, "serviceName": "s", "template": {}}, "status": status}),
            )
            .unwrap()
        };
        let ready = json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2});
        assert!(statefulset_settled(&set(ready.clone())));
        let mut older = ready.clone();
        older["observedGeneration"] = json!(1);
        assert!(!statefulset_settled(&set(older)));
        let mut one_ready = ready;
        one_ready["readyReplicas"] = json!(1);
        assert!(!statefulset_settled(&set(one_ready)));
        let new: StatefulSet =
            from_value(json!({"spec": {"selector": {}, "template": {}}})).unwrap();
        assert!(!statefulset_settled(&new), "no status yet");
    }

    #[test]
    fn a_daemonset_rolls_out_until_each_node_has_a_ready_updated_pod() {
        let ds = |ready: i32, updated: i32| -> DaemonSet {
            from_value(json!({"metadata": {"generation": 1}, "spec": {"selector": {}, "template": {}},
                "status": {"observedGeneration": 1, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                    "numberMisscheduled": 0, "numberReady": ready, "updatedNumberScheduled": updated}}))
            .unwrap()
        };
        assert!(daemonset_settled(&ds(3, 3)));
        assert!(!daemonset_settled(&ds(2, 3)));
        assert!(!daemonset_settled(&ds(3, 1)));
    }

    #[test]
    fn a_job_is_followed_until_it_finished() {
        let job = |conditions: serde_json::Value| -> Job {
            from_value(json!({"spec": {"template": {}}, "status": {"conditions": conditions}}))
                .unwrap()
        };
        assert!(!job_settled(&job(json!([]))));
        assert!(!job_settled(&job(
            json!([{"type": "SuccessCriteriaMet", "status": "True"}])
        )));
        assert!(job_settled(&job(
            json!([{"type": "Complete", "status": "True"}])
        )));
        assert!(job_settled(&job(
            json!([{"type": "Failed", "status": "True"}])
        )));
    }

    #[test]
    fn an_lws_rolls_out_until_every_group_is_updated_and_ready() {
        let lws = |ready: i32| -> LeaderWorkerSet {
            from_value(json!({"metadata": {"generation": 1}, "spec": {"replicas": 2,
                "leaderWorkerTemplate": {"workerTemplate": {}}},
                "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": ready, "updatedReplicas": 2}}))
            .unwrap()
        };
        assert!(lws_settled(&lws(2)));
        assert!(!lws_settled(&lws(1)));
    }

    #[test]
    fn a_disaggregatedset_rolls_out_until_available_for_its_generation() {
        let ds = |observed: i64, available: &str| -> DisaggregatedSet {
            from_value(json!({"metadata": {"generation": 2}, "spec": {"roles": []},
                "status": {"observedGeneration": observed, "conditions": [{"type": "Available",
                    "status": available, "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
            .unwrap()
        };
        assert!(disaggregatedset_settled(&ds(2, "True")));
        assert!(!disaggregatedset_settled(&ds(2, "False")));
        assert!(!disaggregatedset_settled(&ds(1, "True")));
    }
}
