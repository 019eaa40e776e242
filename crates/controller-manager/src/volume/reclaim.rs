//! The volume side of the PersistentVolume controller: a volume's phase
//! follows its claim (Available, Bound, Released), and a released volume is
//! reclaimed per its policy: `Retain` keeps it (and its data) for an
//! administrator, `Delete` removes the data (a helper pod on the volume's
//! node, for local-path volumes) and then the volume.
//!
//! ```text
//!  volume ─▶ decide(): no claimRef ──────────────▶ Available
//!                      claim there, bound to it ─▶ Bound
//!                      claim gone ───────────────▶ Released ─▶ Retain: stays
//!                                                            └▶ Delete: helper pod rm -rf ─▶ volume deleted
//! ```

use super::local_path::{self, HELPER_NAMESPACE};
use super::*;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// What the controller does for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeStep {
    Nothing,
    /// Set this phase (with a message for Failed).
    Phase(&'static str, Option<String>),
    /// Released with policy Delete: remove the data, then the volume.
    Delete,
}

/// The pure decision for one volume, from its claim (looked up by its claimRef).
pub fn decide(pv: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> VolumeStep {
    match phase_step(pv, claim) {
        // A volume being deleted by hand is only released, never reclaimed.
        VolumeStep::Delete if pv.metadata.deletion_timestamp.is_some() => VolumeStep::Nothing,
        step => step,
    }
}

fn phase_step(pv: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> VolumeStep {
    let phase = volume_phase(pv);
    let want = |p: &'static str| {
        if phase == p {
            VolumeStep::Nothing
        } else {
            VolumeStep::Phase(p, None)
        }
    };
    let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return want("Available");
    };
    if claim_ref.uid.is_none() {
        // Pre-bound by its author to a claim not bound yet.
        return want("Available");
    }
    let claim = claim.filter(|c| c.metadata.uid == claim_ref.uid);
    if let Some(claim) = claim {
        let bound_here = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref())
            == pv.metadata.name.as_deref();
        return if bound_here {
            want("Bound")
        } else {
            VolumeStep::Nothing
        };
    }
    // The claim is gone: the volume is released, then reclaimed.
    match phase {
        "Failed" => VolumeStep::Nothing,
        "Released" | "Bound" | "Available" | "Pending" => {
            let policy = pv
                .spec
                .as_ref()
                .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                .unwrap_or("Retain");
            match policy {
                "Delete" if phase != "Released" => VolumeStep::Phase("Released", None),
                "Delete" if provisioned_here(pv) => VolumeStep::Delete,
                "Delete" => VolumeStep::Phase(
                    "Failed",
                    Some(format!("error getting deleter volume plugin for volume \"{}\": no deletable volume plugin matched", pv.metadata.name.as_deref().unwrap_or(""))),
                ),
                "Recycle" => VolumeStep::Phase(
                    "Failed",
                    Some("no volume plugin matched: minik8s does not recycle volumes (deprecated in Kubernetes); use Delete or Retain".into()),
                ),
                _ => want("Released"),
            }
        }
        _ => VolumeStep::Nothing,
    }
}

/// Made by the built-in provisioner (so it knows how to remove the data).
pub fn provisioned_here(pv: &PersistentVolume) -> bool {
    provisioner(pv).is_some_and(|p| p == local_path::PROVISIONER || p == super::nfs::PROVISIONER)
}

fn provisioner(pv: &PersistentVolume) -> Option<&str> {
    pv.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY))
        .map(String::as_str)
}

pub struct VolumeController {
    client: Client,
    recorder: Recorder,
    volumes: Cache<PersistentVolume>,
    claims: Cache<PersistentVolumeClaim>,
    pods: Cache<Pod>,
    nodes: Cache<k8s_openapi::api::core::v1::Node>,
}

impl VolumeController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(VolumeController {
            recorder: Recorder::new(client.clone(), "persistentvolume-controller"),
            client,
            volumes: informers.cache(),
            claims: informers.cache(),
            pods: informers.cache(),
            nodes: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<PersistentVolume>(informers)?
            // A claim's change wakes the volumes that name it.
            .watches::<PersistentVolumeClaim, _>(informers, |c, ev| {
                let claim = ev.object();
                c.volumes
                    .list()
                    .into_iter()
                    .filter(|v| {
                        v.spec
                            .as_ref()
                            .and_then(|s| s.claim_ref.as_ref())
                            .is_some_and(|r| {
                                r.name == claim.metadata.name
                                    && r.namespace == claim.metadata.namespace
                            })
                    })
                    .filter_map(|v| v.metadata.name.clone())
                    .collect()
            })?
            // A helper pod's progress wakes its volume.
            .watches::<Pod, _>(informers, |_, ev| {
                ev.object()
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(local_path::HELPER_VOLUME_LABEL))
                    .cloned()
                    .into_iter()
                    .collect()
            })
    }

    /// Deletes the volume object (this one: guarded by its uid), its data gone.
    async fn remove_volume(&self, pv: &PersistentVolume) -> Result<(), ClientError> {
        let dp = DeleteParams {
            precondition_uid: pv.metadata.uid.clone(),
            ..Default::default()
        };
        let name = pv.metadata.name.as_deref().unwrap_or("");
        match self
            .client
            .dynamic(registry::of::<PersistentVolume>(), None)
            .delete(name, &dp)
            .await
        {
            Err(e) if !(e.is_not_found() || e.is_conflict()) => Err(e),
            _ => {
                tracing::info!(volume = %name, "released volume deleted");
                Ok(())
            }
        }
    }

    /// Removes a released local-path volume's data with a helper pod on its
    /// node, then the volume. Done when the volume is gone.
    async fn delete_volume(&self, pv: &PersistentVolume) -> Result<Action, ClientError> {
        let name = pv.metadata.name.clone().unwrap_or_default();
        if provisioner(pv) == Some(super::nfs::PROVISIONER) {
            // The controller manager reaches the export itself.
            if let Err(why) = super::nfs::remove(pv).await {
                self.recorder
                    .event(pv, EventType::Warning, "VolumeFailedDelete", &why)
                    .await;
                return Ok(Action::RequeueAfter(Duration::from_secs(10)));
            }
            self.remove_volume(pv).await?;
            return Ok(Action::Done);
        }
        let pods = self
            .client
            .dynamic(registry::of::<Pod>(), Some(HELPER_NAMESPACE));
        let helper_name = local_path::helper_pod_name(&name);
        let node_gone = pinned_node(pv).is_none_or(|n| self.nodes.get(&n).is_none());
        let helper = self.pods.get(&format!("{HELPER_NAMESPACE}/{helper_name}"));
        let phase = helper
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.clone());
        match (node_gone, phase.as_deref()) {
            // The data went with its node.
            (true, _) | (false, Some("Succeeded")) => {
                self.remove_volume(pv).await?;
                if helper.is_some() {
                    let _ = pods.delete(&helper_name, &DeleteParams::default()).await;
                }
                Ok(Action::Done)
            }
            (false, Some("Failed")) => {
                self.recorder.event(pv, EventType::Warning, "VolumeFailedDelete", &format!("helper pod {HELPER_NAMESPACE}/{helper_name} failed to remove the volume's directory")).await;
                let _ = pods.delete(&helper_name, &DeleteParams::default()).await;
                Ok(Action::RequeueAfter(Duration::from_secs(10)))
            }
            (false, Some(_)) => Ok(Action::RequeueAfter(Duration::from_secs(5))),
            (false, None) => {
                let Some(pod) = local_path::cleanup_pod(pv) else {
                    let msg = "the volume's directory or node is not known; delete it by hand";
                    self.set_phase(&name, "Failed", Some(msg.into())).await?;
                    return Ok(Action::Done);
                };
                match pods.create(&pod).await {
                    Err(e) if !e.is_conflict() => Err(e),
                    _ => Ok(Action::RequeueAfter(Duration::from_secs(5))),
                }
            }
        }
    }

    async fn set_phase(
        &self,
        name: &str,
        phase: &str,
        message: Option<String>,
    ) -> Result<(), ClientError> {
        let patch = json!({"status": {"phase": phase, "message": message,
                                       "lastPhaseTransitionTime": minik8s_api::meta::now_rfc3339()}});
        self.client
            .dynamic(registry::of::<PersistentVolume>(), None)
            .patch_status(name, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }
}

impl Reconciler for VolumeController {
    const NAME: &'static str = "persistentvolume-reclaimer";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(pv) = self.volumes.get(key) else {
            return Ok(Action::Done);
        };
        let claim = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| {
                self.claims.get(&format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or("default"),
                    r.name.as_deref().unwrap_or("")
                ))
            });
        match decide(&pv, claim.as_deref()) {
            VolumeStep::Nothing => Ok(Action::Done),
            VolumeStep::Phase(phase, message) => {
                if phase == "Failed" {
                    let msg = message.clone().unwrap_or_default();
                    let reason = if msg.contains("recycle") {
                        "VolumeFailedRecycle"
                    } else {
                        "VolumeFailedDelete"
                    };
                    self.recorder
                        .event(&*pv, EventType::Warning, reason, &msg)
                        .await;
                }
                self.set_phase(key, phase, message).await?;
                Ok(Action::Done)
            }
            VolumeStep::Delete => self.delete_volume(&pv).await,
        }
    }
}
