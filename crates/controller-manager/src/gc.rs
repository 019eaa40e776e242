//! The garbage collector: ownerReferences drive deletion.
//!
//! - **background**: a dependent whose owners are all gone is deleted;
//! - **orphan**: an owner deleted with the `orphan` finalizer first has its
//!   ownerReference removed from every dependent, then loses the finalizer;
//! - **foreground**: an owner deleted with the `foregroundDeletion` finalizer
//!   first has its dependents deleted, then loses the finalizer.
//!
//! [`plan`] decides from a snapshot of object metadata (pure, unit-tested); the
//! shell re-checks with a live GET that an owner is really gone before deleting
//! a dependent (informers of different kinds are not ordered with each other).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_client::rest::content;
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// What the collector needs to know about one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Obj {
    pub info: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub owners: Vec<OwnerReference>,
    pub finalizers: Vec<String>,
    pub deleting: bool,
}

impl Obj {
    pub fn from_meta(info: &'static ResourceInfo, m: &ObjectMeta) -> Obj {
        Obj {
            info,
            namespace: m.namespace.clone(),
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            owners: m.owner_references.clone().unwrap_or_default(),
            finalizers: m.finalizers.clone().unwrap_or_default(),
            deleting: m.deletion_timestamp.is_some(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Delete a dependent whose owners seem gone (the shell confirms first).
    DeleteOrphaned(Obj),
    /// Delete a dependent of an owner in foreground deletion: itself in the
    /// foreground when it has dependents of its own (a Deployment's
    /// ReplicaSet waits for its pods), as Kubernetes' collector does.
    DeleteDependent { dependent: Obj, foreground: bool },
    /// Remove the ownerReference to `owner_uid` from `dependent`.
    Unlink { dependent: Obj, owner_uid: String },
    /// Remove a finalizer from an owner whose dependents are handled.
    RemoveFinalizer { owner: Obj, finalizer: &'static str },
}

/// Decides what to do from every object's metadata.
pub fn plan(objs: &[Obj]) -> Vec<Action> {
    let uids: HashSet<&str> = objs.iter().map(|o| o.uid.as_str()).collect();
    let mut out = Vec::new();
    for o in objs {
        if !o.owners.is_empty()
            && !o.deleting
            && o.owners.iter().all(|r| !uids.contains(r.uid.as_str()))
        {
            out.push(Action::DeleteOrphaned(o.clone()));
        }
    }
    for owner in objs.iter().filter(|o| o.deleting) {
        let dependents: Vec<&Obj> = objs
            .iter()
            .filter(|d| d.owners.iter().any(|r| r.uid == owner.uid))
            .collect();
        if owner.finalizers.iter().any(|f| f == ORPHAN) {
            for d in &dependents {
                out.push(Action::Unlink {
                    dependent: (*d).clone(),
                    owner_uid: owner.uid.clone(),
                });
            }
            if dependents.is_empty() {
                out.push(Action::RemoveFinalizer {
                    owner: owner.clone(),
                    finalizer: ORPHAN,
                });
            }
        } else if owner.finalizers.iter().any(|f| f == FOREGROUND) {
            for d in dependents.iter().filter(|d| !d.deleting) {
                let foreground = objs.iter().any(|x| x.owners.iter().any(|r| r.uid == d.uid));
                out.push(Action::DeleteDependent {
                    dependent: (*d).clone(),
                    foreground,
                });
            }
            if dependents.is_empty() {
                out.push(Action::RemoveFinalizer {
                    owner: owner.clone(),
                    finalizer: FOREGROUND,
                });
            }
        }
    }
    out
}

/// Something whose objects the collector can see.
pub trait Source: Send + Sync {
    fn objects(&self) -> Vec<Obj>;
}

impl<K> Source for (&'static ResourceInfo, Cache<K>)
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Send + Sync + 'static,
{
    fn objects(&self) -> Vec<Obj> {
        self.1
            .list()
            .iter()
            .map(|o| Obj::from_meta(self.0, o.metadata()))
            .collect()
    }
}

pub struct GarbageCollector {
    pub client: Client,
    pub sources: Vec<Arc<dyn Source>>,
}

impl GarbageCollector {
    /// Is the owner really gone (absent, or replaced by an object with another uid)?
    async fn owner_gone(
        &self,
        dependent: &Obj,
        owner: &OwnerReference,
    ) -> Result<bool, ClientError> {
        // Built-in kinds, else what discovery says (a custom resource owner);
        // an owner whose kind is not served cannot be judged gone.
        let Some(info) = self
            .client
            .resource_for_kind(&owner.api_version, &owner.kind)
            .await?
        else {
            return Ok(false);
        };
        let ns = if info.namespaced {
            dependent.namespace.as_deref()
        } else {
            None
        };
        match self.client.dynamic(info, ns).get(&owner.name).await {
            Ok(o) => {
                Ok(o.pointer("/metadata/uid").and_then(|u| u.as_str()) != Some(owner.uid.as_str()))
            }
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// One pass: plan from the caches and carry the actions out.
    pub async fn sweep(&self) -> Result<usize, ClientError> {
        let objs: Vec<Obj> = self.sources.iter().flat_map(|s| s.objects()).collect();
        let actions = plan(&objs);
        let n = actions.len();
        for a in actions {
            let result = match &a {
                Action::DeleteOrphaned(d) => {
                    let mut all_gone = true;
                    for r in &d.owners {
                        all_gone &= self.owner_gone(d, r).await?;
                    }
                    if all_gone {
                        self.delete(d).await
                    } else {
                        Ok(())
                    }
                }
                Action::DeleteDependent {
                    dependent,
                    foreground,
                } => {
                    let policy = if *foreground {
                        "Foreground"
                    } else {
                        "Background"
                    };
                    self.delete_with(dependent, policy).await
                }
                Action::Unlink {
                    dependent,
                    owner_uid,
                } => {
                    let refs: Vec<&OwnerReference> = dependent
                        .owners
                        .iter()
                        .filter(|r| &r.uid != owner_uid)
                        .collect();
                    self.patch(dependent, json!({"metadata": {"ownerReferences": refs}}))
                        .await
                }
                Action::RemoveFinalizer { owner, finalizer } => {
                    let rest: Vec<&String> = owner
                        .finalizers
                        .iter()
                        .filter(|f| f.as_str() != *finalizer)
                        .collect();
                    self.patch(owner, json!({"metadata": {"finalizers": rest}}))
                        .await
                }
            };
            match result {
                Err(e) if !(e.is_not_found() || e.is_conflict()) => return Err(e),
                _ => {}
            }
        }
        Ok(n)
    }

    async fn delete(&self, o: &Obj) -> Result<(), ClientError> {
        self.delete_with(o, "Background").await
    }

    async fn delete_with(&self, o: &Obj, policy: &str) -> Result<(), ClientError> {
        let dp = DeleteParams {
            propagation_policy: Some(policy.into()),
            precondition_uid: Some(o.uid.clone()),
            ..Default::default()
        };
        self.client
            .dynamic(o.info, o.namespace.as_deref())
            .delete(&o.name, &dp)
            .await
            .map(|_| ())
    }

    async fn patch(&self, o: &Obj, patch: serde_json::Value) -> Result<(), ClientError> {
        self.client
            .dynamic(o.info, o.namespace.as_deref())
            .patch(&o.name, None, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }
}

/// The collector wired to the shared informers: a sweep after any change of a
/// watched kind (debounced) and every 5 s.
pub struct Runner {
    collector: GarbageCollector,
    wake: Arc<tokio::sync::Notify>,
}

/// The kinds the collector reads, each waking it on a change.
struct Watched<'a> {
    informers: &'a SharedInformers,
    wake: Arc<tokio::sync::Notify>,
    sources: Vec<Arc<dyn Source>>,
}

impl Watched<'_> {
    fn watch<K>(&mut self) -> Result<(), minik8s_client::shared::AlreadyStarted>
    where
        K: minik8s_client::rest::Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let wake = self.wake.clone();
        self.informers.on_event::<K>(move |_| wake.notify_one())?;
        let info = registry::of::<K>();
        self.sources
            .push(Arc::new((info, self.informers.cache::<K>())));
        Ok(())
    }
}

impl Runner {
    /// Watches Pods, ReplicaSets, StatefulSets, ControllerRevisions,
    /// LeaderWorkerSets, DisaggregatedSets and their role scalers, Functions,
    /// ConfigMaps, claims and Services (LWS owns StatefulSets and Services; a
    /// DisaggregatedSet owns LWS, Services and scalers; a Function owns a
    /// Deployment, a Service and a ConfigMap).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Runner, minik8s_client::shared::AlreadyStarted> {
        use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, ReplicaSet, StatefulSet};
        use k8s_openapi::api::batch::v1::Job;
        use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Service};
        use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
        use k8s_openapi::api::scheduling::v1beta1 as workload;
        use minik8s_api::disaggregatedset::{DisaggregatedSet, DisaggregatedSetRoleScaler};
        let mut w = Watched {
            informers,
            wake: Arc::new(tokio::sync::Notify::new()),
            sources: Vec::new(),
        };
        w.watch::<Pod>()?;
        w.watch::<ReplicaSet>()?;
        w.watch::<Deployment>()?;
        w.watch::<Job>()?;
        w.watch::<StatefulSet>()?;
        w.watch::<ControllerRevision>()?;
        w.watch::<minik8s_api::lws::LeaderWorkerSet>()?;
        w.watch::<DisaggregatedSet>()?;
        w.watch::<DisaggregatedSetRoleScaler>()?;
        w.watch::<minik8s_api::podgroup::PodGroup>()?;
        // The Workload API's objects an LWS gang writes (owned by the LWS or a leader).
        w.watch::<workload::PodGroup>()?;
        w.watch::<workload::Workload>()?;
        w.watch::<minik8s_api::serverless::Function>()?;
        w.watch::<ConfigMap>()?;
        w.watch::<PersistentVolumeClaim>()?;
        w.watch::<Service>()?;
        // Devices: a group's claim goes with its leader pod (LWS), a node's
        // slices with the Node (which is watched as their owner).
        w.watch::<ResourceClaim>()?;
        w.watch::<ResourceSlice>()?;
        w.watch::<Node>()?;
        Ok(Runner {
            collector: GarbageCollector {
                client,
                sources: w.sources,
            },
            wake: w.wake,
        })
    }

    /// Sweeps until the process ends (start the informers first).
    pub async fn run(self) {
        loop {
            if let Err(e) = self.collector.sweep().await {
                tracing::warn!(error = %e, "garbage collection sweep failed");
            }
            tokio::select! {
                _ = self.wake.notified() => tokio::time::sleep(Duration::from_millis(100)).await,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(
        kind: &str,
        name: &str,
        uid: &str,
        owners: &[&str],
        finalizers: &[&str],
        deleting: bool,
    ) -> Obj {
        let info = registry::by_alias(kind).unwrap();
        Obj {
            info,
            namespace: Some("d".into()),
            name: name.into(),
            uid: uid.into(),
            owners: owners
                .iter()
                .map(|u| OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: u.to_string(),
                    controller: Some(true),
                    ..Default::default()
                })
                .collect(),
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
            deleting,
        }
    }

    #[test]
    fn background_deletes_dependents_of_gone_owners_only() {
        let objs = vec![
            obj("rs", "rs", "r1", &[], &[], false),
            obj("po", "kept", "p1", &["r1"], &[], false),
            obj("po", "orphaned", "p2", &["gone"], &[], false),
            obj("po", "free", "p3", &[], &[], false),
        ];
        assert_eq!(plan(&objs), vec![Action::DeleteOrphaned(objs[2].clone())]);
        // A dependent with one live owner stays.
        let two = vec![
            obj("rs", "rs", "r1", &[], &[], false),
            obj("po", "shared", "p", &["r1", "gone"], &[], false),
        ];
        assert!(plan(&two).is_empty());
    }

    #[test]
    fn orphan_unlinks_then_releases_the_owner() {
        let objs = vec![
            obj("rs", "rs", "r1", &[], &[ORPHAN], true),
            obj("po", "a", "p1", &["r1"], &[], false),
        ];
        assert_eq!(
            plan(&objs),
            vec![Action::Unlink {
                dependent: objs[1].clone(),
                owner_uid: "r1".into()
            }]
        );
        let done = vec![
            obj("rs", "rs", "r1", &[], &[ORPHAN], true),
            obj("po", "a", "p1", &[], &[], false),
        ];
        assert_eq!(
            plan(&done),
            vec![Action::RemoveFinalizer {
                owner: done[0].clone(),
                finalizer: ORPHAN
            }]
        );
    }

    #[test]
    fn foreground_deletes_dependents_first() {
        let objs = vec![
            obj("rs", "rs", "r1", &[], &[FOREGROUND], true),
            obj("po", "a", "p1", &["r1"], &[], false),
            obj("po", "b", "p2", &["r1"], &[], true),
        ];
        assert_eq!(
            plan(&objs),
            vec![Action::DeleteDependent {
                dependent: objs[1].clone(),
                foreground: false
            }]
        );
        // A dependent with dependents of its own goes in the foreground too:
        // the Deployment waits for its ReplicaSet, which waits for its pods.
        let chain = vec![
            obj("deploy", "d", "d1", &[], &[FOREGROUND], true),
            obj("rs", "rs", "r1", &["d1"], &[], false),
            obj("po", "a", "p1", &["r1"], &[], false),
        ];
        assert_eq!(
            plan(&chain),
            vec![Action::DeleteDependent {
                dependent: chain[1].clone(),
                foreground: true
            }]
        );
        let done = vec![obj("rs", "rs", "r1", &[], &[FOREGROUND], true)];
        assert_eq!(
            plan(&done),
            vec![Action::RemoveFinalizer {
                owner: done[0].clone(),
                finalizer: FOREGROUND
            }]
        );
    }
}
