//! `tracing-bench`: what tracing as shipped costs (issue 48), on against
//! off in the same run, alternated.
//!
//! - **apiserver creates/s**: a fresh process per round (tracing is
//!   process-wide) with an in-process apiserver on the embedded store,
//!   `--creates` pod creates over HTTP from 16 clients; its creates/s and
//!   the process's CPU per create. On: the master's tracing (every create
//!   starts a journey: a request span, its admission, validation and store
//!   steps, kept in the span store). Off: no tracing installed.
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

/// One round of creates in this process: prints `creates/s cpu-µs-per-create`.
async fn creates_child(traced: bool, creates: usize) {
    let store = traced.then(|| minik8s_trace::SpanStore::new(2000, 1000));
    let _tracing = traced.then(|| {
        minik8s_trace::init(minik8s_trace::Options {
            process: "master",
            store: store.clone(),
            ..Default::default()
        })
    });
    let s = TestServer::start_with(Backend::Embedded, |c| c.span_store = store.clone()).await;
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/namespaces/default/pods", s.url);
    let cpu = cpu_seconds();
    let per_second = bench_util::ops_per_second(16, creates, move |i| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"), "labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "app", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"]}]}});
            let r = http.post(&url).json(&body).send().await.expect("POST");
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
    let traced_pods = api
        .list(&Default::default())
        .await?
        .get("items")
        .and_then(|i| i.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|p| p["metadata"]["annotations"][minik8s_trace::ANNOTATION].is_string())
        .count();
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--creates-child") {
        let traced = args.get(1).map(String::as_str) == Some("on");
        creates_child(traced, arg(&args, "--creates", 3000)).await;
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
    let mut creates_rows: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        // Alternated, and the order flipped each round.
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for traced in order {
            let out = Command::new(&me)
                .args([
                    "--creates-child",
                    if traced { "on" } else { "off" },
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
                if traced { "on" } else { "off" }
            );
            creates_rows[traced as usize].push((per_s, cpu));
        }
    }
    println!("## apiserver creates/s (embedded store, 16 clients, {creates} creates per round, {rounds} rounds, median)\n");
    println!("| tracing | creates/s | CPU µs per create |");
    println!("|---|---:|---:|");
    let med = |rows: &Vec<(f64, f64)>| {
        (
            median(rows.iter().map(|r| r.0).collect()),
            median(rows.iter().map(|r| r.1).collect()),
        )
    };
    let (off, on) = (med(&creates_rows[0]), med(&creates_rows[1]));
    println!("| off | {:.0} | {:.0} |", off.0, off.1);
    println!("| on (as shipped) | {:.0} | {:.0} |", on.0, on.1);
    println!(
        "| cost | {:+.1} % | {:+.1} % |\n",
        (off.0 / on.0 - 1.0) * 100.0,
        (on.1 / off.1 - 1.0) * 100.0
    );

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
    let (off, on) = (median(startup[0].clone()), median(startup[1].clone()));
    println!("## pod startup: create → Running and ready ({pods} pods one at a time per round, {rounds} rounds, median of the rounds' p50)\n");
    println!("| tracing | p50 ms |");
    println!("|---|---:|");
    println!("| off (master --traces-kept 0) | {off:.0} |");
    println!("| on (as shipped) | {on:.0} |");
    println!("| cost | {:+.1} % |", (on / off - 1.0) * 100.0);
    Ok(())
}
