//! Node IPAM: gives every node without one a pod subnet (`spec.podCIDR`) from
//! `--cluster-cidr` (10.244.0.0/16), `--node-cidr-mask-size` (24) each. A node
//! that already has one (its kubelet's `--pod-cidr`, or flannel's lease) keeps
//! it, and that subnet is never handed to another node.
//!
//! One worker allocates, remembering what it handed out until the watch shows
//! it, so two nodes registering together never get the same subnet.

use crate::lock;
use k8s_openapi::api::core::v1::Node;
use minik8s_api::net::{format_cidr, parse_cidr};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// The cluster range cut into node subnets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    net: u32,
    cluster_bits: u8,
    node_bits: u8,
}

impl Range {
    pub fn new(cluster_cidr: &str, node_mask: u8) -> Result<Range, String> {
        let (net, cluster_bits) = parse_cidr(cluster_cidr)?;
        if node_mask < cluster_bits || node_mask > 30 {
            return Err(format!(
                "--node-cidr-mask-size {node_mask} must be between the cluster CIDR's /{cluster_bits} and /30"
            ));
        }
        Ok(Range {
            net: u32::from(net),
            cluster_bits,
            node_bits: node_mask,
        })
    }

    /// The first node subnet that is not in `used` (CIDR strings), if any is left.
    pub fn first_free(&self, used: &HashSet<String>) -> Option<String> {
        let count = 1u64 << (self.node_bits - self.cluster_bits);
        let step = 1u64 << (32 - self.node_bits);
        (0..count)
            .map(|i| format_cidr(Ipv4Addr::from(self.net + (i * step) as u32), self.node_bits))
            .find(|c| !used.contains(c))
    }
}

fn pod_cidr(node: &Node) -> Option<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidr.clone())
        .filter(|c| !c.is_empty())
}

pub struct NodeIpamController {
    client: Client,
    nodes: Cache<Node>,
    range: Range,
    /// Subnets handed out that the cache may not show yet.
    handed_out: Mutex<HashSet<String>>,
}

impl NodeIpamController {
    /// Builds the controller on the shared Node informer: it wakes for nodes
    /// without a podCIDR. Run it with one worker: allocation is serial.
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        range: Range,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(NodeIpamController {
            client,
            nodes: informers.cache(),
            range,
            handed_out: Mutex::default(),
        });
        Controller::new(ctl, WorkQueue::new()).watches::<Node, _>(
            informers,
            |_, ev| match pod_cidr(ev.object()) {
                None => vec![ev.object().metadata.name.clone().unwrap_or_default()],
                Some(_) => Vec::new(),
            },
        )
    }
}

impl Reconciler for NodeIpamController {
    const NAME: &'static str = "nodeipam";

    /// Gives the node a subnet unless it has one.
    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let Some(node) = self.nodes.get(name) else {
            return Ok(Action::Done);
        };
        if pod_cidr(&node).is_some() {
            return Ok(Action::Done);
        }
        let mut used: HashSet<String> = self
            .nodes
            .list()
            .iter()
            .filter_map(|n| pod_cidr(n))
            .collect();
        used.extend(lock(&self.handed_out).iter().cloned());
        let Some(cidr) = self.range.first_free(&used) else {
            tracing::warn!(node = name, "no pod CIDR left in the cluster range");
            return Ok(Action::Done);
        };
        let nodes = self.client.dynamic(registry::of::<Node>(), None);
        let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
                           "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
        match nodes.patch(name, None, content::MERGE_PATCH, &patch).await {
            Ok(_) => {
                tracing::info!(node = name, %cidr, "assigned pod CIDR");
                lock(&self.handed_out).insert(cidr);
                Ok(Action::Done)
            }
            Err(e) if e.is_not_found() => Ok(Action::Done),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_the_first_free_subnet() {
        let r = Range::new("10.244.0.0/16", 24).unwrap();
        let mut used = HashSet::new();
        assert_eq!(r.first_free(&used).as_deref(), Some("10.244.0.0/24"));
        used.insert("10.244.0.0/24".to_string());
        used.insert("10.244.2.0/24".to_string());
        assert_eq!(r.first_free(&used).as_deref(), Some("10.244.1.0/24"));
        let small = Range::new("10.1.0.0/23", 24).unwrap();
        let full: HashSet<String> = ["10.1.0.0/24", "10.1.1.0/24"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(small.first_free(&full), None);
        assert!(Range::new("10.244.0.0/16", 8).is_err());
        assert!(Range::new("nonsense", 24).is_err());
    }
}
