//! The kubelet on a real (private) dockerd: pods, volumes, env, limits,
//! restart policies, crash recovery, kubelet restarts, deletion and logs.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};
use std::time::Duration;

fn busybox(name: &str, script: &str) -> Value {
    json!({"name": name, "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": ["sh", "-c", script]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_containers_share_volume_and_localhost_with_env_and_limits() {
    let c = Cluster::start().await;
    let mut web = busybox("web", "httpd -f -p 8080 -h /srv");
    web["volumeMounts"] = json!([{"name": "data", "mountPath": "/srv"}]);
    web["resources"] = json!({"limits": {"cpu": "200m", "memory": "64Mi"}});
    let mut client = busybox("client", "echo hello > /shared/index.html; until wget -qO /shared/fetched http://localhost:8080/index.html; do sleep 0.2; done; env > /shared/env.tmp && mv /shared/env.tmp /shared/env; echo client done; sleep 3600");
    client["volumeMounts"] = json!([{"name": "data", "mountPath": "/shared"}]);
    client["env"] = json!([
        {"name": "GREETING", "value": "hi"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]);
    let created = c
        .create_pod(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "duo"},
            "spec": {"containers": [web, client], "volumes": [{"name": "data", "emptyDir": {}}]}}),
        )
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let p = c
        .wait_pod("duo", "Running with both containers ready", 60, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    let ip = p["status"]["podIP"].as_str().unwrap().to_string();
    assert!(
        ip.starts_with(&c.pod_cidr[..c.pod_cidr.len() - 4]),
        "{ip} in {}",
        c.pod_cidr
    );
    assert_eq!(
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["type"] == "Ready")
            .unwrap()["status"],
        "True"
    );

    // The client fetched the file over localhost, through the shared emptyDir.
    let vol = c.volume_dir(&uid, "data");
    for _ in 0..100 {
        if vol.join("env").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        std::fs::read_to_string(vol.join("fetched")).unwrap().trim(),
        "hello"
    );
    let env = std::fs::read_to_string(vol.join("env")).unwrap();
    for want in [
        "GREETING=hi".to_string(),
        "POD_NAME=duo".into(),
        "POD_NAMESPACE=default".into(),
        format!("POD_IP={ip}"),
    ] {
        assert!(
            env.lines().any(|l| l == want),
            "{want} missing from:\n{env}"
        );
    }
    assert!(
        env.lines().any(|l| l == "HOSTNAME=duo"),
        "the pod's hostname is its name:\n{env}"
    );

    // Limits reach Docker.
    let web_id = container_status(&p, "web").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("docker://")
        .to_string();
    let limits = c.dockerd.docker(&[
        "inspect",
        "-f",
        "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}",
        &web_id,
    ]);
    assert_eq!(limits, format!("200000000 {}", 64 * 1024 * 1024));

    // Logs through the apiserver, with our kubectl and the real one.
    let logs = c.pod_log("duo/log?container=client").await;
    assert_eq!(logs, "client done\n");
    let real = c.real_kubectl(&["logs", "duo", "-c", "client"]);
    assert_eq!(
        String::from_utf8_lossy(&real.stdout),
        "client done\n",
        "{}",
        String::from_utf8_lossy(&real.stderr)
    );
    let out = c.our_kubectl(&["logs", "duo", "-c", "client"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "client done\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The kubelet's Summary API reports the node and the pod's containers.
    let summary: Value = reqwest::get(format!("http://127.0.0.1:{}/stats/summary", c.port))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        summary["node"]["memory"]["workingSetBytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(summary["node"]["nodeName"], c.node.as_str());
    let duo = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "duo")
        .expect("pod duo in the summary");
    let mut names: Vec<&str> = duo["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["client", "web"]);
    assert!(
        duo["memory"]["workingSetBytes"].as_u64().unwrap() > 0,
        "{duo}"
    );
    assert!(duo["containers"][0]["cpu"]["usageNanoCores"].is_u64());

    // Deleting the pod removes every container, then the pod.
    assert_eq!(
        c.dockerd.pod_containers(&uid).len(),
        3,
        "pause + 2 app containers"
    );
    c.pods().delete("duo", &Default::default()).await.unwrap();
    c.wait_gone("duo", 60).await;
    assert!(
        c.dockerd.pod_containers(&uid).is_empty(),
        "containers left behind: {}\n{}",
        c.dockerd.docker(&["ps", "-a"]),
        tail(&c.kubelet_log(), 40)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policies_and_backoff() {
    let c = Cluster::start().await;
    let pod = |name: &str, policy: &str, script: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"restartPolicy": policy, "containers": [busybox("main", script)]}});
    c.create_pod(pod("always", "Always", "exit 1")).await;
    c.create_pod(pod("onfailure", "OnFailure", "exit 1")).await;
    c.create_pod(pod("never", "Never", "exit 1")).await;
    c.create_pod(pod("done", "OnFailure", "echo ok; exit 0"))
        .await;
    // An image no registry has: ErrImagePull, then ImagePullBackOff.
    let mut unpullable = pod("unpullable", "Always", "true");
    unpullable["spec"]["containers"][0]["image"] = json!("minik8s/missing:1");
    unpullable["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    c.create_pod(unpullable).await;

    let p = c
        .wait_pod("never", "Failed", 60, |p| phase(p) == "Failed")
        .await;
    assert_eq!(restarts(&p, "main"), 0);
    assert_eq!(
        container_status(&p, "main").unwrap()["state"]["terminated"]["exitCode"],
        1
    );
    let p = c
        .wait_pod("done", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    assert_eq!(
        container_status(&p, "main").unwrap()["state"]["terminated"]["reason"],
        "Completed"
    );
    assert_eq!(restarts(&p, "main"), 0);

    // Failures restart: the first at once, then after a growing back-off.
    let p = c
        .wait_pod("onfailure", "restarted", 60, |p| restarts(p, "main") >= 1)
        .await;
    assert_eq!(phase(&p), "Running");
    let p = c
        .wait_pod("always", "in CrashLoopBackOff", 60, |p| {
            restarts(p, "main") >= 1
                && container_status(p, "main")
                    .is_some_and(|s| s["state"]["waiting"]["reason"] == "CrashLoopBackOff")
        })
        .await;
    assert!(
        container_status(&p, "main").unwrap()["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .contains("back-off 10s"),
        "{}",
        p["status"]
    );
    assert_eq!(
        container_status(&p, "main").unwrap()["lastState"]["terminated"]["exitCode"],
        1
    );
    let p = c
        .wait_pod("always", "restarted twice", 60, |p| {
            restarts(p, "main") >= 2
        })
        .await;
    let p2 = c
        .wait_pod("always", "backing off longer", 30, |p| {
            container_status(p, "main").is_some_and(|s| {
                s["state"]["waiting"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("back-off 20s"))
            })
        })
        .await;
    assert!(restarts(&p2, "main") >= restarts(&p, "main"));

    let waiting = |p: &Value| container_status(p, "main").map(|s| s["state"]["waiting"].clone());
    let p = c
        .wait_pod("unpullable", "ErrImagePull or ImagePullBackOff", 60, |p| {
            waiting(p)
                .is_some_and(|w| w["reason"] == "ErrImagePull" || w["reason"] == "ImagePullBackOff")
        })
        .await;
    assert_eq!(phase(&p), "Pending");
    let p = c
        .wait_pod("unpullable", "ImagePullBackOff", 60, |p| {
            waiting(p).is_some_and(|w| w["reason"] == "ImagePullBackOff")
        })
        .await;
    assert_eq!(
        waiting(&p).unwrap()["message"],
        "Back-off pulling image \"minik8s/missing:1\""
    );
    let events = c.real_kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=unpullable",
    ]);
    let events = String::from_utf8_lossy(&events.stdout).to_string();
    assert!(
        events.contains("Failed to pull image \"minik8s/missing:1\"") && events.contains("BackOff"),
        "{events}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_kubelet_restarts_and_graceful_deletion() {
    let mut c = Cluster::start().await;
    let host = tempfile::tempdir().unwrap();
    let mut main = busybox(
        "main",
        "trap 'echo got TERM > /host/term; exit 0' TERM; echo started; while :; do sleep 0.2; done",
    );
    main["volumeMounts"] = json!([{"name": "host", "mountPath": "/host"}]);
    let created = c
        .create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sturdy"},
            "spec": {"terminationGracePeriodSeconds": 10, "containers": [main],
                     "volumes": [{"name": "host", "hostPath": {"path": host.path().to_str().unwrap()}}]}}))
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let p = c
        .wait_pod("sturdy", "Running", 60, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    let first_id = container_status(&p, "main").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .to_string();

    // docker kill of the app container: the kubelet starts it again.
    c.dockerd
        .docker(&["kill", first_id.trim_start_matches("docker://")]);
    let p = c
        .wait_pod("sturdy", "restarted after docker kill", 60, |p| {
            restarts(p, "main") == 1 && all_ready(p)
        })
        .await;
    let second_id = container_status(&p, "main").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first_id, second_id);

    // kill -9 the kubelet and start it again: the same containers keep running, status unchanged.
    let before: Vec<String> = c.dockerd.pod_containers(&uid);
    let status_before = c.pods().get("sturdy").await.unwrap()["status"].clone();
    c.kill_kubelet();
    tokio::time::sleep(Duration::from_secs(1)).await;
    c.start_kubelet();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut after = c.dockerd.pod_containers(&uid);
    let mut before_sorted = before.clone();
    before_sorted.sort();
    after.sort();
    assert_eq!(
        before_sorted,
        after,
        "the restarted kubelet kept the same containers\n{}",
        tail(&c.kubelet_log(), 20)
    );
    let status_after = c.pods().get("sturdy").await.unwrap()["status"].clone();
    assert_eq!(
        status_before["containerStatuses"],
        status_after["containerStatuses"]
    );
    assert_eq!(status_before["podIP"], status_after["podIP"]);
    assert!(c
        .kubelet_log()
        .contains("node already registered by this kubelet"));

    // A graceful delete lets the TERM-trapping container exit cleanly.
    c.pods()
        .delete("sturdy", &Default::default())
        .await
        .unwrap();
    c.wait_gone("sturdy", 30).await;
    assert_eq!(
        std::fs::read_to_string(host.path().join("term"))
            .unwrap()
            .trim(),
        "got TERM"
    );
    assert!(
        c.dockerd.pod_containers(&uid).is_empty(),
        "containers left behind: {}\n{}",
        c.dockerd.docker(&["ps", "-a"]),
        tail(&c.kubelet_log(), 40)
    );

    // A second kubelet claiming the same node from another address is refused.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .args([
            "--server",
            &c.server.url,
            "--node-name",
            &c.node,
            "--node-ip",
            "127.0.0.2",
            "--docker-socket",
            &c.dockerd.socket,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already registered by another kubelet"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_drive_readiness_and_liveness_and_examples_run() {
    let c = Cluster::start().await;
    let mut web = busybox("web", "httpd -f -p 8080 -h /www");
    web["ports"] = json!([{"name": "http", "containerPort": 8080}]);
    web["readinessProbe"] =
        json!({"httpGet": {"path": "/index.html", "port": "http"}, "periodSeconds": 1});
    web["livenessProbe"] = json!({"tcpSocket": {"port": 8080}, "periodSeconds": 1});
    let mut gate = busybox("gate", "touch /tmp/alive; sleep 3600");
    gate["readinessProbe"] =
        json!({"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1});
    gate["livenessProbe"] = json!({"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2});
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed"}, "spec": {"terminationGracePeriodSeconds": 1, "containers": [web, gate]}})).await;

    // web's HTTP readiness passes; gate's exec readiness fails, so the pod is not Ready.
    let p = c
        .wait_pod("probed", "web ready, gate not", 60, |p| {
            container_status(p, "web").is_some_and(|s| s["ready"] == true)
                && container_status(p, "gate").is_some_and(|s| s["started"] == true)
        })
        .await;
    assert_eq!(container_status(&p, "gate").unwrap()["ready"], false);
    let ready = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|x| x["type"] == "Ready"))
            .map(|x| x["status"].clone())
    };
    assert_eq!(ready(&p), Some(json!("False")));
    assert_eq!(phase(&p), "Running");

    // The readiness file appears: the pod becomes Ready.
    let gate_id = container_status(&p, "gate").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("docker://")
        .to_string();
    c.dockerd.docker(&["exec", &gate_id, "touch", "/tmp/ready"]);
    c.wait_pod("probed", "Ready", 30, |p| ready(p) == Some(json!("True")))
        .await;

    // The liveness file goes away: the container is restarted, and the new one is not ready.
    c.dockerd.docker(&["exec", &gate_id, "rm", "/tmp/alive"]);
    let p = c
        .wait_pod("probed", "gate restarted by its liveness probe", 60, |p| {
            restarts(p, "gate") == 1
                && container_status(p, "gate").is_some_and(|s| s["started"] == true)
        })
        .await;
    assert_eq!(container_status(&p, "gate").unwrap()["ready"], false);
    assert_eq!(
        restarts(&p, "web"),
        0,
        "web's TCP liveness probe keeps passing"
    );

    // examples/hello-pod.yaml runs and says hello.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello-pod.yaml"),
    )
    .unwrap();
    let hello: Value = serde_yaml::from_str(&text).unwrap();
    c.create_pod(hello).await;
    c.wait_pod("hello", "Running", 60, |p| {
        phase(p) == "Running" && all_ready(p)
    })
    .await;
    let mut logs = String::new();
    for _ in 0..50 {
        logs = c.pod_log("hello/log").await;
        if !logs.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(logs, "hello from hello\n");

    // examples/web.yaml: the ReplicaSet controller and the scheduler bring up 3 ready httpd pods.
    c.spawn_control_plane(controller_manager::Config::default());
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/web.yaml"),
    )
    .unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let obj: Value = serde::Deserialize::deserialize(doc).unwrap();
        let info = minik8s_api::registry::by_kind(
            obj["apiVersion"].as_str().unwrap(),
            obj["kind"].as_str().unwrap(),
        )
        .unwrap();
        c.client
            .dynamic(info, Some("default"))
            .create(&obj)
            .await
            .unwrap();
    }
    let sets = c
        .client
        .dynamic(minik8s_api::registry::of::<ReplicaSet>(), Some("default"));
    let mut status = Value::Null;
    for _ in 0..300 {
        status = sets.get("web").await.unwrap()["status"].clone();
        if status["readyReplicas"] == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        status["readyReplicas"],
        3,
        "examples/web.yaml: {status}\n{}",
        tail(&c.kubelet_log(), 20)
    );
}

/// Two kubelets on one dockerd and the scheduler: pods alternate between the
/// nodes, run, and neither kubelet touches the other's containers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_kubelets_round_robin_without_stepping_on_each_other() {
    let c = Cluster::start().await;
    let second = format!("{}-b", c.node);
    let cidr = common::free_pod_cidr();
    let mut other = c.spawn_kubelet(&second, minik8s_testkit::free_port(), &cidr);
    c.spawn_scheduler();
    let nodes = c.client.dynamic(minik8s_api::registry::of::<Node>(), None);
    for _ in 0..100 {
        if nodes.get(&second).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut placed = Vec::new();
    let mut uids = Vec::new();
    for i in 0..4 {
        let name = format!("rr{i}");
        let p = c.pods().create(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [busybox("main", "sleep 3600")]}})).await.unwrap();
        uids.push(p["metadata"]["uid"].as_str().unwrap().to_string());
        let p = c
            .wait_pod(&name, "Running", 60, |p| {
                phase(p) == "Running" && all_ready(p)
            })
            .await;
        placed.push(p["spec"]["nodeName"].as_str().unwrap().to_string());
    }
    assert_ne!(placed[0], placed[1], "{placed:?}");
    assert_eq!(
        (&placed[0], &placed[1]),
        (&placed[2], &placed[3]),
        "{placed:?}"
    );
    // Both kubelets sweep for orphans every 10 s: after that, every pod still has its containers.
    tokio::time::sleep(Duration::from_secs(12)).await;
    for uid in &uids {
        assert_eq!(
            c.dockerd.pod_containers(uid).len(),
            2,
            "pause + app of pod {uid}"
        );
    }
    let _ = other.kill();
    let _ = other.wait();
}
