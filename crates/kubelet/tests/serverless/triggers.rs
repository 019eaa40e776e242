//! Triggers on real Docker (part of `serverless.rs`'s cluster): a schedule
//! (`* * * * *`, applied when the test starts and checked at its end, so the
//! minute passes while the rest runs) and an event trigger on labelled
//! ConfigMaps; each call is an Event on the Function with the answer.

use super::{apply, kubectl_ok};
use crate::common::Cluster;
use serde_json::Value;

const TICK: &str = r#"
apiVersion: serverless.minik8s.io/v1alpha1
kind: Function
metadata: {name: tick}
spec:
  source: |
    def handler(event):
        return {"tick": event["count"]}
  triggers:
  - schedule: "* * * * *"
    data: {count: 1}
"#;

const NOTIFY: &str = r#"
apiVersion: serverless.minik8s.io/v1alpha1
kind: Function
metadata: {name: notify}
spec:
  source: |
    def handler(event):
        return {"seen": event["object"]["metadata"]["name"], "type": event["type"]}
  triggers:
  - event:
      apiVersion: v1
      kind: ConfigMap
      labelSelector: notify=true
      types: [ADDED, MODIFIED]
"#;

/// The messages of the Events about Function `name` with `reason`.
fn events(c: &Cluster, name: &str, reason: &str) -> Vec<String> {
    let list: Value =
        serde_json::from_slice(&c.real_kubectl(&["get", "events", "-o", "json"]).stdout)
            .unwrap_or(Value::Null);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["involvedObject"]["kind"] == "Function"
                && e["involvedObject"]["name"] == name
                && e["reason"] == reason
        })
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

/// Applies the scheduled function (its first call is at the next whole minute).
pub fn start(c: &Cluster) {
    kubectl_ok(apply(c, TICK));
}

pub async fn check(c: &Cluster) {
    // An event trigger: a labelled ConfigMap made and changed; an unlabelled one ignored.
    kubectl_ok(apply(c, NOTIFY));
    // The gateway's watch starts within a second of the Function.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    kubectl_ok(c.real_kubectl(&["create", "configmap", "quiet", "--from-literal=a=b"]));
    kubectl_ok(c.real_kubectl(&["create", "configmap", "loud", "--from-literal=a=b"]));
    // Starting to match the selector is ADDED, as in a Kubernetes watch.
    kubectl_ok(c.real_kubectl(&["label", "configmap", "loud", "notify=true"]));
    kubectl_ok(c.real_kubectl(&["annotate", "configmap", "loud", "touched=yes"]));
    let seen = minik8s_testkit::until(60, "the event trigger's calls", || async {
        let seen = events(c, "notify", "Triggered");
        let want = [
            "ADDED ConfigMap loud: answered 200 {\"seen\":\"loud\",\"type\":\"ADDED\"}",
            "MODIFIED ConfigMap loud: answered 200 {\"seen\":\"loud\",\"type\":\"MODIFIED\"}",
        ];
        want.iter()
            .all(|w| seen.iter().any(|s| s == w))
            .then_some(seen.clone())
            .ok_or(format!("{seen:?}"))
    })
    .await;
    assert!(
        !seen.iter().any(|s| s.contains("quiet")),
        "an unlabelled ConfigMap calls nothing: {seen:?}"
    );

    // The schedule: a call at the minute, with the trigger's data.
    minik8s_testkit::until(90, "the scheduled call", || async {
        let seen = events(c, "tick", "Triggered");
        seen.iter()
            .any(|s| s == "schedule \"* * * * *\": answered 200 {\"tick\":1}")
            .then_some(())
            .ok_or(format!("{seen:?}"))
    })
    .await;

    // A schedule that is no cron line: 422 with the field.
    let bad = apply(c, "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {name: late}\nspec:\n  source: x\n  triggers: [{schedule: \"61 * * * *\"}]\n");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("spec.triggers[0].schedule"), "{err}");
}
