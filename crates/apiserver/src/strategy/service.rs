//! Service: a ClusterIP (unless headless or ExternalName) and node ports
//! (NodePort, LoadBalancer) taken from the server's pools on create, node
//! ports newly needed on update, all given back once the Service is gone.

use super::Allocations;
use crate::ipalloc::Allocators;
use minik8s_api::validation::{FieldError, NameRule};
use serde_json::{json, Value};

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035
    }

    fn allocate(
        &self,
        alloc: &Allocators,
        svc: &mut Value,
        old: Option<&Value>,
    ) -> Result<Allocations, FieldError> {
        let mut taken = Vec::new();
        let result = match old {
            None => allocate_new(alloc, svc, &mut taken),
            Some(old) => allocate_update(alloc, old, svc, &mut taken),
        };
        match result {
            Ok(()) => Ok(taken),
            Err(e) => {
                release(alloc, &taken);
                Err(e)
            }
        }
    }

    fn release(&self, alloc: &Allocators, svc: &Value) {
        release(alloc, &service_allocations(svc));
    }
}

/// Gives back ("ip", addr) and ("port", n) allocations.
pub fn release(alloc: &Allocators, allocs: &[(String, String)]) {
    for (kind, v) in allocs {
        match kind.as_str() {
            "ip" => alloc.release_ip(v),
            _ => alloc.release_port(v.parse().unwrap_or(0)),
        }
    }
}

fn service_type(svc: &Value) -> String {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string()
}

/// The ClusterIP and node ports of a new Service.
fn allocate_new(
    alloc: &Allocators,
    svc: &mut Value,
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let ty = service_type(svc);
    if ty != "ExternalName" {
        let requested = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let ip = match requested.as_str() {
            "None" => "None".to_string(),
            "" => {
                let ip = alloc
                    .allocate_ip()
                    .map_err(|e| FieldError::invalid("spec.clusterIP", &json!(""), e.to_string()))?
                    .to_string();
                taken.push(("ip".to_string(), ip.clone()));
                ip
            }
            ip => {
                alloc.reserve_ip(ip).map_err(|e| {
                    FieldError::invalid("spec.clusterIP", &json!(ip), e.to_string())
                })?;
                taken.push(("ip".to_string(), ip.to_string()));
                ip.to_string()
            }
        };
        svc["spec"]["clusterIP"] = json!(ip);
        svc["spec"]["clusterIPs"] = json!([ip]);
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        allocate_node_ports(alloc, svc, &[], taken)?;
    }
    allocate_health_check_port(alloc, svc, &[], taken)
}

/// A LoadBalancer with `externalTrafficPolicy: Local` gets a
/// `healthCheckNodePort` (asked for or from the node port range), where every
/// node's kube-proxy answers whether it holds endpoints of the Service.
fn allocate_health_check_port(
    alloc: &Allocators,
    svc: &mut Value,
    held: &[i64],
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let needs = service_type(svc) == "LoadBalancer"
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local");
    if !needs {
        return Ok(());
    }
    let asked = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if asked != 0 && held.contains(&asked) {
        return Ok(());
    }
    let port = if asked == 0 {
        alloc.allocate_port().map(i64::from)
    } else {
        alloc.reserve_port(asked).map(|_| asked)
    }
    .map_err(|e| FieldError::invalid("spec.healthCheckNodePort", &json!(asked), e.to_string()))?;
    svc["spec"]["healthCheckNodePort"] = json!(port);
    taken.push(("port".into(), port.to_string()));
    Ok(())
}

/// On update a Service keeps its ClusterIP; node ports newly needed are taken.
fn allocate_update(
    alloc: &Allocators,
    old: &Value,
    svc: &mut Value,
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let ty = service_type(svc);
    if ty != "NodePort" && ty != "LoadBalancer" {
        return Ok(());
    }
    let held: Vec<i64> = service_allocations(old)
        .iter()
        .filter(|(k, _)| k == "port")
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    allocate_node_ports(alloc, svc, &held, taken)?;
    allocate_health_check_port(alloc, svc, &held, taken)
}

/// Every port's nodePort: kept if `held`, reserved if asked for, else allocated.
fn allocate_node_ports(
    alloc: &Allocators,
    svc: &mut Value,
    held: &[i64],
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for (i, p) in ports.iter_mut().enumerate() {
        let np = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if np != 0 && held.contains(&np) {
            continue;
        }
        let result = if np == 0 {
            alloc.allocate_port().map(|n| {
                p["nodePort"] = json!(n);
                i64::from(n)
            })
        } else {
            alloc.reserve_port(np).map(|_| np)
        };
        let n = result.map_err(|e| {
            FieldError::invalid(
                format!("spec.ports[{i}].nodePort"),
                &json!(np),
                e.to_string(),
            )
        })?;
        taken.push(("port".into(), n.to_string()));
    }
    Ok(())
}

/// The allocations a Service holds: ("ip", addr) and ("port", n).
pub fn service_allocations(svc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(ip) = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
    {
        out.push(("ip".into(), ip.to_string()));
    }
    for p in svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(np) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
            out.push(("port".into(), np.to_string()));
        }
    }
    if let Some(hc) = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .filter(|n| *n > 0)
    {
        out.push(("port".into(), hc.to_string()));
    }
    out
}
