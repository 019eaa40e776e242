//! The built-in service load balancer, as k3s' ServiceLB: a Service of type
//! LoadBalancer with no `loadBalancerClass` (or ours) gets the InternalIPs
//! of the Ready nodes in `status.loadBalancer.ingress`, and every node's
//! kube-proxy answers the Service's port on its own address (the rules
//! Kubernetes' kube-proxy writes for a load balancer's IP). Services of
//! another class are left to their controller; `--service-lb=false` turns
//! this one off.
//!
//! ```text
//!  Service web (LoadBalancer, port 80) ──▶ status.loadBalancer.ingress: [{ip: node1}, {ip: node2}]
//!  client ──▶ node2:80 ──(kube-proxy: -d node2 --dport 80)──▶ KUBE-SVC-… ──▶ a pod
//! ```

use k8s_openapi::api::core::v1::{Node, Service};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;

/// The `loadBalancerClass` this controller serves besides none.
pub const LOAD_BALANCER_CLASS: &str = "minik8s.io/service-lb";

/// Whether the Service is a load balancer this controller serves.
pub fn is_ours(svc: &Service) -> bool {
    let Some(spec) = &svc.spec else { return false };
    spec.type_.as_deref() == Some("LoadBalancer")
        && spec
            .load_balancer_class
            .as_deref()
            .is_none_or(|c| c == LOAD_BALANCER_CLASS)
}

/// A node's InternalIP, if it is Ready.
fn ready_address(node: &Node) -> Option<String> {
    let status = node.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ready {
        return None;
    }
    status
        .addresses
        .iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// The `status.loadBalancer` the Service should have: the Ready nodes'
/// addresses for one of ours (in address order, so it is stable), none for
/// a Service that is no longer a load balancer, and None (leave it) for
/// another class's.
pub fn desired_status(svc: &Service, nodes: &[Arc<Node>]) -> Option<Value> {
    if is_ours(svc) {
        let mut ips: Vec<String> = nodes.iter().filter_map(|n| ready_address(n)).collect();
        ips.sort();
        ips.dedup();
        let ingress: Vec<Value> = ips
            .into_iter()
            .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
            .collect();
        return Some(json!({"ingress": ingress}));
    }
    let is_load_balancer =
        svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
    (!is_load_balancer).then(|| json!({}))
}

pub struct ServiceLb {
    client: Client,
    services: Cache<Service>,
    nodes: Cache<Node>,
}

impl ServiceLb {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ServiceLb {
            client,
            services: informers.cache(),
            nodes: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Service>(informers)?
            // A node that comes, goes or changes readiness changes every load balancer.
            .watches::<Node, _>(informers, |lb, ev| {
                if let Event::Updated { old, new } = ev {
                    if ready_address(old) == ready_address(new) {
                        return Vec::new();
                    }
                }
                lb.services
                    .list()
                    .iter()
                    .filter(|s| is_ours(s))
                    .map(|s| object_key(&s.metadata))
                    .collect()
            })
    }
}

impl Reconciler for ServiceLb {
    const NAME: &'static str = "service-lb";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(svc) = self.services.get(key) else {
            return Ok(Action::Done);
        };
        let Some(want) = desired_status(&svc, &self.nodes.list()) else {
            return Ok(Action::Done);
        };
        let have = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .map(|lb| serde_json::to_value(lb).unwrap_or_default())
            .unwrap_or_else(|| json!({}));
        if have == want {
            return Ok(Action::Done);
        }
        let api = self
            .client
            .dynamic(registry::of::<Service>(), svc.metadata.namespace.as_deref());
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        // A replacing patch of the list: merge-patching `ingress` swaps the whole list.
        let patch = json!({"status": {"loadBalancer": {"ingress": want.get("ingress").cloned().unwrap_or(Value::Null)}}});
        api.patch(name, Some("status"), content::MERGE_PATCH, &patch)
            .await?;
        tracing::info!(service = %key, ingress = %want, "load balancer addresses set");
        Ok(Action::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ip: &str, ready: bool) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name}, "status": {
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
            .unwrap(),
        )
    }

    fn service(spec: Value) -> Service {
        serde_json::from_value(
            json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn ours_get_the_ready_nodes_addresses_others_are_left_alone() {
        let nodes = [
            node("n2", "192.168.77.12", true),
            node("n1", "192.168.77.11", true),
            node("n3", "192.168.77.13", false),
        ];
        let lb = service(json!({"type": "LoadBalancer"}));
        assert_eq!(
            desired_status(&lb, &nodes),
            Some(json!({"ingress": [
                {"ip": "192.168.77.11", "ipMode": "VIP"},
                {"ip": "192.168.77.12", "ipMode": "VIP"}]}))
        );
        let other =
            service(json!({"type": "LoadBalancer", "loadBalancerClass": "example.com/metal"}));
        assert_eq!(desired_status(&other, &nodes), None);
        let ours =
            service(json!({"type": "LoadBalancer", "loadBalancerClass": LOAD_BALANCER_CLASS}));
        assert!(desired_status(&ours, &nodes).is_some());
        // No longer a load balancer: its addresses go.
        let plain = service(json!({"type": "ClusterIP"}));
        assert_eq!(desired_status(&plain, &nodes), Some(json!({})));
    }
}
