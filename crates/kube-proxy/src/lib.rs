//! kube-proxy: Service virtual IPs on every node.
//!
//! ```text
//!   Services + EndpointSlices ──▶ service_ports() ──▶ Backend::sync_rules() (proxier.rs: one loop)
//!   (informers)                    (pure)              ├─ iptables/: desired chains (pure) ──▶ iptables-restore --noflush
//!                                                      └─ ipvs/:     desired IPVS state (pure) ──▶ netlink
//! ```
//!
//! [`service_ports`] resolves Services and their EndpointSlices into
//! (VIP, port) → ready endpoints. [`proxier`] is the one loop, over a
//! [`proxier::Backend`]: [`iptables`] (the nat and filter chains, and the
//! minimal `iptables-restore` input that turns the current chains into the
//! desired ones; `iptables/backend.rs` runs the tools) or [`ipvs`] (virtual
//! and real servers; `ipvs/netlink.rs` speaks IPVS generic netlink,
//! `ipvs/backend.rs` applies the changes). [`dns`] is the cluster DNS every
//! node serves to its pods (doc/networking.md).

pub mod dns;
pub mod healthcheck;
pub mod ingress;
pub mod iptables;
pub mod ipvs;
pub mod metrics;
pub mod proxier;
pub mod topology;

/// The backend that programs the VIPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Iptables,
    Ipvs,
}

/// Whether this kernel can do IPVS (the module is loaded or built in).
pub fn kernel_has_ipvs() -> bool {
    std::path::Path::new("/proc/net/ip_vs").exists()
}

/// `--proxy-mode`: empty picks ipvs where the kernel has it, iptables
/// otherwise; an explicit ipvs on a kernel without it falls back to iptables
/// (as kube-proxy does), with a warning.
pub fn choose_mode(flag: &str, has_ipvs: bool) -> Result<Mode, String> {
    match flag {
        "" | "ipvs" if has_ipvs => Ok(Mode::Ipvs),
        "" | "iptables" => Ok(Mode::Iptables),
        "ipvs" => {
            tracing::warn!("the kernel has no IPVS; falling back to iptables");
            Ok(Mode::Iptables)
        }
        other => Err(format!("unknown proxy mode {other:?} (iptables, ipvs)")),
    }
}

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s_client::{Client, SharedInformers};
use std::sync::Arc;

/// This component's client-side rate limit by default (`--kube-api-qps`,
/// `--kube-api-burst`).
pub const API_RATE_LIMIT: (f32, u32) = (20.0, 40);

/// What one kube-proxy serves; each part is optional.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    /// Service VIPs and NodePorts.
    pub proxy: Option<proxier::Config>,
    /// The cluster DNS.
    pub dns: Option<dns::Config>,
    /// The ingress proxy.
    pub ingress: Option<ingress::Options>,
}

/// kube-proxy: the proxier, the cluster DNS and the ingress proxy, on one set
/// of informers (Services and EndpointSlices are what all of them need).
pub async fn run(client: Client, parts: Parts) -> anyhow::Result<()> {
    let Parts {
        proxy,
        dns,
        ingress,
    } = parts;
    let client = client.with_user_agent("kube-proxy");
    let informers = SharedInformers::new(&client);
    let wake = Arc::new(tokio::sync::Notify::new());
    let backend = match proxy {
        Some(cfg) if cfg.mode == Mode::Ipvs => {
            let ports = PortSource::new(&informers, wake.clone(), &cfg.node_name);
            let policies = iptables::backend::PolicySource::new(&informers, wake.clone());
            ipvs::prepare(&cfg).await?;
            let b = ipvs::IpvsBackend::new(ports, cfg.node_ips.clone())
                .await?
                .with_policies(iptables::backend::PolicyEnforcer::new(
                    policies,
                    cfg.iptables.clone(),
                ));
            Some((Chosen::Ipvs(b), cfg))
        }
        Some(cfg) => {
            let b = iptables::backend::IptablesBackend::new(&informers, cfg.clone(), wake.clone());
            Some((Chosen::Iptables(b), cfg))
        }
        None => None,
    };
    let resolver = dns.as_ref().map(|d| dns::Resolver::new(&informers, d));
    // Bind first: a taken port 53 is an error at start, not a silent lack of DNS.
    let sockets = match &dns {
        Some(d) => Some(
            dns::bind(d.listen)
                .await
                .with_context(|| format!("binding the cluster DNS to {}", d.listen))?,
        ),
        None => None,
    };
    let ingress = match &ingress {
        Some(opts) => Some(ingress::Ingress::bind(&client, &informers, opts).await?),
        None => None,
    };
    // The EndpointSlice changes the next sync applies, for its span.
    let changes = proxier::TraceContexts::new(client.clone());
    let noted = changes.clone();
    informers
        .on_event::<EndpointSlice>(move |ev| {
            use minik8s_client::informer::Event;
            if let Event::Added(s) | Event::Updated { new: s, .. } = ev {
                if let Some(uid) = s.metadata.uid.as_deref() {
                    noted.note(uid);
                }
            }
        })
        .expect("registered before start");
    informers.start();
    informers.wait_synced().await;
    if let Some(i) = ingress {
        i.spawn();
    }
    if let (Some(r), Some(s)) = (resolver, sockets) {
        tokio::spawn(async move {
            if let Err(e) = dns::serve(r, s).await {
                tracing::error!(error = %e, "cluster DNS stopped");
            }
        });
    }
    match backend {
        Some((Chosen::Iptables(b), cfg)) => proxier::run(b, wake, &cfg, changes).await,
        Some((Chosen::Ipvs(b), cfg)) => proxier::run(b, wake, &cfg, changes).await,
        None => std::future::pending().await,
    }
    Ok(())
}

/// The backend `--proxy-mode` chose.
enum Chosen {
    Iptables(iptables::backend::IptablesBackend),
    Ipvs(ipvs::IpvsBackend),
}

/// The ServicePorts of every Service, from the Service and EndpointSlice
/// caches both backends read.
pub struct PortSource {
    services: minik8s_client::informer::Cache<Service>,
    slices: minik8s_client::informer::Cache<EndpointSlice>,
    /// This node's name, for the node-local traffic policies.
    node: String,
    /// This node alone (a field-selected informer), for its zone label:
    /// topology-aware routing picks endpoints in the node's zone.
    own_node: Option<minik8s_client::informer::Cache<Node>>,
    /// The health check node ports, kept in line with every sync's ports.
    health: Arc<healthcheck::HealthChecks>,
}

impl PortSource {
    /// Registers on `informers` (before they start); every Service or
    /// EndpointSlice event, or a change of this node's zone, wakes the
    /// backend's loop through `wake`.
    pub fn new(
        informers: &SharedInformers,
        wake: Arc<tokio::sync::Notify>,
        node: &str,
    ) -> PortSource {
        let own_node =
            (!node.is_empty()).then(|| watch_own_node(informers.client(), node, wake.clone()));
        let w = wake.clone();
        informers
            .on_event::<Service>(move |_| w.notify_one())
            .expect("registered before start");
        informers
            .on_event::<EndpointSlice>(move |_| wake.notify_one())
            .expect("registered before start");
        PortSource {
            services: informers.cache(),
            slices: informers.cache(),
            node: node.to_string(),
            own_node,
            health: Arc::default(),
        }
    }

    /// Every Service's ports with their ready endpoints, in name order; the
    /// health check node ports are brought in line with them on the way.
    pub fn ports(&self) -> Vec<ServicePort> {
        let ports = self.service_ports();
        self.health.sync(&ports);
        ports
    }

    fn service_ports(&self) -> Vec<ServicePort> {
        let zone = self
            .own_node
            .as_ref()
            .and_then(|c| c.get(&self.node))
            .and_then(|n| zone_of(&n))
            .unwrap_or_default();
        let slices = self.slices.list();
        let mut ports = Vec::new();
        let mut services = self.services.list();
        services.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for svc in &services {
            let ns = svc.metadata.namespace.as_deref().unwrap_or("default");
            let name = svc.metadata.name.as_deref().unwrap_or("");
            let mine: Vec<&EndpointSlice> = slices
                .iter()
                .filter(|s| {
                    s.metadata.namespace.as_deref() == Some(ns)
                        && s.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("kubernetes.io/service-name"))
                            .is_some_and(|n| n == name)
                })
                .map(|s| s.as_ref())
                .collect();
            ports.extend(service_ports(svc, &mine, &self.node, &zone));
        }
        ports
    }
}

/// The label that places a node in a zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A node's zone (`topology.kubernetes.io/zone`).
pub fn zone_of(node: &Node) -> Option<String> {
    node.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned()
}

/// An informer on this node alone (as Kubernetes' kube-proxy watches its own
/// Node): a change of its zone label wakes the sync, its heartbeats do not.
fn watch_own_node(
    client: &Client,
    node: &str,
    wake: Arc<tokio::sync::Notify>,
) -> minik8s_client::informer::Cache<Node> {
    use minik8s_client::informer::Event;
    let mut informer = minik8s_client::Informer::new(
        minik8s_client::Api::<Node>::all(client),
        minik8s_client::ListParams::default().fields(&format!("metadata.name={node}")),
    );
    informer.on_event(move |ev: &Event<Node>| {
        let changed = match ev {
            Event::Updated { old, new } => zone_of(old) != zone_of(new),
            _ => true,
        };
        if changed {
            wake.notify_one();
        }
    });
    let cache = informer.cache();
    tokio::spawn(informer.run());
    cache
}

/// One port of one Service, with the endpoints that serve it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicePort {
    pub namespace: String,
    pub service: String,
    /// The Service port's name ("" when the Service has a single unnamed port).
    pub port_name: String,
    /// "TCP" or "UDP".
    pub protocol: String,
    pub cluster_ip: String,
    pub port: u16,
    pub node_port: Option<u16>,
    /// Ready endpoints as (ip, port), sorted, so the rules are stable.
    pub endpoints: Vec<(String, u16)>,
    /// `sessionAffinity: ClientIP`: how long (seconds) a client keeps its
    /// endpoint after its last new connection.
    pub affinity_seconds: Option<u32>,
    /// The ready endpoints on this node (a subset of `endpoints`).
    pub local_endpoints: Vec<(String, u16)>,
    /// `internalTrafficPolicy: Local`: the ClusterIP reaches only this node's endpoints.
    pub internal_local: bool,
    /// `externalTrafficPolicy: Local`: the NodePort reaches only this node's
    /// endpoints, with the client's source address kept.
    pub external_local: bool,
    /// The Service's `healthCheckNodePort` (a LoadBalancer with the Local
    /// external policy): served by [`healthcheck`].
    pub health_check_node_port: Option<u16>,
    /// A LoadBalancer's addresses (`status.loadBalancer.ingress[].ip`),
    /// answered at the Service's port.
    pub load_balancer_ips: Vec<String>,
}

impl ServicePort {
    /// The endpoints traffic to the ClusterIP may reach on this node.
    pub fn internal_endpoints(&self) -> &[(String, u16)] {
        if self.internal_local {
            &self.local_endpoints
        } else {
            &self.endpoints
        }
    }

    /// The endpoints traffic from outside the cluster to a NodePort may reach.
    pub fn external_endpoints(&self) -> &[(String, u16)] {
        if self.external_local {
            &self.local_endpoints
        } else {
            &self.endpoints
        }
    }
}

/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_SECONDS: u32 = 10800;

/// The ClientIP affinity timeout of a Service (None: no affinity).
pub fn affinity_seconds(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Option<u32> {
    if spec.session_affinity.as_deref() != Some("ClientIP") {
        return None;
    }
    let configured = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds)
        .and_then(|t| u32::try_from(t).ok())
        .filter(|t| *t > 0);
    Some(configured.unwrap_or(DEFAULT_AFFINITY_SECONDS))
}

/// The IPv4 addresses of a LoadBalancer Service's `status.loadBalancer`.
fn load_balancer_ips(svc: &Service) -> Vec<String> {
    if svc.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("LoadBalancer") {
        return Vec::new();
    }
    let mut ips: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// The ServicePorts of `svc` from its EndpointSlices (`kubernetes.io/service-name`
/// label). A targetPort given by name is resolved through the slices' named
/// ports, as the EndpointSlice controller wrote them. Headless Services and
/// ExternalName Services get no ports (nothing to proxy). `node` and `zone`
/// are this node's name and zone: the node-local policies and the topology
/// hints ([`topology`]) are read for them.
pub fn service_ports(
    svc: &Service,
    slices: &[&EndpointSlice],
    node: &str,
    zone: &str,
) -> Vec<ServicePort> {
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    let cluster_ip = spec.cluster_ip.clone().unwrap_or_default();
    if cluster_ip.is_empty()
        || cluster_ip == "None"
        || spec.type_.as_deref() == Some("ExternalName")
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for p in spec.ports.iter().flatten() {
        let port_name = p.name.clone().unwrap_or_default();
        let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
        use minik8s_api::endpoints::NodeEndpoint;
        // (the cluster policy's endpoints, after the topology hints; this node's)
        let collect = |pick: fn(&EndpointSlice, &str) -> Vec<NodeEndpoint>, hinted: bool| {
            let found: Vec<NodeEndpoint> =
                slices.iter().flat_map(|s| pick(s, &port_name)).collect();
            let mut local: Vec<(String, u16)> = found
                .iter()
                .filter(|e| !node.is_empty() && e.node.as_deref() == Some(node))
                .map(|e| (e.address.clone(), e.port))
                .collect();
            let cluster = match hinted {
                true => topology::filter(found, node, zone),
                false => found,
            };
            let mut all: Vec<(String, u16)> =
                cluster.into_iter().map(|e| (e.address, e.port)).collect();
            for list in [&mut all, &mut local] {
                list.sort();
                list.dedup();
            }
            (all, local)
        };
        let (mut endpoints, mut local_endpoints) =
            collect(minik8s_api::endpoints::ready_on_nodes, true);
        // No ready endpoint (cluster-wide, or here for the local ones): those
        // still serving while they terminate take the traffic, as in Kubernetes.
        if endpoints.is_empty() || local_endpoints.is_empty() {
            let (terminating, local_terminating) =
                collect(minik8s_api::endpoints::serving_terminating_on_nodes, false);
            if endpoints.is_empty() {
                endpoints = terminating;
            }
            if local_endpoints.is_empty() {
                local_endpoints = local_terminating;
            }
        }
        let externally = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
        out.push(ServicePort {
            namespace: svc
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            service: svc.metadata.name.clone().unwrap_or_default(),
            port_name,
            protocol,
            cluster_ip: cluster_ip.clone(),
            port: p.port as u16,
            node_port: p.node_port.map(|n| n as u16),
            endpoints,
            affinity_seconds: affinity_seconds(spec),
            local_endpoints,
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            external_local: externally && spec.external_traffic_policy.as_deref() == Some("Local"),
            health_check_node_port: spec
                .health_check_node_port
                .filter(|_| {
                    spec.type_.as_deref() == Some("LoadBalancer")
                        && spec.external_traffic_policy.as_deref() == Some("Local")
                })
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0),
            load_balancer_ips: load_balancer_ips(svc),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_resolve_through_the_slices_and_skip_unready_endpoints() {
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d"},
            "spec": {"clusterIP": "10.96.0.10", "type": "NodePort", "ports": [
                {"name": "http", "port": 80, "targetPort": "web", "nodePort": 30080},
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}))
            .unwrap();
        let slice: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
            "endpoints": [
                {"addresses": ["10.244.2.5"], "conditions": {"ready": true}},
                {"addresses": ["10.244.1.7"], "conditions": {"ready": true}},
                {"addresses": ["10.244.1.9"], "conditions": {"ready": false}},
                {"addresses": ["10.244.3.1"], "conditions": {"ready": true, "terminating": true}}]}))
        .unwrap();
        let ports = service_ports(&svc, &[&slice], "n1", "");
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].port_name, "http");
        assert_eq!(ports[0].node_port, Some(30080));
        assert_eq!(
            ports[0].endpoints,
            vec![
                ("10.244.1.7".to_string(), 8080),
                ("10.244.2.5".to_string(), 8080)
            ]
        );
        assert_eq!(ports[1].protocol, "UDP");
        assert_eq!(ports[1].endpoints[0].1, 5353);
        // Only terminating endpoints left: those still serving take the traffic.
        let draining: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.244.1.9"], "nodeName": "n1", "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["10.244.2.9"], "nodeName": "n2", "conditions": {"ready": false, "serving": false, "terminating": true}}]}))
        .unwrap();
        let ports = service_ports(&svc, &[&draining], "n1", "");
        assert_eq!(ports[0].endpoints, vec![("10.244.1.9".to_string(), 8080)]);
        assert_eq!(
            ports[0].local_endpoints,
            vec![("10.244.1.9".to_string(), 8080)]
        );
        let headless: Service = serde_json::from_value(json!({"metadata": {"name": "h"},
            "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}))
        .unwrap();
        assert!(service_ports(&headless, &[&slice], "n1", "").is_empty());
    }
}
