//! `prometheus-sd`: Kubernetes service discovery for a Prometheus built
//! without it (Debian's), over HTTP SD (see the crate docs).
use clap::Parser;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use minik8s_client::shared::SharedInformers;

#[derive(Parser)]
#[command(
    name = "prometheus-sd",
    about = "Prometheus HTTP service discovery for a minik8s cluster"
)]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// Where `/targets?role=node|pod|service|endpoints` is served (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:9091")]
    listen: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_process::init_logging();
    let args = Args::parse();
    let client = args.client.connect_limited((20.0, 40))?;
    let informers = SharedInformers::new(&client);
    let (nodes, pods) = (informers.cache::<Node>(), informers.cache::<Pod>());
    let (services, endpoints) = (informers.cache::<Service>(), informers.cache::<Endpoints>());
    informers.start();
    informers.wait_synced().await;
    tracing::info!(listen = %args.listen, "serving Prometheus HTTP SD");
    minik8s_process::metrics::serve_paths(&args.listen, move |path, query| {
        if path != "/targets" {
            return None;
        }
        let role = query
            .split('&')
            .find_map(|p| p.strip_prefix("role="))
            .unwrap_or("");
        let groups = match role {
            "node" => prometheus_sd::targets::node_groups(&nodes.list()),
            "pod" => prometheus_sd::targets::pod_groups(&pods.list()),
            "service" => prometheus_sd::targets::service_groups(&services.list()),
            "endpoints" => {
                let (services, pods) = (&services, &pods);
                prometheus_sd::targets::endpoints_groups(
                    &endpoints.list(),
                    |key| services.get(key),
                    |key| pods.get(key),
                )
            }
            _ => return None,
        };
        Some((
            "application/json",
            serde_json::Value::from(groups).to_string(),
        ))
    })
    .await?;
    Ok(())
}
