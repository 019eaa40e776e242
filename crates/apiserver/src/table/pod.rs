//! A pod's READY, STATUS and RESTARTS cells, as kubectl's pod printer
//! computes them: init containers first (`Init:1/2`, `Init:Error`,
//! `Init:CrashLoopBackOff`), sidecars counted among the containers, then the
//! app containers' waiting or terminated reasons (`PodInitializing`,
//! `CrashLoopBackOff`, `Completed`), `Terminating` for a deleting pod that
//! has not finished, and the last restart's age (`3 (10s ago)`).

use minik8s_api::meta::{human_age, is_deleting};
use serde_json::Value;

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Of two RFC 3339 times, the later (the empty string is the earliest).
fn later<'a>(a: &'a str, b: &'a str) -> &'a str {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) if y > x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

/// `Init:<reason>` or `<reason>` of a terminated state: its reason, else its
/// signal or exit code.
fn terminated_reason(t: &Value, prefix: &str) -> String {
    match t
        .get("reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        Some(r) => format!("{prefix}{r}"),
        None => match t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
            Some(signal) => format!("{prefix}Signal:{signal}"),
            None => format!(
                "{prefix}ExitCode:{}",
                t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
            ),
        },
    }
}

/// (READY, STATUS, RESTARTS) of a pod.
/// Long as kubectl's printPod, which it follows step by step (init
/// containers, then the app containers, then deletion) so the two read
/// side by side.
pub fn pod_cells(pod: &Value) -> (String, String, String) {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut reason = pod
        .pointer("/status/reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_string();
    let conditions = list(pod, "/status/conditions");
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let inits = list(pod, "/spec/initContainers");
    let sidecar = |name: &str| {
        inits
            .iter()
            .any(|c| c["name"] == name && c["restartPolicy"] == "Always")
    };
    let mut total = list(pod, "/spec/containers").len();
    total += inits
        .iter()
        .filter(|c| c["restartPolicy"] == "Always")
        .count();
    let (mut ready, mut restarts, mut sidecar_restarts) = (0, 0, 0);
    let (mut last_restart, mut last_sidecar_restart) = ("", "");
    let mut initializing = false;
    let init_statuses = list(pod, "/status/initContainerStatuses");
    for (i, s) in init_statuses.iter().enumerate() {
        let count = s["restartCount"].as_i64().unwrap_or(0);
        restarts += count;
        let finished = s
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str);
        if let Some(f) = finished {
            last_restart = later(last_restart, f);
        }
        let name = s["name"].as_str().unwrap_or("");
        if sidecar(name) {
            sidecar_restarts += count;
            if let Some(f) = finished {
                last_sidecar_restart = later(last_sidecar_restart, f);
            }
        }
        let terminated = s.pointer("/state/terminated");
        let waiting = s
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty());
        if terminated.is_some_and(|t| t["exitCode"] == 0) {
            continue;
        }
        if sidecar(name) && s["started"] == true {
            if s["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = match (terminated, waiting) {
            (Some(t), _) => terminated_reason(t, "Init:"),
            (None, Some(w)) if w != "PodInitializing" => format!("Init:{w}"),
            _ => format!("Init:{i}/{}", inits.len()),
        };
        initializing = true;
        break;
    }
    let initialized = conditions
        .iter()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut running = false;
        for s in list(pod, "/status/containerStatuses").iter().rev() {
            restarts += s["restartCount"].as_i64().unwrap_or(0);
            if let Some(f) = s
                .pointer("/lastState/terminated/finishedAt")
                .and_then(Value::as_str)
            {
                last_restart = later(last_restart, f);
            }
            let waiting = s
                .pointer("/state/waiting/reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty());
            if let Some(w) = waiting {
                reason = w.to_string();
            } else if let Some(t) = s.pointer("/state/terminated") {
                reason = terminated_reason(t, "");
            } else if s["ready"] == true && s.pointer("/state/running").is_some() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            let has_ready = conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if has_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if is_deleting(pod) && pod.pointer("/status/reason") == Some(&Value::from("NodeLost")) {
        reason = "Unknown".into();
    } else if is_deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts = if restarts != 0 && !last_restart.is_empty() {
        format!("{restarts} ({} ago)", human_age(last_restart))
    } else {
        restarts.to_string()
    };
    (format!("{ready}/{total}"), reason, restarts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status_of(pod: Value) -> String {
        pod_cells(&pod).1
    }

    #[test]
    fn init_containers_show_their_progress() {
        let spec = json!({"initContainers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "app"}]});
        let waiting = json!({"waiting": {"reason": "PodInitializing"}});
        let pod = |a: Value, b: Value, initialized: &str| {
            json!({"spec": spec, "status": {"phase": "Pending",
                "conditions": [{"type": "Initialized", "status": initialized}],
                "initContainerStatuses": [{"name": "a", "state": a}, {"name": "b", "state": b}],
                "containerStatuses": [{"name": "app", "state": waiting}]}})
        };
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        assert_eq!(
            status_of(pod(json!({"running": {}}), waiting.clone(), "False")),
            "Init:0/2"
        );
        assert_eq!(
            status_of(pod(done.clone(), json!({"running": {}}), "False")),
            "Init:1/2"
        );
        assert_eq!(
            status_of(pod(
                json!({"terminated": {"exitCode": 1, "reason": "Error"}}),
                waiting.clone(),
                "False"
            )),
            "Init:Error"
        );
        assert_eq!(
            status_of(pod(
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                waiting.clone(),
                "False"
            )),
            "Init:CrashLoopBackOff"
        );
        assert_eq!(
            status_of(pod(done.clone(), done, "True")),
            "PodInitializing"
        );
    }

    #[test]
    fn sidecars_count_among_the_containers_and_restarts_show_their_age() {
        let pod = json!({
            "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "app"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "side", "started": true, "ready": true, "restartCount": 1,
                                           "state": {"running": {}},
                                           "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2020-01-01T00:00:00Z"}}}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        let (ready, status, restarts) = pod_cells(&pod);
        assert_eq!((ready.as_str(), status.as_str()), ("2/2", "Running"));
        assert!(
            restarts.starts_with("1 (") && restarts.ends_with(" ago)"),
            "{restarts}"
        );
    }

    #[test]
    fn a_deleting_pod_is_terminating_until_it_finished() {
        let pod = |phase: &str| {
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"containers": [{"name": "c"}]},
                   "status": {"phase": phase, "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})
        };
        assert_eq!(status_of(pod("Running")), "Terminating");
        assert_eq!(status_of(pod("Succeeded")), "Completed");
    }
}
