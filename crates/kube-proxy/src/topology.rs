//! Topology-aware routing (`spec.trafficDistribution`): which of a Service's
//! ready endpoints this node sends cluster traffic to.
//!
//! The EndpointSlice controller writes the decision into the slices as hints
//! (`forZones` with the endpoint's zone, `forNodes` with its node for
//! `PreferSameNode`); each kube-proxy reads them for its own node and zone,
//! as Kubernetes' `CategorizeEndpoints` does:
//!
//! ```text
//!   every ready endpoint has a node hint, one names this node  ──▶ those endpoints
//!   else every ready endpoint has a zone hint, one names my zone ──▶ those endpoints
//!   else                                                         ──▶ all endpoints
//! ```
//!
//! The fallback is decided for the whole Service, never per endpoint: one
//! endpoint without a hint (a slice not yet updated, a pod on a node with no
//! zone label) means cluster-wide routing, so no node is left without
//! endpoints while hints are half-written.

use minik8s_api::endpoints::NodeEndpoint;

/// Where this node sends a Service's cluster traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every ready endpoint.
    Cluster,
    /// The endpoints hinted for this node (`PreferSameNode`).
    SameNode,
    /// The endpoints hinted for this node's zone (`PreferSameZone`, `PreferClose`).
    SameZone,
}

/// The mode the hints of the ready endpoints allow on node `node` in `zone`
/// (`""` when the node has no `topology.kubernetes.io/zone` label).
pub fn mode(ready: &[NodeEndpoint], node: &str, zone: &str) -> Mode {
    if ready.is_empty() {
        return Mode::Cluster;
    }
    let all_node_hints = ready.iter().all(|e| !e.for_nodes.is_empty());
    if all_node_hints && ready.iter().any(|e| e.for_nodes.iter().any(|n| n == node)) {
        return Mode::SameNode;
    }
    let all_zone_hints = ready.iter().all(|e| !e.for_zones.is_empty());
    if all_zone_hints
        && !zone.is_empty()
        && ready.iter().any(|e| e.for_zones.iter().any(|z| z == zone))
    {
        return Mode::SameZone;
    }
    Mode::Cluster
}

/// The ready endpoints this node uses for cluster traffic.
pub fn filter(ready: Vec<NodeEndpoint>, node: &str, zone: &str) -> Vec<NodeEndpoint> {
    match mode(&ready, node, zone) {
        Mode::Cluster => ready,
        Mode::SameNode => ready
            .into_iter()
            .filter(|e| e.for_nodes.iter().any(|n| n == node))
            .collect(),
        Mode::SameZone => ready
            .into_iter()
            .filter(|e| e.for_zones.iter().any(|z| z == zone))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(address: &str, zones: &[&str], nodes: &[&str]) -> NodeEndpoint {
        NodeEndpoint {
            address: address.into(),
            port: 80,
            for_zones: zones.iter().map(|z| z.to_string()).collect(),
            for_nodes: nodes.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    fn addresses(eps: &[NodeEndpoint]) -> Vec<&str> {
        eps.iter().map(|e| e.address.as_str()).collect()
    }

    #[test]
    fn zone_hints_keep_traffic_in_the_zone() {
        let ready = vec![
            ep("a", &["z1"], &[]),
            ep("b", &["z2"], &[]),
            ep("c", &["z1"], &[]),
        ];
        assert_eq!(mode(&ready, "n1", "z1"), Mode::SameZone);
        assert_eq!(addresses(&filter(ready.clone(), "n1", "z1")), ["a", "c"]);
        assert_eq!(addresses(&filter(ready.clone(), "n2", "z2")), ["b"]);
        // A zone with no endpoint of its own, or a node without a zone label:
        // every endpoint.
        assert_eq!(filter(ready.clone(), "n3", "z3").len(), 3);
        assert_eq!(filter(ready, "n4", "").len(), 3);
    }

    #[test]
    fn one_endpoint_without_a_hint_means_cluster_wide() {
        let ready = vec![ep("a", &["z1"], &[]), ep("b", &[], &[])];
        assert_eq!(mode(&ready, "n1", "z1"), Mode::Cluster);
        assert_eq!(filter(ready, "n1", "z1").len(), 2);
    }

    #[test]
    fn node_hints_come_before_zone_hints() {
        let ready = vec![
            ep("a", &["z1"], &["n1"]),
            ep("b", &["z1"], &["n2"]),
            ep("c", &["z2"], &["n3"]),
        ];
        assert_eq!(addresses(&filter(ready.clone(), "n1", "z1")), ["a"]);
        // No endpoint on this node: the node's zone.
        assert_eq!(mode(&ready, "n5", "z1"), Mode::SameZone);
        assert_eq!(addresses(&filter(ready.clone(), "n5", "z1")), ["a", "b"]);
        assert_eq!(filter(ready, "n6", "z9").len(), 3);
    }
}
