//! The scheduler's decisions as pure functions: which nodes can take a pod
//! (filters, each with the reason Kubernetes reports), and which feasible
//! node is next in round-robin order. No I/O here, so every rule is
//! unit-tested without servers.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm, Taint,
};
use minik8s_api::quantity::Quantity;
use minik8s_api::selector::Selector;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

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
        }
    }
}

/// `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.`
pub fn unschedulable_message(total: usize, reasons: &[Unfit]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r.message()).or_default() += 1;
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

fn labels(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> &BTreeMap<String, String> {
    meta.labels.as_ref().unwrap_or(&NO_LABELS)
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

/// The node's Ready condition is True.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Requested resources of a pod: (cpu millicores, memory bytes), as Kubernetes sums them
/// (containers added, init containers as a maximum).
pub fn pod_requests(pod: &Pod) -> (i64, i64) {
    let Some(spec) = &pod.spec else { return (0, 0) };
    let req = |c: &k8s_openapi::api::core::v1::Container, r: &str| -> i64 {
        c.resources
            .as_ref()
            .and_then(|res| res.requests.as_ref())
            .and_then(|m| m.get(r))
            .and_then(|q| Quantity::parse(&q.0).ok())
            .map(|q| if r == "cpu" { q.millis() } else { q.units() })
            .unwrap_or(0)
    };
    let sum = |r: &str| spec.containers.iter().map(|c| req(c, r)).sum::<i64>();
    let init = |r: &str| {
        spec.init_containers
            .iter()
            .flatten()
            .map(|c| req(c, r))
            .max()
            .unwrap_or(0)
    };
    (
        sum("cpu").max(init("cpu")),
        sum("memory").max(init("memory")),
    )
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
    pub pods: Option<i64>,
}

impl Allocatable {
    pub fn of(node: &Node) -> Allocatable {
        Allocatable {
            cpu: allocatable(node, "cpu"),
            memory: allocatable(node, "memory"),
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

fn requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.clone().unwrap_or_default();
    let v = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                v.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = labels(&node.metadata);
    let exprs_ok = term
        .match_expressions
        .iter()
        .flatten()
        .all(|r| requirement_matches(r, labels));
    let fields = BTreeMap::from([("metadata.name".to_string(), node_name(node).to_string())]);
    let fields_ok = term
        .match_fields
        .iter()
        .flatten()
        .all(|r| requirement_matches(r, &fields));
    // An empty term matches nothing (Kubernetes' rule).
    let empty = term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty);
    !empty && exprs_ok && fields_ok
}

/// `nodeSelector` and required node affinity.
pub fn matches_node_selector(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else { return true };
    let node_labels = labels(&node.metadata);
    if let Some(sel) = &spec.node_selector {
        if !sel.iter().all(|(k, v)| node_labels.get(k) == Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, node)),
        None => true,
    }
}

use minik8s_api::taints::tolerates;

/// The first NoSchedule/NoExecute taint the pod does not tolerate.
pub fn untolerated_taint(pod: &Pod, node: &Node) -> Option<Taint> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerates(tolerations, t))
        .cloned()
}

/// Resources a node's pods have requested.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu: i64,
    pub memory: i64,
    pub pods: i64,
}

impl Usage {
    pub fn add(&mut self, (cpu, memory): (i64, i64), sign: i64) {
        self.cpu += sign * cpu;
        self.memory += sign * memory;
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

/// Everything the filters need to know about the cluster.
pub struct Snapshot<'a> {
    pub nodes: &'a [Arc<Node>],
    /// Requested resources per node.
    pub usage: &'a HashMap<String, Usage>,
    /// Active pods on nodes, for pod (anti-)affinity. The scheduler passes all of them
    /// only when the pod has affinity terms, else just the pods with anti-affinity terms.
    pub placed: &'a [(Arc<Pod>, String)],
    /// Parsed allocatable resources per node, when the caller keeps them (else parsed on use).
    pub allocatable: Option<&'a HashMap<String, Allocatable>>,
    /// Nodes by name, built on first use (only pod affinity needs it).
    by_name: std::cell::OnceCell<HashMap<&'a str, &'a Node>>,
    /// The last pod's requests, so checking it against every node parses them once.
    requests: std::cell::Cell<Option<(*const Pod, (i64, i64))>>,
}

impl<'a> Snapshot<'a> {
    pub fn new(
        nodes: &'a [Arc<Node>],
        usage: &'a HashMap<String, Usage>,
        placed: &'a [(Arc<Pod>, String)],
    ) -> Self {
        Snapshot {
            nodes,
            usage,
            placed,
            allocatable: None,
            by_name: std::cell::OnceCell::new(),
            requests: std::cell::Cell::new(None),
        }
    }

    pub fn with_allocatable(mut self, allocatable: &'a HashMap<String, Allocatable>) -> Self {
        self.allocatable = Some(allocatable);
        self
    }

    fn requests_of(&self, pod: &Pod) -> (i64, i64) {
        if let Some((p, r)) = self.requests.get() {
            if std::ptr::eq(p, pod) {
                return r;
            }
        }
        let r = pod_requests(pod);
        self.requests.set(Some((pod as *const Pod, r)));
        r
    }

    fn node(&self, name: &str) -> Option<&'a Node> {
        let nodes = self.nodes;
        self.by_name
            .get_or_init(|| nodes.iter().map(|n| (node_name(n), &**n)).collect())
            .get(name)
            .copied()
    }

    /// The topology value of `node_name` for `key` (None if the node lacks the label).
    fn topology(&self, node_name: &str, key: &str) -> Option<String> {
        self.node(node_name)
            .and_then(|n| n.metadata.labels.as_ref())
            .and_then(|l| l.get(key).cloned())
    }
}

/// Does the pod have required pod affinity or anti-affinity terms?
pub fn has_pod_affinity(pod: &Pod) -> bool {
    !required_terms(pod, false).is_empty() || !required_terms(pod, true).is_empty()
}

/// Does the pod have required anti-affinity terms (which constrain pods placed after it)?
pub fn has_anti_affinity(pod: &Pod) -> bool {
    !required_terms(pod, true).is_empty()
}

fn term_selects(term: &PodAffinityTerm, owner: &Pod, candidate: &Pod) -> bool {
    let owner_ns = owner
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let namespaces = term
        .namespaces
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| vec![owner_ns]);
    let cand_ns = candidate
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    if term.namespace_selector.is_none() && !namespaces.contains(&cand_ns) {
        return false;
    }
    let Some(ls) = &term.label_selector else {
        return false;
    };
    Selector::from_label_selector(ls).is_ok_and(|s| s.matches(labels(&candidate.metadata)))
}

fn required_terms(pod: &Pod, anti: bool) -> Vec<PodAffinityTerm> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let terms = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
    };
    terms.unwrap_or_default()
}

/// Required pod affinity and anti-affinity, both the pod's own and that of the pods already placed.
pub fn check_pod_affinity(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    let name = node_name(node);
    for term in required_terms(pod, false) {
        let Some(domain) = snap.topology(name, &term.topology_key) else {
            return Err(Unfit::PodAffinity);
        };
        let matching: Vec<&(Arc<Pod>, String)> = snap
            .placed
            .iter()
            .filter(|(p, _)| term_selects(&term, pod, p))
            .collect();
        let in_domain = matching
            .iter()
            .any(|(_, n)| snap.topology(n, &term.topology_key).as_deref() == Some(domain.as_str()));
        // The first pod of a group that selects itself may go anywhere (Kubernetes' rule).
        let first_of_group = matching.is_empty() && term_selects(&term, pod, pod);
        if !in_domain && !first_of_group {
            return Err(Unfit::PodAffinity);
        }
    }
    for term in required_terms(pod, true) {
        let Some(domain) = snap.topology(name, &term.topology_key) else {
            continue;
        };
        let clash = snap.placed.iter().any(|(p, n)| {
            term_selects(&term, pod, p)
                && snap.topology(n, &term.topology_key).as_deref() == Some(domain.as_str())
        });
        if clash {
            return Err(Unfit::PodAntiAffinity);
        }
    }
    for (existing, existing_node) in snap.placed {
        for term in required_terms(existing, true) {
            if !term_selects(&term, existing, pod) {
                continue;
            }
            let (Some(theirs), Some(ours)) = (
                snap.topology(existing_node, &term.topology_key),
                snap.topology(name, &term.topology_key),
            ) else {
                continue;
            };
            if theirs == ours {
                return Err(Unfit::ExistingAntiAffinity);
            }
        }
    }
    Ok(())
}

/// Requests of the pod fit what the node has left.
pub fn check_resources(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    let name = node_name(node);
    let used = snap.usage.get(name).copied().unwrap_or_default();
    let alloc = snap
        .allocatable
        .and_then(|m| m.get(name).copied())
        .unwrap_or_else(|| Allocatable::of(node));
    let (cpu, mem) = snap.requests_of(pod);
    if alloc.pods.is_some_and(|pods| used.pods + 1 > pods) {
        return Err(Unfit::Insufficient("pods"));
    }
    if alloc.cpu.is_some_and(|a| cpu > 0 && used.cpu + cpu > a) {
        return Err(Unfit::Insufficient("cpu"));
    }
    if alloc
        .memory
        .is_some_and(|a| mem > 0 && used.memory + mem > a)
    {
        return Err(Unfit::Insufficient("memory"));
    }
    Ok(())
}

/// All filters, in Kubernetes' order; the first failure is the reason.
pub fn check(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    let spec = pod.spec.as_ref();
    if let Some(wanted) = spec
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        if wanted != node_name(node) {
            return Err(Unfit::NodeName);
        }
    }
    if node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
        return Err(Unfit::Unschedulable);
    }
    if !node_ready(node) {
        let tolerations = spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
        let not_ready = Taint {
            key: "node.kubernetes.io/not-ready".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if !tolerates(tolerations, &not_ready) {
            return Err(Unfit::NotReady);
        }
    }
    if !matches_node_selector(pod, node) {
        return Err(Unfit::Selector);
    }
    if let Some(t) = untolerated_taint(pod, node) {
        return Err(Unfit::Taint(format!(
            "{}: {}",
            t.key,
            t.value.unwrap_or_default()
        )));
    }
    check_resources(pod, node, snap)?;
    check_pod_affinity(pod, node, snap)
}

/// Feasible node names, or the reason for each infeasible node.
pub fn feasible(pod: &Pod, snap: &Snapshot) -> Result<Vec<String>, Vec<Unfit>> {
    let mut ok = Vec::new();
    let mut reasons = Vec::new();
    for n in snap.nodes {
        match check(pod, n, snap) {
            Ok(()) => ok.push(node_name(n).to_string()),
            Err(r) => reasons.push(r),
        }
    }
    if ok.is_empty() {
        Err(reasons)
    } else {
        Ok(ok)
    }
}

/// Round-robin over nodes, as the seed Minik8s does: the first feasible node in
/// queue order is chosen and moves to the back.
#[derive(Debug, Default)]
pub struct RoundRobin {
    order: VecDeque<String>,
}

impl RoundRobin {
    /// Brings the queue in line with the current nodes (new ones join at the back).
    pub fn sync(&mut self, nodes: &[String]) {
        let current: HashSet<&String> = nodes.iter().collect();
        self.order.retain(|n| current.contains(n));
        let known: HashSet<String> = self.order.iter().cloned().collect();
        for n in nodes {
            if !known.contains(n) {
                self.order.push_back(n.clone());
            }
        }
    }

    pub fn pick(&mut self, feasible: &[String]) -> Option<String> {
        let feasible: HashSet<&String> = feasible.iter().collect();
        let pos = self.order.iter().position(|n| feasible.contains(n))?;
        let chosen = self.order.remove(pos)?;
        self.order.push_back(chosen.clone());
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, extra: serde_json::Value) -> Node {
        let mut v = json!({"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}});
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    fn pod(name: &str, labels: serde_json::Value, spec: serde_json::Value) -> Pod {
        let mut v = json!({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        json_patch::merge(&mut v, &json!({"spec": spec}));
        serde_json::from_value(v).unwrap()
    }

    /// The data behind a test snapshot (usage computed from the placed pods).
    struct Owned {
        nodes: Vec<Arc<Node>>,
        placed: Vec<(Arc<Pod>, String)>,
        usage: HashMap<String, Usage>,
    }

    impl Owned {
        fn get(&self) -> Snapshot<'_> {
            Snapshot::new(&self.nodes, &self.usage, &self.placed)
        }
    }

    fn snap(nodes: &[Node], placed: &[(Pod, String)]) -> Owned {
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

    #[test]
    fn ready_schedulable_and_node_name() {
        let nodes = [
            node("n1", json!({}), json!({})),
            node(
                "n2",
                json!({}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
            node("n3", json!({}), json!({"spec": {"unschedulable": true}})),
        ];
        let owned = snap(&nodes, &[]);
        let s = owned.get();
        let p = pod("p", json!({}), json!({}));
        assert_eq!(check(&p, &nodes[0], &s), Ok(()));
        assert_eq!(check(&p, &nodes[1], &s), Err(Unfit::NotReady));
        assert_eq!(check(&p, &nodes[2], &s), Err(Unfit::Unschedulable));
        let pinned = pod("p", json!({}), json!({"nodeName": "n3"}));
        assert_eq!(check(&pinned, &nodes[0], &s), Err(Unfit::NodeName));
        let tolerant = pod(
            "p",
            json!({}),
            json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]}),
        );
        assert_eq!(check(&tolerant, &nodes[1], &s), Ok(()));
    }

    #[test]
    fn node_selector_and_required_node_affinity() {
        let nodes = [
            node("a", json!({"disk": "ssd", "gen": "3"}), json!({})),
            node("b", json!({"disk": "hdd"}), json!({})),
        ];
        let owned = snap(&nodes, &[]);
        let s = owned.get();
        let p = pod("p", json!({}), json!({"nodeSelector": {"disk": "ssd"}}));
        assert_eq!(feasible(&p, &s), Ok(vec!["a".to_string()]));
        let aff = |expr: serde_json::Value| {
            pod(
                "p",
                json!({}),
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}),
            )
        };
        assert_eq!(
            feasible(
                &aff(json!({"key": "disk", "operator": "In", "values": ["hdd"]})),
                &s
            ),
            Ok(vec!["b".to_string()])
        );
        assert_eq!(
            feasible(
                &aff(json!({"key": "disk", "operator": "NotIn", "values": ["hdd"]})),
                &s
            ),
            Ok(vec!["a".to_string()])
        );
        assert_eq!(
            feasible(&aff(json!({"key": "gen", "operator": "Exists"})), &s),
            Ok(vec!["a".to_string()])
        );
        assert_eq!(
            feasible(&aff(json!({"key": "gen", "operator": "DoesNotExist"})), &s),
            Ok(vec!["b".to_string()])
        );
        assert_eq!(
            feasible(
                &aff(json!({"key": "gen", "operator": "Gt", "values": ["2"]})),
                &s
            ),
            Ok(vec!["a".to_string()])
        );
        assert_eq!(
            feasible(
                &aff(json!({"key": "gen", "operator": "Lt", "values": ["2"]})),
                &s
            ),
            Err(vec![Unfit::Selector, Unfit::Selector])
        );
        let by_field = pod(
            "p",
            json!({}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}),
        );
        assert_eq!(feasible(&by_field, &s), Ok(vec!["b".to_string()]));
    }

    #[test]
    fn taints_and_tolerations() {
        let nodes = [node(
            "t",
            json!({}),
            json!({"spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}, {"key": "soft", "effect": "PreferNoSchedule"}]}}),
        )];
        let owned = snap(&nodes, &[]);
        let s = owned.get();
        assert_eq!(
            check(&pod("p", json!({}), json!({})), &nodes[0], &s),
            Err(Unfit::Taint("gpu: yes".into()))
        );
        let eq = pod(
            "p",
            json!({}),
            json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]}),
        );
        assert_eq!(check(&eq, &nodes[0], &s), Ok(()));
        let wrong_value = pod(
            "p",
            json!({}),
            json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "no"}]}),
        );
        assert!(check(&wrong_value, &nodes[0], &s).is_err());
        let all = pod(
            "p",
            json!({}),
            json!({"tolerations": [{"operator": "Exists"}]}),
        );
        assert_eq!(check(&all, &nodes[0], &s), Ok(()));
    }

    #[test]
    fn resources_fit_allocatable_minus_requests() {
        let nodes = [node(
            "n",
            json!({}),
            json!({"status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "2"}}}),
        )];
        let big = |name: &str, cpu: &str| {
            pod(
                name,
                json!({}),
                json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}),
            )
        };
        let placed = vec![(big("a", "600m"), "n".to_string())];
        let owned = snap(&nodes, &placed);
        let s = owned.get();
        assert_eq!(check(&big("b", "400m"), &nodes[0], &s), Ok(()));
        assert_eq!(
            check(&big("b", "500m"), &nodes[0], &s),
            Err(Unfit::Insufficient("cpu"))
        );
        let mem = pod(
            "m",
            json!({}),
            json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"memory": "1Gi"}}}]}),
        );
        assert_eq!(
            check(&mem, &nodes[0], &s),
            Err(Unfit::Insufficient("memory"))
        );
        let two = vec![
            (big("a", "1m"), "n".to_string()),
            (big("b", "1m"), "n".to_string()),
        ];
        assert_eq!(
            check(
                &pod("c", json!({}), json!({})),
                &nodes[0],
                &snap(&nodes, &two).get()
            ),
            Err(Unfit::Insufficient("pods"))
        );
        let init = pod(
            "i",
            json!({}),
            json!({"initContainers": [{"name": "x", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}),
        );
        assert_eq!(pod_requests(&init), (2000, 0));
    }

    #[test]
    fn pod_affinity_and_anti_affinity_by_topology() {
        let nodes = [
            node(
                "a",
                json!({"kubernetes.io/hostname": "a", "zone": "z1"}),
                json!({}),
            ),
            node(
                "b",
                json!({"kubernetes.io/hostname": "b", "zone": "z1"}),
                json!({}),
            ),
            node(
                "c",
                json!({"kubernetes.io/hostname": "c", "zone": "z2"}),
                json!({}),
            ),
        ];
        let db = pod("db", json!({"app": "db"}), json!({}));
        let placed = vec![(db, "a".to_string())];
        let owned = snap(&nodes, &placed);
        let s = owned.get();
        let term = |key: &str| json!([{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": key}]);
        let near = pod(
            "web",
            json!({"app": "web"}),
            json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}),
        );
        assert_eq!(
            feasible(&near, &s),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
        let apart = pod(
            "web",
            json!({"app": "web"}),
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("kubernetes.io/hostname")}}}),
        );
        assert_eq!(
            feasible(&apart, &s),
            Ok(vec!["b".to_string(), "c".to_string()])
        );
        let apart_zone = pod(
            "web",
            json!({"app": "web"}),
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}),
        );
        assert_eq!(feasible(&apart_zone, &s), Ok(vec!["c".to_string()]));
        // The first pod of a self-selecting group may go anywhere.
        let first = pod(
            "x",
            json!({"app": "x"}),
            json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]}}}),
        );
        assert_eq!(feasible(&first, &s).unwrap().len(), 3);
        // Existing pods' anti-affinity keeps matching newcomers away.
        let loner = pod(
            "l",
            json!({"app": "loner"}),
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
        );
        let placed = vec![(loner, "b".to_string())];
        let db2 = pod("db2", json!({"app": "db"}), json!({}));
        assert_eq!(
            check(&db2, &nodes[1], &snap(&nodes, &placed).get()),
            Err(Unfit::ExistingAntiAffinity)
        );
        assert_eq!(check(&db2, &nodes[0], &snap(&nodes, &placed).get()), Ok(()));
    }

    #[test]
    fn round_robin_rotates_and_skips_infeasible() {
        let mut rr = RoundRobin::default();
        rr.sync(&["a".into(), "b".into(), "c".into()]);
        let all: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
        let picks: Vec<String> = (0..4).map(|_| rr.pick(&all).unwrap()).collect();
        assert_eq!(picks, vec!["a", "b", "c", "a"]);
        // b is next; only c is feasible, so c is chosen and goes to the back: b stays next.
        assert_eq!(rr.pick(&["c".into()]).unwrap(), "c");
        assert_eq!(rr.pick(&all).unwrap(), "b");
        // Gone nodes leave the queue; new ones join at the back.
        rr.sync(&["b".into(), "d".into()]);
        assert_eq!(rr.pick(&["b".into(), "d".into()]).unwrap(), "b");
        assert_eq!(rr.pick(&["b".into(), "d".into()]).unwrap(), "d");
        assert_eq!(rr.pick(&[]), None);
    }

    #[test]
    fn message_counts_reasons_like_kubernetes() {
        let m = unschedulable_message(
            3,
            &[Unfit::Selector, Unfit::Insufficient("cpu"), Unfit::Selector],
        );
        assert_eq!(m, "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.");
        assert_eq!(unschedulable_message(0, &[]), "0/0 nodes are available.");
    }
}
