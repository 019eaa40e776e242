//! `kubectl top pods|nodes`: CPU and memory from `metrics.k8s.io/v1beta1`,
//! printed as kubectl prints them (CPU in millicores rounded up, memory in Mi).

use crate::printer;
use anyhow::{bail, Result};
use minik8s_api::quantity::Quantity;
use minik8s_client::{Client, ClientError};
use serde_json::Value;

const METRICS: &str = "/apis/metrics.k8s.io/v1beta1";

fn millicores(q: &Value) -> i64 {
    q.as_str()
        .and_then(|s| Quantity::parse(s).ok())
        .map_or(0, Quantity::millis)
}

fn bytes(q: &Value) -> i64 {
    q.as_str()
        .and_then(|s| Quantity::parse(s).ok())
        .map_or(0, Quantity::units)
}

fn cpu_cell(m: i64) -> String {
    format!("{m}m")
}

fn memory_cell(b: i64) -> String {
    format!("{}Mi", b / (1024 * 1024))
}

async fn metrics_get(client: &Client, path: &str) -> Result<Value> {
    match client.get_json(path).await {
        Ok(v) => Ok(v),
        Err(ClientError::Api(e))
            if e.code == 404 && !path.contains("/pods/") && !path.contains("/nodes/") =>
        {
            bail!("Metrics API not available")
        }
        Err(e) => Err(e.into()),
    }
}

/// The rows of `kubectl top pods` (pure).
pub fn pod_rows(items: &[Value], all_namespaces: bool, containers: bool) -> Vec<Vec<String>> {
    let mut header = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE".to_string());
    }
    if containers {
        header.extend(["POD".to_string(), "NAME".to_string()]);
    } else {
        header.push("NAME".to_string());
    }
    header.extend(["CPU(cores)".to_string(), "MEMORY(bytes)".to_string()]);
    let mut rows = vec![header];
    for pm in items {
        let ns = pm["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = pm["metadata"]["name"].as_str().unwrap_or("").to_string();
        let cs = pm["containers"].as_array().cloned().unwrap_or_default();
        let prefix = |row: &mut Vec<String>| {
            if all_namespaces {
                row.push(ns.clone());
            }
        };
        if containers {
            for c in &cs {
                let mut row = Vec::new();
                prefix(&mut row);
                row.push(name.clone());
                row.push(c["name"].as_str().unwrap_or("").to_string());
                row.push(cpu_cell(millicores(&c["usage"]["cpu"])));
                row.push(memory_cell(bytes(&c["usage"]["memory"])));
                rows.push(row);
            }
        } else {
            let cpu: i64 = cs.iter().map(|c| millicores(&c["usage"]["cpu"])).sum();
            let mem: i64 = cs.iter().map(|c| bytes(&c["usage"]["memory"])).sum();
            let mut row = Vec::new();
            prefix(&mut row);
            row.extend([name, cpu_cell(cpu), memory_cell(mem)]);
            rows.push(row);
        }
    }
    rows
}

/// The rows of `kubectl top nodes` (pure): usage and its share of allocatable.
pub fn node_rows(metrics: &[Value], nodes: &[Value]) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    ];
    for nm in metrics {
        let name = nm["metadata"]["name"].as_str().unwrap_or("");
        let node = nodes.iter().find(|n| n["metadata"]["name"] == name);
        let alloc = |r: &str| node.map(|n| n["status"]["allocatable"][r].clone());
        let cpu = millicores(&nm["usage"]["cpu"]);
        let mem = bytes(&nm["usage"]["memory"]);
        let pct = |used: i64, total: Option<i64>| match total {
            Some(t) if t > 0 => format!("{}%", used * 100 / t),
            _ => "<unknown>".to_string(),
        };
        rows.push(vec![
            name.to_string(),
            cpu_cell(cpu),
            pct(cpu, alloc("cpu").map(|q| millicores(&q))),
            memory_cell(mem),
            pct(mem, alloc("memory").map(|q| bytes(&q))),
        ]);
    }
    rows
}

pub async fn pods(
    client: &Client,
    namespace: &str,
    name: Option<&str>,
    selector: Option<&str>,
    all_namespaces: bool,
    containers: bool,
) -> Result<i32> {
    let base = if all_namespaces {
        format!("{METRICS}/pods")
    } else {
        format!("{METRICS}/namespaces/{namespace}/pods")
    };
    let items = match name {
        Some(n) => match metrics_get(client, &format!("{base}/{n}")).await {
            Ok(v) => vec![v],
            Err(_) => bail!("Metrics not available for pod {namespace}/{n}"),
        },
        None => {
            let path = match selector {
                Some(s) => format!("{base}?labelSelector={}", urlencode(s)),
                None => base,
            };
            metrics_get(client, &path).await?["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        }
    };
    if items.is_empty() {
        if all_namespaces {
            println!("No resources found");
        } else {
            println!("No resources found in {namespace} namespace.");
        }
        return Ok(0);
    }
    print!(
        "{}",
        printer::columns(&pod_rows(&items, all_namespaces, containers))
    );
    Ok(0)
}

pub async fn nodes(client: &Client, name: Option<&str>, selector: Option<&str>) -> Result<i32> {
    let metrics = match name {
        Some(n) => match metrics_get(client, &format!("{METRICS}/nodes/{n}")).await {
            Ok(v) => vec![v],
            Err(_) => bail!("Metrics not available for node {n}"),
        },
        None => {
            let path = match selector {
                Some(s) => format!("{METRICS}/nodes?labelSelector={}", urlencode(s)),
                None => format!("{METRICS}/nodes"),
            };
            metrics_get(client, &path).await?["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        }
    };
    if metrics.is_empty() {
        bail!("metrics not available yet");
    }
    let nodes = client.get_json("/api/v1/nodes").await?["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    print!("{}", printer::columns(&node_rows(&metrics, &nodes)));
    Ok(0)
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_and_node_tables() {
        let pm = json!({"metadata": {"name": "web", "namespace": "default"},
            "containers": [{"name": "a", "usage": {"cpu": "1500000n", "memory": "3072Ki"}},
                           {"name": "b", "usage": {"cpu": "250m", "memory": "1Mi"}}]});
        let rows = pod_rows(std::slice::from_ref(&pm), false, false);
        assert_eq!(rows[0], ["NAME", "CPU(cores)", "MEMORY(bytes)"]);
        assert_eq!(rows[1], ["web", "252m", "4Mi"]);
        let rows = pod_rows(&[pm], true, true);
        assert_eq!(
            rows[0],
            ["NAMESPACE", "POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
        );
        assert_eq!(rows[1], ["default", "web", "a", "2m", "3Mi"]);
        let nm = json!({"metadata": {"name": "n1"}, "usage": {"cpu": "500m", "memory": "1Gi"}});
        let node = json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}});
        let rows = node_rows(&[nm], &[node]);
        assert_eq!(rows[1], ["n1", "500m", "25%", "1024Mi", "25%"]);
    }
}
