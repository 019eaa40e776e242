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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    apiserver::run(Args::parse().config).await
}
