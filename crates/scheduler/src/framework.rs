//! What every filter and score plugin shares, as Kubernetes' scheduler
//! framework defines it for its plugins: why a node is unfit for a pod (the
//! reasons and the `FailedScheduling` message), a node's name, readiness and
//! allocatable resources, the resources its pods use, and the top of every
//! score's range.

use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::quantity::Quantity;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use minik8s_api::resources::{pod_requests, PodRequests};

/// The top of every plugin's normalized range (Kubernetes' `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// Why a node cannot take a pod (the text is Kubernetes' `FailedScheduling` wording).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unfit {
    NodeName,
    NotReady,
    Unschedulable,
    Selector,
    Taint(String),
    Insufficient(&'static str),
    PodAffinity,
    PodAntiAffinity,
    ExistingAntiAffinity,
    VolumeNodeAffinity,
    VolumeBinding,
    /// The pod's resource claims cannot be allocated (or used) on the node.
    Claims(&'static str),
    /// A `DoNotSchedule` topology spread constraint would be broken.
    Spread,
    /// The node lacks a spread constraint's `topologyKey`.
    SpreadLabel,
}

impl Unfit {
    pub fn message(&self) -> String {
        match self {
            Unfit::NodeName => "node(s) didn't match the requested node name".into(),
            Unfit::NotReady => {
                "node(s) had untolerated taint {node.kubernetes.io/not-ready: }".into()
            }
            Unfit::Unschedulable => "node(s) were unschedulable".into(),
            Unfit::Selector => "node(s) didn't match Pod's node affinity/selector".into(),
            Unfit::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
            Unfit::Insufficient(r) => format!("Insufficient {r}"),
            Unfit::PodAffinity => "node(s) didn't match pod affinity rules".into(),
            Unfit::PodAntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
            Unfit::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules".into()
            }
            Unfit::VolumeNodeAffinity => "node(s) had volume node affinity conflict".into(),
            Unfit::VolumeBinding => {
                "node(s) didn't find available persistent volumes to bind".into()
            }
            Unfit::Claims(why) => (*why).into(),
            Unfit::Spread => "node(s) didn't match pod topology spread constraints".into(),
            Unfit::SpreadLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into()
            }
        }
    }
}

/// `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.`
pub fn unschedulable_message(total: usize, reasons: &[Unfit]) -> String {
    nodes_message(total, reasons.iter().map(Unfit::message))
}

/// Kubernetes' `FitError` text: each reason with how many nodes gave it, the
/// `<count> <reason>` strings sorted.
pub fn nodes_message(total: usize, reasons: impl Iterator<Item = String>) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(m, n)| format!("{n} {m}"))
        .collect();
    parts.sort();
    if parts.is_empty() {
        format!("0/{total} nodes are available.")
    } else {
        format!("0/{total} nodes are available: {}.", parts.join(", "))
    }
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

pub(crate) fn labels(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> &BTreeMap<String, String> {
    meta.labels.as_ref().unwrap_or(&NO_LABELS)
}

pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

/// The node's Ready condition is True.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn allocatable(node: &Node, r: &str) -> Option<i64> {
    let q = node.status.as_ref()?.allocatable.as_ref()?.get(r)?;
    let q = Quantity::parse(&q.0).ok()?;
    Some(if r == "cpu" { q.millis() } else { q.units() })
}

/// What a node offers (None: no limit reported), parsed once per node version.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu: Option<i64>,
    pub memory: Option<i64>,
    pub ephemeral_storage: Option<i64>,
    pub pods: Option<i64>,
}

impl Allocatable {
    pub fn of(node: &Node) -> Allocatable {
        Allocatable {
            cpu: allocatable(node, "cpu"),
            memory: allocatable(node, "memory"),
            ephemeral_storage: allocatable(node, "ephemeral-storage"),
            pods: allocatable(node, "pods"),
        }
    }
}

/// Pods that still hold node resources (not Succeeded or Failed).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Resources a node's pods have requested.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    /// CPU and memory as the scores count them (a container without a
    /// request counts as 100m and 200 MiB).
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
}

impl Usage {
    pub fn add(&mut self, r: PodRequests, sign: i64) {
        self.cpu += sign * r.cpu;
        self.memory += sign * r.memory;
        self.ephemeral_storage += sign * r.ephemeral_storage;
        self.nonzero_cpu += sign * r.nonzero_cpu;
        self.nonzero_memory += sign * r.nonzero_memory;
        self.pods += sign;
    }

    /// Usage per node of a list of placed pods (the scheduler keeps it incrementally).
    pub fn of(placed: &[(Arc<Pod>, String)]) -> HashMap<String, Usage> {
        let mut m: HashMap<String, Usage> = HashMap::new();
        for (p, n) in placed {
            m.entry(n.clone()).or_default().add(pod_requests(p), 1);
        }
        m
    }
}
