use super::*;
use minik8s_api::hash::sha1_hex;

fn leader(name: &str, ann: Value) -> Value {
    let mut a = json!({SIZE: "3"});
    json_patch::merge(&mut a, &ann);
    json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {NAME: "demo", WORKER_INDEX: "0", REVISION_KEY: "abc"}, "annotations": a},
           "spec": {"subdomain": "demo", "containers": [{"name": "c", "image": "i",
                    "env": [{"name": "A", "value": "1"}, {"name": "LWS_GROUP_SIZE", "value": "user"}]}],
                    "initContainers": [{"name": "init", "image": "i"}]}})
}

fn worker(name: &str, leader: &str, ann: Value) -> Value {
    let mut a = json!({SIZE: "3", LEADER_NAME: leader});
    json_patch::merge(&mut a, &ann);
    json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {NAME: "demo", GROUP_INDEX: "1", GROUP_KEY: group_key("ns", leader), REVISION_KEY: "abc"},
            "annotations": a},
           "spec": {"subdomain": "demo", "containers": [{"name": "c", "image": "i"}]}})
}

fn env(pod: &Value, c: usize) -> Vec<(String, String)> {
    pod["spec"]["containers"][c]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["value"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn leader_gets_group_labels_and_env_first() {
    let mut p = leader("demo-1", json!({}));
    admit_pod(&mut p).unwrap();
    let l = &p["metadata"]["labels"];
    assert_eq!(l[GROUP_INDEX], "1");
    assert_eq!(l[ROLE], "leader");
    assert_eq!(l[GROUP_KEY], sha1_hex("ns/demo-1"));
    assert_eq!(l[GROUP_KEY].as_str().unwrap().len(), 40);
    assert_eq!(
        env(&p, 0),
        vec![
            ("LWS_LEADER_ADDRESS".into(), "demo-1.demo.ns".into()),
            ("LWS_GROUP_SIZE".into(), "3".into()),
            ("LWS_WORKER_INDEX".into(), "0".into()),
            ("A".into(), "1".into()),
        ]
    );
    assert_eq!(p["spec"]["initContainers"][0]["env"][2]["value"], "0");
}

#[test]
fn group_claims_point_at_the_groups_own_claim() {
    let entries = json!([{"name": "gpu", "resourceClaimName": "demo-group-gpu"},
                         {"name": "mine", "resourceClaimName": "own"}]);
    let mut l = leader("demo-3", json!({GROUP_RESOURCE_CLAIMS: "gpu"}));
    l["spec"]["resourceClaims"] = entries.clone();
    admit_pod(&mut l).unwrap();
    assert_eq!(
        l["spec"]["resourceClaims"][0]["resourceClaimName"],
        "demo-3-gpu"
    );
    assert_eq!(l["spec"]["resourceClaims"][1]["resourceClaimName"], "own");
    let mut w = worker("demo-1-2", "demo-1", json!({GROUP_RESOURCE_CLAIMS: "gpu"}));
    w["spec"]["resourceClaims"] = entries;
    admit_pod(&mut w).unwrap();
    assert_eq!(
        w["spec"]["resourceClaims"][0]["resourceClaimName"],
        "demo-1-gpu"
    );
}

#[test]
fn worker_index_comes_from_the_name() {
    let mut p = worker("demo-1-2", "demo-1", json!({}));
    admit_pod(&mut p).unwrap();
    assert_eq!(p["metadata"]["labels"][WORKER_INDEX], "2");
    let e = env(&p, 0);
    assert_eq!(e[0].1, "demo-1.demo.ns");
    assert_eq!(e[2].1, "2");
}

#[test]
fn unique_per_replica_leader_is_its_own_subdomain() {
    let mut p = leader("demo-0", json!({SUBDOMAIN_POLICY: "UniquePerReplica"}));
    admit_pod(&mut p).unwrap();
    assert_eq!(p["spec"]["subdomain"], "demo-0");
    assert_eq!(env(&p, 0)[0].1, "demo-0.demo-0.ns");
}

#[test]
fn size_annotation_is_required_and_others_pass_untouched() {
    let mut p = leader("demo-0", json!({}));
    p["metadata"]["annotations"] = json!({});
    assert!(admit_pod(&mut p).unwrap_err().field.contains(SIZE));
    let mut plain =
        json!({"metadata": {"name": "x", "labels": {"app": "a"}}, "spec": {"containers": []}});
    let before = plain.clone();
    admit_pod(&mut plain).unwrap();
    assert_eq!(plain, before);
}

#[test]
fn exclusive_topology_is_scoped_to_the_lws() {
    let mut p = leader("demo-0", json!({EXCLUSIVE_TOPOLOGY: "zone"}));
    admit_pod(&mut p).unwrap();
    let key = p["metadata"]["labels"][GROUP_KEY].clone();
    let aff = &p["spec"]["affinity"];
    let pa = &aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(pa["topologyKey"], "zone");
    assert_eq!(pa["labelSelector"]["matchExpressions"][0]["values"][0], key);
    let anti = &aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    let exprs = anti["labelSelector"]["matchExpressions"]
        .as_array()
        .unwrap();
    assert_eq!(exprs[0], json!({"key": GROUP_KEY, "operator": "Exists"}));
    assert_eq!(exprs[1]["operator"], "NotIn");
    assert_eq!(
        exprs[2],
        json!({"key": NAME, "operator": "In", "values": ["demo"]})
    );
    // Admitting twice does not add the terms twice.
    admit_pod(&mut p).unwrap();
    assert_eq!(
        p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn subgroups_follow_the_reference_examples() {
    // n=4, s=2: {L, w1} = 0, {w2, w3} = 1. n=5, s=2: {L, w1, w2} = 0, {w3, w4} = 1.
    assert_eq!(
        (1..4)
            .map(|j| subgroup_of_worker(j, 4, 2))
            .collect::<Vec<_>>(),
        vec![0, 1, 1]
    );
    assert_eq!(
        (1..5)
            .map(|j| subgroup_of_worker(j, 5, 2))
            .collect::<Vec<_>>(),
        vec![0, 0, 1, 1]
    );
    assert_eq!(
        (1..3)
            .map(|j| subgroup_of_worker(j, 3, 1))
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    let mut l = leader("demo-0", json!({SUBGROUP_SIZE: "2", SIZE: "4"}));
    admit_pod(&mut l).unwrap();
    assert_eq!(l["metadata"]["labels"][SUBGROUP_INDEX], "0");
    assert_eq!(l["metadata"]["labels"][SUBGROUP_KEY], sha1_hex("demo-0/0"));
    let mut excluded = leader(
        "demo-0",
        json!({SUBGROUP_SIZE: "2", SUBGROUP_POLICY_TYPE: "LeaderExcluded"}),
    );
    admit_pod(&mut excluded).unwrap();
    assert!(excluded["metadata"]["labels"].get(SUBGROUP_INDEX).is_none());
    let mut w = worker("demo-0-3", "demo-0", json!({SUBGROUP_SIZE: "2", SIZE: "4"}));
    admit_pod(&mut w).unwrap();
    assert_eq!(w["metadata"]["labels"][SUBGROUP_INDEX], "1");
    assert_eq!(w["metadata"]["labels"][SUBGROUP_KEY], sha1_hex("demo-0/1"));
}

#[test]
fn tpu_env_lists_the_group_hosts() {
    // size 2, 2 TPU containers each: hosts L-0.sub,L-0.sub,L-0-1.sub,L-0-1.sub.
    let tpu = json!({"limits": {TPU_RESOURCE: "4"}});
    let mut p = leader("demo-0", json!({SIZE: "2"}));
    p["spec"]["containers"] = json!([{"name": "a", "image": "i", "resources": tpu},
                                     {"name": "b", "image": "i", "resources": tpu}]);
    admit_pod(&mut p).unwrap();
    let e: std::collections::HashMap<_, _> = env(&p, 1).into_iter().collect();
    assert_eq!(
        e["TPU_WORKER_HOSTNAMES"],
        "demo-0.demo,demo-0.demo,demo-0-1.demo,demo-0-1.demo"
    );
    assert_eq!(e["TPU_WORKER_ID"], "1");
    assert_eq!(e["TPU_NAME"], "demo-0");
    assert_eq!(e["TPU_PROCESS_PORT"], "8477");
    // A worker whose leader has no TPUs: size 11, s=5, worker 7 → L-1-6…L-1-10.
    let mut w = worker(
        "demo-1-7",
        "demo-1",
        json!({SIZE: "11", SUBGROUP_SIZE: "5"}),
    );
    w["spec"]["containers"][0]["resources"] = tpu;
    admit_pod(&mut w).unwrap();
    let e: std::collections::HashMap<_, _> = env(&w, 0).into_iter().collect();
    assert_eq!(
        e["TPU_WORKER_HOSTNAMES"],
        "demo-1-6.demo,demo-1-7.demo,demo-1-8.demo,demo-1-9.demo,demo-1-10.demo"
    );
    assert_eq!(e["TPU_WORKER_ID"], "1");
}

#[test]
fn gang_pods_are_named_after_their_group_and_revision() {
    let mut p = worker("demo-1-1", "demo-1", json!({GANG_MIN_MEMBER: "3"}));
    admit_pod(&mut p).unwrap();
    assert_eq!(p["metadata"]["annotations"][GANG_GROUP_NAME], "demo-1-abc");
}

#[test]
fn hash_leaders_get_a_random_key_both_gates_and_their_own_ip() {
    let hash = json!({GROUP_IDENTITY: "Hash", GROUP_REPLACEMENT: "PostTermination",
        SUBDOMAIN_POLICY: "UniquePerReplica", SUBGROUP_SIZE: "3"});
    let mut a = leader("demo-7c9f8d6b4-x2k9q", hash.clone());
    let mut b = leader("demo-7c9f8d6b4-h8m2p", hash);
    admit_pod(&mut a).unwrap();
    admit_pod(&mut b).unwrap();
    let key = |p: &Value| {
        p["metadata"]["labels"][GROUP_KEY]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (ka, kb) = (key(&a), key(&b));
    assert_eq!(ka.len(), 40);
    assert!(ka.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(ka, kb, "each group its own key");
    assert_eq!(a["metadata"]["labels"][GROUP_INDEX], ka);
    assert_eq!(
        a["spec"]["readinessGates"],
        json!([{"conditionType": GROUP_READY}])
    );
    assert_eq!(
        a["spec"]["schedulingGates"],
        json!([{"name": REPLACEMENT_GATE}])
    );
    assert_eq!(a["spec"]["subdomain"], hash_group_service("demo", &ka));
    assert_eq!(
        a["metadata"]["labels"][SUBGROUP_KEY],
        subgroup_key(&ka, 0),
        "subgroups follow the key, not the pod name"
    );
    let addr = &a["spec"]["containers"][0]["env"][0];
    assert_eq!(addr["name"], "LWS_LEADER_ADDRESS");
    assert_eq!(addr["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
    // Immediate replacement: no scheduling gate.
    let mut c = leader("demo-1", json!({GROUP_IDENTITY: "Hash"}));
    admit_pod(&mut c).unwrap();
    assert!(c["spec"].get("schedulingGates").is_none());
    assert_eq!(c["spec"]["readinessGates"][0]["conditionType"], GROUP_READY);
}

#[test]
fn hash_workers_reach_their_leader_by_ip() {
    let key = new_group_key();
    let mut w = worker(
        "demo-7c9f8d6b4-x2k9q-2",
        "demo-7c9f8d6b4-x2k9q",
        json!({GROUP_IDENTITY: "Hash", LEADER_ADDRESS: "10.0.3.7", SUBGROUP_SIZE: "3"}),
    );
    w["metadata"]["labels"][GROUP_KEY] = json!(key);
    w["metadata"]["labels"][GROUP_INDEX] = json!(key);
    admit_pod(&mut w).unwrap();
    assert_eq!(
        env(&w, 0)[0],
        ("LWS_LEADER_ADDRESS".into(), "10.0.3.7".into())
    );
    assert_eq!(env(&w, 0)[2], ("LWS_WORKER_INDEX".into(), "2".into()));
    assert_eq!(w["metadata"]["labels"][SUBGROUP_KEY], subgroup_key(&key, 0));
    assert!(
        w["spec"].get("readinessGates").is_none(),
        "only leaders wait for the group"
    );
    // Without the leader's address the worker is refused, never started wrong.
    let mut w = worker("demo-x-1", "demo-x", json!({GROUP_IDENTITY: "Hash"}));
    let err = admit_pod(&mut w).unwrap_err();
    assert_eq!(err.field, format!("metadata.annotations[{LEADER_ADDRESS}]"));
}

#[test]
fn hash_group_services_are_dns_labels() {
    let key = "0123456789abcdef0123456789abcdef01234567";
    assert_eq!(hash_group_service("demo", key), "demo-0123456789ab");
    let long = "a".repeat(70);
    let svc = hash_group_service(&long, key);
    assert_eq!(svc.len(), 63);
    assert!(svc.ends_with("-0123456789ab"));
}

#[test]
fn spec_scheduling_pods_name_their_workload_pod_group() {
    let mut l = leader(
        "demo-1",
        json!({minik8s_api::lws_scheduling::GANG_SCOPE: "group"}),
    );
    admit_pod(&mut l).unwrap();
    assert_eq!(
        l["spec"]["schedulingGroup"],
        json!({"podGroupName": "demo-1-abc"})
    );
    assert!(l["metadata"]["annotations"].get(GANG_GROUP_NAME).is_none());
    let mut w = worker(
        "demo-1-2",
        "demo-1",
        json!({minik8s_api::lws_scheduling::GANG_SCOPE: "worker"}),
    );
    admit_pod(&mut w).unwrap();
    assert_eq!(
        w["spec"]["schedulingGroup"]["podGroupName"],
        "demo-1-abc-worker"
    );
}
