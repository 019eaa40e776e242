//! LeaderWorkerSets on a real kubelet and real Docker, driven by the real
//! kubectl where a user would use it: `examples/lws.yaml` reaches its expected
//! pods with upstream's env read from inside the containers; a killed worker
//! container recreates its whole group (new pod UIDs), the backoff spaces a
//! second recreation, and past `minik8s.io/max-group-restarts` the group is
//! Failed (condition naming it, pods kept); `kubectl scale lws` (ours, then
//! the real one) adds and removes groups, failed ones first; `size` 3 → 4
//! rolls group by group; under
//! `restartPolicy: None` only the container restarts; under LeaderReady no
//! worker exists before the leader is Ready; with per-group claims
//! (`examples/dra/lws-group-gpus.yaml`, DRA on the node's two fake GPUs)
//! a group's leader and worker see one GPU, the two groups different ones,
//! and a recreated group gets a claim and a GPU again.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::StatefulSet;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

async fn start() -> Cluster {
    // Two make-believe GPUs for the per-group claims (DRA).
    let c = Cluster::start_with(|_| vec!["--fake-gpus".into(), "2".into()]).await;
    c.spawn_control_plane(controller_manager::Config::default());
    c
}

/// Live pods of the LWS by name.
async fn group_pods(pods: &DynamicApi, lws: &str) -> BTreeMap<String, Value> {
    pods.list(&ListParams::default().labels(&format!("leaderworkerset.sigs.k8s.io/name={lws}")))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
        .collect()
}

async fn wait_pods<F: Fn(&BTreeMap<String, Value>) -> bool>(
    c: &Cluster,
    lws: &str,
    what: &str,
    secs: u64,
    ok: F,
) -> BTreeMap<String, Value> {
    let pods = c.pods();
    let every = Duration::from_millis(200);
    minik8s_testkit::poll(secs, every, what, || async {
        let p = group_pods(&pods, lws).await;
        if ok(&p) {
            return Ok(p);
        }
        let phases: Vec<_> = p
            .iter()
            .map(|(n, p)| (n.clone(), phase(p).to_string()))
            .collect();
        Err(format!("pods: {phases:?}\n{}", tail(&c.kubelet_log(), 30)))
    })
    .await
}

fn all_running<'a>(names: &'a [&'a str]) -> impl Fn(&BTreeMap<String, Value>) -> bool + 'a {
    move |p| p.keys().map(String::as_str).eq(names.iter().copied()) && p.values().all(all_ready)
}

fn uid(p: &Value) -> String {
    p["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

/// The app container's id of a pod.
fn container(c: &Cluster, pod: &Value, name: &str) -> String {
    let out = c.dockerd.docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=io.minik8s.pod.uid={}", uid(pod)),
        "--filter",
        &format!("label=io.minik8s.container.name={name}"),
    ]);
    out.lines()
        .next()
        .unwrap_or_else(|| {
            panic!(
                "no running {name} container for {}",
                pod["metadata"]["name"]
            )
        })
        .to_string()
}

/// The environment a container's process sees.
fn env_inside(c: &Cluster, pod: &Value, name: &str) -> BTreeMap<String, String> {
    c.dockerd
        .docker(&["exec", &container(c, pod, name), "env"])
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn kubectl_ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_lws_runs_recreates_groups_and_scales() {
    let c = start().await;
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lws.yaml");
    kubectl_ok(c.real_kubectl(&["create", "-f", example]));
    let names = [
        "demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2",
    ];
    let p = wait_pods(
        &c,
        "demo",
        "the example's 6 pods ready",
        90,
        all_running(&names),
    )
    .await;

    // Upstream's env, as the processes see it.
    for (name, index) in [("demo-0", "0"), ("demo-1-2", "2"), ("demo-0-1", "1")] {
        let env = env_inside(&c, &p[name], "worker");
        let group = &name[..6];
        assert_eq!(
            env["LWS_LEADER_ADDRESS"],
            format!("{group}.demo.default"),
            "{name}"
        );
        assert_eq!(env["LWS_GROUP_SIZE"], "3", "{name}");
        assert_eq!(env["LWS_WORKER_INDEX"], index, "{name}");
        assert_eq!(env["HOSTNAME"], name, "the pod's hostname is its name");
    }
    assert!(c
        .pod_log("demo-1-2/log")
        .await
        .contains("leader at demo-1.demo.default"));
    let out = kubectl_ok(c.real_kubectl(&["get", "lws", "demo"]));
    assert!(out.contains("demo"), "{out}");
    let out =
        kubectl_ok(c.real_kubectl(&["get", "svc", "demo", "-o", "jsonpath={.spec.clusterIP}"]));
    assert_eq!(out, "None");

    // A worker container killed: the whole group comes back with new pods.
    kubectl_ok(c.real_kubectl(&[
        "annotate",
        "lws",
        "demo",
        "minik8s.io/group-restart-backoff=6s",
    ]));
    let before: Vec<String> = ["demo-0", "demo-0-1", "demo-0-2"]
        .iter()
        .map(|n| uid(&p[*n]))
        .collect();
    let group1 = uid(&p["demo-1"]);
    c.dockerd
        .docker(&["kill", &container(&c, &p["demo-0-1"], "worker")]);
    let after = wait_pods(&c, "demo", "group 0 recreated", 90, |p| {
        all_running(&names)(p)
            && ["demo-0", "demo-0-1", "demo-0-2"]
                .iter()
                .zip(&before)
                .all(|(n, old)| uid(&p[*n]) != *old)
    })
    .await;
    assert_eq!(uid(&after["demo-1"]), group1, "group 1 is untouched");
    let lwss = c
        .client
        .dynamic(registry::of::<LeaderWorkerSet>(), Some("default"));
    let history = || async {
        let l = lwss.get("demo").await.unwrap();
        let h = l["metadata"]["annotations"]["minik8s.io/group-restarts"]
            .as_str()
            .unwrap()
            .to_string();
        serde_json::from_str::<Value>(&h).unwrap()["0"].clone()
    };
    let first = history().await;
    assert_eq!(first["count"], 1);

    // Again at once: the backoff (6 s after the first recreation) spaces it.
    let leader = uid(&after["demo-0"]);
    c.dockerd
        .docker(&["kill", &container(&c, &after["demo-0-2"], "worker")]);
    wait_pods(&c, "demo", "group 0 recreated a second time", 90, |p| {
        p.get("demo-0").is_some_and(|l| uid(l) != leader)
    })
    .await;
    let second = history().await;
    assert_eq!(second["count"], 2);
    let spacing = second["last"].as_i64().unwrap() - first["last"].as_i64().unwrap();
    assert!(
        spacing >= 6,
        "the second recreation came {spacing} s after the first"
    );

    // With a limit of 2 recreations the next crash marks group 0 Failed: it
    // is left as it is (the container restarts in place) and the LWS says so.
    kubectl_ok(c.real_kubectl(&["annotate", "lws", "demo", "minik8s.io/max-group-restarts=2"]));
    let now = wait_pods(
        &c,
        "demo",
        "group 0 back after its second recreation",
        90,
        all_running(&names),
    )
    .await;
    let failed_leader = uid(&now["demo-0"]);
    c.dockerd
        .docker(&["kill", &container(&c, &now["demo-0-1"], "worker")]);
    let failed =
        minik8s_testkit::poll(60, Duration::from_millis(300), "group 0 Failed", || async {
            let l = lwss.get("demo").await.map_err(|e| e.to_string())?;
            let cond = l["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Failed"))
                .cloned()
                .unwrap_or_default();
            if cond["status"] == "True" && l["status"]["groupStatuses"][0]["state"] == "Failed" {
                Ok(cond)
            } else {
                Err(format!("{}", l["status"]))
            }
        })
        .await;
    assert_eq!(failed["reason"], "MaxGroupRestartsExceeded");
    assert_eq!(
        failed["message"],
        "Group 0 exceeded minik8s.io/max-group-restarts and no longer recreated"
    );
    let kept = wait_pods(
        &c,
        "demo",
        "the failed group's worker restarted in place",
        60,
        |p| {
            p.get("demo-0-1")
                .is_some_and(|w| restarts(w, "worker") >= 1 && all_ready(w))
        },
    )
    .await;
    assert_eq!(
        uid(&kept["demo-0"]),
        failed_leader,
        "a failed group is not recreated"
    );
    let described = kubectl_ok(c.real_kubectl(&["describe", "lws", "demo"]));
    assert!(
        described.contains("MaxGroupRestartsExceeded"),
        "{described}"
    );

    // kubectl scale lws: 2 → 3 → 1.
    kubectl_ok(c.our_kubectl(&["scale", "lws", "demo", "--replicas=3"]));
    let three = [
        "demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2", "demo-2", "demo-2-1",
        "demo-2-2",
    ];
    wait_pods(&c, "demo", "three groups", 90, all_running(&three)).await;
    kubectl_ok(c.real_kubectl(&["scale", "lws", "demo", "--replicas=1"]));
    wait_pods(
        &c,
        "demo",
        "one group left",
        90,
        all_running(&["demo-0", "demo-0-1", "demo-0-2"]),
    )
    .await;
    let ready = kubectl_ok(c.real_kubectl(&[
        "get",
        "lws",
        "demo",
        "-o",
        "jsonpath={.status.readyReplicas}/{.status.replicas}",
    ]));
    assert_eq!(ready, "1/1");
    // The scale-down took the failed group out first: group 0 is a new one.
    let p = group_pods(&c.pods(), "demo").await;
    assert_ne!(uid(&p["demo-0"]), failed_leader);
    let failed = kubectl_ok(c.real_kubectl(&[
        "get",
        "lws",
        "demo",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Failed\")].status}",
    ]));
    assert_eq!(failed, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_ready_startup_and_restart_policy_none() {
    let c = start().await;
    let manifest = c.root.path().join("lws.yaml");
    std::fs::write(
        &manifest,
        r#"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: gated}
spec:
  replicas: 1
  startupPolicy: LeaderReady
  leaderWorkerTemplate:
    size: 2
    restartPolicy: None
    leaderTemplate:
      spec:
        terminationGracePeriodSeconds: 1
        containers:
        - name: leader
          image: minik8s/busybox:latest
          imagePullPolicy: Never
          command: ["sleep", "3600"]
          readinessProbe: {exec: {command: ["cat", "/tmp/ready"]}, periodSeconds: 1}
    workerTemplate:
      spec:
        terminationGracePeriodSeconds: 1
        containers:
        - name: worker
          image: minik8s/busybox:latest
          imagePullPolicy: Never
          command: ["sleep", "3600"]
"#,
    )
    .unwrap();
    kubectl_ok(c.our_kubectl(&["create", "-f", manifest.to_str().unwrap()]));
    let p = wait_pods(&c, "gated", "the leader running, not ready", 60, |p| {
        p.get("gated-0").is_some_and(|l| phase(l) == "Running")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sets = c
        .client
        .dynamic(registry::of::<StatefulSet>(), Some("default"));
    assert!(
        sets.get("gated-0").await.unwrap_err().is_not_found(),
        "no worker set before the leader is Ready"
    );
    assert_eq!(
        group_pods(&c.pods(), "gated").await.len(),
        1,
        "no worker before the leader is Ready"
    );
    c.dockerd.docker(&[
        "exec",
        &container(&c, &p["gated-0"], "leader"),
        "touch",
        "/tmp/ready",
    ]);
    let p = wait_pods(
        &c,
        "gated",
        "the worker once the leader is Ready",
        60,
        all_running(&["gated-0", "gated-0-1"]),
    )
    .await;

    // restartPolicy None: a killed worker container just restarts in place.
    let uids: Vec<String> = p.values().map(uid).collect();
    c.dockerd
        .docker(&["kill", &container(&c, &p["gated-0-1"], "worker")]);
    let p = wait_pods(
        &c,
        "gated",
        "the worker container restarted in place",
        60,
        |p| {
            p.get("gated-0-1")
                .is_some_and(|w| restarts(w, "worker") == 1 && all_ready(w))
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now: Vec<String> = group_pods(&c.pods(), "gated")
        .await
        .values()
        .map(uid)
        .collect();
    assert_eq!(now, uids, "no pod was recreated");
    assert_eq!(p.len(), 2);

    groups_share_their_claims(&c).await;
}

/// The GPU each pod of the LWS sees, by pod name.
fn gpus_seen(c: &Cluster, pods: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    pods.iter()
        .map(|(name, p)| {
            let env = env_inside(c, p, "shard");
            let gpu = env
                .get("NVIDIA_VISIBLE_DEVICES")
                .cloned()
                .unwrap_or_default();
            assert_eq!(env.get("GPU_DEVICE_0"), Some(&gpu), "{name}: {env:?}");
            (name.clone(), gpu)
        })
        .collect()
}

/// examples/dra/lws-group-gpus.yaml: a claim per group, shared by its pods.
async fn groups_share_their_claims(c: &Cluster) {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dra/lws-group-gpus.yaml"
    );
    kubectl_ok(c.real_kubectl(&["apply", "-f", example]));
    let names = [
        "inference-0",
        "inference-0-1",
        "inference-1",
        "inference-1-1",
    ];
    let p = wait_pods(
        c,
        "inference",
        "both groups running",
        90,
        all_running(&names),
    )
    .await;
    let seen = gpus_seen(c, &p);
    assert!(seen.values().all(|g| g.starts_with("GPU-")), "{seen:?}");
    assert_eq!(
        seen["inference-0"], seen["inference-0-1"],
        "a group shares one GPU"
    );
    assert_eq!(
        seen["inference-1"], seen["inference-1-1"],
        "a group shares one GPU"
    );
    assert_ne!(
        seen["inference-0"], seen["inference-1"],
        "groups have their own GPU"
    );
    let claims = c.client.dynamic(
        registry::by_kind("resource.k8s.io/v1", "ResourceClaim").unwrap(),
        Some("default"),
    );
    let claim = claims.get("inference-1-gpu").await.unwrap();
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["uid"],
        p["inference-1"]["metadata"]["uid"]
    );
    let reserved = claim["status"]["reservedFor"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(
        reserved, 2,
        "reserved for the leader and its worker: {}",
        claim["status"]
    );

    // A worker crash recreates group 1: its claim goes with the old leader
    // (both GPUs were taken, so the new group's claim needs the old one's
    // device back) and the new group is allocated again.
    let old_claim = claim["metadata"]["uid"].clone();
    c.dockerd
        .docker(&["kill", &container(c, &p["inference-1-1"], "shard")]);
    let again = wait_pods(c, "inference", "group 1 recreated with a GPU", 120, |now| {
        all_running(&names)(now) && uid(&now["inference-1"]) != uid(&p["inference-1"])
    })
    .await;
    let claim = claims.get("inference-1-gpu").await.unwrap();
    assert_ne!(
        claim["metadata"]["uid"], old_claim,
        "a new claim for the new group"
    );
    let seen = gpus_seen(c, &again);
    assert_eq!(seen["inference-1"], seen["inference-1-1"], "{seen:?}");
    assert_ne!(seen["inference-0"], seen["inference-1"], "{seen:?}");
    kubectl_ok(c.real_kubectl(&["delete", "-f", example]));
}
