//! What a pod shares with its node or within itself, as the real kubelet
//! sets it up: the host's namespaces (`hostNetwork`, `hostPID`, `hostIPC`),
//! one process namespace for all containers (`shareProcessNamespace`), the
//! hostname (`hostname`, `subdomain`, `setHostnameAsFQDN`), the
//! kubelet-managed `/etc/hosts` (with `hostAliases`) and the sandbox's
//! sysctls (safe ones, or those the node allows with
//! `--allowed-unsafe-sysctls`).
//!
//! ```text
//!  sandbox (pause) ── network: pod network | host      ipc: shareable | host     pid: own | host
//!     ▲ container: network and ipc joined (ipc: host with hostIPC);
//!     │            pid: own | the sandbox's (shareProcessNamespace) | host (hostPID)
//!  /etc/hosts: <pod dir>/etc-hosts, bind-mounted into each container
//! ```

use crate::runtime::PodNamespaces;
use k8s_openapi::api::core::v1::{Pod, PodSpec};

/// The namespaces a pod asks to share.
pub fn namespaces(spec: Option<&PodSpec>) -> PodNamespaces {
    let flag = |f: fn(&PodSpec) -> Option<bool>| spec.and_then(f).unwrap_or(false);
    PodNamespaces {
        host_network: flag(|s| s.host_network),
        host_pid: flag(|s| s.host_pid),
        host_ipc: flag(|s| s.host_ipc),
        share_process: flag(|s| s.share_process_namespace),
    }
}

/// The pod's hostname (`spec.hostname`, else its name, at most 63
/// characters) and DNS domain (`<subdomain>.<namespace>.svc.<cluster
/// domain>` when it has a subdomain).
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let hostname: String = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default()
        .chars()
        .take(63)
        .collect();
    let domain = match (
        spec.and_then(|s| s.subdomain.as_deref()),
        pod.metadata.namespace.as_deref(),
    ) {
        (Some(sub), Some(ns)) if !sub.is_empty() => {
            Some(format!("{sub}.{ns}.svc.{cluster_domain}"))
        }
        _ => None,
    };
    (hostname, domain)
}

/// The sandbox's kernel hostname and domain name: with `setHostnameAsFQDN`
/// the hostname is the pod's FQDN (at most 64 characters, the kernel's
/// limit), else the short name with its domain beside it. A host-network
/// pod has the node's hostname.
pub fn sandbox_hostname(
    pod: &Pod,
    cluster_domain: &str,
) -> Result<(Option<String>, Option<String>), String> {
    let spec = pod.spec.as_ref();
    if namespaces(spec).host_network {
        return Ok((None, None));
    }
    let (hostname, domain) = hostname_and_domain(pod, cluster_domain);
    let as_fqdn = spec.and_then(|s| s.set_hostname_as_fqdn).unwrap_or(false);
    match domain {
        Some(domain) if as_fqdn => {
            let fqdn = format!("{hostname}.{domain}");
            if fqdn.len() > 64 {
                return Err(format!(
                    "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)",
                    fqdn.len()
                ));
            }
            Ok((Some(fqdn), None))
        }
        domain => Ok((Some(hostname), domain)),
    }
}

/// The pod's `/etc/hosts`, as the kubelet manages it: localhost entries,
/// the pod's own name at its IP, then `hostAliases`. A host-network pod gets
/// the node's file with its aliases after it.
pub fn hosts_file(pod: &Pod, pod_ip: &str, cluster_domain: &str, node_hosts: &str) -> String {
    let spec = pod.spec.as_ref();
    let mut out = String::new();
    if namespaces(spec).host_network {
        out.push_str("# Kubernetes-managed hosts file (host network).\n");
        out.push_str(node_hosts);
    } else {
        out.push_str("# Kubernetes-managed hosts file.\n");
        out.push_str("127.0.0.1\tlocalhost\n");
        out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
        out.push_str("fe00::0\tip6-localnet\n");
        out.push_str("fe00::0\tip6-mcastprefix\n");
        out.push_str("fe00::1\tip6-allnodes\n");
        out.push_str("fe00::2\tip6-allrouters\n");
        let (hostname, domain) = hostname_and_domain(pod, cluster_domain);
        if !pod_ip.is_empty() {
            match domain {
                Some(d) => out.push_str(&format!("{pod_ip}\t{hostname}.{d}\t{hostname}\n")),
                None => out.push_str(&format!("{pod_ip}\t{hostname}\n")),
            }
        }
    }
    let aliases = spec.and_then(|s| s.host_aliases.as_ref());
    if aliases.is_some_and(|a| !a.is_empty()) {
        out.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases.into_iter().flatten() {
            let names = a.hostnames.clone().unwrap_or_default().join("\t");
            out.push_str(&format!("{}\t{names}\n", a.ip));
        }
    }
    out
}

/// The sysctls a pod may set without the node's leave (Kubernetes' safe set).
pub const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// Whether `name` matches an allowlist entry (an exact name, or a prefix
/// ending in `*`, as `--allowed-unsafe-sysctls` takes them).
fn allowed(name: &str, list: &[String]) -> bool {
    list.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => p == name,
    })
}

/// The pod's sysctls as (name, value), names with `/` written with `.`.
pub fn sysctls(spec: Option<&PodSpec>) -> Vec<(String, String)> {
    spec.and_then(|s| s.security_context.as_ref())
        .and_then(|sc| sc.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (s.name.replace('/', "."), s.value.clone()))
        .collect()
}

/// The kubelet's sysctl admission: the first sysctl neither safe nor
/// allowed on this node, as the reason the pod is refused.
pub fn forbidden_sysctl(spec: Option<&PodSpec>, allowed_unsafe: &[String]) -> Option<String> {
    sysctls(spec)
        .into_iter()
        .map(|(name, _)| name)
        .find(|name| !SAFE_SYSCTLS.contains(&name.as_str()) && !allowed(name, allowed_unsafe))
        .map(|name| format!("forbidden sysctl: \"{name}\" not allowlisted"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c"}]);
        serde_json::from_value(
            json!({"metadata": {"name": "web-0", "namespace": "ns"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn the_managed_hosts_file_names_the_pod_and_its_aliases() {
        let p = pod(json!({"subdomain": "web", "hostAliases": [
            {"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}]}));
        assert_eq!(
            hosts_file(&p, "10.244.0.5", "cluster.local", ""),
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n\
             10.244.0.5\tweb-0.web.ns.svc.cluster.local\tweb-0\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        );
        let host = pod(json!({"hostNetwork": true}));
        assert_eq!(
            hosts_file(&host, "", "cluster.local", "127.0.0.1\tlocalhost\n"),
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n"
        );
    }

    #[test]
    fn set_hostname_as_fqdn_puts_the_domain_in_the_hostname() {
        let p = pod(json!({"subdomain": "web", "setHostnameAsFQDN": true}));
        assert_eq!(
            sandbox_hostname(&p, "cluster.local").unwrap(),
            (Some("web-0.web.ns.svc.cluster.local".into()), None)
        );
        let plain = pod(json!({"subdomain": "web"}));
        assert_eq!(
            sandbox_hostname(&plain, "cluster.local").unwrap(),
            (
                Some("web-0".into()),
                Some("web.ns.svc.cluster.local".into())
            )
        );
        let long =
            pod(json!({"hostname": "h".repeat(40), "subdomain": "web", "setHostnameAsFQDN": true}));
        let err = sandbox_hostname(&long, "cluster.local").unwrap_err();
        assert!(
            err.contains("is too long (64 characters is the max, 65 characters requested)"),
            "{err}"
        );
        assert_eq!(
            sandbox_hostname(&pod(json!({"hostNetwork": true})), "cluster.local").unwrap(),
            (None, None)
        );
    }

    #[test]
    fn unsafe_sysctls_need_the_nodes_leave() {
        let p = pod(json!({"securityContext": {"sysctls": [
            {"name": "net.ipv4.tcp_syncookies", "value": "1"}, {"name": "kernel/msgmax", "value": "65536"}]}}));
        assert_eq!(
            forbidden_sysctl(p.spec.as_ref(), &[]),
            Some("forbidden sysctl: \"kernel.msgmax\" not allowlisted".into())
        );
        assert_eq!(
            forbidden_sysctl(p.spec.as_ref(), &["kernel.msg*".into()]),
            None
        );
        assert_eq!(
            sysctls(p.spec.as_ref())[1],
            ("kernel.msgmax".into(), "65536".into())
        );
    }
}
