//! Table cells of the Dynamic Resource Allocation kinds, as kubectl's
//! printers lay them out (DeviceClass and ResourceClaimTemplate show AGE only).

use super::{age, arr};
use minik8s_api::meta::is_deleting;
use serde_json::{json, Value};

/// ResourceClaim: STATE (`pending`, `allocated,reserved`, `deleted`...), AGE.
pub fn resource_claim(o: &Value) -> Vec<Value> {
    let mut states = Vec::new();
    let deleting = is_deleting(o);
    if deleting {
        states.push("deleted");
    }
    if o.pointer("/status/allocation").is_none_or(Value::is_null) {
        if !deleting {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !arr(o, "/status/reservedFor").is_empty() {
            states.push("reserved");
        }
    }
    vec![json!(states.join(",")), json!(age(o))]
}

/// ResourceSlice: NODE, DRIVER, POOL, AGE.
pub fn resource_slice(o: &Value) -> Vec<Value> {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    vec![
        json!(s("/spec/nodeName")),
        json!(s("/spec/driver")),
        json!(s("/spec/pool/name")),
        json!(age(o)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_states_as_kubectl_prints_them() {
        let state = |o: Value| resource_claim(&o)[0].clone();
        assert_eq!(state(json!({})), "pending");
        assert_eq!(state(json!({"status": {"allocation": {}}})), "allocated");
        assert_eq!(
            state(json!({"status": {"allocation": {}, "reservedFor": [{"name": "p"}]}})),
            "allocated,reserved"
        );
        assert_eq!(
            state(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})),
            "deleted"
        );
    }
}
