//! `/metrics` in the Prometheus text format: the runner's per-controller
//! queue depth and reconcile counts ([`ControllerMetrics`]), then the
//! workload controllers' own ([`WorkloadMetrics`]).
//!
//! They are the controller manager's, not the process': whoever makes a
//! [`crate::Config`] holds its [`Metrics`] and can render them (the master
//! serves them on the apiserver's `/metrics`; tests read them).

use crate::workload_metrics::WorkloadMetrics;
use minik8s_client::controller::ControllerMetrics;

/// Every metric of one controller manager. Cloning shares the counts.
#[derive(Clone, Default, Debug)]
pub struct Metrics {
    /// Queue depths and reconcile counts of every loop.
    pub controllers: ControllerMetrics,
    /// The LeaderWorkerSet and DisaggregatedSet controllers' own.
    pub workloads: WorkloadMetrics,
}

impl Metrics {
    /// Every metric of the controller manager, in the text format.
    pub fn render(&self) -> String {
        let mut out = self.controllers.render();
        out.push_str(&self.workloads.render());
        out
    }
}

/// Serves `/metrics` (and `/healthz`) on `addr` until the process ends.
pub async fn serve(addr: &str, metrics: Metrics) -> anyhow::Result<()> {
    minik8s_process::metrics::serve(addr, move || metrics.render()).await?;
    Ok(())
}
