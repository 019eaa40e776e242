//! `master`: the control plane in one process for lab use (as k3s does):
//! the apiserver, then the scheduler and the controller manager talking to it
//! like any client — over TLS on the secure port, each with its own client
//! certificate (`system:kube-scheduler`, `system:kube-controller-manager`)
//! from the cluster PKI the apiserver created; and the serverless gateway
//! (`minik8s-serverless`) on its own port.
use anyhow::Context;

use clap::Parser;

/// mimalloc instead of glibc's malloc: the master allocates and frees many small
/// JSON values, and glibc's allocator was a quarter of the CPU at 1,000
/// hollow nodes (see doc/benchmarks.md, "Scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "master",
    version = minik8s_api::release::GIT_VERSION,
    about = "minik8s control plane: apiserver + scheduler + controller manager"
)]
struct Args {
    #[command(flatten)]
    apiserver: apiserver::Config,
    #[command(flatten)]
    controllers: controller_manager::Config,
    /// Run the scheduler and the controller manager only while holding their
    /// Leases (kube-system/kube-scheduler, kube-controller-manager), so two or
    /// three masters on one etcd make an HA control plane.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The serverless gateway's port (functions are called at
    /// http://MASTER:PORT/function/NAMESPACE/NAME); 0: no gateway.
    #[arg(long, default_value_t = 8090)]
    serverless_port: u16,
    #[arg(skip)]
    apiserver_advertise: Option<std::net::Ipv4Addr>,
}

/// A client from one of the PKI's component kubeconfigs, else the loopback port.
fn component_client(
    pki: &std::path::Path,
    kubeconfig: &str,
    plain: &str,
    secure: bool,
) -> anyhow::Result<minik8s_client::Client> {
    if !secure {
        return Ok(minik8s_client::Client::new(plain));
    }
    let path = pki.join(kubeconfig);
    let target = minik8s_client::config::from_kubeconfig(&path)?;
    minik8s_client::Client::for_target(&target).with_context(|| format!("{}", path.display()))
}

fn main() -> anyhow::Result<()> {
    // Resident memory follows what the master holds, not its highest peak.
    minik8s_process::memory::run(run())
}

async fn run() -> anyhow::Result<()> {
    let mut args = Args::parse();
    // One tracer for the three components of this process: each span is
    // sent as its component's (see minik8s_trace::export).
    let _tracing = minik8s_trace::init(apiserver::tracing_options(&mut args.apiserver, "master"));
    let port = args
        .apiserver
        .listen
        .rsplit(':')
        .next()
        .unwrap_or("8080")
        .to_string();
    let plain = format!("http://127.0.0.1:{port}");
    let pki = apiserver::secure::pki_dir(&args.apiserver);

    args.apiserver_advertise = match args.apiserver.advertise_address {
        Some(std::net::IpAddr::V4(ip)) => Some(ip),
        _ => None,
    };
    let advertised = match args.apiserver.advertise_address {
        Some(ip) => ip.to_string(),
        None => args.apiserver.listen.clone(),
    };
    // One process, one /metrics (as k3s): the apiserver's serves the
    // scheduler's and the controllers' families too.
    // The scheduler's loop is counted with the controllers' (one
    // `workqueue_depth` family in the text).
    let controller_metrics = args.controllers.metrics.clone();
    let scheduler_metrics =
        scheduler::metrics::Metrics::with_loops(controller_metrics.controllers.clone());
    let attempts = scheduler_metrics.clone();
    args.apiserver.extra_metrics = apiserver::request_metrics::ExtraMetrics(vec![
        std::sync::Arc::new(move || attempts.render_attempts()),
        std::sync::Arc::new(move || controller_metrics.render()),
    ]);
    let api = apiserver::start(args.apiserver).await?;
    let secure = api.secure_addr.is_some();
    // The controller manager signs the certificates of joining kubelets with
    // the cluster CA (there is none without the secure port).
    if secure && args.controllers.cluster_signing_dir.is_none() {
        args.controllers.cluster_signing_dir = Some(pki.clone());
    }
    let (qps, burst) = scheduler::API_RATE_LIMIT;
    let sched =
        component_client(&pki, "scheduler.conf", &plain, secure)?.with_rate_limit(qps, burst);
    let (qps, burst) = controller_manager::API_RATE_LIMIT;
    let cm = component_client(&pki, "controller-manager.conf", &plain, secure)?
        .with_rate_limit(qps, burst);
    if args.serverless_port != 0 {
        // Every master serves calls; pods reach it at --advertise-address (or
        // this machine's default-route address) through the gateway Service.
        let advertise = args
            .apiserver_advertise
            .or_else(minik8s_api::net::default_route_source);
        let config = minik8s_serverless::Config {
            listen: (std::net::Ipv4Addr::UNSPECIFIED, args.serverless_port).into(),
            advertise,
            ..Default::default()
        };
        // The control plane runs without it rather than not at all (another
        // master on this machine may hold the port).
        if let Err(e) = minik8s_serverless::start(cm.clone(), config).await {
            tracing::error!(error = format!("{e:#}"), "no serverless gateway");
        }
    }
    let sched_config = scheduler::Config {
        metrics: scheduler_metrics,
        ..Default::default()
    };
    let (sched, controllers) = if args.leader_elect {
        use minik8s_client::leader::{run_as_leader, Config};
        // Stable across restarts of this master (it takes its Leases back at
        // once instead of waiting for them to expire), distinct between masters.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let identity = format!("{}_{}", host.trim(), advertised);
        (
            tokio::spawn(run_as_leader(
                sched.clone(),
                Config::scheduler(&identity),
                scheduler::run(sched, sched_config),
            )),
            tokio::spawn(run_as_leader(
                cm.clone(),
                Config::controller_manager(&identity),
                controller_manager::run(cm, args.controllers),
            )),
        )
    } else {
        (
            tokio::spawn(scheduler::run(sched, sched_config)),
            tokio::spawn(controller_manager::run(cm, args.controllers)),
        )
    };
    tokio::select! {
        r = api.wait() => r?,
        r = sched => r??,
        r = controllers => r??,
    }
    Ok(())
}
