//! `tracing-bench`: what tracing as shipped costs (issue 48), on against
//! off in the same run, alternated.
//!
//! - **apiserver creates/s**: a fresh process per round (tracing is
//!   process-wide) with an in-process apiserver on the embedded store,
//!   `--creates` pod creates over HTTP from 16 clients; its creates/s and
//!   the process's CPU per create. On: the master's tracing (every create
//!   starts a journey: a request span, its admission, validation and store
//!   steps, kept in the span store). Off: the same logging, no spans (the
//!   master with `--traces-kept 0`).
//! - **pod startup**: the real `master` and `kubelet` binaries on the
//!   running dockerd (as `pod-startup-bench`), create → Running and ready,
//!   one pod at a time. Off: the master with `--traces-kept 0` (no spans,
//!   so no trace context on the pods, so the kubelet records none either).
//!
//! Usage: `tracing-bench [--rounds R] [--creates N] [--pods P]`
//! (defaults 4, 3000, 20). Needs a dockerd for the pod startup (the quick
//! start runs one); not a test.

use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_testkit::{Backend, TestServer};
use serde_json::json;
use std::process::Command;

use benchmarks as bench_util;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) this process has used.
fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// How a round traces.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The master with `--traces-kept 0`: its logs, no spans.
    Off,
    /// As shipped: at most 20 new journeys a second.
    Shipped,
    /// Every create a journey (`--journeys-per-second 0`).
    Every,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Off, Mode::Shipped, Mode::Every];

    fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Shipped => "on",
            Mode::Every => "every",
        }
    }
}

fn pod_body(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "app", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"]}]}})
}

/// The floor of a round of creates: the same number of pod-sized writes
/// straight to the embedded store, from 16 writers; prints `writes/s`.
async fn store_floor_child(creates: usize) {
    let s = TestServer::start(Backend::Embedded).await;
    let value = bytes::Bytes::from(serde_json::to_vec(&pod_body("floor")).unwrap());
    let per_second = bench_util::raw_writes(
        s.server.store.clone(),
        16,
        creates,
        "/registry/bench/floor".into(),
        value,
    )
    .await;
    println!("{per_second:.1}");
}

/// One round of creates in this process: prints `creates/s cpu-µs-per-create`.
async fn creates_child(mode: Mode, creates: usize) {
    let traced = mode != Mode::Off;
    let store = traced.then(|| minik8s_trace::SpanStore::new(2000, 1000));
    let _tracing = minik8s_trace::init(minik8s_trace::Options {
        process: "master",
        store: store.clone(),
        ..Default::default()
    });
    let s = TestServer::start_with(Backend::Embedded, |c| {
        c.span_store = store.clone();
        if mode == Mode::Every {
            c.journeys_per_second = 0.0;
        }
    })
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/namespaces/default/pods", s.url);
    let cpu = cpu_seconds();
    let per_second = bench_util::ops_per_second(16, creates, move |i| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http
                .post(&url)
                .json(&pod_body(&format!("p{i}")))
                .send()
                .await
                .expect("POST");
            assert_eq!(r.status().as_u16(), 201);
        }
    })
    .await;
    let cpu_us = (cpu_seconds() - cpu) * 1e6 / creates as f64;
    if let Some(store) = &store {
        assert!(store.stats().0 > 0, "tracing on kept no trace");
    }
    println!("{per_second:.1} {cpu_us:.1}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// The floor of a pod's startup: its pause and app containers created and
/// started straight through the Docker API, one pod at a time (p50 ms).
async fn bare_docker(pods: usize, socket: &str) -> anyhow::Result<f64> {
    let network = "mk-bench";
    let runtime = kubelet::runtime::DockerRuntime::connect(socket, network, "bench-node")?;
    Ok(median(
        bench_util::bare_pods(&runtime, network, pods).await?,
    ))
}

/// Pod startup p50 (ms) of `pods` pods on a fresh local cluster.
async fn pod_startup(traced: bool, pods: usize, socket: &str) -> anyhow::Result<f64> {
    let network = "mk-bench";
    let cluster = bench_util::LocalCluster::start_with(socket, network, "10.199.0.0/24", |_| {
        if traced {
            Vec::new()
        } else {
            vec!["--traces-kept".into(), "0".into()]
        }
    })
    .await?;
    let api = cluster
        .client
        .dynamic(registry::of::<Pod>(), Some("default"));
    let mut times = Vec::new();
    for i in 0..pods {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("bench-{i}")},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "app", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}});
        let ms = bench_util::create_until(&api, pod, |p| {
            p["status"]["phase"] == "Running"
                && p["status"]["containerStatuses"]
                    .as_array()
                    .is_some_and(|c| c.iter().all(|s| s["ready"] == true))
        })
        .await?;
        times.push(ms);
    }
    let items = api.list(&Default::default()).await?["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut traced_pods = 0;
    for p in &items {
        let uid = p["metadata"]["uid"].as_str().unwrap_or("");
        let path = format!("/ui/v1/contexts?uid={uid}");
        if cluster.client.get_json(&path).await.is_ok() {
            traced_pods += 1;
        }
    }
    assert_eq!(
        traced_pods,
        if traced { pods } else { 0 },
        "tracing on/off as asked"
    );
    for i in 0..pods {
        let _ = api.delete(&format!("bench-{i}"), &Default::default()).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    drop(cluster);
    Ok(median(times))
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (each mode's rounds, then the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--store-floor-child") {
        store_floor_child(arg(&args, "--creates", 3000)).await;
        return Ok(());
    }
    if args.first().map(String::as_str) == Some("--creates-child") {
        let name = args.get(1).map(String::as_str).unwrap_or("");
        let mode = Mode::ALL.into_iter().find(|m| m.name() == name);
        let mode = mode.ok_or_else(|| anyhow::anyhow!("--creates-child off|on|every"))?;
        creates_child(mode, arg(&args, "--creates", 3000)).await;
        return Ok(());
    }
    let rounds = arg(&args, "--rounds", 4);
    let creates = arg(&args, "--creates", 3000);
    let pods = arg(&args, "--pods", 20);
    println!("# tracing on against off\n");
    println!(
        "date: {}  \nmachine: {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        bench_util::machine()
    );
    let me = std::env::current_exe()?;
    let mut creates_rows: [Vec<(f64, f64)>; 3] = Default::default();
    for round in 0..rounds {
        // Alternated, the order turned each round.
        for i in 0..3 {
            let mode = Mode::ALL[(round + i) % 3];
            let out = Command::new(&me)
                .args([
                    "--creates-child",
                    mode.name(),
                    "--creates",
                    &creates.to_string(),
                ])
                .output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            anyhow::ensure!(
                out.status.success(),
                "a round of creates failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut nums = text
                .split_whitespace()
                .filter_map(|n| n.parse::<f64>().ok());
            let (per_s, cpu) = (
                nums.next().unwrap_or(f64::NAN),
                nums.next().unwrap_or(f64::NAN),
            );
            eprintln!(
                "round {round}, tracing {}: {per_s:.0} creates/s, {cpu:.0} µs CPU per create",
                mode.name()
            );
            creates_rows[mode as usize].push((per_s, cpu));
        }
    }
    let out = Command::new(&me)
        .args(["--store-floor-child", "--creates", &creates.to_string()])
        .output()?;
    anyhow::ensure!(out.status.success(), "the store floor failed");
    let floor: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN);
    println!("## apiserver creates/s (embedded store, 16 clients, {creates} creates per round, {rounds} rounds)\n");
    println!("Floor, same run: {floor:.0} raw store writes/s of the same pod, 16 writers.\n");
    println!("| tracing | creates/s: median, mean (range) | CPU µs per create: median, mean (range) | cost: CPU, creates/s (means) |");
    println!("|---|---:|---:|---:|");
    let stats = |v: Vec<f64>| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        (median(v), mean, lo, hi)
    };
    let of = |mode: Mode| {
        let rows = &creates_rows[mode as usize];
        (
            stats(rows.iter().map(|r| r.0).collect()),
            stats(rows.iter().map(|r| r.1).collect()),
        )
    };
    let (off_rate, off_cpu) = of(Mode::Off);
    for (mode, label) in [
        (Mode::Off, "off (--traces-kept 0)"),
        (Mode::Shipped, "on, as shipped (at most 20 journeys/s)"),
        (Mode::Every, "on, every create (--journeys-per-second 0)"),
    ] {
        let (r, c) = of(mode);
        println!(
            "| {label} | {:.0}, {:.0} ({:.0}-{:.0}) | {:.0}, {:.0} ({:.0}-{:.0}) | {:+.1} %, {:+.1} % |",
            r.0,
            r.1,
            r.2,
            r.3,
            c.0,
            c.1,
            c.2,
            c.3,
            (c.1 / off_cpu.1 - 1.0) * 100.0,
            (r.1 / off_rate.1 - 1.0) * 100.0
        );
    }
    println!();

    let socket =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let mut startup: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for traced in order {
            let p50 = pod_startup(traced, pods, &socket).await?;
            eprintln!(
                "round {round}, tracing {}: pod startup p50 {p50:.0} ms",
                if traced { "on" } else { "off" }
            );
            startup[traced as usize].push(p50);
        }
    }
    let floor = bare_docker(pods, &socket).await?;
    let (off, on) = (median(startup[0].clone()), median(startup[1].clone()));
    println!("## pod startup: create → Running and ready ({pods} pods one at a time per round, {rounds} rounds, median of the rounds' p50)\n");
    println!("| tracing | p50 ms |");
    println!("|---|---:|");
    println!("| off (master --traces-kept 0) | {off:.0} |");
    println!("| on (as shipped) | {on:.0} |");
    println!("| cost | {:+.1} % |", (on / off - 1.0) * 100.0);
    println!("| floor: bare Docker, pause + app created and started | {floor:.0} |");
    Ok(())
}
