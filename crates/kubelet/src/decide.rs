//! The kubelet's decisions as pure functions of the pod spec and what Docker
//! reports: what to do with each container (restart policy, backoff, spec
//! changes), and the pod status that results. No I/O: unit-tested below.

use crate::runtime::{ContainerInfo, State};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Kubernetes' crash-loop backoff: 10 s doubling to 300 s.
pub const BACKOFF_INITIAL_SECS: i64 = 10;
pub const BACKOFF_MAX_SECS: i64 = 300;
/// A container that ran this long before exiting starts its backoff afresh.
pub const BACKOFF_RESET_SECS: i64 = 600;

/// An init container with `restartPolicy: Always`: a sidecar, kept running
/// beside the apps.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// A stable hash of a container's spec: a change means the container is
/// replaced. Its resources are left out, as Kubernetes leaves them out: they
/// change in place (see [`crate::resize`]).
pub fn container_hash(c: &Container) -> String {
    use std::hash::{Hash, Hasher};
    let mut c = c.clone();
    c.resources = None;
    let text = serde_json::to_string(&c).unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A runtime error saying a container could not join its sandbox's
/// namespaces (Docker: "cannot join IPC of a non running container",
/// "can't join IPC of container ...: container ... is not running").
pub fn is_sandbox_join_error(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    (e.contains("join") && (e.contains("ipc") || e.contains("network") || e.contains("namespace")))
        || e.contains("non running container")
}

/// What to do with one spec container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do (running, or finished for good).
    Keep,
    /// Start it (first time, restart after backoff, or replace a changed one).
    Start {
        restart_count: i32,
        replace: Option<String>,
    },
    /// It exited and will be restarted once `wait_secs` have passed.
    BackOff { wait_secs: i64 },
}

fn parse_time(t: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.with_timezone(&chrono::Utc))
}

/// The restart delay after the `restart_count`-th restart: 0, 10, 20, 40 ... 300 s.
pub fn backoff_secs(restart_count: i32) -> i64 {
    if restart_count <= 0 {
        return 0;
    }
    let shift = (restart_count - 1).min(10) as u32;
    (BACKOFF_INITIAL_SECS << shift).min(BACKOFF_MAX_SECS)
}

/// Decides what to do with a spec container (whose spec hashes to `hash`) given its latest Docker container.
pub fn container_action(
    hash: &str,
    current: Option<&ContainerInfo>,
    restart_policy: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Action {
    let Some(cur) = current else {
        return Action::Start {
            restart_count: 0,
            replace: None,
        };
    };
    if cur.hash != hash {
        return Action::Start {
            restart_count: cur.restart_count + 1,
            replace: Some(cur.id.clone()),
        };
    }
    match &cur.state {
        State::Running { .. } => Action::Keep,
        // Created but never started (a crash between create and start): start it again.
        State::Created => Action::Start {
            restart_count: cur.restart_count,
            replace: Some(cur.id.clone()),
        },
        State::Exited {
            exit_code,
            started_at,
            finished_at,
            ..
        } => {
            let restart = match restart_policy {
                "Never" => false,
                "OnFailure" => *exit_code != 0,
                _ => true,
            };
            if !restart {
                return Action::Keep;
            }
            let (started, finished) = (parse_time(started_at), parse_time(finished_at));
            let ran_long = matches!((started, finished), (Some(s), Some(f)) if (f - s).num_seconds() >= BACKOFF_RESET_SECS);
            // After the n-th restart the next one waits backoff_secs(n): 0, 10, 20, ... 300 s.
            let delay = if ran_long {
                0
            } else {
                backoff_secs(cur.restart_count)
            };
            let elapsed = finished
                .map(|f| (now - f).num_seconds())
                .unwrap_or(i64::MAX);
            if elapsed >= delay {
                Action::Start {
                    restart_count: cur.restart_count + 1,
                    replace: None,
                }
            } else {
                Action::BackOff {
                    wait_secs: delay - elapsed,
                }
            }
        }
    }
}

/// What the kubelet knows of a container besides the runtime's view: its
/// probes' verdicts and its termination messages.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// The readiness probe's verdict (true without a readiness probe).
    pub ready: bool,
    /// The startup probe's verdict (true without a startup probe).
    pub started: bool,
    /// Termination messages by container id (`terminationMessagePath`).
    pub messages: &'a HashMap<String, String>,
    /// The waiting reason of a container not created yet: `ContainerCreating`,
    /// or `PodInitializing` in a pod with init containers.
    pub not_created: &'a str,
}

/// The state of one container as `containerStatuses[]` (or
/// `initContainerStatuses[]`) shows it.
pub fn container_status(
    scheme: &str,
    spec: &Container,
    current: Option<&ContainerInfo>,
    previous: Option<&ContainerInfo>,
    waiting: Option<(&str, &str)>,
    known: Known,
) -> Value {
    let message_of = |c: &ContainerInfo| known.messages.get(&c.id).map(String::as_str);
    let state = match (current.map(|c| &c.state), waiting) {
        (_, Some((reason, message))) => json!({"waiting": {"reason": reason, "message": message}}),
        (Some(State::Running { started_at }), _) => {
            json!({"running": {"startedAt": trim_time(started_at)}})
        }
        (Some(s @ State::Exited { .. }), _) => {
            let c = current.expect("an exited state is a current container's");
            terminated(s, scheme, &c.id, message_of(c))
        }
        _ => json!({"waiting": {"reason": known.not_created}}),
    };
    let running = current.is_some_and(|c| c.state.is_running());
    let started = running && known.started;
    let mut st = json!({
        "name": spec.name,
        "image": spec.image.clone().unwrap_or_default(),
        "imageID": current.map(|c| c.image_id.clone()).unwrap_or_default(),
        "ready": started && waiting.is_none() && known.ready,
        "started": started,
        "restartCount": current.map(|c| c.restart_count).unwrap_or(0),
        "state": state,
        "lastState": previous.map(|p| terminated(&p.state, scheme, &p.id, message_of(p))).unwrap_or(json!({})),
    });
    if let Some(c) = current {
        st["containerID"] = json!(format!("{scheme}://{}", c.id));
    }
    st
}

fn trim_time(t: &str) -> String {
    parse_time(t)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

fn terminated(state: &State, scheme: &str, id: &str, message: Option<&str>) -> Value {
    match state {
        State::Exited {
            exit_code,
            started_at,
            finished_at,
            oom_killed,
        } => {
            let reason = if *oom_killed {
                "OOMKilled"
            } else if *exit_code == 0 {
                "Completed"
            } else {
                "Error"
            };
            let mut t = json!({"exitCode": exit_code, "reason": reason, "startedAt": trim_time(started_at),
                               "finishedAt": trim_time(finished_at), "containerID": format!("{scheme}://{id}")});
            if let Some(m) = message.filter(|m| !m.is_empty()) {
                t["message"] = json!(m);
            }
            json!({ "terminated": t })
        }
        _ => json!({}),
    }
}

/// The pod phase from its container statuses, as the real kubelet's
/// `getPhase` computes it. `terminal`: the pod is being stopped for good
/// (deleted, or killed once its apps were done), so nothing restarts.
pub fn pod_phase(
    spec: &PodSpec,
    init_statuses: &[Value],
    statuses: &[Value],
    terminal: bool,
) -> &'static str {
    let find = |list: &'_ [Value], name: &str| list.iter().find(|s| s["name"] == name).cloned();
    let has = |s: &Value, state: &str| s["state"].get(state).is_some();
    let last_failed = |s: &Value| s.pointer("/lastState/terminated").is_some();
    let exit_code = |s: &Value, at: &str| s.pointer(at).and_then(Value::as_i64).unwrap_or(0);
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    let (mut pending_init, mut pending_sidecars, mut failed_init) = (0, 0, 0);
    for c in inits.iter().filter(|c| !is_sidecar(c)) {
        match find(init_statuses, &c.name) {
            Some(s) if has(&s, "terminated") => {
                if exit_code(&s, "/state/terminated/exitCode") != 0 {
                    failed_init += 1;
                }
            }
            Some(s) if has(&s, "waiting") && last_failed(&s) => {
                if exit_code(&s, "/lastState/terminated/exitCode") != 0 {
                    failed_init += 1;
                }
            }
            _ => pending_init += 1,
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in inits.iter().filter(|c| is_sidecar(c)) {
        match find(init_statuses, &c.name) {
            None => unknown += 1,
            Some(s) if has(&s, "running") => {
                if s["started"] != true {
                    pending_sidecars += 1;
                }
                running += 1;
            }
            // A stopped sidecar counts for nothing.
            Some(s) if has(&s, "terminated") || last_failed(&s) => {}
            Some(s) if has(&s, "waiting") => {
                pending_sidecars += 1;
                waiting += 1;
            }
            Some(_) => {
                pending_sidecars += 1;
                unknown += 1;
            }
        }
    }
    for c in &spec.containers {
        match find(statuses, &c.name) {
            None => unknown += 1,
            Some(s) if has(&s, "running") => running += 1,
            Some(s) if has(&s, "terminated") => {
                stopped += 1;
                if exit_code(&s, "/state/terminated/exitCode") == 0 {
                    succeeded += 1;
                }
            }
            Some(s) if has(&s, "waiting") && last_failed(&s) => stopped += 1,
            Some(s) if has(&s, "waiting") => waiting += 1,
            Some(_) => unknown += 1,
        }
    }
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || (pending_sidecars > 0 && stopped == 0) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        return match (policy, stopped == succeeded) {
            ("Always", _) => "Running",
            (_, true) => "Succeeded",
            ("Never", false) => "Failed",
            _ => "Running",
        };
    }
    "Pending"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_join_errors_are_recognised() {
        assert!(is_sandbox_join_error(
            "Error response from daemon: cannot join IPC of a non running container: 4f2a"
        ));
        assert!(is_sandbox_join_error(
            "can't join IPC of container 4f2a: container 4f2a is not running"
        ));
        assert!(is_sandbox_join_error(
            "cannot join network namespace of a non running container"
        ));
        assert!(!is_sandbox_join_error("No such image: busybox:9"));
    }

    fn info(state: State, restarts: i32, hash: &str) -> ContainerInfo {
        ContainerInfo {
            id: "id1".into(),
            pod_uid: "u".into(),
            pod_name: "p".into(),
            pod_namespace: "default".into(),
            name: "c".into(),
            hash: hash.into(),
            restart_count: restarts,
            image: "i".into(),
            image_id: "sha".into(),
            state,
            ip: None,
            runtime_handler: None,
        }
    }

    /// Exited `ago_secs` before a fixed instant, after running `ran_secs`.
    fn exited(code: i64, ran_secs: i64, ago_secs: i64) -> State {
        let now = *NOW;
        let fin = now - chrono::Duration::seconds(ago_secs);
        let start = fin - chrono::Duration::seconds(ran_secs);
        State::Exited {
            exit_code: code,
            started_at: start.to_rfc3339(),
            finished_at: fin.to_rfc3339(),
            oom_killed: false,
        }
    }

    static NOW: std::sync::LazyLock<chrono::DateTime<chrono::Utc>> =
        std::sync::LazyLock::new(chrono::Utc::now);

    fn spec() -> Container {
        Container {
            name: "c".into(),
            image: Some("i".into()),
            ..Default::default()
        }
    }

    #[test]
    fn backoff_doubles_to_five_minutes() {
        assert_eq!(
            (0..8).map(backoff_secs).collect::<Vec<_>>(),
            vec![0, 10, 20, 40, 80, 160, 300, 300]
        );
    }

    #[test]
    fn restart_policies() {
        let now = *NOW;
        let h = "h";
        // A first failure restarts at once; later ones wait 10, 20, ... seconds.
        assert_eq!(
            container_action(h, Some(&info(exited(1, 1, 0), 0, h)), "Always", now),
            Action::Start {
                restart_count: 1,
                replace: None
            }
        );
        assert_eq!(
            container_action(h, Some(&info(exited(1, 1, 3), 1, h)), "Always", now),
            Action::BackOff { wait_secs: 7 }
        );
        assert_eq!(
            container_action(h, Some(&info(exited(1, 1, 11), 1, h)), "Always", now),
            Action::Start {
                restart_count: 2,
                replace: None
            }
        );
        assert_eq!(
            container_action(h, Some(&info(exited(1, 1, 15), 2, h)), "OnFailure", now),
            Action::BackOff { wait_secs: 5 }
        );
        // Success under Always restarts, under OnFailure does not; Never never restarts.
        assert_eq!(
            container_action(h, Some(&info(exited(0, 1, 0), 0, h)), "Always", now),
            Action::Start {
                restart_count: 1,
                replace: None
            }
        );
        assert_eq!(
            container_action(h, Some(&info(exited(0, 1, 0), 0, h)), "OnFailure", now),
            Action::Keep
        );
        assert_eq!(
            container_action(h, Some(&info(exited(1, 1, 0), 0, h)), "Never", now),
            Action::Keep
        );
        // A long run resets the backoff.
        assert_eq!(
            container_action(h, Some(&info(exited(1, 700, 0), 5, h)), "Always", now),
            Action::Start {
                restart_count: 6,
                replace: None
            }
        );
        // Running stays; a changed spec replaces; nothing yet starts.
        assert_eq!(
            container_action(
                h,
                Some(&info(
                    State::Running {
                        started_at: String::new()
                    },
                    0,
                    h
                )),
                "Always",
                now
            ),
            Action::Keep
        );
        assert_eq!(
            container_action(
                "new",
                Some(&info(
                    State::Running {
                        started_at: String::new()
                    },
                    2,
                    h
                )),
                "Always",
                now
            ),
            Action::Start {
                restart_count: 3,
                replace: Some("id1".into())
            }
        );
        assert_eq!(
            container_action(h, None, "Always", now),
            Action::Start {
                restart_count: 0,
                replace: None
            }
        );
    }

    fn status(name: &str, state: serde_json::Value, last: serde_json::Value) -> Value {
        json!({"name": name, "state": state, "lastState": last, "started": state.get("running").is_some()})
    }

    fn pod_spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn phases() {
        let run = json!({"running": {}});
        let ok = json!({"terminated": {"exitCode": 0}});
        let bad = json!({"terminated": {"exitCode": 1}});
        let creating = json!({"waiting": {"reason": "ContainerCreating"}});
        let backoff = json!({"waiting": {"reason": "CrashLoopBackOff"}});
        let none = json!({});
        let two = |policy: &str| {
            pod_spec(json!({"restartPolicy": policy, "containers": [{"name": "a"}, {"name": "b"}]}))
        };
        let apps = |a: &Value, b: &Value| {
            vec![
                status("a", a.clone(), none.clone()),
                status("b", b.clone(), none.clone()),
            ]
        };
        assert_eq!(pod_phase(&two("Always"), &[], &[], false), "Pending");
        assert_eq!(
            pod_phase(&two("Always"), &[], &apps(&run, &creating), false),
            "Pending"
        );
        assert_eq!(
            pod_phase(&two("Always"), &[], &apps(&run, &run), false),
            "Running"
        );
        assert_eq!(
            pod_phase(&two("Never"), &[], &apps(&ok, &bad), false),
            "Failed"
        );
        assert_eq!(
            pod_phase(&two("Never"), &[], &apps(&ok, &ok), false),
            "Succeeded"
        );
        assert_eq!(
            pod_phase(&two("OnFailure"), &[], &apps(&ok, &bad), false),
            "Running"
        );
        assert_eq!(
            pod_phase(&two("Always"), &[], &apps(&ok, &ok), false),
            "Running"
        );
        // Stopped for good (deleted): the exit codes decide, whatever the policy.
        assert_eq!(
            pod_phase(&two("Always"), &[], &apps(&ok, &ok), true),
            "Succeeded"
        );
        assert_eq!(
            pod_phase(&two("Always"), &[], &apps(&ok, &bad), true),
            "Failed"
        );
        // Backing off after a crash: it ran, so the pod is Running.
        let crashed = vec![
            status("a", backoff.clone(), bad.clone()),
            status("b", run.clone(), none.clone()),
        ];
        assert_eq!(pod_phase(&two("Always"), &[], &crashed, false), "Running");

        // Init containers: pending until all succeeded; a failure under
        // Never fails the pod; a sidecar running beside done apps is ignored.
        let spec = |policy: &str| {
            pod_spec(
                json!({"restartPolicy": policy, "initContainers": [{"name": "i"}, {"name": "s", "restartPolicy": "Always"}],
                            "containers": [{"name": "a"}]}),
            )
        };
        let init = |i: &Value, s: &Value| {
            vec![
                status("i", i.clone(), none.clone()),
                status("s", s.clone(), none.clone()),
            ]
        };
        let app = |a: &Value| vec![status("a", a.clone(), none.clone())];
        let waiting = json!({"waiting": {"reason": "PodInitializing"}});
        assert_eq!(
            pod_phase(
                &spec("Always"),
                &init(&run, &waiting),
                &app(&waiting),
                false
            ),
            "Pending"
        );
        assert_eq!(
            pod_phase(&spec("Never"), &init(&bad, &waiting), &app(&waiting), false),
            "Failed"
        );
        let init_backoff = vec![
            status("i", backoff, bad.clone()),
            status("s", waiting.clone(), none.clone()),
        ];
        assert_eq!(
            pod_phase(&spec("OnFailure"), &init_backoff, &app(&waiting), false),
            "Pending"
        );
        assert_eq!(
            pod_phase(&spec("Never"), &init(&ok, &run), &app(&run), false),
            "Running"
        );
        assert_eq!(
            pod_phase(&spec("Never"), &init(&ok, &run), &app(&ok), false),
            "Running",
            "the sidecar still runs"
        );
        assert_eq!(
            pod_phase(&spec("Never"), &init(&ok, &bad), &app(&ok), true),
            "Succeeded",
            "a killed sidecar does not count"
        );
    }

    #[test]
    fn statuses() {
        let s = spec();
        let cur = info(
            State::Running {
                started_at: "2026-01-01T00:00:00.123456Z".into(),
            },
            2,
            "h",
        );
        let prev = info(exited(137, 5, 30), 1, "h");
        let messages = HashMap::from([("id1".to_string(), "bye".to_string())]);
        let known = |ready: bool| Known {
            ready,
            started: true,
            messages: &messages,
            not_created: "ContainerCreating",
        };
        let st = container_status("docker", &s, Some(&cur), Some(&prev), None, known(true));
        assert_eq!(st["ready"], true);
        assert_eq!(st["restartCount"], 2);
        assert_eq!(st["state"]["running"]["startedAt"], "2026-01-01T00:00:00Z");
        assert_eq!(st["lastState"]["terminated"]["exitCode"], 137);
        assert_eq!(st["lastState"]["terminated"]["reason"], "Error");
        assert_eq!(
            st["lastState"]["terminated"]["message"], "bye",
            "the termination message"
        );
        let waiting = container_status(
            "docker",
            &s,
            Some(&prev),
            None,
            Some((
                "CrashLoopBackOff",
                "back-off 10s restarting failed container",
            )),
            known(true),
        );
        assert_eq!(waiting["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(waiting["ready"], false);
        let none = container_status("docker", &s, None, None, None, known(true));
        let unready = container_status("docker", &s, Some(&cur), None, None, known(false));
        assert_eq!(
            unready["ready"], false,
            "a failing readiness probe keeps a running container unready"
        );
        assert_eq!(none["state"]["waiting"]["reason"], "ContainerCreating");
    }
}
