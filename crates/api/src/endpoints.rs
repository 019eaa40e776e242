//! Reading EndpointSlices: which addresses serve a Service port. One rule for
//! every consumer (kube-proxy's rules, the ingress proxy, the serverless
//! gateway): the slice's port of the Service port's name carries the target
//! port, and only endpoints ready and not terminating take traffic.

use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties a slice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Whether `slice` belongs to Service `namespace/service`.
pub fn of_service(slice: &EndpointSlice, namespace: &str, service: &str) -> bool {
    slice.metadata.namespace.as_deref().unwrap_or("default") == namespace
        && slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .is_some_and(|n| n == service)
}

/// The ready, not terminating addresses of `slice` for the Service port named
/// `port_name` (`""` for an unnamed one), each with the target port; empty
/// when the slice has no such port.
pub fn ready(slice: &EndpointSlice, port_name: &str) -> Vec<(String, u16)> {
    ready_on_nodes(slice, port_name)
        .into_iter()
        .map(|e| (e.address, e.port))
        .collect()
}

/// An endpoint address with its target port, the node it runs on and the
/// topology hints the EndpointSlice controller gave it
/// (`spec.trafficDistribution`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub address: String,
    pub port: u16,
    /// `nodeName`.
    pub node: Option<String>,
    /// `hints.forZones[].name`: the zones whose nodes should use this endpoint.
    pub for_zones: Vec<String>,
    /// `hints.forNodes[].name`: the nodes that should use this endpoint.
    pub for_nodes: Vec<String>,
}

/// As [`ready`], with the node each endpoint runs on (`nodeName`), for the
/// node-local traffic policies.
pub fn ready_on_nodes(slice: &EndpointSlice, port_name: &str) -> Vec<NodeEndpoint> {
    on_nodes(slice, port_name, false)
}

/// The endpoints still serving while they terminate, with their nodes:
/// what a proxy falls back to when a Service has no ready endpoint left
/// (Kubernetes' ProxyTerminatingEndpoints), so a rolling update or a
/// drained node does not drop connections it could still serve.
pub fn serving_terminating_on_nodes(slice: &EndpointSlice, port_name: &str) -> Vec<NodeEndpoint> {
    on_nodes(slice, port_name, true)
}

fn on_nodes(slice: &EndpointSlice, port_name: &str, terminating_wanted: bool) -> Vec<NodeEndpoint> {
    let Some(target) = slice
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref().unwrap_or_default() == port_name)
        .and_then(|p| p.port)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in slice.endpoints.iter().flatten() {
        let c = e.conditions.as_ref();
        // Unset means ready (the API's rule for consumers).
        let ready = c.and_then(|c| c.ready).unwrap_or(true);
        let serving = c.and_then(|c| c.serving).unwrap_or(ready);
        let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
        let wanted = match terminating_wanted {
            false => ready && !terminating,
            true => serving && terminating,
        };
        if !wanted {
            continue;
        }
        let hints = e.hints.as_ref();
        let for_zones: Vec<String> = hints
            .and_then(|h| h.for_zones.as_ref())
            .into_iter()
            .flatten()
            .map(|z| z.name.clone())
            .collect();
        let for_nodes: Vec<String> = hints
            .and_then(|h| h.for_nodes.as_ref())
            .into_iter()
            .flatten()
            .map(|n| n.name.clone())
            .collect();
        out.extend(e.addresses.iter().map(|a| NodeEndpoint {
            address: a.clone(),
            port: target as u16,
            node: e.node_name.clone(),
            for_zones: for_zones.clone(),
            for_nodes: for_nodes.clone(),
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_addresses_of_a_named_port() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "web-x", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"name": "", "port": 9000}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": true, "terminating": true}},
                {"addresses": ["10.0.0.4"]}]}))
        .unwrap();
        assert!(of_service(&slice, "ns", "web") && !of_service(&slice, "default", "web"));
        assert_eq!(
            ready(&slice, "http"),
            [
                ("10.0.0.1".to_string(), 8080),
                ("10.0.0.4".to_string(), 8080)
            ]
        );
        assert_eq!(ready(&slice, "").len(), 2);
        assert!(ready(&slice, "admin").is_empty());
    }
}
