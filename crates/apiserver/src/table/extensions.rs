//! Table cells of the API-extension kinds: admission configurations and
//! policies, APIServices (the rest are in `mod.rs`).

use super::{age, arr, s};
use serde_json::{json, Value};

/// Mutating- and ValidatingWebhookConfiguration.
pub fn webhook_configuration(o: &Value) -> Vec<Value> {
    vec![json!(arr(o, "/webhooks").len()), json!(age(o))]
}

/// ValidatingAdmissionPolicy: its validations and its param kind.
pub fn admission_policy(o: &Value) -> Vec<Value> {
    let param = o
        .pointer("/spec/paramKind")
        .map(|p| format!("{}/{}", s(p.get("apiVersion")), s(p.get("kind"))));
    let validations = arr(o, "/spec/validations").len();
    vec![
        json!(validations),
        json!(param.unwrap_or_else(|| "<unset>".into())),
        json!(age(o)),
    ]
}

/// MutatingAdmissionPolicy: its mutations and its param kind.
pub fn mutating_admission_policy(o: &Value) -> Vec<Value> {
    let param = o
        .pointer("/spec/paramKind")
        .map(|p| format!("{}/{}", s(p.get("apiVersion")), s(p.get("kind"))));
    vec![
        json!(arr(o, "/spec/mutations").len()),
        json!(param.unwrap_or_else(|| "<unset>".into())),
        json!(age(o)),
    ]
}

/// Validating- and MutatingAdmissionPolicyBinding: its policy and param.
pub fn admission_policy_binding(o: &Value) -> Vec<Value> {
    let param = o.pointer("/spec/paramRef/name").and_then(Value::as_str);
    vec![
        json!(s(o.pointer("/spec/policyName"))),
        json!(param.map_or("<unset>".to_string(), |p| format!("*/{p}"))),
        json!(age(o)),
    ]
}

/// APIService: its service (or Local) and whether it is available.
pub fn api_service(o: &Value) -> Vec<Value> {
    let svc = o
        .pointer("/spec/service")
        .map(|v| format!("{}/{}", s(v.get("namespace")), s(v.get("name"))));
    let c = arr(o, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Available");
    let avail = match c.map(|c| (c["status"].as_str(), c["reason"].as_str())) {
        Some((Some("True"), _)) => "True".to_string(),
        Some((Some(st), Some(r))) => format!("{st} ({r})"),
        _ => "Unknown".to_string(),
    };
    vec![
        json!(svc.unwrap_or_else(|| "Local".into())),
        json!(avail),
        json!(age(o)),
    ]
}
