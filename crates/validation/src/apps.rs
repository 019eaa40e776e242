//! The replicated workloads: ReplicaSet, ReplicationController,
//! Deployment, DaemonSet and StatefulSet, on their typed objects: replicas,
//! the selector against the template's labels, the template (its pods
//! restart Always), update strategies, a StatefulSet's claim templates and
//! what may not change (Kubernetes' `pkg/apis/apps/validation`).

use super::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PodSpec, PodTemplateSpec, ReplicationController, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::selector::Selector;
use serde_json::json;

/// What every replicated workload has, read from its typed spec.
#[derive(Default)]
struct Replicated<'a> {
    replicas: Option<i32>,
    min_ready_seconds: Option<i32>,
    /// `None` when the selector is left out (a selector of neither
    /// `matchLabels` nor `matchExpressions` decodes the same as none).
    selector: Option<LabelSelector>,
    template: Option<&'a PodTemplateSpec>,
    claim_templates: &'a [PersistentVolumeClaim],
}

/// A selector unless it is the zero value a left-out one decodes to.
fn given(selector: &LabelSelector) -> Option<LabelSelector> {
    let unset = selector.match_labels.is_none() && selector.match_expressions.is_none();
    (!unset).then(|| selector.clone())
}

impl<'a> From<&'a ReplicaSet> for Replicated<'a> {
    fn from(rs: &'a ReplicaSet) -> Self {
        Replicated {
            replicas: rs.spec.replicas,
            min_ready_seconds: rs.spec.min_ready_seconds,
            selector: given(&rs.spec.selector),
            template: rs.spec.template.as_ref(),
            claim_templates: &[],
        }
    }
}

/// A ReplicationController's map selector is read as `matchLabels`.
impl<'a> From<&'a ReplicationController> for Replicated<'a> {
    fn from(rc: &'a ReplicationController) -> Self {
        let spec = rc.spec.as_ref();
        let selector = spec.and_then(|s| s.selector.clone());
        Replicated {
            replicas: spec.and_then(|s| s.replicas),
            min_ready_seconds: spec.and_then(|s| s.min_ready_seconds),
            selector: selector.map(|labels| LabelSelector {
                match_labels: Some(labels),
                match_expressions: None,
            }),
            template: spec.and_then(|s| s.template.as_ref()),
            claim_templates: &[],
        }
    }
}

impl<'a> From<&'a DaemonSet> for Replicated<'a> {
    fn from(ds: &'a DaemonSet) -> Self {
        Replicated {
            min_ready_seconds: ds.spec.min_ready_seconds,
            selector: given(&ds.spec.selector),
            template: Some(&ds.spec.template),
            ..Default::default()
        }
    }
}

impl<'a> From<&'a Deployment> for Replicated<'a> {
    fn from(d: &'a Deployment) -> Self {
        Replicated {
            replicas: d.spec.replicas,
            min_ready_seconds: d.spec.min_ready_seconds,
            selector: given(&d.spec.selector),
            template: Some(&d.spec.template),
            claim_templates: &[],
        }
    }
}

impl<'a> From<&'a StatefulSet> for Replicated<'a> {
    fn from(set: &'a StatefulSet) -> Self {
        let spec = &set.spec;
        Replicated {
            replicas: spec.replicas,
            min_ready_seconds: spec.min_ready_seconds,
            selector: given(&spec.selector),
            template: Some(&spec.template),
            claim_templates: spec.volume_claim_templates.as_deref().unwrap_or_default(),
        }
    }
}

/// The shared rules: non-negative counts, a selector that selects and
/// matches the template's labels, a template whose pods restart Always.
fn validate_replicated(w: &Replicated, errs: &mut Errors) {
    for (key, v) in [
        ("replicas", w.replicas),
        ("minReadySeconds", w.min_ready_seconds),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                &json!(v),
                "must be greater than or equal to 0",
            ));
        }
    }
    let metadata = w.template.and_then(|t| t.metadata.as_ref());
    let template_labels = metadata.and_then(|m| m.labels.clone()).unwrap_or_default();
    match &w.selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => match Selector::from_label_selector(sel) {
            Err(e) => errs.push(FieldError::invalid("spec.selector", &json!(sel), e)),
            Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
                "spec.selector",
                &json!(sel),
                "empty selector is invalid for deployment",
            )),
            Ok(s) if !s.matches(&template_labels) => errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                &json!(labels_string(&template_labels)),
                "`selector` does not match template `labels`",
            )),
            Ok(_) => {}
        },
    }
    validate_label_map(
        metadata.and_then(|m| m.labels.as_ref()),
        "spec.template.metadata.labels",
        errs,
    );
    let Some(spec) = w.template.and_then(|t| t.spec.as_ref()) else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    let spec = with_claim_volumes(spec, w.claim_templates);
    validate_pod_spec(&spec, "spec.template.spec", errs);
    if let Some(rp) = spec.restart_policy.as_deref().filter(|rp| *rp != "Always") {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(rp),
            &["Always"],
        ));
    }
}

/// A pod spec as its pods will have it: each claim template (a
/// StatefulSet's `volumeClaimTemplates`) becomes a volume of its name, so
/// mounts of it are valid.
pub(crate) fn with_claim_volumes(spec: &PodSpec, templates: &[PersistentVolumeClaim]) -> PodSpec {
    let mut spec = spec.clone();
    let names: Vec<&str> = templates
        .iter()
        .filter_map(|t| t.metadata.name.as_deref())
        .collect();
    if names.is_empty() {
        return spec;
    }
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.retain(|v| !names.contains(&v.name.as_str()));
    for name in names {
        let claim = json!({"name": name, "persistentVolumeClaim": {"claimName": name}});
        volumes.push(serde_json::from_value::<Volume>(claim).expect("a claim volume decodes"));
    }
    spec
}

/// The selector may not change.
fn selector_fixed(new: &Option<LabelSelector>, old: &Option<LabelSelector>, errs: &mut Errors) {
    if new != old {
        errs.push(FieldError::invalid(
            "spec.selector",
            &json!(new),
            "field is immutable",
        ));
    }
}

pub(super) fn validate_replica_set(rs: &ReplicaSet, old: Option<&ReplicaSet>, errs: &mut Errors) {
    let w = Replicated::from(rs);
    validate_replicated(&w, errs);
    if let Some(old) = old {
        selector_fixed(&w.selector, &Replicated::from(old).selector, errs);
    }
}

/// A ReplicationController: the ReplicaSet's rules, its map selector read
/// as `matchLabels`.
pub(super) fn validate_replication_controller(
    rc: &ReplicationController,
    old: Option<&ReplicationController>,
    errs: &mut Errors,
) {
    let w = Replicated::from(rc);
    validate_replicated(&w, errs);
    if let Some(old) = old {
        selector_fixed(&w.selector, &Replicated::from(old).selector, errs);
    }
}

pub(super) fn validate_daemon_set(ds: &DaemonSet, old: Option<&DaemonSet>, errs: &mut Errors) {
    let w = Replicated::from(ds);
    validate_replicated(&w, errs);
    let strategy = ds.spec.update_strategy.as_ref();
    one_of(
        errs,
        strategy.and_then(|s| s.type_.as_deref()),
        "spec.updateStrategy.type",
        &["RollingUpdate", "OnDelete"],
    );
    if let Some(old) = old {
        selector_fixed(&w.selector, &Replicated::from(old).selector, errs);
    }
}

pub(super) fn validate_deployment(d: &Deployment, old: Option<&Deployment>, errs: &mut Errors) {
    let w = Replicated::from(d);
    validate_replicated(&w, errs);
    if let Some(old) = old {
        selector_fixed(&w.selector, &Replicated::from(old).selector, errs);
    }
    validate_deployment_strategy(&d.spec, errs);
}

pub(super) fn validate_stateful_set(
    set: &StatefulSet,
    old: Option<&StatefulSet>,
    errs: &mut Errors,
) {
    let w = Replicated::from(set);
    validate_replicated(&w, errs);
    let spec = &set.spec;
    validate_stateful_set_spec(spec, errs);
    let Some(old) = old else {
        return;
    };
    selector_fixed(&w.selector, &Replicated::from(old).selector, errs);
    let fixed = |s: &StatefulSetSpec| StatefulSetSpec {
        replicas: None,
        ordinals: None,
        template: Default::default(),
        update_strategy: None,
        persistent_volume_claim_retention_policy: None,
        min_ready_seconds: None,
        revision_history_limit: None,
        ..s.clone()
    };
    if fixed(spec) != fixed(&old.spec) {
        errs.push(FieldError::forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"));
    }
}

/// A StatefulSet's own fields: pod management, its update strategy, the
/// first ordinal, claim templates, their retention, the governing Service.
fn validate_stateful_set_spec(spec: &StatefulSetSpec, errs: &mut Errors) {
    one_of(
        errs,
        spec.pod_management_policy.as_deref(),
        "spec.podManagementPolicy",
        &["OrderedReady", "Parallel"],
    );
    if let Some(us) = &spec.update_strategy {
        one_of(
            errs,
            us.type_.as_deref(),
            "spec.updateStrategy.type",
            &["RollingUpdate", "OnDelete"],
        );
        if let Some(ru) = &us.rolling_update {
            if let Some(p) = ru.partition.filter(|p| *p < 0) {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate.partition",
                    &json!(p),
                    "must be greater than or equal to 0",
                ));
            }
            if let Some(mu) = &ru.max_unavailable {
                let mu = json!(mu);
                if let Some(e) = int_or_percent_error(&mu, false) {
                    errs.push(FieldError::invalid(
                        "spec.updateStrategy.rollingUpdate.maxUnavailable",
                        &mu,
                        e,
                    ));
                }
            }
        }
    }
    if let Some(start) = spec
        .ordinals
        .as_ref()
        .and_then(|o| o.start)
        .filter(|s| *s < 0)
    {
        errs.push(FieldError::invalid(
            "spec.ordinals.start",
            &json!(start),
            "must be greater than or equal to 0",
        ));
    }
    for (i, t) in spec.volume_claim_templates.iter().flatten().enumerate() {
        let claim = t.spec.clone().unwrap_or_default();
        let path = format!("spec.volumeClaimTemplates[{i}].spec");
        super::storage::validate_claim_spec(&claim, &path, errs);
    }
    if let Some(p) = &spec.persistent_volume_claim_retention_policy {
        let path = "spec.persistentVolumeClaimRetentionPolicy";
        for (f, v) in [
            ("whenDeleted", &p.when_deleted),
            ("whenScaled", &p.when_scaled),
        ] {
            one_of(
                errs,
                v.as_deref(),
                &format!("{path}.{f}"),
                &["Retain", "Delete"],
            );
        }
    }
    if let Some(name) = spec.service_name.as_deref().filter(|n| !n.is_empty()) {
        if let Some(e) = dns1123_label_error(name) {
            errs.push(FieldError::invalid("spec.serviceName", &json!(name), e));
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

/// Deployment's own rules: the strategy, its surge and unavailability, the
/// progress deadline and history limit.
fn validate_deployment_strategy(
    spec: &k8s_openapi::api::apps::v1::DeploymentSpec,
    errs: &mut Errors,
) {
    for (key, v) in [
        ("revisionHistoryLimit", spec.revision_history_limit),
        ("progressDeadlineSeconds", spec.progress_deadline_seconds),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                &json!(v),
                "must be greater than or equal to 0",
            ));
        }
    }
    if let (Some(deadline), Some(min_ready)) =
        (spec.progress_deadline_seconds, spec.min_ready_seconds)
    {
        if deadline <= min_ready {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                &json!(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
    let Some(strategy) = &spec.strategy else {
        return;
    };
    one_of(
        errs,
        strategy.type_.as_deref(),
        "spec.strategy.type",
        &["Recreate", "RollingUpdate"],
    );
    let Some(ru) = &strategy.rolling_update else {
        return;
    };
    if strategy.type_.as_deref() == Some("Recreate") {
        errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        ));
        return;
    }
    let is_zero = |v: &IntOrString| {
        matches!(v, IntOrString::Int(0)) || *v == IntOrString::String("0%".into())
    };
    let mut zero = [false, false];
    for (i, (field, v)) in [
        ("maxUnavailable", &ru.max_unavailable),
        ("maxSurge", &ru.max_surge),
    ]
    .into_iter()
    .enumerate()
    {
        let Some(v) = v else { continue };
        match int_or_percent_error(&json!(v), false) {
            Some(e) => errs.push(FieldError::invalid(
                format!("spec.strategy.rollingUpdate.{field}"),
                &json!(v),
                e,
            )),
            None => zero[i] = is_zero(v),
        }
    }
    if zero == [true, true] {
        errs.push(FieldError::invalid(
            "spec.strategy.rollingUpdate.maxUnavailable",
            &json!(ru.max_unavailable),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

/// `IntOrString` rules for maxUnavailable/maxSurge: non-negative int or `N%` (≤100% unless `allow_over`).
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
