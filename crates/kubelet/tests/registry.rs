//! Images as tutorials name them, from a local registry: a private
//! `docker-registry` serves as the dockerd's mirror for Docker Hub names, so
//! a pod that says `image: busybox:1.36` runs on an image pushed there (with
//! IfNotPresent and Always alike), and a name the registry lacks fails with
//! ErrImagePull as Kubernetes reports it.

mod common;

use common::*;
use minik8s_testkit::registry::Registry;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_pull_docker_hub_names_from_the_local_registry() {
    let registry = tokio::task::spawn_blocking(Registry::start).await.unwrap();
    let mirror = format!("http://{}", registry.address);
    let c = Cluster::start_with_dockerd(vec!["--registry-mirror".into(), mirror]).await;
    // What scripts/images.sh does for the quick start and the lab: push the
    // local image under the Docker Hub name's repository.
    let pushed = format!("{}/library/busybox:1.36", registry.address);
    c.dockerd
        .docker(&["tag", "minik8s/busybox:latest", &pushed]);
    let out = c.dockerd.docker(&["push", &pushed]);
    assert!(out.contains("digest"), "push: {out}");
    c.dockerd.docker(&["rmi", &pushed]);

    let pod = |name: &str, image: &str, policy: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": image,
                   "imagePullPolicy": policy, "command": ["sh", "-c", "echo pulled and ran"]}]}})
    };
    c.create_pod(pod("tutorial", "busybox:1.36", "IfNotPresent"))
        .await;
    c.create_pod(pod("always", "busybox:1.36", "Always")).await;
    c.create_pod(pod("unknown", "busybox:0.0-none", "IfNotPresent"))
        .await;
    for name in ["tutorial", "always"] {
        let p = c
            .wait_pod(name, "Succeeded", 90, |p| phase(p) == "Succeeded")
            .await;
        assert_eq!(
            container_status(&p, "main").unwrap()["image"],
            "busybox:1.36"
        );
        assert_eq!(c.pod_log(&format!("{name}/log")).await, "pulled and ran\n");
    }
    let p = c
        .wait_pod("unknown", "ErrImagePull", 90, |p| {
            container_status(p, "main").is_some_and(|s| {
                let reason = &s["state"]["waiting"]["reason"];
                reason == "ErrImagePull" || reason == "ImagePullBackOff"
            })
        })
        .await;
    assert_eq!(phase(&p), "Pending");
}
