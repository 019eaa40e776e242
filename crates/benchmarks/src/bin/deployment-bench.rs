//! `deployment-bench`: a Deployment of N replicas on hollow nodes, from
//! create to all available and through a full rolling update, against a
//! ReplicaSet of N (the floor: the same pods without the Deployment layer).
//! Everything runs in this process: an in-process apiserver (embedded store),
//! the scheduler, the controller manager and the hollow nodes. Prints a
//! Markdown report; not a test. Usage: `deployment-bench [REPLICAS] [NODES]`.

use minik8s_api::k8s::api::apps::v1::{Deployment, ReplicaSet};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

fn template(app: &str, version: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest",
                                    "env": [{"name": "VERSION", "value": version}],
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}})
}

use benchmarks::int;

/// Seconds until `done` holds for the object `name` (polled every 20 ms).
async fn until(api: &DynamicApi, name: &str, done: impl Fn(&Value) -> bool) -> anyhow::Result<f64> {
    benchmarks::until_object(
        api,
        name,
        Duration::from_millis(20),
        Duration::from_secs(300),
        done,
    )
    .await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<i64> = benchmarks::numeric_args();
    let replicas = args.first().copied().unwrap_or(100);
    let nodes = args.get(1).copied().unwrap_or(10) as usize;
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    benchmarks::run_hollow_nodes(&client, nodes, 60, 10).await?;
    tokio::spawn(scheduler::run(client.clone(), scheduler::Config::default()));
    tokio::spawn(controller_manager::run(
        client.clone(),
        controller_manager::Config::default(),
    ));

    // The floor: a ReplicaSet of the same pods.
    let rs_api = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    rs_api
        .create(
            &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "floor"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "floor"}},
                     "template": template("floor", "1")}}),
        )
        .await?;
    let rs_secs = until(&rs_api, "floor", |o| {
        int(o, "/status/availableReplicas") == replicas
    })
    .await?;
    rs_api
        .delete("floor", &minik8s_client::DeleteParams::default())
        .await?;

    // The Deployment: create, then a rolling update of every pod (25 % / 25 %).
    let deploy_api = client.dynamic(registry::of::<Deployment>(), Some("default"));
    deploy_api
        .create(
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": template("web", "1")}}),
        )
        .await?;
    let settled = |o: &Value| {
        int(o, "/status/observedGeneration") == int(o, "/metadata/generation")
            && int(o, "/status/updatedReplicas") == replicas
            && int(o, "/status/availableReplicas") == replicas
            && int(o, "/status/replicas") == replicas
    };
    let create_secs = until(&deploy_api, "web", settled).await?;
    deploy_api
        .patch(
            "web",
            None,
            minik8s_client::rest::content::MERGE_PATCH,
            &json!({"spec": {"template": template("web", "2")}}),
        )
        .await?;
    let roll_secs = until(&deploy_api, "web", settled).await?;

    println!("# Deployment benchmark\n");
    println!(
        "date: {}  \n{replicas} replicas on {nodes} hollow nodes; in-process apiserver (embedded store), scheduler, controller manager\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    println!("| step | seconds |");
    println!("|---|---:|");
    println!("| ReplicaSet of {replicas}: create → all available (the floor) | {rs_secs:.2} |");
    println!("| Deployment of {replicas}: create → all available | {create_secs:.2} |");
    println!(
        "| Deployment: rolling update of every pod (maxSurge 25 %, maxUnavailable 25 %) → all updated and available | {roll_secs:.2} |"
    );
    println!(
        "\ncreate, Deployment / ReplicaSet: {:.2}",
        create_secs / rs_secs
    );
    Ok(())
}
