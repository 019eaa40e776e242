//! `soak-bench`: the master's memory under steady load. Runs the real
//! `master` binary (embedded SQLite store) and one `kubelet --hollow-nodes`
//! process (the real kubelet on the fake runtime), brings 1,000 pods to
//! Running, opens 50 watchers on pods, then writes 20 objects a second for
//! the soak's length, printing the master's RSS every 30 s. Not a test.
//!
//! Usage: `soak-bench [MINUTES]` (default 30), from a release build:
//! `cargo build --release -p master -p kubelet -p benchmarks`.

use benchmarks::{rss_mib, Proc};
use futures::StreamExt;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PODS: usize = 1_000;
const NODES: usize = 12;
const WATCHERS: usize = 50;
const WRITES_PER_SECOND: u64 = 20;

async fn running_pods(http: &reqwest::Client, server: &str) -> usize {
    let Ok(r) = http
        .get(format!(
            "{server}/api/v1/namespaces/default/pods?fieldSelector=status.phase=Running"
        ))
        .send()
        .await
    else {
        return 0;
    };
    let list: serde_json::Value = r.json().await.unwrap_or_default();
    list["items"].as_array().map_or(0, Vec::len)
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let minutes: u64 = std::env::args()
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(30);
    let bin = std::env::current_exe()?
        .parent()
        .expect("target dir")
        .to_path_buf();
    let dir = tempfile::tempdir()?;
    let port = minik8s_testkit::free_port();
    let server = format!("http://127.0.0.1:{port}");
    // SOAK_MASTER_WRAPPER runs the master under a profiler, e.g.
    // `heaptrack -o /tmp/master` (RSS is then the profiler's, not the master's).
    let wrapper = std::env::var("SOAK_MASTER_WRAPPER").unwrap_or_default();
    let mut wrapped = wrapper.split_whitespace();
    let mut command = match wrapped.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(wrapped).arg(bin.join("master"));
            c
        }
        None => Command::new(bin.join("master")),
    };
    // Its own process group: a profiler's wrapper and the master stop together.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let master = Proc(
        command
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--secure-listen",
                "",
                "--serverless-port",
                "0",
            ])
            .args(["--data-dir", &dir.path().join("data").display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}/master: {e}", bin.display()))?,
    );
    let master_pid = master.0.id().to_string();
    let http = reqwest::Client::new();
    anyhow::ensure!(
        benchmarks::ready(&http, &server).await,
        "the master did not get ready"
    );
    let _nodes = Proc(
        Command::new(bin.join("kubelet"))
            .args(["--server", &server, "--node-name", "hollow"])
            .args(["--hollow-nodes", &NODES.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}/kubelet: {e}", bin.display()))?,
    );
    println!("# soak benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \n{PODS} pods on {NODES} hollow nodes, {WATCHERS} pod watchers, {WRITES_PER_SECOND} ConfigMap writes/s for {minutes} min; master = apiserver (embedded SQLite) + scheduler + controller manager\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    println!("| phase | master RSS MiB |\n|---|---:|");
    println!("| started, empty | {:.1} |", rss_mib(&master_pid));

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "soak"},
        "spec": {"replicas": PODS, "selector": {"matchLabels": {"app": "soak"}},
                 "template": {"metadata": {"labels": {"app": "soak"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1d"],
                                                       "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}});
    let r = http
        .post(format!(
            "{server}/apis/apps/v1/namespaces/default/deployments"
        ))
        .json(&deployment)
        .send()
        .await?;
    anyhow::ensure!(
        r.status().is_success(),
        "creating the Deployment: {}",
        r.status()
    );
    let started = Instant::now();
    while running_pods(&http, &server).await < PODS {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "pods not Running in 10 min"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!(
        "| {PODS} pods Running (after {:.0} s) | {:.1} |",
        started.elapsed().as_secs_f64(),
        rss_mib(&master_pid)
    );

    // Watchers that read everything, as informers do.
    for _ in 0..WATCHERS {
        let (http, server) = (http.clone(), server.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(r) = http
                    .get(format!(
                        "{server}/api/v1/pods?watch=1&allowWatchBookmarks=true"
                    ))
                    .send()
                    .await
                {
                    let mut body = r.bytes_stream();
                    while let Some(Ok(_)) = body.next().await {}
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!("| + {WATCHERS} watchers | {:.1} |", rss_mib(&master_pid));

    // The soak: 20 writes a second over 100 ConfigMaps (creates, then updates).
    let soak = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / WRITES_PER_SECOND));
    let mut next_sample = Duration::from_secs(30);
    let mut samples = Vec::new();
    let mut n: u64 = 0;
    while soak.elapsed() < Duration::from_secs(minutes * 60) {
        tick.tick().await;
        let name = format!("soak-{}", n % 100);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": n.to_string()}});
        let url = format!("{server}/api/v1/namespaces/default/configmaps");
        let r = http.put(format!("{url}/{name}")).json(&cm).send().await;
        if !r.is_ok_and(|r| r.status().is_success()) {
            let _ = http.post(&url).json(&cm).send().await;
        }
        n += 1;
        if soak.elapsed() >= next_sample {
            let rss = rss_mib(&master_pid);
            samples.push(rss);
            println!(
                "| soak {:>2} min {:02} s | {rss:.1} |",
                next_sample.as_secs() / 60,
                next_sample.as_secs() % 60
            );
            next_sample += Duration::from_secs(30);
        }
    }
    let (min, max) = samples
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    println!(
        "\n{n} writes; RSS during the soak {min:.1}-{max:.1} MiB ({:+.1} % spread around the minimum)",
        (max - min) / min * 100.0
    );
    // SIGTERM to the group: under a profiler the master exits and the
    // profile is written (killing only the wrapper would leave it running).
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{master_pid}")])
        .status();
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}
