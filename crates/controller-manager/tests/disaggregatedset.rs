//! DisaggregatedSets against a real apiserver with the scheduler, every
//! controller and hollow nodes (pods go Running and Ready at once), driven
//! with the real kubectl where a user would type it: upstream's sample comes
//! up with upstream's names, rolls an image change across both roles in
//! lockstep without losing a ready group, changes slices, and goes away with
//! its children; External roles are scaled through their role scaler; slices
//! are placed one per zone; bad sets get 422 with the field path.

mod common;

use common::{cluster, cluster_with_metrics, events_about, kubectl, table_line, until};
use minik8s_api::registry;
use minik8s_client::{Client, DeleteParams, DynamicApi, ListParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const DS: &str = "disaggregatedset.x-k8s.io/v1";
const LWS: &str = "leaderworkerset.x-k8s.io/v1";
const NAME: &str = "disaggregatedset.x-k8s.io/name";

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
        .map(|l| l["items"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o))
        .collect()
}

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn label<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"]["labels"][k].as_str().unwrap_or("")
}

fn ready_pod(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn condition(o: &Value, t: &str) -> String {
    o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Waits until the set is Available with `want` (replicas, ready, updated) per role.
async fn available(sets: &DynamicApi, name: &str, want: &[(&str, i64)]) -> Value {
    until(&format!("{name} Available with {want:?}"), 60, || async {
        let d = sets.get(name).await.map_err(|e| e.to_string())?;
        let roles: Vec<(String, i64, i64, i64)> = d["status"]["roleStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let n = |k: &str| r[k].as_i64().unwrap_or(0);
                (
                    r["name"].as_str().unwrap_or("").to_string(),
                    n("replicas"),
                    n("readyReplicas"),
                    n("updatedReplicas"),
                )
            })
            .collect();
        let expected: Vec<(String, i64, i64, i64)> = want
            .iter()
            .map(|(r, n)| (r.to_string(), *n, *n, *n))
            .collect();
        if roles == expected && condition(&d, "Available") == "True" {
            Ok(d)
        } else {
            Err(format!("{roles:?} {}", d["status"]["conditions"]))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_comes_up_rolls_in_lockstep_changes_slices_and_goes() {
    let (server, client, cm_metrics) = cluster_with_metrics("dss", 3, 0).await;
    let (ok, out) = kubectl(
        &server.url,
        &["apply", "-f", &example("disaggregatedset.yaml")],
    );
    assert!(ok, "{out}");
    let sets = api(&client, DS, "DisaggregatedSet");
    let lws = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    let services = api(&client, "v1", "Service");
    let set = "disaggregatedset-sample";
    let selector = format!("{NAME}={set}");
    let first = available(&sets, set, &[("prefill", 4), ("decode", 4)]).await;
    assert_eq!(
        first["status"]["observedGeneration"],
        first["metadata"]["generation"]
    );
    assert_eq!(condition(&first, "Progressing"), "False");

    // Upstream's names, labels and owners.
    let children = live(&lws, &selector).await;
    let rev = label(
        children.values().next().unwrap(),
        "disaggregatedset.x-k8s.io/revision",
    )
    .to_string();
    assert!(
        rev.len() == 8 && rev.chars().all(|c| c.is_ascii_hexdigit()),
        "{rev}"
    );
    let expected: Vec<String> = [
        "0-{r}-decode",
        "0-{r}-prefill",
        "1-{r}-decode",
        "1-{r}-prefill",
    ]
    .iter()
    .map(|s| format!("{set}-{}", s.replace("{r}", &rev)))
    .collect();
    assert_eq!(children.keys().cloned().collect::<Vec<_>>(), expected);
    let one = &children[&format!("{set}-1-{rev}-decode")];
    assert_eq!(label(one, "app"), format!("{set}-1-decode"));
    assert_eq!(label(one, "disaggregatedset.x-k8s.io/slice"), "1");
    assert_eq!(label(one, "disaggregatedset.x-k8s.io/role"), "decode");
    assert_eq!(one["spec"]["replicas"], 2);
    let owner = &one["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["controller"]),
        (&json!("DisaggregatedSet"), &json!(set), &json!(true))
    );
    let running = live(&pods, &selector).await;
    assert_eq!(running.len(), 8, "{:?}", running.keys());
    assert!(running.contains_key(&format!("{set}-0-{rev}-prefill-1")));
    let p = &running[&format!("{set}-0-{rev}-prefill-1")];
    assert_eq!(label(p, "role"), "prefill", "template labels reach pods");
    assert_eq!(label(p, "app"), format!("{set}-0-prefill"));
    let prv = until("4 -prv Services", 30, || async {
        let s = live(&services, &selector).await;
        if s.len() == 4 {
            Ok(s)
        } else {
            Err(format!("{:?}", s.keys()))
        }
    })
    .await;
    let svc = &prv[&format!("{set}-0-{rev}-prefill-prv")];
    assert_eq!(svc["spec"]["clusterIP"], "None");
    // Its EndpointSlice: the slice's two prefill pods, ready, no ports.
    let slices = api(&client, "discovery.k8s.io/v1", "EndpointSlice");
    until("the -prv Service's EndpointSlice", 30, || async {
        let l = live(
            &slices,
            &format!("kubernetes.io/service-name={set}-0-{rev}-prefill-prv"),
        )
        .await;
        let eps: Vec<Value> = l
            .values()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .collect();
        let ready = eps
            .iter()
            .filter(|e| e["conditions"]["ready"] == true)
            .count();
        let portless = l
            .values()
            .all(|s| s["ports"].as_array().is_none_or(|p| p.is_empty()));
        if ready == 2 && portless {
            Ok(())
        } else {
            Err(format!("{l:?}"))
        }
    })
    .await;
    assert!(svc["spec"]["ports"].is_null());
    assert_eq!(
        svc["spec"]["selector"]["disaggregatedset.x-k8s.io/slice"],
        "0"
    );
    // kubectl: no printer columns (NAME, AGE); describe shows the status.
    let (ok, out) = kubectl(&server.url, &["get", "disaggregatedsets"]);
    assert!(ok, "{out}");
    assert_eq!(table_line(&out, 0), ["NAME", "AGE"]);
    assert_eq!(table_line(&out, 1)[0], set);
    // doc/lws.md §11: the set's LWS by its label.
    let (ok, out) = kubectl(&server.url, &["get", "lws", "-l", &selector]);
    assert!(ok, "{out}");
    assert_eq!(
        table_line(&out, 0),
        ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AGE"]
    );
    assert_eq!(out.lines().count(), 5, "{out}");

    // An image change rolls both roles of each slice in lockstep; at no time
    // does a role of a slice have fewer than 2 ready groups (maxUnavailable 0).
    let watching = Arc::new(AtomicBool::new(true));
    let low = {
        let (pods, watching, selector) = (pods.clone(), watching.clone(), selector.clone());
        tokio::spawn(async move {
            let mut low = Vec::new();
            while watching.load(Ordering::Relaxed) {
                let mut ready: BTreeMap<(String, String), usize> = BTreeMap::new();
                for p in live(&pods, &selector)
                    .await
                    .values()
                    .filter(|p| ready_pod(p))
                {
                    let key = (
                        label(p, "disaggregatedset.x-k8s.io/slice").to_string(),
                        label(p, "disaggregatedset.x-k8s.io/role").to_string(),
                    );
                    *ready.entry(key).or_default() += 1;
                }
                for s in ["0", "1"] {
                    for r in ["prefill", "decode"] {
                        let n = ready.get(&(s.into(), r.into())).copied().unwrap_or(0);
                        if n < 2 {
                            low.push(format!("slice {s} {r}: {n} ready"));
                        }
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            }
            low
        })
    };
    let (ok, out) = kubectl(
        &server.url,
        &[
            "patch",
            "disaggregatedset",
            set,
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/roles/0/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/command","value":["sh","-c","echo v2; exec sleep 3600"]}]"#,
        ],
    );
    assert!(ok, "{out}");
    until("the rollout to a new revision ends", 90, || async {
        let l = live(&lws, &selector).await;
        let revs: Vec<&str> = l
            .values()
            .map(|o| label(o, "disaggregatedset.x-k8s.io/revision"))
            .collect();
        if l.len() == 4 && revs.iter().all(|r| *r != rev) {
            Ok(())
        } else {
            Err(format!("{:?}", l.keys()))
        }
    })
    .await;
    let done = available(&sets, set, &[("prefill", 4), ("decode", 4)]).await;
    watching.store(false, Ordering::Relaxed);
    let low = low.await.unwrap();
    assert!(low.is_empty(), "a role lost ready groups: {low:?}");
    assert_eq!(done["metadata"]["generation"], 2);
    let new_rev = label(
        live(&lws, &selector).await.values().next().unwrap(),
        "disaggregatedset.x-k8s.io/revision",
    )
    .to_string();
    // The planner's (2,2) trace per slice and role, in its events (written
    // after the status they follow, so waited for).
    let mut expected = vec![(
        "RollingUpdateStarted",
        format!("Started rolling update to revision {new_rev}"),
    )];
    for s in 0..2 {
        for r in ["prefill", "decode"] {
            let old = format!("{set}-{s}-{rev}-{r}");
            let new = format!("{set}-{s}-{new_rev}-{r}");
            expected.extend([
                (
                    "ScalingUp",
                    format!("Scaling up {r} LWS {new} from 0 to 1 replicas"),
                ),
                (
                    "ScalingDown",
                    format!("Scaling down {r} LWS {old} from 2 to 1 replicas"),
                ),
                (
                    "ScalingUp",
                    format!("Scaling up {r} LWS {new} from 1 to 2 replicas"),
                ),
                (
                    "ScalingDown",
                    format!("Scaling down {r} LWS {old} from 1 to 0 replicas"),
                ),
                ("LWSDeleted", format!("Deleted drained LWS {old}")),
            ]);
        }
    }
    until("the rolling update's events", 30, || async {
        let ev = events_about(&client, "default", &format!("involvedObject.name={set}")).await;
        let missing: Vec<_> = expected
            .iter()
            .filter(|(reason, msg)| !ev.iter().any(|(r, m)| r == reason && m == msg))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("{missing:?} not in {ev:?}"))
        }
    })
    .await;
    // /metrics: the roles, no rollout running, the rollout's steps, reconcile times.
    let metrics = cm_metrics.render();
    for line in [
        format!("disaggregatedset_role_groups{{namespace=\"default\",disaggregatedset=\"{set}\",role=\"prefill\",kind=\"ready\"}} 4"),
        format!("disaggregatedset_rolling_update{{namespace=\"default\",disaggregatedset=\"{set}\"}} 0"),
        // Per slice and role: up 0→1, 1→2 and down 2→1, 1→0, each once.
        format!("disaggregatedset_rollout_steps_total{{namespace=\"default\",disaggregatedset=\"{set}\",direction=\"up\"}} 8"),
        format!("disaggregatedset_rollout_steps_total{{namespace=\"default\",disaggregatedset=\"{set}\",direction=\"down\"}} 8"),
        "workload_reconcile_duration_seconds_count{controller=\"disaggregatedset\"}".to_string(),
    ] {
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    until("old -prv Services gone, new ones made", 30, || async {
        let s = live(&services, &selector).await;
        if s.len() == 4 && s.keys().all(|n| n.contains(&new_rev)) {
            Ok(())
        } else {
            Err(format!("{:?}", s.keys()))
        }
    })
    .await;

    // slices 2 → 1: slice 1 goes, slice 0 stays as it is.
    let (ok, out) = kubectl(
        &server.url,
        &[
            "patch",
            "disaggregatedset",
            set,
            "--type=merge",
            "-p",
            r#"{"spec":{"slices":1}}"#,
        ],
    );
    assert!(ok, "{out}");
    available(&sets, set, &[("prefill", 2), ("decode", 2)]).await;
    until("slice 1 removed", 30, || async {
        let l = live(&lws, &selector).await;
        let s = live(&services, &selector).await;
        if l.len() == 2
            && s.len() == 2
            && l.keys()
                .chain(s.keys())
                .all(|n| n.starts_with(&format!("{set}-0-")))
        {
            Ok(())
        } else {
            Err(format!("{:?} {:?}", l.keys(), s.keys()))
        }
    })
    .await;
    has_event(
        &client,
        set,
        "LWSDeleted",
        &format!("Deleted LWS {set}-1-{new_rev}-prefill for removed slice 1"),
    )
    .await;

    // Deletion: the garbage collector takes the LWS, Services and pods.
    sets.delete(set, &DeleteParams::default()).await.unwrap();
    until("every child gone", 60, || async {
        let (l, s, p) = (
            live(&lws, &selector).await,
            live(&services, &selector).await,
            live(&pods, &selector).await,
        );
        if l.is_empty() && s.is_empty() && p.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} lws, {} services, {} pods",
                l.len(),
                s.len(),
                p.len()
            ))
        }
    })
    .await;
}

async fn has_event(client: &Client, name: &str, reason: &str, msg: &str) {
    until(&format!("event {reason} {msg}"), 20, || async {
        let ev = events_about(client, "default", &format!("involvedObject.name={name}")).await;
        if ev.iter().any(|(r, m)| r == reason && m == msg) {
            Ok(())
        } else {
            Err(format!("{ev:?}"))
        }
    })
    .await;
}

fn two_roles(name: &str, prefill: Value, decode: Value, extra: Value) -> Value {
    let template = |role: &str| {
        json!({"leaderWorkerTemplate": {"workerTemplate": {"metadata": {"labels": {"role": role}},
            "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:latest", "command": ["sleep", "3600"]}]}}}})
    };
    let mut p = json!({"name": "prefill", "spec": template("prefill")});
    json_patch::merge(&mut p, &prefill);
    let mut d = json!({"name": "decode", "spec": template("decode")});
    json_patch::merge(&mut d, &decode);
    let mut o = json!({"apiVersion": DS, "kind": "DisaggregatedSet", "metadata": {"name": name},
        "spec": {"roles": [p, d]}});
    json_patch::merge(&mut o, &json!({"spec": extra}));
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_roles_scale_through_their_scaler_and_bad_sets_get_422() {
    let (server, client) = cluster("dse", 2).await;
    let sets = api(&client, DS, "DisaggregatedSet");
    let scalers = api(&client, DS, "DisaggregatedSetRoleScaler");
    let lws = api(&client, LWS, "LeaderWorkerSet");
    let manifest = two_roles(
        "ext",
        json!({"scaling": {"mode": "External"}, "spec": {"replicas": 5}}),
        json!({"spec": {"replicas": 1}}),
        json!({}),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ext.yaml");
    std::fs::write(&file, serde_json::to_string(&manifest).unwrap()).unwrap();
    let (ok, out) = kubectl(&server.url, &["create", "-f", file.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Warning: role \"prefill\" sets scaling.mode: External and spec.replicas: 5 — spec.replicas is ignored; drive replicas via DisaggregatedSetRoleScaler \"ext-prefill\" instead"),
        "{out}"
    );
    // The scaler: seeded with 1 (no LWS yet), owned, with upstream's selector.
    let scaler = until("scaler ext-prefill with its status", 30, || async {
        let s = scalers
            .get("ext-prefill")
            .await
            .map_err(|e| e.to_string())?;
        if s["status"]["replicas"] == 1 {
            Ok(s)
        } else {
            Err(s.to_string())
        }
    })
    .await;
    assert_eq!(scaler["spec"]["replicas"], 1);
    assert_eq!(
        scaler["status"]["selector"],
        "disaggregatedset.x-k8s.io/name=ext,disaggregatedset.x-k8s.io/role=prefill,leaderworkerset.sigs.k8s.io/worker-index=0"
    );
    let owner = &scaler["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["controller"], &owner["blockOwnerDeletion"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(condition(&scaler, "Ready"), "True");
    available(&sets, "ext", &[("prefill", 1), ("decode", 1)]).await;
    has_event(
        &client,
        "ext",
        "ScalerCreated",
        "Created scaler ext-prefill for role prefill",
    )
    .await;
    // /scale works, and the real kubectl scales the role through it.
    let scale = scalers.get_sub("ext-prefill", "scale").await.unwrap();
    assert_eq!(scale["spec"]["replicas"], 1);
    let (ok, out) = kubectl(
        &server.url,
        &["scale", "dsrs", "ext-prefill", "--replicas=3"],
    );
    assert!(ok, "{out}");
    available(&sets, "ext", &[("prefill", 3), ("decode", 1)]).await;
    let (ok, out) = kubectl(&server.url, &["get", "dsrs"]);
    assert!(ok, "{out}");
    assert_eq!(table_line(&out, 0), ["NAME", "DESIRED", "CURRENT", "AGE"]);
    assert_eq!(table_line(&out, 1)[..3], ["ext-prefill", "3", "3"]);
    // External → Static: the scaler goes, the role takes its inline replicas.
    let mut d = sets.get("ext").await.unwrap();
    d["spec"]["roles"][0]["scaling"]["mode"] = json!("Static");
    d["spec"]["roles"][0]["spec"]["replicas"] = json!(2);
    sets.replace("ext", &d).await.unwrap();
    available(&sets, "ext", &[("prefill", 2), ("decode", 1)]).await;
    until("scaler deleted", 30, || async {
        match scalers.get("ext-prefill").await {
            Err(e) if e.is_not_found() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    has_event(
        &client,
        "ext",
        "ScalerDeleted",
        "Deleted scaler ext-prefill (role prefill is no longer External)",
    )
    .await;
    assert_eq!(
        live(&lws, "disaggregatedset.x-k8s.io/name=ext").await.len(),
        2
    );
    // Back to External: a scaler seeded with what the role's LWS have (no
    // resize), and the set's deletion takes it along.
    let mut d = sets.get("ext").await.unwrap();
    d["spec"]["roles"][0]["scaling"]["mode"] = json!("External");
    sets.replace("ext", &d).await.unwrap();
    let seeded = until("scaler back, seeded with 2", 30, || async {
        scalers.get("ext-prefill").await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(seeded["spec"]["replicas"], 2);
    sets.delete("ext", &DeleteParams::default()).await.unwrap();
    until("scaler and LWS collected with the set", 30, || async {
        let gone = scalers
            .get("ext-prefill")
            .await
            .is_err_and(|e| e.is_not_found());
        let left = live(&lws, "disaggregatedset.x-k8s.io/name=ext").await.len();
        if gone && left == 0 {
            Ok(())
        } else {
            Err(format!("scaler gone {gone}, {left} lws"))
        }
    })
    .await;

    // Bad sets: 422 with the field path, nothing stored.
    let cases: Vec<(Value, &str)> = vec![
        (
            two_roles(
                "b1",
                json!({"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 1}}}}),
                json!({}),
                json!({}),
            ),
            "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition",
        ),
        (
            two_roles(
                "b2",
                json!({"spec": {"rolloutStrategy": {"type": "Recreate"}}}),
                json!({}),
                json!({}),
            ),
            "spec.roles[0].spec.rolloutStrategy.type",
        ),
        (
            two_roles(
                "b3",
                json!({"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 0}}}}),
                json!({}),
                json!({}),
            ),
            "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        ),
        (
            two_roles(
                "b4",
                json!({"scaling": {"mode": "External"}}),
                json!({}),
                json!({"slices": 2}),
            ),
            "spec.slices",
        ),
        (
            two_roles(&"b".repeat(45), json!({}), json!({}), json!({})),
            "spec.roles[0].name",
        ),
        (
            two_roles(
                "b6",
                json!({}),
                json!({}),
                json!({"placementPolicy": {"type": "ExclusiveSlice"}}),
            ),
            "spec.placementPolicy.topology",
        ),
        (
            two_roles(
                "b7",
                json!({"metadata": {"annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": "zone"}}}),
                json!({}),
                json!({"placementPolicy": {"type": "ExclusiveTopology", "topology": "zone"}}),
            ),
            "spec.roles[0]",
        ),
        (
            two_roles("b8", json!({"spec": {"replicas": 0}}), json!({}), json!({})),
            "spec",
        ),
        (
            two_roles("b9", json!({"name": "Bad_Name"}), json!({}), json!({})),
            "spec.roles[0].name",
        ),
        (
            two_roles("b10", json!({}), json!({}), json!({"slices": 0})),
            "spec.slices",
        ),
    ];
    for (obj, field) in cases {
        let e = sets.create(&obj).await.expect_err(field);
        let a = e.api().unwrap_or_else(|| panic!("{field}: {e}"));
        assert_eq!(a.code, 422, "{field}: {a:?}");
        let body = a.to_string();
        assert!(body.contains(&format!("{field}:")), "{field}: {body}");
    }
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "nothing bad was stored"
    );
}

/// ExclusiveSlice with the zone as topology: each slice's pods share one
/// zone, and the two slices never share one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_are_placed_one_per_zone() {
    let (_server, client) = cluster("dsz", 4).await;
    let nodes = api(&client, "v1", "Node");
    let list = nodes.list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let node_api = client.dynamic(registry::by_kind("v1", "Node").unwrap(), None);
    for (i, n) in names.iter().enumerate() {
        let zone = if i < 2 { "zone-a" } else { "zone-b" };
        node_api
            .patch(
                n,
                None,
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}}),
            )
            .await
            .unwrap();
    }
    let zone_of: BTreeMap<String, &str> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), if i < 2 { "zone-a" } else { "zone-b" }))
        .collect();
    let sets = api(&client, DS, "DisaggregatedSet");
    sets.create(&two_roles(
        "placed",
        json!({"spec": {"replicas": 2}}),
        json!({"spec": {"replicas": 2}}),
        json!({"slices": 2, "placementPolicy": {"type": "ExclusiveSlice", "topology": "topology.kubernetes.io/zone"}}),
    ))
    .await
    .unwrap();
    available(&sets, "placed", &[("prefill", 4), ("decode", 4)]).await;
    let pods = live(
        &api(&client, "v1", "Pod"),
        "disaggregatedset.x-k8s.io/name=placed",
    )
    .await;
    let mut zones: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for p in pods.values() {
        let node = p["spec"]["nodeName"].as_str().unwrap();
        zones
            .entry(label(p, "disaggregatedset.x-k8s.io/slice").to_string())
            .or_default()
            .push(zone_of[node]);
    }
    assert_eq!(zones.len(), 2, "{zones:?}");
    let z0 = &zones["0"];
    let z1 = &zones["1"];
    assert!(z0.iter().all(|z| *z == z0[0]) && z0.len() == 4, "{zones:?}");
    assert!(z1.iter().all(|z| *z == z1[0]) && z1.len() == 4, "{zones:?}");
    assert_ne!(z0[0], z1[0], "{zones:?}");
}

/// Upstream's 3-role sample comes up; renaming a role rolls every role to a
/// new revision, and the removed role drains with the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_roles_come_up_and_a_renamed_role_rolls_them_all() {
    let (server, client) = cluster("ds3", 3).await;
    let (ok, out) = kubectl(
        &server.url,
        &["apply", "-f", &example("disaggregatedset-3-roles.yaml")],
    );
    assert!(ok, "{out}");
    let sets = api(&client, DS, "DisaggregatedSet");
    let lws = api(&client, LWS, "LeaderWorkerSet");
    let pods = api(&client, "v1", "Pod");
    available(
        &sets,
        "three-roles",
        &[("prefill", 4), ("decode", 2), ("encode", 2)],
    )
    .await;
    let selector = format!("{NAME}=three-roles");
    let p = live(&pods, &selector).await;
    assert_eq!(p.len(), 4 * 2 + 2 + 2, "{:?}", p.keys());
    assert!(
        p.values()
            .all(|p| label(p, "app").starts_with("three-roles-0-")),
        "the system's app label wins"
    );
    let old_rev = label(
        live(&lws, &selector).await.values().next().unwrap(),
        "disaggregatedset.x-k8s.io/revision",
    )
    .to_string();
    let (ok, out) = kubectl(
        &server.url,
        &[
            "patch",
            "disaggregatedset",
            "three-roles",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/roles/2/name","value":"embed"}]"#,
        ],
    );
    assert!(ok, "{out}");
    available(
        &sets,
        "three-roles",
        &[("prefill", 4), ("decode", 2), ("embed", 2)],
    )
    .await;
    until("only the new revision's 3 LWS", 60, || async {
        let l = live(&lws, &selector).await;
        let roles: Vec<&str> = l
            .values()
            .map(|o| label(o, "disaggregatedset.x-k8s.io/role"))
            .collect();
        if l.len() == 3
            && l.values()
                .all(|o| label(o, "disaggregatedset.x-k8s.io/revision") != old_rev)
            && !roles.contains(&"encode")
        {
            Ok(())
        } else {
            Err(format!("{:?}", l.keys()))
        }
    })
    .await;
    has_event(
        &client,
        "three-roles",
        "LWSDeleted",
        &format!("Deleted drained LWS three-roles-0-{old_rev}-encode"),
    )
    .await;
}
