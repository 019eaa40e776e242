//! ResourceQuota and LimitRange validation, as Kubernetes' `ValidateResourceQuota`
//! and `ValidateLimitRange`: known resource names, non-negative (and for
//! object counts whole) quantities, scopes that fit the resources, and
//! limit items whose min, defaults and max are in order.

use super::{Errors, FieldError};
use k8s_openapi::api::core::v1::{
    LimitRange, LimitRangeItem, ResourceQuota, ResourceQuotaSpec, ScopeSelector,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use minik8s_api::amount::Amount;
use minik8s_api::names::qualified_name_error;
use minik8s_api::quota::{is_standard_resource, scope_valid_for, INTEGER_RESOURCES, SCOPES};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

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

/// A resource list: name to quantity.
type ResourceList = BTreeMap<String, Quantity>;

/// A quota's resource list (`spec.hard`, `status.hard`, `status.used`).
fn quota_resources(list: Option<&ResourceList>, path: &str, errs: &mut Errors) {
    for (k, v) in list.into_iter().flatten() {
        let p = format!("{path}[{k}]");
        if resource_name(k, &p, errs) && !k.contains('/') && !is_standard_resource(k) {
            errs.push(FieldError::invalid(
                &p,
                &json!(k),
                "must be a standard resource for quota",
            ));
        }
        let Some(amount) = Amount::parse(&v.0) else {
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

/// Scopes that exclude each other.
const CONFLICTING_SCOPES: [[&str; 2]; 2] = [
    ["BestEffort", "NotBestEffort"],
    ["Terminating", "NotTerminating"],
];

/// Kubernetes' `ValidateResourceQuota` (spec and status).
pub fn validate_resource_quota(
    quota: &ResourceQuota,
    _old: Option<&ResourceQuota>,
    errs: &mut Errors,
) {
    let empty = ResourceQuotaSpec::default();
    let spec = quota.spec.as_ref().unwrap_or(&empty);
    let status = quota.status.as_ref();
    quota_resources(spec.hard.as_ref(), "spec.hard", errs);
    quota_resources(status.and_then(|s| s.hard.as_ref()), "status.hard", errs);
    quota_resources(status.and_then(|s| s.used.as_ref()), "status.used", errs);
    let hard_names: BTreeSet<&str> = spec
        .hard
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    let scopes = spec.scopes.as_deref().unwrap_or_default();
    let scope_value = json!(scopes);
    for s in scopes {
        if !SCOPES.contains(&s.as_str()) {
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
    }
    let seen: BTreeSet<&str> = scopes.iter().map(String::as_str).collect();
    for pair in CONFLICTING_SCOPES {
        if pair.iter().all(|s| seen.contains(s)) {
            errs.push(FieldError::invalid(
                "spec.scopes",
                &scope_value,
                "conflicting scopes",
            ));
        }
    }
    if let Some(selector) = &spec.scope_selector {
        validate_scope_selector(selector, &hard_names, errs);
    }
}

fn validate_scope_selector(selector: &ScopeSelector, hard: &BTreeSet<&str>, errs: &mut Errors) {
    let Some(exprs) = selector.match_expressions.as_deref() else {
        return;
    };
    let mut seen = BTreeSet::new();
    for (i, e) in exprs.iter().enumerate() {
        let path = format!("spec.scopeSelector.matchExpressions[{i}]");
        let scope = e.scope_name.as_str();
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
        let op = e.operator.as_str();
        let values = e.values.as_ref().map_or(0, Vec::len);
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
                        &json!(e.values),
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
    for pair in CONFLICTING_SCOPES {
        if pair.iter().all(|s| seen.contains(s)) {
            errs.push(FieldError::invalid(
                "spec.scopeSelector",
                &json!(selector),
                "conflicting scopes",
            ));
        }
    }
}

/// Kubernetes' `ValidateLimitRange`: each item's type (once each), its
/// resource names, and the order of its amounts.
pub fn validate_limit_range(range: &LimitRange, _old: Option<&LimitRange>, errs: &mut Errors) {
    let mut types = BTreeSet::new();
    let items = range
        .spec
        .as_ref()
        .map(|s| s.limits.as_slice())
        .unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let path = format!("spec.limits[{i}]");
        let ty = item.type_.as_str();
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
        let keys = limit_resource_names(item, &path, errs);
        let has_storage =
            |l: &Option<ResourceList>| l.as_ref().is_some_and(|l| l.contains_key("storage"));
        if ty == "PersistentVolumeClaim" && !has_storage(&item.min) && !has_storage(&item.max) {
            errs.push(FieldError::required(
                format!("{path}.limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        for k in &keys {
            errs.extend(limit_order_errors(item, &path, k));
        }
    }
}

/// The resource names an item's lists use (a Pod item may have no defaults),
/// each checked; what it returns is every name once.
fn limit_resource_names(item: &LimitRangeItem, path: &str, errs: &mut Errors) -> BTreeSet<String> {
    let ty = item.type_.as_str();
    let mut lists = vec![("max", &item.max), ("min", &item.min)];
    if ty == "Pod" {
        for (key, list) in [
            ("default", &item.default),
            ("defaultRequest", &item.default_request),
        ] {
            if list.as_ref().is_some_and(|m| !m.is_empty()) {
                errs.push(FieldError::forbidden(
                    format!("{path}.{key}"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
    } else {
        lists.extend([
            ("default", &item.default),
            ("defaultRequest", &item.default_request),
        ]);
    }
    lists.push(("maxLimitRequestRatio", &item.max_limit_request_ratio));
    let mut keys = BTreeSet::new();
    for (key, list) in lists {
        for r in list.iter().flat_map(|l| l.keys()) {
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
    keys
}

/// For resource `k` of an item: min ≤ defaultRequest ≤ default ≤ max, a
/// ratio of at least 1 and at most max/min, and no overcommit where a
/// resource cannot be (hugepages, extended resources).
/// Long: Kubernetes' ValidateLimitRange order checks for one resource in
/// its order, which the order of the errors follows.
fn limit_order_errors(item: &LimitRangeItem, path: &str, k: &str) -> Errors {
    let amount = |l: &Option<ResourceList>| l.as_ref()?.get(k).and_then(|q| Amount::parse(&q.0));
    let pod = item.type_ == "Pod";
    let (mn, mx, ra) = (
        amount(&item.min),
        amount(&item.max),
        amount(&item.max_limit_request_ratio),
    );
    let d = if pod { None } else { amount(&item.default) };
    let dr = if pod {
        None
    } else {
        amount(&item.default_request)
    };
    let invalid = |field: &str, v: Amount, msg: String| {
        FieldError::invalid(format!("{path}.{field}[{k}]"), &json!(v.to_string()), msg)
    };
    let mut errs = Vec::new();
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
                format!("default request value {dr} is greater than default limit value {d}"),
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
    let no_overcommit =
        k.starts_with("hugepages-") || (k.contains('/') && !k.starts_with("kubernetes.io/"));
    if let (true, Some(d), Some(dr)) = (no_overcommit, d, dr) {
        if d != dr {
            errs.push(invalid(
                "defaultRequest",
                dr,
                format!("default value {d} must equal to defaultRequest value {dr} in {k}"),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn errors<T: serde::de::DeserializeOwned>(f: crate::Rules<T>, obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        f(&serde_json::from_value(obj).unwrap(), None, &mut errs);
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
