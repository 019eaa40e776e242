//! `scheduler-bench`: the scheduler with 1,000 hollow nodes and 10,000 pods.
//! Creates the pods first, then starts the scheduler and measures pods bound
//! per second until every pod is bound. Everything runs in this process on an
//! in-process apiserver (embedded store). Prints a Markdown report; not a test.
//! Usage: `scheduler-bench [NODES] [PODS]`.

use futures::StreamExt;
use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{Client, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::json;
use std::time::{Duration, Instant};

use benchmarks as bench_util;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let (nodes, pods) = (
        args.first().copied().unwrap_or(1000),
        args.get(1).copied().unwrap_or(10_000),
    );
    let server = TestServer::start_with(Backend::Embedded, |c| c.watch_cache_size = 50_000).await;
    let client = Client::new(&server.url);
    let register_secs = benchmarks::run_hollow_nodes(&client, nodes, 60, 10).await?;

    let api = client.dynamic(registry::of::<Pod>(), Some("default"));
    let t = Instant::now();
    let created: Vec<bool> = futures::stream::iter(0..pods)
        .map(|i| {
            let api = api.clone();
            async move {
                let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
                                 "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}});
                api.create(&pod).await.is_ok()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(created.iter().all(|ok| *ok), "creating pods failed");
    let create_secs = t.elapsed().as_secs_f64();

    // Count bindings from a watch (a list every few ms would itself load the server).
    let rv = api
        .list(&ListParams::default().fields("metadata.name=none"))
        .await?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut events = api.watch(&ListParams::default(), &rv, false).await?;
    let t = Instant::now();
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    let mut bound = std::collections::HashSet::new();
    let mut last_rv = rv;
    while bound.len() < pods {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .map_err(|_| anyhow::anyhow!("no progress for 60 s; {} bound", bound.len()))?;
        match ev {
            Some(Ok(minik8s_client::WatchEvent::Modified(p))) => {
                if let Some(rv) = p["metadata"]["resourceVersion"].as_str() {
                    last_rv = rv.to_string();
                }
                if p["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| !n.is_empty())
                {
                    bound.insert(p["metadata"]["name"].as_str().unwrap_or("").to_string());
                }
            }
            // The server ended the watch (a slow reader is cut off): resume.
            None | Some(Err(_)) => {
                events = api.watch(&ListParams::default(), &last_rv, false).await?;
            }
            Some(Ok(_)) => {}
        }
    }
    let bind_secs = t.elapsed().as_secs_f64();
    // Spread: round-robin should put pods/nodes on every node.
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

    println!("# scheduler benchmark\n");
    println!("date: {}  \n{nodes} hollow nodes, {pods} pods (10m cpu, 16Mi each), in-process apiserver (embedded store)\n", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
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
    println!("| schedule and bind all (scheduler start → none unbound) | {bind_secs:.1} | **{:.0} pods/s** |", pods as f64 / bind_secs);
    println!("\npods per node: min {min}, max {max} (round-robin)  \nprocess RSS at the end (apiserver + scheduler + hollow nodes + client): {:.0} MiB", bench_util::rss_mib("self"));
    Ok(())
}
