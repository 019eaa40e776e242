//! The HorizontalPodAutoscaler's pure core: replicas per metric (with
//! Kubernetes' missing-pod and not-ready rules), the behavior policies and
//! stabilization windows ([`Recommender`]), and the decision ([`decide`]).

use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler};
use std::collections::HashMap;
use std::time::Duration;

/// The controller's flags (kube-controller-manager's names and defaults).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub sync_period: Duration,
    /// Used when an HPA has no `behavior` (with a behavior, its scaleDown window rules).
    pub downscale_stabilization: Duration,
    pub tolerance: f64,
    pub cpu_initialization_period: Duration,
    pub initial_readiness_delay: Duration,
}

/// How far the usage ratio may stray from 1 before the replicas change:
/// below it by `down`, above it by `up`. An HPA's
/// `behavior.scaleDown.tolerance` and `behavior.scaleUp.tolerance` (beta,
/// HPAConfigurableTolerance) set them; otherwise both are the controller's
/// `--horizontal-pod-autoscaler-tolerance`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub down: f64,
    pub up: f64,
}

impl Tolerance {
    pub fn uniform(t: f64) -> Tolerance {
        Tolerance { down: t, up: t }
    }

    /// The HPA's own tolerances, each direction defaulting to `default`.
    pub fn of(hpa: &HorizontalPodAutoscaler, default: f64) -> Tolerance {
        let behavior = hpa.spec.behavior.as_ref();
        let read = |rules: Option<&HPAScalingRules>| {
            rules
                .and_then(|r| r.tolerance.as_ref())
                .and_then(|q| minik8s_api::quantity::Quantity::parse(&q.0).ok())
                .map_or(default, |q| q.millis() as f64 / 1000.0)
        };
        Tolerance {
            down: read(behavior.and_then(|b| b.scale_down.as_ref())),
            up: read(behavior.and_then(|b| b.scale_up.as_ref())),
        }
    }

    /// Whether `ratio` is close enough to 1 to keep the replicas.
    pub fn within(self, ratio: f64) -> bool {
        1.0 - self.down <= ratio && ratio <= 1.0 + self.up
    }
}

/// What a metric targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Percent of the pods' requests.
    Utilization(i64),
    /// Milli-units per pod (millicores, or bytes × 1000 for memory).
    AverageValue(i64),
}

/// One pod as the replica calculation sees it (usage and request in milli-units).
#[derive(Debug, Clone)]
pub struct PodSample {
    pub name: String,
    pub phase: String,
    pub deleting: bool,
    /// Ready condition: (status, lastTransitionTime).
    pub ready: Option<(String, DateTime<Utc>)>,
    pub start_time: Option<DateTime<Utc>>,
    /// Sum of the containers' requests; None if a container has none.
    pub request: Option<i64>,
    /// Usage and the sample's timestamp; None if metrics.k8s.io has none.
    pub usage: Option<(i64, DateTime<Utc>)>,
}

/// The outcome for one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub replicas: i32,
    /// Current utilization in percent (Utilization targets).
    pub utilization: Option<i64>,
    /// Average usage per pod, milli-units.
    pub average: i64,
}

/// Timing inputs of the pod grouping (CPU samples from starting pods are distrusted).
#[derive(Debug, Clone, Copy)]
pub struct Grouping {
    pub cpu: bool,
    pub now: DateTime<Utc>,
    pub window: Duration,
    pub cpu_initialization_period: Duration,
    pub initial_readiness_delay: Duration,
}

pub(super) fn chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The pods of a metric as Kubernetes' groupPods sorts them.
struct Grouped<'a> {
    /// Usage of the ready pods with a sample.
    metrics: HashMap<&'a str, i64>,
    ready_count: usize,
    unready: Vec<&'a PodSample>,
    /// Pods without a sample.
    missing: Vec<&'a PodSample>,
}

/// Ready pods with metrics, unready, missing (no sample); deleted and
/// failed pods are ignored.
fn group_pods<'a>(pods: &'a [PodSample], g: &Grouping) -> Grouped<'a> {
    let mut grouped = Grouped {
        metrics: HashMap::new(),
        ready_count: 0,
        unready: Vec::new(),
        missing: Vec::new(),
    };
    for p in pods {
        if p.deleting || p.phase == "Failed" {
            continue;
        }
        if p.phase == "Pending" {
            grouped.unready.push(p);
            continue;
        }
        let Some((usage, sampled)) = p.usage else {
            grouped.missing.push(p);
            continue;
        };
        if g.cpu {
            let is_unready = match (&p.ready, p.start_time) {
                (Some((status, transition)), Some(start)) => {
                    if start + chrono(g.cpu_initialization_period) > g.now {
                        // Starting up: distrust the sample unless the pod is ready and
                        // a whole metric window passed since it became so.
                        status == "False" || sampled < *transition + chrono(g.window)
                    } else {
                        // Unready and never been ready since start.
                        status == "False" && start + chrono(g.initial_readiness_delay) > *transition
                    }
                }
                _ => true,
            };
            if is_unready {
                grouped.unready.push(p);
                continue;
            }
        }
        grouped.metrics.insert(&p.name, usage);
        grouped.ready_count += 1;
    }
    grouped
}

/// The resource request of pod `name` (cpu, else memory).
fn request_of(pods: &[PodSample], name: &str, cpu: bool) -> Result<i64, String> {
    pods.iter()
        .find(|p| p.name == name)
        .and_then(|p| p.request)
        .ok_or_else(|| {
            format!(
                "missing request for {} in pod {name}",
                if cpu { "cpu" } else { "memory" }
            )
        })
}

/// The usage ratio of `metrics` to the target, with the current
/// utilization (a Utilization target) and the average it reports.
fn usage_ratio(
    pods: &[PodSample],
    metrics: &HashMap<&str, i64>,
    target: Target,
    cpu: bool,
) -> Result<(f64, Option<i64>, i64), String> {
    let total: i64 = metrics.values().sum();
    let average = total / metrics.len() as i64;
    match target {
        Target::Utilization(t) => {
            let mut requests = 0i64;
            for name in metrics.keys() {
                requests += request_of(pods, name, cpu)?;
            }
            if requests <= 0 {
                return Err("pods have no resource requests".into());
            }
            let utilization = total * 100 / requests;
            Ok((
                utilization as f64 / t.max(1) as f64,
                Some(utilization),
                average,
            ))
        }
        Target::AverageValue(v) => Ok((average as f64 / v.max(1) as f64, None, average)),
    }
}

/// Kubernetes' replica calculator for one Resource metric (pure).
pub fn replicas_for_metric(
    pods: &[PodSample],
    current: i32,
    target: Target,
    tolerance: Tolerance,
    g: Grouping,
) -> Result<Proposal, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let Grouped {
        mut metrics,
        ready_count,
        unready,
        missing,
    } = group_pods(pods, &g);
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let request = |name: &str| request_of(pods, name, g.cpu);
    let ratio_of = |m: &HashMap<&str, i64>| usage_ratio(pods, m, target, g.cpu);
    let (ratio, utilization, average) = ratio_of(&metrics)?;
    let proposal = |replicas: i32| Proposal {
        replicas,
        utilization,
        average,
    };
    let scale_up_with_unready = !unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && missing.is_empty() {
        if tolerance.within(ratio) {
            return Ok(proposal(current));
        }
        return Ok(proposal((ratio * ready_count as f64).ceil() as i32));
    }
    // Fill in the pods without a trustworthy sample, pessimistically for the direction.
    if ratio < 1.0 {
        for p in &missing {
            let fill = match target {
                Target::Utilization(t) => request(&p.name)? * t.max(100) / 100,
                Target::AverageValue(v) => v,
            };
            metrics.insert(&p.name, fill);
        }
    } else if ratio > 1.0 {
        for p in &missing {
            metrics.insert(&p.name, 0);
        }
    }
    if scale_up_with_unready {
        for p in &unready {
            metrics.insert(&p.name, 0);
        }
    }
    let (new_ratio, _, _) = ratio_of(&metrics)?;
    if tolerance.within(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(proposal(current));
    }
    let replicas = (new_ratio * metrics.len() as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(proposal(current));
    }
    Ok(proposal(replicas))
}

/// A condition as the status shows it: (type, status, reason, message).
pub type Condition = (&'static str, &'static str, &'static str, &'static str);

/// One HPA's memory between syncs: recent recommendations and scale events.
#[derive(Debug, Clone, Default)]
pub struct Recommender {
    recommendations: Vec<(DateTime<Utc>, i32)>,
    up_events: Vec<(DateTime<Utc>, i32)>,
    down_events: Vec<(DateTime<Utc>, i32)>,
}

/// The scaling rules with the defaults filled in (the apiserver fills them too).
pub(super) fn rules_window(r: &HPAScalingRules) -> i64 {
    r.stabilization_window_seconds.unwrap_or(0) as i64
}

impl Recommender {
    /// Without `behavior`: the highest recommendation of the downscale window,
    /// then at most max(2 × current, 4), within [min, max].
    pub fn normalize(
        &mut self,
        now: DateTime<Utc>,
        current: i32,
        desired: i32,
        (min, max): (i32, i32),
        downscale_window: Duration,
    ) -> (i32, Vec<Condition>) {
        let cutoff = now - chrono(downscale_window);
        let stabilized = self
            .recommendations
            .iter()
            .filter(|(t, _)| *t > cutoff)
            .map(|(_, r)| *r)
            .fold(desired, i32::max);
        self.record(now, desired, cutoff);
        let mut conds = vec![if stabilized != desired {
            ("AbleToScale", "True", "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
        } else {
            (
                "AbleToScale",
                "True",
                "ReadyForNewScale",
                "recommended size matches current size",
            )
        }];
        let scale_up_limit = (2 * current).max(4);
        let (max_allowed, reason, message) = upper_bound(scale_up_limit, max);
        let (out, reason, message) = if stabilized < min {
            lower_bound(min, min)
        } else if stabilized > max_allowed {
            (max_allowed, reason, message)
        } else {
            (
                stabilized,
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        };
        conds.push((
            "ScalingLimited",
            if out == stabilized { "False" } else { "True" },
            reason,
            message,
        ));
        (out, conds)
    }

    /// With `behavior`: stabilization windows per direction, then the rate
    /// policies (selectPolicy Max/Min/Disabled) over their periods, within [min, max].
    pub fn normalize_with_behavior(
        &mut self,
        now: DateTime<Utc>,
        current: i32,
        desired: i32,
        (min, max): (i32, i32),
        up: &HPAScalingRules,
        down: &HPAScalingRules,
    ) -> (i32, Vec<Condition>) {
        let up_cutoff = now - chrono::Duration::seconds(rules_window(up));
        let down_cutoff = now - chrono::Duration::seconds(rules_window(down));
        let (mut up_rec, mut down_rec) = (desired, desired);
        for (t, r) in &self.recommendations {
            if *t > up_cutoff {
                up_rec = up_rec.min(*r);
            }
            if *t > down_cutoff {
                down_rec = down_rec.max(*r);
            }
        }
        let stabilized = current.max(up_rec).min(down_rec);
        let longest = up_cutoff.min(down_cutoff);
        self.record(now, desired, longest);
        let mut conds = vec![if stabilized != desired {
            if stabilized > desired {
                ("AbleToScale", "True", "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
            } else {
                ("AbleToScale", "True", "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")
            }
        } else {
            (
                "AbleToScale",
                "True",
                "ReadyForNewScale",
                "recommended size matches current size",
            )
        }];
        let (mut out, mut reason, mut message) = (
            stabilized,
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        );
        if stabilized > current {
            let limit = scale_limit(now, current, &self.up_events, up, true).max(current);
            let (max_allowed, r, m) = upper_bound(limit, max);
            if stabilized > max_allowed {
                (out, reason, message) = (max_allowed, r, m);
            }
        } else if stabilized < current {
            let limit = scale_limit(now, current, &self.down_events, down, false).min(current);
            let (min_allowed, r, m) = lower_bound(limit, min);
            if stabilized < min_allowed {
                (out, reason, message) = (min_allowed, r, m);
            }
        }
        conds.push((
            "ScalingLimited",
            if out == stabilized { "False" } else { "True" },
            reason,
            message,
        ));
        (out, conds)
    }

    /// Keeps the recommendations still inside the longest window, plus this one.
    fn record(&mut self, now: DateTime<Utc>, desired: i32, cutoff: DateTime<Utc>) {
        self.recommendations.retain(|(t, _)| *t > cutoff);
        self.recommendations.push((now, desired));
    }

    /// Remembers a rescale for the rate policies.
    pub fn scaled(&mut self, now: DateTime<Utc>, from: i32, to: i32) {
        let keep = now - chrono::Duration::hours(1);
        self.up_events.retain(|(t, _)| *t > keep);
        self.down_events.retain(|(t, _)| *t > keep);
        if to > from {
            self.up_events.push((now, to - from));
        } else if to < from {
            self.down_events.push((now, from - to));
        }
    }
}

/// The highest count allowed going up: the rate `limit` unless maxReplicas is
/// lower, with the ScalingLimited reason and message Kubernetes gives for each.
pub(super) fn upper_bound(limit: i32, max: i32) -> (i32, &'static str, &'static str) {
    if max > limit {
        (
            limit,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    } else {
        (
            max,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    }
}

/// The lowest count allowed going down: the rate `limit` unless minReplicas is higher.
pub(super) fn lower_bound(limit: i32, min: i32) -> (i32, &'static str, &'static str) {
    if min < limit {
        (
            limit,
            "ScaleDownLimit",
            "the desired replica count is decreasing faster than the maximum scale rate",
        )
    } else {
        (
            min,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    }
}

/// The furthest the replicas may move in one direction under the policies
/// (calculateScaleUpLimitWithScalingRules / calculateScaleDownLimitWithBehaviors).
pub(super) fn scale_limit(
    now: DateTime<Utc>,
    current: i32,
    events: &[(DateTime<Utc>, i32)],
    rules: &HPAScalingRules,
    up: bool,
) -> i32 {
    let select = rules.select_policy.as_deref().unwrap_or("Max");
    if select == "Disabled" {
        return current;
    }
    // Max picks the policy allowing the biggest change: for scale-down that is the lowest count.
    let biggest_change = select != "Min";
    let pick = |a: i32, b: i32| {
        if biggest_change == up {
            a.max(b)
        } else {
            a.min(b)
        }
    };
    let mut result: Option<i32> = None;
    for p in rules.policies.iter().flatten() {
        let since = now - chrono::Duration::seconds(p.period_seconds as i64);
        let changed: i32 = events
            .iter()
            .filter(|(t, _)| *t > since)
            .map(|(_, n)| n)
            .sum();
        let proposed = if up {
            let start = current - changed;
            match p.type_.as_str() {
                "Pods" => start + p.value,
                _ => (start as f64 * (1.0 + p.value as f64 / 100.0)).ceil() as i32,
            }
        } else {
            let start = current + changed;
            match p.type_.as_str() {
                "Pods" => start - p.value,
                _ => (start as f64 * (1.0 - p.value as f64 / 100.0)) as i32,
            }
        };
        result = Some(result.map_or(proposed, |r| pick(r, proposed)));
    }
    result.unwrap_or(current)
}

/// The metric whose proposal wins: the highest, the first one on ties (as Kubernetes).
pub(super) fn decisive(proposals: &[(String, i32)]) -> Option<&(String, i32)> {
    proposals
        .iter()
        .fold(None, |best: Option<&(String, i32)>, p| match best {
            Some(b) if b.1 >= p.1 => Some(b),
            _ => Some(p),
        })
}

/// What one sync decided (pure: from the HPA, the current replicas and the proposals).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub desired: i32,
    pub reason: String,
    pub conditions: Vec<Condition>,
}

/// Combines the metric proposals into the next replica count (Kubernetes'
/// reconcileAutoscaler after computeReplicasForMetrics).
pub fn decide(
    rec: &mut Recommender,
    hpa: &HorizontalPodAutoscaler,
    current: i32,
    proposals: &[(String, i32)],
    now: DateTime<Utc>,
    downscale_window: Duration,
) -> Decision {
    let spec = hpa.spec.clone();
    let (min, max) = (spec.min_replicas.unwrap_or(1), spec.max_replicas);
    if current == 0 && min != 0 {
        return Decision {
            desired: 0,
            reason: String::new(),
            conditions: vec![(
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            )],
        };
    }
    if current > max {
        return Decision {
            desired: max,
            reason: "Current number of replicas above Spec.MaxReplicas".into(),
            conditions: vec![],
        };
    }
    if current < min {
        return Decision {
            desired: min,
            reason: "Current number of replicas below Spec.MinReplicas".into(),
            conditions: vec![],
        };
    }
    let (metric, proposed) = decisive(proposals).cloned().unwrap_or_default();
    let reason = if proposed > current {
        format!("{metric} above target")
    } else if proposed < current {
        "All metrics below target".to_string()
    } else {
        String::new()
    };
    let (desired, conditions) = match &spec.behavior {
        None => rec.normalize(now, current, proposed, (min, max), downscale_window),
        Some(b) => rec.normalize_with_behavior(
            now,
            current,
            proposed,
            (min, max),
            &b.scale_up.clone().unwrap_or_default(),
            &b.scale_down.clone().unwrap_or_default(),
        ),
    };
    Decision {
        desired,
        reason,
        conditions,
    }
}
