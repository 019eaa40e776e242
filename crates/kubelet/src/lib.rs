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
//! knows about running pods is in the runtime's container labels, so a
//! restarted kubelet picks up where it left off. The decisions are pure
//! functions: [`actions::pod_actions`] (what a sync does) on top of
//! [`decide`] (restart, backoff, status, phase). The runtime is a trait
//! ([`runtime::ContainerRuntime`]): Docker on real nodes, memory on hollow
//! nodes ([`hollow`]), which run this same kubelet.

pub mod actions;
pub mod auth;
pub mod bootstrap;
pub mod claims;
pub mod config_data;
pub mod credentials;
pub mod decide;
pub mod devices;
pub mod dns;
pub mod env;
pub mod eviction;
pub mod exec;
mod exec_session;
mod exec_spdy;
pub mod hollow;
mod images;
pub mod lifecycle;
pub mod metrics;
pub mod network;
pub mod nfs_mounts;
pub mod node;
pub mod pod;
pub mod pod_cgroup;
pub mod pod_host;
mod pod_setup;
pub mod portforward;
pub mod probe;
pub mod profiles;
pub mod resize;
pub mod resource_fields;
pub mod runtime;
pub mod security;
pub mod server;
pub mod service_env;
pub mod spdy;
pub mod stats;
pub mod status;
pub mod tmpfs;
pub mod tokens;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use minik8s_client::informer::{object_key, Event};
use minik8s_client::{Api, Cache, Client, Informer, ListParams, TRACE_POD_START};
use runtime::{ContainerRuntime, DockerRuntime};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::Instrument;

/// This component's client-side rate limit by default (`--kube-api-qps`,
/// `--kube-api-burst`).
pub const API_RATE_LIMIT: (f32, u32) = (50.0, 100);

/// How many pods may be creating containers at once by default
/// (`--max-parallel-starts`): what this machine's dockerd does fastest (see
/// `pod-startup-bench --burst`, doc/benchmarks.md).
pub const DEFAULT_PARALLEL_STARTS: usize = 4;

#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// The cluster CA (from the kubeconfig): with it the kubelet's port is
    /// TLS, and only users the apiserver vouches for get in (see `auth.rs`).
    #[arg(skip)]
    pub client_ca_pem: Option<String>,
    /// The node's name.
    #[arg(long, default_value_t = minik8s_api::net::default_node_name())]
    pub node_name: String,
    /// The address other nodes, pods and the apiserver reach this node at
    /// (its InternalIP). Default: the source address of the default route,
    /// so a NodePort reached by the node's address works from pods too.
    #[arg(long, default_value = "")]
    pub node_ip: String,
    /// Port of the kubelet's own HTTP server (logs, health).
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
    /// Labels the Node registers with (`key=value,...`), besides the
    /// well-known hostname, os and arch labels.
    #[arg(long, value_delimiter = ',', value_parser = parse_label)]
    pub node_labels: Vec<(String, String)>,
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
    /// How many pods may be creating their containers at once: a burst of
    /// pods starts in parallel up to this bound, the rest wait their turn
    /// (dockerd serialises much of a container's creation, so asking it for
    /// more at once only makes each one slower).
    #[arg(long, default_value_t = DEFAULT_PARALLEL_STARTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub max_parallel_starts: usize,
    /// Sysctls beyond Kubernetes' safe set that pods may set here: names,
    /// or prefixes ending in `*` (`kernel.msg*`). A pod asking for any other
    /// is refused (Failed, reason SysctlForbidden).
    #[arg(long, value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Publish this many make-believe GPUs through Dynamic Resource
    /// Allocation (driver `gpu.minik8s.io`), given to the containers that
    /// claim them as environment (`GPU_DEVICE_<k>`, `NVIDIA_VISIBLE_DEVICES`).
    #[arg(long, default_value_t = 0)]
    pub fake_gpus: usize,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    use minik8s_api::names::{label_value_error, qualified_name_error};
    if let Some(e) = qualified_name_error(k) {
        return Err(format!("label key {k:?}: {e}"));
    }
    if let Some(e) = label_value_error(v) {
        return Err(format!("label value {v:?}: {e}"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The kubelet's shared state.
pub struct Kubelet {
    pub config: Config,
    pub client: Client,
    /// The pods' trace contexts, as the apiserver keeps them.
    contexts: minik8s_client::traces::Contexts,
    /// Events about pods (Pulled, Started, Killing, Unhealthy ...).
    pub recorder: minik8s_client::events::Recorder,
    pub runtime: Arc<dyn ContainerRuntime>,
    pub pods: Cache<Pod>,
    workers: Mutex<HashMap<String, mpsc::UnboundedSender<()>>>,
    /// The pod CIDR in use (from the Node object or the flag).
    pub pod_cidr: Mutex<String>,
    /// Probe results per container.
    pub probes: probe::Probes,
    /// Termination messages of exited containers.
    pub messages: lifecycle::Messages,
    /// Uids of pods this kubelet reported Succeeded or Failed: nothing of
    /// them runs again, even before the pod cache shows their final phase
    /// (the real kubelet's pod workers remember it the same way).
    pub(crate) finished: Mutex<HashSet<String>>,
    /// Every Service, for the containers' Service variables (set by
    /// [`start`]; hollow nodes have none).
    pub services: std::sync::OnceLock<Cache<k8s_openapi::api::core::v1::Service>>,
    /// Failed image pulls, for the pull back-off.
    pub pull_backoff: images::PullBackoff,
    /// The pods' ServiceAccount tokens, renewed before they expire.
    pub tokens: tokens::TokenManager,
    /// The apiserver's recent answers about who may use this port.
    pub decisions: auth::Decisions,
    /// NFS exports mounted for the pods.
    pub nfs: nfs_mounts::NfsMounts,
    /// One permit per pod creating containers (`--max-parallel-starts`);
    /// fair, so the pods of a burst start in the order they came.
    pub(crate) start_slots: Arc<tokio::sync::Semaphore>,
    /// The CPU and memory each pod was allocated (in-place resize).
    pub allocations: resize::Allocations,
    /// When each pod's local storage was last measured (eviction).
    pub measured: eviction::Measured,
    /// The DRA drivers running on this node.
    pub drivers: Vec<Arc<dyn devices::DeviceDriver>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Kubelet {
    /// Wakes (or starts) the worker of one pod.
    pub(crate) fn trigger(self: &Arc<Self>, key: &str) {
        let mut workers = lock(&self.workers);
        if let Some(tx) = workers.get(key) {
            if tx.send(()).is_ok() {
                return;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(());
        workers.insert(key.to_string(), tx);
        let me = Arc::downgrade(self);
        let key = key.to_string();
        tokio::spawn(Self::pod_worker(me, key, rx));
    }

    /// One pod's loop: sync on every change and every few seconds, until the
    /// pod is gone or the kubelet is (hollow nodes stop by being dropped).
    async fn pod_worker(me: Weak<Self>, key: String, mut rx: mpsc::UnboundedReceiver<()>) {
        // The uid of the pod last synced, to forget its tokens when it is gone.
        let mut uid = None;
        loop {
            let Some(every) = me.upgrade().map(|k| k.config.sync_seconds.max(1)) else {
                return;
            };
            tokio::select! {
                msg = rx.recv() => if msg.is_none() { return },
                _ = tokio::time::sleep(Duration::from_secs(every)) => {}
            }
            while rx.try_recv().is_ok() {}
            let Some(me) = me.upgrade() else { return };
            // A shared cache (hollow nodes) also holds other nodes' pods, and
            // a name can come back on another node.
            let mine = me.pods.get(&key).filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                    == Some(me.config.node_name.as_str())
            });
            if let Some(p) = &mine {
                uid.clone_from(&p.metadata.uid);
            }
            let next = match mine {
                None => pod::Next::Gone,
                // Boxed: a sleeping worker then holds a pointer, not the whole
                // sync's state machine (tens of KiB, times every pod).
                Some(pod) => match Box::pin(me.traced_sync(&key, &pod)).await {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::warn!(pod = %key, error = %e, "sync_pod failed");
                        pod::Next::Wait
                    }
                },
            };
            if next == pod::Next::Now {
                me.trigger(&key);
            }
            let finished = next == pod::Next::Gone;
            if finished {
                let mut workers = lock(&me.workers);
                // A trigger that arrived meanwhile keeps the worker alive.
                if rx.is_empty() {
                    workers.remove(&key);
                    drop(workers);
                    if let Some(uid) = &uid {
                        me.tokens.forget_pod(uid);
                        me.allocations.forget(uid);
                        me.measured.forget(uid);
                        lock(&me.finished).remove(uid);
                    }
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
        let containers = self.runtime.list(None).await?;
        let ids = containers.iter().map(|c| c.id.clone()).collect();
        self.probes.retain(&ids);
        self.messages.retain(&ids);
        // One cache lookup per container: the cache may hold every pod of the
        // cluster (hollow nodes share one).
        let live = |c: &runtime::ContainerInfo| {
            let key = format!("{}/{}", c.pod_namespace, c.pod_name);
            self.pods
                .get(&key)
                .is_some_and(|p| p.metadata.uid.as_deref() == Some(c.pod_uid.as_str()))
        };
        let orphans: Vec<_> = containers.iter().filter(|c| !live(c)).cloned().collect();
        for c in &orphans {
            tracing::info!(pod = %format!("{}/{}", c.pod_namespace, c.pod_name), container = %c.name, "removing orphaned container");
        }
        self.kill_containers(&orphans, 0).await?;
        for uid in orphans.iter().map(|c| &c.pod_uid).collect::<HashSet<_>>() {
            crate::tmpfs::remove_pod_dir(&self.config.root_dir.join("pods").join(uid));
            self.runtime.remove_pod_cgroup(uid).await;
        }
        // NFS exports whose pods are all gone. (Without any, the pass over the
        // cache is skipped: hollow nodes share one holding every pod.)
        if self.nfs.is_empty() {
            return Ok(());
        }
        let live: HashSet<String> = self
            .pods
            .list()
            .iter()
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                    == Some(self.config.node_name.as_str())
            })
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        self.nfs.release(&live);
        Ok(())
    }

    /// Feeds one pod event to the pod workers.
    pub fn handle(self: &Arc<Self>, ev: &Event<Pod>) {
        match ev {
            Event::Added(p) | Event::Updated { new: p, .. } => {
                let key = object_key(&p.metadata);
                tracing::debug!(target: TRACE_POD_START, pod = %key, "pod event");
                self.trigger(&key)
            }
            // Gone from the API: the orphan sweep removes its containers.
            Event::Deleted(_) => {
                let k = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = k.remove_orphans().await {
                        tracing::warn!(error = %e, "removing orphans");
                    }
                });
            }
        }
    }
}

/// What the kubelet can check alone (the flannel lease file), before it
/// asks the apiserver anything: a broken file is named at once, not after
/// a minute of waiting for an apiserver that does not answer.
pub fn check_local_config(config: &Config) -> anyhow::Result<()> {
    read_flannel_lease(&config.flannel_subnet_env).map(|_| ())
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
/// The `--node-ip` to advertise: the one given, else the default route's
/// source address; loopback only when the machine has no route at all (then
/// no other machine or pod can reach the node by it, and the log says so).
pub fn advertised_ip(given: &str) -> String {
    let chosen = match given {
        "" => minik8s_api::net::default_route_source().map(|ip| ip.to_string()),
        ip => Some(ip.to_string()),
    };
    let ip = chosen.unwrap_or_else(|| "127.0.0.1".into());
    if ip
        .parse::<std::net::Ipv4Addr>()
        .is_ok_and(|a| a.is_loopback())
    {
        tracing::warn!(node_ip = %ip, "the node advertises a loopback address: only this machine reaches it (pass --node-ip)");
    }
    ip
}

/// The span of one sync of a pod: part of the pod's journey (its trace,
/// the context the apiserver keeps for it since its create) while the pod
/// starts; later syncs (the periodic ones) belong to no trace, so nobody
/// records them.
fn sync_span(key: &str, parent: Option<String>) -> tracing::Span {
    match parent {
        Some(parent) => {
            let span = tracing::debug_span!(target: minik8s_trace::JOURNEY, "sync_pod", pod = %key);
            minik8s_trace::context::follow(&span, Some(&parent));
            span
        }
        None => tracing::debug_span!(target: TRACE_POD_START, "sync_pod", pod = %key),
    }
}

impl Kubelet {
    /// One sync of a pod: a step of its journey while it starts (the
    /// context is the apiserver's to give; afterwards nobody records it).
    async fn traced_sync(&self, key: &str, pod: &Pod) -> anyhow::Result<pod::Next> {
        let parent = match (starting(pod), pod.metadata.uid.as_deref()) {
            (true, Some(uid)) => self.contexts.of(&self.client, uid).await,
            _ => None,
        };
        self.sync_pod(pod).instrument(sync_span(key, parent)).await
    }
}

/// Whether a pod is still on its way to running: not being deleted,
/// pending, or running but not yet ready.
fn starting(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => true,
        Some("Running") => !status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        Some(_) => false,
    }
}

pub async fn run(client: Client, mut config: Config) -> anyhow::Result<()> {
    config.node_ip = advertised_ip(&config.node_ip);
    let kubelet = start(client.with_user_agent("kubelet"), config).await?;
    let server = server::serve(kubelet.clone());
    tokio::select! {
        r = server => r,
        r = node::heartbeat(kubelet.clone()) => r,
    }
}

/// Registers the node, starts the pod informer and workers on Docker;
/// returns the kubelet. (The HTTP server and heartbeats are started by
/// [`run`], or by tests.)
pub async fn start(client: Client, config: Config) -> anyhow::Result<Arc<Kubelet>> {
    let runtime =
        DockerRuntime::connect(&config.docker_socket, &config.network, &config.node_name)?;
    let lp = ListParams::default().fields(&format!("spec.nodeName={}", config.node_name));
    let mut informer = Informer::new(Api::<Pod>::all(&client), lp);
    let kubelet = prepare(client, config, Arc::new(runtime), informer.cache()).await?;
    let weak = Arc::downgrade(&kubelet);
    informer.on_event(move |ev| {
        if let Some(k) = weak.upgrade() {
            k.handle(ev)
        }
    });
    tokio::spawn(informer.run());
    let services = Informer::new(
        Api::<k8s_openapi::api::core::v1::Service>::all(&kubelet.client),
        ListParams::default(),
    );
    let _ = kubelet.services.set(services.cache());
    tokio::spawn(services.run());
    kubelet.clone().begin().await?;
    tokio::spawn(watch_exits(Arc::downgrade(&kubelet)));
    Ok(kubelet)
}

/// Syncs a pod as soon as one of its containers exits (an init container
/// done, a crash), instead of at its next periodic sync; reconnects to the
/// runtime when its stream ends. Ends with the kubelet.
async fn watch_exits(kubelet: Weak<Kubelet>) {
    use futures::StreamExt;
    loop {
        let Some(mut exits) = kubelet.upgrade().map(|k| k.runtime.exits()) else {
            return;
        };
        while let Some(item) = exits.next().await {
            let Some(k) = kubelet.upgrade() else { return };
            match item {
                Ok((namespace, name)) => k.trigger(&format!("{namespace}/{name}")),
                Err(e) => {
                    tracing::warn!(error = %e, "watching container exits; reconnecting");
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Everything before pods: the runtime answers, the node is registered, the
/// pod network exists. `pods` is the cache this kubelet reads its pods from
/// (its own watch, or one shared by hollow nodes); whoever feeds it calls
/// [`Kubelet::handle`] for each event, then [`Kubelet::begin`].
pub async fn prepare(
    client: Client,
    config: Config,
    runtime: Arc<dyn ContainerRuntime>,
    pods: Cache<Pod>,
) -> anyhow::Result<Arc<Kubelet>> {
    let version = runtime.version().await.with_context(|| {
        format!(
            "talking to the container runtime at {}",
            config.docker_socket
        )
    })?;
    std::fs::create_dir_all(config.root_dir.join("pods"))
        .with_context(|| format!("creating {}", config.root_dir.display()))?;
    let mut config = config;
    let flannel = read_flannel_lease(&config.flannel_subnet_env)?;
    if let Some(lease) = &flannel {
        tracing::info!(subnet = %lease.subnet, mtu = ?lease.mtu, file = %config.flannel_subnet_env.display(), "pod subnet from flannel");
        config.pod_cidr = Some(lease.subnet.clone());
    }
    let registered = node::register(&client, &config, runtime.as_ref(), &version).await?;
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
    tracing::info!(node = %config.node_name, runtime = %format!("{}://{version}", runtime.scheme()), "kubelet registered");
    let max_parallel_starts = config.max_parallel_starts.max(1);
    let drivers = devices::drivers(&config);
    Ok(Arc::new(Kubelet {
        contexts: Default::default(),
        config,
        recorder: minik8s_client::events::Recorder::new(client.clone(), "kubelet"),
        client,
        runtime,
        pods,
        workers: Mutex::default(),
        pod_cidr: Mutex::new(pod_cidr),
        probes: probe::Probes::default(),
        messages: lifecycle::Messages::default(),
        finished: Mutex::default(),
        services: std::sync::OnceLock::new(),
        pull_backoff: images::PullBackoff::default(),
        tokens: Default::default(),
        decisions: Default::default(),
        nfs: Default::default(),
        start_slots: Arc::new(tokio::sync::Semaphore::new(max_parallel_starts)),
        allocations: resize::Allocations::default(),
        measured: eviction::Measured::default(),
        drivers,
    }))
}

impl Kubelet {
    /// Once the pod cache has synced: removes what belongs to no pod, then
    /// sweeps every 10 s (the task ends with the kubelet).
    pub async fn begin(self: Arc<Self>) -> anyhow::Result<()> {
        self.pods.wait_synced().await;
        // Not fatal: a container Docker will not remove now (still being
        // removed, its daemon restarting) is tried again by the sweep below;
        // a kubelet that exits for it leaves its node NotReady.
        if let Err(e) = self.remove_orphans().await {
            tracing::warn!(error = %e, "removing orphans at start");
        }
        // Not fatal either: a node without its slices runs every pod but
        // those claiming its devices, and the next start publishes them.
        if let Err(e) = self.publish_resource_slices().await {
            tracing::warn!(error = %e, "publishing resource slices");
        }
        let weak = Arc::downgrade(&self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let Some(k) = weak.upgrade() else { return };
                if let Err(e) = k.remove_orphans().await {
                    tracing::warn!(error = %e, "removing orphans");
                }
            }
        });
        tracing::info!(node = %self.config.node_name, "kubelet running");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_node_ip_is_the_given_one_or_the_default_routes_source() {
        assert_eq!(super::advertised_ip("192.168.56.11"), "192.168.56.11");
        let auto = super::advertised_ip("");
        match minik8s_api::net::default_route_source() {
            Some(src) => assert_eq!(auto, src.to_string()),
            None => assert_eq!(auto, "127.0.0.1"),
        }
    }
}
