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
    let replicasets = replicaset::ReplicaSetController::new(client.clone(), &informers)?;
    let replication = replicaset::ReplicationManager::new(client.clone(), &informers)?;
    let deployments = deployment::DeploymentController::new(client.clone(), &informers)?;
    let daemons = daemonset::DaemonSetController::new(client.clone(), &informers)?;
    let endpoints = endpoints::EndpointsController::new(client.clone(), &informers)?;
    let statefulsets = statefulset::StatefulSetController::new(client.clone(), &informers)?;
    let leaderworkersets = lws::LwsController::new(client.clone(), &informers)?;
    let lws_groups = lws::group::GroupController::new(client.clone(), &informers)?;
    let disaggregated_sets =
        disaggregatedset::DisaggregatedSetController::new(client.clone(), &informers)?;
    let functions = function::FunctionController::new(
        client.clone(),
        &informers,
        config.serverless_gateway_url.clone(),
    )?;
    let gc = gc::Runner::new(client.clone(), &informers)?;
    let nodes = nodelifecycle::NodeLifecycleController::new(
        client.clone(),
        &informers,
        nodelifecycle::Timing {
            monitor_period: config.node_monitor_period,
            grace_period: config.node_monitor_grace_period,
        },
    )?;
    let hpas = hpa::HpaController::new(
        client.clone(),
        &informers,
        hpa::Settings {
            sync_period: config.horizontal_pod_autoscaler_sync_period,
            downscale_stabilization: config.horizontal_pod_autoscaler_downscale_stabilization,
            tolerance: config.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period: config.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay: config.horizontal_pod_autoscaler_initial_readiness_delay,
        },
    )?;
    // Its own client and rate limit, as each of kube-controller-manager's
    // controllers has: emptying a namespace lists every resource (about 50
    // requests a pass, two passes at least), so at the shared 100/s a burst
    // of deleted namespaces (a test suite's: 300 in two minutes) went at one
    // a second and held up every other controller. Its workers
    // (--concurrent-namespace-syncs) bound it instead.
    let (qps, burst) = NAMESPACE_API_RATE_LIMIT;
    let namespaces =
        namespace::NamespaceController::new(client.with_rate_limit(qps, burst), &informers)?;
    let accounts = serviceaccount::ServiceAccountController::new(client.clone(), &informers)?;
    let jobs = job::JobController::new(client.clone(), &informers)?;
    let cron_jobs = cronjob::CronJobController::new(
        client.clone(),
        &informers,
        std::sync::Arc::new(cronjob::SystemClock),
    )?;
    let ttl = ttlafterfinished::TtlAfterFinishedController::new(client.clone(), &informers)?;
    let quotas = resourcequota::ResourceQuotaController::new(client.clone(), &informers)?;
    let resource_claims = resourceclaim::ResourceClaimController::new(client.clone(), &informers)?;
    let disruption = disruption::DisruptionController::new(client.clone(), &informers)?;
    let csr_approver = certificates::approver::CsrApprover::new(client.clone(), &informers)?;
    let claim_binder = volume::binder::ClaimBinder::new(
        client.clone(),
        &informers,
        volume::local_path::LocalPath {
            client: client.clone(),
            nodes: informers.cache(),
            root: config.local_path_root.clone(),
        },
    )?;
    let volumes = volume::reclaim::VolumeController::new(client.clone(), &informers)?;
    let claim_protection = volume::protection::ClaimProtection::new(client.clone(), &informers)?;
    let volume_protection = volume::protection::VolumeProtection::new(client.clone(), &informers)?;
    if config.default_storage_class {
        let client = client.clone();
        tokio::spawn(async move { volume::local_path::ensure_default_class(&client).await });
    }
    let root_ca = config.root_ca_file.clone().or_else(|| {
        config
            .cluster_signing_dir
            .as_ref()
            .map(|d| d.join("ca.crt"))
    });
    let root_ca_publisher = match root_ca {
        Some(path) => Some(rootcacert::RootCaPublisher::new(
            client.clone(),
            &informers,
            std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("--root-ca-file {}: {e}", path.display()))?,
        )?),
        None => None,
    };
    let bootstrap_signer =
        certificates::bootstrapsigner::BootstrapSigner::new(client.clone(), &informers)?;
    let csr_signer = match &config.cluster_signing_dir {
        Some(dir) => Some(certificates::signer::CsrSigner::new(
            client.clone(),
            &informers,
            minik8s_pki::Ca::load(dir)
                .map_err(|e| anyhow::anyhow!("--cluster-signing-dir {}: {e}", dir.display()))?,
        )?),
        None => None,
    };
    let ipam = match config.allocate_node_cidrs {
        true => Some(nodeipam::NodeIpamController::new(
            client.clone(),
            &informers,
            nodeipam::Range::new(&config.cluster_cidr, config.node_cidr_mask_size)
                .map_err(anyhow::Error::msg)?,
        )?),
        false => None,
    };
    let service_lb = match config.service_lb {
        true => Some(servicelb::ServiceLb::new(client.clone(), &informers)?),
        false => None,
    };
    informers.start();
    informers.wait_synced().await;
    tracing::info!(
        kinds = informers.kinds(),
        "informers synced; controllers start"
    );
    let workers = config.workers;
    tokio::join!(
        replicasets.run(workers),
        replication.run(workers),
        deployments.run(workers),
        daemons.run(workers),
        statefulsets.run(workers),
        leaderworkersets.run(workers),
        lws_groups.run(workers),
        disaggregated_sets.run(workers),
        functions.run(workers),
        endpoints.run(workers),
        gc.run(),
        nodes.run(workers),
        hpas.run(workers),
        namespaces.run(config.concurrent_namespace_syncs),
        accounts.run(workers),
        jobs.run(workers),
        cron_jobs.run(workers),
        ttl.run(workers),
        quotas.run(workers),
        resource_claims.run(workers),
        disruption.run(workers),
        csr_approver.run(workers),
        claim_binder.run(workers),
        volumes.run(workers),
        claim_protection.run(workers),
        volume_protection.run(workers),
        async {
            if let Some(publisher) = root_ca_publisher {
                publisher.run(workers).await
            }
        },
        bootstrap_signer.run(1),
        async {
            if let Some(lb) = service_lb {
                lb.run(workers).await
            }
        },
        async {
            if let Some(signer) = csr_signer {
                signer.run(workers).await
            }
        },
        async {
            if let Some(ipam) = ipam {
                // One worker: allocation is serial by design.
                ipam.run(1).await
            }
        },
    );
    Ok(())
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
