//! The built-in LimitRanger and ResourceQuota admissions, as Kubernetes runs
//! them: the LimitRanger first gives a new pod's containers the namespace's
//! default requests and limits (mutating, before the webhooks), then holds
//! pods and claims to the LimitRanges' min/max/ratio (validating); the
//! ResourceQuota admission runs last and charges the object's usage to
//! every quota that counts it, writing the quotas' `status.used` with a
//! compare-and-swap on their revisions, so two racing creates cannot both
//! take the last unit (the loser re-reads and re-checks).
//!
//! ```text
//!  create ─▶ LimitRanger defaults ─▶ webhooks ─▶ validation ─▶ LimitRanger checks
//!         ─▶ ResourceQuota: check every quota (403 "exceeded quota: …"), CAS status.used ─▶ store
//!                                     (store write fails ─▶ the charge is handed back)
//! ```
//!
//! The quota controller (controller manager) recounts `status.used` from the
//! objects, which corrects what a crash between charge and write left.

use crate::store::store_err;
use crate::store::StoreError;
use crate::ApiServer;
use bytes::Bytes;
use minik8s_api::quota::{self, Usage};
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::ApiError;
use minik8s_validation::limitrange;
use serde_json::{json, Value};

/// How often a charge is retried when another write changed a quota.
const CHARGE_RETRIES: usize = 16;

/// What one write charged: (quota store key, amounts added), to hand back
/// if the write itself fails.
#[derive(Default)]
pub struct Charge(Vec<(String, Usage)>);

fn quota_info() -> &'static ResourceInfo {
    registry::of::<k8s_openapi::api::core::v1::ResourceQuota>()
}

fn is_pod(info: &ResourceInfo) -> bool {
    info.is::<k8s_openapi::api::core::v1::Pod>()
}

fn is_claim(info: &ResourceInfo) -> bool {
    info.is::<k8s_openapi::api::core::v1::PersistentVolumeClaim>()
}

impl ApiServer {
    /// The LimitRanges of a namespace, from the followed cache.
    fn limit_ranges_in(&self, ns: &str) -> Vec<std::sync::Arc<Value>> {
        self.limit_ranges.in_namespace(ns)
    }

    /// LimitRanger, mutating: a new pod's containers get the defaults of
    /// every LimitRange in its namespace for what they leave unset.
    pub(crate) fn limit_ranger_defaults(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        obj: &mut Value,
    ) {
        let (true, Some(ns)) = (is_pod(info), ns) else {
            return;
        };
        for lr in self.limit_ranges_in(ns) {
            limitrange::default_pod(&lr, obj);
        }
    }

    /// LimitRanger, validating: pods (on create) and claims (on create and
    /// update) within every LimitRange's bounds; a 403 naming each breach.
    pub(crate) fn limit_ranger_check(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(ns) = ns else { return Ok(()) };
        let deleting = old.is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some());
        if deleting || !(is_pod(info) && old.is_none() || is_claim(info)) {
            return Ok(());
        }
        for lr in self.limit_ranges_in(ns) {
            let errs = if is_pod(info) {
                limitrange::validate_pod(&lr, obj)
            } else {
                limitrange::validate_claim(&lr, obj)
            };
            if !errs.is_empty() {
                return Err(ApiError::forbidden(
                    info,
                    name,
                    &limitrange::aggregate(&errs),
                ));
            }
        }
        Ok(())
    }

    /// ResourceQuota admission: refuses a write that would take a quota of
    /// its namespace over `hard`, and (unless a dry run) charges the usage
    /// to the quotas' `status.used`. Creates of every namespaced kind are
    /// counted; updates of pods (resize), Services and claims by their growth.
    pub(crate) async fn charge_quota(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<Charge, ApiError> {
        let Some(ns) = ns.filter(|_| info.namespaced) else {
            return Ok(Charge::default());
        };
        let counted_update = info.group.is_empty()
            && ["pods", "services", "persistentvolumeclaims"].contains(&&*info.plural);
        if old.is_some() && !counted_update || self.resource_quotas.in_namespace(ns).is_empty() {
            return Ok(Charge::default());
        }
        let gate = self
            .quota_gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ns.to_string())
            .or_default()
            .clone();
        let _one_at_a_time = gate.lock().await;
        let qinfo = quota_info();
        let req = quota::Request {
            plural: &info.plural,
            group: &info.group,
            obj,
            old,
            now: chrono::Utc::now(),
        };
        for _ in 0..CHARGE_RETRIES {
            let prefix = qinfo.key_prefix(Some(ns));
            let (kvs, _) = self
                .store
                .list(&prefix, None)
                .await
                .map_err(|e| store_err(qinfo, "", e))?;
            let mut values = Vec::with_capacity(kvs.len());
            for kv in &kvs {
                let q: Value = serde_json::from_slice(&kv.value)
                    .map_err(|e| ApiError::internal(format!("decoding a stored quota: {e}")))?;
                values.push(q);
            }
            let updates =
                quota::check(&values, &req).map_err(|why| ApiError::forbidden(info, name, &why))?;
            if dry_run || updates.is_empty() {
                return Ok(Charge::default());
            }
            let mut charge = Charge::default();
            let mut conflict = false;
            for (i, used) in updates {
                let (key, rev, q) = (&kvs[i].key, kvs[i].mod_revision, &values[i]);
                let before = quota::resource_list(q.pointer("/status/used"));
                let added: Usage = used
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.minus(before.get(k).copied().unwrap_or_default()),
                        )
                    })
                    .collect();
                let mut q = q.clone();
                q["status"]["used"] = usage_json(&used);
                match self.write_quota(key, &q, rev).await {
                    Ok(()) => charge.0.push((key.clone(), added)),
                    Err(StoreError::Conflict { .. }) => {
                        conflict = true;
                        break;
                    }
                    Err(e) => {
                        self.release_quota(charge).await;
                        return Err(store_err(qinfo, meta_name(&q), e));
                    }
                }
            }
            if !conflict {
                return Ok(charge);
            }
            self.release_quota(charge).await;
        }
        Err(ApiError::forbidden(
            info,
            name,
            "unable to update the quota status: too many concurrent writes, please retry",
        ))
    }

    async fn write_quota(&self, key: &str, q: &Value, rev: i64) -> Result<(), StoreError> {
        let mut q = q.clone();
        if let Some(m) = q.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        let body = Bytes::from(serde_json::to_vec(&q).unwrap_or_default());
        self.store.update(key, body, Some(rev)).await.map(|_| ())
    }

    /// Hands back what a write charged when the write did not happen.
    pub(crate) async fn release_quota(&self, charge: Charge) {
        for (key, added) in charge.0 {
            for _ in 0..CHARGE_RETRIES {
                let Ok(Some(kv)) = self.store.get(&key).await else {
                    break;
                };
                let Ok(mut q) = serde_json::from_slice::<Value>(&kv.value) else {
                    break;
                };
                let mut used = quota::resource_list(q.pointer("/status/used"));
                for (k, v) in &added {
                    if let Some(u) = used.get_mut(k) {
                        let left = u.minus(*v);
                        *u = if left.is_negative() {
                            Default::default()
                        } else {
                            left
                        };
                    }
                }
                q["status"]["used"] = usage_json(&used);
                match self.write_quota(&key, &q, kv.mod_revision).await {
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => {
                        tracing::warn!(quota = %key, error = %e, "handing back a quota charge failed; the quota controller recounts it");
                        break;
                    }
                    Ok(()) => break,
                }
            }
        }
    }
}

fn meta_name(q: &Value) -> &str {
    minik8s_api::meta::name(q)
}

/// A usage as a resource list.
pub fn usage_json(u: &Usage) -> Value {
    let m: serde_json::Map<String, Value> = u
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.to_string())))
        .collect();
    Value::Object(m)
}
