//! Rollouts of LeaderWorkerSets and DisaggregatedSets on a real kubelet and
//! real Docker, with the real kubectl: resizing an LWS from 3 to 4 pods per
//! group rolls group by group and the new worker sees `LWS_GROUP_SIZE=4`; a
//! DisaggregatedSet of prefill and decode roles comes up with upstream's
//! names and rolls an image change across both roles in lockstep, the new
//! containers running the new image and command.

mod common;

use common::*;
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

async fn live_pods(pods: &DynamicApi, selector: &str) -> BTreeMap<String, Value> {
    pods.list(&ListParams::default().labels(selector))
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

async fn wait_for<F: Fn(&BTreeMap<String, Value>) -> bool>(
    c: &Cluster,
    selector: &str,
    what: &str,
    ok: F,
) -> BTreeMap<String, Value> {
    let pods = c.pods();
    minik8s_testkit::poll(120, Duration::from_millis(300), what, || async {
        let p = live_pods(&pods, selector).await;
        if ok(&p) {
            return Ok(p);
        }
        let phases: Vec<_> = p.iter().map(|(n, p)| format!("{n}:{}", phase(p))).collect();
        Err(format!("{phases:?}\n{}", tail(&c.kubelet_log(), 20)))
    })
    .await
}

fn kubectl_ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The environment a pod's first container's process sees.
fn env_inside(c: &Cluster, pod: &Value) -> BTreeMap<String, String> {
    let id = c.dockerd.docker(&[
        "ps",
        "-q",
        "--filter",
        &format!(
            "label=io.minik8s.pod.uid={}",
            pod["metadata"]["uid"].as_str().unwrap()
        ),
        "--filter",
        "label=io.minik8s.container.name=c",
    ]);
    let id = id.lines().next().expect("a running container").to_string();
    c.dockerd
        .docker(&["exec", &id, "env"])
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn revision(p: &Value, key: &str) -> String {
    p["metadata"]["labels"][key]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn event_messages(c: &Cluster, name: &str) -> Vec<String> {
    c.client
        .dynamic(registry::by_kind("v1", "Event").unwrap(), Some("default"))
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lws_resize_and_disaggregated_rollout() {
    let c = Cluster::start().await;
    c.spawn_control_plane(controller_manager::Config::default());
    let manifest = c.root.path().join("resize.yaml");
    std::fs::write(
        &manifest,
        r#"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: demo}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
      spec:
        terminationGracePeriodSeconds: 1
        containers:
        - {name: c, image: minik8s/busybox:latest, imagePullPolicy: Never, command: ["sleep", "3600"]}
"#,
    )
    .unwrap();
    kubectl_ok(c.real_kubectl(&["apply", "-f", manifest.to_str().unwrap()]));
    let selector = "leaderworkerset.sigs.k8s.io/name=demo";
    let three = [
        "demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2",
    ];
    let before = wait_for(&c, selector, "2 groups of 3", |p| {
        p.keys().map(String::as_str).eq(three) && p.values().all(all_ready)
    })
    .await;
    let old = revision(
        &before["demo-0"],
        "leaderworkerset.sigs.k8s.io/template-revision-hash",
    );

    // size 3 → 4: a new revision, rolled one group at a time (maxUnavailable 1).
    kubectl_ok(c.real_kubectl(&[
        "patch",
        "lws",
        "demo",
        "--type=merge",
        "-p",
        r#"{"spec":{"leaderWorkerTemplate":{"size":4}}}"#,
    ]));
    let four = [
        "demo-0", "demo-0-1", "demo-0-2", "demo-0-3", "demo-1", "demo-1-1", "demo-1-2", "demo-1-3",
    ];
    let after = wait_for(&c, selector, "2 groups of 4 at the new revision", |p| {
        p.keys().map(String::as_str).eq(four)
            && p.values().all(|x| {
                all_ready(x)
                    && revision(x, "leaderworkerset.sigs.k8s.io/template-revision-hash") != old
            })
    })
    .await;
    let env = env_inside(&c, &after["demo-1-3"]);
    assert_eq!(env["LWS_GROUP_SIZE"], "4");
    assert_eq!(env["LWS_WORKER_INDEX"], "3");
    assert_eq!(env["LWS_LEADER_ADDRESS"], "demo-1.demo.default");
    assert_eq!(
        after["demo-0"]["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"],
        "4"
    );
    let ev = event_messages(&c, "demo").await;
    for want in [
        "GroupsUpdating: Updating replica 1",
        "GroupsUpdating: Updating replica 0",
    ] {
        assert!(ev.iter().any(|e| e == want), "{want} in {ev:?}");
    }

    // A DisaggregatedSet of prefill (groups of 2) and decode roles.
    let ds = c.root.path().join("ds.yaml");
    let write_ds = |word: &str, image: &str| {
        std::fs::write(
            &ds,
            format!(
                r#"
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata: {{name: llm}}
spec:
  roles:
  - name: prefill
    spec:
      replicas: 1
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            terminationGracePeriodSeconds: 1
            containers:
            - {{name: c, image: {image}, imagePullPolicy: Never,
                command: ["sh", "-c", "echo {word} prefill $LWS_WORKER_INDEX; exec sleep 3600"]}}
  - name: decode
    spec:
      replicas: 1
      leaderWorkerTemplate:
        workerTemplate:
          spec:
            terminationGracePeriodSeconds: 1
            containers:
            - {{name: c, image: {image}, imagePullPolicy: Never,
                command: ["sh", "-c", "echo {word} decode; exec sleep 3600"]}}
"#
            ),
        )
        .unwrap()
    };
    write_ds("v1", "minik8s/busybox:latest");
    kubectl_ok(c.real_kubectl(&["apply", "-f", ds.to_str().unwrap()]));
    let ds_selector = "disaggregatedset.x-k8s.io/name=llm";
    let rev_key = "disaggregatedset.x-k8s.io/revision";
    let first = wait_for(
        &c,
        ds_selector,
        "prefill (2 pods) and decode running",
        |p| p.len() == 3 && p.values().all(all_ready),
    )
    .await;
    let r1 = revision(first.values().next().unwrap(), rev_key);
    let names: Vec<&String> = first.keys().collect();
    assert_eq!(
        names,
        [
            &format!("llm-0-{r1}-decode-0"),
            &format!("llm-0-{r1}-prefill-0"),
            &format!("llm-0-{r1}-prefill-0-1"),
        ]
    );
    assert!(c
        .pod_log(&format!("llm-0-{r1}-prefill-0-1/log"))
        .await
        .contains("v1 prefill 1"));
    let lws = kubectl_ok(c.real_kubectl(&["get", "lws", "-l", ds_selector, "-o", "name"]));
    assert_eq!(
        lws.lines().collect::<Vec<_>>(),
        [
            format!("leaderworkerset.leaderworkerset.x-k8s.io/llm-0-{r1}-decode"),
            format!("leaderworkerset.leaderworkerset.x-k8s.io/llm-0-{r1}-prefill")
        ]
    );

    // An image change (a second tag of the local image): both roles move to
    // the new revision together.
    c.dockerd
        .docker(&["tag", "minik8s/busybox:latest", "minik8s/busybox:v2"]);
    write_ds("v2", "minik8s/busybox:v2");
    kubectl_ok(c.real_kubectl(&["apply", "-f", ds.to_str().unwrap()]));
    let second = wait_for(&c, ds_selector, "both roles at the new revision", |p| {
        p.len() == 3
            && p.values()
                .all(|x| all_ready(x) && revision(x, rev_key) != r1)
    })
    .await;
    let r2 = revision(second.values().next().unwrap(), rev_key);
    assert!(second
        .values()
        .all(|p| p["spec"]["containers"][0]["image"] == "minik8s/busybox:v2"));
    assert!(c
        .pod_log(&format!("llm-0-{r2}-prefill-0-1/log"))
        .await
        .contains("v2 prefill 1"));
    assert!(c
        .pod_log(&format!("llm-0-{r2}-decode-0/log"))
        .await
        .contains("v2 decode"));
    // The reference's order for (1,1) roles with one surge group each:
    // new 0→1 for both roles, then old 1→0 for both, then the old LWS go.
    let ev = event_messages(&c, "llm").await;
    for want in [
        format!("RollingUpdateStarted: Started rolling update to revision {r2}"),
        format!("ScalingUp: Scaling up prefill LWS llm-0-{r2}-prefill from 0 to 1 replicas"),
        format!("ScalingUp: Scaling up decode LWS llm-0-{r2}-decode from 0 to 1 replicas"),
        format!("ScalingDown: Scaling down prefill LWS llm-0-{r1}-prefill from 1 to 0 replicas"),
        format!("ScalingDown: Scaling down decode LWS llm-0-{r1}-decode from 1 to 0 replicas"),
        format!("LWSDeleted: Deleted drained LWS llm-0-{r1}-prefill"),
    ] {
        assert!(ev.contains(&want), "{want} in {ev:?}");
    }
    let status = kubectl_ok(c.real_kubectl(&[
        "get", "disaggregatedset", "llm", "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.status.roleStatuses[*].updatedReplicas}",
    ]));
    assert_eq!(status, "True 1 1");
}
