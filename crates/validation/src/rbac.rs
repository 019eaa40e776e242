//! RBAC objects (rbac.authorization.k8s.io/v1): roles' rules and bindings'
//! role references and subjects, with Kubernetes' messages
//! (`pkg/apis/rbac/validation`), on the typed objects.

use super::*;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::json;

const GROUP: &str = "rbac.authorization.k8s.io";

pub(super) fn validate_role(role: &Role, _old: Option<&Role>, errs: &mut Errors) {
    validate_rules(role.rules.as_deref().unwrap_or_default(), true, errs);
}

pub(super) fn validate_cluster_role(
    role: &ClusterRole,
    _old: Option<&ClusterRole>,
    errs: &mut Errors,
) {
    validate_rules(role.rules.as_deref().unwrap_or_default(), false, errs);
}

pub(super) fn validate_role_binding(
    binding: &RoleBinding,
    old: Option<&RoleBinding>,
    errs: &mut Errors,
) {
    let subjects = binding.subjects.as_deref().unwrap_or_default();
    let old = old.map(|o| &o.role_ref);
    validate_binding(&binding.role_ref, old, subjects, true, errs);
}

pub(super) fn validate_cluster_role_binding(
    binding: &ClusterRoleBinding,
    old: Option<&ClusterRoleBinding>,
    errs: &mut Errors,
) {
    let subjects = binding.subjects.as_deref().unwrap_or_default();
    let old = old.map(|o| &o.role_ref);
    validate_binding(&binding.role_ref, old, subjects, false, errs);
}

/// A Role's (namespaced) or ClusterRole's rules.
fn validate_rules(rules: &[PolicyRule], namespaced: bool, errs: &mut Errors) {
    let none = |v: &Option<Vec<String>>| v.as_ref().is_none_or(Vec::is_empty);
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        if rule.verbs.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
            if namespaced {
                errs.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs"),
                    &json!(urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !none(&rule.api_groups) || !none(&rule.resources) {
                errs.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs"),
                    &json!(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if none(&rule.api_groups) {
            errs.push(FieldError::required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if none(&rule.resources) {
            errs.push(FieldError::required(
                format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// A RoleBinding's (namespaced) or ClusterRoleBinding's role reference,
/// fixed once created, and its subjects.
fn validate_binding(
    role_ref: &RoleRef,
    old: Option<&RoleRef>,
    subjects: &[Subject],
    namespaced: bool,
    errs: &mut Errors,
) {
    let group = role_ref.api_group.as_deref().unwrap_or_default();
    if group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &json!(group),
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            &json!(role_ref.kind),
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    }
    if old.is_some_and(|old| old != role_ref) {
        errs.push(FieldError::invalid(
            "roleRef",
            &json!(role_ref),
            "cannot change roleRef",
        ));
    }
    for (i, subject) in subjects.iter().enumerate() {
        let path = format!("subjects[{i}]");
        if subject.name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        match subject.kind.as_str() {
            "ServiceAccount" => {
                if !namespaced && subject.namespace.as_deref().unwrap_or_default().is_empty() {
                    errs.push(FieldError::required(format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                let group = subject.api_group.as_deref().unwrap_or_default();
                if group != GROUP {
                    errs.push(FieldError::not_supported(
                        format!("{path}.apiGroup"),
                        &json!(group),
                        &[GROUP],
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

    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let mut errs = Vec::new();
        let role: Role = typed(
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                                   {"resources": ["pods"]},
                                   {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
        );
        validate_role(&role, None, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
            ]
        );
        let cluster_role: ClusterRole = typed(json!({"rules": [
            {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics"], "resources": ["pods"], "verbs": ["get"]}]}));
        let mut errs = Vec::new();
        validate_cluster_role(&cluster_role, None, &mut errs);
        assert_eq!(
            messages(&errs),
            ["rules[1].nonResourceURLs: Invalid value: [\"/metrics\"]: rules cannot apply to both regular resources and non-resource URLs"]
        );
    }

    #[test]
    fn bindings_name_a_role_and_keep_it() {
        let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                             "subjects": [{"kind": "ServiceAccount", "name": "default"},
                                          {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
        let mut errs = Vec::new();
        validate_role_binding(&typed(binding.clone()), None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        validate_cluster_role_binding(&typed(binding.clone()), None, &mut errs);
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
        let old: RoleBinding = typed(binding);
        validate_role_binding(&typed(changed), Some(&old), &mut errs);
        assert_eq!(
            messages(&errs),
            ["roleRef: Invalid value: {\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"other\"}: cannot change roleRef"]
        );
    }

    #[test]
    fn subjects_need_a_known_kind_and_group() {
        let binding: RoleBinding = typed(json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Robot", "name": "r2"}, {"kind": "Group", "name": "devs"}, {"kind": "User", "name": ""}]}));
        let mut errs = Vec::new();
        validate_role_binding(&binding, None, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "subjects[1].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[2].name: Required value",
                "subjects[2].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
            ]
        );
    }
}
