//! `website-operator`: runs the Website controller against the cluster of
//! the current kubeconfig; `website-operator crd` prints the CRD to apply first.

use kube::CustomResourceExt;
use website_operator::Website;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    if std::env::args().nth(1).as_deref() == Some("crd") {
        print!("{}", serde_yaml::to_string(&Website::crd())?);
        return Ok(());
    }
    let client = kube::Client::try_default().await?;
    website_operator::run(client).await;
    Ok(())
}
