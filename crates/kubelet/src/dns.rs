//! A pod's /etc/resolv.conf, as the kubelet computes it from `dnsPolicy` and
//! `dnsConfig` (Kubernetes' pkg/kubelet/network/dns):
//!
//! ```text
//!  ClusterFirst (default)  nameserver <--cluster-dns>
//!                          search <ns>.svc.<domain> svc.<domain> <domain> <host's search>
//!                          options ndots:5
//!  Default                 the node's resolv.conf
//!  None                    only what spec.dnsConfig says
//!  + spec.dnsConfig        nameservers and searches appended, options merged by name
//! ```
//!
//! ClusterFirst falls back to Default when the kubelet has no `--cluster-dns`
//! (and for hostNetwork pods, unless the policy is ClusterFirstWithHostNet).

use k8s_openapi::api::core::v1::Pod;

/// What goes into the pod's resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

impl ResolvConf {
    /// Parses the node's resolv.conf (`nameserver`, `search`/`domain`, `options`).
    pub fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => conf.nameservers.extend(words.next().map(String::from)),
                Some("search") | Some("domain") => {
                    conf.searches = words.map(String::from).collect()
                }
                Some("options") => conf.options.extend(words.map(String::from)),
                _ => {}
            }
        }
        conf
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.searches.is_empty() {
            out.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for ns in &self.nameservers {
            out.push_str(&format!("nameserver {ns}\n"));
        }
        if !self.options.is_empty() {
            out.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        out
    }
}

/// Limits glibc's resolver has (and Kubernetes enforces).
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;

/// The resolv.conf for `pod`. `cluster_dns` is the kubelet's --cluster-dns,
/// `host` the node's own resolv.conf.
pub fn resolv_conf(
    pod: &Pod,
    cluster_dns: &[String],
    cluster_domain: &str,
    host: &ResolvConf,
) -> ResolvConf {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let cluster_first = match policy {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        _ => false,
    };
    let mut conf = if policy == "None" {
        ResolvConf::default()
    } else if cluster_first && !cluster_dns.is_empty() {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut searches = vec![
            format!("{ns}.svc.{cluster_domain}"),
            format!("svc.{cluster_domain}"),
            cluster_domain.to_string(),
        ];
        searches.extend(host.searches.iter().cloned());
        ResolvConf {
            nameservers: cluster_dns.to_vec(),
            searches,
            options: vec!["ndots:5".into()],
        }
    } else {
        host.clone()
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        conf.nameservers
            .extend(extra.nameservers.iter().flatten().cloned());
        conf.searches
            .extend(extra.searches.iter().flatten().cloned());
        for opt in extra.options.iter().flatten() {
            let Some(name) = opt.name.as_deref() else {
                continue;
            };
            conf.options.retain(|o| o.split(':').next() != Some(name));
            conf.options.push(match &opt.value {
                Some(v) => format!("{name}:{v}"),
                None => name.to_string(),
            });
        }
    }
    dedup_keep_order(&mut conf.nameservers);
    dedup_keep_order(&mut conf.searches);
    conf.nameservers.truncate(MAX_NAMESERVERS);
    conf.searches.truncate(MAX_SEARCHES);
    conf
}

fn dedup_keep_order(v: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ml"}, "spec": spec}))
            .unwrap()
    }

    fn host() -> ResolvConf {
        ResolvConf::parse("# node\nnameserver 192.168.1.1\nsearch lab.example\noptions edns0\n")
    }

    #[test]
    fn cluster_first_points_at_the_cluster_dns_with_kubernetes_search_list() {
        let c = resolv_conf(
            &pod(json!({"containers": []})),
            &["10.96.0.10".into()],
            "cluster.local",
            &host(),
        );
        assert_eq!(c.nameservers, vec!["10.96.0.10"]);
        assert_eq!(
            c.searches,
            vec![
                "ml.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "lab.example"
            ]
        );
        assert_eq!(c.options, vec!["ndots:5"]);
        assert_eq!(
            c.render(),
            "search ml.svc.cluster.local svc.cluster.local cluster.local lab.example\nnameserver 10.96.0.10\noptions ndots:5\n"
        );
        assert_eq!(ResolvConf::parse(&c.render()), c);
    }

    #[test]
    fn default_none_host_network_and_missing_cluster_dns() {
        let dns = ["10.96.0.10".to_string()];
        let d = resolv_conf(
            &pod(json!({"dnsPolicy": "Default", "containers": []})),
            &dns,
            "cluster.local",
            &host(),
        );
        assert_eq!(d, host());
        let h = resolv_conf(
            &pod(json!({"hostNetwork": true, "containers": []})),
            &dns,
            "cluster.local",
            &host(),
        );
        assert_eq!(
            h,
            host(),
            "hostNetwork pods keep the node's DNS under ClusterFirst"
        );
        let hw = resolv_conf(
            &pod(
                json!({"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet", "containers": []}),
            ),
            &dns,
            "cluster.local",
            &host(),
        );
        assert_eq!(hw.nameservers, dns);
        let no_dns = resolv_conf(
            &pod(json!({"containers": []})),
            &[],
            "cluster.local",
            &host(),
        );
        assert_eq!(
            no_dns,
            host(),
            "no --cluster-dns: ClusterFirst falls back to Default"
        );
        let none = resolv_conf(
            &pod(
                json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["a.b"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}, "containers": []}),
            ),
            &dns,
            "cluster.local",
            &host(),
        );
        assert_eq!(
            none,
            ResolvConf {
                nameservers: vec!["1.1.1.1".into()],
                searches: vec!["a.b".into()],
                options: vec!["ndots:2".into(), "edns0".into()]
            }
        );
    }

    #[test]
    fn dns_config_merges_into_cluster_first() {
        let c = resolv_conf(
            &pod(
                json!({"dnsConfig": {"nameservers": ["10.96.0.10", "9.9.9.9"], "searches": ["x.y"],
                "options": [{"name": "ndots", "value": "1"}]}, "containers": []}),
            ),
            &["10.96.0.10".into()],
            "cluster.local",
            &host(),
        );
        assert_eq!(
            c.nameservers,
            vec!["10.96.0.10", "9.9.9.9"],
            "duplicates dropped"
        );
        assert_eq!(c.searches.last().unwrap(), "x.y");
        assert_eq!(
            c.options,
            vec!["ndots:1"],
            "the pod's option replaces the default"
        );
    }
}
