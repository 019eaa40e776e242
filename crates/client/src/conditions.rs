//! Typed status conditions (`metav1.Condition`), set as apimachinery's
//! `meta.SetStatusCondition` sets them: a condition's lastTransitionTime
//! moves only when its status flips; its reason, message and
//! observedGeneration always take the new values.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Sets `new` in `conditions` (added if absent); true when anything changed.
/// `new.last_transition_time` is used only when the status flips or the
/// condition is new.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(c) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if c.status != new.status {
        c.status = new.status;
        c.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if c.reason != new.reason {
        c.reason = new.reason;
        changed = true;
    }
    if c.message != new.message {
        c.message = new.message;
        changed = true;
    }
    if c.observed_generation != new.observed_generation {
        c.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// A condition of `type_` with `status`, `reason` and `message`, observed
/// at `generation`, transitioning at `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: i64,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now.clone(),
        observed_generation: Some(generation),
    }
}

/// Whether `conditions` hold `type_` with status True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_flips() {
        let mut cs = Vec::new();
        let t0 = at("2026-01-01T00:00:00Z");
        let t1 = at("2026-01-01T00:05:00Z");
        assert!(set_status_condition(
            &mut cs,
            condition("Ready", "False", "Starting", "", 1, &t0)
        ));
        assert!(!set_status_condition(
            &mut cs,
            condition("Ready", "False", "Starting", "", 1, &t1)
        ));
        assert_eq!(cs[0].last_transition_time, t0);
        assert!(set_status_condition(
            &mut cs,
            condition("Ready", "False", "Waiting", "m", 2, &t1)
        ));
        assert_eq!(
            (cs[0].last_transition_time.clone(), cs[0].reason.as_str()),
            (t0.clone(), "Waiting")
        );
        assert!(set_status_condition(
            &mut cs,
            condition("Ready", "True", "Up", "", 2, &t1)
        ));
        assert_eq!(cs[0].last_transition_time, t1);
        assert!(is_true(&cs, "Ready") && !is_true(&cs, "Failed"));
        assert_eq!(cs.len(), 1);
    }
}
