//! Table cells of the LWS-family kinds with columns of their own:
//! DisaggregatedSetRoleScaler and Volcano's PodGroup; and serverless
//! Functions, Workflows and WorkflowRuns.

use super::{age, arr, duration, int};
use serde_json::{json, Value};

/// DisaggregatedSetRoleScaler: DESIRED, CURRENT, AGE.
pub fn role_scaler(o: &Value) -> Vec<Value> {
    vec![
        json!(int(o, "/spec/replicas")),
        json!(int(o, "/status/replicas")),
        json!(age(o)),
    ]
}

/// Volcano's PodGroup: STATUS, MINMEMBER, RUNNINGS, AGE, QUEUE (wide).
pub fn pod_group(o: &Value) -> Vec<Value> {
    let text = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    vec![
        json!(text("/status/phase")),
        json!(int(o, "/spec/minMember")),
        json!(int(o, "/status/running")),
        json!(age(o)),
        json!(text("/spec/queue")),
    ]
}

/// Function: RUNTIME, INSTANCES (ready/desired), READY, URL, AGE, REASON (wide).
pub fn function(o: &Value) -> Vec<Value> {
    let ready = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let field = |k: &str| {
        ready
            .and_then(|c| c[k].as_str())
            .unwrap_or(if k == "status" { "Unknown" } else { "" })
            .to_string()
    };
    let reason = if field("status") == "True" {
        String::new()
    } else {
        field("reason")
    };
    vec![
        json!(o
            .pointer("/spec/runtime")
            .and_then(Value::as_str)
            .unwrap_or("python")),
        json!(format!(
            "{}/{}",
            int(o, "/status/readyInstances"),
            int(o, "/status/desiredInstances")
        )),
        json!(field("status")),
        json!(o
            .pointer("/status/url")
            .and_then(Value::as_str)
            .unwrap_or("")),
        json!(age(o)),
        json!(reason),
    ]
}

/// Workflow: START, STEPS (how many), AGE.
pub fn workflow(o: &Value) -> Vec<Value> {
    vec![
        json!(o
            .pointer("/spec/start")
            .and_then(Value::as_str)
            .unwrap_or("")),
        json!(arr(o, "/spec/steps").len()),
        json!(age(o)),
    ]
}

/// WorkflowRun: WORKFLOW, PHASE, STEPS (finished/begun), DURATION, AGE, MESSAGE (wide).
pub fn workflow_run(o: &Value) -> Vec<Value> {
    let text = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let steps = arr(o, "/status/steps");
    let done = steps
        .iter()
        .filter(|s| s["phase"] == "Succeeded" || s["phase"] == "Failed")
        .count();
    let phase = match text("/status/phase") {
        p if p.is_empty() => "Pending".to_string(),
        p => p,
    };
    vec![
        json!(text("/spec/workflow")),
        json!(phase),
        json!(format!("{done}/{}", steps.len())),
        json!(duration(o)),
        json!(age(o)),
        json!(text("/status/message")),
    ]
}
