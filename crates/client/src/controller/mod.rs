//! The shape every controller (and the scheduler) has, as kube-rs' `Controller`: a [`Reconciler`]
//! converges one object given its key and says what it wants next
//! ([`Action`]); [`Controller`] declares what wakes it (its own kind, the
//! kinds it owns, other kinds through a mapper) and runs the workers.
//!
//! ```text
//!  SharedInformers ─ events ─▶ triggers (for_own / owns / watches) ─ keys ─▶ WorkQueue
//!                                                                               │
//!        ┌──────────── Ok(RequeueAfter(d)): add_after(key, d) ◀────┐            ▼
//!        │             Err(e): add_rate_limited(key) (5 ms … 1000 s)├── reconcile(key)
//!        └──────────── Ok(Done): forget(key) ◀─────────────────────┘
//! ```
//!
//! Requeues are the reconciler's answer, never a side effect of its body, so
//! a reconcile can be tested by calling it and reading the `Action`.

pub mod metrics;
pub use metrics::ControllerMetrics;

use crate::informer::{object_key, Event};
use crate::rest::Resource;
use crate::shared::AlreadyStarted;
use crate::{ClientError, SharedInformers, WorkQueue};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tracing::Instrument;

/// What a reconcile wants next for its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Converged: nothing until a trigger fires again.
    Done,
    /// Look again after this long even if nothing changes (a deadline, a
    /// periodic sync, a state only time will change).
    RequeueAfter(Duration),
}

impl Action {
    /// This action, looking again no later than `at` from now (a deadline,
    /// a backoff, a pod becoming available by itself).
    pub fn no_later_than(self, at: Duration) -> Action {
        match self {
            Action::Done => Action::RequeueAfter(at),
            Action::RequeueAfter(d) => Action::RequeueAfter(d.min(at)),
        }
    }
}

/// One controller's logic: converge the object named by `key`
/// (`namespace/name`, or `name` for cluster-scoped kinds). Errors are retried
/// with per-key exponential backoff.
pub trait Reconciler: Send + Sync + 'static {
    /// The controller's name in logs and `/metrics`.
    const NAME: &'static str;

    /// The component whose loop this is, as its traces name it.
    const COMPONENT: &'static str = "controller-manager";

    fn reconcile(&self, key: &str) -> impl Future<Output = Result<Action, ClientError>> + Send;

    /// The trace the reconcile of `key` belongs to (a `traceparent`, the
    /// object's, from [`crate::traces::context_of`]) while the object is on
    /// its way (a Deployment rolling out); None: nobody records it.
    fn trace_context(&self, _key: &str) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
}

/// A reconciler, its work queue and the triggers that feed it.
pub struct Controller<R> {
    reconciler: Arc<R>,
    queue: WorkQueue<String>,
}

impl<R: Reconciler> Controller<R> {
    pub fn new(reconciler: Arc<R>, queue: WorkQueue<String>) -> Self {
        Controller { reconciler, queue }
    }

    /// The queue, for triggers a reconciler keeps itself (e.g. expectations).
    pub fn queue(&self) -> &WorkQueue<String> {
        &self.queue
    }

    /// Every change of a `K` queues that object's own key.
    pub fn for_own<K>(self, informers: &SharedInformers) -> Result<Self, AlreadyStarted>
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let queue = self.queue.clone();
        informers.on_event::<K>(move |ev| queue.add(object_key(ev.object().metadata())))?;
        Ok(self)
    }

    /// Every change of a `K` queues its controller (the ownerReference with
    /// `controller: true` of kind `owner_kind`), before and after the change.
    pub fn owns<K>(
        self,
        informers: &SharedInformers,
        owner_kind: &'static str,
    ) -> Result<Self, AlreadyStarted>
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let queue = self.queue.clone();
        informers.on_event::<K>(move |ev| {
            let objects: Vec<&K> = match ev {
                Event::Added(o) | Event::Deleted(o) => vec![o],
                Event::Updated { old, new } => vec![old, new],
            };
            for o in objects {
                if let Some(key) = controller_key(o.metadata(), owner_kind) {
                    queue.add(key);
                }
            }
        })?;
        Ok(self)
    }

    /// Every change of a `K` queues the keys `map` gives for it; `map` gets
    /// the reconciler (weakly held: a dropped controller maps nothing).
    pub fn watches<K, F>(self, informers: &SharedInformers, map: F) -> Result<Self, AlreadyStarted>
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
        F: Fn(&R, &Event<K>) -> Vec<String> + Send + Sync + 'static,
    {
        let queue = self.queue.clone();
        let reconciler: Weak<R> = Arc::downgrade(&self.reconciler);
        informers.on_event::<K>(move |ev| {
            if let Some(r) = reconciler.upgrade() {
                for key in map(&r, ev) {
                    queue.add(key);
                }
            }
        })?;
        Ok(self)
    }

    /// Runs `workers` workers until the queue shuts down (start and sync the
    /// informers first), counting reconciles in `metrics`.
    pub async fn run(self, workers: usize, metrics: ControllerMetrics) {
        run(self.reconciler, self.queue, workers, metrics).await
    }
}

/// The runner: `workers` workers draining `queue` with `reconciler` until the
/// queue shuts down. [`Controller::run`] uses it; a loop whose triggers are
/// wired by hand (the scheduler's own informers) calls it directly.
pub async fn run<R: Reconciler>(
    reconciler: Arc<R>,
    queue: WorkQueue<String>,
    workers: usize,
    metrics: ControllerMetrics,
) {
    metrics.register(R::NAME, &queue);
    // Owned by this future: dropping it (a deposed leader) stops every worker.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (queue, reconciler, metrics) = (queue.clone(), reconciler.clone(), metrics.clone());
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                // A span only for a reconcile that is part of a journey.
                let span = match reconciler.trace_context(&key).await {
                    Some(parent) => {
                        let span = tracing::debug_span!(target: minik8s_trace::JOURNEY, "reconcile", controller = R::NAME, component = R::COMPONENT, %key);
                        minik8s_trace::context::follow(&span, Some(&parent));
                        span
                    }
                    None => tracing::Span::none(),
                };
                let result = reconciler.reconcile(&key).instrument(span).await;
                metrics.reconciled(R::NAME, result.is_ok());
                apply(&queue, &key, result);
                queue.done(&key);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// What the runner does with a reconcile's answer.
fn apply(queue: &WorkQueue<String>, key: &str, result: Result<Action, ClientError>) {
    match result {
        Ok(Action::Done) => queue.forget(&key.to_string()),
        Ok(Action::RequeueAfter(after)) => {
            queue.forget(&key.to_string());
            queue.add_after(key.to_string(), after);
        }
        Err(e) => {
            tracing::warn!(%key, error = %e, "reconcile failed; retrying");
            queue.add_rate_limited(key.to_string());
        }
    }
}

/// The controller ownerReference of an object, if any: (uid, kind, name).
pub fn controller_of(meta: &ObjectMeta) -> Option<(String, String, String)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.uid.clone(), o.kind.clone(), o.name.clone()))
}

/// `namespace/name` of the object's controller if it is of kind `kind`.
pub fn controller_key(meta: &ObjectMeta, kind: &str) -> Option<String> {
    let (_, _, name) = controller_of(meta).filter(|(_, k, _)| k == kind)?;
    Some(match &meta.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_action_looks_again_no_later_than_asked() {
        let s = Duration::from_secs;
        assert_eq!(Action::Done.no_later_than(s(5)), Action::RequeueAfter(s(5)));
        assert_eq!(
            Action::RequeueAfter(s(3)).no_later_than(s(5)),
            Action::RequeueAfter(s(3))
        );
        assert_eq!(
            Action::RequeueAfter(s(9)).no_later_than(s(5)),
            Action::RequeueAfter(s(5))
        );
    }

    #[tokio::test]
    async fn the_runner_follows_the_action() {
        let queue = WorkQueue::with_rate_limit(Duration::from_millis(50), Duration::from_secs(1));
        queue.add("a".to_string());
        let key = queue.get().await.unwrap();
        apply(
            &queue,
            &key,
            Ok(Action::RequeueAfter(Duration::from_millis(20))),
        );
        queue.done(&key);
        let again = tokio::time::timeout(Duration::from_secs(1), queue.get())
            .await
            .expect("requeued after 20 ms");
        assert_eq!(again.as_deref(), Some("a"));
        let key = again.unwrap();
        let err = ClientError::Connect("refused".into());
        apply(&queue, &key, Err(err));
        queue.done(&key);
        assert_eq!(queue.failures(&key), 1, "a failure backs off");
        let key = queue.get().await.unwrap();
        apply(&queue, &key, Ok(Action::Done));
        queue.done(&key);
        assert_eq!(queue.failures(&key), 0, "success forgets the backoff");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), queue.get())
                .await
                .is_err(),
            "Done does not come back by itself"
        );
    }

    #[test]
    fn the_controller_key_is_the_controlling_owner_of_that_kind() {
        let meta: ObjectMeta = serde_json::from_value(json!({"name": "p", "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ReplicaSet", "name": "other", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "2", "controller": true}]}))
        .unwrap();
        assert_eq!(
            controller_key(&meta, "ReplicaSet").as_deref(),
            Some("ns/web")
        );
        assert_eq!(controller_key(&meta, "StatefulSet"), None);
    }
}
