//! The scheduler's decisions as pure functions: which nodes can take a pod
//! (filters, each with the reason Kubernetes reports), and which feasible
//! node is next in round-robin order. No I/O here, so every rule is
//! unit-tested without servers.

pub use crate::framework::*;
use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm, Taint};
pub use minik8s_api::node_selection::{matches_node_selector, term_matches, untolerated_taint};
use minik8s_api::selector::Selector;
use minik8s_api::taints::tolerates;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

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
    /// The pod's claims, when it has any (volume binding).
    pub volumes: Option<&'a crate::volumes::PodVolumes>,
    /// The pod's resource claims, when it has any (device allocation).
    pub devices: Option<&'a crate::dra::NodeCheck<'a>>,
    /// Nodes by name, built on first use (only pod affinity needs it).
    by_name: std::cell::OnceCell<HashMap<&'a str, &'a Node>>,
    /// The last pod's requests, so checking it against every node parses them once.
    requests: std::cell::Cell<Option<(*const Pod, PodRequests)>>,
    /// The last pod's spread counts and affinity domains, made on its first check.
    prepared: std::cell::RefCell<Option<(*const Pod, std::rc::Rc<Prepared>)>>,
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
            volumes: None,
            devices: None,
            by_name: std::cell::OnceCell::new(),
            requests: std::cell::Cell::new(None),
            prepared: std::cell::RefCell::new(None),
        }
    }

    /// The pod's [`Prepared`] filters, made once for as long as the same pod
    /// is checked against node after node.
    fn prepared(&self, pod: &Pod) -> std::rc::Rc<Prepared> {
        if let Some((p, prepared)) = self.prepared.borrow().as_ref() {
            if std::ptr::eq(*p, pod) {
                return prepared.clone();
            }
        }
        let prepared = std::rc::Rc::new(Prepared {
            spread: crate::spread::Prepared::new(pod, self.nodes, self.placed),
            affinity: AffinityPrepared::new(pod, self),
        });
        *self.prepared.borrow_mut() = Some((pod as *const Pod, prepared.clone()));
        prepared
    }

    pub fn with_allocatable(mut self, allocatable: &'a HashMap<String, Allocatable>) -> Self {
        self.allocatable = Some(allocatable);
        self
    }

    pub fn with_volumes(mut self, volumes: Option<&'a crate::volumes::PodVolumes>) -> Self {
        self.volumes = volumes;
        self
    }

    pub fn with_devices(mut self, devices: Option<&'a crate::dra::NodeCheck<'a>>) -> Self {
        self.devices = devices;
        self
    }

    pub(crate) fn requests_of(&self, pod: &Pod) -> PodRequests {
        if let Some((p, r)) = self.requests.get() {
            if std::ptr::eq(p, pod) {
                return r;
            }
        }
        let r = pod_requests(pod);
        self.requests.set(Some((pod as *const Pod, r)));
        r
    }

    /// What `node` offers, from the caller's parsed table when it keeps one.
    pub(crate) fn allocatable_of(&self, node: &Node) -> Allocatable {
        self.allocatable
            .and_then(|m| m.get(node_name(node)).copied())
            .unwrap_or_else(|| Allocatable::of(node))
    }

    pub(crate) fn node(&self, name: &str) -> Option<&'a Node> {
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

/// Does the pod have any pod affinity or anti-affinity, required or
/// preferred (Kubernetes' "pod with affinity", which later pods must consult)?
pub fn has_any_pod_affinity(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
}

/// Does `term`, written in `owner`'s spec, select `candidate` (its namespaces and labels)?
pub(crate) fn term_selects(term: &PodAffinityTerm, owner: &Pod, candidate: &Pod) -> bool {
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

/// Required pod affinity and anti-affinity for one pod, resolved once per
/// decision into topology domains (Kubernetes' PreFilter), so that checking
/// a node is a few lookups instead of a walk over every placed pod.
pub struct AffinityPrepared {
    /// Per required affinity term: its key, the domains holding a matching
    /// pod, and whether the pod may go anywhere as the first of its group.
    affinity: Vec<(String, HashSet<String>, bool)>,
    /// Per required anti-affinity term: its key and the domains to avoid.
    anti: Vec<(String, HashSet<String>)>,
    /// Placed pods' anti-affinity terms that select this pod: (key, domain) pairs to avoid.
    existing_anti: HashSet<(String, String)>,
}

impl AffinityPrepared {
    pub fn new(pod: &Pod, snap: &Snapshot) -> AffinityPrepared {
        // The domains (values of `key`) of the nodes holding placed pods `term` selects.
        let domains = |term: &PodAffinityTerm| -> (HashSet<String>, bool) {
            let mut found = HashSet::new();
            let mut any = false;
            for (p, n) in snap.placed {
                if term_selects(term, pod, p) {
                    any = true;
                    found.extend(snap.topology(n, &term.topology_key));
                }
            }
            (found, any)
        };
        let affinity = required_terms(pod, false)
            .iter()
            .map(|term| {
                let (found, any) = domains(term);
                // The first pod of a group that selects itself may go anywhere (Kubernetes' rule).
                let first_of_group = !any && term_selects(term, pod, pod);
                (term.topology_key.clone(), found, first_of_group)
            })
            .collect();
        let anti = required_terms(pod, true)
            .iter()
            .map(|term| (term.topology_key.clone(), domains(term).0))
            .collect();
        let mut existing_anti = HashSet::new();
        for (existing, existing_node) in snap.placed {
            for term in required_terms(existing, true) {
                if term_selects(&term, existing, pod) {
                    if let Some(theirs) = snap.topology(existing_node, &term.topology_key) {
                        existing_anti.insert((term.topology_key.clone(), theirs));
                    }
                }
            }
        }
        AffinityPrepared {
            affinity,
            anti,
            existing_anti,
        }
    }

    /// Required pod affinity and anti-affinity on `node`, both the pod's own
    /// and that of the pods already placed.
    pub fn check(&self, node: &Node) -> Result<(), Unfit> {
        let label = |key: &str| node.metadata.labels.as_ref().and_then(|l| l.get(key));
        for (key, found, first_of_group) in &self.affinity {
            let Some(domain) = label(key) else {
                return Err(Unfit::PodAffinity);
            };
            if !found.contains(domain) && !first_of_group {
                return Err(Unfit::PodAffinity);
            }
        }
        for (key, avoid) in &self.anti {
            if label(key).is_some_and(|d| avoid.contains(d)) {
                return Err(Unfit::PodAntiAffinity);
            }
        }
        if !self.existing_anti.is_empty() {
            for (key, value) in node.metadata.labels.iter().flatten() {
                if self.existing_anti.contains(&(key.clone(), value.clone())) {
                    return Err(Unfit::ExistingAntiAffinity);
                }
            }
        }
        Ok(())
    }
}

/// Required pod affinity and anti-affinity for one node (resolved for this
/// check alone; the scheduler's snapshot keeps the resolution per pod).
pub fn check_pod_affinity(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    AffinityPrepared::new(pod, snap).check(node)
}

/// What a pod's filters work out once per decision.
pub struct Prepared {
    spread: crate::spread::Prepared,
    affinity: AffinityPrepared,
}

/// Requests of the pod fit what the node has left.
pub fn check_resources(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    let name = node_name(node);
    let used = snap.usage.get(name).copied().unwrap_or_default();
    let alloc = snap.allocatable_of(node);
    let want = snap.requests_of(pod);
    if alloc.pods.is_some_and(|pods| used.pods + 1 > pods) {
        return Err(Unfit::Insufficient("pods"));
    }
    if alloc
        .cpu
        .is_some_and(|a| want.cpu > 0 && used.cpu + want.cpu > a)
    {
        return Err(Unfit::Insufficient("cpu"));
    }
    if alloc
        .memory
        .is_some_and(|a| want.memory > 0 && used.memory + want.memory > a)
    {
        return Err(Unfit::Insufficient("memory"));
    }
    let storage = want.ephemeral_storage;
    if alloc
        .ephemeral_storage
        .is_some_and(|a| storage > 0 && used.ephemeral_storage + storage > a)
    {
        return Err(Unfit::Insufficient("ephemeral-storage"));
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
    if let Some(v) = snap.volumes {
        crate::volumes::node_fit(v, node)?;
    }
    check_resources(pod, node, snap)?;
    if let Some(d) = snap.devices {
        d.fits(node).map_err(Unfit::Claims)?;
    }
    let prepared = snap.prepared(pod);
    prepared.spread.check(node)?;
    prepared.affinity.check(node)
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

/// Whether a node's change can change a scheduling decision: its name,
/// labels, spec (unschedulable, taints), allocatable, or the status of a
/// condition. A heartbeat's new times alone cannot, and on thousands of nodes
/// they would otherwise make the scheduler rebuild its node list all the time.
pub fn node_changed_for_scheduling(old: &Node, new: &Node) -> bool {
    let conditions = |n: &Node| -> Vec<(String, String)> {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    };
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    old.metadata.name != new.metadata.name
        || old.metadata.labels != new.metadata.labels
        || old.spec != new.spec
        || allocatable(old) != allocatable(new)
        || conditions(old) != conditions(new)
}

/// Round-robin over nodes, as the seed Minik8s does: the first feasible node in
/// queue order is chosen and moves to the back.
#[derive(Debug, Default, Clone)]
pub struct RoundRobin {
    order: VecDeque<String>,
    /// The node names the queue was last brought in line with.
    synced: Option<std::sync::Arc<Vec<String>>>,
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

    /// As [`RoundRobin::sync`], skipped when `nodes` is the list it last synced with.
    pub fn sync_shared(&mut self, nodes: &std::sync::Arc<Vec<String>>) {
        if self
            .synced
            .as_ref()
            .is_some_and(|s| std::sync::Arc::ptr_eq(s, nodes))
        {
            return;
        }
        self.sync(nodes);
        self.synced = Some(nodes.clone());
    }

    /// The nodes, next in turn first.
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn pick(&mut self, feasible: &[String]) -> Option<String> {
        let feasible: HashSet<&str> = feasible.iter().map(String::as_str).collect();
        self.pick_first(|n| feasible.contains(n))
    }

    /// The first node in queue order that `fits` (asked in that order, and no
    /// further than the first that fits), moved to the back: the same choice as
    /// [`RoundRobin::pick`] over all feasible nodes, at the cost of one check
    /// when the next node fits, as it usually does.
    pub fn pick_first(&mut self, mut fits: impl FnMut(&str) -> bool) -> Option<String> {
        let pos = self.order.iter().position(|n| fits(n))?;
        let chosen = self.order.remove(pos)?;
        self.order.push_back(chosen.clone());
        Some(chosen)
    }
}

#[cfg(test)]
mod tests;
