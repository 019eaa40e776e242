//! Images as tutorials name them, from a local registry: a private
//! `docker-registry` serves as the dockerd's mirror for Docker Hub names, so
//! a pod that says `image: busybox:1.36` runs on an image pushed there (with
//! IfNotPresent and Always alike), and a name the registry lacks fails with
//! ErrImagePull as Kubernetes reports it; `scripts/images.sh --all` builds
//! nginx and python from Debian's packages and pushes them under the names
//! tutorials use. A registry that asks for a login serves pods through
//! their (or their ServiceAccount's) `imagePullSecrets`.

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
    pulls_with_image_pull_secrets(&c).await;
    let p = c
        .wait_pod("unknown", "ErrImagePull", 90, |p| {
            container_status(p, "main").is_some_and(|s| {
                let reason = &s["state"]["waiting"]["reason"];
                reason == "ErrImagePull" || reason == "ImagePullBackOff"
            })
        })
        .await;
    assert_eq!(phase(&p), "Pending");

    // scripts/images.sh --all: nginx and python from Debian's packages, pushed
    // under the names tutorials use; tutorial manifests then run unchanged.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/images.sh");
    let out = std::process::Command::new("bash")
        .args([script, "--all"])
        .env("DOCKER_HOST", &c.dockerd.socket)
        .env("MINIK8S_REGISTRY", &registry.address)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "images.sh --all: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Pulled from the registry, not found locally.
    c.dockerd.docker(&["rmi", "nginx:1.14.2", "python:3.11"]);
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}]}}))
        .await;
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "python:3.11",
            "command": ["python3", "-c", "import json, ssl, sqlite3, hashlib; print(json.dumps({'ok': True}))"]}]}}))
        .await;
    c.wait_pod("web", "Running", 90, |p| {
        phase(p) == "Running" && all_ready(p)
    })
    .await;
    let page = poll_exec(
        &c,
        &["exec", "web", "--", "wget", "-qO-", "http://127.0.0.1/"],
    )
    .await;
    assert!(page.contains("Welcome to nginx!"), "{page}");
    c.wait_pod("py", "Succeeded", 90, |p| phase(p) == "Succeeded")
        .await;
    assert_eq!(c.pod_log("py/log").await, "{\"ok\": true}\n");
}

/// A registry that asks for a login: a pod pulls with its `imagePullSecrets`
/// (made by `kubectl create secret docker-registry`) or its ServiceAccount's;
/// with a wrong password or none the pull fails with the registry's reason.
async fn pulls_with_image_pull_secrets(c: &Cluster) {
    let private = tokio::task::spawn_blocking(|| Registry::start_with_login("student", "s3cret"))
        .await
        .unwrap();
    let config = tempfile::tempdir().unwrap();
    let docker = |args: &[&str]| {
        std::process::Command::new("docker")
            .arg("-H")
            .arg(&c.dockerd.socket)
            .args(args)
            .env("DOCKER_CONFIG", config.path())
            .output()
            .unwrap()
    };
    let login = docker(&["login", "-u", "student", "-p", "s3cret", &private.address]);
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    let image = |tag: &str| format!("{}/team/app:{tag}", private.address);
    for tag in ["own", "account", "wrong", "none"] {
        docker(&["tag", "minik8s/busybox:latest", &image(tag)]);
        let pushed = docker(&["push", &image(tag)]);
        assert!(
            pushed.status.success(),
            "{}",
            String::from_utf8_lossy(&pushed.stderr)
        );
        docker(&["rmi", &image(tag)]);
    }
    let kubectl = |args: &[&str]| {
        let out = c.real_kubectl(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let server = format!("--docker-server={}", private.address);
    kubectl(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        &server,
        "--docker-username=student",
        "--docker-password=s3cret",
    ]);
    kubectl(&[
        "create",
        "secret",
        "docker-registry",
        "wrongcred",
        &server,
        "--docker-username=student",
        "--docker-password=not-it",
    ]);
    kubectl(&["create", "serviceaccount", "puller"]);
    kubectl(&[
        "patch",
        "serviceaccount",
        "puller",
        "-p",
        r#"{"imagePullSecrets": [{"name": "regcred"}]}"#,
    ]);

    let pod = |name: &str, tag: &str, extra: serde_json::Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": image(tag),
                "command": ["sh", "-c", "echo private"]}]}});
        for (k, v) in extra.as_object().unwrap() {
            p["spec"][k] = v.clone();
        }
        p
    };
    c.create_pod(pod(
        "private-own",
        "own",
        json!({"imagePullSecrets": [{"name": "regcred"}]}),
    ))
    .await;
    let from_account = c
        .create_pod(pod(
            "private-account",
            "account",
            json!({"serviceAccountName": "puller"}),
        ))
        .await;
    assert_eq!(
        from_account["spec"]["imagePullSecrets"],
        json!([{"name": "regcred"}]),
        "the ServiceAccount admission copies the account's pull secrets"
    );
    c.create_pod(pod(
        "private-wrong",
        "wrong",
        json!({"imagePullSecrets": [{"name": "wrongcred"}]}),
    ))
    .await;
    c.create_pod(pod("private-none", "none", json!({}))).await;
    for name in ["private-own", "private-account"] {
        c.wait_pod(name, "Succeeded", 90, |p| phase(p) == "Succeeded")
            .await;
        assert_eq!(c.pod_log(&format!("{name}/log")).await, "private\n");
    }
    for name in ["private-wrong", "private-none"] {
        c.wait_pod(name, "ErrImagePull", 90, |p| {
            container_status(p, "main").is_some_and(|s| {
                let reason = &s["state"]["waiting"]["reason"];
                reason == "ErrImagePull" || reason == "ImagePullBackOff"
            })
        })
        .await;
        // The registry's reason is in the kubelet's Failed event (the status
        // moves on to ImagePullBackOff after the first sync).
        let selector = format!("involvedObject.name={name},reason=Failed");
        let out = c.real_kubectl(&["get", "events", "--field-selector", &selector, "-o", "json"]);
        let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let messages: Vec<&str> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["message"].as_str())
            .collect();
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("Failed to pull image")
                    && (m.contains("unauthorized") || m.contains("no basic auth credentials"))),
            "the registry's reason: {messages:?}"
        );
    }
}

/// The real kubectl's output once it succeeds (nginx may need a moment to listen).
async fn poll_exec(c: &Cluster, args: &[&str]) -> String {
    minik8s_testkit::poll(
        30,
        std::time::Duration::from_millis(300),
        "kubectl exec",
        || async {
            let out = c.real_kubectl(args);
            if out.status.success() {
                Ok(String::from_utf8_lossy(&out.stdout).to_string())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).to_string())
            }
        },
    )
    .await
}
