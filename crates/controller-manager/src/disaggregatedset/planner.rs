//! The rollout planner of a DisaggregatedSet:
//! given, per role, the replicas of the old revisions when the rollout began,
//! now, and of the new revision, the next step moves every role forward in
//! lockstep, so no revision ever has one role serving and another drained,
//! and each role stays within its surge and unavailability budget.
//!
//! ```text
//!   (2,2) roles, maxSurge 1:   old 2,2 | new 0,0
//!                           →  old 2,2 | new 1,1   scale up (surge)
//!                           →  old 1,1 | new 1,1   drain in proportion
//!                           →  old 1,1 | new 2,2
//!                           →  old 0,0 | new 2,2   final drain
//! ```
//!
//! Pure: vectors in, a step out. Roles are positions in the vectors.

/// One role's rolling-update budget (in groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleConfig {
    pub surge: i64,
    pub unavailable: i64,
}

impl Default for RoleConfig {
    /// Without a rollingUpdateConfiguration: one surge group, none unavailable.
    fn default() -> Self {
        RoleConfig {
            surge: 1,
            unavailable: 0,
        }
    }
}

impl RoleConfig {
    /// The role's configuration scaled against its target; a pair
    /// that scales to 0/0 keeps the default.
    pub fn scaled(
        max_unavailable: Option<&serde_json::Value>,
        max_surge: Option<&serde_json::Value>,
        target: i64,
    ) -> RoleConfig {
        use minik8s_api::lws::scaled_value;
        let u = max_unavailable
            .and_then(|v| scaled_value(v, target, false))
            .unwrap_or(0);
        let g = max_surge
            .and_then(|v| scaled_value(v, target, true))
            .unwrap_or(0);
        if u > 0 {
            RoleConfig {
                surge: g,
                unavailable: u,
            }
        } else if g > 0 {
            RoleConfig {
                surge: g,
                unavailable: 0,
            }
        } else {
            RoleConfig::default()
        }
    }
}

/// The planner's view of one slice, one entry per role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Old revisions' replicas when the rollout began.
    pub initial_old: Vec<i64>,
    /// Old revisions' replicas now.
    pub current_old: Vec<i64>,
    /// The new revision's replicas now.
    pub current_new: Vec<i64>,
    /// The new revision's wanted replicas (0 for a removed role).
    pub target: Vec<i64>,
    pub config: Vec<RoleConfig>,
}

/// Where each role's old revisions (`past`) and new revision go next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub past: Vec<i64>,
    pub new: Vec<i64>,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// Keeps a revision from having some roles drained and others serving.
fn prevent_orphans(x: &mut [i64], n: &[i64], input: &Input) {
    let roles: Vec<usize> = (0..x.len()).filter(|&i| input.initial_old[i] > 0).collect();
    let zeros = roles.iter().filter(|&&i| x[i] == 0).count();
    if zeros == 0 || zeros == roles.len() {
        return;
    }
    let new_serves = (0..x.len())
        .filter(|&i| input.initial_old[i] >= input.target[i])
        .all(|i| n[i] >= input.target[i] - input.config[i].unavailable);
    if new_serves {
        x.iter_mut().for_each(|v| *v = 0);
    } else {
        for &i in &roles {
            if x[i] == 0 {
                x[i] = 1;
            }
        }
    }
}

/// `ComputeNextStep`: `None` when the rollout is complete.
/// Long as upstream's ComputeNextStep, which it follows step by step so
/// the two can be compared.
pub fn next_step(input: &Input) -> Option<Step> {
    let n = input.target.len();
    let (old0, old, new, target, cfg) = (
        &input.initial_old,
        &input.current_old,
        &input.current_new,
        &input.target,
        &input.config,
    );
    let batch = |i: usize| {
        if cfg[i].surge > 0 {
            cfg[i].surge
        } else {
            cfg[i].unavailable.max(1)
        }
    };
    let t = (0..n)
        .map(|i| ceil_div(old0[i].max(target[i]), batch(i)))
        .max()
        .unwrap_or(0);
    // 1. Done.
    if (0..n).all(|i| old[i] == 0 && new[i] >= target[i]) || t == 0 {
        return None;
    }
    // 2. Old revisions grew past their start (a scale during the rollout).
    if (0..n).any(|i| old[i] > old0[i]) {
        return Some(Step {
            past: (0..n).map(|i| old0[i].min(old[i])).collect(),
            new: new.clone(),
        });
    }
    // 3. The new revision is complete: drain the rest.
    if (0..n).all(|i| new[i] >= target[i]) {
        return Some(Step {
            past: vec![0; n],
            new: new.clone(),
        });
    }
    // 4. The next size of the new revision, the same fraction for every role.
    let k = (0..n)
        .map(|i| {
            if target[i] == 0 {
                t
            } else {
                new[i] * t / target[i]
            }
        })
        .min()
        .unwrap_or(t)
        .min(t)
        + 1;
    let next_new: Vec<i64> = (0..n)
        .map(|i| new[i].max(target[i].min(ceil_div(k * target[i], t))))
        .collect();
    // 5. What must stay of the old revisions to keep enough serving.
    let min_old: Vec<i64> = (0..n)
        .map(|i| {
            if old0[i] >= target[i] {
                (target[i] - cfg[i].unavailable - new[i]).max(0)
            } else {
                0
            }
        })
        .collect();
    // 6. Scale up within the surge.
    if (0..n).any(|i| next_new[i] > new[i])
        && (0..n)
            .filter(|&i| target[i] > 0)
            .all(|i| old[i] + next_new[i] <= target[i] + cfg[i].surge)
    {
        return Some(Step {
            past: old.clone(),
            new: next_new,
        });
    }
    // 7. Drain the old revisions in proportion.
    let m = (0..n)
        .filter(|&i| old0[i] > 0)
        .map(|i| (old0[i] - old[i]) * t / old0[i])
        .max()
        .unwrap_or(0)
        + 1;
    let mut next_old: Vec<i64> = (0..n)
        .map(|i| {
            old[i]
                .min((old0[i] - m * old0[i] / t).max(0))
                .max(min_old[i])
        })
        .collect();
    prevent_orphans(&mut next_old, new, input);
    if (0..n).any(|i| next_old[i] < old[i]) {
        return Some(Step {
            past: next_old,
            new: new.clone(),
        });
    }
    // 8. Force: drain and scale up together.
    let mut drained: Vec<i64> = (0..n)
        .map(|i| {
            let d = old[i].min(target[i] + cfg[i].surge - next_new[i]).max(0);
            if old0[i] >= target[i] {
                d.max(target[i] - cfg[i].unavailable - next_new[i])
            } else {
                d
            }
        })
        .collect();
    if !(0..n).any(|i| drained[i] < old[i]) {
        return None;
    }
    prevent_orphans(&mut drained, &next_new, input);
    Some(Step {
        past: drained,
        new: next_new,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the planner from (initial old, target) to the end, applying each
    /// step whole, and renders each state as upstream's traces do.
    fn trace(initial: &[i64], target: &[i64], cfg: RoleConfig) -> Vec<String> {
        let n = initial.len();
        let mut input = Input {
            initial_old: initial.to_vec(),
            current_old: initial.to_vec(),
            current_new: vec![0; n],
            target: target.to_vec(),
            config: vec![cfg; n],
        };
        let show = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let mut out = Vec::new();
        while let Some(step) = next_step(&input) {
            assert!(out.len() < 50, "no end: {out:?}");
            // No revision has one role serving and another drained.
            let old_zero = step.past.iter().filter(|v| **v == 0).count();
            assert!(old_zero == 0 || old_zero == n, "orphaned roles: {step:?}");
            input.current_old = step.past;
            input.current_new = step.new;
            out.push(format!(
                "{}|{}",
                show(&input.current_old),
                show(&input.current_new)
            ));
        }
        out
    }

    const S1: RoleConfig = RoleConfig {
        surge: 1,
        unavailable: 0,
    };

    fn cfg(surge: i64, unavailable: i64) -> RoleConfig {
        RoleConfig { surge, unavailable }
    }

    #[test]
    fn upstream_traces() {
        assert_eq!(
            trace(&[2, 2], &[2, 2], S1),
            ["2,2|1,1", "1,1|1,1", "1,1|2,2", "0,0|2,2"]
        );
        assert_eq!(
            trace(&[10, 10], &[10, 10], cfg(3, 0)),
            [
                "10,10|3,3",
                "8,8|3,3",
                "8,8|5,5",
                "5,5|8,8",
                "3,3|8,8",
                "3,3|10,10",
                "0,0|10,10"
            ]
        );
        assert_eq!(
            trace(&[4, 4], &[6, 6], S1),
            ["4,4|1,1", "4,4|2,2", "4,4|3,3", "3,3|4,4", "2,2|5,5", "1,1|6,6", "0,0|6,6"]
        );
        assert_eq!(
            trace(&[5, 5], &[2, 2], S1),
            ["4,4|0,0", "3,3|0,0", "2,2|0,0", "2,2|1,1", "1,1|1,1", "1,1|2,2", "0,0|2,2"]
        );
        assert_eq!(
            trace(&[3, 5], &[5, 3], S1),
            [
                "3,4|0,0", "2,3|0,0", "2,3|1,1", "2,2|1,1", "2,2|2,2", "2,2|3,2", "1,1|3,2",
                "1,1|4,3", "1,1|5,3", "0,0|5,3"
            ]
        );
        assert_eq!(
            trace(&[10, 2], &[6, 8], cfg(2, 0)),
            [
                "8,2|0,0", "6,2|0,0", "6,2|2,2", "4,1|2,2", "4,1|3,4", "4,1|4,5", "2,1|4,5",
                "2,1|5,7", "2,1|6,8", "0,0|6,8"
            ]
        );
        assert_eq!(
            trace(&[4, 4], &[4, 4], cfg(0, 2)),
            ["2,2|0,0", "2,2|2,2", "0,0|2,2", "0,0|4,4"]
        );
        assert_eq!(
            trace(&[5, 2], &[5, 2], cfg(2, 1)),
            ["5,2|2,1", "4,2|2,1", "3,2|4,2", "2,1|4,2", "2,1|5,2", "0,0|5,2"]
        );
    }

    #[test]
    fn surge_is_never_exceeded() {
        for (initial, target, c) in [
            ([4, 4], [6, 6], S1),
            ([10, 10], [10, 10], cfg(3, 0)),
            ([3, 5], [5, 3], S1),
        ] {
            let n = 2;
            let mut input = Input {
                initial_old: initial.to_vec(),
                current_old: initial.to_vec(),
                current_new: vec![0; n],
                target: target.to_vec(),
                config: vec![c; n],
            };
            while let Some(s) = next_step(&input) {
                for i in 0..n {
                    let total = s.past[i] + s.new[i];
                    assert!(
                        total <= initial[i].max(target[i]) + c.surge,
                        "{initial:?}→{target:?}: {s:?}"
                    );
                }
                input.current_old = s.past;
                input.current_new = s.new;
            }
        }
    }

    #[test]
    fn configs_scale_against_the_target() {
        use serde_json::json;
        let c = RoleConfig::scaled(Some(&json!("25%")), Some(&json!("50%")), 4);
        assert_eq!(c, cfg(2, 1));
        assert_eq!(RoleConfig::scaled(None, None, 4), S1);
        assert_eq!(
            RoleConfig::scaled(Some(&json!(0)), Some(&json!(0)), 4),
            S1,
            "0/0 keeps the default"
        );
        // CRD defaults fill maxUnavailable 1 next to a maxSurge of 1.
        assert_eq!(
            RoleConfig::scaled(Some(&json!(1)), Some(&json!(1)), 3),
            cfg(1, 1)
        );
    }

    #[test]
    fn done_and_grown_old() {
        let base = Input {
            initial_old: vec![2, 2],
            current_old: vec![0, 0],
            current_new: vec![2, 2],
            target: vec![2, 2],
            config: vec![S1; 2],
        };
        assert_eq!(next_step(&base), None);
        let grown = Input {
            current_old: vec![3, 2],
            current_new: vec![0, 0],
            ..base
        };
        assert_eq!(
            next_step(&grown),
            Some(Step {
                past: vec![2, 2],
                new: vec![0, 0]
            })
        );
    }
}
