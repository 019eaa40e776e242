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
//! the feasible nodes (`penalty`): the least skewed are preferred.

use crate::filters::{matches_node_selector, node_name, untolerated_taint, Snapshot, Unfit};
use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use minik8s_api::selector::Selector;
use std::collections::BTreeMap;

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
fn counts(c: &TopologySpreadConstraint, pod: &Pod, snap: &Snapshot) -> BTreeMap<String, i64> {
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
    for n in snap.nodes {
        if let Some(d) = domain_of(n) {
            domains.entry(d.clone()).or_insert(0);
            node_domain.insert(node_name(n), d);
        }
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    for (placed, node) in snap.placed {
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

/// The skew placing `pod` on `node` would make for one constraint; Err when
/// the node has no domain for it.
fn skew(c: &TopologySpreadConstraint, pod: &Pod, node: &Node, snap: &Snapshot) -> Result<i64, ()> {
    let Some(domain) = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&c.topology_key))
    else {
        return Err(());
    };
    let counts = counts(c, pod, snap);
    let mut min = counts.values().copied().min().unwrap_or(0);
    if c.min_domains
        .is_some_and(|m| (counts.len() as i64) < m as i64)
    {
        min = 0;
    }
    let own_labels = pod.metadata.labels.clone().unwrap_or_default();
    let self_match = selector(c, pod).is_some_and(|s| s.matches(&own_labels)) as i64;
    Ok(counts.get(domain).copied().unwrap_or(0) + self_match - min)
}

/// The filter: every `DoNotSchedule` constraint holds on `node`.
pub fn check_spread(pod: &Pod, node: &Node, snap: &Snapshot) -> Result<(), Unfit> {
    for c in constraints(pod)
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
    {
        match skew(c, pod, node, snap) {
            Err(()) => return Err(Unfit::SpreadLabel),
            Ok(s) if s > c.max_skew as i64 => return Err(Unfit::Spread),
            Ok(_) => {}
        }
    }
    Ok(())
}

/// How much `ScheduleAnyway` constraints would be stretched on `node`
/// (lower is better; a node without the key is ranked last).
pub fn penalty(pod: &Pod, node: &Node, snap: &Snapshot) -> i64 {
    constraints(pod)
        .iter()
        .filter(|c| c.when_unsatisfiable == "ScheduleAnyway")
        .map(|c| match skew(c, pod, node, snap) {
            Ok(s) => (s - c.max_skew as i64).max(0),
            Err(()) => i64::MAX / 4,
        })
        .sum()
}

/// Whether the pod has soft constraints to rank nodes by.
pub fn has_soft(pod: &Pod) -> bool {
    constraints(pod)
        .iter()
        .any(|c| c.when_unsatisfiable == "ScheduleAnyway")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::Usage;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Arc;

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
        let usage: HashMap<String, Usage> = HashMap::new();
        let snap = Snapshot::new(&nodes, &usage, &placed);
        let incoming = pod("new", constraint("DoNotSchedule"));
        // a has 2, b has 1: a would be 3 - 1 = 2 > 1.
        assert_eq!(
            check_spread(&incoming, &nodes[0], &snap),
            Err(Unfit::Spread)
        );
        assert_eq!(check_spread(&incoming, &nodes[2], &snap), Ok(()));
        assert_eq!(
            check_spread(&incoming, &nodes[3], &snap),
            Err(Unfit::SpreadLabel)
        );
        // With three domains required and two present, the emptiest counts 0.
        let mut min3 = constraint("DoNotSchedule");
        min3[0]["minDomains"] = json!(3);
        assert_eq!(
            check_spread(&pod("new", min3), &nodes[2], &snap),
            Err(Unfit::Spread)
        );
        // Soft: ranked, not refused.
        let soft = pod("new", constraint("ScheduleAnyway"));
        assert_eq!(check_spread(&soft, &nodes[0], &snap), Ok(()));
        assert!(penalty(&soft, &nodes[0], &snap) > penalty(&soft, &nodes[2], &snap));
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
        let usage: HashMap<String, Usage> = HashMap::new();
        let snap = Snapshot::new(&nodes, &usage, &placed);
        let mut spread = constraint("DoNotSchedule");
        spread[0]["matchLabelKeys"] = json!(["rev"]);
        let mut new: Pod = (*pod("new", spread)).clone();
        new.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("rev".into(), "2".into());
        // The old revision's pods do not count for the new one.
        assert_eq!(check_spread(&new, &nodes[0], &snap), Ok(()));
    }
}
