//! The node's share of the pod network: which subnet its pods get, and how
//! packets reach the pods of the other nodes.
//!
//! ```text
//!  /run/flannel/subnet.env present?
//!     yes ──▶ pod subnet + MTU from flannel's lease; flannel routes between nodes
//!     no  ──▶ Node.spec.podCIDR (node IPAM or --pod-cidr) and built-in host-gw:
//!
//!   Nodes (informer) ──▶ desired_routes() ──▶ route_changes(current) ──▶ netlink
//!                        (pure: other nodes'     (pure diff)            RTM_NEWROUTE /
//!                         podCIDR via their                             RTM_DELROUTE
//!                         InternalIP)
//!                    └─▶ node_rules() ──▶ iptables-restore --noflush (forward + no-NAT
//!                                          between pod subnets)
//! ```
//!
//! host-gw is flannel's simplest backend: every node routes each other
//! node's pod subnet to that node's address, so it only works when the nodes
//! share a layer-2 segment (a lab bridge, one VM network). Our routes carry
//! their own protocol number ([`ROUTE_PROTOCOL`]) so a restarted kubelet
//! finds and cleans up the ones it made, and never touches anyone else's.

use k8s_openapi::api::core::v1::Node;
use minik8s_api::net::{format_cidr, parse_cidr};
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// `rtm_protocol` of the routes the kubelet adds (any value above
/// RTPROT_STATIC's 4 that no routing daemon uses; `ip route` shows it as a number).
pub const ROUTE_PROTOCOL: u8 = 0x6b;

/// What flannel wrote into `/run/flannel/subnet.env` for this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlannelLease {
    /// The whole cluster's pod network (`FLANNEL_NETWORK`).
    pub network: String,
    /// This node's pod subnet, normalized to its network address.
    pub subnet: String,
    /// The bridge's address (`FLANNEL_SUBNET` names it, e.g. `10.244.3.1/24`).
    pub gateway: Ipv4Addr,
    pub mtu: Option<u32>,
    /// `FLANNEL_IPMASQ`: flannel masquerades pod traffic leaving the pod network itself.
    pub ipmasq: bool,
}

/// Parses flannel's `subnet.env` (shell `KEY=value` lines).
pub fn parse_subnet_env(text: &str) -> Result<FlannelLease, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("not KEY=value: {line:?}"));
        };
        vars.insert(k.trim(), v.trim().trim_matches('"'));
    }
    let subnet_var = vars
        .get("FLANNEL_SUBNET")
        .ok_or("FLANNEL_SUBNET is missing")?;
    let gateway: Ipv4Addr = subnet_var
        .split_once('/')
        .and_then(|(ip, _)| ip.parse().ok())
        .ok_or_else(|| format!("FLANNEL_SUBNET={subnet_var:?} is not an IPv4 CIDR"))?;
    let (net, bits) = parse_cidr(subnet_var).map_err(|e| format!("FLANNEL_SUBNET: {e}"))?;
    let network = match vars.get("FLANNEL_NETWORK") {
        Some(n) => {
            let (n, b) = parse_cidr(n).map_err(|e| format!("FLANNEL_NETWORK: {e}"))?;
            format_cidr(n, b)
        }
        None => String::new(),
    };
    let mtu = match vars.get("FLANNEL_MTU") {
        Some(m) => Some(
            m.parse::<u32>()
                .ok()
                .filter(|m| (576..=65535).contains(m))
                .ok_or_else(|| format!("FLANNEL_MTU={m:?} is not an MTU"))?,
        ),
        None => None,
    };
    Ok(FlannelLease {
        network,
        subnet: format_cidr(net, bits),
        gateway,
        mtu,
        ipmasq: vars.get("FLANNEL_IPMASQ") == Some(&"true"),
    })
}

/// A route to another node's pods: its pod subnet via its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRoute {
    pub dst: Ipv4Addr,
    pub prefix: u8,
    pub via: Ipv4Addr,
}

impl std::fmt::Display for PodRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} via {}", self.dst, self.prefix, self.via)
    }
}

/// A node's InternalIP (else its first address that parses as IPv4).
pub fn node_ip(node: &Node) -> Option<Ipv4Addr> {
    let addrs = node.status.as_ref()?.addresses.as_ref()?;
    addrs
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .chain(addrs.iter())
        .find_map(|a| a.address.parse().ok())
}

/// The host-gw routes this node needs: every other node's pod subnet via that
/// node's address. Nodes without a podCIDR or an address yet are skipped, and
/// so are nodes on a loopback address (several kubelets on one host share one
/// routing table: there is nothing to route) and nodes on this node's own address.
pub fn desired_routes<N: Borrow<Node>>(
    own_name: &str,
    own_ip: Option<Ipv4Addr>,
    nodes: &[N],
) -> Vec<PodRoute> {
    let mut routes: Vec<PodRoute> = nodes
        .iter()
        .map(Borrow::borrow)
        .filter(|n| n.metadata.name.as_deref() != Some(own_name))
        .filter_map(|n| {
            let cidr = n.spec.as_ref()?.pod_cidr.as_deref()?;
            let (dst, prefix) = parse_cidr(cidr).ok()?;
            let via = node_ip(n)?;
            (!via.is_loopback() && !via.is_unspecified() && Some(via) != own_ip)
                .then_some(PodRoute { dst, prefix, via })
        })
        .collect();
    routes.sort();
    // Two nodes claiming one subnet (a stale Node object): the route can only
    // go one way; keep the first by address so every kubelet picks the same.
    routes.dedup_by_key(|r| (r.dst, r.prefix));
    routes
}

/// What to change in the routing table: (routes to add or replace, routes to
/// delete). `current` are the routes carrying our protocol number.
pub fn route_changes(current: &[PodRoute], desired: &[PodRoute]) -> (Vec<PodRoute>, Vec<PodRoute>) {
    let add = desired
        .iter()
        .filter(|r| !current.contains(r))
        .copied()
        .collect();
    // A destination that stays but changes gateway is replaced, not deleted.
    let delete = current
        .iter()
        .filter(|c| {
            !desired
                .iter()
                .any(|d| (d.dst, d.prefix) == (c.dst, c.prefix))
        })
        .copied()
        .collect();
    (add, delete)
}

/// Chain names of the kubelet's own node rules.
pub const FORWARD_CHAIN: &str = "MINIK8S-FORWARD";
pub const POSTROUTING_CHAIN: &str = "MINIK8S-POSTROUTING";

/// The node's iptables rules for the pod network, as `iptables-restore
/// --noflush` input (declaring a chain empties it, so this is the whole
/// content of both chains):
/// - filter MINIK8S-FORWARD: accept forwarded traffic to and from this node's
///   pods (Docker's FORWARD chain would drop new connections arriving from
///   other nodes when the host's FORWARD policy is DROP);
/// - nat MINIK8S-POSTROUTING: traffic between this node's pods and other
///   nodes' pods is not NATed (Docker masquerades everything leaving its
///   bridge), so pods see each other's real IPs, as Kubernetes requires.
pub fn node_rules(pod_cidr: &str, routes: &[PodRoute]) -> String {
    let mut s = String::new();
    s.push_str("*filter\n");
    s.push_str(&format!(":{FORWARD_CHAIN} - [0:0]\n"));
    s.push_str(&format!("-A {FORWARD_CHAIN} -s {pod_cidr} -j ACCEPT\n"));
    s.push_str(&format!("-A {FORWARD_CHAIN} -d {pod_cidr} -j ACCEPT\n"));
    s.push_str("COMMIT\n*nat\n");
    s.push_str(&format!(":{POSTROUTING_CHAIN} - [0:0]\n"));
    for r in routes {
        // ACCEPT ends the nat table's POSTROUTING walk: no MASQUERADE after it.
        s.push_str(&format!(
            "-A {POSTROUTING_CHAIN} -s {pod_cidr} -d {}/{} -j ACCEPT\n",
            r.dst, r.prefix
        ));
    }
    s.push_str("COMMIT\n");
    s
}

/// The jumps into [`node_rules`]' chains: (table, chain, rule).
pub fn node_rule_jumps() -> [(&'static str, &'static str, String); 2] {
    [
        ("filter", "FORWARD", format!("-j {FORWARD_CHAIN}")),
        ("nat", "POSTROUTING", format!("-j {POSTROUTING_CHAIN}")),
    ]
}

/// I/O: the routing table through rtnetlink, the rules through iptables.
pub mod io {
    use super::{PodRoute, ROUTE_PROTOCOL};
    use anyhow::Context;
    use futures::TryStreamExt;
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteProtocol};
    use rtnetlink::RouteMessageBuilder;
    use std::net::Ipv4Addr;
    use tokio::process::Command;

    /// A netlink connection to this network namespace's routing table.
    pub struct Routes {
        handle: rtnetlink::Handle,
    }

    impl Routes {
        pub fn connect() -> anyhow::Result<Routes> {
            let (conn, handle, _) =
                rtnetlink::new_connection().context("opening a netlink route socket")?;
            tokio::spawn(conn);
            Ok(Routes { handle })
        }

        /// The IPv4 routes in the main table that carry our protocol number.
        pub async fn ours(&self) -> anyhow::Result<Vec<PodRoute>> {
            let query = RouteMessageBuilder::<Ipv4Addr>::new().build();
            let mut stream = self.handle.route().get(query).execute();
            let mut found = Vec::new();
            while let Some(msg) = stream.try_next().await.context("listing routes")? {
                if msg.header.protocol != RouteProtocol::Other(ROUTE_PROTOCOL) {
                    continue;
                }
                let mut dst = None;
                let mut via = None;
                for attr in &msg.attributes {
                    match attr {
                        RouteAttribute::Destination(RouteAddress::Inet(a)) => dst = Some(*a),
                        RouteAttribute::Gateway(RouteAddress::Inet(a)) => via = Some(*a),
                        _ => {}
                    }
                }
                if let (Some(dst), Some(via)) = (dst, via) {
                    found.push(PodRoute {
                        dst,
                        prefix: msg.header.destination_prefix_length,
                        via,
                    });
                }
            }
            found.sort();
            Ok(found)
        }

        fn message(r: &PodRoute) -> rtnetlink::packet_route::route::RouteMessage {
            RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(r.dst, r.prefix)
                .gateway(r.via)
                .protocol(RouteProtocol::Other(ROUTE_PROTOCOL))
                .build()
        }

        /// `ip route replace <dst> via <via> proto 0x6b`.
        pub async fn replace(&self, r: &PodRoute) -> anyhow::Result<()> {
            self.handle
                .route()
                .add(Self::message(r))
                .replace()
                .execute()
                .await
                .with_context(|| format!("adding route {r}"))
        }

        pub async fn delete(&self, r: &PodRoute) -> anyhow::Result<()> {
            self.handle
                .route()
                .del(Self::message(r))
                .execute()
                .await
                .with_context(|| format!("deleting route {r}"))
        }
    }

    async fn run(program: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        node_tools::run(cmd, stdin).await?;
        Ok(())
    }

    /// Writes the node rules and makes sure the jumps into them exist.
    pub async fn apply_node_rules(rules: &str) -> anyhow::Result<()> {
        run("iptables-restore", &["-w", "--noflush"], Some(rules)).await?;
        for (table, chain, rule) in super::node_rule_jumps() {
            let words: Vec<&str> = rule.split_whitespace().collect();
            let iptables = || Command::new("iptables");
            node_tools::ensure_iptables_rule(iptables, table, chain, &words).await?;
        }
        Ok(())
    }
}

/// The host-gw loop: keeps the routes to the other nodes' pod subnets (and
/// the node rules that go with them) in line with the Node objects. Runs
/// until the process ends; errors are logged and retried on the next change
/// or after `resync`.
pub async fn run_host_gw(
    client: minik8s_client::Client,
    own_name: String,
    own_ip: Option<Ipv4Addr>,
    pod_cidr: String,
    resync: std::time::Duration,
) -> anyhow::Result<()> {
    use minik8s_client::{Api, Informer, ListParams};
    let routes = io::Routes::connect()?;
    let mut informer = Informer::new(Api::<Node>::all(&client), ListParams::default());
    let nodes = informer.cache();
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let w = wake.clone();
    informer.on_event(move |_| w.notify_one());
    tokio::spawn(informer.run());
    nodes.wait_synced().await;
    let mut applied_rules = String::new();
    loop {
        let desired = desired_routes(&own_name, own_ip, &nodes.list());
        if let Err(e) = sync_routes(&routes, &desired).await {
            tracing::warn!(error = %format!("{e:#}"), "syncing pod routes");
        }
        // Rules only once there is another node to talk to: a single node
        // (or kubelets sharing one host in tests) needs none, and the host's
        // tables stay as they were.
        if !desired.is_empty() {
            let rules = node_rules(&pod_cidr, &desired);
            if rules != applied_rules {
                match io::apply_node_rules(&rules).await {
                    Ok(()) => applied_rules = rules,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "writing the node's pod network rules")
                    }
                }
            }
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(resync) => applied_rules.clear(),
        }
    }
}

/// One pass: the routing table's routes of ours become `desired`.
pub async fn sync_routes(routes: &io::Routes, desired: &[PodRoute]) -> anyhow::Result<()> {
    let current = routes.ours().await?;
    let (add, delete) = route_changes(&current, desired);
    for r in &delete {
        routes.delete(r).await?;
        tracing::info!(route = %r, "removed pod route");
    }
    for r in &add {
        routes.replace(r).await?;
        tracing::info!(route = %r, "added pod route");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cidr: Option<&str>, ip: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": cidr.map(|c| json!({"podCIDR": c})).unwrap_or(json!({})),
            "status": {"addresses": [{"type": "Hostname", "address": name},
                                     {"type": "InternalIP", "address": ip}]}
        }))
        .unwrap()
    }

    #[test]
    fn subnet_env_gives_subnet_gateway_and_mtu() {
        let text = "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";
        let lease = parse_subnet_env(text).unwrap();
        assert_eq!(
            lease,
            FlannelLease {
                network: "10.244.0.0/16".into(),
                subnet: "10.244.3.0/24".into(),
                gateway: Ipv4Addr::new(10, 244, 3, 1),
                mtu: Some(1450),
                ipmasq: true,
            }
        );
    }

    #[test]
    fn subnet_env_errors_name_the_variable() {
        assert!(parse_subnet_env("FLANNEL_MTU=1450\n")
            .unwrap_err()
            .contains("FLANNEL_SUBNET"));
        assert!(
            parse_subnet_env("FLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=big\n")
                .unwrap_err()
                .contains("FLANNEL_MTU")
        );
        assert!(parse_subnet_env("FLANNEL_SUBNET=nonsense\n")
            .unwrap_err()
            .contains("FLANNEL_SUBNET"));
        assert!(parse_subnet_env("garbage line\n").is_err());
        // Optional values may be missing; quotes and comments are fine.
        let lease = parse_subnet_env("# flannel\nFLANNEL_SUBNET=\"10.1.2.1/24\"\n").unwrap();
        assert_eq!(
            (lease.subnet.as_str(), lease.mtu, lease.ipmasq),
            ("10.1.2.0/24", None, false)
        );
    }

    #[test]
    fn routes_go_to_every_other_node_with_a_subnet_and_address() {
        let nodes = vec![
            node("n1", Some("10.244.1.0/24"), "192.168.77.11"),
            node("n2", Some("10.244.2.0/24"), "192.168.77.12"),
            node("n3", Some("10.244.3.0/24"), "192.168.77.13"),
            node("new", None, "192.168.77.14"),
            node("local", Some("10.244.9.0/24"), "127.0.0.1"),
        ];
        let routes = desired_routes("n1", "192.168.77.11".parse().ok(), &nodes);
        let shown: Vec<String> = routes.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "10.244.2.0/24 via 192.168.77.12",
                "10.244.3.0/24 via 192.168.77.13"
            ]
        );
    }

    #[test]
    fn route_diff_adds_replaces_and_deletes() {
        let r = |d: u8, via: u8| PodRoute {
            dst: Ipv4Addr::new(10, 244, d, 0),
            prefix: 24,
            via: Ipv4Addr::new(192, 168, 77, via),
        };
        let current = vec![r(2, 12), r(3, 13), r(4, 14)];
        let desired = vec![r(2, 12), r(3, 23), r(5, 15)];
        let (add, delete) = route_changes(&current, &desired);
        // 3 moved to another node: replaced in place, not deleted.
        assert_eq!(add, vec![r(3, 23), r(5, 15)]);
        assert_eq!(delete, vec![r(4, 14)]);
        assert_eq!(route_changes(&desired, &desired), (vec![], vec![]));
    }

    #[test]
    fn node_rules_accept_forwarding_and_skip_nat_between_pod_subnets() {
        let routes = desired_routes(
            "n1",
            None,
            &[node("n2", Some("10.244.2.0/24"), "192.168.77.12")],
        );
        let rules = node_rules("10.244.1.0/24", &routes);
        assert_eq!(
            rules,
            "*filter\n:MINIK8S-FORWARD - [0:0]\n\
             -A MINIK8S-FORWARD -s 10.244.1.0/24 -j ACCEPT\n\
             -A MINIK8S-FORWARD -d 10.244.1.0/24 -j ACCEPT\nCOMMIT\n\
             *nat\n:MINIK8S-POSTROUTING - [0:0]\n\
             -A MINIK8S-POSTROUTING -s 10.244.1.0/24 -d 10.244.2.0/24 -j ACCEPT\nCOMMIT\n"
        );
    }
}
