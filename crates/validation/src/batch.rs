//! Job: counts, the completion mode, the restart policy its pods may have,
//! the selector against the template, and what may not change once created
//! (Kubernetes' ValidateJob and ValidateJobUpdate, with their messages).

use super::apps::labels_string;
use super::*;
use minik8s_api::selector::Selector;

fn positive(errs: &mut Errors, spec: &Value, key: &str) {
    if let Some(v) = spec.get(key).and_then(Value::as_i64) {
        if v <= 0 {
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                &Value::from(v),
                "must be greater than 0",
            ));
        }
    }
}

/// The parts of a Job spec a CronJob's template is checked for too.
fn validate_job_spec(spec: &Value, path: &str, errs: &mut Errors) {
    for key in [
        "parallelism",
        "completions",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        check_non_negative(errs, spec, key, path);
    }
    match spec.pointer("/template/spec/restartPolicy") {
        Some(rp) if rp == "OnFailure" || rp == "Never" => {}
        Some(rp) => errs.push(FieldError::not_supported(
            format!("{path}.template.spec.restartPolicy"),
            rp,
            &["OnFailure", "Never"],
        )),
        None => errs.push(FieldError::required(
            format!("{path}.template.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        )),
    }
    match spec.pointer("/template/spec") {
        Some(ps) => validate_pod_spec_json(ps, &format!("{path}.template.spec"), errs),
        None => errs.push(FieldError::required(format!("{path}.template"), "")),
    }
}

pub(super) fn validate_cron_job(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) {
        // Its Jobs are named <name>-<minutes since 1970>: 11 more characters.
        if name.len() > 52 {
            errs.push(FieldError::invalid(
                "metadata.name",
                &Value::from(name),
                "must be no more than 52 characters",
            ));
        }
    }
    match spec.get("schedule").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.schedule", "")),
        Some(s) => {
            if let Err(e) = minik8s_api::cron::parse(s) {
                errs.push(FieldError::invalid("spec.schedule", &Value::from(s), e));
            }
        }
    }
    if let Some(tz) = spec.get("timeZone").and_then(Value::as_str) {
        if let Err(e) = minik8s_api::cron::time_zone(Some(tz)) {
            errs.push(FieldError::invalid("spec.timeZone", &Value::from(tz), e));
        }
    }
    check_enum(
        errs,
        &spec,
        "concurrencyPolicy",
        "spec",
        &["Allow", "Forbid", "Replace"],
    );
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        check_non_negative(errs, &spec, key, "spec");
    }
    match spec.pointer("/jobTemplate/spec") {
        Some(js) => validate_job_spec(js, "spec.jobTemplate.spec", errs),
        None => errs.push(FieldError::required("spec.jobTemplate.spec", "")),
    }
}

pub(super) fn validate_job(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    positive(errs, &spec, "activeDeadlineSeconds");
    check_enum(
        errs,
        &spec,
        "completionMode",
        "spec",
        &["NonIndexed", "Indexed"],
    );
    if spec.get("completionMode") == Some(&Value::from("Indexed")) {
        if spec.get("completions").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                "spec.completions",
                "when completion mode is Indexed",
            ));
        }
        let completions = spec.get("completions").and_then(Value::as_i64);
        if completions.is_some_and(|c| c > 100_000) {
            errs.push(FieldError::invalid(
                "spec.completions",
                spec.get("completions").unwrap_or(&Value::Null),
                "must be less than or equal to 100000 when completion mode is Indexed",
            ));
        }
    }
    validate_job_spec(&spec, "spec", errs);
    validate_policies(&spec, errs);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => {
            let labels = minik8s_api::selector::labels_of(&serde_json::json!({"metadata": {
                "labels": spec.pointer("/template/metadata/labels").cloned().unwrap_or(Value::Null)}}));
            let parsed = serde_json::from_value(sel.clone())
                .map_err(|e| e.to_string())
                .and_then(|ls| Selector::from_label_selector(&ls));
            match parsed {
                Err(e) => errs.push(FieldError::invalid("spec.selector", sel, e)),
                Ok(s) if !s.matches(&labels) => errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    &Value::String(labels_string(&labels)),
                    "`selector` does not match template `labels`",
                )),
                Ok(_) => {}
            }
        }
    }
    let Some(old) = old else { return };
    for (path, pointer) in [
        ("spec.completions", "/spec/completions"),
        ("spec.selector", "/spec/selector"),
        ("spec.completionMode", "/spec/completionMode"),
    ] {
        if obj.pointer(pointer) != old.pointer(pointer) {
            errs.push(FieldError::invalid(
                path,
                obj.pointer(pointer).unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    // The template may change only while the Job is suspended (and has not started).
    let suspended = old.pointer("/spec/suspend") == Some(&Value::Bool(true));
    if !suspended && obj.pointer("/spec/template") != old.pointer("/spec/template") {
        errs.push(FieldError::invalid(
            "spec.template",
            &Value::String("(the pod template)".into()),
            "field is immutable",
        ));
    }
}

/// `podFailurePolicy` (restartPolicy Never; one requirement per rule; an
/// action Kubernetes knows) and `successPolicy` (Indexed Jobs; each rule
/// names indexes or a count).
fn validate_policies(spec: &Value, errs: &mut Errors) {
    if let Some(policy) = spec.get("podFailurePolicy").filter(|p| !p.is_null()) {
        let restart = spec.pointer("/template/spec/restartPolicy");
        if let Some(rp) = restart.filter(|rp| *rp != "Never") {
            errs.push(FieldError::invalid(
                "spec.template.spec.restartPolicy",
                rp,
                "only \"Never\" is supported when podFailurePolicy is specified",
            ));
        }
        let per_index = spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null());
        for (i, rule) in arr(policy, "rules").iter().enumerate() {
            let path = format!("spec.podFailurePolicy.rules[{i}]");
            let action = rule.get("action").unwrap_or(&Value::Null);
            match action.as_str() {
                Some("FailJob" | "Ignore" | "Count") => {}
                Some("FailIndex") if per_index => {}
                Some("FailIndex") => errs.push(FieldError::forbidden(
                    format!("{path}.action"),
                    "the 'FailIndex' action can only be used when backoffLimitPerIndex is set",
                )),
                _ => errs.push(FieldError::not_supported(
                    format!("{path}.action"),
                    action,
                    &["Count", "FailIndex", "FailJob", "Ignore"],
                )),
            }
            let codes = rule.get("onExitCodes").filter(|v| !v.is_null());
            let conditions = rule.get("onPodConditions").filter(|v| !v.is_null());
            if codes.is_some() == conditions.is_some() {
                errs.push(FieldError {
                    kind: ErrorType::Invalid,
                    field: path.clone(),
                    value: None,
                    detail: "specifying one of OnExitCodes and OnPodConditions is required".into(),
                });
            }
            if let Some(codes) = codes {
                let op = codes.get("operator").unwrap_or(&Value::Null);
                if !matches!(op.as_str(), Some("In" | "NotIn")) {
                    errs.push(FieldError::not_supported(
                        format!("{path}.onExitCodes.operator"),
                        op,
                        &["In", "NotIn"],
                    ));
                }
                let values = arr(codes, "values");
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{path}.onExitCodes.values"),
                        "at least one value is required",
                    ));
                }
                for (j, v) in values.iter().enumerate() {
                    if op == "In" && v == 0 {
                        errs.push(FieldError::invalid(
                            format!("{path}.onExitCodes.values[{j}]"),
                            v,
                            "must not be 0 for the In operator",
                        ));
                    }
                    if values[..j].contains(v) {
                        errs.push(FieldError::duplicate(
                            format!("{path}.onExitCodes.values[{j}]"),
                            v,
                        ));
                    }
                }
            }
        }
    }
    let indexed = spec.get("completionMode") == Some(&Value::from("Indexed"));
    let per_index = spec.get("backoffLimitPerIndex").filter(|v| !v.is_null());
    if let Some(v) = per_index {
        if v.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                "spec.backoffLimitPerIndex",
                v,
                "must be greater than or equal to 0",
            ));
        } else if !indexed {
            errs.push(FieldError::invalid(
                "spec.backoffLimitPerIndex",
                v,
                "requires indexed completion mode",
            ));
        }
    }
    if let Some(v) = spec.get("maxFailedIndexes").filter(|v| !v.is_null()) {
        let completions = spec.get("completions").and_then(Value::as_i64).unwrap_or(0);
        if per_index.is_none() {
            errs.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                v,
                "requires backoffLimitPerIndex to be set",
            ));
        } else if v.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                v,
                "must be greater than or equal to 0",
            ));
        } else if v.as_i64().is_some_and(|n| n > completions) {
            errs.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                v,
                "must be less than or equal to completions",
            ));
        }
    }
    if let Some(policy) = spec.get("successPolicy").filter(|p| !p.is_null()) {
        if spec.get("completionMode") != Some(&Value::from("Indexed")) {
            errs.push(FieldError::invalid(
                "spec.completionMode",
                spec.get("completionMode").unwrap_or(&Value::Null),
                "requires indexed completion mode",
            ));
        }
        let completions = spec.get("completions").and_then(Value::as_i64).unwrap_or(0);
        for (i, rule) in arr(policy, "rules").iter().enumerate() {
            let path = format!("spec.successPolicy.rules[{i}]");
            let count = rule.get("succeededCount").filter(|v| !v.is_null());
            let indexes = rule.get("succeededIndexes").filter(|v| !v.is_null());
            if count.is_none() && indexes.is_none() {
                errs.push(FieldError::required(
                    path.clone(),
                    "at least one of succeededCount or succeededIndexes must be specified",
                ));
            }
            if let Some(c) = count {
                if c.as_i64().is_none_or(|c| c < 0 || c > completions) {
                    errs.push(FieldError::invalid(
                        format!("{path}.succeededCount"),
                        c,
                        format!("must be greater than or equal to 0 and less than or equal to {completions}"),
                    ));
                }
            }
            if let Some(ix) = indexes {
                let valid = ix.as_str().is_some_and(|s| index_list_ok(s, completions));
                if !valid {
                    errs.push(FieldError::invalid(
                        format!("{path}.succeededIndexes"),
                        ix,
                        format!("error parsing succeededIndexes: must be ordered intervals of indexes below {completions}"),
                    ));
                }
            }
        }
    }
}

/// "0,2-3,7": ordered, non-overlapping indexes and intervals below `limit`.
fn index_list_ok(s: &str, limit: i64) -> bool {
    let mut last = -1;
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(a), Ok(b)) = (a.trim().parse::<i64>(), b.trim().parse::<i64>()) else {
            return false;
        };
        if a <= last || b < a || b >= limit {
            return false;
        }
        last = b;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(spec: Value) -> Value {
        let mut j = json!({"metadata": {"name": "j"}, "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u"}},
                         "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
        for (k, v) in spec.as_object().unwrap() {
            j["spec"][k] = v.clone();
        }
        j
    }

    fn messages(obj: &Value, old: Option<&Value>) -> Vec<String> {
        let mut errs = Vec::new();
        validate_job(obj, old, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn counts_modes_and_restart_policy() {
        assert!(messages(&job(json!({"completions": 3, "parallelism": 2})), None).is_empty());
        assert_eq!(
            messages(&job(json!({"parallelism": -1})), None),
            ["spec.parallelism: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            messages(&job(json!({"completionMode": "Indexed"})), None),
            ["spec.completions: Required value: when completion mode is Indexed"]
        );
        assert_eq!(
            messages(&job(json!({"activeDeadlineSeconds": 0})), None),
            ["spec.activeDeadlineSeconds: Invalid value: 0: must be greater than 0"]
        );
        let mut always = job(json!({}));
        always["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        assert_eq!(
            messages(&always, None),
            ["spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
        );
    }

    #[test]
    fn failure_and_success_policies() {
        let ok = job(json!({"completionMode": "Indexed", "completions": 4,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "successPolicy": {"rules": [{"succeededIndexes": "0,2-3"}, {"succeededCount": 2}]}}));
        assert!(messages(&ok, None).is_empty(), "{:?}", messages(&ok, None));
        let bad = job(json!({"podFailurePolicy": {"rules": [
                {"action": "Retry", "onExitCodes": {"operator": "In", "values": [0, 3, 3]}},
                {"action": "FailIndex"}]},
            "successPolicy": {"rules": [{}]}}));
        assert_eq!(
            messages(&bad, None),
            [
                "spec.podFailurePolicy.rules[0].action: Unsupported value: \"Retry\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
                "spec.podFailurePolicy.rules[1].action: Forbidden: the 'FailIndex' action can only be used when backoffLimitPerIndex is set",
                "spec.podFailurePolicy.rules[1]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                "spec.completionMode: Invalid value: null: requires indexed completion mode",
                "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            ]
        );
        assert_eq!(
            messages(&job(json!({"backoffLimitPerIndex": 1})), None),
            ["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
        );
        assert_eq!(
            messages(&job(json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1, "maxFailedIndexes": 3})), None),
            ["spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"]
        );
        let mut on_failure = job(json!({"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1]}}]}}));
        on_failure["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        assert_eq!(
            messages(&on_failure, None),
            ["spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified"]
        );
    }

    #[test]
    fn the_template_is_frozen_unless_suspended() {
        let old = job(json!({"completions": 1}));
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx");
        assert_eq!(
            messages(&new, Some(&old)),
            ["spec.template: Invalid value: \"(the pod template)\": field is immutable"]
        );
        let mut suspended = old.clone();
        suspended["spec"]["suspend"] = json!(true);
        let mut new = suspended.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx");
        assert!(messages(&new, Some(&suspended)).is_empty());
        let mut more = old.clone();
        more["spec"]["completions"] = json!(2);
        assert_eq!(
            messages(&more, Some(&old)),
            ["spec.completions: Invalid value: 2: field is immutable"]
        );
    }
}
