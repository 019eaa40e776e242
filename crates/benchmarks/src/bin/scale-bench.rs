//! `scale-bench`: the control plane at 5,000 nodes and 50,000 pods.
//!
//! ```text
//!  apiserver (its own process: CPU and RSS read from /proc)
//!     ▲  embedded store
//!     │
//!  this process: NODES hollow nodes (the real kubelet on the fake runtime,
//!                Lease every 10 s), the scheduler, the benchmark's client
//! ```
//!
//! Steps, each timed: the scheduler alone on NODES bare Node objects (no
//! kubelets, as Kubernetes' scheduler_perf; an apiserver of its own); then
//! on a fresh apiserver: register the hollow nodes; the apiserver's CPU with only the
//! heartbeats; create PODS pending pods in namespaces of 3,000; start the
//! scheduler, until every pod is bound (pods/s) and Running (status written by
//! the hollow kubelets); LIST of all pods and of one namespace of 3,000
//! (p50/p99); the apiserver's RSS against the objects' size; then a
//! kwok-style run: KWOK pods created already bound, until all are Running.
//!
//! Usage: `scale-bench [NODES] [PODS] [KWOK]` (default 5000 50000 10000).
//! Needs `cargo build --release -p apiserver -p benchmarks`; not a test.

use benchmarks::{percentile, rss_mib};
use futures::StreamExt;
use minik8s_api::k8s::api::core::v1::{Namespace, Node, Pod};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams, WatchEvent};
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Pods per namespace (the namespaced LIST is of one of them).
const PER_NAMESPACE: usize = 3_000;

/// CPU seconds a process has used so far (user + system, from /proc).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

/// What a watch on all pods has seen: when each pod was first bound and Running.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, f64>,
    running: HashMap<String, f64>,
}

/// Follows every pod (resuming the watch when the server ends it) until
/// `done` holds; `t` is the clock the times are read on.
async fn follow(
    api: &DynamicApi,
    last_rv: &mut String,
    t: Instant,
    seen: &mut Seen,
    done: impl Fn(&Seen) -> bool,
) -> anyhow::Result<()> {
    let mut events = api.watch(&ListParams::default(), last_rv, false).await?;
    while !done(seen) {
        let ev = tokio::time::timeout(Duration::from_secs(120), events.next())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "no progress for 120 s: {} bound, {} Running",
                    seen.bound.len(),
                    seen.running.len()
                )
            })?;
        let p = match ev {
            Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => p,
            Some(Ok(_)) => continue,
            None | Some(Err(_)) => {
                events = api.watch(&ListParams::default(), last_rv, false).await?;
                continue;
            }
        };
        if let Some(rv) = p["metadata"]["resourceVersion"].as_str() {
            *last_rv = rv.to_string();
        }
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap_or(""),
            p["metadata"]["name"].as_str().unwrap_or("")
        );
        let now = t.elapsed().as_secs_f64();
        if p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        {
            seen.bound.entry(key.clone()).or_insert(now);
        }
        if p["status"]["phase"] == "Running" {
            seen.running.entry(key).or_insert(now);
        }
    }
    Ok(())
}

/// The store's resourceVersion now (a LIST that matches nothing).
async fn current_rv(api: &DynamicApi) -> anyhow::Result<String> {
    Ok(api
        .list(&ListParams::default().fields("metadata.name=none"))
        .await?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string())
}

/// Creates `count` pods named `<prefix><i>` in namespaces `ns(i)`, 64 at a
/// time; `node(i)` pre-binds them. Returns pods/s.
async fn create_pods(
    client: &Client,
    count: usize,
    prefix: &str,
    ns: impl Fn(usize) -> String,
    node: impl Fn(usize) -> Option<String>,
) -> anyhow::Result<f64> {
    let t = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| {
            let api = client.dynamic(registry::of::<Pod>(), Some(&ns(i)));
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{prefix}{i}"), "labels": {"app": prefix}},
                "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest",
                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}});
            if let Some(n) = node(i) {
                pod["spec"]["nodeName"] = json!(n);
            }
            async move { api.create(&pod).await.map(|_| ()).map_err(Into::into) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(count as f64 / t.elapsed().as_secs_f64())
}

/// Times `n` GETs of `path` (read in full); returns sorted ms and the body size.
async fn time_gets(url: &str, n: usize) -> anyhow::Result<(Vec<f64>, usize)> {
    let http = reqwest::Client::new();
    let mut ms = Vec::new();
    let mut size = 0;
    for _ in 0..n {
        let t = Instant::now();
        let body = http
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        size = body.len();
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms, size))
}

/// [`time_gets`] by `curl` in a process of its own, reading to /dev/null: the
/// apiserver's time to serve the LIST (close to Kubernetes' latency SLI,
/// which the apiserver measures), without this process, busy with thousands
/// of hollow kubelets, buffering 150 MiB between the samples.
async fn time_gets_by_curl(url: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let mut ms = Vec::new();
        for _ in 0..n {
            let out = std::process::Command::new("curl")
                .args([
                    "-sS",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code} %{time_total}",
                    &url,
                ])
                .output()
                .map_err(|e| anyhow::anyhow!("running curl: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let (code, secs) = text.split_once(' ').unwrap_or_default();
            anyhow::ensure!(
                code == "200",
                "curl {url}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            ms.push(
                secs.trim()
                    .parse::<f64>()
                    .map_err(|e| anyhow::anyhow!("curl's time_total {secs:?}: {e}"))?
                    * 1000.0,
            );
        }
        ms.sort_by(f64::total_cmp);
        Ok(ms)
    })
    .await?
}

/// Starts the release apiserver on a fresh data directory (its watch cache
/// sized for every pod event of the run); returns it, its URL and the directory.
async fn start_apiserver() -> anyhow::Result<(benchmarks::Proc, String, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let port = minik8s_testkit::free_port();
    let server = format!("http://127.0.0.1:{port}");
    let (listen, data) = (
        format!("127.0.0.1:{port}"),
        dir.path().display().to_string(),
    );
    let ring_bytes = (256usize << 20).to_string();
    let apiserver = benchmarks::spawn_release_bin(
        "apiserver",
        &[
            "--listen",
            &listen,
            "--secure-listen",
            "",
            "--data-dir",
            &data,
            "--watch-cache-size",
            "200000",
            "--watch-cache-max-bytes",
            &ring_bytes,
        ],
    )?;
    anyhow::ensure!(
        benchmarks::ready(&reqwest::Client::new(), &server).await,
        "the apiserver did not get ready"
    );
    Ok((apiserver, server, dir))
}

/// The scheduler alone, as Kubernetes' scheduler_perf measures it: `nodes`
/// Ready Node objects with no kubelet behind them, `pods` pending pods, then
/// the scheduler started; pods bound per second until a watch saw them all.
async fn scheduler_alone(client: &Client, nodes: usize, pods: usize) -> anyhow::Result<f64> {
    let node_api = client.dynamic(registry::of::<Node>(), None);
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(0..nodes)
        .map(|i| {
            let api = node_api.clone();
            let resources = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
            let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("bare-{i}")},
                "status": {"capacity": resources, "allocatable": resources,
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
            async move { api.create(&node).await.map(|_| ()).map_err(Into::into) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let ns_api = client.dynamic(registry::of::<Namespace>(), None);
    for n in 0..pods.div_ceil(PER_NAMESPACE).max(1) {
        ns_api
            .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("sched-{n}")}}))
            .await?;
    }
    create_pods(
        client,
        pods,
        "s",
        |i| format!("sched-{}", i / PER_NAMESPACE),
        |_| None,
    )
    .await?;
    let all = client.dynamic(registry::of::<Pod>(), None);
    let mut rv = current_rv(&all).await?;
    let t = Instant::now();
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    let mut tasks: Vec<_> = informers.into_iter().map(tokio::spawn).collect();
    tasks.push(tokio::spawn(scheduler::worker(sched)));
    let mut seen = Seen::default();
    follow(&all, &mut rv, t, &mut seen, |s| s.bound.len() >= pods).await?;
    let rate = pods as f64 / t.elapsed().as_secs_f64();
    for task in tasks {
        task.abort();
    }
    Ok(rate)
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let nodes = args.first().copied().unwrap_or(5_000);
    let pods = args.get(1).copied().unwrap_or(50_000);
    let kwok = args.get(2).copied().unwrap_or(10_000);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // Each figure is printed as soon as it is measured: a run that fails late still reports.
    println!("# scale benchmark\n");
    println!(
        "date: {}  \nmachine: {}  \n{nodes} hollow nodes (the real kubelet on the fake runtime, Lease every 10 s, \
         status on change), {pods} pods in namespaces of {PER_NAMESPACE}; apiserver in its own process (embedded store)\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    println!("| step | result |");
    println!("|---|---|");

    // The scheduler alone first, on an apiserver of its own.
    {
        let (apiserver, server, _dir) = start_apiserver().await?;
        let bare = scheduler_alone(&Client::new(&server), nodes, pods).await?;
        println!(
            "| scheduler alone (scheduler_perf's way: {nodes} Node objects without kubelets), {pods} pods → all bound | {:.1} s: **{:.0} pods/s** |",
            pods as f64 / bare,
            bare
        );
        drop(apiserver);
    }

    let (apiserver, server, _dir) = start_apiserver().await?;
    let pid = apiserver.0.id();
    let client = Client::new(&server);

    // Nodes, then the heartbeats alone.
    let register_secs = benchmarks::run_hollow_nodes(&client, nodes, 10, 60).await?;
    println!(
        "| register {nodes} nodes | {register_secs:.1} s ({:.0} nodes/s) |",
        nodes as f64 / register_secs
    );
    tokio::time::sleep(Duration::from_secs(12)).await;
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(30)).await;
    let heartbeat_cores = (cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64();
    println!(
        "| apiserver CPU with only the heartbeats (30 s) | {:.1} % of one core ({:.1} % of the machine's {cores} cores) |",
        heartbeat_cores * 100.0,
        heartbeat_cores * 100.0 / cores as f64,
    );

    // Pending pods, in namespaces of 3,000.
    let namespaces = pods.div_ceil(PER_NAMESPACE).max(1);
    let ns_api = client.dynamic(registry::of::<Namespace>(), None);
    for n in 0..namespaces {
        ns_api
            .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("scale-{n}")}}))
            .await?;
    }
    ns_api
        .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kwok"}}))
        .await?;
    let created_per_s = create_pods(
        &client,
        pods,
        "p",
        |i| format!("scale-{}", i / PER_NAMESPACE),
        |_| None,
    )
    .await?;
    println!("| create {pods} pending pods (64 clients) | {created_per_s:.0} pods/s |");

    // The scheduler starts on PODS pending pods.
    let all = client.dynamic(registry::of::<Pod>(), None);
    let mut rv = current_rv(&all).await?;
    let t = Instant::now();
    let c_sched = cpu_seconds(pid);
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    let mut seen = Seen::default();
    follow(&all, &mut rv, t, &mut seen, |s| s.bound.len() >= pods).await?;
    let bind_secs = t.elapsed().as_secs_f64();
    println!(
        "| scheduler start → all {pods} bound | {bind_secs:.1} s: **{:.0} pods/s** |",
        pods as f64 / bind_secs
    );
    follow(&all, &mut rv, t, &mut seen, |s| s.running.len() >= pods).await?;
    let running_secs = seen.running.values().copied().fold(0.0, f64::max);
    let sched_cores = (cpu_seconds(pid) - c_sched) / t.elapsed().as_secs_f64();
    println!(
        "| scheduler start → all {pods} Running (status from the kubelets) | {running_secs:.1} s |"
    );
    println!(
        "| apiserver CPU while scheduling and starting | {:.0} % of one core |",
        sched_cores * 100.0
    );

    // LISTs: all pods, and one namespace of 3,000, once the start's
    // background writes (the kubelets' events) have drained: what is
    // timed is a LIST beside the heartbeats, not beside 100,000 Event writes.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(90) {
        let c0 = cpu_seconds(pid);
        tokio::time::sleep(Duration::from_secs(2)).await;
        if cpu_seconds(pid) - c0 < 2.0 * 0.35 {
            break;
        }
    }
    println!(
        "| until the apiserver is back under 35 % of a core (the start's events written) | {:.0} s |",
        settle.elapsed().as_secs_f64()
    );
    let (all_ms, all_bytes) = time_gets(&format!("{server}/api/v1/pods"), 10).await?;
    let (ns_ms, ns_bytes) =
        time_gets(&format!("{server}/api/v1/namespaces/scale-0/pods"), 20).await?;
    let all_curl = time_gets_by_curl(&format!("{server}/api/v1/pods"), 20).await?;
    let ns_curl =
        time_gets_by_curl(&format!("{server}/api/v1/namespaces/scale-0/pods"), 20).await?;
    let rss = rss_mib(&pid.to_string());
    println!(
        "| LIST all {pods} pods ({:.0} MiB JSON), {} times | p50 {:.0} ms, p99 {:.0} ms (each, sorted: {}) |",
        all_bytes as f64 / 1048576.0,
        all_ms.len(),
        percentile(&all_ms, 0.5),
        percentile(&all_ms, 0.99),
        all_ms.iter().map(|ms| format!("{ms:.0}")).collect::<Vec<_>>().join(" ")
    );
    println!(
        "| LIST one namespace of {PER_NAMESPACE} pods ({:.1} MiB), 20 times | p50 {:.0} ms, p99 {:.0} ms |",
        ns_bytes as f64 / 1048576.0,
        percentile(&ns_ms, 0.5),
        percentile(&ns_ms, 0.99)
    );
    println!(
        "| the same LISTs by curl in a process of its own (the apiserver's serving time), 20 times each | all: p50 {:.0} ms, p99 {:.0} ms (each: {}); one namespace: p50 {:.0} ms, p99 {:.0} ms |",
        percentile(&all_curl, 0.5),
        percentile(&all_curl, 0.99),
        all_curl.iter().map(|ms| format!("{ms:.0}")).collect::<Vec<_>>().join(" "),
        percentile(&ns_curl, 0.5),
        percentile(&ns_curl, 0.99)
    );
    println!(
        "| apiserver RSS with {pods} pods | {rss:.0} MiB ({:.1}× the pods' JSON) |",
        rss / (all_bytes as f64 / 1048576.0)
    );

    // kwok-style: pods created already bound, until all are Running.
    let mut rv = current_rv(&all).await?;
    let t = Instant::now();
    let mut kwok_seen = Seen::default();
    let watcher = {
        let all = all.clone();
        tokio::spawn(async move {
            let r = follow(&all, &mut rv, t, &mut kwok_seen, |s| {
                s.running.keys().filter(|k| k.starts_with("kwok/")).count() >= kwok
            })
            .await;
            r.map(|_| t.elapsed().as_secs_f64())
        })
    };
    let kwok_created_per_s = create_pods(
        &client,
        kwok,
        "k",
        |_| "kwok".to_string(),
        |i| Some(format!("hollow-{}", i % nodes)),
    )
    .await?;
    let kwok_secs = watcher.await??;
    println!(
        "| kwok-style: {kwok} pods created bound ({kwok_created_per_s:.0} pods/s) → all Running | {kwok_secs:.1} s |"
    );

    drop(apiserver);
    Ok(())
}
