//! StatefulSets and LeaderWorkerSets against a real apiserver with the
//! scheduler, every controller and hollow nodes (pods go Running and Ready at
//! once): ordinal names, partitions, scaling, LWS groups with their labels,
//! env and Services, status and conditions, `/scale`, rolling updates, group
//! recreation, deletion and gang scheduling.

mod common;

use common::{cluster, until};
use k8s_openapi::api::core::v1::Node;
use minik8s_api::registry;
use minik8s_client::{Client, DeleteParams, DynamicApi, ListParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

const LWS: &str = "leaderworkerset.x-k8s.io/v1";

fn api(client: &Client, api_version: &str, kind: &str) -> DynamicApi {
    client.dynamic(
        registry::by_kind(api_version, kind).unwrap(),
        Some("default"),
    )
}

/// Live (not terminating) objects by name.
async fn live(api: &DynamicApi, selector: &str) -> BTreeMap<String, Value> {
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o))
        .collect()
}

fn names(m: &BTreeMap<String, Value>) -> Vec<String> {
    m.keys().cloned().collect()
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_names_partitions_and_scales() {
    let (_server, client) = cluster("sts", 2).await;
    let sets = api(&client, "apps/v1", "StatefulSet");
    let pods = api(&client, "v1", "Pod");
    let revisions = api(&client, "apps/v1", "ControllerRevision");
    let template = |v: &str| {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "c", "image": "busybox", "env": [{"name": "V", "value": v}]}]}})
    };
    sets.create(
        &json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "ordinals": {"start": 1}, "template": template("1")}}),
    )
    .await
    .unwrap();
    let first = until("web-1..web-3 running in order", 20, || async {
        let p = live(&pods, "app=web").await;
        if names(&p) == ["web-1", "web-2", "web-3"] && p.values().all(running) {
            Ok(p)
        } else {
            Err(format!("{:?}", names(&p)))
        }
    })
    .await;
    // OrderedReady: each pod was created after the previous one was ready.
    let created = |n: &str| {
        first[n]["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(created("web-1") <= created("web-2") && created("web-2") <= created("web-3"));
    let p2 = &first["web-2"];
    assert_eq!(p2["spec"]["hostname"], "web-2");
    assert_eq!(p2["spec"]["subdomain"], "web");
    assert_eq!(
        p2["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
        "web-2"
    );
    assert_eq!(
        p2["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
        "2"
    );
    let rev1 = p2["metadata"]["labels"]["controller-revision-hash"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rev1.starts_with("web-"));

    // A template change with partition 1 (index 1 = web-2) updates web-3 and web-2 only.
    // Read-modify-write races the controller's status writes: retry as a client would.
    minik8s_client::retry_on_conflict(|| async {
        let mut s = sets.get("web").await?;
        s["spec"]["template"] = template("2");
        s["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}});
        sets.replace("web", &s).await
    })
    .await
    .unwrap();
    let updated = until("web-3 and web-2 updated, web-1 held back", 20, || async {
        let p = live(&pods, "app=web").await;
        let revs: Vec<String> = p
            .values()
            .map(|p| {
                p["metadata"]["labels"]["controller-revision-hash"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        let st = sets.get("web").await.unwrap()["status"].clone();
        if p.len() == 3
            && p.values().all(running)
            && revs[0] == rev1
            && revs[1] != rev1
            && revs[2] != rev1
            && st["updatedReplicas"] == 2
            && st["readyReplicas"] == 3
        {
            Ok(st)
        } else {
            Err(format!("{revs:?} {st}"))
        }
    })
    .await;
    assert_eq!(updated["currentRevision"], rev1.as_str());
    assert_ne!(updated["updateRevision"], rev1.as_str());
    assert_eq!(updated["currentReplicas"], 1);
    assert_eq!(live(&revisions, "app=web").await.len(), 2);

    // Scale down removes the highest ordinals; the status follows.
    sets.patch(
        "web",
        Some("scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 1}}),
    )
    .await
    .unwrap();
    until("only web-1 left", 20, || async {
        let p = live(&pods, "app=web").await;
        let st = sets.get("web").await.unwrap()["status"].clone();
        if names(&p) == ["web-1"] && st["replicas"] == 1 {
            Ok(())
        } else {
            Err(format!("{:?} {st}", names(&p)))
        }
    })
    .await;
}

fn lws_manifest(name: &str, replicas: i64, size: i64, extra: Value) -> Value {
    let mut m = json!({"apiVersion": LWS, "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
            "workerTemplate": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "w", "image": "busybox", "env": [{"name": "V", "value": "1"}]}]}}}}});
    json_patch::merge(&mut m, &extra);
    m
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

fn condition(lws: &Value, t: &str) -> String {
    lws["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

async fn running_pods(pods: &DynamicApi, selector: &str, want: &[&str]) -> BTreeMap<String, Value> {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    until(&format!("pods {want:?}"), 30, || async {
        let p = live(pods, selector).await;
        if names(&p) == want && p.values().all(running) {
            Ok(p)
        } else {
            Err(format!("{:?}", names(&p)))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lws_groups_services_status_and_scale() {
    let (server, client) = cluster("lws", 2).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let svcs = api(&client, "v1", "Service");
    let statefulsets = api(&client, "apps/v1", "StatefulSet");
    sets.create(&lws_manifest("demo", 2, 3, json!({})))
        .await
        .unwrap();
    let p = running_pods(
        &pods,
        "app=demo",
        &[
            "demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2",
        ],
    )
    .await;

    // Upstream's labels, annotations and env on every pod.
    let leader = &p["demo-1"];
    let worker = &p["demo-1-2"];
    let name_l = "leaderworkerset.sigs.k8s.io/name";
    assert_eq!(label(leader, name_l), "demo");
    assert_eq!(
        label(leader, "leaderworkerset.sigs.k8s.io/worker-index"),
        "0"
    );
    assert_eq!(
        label(worker, "leaderworkerset.sigs.k8s.io/worker-index"),
        "2"
    );
    assert_eq!(
        label(worker, "leaderworkerset.sigs.k8s.io/group-index"),
        "1"
    );
    let gk = label(leader, "leaderworkerset.sigs.k8s.io/group-key");
    assert_eq!(gk.len(), 40);
    assert_eq!(label(worker, "leaderworkerset.sigs.k8s.io/group-key"), gk);
    let hash = label(leader, "leaderworkerset.sigs.k8s.io/template-revision-hash");
    assert!(!hash.is_empty());
    assert_eq!(
        label(worker, "leaderworkerset.sigs.k8s.io/template-revision-hash"),
        hash
    );
    assert_eq!(
        worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"],
        "3"
    );
    assert_eq!(
        worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"],
        "demo-1"
    );
    assert_eq!(env(worker, "LWS_LEADER_ADDRESS"), "demo-1.demo.default");
    // Upstream v0.11's role label on the StatefulSets, as doc/lws.md selects them.
    let by_role = |role: &str| {
        let out = std::process::Command::new(minik8s_testkit::real_kubectl())
            .args(["--server", &server.url, "get", "sts", "-o", "name", "-l"])
            .arg(format!("leaderworkerset.sigs.k8s.io/role={role}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(by_role("leader"), "statefulset.apps/demo");
    assert_eq!(
        by_role("worker"),
        "statefulset.apps/demo-0\nstatefulset.apps/demo-1"
    );
    // ... and on the pods (doc/lws.md §1).
    let workers = common::kubectl_ok(
        &server.url,
        &[
            "get",
            "pods",
            "-o",
            "name",
            "-l",
            "leaderworkerset.sigs.k8s.io/role=worker",
        ],
    );
    assert_eq!(
        workers.split_whitespace().collect::<Vec<_>>(),
        [
            "pod/demo-0-1",
            "pod/demo-0-2",
            "pod/demo-1-1",
            "pod/demo-1-2"
        ]
    );
    assert_eq!(label(leader, "leaderworkerset.sigs.k8s.io/role"), "leader");
    assert_eq!(env(worker, "LWS_GROUP_SIZE"), "3");
    assert_eq!(env(worker, "LWS_WORKER_INDEX"), "2");
    assert_eq!(env(leader, "LWS_WORKER_INDEX"), "0");
    assert_eq!(
        worker["spec"]["containers"][0]["env"][3]["name"], "V",
        "LWS variables come first"
    );
    assert_eq!(worker["spec"]["hostname"], "demo-1-2");
    assert_eq!(worker["spec"]["subdomain"], "demo");
    let ws = statefulsets.get("demo-1").await.unwrap();
    assert_eq!(ws["metadata"]["ownerReferences"][0]["kind"], "Pod");
    assert_eq!(
        ws["metadata"]["ownerReferences"][0]["uid"],
        leader["metadata"]["uid"]
    );

    // One shared headless Service.
    let svc = svcs.get("demo").await.unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(svc["spec"]["selector"], json!({name_l: "demo"}));

    // Status, conditions and the scale subresource.
    let status = until("demo Available", 20, || async {
        let l = sets.get("demo").await.unwrap();
        if condition(&l, "Available") == "True" && l["status"]["readyReplicas"] == 2 {
            Ok(l)
        } else {
            Err(l["status"].to_string())
        }
    })
    .await;
    assert_eq!(status["status"]["updatedReplicas"], 2);
    assert_eq!(status["status"]["replicas"], 2);
    assert_eq!(condition(&status, "Progressing"), "False");
    let scale = sets.get_sub("demo", "scale").await.unwrap();
    assert_eq!(
        scale["status"]["selector"],
        "leaderworkerset.sigs.k8s.io/name=demo,leaderworkerset.sigs.k8s.io/worker-index=0"
    );

    // Scale 2 → 3 → 1: new groups get the next index; scale-down removes the highest.
    sets.patch(
        "demo",
        Some("scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    )
    .await
    .unwrap();
    running_pods(
        &pods,
        "app=demo",
        &[
            "demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2", "demo-2",
            "demo-2-1", "demo-2-2",
        ],
    )
    .await;
    sets.patch(
        "demo",
        Some("scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 1}}),
    )
    .await
    .unwrap();
    running_pods(&pods, "app=demo", &["demo-0", "demo-0-1", "demo-0-2"]).await;
    until("worker sets of removed groups collected", 20, || async {
        let s = live(&statefulsets, "leaderworkerset.sigs.k8s.io/name=demo").await;
        if names(&s) == ["demo", "demo-0"] {
            Ok(())
        } else {
            Err(format!("{:?}", names(&s)))
        }
    })
    .await;

    // A deleted worker pod recreates the whole group (RecreateGroupOnPodRestart).
    let before = pods.get("demo-0").await.unwrap()["metadata"]["uid"].clone();
    pods.delete("demo-0-2", &DeleteParams::default())
        .await
        .unwrap();
    until("group 0 recreated with a new leader", 30, || async {
        let p = live(&pods, "app=demo").await;
        let uid = p.get("demo-0").map(|l| l["metadata"]["uid"].clone());
        if uid.is_some() && uid != Some(before.clone()) && p.len() == 3 && p.values().all(running) {
            Ok(())
        } else {
            Err(format!("{:?}", names(&p)))
        }
    })
    .await;
    let events = api(&client, "v1", "Event")
        .list(&ListParams::default())
        .await
        .unwrap();
    let recreate = events["items"].as_array().unwrap().iter().any(|e| {
        e["reason"] == "RecreateGroup"
            && e["message"]
                == "Worker pod demo-0-2 failed, deleted leader pod demo-0 to recreate group 0"
    });
    assert!(recreate, "a RecreateGroup event");

    // UniquePerReplica: one Service per group, owned by its leader; leaders are their own subdomain.
    sets.create(&lws_manifest(
        "uniq",
        2,
        2,
        json!({"spec": {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}}}),
    ))
    .await
    .unwrap();
    let p = running_pods(
        &pods,
        "app=uniq",
        &["uniq-0", "uniq-0-1", "uniq-1", "uniq-1-1"],
    )
    .await;
    assert_eq!(p["uniq-1"]["spec"]["subdomain"], "uniq-1");
    assert_eq!(p["uniq-1-1"]["spec"]["subdomain"], "uniq-1");
    assert_eq!(
        env(&p["uniq-1-1"], "LWS_LEADER_ADDRESS"),
        "uniq-1.uniq-1.default"
    );
    let s = until("per-group services", 20, || async {
        let s = live(&svcs, "leaderworkerset.sigs.k8s.io/name=uniq").await;
        if names(&s) == ["uniq-0", "uniq-1"] {
            Ok(s)
        } else {
            Err(format!("{:?}", names(&s)))
        }
    })
    .await;
    assert_eq!(
        s["uniq-1"]["spec"]["selector"]["leaderworkerset.sigs.k8s.io/group-index"],
        "1"
    );
    assert_eq!(s["uniq-1"]["metadata"]["ownerReferences"][0]["kind"], "Pod");

    // Deleting the LWS takes everything with it.
    sets.delete("uniq", &DeleteParams::default()).await.unwrap();
    until("uniq's pods, sets and services collected", 30, || async {
        let left = live(&pods, "app=uniq").await.len()
            + live(&statefulsets, "leaderworkerset.sigs.k8s.io/name=uniq")
                .await
                .len()
            + live(&svcs, "leaderworkerset.sigs.k8s.io/name=uniq")
                .await
                .len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} objects left"))
        }
    })
    .await;
}

fn hash_of(p: &Value) -> String {
    label(p, "leaderworkerset.sigs.k8s.io/template-revision-hash").to_string()
}

async fn events_with(client: &Client, reason: &str) -> Vec<String> {
    let list = api(client, "v1", "Event")
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut evs: Vec<(String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| {
            (
                e["metadata"]["name"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    evs.sort();
    evs.into_iter().map(|(_, m)| m).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lws_rolling_update_goes_group_by_group_and_respects_the_partition() {
    let (_server, client) = cluster("roll", 2).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let statefulsets = api(&client, "apps/v1", "StatefulSet");
    let revisions = api(&client, "apps/v1", "ControllerRevision");
    let rollout = json!({"spec": {"rolloutStrategy": {"type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 1}}}});
    sets.create(&lws_manifest("roll", 3, 2, rollout))
        .await
        .unwrap();
    let all = [
        "roll-0", "roll-0-1", "roll-1", "roll-1-1", "roll-2", "roll-2-1",
    ];
    let before = running_pods(&pods, "app=roll", &all).await;
    let old_hash = hash_of(&before["roll-0"]);
    until("roll Available", 20, || async {
        let l = sets.get("roll").await.unwrap();
        if condition(&l, "Available") == "True" {
            Ok(())
        } else {
            Err(l["status"].to_string())
        }
    })
    .await;

    // Watch the leader set and the LWS while the worker env changes.
    let change_env = |v: &'static str| {
        let sets = sets.clone();
        async move {
            let patch = json!({"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
                {"name": "w", "image": "busybox", "env": [{"name": "V", "value": v}]}]}}}}});
            sets.patch("roll", None, "application/merge-patch+json", &patch)
                .await
                .unwrap();
        }
    };
    change_env("2").await;
    // Polled often: the surge and UpdateInProgress are passing states.
    let max_replicas = std::cell::Cell::new(0);
    let saw_updating = std::cell::Cell::new(false);
    let every = Duration::from_millis(30);
    let new_hash = minik8s_testkit::poll(40, every, "the rollout finishes", || async {
        let sts = statefulsets.get("roll").await.unwrap();
        let replicas = sts["spec"]["replicas"].as_i64().unwrap();
        max_replicas.set(max_replicas.get().max(replicas));
        let l = sets.get("roll").await.unwrap();
        saw_updating.set(saw_updating.get() || condition(&l, "UpdateInProgress") == "True");
        let p = live(&pods, "app=roll").await;
        let hashes: Vec<String> = p.values().map(hash_of).collect();
        if names(&p) == all
            && hashes.iter().all(|h| *h != old_hash)
            && p.values().all(running)
            && condition(&l, "Available") == "True"
        {
            return Ok(hashes[0].clone());
        }
        Err(format!("{hashes:?} {}", l["status"]))
    })
    .await;
    let (max_replicas, saw_updating) = (max_replicas.get(), saw_updating.get());
    assert_eq!(max_replicas, 4, "maxSurge 1 adds one surge group");
    assert!(saw_updating, "UpdateInProgress was True during the rollout");
    let l = sets.get("roll").await.unwrap();
    assert_eq!(condition(&l, "UpdateInProgress"), "False");
    assert_eq!(condition(&l, "Progressing"), "False");
    assert_eq!(l["status"]["updatedReplicas"], 3);
    assert_eq!(
        statefulsets.get("roll").await.unwrap()["spec"]["replicas"],
        3,
        "the surge is reclaimed"
    );
    // Group by group from the highest index.
    assert_eq!(
        events_with(&client, "GroupsUpdating")
            .await
            .iter()
            .filter(|m| m.starts_with("Updating replica"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "Updating replica 2",
            "Updating replica 1",
            "Updating replica 0"
        ]
    );
    until("old revisions pruned", 10, || async {
        let r = live(&revisions, "leaderworkerset.sigs.k8s.io/name=roll").await;
        let own: Vec<&Value> = r
            .values()
            .filter(|r| r["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet")
            .collect();
        if own.len() == 1 {
            Ok(())
        } else {
            Err(format!("{}", own.len()))
        }
    })
    .await;

    // partition 1 holds group 0 back.
    let patch =
        json!({"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 1}}}});
    sets.patch("roll", None, "application/merge-patch+json", &patch)
        .await
        .unwrap();
    change_env("3").await;
    let p = until("groups 1 and 2 updated, group 0 held back", 40, || async {
        let p = live(&pods, "app=roll").await;
        let l = sets.get("roll").await.unwrap();
        let updated = |n: &str| {
            p.get(n)
                .is_some_and(|x| hash_of(x) != new_hash && hash_of(x) != old_hash && running(x))
        };
        if updated("roll-1")
            && updated("roll-1-1")
            && updated("roll-2")
            && updated("roll-2-1")
            && condition(&l, "Available") == "True"
        {
            Ok(p)
        } else {
            Err(format!(
                "{:?} {}",
                p.values().map(hash_of).collect::<Vec<_>>(),
                l["status"]
            ))
        }
    })
    .await;
    assert_eq!(hash_of(&p["roll-0"]), new_hash);
    assert_eq!(hash_of(&p["roll-0-1"]), new_hash);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        hash_of(&pods.get("roll-0").await.unwrap()),
        new_hash,
        "group 0 stays held back"
    );
}

/// Two hollow nodes of 4 cpu hold one and a half groups of 4 × 1300m: with
/// gang scheduling exactly one group runs and the other has no bound pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_scheduling_binds_whole_groups_or_nothing() {
    let (_server, client) = cluster("gang", 2).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let mut m = lws_manifest(
        "gang",
        2,
        4,
        json!({"metadata": {"annotations": {"minik8s.io/gang-scheduling": "true"}}}),
    );
    m["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "1300m"}});
    sets.create(&m).await.unwrap();
    let bound_groups = until("one whole group bound, the other waiting", 30, || async {
        let p = live(&pods, "app=gang").await;
        let bound = |g: &str| {
            p.values()
                .filter(|x| {
                    label(x, "leaderworkerset.sigs.k8s.io/group-index") == g
                        && !x["spec"]["nodeName"].is_null()
                })
                .count()
        };
        let waiting = p
            .values()
            .filter(|x| {
                x["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "PodScheduled"
                            && c["status"] == "False"
                            && c["message"].as_str().unwrap_or("").starts_with("gang ")
                    })
                })
            })
            .count();
        let (b0, b1) = (bound("0"), bound("1"));
        if p.len() == 8 && ((b0 == 4 && b1 == 0) || (b0 == 0 && b1 == 4)) && waiting == 4 {
            Ok((b0, b1))
        } else {
            Err(format!(
                "{} pods, bound {b0}+{b1}, {waiting} waiting",
                p.len()
            ))
        }
    })
    .await;
    let waiting_group = if bound_groups.0 == 4 {
        "gang-1"
    } else {
        "gang-0"
    };
    let leader = pods.get(waiting_group).await.unwrap();
    let cond = leader["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .unwrap()
        .clone();
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("Insufficient cpu"),
        "{cond}"
    );
    // It stays that way: no partial group ever takes the free 2.6 cpu.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = live(&pods, "app=gang").await;
    assert_eq!(
        p.values()
            .filter(|x| !x["spec"]["nodeName"].is_null())
            .count(),
        4
    );
}

/// Exclusive placement: each group gets a topology domain of its own, its
/// workers follow the leader's domain, and a second LWS is not blocked by the
/// first one's domains (upstream bug lws#539).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_placement_is_one_group_per_domain_within_an_lws() {
    let (_server, client) = cluster("zone", 4).await;
    let nodes = client.dynamic(registry::of::<Node>(), None);
    for (node, zone) in [
        ("zone-0", "a"),
        ("zone-1", "a"),
        ("zone-2", "b"),
        ("zone-3", "b"),
    ] {
        nodes
            .patch(
                node,
                None,
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"zone": zone}}}),
            )
            .await
            .unwrap();
    }
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let node_zone = |n: &str| {
        if n == "zone-0" || n == "zone-1" {
            "a"
        } else {
            "b"
        }
    };
    let exclusive = json!({"metadata": {"annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": "zone"}}});
    sets.create(&lws_manifest("ex", 2, 3, exclusive.clone()))
        .await
        .unwrap();
    let p = running_pods(
        &pods,
        "app=ex",
        &["ex-0", "ex-0-1", "ex-0-2", "ex-1", "ex-1-1", "ex-1-2"],
    )
    .await;
    let zone_of = |n: &str| node_zone(p[n]["spec"]["nodeName"].as_str().unwrap()).to_string();
    assert_ne!(zone_of("ex-0"), zone_of("ex-1"), "one group per zone");
    for g in ["ex-0", "ex-1"] {
        for w in [format!("{g}-1"), format!("{g}-2")] {
            assert_eq!(zone_of(&w), zone_of(g), "{w} follows its leader");
            assert_eq!(p[&w]["spec"]["nodeSelector"]["zone"], zone_of(g).as_str());
        }
    }
    // A second exclusive LWS still finds room next to the first one's groups.
    sets.create(&lws_manifest("other", 1, 2, exclusive))
        .await
        .unwrap();
    running_pods(&pods, "app=other", &["other-0", "other-0-1"]).await;
}

/// Every LWS manifest in examples/ reaches replicas × size running pods; the
/// HPA of examples/lws-hpa.yaml reads the LWS through its scale subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lws_examples_reach_their_expected_pods() {
    use serde::Deserialize;
    let (_server, client) = cluster("ex", 2).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut expected = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("lws"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).unwrap();
            let (av, kind) = (
                v["apiVersion"].as_str().unwrap(),
                v["kind"].as_str().unwrap(),
            );
            api(&client, av, kind)
                .create(&v)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if kind == "LeaderWorkerSet" {
                let n = v["spec"]["replicas"].as_i64().unwrap()
                    * v["spec"]["leaderWorkerTemplate"]["size"].as_i64().unwrap();
                expected.push((
                    v["metadata"]["name"].as_str().unwrap().to_string(),
                    n as usize,
                ));
            }
        }
    }
    let pods = api(&client, "v1", "Pod");
    for (name, n) in expected {
        until(&format!("{name}: {n} running pods"), 30, || async {
            let p = live(&pods, &format!("leaderworkerset.sigs.k8s.io/name={name}")).await;
            if p.len() == n && p.values().all(running) {
                Ok(())
            } else {
                Err(format!("{:?}", names(&p)))
            }
        })
        .await;
    }
    let hpas = api(&client, "autoscaling/v2", "HorizontalPodAutoscaler");
    until("the HPA read the LWS's scale", 30, || async {
        let h = hpas.get("lws-hpa").await.unwrap();
        let able = h["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "AbleToScale"))
            .cloned();
        match able {
            Some(c) if c["status"] == "True" && h["status"]["currentReplicas"] == 1 => Ok(()),
            _ => Err(h["status"].to_string()),
        }
    })
    .await;
}
