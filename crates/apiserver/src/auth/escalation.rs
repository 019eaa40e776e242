//! RBAC escalation prevention, as Kubernetes' RBAC registry does it: nobody
//! grants permissions they do not hold. Writing a Role or ClusterRole needs
//! every rule in it (or the `escalate` verb on roles); writing a binding
//! needs every rule of the role it references (or the `bind` verb on that role).

use super::rbac::missing_rules;
use super::request_info::Attributes;
use super::{Admission, UserInfo};
use crate::ApiServer;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
};
use k8s_openapi::Resource as _;
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::{meta, ApiError};
use serde_json::Value;
use std::sync::Arc;

const GROUP: &str = "rbac.authorization.k8s.io";

impl ApiServer {
    /// The escalation check for a write of `info` by `user`, if it is an RBAC kind.
    pub fn escalation_check(
        self: &Arc<Self>,
        info: &'static ResourceInfo,
        user: &UserInfo,
    ) -> Option<Admission> {
        if info.group != GROUP || user.is_superuser() || self.auth.mode == super::Mode::AlwaysAllow
        {
            return None;
        }
        let srv = Arc::downgrade(self);
        let user = user.clone();
        Some(Admission(Arc::new(
            move |obj: &Value, _old: Option<&Value>| {
                let Some(srv) = srv.upgrade() else {
                    return Ok(());
                };
                srv.confirm_no_escalation(info, &user, obj)
            },
        )))
    }

    fn confirm_no_escalation(
        &self,
        info: &ResourceInfo,
        user: &UserInfo,
        obj: &Value,
    ) -> Result<(), ApiError> {
        let ns = meta::namespace(obj).unwrap_or("");
        let name = meta::name(obj);
        let policy = self.policy.policy();
        let wanted: Vec<PolicyRule> = if info.is::<Role>() || info.is::<ClusterRole>() {
            let mut escalate = Attributes::resource("escalate", GROUP, info.plural, ns);
            escalate.name = name.into();
            if self.authorize(user, &escalate).is_ok() {
                return Ok(());
            }
            if info.is::<ClusterRole>() && obj.get("aggregationRule").is_some_and(|a| !a.is_null())
            {
                // An aggregated role may come to hold anything.
                vec![
                    serde_json::from_value(
                        serde_json::json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                    )
                    .unwrap_or_default(),
                    serde_json::from_value(
                        serde_json::json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
                    )
                    .unwrap_or_default(),
                ]
            } else {
                serde_json::from_value(obj.get("rules").cloned().unwrap_or(Value::Null))
                    .unwrap_or_default()
            }
        } else if info.is::<RoleBinding>() || info.is::<ClusterRoleBinding>() {
            let Ok(role) = serde_json::from_value::<RoleRef>(obj["roleRef"].clone()) else {
                return Ok(()); // validation reports it
            };
            let resource = if role.kind == Role::KIND {
                registry::of::<Role>().plural
            } else {
                registry::of::<ClusterRole>().plural
            };
            let mut bind = Attributes::resource("bind", GROUP, resource, ns);
            bind.name = role.name.clone();
            if self.authorize(user, &bind).is_ok() {
                return Ok(());
            }
            let scope = info.is::<RoleBinding>().then_some(ns);
            policy
                .role_rules(&role, scope)
                .map_err(|e| ApiError::forbidden(info, name, &e))?
        } else {
            return Ok(());
        };
        let (held, _) = policy.rules_for(user, ns);
        let missing = missing_rules(&held, &wanted);
        if missing.is_empty() {
            return Ok(());
        }
        let groups = user
            .groups
            .iter()
            .map(|g| format!("{g:?}"))
            .collect::<Vec<_>>()
            .join(" ");
        Err(ApiError::forbidden(
            info,
            name,
            &format!(
                "user {:?} (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
                user.username,
                missing.join("\n")
            ),
        ))
    }
}
