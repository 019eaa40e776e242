//! Job and CronJob: counts, the completion mode, the restart policy its
//! pods may have, the selector against the template, failure and success
//! policies, and what may not change once created (Kubernetes' ValidateJob,
//! ValidateJobUpdate and ValidateCronJob, with their messages), on the
//! typed objects.

use super::apps::labels_string;
use super::*;
use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec, PodFailurePolicy, SuccessPolicy};
use minik8s_api::selector::Selector;
use serde_json::json;

/// A count that must be above zero when set.
fn positive(errs: &mut Errors, value: Option<i64>, path: &str) {
    if let Some(v) = value.filter(|v| *v <= 0) {
        errs.push(FieldError::invalid(
            path,
            &json!(v),
            "must be greater than 0",
        ));
    }
}

/// A count that must not be negative when set.
fn non_negative(errs: &mut Errors, value: Option<i64>, path: &str) {
    if let Some(v) = value.filter(|v| *v < 0) {
        errs.push(FieldError::invalid(
            path,
            &json!(v),
            "must be greater than or equal to 0",
        ));
    }
}

/// The parts of a Job spec a CronJob's template is checked for too.
fn validate_job_spec(spec: &JobSpec, path: &str, errs: &mut Errors) {
    for (key, v) in [
        ("parallelism", spec.parallelism),
        ("completions", spec.completions),
        ("backoffLimit", spec.backoff_limit),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
    ] {
        non_negative(errs, v.map(i64::from), &format!("{path}.{key}"));
    }
    let pod = spec.template.spec.as_ref();
    let rp_path = format!("{path}.template.spec.restartPolicy");
    match pod.and_then(|p| p.restart_policy.as_deref()) {
        Some("OnFailure" | "Never") => {}
        Some(rp) => errs.push(FieldError::not_supported(
            rp_path,
            &json!(rp),
            &["OnFailure", "Never"],
        )),
        None => errs.push(FieldError::required(
            rp_path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
    }
    match pod {
        Some(ps) => validate_pod_spec(ps, &format!("{path}.template.spec"), errs),
        None => errs.push(FieldError::required(format!("{path}.template"), "")),
    }
}

pub(super) fn validate_cron_job(cron: &CronJob, _old: Option<&CronJob>, errs: &mut Errors) {
    if let Some(name) = cron.metadata.name.as_deref() {
        // Its Jobs are named <name>-<minutes since 1970>: 11 more characters.
        if name.len() > 52 {
            errs.push(FieldError::invalid(
                "metadata.name",
                &json!(name),
                "must be no more than 52 characters",
            ));
        }
    }
    let spec = &cron.spec;
    if spec.schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else if let Err(e) = minik8s_api::cron::parse(&spec.schedule) {
        errs.push(FieldError::invalid(
            "spec.schedule",
            &json!(spec.schedule),
            e,
        ));
    }
    if let Some(tz) = spec.time_zone.as_deref() {
        if let Err(e) = minik8s_api::cron::time_zone(Some(tz)) {
            errs.push(FieldError::invalid("spec.timeZone", &json!(tz), e));
        }
    }
    one_of(
        errs,
        spec.concurrency_policy.as_deref(),
        "spec.concurrencyPolicy",
        &["Allow", "Forbid", "Replace"],
    );
    non_negative(
        errs,
        spec.starting_deadline_seconds,
        "spec.startingDeadlineSeconds",
    );
    for (key, v) in [
        (
            "successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit,
        ),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ] {
        non_negative(errs, v.map(i64::from), &format!("spec.{key}"));
    }
    match &spec.job_template.spec {
        Some(js) => validate_job_spec(js, "spec.jobTemplate.spec", errs),
        None => errs.push(FieldError::required("spec.jobTemplate.spec", "")),
    }
}

pub(super) fn validate_job(job: &Job, old: Option<&Job>, errs: &mut Errors) {
    let empty = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&empty);
    positive(
        errs,
        spec.active_deadline_seconds,
        "spec.activeDeadlineSeconds",
    );
    one_of(
        errs,
        spec.completion_mode.as_deref(),
        "spec.completionMode",
        &["NonIndexed", "Indexed"],
    );
    if spec.completion_mode.as_deref() == Some("Indexed") {
        match spec.completions {
            None => errs.push(FieldError::required(
                "spec.completions",
                "when completion mode is Indexed",
            )),
            Some(c) if c > 100_000 => errs.push(FieldError::invalid(
                "spec.completions",
                &json!(c),
                "must be less than or equal to 100000 when completion mode is Indexed",
            )),
            Some(_) => {}
        }
    }
    validate_job_spec(spec, "spec", errs);
    validate_policies(spec, errs);
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    match &spec.selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => match Selector::from_label_selector(sel) {
            Err(e) => errs.push(FieldError::invalid("spec.selector", &json!(sel), e)),
            Ok(s) if !s.matches(&labels) => errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                &json!(labels_string(&labels)),
                "`selector` does not match template `labels`",
            )),
            Ok(_) => {}
        },
    }
    let Some(old) = old else { return };
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let fixed = [
        (
            "spec.completions",
            json!(spec.completions),
            json!(old_spec.completions),
        ),
        (
            "spec.selector",
            json!(spec.selector),
            json!(old_spec.selector),
        ),
        (
            "spec.completionMode",
            json!(spec.completion_mode),
            json!(old_spec.completion_mode),
        ),
    ];
    for (path, new, was) in fixed {
        if new != was {
            errs.push(FieldError::invalid(path, &new, "field is immutable"));
        }
    }
    // The template may change only while the Job is suspended (and has not started).
    let suspended = old_spec.suspend == Some(true);
    if !suspended && spec.template != old_spec.template {
        errs.push(FieldError::invalid(
            "spec.template",
            &json!("(the pod template)"),
            "field is immutable",
        ));
    }
}

/// `podFailurePolicy` (restartPolicy Never; one requirement per rule; an
/// action Kubernetes knows) and `successPolicy` (Indexed Jobs; each rule
/// names indexes or a count); `backoffLimitPerIndex` and `maxFailedIndexes`.
fn validate_policies(spec: &JobSpec, errs: &mut Errors) {
    if let Some(policy) = &spec.pod_failure_policy {
        validate_pod_failure_policy(spec, policy, errs);
    }
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let per_index = spec.backoff_limit_per_index;
    if let Some(v) = per_index {
        if v < 0 {
            errs.push(FieldError::invalid(
                "spec.backoffLimitPerIndex",
                &json!(v),
                "must be greater than or equal to 0",
            ));
        } else if !indexed {
            errs.push(FieldError::invalid(
                "spec.backoffLimitPerIndex",
                &json!(v),
                "requires indexed completion mode",
            ));
        }
    }
    let completions = i64::from(spec.completions.unwrap_or(0));
    if let Some(v) = spec.max_failed_indexes {
        let why = if per_index.is_none() {
            Some("requires backoffLimitPerIndex to be set")
        } else if v < 0 {
            Some("must be greater than or equal to 0")
        } else if i64::from(v) > completions {
            Some("must be less than or equal to completions")
        } else {
            None
        };
        if let Some(why) = why {
            errs.push(FieldError::invalid("spec.maxFailedIndexes", &json!(v), why));
        }
    }
    if let Some(policy) = &spec.success_policy {
        if !indexed {
            errs.push(FieldError::invalid(
                "spec.completionMode",
                &json!(spec.completion_mode),
                "requires indexed completion mode",
            ));
        }
        validate_success_policy(policy, completions, errs);
    }
}

fn validate_pod_failure_policy(spec: &JobSpec, policy: &PodFailurePolicy, errs: &mut Errors) {
    let restart = spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.restart_policy.as_deref());
    if let Some(rp) = restart.filter(|rp| *rp != "Never") {
        errs.push(FieldError::invalid(
            "spec.template.spec.restartPolicy",
            &json!(rp),
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    let per_index = spec.backoff_limit_per_index.is_some();
    for (i, rule) in policy.rules.iter().enumerate() {
        let path = format!("spec.podFailurePolicy.rules[{i}]");
        match rule.action.as_str() {
            "FailJob" | "Ignore" | "Count" => {}
            "FailIndex" if per_index => {}
            "FailIndex" => errs.push(FieldError::forbidden(
                format!("{path}.action"),
                "the 'FailIndex' action can only be used when backoffLimitPerIndex is set",
            )),
            other => errs.push(FieldError::not_supported(
                format!("{path}.action"),
                &json!(other),
                &["Count", "FailIndex", "FailJob", "Ignore"],
            )),
        }
        let codes = rule.on_exit_codes.as_ref();
        if codes.is_some() == rule.on_pod_conditions.is_some() {
            errs.push(FieldError {
                kind: ErrorType::Invalid,
                field: path.clone(),
                value: None,
                detail: "specifying one of OnExitCodes and OnPodConditions is required".into(),
            });
        }
        let Some(codes) = codes else {
            continue;
        };
        let op = codes.operator.as_str();
        if !matches!(op, "In" | "NotIn") {
            errs.push(FieldError::not_supported(
                format!("{path}.onExitCodes.operator"),
                &json!(op),
                &["In", "NotIn"],
            ));
        }
        if codes.values.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.onExitCodes.values"),
                "at least one value is required",
            ));
        }
        for (j, v) in codes.values.iter().enumerate() {
            let at = format!("{path}.onExitCodes.values[{j}]");
            if op == "In" && *v == 0 {
                errs.push(FieldError::invalid(
                    &at,
                    &json!(v),
                    "must not be 0 for the In operator",
                ));
            }
            if codes.values[..j].contains(v) {
                errs.push(FieldError::duplicate(at, &json!(v)));
            }
        }
    }
}

fn validate_success_policy(policy: &SuccessPolicy, completions: i64, errs: &mut Errors) {
    for (i, rule) in policy.rules.iter().enumerate() {
        let path = format!("spec.successPolicy.rules[{i}]");
        if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
            errs.push(FieldError::required(
                path.clone(),
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        if let Some(c) = rule.succeeded_count {
            if c < 0 || i64::from(c) > completions {
                errs.push(FieldError::invalid(
                    format!("{path}.succeededCount"),
                    &json!(c),
                    format!("must be greater than or equal to 0 and less than or equal to {completions}"),
                ));
            }
        }
        if let Some(ix) = rule.succeeded_indexes.as_deref() {
            if !index_list_ok(ix, completions) {
                errs.push(FieldError::invalid(
                    format!("{path}.succeededIndexes"),
                    &json!(ix),
                    format!("error parsing succeededIndexes: must be ordered intervals of indexes below {completions}"),
                ));
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
        let decode = |v: &Value| serde_json::from_value::<Job>(v.clone()).unwrap();
        let old = old.map(decode);
        validate_job(&decode(obj), old.as_ref(), &mut errs);
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
