//! admissionregistration.k8s.io/v1: Mutating/ValidatingWebhookConfiguration,
//! ValidatingAdmissionPolicy and its bindings: Kubernetes' defaults and the
//! rules the apiserver checks before it stores one.

use super::{one_of, Errors, FieldError};
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, MutatingWebhook, MutatingWebhookConfiguration,
    NamedRuleWithOperations, RuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicySpec, ValidatingWebhook,
    ValidatingWebhookConfiguration, Variable, WebhookClientConfig,
};
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

/// The parts of a webhook's or a policy's rule that are checked
/// (`RuleWithOperations`, `NamedRuleWithOperations`).
struct Rule<'a> {
    operations: Option<&'a Vec<String>>,
    api_groups: Option<&'a Vec<String>>,
    api_versions: Option<&'a Vec<String>>,
    resources: Option<&'a Vec<String>>,
    scope: Option<&'a str>,
}

impl<'a> From<&'a RuleWithOperations> for Rule<'a> {
    fn from(r: &'a RuleWithOperations) -> Self {
        Rule {
            operations: r.operations.as_ref(),
            api_groups: r.api_groups.as_ref(),
            api_versions: r.api_versions.as_ref(),
            resources: r.resources.as_ref(),
            scope: r.scope.as_deref(),
        }
    }
}

impl<'a> From<&'a NamedRuleWithOperations> for Rule<'a> {
    fn from(r: &'a NamedRuleWithOperations) -> Self {
        Rule {
            operations: r.operations.as_ref(),
            api_groups: r.api_groups.as_ref(),
            api_versions: r.api_versions.as_ref(),
            resources: r.resources.as_ref(),
            scope: r.scope.as_deref(),
        }
    }
}

fn rules_errors<'a>(errs: &mut Errors, rules: impl Iterator<Item = Rule<'a>>, path: &str) {
    const OPERATIONS: [&str; 5] = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
    for (i, r) in rules.enumerate() {
        let rp = format!("{path}[{i}]");
        for (field, list) in [
            ("operations", r.operations),
            ("apiGroups", r.api_groups),
            ("apiVersions", r.api_versions),
            ("resources", r.resources),
        ] {
            if list.is_none_or(Vec::is_empty) {
                errs.push(FieldError::required(format!("{rp}.{field}"), ""));
            }
        }
        for op in r.operations.into_iter().flatten() {
            if !OPERATIONS.contains(&op.as_str()) {
                errs.push(FieldError::not_supported(
                    format!("{rp}.operations"),
                    &json!(op),
                    &OPERATIONS,
                ));
            }
        }
        one_of(
            errs,
            r.scope,
            &format!("{rp}.scope"),
            &["*", "Cluster", "Namespaced"],
        );
    }
}

/// What both webhook kinds' webhooks have.
struct Webhook<'a> {
    name: &'a str,
    side_effects: &'a str,
    failure_policy: Option<&'a str>,
    match_policy: Option<&'a str>,
    /// `None` for a validating webhook, which has none.
    reinvocation_policy: Option<Option<&'a str>>,
    admission_review_versions: &'a [String],
    timeout_seconds: Option<i32>,
    client_config: &'a WebhookClientConfig,
    rules: &'a [RuleWithOperations],
    match_conditions: &'a [MatchCondition],
}

impl<'a> From<&'a ValidatingWebhook> for Webhook<'a> {
    fn from(h: &'a ValidatingWebhook) -> Self {
        Webhook {
            name: &h.name,
            side_effects: &h.side_effects,
            failure_policy: h.failure_policy.as_deref(),
            match_policy: h.match_policy.as_deref(),
            reinvocation_policy: None,
            admission_review_versions: &h.admission_review_versions,
            timeout_seconds: h.timeout_seconds,
            client_config: &h.client_config,
            rules: h.rules.as_deref().unwrap_or_default(),
            match_conditions: h.match_conditions.as_deref().unwrap_or_default(),
        }
    }
}

impl<'a> From<&'a MutatingWebhook> for Webhook<'a> {
    fn from(h: &'a MutatingWebhook) -> Self {
        Webhook {
            name: &h.name,
            side_effects: &h.side_effects,
            failure_policy: h.failure_policy.as_deref(),
            match_policy: h.match_policy.as_deref(),
            reinvocation_policy: Some(h.reinvocation_policy.as_deref()),
            admission_review_versions: &h.admission_review_versions,
            timeout_seconds: h.timeout_seconds,
            client_config: &h.client_config,
            rules: h.rules.as_deref().unwrap_or_default(),
            match_conditions: h.match_conditions.as_deref().unwrap_or_default(),
        }
    }
}

pub(super) fn validate_validating_webhooks(
    config: &ValidatingWebhookConfiguration,
    _old: Option<&ValidatingWebhookConfiguration>,
    errs: &mut Errors,
) {
    let hooks = config.webhooks.iter().flatten().map(Webhook::from);
    webhooks_errors(errs, hooks.collect());
}

pub(super) fn validate_mutating_webhooks(
    config: &MutatingWebhookConfiguration,
    _old: Option<&MutatingWebhookConfiguration>,
    errs: &mut Errors,
) {
    let hooks = config.webhooks.iter().flatten().map(Webhook::from);
    webhooks_errors(errs, hooks.collect());
}

/// The rules of a Mutating- or ValidatingWebhookConfiguration's webhooks.
fn webhooks_errors(errs: &mut Errors, hooks: Vec<Webhook>) {
    for (i, h) in hooks.iter().enumerate() {
        let path = format!("webhooks[{i}]");
        let name = h.name;
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if name.split('.').count() < 3 || super::dns1123_subdomain_error(name).is_some() {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &json!(name),
                "should be a domain with at least three segments separated by dots",
            ));
        } else if hooks[..i].iter().any(|o| o.name == name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
        }
        let side_effects = Some(h.side_effects).filter(|s| !s.is_empty());
        one_of(
            errs,
            side_effects,
            &format!("{path}.sideEffects"),
            &["None", "NoneOnDryRun"],
        );
        one_of(
            errs,
            h.failure_policy,
            &format!("{path}.failurePolicy"),
            &["Fail", "Ignore"],
        );
        one_of(
            errs,
            h.match_policy,
            &format!("{path}.matchPolicy"),
            &["Equivalent", "Exact"],
        );
        if let Some(policy) = h.reinvocation_policy {
            one_of(
                errs,
                policy,
                &format!("{path}.reinvocationPolicy"),
                &["IfNeeded", "Never"],
            );
        }
        let versions = h.admission_review_versions;
        if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
            errs.push(FieldError::required(
                format!("{path}.admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        if let Some(t) = h.timeout_seconds.filter(|t| !(1..=30).contains(t)) {
            errs.push(FieldError::invalid(
                format!("{path}.timeoutSeconds"),
                &json!(t),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
        client_config_errors(errs, h.client_config, &path);
        rules_errors(
            errs,
            h.rules.iter().map(Rule::from),
            &format!("{path}.rules"),
        );
        for (j, c) in h.match_conditions.iter().enumerate() {
            expression_errors(errs, &c.expression, &format!("{path}.matchConditions[{j}]"));
        }
    }
}

/// Exactly one of a URL (https) or a Service (named, in a namespace).
fn client_config_errors(errs: &mut Errors, cc: &WebhookClientConfig, path: &str) {
    match (&cc.url, &cc.service) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
            format!("{path}.clientConfig"),
            "exactly one of url or service is required",
        )),
        (Some(url), None) => {
            if !url.starts_with("https://") {
                errs.push(FieldError::invalid(
                    format!("{path}.clientConfig.url"),
                    &json!(url),
                    "'https' is the only allowed URL scheme",
                ));
            }
        }
        (None, Some(svc)) => {
            for (f, v) in [("namespace", &svc.namespace), ("name", &svc.name)] {
                if v.is_empty() {
                    errs.push(FieldError::required(
                        format!("{path}.clientConfig.service.{f}"),
                        "service {f} is required",
                    ));
                }
            }
        }
    }
}

/// A CEL expression that compiles.
fn expression_errors(errs: &mut Errors, expression: &str, path: &str) {
    if expression.is_empty() {
        errs.push(FieldError::required(format!("{path}.expression"), ""));
    } else if let Err(why) = cel::compile(expression) {
        errs.push(FieldError::invalid(
            format!("{path}.expression"),
            &json!(expression),
            why,
        ));
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
pub(super) fn validate_policy(
    policy: &ValidatingAdmissionPolicy,
    _old: Option<&ValidatingAdmissionPolicy>,
    errs: &mut Errors,
) {
    let empty = ValidatingAdmissionPolicySpec::default();
    let spec = policy.spec.as_ref().unwrap_or(&empty);
    let validations = spec.validations.as_deref().unwrap_or_default();
    if validations.is_empty() && spec.audit_annotations.as_ref().is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in validations.iter().enumerate() {
        expression_errors(errs, &v.expression, &format!("spec.validations[{i}]"));
        if let Some(m) = v.message_expression.as_deref() {
            if let Err(why) = cel::compile(m) {
                errs.push(FieldError::invalid(
                    format!("spec.validations[{i}].messageExpression"),
                    &json!(m),
                    why,
                ));
            }
        }
    }
    common_policy_errors(
        errs,
        PolicyCommon {
            variables: spec.variables.as_deref().unwrap_or_default(),
            match_conditions: spec.match_conditions.as_deref().unwrap_or_default(),
            failure_policy: spec.failure_policy.as_deref(),
            match_constraints: spec.match_constraints.as_ref(),
        },
    );
}

/// What Validating- and MutatingAdmissionPolicies share.
pub(super) struct PolicyCommon<'a> {
    pub variables: &'a [Variable],
    pub match_conditions: &'a [MatchCondition],
    pub failure_policy: Option<&'a str>,
    pub match_constraints: Option<&'a MatchResources>,
}

/// What Validating- and MutatingAdmissionPolicies share: their variables'
/// and match conditions' expressions compile, a known failure policy, and
/// resource rules to match.
pub(super) fn common_policy_errors(errs: &mut Errors, p: PolicyCommon) {
    for (i, v) in p.variables.iter().enumerate() {
        expression_errors(errs, &v.expression, &format!("spec.variables[{i}]"));
    }
    for (i, c) in p.match_conditions.iter().enumerate() {
        expression_errors(errs, &c.expression, &format!("spec.matchConditions[{i}]"));
    }
    one_of(
        errs,
        p.failure_policy,
        "spec.failurePolicy",
        &["Fail", "Ignore"],
    );
    let rules = p
        .match_constraints
        .and_then(|m| m.resource_rules.as_deref())
        .unwrap_or_default();
    if rules.is_empty() {
        errs.push(FieldError::required(
            "spec.matchConstraints.resourceRules",
            "",
        ));
    }
    rules_errors(
        errs,
        rules.iter().map(Rule::from),
        "spec.matchConstraints.resourceRules",
    );
}

/// A policy binding names its policy.
pub(super) fn policy_name_errors(errs: &mut Errors, policy_name: &str) {
    if policy_name.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    }
}

/// The rules of a ValidatingAdmissionPolicyBinding.
pub(super) fn validate_binding(
    binding: &ValidatingAdmissionPolicyBinding,
    _old: Option<&ValidatingAdmissionPolicyBinding>,
    errs: &mut Errors,
) {
    let spec = &binding.spec;
    policy_name_errors(errs, &spec.policy_name);
    let actions = &spec.validation_actions;
    if actions.is_empty() {
        errs.push(FieldError::required("spec.validationActions", ""));
    }
    let known = ["Audit", "Deny", "Warn"];
    for (i, a) in actions.iter().enumerate() {
        if !known.contains(&a.as_str()) {
            errs.push(FieldError::not_supported(
                format!("spec.validationActions[{i}]"),
                &json!(a),
                &known,
            ));
        }
    }
    let has = |a: &str| actions.iter().any(|x| x == a);
    if has("Deny") && has("Warn") {
        errs.push(FieldError::invalid("spec.validationActions", &json!(actions), "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"));
    }
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
        let check = |cfg: &Value| {
            let mut errs = Vec::new();
            let config = serde_json::from_value(cfg.clone()).unwrap();
            validate_mutating_webhooks(&config, None, &mut errs);
            errs
        };
        assert!(check(&cfg).is_empty());
        cfg["webhooks"][0]["name"] = json!("short");
        cfg["webhooks"][0]["sideEffects"] = json!("Some");
        cfg["webhooks"][0]["clientConfig"] = json!({"url": "http://x"});
        let m: Vec<String> = check(&cfg).iter().map(ToString::to_string).collect();
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
        let policy_errors = |p: &Value| {
            let mut errs = Vec::new();
            validate_policy(&serde_json::from_value(p.clone()).unwrap(), None, &mut errs);
            errs
        };
        assert!(policy_errors(&p).is_empty(), "{:?}", policy_errors(&p));
        p["spec"]["validations"][0]["expression"] = json!("object.spec.replicas <=");
        assert_eq!(policy_errors(&p)[0].field, "spec.validations[0].expression");
        let b = json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}});
        let mut errs = Vec::new();
        validate_binding(&serde_json::from_value(b).unwrap(), None, &mut errs);
        assert_eq!(errs[0].field, "spec.validationActions");
    }
}
