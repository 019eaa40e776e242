//! The pod status a sync reports: phase, conditions, podIP and
//! containerStatuses from the containers as last observed, written with
//! a merge patch of `pods/{name}/status` only when something changed.

use crate::actions::latest_of;
use crate::decide;
use crate::runtime::{ContainerInfo, State};
use crate::Kubelet;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::meta::now_rfc3339;
use minik8s_client::rest::content;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

impl Kubelet {
    pub(crate) async fn report_status(
        &self,
        pod: &Pod,
        containers: &[ContainerInfo],
        pod_ip: &str,
        waiting: &BTreeMap<String, (String, String)>,
        unready: &HashSet<String>,
    ) -> anyhow::Result<()> {
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let mut statuses = Vec::new();
        let mut states: Vec<Option<&State>> = Vec::new();
        for c in &spec.containers {
            let current = latest_of(containers, &c.name, 0);
            let previous = latest_of(containers, &c.name, 1);
            let w = waiting.get(&c.name).map(|(r, m)| (r.as_str(), m.as_str()));
            statuses.push(decide::container_status(
                self.runtime.scheme(),
                c,
                current,
                previous,
                w,
                !unready.contains(&c.name),
            ));
            // The phase follows what really ran: a container backing off still counts as started.
            states.push(current.map(|c| &c.state));
        }
        // Ephemeral containers report apart and count for neither phase nor readiness.
        let ephemeral_statuses: Vec<Value> = spec
            .ephemeral_containers
            .iter()
            .flatten()
            .filter_map(|ec| {
                let c: k8s_openapi::api::core::v1::Container =
                    serde_json::from_value(serde_json::to_value(ec).ok()?).ok()?;
                let current = latest_of(containers, &c.name, 0);
                if current.is_none() {
                    // Its container went with an old sandbox: what it reported stays.
                    let before = pod.status.as_ref()?.ephemeral_container_statuses.as_ref();
                    if let Some(old) = before.and_then(|l| l.iter().find(|s| s.name == c.name)) {
                        return serde_json::to_value(old).ok();
                    }
                }
                let w = waiting.get(&c.name).map(|(r, m)| (r.as_str(), m.as_str()));
                let mut s =
                    decide::container_status(self.runtime.scheme(), &c, current, None, w, false);
                if let Some(m) = s.as_object_mut() {
                    m.remove("started");
                }
                Some(s)
            })
            .collect();
        let phase = decide::pod_phase(&policy, &states);
        let all_ready = !statuses.is_empty() && statuses.iter().all(|s| s["ready"] == true);
        let old = serde_json::to_value(&pod.status).unwrap_or(Value::Null);
        let old_conditions: Vec<Value> = old
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now_rfc3339();
        let condition = |ty: &str, ok: bool| {
            let status = if ok { "True" } else { "False" };
            let prev = old_conditions.iter().find(|c| c["type"] == ty);
            let since = prev
                .filter(|p| p["status"] == status)
                .and_then(|p| p.get("lastTransitionTime").cloned())
                .unwrap_or(json!(now));
            let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
            if !ok && (ty == "Ready" || ty == "ContainersReady") {
                let not_ready: Vec<&str> = statuses
                    .iter()
                    .filter(|s| s["ready"] != true)
                    .filter_map(|s| s["name"].as_str())
                    .collect();
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(format!(
                    "containers with unready status: [{}]",
                    not_ready.join(" ")
                ));
            }
            if ok && ty == "Ready" && phase == "Succeeded" {
                c["status"] = json!("False");
                c["reason"] = json!("PodCompleted");
            }
            c
        };
        let done = phase == "Succeeded" || phase == "Failed";
        let ready = all_ready && !done;
        let conditions = vec![
            condition("PodReadyToStartContainers", true),
            condition("Initialized", true),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled", true),
        ];
        let start_time = old.get("startTime").cloned().unwrap_or(json!(now));
        let mut status = json!({
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.config.node_ip,
            "hostIPs": [{"ip": self.config.node_ip}],
            "startTime": start_time,
            "containerStatuses": statuses,
            "qosClass": old.get("qosClass").cloned().unwrap_or(json!("BestEffort")),
        });
        if !ephemeral_statuses.is_empty() {
            status["ephemeralContainerStatuses"] = json!(ephemeral_statuses);
        }
        if !pod_ip.is_empty() {
            status["podIP"] = json!(pod_ip);
            status["podIPs"] = json!([{"ip": pod_ip}]);
        }
        if same_status(&status, &old) {
            return Ok(());
        }
        // A merge patch of the status alone, as the real kubelet's status
        // manager patches: no conflict with other writers' changes; the uid
        // makes sure it lands on this pod, not one recreated under its name.
        if pod_ip.is_empty() {
            status["podIP"] = Value::Null;
            status["podIPs"] = Value::Null;
        }
        let patch = json!({"metadata": {"uid": pod.metadata.uid}, "status": status});
        match self
            .client
            .patch_status::<Pod>(&pod.metadata, content::MERGE_PATCH, &patch)
            .await
        {
            // Gone (false), or replaced by a pod of the same name (409): nothing to report.
            Ok(_) => Ok(()),
            Err(e) if e.is_conflict() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether two lists of conditions say the same, but for the fields in
/// `ignored` (times that change on every report). Compared in place: pod
/// syncs and node heartbeats ask all the time, on thousands of hollow nodes.
pub(crate) fn same_conditions(a: &Value, b: &Value, ignored: &[&str]) -> bool {
    let kept = |k: &&String| !ignored.contains(&k.as_str());
    match (a.as_array(), b.as_array()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| match (x.as_object(), y.as_object()) {
                        (Some(x), Some(y)) => {
                            x.keys().filter(kept).count() == y.keys().filter(kept).count()
                                && x.iter()
                                    .filter(|(k, _)| kept(k))
                                    .all(|(k, v)| y.get(k) == Some(v))
                        }
                        _ => x == y,
                    })
        }
        _ => a == b,
    }
}

/// Whether two statuses say the same, but for the conditions' lastProbeTime
/// (set on every write). Compared in place: every pod's periodic sync asks,
/// and cloning both statuses to compare them was most of a hollow node's work.
fn same_status(a: &Value, b: &Value) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter().all(|(k, v)| match b.get(k) {
                    Some(w) if k == "conditions" => same_conditions(v, w, &["lastProbeTime"]),
                    Some(w) => v == w,
                    None => false,
                })
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_differing_only_in_probe_times_are_the_same() {
        let a = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "t1"}]});
        let mut b = a.clone();
        b["conditions"][0]["lastProbeTime"] = json!("t9");
        assert!(same_status(&a, &b));
        b["conditions"][0]["status"] = json!("False");
        assert!(!same_status(&a, &b));
        let mut c = a.clone();
        c["podIP"] = json!("10.0.0.2");
        assert!(!same_status(&a, &c));
        assert!(!same_status(&c, &a));
        let mut d = a.clone();
        d["conditions"][0]
            .as_object_mut()
            .unwrap()
            .remove("lastProbeTime");
        assert!(same_status(&a, &d));
    }
}
