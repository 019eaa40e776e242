//! RBAC, pure: from the stored Roles, ClusterRoles and their bindings to a
//! decision for one request (`Policy::authorize`), the rules a user holds in a
//! namespace (`Policy::rules_for`, behind SelfSubjectRulesReview and
//! `kubectl auth can-i --list`) and escalation prevention (`missing_rules`).
//!
//! ```text
//!  PolicyObjects ──build──▶ Policy { roles (aggregated), grants by subject }
//!  user + Attributes ──▶ subjects (user, groups) ──▶ bindings ──▶ roles ──▶ rules ──▶ allow?
//! ```
//!
//! Deny is the default: a request is allowed when one rule of one role bound to
//! the user (or one of their groups) matches it. ClusterRoleBindings grant
//! everywhere; RoleBindings only in their namespace. Aggregated ClusterRoles
//! (`aggregationRule`) take the rules of every ClusterRole their selectors
//! match, transitively (view → edit → admin), as Kubernetes' aggregation
//! controller fills them in.

use super::request_info::Attributes;
use super::UserInfo;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::Resource as _;
use minik8s_api::selector::Selector;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The stored RBAC objects, by namespace/name (cluster objects by name).
#[derive(Debug, Clone, Default)]
pub struct PolicyObjects {
    pub roles: BTreeMap<(String, String), Role>,
    pub cluster_roles: BTreeMap<String, ClusterRole>,
    pub role_bindings: BTreeMap<(String, String), RoleBinding>,
    pub cluster_role_bindings: BTreeMap<String, ClusterRoleBinding>,
}

/// A subject as requests carry it: a user name or a group name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SubjectKey {
    User(String),
    Group(String),
}

/// The subject a binding names, in request terms (a ServiceAccount is the user
/// `system:serviceaccount:<ns>:<name>`). `binding_ns` is where a RoleBinding
/// lives (a ServiceAccount subject without a namespace means that one).
fn subject_key(s: &Subject, binding_ns: Option<&str>) -> Option<SubjectKey> {
    // A subject's kind: User and Group are RBAC's own, ServiceAccount is the kind.
    const SERVICE_ACCOUNT: &str = ServiceAccount::KIND;
    match s.kind.as_str() {
        "User" => Some(SubjectKey::User(s.name.clone())),
        "Group" => Some(SubjectKey::Group(s.name.clone())),
        SERVICE_ACCOUNT => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .or(binding_ns)?;
            Some(SubjectKey::User(format!(
                "system:serviceaccount:{ns}:{}",
                s.name
            )))
        }
        _ => None,
    }
}

/// One binding's grant: which role, through which binding.
#[derive(Debug, Clone)]
struct Grant {
    role: RoleRef,
    /// The binding's name, for the reason an allowed review gives.
    binding: String,
    /// The RoleBinding's namespace (None for a ClusterRoleBinding).
    namespace: Option<String>,
}

/// The evaluated policy: roles with their rules, grants indexed by subject.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_grants: HashMap<SubjectKey, Vec<Grant>>,
    namespace_grants: HashMap<String, HashMap<SubjectKey, Vec<Grant>>>,
}

/// The rules of every ClusterRole, aggregation applied until nothing changes.
fn aggregate(cluster_roles: &BTreeMap<String, ClusterRole>) -> HashMap<String, Vec<PolicyRule>> {
    let mut rules: HashMap<String, Vec<PolicyRule>> = cluster_roles
        .iter()
        .map(|(n, r)| (n.clone(), r.rules.clone().unwrap_or_default()))
        .collect();
    let selectors: Vec<(&String, Vec<Selector>)> = cluster_roles
        .iter()
        .filter_map(|(n, r)| {
            let sel = r
                .aggregation_rule
                .as_ref()?
                .cluster_role_selectors
                .as_ref()?;
            let sel = sel
                .iter()
                .filter_map(|s| Selector::from_label_selector(s).ok())
                .collect();
            Some((n, sel))
        })
        .collect();
    // Each pass can only add rules; a chain of aggregations needs as many
    // passes as it is long.
    for _ in 0..=selectors.len() {
        let mut changed = false;
        for (name, sels) in &selectors {
            let mut merged: Vec<PolicyRule> = Vec::new();
            for (other, role) in cluster_roles {
                let labels = role.metadata.labels.clone().unwrap_or_default();
                if other == *name || !sels.iter().any(|s| !s.is_empty() && s.matches(&labels)) {
                    continue;
                }
                for rule in rules.get(other).into_iter().flatten() {
                    if !merged.contains(rule) {
                        merged.push(rule.clone());
                    }
                }
            }
            let own = rules.entry((*name).clone()).or_default();
            for rule in merged {
                if !own.contains(&rule) {
                    own.push(rule);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    rules
}

impl Policy {
    pub fn build(objs: &PolicyObjects) -> Policy {
        let mut p = Policy {
            cluster_roles: aggregate(&objs.cluster_roles)
                .into_iter()
                .map(|(n, r)| (n, Arc::new(r)))
                .collect(),
            roles: objs
                .roles
                .iter()
                .map(|(k, r)| (k.clone(), Arc::new(r.rules.clone().unwrap_or_default())))
                .collect(),
            ..Default::default()
        };
        for crb in objs.cluster_role_bindings.values() {
            for s in crb.subjects.iter().flatten() {
                if let Some(key) = subject_key(s, None) {
                    p.cluster_grants.entry(key).or_default().push(Grant {
                        role: crb.role_ref.clone(),
                        binding: crb.metadata.name.clone().unwrap_or_default(),
                        namespace: None,
                    });
                }
            }
        }
        for ((ns, name), rb) in &objs.role_bindings {
            for s in rb.subjects.iter().flatten() {
                if let Some(key) = subject_key(s, Some(ns)) {
                    p.namespace_grants
                        .entry(ns.clone())
                        .or_default()
                        .entry(key)
                        .or_default()
                        .push(Grant {
                            role: rb.role_ref.clone(),
                            binding: name.clone(),
                            namespace: Some(ns.clone()),
                        });
                }
            }
        }
        p
    }

    /// The rules a grant gives, or why it gives none.
    fn rules_of(&self, g: &Grant) -> Result<Arc<Vec<PolicyRule>>, String> {
        match (g.role.kind.as_str(), &g.namespace) {
            (kind, _) if kind == ClusterRole::KIND => self
                .cluster_roles
                .get(&g.role.name)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "clusterrole.rbac.authorization.k8s.io \"{}\" not found",
                        g.role.name
                    )
                }),
            (kind, Some(ns)) if kind == Role::KIND => self
                .roles
                .get(&(ns.clone(), g.role.name.clone()))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "role.rbac.authorization.k8s.io \"{}\" not found",
                        g.role.name
                    )
                }),
            (kind, _) => Err(format!("unknown role kind {kind:?}")),
        }
    }

    /// The grants that apply to `user` in `namespace` ("" = cluster scope).
    fn grants<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
    ) -> impl Iterator<Item = (SubjectKey, &'a Grant)> {
        let keys = std::iter::once(SubjectKey::User(user.username.clone()))
            .chain(user.groups.iter().map(|g| SubjectKey::Group(g.clone())))
            .collect::<Vec<_>>();
        let ns_grants = self
            .namespace_grants
            .get(namespace)
            .filter(|_| !namespace.is_empty());
        keys.into_iter().flat_map(move |k| {
            let cluster = self.cluster_grants.get(&k).into_iter().flatten();
            let ns = ns_grants.and_then(|m| m.get(&k)).into_iter().flatten();
            cluster
                .chain(ns)
                .map(|g| (k.clone(), g))
                .collect::<Vec<_>>()
        })
    }

    /// Allowed (with Kubernetes' reason: which binding of which role to
    /// which subject), or the errors met on the way (for the 403's reason;
    /// empty when the policy simply grants nothing that matches).
    pub fn authorize(&self, user: &UserInfo, a: &Attributes) -> Result<String, Vec<String>> {
        let mut errors = Vec::new();
        for (subject, g) in self.grants(user, &a.namespace) {
            match self.rules_of(g) {
                Ok(rules) => {
                    if rules.iter().any(|r| rule_allows(r, a)) {
                        let binding = match &g.namespace {
                            Some(ns) => format!("RoleBinding \"{}/{ns}\"", g.binding),
                            None => format!("ClusterRoleBinding \"{}\"", g.binding),
                        };
                        let subject = match subject {
                            SubjectKey::User(u) => format!("User \"{u}\""),
                            SubjectKey::Group(g) => format!("Group \"{g}\""),
                        };
                        return Ok(format!(
                            "RBAC: allowed by {binding} of {} \"{}\" to {subject}",
                            g.role.kind, g.role.name
                        ));
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        Err(errors)
    }

    /// Every rule `user` holds in `namespace` (cluster-wide ones included),
    /// and the errors met resolving them.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut out: Vec<PolicyRule> = Vec::new();
        let mut errors = Vec::new();
        for (_, g) in self.grants(user, namespace) {
            match self.rules_of(g) {
                Ok(rules) => {
                    for r in rules.iter() {
                        if !out.contains(r) {
                            out.push(r.clone());
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        (out, errors)
    }

    /// A ClusterRole's rules, aggregation applied.
    pub fn cluster_role_rules(&self, name: &str) -> Option<Arc<Vec<PolicyRule>>> {
        self.cluster_roles.get(name).cloned()
    }

    /// The rules of a role a binding may reference (for escalation checks).
    pub fn role_rules(
        &self,
        role: &RoleRef,
        namespace: Option<&str>,
    ) -> Result<Vec<PolicyRule>, String> {
        self.rules_of(&Grant {
            role: role.clone(),
            binding: String::new(),
            namespace: namespace.map(str::to_string),
        })
        .map(|r| r.as_ref().clone())
    }
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

/// Whether one rule allows the request (RBAC's RuleAllows).
pub fn rule_allows(r: &PolicyRule, a: &Attributes) -> bool {
    if !has(&r.verbs, &a.verb) {
        return false;
    }
    if a.resource_request {
        let groups = r.api_groups.as_deref().unwrap_or_default();
        let resources = r.resources.as_deref().unwrap_or_default();
        let combined = a.combined_resource();
        let resource_ok = resources.iter().any(|res| {
            res == "*"
                || *res == combined
                || (!a.subresource.is_empty() && *res == format!("*/{}", a.subresource))
        });
        let names = r.resource_names.as_deref().unwrap_or_default();
        has(groups, &a.api_group) && resource_ok && (names.is_empty() || names.contains(&a.name))
    } else {
        r.non_resource_urls
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|u| url_matches(u, &a.path))
    }
}

/// A non-resource URL rule: exact, `*`, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => rule == path,
    }
}

/// Whether `held` covers `want` (a rule's single atom).
fn covers(held: &[PolicyRule], want: &Attributes) -> bool {
    held.iter().any(|r| {
        // A wanted wildcard is only covered by a held wildcard; rule_allows
        // treats the wanted value literally, which gives exactly that.
        rule_allows(r, want)
    })
}

/// The parts of `wanted` that `held` does not cover, in Kubernetes' compact
/// form (`{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`). Empty when
/// granting `wanted` would not escalate.
pub fn missing_rules(held: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<String> {
    let quote = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = Vec::new();
    for rule in wanted {
        let verbs = &rule.verbs;
        if let Some(urls) = rule.non_resource_urls.as_deref().filter(|u| !u.is_empty()) {
            for url in urls {
                let missing: Vec<String> = verbs
                    .iter()
                    .filter(|v| {
                        !held.iter().any(|h| {
                            has(&h.verbs, v)
                                && h.non_resource_urls
                                    .as_deref()
                                    .unwrap_or_default()
                                    .iter()
                                    .any(|u| url_matches(u, url))
                        })
                    })
                    .cloned()
                    .collect();
                if !missing.is_empty() {
                    out.push(format!(
                        "{{NonResourceURLs:[{}], Verbs:[{}]}}",
                        quote(std::slice::from_ref(url)),
                        quote(&missing)
                    ));
                }
            }
            continue;
        }
        let names = rule.resource_names.clone().unwrap_or_default();
        let name_list: Vec<String> = if names.is_empty() {
            vec![String::new()]
        } else {
            names.clone()
        };
        for group in rule.api_groups.iter().flatten() {
            for res in rule.resources.iter().flatten() {
                let (resource, subresource) = match res.split_once('/') {
                    Some((r, s)) => (r.to_string(), s.to_string()),
                    None => (res.clone(), String::new()),
                };
                let missing: Vec<String> = verbs
                    .iter()
                    .filter(|v| {
                        !name_list.iter().all(|name| {
                            covers_atom(
                                held,
                                v,
                                group,
                                &resource,
                                &subresource,
                                name,
                                names.is_empty(),
                            )
                        })
                    })
                    .cloned()
                    .collect();
                if !missing.is_empty() {
                    let names_part = if names.is_empty() {
                        String::new()
                    } else {
                        format!(", ResourceNames:[{}]", quote(&names))
                    };
                    out.push(format!(
                        "{{APIGroups:[{}], Resources:[{}]{names_part}, Verbs:[{}]}}",
                        quote(std::slice::from_ref(group)),
                        quote(std::slice::from_ref(res)),
                        quote(&missing)
                    ));
                }
            }
        }
    }
    out
}

fn covers_atom(
    held: &[PolicyRule],
    verb: &str,
    group: &str,
    resource: &str,
    subresource: &str,
    name: &str,
    all_names: bool,
) -> bool {
    let want = Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        ..Default::default()
    };
    if all_names {
        // Every name: only a held rule without resourceNames covers it.
        held.iter()
            .filter(|h| h.resource_names.as_deref().unwrap_or_default().is_empty())
            .any(|h| rule_allows(h, &want))
    } else {
        covers(held, &want)
    }
}
