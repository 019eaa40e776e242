//! The kubelet on a flannel node (real Docker): the pod subnet and MTU come
//! from flannel's `subnet.env`, not from --pod-cidr or node IPAM; a lease
//! file that does not parse stops the kubelet with a message naming it.

mod common;

use common::{free_pod_cidr, phase, Cluster};
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_network_follows_flannels_lease() {
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("subnet.env");
    // A subnet other than the one the harness passes as --pod-cidr: flannel's wins.
    let flannel_subnet = free_pod_cidr();
    let gateway = flannel_subnet.replace(".0/24", ".1/24");
    std::fs::write(
        &env_file,
        format!("FLANNEL_NETWORK=10.200.0.0/13\nFLANNEL_SUBNET={gateway}\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n"),
    )
    .unwrap();
    let path = env_file.display().to_string();
    let c = Cluster::start_with(|_| vec!["--flannel-subnet-env".into(), path]).await;

    let node = c
        .client
        .dynamic(minik8s_api::registry::of::<Node>(), None)
        .get(&c.node)
        .await
        .unwrap();
    assert_eq!(node["spec"]["podCIDR"], flannel_subnet.as_str());

    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mtu"},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c",
            "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}}))
        .await;
    let pod = c
        .wait_pod("mtu", "running", 60, |p| phase(p) == "Running")
        .await;
    let ip = pod["status"]["podIP"].as_str().unwrap();
    let prefix = flannel_subnet.trim_end_matches("0/24");
    assert!(ip.starts_with(prefix), "pod IP {ip} is in {flannel_subnet}");

    let id = c
        .dockerd
        .container_of(pod["metadata"]["uid"].as_str().unwrap(), "c");
    let mtu = c
        .dockerd
        .docker(&["exec", &id, "cat", "/sys/class/net/eth0/mtu"]);
    assert_eq!(mtu.trim(), "1400", "the pod's interface has flannel's MTU");
    // FLANNEL_IPMASQ=true: flannel masquerades, so Docker must not (pod-to-pod keeps its addresses).
    let options = c.dockerd.docker(&[
        "network",
        "inspect",
        "-f",
        "{{json .Options}}",
        &format!("mk-{}", c.node),
    ]);
    assert!(
        options.contains(r#""com.docker.network.bridge.enable_ip_masquerade":"false""#),
        "{options}"
    );
}

#[test]
fn a_broken_lease_file_stops_the_kubelet_with_its_name() {
    let dockerd = common::Dockerd::start();
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("subnet.env");
    std::fs::write(&env_file, "FLANNEL_SUBNET=not-a-subnet\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .args([
            "--server",
            "http://127.0.0.1:1",
            "--docker-socket",
            &dockerd.socket,
        ])
        .args(["--root-dir", &dir.path().join("root").display().to_string()])
        .args(["--flannel-subnet-env", &env_file.display().to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the kubelet refuses to start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&env_file.display().to_string()) && err.contains("FLANNEL_SUBNET"),
        "the error names the file and the variable: {err}"
    );
}
