//! LeaderWorkerSet Hash groups (upstream v0.11's `groupIdentity: Hash`)
//! against a real apiserver, the scheduler, every controller and hollow
//! nodes, driven with the real kubectl where a user would type: random
//! 40-hex group keys, leaders in a Deployment, workers reaching the leader
//! by pod IP, the `group-ready` readiness gate, both replacement policies,
//! a rolling update, and upstream's refusals.

mod common;

use common::{cluster, kubectl, kubectl_json, kubectl_ok, until};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use serde_json::Value;
use std::collections::BTreeMap;

const NAME: &str = "leaderworkerset.sigs.k8s.io/name";
const WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
const GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
const GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
const GROUP_READY: &str = "leaderworkerset.sigs.k8s.io/group-ready";
const REPLACEMENT_GATE: &str = "leaderworkerset.sigs.k8s.io/group-replacement";

fn pods(client: &Client) -> DynamicApi {
    client.dynamic(registry::by_kind("v1", "Pod").unwrap(), Some("default"))
}

fn label<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"]["labels"][k].as_str().unwrap_or("")
}

fn env(p: &Value, name: &str) -> String {
    p["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["name"] == name))
        .and_then(|e| e["value"].as_str())
        .unwrap_or("")
        .to_string()
}

fn condition<'a>(o: &'a Value, t: &str) -> Option<&'a Value> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

fn status_of(o: &Value, t: &str) -> String {
    condition(o, t)
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Pods of LWS `lws` by name (terminating ones included when `all`).
async fn set_pods(api: &DynamicApi, lws: &str, all: bool) -> BTreeMap<String, Value> {
    api.list(&ListParams::default().labels(&format!("{NAME}={lws}")))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| all || p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
        .collect()
}

fn leaders(p: &BTreeMap<String, Value>) -> Vec<&Value> {
    p.values()
        .filter(|p| label(p, WORKER_INDEX) == "0")
        .collect()
}

fn ready(p: &Value) -> bool {
    p["status"]["phase"] == "Running" && status_of(p, "Ready") == "True"
}

/// `kubectl apply -f` of a YAML manifest.
fn apply(server: &str, yaml: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("lws-hash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.yaml");
    std::fs::write(&file, yaml).unwrap();
    kubectl(server, &["apply", "-f", file.to_str().unwrap()])
}

/// An upstream v0.11 manifest: `replicas` Hash groups of `size`.
fn manifest(name: &str, replicas: i32, size: i32, extra_spec: &str) -> String {
    format!(
        "apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  groupIdentity: Hash
{extra_spec}  leaderWorkerTemplate:
    size: {size}
    workerTemplate:
      metadata:
        labels:
          app: {name}
      spec:
        containers:
        - name: model
          image: busybox
          env:
          - name: VERSION
            value: \"1\"
"
    )
}

/// Until the LWS has `groups` groups of `size`, every pod Ready; its pods.
async fn settled(
    api: &DynamicApi,
    lws: &str,
    groups: usize,
    size: usize,
) -> BTreeMap<String, Value> {
    until(
        &format!("{lws}: {groups} ready groups of {size}"),
        40,
        || async {
            let p = set_pods(api, lws, true).await;
            let all_ready = p.values().all(ready);
            if p.len() == groups * size && leaders(&p).len() == groups && all_ready {
                Ok(p)
            } else {
                let states: Vec<String> = p
                    .iter()
                    .map(|(n, p)| format!("{n}:{}:{}", p["status"]["phase"], status_of(p, "Ready")))
                    .collect();
                Err(format!("{states:?}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_groups_keys_leader_ip_readiness_gate_replacement_and_rollout() {
    let (server, client) = cluster("hash", 3).await;
    let s = server.url.as_str();
    let pod_api = pods(&client);

    // --- keys, the leader Deployment, workers by leader IP ---
    let (ok, out) = apply(s, &manifest("infer", 2, 3, ""));
    assert!(ok, "{out}");
    let p = settled(&pod_api, "infer", 2, 3).await;
    let mut keys = Vec::new();
    for leader in leaders(&p) {
        let key = label(leader, GROUP_KEY);
        assert_eq!(key.len(), 40, "a 40-character key: {key}");
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            label(leader, GROUP_INDEX),
            key,
            "the key is the group index"
        );
        assert_eq!(
            leader["spec"]["readinessGates"][0]["conditionType"],
            GROUP_READY
        );
        assert_eq!(status_of(leader, GROUP_READY), "True");
        let name = leader["metadata"]["name"].as_str().unwrap();
        let ip = leader["status"]["podIP"].as_str().unwrap();
        for j in 1..3 {
            let w = &p[&format!("{name}-{j}")];
            assert_eq!(label(w, GROUP_KEY), key);
            assert_eq!(
                env(w, "LWS_LEADER_ADDRESS"),
                ip,
                "workers reach the leader by IP"
            );
            assert_eq!(env(w, "LWS_WORKER_INDEX"), j.to_string());
        }
        let own = &leader["spec"]["containers"][0]["env"][0];
        assert_eq!(own["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
        keys.push(key.to_string());
    }
    assert_ne!(keys[0], keys[1], "groups have their own keys");
    let deploy = kubectl_json(s, &["deployment", "infer"]);
    assert_eq!(
        deploy["metadata"]["ownerReferences"][0]["kind"],
        "LeaderWorkerSet"
    );
    assert_eq!(
        deploy["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/role"],
        "leader"
    );
    let lws = until("infer Available", 20, || async {
        let l = kubectl_json(s, &["lws", "infer"]);
        if status_of(&l, "Available") == "True" && l["status"]["readyReplicas"] == 2 {
            Ok(l)
        } else {
            Err(format!("{}", l["status"]))
        }
    })
    .await;
    assert_eq!(lws["spec"]["groupReplacementPolicy"], "PostTermination");
    assert!(
        kubectl_ok(
            s,
            &[
                "get",
                "sts",
                "-l",
                "leaderworkerset.sigs.k8s.io/role=leader",
                "-o",
                "name"
            ]
        )
        .trim()
        .is_empty(),
        "no leader StatefulSet for Hash groups"
    );

    // --- the readiness gate: a leader whose workers cannot run is not Ready ---
    let (ok, out) = apply(
        s,
        &manifest("stuck", 1, 2, "").replace(
            "      spec:\n        containers:",
            "      spec:\n        nodeSelector:\n          pool: none\n        containers:",
        ).replace(
            "  leaderWorkerTemplate:\n",
            "  leaderWorkerTemplate:\n    leaderTemplate:\n      spec:\n        containers:\n        - name: leader\n          image: busybox\n",
        ),
    );
    assert!(ok, "{out}");
    let leader = until(
        "stuck's leader running, held unready by its group",
        30,
        || async {
            let p = set_pods(&pod_api, "stuck", false).await;
            let l = leaders(&p).first().cloned().cloned();
            match l {
                Some(l)
                    if l["status"]["phase"] == "Running"
                        && status_of(&l, GROUP_READY) == "False" =>
                {
                    Ok(l)
                }
                _ => Err(format!("{:?}", p.keys())),
            }
        },
    )
    .await;
    let ready_condition = condition(&leader, "Ready").unwrap();
    assert_eq!(ready_condition["status"], "False");
    assert_eq!(ready_condition["reason"], "ReadinessGatesNotReady");
    assert_eq!(status_of(&leader, "ContainersReady"), "True");
    let leader_name = leader["metadata"]["name"].as_str().unwrap();
    let wide = kubectl_ok(s, &["get", "pod", leader_name, "-o", "wide"]);
    assert!(common::table_line(&wide, 1).contains(&"0/1"), "{wide}");
    let stuck = kubectl_json(s, &["lws", "stuck"]);
    assert_eq!(stuck["status"]["readyReplicas"], 0);
    kubectl_ok(s, &["delete", "lws", "stuck"]);

    // --- PostTermination: a replacement waits for the group it replaces ---
    let victim = leaders(&p)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let held_worker = format!("{victim}-1");
    // A finalizer keeps one worker of the old group around while it tears down.
    kubectl_ok(
        s,
        &[
            "patch",
            "pod",
            &held_worker,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ],
    );
    kubectl_ok(s, &["delete", "pod", &victim, "--wait=false"]);
    let replacement = until("a gated replacement leader", 30, || async {
        let p = set_pods(&pod_api, "infer", false).await;
        let new: Vec<Value> = leaders(&p)
            .into_iter()
            .filter(|l| !keys.contains(&label(l, GROUP_KEY).to_string()))
            .cloned()
            .collect();
        match new.first() {
            Some(l) if l["spec"]["schedulingGates"][0]["name"] == REPLACEMENT_GATE => Ok(l.clone()),
            _ => Err(format!("{:?}", p.keys())),
        }
    })
    .await;
    let new_leader = replacement["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // Held while the old worker remains: unscheduled, saying why.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let held = kubectl_json(s, &["pod", &new_leader]);
    assert!(
        held["spec"]["nodeName"].is_null(),
        "a held leader takes no node"
    );
    assert_eq!(
        condition(&held, "PodScheduled").unwrap()["reason"],
        "SchedulingGated"
    );
    let shown = kubectl_ok(s, &["get", "pod", &new_leader]);
    assert!(shown.contains("SchedulingGated"), "{shown}");
    // The old group goes: the replacement is admitted and its group runs.
    kubectl_ok(
        s,
        &[
            "patch",
            "pod",
            &held_worker,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    let p = settled(&pod_api, "infer", 2, 3).await;
    let now_keys: Vec<String> = leaders(&p)
        .iter()
        .map(|l| label(l, GROUP_KEY).to_string())
        .collect();
    assert!(now_keys.contains(&keys[1].clone()) || now_keys.contains(&keys[0].clone()));
    assert!(p.contains_key(&new_leader), "{:?}", p.keys());
    let fresh_key = label(&p[&new_leader], GROUP_KEY).to_string();
    assert!(
        !keys.contains(&fresh_key),
        "a replaced group gets a new key"
    );

    // --- Immediate: the replacement is scheduled at once ---
    let (ok, out) = apply(
        s,
        &manifest("fast", 1, 2, "  groupReplacementPolicy: Immediate\n"),
    );
    assert!(ok, "{out}");
    let p = settled(&pod_api, "fast", 1, 2).await;
    let old = leaders(&p)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    kubectl_ok(
        s,
        &[
            "patch",
            "pod",
            &format!("{old}-1"),
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ],
    );
    kubectl_ok(s, &["delete", "pod", &old, "--wait=false"]);
    until(
        "an ungated replacement scheduled while the old worker remains",
        30,
        || async {
            let p = set_pods(&pod_api, "fast", true).await;
            let old_worker_there = p.contains_key(&format!("{old}-1"));
            let new = leaders(&p).into_iter().find(|l| {
                l["metadata"]["name"] != old.as_str()
                    && l["metadata"]["deletionTimestamp"].is_null()
            });
            match new {
                Some(l) if old_worker_there && !l["spec"]["nodeName"].is_null() => {
                    assert!(l["spec"].get("schedulingGates").is_none_or(Value::is_null));
                    Ok(())
                }
                _ => Err(format!("{:?}", p.keys())),
            }
        },
    )
    .await;
    kubectl_ok(
        s,
        &[
            "patch",
            "pod",
            &format!("{old}-1"),
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );

    // --- a rolling update replaces whole groups through the Deployment ---
    let (ok, out) = apply(
        s,
        &manifest("infer", 2, 3, "").replace("value: \"1\"", "value: \"2\""),
    );
    assert!(ok, "{out}");
    let p = until("infer rolled to VERSION=2", 60, || async {
        let p = set_pods(&pod_api, "infer", true).await;
        let done = p.len() == 6 && p.values().all(|p| ready(p) && env(p, "VERSION") == "2");
        if done {
            Ok(p)
        } else {
            Err(format!("{:?}", p.keys()))
        }
    })
    .await;
    for l in leaders(&p) {
        assert!(
            !now_keys.contains(&label(l, GROUP_KEY).to_string()),
            "new groups, new keys"
        );
    }
    until("infer Available at the new revision", 20, || async {
        let l = kubectl_json(s, &["lws", "infer"]);
        if status_of(&l, "Available") == "True" && l["status"]["updatedReplicas"] == 2 {
            Ok(())
        } else {
            Err(format!("{}", l["status"]))
        }
    })
    .await;

    // --- doc/lws.md §8's commands on examples/lws-hash.yaml ---
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lws-hash.yaml");
    kubectl_ok(s, &["apply", "-f", example]);
    settled(&pod_api, "hashed", 2, 2).await;
    let out = kubectl_ok(s, &["get", "deploy", "hashed"]);
    assert!(common::table_line(&out, 1).contains(&"2/2"), "{out}");
    let out = kubectl_ok(
        s,
        &[
            "get",
            "pods",
            "-l",
            "leaderworkerset.sigs.k8s.io/name=hashed",
            "-L",
            "leaderworkerset.sigs.k8s.io/group-key",
        ],
    );
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{out}");
    for row in rows {
        let key = row.split_whitespace().last().unwrap();
        assert_eq!(key.len(), 40, "{out}");
    }

    // --- upstream's refusals, as kubectl shows them ---
    let (ok, out) = apply(
        s,
        &manifest("vol", 1, 2, "").replace(
            "  leaderWorkerTemplate:\n",
            "  leaderWorkerTemplate:\n    volumeClaimTemplates:\n    - metadata:\n        name: data\n      spec:\n        accessModes: [ReadWriteOnce]\n        resources:\n          requests:\n            storage: 1Gi\n",
        ),
    );
    assert!(!ok);
    assert!(
        out.contains("spec.leaderWorkerTemplate.volumeClaimTemplates: Invalid value")
            && out.contains("volumeClaimTemplates are not supported when groupIdentity is Hash"),
        "{out}"
    );
    let (ok, out) = apply(
        s,
        &manifest(
            "part",
            2,
            2,
            "  rolloutStrategy:\n    rollingUpdateConfiguration:\n      partition: 1\n",
        ),
    );
    assert!(!ok);
    assert!(
        out.contains("partition must be 0 when groupIdentity is Hash"),
        "{out}"
    );
    let (ok, out) = kubectl(
        s,
        &[
            "patch",
            "lws",
            "infer",
            "--type=merge",
            "-p",
            r#"{"spec":{"groupIdentity":"Ordinal"}}"#,
        ],
    );
    assert!(!ok);
    assert!(
        out.contains("spec.groupIdentity: Invalid value: \"Ordinal\": field is immutable"),
        "{out}"
    );
}
