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
use crate::stored::decode_object;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// One change, shared by all watchers. Kept as bytes, not decoded: a decoded
/// object takes several times its JSON in memory, and most watchers only
/// copy the JSON out; the few with selectors decode what they filter on.
#[derive(Debug, Clone)]
pub struct CacheEvent {
    pub kind: EventKind,
    pub revision: i64,
    /// The object's namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// The object after the change as the API serves it, resourceVersion
    /// stamped (for deletes: the last state, at the deletion's revision).
    json: bytes::Bytes,
    /// The stored object before the change and its revision; `None` on a
    /// Put means the object was created.
    prev: Option<(bytes::Bytes, i64)>,
    /// The bytes this event holds (what the ring's byte budget counts).
    size: usize,
}

impl CacheEvent {
    /// The object's JSON, serialized once for all watchers that want plain JSON.
    pub fn object_json(&self) -> &bytes::Bytes {
        &self.json
    }

    /// The object, decoded for this caller.
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or_default()
    }

    /// Whether the change created the object.
    pub fn is_create(&self) -> bool {
        self.prev.is_none()
    }

    /// The object before the change, decoded (None on a create).
    pub fn prev_object(&self) -> Option<Value> {
        let (value, revision) = self.prev.as_ref()?;
        decode_object(value, *revision)
    }
}

struct Inner {
    ring: VecDeque<Arc<CacheEvent>>,
    capacity: usize,
    /// Stored bytes of the events in the ring, and the most it may hold.
    bytes: usize,
    max_bytes: usize,
    /// Watches may start from any revision >= this one.
    oldest_servable: i64,
    /// The newest revision the cache has seen (or started at).
    latest: i64,
}

/// Events the live feed keeps for watchers that have not read them yet.
const LIVE_FEED: usize = 1024;
/// Stored bytes a resource's ring keeps at most (besides its event count):
/// decoded objects take several times their JSON in memory, so a ring of
/// large objects (pods with their status) is bounded by size, not count.
pub const MAX_RING_BYTES: usize = 1 << 20;

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

/// `metadata.namespace` of an object's JSON ("" when it has none), read
/// from `metadata` alone: the rest of the object is not even scanned.
fn namespace_of(json: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Metadata<'a> {
        #[serde(borrow)]
        namespace: Option<std::borrow::Cow<'a, str>>,
    }
    let Some((start, end)) = crate::stored::metadata_span(json) else {
        return String::new();
    };
    serde_json::from_slice::<Metadata>(&json[start..end])
        .ok()
        .and_then(|m| m.namespace)
        .map(|ns| ns.into_owned())
        .unwrap_or_default()
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
        Self::start_bounded(store, prefix, start_revision, capacity, MAX_RING_BYTES)
    }

    /// As [`WatchCache::start`], keeping at most `max_bytes` of events.
    pub fn start_bounded(
        store: Arc<dyn Store>,
        prefix: String,
        start_revision: i64,
        capacity: usize,
        max_bytes: usize,
    ) -> Arc<WatchCache> {
        // The live feed holds (Arcs to) its last LIVE_FEED events whoever reads
        // them; a watcher further behind is closed and resumes from the ring.
        let (tx, _) = broadcast::channel(LIVE_FEED);
        let cache = Arc::new(WatchCache {
            inner: Mutex::new(Inner {
                ring: VecDeque::new(),
                capacity,
                bytes: 0,
                max_bytes,
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
                    inner.bytes = 0;
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
        let value = match ev.kind {
            EventKind::Put => &ev.kv.value,
            EventKind::Delete => match &ev.prev {
                Some(p) => &p.value,
                None => return,
            },
        };
        // The object as served: resourceVersion stamped without decoding
        // the whole object (every write of the cluster passes here).
        let mut json = Vec::with_capacity(value.len() + 32);
        if !crate::stored::write_stamped(&mut json, value, ev.revision) {
            let Some(object) = decode_object(value, ev.revision) else {
                return;
            };
            json = serde_json::to_vec(&object).unwrap_or_default();
        }
        let namespace = namespace_of(&json);
        let json = bytes::Bytes::from(json);
        let prev = ev.prev.map(|p| (p.value, p.mod_revision));
        let size = json.len() + prev.as_ref().map_or(0, |(v, _)| v.len());
        let ce = Arc::new(CacheEvent {
            kind: ev.kind,
            revision: ev.revision,
            namespace,
            json,
            prev,
            size,
        });
        let mut inner = self.lock();
        inner.latest = ev.revision;
        inner.bytes += size;
        inner.ring.push_back(ce.clone());
        // The newest event always stays: a watcher one event behind can resume.
        while inner.ring.len() > 1
            && (inner.ring.len() > inner.capacity || inner.bytes > inner.max_bytes)
        {
            let Some(old) = inner.ring.pop_front() else {
                break;
            };
            inner.bytes -= old.size;
            inner.oldest_servable = old.revision;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;

    #[test]
    fn the_namespace_is_read_without_decoding_the_object() {
        let pod = br#"{"kind":"Pod","metadata":{"name":"a","namespace":"team\u0041"},"spec":{"x":[1,{"namespace":"no"}]}}"#;
        assert_eq!(namespace_of(pod), "teamA");
        assert_eq!(
            namespace_of(br#"{"kind":"Node","metadata":{"name":"n"}}"#),
            ""
        );
        assert_eq!(namespace_of(br#"{"metadata":{"namespace":null}}"#), "");
        assert_eq!(namespace_of(b"not json"), "");
    }

    /// Large objects fill the ring's byte budget long before its event count:
    /// older events leave, and resuming from them is 410 (the client relists).
    #[tokio::test]
    async fn the_ring_is_bounded_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let start = store.current_revision().await.unwrap();
        let cache = WatchCache::start(store.clone(), "/big/".into(), start, 10_000);
        let big = format!(
            r#"{{"metadata":{{"name":"x"}},"pad":"{}"}}"#,
            "a".repeat(100 << 10)
        );
        let mut last = 0;
        for i in 0..30 {
            last = store
                .create(&format!("/big/{i}"), bytes::Bytes::from(big.clone()))
                .await
                .unwrap();
        }
        for _ in 0..100 {
            if cache.latest() == last {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(cache.latest(), last);
        let inner = cache.lock();
        assert!(inner.bytes <= MAX_RING_BYTES, "{} bytes kept", inner.bytes);
        assert!(inner.ring.len() <= 10, "{} events kept", inner.ring.len());
        drop(inner);
        assert!(
            cache.subscribe(start).is_err(),
            "the oldest events are gone"
        );
        assert!(cache.subscribe(last - 2).is_ok());
    }
}
