//! Hollow nodes are the real kubelet on the in-memory runtime: registration
//! with the hollow capacity and label, pods bound to them go Running and
//! Ready with an address from the node's own pod CIDR and `fake://`
//! container IDs, a graceful deletion is confirmed by the node (which then
//! forgets the pod's token), a killed node stops heartbeating and its pods'
//! containers go with it.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ServiceAccount};
use kubelet::hollow::{self, HollowConfig};
use kubelet::runtime::ContainerRuntime;
use minik8s_api::registry;
use minik8s_client::{Client, DeleteParams};
use minik8s_testkit::{eventually, Backend, TestServer};
use serde_json::{json, Value};

fn pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "app", "image": "busybox",
                                 "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}},
                                {"name": "side", "image": "busybox"}]}})
}

/// An apiserver (with its secure port, for pods' tokens) and `count` hollow nodes `<prefix>-0..` that sync and
/// heartbeat every second.
async fn start_hollow(prefix: &str, count: usize) -> (TestServer, Client, hollow::HollowNodes) {
    // The secure port on: its PKI holds the key that signs pods' tokens.
    let server = TestServer::start_with(Backend::Embedded, |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", minik8s_testkit::free_port()));
    })
    .await;
    let client = Client::new(&server.url);
    // What the controller manager makes in a cluster: the namespace's
    // ServiceAccount and the CA bundle its token volume mounts.
    let ca = std::fs::read_to_string(server.config.data_dir.join("pki/ca.crt")).unwrap();
    for (info, object) in [
        (
            registry::of::<ServiceAccount>(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        ),
        (
            registry::of::<ConfigMap>(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ca}}),
        ),
    ] {
        client
            .dynamic(info, Some("default"))
            .create(&object)
            .await
            .unwrap();
    }
    let cfg = HollowConfig {
        prefix: prefix.into(),
        count,
        lease_seconds: 1,
        sync_seconds: 1,
        fake_gpus: 0,
    };
    let nodes = hollow::start(&client, &cfg).await.unwrap();
    (server, client, nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hollow_nodes_run_the_real_kubelet_on_memory() {
    let (_server, client, nodes) = start_hollow("h", 2).await;
    let node_api = client.dynamic(registry::of::<Node>(), None);
    let n1 = node_api.get("h-1").await.unwrap();
    assert_eq!(n1["metadata"]["labels"]["minik8s.io/hollow"], "true");
    assert_eq!(n1["metadata"]["labels"]["kubernetes.io/hostname"], "h-1");
    assert_eq!(n1["status"]["capacity"]["cpu"], "4");
    assert_eq!(n1["status"]["capacity"]["memory"], "16777216Ki");
    assert_eq!(n1["spec"]["podCIDR"], "10.0.1.0/24");
    assert_eq!(
        n1["status"]["nodeInfo"]["containerRuntimeVersion"],
        "fake://0.0.0-fake"
    );

    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    pods.create(&pod("a", "h-1")).await.unwrap();
    pods.create(&pod("b", "h-1")).await.unwrap();
    let a = eventually(20, "pod a Running and Ready on h-1", || async {
        let p = pods.get("a").await.ok()?;
        let ready = p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        (p["status"]["phase"] == "Running" && ready).then_some(p)
    })
    .await;
    let a_uid = a["metadata"]["uid"].as_str().unwrap().to_string();
    let ip = a["status"]["podIP"].as_str().unwrap();
    assert!(ip.starts_with("10.0.1."), "{ip} is in h-1's pod CIDR");
    assert_eq!(a["status"]["hostIP"], "10.255.0.1");
    let statuses = a["status"]["containerStatuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 2);
    for s in statuses {
        assert!(
            s["containerID"].as_str().unwrap().starts_with("fake://"),
            "{s}"
        );
        assert_eq!(s["ready"], true, "{s}");
        assert!(s["state"]["running"]["startedAt"].is_string(), "{s}");
    }
    let b = eventually(20, "pod b Running", || async {
        let p = pods.get("b").await.ok()?;
        (p["status"]["phase"] == "Running").then_some(p)
    })
    .await;
    assert_ne!(
        b["status"]["podIP"], a["status"]["podIP"],
        "distinct pod IPs"
    );

    let h1 = nodes
        .kubelets
        .iter()
        .find(|k| k.config.node_name == "h-1")
        .unwrap()
        .clone();
    assert!(
        h1.tokens.holds_for(&a_uid),
        "a's token is kept while it runs"
    );

    // A graceful deletion is finished by the node (the object goes away),
    // and the node forgets the pod's token.
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    eventually(20, "pod a deleted by its node", || async {
        match pods.get("a").await {
            Err(e) if e.is_not_found() => Some(()),
            _ => None,
        }
    })
    .await;
    eventually(20, "a's token forgotten", || async {
        (!h1.tokens.holds_for(&a_uid)).then_some(())
    })
    .await;
    let live = h1.runtime.list(None).await.unwrap();
    assert_eq!(live.len(), 3, "b's sandbox and two containers: {live:?}");
    assert!(live.iter().all(|c| c.pod_name == "b"));

    // Killed (dropped): the heartbeats stop, the lease is no longer renewed.
    drop(h1);
    drop(nodes);
    let leases = client.dynamic(registry::of::<Lease>(), Some("kube-node-lease"));
    let renewed = || async {
        leases.get("h-0").await.unwrap()["spec"]["renewTime"]
            .as_str()
            .unwrap()
            .to_string()
    };
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let before = renewed().await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(renewed().await, before, "a dropped hollow node is silent");
}

/// The command doc/kubelet.md shows: `kubelet --hollow-nodes N --node-name P`
/// (here 3 nodes) registers Ready nodes that run pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hollow_nodes_command_runs_nodes() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .args([
            "--server",
            &server.url,
            "--hollow-nodes",
            "3",
            "--node-name",
            "hollow",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting kubelet --hollow-nodes");
    let node_api = client.dynamic(registry::of::<Node>(), None);
    eventually(30, "hollow-0..2 registered and Ready", || async {
        let list = node_api.list(&Default::default()).await.ok()?;
        let ready: Vec<&str> = list["items"]
            .as_array()?
            .iter()
            .filter(|n| {
                n["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .filter_map(|n| n["metadata"]["name"].as_str())
            .collect();
        (ready == ["hollow-0", "hollow-1", "hollow-2"]).then_some(())
    })
    .await;
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    pods.create(&pod("c", "hollow-2")).await.unwrap();
    eventually(20, "the pod Running on hollow-2", || async {
        let p = pods.get("c").await.ok()?;
        (p["status"]["phase"] == "Running").then_some(())
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
}

/// Issue 16's defect: after a node's dockerd was killed, a pod's sandbox can
/// be left in a state where Docker reports it but no container can join it
/// ("cannot join IPC of a non running container"). The kubelet must replace
/// the sandbox and start the pod in a new one, not report CreateContainerError
/// for good. The in-memory runtime makes the first sandbox broken that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_sandbox_cannot_be_joined_gets_a_new_sandbox() {
    let (_server, client, nodes) = start_hollow("ipc", 1).await;
    let runtime = nodes.runtimes[0].clone();
    runtime.break_next_sandbox();
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    pods.create(
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"nodeName": "ipc-0", "containers": [{"name": "app", "image": "busybox"}]}}),
    )
    .await
    .unwrap();
    let p = eventually(30, "the pod Running in a new sandbox", || async {
        let p = pods.get("p").await.ok()?;
        (p["status"]["phase"] == "Running").then_some(p)
    })
    .await;
    let status = &p["status"]["containerStatuses"][0];
    assert!(status["state"]["running"].is_object(), "{status}");
    // The broken sandbox (the runtime's first container) is gone; the pod
    // runs in a new sandbox with its container.
    let live = runtime.list(None).await.unwrap();
    assert_eq!(live.len(), 2, "one sandbox and the app: {live:?}");
    assert!(live.iter().all(|c| c.state.is_running()), "{live:?}");
    assert!(
        live.iter().all(|c| c.id != "fake-000000000001"),
        "the broken sandbox was removed: {live:?}"
    );
}

/// A burst of pods on one node starts `--max-parallel-starts` at a time
/// (the runtime never has more starts under way), the pods waiting their
/// turn say ContainerCreating meanwhile, and every pod ends Running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pods_starts_a_bounded_number_at_a_time() {
    use kubelet::runtime::FakeRuntime;
    use minik8s_client::{Api, Informer, ListParams};
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let cfg = HollowConfig {
        prefix: "burst".into(),
        count: 1,
        lease_seconds: 1,
        sync_seconds: 30,
        fake_gpus: 0,
    };
    let mut config = hollow::node_config(&cfg, 0);
    config.max_parallel_starts = 2;
    let runtime = std::sync::Arc::new(FakeRuntime::new(hollow::CPUS, hollow::MEMORY_BYTES));
    runtime.set_start_latency(std::time::Duration::from_millis(150));
    let lp = ListParams::default().fields("spec.nodeName=burst-0");
    let mut informer = Informer::new(Api::<Pod>::all(&client), lp);
    let k = kubelet::prepare(client.clone(), config, runtime.clone(), informer.cache())
        .await
        .unwrap();
    let weak = std::sync::Arc::downgrade(&k);
    informer.on_event(move |ev| {
        if let Some(k) = weak.upgrade() {
            k.handle(ev)
        }
    });
    let informer = tokio::spawn(informer.run());
    k.clone().begin().await.unwrap();

    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let names: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
    for name in &names {
        let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": "burst-0", "containers": [{"name": "app", "image": "busybox"}]}});
        pods.create(&p).await.unwrap();
    }
    let mut seen_creating = false;
    for _ in 0..200 {
        let list = pods.list(&Default::default()).await.unwrap();
        let items = list["items"].as_array().unwrap().clone();
        seen_creating |= items.iter().any(|p| {
            p["status"]["phase"] == "Pending"
                && p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    == "ContainerCreating"
        });
        if items.len() == names.len() && items.iter().all(|p| p["status"]["phase"] == "Running") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for name in &names {
        assert_eq!(
            pods.get(name).await.unwrap()["status"]["phase"],
            "Running",
            "{name}"
        );
    }
    assert!(
        seen_creating,
        "a pod waiting for its turn said ContainerCreating"
    );
    assert_eq!(
        runtime.peak_concurrent_starts(),
        2,
        "two pods at a time were starting containers, never more"
    );
    informer.abort();
}
