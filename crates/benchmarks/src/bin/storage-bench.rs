//! `storage-bench`: persistent volume claims through minik8s.
//!
//! Starts the real `master` and `kubelet` binaries (from this target
//! directory) on the running dockerd, then, one at a time:
//! - **claim → Bound** with the local-path provisioner (a class with
//!   Immediate binding): create a claim, watch it until Bound. The floor is
//!   the API writes that binding takes (create the claim, create the
//!   volume, four patches), done back to back on ConfigMaps;
//! - **pod startup with a claim** (a new claim of the default class,
//!   WaitForFirstConsumer: scheduling, provisioning, binding, the mount)
//!   against the same pod without one, create → Running and ready; and bare
//!   Docker creating and starting the pause and app containers.
//!
//! Usage: `storage-bench [ROUNDS]` (default 30). Needs a dockerd
//! (`scripts/quickstart.sh` starts one); not a test.

use bollard::container::Config;
use bollard::models::HostConfig;
use kubelet::runtime::ContainerRuntime;
use minik8s_api::k8s::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use minik8s_api::registry;
use minik8s_client::rest::content;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

use benchmarks as bench_util;

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|c| c.iter().all(|s| s["ready"] == true))
}

fn pod(name: &str, claim: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "app", "image": "minik8s/busybox:latest",
                 "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}});
    if let Some(claim) = claim {
        pod["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "data", "mountPath": "/data"}]);
        pod["spec"]["volumes"] =
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    }
    pod
}

fn claim(name: &str, class: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                    "resources": {"requests": {"storage": "10Mi"}}}})
}

fn row(what: &str, sorted: &mut [f64]) -> (String, f64) {
    sorted.sort_by(f64::total_cmp);
    let (p50, p99) = (
        bench_util::percentile(sorted, 0.5),
        bench_util::percentile(sorted, 0.99),
    );
    (format!("| {what} | {p50:.0} | {p99:.0} |"), p50)
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-storage-bench";
    let runtime = kubelet::runtime::DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let cluster = bench_util::LocalCluster::start_with(&socket, network, "10.198.0.0/24", |dir| {
        vec![
            "--local-path-root".into(),
            dir.join("storage").display().to_string(),
        ]
    })
    .await?;
    let client = cluster.client.clone();
    let classes = client.dynamic(
        registry::of::<minik8s_api::k8s::api::storage::v1::StorageClass>(),
        None,
    );
    // The default class appears when the controller manager starts.
    for _ in 0..100 {
        if classes.get("local-path").await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    classes
        .create(
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "bench-immediate"}, "provisioner": "minik8s.io/local-path",
            "volumeBindingMode": "Immediate"}),
        )
        .await?;
    let claims = client.dynamic(registry::of::<PersistentVolumeClaim>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let maps = client.dynamic(registry::of::<ConfigMap>(), Some("default"));

    // Claim → Bound, and its floor: six API writes back to back.
    let mut bound = Vec::new();
    let mut floor = Vec::new();
    for i in 0..rounds {
        let name = format!("bound-{i}");
        bound.push(
            benchmarks::create_until(&claims, claim(&name, "bench-immediate"), |c| {
                c["status"]["phase"] == "Bound"
            })
            .await?,
        );
        let t = Instant::now();
        for w in 0..2 {
            maps.create(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("floor-{i}-{w}")}}))
                .await?;
        }
        for w in 0..4 {
            maps.patch(
                &format!("floor-{i}-{}", w % 2),
                None,
                content::MERGE_PATCH,
                &json!({"data": {format!("k{w}"): "v"}}),
            )
            .await?;
        }
        floor.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    // Pod startup without and with a new WaitForFirstConsumer claim, alternately.
    let mut plain = Vec::new();
    let mut with_claim = Vec::new();
    for i in 0..rounds {
        plain.push(
            benchmarks::create_until(&pods, pod(&format!("plain-{i}"), None), running).await?,
        );
        let name = format!("data-{i}");
        claims.create(&claim(&name, "local-path")).await?;
        with_claim.push(
            benchmarks::create_until(&pods, pod(&format!("claimed-{i}"), Some(&name)), running)
                .await?,
        );
    }

    // Bare Docker: the pause and app containers, created and started directly.
    let mut bare = Vec::new();
    let mut ids = Vec::new();
    for i in 0..rounds {
        let t = Instant::now();
        let pause = runtime
            .create_and_start(
                &format!("storage-bare-pause-{i}"),
                Config {
                    image: Some("minik8s/pause:latest".to_string()),
                    host_config: Some(HostConfig {
                        network_mode: Some(network.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await?;
        let dir = cluster.dir.path().join(format!("bare-{i}"));
        std::fs::create_dir_all(&dir)?;
        let app = runtime
            .create_and_start(
                &format!("storage-bare-app-{i}"),
                Config {
                    image: Some("minik8s/busybox:latest".to_string()),
                    cmd: Some(vec!["sleep".into(), "3600".into()]),
                    host_config: Some(HostConfig {
                        network_mode: Some(format!("container:{pause}")),
                        binds: Some(vec![format!("{}:/data", dir.display())]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await?;
        bare.push(t.elapsed().as_secs_f64() * 1000.0);
        ids.extend([app, pause]);
    }
    for id in ids {
        runtime.remove(&id).await?;
    }
    let now = minik8s_client::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for i in 0..rounds {
        let _ = pods.delete(&format!("plain-{i}"), &now).await;
        let _ = pods.delete(&format!("claimed-{i}"), &now).await;
    }
    for _ in 0..300 {
        if runtime.list(None).await?.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;

    println!("# storage benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \n{rounds} rounds, one at a time, dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        bench_util::machine(),
        runtime.version().await.unwrap_or_default()
    );
    println!("| path | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    let (b, b50) = row(
        "claim → Bound (local-path, Immediate): create, provision, bind",
        &mut bound,
    );
    let (f, f50) = row(
        "floor: the same 6 API writes back to back (ConfigMaps)",
        &mut floor,
    );
    let (p, p50) = row(
        "pod without a claim: create → Running and ready",
        &mut plain,
    );
    let (c, c50) = row(
        "pod with a new claim (local-path, WaitForFirstConsumer): create → Running and ready",
        &mut with_claim,
    );
    let (d, d50) = row(
        "bare Docker: create + start pause and app with a bind mount",
        &mut bare,
    );
    for line in [b, f, p, c, d] {
        println!("{line}");
    }
    println!(
        "\nclaim → Bound / floor: {:.2}; pod with a claim / without: {:.2}; pod with a claim / bare Docker: {:.2}",
        b50 / f50,
        c50 / p50,
        c50 / d50
    );
    Ok(())
}
