//! `apiserver-bench`: apiserver creates/s against raw store writes/s at client
//! concurrency 1, 16 and 64 (etcd and the embedded store), and watch delivery
//! delay with 100 watchers. Prints a Markdown report; not a test.
//!
//! Everything runs on this machine: a private etcd, the apiserver in process,
//! the clients in process. Usage: `apiserver-bench [--quick] [--kind pod|deployment]
//! [--creates-only]`: the objects created (pods by default; a Deployment's
//! validation covers its pod template too), and whether to skip the watch
//! delay.

use bytes::Bytes;
use futures::StreamExt;
use minik8s_testkit::{Backend, TestServer};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEVELS: [usize; 3] = [1, 16, 64];

fn pod_body(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "bench", "tier": "web"}},
           "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"],
                                    "resources": {"limits": {"cpu": "100m", "memory": "32Mi"}}}]}})
}

/// A Deployment of two replicas with the same pod template.
fn deployment_body(name: &str) -> serde_json::Value {
    let pod = pod_body(name);
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "bench"}},
                    "template": {"metadata": {"labels": pod["metadata"]["labels"]},
                                 "spec": pod["spec"]}}})
}

/// What the creates post: `(collection path, body for a name)`.
#[derive(Clone, Copy)]
enum Kind {
    Pod,
    Deployment,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Pod => "/api/v1/namespaces/default/pods",
            Kind::Deployment => "/apis/apps/v1/namespaces/default/deployments",
        }
    }

    fn body(self, name: &str) -> serde_json::Value {
        match self {
            Kind::Pod => pod_body(name),
            Kind::Deployment => deployment_body(name),
        }
    }
}

use benchmarks::ops_per_second as run;

/// A stored pod's bytes, so raw writes carry what the apiserver writes.
async fn sample_value(s: &TestServer) -> Bytes {
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/api/v1/namespaces/default/pods", s.url))
        .json(&pod_body("sample"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    s.server
        .store
        .get("/registry/core/pods/default/sample")
        .await
        .unwrap()
        .unwrap()
        .value
}

async fn throughput(backend: Backend, quick: bool, kind: Kind) -> Vec<(usize, f64, f64)> {
    let s = TestServer::start(backend).await;
    let value = sample_value(&s).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(128)
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for (round, c) in LEVELS.iter().enumerate() {
        let total = if quick {
            200
        } else if *c == 1 {
            1500
        } else {
            6000
        };
        let store = s.server.store.clone();
        let v = value.clone();
        let raw = benchmarks::raw_writes(store, *c, total, format!("/bench/raw/{round}"), v).await;
        let url = format!("{}{}", s.url, kind.path());
        let client = http.clone();
        let api = run(*c, total, move |i| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let r = client
                    .post(&url)
                    .json(&kind.body(&format!("p{round}-{i}")))
                    .send()
                    .await
                    .expect("POST");
                assert_eq!(r.status().as_u16(), 201);
            }
        })
        .await;
        rows.push((*c, raw, api));
    }
    rows
}

/// Delay from sending a create to each of `watchers` receiving its event.
async fn watch_delay(backend: Backend, watchers: usize, events: usize) -> (f64, f64, f64) {
    let s = TestServer::start(backend).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(watchers + 8)
        .build()
        .unwrap();
    let url = format!("{}/api/v1/namespaces/default/pods", s.url);
    let list: serde_json::Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![None; events]));
    let delays: Arc<std::sync::Mutex<Vec<f64>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let resp = http
            .get(format!("{url}?watch=true&resourceVersion={rv}"))
            .send()
            .await
            .unwrap();
        let (sent, delays) = (sent.clone(), delays.clone());
        tasks.push(tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = Vec::new();
            let mut seen = 0;
            while seen < events {
                let chunk = body.next().await.expect("watch open").expect("chunk");
                buf.extend_from_slice(&chunk);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let now = Instant::now();
                    let ev: serde_json::Value = serde_json::from_slice(&line).unwrap();
                    let name = ev["object"]["metadata"]["name"].as_str().unwrap_or("");
                    if let Some(i) = name.strip_prefix("w").and_then(|n| n.parse::<usize>().ok()) {
                        if let Some(t) = sent.lock().unwrap()[i] {
                            delays
                                .lock()
                                .unwrap()
                                .push((now - t).as_secs_f64() * 1000.0);
                        }
                        seen += 1;
                    }
                }
            }
        }));
    }
    for i in 0..events {
        sent.lock().unwrap()[i] = Some(Instant::now());
        let r = http
            .post(&url)
            .json(&pod_body(&format!("w{i}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("watchers finish")
            .unwrap();
    }
    let mut d = delays.lock().unwrap().clone();
    d.sort_by(f64::total_cmp);
    let pct = |p: f64| d[((d.len() as f64 * p) as usize).min(d.len() - 1)];
    (pct(0.5), pct(0.99), *d.last().unwrap())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let creates_only = args.iter().any(|a| a == "--creates-only");
    let kind = match args
        .iter()
        .position(|a| a == "--kind")
        .map(|i| args.get(i + 1))
    {
        None => Kind::Pod,
        Some(Some(k)) if k == "pod" => Kind::Pod,
        Some(Some(k)) if k == "deployment" => Kind::Deployment,
        Some(other) => {
            eprintln!("apiserver-bench: --kind takes pod or deployment, not {other:?}");
            std::process::exit(2);
        }
    };
    println!("# apiserver benchmark\n");
    println!(
        "date: {}  \nmachine: {}\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    for (label, backend) in [("etcd", Backend::Etcd), ("embedded", Backend::Embedded)] {
        println!("## creates/s, {label} store\n");
        println!("| concurrency | raw store writes/s | apiserver creates/s | ratio |");
        println!("|---:|---:|---:|---:|");
        for (c, raw, api) in throughput(backend, quick, kind).await {
            println!("| {c} | {raw:.0} | {api:.0} | {:.2} |", api / raw);
        }
        println!();
    }
    if creates_only {
        return;
    }
    let (watchers, events) = if quick { (10, 20) } else { (100, 200) };
    println!("## watch delivery delay, {watchers} watchers, {events} creates (send → received by each watcher)\n");
    println!("| store | p50 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|");
    for (label, backend) in [("etcd", Backend::Etcd), ("embedded", Backend::Embedded)] {
        let (p50, p99, max) = watch_delay(backend, watchers, events).await;
        println!("| {label} | {p50:.1} | {p99:.1} | {max:.1} |");
    }
}
