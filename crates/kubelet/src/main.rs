//! `kubelet`: runs this node's pods on Docker.
use clap::Parser;

#[derive(Parser)]
#[command(name = "kubelet", about = "minik8s node agent")]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// Run this many hollow nodes (no Docker; for scale benchmarks only),
    /// named `<node-name>-0` ... instead of a real kubelet.
    #[arg(long, default_value_t = 0)]
    hollow_nodes: usize,
    #[command(flatten)]
    config: kubelet::Config,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    let args = Args::parse();
    let client = args.client.connect()?;
    if args.hollow_nodes > 0 {
        let cfg = kubelet::hollow::HollowConfig {
            prefix: args.config.node_name.clone(),
            count: args.hollow_nodes,
            lease_seconds: 10,
            sync_seconds: 10,
        };
        return kubelet::hollow::run(client, cfg).await;
    }
    kubelet::run(client, args.config).await
}
