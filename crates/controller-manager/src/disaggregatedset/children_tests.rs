//! The scenarios of upstream's child managers: names, labels,
//! owners, placement, Services, scalers, targets and status.

use super::*;

fn set(extra: Value) -> DisaggregatedSet {
    let mut v = json!({"metadata": {"name": "ds", "namespace": "ns", "uid": "u-1", "generation": 3},
        "spec": {"roles": [
            {"name": "prefill", "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q", "app": "mine"},
                "annotations": {"team": "ml"}},
             "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2,
                "leaderTemplate": {"metadata": {"labels": {"app": "user"}}, "spec": {"containers": [{"name": "l", "image": "i"}]}},
                "workerTemplate": {"metadata": {"labels": {"role": "prefill"}}, "spec": {"containers": [{"name": "w", "image": "i"}]}}}}},
            {"name": "decode", "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}}}]}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

#[test]
fn an_lws_has_upstreams_name_labels_owner_and_templates() {
    let ds = set(json!({}));
    let l = child_lws(&ds, &ds.spec.roles[0], 1, "abcd1234", 5);
    assert_eq!(l["metadata"]["name"], "ds-1-abcd1234-prefill");
    assert_eq!(l["metadata"]["namespace"], "ns");
    let labels = &l["metadata"]["labels"];
    assert_eq!(labels["app"], "ds-1-prefill", "the system's app label wins");
    assert_eq!(labels["kueue.x-k8s.io/queue-name"], "q");
    assert_eq!(labels[NAME_LABEL], "ds");
    assert_eq!(labels[ROLE_LABEL], "prefill");
    assert_eq!(labels[SLICE_LABEL], "1");
    assert_eq!(labels[REVISION_LABEL], "abcd1234");
    assert_eq!(l["metadata"]["annotations"], json!({"team": "ml"}));
    assert_eq!(
        l["metadata"]["ownerReferences"],
        json!([{"apiVersion": API_VERSION, "kind": "DisaggregatedSet", "name": "ds", "uid": "u-1", "controller": true}])
    );
    assert_eq!(l["spec"]["replicas"], 5);
    assert_eq!(l["spec"]["leaderWorkerTemplate"]["size"], 2);
    for t in ["leaderTemplate", "workerTemplate"] {
        let tl = &l["spec"]["leaderWorkerTemplate"][t]["metadata"]["labels"];
        assert_eq!(tl["app"], "ds-1-prefill", "{t}");
        assert_eq!(tl[SLICE_LABEL], "1", "{t}");
    }
    assert_eq!(
        l["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["role"],
        "prefill"
    );
    assert!(l["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"].is_null());
    // A role without a leader template keeps none.
    let d = child_lws(&ds, &ds.spec.roles[1], 0, "abcd1234", 1);
    assert!(d["spec"]["leaderWorkerTemplate"]
        .get("leaderTemplate")
        .is_none());
}

#[test]
fn a_role_opts_into_hash_groups_through_its_lws_spec() {
    let mut ds = set(json!({}));
    if let Some(s) = ds.spec.roles[0].spec.as_mut() {
        s.group_identity = Some("Hash".into());
        s.group_replacement_policy = Some("Immediate".into());
    }
    let l = child_lws(&ds, &ds.spec.roles[0], 0, "abcd1234", 1);
    assert_eq!(l["spec"]["groupIdentity"], "Hash");
    assert_eq!(l["spec"]["groupReplacementPolicy"], "Immediate");
    let d = child_lws(&ds, &ds.spec.roles[1], 0, "abcd1234", 1);
    assert!(d["spec"].get("groupIdentity").is_none());
}

#[test]
fn placement_goes_on_both_templates() {
    let ds = set(
        json!({"spec": {"placementPolicy": {"type": "ExclusiveTopology", "topology": "zone"}}}),
    );
    let l = child_lws(&ds, &ds.spec.roles[0], 0, "r", 1);
    for t in ["leaderTemplate", "workerTemplate"] {
        let a = &l["spec"]["leaderWorkerTemplate"][t]["spec"]["affinity"];
        let aff = a["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap();
        let anti = a["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap();
        assert_eq!(aff.len(), 1, "{t}");
        assert_eq!(anti.len(), 2, "{t}");
        assert_eq!(aff[0]["topologyKey"], "zone");
        assert_eq!(
            aff[0]["labelSelector"]["matchExpressions"],
            json!([{"key": NAME_LABEL, "operator": "In", "values": ["ds"]},
                   {"key": SLICE_LABEL, "operator": "In", "values": ["0"]}])
        );
        assert_eq!(
            anti[0]["labelSelector"]["matchExpressions"],
            json!([{"key": NAME_LABEL, "operator": "In", "values": ["ds"]},
                   {"key": SLICE_LABEL, "operator": "Exists"},
                   {"key": SLICE_LABEL, "operator": "NotIn", "values": ["0"]}])
        );
        assert_eq!(
            anti[1]["labelSelector"]["matchExpressions"],
            json!([{"key": NAME_LABEL, "operator": "Exists"},
                   {"key": NAME_LABEL, "operator": "NotIn", "values": ["ds"]},
                   {"key": SLICE_LABEL, "operator": "Exists"}])
        );
    }
    // ExclusiveSlice: one anti-affinity term; slice 1 has no Exists.
    let ds =
        set(json!({"spec": {"placementPolicy": {"type": "ExclusiveSlice", "topology": "zone"}}}));
    let l = child_lws(&ds, &ds.spec.roles[1], 1, "r", 1);
    let anti = &l["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"]
        ["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(anti.as_array().unwrap().len(), 1);
    assert_eq!(
        anti[0]["labelSelector"]["matchExpressions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Existing affinity is kept.
    let mut t = json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "host"}]}}}});
    add_placement(
        &mut t,
        "ds",
        0,
        &PlacementPolicy {
            type_: Some("ExclusiveSlice".into()),
            topology: Some("zone".into()),
        },
    );
    assert_eq!(
        t["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn service_and_scaler_shapes() {
    let ds = set(json!({}));
    let s = child_service(&ds, 0, "r1", "decode");
    assert_eq!(s["metadata"]["name"], "ds-0-r1-decode-prv");
    assert_eq!(
        s["spec"],
        json!({"clusterIP": "None", "selector": {
        NAME_LABEL: "ds", ROLE_LABEL: "decode", REVISION_LABEL: "r1", SLICE_LABEL: "0"}})
    );
    assert_eq!(s["metadata"]["labels"], s["spec"]["selector"]);
    let sc = child_scaler(&ds, "decode", 4);
    assert_eq!(sc["metadata"]["name"], "ds-decode");
    assert_eq!(sc["spec"]["replicas"], 4);
    assert_eq!(
        sc["metadata"]["labels"],
        json!({NAME_LABEL: "ds", ROLE_LABEL: "decode"})
    );
    assert_eq!(
        sc["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        true
    );
}

fn child(role: &str, revision: &str, slice: i32, replicas: i64, ready: i64) -> Child {
    Child {
        name: format!("ds-{slice}-{revision}-{role}"),
        role: role.into(),
        revision: revision.into(),
        slice,
        replicas,
        ready,
        status_replicas: replicas,
        updated: ready,
        ..Default::default()
    }
}

#[test]
fn targets_and_seeds() {
    let mut ds = set(json!({}));
    assert_eq!(target(&ds.spec.roles[0], None, 0), 2);
    ds.spec.roles[1].spec.as_mut().unwrap().replicas = None;
    assert_eq!(target(&ds.spec.roles[1], None, 0), 1, "nil → 1");
    ds.spec.roles[0].scaling = Some(RoleScaling {
        mode: Some(MODE_EXTERNAL.into()),
    });
    assert_eq!(target(&ds.spec.roles[0], Some(7), 3), 7);
    assert_eq!(target(&ds.spec.roles[0], Some(0), 3), 0);
    assert_eq!(target(&ds.spec.roles[0], None, 3), 3, "no scaler: keep");
    assert_eq!(scaler_seed(&[], "prefill"), 1);
    let kids = [
        child("prefill", "a", 0, 2, 2),
        child("prefill", "b", 0, 3, 3),
    ];
    assert_eq!(scaler_seed(&kids, "prefill"), 5);
}

#[test]
fn status_sums_every_slice_and_revision() {
    let ds = set(json!({"spec": {"slices": 2}}));
    let kids = [
        child("prefill", "new", 0, 2, 2),
        child("prefill", "new", 1, 2, 1),
        child("prefill", "old", 1, 1, 1),
        child("decode", "new", 0, 1, 1),
        child("gone", "old", 0, 1, 1),
    ];
    let st = role_statuses(&ds, &kids, "new");
    assert_eq!(
        st,
        vec![
            RoleStatus {
                name: "prefill".into(),
                replicas: 5,
                ready_replicas: 4,
                updated_replicas: 3
            },
            RoleStatus {
                name: "decode".into(),
                replicas: 1,
                ready_replicas: 1,
                updated_replicas: 1
            },
        ],
        "spec order; removed roles dropped"
    );
    let targets = BTreeMap::from([("prefill".into(), 2), ("decode".into(), 1)]);
    assert!(!available(&ds, &st, &targets, &BTreeMap::new()));
    let done = [
        child("prefill", "new", 0, 2, 2),
        child("prefill", "new", 1, 2, 2),
        child("decode", "new", 0, 1, 1),
        child("decode", "new", 1, 1, 1),
    ];
    let st = role_statuses(&ds, &done, "new");
    assert!(available(&ds, &st, &targets, &BTreeMap::new()));
    // All zero is Available once drained.
    let zero = BTreeMap::from([("prefill".into(), 0), ("decode".into(), 0)]);
    assert!(available(
        &ds,
        &role_statuses(&ds, &[], "new"),
        &zero,
        &BTreeMap::new()
    ));
    // An External role without its scaler is never Available.
    let mut ext = ds.clone();
    ext.spec.roles[0].scaling = Some(RoleScaling {
        mode: Some(MODE_EXTERNAL.into()),
    });
    assert!(!available(&ext, &st, &targets, &BTreeMap::new()));
    assert!(available(
        &ext,
        &st,
        &targets,
        &BTreeMap::from([("prefill".into(), 2)])
    ));
}

#[test]
fn conditions_flip_and_keep_their_times() {
    let t0 = minik8s_api::meta::time_of(chrono::DateTime::from_timestamp(1000, 0).unwrap());
    let t1 = minik8s_api::meta::time_of(chrono::DateTime::from_timestamp(2000, 0).unwrap());
    let fresh = set_conditions(&[], false, 1, &t0);
    assert_eq!(fresh.len(), 1, "a fresh set: Progressing only");
    assert_eq!(
        (fresh[0].type_.as_str(), fresh[0].status.as_str()),
        (PROGRESSING, "True")
    );
    assert_eq!(fresh[0].reason, "RolloutInProgress");
    // Same status, new generation: time kept.
    let again = set_conditions(&fresh, false, 2, &t1);
    assert_eq!(again[0].last_transition_time, t0);
    assert_eq!(again[0].observed_generation, Some(2));
    let up = set_conditions(&again, true, 2, &t1);
    let get = |cs: &[Condition], t: &str| cs.iter().find(|c| c.type_ == t).cloned().unwrap();
    assert_eq!(get(&up, AVAILABLE).status, "True");
    assert_eq!(get(&up, AVAILABLE).reason, "AllRolesReady");
    let p = get(&up, PROGRESSING);
    assert_eq!(
        (
            p.status.as_str(),
            p.reason.as_str(),
            &p.last_transition_time
        ),
        ("False", "AllRolesReady", &t1)
    );
    // Other condition types are untouched.
    let mut other = up.clone();
    other.push(Condition {
        type_: "Custom".into(),
        status: "True".into(),
        reason: "X".into(),
        message: String::new(),
        last_transition_time: t0.clone(),
        observed_generation: Some(1),
    });
    let after = set_conditions(&other, false, 3, &t1);
    assert_eq!(get(&after, "Custom").observed_generation, Some(1));
}
