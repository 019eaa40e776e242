//! `apiserver`: serves the Kubernetes API for minik8s.
use clap::Parser;

#[derive(Parser)]
#[command(name = "apiserver", about = "minik8s API server")]
struct Args {
    #[command(flatten)]
    config: apiserver::Config,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    apiserver::run(Args::parse().config).await
}
