//! Pod-level resources (`spec.resources`): one cgroup for the whole pod,
//! limited to the pod's CPU and memory, with the sandbox and every container
//! created inside it, as the real kubelet's pod cgroups (`kubepods/pod<uid>`).
//!
//! ```text
//!  /sys/fs/cgroup/cpu/minik8s/pod<uid>/      cpu.cfs_quota_us = pod CPU limit, cpu.shares = pod CPU request
//!  /sys/fs/cgroup/memory/minik8s/pod<uid>/   memory.limit_in_bytes = pod memory limit
//!      ├── <sandbox id>/
//!      └── <container id>/ ...               each container's own limits, within the pod's
//! ```
//!
//! Docker creates each container's cgroup under the parent it is given
//! (`HostConfig.CgroupParent`, with the cgroupfs driver); the kubelet writes
//! the pod's limits before the sandbox starts and removes the cgroup once
//! the pod's containers are gone. cgroup v1 (this project's machines).

use crate::runtime::ResourceLimits;
use k8s_openapi::api::core::v1::PodSpec;
use minik8s_api::resources::amount;
use std::path::{Path, PathBuf};

/// The CFS period the CPU limit is a quota of (Docker's and Kubernetes' 100 ms).
const CFS_PERIOD_US: i64 = 100_000;

/// Where the cgroup v1 hierarchies are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The pod's cgroup, relative to each hierarchy's root (the containers'
/// `CgroupParent`).
pub fn parent(pod_uid: &str) -> String {
    format!("/minik8s/pod{pod_uid}")
}

/// The pod-level limits of a spec; None when it sets no pod-level CPU or memory.
pub fn pod_limits(spec: &PodSpec) -> Option<ResourceLimits> {
    let r = spec.resources.as_ref()?;
    let (requests, limits) = (r.requests.as_ref(), r.limits.as_ref());
    let out = ResourceLimits {
        nano_cpus: amount(limits, "cpu").map(|m| m * 1_000_000),
        memory_limit_bytes: amount(limits, "memory"),
        cpu_shares: amount(requests, "cpu")
            .or(amount(limits, "cpu"))
            .map(|m| (m * 1024 / 1000).max(2)),
    };
    (out != ResourceLimits::default()).then_some(out)
}

/// The files a pod cgroup's limits are written to: (hierarchy, file, value).
pub fn settings(limits: &ResourceLimits) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    if let Some(shares) = limits.cpu_shares {
        out.push(("cpu", "cpu.shares", shares.to_string()));
    }
    if let Some(nano) = limits.nano_cpus {
        out.push(("cpu", "cpu.cfs_period_us", CFS_PERIOD_US.to_string()));
        let quota = (nano * CFS_PERIOD_US / 1_000_000_000).max(1000);
        out.push(("cpu", "cpu.cfs_quota_us", quota.to_string()));
    }
    if let Some(bytes) = limits.memory_limit_bytes {
        out.push(("memory", "memory.limit_in_bytes", bytes.to_string()));
    }
    out
}

fn dir(root: &Path, hierarchy: &str, pod_uid: &str) -> PathBuf {
    root.join(hierarchy)
        .join(parent(pod_uid).trim_start_matches('/'))
}

/// Creates the pod's cgroup in the cpu and memory hierarchies and writes
/// its limits. Returns the parent the pod's containers are created under.
pub fn create(root: &Path, pod_uid: &str, limits: &ResourceLimits) -> std::io::Result<String> {
    for hierarchy in ["cpu", "memory"] {
        std::fs::create_dir_all(dir(root, hierarchy, pod_uid))?;
    }
    for (hierarchy, file, value) in settings(limits) {
        let path = dir(root, hierarchy, pod_uid).join(file);
        std::fs::write(&path, &value).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("writing {value} to {}: {e}", path.display()),
            )
        })?;
    }
    Ok(parent(pod_uid))
}

/// Removes the pod's cgroup (its containers' cgroups went with them); a
/// cgroup that is gone already is fine.
pub fn remove(root: &Path, pod_uid: &str) {
    for hierarchy in ["cpu", "memory"] {
        let d = dir(root, hierarchy, pod_uid);
        if let Err(e) = std::fs::remove_dir(&d) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(cgroup = %d.display(), error = %e, "removing a pod cgroup");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_level_resources_become_cgroup_settings() {
        let spec: PodSpec = serde_json::from_value(json!({"containers": [],
            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "64Mi"}}}))
        .unwrap();
        let limits = pod_limits(&spec).unwrap();
        assert_eq!(
            settings(&limits),
            [
                ("cpu", "cpu.shares", "102".to_string()),
                ("cpu", "cpu.cfs_period_us", "100000".to_string()),
                ("cpu", "cpu.cfs_quota_us", "20000".to_string()),
                ("memory", "memory.limit_in_bytes", (64 << 20).to_string()),
            ]
        );
        let none: PodSpec = serde_json::from_value(json!({"containers": []})).unwrap();
        assert_eq!(pod_limits(&none), None);
    }

    #[test]
    fn the_cgroup_is_written_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let limits = ResourceLimits {
            memory_limit_bytes: Some(1 << 20),
            ..Default::default()
        };
        assert_eq!(
            create(root.path(), "u1", &limits).unwrap(),
            "/minik8s/podu1"
        );
        let file = root
            .path()
            .join("memory/minik8s/podu1/memory.limit_in_bytes");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "1048576");
        std::fs::remove_file(file).unwrap();
        remove(root.path(), "u1");
        assert!(!root.path().join("memory/minik8s/podu1").exists());
        assert!(!root.path().join("cpu/minik8s/podu1").exists());
    }
}
