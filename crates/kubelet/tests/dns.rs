//! Cluster DNS from inside a pod on real Docker: the kubelet writes the pod's
//! resolv.conf from --cluster-dns (ClusterFirst), kube-proxy's DNS answers on
//! the pod network's gateway, and busybox in the pod resolves Services,
//! short names through the search list, and a pod's hostname.subdomain.

mod common;

use common::Cluster;
use k8s_openapi::api::core::v1::Service;
use serde_json::{json, Value};
use std::time::Duration;

/// The pod network's gateway: the node side of the pods' bridge.
fn gateway(pod_cidr: &str) -> String {
    let base = pod_cidr.split('/').next().unwrap();
    let mut octets: Vec<&str> = base.split('.').collect();
    octets[3] = "1";
    octets.join(".")
}

fn app_container(c: &Cluster, pod: &Value) -> String {
    c.dockerd
        .container_of(pod["metadata"]["uid"].as_str().unwrap(), "c")
}

fn busybox_pod(name: &str, extra_spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "minik8s/busybox:latest",
            "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}});
    if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_resolve_services_and_peers_through_the_cluster_dns() {
    // The DNS listens on the pods' gateway (the kubelet creates the network at start).
    let c = Cluster::start_with(|cidr| vec!["--cluster-dns".into(), gateway(cidr)]).await;
    let dns_ip = gateway(&c.pod_cidr);
    c.spawn_control_plane(controller_manager::Config::default());
    let dns = kube_proxy::dns::Config {
        listen: format!("{dns_ip}:53").parse().unwrap(),
        domain: "cluster.local".into(),
        upstreams: Vec::new(),
    };
    tokio::spawn(kube_proxy::run(
        c.client.clone(),
        kube_proxy::Parts {
            dns: Some(dns),
            ..Default::default()
        },
    ));

    let svcs = c
        .client
        .dynamic(minik8s_api::registry::of::<Service>(), Some("default"));
    let web = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "nothing"}, "ports": [{"name": "http", "port": 80}]}}),
        )
        .await
        .unwrap();
    let vip = web["spec"]["clusterIP"].as_str().unwrap().to_string();
    svcs.create(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"app": "peer"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )
    .await
    .unwrap();
    c.create_pod(busybox_pod(
        "peer",
        json!({"hostname": "peer-0", "subdomain": "peers"}),
    ))
    .await;
    c.create_pod(busybox_pod("client", json!({}))).await;
    let running = |p: &Value| p["status"]["phase"] == "Running";
    let peer = c.wait_pod("peer", "running", 60, running).await;
    let client = c.wait_pod("client", "running", 60, running).await;
    let peer_ip = peer["status"]["podIP"].as_str().unwrap().to_string();
    let box_id = app_container(&c, &client);

    let resolv = c
        .dockerd
        .docker(&["exec", &box_id, "cat", "/etc/resolv.conf"]);
    assert!(resolv.contains(&format!("nameserver {dns_ip}")), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("ndots:5"), "{resolv}");

    // nslookup <name> prints the answer's addresses after the server's own.
    let lookup = |name: &str| {
        c.dockerd
            .docker(&["exec", &box_id, "timeout", "5", "nslookup", name])
    };
    let every = Duration::from_millis(300);
    let what = format!("web resolves to {vip}");
    minik8s_testkit::poll(20, every, &what, || async {
        let out = lookup("web.default.svc.cluster.local");
        out.contains(&vip).then_some(()).ok_or(out)
    })
    .await;
    let short = lookup("web");
    assert!(
        short.contains(&vip),
        "the search list completes `web`: {short}"
    );
    let what = format!("peer-0.peers resolves to {peer_ip}");
    minik8s_testkit::poll(20, every, &what, || async {
        let out = lookup("peer-0.peers.default.svc.cluster.local");
        out.contains(&peer_ip).then_some(()).ok_or(out)
    })
    .await;
    // The libc resolver (what every program uses) through the search list too.
    let ping = c.dockerd.docker(&[
        "exec",
        &box_id,
        "ping",
        "-c",
        "1",
        "-W",
        "2",
        "peer-0.peers",
    ]);
    assert!(
        ping.contains(&peer_ip),
        "ping resolves peer-0.peers: {ping}"
    );
    let missing = lookup("nope.default.svc.cluster.local");
    assert!(!missing.contains("Address: 10."), "{missing}");

    // SRV records: a named port of a ClusterIP Service, and each endpoint of
    // a headless one at its own port and name; PTR for a Service address.
    let srv = |name: &str| {
        c.dockerd.docker(&[
            "exec",
            &box_id,
            "timeout",
            "5",
            "nslookup",
            "-type=srv",
            name,
        ])
    };
    let out = srv("_http._tcp.web.default.svc.cluster.local");
    assert!(
        out.contains("0 100 80 web.default.svc.cluster.local"),
        "{out}"
    );
    minik8s_testkit::poll(20, every, "the peer's SRV record", || async {
        let out = srv("_http._tcp.peers.default.svc.cluster.local");
        out.contains("0 100 8080 peer-0.peers.default.svc.cluster.local")
            .then_some(())
            .ok_or(out)
    })
    .await;
    let reverse = lookup(&vip);
    assert!(
        reverse.contains("name = web.default.svc.cluster.local"),
        "{reverse}"
    );
}
