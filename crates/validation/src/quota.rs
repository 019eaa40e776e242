//! ResourceQuota and LimitRange validation, as Kubernetes' `ValidateResourceQuota`
//! and `ValidateLimitRange`: known resource names, non-negative (and for
//! object counts whole) quantities, scopes that fit the resources, and
//! limit items whose min, defaults and max are in order.

use super::{Errors, FieldError};
use minik8s_api::amount::Amount;
use minik8s_api::names::qualified_name_error;
use minik8s_api::quota::{is_standard_resource, scope_valid_for, INTEGER_RESOURCES, SCOPES};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Names a container may state (no `/`).
fn is_container_resource(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage"].contains(&name) || name.starts_with("hugepages-")
}

/// `validateResourceName`: a qualified name; without a prefix, one Kubernetes knows.
fn resource_name(name: &str, path: &str, errs: &mut Errors) -> bool {
    if let Some(msg) = qualified_name_error(name) {
        errs.push(FieldError::invalid(path, &json!(name), msg));
        return false;
    }
    let known = is_standard_resource(name) || is_container_resource(name) || name == "storage";
    if !(name.contains('/') || known) {
        errs.push(FieldError::invalid(
            path,
            &json!(name),
            "must be a standard resource type or fully qualified",
        ));
    }
    true
}

/// A quota's resource list (`spec.hard`, `status.hard`, `status.used`).
fn quota_resources(list: Option<&Value>, path: &str, errs: &mut Errors) {
    for (k, v) in list.and_then(Value::as_object).into_iter().flatten() {
        let p = format!("{path}[{k}]");
        if resource_name(k, &p, errs) && !k.contains('/') && !is_standard_resource(k) {
            errs.push(FieldError::invalid(
                &p,
                &json!(k),
                "must be a standard resource for quota",
            ));
        }
        let Some(amount) = v.as_str().and_then(Amount::parse) else {
            continue;
        };
        if amount.is_negative() {
            errs.push(FieldError::invalid(
                &p,
                &json!(amount.to_string()),
                "must be greater than or equal to 0",
            ));
        }
        let integer = INTEGER_RESOURCES.contains(&k.as_str()) || k.starts_with("count/");
        if integer && !amount.is_integer() {
            errs.push(FieldError::invalid(
                &p,
                &json!(amount.to_string()),
                "must be an integer",
            ));
        }
    }
}

/// Kubernetes' `ValidateResourceQuota` (spec and status).
pub fn validate_resource_quota(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let hard = spec.get("hard");
    quota_resources(hard, "spec.hard", errs);
    quota_resources(obj.pointer("/status/hard"), "status.hard", errs);
    quota_resources(obj.pointer("/status/used"), "status.used", errs);
    let hard_names: BTreeSet<&str> = hard
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    let scopes = spec
        .get("scopes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let scope_value = json!(scopes);
    let mut seen = BTreeSet::new();
    for s in &scopes {
        let s = s.as_str().unwrap_or("");
        if !SCOPES.contains(&s) {
            errs.push(FieldError::invalid(
                "spec.scopes",
                &scope_value,
                "unsupported scope",
            ));
        }
        for k in &hard_names {
            if is_standard_resource(k) && !scope_valid_for(s, k) {
                errs.push(FieldError::invalid(
                    "spec.scopes",
                    &scope_value,
                    "unsupported scope applied to resource",
                ));
            }
        }
        seen.insert(s);
    }
    for pair in [
        ["BestEffort", "NotBestEffort"],
        ["Terminating", "NotTerminating"],
    ] {
        if pair.iter().all(|s| seen.contains(s)) {
            errs.push(FieldError::invalid(
                "spec.scopes",
                &scope_value,
                "conflicting scopes",
            ));
        }
    }
    validate_scope_selector(spec, &hard_names, errs);
}

fn validate_scope_selector(spec: &Value, hard: &BTreeSet<&str>, errs: &mut Errors) {
    let Some(exprs) = spec
        .pointer("/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
    else {
        return;
    };
    let mut seen = BTreeSet::new();
    for (i, e) in exprs.iter().enumerate() {
        let path = format!("spec.scopeSelector.matchExpressions[{i}]");
        let scope = e.get("scopeName").and_then(Value::as_str).unwrap_or("");
        if !SCOPES.contains(&scope) {
            errs.push(FieldError::invalid(
                format!("{path}.scopeName"),
                &json!(scope),
                "unsupported scope",
            ));
        }
        for k in hard {
            if is_standard_resource(k) && !scope_valid_for(scope, k) {
                errs.push(FieldError::invalid(
                    format!("{path}.scopeName"),
                    &json!(scope),
                    "unsupported scope applied to resource",
                ));
            }
        }
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let by_value = ["PriorityClass", "VolumeAttributesClass"].contains(&scope);
        match op {
            "In" | "NotIn" if by_value => {
                if values == 0 {
                    errs.push(FieldError::required(
                        format!("{path}.values"),
                        "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if values != 0 {
                    errs.push(FieldError::invalid(
                        format!("{path}.values"),
                        e.get("values").unwrap_or(&Value::Null),
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                    ));
                }
            }
            "In" | "NotIn" => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                &json!(op),
                "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            )),
            _ => errs.push(FieldError::not_supported(
                format!("{path}.operator"),
                &json!(op),
                &["DoesNotExist", "Exists", "In", "NotIn"],
            )),
        }
        seen.insert(scope);
    }
    for pair in [
        ["BestEffort", "NotBestEffort"],
        ["Terminating", "NotTerminating"],
    ] {
        if pair.iter().all(|s| seen.contains(s)) {
            errs.push(FieldError::invalid(
                "spec.scopeSelector",
                spec.get("scopeSelector").unwrap_or(&Value::Null),
                "conflicting scopes",
            ));
        }
    }
}

/// Kubernetes' `ValidateLimitRange`.
pub fn validate_limit_range(obj: &Value, errs: &mut Errors) {
    let mut types = BTreeSet::new();
    let items = obj
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let path = format!("spec.limits[{i}]");
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(msg) = qualified_name_error(ty) {
            errs.push(FieldError::invalid(format!("{path}.type"), &json!(ty), msg));
        } else if !ty.contains('/') && !["Pod", "Container", "PersistentVolumeClaim"].contains(&ty)
        {
            errs.push(FieldError::invalid(
                format!("{path}.type"),
                &json!(ty),
                "must be a standard limit type or fully qualified",
            ));
        }
        if !types.insert(ty) {
            errs.push(FieldError::duplicate(format!("{path}.type"), &json!(ty)));
        }
        let list = |key: &str| -> Vec<(String, Amount)> {
            item.get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str().and_then(Amount::parse)?)))
                .collect()
        };
        let mut fields = vec!["max", "min"];
        if ty == "Pod" {
            for key in ["default", "defaultRequest"] {
                if item
                    .get(key)
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    errs.push(FieldError::forbidden(
                        format!("{path}.{key}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        } else {
            fields.extend(["default", "defaultRequest"]);
        }
        fields.push("maxLimitRequestRatio");
        let mut keys = BTreeSet::new();
        for key in &fields {
            for (r, _) in item
                .get(*key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let p = format!("{path}.{key}[{r}]");
                let known = resource_name(r, &p, errs);
                if known
                    && ["Pod", "Container"].contains(&ty)
                    && !r.contains('/')
                    && !is_container_resource(r)
                {
                    errs.push(FieldError::invalid(
                        &p,
                        &json!(r),
                        "must be a standard resource for containers",
                    ));
                }
                keys.insert(r.clone());
            }
        }
        if ty == "PersistentVolumeClaim"
            && !["min", "max"]
                .iter()
                .any(|k| item.pointer(&format!("/{k}/storage")).is_some())
        {
            errs.push(FieldError::required(
                format!("{path}.limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        let (min, max, default, default_request, ratio) = (
            list("min"),
            list("max"),
            if ty == "Pod" { vec![] } else { list("default") },
            if ty == "Pod" {
                vec![]
            } else {
                list("defaultRequest")
            },
            list("maxLimitRequestRatio"),
        );
        let get = |l: &[(String, Amount)], k: &str| l.iter().find(|(n, _)| n == k).map(|(_, a)| *a);
        for k in &keys {
            let (mn, mx, d, dr, ra) = (
                get(&min, k),
                get(&max, k),
                get(&default, k),
                get(&default_request, k),
                get(&ratio, k),
            );
            let invalid = |field: &str, v: Amount, msg: String| {
                FieldError::invalid(format!("{path}.{field}[{k}]"), &json!(v.to_string()), msg)
            };
            if let (Some(mn), Some(mx)) = (mn, mx) {
                if mn > mx {
                    errs.push(invalid(
                        "min",
                        mn,
                        format!("min value {mn} is greater than max value {mx}"),
                    ));
                }
            }
            if let (Some(dr), Some(mn)) = (dr, mn) {
                if mn > dr {
                    errs.push(invalid(
                        "defaultRequest",
                        dr,
                        format!("min value {mn} is greater than default request value {dr}"),
                    ));
                }
            }
            if let (Some(dr), Some(mx)) = (dr, mx) {
                if dr > mx {
                    errs.push(invalid(
                        "defaultRequest",
                        dr,
                        format!("default request value {dr} is greater than max value {mx}"),
                    ));
                }
            }
            if let (Some(dr), Some(d)) = (dr, d) {
                if dr > d {
                    errs.push(invalid(
                        "defaultRequest",
                        dr,
                        format!(
                            "default request value {dr} is greater than default limit value {d}"
                        ),
                    ));
                }
            }
            if let (Some(d), Some(mn)) = (d, mn) {
                if mn > d {
                    errs.push(invalid(
                        "default",
                        mn,
                        format!("min value {mn} is greater than default value {d}"),
                    ));
                }
            }
            if let (Some(d), Some(mx)) = (d, mx) {
                if d > mx {
                    errs.push(invalid(
                        "default",
                        mx,
                        format!("default value {d} is greater than max value {mx}"),
                    ));
                }
            }
            if let Some(ra) = ra {
                if ra < Amount::count(1) {
                    errs.push(invalid(
                        "maxLimitRequestRatio",
                        ra,
                        format!("ratio {ra} is less than 1"),
                    ));
                }
                if let (Some(mn), Some(mx)) = (mn, mx) {
                    if !mn.is_zero() {
                        let limit = mx.millis() as f64 / mn.millis() as f64;
                        if ra.as_f64() > limit {
                            errs.push(invalid(
                                "maxLimitRequestRatio",
                                ra,
                                format!("ratio {ra} is greater than max/min = {limit:.6}"),
                            ));
                        }
                    }
                }
            }
            // Resources that cannot be overcommitted (hugepages, extended ones): the default limit is the request.
            let no_overcommit = k.starts_with("hugepages-")
                || (k.contains('/') && !k.starts_with("kubernetes.io/"));
            if let (true, Some(d), Some(dr)) = (no_overcommit, d, dr) {
                if d != dr {
                    errs.push(invalid(
                        "defaultRequest",
                        dr,
                        format!("default value {d} must equal to defaultRequest value {dr} in {k}"),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(f: fn(&Value, &mut Errors), obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        f(&obj, &mut errs);
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn quotas_name_known_resources_with_non_negative_amounts() {
        let errs = errors(
            validate_resource_quota,
            json!({"spec": {"hard": {"foo": "1", "pods": "-1", "services": "1500m", "count/deployments.apps": "2",
                                     "requests.nvidia.com/gpu": "1"}}}),
        );
        assert_eq!(
            errs,
            [
                "spec.hard[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified",
                "spec.hard[foo]: Invalid value: \"foo\": must be a standard resource for quota",
                "spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[services]: Invalid value: \"1500m\": must be an integer",
            ]
        );
    }

    #[test]
    fn scopes_must_fit_the_resources() {
        let errs = errors(
            validate_resource_quota,
            json!({"spec": {"hard": {"services": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}}),
        );
        assert_eq!(
            errs,
            [
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\"]: unsupported scope applied to resource",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\"]: unsupported scope applied to resource",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\"]: conflicting scopes",
            ]
        );
    }

    #[test]
    fn limit_items_keep_min_below_max() {
        let errs = errors(
            validate_limit_range,
            json!({"spec": {"limits": [
                {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
                {"type": "Pod", "default": {"cpu": "1"}},
                {"type": "PersistentVolumeClaim", "max": {"memory": "1Gi"}},
                {"type": "Widget"}]}}),
        );
        assert_eq!(
            errs,
            [
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'",
                "spec.limits[2].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
                "spec.limits[3].type: Invalid value: \"Widget\": must be a standard limit type or fully qualified",
            ]
        );
    }
}
