//! A pod's CPU and memory. In-place resize (`pods/resize`, pod_resize.go's
//! cases): CPU up without a restart (the container's cgroup quota changes),
//! memory with `resizePolicy: RestartContainer` (one restart), a resize the
//! node can never hold (PodResizePending Infeasible), and resizes the API
//! refuses. Pod-level resources: the pod's own cgroup holds its containers.

use super::*;

fn container_resources(p: &Value) -> Value {
    container_status(p, "c").map_or(Value::Null, |s| s["resources"].clone())
}

fn resize_patch(cpu: &str, memory: &str) -> String {
    let r = json!({"cpu": cpu, "memory": memory});
    json!({"spec": {"containers": [{"name": "c", "resources": {"requests": r, "limits": r}}]}})
        .to_string()
}

/// The real kubectl's `patch --subresource resize`: (succeeded, stderr).
/// (`resize_patch("300m", "64Mi")` is the command doc/kubelet.md shows.)
fn kubectl_resize(c: &Cluster, patch: &str) -> (bool, String) {
    let out = kubectl(
        c,
        &[
            "patch",
            "pod",
            "resize",
            "--subresource",
            "resize",
            "-p",
            patch,
        ],
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The CFS quota the container's cgroup has, read inside the container.
fn cpu_quota(c: &Cluster) -> String {
    let out = kubectl(
        c,
        &[
            "exec",
            "resize",
            "--",
            "cat",
            "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
        ],
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(super) async fn in_place_resize(c: &Cluster) {
    let mut app = busybox("c", "sleep 3600");
    app["resources"] = json!({"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "100m", "memory": "64Mi"}});
    app["resizePolicy"] = json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                 {"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    c.create_pod(pod(
        "resize",
        json!({"terminationGracePeriodSeconds": 1, "containers": [app]}),
    ))
    .await;
    let p = c
        .wait_pod("resize", "running with its resources reported", 60, |p| {
            all_ready(p) && container_resources(p)["limits"]["cpu"] == "100m"
        })
        .await;
    assert_eq!(p["status"]["qosClass"], "Guaranteed");
    let s = container_status(&p, "c").unwrap();
    assert_eq!(s["allocatedResources"]["cpu"], "100m");
    assert_eq!(cpu_quota(c), "10000");

    // CPU up: in place, no restart, the cgroup quota follows.
    let (ok, err) = kubectl_resize(c, &resize_patch("300m", "64Mi"));
    assert!(ok, "{err}");
    let p = c
        .wait_pod("resize", "300m carried out", 60, |p| {
            container_resources(p)["limits"]["cpu"] == "300m"
        })
        .await;
    assert_eq!(restarts(&p, "c"), 0);
    assert_eq!(
        container_status(&p, "c").unwrap()["allocatedResources"]["cpu"],
        "300m"
    );
    assert_eq!(cpu_quota(c), "30000");
    for ty in ["PodResizePending", "PodResizeInProgress"] {
        assert_eq!(condition(&p, ty), "", "no {ty} once done");
    }

    // Memory with RestartContainer: the container restarts with it.
    let (ok, err) = kubectl_resize(c, &resize_patch("300m", "128Mi"));
    assert!(ok, "{err}");
    let p = c
        .wait_pod("resize", "restarted with 128Mi", 60, |p| {
            restarts(p, "c") == 1 && container_resources(p)["limits"]["memory"] == "128Mi"
        })
        .await;
    assert!(all_ready(&p) || phase(&p) == "Running");

    // More CPU than the node has: accepted by the API, pending on the node.
    let (ok, err) = kubectl_resize(c, &resize_patch("1000", "128Mi"));
    assert!(ok, "{err}");
    let p = c
        .wait_pod("resize", "PodResizePending Infeasible", 60, |p| {
            condition(p, "PodResizePending") == "True"
        })
        .await;
    let pending = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodResizePending")
        .unwrap();
    assert_eq!(pending["reason"], "Infeasible");
    assert!(
        pending["message"]
            .as_str()
            .unwrap()
            .starts_with("Node didn't have enough capacity: cpu, requested: 1000000, capacity: "),
        "{pending}"
    );
    assert_eq!(container_resources(&p)["limits"]["cpu"], "300m");
    assert_eq!(cpu_quota(c), "30000");

    // Refused with the field named: a QoS change, a memory decrease the
    // policy does not allow (cpu's policy is NotRequired), a removal.
    let burstable =
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m"}}}]}});
    let (ok, err) = kubectl_resize(c, &burstable.to_string());
    assert!(!ok);
    assert!(
        err.contains("spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"),
        "{err}"
    );
    // The pod itself does not take a resources change: only the subresource.
    let out = kubectl(
        c,
        &[
            "patch",
            "pod",
            "resize",
            "-p",
            &resize_patch("200m", "128Mi"),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("pod updates may not change fields other than"),
        "{err}"
    );
}

/// Pod-level resources (`spec.resources`): the pod's containers run in one
/// cgroup limited to the pod's CPU and memory, removed with the pod.
pub(super) async fn pod_level_resources(c: &Cluster) {
    let created = c
        .create_pod(pod(
            "pod-level",
            json!({"terminationGracePeriodSeconds": 1,
                   "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}},
                   "containers": [busybox("c", "sleep 3600")]}),
        ))
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(created["status"]["qosClass"], "Guaranteed");
    c.wait_pod("pod-level", "ready", 60, all_ready).await;
    let out = kubectl(c, &["exec", "pod-level", "--", "cat", "/proc/self/cgroup"]);
    let cgroups = String::from_utf8_lossy(&out.stdout).to_string();
    let parent = format!("/minik8s/pod{uid}/");
    assert!(
        cgroups.lines().any(|l| l
            .split(':')
            .nth(1)
            .is_some_and(|h| h.split(',').any(|x| x == "cpu"))
            && l.contains(&parent)),
        "{cgroups}"
    );
    let host = |file: &str| {
        let hierarchy = file.split('.').next().unwrap();
        let path = format!("/sys/fs/cgroup/{hierarchy}/minik8s/pod{uid}/{file}");
        std::fs::read_to_string(&path).map(|s| s.trim().to_string())
    };
    assert_eq!(host("cpu.cfs_quota_us").unwrap(), "20000");
    assert_eq!(
        host("memory.limit_in_bytes").unwrap(),
        (64 << 20).to_string()
    );
    c.pods()
        .delete("pod-level", &Default::default())
        .await
        .unwrap();
    c.wait_gone("pod-level", 30).await;
    assert!(
        host("cpu.cfs_quota_us").is_err(),
        "the pod's cgroup is removed"
    );
}

/// Local ephemeral storage (eviction_test.go's LocalStorageEviction): a
/// container writing past its `ephemeral-storage` limit, and an emptyDir
/// filled past its `sizeLimit`, get their pods evicted with Kubernetes' words.
pub(super) async fn local_storage_eviction(c: &Cluster) {
    let mut writer = busybox(
        "c",
        "dd if=/dev/zero of=/tmp/fill bs=1M count=12; sleep 3600",
    );
    writer["resources"] = json!({"limits": {"ephemeral-storage": "4Mi"}});
    c.create_pod(pod(
        "storage-hog",
        json!({"terminationGracePeriodSeconds": 1, "containers": [writer]}),
    ))
    .await;
    let mut filler = busybox(
        "c",
        "dd if=/dev/zero of=/scratch/fill bs=1M count=6; sleep 3600",
    );
    filler["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
    c.create_pod(pod(
        "dir-hog",
        json!({"terminationGracePeriodSeconds": 1, "containers": [filler],
               "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "2Mi"}}]}),
    ))
    .await;
    for (name, message) in [
        (
            "storage-hog",
            "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ",
        ),
        (
            "dir-hog",
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"2Mi\". ",
        ),
    ] {
        let p = c
            .wait_pod(name, "evicted", 60, |p| phase(p) == "Failed")
            .await;
        assert_eq!(p["status"]["reason"], "Evicted");
        assert_eq!(p["status"]["message"], message);
    }
}
