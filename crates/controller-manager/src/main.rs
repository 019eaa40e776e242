//! `controller-manager`: runs the controllers against an apiserver.
use clap::Parser;

/// mimalloc instead of glibc's malloc: the controller manager allocates and frees many small
/// JSON values, and glibc's allocator was a quarter of the CPU at 1,000
/// hollow nodes (see doc/benchmarks.md, "Scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "controller-manager", version = minik8s_api::release::GIT_VERSION, about = "minik8s controller manager")]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    #[command(flatten)]
    controllers: controller_manager::Config,
    /// Act only while holding the kube-system/kube-controller-manager Lease,
    /// so several controller managers can run and only one acts.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Where /metrics is served (queue depth, reconcile counts).
    #[arg(long, default_value = "0.0.0.0:10257")]
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
        process: "controller-manager",
        endpoint: args.tracing_endpoint.clone(),
        ..Default::default()
    });
    let client = args
        .client
        .connect_limited(controller_manager::API_RATE_LIMIT)?;
    let metrics_address = args.metrics_address.clone();
    let metrics = args.controllers.metrics.clone();
    tokio::spawn(async move {
        if let Err(e) = controller_manager::metrics::serve(&metrics_address, metrics).await {
            tracing::warn!(error = %e, "metrics server");
        }
    });
    if !args.leader_elect {
        return controller_manager::run(client, args.controllers).await;
    }
    let identity = controller_manager::leader::default_identity();
    let cfg = controller_manager::leader::Config::controller_manager(&identity);
    controller_manager::leader::run_as_leader(
        client.clone(),
        cfg,
        controller_manager::run(client, args.controllers),
    )
    .await
}
