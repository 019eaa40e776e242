//! Objects of one kind kept in memory from its watch cache, for the
//! apiserver's own readers (admission configurations, APIServices): a request
//! reads them without listing the store.

use crate::ApiServer;
use minik8s_api::registry::ResourceInfo;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, Weak};

/// Objects of one kind, kept from its watch cache: name (`namespace/name`
/// for a namespaced kind) → (revision, object).
#[derive(Default)]
pub struct Followed(RwLock<BTreeMap<String, (i64, Arc<Value>)>>);

impl Followed {
    /// Every object now, in name order.
    pub fn all(&self) -> Vec<Arc<Value>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        map.values().map(|(_, v)| v.clone()).collect()
    }

    /// The objects of one namespace (a namespaced kind's), in name order.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<Value>> {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        let prefix = format!("{ns}/");
        map.range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(_, (_, v))| v.clone())
            .collect()
    }

    pub(crate) fn put(&self, name: String, revision: i64, obj: Option<Value>) {
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

/// Keeps `into(server)` current: the stored objects of `info` now, then every
/// change from its watch cache (from `after`, the caches' start).
pub fn follow(
    srv: &Arc<ApiServer>,
    info: &'static ResourceInfo,
    after: i64,
    into: impl Fn(&ApiServer) -> &Followed + Send + Sync + 'static,
) {
    let Some(cache) = srv.watch_cache(info) else {
        return;
    };
    let Ok(sub) = cache.subscribe(after) else {
        return;
    };
    let server: Weak<ApiServer> = Arc::downgrade(srv);
    tokio::spawn(async move {
        let mut live = sub.live;
        let load = |server: &Weak<ApiServer>| {
            let server = server.clone();
            let into = &into;
            async move {
                let Some(srv) = server.upgrade() else { return };
                let prefix = info.key_prefix(None);
                if let Ok((kvs, _)) = srv.store.list(&prefix, None).await {
                    for kv in kvs {
                        let obj = serde_json::from_slice::<Value>(&kv.value).ok();
                        let name = kv.key.trim_start_matches(&prefix).to_string();
                        into(&srv).put(name, kv.mod_revision, obj);
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
                    // Keyed as in the store: `namespace/name` for a namespaced kind.
                    let name = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
                        Some(ns) if info.namespaced => {
                            format!("{ns}/{}", minik8s_api::meta::name(&obj))
                        }
                        _ => minik8s_api::meta::name(&obj).to_string(),
                    };
                    let obj = (ev.kind == crate::store::EventKind::Put).then_some(obj);
                    into(&srv).put(name, ev.revision, obj);
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => load(&server).await,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}
