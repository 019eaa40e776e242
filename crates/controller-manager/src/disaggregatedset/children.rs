//! What a DisaggregatedSet's children look like (as upstream's
//! controller makes them), as pure functions of the set and what exists: the LWS of a
//! (slice, revision, role) with its labels and placement affinity, the
//! role's headless `-prv` Service, the External role's scaler, each role's
//! target, and the status with its conditions.

use super::Child;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use minik8s_api::disaggregatedset::*;
use minik8s_client::conditions;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `<ds>-<slice>-<revision>-<role>`.
pub fn lws_name(ds: &str, slice: i32, revision: &str, role: &str) -> String {
    format!("{ds}-{slice}-{revision}-{role}")
}

/// `<ds>-<slice>-<revision>-<role>-prv`.
pub fn service_name(ds: &str, slice: i32, revision: &str, role: &str) -> String {
    format!("{}-prv", lws_name(ds, slice, revision, role))
}

fn name_of(ds: &DisaggregatedSet) -> String {
    ds.metadata.name.clone().unwrap_or_default()
}

/// The owner reference every child carries (upstream sets no blockOwnerDeletion
/// on LWS and Services).
pub fn owner(ds: &DisaggregatedSet, block: bool) -> Value {
    let mut o = json!({"apiVersion": API_VERSION, "kind": KIND, "name": ds.metadata.name,
        "uid": ds.metadata.uid, "controller": true});
    if block {
        o["blockOwnerDeletion"] = json!(true);
    }
    o
}

/// The five labels the system puts on an LWS and its pods.
pub fn system_labels(ds: &str, slice: i32, role: &str, revision: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("app".into(), json!(format!("{ds}-{slice}-{role}")));
    m.insert(NAME_LABEL.into(), json!(ds));
    m.insert(ROLE_LABEL.into(), json!(role));
    m.insert(SLICE_LABEL.into(), json!(slice.to_string()));
    m.insert(REVISION_LABEL.into(), json!(revision));
    m
}

fn overlay_labels(meta: &mut Value, labels: &Map<String, Value>) {
    if !meta.is_object() {
        *meta = json!({});
    }
    if !meta["labels"].is_object() {
        meta["labels"] = json!({});
    }
    for (k, v) in labels {
        meta["labels"][k] = v.clone();
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn term(exprs: Vec<Value>, topology: &str) -> Value {
    json!({"labelSelector": {"matchExpressions": exprs}, "topologyKey": topology})
}

/// The slice's pods share one domain of `topology`, which no other
/// slice of this set uses (nor, for ExclusiveTopology, any other set's slice).
pub fn add_placement(template: &mut Value, ds: &str, slice: i32, policy: &PlacementPolicy) {
    let kind = policy.type_.as_deref().unwrap_or("None");
    let topology = policy.topology.as_deref().unwrap_or("");
    if kind == "None" || topology.is_empty() {
        return;
    }
    let s = slice.to_string();
    let mut anti = vec![expr(NAME_LABEL, "In", &[ds])];
    if slice == 0 {
        anti.push(expr(SLICE_LABEL, "Exists", &[]));
    }
    anti.push(expr(SLICE_LABEL, "NotIn", &[&s]));
    let mut anti_terms = vec![term(anti, topology)];
    if kind == "ExclusiveTopology" {
        anti_terms.push(term(
            vec![
                expr(NAME_LABEL, "Exists", &[]),
                expr(NAME_LABEL, "NotIn", &[ds]),
                expr(SLICE_LABEL, "Exists", &[]),
            ],
            topology,
        ));
    }
    let affinity = term(
        vec![
            expr(NAME_LABEL, "In", &[ds]),
            expr(SLICE_LABEL, "In", &[&s]),
        ],
        topology,
    );
    let spec = &mut template["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    let push = |slot: &mut Value, terms: Vec<Value>| {
        let list = &mut slot["requiredDuringSchedulingIgnoredDuringExecution"];
        if !list.is_array() {
            *list = json!([]);
        }
        list.as_array_mut().expect("array").extend(terms);
    };
    push(&mut spec["affinity"]["podAffinity"], vec![affinity]);
    push(&mut spec["affinity"]["podAntiAffinity"], anti_terms);
}

/// The LWS of `role` in `slice` at `revision` with `replicas` groups.
pub fn child_lws(
    ds: &DisaggregatedSet,
    role: &DisaggregatedRoleSpec,
    slice: i32,
    revision: &str,
    replicas: i64,
) -> Value {
    let d = name_of(ds);
    let system = system_labels(&d, slice, &role.name, revision);
    let meta = role.metadata.clone().unwrap_or_default();
    let mut spec = role
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(json!({}));
    spec["replicas"] = json!(replicas);
    let policy = ds.spec.placement_policy.clone().unwrap_or_default();
    for t in ["workerTemplate", "leaderTemplate"] {
        let tmpl = &mut spec["leaderWorkerTemplate"][t];
        if tmpl.is_null() {
            if t == "leaderTemplate" {
                if let Some(m) = spec["leaderWorkerTemplate"].as_object_mut() {
                    m.remove(t);
                }
                continue;
            }
            *tmpl = json!({});
        }
        overlay_labels(&mut tmpl["metadata"], &system);
        add_placement(tmpl, &d, slice, &policy);
    }
    let mut metadata = json!({"name": lws_name(&d, slice, revision, &role.name),
        "namespace": ds.metadata.namespace, "ownerReferences": [owner(ds, false)]});
    if let Some(l) = meta.labels.filter(|l| !l.is_empty()) {
        metadata["labels"] = json!(l);
    }
    overlay_labels(&mut metadata, &system);
    if let Some(a) = meta.annotations.filter(|a| !a.is_empty()) {
        metadata["annotations"] = json!(a);
    }
    json!({"apiVersion": minik8s_api::lws::API_VERSION, "kind": minik8s_api::lws::KIND,
        "metadata": metadata, "spec": spec})
}

/// The headless, portless Service of one (slice, revision, role).
pub fn child_service(ds: &DisaggregatedSet, slice: i32, revision: &str, role: &str) -> Value {
    let d = name_of(ds);
    let selector = json!({NAME_LABEL: d, ROLE_LABEL: role, REVISION_LABEL: revision,
        SLICE_LABEL: slice.to_string()});
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(&d, slice, revision, role), "namespace": ds.metadata.namespace,
            "labels": selector, "ownerReferences": [owner(ds, false)]},
        "spec": {"clusterIP": "None", "selector": selector}})
}

/// The scaler of an External role, seeded with `replicas`.
pub fn child_scaler(ds: &DisaggregatedSet, role: &str, replicas: i64) -> Value {
    let d = name_of(ds);
    json!({"apiVersion": API_VERSION, "kind": SCALER_KIND,
        "metadata": {"name": scaler_name(&d, role), "namespace": ds.metadata.namespace,
            "labels": {NAME_LABEL: d, ROLE_LABEL: role}, "ownerReferences": [owner(ds, true)]},
        "spec": {"replicas": replicas}})
}

/// What a role's new LWS should have per slice. External roles follow
/// their scaler (`scaler`), else keep what the new LWS has (`current_new`).
pub fn target(role: &DisaggregatedRoleSpec, scaler: Option<i64>, current_new: i64) -> i64 {
    if role.is_external() {
        scaler.unwrap_or(current_new)
    } else {
        role.spec
            .as_ref()
            .and_then(|s| s.replicas)
            .map_or(1, i64::from)
    }
}

/// A new scaler's first value: 1 for a role without LWS, else what its LWS
/// have (a Static → External switch does not resize).
pub fn scaler_seed(children: &[Child], role: &str) -> i64 {
    let mine: Vec<&Child> = children.iter().filter(|c| c.role == role).collect();
    if mine.is_empty() {
        1
    } else {
        mine.iter().map(|c| c.replicas).sum()
    }
}

/// Per spec role, sums over every slice and revision.
pub fn role_statuses(ds: &DisaggregatedSet, children: &[Child], revision: &str) -> Vec<RoleStatus> {
    ds.spec
        .roles
        .iter()
        .map(|r| {
            let mine = children.iter().filter(|c| c.role == r.name);
            let mut s = RoleStatus {
                name: r.name.clone(),
                ..Default::default()
            };
            for c in mine {
                s.replicas += c.status_replicas as i32;
                s.ready_replicas += c.ready as i32;
                if c.revision == revision {
                    s.updated_replicas += c.updated as i32;
                }
            }
            s
        })
        .collect()
}

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";

/// Whether every role has its target × slices groups, all ready and updated.
pub fn available(
    ds: &DisaggregatedSet,
    statuses: &[RoleStatus],
    targets: &BTreeMap<String, i64>,
    scalers: &BTreeMap<String, i64>,
) -> bool {
    let slices = i64::from(ds.slices());
    ds.spec.roles.iter().all(|r| {
        if r.is_external() && !scalers.contains_key(&r.name) {
            return false;
        }
        let want = targets.get(&r.name).copied().unwrap_or(0) * slices;
        statuses.iter().find(|s| s.name == r.name).is_some_and(|s| {
            i64::from(s.replicas) == want
                && i64::from(s.ready_replicas) == want
                && i64::from(s.updated_replicas) == want
        })
    })
}

/// Available and Progressing exclude each other; the one asserted is
/// True, its partner (if present) False with the asserted one's reason and
/// message. lastTransitionTime moves only when a status flips.
pub fn set_conditions(
    existing: &[Condition],
    is_available: bool,
    generation: i64,
    now: &Time,
) -> Vec<Condition> {
    let (t, partner, reason, message) = if is_available {
        (AVAILABLE, PROGRESSING, "AllRolesReady", "All roles have reached their desired replica count, ready and updated to the current revision")
    } else {
        (PROGRESSING, AVAILABLE, "RolloutInProgress", "Not all roles have reached their desired replica count, ready and updated to the current revision")
    };
    let mut out = existing.to_vec();
    let made = |type_: &str, status: &str| {
        conditions::condition(type_, status, reason, message, generation, now)
    };
    conditions::set_status_condition(&mut out, made(t, "True"));
    if out.iter().any(|c| c.type_ == partner) {
        conditions::set_status_condition(&mut out, made(partner, "False"));
    }
    out
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
