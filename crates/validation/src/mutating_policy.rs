//! MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
//! Kubernetes 1.36) and its bindings: Kubernetes' defaults and the rules a
//! policy must meet, its expressions compiled as they will run.

use super::admission::{common_policy_errors, one_of, policy_name_errors};
use super::{arr, Errors, FieldError};
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
pub fn validate_mutating_policy(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mutations = arr(spec, "mutations");
    if mutations.is_empty() {
        errs.push(FieldError::required(
            "spec.mutations",
            "mutations must contain at least one item",
        ));
    }
    for (i, m) in mutations.iter().enumerate() {
        let path = format!("spec.mutations[{i}]");
        let (field, body) = match m.get("patchType").and_then(Value::as_str) {
            Some("ApplyConfiguration") => ("applyConfiguration", &m["applyConfiguration"]),
            Some("JSONPatch") => ("jsonPatch", &m["jsonPatch"]),
            _ => {
                errs.push(FieldError::not_supported(
                    format!("{path}.patchType"),
                    m.get("patchType").unwrap_or(&Value::Null),
                    &["ApplyConfiguration", "JSONPatch"],
                ));
                continue;
            }
        };
        for other in ["applyConfiguration", "jsonPatch"]
            .iter()
            .filter(|o| **o != field)
        {
            if m.get(*other).is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::forbidden(
                    format!("{path}.{other}"),
                    format!(
                        "must not be set when patchType is {}",
                        m["patchType"].as_str().unwrap_or("")
                    ),
                ));
            }
        }
        match body.get("expression").and_then(Value::as_str) {
            None | Some("") => errs.push(FieldError::required(
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
    common_policy_errors(&mut errs, spec);
    one_of(
        &mut errs,
        spec,
        "reinvocationPolicy",
        "spec",
        &["Never", "IfNeeded"],
    );
    errs
}

/// The rules of a MutatingAdmissionPolicyBinding.
pub fn validate_mutating_binding(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    policy_name_errors(&mut errs, obj.get("spec").unwrap_or(&Value::Null));
    errs
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
        assert!(
            validate_mutating_policy(&p).is_empty(),
            "{:?}",
            validate_mutating_policy(&p)
        );
        p["spec"]["mutations"][0]["applyConfiguration"]["expression"] = json!("Object{");
        p["spec"]["mutations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"patchType": "Merge"}));
        let fields: Vec<String> = validate_mutating_policy(&p)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.mutations[0].applyConfiguration.expression",
                "spec.mutations[1].patchType"
            ]
        );
        assert_eq!(
            validate_mutating_binding(&json!({"spec": {}}))[0].field,
            "spec.policyName"
        );
    }
}
