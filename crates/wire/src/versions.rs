//! Versions served besides the stored one, and the conversions between them.
//!
//! A kind is stored in one version (its registry entry). Kubernetes serves
//! some kinds in older versions too; the apiserver converts at its edge:
//!
//! ```text
//!  POST /apis/autoscaling/v1/.../horizontalpodautoscalers   (kubectl autoscale)
//!     body (v1) ──to_storage──▶ autoscaling/v2 object ──▶ the write path, stored as v2
//!     answer (v1) ◀──from_storage── the stored v2 object
//! ```
//!
//! As in Kubernetes, what the older version cannot express travels in
//! annotations (`autoscaling.alpha.kubernetes.io/metrics`...), so a v2 object
//! read and written back through v1 loses nothing.
//!
//! A version may also live in another group: `events.k8s.io/v1` Events are
//! the core/v1 Events seen with other field names (`regarding` for
//! `involvedObject`, `note` for `message`, ...), one store for both views.

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// A version served besides the stored one: a built-in conversion (a
/// `static` of [`ALTERNATE_VERSIONS`]) or a custom resource's other version,
/// owned by its strategy (names made at run time, dropped with it).
#[derive(Clone, Debug)]
pub struct AlternateVersion {
    pub group: Cow<'static, str>,
    pub version: Cow<'static, str>,
    pub plural: Cow<'static, str>,
    pub kind: Cow<'static, str>,
    /// The group and version the registry entry (and storage) uses.
    pub storage_group: Cow<'static, str>,
    pub storage_version: Cow<'static, str>,
    /// A body in this version → the stored version.
    pub to_storage_fn: fn(&AlternateVersion, &Value) -> Value,
    /// A stored object → this version.
    pub from_storage_fn: fn(&AlternateVersion, &Value) -> Value,
}

impl AlternateVersion {
    /// A body in this version as the stored version.
    pub fn to_storage(&self, v: &Value) -> Value {
        (self.to_storage_fn)(self, v)
    }

    /// A stored object in this version.
    pub fn from_storage(&self, v: &Value) -> Value {
        (self.from_storage_fn)(self, v)
    }

    /// Another served version of a custom resource whose CRD converts with
    /// strategy None: objects differ only in `apiVersion`.
    pub fn api_version_only(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        storage_version: &str,
    ) -> AlternateVersion {
        let owned = |s: &str| Cow::Owned(s.to_string());
        AlternateVersion {
            group: owned(group),
            version: owned(version),
            plural: owned(plural),
            kind: owned(kind),
            storage_group: owned(group),
            storage_version: owned(storage_version),
            to_storage_fn: |a, v| with_api_version(v, a.storage_api_version()),
            from_storage_fn: |a, v| with_api_version(v, a.api_version()),
        }
    }

    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The stored objects' `apiVersion` (`v1` for the core group).
    pub fn storage_api_version(&self) -> String {
        if self.storage_group.is_empty() {
            self.storage_version.to_string()
        } else {
            format!("{}/{}", self.storage_group, self.storage_version)
        }
    }

    /// Converts an answer: one object, a list of them, or a watch event.
    pub fn answer(&self, v: &Value) -> Value {
        let kind = v["kind"].as_str().unwrap_or_default();
        if kind == self.kind {
            return self.from_storage(v);
        }
        if kind == format!("{}List", self.kind) {
            let mut list = v.clone();
            list["apiVersion"] = json!(self.api_version());
            if let Some(items) = list["items"].as_array_mut() {
                for item in items.iter_mut() {
                    *item = self.from_storage(item);
                }
            }
            return list;
        }
        if v.get("type").is_some() && v["object"]["kind"] == *self.kind {
            let mut event = v.clone();
            event["object"] = self.from_storage(&v["object"]);
            return event;
        }
        v.clone()
    }
}

pub static ALTERNATE_VERSIONS: &[AlternateVersion] = &[
    AlternateVersion {
        group: Cow::Borrowed("autoscaling"),
        version: Cow::Borrowed("v1"),
        plural: Cow::Borrowed("horizontalpodautoscalers"),
        kind: Cow::Borrowed("HorizontalPodAutoscaler"),
        storage_group: Cow::Borrowed("autoscaling"),
        storage_version: Cow::Borrowed("v2"),
        to_storage_fn: |_, v| hpa_v1_to_v2(v),
        from_storage_fn: |_, v| hpa_v2_to_v1(v),
    },
    AlternateVersion {
        group: Cow::Borrowed("events.k8s.io"),
        version: Cow::Borrowed("v1"),
        plural: Cow::Borrowed("events"),
        kind: Cow::Borrowed("Event"),
        storage_group: Cow::Borrowed(""),
        storage_version: Cow::Borrowed("v1"),
        to_storage_fn: |_, v| event_fields(v, "v1", true),
        from_storage_fn: |_, v| event_fields(v, "events.k8s.io/v1", false),
    },
];

/// events.k8s.io/v1 field names and their core/v1 names (Kubernetes'
/// `pkg/apis/events/v1` conversion); the other fields share their names.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// An Event in the other view: to core/v1 (`to_core`) or to events.k8s.io/v1.
fn event_fields(v: &Value, api_version: &str, to_core: bool) -> Value {
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, val) in obj {
        let renamed = EVENT_RENAMES.iter().find_map(|(events, core)| {
            let (from, to) = if to_core {
                (events, core)
            } else {
                (core, events)
            };
            (k == from).then_some(*to)
        });
        out.insert(renamed.unwrap_or(k).to_string(), val.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// `v` with its `apiVersion` set (an object) or left alone (anything else).
fn with_api_version(v: &Value, api_version: String) -> Value {
    let mut out = v.clone();
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version));
    }
    out
}

/// The built-in alternate version served at `group/version/plural`, if any.
pub fn alternate(group: &str, version: &str, plural: &str) -> Option<Arc<AlternateVersion>> {
    ALTERNATE_VERSIONS
        .iter()
        .find(|a| a.group == group && a.version == version && a.plural == plural)
        .map(|a| Arc::new(a.clone()))
}

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

fn is_cpu_utilization(metric: &Value) -> bool {
    metric["type"] == "Resource"
        && metric["resource"]["name"] == "cpu"
        && metric["resource"]["target"]["type"] == "Utilization"
}

fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"]
        .as_object_mut()
        .expect("just made an object")
}

/// The status fields both versions spell the same way.
fn shared_status(status: &Value) -> Value {
    let mut st = json!({"currentReplicas": status["currentReplicas"].as_i64().unwrap_or(0),
                        "desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0)});
    for f in ["observedGeneration", "lastScaleTime"] {
        if !status[f].is_null() {
            st[f] = status[f].clone();
        }
    }
    st
}

/// autoscaling/v2 → v1: the CPU utilization target becomes
/// `targetCPUUtilizationPercentage`; other metrics, behavior and conditions
/// go to annotations.
pub fn hpa_v2_to_v1(v2: &Value) -> Value {
    let mut v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                        "metadata": v2["metadata"].clone()});
    let spec = &v2["spec"];
    let mut s = json!({"scaleTargetRef": spec["scaleTargetRef"].clone(),
                       "maxReplicas": spec["maxReplicas"].clone()});
    if !spec["minReplicas"].is_null() {
        s["minReplicas"] = spec["minReplicas"].clone();
    }
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let (cpu, others): (Vec<Value>, Vec<Value>) = metrics.into_iter().partition(is_cpu_utilization);
    if let Some(cpu) = cpu.first() {
        s["targetCPUUtilizationPercentage"] =
            cpu["resource"]["target"]["averageUtilization"].clone();
    }
    v1["spec"] = s;
    if !others.is_empty() {
        annotations(&mut v1).insert(METRICS.into(), json!(Value::Array(others).to_string()));
    }
    if !spec["behavior"].is_null() {
        annotations(&mut v1).insert(BEHAVIOR.into(), json!(spec["behavior"].to_string()));
    }
    let status = &v2["status"];
    if status.is_object() {
        let mut st = shared_status(status);
        let current = status["currentMetrics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let (cpu, others): (Vec<Value>, Vec<Value>) = current
            .into_iter()
            .partition(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu");
        if let Some(u) = cpu
            .first()
            .and_then(|m| m["resource"]["current"]["averageUtilization"].as_i64())
        {
            st["currentCPUUtilizationPercentage"] = json!(u);
        }
        if !others.is_empty() {
            annotations(&mut v1).insert(
                CURRENT_METRICS.into(),
                json!(Value::Array(others).to_string()),
            );
        }
        if let Some(conds) = status["conditions"].as_array().filter(|c| !c.is_empty()) {
            annotations(&mut v1).insert(
                CONDITIONS.into(),
                json!(Value::Array(conds.clone()).to_string()),
            );
        }
        v1["status"] = st;
    }
    v1
}

/// autoscaling/v1 → v2: the annotations written by [`hpa_v2_to_v1`] come
/// back as fields (and leave the metadata).
pub fn hpa_v1_to_v2(v1: &Value) -> Value {
    let mut meta = v1["metadata"].clone();
    let mut taken = |key: &str| -> Option<Value> {
        let raw = meta.get_mut("annotations")?.as_object_mut()?.remove(key)?;
        serde_json::from_str(raw.as_str()?).ok()
    };
    let other_metrics = taken(METRICS);
    let behavior = taken(BEHAVIOR);
    let conditions = taken(CONDITIONS);
    let current_metrics = taken(CURRENT_METRICS);
    if meta
        .get("annotations")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        if let Some(m) = meta.as_object_mut() {
            m.remove("annotations");
        }
    }
    let spec = &v1["spec"];
    let mut metrics = Vec::new();
    if let Some(target) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": target}}}));
    }
    if let Some(Value::Array(others)) = other_metrics {
        metrics.extend(others);
    }
    let mut s = json!({"scaleTargetRef": spec["scaleTargetRef"].clone(),
                       "maxReplicas": spec["maxReplicas"].clone()});
    if !spec["minReplicas"].is_null() {
        s["minReplicas"] = spec["minReplicas"].clone();
    }
    if !metrics.is_empty() {
        s["metrics"] = json!(metrics);
    }
    if let Some(b) = behavior {
        s["behavior"] = b;
    }
    let mut v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                        "metadata": meta, "spec": s});
    let status = &v1["status"];
    if status.is_object() {
        let mut st = shared_status(status);
        let mut current = Vec::new();
        if let Some(u) = status["currentCPUUtilizationPercentage"].as_i64() {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": u}}}));
        }
        if let Some(Value::Array(others)) = current_metrics {
            current.extend(others);
        }
        if !current.is_empty() {
            st["currentMetrics"] = json!(current);
        }
        if let Some(c) = conditions {
            st["conditions"] = c;
        }
        v2["status"] = st;
    }
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_autoscale_becomes_a_cpu_metric() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80}});
        let v2 = hpa_v1_to_v2(&v1);
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(hpa_v2_to_v1(&v2), v1);
    }

    #[test]
    fn what_v1_cannot_say_survives_a_round_trip() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "labels": {"a": "b"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                       "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70}}}],
                       "conditions": [{"type": "AbleToScale", "status": "True"}]}});
        let v1 = hpa_v2_to_v1(&v2);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 70);
        assert!(v1["metadata"]["annotations"][METRICS]
            .as_str()
            .unwrap()
            .contains("memory"));
        let back = hpa_v1_to_v2(&v1);
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(back["metadata"], v2["metadata"]);
        assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
        assert_eq!(
            back["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
            70
        );
    }
}
