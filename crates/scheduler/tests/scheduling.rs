//! The scheduler against a real apiserver with two registered nodes: round-robin,
//! nodeSelector, anti-affinity, unschedulable pods, and retry when the cluster changes.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{Client, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

mod common;
use common::{node, node_of, pod, start_scheduler, wait_for};

/// Nodes `n1` and `n2` (2 CPUs each) and the PriorityClasses (name, value,
/// preemptionPolicy) a preemption test needs.
async fn two_nodes_and_classes(client: &Client, classes: &[(&str, i32, &str)]) {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let nodes = client.dynamic(registry::of::<Node>(), None);
    for n in ["n1", "n2"] {
        nodes
            .create(&node(n, json!({"kubernetes.io/hostname": n})))
            .await
            .unwrap();
    }
    let api = client.dynamic(registry::of::<PriorityClass>(), None);
    for (name, value, policy) in classes {
        api.create(
            &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy}),
        )
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_round_robin_honours_constraints_and_reports_failures() {
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let nodes = client.dynamic(registry::of::<Node>(), None);
    nodes
        .create(&node(
            "n1",
            json!({"kubernetes.io/hostname": "n1", "disk": "ssd"}),
        ))
        .await
        .unwrap();
    nodes
        .create(&node("n2", json!({"kubernetes.io/hostname": "n2"})))
        .await
        .unwrap();
    start_scheduler(&client);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));

    // Round-robin: consecutive pods alternate between the nodes.
    let mut placed = Vec::new();
    for i in 0..4 {
        let name = format!("rr{i}");
        pods.create(&pod(&name, json!({"app": "rr"}), json!({})))
            .await
            .unwrap();
        let p = wait_for(&pods, &name, "bound", |p| !node_of(p).is_empty()).await;
        placed.push(node_of(&p));
    }
    assert_ne!(placed[0], placed[1], "{placed:?}");
    assert_eq!(placed[0], placed[2], "{placed:?}");
    assert_eq!(placed[1], placed[3], "{placed:?}");
    let p = pods.get("rr0").await.unwrap();
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(p["status"]["conditions"][0]["status"], "True");

    // nodeSelector
    for i in 0..2 {
        pods.create(&pod(
            &format!("ssd{i}"),
            json!({}),
            json!({"nodeSelector": {"disk": "ssd"}}),
        ))
        .await
        .unwrap();
        let p = wait_for(&pods, &format!("ssd{i}"), "bound", |p| {
            !node_of(p).is_empty()
        })
        .await;
        assert_eq!(node_of(&p), "n1");
    }

    // Anti-affinity on hostname: two fit, the third cannot.
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}});
    let mut solo_nodes = Vec::new();
    for i in 0..2 {
        pods.create(&pod(
            &format!("solo{i}"),
            json!({"app": "solo"}),
            anti.clone(),
        ))
        .await
        .unwrap();
        solo_nodes.push(node_of(
            &wait_for(&pods, &format!("solo{i}"), "bound", |p| {
                !node_of(p).is_empty()
            })
            .await,
        ));
    }
    solo_nodes.sort();
    assert_eq!(solo_nodes, vec!["n1", "n2"]);
    pods.create(&pod("solo2", json!({"app": "solo"}), anti.clone()))
        .await
        .unwrap();
    let p = wait_for(&pods, "solo2", "marked unschedulable", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(p["status"]["conditions"][0]["reason"], "Unschedulable");
    assert_eq!(
        p["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    assert_eq!(node_of(&p), "");

    // An impossible pod says why, with an event; a matching node added later gets it.
    pods.create(&pod(
        "gpu",
        json!({}),
        json!({"nodeSelector": {"gpu": "yes"}}),
    ))
    .await
    .unwrap();
    let p = wait_for(&pods, "gpu", "marked unschedulable", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(
        p["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    // The event follows the status write: wait for it.
    let events = client.dynamic(registry::of::<Event>(), Some("default"));
    let mut list = Value::Null;
    for _ in 0..100 {
        list = events
            .list(&ListParams::default().fields("involvedObject.name=gpu,reason=FailedScheduling"))
            .await
            .unwrap();
        if list["items"].as_array().is_some_and(|i| !i.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(list["items"][0]["type"], "Warning");
    assert_eq!(list["items"][0]["source"]["component"], "default-scheduler");
    // Every cluster change retries the pod; the repeats are counted on the
    // same Event (client-go's correlator), not written as new ones.
    for i in 0..3 {
        nodes
            .patch(
                "n2",
                None,
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"touched": i.to_string()}}}),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let list = minik8s_testkit::until(10, "the FailedScheduling event counted again", || async {
        let list = events
            .list(&ListParams::default().fields("involvedObject.name=gpu,reason=FailedScheduling"))
            .await
            .map_err(|e| e.to_string())?;
        match list["items"][0]["count"].as_i64() {
            Some(c) if c >= 2 => Ok(list),
            other => Err(format!("count {other:?}")),
        }
    })
    .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    nodes
        .create(&node(
            "n3",
            json!({"kubernetes.io/hostname": "n3", "gpu": "yes"}),
        ))
        .await
        .unwrap();
    let p = wait_for(&pods, "gpu", "bound after a node appeared", |p| {
        !node_of(p).is_empty()
    })
    .await;
    assert_eq!(node_of(&p), "n3");
    // The anti-affinity pod fits on the new node too.
    let p = wait_for(&pods, "solo2", "bound after a node appeared", |p| {
        !node_of(p).is_empty()
    })
    .await;
    assert_eq!(node_of(&p), "n3");

    // A cordoned node gets nothing.
    nodes
        .patch(
            "n3",
            None,
            "application/merge-patch+json",
            &json!({"spec": {"unschedulable": true}}),
        )
        .await
        .unwrap();
    nodes
        .patch(
            "n1",
            None,
            "application/merge-patch+json",
            &json!({"spec": {"unschedulable": true}}),
        )
        .await
        .unwrap();
    // Wait until the scheduler has seen both cordons: a pod that fits nowhere
    // (3 CPUs) and may only go to n1 or n3 names the cordon as the reason.
    pods.create(&pod(
        "cordon-check",
        json!({}),
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3"}}}],
               "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n3"]}]}]}}}}),
    ))
    .await
    .unwrap();
    wait_for(&pods, "cordon-check", "refused by both cordoned nodes", |p| {
        p.pointer("/status/conditions/0/message")
            == Some(&json!("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."))
    })
    .await;
    for i in 0..2 {
        pods.create(&pod(&format!("after{i}"), json!({}), json!({})))
            .await
            .unwrap();
        let p = wait_for(&pods, &format!("after{i}"), "bound", |p| {
            !node_of(p).is_empty()
        })
        .await;
        assert_eq!(node_of(&p), "n2");
    }

    // Resource fit: a pod asking for more CPU than any node has stays pending.
    pods.create(&pod("huge", json!({}), json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3"}}}]}))).await.unwrap();
    let p = wait_for(&pods, "huge", "marked unschedulable", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(
        p["status"]["conditions"][0]["message"],
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );

    // Scheduling gates: a gated pod says so and waits; a gate cannot be
    // added later; once the last is removed, the pod is scheduled.
    let gated = pods
        .create(&pod(
            "gated",
            json!({}),
            json!({"schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/data"}]}),
        ))
        .await
        .unwrap();
    assert_eq!(
        gated["status"]["conditions"][0]["reason"],
        "SchedulingGated"
    );
    assert_eq!(
        gated["status"]["conditions"][0]["message"],
        "Scheduling is blocked due to non-empty scheduling gates"
    );
    let one_left = json!({"spec": {"schedulingGates": [{"name": "example.com/data"}]}});
    pods.patch(
        "gated",
        None,
        minik8s_client::rest::content::MERGE_PATCH,
        &one_left,
    )
    .await
    .unwrap();
    let added = json!({"spec": {"schedulingGates": [{"name": "example.com/data"}, {"name": "example.com/new"}]}});
    let err = pods
        .patch(
            "gated",
            None,
            minik8s_client::rest::content::MERGE_PATCH,
            &added,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("only deletion is allowed, but found new scheduling gate 'example.com/new'"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        node_of(&pods.get("gated").await.unwrap()),
        "",
        "still gated"
    );
    let none_left = json!({"spec": {"schedulingGates": null}});
    pods.patch(
        "gated",
        None,
        minik8s_client::rest::content::MERGE_PATCH,
        &none_left,
    )
    .await
    .unwrap();
    wait_for(&pods, "gated", "bound once ungated", |p| {
        !node_of(p).is_empty()
    })
    .await;
}

/// topologySpreadConstraints: two zones of unequal size still get the
/// pods evenly (DoNotSchedule), a pod that would break the skew everywhere
/// says so, and ScheduleAnyway prefers the emptier zone without refusing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spreads_pods_across_zones() {
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let nodes = client.dynamic(registry::of::<Node>(), None);
    for (name, zone) in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")] {
        let labels = json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone});
        nodes.create(&node(name, labels)).await.unwrap();
    }
    start_scheduler(&client);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let spread = |when: &str| {
        json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "web"}}}]})
    };
    let zone_of = |node: &str| if node.starts_with('a') { "a" } else { "b" };
    let mut zones = Vec::new();
    for i in 0..4 {
        let name = format!("web{i}");
        pods.create(&pod(&name, json!({"app": "web"}), spread("DoNotSchedule")))
            .await
            .unwrap();
        let p = wait_for(&pods, &name, "bound", |p| !node_of(p).is_empty()).await;
        zones.push(zone_of(&node_of(&p)));
    }
    zones.sort();
    assert_eq!(
        zones,
        ["a", "a", "b", "b"],
        "three nodes in a, one in b: still 2 and 2"
    );

    // With b1 cordoned (its zone still counts, as in Kubernetes), zone a
    // may take one more (3 against 2) and then none (4 against 2).
    nodes
        .patch(
            "b1",
            None,
            minik8s_client::rest::content::MERGE_PATCH,
            &json!({"spec": {"unschedulable": true}}),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    pods.create(&pod("web4", json!({"app": "web"}), spread("DoNotSchedule")))
        .await
        .unwrap();
    let p = wait_for(&pods, "web4", "bound", |p| !node_of(p).is_empty()).await;
    assert_eq!(zone_of(&node_of(&p)), "a");
    pods.create(&pod("web5", json!({"app": "web"}), spread("DoNotSchedule")))
        .await
        .unwrap();
    let p = wait_for(&pods, "web5", "refused", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(
        p["status"]["conditions"][0]["message"],
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match pod topology spread constraints. preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."
    );

    // ScheduleAnyway is only a preference: placed although it stretches the skew.
    pods.create(&pod(
        "soft",
        json!({"app": "web"}),
        spread("ScheduleAnyway"),
    ))
    .await
    .unwrap();
    let p = wait_for(&pods, "soft", "bound", |p| !node_of(p).is_empty()).await;
    assert_eq!(zone_of(&node_of(&p)), "a");
}

/// Two schedulers with leader election: only the leader binds; when it dies
/// the other takes its Lease over and binds the pods that came meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leading_scheduler_binds_and_another_takes_over() {
    use k8s_openapi::api::coordination::v1::Lease;
    use minik8s_client::leader::{run_as_leader, Config};
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let nodes = client.dynamic(registry::of::<Node>(), None);
    nodes
        .create(&node("n1", json!({"kubernetes.io/hostname": "n1"})))
        .await
        .unwrap();
    let lease = |id: &str| Config {
        lease_duration: Duration::from_secs(2),
        retry: Duration::from_millis(200),
        ..Config::scheduler(id)
    };
    let a = tokio::spawn(run_as_leader(
        client.clone(),
        lease("a"),
        scheduler::run(
            client.with_user_agent("sched-a"),
            scheduler::Config::default(),
        ),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = tokio::spawn(run_as_leader(
        client.clone(),
        lease("b"),
        scheduler::run(
            client.with_user_agent("sched-b"),
            scheduler::Config::default(),
        ),
    ));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-system"));
    pods.create(&pod("first", json!({}), json!({})))
        .await
        .unwrap();
    wait_for(&pods, "first", "bound", |p| !node_of(p).is_empty()).await;
    let holder = leases.get("kube-scheduler").await.unwrap()["spec"]["holderIdentity"].clone();
    assert_eq!(holder, "a");
    a.abort();
    pods.create(&pod("second", json!({}), json!({})))
        .await
        .unwrap();
    // Only b is left to bind it: it took the Lease over.
    wait_for(&pods, "second", "bound by the new leader", |p| {
        !node_of(p).is_empty()
    })
    .await;
    assert_eq!(
        leases.get("kube-scheduler").await.unwrap()["spec"]["holderIdentity"],
        "b"
    );
    b.abort();
}

/// Preemption: a pod of high priority that fits nowhere takes the room of
/// a lower one — the one no PodDisruptionBudget protects — and waits for it
/// nominated; the room is kept from a low pod meanwhile; `preemptionPolicy:
/// Never` waits instead, with Kubernetes' words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempts_the_unprotected_lower_pod_and_keeps_its_room() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use minik8s_client::rest::{content, DeleteParams};
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    two_nodes_and_classes(
        &client,
        &[
            ("low", 10, "PreemptLowerPriority"),
            ("high", 1000, "PreemptLowerPriority"),
            ("high-polite", 1000, "Never"),
        ],
    )
    .await;
    start_scheduler(&client);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let sized = |class: &str| {
        json!({"priorityClassName": class, "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1500m"}}}]})
    };
    // Each node full with one low pod; the database one has a budget that
    // allows no disruption.
    let budgets = client.dynamic(registry::of::<PodDisruptionBudget>(), Some("default"));
    budgets
        .create(&json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}))
        .await
        .unwrap();
    budgets
        .patch(
            "db",
            Some("status"),
            content::MERGE_PATCH,
            &json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}),
        )
        .await
        .unwrap();
    let mut low_nodes = std::collections::BTreeMap::new();
    for (name, app) in [("db", "db"), ("batch", "batch")] {
        pods.create(&pod(name, json!({"app": app}), sized("low")))
            .await
            .unwrap();
        let p = wait_for(&pods, name, "bound", |p| !node_of(p).is_empty()).await;
        assert_eq!(p["spec"]["priority"], 10);
        low_nodes.insert(name, node_of(&p));
    }
    assert_ne!(low_nodes["db"], low_nodes["batch"]);

    pods.create(&pod("urgent", json!({}), sized("high")))
        .await
        .unwrap();
    let urgent = wait_for(&pods, "urgent", "nominated", |p| {
        p["status"]["nominatedNodeName"].is_string()
    })
    .await;
    assert_eq!(
        urgent["status"]["nominatedNodeName"], low_nodes["batch"],
        "the node whose victim no budget protects"
    );
    assert_eq!(node_of(&urgent), "");
    let batch = wait_for(&pods, "batch", "being deleted", |p| {
        p["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    let target = batch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned()
        .expect("DisruptionTarget condition");
    assert_eq!(target["reason"], "PreemptionByScheduler");
    assert_eq!(
        target["message"],
        "default-scheduler: preempting to accommodate a higher priority pod"
    );
    let db = pods.get("db").await.unwrap();
    assert!(
        db["metadata"]["deletionTimestamp"].is_null(),
        "the budget kept db"
    );
    let events = client.dynamic(registry::of::<Event>(), Some("default"));
    let want = format!(
        "Preempted by pod {} on node {}",
        urgent["metadata"]["uid"].as_str().unwrap(),
        low_nodes["batch"]
    );
    minik8s_testkit::until(10, "the Preempted event", || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let found = list["items"].as_array().into_iter().flatten().any(|e| {
            e["reason"] == "Preempted"
                && e["involvedObject"]["name"] == "batch"
                && e["message"] == want.as_str()
        });
        found.then_some(()).ok_or(format!("{list}"))
    })
    .await;

    // A low pod arriving meanwhile finds the room kept, and no victim of its own.
    pods.create(&pod("sneaky", json!({}), sized("low")))
        .await
        .unwrap();
    let sneaky = wait_for(&pods, "sneaky", "refused", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(
        sneaky["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    // The kubelet's part: the victim's containers stopped, the pod goes.
    pods.delete(
        "batch",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let urgent = wait_for(&pods, "urgent", "bound", |p| !node_of(p).is_empty()).await;
    assert_eq!(node_of(&urgent), low_nodes["batch"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        node_of(&pods.get("sneaky").await.unwrap()),
        "",
        "sneaky still waits"
    );

    // preemptionPolicy: Never waits rather than preempt.
    pods.create(&pod("polite", json!({}), sized("high-polite")))
        .await
        .unwrap();
    let polite = wait_for(&pods, "polite", "refused", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(
        polite["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    );
    assert!(pods.get("db").await.unwrap()["metadata"]["deletionTimestamp"].is_null());
}

/// Gangs and preemption: a gang of lower priority goes whole to make room
/// for one pod, and a gang of higher priority preempts for all its members
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_are_preempted_and_preempt_whole() {
    use minik8s_client::rest::DeleteParams;
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let preempt = "PreemptLowerPriority";
    two_nodes_and_classes(
        &client,
        &[
            ("low", 10, preempt),
            ("mid", 1000, preempt),
            ("top", 2000, preempt),
        ],
    )
    .await;
    start_scheduler(&client);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let member = |name: &str, class: &str, gang: Option<&str>| {
        let mut p = pod(
            name,
            json!({}),
            json!({"priorityClassName": class, "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1500m"}}}]}),
        );
        if let Some(g) = gang {
            p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": g,
                                                  "minik8s.io/gang-min-member": "2"});
        }
        p
    };
    let gone = |names: &'static [&'static str]| {
        let pods = pods.clone();
        async move {
            for n in names {
                wait_for(&pods, n, "being deleted", |p| {
                    p["metadata"]["deletionTimestamp"].is_string()
                })
                .await;
                // The kubelet's part: containers stopped, the pod goes.
                let now = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                pods.delete(n, &now).await.unwrap();
            }
        }
    };
    for n in ["low-0", "low-1"] {
        pods.create(&member(n, "low", Some("low"))).await.unwrap();
    }
    for n in ["low-0", "low-1"] {
        wait_for(&pods, n, "bound", |p| !node_of(p).is_empty()).await;
    }
    // One pod of higher priority needs one node: the whole low gang goes.
    pods.create(&member("solo", "mid", None)).await.unwrap();
    gone(&["low-0", "low-1"]).await;
    let solo = wait_for(&pods, "solo", "bound", |p| !node_of(p).is_empty()).await;

    // A lone low pod on the other node; then a gang of the highest priority
    // needs both nodes: both pods go, and both members are nominated.
    pods.create(&member("lone", "low", None)).await.unwrap();
    let lone = wait_for(&pods, "lone", "bound", |p| !node_of(p).is_empty()).await;
    assert_ne!(node_of(&lone), node_of(&solo));
    for n in ["top-0", "top-1"] {
        pods.create(&member(n, "top", Some("top"))).await.unwrap();
    }
    let mut nominated = Vec::new();
    for n in ["top-0", "top-1"] {
        let p = wait_for(&pods, n, "nominated", |p| {
            p["status"]["nominatedNodeName"].is_string()
        })
        .await;
        nominated.push(
            p["status"]["nominatedNodeName"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    nominated.sort();
    assert_eq!(nominated, ["n1", "n2"]);
    gone(&["solo", "lone"]).await;
    for n in ["top-0", "top-1"] {
        wait_for(&pods, n, "bound", |p| !node_of(p).is_empty()).await;
    }
}
