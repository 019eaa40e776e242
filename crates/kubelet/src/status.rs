//! The pod status a sync reports: phase, conditions, podIP, init, app and
//! ephemeral container statuses from the containers as last observed,
//! written with a merge patch of `pods/{name}/status` only when something
//! changed.

use crate::actions::{is_sidecar, latest_of};
use crate::decide::{self, Known};
use crate::probe::Kind;
use crate::runtime::ContainerInfo;
use crate::Kubelet;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use minik8s_api::meta::now_rfc3339;
use minik8s_client::rest::content;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// The conditions the kubelet owns; others (readiness gates', the
/// disruption controller's) are kept as they are.
const KUBELET_CONDITIONS: [&str; 7] = [
    "PodReadyToStartContainers",
    "PodResizePending",
    "PodResizeInProgress",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// One condition as the kubelet computes it: (type, status, reason, message).
pub type Condition = (&'static str, bool, Option<&'static str>, Option<String>);

/// The pod's conditions as written: the kubelet's own (`kubelet`, each
/// keeping its lastTransitionTime while its status holds), the resize
/// conditions (`resizing`, kept since they appeared), then the conditions
/// others own (readiness gates', DisruptionTarget) as they were.
fn condition_objects(
    kubelet: Vec<Condition>,
    resizing: Vec<(&'static str, String, String)>,
    old: &[Value],
    now: &str,
) -> Vec<Value> {
    let since = |ty: &str, status: Option<&str>| {
        old.iter()
            .find(|c| c["type"] == ty)
            .filter(|p| status.is_none_or(|s| p["status"] == s))
            .and_then(|p| p.get("lastTransitionTime").cloned())
            .unwrap_or(json!(now))
    };
    let condition = |ty: &str,
                     status: &str,
                     since: Value,
                     reason: Option<&str>,
                     message: Option<&str>| {
        let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        if let Some(m) = message {
            c["message"] = json!(m);
        }
        c
    };
    let mut conditions: Vec<Value> = kubelet
        .into_iter()
        .map(|(ty, ok, reason, message)| {
            let status = if ok { "True" } else { "False" };
            let since = since(ty, Some(status));
            condition(ty, status, since, reason, message.as_deref())
        })
        .collect();
    for (ty, reason, message) in resizing {
        let given = |s: &String| (!s.is_empty()).then(|| s.clone());
        let (reason, message) = (given(&reason), given(&message));
        conditions.push(condition(
            ty,
            "True",
            since(ty, None),
            reason.as_deref(),
            message.as_deref(),
        ));
    }
    conditions.extend(
        old.iter()
            .filter(|c| {
                !c["type"]
                    .as_str()
                    .is_some_and(|t| KUBELET_CONDITIONS.contains(&t))
            })
            .cloned(),
    );
    conditions
}

/// The kubelet's pod conditions from the container statuses, as the real
/// kubelet's `GeneratePodInitializedCondition`, `GenerateContainersReadyCondition`
/// and `GeneratePodReadyCondition` compute them. `conditions`: the pod's
/// current ones (readiness gates are read from them).
/// Long: the three conditions are decided in one pass over the same
/// statuses, each depending on the one before.
pub fn pod_conditions(
    spec: &PodSpec,
    phase: &str,
    init_statuses: &[Value],
    statuses: &[Value],
    conditions: &[Value],
) -> Vec<Condition> {
    let find = |list: &[Value], name: &str| list.iter().find(|s| s["name"] == name).cloned();
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    // Initialized: every init container done (a sidecar: started), or an app ran already.
    let incomplete: Vec<&str> = inits
        .iter()
        .filter(|c| {
            let s = find(init_statuses, &c.name);
            !s.is_some_and(|s| {
                if is_sidecar(c) {
                    s["started"] == true
                } else {
                    s.pointer("/state/terminated/exitCode") == Some(&json!(0))
                }
            })
        })
        .map(|c| c.name.as_str())
        .collect();
    let app_ran = statuses.iter().any(|s| {
        s.pointer("/state/running").is_some()
            || s.pointer("/state/terminated").is_some()
            || s.pointer("/lastState/terminated").is_some()
    });
    let initialized: Condition = if incomplete.is_empty() {
        let reason = (phase == "Succeeded" && !inits.is_empty()).then_some("PodCompleted");
        ("Initialized", true, reason, None)
    } else if app_ran {
        ("Initialized", true, None, None)
    } else {
        let message = format!(
            "containers with incomplete status: [{}]",
            incomplete.join(" ")
        );
        (
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(message),
        )
    };
    // ContainersReady: the apps and the sidecars.
    let unready: Vec<&str> = inits
        .iter()
        .filter(|c| is_sidecar(c))
        .chain(&spec.containers)
        .filter(|c| {
            !find(
                if is_sidecar(c) {
                    init_statuses
                } else {
                    statuses
                },
                &c.name,
            )
            .is_some_and(|s| s["ready"] == true)
        })
        .map(|c| c.name.as_str())
        .collect();
    let containers_ready: Condition = if phase == "Succeeded" {
        ("ContainersReady", false, Some("PodCompleted"), None)
    } else if unready.is_empty() {
        ("ContainersReady", true, None, None)
    } else {
        let message = format!("containers with unready status: [{}]", unready.join(" "));
        (
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(message),
        )
    };
    // Ready: ContainersReady and every readiness gate's condition True.
    let mut ready: Condition = (
        "Ready",
        containers_ready.1,
        containers_ready.2,
        containers_ready.3.clone(),
    );
    if ready.1 {
        let mut gates_unready = Vec::new();
        for gate in spec.readiness_gates.iter().flatten() {
            let ty = &gate.condition_type;
            match conditions.iter().find(|c| c["type"] == *ty) {
                None => gates_unready.push(format!(
                    "corresponding condition of pod readiness gate \"{ty}\" does not exist."
                )),
                Some(c) if c["status"] != "True" => gates_unready.push(format!(
                    "the status of pod readiness gate \"{ty}\" is not \"True\", but {}",
                    c["status"].as_str().unwrap_or("")
                )),
                Some(_) => {}
            }
        }
        if !gates_unready.is_empty() {
            ready = (
                "Ready",
                false,
                Some("ReadinessGatesNotReady"),
                Some(gates_unready.join(", ")),
            );
        }
    }
    vec![
        ("PodReadyToStartContainers", true, None, None),
        initialized,
        ready,
        containers_ready,
        ("PodScheduled", true, None, None),
    ]
}

/// What a sync reports about a pod besides its containers.
pub struct Report<'a> {
    pub containers: &'a [ContainerInfo],
    pub pod_ip: &'a str,
    pub waiting: &'a BTreeMap<String, (String, String)>,
    /// The pod's containers were stopped for good (deleted, or killed once
    /// its apps were done): its phase is final.
    pub terminal: bool,
    /// Failed for a reason of the pod's own (`DeadlineExceeded`,
    /// `SysctlForbidden`): (reason, message).
    pub failed: Option<(&'a str, &'a str)>,
}

impl<'a> Report<'a> {
    /// The report of a live pod's sync: nothing final about it.
    pub fn live(
        containers: &'a [ContainerInfo],
        pod_ip: &'a str,
        waiting: &'a BTreeMap<String, (String, String)>,
    ) -> Report<'a> {
        Report {
            containers,
            pod_ip,
            waiting,
            terminal: false,
            failed: None,
        }
    }
}

impl Kubelet {
    /// What the kubelet knows of one running container beyond the runtime:
    /// its readiness and startup probes' verdicts so far.
    fn probe_verdicts(&self, c: &Container, current: Option<&ContainerInfo>) -> (bool, bool) {
        let Some(cur) = current else {
            return (false, false);
        };
        let verdict =
            |probe: bool, kind| !probe || self.probes.get(&cur.id, kind).result == Some(true);
        let started = verdict(c.startup_probe.is_some(), Kind::Startup);
        let ready = verdict(c.readiness_probe.is_some(), Kind::Readiness);
        (ready, started)
    }

    pub(crate) async fn report_status(&self, pod: &Pod, report: Report<'_>) -> anyhow::Result<()> {
        let Report {
            containers,
            pod_ip,
            waiting,
            terminal,
            failed,
        } = report;
        let spec = pod.spec.clone().unwrap_or_default();
        let messages = self.termination_messages(pod, containers).await;
        let allocation = (!terminal)
            .then(|| {
                self.allocations
                    .get(pod.metadata.uid.as_deref().unwrap_or(""))
            })
            .flatten();
        let (init_statuses, statuses) =
            self.container_statuses(&spec, containers, waiting, &messages, allocation.as_ref());
        let ephemeral_statuses = self.ephemeral_statuses(pod, &spec, containers, waiting);
        let phase = match failed {
            Some(_) => "Failed",
            None => decide::pod_phase(&spec, &init_statuses, &statuses, terminal),
        };
        if matches!(phase, "Succeeded" | "Failed") {
            if let Some(uid) = &pod.metadata.uid {
                crate::lock(&self.finished).insert(uid.clone());
            }
        }
        let old = serde_json::to_value(&pod.status).unwrap_or(Value::Null);
        let old_conditions: Vec<Value> = old
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now_rfc3339();
        let resizing = allocation
            .as_ref()
            .map(|a| crate::resize::conditions(a, &spec, containers))
            .unwrap_or_default();
        let kubelets = pod_conditions(&spec, phase, &init_statuses, &statuses, &old_conditions);
        let conditions = condition_objects(kubelets, resizing, &old_conditions, &now);
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
        if !init_statuses.is_empty() {
            status["initContainerStatuses"] = json!(init_statuses);
        }
        if let Some((reason, message)) = failed {
            status["reason"] = json!(reason);
            status["message"] = json!(message);
        }
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
        self.patch_pod_status(pod, status, pod_ip.is_empty()).await
    }

    /// The init and app containers' statuses, from what the runtime shows
    /// (`containers`), the waiting reasons the sync set, the probes'
    /// verdicts, termination messages and (resizing) the allocation.
    fn container_statuses(
        &self,
        spec: &PodSpec,
        containers: &[ContainerInfo],
        waiting: &BTreeMap<String, (String, String)>,
        messages: &HashMap<String, String>,
        allocation: Option<&crate::resize::PodAllocation>,
    ) -> (Vec<Value>, Vec<Value>) {
        let has_init = spec.init_containers.as_ref().is_some_and(|l| !l.is_empty());
        let not_created = if has_init {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        let status_of = |c: &Container, init: bool| {
            let current = latest_of(containers, &c.name, 0);
            let previous = latest_of(containers, &c.name, 1);
            let w = waiting.get(&c.name).map(|(r, m)| (r.as_str(), m.as_str()));
            let (ready, started) = self.probe_verdicts(c, current);
            let known = Known {
                ready,
                started,
                messages,
                not_created,
            };
            let mut s =
                decide::container_status(self.runtime.scheme(), c, current, previous, w, known);
            // A regular init container is ready once it succeeded.
            if init && !is_sidecar(c) {
                s["ready"] = json!(s.pointer("/state/terminated/exitCode") == Some(&json!(0)));
            }
            if let Some(a) = allocation {
                crate::resize::container_resources(&mut s, a, &c.name, current);
            }
            s
        };
        let init_statuses: Vec<Value> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| status_of(c, true))
            .collect();
        let statuses: Vec<Value> = spec
            .containers
            .iter()
            .map(|c| status_of(c, false))
            .collect();
        (init_statuses, statuses)
    }

    /// A merge patch of the status alone, as the real kubelet's status
    /// manager patches: no conflict with other writers' changes; the uid
    /// makes sure it lands on this pod, not one recreated under its name.
    async fn patch_pod_status(
        &self,
        pod: &Pod,
        mut status: Value,
        no_ip: bool,
    ) -> anyhow::Result<()> {
        if no_ip {
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

    /// Ephemeral containers report apart and count for neither phase nor readiness.
    fn ephemeral_statuses(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        containers: &[ContainerInfo],
        waiting: &BTreeMap<String, (String, String)>,
    ) -> Vec<Value> {
        let no_messages = HashMap::new();
        spec.ephemeral_containers
            .iter()
            .flatten()
            .filter_map(|ec| {
                let c: Container = serde_json::from_value(serde_json::to_value(ec).ok()?).ok()?;
                let current = latest_of(containers, &c.name, 0);
                if current.is_none() {
                    // Its container went with an old sandbox: what it reported stays.
                    let before = pod.status.as_ref()?.ephemeral_container_statuses.as_ref();
                    if let Some(old) = before.and_then(|l| l.iter().find(|s| s.name == c.name)) {
                        return serde_json::to_value(old).ok();
                    }
                }
                let w = waiting.get(&c.name).map(|(r, m)| (r.as_str(), m.as_str()));
                let known = Known {
                    ready: false,
                    started: true,
                    messages: &no_messages,
                    not_created: "ContainerCreating",
                };
                let mut s =
                    decide::container_status(self.runtime.scheme(), &c, current, None, w, known);
                if let Some(m) = s.as_object_mut() {
                    m.remove("started");
                }
                Some(s)
            })
            .collect()
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
    fn conditions_follow_init_containers_sidecars_and_readiness_gates() {
        let spec: PodSpec = serde_json::from_value(json!({
            "initContainers": [{"name": "init"}, {"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}],
            "readinessGates": [{"conditionType": "example.com/gate"}]}))
        .unwrap();
        let of = |conditions: &[Condition], ty: &str| {
            let c = conditions.iter().find(|c| c.0 == ty).unwrap().clone();
            (c.1, c.2, c.3)
        };
        let init_running = [
            json!({"name": "init", "state": {"running": {}}}),
            json!({"name": "side", "state": {"waiting": {"reason": "PodInitializing"}}}),
        ];
        let app_waiting = [
            json!({"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}, "ready": false}),
        ];
        let c = pod_conditions(&spec, "Pending", &init_running, &app_waiting, &[]);
        assert_eq!(
            of(&c, "Initialized"),
            (
                false,
                Some("ContainersNotInitialized"),
                Some("containers with incomplete status: [init side]".into())
            )
        );
        assert_eq!(
            of(&c, "ContainersReady"),
            (
                false,
                Some("ContainersNotReady"),
                Some("containers with unready status: [side app]".into())
            )
        );
        // All ready, but the gate's condition is missing, then False, then True.
        let inits = [
            json!({"name": "init", "state": {"terminated": {"exitCode": 0}}, "ready": true}),
            json!({"name": "side", "state": {"running": {}}, "started": true, "ready": true}),
        ];
        let apps = [json!({"name": "app", "state": {"running": {}}, "ready": true})];
        let c = pod_conditions(&spec, "Running", &inits, &apps, &[]);
        assert!(of(&c, "Initialized").0);
        assert!(of(&c, "ContainersReady").0);
        assert_eq!(
            of(&c, "Ready"),
            (false, Some("ReadinessGatesNotReady"),
             Some("corresponding condition of pod readiness gate \"example.com/gate\" does not exist.".into()))
        );
        let gate = |status: &str| [json!({"type": "example.com/gate", "status": status})];
        let c = pod_conditions(&spec, "Running", &inits, &apps, &gate("False"));
        assert_eq!(
            of(&c, "Ready").2.unwrap(),
            "the status of pod readiness gate \"example.com/gate\" is not \"True\", but False"
        );
        let c = pod_conditions(&spec, "Running", &inits, &apps, &gate("True"));
        assert_eq!(of(&c, "Ready"), (true, None, None));
    }

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
