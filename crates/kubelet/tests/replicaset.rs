//! The ReplicaSet controller with a real kubelet on real Docker, driven by the
//! real kubectl where a user would use it: 3 replicas run; a killed container
//! restarts and a deleted pod is replaced; a relabelled pod is released and
//! replaced, and adopted again when it matches; deleting the ReplicaSet keeps
//! its pods with `--cascade=orphan` and removes them by default.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use serde_json::{json, Value};
use std::time::Duration;

fn replicaset(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                                                       "command": ["sleep", "3600"]}]}}}})
}

fn owner_uid(p: &Value) -> Option<&str> {
    p["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)?["uid"]
        .as_str()
}

fn name(p: &Value) -> String {
    p["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Waits until the live (not terminating) pods satisfy `ok`; returns them.
async fn pods_until<F: Fn(&[Value]) -> bool>(
    c: &Cluster,
    pods: &DynamicApi,
    what: &str,
    ok: F,
) -> Vec<Value> {
    let every = Duration::from_millis(300);
    minik8s_testkit::poll(60, every, what, || async {
        let live: Vec<Value> = pods.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        if ok(&live) {
            return Ok(live);
        }
        let seen: Vec<_> = live
            .iter()
            .map(|p| {
                (
                    name(p),
                    phase(p).to_string(),
                    owner_uid(p).map(str::to_string),
                )
            })
            .collect();
        Err(format!("pods: {seen:?}\n{}", tail(&c.kubelet_log(), 20)))
    })
    .await
}

fn kubectl_ok(out: std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_on_docker_with_kubectl() {
    let c = Cluster::start().await;
    c.spawn_control_plane(controller_manager::Config::default());
    let sets = c
        .client
        .dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let pods = c.pods();
    let running = |p: &Value| phase(p) == "Running" && all_ready(p);

    let rs = sets.create(&replicaset("web", 3)).await.unwrap();
    let uid = rs["metadata"]["uid"].as_str().unwrap().to_string();
    let owned = |ps: &[Value]| {
        ps.iter()
            .filter(|p| owner_uid(p) == Some(uid.as_str()))
            .cloned()
            .collect::<Vec<_>>()
    };
    let first = pods_until(&c, &pods, "3 running pods", |ps| {
        ps.len() == 3 && ps.iter().all(running)
    })
    .await;
    assert_eq!(owned(&first).len(), 3);

    // docker kill: the kubelet restarts the container in the same pod.
    let victim = first[0].clone();
    let cid = container_status(&victim, "c").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("docker://")
        .to_string();
    c.dockerd.docker(&["kill", &cid]);
    c.wait_pod(
        &name(&victim),
        "container restarted after docker kill",
        60,
        |p| restarts(p, "c") == 1 && running(p),
    )
    .await;

    // kubectl delete pod: the ReplicaSet replaces it.
    let deleted = name(&first[1]);
    kubectl_ok(c.real_kubectl(&["delete", "pod", &deleted]));
    pods_until(&c, &pods, "the deleted pod replaced", |ps| {
        ps.len() == 3 && ps.iter().all(running) && !ps.iter().any(|p| name(p) == deleted)
    })
    .await;

    // Relabel a pod: released (no owner) and replaced.
    let relabelled = name(&first[2]);
    kubectl_ok(c.real_kubectl(&["label", "pod", &relabelled, "app=other", "--overwrite"]));
    let ps = pods_until(
        &c,
        &pods,
        "the relabelled pod released and replaced",
        |ps| {
            owned(ps).len() == 3
                && ps.iter().filter(|p| running(p)).count() == 4
                && ps
                    .iter()
                    .any(|p| name(p) == relabelled && owner_uid(p).is_none())
        },
    )
    .await;
    assert!(!owned(&ps).iter().any(|p| name(p) == relabelled));

    // It matches again: adopted; the ReplicaSet is back to 3, dropping the pod
    // with restarts first (the least valuable), so the adopted one stays.
    kubectl_ok(c.real_kubectl(&["label", "pod", &relabelled, "app=web", "--overwrite"]));
    let ps = pods_until(&c, &pods, "the matching orphan adopted, 3 left", |ps| {
        ps.len() == 3 && owned(ps).len() == 3
    })
    .await;
    assert!(
        ps.iter().any(|p| name(p) == relabelled),
        "the adopted pod stays"
    );
    assert!(
        !ps.iter().any(|p| name(p) == name(&victim)),
        "the restarted pod went first"
    );

    // kubectl delete --cascade=orphan: the ReplicaSet goes, its pods stay without owner.
    kubectl_ok(c.real_kubectl(&["delete", "rs", "web", "--cascade=orphan"]));
    let kept: Vec<String> = ps.iter().map(name).collect();
    let ps = pods_until(&c, &pods, "pods kept and unowned", |ps| {
        ps.len() == 3 && ps.iter().all(|p| owner_uid(p).is_none() && running(p))
    })
    .await;
    let mut now: Vec<String> = ps.iter().map(name).collect();
    now.sort();
    let mut kept = kept;
    kept.sort();
    assert_eq!(now, kept);
    assert!(sets.get("web").await.is_err_and(|e| e.is_not_found()));

    // The default cascade (background): the ReplicaSet's pods are deleted with it.
    sets.create(&replicaset("bg", 2)).await.unwrap();
    pods_until(&c, &pods, "2 more running pods", |ps| {
        ps.iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "bg" && running(p))
            .count()
            == 2
    })
    .await;
    kubectl_ok(c.our_kubectl(&["delete", "rs", "bg"]));
    pods_until(&c, &pods, "the bg pods deleted, the orphans kept", |ps| {
        ps.len() == 3 && ps.iter().all(|p| p["metadata"]["labels"]["app"] == "web")
    })
    .await;

    // Foreground: a Deployment goes after its ReplicaSet, which goes after
    // its pods, so `kubectl delete --cascade=foreground` (which waits for the
    // Deployment to be gone) returns with no pod of it left, not even one
    // still terminating.
    let mut deployment = replicaset("fg", 2);
    deployment["kind"] = json!("Deployment");
    c.client
        .dynamic(
            registry::of::<k8s_openapi::api::apps::v1::Deployment>(),
            Some("default"),
        )
        .create(&deployment)
        .await
        .unwrap();
    pods_until(&c, &pods, "2 running fg pods", |ps| {
        ps.iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "fg" && running(p))
            .count()
            == 2
    })
    .await;
    kubectl_ok(c.real_kubectl(&["delete", "deployment", "fg", "--cascade=foreground"]));
    let left: Vec<String> = pods.list(&ListParams::default()).await.unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] == "fg")
        .map(name)
        .collect();
    assert!(
        left.is_empty(),
        "pods left after a foreground delete returned: {left:?}"
    );
}
