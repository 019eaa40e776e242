//! Preemption's decisions as pure functions (Kubernetes' `DefaultPreemption`):
//! which pods a node must lose for a pod of higher priority to fit, and which
//! node loses the least.
//!
//! ```text
//!  for each node that failed for a reason preemption can fix (resources,
//!  anti-affinity, spread — not selectors, taints or names):
//!     remove every unit of lower priority ── still no fit ──▶ not a candidate
//!        │ fits
//!        ▼
//!     add units back, most important first, PDB-protected ones before the
//!     others; a unit that breaks the fit stays a victim
//!  pick the candidate with: fewest PDB violations ▸ lowest highest-victim
//!  priority ▸ lowest priority sum ▸ fewest victims ▸ latest start of its
//!  most important victims ▸ first
//! ```
//!
//! A unit is one pod, or every placed member of a gang: a group is preempted
//! whole, never half of it.

use crate::filters::Unfit;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use minik8s_api::selector::Selector;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// A pod's priority (`spec.priority`, resolved at admission; 0 when unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// When the pod started (its creation when it has not started yet).
fn start_time(pod: &Pod) -> Option<&Time> {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
}

/// Kubernetes' `MoreImportantPod`: higher priority first, then the one that
/// started earlier (it has done more work).
pub fn more_important(a: &Pod, b: &Pod) -> Ordering {
    priority(b)
        .cmp(&priority(a))
        .then_with(|| match (start_time(a), start_time(b)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
}

/// Pods that go or stay together: one pod, or a gang's placed members.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The pods with their nodes, most important first.
    pub pods: Vec<(Arc<Pod>, String)>,
}

impl Unit {
    pub fn new(mut pods: Vec<(Arc<Pod>, String)>) -> Unit {
        pods.sort_by(|a, b| more_important(&a.0, &b.0));
        Unit { pods }
    }

    /// The priority of its most important pod.
    pub fn priority(&self) -> i32 {
        self.pods
            .iter()
            .map(|(p, _)| priority(p))
            .max()
            .unwrap_or(0)
    }

    fn lead(&self) -> Option<&Pod> {
        self.pods.first().map(|(p, _)| p.as_ref())
    }
}

fn unit_order(a: &Unit, b: &Unit) -> Ordering {
    match (a.lead(), b.lead()) {
        (Some(x), Some(y)) => more_important(x, y),
        _ => Ordering::Equal,
    }
}

/// A PodDisruptionBudget as preemption reads it: how many more of its pods
/// may go, and the pods already counted as disrupted.
#[derive(Debug, Clone)]
pub struct Budget {
    pub namespace: String,
    pub selector: Selector,
    pub allowed: i32,
    pub disrupted: HashSet<String>,
}

impl Budget {
    /// None for a budget whose selector is empty or invalid: it protects no pod
    /// from preemption, as in Kubernetes.
    pub fn of(pdb: &PodDisruptionBudget) -> Option<Budget> {
        let selector = pdb.spec.as_ref()?.selector.as_ref()?;
        let selector = Selector::from_label_selector(selector).ok()?;
        if selector.is_empty() {
            return None;
        }
        let status = pdb.status.as_ref();
        Some(Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            selector,
            allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
        })
    }

    fn covers(&self, pod: &Pod) -> bool {
        pod.metadata.namespace.as_deref().unwrap_or("default") == self.namespace
            && pod
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| self.selector.matches(l))
            && !self
                .disrupted
                .contains(pod.metadata.name.as_deref().unwrap_or(""))
    }
}

/// Splits units (most important first) into those whose removal would break a
/// budget and the others, spending each budget's allowance in that order
/// (Kubernetes' `filterPodsWithPDBViolation`).
fn split_by_budgets(units: &[Unit], budgets: &[Budget]) -> (Vec<usize>, Vec<usize>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for (i, unit) in units.iter().enumerate() {
        let mut breaks = false;
        for (pod, _) in &unit.pods {
            for (j, b) in budgets.iter().enumerate() {
                if b.covers(pod) {
                    allowed[j] -= 1;
                    breaks |= allowed[j] < 0;
                }
            }
        }
        if breaks {
            violating.push(i);
        } else {
            fine.push(i);
        }
    }
    (violating, fine)
}

/// The units a candidate loses, most important first, and how many of them
/// a PodDisruptionBudget protected.
#[derive(Debug, Clone)]
pub struct Victims {
    pub units: Vec<Unit>,
    pub budget_violations: usize,
}

impl Victims {
    pub fn pods(&self) -> impl Iterator<Item = &(Arc<Pod>, String)> {
        self.units.iter().flat_map(|u| u.pods.iter())
    }
}

/// Why a node is no candidate: a reason preemption cannot fix, no pod of
/// lower priority, or no fit even without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCandidate<E> {
    NotHelpful,
    NoVictims,
    StillUnfit(E),
}

/// The fewest and least important units whose removal lets the preemptor
/// fit. `fits(gone)` answers whether it fits once those units are gone.
pub fn select_victims<E>(
    mut units: Vec<Unit>,
    budgets: &[Budget],
    mut fits: impl FnMut(&[&Unit]) -> Result<(), E>,
) -> Result<Victims, NotCandidate<E>> {
    if units.is_empty() {
        return Err(NotCandidate::NoVictims);
    }
    units.sort_by(unit_order);
    let mut removed: BTreeSet<usize> = (0..units.len()).collect();
    let mut fits_without = |removed: &BTreeSet<usize>| {
        let gone: Vec<&Unit> = removed.iter().map(|&i| &units[i]).collect();
        fits(&gone)
    };
    fits_without(&removed).map_err(NotCandidate::StillUnfit)?;
    let (violating, fine) = split_by_budgets(&units, budgets);
    let mut victims = BTreeSet::new();
    let mut budget_violations = 0;
    let mut reprieve = |i: usize, protected: bool| {
        removed.remove(&i);
        if fits_without(&removed).is_err() {
            removed.insert(i);
            victims.insert(i);
            budget_violations += usize::from(protected);
        }
    };
    for i in violating {
        reprieve(i, true);
    }
    for i in fine {
        reprieve(i, false);
    }
    let units = units
        .into_iter()
        .enumerate()
        .filter(|(i, _)| victims.contains(i))
        .map(|(_, u)| u)
        .collect();
    Ok(Victims {
        units,
        budget_violations,
    })
}

/// Kubernetes' `pickOneNodeForPreemption` over `(node, victims)` candidates:
/// the index of the node that loses least.
pub fn pick_candidate(candidates: &[(String, Victims)]) -> Option<usize> {
    if let Some(i) = candidates.iter().position(|(_, v)| v.units.is_empty()) {
        return Some(i);
    }
    let mut best: Vec<usize> = (0..candidates.len()).collect();
    // Each criterion keeps only the candidates with its lowest score.
    let mut keep_lowest = |score: &dyn Fn(&Victims) -> i128| {
        let low = best
            .iter()
            .map(|&i| score(&candidates[i].1))
            .min()
            .unwrap_or(0);
        best.retain(|&i| score(&candidates[i].1) == low);
    };
    keep_lowest(&|v| v.budget_violations as i128);
    keep_lowest(&|v| v.pods().map(|(p, _)| priority(p)).max().unwrap_or(0) as i128);
    // Priorities offset to be positive, so fewer victims weigh less.
    keep_lowest(&|v| {
        v.pods()
            .map(|(p, _)| priority(p) as i128 + i32::MAX as i128 + 1)
            .sum()
    });
    keep_lowest(&|v| v.pods().count() as i128);
    // The latest start among each node's most important victims: their work
    // is the youngest, so the least is lost.
    let youngest = best.iter().copied().max_by(|&a, &b| {
        let earliest = |v: &Victims| {
            let top = v.pods().map(|(p, _)| priority(p)).max();
            v.pods()
                .filter(|(p, _)| Some(priority(p)) == top)
                .filter_map(|(p, _)| start_time(p).map(|t| t.0))
                .min()
        };
        // Ties keep the earlier candidate.
        earliest(&candidates[a].1)
            .cmp(&earliest(&candidates[b].1))
            .then(b.cmp(&a))
    });
    youngest
}

/// Whether a node failed for a reason that removing pods can fix.
pub fn resolvable(reason: &Unfit) -> bool {
    matches!(
        reason,
        Unfit::Insufficient(_)
            | Unfit::PodAntiAffinity
            | Unfit::ExistingAntiAffinity
            | Unfit::Spread
    )
}

/// The words Kubernetes gives a node that is no candidate.
pub fn not_candidate_message(why: &NotCandidate<Unfit>) -> String {
    match why {
        NotCandidate::NotHelpful => "Preemption is not helpful for scheduling".into(),
        NotCandidate::NoVictims => "No preemption victims found for incoming pod".into(),
        NotCandidate::StillUnfit(u) => u.message(),
    }
}

/// `preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.`
pub fn failure_message(total: usize, why: &[NotCandidate<Unfit>]) -> String {
    let text = crate::filters::nodes_message(total, why.iter().map(not_candidate_message));
    format!("preemption: {text}")
}

/// Why the pod may not preempt at all (Kubernetes' `PodEligibleToPreemptOthers`).
pub fn ineligible(pod: &Pod, victims_still_terminating: bool) -> Option<&'static str> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref());
    if policy == Some("Never") {
        return Some("not eligible due to preemptionPolicy=Never.");
    }
    victims_still_terminating
        .then_some("not eligible due to a terminating pod on the nominated node.")
}

#[cfg(test)]
mod tests;
