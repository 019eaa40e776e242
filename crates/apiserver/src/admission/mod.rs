//! Dynamic admission: what the cluster's own objects add to the write path,
//! as Kubernetes' MutatingAdmissionWebhook, ValidatingAdmissionPolicy and
//! ValidatingAdmissionWebhook plugins do.
//!
//! ```text
//!  write ─▶ defaults ─▶ mutate(): mutating webhooks (JSONPatch, reinvoked once if IfNeeded)
//!        ─▶ validation ─▶ validate(): ValidatingAdmissionPolicies (CEL) ─▶ validating webhooks ─▶ store
//! ```
//!
//! The configurations come from watch caches ([`Configs`]), so a request
//! never lists them. Which configurations apply: `matching.rs`; calling a
//! webhook: `webhook.rs`; policies: `policy.rs`.

mod matching;
mod policy;
mod webhook;

use crate::auth::UserInfo;
use crate::watch_cache::WatchCache;
use crate::ApiServer;
use k8s_openapi::api::admissionregistration::v1 as admissionregistration;
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::ApiError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, Weak};

pub use webhook::WebhookClients;

/// What a write does, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One request as admission sees it.
pub struct Attributes<'a> {
    pub info: &'static ResourceInfo,
    pub subresource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub operation: Operation,
    /// The object being written (None on delete).
    pub object: Option<&'a Value>,
    /// The stored object (update and delete).
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

/// Objects of one kind, kept from its watch cache: name → (revision, object).
#[derive(Default)]
pub struct Followed(RwLock<BTreeMap<String, (i64, Arc<Value>)>>);

impl Followed {
    /// Every object now, in name order.
    pub fn all(&self) -> Vec<Arc<Value>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        map.values().map(|(_, v)| v.clone()).collect()
    }

    fn put(&self, name: String, revision: i64, obj: Option<Value>) {
        let mut map = self.0.write().unwrap_or_else(|p| p.into_inner());
        if map.get(&name).is_some_and(|(r, _)| *r >= revision) {
            return;
        }
        match obj {
            Some(o) => {
                map.insert(name, (revision, Arc::new(o)));
            }
            None => {
                map.remove(&name);
            }
        }
    }
}

/// Which of the [`Configs`] a followed kind fills.
type Pick = fn(&Configs) -> &Followed;

/// The admission configurations the server follows.
#[derive(Default)]
pub struct Configs {
    pub mutating: Followed,
    pub validating: Followed,
    pub policies: Followed,
    pub bindings: Followed,
}

impl ApiServer {
    /// Starts following the four admission kinds (from `after`, the caches' start).
    pub(crate) fn follow_admission_configs(self: &Arc<Self>, after: i64) {
        let kinds: [(&'static ResourceInfo, Pick); 4] = [
            (
                registry::of::<admissionregistration::MutatingWebhookConfiguration>(),
                |c| &c.mutating,
            ),
            (
                registry::of::<admissionregistration::ValidatingWebhookConfiguration>(),
                |c| &c.validating,
            ),
            (
                registry::of::<admissionregistration::ValidatingAdmissionPolicy>(),
                |c| &c.policies,
            ),
            (
                registry::of::<admissionregistration::ValidatingAdmissionPolicyBinding>(),
                |c| &c.bindings,
            ),
        ];
        for (info, pick) in kinds {
            if let Some(cache) = self.watch_cache(info) {
                follow(Arc::downgrade(self), info, cache, after, pick);
            }
        }
    }

    /// Mutating admission: every matching mutating webhook, in name order,
    /// may patch the object; returns the object to validate and store.
    pub(crate) async fn admit_mutating(
        &self,
        a: &Attributes<'_>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let configs = self.admission.mutating.all();
        if configs.is_empty() {
            return Ok(obj);
        }
        webhook::mutate(self, a, &configs, obj).await
    }

    /// Validating admission: policies, then validating webhooks.
    pub(crate) async fn admit_validating(
        &self,
        a: &Attributes<'_>,
        warnings: &crate::rest::Warnings,
    ) -> Result<(), ApiError> {
        let bindings = self.admission.bindings.all();
        if !bindings.is_empty() {
            policy::validate(self, a, &self.admission.policies.all(), &bindings, warnings).await?;
        }
        let configs = self.admission.validating.all();
        if !configs.is_empty() {
            webhook::validate(self, a, &configs).await?;
        }
        Ok(())
    }
}

fn follow(
    server: Weak<ApiServer>,
    info: &'static ResourceInfo,
    cache: Arc<WatchCache>,
    after: i64,
    pick: Pick,
) {
    let Ok(sub) = cache.subscribe(after) else {
        return;
    };
    tokio::spawn(async move {
        let mut live = sub.live;
        let load = |server: &Weak<ApiServer>| {
            let server = server.clone();
            async move {
                let Some(srv) = server.upgrade() else { return };
                let prefix = info.key_prefix(None);
                if let Ok((kvs, _)) = srv.store.list(&prefix, None).await {
                    for kv in kvs {
                        let obj = serde_json::from_slice::<Value>(&kv.value).ok();
                        let name = kv.key.trim_start_matches(&prefix).to_string();
                        pick(&srv.admission).put(name, kv.mod_revision, obj);
                    }
                }
            }
        };
        load(&server).await;
        loop {
            match live.recv().await {
                Ok(ev) => {
                    let Some(srv) = server.upgrade() else { return };
                    let obj = ev.object();
                    let name = minik8s_api::meta::name(&obj).to_string();
                    let obj = (ev.kind == crate::store::EventKind::Put).then_some(obj);
                    pick(&srv.admission).put(name, ev.revision, obj);
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => load(&server).await,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}
