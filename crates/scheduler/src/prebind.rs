//! The scheduler's PreBind for volumes (Kubernetes' VolumeBinding plugin,
//! I/O side): before a pod is bound, the chosen node's volume plan is
//! written — static volumes pre-bound to their claims, claims to provision
//! annotated with the node — and the claim binder is given time to bind
//! them, so the pod reaches its node with its volumes ready.

use crate::{volumes, Scheduler};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use minik8s_api::registry;
use minik8s_client::rest::content;
use minik8s_client::ClientError;
use serde_json::json;
use std::time::Duration;

/// How long a pod waits for its claims to be bound before it is bound
/// itself (then its scheduling is retried).
const VOLUME_BIND_TIMEOUT: Duration = Duration::from_secs(60);

impl Scheduler {
    /// Writes the volume plan before the pod is bound (Kubernetes' PreBind):
    /// static volumes pre-bound to their claims (the volume's resourceVersion
    /// guards against another pod taking it), claims to be provisioned
    /// annotated with the node. The claim binder completes each binding; the
    /// kubelet waits for it before mounting.
    pub(crate) async fn write_volume_plan(
        &self,
        plan: &volumes::Plan,
        node: &str,
    ) -> Result<(), ClientError> {
        use minik8s_api::storage::{BOUND_BY_CONTROLLER, SELECTED_NODE};
        let pvs = self
            .client
            .dynamic(registry::of::<PersistentVolume>(), None);
        for (claim_key, volume) in &plan.bind {
            let (Some(claim), Some(pv)) = (self.claims.get(claim_key), self.volumes.get(volume))
            else {
                return Err(ClientError::Decode(format!(
                    "{claim_key} or {volume} is gone"
                )));
            };
            let patch = json!({"metadata": {"resourceVersion": pv.metadata.resource_version,
                                            "annotations": {BOUND_BY_CONTROLLER: "yes"}},
                               "spec": {"claimRef": minik8s_api::storage::claim_ref(&claim)}});
            pvs.patch(volume, None, content::MERGE_PATCH, &patch)
                .await?;
        }
        for claim_key in &plan.provision {
            let (ns, name) = claim_key.split_once('/').unwrap_or(("default", claim_key));
            let patch = json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
            self.client
                .dynamic(registry::of::<PersistentVolumeClaim>(), Some(ns))
                .patch(name, None, content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(())
    }

    /// Waits until the claim binder has bound every claim of the plan, as
    /// Kubernetes' PreBind does (so a pod reaches its node with its volumes).
    pub(crate) async fn wait_claims_bound(&self, plan: &volumes::Plan) -> Result<(), String> {
        let keys: Vec<&String> = plan
            .bind
            .iter()
            .map(|(k, _)| k)
            .chain(&plan.provision)
            .collect();
        let bound = |k: &String| {
            self.claims.get(k).is_some_and(|c| {
                c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
            })
        };
        let deadline = tokio::time::Instant::now() + VOLUME_BIND_TIMEOUT;
        while !keys.iter().all(|k| bound(k)) {
            if tokio::time::Instant::now() > deadline {
                return Err("timed out waiting for the condition".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}
