//! `kubelet`: runs this node's pods on Docker.
use clap::Parser;
use std::sync::{Arc, OnceLock};

#[derive(Parser)]
#[command(name = "kubelet", version = minik8s_api::release::GIT_VERSION, about = "minik8s node agent")]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// Run this many hollow nodes (no Docker; for scale benchmarks only),
    /// named `<node-name>-0` ... instead of a real kubelet.
    #[arg(long, default_value_t = 0)]
    hollow_nodes: usize,
    /// Join with this bootstrap token (`abcdef.0123456789abcdef`, or a file
    /// holding one, e.g. the master's pki/join-token) if
    /// `--kubeconfig` does not exist yet: get a node certificate from the
    /// apiserver at `--server` and write the kubeconfig there.
    #[arg(long)]
    bootstrap_token: Option<String>,
    /// With --bootstrap-token: also get this node's kube-proxy a
    /// `system:kube-proxy` kubeconfig at this path.
    #[arg(long)]
    kube_proxy_kubeconfig: Option<std::path::PathBuf>,
    /// An OTLP/HTTP collector (`host:4318` or a URL) to send this node's
    /// traces to, besides its apiserver's store of recent traces.
    #[arg(long)]
    tracing_endpoint: Option<String>,
    #[command(flatten)]
    config: kubelet::Config,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    let connected = Arc::new(OnceLock::new());
    let _tracing = minik8s_trace::init(minik8s_trace::Options {
        process: "kubelet",
        endpoint: args.tracing_endpoint.clone(),
        store: None,
        to_apiserver: (args.hollow_nodes == 0)
            .then(|| minik8s_client::traces::to_apiserver(connected.clone())),
    });
    if let Some(given) = &args.bootstrap_token {
        let token = if given.contains('/') {
            std::fs::read_to_string(given)
                .map_err(|e| anyhow::anyhow!("--bootstrap-token {given}: {e}"))?
                .trim()
                .to_string()
        } else {
            given.clone()
        };
        let token = &token;
        let (Some(server), Some(kubeconfig)) = (&args.client.server, &args.client.kubeconfig)
        else {
            anyhow::bail!("--bootstrap-token needs --server (the apiserver's https URL) and --kubeconfig (where to write this node's)");
        };
        kubelet::bootstrap::join(
            server,
            token,
            &args.config.node_name,
            kubeconfig,
            args.kube_proxy_kubeconfig.as_deref(),
        )
        .await?;
        // From now on the written kubeconfig says where and who.
        args.client.server = None;
    }
    let target = args.client.resolve()?;
    args.config.client_ca_pem = target.credentials.ca_pem.clone();
    let client = minik8s_client::Client::for_target(&target)?;
    kubelet::check_local_config(&args.config)?;
    minik8s_client::skew::require_supported(&client, "kubelet", kubelet::node::KUBELET_VERSION)
        .await
        .map_err(anyhow::Error::msg)?;
    if args.hollow_nodes > 0 {
        let cfg = kubelet::hollow::HollowConfig {
            prefix: args.config.node_name.clone(),
            count: args.hollow_nodes,
            lease_seconds: 10,
            sync_seconds: 10,
            fake_gpus: 0,
        };
        return kubelet::hollow::run(client, cfg).await;
    }
    let (qps, burst) = kubelet::API_RATE_LIMIT;
    let client = client.with_rate_limit(
        args.client.kube_api_qps.unwrap_or(qps),
        args.client.kube_api_burst.unwrap_or(burst),
    );
    let _ = connected.set(client.clone());
    kubelet::run(client, args.config).await
}
