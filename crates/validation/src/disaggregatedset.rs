//! DisaggregatedSet and its role scaler: the CRD schema's rules (sizes,
//! patterns, enums, the CEL rule on replicas) and the validating webhook's,
//! with upstream's messages and field paths. Beyond upstream, each role's embedded
//! LeaderWorkerSet spec is checked with the LWS rules here, so a bad role is
//! refused at once instead of failing every reconcile later.

use super::{Errors, FieldError};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::disaggregatedset::{
    scaler_name, DisaggregatedRoleSpec, DisaggregatedSet, MODE_EXTERNAL, MODE_STATIC,
};
use minik8s_api::lws::{
    scaled_value, LeaderWorkerSetSpec, EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY,
};
use serde::Deserialize;
use serde_json::{json, Value};

const ROLE_NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const PLACEMENT_TYPES: &[&str] = &["None", "ExclusiveSlice", "ExclusiveTopology"];

fn is_role_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && edge(&b[0]) && edge(&b[b.len() - 1]) && b.iter().all(|c| edge(c) || *c == b'-')
}

fn digits(n: i64) -> usize {
    n.max(0).to_string().len()
}

/// Every rule, on create and on update (upstream has no update-only rule):
/// the CRD schema's ([`validate_schema`], on the object as sent, as
/// Kubernetes checks a custom resource's schema on its unstructured form)
/// and the webhook's ([`validate_disaggregated_set`], on the typed object).
pub fn validate(obj: &Value, _old: Option<&Value>) -> Errors {
    let mut errs = validate_schema(obj);
    match DisaggregatedSet::deserialize(obj) {
        Ok(set) => validate_disaggregated_set(&set, None, &mut errs),
        Err(e) => errs.push(FieldError::invalid(
            "spec",
            obj.get("spec").unwrap_or(&Value::Null),
            format!("does not decode as a DisaggregatedSet spec: {e}"),
        )),
    }
    errs
}

/// The CRD schema's rules: bounds, sizes, patterns, enums and the CEL rule
/// on replicas, with the messages of Kubernetes' schema validation.
/// Long: the schema's rules in its order, which the order of the errors
/// follows.
pub fn validate_schema(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(s) = spec.get("slices").filter(|v| !v.is_null()) {
        match s.as_i64() {
            Some(n) if n < 1 => errs.push(FieldError::invalid(
                "spec.slices",
                s,
                "spec.slices in body should be greater than or equal to 1",
            )),
            Some(n) if n > 100 => errs.push(FieldError::invalid(
                "spec.slices",
                s,
                "spec.slices in body should be less than or equal to 100",
            )),
            Some(_) => {}
            None => errs.push(FieldError::invalid("spec.slices", s, "must be an integer")),
        }
    }
    let empty = Vec::new();
    let roles = spec
        .get("roles")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if spec.get("roles").is_none_or(Value::is_null) {
        errs.push(FieldError::required("spec.roles", ""));
    } else if roles.len() < 2 {
        errs.push(FieldError::invalid(
            "spec.roles",
            &json!(roles.len()),
            "spec.roles in body should have at least 2 items",
        ));
    } else if roles.len() > 10 {
        errs.push(FieldError::too_many("spec.roles", roles.len(), 10));
    }
    // The CEL rule on spec: non-External roles all at 0 or all above 0.
    let static_replicas: Vec<i64> = roles
        .iter()
        .filter(|r| r.pointer("/scaling/mode").and_then(Value::as_str) != Some(MODE_EXTERNAL))
        .map(|r| {
            r.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        })
        .collect();
    if !(static_replicas.iter().all(|r| *r == 0) || static_replicas.iter().all(|r| *r > 0)) {
        errs.push(FieldError::invalid(
            "spec",
            &json!("object"),
            "replicas must be zero for all non-External roles or non-zero for all non-External roles",
        ));
    }
    if let Some(t) = spec.pointer("/placementPolicy/type") {
        if !t.as_str().is_some_and(|t| PLACEMENT_TYPES.contains(&t)) {
            errs.push(FieldError::not_supported(
                "spec.placementPolicy.type",
                t,
                PLACEMENT_TYPES,
            ));
        }
    }
    for (i, role) in roles.iter().enumerate() {
        let path = format!("spec.roles[{i}]");
        let name = role.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if name.len() > 63 {
            errs.push(FieldError::too_long(format!("{path}.name"), 63));
        } else if !is_role_name(name) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &json!(name),
                format!("{path}.name in body should match '{ROLE_NAME_PATTERN}'"),
            ));
        }
        if let Some(m) = role.pointer("/scaling/mode") {
            if !m
                .as_str()
                .is_some_and(|m| [MODE_STATIC, MODE_EXTERNAL].contains(&m))
            {
                errs.push(FieldError::not_supported(
                    format!("{path}.scaling.mode"),
                    m,
                    &[MODE_STATIC, MODE_EXTERNAL],
                ));
            }
        }
    }
    errs
}

/// A role's scaling mode.
fn external(role: &DisaggregatedRoleSpec) -> bool {
    role.scaling.as_ref().and_then(|s| s.mode.as_deref()) == Some(MODE_EXTERNAL)
}

/// The webhook's rules on the typed object: role names once each, a
/// topology for a placement, no slices with External roles, and each
/// role's own ([`validate_role`]).
pub fn validate_disaggregated_set(
    set: &DisaggregatedSet,
    _old: Option<&DisaggregatedSet>,
    errs: &mut Errors,
) {
    let ds_name = set.metadata.name.as_deref().unwrap_or("");
    let spec = &set.spec;
    let slices = i64::from(spec.slices.unwrap_or(1));
    let mut seen = std::collections::BTreeSet::new();
    for (i, role) in spec.roles.iter().enumerate() {
        if !role.name.is_empty() && !seen.insert(role.name.as_str()) {
            errs.push(FieldError::duplicate(
                format!("spec.roles[{i}]"),
                &json!({"name": role.name}),
            ));
        }
    }
    let policy = spec.placement_policy.as_ref();
    let placement = policy.and_then(|p| p.type_.as_deref()).unwrap_or("");
    let topology = policy.and_then(|p| p.topology.as_deref()).unwrap_or("");
    if !placement.is_empty() && placement != "None" && topology.is_empty() {
        errs.push(FieldError::required(
            "spec.placementPolicy.topology",
            "topology is required when type is not None",
        ));
    }
    if spec.roles.iter().any(external) && slices > 1 {
        errs.push(FieldError::forbidden(
            "spec.slices",
            "spec.slices > 1 is not supported while any role has scaling.mode: External (alpha restriction)",
        ));
    }
    for (i, role) in spec.roles.iter().enumerate() {
        let place = Place {
            path: format!("spec.roles[{i}]"),
            ds_name,
            slices,
            placement,
        };
        validate_role(role, &place, errs);
    }
}

/// Where a role sits: its path and what of the set its names depend on.
struct Place<'a> {
    path: String,
    ds_name: &'a str,
    slices: i64,
    placement: &'a str,
}

fn validate_role(role: &DisaggregatedRoleSpec, place: &Place, errs: &mut Errors) {
    let (path, name) = (place.path.as_str(), role.name.as_str());
    let spec = role.spec.clone().unwrap_or_default();
    let sp = format!("{path}.spec");
    validate_role_rollout(&spec, &sp, errs);
    // 4. The scaler's name must be an object name.
    let scaler = scaler_name(place.ds_name, name);
    if external(role) && scaler.len() > 253 {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            &json!(name),
            format!("would produce scaler name \"{scaler}\" exceeding 253 characters"),
        ));
    }
    // 6. The longest generated name, `<ds>-<slice>-<rev>-<role>-prv`, is a Service's.
    let d = digits(place.slices - 1);
    let generated = place.ds_name.len() + 3 + d + 8 + name.len() + 4;
    if !name.is_empty() && generated > 63 {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            &json!(name),
            format!(
                "the generated service name ({generated} chars) would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name and/or role name (combined limit: {} characters)",
                48 - d
            ),
        ));
    }
    // 7. Exclusive-topology annotations fight a placement policy.
    if !place.placement.is_empty() && place.placement != "None" {
        let tmpl = &spec.leader_worker_template;
        let annotations = [
            role.metadata.as_ref(),
            tmpl.leader_template
                .as_ref()
                .and_then(|t| t.metadata.as_ref()),
            tmpl.worker_template.metadata.as_ref(),
        ];
        for key in [EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY] {
            let carried = annotations
                .iter()
                .flatten()
                .any(|m| m.annotations.as_ref().is_some_and(|a| a.contains_key(key)));
            if carried {
                errs.push(FieldError::forbidden(
                    path,
                    format!("the \"{key}\" annotation must not be combined with a non-None spec.placementPolicy.type ({})", place.placement),
                ));
            }
        }
    }
    validate_role_lws(role, path, &sp, errs);
}

/// A role's rollout: RollingUpdate, no partition (the DisaggregatedSet
/// rolls across roles itself), maxUnavailable and maxSurge not both 0.
fn validate_role_rollout(spec: &LeaderWorkerSetSpec, sp: &str, errs: &mut Errors) {
    let strategy = spec.rollout_strategy.as_ref();
    // 1. Rollout type.
    if let Some(t) = strategy.and_then(|s| s.type_.as_deref()) {
        if !matches!(t, "" | "RollingUpdate") {
            errs.push(FieldError::not_supported(
                format!("{sp}.rolloutStrategy.type"),
                &json!(t),
                &["RollingUpdate"],
            ));
        }
    }
    let ru_path = format!("{sp}.rolloutStrategy.rollingUpdateConfiguration");
    let ru = strategy.and_then(|s| s.rolling_update_configuration.as_ref());
    // 2. No partition: the DisaggregatedSet rolls across roles itself.
    if ru.and_then(|r| r.partition).is_some_and(|p| p != 0) {
        errs.push(FieldError::forbidden(
            format!("{ru_path}.partition"),
            "partition is not supported by DisaggregatedSet; rolling updates are managed across roles by the DisaggregatedSet controller",
        ));
    }
    // 3. maxUnavailable and maxSurge.
    let replicas = spec.replicas.map(i64::from).filter(|r| *r > 0);
    if let (Some(ru), Some(r)) = (ru, replicas) {
        let as_json = |v: &Option<IntOrString>| v.as_ref().map_or(json!(0), |v| json!(v));
        let (mu, ms) = (as_json(&ru.max_unavailable), as_json(&ru.max_surge));
        let mut bad = false;
        for (field, v) in [("maxUnavailable", &mu), ("maxSurge", &ms)] {
            if let Some(e) = super::int_or_percent_error(v, false) {
                errs.push(FieldError::invalid(format!("{ru_path}.{field}"), v, e));
                bad = true;
            }
        }
        if !bad
            && scaled_value(&mu, r, false).unwrap_or(0) == 0
            && scaled_value(&ms, r, true).unwrap_or(0) == 0
        {
            errs.push(FieldError::invalid(
                format!("{ru_path}.maxUnavailable"),
                &mu,
                "must not be 0 when `maxSurge` is 0",
            ));
        }
    }
}

/// minik8s: the embedded LeaderWorkerSet spec obeys the LWS rules (after
/// the LWS defaults, as the role's LeaderWorkerSets get them), its errors
/// named at the role's paths.
fn validate_role_lws(role: &DisaggregatedRoleSpec, path: &str, sp: &str, errs: &mut Errors) {
    let annotations = role
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let mut lws = json!({"metadata": {"name": "role", "annotations": annotations},
        "spec": role.spec.as_ref().map_or(json!({}), |s| json!(s))});
    // A worker template with nothing in it is no template (the typed spec
    // writes a left-out one as `{}`): the LWS rules then say it is required.
    let worker = "/spec/leaderWorkerTemplate/workerTemplate";
    if lws.pointer(worker) == Some(&json!({})) {
        if let Some(t) = lws["spec"]["leaderWorkerTemplate"].as_object_mut() {
            t.remove("workerTemplate");
        }
    }
    crate::lws::default(&mut lws);
    for mut e in crate::lws::validate(&lws, None) {
        e.field = match e.field.strip_prefix("spec.") {
            Some(rest) => format!("{sp}.{rest}"),
            None => format!("{path}.{}", e.field),
        };
        if !errs.contains(&e) {
            errs.push(e);
        }
    }
}

/// Admission warnings (not errors): an External role's own replicas are ignored.
pub fn warnings(obj: &Value) -> Vec<String> {
    let ds = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    obj.pointer("/spec/roles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.pointer("/scaling/mode").and_then(Value::as_str) == Some(MODE_EXTERNAL))
        .filter_map(|r| {
            let n = r.pointer("/spec/replicas").and_then(Value::as_i64)?;
            let role = r.get("name").and_then(Value::as_str).unwrap_or("");
            (n > 1).then(|| format!(
                "role \"{role}\" sets scaling.mode: External and spec.replicas: {n} — spec.replicas is ignored; drive replicas via DisaggregatedSetRoleScaler \"{}\" instead",
                scaler_name(ds, role)
            ))
        })
        .collect()
}

/// The role scaler: `spec.replicas` at least 0.
pub fn validate_scaler(obj: &Value) -> Errors {
    match obj.pointer("/spec/replicas") {
        Some(r) if r.as_i64().is_none_or(|n| n < 0) => vec![FieldError::invalid(
            "spec.replicas",
            r,
            "spec.replicas in body should be greater than or equal to 0",
        )],
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "disaggregatedset_tests.rs"]
mod tests;
