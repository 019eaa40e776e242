//! The ReplicaSet controller against a real apiserver, with the scheduler and two
//! hollow nodes (pods go Running at once): replicas, replacement, adoption,
//! release on relabel, scale down, and the status.

mod common;

use common::cluster;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

async fn eventually<F: Fn(&[Value]) -> bool>(pods: &DynamicApi, what: &str, ok: F) -> Vec<Value> {
    minik8s_testkit::until(15, what, || async {
        let items = pods.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if ok(&items) {
            return Ok(items);
        }
        let names: Vec<String> = items
            .iter()
            .map(|p| {
                format!(
                    "{} owner={}",
                    p["metadata"]["name"], p["metadata"]["ownerReferences"][0]["name"]
                )
            })
            .collect();
        Err(format!("pods: {names:?}"))
    })
    .await
}

fn owned_by<'a>(pods: &'a [Value], uid: &str) -> Vec<&'a Value> {
    pods.iter()
        .filter(|p| {
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o.iter().any(|r| r["uid"] == uid && r["controller"] == true))
                && p["metadata"]["deletionTimestamp"].is_null()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_keeps_its_pods() {
    let (_server, client) = cluster("hn", 2).await;

    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let rs = sets
        .create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest"}]}}}}))
        .await
        .unwrap();
    let uid = rs["metadata"]["uid"].as_str().unwrap().to_string();

    // Three pods, named after the set, spread over both nodes, Running; status follows.
    let list = eventually(&pods, "3 running pods", |p| {
        owned_by(p, &uid).len() == 3 && p.iter().all(|x| x["status"]["phase"] == "Running")
    })
    .await;
    assert!(list
        .iter()
        .all(|p| p["metadata"]["name"].as_str().unwrap().starts_with("web-")));
    let nodes: std::collections::BTreeSet<&str> = list
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 2, "spread over both nodes");
    for _ in 0..100 {
        let st = sets.get("web").await.unwrap()["status"].clone();
        if st["readyReplicas"] == 3 && st["replicas"] == 3 && st["observedGeneration"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = sets.get("web").await.unwrap()["status"].clone();
    assert_eq!(
        (
            st["replicas"].clone(),
            st["readyReplicas"].clone(),
            st["availableReplicas"].clone(),
            st["fullyLabeledReplicas"].clone()
        ),
        (json!(3), json!(3), json!(3), json!(3)),
        "{st}"
    );

    // A deleted pod is replaced.
    let victim = list[0]["metadata"]["name"].as_str().unwrap().to_string();
    pods.delete(&victim, &Default::default()).await.unwrap();
    eventually(&pods, "a replacement", |p| {
        owned_by(p, &uid).len() == 3
            && !p.iter().any(|x| {
                x["metadata"]["name"] == victim.as_str()
                    && x["metadata"]["deletionTimestamp"].is_null()
            })
    })
    .await;

    // A matching orphan is adopted; the set is then one over and deletes one.
    pods.create(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).await.unwrap();
    eventually(&pods, "adoption and scale back to 3", |p| {
        owned_by(p, &uid).len() == 3
            && p.iter()
                .filter(|x| x["metadata"]["deletionTimestamp"].is_null())
                .count()
                == 3
    })
    .await;

    // A pod whose labels stop matching is released, and replaced.
    let current = owned_by(
        &eventually(&pods, "3 owned", |p| owned_by(p, &uid).len() == 3).await,
        &uid,
    )[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    pods.patch(
        &current,
        None,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "debug"}}}),
    )
    .await
    .unwrap();
    let list = eventually(&pods, "release and replacement", |p| {
        let released = p.iter().find(|x| x["metadata"]["name"] == current.as_str());
        owned_by(p, &uid).len() == 3
            && released.is_some_and(|r| owned_by(std::slice::from_ref(r), &uid).is_empty())
    })
    .await;
    let released = list
        .iter()
        .find(|x| x["metadata"]["name"] == current.as_str())
        .unwrap();
    assert_eq!(
        released["metadata"]["labels"]["app"], "debug",
        "the released pod keeps running on its own"
    );

    // Scale down through the scale subresource: the set ends with one pod.
    sets.patch(
        "web",
        Some("scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 1}}),
    )
    .await
    .unwrap();
    eventually(&pods, "scale down to 1", |p| owned_by(p, &uid).len() == 1).await;

    // What `kubectl describe` shows: the set's own events name each pod it
    // created and deleted; a pod's tell its start, from scheduling to
    // Started, and its end.
    let about = |kind: &str, name: &str| {
        let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
        let client = client.clone();
        async move { common::events_about(&client, "default", &selector).await }
    };
    minik8s_testkit::until(15, "the set's events", || async {
        let said = about("ReplicaSet", "web").await;
        let created = said
            .iter()
            .filter(|(r, m)| r == "SuccessfulCreate" && m.starts_with("Created pod: web-"))
            .count();
        let deleted = said
            .iter()
            .filter(|(r, m)| r == "SuccessfulDelete" && m.starts_with("Deleted pod: "))
            .count();
        let names_first = said
            .iter()
            .any(|(_, m)| m == &format!("Created pod: {victim}"));
        if created >= 5 && deleted >= 3 && names_first {
            return Ok(());
        }
        Err(format!("{said:?}"))
    })
    .await;
    minik8s_testkit::until(15, "a pod's events", || async {
        let said = about("Pod", &victim).await;
        let reasons: Vec<&str> = said.iter().map(|(r, _)| r.as_str()).collect();
        let whole = [
            "Scheduled",
            "Pulling",
            "Pulled",
            "Created",
            "Started",
            "Killing",
        ]
        .iter()
        .all(|r| reasons.contains(r));
        if whole
            && said.contains(&("Created".into(), "Created container: c".into()))
            && said.contains(&("Started".into(), "Started container c".into()))
            && said.contains(&("Killing".into(), "Stopping container c".into()))
        {
            return Ok(());
        }
        Err(format!("{said:?}"))
    })
    .await;
}

/// Deleting a ReplicaSet: background removes its pods, orphan keeps them (without
/// the ownerReference), foreground removes the pods before the set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_follows_the_propagation_policy() {
    let (_server, client) = cluster("gc", 1).await;
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));

    for (name, policy) in [
        ("bg", "Background"),
        ("keep", "Orphan"),
        ("fg", "Foreground"),
    ] {
        let rs = sets
            .create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"set": name}},
                         "template": {"metadata": {"labels": {"set": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
            .await
            .unwrap();
        let uid = rs["metadata"]["uid"].as_str().unwrap().to_string();
        eventually(&pods, "2 pods", |p| owned_by(p, &uid).len() == 2).await;
        let dp = minik8s_client::DeleteParams {
            propagation_policy: Some(policy.into()),
            ..Default::default()
        };
        sets.delete(name, &dp).await.unwrap();
        let mine = |p: &[Value]| {
            p.iter()
                .filter(|x| x["metadata"]["labels"]["set"] == name)
                .count()
        };
        match policy {
            "Orphan" => {
                let left = eventually(&pods, "pods kept, unlinked", |p| {
                    mine(p) == 2 && owned_by(p, &uid).is_empty()
                })
                .await;
                assert!(left
                    .iter()
                    .filter(|x| x["metadata"]["labels"]["set"] == name)
                    .all(|x| x["metadata"]["ownerReferences"]
                        .as_array()
                        .is_none_or(|o| o.is_empty())));
            }
            _ => {
                eventually(&pods, "pods removed", |p| mine(p) == 0).await;
            }
        }
        for _ in 0..150 {
            if sets.get(name).await.is_err_and(|e| e.is_not_found()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            sets.get(name).await.unwrap_err().is_not_found(),
            "{policy}: the ReplicaSet itself is gone"
        );
    }
}

/// A Service's Endpoints and EndpointSlice follow its pods: ready IPs with the
/// named target port, updates as pods go, removal with the Service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_the_pods() {
    let (_server, client) = cluster("ep", 2).await;
    let svcs = client.dynamic(registry::of::<Service>(), Some("default"));
    let eps = client.dynamic(registry::of::<Endpoints>(), Some("default"));
    let slices = client.dynamic(registry::of::<EndpointSlice>(), Some("default"));
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    svcs.create(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})).await.unwrap();
    sets.create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"name": "http", "containerPort": 8080}]}]}}}}))
        .await
        .unwrap();

    let ips = |ep: &Value| -> Vec<String> {
        ep["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
            .map(|a| a["ip"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let mut ep = Value::Null;
    for _ in 0..150 {
        if let Ok(e) = eps.get("web").await {
            if ips(&e).len() == 2 {
                ep = e;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ips(&ep).len(), 2, "two ready addresses: {ep}");
    assert_eq!(
        ep["subsets"][0]["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
        "named targetPort resolved"
    );
    // The slice is written right after the Endpoints, in the same reconcile.
    let mut list = Value::Null;
    for _ in 0..50 {
        list = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
            .await
            .unwrap();
        if list["items"][0]["endpoints"]
            .as_array()
            .is_some_and(|e| e.len() == 2)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        list["items"][0]["endpoints"].as_array().unwrap().len(),
        2,
        "{list}"
    );
    assert_eq!(list["items"][0]["ports"][0]["port"], 8080);

    // A pod goes: its IP leaves the Endpoints (and the ReplicaSet's replacement joins).
    let gone_ip = ips(&ep)[0].clone();
    let victim = pods.list(&ListParams::default()).await.unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["status"]["podIP"] == gone_ip.as_str())
        .unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    pods.delete(&victim, &Default::default()).await.unwrap();
    let mut after = Value::Null;
    for _ in 0..150 {
        after = eps.get("web").await.unwrap();
        let now = ips(&after);
        if now.len() == 2 && !now.contains(&gone_ip) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !ips(&after).contains(&gone_ip) && ips(&after).len() == 2,
        "{after}"
    );

    // The Service goes: so do its Endpoints and slices.
    svcs.delete("web", &Default::default()).await.unwrap();
    for _ in 0..150 {
        let slices_left = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
            .await
            .unwrap()["items"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        if eps.get("web").await.is_err_and(|e| e.is_not_found()) && slices_left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Endpoints or EndpointSlices left after the Service was deleted");
}

/// Two controller managers: exactly one leads; when it stops, the other takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_lets_one_act() {
    use controller_manager::leader::{run_as_leader, Config};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let cfg = |id: &str| Config {
        identity: id.into(),
        lease_duration: Duration::from_secs(2),
        retry: Duration::from_millis(200),
        ..Config::controller_manager(id)
    };
    let (a_leads, b_leads) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let work = |flag: Arc<AtomicBool>| async move {
        flag.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await;
        Ok::<(), anyhow::Error>(())
    };
    let a = tokio::spawn(run_as_leader(
        client.clone(),
        cfg("a"),
        work(a_leads.clone()),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = tokio::spawn(run_as_leader(
        client.clone(),
        cfg("b"),
        work(b_leads.clone()),
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        a_leads.load(Ordering::SeqCst) && !b_leads.load(Ordering::SeqCst),
        "exactly one leader"
    );
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-system"));
    assert_eq!(
        leases.get("kube-controller-manager").await.unwrap()["spec"]["holderIdentity"],
        "a"
    );

    // The leader dies: the lease expires and the other takes over.
    a.abort();
    for _ in 0..50 {
        if b_leads.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(b_leads.load(Ordering::SeqCst), "b took over");
    let lease = leases.get("kube-controller-manager").await.unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    b.abort();
}

/// The controller-manager binary serves /metrics with its queues and reconcile counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_metrics() {
    let s = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&s.url);
    let port = minik8s_testkit::free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_controller-manager"))
        .args([
            "--server",
            &s.url,
            "--metrics-address",
            &format!("127.0.0.1:{port}"),
        ])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    sets.create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "m"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "m"}},
                 "template": {"metadata": {"labels": {"app": "m"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .await
        .unwrap();
    let mut text = String::new();
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
            text = r.text().await.unwrap_or_default();
            let done = text.lines().any(|l| {
                l.starts_with(
                    "controller_reconciles_total{controller=\"replicaset\",result=\"success\"}",
                ) && !l.ends_with(" 0")
            });
            if done {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        text.contains("workqueue_depth{name=\"replicaset\"}"),
        "{text}"
    );
    assert!(
        text.contains("workqueue_depth{name=\"endpoints\"}"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with(
            "controller_reconciles_total{controller=\"replicaset\",result=\"success\"}"
        ) && !l.ends_with(" 0")),
        "{text}"
    );
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-system"));
    assert!(
        leases.get("kube-controller-manager").await.is_ok(),
        "the binary elects a leader by default"
    );
    child.kill().await.unwrap();
}
