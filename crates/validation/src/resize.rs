//! In-place resize (`pods/resize`): what a resize may change, as Kubernetes'
//! `ValidatePodResize` decides. Only the CPU and memory of app containers
//! and sidecars change; requests and limits may not be removed; a memory
//! limit only grows unless the container restarts for it; the QoS class
//! stays; pods with pod-level resources, static pods and Windows pods are
//! not resized.

use super::*;
use minik8s_api::resources::qos_class;
use serde_json::json;

/// Whether any resource list of `r` (requests, limits) names CPU or memory.
fn sets_resources(spec: &Value) -> bool {
    spec.get("resources").is_some_and(|r| {
        ["requests", "limits"].iter().any(|k| {
            r.get(*k)
                .and_then(Value::as_object)
                .is_some_and(|l| !l.is_empty())
        })
    })
}

fn is_sidecar(c: &Value) -> bool {
    c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// A container's resources without CPU and memory (which a resize may change).
fn without_cpu_memory(c: &Value) -> Value {
    let mut c = c.clone();
    for list in ["requests", "limits"] {
        if let Some(l) = c
            .pointer_mut(&format!("/resources/{list}"))
            .and_then(Value::as_object_mut)
        {
            l.remove("cpu");
            l.remove("memory");
        }
    }
    c
}

fn list_keys(r: &Value, list: &str) -> Vec<String> {
    r.get(list)
        .and_then(Value::as_object)
        .map(|l| l.keys().cloned().collect())
        .unwrap_or_default()
}

/// One container's change: nothing removed, memory limits only up unless
/// `resizePolicy` restarts the container for memory.
fn validate_container_resize(new: &Value, old: &Value, path: &str, errs: &mut Errors) {
    let empty = Value::Null;
    let (nr, or) = (
        new.get("resources").unwrap_or(&empty),
        old.get("resources").unwrap_or(&empty),
    );
    for (list, what) in [
        ("requests", "resource requests"),
        ("limits", "resource limits"),
    ] {
        let kept = list_keys(nr, list);
        if list_keys(or, list).iter().any(|k| !kept.contains(k)) {
            errs.push(FieldError::forbidden(
                format!("{path}.{list}"),
                format!("{what} cannot be removed"),
            ));
        }
    }
    let memory_policy = arr(new, "resizePolicy")
        .iter()
        .find(|p| p.get("resourceName").and_then(Value::as_str) == Some("memory"))
        .and_then(|p| p.get("restartPolicy").and_then(Value::as_str))
        .unwrap_or("NotRequired");
    if memory_policy == "NotRequired" {
        let limit = |r: &Value| {
            r.pointer("/limits/memory")
                .and_then(Value::as_str)
                .and_then(|q| minik8s_api::quantity::Quantity::parse(q).ok())
        };
        let field = format!("{path}.limits[memory]");
        match (limit(nr), limit(or)) {
            (Some(n), Some(o)) if n.0 < o.0 => errs.push(FieldError::forbidden(
                field,
                "memory limits cannot be decreased unless resizePolicy is RestartContainer",
            )),
            // Adding a limit lowers it from "unlimited".
            (Some(_), None) => errs.push(FieldError::forbidden(
                field,
                "memory limits cannot be added unless resizePolicy is RestartContainer",
            )),
            _ => {}
        }
    }
}

/// A write through `pods/resize`: `new` is the old pod with the containers'
/// `resources` and `resizePolicy` taken from the request.
pub fn validate_pod_resize(new: &Value, old: &Value) -> Errors {
    let spec = new.get("spec").unwrap_or(&Value::Null);
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    if sets_resources(spec) || sets_resources(old_spec) {
        return vec![FieldError::forbidden(
            "",
            "pods with pod-level resources cannot be resized",
        )];
    }
    if old
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
    {
        return vec![FieldError::forbidden("", "static pods cannot be resized")];
    }
    if old_spec.pointer("/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden("", "windows pods cannot be resized")];
    }
    let mut errs = Vec::new();
    let old_qos = old
        .pointer("/status/qosClass")
        .and_then(Value::as_str)
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| qos_class(old_spec));
    if old_qos != qos_class(spec) {
        errs.push(FieldError::invalid(
            "spec",
            &json!(old_qos),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    // A kubelet that resizes reports the resources of running containers.
    let first_running = arr(
        old.get("status").unwrap_or(&Value::Null),
        "containerStatuses",
    )
    .iter()
    .find(|s| s.pointer("/state/running").is_some());
    if first_running.is_some_and(|s| s.get("resources").is_none()) {
        errs.push(FieldError::forbidden(
            "spec",
            "Pod running on node without support for resize",
        ));
    }
    for (list, i, c) in ["initContainers", "containers"].iter().flat_map(|l| {
        arr(old_spec, l)
            .iter()
            .enumerate()
            .map(move |(i, c)| (*l, i, c))
    }) {
        let Some(n) = arr(spec, list).get(i) else {
            continue;
        };
        let path = format!("spec.{list}[{i}].resources");
        if list == "containers" || is_sidecar(c) {
            validate_container_resize(n, c, &path, &mut errs);
            if without_cpu_memory(n) != without_cpu_memory(c) {
                let detail = if list == "containers" {
                    "only cpu and memory resources are mutable"
                } else {
                    "only cpu and memory resources for sidecar containers are mutable"
                };
                errs.push(FieldError::forbidden("spec", detail));
            }
        } else if n != c {
            errs.push(FieldError::forbidden(
                "spec",
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: &str, memory: &str) -> Value {
        let r = json!({"cpu": cpu, "memory": memory});
        json!({"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": r, "limits": r}}]},
               "status": {"qosClass": "Guaranteed", "containerStatuses": [
                   {"name": "c", "state": {"running": {}}, "resources": {"requests": r, "limits": r}}]}})
    }

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.detail))
            .collect()
    }

    #[test]
    fn cpu_up_and_memory_up_are_allowed() {
        assert!(validate_pod_resize(&pod("300m", "256Mi"), &pod("100m", "128Mi")).is_empty());
    }

    #[test]
    fn memory_limits_go_down_only_with_a_restart() {
        let old = pod("100m", "128Mi");
        let errs = validate_pod_resize(&pod("100m", "64Mi"), &old);
        assert_eq!(
            messages(&errs),
            ["spec.containers[0].resources.limits[memory]: memory limits cannot be decreased unless resizePolicy is RestartContainer"]
        );
        let policy = json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
        let (mut restarting, mut old_restarting) = (pod("100m", "64Mi"), old.clone());
        restarting["spec"]["containers"][0]["resizePolicy"] = policy.clone();
        old_restarting["spec"]["containers"][0]["resizePolicy"] = policy;
        assert!(validate_pod_resize(&restarting, &old_restarting).is_empty());
        // The policy itself does not change through a resize.
        assert_eq!(
            messages(&validate_pod_resize(&restarting, &old)),
            ["spec: only cpu and memory resources are mutable"]
        );
    }

    #[test]
    fn the_qos_class_stays_and_nothing_is_removed() {
        let old = pod("100m", "128Mi");
        let mut burstable = pod("100m", "128Mi");
        burstable["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("200m");
        let errs = validate_pod_resize(&burstable, &old);
        assert_eq!(
            messages(&errs),
            ["spec: Pod QOS Class may not change as a result of resizing"]
        );
        let mut removed = pod("100m", "128Mi");
        removed["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
        let msgs = messages(&validate_pod_resize(&removed, &old));
        assert!(
            msgs.contains(
                &"spec.containers[0].resources.requests: resource requests cannot be removed"
                    .to_string()
            ),
            "{msgs:?}"
        );
        assert!(
            msgs.contains(
                &"spec.containers[0].resources.limits: resource limits cannot be removed"
                    .to_string()
            ),
            "{msgs:?}"
        );
    }

    #[test]
    fn other_resources_and_init_containers_do_not_change() {
        let old = pod("100m", "128Mi");
        let mut storage = pod("100m", "128Mi");
        storage["spec"]["containers"][0]["resources"]["limits"]["ephemeral-storage"] = json!("1Gi");
        assert_eq!(
            messages(&validate_pod_resize(&storage, &old)),
            ["spec: only cpu and memory resources are mutable"]
        );
        let mut with_init = old.clone();
        let r = json!({"cpu": "1", "memory": "1Gi"});
        with_init["spec"]["initContainers"] =
            json!([{"name": "i", "image": "i", "resources": {"requests": r, "limits": r}}]);
        let mut init_resized = with_init.clone();
        let r = json!({"cpu": "2", "memory": "1Gi"});
        init_resized["spec"]["initContainers"][0]["resources"] =
            json!({"requests": r, "limits": r});
        assert_eq!(
            messages(&validate_pod_resize(&init_resized, &with_init)),
            ["spec: resources for non-sidecar init containers are immutable"]
        );
        let mut pod_level = old.clone();
        pod_level["spec"]["resources"] = json!({"limits": {"cpu": "1"}});
        assert_eq!(
            messages(&validate_pod_resize(&pod_level, &pod_level)),
            [": pods with pod-level resources cannot be resized"]
        );
    }
}
