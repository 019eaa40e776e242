//! Prometheus on the quick start (`scripts/quickstart.sh --with-monitoring`):
//! Debian's Prometheus discovers the cluster through our API (over HTTP SD
//! from prometheus-sd's informers, as the ServiceAccount
//! monitoring/prometheus: Debian builds Prometheus without
//! `kubernetes_sd_configs`), every target it finds is scraped without error, and
//! doc/monitoring.md's commands answer with the data they promise (a pod's
//! CPU, API request rates, the scheduler's latency, an LWS's groups).

use std::process::Command;
use std::time::Duration;

const PROMETHEUS: &str = "http://127.0.0.1:9090";

/// The jobs of scripts/lib/monitoring.sh that must each have a healthy target
/// on the quick start (pods and Services are scraped only when annotated).
const JOBS: &[&str] = &["apiserver", "kubelet", "cadvisor", "kube-proxy"];

/// doc/monitoring.md's commands after the quick start itself, in its order:
/// (command, text the answer must contain, text it must not contain). Queries
/// are asked again until they hold (rates need two scrapes).
const DOC_COMMANDS: &[(&str, &str, &str)] = &[
    (
        "curl -s 'http://127.0.0.1:9091/targets?role=node'",
        r#""__meta_kubernetes_node_address_InternalIP":"#,
        "",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=count by (job) (up == 1)'",
        r#"{"job":"kube-proxy"}"#,
        "",
    ),
    ("kubectl apply -f examples/lws.yaml", "leaderworkerset.leaderworkerset.x-k8s.io/demo", ""),
    (
        "kubectl wait --for=condition=Available lws/demo --timeout=120s",
        "condition met",
        "",
    ),
    (
        r#"curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="default", container!=""}[1m]))'"#,
        r#""pod":"hello""#,
        "",
    ),
    (
        r#"curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=container_memory_working_set_bytes{namespace="default", pod="hello"}'"#,
        r#""container":"hello""#,
        "",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=sum by (verb, resource) (rate(apiserver_request_total[1m]))'",
        r#""resource":"pods","verb":"LIST""#,
        "",
    ),
    (
        r#"curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=sum by (code) (increase(apiserver_request_total{code=~"4..|5.."}[5m]))'"#,
        r#""status":"success""#,
        "",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket[5m])))'",
        r#""result":[{"metric":{},"value":["#,
        "NaN",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=scheduler_schedule_attempts_total'",
        r#""result":"scheduled""#,
        "",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=sum by (leaderworkerset, state) (lws_groups)'",
        r#""leaderworkerset":"demo","state":"Ready""#,
        "",
    ),
    (
        "curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=workqueue_depth'",
        r#""name":"scheduler""#,
        "",
    ),
    ("kubectl delete -f examples/lws.yaml", "deleted", ""),
    (
        r#"kubectl get --raw /metrics | grep '^apiserver_request_total{verb="LIST"' | head -3"#,
        r#"apiserver_request_total{verb="LIST",group="#,
        "",
    ),
    (
        r#"kubectl get --raw /api/v1/nodes/$(hostname | tr A-Z a-z)/proxy/metrics/cadvisor | grep 'pod="hello"'"#,
        r#"container_cpu_usage_seconds_total{container="hello","#,
        "",
    ),
];

/// Runs `command` from the repository root, as a student would.
fn run(command: &str, kubeconfig: &str) -> (bool, String) {
    crate::doc_command::run(command, &crate::doc_command::repo(), kubeconfig, &[])
}

/// The active targets as (job, health, last error); empty when Prometheus
/// does not answer.
fn targets() -> Vec<(String, String, String)> {
    let out = Command::new("curl")
        .args(["-s", &format!("{PROMETHEUS}/api/v1/targets?state=active")])
        .output()
        .expect("curl");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    doc.pointer("/data/activeTargets")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .map(|t| {
            let text = |p: &str| {
                t.pointer(p)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            (text("/labels/job"), text("/health"), text("/lastError"))
        })
        .collect()
}

pub fn passes(started: &str, kubeconfig: &str) {
    assert!(
        started.contains("Prometheus on http://127.0.0.1:9090"),
        "quickstart.sh --with-monitoring did not start Prometheus:\n{started}"
    );
    // Discovery (list + watch of nodes, Endpoints, Services, pods) and one
    // scrape of each target, all within the scrape interval's reach.
    minik8s_testkit::poll_blocking(
        90,
        Duration::from_secs(2),
        "every Prometheus target to be discovered and up",
        || {
            let found = targets();
            let missing: Vec<_> = JOBS
                .iter()
                .filter(|job| !found.iter().any(|(j, _, _)| j == *job))
                .collect();
            let down: Vec<_> = found.iter().filter(|(_, h, _)| h != "up").collect();
            (missing.is_empty() && down.is_empty())
                .then_some(())
                .ok_or(format!(
                    "jobs not discovered: {missing:?}; not up: {down:?}"
                ))
        },
    );
    for (command, expect, refuse) in DOC_COMMANDS {
        let is_query = command.contains("/api/v1/query");
        let answer = minik8s_testkit::poll_blocking(
            if is_query { 90 } else { 1 },
            Duration::from_secs(3),
            &format!("doc/monitoring.md: `{command}` to answer {expect:?}"),
            || {
                let (ok, text) = run(command, kubeconfig);
                (ok && text.contains(expect) && (refuse.is_empty() || !text.contains(refuse)))
                    .then(|| text.clone())
                    .ok_or(text)
            },
        );
        if is_query {
            eprintln!(
                "{command}\n  {}",
                answer.chars().take(300).collect::<String>()
            );
        }
    }
}
