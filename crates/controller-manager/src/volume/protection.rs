//! Storage object in-use protection: the apiserver puts
//! `kubernetes.io/pvc-protection` on every claim and `kubernetes.io/pv-protection`
//! on every volume; these controllers take them off once the object may go:
//! a claim when no pod that has not finished names it, a volume when it is
//! not Bound. Until then a deleted claim or volume stays, Terminating.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_api::registry;
use minik8s_api::registry::ResourceInfo;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::object_key;
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;

pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// A pod that still uses its claims: not Succeeded or Failed.
fn uses_claims(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Is the claim `name` used by any of these pods (of its namespace)?
pub fn claim_in_use(name: &str, pods: &[Arc<Pod>]) -> bool {
    pods.iter()
        .any(|p| uses_claims(p) && pod_claims(p).iter().any(|c| c == name))
}

fn has(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// Drops `finalizer` from the object (guarded by its resourceVersion).
async fn remove_finalizer(
    client: &Client,
    info: &'static ResourceInfo,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<(), ClientError> {
    let rest: Vec<&String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .collect();
    let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}});
    match client
        .dynamic(info, meta.namespace.as_deref())
        .patch(
            meta.name.as_deref().unwrap_or(""),
            None,
            content::MERGE_PATCH,
            &patch,
        )
        .await
    {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

pub struct ClaimProtection {
    client: Client,
    claims: Cache<PersistentVolumeClaim>,
    pods: Cache<Pod>,
}

impl ClaimProtection {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ClaimProtection {
            client,
            claims: informers.cache(),
            pods: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<PersistentVolumeClaim>(informers)?
            .watches::<Pod, _>(informers, |_, ev| {
                let pod = ev.object();
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                pod_claims(pod)
                    .into_iter()
                    .map(|c| format!("{ns}/{c}"))
                    .collect()
            })
    }
}

impl Reconciler for ClaimProtection {
    const NAME: &'static str = "pvc-protection";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(Action::Done);
        };
        if claim.metadata.deletion_timestamp.is_none() || !has(&claim.metadata, PVC_PROTECTION) {
            return Ok(Action::Done);
        }
        let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        if claim_in_use(name, &self.pods.by_index(NAMESPACE_INDEX, ns)) {
            tracing::debug!(claim = key, "claim in use; kept");
            return Ok(Action::Done);
        }
        remove_finalizer(
            &self.client,
            registry::of::<PersistentVolumeClaim>(),
            &claim.metadata,
            PVC_PROTECTION,
        )
        .await?;
        tracing::info!(claim = %object_key(&claim.metadata), "claim no longer in use; protection removed");
        Ok(Action::Done)
    }
}

pub struct VolumeProtection {
    client: Client,
    volumes: Cache<PersistentVolume>,
}

impl VolumeProtection {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(VolumeProtection {
            client,
            volumes: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new()).for_own::<PersistentVolume>(informers)
    }
}

impl Reconciler for VolumeProtection {
    const NAME: &'static str = "pv-protection";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(pv) = self.volumes.get(key) else {
            return Ok(Action::Done);
        };
        if pv.metadata.deletion_timestamp.is_none()
            || !has(&pv.metadata, PV_PROTECTION)
            || volume_phase(&pv) == "Bound"
        {
            return Ok(Action::Done);
        }
        remove_finalizer(
            &self.client,
            registry::of::<PersistentVolume>(),
            &pv.metadata,
            PV_PROTECTION,
        )
        .await?;
        Ok(Action::Done)
    }
}
