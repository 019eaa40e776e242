//! `scheduler`: binds unscheduled pods to nodes.
use clap::Parser;

/// mimalloc instead of glibc's malloc: the scheduler allocates and frees many small
/// JSON values, and glibc's allocator was a quarter of the CPU at 1,000
/// hollow nodes (see doc/benchmarks.md, "Scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "scheduler", version = minik8s_api::release::GIT_VERSION, about = "minik8s scheduler")]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// Pods whose spec.schedulerName is this are scheduled.
    #[arg(long, default_value = scheduler::DEFAULT_SCHEDULER)]
    scheduler_name: String,
    /// Act only while holding the kube-system/kube-scheduler Lease, so
    /// several schedulers can run and only one binds (Kubernetes' default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Also schedule pods asking for Volcano (schedulerName: volcano),
    /// gang-scheduled by their PodGroups; turn off when Volcano runs.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    serve_volcano: bool,
    /// Where /metrics is served over plain HTTP (the scheduling attempts,
    /// the work queue); empty: none.
    #[arg(long, default_value = "0.0.0.0:10259")]
    metrics_address: String,
    /// An OTLP/HTTP collector (`host:4318` or a URL) to send this
    /// component's traces to.
    #[arg(long)]
    tracing_endpoint: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _tracing = minik8s_trace::init(minik8s_trace::Options {
        process: "scheduler",
        endpoint: args.tracing_endpoint.clone(),
        ..Default::default()
    });
    let client = args.client.connect_limited(scheduler::API_RATE_LIMIT)?;
    let metrics = scheduler::metrics::Metrics::default();
    if !args.metrics_address.is_empty() {
        let addr = args.metrics_address.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = minik8s_process::metrics::serve(&addr, move || metrics.render()).await {
                tracing::warn!(error = %e, "no /metrics");
            }
        });
    }
    let config = scheduler::Config {
        scheduler_name: args.scheduler_name,
        serve_volcano: args.serve_volcano,
        metrics,
    };
    if !args.leader_elect {
        return scheduler::run(client, config).await;
    }
    let lease =
        minik8s_client::leader::Config::scheduler(&minik8s_client::leader::default_identity());
    minik8s_client::leader::run_as_leader(client.clone(), lease, scheduler::run(client, config))
        .await
}
