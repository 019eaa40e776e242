//! The HorizontalPodAutoscaler (autoscaling/v2) with Kubernetes' algorithm:
//!
//! ```text
//!  every --horizontal-pod-autoscaler-sync-period (15 s), per HPA:
//!   GET <target>/scale ──▶ current replicas, pod selector
//!   metrics.k8s.io pods + the pods ──▶ per metric: ratio = usage / target
//!        |1 - ratio| <= tolerance (0.1) → keep;  else ceil(ratio × ready pods)
//!        (missing pods count as 100 % when scaling down, 0 when scaling up;
//!         unready pods as 0 when scaling up)
//!   max over metrics ──▶ stabilization window ──▶ rate policies ──▶ [min, max]
//!   PATCH <target>/scale, status, SuccessfulRescale event
//! ```
//!
//! The decisions ([`replicas_for_metric`], [`Recommender`]) are pure and take
//! the time as an argument, so the unit tables below replay Kubernetes' cases.

use crate::lock;
use crate::reconciler::{Action, Controller, Reconciler};
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler};
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::quantity::Quantity;
use minik8s_api::registry::{self, Subresource};
use minik8s_api::selector::Selector;
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

fn chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Kubernetes' replica calculator for one Resource metric (pure).
pub fn replicas_for_metric(
    pods: &[PodSample],
    current: i32,
    target: Target,
    tolerance: f64,
    g: Grouping,
) -> Result<Proposal, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    // groupPods: ready pods with metrics, unready, missing (no sample), ignored.
    let mut metrics: HashMap<&str, i64> = HashMap::new();
    let (mut ready_count, mut unready, mut missing) = (0usize, Vec::new(), Vec::new());
    for p in pods {
        if p.deleting || p.phase == "Failed" {
            continue;
        }
        if p.phase == "Pending" {
            unready.push(p);
            continue;
        }
        let Some((usage, sampled)) = p.usage else {
            missing.push(p);
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
                unready.push(p);
                continue;
            }
        }
        metrics.insert(&p.name, usage);
        ready_count += 1;
    }
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let request = |name: &str| -> Result<i64, String> {
        pods.iter()
            .find(|p| p.name == name)
            .and_then(|p| p.request)
            .ok_or_else(|| {
                format!(
                    "missing request for {} in pod {name}",
                    if g.cpu { "cpu" } else { "memory" }
                )
            })
    };
    // The usage ratio (and the current utilization / average it reports).
    let ratio_of = |m: &HashMap<&str, i64>| -> Result<(f64, Option<i64>, i64), String> {
        let total: i64 = m.values().sum();
        let average = total / m.len() as i64;
        match target {
            Target::Utilization(t) => {
                let mut requests = 0i64;
                for name in m.keys() {
                    requests += request(name)?;
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
    };
    let (ratio, utilization, average) = ratio_of(&metrics)?;
    let proposal = |replicas: i32| Proposal {
        replicas,
        utilization,
        average,
    };
    let scale_up_with_unready = !unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && missing.is_empty() {
        if (1.0 - ratio).abs() <= tolerance {
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
    if (1.0 - new_ratio).abs() <= tolerance
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
fn rules_window(r: &HPAScalingRules) -> i64 {
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
fn upper_bound(limit: i32, max: i32) -> (i32, &'static str, &'static str) {
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
fn lower_bound(limit: i32, min: i32) -> (i32, &'static str, &'static str) {
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
fn scale_limit(
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
fn decisive(proposals: &[(String, i32)]) -> Option<&(String, i32)> {
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
    let spec = hpa.spec.clone().unwrap_or_default();
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

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct HpaController {
    client: Client,
    hpas: Cache<HorizontalPodAutoscaler>,
    pods: Cache<Pod>,
    settings: Settings,
    state: Mutex<HashMap<String, Recommender>>,
}

/// One metric of the spec: (resource name, target, the name events use).
fn metric_specs(hpa: &HorizontalPodAutoscaler) -> Result<Vec<(String, Target, String)>, String> {
    let mut out = Vec::new();
    for m in hpa.spec.iter().flat_map(|s| s.metrics.iter().flatten()) {
        let Some(r) = m.resource.as_ref().filter(|_| m.type_ == "Resource") else {
            return Err(format!(
                "metric type {:?} is not supported (only Resource)",
                m.type_
            ));
        };
        let target = match (
            r.target.type_.as_str(),
            r.target.average_utilization,
            &r.target.average_value,
        ) {
            ("Utilization", Some(u), _) => Target::Utilization(u as i64),
            ("AverageValue", _, Some(v)) => {
                Target::AverageValue(Quantity::parse(&v.0).map_err(|e| e.to_string())?.millis())
            }
            (t, _, _) => return Err(format!("invalid {} target {t:?}", r.name)),
        };
        let label = match target {
            Target::Utilization(_) => {
                format!("{} resource utilization (percentage of request)", r.name)
            }
            Target::AverageValue(_) => format!("{} resource", r.name),
        };
        out.push((r.name.clone(), target, label));
    }
    Ok(out)
}

fn pod_sample(pod: &Pod, resource: &str, usage: Option<(i64, DateTime<Utc>)>) -> PodSample {
    let status = pod.status.clone().unwrap_or_default();
    let request = pod.spec.as_ref().and_then(|s| {
        s.containers
            .iter()
            .map(|c| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get(resource))
                    .and_then(|q| Quantity::parse(&q.0).ok())
                    .map(Quantity::millis)
            })
            .sum::<Option<i64>>()
    });
    PodSample {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase: status.phase.clone().unwrap_or_default(),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        ready: status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| {
                (
                    c.status.clone(),
                    c.last_transition_time
                        .as_ref()
                        .map_or(DateTime::<Utc>::MIN_UTC, |t| t.0),
                )
            }),
        start_time: status.start_time.map(|t| t.0),
        request,
        usage,
    }
}

impl HpaController {
    /// Builds the controller on the shared informers (HPAs and Pods); each
    /// HPA is synced again every `settings.sync_period`.
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        settings: Settings,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(HpaController {
            client,
            hpas: informers.cache(),
            pods: informers.cache(),
            settings,
            state: Mutex::default(),
        });
        Controller::new(ctl, WorkQueue::new()).for_own::<HorizontalPodAutoscaler>(informers)
    }

    /// Pod name → (usage in milli-units, sample time) from metrics.k8s.io.
    async fn pod_usage(
        &self,
        ns: &str,
        selector: &str,
        resource: &str,
    ) -> Result<HashMap<String, (i64, DateTime<Utc>)>, ClientError> {
        let path = format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods?labelSelector={}",
            selector
                .replace('%', "%25")
                .replace(' ', "%20")
                .replace('=', "%3D")
                .replace(',', "%2C")
                .replace('!', "%21")
        );
        let list = self.client.get_json(&path).await?;
        let mut out = HashMap::new();
        for pm in list["items"].as_array().into_iter().flatten() {
            let total: i64 = pm["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["usage"][resource].as_str())
                .filter_map(|q| Quantity::parse(q).ok())
                .map(Quantity::millis)
                .sum();
            let at = pm["timestamp"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
            out.insert(
                pm["metadata"]["name"].as_str().unwrap_or("").to_string(),
                (total, at),
            );
        }
        Ok(out)
    }

    /// One sync of one HPA; the next one follows after the sync period.
    async fn sync(&self, key: &str) -> Result<Action, ClientError> {
        let next = Action::RequeueAfter(self.settings.sync_period);
        let Some(hpa) = self.hpas.get(key) else {
            lock(&self.state).remove(key);
            return Ok(Action::Done);
        };
        let ns = hpa
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let spec = hpa.spec.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let api_version = target.api_version.clone().unwrap_or_default();
        let now = Utc::now();
        let hpa_api = self
            .client
            .dynamic(registry::of::<HorizontalPodAutoscaler>(), Some(&ns));
        let mut status =
            serde_json::to_value(hpa.status.clone().unwrap_or_default()).unwrap_or(json!({}));
        let write_status = |status: Value| {
            let api = hpa_api.clone();
            let name = name.clone();
            async move {
                match api
                    .patch(
                        &name,
                        Some("status"),
                        content::MERGE_PATCH,
                        &json!({"status": status}),
                    )
                    .await
                {
                    Err(e) if !e.is_not_found() => Err(e),
                    _ => Ok(()),
                }
            }
        };
        let Some(info) =
            registry::by_kind(&api_version, &target.kind).filter(|i| i.has(Subresource::Scale))
        else {
            set_conditions(
                &mut status,
                &[(
                    "AbleToScale",
                    "False",
                    "FailedGetScale",
                    "the HPA controller was unable to get the target's current scale",
                )],
                now,
            );
            self.event(
                &hpa,
                "Warning",
                "FailedGetScale",
                &format!("no scale subresource for {api_version} {}", target.kind),
            )
            .await;
            // Nothing to scale until the HPA itself changes.
            return write_status(status).await.map(|()| Action::Done);
        };
        let target_api = self.client.dynamic(info, Some(&ns));
        let scale = match target_api.get_sub(&target.name, "scale").await {
            Ok(s) => s,
            Err(e) => {
                set_conditions(
                    &mut status,
                    &[(
                        "AbleToScale",
                        "False",
                        "FailedGetScale",
                        "the HPA controller was unable to get the target's current scale",
                    )],
                    now,
                );
                self.event(&hpa, "Warning", "FailedGetScale", &e.to_string())
                    .await;
                write_status(status).await?;
                return Ok(next);
            }
        };
        let current = scale["spec"]["replicas"].as_i64().unwrap_or(0) as i32;
        let selector = scale["status"]["selector"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut conditions: Vec<Condition> = vec![(
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )];
        let mut proposals = Vec::new();
        let mut current_metrics = Vec::new();
        let mut failure: Option<String> = None;
        let active = current != 0 || spec.min_replicas == Some(0);
        if active {
            match self.compute(&ns, &selector, current, &hpa, now).await {
                Ok((p, m)) => {
                    proposals = p;
                    current_metrics = m;
                }
                Err(e) => failure = Some(e),
            }
        }
        if let Some(msg) = &failure {
            set_conditions(
                &mut status,
                &[
                    (
                        "AbleToScale",
                        "True",
                        "SucceededGetScale",
                        "the HPA controller was able to get the target's current scale",
                    ),
                    (
                        "ScalingActive",
                        "False",
                        "FailedGetResourceMetric",
                        "the HPA was unable to compute the replica count",
                    ),
                ],
                now,
            );
            status["currentReplicas"] = json!(current);
            self.event(&hpa, "Warning", "FailedGetResourceMetric", msg)
                .await;
            tracing::debug!(hpa = key, error = %msg, "cannot compute replicas");
            write_status(status).await?;
            return Ok(next);
        }
        if active {
            // Kubernetes names the metric that decided (the first one on ties).
            let decided = decisive(&proposals).map_or("", |(l, _)| l.as_str());
            let message = match decided {
                "memory resource utilization (percentage of request)" => "the HPA was able to successfully calculate a replica count from memory resource utilization (percentage of request)",
                "memory resource" => "the HPA was able to successfully calculate a replica count from memory resource",
                "cpu resource" => "the HPA was able to successfully calculate a replica count from cpu resource",
                _ => "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)",
            };
            conditions.push(("ScalingActive", "True", "ValidMetricFound", message));
        }
        let decision = {
            let mut state = lock(&self.state);
            let rec = state.entry(key.to_string()).or_default();
            decide(
                rec,
                &hpa,
                current,
                &proposals,
                now,
                self.settings.downscale_stabilization,
            )
        };
        conditions.extend(decision.conditions.iter().cloned());
        let rescale = active && decision.desired != current;
        if rescale {
            match target_api
                .patch(
                    &target.name,
                    Some("scale"),
                    content::MERGE_PATCH,
                    &json!({"spec": {"replicas": decision.desired}}),
                )
                .await
            {
                Ok(_) => {
                    lock(&self.state)
                        .entry(key.to_string())
                        .or_default()
                        .scaled(now, current, decision.desired);
                    let msg = format!(
                        "New size: {}; reason: {}",
                        decision.desired, decision.reason
                    );
                    tracing::info!(hpa = key, from = current, to = decision.desired, reason = %decision.reason, "rescaled");
                    self.event(&hpa, "Normal", "SuccessfulRescale", &msg).await;
                    status["lastScaleTime"] = json!(minik8s_api::meta::now_rfc3339());
                }
                Err(e) => {
                    conditions.retain(|c| c.0 != "AbleToScale");
                    conditions.push((
                        "AbleToScale",
                        "False",
                        "FailedUpdateScale",
                        "the HPA controller was unable to update the target scale",
                    ));
                    self.event(&hpa, "Warning", "FailedRescale", &e.to_string())
                        .await;
                }
            }
        }
        set_conditions(&mut status, &conditions, now);
        status["currentReplicas"] = json!(current);
        status["desiredReplicas"] = json!(if active { decision.desired } else { 0 });
        status["currentMetrics"] = json!(current_metrics);
        status["observedGeneration"] = json!(hpa.metadata.generation);
        write_status(status).await?;
        Ok(next)
    }

    /// The proposal of every metric and the currentMetrics status entries.
    async fn compute(
        &self,
        ns: &str,
        selector: &str,
        current: i32,
        hpa: &HorizontalPodAutoscaler,
        now: DateTime<Utc>,
    ) -> Result<(Vec<(String, i32)>, Vec<Value>), String> {
        let sel =
            Selector::parse(selector).map_err(|e| format!("invalid selector {selector:?}: {e}"))?;
        if sel.is_empty() {
            return Err("the target's selector is empty".into());
        }
        let pods: Vec<Arc<Pod>> = self
            .pods
            .by_index(NAMESPACE_INDEX, ns)
            .into_iter()
            .filter(|p| sel.matches(&p.metadata.labels.clone().unwrap_or_default()))
            .collect();
        let mut proposals = Vec::new();
        let mut statuses = Vec::new();
        for (resource, target, label) in metric_specs(hpa)? {
            let usage = self
                .pod_usage(ns, selector, &resource)
                .await
                .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))?;
            let samples: Vec<PodSample> = pods
                .iter()
                .map(|p| {
                    pod_sample(
                        p,
                        &resource,
                        usage.get(p.metadata.name.as_deref().unwrap_or("")).copied(),
                    )
                })
                .collect();
            let g = Grouping {
                cpu: resource == "cpu",
                now,
                window: Duration::from_secs(10),
                cpu_initialization_period: self.settings.cpu_initialization_period,
                initial_readiness_delay: self.settings.initial_readiness_delay,
            };
            let p = replicas_for_metric(&samples, current, target, self.settings.tolerance, g)
                .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
            let average = if resource == "cpu" {
                format!("{}m", p.average)
            } else {
                (p.average / 1000).to_string()
            };
            let mut cur = json!({"averageValue": average});
            if let Some(u) = p.utilization {
                cur["averageUtilization"] = json!(u);
            }
            statuses
                .push(json!({"type": "Resource", "resource": {"name": resource, "current": cur}}));
            proposals.push((label, p.replicas));
        }
        Ok((proposals, statuses))
    }

    async fn event(&self, hpa: &HorizontalPodAutoscaler, type_: &str, reason: &str, message: &str) {
        let about = minik8s_client::events::Involved {
            api_version: "autoscaling/v2",
            kind: "HorizontalPodAutoscaler",
            meta: &hpa.metadata,
        };
        minik8s_client::events::record(
            &self.client,
            "horizontal-pod-autoscaler",
            about,
            type_,
            reason,
            message,
        )
        .await;
    }
}

impl Reconciler for HpaController {
    const NAME: &'static str = "horizontalpodautoscaler";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        self.sync(key).await
    }
}

/// Sets conditions by type, keeping lastTransitionTime when the status is unchanged.
fn set_conditions(status: &mut Value, conds: &[Condition], now: DateTime<Utc>) {
    let mut list: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    for (type_, st, reason, message) in conds {
        let t = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match list.iter_mut().find(|c| c["type"] == *type_) {
            Some(c) => {
                if c["status"] != *st {
                    c["lastTransitionTime"] = json!(t);
                }
                c["status"] = json!(st);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
            None => list.push(json!({"type": type_, "status": st, "reason": reason, "message": message, "lastTransitionTime": t})),
        }
    }
    status["conditions"] = json!(list);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    /// A running, long-ready pod using `usage` milli-units of a `request`.
    fn pod(name: &str, usage: Option<i64>, request: i64) -> PodSample {
        PodSample {
            name: name.into(),
            phase: "Running".into(),
            deleting: false,
            ready: Some(("True".into(), t(-3600))),
            start_time: Some(t(-3600)),
            request: Some(request),
            usage: usage.map(|u| (u, t(0))),
        }
    }

    fn grouping(cpu: bool) -> Grouping {
        Grouping {
            cpu,
            now: t(0),
            window: Duration::from_secs(10),
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }

    fn replicas(pods: &[PodSample], current: i32, target: Target) -> i32 {
        replicas_for_metric(pods, current, target, 0.1, grouping(true))
            .unwrap()
            .replicas
    }

    #[test]
    fn desired_replicas_math() {
        // 3 pods at 90 % of 100m against 50 %: ceil(3 × 1.8) = 6.
        let p: Vec<_> = (0..3)
            .map(|i| pod(&format!("p{i}"), Some(90), 100))
            .collect();
        assert_eq!(replicas(&p, 3, Target::Utilization(50)), 6);
        let r = replicas_for_metric(&p, 3, Target::Utilization(50), 0.1, grouping(true)).unwrap();
        assert_eq!((r.utilization, r.average), (Some(90), 90));
        // Within the tolerance (ratio 1.08): no change.
        let p: Vec<_> = (0..3)
            .map(|i| pod(&format!("p{i}"), Some(54), 100))
            .collect();
        assert_eq!(replicas(&p, 3, Target::Utilization(50)), 3);
        // Just outside (ratio 1.12): ceil(3 × 1.12) = 4.
        let p: Vec<_> = (0..3)
            .map(|i| pod(&format!("p{i}"), Some(56), 100))
            .collect();
        assert_eq!(replicas(&p, 3, Target::Utilization(50)), 4);
        // Scale down: 4 pods at 10 % against 50 %: ceil(4 × 0.2) = 1.
        let p: Vec<_> = (0..4)
            .map(|i| pod(&format!("p{i}"), Some(10), 100))
            .collect();
        assert_eq!(replicas(&p, 4, Target::Utilization(50)), 1);
        // AverageValue: 2 pods at 300m against 100m: ceil(2 × 3) = 6.
        let p: Vec<_> = (0..2)
            .map(|i| pod(&format!("p{i}"), Some(300), 100))
            .collect();
        assert_eq!(replicas(&p, 2, Target::AverageValue(100)), 6);
    }

    #[test]
    fn missing_and_unready_pods_are_pessimistic() {
        // Scale up: the missing pod counts as 0 → ratio (200+0)/(2×100)/0.5 = 2 → ceil(2 × 2) = 4.
        let p = vec![pod("a", Some(200), 100), pod("b", None, 100)];
        assert_eq!(replicas(&p, 2, Target::Utilization(50)), 4);
        // Scale down: the missing pod counts as using its request (100 %) → ratio
        // (10+100)/200/0.5 = 1.1 flips direction → keep 2.
        let p = vec![pod("a", Some(10), 100), pod("b", None, 100)];
        assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
        // An unready pod counts as 0 when scaling up.
        let mut starting = pod("b", Some(500), 100);
        starting.ready = Some(("False".into(), t(-5)));
        starting.start_time = Some(t(-20));
        let p = vec![pod("a", Some(100), 100), starting];
        // ratio of the ready pod: 2 → with b at 0: 100/200/0.5 = 1 → within tolerance → keep 2.
        assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
        // A pending pod is unready; a deleting or failed pod is ignored.
        let mut pending = pod("c", None, 100);
        pending.phase = "Pending".into();
        let mut deleting = pod("d", Some(1000), 100);
        deleting.deleting = true;
        let p = vec![pod("a", Some(50), 100), pending, deleting];
        assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
        // Missing requests are an error for Utilization.
        let mut no_request = pod("a", Some(50), 100);
        no_request.request = None;
        assert!(replicas_for_metric(
            &[no_request],
            1,
            Target::Utilization(50),
            0.1,
            grouping(true)
        )
        .is_err());
        assert!(replicas_for_metric(&[], 1, Target::Utilization(50), 0.1, grouping(true)).is_err());
    }

    #[test]
    fn cpu_samples_right_after_readiness_are_distrusted() {
        // Ready 5 s ago, sample taken now: less than one 10 s window → unready for cpu.
        let mut fresh = pod("a", Some(500), 100);
        fresh.start_time = Some(t(-30));
        fresh.ready = Some(("True".into(), t(-5)));
        assert!(replicas_for_metric(
            &[fresh.clone()],
            1,
            Target::Utilization(50),
            0.1,
            grouping(true)
        )
        .is_err());
        // Memory does not care.
        assert_eq!(
            replicas_for_metric(&[fresh], 1, Target::Utilization(50), 0.1, grouping(false))
                .unwrap()
                .replicas,
            10
        );
    }

    fn rules(window: i32, select: &str, policies: &[(&str, i32, i32)]) -> HPAScalingRules {
        HPAScalingRules {
            stabilization_window_seconds: Some(window),
            select_policy: Some(select.into()),
            policies: Some(
                policies
                    .iter()
                    .map(
                        |(ty, v, p)| k8s_openapi::api::autoscaling::v2::HPAScalingPolicy {
                            type_: ty.to_string(),
                            value: *v,
                            period_seconds: *p,
                        },
                    )
                    .collect(),
            ),
        }
    }

    fn default_up() -> HPAScalingRules {
        rules(0, "Max", &[("Pods", 4, 15), ("Percent", 100, 15)])
    }

    fn default_down(window: i32) -> HPAScalingRules {
        rules(window, "Max", &[("Percent", 100, 15)])
    }

    #[test]
    fn behavior_rate_policies() {
        let mut r = Recommender::default();
        // Max of (1 + 4 pods, 1 × 200 %) = 5.
        let (n, c) =
            r.normalize_with_behavior(t(0), 1, 20, (1, 100), &default_up(), &default_down(0));
        assert_eq!(n, 5);
        assert_eq!(
            c[1],
            (
                "ScalingLimited",
                "True",
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate"
            )
        );
        // Min picks the smaller: min(5, 2) = 2.
        let up_min = rules(0, "Min", &[("Pods", 4, 15), ("Percent", 100, 15)]);
        let (n, _) = Recommender::default().normalize_with_behavior(
            t(0),
            1,
            20,
            (1, 100),
            &up_min,
            &default_down(0),
        );
        assert_eq!(n, 2);
        // Disabled: no scale-up at all.
        let up_off = rules(0, "Disabled", &[("Pods", 4, 15)]);
        let (n, _) = Recommender::default().normalize_with_behavior(
            t(0),
            3,
            20,
            (1, 100),
            &up_off,
            &default_down(0),
        );
        assert_eq!(n, 3);
        // Events within the period count against the limit: scaled 1 → 5 at t0;
        // at t10 the period started at 1, so at most 5 still.
        let mut r = Recommender::default();
        r.scaled(t(0), 1, 5);
        let (n, _) =
            r.normalize_with_behavior(t(10), 5, 20, (1, 100), &default_up(), &default_down(0));
        assert_eq!(n, 5);
        // After the period: 5 + 4 = 9 vs 5 × 2 = 10 → 10.
        let (n, _) =
            r.normalize_with_behavior(t(20), 5, 20, (1, 100), &default_up(), &default_down(0));
        assert_eq!(n, 10);
        // Max replicas wins over the rate.
        let (n, c) = Recommender::default().normalize_with_behavior(
            t(0),
            4,
            20,
            (1, 6),
            &default_up(),
            &default_down(0),
        );
        assert_eq!(n, 6);
        assert_eq!(c[1].2, "TooManyReplicas");
    }

    #[test]
    fn behavior_scale_down_policies_and_min() {
        // Pods policy: at most 1 pod per 60 s.
        let down = rules(0, "Max", &[("Pods", 1, 60)]);
        let mut r = Recommender::default();
        let (n, c) = r.normalize_with_behavior(t(0), 5, 1, (1, 10), &default_up(), &down);
        assert_eq!(n, 4);
        assert_eq!(c[1].2, "ScaleDownLimit");
        r.scaled(t(0), 5, 4);
        let (n, _) = r.normalize_with_behavior(t(30), 4, 1, (1, 10), &default_up(), &down);
        assert_eq!(n, 4, "the period's pod is spent");
        // Percent 50 % vs Pods 1, selectPolicy Max (biggest change) → 10 × 0.5 = 5.
        let down = rules(0, "Max", &[("Pods", 1, 60), ("Percent", 50, 60)]);
        let (n, _) = Recommender::default().normalize_with_behavior(
            t(0),
            10,
            1,
            (1, 10),
            &default_up(),
            &down,
        );
        assert_eq!(n, 5);
        // selectPolicy Min (smallest change) → 9.
        let down = rules(0, "Min", &[("Pods", 1, 60), ("Percent", 50, 60)]);
        let (n, _) = Recommender::default().normalize_with_behavior(
            t(0),
            10,
            1,
            (1, 10),
            &default_up(),
            &down,
        );
        assert_eq!(n, 9);
        // The minimum holds.
        let (n, c) = Recommender::default().normalize_with_behavior(
            t(0),
            4,
            0,
            (2, 10),
            &default_up(),
            &default_down(0),
        );
        assert_eq!(n, 2);
        assert_eq!(c[1].2, "TooFewReplicas");
    }

    #[test]
    fn stabilization_windows() {
        let mut r = Recommender::default();
        let down = default_down(60);
        // Recommendations 5 then 2 within 60 s: stay at the highest (5).
        let (n, _) = r.normalize_with_behavior(t(0), 5, 5, (1, 10), &default_up(), &down);
        assert_eq!(n, 5);
        let (n, c) = r.normalize_with_behavior(t(30), 5, 2, (1, 10), &default_up(), &down);
        assert_eq!(n, 5);
        assert_eq!(c[0].2, "ScaleDownStabilized");
        // Once the 5 is older than the window, 2 applies.
        let (n, _) = r.normalize_with_behavior(t(61), 5, 2, (1, 10), &default_up(), &down);
        assert_eq!(n, 2);
        // A scale-up window holds back to the lowest recent recommendation.
        let mut r = Recommender::default();
        let up = rules(60, "Max", &[("Pods", 100, 15)]);
        r.normalize_with_behavior(t(0), 2, 2, (1, 10), &up, &default_down(0));
        let (n, c) = r.normalize_with_behavior(t(10), 2, 8, (1, 10), &up, &default_down(0));
        assert_eq!(n, 2);
        assert_eq!(c[0].2, "ScaleUpStabilized");
    }

    #[test]
    fn without_behavior() {
        let mut r = Recommender::default();
        let w = Duration::from_secs(300);
        // Scale-up limit max(2 × 1, 4) = 4.
        let (n, c) = r.normalize(t(0), 1, 10, (1, 20), w);
        assert_eq!(n, 4);
        assert_eq!(c[1].2, "ScaleUpLimit");
        // Downscale window keeps the highest of the last 5 min.
        let mut r = Recommender::default();
        r.normalize(t(0), 4, 4, (1, 20), w);
        let (n, _) = r.normalize(t(100), 4, 1, (1, 20), w);
        assert_eq!(n, 4);
        let (n, _) = r.normalize(t(301), 4, 1, (1, 20), w);
        assert_eq!(n, 1);
        let (n, c) = Recommender::default().normalize(t(0), 3, 0, (2, 20), w);
        assert_eq!((n, c[1].2), (2, "TooFewReplicas"));
    }

    #[test]
    fn decide_handles_bounds_and_disabled_targets() {
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({"metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "ReplicaSet", "name": "r", "apiVersion": "apps/v1"}, "minReplicas": 2, "maxReplicas": 5}})).unwrap();
        let mut r = Recommender::default();
        let w = Duration::from_secs(300);
        assert_eq!(
            decide(&mut r, &hpa, 0, &[], t(0), w).conditions[0].2,
            "ScalingDisabled"
        );
        assert_eq!(decide(&mut r, &hpa, 7, &[], t(0), w).desired, 5);
        assert_eq!(decide(&mut r, &hpa, 1, &[], t(0), w).desired, 2);
        let d = decide(
            &mut r,
            &hpa,
            3,
            &[
                ("cpu resource utilization (percentage of request)".into(), 4),
                ("memory resource".into(), 2),
            ],
            t(0),
            w,
        );
        assert_eq!(d.desired, 4);
        assert_eq!(
            d.reason,
            "cpu resource utilization (percentage of request) above target"
        );
    }
}
