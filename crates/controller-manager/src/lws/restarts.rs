//! Group restarts beyond upstream (lws#1048, KEP-820): the backoff between
//! recreations of a failing group, the limit after which it is marked
//! failed, and each group's state for the LWS status (`groupStatuses`, the
//! `Failed` condition) with an event for every transition. Pure; the group
//! controller (`group.rs`) and the LWS controller (`mod.rs`) do the I/O.
//!
//! ```text
//!   NotReady ──ready──▶ Ready ──pod restarted──▶ Restarting (backoff) ──▶ recreated ──▶ NotReady
//!                                                     │ restarts ≥ minik8s.io/max-group-restarts
//!                                                     ▼
//!                                                  Failed (kept for debugging; recover=true on
//!                                                  the leader, or a scale-down, recreates it)
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use minik8s_api::lws::GroupStatus;
use minik8s_client::events::EventType;
use std::collections::BTreeMap;
use std::time::Duration;

pub use minik8s_api::lws::{MAX_RESTARTS, RESTART_BACKOFF};
pub(super) const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A group that has not been restarted for this long starts its backoff afresh.
pub(super) const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// The restart history of one group.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct History {
    /// Group restarts in all.
    pub count: u32,
    /// Consecutive restarts (each within BACKOFF_RESET of the previous one).
    pub streak: u32,
    /// Unix seconds of the last restart.
    pub last: i64,
    /// The limit was reached: the group is Failed and no longer recreated.
    #[serde(default)]
    pub limited: bool,
    /// Unix seconds at which a recreation held back by the backoff is due
    /// (0: none pending).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting_until: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    RestartNow,
    /// Still backing off: try again after this long.
    Wait(Duration),
    LimitReached,
}

/// Whether a group may be recreated now, given its history.
pub fn decide(history: History, now: i64, base: Duration, limit: Option<u32>) -> Decision {
    if limit.is_some_and(|l| history.count >= l) {
        return Decision::LimitReached;
    }
    let since = Duration::from_secs((now - history.last).max(0) as u64);
    if history.streak == 0 || since >= BACKOFF_RESET || base.is_zero() {
        return Decision::RestartNow;
    }
    let delay = base
        .saturating_mul(1u32 << (history.streak - 1).min(16))
        .min(MAX_BACKOFF);
    match delay.checked_sub(since) {
        Some(left) if !left.is_zero() => Decision::Wait(left),
        _ => Decision::RestartNow,
    }
}

/// The history after a restart at `now`.
pub fn record(history: History, now: i64) -> History {
    let quiet = now - history.last >= BACKOFF_RESET.as_secs() as i64;
    History {
        count: history.count + 1,
        streak: if quiet { 1 } else { history.streak + 1 },
        last: now,
        limited: false,
        waiting_until: 0,
    }
}

pub const READY: &str = "Ready";
pub const NOT_READY: &str = "NotReady";
pub const RESTARTING: &str = "Restarting";
pub const FAILED: &str = "Failed";
/// Every group state, for metrics.
pub const STATES: [&str; 4] = [READY, NOT_READY, RESTARTING, FAILED];

fn time(unix: i64) -> Option<Time> {
    chrono::DateTime::from_timestamp(unix, 0).map(minik8s_api::meta::time_of)
}

/// Each group's state for `status.groupStatuses`, from whether it is ready
/// (`groups`: index, ready) and its restart history.
pub fn group_states(
    groups: &[(i32, bool)],
    history: &BTreeMap<String, History>,
    now: i64,
) -> Vec<GroupStatus> {
    let mut out: Vec<GroupStatus> = groups
        .iter()
        .map(|&(index, ready)| {
            let h = history.get(&index.to_string()).copied().unwrap_or_default();
            let (state, next, message) = if h.limited {
                (FAILED, None, Some(format!("exceeded {MAX_RESTARTS}: no longer recreated; its pods are kept for debugging")))
            } else if h.waiting_until > now {
                let at = time(h.waiting_until);
                let when = at.as_ref().map(|t| minik8s_api::meta::utc_of(t).to_rfc3339()).unwrap_or_default();
                (RESTARTING, at, Some(format!("backing off: recreated at {when}")))
            } else if ready {
                (READY, None, None)
            } else {
                (NOT_READY, None, None)
            };
            GroupStatus {
                index,
                state: state.into(),
                restarts: h.count as i32,
                last_restart_time: (h.count > 0).then(|| time(h.last)).flatten(),
                next_restart_time: next,
                message,
            }
        })
        .collect();
    out.sort_by_key(|g| g.index);
    out
}

/// The `Failed` condition (KEP-820): True naming the failed groups; False
/// once none is left (only if it was ever set).
pub fn failed_condition(
    states: &[GroupStatus],
    existing: Option<&Condition>,
    generation: i64,
    now: &Time,
) -> Option<Condition> {
    let failed: Vec<String> = states
        .iter()
        .filter(|g| g.state == FAILED)
        .map(|g| g.index.to_string())
        .collect();
    let (status, reason, message) = if failed.is_empty() {
        existing?;
        (
            "False",
            "NoFailedGroups",
            "No group has exceeded its restarts".to_string(),
        )
    } else {
        let which = if failed.len() == 1 {
            format!("Group {}", failed[0])
        } else {
            format!("Groups {}", failed.join(", "))
        };
        (
            "True",
            "MaxGroupRestartsExceeded",
            format!("{which} exceeded {MAX_RESTARTS} and no longer recreated"),
        )
    };
    let since = match existing {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    Some(Condition {
        type_: FAILED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: Some(generation),
    })
}

/// An event for every group whose state changed: (type, reason, message).
/// A group first seen counts as NotReady before.
pub fn transitions(
    old: &[GroupStatus],
    new: &[GroupStatus],
) -> Vec<(EventType, &'static str, String)> {
    new.iter()
        .filter_map(|g| {
            let before = old
                .iter()
                .find(|o| o.index == g.index)
                .map_or(NOT_READY, |o| o.state.as_str());
            if before == g.state {
                return None;
            }
            let i = g.index;
            Some(match g.state.as_str() {
                READY => (
                    EventType::Normal,
                    "GroupReady",
                    format!("Group {i} is ready"),
                ),
                RESTARTING => (
                    EventType::Warning,
                    "GroupRestarting",
                    format!(
                        "Group {i} failed; {}",
                        g.message.clone().unwrap_or_default()
                    ),
                ),
                FAILED => (
                    EventType::Warning,
                    "GroupFailed",
                    format!(
                        "Group {i} failed after {} restarts: {}",
                        g.restarts,
                        g.message.clone().unwrap_or_default()
                    ),
                ),
                _ => (
                    EventType::Normal,
                    "GroupNotReady",
                    format!("Group {i} is not ready"),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_resets_after_quiet_and_stops_at_the_limit() {
        let base = Duration::from_secs(10);
        let h0 = History::default();
        assert_eq!(decide(h0, 1000, base, None), Decision::RestartNow);
        let h1 = record(h0, 1000);
        assert_eq!((h1.count, h1.streak), (1, 1));
        assert_eq!(
            decide(h1, 1004, base, None),
            Decision::Wait(Duration::from_secs(6))
        );
        assert_eq!(decide(h1, 1010, base, None), Decision::RestartNow);
        let h2 = record(h1, 1010);
        assert_eq!(
            decide(h2, 1015, base, None),
            Decision::Wait(Duration::from_secs(15))
        );
        let mut h = h2;
        for _ in 0..10 {
            h = record(h, h.last + 1);
        }
        assert_eq!(decide(h, h.last, base, None), Decision::Wait(MAX_BACKOFF));
        assert_eq!(decide(h, h.last + 600, base, None), Decision::RestartNow);
        assert_eq!(record(h, h.last + 600).streak, 1);
        assert_eq!(
            decide(h1, 1001, Duration::ZERO, None),
            Decision::RestartNow,
            "0s is upstream's behaviour"
        );
        assert_eq!(decide(h2, 5000, base, Some(2)), Decision::LimitReached);
        assert_eq!(decide(h1, 5000, base, Some(2)), Decision::RestartNow);
    }

    #[test]
    fn states_follow_readiness_backoff_and_the_limit() {
        let mut history = BTreeMap::new();
        history.insert(
            "1".to_string(),
            History {
                count: 2,
                streak: 2,
                last: 900,
                limited: false,
                waiting_until: 1020,
            },
        );
        history.insert(
            "2".to_string(),
            History {
                count: 3,
                streak: 3,
                last: 950,
                limited: true,
                waiting_until: 0,
            },
        );
        let states = group_states(
            &[(2, false), (0, true), (1, false), (3, false)],
            &history,
            1000,
        );
        let summary: Vec<(i32, &str, i32)> = states
            .iter()
            .map(|g| (g.index, g.state.as_str(), g.restarts))
            .collect();
        assert_eq!(
            summary,
            [
                (0, READY, 0),
                (1, RESTARTING, 2),
                (2, FAILED, 3),
                (3, NOT_READY, 0)
            ]
        );
        assert_eq!(states[1].next_restart_time, time(1020));
        assert_eq!(states[1].last_restart_time, time(900));
        assert!(states[0].last_restart_time.is_none());
        // After the backoff the group is just not ready (its recreation is due).
        assert_eq!(
            group_states(&[(1, false)], &history, 1020)[0].state,
            NOT_READY
        );

        let now = minik8s_api::meta::time_of(chrono::DateTime::from_timestamp(1000, 0).unwrap());
        let c = failed_condition(&states, None, 4, &now).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "MaxGroupRestartsExceeded")
        );
        assert_eq!(
            c.message,
            "Group 2 exceeded minik8s.io/max-group-restarts and no longer recreated"
        );
        let two = group_states(
            &[(1, false), (2, false)],
            &BTreeMap::from([
                (
                    "1".to_string(),
                    History {
                        limited: true,
                        ..Default::default()
                    },
                ),
                (
                    "2".to_string(),
                    History {
                        limited: true,
                        ..Default::default()
                    },
                ),
            ]),
            0,
        );
        assert!(failed_condition(&two, None, 1, &now)
            .unwrap()
            .message
            .starts_with("Groups 1, 2 exceeded"));
        let healthy = group_states(&[(0, true)], &BTreeMap::new(), 0);
        assert!(
            failed_condition(&healthy, None, 1, &now).is_none(),
            "never failed: no condition"
        );
        let cleared = failed_condition(&healthy, Some(&c), 5, &now).unwrap();
        assert_eq!(
            (cleared.status.as_str(), cleared.reason.as_str()),
            ("False", "NoFailedGroups")
        );

        let ev = transitions(&states[..1], &states);
        let reasons: Vec<&str> = ev.iter().map(|e| e.1).collect();
        assert_eq!(
            reasons,
            ["GroupRestarting", "GroupFailed"],
            "Ready unchanged, NotReady is the start"
        );
        assert_eq!(ev[1].2, "Group 2 failed after 3 restarts: exceeded minik8s.io/max-group-restarts: no longer recreated; its pods are kept for debugging");
        let back = transitions(&states, &group_states(&[(1, true)], &BTreeMap::new(), 0));
        assert_eq!(
            back,
            [(
                EventType::Normal,
                "GroupReady",
                "Group 1 is ready".to_string()
            )]
        );
    }
}
