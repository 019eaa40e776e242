//! `/stats/summary`: CPU and memory of the node (sysinfo) and of every pod's
//! containers (Docker stats), in the kubelet Summary API's JSON shape, which
//! the apiserver's metrics endpoint reads as metrics-server does.

use crate::runtime::SANDBOX;
use crate::Kubelet;
use bollard::container::{MemoryStatsStats, Stats, StatsOptions};
use futures::StreamExt;
use minik8s_api::meta::now_rfc3339;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// CPU use in nanocores between the two samples of one Docker stats reading.
pub fn nano_cores(s: &Stats) -> u64 {
    let cpu = s
        .cpu_stats
        .cpu_usage
        .total_usage
        .saturating_sub(s.precpu_stats.cpu_usage.total_usage) as f64;
    let system = s
        .cpu_stats
        .system_cpu_usage
        .unwrap_or(0)
        .saturating_sub(s.precpu_stats.system_cpu_usage.unwrap_or(0)) as f64;
    let cpus = s.cpu_stats.online_cpus.unwrap_or(1).max(1) as f64;
    if system <= 0.0 {
        return 0;
    }
    (cpu / system * cpus * 1e9) as u64
}

/// Working set as the kubelet computes it: usage minus inactive file pages.
pub fn working_set(s: &Stats) -> u64 {
    let usage = s.memory_stats.usage.unwrap_or(0);
    let inactive = match &s.memory_stats.stats {
        Some(MemoryStatsStats::V1(v1)) => v1.total_inactive_file,
        Some(MemoryStatsStats::V2(v2)) => v2.inactive_file,
        None => 0,
    };
    usage.saturating_sub(inactive)
}

fn cpu_json(now: &str, nano: u64, total: u64) -> Value {
    json!({"time": now, "usageNanoCores": nano, "usageCoreNanoSeconds": total})
}

fn memory_json(now: &str, usage: u64, working: u64, rss: u64) -> Value {
    json!({"time": now, "usageBytes": usage, "workingSetBytes": working, "rssBytes": rss})
}

impl Kubelet {
    /// The Summary API document for this node.
    pub async fn summary(&self) -> anyhow::Result<Value> {
        let now = now_rfc3339();
        let (node_cpu, node_mem_used, node_mem_total) = {
            let mut sys = sysinfo::System::new();
            sys.refresh_cpu_usage();
            tokio::time::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL).await;
            sys.refresh_cpu_usage();
            sys.refresh_memory();
            let cores = sys.cpus().len() as f64;
            (
                (sys.global_cpu_usage() as f64 / 100.0 * cores * 1e9) as u64,
                sys.used_memory(),
                sys.total_memory(),
            )
        };
        let containers: Vec<_> = self
            .runtime
            .list(None)
            .await?
            .into_iter()
            .filter(|c| c.name != SANDBOX && c.state.is_running())
            .collect();
        // One Docker stats reading per container, all at once (each waits for two samples).
        let readings = futures::future::join_all(containers.iter().map(|c| {
            let docker = self.runtime.docker.clone();
            let id = c.id.clone();
            async move {
                docker
                    .stats(
                        &id,
                        Some(StatsOptions {
                            stream: false,
                            one_shot: false,
                        }),
                    )
                    .next()
                    .await
                    .and_then(Result::ok)
            }
        }))
        .await;
        let mut pods: BTreeMap<String, (Value, Vec<Value>, u64, u64)> = BTreeMap::new();
        for (c, reading) in containers.iter().zip(readings) {
            let Some(s) = reading else { continue };
            let (nano, ws) = (nano_cores(&s), working_set(&s));
            let usage = s.memory_stats.usage.unwrap_or(0);
            let rss = match &s.memory_stats.stats {
                Some(MemoryStatsStats::V1(v1)) => v1.total_rss,
                Some(MemoryStatsStats::V2(v2)) => v2.anon,
                None => 0,
            };
            let started = match &c.state {
                crate::runtime::State::Running { started_at } => started_at.clone(),
                _ => String::new(),
            };
            let entry = pods.entry(c.pod_uid.clone()).or_insert_with(|| {
                (
                    json!({"name": c.pod_name, "namespace": c.pod_namespace, "uid": c.pod_uid}),
                    Vec::new(),
                    0,
                    0,
                )
            });
            entry.1.push(json!({"name": c.name, "startTime": started, "cpu": cpu_json(&now, nano, s.cpu_stats.cpu_usage.total_usage), "memory": memory_json(&now, usage, ws, rss)}));
            entry.2 += nano;
            entry.3 += ws;
        }
        let pods: Vec<Value> = pods
            .into_values()
            .map(|(pod_ref, containers, nano, ws)| {
                json!({"podRef": pod_ref, "containers": containers, "cpu": {"time": now, "usageNanoCores": nano},
                       "memory": {"time": now, "workingSetBytes": ws}})
            })
            .collect();
        Ok(json!({
            "node": {"nodeName": self.config.node_name,
                     "cpu": {"time": now, "usageNanoCores": node_cpu},
                     "memory": {"time": now, "availableBytes": node_mem_total.saturating_sub(node_mem_used), "usageBytes": node_mem_used, "workingSetBytes": node_mem_used}},
            "pods": pods,
        }))
    }
}
