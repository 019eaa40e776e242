//! ConfigMaps, Secrets and ServiceAccounts against a real apiserver with every
//! controller: the real kubectl applies and lists them (Kubernetes' columns),
//! `stringData` is stored as base64 `data`, bad input is a 422 with the field
//! path and nothing stored, a 2 MiB ConfigMap is refused, every namespace gets
//! a `default` ServiceAccount (again after it is deleted), and pods run as it.

mod common;

use common::{kubectl, table_line};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use minik8s_api::registry;
use minik8s_client::Client;
use minik8s_testkit::{until, Backend, TestServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_secrets_and_service_accounts() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    tokio::spawn(controller_manager::run(
        client.clone(),
        controller_manager::Config::default(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata:\n  mode: production\n  app.properties: |\n    color=blue\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {username: admin, password: s3cret}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: cert}\ntype: kubernetes.io/tls\ndata: {tls.crt: Y2VydA==, tls.key: a2V5}\n",
    )
    .unwrap();
    let (ok, out) = kubectl(&server.url, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(
        out.contains("configmap/app created") && out.contains("secret/creds created"),
        "{out}"
    );

    let (ok, out) = kubectl(&server.url, &["get", "configmap", "app"]);
    assert!(ok, "{out}");
    let cols = table_line(&out, 0);
    assert_eq!(cols, ["NAME", "DATA", "AGE"]);
    assert_eq!(
        out.lines().nth(1).unwrap().split_whitespace().nth(1),
        Some("2")
    );
    let (ok, out) = kubectl(&server.url, &["get", "secrets"]);
    assert!(ok, "{out}");
    let cols = table_line(&out, 0);
    assert_eq!(cols, ["NAME", "TYPE", "DATA", "AGE"]);
    assert!(out.contains("kubernetes.io/tls"), "{out}");
    let creds_row = out.lines().find(|l| l.starts_with("creds")).unwrap_or("");
    assert_eq!(
        creds_row.split_whitespace().collect::<Vec<_>>()[1..3],
        ["Opaque", "2"]
    );
    let (ok, out) = kubectl(&server.url, &["get", "cm,sa"]);
    assert!(ok && out.contains("configmap/app"), "short names: {out}");

    // stringData is stored as data (base64) and never itself.
    let secrets = client.dynamic(registry::of::<Secret>(), Some("default"));
    let creds = secrets.get("creds").await.unwrap();
    assert_eq!(creds["data"]["username"], "YWRtaW4=");
    assert_eq!(creds["data"]["password"], "czNjcmV0");
    assert!(creds.get("stringData").is_none(), "{creds}");

    // Bad input: 422 naming the field, nothing stored.
    let maps = client.dynamic(registry::of::<ConfigMap>(), Some("default"));
    let err = maps
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"no/slash": "x"}}))
        .await
        .expect_err("a key with a slash");
    assert_eq!(err.api().map(|a| a.code), Some(422), "{err}");
    assert!(
        err.to_string().contains("data[no/slash]: Invalid value"),
        "{err}"
    );
    let big = "x".repeat(2 * 1024 * 1024);
    let err = maps
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"blob": big}}))
        .await
        .expect_err("2 MiB is over the limit");
    assert_eq!(err.api().map(|a| a.code), Some(422), "{err}");
    assert!(
        err.to_string()
            .contains("Too long: may not be more than 1048576 bytes"),
        "{err}"
    );
    let err = secrets
        .create(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "half"}, "type": "kubernetes.io/tls",
                        "data": {"tls.crt": "Y2VydA=="}}))
        .await
        .expect_err("a TLS secret needs its key");
    assert!(
        err.to_string().contains("data[tls.key]: Required value"),
        "{err}"
    );
    for name in ["bad", "big"] {
        assert!(maps.get(name).await.unwrap_err().is_not_found());
    }
    assert!(secrets.get("half").await.unwrap_err().is_not_found());
    let huge = "x".repeat(4 * 1024 * 1024);
    let err = maps
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"blob": huge}}))
        .await
        .expect_err("over the request limit");
    assert_eq!(err.api().map(|a| a.code), Some(413), "{err}");

    // A projected file may not point outside its volume.
    let pods_default = client.dynamic(registry::of::<Pod>(), Some("default"));
    let err = pods_default
        .create(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escape"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "v", "configMap": {"name": "app", "items": [{"key": "mode", "path": "../x"}]}}]}}))
        .await
        .expect_err("a path with ..");
    assert!(
        err.to_string().contains("spec.volumes[0].configMap.items[0].path: Invalid value: \"../x\": must not contain '..'"),
        "{err}"
    );

    // immutable: the data cannot change any more.
    maps.create(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
                        "immutable": true, "data": {"a": "1"}}),
    )
    .await
    .unwrap();
    let err = maps
        .patch(
            "frozen",
            None,
            "application/merge-patch+json",
            &json!({"data": {"a": "2"}}),
        )
        .await
        .expect_err("immutable");
    assert!(
        err.to_string()
            .contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{err}"
    );

    // Every namespace has its default ServiceAccount, recreated when deleted.
    let namespaces = client.dynamic(registry::of::<Namespace>(), None);
    namespaces
        .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await
        .unwrap();
    let accounts = client.dynamic(registry::of::<ServiceAccount>(), Some("team"));
    let has_default = || async {
        let got = accounts.get("default").await;
        got.map(|_| ()).map_err(|e| e.to_string())
    };
    until(20, "team's default ServiceAccount", has_default).await;
    accounts
        .delete("default", &Default::default())
        .await
        .unwrap();
    until(20, "the default ServiceAccount back", has_default).await;
    let (ok, out) = kubectl(&server.url, &["get", "sa", "-n", "team"]);
    assert!(ok, "{out}");
    let cols = table_line(&out, 0);
    assert_eq!(cols, ["NAME", "SECRETS", "AGE"]);

    // Pods run as the default account unless they name one.
    let pods = client.dynamic(registry::of::<Pod>(), Some("team"));
    let pod = |name: &str, sa: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        if let Some(sa) = sa {
            p["spec"]["serviceAccountName"] = json!(sa);
        }
        p
    };
    let p = pods.create(&pod("plain", None)).await.unwrap();
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    assert_eq!(p["spec"]["serviceAccount"], "default");
    let p = pods.create(&pod("named", Some("builder"))).await.unwrap();
    assert_eq!(p["spec"]["serviceAccountName"], "builder");
}
