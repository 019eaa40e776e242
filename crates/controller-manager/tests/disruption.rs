//! PodDisruptionBudgets, `pods/eviction` and `kubectl drain`: the real
//! kubectl v1.32 against hollow nodes (real kubelets on the fake runtime)
//! with every controller. A drain evicts one pod at a time as the budget
//! allows, replacements start on the other node, and a budget that allows
//! nothing stops the drain with Kubernetes' 429.

mod common;

use common::{cluster, kubectl, table_line, until};
use serde_json::Value;

fn json_of(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    let (ok, out) = kubectl(url, &all);
    assert!(ok, "kubectl {all:?}: {out}");
    serde_json::from_str(&out).unwrap()
}

fn pods_on(url: &str, node: &str) -> usize {
    let pods = json_of(url, &["pods", "-l", "app=web"]);
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node && p["metadata"]["deletionTimestamp"].is_null())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drain_evicts_within_the_budget() {
    let (server, _client) = cluster("drn", 2).await;
    let url = server.url.as_str();
    let (ok, out) = kubectl(
        url,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
        ],
    );
    assert!(ok, "{out}");
    until("3 available web pods", 60, || async {
        let d = json_of(url, &["deployment", "web"]);
        (d["status"]["availableReplicas"] == 3)
            .then_some(())
            .ok_or(d["status"].to_string())
    })
    .await;
    let (ok, out) = kubectl(
        url,
        &[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ],
    );
    assert!(
        ok && out.contains("poddisruptionbudget.policy/web created"),
        "{out}"
    );
    let pdb = until("the budget's status", 30, || async {
        let b = json_of(url, &["pdb", "web"]);
        (b["status"]["currentHealthy"] == 3)
            .then_some(b.clone())
            .ok_or(b["status"].to_string())
    })
    .await;
    assert_eq!(pdb["status"]["desiredHealthy"], 2);
    assert_eq!(pdb["status"]["expectedPods"], 3);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 1);
    assert_eq!(pdb["status"]["conditions"][0]["reason"], "SufficientPods");
    let (_, table) = kubectl(url, &["get", "pdb"]);
    assert_eq!(
        table_line(&table, 0),
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ]
    );
    assert_eq!(table_line(&table, 1)[..4], ["web", "2", "N/A", "1"]);

    // Drain the node with more pods: one eviction at a time, replacements on the other.
    let (busy, quiet) = if pods_on(url, "drn-0") >= pods_on(url, "drn-1") {
        ("drn-0", "drn-1")
    } else {
        ("drn-1", "drn-0")
    };
    let (ok, out) = kubectl(
        url,
        &[
            "drain",
            busy,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=90s",
        ],
    );
    assert!(ok, "kubectl drain: {out}");
    assert!(
        out.contains(&format!("node/{busy} cordoned"))
            && out.contains(&format!("node/{busy} drained")),
        "{out}"
    );
    assert!(out.contains("evicting pod default/web-"), "{out}");
    let node = json_of(url, &["node", busy]);
    assert_eq!(node["spec"]["unschedulable"], true);
    until("all web pods on the other node", 60, || async {
        let (on_busy, on_quiet) = (pods_on(url, busy), pods_on(url, quiet));
        (on_busy == 0 && on_quiet == 3)
            .then_some(())
            .ok_or(format!("{on_busy} / {on_quiet}"))
    })
    .await;

    // A budget that allows nothing: the drain gives up with the 429's message.
    let (ok, out) = kubectl(
        url,
        &[
            "patch",
            "pdb",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"minAvailable":3}}"#,
        ],
    );
    assert!(ok, "{out}");
    until("no disruption allowed", 30, || async {
        let b = json_of(url, &["pdb", "web"]);
        let settled = b["status"]["observedGeneration"] == b["metadata"]["generation"]
            && b["status"]["disruptionsAllowed"] == 0
            && b["status"]["currentHealthy"] == 3;
        settled.then_some(()).ok_or(b["status"].to_string())
    })
    .await;
    let (ok, out) = kubectl(url, &["uncordon", busy]);
    assert!(
        ok && out.contains(&format!("node/{busy} uncordoned")),
        "{out}"
    );
    let (ok, out) = kubectl(url, &["drain", quiet, "--timeout=8s"]);
    assert!(!ok, "the drain must not get past the budget: {out}");
    assert!(
        out.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{out}"
    );
    assert_eq!(
        pods_on(url, quiet),
        3,
        "no pod left while the budget forbids it"
    );

    // The API itself: 429 with the budget's numbers as the cause.
    let pod = json_of(url, &["pods", "-l", "app=web"])["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let eviction = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}});
    let resp = reqwest::Client::new()
        .post(format!(
            "{url}/api/v1/namespaces/default/pods/{pod}/eviction"
        ))
        .json(&eviction)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let status: Value = resp.json().await.unwrap();
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "The disruption budget web needs 3 healthy pods and has 3 currently"
    );
}
