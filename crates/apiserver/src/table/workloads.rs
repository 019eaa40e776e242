//! Table cells of the LWS-family kinds with columns of their own:
//! DisaggregatedSetRoleScaler and Volcano's PodGroup.

use super::{age, int};
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
