//! Gang scheduling of LeaderWorkerSets the upstream ways, on hollow nodes
//! (4 cpu each) with the minik8s scheduler and no Volcano: the
//! Workload-style `spec.scheduling` shape (a gang per group, of the whole
//! LWS, of each group's workers) and manifests written for Volcano
//! (`schedulerName: volcano`, PodGroups `scheduling.volcano.sh/v1beta1`);
//! a gang with exclusive topology finds a zone that holds it whole.

mod common;

use common::{cluster, kubectl, table_line, until};
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
    let groups = api(&client, PG, "PodGroup");
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
    // One PodGroup per group (minMember 4): Running for the bound group, Pending for the other.
    let pg = until("the groups' PodGroups", 20, || async {
        let l = groups.list(&ListParams::default()).await.unwrap();
        let items = l["items"].as_array().cloned().unwrap_or_default();
        let phases: BTreeMap<String, (i64, String)> = items
            .iter()
            .map(|g| {
                (
                    g["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    (
                        g["spec"]["minMember"].as_i64().unwrap_or(0),
                        g["status"]["phase"].as_str().unwrap_or("").to_string(),
                    ),
                )
            })
            .collect();
        if phases.get(&bound) == Some(&(4, "Running".into()))
            && phases.get(waiting) == Some(&(4, "Pending".into()))
        {
            Ok(items)
        } else {
            Err(format!("{phases:?}"))
        }
    })
    .await;
    let leader = pods.get(&format!("wl-{bound}")).await.unwrap();
    let name = leader["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        pg.iter().any(|g| g["metadata"]["name"] == name.as_str()),
        "{name}"
    );
    let (ok, out) = kubectl(&server.url, &["get", "podgroups"]);
    assert!(ok, "{out}");
    assert_eq!(
        table_line(&out, 0),
        ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"]
    );
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
    let groups = api(&client, PG, "PodGroup");
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
    assert_eq!(groups.get("all-lws").await.unwrap()["spec"]["minMember"], 4);
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
        if g["spec"]["minMember"] == 6 && bound == 6 {
            Ok(())
        } else {
            Err(format!("{} / {bound}", g["spec"]["minMember"]))
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
