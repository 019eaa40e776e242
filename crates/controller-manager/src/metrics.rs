//! `/metrics` in the Prometheus text format: the runner's per-controller
//! queue depth and reconcile counts (`minik8s_client::controller::metrics`),
//! then the workload controllers' own (`crate::workload_metrics`).

/// Every metric of the controller manager.
pub fn render() -> String {
    let mut out = minik8s_client::controller::metrics::render();
    out.push_str(&crate::workload_metrics::render());
    out
}

/// Serves `/metrics` (and `/healthz`) on `addr` until the process ends.
pub async fn serve(addr: &str) -> anyhow::Result<()> {
    minik8s_process::metrics::serve(addr, render).await?;
    Ok(())
}
