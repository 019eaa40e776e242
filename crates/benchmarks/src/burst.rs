//! `pod-startup-bench --burst N`: a burst of N pods on one real node, against
//! the Docker floor at the same concurrency.
//!
//! ```text
//!  minik8s: create ReplicaSet(N) ─▶ controller ─▶ N pods ─▶ scheduler ─▶ kubelet ─▶ Docker ─▶ status ─▶ watch
//!  floor:   C workers, each: create+start pause, create+start app (the same containers), N pairs in all
//! ```
//!
//! Both report when the first and the last pod (pair) was up, from the moment
//! the burst was asked for; the pod side also when each pod object existed and
//! was bound, to show where the time goes.

use crate::{percentile, LocalCluster};
use futures::StreamExt;
use kubelet::runtime::{ContainerRuntime, DockerRuntime};
use minik8s_api::k8s::api::apps::v1::ReplicaSet;
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{DeleteParams, ListParams, WatchEvent};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When each pod of one burst reached each stage, in ms from the ReplicaSet's creation.
#[derive(Default)]
struct PodTimes {
    created: HashMap<String, f64>,
    bound: HashMap<String, f64>,
    running: HashMap<String, f64>,
}

fn sorted(m: &HashMap<String, f64>) -> Vec<f64> {
    let mut v: Vec<f64> = m.values().copied().collect();
    v.sort_by(f64::total_cmp);
    v
}

fn flag(args: &[String], name: &str) -> Option<usize> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// Runs the burst benchmark; `args` are what follows `--burst`.
pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let pods: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20);
    let rounds = flag(args, "--rounds").unwrap_or(3);
    let concurrency = flag(args, "--concurrency").unwrap_or(kubelet::DEFAULT_PARALLEL_STARTS);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-burst";
    let runtime = DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let kubelet_args = vec!["--max-parallel-starts".to_string(), concurrency.to_string()];
    let cluster = LocalCluster::start_full(
        &socket,
        network,
        "10.198.0.0/24",
        |_| Vec::new(),
        kubelet_args,
    )
    .await?;
    let runtime = Arc::new(runtime);

    let mut minik8s = Vec::new();
    let mut floor = Vec::new();
    for round in 0..rounds {
        // Alternate which goes first, so neither always meets a warmer daemon.
        if round % 2 == 0 {
            minik8s.push(through_minik8s(&cluster, &runtime, pods, round).await?);
            floor.push(bare_docker(&runtime, network, pods, concurrency, round).await?);
        } else {
            floor.push(bare_docker(&runtime, network, pods, concurrency, round).await?);
            minik8s.push(through_minik8s(&cluster, &runtime, pods, round).await?);
        }
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;

    println!("# pod burst benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \n{pods} pods (pause + one busybox container) at once, on one node; \
         floor: {pods} pairs through the Docker API by {concurrency} workers; dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        crate::machine(),
        runtime.version().await.unwrap_or_default()
    );
    println!("| round | pods exist ms | all bound ms | first Running ms | all Running ms | floor: first pair ms | floor: all pairs ms | ratio (all) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (m, f)) in minik8s.iter().zip(&floor).enumerate() {
        let (created, bound, running) = (sorted(&m.created), sorted(&m.bound), sorted(&m.running));
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
            i + 1,
            created.last().unwrap_or(&0.0),
            bound.last().unwrap_or(&0.0),
            running.first().unwrap_or(&0.0),
            running.last().unwrap_or(&0.0),
            f.first().unwrap_or(&0.0),
            f.last().unwrap_or(&0.0),
            running.last().unwrap_or(&0.0) / f.last().unwrap_or(&1.0)
        );
    }
    let mut ratios: Vec<f64> = minik8s
        .iter()
        .zip(&floor)
        .map(|(m, f)| sorted(&m.running).last().unwrap_or(&0.0) / f.last().unwrap_or(&1.0))
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nmedian ratio, all Running / all pairs started: {:.2} (target ≤ 1.5)",
        percentile(&ratios, 0.5)
    );
    Ok(())
}

/// One burst through minik8s: a ReplicaSet of `pods`, until every pod is
/// Running and ready (seen through a watch); then it is deleted and its
/// containers are waited out.
async fn through_minik8s(
    cluster: &LocalCluster,
    runtime: &DockerRuntime,
    pods: usize,
    round: usize,
) -> anyhow::Result<PodTimes> {
    let client = &cluster.client;
    let name = format!("burst-{round}");
    let pod_api = client.dynamic(registry::of::<Pod>(), Some("default"));
    let rs_api = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let selector = format!("burst={name}");
    let rv = pod_api
        .list(&ListParams::default().labels(&selector))
        .await?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut watch = pod_api
        .watch(&ListParams::default().labels(&selector), &rv, false)
        .await?;
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": pods, "selector": {"matchLabels": {"burst": name}},
                 "template": {"metadata": {"labels": {"burst": name}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "app", "image": "minik8s/busybox:latest",
                                             "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}}}});
    let t = Instant::now();
    rs_api.create(&rs).await?;
    let mut times = PodTimes::default();
    while times.running.len() < pods {
        let ev = tokio::time::timeout(Duration::from_secs(120), watch.next())
            .await
            .map_err(|_| {
                anyhow::anyhow!("{} of {pods} pods Running after 120 s", times.running.len())
            })?;
        let p = match ev {
            Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => p,
            Some(Err(e)) => anyhow::bail!("watching the burst's pods: {e}"),
            None => anyhow::bail!("the pod watch ended"),
            Some(Ok(_)) => continue,
        };
        let now = t.elapsed().as_secs_f64() * 1000.0;
        let pod_name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
        times.created.entry(pod_name.clone()).or_insert(now);
        if p["spec"]["nodeName"].is_string() {
            times.bound.entry(pod_name.clone()).or_insert(now);
        }
        let ready = p["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|s| s["ready"] == true));
        if p["status"]["phase"] == "Running" && ready {
            times.running.entry(pod_name).or_insert(now);
        }
    }
    rs_api.delete(&name, &DeleteParams::default()).await?;
    let gone = |cs: &[kubelet::runtime::ContainerInfo]| {
        !cs.iter()
            .any(|c| c.pod_name.starts_with(&format!("{name}-")))
    };
    for _ in 0..600 {
        if gone(&runtime.list(None).await?) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(
        gone(&runtime.list(None).await?),
        "the burst's containers are still there 60 s after its ReplicaSet was deleted"
    );
    Ok(times)
}

/// The floor: `pods` pause+app pairs created and started directly through
/// the Docker API by `concurrency` workers; when each pair was up (ms, sorted).
async fn bare_docker(
    runtime: &Arc<DockerRuntime>,
    network: &str,
    pods: usize,
    concurrency: usize,
    round: usize,
) -> anyhow::Result<Vec<f64>> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (runtime, next, network) = (runtime.clone(), next.clone(), network.to_string());
        workers.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= pods {
                    return Ok::<_, anyhow::Error>(done);
                }
                let pause = runtime
                    .create_and_start(
                        &format!("burst-bare-{round}-pause-{i}"),
                        crate::bare_pause(&network),
                    )
                    .await?;
                let app = runtime
                    .create_and_start(
                        &format!("burst-bare-{round}-app-{i}"),
                        crate::bare_busybox(&pause, &["sleep", "3600"]),
                    )
                    .await?;
                done.push((t.elapsed().as_secs_f64() * 1000.0, [app, pause]));
            }
        }));
    }
    let mut up = Vec::new();
    let mut ids = Vec::new();
    for w in workers {
        for (ms, pair) in w.await?? {
            up.push(ms);
            ids.extend(pair);
        }
    }
    for id in ids {
        runtime.remove(&id).await?;
    }
    up.sort_by(f64::total_cmp);
    Ok(up)
}
