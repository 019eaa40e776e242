//! The group controller's steps for Hash groups (`hash.rs` holds their
//! pure core): lifting a held leader's replacement gate once the groups it
//! would compete with are gone, and setting a leader's `group-ready`
//! condition from its workers.

use super::group::GroupController;
use super::hash::*;
use super::rollout::*;
use crate::ns_of;
use crate::ownership::controller_of;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::lws_pod::*;
use minik8s_api::registry;
use minik8s_client::controller::Action;
use minik8s_client::rest::content;
use minik8s_client::shared::NAMESPACE_INDEX;
use minik8s_client::ClientError;
use serde_json::{json, Value};
use std::time::Duration;

impl GroupController {
    /// PostTermination: lifts the replacement gate of the leaders that may
    /// go (see [`leaders_to_admit`]); the others look again in 10 s.
    pub(super) async fn admit_replacements(
        &self,
        lws: &LeaderWorkerSet,
        leader: &Pod,
    ) -> Result<Action, ClientError> {
        let ns = ns_of(&leader.metadata);
        let lws_name = lws.metadata.name.clone().unwrap_or_default();
        let pods = set_pods(&self.pods.by_index(NAMESPACE_INDEX, &ns), &lws_name);
        let name = leader.metadata.name.clone().unwrap_or_default();
        if !leaders_to_admit(&pods).contains(&name) {
            return Ok(Action::RequeueAfter(REPLACEMENT_RETRY));
        }
        let gates: Vec<Value> = leader
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|g| g.name != REPLACEMENT_GATE)
            .map(|g| json!({"name": g.name}))
            .collect();
        // A merge patch replaces the list; the resourceVersion makes it
        // fail rather than drop a gate someone added meanwhile.
        let patch = json!({"metadata": {"resourceVersion": leader.metadata.resource_version},
            "spec": {"schedulingGates": gates}});
        let api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        match api.patch(&name, None, content::MERGE_PATCH, &patch).await {
            Ok(_) => Ok(Action::Done),
            Err(e) if e.is_conflict() => Ok(Action::RequeueAfter(Duration::from_millis(200))),
            Err(e) if e.is_not_found() => Ok(Action::Done),
            Err(e) => Err(e),
        }
    }

    /// Sets the Hash leader's `group-ready` condition from its workers.
    pub(super) async fn set_group_ready(
        &self,
        lws: &LeaderWorkerSet,
        leader: &Pod,
    ) -> Result<(), ClientError> {
        if leader.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let ns = ns_of(&leader.metadata);
        let name = leader.metadata.name.clone().unwrap_or_default();
        let workers = self
            .statefulsets
            .get(&format!("{ns}/{name}"))
            .filter(|s| controller_of(&s.metadata).map(|o| o.0) == leader.metadata.uid);
        let ready = group_ready(
            size_of(&lws.spec.leader_worker_template),
            workers.as_deref(),
        );
        let Some(patch) = group_ready_patch(leader, ready) else {
            return Ok(());
        };
        let api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));
        api.patch_status(&name, CONDITION_PATCH, &patch)
            .await
            .map(|_| ())
    }
}
