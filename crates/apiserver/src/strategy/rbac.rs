//! Roles, ClusterRoles and their bindings: names are URL path segments
//! (`system:basic-user`), as Kubernetes' ValidateRBACName allows; and
//! escalation prevention, which needs the writer
//! ([`Strategy::admit_writer`]), as Kubernetes' RBAC storage does
//! (`pkg/registry/rbac/*/policybased`):
//!
//! ```text
//!  Role / ClusterRole write ─▶ may the writer `escalate` it? ─ yes ─▶ ok
//!                              └─ no: the writer must hold every rule it grants
//!  (Cluster)RoleBinding write ─▶ may the writer `bind` its role? ─ yes ─▶ ok
//!                              └─ no: the writer must hold every rule of the role (in the binding's scope)
//! ```
//!
//! A refusal is a 403 naming the rules the writer lacks.

use super::{Strategy, Writer};
use crate::auth::rbac::missing_rules;
use crate::auth::request_info::Attributes;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleRef};
use k8s_openapi::Resource as _;
use minik8s_api::{meta, registry};
use minik8s_validation::NameRule;
use serde_json::Value;

const GROUP: &str = "rbac.authorization.k8s.io";

/// A Role (`cluster`: a ClusterRole): grants its rules.
pub struct Roles {
    pub cluster: bool,
}

/// A RoleBinding (`cluster`: a ClusterRoleBinding): grants its role's rules.
pub struct Bindings {
    pub cluster: bool,
}

pub const ROLE: Roles = Roles { cluster: false };
pub const CLUSTER_ROLE: Roles = Roles { cluster: true };
pub const ROLE_BINDING: Bindings = Bindings { cluster: false };
pub const CLUSTER_ROLE_BINDING: Bindings = Bindings { cluster: true };

impl Strategy for Roles {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn admit_writer(&self, writer: &Writer, obj: &Value) -> Result<(), String> {
        let ns = meta::namespace(obj).unwrap_or("");
        let plural = if self.cluster {
            &registry::of::<ClusterRole>().plural
        } else {
            &registry::of::<Role>().plural
        };
        let mut escalate = Attributes::resource("escalate", GROUP, plural, ns);
        escalate.name = meta::name(obj).into();
        if writer.authority.allows(writer.user, &escalate) {
            return Ok(());
        }
        let wanted = if self.cluster && obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
            // An aggregated role may come to hold anything.
            everything()
        } else {
            serde_json::from_value(obj.get("rules").cloned().unwrap_or(Value::Null))
                .unwrap_or_default()
        };
        holds(writer, ns, &wanted)
    }
}

impl Strategy for Bindings {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn admit_writer(&self, writer: &Writer, obj: &Value) -> Result<(), String> {
        let ns = meta::namespace(obj).unwrap_or("");
        let Ok(role) = serde_json::from_value::<RoleRef>(obj["roleRef"].clone()) else {
            return Ok(()); // validation reports it
        };
        let resource = if role.kind == Role::KIND {
            &registry::of::<Role>().plural
        } else {
            &registry::of::<ClusterRole>().plural
        };
        let mut bind = Attributes::resource("bind", GROUP, resource, ns);
        bind.name = role.name.clone();
        if writer.authority.allows(writer.user, &bind) {
            return Ok(());
        }
        let scope = (!self.cluster).then_some(ns);
        let wanted = writer.authority.policy().role_rules(&role, scope)?;
        holds(writer, ns, &wanted)
    }
}

/// Every rule: what an aggregated ClusterRole may come to hold.
fn everything() -> Vec<PolicyRule> {
    let all = || vec!["*".to_string()];
    vec![
        PolicyRule {
            api_groups: Some(all()),
            resources: Some(all()),
            verbs: all(),
            ..Default::default()
        },
        PolicyRule {
            non_resource_urls: Some(all()),
            verbs: all(),
            ..Default::default()
        },
    ]
}

/// Ok when the writer holds every `wanted` rule in `ns`; Err is Kubernetes'
/// message listing the rules it lacks.
fn holds(writer: &Writer, ns: &str, wanted: &[PolicyRule]) -> Result<(), String> {
    let (held, _) = writer.authority.policy().rules_for(writer.user, ns);
    let missing = missing_rules(&held, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let user = writer.user;
    let groups = user
        .groups
        .iter()
        .map(|g| format!("{g:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    Err(format!(
        "user {:?} (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        missing.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac::{Policy, PolicyObjects};
    use crate::auth::UserInfo;
    use serde_json::json;
    use std::sync::Arc;

    /// An authorizer that answers `escalate`/`bind` with `grants_all`, over
    /// a policy where alice may read pods in namespace `a`.
    struct Fake {
        grants_all: bool,
        policy: Arc<Policy>,
    }

    impl super::super::Authority for Fake {
        fn allows(&self, _user: &UserInfo, _attributes: &Attributes) -> bool {
            self.grants_all
        }
        fn policy(&self) -> Arc<Policy> {
            self.policy.clone()
        }
    }

    fn fake(grants_all: bool) -> Fake {
        let role = |name: &str, verbs: Value| -> ClusterRole {
            serde_json::from_value(json!({"metadata": {"name": name},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]}))
            .unwrap()
        };
        let mut objs = PolicyObjects::default();
        objs.cluster_roles
            .insert("pod-reader".into(), role("pod-reader", json!(["get"])));
        objs.cluster_roles
            .insert("pod-admin".into(), role("pod-admin", json!(["*"])));
        let binding = serde_json::from_value(json!({
            "metadata": {"name": "alice-reads", "namespace": "a"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "pod-reader"},
            "subjects": [{"kind": "User", "name": "alice"}]}))
        .unwrap();
        objs.role_bindings
            .insert(("a".into(), "alice-reads".into()), binding);
        Fake {
            grants_all,
            policy: Arc::new(Policy::build(&objs)),
        }
    }

    fn alice() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            groups: vec!["students".into()],
            ..Default::default()
        }
    }

    fn role_granting(verb: &str) -> Value {
        json!({"metadata": {"name": "r", "namespace": "a"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": [verb]}]})
    }

    fn writer<'a>(authority: &'a Fake, user: &'a UserInfo) -> Writer<'a> {
        Writer { user, authority }
    }

    fn binding_to(role: &str) -> Value {
        json!({"metadata": {"name": "b", "namespace": "a"},
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "User", "name": "bob"}]})
    }

    #[test]
    fn a_role_grants_only_what_its_writer_holds() {
        let (authority, user) = (fake(false), alice());
        let writer = writer(&authority, &user);
        assert_eq!(ROLE.admit_writer(&writer, &role_granting("get")), Ok(()));
        let why = ROLE
            .admit_writer(&writer, &role_granting("delete"))
            .unwrap_err();
        assert!(
            why.starts_with("user \"alice\" (groups=[\"students\"]) is attempting to grant RBAC permissions not currently held:\n"),
            "{why}"
        );
        assert!(
            why.ends_with(r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#),
            "{why}"
        );
        // An aggregated ClusterRole may come to hold anything.
        let aggregated = json!({"metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
        assert!(CLUSTER_ROLE.admit_writer(&writer, &aggregated).is_err());
    }

    #[test]
    fn a_binding_grants_only_a_role_its_writer_holds() {
        let (authority, user) = (fake(false), alice());
        let writer = writer(&authority, &user);
        assert_eq!(
            ROLE_BINDING.admit_writer(&writer, &binding_to("pod-reader")),
            Ok(())
        );
        assert!(ROLE_BINDING
            .admit_writer(&writer, &binding_to("pod-admin"))
            .is_err());
        // Alice reads pods in `a` only: cluster-wide, she holds nothing.
        let mut cluster_wide = binding_to("pod-reader");
        cluster_wide["metadata"] = json!({"name": "b"});
        assert!(CLUSTER_ROLE_BINDING
            .admit_writer(&writer, &cluster_wide)
            .is_err());
    }

    #[test]
    fn escalate_and_bind_permissions_allow_anything() {
        let (authority, user) = (fake(true), alice());
        let writer = writer(&authority, &user);
        assert_eq!(ROLE.admit_writer(&writer, &role_granting("delete")), Ok(()));
        assert_eq!(
            ROLE_BINDING.admit_writer(&writer, &binding_to("pod-admin")),
            Ok(())
        );
    }
}
