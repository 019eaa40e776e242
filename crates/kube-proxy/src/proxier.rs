//! The kube-proxy loop, one for both backends: informers on Services and
//! EndpointSlices wake one sync task, which asks its [`Backend`] to bring the
//! kernel in line with the caches (iptables: chains through
//! `iptables-restore --noflush`, `iptables/`; ipvs: virtual servers over
//! netlink, `ipvs/`).
//!
//! ```text
//!   Service / EndpointSlice events ──▶ notify ──▶ (wait min_sync) ──▶ backend.sync_rules()
//!                                                                    │ desired (pure) vs
//!                                                                    │ last applied (or the kernel's)
//!   every resync: backend.resync_from_kernel() ◀─────────────────────┘ difference only
//! ```
//!
//! What was applied last is kept in memory, so a sync with no change touches
//! nothing; every `resync` period the kernel's state is read again, so rules
//! someone else removed come back.

pub use crate::iptables::tools::Iptables;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::Instrument;

/// What programs the Service VIPs: one implementation per kernel mechanism.
pub trait Backend: Send {
    /// The backend's name in logs.
    const NAME: &'static str;

    /// One sync: desired state from the caches, the difference against what
    /// was applied last (or what the kernel holds), applied. Returns whether
    /// anything was written. On error the backend forgets what it applied.
    fn sync_rules(&mut self) -> impl std::future::Future<Output = anyhow::Result<bool>> + Send;

    /// Forget what was applied: the next sync reads the kernel's state.
    fn resync_from_kernel(&mut self);
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Which backend programs the VIPs.
    pub mode: crate::Mode,
    /// The node's own addresses: NodePorts listen on them (ipvs mode; the
    /// iptables rules match any local address instead).
    pub node_ips: Vec<std::net::Ipv4Addr>,
    /// This node's name (`--hostname-override`), as its kubelet registered
    /// it: endpoints on it are the local ones of the node-local traffic policies.
    pub node_name: String,
    /// The pod network; sources outside it are masqueraded on their way to a VIP.
    pub cluster_cidr: Option<String>,
    /// VIPs this node answers itself (the cluster DNS): never refused for
    /// lack of endpoints.
    pub served_locally: Vec<String>,
    /// Changes arriving within this window are applied together.
    pub min_sync: Duration,
    /// How often the kernel's rules are read back and repaired.
    pub resync: Duration,
    pub iptables: Iptables,
    /// Where syncs are timed and counted; the maker of the Config keeps a
    /// clone to serve them on `/metrics`.
    pub metrics: crate::metrics::SyncMetrics,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: crate::Mode::Iptables,
            node_ips: Vec::new(),
            node_name: String::new(),
            cluster_cidr: Some("10.244.0.0/16".into()),
            served_locally: Vec::new(),
            min_sync: Duration::from_millis(100),
            resync: Duration::from_secs(30),
            iptables: Iptables::default(),
            metrics: Default::default(),
        }
    }
}

/// The EndpointSlice changes a sync is about to apply (by uid), for its
/// span: the apiserver keeps each slice's trace context, that of the write
/// that last changed it (in the journey of the pod that became an
/// endpoint), and gives it to whoever asks.
#[derive(Clone, Default)]
pub struct TraceContexts {
    noted: Arc<std::sync::Mutex<Vec<String>>>,
    client: Option<minik8s_client::Client>,
}

/// At most this many changes are told per sync (a burst of a thousand
/// endpoints is one sync).
const TOLD_PER_SYNC: usize = 16;

impl TraceContexts {
    /// Contexts asked of the apiserver through `client`.
    pub fn new(client: minik8s_client::Client) -> TraceContexts {
        TraceContexts {
            noted: Arc::default(),
            client: Some(client),
        }
    }

    /// A change of the slice with this uid, for the next sync.
    pub fn note(&self, uid: &str) {
        let mut v = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < TOLD_PER_SYNC && !v.iter().any(|t| t == uid) {
            v.push(uid.to_string());
        }
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.noted.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The span of the next sync: in the trace of the first change it
    /// applies, with a mark in each other's; none without a traced change.
    async fn sync_span(&self) -> tracing::Span {
        let mut contexts = Vec::new();
        for uid in self.take() {
            let Some(client) = &self.client else { break };
            if let Some(tp) = minik8s_client::traces::context_of(client, &uid).await {
                contexts.push(tp);
            }
        }
        let step = || tracing::debug_span!(target: minik8s_trace::JOURNEY, parent: None, "sync proxy rules");
        let Some((first, others)) = contexts.split_first() else {
            return tracing::Span::none();
        };
        for other in others {
            let mark = step();
            minik8s_trace::context::follow(&mark, Some(other));
            mark.in_scope(
                || tracing::debug!(target: minik8s_trace::JOURNEY, "applied with another change"),
            );
        }
        let span = step();
        minik8s_trace::context::follow(&span, Some(first));
        span
    }
}

/// Keeps the kernel in sync until the process ends (the informers behind
/// `backend` must be started and synced).
pub async fn run<B: Backend>(
    mut backend: B,
    wake: Arc<Notify>,
    cfg: &Config,
    changes: TraceContexts,
) {
    let (min_sync, resync) = (cfg.min_sync, cfg.resync);
    tracing::info!(
        backend = B::NAME,
        "kube-proxy caches synced; applying rules"
    );
    let mut last_full = tokio::time::Instant::now();
    // The first sync applies everything there is, no one change.
    let _ = changes.take();
    loop {
        let started = std::time::Instant::now();
        let span = changes.sync_span().await;
        let synced = backend.sync_rules().instrument(span.clone()).await;
        if let Ok(wrote) = &synced {
            span.in_scope(|| tracing::debug!(target: minik8s_trace::JOURNEY, backend = B::NAME, wrote = *wrote, "rules synced"));
        }
        cfg.metrics.synced(started.elapsed(), synced.is_ok());
        match synced {
            Ok(true) => tracing::debug!(backend = B::NAME, "rules updated"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(backend = B::NAME, error = %format!("{e:#}"), "sync_rules failed; retrying");
                backend.resync_from_kernel();
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        let until_full = resync.saturating_sub(last_full.elapsed());
        if tokio::time::timeout(until_full, wake.notified())
            .await
            .is_err()
        {
            // Someone may have changed our rules: read the kernel's state again.
            backend.resync_from_kernel();
            last_full = tokio::time::Instant::now();
        } else {
            // Batch the burst of events that usually follows one change.
            tokio::time::sleep(min_sync).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_tells_each_change_once_and_a_bounded_number() {
        let changes = TraceContexts::default();
        let tp = |i: usize| format!("uid-{i}");
        changes.note(&tp(1));
        changes.note(&tp(1));
        for i in 2..40 {
            changes.note(&tp(i));
        }
        let taken = changes.take();
        assert_eq!(taken.len(), TOLD_PER_SYNC);
        assert_eq!(taken[0], tp(1));
        assert!(changes.take().is_empty(), "taken by the sync");
    }
}
