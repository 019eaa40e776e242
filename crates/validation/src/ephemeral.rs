//! Ephemeral containers (`kubectl debug`): added to a running pod through the
//! `pods/ephemeralcontainers` subresource only, never changed or removed, and
//! without the fields a container needs to be part of the pod's contract
//! (ports, probes, lifecycle, resources).

use super::*;
use serde_json::json;

/// Fields an ephemeral container may not set.
const FORBIDDEN: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resources",
    "resizePolicy",
    "restartPolicy",
];

/// A pod is created without ephemeral containers.
pub(super) fn validate_pod_create(spec: &k8s_openapi::api::core::v1::PodSpec, errs: &mut Errors) {
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            "cannot be set on create",
        ));
    }
}

/// A write through `pods/ephemeralcontainers`: existing ephemeral containers
/// stay as they are; new ones are checked.
pub fn validate_ephemeral_containers_update(new: &Value, old: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = new.get("spec").unwrap_or(&Value::Null);
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    let list = arr(spec, "ephemeralContainers");
    for previous in arr(old_spec, "ephemeralContainers") {
        let name = str_at(previous, "name").unwrap_or("");
        match list.iter().position(|c| str_at(c, "name") == Some(name)) {
            None => errs.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                format!("existing ephemeral containers {name:?} may not be removed"),
            )),
            Some(i) if list[i] != *previous => errs.push(FieldError::forbidden(
                format!("spec.ephemeralContainers[{i}]"),
                format!("existing ephemeral containers {name:?} may not be changed"),
            )),
            Some(_) => {}
        }
    }
    let regular: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| arr(spec, l))
        .filter_map(|c| str_at(c, "name"))
        .collect();
    let mut seen: Vec<&str> = regular.clone();
    for (i, c) in list.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        match non_empty_str(c, "name") {
            None => errs.push(FieldError::required(format!("{path}.name"), "")),
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(format!("{path}.name"), &json!(n), e));
                }
                if seen.contains(&n) {
                    errs.push(FieldError::duplicate(format!("{path}.name"), &json!(n)));
                }
                seen.push(n);
            }
        }
        if non_empty_str(c, "image").is_none() {
            errs.push(FieldError::required(format!("{path}.image"), ""));
        }
        for field in FORBIDDEN {
            let set = match c.get(*field) {
                None | Some(Value::Null) => false,
                Some(Value::Object(m)) => !m.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if set {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        if let Some(target) = non_empty_str(c, "targetContainerName") {
            if !regular.contains(&target) {
                errs.push(FieldError::not_found(
                    format!("{path}.targetContainerName"),
                    &json!(target),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ephemeral: Value) -> Value {
        json!({"spec": {"containers": [{"name": "app", "image": "busybox"}],
                        "ephemeralContainers": ephemeral}})
    }

    #[test]
    fn new_ephemeral_containers_are_checked_and_old_ones_kept() {
        let debugger = json!({"name": "debugger", "image": "busybox", "targetContainerName": "app", "resources": {}});
        let old = pod(json!([]));
        assert_eq!(
            validate_ephemeral_containers_update(&pod(json!([debugger])), &old),
            []
        );

        let bad = json!([{"name": "app", "ports": [{"containerPort": 80}], "targetContainerName": "nope"}]);
        let messages: Vec<String> = validate_ephemeral_containers_update(&pod(bad), &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            messages,
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[0].image: Required value",
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
            ]
        );

        let with = pod(json!([debugger]));
        let mut changed = debugger.clone();
        changed["image"] = json!("alpine");
        let errs = validate_ephemeral_containers_update(&pod(json!([changed])), &with);
        assert_eq!(
            errs[0].to_string(),
            "spec.ephemeralContainers[0]: Forbidden: existing ephemeral containers \"debugger\" may not be changed"
        );
        let errs = validate_ephemeral_containers_update(&pod(json!([])), &with);
        assert_eq!(
            errs[0].to_string(),
            "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed"
        );
    }
}
