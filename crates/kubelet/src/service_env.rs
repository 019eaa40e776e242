//! The Service variables every container gets, as the real kubelet sets
//! them: `KUBERNETES_SERVICE_HOST`/`_PORT` (how client-go's
//! `InClusterConfig`, the Python client's `load_incluster_config` and kopf
//! find the API), and with `enableServiceLinks` (the default) the Docker-link
//! style variables of every Service in the pod's namespace:
//!
//! ```text
//!  REDIS_MASTER_SERVICE_HOST=10.96.0.11   REDIS_MASTER_SERVICE_PORT=6379   REDIS_MASTER_SERVICE_PORT_<NAME>=6379
//!  REDIS_MASTER_PORT=tcp://10.96.0.11:6379
//!  REDIS_MASTER_PORT_6379_TCP=tcp://10.96.0.11:6379  ..._PROTO=tcp  ..._PORT=6379  ..._ADDR=10.96.0.11
//! ```
//!
//! Only Services with a cluster IP count (not headless, not ExternalName).
//! The container's own `env` and `envFrom` come after, and win.

use k8s_openapi::api::core::v1::Service;
use std::borrow::Borrow;

/// The variable prefix of a Service name: upper case, `-` as `_`.
fn prefix(name: &str) -> String {
    name.to_uppercase().replace('-', "_")
}

fn has_cluster_ip(s: &Service) -> bool {
    let spec = s.spec.as_ref();
    let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
    !ip.is_empty() && ip != "None" && spec.and_then(|s| s.type_.as_deref()) != Some("ExternalName")
}

/// One Service's variables.
fn variables(s: &Service, out: &mut Vec<(String, String)>) {
    let Some(spec) = &s.spec else { return };
    let name = prefix(s.metadata.name.as_deref().unwrap_or(""));
    let ip = spec.cluster_ip.clone().unwrap_or_default();
    let ports = spec.ports.as_deref().unwrap_or_default();
    let Some(first) = ports.first() else { return };
    out.push((format!("{name}_SERVICE_HOST"), ip.clone()));
    out.push((format!("{name}_SERVICE_PORT"), first.port.to_string()));
    for p in ports {
        if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((
                format!("{name}_SERVICE_PORT_{}", prefix(port_name)),
                p.port.to_string(),
            ));
        }
    }
    let proto = |p: &k8s_openapi::api::core::v1::ServicePort| {
        p.protocol.clone().unwrap_or_else(|| "TCP".into())
    };
    out.push((
        format!("{name}_PORT"),
        format!("{}://{ip}:{}", proto(first).to_lowercase(), first.port),
    ));
    for p in ports {
        let (upper, lower) = (proto(p).to_uppercase(), proto(p).to_lowercase());
        let at = format!("{name}_PORT_{}_{upper}", p.port);
        out.push((at.clone(), format!("{lower}://{ip}:{}", p.port)));
        out.push((format!("{at}_PROTO"), lower));
        out.push((format!("{at}_PORT"), p.port.to_string()));
        out.push((format!("{at}_ADDR"), ip.clone()));
    }
}

/// The variables for a pod in `namespace`: its namespace's Services (when
/// `links`), and the API's own `kubernetes` Service in `default` always.
pub fn service_env<S: Borrow<Service>>(
    services: &[S],
    namespace: &str,
    links: bool,
) -> Vec<(String, String)> {
    let mut chosen: Vec<&Service> = services
        .iter()
        .map(Borrow::borrow)
        .filter(|s| links && s.metadata.namespace.as_deref() == Some(namespace))
        .filter(|s| has_cluster_ip(s))
        .collect();
    let is_api = |s: &&Service| {
        s.metadata.namespace.as_deref() == Some("default")
            && s.metadata.name.as_deref() == Some("kubernetes")
    };
    if !chosen
        .iter()
        .any(|s| s.metadata.name.as_deref() == Some("kubernetes"))
    {
        let all = services.iter().map(Borrow::borrow);
        if let Some(api) = all.clone().find(|s| is_api(s) && has_cluster_ip(s)) {
            chosen.push(api);
        }
    }
    // Sorted by name, so a container's environment does not depend on list order.
    chosen.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Vec::new();
    for s in chosen {
        variables(s, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
                                      "spec": {"clusterIP": ip, "ports": ports}}))
        .unwrap()
    }

    #[test]
    fn the_api_service_always_and_the_namespaces_services_with_links() {
        let services = [
            service(
                "default",
                "kubernetes",
                "10.96.0.1",
                json!([{"name": "https", "port": 443}]),
            ),
            service(
                "shop",
                "redis-master",
                "10.96.0.11",
                json!([{"port": 6379}]),
            ),
            service("shop", "headless", "None", json!([{"port": 80}])),
            service("other", "web", "10.96.0.12", json!([{"port": 80}])),
        ];
        let env = service_env(&services, "shop", true);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT"), Some("tcp://10.96.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_ADDR"), Some("10.96.0.1"));
        assert_eq!(get("REDIS_MASTER_SERVICE_HOST"), Some("10.96.0.11"));
        assert_eq!(
            get("REDIS_MASTER_PORT_6379_TCP"),
            Some("tcp://10.96.0.11:6379")
        );
        assert_eq!(get("REDIS_MASTER_PORT_6379_TCP_PROTO"), Some("tcp"));
        assert_eq!(get("HEADLESS_SERVICE_HOST"), None, "no cluster IP");
        assert_eq!(get("WEB_SERVICE_HOST"), None, "another namespace");
        let without_links = service_env(&services, "shop", false);
        assert!(without_links
            .iter()
            .all(|(n, _)| n.starts_with("KUBERNETES_")));
        assert!(!without_links.is_empty());
    }
}
