//! What the scheduler's integration tests share: nodes of 2 CPUs, pods,
//! a scheduler started in the background, and waiting on a pod.
#![allow(dead_code)]

use minik8s_client::{Client, DynamicApi};
use serde_json::{json, Value};

pub fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
           "status": {"conditions": [{"type": "Ready", "status": "True"}],
                      "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}, "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}}})
}

pub fn pod(name: &str, labels: Value, spec: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    json_patch::merge(&mut p, &json!({"spec": spec}));
    p
}

/// A scheduler on `client` in the background: its informers and its worker.
pub fn start_scheduler(client: &Client) {
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
}

pub async fn wait_for<F: Fn(&Value) -> bool>(
    pods: &DynamicApi,
    name: &str,
    what: &str,
    ok: F,
) -> Value {
    minik8s_testkit::until(10, &format!("pod {name}: {what}"), || async {
        match pods.get(name).await {
            Ok(p) if ok(&p) => Ok(p),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

pub fn node_of(p: &Value) -> String {
    p.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
