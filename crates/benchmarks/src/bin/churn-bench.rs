//! `churn-bench`: a ReplicaSet scaled 0 → REPLICAS → 0, ROUNDS times, on
//! hollow nodes; nothing may be left behind. Runs the real `master` binary
//! (apiserver with the embedded store, scheduler, controller manager) and one
//! `kubelet --hollow-nodes NODES` process (the real kubelet on the fake
//! runtime). Not a test.
//!
//! ```text
//!  this process ── PATCH replicas ──▶ master ◀── watch/status ── kubelet --hollow-nodes
//!        └── polls: ready replicas, pods left, events, RSS of both processes
//! ```
//!
//! After each round: the seconds up (all ready) and down (every pod gone,
//! the kubelets' confirmations included), the RSS of both processes and the
//! Events kept. After the last: pods and ReplicaSets left anywhere, and the
//! Events once their TTL (`--event-ttl`, 1 min here) has passed.
//!
//! Usage: `churn-bench [NODES] [REPLICAS] [ROUNDS]` (default 100 1000 10),
//! from a release build: `cargo build --release -p master -p kubelet -p benchmarks`.

use benchmarks::rss_mib;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Events expire after this long (the apiserver's `--event-ttl`).
const EVENT_TTL_SECONDS: u64 = 60;
const NS: &str = "churn";

async fn get(http: &reqwest::Client, url: &str) -> anyhow::Result<Value> {
    Ok(http
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

/// How many objects a LIST returns.
async fn count(http: &reqwest::Client, url: &str) -> anyhow::Result<usize> {
    Ok(get(http, url).await?["items"]
        .as_array()
        .map_or(0, Vec::len))
}

/// Polls `done` every 200 ms for up to 10 minutes; returns the seconds taken.
async fn until<F, Fut>(what: &str, mut done: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let t = Instant::now();
    while !done().await? {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(600),
            "{what}: not done in 10 min"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let nodes = args.first().copied().unwrap_or(100);
    let replicas = args.get(1).copied().unwrap_or(1_000);
    let rounds = args.get(2).copied().unwrap_or(10);

    let dir = tempfile::tempdir()?;
    let port = minik8s_testkit::free_port();
    let server = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let data = dir.path().join("data").display().to_string();
    let ttl = format!("{EVENT_TTL_SECONDS}s");
    let master = benchmarks::spawn_release_bin(
        "master",
        &[
            "--listen",
            &listen,
            "--secure-listen",
            "",
            "--data-dir",
            &data,
            "--event-ttl",
            &ttl,
            "--serverless-port",
            "0",
        ],
    )?;
    let master_pid = master.0.id().to_string();
    let http = reqwest::Client::new();
    anyhow::ensure!(
        benchmarks::ready(&http, &server).await,
        "the master did not get ready"
    );
    let kubelet = benchmarks::spawn_release_bin(
        "kubelet",
        &[
            "--server",
            &server,
            "--node-name",
            "hollow",
            "--hollow-nodes",
            &nodes.to_string(),
        ],
    )?;
    let kubelet_pid = kubelet.0.id().to_string();
    until("hollow nodes registered", || async {
        Ok(count(&http, &format!("{server}/api/v1/nodes")).await? >= nodes)
    })
    .await?;

    println!("# churn benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \na ReplicaSet scaled 0 → {replicas} → 0, {rounds} times, on {nodes} hollow nodes; \
         master = apiserver (embedded SQLite, --event-ttl {EVENT_TTL_SECONDS}s) + scheduler + controller manager\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    println!("| round | up: all ready | down: all gone | master RSS MiB | hollow kubelets RSS MiB | Events kept |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| before | | | {:.0} | {:.0} | |",
        rss_mib(&master_pid),
        rss_mib(&kubelet_pid)
    );

    let r = http
        .post(format!("{server}/api/v1/namespaces"))
        .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .send()
        .await?;
    anyhow::ensure!(
        r.status().is_success(),
        "creating the namespace: {}",
        r.status()
    );
    let rs_url = format!("{server}/apis/apps/v1/namespaces/{NS}/replicasets");
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "churn"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "churn"}},
                 "template": {"metadata": {"labels": {"app": "churn"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1d"],
                                                       "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}});
    let r = http.post(&rs_url).json(&rs).send().await?;
    anyhow::ensure!(
        r.status().is_success(),
        "creating the ReplicaSet: {}",
        r.status()
    );
    let scale = |n: usize| {
        let (http, url) = (http.clone(), format!("{rs_url}/churn"));
        async move {
            let r = http
                .patch(url)
                .header("content-type", "application/merge-patch+json")
                .body(json!({"spec": {"replicas": n}}).to_string())
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "scaling to {n}: {}", r.status());
            anyhow::Ok(())
        }
    };
    let pods_url = format!("{server}/api/v1/namespaces/{NS}/pods");
    let events_url = format!("{server}/api/v1/namespaces/{NS}/events");
    for round in 1..=rounds {
        scale(replicas).await?;
        let up = until("scale up", || async {
            let rs = get(&http, &format!("{rs_url}/churn")).await?;
            Ok(rs["status"]["readyReplicas"].as_u64() == Some(replicas as u64))
        })
        .await?;
        scale(0).await?;
        let down = until("scale down", || async {
            Ok(count(&http, &pods_url).await? == 0)
        })
        .await?;
        println!(
            "| {round} | {up:.1} s | {down:.1} s | {:.0} | {:.0} | {} |",
            rss_mib(&master_pid),
            rss_mib(&kubelet_pid),
            count(&http, &events_url).await?
        );
    }

    let pods_left = count(&http, &format!("{server}/api/v1/pods")).await?;
    let sets = count(&http, &format!("{server}/apis/apps/v1/replicasets")).await?;
    println!("\nleft after the last round: {pods_left} pods, {sets} ReplicaSet (the one scaled)");
    anyhow::ensure!(pods_left == 0, "{pods_left} pods left behind");
    let waited = until("events expired", || async {
        Ok(count(&http, &events_url).await? == 0)
    })
    .await;
    match waited {
        Ok(s) => println!(
            "Events of the namespace: all gone {s:.0} s after the last round (TTL {EVENT_TTL_SECONDS} s)"
        ),
        Err(e) => println!("Events of the namespace: {e}"),
    }
    println!(
        "RSS at the end: master {:.0} MiB, hollow kubelets {:.0} MiB",
        rss_mib(&master_pid),
        rss_mib(&kubelet_pid)
    );
    drop((kubelet, master));
    Ok(())
}
