//! The scheduler's `/metrics`, by Kubernetes' names (its dashboards and the
//! queries of doc/monitoring.md work unchanged).
//!
//! ```text
//!   scheduler_schedule_attempts_total{result,profile}                  counter
//!   scheduler_scheduling_attempt_duration_seconds{result,profile}      histogram
//! ```
//! `result` is `scheduled`, `unschedulable` or `error`, as in Kubernetes;
//! attempts on pods that are gone or not this scheduler's are not counted.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::LazyLock;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    result: &'static str,
    profile: String,
}

struct Metrics {
    registry: Registry,
    attempts: Family<AttemptLabels, Counter>,
    durations: Family<AttemptLabels, Histogram>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
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
    Metrics {
        registry,
        attempts,
        durations,
    }
});

/// One attempt of `profile` (the scheduler name) ended with `result`.
pub fn attempted(profile: &str, result: &'static str, took: Duration) {
    let labels = AttemptLabels {
        result,
        profile: profile.to_string(),
    };
    METRICS.attempts.get_or_create(&labels).inc();
    METRICS
        .durations
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
}

/// Every metric of the scheduler, in the text format.
pub fn render() -> String {
    minik8s_process::metrics::encode(&METRICS.registry)
}

#[cfg(test)]
mod tests {
    #[test]
    fn attempts_are_counted_and_timed_by_result() {
        let took = std::time::Duration::from_millis(4);
        super::attempted("unit-scheduler", "scheduled", took);
        super::attempted("unit-scheduler", "scheduled", took);
        super::attempted("unit-scheduler", "unschedulable", took);
        let text = super::render();
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
    }
}
