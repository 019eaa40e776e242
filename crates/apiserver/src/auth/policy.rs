//! The default ClusterRoles and ClusterRoleBindings (`default-policy.yaml`),
//! put in place at every start as kube-apiserver's RBAC bootstrap does:
//! missing objects are created, and objects still marked
//! `rbac.authorization.kubernetes.io/autoupdate: "true"` get back the rules and
//! subjects they lost (an administrator opts out by setting it to "false").

use serde::Deserialize;
use serde_json::{json, Value};

const POLICY: &str = include_str!("default-policy.yaml");
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefaultPolicy {
    cluster_roles: Vec<RoleEntry>,
    cluster_role_bindings: Vec<BindingEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleEntry {
    name: String,
    #[serde(default)]
    labels: serde_json::Map<String, Value>,
    #[serde(default)]
    rules: Vec<Value>,
    /// The label an aggregated role collects (`aggregationRule`).
    aggregate_from: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingEntry {
    name: String,
    role: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
    /// `namespace:name`.
    #[serde(default)]
    service_accounts: Vec<String>,
}

fn metadata(name: &str, mut labels: serde_json::Map<String, Value>) -> Value {
    labels.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    json!({"name": name, "labels": labels, "annotations": {AUTOUPDATE: "true"}})
}

/// The default ClusterRoles, as API objects.
pub fn cluster_roles() -> Vec<Value> {
    let policy = parse();
    policy
        .cluster_roles
        .into_iter()
        .map(|r| {
            let mut obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                 "metadata": metadata(&r.name, r.labels)});
            match r.aggregate_from {
                Some(label) => {
                    obj["aggregationRule"] =
                        json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
                    obj["rules"] = json!([]);
                }
                None => obj["rules"] = Value::Array(r.rules),
            }
            obj
        })
        .collect()
}

/// The default ClusterRoleBindings, as API objects.
pub fn cluster_role_bindings() -> Vec<Value> {
    parse()
        .cluster_role_bindings
        .into_iter()
        .map(|b| {
            let group = "rbac.authorization.k8s.io";
            let subjects: Vec<Value> = b
                .users
                .iter()
                .map(|u| json!({"kind": "User", "apiGroup": group, "name": u}))
                .chain(
                    b.groups
                        .iter()
                        .map(|g| json!({"kind": "Group", "apiGroup": group, "name": g})),
                )
                .chain(b.service_accounts.iter().map(|sa| {
                    let (ns, name) = sa.split_once(':').unwrap_or(("default", sa));
                    json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
                }))
                .collect();
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": metadata(&b.name, Default::default()),
                   "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": b.role},
                   "subjects": subjects})
        })
        .collect()
}

fn parse() -> DefaultPolicy {
    serde_yaml::from_str(POLICY).expect("default-policy.yaml is valid (checked by a unit test)")
}

/// What an existing default object must get back (None: leave it): the
/// missing rules, subjects or aggregation, when it is still auto-updated.
pub fn reconcile(existing: &Value, default: &Value) -> Option<Value> {
    let auto = existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTOUPDATE.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    if auto != Some("true") {
        return None;
    }
    let mut out = existing.clone();
    let mut changed = false;
    for field in ["rules", "subjects"] {
        let Some(want) = default.get(field).and_then(Value::as_array) else {
            continue;
        };
        // Aggregated roles' rules are computed, not reconciled.
        if field == "rules" && default.get("aggregationRule").is_some() {
            continue;
        }
        let have = out[field].as_array().cloned().unwrap_or_default();
        let mut merged = have.clone();
        for w in want {
            if !have.contains(w) {
                merged.push(w.clone());
            }
        }
        if merged.len() != have.len() {
            out[field] = Value::Array(merged);
            changed = true;
        }
    }
    if let Some(agg) = default.get("aggregationRule") {
        if out.get("aggregationRule") != Some(agg) {
            out["aggregationRule"] = agg.clone();
            changed = true;
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

    #[test]
    fn defaults_are_valid_objects() {
        let roles = cluster_roles();
        assert!(roles.len() > 20);
        for r in &roles {
            let typed: ClusterRole = serde_json::from_value(r.clone()).unwrap();
            assert!(typed.metadata.name.is_some());
        }
        for b in cluster_role_bindings() {
            let typed: ClusterRoleBinding = serde_json::from_value(b.clone()).unwrap();
            let role = &typed.role_ref.name;
            assert!(
                roles.iter().any(|r| r["metadata"]["name"] == json!(role)),
                "binding {:?} names a missing role {role}",
                typed.metadata.name
            );
        }
    }

    /// Whether the default roles bound to `user` allow `verb` on `resource`
    /// of `group`.
    fn user_may(user: &str, verb: &str, group: &str, resource: &str) -> bool {
        let roles = cluster_roles();
        cluster_role_bindings()
            .iter()
            .filter(|b| {
                b["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|s| s["kind"] == "User" && s["name"] == user)
            })
            .filter_map(|b| {
                roles
                    .iter()
                    .find(|r| r["metadata"]["name"] == b["roleRef"]["name"])
            })
            .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
            .any(|rule| {
                let has = |field: &str, want: &str| {
                    rule[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == want || v == "*")
                };
                has("verbs", verb) && has("apiGroups", group) && has("resources", resource)
            })
    }

    #[test]
    fn the_scheduler_may_watch_every_kind_it_caches() {
        let scheduler = "system:kube-scheduler";
        for (group, resource) in [
            ("", "pods"),
            ("", "nodes"),
            ("", "services"),
            ("", "persistentvolumeclaims"),
            ("", "persistentvolumes"),
            ("", "replicationcontrollers"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("policy", "poddisruptionbudgets"),
            ("storage.k8s.io", "storageclasses"),
            ("scheduling.volcano.sh", "podgroups"),
            ("resource.k8s.io", "resourceclaims"),
            ("resource.k8s.io", "deviceclasses"),
            ("resource.k8s.io", "resourceslices"),
        ] {
            for verb in ["list", "watch"] {
                assert!(
                    user_may(scheduler, verb, group, resource),
                    "{verb} {group}/{resource}"
                );
            }
        }
        assert!(user_may(
            scheduler,
            "patch",
            "scheduling.volcano.sh",
            "podgroups/status"
        ));
        // DRA's PreBind: the protection finalizer, then allocation and reservation.
        assert!(user_may(
            scheduler,
            "patch",
            "resource.k8s.io",
            "resourceclaims"
        ));
        assert!(user_may(
            scheduler,
            "patch",
            "resource.k8s.io",
            "resourceclaims/status"
        ));
    }

    #[test]
    fn reconcile_restores_what_was_removed_unless_opted_out() {
        let default = cluster_roles()
            .into_iter()
            .find(|r| r["metadata"]["name"] == "system:basic-user")
            .unwrap();
        let mut trimmed = default.clone();
        trimmed["rules"] = json!([]);
        assert_eq!(
            reconcile(&trimmed, &default).unwrap()["rules"],
            default["rules"]
        );
        assert!(reconcile(&default, &default).is_none());
        trimmed["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        assert!(reconcile(&trimmed, &default).is_none());
    }
}
