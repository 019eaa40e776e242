//! admissionregistration.k8s.io/v1: Mutating/ValidatingWebhookConfiguration,
//! ValidatingAdmissionPolicy and its bindings: Kubernetes' defaults and the
//! rules the apiserver checks before it stores one.

use super::{arr, Errors, FieldError};
use minik8s_cel::schema::cel;
use serde_json::{json, Value};

/// Fills in a webhook configuration's defaults (Kubernetes' v1 defaults).
pub fn default_webhooks(obj: &mut Value, mutating: bool) {
    for hook in obj
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(h) = hook.as_object_mut() else {
            continue;
        };
        h.entry("failurePolicy").or_insert(json!("Fail"));
        h.entry("matchPolicy").or_insert(json!("Equivalent"));
        h.entry("namespaceSelector").or_insert(json!({}));
        h.entry("objectSelector").or_insert(json!({}));
        h.entry("timeoutSeconds").or_insert(json!(10));
        if mutating {
            h.entry("reinvocationPolicy").or_insert(json!("Never"));
        }
        if let Some(port) = h
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            port.entry("port").or_insert(json!(443));
        }
        for rule in h
            .get_mut("rules")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(r) = rule.as_object_mut() {
                r.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

pub(super) fn one_of(errs: &mut Errors, v: &Value, key: &str, path: &str, allowed: &[&str]) {
    match v.get(key).and_then(Value::as_str) {
        Some(s) if allowed.contains(&s) => {}
        Some(s) => errs.push(FieldError::not_supported(
            format!("{path}.{key}"),
            &json!(s),
            allowed,
        )),
        None => errs.push(FieldError::required(format!("{path}.{key}"), "")),
    }
}

fn rules_errors(errs: &mut Errors, rules: &[Value], path: &str) {
    for (i, r) in rules.iter().enumerate() {
        let rp = format!("{path}[{i}]");
        for field in ["operations", "apiGroups", "apiVersions", "resources"] {
            if arr(r, field).is_empty() {
                errs.push(FieldError::required(format!("{rp}.{field}"), ""));
            }
        }
        for op in arr(r, "operations") {
            let ops = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
            if !op.as_str().is_some_and(|o| ops.contains(&o)) {
                errs.push(FieldError::not_supported(
                    format!("{rp}.operations"),
                    op,
                    &ops,
                ));
            }
        }
        if let Some(scope) = r.get("scope") {
            let scopes = ["*", "Cluster", "Namespaced"];
            if !scope.as_str().is_some_and(|s| scopes.contains(&s)) {
                errs.push(FieldError::not_supported(
                    format!("{rp}.scope"),
                    scope,
                    &scopes,
                ));
            }
        }
    }
}

/// The rules of a Mutating- or ValidatingWebhookConfiguration.
pub fn validate_webhook_configuration(obj: &Value, mutating: bool) -> Errors {
    let mut errs = Vec::new();
    let hooks = arr(obj, "webhooks");
    for (i, h) in hooks.iter().enumerate() {
        let path = format!("webhooks[{i}]");
        let name = h.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if name.split('.').count() < 3 || super::dns1123_subdomain_error(name).is_some() {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &json!(name),
                "should be a domain with at least three segments separated by dots",
            ));
        } else if hooks[..i].iter().any(|o| o["name"] == name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
        }
        one_of(
            &mut errs,
            h,
            "sideEffects",
            &path,
            &["None", "NoneOnDryRun"],
        );
        one_of(&mut errs, h, "failurePolicy", &path, &["Fail", "Ignore"]);
        one_of(&mut errs, h, "matchPolicy", &path, &["Equivalent", "Exact"]);
        if mutating {
            one_of(
                &mut errs,
                h,
                "reinvocationPolicy",
                &path,
                &["IfNeeded", "Never"],
            );
        }
        let versions = arr(h, "admissionReviewVersions");
        if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
            errs.push(FieldError::required(
                format!("{path}.admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        if let Some(t) = h.get("timeoutSeconds").and_then(Value::as_i64) {
            if !(1..=30).contains(&t) {
                errs.push(FieldError::invalid(
                    format!("{path}.timeoutSeconds"),
                    &json!(t),
                    "the timeout value must be between 1 and 30 seconds",
                ));
            }
        }
        let cc = h.get("clientConfig").unwrap_or(&Value::Null);
        match (
            cc.get("url").filter(|u| !u.is_null()),
            cc.get("service").filter(|s| !s.is_null()),
        ) {
            (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
                format!("{path}.clientConfig"),
                "exactly one of url or service is required",
            )),
            (Some(url), None) => {
                if !url.as_str().is_some_and(|u| u.starts_with("https://")) {
                    errs.push(FieldError::invalid(
                        format!("{path}.clientConfig.url"),
                        url,
                        "'https' is the only allowed URL scheme",
                    ));
                }
            }
            (None, Some(svc)) => {
                for f in ["namespace", "name"] {
                    if svc.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                        errs.push(FieldError::required(
                            format!("{path}.clientConfig.service.{f}"),
                            "service {f} is required",
                        ));
                    }
                }
            }
        }
        rules_errors(&mut errs, arr(h, "rules"), &format!("{path}.rules"));
        for (j, c) in arr(h, "matchConditions").iter().enumerate() {
            expression_errors(&mut errs, c, &format!("{path}.matchConditions[{j}]"));
        }
    }
    errs
}

fn expression_errors(errs: &mut Errors, v: &Value, path: &str) {
    match v.get("expression").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(format!("{path}.expression"), "")),
        Some(e) => {
            if let Err(why) = cel::compile(e) {
                errs.push(FieldError::invalid(
                    format!("{path}.expression"),
                    &json!(e),
                    why,
                ));
            }
        }
    }
}

/// Fills in a ValidatingAdmissionPolicy's defaults.
pub fn default_policy(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("failurePolicy").or_insert(json!("Fail"));
        let constraints = spec.entry("matchConstraints").or_insert(json!({}));
        if let Some(c) = constraints.as_object_mut() {
            c.entry("matchPolicy").or_insert(json!("Equivalent"));
            c.entry("namespaceSelector").or_insert(json!({}));
            c.entry("objectSelector").or_insert(json!({}));
        }
    }
}

/// The rules of a ValidatingAdmissionPolicy: its expressions compile.
pub fn validate_policy(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let validations = arr(spec, "validations");
    if validations.is_empty() && arr(spec, "auditAnnotations").is_empty() {
        errs.push(FieldError::required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in validations.iter().enumerate() {
        expression_errors(&mut errs, v, &format!("spec.validations[{i}]"));
        if let Some(m) = v.get("messageExpression").and_then(Value::as_str) {
            if let Err(why) = cel::compile(m) {
                errs.push(FieldError::invalid(
                    format!("spec.validations[{i}].messageExpression"),
                    &json!(m),
                    why,
                ));
            }
        }
    }
    common_policy_errors(&mut errs, spec);
    errs
}

/// What Validating- and MutatingAdmissionPolicies share: their variables'
/// and match conditions' expressions compile, a known failure policy, and
/// resource rules to match.
pub(super) fn common_policy_errors(errs: &mut Errors, spec: &Value) {
    for (i, v) in arr(spec, "variables").iter().enumerate() {
        expression_errors(errs, v, &format!("spec.variables[{i}]"));
    }
    for (i, c) in arr(spec, "matchConditions").iter().enumerate() {
        expression_errors(errs, c, &format!("spec.matchConditions[{i}]"));
    }
    one_of(errs, spec, "failurePolicy", "spec", &["Fail", "Ignore"]);
    let rules = arr(&spec["matchConstraints"], "resourceRules");
    if rules.is_empty() {
        errs.push(FieldError::required(
            "spec.matchConstraints.resourceRules",
            "",
        ));
    }
    rules_errors(errs, rules, "spec.matchConstraints.resourceRules");
}

/// A policy binding names its policy.
pub(super) fn policy_name_errors(errs: &mut Errors, spec: &Value) {
    if spec
        .get("policyName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errs.push(FieldError::required("spec.policyName", ""));
    }
}

/// The rules of a ValidatingAdmissionPolicyBinding.
pub fn validate_binding(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    policy_name_errors(&mut errs, spec);
    let actions = arr(spec, "validationActions");
    if actions.is_empty() {
        errs.push(FieldError::required("spec.validationActions", ""));
    }
    for (i, a) in actions.iter().enumerate() {
        let known = ["Audit", "Deny", "Warn"];
        if !a.as_str().is_some_and(|s| known.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("spec.validationActions[{i}]"),
                a,
                &known,
            ));
        }
    }
    if actions.contains(&json!("Deny")) && actions.contains(&json!("Warn")) {
        errs.push(FieldError::invalid("spec.validationActions", &json!(actions), "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_configurations_get_kubernetes_defaults_and_rules() {
        let mut cfg = json!({"webhooks": [{"name": "label.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]});
        default_webhooks(&mut cfg, true);
        let h = &cfg["webhooks"][0];
        assert_eq!(
            (
                h["failurePolicy"].as_str(),
                h["matchPolicy"].as_str(),
                h["timeoutSeconds"].as_i64()
            ),
            (Some("Fail"), Some("Equivalent"), Some(10))
        );
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert!(validate_webhook_configuration(&cfg, true).is_empty());
        cfg["webhooks"][0]["name"] = json!("short");
        cfg["webhooks"][0]["sideEffects"] = json!("Some");
        cfg["webhooks"][0]["clientConfig"] = json!({"url": "http://x"});
        let m: Vec<String> = validate_webhook_configuration(&cfg, true)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(m, [
            "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[0].clientConfig.url: Invalid value: \"http://x\": 'https' is the only allowed URL scheme",
        ]);
    }

    #[test]
    fn policies_and_bindings_are_checked() {
        let mut p = json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}});
        default_policy(&mut p);
        assert!(validate_policy(&p).is_empty(), "{:?}", validate_policy(&p));
        p["spec"]["validations"][0]["expression"] = json!("object.spec.replicas <=");
        assert_eq!(
            validate_policy(&p)[0].field,
            "spec.validations[0].expression"
        );
        let b = json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}});
        assert_eq!(validate_binding(&b)[0].field, "spec.validationActions");
    }
}
