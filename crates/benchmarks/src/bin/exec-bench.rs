//! `exec-bench`: `kubectl exec` and `kubectl port-forward` through minik8s
//! against their floors on the same machine and the same container:
//! - exec round trip: `kubectl exec POD -- true` (the real kubectl, through
//!   the apiserver and the kubelet) against `docker exec ID true`;
//! - port-forward throughput: one 100 MB HTTP download through `kubectl
//!   port-forward` against the same download straight from the pod's IP.
//!
//! Usage: `exec-bench [ROUNDS]` (default 50). Needs a dockerd at DOCKER_HOST
//! (default /var/run/docker.sock) and /usr/bin/kubectl; not a test.

use kubelet::runtime::ContainerRuntime;
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benchmarks as bench_util;

const MB: usize = 100;

fn timed(cmd: &mut Command) -> anyhow::Result<f64> {
    let t = Instant::now();
    let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "{cmd:?} failed");
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

async fn download(url: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    let bytes = reqwest::get(url).await?.bytes().await?;
    anyhow::ensure!(
        bytes.len() == MB << 20,
        "got {} bytes from {url}",
        bytes.len()
    );
    Ok((MB as f64) / t.elapsed().as_secs_f64())
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let network = "mk-exec-bench";
    let runtime = kubelet::runtime::DockerRuntime::connect(&socket, network, "bench-node")?;
    runtime.version().await.map_err(|e| {
        anyhow::anyhow!(
            "a running dockerd is needed at {socket} (scripts/quickstart.sh starts one): {e}"
        )
    })?;
    let cluster = bench_util::LocalCluster::start(&socket, network, "10.198.0.0/24").await?;
    let pods = cluster
        .client
        .dynamic(registry::of::<Pod>(), Some("default"));
    let script = format!(
        "mkdir /www; dd if=/dev/zero of=/www/big bs=1048576 count={MB} 2>/dev/null; httpd -f -p 8080 -h /www"
    );
    pods.create(
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "exec-bench"},
        "spec": {"nodeName": "bench-node", "terminationGracePeriodSeconds": 0, "containers": [
            {"name": "app", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
             "command": ["sh", "-c", script]}]}}),
    )
    .await?;
    let mut pod = json!({});
    for _ in 0..600 {
        pod = pods.get("exec-bench").await?;
        if pod["status"]["phase"] == "Running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(
        pod["status"]["phase"] == "Running",
        "the bench pod did not start"
    );
    let pod_ip = pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let id = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("docker://")
        .to_string();
    // The file is written before httpd starts: wait until it is served.
    for _ in 0..300 {
        if download(&format!("http://{pod_ip}:8080/big")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (mut through, mut bare) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        through.push(timed(Command::new(minik8s_testkit::real_kubectl()).args(
            [
                "--server",
                &cluster.server,
                "exec",
                "exec-bench",
                "--",
                "true",
            ],
        ))?);
        bare.push(timed(
            Command::new("docker")
                .env("DOCKER_HOST", &socket)
                .args(["exec", &id, "true"]),
        )?);
    }
    through.sort_by(f64::total_cmp);
    bare.sort_by(f64::total_cmp);

    // A free local port: a fixed one may be taken by whatever runs beside the bench.
    let local_port = minik8s_testkit::free_port();
    let mut pf = bench_util::Proc(
        Command::new(minik8s_testkit::real_kubectl())
            .args([
                "--server",
                &cluster.server,
                "port-forward",
                "pod/exec-bench",
                &format!("{local_port}:8080"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut forwarded = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..3 {
        let mut got = Err(anyhow::anyhow!("port-forward never answered"));
        for _ in 0..50 {
            got = download(&format!("http://127.0.0.1:{local_port}/big")).await;
            if got.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        forwarded.push(got?);
        direct.push(download(&format!("http://{pod_ip}:8080/big")).await?);
    }
    let _ = pf.0.kill();
    forwarded.sort_by(f64::total_cmp);
    direct.sort_by(f64::total_cmp);

    let _ = pods
        .delete(
            "exec-bench",
            &minik8s_client::DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await;
    for _ in 0..100 {
        if runtime
            .list(None)
            .await?
            .iter()
            .all(|c| c.pod_name != "exec-bench")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(cluster);
    let _ = runtime.docker.remove_network(network).await;

    let p = bench_util::percentile;
    println!("# exec and port-forward benchmark\n");
    println!(
        "date: {}  \n{rounds} exec round trips, {MB} MB downloads x3 (median), dockerd {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        runtime.version().await.unwrap_or_default()
    );
    println!("| exec round trip | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    println!(
        "| `kubectl exec POD -- true` (apiserver → kubelet → Docker) | {:.0} | {:.0} |",
        p(&through, 0.5),
        p(&through, 0.99)
    );
    println!(
        "| `docker exec ID true` (floor) | {:.0} | {:.0} |",
        p(&bare, 0.5),
        p(&bare, 0.99)
    );
    println!(
        "| ratio | {:.2} | {:.2} |\n",
        p(&through, 0.5) / p(&bare, 0.5),
        p(&through, 0.99) / p(&bare, 0.99)
    );
    println!("| {MB} MB over one connection | MB/s |");
    println!("|---|---:|");
    println!(
        "| `kubectl port-forward` (SPDY through the apiserver and kubelet) | {:.0} |",
        p(&forwarded, 0.5)
    );
    println!(
        "| straight to the pod IP (floor) | {:.0} |",
        p(&direct, 0.5)
    );
    Ok(())
}
