//! DisaggregatedSet and its role scaler: the CRD schema's rules (sizes,
//! patterns, enums, the CEL rule on replicas) and the validating webhook's,
//! with upstream's messages and field paths. Beyond upstream, each role's embedded
//! LeaderWorkerSet spec is checked with the LWS rules here, so a bad role is
//! refused at once instead of failing every reconcile later.

use super::{Errors, FieldError};
use minik8s_api::disaggregatedset::{scaler_name, MODE_EXTERNAL, MODE_STATIC};
use minik8s_api::lws::{scaled_value, EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY};
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

/// Every rule, on create and on update (upstream has no update-only rule).
/// Long: upstream's webhook rules in its order, which the order of the
/// errors follows.
pub fn validate(obj: &Value, _old: Option<&Value>) -> Errors {
    let mut errs = Vec::new();
    let ds_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let slices = spec.get("slices").and_then(Value::as_i64).unwrap_or(1);
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
    let mut seen = std::collections::BTreeSet::new();
    for (i, role) in roles.iter().enumerate() {
        let name = role.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.is_empty() && !seen.insert(name) {
            errs.push(FieldError::duplicate(
                format!("spec.roles[{i}]"),
                &json!({"name": name}),
            ));
        }
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

    let placement = spec
        .pointer("/placementPolicy/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(t) = spec.pointer("/placementPolicy/type") {
        if !t.as_str().is_some_and(|t| PLACEMENT_TYPES.contains(&t)) {
            errs.push(FieldError::not_supported(
                "spec.placementPolicy.type",
                t,
                PLACEMENT_TYPES,
            ));
        }
    }
    if !placement.is_empty()
        && placement != "None"
        && spec
            .pointer("/placementPolicy/topology")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    {
        errs.push(FieldError::required(
            "spec.placementPolicy.topology",
            "topology is required when type is not None",
        ));
    }

    let any_external = roles
        .iter()
        .any(|r| r.pointer("/scaling/mode").and_then(Value::as_str) == Some(MODE_EXTERNAL));
    if any_external && slices > 1 {
        errs.push(FieldError::forbidden(
            "spec.slices",
            "spec.slices > 1 is not supported while any role has scaling.mode: External (alpha restriction)",
        ));
    }
    for (i, role) in roles.iter().enumerate() {
        validate_role(
            role,
            &format!("spec.roles[{i}]"),
            ds_name,
            slices,
            placement,
            &mut errs,
        );
    }
    errs
}

fn validate_role(
    role: &Value,
    path: &str,
    ds_name: &str,
    slices: i64,
    placement: &str,
    errs: &mut Errors,
) {
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
    let external = role.pointer("/scaling/mode").and_then(Value::as_str) == Some(MODE_EXTERNAL);
    let spec = role.get("spec").cloned().unwrap_or(Value::Null);
    let sp = format!("{path}.spec");

    validate_role_rollout(&spec, &sp, errs);
    // 4. The scaler's name must be an object name.
    let scaler = scaler_name(ds_name, name);
    if external && scaler.len() > 253 {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            &json!(name),
            format!("would produce scaler name \"{scaler}\" exceeding 253 characters"),
        ));
    }
    // 6. The longest generated name, `<ds>-<slice>-<rev>-<role>-prv`, is a Service's.
    let d = digits(slices - 1);
    let generated = ds_name.len() + 3 + d + 8 + name.len() + 4;
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
    if !placement.is_empty() && placement != "None" {
        for key in [EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY] {
            let carried = [
                "/metadata/annotations",
                "/spec/leaderWorkerTemplate/leaderTemplate/metadata/annotations",
                "/spec/leaderWorkerTemplate/workerTemplate/metadata/annotations",
            ]
            .iter()
            .any(|p| role.pointer(p).and_then(|a| a.get(key)).is_some());
            if carried {
                errs.push(FieldError::forbidden(
                    path,
                    format!("the \"{key}\" annotation must not be combined with a non-None spec.placementPolicy.type ({placement})"),
                ));
            }
        }
    }
    validate_role_lws(role, &spec, path, &sp, errs);
}

/// A role's rollout: RollingUpdate, no partition (the DisaggregatedSet
/// rolls across roles itself), maxUnavailable and maxSurge not both 0.
fn validate_role_rollout(spec: &Value, sp: &str, errs: &mut Errors) {
    // 1. Rollout type.
    if let Some(t) = spec.pointer("/rolloutStrategy/type") {
        if !matches!(t.as_str(), Some("") | Some("RollingUpdate")) {
            errs.push(FieldError::not_supported(
                format!("{sp}.rolloutStrategy.type"),
                t,
                &["RollingUpdate"],
            ));
        }
    }
    let ru_path = format!("{sp}.rolloutStrategy.rollingUpdateConfiguration");
    let ru = spec
        .pointer("/rolloutStrategy/rollingUpdateConfiguration")
        .filter(|v| !v.is_null());
    // 2. No partition: the DisaggregatedSet rolls across roles itself.
    if let Some(p) = ru.and_then(|r| r.get("partition")) {
        if p.as_i64() != Some(0) {
            errs.push(FieldError::forbidden(
                format!("{ru_path}.partition"),
                "partition is not supported by DisaggregatedSet; rolling updates are managed across roles by the DisaggregatedSet controller",
            ));
        }
    }
    // 3. maxUnavailable and maxSurge.
    let replicas = spec.get("replicas").and_then(Value::as_i64);
    if let (Some(ru), Some(r)) = (ru, replicas.filter(|r| *r > 0)) {
        let mu = ru.get("maxUnavailable").cloned().unwrap_or(json!(0));
        let ms = ru.get("maxSurge").cloned().unwrap_or(json!(0));
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

/// minik8s: the embedded LeaderWorkerSet spec obeys the LWS rules, its
/// errors named at the role's paths.
fn validate_role_lws(role: &Value, spec: &Value, path: &str, sp: &str, errs: &mut Errors) {
    let mut lws = json!({"metadata": {"name": "role",
        "annotations": role.pointer("/metadata/annotations").cloned().unwrap_or(json!({}))},
        "spec": if spec.is_object() { spec.clone() } else { json!({}) }});
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
