//! The kubelet's Prometheus endpoints, by Kubernetes' names and labels so the
//! usual queries and dashboards work:
//!
//! ```text
//!   /metrics           kubelet_running_pods, kubelet_running_containers{container_state},
//!                      kubelet_node_name{node}
//!   /metrics/cadvisor  container_cpu_usage_seconds_total, container_memory_working_set_bytes,
//!                      container_memory_usage_bytes, container_memory_rss
//!                        {container,pod,namespace,image,name,id}
//!                      machine_cpu_cores, machine_memory_bytes
//! ```
//!
//! The real kubelet embeds cAdvisor, which reads the cgroups; here the
//! runtime's stats (Docker's) are read at scrape time, the readings
//! `/stats/summary` also uses. Both answer through the kubelet's TLS port,
//! authorized as `nodes/metrics` (auth.rs).

use crate::runtime::{ContainerInfo, ContainerStats, MachineInfo, State, SANDBOX};
use crate::Kubelet;
use std::fmt::Write;

/// One metric family's header.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value escaped as the text format wants it.
fn escaped(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `/metrics/cadvisor` for these container readings on `machine`.
pub fn cadvisor_text(
    readings: &[(ContainerInfo, ContainerStats)],
    machine: &MachineInfo,
) -> String {
    let mut out = String::new();
    let labels = |c: &ContainerInfo| {
        format!(
            "container=\"{}\",id=\"/docker/{}\",image=\"{}\",name=\"{}\",namespace=\"{}\",pod=\"{}\"",
            escaped(&c.name),
            escaped(&c.id),
            escaped(&c.image),
            escaped(&c.id),
            escaped(&c.pod_namespace),
            escaped(&c.pod_name)
        )
    };
    type Value = fn(&ContainerStats) -> f64;
    let families: [(&str, &str, &str, Value); 4] = [
        (
            "container_cpu_usage_seconds_total",
            "counter",
            "Cumulative cpu time consumed in seconds.",
            |s| s.usage_core_nano_seconds as f64 / 1e9,
        ),
        (
            "container_memory_working_set_bytes",
            "gauge",
            "Current working set in bytes.",
            |s| s.working_set_bytes as f64,
        ),
        (
            "container_memory_usage_bytes",
            "gauge",
            "Current memory usage in bytes, including all memory regardless of when it was accessed",
            |s| s.memory_usage_bytes as f64,
        ),
        (
            "container_memory_rss",
            "gauge",
            "Size of RSS in bytes.",
            |s| s.rss_bytes as f64,
        ),
    ];
    for (name, kind, help, value) in families {
        family(&mut out, name, kind, help);
        for (c, s) in readings {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(c), value(s));
        }
    }
    family(
        &mut out,
        "machine_cpu_cores",
        "gauge",
        "Number of logical CPU cores.",
    );
    let _ = writeln!(out, "machine_cpu_cores {}", machine.cpus);
    family(
        &mut out,
        "machine_memory_bytes",
        "gauge",
        "Amount of memory installed on the machine.",
    );
    let _ = writeln!(out, "machine_memory_bytes {}", machine.memory_bytes);
    out
}

/// `/metrics`: the pods and containers the runtime runs for this node.
pub fn kubelet_text(node: &str, containers: &[ContainerInfo]) -> String {
    let mut out = String::new();
    let pods: std::collections::BTreeSet<&str> = containers
        .iter()
        .filter(|c| c.name == SANDBOX && c.state.is_running())
        .map(|c| c.pod_uid.as_str())
        .collect();
    family(
        &mut out,
        "kubelet_node_name",
        "gauge",
        "The node's name. The count is always 1.",
    );
    let _ = writeln!(out, "kubelet_node_name{{node=\"{}\"}} 1", escaped(node));
    family(
        &mut out,
        "kubelet_running_pods",
        "gauge",
        "Number of pods that have a running pod sandbox",
    );
    let _ = writeln!(out, "kubelet_running_pods {}", pods.len());
    family(
        &mut out,
        "kubelet_running_containers",
        "gauge",
        "Number of containers currently running",
    );
    let mut by_state =
        std::collections::BTreeMap::from([("created", 0), ("exited", 0), ("running", 0)]);
    for c in containers.iter().filter(|c| c.name != SANDBOX) {
        let state = match c.state {
            State::Running { .. } => "running",
            State::Created => "created",
            _ => "exited",
        };
        *by_state.entry(state).or_default() += 1;
    }
    for (state, n) in by_state {
        let _ = writeln!(
            out,
            "kubelet_running_containers{{container_state=\"{state}\"}} {n}"
        );
    }
    out
}

impl Kubelet {
    /// What `/metrics/cadvisor` answers now.
    pub async fn cadvisor_metrics(&self) -> anyhow::Result<String> {
        let readings = self.container_readings().await?;
        Ok(cadvisor_text(&readings, &self.runtime.machine()))
    }

    /// What `/metrics` answers now.
    pub async fn kubelet_metrics(&self) -> anyhow::Result<String> {
        let containers = self.runtime.list(None).await?;
        Ok(kubelet_text(&self.config.node_name, &containers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, state: State) -> ContainerInfo {
        ContainerInfo {
            id: format!("{name}-id"),
            pod_uid: "uid-1".into(),
            pod_name: "hello".into(),
            pod_namespace: "default".into(),
            name: name.into(),
            hash: String::new(),
            restart_count: 0,
            image: "busybox:1.36".into(),
            image_id: String::new(),
            state,
            ip: None,
            runtime_handler: None,
        }
    }

    #[test]
    fn container_series_carry_kubernetes_labels() {
        let running = State::Running {
            started_at: String::new(),
        };
        let stats = ContainerStats {
            usage_core_nano_seconds: 2_500_000_000,
            working_set_bytes: 4096,
            ..Default::default()
        };
        let text = cadvisor_text(
            &[(container("app", running), stats)],
            &MachineInfo {
                cpus: 2,
                memory_bytes: 1 << 30,
            },
        );
        assert!(
            text.contains(r#"container_cpu_usage_seconds_total{container="app",id="/docker/app-id",image="busybox:1.36",name="app-id",namespace="default",pod="hello"} 2.5"#),
            "{text}"
        );
        assert!(
            text.contains("# TYPE container_memory_working_set_bytes gauge"),
            "{text}"
        );
        assert!(text.contains(r#"pod="hello"} 4096"#), "{text}");
        assert!(text.contains("machine_cpu_cores 2\n"), "{text}");
    }

    #[test]
    fn pods_count_by_their_running_sandbox() {
        let running = || State::Running {
            started_at: String::new(),
        };
        let text = kubelet_text(
            "node-a",
            &[
                container(SANDBOX, running()),
                container("app", running()),
                container("init", State::Created),
            ],
        );
        assert!(text.contains("kubelet_running_pods 1\n"), "{text}");
        assert!(
            text.contains("kubelet_running_containers{container_state=\"running\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_running_containers{container_state=\"created\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_node_name{node=\"node-a\"} 1"),
            "{text}"
        );
    }
}
