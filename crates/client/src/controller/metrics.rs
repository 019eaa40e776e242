//! Per controller, the work queue's depth and the reconciles that succeeded
//! or failed, for `/metrics` in the Prometheus text format. Fed by the
//! runner, so every queue-driven loop (controllers, the scheduler) reports
//! without extra code.
//!
//! The counts belong to whoever runs the loops: a controller manager (or a
//! scheduler) makes one [`ControllerMetrics`], hands it to the runner of each
//! of its loops and renders it on its `/metrics`; two components in one
//! process (the master) share one, so the text has each family once.

use crate::WorkQueue;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Loop {
    queue: Option<WorkQueue<String>>,
    ok: AtomicU64,
    failed: AtomicU64,
}

/// The loops of one component (or of one process), by name. Cloning shares
/// the counts.
#[derive(Clone, Default)]
pub struct ControllerMetrics {
    loops: Arc<Mutex<BTreeMap<&'static str, Arc<Loop>>>>,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.loops().keys()).finish()
    }
}

impl ControllerMetrics {
    fn loops(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Arc<Loop>>> {
        self.loops.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, name: &'static str) -> Arc<Loop> {
        self.loops().entry(name).or_default().clone()
    }

    /// Registers a controller's queue (its depth is reported). Counts made
    /// before (a loop restarted by a new leader term) are kept.
    pub fn register(&self, name: &'static str, queue: &WorkQueue<String>) {
        let mut all = self.loops();
        let c = all.entry(name).or_default();
        *c = Arc::new(Loop {
            queue: Some(queue.clone()),
            ok: AtomicU64::new(c.ok.load(Ordering::Relaxed)),
            failed: AtomicU64::new(c.failed.load(Ordering::Relaxed)),
        });
    }

    /// Counts one reconcile of `name`.
    pub fn reconciled(&self, name: &'static str, ok: bool) {
        let c = self.entry(name);
        if ok { &c.ok } else { &c.failed }.fetch_add(1, Ordering::Relaxed);
    }

    /// The current metrics as Prometheus text.
    pub fn render(&self) -> String {
        let all = self.loops();
        let mut out = String::new();
        out.push_str("# HELP workqueue_depth Current depth of the controller's work queue.\n# TYPE workqueue_depth gauge\n");
        for (name, c) in all.iter() {
            let depth = c.queue.as_ref().map(WorkQueue::len).unwrap_or(0);
            out.push_str(&format!("workqueue_depth{{name=\"{name}\"}} {depth}\n"));
        }
        out.push_str("# HELP controller_reconciles_total Reconciles by controller and result.\n# TYPE controller_reconciles_total counter\n");
        for (name, c) in all.iter() {
            out.push_str(&format!(
                "controller_reconciles_total{{controller=\"{name}\",result=\"success\"}} {}\n",
                c.ok.load(Ordering::Relaxed)
            ));
            out.push_str(&format!(
                "controller_reconciles_total{{controller=\"{name}\",result=\"error\"}} {}\n",
                c.failed.load(Ordering::Relaxed)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_depth_and_counts() {
        let metrics = ControllerMetrics::default();
        let q: WorkQueue<String> = WorkQueue::new();
        metrics.register("unit-test", &q);
        metrics.reconciled("unit-test", true);
        metrics.reconciled("unit-test", false);
        metrics.reconciled("unit-test", true);
        let text = metrics.render();
        assert!(
            text.contains("workqueue_depth{name=\"unit-test\"} 0"),
            "{text}"
        );
        assert!(
            text.contains(
                "controller_reconciles_total{controller=\"unit-test\",result=\"success\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "controller_reconciles_total{controller=\"unit-test\",result=\"error\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn two_owners_count_apart() {
        let (a, b) = (ControllerMetrics::default(), ControllerMetrics::default());
        a.reconciled("loop", true);
        assert!(a.render().contains("result=\"success\"} 1"));
        assert!(!b.render().contains("loop"), "{}", b.render());
    }
}
