//! The policy chains run through a small interpreter of the rules they
//! contain, so each case asserts what a packet meets, not rule text.

use super::*;
use serde_json::json;
use std::sync::Arc;

/// A new connection through the chains: does it pass?
fn passes(chains: &Chains, src: &str, dst: &str, proto: &str, port: u16) -> bool {
    let mut mark = 0u32;
    match walk(chains, POLICIES, src, dst, proto, port, &mut mark) {
        Verdict::Return => true,
        Verdict::Stop => false,
    }
}

enum Verdict {
    Return,
    Stop,
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, bits) = cidr.split_once('/').unwrap();
    let bits: u32 = bits.parse().unwrap();
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    let net: std::net::Ipv4Addr = net.parse().unwrap();
    u32::from(ip) & mask == u32::from(net) & mask
}

fn walk(
    chains: &Chains,
    name: &str,
    src: &str,
    dst: &str,
    proto: &str,
    port: u16,
    mark: &mut u32,
) -> Verdict {
    for rule in &chains[name] {
        let w: Vec<&str> = rule.split_whitespace().collect();
        let mut i = 0;
        let mut matched = true;
        let mut target = "";
        let mut set_mark = None;
        while i < w.len() {
            match w[i] {
                "-s" => {
                    matched &= in_cidr(src, w[i + 1]);
                    i += 2;
                }
                "-d" => {
                    matched &= in_cidr(dst, w[i + 1]);
                    i += 2;
                }
                "-p" => {
                    matched &= w[i + 1] == proto;
                    i += 2;
                }
                "--dport" => {
                    let (lo, hi) = w[i + 1].split_once(':').unwrap_or((w[i + 1], w[i + 1]));
                    matched &= (lo.parse::<u16>().unwrap()..=hi.parse().unwrap()).contains(&port);
                    i += 2;
                }
                "--ctstate" => {
                    matched = false;
                    i += 2;
                } // a new connection
                "--mark" => {
                    matched &= *mark & 0x20000 != 0;
                    i += 2;
                }
                "--set-xmark" => {
                    set_mark = Some(w[i + 1].starts_with("0x20000"));
                    i += 2;
                }
                "-j" => {
                    target = w[i + 1];
                    i += 2;
                }
                _ => i += 1,
            }
        }
        if !matched {
            continue;
        }
        match target {
            "MARK" => {
                if set_mark == Some(true) {
                    *mark |= 0x20000
                } else {
                    *mark &= !0x20000
                }
            }
            "RETURN" => return Verdict::Return,
            "DROP" | "REJECT" => return Verdict::Stop,
            chain => {
                if let Verdict::Stop = walk(chains, chain, src, dst, proto, port, mark) {
                    return Verdict::Stop;
                }
            }
        }
    }
    Verdict::Return
}

fn pod(ns: &str, name: &str, ip: &str, labels: serde_json::Value) -> PolicyPod {
    PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        ip: ip.into(),
        labels: serde_json::from_value(labels).unwrap(),
        ports: vec![("http".into(), "TCP".into(), 8080)],
    }
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> Arc<NetworkPolicy> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
            .unwrap(),
    )
}

struct World {
    pods: Vec<PolicyPod>,
    namespaces: NamespaceLabels,
}

fn world() -> World {
    World {
        pods: vec![
            pod("alice", "web", "10.244.1.2", json!({"app": "web"})),
            pod("alice", "db", "10.244.2.3", json!({"app": "db"})),
            pod("bob", "client", "10.244.1.4", json!({"app": "client"})),
            pod("carol", "client", "10.244.3.5", json!({"app": "client"})),
        ],
        namespaces: serde_json::from_value(
            json!({"alice": {"kubernetes.io/metadata.name": "alice"},
            "bob": {"kubernetes.io/metadata.name": "bob", "team": "friends"},
            "carol": {"kubernetes.io/metadata.name": "carol"}}),
        )
        .unwrap(),
    }
}

fn chains(w: &World, policies: &[Arc<NetworkPolicy>]) -> Chains {
    desired(&Cluster {
        policies,
        pods: &w.pods,
        namespaces: &w.namespaces,
    })
}

#[test]
fn without_policies_everything_passes() {
    let w = world();
    let c = chains(&w, &[]);
    assert_eq!(c[POLICIES], Vec::<String>::new());
    assert!(passes(&c, "10.244.3.5", "10.244.1.2", "tcp", 8080));
}

#[test]
fn default_deny_then_an_allow_from_a_chosen_namespace() {
    let w = world();
    let deny = policy(
        "alice",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    let c = chains(&w, std::slice::from_ref(&deny));
    assert!(
        !passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 8080),
        "bob is denied"
    );
    assert!(
        !passes(&c, "10.244.2.3", "10.244.1.2", "tcp", 8080),
        "even alice's own db"
    );
    assert!(
        passes(&c, "10.244.1.2", "10.244.3.5", "tcp", 80),
        "egress is not isolated"
    );
    let allow = policy(
        "alice",
        "friends",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "friends"}}}],
                     "ports": [{"port": "http", "protocol": "TCP"}]}], "policyTypes": ["Ingress"]}),
    );
    let c = chains(&w, &[deny, allow]);
    assert!(
        passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 8080),
        "bob's namespace is a friend"
    );
    assert!(
        !passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 9090),
        "only the named port"
    );
    assert!(
        !passes(&c, "10.244.3.5", "10.244.1.2", "tcp", 8080),
        "carol is not"
    );
    assert!(
        !passes(&c, "10.244.1.4", "10.244.2.3", "tcp", 8080),
        "db is not selected by the allow"
    );
}

#[test]
fn pod_and_namespace_selectors_together_and_ip_blocks() {
    let w = world();
    let p = policy(
        "alice",
        "mixed",
        json!({"podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"from": [
            {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "client"}}},
            {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.5.0/24"]}}],
          "ports": [{"port": 5000, "endPort": 5010}]}]}),
    );
    let c = chains(&w, &[p]);
    assert!(
        passes(&c, "10.244.3.5", "10.244.2.3", "tcp", 5005),
        "a client pod in any namespace"
    );
    assert!(
        !passes(&c, "10.244.1.2", "10.244.2.3", "tcp", 5005),
        "web is no client"
    );
    assert!(
        !passes(&c, "10.244.3.5", "10.244.2.3", "tcp", 5011),
        "outside the range"
    );
    assert!(
        !passes(&c, "10.244.3.5", "10.244.2.3", "udp", 5005),
        "TCP by default"
    );
    assert!(passes(&c, "192.168.1.1", "10.244.2.3", "tcp", 5000));
    assert!(
        !passes(&c, "192.168.5.1", "10.244.2.3", "tcp", 5000),
        "the except"
    );
}

#[test]
fn egress_isolation_and_named_ports_of_the_destination() {
    let w = world();
    // Bob may talk only to alice's web on its http port, and to DNS anywhere.
    let p = policy(
        "bob",
        "out",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
        "egress": [
            {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "alice"}},
                     "podSelector": {"matchLabels": {"app": "web"}}}],
             "ports": [{"port": "http", "protocol": "TCP"}]},
            {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}]}),
    );
    let c = chains(&w, &[p]);
    assert!(passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 8080));
    assert!(!passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 22));
    assert!(
        !passes(&c, "10.244.1.4", "10.244.2.3", "tcp", 8080),
        "db is not web"
    );
    assert!(passes(&c, "10.244.1.4", "8.8.8.8", "udp", 53));
    assert!(!passes(&c, "10.244.1.4", "8.8.8.8", "udp", 54));
    assert!(
        passes(&c, "10.244.3.5", "10.244.2.3", "tcp", 1),
        "carol is not isolated"
    );
    // Both checks apply: bob's egress allows web, and web's ingress must too.
    let deny = policy("alice", "deny", json!({"podSelector": {}}));
    let c = chains(
        &w,
        &[
            policy(
                "bob",
                "out",
                json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}),
            ),
            deny,
        ],
    );
    assert!(!passes(&c, "10.244.1.4", "10.244.1.2", "tcp", 8080));
}

#[test]
fn chain_names_fit_iptables() {
    let w = world();
    let p = policy(
        "a-very-long-namespace-name",
        "a-very-long-policy-name",
        json!({"podSelector": {},
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}),
    );
    let mut pods = w.pods.clone();
    pods.push(pod(
        "a-very-long-namespace-name",
        "p",
        "10.244.9.9",
        json!({}),
    ));
    let c = desired(&Cluster {
        policies: &[p],
        pods: &pods,
        namespaces: &w.namespaces,
    });
    assert!(c.len() > 3);
    for name in c.keys() {
        assert!(name.len() <= 28, "{name}");
    }
}
