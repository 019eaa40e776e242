//! `apiserver`: serves the Kubernetes API for minik8s.
use clap::Parser;

#[derive(Parser)]
#[command(name = "apiserver", about = "minik8s API server")]
struct Args {
    #[command(flatten)]
    config: apiserver::Config,
}

fn main() -> anyhow::Result<()> {
    // Few malloc arenas, trimmed every 10 s: resident memory follows what
    // the apiserver holds, not its highest peak (see minik8s_client::memory).
    minik8s_client::memory::limit_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            minik8s_client::init_logging();
            tokio::spawn(minik8s_client::memory::trim_periodically(
                std::time::Duration::from_secs(10),
            ));
            apiserver::run(Args::parse().config).await
        })
}
