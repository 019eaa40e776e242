//! The Node object: registration, status (capacity, conditions, addresses) and
//! the heartbeat Lease in `kube-node-lease`, renewed every 10 s.

use crate::runtime::ContainerRuntime;
use crate::{Config, Kubelet};
use anyhow::bail;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use minik8s_client::rest::content;
use minik8s_client::Client;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often the lease and the node status are renewed.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// Records which kubelet registered a node, so another one cannot take it over.
pub const CONFIG_ANNOTATION: &str = "minik8s.io/kubelet-endpoint";
pub const KUBELET_VERSION: &str = minik8s_api::release::GIT_VERSION;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This node's status as the kubelet reports it.
pub fn node_status(config: &Config, runtime: &dyn ContainerRuntime, version: &str) -> Value {
    let machine = runtime.machine();
    let memory_ki = machine.memory_bytes / 1024;
    let mut resources = json!({"cpu": machine.cpus.to_string(), "memory": format!("{memory_ki}Ki"), "pods": config.max_pods.to_string()});
    // The disk the pods' writable layers, logs and emptyDirs live on.
    if let Some(bytes) = filesystem_size(&config.root_dir) {
        resources["ephemeral-storage"] = json!(format!("{}Ki", bytes / 1024));
    }
    let now = now_rfc3339();
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
        ],
        "addresses": [{"type": "InternalIP", "address": config.node_ip}, {"type": "Hostname", "address": config.node_name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
        "nodeInfo": {
            "machineID": read_trimmed("/etc/machine-id"),
            "systemUUID": read_trimmed("/sys/class/dmi/id/product_uuid"),
            "bootID": read_trimmed("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": sysinfo::System::kernel_version().unwrap_or_default(),
            "osImage": sysinfo::System::long_os_version().unwrap_or_default(),
            "containerRuntimeVersion": format!("{}://{version}", runtime.scheme()),
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        },
    })
}

/// The size of the filesystem holding `path` (or its nearest existing parent).
fn filesystem_size(path: &std::path::Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_blocks as u64 * st.f_frsize as u64)
}

fn endpoint(config: &Config) -> String {
    format!("{}:{}", config.node_ip, config.port)
}

/// Registers the Node, or takes it back if this kubelet registered it before.
/// Refuses a Node registered from another address. Returns the pod CIDR to use,
/// if the node has one yet (see [`wait_for_pod_cidr`]).
pub async fn register(
    client: &Client,
    config: &Config,
    runtime: &dyn ContainerRuntime,
    version: &str,
) -> anyhow::Result<Option<String>> {
    let nodes = client.dynamic(registry::of::<Node>(), None);
    let status = node_status(config, runtime, version);
    let mut labels = json!({"kubernetes.io/hostname": config.node_name, "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": status["nodeInfo"]["architecture"]});
    for (k, v) in &config.node_labels {
        labels[k] = json!(v);
    }
    let mut node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": config.node_name, "labels": labels,
                     "annotations": {CONFIG_ANNOTATION: endpoint(config)}},
        "spec": {},
        "status": status});
    if let Some(cidr) = &config.pod_cidr {
        node["spec"] = json!({"podCIDR": cidr, "podCIDRs": [cidr]});
    }
    let existing = match nodes.create(&node).await {
        Ok(_) => {
            tracing::info!(node = %config.node_name, "registered node");
            return Ok(config.pod_cidr.clone());
        }
        Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
            nodes.get(&config.node_name).await?
        }
        Err(e) => return Err(e.into()),
    };
    let theirs = existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            CONFIG_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .unwrap_or("");
    if theirs != endpoint(config) {
        bail!(
            "node {:?} is already registered by another kubelet (at {:?}, this one is at {:?}); refusing to take it over: pick another --node-name or delete the node",
            config.node_name,
            theirs,
            endpoint(config)
        );
    }
    nodes
        .patch(
            &config.node_name,
            Some("status"),
            content::MERGE_PATCH,
            &json!({"status": status}),
        )
        .await?;
    tracing::info!(node = %config.node_name, "node already registered by this kubelet: reusing it");
    Ok(existing
        .pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .or_else(|| config.pod_cidr.clone()))
}

/// Waits until node IPAM (in the controller manager) gives the node a podCIDR.
pub async fn wait_for_pod_cidr(client: &Client, node: &str) -> anyhow::Result<String> {
    let nodes = client.dynamic(registry::of::<Node>(), None);
    tracing::info!(
        node,
        "waiting for a pod CIDR from the controller manager's node IPAM (or pass --pod-cidr)"
    );
    loop {
        if let Some(cidr) = nodes
            .get(node)
            .await?
            .pointer("/spec/podCIDR")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            tracing::info!(node, cidr, "pod CIDR assigned");
            return Ok(cidr.to_string());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Renews (or creates) the node's Lease in `kube-node-lease`: the heartbeat the
/// node lifecycle controller watches. As the real kubelet's lease controller:
/// an update (PUT) of the Lease it last wrote (`latest`) with a new
/// renewTime, so a renewal is one write with nothing to read or merge first;
/// the Lease is read (or created) only when there is none yet, or when the
/// update finds it changed (409) or gone (404).
pub async fn renew_lease(
    client: &Client,
    node: &str,
    latest: &mut Option<Value>,
) -> anyhow::Result<()> {
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-node-lease"));
    let renew = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let spec = |renew: String| json!({"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew});
    for _ in 0..3 {
        let mut lease = match latest.take() {
            Some(lease) => lease,
            None => match leases.get(node).await {
                Ok(lease) => lease,
                Err(e) if e.is_not_found() => {
                    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": node, "namespace": "kube-node-lease"}, "spec": spec(renew())});
                    *latest = Some(leases.create(&lease).await?);
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            },
        };
        // Only the holder's fields: the rest of the Lease stays as it was.
        for (field, value) in spec(renew()).as_object().into_iter().flatten() {
            lease["spec"][field] = value.clone();
        }
        match leases.replace(node, &lease).await {
            Ok(written) => {
                *latest = Some(written);
                return Ok(());
            }
            // Read again next time round: someone else wrote it, or deleted it.
            Err(e) if e.is_conflict() || e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("the Lease of {node} changed under each of 3 renewals")
}

/// How often the node's status is posted when nothing in it changed (the real
/// kubelet's nodeStatusReportFrequency): the Lease is the heartbeat, so an
/// unchanged status is not rewritten every 10 s (each write would wake every
/// Node watcher: the scheduler, the controllers, kube-proxy).
pub const STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);

/// Renews the node Lease every `--node-status-update-frequency` (default
/// [`HEARTBEAT`]) and posts the node status when it changed, or every
/// [`STATUS_REPORT_FREQUENCY`].
pub async fn heartbeat(kubelet: Arc<Kubelet>) -> anyhow::Result<()> {
    let version = kubelet.runtime.version().await.unwrap_or_default();
    let mut last_post = None;
    let mut lease = None;
    loop {
        if let Err(e) = beat(&kubelet, &version, &mut lease, &mut last_post).await {
            tracing::warn!(error = %e, "node heartbeat failed");
        }
        tokio::time::sleep(kubelet.config.node_status_update_frequency).await;
    }
}

/// Whether `current` (the Node's status now) already says all of `ours`,
/// whatever the conditions' times (they change on every report).
fn reports_same(current: &Value, ours: &Value) -> bool {
    ours.as_object().is_some_and(|o| {
        o.iter().all(|(k, v)| match current.get(k) {
            Some(w) if k == "conditions" => {
                crate::status::same_conditions(v, w, &["lastHeartbeatTime", "lastTransitionTime"])
            }
            Some(w) => v == w,
            None => false,
        })
    })
}

/// One heartbeat: the lease renewal (`lease`: the Lease last written), and
/// the node status unless the Node already says it and it was posted less
/// than [`STATUS_REPORT_FREQUENCY`] ago (`last_post`). The Node is read each
/// time, so a status someone else changed (the node lifecycle controller's
/// Unknown) is put right at once.
pub async fn beat(
    kubelet: &Kubelet,
    version: &str,
    lease: &mut Option<Value>,
    last_post: &mut Option<std::time::Instant>,
) -> anyhow::Result<()> {
    let cfg = &kubelet.config;
    renew_lease(&kubelet.client, &cfg.node_name, lease).await?;
    let nodes = kubelet.client.dynamic(registry::of::<Node>(), None);
    let mut status = node_status(cfg, kubelet.runtime.as_ref(), version);
    let recent = last_post.is_some_and(|t| t.elapsed() < STATUS_REPORT_FREQUENCY);
    // Keep the Ready condition's transition time while it stays True.
    if let Ok(node) = nodes.get(&cfg.node_name).await {
        let current = node.get("status").cloned().unwrap_or(Value::Null);
        if recent && reports_same(&current, &status) {
            return Ok(());
        }
        let prev = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .cloned();
        if let Some(p) = prev.filter(|p| p["status"] == "True") {
            status["conditions"][0]["lastTransitionTime"] = p["lastTransitionTime"].clone();
        }
    }
    nodes
        .patch(
            &cfg.node_name,
            Some("status"),
            content::MERGE_PATCH,
            &json!({"status": status}),
        )
        .await?;
    *last_post = Some(std::time::Instant::now());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_status_is_the_same_report_whatever_its_times() {
        let ours = json!({"capacity": {"cpu": "4"}, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-11-27T10:00:10Z", "lastTransitionTime": "2026-11-27T10:00:10Z"}]});
        let current = json!({"capacity": {"cpu": "4"}, "images": [], "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-11-27T10:00:00Z", "lastTransitionTime": "2026-11-27T09:00:00Z"}]});
        assert!(reports_same(&current, &ours));
        // The node lifecycle controller marked it Unknown: the kubelet must post.
        let mut unknown = current.clone();
        unknown["conditions"][0]["status"] = json!("Unknown");
        assert!(!reports_same(&unknown, &ours));
        let mut resized = current;
        resized["capacity"]["cpu"] = json!("2");
        assert!(!reports_same(&resized, &ours));
    }
}
