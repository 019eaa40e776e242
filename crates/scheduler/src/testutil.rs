//! Builders the scheduler's unit tests share: nodes of 2 CPUs and 4 GiB,
//! pods in `default`, and a snapshot over them.

use crate::filters::{Snapshot, Usage};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

pub fn node(name: &str, labels: serde_json::Value, extra: serde_json::Value) -> Node {
    let mut v = json!({"metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

pub fn pod(name: &str, labels: serde_json::Value, spec: serde_json::Value) -> Pod {
    let mut v = json!({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    json_patch::merge(&mut v, &json!({"spec": spec}));
    serde_json::from_value(v).unwrap()
}

/// The data behind a test snapshot (usage computed from the placed pods).
pub struct Owned {
    pub nodes: Vec<Arc<Node>>,
    pub placed: Vec<(Arc<Pod>, String)>,
    usage: HashMap<String, Usage>,
}

impl Owned {
    pub fn get(&self) -> Snapshot<'_> {
        Snapshot::new(&self.nodes, &self.usage, &self.placed)
    }
}

pub fn snap(nodes: &[Node], placed: &[(Pod, String)]) -> Owned {
    let nodes: Vec<Arc<Node>> = nodes.iter().cloned().map(Arc::new).collect();
    let placed: Vec<(Arc<Pod>, String)> = placed
        .iter()
        .map(|(p, n)| (Arc::new(p.clone()), n.clone()))
        .collect();
    let usage = Usage::of(&placed);
    Owned {
        nodes,
        placed,
        usage,
    }
}
