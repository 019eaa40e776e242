//! A work queue with client-go's guarantees: a key queued many times is
//! processed once; a key is never handed to two workers at once (a key added
//! while being processed is re-queued when the worker calls [`WorkQueue::done`]);
//! failed keys come back after a per-key exponential delay; delayed adds.
//! A queue made [`WorkQueue::ranked_by`] hands out the highest-ranked key
//! first, oldest first among equals (the scheduler's active queue, ordered
//! by pod priority as Kubernetes' `PrioritySort`).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The rank of a key: a higher rank is handed out first.
pub type Ranker<T> = Arc<dyn Fn(&T) -> i64 + Send + Sync>;

/// A key waiting in a ranked queue: by rank, then by arrival.
struct Ranked<T> {
    rank: i64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Ranked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Ranked<T> {}
impl<T> PartialOrd for Ranked<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Ranked<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // A max-heap: the higher rank wins, then the earlier arrival.
        self.rank
            .cmp(&other.rank)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Keys in the order they are handed out.
enum Waiting<T> {
    Fifo(VecDeque<T>),
    Ranked(BinaryHeap<Ranked<T>>, u64),
}

impl<T> Waiting<T> {
    fn push(&mut self, item: T, rank: i64) {
        match self {
            Waiting::Fifo(q) => q.push_back(item),
            Waiting::Ranked(h, seq) => {
                *seq += 1;
                h.push(Ranked {
                    rank,
                    seq: *seq,
                    item,
                });
            }
        }
    }

    fn pop(&mut self) -> Option<T> {
        match self {
            Waiting::Fifo(q) => q.pop_front(),
            Waiting::Ranked(h, _) => h.pop().map(|r| r.item),
        }
    }

    fn len(&self) -> usize {
        match self {
            Waiting::Fifo(q) => q.len(),
            Waiting::Ranked(h, _) => h.len(),
        }
    }
}

struct Inner<T> {
    queue: Waiting<T>,
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
    ranker: Option<Ranker<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
            notify: self.notify.clone(),
            base_delay: self.base_delay,
            max_delay: self.max_delay,
            ranker: self.ranker.clone(),
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
                queue: Waiting::Fifo(VecDeque::new()),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shutting_down: false,
            })),
            notify: Arc::new(Notify::new()),
            base_delay,
            max_delay,
            ranker: None,
        }
    }

    /// The same queue handing out the key of highest `rank` first (oldest
    /// first among equals). The rank is read when a key is queued, outside
    /// the queue's lock, so `rank` may look keys up in a cache.
    pub fn ranked_by(mut self, rank: impl Fn(&T) -> i64 + Send + Sync + 'static) -> Self {
        let mut q = self.lock();
        let waiting: Vec<T> = std::iter::from_fn(|| q.queue.pop()).collect();
        q.queue = Waiting::Ranked(BinaryHeap::new(), 0);
        for item in waiting {
            q.queue.push(item, 0);
        }
        drop(q);
        self.ranker = Some(Arc::new(rank));
        self
    }

    fn rank(&self, item: &T) -> i64 {
        self.ranker.as_ref().map_or(0, |r| r(item))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, item: T) {
        let rank = self.rank(&item);
        let mut q = self.lock();
        if q.shutting_down || !q.dirty.insert(item.clone()) {
            return;
        }
        if q.processing.contains(&item) {
            return; // re-queued by done()
        }
        q.queue.push(item, rank);
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
                if let Some(item) = q.queue.pop() {
                    q.dirty.remove(&item);
                    q.processing.insert(item.clone());
                    let more = q.queue.len() > 0;
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
        let rank = self.rank(item);
        let mut q = self.lock();
        q.processing.remove(item);
        if q.dirty.contains(item) {
            q.queue.push(item.clone(), rank);
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
    async fn ranked_queue_hands_out_the_highest_rank_first_then_the_oldest() {
        let ranks: HashMap<&str, i64> = [("low", 1), ("high", 100), ("mid", 10), ("mid2", 10)]
            .into_iter()
            .collect();
        let q = WorkQueue::new().ranked_by(move |k: &&str| ranks.get(k).copied().unwrap_or(0));
        for k in ["low", "mid", "high", "mid2", "unranked"] {
            q.add(k);
        }
        let mut order = Vec::new();
        while !q.is_empty() {
            let k = q.get().await.unwrap();
            q.done(&k);
            order.push(k);
        }
        assert_eq!(order, ["high", "mid", "mid2", "low", "unranked"]);
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
