//! NetworkPolicy as iptables chains (filter table), the way kube-router's
//! and Calico's iptables modes enforce it: a chain per isolated pod and
//! direction, a chain per policy rule's peers, a mark meaning "allowed".
//! Pure: policies, pods and namespaces in, chains out.
//!
//! ```text
//!  FORWARD ─▶ KUBE-NWPLCY: RELATED,ESTABLISHED ─▶ RETURN (replies always pass)
//!               -s <pod isolated for egress>  ─▶ KUBE-NWPLCY-E-<pod>
//!               -d <pod isolated for ingress> ─▶ KUBE-NWPLCY-I-<pod>
//!  KUBE-NWPLCY-I-<pod>: clear the mark
//!               [port of a rule] ─▶ KUBE-NWPLCY-R-<policy rule>: -s <peer> ─▶ MARK 0x20000
//!               marked ─▶ RETURN (allowed: on to the next check)
//!               otherwise ─▶ REJECT (TCP reset) / DROP
//! ```
//!
//! A pod is isolated for a direction when a policy of its namespace selects
//! it with that policy type; then only what some such policy's rules allow
//! passes. Traffic is checked after the Service DNAT (pod addresses, as
//! Kubernetes defines), and traffic to or from the node itself never meets
//! FORWARD, so kubelet probes and the node-local cluster DNS always work.
//! Every node holds the rules for every pod: on the source node the egress
//! check decides, on the destination node the ingress check.

use super::Chains;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::hash::{fnv32a, safe_encode};
use minik8s_api::selector::Selector;
use std::collections::{BTreeMap, BTreeSet};

/// The chain FORWARD jumps to.
pub const POLICIES: &str = "KUBE-NWPLCY";
/// The mark bit a peer chain sets when the peer and port are allowed.
const MARK_BIT: &str = "0x20000";

/// A pod as policies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPod {
    pub namespace: String,
    pub name: String,
    pub ip: String,
    pub labels: BTreeMap<String, String>,
    /// Named container ports: (name, protocol, number).
    pub ports: Vec<(String, String, u16)>,
}

/// Labels of each namespace, by name.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn letter(self) -> &'static str {
        match self {
            Direction::Ingress => "I",
            Direction::Egress => "E",
        }
    }
    /// The address of the peer in a packet: the source of ingress traffic.
    fn peer_flag(self) -> &'static str {
        match self {
            Direction::Ingress => "-s",
            Direction::Egress => "-d",
        }
    }
}

/// A chain name of at most 28 characters: `KUBE-NWPLCY-<kind>-<14 chars>`.
fn chain(kind: &str, key: &str) -> String {
    let a = safe_encode(fnv32a(key.as_bytes()));
    let b = safe_encode(fnv32a(format!("{key}#").as_bytes()));
    let hash: String = format!("{a}{b}").to_uppercase().chars().take(14).collect();
    format!("{POLICIES}-{kind}-{hash}")
}

fn selector(
    ls: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Option<Selector> {
    match ls {
        None => Some(Selector::everything()),
        Some(ls) => Selector::from_label_selector(ls).ok(),
    }
}

/// An IPv4 CIDR as iptables-save prints it (the network address), or None
/// for IPv6 and anything unparsable (no IPv4 pod can match it).
fn ipv4_cidr(cidr: &str) -> Option<String> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 32)?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Some(format!(
        "{}/{bits}",
        std::net::Ipv4Addr::from(u32::from(ip) & mask)
    ))
}

/// Everything the chains are computed from.
pub struct Cluster<'a> {
    pub policies: &'a [std::sync::Arc<NetworkPolicy>],
    pub pods: &'a [PolicyPod],
    pub namespaces: &'a NamespaceLabels,
}

impl Cluster<'_> {
    fn in_namespace<'p>(&'p self, ns: &'p str) -> impl Iterator<Item = &'p PolicyPod> + 'p {
        self.pods.iter().filter(move |p| p.namespace == ns)
    }

    /// The pods a peer selects, seen from a policy in `ns`.
    fn peer_pods<'p>(&'p self, ns: &'p str, peer: &NetworkPolicyPeer) -> Vec<&'p PolicyPod> {
        let pods = selector(peer.pod_selector.as_ref());
        let Some(pods) = pods else {
            return Vec::new();
        };
        match &peer.namespace_selector {
            None => self
                .in_namespace(ns)
                .filter(|p| pods.matches(&p.labels))
                .collect(),
            Some(nss) => {
                let Some(nss) = selector(Some(nss)) else {
                    return Vec::new();
                };
                let none = BTreeMap::new();
                self.pods
                    .iter()
                    .filter(|p| nss.matches(self.namespaces.get(&p.namespace).unwrap_or(&none)))
                    .filter(|p| pods.matches(&p.labels))
                    .collect()
            }
        }
    }
}

fn port_match(proto: &str, port: &str) -> String {
    format!("-p {proto} -m {proto} --dport {port}")
}

/// The `-p ... --dport ...` match of a policy port for traffic to `pod`
/// (named ports resolved on it); None when it cannot match; Some("") for
/// any port.
fn resolved_port(p: &NetworkPolicyPort, pod: Option<&PolicyPod>) -> Option<String> {
    let proto = p.protocol.as_deref().unwrap_or("TCP").to_lowercase();
    match &p.port {
        None => Some(format!("-p {proto}")),
        Some(IntOrString::Int(n)) => Some(match p.end_port {
            Some(end) if end > *n => port_match(&proto, &format!("{n}:{end}")),
            _ => port_match(&proto, &n.to_string()),
        }),
        Some(IntOrString::String(name)) => {
            let pod = pod?;
            let (_, _, n) = pod
                .ports
                .iter()
                .find(|(pn, pp, _)| pn == name && pp.eq_ignore_ascii_case(&proto))?;
            Some(port_match(&proto, &n.to_string()))
        }
    }
}

/// The rules of the chain holding one policy rule's peers.
fn peer_rules(
    cluster: &Cluster,
    chains: &mut Chains,
    ns: &str,
    peers: Option<&Vec<NetworkPolicyPeer>>,
    dir: Direction,
    key: &str,
    named: Option<(&str, &str)>,
) -> Vec<String> {
    let flag = dir.peer_flag();
    let mark = format!("-j MARK --set-xmark {MARK_BIT}/{MARK_BIT}");
    let peers = match peers {
        Some(p) if !p.is_empty() => p,
        // No peers: every address.
        _ => return vec![mark],
    };
    let mut rules = Vec::new();
    let mut ips = BTreeSet::new();
    for (i, peer) in peers.iter().enumerate() {
        if let Some(block) = &peer.ip_block {
            if named.is_some() {
                continue; // a named port is a pod's: no address block has it
            }
            let Some(cidr) = ipv4_cidr(&block.cidr) else {
                continue;
            };
            let excepts: Vec<String> = block
                .except
                .iter()
                .flatten()
                .filter_map(|e| ipv4_cidr(e))
                .collect();
            if excepts.is_empty() {
                rules.push(format!("{flag} {cidr} {mark}"));
            } else {
                let sub = chain("B", &format!("{key}/{i}"));
                let mut sub_rules: Vec<String> = excepts
                    .iter()
                    .map(|e| format!("{flag} {e} -j RETURN"))
                    .collect();
                sub_rules.push(format!("{flag} {cidr} {mark}"));
                chains.insert(sub.clone(), sub_rules);
                rules.push(format!("-j {sub}"));
            }
            continue;
        }
        for pod in cluster.peer_pods(ns, peer) {
            match named {
                // Egress to a named port: the port is the peer pod's own.
                Some((name, proto)) => {
                    if let Some((_, _, n)) = pod
                        .ports
                        .iter()
                        .find(|(pn, pp, _)| pn == name && pp.eq_ignore_ascii_case(proto))
                    {
                        let proto = proto.to_lowercase();
                        ips.insert(format!(
                            "{flag} {}/32 {} {mark}",
                            pod.ip,
                            port_match(&proto, &n.to_string())
                        ));
                    }
                }
                None => {
                    ips.insert(format!("{flag} {}/32 {mark}", pod.ip));
                }
            }
        }
    }
    rules.extend(ips);
    rules
}

/// One rule of one policy, in one direction.
struct Rule<'a> {
    ns: &'a str,
    /// `<ns>/<policy>/<I|E>/<index>`: names its chains.
    key: String,
    ports: &'a [NetworkPolicyPort],
    peers: Option<&'a Vec<NetworkPolicyPeer>>,
    dir: Direction,
}

impl Rule<'_> {
    /// The jumps in `pod`'s chain into this rule's peer chains (made in
    /// `chains` the first time): one per port, or one for any port.
    fn jumps(&self, cluster: &Cluster, chains: &mut Chains, pod: &PolicyPod) -> Vec<String> {
        let rule_chain = self.peer_chain(cluster, chains, &self.key, None);
        if self.ports.is_empty() {
            return vec![format!("-j {rule_chain}")];
        }
        let mut jumps = Vec::new();
        for port in self.ports {
            match (&port.port, self.dir) {
                // Egress to a named port: resolved on each peer pod, in a
                // chain of its own.
                (Some(IntOrString::String(port_name)), Direction::Egress) => {
                    let proto = port.protocol.as_deref().unwrap_or("TCP");
                    let key = format!("{}/{port_name}/{proto}", self.key);
                    let named = self.peer_chain(cluster, chains, &key, Some((port_name, proto)));
                    jumps.push(format!("-p {} -j {named}", proto.to_lowercase()));
                }
                _ => {
                    let target = (self.dir == Direction::Ingress).then_some(pod);
                    if let Some(m) = resolved_port(port, target) {
                        jumps.push(format!("{m} -j {rule_chain}"));
                    }
                }
            }
        }
        jumps
    }

    fn peer_chain(
        &self,
        cluster: &Cluster,
        chains: &mut Chains,
        key: &str,
        named: Option<(&str, &str)>,
    ) -> String {
        let name = chain("R", key);
        if !chains.contains_key(&name) {
            let rules = peer_rules(cluster, chains, self.ns, self.peers, self.dir, key, named);
            chains.insert(name.clone(), rules);
        }
        name
    }
}

/// The filter table's policy chains (an empty [`POLICIES`] chain when no
/// policy exists).
pub fn desired(cluster: &Cluster) -> Chains {
    let mut chains = Chains::new();
    let mut isolated: BTreeMap<(String, &'static str), (String, Vec<String>)> = BTreeMap::new();
    let mut policies: Vec<&NetworkPolicy> = cluster.policies.iter().map(|p| p.as_ref()).collect();
    policies.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    for policy in policies {
        let ns = policy.metadata.namespace.as_deref().unwrap_or("default");
        let name = policy.metadata.name.as_deref().unwrap_or("");
        let Some(spec) = &policy.spec else { continue };
        let Some(selects) = selector(spec.pod_selector.as_ref()) else {
            continue;
        };
        let types: Vec<&str> = match &spec.policy_types {
            Some(t) if !t.is_empty() => t.iter().map(String::as_str).collect(),
            _ if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) => vec!["Ingress", "Egress"],
            _ => vec!["Ingress"],
        };
        let selected: Vec<&PolicyPod> = cluster
            .in_namespace(ns)
            .filter(|p| selects.matches(&p.labels))
            .collect();
        for dir in [Direction::Ingress, Direction::Egress] {
            let wanted = match dir {
                Direction::Ingress => "Ingress",
                Direction::Egress => "Egress",
            };
            if !types.contains(&wanted) {
                continue;
            }
            // Each rule: its ports and its peers' chain.
            let rules: Vec<(Vec<NetworkPolicyPort>, Option<Vec<NetworkPolicyPeer>>)> = match dir {
                Direction::Ingress => spec
                    .ingress
                    .iter()
                    .flatten()
                    .map(|r| (r.ports.clone().unwrap_or_default(), r.from.clone()))
                    .collect(),
                Direction::Egress => spec
                    .egress
                    .iter()
                    .flatten()
                    .map(|r| (r.ports.clone().unwrap_or_default(), r.to.clone()))
                    .collect(),
            };
            for pod in &selected {
                let pod_chain = chain(
                    dir.letter(),
                    &format!("{}/{}/{}", pod.namespace, pod.name, pod.ip),
                );
                let entry = isolated
                    .entry((pod.ip.clone(), dir.letter()))
                    .or_insert_with(|| {
                        (
                            pod_chain,
                            vec![format!("-j MARK --set-xmark 0x0/{MARK_BIT}")],
                        )
                    });
                for (r, (ports, peers)) in rules.iter().enumerate() {
                    let rule = Rule {
                        ns,
                        key: format!("{ns}/{name}/{}/{r}", dir.letter()),
                        ports,
                        peers: peers.as_ref(),
                        dir,
                    };
                    entry.1.extend(rule.jumps(cluster, &mut chains, pod));
                }
            }
        }
    }
    let mut entry_rules = Vec::new();
    if !isolated.is_empty() {
        entry_rules.push("-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN".to_string());
    }
    // Egress of the source first, then ingress of the destination.
    for letter in ["E", "I"] {
        for ((ip, l), (pod_chain, mut rules)) in isolated
            .iter()
            .filter(|((_, l), _)| *l == letter)
            .map(|(k, v)| (k.clone(), v.clone()))
        {
            let flag = if l == "E" { "-s" } else { "-d" };
            entry_rules.push(format!("{flag} {ip}/32 -j {pod_chain}"));
            rules.push(format!("-m mark --mark {MARK_BIT}/{MARK_BIT} -j RETURN"));
            rules.push("-p tcp -j REJECT --reject-with tcp-reset".into());
            rules.push("-j DROP".into());
            chains.insert(pod_chain, rules);
        }
    }
    chains.insert(POLICIES.into(), entry_rules);
    chains
}

#[cfg(test)]
mod tests;
