//! PodDisruptionBudget (policy/v1): one bound, minAvailable or
//! maxUnavailable, each a non-negative number or a percentage; a valid
//! selector (an empty one selects every pod of the namespace, as in
//! Kubernetes' policy/v1).

use super::apps::int_or_percent_error;
use super::{Errors, FieldError};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use minik8s_api::selector::Selector;
use serde_json::json;

pub(super) fn validate_pdb(
    pdb: &PodDisruptionBudget,
    _old: Option<&PodDisruptionBudget>,
    errs: &mut Errors,
) {
    let Some(spec) = pdb.spec.as_ref() else {
        return;
    };
    if let (Some(_), Some(max)) = (&spec.min_available, &spec.max_unavailable) {
        errs.push(FieldError::invalid(
            "spec",
            &json!(max),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, bound) in [
        ("minAvailable", &spec.min_available),
        ("maxUnavailable", &spec.max_unavailable),
    ] {
        if let Some(v) = bound {
            let v = json!(v);
            if let Some(e) = int_or_percent_error(&v, false) {
                errs.push(FieldError::invalid(format!("spec.{field}"), &v, e));
            }
        }
    }
    if let Some(policy) = spec.unhealthy_pod_eviction_policy.as_deref() {
        if !matches!(policy, "IfHealthyBudget" | "AlwaysAllow") {
            errs.push(FieldError::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                &json!(policy),
                &["AlwaysAllow", "IfHealthyBudget"],
            ));
        }
    }
    if let Some(sel) = spec.selector.as_ref() {
        if let Err(e) = Selector::from_label_selector(sel) {
            errs.push(FieldError::invalid("spec.selector", &json!(sel), e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn one_bound_each_an_int_or_a_percent() {
        let check = |spec: Value| {
            let mut errs = Vec::new();
            let pdb = serde_json::from_value(json!({"spec": spec})).unwrap();
            validate_pdb(&pdb, None, &mut errs);
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
