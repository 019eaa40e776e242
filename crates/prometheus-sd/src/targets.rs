//! Target groups with the labels Prometheus' Kubernetes discovery gives each
//! role (its `discovery/kubernetes` package names them), as HTTP SD JSON:
//! `[{"targets": ["10.0.0.1:10250"], "labels": {"__meta_kubernetes_node_name": "n1", …}}]`.

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Map, Value};
use std::sync::Arc;

type Labels = Map<String, Value>;

/// A label name as Prometheus makes one of a Kubernetes label key
/// (`app.kubernetes.io/name` → `app_kubernetes_io_name`).
pub fn sanitized(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `__meta_kubernetes_<role>_label_*`, `labelpresent_*`, `annotation_*` and
/// `annotationpresent_*` of an object.
fn object_labels(labels: &mut Labels, role: &str, meta: &ObjectMeta) {
    let pairs = [("label", &meta.labels), ("annotation", &meta.annotations)];
    for (kind, map) in pairs {
        for (k, v) in map.iter().flatten() {
            let name = sanitized(k);
            labels.insert(format!("__meta_kubernetes_{role}_{kind}_{name}"), json!(v));
            labels.insert(
                format!("__meta_kubernetes_{role}_{kind}present_{name}"),
                json!("true"),
            );
        }
    }
}

fn group(targets: Vec<String>, labels: Labels) -> Value {
    json!({"targets": targets, "labels": labels})
}

/// Role `node`: one target per node, its kubelet (first InternalIP, then
/// the other address types Prometheus prefers, and the kubelet's port).
pub fn node_groups(nodes: &[Arc<Node>]) -> Vec<Value> {
    let mut groups = Vec::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let status = node.status.clone().unwrap_or_default();
        let addresses = status.addresses.unwrap_or_default();
        let address = [
            "InternalIP",
            "InternalDNS",
            "ExternalIP",
            "ExternalDNS",
            "Hostname",
        ]
        .iter()
        .find_map(|t| addresses.iter().find(|a| a.type_ == *t))
        .map(|a| a.address.clone());
        let Some(address) = address else { continue };
        let port = status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map_or(10250, |e| e.port);
        let mut labels = Labels::new();
        labels.insert("__meta_kubernetes_node_name".into(), json!(name));
        labels.insert("instance".into(), json!(name));
        object_labels(&mut labels, "node", &node.metadata);
        for a in &addresses {
            labels
                .entry(format!("__meta_kubernetes_node_address_{}", a.type_))
                .or_insert(json!(a.address));
        }
        groups.push(group(vec![format!("{address}:{port}")], labels));
    }
    groups
}

/// The labels every target of `pod` carries.
fn pod_labels(pod: &Pod) -> Labels {
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map_or("unknown".to_string(), |c| c.status.to_lowercase());
    let mut labels = Labels::new();
    let text = |v: &Option<String>| json!(v.clone().unwrap_or_default());
    labels.insert("__meta_kubernetes_namespace".into(), text(&meta.namespace));
    labels.insert("__meta_kubernetes_pod_name".into(), text(&meta.name));
    labels.insert("__meta_kubernetes_pod_ip".into(), text(&status.pod_ip));
    labels.insert("__meta_kubernetes_pod_ready".into(), json!(ready));
    labels.insert("__meta_kubernetes_pod_phase".into(), text(&status.phase));
    labels.insert(
        "__meta_kubernetes_pod_node_name".into(),
        text(&spec.node_name),
    );
    labels.insert(
        "__meta_kubernetes_pod_host_ip".into(),
        text(&status.host_ip),
    );
    labels.insert("__meta_kubernetes_pod_uid".into(), text(&meta.uid));
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        labels.insert(
            "__meta_kubernetes_pod_controller_kind".into(),
            json!(owner.kind),
        );
        labels.insert(
            "__meta_kubernetes_pod_controller_name".into(),
            json!(owner.name),
        );
    }
    object_labels(&mut labels, "pod", meta);
    labels
}

/// Role `pod`: a target per declared container port (a container without
/// ports: the pod IP alone), for pods that have an IP.
pub fn pod_groups(pods: &[Arc<Pod>]) -> Vec<Value> {
    let mut groups = Vec::new();
    for pod in pods {
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let base = pod_labels(pod);
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec.init_containers.iter().flatten().map(|c| (c, true));
        for (c, is_init) in spec.containers.iter().map(|c| (c, false)).chain(init) {
            let mut labels = base.clone();
            labels.insert("__meta_kubernetes_pod_container_name".into(), json!(c.name));
            labels.insert(
                "__meta_kubernetes_pod_container_image".into(),
                json!(c.image.clone().unwrap_or_default()),
            );
            labels.insert(
                "__meta_kubernetes_pod_container_init".into(),
                json!(is_init.to_string()),
            );
            let ports = c.ports.clone().unwrap_or_default();
            if ports.is_empty() {
                if !is_init {
                    groups.push(group(vec![ip.clone()], labels));
                }
                continue;
            }
            for p in ports {
                let mut labels = labels.clone();
                labels.insert(
                    "__meta_kubernetes_pod_container_port_name".into(),
                    json!(p.name.clone().unwrap_or_default()),
                );
                labels.insert(
                    "__meta_kubernetes_pod_container_port_number".into(),
                    json!(p.container_port.to_string()),
                );
                labels.insert(
                    "__meta_kubernetes_pod_container_port_protocol".into(),
                    json!(p.protocol.clone().unwrap_or("TCP".into())),
                );
                groups.push(group(vec![format!("{ip}:{}", p.container_port)], labels));
            }
        }
    }
    groups
}

/// The labels of a Service's targets (roles `service` and `endpoints`).
fn service_labels(svc: &Service) -> Labels {
    let mut labels = Labels::new();
    let meta = &svc.metadata;
    labels.insert(
        "__meta_kubernetes_namespace".into(),
        json!(meta.namespace.clone().unwrap_or_default()),
    );
    labels.insert(
        "__meta_kubernetes_service_name".into(),
        json!(meta.name.clone().unwrap_or_default()),
    );
    object_labels(&mut labels, "service", meta);
    labels
}

/// Role `service`: a target per Service port, at the Service's DNS name.
pub fn service_groups(services: &[Arc<Service>]) -> Vec<Value> {
    let mut groups = Vec::new();
    for svc in services {
        let spec = svc.spec.clone().unwrap_or_default();
        let (name, ns) = (
            svc.metadata.name.clone().unwrap_or_default(),
            svc.metadata.namespace.clone().unwrap_or_default(),
        );
        for p in spec.ports.iter().flatten() {
            let mut labels = service_labels(svc);
            labels.insert(
                "__meta_kubernetes_service_port_name".into(),
                json!(p.name.clone().unwrap_or_default()),
            );
            labels.insert(
                "__meta_kubernetes_service_port_number".into(),
                json!(p.port.to_string()),
            );
            labels.insert(
                "__meta_kubernetes_service_port_protocol".into(),
                json!(p.protocol.clone().unwrap_or("TCP".into())),
            );
            labels.insert(
                "__meta_kubernetes_service_type".into(),
                json!(spec.type_.clone().unwrap_or("ClusterIP".into())),
            );
            if let Some(ip) = &spec.cluster_ip {
                labels.insert("__meta_kubernetes_service_cluster_ip".into(), json!(ip));
            }
            groups.push(group(vec![format!("{name}.{ns}.svc:{}", p.port)], labels));
        }
    }
    groups
}

/// Role `endpoints`: a target per address and port of each Endpoints, with
/// its Service's labels and, for an address that is a pod, the pod's.
pub fn endpoints_groups(
    endpoints: &[Arc<Endpoints>],
    service: impl Fn(&str) -> Option<Arc<Service>>,
    pod: impl Fn(&str) -> Option<Arc<Pod>>,
) -> Vec<Value> {
    let mut groups = Vec::new();
    for eps in endpoints {
        let (name, ns) = (
            eps.metadata.name.clone().unwrap_or_default(),
            eps.metadata.namespace.clone().unwrap_or_default(),
        );
        let mut base = match service(&format!("{ns}/{name}")) {
            Some(svc) => service_labels(&svc),
            None => Labels::new(),
        };
        base.insert("__meta_kubernetes_namespace".into(), json!(ns));
        base.insert("__meta_kubernetes_endpoints_name".into(), json!(name));
        object_labels(&mut base, "endpoints", &eps.metadata);
        for subset in eps.subsets.iter().flatten() {
            let ready = subset.addresses.iter().flatten().map(|a| (a, true));
            let not_ready = subset
                .not_ready_addresses
                .iter()
                .flatten()
                .map(|a| (a, false));
            for (address, is_ready) in ready.chain(not_ready) {
                let mut labels = base.clone();
                labels.insert(
                    "__meta_kubernetes_endpoint_ready".into(),
                    json!(is_ready.to_string()),
                );
                if let Some(node) = &address.node_name {
                    labels.insert("__meta_kubernetes_endpoint_node_name".into(), json!(node));
                }
                if let Some(host) = &address.hostname {
                    labels.insert("__meta_kubernetes_endpoint_hostname".into(), json!(host));
                }
                let target = address
                    .target_ref
                    .as_ref()
                    .filter(|t| t.kind.as_deref() == Some("Pod"));
                if let Some(t) = target {
                    labels.insert(
                        "__meta_kubernetes_endpoint_address_target_kind".into(),
                        json!("Pod"),
                    );
                    labels.insert(
                        "__meta_kubernetes_endpoint_address_target_name".into(),
                        json!(t.name.clone().unwrap_or_default()),
                    );
                    let key = format!(
                        "{}/{}",
                        t.namespace.clone().unwrap_or(ns.clone()),
                        t.name.clone().unwrap_or_default()
                    );
                    if let Some(p) = pod(&key) {
                        for (k, v) in pod_labels(&p) {
                            labels.entry(k).or_insert(v);
                        }
                    }
                }
                for port in subset.ports.iter().flatten() {
                    let mut labels = labels.clone();
                    labels.insert(
                        "__meta_kubernetes_endpoint_port_name".into(),
                        json!(port.name.clone().unwrap_or_default()),
                    );
                    labels.insert(
                        "__meta_kubernetes_endpoint_port_protocol".into(),
                        json!(port.protocol.clone().unwrap_or("TCP".into())),
                    );
                    groups.push(group(vec![format!("{}:{}", address.ip, port.port)], labels));
                }
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(v: Value) -> Arc<Node> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_node_is_its_kubelet_with_labels_and_addresses() {
        let node = from(
            json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}),
        );
        let groups = node_groups(&[node]);
        assert_eq!(groups[0]["targets"], json!(["10.0.0.5:10250"]));
        let l = &groups[0]["labels"];
        assert_eq!(l["__meta_kubernetes_node_name"], "n1");
        assert_eq!(l["instance"], "n1");
        assert_eq!(
            l["__meta_kubernetes_node_label_kubernetes_io_hostname"],
            "n1"
        );
        assert_eq!(l["__meta_kubernetes_node_address_InternalIP"], "10.0.0.5");
    }

    #[test]
    fn pods_give_a_target_per_port_and_endpoints_carry_service_and_pod() {
        let pod: Arc<Pod> = Arc::new(serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "a", "annotations": {"prometheus.io/scrape": "true"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}]}, {"name": "side", "image": "busybox"}]},
            "status": {"podIP": "10.244.0.7", "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})).unwrap());
        let groups = pod_groups(std::slice::from_ref(&pod));
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0]["targets"], json!(["10.244.0.7:80"]));
        assert_eq!(
            groups[0]["labels"]["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
            "true"
        );
        assert_eq!(groups[0]["labels"]["__meta_kubernetes_pod_ready"], "true");
        assert_eq!(groups[1]["targets"], json!(["10.244.0.7"]));

        let svc: Arc<Service> = Arc::new(
            serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "a", "labels": {"app": "web"}},
            "spec": {"clusterIP": "10.96.0.9", "ports": [{"name": "http", "port": 80}]}}))
            .unwrap(),
        );
        let services = service_groups(std::slice::from_ref(&svc));
        assert_eq!(services[0]["targets"], json!(["web.a.svc:80"]));
        let eps: Arc<Endpoints> = Arc::new(serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "a"},
            "subsets": [{"addresses": [{"ip": "10.244.0.7", "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "a"}}],
                         "ports": [{"name": "http", "port": 80}]}]})).unwrap());
        let groups = endpoints_groups(
            &[eps],
            |k| (k == "a/web").then(|| svc.clone()),
            |k| (k == "a/web-1").then(|| pod.clone()),
        );
        let l = &groups[0]["labels"];
        assert_eq!(groups[0]["targets"], json!(["10.244.0.7:80"]));
        assert_eq!(l["__meta_kubernetes_service_name"], "web");
        assert_eq!(l["__meta_kubernetes_service_label_app"], "web");
        assert_eq!(l["__meta_kubernetes_endpoint_port_name"], "http");
        assert_eq!(l["__meta_kubernetes_pod_name"], "web-1");
        assert_eq!(groups.len(), 1);
        assert_eq!(l["__meta_kubernetes_namespace"], "a");
    }
}
