//! `minik8s-backup` against the real `master` binary: a snapshot taken
//! while the master serves, rotated snapshots for a timer, a restore into
//! the stopped master's data directory that brings back exactly the
//! backup's objects with every older resourceVersion compacted (clients
//! relist), refusals that change nothing (a running master, a truncated
//! file); the same cycle for a master on a real etcd, and etcd's own
//! snapshot; and a cluster (hollow nodes: real kubelets on a fake runtime)
//! that converges to a restored backup taken while a Deployment rolled.

use minik8s_api::registry;
use minik8s_client::{Client, ListParams};
use minik8s_testkit::free_port;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn backup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_minik8s-backup"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

struct Master {
    child: Child,
    client: Client,
}

impl Master {
    async fn start(data: &Path) -> Master {
        Self::start_with(data, &[]).await
    }

    async fn start_with(data: &Path, extra: &[&str]) -> Master {
        Self::start_on(data, free_port(), extra).await
    }

    /// On a given plain port (a restarted master keeps its address, as a
    /// master VM does, so its nodes find it again).
    async fn start_on(data: &Path, port: u16, extra: &[&str]) -> Master {
        let child = Command::new(env!("CARGO_BIN_EXE_master"))
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--secure-listen",
                "",
            ])
            .args(["--serverless-port", "0", "--leader-elect", "false"])
            .args(["--data-dir", &data.display().to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let client = Client::new(&format!("http://127.0.0.1:{port}"));
        // Owned before the wait: a master that never gets ready is killed too.
        let master = Master { child, client };
        minik8s_testkit::until(30, "the master ready", || async {
            master
                .client
                .get_json("/version")
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
        master
    }

    /// SIGTERM, as systemd stops it, and wait for the exit.
    fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        for _ in 0..300 {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.child.kill().unwrap();
        panic!("the master did not stop on SIGTERM");
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config_map_api(client: &Client) -> minik8s_client::DynamicApi {
    client.dynamic(
        registry::by_kind("v1", "ConfigMap").unwrap(),
        Some("default"),
    )
}

async fn config_map(client: &Client, name: &str) -> String {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}});
    let created = config_map_api(client).create(&cm).await.unwrap();
    created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn config_maps(client: &Client) -> Vec<String> {
    let list = config_map_api(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_restores_exactly_its_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let snapshots = tmp.path().join("backups");
    let master = Master::start(&data).await;
    config_map(&master.client, "before").await;
    let data_s = data.display().to_string();
    let dir_s = snapshots.display().to_string();
    // Three timed saves keeping two: the oldest goes.
    for _ in 0..3 {
        let o = backup(&[
            "save",
            "--data-dir",
            &data_s,
            "--dir",
            &dir_s,
            "--keep",
            "2",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("keys"), "{}", text(&o));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    let newest = files.last().unwrap().display().to_string();
    let after_rv = config_map(&master.client, "after").await;

    // A running master's store is never replaced.
    let o = backup(&["restore", "--from", &newest, "--data-dir", &data_s]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("stop it before restoring"),
        "{}",
        text(&o)
    );

    // A truncated snapshot is refused and changes nothing.
    master.stop();
    let bytes = std::fs::read(&newest).unwrap();
    let truncated = tmp.path().join("truncated.db");
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let db = data.join("state.db");
    let before = std::fs::read(&db).unwrap();
    let o = backup(&[
        "restore",
        "--from",
        &truncated.display().to_string(),
        "--data-dir",
        &data_s,
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("is not a usable minik8s store snapshot"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing changed");
    let o = backup(&["inspect", &truncated.display().to_string()]);
    assert!(!o.status.success(), "{}", text(&o));

    // The restore: exactly the backup's objects, every older version compacted.
    let o = backup(&["inspect", &newest]);
    assert!(
        o.status.success() && text(&o).contains("a whole snapshot"),
        "{}",
        text(&o)
    );
    let o = backup(&["restore", "--from", &newest, "--data-dir", &data_s]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clients relist"), "{}", text(&o));
    assert!(data.join("state.db.before-restore").is_file());
    let master = Master::start(&data).await;
    assert_eq!(config_maps(&master.client).await, ["before"]);
    // A client that watched before the restore resumes from an older
    // version: 410 Gone, so it relists and sees the restored state.
    let resumed = master
        .client
        .get_json(&format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={after_rv}&timeoutSeconds=2"
        ))
        .await
        .unwrap();
    assert_eq!(resumed["type"], "ERROR", "{resumed}");
    assert_eq!(resumed["object"]["code"], 410, "{resumed}");
    // New writes go on above the compaction point.
    let rv: i64 = config_map(&master.client, "new").await.parse().unwrap();
    assert!(rv > after_rv.parse::<i64>().unwrap());
    assert_eq!(config_maps(&master.client).await, ["before", "new"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_on_etcd_is_backed_up_and_restored() {
    let etcd = minik8s_testkit::EtcdProcess::start();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let on_etcd = ["--etcd-servers", etcd.endpoint.as_str()];
    let master = Master::start_with(&data, &on_etcd).await;
    config_map(&master.client, "before").await;
    let file = tmp.path().join("etcd.db");
    let file_s = file.display().to_string();
    let o = backup(&["save", "--etcd-servers", &etcd.endpoint, "--to", &file_s]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("from etcd"), "{}", text(&o));
    let after_rv = config_map(&master.client, "after").await;
    master.stop();
    let o = backup(&[
        "restore",
        "--etcd-servers",
        &etcd.endpoint,
        "--from",
        &file_s,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let master = Master::start_with(&data, &on_etcd).await;
    assert_eq!(config_maps(&master.client).await, ["before"]);
    let resumed = master
        .client
        .get_json(&format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={after_rv}&timeoutSeconds=2"
        ))
        .await
        .unwrap();
    assert_eq!(resumed["object"]["code"], 410, "{resumed}");
    let rv: i64 = config_map(&master.client, "new").await.parse().unwrap();
    assert!(rv > after_rv.parse::<i64>().unwrap());
    master.stop();

    // Restored into a new etcd (the old one lost): its revisions start
    // again below what clients hold, and a watch from one of those is told
    // it is too large (Kubernetes' 504 ResourceVersionTooLarge), so the
    // client relists instead of waiting for a revision that means nothing.
    let fresh = minik8s_testkit::EtcdProcess::start();
    let o = backup(&[
        "restore",
        "--etcd-servers",
        &fresh.endpoint,
        "--from",
        &file_s,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let master = Master::start_with(&data, &["--etcd-servers", fresh.endpoint.as_str()]).await;
    assert_eq!(config_maps(&master.client).await, ["before"]);
    let resumed = master
        .client
        .get_json(&format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=2"
        ))
        .await
        .unwrap();
    assert_eq!(resumed["type"], "ERROR", "{resumed}");
    assert_eq!(resumed["object"]["code"], 504, "{resumed}");
    assert_eq!(
        resumed["object"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{resumed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_native_snapshot_is_saved_whole() {
    let etcd = minik8s_testkit::EtcdProcess::start();
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("etcd.snapshot");
    let o = backup(&[
        "save",
        "--etcd-servers",
        &etcd.endpoint,
        "--etcd-native",
        "--to",
        &to.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("etcd snapshot"), "{}", text(&o));
    // etcd ends its snapshot stream with the SHA-256 of the database before it.
    let bytes = std::fs::read(&to).unwrap();
    assert!(bytes.len() > 32, "{} bytes", bytes.len());
    let (db, sum) = bytes.split_at(bytes.len() - 32);
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, db).as_ref(),
        sum
    );
    let o = backup(&[
        "save",
        "--etcd-servers",
        "http://127.0.0.1:1",
        "--to",
        "/nonexistent/x",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("connecting to etcd at http://127.0.0.1:1"),
        "{}",
        text(&o)
    );
}

/// The pods the API has and the pods whose containers run on the nodes:
/// `Ok` once every pod the API wants running has a running container and no
/// running container belongs to a pod the API does not have.
async fn converged(
    client: &Client,
    runtimes: &[std::sync::Arc<kubelet::runtime::fake::FakeRuntime>],
) -> Result<usize, String> {
    use kubelet::runtime::ContainerRuntime;
    use std::collections::BTreeSet;
    let pods = client
        .dynamic(registry::by_kind("v1", "Pod").unwrap(), Some("default"))
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let pods = pods["items"].as_array().cloned().unwrap_or_default();
    let known: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    let wanted: BTreeSet<String> = pods
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    let mut running = BTreeSet::new();
    for rt in runtimes {
        for c in rt.list(None).await.map_err(|e| e.to_string())? {
            if c.state.is_running() && c.name != "POD" {
                running.insert(c.pod_uid.clone());
            }
        }
    }
    let orphans: Vec<_> = running.difference(&known).collect();
    let missing: Vec<_> = wanted.difference(&running).collect();
    if orphans.is_empty() && missing.is_empty() {
        Ok(wanted.len())
    } else {
        Err(format!(
            "{} orphaned containers (pods not in the API: {orphans:?}), {} pods without a running container: {missing:?}",
            orphans.len(),
            missing.len()
        ))
    }
}

async fn deployment(client: &Client, name: &str, replicas: u32, version: &str) {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": {"rollingUpdate": {"maxSurge": 5, "maxUnavailable": 5}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "busybox",
                                       "env": [{"name": "VERSION", "value": version}]}]}}}});
    let api = client.dynamic(
        registry::by_kind("apps/v1", "Deployment").unwrap(),
        Some("default"),
    );
    // An update races the controller's status writes: read again on a conflict.
    for _ in 0..20 {
        let written = match api.get(name).await {
            Ok(mut old) => {
                old["spec"] = d["spec"].clone();
                api.replace(name, &old).await
            }
            Err(_) => api.create(&d).await,
        };
        match written {
            Ok(_) => return,
            Err(e) if e.is_conflict() => {}
            Err(e) => panic!("writing deployment {name}: {e}"),
        }
    }
    panic!("deployment {name}: 20 conflicts in a row");
}

async fn deployment_names(client: &Client) -> Vec<String> {
    let list = client
        .dynamic(
            registry::by_kind("apps/v1", "Deployment").unwrap(),
            Some("default"),
        )
        .list(&ListParams::default())
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Kubernetes' etcd restore, end to end: a backup taken while 30 pods run
/// and their Deployment rolls; afterwards the rollout finishes and another
/// Deployment starts; the master stops, its data directory is wiped and the
/// backup restored; the master comes back on its address. The nodes'
/// kubelets (informers relist on 410) and the controllers converge to the
/// backup's state: the later Deployment and its pods are gone from the API
/// and from the nodes, every pod the API has runs, no container is orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_converges_to_a_restored_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let snapshots = tmp.path().join("backups");
    let port = free_port();
    let master = Master::start_on(&data, port, &[]).await;
    let nodes = kubelet::hollow::start(
        &master.client,
        &kubelet::hollow::HollowConfig {
            prefix: "restored".into(),
            count: 3,
            lease_seconds: 1,
            sync_seconds: 1,
            fake_gpus: 0,
        },
    )
    .await
    .unwrap();
    deployment(&master.client, "web", 30, "1").await;
    let running = minik8s_testkit::until(120, "30 web pods running", || async {
        match converged(&master.client, &nodes.runtimes).await {
            Ok(30) => Ok(30),
            Ok(n) => Err(format!("{n} pods")),
            Err(e) => Err(e),
        }
    })
    .await;
    assert_eq!(running, 30);

    // The backup, taken while the Deployment rolls to version 2 (each
    // container now takes a second to start: the rollout takes a while).
    for rt in &nodes.runtimes {
        rt.set_start_latency(Duration::from_secs(1));
    }
    deployment(&master.client, "web", 30, "2").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let o = backup(&[
        "save",
        "--data-dir",
        &data.display().to_string(),
        "--dir",
        &snapshots.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let web = master
        .client
        .get_json("/apis/apps/v1/namespaces/default/deployments/web")
        .await
        .unwrap();
    let status = &web["status"];
    assert!(
        status["updatedReplicas"].as_i64().unwrap_or(0) < 30
            || status["replicas"].as_i64() > Some(30),
        "the rollout is still under way after the backup: {status}"
    );
    let snapshot = std::fs::read_dir(&snapshots)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // Life goes on after the backup: the rollout finishes, another Deployment.
    deployment(&master.client, "later", 6, "1").await;
    minik8s_testkit::until(
        120,
        "the rollout done and the later pods running",
        || async {
            converged(&master.client, &nodes.runtimes)
                .await
                .and_then(|n| (n == 36).then_some(n).ok_or(format!("{n} pods")))
        },
    )
    .await;

    // Stop, wipe, restore, start on the same address.
    master.stop();
    std::fs::remove_dir_all(&data).unwrap();
    let o = backup(&[
        "restore",
        "--from",
        &snapshot.display().to_string(),
        "--data-dir",
        &data.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let master = Master::start_on(&data, port, &[]).await;
    assert_eq!(deployment_names(&master.client).await, ["web"]);
    // The controllers finish the restored rollout; the nodes drop what the
    // API no longer has and run what it has.
    let pods = minik8s_testkit::until(120, "the cluster to converge", || async {
        let n = converged(&master.client, &nodes.runtimes).await?;
        let web = master
            .client
            .get_json("/apis/apps/v1/namespaces/default/deployments/web")
            .await
            .map_err(|e| e.to_string())?;
        let status = &web["status"];
        let done = status["updatedReplicas"] == 30
            && status["availableReplicas"] == 30
            && status["replicas"] == 30;
        (done && n == 30)
            .then_some(n)
            .ok_or(format!("{n} pods; web status {status}"))
    })
    .await;
    assert_eq!(pods, 30);
    drop(nodes);
}
