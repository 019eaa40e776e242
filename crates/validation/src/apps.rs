//! ReplicaSet, StatefulSet and Deployment: replicas, selector against
//! template labels, update strategies; int-or-percent values.

use super::*;
use minik8s_api::selector::Selector;

pub(super) fn validate_replicated(obj: &Value, old: Option<&Value>, kind: &str, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    check_non_negative(errs, &spec, "replicas", "spec");
    check_non_negative(errs, &spec, "minReadySeconds", "spec");
    let template_labels = spec
        .pointer("/template/metadata/labels")
        .cloned()
        .unwrap_or(Value::Null);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => match serde_json::from_value(sel.clone())
            .map_err(|e| e.to_string())
            .and_then(|ls| Selector::from_label_selector(&ls))
        {
            Err(e) => errs.push(FieldError::invalid("spec.selector", sel, e)),
            Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
                "spec.selector",
                sel,
                "empty selector is invalid for deployment",
            )),
            Ok(s) => {
                let labels = minik8s_api::selector::labels_of(
                    &serde_json::json!({"metadata": {"labels": template_labels}}),
                );
                if !s.matches(&labels) {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        &Value::String(labels_string(&labels)),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        },
    }
    validate_labels(
        spec.pointer("/template/metadata").unwrap_or(&Value::Null),
        "spec.template.metadata.labels",
        errs,
    );
    match spec.pointer("/template/spec") {
        Some(ps) => {
            let ps = &super::storage::with_template_volumes(ps, spec.get("volumeClaimTemplates"));
            validate_pod_spec_json(ps, "spec.template.spec", errs);
            if let Some(rp) = ps.get("restartPolicy") {
                if rp != "Always" {
                    errs.push(FieldError::not_supported(
                        "spec.template.spec.restartPolicy",
                        rp,
                        &["Always"],
                    ));
                }
            }
        }
        None => errs.push(FieldError::required("spec.template", "")),
    }
    if kind == "StatefulSet" {
        check_enum(
            errs,
            &spec,
            "podManagementPolicy",
            "spec",
            &["OrderedReady", "Parallel"],
        );
        if let Some(us) = spec.get("updateStrategy") {
            check_enum(
                errs,
                us,
                "type",
                "spec.updateStrategy",
                &["RollingUpdate", "OnDelete"],
            );
            if let Some(ru) = us.get("rollingUpdate") {
                check_non_negative(errs, ru, "partition", "spec.updateStrategy.rollingUpdate");
                if let Some(mu) = ru.get("maxUnavailable") {
                    if let Some(e) = int_or_percent_error(mu, false) {
                        errs.push(FieldError::invalid(
                            "spec.updateStrategy.rollingUpdate.maxUnavailable",
                            mu,
                            e,
                        ));
                    }
                }
            }
        }
        if let Some(start) = spec.pointer("/ordinals/start") {
            if start.as_i64().is_some_and(|n| n < 0) {
                errs.push(FieldError::invalid(
                    "spec.ordinals.start",
                    start,
                    "must be greater than or equal to 0",
                ));
            }
        }
        for (i, t) in spec
            .get("volumeClaimTemplates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            super::storage::validate_claim_spec_json(
                t.get("spec").unwrap_or(&Value::Null),
                &format!("spec.volumeClaimTemplates[{i}].spec"),
                errs,
            );
        }
        if let Some(p) = spec.get("persistentVolumeClaimRetentionPolicy") {
            for f in ["whenDeleted", "whenScaled"] {
                check_enum(
                    errs,
                    p,
                    f,
                    "spec.persistentVolumeClaimRetentionPolicy",
                    &["Retain", "Delete"],
                );
            }
        }
        if let Some(name) = non_empty_str(&spec, "serviceName") {
            if let Some(e) = dns1123_label_error(name) {
                errs.push(FieldError::invalid(
                    "spec.serviceName",
                    &Value::String(name.into()),
                    e,
                ));
            }
        }
    }
    if let Some(old) = old {
        if old.pointer("/spec/selector") != obj.pointer("/spec/selector") {
            errs.push(FieldError::invalid(
                "spec.selector",
                obj.pointer("/spec/selector").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if kind == "StatefulSet" {
            let strip = |v: &Value| {
                let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
                if let Some(m) = s.as_object_mut() {
                    for f in [
                        "replicas",
                        "ordinals",
                        "template",
                        "updateStrategy",
                        "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds",
                        "revisionHistoryLimit",
                    ] {
                        m.remove(f);
                    }
                }
                s
            };
            if strip(obj) != strip(old) {
                errs.push(FieldError::forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"));
            }
        }
    }
}

pub(super) fn labels_string(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `IntOrString` rules for maxUnavailable/maxSurge: non-negative int or `N%` (≤100% unless `allow_over`).
/// Deployment's own rules: the strategy, its surge and unavailability, the
/// progress deadline and history limit.
pub(super) fn validate_deployment_spec(spec: &Value, errs: &mut Errors) {
    check_non_negative(errs, spec, "revisionHistoryLimit", "spec");
    check_non_negative(errs, spec, "progressDeadlineSeconds", "spec");
    if let (Some(deadline), Some(min_ready)) = (
        spec.get("progressDeadlineSeconds").and_then(Value::as_i64),
        spec.get("minReadySeconds").and_then(Value::as_i64),
    ) {
        if deadline <= min_ready {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                &Value::from(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
    let Some(strategy) = spec.get("strategy") else {
        return;
    };
    check_enum(
        errs,
        strategy,
        "type",
        "spec.strategy",
        &["Recreate", "RollingUpdate"],
    );
    let Some(ru) = strategy.get("rollingUpdate").filter(|r| !r.is_null()) else {
        return;
    };
    if strategy.get("type") == Some(&Value::from("Recreate")) {
        errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        ));
        return;
    }
    let mut zero = [false, false];
    for (i, field) in ["maxUnavailable", "maxSurge"].into_iter().enumerate() {
        let Some(v) = ru.get(field) else { continue };
        match int_or_percent_error(v, false) {
            Some(e) => errs.push(FieldError::invalid(
                format!("spec.strategy.rollingUpdate.{field}"),
                v,
                e,
            )),
            None => zero[i] = v == &Value::from(0) || v == &Value::from("0%"),
        }
    }
    if zero == [true, true] {
        errs.push(FieldError::invalid(
            "spec.strategy.rollingUpdate.maxUnavailable",
            ru.get("maxUnavailable").unwrap_or(&Value::Null),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

pub fn int_or_percent_error(v: &Value, allow_over: bool) -> Option<String> {
    match v {
        Value::Number(n) => (n.as_i64().is_none_or(|n| n < 0)).then(|| "must be greater than or equal to 0".into()),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            None => Some("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')".into()),
            Some(p) if p < 0 => Some("must be greater than or equal to 0".into()),
            Some(p) if p > 100 && !allow_over => Some("must not be greater than 100%".into()),
            _ => None,
        },
        _ => Some("must be an integer or percentage".into()),
    }
}
