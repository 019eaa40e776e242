//! Workload-aware gang scheduling of a LeaderWorkerSet, in the shape
//! upstream is moving to (`spec.scheduling`, KEP-666 as proposed for
//! Kubernetes 1.37's Workload/PodGroup API): which gang each pod joins, and
//! the KEP's phase-1 validation rules. The LWS controller writes each gang
//! as a Workload API PodGroup (`scheduling.k8s.io/v1beta1`) made from the
//! LWS's Workload; its pods name it in `spec.schedulingGroup`.
//!
//! ```text
//!   scheduling: {}  or  replica: {...}      one gang per group, minCount = size
//!   scheduling: {schedulingPolicy: gang}    one gang for the LWS, minCount = replicas × size
//!   replica: {worker: {...}}                a gang of each group's workers, minCount = size - 1
//!   basic: {} anywhere                      no gang at that level
//! ```

use crate::field::{Errors, FieldError};
use serde_json::{json, Value};

/// Template annotation (minik8s): which gang an LWS pod joins.
pub const GANG_SCOPE: &str = "minik8s.io/gang-scope";

/// Which gang the pods of an LWS join under `spec.scheduling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GangScope {
    /// No gang (field absent, or a basic policy).
    Off,
    /// One gang per group: leader and workers.
    Group,
    /// One gang of every pod of the LWS.
    Lws,
    /// One gang per group of its workers only (the leader schedules alone).
    Worker,
}

impl GangScope {
    pub fn as_str(self) -> &'static str {
        match self {
            GangScope::Off => "",
            GangScope::Group => "group",
            GangScope::Lws => "lws",
            GangScope::Worker => "worker",
        }
    }

    /// The PodGroup a pod of group `index` at `revision` joins, for a leader
    /// or a worker (`None`: it schedules alone).
    pub fn group_name(
        self,
        lws: &str,
        index: &str,
        revision: &str,
        leader: bool,
    ) -> Option<String> {
        match self {
            GangScope::Off => None,
            GangScope::Group => Some(format!("{lws}-{index}-{revision}")),
            GangScope::Lws => Some(format!("{lws}-lws")),
            GangScope::Worker if leader => None,
            GangScope::Worker => Some(format!("{lws}-{index}-{revision}-worker")),
        }
    }

    /// The gang's minMember for an LWS of `replicas` groups of `size`.
    pub fn min_member(self, replicas: i32, size: i32) -> i32 {
        match self {
            GangScope::Off => 1,
            GangScope::Group => size,
            GangScope::Lws => (replicas * size).max(1),
            GangScope::Worker => (size - 1).max(1),
        }
    }
}

const LEVEL_FIELDS: [&str; 3] = [
    "schedulingPolicy",
    "schedulingConstraints",
    "disruptionMode",
];

fn has_any(v: Option<&Value>, fields: &[&str]) -> bool {
    v.and_then(Value::as_object).is_some_and(|m| {
        fields
            .iter()
            .any(|f| m.get(*f).is_some_and(|x| !x.is_null()))
    })
}

fn is_gang(level: Option<&Value>) -> bool {
    level
        .and_then(|l| l.pointer("/schedulingPolicy/basic"))
        .is_none_or(Value::is_null)
}

/// The gang scope `spec.scheduling` asks for.
pub fn scope(scheduling: Option<&Value>) -> GangScope {
    let Some(s) = scheduling.filter(|s| s.is_object()) else {
        return GangScope::Off;
    };
    let replica = s.get("replica").filter(|r| !r.is_null());
    if has_any(Some(s), &LEVEL_FIELDS) {
        return if is_gang(Some(s)) {
            GangScope::Lws
        } else {
            GangScope::Off
        };
    }
    let worker = replica
        .and_then(|r| r.get("worker"))
        .filter(|w| !w.is_null());
    let leader = replica
        .and_then(|r| r.get("leader"))
        .filter(|l| !l.is_null());
    if worker.is_some() || leader.is_some() {
        return if worker.is_some() && is_gang(worker) {
            GangScope::Worker
        } else {
            GangScope::Off
        };
    }
    if is_gang(replica) {
        GangScope::Group
    } else {
        GangScope::Off
    }
}

/// The `schedulingConstraints` of the level that makes the gang (copied
/// onto its Workload template and PodGroups, where the scheduler keeps the
/// gang in one domain of the topology key).
pub fn gang_constraints(scheduling: Option<&Value>) -> Option<Value> {
    let s = scheduling.filter(|s| s.is_object())?;
    let replica = s.get("replica").filter(|r| !r.is_null());
    let level = match scope(Some(s)) {
        GangScope::Off => return None,
        GangScope::Lws => Some(s),
        GangScope::Group => replica,
        GangScope::Worker => replica.and_then(|r| r.get("worker")),
    }?;
    level
        .get("schedulingConstraints")
        .filter(|c| !c.is_null())
        .cloned()
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
            } else if let Some(e) = crate::names::qualified_name_error(key) {
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

/// KEP-666 phase 1 on an LWS (`obj`; `old` on update).
pub fn validate(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let s = obj.pointer("/spec/scheduling").filter(|s| !s.is_null());
    if let Some(old) = old {
        let was = old.pointer("/spec/scheduling").filter(|s| !s.is_null());
        if was != s {
            errs.push(FieldError::invalid(
                "spec.scheduling",
                s.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    let Some(s) = s else { return };
    let size = obj
        .pointer("/spec/leaderWorkerTemplate/size")
        .and_then(Value::as_i64)
        .unwrap_or(1);
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
    let gang = scope(Some(s));
    if matches!(gang, GangScope::Group | GangScope::Lws)
        && obj.pointer("/spec/startupPolicy").and_then(Value::as_str) == Some("LeaderReady")
    {
        errs.push(FieldError::invalid(
            "spec.startupPolicy",
            &json!("LeaderReady"),
            "LeaderReady cannot be combined with a gang holding a group's leader and its workers: the workers only exist once the leader runs",
        ));
    }
    if gang != GangScope::Off {
        for key in [
            crate::lws::EXCLUSIVE_TOPOLOGY,
            crate::lws::SUBGROUP_EXCLUSIVE_TOPOLOGY,
        ] {
            if obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .is_some()
            {
                errs.push(FieldError::forbidden(
                    format!("metadata.annotations[{key}]"),
                    "cannot be combined with gang scheduling by spec.scheduling",
                ));
            }
        }
    }
    let priority = |t: &str| {
        obj.pointer(&format!(
            "/spec/leaderWorkerTemplate/{t}/spec/priorityClassName"
        ))
        .cloned()
    };
    if obj
        .pointer("/spec/leaderWorkerTemplate/leaderTemplate")
        .is_some_and(|v| !v.is_null())
        && priority("leaderTemplate") != priority("workerTemplate")
    {
        errs.push(FieldError::invalid(
            "spec.leaderWorkerTemplate.workerTemplate.spec.priorityClassName",
            &priority("workerTemplate").unwrap_or(Value::Null),
            "must match the leader template's priorityClassName when spec.scheduling is set",
        ));
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
        let mut errs = Vec::new();
        validate(o, old, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn scopes() {
        assert_eq!(scope(None), GangScope::Off);
        assert_eq!(scope(Some(&json!({}))), GangScope::Group);
        assert_eq!(scope(Some(&json!({"replica": {}}))), GangScope::Group);
        assert_eq!(
            scope(Some(
                &json!({"replica": {"schedulingPolicy": {"gang": {"minCount": 4}}}})
            )),
            GangScope::Group
        );
        assert_eq!(
            scope(Some(
                &json!({"replica": {"schedulingPolicy": {"basic": {}}}})
            )),
            GangScope::Off
        );
        assert_eq!(
            scope(Some(&json!({"schedulingPolicy": {"gang": {}}}))),
            GangScope::Lws
        );
        assert_eq!(
            scope(Some(&json!({"replica": {"worker": {}}}))),
            GangScope::Worker
        );
        assert_eq!(
            scope(Some(&json!({"replica": {"leader": {}}}))),
            GangScope::Off
        );
        assert_eq!(
            GangScope::Group
                .group_name("d", "1", "abc", true)
                .as_deref(),
            Some("d-1-abc")
        );
        assert_eq!(GangScope::Worker.group_name("d", "1", "abc", true), None);
        assert_eq!(
            GangScope::Worker
                .group_name("d", "1", "abc", false)
                .as_deref(),
            Some("d-1-abc-worker")
        );
        assert_eq!(
            GangScope::Lws.group_name("d", "1", "abc", false).as_deref(),
            Some("d-lws")
        );
        assert_eq!(GangScope::Lws.min_member(3, 4), 12);
        assert_eq!(GangScope::Lws.min_member(0, 4), 1);
        assert_eq!(GangScope::Worker.min_member(3, 4), 3);
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
