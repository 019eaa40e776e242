//! The scheduler's `/metrics`, by Kubernetes' names (its dashboards and the
//! queries of doc/monitoring.md work unchanged).
//!
//! ```text
//!   scheduler_schedule_attempts_total{result,profile}                  counter
//!   scheduler_scheduling_attempt_duration_seconds{result,profile}      histogram
//! ```
//! `result` is `scheduled`, `unschedulable` or `error`, as in Kubernetes;
//! attempts on pods that are gone or not this scheduler's are not counted.

use minik8s_client::controller::ControllerMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    result: &'static str,
    profile: String,
}

/// One scheduler's metrics, owned by whoever made its [`crate::Config`];
/// cloning shares the counts.
#[derive(Clone, Default)]
pub struct Metrics {
    attempts: Arc<Attempts>,
    /// The scheduling loop's queue depth and reconciles (the runner's); the
    /// master shares the controller manager's, so each family is written once.
    pub loops: ControllerMetrics,
}

struct Attempts {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    durations: Family<AttemptLabels, Histogram>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scheduler::Metrics")
    }
}

impl Default for Attempts {
    fn default() -> Self {
        let mut registry = Registry::default();
        let attempts = Family::<AttemptLabels, Counter>::default();
        let durations = Family::<AttemptLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(minik8s_process::metrics::latency_buckets())) as fn() -> Histogram,
        );
        registry.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            attempts.clone(),
        );
        registry.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            durations.clone(),
        );
        Attempts {
            registry,
            attempts,
            durations,
        }
    }
}

impl Metrics {
    /// Fresh attempt counts, the loop counted in `loops` (shared with the
    /// controllers of the same process).
    pub fn with_loops(loops: ControllerMetrics) -> Metrics {
        Metrics {
            attempts: Arc::default(),
            loops,
        }
    }

    /// One attempt of `profile` (the scheduler name) ended with `result`.
    pub fn attempted(&self, profile: &str, result: &'static str, took: Duration) {
        let labels = AttemptLabels {
            result,
            profile: profile.to_string(),
        };
        self.attempts.attempts.get_or_create(&labels).inc();
        self.attempts
            .durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The scheduling attempts alone, in the text format.
    pub fn render_attempts(&self) -> String {
        minik8s_process::metrics::encode(&self.attempts.registry)
    }

    /// Every metric of the scheduler: its attempts and its loop.
    pub fn render(&self) -> String {
        let mut text = self.render_attempts();
        text.push_str(&self.loops.render());
        text
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn attempts_are_counted_and_timed_by_result() {
        let metrics = super::Metrics::default();
        let took = std::time::Duration::from_millis(4);
        metrics.attempted("unit-scheduler", "scheduled", took);
        metrics.attempted("unit-scheduler", "scheduled", took);
        metrics.attempted("unit-scheduler", "unschedulable", took);
        let text = metrics.render();
        assert!(
            text.contains(
                "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"unit-scheduler\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("scheduler_scheduling_attempt_duration_seconds_count{result=\"unschedulable\",profile=\"unit-scheduler\"} 1"),
            "{text}"
        );
        assert!(text.contains("# TYPE workqueue_depth gauge"), "{text}");
    }
}
