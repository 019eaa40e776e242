//! Per controller, the work queue's depth and the reconciles that succeeded
//! or failed, for `/metrics` in the Prometheus text format. Fed by the
//! runner, so every queue-driven loop (controllers, the scheduler) reports
//! without extra code; the controller manager serves it.

use crate::WorkQueue;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

#[derive(Default)]
struct Controller {
    queue: Option<WorkQueue<String>>,
    ok: AtomicU64,
    failed: AtomicU64,
}

static CONTROLLERS: LazyLock<Mutex<BTreeMap<&'static str, Arc<Controller>>>> =
    LazyLock::new(Mutex::default);

fn entry(name: &'static str) -> Arc<Controller> {
    CONTROLLERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name)
        .or_default()
        .clone()
}

/// Registers a controller's queue (its depth is reported).
pub fn register(name: &'static str, queue: &WorkQueue<String>) {
    let mut all = CONTROLLERS.lock().unwrap_or_else(|p| p.into_inner());
    let c = all.entry(name).or_default();
    *c = Arc::new(Controller {
        queue: Some(queue.clone()),
        ok: AtomicU64::new(c.ok.load(Ordering::Relaxed)),
        failed: AtomicU64::new(c.failed.load(Ordering::Relaxed)),
    });
}

/// Counts one reconcile of `name`.
pub fn reconciled(name: &'static str, ok: bool) {
    let c = entry(name);
    if ok { &c.ok } else { &c.failed }.fetch_add(1, Ordering::Relaxed);
}

/// The current metrics as Prometheus text.
pub fn render() -> String {
    let all = CONTROLLERS.lock().unwrap_or_else(|p| p.into_inner());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_depth_and_counts() {
        let q: WorkQueue<String> = WorkQueue::new();
        register("unit-test", &q);
        reconciled("unit-test", true);
        reconciled("unit-test", false);
        reconciled("unit-test", true);
        let text = render();
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
}
