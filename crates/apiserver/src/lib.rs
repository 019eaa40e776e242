//! The minik8s apiserver: the only component that touches the store.
//!
//! ```text
//!  HTTP (axum) ──▶ handlers: decode → defaults → admission → validation → store
//!                    ▲                                                  │
//!  watch streams ◀── watch cache (one store watch per resource) ◀──────┘
//! ```
//!
//! [`run`] serves the Kubernetes REST API on `--listen` with either etcd
//! (`--etcd-servers`) or the embedded store in `--data-dir`.

pub mod admission;
pub mod aggregator;
pub mod answer;
pub mod apiserver_endpoints;
pub mod apply;
pub mod auth;
pub mod crd;
pub mod decode;
pub mod discovery;
pub mod discovery_aggregated;
pub mod event_ttl;
pub mod followed;
pub mod health;
pub mod http;
pub mod inflight;
pub mod ipalloc;
pub mod list;
pub mod managed;
pub mod metrics_api;
pub mod node_bundle;
pub mod node_proxy;
pub mod pagination;
pub mod params;
pub mod pod_security;
pub mod proxy;
pub mod request_metrics;
pub mod request_trace;
pub mod rest;
pub mod secure;
pub mod service_cidrs;
pub mod store;
pub mod stored;
pub mod strategy;
pub mod subresources;
pub mod table;
pub mod ui;
pub mod warnings;
pub mod watch;
pub mod watch_cache;

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Service;
use minik8s_api::registry::{self, Info, Registry, RegistryError, ResourceInfo, ResourceSpec};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use watch_cache::WatchCache;

/// Namespaces that exist from the start, as in Kubernetes.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

#[derive(Debug, Clone, clap::Args)]
#[group(id = "apiserver")]
pub struct Config {
    /// Address of the plain-HTTP port. Requests on it without credentials
    /// act as `system:unsecured` (group system:masters), so it is bound to
    /// loopback: only someone already on the machine reaches it.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Address of the secure port (TLS, authenticated); empty turns it off.
    #[arg(long, default_value = "0.0.0.0:6443")]
    pub secure_listen: Option<String>,
    /// Where the cluster CA, the certificates and the components'
    /// kubeconfigs are kept (created on first start); default `<data-dir>/pki`.
    #[arg(long)]
    pub pki_dir: Option<PathBuf>,
    /// The address other machines and pods reach the apiserver on (the
    /// `kubernetes` Service's endpoint); default: this machine's primary address.
    #[arg(long)]
    pub advertise_address: Option<std::net::IpAddr>,
    /// More names or addresses for the serving certificate (comma-separated, repeatable).
    #[arg(long)]
    pub tls_san: Vec<String>,
    /// The static token file: `token,user,uid,"group1,group2"` per line.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// The longest ServiceAccount token issued (seconds); requests for
    /// longer ones get this.
    #[arg(long)]
    pub service_account_max_token_expiration: Option<i64>,
    /// `RBAC` (system:masters, then the RBAC objects) or `AlwaysAllow`.
    #[arg(long, default_value = "RBAC")]
    pub authorization_mode: String,
    /// Comma-separated etcd endpoints; without it the embedded store is used.
    #[arg(long)]
    pub etcd_servers: Option<String>,
    /// Directory of the embedded store.
    #[arg(long, default_value = "/var/lib/minik8s")]
    pub data_dir: PathBuf,
    /// CIDR Service ClusterIPs are allocated from.
    #[arg(long, default_value = "10.96.0.0/12")]
    pub service_cluster_ip_range: String,
    /// Events kept per resource for watches resuming from an older version.
    #[arg(long, default_value_t = 10_000)]
    pub watch_cache_size: usize,
    /// Bytes of events kept per resource besides their count (large objects,
    /// pods with their status, fill it first). A watcher further behind gets
    /// 410 Gone and relists: on thousands of nodes, raise it (scale-bench
    /// runs with 256 MiB).
    #[arg(long, default_value_t = watch_cache::MAX_RING_BYTES)]
    pub watch_cache_max_bytes: usize,
    /// How long an Event is kept after its last change (Go duration, e.g. `1h`, `90m`).
    #[arg(long, default_value = "1h", value_parser = |s: &str| minik8s_api::meta::parse_duration(s))]
    pub event_ttl: Duration,
    /// More metric families `/metrics` serves after the apiserver's own:
    /// the master adds its scheduler's and controllers'.
    #[arg(skip)]
    pub extra_metrics: request_metrics::ExtraMetrics,
    /// An OTLP/HTTP collector (`host:4318` or a URL) to send the traces
    /// of the control loops to; without it they stay in this process.
    #[arg(long)]
    pub tracing_endpoint: Option<String>,
    /// Recent traces kept in memory for the web view's journeys (`/ui/`);
    /// 0 keeps none (and, without --tracing-endpoint, traces nothing).
    #[arg(long, default_value_t = minik8s_trace::store::DEFAULT_MAX_TRACES)]
    pub traces_kept: usize,
    /// New journeys (traces of a create) started per second at most, in
    /// bursts of as many; the creates beyond are not traced (what a
    /// controller creates for a traced object continues its journey and
    /// counts for none). 0: every create is.
    #[arg(long, default_value_t = 20.0)]
    pub journeys_per_second: f64,
    /// The store of recent traces the process's tracing writes to (made
    /// with it, by the binary: see [`tracing_options`]).
    #[arg(skip)]
    pub span_store: Option<Arc<minik8s_trace::SpanStore>>,
    /// Reads (GET, lists) served at once; more get 429 with Retry-After (Kubernetes: 400).
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Writes served at once; more get 429 with Retry-After (Kubernetes: 200).
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// Watches open at once (0: unlimited).
    #[arg(long, default_value_t = 10_000)]
    pub max_watches_inflight: usize,
    /// exec, attach, port-forward, logs and proxy streams open at once (0: unlimited).
    #[arg(long, default_value_t = 1_000)]
    pub max_long_running_inflight: usize,
    /// Connections each port keeps open at once; more clients wait to be accepted.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds a connection with no request in flight stays open (Kubernetes: 90).
    #[arg(long, default_value_t = 90)]
    pub idle_connection_timeout: u64,
    /// tolerationSeconds of the node.kubernetes.io/not-ready NoExecute toleration
    /// added to every pod that has none (DefaultTolerationSeconds admission).
    #[arg(long, default_value_t = 300)]
    pub default_not_ready_toleration_seconds: i64,
    /// tolerationSeconds of the node.kubernetes.io/unreachable NoExecute toleration
    /// added to every pod that has none.
    #[arg(long, default_value_t = 300)]
    pub default_unreachable_toleration_seconds: i64,
    /// Where the node binaries served to joining workers are (`kubelet`,
    /// `kube-proxy`, `kubectl`, `nfs-fuse`; `node_bundle.rs`); default: the
    /// directory of this executable.
    #[arg(long)]
    pub node_bundle_bin_dir: Option<PathBuf>,
    /// Where the scripts, units and documents of the node bundle are (the
    /// source tree's layout); default: `../share/minik8s` beside this
    /// executable (installed), else the checkout around `target/<profile>/`.
    #[arg(long)]
    pub node_bundle_files: Option<PathBuf>,
}

impl Config {
    /// The connection limits both ports serve with.
    pub fn connection_limits(&self) -> minik8s_pki::connections::Limits {
        minik8s_pki::connections::Limits {
            max_connections: self.max_connections,
            idle_timeout: Duration::from_secs(self.idle_connection_timeout),
            ..Default::default()
        }
    }
}

/// The server state shared by all requests.
pub struct ApiServer {
    pub store: Arc<dyn Store>,
    /// What is served: the built-ins and kinds registered while running.
    pub registry: Registry,
    /// One watch cache per served resource, by (group, plural).
    caches: std::sync::RwLock<HashMap<(registry::Text, registry::Text), Arc<WatchCache>>>,
    alloc: ipalloc::Allocators,
    http: reqwest::Client,
    /// Set once the server is shutting down: watch streams end, connections close.
    shutting_down: tokio::sync::watch::Sender<bool>,
    /// Which namespaces exist and whether they are terminating (for admission).
    namespaces: NamespaceCache,
    /// tolerationSeconds for the default (not-ready, unreachable) tolerations.
    default_toleration_seconds: (i64, i64),
    /// Recent kubelet summaries behind metrics.k8s.io.
    summaries: metrics_api::SummaryCache,
    /// Every request counted and timed (`/metrics`).
    request_metrics: request_metrics::RequestMetrics,
    /// What `/metrics` adds to the request metrics ([`Config::extra_metrics`]).
    extra_metrics: request_metrics::ExtraMetrics,
    /// The web view: the recent traces it draws journeys from.
    pub web_view: ui::WebView,
    /// The web view's browser sessions (an authenticator).
    pub sessions: auth::sessions::Sessions,
    /// How many journeys may start ([`Config::journeys_per_second`]).
    journeys: request_trace::JourneyBudget,
    /// The traced objects' trace contexts, by uid.
    pub trace_contexts: request_trace::Contexts,
    /// Events each watch cache keeps (`--watch-cache-size`).
    watch_cache_size: usize,
    watch_cache_max_bytes: usize,
    /// Authentication and authorization settings.
    pub auth: auth::Auth,
    /// The RBAC objects the authorizer reads.
    pub policy: auth::cache::PolicyCache,
    /// How to reach kubelets over TLS with the apiserver's client
    /// certificate (set with the secure port; plain HTTP without it).
    pub kubelet_tls: std::sync::OnceLock<secure::KubeletClient>,
    /// Signs and checks ServiceAccount tokens (set with the secure port).
    pub sa_signer: std::sync::OnceLock<minik8s_pki::tokens::Signer>,
    /// Which pods on which node use what (the Node authorizer's graph).
    pub nodes: auth::node::NodeGraph,
    /// Requests being served, per class (max-in-flight limits).
    pub inflight: inflight::InFlight,
    /// Where the secure port listens, once it does.
    pub secure_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// What joining workers install and the join script (set with the
    /// secure port, whose CA vouches for the bundle).
    pub node_bundle: std::sync::OnceLock<Arc<node_bundle::NodeBundle>>,
    /// What each CustomResourceDefinition is served as (`crd.rs`).
    custom: crd::Served,
    /// Webhook configurations and admission policies (`admission/`).
    admission: admission::Configs,
    webhook_clients: admission::WebhookClients,
    /// APIServices, for the aggregation layer (`aggregator.rs`).
    apiservices: followed::Followed,
    /// StorageClasses, for the claims' admission (default class, resize).
    storage_classes: followed::Followed,
    /// PriorityClasses, for the Priority admission of every pod.
    pub(crate) priority_classes: followed::Followed,
    /// LimitRanges, for the LimitRanger admission of pods and claims.
    pub(crate) limit_ranges: followed::Followed,
    /// ResourceQuotas, so a write to a namespace without any skips the quota admission.
    pub(crate) resource_quotas: followed::Followed,
    /// One quota charge at a time per namespace in this apiserver: concurrent
    /// creates queue here instead of failing each other's compare-and-swap
    /// on the quota's status (Kubernetes' quota evaluator batches them).
    pub(crate) quota_gates:
        std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    ingress_classes: followed::Followed,
    /// PersistentVolumes, for the Node authorizer (a kubelet reads the
    /// volumes of its pods' claims).
    persistent_volumes: followed::Followed,
    /// The strategies of the custom resources served now.
    strategies: strategy::RuntimeStrategies,
    /// `group/version` → the APIResourceList an extension apiserver last
    /// answered its discovery check with (aggregated discovery serves it).
    remote_discovery: std::sync::Mutex<HashMap<String, Value>>,
}

/// Namespace name → (terminating, labels), kept from the namespaces watch
/// cache (as Kubernetes' NamespaceLifecycle and PodSecurity admission keep an
/// informer). A miss means "ask the store".
#[derive(Default)]
pub(crate) struct NamespaceCache(std::sync::RwLock<HashMap<String, (bool, Arc<Value>)>>);

impl NamespaceCache {
    pub(crate) fn lookup(&self, ns: &str) -> Option<bool> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(ns)
            .map(|(terminating, _)| *terminating)
    }
    /// The namespace's labels (Pod Security levels), if it is known.
    pub(crate) fn labels(&self, ns: &str) -> Option<Arc<Value>> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(ns)
            .map(|(_, labels)| labels.clone())
    }
    pub(crate) fn set(&self, ns: &str, terminating: bool) {
        let mut map = self.0.write().unwrap_or_else(|p| p.into_inner());
        let labels = map.get(ns).map(|(_, l)| l.clone()).unwrap_or_default();
        map.insert(ns.to_string(), (terminating, labels));
    }
    fn put(&self, namespace: &Value) {
        let labels = Arc::new(
            namespace
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(Value::Null),
        );
        self.0.write().unwrap_or_else(|p| p.into_inner()).insert(
            minik8s_api::meta::name(namespace).to_string(),
            (minik8s_api::meta::is_deleting(namespace), labels),
        );
    }
    fn remove(&self, ns: &str) {
        self.0.write().unwrap_or_else(|p| p.into_inner()).remove(ns);
    }

    /// Follows the namespaces watch cache from `after` on.
    fn follow(server: std::sync::Weak<ApiServer>, cache: Arc<WatchCache>, after: i64) {
        let Ok(sub) = cache.subscribe(after) else {
            return;
        };
        tokio::spawn(async move {
            let mut live = sub.live;
            let apply = |ev: &watch_cache::CacheEvent| {
                let Some(srv) = server.upgrade() else {
                    return false;
                };
                let object = ev.object();
                let name = minik8s_api::meta::name(&object);
                match ev.kind {
                    store::EventKind::Delete => srv.namespaces.remove(name),
                    store::EventKind::Put => srv.namespaces.put(&object),
                }
                true
            };
            for ev in sub.backlog {
                apply(&ev);
            }
            loop {
                match live.recv().await {
                    Ok(ev) => {
                        if !apply(&ev) {
                            return;
                        }
                    }
                    // Missed events: forget everything, misses go to the store.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if let Some(srv) = server.upgrade() {
                            srv.namespaces
                                .0
                                .write()
                                .unwrap_or_else(|p| p.into_inner())
                                .clear();
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
}

/// Opens the store the configuration names.
/// The tracing of a process that runs this apiserver: its store of
/// recent traces (none with `--traces-kept 0`), set on `cfg` for the web
/// view, and its collector (`--tracing-endpoint`).
pub fn tracing_options(cfg: &mut Config, process: &'static str) -> minik8s_trace::Options {
    let store = (cfg.traces_kept > 0).then(|| {
        minik8s_trace::SpanStore::new(cfg.traces_kept, minik8s_trace::store::DEFAULT_MAX_SPANS)
    });
    cfg.span_store = store.clone();
    minik8s_trace::Options {
        process,
        endpoint: cfg.tracing_endpoint.clone(),
        store,
        to_apiserver: None,
    }
}

pub async fn open_store(cfg: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match &cfg.etcd_servers {
        Some(eps) => Arc::new(
            store::etcd::EtcdStore::connect(eps)
                .await
                .with_context(|| format!("connecting to etcd at {eps}"))?,
        ),
        None => Arc::new(
            store::embedded::EmbeddedStore::open(&cfg.data_dir).with_context(|| {
                format!("opening the embedded store in {}", cfg.data_dir.display())
            })?,
        ),
    })
}

/// `--authorization-mode`: RBAC, with or without Node (nodes' requests go
/// to the Node authorizer first in RBAC mode either way), or AlwaysAllow.
fn authorization_mode(flag: &str) -> anyhow::Result<auth::Mode> {
    match flag {
        "RBAC" | "Node,RBAC" | "RBAC,Node" => Ok(auth::Mode::Rbac),
        "AlwaysAllow" => Ok(auth::Mode::AlwaysAllow),
        other => anyhow::bail!(
            "--authorization-mode {other:?}: supported values are RBAC and AlwaysAllow"
        ),
    }
}

impl ApiServer {
    /// Builds the server on `store`: watch caches, allocators, system namespaces.
    /// Long because it sets each of the server's fields in one place.
    pub async fn new(store: Arc<dyn Store>, cfg: &Config) -> anyhow::Result<Arc<ApiServer>> {
        let rev = store.current_revision().await?;
        let registry = Registry::with_builtins();
        let caches = registry
            .all()
            .into_iter()
            .map(|info| {
                let cache = WatchCache::start_bounded(
                    store.clone(),
                    info.key_prefix(None),
                    rev,
                    cfg.watch_cache_size,
                    cfg.watch_cache_max_bytes,
                );
                ((info.group.clone(), info.plural.clone()), cache)
            })
            .collect();
        let alloc = ipalloc::Allocators::new(&cfg.service_cluster_ip_range)
            .map_err(anyhow::Error::msg)
            .context("--service-cluster-ip-range")?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        let shutting_down = tokio::sync::watch::Sender::new(false);
        let tokens = match &cfg.token_auth_file {
            Some(path) => auth::StaticTokens::load(path)?,
            None => auth::StaticTokens::default(),
        };
        let mode = authorization_mode(&cfg.authorization_mode)?;
        let srv = Arc::new(ApiServer {
            store,
            registry,
            caches: std::sync::RwLock::new(caches),
            watch_cache_size: cfg.watch_cache_size,
            watch_cache_max_bytes: cfg.watch_cache_max_bytes,
            alloc,
            http,
            shutting_down,
            namespaces: NamespaceCache::default(),
            default_toleration_seconds: (
                cfg.default_not_ready_toleration_seconds,
                cfg.default_unreachable_toleration_seconds,
            ),
            summaries: Default::default(),
            request_metrics: Default::default(),
            extra_metrics: cfg.extra_metrics.clone(),
            web_view: ui::WebView::new(cfg.span_store.clone()),
            sessions: Default::default(),
            journeys: request_trace::JourneyBudget::new(cfg.journeys_per_second),
            trace_contexts: Default::default(),
            auth: auth::Auth {
                tokens,
                mode,
                max_token_seconds: cfg.service_account_max_token_expiration,
            },
            policy: Default::default(),
            secure_addr: Default::default(),
            node_bundle: Default::default(),
            nodes: Default::default(),
            inflight: inflight::InFlight::new(inflight::Limits {
                reads: cfg.max_requests_inflight,
                mutations: cfg.max_mutating_requests_inflight,
                watches: cfg.max_watches_inflight,
                long_running: cfg.max_long_running_inflight,
            }),
            sa_signer: Default::default(),
            kubelet_tls: Default::default(),
            custom: Default::default(),
            admission: Default::default(),
            webhook_clients: Default::default(),
            apiservices: Default::default(),
            remote_discovery: Default::default(),
            storage_classes: Default::default(),
            priority_classes: Default::default(),
            limit_ranges: Default::default(),
            resource_quotas: Default::default(),
            quota_gates: Default::default(),
            ingress_classes: Default::default(),
            persistent_volumes: Default::default(),
            strategies: Default::default(),
        });
        let namespaces = srv
            .watch_cache(registry::of::<Namespace>())
            .expect("namespaces have a watch cache");
        NamespaceCache::follow(Arc::downgrade(&srv), namespaces, rev);
        srv.restore_allocations().await?;
        srv.ensure_system_namespaces().await?;
        srv.ensure_system_priority_classes().await?;
        // The defaults first, so the authorizer's first list holds them.
        srv.ensure_default_policy().await?;
        auth::cache::PolicyCache::start(&srv).await?;
        auth::node::NodeGraph::start(&srv).await?;
        srv.start_crd_controller(rev);
        srv.follow_admission_configs(rev);
        srv.follow_what_admission_reads(rev);
        srv.ensure_local_apiservices().await?;
        srv.spawn_apiservice_availability();
        srv.ensure_default_service_cidr().await?;
        srv.spawn_service_cidr_loop(rev);
        Ok(srv)
    }

    /// The kinds built-in admission and the strategies read, followed from
    /// revision `rev` into the server's caches.
    fn follow_what_admission_reads(self: &Arc<Self>, rev: i64) {
        use k8s_openapi::api::{core::v1 as core, networking, scheduling, storage};
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
        type CacheOf = fn(&ApiServer) -> &followed::Followed;
        let kinds: [(&ResourceInfo, CacheOf); 7] = [
            (registry::of::<APIService>(), |s| &s.apiservices),
            (registry::of::<storage::v1::StorageClass>(), |s| {
                &s.storage_classes
            }),
            (registry::of::<scheduling::v1::PriorityClass>(), |s| {
                &s.priority_classes
            }),
            (registry::of::<core::LimitRange>(), |s| &s.limit_ranges),
            (registry::of::<core::ResourceQuota>(), |s| {
                &s.resource_quotas
            }),
            (registry::of::<networking::v1::IngressClass>(), |s| {
                &s.ingress_classes
            }),
            (registry::of::<core::PersistentVolume>(), |s| {
                &s.persistent_volumes
            }),
        ];
        for (info, cache) in kinds {
            followed::follow(self, info, rev, cache);
        }
    }

    /// The watch cache of a served resource.
    /// The strategy of a served resource (a custom resource's as its CRD says).
    pub(crate) fn strategy(&self, info: &ResourceInfo) -> strategy::StrategyRef {
        self.strategies.of(info)
    }

    /// What routing and discovery read: the served resources with their strategies.
    pub(crate) fn served(&self) -> strategy::ServedKinds<'_> {
        strategy::ServedKinds {
            registry: &self.registry,
            strategies: &self.strategies,
        }
    }

    pub(crate) fn watch_cache(&self, info: &ResourceInfo) -> Option<Arc<WatchCache>> {
        self.caches
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(info.group.clone(), info.plural.clone()))
            .cloned()
    }

    /// Serves a new kind from now on: routing, discovery, OpenAPI and watch
    /// see it at once (what a CustomResourceDefinition does). Objects are
    /// stored under `/registry/<group>/<plural>/` like every other kind.
    pub async fn register_kind(&self, spec: &ResourceSpec) -> Result<Info, RegistryError> {
        let infos = self.register_kinds(std::slice::from_ref(spec)).await?;
        Ok(infos[0].clone())
    }

    /// Serves several versions of one kind (same group and plural), which
    /// share one storage prefix and one watch cache; all or none.
    pub async fn register_kinds(&self, specs: &[ResourceSpec]) -> Result<Vec<Info>, RegistryError> {
        self.register_kinds_with(specs, |_| {}).await
    }

    /// As [`ApiServer::register_kinds`], with `before_served` called on each
    /// entry before a request can reach it (where a CRD's strategy is set).
    pub async fn register_kinds_with(
        &self,
        specs: &[ResourceSpec],
        before_served: impl Fn(&Info),
    ) -> Result<Vec<Info>, RegistryError> {
        let Some(first) = specs.first() else {
            return Ok(Vec::new());
        };
        // The cache starts before the kind is served, so no write can be missed.
        let rev = self
            .store
            .current_revision()
            .await
            .map_err(|e| RegistryError::Invalid {
                field: "store",
                why: e.to_string(),
            })?;
        let cache = WatchCache::start_bounded(
            self.store.clone(),
            registry::storage_prefix(&first.group, &first.plural),
            rev,
            self.watch_cache_size,
            self.watch_cache_max_bytes,
        );
        let mut infos = Vec::new();
        for spec in specs {
            match self.registry.register_with(spec, &before_served) {
                Ok(info) => infos.push(info),
                Err(e) => {
                    for info in infos {
                        let _ = self.registry.unregister_version(&info);
                    }
                    cache.stop();
                    return Err(e);
                }
            }
        }
        let old = self
            .caches
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert((infos[0].group.clone(), infos[0].plural.clone()), cache);
        if let Some(old) = old {
            old.stop();
        }
        for info in &infos {
            tracing::info!(resource = %info.group_resource(), version = %info.version, kind = %info.kind, "kind registered");
        }
        Ok(infos)
    }

    /// Stops serving a kind registered at run time: it leaves discovery and
    /// routing, and its open watches end. Its stored objects stay in the store.
    pub fn unregister_kind(&self, group: &str, plural: &str) -> Result<Info, RegistryError> {
        Ok(self.unregister_kinds(group, plural)?[0].clone())
    }

    /// Stops serving every version of a run-time kind.
    pub fn unregister_kinds(&self, group: &str, plural: &str) -> Result<Vec<Info>, RegistryError> {
        let infos = self.registry.unregister_all(group, plural)?;
        let cache = self
            .caches
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(infos[0].group.clone(), infos[0].plural.clone()));
        if let Some(cache) = cache {
            cache.stop();
        }
        tracing::info!(resource = %infos[0].group_resource(), "kind unregistered");
        Ok(infos)
    }

    /// Re-registers the ClusterIPs and node ports of stored Services, the
    /// ranges of other ServiceCIDRs and the addresses users' IPAddresses hold.
    async fn restore_allocations(&self) -> anyhow::Result<()> {
        let cidrs = registry::of::<k8s_openapi::api::networking::v1::ServiceCIDR>();
        let (kvs, _) = self.store.list(&cidrs.key_prefix(None), None).await?;
        let mut extra = Vec::new();
        for kv in kvs {
            let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let name = minik8s_api::meta::name(&obj).to_string();
            if name != service_cidrs::DEFAULT_SERVICE_CIDR
                && obj.pointer("/metadata/deletionTimestamp").is_none()
            {
                extra.extend(
                    service_cidrs::cidrs_of(&obj)
                        .into_iter()
                        .map(|c| (name.clone(), c)),
                );
            }
        }
        self.alloc.set_extra_ranges(&extra);
        let addresses = registry::of::<k8s_openapi::api::networking::v1::IPAddress>();
        let (kvs, _) = self.store.list(&addresses.key_prefix(None), None).await?;
        for kv in kvs {
            match serde_json::from_slice::<Value>(&kv.value) {
                Ok(obj) if !service_cidrs::managed(&obj) => {
                    let _ = self.alloc.reserve_ip(minik8s_api::meta::name(&obj));
                }
                _ => {}
            }
        }
        let info = registry::of::<Service>();
        let (kvs, _) = self.store.list(&info.key_prefix(None), None).await?;
        for kv in kvs {
            let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            for (pool, v) in strategy::service_allocations(&svc) {
                let r = if pool == "ip" {
                    self.alloc.reserve_ip(&v)
                } else {
                    self.alloc.reserve_port(v.parse().unwrap_or(0))
                };
                if let Err(e) = r {
                    tracing::warn!(service = %kv.key, value = %v, error = %e, "stored service allocation not restored");
                }
            }
        }
        Ok(())
    }

    async fn ensure_system_namespaces(&self) -> anyhow::Result<()> {
        let info = registry::of::<Namespace>();
        for ns in SYSTEM_NAMESPACES {
            match self
                .create(
                    info,
                    None,
                    json!({"metadata": {"name": ns}}),
                    crate::rest::WriteOpts::default(),
                )
                .await
            {
                Ok(_) => tracing::info!(namespace = ns, "created system namespace"),
                Err(e) if e.is_already_exists() => {}
                Err(e) => anyhow::bail!("creating namespace {ns}: {e}"),
            }
        }
        Ok(())
    }

    /// Creates the built-in PriorityClasses (`system-node-critical`,
    /// `system-cluster-critical`).
    async fn ensure_system_priority_classes(&self) -> anyhow::Result<()> {
        let info = registry::of::<k8s_openapi::api::scheduling::v1::PriorityClass>();
        for class in strategy::priority::system_classes() {
            let name = minik8s_api::meta::name(&class).to_string();
            match self
                .create(info, None, class, crate::rest::WriteOpts::default())
                .await
            {
                Ok(_) => tracing::info!(class = %name, "created system priority class"),
                Err(e) if e.is_already_exists() => {}
                Err(e) => anyhow::bail!("creating priority class {name}: {e}"),
            }
        }
        Ok(())
    }

    /// Creates the default ClusterRoles and ClusterRoleBindings, and gives
    /// back to those still auto-updated what they lost (`auth/policy.rs`).
    async fn ensure_default_policy(&self) -> anyhow::Result<()> {
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        let kinds = [
            (registry::of::<ClusterRole>(), auth::policy::cluster_roles()),
            (
                registry::of::<ClusterRoleBinding>(),
                auth::policy::cluster_role_bindings(),
            ),
        ];
        for (info, objects) in kinds {
            for obj in objects {
                let name = minik8s_api::meta::name(&obj).to_string();
                match self
                    .create(info, None, obj.clone(), Default::default())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_already_exists() => {
                        let (stored, _) = self.read(info, None, &name).await?;
                        if let Some(fixed) = auth::policy::reconcile(&stored, &obj) {
                            let r = self
                                .update_with(
                                    info,
                                    None,
                                    &name,
                                    rest::Mode::Main,
                                    Default::default(),
                                    move |_| Ok(fixed.clone()),
                                )
                                .await;
                            if let Err(e) = r {
                                tracing::warn!(name, error = %e, "default RBAC object not reconciled");
                            }
                        }
                    }
                    Err(e) => anyhow::bail!("creating the default {} {name}: {e}", info.kind),
                }
            }
        }
        Ok(())
    }

    /// Begins shutting down: open watches end and HTTP connections are closed.
    pub fn shutdown(&self) {
        self.shutting_down.send_replace(true);
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// Resolves once [`ApiServer::shutdown`] has been called.
    pub fn shutdown_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutting_down.subscribe();
        async move {
            let _ = rx.wait_for(|down| *down).await.is_ok();
        }
    }

    /// The axum router serving the whole API.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        let srv = self.clone();
        axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (mut parts, body) = req.into_parts();
            // Present when the connection can be upgraded (exec).
            let upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
            let conn = parts
                .extensions
                .remove::<minik8s_pki::serve::ClientCert>()
                .map(|c| auth::Connection {
                    client_cert: c.0.map(|(cn, orgs)| auth::UserInfo {
                        username: cn,
                        groups: orgs,
                        ..Default::default()
                    }),
                });
            http::handle(
                srv.clone(),
                conn,
                parts.method,
                parts.uri,
                parts.headers,
                body,
                upgrade,
            )
        })
    }

    /// Periodically compacts the store's history (as kube-apiserver does every 5 min),
    /// keeping the last `keep` revisions.
    pub fn spawn_compactor(self: &Arc<Self>, every: Duration, keep: i64) {
        let store = self.store.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Ok(rev) = store.current_revision().await {
                    if rev > keep {
                        if let Err(e) = store.compact(rev - keep).await {
                            tracing::warn!(error = %e, "compaction failed");
                        }
                    }
                }
            }
        });
    }
}

/// The directory of the running executable (the node bundle's binaries
/// are beside it by default).
pub fn exe_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A started apiserver: both ports bound, serving in the background.
pub struct Running {
    pub server: Arc<ApiServer>,
    /// Where the secure port listens (None when it is off).
    pub secure_addr: Option<std::net::SocketAddr>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Waits until the server stops (SIGTERM, Ctrl-C or an error).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await?
    }
}

/// Opens the store, binds both ports and serves in the background; the
/// cluster PKI exists when this returns.
pub async fn start(cfg: Config) -> anyhow::Result<Running> {
    let store = open_store(&cfg).await?;
    let srv = ApiServer::new(store, &cfg).await?;
    srv.spawn_compactor(Duration::from_secs(300), 10_000);
    srv.spawn_event_reaper(cfg.event_ttl);
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    tracing::info!(listen = %cfg.listen, store = if cfg.etcd_servers.is_some() { "etcd" } else { "embedded" }, "apiserver serving");
    let secure = srv.start_secure(&cfg).await?;
    let stopper = srv.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        stopper.shutdown();
    });
    let secure_addr = secure.as_ref().map(|(_, a)| *a);
    let router = srv.router();
    let stop = srv.shutdown_signal();
    let limits = cfg.connection_limits();
    let task = tokio::spawn(async move {
        minik8s_pki::connections::serve_connections(listener, None, router, stop, limits).await;
        if let Some((task, _)) = secure {
            let _ = task.await;
        }
        Ok(())
    });
    Ok(Running {
        server: srv,
        secure_addr,
        task,
    })
}

/// Serves the API until the process is stopped.
pub async fn run(cfg: Config) -> anyhow::Result<()> {
    start(cfg).await?.wait().await
}

/// Starts an in-process apiserver on `cfg.listen` (tests and benchmarks) and
/// returns its base URL.
pub async fn spawn(
    store: Arc<dyn Store>,
    cfg: &Config,
) -> anyhow::Result<(String, Arc<ApiServer>, tokio::task::JoinHandle<()>)> {
    let srv = ApiServer::new(store, cfg).await?;
    srv.spawn_event_reaper(cfg.event_ttl);
    let listener = tokio::net::TcpListener::bind(&cfg.listen).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let router = srv.router();
    let stop = srv.shutdown_signal();
    let secure = srv.start_secure(cfg).await?;
    let limits = cfg.connection_limits();
    let handle = tokio::spawn(async move {
        minik8s_pki::connections::serve_connections(listener, None, router, stop, limits).await;
        if let Some((task, _)) = secure {
            let _ = task.await;
        }
    });
    Ok((url, srv, handle))
}
