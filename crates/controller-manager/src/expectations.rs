//! Creates and deletes a controller has asked for but not yet seen through
//! its informer (Kubernetes' ControllerExpectations): until they show up (or
//! a timeout passes), the controller does not act on its stale cache again,
//! so a slow watch never causes double creates or deletes.

use crate::lock;
use k8s_openapi::api::core::v1::Pod;
use minik8s_client::controller::Action;
use minik8s_client::informer::Event;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long unobserved creates/deletes hold a key back (Kubernetes: 5 min).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// How soon a controller waiting on its expectations looks again, even if
/// the events it waits for never come (an expectation expires after TIMEOUT).
pub const RECHECK: Duration = Duration::from_secs(1);

/// The reconcile's answer: done when settled, else look again after [`RECHECK`].
pub fn action(settled: bool) -> Action {
    if settled {
        Action::Done
    } else {
        Action::RequeueAfter(RECHECK)
    }
}

/// `action`, and a wake-up no later than `wake` (when a pod becomes
/// available by itself, after minReadySeconds, and the status must say so).
pub fn action_or_wake(settled: bool, wake: Option<std::time::Duration>) -> Action {
    // A little after the moment, so the pod is available by then.
    let wake = wake.map(|d| d + std::time::Duration::from_millis(10));
    match wake {
        Some(d) => action(settled).no_later_than(d),
        None => action(settled),
    }
}

#[derive(Debug, Clone, Copy)]
struct Expectation {
    adds: i64,
    dels: i64,
    deadline: Instant,
}

/// Expectations by object key.
#[derive(Debug, Default)]
pub struct Expectations(Mutex<HashMap<String, Expectation>>);

impl Expectations {
    /// About to create `adds` and delete `dels` objects for `key`.
    pub fn expect(&self, key: &str, adds: i64, dels: i64) {
        let e = Expectation {
            adds,
            dels,
            deadline: Instant::now() + TIMEOUT,
        };
        lock(&self.0).insert(key.to_string(), e);
    }

    /// The informer showed `add` creations and `del` deletions (or a write
    /// that failed will never show).
    pub fn observed(&self, key: &str, add: i64, del: i64) {
        if let Some(e) = lock(&self.0).get_mut(key) {
            e.adds -= add;
            e.dels -= del;
        }
    }

    /// Everything expected was seen, or waited for long enough.
    pub fn satisfied(&self, key: &str) -> bool {
        match lock(&self.0).get(key) {
            None => true,
            Some(e) => (e.adds <= 0 && e.dels <= 0) || Instant::now() > e.deadline,
        }
    }

    pub fn forget(&self, key: &str) {
        lock(&self.0).remove(key);
    }

    /// The controller keys a pod event concerns (through `owner`, the key of
    /// the pod's controller), counting creations and deletions as observed:
    /// a pod added, or one that starts terminating or disappears unannounced.
    pub fn pod_event(
        &self,
        ev: &Event<Pod>,
        owner: impl Fn(&Pod) -> Option<String>,
    ) -> Vec<String> {
        match ev {
            Event::Added(p) => owner(p)
                .inspect(|k| self.observed(k, 1, 0))
                .into_iter()
                .collect(),
            Event::Updated { old, new } => {
                let keys: BTreeSet<String> =
                    [owner(old), owner(new)].into_iter().flatten().collect();
                if old.metadata.deletion_timestamp.is_none()
                    && new.metadata.deletion_timestamp.is_some()
                {
                    keys.iter().for_each(|k| self.observed(k, 0, 1));
                }
                keys.into_iter().collect()
            }
            Event::Deleted(p) => owner(p)
                .inspect(|k| {
                    if p.metadata.deletion_timestamp.is_none() {
                        self.observed(k, 0, 1)
                    }
                })
                .into_iter()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn satisfied_once_everything_is_seen() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/a"));
        e.expect("ns/a", 2, 1);
        e.observed("ns/a", 1, 0);
        assert!(!e.satisfied("ns/a"));
        e.observed("ns/a", 1, 1);
        assert!(e.satisfied("ns/a"));
        e.expect("ns/a", 1, 0);
        e.forget("ns/a");
        assert!(e.satisfied("ns/a"));
    }
}
