//! minik8s serverless: the gateway every function call passes through and
//! the autoscaler that scales functions from and to zero. It runs in the
//! `master` process (`--serverless-port`, 8090) beside the controller manager,
//! whose function controller turns each Function into a Deployment and a
//! Service (`controller-manager/src/function.rs`). See doc/serverless.md.
//!
//! ```text
//!   caller ─▶ :8090 gateway.rs ─▶ instance (pod :8080, runtime images/function-runtime)
//!                │ calls in flight
//!                ▼
//!             scaler.rs (sample 10/s, decide 1/s: autoscaler.rs) ─▶ Deployment NAME-fn /scale
//!   kube-system/serverless-gateway: Service + EndpointSlice (this address) + Ingress functions.minik8s
//!   WorkflowRun ─▶ workflow/ (executor: each step a call through the gateway) ─▶ run status
//!   schedules, API object changes ─▶ triggers.rs ─▶ a call through the gateway ─▶ Event on the Function
//! ```

pub mod autoscaler;
pub mod calls;
pub mod gateway;
pub mod scaler;
pub mod triggers;
pub mod workflow;

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s_api::registry;
use minik8s_api::serverless::Function;
use minik8s_client::{Client, SharedInformers};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The in-cluster name of the gateway: `http://serverless-gateway.kube-system.svc.cluster.local`.
pub const SERVICE: &str = "serverless-gateway";
pub const NAMESPACE: &str = "kube-system";
/// The Ingress host that reaches the gateway.
pub const HOST: &str = "functions.minik8s";

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The address pods and other nodes reach this gateway at: published as
    /// the endpoint of `kube-system/serverless-gateway`. None: not published.
    pub advertise: Option<Ipv4Addr>,
    /// How long a call waits for a first instance of its function.
    pub cold_start_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: (Ipv4Addr::UNSPECIFIED, 8090).into(),
            advertise: None,
            cold_start_timeout: Duration::from_secs(60),
        }
    }
}

/// Binds, starts the gateway and the autoscaler, and returns the bound address.
pub async fn start(client: Client, config: Config) -> anyhow::Result<SocketAddr> {
    let client = client.with_user_agent("serverless-gateway");
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding the serverless gateway to {}", config.listen))?;
    let addr = listener.local_addr()?;
    let informers = SharedInformers::new(&client);
    let scaler = scaler::Scaler::new(client.clone(), informers.cache::<Deployment>());
    // Only the functions' pods, not every pod of the cluster.
    let mut pods = minik8s_client::Informer::new(
        minik8s_client::Api::<Pod>::all(&client),
        minik8s_client::ListParams::default().labels(minik8s_api::serverless::FUNCTION_LABEL),
    );
    let gateway = Arc::new(gateway::Gateway::new(
        informers.cache::<Function>(),
        informers.cache::<EndpointSlice>(),
        pods.cache(),
        scaler.clone(),
        config.cold_start_timeout,
    ));
    let wake = gateway.endpoints_changed.clone();
    informers
        .on_event::<EndpointSlice>(move |_| wake.notify_waiters())
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let wake = gateway.endpoints_changed.clone();
    pods.on_event(move |_| wake.notify_waiters());
    tokio::spawn(pods.run());
    let executor = workflow::Executor::new(
        client.clone(),
        gateway.clone(),
        informers.cache::<minik8s_api::workflow::WorkflowRun>(),
        informers.cache::<minik8s_api::workflow::Workflow>(),
    );
    let runs = executor.clone();
    informers
        .on_event::<minik8s_api::workflow::WorkflowRun>(move |ev| runs.observe(ev.object()))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    informers.start();
    informers.wait_synced().await;
    tokio::spawn(scaler.run(gateway.functions.clone()));
    tokio::spawn(triggers::Triggers::new(client.clone(), gateway.clone()).run());
    if let Some(ip) = config.advertise {
        let client = client.clone();
        tokio::spawn(async move { publish(&client, ip, addr.port()).await });
    }
    let app = gateway.router();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "serverless gateway stopped");
        }
    });
    tracing::info!(%addr, "serverless gateway listening");
    Ok(addr)
}

/// Makes the gateway reachable in the cluster: a Service without selector
/// whose EndpointSlice names `ip:port` (as the `kubernetes` Service names the
/// apiserver), and an Ingress for `functions.minik8s`.
async fn publish(client: &Client, ip: Ipv4Addr, port: u16) {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": SERVICE}},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}});
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {
            "kubernetes.io/service-name": SERVICE,
            "endpointslice.kubernetes.io/managed-by": "serverless-gateway.minik8s.io"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}]});
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "spec": {"rules": [{"host": HOST, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": SERVICE, "port": {"number": 80}}}}]}}]}});
    for obj in [svc, slice, ingress] {
        for attempt in 1..=30 {
            match put(client, &obj).await {
                Ok(()) => break,
                // Refused for what it is: trying again changes nothing.
                Err(e) if e.api().is_some_and(|a| a.code == 422) => {
                    tracing::error!(error = %e, kind = %obj["kind"], "the gateway's object was refused");
                    break;
                }
                Err(e) if attempt == 30 => {
                    tracing::error!(error = %e, kind = %obj["kind"], "could not publish the gateway");
                }
                Err(e) => {
                    tracing::debug!(attempt, error = %e, kind = %obj["kind"], "publishing the gateway");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// Creates `obj`, or replaces what is there (the address may have changed).
async fn put(client: &Client, obj: &Value) -> Result<(), minik8s_client::ClientError> {
    let info = registry::by_kind(
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or(""),
    )
    .expect("built-in kind");
    let api = client.dynamic(info, Some(NAMESPACE));
    match api.create(obj).await {
        Ok(_) => Ok(()),
        Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let mut patch = obj.clone();
            if let Some(m) = patch.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            api.patch(
                name,
                None,
                minik8s_client::rest::content::MERGE_PATCH,
                &patch,
            )
            .await
            .map(|_| ())
        }
        Err(e) => Err(e),
    }
}
