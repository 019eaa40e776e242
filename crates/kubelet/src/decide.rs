//! The kubelet's decisions as pure functions of the pod spec and what Docker
//! reports: what to do with each container (restart policy, backoff, spec
//! changes), and the pod status that results. No I/O: unit-tested below.

use crate::runtime::{ContainerInfo, State};
use k8s_openapi::api::core::v1::Container;
use serde_json::{json, Value};

/// Kubernetes' crash-loop backoff: 10 s doubling to 300 s.
pub const BACKOFF_INITIAL_SECS: i64 = 10;
pub const BACKOFF_MAX_SECS: i64 = 300;
/// A container that ran this long before exiting starts its backoff afresh.
pub const BACKOFF_RESET_SECS: i64 = 600;

/// A stable hash of a container's spec: a change means the container is replaced.
pub fn container_hash(c: &Container) -> String {
    use std::hash::{Hash, Hasher};
    let text = serde_json::to_string(c).unwrap_or_default();
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

/// The state of one container as `containerStatuses[]` shows it. `probes_ready` is
/// the readiness probe's verdict (true without a readiness probe).
pub fn container_status(
    scheme: &str,
    spec: &Container,
    current: Option<&ContainerInfo>,
    previous: Option<&ContainerInfo>,
    waiting: Option<(&str, &str)>,
    probes_ready: bool,
) -> Value {
    let state = match (current.map(|c| &c.state), waiting) {
        (_, Some((reason, message))) => json!({"waiting": {"reason": reason, "message": message}}),
        (Some(State::Running { started_at }), _) => {
            json!({"running": {"startedAt": trim_time(started_at)}})
        }
        (Some(s @ State::Exited { .. }), _) => {
            terminated(s, scheme, current.map(|c| c.id.as_str()).unwrap_or(""))
        }
        _ => json!({"waiting": {"reason": "ContainerCreating"}}),
    };
    let running = current.is_some_and(|c| c.state.is_running());
    let mut st = json!({
        "name": spec.name,
        "image": spec.image.clone().unwrap_or_default(),
        "imageID": current.map(|c| c.image_id.clone()).unwrap_or_default(),
        "ready": running && waiting.is_none() && probes_ready,
        "started": running,
        "restartCount": current.map(|c| c.restart_count).unwrap_or(0),
        "state": state,
        "lastState": previous.map(|p| terminated(&p.state, scheme, &p.id)).unwrap_or(json!({})),
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

fn terminated(state: &State, scheme: &str, id: &str) -> Value {
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
            json!({"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": trim_time(started_at),
                                  "finishedAt": trim_time(finished_at), "containerID": format!("{scheme}://{id}")}})
        }
        _ => json!({}),
    }
}

/// The pod phase from its containers' states and the restart policy.
pub fn pod_phase(restart_policy: &str, states: &[Option<&State>]) -> &'static str {
    let running = states
        .iter()
        .filter(|s| matches!(s, Some(State::Running { .. })))
        .count();
    let exited: Vec<i64> = states
        .iter()
        .filter_map(|s| match s {
            Some(State::Exited { exit_code, .. }) => Some(*exit_code),
            _ => None,
        })
        .collect();
    let all_exited = !states.is_empty() && exited.len() == states.len();
    if all_exited {
        let failed = exited.iter().any(|c| *c != 0);
        match (restart_policy, failed) {
            ("Never", true) => return "Failed",
            ("Never", false) | ("OnFailure", false) => return "Succeeded",
            _ => {}
        }
    }
    if running > 0 || !exited.is_empty() {
        "Running"
    } else {
        "Pending"
    }
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

    #[test]
    fn phases() {
        let run = State::Running {
            started_at: String::new(),
        };
        let ok = exited(0, 1, 1);
        let bad = exited(1, 1, 1);
        assert_eq!(pod_phase("Always", &[None]), "Pending");
        assert_eq!(pod_phase("Always", &[Some(&run), None]), "Running");
        assert_eq!(pod_phase("Never", &[Some(&ok), Some(&bad)]), "Failed");
        assert_eq!(pod_phase("Never", &[Some(&ok)]), "Succeeded");
        assert_eq!(pod_phase("OnFailure", &[Some(&ok), Some(&ok)]), "Succeeded");
        assert_eq!(pod_phase("OnFailure", &[Some(&bad)]), "Running");
        assert_eq!(pod_phase("Always", &[Some(&ok)]), "Running");
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
        let st = container_status("docker", &s, Some(&cur), Some(&prev), None, true);
        assert_eq!(st["ready"], true);
        assert_eq!(st["restartCount"], 2);
        assert_eq!(st["state"]["running"]["startedAt"], "2026-01-01T00:00:00Z");
        assert_eq!(st["lastState"]["terminated"]["exitCode"], 137);
        assert_eq!(st["lastState"]["terminated"]["reason"], "Error");
        let waiting = container_status(
            "docker",
            &s,
            Some(&prev),
            None,
            Some((
                "CrashLoopBackOff",
                "back-off 10s restarting failed container",
            )),
            true,
        );
        assert_eq!(waiting["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(waiting["ready"], false);
        let none = container_status("docker", &s, None, None, None, true);
        let unready = container_status("docker", &s, Some(&cur), None, None, false);
        assert_eq!(
            unready["ready"], false,
            "a failing readiness probe keeps a running container unready"
        );
        assert_eq!(none["state"]["waiting"]["reason"], "ContainerCreating");
    }
}
