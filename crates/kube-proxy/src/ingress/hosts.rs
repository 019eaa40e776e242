//! Ingress hosts for the cluster DNS: a pod asking for `hello.world.minik8s`
//! gets the addresses in that Ingress' `status.loadBalancer`, so
//! `curl http://hello.world.minik8s/world` inside the cluster reaches the
//! ingress proxy (pure; `dns.rs` asks it before forwarding upstream).
//!
//! ```text
//!   Ingress hello: rules[].host hello.world.minik8s ──┐
//!                  status.loadBalancer.ingress[].ip ──┴─▶ hello.world.minik8s A 192.168.1.11 ...
//!   Ingress any:   rules[].host *.apps.minik8s      ──────▶ x.apps.minik8s A ... (one label only)
//! ```

use k8s_openapi::api::networking::v1::Ingress;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Host names of Ingresses that have an address, lowercase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    exact: BTreeMap<String, BTreeSet<Ipv4Addr>>,
    /// `*.apps.minik8s` is kept as `apps.minik8s`.
    wildcard: BTreeMap<String, BTreeSet<Ipv4Addr>>,
}

impl Hosts {
    /// The hosts of every Ingress with at least one IPv4 in its status (of
    /// any class: another controller's published address is just as good).
    pub fn build(ingresses: &[Arc<Ingress>]) -> Hosts {
        let mut hosts = Hosts::default();
        for ing in ingresses {
            let ips: BTreeSet<Ipv4Addr> = ing
                .status
                .iter()
                .filter_map(|s| s.load_balancer.as_ref())
                .flat_map(|lb| lb.ingress.iter().flatten())
                .filter_map(|i| i.ip.as_deref()?.parse().ok())
                .collect();
            if ips.is_empty() {
                continue;
            }
            let rules = ing.spec.iter().flat_map(|s| s.rules.iter().flatten());
            for host in rules.filter_map(|r| r.host.as_deref()) {
                let host = host.trim_end_matches('.').to_lowercase();
                let (map, key) = match host.strip_prefix("*.") {
                    Some(rest) => (&mut hosts.wildcard, rest.to_string()),
                    None => (&mut hosts.exact, host),
                };
                map.entry(key).or_default().extend(ips.iter().copied());
            }
        }
        hosts
    }

    /// The addresses of `name` (any case, trailing dot or not): an exact
    /// host first, else a wildcard one label above it, as Ingress matches.
    pub fn lookup(&self, name: &str) -> Option<Vec<Ipv4Addr>> {
        let name = name.trim_end_matches('.').to_lowercase();
        if let Some(ips) = self.exact.get(&name) {
            return Some(ips.iter().copied().collect());
        }
        let (first, parent) = name.split_once('.')?;
        if first.is_empty() {
            return None;
        }
        self.wildcard
            .get(parent)
            .map(|ips| ips.iter().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(hosts: &[&str], ips: &[&str]) -> Arc<Ingress> {
        let rules: Vec<_> = hosts.iter().map(|h| json!({"host": h})).collect();
        let lb: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "i"}, "spec": {"rules": rules},
                "status": {"loadBalancer": {"ingress": lb}}}))
            .unwrap(),
        )
    }

    #[test]
    fn exact_hosts_win_over_wildcards_which_match_one_label() {
        let hosts = Hosts::build(&[
            ingress(
                &["hello.world.minik8s", "*.apps.minik8s"],
                &["192.168.1.11", "192.168.1.12"],
            ),
            ingress(&["special.apps.minik8s"], &["192.168.1.13"]),
            ingress(&["pending.minik8s"], &[]),
        ]);
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            hosts.lookup("Hello.World.Minik8s."),
            Some(vec![ip("192.168.1.11"), ip("192.168.1.12")])
        );
        assert_eq!(
            hosts.lookup("special.apps.minik8s"),
            Some(vec![ip("192.168.1.13")])
        );
        assert_eq!(
            hosts.lookup("foo.apps.minik8s"),
            Some(vec![ip("192.168.1.11"), ip("192.168.1.12")])
        );
        // A wildcard covers exactly one label, not the parent nor deeper names.
        assert_eq!(hosts.lookup("apps.minik8s"), None);
        assert_eq!(hosts.lookup("a.b.apps.minik8s"), None);
        // No address in status yet: not answered (the name is forwarded).
        assert_eq!(hosts.lookup("pending.minik8s"), None);
        assert_eq!(hosts.lookup("example.com"), None);
    }
}
