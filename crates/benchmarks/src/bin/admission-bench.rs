//! `admission-bench`: what ResourceQuota and LimitRange cost a create. Pods
//! are created at concurrency 1, 16 and 64 in a namespace with nothing and
//! in one with five ResourceQuotas and a LimitRange (each create defaulted by
//! the LimitRanger, checked against every quota and charged to each by
//! compare-and-swap on its status), same run, same apiserver (in process,
//! embedded store). Refused creates are counted: none is expected. Prints a
//! Markdown report; not a test. Usage: `admission-bench [PODS_PER_LEVEL]`.

use minik8s_testkit::{Backend, TestServer};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const LEVELS: [usize; 3] = [1, 16, 64];

fn pod(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"]}]}})
}

/// Five quotas a teacher might give a student, and a LimitRange giving pods
/// their requests and limits.
async fn limit(url: &str, ns: &str) {
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        let http = http.clone();
        async move {
            let r = http.post(path).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        }
    };
    let base = format!("{url}/api/v1/namespaces/{ns}");
    let big = 1_000_000;
    let quotas = [
        json!({"pods": big.to_string()}),
        json!({"requests.cpu": "100000", "requests.memory": "1000Ti"}),
        json!({"limits.cpu": "100000", "limits.memory": "1000Ti"}),
        json!({"count/configmaps": "100", "services": "10"}),
        json!({"requests.storage": "1000Ti", "persistentvolumeclaims": "100"}),
    ];
    for (i, hard) in quotas.into_iter().enumerate() {
        post(
            format!("{base}/resourcequotas"),
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": format!("q{i}")},
                   "spec": {"hard": hard}}),
        )
        .await;
        // What the quota controller writes first (no controller runs here):
        // a quota the controller has not counted yet constrains nothing.
        let used: serde_json::Map<String, serde_json::Value> = hard
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (k.clone(), json!("0")))
            .collect();
        let r = http
            .patch(format!("{base}/resourcequotas/q{i}/status"))
            .header("Content-Type", "application/merge-patch+json")
            .json(&json!({"status": {"hard": hard, "used": used}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    post(
        format!("{base}/limitranges"),
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
               "spec": {"limits": [{"type": "Container", "default": {"cpu": "200m", "memory": "64Mi"},
                                    "defaultRequest": {"cpu": "100m", "memory": "32Mi"},
                                    "max": {"cpu": "2", "memory": "1Gi"}}]}}),
    )
    .await;
}

/// Creates/s of `total` pods in `ns` at `concurrency`, and how many were refused.
async fn creates(url: &str, ns: &str, level: usize, total: usize) -> (f64, usize) {
    let http = reqwest::Client::new();
    let refused = Arc::new(AtomicUsize::new(0));
    let (u, n, r) = (url.to_string(), ns.to_string(), refused.clone());
    let rate = benchmarks::ops_per_second(level, total, move |i| {
        let (http, url, r) = (
            http.clone(),
            format!("{u}/api/v1/namespaces/{n}/pods"),
            r.clone(),
        );
        async move {
            let resp = http
                .post(url)
                .json(&pod(&format!("c{level}-{i}")))
                .send()
                .await
                .unwrap();
            if !resp.status().is_success() {
                r.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    (rate, refused.load(Ordering::Relaxed))
}

#[tokio::main]
async fn main() {
    let per_level: usize = benchmarks::numeric_args().first().copied().unwrap_or(2000);
    let s = TestServer::start(Backend::Embedded).await;
    let http = reqwest::Client::new();
    for ns in ["plain", "limited"] {
        let r = http
            .post(format!("{}/api/v1/namespaces", s.url))
            .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
    limit(&s.url, "limited").await;
    println!("# admission benchmark: 5 ResourceQuotas and a LimitRange against none\n");
    println!(
        "date: {}  \nmachine: {}  \n{per_level} pod creates per level, in-process apiserver (embedded store)\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        benchmarks::machine()
    );
    println!("| concurrency | creates/s, no quota | creates/s, 5 quotas + LimitRange | ratio | refused |");
    println!("|---:|---:|---:|---:|---:|");
    for level in LEVELS {
        let (plain, _) = creates(&s.url, "plain", level, per_level).await;
        let (limited, refused) = creates(&s.url, "limited", level, per_level).await;
        println!(
            "| {level} | {plain:.0} | {limited:.0} | {:.2} | {refused} |",
            limited / plain
        );
    }
    let used = http
        .get(format!(
            "{}/api/v1/namespaces/limited/resourcequotas/q0",
            s.url
        ))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    println!(
        "\nquota q0 `status.used.pods` at the end: {} (pods created: {})",
        used["status"]["used"]["pods"],
        LEVELS.len() * per_level
    );
}
