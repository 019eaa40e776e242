//! The scheduling filters, each against the cases Kubernetes' plugins decide.
use super::*;
use serde_json::json;

use crate::testutil::{node, pod, snap};

#[test]
fn ready_schedulable_and_node_name() {
    let nodes = [
        node("n1", json!({}), json!({})),
        node(
            "n2",
            json!({}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        ),
        node("n3", json!({}), json!({"spec": {"unschedulable": true}})),
    ];
    let owned = snap(&nodes, &[]);
    let s = owned.get();
    let p = pod("p", json!({}), json!({}));
    assert_eq!(check(&p, &nodes[0], &s), Ok(()));
    assert_eq!(check(&p, &nodes[1], &s), Err(Unfit::NotReady));
    assert_eq!(check(&p, &nodes[2], &s), Err(Unfit::Unschedulable));
    let pinned = pod("p", json!({}), json!({"nodeName": "n3"}));
    assert_eq!(check(&pinned, &nodes[0], &s), Err(Unfit::NodeName));
    let tolerant = pod(
        "p",
        json!({}),
        json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]}),
    );
    assert_eq!(check(&tolerant, &nodes[1], &s), Ok(()));
}

#[test]
fn node_selector_and_required_node_affinity() {
    let nodes = [
        node("a", json!({"disk": "ssd", "gen": "3"}), json!({})),
        node("b", json!({"disk": "hdd"}), json!({})),
    ];
    let owned = snap(&nodes, &[]);
    let s = owned.get();
    let p = pod("p", json!({}), json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(feasible(&p, &s), Ok(vec!["a".to_string()]));
    let aff = |expr: serde_json::Value| {
        pod(
            "p",
            json!({}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}),
        )
    };
    assert_eq!(
        feasible(
            &aff(json!({"key": "disk", "operator": "In", "values": ["hdd"]})),
            &s
        ),
        Ok(vec!["b".to_string()])
    );
    assert_eq!(
        feasible(
            &aff(json!({"key": "disk", "operator": "NotIn", "values": ["hdd"]})),
            &s
        ),
        Ok(vec!["a".to_string()])
    );
    assert_eq!(
        feasible(&aff(json!({"key": "gen", "operator": "Exists"})), &s),
        Ok(vec!["a".to_string()])
    );
    assert_eq!(
        feasible(&aff(json!({"key": "gen", "operator": "DoesNotExist"})), &s),
        Ok(vec!["b".to_string()])
    );
    assert_eq!(
        feasible(
            &aff(json!({"key": "gen", "operator": "Gt", "values": ["2"]})),
            &s
        ),
        Ok(vec!["a".to_string()])
    );
    assert_eq!(
        feasible(
            &aff(json!({"key": "gen", "operator": "Lt", "values": ["2"]})),
            &s
        ),
        Err(vec![Unfit::Selector, Unfit::Selector])
    );
    let by_field = pod(
        "p",
        json!({}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}),
    );
    assert_eq!(feasible(&by_field, &s), Ok(vec!["b".to_string()]));
}

#[test]
fn taints_and_tolerations() {
    let nodes = [node(
        "t",
        json!({}),
        json!({"spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}, {"key": "soft", "effect": "PreferNoSchedule"}]}}),
    )];
    let owned = snap(&nodes, &[]);
    let s = owned.get();
    assert_eq!(
        check(&pod("p", json!({}), json!({})), &nodes[0], &s),
        Err(Unfit::Taint("gpu: yes".into()))
    );
    let eq = pod(
        "p",
        json!({}),
        json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]}),
    );
    assert_eq!(check(&eq, &nodes[0], &s), Ok(()));
    let wrong_value = pod(
        "p",
        json!({}),
        json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "no"}]}),
    );
    assert!(check(&wrong_value, &nodes[0], &s).is_err());
    let all = pod(
        "p",
        json!({}),
        json!({"tolerations": [{"operator": "Exists"}]}),
    );
    assert_eq!(check(&all, &nodes[0], &s), Ok(()));
}

#[test]
fn resources_fit_allocatable_minus_requests() {
    let nodes = [node(
        "n",
        json!({}),
        json!({"status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "2"}}}),
    )];
    let big = |name: &str, cpu: &str| {
        pod(
            name,
            json!({}),
            json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}),
        )
    };
    let placed = vec![(big("a", "600m"), "n".to_string())];
    let owned = snap(&nodes, &placed);
    let s = owned.get();
    assert_eq!(check(&big("b", "400m"), &nodes[0], &s), Ok(()));
    assert_eq!(
        check(&big("b", "500m"), &nodes[0], &s),
        Err(Unfit::Insufficient("cpu"))
    );
    let mem = pod(
        "m",
        json!({}),
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"memory": "1Gi"}}}]}),
    );
    assert_eq!(
        check(&mem, &nodes[0], &s),
        Err(Unfit::Insufficient("memory"))
    );
    let two = vec![
        (big("a", "1m"), "n".to_string()),
        (big("b", "1m"), "n".to_string()),
    ];
    assert_eq!(
        check(
            &pod("c", json!({}), json!({})),
            &nodes[0],
            &snap(&nodes, &two).get()
        ),
        Err(Unfit::Insufficient("pods"))
    );
    let init = pod(
        "i",
        json!({}),
        json!({"initContainers": [{"name": "x", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}),
    );
    assert_eq!(
        (pod_requests(&init).cpu, pod_requests(&init).memory),
        (2000, 0)
    );
}

#[test]
fn sidecars_add_up_and_each_init_container_runs_beside_the_sidecars_before_it() {
    let c = |name: &str, cpu: &str, sidecar: bool| {
        let mut c = json!({"name": name, "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}});
        if sidecar {
            c["restartPolicy"] = json!("Always");
        }
        c
    };
    // Kubernetes' documented example: init 1 (100m) alone; sidecar (200m);
    // init 2 (500m) beside it = 700m; apps 100m + the sidecar = 300m.
    let p = pod(
        "s",
        json!({}),
        json!({"initContainers": [c("i1", "100m", false), c("side", "200m", true), c("i2", "500m", false)],
               "containers": [c("app", "100m", false)]}),
    );
    assert_eq!(pod_requests(&p).cpu, 700);
    assert_eq!(
        pod_requests(&p).memory,
        2 * 1024 * 1024,
        "memory: app + sidecar (the init containers need 2 Mi at most)"
    );
    // Pod-level requests replace the sum; overhead comes on top.
    let p = pod(
        "l",
        json!({}),
        json!({"containers": [c("app", "100m", false)], "resources": {"requests": {"cpu": "1"}},
               "overhead": {"cpu": "50m"}}),
    );
    assert_eq!(pod_requests(&p).cpu, 1050);
}

#[test]
fn pod_affinity_and_anti_affinity_by_topology() {
    let nodes = [
        node(
            "a",
            json!({"kubernetes.io/hostname": "a", "zone": "z1"}),
            json!({}),
        ),
        node(
            "b",
            json!({"kubernetes.io/hostname": "b", "zone": "z1"}),
            json!({}),
        ),
        node(
            "c",
            json!({"kubernetes.io/hostname": "c", "zone": "z2"}),
            json!({}),
        ),
    ];
    let db = pod("db", json!({"app": "db"}), json!({}));
    let placed = vec![(db, "a".to_string())];
    let owned = snap(&nodes, &placed);
    let s = owned.get();
    let term =
        |key: &str| json!([{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": key}]);
    let near = pod(
        "web",
        json!({"app": "web"}),
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}),
    );
    assert_eq!(
        feasible(&near, &s),
        Ok(vec!["a".to_string(), "b".to_string()])
    );
    let apart = pod(
        "web",
        json!({"app": "web"}),
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("kubernetes.io/hostname")}}}),
    );
    assert_eq!(
        feasible(&apart, &s),
        Ok(vec!["b".to_string(), "c".to_string()])
    );
    let apart_zone = pod(
        "web",
        json!({"app": "web"}),
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}),
    );
    assert_eq!(feasible(&apart_zone, &s), Ok(vec!["c".to_string()]));
    // The first pod of a self-selecting group may go anywhere.
    let first = pod(
        "x",
        json!({"app": "x"}),
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]}}}),
    );
    assert_eq!(feasible(&first, &s).unwrap().len(), 3);
    // Existing pods' anti-affinity keeps matching newcomers away.
    let loner = pod(
        "l",
        json!({"app": "loner"}),
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
    );
    let placed = vec![(loner, "b".to_string())];
    let db2 = pod("db2", json!({"app": "db"}), json!({}));
    assert_eq!(
        check(&db2, &nodes[1], &snap(&nodes, &placed).get()),
        Err(Unfit::ExistingAntiAffinity)
    );
    assert_eq!(check(&db2, &nodes[0], &snap(&nodes, &placed).get()), Ok(()));
}

#[test]
fn round_robin_rotates_and_skips_infeasible() {
    let mut rr = RoundRobin::default();
    rr.sync(&["a".into(), "b".into(), "c".into()]);
    let all: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    let picks: Vec<String> = (0..4).map(|_| rr.pick(&all).unwrap()).collect();
    assert_eq!(picks, vec!["a", "b", "c", "a"]);
    // b is next; only c is feasible, so c is chosen and goes to the back: b stays next.
    assert_eq!(rr.pick(&["c".into()]).unwrap(), "c");
    assert_eq!(rr.pick(&all).unwrap(), "b");
    // Gone nodes leave the queue; new ones join at the back.
    rr.sync(&["b".into(), "d".into()]);
    assert_eq!(rr.pick(&["b".into(), "d".into()]).unwrap(), "b");
    assert_eq!(rr.pick(&["b".into(), "d".into()]).unwrap(), "d");
    assert_eq!(rr.pick(&[]), None);
}

#[test]
fn message_counts_reasons_like_kubernetes() {
    let m = unschedulable_message(
        3,
        &[Unfit::Selector, Unfit::Insufficient("cpu"), Unfit::Selector],
    );
    assert_eq!(m, "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.");
    assert_eq!(unschedulable_message(0, &[]), "0/0 nodes are available.");
}
