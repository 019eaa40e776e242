//! Pod topology spread (`topologySpreadConstraints`), as Kubernetes'
//! PodTopologySpread plugin decides it: the matching pods are counted per
//! domain (the value of `topologyKey` on their nodes), and a node may take
//! the pod only if its domain would then have at most `maxSkew` more than
//! the emptiest domain.
//!
//! ```text
//!  zone a: 2 matching pods   zone b: 0   maxSkew 1, DoNotSchedule
//!    a node in a: 2 + 1 - 0 = 3 > 1  ──▶ unfit ("didn't match pod topology spread constraints")
//!    a node in b: 0 + 1 - 0 = 1      ──▶ fits
//! ```
//!
//! Only nodes that could hold the pod count as domains (`nodeAffinityPolicy:
//! Honor`, the default: its node selector and required affinity;
//! `nodeTaintsPolicy: Honor`: its tolerations), and only pods of its
//! namespace that are not being deleted. `minDomains`: with fewer domains,
//! the emptiest counts as 0. `whenUnsatisfiable: ScheduleAnyway` only ranks
//! the feasible nodes ([`scores`], one of the score plugins), as does the
//! cluster-default spreading of pods that belong to a Service or a controller.

use crate::framework::{node_name, Unfit, MAX_NODE_SCORE};
use k8s_openapi::api::core::v1::{Node, Pod, Service, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use minik8s_api::node_selection::{matches_node_selector, untolerated_taint};
use minik8s_api::selector::{Requirement, Selector};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

fn constraints(pod: &Pod) -> &[TopologySpreadConstraint] {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or(&[])
}

/// Whether the pod spreads at all (the scheduler then hands the filters
/// every placed pod, as for pod affinity).
pub fn has_spread(pod: &Pod) -> bool {
    !constraints(pod).is_empty()
}

/// The constraint's selector, with `matchLabelKeys` turned into `In`
/// requirements on the pod's own values.
fn selector(c: &TopologySpreadConstraint, pod: &Pod) -> Option<Selector> {
    let mut ls: LabelSelector = c.label_selector.clone()?;
    let own = pod.metadata.labels.as_ref();
    for key in c.match_label_keys.iter().flatten() {
        if let Some(v) = own.and_then(|l| l.get(key)) {
            ls.match_expressions
                .get_or_insert_with(Vec::new)
                .push(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: "In".into(),
                    values: Some(vec![v.clone()]),
                });
        }
    }
    Selector::from_label_selector(&ls).ok()
}

/// Whether `node` is one of the constraint's domains for `pod`.
fn eligible(c: &TopologySpreadConstraint, pod: &Pod, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    if !labels.is_some_and(|l| l.contains_key(&c.topology_key)) {
        return false;
    }
    let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
    let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
    (!honor_affinity || matches_node_selector(pod, node))
        && (!honor_taints || untolerated_taint(pod, node).is_none())
}

/// Matching pods per domain of one constraint, every eligible domain present
/// (with 0 when empty).
fn counts(
    c: &TopologySpreadConstraint,
    pod: &Pod,
    nodes: &[Arc<Node>],
    placed: &[(Arc<Pod>, String)],
) -> BTreeMap<String, i64> {
    let Some(sel) = selector(c, pod) else {
        return BTreeMap::new();
    };
    let domain_of = |n: &Node| -> Option<String> {
        eligible(c, pod, n).then(|| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(&c.topology_key))
                .cloned()
        })?
    };
    let mut domains: BTreeMap<String, i64> = BTreeMap::new();
    let mut node_domain: BTreeMap<&str, String> = BTreeMap::new();
    for n in nodes {
        if let Some(d) = domain_of(n) {
            domains.entry(d.clone()).or_insert(0);
            node_domain.insert(node_name(n), d);
        }
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    for (placed, node) in placed {
        let same_ns = placed.metadata.namespace.as_deref().unwrap_or("default") == ns;
        let labels = placed.metadata.labels.clone().unwrap_or_default();
        if !same_ns || placed.metadata.deletion_timestamp.is_some() || !sel.matches(&labels) {
            continue;
        }
        if let Some(d) = node_domain.get(node.as_str()) {
            *domains.entry(d.clone()).or_insert(0) += 1;
        }
    }
    domains
}

/// One `DoNotSchedule` constraint with its domains counted for the pod.
struct Hard {
    topology_key: String,
    max_skew: i64,
    counts: BTreeMap<String, i64>,
    /// The emptiest domain's count (0 with fewer than `minDomains` domains).
    min: i64,
    /// 1 when the pod matches its own selector (it would add to the count).
    self_match: i64,
}

/// The pod's `DoNotSchedule` constraints counted once per decision
/// (Kubernetes' PreFilter), so that checking each node is a lookup: counting
/// per node made a spread pod's decision cost nodes × pods.
pub struct Prepared {
    hard: Vec<Hard>,
}

impl Prepared {
    pub fn new(pod: &Pod, nodes: &[Arc<Node>], placed: &[(Arc<Pod>, String)]) -> Prepared {
        let own_labels = pod.metadata.labels.clone().unwrap_or_default();
        let hard = constraints(pod)
            .iter()
            .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
            .map(|c| {
                let counts = counts(c, pod, nodes, placed);
                let too_few = c
                    .min_domains
                    .is_some_and(|m| (counts.len() as i64) < i64::from(m));
                let min = if too_few {
                    0
                } else {
                    counts.values().copied().min().unwrap_or(0)
                };
                Hard {
                    topology_key: c.topology_key.clone(),
                    max_skew: i64::from(c.max_skew),
                    min,
                    self_match: selector(c, pod).is_some_and(|s| s.matches(&own_labels)) as i64,
                    counts,
                }
            })
            .collect();
        Prepared { hard }
    }

    /// The filter: every `DoNotSchedule` constraint holds on `node` (the
    /// skew placing the pod there makes is at most `maxSkew`).
    pub fn check(&self, node: &Node) -> Result<(), Unfit> {
        for c in &self.hard {
            let Some(domain) = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(&c.topology_key))
            else {
                return Err(Unfit::SpreadLabel);
            };
            let skew = c.counts.get(domain).copied().unwrap_or(0) + c.self_match - c.min;
            if skew > c.max_skew {
                return Err(Unfit::Spread);
            }
        }
        Ok(())
    }
}

/// The filter for one node (the counts made for this check alone; the
/// scheduler's snapshot keeps them per pod, see `filters::Snapshot`).
pub fn check_spread(
    pod: &Pod,
    node: &Node,
    nodes: &[Arc<Node>],
    placed: &[(Arc<Pod>, String)],
) -> Result<(), Unfit> {
    Prepared::new(pod, nodes, placed).check(node)
}

const HOSTNAME: &str = "kubernetes.io/hostname";

/// Kubernetes' cluster-default spreading (`defaultingType: System`): a pod
/// without constraints of its own that a Service, ReplicaSet, StatefulSet or
/// ReplicationController selects spreads softly over nodes and zones.
const SYSTEM_DEFAULT: [(&str, i64); 2] = [(HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)];

/// Kubernetes' `DefaultSelector` for the cluster-default spreading: the
/// selectors of the Services selecting the pod, merged, and the selector of
/// its controller (None when that leaves nothing to select by).
pub fn default_selector<'s>(
    pod: &Pod,
    services: impl IntoIterator<Item = &'s Service>,
    controller: Option<Selector>,
) -> Option<Selector> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for svc in services {
        // A Service without a selector selects nothing, not everything.
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        if sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            merged.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut requirements: Vec<Requirement> = merged
        .into_iter()
        .map(|(k, v)| Requirement::Equals(k, v))
        .collect();
    requirements.extend(controller.into_iter().flat_map(|s| s.requirements));
    (!requirements.is_empty()).then_some(Selector { requirements })
}

/// A soft constraint as the score counts it.
struct Soft {
    topology_key: String,
    max_skew: i64,
    /// None: a constraint without a selector, which matches no pod.
    selector: Option<Selector>,
    honor_affinity: bool,
    honor_taints: bool,
}

impl Soft {
    /// The node is one of this constraint's domains for `pod` (its inclusion policies).
    fn includes(&self, pod: &Pod, node: &Node) -> bool {
        (!self.honor_affinity || matches_node_selector(pod, node))
            && (!self.honor_taints || untolerated_taint(pod, node).is_none())
    }

    fn matching(&self, pods: &[&Pod]) -> i64 {
        let Some(sel) = &self.selector else { return 0 };
        pods.iter()
            .filter(|p| p.metadata.labels.as_ref().is_some_and(|l| sel.matches(l)))
            .count() as i64
    }
}

/// The pod's `ScheduleAnyway` constraints, or the cluster default ones
/// (selecting by `default_selector`) when it has none at all.
fn soft_constraints(pod: &Pod, default_selector: Option<&Selector>) -> Vec<Soft> {
    let own = constraints(pod);
    if own.is_empty() {
        let Some(sel) = default_selector.filter(|s| !s.is_empty()) else {
            return Vec::new();
        };
        return SYSTEM_DEFAULT
            .iter()
            .map(|(key, skew)| Soft {
                topology_key: key.to_string(),
                max_skew: *skew,
                selector: Some(sel.clone()),
                honor_affinity: true,
                honor_taints: false,
            })
            .collect();
    }
    own.iter()
        .filter(|c| c.when_unsatisfiable == "ScheduleAnyway")
        .map(|c| Soft {
            topology_key: c.topology_key.clone(),
            max_skew: i64::from(c.max_skew),
            selector: selector(c, pod),
            honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        })
        .collect()
}

/// PodTopologySpread's score, normalized (None: no soft constraint). Per
/// candidate and constraint: the matching pods in its domain (on the node
/// itself for `kubernetes.io/hostname`) times `ln(domains + 2)`, plus
/// `maxSkew - 1`; the fewest score highest. With the pod's own constraints,
/// a candidate lacking one of their keys scores 0; the cluster default
/// spares nodes without a zone label.
pub fn scores(
    pod: &Pod,
    candidates: &[&Node],
    nodes: &[Arc<Node>],
    placed: &[(Arc<Pod>, String)],
    default_selector: Option<&Selector>,
) -> Option<Vec<i64>> {
    let soft = soft_constraints(pod, default_selector);
    if soft.is_empty() {
        return None;
    }
    let require_all = !constraints(pod).is_empty();
    let label = |n: &Node, key: &str| -> Option<String> {
        n.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned()
    };
    let has_all = |n: &Node| soft.iter().all(|c| label(n, &c.topology_key).is_some());
    let ignored: Vec<bool> = candidates
        .iter()
        .map(|n| require_all && !has_all(n))
        .collect();
    // The domains among the candidates (a missing label is the domain "",
    // as in Kubernetes), each with its count of matching pods.
    let mut domains: Vec<HashMap<String, i64>> = vec![HashMap::new(); soft.len()];
    for (n, _) in candidates.iter().zip(&ignored).filter(|(_, i)| !**i) {
        for (i, c) in soft.iter().enumerate() {
            if c.topology_key != HOSTNAME {
                domains[i]
                    .entry(label(n, &c.topology_key).unwrap_or_default())
                    .or_insert(0);
            }
        }
    }
    let scored = ignored.iter().filter(|i| !**i).count();
    let weights: Vec<f64> = soft
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let size = if c.topology_key == HOSTNAME {
                scored
            } else {
                domains[i].len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    let on_node = counted_pods_by_node(pod, placed);
    for n in nodes {
        if require_all && !has_all(n) {
            continue;
        }
        let pods = on_node.get(node_name(n)).map_or(&[][..], Vec::as_slice);
        for (i, c) in soft.iter().enumerate() {
            if c.topology_key == HOSTNAME || !c.includes(pod, n) {
                continue;
            }
            let value = label(n, &c.topology_key).unwrap_or_default();
            if let Some(count) = domains[i].get_mut(&value) {
                *count += c.matching(pods);
            }
        }
    }
    let raw: Vec<Option<i64>> = candidates
        .iter()
        .zip(&ignored)
        .map(|(n, ignored)| {
            if *ignored {
                return None;
            }
            let mut score = 0.0;
            for (i, c) in soft.iter().enumerate() {
                let Some(value) = label(n, &c.topology_key) else {
                    continue;
                };
                let count = if c.topology_key == HOSTNAME {
                    let pods = on_node.get(node_name(n)).map_or(&[][..], Vec::as_slice);
                    c.matching(pods)
                } else {
                    domains[i].get(&value).copied().unwrap_or(0)
                };
                score += count as f64 * weights[i] + (c.max_skew - 1) as f64;
            }
            Some(score.round() as i64)
        })
        .collect();
    Some(normalized(raw))
}

/// The pods that count: the pod's namespace's, not being deleted, by node.
fn counted_pods_by_node<'a>(
    pod: &Pod,
    placed: &'a [(Arc<Pod>, String)],
) -> HashMap<&'a str, Vec<&'a Pod>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut on_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for (p, node) in placed {
        if p.metadata.namespace.as_deref().unwrap_or("default") == ns
            && p.metadata.deletion_timestamp.is_none()
        {
            on_node.entry(node.as_str()).or_default().push(p);
        }
    }
    on_node
}

/// Raw scores (None: the node is ignored, 0) normalized so the fewest
/// matching pods score highest, as PodTopologySpread's NormalizeScore.
fn normalized(raw: Vec<Option<i64>>) -> Vec<i64> {
    let min = raw.iter().flatten().copied().min().unwrap_or(0);
    let max = raw.iter().flatten().copied().max().unwrap_or(0);
    raw.into_iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, zone: Option<&str>) -> Arc<Node> {
        let mut labels = json!({"kubernetes.io/hostname": name});
        if let Some(z) = zone {
            labels["zone"] = json!(z);
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap(),
        )
    }

    fn pod(name: &str, spread: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c"}], "topologySpreadConstraints": spread}}),
            )
            .unwrap(),
        )
    }

    fn constraint(when: &str) -> serde_json::Value {
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": "web"}}}])
    }

    #[test]
    fn a_zone_ahead_by_max_skew_takes_no_more() {
        let nodes = vec![
            node("a1", Some("a")),
            node("a2", Some("a")),
            node("b1", Some("b")),
            node("x", None),
        ];
        let placed = vec![
            (pod("p1", json!([])), "a1".to_string()),
            (pod("p2", json!([])), "a2".to_string()),
            (pod("p3", json!([])), "b1".to_string()),
        ];
        let incoming = pod("new", constraint("DoNotSchedule"));
        // a has 2, b has 1: a would be 3 - 1 = 2 > 1.
        assert_eq!(
            check_spread(&incoming, &nodes[0], &nodes, &placed),
            Err(Unfit::Spread)
        );
        assert_eq!(check_spread(&incoming, &nodes[2], &nodes, &placed), Ok(()));
        assert_eq!(
            check_spread(&incoming, &nodes[3], &nodes, &placed),
            Err(Unfit::SpreadLabel)
        );
        // With three domains required and two present, the emptiest counts 0.
        let mut min3 = constraint("DoNotSchedule");
        min3[0]["minDomains"] = json!(3);
        assert_eq!(
            check_spread(&pod("new", min3), &nodes[2], &nodes, &placed),
            Err(Unfit::Spread)
        );
        // Soft: ranked, not refused.
        let soft = pod("new", constraint("ScheduleAnyway"));
        assert_eq!(check_spread(&soft, &nodes[0], &nodes, &placed), Ok(()));
        // a holds 2 and b 1 (two domains: weight ln 4): a1 2*1.386 = 3, b1 1.386 = 1;
        // normalized 100 * (3 + 1 - s) / 3.
        let candidates = [&*nodes[0], &*nodes[2]];
        assert_eq!(
            scores(&soft, &candidates, &nodes, &placed, None),
            Some(vec![33, 100])
        );
        // Nodes without the key score 0 under the pod's own constraints.
        let with_x = [&*nodes[0], &*nodes[3]];
        assert_eq!(
            scores(&soft, &with_x, &nodes, &placed, None),
            Some(vec![100, 0])
        );
    }

    #[test]
    fn match_label_keys_narrow_the_count_to_the_pods_own_values() {
        let nodes = vec![node("a1", Some("a")), node("b1", Some("b"))];
        let mut old: Pod = (*pod("old", json!([]))).clone();
        old.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("rev".into(), "1".into());
        let placed = vec![
            (Arc::new(old.clone()), "a1".to_string()),
            (Arc::new(old), "a1".to_string()),
        ];
        let mut spread = constraint("DoNotSchedule");
        spread[0]["matchLabelKeys"] = json!(["rev"]);
        let mut new: Pod = (*pod("new", spread)).clone();
        new.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("rev".into(), "2".into());
        // The old revision's pods do not count for the new one.
        assert_eq!(check_spread(&new, &nodes[0], &nodes, &placed), Ok(()));
    }
}
