//! `scheduler-bench`: the scheduler with 1,000 hollow nodes and 10,000 pods.
//! Creates the pods first, then starts the scheduler and measures pods bound
//! per second until every pod is bound. Everything runs in this process on an
//! in-process apiserver (embedded store). Prints a Markdown report; not a test.
//!
//! Usage: `scheduler-bench [NODES] [PODS] [plain|spread|preempt|dra]`:
//! - `plain` (default): pods of 10m CPU, placed round robin;
//! - `spread`: the same pods with a `maxSkew: 1` topology spread constraint
//!   over `kubernetes.io/hostname` (every decision counts the placed pods);
//! - `preempt`: PODS pods of low priority fill every node's CPU exactly
//!   (placed as in `plain`, the floor), then PODS/10 pods of high priority
//!   each preempt one: victims chosen, deleted through the hollow kubelets,
//!   the preemptors bound;
//! - `dra`: every node publishes 8 fake GPUs and every pod names a
//!   ResourceClaim of its own for one of them (made before the pods): the
//!   scheduler allocates a device per pod and writes the claim before the
//!   binding. With more pods than GPUs, the pods beyond stay pending.

use futures::StreamExt;
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

use benchmarks as bench_util;

/// Creates `count` pods named `<prefix><i>` from `spec` (32 at a time); the seconds taken.
async fn create_pods(api: &DynamicApi, prefix: &str, count: usize, spec: &Value) -> f64 {
    let t = Instant::now();
    let created: Vec<bool> = futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{prefix}{i}"), "labels": {"app": "bench"}}, "spec": spec});
            // The `dra` mode: each pod uses the claim named after it.
            if spec.get("resourceClaims").is_some() {
                pod["spec"]["resourceClaims"] =
                    json!([{"name": "gpu", "resourceClaimName": format!("{prefix}{i}")}]);
            }
            async move { api.create(&pod).await.is_ok() }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(created.iter().all(|ok| *ok), "creating pods failed");
    t.elapsed().as_secs_f64()
}

/// GPUs each hollow node publishes in the `dra` mode.
const GPUS_PER_NODE: usize = 8;

/// The DeviceClass of the fake GPUs and `count` claims `p<i>` of one GPU
/// each (the pod `p<i>` names its own), 32 at a time.
async fn create_claims(client: &Client, count: usize) -> anyhow::Result<()> {
    let resource = |kind| registry::by_kind("resource.k8s.io/v1", kind).expect("a DRA kind");
    client
        .dynamic(resource("DeviceClass"), None)
        .create(
            &json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu.minik8s.io"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.minik8s.io'"}}]}}),
        )
        .await?;
    let claims = client.dynamic(resource("ResourceClaim"), Some("default"));
    let created: Vec<bool> = futures::stream::iter(0..count)
        .map(|i| {
            let claims = claims.clone();
            let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": format!("p{i}")},
                "spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": "gpu.minik8s.io"}}]}}});
            async move { claims.create(&claim).await.is_ok() }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    anyhow::ensure!(created.iter().all(|ok| *ok), "creating claims failed");
    Ok(())
}

/// The pod's name when it is named `<prefix>*` and bound to a node.
fn bound_name<'a>(pod: &'a Value, prefix: &str) -> Option<&'a str> {
    let name = pod["metadata"]["name"].as_str()?;
    let node = pod["spec"]["nodeName"].as_str()?;
    (name.starts_with(prefix) && !node.is_empty()).then_some(name)
}

/// Waits on a watch from `rv` until `count` pods named `<prefix>*` are bound.
async fn wait_bound(
    api: &DynamicApi,
    rv: String,
    prefix: &str,
    count: usize,
) -> anyhow::Result<()> {
    let mut events = api.watch(&ListParams::default(), &rv, false).await?;
    let mut bound = HashSet::new();
    let started = Instant::now();
    let mut reported = 0;
    while bound.len() < count {
        // Progress on stderr every 10 s: a stall shows where it stopped.
        let secs = started.elapsed().as_secs();
        if secs / 10 > reported {
            reported = secs / 10;
            eprintln!("{secs} s: {} of {count} {prefix}* pods bound", bound.len());
            anyhow::ensure!(
                secs < 600,
                "{} of {count} bound after 10 minutes",
                bound.len()
            );
        }
        let ev = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .map_err(|_| anyhow::anyhow!("no progress for 60 s; {} bound", bound.len()))?;
        match ev {
            Some(Ok(minik8s_client::WatchEvent::Modified(p))) => {
                bound.extend(bound_name(&p, prefix).map(str::to_string));
            }
            // The server ended the watch (a slow reader is cut off, its
            // version maybe out of the watch cache by now): list what is
            // bound, then watch from the list, as an informer relists.
            None | Some(Err(_)) => {
                let list = api.list(&ListParams::default()).await?;
                let items = list["items"].as_array().into_iter().flatten();
                bound.extend(
                    items
                        .filter_map(|p| bound_name(p, prefix))
                        .map(str::to_string),
                );
                let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("");
                events = api.watch(&ListParams::default(), rv, false).await?;
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(())
}

async fn current_rv(api: &DynamicApi) -> anyhow::Result<String> {
    Ok(api
        .list(&ListParams::default().fields("metadata.name=none"))
        .await?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string())
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let (nodes, pods) = (
        args.first().copied().unwrap_or(1000),
        args.get(1).copied().unwrap_or(10_000),
    );
    let mode = std::env::args()
        .skip(1)
        .find(|a| a.parse::<usize>().is_err())
        .unwrap_or_else(|| "plain".into());
    anyhow::ensure!(
        ["plain", "spread", "preempt", "dra"].contains(&mode.as_str()),
        "mode is plain, spread, preempt or dra, not {mode}"
    );
    let server = TestServer::start_with(Backend::Embedded, |c| c.watch_cache_size = 50_000).await;
    let client = Client::new(&server.url);
    let gpus = if mode == "dra" { GPUS_PER_NODE } else { 0 };
    let register_secs =
        benchmarks::run_hollow_nodes_with_gpus(&client, nodes, 60, 10, gpus).await?;
    eprintln!("{nodes} hollow nodes registered");
    let api = client.dynamic(registry::of::<Pod>(), Some("default"));

    let container = |cpu: &str| {
        json!([{"name": "c", "image": "minik8s/busybox:latest",
        "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}}}])
    };
    let spec = match mode.as_str() {
        "spread" => {
            json!({"containers": container("10m"), "topologySpreadConstraints": [{"maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "bench"}}}]})
        }
        "preempt" => {
            let classes = client.dynamic(
                registry::of::<minik8s_api::k8s::api::scheduling::v1::PriorityClass>(),
                None,
            );
            for (name, value) in [("bench-low", 10), ("bench-high", 1000)] {
                classes
                    .create(
                        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name}, "value": value}),
                    )
                    .await?;
            }
            // PODS pods share the nodes' CPU exactly.
            let millis = kubelet::hollow::CPUS as usize * 1000 * nodes / pods;
            json!({"containers": container(&format!("{millis}m")), "priorityClassName": "bench-low",
                   "terminationGracePeriodSeconds": 0})
        }
        "dra" => {
            create_claims(&client, pods).await?;
            let mut containers = container("10m");
            containers[0]["resources"]["claims"] = json!([{"name": "gpu"}]);
            json!({"containers": containers, "resourceClaims": []})
        }
        _ => json!({"containers": container("10m")}),
    };
    let create_secs = create_pods(&api, "p", pods, &spec).await;
    eprintln!("{pods} pods created");

    let rv = current_rv(&api).await?;
    let t = Instant::now();
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    // With claims, only as many pods as there are GPUs can be bound.
    let placeable = match mode.as_str() {
        "dra" => pods.min(nodes * GPUS_PER_NODE),
        _ => pods,
    };
    wait_bound(&api, rv, "p", placeable).await?;
    let bind_secs = t.elapsed().as_secs_f64();

    let preempt = if mode == "preempt" {
        let high = (pods / 10).max(1);
        let mut spec = spec.clone();
        spec["priorityClassName"] = json!("bench-high");
        let rv = current_rv(&api).await?;
        let t = Instant::now();
        create_pods(&api, "high-", high, &spec).await;
        wait_bound(&api, rv, "high-", high).await?;
        Some((high, t.elapsed().as_secs_f64()))
    } else {
        None
    };

    // Placement: round-robin (or the spread constraint) puts pods/nodes on every node.
    let all = api.list(&ListParams::default()).await?;
    let mut per_node = std::collections::HashMap::new();
    for p in all["items"].as_array().into_iter().flatten() {
        *per_node
            .entry(p["spec"]["nodeName"].as_str().unwrap_or("").to_string())
            .or_insert(0usize) += 1;
    }
    let (min, max) = (
        per_node.values().min().copied().unwrap_or(0),
        per_node.values().max().copied().unwrap_or(0),
    );

    println!("# scheduler benchmark ({mode})\n");
    println!(
        "date: {}  \n{nodes} hollow nodes, {pods} pods, in-process apiserver (embedded store)\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    println!("| step | seconds | rate |");
    println!("|---|---:|---:|");
    println!(
        "| register {nodes} nodes | {register_secs:.1} | {:.0} nodes/s |",
        nodes as f64 / register_secs
    );
    println!(
        "| create {pods} pods (32 clients) | {create_secs:.1} | {:.0} pods/s |",
        pods as f64 / create_secs
    );
    println!("| schedule and bind {placeable} (scheduler start → all bound) | {bind_secs:.1} | **{:.0} pods/s** |", placeable as f64 / bind_secs);
    if let Some((high, secs)) = preempt {
        println!("| {high} pods of high priority, each preempting one (create → all bound) | {secs:.1} | **{:.0} pods/s** |", high as f64 / secs);
    }
    println!("\npods per node at the end: min {min}, max {max}  \nprocess RSS at the end (apiserver + scheduler + hollow nodes + client): {:.0} MiB", bench_util::rss_mib("self"));
    Ok(())
}
