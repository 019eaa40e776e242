//! ReplicationControllers (v1) on the ReplicaSet logic, with the real
//! kubectl and hollow nodes: the selector defaults to the template's labels,
//! pods run and are owned, `kubectl scale rc` and `get rc` work, and the pods
//! go with the controller.

mod common;

use common::{cluster, kubectl, table_line};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use minik8s_api::registry;
use minik8s_client::ListParams;
use minik8s_testkit::until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_keep_their_pods() {
    let (server, client) = cluster("rc", 2).await;
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("rc.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: legacy}\nspec:\n  replicas: 2\n  template:\n    metadata: {labels: {app: legacy}}\n    spec:\n      containers: [{name: c, image: busybox}]\n",
    )
    .unwrap();
    let (ok, out) = kubectl(&server.url, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(
        ok && out.contains("replicationcontroller/legacy created"),
        "{out}"
    );
    let rcs = client.dynamic(registry::of::<ReplicationController>(), Some("default"));
    let rc = rcs.get("legacy").await.unwrap();
    assert_eq!(
        rc["spec"]["selector"]["app"], "legacy",
        "defaulted from the template"
    );
    assert_eq!(rc["metadata"]["labels"]["app"], "legacy");

    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let running = |n: usize| {
        let (pods, rcs) = (pods.clone(), rcs.clone());
        async move {
            until(
                30,
                &format!("{n} running pods and a status that says so"),
                || async {
                    let list = pods
                        .list(&ListParams::default().labels("app=legacy"))
                        .await
                        .unwrap();
                    let live: Vec<&serde_json::Value> = list["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                        .filter(|p| p["status"]["phase"] == "Running")
                        .collect();
                    let owned = live.iter().all(|p| {
                        p["metadata"]["ownerReferences"][0]["kind"] == "ReplicationController"
                    });
                    let rc = rcs.get("legacy").await.unwrap();
                    let ok = live.len() == n && owned && rc["status"]["readyReplicas"] == n;
                    ok.then_some(())
                        .ok_or_else(|| format!("{} live, status {}", live.len(), rc["status"]))
                },
            )
            .await
        }
    };
    running(2).await;
    let (ok, out) = kubectl(&server.url, &["scale", "rc", "legacy", "--replicas=3"]);
    assert!(
        ok && out.contains("replicationcontroller/legacy scaled"),
        "{out}"
    );
    running(3).await;
    let (ok, out) = kubectl(&server.url, &["get", "rc", "-o", "wide"]);
    assert!(ok, "{out}");
    let header = table_line(&out, 0);
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = table_line(&out, 1);
    assert_eq!((row[1], row[2], row[3]), ("3", "3", "3"), "{out}");
    assert_eq!(row.last(), Some(&"app=legacy"), "{out}");

    rcs.delete("legacy", &Default::default()).await.unwrap();
    until(30, "the pods gone with their controller", || async {
        let list = pods
            .list(&ListParams::default().labels("app=legacy"))
            .await
            .unwrap();
        let n = list["items"].as_array().map_or(0, Vec::len);
        (n == 0).then_some(()).ok_or_else(|| format!("{n} pods"))
    })
    .await;
}
