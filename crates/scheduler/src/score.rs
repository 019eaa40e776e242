//! Scoring: which of the feasible nodes is best for a pod, as Kubernetes'
//! default score plugins decide it. Each plugin gives every candidate node a
//! number, normalizes the numbers to 0-100, and the weighted sum ranks the
//! nodes; the scheduler takes the highest, round robin between equals.
//!
//! ```text
//!  plugin (weight)                   what scores high
//!  TaintToleration (3)               fewest untolerated PreferNoSchedule taints
//!  NodeAffinity (2)                  most weight of matching preferred node terms
//!  PodTopologySpread (2)             fewest matching pods in the node's domains
//!                                    (the pod's ScheduleAnyway constraints, or the
//!                                    cluster default for pods of a Service or controller)
//!  InterPodAffinity (2)              preferred pod (anti-)affinity, both ways
//!  NodeResourcesFit (1)              least allocated CPU and memory
//!  NodeResourcesBalancedAllocation (1) CPU and memory used in equal shares
//! ```
//!
//! Kubernetes' ImageLocality is not scored: minik8s nodes do not report
//! their images. Pure functions over a [`Snapshot`], so every rule is
//! unit-tested against worked examples.

use crate::filters::{check, node_name, term_matches, term_selects, RoundRobin, Snapshot, Unfit};
use k8s_openapi::api::core::v1::{Node, Pod, WeightedPodAffinityTerm};
use minik8s_api::selector::Selector;
use minik8s_api::taints::tolerates;
use minik8s_client::TRACE_POD_START;
use std::collections::HashMap;

pub use crate::framework::MAX_NODE_SCORE;

/// One plugin's normalized scores, in candidate order (None: the plugin had
/// nothing to say about this pod, which is the same as equal scores).
type Scores = Option<Vec<i64>>;

/// Each candidate's total: the plugins' normalized scores times their weights.
pub fn total(
    pod: &Pod,
    candidates: &[&Node],
    snap: &Snapshot,
    default_spread: Option<&Selector>,
) -> Vec<i64> {
    let plugins: [(i64, Scores); 6] = [
        (3, taint_toleration(pod, candidates)),
        (2, node_affinity(pod, candidates)),
        (
            2,
            crate::spread::scores(pod, candidates, snap.nodes, snap.placed, default_spread),
        ),
        (2, inter_pod_affinity(pod, candidates, snap)),
        (1, Some(least_allocated(pod, candidates, snap))),
        (1, balanced_allocation(pod, candidates, snap)),
    ];
    let mut sum = vec![0; candidates.len()];
    for (weight, scores) in plugins {
        for (s, v) in sum.iter_mut().zip(scores.into_iter().flatten()) {
            *s += weight * v;
        }
    }
    sum
}

/// How many feasible nodes to find before scoring (Kubernetes'
/// `numFeasibleNodesToFind` with the default `percentageOfNodesToScore`):
/// every node up to 100; beyond, 50% less one point per 125 nodes (at
/// least 5%), and never fewer than 100.
pub fn feasible_nodes_to_find(all: usize) -> usize {
    const MIN: usize = 100;
    if all < MIN {
        return all;
    }
    let percent = 50usize.saturating_sub(all / 125).max(5);
    (all * percent / 100).max(MIN)
}

/// Filter, then score: nodes are checked in round-robin order until
/// [`feasible_nodes_to_find`] fit, the fitting ones are scored, and the
/// best wins — among equals the one earliest in round-robin order, which
/// then moves to the back. A pod nominated by preemption takes its
/// nominated node when that fits, unscored (as Kubernetes does). Err: no
/// node fits, with every node's reason.
pub fn select_node<'n>(
    pod: &Pod,
    snap: &Snapshot,
    rr: &mut RoundRobin,
    node: impl Fn(&str) -> Option<&'n Node>,
    default_spread: Option<&Selector>,
) -> Result<String, Vec<Unfit>> {
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(n) = nominated.and_then(&node) {
        if check(pod, n, snap).is_ok() {
            return Ok(node_name(n).to_string());
        }
    }
    // Each node's verdict is an event of the pod's journey: told only when
    // someone records it (a thousand nodes make a thousand events).
    let told = minik8s_trace::context::current().is_some();
    let wanted = feasible_nodes_to_find(rr.len());
    let mut feasible: Vec<&Node> = Vec::new();
    let mut reasons = Vec::new();
    for name in rr.order() {
        let Some(n) = node(name) else { continue };
        match check(pod, n, snap) {
            Ok(()) => {
                feasible.push(n);
                if feasible.len() >= wanted {
                    break;
                }
            }
            Err(why) => {
                // The journey's "node2: Insufficient cpu".
                if told {
                    tracing::debug!(target: TRACE_POD_START, node = name, reason = %why.message(), "filtered out");
                }
                reasons.push(why)
            }
        }
    }
    let best: Vec<String> = match feasible.as_slice() {
        [] => return Err(reasons),
        [only] => vec![node_name(only).to_string()],
        _ => {
            let totals = total(pod, &feasible, snap, default_spread);
            for (n, score) in feasible.iter().zip(&totals).filter(|_| told) {
                tracing::debug!(target: TRACE_POD_START, node = node_name(n), score, "scored");
            }
            let top = totals.iter().copied().max().unwrap_or(0);
            feasible
                .iter()
                .zip(totals)
                .filter(|(_, t)| *t == top)
                .map(|(n, _)| node_name(n).to_string())
                .collect()
        }
    };
    let chosen = rr
        .pick(&best)
        .expect("the best nodes are in the round robin");
    tracing::debug!(target: TRACE_POD_START, node = %chosen, feasible = feasible.len(), "selected");
    Ok(chosen)
}

/// Kubernetes' `DefaultNormalizeScore`: scaled so the highest is 100
/// (`reverse`: the highest becomes 0 and 0 becomes 100).
fn normalize(raw: Vec<i64>, reverse: bool) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    if max == 0 {
        let all = if reverse { MAX_NODE_SCORE } else { 0 };
        return vec![all; raw.len()];
    }
    raw.into_iter()
        .map(|s| {
            let s = MAX_NODE_SCORE * s / max;
            if reverse {
                MAX_NODE_SCORE - s
            } else {
                s
            }
        })
        .collect()
}

/// PreferNoSchedule taints the pod does not tolerate, fewest best.
pub fn taint_toleration(pod: &Pod, candidates: &[&Node]) -> Scores {
    // Only tolerations that can apply to PreferNoSchedule count.
    let tolerations: Vec<_> = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| {
            t.effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
        })
        .cloned()
        .collect();
    let raw = candidates
        .iter()
        .map(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .into_iter()
                .flatten()
                .filter(|t| t.effect == "PreferNoSchedule" && !tolerates(&tolerations, t))
                .count() as i64
        })
        .collect();
    Some(normalize(raw, true))
}

/// The weights of the pod's preferred node affinity terms each node matches.
pub fn node_affinity(pod: &Pod, candidates: &[&Node]) -> Scores {
    let preferred = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .filter(|p| !p.is_empty())?;
    let raw = candidates
        .iter()
        .map(|n| {
            preferred
                .iter()
                .filter(|t| t.weight != 0 && term_matches(&t.preference, n))
                .map(|t| i64::from(t.weight))
                .sum()
        })
        .collect();
    Some(normalize(raw, false))
}

fn preferred_terms(pod: &Pod, anti: bool) -> &[WeightedPodAffinityTerm] {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let terms = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            })
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            })
    };
    terms.unwrap_or(&[])
}

/// Kubernetes' weight of another pod's required affinity term that selects
/// the incoming pod (`hardPodAffinityWeight`).
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// Preferred pod affinity (+weight) and anti-affinity (-weight) per
/// topology domain, counted both ways: the incoming pod's terms over the
/// placed pods, and the placed pods' terms (their required affinity with
/// weight 1, their preferences) over the incoming pod. Normalized between
/// the lowest and highest total (0 counts as a total).
pub fn inter_pod_affinity(pod: &Pod, candidates: &[&Node], snap: &Snapshot) -> Scores {
    // topology key -> value -> score
    let mut by_domain: HashMap<String, HashMap<String, i64>> = HashMap::new();
    let mut add = |node: &str, key: &str, weight: i64| {
        let value = snap
            .node(node)
            .and_then(|n| n.metadata.labels.as_ref())
            .and_then(|l| l.get(key));
        if let Some(value) = value {
            *by_domain
                .entry(key.to_string())
                .or_default()
                .entry(value.clone())
                .or_default() += weight;
        }
    };
    let (own_affinity, own_anti) = (preferred_terms(pod, false), preferred_terms(pod, true));
    for (existing, node) in snap.placed {
        for t in own_affinity {
            if term_selects(&t.pod_affinity_term, pod, existing) {
                add(node, &t.pod_affinity_term.topology_key, i64::from(t.weight));
            }
        }
        for t in own_anti {
            if term_selects(&t.pod_affinity_term, pod, existing) {
                add(
                    node,
                    &t.pod_affinity_term.topology_key,
                    -i64::from(t.weight),
                );
            }
        }
        let affinity = existing.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let required = affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_deref()
            })
            .unwrap_or(&[]);
        for t in required {
            if term_selects(t, existing, pod) {
                add(node, &t.topology_key, HARD_POD_AFFINITY_WEIGHT);
            }
        }
        for (anti, sign) in [(false, 1), (true, -1)] {
            for t in preferred_terms(existing, anti) {
                if term_selects(&t.pod_affinity_term, existing, pod) {
                    add(
                        node,
                        &t.pod_affinity_term.topology_key,
                        sign * i64::from(t.weight),
                    );
                }
            }
        }
    }
    if by_domain.is_empty() {
        return None;
    }
    let raw: Vec<i64> = candidates
        .iter()
        .map(|n| {
            let labels = n.metadata.labels.as_ref();
            by_domain
                .iter()
                .filter_map(|(key, values)| {
                    labels.and_then(|l| l.get(key)).and_then(|v| values.get(v))
                })
                .sum()
        })
        .collect();
    let max = raw.iter().copied().max().unwrap_or(0).max(0);
    let min = raw.iter().copied().min().unwrap_or(0).min(0);
    Some(
        raw.into_iter()
            .map(|s| {
                if max > min {
                    MAX_NODE_SCORE * (s - min) / (max - min)
                } else {
                    0
                }
            })
            .collect(),
    )
}

/// `(capacity - requested) * 100 / capacity`, 0 when over capacity.
fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// NodeResourcesFit's LeastAllocated: the share of CPU and memory left
/// after the pod, averaged (a container without requests counts as 100m
/// and 200 MiB, so empty-looking pods still spread).
pub fn least_allocated(pod: &Pod, candidates: &[&Node], snap: &Snapshot) -> Vec<i64> {
    let want = snap.requests_of(pod);
    candidates
        .iter()
        .map(|n| {
            let used = snap.usage.get(node_name(n)).copied().unwrap_or_default();
            let alloc = snap.allocatable_of(n);
            let mut parts = Vec::new();
            if let Some(cpu) = alloc.cpu.filter(|c| *c > 0) {
                parts.push(least_requested(used.nonzero_cpu + want.nonzero_cpu, cpu));
            }
            if let Some(mem) = alloc.memory.filter(|m| *m > 0) {
                parts.push(least_requested(
                    used.nonzero_memory + want.nonzero_memory,
                    mem,
                ));
            }
            if parts.is_empty() {
                0
            } else {
                parts.iter().sum::<i64>() / parts.len() as i64
            }
        })
        .collect()
}

/// NodeResourcesBalancedAllocation: `(1 - |cpu share - memory share| / 2) * 100`
/// after the pod, from the real requests; skipped for a pod that requests
/// nothing (Kubernetes skips BestEffort pods, which would otherwise pile up
/// on one node).
pub fn balanced_allocation(pod: &Pod, candidates: &[&Node], snap: &Snapshot) -> Scores {
    let want = snap.requests_of(pod);
    if want.cpu == 0 && want.memory == 0 {
        return None;
    }
    Some(
        candidates
            .iter()
            .map(|n| {
                let used = snap.usage.get(node_name(n)).copied().unwrap_or_default();
                let alloc = snap.allocatable_of(n);
                let share = |requested: i64, capacity: Option<i64>| {
                    capacity
                        .filter(|c| *c > 0)
                        .map(|c| (requested as f64 / c as f64).min(1.0))
                };
                let shares: Vec<f64> = [
                    share(used.cpu + want.cpu, alloc.cpu),
                    share(used.memory + want.memory, alloc.memory),
                ]
                .into_iter()
                .flatten()
                .collect();
                let std = match shares.as_slice() {
                    [a, b] => ((a - b) / 2.0).abs(),
                    _ => 0.0,
                };
                ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
