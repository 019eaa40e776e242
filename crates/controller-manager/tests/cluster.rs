//! The cluster-wide controllers against a real apiserver: node lifecycle,
//! node IPAM and namespace deletion.
//!
//! Node lifecycle with short timeouts, two hollow nodes, the scheduler and
//! every controller: a node that stops heartbeating
//! goes Unknown and gets the unreachable taints, its pods are evicted after
//! their toleration and the ReplicaSet recreates them on the other node; when
//! the node comes back it loses the taints and gets pods again.

mod common;

use common::until;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::Service;
use kubelet::hollow::{self, HollowConfig};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

fn hollow_node(client: &Client, prefix: &str) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    tokio::spawn(hollow::run(
        client.clone(),
        HollowConfig {
            prefix: prefix.into(),
            count: 1,
            lease_seconds: 1,
            sync_seconds: 1,
            fake_gpus: 0,
        },
    ))
}

async fn live_pods(pods: &DynamicApi) -> Vec<Value> {
    pods.list(&ListParams::default()).await.unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

fn node_of(p: &Value) -> &str {
    p["spec"]["nodeName"].as_str().unwrap_or("")
}

fn ready(node: &Value) -> String {
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_node_is_tainted_and_its_pods_move() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let node_a = hollow_node(&client, "a");
    let _node_b = hollow_node(&client, "b");
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    let config = controller_manager::Config {
        node_monitor_period: Duration::from_millis(500),
        // Five missed 1 s heartbeats: room for a loaded 2-core machine.
        node_monitor_grace_period: Duration::from_secs(5),
        ..Default::default()
    };
    tokio::spawn(controller_manager::run(client.clone(), config));

    let nodes = client.dynamic(registry::of::<Node>(), None);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-node-lease"));
    until("both nodes registered and heartbeating", 20, || async {
        let a = nodes.get("a-0").await.map_err(|e| e.to_string())?;
        let b = nodes.get("b-0").await.map_err(|e| e.to_string())?;
        for node in ["a-0", "b-0"] {
            leases.get(node).await.map_err(|e| format!("{node}: {e}"))?;
        }
        let healthy = |n: &Value| ready(n) == "True" && taint_keys(n).is_empty();
        (healthy(&a) && healthy(&b))
            .then_some(())
            .ok_or_else(|| format!("a-0 {:?}, b-0 {:?}", taint_keys(&a), taint_keys(&b)))
    })
    .await;
    // The pods tolerate an unreachable node for 2 s (the admission default is 300 s).
    sets.create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                       "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                                        "effect": "NoExecute", "tolerationSeconds": 2}]}}}}))
        .await
        .unwrap();
    let first = until("one running pod on each node", 20, || async {
        let live = live_pods(&pods).await;
        let mut on: Vec<&str> = live
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .map(node_of)
            .collect();
        on.sort();
        let all: Vec<String> = pods.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{} on {} {} deleting={}",
                    p["metadata"]["name"],
                    node_of(p),
                    p["status"]["phase"],
                    !p["metadata"]["deletionTimestamp"].is_null()
                )
            })
            .collect();
        (on == ["a-0", "b-0"])
            .then(|| live.clone())
            .ok_or_else(|| format!("running on {on:?}; pods: {all:?}"))
    })
    .await;
    let on_a = first.iter().find(|p| node_of(p) == "a-0").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();

    // Node a stops heartbeating.
    node_a.abort();
    let a = until("a-0 Unknown and tainted unreachable", 20, || async {
        let a = nodes.get("a-0").await.map_err(|e| e.to_string())?;
        let keys = taint_keys(&a);
        (ready(&a) == "Unknown"
            && keys.contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
            && keys.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()))
        .then(|| a.clone())
        .ok_or_else(|| format!("ready={} taints={keys:?}", ready(&a)))
    })
    .await;
    let cond = a["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(cond["reason"], "NodeStatusUnknown");
    assert_eq!(cond["message"], "Kubelet stopped posting node status.");
    let b = nodes.get("b-0").await.unwrap();
    assert_eq!(ready(&b), "True", "the heartbeating node stays Ready");
    assert!(taint_keys(&b).is_empty());

    // Its pod is evicted after 2 s and replaced on b.
    until("the pod on a-0 evicted and replaced on b-0", 20, || async {
        let evicted = pods
            .get(&on_a)
            .await
            .map(|p| !p["metadata"]["deletionTimestamp"].is_null())
            .unwrap_or(true);
        let live = live_pods(&pods).await;
        let on: Vec<&str> = live.iter().map(node_of).collect();
        (evicted && on == ["b-0", "b-0"])
            .then_some(())
            .ok_or_else(|| format!("evicted={evicted} live on {on:?}"))
    })
    .await;
    let events = client.dynamic(registry::of::<Event>(), Some("default"));
    let evs = events
        .list(&ListParams::default().fields("reason=TaintManagerEviction"))
        .await
        .unwrap();
    assert_eq!(evs["items"][0]["involvedObject"]["name"], on_a.as_str());

    // Node a comes back: Ready again, untainted, and it takes new pods.
    let _node_a = hollow_node(&client, "a");
    until("a-0 Ready and untainted", 20, || async {
        let a = nodes.get("a-0").await.map_err(|e| e.to_string())?;
        (ready(&a) == "True" && taint_keys(&a).is_empty())
            .then_some(())
            .ok_or_else(|| format!("ready={} taints={:?}", ready(&a), taint_keys(&a)))
    })
    .await;
    until(
        "the evicted pod finalized by its returning node",
        20,
        || async {
            match pods.get(&on_a).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    sets.patch(
        "web",
        Some("scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 4}}),
    )
    .await
    .unwrap();
    until("new pods on a-0 again", 20, || async {
        let live = live_pods(&pods).await;
        let on_a = live.iter().filter(|p| node_of(p) == "a-0").count();
        (live.len() == 4 && on_a >= 1)
            .then_some(())
            .ok_or_else(|| format!("{} live, {on_a} on a-0", live.len()))
    })
    .await;
}

/// Node IPAM: nodes without a podCIDR get distinct /24s from 10.244.0.0/16; a
/// node that brings its own (flannel) keeps it and nobody else gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_a_pod_cidr_get_one() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let nodes = client.dynamic(registry::of::<Node>(), None);
    let node = |name: &str, cidr: Option<&str>| {
        let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
        if let Some(c) = cidr {
            n["spec"] = json!({"podCIDR": c, "podCIDRs": [c]});
        }
        n
    };
    nodes
        .create(&node("flannel", Some("10.244.0.0/24")))
        .await
        .unwrap();
    tokio::spawn(controller_manager::run(
        client.clone(),
        controller_manager::Config::default(),
    ));
    for name in ["n1", "n2", "n3"] {
        nodes.create(&node(name, None)).await.unwrap();
    }
    let mut cidrs = until("every node has a podCIDR", 20, || async {
        let list = nodes.list(&ListParams::default()).await.unwrap();
        let cidrs: Vec<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["spec"]["podCIDR"].as_str().map(str::to_string))
            .collect();
        (cidrs.len() == 4)
            .then(|| cidrs.clone())
            .ok_or_else(|| format!("{cidrs:?}"))
    })
    .await;
    assert_eq!(
        nodes.get("flannel").await.unwrap()["spec"]["podCIDR"],
        "10.244.0.0/24"
    );
    cidrs.sort();
    assert_eq!(
        cidrs,
        [
            "10.244.0.0/24",
            "10.244.1.0/24",
            "10.244.2.0/24",
            "10.244.3.0/24"
        ]
    );
}

/// Namespace deletion: everything inside goes (pods, a ReplicaSet, a Service
/// and its Endpoints, custom resources found through discovery), then the
/// namespace itself; while a finalizer holds a custom resource, the
/// namespace stays Terminating and its conditions say what remains and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_empties_and_removes_it() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    tokio::spawn(controller_manager::run(
        client.clone(),
        controller_manager::Config::default(),
    ));
    let nss = client.dynamic(registry::of::<Namespace>(), None);
    nss.create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await
        .unwrap();
    let pods = client.dynamic(registry::of::<Pod>(), Some("team"));
    pods.create(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"app": "x"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
        .await
        .unwrap();
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("team"));
    sets.create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "r"}},
                 "template": {"metadata": {"labels": {"app": "r"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
        .await
        .unwrap();
    let svcs = client.dynamic(registry::of::<Service>(), Some("team"));
    svcs.create(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
    )
    .await
    .unwrap();
    let crds = client.dynamic(
        registry::by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition").unwrap(),
        None,
    );
    crds.create(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .await
        .unwrap();
    let info = until("the Widget kind is served", 10, || async {
        match client.resource_for_kind("example.com/v1", "Widget").await {
            Ok(Some(info)) => Ok(info),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let widgets = client.dynamic(info, Some("team"));
    for (name, finalizers) in [("plain", json!([])), ("held", json!(["example.com/hold"]))] {
        widgets
            .create(&json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": name, "finalizers": finalizers}}))
            .await
            .unwrap();
    }
    until("the ReplicaSet's pods exist", 20, || async {
        let n = pods.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .map_or(0, Vec::len);
        (n == 3).then_some(()).ok_or_else(|| format!("{n} pods"))
    })
    .await;
    nss.delete("team", &minik8s_client::DeleteParams::default())
        .await
        .unwrap();
    // The held Widget keeps the namespace; its conditions say so, as
    // `kubectl describe namespace` shows them.
    until("the namespace says what holds it", 30, || async {
        let ns = nss.get("team").await.map_err(|e| e.to_string())?;
        let conds = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let of = |t: &str| conds.iter().find(|c| c["type"] == t).cloned().unwrap_or_default();
        let finalizers = of("NamespaceFinalizersRemaining");
        let content = of("NamespaceContentRemaining");
        (finalizers["status"] == "True"
            && finalizers["message"]
                == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
            && content["message"] == "Some resources are remaining: widgets.example.com has 1 resource instances"
            && of("NamespaceDeletionDiscoveryFailure")["status"] == "False")
            .then_some(())
            .ok_or_else(|| format!("{conds:?}"))
    })
    .await;
    assert_eq!(
        nss.get("team").await.unwrap()["status"]["phase"],
        "Terminating"
    );
    assert!(widgets.get("plain").await.unwrap_err().is_not_found());
    // The one holding it lets go: the namespace goes.
    widgets
        .patch(
            "held",
            None,
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await
        .unwrap();
    until("the namespace gone", 30, || async {
        match nss.get("team").await {
            Err(e) if e.is_not_found() => Ok(()),
            other => Err(format!("{:?}", other.map(|n| n["status"].clone()))),
        }
    })
    .await;
    // Its content is gone too (the store is asked directly, across namespaces).
    let all_pods = client.dynamic(registry::of::<Pod>(), None);
    let left = all_pods
        .list(&ListParams::default().fields("metadata.namespace=team"))
        .await
        .unwrap();
    assert_eq!(left["items"].as_array().map_or(0, Vec::len), 0, "{left}");
    let left = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(left["items"].as_array().map_or(0, Vec::len), 0, "{left}");
    for (api_version, kind) in [
        ("apps/v1", "ReplicaSet"),
        ("v1", "Service"),
        ("v1", "Endpoints"),
    ] {
        let api = client.dynamic(registry::by_kind(api_version, kind).unwrap(), Some("team"));
        let list = api.list(&ListParams::default()).await.unwrap();
        assert_eq!(
            list["items"].as_array().map_or(0, Vec::len),
            0,
            "{kind}: {list}"
        );
    }
}
