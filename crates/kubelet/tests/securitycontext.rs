//! The kubelet honours securityContext on real Docker: the user and groups a
//! container runs as (runAsUser, runAsGroup, supplementalGroups, fsGroup on
//! its emptyDir), a read-only root filesystem, no new privileges, dropped
//! capabilities; and `runAsNonRoot` refuses to start a root container.

mod common;

use common::{container_status, Cluster};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_context_reaches_the_container() {
    let c = Cluster::start().await;
    let script = "id; touch /rootfs-file 2>/dev/null && echo rootfs=writable || echo rootfs=read-only; \
                  touch /data/f && echo data=writable; ls -ln /data/f | awk '{print \"file-group=\" $4}'; \
                  grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; sleep 3600";
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "locked"},
        "spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
                 "volumes": [{"name": "data", "emptyDir": {}}],
                 "containers": [{"name": "c", "image": "minik8s/busybox", "command": ["sh", "-c", script],
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                 "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
                                                     "capabilities": {"drop": ["ALL"]}}}]}}))
        .await;
    c.wait_pod("locked", "Running", 60, |p| common::phase(p) == "Running")
        .await;
    let log = minik8s_testkit::poll(
        30,
        std::time::Duration::from_millis(300),
        "the container's report",
        || async {
            let log = c.pod_log("locked/log").await;
            if log.contains("NoNewPrivs") {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    assert!(log.contains("uid=1000 gid=3000"), "{log}");
    assert!(
        log.contains("2000") && log.contains("4000"),
        "fsGroup and supplementalGroups: {log}"
    );
    assert!(log.contains("rootfs=read-only"), "{log}");
    assert!(
        log.contains("data=writable"),
        "the emptyDir is writable by the user: {log}"
    );
    assert!(
        log.contains("file-group=2000"),
        "files in it belong to the fsGroup: {log}"
    );
    assert!(log.contains("CapEff:\t0000000000000000"), "{log}");
    assert!(log.contains("NoNewPrivs:\t1"), "{log}");

    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rooted"},
        "spec": {"securityContext": {"runAsNonRoot": true},
                 "containers": [{"name": "c", "image": "minik8s/busybox", "command": ["sleep", "3600"]}]}}))
        .await;
    let p = c
        .wait_pod("rooted", "CreateContainerConfigError", 60, |p| {
            container_status(p, "c").is_some_and(|s| {
                s.pointer("/state/waiting/reason") == Some(&json!("CreateContainerConfigError"))
            })
        })
        .await;
    let message = container_status(&p, "c").unwrap()["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with(
            "container has runAsNonRoot and image will run as root (pod: \"rooted_default("
        ),
        "{message}"
    );
}
