//! A node joins with nothing but the master's address and the join token:
//! cluster-info checked against the token's signature, a CSR approved and
//! signed by the controller manager, a kubelet that is `system:node:<name>`
//! and runs (the real kubelet on the in-memory runtime) under the Node
//! authorizer, which keeps it to its own Node, Lease and pods' Secrets.

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kubelet::hollow::{self, HollowConfig};
use minik8s_api::registry;
use minik8s_client::config::from_kubeconfig;
use minik8s_client::Client;
use minik8s_testkit::{eventually, free_port, Backend, TestServer};
use serde_json::{json, Value};

async fn whoami(client: &Client) -> Value {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    client
        .request(
            reqwest::Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(("application/json", serde_json::to_vec(&review).unwrap())),
            "application/json",
        )
        .await
        .unwrap()["status"]["userInfo"]
        .clone()
}

fn client_of(path: &std::path::Path) -> Client {
    Client::for_target(&from_kubeconfig(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joins_with_a_token_and_is_kept_to_its_own() {
    let server = TestServer::start_with(Backend::Embedded, |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", free_port()));
    })
    .await;
    let pki = server.config.data_dir.join("pki");
    let https = format!(
        "https://127.0.0.1:{}",
        server.server.secure_addr.get().unwrap().port()
    );
    let admin = Client::new(&server.url);
    let cm_config = controller_manager::Config {
        cluster_signing_dir: Some(pki.clone()),
        ..Default::default()
    };
    let cm = tokio::spawn(controller_manager::run(
        client_of(&pki.join("controller-manager.conf")),
        cm_config,
    ));

    let token = std::fs::read_to_string(pki.join("join-token"))
        .unwrap()
        .trim()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let (w0, w1) = (dir.path().join("w-0.conf"), dir.path().join("w-1.conf"));
    let proxy = dir.path().join("kube-proxy.conf");
    kubelet::bootstrap::join(&https, &token, "w-0", &w0, Some(&proxy))
        .await
        .unwrap();
    // The right id with a wrong secret: the signature does not check out
    // (this is not the cluster the token is for), nothing is written.
    let forged = format!("{}.ffffffffffffffff", &token[..6]);
    let err = kubelet::bootstrap::join(&https, &forged, "w-2", &dir.path().join("w-2.conf"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not check out"), "{err:#}");
    assert!(!dir.path().join("w-2.conf").exists());
    kubelet::bootstrap::join(&https, &token, "w-1", &w1, None)
        .await
        .unwrap();

    let (k0, k1) = (client_of(&w0), client_of(&w1));
    let me = whoami(&k0).await;
    assert_eq!(me["username"], "system:node:w-0");
    assert_eq!(
        me["groups"],
        json!(["system:nodes", "system:authenticated"])
    );
    assert_eq!(
        whoami(&client_of(&proxy)).await["username"],
        "system:kube-proxy"
    );
    let csrs = admin
        .dynamic(
            registry::by_kind("certificates.k8s.io/v1", "CertificateSigningRequest").unwrap(),
            None,
        )
        .list(&Default::default())
        .await
        .unwrap();
    let items = csrs["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for csr in items {
        assert_eq!(
            csr["status"]["conditions"][0]["reason"], "AutoApproved",
            "{csr}"
        );
        assert!(
            csr["spec"]["username"]
                .as_str()
                .unwrap()
                .starts_with("system:bootstrap:"),
            "{csr}"
        );
    }

    // The real kubelet (in-memory runtime) as system:node:w-0: registers,
    // heartbeats and runs the pods bound to it.
    let _nodes = hollow::start(
        &k0,
        &HollowConfig {
            prefix: "w".into(),
            count: 1,
            lease_seconds: 1,
            sync_seconds: 1,
            fake_gpus: 0,
        },
    )
    .await
    .unwrap();
    let secrets = admin.dynamic(registry::of::<Secret>(), Some("default"));
    for s in ["mine", "theirs"] {
        secrets.create(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": s}, "stringData": {"k": "v"}})).await.unwrap();
    }
    let pods = admin.dynamic(registry::of::<Pod>(), Some("default"));
    for (name, node, secret) in [("p0", "w-0", "mine"), ("p1", "w-1", "theirs")] {
        pods.create(
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "s", "secret": {"secretName": secret}}]}}),
        )
        .await
        .unwrap();
    }
    eventually(
        20,
        "p0 Running on w-0 through the node's own credentials",
        || async {
            let p = pods.get("p0").await.ok()?;
            (p["status"]["phase"] == "Running").then_some(())
        },
    )
    .await;

    let own = k0.dynamic(registry::of::<Secret>(), Some("default"));
    own.get("mine").await.unwrap();
    let err = own.get("theirs").await.unwrap_err();
    let api = err.api().expect("a Status");
    assert_eq!(api.code, 403);
    assert_eq!(
        api.message,
        "secrets \"theirs\" is forbidden: User \"system:node:w-0\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'w-0' and this object"
    );
    assert_eq!(
        own.list(&Default::default())
            .await
            .unwrap_err()
            .api()
            .unwrap()
            .code,
        403
    );

    // Its own Node, not another's.
    let node_api = |c: &Client| c.dynamic(registry::of::<Node>(), None);
    node_api(&k1)
        .create(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w-1"}}))
        .await
        .unwrap();
    let label = json!({"metadata": {"labels": {"touched": "yes"}}});
    node_api(&k0)
        .patch("w-0", None, "application/merge-patch+json", &label)
        .await
        .unwrap();
    let err = node_api(&k0)
        .patch("w-1", None, "application/merge-patch+json", &label)
        .await
        .unwrap_err();
    let api = err.api().expect("a Status");
    assert_eq!(api.code, 403);
    assert!(
        api.message
            .ends_with(": node 'w-0' cannot modify node 'w-1'"),
        "{}",
        api.message
    );
    // Nor another node's pods.
    let err = k0
        .dynamic(registry::of::<Pod>(), Some("default"))
        .patch(
            "p1",
            Some("status"),
            "application/merge-patch+json",
            &json!({"status": {"phase": "Failed"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.api().unwrap().code, 403);
    let delete = |name: &'static str| {
        let pods = k0.dynamic(registry::of::<Pod>(), Some("default"));
        async move { pods.delete(name, &Default::default()).await.unwrap_err() }
    };
    assert_eq!(
        delete("p1").await.api().unwrap().code,
        403,
        "another node's pod"
    );
    // A pod already gone (its namespace deleted it): the kubelet's last
    // delete finds nothing, as with the real NodeRestriction, not a refusal.
    assert_eq!(delete("never-was").await.api().unwrap().code, 404);
    // The apiserver's own endpoints for the `kubernetes` Service outlive the
    // controllers (they manage only the slices they made).
    let slice = admin
        .dynamic(
            registry::by_kind("discovery.k8s.io/v1", "EndpointSlice").unwrap(),
            Some("default"),
        )
        .get("kubernetes")
        .await
        .unwrap();
    assert_eq!(
        slice["ports"][0]["port"],
        server.server.secure_addr.get().unwrap().port()
    );
    cm.abort();
}
