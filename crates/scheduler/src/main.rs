//! `scheduler`: binds unscheduled pods to nodes.
use clap::Parser;

#[derive(Parser)]
#[command(name = "scheduler", about = "minik8s scheduler")]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// Pods whose spec.schedulerName is this are scheduled.
    #[arg(long, default_value = scheduler::DEFAULT_SCHEDULER)]
    scheduler_name: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    let args = Args::parse();
    let client = args.client.connect_limited(scheduler::API_RATE_LIMIT)?;
    scheduler::run(
        client,
        scheduler::Config {
            scheduler_name: args.scheduler_name,
        },
    )
    .await
}
