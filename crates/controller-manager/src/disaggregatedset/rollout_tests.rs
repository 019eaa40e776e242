//! The scenarios of upstream's controller and rollout executor.

use super::*;
use serde_json::json;

fn role(name: &str, replicas: i64) -> DisaggregatedRoleSpec {
    serde_json::from_value(json!({"name": name, "spec": {"replicas": replicas,
        "leaderWorkerTemplate": {"workerTemplate": {}}}}))
    .unwrap()
}

fn lws(role: &str, revision: &str, replicas: i64, ready: i64, created: i64) -> Child {
    Child {
        name: format!("ds-0-{revision}-{role}"),
        role: role.into(),
        revision: revision.into(),
        slice: 0,
        replicas,
        ready,
        status_replicas: replicas,
        updated: ready,
        created,
        ..Default::default()
    }
}

fn scales(plan: &Plan) -> Vec<(String, i64)> {
    plan.ops
        .iter()
        .filter_map(|o| match o {
            Op::Scale { name, to, .. } => Some((name.clone(), *to)),
            _ => None,
        })
        .collect()
}

fn creates(plan: &Plan) -> Vec<(String, i64)> {
    plan.ops
        .iter()
        .filter_map(|o| match o {
            Op::Create { role, replicas } => Some((role.clone(), *replicas)),
            _ => None,
        })
        .collect()
}

fn views(roles: &[DisaggregatedRoleSpec]) -> Vec<RoleView<'_>> {
    roles.iter().map(|r| (r, None)).collect()
}

#[test]
fn simple_path_creates_and_rescales() {
    let roles = [role("p", 5), role("d", 4)];
    let fresh = plan_slice("new", &views(&roles), &[]);
    assert_eq!(creates(&fresh), [("p".into(), 5), ("d".into(), 4)]);
    assert_eq!(fresh.requeue, None);
    let existing = [lws("p", "new", 3, 3, 0), lws("d", "new", 2, 2, 0)];
    let plan = plan_slice("new", &views(&roles), &existing);
    assert_eq!(
        scales(&plan),
        [("ds-0-new-p".into(), 5), ("ds-0-new-d".into(), 4)]
    );
    assert!(plan
        .ops
        .iter()
        .all(|o| matches!(o, Op::Scale { event: None, .. })));
}

#[test]
fn drained_revisions_are_deleted_as_a_unit() {
    let roles = [role("p", 1), role("d", 1)];
    let kids = [
        lws("p", "old", 0, 0, 0),
        lws("d", "old", 0, 0, 0),
        lws("p", "new", 1, 1, 1),
        lws("d", "new", 1, 1, 1),
    ];
    let plan = plan_slice("new", &views(&roles), &kids);
    assert_eq!(
        plan.ops,
        [
            Op::Delete {
                name: "ds-0-old-p".into(),
                note: "Deleted drained LWS ds-0-old-p".into()
            },
            Op::Delete {
                name: "ds-0-old-d".into(),
                note: "Deleted drained LWS ds-0-old-d".into()
            }
        ]
    );
}

#[test]
fn a_rollout_starts_with_new_lws_at_zero_and_waits_for_them() {
    let roles = [role("p", 2), role("d", 2)];
    let kids = [lws("p", "old", 2, 2, 0), lws("d", "old", 2, 2, 0)];
    let plan = plan_slice("new", &views(&roles), &kids);
    assert_eq!(
        plan.ops[0],
        Op::Event {
            reason: "RollingUpdateStarted",
            note: "Started rolling update to revision new".into()
        }
    );
    assert!(plan.ops.contains(&Op::SetInitial {
        name: "ds-0-old-p".into(),
        replicas: 2
    }));
    assert_eq!(creates(&plan), [("p".into(), 0), ("d".into(), 0)]);
    assert_eq!(plan.requeue, Some(ROLLOUT_POLL));
    // New LWS not ready: nothing scales down.
    let mut kids = kids.to_vec();
    for k in kids.iter_mut() {
        k.initial = Some(2);
    }
    kids.push(lws("p", "new", 1, 0, 1));
    kids.push(lws("d", "new", 1, 1, 1));
    let plan = plan_slice("new", &views(&roles), &kids);
    assert!(plan.ops.is_empty(), "{:?}", plan.ops);
    assert_eq!(plan.requeue, Some(ROLLOUT_POLL));
    // Ready: the planner's next step (drain old to 1,1) with events.
    kids[2].ready = 1;
    let plan = plan_slice("new", &views(&roles), &kids);
    assert_eq!(
        scales(&plan),
        [("ds-0-old-p".into(), 1), ("ds-0-old-d".into(), 1)]
    );
    assert!(plan.ops.contains(&Op::Scale {
        name: "ds-0-old-p".into(),
        to: 1,
        event: Some((
            "ScalingDown",
            "Scaling down p LWS ds-0-old-p from 2 to 1 replicas".into()
        ))
    }));
}

#[test]
fn the_first_step_scales_up_with_an_event() {
    let roles = [role("p", 2), role("d", 2)];
    let mut kids = vec![
        lws("p", "old", 2, 2, 0),
        lws("d", "old", 2, 2, 0),
        lws("p", "new", 0, 0, 1),
        lws("d", "new", 0, 0, 1),
    ];
    kids[0].initial = Some(2);
    kids[1].initial = Some(2);
    let plan = plan_slice("new", &views(&roles), &kids);
    assert_eq!(
        plan.ops[0],
        Op::Scale {
            name: "ds-0-new-p".into(),
            to: 1,
            event: Some((
                "ScalingUp",
                "Scaling up p LWS ds-0-new-p from 0 to 1 replicas".into()
            ))
        }
    );
    assert_eq!(scales(&plan).len(), 2);
}

#[test]
fn newest_old_revision_drains_first_and_all_its_roles_together() {
    // A→B→C: A (oldest) and B both old; C new and ready at 0.
    let roles = [role("p", 2), role("d", 2)];
    let mut kids = vec![
        lws("p", "a", 1, 1, 10),
        lws("d", "a", 1, 1, 10),
        lws("p", "b", 1, 1, 20),
        lws("d", "b", 1, 1, 20),
        lws("p", "c", 0, 0, 30),
        lws("d", "c", 0, 0, 30),
    ];
    for k in kids.iter_mut().take(4) {
        k.initial = Some(1);
    }
    let plan = plan_slice("c", &views(&roles), &kids);
    // First step: C 0 → 1 (old total 2 + 1 = 3 ≤ 2 + 1 surge).
    assert_eq!(
        scales(&plan),
        [("ds-0-c-p".into(), 1), ("ds-0-c-d".into(), 1)]
    );
    kids[4].replicas = 1;
    kids[4].ready = 1;
    kids[5].replicas = 1;
    kids[5].ready = 1;
    let plan = plan_slice("c", &views(&roles), &kids);
    // Then one group per role drains: B's, the newest, to 0 with its roles;
    // A is untouched (no spill).
    assert_eq!(
        scales(&plan),
        [("ds-0-b-p".into(), 0), ("ds-0-b-d".into(), 0)]
    );
}

#[test]
fn a_budget_stops_mid_revision_and_coordinates_only_at_zero() {
    let names = ["p".to_string(), "d".to_string()];
    let old = [lws("p", "a", 3, 3, 0), lws("d", "a", 3, 3, 0)];
    let refs: Vec<&Child> = old.iter().collect();
    // Budget 1 for p only: p 3 → 2, d untouched.
    let ops = scale_down(&names, &[3, 3], &[2, 3], &refs);
    assert_eq!(ops.len(), 1);
    assert!(matches!(&ops[0], Op::Scale { name, to: 2, .. } if name == "ds-0-a-p"));
    // p reaching 0 takes d to 0 as well.
    let ops = scale_down(&names, &[3, 3], &[0, 2], &refs);
    let tos: Vec<i64> = ops
        .iter()
        .map(|o| match o {
            Op::Scale { to, .. } => *to,
            _ => -1,
        })
        .collect();
    assert_eq!(tos, [0, 0]);
}

#[test]
fn a_role_missing_from_an_old_revision_never_coordinates() {
    // Old revision has only p; d is new. Draining p to 0 touches nothing else.
    let names = ["p".to_string(), "d".to_string()];
    let old = [lws("p", "a", 1, 1, 0)];
    let refs: Vec<&Child> = old.iter().collect();
    let ops = scale_down(&names, &[1, 0], &[0, 0], &refs);
    assert_eq!(ops.len(), 1);
}

#[test]
fn a_removed_role_drains_with_the_old_revision() {
    // Spec now has p and e; the old revision had p and d.
    let roles = [role("p", 1), role("e", 1)];
    let mut kids = vec![
        lws("p", "old", 1, 1, 0),
        lws("d", "old", 1, 1, 0),
        lws("p", "new", 1, 1, 1),
        lws("e", "new", 1, 1, 1),
    ];
    kids[0].initial = Some(1);
    kids[1].initial = Some(1);
    let plan = plan_slice("new", &views(&roles), &kids);
    assert_eq!(
        scales(&plan),
        [("ds-0-old-p".into(), 0), ("ds-0-old-d".into(), 0)]
    );
}

#[test]
fn services_wait_for_every_role_and_outlive_a_serving_revision() {
    let roles = ["p".to_string(), "d".to_string()];
    let mut kids = vec![
        lws("p", "old", 1, 1, 0),
        lws("d", "old", 1, 1, 0),
        lws("p", "new", 1, 1, 1),
        lws("d", "new", 1, 0, 1),
    ];
    let svcs = vec![
        ("ds-0-old-p-prv".to_string(), "old".to_string()),
        ("ds-0-old-d-prv".to_string(), "old".to_string()),
    ];
    assert_eq!(
        plan_services("ds", 0, "new", &roles, &kids, &svcs),
        (vec![], vec![]),
        "new not ready on every role: nothing"
    );
    kids[3].ready = 1;
    let (create, delete) = plan_services("ds", 0, "new", &roles, &kids, &svcs);
    assert_eq!(create, ["p", "d"]);
    assert!(delete.is_empty(), "old still serves on every role");
    kids[1].ready = 0;
    let (_, delete) = plan_services("ds", 0, "new", &roles, &kids, &svcs);
    assert_eq!(delete, ["ds-0-old-p-prv", "ds-0-old-d-prv"]);
}
