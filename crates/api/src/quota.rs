//! ResourceQuota accounting as Kubernetes' quota evaluators do it: what one
//! object uses of each quota resource (`pods`, `requests.cpu`,
//! `count/deployments.apps`, `services.nodeports`, `requests.storage`…),
//! which quotas an object falls under (scopes, scope selectors), and the
//! admission check that refuses what would exceed a quota. Pure functions
//! over the JSON objects, shared by the apiserver's admission (which charges
//! `status.used`) and the controller manager's quota controller (which
//! recounts it).

use crate::amount::Amount;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Resource name → amount, as a quota's `hard` and `used`.
pub type Usage = BTreeMap<String, Amount>;

/// The quota resources Kubernetes names without a prefix.
pub const STANDARD_RESOURCES: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// Quota resources counted in whole objects (refused with a fraction).
pub const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// The scopes a quota may name (`spec.scopes`, `scopeSelector`).
pub const SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

/// Pod resources a compute quota makes every container state (a mistake
/// Kubernetes keeps for compatibility, and so do we).
const REQUIRED_OF_CONTAINERS: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// Whether `name` (no `/`) is a quota resource Kubernetes knows.
pub fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
}

/// Whether a quota may apply `scope` to `resource`: scoped quotas count
/// pods and their compute resources only, BestEffort pods only.
pub fn scope_valid_for(scope: &str, resource: &str) -> bool {
    let compute = [
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => resource == "pods" || compute.contains(&resource),
        "BestEffort" => resource == "pods",
        _ => true,
    }
}

/// The object-count name of a resource: `count/pods`, `count/deployments.apps`.
pub fn count_name(plural: &str, group: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The legacy name that counts objects of a core resource (`secrets`).
fn legacy_count_name(plural: &str, group: &str) -> Option<&'static str> {
    if !group.is_empty() {
        return None;
    }
    [
        "configmaps",
        "resourcequotas",
        "replicationcontrollers",
        "secrets",
    ]
    .into_iter()
    .find(|n| *n == plural)
}

fn parse_list(list: Option<&Value>) -> Usage {
    list.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), Amount::parse(v.as_str()?)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A quota's `status.hard` or `status.used` (or `spec.hard`) as amounts.
pub fn resource_list(v: Option<&Value>) -> Usage {
    parse_list(v)
}

/// Adds `b` into `a`.
pub fn add(a: &mut Usage, b: &Usage) {
    for (k, v) in b {
        let sum = a.get(k).copied().unwrap_or_default().plus(*v);
        a.insert(k.clone(), sum);
    }
}

/// The resources of `u` named in `names`.
pub fn mask(u: &Usage, names: &BTreeSet<String>) -> Usage {
    u.iter()
        .filter(|(k, _)| names.contains(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// `cpu=100m,pods=1`: a usage as Kubernetes' messages print it.
pub fn pretty(u: &Usage) -> String {
    u.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The resources a pod's requests and limits count for.
fn compute_usage(requests: &Usage, limits: &Usage) -> Usage {
    let mut u = Usage::new();
    u.insert("pods".into(), Amount::count(1));
    for (r, plain) in [("cpu", true), ("memory", true), ("ephemeral-storage", true)] {
        if let Some(q) = requests.get(r) {
            if plain {
                u.insert(r.into(), *q);
            }
            u.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            u.insert(format!("limits.{r}"), *q);
        }
    }
    for (r, q) in requests {
        if r.starts_with("hugepages-") {
            u.insert(r.clone(), *q);
            u.insert(format!("requests.{r}"), *q);
        } else if is_extended(r) {
            u.insert(format!("requests.{r}"), *q);
        }
    }
    u
}

/// Extended resources (`nvidia.com/gpu`): a domain outside kubernetes.io.
fn is_extended(r: &str) -> bool {
    r.contains('/') && !r.starts_with("kubernetes.io/") && !r.starts_with("requests.")
}

/// A pod's effective requests or limits (`which` = "requests" / "limits"):
/// app containers and sidecars added, each regular init container alone
/// beside the sidecars before it, the larger of the two; pod-level
/// resources when set; overhead on top.
pub fn pod_resources(pod: &Value, which: &str) -> Usage {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut total = containers_resources(pod, which);
    let pod_level = parse_list(spec.pointer(&format!("/resources/{which}")));
    for (k, v) in pod_level {
        if ["cpu", "memory"].contains(&k.as_str()) {
            total.insert(k, v);
        }
    }
    // Overhead: on every request; on a limit only where one is set.
    for (k, v) in parse_list(spec.get("overhead")) {
        if which == "requests" || total.contains_key(&k) {
            let sum = total.get(&k).copied().unwrap_or_default().plus(v);
            total.insert(k, sum);
        }
    }
    total
}

/// The containers' requests or limits added up as the pod needs them (app
/// containers and sidecars together, a regular init container alone beside
/// the sidecars before it), without pod-level resources or overhead: what
/// the LimitRanger's `Pod` limits are checked against.
pub fn containers_resources(pod: &Value, which: &str) -> Usage {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let list = |c: &Value| parse_list(c.pointer(&format!("/resources/{which}")));
    let mut total = Usage::new();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(&mut total, &list(c));
    }
    let mut sidecars = Usage::new();
    let mut largest_init = Usage::new();
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let own = list(c);
        let alone = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with = own.clone();
            add(&mut with, &sidecars);
            with
        };
        for (k, v) in alone {
            if largest_init.get(&k).is_none_or(|x| v > *x) {
                largest_init.insert(k, v);
            }
        }
    }
    for (k, v) in largest_init {
        if total.get(&k).is_none_or(|x| v > *x) {
            total.insert(k, v);
        }
    }
    total
}

/// Whether a pod still counts for compute quota at `now` (RFC 3339): not
/// Succeeded or Failed, and not deleting past its grace period.
pub fn pod_counts(pod: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (deleting, grace) {
        (Some(at), Some(g)) => now <= at + chrono::Duration::seconds(g),
        _ => true,
    }
}

/// What a pod uses: `count/pods` always; while it counts, `pods` and its
/// compute resources.
pub fn pod_usage(pod: &Value, now: chrono::DateTime<chrono::Utc>) -> Usage {
    let mut u = Usage::new();
    u.insert("count/pods".into(), Amount::count(1));
    if pod_counts(pod, now) {
        let requests = pod_resources(pod, "requests");
        let limits = pod_resources(pod, "limits");
        add(&mut u, &compute_usage(&requests, &limits));
    }
    u
}

/// What a Service uses: itself, its node ports (NodePort and LoadBalancer),
/// a load balancer.
pub fn service_usage(svc: &Value) -> Usage {
    let mut u = Usage::new();
    u.insert("count/services".into(), Amount::count(1));
    u.insert("services".into(), Amount::count(1));
    u.insert("services.loadbalancers".into(), Amount::default());
    u.insert("services.nodeports".into(), Amount::default());
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    match svc.pointer("/spec/type").and_then(Value::as_str) {
        Some("NodePort") => {
            u.insert(
                "services.nodeports".into(),
                Amount::count(ports.len() as i64),
            );
        }
        Some("LoadBalancer") => {
            let allocate = svc
                .pointer("/spec/allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool)
                != Some(false);
            let n = if allocate {
                ports.len()
            } else {
                ports
                    .iter()
                    .filter(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0)
                    .count()
            };
            u.insert("services.nodeports".into(), Amount::count(n as i64));
            u.insert("services.loadbalancers".into(), Amount::count(1));
        }
        _ => {}
    }
    u
}

const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// What a claim uses: itself and its storage (the larger of the request and
/// what was allocated), also counted per StorageClass.
pub fn claim_usage(pvc: &Value) -> Usage {
    let mut u = Usage::new();
    u.insert("count/persistentvolumeclaims".into(), Amount::count(1));
    u.insert("persistentvolumeclaims".into(), Amount::count(1));
    let class = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    if let Some(c) = class {
        u.insert(
            format!("{c}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            Amount::count(1),
        );
    }
    let requested = parse_list(pvc.pointer("/spec/resources/requests"))
        .get("storage")
        .copied();
    let allocated = parse_list(pvc.pointer("/status/allocatedResources"))
        .get("storage")
        .copied();
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) => Some(r.max(a)),
        (r, a) => r.or(a),
    };
    if let Some(s) = storage {
        u.insert("requests.storage".into(), s);
        if let Some(c) = class {
            u.insert(format!("{c}{STORAGE_CLASS_SUFFIX}requests.storage"), s);
        }
    }
    u
}

/// What one object of `plural.group` uses.
pub fn usage(plural: &str, group: &str, obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Usage {
    match (group, plural) {
        ("", "pods") => pod_usage(obj, now),
        ("", "services") => service_usage(obj),
        ("", "persistentvolumeclaims") => claim_usage(obj),
        _ => {
            let mut u = Usage::new();
            u.insert(count_name(plural, group), Amount::count(1));
            if let Some(legacy) = legacy_count_name(plural, group) {
                u.insert(legacy.into(), Amount::count(1));
            }
            u
        }
    }
}

/// The quota resources among `hard` that objects of `plural.group` are
/// counted for.
pub fn matching_resources<'a>(
    plural: &str,
    group: &str,
    hard: impl IntoIterator<Item = &'a String>,
) -> BTreeSet<String> {
    let count = count_name(plural, group);
    let legacy = legacy_count_name(plural, group);
    hard.into_iter()
        .filter(|r| {
            let r = r.as_str();
            r == count
                || Some(r) == legacy
                || match (group, plural) {
                    ("", "pods") => {
                        POD_RESOURCES.contains(&r)
                            || r.starts_with("hugepages-")
                            || r.starts_with("requests.hugepages-")
                            || (r.starts_with("requests.") && is_extended(&r["requests.".len()..]))
                    }
                    ("", "services") => {
                        ["services", "services.nodeports", "services.loadbalancers"].contains(&r)
                    }
                    ("", "persistentvolumeclaims") => {
                        ["persistentvolumeclaims", "requests.storage"].contains(&r)
                            || r.split_once(STORAGE_CLASS_SUFFIX).is_some_and(|(_, res)| {
                                ["persistentvolumeclaims", "requests.storage"].contains(&res)
                            })
                    }
                    _ => false,
                }
        })
        .cloned()
        .collect()
}

/// One scope requirement of a quota: `spec.scopes` entries are `Exists`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// A quota's scopes and scope selector, as requirements.
pub fn scope_requirements(quota: &Value) -> Vec<ScopeRequirement> {
    let mut out: Vec<ScopeRequirement> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| ScopeRequirement {
            scope: s.into(),
            operator: "Exists".into(),
            values: vec![],
        })
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(ScopeRequirement {
            scope: e
                .get("scopeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            operator: e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            values: e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
        });
    }
    out
}

fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|d| d >= 0)
}

fn cross_namespace_affinity(pod: &Value) -> bool {
    let cross = |t: &Value| {
        let t = t.get("podAffinityTerm").unwrap_or(t);
        t.get("namespaces")
            .and_then(Value::as_array)
            .is_some_and(|n| !n.is_empty())
            || t.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|a| {
        [
            "requiredDuringSchedulingIgnoredDuringExecution",
            "preferredDuringSchedulingIgnoredDuringExecution",
        ]
        .iter()
        .any(|l| {
            pod.pointer(&format!("/spec/affinity/{a}/{l}"))
                .and_then(Value::as_array)
                .is_some_and(|terms| terms.iter().any(cross))
        })
    })
}

/// Whether a pod falls in a scope requirement.
pub fn pod_in_scope(req: &ScopeRequirement, pod: &Value) -> bool {
    match req.scope.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => {
            crate::resources::qos_class(pod.get("spec").unwrap_or(&Value::Null)) == "BestEffort"
        }
        "NotBestEffort" => {
            crate::resources::qos_class(pod.get("spec").unwrap_or(&Value::Null)) != "BestEffort"
        }
        "PriorityClass" => {
            let class = pod
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty());
            match req.operator.as_str() {
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                "In" => class.is_some_and(|c| req.values.iter().any(|v| v == c)),
                "NotIn" => class.is_none_or(|c| !req.values.iter().any(|v| v == c)),
                _ => false,
            }
        }
        "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
        _ => false,
    }
}

/// Whether `quota` counts `obj` (of `plural.group`): it limits something
/// the object uses, and the object is in every one of its scopes (only pods
/// have scopes).
pub fn quota_matches(quota: &Value, plural: &str, group: &str, obj: &Value) -> bool {
    let hard = resource_list(quota.pointer("/status/hard"));
    if matching_resources(plural, group, hard.keys()).is_empty() {
        return false;
    }
    let is_pod = group.is_empty() && plural == "pods";
    scope_requirements(quota)
        .iter()
        .all(|r| is_pod && pod_in_scope(r, obj))
}

/// The "must specify" check: with a compute quota, every container states
/// the request or limit the quota counts (unless pod-level resources are set).
pub fn pod_constraints(required: &BTreeSet<String>, pod: &Value) -> Result<(), String> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let pod_level = spec.get("resources").is_some_and(|r| {
        ["requests", "limits"].iter().any(|k| {
            r.get(*k)
                .is_some_and(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        })
    });
    if pod_level {
        return Ok(());
    }
    let required: Vec<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| REQUIRED_OF_CONTAINERS.contains(r))
        .collect();
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in app_and_init_containers(spec) {
        let has = compute_usage(
            &parse_list(c.pointer("/resources/requests")),
            &parse_list(c.pointer("/resources/limits")),
        );
        for r in &required {
            if !has.contains_key(*r) {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                missing.entry(r).or_default().insert(name.to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// A pod spec's app containers, then its init containers.
pub fn app_and_init_containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .flat_map(move |l| spec.get(l).and_then(Value::as_array).into_iter().flatten())
}

/// The request being admitted: the object (and the stored one on update).
pub struct Request<'a> {
    pub plural: &'a str,
    pub group: &'a str,
    pub obj: &'a Value,
    pub old: Option<&'a Value>,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// Kubernetes' `CheckRequest`: for every quota (with its `status`) that
/// counts the object, the quotas' new `used` if the request goes through,
/// as (index into `quotas`, used); `Err` is the 403's message. Nothing to
/// charge gives an empty list.
pub fn check(quotas: &[Value], req: &Request) -> Result<Vec<(usize, Usage)>, String> {
    let mut interesting = Vec::new();
    for (i, q) in quotas.iter().enumerate() {
        if !quota_matches(q, req.plural, req.group, req.obj) {
            continue;
        }
        let name = crate::meta::name(q);
        let hard = resource_list(q.pointer("/status/hard"));
        let restricted = matching_resources(req.plural, req.group, hard.keys());
        if req.group.is_empty() && req.plural == "pods" {
            pod_constraints(&restricted, req.obj)
                .map_err(|e| format!("failed quota: {name}: {e}"))?;
        }
        let used = resource_list(q.pointer("/status/used"));
        if restricted.iter().any(|r| !used.contains_key(r)) {
            return Err(format!(
                "status unknown for quota: {name}, resources: {}",
                restricted.iter().cloned().collect::<Vec<_>>().join(",")
            ));
        }
        interesting.push(i);
    }
    if interesting.is_empty() {
        return Ok(vec![]);
    }
    let input = usage(req.plural, req.group, req.obj, req.now);
    let negative: Vec<&str> = input
        .iter()
        .filter(|(_, v)| v.is_negative())
        .map(|(k, _)| k.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            negative.join(",")
        ));
    }
    let mut out = Vec::new();
    for i in interesting {
        let q = &quotas[i];
        let mut delta = input.clone();
        if let Some(old) = req.old {
            if quota_matches(q, req.plural, req.group, old) {
                let before = usage(req.plural, req.group, old, req.now);
                for (k, v) in delta.iter_mut() {
                    let prev = before.get(k).copied().unwrap_or_default();
                    *v = if *v > prev {
                        v.minus(prev)
                    } else {
                        Amount::default()
                    };
                }
            }
        }
        delta.retain(|_, v| !v.is_zero());
        let hard = resource_list(q.pointer("/status/hard"));
        let names: BTreeSet<String> = hard.keys().cloned().collect();
        let requested = mask(&delta, &names);
        if requested.is_empty() {
            continue;
        }
        let mut used = resource_list(q.pointer("/status/used"));
        let exceeded: BTreeSet<String> = requested
            .iter()
            .filter(|(k, v)| used.get(*k).copied().unwrap_or_default().plus(**v) > hard[*k])
            .map(|(k, _)| k.clone())
            .collect();
        if !exceeded.is_empty() {
            return Err(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                crate::meta::name(q),
                pretty(&mask(&requested, &exceeded)),
                pretty(&mask(&used, &exceeded)),
                pretty(&mask(&hard, &exceeded)),
            ));
        }
        add(&mut used, &requested);
        out.push((i, used));
    }
    Ok(out)
}

/// What a request charged `quota` (for handing it back when the write
/// fails): the usage of the object masked to the quota's resources.
pub fn charged(quota: &Value, req: &Request) -> Usage {
    let hard = resource_list(quota.pointer("/status/hard"));
    let names: BTreeSet<String> = hard.keys().cloned().collect();
    let mut u = mask(&usage(req.plural, req.group, req.obj, req.now), &names);
    if let Some(old) = req.old {
        let before = usage(req.plural, req.group, old, req.now);
        for (k, v) in u.iter_mut() {
            let prev = before.get(k).copied().unwrap_or_default();
            *v = if *v > prev {
                v.minus(prev)
            } else {
                Amount::default()
            };
        }
    }
    u
}

/// A quota's usage recounted from the namespace's objects: for every hard
/// resource some kind is counted for, the sum over the objects in the
/// quota's scopes. `objects` gives, per (plural, group), the namespace's
/// objects of that kind (None: not countable here, keep the last value).
pub fn recount(
    quota: &Value,
    objects: &dyn Fn(&str, &str) -> Option<Vec<Value>>,
    now: chrono::DateTime<chrono::Utc>,
) -> (Usage, Usage) {
    let hard = resource_list(quota.pointer("/spec/hard"));
    let previous = resource_list(quota.pointer("/status/used"));
    let names: BTreeSet<String> = hard.keys().cloned().collect();
    let scopes = scope_requirements(quota);
    let mut used = Usage::new();
    for (plural, group) in kinds_counted(&names) {
        let matched = matching_resources(&plural, &group, &names);
        let Some(objs) = objects(&plural, &group) else {
            for r in &matched {
                if let Some(v) = previous.get(r) {
                    used.insert(r.clone(), *v);
                }
            }
            continue;
        };
        let mut sum: Usage = matched
            .iter()
            .map(|r| (r.clone(), Amount::default()))
            .collect();
        let is_pod = group.is_empty() && plural == "pods";
        for o in objs {
            if !scopes.iter().all(|s| is_pod && pod_in_scope(s, &o)) {
                continue;
            }
            add(&mut sum, &mask(&usage(&plural, &group, &o, now), &matched));
        }
        for (k, v) in sum {
            used.insert(k, v);
        }
    }
    (hard, used)
}

/// The kinds (plural, group) whose objects a quota with these resources counts.
pub fn kinds_counted(names: &BTreeSet<String>) -> BTreeSet<(String, String)> {
    let mut kinds = BTreeSet::new();
    for r in names {
        let kind = if let Some(rest) = r.strip_prefix("count/") {
            match rest.split_once('.') {
                Some((p, g)) => (p.to_string(), g.to_string()),
                None => (rest.to_string(), String::new()),
            }
        } else if let Some(p) = [
            "configmaps",
            "resourcequotas",
            "replicationcontrollers",
            "secrets",
        ]
        .iter()
        .find(|p| **p == r)
        {
            (p.to_string(), String::new())
        } else if r.starts_with("services") {
            ("services".into(), String::new())
        } else if r == "persistentvolumeclaims"
            || r == "requests.storage"
            || r.contains(STORAGE_CLASS_SUFFIX)
        {
            ("persistentvolumeclaims".into(), String::new())
        } else {
            ("pods".into(), String::new())
        };
        kinds.insert(kind);
    }
    kinds
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
