//! Reflector and informer: keep a local cache of one resource in step with the
//! apiserver and tell handlers what changed.
//!
//! ```text
//!   LIST ──▶ replace cache (diff → Added/Updated/Deleted) ──▶ WATCH from list RV
//!     ▲                                                          │
//!     └──────── 410 Gone (too old): re-list ◀────────────────────┤
//!               stream ended / error: re-watch from last seen RV ◀┘  (backoff + jitter)
//! ```
//!
//! Modelled on client-go's `tools/cache` Reflector and kube-rs' `watcher`.

use crate::rest::{Api, ListParams, Resource, WatchEvent};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// `namespace/name`, or `name` for cluster-scoped objects: the cache and queue key.
pub fn object_key(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or("")),
        None => meta.name.clone().unwrap_or_default(),
    }
}

/// An index function: the index values an object is filed under.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

struct CacheInner<K> {
    objects: HashMap<String, Arc<K>>,
    indexers: HashMap<String, IndexFn<K>>,
    /// index name → value → object keys
    indices: HashMap<String, HashMap<String, HashSet<String>>>,
}

/// A thread-safe, indexed store of objects (client-go's `ThreadSafeStore`).
pub struct Cache<K> {
    inner: Arc<RwLock<CacheInner<K>>>,
    synced: Arc<AtomicBool>,
}

impl<K> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Cache {
            inner: self.inner.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> Default for Cache<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> Cache<K> {
    pub fn new() -> Self {
        Cache {
            inner: Arc::new(RwLock::new(CacheInner {
                objects: HashMap::new(),
                indexers: HashMap::new(),
                indices: HashMap::new(),
            })),
            synced: Arc::new(AtomicBool::new(false)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, CacheInner<K>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CacheInner<K>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an index; existing objects are indexed at once.
    pub fn add_index(&self, name: &str, f: IndexFn<K>) {
        let mut inner = self.write();
        let mut index: HashMap<String, HashSet<String>> = HashMap::new();
        for (key, obj) in &inner.objects {
            for v in f(obj) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
        inner.indices.insert(name.to_string(), index);
        inner.indexers.insert(name.to_string(), f);
    }

    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().objects.get(key).cloned()
    }

    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects filed under `value` in index `name`.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        let keys = inner.indices.get(name).and_then(|i| i.get(value));
        keys.map(|ks| {
            ks.iter()
                .filter_map(|k| inner.objects.get(k).cloned())
                .collect()
        })
        .unwrap_or_default()
    }

    /// True once the first list has been loaded.
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Waits until the first list has been loaded.
    pub async fn wait_synced(&self) {
        while !self.has_synced() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn unindex(inner: &mut CacheInner<K>, key: &str, obj: &K) {
        let values: Vec<(String, Vec<String>)> = inner
            .indexers
            .iter()
            .map(|(n, f)| (n.clone(), f(obj)))
            .collect();
        for (name, vals) in values {
            if let Some(index) = inner.indices.get_mut(&name) {
                for v in vals {
                    if let Some(set) = index.get_mut(&v) {
                        set.remove(key);
                        if set.is_empty() {
                            index.remove(&v);
                        }
                    }
                }
            }
        }
    }

    fn index(inner: &mut CacheInner<K>, key: &str, obj: &K) {
        let values: Vec<(String, Vec<String>)> = inner
            .indexers
            .iter()
            .map(|(n, f)| (n.clone(), f(obj)))
            .collect();
        for (name, vals) in values {
            let index = inner.indices.entry(name).or_default();
            for v in vals {
                index.entry(v).or_default().insert(key.to_string());
            }
        }
    }

    /// Inserts or replaces one object; returns the previous one.
    pub fn upsert(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = object_key(obj.metadata());
        let mut inner = self.write();
        let old = inner.objects.insert(key.clone(), obj.clone());
        if let Some(o) = &old {
            Self::unindex(&mut inner, &key, o);
        }
        Self::index(&mut inner, &key, &obj);
        old
    }

    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.write();
        let old = inner.objects.remove(key);
        if let Some(o) = &old {
            Self::unindex(&mut inner, key, o);
        }
        old
    }

    /// Replaces the whole content atomically; returns the events that turn the old content into the new.
    pub fn replace(&self, items: Vec<K>) -> Vec<Event<K>> {
        let mut inner = self.write();
        let mut fresh: HashMap<String, Arc<K>> = HashMap::new();
        for item in items {
            fresh.insert(object_key(item.metadata()), Arc::new(item));
        }
        let mut events = Vec::new();
        for (key, old) in &inner.objects {
            if !fresh.contains_key(key) {
                events.push(Event::Deleted(old.clone()));
            }
        }
        for (key, new) in &fresh {
            match inner.objects.get(key) {
                None => events.push(Event::Added(new.clone())),
                Some(old) if old.metadata().resource_version != new.metadata().resource_version => {
                    events.push(Event::Updated {
                        old: old.clone(),
                        new: new.clone(),
                    })
                }
                Some(_) => {}
            }
        }
        inner.objects = fresh;
        let keys: Vec<(String, Arc<K>)> = inner
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for index in inner.indices.values_mut() {
            index.clear();
        }
        for (k, o) in keys {
            Self::index(&mut inner, &k, &o);
        }
        drop(inner);
        self.synced.store(true, Ordering::Release);
        events
    }
}

/// What changed in the cache.
#[derive(Debug, Clone)]
pub enum Event<K> {
    Added(Arc<K>),
    Updated { old: Arc<K>, new: Arc<K> },
    Deleted(Arc<K>),
}

impl<K> Event<K> {
    /// The object as it is now (or was last, for a deletion).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Event::Added(o) | Event::Deleted(o) => o,
            Event::Updated { new, .. } => new,
        }
    }
}

pub type Handler<K> = Arc<dyn Fn(&Event<K>) + Send + Sync>;

/// Counters a test or `/metrics` can read.
#[derive(Default, Debug)]
pub struct InformerStats {
    pub lists: AtomicU64,
    pub watches: AtomicU64,
    pub gone: AtomicU64,
}

/// A reflector with event handlers.
pub struct Informer<K> {
    api: Api<K>,
    params: ListParams,
    cache: Cache<K>,
    handlers: Vec<Handler<K>>,
    pub stats: Arc<InformerStats>,
    /// Server-side timeout of each watch request (client-go picks 5-10 min).
    pub watch_timeout: Duration,
}

/// Drops `metadata.managedFields` before an object is cached, as client-go's
/// `TransformStripManagedFields` does for the scheduler and the controller
/// manager: no controller reads them, they are often half of an object's
/// size, and an update sent without them keeps the server's.
fn without_managed_fields<K: k8s_openapi::Metadata<Ty = ObjectMeta>>(mut obj: K) -> K {
    obj.metadata_mut().managed_fields = None;
    obj
}

impl<K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>> Informer<K> {
    pub fn new(api: Api<K>, params: ListParams) -> Self {
        Informer {
            api,
            params,
            cache: Cache::new(),
            handlers: Vec::new(),
            stats: Arc::default(),
            watch_timeout: Duration::from_secs(300 + rand::random::<u64>() % 300),
        }
    }

    pub fn cache(&self) -> Cache<K> {
        self.cache.clone()
    }

    pub fn on_event(&mut self, f: impl Fn(&Event<K>) + Send + Sync + 'static) {
        self.handlers.push(Arc::new(f));
    }

    fn emit(&self, ev: &Event<K>) {
        for h in &self.handlers {
            h(ev);
        }
    }

    /// Runs forever (spawn it).
    pub async fn run(self) {
        let mut backoff = Backoff::new();
        loop {
            // LIST, then replace the cache atomically.
            self.stats.lists.fetch_add(1, Ordering::Relaxed);
            let mut rv = match self.api.list(&self.params).await {
                Ok((items, rv)) => {
                    let items = items.into_iter().map(without_managed_fields).collect();
                    for ev in self.cache.replace(items) {
                        self.emit(&ev);
                    }
                    backoff.reset();
                    rv
                }
                Err(e) => {
                    tracing::warn!(kind = K::KIND, error = %e, "list failed");
                    backoff.wait().await;
                    continue;
                }
            };
            // WATCH from the list's version; resume from the last seen one after a disconnect.
            'watch: loop {
                let mut lp = self.params.clone();
                lp.timeout_seconds = Some(self.watch_timeout.as_secs().max(1));
                lp.allow_bookmarks = true;
                self.stats.watches.fetch_add(1, Ordering::Relaxed);
                let mut stream = match self.api.watch(&lp, &rv).await {
                    Ok(s) => s,
                    Err(e) if e.is_gone() => {
                        self.stats.gone.fetch_add(1, Ordering::Relaxed);
                        break 'watch;
                    }
                    Err(e) => {
                        tracing::debug!(kind = K::KIND, error = %e, "watch failed");
                        backoff.wait().await;
                        continue 'watch;
                    }
                };
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(WatchEvent::Added(o)) | Ok(WatchEvent::Modified(o)) => {
                            rv = o.metadata().resource_version.clone().unwrap_or(rv);
                            let new = Arc::new(without_managed_fields(o));
                            let ev = match self.cache.upsert(new.clone()) {
                                Some(old) => Event::Updated { old, new },
                                None => Event::Added(new),
                            };
                            self.emit(&ev);
                            backoff.reset();
                        }
                        Ok(WatchEvent::Deleted(o)) => {
                            rv = o.metadata().resource_version.clone().unwrap_or(rv);
                            let removed = self.cache.remove(&object_key(o.metadata()));
                            self.emit(&Event::Deleted(
                                removed.unwrap_or_else(|| Arc::new(without_managed_fields(o))),
                            ));
                        }
                        Ok(WatchEvent::Bookmark(b)) => {
                            if !b.is_empty() {
                                rv = b;
                            }
                        }
                        // Gone, or ahead of the store (restored to an older
                        // state): either way our version means nothing; relist.
                        Ok(WatchEvent::Error(e))
                            if e.is_gone() || e.is_too_large_resource_version() =>
                        {
                            self.stats.gone.fetch_add(1, Ordering::Relaxed);
                            break 'watch;
                        }
                        Ok(WatchEvent::Error(e)) => {
                            tracing::debug!(kind = K::KIND, error = %e, "watch error event");
                            backoff.wait().await;
                            continue 'watch;
                        }
                        Err(e) => {
                            tracing::debug!(kind = K::KIND, error = %e, "watch stream error");
                            backoff.wait().await;
                            continue 'watch;
                        }
                    }
                }
            }
            // 410: our version is gone; re-list right away.
        }
    }
}

/// Exponential backoff with jitter: 200 ms doubling to 30 s, each wait ±50%.
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    pub const INITIAL: Duration = Duration::from_millis(200);
    pub const MAX: Duration = Duration::from_secs(30);

    pub fn new() -> Self {
        Backoff {
            next: Self::INITIAL,
        }
    }
    pub fn reset(&mut self) {
        self.next = Self::INITIAL;
    }
    /// The next delay (with jitter), advancing the backoff.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        let jitter = 0.5 + rand::random::<f64>();
        base.mul_f64(jitter)
    }
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(ns: &str, name: &str, node: &str, rv: &str) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, "spec": {"nodeName": node, "containers": []}})).unwrap()
    }

    #[test]
    fn cache_indexes_and_replaces_atomically() {
        let cache: Cache<Pod> = Cache::new();
        cache.add_index(
            "node",
            Arc::new(|p: &Pod| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .into_iter()
                    .collect()
            }),
        );
        cache.upsert(Arc::new(pod("a", "p1", "n1", "1")));
        cache.upsert(Arc::new(pod("a", "p2", "n1", "2")));
        assert_eq!(cache.by_index("node", "n1").len(), 2);
        cache.upsert(Arc::new(pod("a", "p2", "n2", "3")));
        assert_eq!(cache.by_index("node", "n1").len(), 1);
        assert_eq!(cache.by_index("node", "n2").len(), 1);
        let events = cache.replace(vec![pod("a", "p2", "n2", "3"), pod("b", "p3", "n2", "4")]);
        let mut kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Event::Added(_) => "added",
                Event::Updated { .. } => "updated",
                Event::Deleted(_) => "deleted",
            })
            .collect();
        kinds.sort();
        assert_eq!(kinds, vec!["added", "deleted"]);
        assert!(cache.get("a/p1").is_none());
        assert_eq!(cache.by_index("node", "n2").len(), 2);
        assert!(cache.by_index("node", "n1").is_empty());
        assert!(cache.has_synced());
    }

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = Backoff::new();
        let d1 = b.next_delay();
        assert!(d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(300));
        for _ in 0..20 {
            b.next_delay();
        }
        let d = b.next_delay();
        assert!(d >= Duration::from_secs(15) && d <= Duration::from_secs(45));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(300));
    }
}
