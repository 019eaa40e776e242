//! Where an Ingress backend's requests go: the Service port (by number or
//! name) and its ready endpoints from the Service's EndpointSlices, straight
//! to the pods (no VIP in between, as ingress controllers do). Pure.

use super::routes::{Backend, ServicePort};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::net::SocketAddr;

/// Why a backend cannot be served (reported in an event; its paths answer 503).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unservable {
    ServiceNotFound,
    PortNotFound,
}

impl Unservable {
    /// The event's reason and message about `b`.
    pub fn describe(&self, b: &Backend) -> (&'static str, String) {
        let port = match &b.port {
            ServicePort::Number(n) => n.to_string(),
            ServicePort::Name(n) => n.clone(),
        };
        match self {
            Unservable::ServiceNotFound => (
                "ServiceNotFound",
                format!("service \"{}/{}\" not found", b.namespace, b.service),
            ),
            Unservable::PortNotFound => (
                "ServicePortNotFound",
                format!(
                    "service \"{}/{}\" has no port {port}",
                    b.namespace, b.service
                ),
            ),
        }
    }
}

/// The ready, not terminating endpoints of `b`, sorted (for a stable round robin).
pub fn resolve(
    b: &Backend,
    services: &[&Service],
    slices: &[&EndpointSlice],
) -> Result<Vec<SocketAddr>, Unservable> {
    let svc = services
        .iter()
        .find(|s| {
            s.metadata.namespace.as_deref().unwrap_or("default") == b.namespace
                && s.metadata.name.as_deref() == Some(b.service.as_str())
        })
        .ok_or(Unservable::ServiceNotFound)?;
    let port = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| {
            ports.iter().find(|p| match &b.port {
                ServicePort::Number(n) => p.port == *n,
                ServicePort::Name(n) => p.name.as_deref() == Some(n.as_str()),
            })
        })
        .ok_or(Unservable::PortNotFound)?;
    let port_name = port.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    for slice in slices
        .iter()
        .filter(|s| minik8s_api::endpoints::of_service(s, &b.namespace, &b.service))
    {
        for (ip, port) in minik8s_api::endpoints::ready(slice, &port_name) {
            if let Ok(ip) = ip.parse::<std::net::IpAddr>() {
                out.push(SocketAddr::new(ip, port));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn backend(port: ServicePort) -> Backend {
        Backend {
            namespace: "ns".into(),
            service: "web".into(),
            port,
        }
    }

    #[test]
    fn by_number_or_name_to_ready_pods() {
        let svc: Service = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "web"}, {"name": "admin", "port": 9000}]}}))
        .unwrap();
        let slice: EndpointSlice =
            serde_json::from_value(json!({"metadata": {"name": "web-x", "namespace": "ns",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}],
            "endpoints": [
                {"addresses": ["10.244.1.5"], "conditions": {"ready": true}},
                {"addresses": ["10.244.2.7"], "conditions": {"ready": false}},
                {"addresses": ["10.244.1.3"], "conditions": {"ready": true, "terminating": true}},
                {"addresses": ["10.244.3.9"]}]}))
            .unwrap();
        let (s, e) = (vec![&svc], vec![&slice]);
        let by_number = resolve(&backend(ServicePort::Number(80)), &s, &e).unwrap();
        assert_eq!(
            by_number,
            [
                "10.244.1.5:8080".parse().unwrap(),
                "10.244.3.9:8080".parse().unwrap()
            ] as [SocketAddr; 2]
        );
        assert_eq!(
            resolve(&backend(ServicePort::Name("admin".into())), &s, &e).unwrap(),
            [
                "10.244.1.5:9000".parse().unwrap(),
                "10.244.3.9:9000".parse().unwrap()
            ] as [SocketAddr; 2]
        );
        assert_eq!(
            resolve(&backend(ServicePort::Number(81)), &s, &e),
            Err(Unservable::PortNotFound)
        );
        let missing = Backend {
            service: "nope".into(),
            ..backend(ServicePort::Number(80))
        };
        assert_eq!(resolve(&missing, &s, &e), Err(Unservable::ServiceNotFound));
        assert_eq!(
            Unservable::ServiceNotFound.describe(&missing).1,
            "service \"ns/nope\" not found"
        );
        assert_eq!(
            Unservable::PortNotFound
                .describe(&backend(ServicePort::Name("grpc".into())))
                .1,
            "service \"ns/web\" has no port grpc"
        );
    }
}
