//! Table cells of Service, ServiceCIDR, IPAddress, Ingress and IngressClass, as kubectl's printers lay them out.

use super::{age, arr, int, s};
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
    // Whole: the server's tables are kubectl's wide ones (kubectl shortens
    // the addresses only when it prints a table itself).
    let address = load_balancer_addresses(o).join(",");
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

/// ServiceCIDR: CIDRS (comma-separated), AGE.
pub fn service_cidr(o: &Value) -> Vec<Value> {
    let cidrs: Vec<&str> = arr(o, "/spec/cidrs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    vec![json!(cidrs.join(",")), json!(age(o))]
}

/// IPAddress: PARENTREF as `resource[.group]/namespace/name`.
pub fn ip_address(o: &Value) -> Vec<Value> {
    let field = |k: &str| {
        o.pointer(&format!("/spec/parentRef/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let resource = match field("group") {
        "" => field("resource").to_string(),
        group => format!("{}.{group}", field("resource")),
    };
    let namespace = field("namespace");
    let parent = match namespace {
        "" => format!("{resource}/{}", field("name")),
        ns => format!("{resource}/{ns}/{}", field("name")),
    };
    vec![json!(parent)]
}

/// Service.
pub fn service(o: &Value) -> Vec<Value> {
    let ports: Vec<String> = arr(o, "/spec/ports")
        .iter()
        .map(|p| {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) => format!("{}:{}/{}", int(p, "/port"), np, proto),
                None => format!("{}/{}", int(p, "/port"), proto),
            }
        })
        .collect();
    let selector: Vec<String> = o
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(s(o.pointer("/spec/type"))),
        json!(s(o.pointer("/spec/clusterIP"))),
        json!(service_external_ip(o)),
        json!(if ports.is_empty() {
            "<none>".into()
        } else {
            ports.join(",")
        }),
        json!(age(o)),
        json!(if selector.is_empty() {
            "<none>".into()
        } else {
            selector.join(",")
        }),
    ]
}

/// The addresses in an object's `status.loadBalancer.ingress` (IP, else host name).
fn load_balancer_addresses(o: &Value) -> Vec<&str> {
    o.pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i.get("ip")
                .or_else(|| i.get("hostname"))
                .and_then(Value::as_str)
        })
        .collect()
}

/// A Service's EXTERNAL-IP column, as kubectl's printer has it: a load
/// balancer's addresses (`<pending>` until it has some) before any
/// `externalIPs`; `externalName` for ExternalName; `<none>` otherwise.
fn service_external_ip(o: &Value) -> String {
    let external: Vec<String> = o
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    match o
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
    {
        "ExternalName" => o
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "LoadBalancer" => {
            // The server prints tables wide (Kubernetes' TableConvertor), so the
            // list is never shortened.
            let lb = load_balancer_addresses(o).join(",");
            let mut all: Vec<String> = if lb.is_empty() { Vec::new() } else { vec![lb] };
            all.extend(external);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        _ if !external.is_empty() => external.join(","),
        _ => "<none>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_ip_column_as_kubectl_prints_it() {
        let svc = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        let lb = json!({"type": "LoadBalancer"});
        assert_eq!(
            service_external_ip(&svc(lb.clone(), json!({}))),
            "<pending>"
        );
        let two = json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}});
        assert_eq!(
            service_external_ip(&svc(lb.clone(), two)),
            "10.0.0.1,10.0.0.2"
        );
        let short = json!({"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}, {"hostname": "lb.x"}]}});
        assert_eq!(service_external_ip(&svc(lb.clone(), short)), "1.1.1.1,lb.x");
        let three = json!({"loadBalancer": {"ingress": [
            {"ip": "192.168.77.11"}, {"ip": "192.168.77.12"}, {"ip": "192.168.77.13"}]}});
        assert_eq!(
            service_external_ip(&svc(lb, three)),
            "192.168.77.11,192.168.77.12,192.168.77.13"
        );
        let name = json!({"type": "ExternalName", "externalName": "db.example.org"});
        assert_eq!(service_external_ip(&svc(name, json!({}))), "db.example.org");
        let plain = json!({"type": "ClusterIP"});
        assert_eq!(service_external_ip(&svc(plain, json!({}))), "<none>");
        let with_ips = json!({"type": "NodePort", "externalIPs": ["1.2.3.4"]});
        assert_eq!(service_external_ip(&svc(with_ips, json!({}))), "1.2.3.4");
    }

    #[test]
    fn ingress_addresses_are_never_shortened() {
        let ing = json!({"spec": {"rules": [{"host": "a.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.77.11"}, {"ip": "192.168.77.12"}]}}});
        assert_eq!(ingress(&ing)[2], "192.168.77.11,192.168.77.12");
    }
}
