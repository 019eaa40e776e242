//! `function-bench`: serverless Functions through the gateway against the
//! same runtime in a bare Docker container.
//!
//! Starts the real `master` and `kubelet` binaries (from this target
//! directory) on the running dockerd and the serverless gateway in this
//! process, then measures:
//! - cold start: 0 instances → the first answer (pod created, started, ready, call proxied),
//!   against `create + start` of the runtime container until it answers;
//! - warm calls one at a time, against direct calls to the bare container;
//! - scale to zero: the last call → no pod left (idle window 2 s);
//! - sustained calls/s with 40 concurrent callers, against the bare container.
//!
//! Usage: `function-bench [COLD_STARTS] [SECONDS]` (default 10 and 10). Needs a
//! dockerd (`scripts/quickstart.sh` starts one); not a test.

use bollard::container::Config;
use bollard::models::HostConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kubelet::runtime::ContainerRuntime;
use minik8s_api::registry;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchmarks as bench_util;

const SOURCE: &str =
    "def handler(event):\n    return {\"hello\": event.get(\"name\", \"world\")}\n";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (
        bench_util::percentile(&v, 0.5),
        bench_util::percentile(&v, 0.99),
    )
}

/// Posts until the first 200 (or `limit`): how long it took.
async fn first_answer(
    http: &reqwest::Client,
    url: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let t = Instant::now();
    loop {
        if let Ok(r) = http.post(url).body("{}").send().await {
            if r.status().is_success() {
                return Ok(t.elapsed());
            }
        }
        anyhow::ensure!(t.elapsed() < limit, "no answer from {url} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Calls/s of `callers` concurrent loops over `secs` seconds, and failures.
async fn sustained(http: &reqwest::Client, url: &str, callers: usize, secs: u64) -> (f64, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (http, url, stop) = (http.clone(), url.to_string(), stop.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0usize, 0usize);
                while !stop.load(Ordering::Relaxed) {
                    let answered = match http.post(&url).body("{\"name\": \"bench\"}").send().await
                    {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    if answered {
                        ok += 1;
                    } else {
                        failed += 1;
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failed) = (0, 0);
    for task in tasks {
        let (o, f) = task.await.unwrap_or((0, 0));
        ok += o;
        failed += f;
    }
    (ok as f64 / t.elapsed().as_secs_f64(), failed)
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let colds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-fbench";
    let runtime = kubelet::runtime::DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let images = std::process::Command::new("bash")
        .arg(repo.join("scripts/images.sh"))
        .arg("--functions")
        .env("DOCKER_HOST", &socket)
        .status()?;
    anyhow::ensure!(
        images.success(),
        "building the function runtime image failed"
    );
    let cluster = bench_util::LocalCluster::start(&socket, network, "10.198.0.0/24").await?;
    let client = cluster.client.clone();
    let gateway = minik8s_serverless::start(
        client.clone(),
        minik8s_serverless::Config {
            listen: ([127, 0, 0, 1], 0).into(),
            ..Default::default()
        },
    )
    .await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    let url = format!("http://{gateway}/function/default/hello");
    let function = json!({"apiVersion": "serverless.minik8s.io/v1alpha1", "kind": "Function",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {"source": SOURCE, "scale": {"maxScale": 10, "targetConcurrency": 10,
            "stableWindow": "10s", "idleWindow": "2s"}}});
    client
        .dynamic(
            registry::by_kind("serverless.minik8s.io/v1alpha1", "Function").unwrap(),
            Some("default"),
        )
        .create(&function)
        .await?;
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let deployments = client.dynamic(registry::of::<Deployment>(), Some("default"));
    let no_pods = || async {
        let list = pods
            .list(
                &minik8s_client::ListParams::default()
                    .labels("serverless.minik8s.io/function=hello"),
            )
            .await;
        list.map(|l| l["items"].as_array().is_some_and(|i| i.is_empty()))
            .unwrap_or(false)
    };
    // The Deployment exists and the function is at zero.
    for _ in 0..300 {
        if deployments.get("hello-fn").await.is_ok() && no_pods().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Cold starts and, after each, the time back to zero pods.
    let (mut cold, mut to_zero) = (Vec::new(), Vec::new());
    for i in 0..colds {
        let t = first_answer(&http, &url, Duration::from_secs(90)).await?;
        cold.push(ms(t));
        let last = Instant::now();
        while !no_pods().await {
            anyhow::ensure!(
                last.elapsed() < Duration::from_secs(120),
                "no scale to zero"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        to_zero.push(last.elapsed().as_secs_f64());
        eprintln!(
            "cold start {i}: {:.0} ms, back to zero pods in {:.1} s",
            ms(t),
            last.elapsed().as_secs_f64()
        );
    }

    // Warm calls, one at a time.
    first_answer(&http, &url, Duration::from_secs(90)).await?;
    let mut warm = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        let r = http.post(&url).body("{}").send().await?;
        anyhow::ensure!(
            r.status().is_success(),
            "a warm call failed: {}",
            r.status()
        );
        r.bytes().await?;
        warm.push(ms(t.elapsed()));
    }
    let (rate, failed) = sustained(&http, &url, 40, secs).await;
    let instances = deployments.get("hello-fn").await?["status"]["readyReplicas"]
        .as_i64()
        .unwrap_or(0);

    // The floor: the same runtime and source in a bare container.
    let dir = cluster.dir.path().join("bare");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("source"), SOURCE)?;
    let config = || Config {
        image: Some(minik8s_api::serverless::RUNTIME_IMAGE.to_string()),
        env: Some(vec![
            "FUNCTION_RUNTIME=python".into(),
            "FUNCTION_SOURCE=/function/source".into(),
        ]),
        host_config: Some(HostConfig {
            network_mode: Some(network.into()),
            binds: Some(vec![format!("{}:/function:ro", dir.display())]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut bare_cold = Vec::new();
    let mut bare_url = String::new();
    for i in 0..colds {
        let t = Instant::now();
        let id = runtime
            .create_and_start(&format!("fbench-bare-{i}"), config())
            .await?;
        let info = runtime.docker.inspect_container(&id, None).await?;
        let ip = info
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|n| n.get(network).and_then(|e| e.ip_address.clone()))
            .unwrap_or_default();
        bare_url = format!("http://{ip}:8080/");
        first_answer(&http, &bare_url, Duration::from_secs(30)).await?;
        bare_cold.push(ms(t.elapsed()));
        if i + 1 < colds {
            runtime.remove(&id).await?;
        }
    }
    let mut bare_warm = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        http.post(&bare_url)
            .body("{}")
            .send()
            .await?
            .bytes()
            .await?;
        bare_warm.push(ms(t.elapsed()));
    }
    let (bare_rate, bare_failed) = sustained(&http, &bare_url, 40, secs).await;
    let _ = runtime.remove(&format!("fbench-bare-{}", colds - 1)).await;

    // Deleting the Function lets the kubelet remove its containers before it stops.
    let _ = client
        .dynamic(
            registry::by_kind("serverless.minik8s.io/v1alpha1", "Function").unwrap(),
            Some("default"),
        )
        .delete("hello", &Default::default())
        .await;
    for _ in 0..300 {
        if no_pods().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;

    let (c50, c99) = summary(cold);
    let (bc50, bc99) = summary(bare_cold);
    let (w50, w99) = summary(warm);
    let (bw50, bw99) = summary(bare_warm);
    let (z50, z99) = summary(to_zero);
    println!("# function benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \n{colds} cold starts, 1000 warm calls, 40 callers for {secs} s; dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        bench_util::machine(),
        runtime.version().await.unwrap_or_default()
    );
    println!("| measure | minik8s (gateway) | bare Docker (floor) | ratio |");
    println!("|---|---:|---:|---:|");
    println!(
        "| cold start p50 / p99 ms | {c50:.0} / {c99:.0} | {bc50:.0} / {bc99:.0} | {:.2} |",
        c50 / bc50
    );
    println!(
        "| warm call p50 / p99 ms | {w50:.2} / {w99:.2} | {bw50:.2} / {bw99:.2} | {:.2} |",
        w50 / bw50
    );
    println!("| calls/s, 40 callers | {rate:.0} ({instances} instances, {failed} failed) | {bare_rate:.0} (1 container, {bare_failed} failed) | {:.2} |", rate / bare_rate);
    println!("| last call → 0 pods p50 / p99 s (idle window 2 s) | {z50:.1} / {z99:.1} | | |");
    Ok(())
}
