//! kube-proxy's `/metrics` (Kubernetes' names, so its dashboards and
//! queries work): how long applying the rules takes and when they last were.
//!
//! ```text
//!   kubeproxy_sync_proxy_rules_duration_seconds        histogram
//!   kubeproxy_sync_proxy_rules_last_timestamp_seconds  gauge (Unix time of the last sync)
//!   kubeproxy_sync_proxy_rules_errors_total            counter (minik8s: syncs that failed)
//! ```

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// One proxier's sync metrics, owned by whoever made its
/// [`crate::proxier::Config`]; cloning shares them.
#[derive(Clone, Default)]
pub struct SyncMetrics(Arc<Families>);

struct Families {
    registry: Registry,
    duration: Histogram,
    last: Gauge<f64, AtomicU64>,
    errors: Counter,
}

impl std::fmt::Debug for SyncMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncMetrics")
    }
}

impl Default for Families {
    fn default() -> Self {
        let mut registry = Registry::default();
        let duration = Histogram::new(minik8s_process::metrics::latency_buckets());
        let last = Gauge::<f64, AtomicU64>::default();
        let errors = Counter::default();
        registry.register(
            "kubeproxy_sync_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds",
            duration.clone(),
        );
        registry.register(
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
            "The last time proxy rules were successfully synced",
            last.clone(),
        );
        registry.register(
            "kubeproxy_sync_proxy_rules_errors",
            "Syncs of the proxy rules that failed (and were retried)",
            errors.clone(),
        );
        Families {
            registry,
            duration,
            last,
            errors,
        }
    }
}

impl SyncMetrics {
    /// One sync of the rules took `took`; `ok` says whether it succeeded.
    pub fn synced(&self, took: Duration, ok: bool) {
        self.0.duration.observe(took.as_secs_f64());
        if ok {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            self.0.last.set(now.as_secs_f64());
        } else {
            self.0.errors.inc();
        }
    }

    /// Every metric of kube-proxy, in the text format.
    pub fn render(&self) -> String {
        minik8s_process::metrics::encode(&self.0.registry)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sync_is_timed_and_stamped() {
        let metrics = super::SyncMetrics::default();
        metrics.synced(Duration::from_millis(3), true);
        metrics.synced(Duration::from_millis(5), false);
        let text = metrics.render();
        assert!(
            text.contains("kubeproxy_sync_proxy_rules_duration_seconds_count 2"),
            "{text}"
        );
        assert!(
            text.contains("kubeproxy_sync_proxy_rules_errors_total 1"),
            "{text}"
        );
        let stamp: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("kubeproxy_sync_proxy_rules_last_timestamp_seconds "))
            .expect("the last sync's time")
            .parse()
            .unwrap();
        assert!(stamp > 1.7e9, "{text}");
    }
    use std::time::Duration;
}
