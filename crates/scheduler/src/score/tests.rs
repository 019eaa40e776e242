//! The score plugins against worked examples of Kubernetes' formulas.
use super::*;
use crate::testutil::{node, pod, snap};
use serde_json::json;

fn refs(nodes: &[std::sync::Arc<Node>]) -> Vec<&Node> {
    nodes.iter().map(|n| &**n).collect()
}

#[test]
fn fewer_untolerated_prefer_no_schedule_taints_score_higher() {
    let taints = |keys: &[&str]| {
        let t: Vec<_> = keys
            .iter()
            .map(|k| json!({"key": k, "effect": "PreferNoSchedule"}))
            .collect();
        json!({"spec": {"taints": t}})
    };
    let nodes = [
        node("n1", json!({}), json!({})),
        node("n2", json!({}), taints(&["a"])),
        node("n3", json!({}), taints(&["a", "b"])),
    ];
    let owned = snap(&nodes, &[]);
    let candidates = refs(&owned.nodes);
    let p = pod("p", json!({}), json!({}));
    // 0, 1, 2 untolerated: reversed against the most, 2.
    assert_eq!(taint_toleration(&p, &candidates), Some(vec![100, 50, 0]));
    // Tolerating `a` for PreferNoSchedule leaves n3 alone with one; a
    // NoSchedule toleration does not count.
    let tolerant = pod(
        "p",
        json!({}),
        json!({"tolerations": [
            {"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"},
            {"key": "b", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    assert_eq!(
        taint_toleration(&tolerant, &candidates),
        Some(vec![100, 100, 0])
    );
}

#[test]
fn preferred_node_terms_add_their_weights() {
    let nodes = [
        node("n1", json!({"disk": "ssd", "zone": "a"}), json!({})),
        node("n2", json!({"disk": "ssd"}), json!({})),
        node("n3", json!({}), json!({})),
    ];
    let owned = snap(&nodes, &[]);
    let candidates = refs(&owned.nodes);
    let term = |key: &str, value: &str, weight: i32| {
        json!({"weight": weight, "preference": {"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}})
    };
    let p = pod(
        "p",
        json!({}),
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [term("disk", "ssd", 60), term("zone", "a", 20)]}}}),
    );
    // 80, 60, 0 scaled to the highest.
    assert_eq!(node_affinity(&p, &candidates), Some(vec![100, 75, 0]));
    assert_eq!(
        node_affinity(&pod("plain", json!({}), json!({})), &candidates),
        None
    );
}

fn requesting(name: &str, cpu: &str, memory: &str) -> Pod {
    pod(
        name,
        json!({}),
        json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}),
    )
}

#[test]
fn least_allocated_and_balanced_allocation() {
    let nodes = [
        node("n1", json!({}), json!({})),
        node("n2", json!({}), json!({})),
    ];
    let owned = snap(&nodes, &[(requesting("old", "1", "1Gi"), "n1".into())]);
    let s = owned.get();
    let candidates = refs(&owned.nodes);
    let p = requesting("p", "500m", "1Gi");
    // n1: cpu (2000 - 1500) / 2000 = 25, memory (4 - 2) / 4 = 50: 37;
    // n2: 75 and 75.
    assert_eq!(least_allocated(&p, &candidates, &s), vec![37, 75]);
    // n1: shares 0.75 and 0.5, |0.25| / 2 off: 87; n2: 0.25 and 0.25: 100.
    assert_eq!(
        balanced_allocation(&p, &candidates, &s),
        Some(vec![87, 100])
    );
    // A pod without requests counts as 100m and 200 MiB for the first,
    // and is not scored by the second.
    let empty = pod("e", json!({}), json!({}));
    // n1: (2000 - 1100) / 2000 = 45, (4096 - 1224) / 4096 = 70: 57; n2: 95, 95.
    assert_eq!(least_allocated(&empty, &candidates, &s), vec![57, 95]);
    assert_eq!(balanced_allocation(&empty, &candidates, &s), None);
}

#[test]
fn preferred_pod_affinity_counts_both_ways() {
    let nodes = [
        node("a1", json!({"zone": "a"}), json!({})),
        node("b1", json!({"zone": "b"}), json!({})),
    ];
    let term = |app: &str, weight: i32| {
        json!([{"weight": weight, "podAffinityTerm": {"topologyKey": "zone",
            "labelSelector": {"matchLabels": {"app": app}}}}])
    };
    let db = pod("db", json!({"app": "db"}), json!({}));
    let owned = snap(&nodes, &[(db, "a1".into())]);
    let s = owned.get();
    let candidates = refs(&owned.nodes);
    // Near the database: zone a +10.
    let near = pod(
        "web",
        json!({"app": "web"}),
        json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": term("db", 10)}}}),
    );
    assert_eq!(
        inter_pod_affinity(&near, &candidates, &s),
        Some(vec![100, 0])
    );
    // Away from it: zone a -10, so b (0) is the best.
    let away = pod(
        "web",
        json!({"app": "web"}),
        json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": term("db", 10)}}}),
    );
    assert_eq!(
        inter_pod_affinity(&away, &candidates, &s),
        Some(vec![0, 100])
    );
    // A placed pod's own terms pull or push the incoming pod: its required
    // affinity with weight 1, its preferred anti-affinity with its weight.
    let cache = pod(
        "cache",
        json!({"app": "cache"}),
        json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": term("batch", 5)}}}),
    );
    let owned = snap(&nodes, &[(cache, "b1".into())]);
    let s = owned.get();
    let web = pod("web", json!({"app": "web"}), json!({}));
    assert_eq!(
        inter_pod_affinity(&web, &candidates, &s),
        Some(vec![0, 100])
    );
    let batch = pod("batch", json!({"app": "batch"}), json!({}));
    assert_eq!(
        inter_pod_affinity(&batch, &candidates, &s),
        Some(vec![100, 0])
    );
    // Nobody with terms: nothing to say.
    let owned = snap(&nodes, &[]);
    assert_eq!(inter_pod_affinity(&web, &candidates, &owned.get()), None);
}

#[test]
fn nodes_to_find_shrink_with_the_cluster_but_not_below_100() {
    assert_eq!(feasible_nodes_to_find(3), 3);
    assert_eq!(feasible_nodes_to_find(100), 100);
    assert_eq!(feasible_nodes_to_find(1000), 420);
    assert_eq!(feasible_nodes_to_find(5000), 500);
    assert_eq!(feasible_nodes_to_find(6000), 300);
}

#[test]
fn the_best_scored_node_wins_and_equals_take_turns() {
    let nodes = [
        node("n1", json!({}), json!({})),
        node("n2", json!({}), json!({})),
        node("n3", json!({"disk": "ssd"}), json!({})),
    ];
    let owned = snap(&nodes, &[]);
    let s = owned.get();
    let names: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
    let mut rr = RoundRobin::default();
    rr.sync(&names);
    let lookup = |name: &str| {
        owned
            .nodes
            .iter()
            .find(|n| node_name(n) == name)
            .map(|n| &**n)
    };
    let ssd = pod(
        "p",
        json!({}),
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]}}}),
    );
    for _ in 0..3 {
        assert_eq!(select_node(&ssd, &s, &mut rr, lookup, None).unwrap(), "n3");
    }
    // Equal scores (the snapshot does not change here): round robin.
    let plain = pod("q", json!({}), json!({}));
    let picks: Vec<String> = (0..3)
        .map(|_| select_node(&plain, &s, &mut rr, lookup, None).unwrap())
        .collect();
    assert_eq!(picks, ["n1", "n2", "n3"]);
    // A nominated node that fits is taken unscored.
    let mut nominated = plain.clone();
    nominated.status = Some(k8s_openapi::api::core::v1::PodStatus {
        nominated_node_name: Some("n2".into()),
        ..Default::default()
    });
    assert_eq!(
        select_node(&nominated, &s, &mut rr, lookup, None).unwrap(),
        "n2"
    );
    // None fits: every node's reason.
    let far = pod("f", json!({}), json!({"nodeSelector": {"disk": "nvme"}}));
    assert_eq!(
        select_node(&far, &s, &mut rr, lookup, None),
        Err(vec![Unfit::Selector; 3])
    );
}

#[test]
fn cluster_default_spreading_prefers_nodes_with_fewer_peers() {
    use k8s_openapi::api::core::v1::Service;
    let nodes = [
        node("n1", json!({"kubernetes.io/hostname": "n1"}), json!({})),
        node("n2", json!({"kubernetes.io/hostname": "n2"}), json!({})),
    ];
    let peer = |name: &str| pod(name, json!({"app": "web", "tier": "front"}), json!({}));
    let owned = snap(
        &nodes,
        &[(peer("w1"), "n1".into()), (peer("w2"), "n1".into())],
    );
    let s = owned.get();
    let candidates = refs(&owned.nodes);
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}),
    )
    .unwrap();
    let other: Service = serde_json::from_value(
        json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"selector": {"app": "db"}}}),
    )
    .unwrap();
    let incoming = peer("w3");
    let sel = crate::spread::default_selector(&incoming, [&svc, &other], None).unwrap();
    assert_eq!(sel.to_string(), "app=web");
    // Hostname (maxSkew 3, weight ln 4) only: the zone label is absent and
    // the default spares such nodes. n1: 2 * 1.386 + 2 = 5, n2: 2.
    assert_eq!(
        crate::spread::scores(&incoming, &candidates, s.nodes, s.placed, Some(&sel)),
        Some(vec![40, 100])
    );
    // No Service or controller selects it: no default spreading.
    assert_eq!(
        crate::spread::default_selector(&pod("lone", json!({}), json!({})), [&svc], None),
        None
    );
}

/// The worked example of doc/scheduler.md ("The path of one decision").
#[test]
fn the_documented_decision_adds_up() {
    use k8s_openapi::api::core::v1::Service;
    let host = |n: &str| json!({"kubernetes.io/hostname": n});
    let nodes = [
        node("n2", host("n2"), json!({})),
        node(
            "n3",
            host("n3"),
            json!({"spec": {"taints": [{"key": "maintenance", "effect": "PreferNoSchedule"}]}}),
        ),
        node("n1", host("n1"), json!({})),
    ];
    let web = |name: &str| {
        let mut p = requesting(name, "300m", "256Mi");
        p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        p
    };
    let owned = snap(&nodes, &[(web("web-0"), "n1".into())]);
    let s = owned.get();
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}),
    )
    .unwrap();
    let incoming = web("web-1");
    let sel = crate::spread::default_selector(&incoming, [&svc], None);
    let candidates = refs(&owned.nodes);
    assert_eq!(
        total(&incoming, &candidates, &s, sel.as_ref()),
        vec![684, 384, 569]
    );
}
