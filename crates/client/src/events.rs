//! Recording Events (`kubectl describe` shows them): what a component saw or
//! did to an object. Best effort, as client-go's recorder: a failed write is
//! logged, never an error for the caller.
//!
//! A component records through its [`Recorder`] (client-go's
//! EventRecorder). Like client-go's EventCorrelator, repeats do not pile up:
//!
//! ```text
//!  record(pod web-1, FailedScheduling, "0/3 nodes are available ...")
//!    ├─ spam filter: per (component, object, type, reason, message) a token
//!    │   bucket of 25, refilled one per 5 minutes; an empty bucket drops it
//!    ├─ seen before (same object, type, reason, message)?
//!    │   yes → PATCH that Event: count + 1, lastTimestamp = now
//!    └─  no → POST a new Event <object>.<hex time>, count 1
//! ```
//!
//! The apiserver deletes Events an hour (`--event-ttl`) after their last
//! change, so a long-stuck object keeps one Event with a growing count.

use crate::rest::Client;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The object an Event is about.
pub struct Involved<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub meta: &'a ObjectMeta,
}

/// client-go's defaults: a burst of 25 events per object and reason, then one per 5 minutes.
const SPAM_BURST: f64 = 25.0;
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Distinct events remembered for counting repeats (client-go's LRU size).
const CACHE_SIZE: usize = 4096;

/// A token bucket.
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.updated).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        self.tokens = (self.tokens + refill).min(SPAM_BURST);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What the recorder remembers of an Event it wrote.
#[derive(Clone)]
struct Seen {
    name: String,
    count: i64,
}

/// What to do with one event.
#[derive(Debug, PartialEq)]
enum Decision {
    Drop,
    Create { name: String },
    Bump { name: String, count: i64 },
}

/// The correlator's memory: bounded LRU-ish maps (oldest entry evicted first).
#[derive(Default)]
struct Correlator {
    buckets: HashMap<String, Bucket>,
    seen: HashMap<String, Seen>,
    order: VecDeque<String>,
}

impl Correlator {
    fn decide(
        &mut self,
        spam_key: String,
        key: String,
        fresh_name: String,
        now: Instant,
    ) -> Decision {
        let bucket = self.buckets.entry(spam_key).or_insert(Bucket {
            tokens: SPAM_BURST,
            updated: now,
        });
        if !bucket.take(now) {
            return Decision::Drop;
        }
        if let Some(seen) = self.seen.get_mut(&key) {
            seen.count += 1;
            return Decision::Bump {
                name: seen.name.clone(),
                count: seen.count,
            };
        }
        self.remember(key, fresh_name.clone(), 1);
        Decision::Create { name: fresh_name }
    }

    fn remember(&mut self, key: String, name: String, count: i64) {
        if self
            .seen
            .insert(key.clone(), Seen { name, count })
            .is_none()
        {
            self.order.push_back(key);
        }
        while self.order.len() > CACHE_SIZE {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        // At most CACHE_SIZE buckets, as client-go's LRU of spam filters:
        // when over, the least recently used go down to half (a forgotten
        // bucket is only a full one again), so a sweep comes once every
        // CACHE_SIZE / 2 new objects, not on every event of a busy burst.
        if self.buckets.len() > CACHE_SIZE {
            let mut by_use: Vec<(Instant, String)> = self
                .buckets
                .iter()
                .map(|(k, b)| (b.updated, k.clone()))
                .collect();
            by_use.sort_unstable();
            let excess = self.buckets.len() - CACHE_SIZE / 2;
            for (_, key) in by_use.into_iter().take(excess) {
                self.buckets.remove(&key);
            }
        }
    }
}

/// An Event's type: what `kubectl get events` shows in TYPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened (Scheduled, Pulled, SuccessfulCreate).
    Normal,
    /// Something the user should look at (FailedScheduling, BackOff).
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One component's recorder (client-go's EventRecorder): Events from
/// `component`, with its own correlator, so repeats are counted and spam
/// dropped per component as client-go does per broadcaster. Clones share it.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    component: Arc<str>,
    correlator: Arc<Mutex<Correlator>>,
}

impl Recorder {
    pub fn new(client: Client, component: impl Into<Arc<str>>) -> Recorder {
        Recorder {
            client,
            component: component.into(),
            correlator: Arc::default(),
        }
    }

    fn correlator(&self) -> std::sync::MutexGuard<'_, Correlator> {
        self.correlator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an Event about `obj`, a typed object.
    pub async fn event<K>(&self, obj: &K, type_: EventType, reason: &str, message: &str)
    where
        K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let about = Involved {
            api_version: K::API_VERSION,
            kind: K::KIND,
            meta: obj.metadata(),
        };
        self.record(about, type_, reason, message).await;
    }

    /// Records one Event about `about`.
    pub async fn record(&self, about: Involved<'_>, type_: EventType, reason: &str, message: &str) {
        let client = &self.client;
        let component = &*self.component;
        let type_ = type_.as_str();
        let ns = about.meta.namespace.as_deref().unwrap_or("default");
        let name = about.meta.name.as_deref().unwrap_or("");
        let uid = about.meta.uid.as_deref().unwrap_or("");
        let now = now_rfc3339();
        // Kubernetes names events <object>.<unique hex suffix>.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // client-go's spam key: the source, the object, type, reason and message.
        let key = [
            client.base_url(),
            component,
            about.kind,
            ns,
            name,
            uid,
            type_,
            reason,
            message,
        ]
        .join("\u{1}");
        let decision = self.correlator().decide(
            key.clone(),
            key.clone(),
            format!("{name}.{nanos:x}"),
            Instant::now(),
        );
        let api = client.dynamic(registry::of::<Event>(), Some(ns));
        let create = |event_name: String| {
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": event_name, "namespace": ns},
                "involvedObject": {"apiVersion": about.api_version, "kind": about.kind, "namespace": ns, "name": name,
                                   "uid": about.meta.uid, "resourceVersion": about.meta.resource_version},
                "reason": reason, "message": message, "type": type_, "source": {"component": component},
                "reportingComponent": component, "reportingInstance": component,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1})
        };
        let result = match decision {
            Decision::Drop => {
                tracing::debug!(%reason, object = %name, "event dropped by the spam filter");
                return;
            }
            Decision::Create { name } => api.create(&create(name)).await.map(|_| ()),
            Decision::Bump {
                name: event_name,
                count,
            } => {
                let patch = json!({"count": count, "lastTimestamp": now, "message": message});
                match api
                    .patch(&event_name, None, "application/merge-patch+json", &patch)
                    .await
                {
                    Ok(_) => Ok(()),
                    // It expired or was deleted: start over with a new Event.
                    Err(e) if e.is_not_found() => {
                        let fresh = format!("{name}.{nanos:x}");
                        self.correlator().remember(key, fresh.clone(), 1);
                        api.create(&create(fresh)).await.map(|_| ())
                    }
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = result {
            tracing::debug!(%reason, error = %e, "recording event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_counted_and_spam_is_dropped() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let d = c.decide("s".into(), "s|msg".into(), "pod.1".into(), t0);
        assert_eq!(
            d,
            Decision::Create {
                name: "pod.1".into()
            }
        );
        let d = c.decide("s".into(), "s|msg".into(), "pod.2".into(), t0);
        assert_eq!(
            d,
            Decision::Bump {
                name: "pod.1".into(),
                count: 2
            }
        );
        // Another message about the same object: a new Event, same bucket.
        let d = c.decide("s".into(), "s|other".into(), "pod.3".into(), t0);
        assert_eq!(
            d,
            Decision::Create {
                name: "pod.3".into()
            }
        );
        for _ in 3..25 {
            assert_ne!(
                c.decide("s".into(), "s|msg".into(), "x".into(), t0),
                Decision::Drop
            );
        }
        assert_eq!(
            c.decide("s".into(), "s|msg".into(), "x".into(), t0),
            Decision::Drop
        );
        // Another object has its own bucket; time refills this one.
        assert_ne!(
            c.decide("t".into(), "t|msg".into(), "y".into(), t0),
            Decision::Drop
        );
        let later = t0 + SPAM_REFILL;
        assert!(matches!(
            c.decide("s".into(), "s|msg".into(), "x".into(), later),
            Decision::Bump { count: 25, .. }
        ));
    }

    /// Many objects at once (a burst of 10,000 pods, or a ReplicaSet scaled
    /// up and down for hours): the buckets stay bounded, and the most
    /// recently used ones are the ones kept.
    #[test]
    fn buckets_stay_bounded_and_keep_the_recent_ones() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        for i in 0..CACHE_SIZE * 5 {
            let now = t0 + Duration::from_millis(i as u64);
            let d = c.decide(format!("o{i}"), format!("o{i}|m"), format!("e{i}"), now);
            assert!(matches!(d, Decision::Create { .. }));
            assert!(c.buckets.len() <= CACHE_SIZE, "bounded at {i}");
        }
        let newest = format!("o{}", CACHE_SIZE * 5 - 1);
        assert!(c.buckets.contains_key(&newest), "the newest is kept");
        assert!(!c.buckets.contains_key("o0"), "the oldest is forgotten");
    }
}
