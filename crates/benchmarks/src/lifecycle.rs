//! `pod-startup-bench --lifecycle N`: a pod with an init container and a
//! sidecar, create → Running and ready, against the same containers started
//! in sequence on bare Docker, one pod at a time, in one run.
//!
//! ```text
//!  minik8s: create pod ─▶ scheduler ─▶ kubelet: sandbox ▶ init (to its exit) ▶ sidecar ▶ app ─▶ status ─▶ watch
//!  floor:   create+start pause ▶ create+start init, wait for its exit ▶ create+start sidecar ▶ create+start app
//! ```

use crate::{percentile, LocalCluster};
use bollard::container::WaitContainerOptions;
use futures::StreamExt;
use kubelet::runtime::{ContainerRuntime, DockerRuntime};
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::DeleteParams;
use serde_json::json;
use std::time::{Duration, Instant};

fn busybox(name: &str, command: &[&str]) -> serde_json::Value {
    json!({"name": name, "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": command})
}

/// One pod through minik8s: create → Running with every container ready, in ms.
async fn through_minik8s(api: &minik8s_client::DynamicApi, name: &str) -> anyhow::Result<f64> {
    let mut sidecar = busybox("sidecar", &["sleep", "3600"]);
    sidecar["restartPolicy"] = json!("Always");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "initContainers": [busybox("init", &["true"]), sidecar],
                 "containers": [busybox("app", &["sleep", "3600"])]}});
    crate::create_until(api, pod, |p| {
        let all_ready = |list: &str| {
            p["status"][list]
                .as_array()
                .is_some_and(|c| c.iter().all(|s| s["ready"] == true))
        };
        p["status"]["phase"] == "Running"
            && all_ready("containerStatuses")
            && all_ready("initContainerStatuses")
    })
    .await
}

/// The same containers on bare Docker, in the order the kubelet starts them;
/// returns the time and the ids to remove.
async fn on_bare_docker(
    runtime: &DockerRuntime,
    network: &str,
    i: usize,
) -> anyhow::Result<(f64, Vec<String>)> {
    let t = Instant::now();
    let pause = runtime
        .create_and_start(&format!("bench-lc-pause-{i}"), crate::bare_pause(network))
        .await?;
    let joined = |cmd: &[&str]| crate::bare_busybox(&pause, cmd);
    let init = runtime
        .create_and_start(&format!("bench-lc-init-{i}"), joined(&["true"]))
        .await?;
    let mut exit = runtime
        .docker
        .wait_container(&init, None::<WaitContainerOptions<String>>);
    while let Some(item) = exit.next().await {
        item?;
    }
    let sidecar = runtime
        .create_and_start(&format!("bench-lc-sidecar-{i}"), joined(&["sleep", "3600"]))
        .await?;
    let app = runtime
        .create_and_start(&format!("bench-lc-app-{i}"), joined(&["sleep", "3600"]))
        .await?;
    Ok((
        t.elapsed().as_secs_f64() * 1000.0,
        vec![app, sidecar, init, pause],
    ))
}

/// Runs the benchmark; `args` are what follows `--lifecycle`.
pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let pods: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-lifecycle";
    let runtime = DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let cluster = LocalCluster::start(&socket, network, "10.198.0.0/24").await?;
    let api = cluster
        .client
        .dynamic(registry::of::<Pod>(), Some("default"));
    // Alternated, one pod at a time: both paths see the same machine.
    let (mut minik8s, mut bare, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pods {
        minik8s.push(through_minik8s(&api, &format!("bench-lc-{i}")).await?);
        let (ms, made) = on_bare_docker(&runtime, network, i).await?;
        bare.push(ms);
        ids.extend(made);
    }
    for id in ids {
        runtime.remove(&id).await?;
    }
    for i in 0..pods {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let _ = api.delete(&format!("bench-lc-{i}"), &dp).await;
    }
    for _ in 0..300 {
        let left = runtime.list(None).await?;
        if left.iter().all(|c| !c.pod_name.starts_with("bench-lc-")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;
    minik8s.sort_by(f64::total_cmp);
    bare.sort_by(f64::total_cmp);
    let (m50, m99) = (percentile(&minik8s, 0.5), percentile(&minik8s, 0.99));
    let (b50, b99) = (percentile(&bare, 0.5), percentile(&bare, 0.99));
    println!("# pod startup with an init container and a sidecar\n");
    println!(
        "date: {}  \n{pods} pods one at a time (pause, init `true`, sidecar and app `sleep`), dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        runtime.version().await.unwrap_or_default()
    );
    println!("| path | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    println!("| minik8s: create → Running, all ready (watch) | {m50:.0} | {m99:.0} |");
    println!("| bare Docker: pause, init to its exit, sidecar, app | {b50:.0} | {b99:.0} |");
    println!(
        "| ratio (target ≤ 1.1) | {:.2} | {:.2} |",
        m50 / b50,
        m99 / b99
    );
    Ok(())
}
