//! `pod_actions`: everything one sync of a pod will do, computed from the pod
//! and its containers before anything is done, as the real kubelet's
//! `computePodActions` does. [`crate::pod`]'s `sync_pod` then carries it out.
//!
//! ```text
//!  pod + containers (one runtime list) ──pod_actions──▶ Terminate { grace }
//!                                                  ├──▶ Finished (keep exited containers for logs)
//!                                                  └──▶ Sync(PodActions: sandbox, removals, starts, waits, probes)
//! ```

use crate::decide::{self, Action};
use crate::runtime::{ContainerInfo, SANDBOX};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// What a sync does with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PodPlan {
    /// The pod is being deleted: stop its containers within `grace_secs`,
    /// remove them, confirm the deletion.
    Terminate {
        grace_secs: i64,
    },
    /// Succeeded or Failed: nothing runs again; exited containers stay for logs.
    Finished,
    Sync(PodActions),
}

/// One spec container to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStart {
    /// Index in `spec.containers` (or `spec.ephemeralContainers`).
    pub index: usize,
    /// An ephemeral container (`kubectl debug`): started once, never restarted.
    pub ephemeral: bool,
    pub hash: String,
    pub restart_count: i32,
    /// Containers to remove once the image is known to be there: the one this
    /// replaces (changed spec, never started) and exited ones older than the
    /// one kept for `logs --previous`.
    pub remove_first: Vec<String>,
}

/// A sync of a live pod (Kubernetes' `podActions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodActions {
    /// No running sandbox: every container goes (a new sandbox is a new
    /// network namespace) and a new sandbox starts.
    pub create_sandbox: bool,
    /// The running sandbox, when it stays.
    pub sandbox_id: Option<String>,
    /// Containers to stop and remove before anything starts.
    pub to_remove: Vec<String>,
    pub to_start: Vec<ContainerStart>,
    /// Containers that wait, by name: (reason, message) for their status.
    pub waiting: BTreeMap<String, (String, String)>,
    /// Spec containers with readiness or liveness probes: probed after the
    /// starts when running.
    pub to_probe: Vec<usize>,
}

/// The `back`-th most recent container (by restart count) of a spec container: 0 = current, 1 = previous.
pub fn latest_of<'a>(
    containers: &'a [ContainerInfo],
    name: &str,
    back: usize,
) -> Option<&'a ContainerInfo> {
    let mut mine: Vec<&ContainerInfo> = containers.iter().filter(|c| c.name == name).collect();
    mine.sort_by_key(|c| std::cmp::Reverse(c.restart_count));
    mine.get(back).copied()
}

/// Decides what the sync of `pod` does, given its containers as the runtime
/// lists them, at `now`.
pub fn pod_actions(
    pod: &Pod,
    containers: &[ContainerInfo],
    now: chrono::DateTime<chrono::Utc>,
) -> PodPlan {
    if let Some(ts) = &pod.metadata.deletion_timestamp {
        // The grace period runs from the deletion request: after a kubelet restart, only what is left of it.
        return PodPlan::Terminate {
            grace_secs: (minik8s_api::meta::utc_of(ts) - now).num_seconds().max(0),
        };
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return PodPlan::Finished;
    }
    let Some(spec) = pod.spec.as_ref() else {
        return PodPlan::Finished;
    };
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let mut actions = PodActions::default();
    let sandbox = containers
        .iter()
        .find(|c| c.name == SANDBOX && c.state.is_running());
    // Without a sandbox, the old containers are as good as gone.
    let live: &[ContainerInfo] = match sandbox {
        Some(s) => {
            actions.sandbox_id = Some(s.id.clone());
            containers
        }
        None => {
            actions.create_sandbox = true;
            actions.to_remove = containers.iter().map(|c| c.id.clone()).collect();
            &[]
        }
    };
    for (index, c) in spec.containers.iter().enumerate() {
        if c.readiness_probe.is_some() || c.liveness_probe.is_some() {
            actions.to_probe.push(index);
        }
        let hash = decide::container_hash(c);
        let latest = latest_of(live, &c.name, 0);
        match decide::container_action(&hash, latest, policy, now) {
            Action::Keep => {}
            Action::BackOff { .. } => {
                let secs = decide::backoff_secs(latest.map_or(0, |l| l.restart_count));
                let m = &pod.metadata;
                let message = format!(
                    "back-off {secs}s restarting failed container={} pod={}_{}({})",
                    c.name,
                    m.name.as_deref().unwrap_or(""),
                    m.namespace.as_deref().unwrap_or("default"),
                    m.uid.as_deref().unwrap_or("")
                );
                actions
                    .waiting
                    .insert(c.name.clone(), ("CrashLoopBackOff".into(), message));
            }
            Action::Start {
                restart_count,
                replace,
            } => {
                let older = live
                    .iter()
                    .filter(|x| x.name == c.name && x.restart_count < restart_count - 1)
                    .map(|x| x.id.clone());
                let remove_first = replace.into_iter().chain(older).collect();
                actions.to_start.push(ContainerStart {
                    index,
                    ephemeral: false,
                    hash,
                    restart_count,
                    remove_first,
                });
            }
        }
    }
    // Ephemeral containers run once: started when nothing of them exists and
    // they never ran (their status says so even after a sandbox was replaced).
    let ran_before = |name: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.ephemeral_container_statuses.as_ref())
            .is_some_and(|l| {
                l.iter().any(|s| {
                    s.name == name
                        && s.state
                            .as_ref()
                            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
                })
            })
    };
    for (index, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        if latest_of(live, &c.name, 0).is_none() && !ran_before(&c.name) {
            actions.to_start.push(ContainerStart {
                index,
                ephemeral: true,
                hash: String::new(),
                restart_count: 0,
                remove_first: Vec::new(),
            });
        }
    }
    PodPlan::Sync(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::State;
    use serde_json::json;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "app", "image": "busybox"},
                                    {"name": "side", "image": "busybox", "readinessProbe": {"exec": {"command": ["true"]}}}]}});
        json_patch(&mut p, extra);
        serde_json::from_value(p).unwrap()
    }

    fn json_patch(target: &mut serde_json::Value, patch: serde_json::Value) {
        if let (Some(t), serde_json::Value::Object(p)) = (target.as_object_mut(), patch) {
            for (k, v) in p {
                match t.get_mut(&k) {
                    Some(existing) if v.is_object() => json_patch(existing, v),
                    _ => {
                        t.insert(k, v);
                    }
                }
            }
        }
    }

    fn container(id: &str, name: &str, hash: &str, restarts: i32, state: State) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            pod_uid: "u1".into(),
            pod_name: "web".into(),
            pod_namespace: "ns".into(),
            name: name.into(),
            hash: hash.into(),
            restart_count: restarts,
            image: "busybox".into(),
            image_id: String::new(),
            state,
            ip: None,
        }
    }

    fn running() -> State {
        State::Running {
            started_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    fn exited_at(finished: chrono::DateTime<chrono::Utc>) -> State {
        State::Exited {
            exit_code: 1,
            started_at: (finished - chrono::Duration::seconds(1)).to_rfc3339(),
            finished_at: finished.to_rfc3339(),
            oom_killed: false,
        }
    }

    fn hashes(p: &Pod) -> Vec<String> {
        let spec = p.spec.as_ref().unwrap();
        spec.containers.iter().map(decide::container_hash).collect()
    }

    fn sync(plan: PodPlan) -> PodActions {
        match plan {
            PodPlan::Sync(a) => a,
            other => panic!("expected a sync, got {other:?}"),
        }
    }

    #[test]
    fn a_new_pod_gets_a_sandbox_and_all_its_containers() {
        let a = sync(pod_actions(&pod(json!({})), &[], chrono::Utc::now()));
        assert!(a.create_sandbox);
        assert_eq!(a.sandbox_id, None);
        let starts: Vec<(usize, i32)> = a
            .to_start
            .iter()
            .map(|s| (s.index, s.restart_count))
            .collect();
        assert_eq!(starts, [(0, 0), (1, 0)]);
        assert_eq!(a.to_probe, [1], "only the container with a probe");
    }

    #[test]
    fn a_dead_sandbox_takes_every_container_with_it() {
        let p = pod(json!({}));
        let h = hashes(&p);
        let now = chrono::Utc::now();
        let cs = [
            container("s", SANDBOX, "", 0, exited_at(now)),
            container("a", "app", &h[0], 3, running()),
        ];
        let a = sync(pod_actions(&p, &cs, now));
        assert!(a.create_sandbox);
        assert_eq!(a.to_remove, ["s", "a"]);
        assert_eq!(a.to_start.len(), 2);
    }

    #[test]
    fn running_containers_stay_and_changed_or_crashed_ones_follow_the_policy() {
        let p = pod(json!({}));
        let h = hashes(&p);
        let now = chrono::Utc::now();
        let cs = [
            container("s", SANDBOX, "", 0, running()),
            container(
                "a0",
                "app",
                &h[0],
                0,
                exited_at(now - chrono::Duration::seconds(60)),
            ),
            container(
                "a1",
                "app",
                &h[0],
                1,
                exited_at(now - chrono::Duration::seconds(1)),
            ),
            container("x", "side", "an older spec", 0, running()),
        ];
        let a = sync(pod_actions(&p, &cs, now));
        assert!(!a.create_sandbox);
        assert_eq!(a.sandbox_id.as_deref(), Some("s"));
        assert!(a.to_remove.is_empty());
        // app: restarted once, exited 1 s ago: backs off 10 s.
        let (reason, message) = &a.waiting["app"];
        assert_eq!(reason, "CrashLoopBackOff");
        assert_eq!(
            message,
            "back-off 10s restarting failed container=app pod=web_ns(u1)"
        );
        // side: its spec changed: replaced.
        assert_eq!(
            a.to_start,
            [ContainerStart {
                index: 1,
                ephemeral: false,
                hash: h[1].clone(),
                restart_count: 1,
                remove_first: vec!["x".into()]
            }]
        );
    }

    #[test]
    fn a_restart_drops_exited_containers_older_than_the_previous_one() {
        let p = pod(json!({"spec": {"restartPolicy": "Always"}}));
        let h = hashes(&p);
        let now = chrono::Utc::now();
        let long_ago = now - chrono::Duration::seconds(3600);
        let cs = [
            container("s", SANDBOX, "", 0, running()),
            container("a1", "app", &h[0], 1, exited_at(long_ago)),
            container("a2", "app", &h[0], 2, exited_at(long_ago)),
            container("b", "side", &h[1], 0, running()),
        ];
        let a = sync(pod_actions(&p, &cs, now));
        assert_eq!(a.to_start.len(), 1);
        assert_eq!(a.to_start[0].restart_count, 3);
        assert_eq!(
            a.to_start[0].remove_first,
            ["a1"],
            "a2 stays for logs --previous"
        );
    }

    #[test]
    fn an_ephemeral_container_starts_once_and_is_never_restarted() {
        let debug = json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox", "targetContainerName": "app"}]}});
        let p = pod(debug.clone());
        let h = hashes(&p);
        let now = chrono::Utc::now();
        let base = [
            container("s", SANDBOX, "", 0, running()),
            container("a", "app", &h[0], 0, running()),
            container("b", "side", &h[1], 0, running()),
        ];
        let a = sync(pod_actions(&p, &base, now));
        assert_eq!(a.to_start.len(), 1);
        assert!(a.to_start[0].ephemeral && a.to_start[0].index == 0);

        // Exited: it stays exited.
        let mut exited = base.to_vec();
        exited.push(container("d", "debugger", "", 0, exited_at(now)));
        assert!(sync(pod_actions(&p, &exited, now)).to_start.is_empty());
        // Its container gone with an old sandbox: its status still says it ran.
        let mut ran = debug;
        ran["status"] = json!({"ephemeralContainerStatuses": [{"name": "debugger", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                                                              "state": {"terminated": {"exitCode": 0}}}]});
        let p = pod(ran);
        assert!(sync(pod_actions(&p, &base, now)).to_start.is_empty());
    }

    #[test]
    fn deleting_and_finished_pods() {
        let now = chrono::Utc::now();
        let deadline = (now + chrono::Duration::seconds(30)).to_rfc3339();
        let deleting = pod(json!({"metadata": {"deletionTimestamp": deadline}}));
        assert_eq!(
            pod_actions(&deleting, &[], now),
            PodPlan::Terminate { grace_secs: 30 }
        );
        let late = (now - chrono::Duration::seconds(5)).to_rfc3339();
        let overdue = pod(json!({"metadata": {"deletionTimestamp": late}}));
        assert_eq!(
            pod_actions(&overdue, &[], now),
            PodPlan::Terminate { grace_secs: 0 }
        );
        let done = pod(json!({"status": {"phase": "Succeeded"}}));
        assert_eq!(pod_actions(&done, &[], now), PodPlan::Finished);
    }
}
