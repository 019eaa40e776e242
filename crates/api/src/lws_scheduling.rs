//! Workload-aware gang scheduling of a LeaderWorkerSet, in the shape
//! upstream is moving to (`spec.scheduling`, KEP-666 as proposed for
//! Kubernetes 1.37's Workload/PodGroup API): which gang each pod joins, and
//! the KEP's phase-1 validation rules (`minik8s_validation::lws_scheduling`). The LWS controller writes each gang
//! as a Workload API PodGroup (`scheduling.k8s.io/v1beta1`) made from the
//! LWS's Workload; its pods name it in `spec.schedulingGroup`.
//!
//! ```text
//!   scheduling: {}  or  replica: {...}      one gang per group, minCount = size
//!   scheduling: {schedulingPolicy: gang}    one gang for the LWS, minCount = replicas × size
//!   replica: {worker: {...}}                a gang of each group's workers, minCount = size - 1
//!   basic: {} anywhere                      no gang at that level
//! ```

use serde_json::Value;

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

/// The fields that set a gang policy at one level of `spec.scheduling`.
pub const LEVEL_FIELDS: [&str; 3] = [
    "schedulingPolicy",
    "schedulingConstraints",
    "disruptionMode",
];

/// Whether `v` sets any of `fields` (to something other than null).
pub fn has_any(v: Option<&Value>, fields: &[&str]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
