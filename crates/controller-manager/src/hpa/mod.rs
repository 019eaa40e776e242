//! The HorizontalPodAutoscaler (autoscaling/v2) with Kubernetes' algorithm:
//!
//! ```text
//!  every --horizontal-pod-autoscaler-sync-period (15 s), per HPA:
//!   GET <target>/scale ──▶ current replicas, pod selector
//!   metrics.k8s.io pods + the pods ──▶ per metric: ratio = usage / target
//!        1 - scaleDown tolerance <= ratio <= 1 + scaleUp tolerance (0.1 each) → keep;
//!        else ceil(ratio × ready pods)
//!        (missing pods count as 100 % when scaling down, 0 when scaling up;
//!         unready pods as 0 when scaling up)
//!   max over metrics ──▶ stabilization window ──▶ rate policies ──▶ [min, max]
//!   PATCH <target>/scale, status, SuccessfulRescale event
//! ```
//!
//! The decisions ([`replicas_for_metric`], [`Recommender`]) are pure and take
//! the time as an argument, so the unit tables below replay Kubernetes' cases.
//!
//! Layout: `recommend.rs` the pure core, this file the shell, `tests.rs`.

mod recommend;
#[cfg(test)]
mod tests;

pub use recommend::*;

use crate::lock;
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::quantity::Quantity;
use minik8s_api::registry::Subresource;
use minik8s_api::selector::Selector;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DynamicApi, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------------------
// The I/O shell.

pub struct HpaController {
    client: Client,
    recorder: Recorder,
    hpas: Cache<HorizontalPodAutoscaler>,
    pods: Cache<Pod>,
    settings: Settings,
    state: Mutex<HashMap<String, Recommender>>,
}

/// One metric of the spec: (resource name, target, the name events use).
fn metric_specs(hpa: &HorizontalPodAutoscaler) -> Result<Vec<(String, Target, String)>, String> {
    let mut out = Vec::new();
    for m in hpa.spec.metrics.iter().flatten() {
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
                        .map_or(DateTime::<Utc>::MIN_UTC, minik8s_api::meta::utc_of),
                )
            }),
        start_time: status.start_time.as_ref().map(minik8s_api::meta::utc_of),
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
            recorder: Recorder::new(client.clone(), "horizontal-pod-autoscaler"),
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
            let tolerance = Tolerance::of(hpa, self.settings.tolerance);
            let p = replicas_for_metric(&samples, current, target, tolerance, g)
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
}

/// A rescale to make: the HPA, its target's API, and the decision.
struct Rescale<'a> {
    key: &'a str,
    hpa: &'a HorizontalPodAutoscaler,
    api: &'a DynamicApi,
    from: i32,
    decision: &'a Decision,
}

impl HpaController {
    /// The target's scale and its API; on failure, what to say and when to
    /// look again. Built-in kinds, else what discovery says (custom
    /// resources).
    async fn target_scale(
        &self,
        ns: &str,
        target: &CrossVersionObjectReference,
        next: Action,
    ) -> Result<Result<(Value, DynamicApi), (String, Action)>, ClientError> {
        let api_version = target.api_version.clone().unwrap_or_default();
        let info = self
            .client
            .resource_for_kind(&api_version, &target.kind)
            .await?
            .filter(|i| i.has(Subresource::Scale));
        Ok(match info.map(|info| self.client.dynamic(info, Some(ns))) {
            Some(api) => match api.get_sub(&target.name, "scale").await {
                Ok(scale) => Ok((scale, api)),
                Err(e) => Err((e.to_string(), next)),
            },
            // Nothing to scale until the HPA itself changes.
            None => Err((
                format!("no scale subresource for {api_version} {}", target.kind),
                Action::Done,
            )),
        })
    }

    /// Writes the decided size to the target's scale, remembers it for the
    /// stabilization window and says so (an event either way); `Err` when
    /// the target could not be scaled.
    async fn rescale(&self, r: Rescale<'_>, now: DateTime<Utc>) -> Result<(), ()> {
        let target = &r.hpa.spec.scale_target_ref;
        let desired = r.decision.desired;
        let patch = json!({"spec": {"replicas": desired}});
        match r
            .api
            .patch(&target.name, Some("scale"), content::MERGE_PATCH, &patch)
            .await
        {
            Ok(_) => {
                lock(&self.state)
                    .entry(r.key.to_string())
                    .or_default()
                    .scaled(now, r.from, desired);
                let reason = &r.decision.reason;
                let msg = format!("New size: {desired}; reason: {reason}");
                tracing::info!(hpa = r.key, from = r.from, to = desired, %reason, "rescaled");
                self.recorder
                    .event(r.hpa, EventType::Normal, "SuccessfulRescale", &msg)
                    .await;
                Ok(())
            }
            Err(e) => {
                self.recorder
                    .event(r.hpa, EventType::Warning, "FailedRescale", &e.to_string())
                    .await;
                Err(())
            }
        }
    }
}

impl Reconciler for HpaController {
    const NAME: &'static str = "horizontalpodautoscaler";

    /// One sync of one HPA; the next one follows after the sync period.
    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
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
        let spec = hpa.spec.clone();
        let target = &spec.scale_target_ref;
        let now = Utc::now();
        let mut status =
            serde_json::to_value(hpa.status.clone().unwrap_or_default()).unwrap_or(json!({}));
        let (scale, target_api) = match self.target_scale(&ns, target, next).await? {
            Ok(found) => found,
            Err((message, then)) => {
                let cannot = (
                    "AbleToScale",
                    "False",
                    "FailedGetScale",
                    "the HPA controller was unable to get the target's current scale",
                );
                set_conditions(&mut status, &[cannot], now);
                self.recorder
                    .event(&*hpa, EventType::Warning, "FailedGetScale", &message)
                    .await;
                self.write_status(&hpa, status).await?;
                return Ok(then);
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
        let active = current != 0 || spec.min_replicas == Some(0);
        let (proposals, current_metrics) = match active {
            false => (Vec::new(), Vec::new()),
            true => match self.compute(&ns, &selector, current, &hpa, now).await {
                Ok(computed) => computed,
                Err(msg) => {
                    self.failed_metrics(&hpa, status, current, &msg, now)
                        .await?;
                    tracing::debug!(hpa = key, error = %msg, "cannot compute replicas");
                    return Ok(next);
                }
            },
        };
        if active {
            // Kubernetes names the metric that decided (the first one on ties).
            let decided = decisive(&proposals).map_or("", |(l, _)| l.as_str());
            let message = valid_metric_message(decided);
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
        if active && decision.desired != current {
            let rescaled = Rescale {
                key,
                hpa: &hpa,
                api: &target_api,
                from: current,
                decision: &decision,
            };
            match self.rescale(rescaled, now).await {
                Ok(()) => status["lastScaleTime"] = json!(minik8s_api::meta::now_rfc3339()),
                Err(()) => {
                    conditions.retain(|c| c.0 != "AbleToScale");
                    conditions.push(CANNOT_UPDATE_SCALE);
                }
            }
        }
        set_conditions(&mut status, &conditions, now);
        status["currentReplicas"] = json!(current);
        status["desiredReplicas"] = json!(if active { decision.desired } else { 0 });
        status["currentMetrics"] = json!(current_metrics);
        status["observedGeneration"] = json!(hpa.metadata.generation);
        self.write_status(&hpa, status).await?;
        Ok(next)
    }
}

impl HpaController {
    async fn write_status(
        &self,
        hpa: &HorizontalPodAutoscaler,
        status: Value,
    ) -> Result<(), ClientError> {
        let patch = json!({"status": status});
        self.client
            .patch_status::<HorizontalPodAutoscaler>(&hpa.metadata, content::MERGE_PATCH, &patch)
            .await
            .map(|_| ())
    }

    /// No replica count could be computed: ScalingActive False, an event,
    /// the status written with the current replicas.
    async fn failed_metrics(
        &self,
        hpa: &HorizontalPodAutoscaler,
        mut status: Value,
        current: i32,
        message: &str,
        now: chrono::DateTime<Utc>,
    ) -> Result<(), ClientError> {
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
        self.recorder
            .event(hpa, EventType::Warning, "FailedGetResourceMetric", message)
            .await;
        self.write_status(hpa, status).await
    }
}

/// AbleToScale after the target's scale could not be written.
const CANNOT_UPDATE_SCALE: Condition = (
    "AbleToScale",
    "False",
    "FailedUpdateScale",
    "the HPA controller was unable to update the target scale",
);

/// ValidMetricFound's message, naming the metric that decided.
fn valid_metric_message(decided: &str) -> &'static str {
    match decided {
        "memory resource utilization (percentage of request)" => "the HPA was able to successfully calculate a replica count from memory resource utilization (percentage of request)",
        "memory resource" => "the HPA was able to successfully calculate a replica count from memory resource",
        "cpu resource" => "the HPA was able to successfully calculate a replica count from cpu resource",
        _ => "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)",
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
