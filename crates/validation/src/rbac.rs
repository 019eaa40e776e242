//! RBAC objects (rbac.authorization.k8s.io/v1): roles' rules and bindings'
//! role references and subjects, with Kubernetes' messages.

use super::*;
use serde_json::json;

/// Role (namespaced) and ClusterRole.
pub(super) fn validate_role(obj: &Value, namespaced: bool, errs: &mut Errors) {
    for (i, rule) in arr(obj, "rules").iter().enumerate() {
        let path = format!("rules[{i}]");
        if arr(rule, "verbs").is_empty() {
            errs.push(FieldError::required(
                format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = arr(rule, "nonResourceURLs");
        if !urls.is_empty() {
            if namespaced {
                errs.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs"),
                    &json!(urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !arr(rule, "apiGroups").is_empty() || !arr(rule, "resources").is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs"),
                    &json!(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if arr(rule, "apiGroups").is_empty() {
            errs.push(FieldError::required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if arr(rule, "resources").is_empty() {
            errs.push(FieldError::required(
                format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// RoleBinding (namespaced) and ClusterRoleBinding.
pub(super) fn validate_binding(
    obj: &Value,
    old: Option<&Value>,
    namespaced: bool,
    errs: &mut Errors,
) {
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let group = str_at(role_ref, "apiGroup").unwrap_or("");
    if group != "rbac.authorization.k8s.io" {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &json!(group),
            &["rbac.authorization.k8s.io"],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    match non_empty_str(role_ref, "kind") {
        None => errs.push(FieldError::not_supported("roleRef.kind", &json!(""), kinds)),
        Some(k) if !kinds.contains(&k) => {
            errs.push(FieldError::not_supported("roleRef.kind", &json!(k), kinds))
        }
        Some(_) => {}
    }
    if non_empty_str(role_ref, "name").is_none() {
        errs.push(FieldError::required("roleRef.name", ""));
    }
    if let Some(old) = old {
        if old.get("roleRef") != obj.get("roleRef") {
            errs.push(FieldError::invalid(
                "roleRef",
                role_ref,
                "cannot change roleRef",
            ));
        }
    }
    for (i, subject) in arr(obj, "subjects").iter().enumerate() {
        let path = format!("subjects[{i}]");
        if non_empty_str(subject, "name").is_none() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        match str_at(subject, "kind").unwrap_or("") {
            "ServiceAccount" => {
                if !namespaced && non_empty_str(subject, "namespace").is_none() {
                    errs.push(FieldError::required(format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                let group = str_at(subject, "apiGroup").unwrap_or("");
                if group != "rbac.authorization.k8s.io" {
                    errs.push(FieldError::not_supported(
                        format!("{path}.apiGroup"),
                        &json!(group),
                        &["rbac.authorization.k8s.io"],
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{path}.kind"),
                &json!(other),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let mut errs = Vec::new();
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                                   {"resources": ["pods"]},
                                   {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        validate_role(&role, true, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
            ]
        );
    }

    #[test]
    fn bindings_name_a_role_and_keep_it() {
        let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                             "subjects": [{"kind": "ServiceAccount", "name": "default"},
                                          {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
        let mut errs = Vec::new();
        validate_binding(&binding, None, true, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        validate_binding(&binding, None, false, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
            ]
        );
        let mut changed = binding.clone();
        changed["roleRef"]["name"] = json!("other");
        let mut errs = Vec::new();
        validate_binding(&changed, Some(&binding), true, &mut errs);
        assert!(
            messages(&errs)[0].ends_with("cannot change roleRef"),
            "{errs:?}"
        );
    }
}
