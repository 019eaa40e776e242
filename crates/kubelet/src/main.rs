//! `kubelet`: runs this node's pods on Docker.
use clap::Parser;

#[derive(Parser)]
#[command(name = "kubelet", about = "minik8s node agent")]
struct Args {
    /// The apiserver URL.
    #[arg(long)]
    server: Option<String>,
    /// A kubeconfig naming the apiserver.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    #[command(flatten)]
    config: kubelet::Config,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    let args = Args::parse();
    let target =
        minik8s_client::config::resolve(args.server.as_deref(), args.kubeconfig.as_deref())?;
    kubelet::run(minik8s_client::Client::new(&target.server), args.config).await
}
