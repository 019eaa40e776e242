//! The minik8s controller manager: controllers that drive observed state
//! toward desired state, each a pure core plus a thin I/O shell in one file.
//!
//! ```text
//!              SharedInformers (one LIST+WATCH per kind, shared by all controllers)
//!                 │ events
//!                 ▼
//!   triggers ──keys──▶ WorkQueue ──▶ workers ──▶ reconcile(key) -> Action ──▶ apiserver writes
//! ```
//!
//! Each controller is a `minik8s_client::controller::Reconciler` wired by a
//! `Controller` (its triggers: `for_own`, `owns`, `watches`), and one runner
//! drains every queue (the scheduler's too).
//!
//! Controllers: ReplicaSet (`replicaset.rs`), StatefulSet (`statefulset/`),
//! LeaderWorkerSet (`lws/`: `mod.rs` for the set, `group.rs` for each group),
//! DisaggregatedSet (`disaggregatedset/`: LWS roles rolled together),
//! the garbage collector (`gc.rs`),
//! Endpoints/EndpointSlices (`endpoints.rs`), node lifecycle with NoExecute
//! eviction (`nodelifecycle.rs`), node IPAM (`nodeipam.rs`), the
//! HorizontalPodAutoscaler (`hpa/`), namespace deletion (`namespace.rs`).

pub mod certificates;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disaggregatedset;
pub mod disruption;
pub mod endpoints;
pub mod expectations;
pub mod function;
pub mod gc;
pub mod history;
pub mod hpa;
pub mod job;
pub mod journey;
/// Leader election (shared with the scheduler; it lives in the client crate).
pub use minik8s_client::leader;
pub mod lws;
pub mod metrics;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod ownership;
pub mod replicaset;
pub mod resourceclaim;
pub mod resourcequota;
pub mod rootcacert;
pub mod serviceaccount;
pub mod servicelb;
pub mod statefulset;
pub mod ttlafterfinished;
pub mod volume;
pub mod workload_metrics;

use minik8s_client::controller::{Controller, Reconciler};
use minik8s_client::{Client, SharedInformers};
use std::sync::Mutex;
use std::time::Duration;

/// This component's client-side rate limit by default (`--kube-api-qps`,
/// `--kube-api-burst`).
pub const API_RATE_LIMIT: (f32, u32) = (100.0, 200);
/// The namespace controller's own limit (see [`run`]): mostly lists of an
/// emptied namespace, small answers.
pub const NAMESPACE_API_RATE_LIMIT: (f32, u32) = (1000.0, 2000);

/// The controller manager's settings (flags of `controller-manager` and `master`),
/// named and defaulted as in kube-controller-manager.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "controller-manager")]
#[group(id = "controller-manager")]
pub struct Config {
    /// Where the controllers count (queue depths, reconciles, workload
    /// metrics); the maker of the Config keeps a clone to render them.
    #[arg(skip)]
    pub metrics: metrics::Metrics,
    /// The directory of the cluster CA (`ca.crt`, `ca.key`) the certificate
    /// signer signs approved CertificateSigningRequests with; without it no
    /// request is signed.
    #[arg(long)]
    pub cluster_signing_dir: Option<std::path::PathBuf>,
    /// The cluster CA published to every namespace as `kube-root-ca.crt`
    /// (default: `ca.crt` in --cluster-signing-dir).
    #[arg(long)]
    pub root_ca_file: Option<std::path::PathBuf>,
    /// Workers per queue-driven controller.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Namespaces emptied at once (Kubernetes' default: 10): a burst of
    /// deleted namespaces (a test suite's) is gone in seconds, not minutes.
    #[arg(long, default_value_t = 10)]
    pub concurrent_namespace_syncs: usize,
    /// How often the node lifecycle controller checks every node.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub node_monitor_period: Duration,
    /// Heartbeat silence after which a node becomes Ready=Unknown and is
    /// tainted node.kubernetes.io/unreachable.
    #[arg(long, default_value = "50s", value_parser = parse_duration)]
    pub node_monitor_grace_period: Duration,
    /// Give nodes without a podCIDR one from --cluster-cidr.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub allocate_node_cidrs: bool,
    /// The pod network, cut into one subnet per node.
    #[arg(long, default_value = "10.244.0.0/16")]
    pub cluster_cidr: String,
    /// Prefix length of each node's subnet.
    #[arg(long, default_value_t = 24)]
    pub node_cidr_mask_size: u8,
    /// How often each HorizontalPodAutoscaler is synced.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_sync_period: Duration,
    /// How long an HPA without `behavior` looks back before scaling down.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_downscale_stabilization: Duration,
    /// Usage/target ratios this close to 1 cause no scaling.
    #[arg(long, default_value_t = 0.1)]
    pub horizontal_pod_autoscaler_tolerance: f64,
    /// How long after a pod starts its CPU samples are trusted only once it is
    /// ready for a whole metric window.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_cpu_initialization_period: Duration,
    /// Where the built-in local-path provisioner puts volumes on each node
    /// (a class's `parameters.nodePath` overrides it).
    #[arg(long, default_value = volume::local_path::DEFAULT_ROOT)]
    pub local_path_root: String,
    /// Make the `local-path` StorageClass at start, as the default class, if
    /// no class of that name exists.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub default_storage_class: bool,
    /// How long after start a pod that is not ready is treated as never ready.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_initial_readiness_delay: Duration,
    /// Where the serverless gateway serves functions (each Function's
    /// status.url is this + /function/NAMESPACE/NAME).
    #[arg(
        long,
        default_value = "http://serverless-gateway.kube-system.svc.cluster.local"
    )]
    pub serverless_gateway_url: String,
    /// The built-in service load balancer (k3s' ServiceLB): LoadBalancer
    /// Services without a class get the nodes' addresses (servicelb.rs).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub service_lb: bool,
}

impl Default for Config {
    fn default() -> Self {
        <Config as clap::Parser>::parse_from(["controller-manager"])
    }
}

pub use minik8s_api::meta::parse_duration;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn ns_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".into())
}

/// Runs every controller until the process ends. All controllers share one
/// informer per kind; they start working once every cache has synced.
pub async fn run(client: Client, config: Config) -> anyhow::Result<()> {
    let client = client.with_user_agent("kube-controller-manager");
    let informers = SharedInformers::new(&client);
    let parts = Parts {
        client: &client,
        informers: &informers,
        config: &config,
    };
    // Each controller is made first (registering the informers it follows)
    // and runs once they have all synced.
    let mut controllers = parts.workload_controllers()?;
    controllers.extend(parts.cluster_controllers()?);
    controllers.extend(parts.storage_controllers()?);
    controllers.extend(parts.certificate_controllers()?);
    if config.default_storage_class {
        let client = client.clone();
        tokio::spawn(async move { volume::local_path::ensure_default_class(&client).await });
    }
    informers.start();
    informers.wait_synced().await;
    tracing::info!(
        kinds = informers.kinds(),
        "informers synced; controllers start"
    );
    futures::future::join_all(controllers).await;
    Ok(())
}

/// A controller made and waiting for the informers to sync: its run loop.
type Made = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What every controller is made from: the client, the shared informers and
/// the settings (with the metrics the runners count in).
struct Parts<'a> {
    client: &'a Client,
    informers: &'a SharedInformers,
    config: &'a Config,
}

impl Parts<'_> {
    fn c(&self) -> Client {
        self.client.clone()
    }

    /// A controller's run loop with `workers` workers, counted in the
    /// controller manager's metrics.
    fn made<R: Reconciler>(&self, controller: Controller<R>, workers: usize) -> Made {
        Box::pin(controller.run(workers, self.config.metrics.controllers.clone()))
    }

    /// As [`Parts::made`] with `--concurrent-syncs` workers.
    fn run<R: Reconciler>(&self, controller: Controller<R>) -> Made {
        self.made(controller, self.config.workers)
    }

    /// The controllers of workloads: the replicated sets, jobs, LWS,
    /// DisaggregatedSets, functions, autoscaling and disruption budgets.
    fn workload_controllers(&self) -> anyhow::Result<Vec<Made>> {
        let (config, informers) = (self.config, self.informers);
        let hpa_settings = hpa::Settings {
            sync_period: config.horizontal_pod_autoscaler_sync_period,
            downscale_stabilization: config.horizontal_pod_autoscaler_downscale_stabilization,
            tolerance: config.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period: config.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay: config.horizontal_pod_autoscaler_initial_readiness_delay,
        };
        let gateway = config.serverless_gateway_url.clone();
        let clock = std::sync::Arc::new(cronjob::SystemClock);
        let workloads = || config.metrics.workloads.clone();
        Ok(vec![
            self.run(replicaset::ReplicaSetController::new(self.c(), informers)?),
            self.run(replicaset::ReplicationManager::new(self.c(), informers)?),
            self.run(deployment::DeploymentController::new(self.c(), informers)?),
            self.run(daemonset::DaemonSetController::new(self.c(), informers)?),
            self.run(statefulset::StatefulSetController::new(
                self.c(),
                informers,
            )?),
            self.run(lws::LwsController::new(self.c(), informers, workloads())?),
            self.run(lws::group::GroupController::new(
                self.c(),
                informers,
                workloads(),
            )?),
            self.run(disaggregatedset::DisaggregatedSetController::new(
                self.c(),
                informers,
                workloads(),
            )?),
            self.run(function::FunctionController::new(
                self.c(),
                informers,
                gateway,
            )?),
            self.run(hpa::HpaController::new(self.c(), informers, hpa_settings)?),
            self.run(job::JobController::new(self.c(), informers)?),
            self.run(cronjob::CronJobController::new(self.c(), informers, clock)?),
            self.run(ttlafterfinished::TtlAfterFinishedController::new(
                self.c(),
                informers,
            )?),
            self.run(disruption::DisruptionController::new(self.c(), informers)?),
            self.run(resourceclaim::ResourceClaimController::new(
                self.c(),
                informers,
            )?),
        ])
    }

    /// The controllers of the cluster itself: endpoints, garbage collection,
    /// node lifecycle and address ranges, namespaces, service accounts,
    /// quotas and the service load balancer.
    fn cluster_controllers(&self) -> anyhow::Result<Vec<Made>> {
        let (config, informers) = (self.config, self.informers);
        let timing = nodelifecycle::Timing {
            monitor_period: config.node_monitor_period,
            grace_period: config.node_monitor_grace_period,
        };
        // Its own client and rate limit, as each of kube-controller-manager's
        // controllers has: emptying a namespace lists every resource (about 50
        // requests a pass, two passes at least), so at the shared 100/s a burst
        // of deleted namespaces (a test suite's: 300 in two minutes) went at one
        // a second and held up every other controller. Its workers
        // (--concurrent-namespace-syncs) bound it instead.
        let (qps, burst) = NAMESPACE_API_RATE_LIMIT;
        let namespaces = self.client.with_rate_limit(qps, burst);
        let mut controllers = vec![
            self.run(endpoints::EndpointsController::new(self.c(), informers)?),
            Box::pin(gc::Runner::new(self.c(), informers)?.run()) as Made,
            self.run(nodelifecycle::NodeLifecycleController::new(
                self.c(),
                informers,
                timing,
            )?),
            self.made(
                namespace::NamespaceController::new(namespaces, informers)?,
                config.concurrent_namespace_syncs,
            ),
            self.run(serviceaccount::ServiceAccountController::new(
                self.c(),
                informers,
            )?),
            self.run(resourcequota::ResourceQuotaController::new(
                self.c(),
                informers,
            )?),
        ];
        if config.allocate_node_cidrs {
            let range = nodeipam::Range::new(&config.cluster_cidr, config.node_cidr_mask_size)
                .map_err(anyhow::Error::msg)?;
            let ipam = nodeipam::NodeIpamController::new(self.c(), informers, range)?;
            // One worker: allocation is serial by design.
            controllers.push(self.made(ipam, 1));
        }
        if config.service_lb {
            controllers.push(self.run(servicelb::ServiceLb::new(self.c(), informers)?));
        }
        Ok(controllers)
    }

    /// The controllers of volumes: binding claims (provisioning local-path
    /// volumes), reclaiming, and the two protection finalizers.
    fn storage_controllers(&self) -> anyhow::Result<Vec<Made>> {
        let informers = self.informers;
        let local_path = volume::local_path::LocalPath {
            client: self.c(),
            nodes: informers.cache(),
            root: self.config.local_path_root.clone(),
        };
        Ok(vec![
            self.run(volume::binder::ClaimBinder::new(
                self.c(),
                informers,
                local_path,
            )?),
            self.run(volume::reclaim::VolumeController::new(self.c(), informers)?),
            self.run(volume::protection::ClaimProtection::new(
                self.c(),
                informers,
            )?),
            self.run(volume::protection::VolumeProtection::new(
                self.c(),
                informers,
            )?),
        ])
    }

    /// The controllers of certificates: CSR approval and signing, bootstrap
    /// token signing, and the root CA published in every namespace.
    fn certificate_controllers(&self) -> anyhow::Result<Vec<Made>> {
        let (config, informers) = (self.config, self.informers);
        let mut controllers = vec![
            self.run(certificates::approver::CsrApprover::new(
                self.c(),
                informers,
            )?),
            self.made(
                certificates::bootstrapsigner::BootstrapSigner::new(self.c(), informers)?,
                1,
            ),
        ];
        let root_ca = config.root_ca_file.clone().or_else(|| {
            config
                .cluster_signing_dir
                .as_ref()
                .map(|d| d.join("ca.crt"))
        });
        if let Some(path) = root_ca {
            let pem = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("--root-ca-file {}: {e}", path.display()))?;
            let publisher = rootcacert::RootCaPublisher::new(self.c(), informers, pem)?;
            controllers.push(self.run(publisher));
        }
        if let Some(dir) = &config.cluster_signing_dir {
            let ca = minik8s_pki::Ca::load(dir)
                .map_err(|e| anyhow::anyhow!("--cluster-signing-dir {}: {e}", dir.display()))?;
            let signer = certificates::signer::CsrSigner::new(self.c(), informers, ca)?;
            controllers.push(self.run(signer));
        }
        Ok(controllers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_kube_controller_manager_takes_them() {
        assert_eq!(parse_duration("50s"), Ok(Duration::from_secs(50)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1").is_err());
    }

    #[test]
    fn defaults_match_kube_controller_manager() {
        let c = Config::default();
        assert_eq!(c.workers, 2);
        assert_eq!(c.node_monitor_period, Duration::from_secs(5));
        assert_eq!(c.node_monitor_grace_period, Duration::from_secs(50));
        assert_eq!(c.cluster_cidr, "10.244.0.0/16");
        assert_eq!(
            c.horizontal_pod_autoscaler_sync_period,
            Duration::from_secs(15)
        );
        assert_eq!(
            c.horizontal_pod_autoscaler_downscale_stabilization,
            Duration::from_secs(300)
        );
        assert_eq!(c.horizontal_pod_autoscaler_tolerance, 0.1);
    }
}
