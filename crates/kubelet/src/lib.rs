//! The minik8s kubelet: runs the pods bound to its node on Docker.
//!
//! ```text
//!  apiserver ──watch pods (spec.nodeName=<node>)──▶ one worker per pod ──▶ sync_pod
//!      ▲                                                                     │
//!      └──── pod status, node status, lease ◀──── Docker (labels on every container)
//! ```
//!
//! A pod is a sandbox ("pause") container holding the network namespace and
//! hostname, plus the app containers joined to it. Everything the kubelet
//! knows about running pods is in Docker's container labels, so a restarted
//! kubelet picks up where it left off. The decisions (restart, backoff,
//! phase) are pure functions in [`decide`]; this file is the I/O around them.

pub mod decide;
pub mod dns;
pub mod hollow;
pub mod network;
pub mod node;
pub mod pod;
pub mod probe;
pub mod runtime;
pub mod server;
pub mod stats;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use minik8s_client::informer::{object_key, Event};
use minik8s_client::{Api, Cache, Client, Informer, ListParams};
use runtime::Runtime;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// The node's name.
    #[arg(long, default_value_t = default_hostname())]
    pub node_name: String,
    /// The address other nodes and the apiserver reach this node at.
    #[arg(long, default_value = "127.0.0.1")]
    pub node_ip: String,
    /// Port of the kubelet's own HTTP server (logs, health).
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
    /// Docker's socket.
    #[arg(long, default_value = "unix:///var/run/docker.sock")]
    pub docker_socket: String,
    /// The Docker network pods join.
    #[arg(long, default_value = "minik8s")]
    pub network: String,
    /// This node's pod subnet (e.g. flannel's lease), unless Node.spec.podCIDR
    /// already names one. Without it the controller manager's node IPAM picks one.
    #[arg(long)]
    pub pod_cidr: Option<String>,
    /// Image of the sandbox container that holds a pod's network namespace.
    #[arg(long, default_value = "minik8s/pause:latest")]
    pub pause_image: String,
    /// Where emptyDir volumes live.
    #[arg(long, default_value = "/var/lib/minik8s-kubelet")]
    pub root_dir: PathBuf,
    /// Pods this node takes.
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// How often every pod is synced even without a change.
    #[arg(long, default_value_t = 2)]
    pub sync_seconds: u64,
    /// The cluster DNS server(s) pods with dnsPolicy ClusterFirst use
    /// (kube-proxy's --cluster-dns). Empty: pods get the node's resolv.conf.
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<String>,
    /// The cluster domain pods' search lists and FQDNs end in.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The node's resolver configuration (Default-policy pods get it, and
    /// ClusterFirst pods its search domains).
    #[arg(long, default_value = "/etc/resolv.conf")]
    pub resolv_conf: PathBuf,
    /// flannel's lease file: when present, the pod subnet and MTU come from it
    /// (and flannel routes between the nodes).
    #[arg(long, default_value = "/run/flannel/subnet.env")]
    pub flannel_subnet_env: PathBuf,
    /// Without flannel: `host-gw` routes every other node's podCIDR via its
    /// InternalIP (nodes on one L2 network); `none` leaves routing to someone else.
    #[arg(long, default_value = "host-gw", value_parser = ["host-gw", "none"])]
    pub pod_network_routes: String,
    /// How often the node's Lease is renewed and its status posted (must stay
    /// well under the controller manager's --node-monitor-grace-period).
    #[arg(long, default_value = "10s", value_parser = minik8s_api::meta::parse_duration)]
    pub node_status_update_frequency: Duration,
}

fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .unwrap_or_else(|_| "node".into())
}

/// The kubelet's shared state.
pub struct Kubelet {
    pub config: Config,
    pub client: Client,
    pub runtime: Runtime,
    pub pods: Cache<Pod>,
    workers: Mutex<HashMap<String, mpsc::UnboundedSender<()>>>,
    /// The pod CIDR in use (from the Node object or the flag).
    pub pod_cidr: Mutex<String>,
    /// Probe results per container.
    pub probes: probe::Probes,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Kubelet {
    /// Wakes (or starts) the worker of one pod.
    fn trigger(self: &Arc<Self>, key: &str) {
        let mut workers = lock(&self.workers);
        if let Some(tx) = workers.get(key) {
            if tx.send(()).is_ok() {
                return;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(());
        workers.insert(key.to_string(), tx);
        let me = self.clone();
        let key = key.to_string();
        tokio::spawn(async move { me.pod_worker(key, rx).await });
    }

    /// One pod's loop: sync on every change and every few seconds, until the pod is gone.
    async fn pod_worker(self: Arc<Self>, key: String, mut rx: mpsc::UnboundedReceiver<()>) {
        let every = Duration::from_secs(self.config.sync_seconds.max(1));
        loop {
            tokio::select! {
                msg = rx.recv() => if msg.is_none() { return },
                _ = tokio::time::sleep(every) => {}
            }
            while rx.try_recv().is_ok() {}
            let finished = match self.pods.get(&key) {
                None => true,
                Some(pod) => match self.sync_pod(&pod).await {
                    Ok(done) => done,
                    Err(e) => {
                        tracing::warn!(pod = %key, error = %e, "sync_pod failed");
                        false
                    }
                },
            };
            if finished {
                let mut workers = lock(&self.workers);
                // A trigger that arrived meanwhile keeps the worker alive.
                if rx.is_empty() {
                    workers.remove(&key);
                    return;
                }
            }
        }
    }

    /// Removes containers of pods that no longer exist (deleted while we were down,
    /// force-deleted, or recreated under the same name).
    pub async fn remove_orphans(&self) -> anyhow::Result<()> {
        if !self.pods.has_synced() {
            return Ok(());
        }
        let live: std::collections::HashSet<String> = self
            .pods
            .list()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let containers = self.runtime.list(None).await?;
        self.probes
            .retain(&containers.iter().map(|c| c.id.clone()).collect());
        for c in containers {
            if !live.contains(&c.pod_uid) {
                tracing::info!(pod = %format!("{}/{}", c.pod_namespace, c.pod_name), container = %c.name, "removing orphaned container");
                self.runtime.stop(&c.id, 0).await?;
                self.runtime.remove(&c.id).await?;
                let _ = std::fs::remove_dir_all(self.config.root_dir.join("pods").join(&c.pod_uid));
            }
        }
        Ok(())
    }
}

/// flannel's lease, if the file exists; a file that exists but does not
/// parse is an error (a node on the wrong subnet is worse than no node).
fn read_flannel_lease(path: &std::path::Path) -> anyhow::Result<Option<network::FlannelLease>> {
    match std::fs::read_to_string(path) {
        Ok(text) => network::parse_subnet_env(&text)
            .map(Some)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("reading flannel's lease {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Runs the kubelet until the process ends.
pub async fn run(client: Client, config: Config) -> anyhow::Result<()> {
    let kubelet = start(client, config).await?;
    let server = server::serve(kubelet.clone());
    tokio::select! {
        r = server => r,
        r = node::heartbeat(kubelet.clone()) => r,
    }
}

/// Registers the node, starts the pod informer and workers; returns the kubelet.
/// (The HTTP server and heartbeats are started by [`run`], or by tests.)
pub async fn start(client: Client, config: Config) -> anyhow::Result<Arc<Kubelet>> {
    let runtime = Runtime::connect(&config.docker_socket, &config.network, &config.node_name)?;
    let version = runtime
        .version()
        .await
        .with_context(|| format!("talking to Docker at {}", config.docker_socket))?;
    std::fs::create_dir_all(config.root_dir.join("pods"))
        .with_context(|| format!("creating {}", config.root_dir.display()))?;
    let mut config = config;
    let flannel = read_flannel_lease(&config.flannel_subnet_env)?;
    if let Some(lease) = &flannel {
        tracing::info!(subnet = %lease.subnet, mtu = ?lease.mtu, file = %config.flannel_subnet_env.display(), "pod subnet from flannel");
        config.pod_cidr = Some(lease.subnet.clone());
    }
    let registered = node::register(&client, &config, &version).await?;
    let pod_cidr = match (&flannel, registered) {
        // flannel's lease decides where pods live; a different podCIDR on the
        // Node (node IPAM got there first) can only be reported.
        (Some(lease), Some(cidr)) if cidr != lease.subnet => {
            tracing::warn!(node_pod_cidr = %cidr, flannel = %lease.subnet,
                "Node.spec.podCIDR differs from flannel's lease; pods use flannel's subnet (run the controller manager with --allocate-node-cidrs=false on flannel clusters)");
            lease.subnet.clone()
        }
        (Some(lease), _) => lease.subnet.clone(),
        (None, Some(cidr)) => cidr,
        (None, None) => node::wait_for_pod_cidr(&client, &config.node_name).await?,
    };
    let mtu = flannel.as_ref().and_then(|l| l.mtu);
    let flannel_masquerades = flannel.as_ref().is_some_and(|l| l.ipmasq);
    runtime
        .ensure_network(&pod_cidr, mtu, !flannel_masquerades)
        .await?;
    if flannel.is_none() && config.pod_network_routes == "host-gw" {
        let (client, name, cidr) = (client.clone(), config.node_name.clone(), pod_cidr.clone());
        let own_ip = config.node_ip.parse().ok();
        tokio::spawn(async move {
            let resync = Duration::from_secs(30);
            if let Err(e) = network::run_host_gw(client, name, own_ip, cidr, resync).await {
                tracing::error!(error = %e, "host-gw pod routes stopped");
            }
        });
    }
    let lp = ListParams::default().fields(&format!("spec.nodeName={}", config.node_name));
    let mut informer = Informer::new(Api::<Pod>::all(&client), lp);
    let kubelet = Arc::new(Kubelet {
        config,
        client,
        runtime,
        pods: informer.cache(),
        workers: Mutex::default(),
        pod_cidr: Mutex::new(pod_cidr),
        probes: probe::Probes::default(),
    });
    let weak = Arc::downgrade(&kubelet);
    informer.on_event(move |ev| {
        let Some(k) = weak.upgrade() else { return };
        match ev {
            Event::Added(p) | Event::Updated { new: p, .. } => k.trigger(&object_key(&p.metadata)),
            // Gone from the API: the orphan sweep removes its containers.
            Event::Deleted(_) => {
                let k = k.clone();
                tokio::spawn(async move {
                    if let Err(e) = k.remove_orphans().await {
                        tracing::warn!(error = %e, "removing orphans");
                    }
                });
            }
        }
    });
    tokio::spawn(informer.run());
    kubelet.pods.wait_synced().await;
    kubelet.remove_orphans().await?;
    let k = kubelet.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            if let Err(e) = k.remove_orphans().await {
                tracing::warn!(error = %e, "removing orphans");
            }
        }
    });
    tracing::info!(node = %kubelet.config.node_name, docker = %version, "kubelet running");
    Ok(kubelet)
}
