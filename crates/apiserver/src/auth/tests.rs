//! The pure parts of authentication and RBAC: the default policy evaluated
//! for a student with `edit` in one namespace, messages, token files.

use super::policy;
use super::rbac::{missing_rules, Policy, PolicyObjects};
use super::request_info::{parse, Attributes};
use super::*;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding};

/// The default policy plus `alice` bound to `edit` in ns-a.
fn class_policy() -> Policy {
    let mut objs = PolicyObjects::default();
    for r in policy::cluster_roles() {
        let r: ClusterRole = serde_json::from_value(r).unwrap();
        objs.cluster_roles
            .insert(r.metadata.name.clone().unwrap(), r);
    }
    for b in policy::cluster_role_bindings() {
        let b: ClusterRoleBinding = serde_json::from_value(b).unwrap();
        objs.cluster_role_bindings
            .insert(b.metadata.name.clone().unwrap(), b);
    }
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "alice-edit", "namespace": "ns-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                     {"kind": "ServiceAccount", "name": "bot"}]}))
    .unwrap();
    objs.role_bindings
        .insert(("ns-a".into(), "alice-edit".into()), rb);
    Policy::build(&objs)
}

fn alice() -> UserInfo {
    UserInfo::new("alice", &["students", ALL_AUTHENTICATED])
}

fn allowed(p: &Policy, user: &UserInfo, method: &str, path: &str) -> bool {
    p.authorize(user, &parse(method, path, false)).is_ok()
}

#[test]
fn edit_in_one_namespace_confines_a_student() {
    let p = class_policy();
    let a = alice();
    assert!(allowed(
        &p,
        &a,
        "POST",
        "/apis/apps/v1/namespaces/ns-a/deployments"
    ));
    assert!(allowed(
        &p,
        &a,
        "GET",
        "/api/v1/namespaces/ns-a/pods/web/log"
    ));
    assert!(allowed(
        &p,
        &a,
        "POST",
        "/api/v1/namespaces/ns-a/pods/web/exec"
    ));
    assert!(allowed(&p, &a, "GET", "/api/v1/namespaces/ns-a/secrets"));
    assert!(!allowed(
        &p,
        &a,
        "POST",
        "/apis/apps/v1/namespaces/ns-b/deployments"
    ));
    assert!(!allowed(&p, &a, "GET", "/api/v1/nodes"));
    // edit cannot manage RBAC (admin can).
    assert!(!allowed(
        &p,
        &a,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/ns-a/rolebindings"
    ));
    // Every authenticated user: discovery, self reviews; not other paths.
    assert!(allowed(&p, &a, "GET", "/apis"));
    assert!(allowed(
        &p,
        &a,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    ));
    assert!(!allowed(&p, &a, "GET", "/metrics"));
    // Anonymous: only the public information.
    let anon = UserInfo::anonymous();
    assert!(allowed(&p, &anon, "GET", "/version"));
    assert!(!allowed(&p, &anon, "GET", "/api"));
    // A ServiceAccount subject without a namespace is the binding's.
    let bot = UserInfo::new("system:serviceaccount:ns-a:bot", &[ALL_AUTHENTICATED]);
    assert!(allowed(
        &p,
        &bot,
        "GET",
        "/api/v1/namespaces/ns-a/configmaps"
    ));
    assert!(!allowed(
        &p,
        &bot,
        "GET",
        "/api/v1/namespaces/ns-b/configmaps"
    ));
}

#[test]
fn aggregation_is_transitive_and_reasons_name_the_binding() {
    let p = class_policy();
    let a = alice();
    // view's rules reach edit (view is labelled aggregate-to-edit).
    let reason = p
        .authorize(
            &a,
            &parse("GET", "/apis/apps/v1/namespaces/ns-a/replicasets", false),
        )
        .unwrap();
    assert_eq!(
        reason,
        "RBAC: allowed by RoleBinding \"alice-edit/ns-a\" of ClusterRole \"edit\" to User \"alice\""
    );
    // admin holds edit's and view's rules.
    let admin = p.role_rules(
        &serde_json::from_value(json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"})).unwrap(),
        None,
    ).unwrap();
    let want = Attributes::resource("list", "apps", "replicasets", "x");
    assert!(admin.iter().any(|r| super::rbac::rule_allows(r, &want)));
}

#[test]
fn escalation_lists_what_is_not_held() {
    let p = class_policy();
    let (held, errors) = p.rules_for(&alice(), "ns-a");
    assert!(errors.is_empty());
    let want: Vec<PolicyRule> = serde_json::from_value(json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]))
    .unwrap();
    assert_eq!(
        missing_rules(&held, &want),
        vec![
            "{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}".to_string(),
            "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}".to_string(),
        ]
    );
    // Outside ns-a alice holds nothing to grant.
    let (held_b, _) = p.rules_for(&alice(), "ns-b");
    assert_eq!(missing_rules(&held_b, &want[..1]).len(), 1);
}

#[test]
fn forbidden_messages_are_kubernetes_words() {
    let a = alice();
    let e = forbidden(&a, &parse("GET", "/api/v1/nodes", false), "");
    assert_eq!(
        e.message,
        "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    let e = forbidden(
        &a,
        &parse("POST", "/apis/apps/v1/namespaces/ns-b/deployments", false),
        "",
    );
    assert_eq!(
        e.message,
        "deployments.apps is forbidden: User \"alice\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns-b\""
    );
    let e = forbidden(
        &a,
        &parse("GET", "/api/v1/namespaces/x/pods/web/log", false),
        "",
    );
    assert_eq!(
        e.message,
        "pods \"web\" is forbidden: User \"alice\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"x\""
    );
    let e = forbidden(&a, &parse("GET", "/metrics", false), "");
    assert_eq!(
        e.message,
        "forbidden: User \"alice\" cannot get path \"/metrics\""
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
}

#[test]
fn static_token_file() {
    let t = StaticTokens::parse("# comment\nabc123,alice,1001,\"students,lab\"\nxyz,bob,1002\n")
        .unwrap();
    let alice = t.lookup("abc123").unwrap();
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.uid, "1001");
    assert_eq!(alice.groups, vec!["students", "lab"]);
    assert!(t.lookup("xyz").unwrap().groups.is_empty());
    assert!(t.lookup("nope").is_none());
    assert!(StaticTokens::parse("only,two\n").is_err());
}

#[test]
fn public_paths() {
    for p in ["/healthz", "/livez", "/readyz", "/version", "/readyz/etcd"] {
        assert!(is_public_path(p), "{p}");
    }
    for p in ["/api", "/apis", "/openapi/v2", "/metrics", "/api/v1/pods"] {
        assert!(!is_public_path(p), "{p}");
    }
}
