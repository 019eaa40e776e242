//! Persistent storage on a real kubelet and real Docker, driven by the real
//! kubectl: a claim of the default class (local-path, WaitForFirstConsumer)
//! keeps a pod's data across the pod's deletion; an in-use claim stays
//! (Terminating) until its pod is gone; Delete removes the directory, Retain
//! keeps it; a StatefulSet keeps each ordinal's data across pod deletion and
//! scale 3→1→3 under Retain and loses it under whenScaled: Delete; an LWS
//! with volumeClaimTemplates gives each leader and worker its own claim with
//! upstream's names; bad claims are refused (422) or wait with an event;
//! `kubectl get pv,pvc,sc` prints Kubernetes' columns. One cluster serves
//! every step (each uses its own objects).

mod common;

use common::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn apply(c: &Cluster, name: &str, yaml: &str) -> std::process::Output {
    let path = c.root.path().join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    c.real_kubectl(&["apply", "-f", path.to_str().unwrap()])
}

fn claims(c: &Cluster) -> DynamicApi {
    c.client
        .dynamic(registry::of::<PersistentVolumeClaim>(), Some("default"))
}

fn volumes(c: &Cluster) -> DynamicApi {
    c.client.dynamic(registry::of::<PersistentVolume>(), None)
}

/// A pod running `script` with the claim `claim` at /data.
fn pod_with_claim(name: &str, claim: &str, script: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {{name: app, image: minik8s/busybox:latest, imagePullPolicy: Never, command: [sh, -c, '{script}'],
      volumeMounts: [{{name: data, mountPath: /data}}]}}
  volumes:
  - {{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}
"#
    )
}

fn claim_yaml(name: &str, class: Option<&str>, size: &str, mode: &str) -> String {
    let class = class
        .map(|c| format!("\n  storageClassName: {c}"))
        .unwrap_or_default();
    format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  accessModes: [{mode}]\n  resources: {{requests: {{storage: {size}}}}}{class}\n")
}

async fn wait_claim(c: &Cluster, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let api = claims(c);
    minik8s_testkit::poll(60, Duration::from_millis(100), what, || async {
        match api.get(name).await {
            Ok(v) if ok(&v) => Ok(v),
            Ok(v) => Err(format!("claim: {}", serde_json::to_string(&v).unwrap())),
            Err(e) => Err(format!("claim {name}: {e}")),
        }
    })
    .await
}

async fn wait_claim_gone(c: &Cluster, name: &str) {
    let api = claims(c);
    minik8s_testkit::poll(
        60,
        Duration::from_millis(200),
        &format!("claim {name} gone"),
        || async {
            match api.get(name).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

fn host_path(pv: &Value) -> PathBuf {
    PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap())
}

async fn wait_log(c: &Cluster, pod: &str, needle: &str) -> String {
    minik8s_testkit::poll(
        60,
        Duration::from_millis(200),
        &format!("{pod} logs {needle:?}"),
        || async {
            let url = format!("/api/v1/namespaces/default/pods/{pod}/log");
            let log = match c.client.send(reqwest::Method::GET, &url, None, "*/*").await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(e) => e.to_string(),
            };
            if log.contains(needle) {
                Ok(log)
            } else {
                let described = c.real_kubectl(&["describe", "pod", pod]);
                Err(format!(
                    "log: {log}\n{}",
                    tail(&String::from_utf8_lossy(&described.stdout), 25)
                ))
            }
        },
    )
    .await
}

async fn delete_pod(c: &Cluster, name: &str) {
    ok(c.real_kubectl(&["delete", "pod", name, "--wait=false"]));
    c.wait_gone(name, 60).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_volumes_on_real_docker() {
    let c = Cluster::start().await;
    let storage_root = c.root.path().join("storage");
    c.spawn_control_plane(controller_manager::Config {
        local_path_root: storage_root.display().to_string(),
        ..Default::default()
    });

    // The default class, as kubectl shows it.
    let sc = minik8s_testkit::poll(30, Duration::from_millis(100), "default class", || async {
        let out = c.real_kubectl(&["get", "sc"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("local-path (default)") {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    let header: Vec<&str> = sc.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ]
    );
    assert!(
        sc.contains("minik8s.io/local-path   Delete          WaitForFirstConsumer   true"),
        "{sc}"
    );

    data_survives_pod_recreation_and_delete_reclaims(&c, &storage_root).await;
    retain_keeps_the_directory(&c).await;
    bad_claims(&c).await;
    stateful_set_claims(&c).await;
    lws_claims(&c).await;
    storage_example(&c).await;
    nfs_volumes(&c).await;
}

/// A claim of the default class: Pending until its first pod, then bound on
/// the pod's node; the data outlives the pod; the claim stays while used;
/// Delete removes the directory and the volume.
async fn data_survives_pod_recreation_and_delete_reclaims(c: &Cluster, root: &Path) {
    ok(apply(
        c,
        "notes",
        &claim_yaml("notes", None, "1Gi", "ReadWriteOnce"),
    ));
    let claim = wait_claim(c, "notes", "Pending with the default class", |v| {
        v["status"]["phase"] == "Pending"
    })
    .await;
    assert_eq!(claim["spec"]["storageClassName"], "local-path");
    assert_eq!(
        claim["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    let events = ok(c.real_kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=notes",
    ]));
    assert!(events.contains("WaitForFirstConsumer"), "{events}");

    ok(apply(
        c,
        "writer",
        &pod_with_claim(
            "writer",
            "notes",
            "echo first > /data/note; echo written; sleep 3600",
        ),
    ));
    wait_log(c, "writer", "written").await;
    let claim = wait_claim(c, "notes", "Bound", |v| v["status"]["phase"] == "Bound").await;
    assert_eq!(claim["status"]["capacity"]["storage"], "1Gi");
    let node = claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"].clone();
    assert_eq!(node, json!(c.node));
    let pv_name = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    let pv = volumes(c).get(&pv_name).await.unwrap();
    let dir = host_path(&pv);
    assert!(dir.starts_with(root), "{dir:?} under {root:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("note")).unwrap(),
        "first\n"
    );

    // Columns as Kubernetes prints them.
    let out = ok(c.real_kubectl(&["get", "pv,pvc"]));
    assert!(
        out.contains("NAME")
            && out.contains("CAPACITY   ACCESS MODES   RECLAIM POLICY   STATUS   CLAIM"),
        "{out}"
    );
    assert!(out.contains(&format!("persistentvolume/{pv_name}   1Gi        RWO            Delete           Bound    default/notes   local-path")), "{out}");
    assert!(out.contains("STATUS   VOLUME"), "{out}");

    // Recreated, the pod reads what the first one wrote.
    delete_pod(c, "writer").await;
    ok(apply(
        c,
        "reader",
        &pod_with_claim(
            "reader",
            "notes",
            "echo \"read $(cat /data/note)\"; sleep 3600",
        ),
    ));
    wait_log(c, "reader", "read first").await;

    // In use: the claim stays, Terminating, until its pod is gone.
    ok(c.real_kubectl(&["delete", "pvc", "notes", "--wait=false"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = ok(c.real_kubectl(&["get", "pvc", "notes"]));
    assert!(out.contains("Terminating"), "{out}");
    assert!(dir.exists());
    delete_pod(c, "reader").await;
    wait_claim_gone(c, "notes").await;
    // Delete: a helper pod removes the directory, then the volume goes.
    let pvs = volumes(c);
    minik8s_testkit::poll(60, Duration::from_millis(200), "volume deleted", || async {
        match pvs.get(&pv_name).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(!dir.exists(), "{dir:?} removed");
}

/// A class with reclaimPolicy Retain: the volume is Released and its
/// directory kept after the claim goes; its claim cannot grow (no expansion).
async fn retain_keeps_the_directory(c: &Cluster) {
    ok(apply(c, "keep-class", "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: keep}\nprovisioner: minik8s.io/local-path\nreclaimPolicy: Retain\nvolumeBindingMode: Immediate\n"));
    ok(apply(
        c,
        "kept",
        &claim_yaml("kept", Some("keep"), "64Mi", "ReadWriteOnce"),
    ));
    // Immediate: bound before any pod.
    let claim = wait_claim(c, "kept", "Bound at once", |v| {
        v["status"]["phase"] == "Bound"
    })
    .await;
    let out = c.real_kubectl(&[
        "patch",
        "pvc",
        "kept",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}"#,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"), "{err}");
    // fsGroup: the provisioned volume is the group's (setgid), for a non-root user too.
    let keeper = pod_with_claim(
        "keeper",
        "kept",
        "echo keep > /data/file; echo \"kept gid=$(stat -c %g /data) file gid=$(stat -c %g /data/file)\"; sleep 3600",
    )
    .replace(
        "  terminationGracePeriodSeconds: 1\n",
        "  terminationGracePeriodSeconds: 1\n  securityContext: {runAsUser: 1000, fsGroup: 2000}\n",
    );
    ok(apply(c, "keeper", &keeper));
    wait_log(c, "keeper", "kept gid=2000 file gid=2000").await;
    let pv_name = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    let dir = host_path(&volumes(c).get(&pv_name).await.unwrap());
    delete_pod(c, "keeper").await;
    ok(c.real_kubectl(&["delete", "pvc", "kept"]));
    let pvs = volumes(c);
    let pv = minik8s_testkit::poll(
        30,
        Duration::from_millis(200),
        "volume Released",
        || async {
            let pv = pvs.get(&pv_name).await.map_err(|e| e.to_string())?;
            if pv["status"]["phase"] == "Released" {
                Ok(pv)
            } else {
                Err(pv.to_string())
            }
        },
    )
    .await;
    assert_eq!(pv["spec"]["claimRef"]["name"], "kept");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        std::fs::read_to_string(dir.join("file")).unwrap(),
        "keep\n",
        "Retain keeps the data"
    );
    assert!(
        volumes(c).get(&pv_name).await.is_ok(),
        "Retain keeps the volume"
    );
}

/// Bad claims: 422 with the field path; an unknown class waits with an event;
/// a default-class claim grows (local-path allows expansion).
async fn bad_claims(c: &Cluster) {
    let out = apply(
        c,
        "bad-size",
        &claim_yaml("bad-size", None, "0", "ReadWriteOnce"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "spec.resources.requests[storage]: Invalid value: \"0\": must be greater than zero"
        ),
        "{err}"
    );
    let out = apply(
        c,
        "bad-mode",
        &claim_yaml("bad-mode", None, "1Gi", "ReadWriteSometimes"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.accessModes: Unsupported value: \"ReadWriteSometimes\""),
        "{err}"
    );
    assert!(err.contains("is invalid"), "422 Invalid: {err}");
    assert!(
        claims(c)
            .get("bad-mode")
            .await
            .is_err_and(|e| e.is_not_found()),
        "nothing stored"
    );

    ok(apply(
        c,
        "lost",
        &claim_yaml("lost", Some("nope"), "1Gi", "ReadWriteOnce"),
    ));
    minik8s_testkit::poll(
        30,
        Duration::from_millis(200),
        "ProvisioningFailed event",
        || async {
            let out = c.real_kubectl(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=lost",
            ]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if text.contains("ProvisioningFailed")
                && text.contains("storageclass.storage.k8s.io \"nope\" not found")
            {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await;
    assert_eq!(
        claims(c).get("lost").await.unwrap()["status"]["phase"],
        "Pending"
    );

    // Expansion where the class allows it.
    let class = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: grow}\nprovisioner: minik8s.io/local-path\nvolumeBindingMode: Immediate\nallowVolumeExpansion: true\n";
    ok(apply(c, "grow-class", class));
    ok(apply(
        c,
        "growing",
        &claim_yaml("growing", Some("grow"), "1Gi", "ReadWriteOnce"),
    ));
    wait_claim(c, "growing", "Bound", |v| v["status"]["phase"] == "Bound").await;
    ok(c.real_kubectl(&[
        "patch",
        "pvc",
        "growing",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
    ]));
    wait_claim(c, "growing", "grown to 2Gi", |v| {
        v["status"]["capacity"]["storage"] == "2Gi"
    })
    .await;
    let out = c.real_kubectl(&[
        "patch",
        "pvc",
        "growing",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}"#,
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("field can not be less than previous value")
    );
}

fn stateful_set(name: &str, policy: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}}}
spec:
  replicas: 3
  podManagementPolicy: Parallel
  serviceName: {name}
  selector: {{matchLabels: {{app: {name}}}}}
  persistentVolumeClaimRetentionPolicy: {policy}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: minik8s/busybox:latest
        imagePullPolicy: Never
        command: [sh, -c, 'n=$(cat /data/boots 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/boots; [ -f /data/id ] || hostname > /data/id; echo "id=$(cat /data/id) boots=$n"; sleep 3600']
        volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 10Mi}}}}}}
"#
    )
}

async fn wait_set_ready(c: &Cluster, name: &str, n: i64) {
    let sets = c.client.dynamic(
        registry::of::<k8s_openapi::api::apps::v1::StatefulSet>(),
        Some("default"),
    );
    minik8s_testkit::poll(
        90,
        Duration::from_millis(200),
        &format!("{name} {n} ready"),
        || async {
            let s = sets.get(name).await.map_err(|e| e.to_string())?;
            let pods = c
                .pods()
                .list(&ListParams::default().labels(&format!("app={name}")))
                .await
                .unwrap();
            let live = pods["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .count() as i64;
            if s["status"]["readyReplicas"] == json!(n) && live == n {
                Ok(())
            } else {
                Err(format!(
                    "status {} live {live}\n{}",
                    s["status"],
                    tail(&c.kubelet_log(), 10)
                ))
            }
        },
    )
    .await
}

/// Each ordinal keeps its data across pod deletion and scale 3→1→3 under
/// Retain; under whenScaled: Delete the scaled-away claims go, and the pods
/// that come back start empty.
async fn stateful_set_claims(c: &Cluster) {
    ok(apply(
        c,
        "web",
        &stateful_set("web", "{whenDeleted: Retain, whenScaled: Retain}"),
    ));
    ok(apply(
        c,
        "db",
        &stateful_set("db", "{whenDeleted: Delete, whenScaled: Delete}"),
    ));
    wait_set_ready(c, "web", 3).await;
    wait_set_ready(c, "db", 3).await;
    for set in ["web", "db"] {
        for i in 0..3 {
            wait_log(c, &format!("{set}-{i}"), &format!("id={set}-{i} boots=1")).await;
            let claim = claims(c).get(&format!("data-{set}-{i}")).await.unwrap();
            assert_eq!(claim["metadata"]["labels"]["app"], set);
            assert_eq!(claim["status"]["phase"], "Bound");
        }
    }
    // A deleted pod comes back to its own data.
    let uid = c.pods().get("web-1").await.unwrap()["metadata"]["uid"].clone();
    ok(c.real_kubectl(&["delete", "pod", "web-1", "--wait=false"]));
    c.wait_pod("web-1", "recreated", 60, |p| {
        p["metadata"]["uid"] != uid && all_ready(p)
    })
    .await;
    wait_log(c, "web-1", "id=web-1 boots=2").await;

    for set in ["web", "db"] {
        ok(c.real_kubectl(&["scale", "statefulset", set, "--replicas=1"]));
    }
    wait_set_ready(c, "web", 1).await;
    wait_set_ready(c, "db", 1).await;
    wait_claim_gone(c, "data-db-2").await;
    wait_claim_gone(c, "data-db-1").await;
    assert!(
        claims(c).get("data-web-2").await.is_ok(),
        "Retain keeps the claim"
    );
    assert!(
        claims(c).get("data-db-0").await.is_ok(),
        "the remaining ordinal keeps its claim"
    );
    for set in ["web", "db"] {
        ok(c.real_kubectl(&["scale", "statefulset", set, "--replicas=3"]));
    }
    wait_set_ready(c, "web", 3).await;
    wait_set_ready(c, "db", 3).await;
    wait_log(c, "web-2", "id=web-2 boots=2").await;
    wait_log(c, "db-2", "id=db-2 boots=1").await;

    // whenDeleted: Delete takes the claims with the set; Retain leaves them.
    ok(c.real_kubectl(&["delete", "statefulset", "db", "web"]));
    for i in 0..3 {
        wait_claim_gone(c, &format!("data-db-{i}")).await;
    }
    assert!(claims(c).get("data-web-0").await.is_ok());
}

fn example(name: &str) -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/").to_string() + name
}

/// examples/lws-volume-claim-templates.yaml: every leader and worker has
/// its own claim, named as upstream names them.
async fn lws_claims(c: &Cluster) {
    ok(c.real_kubectl(&["apply", "-f", &example("lws-volume-claim-templates.yaml")]));
    for (pod, claim) in [
        ("lws-0", "persistent-storage-lws-0"),
        ("lws-1", "persistent-storage-lws-1"),
        ("lws-0-1", "persistent-storage-lws-0-1"),
        ("lws-1-1", "persistent-storage-lws-1-1"),
    ] {
        wait_log(c, pod, "stored").await;
        let claim = wait_claim(c, claim, "Bound", |v| v["status"]["phase"] == "Bound").await;
        let pv = volumes(c)
            .get(claim["spec"]["volumeName"].as_str().unwrap())
            .await
            .unwrap();
        let owner = std::fs::read_to_string(host_path(&pv).join("owner")).unwrap();
        assert_eq!(owner.trim(), pod, "each pod writes its own volume");
    }
}

/// examples/storage.yaml and doc/storage.md's commands: each counter pod
/// continues its own count after it is deleted.
async fn storage_example(c: &Cluster) {
    ok(c.real_kubectl(&["apply", "-f", &example("storage.yaml")]));
    wait_set_ready(c, "counter", 2).await;
    wait_log(c, "counter-0", "counter-0 start 1").await;
    let out = ok(c.real_kubectl(&["get", "pv,pvc,sc"]));
    assert!(
        out.lines().any(
            |l| l.starts_with("persistentvolumeclaim/data-counter-1 ") && l.contains(" Bound ")
        ),
        "{out}"
    );
    assert!(
        out.contains("storageclass.storage.k8s.io/local-path (default)"),
        "{out}"
    );
    let log = ok(c.real_kubectl(&["logs", "counter-0"]));
    assert!(log.contains("counter-0 start 1"), "{log}");
    let uid = c.pods().get("counter-0").await.unwrap()["metadata"]["uid"].clone();
    ok(c.real_kubectl(&["delete", "pod", "counter-0"]));
    c.wait_pod("counter-0", "recreated", 60, |p| {
        p["metadata"]["uid"] != uid && all_ready(p)
    })
    .await;
    let log = ok(c.real_kubectl(&["logs", "counter-0"]));
    assert!(log.contains("counter-0 start 2"), "{log}");
    let out = ok(c.real_kubectl(&["describe", "pvc", "data-counter-0"]));
    assert!(out.contains("Status:") && out.contains("Bound"), "{out}");
    assert!(
        out.contains("Used By:") && out.contains("counter-0"),
        "{out}"
    );
}

fn nfs_mounts(c: &Cluster) -> Vec<String> {
    let under = c.root.path().display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&under) && m.contains("/nfs/"))
        .map(str::to_string)
        .collect()
}

/// NFS (ganesha on this machine; the kubelet mounts with nfs-fuse): a
/// static ReadWriteMany volume shared by two pods, and the minik8s.io/nfs
/// class making a directory per claim and removing it on Delete; the node
/// unmounts an export once its pods are gone.
async fn nfs_volumes(c: &Cluster) {
    let server = minik8s_testkit::nfs::NfsServer::start();
    let export = server.export();
    ok(apply(c, "nfs-static", &format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: shared-nfs}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteMany]\n  nfs: {{server: 127.0.0.1, path: {}}}\n---\n{}  storageClassName: \"\"\n",
        export.display(),
        claim_yaml("shared", None, "1Gi", "ReadWriteMany")
    )));
    wait_claim(c, "shared", "Bound to the NFS volume", |v| {
        v["spec"]["volumeName"] == "shared-nfs" && v["status"]["phase"] == "Bound"
    })
    .await;
    ok(apply(
        c,
        "nfs-writer",
        &pod_with_claim(
            "nfs-writer",
            "shared",
            "hostname > /data/from-writer; echo wrote; sleep 3600",
        ),
    ));
    ok(apply(c, "nfs-reader", &pod_with_claim("nfs-reader", "shared", "until [ -f /data/from-writer ]; do sleep 0.2; done; echo \"saw $(cat /data/from-writer)\"; sleep 3600")));
    wait_log(c, "nfs-writer", "wrote").await;
    wait_log(c, "nfs-reader", "saw nfs-writer").await;
    assert_eq!(
        std::fs::read_to_string(export.join("from-writer")).unwrap(),
        "nfs-writer\n"
    );
    assert_eq!(
        nfs_mounts(c).len(),
        1,
        "one mount per export per node: {:?}",
        nfs_mounts(c)
    );

    // A class of the built-in NFS provisioner: a directory per claim.
    ok(apply(c, "nfs-class", &format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: nfs}}\nprovisioner: minik8s.io/nfs\nparameters: {{server: 127.0.0.1, path: {}}}\n",
        export.display()
    )));
    ok(apply(
        c,
        "team",
        &claim_yaml("team", Some("nfs"), "100Mi", "ReadWriteMany"),
    ));
    let claim = wait_claim(c, "team", "Bound", |v| v["status"]["phase"] == "Bound").await;
    let uid = claim["metadata"]["uid"].as_str().unwrap().to_string();
    let dir = export.join(format!("default-team-pvc-{uid}"));
    assert!(dir.is_dir(), "{dir:?} made over NFS");
    ok(apply(
        c,
        "nfs-team",
        &pod_with_claim(
            "nfs-team",
            "team",
            "echo notes > /data/notes; echo stored; sleep 3600",
        ),
    ));
    wait_log(c, "nfs-team", "stored").await;
    assert_eq!(
        std::fs::read_to_string(dir.join("notes")).unwrap(),
        "notes\n"
    );
    assert_eq!(nfs_mounts(c).len(), 2, "{:?}", nfs_mounts(c));

    for pod in ["nfs-writer", "nfs-reader", "nfs-team"] {
        delete_pod(c, pod).await;
    }
    ok(c.real_kubectl(&["delete", "pvc", "team", "shared"]));
    let pvs = volumes(c);
    let pv_name = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    minik8s_testkit::poll(
        60,
        Duration::from_millis(200),
        "the NFS volume reclaimed",
        || async {
            match pvs.get(&pv_name).await {
                Err(e) if e.is_not_found() && !dir.exists() => Ok(()),
                other => Err(format!("{other:?}, directory there: {}", dir.exists())),
            }
        },
    )
    .await;
    assert!(
        export.join("from-writer").exists(),
        "the static volume (Retain) keeps its data"
    );
    minik8s_testkit::poll(
        60,
        Duration::from_millis(200),
        "the exports unmounted",
        || async {
            let left = nfs_mounts(c);
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        },
    )
    .await;
    drop(server);
}
