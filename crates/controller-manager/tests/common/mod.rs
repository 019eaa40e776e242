//! Helpers shared by the controller manager's integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use minik8s_client::Client;
use minik8s_testkit::{Backend, TestServer};

/// An apiserver with `nodes` hollow nodes, the scheduler and every controller.
pub async fn cluster(prefix: &str, nodes: usize) -> (TestServer, Client) {
    cluster_with_gpus(prefix, nodes, 0).await
}

/// [`cluster`] whose hollow nodes each publish `fake_gpus` GPUs (DRA).
pub async fn cluster_with_gpus(
    prefix: &str,
    nodes: usize,
    fake_gpus: usize,
) -> (TestServer, Client) {
    let (server, client, _) = cluster_with_metrics(prefix, nodes, fake_gpus).await;
    (server, client)
}

/// [`cluster_with_gpus`], with the controller manager's metrics to read.
pub async fn cluster_with_metrics(
    prefix: &str,
    nodes: usize,
    fake_gpus: usize,
) -> (TestServer, Client, controller_manager::metrics::Metrics) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let hollow = kubelet::hollow::HollowConfig {
        prefix: prefix.into(),
        count: nodes,
        lease_seconds: 10,
        sync_seconds: 10,
        fake_gpus,
    };
    let nodes = kubelet::hollow::start(&client, &hollow).await.unwrap();
    tokio::spawn(nodes.run_forever());
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    let config = controller_manager::Config::default();
    let metrics = config.metrics.clone();
    tokio::spawn(controller_manager::run(client.clone(), config));
    (server, client, metrics)
}

/// Polls `f` until it returns Ok, or fails with its last error after `secs`.
pub async fn until<T, F, Fut>(what: &str, secs: u64, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    minik8s_testkit::until(secs, what, f).await
}

/// Runs the real kubectl (v1.32) against `server`: (succeeded, stdout + stderr).
pub fn kubectl(server: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(minik8s_testkit::real_kubectl())
        .args(["--server", server])
        .args(args)
        .output()
        .expect("running the real kubectl (1.37)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs the real kubectl and fails the test unless it succeeds; its output.
pub fn kubectl_ok(server: &str, args: &[&str]) -> String {
    let (ok, out) = kubectl(server, args);
    assert!(ok, "kubectl {}: {out}", args.join(" "));
    out
}

/// `kubectl get -o json <args>`, parsed.
pub fn kubectl_json(server: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&kubectl_ok(server, &all)).unwrap()
}

/// The words of line `n` of kubectl's table output (0: the header).
pub fn table_line(out: &str, n: usize) -> Vec<&str> {
    out.lines()
        .nth(n)
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

/// The (reason, message) of each Event in `namespace` whose fields match
/// `selector` (e.g. `involvedObject.name=web`): what `kubectl describe` lists.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Vec<(String, String)> {
    let events = client.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::Event>(),
        Some(namespace),
    );
    events
        .list(&minik8s_client::ListParams::default().fields(selector))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}
