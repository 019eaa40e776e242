//! Local ephemeral storage: a pod that uses more of the node's disk than it
//! may is evicted, as the real kubelet's eviction manager does it
//! (`localStorageEviction`): an emptyDir over its `sizeLimit`, the pod over
//! the sum of its containers' `ephemeral-storage` limits, or one container
//! (its writable layer and log) over its own limit.
//!
//! ```text
//!  every 10 s, pods with such limits: runtime.disk_usage(container) + du(emptyDir)
//!     ──storage_violation (pure)──▶ Some(message) ──▶ containers killed (grace 0),
//!                                                     pod Failed, reason Evicted, Warning event
//! ```

use crate::runtime::ContainerInfo;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::quantity::Quantity;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

/// How often a pod's storage is measured (Docker sizes a writable layer by
/// walking it: not on every sync).
pub const EVERY: Duration = Duration::from_secs(10);

/// What a pod uses of the node's disk, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageUsage {
    /// Each container's writable layer and log, by container name.
    pub containers: BTreeMap<String, u64>,
    /// Each disk-backed emptyDir, by volume name.
    pub empty_dirs: BTreeMap<String, u64>,
}

fn bytes(q: &str) -> Option<u64> {
    Quantity::parse(q).ok().map(|q| q.units().max(0) as u64)
}

/// Whether the pod has anything to check: an ephemeral-storage limit or a
/// disk emptyDir with a `sizeLimit`.
pub fn has_storage_limits(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let limited = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .any(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.limits.as_ref())
                .is_some_and(|l| l.contains_key("ephemeral-storage"))
        });
    limited
        || spec.volumes.iter().flatten().any(|v| {
            v.empty_dir
                .as_ref()
                .is_some_and(|e| e.size_limit.is_some() && e.medium.as_deref() != Some("Memory"))
        })
}

/// The eviction message when the pod uses more than it may (Kubernetes'
/// words, trailing space included), checked in Kubernetes' order.
pub fn storage_violation(pod: &Pod, usage: &StorageUsage) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    for v in spec.volumes.iter().flatten() {
        let Some(e) = v
            .empty_dir
            .as_ref()
            .filter(|e| e.medium.as_deref() != Some("Memory"))
        else {
            continue;
        };
        let Some(limit) = e.size_limit.as_ref() else {
            continue;
        };
        let used = usage.empty_dirs.get(&v.name).copied().unwrap_or(0);
        if bytes(&limit.0).is_some_and(|l| used > l) {
            return Some(format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                v.name, limit.0
            ));
        }
    }
    let limit_of = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("ephemeral-storage"))
            .map(|q| q.0.clone())
    };
    let limits: Vec<(String, String)> = spec
        .containers
        .iter()
        .filter_map(|c| limit_of(c).map(|l| (c.name.clone(), l)))
        .collect();
    if !limits.is_empty() {
        let total: u64 = limits.iter().filter_map(|(_, l)| bytes(l)).sum();
        let used: u64 =
            usage.containers.values().sum::<u64>() + usage.empty_dirs.values().sum::<u64>();
        if used > total {
            let shown = if limits.len() == 1 {
                limits[0].1.clone()
            } else {
                total.to_string()
            };
            return Some(format!(
                "Pod ephemeral local storage usage exceeds the total limit of containers {shown}. "
            ));
        }
    }
    for (name, limit) in &limits {
        let used = usage.containers.get(name).copied().unwrap_or(0);
        if bytes(limit).is_some_and(|l| used > l) {
            return Some(format!(
                "Container {name} exceeded its local ephemeral storage limit {limit:?}. "
            ));
        }
    }
    None
}

/// Bytes a directory tree takes on disk (as `du` counts: allocated blocks).
pub fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// When each pod's storage was last measured, by uid.
#[derive(Default)]
pub struct Measured(std::sync::Mutex<HashMap<String, Instant>>);

impl Measured {
    /// Whether the pod is due a measurement (and notes that it has one now).
    pub fn due(&self, uid: &str) -> bool {
        let mut all = crate::lock(&self.0);
        match all.get(uid) {
            Some(t) if t.elapsed() < EVERY => false,
            _ => {
                all.insert(uid.to_string(), Instant::now());
                true
            }
        }
    }

    pub fn forget(&self, uid: &str) {
        crate::lock(&self.0).remove(uid);
    }
}

impl crate::Kubelet {
    /// Measures a running pod's storage when it is due, and says why it
    /// must be evicted, if it must.
    pub(crate) async fn storage_eviction(
        &self,
        pod: &Pod,
        observed: &[ContainerInfo],
    ) -> Option<String> {
        let uid = pod.metadata.uid.as_deref()?;
        if !has_storage_limits(pod) || !self.measured.due(uid) {
            return None;
        }
        let mut usage = StorageUsage::default();
        for c in observed
            .iter()
            .filter(|c| c.name != crate::runtime::SANDBOX)
        {
            if let Ok(Some(bytes)) = self.runtime.disk_usage(&c.id).await {
                *usage.containers.entry(c.name.clone()).or_default() += bytes;
            }
        }
        let volumes = self.pod_dir(pod).join("volumes");
        for v in pod.spec.as_ref()?.volumes.iter().flatten() {
            if v.empty_dir
                .as_ref()
                .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
            {
                usage
                    .empty_dirs
                    .insert(v.name.clone(), du(&volumes.join(&v.name)));
            }
        }
        tracing::debug!(pod = ?pod.metadata.name, ?usage, "local storage measured");
        storage_violation(pod, &usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}},
                        {"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
            "containers": [{"name": "a", "resources": {"limits": {"ephemeral-storage": "10Mi"}}},
                           {"name": "b"}]}}))
        .unwrap()
    }

    fn usage(a: u64, b: u64, scratch: u64) -> StorageUsage {
        StorageUsage {
            containers: BTreeMap::from([("a".into(), a), ("b".into(), b)]),
            empty_dirs: BTreeMap::from([("scratch".into(), scratch)]),
        }
    }

    #[test]
    fn each_limit_evicts_with_kubernetes_words() {
        let p = pod();
        assert!(has_storage_limits(&p));
        assert_eq!(storage_violation(&p, &usage(1 << 20, 0, 0)), None);
        assert_eq!(
            storage_violation(&p, &usage(0, 0, 2 << 20)).as_deref(),
            Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ")
        );
        assert_eq!(
            storage_violation(&p, &usage(6 << 20, 6 << 20, 0)).as_deref(),
            Some("Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ")
        );
        let mut two = p.clone();
        two.spec.as_mut().unwrap().containers[1].resources =
            serde_json::from_value(json!({"limits": {"ephemeral-storage": "20Mi"}})).unwrap();
        assert_eq!(
            storage_violation(&two, &usage(11 << 20, 0, 0)).as_deref(),
            Some("Container a exceeded its local ephemeral storage limit \"10Mi\". ")
        );
        let plain: Pod =
            serde_json::from_value(json!({"spec": {"containers": [{"name": "a"}]}})).unwrap();
        assert!(!has_storage_limits(&plain));
    }

    #[test]
    fn du_counts_allocated_blocks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), vec![1u8; 100_000]).unwrap();
        let used = du(dir.path());
        assert!(used >= 100_000, "{used}");
    }
}
