//! `apiserver`: serves the Kubernetes API for minik8s.
use clap::Parser;

#[derive(Parser)]
#[command(name = "apiserver", about = "minik8s API server")]
struct Args {
    #[command(flatten)]
    config: apiserver::Config,
}

fn main() -> anyhow::Result<()> {
    // Resident memory follows what the apiserver holds, not its highest
    // peak (see minik8s_client::memory).
    minik8s_client::memory::run(async {
        minik8s_client::init_logging();
        apiserver::run(Args::parse().config).await
    })
}
