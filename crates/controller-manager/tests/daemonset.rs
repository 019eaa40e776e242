//! The DaemonSet controller with the scheduler, every controller and hollow
//! nodes, driven by the real kubectl: one pod per node that should run one
//! (a tainted node keeps it out until the taint goes), a node that joins
//! later gets its pod, a new template rolls through every node, and
//! `kubectl rollout status ds` / `get ds` read what Kubernetes prints;
//! `rollout history ds` lists the ControllerRevisions and `rollout undo ds`
//! rolls back.

mod common;

use common::{cluster, kubectl, table_line};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kubelet::hollow::{self, HollowConfig};
use minik8s_api::registry;
use minik8s_client::{DynamicApi, ListParams};
use minik8s_testkit::until;
use serde_json::json;
use std::collections::BTreeMap;

/// node → image of the live daemon pods there.
async fn placement(pods: &DynamicApi) -> BTreeMap<String, Vec<String>> {
    let list = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in list["items"].as_array().into_iter().flatten() {
        if !p["metadata"]["deletionTimestamp"].is_null() || p["status"]["phase"] != "Running" {
            continue;
        }
        let node = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
        let image = p["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or("")
            .to_string();
        out.entry(node).or_default().push(image);
    }
    out
}

/// The REVISION column of `kubectl rollout history`.
fn revision_numbers(out: &str) -> Vec<&str> {
    out.lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_run_on_every_eligible_node() {
    let (server, client) = cluster("dsn", 3).await;
    let nodes = client.dynamic(registry::of::<Node>(), None);
    nodes
        .patch("dsn-2", None, "application/merge-patch+json",
               &json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ds.yaml");
    let write = |image: &str| {
        std::fs::write(
            &manifest,
            format!("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: agent}}\nspec:\n  selector: {{matchLabels: {{app: agent}}}}\n  template:\n    metadata: {{labels: {{app: agent}}}}\n    spec:\n      containers: [{{name: c, image: {image}}}]\n"),
        )
        .unwrap()
    };
    write("busybox:1");
    let (ok, out) = kubectl(&server.url, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok && out.contains("daemonset.apps/agent created"), "{out}");
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let wait_for = |want: Vec<(&'static str, &'static str)>, what: &'static str| {
        let pods = pods.clone();
        async move {
            let want: BTreeMap<String, Vec<String>> = want
                .into_iter()
                .map(|(n, i)| (n.to_string(), vec![i.to_string()]))
                .collect();
            // A rolling update goes node by node (maxUnavailable 1): give a
            // loaded machine time.
            until(60, what, || async {
                let got = placement(&pods).await;
                (got == want)
                    .then_some(())
                    .ok_or_else(|| format!("{got:?}"))
            })
            .await
        }
    };
    wait_for(
        vec![("dsn-0", "busybox:1"), ("dsn-1", "busybox:1")],
        "one pod on each untainted node",
    )
    .await;
    let sets = client.dynamic(registry::of::<DaemonSet>(), Some("default"));
    let ds = sets.get("agent").await.unwrap();
    let pod = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()["items"][0]
        .clone();
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
    let tolerations = pod["spec"]["tolerations"].to_string();
    assert!(
        tolerations.contains("node.kubernetes.io/unreachable"),
        "{tolerations}"
    );

    // A node that joins later gets its pod.
    let late = hollow::start(
        &client,
        &HollowConfig {
            prefix: "late".into(),
            count: 1,
            lease_seconds: 10,
            sync_seconds: 10,
            fake_gpus: 0,
        },
    )
    .await
    .unwrap();
    wait_for(
        vec![
            ("dsn-0", "busybox:1"),
            ("dsn-1", "busybox:1"),
            ("late-0", "busybox:1"),
        ],
        "the late node's pod",
    )
    .await;
    // The taint goes: so does the exclusion.
    nodes
        .patch(
            "dsn-2",
            None,
            "application/merge-patch+json",
            &json!({"spec": {"taints": null}}),
        )
        .await
        .unwrap();
    wait_for(
        vec![
            ("dsn-0", "busybox:1"),
            ("dsn-1", "busybox:1"),
            ("dsn-2", "busybox:1"),
            ("late-0", "busybox:1"),
        ],
        "a pod on the untainted node",
    )
    .await;

    // A new template rolls through every node.
    write("busybox:2");
    let (ok, out) = kubectl(&server.url, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(
        &server.url,
        &["rollout", "status", "ds/agent", "--timeout=60s"],
    );
    assert!(ok && out.contains("successfully rolled out"), "{out}");
    wait_for(
        vec![
            ("dsn-0", "busybox:2"),
            ("dsn-1", "busybox:2"),
            ("dsn-2", "busybox:2"),
            ("late-0", "busybox:2"),
        ],
        "every node on the new template",
    )
    .await;
    let (ok, out) = kubectl(&server.url, &["get", "ds"]);
    assert!(ok, "{out}");
    let header = table_line(&out, 0);
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ]
    );
    let row = table_line(&out, 1);
    assert_eq!(row[1..7], ["4", "4", "4", "4", "4", "<none>"], "{out}");
    assert_eq!(
        ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        1
    );

    // Each template is a ControllerRevision: history lists both, undo rolls back.
    let (ok, out) = kubectl(&server.url, &["rollout", "history", "ds/agent"]);
    assert!(ok, "{out}");
    let revisions = revision_numbers(&out);
    assert_eq!(revisions, ["1", "2"], "{out}");
    let (ok, out) = kubectl(&server.url, &["rollout", "undo", "ds/agent"]);
    assert!(
        ok && out.contains("daemonset.apps/agent rolled back"),
        "{out}"
    );
    wait_for(
        vec![
            ("dsn-0", "busybox:1"),
            ("dsn-1", "busybox:1"),
            ("dsn-2", "busybox:1"),
            ("late-0", "busybox:1"),
        ],
        "every node back on the first template",
    )
    .await;
    let (ok, out) = kubectl(&server.url, &["rollout", "history", "ds/agent"]);
    let revisions = revision_numbers(&out);
    assert!(
        ok && revisions == ["2", "3"],
        "the first template is revision 3 now: {out}"
    );

    // maxSurge 1, maxUnavailable 0, minReadySeconds 1: each node gets its new
    // pod before the old one goes, and never lacks an available pod.
    let patch = |body: serde_json::Value| {
        let sets = sets.clone();
        async move {
            sets.patch("agent", None, "application/merge-patch+json", &body)
                .await
                .unwrap()
        }
    };
    patch(json!({"spec": {"minReadySeconds": 1,
        "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}))
    .await;
    until(30, "every pod available (ready for 1 s)", || async {
        let ds = sets.get("agent").await.unwrap();
        let st = &ds["status"];
        (st["observedGeneration"] == ds["metadata"]["generation"] && st["numberAvailable"] == 4)
            .then_some(())
            .ok_or_else(|| st.to_string())
    })
    .await;
    patch(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:3"}]}}}}))
        .await;
    let lowest = std::cell::Cell::new(i64::MAX);
    let most_per_node = std::cell::Cell::new(0usize);
    until(60, "the surge rollout", || async {
        let ds = sets.get("agent").await.unwrap();
        let got = placement(&pods).await;
        let per_node = got.values().map(Vec::len).max().unwrap_or(0);
        most_per_node.set(most_per_node.get().max(per_node));
        let st = &ds["status"];
        lowest.set(
            lowest
                .get()
                .min(st["numberAvailable"].as_i64().unwrap_or(0)),
        );
        let done = st["updatedNumberScheduled"] == 4
            && st["numberAvailable"] == 4
            && got.values().all(|images| images == &["busybox:3"]);
        done.then_some(()).ok_or_else(|| format!("{st} {got:?}"))
    })
    .await;
    assert_eq!(lowest.get(), 4, "a node went without an available pod");
    assert_eq!(most_per_node.get(), 2, "the new pod joined the old one");

    // examples/daemonset.yaml: a pod on every node (the tainted one included now).
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/daemonset.yaml");
    let (ok, out) = kubectl(&server.url, &["apply", "-f", example]);
    assert!(ok, "{out}");
    until(30, "a node-agent on each of the 4 nodes", || async {
        let list = pods
            .list(&ListParams::default().labels("app=node-agent"))
            .await
            .unwrap();
        let nodes: std::collections::BTreeSet<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
            .collect();
        (nodes.len() == 4)
            .then_some(())
            .ok_or_else(|| format!("{nodes:?}"))
    })
    .await;
    drop(late);
}
