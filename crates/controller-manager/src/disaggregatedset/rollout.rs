//! One slice of a DisaggregatedSet, decided:
//! drained old revisions go; with nothing old serving, each role's LWS is
//! created or rescaled to its target; otherwise the rollout path asks the
//! planner for the next step and turns it into LWS writes, draining the
//! newest old revision first and all of its roles together.
//!
//! ```text
//!   old revisions serving? ── no ──▶ simple path: create / rescale the new LWS
//!          │ yes
//!          ▼
//!   new LWS exist? ── no ──▶ create them at 0, remember initial-replicas, wait 1 s
//!          ▼
//!   new LWS all ready? ── no ──▶ wait 1 s
//!          ▼
//!   planner step ──▶ scale up new LWS, then scale down old ones (newest first)
//! ```

use super::children::{self, service_name};
use super::planner::{next_step, Input, RoleConfig};
use super::Child;
use minik8s_api::disaggregatedset::DisaggregatedRoleSpec;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How soon a rollout waiting for its new LWS looks again.
pub const ROLLOUT_POLL: Duration = Duration::from_secs(1);

/// A write the shell makes for a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The role's LWS at the target revision.
    Create {
        role: String,
        replicas: i64,
    },
    /// Patch an LWS's replicas, recording `event` (reason, note) if any.
    Scale {
        name: String,
        to: i64,
        event: Option<(&'static str, String)>,
    },
    /// Note an old LWS's replicas when the rollout began.
    SetInitial {
        name: String,
        replicas: i64,
    },
    /// Delete an LWS (event `LWSDeleted` with `note`).
    Delete {
        name: String,
        note: String,
    },
    Event {
        reason: &'static str,
        note: String,
    },
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub ops: Vec<Op>,
    pub requeue: Option<Duration>,
}

/// A spec role with the value of its scaler (External roles).
pub type RoleView<'a> = (&'a DisaggregatedRoleSpec, Option<i64>);

/// For one slice: `children` are this slice's LWS.
pub fn plan_slice(revision: &str, roles: &[RoleView], children: &[Child]) -> Plan {
    let slice = Slice {
        revision,
        roles,
        children,
    };
    let mut plan = Plan::default();
    let old = slice.delete_drained(&mut plan);
    if old.iter().map(|c| c.replicas).sum::<i64>() == 0 {
        slice.converge(&mut plan);
        return plan;
    }
    if !slice.new_revision_ready(&old, &mut plan) {
        plan.requeue = Some(ROLLOUT_POLL);
        return plan;
    }
    // The planner's input: spec roles, then roles only old revisions have.
    let mut names: Vec<String> = roles.iter().map(|r| r.0.name.clone()).collect();
    let removed: BTreeSet<&str> = old
        .iter()
        .map(|c| c.role.as_str())
        .filter(|r| !names.iter().any(|n| n == r))
        .collect();
    names.extend(removed.into_iter().map(str::to_string));
    let input = slice.planner_input(&names, &old);
    let Some(step) = next_step(&input) else {
        plan.ops.push(Op::Event {
            reason: "RollingUpdateCompleted",
            note: format!("Completed rolling update to revision {revision}"),
        });
        return plan;
    };
    slice.scale_up(&step.new, &input.current_new, &mut plan);
    plan.ops
        .extend(scale_down(&names, &input.current_old, &step.past, &old));
    plan
}

/// One slice's roles and LWS, with the revision it rolls to.
struct Slice<'a> {
    revision: &'a str,
    roles: &'a [RoleView<'a>],
    children: &'a [Child],
}

impl<'a> Slice<'a> {
    /// The role's LWS at the target revision.
    fn new_of(&self, role: &str) -> Option<&'a Child> {
        self.children
            .iter()
            .find(|c| c.revision == self.revision && c.role == role)
    }

    fn current_new(&self, role: &str) -> i64 {
        self.new_of(role).map_or(0, |c| c.replicas)
    }

    fn target_of(&self, (spec, scaler): &RoleView) -> i64 {
        children::target(spec, *scaler, self.current_new(&spec.name))
    }

    /// Old revisions whose every LWS is at 0 are deleted as a unit; the
    /// LWS of the old revisions still serving are returned.
    fn delete_drained(&self, plan: &mut Plan) -> Vec<&'a Child> {
        let mut by_revision: BTreeMap<&str, Vec<&Child>> = BTreeMap::new();
        for c in self.children.iter().filter(|c| c.revision != self.revision) {
            by_revision.entry(&c.revision).or_default().push(c);
        }
        let mut old = Vec::new();
        for list in by_revision.into_values() {
            if list.iter().all(|c| c.replicas == 0) {
                for c in list {
                    plan.ops.push(Op::Delete {
                        name: c.name.clone(),
                        note: format!("Deleted drained LWS {}", c.name),
                    });
                }
            } else {
                old.extend(list);
            }
        }
        old
    }

    /// Nothing old serving: each role's LWS created at, or scaled to, its target.
    fn converge(&self, plan: &mut Plan) {
        for role in self.roles {
            let want = self.target_of(role);
            match self.new_of(&role.0.name) {
                None => plan.ops.push(Op::Create {
                    role: role.0.name.clone(),
                    replicas: want,
                }),
                Some(c) if c.replicas != want => plan.ops.push(Op::Scale {
                    name: c.name.clone(),
                    to: want,
                    event: None,
                }),
                Some(_) => {}
            }
        }
    }

    /// The rollout's start and its stability gate: the new revision's LWS
    /// created at 0 (the old ones' replicas noted when it begins), and
    /// every one of them fully ready. False: wait.
    fn new_revision_ready(&self, old: &[&Child], plan: &mut Plan) -> bool {
        if self.roles.iter().all(|r| self.new_of(&r.0.name).is_none()) {
            plan.ops.push(Op::Event {
                reason: "RollingUpdateStarted",
                note: format!("Started rolling update to revision {}", self.revision),
            });
            for c in old {
                if c.initial != Some(c.replicas) {
                    plan.ops.push(Op::SetInitial {
                        name: c.name.clone(),
                        replicas: c.replicas,
                    });
                }
            }
        }
        let mut all_made = true;
        for r in self
            .roles
            .iter()
            .filter(|r| self.new_of(&r.0.name).is_none())
        {
            all_made = false;
            plan.ops.push(Op::Create {
                role: r.0.name.clone(),
                replicas: 0,
            });
        }
        all_made
            && self
                .roles
                .iter()
                .filter_map(|r| self.new_of(&r.0.name))
                .all(|c| c.replicas == c.ready)
    }

    /// What the planner decides from, per role in `names`.
    fn planner_input(&self, names: &[String], old: &[&Child]) -> Input {
        let mut input = Input {
            initial_old: Vec::new(),
            current_old: Vec::new(),
            current_new: Vec::new(),
            target: Vec::new(),
            config: Vec::new(),
        };
        for name in names {
            let mine = old.iter().filter(|c| &c.role == name);
            input
                .initial_old
                .push(mine.clone().map(|c| c.initial.unwrap_or(c.replicas)).sum());
            input.current_old.push(mine.map(|c| c.replicas).sum());
            let now_new = self.current_new(name);
            input.current_new.push(now_new);
            let role = self.roles.iter().find(|r| &r.0.name == name);
            let mut target = role.map_or(0, |r| self.target_of(r));
            // An External role is not shrunk by a rollout.
            if role.is_some_and(|r| r.0.is_external()) && target < now_new {
                target = now_new;
            }
            input.target.push(target);
            input.config.push(role_config(role, target));
        }
        input
    }

    /// The planner's step up for each spec role's new LWS.
    fn scale_up(&self, step_new: &[i64], current_new: &[i64], plan: &mut Plan) {
        for (i, role) in self.roles.iter().enumerate() {
            if step_new[i] > current_new[i] {
                let c = self.new_of(&role.0.name).expect("checked above");
                plan.ops.push(Op::Scale {
                    name: c.name.clone(),
                    to: step_new[i],
                    event: Some((
                        "ScalingUp",
                        format!(
                            "Scaling up {} LWS {} from {} to {} replicas",
                            role.0.name, c.name, c.replicas, step_new[i]
                        ),
                    )),
                });
            }
        }
    }
}

/// A role's surge and unavailability bounds for a rollout to `target`.
fn role_config(role: Option<&RoleView>, target: i64) -> RoleConfig {
    let ru = role.and_then(|r| {
        r.0.spec
            .as_ref()?
            .rollout_strategy
            .as_ref()?
            .rolling_update_configuration
            .clone()
    });
    match ru {
        Some(ru) => {
            let v = |x: &Option<_>| x.as_ref().and_then(|x| serde_json::to_value(x).ok());
            RoleConfig::scaled(
                v(&ru.max_unavailable).as_ref(),
                v(&ru.max_surge).as_ref(),
                target,
            )
        }
        None => RoleConfig::default(),
    }
}

/// Scale down: each role's budget drains the newest old revision first;
/// a revision in which some role would reach 0 goes to 0 for every role.
fn scale_down(names: &[String], current_old: &[i64], past: &[i64], old: &[&Child]) -> Vec<Op> {
    let mut budget: Vec<i64> = current_old.iter().zip(past).map(|(c, p)| c - p).collect();
    let mut revisions: BTreeMap<&str, Vec<&Child>> = BTreeMap::new();
    for c in old {
        revisions.entry(&c.revision).or_default().push(c);
    }
    let mut order: Vec<(&str, Vec<&Child>)> = revisions.into_iter().collect();
    let newest = |l: &Vec<&Child>| l.iter().map(|c| c.created).max();
    order.sort_by(|a, b| newest(&b.1).cmp(&newest(&a.1)).then(b.0.cmp(a.0)));
    let mut ops = Vec::new();
    for (_, members) in order {
        if budget.iter().all(|b| *b <= 0) {
            break;
        }
        let idx = |c: &Child| names.iter().position(|n| n == &c.role).unwrap_or(0);
        let drains: Vec<i64> = members
            .iter()
            .map(|c| budget[idx(c)].max(0).min(c.replicas))
            .collect();
        let triggering: Vec<usize> = (0..members.len())
            .filter(|&k| drains[k] > 0 && members[k].replicas == drains[k])
            .collect();
        let coordinated = !triggering.is_empty();
        for (k, c) in members.iter().enumerate() {
            let to = if coordinated {
                0
            } else {
                c.replicas - drains[k]
            };
            if to < c.replicas {
                ops.push(Op::Scale {
                    name: c.name.clone(),
                    to,
                    event: Some((
                        "ScalingDown",
                        format!(
                            "Scaling down {} LWS {} from {} to {to} replicas",
                            c.role, c.name, c.replicas
                        ),
                    )),
                });
            }
            if !coordinated || triggering.contains(&k) {
                budget[idx(c)] -= drains[k];
            }
        }
    }
    ops
}

/// The Services of one slice to create (roles) and delete (names),
/// given the slice's LWS and its Services as (name, revision).
pub fn plan_services(
    ds: &str,
    slice: i32,
    revision: &str,
    roles: &[String],
    children: &[Child],
    services: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let ready_on_all = |rev: &str| {
        roles.iter().all(|r| {
            children
                .iter()
                .any(|c| c.revision == rev && &c.role == r && c.ready >= 1)
        })
    };
    if !ready_on_all(revision) {
        return (Vec::new(), Vec::new());
    }
    let create = roles
        .iter()
        .filter(|r| {
            let n = service_name(ds, slice, revision, r);
            !services.iter().any(|(s, _)| *s == n)
        })
        .cloned()
        .collect();
    let delete = services
        .iter()
        .filter(|(_, rev)| rev != revision && !ready_on_all(rev))
        .map(|(n, _)| n.clone())
        .collect();
    (create, delete)
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
