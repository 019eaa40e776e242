//! The LeaderWorkerSet controller's pure core: rollout arithmetic,
//! status and conditions, revisions and the leader
//! StatefulSet, computed from what is observed.

use crate::ns_of;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use minik8s_api::lws::{scaled_value, LeaderWorkerSet, LeaderWorkerTemplate, NetworkConfig};
use minik8s_api::lws_pod::*;
use minik8s_client::conditions;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub use minik8s_api::lws::GANG_SCHEDULING_ANNOTATION as GANG_SCHEDULING;
/// Annotations of the LWS that are controller state, not user intent, and are
/// not copied onto the StatefulSets.
pub const GROUP_RESTARTS: &str = "minik8s.io/group-restarts";

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const UPDATE_IN_PROGRESS: &str = "UpdateInProgress";

/// The rollout settings of an LWS, scaled against `spec.replicas`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rollout {
    /// R: `spec.replicas`.
    pub replicas: i32,
    /// U: maxUnavailable, rounded down.
    pub max_unavailable: i32,
    /// G: maxSurge, rounded up, capped at R.
    pub max_surge: i32,
    /// Plws: groups below it are never updated.
    pub partition: i32,
}

impl Rollout {
    pub fn of(lws: &LeaderWorkerSet) -> Rollout {
        let r = lws.spec.replicas.unwrap_or(1).max(0);
        let ru = lws
            .spec
            .rollout_strategy
            .as_ref()
            .and_then(|s| s.rolling_update_configuration.clone())
            .unwrap_or_default();
        let scaled = |v: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
                      up: bool,
                      default: i64| {
            v.and_then(|v| serde_json::to_value(v).ok())
                .and_then(|v| scaled_value(&v, r as i64, up))
                .unwrap_or(default)
                .max(0) as i32
        };
        Rollout {
            replicas: r,
            max_unavailable: scaled(ru.max_unavailable, false, 1),
            max_surge: scaled(ru.max_surge, true, 0).min(r),
            partition: ru.partition.unwrap_or(0).max(0),
        }
    }

    fn burst(&self) -> i32 {
        self.replicas + self.max_surge
    }

    /// `want(unready)`: leader StatefulSet replicas while `unready` groups are
    /// not ready and updated.
    fn want(&self, unready: i32) -> i32 {
        if unready <= self.max_surge {
            self.replicas + (unready - self.max_unavailable).max(0)
        } else {
            self.burst()
        }
    }
}

/// The leader StatefulSet as it is now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderSts {
    /// S: its spec.replicas.
    pub replicas: i32,
    /// P: its partition.
    pub partition: i32,
    /// The `leaderworkerset.sigs.k8s.io/replicas` annotation: R at the last apply.
    pub applied_replicas: Option<i32>,
}

/// One group as the rollout sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Group {
    pub ready: bool,
    pub updated: bool,
}

/// The leader StatefulSet's `(partition, replicas)`.
pub fn partition_and_replicas(
    r: &Rollout,
    sts: Option<&LeaderSts>,
    new_revision: bool,
    group: impl Fn(i32) -> Group,
) -> (i32, i32) {
    let with_floor = |(p, n): (i32, i32)| (p.max(r.partition), n);
    let Some(sts) = sts else {
        return with_floor((0, r.replicas));
    };
    let (s, p) = (sts.replicas, sts.partition);
    let unready = (0..r.replicas)
        .filter(|i| {
            let g = group(*i);
            !(g.ready && g.updated)
        })
        .count() as i32;
    if new_revision {
        let partition = r.replicas.min(s);
        if s < r.replicas {
            return with_floor((partition, r.replicas));
        }
        return with_floor((partition, r.want(r.replicas)));
    }
    if p == 0 && s == r.replicas {
        return with_floor((0, r.replicas));
    }
    if s < r.replicas {
        return with_floor((p, r.replicas));
    }
    if sts.applied_replicas != Some(r.replicas) {
        return with_floor((p.min(r.burst()), r.want(unready)));
    }
    let step = r.max_unavailable + r.max_surge - (r.burst() - s);
    let tail = (0..s)
        .rev()
        .take_while(|i| {
            let g = group(*i);
            g.ready && g.updated
        })
        .count() as i32;
    let base = (s - tail - step).max(0);
    let mut partition = base + (0..base).filter(|i| !group(*i).ready).count() as i32;
    let mut idx = partition.min(s - 1);
    while idx >= base {
        let g = group(idx);
        if !g.ready || g.updated {
            partition = idx;
        } else {
            break;
        }
        idx -= 1;
    }
    with_floor((partition.min(p), r.want(unready)))
}

/// A group as the status sees it: its index and state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupStatus {
    pub index: i32,
    pub ready: bool,
    pub updated: bool,
}

/// Which conditions the status asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assert {
    Updating,
    Available,
    Progressing,
}

/// `(readyReplicas, updatedReplicas, which conditions)`.
pub fn status_of(groups: &[GroupStatus], r: &Rollout) -> (i32, i32, Assert) {
    let count = |f: &dyn Fn(&GroupStatus) -> bool| groups.iter().filter(|g| f(g)).count() as i32;
    let ready = count(&|g| g.ready);
    let updated = count(&|g| g.updated);
    let in_window = |g: &GroupStatus| r.partition <= g.index && g.index < r.replicas;
    let current_non_burst = count(&|g| in_window(g));
    let updated_non_burst = count(&|g| in_window(g) && g.updated);
    let ready_non_burst = count(&|g| g.index < r.replicas && g.ready);
    let updated_ready_non_burst = count(&|g| in_window(g) && g.ready && g.updated);
    let assert = if updated_non_burst < current_non_burst {
        Assert::Updating
    } else if ready_non_burst == r.replicas && updated_ready_non_burst == current_non_burst {
        Assert::Available
    } else {
        Assert::Progressing
    };
    (ready, updated, assert)
}

pub(super) fn condition_text(type_: &str) -> (&'static str, &'static str) {
    match type_ {
        AVAILABLE => ("AllGroupsReady", "All replicas are ready"),
        UPDATE_IN_PROGRESS => ("GroupsUpdating", "Rolling Upgrade is in progress"),
        _ => ("GroupsProgressing", "Replicas are progressing"),
    }
}

pub(super) fn exclusive(a: &str, b: &str) -> bool {
    matches!(
        (a, b),
        (AVAILABLE, PROGRESSING)
            | (PROGRESSING, AVAILABLE)
            | (AVAILABLE, UPDATE_IN_PROGRESS)
            | (UPDATE_IN_PROGRESS, AVAILABLE)
    )
}

/// Sets the asserted conditions True (their exclusive partners False, keeping
/// their reason and message), refreshes every observedGeneration, and returns
/// the new list plus the type of the first condition that became True.
pub fn set_conditions(
    existing: &[Condition],
    assert: Assert,
    generation: i64,
    now: &Time,
) -> (Vec<Condition>, Option<&'static str>) {
    let types: &[&str] = match assert {
        Assert::Updating => &[UPDATE_IN_PROGRESS, PROGRESSING],
        Assert::Available => &[AVAILABLE],
        Assert::Progressing => &[PROGRESSING],
    };
    let mut out = existing.to_vec();
    let mut first_new = None;
    for t in types {
        let (reason, message) = condition_text(t);
        if !conditions::is_true(&out, t) {
            let asserted = conditions::condition(t, "True", reason, message, generation, now);
            conditions::set_status_condition(&mut out, asserted);
            first_new.get_or_insert(condition_type(t));
        }
        for c in out.iter_mut() {
            if exclusive(t, &c.type_) && c.status == "True" {
                c.status = "False".into();
                c.last_transition_time = now.clone();
            }
        }
    }
    for c in out.iter_mut() {
        c.observed_generation = Some(generation);
    }
    (out, first_new)
}

pub(super) fn condition_type(t: &str) -> &'static str {
    match t {
        AVAILABLE => AVAILABLE,
        UPDATE_IN_PROGRESS => UPDATE_IN_PROGRESS,
        _ => PROGRESSING,
    }
}

/// What a revision holds, `leaderWorkerTemplate` and `networkConfig`
/// (nil treated as Shared), each marked "replace".
pub fn revision_payload(lws: &LeaderWorkerSet) -> Value {
    let mut lwt = serde_json::to_value(&lws.spec.leader_worker_template).unwrap_or(json!({}));
    lwt["$patch"] = json!("replace");
    let mut nc = lws
        .spec
        .network_config
        .as_ref()
        .filter(|n| n.subdomain_policy.is_some())
        .and_then(|n| serde_json::to_value(n).ok())
        .unwrap_or(json!({"subdomainPolicy": "Shared"}));
    nc["$patch"] = json!("replace");
    json!({"spec": {"leaderWorkerTemplate": lwt, "networkConfig": nc}})
}

/// The template and network config a revision recorded.
pub fn from_revision(payload: &Value) -> Option<(LeaderWorkerTemplate, NetworkConfig)> {
    let strip = |v: Option<&Value>| {
        let mut v = v.cloned().unwrap_or(json!({}));
        if let Some(m) = v.as_object_mut() {
            m.remove("$patch");
        }
        v
    };
    let lwt = serde_json::from_value(strip(payload.pointer("/spec/leaderWorkerTemplate"))).ok()?;
    let nc = serde_json::from_value(strip(payload.pointer("/spec/networkConfig"))).ok()?;
    Some((lwt, nc))
}

pub fn size_of(lwt: &LeaderWorkerTemplate) -> i32 {
    lwt.size.unwrap_or(1).max(1)
}

pub fn unique_per_replica(nc: Option<&NetworkConfig>) -> bool {
    nc.and_then(|n| n.subdomain_policy.as_deref()) == Some("UniquePerReplica")
}

/// Labels and annotations of the LWS that the StatefulSets inherit.
pub(super) fn inherited(m: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut out = m.clone().unwrap_or_default();
    out.remove(GROUP_RESTARTS);
    out
}

/// Annotations both pod templates carry: size, placement,
/// subgroups, gang scheduling.
pub fn template_annotations(
    lws: &LeaderWorkerSet,
    lwt: &LeaderWorkerTemplate,
    leader: bool,
) -> BTreeMap<String, String> {
    let ann = lws.metadata.annotations.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    out.insert(SIZE.to_string(), size_of(lwt).to_string());
    if let Some(t) = ann.get(EXCLUSIVE_TOPOLOGY) {
        out.insert(EXCLUSIVE_TOPOLOGY.into(), t.clone());
    }
    if let Some(sg) = &lwt.sub_group_policy {
        if let Some(s) = sg.sub_group_size {
            out.insert(SUBGROUP_SIZE.into(), s.to_string());
        }
        if let Some(t) = ann.get(SUBGROUP_EXCLUSIVE_TOPOLOGY) {
            out.insert(SUBGROUP_EXCLUSIVE_TOPOLOGY.into(), t.clone());
        }
        let policy = sg.sub_group_policy_type.clone();
        if leader || policy.is_some() {
            out.insert(
                SUBGROUP_POLICY_TYPE.into(),
                policy.unwrap_or_else(|| "LeaderWorker".into()),
            );
        }
    }
    if lws.spec.is_hash() {
        out.insert(GROUP_IDENTITY.into(), minik8s_api::lws::HASH.into());
    }
    let group_claims: Vec<&str> = lwt
        .resource_claim_templates
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    if !group_claims.is_empty() {
        out.insert(GROUP_RESOURCE_CLAIMS.into(), group_claims.join(","));
    }
    let scope = minik8s_api::lws_scheduling::scope(lws.spec.scheduling.as_ref());
    if scope != minik8s_api::lws_scheduling::GangScope::Off {
        // spec.scheduling: admission names each pod's gang by this scope.
        out.insert(
            minik8s_api::lws_scheduling::GANG_SCOPE.into(),
            scope.as_str().into(),
        );
    } else if ann.get(GANG_SCHEDULING).map(String::as_str) == Some("true") {
        // Under LeaderReady the workers only exist once the leader runs, so the
        // gang is the leader alone (upstream's Volcano provider does the same).
        let min = match lws.spec.startup_policy.as_deref() {
            Some("LeaderReady") => 1,
            _ => size_of(lwt),
        };
        out.insert(GANG_MIN_MEMBER.into(), min.to_string());
    }
    out
}

/// What both kinds of leader set (Ordinal's StatefulSet, Hash's Deployment)
/// carry: their own labels and annotations, and the leader pod template at
/// revision `key` with the group annotations admission reads.
pub(super) struct Leaders {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub template: k8s_openapi::api::core::v1::PodTemplateSpec,
}

pub(super) fn leaders(lws: &LeaderWorkerSet, key: &str) -> Leaders {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let lwt = &lws.spec.leader_worker_template;
    let mut labels = inherited(&lws.metadata.labels);
    labels.insert(NAME.into(), name.clone());
    labels.insert(REVISION_KEY.into(), key.into());
    labels.insert(ROLE.into(), "leader".into());
    let mut annotations = inherited(&lws.metadata.annotations);
    annotations.insert(REPLICAS.into(), Rollout::of(lws).replicas.to_string());
    let mut template = lwt
        .leader_template
        .clone()
        .unwrap_or_else(|| lwt.worker_template.clone());
    let mut tmeta = template.metadata.take().unwrap_or_default();
    let mut tlabels = tmeta.labels.take().unwrap_or_default();
    tlabels.insert(WORKER_INDEX.into(), "0".into());
    tlabels.insert(NAME.into(), name);
    tlabels.insert(REVISION_KEY.into(), key.into());
    let mut tann = tmeta.annotations.take().unwrap_or_default();
    tann.extend(template_annotations(lws, lwt, true));
    if unique_per_replica(lws.spec.network_config.as_ref()) {
        tann.insert(SUBDOMAIN_POLICY.into(), "UniquePerReplica".into());
    }
    tmeta.labels = Some(tlabels);
    tmeta.annotations = Some(tann);
    template.metadata = Some(tmeta);
    Leaders {
        labels,
        annotations,
        template,
    }
}

/// The leader StatefulSet.
pub fn leader_statefulset(
    lws: &LeaderWorkerSet,
    key: &str,
    partition: i32,
    replicas: i32,
) -> Value {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let lwt = &lws.spec.leader_worker_template;
    let r = Rollout::of(lws);
    let Leaders {
        labels,
        annotations,
        template,
    } = leaders(lws, key);
    let mut sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns_of(&lws.metadata), "labels": labels, "annotations": annotations,
            "ownerReferences": [owner_ref(lws)]},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {NAME: name, WORKER_INDEX: "0"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition,
                "maxUnavailable": (r.max_unavailable + r.max_surge).max(1)}},
            "template": template}});
    add_claim_templates(&mut sts, lwt);
    add_group_resource_claims(&mut sts, lwt, &name, "group");
    sts
}

/// The group claims (lws#444) as entries of the StatefulSet's pod template,
/// for group `group` (the leader set's stand-in is rewritten for each leader
/// at admission, see [`GROUP_RESOURCE_CLAIMS`]).
pub fn add_group_resource_claims(
    sts: &mut Value,
    lwt: &LeaderWorkerTemplate,
    lws: &str,
    group: &str,
) {
    let claims = lwt.resource_claim_templates.iter().flatten();
    let entries: Vec<Value> = claims
        .map(
            |c| json!({"name": c.name, "resourceClaimName": group_claim_name(lws, group, &c.name)}),
        )
        .collect();
    if entries.is_empty() {
        return;
    }
    let spec = &mut sts["spec"]["template"]["spec"];
    if !spec["resourceClaims"].is_array() {
        spec["resourceClaims"] = json!([]);
    }
    if let Some(list) = spec["resourceClaims"].as_array_mut() {
        list.extend(entries);
    }
}

/// KEP-622: both StatefulSets get the template's claims, reduced to the
/// parts upstream keeps (name, accessModes, storageClassName, volumeMode,
/// resources requests and limits), and its retention policy when set.
pub fn add_claim_templates(sts: &mut Value, lwt: &minik8s_api::lws::LeaderWorkerTemplate) {
    if let Some(templates) = lwt
        .volume_claim_templates
        .as_ref()
        .filter(|t| !t.is_empty())
    {
        let reduced: Vec<Value> = templates
            .iter()
            .map(|t| {
                let mut spec = json!({});
                for k in ["accessModes", "storageClassName", "volumeMode"] {
                    if let Some(v) = t.pointer(&format!("/spec/{k}")) {
                        spec[k] = v.clone();
                    }
                }
                for k in ["requests", "limits"] {
                    if let Some(v) = t.pointer(&format!("/spec/resources/{k}")) {
                        spec["resources"][k] = v.clone();
                    }
                }
                json!({"metadata": {"name": t.pointer("/metadata/name")}, "spec": spec})
            })
            .collect();
        sts["spec"]["volumeClaimTemplates"] = json!(reduced);
    }
    if let Some(policy) = &lwt.persistent_volume_claim_retention_policy {
        sts["spec"]["persistentVolumeClaimRetentionPolicy"] = policy.clone();
    }
}

pub fn owner_ref(lws: &LeaderWorkerSet) -> Value {
    crate::ownership::controller_ref(
        minik8s_api::lws::API_VERSION,
        "LeaderWorkerSet",
        &lws.metadata,
    )
}

/// The event note for surge groups being removed, if any.
pub fn surge_note(name: &str, from: i32, to: i32, r: i32) -> Option<String> {
    let first = r.max(to);
    (from > first).then(|| {
        if from - 1 == first {
            format!("deleting surge replica {name}-{first}")
        } else {
            format!(
                "deleting surge replicas from {name}-{first} to {name}-{}",
                from - 1
            )
        }
    })
}

/// The event note for a partition moving down from `old` to `new`.
pub fn updating_note(old: i32, new: i32) -> Option<String> {
    (new < old).then(|| {
        if old - 1 == new {
            format!("Updating replica {new}")
        } else {
            format!("Updating replicas {new} to {} (inclusive)", old - 1)
        }
    })
}
