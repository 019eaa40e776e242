//! PodDisruptionBudget (policy/v1): one bound, minAvailable or
//! maxUnavailable, each a non-negative number or a percentage; a valid
//! selector (an empty one selects every pod of the namespace, as in
//! Kubernetes' policy/v1).

use super::apps::int_or_percent_error;
use super::{Errors, FieldError};
use minik8s_api::selector::Selector;
use serde_json::Value;

pub(super) fn validate_pdb(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let bound = |f: &str| spec.get(f).filter(|v| !v.is_null());
    if let (Some(_), Some(max)) = (bound("minAvailable"), bound("maxUnavailable")) {
        errs.push(FieldError::invalid(
            "spec",
            max,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for field in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = bound(field) {
            if let Some(e) = int_or_percent_error(v, false) {
                errs.push(FieldError::invalid(format!("spec.{field}"), v, e));
            }
        }
    }
    if let Some(policy) = spec
        .get("unhealthyPodEvictionPolicy")
        .filter(|p| !p.is_null())
    {
        if !matches!(policy.as_str(), Some("IfHealthyBudget" | "AlwaysAllow")) {
            errs.push(FieldError::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                &["AlwaysAllow", "IfHealthyBudget"],
            ));
        }
    }
    if let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) {
        let parsed = serde_json::from_value(sel.clone())
            .map_err(|e| e.to_string())
            .and_then(|ls| Selector::from_label_selector(&ls));
        if let Err(e) = parsed {
            errs.push(FieldError::invalid("spec.selector", sel, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_bound_each_an_int_or_a_percent() {
        let check = |spec: Value| {
            let mut errs = Vec::new();
            validate_pdb(&json!({"spec": spec}), &mut errs);
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        assert!(
            check(json!({"minAvailable": 2, "selector": {"matchLabels": {"a": "b"}}})).is_empty()
        );
        assert!(check(json!({"maxUnavailable": "25%"})).is_empty());
        let both = check(json!({"minAvailable": 1, "maxUnavailable": 1}));
        assert!(
            both[0].contains("minAvailable and maxUnavailable cannot be both set"),
            "{both:?}"
        );
        let bad = check(json!({"minAvailable": "half"}));
        assert!(
            bad[0].starts_with("spec.minAvailable: Invalid value"),
            "{bad:?}"
        );
        assert!(
            check(json!({"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"}))
                .is_empty()
        );
        assert_eq!(
            check(json!({"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "Never"})),
            ["spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""]
        );
        let negative = check(json!({"maxUnavailable": -1}));
        assert!(
            negative[0].contains("must be greater than or equal to 0"),
            "{negative:?}"
        );
    }
}
