//! Gang scheduling of LeaderWorkerSets the upstream ways, on hollow nodes
//! (4 cpu each) with the minik8s scheduler and no Volcano: the
//! Workload-style `spec.scheduling` shape (a gang per group, of the whole
//! LWS, of each group's workers) and manifests written for Volcano
//! (`schedulerName: volcano`, PodGroups `scheduling.volcano.sh/v1beta1`);
//! a gang with exclusive topology finds a zone that holds it whole.

mod common;

use common::{cluster, kubectl, kubectl_json, kubectl_ok, table_line, until};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

const LWS: &str = "leaderworkerset.x-k8s.io/v1";
const PG: &str = "scheduling.volcano.sh/v1beta1";

fn api(client: &Client, api_version: &str, kind: &str) -> DynamicApi {
    client.dynamic(
        registry::by_kind(api_version, kind).unwrap(),
        Some("default"),
    )
}

fn manifest(name: &str, replicas: i64, size: i64, cpu: &str, extra: Value) -> Value {
    let mut m = json!({"apiVersion": LWS, "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
            "workerTemplate": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "w", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}}}]}}}}});
    json_patch::merge(&mut m, &extra);
    m
}

async fn pods_of(pods: &DynamicApi, app: &str) -> BTreeMap<String, Value> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
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

fn group_of(p: &Value) -> &str {
    p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
        .as_str()
        .unwrap_or("")
}

/// Waits until exactly one of the two groups of `app` (4 pods each) is
/// bound and the other has no bound pod; returns the bound group's index.
async fn one_group_bound(pods: &DynamicApi, app: &str) -> String {
    let bound = until(&format!("{app}: one whole group bound"), 30, || async {
        let p = pods_of(pods, app).await;
        let count = |g: &str| {
            p.values()
                .filter(|x| group_of(x) == g && !x["spec"]["nodeName"].is_null())
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
        match (p.len(), count("0"), count("1"), waiting) {
            (8, 4, 0, 4) => Ok("0".to_string()),
            (8, 0, 4, 4) => Ok("1".to_string()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // It stays that way: no partial group ever takes the free capacity.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = pods_of(pods, app).await;
    assert_eq!(
        p.values()
            .filter(|x| !x["spec"]["nodeName"].is_null())
            .count(),
        4
    );
    bound
}

/// Capacity for one and a half groups (8 cpu; groups of 4 × 1.3 cpu).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_scheduling_gangs_bind_whole_groups_only() {
    let (server, client) = cluster("wl", 2).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let groups = api(&client, "scheduling.k8s.io/v1beta1", "PodGroup");
    sets.create(&manifest(
        "wl",
        2,
        4,
        "1300m",
        json!({"spec": {"scheduling": {}}}),
    ))
    .await
    .unwrap();
    let bound = one_group_bound(&pods, "wl").await;
    let waiting = if bound == "0" { "1" } else { "0" };
    // The Workload API: the LWS's Workload, one PodGroup per group made from
    // its template (minCount 4), PodGroupInitiallyScheduled True for the
    // bound group and False (Unschedulable, the scheduler's words) for the other.
    let workload = kubectl_json(&server.url, &["workloads.scheduling.k8s.io", "wl"]);
    assert_eq!(
        workload["spec"]["podGroupTemplates"],
        json!([{"name": "group", "schedulingPolicy": {"gang": {"minCount": 4}}}])
    );
    assert_eq!(
        workload["metadata"]["ownerReferences"][0]["kind"],
        "LeaderWorkerSet"
    );
    let pg = until("the groups' PodGroups", 20, || async {
        let l = groups.list(&ListParams::default()).await.unwrap();
        let items = l["items"].as_array().cloned().unwrap_or_default();
        let states: BTreeMap<String, (i64, String, String)> = items
            .iter()
            .map(|g| {
                let c = g["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| c["type"] == "PodGroupInitiallyScheduled")
                    })
                    .cloned()
                    .unwrap_or_default();
                (
                    g["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    (
                        g["spec"]["schedulingPolicy"]["gang"]["minCount"]
                            .as_i64()
                            .unwrap_or(0),
                        c["status"].as_str().unwrap_or("").to_string(),
                        c["reason"].as_str().unwrap_or("").to_string(),
                    ),
                )
            })
            .collect();
        if states.get(&bound) == Some(&(4, "True".into(), "Scheduled".into()))
            && states.get(waiting) == Some(&(4, "False".into(), "Unschedulable".into()))
        {
            Ok(items)
        } else {
            Err(format!("{states:?}"))
        }
    })
    .await;
    let leader = pods.get(&format!("wl-{bound}")).await.unwrap();
    let name = leader["spec"]["schedulingGroup"]["podGroupName"]
        .as_str()
        .unwrap()
        .to_string();
    let group = pg
        .iter()
        .find(|g| g["metadata"]["name"] == name.as_str())
        .unwrap();
    assert_eq!(
        group["spec"]["workloadRef"],
        json!({"workloadName": "wl", "templateName": "group"})
    );
    let other = pods.get(&format!("wl-{waiting}")).await.unwrap();
    let message = other["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or("")
        .to_string();
    assert!(
        message.contains("of 4 pods fit") && message.contains("Insufficient cpu"),
        "{message}"
    );
    let (ok, out) = kubectl(&server.url, &["get", "podgroups.scheduling.k8s.io"]);
    assert!(ok, "{out}");
    assert_eq!(table_line(&out, 0), ["NAME", "AGE"]);
    // A bad shape is refused with the field path.
    let bad = manifest(
        "bad",
        1,
        4,
        "1",
        json!({"spec": {"scheduling": {"replica": {"schedulingPolicy": {"gang": {"minCount": 2}}}}}}),
    );
    let e = sets.create(&bad).await.unwrap_err();
    assert_eq!(e.api().map(|a| a.code), Some(422), "{e}");
    assert!(
        e.to_string()
            .contains("spec.scheduling.replica.schedulingPolicy.gang.minCount"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_manifests_are_gang_scheduled_without_volcano() {
    let (_server, client) = cluster("vc", 2).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let groups = api(&client, PG, "PodGroup");
    let volcano = json!({"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "research",
            "volcano.sh/sla-waiting-time": "1h"}},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"schedulerName": "volcano"}}}}});
    sets.create(&manifest("vc", 2, 4, "1300m", volcano))
        .await
        .unwrap();
    let bound = one_group_bound(&pods, "vc").await;
    let leader = pods.get(&format!("vc-{bound}")).await.unwrap();
    let name = leader["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/template-revision-hash"]
        .as_str()
        .unwrap();
    assert_eq!(
        name,
        format!("vc-{bound}-{hash}"),
        "upstream's PodGroup name"
    );
    let pg = groups.get(&name).await.unwrap();
    assert_eq!(pg["spec"]["minMember"], 4);
    assert_eq!(pg["spec"]["queue"], "research");
    assert_eq!(pg["spec"]["minResources"]["cpu"], "5200m");
    assert_eq!(
        pg["metadata"]["annotations"]["volcano.sh/sla-waiting-time"],
        "1h"
    );
    assert_eq!(
        pg["metadata"]["ownerReferences"][0]["name"],
        format!("vc-{bound}")
    );
    // Deleting the LWS takes its PodGroups along (they go with their leaders).
    sets.delete("vc", &minik8s_client::DeleteParams::default())
        .await
        .unwrap();
    until("the LWS's PodGroups collected", 30, || async {
        let l = groups
            .list(&ListParams::default().labels("leaderworkerset.sigs.k8s.io/name=vc"))
            .await
            .unwrap();
        let n = l["items"].as_array().map_or(0, Vec::len);
        if n == 0 {
            Ok(())
        } else {
            Err(format!("{n} left"))
        }
    })
    .await;

    // A user's own PodGroup and pods, Volcano-style: nothing binds below minMember.
    groups
        .create(
            &json!({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "job"},
            "spec": {"minMember": 3}}),
        )
        .await
        .unwrap();
    for i in 0..2 {
        pods.create(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("job-{i}"), "labels": {"app": "job"},
                "annotations": {"scheduling.k8s.io/group-name": "job"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = pods_of(&pods, "job").await;
    assert!(
        p.values().all(|x| x["spec"]["nodeName"].is_null()),
        "2 of 3: none bound"
    );
    pods.create(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-2", "labels": {"app": "job"},
            "annotations": {"scheduling.k8s.io/group-name": "job"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}))
        .await
        .unwrap();
    until("the third member lets all three bind", 30, || async {
        let p = pods_of(&pods, "job").await;
        let bound = p
            .values()
            .filter(|x| !x["spec"]["nodeName"].is_null())
            .count();
        if bound == 3 {
            Ok(())
        } else {
            Err(format!("{bound} bound"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_lws_gangs_and_exclusive_topology_gangs() {
    let (_server, client) = cluster("tp", 4).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let groups = api(&client, "scheduling.k8s.io/v1beta1", "PodGroup");
    // The LWS level: one gang of replicas × size, resized with the LWS.
    sets.create(&manifest(
        "all",
        2,
        2,
        "100m",
        json!({"spec": {"scheduling": {"schedulingPolicy": {"gang": {}}}}}),
    ))
    .await
    .unwrap();
    until("all 4 pods of the LWS gang bound", 30, || async {
        let p = pods_of(&pods, "all").await;
        let bound = p
            .values()
            .filter(|x| !x["spec"]["nodeName"].is_null())
            .count();
        if p.len() == 4 && bound == 4 {
            Ok(())
        } else {
            Err(format!("{} pods, {bound} bound", p.len()))
        }
    })
    .await;
    // spec.scheduling's LWS level: a Workload API PodGroup of the whole LWS.
    assert_eq!(
        groups.get("all-lws").await.unwrap()["spec"]["schedulingPolicy"]["gang"]["minCount"],
        4
    );
    sets.patch(
        "all",
        None,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    )
    .await
    .unwrap();
    until("the LWS gang resized", 30, || async {
        let g = groups.get("all-lws").await.map_err(|e| e.to_string())?;
        let bound = pods_of(&pods, "all")
            .await
            .values()
            .filter(|x| !x["spec"]["nodeName"].is_null())
            .count();
        let min = &g["spec"]["schedulingPolicy"]["gang"]["minCount"];
        if min == 6 && bound == 6 {
            Ok(())
        } else {
            Err(format!("{min} / {bound}"))
        }
    })
    .await;

    // Exclusive topology with a gang: zone-a has 2 cpu left, zone-b is free;
    // a group of 4 × 1.3 cpu must land whole in zone-b.
    let nodes = client.dynamic(registry::by_kind("v1", "Node").unwrap(), None);
    let list = nodes.list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let zone = |i: usize| if i < 2 { "zone-a" } else { "zone-b" };
    for (i, n) in names.iter().enumerate() {
        nodes
            .patch(
                n,
                None,
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"zone": zone(i)}}}),
            )
            .await
            .unwrap();
    }
    for (i, n) in names.iter().take(2).enumerate() {
        pods.create(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("blocker-{i}"), "labels": {"app": "blocker"}},
            "spec": {"nodeName": n, "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "2800m"}}}]}}))
            .await
            .unwrap();
    }
    let exclusive = json!({"metadata": {"annotations": {"minik8s.io/gang-scheduling": "true",
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "zone"}}});
    sets.create(&manifest("ex", 2, 4, "1300m", exclusive))
        .await
        .unwrap();
    let zone_of: BTreeMap<&String, &str> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n, zone(i)))
        .collect();
    until(
        "group 0 whole in zone-b, group 1 waiting with nothing bound",
        30,
        || async {
            let p = pods_of(&pods, "ex").await;
            let placed: Vec<(String, String)> = p
                .values()
                .filter_map(|x| {
                    let node = x["spec"]["nodeName"].as_str()?;
                    let n = names.iter().find(|m| *m == node)?;
                    Some((group_of(x).to_string(), zone_of[n].to_string()))
                })
                .collect();
            let in_b = placed
                .iter()
                .filter(|(g, z)| z == "zone-b" && !g.is_empty())
                .count();
            let groups: std::collections::BTreeSet<&String> =
                placed.iter().map(|(g, _)| g).collect();
            if p.len() == 8 && placed.len() == 4 && in_b == 4 && groups.len() == 1 {
                Ok(())
            } else {
                Err(format!("{} pods, placed {placed:?}", p.len()))
            }
        },
    )
    .await;
}

/// `kubectl apply -f` of JSON objects (kubectl reads a JSON List).
fn apply(server: &str, name: &str, items: &[Value]) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("gang-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.json"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&file, list.to_string()).unwrap();
    kubectl(server, &["apply", "-f", file.to_str().unwrap()])
}

fn gang_pod(name: &str, group: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "train"}},
        "spec": {"schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}})
}

fn pod_group(name: &str, policy: Value, extra: Value) -> Value {
    let mut pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"workloadRef": {"workloadName": "train", "templateName": "workers"},
            "schedulingPolicy": policy}});
    json_patch::merge(&mut pg, &extra);
    pg
}

fn node_of(p: &Value) -> String {
    p["spec"]["nodeName"].as_str().unwrap_or("").to_string()
}

/// The Workload API as a Kubernetes 1.37 user writes it by hand: a
/// Workload, PodGroups made from its template, plain pods naming them in
/// `spec.schedulingGroup`. Capacity for one and a half gangs binds exactly
/// one; a pod waits for its PodGroup to exist; a topology constraint keeps a
/// gang in one zone; what minik8s does not serve is refused by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_api_gangs_plain_pods() {
    let (server, client) = cluster("wa", 2).await;
    let s = server.url.as_str();
    let pods = api(&client, "v1", "Pod");
    kubectl_ok(s, &["label", "node", "wa-0", "zone=a"]);
    kubectl_ok(s, &["label", "node", "wa-1", "zone=b"]);
    let workload = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
            "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}]}});
    let gang = json!({"gang": {"minCount": 4}});
    let mut objects = vec![
        workload,
        pod_group("train-0", gang.clone(), json!({})),
        pod_group("train-1", gang.clone(), json!({})),
    ];
    for i in 0..8 {
        objects.push(gang_pod(
            &format!("t{i}"),
            &format!("train-{}", i / 4),
            "1300m",
        ));
    }
    let (ok, out) = apply(s, "train", &objects);
    assert!(ok, "{out}");
    let bound = until("one whole gang bound", 30, || async {
        let p = pods_of(&pods, "train").await;
        let placed = |g: &str| {
            p.values()
                .filter(|x| {
                    x["spec"]["schedulingGroup"]["podGroupName"] == g && !node_of(x).is_empty()
                })
                .count()
        };
        match (placed("train-0"), placed("train-1")) {
            (4, 0) => Ok(("train-0", "train-1")),
            (0, 4) => Ok(("train-1", "train-0")),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (placed, waiting) = bound;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = pods_of(&pods, "train").await;
    assert_eq!(
        p.values().filter(|x| !node_of(x).is_empty()).count(),
        4,
        "no partial gang"
    );
    let held = p
        .values()
        .find(|x| x["spec"]["schedulingGroup"]["podGroupName"] == waiting)
        .unwrap();
    let scheduled = held["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .cloned()
        .unwrap();
    assert_eq!(scheduled["reason"], "Unschedulable");
    let message = scheduled["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("gang {waiting}: ")) && message.contains("Insufficient cpu"),
        "{message}"
    );
    let group = kubectl_json(s, &["podgroups.scheduling.k8s.io", placed]);
    let c = &group["status"]["conditions"][0];
    assert_eq!(
        (c["type"].as_str(), c["status"].as_str()),
        (Some("PodGroupInitiallyScheduled"), Some("True"))
    );
    let other = kubectl_json(s, &["podgroups.scheduling.k8s.io", waiting]);
    assert_eq!(other["status"]["conditions"][0]["reason"], "Unschedulable");
    let out = kubectl_ok(s, &["get", "workloads"]);
    assert_eq!(table_line(&out, 1)[0], "train", "{out}");
    kubectl_ok(s, &["delete", "pods", "-l", "app=train", "--wait=false"]);
    until("the gangs gone", 30, || async {
        let n = pods_of(&pods, "train").await.len();
        if n == 0 {
            Ok(())
        } else {
            Err(format!("{n}"))
        }
    })
    .await;

    // A pod whose PodGroup does not exist yet waits for it.
    let (ok, out) = apply(s, "late", &[gang_pod("late-0", "late", "100m")]);
    assert!(ok, "{out}");
    until("late-0 waiting for its group", 20, || async {
        let p = pods.get("late-0").await.unwrap();
        let m = p["status"]["conditions"].to_string();
        if m.contains("pod group late not found") {
            Ok(())
        } else {
            Err(m)
        }
    })
    .await;
    let (ok, out) = apply(
        s,
        "late-group",
        &[pod_group(
            "late",
            json!({"basic": {}}),
            json!({"metadata": {"name": "late"}}),
        )],
    );
    assert!(ok, "{out}");
    until("late-0 scheduled once its group exists", 20, || async {
        let p = pods.get("late-0").await.unwrap();
        if node_of(&p).is_empty() {
            Err("pending".to_string())
        } else {
            Ok(())
        }
    })
    .await;

    // One zone holds a gang with a topology constraint whole.
    let zoned = pod_group(
        "zoned",
        gang.clone(),
        json!({"spec": {"schedulingConstraints": {"topology": [{"key": "zone"}]}}}),
    );
    let mut objects = vec![zoned];
    for i in 0..4 {
        objects.push(gang_pod(&format!("z{i}"), "zoned", "100m"));
    }
    let (ok, out) = apply(s, "zoned", &objects);
    assert!(ok, "{out}");
    let nodes = until("the zoned gang placed", 30, || async {
        let mut nodes = Vec::new();
        for i in 0..4 {
            let n = node_of(&pods.get(&format!("z{i}")).await.unwrap());
            if n.is_empty() {
                return Err(format!("z{i} pending"));
            }
            nodes.push(n);
        }
        Ok(nodes)
    })
    .await;
    assert!(
        nodes.iter().all(|n| n == &nodes[0]),
        "one zone (one node each here): {nodes:?}"
    );

    // Bad input: refused by field, nothing half made.
    let (ok, out) = apply(
        s,
        "bad-group",
        &[pod_group(
            "bad",
            gang.clone(),
            json!({"spec": {"priorityClassName": "high"}}),
        )],
    );
    assert!(!ok);
    assert!(
        out.contains(
            "spec.priorityClassName: Forbidden: pod group priority is not supported by minik8s"
        ),
        "{out}"
    );
    let (ok, out) = apply(
        s,
        "bad-gang",
        &[pod_group(
            "bad",
            json!({"gang": {"minCount": 0}}),
            json!({}),
        )],
    );
    assert!(!ok);
    assert!(out.contains("spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1"), "{out}");
    let (ok, out) = apply(s, "bad-pod", &[gang_pod("bad-pod", "Not_A_Name", "100m")]);
    assert!(!ok);
    assert!(
        out.contains("spec.schedulingGroup.podGroupName: Invalid value: \"Not_A_Name\""),
        "{out}"
    );
    let (ok, out) = kubectl(
        s,
        &[
            "patch",
            "podgroups.scheduling.k8s.io",
            "zoned",
            "--type=merge",
            "-p",
            r#"{"spec":{"schedulingPolicy":{"gang":null,"basic":{}}}}"#,
        ],
    );
    assert!(!ok);
    assert!(out.contains("field is immutable"), "{out}");
    let (ok, out) = kubectl(s, &["get", "podgroups.scheduling.k8s.io", "bad"]);
    assert!(!ok && out.contains("NotFound"), "{out}");
}
