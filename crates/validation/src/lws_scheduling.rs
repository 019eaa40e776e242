//! KEP-666 phase 1 on a LeaderWorkerSet's `spec.scheduling` (which gang
//! each pod joins is `minik8s_api::lws_scheduling`): one level set, each
//! level's policy, disruption mode and topology well-formed, a gang's
//! minCount the number of its pods, and what a gang cannot be combined with.

use crate::{Errors, FieldError};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::lws_scheduling::{has_any, scope, GangScope, LEVEL_FIELDS};
use serde_json::{json, Value};

/// KEP-666 phase 1 on an LWS (`old` on update). `spec.scheduling` itself is
/// kept as sent (its levels are read by name, as `minik8s_api` reads them).
pub fn validate(lws: &LeaderWorkerSet, old: Option<&LeaderWorkerSet>, errs: &mut Errors) {
    let s = lws.spec.scheduling.as_ref().filter(|s| !s.is_null());
    if let Some(old) = old {
        let was = old.spec.scheduling.as_ref().filter(|s| !s.is_null());
        if was != s {
            errs.push(FieldError::invalid(
                "spec.scheduling",
                s.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    let Some(s) = s else { return };
    let size = i64::from(lws.spec.leader_worker_template.size.unwrap_or(1));
    let replica = s.get("replica").filter(|r| !r.is_null());
    let leader = replica
        .and_then(|r| r.get("leader"))
        .filter(|v| !v.is_null());
    let worker = replica
        .and_then(|r| r.get("worker"))
        .filter(|v| !v.is_null());
    let levels = [
        has_any(Some(s), &LEVEL_FIELDS),
        has_any(replica, &LEVEL_FIELDS),
        leader.is_some() || worker.is_some(),
    ];
    if levels.iter().filter(|l| **l).count() > 1 {
        errs.push(FieldError::invalid(
            "spec.scheduling",
            &json!("object"),
            "only one level may be set: the LWS, replica, or replica.leader/replica.worker",
        ));
    }
    check_level(s, "spec.scheduling", None, false, errs);
    if let Some(r) = replica {
        check_level(r, "spec.scheduling.replica", Some(size), false, errs);
    }
    if let Some(l) = leader {
        check_level(l, "spec.scheduling.replica.leader", Some(1), true, errs);
    }
    if let Some(w) = worker {
        check_level(
            w,
            "spec.scheduling.replica.worker",
            Some(size - 1),
            true,
            errs,
        );
    }
    if (leader.is_some() || worker.is_some()) && size < 2 {
        errs.push(FieldError::invalid(
            "spec.leaderWorkerTemplate.size",
            &json!(size),
            "replica.leader and replica.worker need groups of at least 2 pods",
        ));
    }
    validate_combinations(lws, s, errs);
}

/// What a gang may not be combined with: LeaderReady for a gang holding a
/// group's leader and workers, exclusive placement annotations, leader and
/// worker templates of different priorities.
fn validate_combinations(lws: &LeaderWorkerSet, s: &Value, errs: &mut Errors) {
    let gang = scope(Some(s));
    if matches!(gang, GangScope::Group | GangScope::Lws)
        && lws.spec.startup_policy.as_deref() == Some("LeaderReady")
    {
        errs.push(FieldError::invalid(
            "spec.startupPolicy",
            &json!("LeaderReady"),
            "LeaderReady cannot be combined with a gang holding a group's leader and its workers: the workers only exist once the leader runs",
        ));
    }
    if gang != GangScope::Off {
        for key in [
            minik8s_api::lws::EXCLUSIVE_TOPOLOGY,
            minik8s_api::lws::SUBGROUP_EXCLUSIVE_TOPOLOGY,
        ] {
            if lws
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(key))
            {
                errs.push(FieldError::forbidden(
                    format!("metadata.annotations[{key}]"),
                    "cannot be combined with gang scheduling by spec.scheduling",
                ));
            }
        }
    }
    let tmpl = &lws.spec.leader_worker_template;
    let priority = |t: Option<&PodTemplateSpec>| {
        t.and_then(|t| t.spec.as_ref())
            .and_then(|s| s.priority_class_name.clone())
    };
    let worker = priority(Some(&tmpl.worker_template));
    if let Some(leader) = &tmpl.leader_template {
        if priority(Some(leader)) != worker {
            errs.push(FieldError::invalid(
                "spec.leaderWorkerTemplate.workerTemplate.spec.priorityClassName",
                &json!(worker),
                "must match the leader template's priorityClassName when spec.scheduling is set",
            ));
        }
    }
}

fn check_level(level: &Value, path: &str, members: Option<i64>, leaf: bool, errs: &mut Errors) {
    let policy = level.get("schedulingPolicy").filter(|p| !p.is_null());
    if let Some(p) = policy {
        let basic = p.get("basic").is_some_and(|v| !v.is_null());
        let gang = p.get("gang").filter(|v| !v.is_null());
        if basic == gang.is_some() {
            errs.push(FieldError::invalid(
                format!("{path}.schedulingPolicy"),
                &json!("object"),
                "exactly one of basic and gang must be set",
            ));
        }
        if let Some(g) = gang {
            if g.get("minGroupCount").is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::forbidden(
                    format!("{path}.schedulingPolicy.gang.minGroupCount"),
                    "minGroupCount is not supported: gangs of groups need composite pod groups",
                ));
            }
            if let (Some(m), Some(want)) = (g.get("minCount"), members) {
                if m.as_i64() != Some(want) {
                    errs.push(FieldError::invalid(
                        format!("{path}.schedulingPolicy.gang.minCount"),
                        m,
                        format!("must equal the number of pods in the gang ({want})"),
                    ));
                }
            }
        }
    }
    if let Some(d) = level.get("disruptionMode").filter(|d| !d.is_null()) {
        let single = d.get("single").is_some_and(|v| !v.is_null());
        let all = d.get("all").is_some_and(|v| !v.is_null());
        if single == all {
            errs.push(FieldError::invalid(
                format!("{path}.disruptionMode"),
                &json!("object"),
                "exactly one of single and all must be set",
            ));
        } else if all {
            errs.push(FieldError::forbidden(
                format!("{path}.disruptionMode.all"),
                "disrupting a gang as a whole is not supported by minik8s",
            ));
        }
    }
    let topology = level
        .pointer("/schedulingConstraints/topology")
        .and_then(Value::as_array);
    if let Some(t) = topology {
        let at = format!("{path}.schedulingConstraints.topology");
        if t.len() > 1 {
            errs.push(FieldError::too_many(&at, t.len(), 1));
        }
        for (i, c) in t.iter().enumerate() {
            let key = c.get("key").and_then(Value::as_str).unwrap_or("");
            if key.is_empty() {
                errs.push(FieldError::required(format!("{at}[{i}].key"), ""));
            } else if let Some(e) = crate::qualified_name_error(key) {
                errs.push(FieldError::invalid(
                    format!("{at}[{i}].key"),
                    &json!(key),
                    e,
                ));
            }
        }
    }
    if let Some(c) = level.get("resourceClaims").and_then(Value::as_array) {
        if !leaf {
            errs.push(FieldError::forbidden(
                format!("{path}.resourceClaims"),
                "resourceClaims may only be set on replica.leader or replica.worker",
            ));
        } else if c.len() > 4 {
            errs.push(FieldError::too_many(
                format!("{path}.resourceClaims"),
                c.len(),
                4,
            ));
        } else if !c.is_empty() {
            // Refused rather than accepted and ignored: the gang's own claims
            // (KEP-666) are not made; a group's devices are (lws#444).
            errs.push(FieldError::forbidden(
                format!("{path}.resourceClaims"),
                "a gang's resource claims are not supported by minik8s; use spec.leaderWorkerTemplate.resourceClaimTemplates for a claim per group",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lws(scheduling: Value, size: i64, extra: Value) -> Value {
        let mut o = json!({"metadata": {"name": "l"}, "spec": {"replicas": 2, "scheduling": scheduling,
            "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {}}}}});
        json_patch::merge(&mut o, &extra);
        o
    }

    fn errors(o: &Value, old: Option<&Value>) -> Vec<String> {
        let typed = |o: &Value| -> LeaderWorkerSet { serde_json::from_value(o.clone()).unwrap() };
        let mut errs = Vec::new();
        validate(&typed(o), old.map(typed).as_ref(), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn phase_one_rules() {
        assert!(errors(&lws(json!({}), 4, json!({})), None).is_empty());
        let cases = [
            (lws(json!({"replica": {"disruptionMode": {"all": {}}}}), 4, json!({})),
             "spec.scheduling.replica.disruptionMode.all: Forbidden: disrupting a gang as a whole is not supported by minik8s"),
            (lws(json!({"replica": {"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}}), 4, json!({})),
             "spec.scheduling.replica.schedulingConstraints.topology: Too many: 2: must have at most 1 items"),
            (lws(json!({"schedulingPolicy": {"gang": {}}, "replica": {"schedulingPolicy": {"gang": {}}}}), 4, json!({})),
             "spec.scheduling: Invalid value: \"object\": only one level may be set: the LWS, replica, or replica.leader/replica.worker"),
            (lws(json!({"replica": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}}}), 4, json!({})),
             "spec.scheduling.replica.schedulingPolicy.gang.minGroupCount: Forbidden: minGroupCount is not supported: gangs of groups need composite pod groups"),
            (lws(json!({"replica": {"schedulingPolicy": {"gang": {"minCount": 3}}}}), 4, json!({})),
             "spec.scheduling.replica.schedulingPolicy.gang.minCount: Invalid value: 3: must equal the number of pods in the gang (4)"),
            (lws(json!({"replica": {"worker": {"schedulingPolicy": {"gang": {"minCount": 4}}}}}), 4, json!({})),
             "spec.scheduling.replica.worker.schedulingPolicy.gang.minCount: Invalid value: 4: must equal the number of pods in the gang (3)"),
            (lws(json!({"replica": {"schedulingPolicy": {"gang": {}, "basic": {}}}}), 4, json!({})),
             "spec.scheduling.replica.schedulingPolicy: Invalid value: \"object\": exactly one of basic and gang must be set"),
            (lws(json!({"replica": {"worker": {}}}), 1, json!({})),
             "spec.leaderWorkerTemplate.size: Invalid value: 1: replica.leader and replica.worker need groups of at least 2 pods"),
            (lws(json!({}), 4, json!({"spec": {"startupPolicy": "LeaderReady"}})),
             "spec.startupPolicy: Invalid value: \"LeaderReady\": LeaderReady cannot be combined with a gang holding a group's leader and its workers: the workers only exist once the leader runs"),
            (lws(json!({}), 4, json!({"metadata": {"annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": "zone"}}})),
             "metadata.annotations[leaderworkerset.sigs.k8s.io/exclusive-topology]: Forbidden: cannot be combined with gang scheduling by spec.scheduling"),
            (lws(json!({"replica": {"worker": {"resourceClaims": [1, 2, 3, 4, 5]}}}), 4, json!({})),
             "spec.scheduling.replica.worker.resourceClaims: Too many: 5: must have at most 4 items"),
            (lws(json!({"replica": {"resourceClaims": [1]}}), 4, json!({})),
             "spec.scheduling.replica.resourceClaims: Forbidden: resourceClaims may only be set on replica.leader or replica.worker"),
            (lws(json!({"replica": {"worker": {"resourceClaims": [{"name": "a"}]}}}), 4, json!({})),
             "spec.scheduling.replica.worker.resourceClaims: Forbidden: a gang's resource claims are not supported by minik8s; use spec.leaderWorkerTemplate.resourceClaimTemplates for a claim per group"),
            (lws(json!({"disruptionMode": {}}), 4, json!({})),
             "spec.scheduling.disruptionMode: Invalid value: \"object\": exactly one of single and all must be set"),
            (lws(json!({}), 4, json!({"spec": {"leaderWorkerTemplate": {"leaderTemplate": {"spec": {"priorityClassName": "high"}}}}})),
             "spec.leaderWorkerTemplate.workerTemplate.spec.priorityClassName: Invalid value: null: must match the leader template's priorityClassName when spec.scheduling is set"),
        ];
        for (o, want) in cases {
            let got = errors(&o, None);
            assert!(got.iter().any(|e| e == want), "want {want}\ngot {got:?}");
        }
        // A basic policy with LeaderReady is fine: no gang.
        let basic = lws(
            json!({"replica": {"schedulingPolicy": {"basic": {}}}}),
            4,
            json!({"spec": {"startupPolicy": "LeaderReady"}}),
        );
        assert!(errors(&basic, None).is_empty());
        // Immutable.
        let a = lws(json!({}), 4, json!({}));
        let b = lws(json!({"schedulingPolicy": {"gang": {}}}), 4, json!({}));
        assert_eq!(errors(&b, Some(&a)), ["spec.scheduling: Invalid value: {\"schedulingPolicy\":{\"gang\":{}}}: field is immutable"]);
        assert!(errors(&a, Some(&a)).is_empty());
    }
}
