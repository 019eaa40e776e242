//! The Deployment controller's arithmetic, as pure functions of what it
//! observes (Kubernetes' `pkg/controller/deployment/util` and the rolling,
//! recreate and scaling steps): how far a rollout may surge and how much it
//! may leave unavailable, how many pods the new ReplicaSet gets next, which
//! old ReplicaSets shrink and by how much, proportional scaling during a
//! rollout, and the status with its Available and Progressing conditions.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

/// What the controller needs to know about one of its ReplicaSets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsView {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.replicas`, `readyReplicas`, `availableReplicas`.
    pub status_replicas: i32,
    pub ready: i32,
    pub available: i32,
    /// Its `deployment.kubernetes.io/max-replicas` annotation.
    pub max_replicas: Option<i32>,
}

/// An int-or-percent of `total`: Kubernetes rounds surge up and
/// unavailability down. A malformed value counts as 0 (validation refuses it).
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    match v {
        None => 0,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let Some(p) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let scaled = p * total as i64;
            let v = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            v as i32
        }
    }
}

/// (max surge, max unavailable) for `replicas` (Kubernetes' ResolveFenceposts):
/// both zero would make no progress, so unavailability becomes 1.
pub fn fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    replicas: i32,
) -> (i32, i32) {
    let surge = scaled_value(max_surge, replicas, true);
    let unavailable = scaled_value(max_unavailable, replicas, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable.min(replicas.max(0)))
    }
}

fn total(rss: &[&RsView], f: impl Fn(&RsView) -> i32) -> i32 {
    rss.iter().map(|r| f(r)).sum()
}

/// Available pods of `rs` that it keeps: a ReplicaSet just scaled down still
/// reports the pods it is removing until its controller catches up, and
/// counting those would let the next step remove them twice.
fn kept_available(rs: &RsView) -> i32 {
    rs.available.min(rs.replicas)
}

/// The new ReplicaSet's next size in a rolling update: up to `replicas +
/// surge` pods in all, never more than `replicas` in the new one.
pub fn new_rs_replicas(replicas: i32, surge: i32, new: &RsView, all: &[&RsView]) -> i32 {
    if new.replicas >= replicas {
        return replicas;
    }
    let current = total(all, |r| r.replicas);
    let max_total = replicas + surge;
    if current >= max_total {
        return new.replicas;
    }
    let up = (max_total - current).min(replicas - new.replicas);
    new.replicas + up
}

/// How far the old ReplicaSets shrink in one rolling step, oldest first:
/// first their unavailable pods, then available ones as long as `replicas -
/// unavailable` stay available. Returns (name, new size) for each change.
pub fn scale_down_old(
    replicas: i32,
    max_unavailable: i32,
    new: &RsView,
    old: &[&RsView],
) -> Vec<(String, i32)> {
    let old_pods: i32 = total(old, |r| r.replicas);
    if old_pods == 0 {
        return Vec::new();
    }
    let mut all: Vec<&RsView> = old.to_vec();
    all.push(new);
    let all_pods = total(&all, |r| r.replicas);
    let min_available = replicas - max_unavailable;
    let new_unavailable = new.replicas - kept_available(new);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut sizes: Vec<i32> = old.iter().map(|r| r.replicas).collect();
    // Unhealthy pods go first: removing them costs no availability.
    let mut scaled = 0;
    for (i, rs) in old.iter().enumerate() {
        if scaled >= max_scaled_down {
            break;
        }
        let unhealthy = sizes[i] - kept_available(rs);
        if sizes[i] == 0 || unhealthy <= 0 {
            continue;
        }
        let down = (max_scaled_down - scaled).min(unhealthy);
        sizes[i] -= down;
        scaled += down;
    }
    // Then available ones, down to the minimum availability.
    let available = total(&all, kept_available);
    if available > min_available {
        let budget = available - min_available;
        let mut done = 0;
        for size in sizes.iter_mut() {
            if done >= budget {
                break;
            }
            if *size == 0 {
                continue;
            }
            let down = (*size).min(budget - done);
            *size -= down;
            done += down;
        }
    }
    old.iter()
        .zip(sizes)
        .filter(|(rs, size)| rs.replicas != *size)
        .map(|(rs, size)| (rs.name.clone(), size))
        .collect()
}

/// How much `rs` grows or shrinks when the deployment is scaled during a
/// rollout (Kubernetes' getProportion): its share of the new allowed size,
/// bounded by what is still to add or remove.
fn proportion(
    rs: &RsView,
    replicas: i32,
    surge: i32,
    status_replicas: i32,
    to_add: i32,
    added: i32,
) -> i32 {
    if rs.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if replicas == 0 {
        -rs.replicas
    } else {
        let allowed = replicas + surge;
        let annotated = rs.max_replicas.unwrap_or(status_replicas).max(1);
        let size = (rs.replicas as f64 * allowed as f64 / annotated as f64).round() as i32;
        size - rs.replicas
    };
    let left = to_add - added;
    if to_add > 0 {
        fraction.min(left)
    } else {
        fraction.max(left)
    }
}

/// New sizes for the active ReplicaSets when the deployment's `replicas`
/// change in the middle of a rollout (proportional scaling). `active` is
/// ordered newest first; `status_replicas` is the deployment's
/// `status.replicas`. Returns every active ReplicaSet's new size.
pub fn proportional_sizes(
    replicas: i32,
    surge: i32,
    status_replicas: i32,
    active: &[&RsView],
) -> Vec<(String, i32)> {
    let allowed = if replicas > 0 { replicas + surge } else { 0 };
    let current = total(active, |r| r.replicas);
    let to_add = allowed - current;
    // Growing favours the largest (newest on ties), shrinking the largest (oldest on ties).
    let mut order: Vec<(usize, &RsView)> = active.iter().copied().enumerate().collect();
    order.sort_by(|(ia, a), (ib, b)| {
        b.replicas
            .cmp(&a.replicas)
            .then(if to_add >= 0 { ia.cmp(ib) } else { ib.cmp(ia) })
    });
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = order
        .iter()
        .map(|(_, rs)| {
            let p = proportion(rs, replicas, surge, status_replicas, to_add, added);
            added += p;
            (rs.name.clone(), rs.replicas + p)
        })
        .collect();
    if let Some(first) = sizes.first_mut() {
        first.1 = (first.1 + to_add - added).max(0);
    }
    sizes
}

/// The deployment's status counts from its ReplicaSets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    pub unavailable: i32,
}

pub fn counts(new: Option<&RsView>, all: &[&RsView]) -> Counts {
    let available = total(all, |r| r.available);
    Counts {
        replicas: total(all, |r| r.status_replicas),
        updated: new.map_or(0, |n| n.status_replicas),
        ready: total(all, |r| r.ready),
        available,
        unavailable: (total(all, |r| r.replicas) - available).max(0),
    }
}

/// A condition as status shows it; `since`/`now` are RFC 3339 times.
pub fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastUpdateTime": now, "lastTransitionTime": now})
}

/// Kubernetes' SetDeploymentCondition: the same status and reason change
/// nothing; the same status keeps its transition time.
pub fn set_condition(conditions: &mut Vec<Value>, new: Value) {
    let type_ = new["type"].clone();
    if let Some(i) = conditions.iter().position(|c| c["type"] == type_) {
        let old = &conditions[i];
        if old["status"] == new["status"] && old["reason"] == new["reason"] {
            return;
        }
        let mut new = new;
        if old["status"] == new["status"] {
            new["lastTransitionTime"] = old["lastTransitionTime"].clone();
        }
        conditions[i] = new;
    } else {
        conditions.push(new);
    }
}

/// The Available condition: at least `replicas - max_unavailable` available.
pub fn available_condition(c: &Counts, replicas: i32, max_unavailable: i32, now: &str) -> Value {
    if c.available >= replicas - max_unavailable {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            now,
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            now,
        )
    }
}

/// Every pod is new, there are no others, and all are available.
pub fn complete(c: &Counts, replicas: i32) -> bool {
    c.updated == replicas && c.replicas == replicas && c.available == replicas
}

/// More new pods, fewer old ones, or more ready or available ones than before.
pub fn progressing(old: &Counts, new: &Counts) -> bool {
    new.updated > old.updated
        || (new.replicas - new.updated) < (old.replicas - old.updated)
        || new.ready > old.ready
        || new.available > old.available
}

#[cfg(test)]
mod tests;
