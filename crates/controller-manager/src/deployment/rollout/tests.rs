//! Worked examples of Kubernetes' rollout arithmetic.

use super::*;

fn rs(name: &str, replicas: i32, available: i32) -> RsView {
    RsView {
        name: name.into(),
        replicas,
        status_replicas: replicas,
        ready: available,
        available,
        max_replicas: None,
    }
}

fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

#[test]
fn percents_round_surge_up_and_unavailability_down() {
    let q = pct("25%");
    assert_eq!(fenceposts(Some(&q), Some(&q), 10), (3, 2));
    assert_eq!(fenceposts(Some(&q), Some(&q), 4), (1, 1));
    assert_eq!(fenceposts(Some(&q), Some(&q), 1), (1, 0));
    // Both zero would never progress: one pod may be unavailable.
    let zero = IntOrString::Int(0);
    assert_eq!(fenceposts(Some(&zero), Some(&pct("0%")), 3), (0, 1));
    assert_eq!(
        fenceposts(Some(&IntOrString::Int(2)), Some(&pct("100%")), 3),
        (2, 3)
    );
    assert_eq!(scaled_value(Some(&pct("33%")), 10, true), 4);
    assert_eq!(scaled_value(Some(&pct("33%")), 10, false), 3);
    assert_eq!(scaled_value(Some(&pct("nonsense")), 10, false), 0);
}

#[test]
fn the_new_replica_set_grows_within_the_surge() {
    let old = rs("old", 10, 10);
    // 10 replicas, surge 3: the new set may take 3 while the old keeps 10.
    let new = rs("new", 0, 0);
    assert_eq!(new_rs_replicas(10, 3, &new, &[&old, &new]), 3);
    // At 13 pods in all, nothing more until old pods go.
    let new = rs("new", 3, 0);
    assert_eq!(new_rs_replicas(10, 3, &new, &[&old, &new]), 3);
    let old = rs("old", 8, 8);
    assert_eq!(new_rs_replicas(10, 3, &new, &[&old, &new]), 5);
    // Never past the deployment's replicas.
    let old = rs("old", 0, 0);
    assert_eq!(new_rs_replicas(10, 3, &new, &[&old, &new]), 10);
    // Surge 0 (maxUnavailable only): growth waits for the old set to shrink.
    let old = rs("old", 4, 4);
    let new = rs("new", 0, 0);
    assert_eq!(new_rs_replicas(4, 0, &new, &[&old, &new]), 0);
}

#[test]
fn old_replica_sets_shrink_down_to_the_minimum_availability() {
    // 10 replicas, maxUnavailable 2: 3 new pods not yet available, the old
    // set may give up 2 (13 - 8 - 3).
    let new = rs("new", 3, 0);
    let old = rs("old", 10, 10);
    assert_eq!(scale_down_old(10, 2, &new, &[&old]), [("old".into(), 8)]);
    // With the 3 new ones available, 5 more may go.
    let new = rs("new", 3, 3);
    let old = rs("old", 8, 8);
    assert_eq!(scale_down_old(10, 2, &new, &[&old]), [("old".into(), 5)]);
    // At the minimum: nothing.
    let new = rs("new", 3, 0);
    let old = rs("old", 8, 8);
    assert!(scale_down_old(10, 2, &new, &[&old]).is_empty());
    // maxUnavailable 0 with 4 replicas: old pods go only as new ones become available.
    let new = rs("new", 1, 1);
    let old = rs("old", 4, 4);
    assert_eq!(scale_down_old(4, 0, &new, &[&old]), [("old".into(), 3)]);
}

#[test]
fn pods_an_old_set_is_already_removing_are_not_counted_twice() {
    // maxSurge 1, maxUnavailable 0, 4 replicas: the old set was scaled 4 → 3
    // a step ago but still reports 4 available (its fourth pod is
    // terminating). With 2 new pods available, one more old pod may go, not two.
    let new = rs("new", 2, 2);
    let old = rs("old", 3, 4);
    assert_eq!(scale_down_old(4, 0, &new, &[&old]), [("old".into(), 2)]);
}

#[test]
fn unhealthy_old_pods_go_first_and_oldest_sets_first() {
    // Two old sets; the older has 2 unavailable pods: they go before any
    // available one, then the older set shrinks before the newer.
    let new = rs("new", 2, 2);
    let oldest = rs("oldest", 4, 2);
    let older = rs("older", 4, 4);
    let changes = scale_down_old(8, 2, &new, &[&oldest, &older]);
    // all 10, min available 6, new unavailable 0: up to 4 may go; 2
    // unhealthy from "oldest"; then available 8 > 6: 2 more, from "oldest".
    assert_eq!(changes, [("oldest".into(), 0)]);
    // 9 pods, 9 available, at least 6 must stay: 3 go, the oldest set's
    // one first, then 2 of the newer old set's.
    let new = rs("new", 2, 2);
    let oldest = rs("oldest", 1, 1);
    let older = rs("older", 6, 6);
    assert_eq!(
        scale_down_old(8, 2, &new, &[&oldest, &older]),
        [("oldest".into(), 0), ("older".into(), 4)]
    );
}

#[test]
fn scaling_in_the_middle_of_a_rollout_is_proportional() {
    // Kubernetes' documented example: 10 replicas, maxSurge 3, maxUnavailable
    // 2, a rollout stuck at 8 old and 5 new; scaled to 15, the 5 extra
    // pods go 3 to the old set and 2 to the new one.
    let mut old = rs("old", 8, 8);
    let mut new = rs("new", 5, 0);
    old.max_replicas = Some(13);
    new.max_replicas = Some(13);
    let sizes = proportional_sizes(15, 3, 13, &[&new, &old]);
    let get = |n: &str| sizes.iter().find(|(name, _)| name == n).unwrap().1;
    assert_eq!((get("old"), get("new")), (11, 7));
    // Scaled to 0: everything goes.
    let sizes = proportional_sizes(0, 3, 13, &[&new, &old]);
    assert!(sizes.iter().all(|(_, s)| *s == 0), "{sizes:?}");
    // Scaled down to 5 (allowed 5 + 2 = 7 with a 25 % surge): 6 fewer pods.
    let sizes = proportional_sizes(5, 2, 13, &[&new, &old]);
    let total: i32 = sizes.iter().map(|(_, s)| s).sum();
    assert_eq!(total, 7, "{sizes:?}");
    assert!(get("old") >= get("new"));
}

#[test]
fn status_counts_and_conditions() {
    let new = rs("new", 3, 2);
    let old = rs("old", 1, 1);
    let c = counts(Some(&new), &[&new, &old]);
    assert_eq!(
        c,
        Counts {
            replicas: 4,
            updated: 3,
            ready: 3,
            available: 3,
            unavailable: 1
        }
    );
    assert!(!complete(&c, 3));
    let later = Counts {
        replicas: 3,
        updated: 3,
        ready: 3,
        available: 3,
        unavailable: 0,
    };
    assert!(progressing(&c, &later));
    assert!(complete(&later, 3));
    assert!(!progressing(&later, &later));

    let now = "2026-11-24T10:00:00Z";
    assert_eq!(available_condition(&c, 3, 1, now)["status"], "True");
    assert_eq!(
        available_condition(&c, 4, 0, now)["reason"],
        "MinimumReplicasUnavailable"
    );
    let mut conds = vec![condition(
        "Progressing",
        "True",
        "ReplicaSetUpdated",
        "m",
        "t0",
    )];
    set_condition(
        &mut conds,
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            "done",
            "t1",
        ),
    );
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0]["reason"], "NewReplicaSetAvailable");
    assert_eq!(
        conds[0]["lastTransitionTime"], "t0",
        "same status keeps its transition"
    );
    set_condition(
        &mut conds,
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            "again",
            "t2",
        ),
    );
    assert_eq!(
        conds[0]["message"], "done",
        "same status and reason: unchanged"
    );
}
