//! ConfigMaps and Secrets reaching containers on a real (private) dockerd:
//! environment (`envFrom` with a prefix, `secretKeyRef`), mounted files with
//! their modes, a ConfigMap edit showing up in the mounted file, and a pod
//! whose Secret does not exist yet waiting in CreateContainerConfigError
//! until it is created.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use minik8s_api::registry;
use serde_json::{json, Value};
use std::time::Duration;

fn container_id(p: &Value) -> String {
    p["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("docker://"))
        .unwrap_or("")
        .to_string()
}

fn waiting_reason(p: &Value) -> (String, String) {
    let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
    (
        w["reason"].as_str().unwrap_or("").to_string(),
        w["message"].as_str().unwrap_or("").to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_and_secrets_reach_containers() {
    let c = Cluster::start().await;
    let maps = c
        .client
        .dynamic(registry::of::<ConfigMap>(), Some("default"));
    let secrets = c.client.dynamic(registry::of::<Secret>(), Some("default"));
    maps.create(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"},
                        "data": {"mode": "prod", "color": "blue"}}),
    )
    .await
    .unwrap();
    secrets
        .create(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                        "stringData": {"password": "s3cret"}}),
        )
        .await
        .unwrap();
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader"},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                     "command": ["sleep", "3600"],
                     "envFrom": [{"configMapRef": {"name": "app"}, "prefix": "APP_"}],
                     "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}],
                     "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"},
                                      {"name": "creds", "mountPath": "/etc/creds"},
                                      {"name": "conf", "mountPath": "/etc/mode", "subPath": "mode"}]}],
                 "volumes": [{"name": "conf", "configMap": {"name": "app"}},
                             {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}}]}}))
        .await;
    let p = c
        .wait_pod("reader", "Running and ready", 60, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    let id = container_id(&p);
    let exec = |args: &[&str]| {
        let mut full = vec!["exec", id.as_str()];
        full.extend_from_slice(args);
        c.dockerd.docker(&full)
    };
    let env = exec(&["env"]);
    for want in ["APP_mode=prod", "APP_color=blue", "PW=s3cret"] {
        assert!(env.lines().any(|l| l == want), "{want} in:\n{env}");
    }
    assert_eq!(exec(&["cat", "/etc/app/color"]).trim(), "blue");
    assert_eq!(
        exec(&["cat", "/etc/mode"]).trim(),
        "prod",
        "a subPath mount"
    );
    assert_eq!(exec(&["cat", "/etc/creds/password"]).trim(), "s3cret");
    assert_eq!(
        exec(&["stat", "-L", "-c", "%a", "/etc/creds/password"]).trim(),
        "400"
    );
    let touch = exec(&["sh", "-c", "touch /etc/app/new 2>&1 || echo refused"]);
    assert!(
        touch.contains("refused") || touch.contains("Read-only"),
        "read-only: {touch}"
    );

    // An edit reaches the mounted file within 10 s (the kubelet syncs every second here).
    maps.patch(
        "app",
        None,
        "application/merge-patch+json",
        &json!({"data": {"color": "green"}}),
    )
    .await
    .unwrap();
    let mut seen = String::new();
    for _ in 0..50 {
        seen = exec(&["cat", "/etc/app/color"]);
        if seen.trim() == "green" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        seen.trim(),
        "green",
        "the ConfigMap edit in the mounted file"
    );

    // A pod whose Secret does not exist yet waits, then starts once it appears.
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "patient"},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                     "command": ["sleep", "3600"],
                     "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}}]}]}}))
        .await;
    let p = c
        .wait_pod("patient", "waiting for its Secret", 30, |p| {
            waiting_reason(p).0 == "CreateContainerConfigError"
        })
        .await;
    assert_eq!(waiting_reason(&p).1, "secret \"later\" not found");
    assert_eq!(phase(&p), "Pending");
    secrets
        .create(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "later"},
                        "stringData": {"token": "t0k3n"}}),
        )
        .await
        .unwrap();
    let p = c
        .wait_pod("patient", "Running once the Secret exists", 30, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    let id = container_id(&p);
    let env = c.dockerd.docker(&["exec", &id, "env"]);
    assert!(env.lines().any(|l| l == "TOKEN=t0k3n"), "{env}");

    // examples/config.yaml with the real kubectl: env from both, the file from the ConfigMap.
    c.spawn_scheduler();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/config.yaml");
    let out = c.real_kubectl(&["apply", "-f", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_pod("configured", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let logs = c.real_kubectl(&["logs", "configured"]);
    assert_eq!(
        String::from_utf8_lossy(&logs.stdout),
        "hello s3cret\ncolor=blue\nsize=large\n"
    );
}
