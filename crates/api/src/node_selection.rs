//! Which nodes a pod may run on by its own spec: `nodeSelector`, required
//! node affinity and the NoSchedule/NoExecute taints it does not tolerate.
//! Kubernetes keeps these in component-helpers because two components ask
//! them: the scheduler's filters and the DaemonSet controller (which places
//! its pods itself).

use crate::taints::tolerates;
use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint};
use std::collections::BTreeMap;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.labels.as_ref().unwrap_or(&NO_LABELS)
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

/// One term of a node selector: every expression and field requirement holds.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = node_labels(node);
    let exprs_ok = term
        .match_expressions
        .iter()
        .flatten()
        .all(|r| requirement_matches(r, labels));
    let fields = BTreeMap::from([(
        "metadata.name".to_string(),
        node.metadata.name.clone().unwrap_or_default(),
    )]);
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
    let node_labels = node_labels(node);
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
