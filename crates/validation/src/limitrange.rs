//! LimitRange as Kubernetes' LimitRanger admission applies it: a pod's
//! containers get the namespace's default requests and limits where they
//! state none (noted in the `kubernetes.io/limit-ranger` annotation), then
//! every container, the pod as a whole and every claim are held to the
//! `min`, `max` and `maxLimitRequestRatio` of each LimitRange. Pure functions
//! over JSON; the apiserver calls them on create.

use minik8s_api::amount::Amount;
use minik8s_api::quota::{containers_resources, resource_list, Usage};
use serde_json::{json, Map, Value};

/// The annotation naming what the LimitRanger set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Kubernetes' defaulting of a `Container` limit item: the default limit
/// is the max when unset, the default request the default limit, else the
/// min.
pub fn default_item(item: &mut Map<String, Value>) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let copy_missing = |item: &mut Map<String, Value>, from: &str, to: &str| {
        let Some(source) = item.get(from).and_then(Value::as_object).cloned() else {
            return;
        };
        let target = item.entry(to).or_insert_with(|| json!({})).as_object_mut();
        if let Some(target) = target {
            for (k, v) in source {
                target.entry(k).or_insert(v);
            }
        }
    };
    copy_missing(item, "max", "default");
    copy_missing(item, "default", "defaultRequest");
    copy_missing(item, "min", "defaultRequest");
}

fn items<'a>(lr: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    lr.pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

/// Gives the pod's containers (and init containers) the LimitRange's
/// container defaults for what they leave unset, and records what was set
/// in the `kubernetes.io/limit-ranger` annotation.
pub fn default_pod(lr: &Value, pod: &mut Value) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    for item in items(lr, "Container") {
        if let Some(m) = item.get("defaultRequest").and_then(Value::as_object) {
            requests.extend(m.clone());
        }
        if let Some(m) = item.get("default").and_then(Value::as_object) {
            limits.extend(m.clone());
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (list, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(cs) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in cs {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let Some(c) = c.as_object_mut() else { continue };
            let res = c.entry("resources").or_insert_with(|| json!({}));
            let (set_requests, set_limits) = (
                fill(res, "requests", &requests),
                fill(res, "limits", &limits),
            );
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {what} {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
            }
        }
    }
    if !notes.is_empty() {
        let m = pod
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
        if let Some(Value::Object(meta)) = m {
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(ann) = ann.as_object_mut() {
                ann.insert(
                    ANNOTATION.into(),
                    json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
                );
            }
        }
    }
}

/// Sets the defaults `from` a container's `resources[key]` lacks; the names
/// set, sorted.
fn fill(res: &mut Value, key: &str, from: &Map<String, Value>) -> Vec<String> {
    if from.is_empty() {
        return vec![];
    }
    let Some(res) = res.as_object_mut() else {
        return vec![];
    };
    let list = res.entry(key).or_insert_with(|| json!({}));
    if list.is_null() {
        *list = json!({});
    }
    let Some(list) = list.as_object_mut() else {
        return vec![];
    };
    let mut set: Vec<String> = from
        .iter()
        .filter(|(k, _)| !list.contains_key(*k))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &set {
        list.insert(k.clone(), from[k].clone());
    }
    set.sort();
    set
}

fn q(v: &Value) -> Option<Amount> {
    Amount::parse(v.as_str()?)
}

fn min_constraint(
    kind: &str,
    r: &str,
    enforced: Amount,
    req: &Usage,
    lim: &Usage,
) -> Option<String> {
    let Some(request) = req.get(r) else {
        return Some(format!(
            "minimum {r} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    if request.millis() < enforced.millis() {
        return Some(format!(
            "minimum {r} usage per {kind} is {enforced}, but request is {request}"
        ));
    }
    match lim.get(r) {
        Some(limit) if limit.millis() < enforced.millis() => Some(format!(
            "minimum {r} usage per {kind} is {enforced}, but limit is {limit}"
        )),
        _ => None,
    }
}

fn max_constraint(
    kind: &str,
    r: &str,
    enforced: Amount,
    req: &Usage,
    lim: &Usage,
) -> Option<String> {
    let Some(limit) = lim.get(r) else {
        return Some(format!(
            "maximum {r} usage per {kind} is {enforced}.  No limit is specified"
        ));
    };
    if limit.millis() > enforced.millis() {
        return Some(format!(
            "maximum {r} usage per {kind} is {enforced}, but limit is {limit}"
        ));
    }
    match req.get(r) {
        Some(request) if request.millis() > enforced.millis() => Some(format!(
            "maximum {r} usage per {kind} is {enforced}, but request is {request}"
        )),
        _ => None,
    }
}

fn ratio_constraint(
    kind: &str,
    r: &str,
    enforced: Amount,
    req: &Usage,
    lim: &Usage,
) -> Option<String> {
    let request = req.get(r).filter(|q| !q.is_zero());
    let limit = lim.get(r).filter(|q| !q.is_zero());
    let Some(request) = request else {
        return Some(format!(
            "{r} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ));
    };
    let Some(limit) = limit else {
        return Some(format!(
            "{r} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ));
    };
    let ratio = limit.millis() as f64 / request.millis() as f64;
    (ratio * 1000.0 > enforced.millis() as f64).then(|| {
        format!("{r} max limit to request ratio per {kind} is {enforced}, but provided ratio is {ratio:.6}")
    })
}

/// Every constraint of one limit item over (requests, limits).
fn check_item(item: &Value, kind: &str, req: &Usage, lim: &Usage, errs: &mut Vec<String>) {
    type Check = fn(&str, &str, Amount, &Usage, &Usage) -> Option<String>;
    let checks: [(&str, Check); 3] = [
        ("min", min_constraint),
        ("max", max_constraint),
        ("maxLimitRequestRatio", ratio_constraint),
    ];
    for (field, f) in checks {
        for (r, v) in item
            .get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(enforced) = q(v) {
                errs.extend(f(kind, r, enforced, req, lim));
            }
        }
    }
}

/// The pod's violations of one LimitRange (Container items per container
/// and init container, Pod items over the pod's total).
pub fn validate_pod(lr: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    for item in items(lr, "Container") {
        for c in minik8s_api::quota::app_and_init_containers(spec) {
            let req = resource_list(c.pointer("/resources/requests"));
            let lim = resource_list(c.pointer("/resources/limits"));
            check_item(item, "Container", &req, &lim, &mut errs);
        }
    }
    for item in items(lr, "Pod") {
        let req = containers_resources(pod, "requests");
        let lim = containers_resources(pod, "limits");
        check_item(item, "Pod", &req, &lim, &mut errs);
    }
    errs
}

/// A claim's violations of one LimitRange: its storage request within the
/// PersistentVolumeClaim item's min and max.
pub fn validate_claim(lr: &Value, pvc: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let req = resource_list(pvc.pointer("/spec/resources/requests"));
    for item in items(lr, "PersistentVolumeClaim") {
        for (r, v) in item
            .get("min")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(enforced) = q(v) {
                errs.extend(min_constraint(
                    "PersistentVolumeClaim",
                    r,
                    enforced,
                    &req,
                    &Usage::new(),
                ));
            }
        }
        for (r, v) in item
            .get("max")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Some(enforced) = q(v) else { continue };
            match req.get(r) {
                None => errs.push(format!(
                    "maximum {r} usage per PersistentVolumeClaim is {enforced}.  No request is specified"
                )),
                Some(request) if request.millis() > enforced.millis() => errs.push(format!(
                    "maximum {r} usage per PersistentVolumeClaim is {enforced}, but request is {request}"
                )),
                _ => {}
            }
        }
    }
    errs
}

/// Several errors as Kubernetes' aggregate prints them: one alone, more in
/// brackets.
pub fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(limits: Value) -> Value {
        json!({"metadata": {"name": "lr"}, "spec": {"limits": limits}})
    }

    #[test]
    fn items_default_as_kubernetes_does() {
        let mut item = json!({"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}})
            .as_object()
            .cloned()
            .unwrap();
        default_item(&mut item);
        assert_eq!(item["default"], json!({"cpu": "1"}));
        assert_eq!(
            item["defaultRequest"],
            json!({"cpu": "1", "memory": "64Mi"})
        );
    }

    #[test]
    fn a_pod_without_resources_gets_the_defaults_and_the_annotation() {
        let range = lr(
            json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                               "defaultRequest": {"cpu": "100m"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "app", "image": "x"},
            {"name": "side", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}});
        default_pod(&range, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["limits"]["cpu"],
            "1"
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container app; cpu, memory limit for container app; cpu request for container side; memory limit for container side"
        );
    }

    #[test]
    fn min_max_and_ratio_are_enforced_with_kubernetes_messages() {
        let range = lr(json!([
            {"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "2"}},
            {"type": "Pod", "max": {"memory": "1Gi"}}]));
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "50m"}, "limits": {"cpu": "2", "memory": "2Gi"}}}]}});
        assert_eq!(
            validate_pod(&range, &pod),
            vec![
                "minimum cpu usage per Container is 100m, but request is 50m",
                "maximum cpu usage per Container is 1, but limit is 2",
                "cpu max limit to request ratio per Container is 2, but provided ratio is 40.000000",
                "maximum memory usage per Pod is 1Gi, but limit is 2Gi",
            ]
        );
        let fine = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "512Mi"}}}]}});
        assert!(validate_pod(&range, &fine).is_empty());
    }

    #[test]
    fn claims_are_held_to_storage_min_and_max() {
        let range = lr(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}}]),
        );
        let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(
            validate_claim(&range, &claim("10Gi")),
            vec!["maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"]
        );
        assert_eq!(
            validate_claim(&range, &claim("500Mi")),
            vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
        );
        assert!(validate_claim(&range, &claim("2Gi")).is_empty());
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
