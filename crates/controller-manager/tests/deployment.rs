//! The Deployment controller against a real apiserver, the scheduler, every
//! controller and three hollow nodes (the real kubelet on the in-memory
//! runtime), driven partly by the real kubectl: a rolling update with
//! maxUnavailable 0 never drops below the desired availability, history and
//! undo reuse the old ReplicaSet under a new revision, scaling, Recreate never
//! overlaps old and new pods, and the status conditions.

mod common;

use common::{cluster, kubectl, table_line, until};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use serde_json::{json, Value};

fn deployment(name: &str, replicas: i64, image: &str, strategy: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "strategy": strategy,
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": image}]}}}})
}

async fn items(api: &DynamicApi, labels: &str) -> Vec<Value> {
    api.list(&ListParams::default().labels(labels))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn condition(d: &Value, type_: &str) -> (String, String) {
    d["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

/// (name, spec.replicas, revision) of every ReplicaSet of the app, by name.
async fn sets_of(api: &DynamicApi, app: &str) -> Vec<(String, i64, String)> {
    let mut out: Vec<(String, i64, String)> = items(api, &format!("app={app}"))
        .await
        .iter()
        .map(|rs| {
            (
                rs["metadata"]["name"].as_str().unwrap_or("").to_string(),
                rs["spec"]["replicas"].as_i64().unwrap_or(-1),
                rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The deployment has rolled out: observed, every replica updated and available.
async fn rolled_out(api: &DynamicApi, name: &str, replicas: i64) -> Value {
    until(&format!("{name} rolled out to {replicas}"), 30, || async {
        let d = api.get(name).await.map_err(|e| e.to_string())?;
        let s = &d["status"];
        let done = s["observedGeneration"] == d["metadata"]["generation"]
            && s["updatedReplicas"] == replicas
            && s["availableReplicas"] == replicas
            && s["replicas"] == replicas
            && condition(&d, "Progressing").1 == "NewReplicaSetAvailable";
        done.then(|| d.clone()).ok_or_else(|| s.to_string())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_history_undo_and_scale() {
    let (server, client) = cluster("dn", 3).await;
    let deploys = client.dynamic(registry::of::<Deployment>(), Some("default"));
    let sets = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    // doc/workloads.md's commands, on examples/deployment.yaml ("hello").
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/deployment.yaml"
    );
    let (ok, out) = kubectl(&server.url, &["apply", "-f", example]);
    assert!(ok, "kubectl apply: {out}");
    let d = rolled_out(&deploys, "hello", 4).await;
    assert_eq!(
        condition(&d, "Available"),
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let first = sets_of(&sets, "hello").await;
    assert_eq!(first.len(), 1, "{first:?}");
    let (rs1, _, rev1) = &first[0];
    assert_eq!(rev1, "1");
    let hash = rs1
        .strip_prefix("hello-")
        .expect("named <deployment>-<hash>");
    let rs = sets.get(rs1).await.unwrap();
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        hash
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(
        items(&pods, &format!("pod-template-hash={hash}"))
            .await
            .len(),
        4
    );
    let (ok, out) = kubectl(
        &server.url,
        &["rollout", "status", "deployment/hello", "--timeout=20s"],
    );
    assert!(ok && out.contains("successfully rolled out"), "{out}");
    let (ok, out) = kubectl(&server.url, &["get", "deployment", "hello"]);
    assert!(ok, "{out}");
    let header = table_line(&out, 0);
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert!(out.lines().nth(1).unwrap_or("").contains("4/4"), "{out}");

    // A new image: the availability never drops below 4 (maxUnavailable 0),
    // and the pods never exceed 5 (maxSurge 1).
    let watcher = {
        let (deploys, pods) = (deploys.clone(), pods.clone());
        tokio::spawn(async move {
            let (mut min_available, mut max_pods) = (i64::MAX, 0usize);
            loop {
                let d = deploys.get("hello").await.unwrap();
                min_available =
                    min_available.min(d["status"]["availableReplicas"].as_i64().unwrap_or(0));
                let live = items(&pods, "app=hello").await;
                let live = live
                    .iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                    .count();
                max_pods = max_pods.max(live);
                if d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
                    && d["status"]["updatedReplicas"] == 4
                    && d["status"]["replicas"] == 4
                    && d["status"]["availableReplicas"] == 4
                {
                    return (min_available, max_pods);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    let set_env = ["set", "env", "deployment/hello", "GREETING=hi"];
    let (ok, out) = kubectl(&server.url, &set_env);
    assert!(ok, "kubectl set env: {out}");
    let (min_available, max_pods) =
        tokio::time::timeout(std::time::Duration::from_secs(30), watcher)
            .await
            .expect("the rollout finishes")
            .unwrap();
    assert_eq!(min_available, 4, "maxUnavailable 0 keeps 4 available");
    assert!(max_pods <= 5, "maxSurge 1: at most 5 pods, saw {max_pods}");
    rolled_out(&deploys, "hello", 4).await;
    let second = sets_of(&sets, "hello").await;
    assert_eq!(second.len(), 2, "{second:?}");
    let old = second.iter().find(|(n, _, _)| n == rs1).unwrap();
    assert_eq!(
        (old.1, old.2.as_str()),
        (0, "1"),
        "the old set is kept at 0"
    );
    let new = second.iter().find(|(n, _, _)| n != rs1).unwrap().clone();
    assert_eq!((new.1, new.2.as_str()), (4, "2"));
    let (ok, out) = kubectl(&server.url, &["rollout", "history", "deployment/hello"]);
    assert!(ok, "{out}");
    let revisions: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{out}");

    // Undo: the first ReplicaSet comes back as revision 3; no third set.
    let (ok, out) = kubectl(&server.url, &["rollout", "undo", "deployment/hello"]);
    assert!(ok, "kubectl rollout undo: {out}");
    until("the first set back as revision 3", 30, || async {
        let s = sets_of(&sets, "hello").await;
        let back = s
            .iter()
            .any(|(n, r, rev)| n == rs1 && *r == 4 && rev == "3");
        let retired = s.iter().any(|(n, r, _)| *n == new.0 && *r == 0);
        (s.len() == 2 && back && retired)
            .then_some(())
            .ok_or_else(|| format!("{s:?}"))
    })
    .await;
    let d = rolled_out(&deploys, "hello", 4).await;
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    assert!(
        d["spec"]["template"]["spec"]["containers"][0]["env"].is_null(),
        "the first template again"
    );

    // Scale: the one active set follows.
    let (ok, out) = kubectl(&server.url, &["scale", "deployment/hello", "--replicas=6"]);
    assert!(ok, "kubectl scale: {out}");
    rolled_out(&deploys, "hello", 6).await;
    let s = sets_of(&sets, "hello").await;
    assert!(s.iter().any(|(n, r, _)| n == rs1 && *r == 6), "{s:?}");

    let (ok, out) = kubectl(&server.url, &["describe", "deployment", "hello"]);
    assert!(
        ok && out.contains("ScalingReplicaSet"),
        "kubectl describe: {out}"
    );

    // A new image (revision 4), then a restart (a new template annotation: revision 5).
    let image = [
        "set",
        "image",
        "deployment/hello",
        "httpd=minik8s/busybox:v2",
    ];
    let (ok, out) = kubectl(&server.url, &image);
    assert!(ok, "kubectl set image: {out}");
    let status = ["rollout", "status", "deployment/hello", "--timeout=30s"];
    let (ok, out) = kubectl(&server.url, &status);
    assert!(ok && out.contains("successfully rolled out"), "{out}");
    let (ok, out) = kubectl(&server.url, &["rollout", "restart", "deployment/hello"]);
    assert!(ok, "kubectl rollout restart: {out}");
    until("the restart rolled out as revision 5", 30, || async {
        let d = deploys.get("hello").await.map_err(|e| e.to_string())?;
        let s = sets_of(&sets, "hello").await;
        let done = d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "5"
            && s.len() == 4
            && s.iter().filter(|(_, r, _)| *r > 0).count() == 1;
        done.then_some(())
            .ok_or_else(|| format!("{s:?} {}", d["status"]))
    })
    .await;
    rolled_out(&deploys, "hello", 6).await;

    // Deleting the deployment takes its ReplicaSets and pods with it.
    deploys.delete("hello", &Default::default()).await.unwrap();
    until("the sets and pods gone", 30, || async {
        let (s, p) = (
            items(&sets, "app=hello").await.len(),
            items(&pods, "app=hello").await.len(),
        );
        (s == 0 && p == 0)
            .then_some(())
            .ok_or_else(|| format!("{s} sets, {p} pods"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_never_overlaps_and_bad_specs_are_refused() {
    let (_server, client) = cluster("dr", 2).await;
    let deploys = client.dynamic(registry::of::<Deployment>(), Some("default"));
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    deploys
        .create(&deployment(
            "db",
            3,
            "busybox:1",
            json!({"type": "Recreate"}),
        ))
        .await
        .unwrap();
    rolled_out(&deploys, "db", 3).await;

    let watcher = {
        let pods = pods.clone();
        tokio::spawn(async move {
            let mut overlapped = Vec::new();
            for _ in 0..600 {
                let live = items(&pods, "app=db").await;
                let images: std::collections::BTreeSet<String> = live
                    .iter()
                    .filter(|p| {
                        p["status"]["phase"] != "Succeeded" && p["status"]["phase"] != "Failed"
                    })
                    .filter_map(|p| {
                        p["spec"]["containers"][0]["image"]
                            .as_str()
                            .map(str::to_string)
                    })
                    .collect();
                if images.len() > 1 {
                    overlapped.push(images.clone());
                }
                if images.len() == 1 && images.contains("busybox:2") && live.len() == 3 {
                    return overlapped;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            panic!("the Recreate rollout did not finish");
        })
    };
    deploys
        .patch(
            "db",
            None,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}),
        )
        .await
        .unwrap();
    let overlapped = watcher.await.unwrap();
    assert!(
        overlapped.is_empty(),
        "old and new pods at once: {overlapped:?}"
    );
    rolled_out(&deploys, "db", 3).await;

    // Bad input: 422 with the field path, nothing stored.
    let cases = [
        (
            json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
            "spec.strategy.rollingUpdate",
        ),
        (
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        (
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "150%"}}),
            "spec.strategy.rollingUpdate.maxSurge",
        ),
        (json!({"type": "Sideways"}), "spec.strategy.type"),
    ];
    for (i, (strategy, field)) in cases.into_iter().enumerate() {
        let name = format!("bad{i}");
        let err = deploys
            .create(&deployment(&name, 1, "busybox", strategy))
            .await
            .expect_err("refused");
        let status = err.api().expect("a Status");
        assert_eq!(status.code, 422, "{err}");
        assert!(err.to_string().contains(field), "{field}: {err}");
        assert!(deploys.get(&name).await.unwrap_err().is_not_found());
    }
    let mut mismatch = deployment("mismatch", 1, "busybox", json!({"type": "Recreate"}));
    mismatch["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    let err = deploys.create(&mismatch).await.expect_err("refused");
    assert!(
        err.to_string()
            .contains("`selector` does not match template `labels`"),
        "{err}"
    );
}
