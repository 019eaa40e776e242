//! Hollow nodes: the real kubelet on the in-memory runtime
//! ([`crate::runtime::FakeRuntime`]), as kubemark runs it, for scale
//! benchmarks and controller tests. Each node registers (4 cpu, 16Gi, 110
//! pods, label `minik8s.io/hollow=true`), heartbeats, syncs its pods through
//! `pod_actions` and `sync_pod`, probes, reports status and confirms
//! deletions exactly as a real node does; only the containers are make-believe.
//!
//! ```text
//!  one pod watch (all pods) ──by spec.nodeName──▶ hollow-0 kubelet ─┐
//!                                            ├──▶ hollow-1 kubelet ─┼─▶ FakeRuntime each
//!                                            └──▶ ...               ┘
//! ```
//!
//! Many hollow nodes share one process and one pod watch (a watch per node
//! would cost the apiserver a watcher per node).

use crate::runtime::FakeRuntime;
use crate::{Config, Kubelet};
use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use minik8s_client::{Api, Client, Informer, ListParams};
use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct HollowConfig {
    /// Nodes are named `<prefix>-0` ... `<prefix>-<count-1>`.
    pub prefix: String,
    pub count: usize,
    /// How often each node renews its Lease and posts its status.
    pub lease_seconds: u64,
    /// How often each pod is synced without a change (the real kubelet's
    /// `--sync-seconds`; nothing changes under a hollow pod but its probes).
    pub sync_seconds: u64,
    /// Make-believe GPUs each node publishes (`--fake-gpus`).
    pub fake_gpus: usize,
}

/// Hollow node capacity (kubemark's defaults are of the same size).
pub const CPUS: u64 = 4;
pub const MEMORY_BYTES: u64 = 16 << 30;
/// Every hollow node carries this label (`=true`).
pub const LABEL: &str = "minik8s.io/hollow";

/// Running hollow nodes; dropping this stops them (as a killed process would:
/// no goodbye, the heartbeats just stop).
pub struct HollowNodes {
    pub kubelets: Vec<Arc<Kubelet>>,
    /// Each node's runtime, for tests that inject runtime faults.
    pub runtimes: Vec<Arc<FakeRuntime>>,
    tasks: tokio::task::JoinSet<()>,
}

/// The configuration of hollow node `i`: its own pod CIDR (`10.<i/256>.<i%256>.0/24`,
/// outside the controller manager's cluster CIDR) and address, nothing on the host.
pub fn node_config(cfg: &HollowConfig, i: usize) -> Config {
    let prefix = &cfg.prefix;
    let (hi, lo) = ((i / 256) % 256, i % 256);
    Config {
        client_ca_pem: None,
        node_name: format!("{prefix}-{i}"),
        node_ip: format!("10.255.{hi}.{lo}"),
        port: 10250,
        node_labels: vec![(LABEL.into(), "true".into())],
        docker_socket: "memory://".into(),
        network: "hollow".into(),
        pod_cidr: Some(format!("10.{hi}.{lo}.0/24")),
        pause_image: "minik8s/pause:latest".into(),
        root_dir: std::env::temp_dir()
            .join("minik8s-hollow")
            .join(format!("{prefix}-{i}")),
        max_pods: 110,
        sync_seconds: cfg.sync_seconds,
        cluster_dns: Vec::new(),
        cluster_domain: "cluster.local".into(),
        resolv_conf: "/nonexistent/resolv.conf".into(),
        flannel_subnet_env: "/nonexistent/subnet.env".into(),
        pod_network_routes: "none".into(),
        node_status_update_frequency: Duration::from_secs(cfg.lease_seconds.max(1)),
        max_parallel_starts: crate::DEFAULT_PARALLEL_STARTS,
        allowed_unsafe_sysctls: Vec::new(),
        fake_gpus: cfg.fake_gpus,
    }
}

/// Registers `cfg.count` hollow nodes (32 at a time) and starts their
/// kubelets; returns once every node is registered.
pub async fn start(client: &Client, cfg: &HollowConfig) -> anyhow::Result<HollowNodes> {
    let mut informer = Informer::new(Api::<Pod>::all(client), ListParams::default());
    let cache = informer.cache();
    let by_node: Arc<RwLock<HashMap<String, Weak<Kubelet>>>> = Arc::default();
    let routes = by_node.clone();
    informer.on_event(move |ev| {
        let pod = ev.object();
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return;
        };
        let kubelet = routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .and_then(Weak::upgrade);
        if let Some(k) = kubelet {
            k.handle(ev);
        }
    });
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(informer.run());
    type Started = anyhow::Result<(Arc<Kubelet>, Arc<FakeRuntime>)>;
    let started: Vec<Started> = futures::stream::iter(0..cfg.count)
        .map(|i| {
            let config = node_config(cfg, i);
            let runtime = Arc::new(FakeRuntime::new(CPUS, MEMORY_BYTES));
            let (client, cache) = (client.clone(), cache.clone());
            async move {
                let name = config.node_name.clone();
                let kubelet = crate::prepare(client, config, runtime.clone(), cache)
                    .await
                    .with_context(|| format!("starting hollow node {name}"))?;
                Ok((kubelet, runtime))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let (kubelets, runtimes): (Vec<Arc<Kubelet>>, Vec<Arc<FakeRuntime>>) = started
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    {
        let mut routes = by_node.write().unwrap_or_else(|e| e.into_inner());
        for k in &kubelets {
            routes.insert(k.config.node_name.clone(), Arc::downgrade(k));
        }
    }
    // Heartbeats first: a registered node must not look silent while the
    // others are still starting.
    for k in &kubelets {
        tasks.spawn({
            let k = k.clone();
            async move {
                let _ = crate::node::heartbeat(k).await;
            }
        });
    }
    for k in &kubelets {
        k.clone().begin().await?;
        // Pods bound before the route existed: their events went nowhere.
        for pod in k.pods.list() {
            if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&k.config.node_name) {
                k.trigger(&minik8s_client::informer::object_key(&pod.metadata));
            }
        }
    }
    Ok(HollowNodes {
        kubelets,
        runtimes,
        tasks,
    })
}

impl HollowNodes {
    /// Runs until the process ends (or the future is dropped).
    pub async fn run_forever(mut self) {
        while self.tasks.join_next().await.is_some() {}
        std::future::pending::<()>().await
    }
}

/// Starts `cfg.count` hollow nodes and runs them until the future is dropped
/// (a test "kills" hollow nodes by aborting the task running this).
pub async fn run(client: Client, cfg: HollowConfig) -> anyhow::Result<()> {
    let nodes = start(&client, &cfg).await?;
    nodes.run_forever().await;
    Ok(())
}
