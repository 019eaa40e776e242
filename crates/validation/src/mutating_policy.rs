//! MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
//! Kubernetes 1.36) and its bindings: Kubernetes' defaults and the rules a
//! policy must meet, its expressions compiled as they will run.

use super::admission::{common_policy_errors, policy_name_errors, PolicyCommon};
use super::{one_of, Errors, FieldError};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, MutatingAdmissionPolicySpec,
};
use minik8s_cel::schema::cel_mutation::Mutation;
use serde_json::{json, Value};

/// Fills in a MutatingAdmissionPolicy's defaults: a ValidatingAdmissionPolicy's,
/// and no reinvocation.
pub fn default_mutating_policy(obj: &mut Value) {
    super::admission::default_policy(obj);
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("reinvocationPolicy").or_insert(json!("Never"));
    }
}

/// The rules of a MutatingAdmissionPolicy.
pub(super) fn validate_mutating_policy(
    policy: &MutatingAdmissionPolicy,
    _old: Option<&MutatingAdmissionPolicy>,
    errs: &mut Errors,
) {
    let empty = MutatingAdmissionPolicySpec::default();
    let spec = policy.spec.as_ref().unwrap_or(&empty);
    let mutations = spec.mutations.as_deref().unwrap_or_default();
    if mutations.is_empty() {
        errs.push(FieldError::required(
            "spec.mutations",
            "mutations must contain at least one item",
        ));
    }
    for (i, m) in mutations.iter().enumerate() {
        let path = format!("spec.mutations[{i}]");
        let apply = m
            .apply_configuration
            .as_ref()
            .map(|a| a.expression.as_deref());
        let patch = m.json_patch.as_ref().map(|p| p.expression.as_deref());
        let (field, body, other, other_set) = match m.patch_type.as_str() {
            "ApplyConfiguration" => ("applyConfiguration", apply, "jsonPatch", patch.is_some()),
            "JSONPatch" => ("jsonPatch", patch, "applyConfiguration", apply.is_some()),
            other => {
                errs.push(FieldError::not_supported(
                    format!("{path}.patchType"),
                    &json!(other),
                    &["ApplyConfiguration", "JSONPatch"],
                ));
                continue;
            }
        };
        if other_set {
            errs.push(FieldError::forbidden(
                format!("{path}.{other}"),
                format!("must not be set when patchType is {}", m.patch_type),
            ));
        }
        match body.flatten().filter(|e| !e.is_empty()) {
            None => errs.push(FieldError::required(
                format!("{path}.{field}.expression"),
                "",
            )),
            Some(e) => {
                if let Err(why) = Mutation::compile(e) {
                    errs.push(FieldError::invalid(
                        format!("{path}.{field}.expression"),
                        &json!(e),
                        why,
                    ));
                }
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
    one_of(
        errs,
        spec.reinvocation_policy.as_deref(),
        "spec.reinvocationPolicy",
        &["Never", "IfNeeded"],
    );
}

/// The rules of a MutatingAdmissionPolicyBinding.
pub(super) fn validate_mutating_binding(
    binding: &MutatingAdmissionPolicyBinding,
    _old: Option<&MutatingAdmissionPolicyBinding>,
    errs: &mut Errors,
) {
    let spec = binding.spec.as_ref();
    policy_name_errors(
        errs,
        spec.and_then(|s| s.policy_name.as_deref())
            .unwrap_or_default(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_get_defaults_and_their_expressions_are_checked() {
        let mut p = json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"],
            "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {\"a\": \"b\"}}}"}}]}});
        default_mutating_policy(&mut p);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["reinvocationPolicy"], "Never");
        let check = |p: &Value| {
            let mut errs = Vec::new();
            validate_mutating_policy(&serde_json::from_value(p.clone()).unwrap(), None, &mut errs);
            errs
        };
        assert!(check(&p).is_empty(), "{:?}", check(&p));
        p["spec"]["mutations"][0]["applyConfiguration"]["expression"] = json!("Object{");
        p["spec"]["mutations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"patchType": "Merge"}));
        let fields: Vec<String> = check(&p).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "spec.mutations[0].applyConfiguration.expression",
                "spec.mutations[1].patchType"
            ]
        );
        let mut errs = Vec::new();
        let binding = serde_json::from_value(json!({"spec": {}})).unwrap();
        validate_mutating_binding(&binding, None, &mut errs);
        assert_eq!(errs[0].field, "spec.policyName");
    }
}
