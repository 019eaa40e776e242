//! The RBAC objects as the authorizer reads them: listed once at start, then
//! kept current from the four RBAC watch caches (as kube-apiserver's RBAC
//! authorizer reads informers). Each batch of changes rebuilds the evaluated
//! [`Policy`] once; requests read the current one without waiting.

use super::rbac::{Policy, PolicyObjects};
use crate::watch_cache::CacheEvent;
use crate::ApiServer;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use minik8s_api::meta;
use minik8s_api::registry;
use serde_json::Value;
use std::sync::{Arc, Mutex, RwLock};

#[derive(Default)]
pub struct PolicyCache {
    objects: Mutex<PolicyObjects>,
    current: RwLock<Arc<Policy>>,
}

/// Which of the four kinds an object is.
#[derive(Clone, Copy)]
enum RbacKind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl RbacKind {
    fn info(self) -> &'static registry::ResourceInfo {
        match self {
            RbacKind::Role => registry::of::<Role>(),
            RbacKind::ClusterRole => registry::of::<ClusterRole>(),
            RbacKind::RoleBinding => registry::of::<RoleBinding>(),
            RbacKind::ClusterRoleBinding => registry::of::<ClusterRoleBinding>(),
        }
    }
}

/// Puts (`Some`) or removes (`None`) one object in `objs`.
fn set(objs: &mut PolicyObjects, kind: RbacKind, obj: &Value, present: bool) {
    let ns = meta::namespace(obj).unwrap_or("").to_string();
    let name = meta::name(obj).to_string();
    fn put<K: serde::de::DeserializeOwned, Key: Ord>(
        map: &mut std::collections::BTreeMap<Key, K>,
        key: Key,
        obj: &Value,
        present: bool,
    ) {
        match serde_json::from_value::<K>(obj.clone()) {
            Ok(typed) if present => {
                map.insert(key, typed);
            }
            _ => {
                map.remove(&key);
            }
        }
    }
    match kind {
        RbacKind::Role => put(&mut objs.roles, (ns, name), obj, present),
        RbacKind::ClusterRole => put(&mut objs.cluster_roles, name, obj, present),
        RbacKind::RoleBinding => put(&mut objs.role_bindings, (ns, name), obj, present),
        RbacKind::ClusterRoleBinding => put(&mut objs.cluster_role_bindings, name, obj, present),
    }
}

impl PolicyCache {
    /// The policy as of the last change seen.
    pub fn policy(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn rebuild(&self) {
        let policy = {
            let objs = self.objects.lock().unwrap_or_else(|p| p.into_inner());
            Arc::new(Policy::build(&objs))
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    fn apply(&self, kind: RbacKind, events: &[Arc<CacheEvent>]) {
        let mut objs = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        for ev in events {
            let present = matches!(ev.kind, crate::store::EventKind::Put);
            set(&mut objs, kind, &ev.object(), present);
        }
    }

    /// Lists the four kinds and follows their watch caches from then on.
    pub(crate) async fn start(srv: &Arc<ApiServer>) -> anyhow::Result<()> {
        for kind in [
            RbacKind::Role,
            RbacKind::ClusterRole,
            RbacKind::RoleBinding,
            RbacKind::ClusterRoleBinding,
        ] {
            let info = kind.info();
            let (kvs, rev) = srv.store.list(&info.key_prefix(None), None).await?;
            {
                let mut objs = srv.policy.objects.lock().unwrap_or_else(|p| p.into_inner());
                for kv in kvs {
                    if let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) {
                        set(&mut objs, kind, &obj, true);
                    }
                }
            }
            let cache = srv
                .watch_cache(info)
                .ok_or_else(|| anyhow::anyhow!("no watch cache for {}", info.plural))?;
            let sub = cache.subscribe(rev).map_err(|oldest| {
                anyhow::anyhow!("{} watch cache starts at {oldest}", info.plural)
            })?;
            let server = Arc::downgrade(srv);
            tokio::spawn(async move {
                let mut live = sub.live;
                let mut batch = sub.backlog;
                loop {
                    let Some(srv) = server.upgrade() else { return };
                    if !batch.is_empty() {
                        srv.policy.apply(kind, &batch);
                        srv.policy.rebuild();
                        batch.clear();
                    }
                    drop(srv);
                    match live.recv().await {
                        Ok(ev) => {
                            batch.push(ev);
                            // Take everything already waiting: one rebuild per burst.
                            while let Ok(ev) = live.try_recv() {
                                batch.push(ev);
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            // Missed changes: read everything again.
                            let Some(srv) = server.upgrade() else { return };
                            if let Ok((kvs, _)) = srv.store.list(&info.key_prefix(None), None).await
                            {
                                let mut objs =
                                    srv.policy.objects.lock().unwrap_or_else(|p| p.into_inner());
                                match kind {
                                    RbacKind::Role => objs.roles.clear(),
                                    RbacKind::ClusterRole => objs.cluster_roles.clear(),
                                    RbacKind::RoleBinding => objs.role_bindings.clear(),
                                    RbacKind::ClusterRoleBinding => {
                                        objs.cluster_role_bindings.clear()
                                    }
                                }
                                for kv in kvs {
                                    if let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) {
                                        set(&mut objs, kind, &obj, true);
                                    }
                                }
                            }
                            srv.policy.rebuild();
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            });
        }
        srv.policy.rebuild();
        Ok(())
    }
}
