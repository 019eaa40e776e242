//! A work queue with client-go's guarantees: a key queued many times is
//! processed once; a key is never handed to two workers at once (a key added
//! while being processed is re-queued when the worker calls [`WorkQueue::done`]);
//! failed keys come back after a per-key exponential delay; delayed adds.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

struct Inner<T> {
    queue: VecDeque<T>,
    /// Keys waiting to be processed (queued, or added again while processing).
    dirty: HashSet<T>,
    processing: HashSet<T>,
    failures: HashMap<T, u32>,
    shutting_down: bool,
}

pub struct WorkQueue<T> {
    inner: Arc<Mutex<Inner<T>>>,
    notify: Arc<Notify>,
    base_delay: Duration,
    max_delay: Duration,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
            notify: self.notify.clone(),
            base_delay: self.base_delay,
            max_delay: self.max_delay,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> WorkQueue<T> {
    /// A queue with client-go's default rate limit: 5 ms doubling to 1000 s.
    pub fn new() -> Self {
        Self::with_rate_limit(Duration::from_millis(5), Duration::from_secs(1000))
    }

    pub fn with_rate_limit(base_delay: Duration, max_delay: Duration) -> Self {
        WorkQueue {
            inner: Arc::new(Mutex::new(Inner {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shutting_down: false,
            })),
            notify: Arc::new(Notify::new()),
            base_delay,
            max_delay,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, item: T) {
        let mut q = self.lock();
        if q.shutting_down || !q.dirty.insert(item.clone()) {
            return;
        }
        if q.processing.contains(&item) {
            return; // re-queued by done()
        }
        q.queue.push_back(item);
        drop(q);
        self.notify.notify_one();
    }

    /// Adds `item` after `delay`.
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(item);
        });
    }

    /// Re-adds a failed item after its per-item backoff (which grows with each failure).
    pub fn add_rate_limited(&self, item: T) {
        let delay = {
            let mut q = self.lock();
            let n = q.failures.entry(item.clone()).or_insert(0);
            let d = self
                .base_delay
                .saturating_mul(2u32.saturating_pow(*n))
                .min(self.max_delay);
            *n += 1;
            d
        };
        self.add_after(item, delay);
    }

    /// How many times `item` failed since it was last forgotten.
    pub fn failures(&self, item: &T) -> u32 {
        self.lock().failures.get(item).copied().unwrap_or(0)
    }

    /// Resets the item's backoff (after a success).
    pub fn forget(&self, item: &T) {
        self.lock().failures.remove(item);
    }

    /// Waits for the next item; None once the queue is shut down and drained.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            {
                let mut q = self.lock();
                if let Some(item) = q.queue.pop_front() {
                    q.dirty.remove(&item);
                    q.processing.insert(item.clone());
                    let more = !q.queue.is_empty();
                    drop(q);
                    if more {
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
                if q.shutting_down {
                    drop(q);
                    self.notify.notify_one();
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Marks `item` processed; if it was added meanwhile it is queued again.
    pub fn done(&self, item: &T) {
        let mut q = self.lock();
        q.processing.remove(item);
        if q.dirty.contains(item) {
            q.queue.push_back(item.clone());
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Items waiting (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn shutdown(&self) {
        self.lock().shutting_down = true;
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn deduplicates() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn never_hands_one_key_to_two_workers() {
        let q = WorkQueue::new();
        q.add("k");
        let first = q.get().await.unwrap();
        q.add("k"); // added while processing
        assert!(q.is_empty(), "not handed out again before done()");
        let got_second = tokio::time::timeout(Duration::from_millis(50), q.get()).await;
        assert!(got_second.is_err(), "a second worker must wait");
        q.done(&first);
        assert_eq!(q.get().await, Some("k"), "re-queued after done()");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_workers_never_overlap_on_a_key() {
        let q: WorkQueue<u32> = WorkQueue::new();
        let busy: Arc<Mutex<HashSet<u32>>> = Arc::default();
        let processed = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (q, busy, processed) = (q.clone(), busy.clone(), processed.clone());
            workers.push(tokio::spawn(async move {
                while let Some(k) = q.get().await {
                    assert!(
                        busy.lock().unwrap().insert(k),
                        "key {k} on two workers at once"
                    );
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    busy.lock().unwrap().remove(&k);
                    processed.fetch_add(1, Ordering::SeqCst);
                    q.done(&k);
                }
            }));
        }
        for i in 0..200 {
            q.add(i % 5);
            if i % 20 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        q.shutdown();
        for w in workers {
            w.await.unwrap();
        }
        assert!(processed.load(Ordering::SeqCst) >= 5);
    }

    #[tokio::test]
    async fn rate_limited_requeue_backs_off_and_forget_resets() {
        let q = WorkQueue::with_rate_limit(Duration::from_millis(20), Duration::from_secs(1));
        let start = tokio::time::Instant::now();
        q.add_rate_limited("x");
        assert_eq!(q.get().await, Some("x"));
        q.done(&"x");
        let first = start.elapsed();
        q.add_rate_limited("x");
        assert_eq!(q.get().await, Some("x"));
        q.done(&"x");
        let second = start.elapsed() - first;
        assert!(first >= Duration::from_millis(20), "{first:?}");
        assert!(second >= Duration::from_millis(40), "{second:?}");
        assert_eq!(q.failures(&"x"), 2);
        q.forget(&"x");
        assert_eq!(q.failures(&"x"), 0);
    }

    #[tokio::test]
    async fn delayed_add() {
        let q = WorkQueue::new();
        q.add_after("later", Duration::from_millis(30));
        assert!(tokio::time::timeout(Duration::from_millis(10), q.get())
            .await
            .is_err());
        assert_eq!(
            tokio::time::timeout(Duration::from_millis(200), q.get())
                .await
                .unwrap(),
            Some("later")
        );
    }
}
