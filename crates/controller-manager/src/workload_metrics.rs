//! Metrics of the LeaderWorkerSet and DisaggregatedSet controllers for
//! `/metrics` (Prometheus text, through the `prometheus-client` crate): groups
//! by state, group restarts, rollout progress, DisaggregatedSet roles and
//! rollout steps, and how long reconciles take.
//!
//! ```text
//!   lws_groups{namespace,leaderworkerset,state="Ready|NotReady|Restarting|Failed"}  gauge
//!   lws_group_restarts_total{namespace,leaderworkerset}                              counter
//!   lws_desired_groups / lws_updated_groups / lws_ready_groups{namespace,leaderworkerset}
//!   disaggregatedset_role_groups{namespace,disaggregatedset,role,kind="replicas|ready|updated|target"}
//!   disaggregatedset_rolling_update{namespace,disaggregatedset}    1 while a rollout runs
//!   disaggregatedset_rollout_steps_total{namespace,disaggregatedset,direction="up|down"}
//!   workload_reconcile_duration_seconds{controller}                  histogram
//! ```

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LwsLabels {
    namespace: String,
    leaderworkerset: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    namespace: String,
    leaderworkerset: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SetLabels {
    namespace: String,
    disaggregatedset: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    namespace: String,
    disaggregatedset: String,
    role: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    namespace: String,
    disaggregatedset: String,
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

type Durations = Family<ControllerLabels, Histogram, fn() -> Histogram>;

/// The workload controllers' metrics; owned by the controller manager that
/// runs them (its [`crate::Config`]), cloning shares them.
#[derive(Clone)]
pub struct WorkloadMetrics(Arc<Families>);

struct Families {
    registry: Registry,
    groups: Family<GroupLabels, Gauge>,
    restarts: Family<LwsLabels, Counter>,
    desired: Family<LwsLabels, Gauge>,
    updated: Family<LwsLabels, Gauge>,
    ready: Family<LwsLabels, Gauge>,
    roles: Family<RoleLabels, Gauge>,
    rolling: Family<SetLabels, Gauge>,
    steps: Family<StepLabels, Counter>,
    durations: Durations,
}

fn durations() -> Histogram {
    // 0.5 ms to ~4 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

impl Default for WorkloadMetrics {
    fn default() -> Self {
        WorkloadMetrics(Arc::new(Families::new()))
    }
}

impl std::fmt::Debug for WorkloadMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkloadMetrics")
    }
}

impl Families {
    fn new() -> Families {
        let mut registry = Registry::default();
        let m = Families {
            registry: Registry::default(),
            groups: Family::default(),
            restarts: Family::default(),
            desired: Family::default(),
            updated: Family::default(),
            ready: Family::default(),
            roles: Family::default(),
            rolling: Family::default(),
            steps: Family::default(),
            durations: Family::new_with_constructor(durations as fn() -> Histogram),
        };
        registry.register(
            "lws_groups",
            "Groups of a LeaderWorkerSet by state",
            m.groups.clone(),
        );
        registry.register(
            "lws_group_restarts",
            "Group recreations by the restart policy",
            m.restarts.clone(),
        );
        registry.register(
            "lws_desired_groups",
            "spec.replicas of a LeaderWorkerSet",
            m.desired.clone(),
        );
        registry.register(
            "lws_updated_groups",
            "Groups at the current revision (rollout progress)",
            m.updated.clone(),
        );
        registry.register(
            "lws_ready_groups",
            "Ready groups of a LeaderWorkerSet",
            m.ready.clone(),
        );
        registry.register(
            "disaggregatedset_role_groups",
            "Groups of a DisaggregatedSet role over its slices and revisions",
            m.roles.clone(),
        );
        registry.register(
            "disaggregatedset_rolling_update",
            "1 while a DisaggregatedSet rolls to a new revision",
            m.rolling.clone(),
        );
        registry.register(
            "disaggregatedset_rollout_steps",
            "LWS rescales made by DisaggregatedSet rollouts",
            m.steps.clone(),
        );
        registry.register(
            "workload_reconcile_duration_seconds",
            "How long one reconcile of the LWS and DisaggregatedSet controllers takes",
            m.durations.clone(),
        );
        Families { registry, ..m }
    }
}

fn lws(ns: &str, name: &str) -> LwsLabels {
    LwsLabels {
        namespace: ns.into(),
        leaderworkerset: name.into(),
    }
}

impl WorkloadMetrics {
    /// An LWS's groups by state and its replica counts, after a status computation.
    pub fn lws_status(
        &self,
        ns: &str,
        name: &str,
        states: &[&str],
        desired: i32,
        updated: i32,
        ready: i32,
    ) {
        let m = &*self.0;
        for state in crate::lws::restarts::STATES {
            let n = states.iter().filter(|s| **s == state).count() as i64;
            m.groups
                .get_or_create(&GroupLabels {
                    namespace: ns.into(),
                    leaderworkerset: name.into(),
                    state: state.to_string(),
                })
                .set(n);
        }
        m.desired.get_or_create(&lws(ns, name)).set(desired.into());
        m.updated.get_or_create(&lws(ns, name)).set(updated.into());
        m.ready.get_or_create(&lws(ns, name)).set(ready.into());
    }

    /// One group recreation of an LWS.
    pub fn lws_group_restarted(&self, ns: &str, name: &str) {
        self.0.restarts.get_or_create(&lws(ns, name)).inc();
    }

    /// Forgets a deleted LWS.
    pub fn lws_gone(&self, ns: &str, name: &str) {
        let m = &*self.0;
        for state in crate::lws::restarts::STATES {
            m.groups.remove(&GroupLabels {
                namespace: ns.into(),
                leaderworkerset: name.into(),
                state: state.to_string(),
            });
        }
        for f in [&m.desired, &m.updated, &m.ready] {
            f.remove(&lws(ns, name));
        }
    }

    /// A DisaggregatedSet's roles (replicas, ready, updated, target) and whether it rolls.
    pub fn ds_status(&self, ns: &str, name: &str, roles: &[(String, [i64; 4])], rolling: bool) {
        let m = &*self.0;
        for (role, values) in roles {
            for (kind, v) in ["replicas", "ready", "updated", "target"]
                .iter()
                .zip(values)
            {
                m.roles
                    .get_or_create(&RoleLabels {
                        namespace: ns.into(),
                        disaggregatedset: name.into(),
                        role: role.clone(),
                        kind: kind.to_string(),
                    })
                    .set(*v);
            }
        }
        m.rolling
            .get_or_create(&SetLabels {
                namespace: ns.into(),
                disaggregatedset: name.into(),
            })
            .set(rolling as i64);
    }

    /// One rollout rescale of a DisaggregatedSet (`up`: a new LWS grew).
    pub fn ds_step(&self, ns: &str, name: &str, up: bool) {
        self.0
            .steps
            .get_or_create(&StepLabels {
                namespace: ns.into(),
                disaggregatedset: name.into(),
                direction: if up { "up" } else { "down" }.into(),
            })
            .inc();
    }

    /// Times one reconcile of `controller`.
    pub async fn timed<T>(&self, controller: &str, f: impl std::future::Future<Output = T>) -> T {
        let start = Instant::now();
        let out = f.await;
        self.0
            .durations
            .get_or_create(&ControllerLabels {
                controller: controller.into(),
            })
            .observe(start.elapsed().as_secs_f64());
        out
    }

    /// The metrics in the Prometheus text format (without OpenMetrics' `# EOF`,
    /// as they follow other metrics).
    pub fn render(&self) -> String {
        minik8s_process::metrics::encode(&self.0.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_groups_roles_steps_and_durations() {
        let m = WorkloadMetrics::default();
        m.lws_status("ns", "unit-lws", &["Ready", "Ready", "Failed"], 3, 2, 2);
        m.lws_group_restarted("ns", "unit-lws");
        m.ds_status("ns", "unit-ds", &[("prefill".into(), [4, 3, 2, 4])], true);
        m.ds_step("ns", "unit-ds", true);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(m.timed("unit", async {}));
        let text = m.render();
        for line in [
            "lws_groups{namespace=\"ns\",leaderworkerset=\"unit-lws\",state=\"Ready\"} 2",
            "lws_groups{namespace=\"ns\",leaderworkerset=\"unit-lws\",state=\"Failed\"} 1",
            "lws_groups{namespace=\"ns\",leaderworkerset=\"unit-lws\",state=\"Restarting\"} 0",
            "lws_group_restarts_total{namespace=\"ns\",leaderworkerset=\"unit-lws\"} 1",
            "lws_updated_groups{namespace=\"ns\",leaderworkerset=\"unit-lws\"} 2",
            "disaggregatedset_role_groups{namespace=\"ns\",disaggregatedset=\"unit-ds\",role=\"prefill\",kind=\"ready\"} 3",
            "disaggregatedset_rolling_update{namespace=\"ns\",disaggregatedset=\"unit-ds\"} 1",
            "disaggregatedset_rollout_steps_total{namespace=\"ns\",disaggregatedset=\"unit-ds\",direction=\"up\"} 1",
            "workload_reconcile_duration_seconds_count{controller=\"unit\"} 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!text.contains("# EOF"));
        m.lws_gone("ns", "unit-lws");
        assert!(!m.render().contains("unit-lws\",state"));
    }
}
