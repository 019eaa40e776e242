//! `pod_actions`: everything one sync of a pod will do, computed from the pod
//! and its containers before anything is done, as the real kubelet's
//! `computePodActions` does. [`crate::pod`]'s `sync_pod` then carries it out.
//!
//! ```text
//!  pod + containers (one runtime list) ──pod_actions──▶ Terminate { grace }
//!                                                  ├──▶ Finished (keep exited containers for logs)
//!                                                  └──▶ Sync(PodActions: sandbox, removals, starts, waits, probes, kill)
//! ```
//!
//! A live pod moves through three stages, each decided from what the
//! runtime lists (so a restarted kubelet picks up where it was):
//!
//! ```text
//!  init[0] ─exit 0─▶ init[1] ─exit 0─▶ ... ─▶ apps (all at once)
//!     │ sidecar (restartPolicy: Always): counts as done once started
//!     │ (its startupProbe passed), and is kept running beside the apps
//!     └ exit ≠ 0: restarted with back-off (Always, OnFailure); the pod fails (Never)
//!  apps all exited for good (Never, OnFailure) ─▶ kill the pod: sidecars stop
//! ```

use crate::decide::{self, Action};
use crate::runtime::{ContainerInfo, State, SANDBOX};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use std::collections::{BTreeMap, HashSet};

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

/// Which list of the pod spec a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    Init,
    App,
    /// `kubectl debug`: started once, never restarted.
    Ephemeral,
}

/// One spec container to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStart {
    pub which: Which,
    /// Index in its list (`spec.initContainers`, `spec.containers` or `spec.ephemeralContainers`).
    pub index: usize,
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
    /// In start order: init containers (in spec order), then apps, then
    /// ephemeral containers.
    pub to_start: Vec<ContainerStart>,
    /// Containers that wait, by name: (reason, message) for their status.
    pub waiting: BTreeMap<String, (String, String)>,
    /// Containers with probes (apps and sidecars): probed after the starts
    /// when running.
    pub to_probe: Vec<(Which, usize)>,
    /// Nothing of the pod will run again (its apps are done for good, or an
    /// init container failed under `restartPolicy: Never`): stop what still
    /// runs (sidecars, after the apps), so the pod reaches its final phase.
    pub kill_pod: bool,
    /// The pod ran longer than its `activeDeadlineSeconds`: killed, and
    /// Failed with the reason `DeadlineExceeded`.
    pub deadline_exceeded: bool,
}

/// Whether the pod has been active longer than its `activeDeadlineSeconds`
/// (counted from its `status.startTime`, as the kubelet's deadline handler does).
pub fn deadline_exceeded(pod: &Pod, now: chrono::DateTime<chrono::Utc>) -> bool {
    let deadline = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let started = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
    match (deadline, started) {
        (Some(secs), Some(t)) => (now - minik8s_api::meta::utc_of(t)).num_seconds() >= secs,
        _ => false,
    }
}

pub use crate::decide::is_sidecar;

/// The spec container a (list, index) names; an ephemeral container has the
/// fields of a container (and a few more), so it is read as one.
pub fn container_at(spec: &PodSpec, which: Which, index: usize) -> Option<Container> {
    match which {
        Which::App => spec.containers.get(index).cloned(),
        Which::Init => spec.init_containers.as_ref()?.get(index).cloned(),
        Which::Ephemeral => {
            let e = spec.ephemeral_containers.as_ref()?.get(index)?;
            serde_json::from_value(serde_json::to_value(e).ok()?).ok()
        }
    }
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

/// What the sync sees: the pod's containers as the runtime lists them, and
/// which of them have passed their startup probe.
pub struct Observed<'a> {
    pub containers: &'a [ContainerInfo],
    /// Ids of running containers whose startup probe succeeded.
    pub started: &'a HashSet<String>,
    /// This kubelet reported the pod Succeeded or Failed already (the pod
    /// it was given may not show it yet).
    pub finished: bool,
    /// Ids of running containers to restart for a resize (their
    /// `resizePolicy` says RestartContainer).
    pub resize_restarts: &'a HashSet<String>,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// Decides what the sync of `pod` does.
/// Long as the kubelet's computePodActions it mirrors: one pass over the
/// init, sidecar and app containers in Kubernetes' order, each decision
/// beside the ones it depends on.
pub fn pod_actions(pod: &Pod, seen: &Observed) -> PodPlan {
    let now = seen.now;
    if let Some(ts) = &pod.metadata.deletion_timestamp {
        // The grace period runs from the deletion request: after a kubelet restart, only what is left of it.
        return PodPlan::Terminate {
            grace_secs: (minik8s_api::meta::utc_of(ts) - now).num_seconds().max(0),
        };
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if seen.finished || matches!(phase, Some("Succeeded" | "Failed")) {
        return PodPlan::Finished;
    }
    let Some(spec) = pod.spec.as_ref() else {
        return PodPlan::Finished;
    };
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    let mut actions = PodActions::default();
    if deadline_exceeded(pod, now) {
        actions.kill_pod = true;
        actions.deadline_exceeded = true;
        actions.sandbox_id = seen
            .containers
            .iter()
            .find(|c| c.name == SANDBOX && c.state.is_running())
            .map(|c| c.id.clone());
        return PodPlan::Sync(actions);
    }
    for (index, c) in inits.iter().enumerate() {
        if is_sidecar(c) && has_probe(c) {
            actions.to_probe.push((Which::Init, index));
        }
    }
    for (index, c) in spec.containers.iter().enumerate() {
        if has_probe(c) {
            actions.to_probe.push((Which::App, index));
        }
    }
    let sandbox = seen
        .containers
        .iter()
        .find(|c| c.name == SANDBOX && c.state.is_running());
    let live: &[ContainerInfo] = match sandbox {
        Some(s) => {
            actions.sandbox_id = Some(s.id.clone());
            seen.containers
        }
        None => {
            // Without a sandbox, the old containers are as good as gone: all
            // go, and a new sandbox starts. A pod whose apps ran before is
            // initialised already: its sidecars and apps start at once, its
            // init containers do not run again (Kubernetes' rule).
            actions.create_sandbox = true;
            actions.to_remove = seen.containers.iter().map(|c| c.id.clone()).collect();
            let ran = spec
                .containers
                .iter()
                .any(|c| latest_of(seen.containers, &c.name, 0).is_some());
            if !ran && !inits.is_empty() {
                start_or_back_off(pod, Which::Init, 0, &inits[0], None, &[], now, &mut actions);
                return PodPlan::Sync(actions);
            }
            for (index, c) in inits.iter().enumerate().filter(|(_, c)| is_sidecar(c)) {
                start_or_back_off(pod, Which::Init, index, c, None, &[], now, &mut actions);
            }
            for (index, c) in spec.containers.iter().enumerate() {
                start_or_back_off(pod, Which::App, index, c, None, &[], now, &mut actions);
            }
            return PodPlan::Sync(actions);
        }
    };
    let initialized = init_actions(pod, spec, live, seen, &mut actions);
    if actions.kill_pod || !initialized {
        return PodPlan::Sync(actions);
    }
    let mut keep_running = 0;
    let mut apps_to_start = 0;
    for (index, c) in spec.containers.iter().enumerate() {
        let hash = decide::container_hash(c);
        let latest = latest_of(live, &c.name, 0);
        if let Some(cur) = latest.filter(|l| seen.resize_restarts.contains(&l.id)) {
            keep_running += 1;
            restart_for_resize(Which::App, index, hash, cur, live, &mut actions);
            continue;
        }
        match decide::container_action(&hash, latest, policy, now) {
            Action::Keep => {
                if latest.is_some_and(|l| l.state.is_running()) {
                    keep_running += 1;
                }
            }
            Action::BackOff { .. } | Action::Start { .. } => {
                apps_to_start += 1;
                start_or_back_off(pod, Which::App, index, c, latest, live, now, &mut actions);
            }
        }
    }
    if keep_running == 0 && apps_to_start == 0 {
        // The apps are done for good: sidecars must not keep the pod alive.
        actions.kill_pod = true;
        actions.to_start.retain(|s| s.which != Which::Init);
        actions.waiting.clear();
        return PodPlan::Sync(actions);
    }
    ephemeral_actions(pod, spec, live, &mut actions);
    PodPlan::Sync(actions)
}

fn has_probe(c: &Container) -> bool {
    c.readiness_probe.is_some() || c.liveness_probe.is_some() || c.startup_probe.is_some()
}

/// A container's start, or its crash-loop back-off: a first start, the
/// restart of an exited one (after its back-off), or the replacement of one
/// that never started or whose spec changed.
#[allow(clippy::too_many_arguments)]
fn start_or_back_off(
    pod: &Pod,
    which: Which,
    index: usize,
    c: &Container,
    latest: Option<&ContainerInfo>,
    live: &[ContainerInfo],
    now: chrono::DateTime<chrono::Utc>,
    actions: &mut PodActions,
) {
    let hash = decide::container_hash(c);
    // The caller decided it (re)starts: under Always, an exited one restarts.
    match decide::container_action(&hash, latest, "Always", now) {
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
                which,
                index,
                hash,
                restart_count,
                remove_first,
            });
        }
    }
}

/// A running container restarted with its new resources (its `resizePolicy`
/// says RestartContainer): replaced at once, whatever the restart policy,
/// its restart count one up.
fn restart_for_resize(
    which: Which,
    index: usize,
    hash: String,
    cur: &ContainerInfo,
    live: &[ContainerInfo],
    actions: &mut PodActions,
) {
    let older = live
        .iter()
        .filter(|x| x.name == cur.name && x.restart_count < cur.restart_count)
        .map(|x| x.id.clone());
    actions.to_start.push(ContainerStart {
        which,
        index,
        hash,
        restart_count: cur.restart_count + 1,
        remove_first: std::iter::once(cur.id.clone()).chain(older).collect(),
    });
}

/// The init containers' steps (Kubernetes' `computeInitContainerActions`):
/// at most one regular init container runs at a time, each to success
/// before the next; sidecars start in order and stay. Returns whether the
/// pod is initialised (its apps may run).
///
/// Walked from the last init container back, as the real kubelet does: the
/// latest one that ran says where the pod is, even if earlier ones were
/// removed since.
fn init_actions(
    pod: &Pod,
    spec: &PodSpec,
    live: &[ContainerInfo],
    seen: &Observed,
    actions: &mut PodActions,
) -> bool {
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    if inits.is_empty() {
        return true;
    }
    // An app that is running (or created) means initialisation ran before,
    // even if its init containers are gone now: they do not run again.
    let mut initialized = spec.containers.iter().any(|c| {
        matches!(
            latest_of(live, &c.name, 0).map(|x| &x.state),
            Some(State::Running { .. } | State::Created)
        )
    });
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let last = inits.len() - 1;
    let mut previously = initialized;
    // (index, latest) of the init containers to (re)start, last first.
    let mut starts: Vec<(usize, Option<&ContainerInfo>)> = Vec::new();
    for (i, c) in inits.iter().enumerate().rev() {
        let sidecar = is_sidecar(c);
        let Some(cur) = latest_of(live, &c.name, 0) else {
            // A sidecar gone after initialisation: started again.
            if previously && sidecar {
                starts.push((i, None));
            }
            continue;
        };
        if previously && !sidecar {
            // After initialisation only sidecars are kept running.
            continue;
        }
        match &cur.state {
            // Created but never started (a crash between the two): again.
            State::Created => starts.push((i, Some(cur))),
            State::Running { .. } if sidecar => {
                let waits_for_startup =
                    c.startup_probe.is_some() && !seen.started.contains(&cur.id);
                if !waits_for_startup {
                    if i == last {
                        initialized = true;
                    } else if !previously {
                        // Started for the first time: the next one may start.
                        starts.push((i + 1, None));
                    }
                }
                if seen.resize_restarts.contains(&cur.id) {
                    let hash = decide::container_hash(c);
                    restart_for_resize(Which::Init, i, hash, cur, live, actions);
                } else if cur.hash != decide::container_hash(c) {
                    starts.push((i, Some(cur)));
                }
            }
            // A regular init container running: wait for it to finish.
            State::Running { .. } => {}
            State::Exited { .. } if sidecar => starts.push((i, Some(cur))),
            State::Exited { exit_code, .. } => {
                if *exit_code != 0 {
                    if policy == "Never" {
                        actions.kill_pod = true;
                        return false;
                    }
                    starts.push((i, Some(cur)));
                } else if i == last {
                    initialized = true;
                } else {
                    starts.push((i + 1, None));
                }
            }
        }
        previously = true;
    }
    if !previously {
        starts.push((0, None));
    }
    starts.reverse();
    for (i, latest) in starts {
        start_or_back_off(
            pod,
            Which::Init,
            i,
            &inits[i],
            latest,
            live,
            seen.now,
            actions,
        );
    }
    initialized
}

/// Ephemeral containers run once: started when nothing of them exists and
/// they never ran (their status says so even after a sandbox was replaced).
fn ephemeral_actions(pod: &Pod, spec: &PodSpec, live: &[ContainerInfo], actions: &mut PodActions) {
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
                which: Which::Ephemeral,
                index,
                hash: String::new(),
                restart_count: 0,
                remove_first: Vec::new(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            runtime_handler: None,
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

    /// `pod_actions` with no startup probe passed yet.
    fn plan(p: &Pod, cs: &[ContainerInfo], now: chrono::DateTime<chrono::Utc>) -> PodPlan {
        let started = HashSet::new();
        pod_actions(
            p,
            &Observed {
                containers: cs,
                started: &started,
                finished: false,
                resize_restarts: &HashSet::new(),
                now,
            },
        )
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
        let a = sync(plan(&pod(json!({})), &[], chrono::Utc::now()));
        assert!(a.create_sandbox);
        assert_eq!(a.sandbox_id, None);
        let starts: Vec<(usize, i32)> = a
            .to_start
            .iter()
            .map(|s| (s.index, s.restart_count))
            .collect();
        assert_eq!(starts, [(0, 0), (1, 0)]);
        assert_eq!(
            a.to_probe,
            [(Which::App, 1)],
            "only the container with a probe"
        );
    }

    #[test]
    fn a_resize_that_needs_a_restart_replaces_the_container_even_under_never() {
        let p = pod(json!({"restartPolicy": "Never"}));
        let h = hashes(&p);
        let now = chrono::Utc::now();
        let cs = [
            container("s", SANDBOX, "", 0, running()),
            container("a0", "app", &h[0], 2, running()),
            container("a1", "side", &h[1], 0, running()),
        ];
        let restarts = HashSet::from(["a0".to_string()]);
        let seen = Observed {
            containers: &cs,
            started: &HashSet::new(),
            finished: false,
            resize_restarts: &restarts,
            now,
        };
        let a = sync(pod_actions(&p, &seen));
        assert_eq!(a.to_start.len(), 1, "only the resized one: {a:?}");
        let restarted = &a.to_start[0];
        assert_eq!((restarted.index, restarted.restart_count), (0, 3));
        assert_eq!(restarted.remove_first, ["a0"]);
        assert!(!a.kill_pod);
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
        let a = sync(plan(&p, &cs, now));
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
        let a = sync(plan(&p, &cs, now));
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
                which: Which::App,
                index: 1,
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
        let a = sync(plan(&p, &cs, now));
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
        let a = sync(plan(&p, &base, now));
        assert_eq!(a.to_start.len(), 1);
        assert!(a.to_start[0].which == Which::Ephemeral && a.to_start[0].index == 0);

        // Exited: it stays exited.
        let mut exited = base.to_vec();
        exited.push(container("d", "debugger", "", 0, exited_at(now)));
        assert!(sync(plan(&p, &exited, now)).to_start.is_empty());
        // Its container gone with an old sandbox: its status still says it ran.
        let mut ran = debug;
        ran["status"] = json!({"ephemeralContainerStatuses": [{"name": "debugger", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                                                              "state": {"terminated": {"exitCode": 0}}}]});
        let p = pod(ran);
        assert!(sync(plan(&p, &base, now)).to_start.is_empty());
    }

    #[test]
    fn deleting_and_finished_pods() {
        let now = chrono::Utc::now();
        let deadline = (now + chrono::Duration::seconds(30)).to_rfc3339();
        let deleting = pod(json!({"metadata": {"deletionTimestamp": deadline}}));
        assert_eq!(
            plan(&deleting, &[], now),
            PodPlan::Terminate { grace_secs: 30 }
        );
        let late = (now - chrono::Duration::seconds(5)).to_rfc3339();
        let overdue = pod(json!({"metadata": {"deletionTimestamp": late}}));
        assert_eq!(
            plan(&overdue, &[], now),
            PodPlan::Terminate { grace_secs: 0 }
        );
        let done = pod(json!({"status": {"phase": "Succeeded"}}));
        assert_eq!(plan(&done, &[], now), PodPlan::Finished);
    }

    /// A pod with init containers `init` (each `[name, restartPolicy]`) and
    /// one app, under `policy`.
    fn init_pod(policy: &str, init: &[(&str, Option<&str>)], startup_probe: bool) -> Pod {
        let inits: Vec<serde_json::Value> = init
            .iter()
            .map(|(name, restart)| {
                let mut c = json!({"name": name, "image": "busybox"});
                if let Some(r) = restart {
                    c["restartPolicy"] = json!(r);
                    if startup_probe {
                        c["startupProbe"] = json!({"exec": {"command": ["true"]}});
                    }
                }
                c
            })
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"restartPolicy": policy, "initContainers": inits,
                     "containers": [{"name": "app", "image": "busybox"}]}}),
        )
        .unwrap()
    }

    fn hash_of(p: &Pod, name: &str) -> String {
        let spec = p.spec.as_ref().unwrap();
        let c = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .find(|c| c.name == name)
            .unwrap();
        decide::container_hash(c)
    }

    fn exited_with(code: i64, ago: i64, now: chrono::DateTime<chrono::Utc>) -> State {
        let finished = now - chrono::Duration::seconds(ago);
        State::Exited {
            exit_code: code,
            started_at: (finished - chrono::Duration::seconds(1)).to_rfc3339(),
            finished_at: finished.to_rfc3339(),
            oom_killed: false,
        }
    }

    /// The (list, index, restart count) of each start, in order.
    fn starts(a: &PodActions) -> Vec<(Which, usize, i32)> {
        a.to_start
            .iter()
            .map(|s| (s.which, s.index, s.restart_count))
            .collect()
    }

    #[test]
    fn init_containers_run_one_at_a_time_before_the_apps() {
        let now = chrono::Utc::now();
        let p = init_pod("Always", &[("init1", None), ("init2", None)], false);
        let (h1, h2) = (hash_of(&p, "init1"), hash_of(&p, "init2"));
        // A new pod: its sandbox and the first init container, nothing else.
        let a = sync(plan(&p, &[], now));
        assert!(a.create_sandbox);
        assert_eq!(starts(&a), [(Which::Init, 0, 0)]);
        let sandbox = container("s", SANDBOX, "", 0, running());
        // init1 runs: nothing starts.
        let cs = [sandbox.clone(), container("i1", "init1", &h1, 0, running())];
        assert_eq!(starts(&sync(plan(&p, &cs, now))), []);
        // init1 succeeded: init2 starts.
        let cs = [
            sandbox.clone(),
            container("i1", "init1", &h1, 0, exited_with(0, 1, now)),
        ];
        assert_eq!(starts(&sync(plan(&p, &cs, now))), [(Which::Init, 1, 0)]);
        // Both succeeded: the app starts, and no init container runs again.
        let mut cs = vec![
            sandbox.clone(),
            container("i1", "init1", &h1, 0, exited_with(0, 9, now)),
            container("i2", "init2", &h2, 0, exited_with(0, 1, now)),
        ];
        assert_eq!(starts(&sync(plan(&p, &cs, now))), [(Which::App, 0, 0)]);
        // The app runs; the init containers are removed (or never seen by a
        // restarted kubelet): still nothing reruns.
        cs.push(container("a", "app", &hash_of(&p, "app"), 0, running()));
        cs.retain(|c| !c.name.starts_with("init"));
        let a = sync(plan(&p, &cs, now));
        assert!(a.to_start.is_empty() && !a.kill_pod);
    }

    #[test]
    fn a_failing_init_container_follows_the_restart_policy() {
        let now = chrono::Utc::now();
        for policy in ["Always", "OnFailure", "Never"] {
            let p = init_pod(policy, &[("init1", None), ("init2", None)], false);
            let h1 = hash_of(&p, "init1");
            let sandbox = container("s", SANDBOX, "", 0, running());
            let first = [
                sandbox.clone(),
                container("i1", "init1", &h1, 0, exited_with(1, 0, now)),
            ];
            let a = sync(plan(&p, &first, now));
            if policy == "Never" {
                // The pod fails: nothing starts, what runs is stopped.
                assert!(a.kill_pod && a.to_start.is_empty(), "{policy}");
                continue;
            }
            assert_eq!(starts(&a), [(Which::Init, 0, 1)], "{policy}");
            assert!(!a.kill_pod);
            // Failed again 3 s ago after one restart: back-off, the apps wait.
            let again = [
                sandbox.clone(),
                container("i1", "init1", &h1, 1, exited_with(1, 3, now)),
            ];
            let a = sync(plan(&p, &again, now));
            assert!(a.to_start.is_empty(), "{policy}");
            assert_eq!(a.waiting["init1"].0, "CrashLoopBackOff");
        }
    }

    #[test]
    fn sidecars_start_in_order_and_stay() {
        let now = chrono::Utc::now();
        let side = ("side", Some("Always"));
        let p = init_pod("Never", &[side, ("init2", None)], false);
        let (hs, h2, ha) = (
            hash_of(&p, "side"),
            hash_of(&p, "init2"),
            hash_of(&p, "app"),
        );
        let sandbox = container("s", SANDBOX, "", 0, running());
        // The sidecar started: the next init container may start.
        let cs = [sandbox.clone(), container("sc", "side", &hs, 0, running())];
        assert_eq!(starts(&sync(plan(&p, &cs, now))), [(Which::Init, 1, 0)]);
        // With a startup probe, only once it passed.
        let probed = init_pod("Never", &[side, ("init2", None)], true);
        let hp = hash_of(&probed, "side");
        let cs = [sandbox.clone(), container("sc", "side", &hp, 0, running())];
        assert_eq!(starts(&sync(plan(&probed, &cs, now))), []);
        let started = HashSet::from(["sc".to_string()]);
        let seen = Observed {
            containers: &cs,
            started: &started,
            finished: false,
            resize_restarts: &HashSet::new(),
            now,
        };
        assert_eq!(
            starts(&sync(pod_actions(&probed, &seen))),
            [(Which::Init, 1, 0)]
        );
        // Initialised and the app running: an exited sidecar restarts even
        // under restartPolicy Never; the done init container does not.
        let cs = [
            sandbox.clone(),
            container("sc", "side", &hs, 0, exited_with(1, 0, now)),
            container("i2", "init2", &h2, 0, exited_with(0, 5, now)),
            container("a", "app", &ha, 0, running()),
        ];
        assert_eq!(starts(&sync(plan(&p, &cs, now))), [(Which::Init, 0, 1)]);
        // The app is done for good: the pod is killed, the sidecar is not restarted.
        let cs = [
            sandbox.clone(),
            container("sc", "side", &hs, 0, running()),
            container("i2", "init2", &h2, 0, exited_with(0, 5, now)),
            container("a", "app", &ha, 0, exited_with(0, 0, now)),
        ];
        let a = sync(plan(&p, &cs, now));
        assert!(a.kill_pod && a.to_start.is_empty());
        // A new sandbox for a pod that ran: sidecar and app, no init container.
        let cs = [
            container("s", SANDBOX, "", 0, exited_with(0, 0, now)),
            container("a", "app", &ha, 0, exited_with(137, 0, now)),
        ];
        let a = sync(plan(&p, &cs, now));
        assert!(a.create_sandbox);
        assert_eq!(starts(&a), [(Which::Init, 0, 0), (Which::App, 0, 0)]);
    }

    #[test]
    fn a_pod_past_its_active_deadline_is_killed() {
        let now = chrono::Utc::now();
        let started = (now - chrono::Duration::seconds(30)).to_rfc3339();
        let p =
            pod(json!({"spec": {"activeDeadlineSeconds": 20}, "status": {"startTime": started}}));
        let cs = [container("s", SANDBOX, "", 0, running())];
        let a = sync(plan(&p, &cs, now));
        assert!(a.kill_pod && a.deadline_exceeded && a.to_start.is_empty());
        assert!(!a.create_sandbox, "nothing is made for a pod that is over");
        let p =
            pod(json!({"spec": {"activeDeadlineSeconds": 60}, "status": {"startTime": started}}));
        assert!(!sync(plan(&p, &cs, now)).deadline_exceeded);
    }

    #[test]
    fn sidecars_with_probes_are_probed() {
        let p = init_pod("Always", &[("side", Some("Always"))], true);
        let a = sync(plan(&p, &[], chrono::Utc::now()));
        assert_eq!(a.to_probe, [(Which::Init, 0)]);
    }
}
