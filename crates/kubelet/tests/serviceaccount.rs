//! A pod's ServiceAccount token, end to end on real Docker and the secure
//! port: the kubelet (joined with the token, so `system:node:<name>`)
//! projects the token, the cluster CA and the namespace into the pod; the
//! pod calls the apiserver with it and gets exactly what its RoleBinding
//! grants; the token expires and the kubelet puts a new one in its place.

mod common;

use common::Cluster;
use serde_json::json;
use std::time::Duration;

const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A TokenReview of `token` (what the apiserver makes of it).
async fn review(client: &minik8s_client::Client, token: &str) -> serde_json::Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    client
        .request(
            reqwest::Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(("application/json", serde_json::to_vec(&body).unwrap())),
            "application/json",
        )
        .await
        .unwrap()["status"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_calls_the_api_with_its_projected_token() {
    // Tokens live 20 s here (capped by --service-account-max-token-expiration),
    // so the kubelet renews them after 16 s.
    let c = Cluster::start_secure(20).await;
    let admin = &c.client;
    let ns = |n: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}});
    admin
        .dynamic(
            minik8s_api::registry::of::<k8s_openapi::api::core::v1::Namespace>(),
            None,
        )
        .create(&ns("apps"))
        .await
        .unwrap();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": "apps"}});
    admin
        .dynamic(
            minik8s_api::registry::of::<k8s_openapi::api::core::v1::ServiceAccount>(),
            Some("apps"),
        )
        .create(&sa)
        .await
        .unwrap();
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "reader-view", "namespace": "apps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "apps"}]});
    admin
        .dynamic(
            minik8s_api::registry::of::<k8s_openapi::api::rbac::v1::RoleBinding>(),
            Some("apps"),
        )
        .create(&rb)
        .await
        .unwrap();

    let api = format!(
        "https://{}:{}",
        Cluster::gateway_of(&c.pod_cidr),
        c.server.server.secure_addr.get().unwrap().port()
    );
    // The python image (Debian's python3: urllib and ssl, checking the
    // apiserver's certificate against the projected CA).
    let images = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/images.sh");
    let built = std::process::Command::new("bash")
        .arg(images)
        .arg("--all")
        .env("DOCKER_HOST", &c.dockerd.socket)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let script = format!(
        r#"
import json, ssl, time, urllib.error, urllib.request
d = "{SA_DIR}"
token = open(d + "/token").read()
print("namespace=" + open(d + "/namespace").read(), flush=True)
ctx = ssl.create_default_context(cafile=d + "/ca.crt")
for p in ["namespaces/apps/pods", "namespaces/default/pods", "namespaces/apps/secrets"]:
    req = urllib.request.Request("{api}/api/v1/" + p, headers={{"Authorization": "Bearer " + token}})
    try:
        urllib.request.urlopen(req, context=ctx)
        print(p + "=allowed", flush=True)
    except urllib.error.HTTPError as e:
        print(p + "=" + str(e.code) + " " + json.loads(e.read())["message"], flush=True)
time.sleep(3600)
"#
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "caller", "namespace": "apps"},
        "spec": {"nodeName": c.node, "serviceAccountName": "reader",
                 "containers": [{"name": "c", "image": "minik8s/python", "command": ["python3", "-c", script]}]}});
    let pods = admin.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::Pod>(),
        Some("apps"),
    );
    let created = pods.create(&pod).await.unwrap();
    let volume = created["spec"]["volumes"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(volume.starts_with("kube-api-access-"), "{created}");

    let log = minik8s_testkit::poll(
        90,
        Duration::from_millis(500),
        "the pod to report its calls",
        || async {
            let log = admin
                .send(
                    reqwest::Method::GET,
                    "/api/v1/namespaces/apps/pods/caller/log",
                    None,
                    "text/plain",
                )
                .await
                .map_err(|e| format!("{e}\n{}", common::tail(&c.kubelet_log(), 20)))?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            if log.contains("namespaces/apps/secrets=") {
                Ok(log)
            } else {
                Err(format!(
                    "log so far: {log}\n{}",
                    common::tail(&c.kubelet_log(), 20)
                ))
            }
        },
    )
    .await;
    assert!(log.contains("namespace=apps"), "{log}");
    assert!(
        log.contains("namespaces/apps/pods=allowed"),
        "view lets it list pods in apps: {log}"
    );
    assert!(
        log.contains("namespaces/default/pods=403 pods is forbidden: User \"system:serviceaccount:apps:reader\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{log}"
    );
    assert!(
        log.contains("namespaces/apps/secrets=403 secrets is forbidden"),
        "view has no secrets: {log}"
    );

    // The projected CA is the cluster's, and the token names the pod.
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let dir = c.volume_dir(uid, &volume);
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    assert_eq!(
        ca,
        std::fs::read_to_string(c.server.config.data_dir.join("pki/ca.crt")).unwrap()
    );
    let first = std::fs::read_to_string(dir.join("token")).unwrap();
    let status = review(&c.client, &first).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"]["username"],
        "system:serviceaccount:apps:reader"
    );
    assert_eq!(
        status["user"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["caller"])
    );

    // The kubelet's own port (TLS): strangers get 401, the pod's account
    // (no nodes/proxy) 403, the apiserver's client certificate gets in.
    let kubelet = format!("https://127.0.0.1:{}/containerLogs/apps/caller/c", c.port);
    let insecure = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let resp = insecure.get(&kubelet).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = insecure
        .get(&kubelet)
        .bearer_auth(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(
        resp.text().await.unwrap(),
        "Forbidden (user=system:serviceaccount:apps:reader, verb=get, resource=nodes, subresource(s)=[proxy])"
    );
    let pki = c.server.config.data_dir.join("pki");
    let pem = format!(
        "{}\n{}",
        std::fs::read_to_string(pki.join("apiserver-kubelet-client.crt")).unwrap(),
        std::fs::read_to_string(pki.join("apiserver-kubelet-client.key")).unwrap()
    );
    let apiserver = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let resp = apiserver.get(&kubelet).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("namespace=apps"));

    // Renewed before it expires; the old one stops working once expired.
    let second = minik8s_testkit::poll(
        40,
        Duration::from_millis(500),
        "the token to be renewed",
        || async {
            let now = std::fs::read_to_string(dir.join("token")).map_err(|e| e.to_string())?;
            if now != first {
                Ok(now)
            } else {
                Err("still the first token".into())
            }
        },
    )
    .await;
    assert_eq!(review(&c.client, &second).await["authenticated"], true);
    // Expired means 20 s and the minute of clock skew Kubernetes allows.
    minik8s_testkit::poll(
        100,
        Duration::from_secs(1),
        "the first token to expire",
        || async {
            let s = review(&c.client, &first).await;
            if s["authenticated"] == false {
                Ok(())
            } else {
                Err(s.to_string())
            }
        },
    )
    .await;
    // The container sees the new token too (the volume is swapped atomically).
    let inside = c.dockerd.docker(&[
        "ps",
        "-q",
        "--filter",
        "label=io.minik8s.pod.name=caller",
        "--filter",
        "label=io.minik8s.container.name=c",
    ]);
    let seen = c.dockerd.docker(&[
        "exec",
        inside.lines().next().unwrap_or(""),
        "cat",
        &format!("{SA_DIR}/token"),
    ]);
    assert_ne!(seen, first);

    // An account that says `automountServiceAccountToken: false`: its pods
    // get no token volume, unless the pod asks for one.
    let quiet = json!({"apiVersion": "v1", "kind": "ServiceAccount", "automountServiceAccountToken": false,
                       "metadata": {"name": "quiet", "namespace": "apps"}});
    admin
        .dynamic(
            minik8s_api::registry::of::<k8s_openapi::api::core::v1::ServiceAccount>(),
            Some("apps"),
        )
        .create(&quiet)
        .await
        .unwrap();
    let pods = admin.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::Pod>(),
        Some("apps"),
    );
    let token_volumes = |p: &serde_json::Value| {
        p["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| {
                v["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("kube-api-access-")
            })
            .count()
    };
    let pod = |name: &str, automount: Option<bool>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "apps"},
            "spec": {"serviceAccountName": "quiet", "containers": [{"name": "c", "image": "minik8s/busybox:latest"}]}});
        if let Some(a) = automount {
            p["spec"]["automountServiceAccountToken"] = json!(a);
        }
        p
    };
    let quiet_pod = pods.create(&pod("quiet-pod", None)).await.unwrap();
    assert_eq!(token_volumes(&quiet_pod), 0);
    let asking = pods.create(&pod("asking-pod", Some(true))).await.unwrap();
    assert_eq!(token_volumes(&asking), 1);
}
