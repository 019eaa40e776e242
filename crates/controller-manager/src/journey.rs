//! When a workload's reconciles are part of its journey. A workload
//! controller follows the trace context the apiserver keeps for its object
//! ([`Reconciler::trace_context`](minik8s_client::controller::Reconciler))
//! while the object rolls out: the pods (or sets) it creates then join the
//! trace of the user's create, down to the scheduler and the kubelet. Once
//! settled nothing is traced, so a steady cluster records nothing.
//! (Deployments and ReplicaSets decide the same beside their controllers.)

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{from_value, json};

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
}
