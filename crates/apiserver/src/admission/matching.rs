//! Which webhooks and policies apply to a request: rules (operations, groups,
//! versions, resources with subresources, scope), namespace and object
//! selectors, and CEL match conditions, as Kubernetes matches them.

use super::Attributes;
use crate::ApiServer;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use minik8s_api::registry;
use minik8s_api::selector::{labels_of, Selector};
use minik8s_cel::schema::cel;
use serde_json::Value;

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn listed(v: &Value, want: &str) -> bool {
    strs(v).any(|s| s == "*" || s == want)
}

/// Does one rule (RuleWithOperations) cover the request? `exact`: matchPolicy Exact.
pub fn rule_matches(rule: &Value, a: &Attributes, exact: bool) -> bool {
    let info = a.info;
    let resource_ok = strs(&rule["resources"]).any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        let res_ok = res == "*" || res == info.plural;
        let sub_ok = match sub {
            "*" => true,
            "" => a.subresource.is_empty(),
            s => s == a.subresource,
        };
        res_ok && sub_ok
    });
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !info.namespaced,
        "Namespaced" => info.namespaced,
        _ => true,
    };
    listed(&rule["operations"], a.operation.name())
        && listed(&rule["apiGroups"], &info.group)
        && (!exact || listed(&rule["apiVersions"], &info.version))
        && resource_ok
        && scope_ok
}

fn selector(v: &Value) -> Option<Selector> {
    if v.is_null() {
        return Some(Selector::everything());
    }
    let ls: LabelSelector = serde_json::from_value(v.clone()).ok()?;
    Selector::from_label_selector(&ls).ok()
}

impl ApiServer {
    /// Do `rules`, `namespaceSelector` and `objectSelector` of `hook` (a
    /// webhook, or a policy's matchConstraints with `resourceRules`) cover the request?
    pub(super) async fn covers(&self, hook: &Value, rules_key: &str, a: &Attributes<'_>) -> bool {
        let exact = hook["matchPolicy"] == "Exact";
        if !strs_objects(&hook[rules_key]).any(|r| rule_matches(r, a, exact)) {
            return false;
        }
        // The object selector matches the new or the old object.
        let Some(objects) = selector(&hook["objectSelector"]) else {
            return false;
        };
        let by_object = [a.object, a.old]
            .into_iter()
            .flatten()
            .any(|o| objects.matches(&labels_of(o)));
        if !objects.is_empty() && !by_object {
            return false;
        }
        let Some(namespaces) = selector(&hook["namespaceSelector"]) else {
            return false;
        };
        if namespaces.is_empty() {
            return true;
        }
        if a.info.is::<Namespace>() {
            return [a.object, a.old]
                .into_iter()
                .flatten()
                .any(|o| namespaces.matches(&labels_of(o)));
        }
        let Some(ns) = a.namespace.filter(|_| a.info.namespaced) else {
            return true;
        };
        let labels = match self.namespaces.labels(ns) {
            Some(l) => (*l).clone(),
            None => match self.read(registry::of::<Namespace>(), None, ns).await {
                Ok((o, _)) => o
                    .pointer("/metadata/labels")
                    .cloned()
                    .unwrap_or(Value::Null),
                Err(_) => Value::Null,
            },
        };
        namespaces.matches(&labels_of(
            &serde_json::json!({"metadata": {"labels": labels}}),
        ))
    }
}

fn strs_objects(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// The `matchConditions` of a webhook or policy: Ok(true) when all hold; an
/// error when one cannot be evaluated (the failure policy decides).
pub fn conditions_hold(conditions: &Value, vars: &[(&str, &Value)]) -> Result<bool, String> {
    for c in strs_objects(conditions) {
        let expr = c["expression"].as_str().unwrap_or("true");
        let program = cel::compile(expr)?;
        if !cel::eval_bool(&program, vars)? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::auth::UserInfo;
    use serde_json::json;

    #[test]
    fn rules_match_resources_subresources_and_scope() {
        let user = UserInfo::default();
        let pods = registry::of::<k8s_openapi::api::core::v1::Pod>();
        let attrs = |sub: &'static str, op| Attributes {
            info: pods,
            subresource: sub,
            namespace: Some("default"),
            name: "p",
            operation: op,
            object: None,
            old: None,
            user: &user,
            dry_run: false,
        };
        let rule = |resources: Value, scope: &str| {
            json!({"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": resources, "scope": scope})
        };
        let create = attrs("", Operation::Create);
        assert!(rule_matches(&rule(json!(["pods"]), "*"), &create, true));
        assert!(rule_matches(
            &rule(json!(["*"]), "Namespaced"),
            &create,
            true
        ));
        assert!(!rule_matches(
            &rule(json!(["pods"]), "Cluster"),
            &create,
            true
        ));
        assert!(!rule_matches(
            &rule(json!(["pods"]), "*"),
            &attrs("", Operation::Delete),
            true
        ));
        let status = attrs("status", Operation::Update);
        assert!(!rule_matches(&rule(json!(["pods"]), "*"), &status, true));
        assert!(rule_matches(
            &rule(json!(["pods/status"]), "*"),
            &status,
            true
        ));
        assert!(rule_matches(&rule(json!(["pods/*"]), "*"), &status, true));
        assert!(rule_matches(&rule(json!(["*/*"]), "*"), &status, true));
        let mut other_version = rule(json!(["pods"]), "*");
        other_version["apiVersions"] = json!(["v2"]);
        assert!(!rule_matches(&other_version, &create, true), "Exact");
        assert!(rule_matches(&other_version, &create, false), "Equivalent");
    }

    #[test]
    fn match_conditions_are_cel() {
        let obj = json!({"metadata": {"name": "p", "labels": {"tier": "web"}}});
        let conds = json!([{"name": "web", "expression": "object.metadata.labels.tier == 'web'"}]);
        assert_eq!(conditions_hold(&conds, &[("object", &obj)]), Ok(true));
        let conds = json!([{"name": "db", "expression": "object.metadata.labels.tier == 'db'"}]);
        assert_eq!(conditions_hold(&conds, &[("object", &obj)]), Ok(false));
        assert!(conditions_hold(
            &json!([{"expression": "object.nope.x"}]),
            &[("object", &obj)]
        )
        .is_err());
    }
}
