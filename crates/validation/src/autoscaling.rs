//! HorizontalPodAutoscaler (autoscaling/v2): target, replicas, metrics, behavior.

use super::*;

pub(super) fn validate_hpa(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let target = spec.get("scaleTargetRef").cloned().unwrap_or(Value::Null);
    for f in ["kind", "name"] {
        if non_empty_str(&target, f).is_none() {
            errs.push(FieldError::required(format!("spec.scaleTargetRef.{f}"), ""));
        }
    }
    let max = spec.get("maxReplicas").and_then(Value::as_i64);
    match max {
        None => errs.push(FieldError::required("spec.maxReplicas", "")),
        Some(m) if m < 1 => errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &spec["maxReplicas"],
            "must be greater than or equal to 1",
        )),
        _ => {}
    }
    if let Some(min) = spec.get("minReplicas").and_then(Value::as_i64) {
        if min < 1 {
            errs.push(FieldError::invalid(
                "spec.minReplicas",
                &spec["minReplicas"],
                "must be greater than or equal to 1",
            ));
        } else if max.is_some_and(|m| m < min) {
            errs.push(FieldError::invalid(
                "spec.maxReplicas",
                &spec["maxReplicas"],
                "must be greater than or equal to `minReplicas`",
            ));
        }
    }
    for (i, m) in arr(&spec, "metrics").iter().enumerate() {
        let mp = format!("spec.metrics[{i}]");
        match str_at(m, "type") {
            None => errs.push(FieldError::required(format!("{mp}.type"), "")),
            Some(t) => {
                check_enum(
                    errs,
                    m,
                    "type",
                    &mp,
                    &[
                        "ContainerResource",
                        "External",
                        "Object",
                        "Pods",
                        "Resource",
                    ],
                );
                if t == "Resource" {
                    let r = m.get("resource").cloned().unwrap_or(Value::Null);
                    if non_empty_str(&r, "name").is_none() {
                        errs.push(FieldError::required(format!("{mp}.resource.name"), ""));
                    }
                    match r.get("target") {
                        None => {
                            errs.push(FieldError::required(format!("{mp}.resource.target"), ""))
                        }
                        Some(tg) => {
                            check_enum(
                                errs,
                                tg,
                                "type",
                                &format!("{mp}.resource.target"),
                                &["AverageValue", "Utilization", "Value"],
                            );
                            if str_at(tg, "type") == Some("Utilization")
                                && tg
                                    .get("averageUtilization")
                                    .and_then(Value::as_i64)
                                    .is_none_or(|u| u < 1)
                            {
                                errs.push(FieldError::required(
                                    format!("{mp}.resource.target.averageUtilization"),
                                    "must be set and positive",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    for dir in ["scaleUp", "scaleDown"] {
        if let Some(rules) = spec.pointer(&format!("/behavior/{dir}")) {
            let rp = format!("spec.behavior.{dir}");
            check_enum(
                errs,
                rules,
                "selectPolicy",
                &rp,
                &["Disabled", "Max", "Min"],
            );
            if let Some(w) = rules.get("stabilizationWindowSeconds") {
                if !w.as_i64().is_some_and(|w| (0..=3600).contains(&w)) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.stabilizationWindowSeconds"),
                        w,
                        "must be less than or equal to 3600 and greater than or equal to 0",
                    ));
                }
            }
            if let Some(t) = rules.get("tolerance").filter(|t| !t.is_null()) {
                let negative = match t {
                    Value::String(q) => {
                        minik8s_api::quantity::Quantity::parse(q).map_or(true, |q| q.millis() < 0)
                    }
                    Value::Number(n) => n.as_f64().is_none_or(|n| n < 0.0),
                    _ => true,
                };
                if negative {
                    errs.push(FieldError::invalid(
                        format!("{rp}.tolerance"),
                        t,
                        "must be greater than or equal to 0",
                    ));
                }
            }
            for (i, p) in arr(rules, "policies").iter().enumerate() {
                let pp = format!("{rp}.policies[{i}]");
                check_enum(errs, p, "type", &pp, &["Percent", "Pods"]);
                if p.get("value")
                    .and_then(Value::as_i64)
                    .is_none_or(|v| v <= 0)
                {
                    errs.push(FieldError::invalid(
                        format!("{pp}.value"),
                        p.get("value").unwrap_or(&Value::Null),
                        "must be greater than zero",
                    ));
                }
                if !p
                    .get("periodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|v| (1..=1800).contains(&v))
                {
                    errs.push(FieldError::invalid(
                        format!("{pp}.periodSeconds"),
                        p.get("periodSeconds").unwrap_or(&Value::Null),
                        "must be greater than zero and less than or equal to 1800",
                    ));
                }
            }
        }
    }
}
