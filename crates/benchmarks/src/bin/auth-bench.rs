//! `auth-bench`: what authentication and RBAC cost a create. Two apiservers
//! on the embedded store, both on the secure port with a static token for the
//! bench user: one authorizing with RBAC while 1,000 Roles and 1,000
//! RoleBindings (for other users) are present, the other with
//! `--authorization-mode AlwaysAllow`. Creates/s of pods over TLS at
//! concurrency 1 and 16, the plain loopback port and raw store writes as the
//! floor. Prints a Markdown report; not a test. Usage: `auth-bench [--quick]`.

use minik8s_testkit::{free_port, Backend, TestServer};
use serde_json::json;

const TOKEN: &str = "bench-token";

fn pod_body(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "bench"}},
           "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"]}]}})
}

use benchmarks::ops_per_second as run;

async fn server(mode: &str, tokens: &std::path::Path) -> (TestServer, String, reqwest::Client) {
    let tokens = tokens.to_path_buf();
    let mode = mode.to_string();
    let s = TestServer::start_with(Backend::Embedded, move |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", free_port()));
        c.token_auth_file = Some(tokens);
        c.authorization_mode = mode;
    })
    .await;
    let https = format!(
        "https://127.0.0.1:{}",
        s.server.secure_addr.get().unwrap().port()
    );
    let ca = std::fs::read(s.config.data_dir.join("pki/ca.crt")).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .default_headers(headers)
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    (s, https, client)
}

/// 1,000 Roles and 1,000 RoleBindings over 50 namespaces for other users,
/// and the bench user's `edit` in default; waits until the authorizer has them.
async fn fill_policy(s: &TestServer, https: &str, client: &reqwest::Client) {
    let plain = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        let plain = plain.clone();
        let url = format!("{}{path}", s.url);
        async move {
            let r = plain.post(&url).json(&body).send().await.unwrap();
            assert!(
                r.status().is_success() || r.status() == 409,
                "{}",
                r.text().await.unwrap()
            );
        }
    };
    for n in 0..50 {
        post(
            "/api/v1/namespaces".into(),
            json!({"metadata": {"name": format!("team-{n}")}}),
        )
        .await;
    }
    for i in 0..1000 {
        let ns = format!("team-{}", i % 50);
        post(
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            json!({"metadata": {"name": format!("role-{i}")},
                   "rules": [{"apiGroups": ["", "apps"], "resources": ["pods", "deployments", "configmaps"], "verbs": ["get", "list", "create"]}]}),
        )
        .await;
        post(
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": format!("binding-{i}")},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("role-{i}")},
                   "subjects": [{"kind": "User", "name": format!("user-{i}"), "apiGroup": "rbac.authorization.k8s.io"},
                                {"kind": "Group", "name": format!("group-{}", i % 10), "apiGroup": "rbac.authorization.k8s.io"}]}),
        )
        .await;
    }
    post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings".into(),
        json!({"metadata": {"name": "bench-edit"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "User", "name": "bench", "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    for _ in 0..200 {
        let r = client
            .get(format!("{https}/api/v1/namespaces/default/pods"))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the bench user was never allowed");
}

async fn creates(url: String, client: reqwest::Client, c: usize, total: usize, tag: &str) -> f64 {
    let tag = tag.to_string();
    run(c, total, move |i| {
        let (client, url, tag) = (client.clone(), url.clone(), tag.clone());
        async move {
            let r = client
                .post(format!("{url}/api/v1/namespaces/default/pods"))
                .json(&pod_body(&format!("{tag}-{i}")))
                .send()
                .await
                .expect("POST");
            assert_eq!(
                r.status().as_u16(),
                201,
                "{}",
                r.text().await.unwrap_or_default()
            );
        }
    })
    .await
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{TOKEN},bench,1000,benchers\n")).unwrap();
    let (rbac, rbac_url, rbac_client) = server("RBAC", &tokens).await;
    fill_policy(&rbac, &rbac_url, &rbac_client).await;
    let (open, open_url, open_client) = server("AlwaysAllow", &tokens).await;
    println!("| concurrency | raw store writes/s | plain port (no authn/z) creates/s | TLS + token, AlwaysAllow | TLS + token, RBAC (1,000 roles + 1,000 bindings) | RBAC vs AlwaysAllow |");
    println!("|---|---|---|---|---|---|");
    for (round, c) in [1usize, 16].into_iter().enumerate() {
        let total = if quick {
            200
        } else if c == 1 {
            1000
        } else {
            4000
        };
        let store = rbac.server.store.clone();
        let value = bytes::Bytes::from(serde_json::to_vec(&pod_body("raw")).unwrap());
        let raw =
            benchmarks::raw_writes(store, c, total, format!("/bench/raw/{round}"), value).await;
        let plain = creates(
            open.url.clone(),
            reqwest::Client::new(),
            c,
            total,
            &format!("plain{round}"),
        )
        .await;
        // Alternate to even out the machine's drift; best of two each.
        let mut allow = 0f64;
        let mut checked = 0f64;
        for rep in 0..2 {
            allow = allow.max(
                creates(
                    open_url.clone(),
                    open_client.clone(),
                    c,
                    total,
                    &format!("a{round}-{rep}"),
                )
                .await,
            );
            checked = checked.max(
                creates(
                    rbac_url.clone(),
                    rbac_client.clone(),
                    c,
                    total,
                    &format!("r{round}-{rep}"),
                )
                .await,
            );
        }
        println!(
            "| {c} | {raw:.0} | {plain:.0} | {allow:.0} | {checked:.0} | {:+.1} % |",
            (checked / allow - 1.0) * 100.0
        );
    }
}
