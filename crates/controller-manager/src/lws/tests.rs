//! The LeaderWorkerSet controller's decisions against upstream's worked traces.
use super::*;
use minik8s_api::lws::NetworkConfig;

fn rollout(r: i32, u: i32, g: i32) -> Rollout {
    Rollout {
        replicas: r,
        max_unavailable: u,
        max_surge: g.min(r),
        partition: 0,
    }
}

/// A simulated cluster for the reference's traces: per group (ready, updated).
struct Sim {
    r: Rollout,
    sts: LeaderSts,
    groups: Vec<Group>,
}

impl Sim {
    fn new(r: Rollout) -> Sim {
        let groups = vec![
            Group {
                ready: true,
                updated: true
            };
            r.replicas as usize
        ];
        Sim {
            sts: LeaderSts {
                replicas: r.replicas,
                partition: 0,
                applied_replicas: Some(r.replicas),
            },
            r,
            groups,
        }
    }

    /// One reconcile: compute, apply to the set, let the set create new
    /// groups (born updated, not ready) and drop removed ones.
    fn step(&mut self, new_revision: bool) -> (i32, i32) {
        let snapshot = self.groups.clone();
        let g = |i: i32| snapshot.get(i as usize).copied().unwrap_or_default();
        let (p, n) = partition_and_replicas(&self.r, Some(&self.sts), new_revision, g);
        self.sts = LeaderSts {
            replicas: n,
            partition: p,
            applied_replicas: Some(self.r.replicas),
        };
        self.groups.resize(
            n as usize,
            Group {
                ready: false,
                updated: true,
            },
        );
        (p, n)
    }

    /// A template change: every group becomes outdated, then reconcile
    /// until stable (the partition countdown runs as far as it can).
    fn update(&mut self) -> (i32, i32) {
        for g in &mut self.groups {
            g.updated = false;
        }
        self.step(true);
        self.settle()
    }

    fn settle(&mut self) -> (i32, i32) {
        let mut last = (self.sts.partition, self.sts.replicas);
        loop {
            let now = self.step(false);
            if now == last {
                return now;
            }
            last = now;
        }
    }

    /// The set recreated group i from the new template and it became ready.
    fn ready(&mut self, i: usize) -> (i32, i32) {
        self.groups[i] = Group {
            ready: true,
            updated: true,
        };
        self.settle()
    }
}

#[test]
fn fresh_lws_creates_every_group_without_surge() {
    let r = rollout(4, 1, 2);
    assert_eq!(
        partition_and_replicas(&r, None, false, |_| Group::default()),
        (0, 4)
    );
}

#[test]
fn trace_r4_u1_g0() {
    let mut s = Sim::new(rollout(4, 1, 0));
    assert_eq!(s.update(), (3, 4));
    assert_eq!(s.ready(3), (2, 4));
    assert_eq!(s.ready(1), (2, 4), "g1 alone does not move the partition");
    s.groups[3].ready = false;
    assert_eq!(s.settle(), (2, 4), "the partition only moves down");
    s.groups[3].ready = true;
    s.groups[2] = Group {
        ready: true,
        updated: true,
    };
    s.groups[0] = Group {
        ready: true,
        updated: true,
    };
    assert_eq!(s.settle(), (0, 4));
}

#[test]
fn trace_r4_u2() {
    let mut s = Sim::new(rollout(4, 2, 0));
    assert_eq!(s.update(), (2, 4));
    assert_eq!(s.ready(3), (1, 4));
    assert_eq!(s.ready(2), (0, 4));
}

#[test]
fn trace_r4_u10_updates_all_groups_at_once() {
    let mut s = Sim::new(rollout(4, 10, 0));
    assert_eq!(s.update(), (0, 4));
}

#[test]
fn trace_r4_u1_g1() {
    let mut s = Sim::new(rollout(4, 1, 1));
    assert_eq!(s.update(), (3, 5), "surge group 4 is born new");
    assert_eq!(s.ready(4), (2, 5));
    assert_eq!(s.ready(3), (1, 5));
    assert_eq!(s.ready(2), (0, 5));
    assert_eq!(s.ready(1), (0, 4), "the surge is reclaimed");
    assert_eq!(s.ready(0), (0, 4));
}

#[test]
fn trace_r4_u0_g1() {
    let mut s = Sim::new(rollout(4, 0, 1));
    assert_eq!(s.update(), (4, 5));
    assert_eq!(s.ready(4), (3, 5));
    assert_eq!(s.ready(3), (2, 5));
    assert_eq!(s.ready(2), (1, 5));
    assert_eq!(s.ready(1), (0, 5));
    assert_eq!(s.ready(0), (0, 4));
}

#[test]
fn trace_r4_u2_g2() {
    let mut s = Sim::new(rollout(4, 2, 2));
    assert_eq!(s.update(), (2, 6));
    s.groups[3] = Group {
        ready: true,
        updated: true,
    };
    assert_eq!(s.ready(2), (0, 4), "both surge groups are reclaimed");
}

#[test]
fn trace_r2_surge_capped() {
    let mut s = Sim::new(rollout(2, 1, 4));
    assert_eq!(s.update(), (1, 3));
}

#[test]
fn trace_r4_g4_u1_bursts_to_seven() {
    let r = rollout(4, 1, 4);
    let sts = LeaderSts {
        replicas: 4,
        partition: 0,
        applied_replicas: Some(4),
    };
    let (_, n) = partition_and_replicas(&r, Some(&sts), true, |_| Group {
        ready: true,
        updated: false,
    });
    assert_eq!(n, 7);
    let mut s = Sim::new(r);
    s.update();
    for i in (0..7).rev() {
        s.groups[i] = Group {
            ready: true,
            updated: true,
        };
    }
    assert_eq!(s.settle().1, 4);
}

#[test]
fn trace_scale_up_with_template_change() {
    // R 4 → 6 with a template change (U=2, G=2): scale up first, new groups
    // are born new; once they are ready, old groups 0 and 1 stay old for now.
    let mut s = Sim::new(rollout(4, 2, 2));
    s.r = rollout(6, 2, 2);
    for g in &mut s.groups {
        g.updated = false;
    }
    assert_eq!(s.step(true), (4, 6));
    s.groups[4] = Group {
        ready: true,
        updated: true,
    };
    // Four old groups are still to update (more than G): burst to R + G.
    assert_eq!(s.ready(5), (2, 8));
}

#[test]
fn trace_template_change_then_scale_down() {
    let r6 = rollout(6, 1, 0);
    let sts = LeaderSts {
        replicas: 6,
        partition: 0,
        applied_replicas: Some(6),
    };
    let outdated = |_| Group {
        ready: true,
        updated: false,
    };
    assert_eq!(partition_and_replicas(&r6, Some(&sts), true, outdated).0, 6);
    let sts = LeaderSts {
        replicas: 6,
        partition: 5,
        applied_replicas: Some(6),
    };
    let r3 = rollout(3, 1, 0);
    let (p, n) = partition_and_replicas(&r3, Some(&sts), false, outdated);
    assert_eq!((p, n), (3, 3), "capped at the new burst");
    let sts = LeaderSts {
        replicas: 3,
        partition: 3,
        applied_replicas: Some(3),
    };
    assert_eq!(
        partition_and_replicas(&r3, Some(&sts), false, outdated),
        (2, 3)
    );
}

#[test]
fn trace_budget_already_consumed_by_a_broken_group() {
    let mut s = Sim::new(rollout(4, 2, 0));
    s.groups[1].ready = false;
    assert_eq!(s.update(), (3, 4));
}

#[test]
fn trace_every_group_unready() {
    let mut s = Sim::new(rollout(2, 1, 0));
    s.groups[0].ready = false;
    s.groups[1].ready = false;
    assert_eq!(s.update(), (1, 2));
    assert_eq!(s.ready(1), (0, 2));
}

#[test]
fn trace_lws_partition_holds_groups_back() {
    let mut r = rollout(6, 1, 0);
    r.partition = 4;
    let mut s = Sim::new(r);
    assert_eq!(s.settle(), (4, 6), "at rest the partition stays 4");
    assert_eq!(s.update(), (5, 6));
    assert_eq!(s.ready(5), (4, 6));
    assert_eq!(s.ready(4), (4, 6));
    s.r.partition = 2;
    assert_eq!(s.settle(), (3, 6));
    assert_eq!(s.ready(3), (2, 6));
}

#[test]
fn trace_partition_with_surge_keeps_the_surge_until_partition_zero() {
    let mut r = rollout(3, 1, 1);
    r.partition = 2;
    let mut s = Sim::new(r);
    assert_eq!(s.update(), (2, 4));
    assert_eq!(s.ready(3), (2, 4));
    assert_eq!(s.ready(2), (2, 4), "surge group 3 stays");
    s.r.partition = 0;
    s.settle();
    s.ready(1);
    assert_eq!(s.ready(0), (0, 3));
}

fn g(index: i32, ready: bool, updated: bool) -> GroupStatus {
    GroupStatus {
        index,
        ready,
        updated,
    }
}

#[test]
fn status_branches() {
    let r = rollout(2, 1, 1);
    assert_eq!(
        status_of(&[g(0, true, true), g(1, true, true)], &r),
        (2, 2, Assert::Available)
    );
    assert_eq!(
        status_of(&[g(0, false, true), g(1, true, true)], &r),
        (1, 2, Assert::Progressing)
    );
    assert_eq!(
        status_of(
            &[g(0, true, false), g(1, true, true), g(2, false, true)],
            &r
        ),
        (2, 2, Assert::Updating)
    );
    // Groups below the LWS partition need not be updated to be Available.
    let mut rp = rollout(2, 1, 0);
    rp.partition = 1;
    assert_eq!(
        status_of(&[g(0, true, false), g(1, true, true)], &rp).2,
        Assert::Available
    );
}

#[test]
fn conditions_flip_their_partners_but_keep_their_text() {
    let t0 = minik8s_api::meta::time_now();
    let (c, first) = set_conditions(&[], Assert::Progressing, 1, &t0);
    assert_eq!(first, Some(PROGRESSING));
    assert_eq!(c.len(), 1);
    let (c, first) = set_conditions(&c, Assert::Available, 1, &t0);
    assert_eq!(first, Some(AVAILABLE));
    let p = c.iter().find(|c| c.type_ == PROGRESSING).unwrap();
    assert_eq!(p.status, "False");
    assert_eq!(p.message, "Replicas are progressing");
    let (c, first) = set_conditions(&c, Assert::Updating, 2, &t0);
    assert_eq!(
        first,
        Some(UPDATE_IN_PROGRESS),
        "the update's reason leads the event"
    );
    let a = c.iter().find(|c| c.type_ == AVAILABLE).unwrap();
    assert_eq!(
        (a.status.as_str(), a.message.as_str()),
        ("False", "All replicas are ready")
    );
    assert!(c.iter().all(|c| c.observed_generation == Some(2)));
    let (same, first) = set_conditions(&c, Assert::Updating, 2, &t0);
    assert_eq!(first, None);
    assert_eq!(same, c);
}

#[test]
fn revision_ignores_replicas_and_rollout_but_not_templates() {
    let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}}}))
    .unwrap();
    let base = revision_hash(&revision_payload(&lws));
    let mut other = lws.clone();
    other.spec.replicas = Some(5);
    other.spec.startup_policy = Some("LeaderReady".into());
    assert_eq!(revision_hash(&revision_payload(&other)), base);
    other.spec.network_config = Some(NetworkConfig {
        subdomain_policy: Some("Shared".into()),
    });
    assert_eq!(
        revision_hash(&revision_payload(&other)),
        base,
        "nil networkConfig is Shared"
    );
    other.spec.leader_worker_template.size = Some(4);
    assert_ne!(revision_hash(&revision_payload(&other)), base);
    let (lwt, nc) = from_revision(&revision_payload(&other)).unwrap();
    assert_eq!(lwt.size, Some(4));
    assert_eq!(nc.subdomain_policy.as_deref(), Some("Shared"));
}

#[test]
fn leader_set_shape() {
    let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "ns", "uid": "u",
            "labels": {"team": "a"}, "annotations": {EXCLUSIVE_TOPOLOGY: "zone", GROUP_RESTARTS: "{}"}},
        "spec": {"replicas": 2, "networkConfig": {"subdomainPolicy": "UniquePerReplica"},
            "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 1}},
            "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}}}}))
    .unwrap();
    let s = leader_statefulset(&lws, "k1", 1, 3);
    assert_eq!(
        s["metadata"]["labels"],
        json!({"team": "a", NAME: "d", REVISION_KEY: "k1", ROLE: "leader"})
    );
    assert_eq!(s["metadata"]["annotations"][REPLICAS], "2");
    assert!(s["metadata"]["annotations"].get(GROUP_RESTARTS).is_none());
    assert_eq!(s["spec"]["serviceName"], "d");
    assert_eq!(s["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(
        s["spec"]["updateStrategy"]["rollingUpdate"],
        json!({"partition": 1, "maxUnavailable": 3})
    );
    assert_eq!(
        s["spec"]["selector"]["matchLabels"],
        json!({NAME: "d", WORKER_INDEX: "0"})
    );
    let t = &s["spec"]["template"]["metadata"];
    assert_eq!(t["labels"]["app"], "x");
    assert_eq!(t["labels"][WORKER_INDEX], "0");
    assert_eq!(t["annotations"][SIZE], "3");
    assert_eq!(t["annotations"][EXCLUSIVE_TOPOLOGY], "zone");
    assert_eq!(t["annotations"][SUBDOMAIN_POLICY], "UniquePerReplica");
    assert_eq!(
        s["metadata"]["ownerReferences"][0]["kind"],
        "LeaderWorkerSet"
    );
}

#[test]
fn event_notes() {
    assert_eq!(updating_note(4, 3).as_deref(), Some("Updating replica 3"));
    assert_eq!(
        updating_note(4, 2).as_deref(),
        Some("Updating replicas 2 to 3 (inclusive)")
    );
    assert_eq!(updating_note(2, 2), None);
    assert_eq!(
        surge_note("d", 5, 4, 4).as_deref(),
        Some("deleting surge replica d-4")
    );
    assert_eq!(
        surge_note("d", 6, 4, 4).as_deref(),
        Some("deleting surge replicas from d-4 to d-5")
    );
}

#[test]
fn both_sets_get_the_reduced_claim_templates_and_retention() {
    let lws: LeaderWorkerSet = serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "ns", "uid": "u"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2,
            "workerTemplate": {"spec": {"containers": []}},
            "volumeClaimTemplates": [{"metadata": {"name": "pvc1", "labels": {"dropped": "yes"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                         "selector": {"matchLabels": {"dropped": "yes"}},
                         "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}}}}],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}}}}))
    .unwrap();
    let expected = json!([{"metadata": {"name": "pvc1"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}}}}]);
    let leader = leader_statefulset(&lws, "k1", 0, 2);
    assert_eq!(leader["spec"]["volumeClaimTemplates"], expected);
    assert_eq!(
        leader["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Delete"})
    );
    let mut worker = json!({"spec": {}});
    crate::lws::rollout::add_claim_templates(&mut worker, &lws.spec.leader_worker_template);
    assert_eq!(worker["spec"]["volumeClaimTemplates"], expected);
}
