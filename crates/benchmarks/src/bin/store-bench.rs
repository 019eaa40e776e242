//! `store-bench`: raw store creates/s and latency at client concurrency 1, 16
//! and 64, for etcd and the embedded store, on this machine. The embedded
//! store commits with fsync (SQLite WAL, synchronous=FULL); etcd fsyncs its
//! own log. Prints a Markdown table; not a test.
//!
//! Usage: `store-bench [--quick]`.

use apiserver::store::embedded::EmbeddedStore;
use apiserver::store::etcd::EtcdStore;
use apiserver::store::Store;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;

const LEVELS: [usize; 3] = [1, 16, 64];

/// A stored pod's size (~1.7 KB of JSON, as the apiserver writes with managedFields).
fn value() -> Bytes {
    let pad = "x".repeat(1600);
    Bytes::from(format!(
        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p"}},"pad":"{pad}"}}"#
    ))
}

/// creates/s, p50 ms, p99 ms of `total` creates by `concurrency` clients.
async fn creates(
    store: Arc<dyn Store>,
    prefix: &str,
    concurrency: usize,
    total: usize,
) -> (f64, f64, f64) {
    let started = Instant::now();
    let per_client = total / concurrency;
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let (store, prefix, v) = (store.clone(), prefix.to_string(), value());
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let t = Instant::now();
                    store
                        .create(&format!("{prefix}/{c}-{i}"), v.clone())
                        .await
                        .expect("create");
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("client task"));
    }
    let rate = lat.len() as f64 / started.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    (
        rate,
        benchmarks::percentile(&lat, 0.5),
        benchmarks::percentile(&lat, 0.99),
    )
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("# store benchmark\n");
    println!(
        "date: {}  \nmachine: {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    let etcd = minik8s_testkit::EtcdProcess::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let stores: Vec<(&str, Arc<dyn Store>)> = vec![
        (
            "etcd",
            Arc::new(EtcdStore::connect(&etcd.endpoint).await.expect("etcd")),
        ),
        (
            "embedded",
            Arc::new(EmbeddedStore::open(dir.path()).expect("embedded store")),
        ),
    ];
    println!("| store | concurrency | creates/s | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|---:|");
    for (label, store) in stores {
        for (round, c) in LEVELS.iter().enumerate() {
            let total = match (quick, c) {
                (true, _) => 256,
                (false, 1) => 2_000,
                (false, _) => 8_000 / c * c,
            };
            let (rate, p50, p99) =
                creates(store.clone(), &format!("/bench/{round}"), *c, total).await;
            println!("| {label} | {c} | {rate:.0} | {p50:.2} | {p99:.2} |");
        }
    }
}
