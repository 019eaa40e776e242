//! HorizontalPodAutoscaler (autoscaling/v2): target, replicas, metrics and
//! behavior, on the typed object, with Kubernetes' messages
//! (`pkg/apis/autoscaling/validation`).

use super::{Errors, FieldError};
use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler, MetricSpec};
use minik8s_api::quantity::Quantity;
use serde_json::json;

const METRIC_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
const TARGET_TYPES: [&str; 3] = ["AverageValue", "Utilization", "Value"];

pub(super) fn validate_hpa(
    hpa: &HorizontalPodAutoscaler,
    _old: Option<&HorizontalPodAutoscaler>,
    errs: &mut Errors,
) {
    let spec = &hpa.spec;
    let target = &spec.scale_target_ref;
    for (f, v) in [("kind", &target.kind), ("name", &target.name)] {
        if v.is_empty() {
            errs.push(FieldError::required(format!("spec.scaleTargetRef.{f}"), ""));
        }
    }
    let max = spec.max_replicas;
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to 1",
        ));
    }
    if let Some(min) = spec.min_replicas {
        if min < 1 {
            errs.push(FieldError::invalid(
                "spec.minReplicas",
                &json!(min),
                "must be greater than or equal to 1",
            ));
        } else if max >= 1 && max < min {
            errs.push(FieldError::invalid(
                "spec.maxReplicas",
                &json!(max),
                "must be greater than or equal to `minReplicas`",
            ));
        }
    }
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        metric(errs, &format!("spec.metrics[{i}]"), m);
    }
    let behavior = spec.behavior.as_ref();
    for (dir, rules) in [
        ("scaleUp", behavior.and_then(|b| b.scale_up.as_ref())),
        ("scaleDown", behavior.and_then(|b| b.scale_down.as_ref())),
    ] {
        if let Some(rules) = rules {
            scaling_rules(errs, &format!("spec.behavior.{dir}"), rules);
        }
    }
}

/// One metric: a known type; a Resource metric names its resource and a
/// target, a Utilization target a positive percentage.
fn metric(errs: &mut Errors, path: &str, m: &MetricSpec) {
    if m.type_.is_empty() {
        errs.push(FieldError::required(format!("{path}.type"), ""));
        return;
    }
    if !METRIC_TYPES.contains(&m.type_.as_str()) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &json!(m.type_),
            &METRIC_TYPES,
        ));
    }
    if m.type_ != "Resource" {
        return;
    }
    let Some(r) = m.resource.as_ref() else {
        errs.push(FieldError::required(format!("{path}.resource"), ""));
        return;
    };
    if r.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.resource.name"), ""));
    }
    let target = &r.target;
    let tpath = format!("{path}.resource.target");
    if target.type_.is_empty() {
        errs.push(FieldError::required(
            format!("{tpath}.type"),
            "must specify a metric target type",
        ));
    } else if !TARGET_TYPES.contains(&target.type_.as_str()) {
        errs.push(FieldError::not_supported(
            format!("{tpath}.type"),
            &json!(target.type_),
            &TARGET_TYPES,
        ));
    }
    if target.type_ == "Utilization" && target.average_utilization.is_none_or(|u| u < 1) {
        errs.push(FieldError::required(
            format!("{tpath}.averageUtilization"),
            "must be set and positive",
        ));
    }
}

/// One direction's scaling rules: policy selection, stabilization window,
/// tolerance, and each policy's type, value and period.
fn scaling_rules(errs: &mut Errors, path: &str, rules: &HPAScalingRules) {
    const SELECT: [&str; 3] = ["Disabled", "Max", "Min"];
    if let Some(p) = rules.select_policy.as_deref() {
        if !SELECT.contains(&p) {
            errs.push(FieldError::not_supported(
                format!("{path}.selectPolicy"),
                &json!(p),
                &SELECT,
            ));
        }
    }
    if let Some(w) = rules.stabilization_window_seconds {
        if !(0..=3600).contains(&w) {
            errs.push(FieldError::invalid(
                format!("{path}.stabilizationWindowSeconds"),
                &json!(w),
                "must be less than or equal to 3600 and greater than or equal to 0",
            ));
        }
    }
    if let Some(t) = rules.tolerance.as_ref() {
        if !Quantity::parse(&t.0).is_ok_and(|q| q.millis() >= 0) {
            errs.push(FieldError::invalid(
                format!("{path}.tolerance"),
                &json!(t.0),
                "must be greater than or equal to 0",
            ));
        }
    }
    for (i, p) in rules.policies.iter().flatten().enumerate() {
        let pp = format!("{path}.policies[{i}]");
        if !["Percent", "Pods"].contains(&p.type_.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{pp}.type"),
                &json!(p.type_),
                &["Percent", "Pods"],
            ));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid(
                format!("{pp}.value"),
                &json!(p.value),
                "must be greater than zero",
            ));
        }
        if !(1..=1800).contains(&p.period_seconds) {
            errs.push(FieldError::invalid(
                format!("{pp}.periodSeconds"),
                &json!(p.period_seconds),
                "must be greater than zero and less than or equal to 1800",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn check(spec: Value) -> Vec<String> {
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({"spec": spec})).unwrap();
        let mut errs = Vec::new();
        validate_hpa(&hpa, None, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    fn target() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    }

    #[test]
    fn a_target_and_a_replica_range() {
        assert!(
            check(json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3}))
                .is_empty()
        );
        assert_eq!(
            check(json!({"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 0})),
            [
                "spec.scaleTargetRef.name: Required value",
                "spec.maxReplicas: Invalid value: 0: must be greater than or equal to 1",
                "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            ]
        );
        assert_eq!(
            check(json!({"scaleTargetRef": target(), "minReplicas": 4, "maxReplicas": 3})),
            ["spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`"]
        );
    }

    #[test]
    fn metrics_name_a_known_type_and_target() {
        let metrics = json!([
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "Resource", "resource": {"name": "", "target": {"type": "Utilization"}}},
            {"type": "Custom"},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Average"}}},
        ]);
        assert_eq!(
            check(json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": metrics})),
            [
                "spec.metrics[1].resource.name: Required value",
                "spec.metrics[1].resource.target.averageUtilization: Required value: must be set and positive",
                "spec.metrics[2].type: Unsupported value: \"Custom\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
                "spec.metrics[3].resource.target.type: Unsupported value: \"Average\": supported values: \"AverageValue\", \"Utilization\", \"Value\"",
            ]
        );
    }

    #[test]
    fn behavior_bounds_windows_tolerances_and_policies() {
        let behavior = json!({
            "scaleUp": {"selectPolicy": "Max", "stabilizationWindowSeconds": 0, "tolerance": "0.05",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
            "scaleDown": {"selectPolicy": "Most", "stabilizationWindowSeconds": 3601, "tolerance": "-1",
                          "policies": [{"type": "Nodes", "value": 0, "periodSeconds": 1801}]}});
        assert_eq!(
            check(json!({"scaleTargetRef": target(), "maxReplicas": 3, "behavior": behavior})),
            [
                "spec.behavior.scaleDown.selectPolicy: Unsupported value: \"Most\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600 and greater than or equal to 0",
                "spec.behavior.scaleDown.tolerance: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.behavior.scaleDown.policies[0].type: Unsupported value: \"Nodes\": supported values: \"Percent\", \"Pods\"",
                "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 1801: must be greater than zero and less than or equal to 1800",
            ]
        );
    }
}
