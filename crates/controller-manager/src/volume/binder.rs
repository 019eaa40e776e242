//! The claim binder (Kubernetes' PersistentVolume controller, claim side):
//! an unbound claim gets the smallest fitting volume, or one provisioned for
//! it, or an event saying why it waits; a bound claim's status follows its
//! volume, and a claim that grew expands its volume.
//!
//! ```text
//!  claim (unbound) ─▶ decide(): pre-bound volume │ smallest fitting volume ─▶ bind: PV claimRef + Bound,
//!                               │ none                                          PVC volumeName + Bound
//!                               ├─ class missing           ─▶ ProvisioningFailed (stays Pending)
//!                               ├─ WaitForFirstConsumer    ─▶ wait for the scheduler's selected node
//!                               ├─ minik8s.io/local-path   ─▶ provision (local_path.rs)
//!                               ├─ minik8s.io/nfs          ─▶ provision (nfs.rs: a directory of the export)
//!                               └─ other provisioner       ─▶ ExternalProvisioning (someone else's job)
//! ```

use super::local_path::{self, LocalPath};
use super::nfs;
use super::*;
use k8s_openapi::api::storage::v1::StorageClass;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::object_key;
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, Event, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Pending claims are looked at again this often (Kubernetes' PV controller resync).
const RESYNC: Duration = Duration::from_secs(15);

/// What is known of a claim's class.
#[derive(Debug, Clone, Copy)]
pub enum Class<'a> {
    /// The claim names no class.
    None,
    /// It names one that does not exist.
    Missing(&'a str),
    Found(&'a StorageClass),
}

/// What the binder does for one claim.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// Bind the claim and this volume both ways.
    Bind(String),
    /// Make a volume for the claim with the built-in provisioner, on this node (None: any).
    Provision(Option<String>),
    /// Wait; record an event (type, reason, message) and look again later.
    Wait(EventType, &'static str, String),
    /// Bound: make the claim's status say so (and grow the volume to this size first, if set).
    Bound {
        volume: String,
        grow_to: Option<String>,
    },
    /// The bound volume is gone or bound elsewhere (reason, message).
    Lost(&'static str, &'static str),
}

/// The volume for an unbound claim: one pre-bound to it, else the smallest
/// that fits. With `delay_binding` (WaitForFirstConsumer) only a pre-bound
/// one: the scheduler picks among the rest where the pod lands.
pub fn best_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [Arc<PersistentVolume>],
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let fitting = volumes.iter().filter(|v| fits(claim, v));
    let mut pre_bound = fitting.clone().filter(|v| claim_ref_names(v, claim));
    if let Some(v) = pre_bound.next() {
        return Some(v);
    }
    if delay_binding {
        return None;
    }
    fitting
        .filter(|v| v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none()))
        .min_by(|a, b| {
            capacity(a)
                .total_cmp(&capacity(b))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
        .map(|v| &**v)
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The pure decision for one claim, from the volumes and its class.
pub fn decide(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    class: Class,
) -> ClaimStep {
    let bound_to = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    if let Some(name) = bound_to {
        let Some(pv) = volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(&name))
        else {
            return ClaimStep::Lost(
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            );
        };
        if pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_some()
            && !claim_ref_names(pv, claim)
        {
            return ClaimStep::Lost(
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            );
        }
        let expandable = matches!(class, Class::Found(c) if c.allow_volume_expansion == Some(true));
        let grow_to = (expandable && requested(claim) > capacity(pv))
            .then(|| requested_quantity(claim).map(str::to_string))
            .flatten();
        return ClaimStep::Bound {
            volume: name,
            grow_to,
        };
    }
    let delay = matches!(class, Class::Found(c) if c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
    if let Some(pv) = best_volume(claim, volumes, delay) {
        return ClaimStep::Bind(pv.metadata.name.clone().unwrap_or_default());
    }
    let selected = annotation(&claim.metadata, SELECTED_NODE).map(str::to_string);
    match class {
        Class::None => ClaimStep::Wait(
            EventType::Normal,
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set".into(),
        ),
        Class::Missing(name) => ClaimStep::Wait(
            EventType::Warning,
            "ProvisioningFailed",
            format!("storageclass.storage.k8s.io \"{name}\" not found"),
        ),
        Class::Found(_) if delay && selected.is_none() => ClaimStep::Wait(
            EventType::Normal,
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding".into(),
        ),
        Class::Found(c) if c.provisioner == local_path::PROVISIONER => {
            match local_path::refuses(claim) {
                Some(why) => ClaimStep::Wait(EventType::Warning, "ProvisioningFailed", why),
                None => ClaimStep::Provision(selected),
            }
        }
        Class::Found(c) if c.provisioner == nfs::PROVISIONER => ClaimStep::Provision(selected),
        Class::Found(c) if c.provisioner == "kubernetes.io/no-provisioner" => ClaimStep::Wait(
            EventType::Normal,
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set".into(),
        ),
        Class::Found(c) => ClaimStep::Wait(
            EventType::Normal,
            "ExternalProvisioning",
            format!("Waiting for a volume to be created either by the external provisioner '{}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", c.provisioner),
        ),
    }
}

/// The claim binder and the built-in provisioner it calls.
pub struct ClaimBinder {
    client: Client,
    recorder: Recorder,
    claims: Cache<PersistentVolumeClaim>,
    volumes: Cache<PersistentVolume>,
    classes: Cache<StorageClass>,
    provisioner: LocalPath,
}

impl ClaimBinder {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        provisioner: LocalPath,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ClaimBinder {
            recorder: Recorder::new(client.clone(), "persistentvolume-controller"),
            client,
            claims: informers.cache(),
            volumes: informers.cache(),
            classes: informers.cache(),
            provisioner,
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<PersistentVolumeClaim>(informers)?
            // A volume's change wakes the claim it names, and unbound claims
            // when it is new or free (it may fit one of them).
            .watches::<PersistentVolume, _>(informers, |b, ev| {
                let pv = ev.object();
                match pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                    Some(r) => vec![format!(
                        "{}/{}",
                        r.namespace.as_deref().unwrap_or("default"),
                        r.name.as_deref().unwrap_or("")
                    )],
                    None if !matches!(ev, Event::Deleted(_)) => b.pending_claims(None),
                    None => Vec::new(),
                }
            })?
            .watches::<StorageClass, _>(informers, |b, ev| {
                b.pending_claims(ev.object().metadata.name.as_deref())
            })
    }

    /// Unbound claims (of one class, if given).
    fn pending_claims(&self, class: Option<&str>) -> Vec<String> {
        self.claims
            .list()
            .into_iter()
            .filter(|c| {
                c.spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_ref())
                    .is_none()
            })
            .filter(|c| class.is_none_or(|k| claim_class(c) == k))
            .map(|c| object_key(&c.metadata))
            .collect()
    }

    fn claim_api(&self, claim: &PersistentVolumeClaim) -> minik8s_client::rest::DynamicApi {
        self.client.dynamic(
            registry::of::<PersistentVolumeClaim>(),
            claim.metadata.namespace.as_deref(),
        )
    }

    fn volume_api(&self) -> minik8s_client::rest::DynamicApi {
        self.client
            .dynamic(registry::of::<PersistentVolume>(), None)
    }

    /// Binds both ways, in Kubernetes' order: the volume's claimRef (guarded
    /// by its resourceVersion, so two claims never take one volume), its
    /// phase, then the claim's volumeName and status.
    async fn bind(
        &self,
        claim: &PersistentVolumeClaim,
        pv: &PersistentVolume,
    ) -> Result<(), ClientError> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.and_then(|r| r.uid.as_ref()).is_none() {
            let mut meta = json!({"resourceVersion": pv.metadata.resource_version});
            if claim_ref.is_none() {
                meta["annotations"] = json!({BOUND_BY_CONTROLLER: "yes"});
            }
            let patch = json!({"metadata": meta, "spec": {"claimRef": super::claim_ref(claim)}});
            self.volume_api()
                .patch(&pv_name, None, content::MERGE_PATCH, &patch)
                .await?;
        }
        self.set_volume_phase(&pv_name, "Bound").await?;
        let by_controller =
            claim_ref.is_none_or(|_| annotation(&pv.metadata, BOUND_BY_CONTROLLER).is_some());
        let mut annotations = json!({BIND_COMPLETED: "yes"});
        if by_controller {
            annotations[BOUND_BY_CONTROLLER] = json!("yes");
        }
        let name = claim.metadata.name.as_deref().unwrap_or("");
        self.claim_api(claim)
            .patch(
                name,
                None,
                content::MERGE_PATCH,
                &json!({"metadata": {"annotations": annotations}, "spec": {"volumeName": pv_name}}),
            )
            .await?;
        self.set_claim_bound(claim, pv).await?;
        self.recorder
            .event(
                claim,
                EventType::Normal,
                "Bound",
                &format!("Successfully bound to volume {pv_name}"),
            )
            .await;
        Ok(())
    }

    async fn set_volume_phase(&self, name: &str, phase: &str) -> Result<(), ClientError> {
        let patch = json!({"status": {"phase": phase, "lastPhaseTransitionTime": minik8s_api::meta::now_rfc3339()}});
        self.volume_api()
            .patch(name, Some("status"), content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }

    /// The claim's status from its volume: Bound, the volume's capacity and modes.
    async fn set_claim_bound(
        &self,
        claim: &PersistentVolumeClaim,
        pv: &PersistentVolume,
    ) -> Result<(), ClientError> {
        let spec = pv.spec.clone().unwrap_or_default();
        let status =
            json!({"phase": "Bound", "capacity": spec.capacity, "accessModes": spec.access_modes});
        let current = serde_json::to_value(&claim.status).unwrap_or(Value::Null);
        if ["phase", "capacity", "accessModes"]
            .iter()
            .all(|k| current.get(k) == status.get(k))
        {
            return Ok(());
        }
        let name = claim.metadata.name.as_deref().unwrap_or("");
        self.claim_api(claim)
            .patch(
                name,
                Some("status"),
                content::MERGE_PATCH,
                &json!({"status": status}),
            )
            .await
            .map(|_| ())
    }
}

impl Reconciler for ClaimBinder {
    const NAME: &'static str = "persistentvolume-binder";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(Action::Done);
        };
        let volumes = self.volumes.list();
        let class_name = claim_class(&claim).to_string();
        let class_obj = self.classes.get(&class_name);
        let class = match (&class_name[..], &class_obj) {
            ("", _) => Class::None,
            (_, Some(c)) => Class::Found(c),
            (name, None) => Class::Missing(name),
        };
        let step = decide(&claim, &volumes, class);
        tracing::debug!(claim = key, ?step, "claim");
        match step {
            ClaimStep::Bind(name) => {
                let pv = volumes
                    .iter()
                    .find(|v| v.metadata.name.as_deref() == Some(&name))
                    .expect("decide picks a listed volume");
                match self.bind(&claim, pv).await {
                    Err(e) if e.is_conflict() => {
                        Ok(Action::RequeueAfter(Duration::from_millis(100)))
                    }
                    other => other.map(|_| Action::Done),
                }
            }
            ClaimStep::Provision(node) => {
                if claim.metadata.deletion_timestamp.is_some() {
                    return Ok(Action::Done);
                }
                let class = class_obj.expect("provisioning has a class");
                self.provision(&claim, &class, node).await
            }
            ClaimStep::Wait(type_, reason, message) => {
                if reason == "ExternalProvisioning" {
                    if let Class::Found(c) = class {
                        self.note_provisioner(&claim, &c.provisioner).await?;
                    }
                }
                self.recorder.event(&*claim, type_, reason, &message).await;
                Ok(Action::RequeueAfter(RESYNC))
            }
            ClaimStep::Bound { volume, grow_to } => {
                let pv = volumes
                    .iter()
                    .find(|v| v.metadata.name.as_deref() == Some(&volume))
                    .expect("decide found the volume");
                self.keep_bound(&claim, pv, grow_to).await
            }
            ClaimStep::Lost(reason, message) => {
                if claim_phase(&claim) != "Lost" {
                    let name = claim.metadata.name.as_deref().unwrap_or("");
                    self.claim_api(&claim)
                        .patch(
                            name,
                            Some("status"),
                            content::MERGE_PATCH,
                            &json!({"status": {"phase": "Lost"}}),
                        )
                        .await?;
                    self.recorder
                        .event(&*claim, EventType::Warning, reason, message)
                        .await;
                }
                Ok(Action::Done)
            }
        }
    }
}

impl ClaimBinder {
    /// A volume for the claim from its class: an NFS directory, else the
    /// class's provisioner (local-path on the chosen node); an event either way.
    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<String>,
    ) -> Result<Action, ClientError> {
        let made = match class.provisioner.as_str() {
            nfs::PROVISIONER => match nfs::provision(claim, class).await {
                Ok(pv) => self.provisioner.create(pv, class).await,
                Err(why) => Err(why),
            },
            _ => self.provisioner.provision(claim, class, node).await,
        };
        match made {
            Ok(pv) => {
                let msg = format!(
                    "Successfully provisioned volume {pv} using {}",
                    class.provisioner
                );
                self.recorder
                    .event(claim, EventType::Normal, "ProvisioningSucceeded", &msg)
                    .await;
                Ok(Action::Done)
            }
            Err(why) => {
                self.recorder
                    .event(claim, EventType::Warning, "ProvisioningFailed", &why)
                    .await;
                Ok(Action::RequeueAfter(RESYNC))
            }
        }
    }

    /// A bound claim: a binding interrupted half-way is finished, a volume
    /// grown to the claim's new size (`grow_to`), the claim's status kept.
    async fn keep_bound(
        &self,
        claim: &PersistentVolumeClaim,
        pv: &PersistentVolume,
        grow_to: Option<String>,
    ) -> Result<Action, ClientError> {
        let half_bound = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_none()
            || volume_phase(pv) != "Bound";
        if half_bound {
            self.bind(claim, pv).await?;
            return Ok(Action::Done);
        }
        let Some(size) = grow_to else {
            self.set_claim_bound(claim, pv).await?;
            return Ok(Action::Done);
        };
        let volume = pv.metadata.name.as_deref().unwrap_or_default();
        let patch = json!({"spec": {"capacity": {"storage": size}}});
        let grown = self
            .volume_api()
            .patch(volume, None, content::MERGE_PATCH, &patch)
            .await?;
        let grown: PersistentVolume =
            serde_json::from_value(grown).map_err(|e| ClientError::Decode(e.to_string()))?;
        self.set_claim_bound(claim, &grown).await?;
        let msg = format!("ExpandVolume succeeded for volume {volume}");
        self.recorder
            .event(claim, EventType::Normal, "VolumeResizeSuccessful", &msg)
            .await;
        Ok(Action::Done)
    }

    /// Names the external provisioner on the claim, as Kubernetes does for it to pick up.
    async fn note_provisioner(
        &self,
        claim: &PersistentVolumeClaim,
        provisioner: &str,
    ) -> Result<(), ClientError> {
        if annotation(&claim.metadata, STORAGE_PROVISIONER) == Some(provisioner) {
            return Ok(());
        }
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let patch = json!({"metadata": {"annotations": {STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}}});
        match self
            .claim_api(claim)
            .patch(name, None, content::MERGE_PATCH, &patch)
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "binder_tests.rs"]
mod tests;
