//! The watch cache: one store watch per resource, fanned out to every HTTP
//! watcher, as the Kubernetes apiserver's cacher does. It keeps a ring of
//! recent events so that a client resuming from its last resourceVersion gets
//! exactly the events it missed; older versions get `410 Gone`.
//!
//! ```text
//!  store.watch(prefix) ──▶ ring [rv 101 .. rv 4196] ──broadcast──▶ HTTP watcher 1
//!                                                     └─────────▶ HTTP watcher N
//! ```

use crate::store::{EventKind, Store, StoreError, StoreEvent};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// One decoded change, shared by all watchers.
#[derive(Debug, Clone)]
pub struct CacheEvent {
    pub kind: EventKind,
    pub revision: i64,
    /// The object after the change (for deletes: the last state, with the deletion's revision).
    pub object: Arc<Value>,
    /// The object before the change; `None` on a Put means the object was created.
    pub prev: Option<Arc<Value>>,
    /// The object's JSON, serialized once for all watchers that want plain JSON.
    json: std::sync::OnceLock<bytes::Bytes>,
}

impl CacheEvent {
    pub fn object_json(&self) -> &bytes::Bytes {
        self.json.get_or_init(|| {
            bytes::Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default())
        })
    }
}

struct Inner {
    ring: VecDeque<Arc<CacheEvent>>,
    capacity: usize,
    /// Watches may start from any revision >= this one.
    oldest_servable: i64,
    /// The newest revision the cache has seen (or started at).
    latest: i64,
}

pub struct WatchCache {
    inner: Mutex<Inner>,
    /// The live feed; None once stopped, which ends every subscriber's feed.
    tx: Mutex<Option<broadcast::Sender<Arc<CacheEvent>>>>,
    /// The task that follows the store, aborted by [`WatchCache::stop`].
    task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

/// What a new watcher gets: the events it missed, then a live feed.
pub struct Subscription {
    pub backlog: Vec<Arc<CacheEvent>>,
    pub live: broadcast::Receiver<Arc<CacheEvent>>,
}

/// Turns a stored value into the API object, stamping its resourceVersion.
pub fn decode_object(value: &[u8], revision: i64) -> Option<Value> {
    let mut obj: Value = serde_json::from_slice(value).ok()?;
    minik8s_api::meta::metadata_mut(&mut obj).insert(
        "resourceVersion".into(),
        Value::String(revision.to_string()),
    );
    Some(obj)
}

impl WatchCache {
    /// Starts caching `prefix` from `start_revision` (exclusive) and keeps the
    /// store watch running for the life of the process.
    pub fn start(
        store: Arc<dyn Store>,
        prefix: String,
        start_revision: i64,
        capacity: usize,
    ) -> Arc<WatchCache> {
        let (tx, _) = broadcast::channel(capacity.max(1024));
        let cache = Arc::new(WatchCache {
            inner: Mutex::new(Inner {
                ring: VecDeque::new(),
                capacity,
                oldest_servable: start_revision,
                latest: start_revision,
            }),
            tx: Mutex::new(Some(tx)),
            task: std::sync::OnceLock::new(),
        });
        let c = cache.clone();
        let task = tokio::spawn(async move { c.run(store, prefix).await });
        let _ = cache.task.set(task.abort_handle());
        cache
    }

    /// Stops following the store (the resource is no longer served): the
    /// store watch ends and every subscriber's live feed closes, so open
    /// HTTP watches end as Kubernetes ends them when a CRD goes away.
    pub fn stop(&self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
        let _inner = self.lock();
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn sender(&self) -> std::sync::MutexGuard<'_, Option<broadcast::Sender<Arc<CacheEvent>>>> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(self: Arc<Self>, store: Arc<dyn Store>, prefix: String) {
        loop {
            let from = self.lock().latest + 1;
            match store.watch(&prefix, from).await {
                Ok(mut rx) => {
                    while let Some(item) = rx.recv().await {
                        match item {
                            Ok(ev) => self.push(ev),
                            Err(e) => {
                                tracing::warn!(%prefix, error = %e, "store watch ended");
                                break;
                            }
                        }
                    }
                }
                Err(StoreError::Gone { .. }) => {
                    // History we never saw is gone: everything before now is unservable.
                    let now = store.current_revision().await.unwrap_or(from);
                    let mut inner = self.lock();
                    inner.ring.clear();
                    inner.latest = now;
                    inner.oldest_servable = now;
                    tracing::warn!(%prefix, now, "watch cache restarted after compaction");
                }
                Err(e) => tracing::warn!(%prefix, error = %e, "store watch failed"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    fn push(&self, ev: StoreEvent) {
        let object = match ev.kind {
            EventKind::Put => decode_object(&ev.kv.value, ev.revision),
            EventKind::Delete => ev
                .prev
                .as_ref()
                .and_then(|p| decode_object(&p.value, ev.revision)),
        };
        let Some(object) = object else { return };
        let prev = ev
            .prev
            .as_ref()
            .and_then(|p| decode_object(&p.value, p.mod_revision))
            .map(Arc::new);
        let ce = Arc::new(CacheEvent {
            kind: ev.kind,
            revision: ev.revision,
            object: Arc::new(object),
            prev,
            json: std::sync::OnceLock::new(),
        });
        let mut inner = self.lock();
        inner.latest = ev.revision;
        inner.ring.push_back(ce.clone());
        while inner.ring.len() > inner.capacity {
            if let Some(old) = inner.ring.pop_front() {
                inner.oldest_servable = old.revision;
            }
        }
        // Sent under the lock so that subscribe() sees a consistent backlog/live split.
        if let Some(tx) = self.sender().as_ref() {
            let _ = tx.send(ce);
        }
    }

    /// Subscribes to events with revision > `after`. `Err(oldest)` when that is too old.
    pub fn subscribe(&self, after: i64) -> Result<Subscription, i64> {
        let inner = self.lock();
        if after < inner.oldest_servable {
            return Err(inner.oldest_servable);
        }
        let backlog = inner
            .ring
            .iter()
            .filter(|e| e.revision > after)
            .cloned()
            .collect();
        let live = match self.sender().as_ref() {
            Some(tx) => tx.subscribe(),
            // Stopped: a feed that is closed from the start.
            None => broadcast::channel(1).1,
        };
        Ok(Subscription { backlog, live })
    }

    /// The newest revision seen (for bookmarks).
    pub fn latest(&self) -> i64 {
        self.lock().latest
    }
}
