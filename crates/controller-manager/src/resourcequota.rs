//! The ResourceQuota controller: keeps every quota's `status` (`hard` = the
//! spec's, `used` = what the namespace's objects in its scopes use) true.
//!
//! The apiserver's quota admission charges `status.used` as objects are
//! created, so this controller does not recount on a create (a recount that
//! raced a create not yet seen here would undercount). It recounts as
//! Kubernetes' does: when a quota is new or its spec changes, when an object
//! is deleted or stops counting (a pod finishing, a claim shrinking), and
//! periodically (objects whose kind it does not watch, charges handed back
//! by a crash).
//!
//! ```text
//!  quota added / spec changed ─┐
//!  pod|service|claim deleted ──┼─▶ reconcile(quota) ─▶ recount (quota::recount) ─▶ PUT status
//!  every 60 s (10 s) ──────────┘       pods, services, claims: caches; other kinds: LIST
//! ```

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use minik8s_api::quota;
use minik8s_api::registry::REGISTRY;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::object_key;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{
    Api, Cache, Client, ClientError, Event, ListParams, SharedInformers, WorkQueue,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How often every quota is recounted even without a trigger.
pub const RESYNC: Duration = Duration::from_secs(60);
/// How often a quota counting kinds not watched here (ConfigMaps,
/// Deployments, custom resources…) is recounted: their deletions are seen
/// only this way.
pub const RESYNC_UNWATCHED: Duration = Duration::from_secs(10);

/// Whether the controller watches this kind's objects (and so sees deletions).
fn watched(plural: &str, group: &str) -> bool {
    group.is_empty() && ["pods", "services", "persistentvolumeclaims"].contains(&plural)
}

pub struct ResourceQuotaController {
    client: Client,
    quotas: Cache<ResourceQuota>,
    pods: Cache<Pod>,
    services: Cache<Service>,
    claims: Cache<PersistentVolumeClaim>,
}

/// Whether a change of a quota calls for a recount: new, or its spec no
/// longer what its status was counted for.
pub fn quota_needs_recount(q: &ResourceQuota) -> bool {
    let spec_hard = q.spec.as_ref().and_then(|s| s.hard.as_ref());
    let status_hard = q.status.as_ref().and_then(|s| s.hard.as_ref());
    spec_hard != status_hard || q.status.as_ref().and_then(|s| s.used.as_ref()).is_none()
}

/// Whether an object's change can lower what it uses (the triggers of a
/// recount): a deletion, or an update that changes its usage.
fn usage_changed<K: serde::Serialize>(ev: &Event<K>, plural: &str) -> bool {
    let now = chrono::Utc::now();
    let usage = |o: &K| {
        serde_json::to_value(o)
            .map(|v| quota::usage(plural, "", &v, now))
            .unwrap_or_default()
    };
    match ev {
        Event::Added(_) => false,
        Event::Deleted(_) => true,
        Event::Updated { old, new } => usage(old) != usage(new),
    }
}

impl ResourceQuotaController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ResourceQuotaController {
            client,
            quotas: informers.cache(),
            pods: informers.cache(),
            services: informers.cache(),
            claims: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .watches::<ResourceQuota, _>(informers, |_, ev| match ev {
                Event::Added(q) => vec![object_key(&q.metadata)],
                Event::Updated { new, .. } if quota_needs_recount(new) => {
                    vec![object_key(&new.metadata)]
                }
                _ => vec![],
            })?
            .watches::<Pod, _>(informers, |r, ev| r.quotas_for(ev, "pods"))?
            .watches::<Service, _>(informers, |r, ev| r.quotas_for(ev, "services"))?
            .watches::<PersistentVolumeClaim, _>(informers, |r, ev| {
                r.quotas_for(ev, "persistentvolumeclaims")
            })
    }

    /// The keys of the quotas of an object's namespace, when its change
    /// can lower its usage. The namespace's quotas are looked up first: a
    /// change in a namespace without any (most pod status writes) costs no
    /// usage computation.
    fn quotas_for<K>(&self, ev: &Event<K>, plural: &str) -> Vec<String>
    where
        K: serde::Serialize
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    {
        let ns = ev.object().metadata().namespace.as_deref().unwrap_or("");
        let quotas = self.quotas.by_index(NAMESPACE_INDEX, ns);
        if quotas.is_empty() || !usage_changed(ev, plural) {
            return vec![];
        }
        quotas.iter().map(|q| object_key(&q.metadata)).collect()
    }

    fn cached<K>(cache: &Cache<K>, ns: &str) -> Vec<Value>
    where
        K: serde::Serialize
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    {
        cache
            .by_index(NAMESPACE_INDEX, ns)
            .iter()
            .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
            .collect()
    }

    /// The namespace's objects of one kind: from a cache when watched,
    /// else listed; None when the kind is not served here.
    async fn objects(
        &self,
        ns: &str,
        plural: &str,
        group: &str,
    ) -> Result<Option<Vec<Value>>, ClientError> {
        match (group, plural) {
            ("", "pods") => return Ok(Some(Self::cached(&self.pods, ns))),
            ("", "services") => return Ok(Some(Self::cached(&self.services, ns))),
            ("", "persistentvolumeclaims") => return Ok(Some(Self::cached(&self.claims, ns))),
            _ => {}
        }
        let list = match REGISTRY
            .iter()
            .find(|r| r.group == group && r.plural == plural && r.namespaced)
        {
            Some(info) => {
                self.client
                    .dynamic(info, Some(ns))
                    .list(&ListParams::default())
                    .await?
            }
            // A custom resource: its group's preferred version, from discovery.
            None if !group.is_empty() => {
                let discovered = self.client.get_json(&format!("/apis/{group}")).await;
                let gv = match discovered {
                    Ok(g) => g
                        .pointer("/preferredVersion/groupVersion")
                        .and_then(Value::as_str)
                        .map(String::from),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(e),
                };
                let Some(gv) = gv else { return Ok(None) };
                match self
                    .client
                    .get_json(&format!("/apis/{gv}/namespaces/{ns}/{plural}"))
                    .await
                {
                    Ok(l) => l,
                    Err(e) if e.is_not_found() => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            None => return Ok(None),
        };
        Ok(Some(
            list.get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        ))
    }
}

impl Reconciler for ResourceQuotaController {
    const NAME: &'static str = "resourcequota";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(q) = self.quotas.get(key) else {
            return Ok(Action::Done);
        };
        if q.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let ns = q.metadata.namespace.clone().unwrap_or_default();
        let qv =
            serde_json::to_value(q.as_ref()).map_err(|e| ClientError::Decode(e.to_string()))?;
        let hard = quota::resource_list(qv.pointer("/spec/hard"));
        let names = hard.keys().cloned().collect();
        let mut fetched = BTreeMap::new();
        let kinds = quota::kinds_counted(&names);
        let resync = match kinds.iter().all(|(p, g)| watched(p, g)) {
            true => RESYNC,
            false => RESYNC_UNWATCHED,
        };
        for (plural, group) in kinds {
            let objs = self.objects(&ns, &plural, &group).await?;
            fetched.insert((plural, group), objs);
        }
        let lookup = |p: &str, g: &str| {
            fetched
                .get(&(p.to_string(), g.to_string()))
                .cloned()
                .flatten()
        };
        let (hard, used) = quota::recount(&qv, &lookup, chrono::Utc::now());
        let status = json!({
            "hard": hard.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect::<serde_json::Map<_, _>>(),
            "used": used.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect::<serde_json::Map<_, _>>(),
        });
        let current = qv.get("status").cloned().unwrap_or(Value::Null);
        if !same_status(&current, &status) {
            let mut updated = q.as_ref().clone();
            updated.status = Some(
                serde_json::from_value(status).map_err(|e| ClientError::Decode(e.to_string()))?,
            );
            let api: Api<ResourceQuota> = Api::namespaced(&self.client, &ns);
            match api
                .replace_status(q.metadata.name.as_deref().unwrap_or(""), &updated)
                .await
            {
                Ok(_) => tracing::debug!(quota = key, "quota usage recounted"),
                // Changed meanwhile (a charge): the new version is reconciled again.
                Err(e) if e.is_conflict() || e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Action::RequeueAfter(resync))
    }
}

/// Whether two statuses hold the same amounts (`1000m` and `1` are equal).
fn same_status(a: &Value, b: &Value) -> bool {
    ["hard", "used"].iter().all(|k| {
        quota::resource_list(a.get(*k)) == quota::resource_list(b.get(*k))
            && a.get(*k).and_then(Value::as_object).map(|m| m.len())
                == b.get(*k).and_then(Value::as_object).map(|m| m.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_is_recounted_when_new_or_its_spec_changed() {
        let q = |status: Value| -> ResourceQuota {
            serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2"}}, "status": status}))
                .unwrap()
        };
        assert!(quota_needs_recount(&q(json!({}))));
        assert!(quota_needs_recount(&q(
            json!({"hard": {"pods": "3"}, "used": {"pods": "1"}})
        )));
        assert!(!quota_needs_recount(&q(
            json!({"hard": {"pods": "2"}, "used": {"pods": "1"}})
        )));
        assert!(same_status(
            &json!({"hard": {"cpu": "1"}, "used": {"cpu": "1000m"}}),
            &json!({"hard": {"cpu": "1"}, "used": {"cpu": "1"}})
        ));
        assert!(!same_status(
            &json!({"hard": {"cpu": "1"}, "used": {}}),
            &json!({"hard": {"cpu": "1"}, "used": {"cpu": "0"}})
        ));
    }
}
