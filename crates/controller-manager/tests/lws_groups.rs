//! Per-group status and failure of LeaderWorkerSets (KEP-820 and beyond) on
//! hollow nodes, with the real kubectl where a user looks: every group's
//! state in `status.groupStatuses` and `kubectl describe lws`; a group whose
//! pods keep failing is recreated until `minik8s.io/max-group-restarts`, then
//! marked Failed (the `Failed` condition names it, its pods stay, it is not
//! counted ready); `recover=true` on its leader or a scale-down brings it
//! back with a fresh budget; a group backing off shows `Restarting`.

mod common;

use common::{cluster_with_metrics, events_about, kubectl, until};
use minik8s_api::registry;
use minik8s_client::{Client, DeleteParams, DynamicApi};
use serde_json::{json, Value};

const LWS: &str = "leaderworkerset.x-k8s.io/v1";

fn api(client: &Client, api_version: &str, kind: &str) -> DynamicApi {
    client.dynamic(
        registry::by_kind(api_version, kind).unwrap(),
        Some("default"),
    )
}

fn manifest(name: &str, replicas: i64, annotations: Value) -> Value {
    json!({"apiVersion": LWS, "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2,
            "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "busybox"}]}}}}})
}

/// (index, state) of every group in the status.
fn states(l: &Value) -> Vec<(i64, String)> {
    l["status"]["groupStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|g| {
            (
                g["index"].as_i64().unwrap_or(-1),
                g["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn failed(l: &Value) -> (String, String) {
    l["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Failed"))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

async fn wait_states(sets: &DynamicApi, name: &str, want: &[(i64, &str)], ready: i64) -> Value {
    let want: Vec<(i64, String)> = want.iter().map(|(i, s)| (*i, s.to_string())).collect();
    until(&format!("{name}: {want:?}, {ready} ready"), 30, || async {
        let l = sets.get(name).await.map_err(|e| e.to_string())?;
        if states(&l) == want && l["status"]["readyReplicas"] == ready {
            Ok(l)
        } else {
            Err(format!(
                "{:?} ready {}",
                states(&l),
                l["status"]["readyReplicas"]
            ))
        }
    })
    .await
}

async fn uid(pods: &DynamicApi, name: &str) -> String {
    pods.get(name).await.map_or(String::new(), |p| {
        p["metadata"]["uid"].as_str().unwrap_or("").to_string()
    })
}

/// Deletes worker `<lws>-<i>-1` and waits until the group was recreated
/// (a new leader) or, when `recreated` is false, until the worker is back.
async fn fail_group(pods: &DynamicApi, lws: &str, i: i64, recreated: bool) {
    let leader = format!("{lws}-{i}");
    let worker = format!("{lws}-{i}-1");
    let (before, worker_before) = (uid(pods, &leader).await, uid(pods, &worker).await);
    pods.delete(&worker, &DeleteParams::default())
        .await
        .unwrap();
    until(
        &format!("{worker} deleted and its group handled"),
        30,
        || async {
            let (l, w) = (uid(pods, &leader).await, uid(pods, &worker).await);
            let done = if recreated {
                !l.is_empty() && l != before
            } else {
                l == before && !w.is_empty() && w != worker_before
            };
            let running = pods
                .get(&worker)
                .await
                .is_ok_and(|p| p["status"]["phase"] == "Running");
            if done && running {
                Ok(())
            } else {
                Err(format!("leader {l} worker {w}"))
            }
        },
    )
    .await;
}

/// The events about the object named `name` in `default`.
async fn reasons(client: &Client, name: &str) -> Vec<(String, String)> {
    events_about(client, "default", &format!("involvedObject.name={name}")).await
}

/// Waits for an event about `name` with `reason` whose message `wanted`
/// accepts. The controller writes the status first and its events after
/// (as upstream's does), so an event may land just after the state it
/// reports.
async fn wait_event(client: &Client, name: &str, reason: &str, wanted: impl Fn(&str) -> bool) {
    let wanted = &wanted;
    until(
        &format!("a {reason} event about {name}"),
        30,
        || async move {
            let events = reasons(client, name).await;
            if events.iter().any(|(r, m)| r == reason && wanted(m)) {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_groups_are_marked_failed_recovered_and_scaled_away_first() {
    let (server, client, cm_metrics) = cluster_with_metrics("grp", 2, 0).await;
    let sets = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let limits =
        json!({"minik8s.io/group-restart-backoff": "0s", "minik8s.io/max-group-restarts": "1"});
    sets.create(&manifest("fail", 3, limits)).await.unwrap();
    wait_states(
        &sets,
        "fail",
        &[(0, "Ready"), (1, "Ready"), (2, "Ready")],
        3,
    )
    .await;
    wait_event(&client, "fail", "GroupReady", |m| m == "Group 2 is ready").await;

    // One recreation is allowed; the next failure marks group 1 Failed.
    fail_group(&pods, "fail", 1, true).await;
    let l = wait_states(
        &sets,
        "fail",
        &[(0, "Ready"), (1, "Ready"), (2, "Ready")],
        3,
    )
    .await;
    assert_eq!(l["status"]["groupStatuses"][1]["restarts"], 1);
    assert!(l["status"]["groupStatuses"][1]["lastRestartTime"].is_string());
    let leader = uid(&pods, "fail-1").await;
    fail_group(&pods, "fail", 1, false).await;
    let l = wait_states(
        &sets,
        "fail",
        &[(0, "Ready"), (1, "Failed"), (2, "Ready")],
        2,
    )
    .await;
    assert_eq!(
        failed(&l),
        (
            "True".into(),
            "Group 1 exceeded minik8s.io/max-group-restarts and no longer recreated".into()
        )
    );
    assert_eq!(
        uid(&pods, "fail-1").await,
        leader,
        "a failed group's pods are kept"
    );
    wait_event(&client, "fail", "GroupFailed", |m| {
        m.starts_with("Group 1 failed after 1 restarts")
    })
    .await;
    let metrics = cm_metrics.render();
    for line in [
        "lws_groups{namespace=\"default\",leaderworkerset=\"fail\",state=\"Failed\"} 1",
        "lws_groups{namespace=\"default\",leaderworkerset=\"fail\",state=\"Ready\"} 2",
        "lws_group_restarts_total{namespace=\"default\",leaderworkerset=\"fail\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let (ok, out) = kubectl(&server.url, &["describe", "lws", "fail"]);
    assert!(ok, "{out}");
    for want in [
        "Group Statuses:",
        "State:",
        "Failed",
        "MaxGroupRestartsExceeded",
        "GroupFailed",
    ] {
        assert!(out.contains(want), "{want} in:\n{out}");
    }

    // recover=true on the failed group's leader: recreated with a fresh budget.
    let (ok, out) = kubectl(
        &server.url,
        &[
            "annotate",
            "pod",
            "fail-1",
            "leaderworkerset.sigs.k8s.io/recover=true",
        ],
    );
    assert!(ok, "{out}");
    // The group is recreated (its history goes first, then its leader: the
    // status may show the old pods Ready in between), then comes back Ready.
    until("fail-1 recreated", 30, || async {
        let now = uid(&pods, "fail-1").await;
        if !now.is_empty() && now != leader {
            Ok(())
        } else {
            Err(format!("leader {now}"))
        }
    })
    .await;
    let l = wait_states(
        &sets,
        "fail",
        &[(0, "Ready"), (1, "Ready"), (2, "Ready")],
        3,
    )
    .await;
    assert_eq!(failed(&l).0, "False");
    assert!(
        l["status"]["groupStatuses"][1].get("restarts").is_none(),
        "a fresh budget"
    );
    wait_event(&client, "fail", "GroupRecovered", |_| true).await;

    // A scale-down takes failed groups out first: group 0 fails, and going
    // from 3 to 2 groups recreates it fresh while group 2 is removed.
    fail_group(&pods, "fail", 0, true).await;
    fail_group(&pods, "fail", 0, false).await;
    wait_states(
        &sets,
        "fail",
        &[(0, "Failed"), (1, "Ready"), (2, "Ready")],
        2,
    )
    .await;
    let failed_leader = uid(&pods, "fail-0").await;
    let (ok, out) = kubectl(&server.url, &["scale", "lws", "fail", "--replicas=2"]);
    assert!(ok, "{out}");
    let l = wait_states(&sets, "fail", &[(0, "Ready"), (1, "Ready")], 2).await;
    assert_eq!(failed(&l).0, "False");
    assert_ne!(uid(&pods, "fail-0").await, failed_leader);
    wait_event(&client, "fail", "GroupReplaced", |m| {
        m == "Scale-down: failed group 0 recreated with a fresh restart budget; groups from 2 up are removed"
    })
    .await;

    // A failed group scaled away leaves no history behind: back at 3, group 2 is fresh.
    fail_group(&pods, "fail", 1, true).await;
    fail_group(&pods, "fail", 1, false).await;
    wait_states(&sets, "fail", &[(0, "Ready"), (1, "Failed")], 1).await;
    let (ok, out) = kubectl(&server.url, &["scale", "lws", "fail", "--replicas=1"]);
    assert!(ok, "{out}");
    wait_states(&sets, "fail", &[(0, "Ready")], 1).await;
    let (ok, out) = kubectl(&server.url, &["scale", "lws", "fail", "--replicas=2"]);
    assert!(ok, "{out}");
    let l = wait_states(&sets, "fail", &[(0, "Ready"), (1, "Ready")], 2).await;
    assert_eq!(failed(&l).0, "False");

    // A group backing off shows Restarting and when it will be recreated.
    let slow = json!({"minik8s.io/group-restart-backoff": "60s"});
    sets.create(&manifest("slow", 1, slow)).await.unwrap();
    wait_states(&sets, "slow", &[(0, "Ready")], 1).await;
    fail_group(&pods, "slow", 0, true).await;
    fail_group(&pods, "slow", 0, false).await;
    let l = wait_states(&sets, "slow", &[(0, "Restarting")], 1).await;
    let g = &l["status"]["groupStatuses"][0];
    let next =
        chrono::DateTime::parse_from_rfc3339(g["nextRestartTime"].as_str().unwrap()).unwrap();
    let last =
        chrono::DateTime::parse_from_rfc3339(g["lastRestartTime"].as_str().unwrap()).unwrap();
    assert_eq!((next - last).num_seconds(), 60, "{g}");
    assert!(
        g["message"]
            .as_str()
            .unwrap()
            .starts_with("backing off: recreated at "),
        "{g}"
    );
    wait_event(&client, "slow", "GroupRestarting", |m| {
        m.starts_with("Group 0 failed; backing off")
    })
    .await;
}
