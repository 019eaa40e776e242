//! `/stats/summary`: CPU and memory of the node (sysinfo) and of every pod's
//! containers (the runtime's stats), in the kubelet Summary API's JSON shape, which
//! the apiserver's metrics endpoint reads as metrics-server does.

use crate::runtime::{ContainerInfo, ContainerStats, SANDBOX};
use crate::Kubelet;
use minik8s_api::meta::now_rfc3339;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn cpu_json(now: &str, nano: u64, total: u64) -> Value {
    json!({"time": now, "usageNanoCores": nano, "usageCoreNanoSeconds": total})
}

fn memory_json(now: &str, usage: u64, working: u64, rss: u64) -> Value {
    json!({"time": now, "usageBytes": usage, "workingSetBytes": working, "rssBytes": rss})
}

impl Kubelet {
    /// Every running container of the pods here (sandboxes left out) with
    /// one reading of its CPU and memory; containers that cannot be read
    /// (just stopped) are left out.
    pub async fn container_readings(&self) -> anyhow::Result<Vec<(ContainerInfo, ContainerStats)>> {
        let containers: Vec<_> = self
            .runtime
            .list(None)
            .await?
            .into_iter()
            .filter(|c| c.name != SANDBOX && c.state.is_running())
            .collect();
        // One stats reading per container, all at once (Docker's each wait for two samples).
        let readings = futures::future::join_all(
            containers
                .iter()
                .map(|c| async { self.runtime.stats(&c.id).await.ok().flatten() }),
        )
        .await;
        Ok(containers
            .into_iter()
            .zip(readings)
            .filter_map(|(c, s)| Some((c, s?)))
            .collect())
    }

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
        let mut pods: BTreeMap<String, (Value, Vec<Value>, u64, u64)> = BTreeMap::new();
        for (c, s) in self.container_readings().await? {
            let (nano, ws) = (s.usage_nano_cores, s.working_set_bytes);
            let (usage, rss) = (s.memory_usage_bytes, s.rss_bytes);
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
            entry.1.push(json!({"name": c.name, "startTime": started, "cpu": cpu_json(&now, nano, s.usage_core_nano_seconds), "memory": memory_json(&now, usage, ws, rss)}));
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
