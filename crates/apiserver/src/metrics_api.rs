//! `metrics.k8s.io/v1beta1`: PodMetrics and NodeMetrics, read from the kubelets'
//! `/stats/summary` when asked (what metrics-server does, built in). Feeds
//! `kubectl top` and the HPA.
//!
//! ```text
//!  GET /apis/metrics.k8s.io/v1beta1/namespaces/ns/pods ──▶ nodes ──▶ kubelet /stats/summary (each, ≤10 s old)
//!                                                          pods  ──▶ match by namespace/name, labelSelector
//! ```
//!
//! A summary is kept 10 s per node, so repeated `kubectl top` and HPA syncs do
//! not each wait for Docker's two-sample CPU reading. Nodes whose kubelet does
//! not answer (hollow nodes, a dead kubelet) simply have no metrics.

use crate::params::Params;
use crate::ApiServer;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_api::status::ApiError;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
/// The paths this API serves start so (`/apis/{GROUP}/{VERSION}/`).
pub const PATH_PREFIX: &str = "/apis/metrics.k8s.io/v1beta1/";
const FRESH_FOR: Duration = Duration::from_secs(10);
const WINDOW: &str = "10s";

/// Node name → (when fetched, summary).
pub(crate) type SummaryCache = tokio::sync::Mutex<HashMap<String, (Instant, Value)>>;

/// `/apis/metrics.k8s.io/v1beta1` resources, for discovery.
pub fn resource_list() -> Value {
    let res = |name: &str, kind: &str, namespaced: bool| json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]});
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{VERSION}"),
           "resources": [res("nodes", "NodeMetrics", false), res("pods", "PodMetrics", true)]})
}

/// The base URL of a node's kubelet server, from its status (http; see
/// [`ApiServer::kubelet_url`] for what the apiserver uses).
pub fn kubelet_url(node: &Value) -> String {
    let ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .unwrap_or("127.0.0.1");
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .unwrap_or(10250);
    format!("http://{ip}:{port}")
}

/// CPU in nanocores and memory in Ki, as metrics-server writes them.
fn usage(cpu_nano: u64, memory_bytes: u64) -> Value {
    json!({"cpu": format!("{cpu_nano}n"), "memory": format!("{}Ki", memory_bytes / 1024)})
}

fn u64_at(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or(0)
}

/// PodMetrics for one pod from its Summary entry (pure).
pub fn pod_metrics(pod: &Value, stats: &Value) -> Value {
    let containers: Vec<Value> = stats["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({"name": c["name"], "usage": usage(u64_at(c, "/cpu/usageNanoCores"), u64_at(c, "/memory/workingSetBytes"))})
                })
                .collect()
        })
        .unwrap_or_default();
    let m = &pod["metadata"];
    json!({"kind": "PodMetrics", "apiVersion": format!("{GROUP}/{VERSION}"),
           "metadata": {"name": m["name"], "namespace": m["namespace"], "labels": m["labels"],
                        "creationTimestamp": minik8s_api::meta::now_rfc3339()},
           "timestamp": stats["cpu"]["time"], "window": WINDOW, "containers": containers})
}

/// NodeMetrics from a node's Summary (pure).
pub fn node_metrics(node: &Value, summary: &Value) -> Value {
    let n = &summary["node"];
    let m = &node["metadata"];
    json!({"kind": "NodeMetrics", "apiVersion": format!("{GROUP}/{VERSION}"),
           "metadata": {"name": m["name"], "labels": m["labels"], "creationTimestamp": minik8s_api::meta::now_rfc3339()},
           "timestamp": n["cpu"]["time"], "window": WINDOW,
           "usage": usage(u64_at(n, "/cpu/usageNanoCores"), u64_at(n, "/memory/workingSetBytes"))})
}

impl ApiServer {
    /// Serves a GET under `/apis/metrics.k8s.io/v1beta1/` (`rest` is what follows).
    pub(crate) async fn metrics(&self, rest: &[&str], params: &Params) -> Result<Value, ApiError> {
        let nodes_info = registry::of::<Node>();
        let pods_info = registry::of::<Pod>();
        let list = |kind: &str, items: Vec<Value>| json!({"kind": format!("{kind}List"), "apiVersion": format!("{GROUP}/{VERSION}"), "metadata": {}, "items": items});
        let not_found = |what: &str, name: &str| {
            ApiError::new(
                404,
                "NotFound",
                format!("{what}.{GROUP} \"{name}\" not found"),
            )
        };
        match rest {
            ["nodes"] | ["nodes", _] => {
                let nodes = self.list(nodes_info, None, params).await?;
                let mut items = Vec::new();
                for node in nodes["items"].as_array().into_iter().flatten() {
                    let name = node["metadata"]["name"].as_str().unwrap_or("");
                    if let [_, wanted] = rest {
                        if name != *wanted {
                            continue;
                        }
                    }
                    if let Some(summary) = self.summary(node).await {
                        items.push(node_metrics(node, &summary));
                    }
                }
                match rest {
                    ["nodes", name] => items.pop().ok_or_else(|| not_found("nodes", name)),
                    _ => Ok(list("NodeMetrics", items)),
                }
            }
            ["pods"] | ["namespaces", _, "pods"] | ["namespaces", _, "pods", _] => {
                let ns = match rest {
                    ["namespaces", ns, ..] => Some(*ns),
                    _ => None,
                };
                let pods = self.list(pods_info, ns, params).await?;
                let mut by_node: HashMap<&str, Vec<&Value>> = HashMap::new();
                for pod in pods["items"].as_array().into_iter().flatten() {
                    if let ["namespaces", _, "pods", wanted] = rest {
                        if pod["metadata"]["name"] != *wanted {
                            continue;
                        }
                    }
                    let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
                    if !node.is_empty() && pod["status"]["phase"] == "Running" {
                        by_node.entry(node).or_default().push(pod);
                    }
                }
                let mut items = Vec::new();
                for (node, pods) in by_node {
                    let Ok((node_obj, _)) = self.read(nodes_info, None, node).await else {
                        continue;
                    };
                    let Some(summary) = self.summary(&node_obj).await else {
                        continue;
                    };
                    for pod in pods {
                        let stats = summary["pods"].as_array().into_iter().flatten().find(|s| {
                            s["podRef"]["name"] == pod["metadata"]["name"]
                                && s["podRef"]["namespace"] == pod["metadata"]["namespace"]
                        });
                        if let Some(stats) = stats {
                            items.push(pod_metrics(pod, stats));
                        }
                    }
                }
                items.sort_by_key(|i| {
                    (
                        i["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                        i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    )
                });
                match rest {
                    ["namespaces", _, "pods", name] => {
                        items.pop().ok_or_else(|| not_found("pods", name))
                    }
                    _ => Ok(list("PodMetrics", items)),
                }
            }
            _ => Err(ApiError::unknown_path()),
        }
    }

    /// A node's Summary, at most 10 s old; None if its kubelet does not answer.
    async fn summary(&self, node: &Value) -> Option<Value> {
        let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        if let Some((at, v)) = self.summaries.lock().await.get(&name) {
            if at.elapsed() < FRESH_FOR {
                return Some(v.clone());
            }
        }
        let url = format!("{}/stats/summary", self.kubelet_url(node));
        let fetched = async {
            self.kubelet_http()
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await?
                .error_for_status()?
                .json::<Value>()
                .await
        }
        .await;
        match fetched {
            Ok(v) => {
                self.summaries
                    .lock()
                    .await
                    .insert(name, (Instant::now(), v.clone()));
                Some(v)
            }
            Err(e) => {
                tracing::debug!(node = %name, error = %e, "no stats from the kubelet");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_path_prefix_names_the_group_and_version() {
        assert_eq!(PATH_PREFIX, format!("/apis/{GROUP}/{VERSION}/"));
    }

    use super::*;

    #[test]
    fn summary_to_metrics() {
        let summary = json!({"node": {"nodeName": "n", "cpu": {"time": "t", "usageNanoCores": 250_000_000u64},
                                      "memory": {"workingSetBytes": 2048u64 * 1024}},
                             "pods": [{"podRef": {"name": "p", "namespace": "default"},
                                       "containers": [{"name": "c", "cpu": {"usageNanoCores": 1_500_000u64}, "memory": {"workingSetBytes": 4096u64}}],
                                       "cpu": {"time": "t"}}]});
        let node = json!({"metadata": {"name": "n"}});
        let nm = node_metrics(&node, &summary);
        assert_eq!(
            nm["usage"],
            json!({"cpu": "250000000n", "memory": "2048Ki"})
        );
        let pod = json!({"metadata": {"name": "p", "namespace": "default", "labels": {"a": "b"}}});
        let pm = pod_metrics(&pod, &summary["pods"][0]);
        assert_eq!(
            pm["containers"][0],
            json!({"name": "c", "usage": {"cpu": "1500000n", "memory": "4Ki"}})
        );
        assert_eq!(pm["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(pm["window"], "10s");
        let with_port = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                                          "daemonEndpoints": {"kubeletEndpoint": {"Port": 10255}}}});
        assert_eq!(kubelet_url(&with_port), "http://10.0.0.5:10255");
    }
}
