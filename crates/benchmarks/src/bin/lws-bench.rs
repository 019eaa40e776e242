//! `lws-bench`: a LeaderWorkerSet of GROUPS groups of SIZE pods on hollow
//! nodes, from create to every group ready and through a full rolling update,
//! without and with gang scheduling, against a ReplicaSet of the same number
//! of pods (the floor: the same pods without the LWS layers). Everything runs
//! in this process: an in-process apiserver (embedded store), the scheduler,
//! the controller manager and the hollow nodes. Prints a Markdown report; not
//! a test. Usage: `lws-bench [GROUPS] [SIZE] [NODES]`.

use minik8s_api::k8s::api::apps::v1::ReplicaSet;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::registry;
use minik8s_client::{Client, DeleteParams, DynamicApi, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn template(app: &str, version: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest",
                                    "env": [{"name": "VERSION", "value": version}],
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}})
}

use benchmarks::int;

/// Seconds until `done` holds for the object `name` (polled every 50 ms).
async fn until(api: &DynamicApi, name: &str, done: impl Fn(&Value) -> bool) -> anyhow::Result<f64> {
    benchmarks::until_object(
        api,
        name,
        Duration::from_millis(50),
        Duration::from_secs(600),
        done,
    )
    .await
}

/// Waits until no pod with `selector` is left (between runs).
async fn drained(pods: &DynamicApi, selector: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    while pods.list(&ListParams::default().labels(selector)).await?["items"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        if t.elapsed() > Duration::from_secs(300) {
            anyhow::bail!("{selector}: pods left after 300 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// One LWS: (create → all ready, rolling update → all updated and ready).
async fn lws_run(
    api: &DynamicApi,
    pods: &DynamicApi,
    name: &str,
    groups: i64,
    size: i64,
    gang: bool,
) -> anyhow::Result<(f64, f64)> {
    let annotations = if gang {
        json!({"minik8s.io/gang-scheduling": "true"})
    } else {
        json!({})
    };
    api.create(&json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": groups, "leaderWorkerTemplate": {"size": size, "workerTemplate": template(name, "1")}}}))
        .await?;
    let settled = |o: &Value| {
        int(o, "/status/observedGeneration") == int(o, "/metadata/generation")
            && int(o, "/status/readyReplicas") == groups
            && int(o, "/status/updatedReplicas") == groups
            && int(o, "/status/replicas") == groups
    };
    let create = until(api, name, settled).await?;
    api.patch(
        name,
        None,
        minik8s_client::rest::content::MERGE_PATCH,
        &json!({"spec": {"leaderWorkerTemplate": {"workerTemplate": template(name, "2")}}}),
    )
    .await?;
    let roll = until(api, name, settled).await?;
    api.delete(name, &DeleteParams::default()).await?;
    drained(pods, &format!("leaderworkerset.sigs.k8s.io/name={name}")).await?;
    Ok((create, roll))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<i64> = benchmarks::numeric_args();
    let groups = args.first().copied().unwrap_or(100);
    let size = args.get(1).copied().unwrap_or(8);
    let nodes = args.get(2).copied().unwrap_or(20) as usize;
    let pods_total = groups * size;
    let server = TestServer::start_with(Backend::Embedded, |c| c.watch_cache_size = 50_000).await;
    let client = Client::new(&server.url);
    benchmarks::run_hollow_nodes(&client, nodes, 60, 10).await?;
    tokio::spawn(scheduler::run(client.clone(), scheduler::Config::default()));
    tokio::spawn(controller_manager::run(
        client.clone(),
        controller_manager::Config::default(),
    ));
    let pods = client.dynamic(registry::by_kind("v1", "Pod").unwrap(), Some("default"));

    // The floor: a ReplicaSet of the same number of pods.
    let rs_api = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    rs_api
        .create(
            &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "floor"},
            "spec": {"replicas": pods_total, "selector": {"matchLabels": {"app": "floor"}},
                     "template": template("floor", "1")}}),
        )
        .await?;
    let rs_secs = until(&rs_api, "floor", |o| {
        int(o, "/status/readyReplicas") == pods_total
    })
    .await?;
    rs_api.delete("floor", &DeleteParams::default()).await?;
    drained(&pods, "app=floor").await?;

    let lws_api = client.dynamic(registry::of::<LeaderWorkerSet>(), Some("default"));
    let (plain_create, plain_roll) = lws_run(&lws_api, &pods, "plain", groups, size, false).await?;
    let (gang_create, gang_roll) = lws_run(&lws_api, &pods, "gang", groups, size, true).await?;

    println!("# LeaderWorkerSet benchmark\n");
    println!(
        "date: {}  \n{groups} groups of {size} ({pods_total} pods) on {nodes} hollow nodes; in-process apiserver (embedded store), scheduler, controller manager; {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    println!("| step | seconds |");
    println!("|---|---:|");
    println!("| ReplicaSet of {pods_total}: create → all ready (the floor) | {rs_secs:.2} |");
    println!("| LWS: create → all {groups} groups ready | {plain_create:.2} |");
    println!("| LWS: rolling update of every group (maxUnavailable 1) → all updated and ready | {plain_roll:.2} |");
    println!("| LWS with gang scheduling: create → all groups ready | {gang_create:.2} |");
    println!(
        "| LWS with gang scheduling: rolling update → all updated and ready | {gang_roll:.2} |"
    );
    println!(
        "\ncreate, LWS / ReplicaSet: {:.2}; with gangs: {:.2}",
        plain_create / rs_secs,
        gang_create / rs_secs
    );
    Ok(())
}
