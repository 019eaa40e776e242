//! Volume binding (Kubernetes' VolumeBinding plugin), as pure functions: a
//! pod's claims decide which nodes can take it, and what to write before the
//! pod is bound.
//!
//! ```text
//!  pod's claims ─▶ claims_of(): missing / deleting / unbound Immediate ─▶ unschedulable (pod-wide)
//!                      │ bound: the volume's node affinity filters nodes
//!                      │ unbound WaitForFirstConsumer:
//!                      ▼
//!   node_fit(node): a free static volume that fits and may live on the node (chosen: pre-bind it)
//!                   or a class that provisions (chosen: annotate the claim with the node)
//!                   else "node(s) didn't find available persistent volumes to bind"
//! ```

use crate::framework::Unfit;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use minik8s_api::node_selection::term_matches;
use minik8s_api::storage::{capacity, fits, pod_claims};
use std::collections::HashSet;
use std::sync::Arc;

/// A pod's claims as far as scheduling goes.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// Volumes of bound claims: their node affinity must match.
    pub bound: Vec<Arc<PersistentVolume>>,
    /// Unbound claims of WaitForFirstConsumer classes, with whether their
    /// class provisions volumes.
    pub delayed: Vec<(Arc<PersistentVolumeClaim>, bool)>,
    /// Free volumes a delayed claim might take.
    pub candidates: Vec<Arc<PersistentVolume>>,
}

/// What to write for one node before binding the pod there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// (claim namespace/name, volume) pairs to pre-bind.
    pub bind: Vec<(String, String)>,
    /// Claims (namespace/name) to annotate with the node for their provisioner.
    pub provision: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.bind.is_empty() && self.provision.is_empty()
    }
}

/// Does the volume's required node affinity allow the node?
pub fn volume_allows(pv: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    required
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, node))
}

/// The pod's claims, looked up: Err(message) when the pod cannot be placed
/// anywhere yet (Kubernetes' PreFilter failures).
pub fn claims_of(
    pod: &Pod,
    claim: impl Fn(&str) -> Option<Arc<PersistentVolumeClaim>>,
    volume: impl Fn(&str) -> Option<Arc<PersistentVolume>>,
    class: impl Fn(&str) -> Option<Arc<StorageClass>>,
    all_volumes: impl Fn() -> Vec<Arc<PersistentVolume>>,
) -> Result<Option<PodVolumes>, String> {
    let names = pod_claims(pod);
    if names.is_empty() {
        return Ok(None);
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = PodVolumes::default();
    for name in names {
        let Some(c) = claim(&format!("{ns}/{name}")) else {
            return Err(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if c.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        match c
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty())
        {
            Some(v) => match volume(v) {
                Some(pv) => out.bound.push(pv),
                None => {
                    return Err(format!(
                        "pvc {ns}/{name} is bound to a volume that does not exist: {v}"
                    ))
                }
            },
            None => {
                let sc = class(minik8s_api::storage::claim_class(&c));
                let delayed = sc.as_ref().is_some_and(|sc| {
                    sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
                });
                if !delayed {
                    return Err("pod has unbound immediate PersistentVolumeClaims".into());
                }
                let provisions =
                    sc.is_some_and(|sc| sc.provisioner != "kubernetes.io/no-provisioner");
                out.delayed.push((c, provisions));
            }
        }
    }
    if !out.delayed.is_empty() {
        out.candidates = all_volumes()
            .into_iter()
            .filter(|v| v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none()))
            .collect();
    }
    Ok(Some(out))
}

/// Can the node take the pod's volumes, and what must be written if it is chosen?
pub fn node_fit(v: &PodVolumes, node: &Node) -> Result<Plan, Unfit> {
    if !v.bound.iter().all(|pv| volume_allows(pv, node)) {
        return Err(Unfit::VolumeNodeAffinity);
    }
    let mut plan = Plan::default();
    let mut taken: HashSet<&str> = HashSet::new();
    for (claim, provisions) in &v.delayed {
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or("default"),
            claim.metadata.name.as_deref().unwrap_or("")
        );
        let best = v
            .candidates
            .iter()
            .filter(|pv| !taken.contains(pv.metadata.name.as_deref().unwrap_or("")))
            .filter(|pv| fits(claim, pv) && volume_allows(pv, node))
            .min_by(|a, b| capacity(a).total_cmp(&capacity(b)));
        match best {
            Some(pv) => {
                let name = pv.metadata.name.as_deref().unwrap_or("");
                taken.insert(name);
                plan.bind.push((key, name.to_string()));
            }
            None if *provisions => plan.provision.push(key),
            None => return Err(Unfit::VolumeBinding),
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
        )
        .unwrap()
    }

    fn local_volume(name: &str, on: &str) -> Arc<PersistentVolume> {
        Arc::new(serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "local": {"path": "/mnt/disk"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}]}]}}}})).unwrap())
    }

    fn claim(bound_to: Option<&str>) -> Arc<PersistentVolumeClaim> {
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": bound_to,
                     "resources": {"requests": {"storage": "1Gi"}}}})).unwrap())
    }

    fn class(mode: &str, provisioner: &str) -> Arc<StorageClass> {
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "local"}, "provisioner": provisioner, "volumeBindingMode": mode})).unwrap())
    }

    fn pod() -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}),
        )
        .unwrap()
    }

    #[test]
    fn a_bound_local_volume_pins_the_pod_to_its_node() {
        let v = claims_of(
            &pod(),
            |_| Some(claim(Some("disk-b"))),
            |_| Some(local_volume("disk-b", "node-b")),
            |_| None,
            Vec::new,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            node_fit(&v, &node("node-a")),
            Err(Unfit::VolumeNodeAffinity)
        );
        assert_eq!(node_fit(&v, &node("node-b")), Ok(Plan::default()));
    }

    #[test]
    fn a_delayed_claim_takes_a_volume_on_the_chosen_node_or_is_provisioned_there() {
        let static_class = class("WaitForFirstConsumer", "kubernetes.io/no-provisioner");
        let v = claims_of(
            &pod(),
            |_| Some(claim(None)),
            |_| None,
            |_| Some(static_class.clone()),
            || vec![local_volume("disk-b", "node-b")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(node_fit(&v, &node("node-a")), Err(Unfit::VolumeBinding));
        let plan = node_fit(&v, &node("node-b")).unwrap();
        assert_eq!(
            plan.bind,
            vec![("default/data".to_string(), "disk-b".to_string())]
        );
        let dynamic = class("WaitForFirstConsumer", "minik8s.io/local-path");
        let v = claims_of(
            &pod(),
            |_| Some(claim(None)),
            |_| None,
            |_| Some(dynamic.clone()),
            Vec::new,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            node_fit(&v, &node("node-a")).unwrap().provision,
            vec!["default/data".to_string()]
        );
    }

    #[test]
    fn missing_and_immediate_unbound_claims_hold_the_pod_back() {
        assert_eq!(
            claims_of(&pod(), |_| None, |_| None, |_| None, Vec::new).unwrap_err(),
            "persistentvolumeclaim \"data\" not found"
        );
        let immediate = class("Immediate", "minik8s.io/local-path");
        assert_eq!(
            claims_of(
                &pod(),
                |_| Some(claim(None)),
                |_| None,
                |_| Some(immediate.clone()),
                Vec::new
            )
            .unwrap_err(),
            "pod has unbound immediate PersistentVolumeClaims"
        );
    }
}
