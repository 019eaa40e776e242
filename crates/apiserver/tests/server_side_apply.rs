//! Server-side apply and field ownership as the real kubectl v1.32 sees them:
//! `apply --server-side`, a conflict with a `kubectl edit` and a `kubectl
//! patch`, `--force-conflicts`, fields dropped from the configuration, and a
//! field left to `kubectl scale`.

mod common;

use common::Kubectl;
use minik8s_testkit::{Backend, TestServer};
use serde_json::Value;

const CONFIG_MAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n  b: \"2\"\n";

fn deployment(replicas: Option<u32>, extra_label: bool) -> String {
    let labels = if extra_label {
        "{app: web, tier: front}"
    } else {
        "{app: web}"
    };
    let replicas = replicas
        .map(|r| format!("  replicas: {r}\n"))
        .unwrap_or_default();
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {labels}\nspec:\n{replicas}  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: nginx, image: nginx:1, ports: [{{containerPort: 80}}]}}]\n")
}

/// (manager, operation) of each managedFields entry.
fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["operation"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn get_json(k: &Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&k.ok(&args).await).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_with_the_real_kubectl() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);

    // Apply creates the object; the applier owns exactly what it applied.
    let cm = k.write("cm.yaml", CONFIG_MAP);
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", &cm]).await.trim(),
        "configmap/demo serverside-applied"
    );
    let live = get_json(&k, &["cm", "demo"]).await;
    assert_eq!(managers(&live), [("kubectl".into(), "Apply".into())]);
    assert_eq!(
        live["metadata"]["managedFields"][0]["fieldsV1"],
        serde_json::json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    // kubectl hides managedFields unless asked.
    let plain = k.ok(&["get", "cm", "demo", "-o", "yaml"]).await;
    assert!(!plain.contains("managedFields"), "{plain}");

    // `kubectl edit` changes b: the edit's manager now owns it, and applying
    // the old value again is a conflict naming that manager and field.
    let editor = k.write(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/b: \"2\"/b: edited/' \"$1\"\n",
    );
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = k
        .command(&["edit", "cm", "demo"])
        .env("KUBE_EDITOR", &editor)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = get_json(&k, &["cm", "demo"]).await;
    assert_eq!(live["data"]["b"], "edited");
    assert!(managers(&live).contains(&("kubectl-edit".into(), "Update".into())));

    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &cm]).await;
    assert!(!ok, "the apply should conflict");
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.b"
        ),
        "{err}"
    );
    assert_eq!(get_json(&k, &["cm", "demo"]).await["data"]["b"], "edited");

    // A patch conflicts too; both conflicts are listed by manager.
    k.ok(&["patch", "cm", "demo", "-p", r#"{"data":{"a":"patched"}}"#])
        .await;
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &cm]).await;
    assert!(!ok);
    assert!(
        err.contains("Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using v1:\n- .data.b\nconflicts with \"kubectl-patch\" using v1:\n- .data.a"),
        "{err}"
    );

    // --force-conflicts takes both fields; the others are left owning nothing.
    assert_eq!(
        k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &cm])
            .await
            .trim(),
        "configmap/demo serverside-applied"
    );
    let live = get_json(&k, &["cm", "demo"]).await;
    assert_eq!(live["data"], serde_json::json!({"a": "1", "b": "2"}));
    assert_eq!(managers(&live), [("kubectl".into(), "Apply".into())]);

    // A field dropped from the configuration is removed.
    let smaller = k.write(
        "cm2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n",
    );
    k.ok(&["apply", "--server-side", "-f", &smaller]).await;
    let live = get_json(&k, &["cm", "demo"]).await;
    assert_eq!(live["data"], serde_json::json!({"a": "1"}));

    // Replicas left to `kubectl scale`: an apply naming replicas conflicts,
    // one that leaves them out keeps the scaled value and drops the label
    // it no longer sets.
    let d1 = k.write("d1.yaml", &deployment(Some(2), true));
    k.ok(&["apply", "--server-side", "-f", &d1]).await;
    k.ok(&["scale", "deploy", "web", "--replicas=5"]).await;
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &d1]).await;
    assert!(!ok && err.contains(".spec.replicas"), "{err}");
    let d2 = k.write("d2.yaml", &deployment(None, false));
    k.ok(&["apply", "--server-side", "-f", &d2]).await;
    let live = get_json(&k, &["deploy", "web"]).await;
    assert_eq!(live["spec"]["replicas"], 5);
    assert_eq!(
        live["metadata"]["labels"],
        serde_json::json!({"app": "web"})
    );
    let entry = &live["metadata"]["managedFields"][0];
    assert_eq!(entry["operation"], "Apply");
    assert!(
        entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
            .get("k:{\"name\":\"nginx\"}")
            .is_some(),
        "containers are owned item by item: {entry}"
    );

    // Apply without a field manager is refused as Kubernetes refuses it.
    let resp = reqwest::Client::new()
        .patch(format!(
            "{}/api/v1/namespaces/default/configmaps/demo",
            s.url
        ))
        .header("Content-Type", "application/apply-patch+yaml")
        .body(CONFIG_MAP)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let status: Value = resp.json().await.unwrap();
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("fieldManager: Required value"),
        "{status}"
    );
}
