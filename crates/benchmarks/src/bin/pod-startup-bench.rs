//! `pod-startup-bench`: pod startup time through minik8s against bare Docker.
//!
//! Starts the real `master` and `kubelet` binaries (from this target directory)
//! on the running dockerd, then, one pod at a time:
//! - minik8s: create a pod (pause + one app container) → Running and ready, seen through a watch;
//! - baseline: `create + start` of the same pause and app containers through the Docker API.
//!
//! Prints p50/p99 of both and their ratio, and the memory (RSS) of master and
//! of the kubelet with the pods running. Usage: `pod-startup-bench [PODS]`.
//!
//! `pod-startup-bench --burst N [--rounds R] [--concurrency C]`: a ReplicaSet
//! of N such pods, create → every pod Running and ready (first and last), against
//! N pause+app pairs created and started through the Docker API by C workers
//! (default: the kubelet's `--max-parallel-starts`), R rounds each (default 3).
//!
//! `pod-startup-bench --lifecycle N`: N pods with an init container and a
//! sidecar, one at a time, against the same containers started in sequence
//! on bare Docker (`lifecycle.rs`).
//!
//! Needs a dockerd (`scripts/quickstart.sh` starts one); not a test.

use kubelet::runtime::ContainerRuntime;
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use serde_json::json;
use std::time::Duration;

use benchmarks as bench_util;

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--burst") {
        return bench_util::burst::run(&args[1..]).await;
    }
    if args.first().map(String::as_str) == Some("--lifecycle") {
        return bench_util::lifecycle::run(&args[1..]).await;
    }
    let pods: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-bench";
    let runtime = kubelet::runtime::DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let cluster = bench_util::LocalCluster::start(&socket, network, "10.199.0.0/24").await?;
    let client = cluster.client.clone();
    let (master, kubelet) = (&cluster.master, &cluster.kubelet);

    // minik8s: create → Running and ready, through the scheduler and the kubelet.
    let api = client.dynamic(registry::of::<Pod>(), Some("default"));
    let mut through_minik8s = Vec::new();
    for i in 0..pods {
        let name = format!("bench-{i}");
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                         "spec": {"containers": [{"name": "app", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}});
        let ms = bench_util::create_until(&api, pod, |p| {
            p["status"]["phase"] == "Running"
                && p["status"]["containerStatuses"]
                    .as_array()
                    .is_some_and(|c| c.iter().all(|s| s["ready"] == true))
        })
        .await?;
        through_minik8s.push(ms);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (master_mib, kubelet_mib) = (
        bench_util::rss_mib(&master.0.id().to_string()),
        bench_util::rss_mib(&kubelet.0.id().to_string()),
    );

    // Baseline: the same two containers, created and started directly.
    let mut bare = bench_util::bare_pods(&runtime, network, pods).await?;
    // Deleting the pods lets the kubelet remove their containers before it stops.
    for i in 0..pods {
        let _ = api
            .delete(
                &format!("bench-{i}"),
                &minik8s_client::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
    }
    for _ in 0..300 {
        if runtime
            .list(None)
            .await?
            .iter()
            .all(|c| !c.pod_name.starts_with("bench-"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;

    through_minik8s.sort_by(f64::total_cmp);
    bare.sort_by(f64::total_cmp);
    let (m50, m99, b50, b99) = (
        bench_util::percentile(&through_minik8s, 0.5),
        bench_util::percentile(&through_minik8s, 0.99),
        bench_util::percentile(&bare, 0.5),
        bench_util::percentile(&bare, 0.99),
    );
    println!("# pod startup benchmark\n");
    println!(
        "date: {}  \n{pods} pods one at a time (pause + one busybox container), dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        runtime.version().await.unwrap_or_default()
    );
    println!("| path | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    println!("| minik8s: create → Running and ready (watch) | {m50:.0} | {m99:.0} |");
    println!("| bare Docker: create + start pause and app | {b50:.0} | {b99:.0} |");
    println!("| ratio | {:.2} | {:.2} |", m50 / b50, m99 / b99);
    println!("\nmemory with {pods} pods running: master {master_mib:.0} MiB, kubelet {kubelet_mib:.0} MiB (RSS)");
    Ok(())
}
