//! `discovery-bench`: the real kubectl 1.37's `get pods` against an
//! in-process apiserver, its discovery cache cleared before each run, with
//! aggregated discovery (`apidiscovery.k8s.io/v2`: two documents) and
//! without it (a loopback proxy that takes the aggregated form out of
//! kubectl's `Accept`, so the same kubectl and server use the legacy
//! documents, one per group/version), and with a warm cache (no discovery
//! at all: the floor). Counts the requests kubectl makes (`-v=6`). Prints a
//! Markdown report.
//!
//! Usage: `discovery-bench [--runs N]` (default 10). Needs the real kubectl
//! 1.37 (`scripts/test.sh` installs it; `REAL_KUBECTL` points elsewhere).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use minik8s_testkit::{Backend, TestServer};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Forwards every request to `upstream`, the `Accept` of `/api` and `/apis`
/// reduced to plain JSON (what a client without aggregated discovery sends).
async fn legacy_proxy(State(upstream): State<String>, req: Request) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let discovery_root = matches!(req.uri().path(), "/api" | "/apis");
    let mut out = reqwest::Client::new().request(req.method().clone(), format!("{upstream}{path}"));
    for (name, value) in req.headers() {
        if name == "host" || (discovery_root && name == "accept") {
            continue;
        }
        out = out.header(name, value);
    }
    if discovery_root {
        out = out.header("accept", "application/json");
    }
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    let resp = match out.body(body).send().await {
        Ok(r) => r,
        Err(e) => {
            return Response::builder()
                .status(502)
                .body(Body::from(e.to_string()))
                .unwrap()
        }
    };
    let mut builder = Response::builder().status(resp.status().as_u16());
    for (name, value) in resp.headers() {
        builder = builder.header(name, value);
    }
    builder
        .body(Body::from(resp.bytes().await.unwrap_or_default()))
        .unwrap()
}

/// One `kubectl get pods -v=6` with its own HOME (an empty discovery cache
/// unless `home` is reused): wall time and the requests it logged.
fn run(kubectl: &Path, home: &Path, server: &str) -> (Duration, usize, usize) {
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::write(
        home.join(".kube/config"),
        format!("apiVersion: v1\nkind: Config\nclusters: [{{name: m, cluster: {{server: \"{server}\"}}}}]\ncontexts: [{{name: m, context: {{cluster: m, user: u}}}}]\nusers: [{{name: u, user: {{}}}}]\ncurrent-context: m\n"),
    )
    .unwrap();
    let start = Instant::now();
    let out = Command::new(kubectl)
        .args(["get", "pods", "-A", "-v=6"])
        .env("HOME", home)
        .env("KUBECONFIG", home.join(".kube/config"))
        .output()
        .expect("running kubectl");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stderr);
    let requests: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(server) && (l.contains("\"GET\"") || l.contains(" GET ")))
        .collect();
    let discovery = requests
        .iter()
        .filter(|l| !l.contains("/pods") && !l.contains("/openapi"))
        .count();
    (took, requests.len(), discovery)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let kubectl = minik8s_testkit::real_kubectl();
    let s = TestServer::start(Backend::Embedded).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .fallback(legacy_proxy)
        .with_state(s.url.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (direct, legacy) = (s.url.clone(), proxy.clone());
    let report = tokio::task::spawn_blocking(move || {
        let row = |label: &str, server: &str, warm: Option<&Path>| {
            let mut times = Vec::new();
            let mut counts = (0, 0);
            for _ in 0..runs {
                // A new HOME each run (an empty cache) unless a warm one is given.
                let fresh = tempfile::tempdir().unwrap();
                let (t, all, discovery) = run(&kubectl, warm.unwrap_or(fresh.path()), server);
                times.push(t);
                counts = (all, discovery);
            }
            let min = *times.iter().min().unwrap();
            format!(
                "| {label} | {:.0} ms | {:.0} ms | {} | {} |",
                median(times).as_secs_f64() * 1000.0,
                min.as_secs_f64() * 1000.0,
                counts.0,
                counts.1
            )
        };
        let mut rows = vec![
            row("aggregated discovery, cache cleared", &direct, None),
            row("legacy discovery (proxy), cache cleared", &legacy, None),
        ];
        // The floor: the same command with the cache kubectl wrote (no discovery).
        let home = tempfile::tempdir().unwrap();
        run(&kubectl, home.path(), &direct);
        rows.push(row(
            "warm cache (floor: no discovery)",
            &direct,
            Some(home.path()),
        ));
        rows
    })
    .await
    .unwrap();
    println!(
        "kubectl {}: `kubectl get pods -A`, {runs} runs each\n",
        minik8s_testkit::REAL_KUBECTL_VERSION
    );
    println!("| discovery | median | min | requests | discovery requests |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for row in report {
        println!("{row}");
    }
}
