//! Table cells of Ingress and IngressClass, as kubectl's printers lay them out.

use super::age;
use serde_json::{json, Value};

/// Ingress: CLASS, HOSTS, ADDRESS, PORTS, AGE (kubectl's formatHosts and ports).
pub fn ingress(o: &Value) -> Vec<Value> {
    let class = o
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let rules = o
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let hosts: Vec<&str> = rules
        .iter()
        .filter_map(|r| r.get("host").and_then(Value::as_str))
        .filter(|h| !h.is_empty())
        .take(3)
        .collect();
    let hosts = match (hosts.is_empty(), rules.len() > 3) {
        (true, _) => "*".to_string(),
        (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - 3),
        (false, false) => hosts.join(","),
    };
    let address: Vec<&str> = o
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i.get("ip")
                .or_else(|| i.get("hostname"))
                .and_then(Value::as_str)
        })
        .collect();
    let mut address = address.join(",");
    if address.len() > 16 {
        address = format!("{}...", &address[..13]);
    }
    let tls = o
        .pointer("/spec/tls")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    vec![
        json!(class),
        json!(hosts),
        json!(address),
        json!(if tls { "80, 443" } else { "80" }),
        json!(age(o)),
    ]
}

/// IngressClass: CONTROLLER, PARAMETERS, AGE.
pub fn ingress_class(o: &Value) -> Vec<Value> {
    let parameters = match o.pointer("/spec/parameters").filter(|p| !p.is_null()) {
        None => "<none>".to_string(),
        Some(p) => {
            let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
            match p.get("apiGroup").and_then(Value::as_str) {
                Some(g) => format!("{}.{g}/{}", s("kind"), s("name")),
                None => format!("{}/{}", s("kind"), s("name")),
            }
        }
    };
    vec![
        json!(o
            .pointer("/spec/controller")
            .and_then(Value::as_str)
            .unwrap_or("")),
        json!(parameters),
        json!(age(o)),
    ]
}
