//! Service: a ClusterIP (unless headless or ExternalName) and node ports
//! (NodePort, LoadBalancer) taken from the server's pools on create, node
//! ports newly needed on update, all given back once the Service is gone.

use super::Allocations;
use crate::ipalloc::Allocators;
use minik8s_validation::{FieldError, NameRule};
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

    /// Said, not silently ignored: the annotations of Kubernetes' older
    /// Topology Aware Routing (zone hints sized by each zone's CPU) are not
    /// honoured; `spec.trafficDistribution` is.
    fn warnings(&self, svc: &Value) -> Vec<String> {
        TOPOLOGY_ANNOTATIONS
            .iter()
            .filter_map(|a| {
                let value = svc.pointer("/metadata/annotations")?.get(a)?.as_str()?;
                let off = value.is_empty() || value.eq_ignore_ascii_case("disabled");
                (!off).then(|| {
                    format!(
                        "metadata.annotations[{a}]: {value} is not honoured by minik8s: traffic is spread over every endpoint; set spec.trafficDistribution: PreferSameZone to keep traffic in a zone"
                    )
                })
            })
            .collect()
    }

    fn prepare_for_update(&self, svc: &mut Value, old: &Value) {
        drop_type_dependent_fields(svc, old);
    }

    fn released_by_update(&self, old: &Value, svc: &Value) -> Allocations {
        let kept = service_allocations(svc);
        service_allocations(old)
            .into_iter()
            .filter(|a| !kept.contains(a))
            .collect()
    }
}

/// Topology Aware Routing's annotations (the second one deprecated since 1.27).
const TOPOLOGY_ANNOTATIONS: [&str; 2] = [
    "service.kubernetes.io/topology-mode",
    "service.kubernetes.io/topology-aware-hints",
];

/// A Service whose new type no longer needs a ClusterIP, node ports or a
/// health check port loses those it had been given, where the client left
/// them as they were (Kubernetes' `dropTypeDependentFields`); they go back
/// to the pools once the update is written ([`Lifecycle::released_by_update`]).
fn drop_type_dependent_fields(svc: &mut Value, old: &Value) {
    let at = |v: &Value, p: &str| v.pointer(p).cloned().unwrap_or(Value::Null);
    let (old_ty, new_ty) = (service_type(old), service_type(svc));
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if old_ty != "ExternalName" && new_ty == "ExternalName" {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if spec.get(field).cloned().unwrap_or(Value::Null) == at(old, &format!("/spec/{field}"))
            {
                spec.remove(field);
            }
        }
    }
    let needs_node_ports = |t: &str| t == "NodePort" || t == "LoadBalancer";
    if needs_node_ports(&old_ty) && !needs_node_ports(&new_ty) {
        let old_ports: Vec<Value> = old
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|ps| ps.iter().map(|p| p["nodePort"].clone()).collect())
            .unwrap_or_default();
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            let same = ports.len() == old_ports.len()
                && ports
                    .iter()
                    .zip(&old_ports)
                    .all(|(p, o)| p["nodePort"] == *o);
            if same {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    p.remove("nodePort");
                }
            }
        }
    }
    let needs_health_check = |v: &Value, t: &str| {
        t == "LoadBalancer" && v.pointer("/spec/externalTrafficPolicy") == Some(&json!("Local"))
    };
    let externally = |t: &str| needs_node_ports(t);
    if needs_health_check(old, &old_ty)
        && !(new_ty == "LoadBalancer" && spec.get("externalTrafficPolicy") == Some(&json!("Local")))
        && spec
            .get("healthCheckNodePort")
            .cloned()
            .unwrap_or(Value::Null)
            == at(old, "/spec/healthCheckNodePort")
    {
        spec.remove("healthCheckNodePort");
    }
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if externally(&old_ty)
        && !externally(&new_ty)
        && !has_external_ips
        && spec
            .get("externalTrafficPolicy")
            .cloned()
            .unwrap_or(Value::Null)
            == at(old, "/spec/externalTrafficPolicy")
    {
        spec.remove("externalTrafficPolicy");
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
        allocate_cluster_ip(alloc, svc, None, taken)?;
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

/// The ClusterIP asked for (reserved), none asked for (allocated), or
/// `None` (headless); `held` is the one the Service already has.
fn allocate_cluster_ip(
    alloc: &Allocators,
    svc: &mut Value,
    held: Option<&str>,
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let requested = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        ip if Some(ip) == held => ip.to_string(),
        "" => {
            let ip = alloc
                .allocate_ip()
                .map_err(|e| FieldError::invalid("spec.clusterIP", &json!(""), e.to_string()))?
                .to_string();
            taken.push(("ip".to_string(), ip.clone()));
            ip
        }
        ip => {
            alloc
                .reserve_ip(ip)
                .map_err(|e| FieldError::invalid("spec.clusterIP", &json!(ip), e.to_string()))?;
            taken.push(("ip".to_string(), ip.to_string()));
            ip.to_string()
        }
    };
    svc["spec"]["clusterIP"] = json!(ip);
    svc["spec"]["clusterIPs"] = json!([ip]);
    Ok(())
}

/// On update a Service keeps what it holds; a ClusterIP (coming from
/// ExternalName), node ports and a health check port newly needed are taken.
fn allocate_update(
    alloc: &Allocators,
    old: &Value,
    svc: &mut Value,
    taken: &mut Allocations,
) -> Result<(), FieldError> {
    let ty = service_type(svc);
    let held = service_allocations(old);
    if ty != "ExternalName" {
        let held_ip = held
            .iter()
            .find(|(k, _)| k == "ip")
            .map(|(_, v)| v.as_str());
        allocate_cluster_ip(alloc, svc, held_ip, taken)?;
    }
    let held_ports: Vec<i64> = held
        .iter()
        .filter(|(k, _)| k == "port")
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    if ty == "NodePort" || ty == "LoadBalancer" {
        allocate_node_ports(alloc, svc, &held_ports, taken)?;
    }
    allocate_health_check_port(alloc, svc, &held_ports, taken)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;

    #[test]
    fn topology_aware_routing_annotations_are_warned_about_not_dropped() {
        let svc = json!({"metadata": {"annotations": {"service.kubernetes.io/topology-mode": "Auto"}},
            "spec": {"ports": [{"port": 80}]}});
        assert_eq!(
            Lifecycle.warnings(&svc),
            ["metadata.annotations[service.kubernetes.io/topology-mode]: Auto is not honoured by minik8s: traffic is spread over every endpoint; set spec.trafficDistribution: PreferSameZone to keep traffic in a zone"]
        );
        let off = json!({"metadata": {"annotations": {"service.kubernetes.io/topology-aware-hints": "disabled"}}});
        assert!(Lifecycle.warnings(&off).is_empty());
        let honoured = json!({"spec": {"trafficDistribution": "PreferClose"}});
        assert!(Lifecycle.warnings(&honoured).is_empty());
    }

    #[test]
    fn leaving_node_port_drops_the_ports_it_was_given_but_not_new_ones() {
        let old = json!({"spec": {"type": "NodePort", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "nodePort": 30080}]}});
        let mut new = old.clone();
        new["spec"]["type"] = json!("ClusterIP");
        drop_type_dependent_fields(&mut new, &old);
        assert_eq!(
            new["spec"],
            json!({"type": "ClusterIP", "ports": [{"port": 80}]})
        );
        assert_eq!(
            Lifecycle.released_by_update(&old, &new),
            vec![("port".to_string(), "30080".to_string())]
        );
        // A port the client changed in the same update is theirs to keep (and fails validation).
        let mut asked = old.clone();
        asked["spec"]["type"] = json!("ClusterIP");
        asked["spec"]["ports"][0]["nodePort"] = json!(30099);
        drop_type_dependent_fields(&mut asked, &old);
        assert_eq!(asked["spec"]["ports"][0]["nodePort"], 30099);
    }
}
