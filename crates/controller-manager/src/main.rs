//! `controller-manager`: runs the controllers against an apiserver.
use clap::Parser;

#[derive(Parser)]
#[command(name = "controller-manager", about = "minik8s controller manager")]
struct Args {
    /// The apiserver URL.
    #[arg(long)]
    server: Option<String>,
    /// A kubeconfig naming the apiserver.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Workers per controller.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    let args = Args::parse();
    let target =
        minik8s_client::config::resolve(args.server.as_deref(), args.kubeconfig.as_deref())?;
    controller_manager::run(minik8s_client::Client::new(&target.server), args.workers).await
}
