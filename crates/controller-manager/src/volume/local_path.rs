//! The built-in dynamic provisioner `minik8s.io/local-path`, as k3s's
//! local-path provisioner: a claim's volume is a directory on one node
//! (`<root>/<volume>_<namespace>_<claim>`), served as a hostPath volume
//! pinned to that node by node affinity. The kubelet creates the directory
//! when a pod first mounts it; on reclaim (`Delete`) a helper pod on that node
//! removes it. Sizes are recorded, not enforced (a directory has no quota).

use super::*;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::StorageClass;
use minik8s_api::registry;
use minik8s_client::{Cache, Client};
use serde_json::{json, Value};

/// The provisioner's name in a StorageClass.
pub const PROVISIONER: &str = "minik8s.io/local-path";
/// The default StorageClass made at start.
pub const CLASS_NAME: &str = "local-path";
/// Where volumes go on a node unless the class says (`parameters.nodePath`).
pub const DEFAULT_ROOT: &str = "/var/lib/minik8s/storage";
/// The namespace of the helper pods.
pub const HELPER_NAMESPACE: &str = "kube-system";
/// The label naming a helper pod's volume.
pub const HELPER_VOLUME_LABEL: &str = "minik8s.io/local-path-volume";

/// Why a claim cannot have a local-path volume (None: it can).
pub fn refuses(claim: &PersistentVolumeClaim) -> Option<String> {
    let spec = claim.spec.as_ref()?;
    if spec.volume_mode.as_deref() == Some("Block") {
        return Some("local-path volumes support only volumeMode Filesystem".into());
    }
    let modes = spec.access_modes.as_deref().unwrap_or_default();
    if modes
        .iter()
        .any(|m| m == "ReadWriteMany" || m == "ReadOnlyMany")
    {
        return Some(
            "local-path volumes support only the ReadWriteOnce and ReadWriteOncePod access modes (use an NFS class for ReadWriteMany)"
                .into(),
        );
    }
    None
}

/// The volume made for `claim` of `class` on `node` under `root`: a
/// hostPath directory pinned to the node, pre-bound to the claim.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &str,
    root: &str,
) -> Value {
    let mut pv = provisioned_volume(claim, class, PROVISIONER);
    let name = pv["metadata"]["name"].as_str().unwrap_or("").to_string();
    let root = class
        .parameters
        .as_ref()
        .and_then(|p| p.get("nodePath"))
        .map(String::as_str)
        .unwrap_or(root)
        .trim_end_matches('/');
    let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let claim_name = claim.metadata.name.as_deref().unwrap_or("");
    pv["metadata"]["annotations"]["local.path.provisioner/selected-node"] = json!(node);
    pv["spec"]["hostPath"] =
        json!({"path": format!("{root}/{name}_{ns}_{claim_name}"), "type": "DirectoryOrCreate"});
    pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}});
    pv
}

/// The pod that removes a released volume's directory on its node.
pub fn cleanup_pod(pv: &PersistentVolume) -> Option<Value> {
    let name = pv.metadata.name.as_deref()?;
    let path = pv.spec.as_ref()?.host_path.as_ref()?.path.clone();
    let node = pinned_node(pv)?;
    let (parent, dir) = path.rsplit_once('/')?;
    if dir.is_empty() || dir == "." || dir == ".." {
        return None;
    }
    let parent = if parent.is_empty() { "/" } else { parent };
    Some(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": helper_pod_name(name), "namespace": HELPER_NAMESPACE,
                     "labels": {HELPER_VOLUME_LABEL: name}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "helper-pod", "image": "minik8s/busybox:latest", "imagePullPolicy": "IfNotPresent",
                            "command": ["rm", "-rf", format!("/data/{dir}")],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "hostPath": {"path": parent, "type": "DirectoryOrCreate"}}],
        }
    }))
}

pub fn helper_pod_name(volume: &str) -> String {
    format!("helper-pod-delete-{volume}")
}

/// The default StorageClass (made at start when missing, as k3s ships it).
pub fn default_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": CLASS_NAME, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
           "provisioner": PROVISIONER, "reclaimPolicy": "Delete",
           "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true})
}

/// The node for a claim with Immediate binding: a Ready node, spread by the claim's uid.
pub fn pick_node(claim: &PersistentVolumeClaim, nodes: &[Arc<Node>]) -> Option<String> {
    let mut ready: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    ready.sort();
    if ready.is_empty() {
        return None;
    }
    let seed = claim
        .metadata
        .uid
        .as_deref()
        .unwrap_or("")
        .bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    Some(ready[seed % ready.len()].to_string())
}

use std::sync::Arc;

/// The provisioner's I/O: creates volumes through the API.
pub struct LocalPath {
    pub client: Client,
    pub nodes: Cache<Node>,
    pub root: String,
}

impl LocalPath {
    /// Makes the claim's volume; Ok(volume name) or Err(why, for the event).
    pub async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<String>,
    ) -> Result<String, String> {
        let node = match node {
            Some(n) => n,
            None => pick_node(claim, &self.nodes.list())
                .ok_or_else(|| "no Ready node to place a local-path volume on".to_string())?,
        };
        let pv = volume_for(claim, class, &node, &self.root);
        tracing::info!(%node, claim = ?claim.metadata.name, "provisioning a local-path volume");
        self.create(pv, class).await
    }

    /// Creates a provisioned volume (any provisioner's); Ok(its name).
    pub async fn create(&self, pv: Value, class: &StorageClass) -> Result<String, String> {
        let name = pv["metadata"]["name"].as_str().unwrap_or("").to_string();
        let api = self
            .client
            .dynamic(registry::of::<PersistentVolume>(), None);
        match api.create(&pv).await {
            Ok(_) => Ok(name),
            Err(e) if e.is_conflict() => Ok(name),
            Err(e) => Err(format!(
                "failed to provision volume with StorageClass \"{}\": {e}",
                class.metadata.name.as_deref().unwrap_or("")
            )),
        }
    }
}

/// Creates the default StorageClass unless one of its name exists, retrying
/// for a minute while the apiserver cannot be reached (the controllers work
/// without it).
pub async fn ensure_default_class(client: &Client) {
    let api = client.dynamic(registry::of::<StorageClass>(), None);
    for attempt in 1..=30 {
        match api.create(&default_class()).await {
            Ok(_) => {
                tracing::info!(class = CLASS_NAME, "default StorageClass created");
                return;
            }
            Err(e) if e.is_conflict() => return,
            Err(e) if attempt == 30 || e.api().is_some() => {
                tracing::warn!(error = %e, "could not create the default StorageClass");
                return;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}
