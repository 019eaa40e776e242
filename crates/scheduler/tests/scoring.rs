//! The scheduler's scores against a real apiserver with three nodes: a
//! preferred node term wins, a PreferNoSchedule taint is avoided, a
//! preferred anti-affinity keeps a pod away from its peers, and the least
//! allocated node takes the next pod.

use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::registry;
use minik8s_client::Client;
use minik8s_testkit::{Backend, TestServer};
use serde_json::json;

mod common;
use common::{node, node_of, pod, start_scheduler, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferences_and_free_room_rank_the_nodes() {
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
    let mut tainted = node("n3", json!({"kubernetes.io/hostname": "n3"}));
    tainted["spec"] = json!({"taints": [{"key": "maintenance", "effect": "PreferNoSchedule"}]});
    nodes.create(&tainted).await.unwrap();
    start_scheduler(&client);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let place = |name: String, labels: serde_json::Value, spec: serde_json::Value| {
        let pods = pods.clone();
        async move {
            pods.create(&pod(&name, labels, spec)).await.unwrap();
            let p = wait_for(&pods, &name, "bound", |p| !node_of(p).is_empty()).await;
            node_of(&p)
        }
    };

    // Preferred node affinity: every time on the ssd node, not in turns.
    let prefers_ssd = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}});
    for i in 0..3 {
        let at = place(
            format!("ssd{i}"),
            json!({"app": "ssd"}),
            prefers_ssd.clone(),
        )
        .await;
        assert_eq!(at, "n1", "ssd{i}");
    }

    // PreferNoSchedule: avoided while other nodes fit, never refused.
    let mut plain = Vec::new();
    for i in 0..4 {
        plain.push(place(format!("plain{i}"), json!({"app": "plain"}), json!({})).await);
    }
    assert!(!plain.iter().any(|n| n == "n3"), "{plain:?}");
    let only_n3 = json!({"nodeSelector": {"kubernetes.io/hostname": "n3"}});
    assert_eq!(place("onto-n3".into(), json!({}), only_n3).await, "n3");

    // Preferred anti-affinity: away from the ssd pods, and n3's taint
    // outweighs its emptiness, so n2.
    let away = json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app": "ssd"}}}}]}}});
    assert_eq!(
        place("away".into(), json!({"app": "away"}), away).await,
        "n2"
    );

    // Least allocated: n2 taken by a pod of 1500m, the next pod asking for
    // CPU goes to the node with the most left that is not tainted: n1.
    let hog = json!({"nodeName": "n2", "containers": [{"name": "c", "image": "busybox",
        "resources": {"requests": {"cpu": "1500m"}}}]});
    pods.create(&pod("hog", json!({}), hog)).await.unwrap();
    let cpu = json!({"containers": [{"name": "c", "image": "busybox",
        "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}}}]});
    // The hog is seen by the scheduler through its watch before the next decision.
    wait_for(&pods, "hog", "bound", |p| !node_of(p).is_empty()).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(place("sized".into(), json!({}), cpu).await, "n1");
}
