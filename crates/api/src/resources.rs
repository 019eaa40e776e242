//! A pod's compute resources as Kubernetes sums them: the effective request
//! (what the scheduler and the kubelet's admission count) and the QoS class.
//! Shared by the apiserver (QoS on create, resize validation), the scheduler
//! and the kubelet (resize admission).

use crate::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
use serde_json::Value;
use std::collections::BTreeMap;

/// The amount of `r` in a resource list: millicores for `cpu`, bytes otherwise.
pub fn amount(list: Option<&BTreeMap<String, Q>>, r: &str) -> Option<i64> {
    let q = Quantity::parse(&list?.get(r)?.0).ok()?;
    Some(if r == "cpu" { q.millis() } else { q.units() })
}

fn request(c: &Container, r: &str) -> Option<i64> {
    amount(
        c.resources.as_ref().and_then(|res| res.requests.as_ref()),
        r,
    )
}

/// What Kubernetes' scoring counts for a container that requests no CPU
/// (`DefaultMilliCPURequest`, millicores) ...
pub const NONZERO_CPU: i64 = 100;
/// ... or no memory (`DefaultMemoryRequest`, bytes): a node full of pods
/// without requests must not look empty to the scheduler's scores.
pub const NONZERO_MEMORY: i64 = 200 * 1024 * 1024;

/// What a pod requests of its node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodRequests {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes of the node's local storage (writable layers, logs, emptyDirs).
    pub ephemeral_storage: i64,
    /// CPU with [`NONZERO_CPU`] for each container that requests none
    /// (Kubernetes' `NonZeroRequested`, what the scheduler scores by).
    pub nonzero_cpu: i64,
    /// Memory with [`NONZERO_MEMORY`] for each container that requests none.
    pub nonzero_memory: i64,
}

/// Requested resources of a pod (cpu millicores, memory and
/// ephemeral-storage bytes), as
/// Kubernetes' `PodRequests` computes them: the app containers and the
/// sidecars (init containers with `restartPolicy: Always`, which keep
/// running) added up; each regular init container runs alone beside the
/// sidecars started before it, so the pod needs at least the largest of
/// those; pod-level `spec.resources` requests, when set, replace the sum;
/// the runtime's `overhead` comes on top.
pub fn pod_requests(pod: &Pod) -> PodRequests {
    let Some(spec) = &pod.spec else {
        return PodRequests::default();
    };
    // `missing`: what a container without a request for `r` counts as.
    let effective = |r: &str, missing: i64| {
        let request = |c: &Container| request(c, r).unwrap_or(missing);
        let mut total: i64 = spec.containers.iter().map(request).sum();
        let (mut sidecars, mut largest_init) = (0, 0);
        for c in spec.init_containers.iter().flatten() {
            let alone = if c.restart_policy.as_deref() == Some("Always") {
                total += request(c);
                sidecars += request(c);
                sidecars
            } else {
                request(c) + sidecars
            };
            largest_init = largest_init.max(alone);
        }
        let pod_level = amount(
            spec.resources
                .as_ref()
                .and_then(|res| res.requests.as_ref()),
            r,
        );
        let overhead = amount(spec.overhead.as_ref(), r).unwrap_or(0);
        pod_level.unwrap_or(total.max(largest_init)) + overhead
    };
    PodRequests {
        cpu: effective("cpu", 0),
        memory: effective("memory", 0),
        ephemeral_storage: effective("ephemeral-storage", 0),
        nonzero_cpu: effective("cpu", NONZERO_CPU),
        nonzero_memory: effective("memory", NONZERO_MEMORY),
    }
}

/// A quantity in a JSON resource list, as a number of milli-units (so CPU
/// and memory compare exactly); None when absent or unparsable.
fn json_amount(list: Option<&Value>, r: &str) -> Option<i64> {
    let q = Quantity::parse(list?.get(r)?.as_str()?).ok()?;
    Some(q.millis())
}

/// The pod's QoS class (`status.qosClass`), as Kubernetes' `ComputePodQOS`:
/// from the pod-level resources when set, else from every container (init
/// ones included). BestEffort: no CPU or memory requests or limits anywhere;
/// Guaranteed: every container limits both, and requests equal limits;
/// Burstable otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    let pod_level = spec.get("resources").filter(|r| {
        ["requests", "limits"]
            .iter()
            .any(|k| has_cpu_or_memory(r.get(*k)))
    });
    let lists: Vec<&Value> = match pod_level {
        Some(r) => vec![r],
        None => ["initContainers", "containers"]
            .iter()
            .filter_map(|l| spec.get(*l).and_then(Value::as_array))
            .flatten()
            .map(|c| c.get("resources").unwrap_or(&Value::Null))
            .collect(),
    };
    let mut requests: BTreeMap<&str, i64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i64> = BTreeMap::new();
    let mut guaranteed = true;
    for res in lists {
        for r in ["cpu", "memory"] {
            if let Some(q) = json_amount(res.get("requests"), r).filter(|q| *q != 0) {
                *requests.entry(r).or_default() += q;
            }
            match json_amount(res.get("limits"), r).filter(|q| *q != 0) {
                Some(q) => *limits.entry(r).or_default() += q,
                None => guaranteed = false,
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && limits.len() == 2 && requests.iter().all(|(r, q)| limits.get(r) == Some(q)) {
        return "Guaranteed";
    }
    "Burstable"
}

fn has_cpu_or_memory(list: Option<&Value>) -> bool {
    list.and_then(Value::as_object)
        .is_some_and(|l| l.contains_key("cpu") || l.contains_key("memory"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(containers: Value) -> Value {
        json!({ "containers": containers })
    }

    #[test]
    fn qos_classes_as_kubernetes_computes_them() {
        assert_eq!(qos_class(&spec(json!([{"name": "a"}]))), "BestEffort");
        let both = json!({"cpu": "100m", "memory": "64Mi"});
        let equal = json!([{"name": "a", "resources": {"requests": both, "limits": both}}]);
        assert_eq!(qos_class(&spec(equal.clone())), "Guaranteed");
        let more = json!([{"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                        "limits": {"cpu": "200m", "memory": "64Mi"}}}]);
        assert_eq!(qos_class(&spec(more)), "Burstable");
        let cpu_only =
            json!([{"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]);
        assert_eq!(qos_class(&spec(cpu_only)), "Burstable");
        // An init container without limits makes the pod Burstable.
        let mut with_init = spec(equal);
        with_init["initContainers"] =
            json!([{"name": "i", "resources": {"requests": {"cpu": "10m"}}}]);
        assert_eq!(qos_class(&with_init), "Burstable");
        // Pod-level resources decide when set.
        with_init["resources"] = json!({"requests": both, "limits": both});
        assert_eq!(qos_class(&with_init), "Guaranteed");
    }
}
