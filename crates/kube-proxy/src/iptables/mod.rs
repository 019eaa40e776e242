//! The iptables backend's pure core: the nat chains for a set of ServicePorts
//! ([`desired`]), the chains kube-proxy owns in `iptables-save` output
//! ([`parse_save`]), and the `iptables-restore --noflush` input that changes
//! only the chains that differ ([`restore_input`]).
//!
//! ```text
//!  PREROUTING/OUTPUT ─▶ KUBE-SERVICES ─ -d VIP -p tcp --dport P ─▶ KUBE-SVC-<h>
//!                           └─ dst-type LOCAL ─▶ KUBE-NODEPORTS ─ --dport NP ─▶ KUBE-SVC-<h>
//!  KUBE-SVC-<h>: off-cluster sources ─▶ KUBE-MARK-MASQ
//!                (ClientIP affinity) recent --rcheck source ─▶ KUBE-SEP-<h> it last went to
//!                nth --every n   ─▶ KUBE-SEP-<h1>   (exact round robin per connection)
//!                nth --every n-1 ─▶ KUBE-SEP-<h2> ... last one unconditional
//!  KUBE-SEP-<h>: hairpin ─▶ KUBE-MARK-MASQ; (affinity: recent --set source) DNAT --to-destination podIP:port
//!  POSTROUTING ─▶ KUBE-POSTROUTING: marked ─▶ MASQUERADE
//!  filter INPUT/FORWARD/OUTPUT (new) ─▶ KUBE-SERVICES: no endpoints ─▶ REJECT
//! ```

pub mod backend;
pub mod network_policy;
pub mod tools;

use crate::ServicePort;
use minik8s_api::hash::{fnv32a, safe_encode};
use std::collections::BTreeMap;

/// Chain name → its rules (the text after `-A <chain> `), in order.
pub type Chains = BTreeMap<String, Vec<String>>;

/// kube-proxy's chains in the two tables it writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tables {
    pub nat: Chains,
    pub filter: Chains,
}

impl Tables {
    /// Our chains in a whole `iptables-save`.
    pub fn parse_save(text: &str) -> Tables {
        Tables {
            nat: parse_save_table(text, "nat"),
            filter: parse_save_table(text, "filter"),
        }
    }

    /// The restore input for both tables; `None` when nothing differs.
    pub fn restore_input(current: &Tables, desired: &Tables) -> Option<String> {
        let nat = restore_input_table("nat", &current.nat, &desired.nat);
        let filter = restore_input_table("filter", &current.filter, &desired.filter);
        match (nat, filter) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default() + &b.unwrap_or_default()),
        }
    }
}

pub const SERVICES: &str = "KUBE-SERVICES";
pub const NODEPORTS: &str = "KUBE-NODEPORTS";
pub const MARK_MASQ: &str = "KUBE-MARK-MASQ";
pub const POSTROUTING: &str = "KUBE-POSTROUTING";
const MASQ_MARK: &str = "0x4000";

/// The jumps from the built-in chains into ours: `(built-in chain, rule)`,
/// ensured one by one (`-C`, then `-I`), never through restore.
pub fn jumps() -> Vec<(&'static str, String)> {
    vec![
        (
            "PREROUTING",
            format!("-m comment --comment \"kubernetes service portals\" -j {SERVICES}"),
        ),
        (
            "OUTPUT",
            format!("-m comment --comment \"kubernetes service portals\" -j {SERVICES}"),
        ),
        (
            "POSTROUTING",
            format!("-m comment --comment \"kubernetes postrouting rules\" -j {POSTROUTING}"),
        ),
    ]
}

/// The jumps into the filter table's KUBE-SERVICES (new connections only):
/// from INPUT for NodePorts, FORWARD for pods, OUTPUT for the node itself;
/// and FORWARD's jump into the NetworkPolicy chains (every packet between
/// pods: the chain lets replies through first).
pub fn filter_jumps() -> Vec<(&'static str, String)> {
    let mut jumps: Vec<(&'static str, String)> = ["INPUT", "FORWARD", "OUTPUT"]
        .into_iter()
        .map(|chain| {
            (
                chain,
                format!("-m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j {SERVICES}"),
            )
        })
        .collect();
    jumps.push((
        "FORWARD",
        format!(
            "-m comment --comment \"kubernetes network policies\" -j {}",
            network_policy::POLICIES
        ),
    ));
    jumps
}

/// The filter table's chain: connections to a Service port that has no
/// ready endpoint are refused at once instead of timing out, as in
/// Kubernetes. TCP gets a reset: the ICMP port-unreachable upstream uses is
/// not delivered to the node's own sockets by this kernel's nf_tables
/// (measured: a 3 s timeout instead of ECONNREFUSED), a reset always is.
/// `served_locally` are VIPs this node answers itself (the cluster DNS).
pub fn desired_filter(ports: &[ServicePort], served_locally: &[String]) -> Chains {
    let mut rules = Vec::new();
    for p in ports {
        if served_locally.contains(&p.cluster_ip) {
            continue;
        }
        if !p.endpoints.is_empty() {
            // Endpoints elsewhere but none here: a node-local policy drops
            // what no nat rule took (Kubernetes' "has no local endpoints").
            let key = port_key(p);
            let pr = proto(p);
            let comment = format!("{key} has no local endpoints");
            if p.internal_endpoints().is_empty() {
                rules.push(format!(
                    "-d {}/32 -p {pr} -m comment --comment \"{comment}\" -m {pr} --dport {} -j DROP",
                    p.cluster_ip, p.port
                ));
            }
            if p.external_endpoints().is_empty() {
                if let Some(np) = p.node_port {
                    rules.push(format!(
                        "-p {pr} -m comment --comment \"{comment}\" -m addrtype --dst-type LOCAL -m {pr} --dport {np} -j DROP"
                    ));
                }
                for ip in &p.load_balancer_ips {
                    rules.push(format!(
                        "-d {ip}/32 -p {pr} -m comment --comment \"{comment}\" -m {pr} --dport {} -j DROP",
                        p.port
                    ));
                }
            }
            continue;
        }
        let key = port_key(p);
        let pr = proto(p);
        let with = if pr == "tcp" {
            "tcp-reset"
        } else {
            "icmp-port-unreachable"
        };
        rules.push(format!(
            "-d {}/32 -p {pr} -m comment --comment \"{key} has no endpoints\" -m {pr} --dport {} -j REJECT --reject-with {with}",
            p.cluster_ip, p.port
        ));
        if let Some(np) = p.node_port {
            rules.push(format!(
                "-p {pr} -m comment --comment \"{key} has no endpoints\" -m addrtype --dst-type LOCAL -m {pr} --dport {np} -j REJECT --reject-with {with}"
            ));
        }
        for ip in &p.load_balancer_ips {
            rules.push(format!(
                "-d {ip}/32 -p {pr} -m comment --comment \"{key} has no endpoints\" -m {pr} --dport {} -j REJECT --reject-with {with}",
                p.port
            ));
        }
    }
    Chains::from([(SERVICES.to_string(), rules)])
}

fn chain_hash(kind: &str, key: &str) -> String {
    format!(
        "KUBE-{kind}-{}",
        safe_encode(fnv32a(key.as_bytes())).to_uppercase()
    )
}

/// One balancing chain (`chain`) over `endpoints`: the masquerade rule if
/// any, ClientIP affinity first when the port has it, then an exact round
/// robin per connection (`statistic nth`); and each endpoint's KUBE-SEP
/// chain (hairpin masquerade, DNAT).
fn balance(
    chains: &mut Chains,
    p: &ServicePort,
    chain: &str,
    endpoints: &[(String, u16)],
    masq: Option<String>,
) {
    let key = port_key(p);
    let pr = proto(p);
    let mut rules: Vec<String> = masq.into_iter().collect();
    let sep_of = |ip: &str, port: &u16| chain_hash("SEP", &format!("{key}/{ip}:{port}"));
    // ClientIP affinity: a source seen by an endpoint within the timeout
    // goes back to it, before the round robin below.
    let recent = |sep: &str| format!("--name {sep} --mask 255.255.255.255 --rsource");
    if let Some(secs) = p.affinity_seconds {
        for (ip, port) in endpoints {
            let sep = sep_of(ip, port);
            rules.push(format!(
                "-m comment --comment \"{key} -> {ip}:{port}\" -m recent --rcheck --seconds {secs} --reap {} -j {sep}",
                recent(&sep)
            ));
        }
    }
    let n = endpoints.len();
    for (i, (ip, port)) in endpoints.iter().enumerate() {
        let sep = sep_of(ip, port);
        let pick = if i + 1 < n {
            format!("-m statistic --mode nth --every {} --packet 0 ", n - i)
        } else {
            String::new()
        };
        rules.push(format!(
            "-m comment --comment \"{key} -> {ip}:{port}\" {pick}-j {sep}"
        ));
        let remember = match p.affinity_seconds {
            Some(_) => format!("-m recent --set {} ", recent(&sep)),
            None => String::new(),
        };
        chains.insert(
            sep.clone(),
            vec![
                format!("-s {ip}/32 -m comment --comment \"{key}\" -j {MARK_MASQ}"),
                format!("-p {pr} -m comment --comment \"{key}\" {remember}-m {pr} -j DNAT --to-destination {ip}:{port}"),
            ],
        );
    }
    chains.insert(chain.to_string(), rules);
}

/// KUBE-EXT-<h> under `externalTrafficPolicy: Local`: pods and the node
/// itself keep every endpoint (KUBE-SVC), clients from outside go to this
/// node's endpoints (KUBE-SVL) unmasqueraded, or nowhere.
fn external_local_chain(
    p: &ServicePort,
    svc: &str,
    svl: &str,
    cluster_cidr: Option<&str>,
) -> Vec<String> {
    let key = port_key(p);
    let mut rules = Vec::new();
    if let Some(cidr) = cluster_cidr {
        rules.push(format!(
            "-s {cidr} -m comment --comment \"pod traffic for {key} external destinations\" -j {svc}"
        ));
    }
    rules.push(format!(
        "-m comment --comment \"masquerade LOCAL traffic for {key} external destinations\" -m addrtype --src-type LOCAL -j {MARK_MASQ}"
    ));
    rules.push(format!(
        "-m comment --comment \"route LOCAL traffic for {key} external destinations\" -m addrtype --src-type LOCAL -j {svc}"
    ));
    if !p.local_endpoints.is_empty() {
        rules.push(format!("-j {svl}"));
    }
    rules
}

fn port_key(p: &ServicePort) -> String {
    format!(
        "{}/{}:{}/{}",
        p.namespace, p.service, p.port_name, p.protocol
    )
}

fn proto(p: &ServicePort) -> String {
    p.protocol.to_lowercase()
}

/// The chains for `ports`. `cluster_cidr` (the pod network) decides which
/// sources are off-cluster and must be masqueraded on their way to a VIP.
///
/// Per Service port: KUBE-SVC-<h> balances over every endpoint, KUBE-SVL-<h>
/// over this node's (`internalTrafficPolicy: Local` sends the ClusterIP
/// there), and KUBE-EXT-<h> takes NodePort traffic under
/// `externalTrafficPolicy: Local`: pods and the node itself still get every
/// endpoint, outside clients only this node's, unmasqueraded.
pub fn desired(ports: &[ServicePort], cluster_cidr: Option<&str>) -> Chains {
    let mut chains = Chains::new();
    let mut services = Vec::new();
    let mut nodeports = Vec::new();
    for p in ports {
        if p.endpoints.is_empty() {
            continue;
        }
        let key = port_key(p);
        let svc = chain_hash("SVC", &key);
        let svl = chain_hash("SVL", &key);
        let pr = proto(p);
        // Sources outside the pod network are masqueraded on their way to the
        // ClusterIP (replies must come back through this node).
        let masq = cluster_cidr.map(|cidr| {
            format!(
                "! -s {cidr} -d {}/32 -p {pr} -m comment --comment \"{key} cluster IP\" -m {pr} --dport {} -j {MARK_MASQ}",
                p.cluster_ip, p.port
            )
        });
        balance(
            &mut chains,
            p,
            &svc,
            &p.endpoints,
            masq.clone().filter(|_| !p.internal_local),
        );
        if (p.internal_local || p.external_local) && !p.local_endpoints.is_empty() {
            let local_masq = masq.filter(|_| p.internal_local);
            balance(&mut chains, p, &svl, &p.local_endpoints, local_masq);
        }
        let internal = if p.internal_local { &svl } else { &svc };
        if !p.internal_endpoints().is_empty() {
            services.push(format!(
                "-d {}/32 -p {pr} -m comment --comment \"{key} cluster IP\" -m {pr} --dport {} -j {internal}",
                p.cluster_ip, p.port
            ));
        }
        // Where outside traffic goes: KUBE-EXT under the Local policy, else
        // masqueraded into KUBE-SVC.
        let external = (p.external_local
            && (p.node_port.is_some() || !p.load_balancer_ips.is_empty()))
        .then(|| {
            let ext = chain_hash("EXT", &key);
            chains.insert(
                ext.clone(),
                external_local_chain(p, &svc, &svl, cluster_cidr),
            );
            ext
        });
        let outside = |matching: String| match &external {
            Some(ext) => vec![format!("{matching} -j {ext}")],
            None => vec![
                format!("{matching} -j {MARK_MASQ}"),
                format!("{matching} -j {svc}"),
            ],
        };
        if let Some(np) = p.node_port {
            nodeports.extend(outside(format!(
                "-p {pr} -m comment --comment \"{key}\" -m {pr} --dport {np}"
            )));
        }
        // A load balancer's addresses (the nodes', from the built-in one) at the Service's port.
        for ip in &p.load_balancer_ips {
            services.extend(outside(format!(
                "-d {ip}/32 -p {pr} -m comment --comment \"{key} loadbalancer IP\" -m {pr} --dport {}",
                p.port
            )));
        }
    }
    if !nodeports.is_empty() {
        services.push(format!(
            "-m comment --comment \"kubernetes service nodeports\" -m addrtype --dst-type LOCAL -j {NODEPORTS}"
        ));
    }
    chains.insert(SERVICES.into(), services);
    chains.insert(NODEPORTS.into(), nodeports);
    // Written the way iptables-save prints them, so a save parses back equal.
    chains.insert(
        MARK_MASQ.into(),
        vec![format!("-j MARK --set-xmark {MASQ_MARK}/{MASQ_MARK}")],
    );
    chains.insert(
        POSTROUTING.into(),
        vec![
            format!("-m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN"),
            format!("-j MARK --set-xmark {MASQ_MARK}/0x0"),
            "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE"
                .into(),
        ],
    );
    chains
}

/// kube-proxy's chains (`KUBE-*`) in the nat table of `iptables-save` output.
pub fn parse_save(text: &str) -> Chains {
    parse_save_table(text, "nat")
}

/// kube-proxy's chains (`KUBE-*`) in one table of `iptables-save` output.
pub fn parse_save_table(text: &str, table: &str) -> Chains {
    let mut chains = Chains::new();
    let mut in_table = false;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('*') {
            in_table = name == table;
        } else if !in_table {
            continue;
        } else if let Some(decl) = line.strip_prefix(':') {
            let name = decl.split_whitespace().next().unwrap_or_default();
            if name.starts_with("KUBE-") {
                chains.entry(name.to_string()).or_default();
            }
        } else if let Some(rule) = line.strip_prefix("-A ") {
            if let Some((chain, rest)) = rule.split_once(' ') {
                if chain.starts_with("KUBE-") {
                    chains
                        .entry(chain.to_string())
                        .or_default()
                        .push(rest.to_string());
                }
            }
        }
    }
    chains
}

/// The `iptables-restore --noflush` input that turns `current` into `desired`:
/// new and changed chains are declared (which empties them) and refilled;
/// chains no longer wanted are emptied, then deleted after every reference to
/// them is gone. `None` when nothing differs.
pub fn restore_input(current: &Chains, desired: &Chains) -> Option<String> {
    restore_input_table("nat", current, desired)
}

/// [`restore_input`] for any table.
pub fn restore_input_table(table: &str, current: &Chains, desired: &Chains) -> Option<String> {
    let changed: Vec<(&String, &Vec<String>)> = desired
        .iter()
        .filter(|(name, rules)| current.get(*name) != Some(*rules))
        .collect();
    let stale: Vec<&String> = current
        .keys()
        .filter(|name| !desired.contains_key(*name))
        .collect();
    if changed.is_empty() && stale.is_empty() {
        return None;
    }
    let mut out = format!("*{table}\n");
    for (name, _) in &changed {
        out.push_str(&format!(":{name} - [0:0]\n"));
    }
    for name in &stale {
        out.push_str(&format!(":{name} - [0:0]\n"));
    }
    for (name, rules) in &changed {
        for r in rules.iter() {
            out.push_str(&format!("-A {name} {r}\n"));
        }
    }
    for name in &stale {
        out.push_str(&format!("-X {name}\n"));
    }
    out.push_str("COMMIT\n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, endpoints: &[(&str, u16)]) -> ServicePort {
        ServicePort {
            namespace: "d".into(),
            service: name.into(),
            port_name: "http".into(),
            protocol: "TCP".into(),
            cluster_ip: "10.96.0.10".into(),
            port: 80,
            node_port: Some(30080),
            endpoints: endpoints.iter().map(|(i, p)| (i.to_string(), *p)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn load_balancer_addresses_answer_at_the_service_port() {
        let mut web = port("web", &[("10.244.1.2", 8080)]);
        web.load_balancer_ips = vec!["192.168.77.11".into()];
        let c = desired(std::slice::from_ref(&web), None);
        let svc = c.keys().find(|k| k.starts_with("KUBE-SVC-")).unwrap();
        let lb: Vec<&String> = c[SERVICES]
            .iter()
            .filter(|r| r.contains("loadbalancer IP"))
            .collect();
        assert_eq!(
            lb,
            [
                "-d 192.168.77.11/32 -p tcp -m comment --comment \"d/web:http/TCP loadbalancer IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ",
                &format!("-d 192.168.77.11/32 -p tcp -m comment --comment \"d/web:http/TCP loadbalancer IP\" -m tcp --dport 80 -j {svc}"),
            ]
        );
        // Under the Local policy they go through KUBE-EXT, as the NodePort does.
        web.external_local = true;
        let c = desired(&[web], None);
        let ext = c.keys().find(|k| k.starts_with("KUBE-EXT-")).unwrap();
        assert!(c[SERVICES]
            .iter()
            .any(|r| r.contains("loadbalancer IP") && r.ends_with(&format!("-j {ext}"))));
    }

    #[test]
    fn node_local_policies_use_this_nodes_endpoints() {
        let mut web = port("web", &[("10.244.1.2", 8080), ("10.244.2.2", 8080)]);
        web.local_endpoints = vec![("10.244.1.2".into(), 8080)];
        web.internal_local = true;
        web.external_local = true;
        let c = desired(std::slice::from_ref(&web), Some("10.244.0.0/16"));
        let named = |kind: &str| {
            c.keys()
                .find(|k| k.starts_with(&format!("KUBE-{kind}-")))
                .unwrap()
                .clone()
        };
        let (svc, svl, ext) = (named("SVC"), named("SVL"), named("EXT"));
        // The ClusterIP goes to the local chain, which balances over this node's one endpoint.
        assert!(c[SERVICES][0].ends_with(&format!("--dport 80 -j {svl}")));
        assert!(c[&svl][0].starts_with("! -s 10.244.0.0/16 -d 10.96.0.10/32"));
        assert_eq!(c[&svl].len(), 2);
        assert!(c[&svl][1].contains("-> 10.244.1.2:8080"));
        assert_eq!(
            c[&svc].len(),
            2,
            "no masquerade rule, two endpoints: {:?}",
            c[&svc]
        );
        // The NodePort: pods and the node itself get every endpoint, the
        // rest only the local one and no masquerade.
        assert_eq!(
            c[NODEPORTS],
            vec![format!(
                "-p tcp -m comment --comment \"d/web:http/TCP\" -m tcp --dport 30080 -j {ext}"
            )]
        );
        assert_eq!(
            c[&ext],
            vec![
                format!("-s 10.244.0.0/16 -m comment --comment \"pod traffic for d/web:http/TCP external destinations\" -j {svc}"),
                format!("-m comment --comment \"masquerade LOCAL traffic for d/web:http/TCP external destinations\" -m addrtype --src-type LOCAL -j {MARK_MASQ}"),
                format!("-m comment --comment \"route LOCAL traffic for d/web:http/TCP external destinations\" -m addrtype --src-type LOCAL -j {svc}"),
                format!("-j {svl}"),
            ]
        );
        assert!(desired_filter(std::slice::from_ref(&web), &[])[SERVICES].is_empty());
        // No endpoint here: what reaches the node is dropped, not sent elsewhere.
        web.local_endpoints.clear();
        let c = desired(std::slice::from_ref(&web), Some("10.244.0.0/16"));
        assert!(!c.keys().any(|k| k.starts_with("KUBE-SVL-")));
        assert!(c[SERVICES]
            .iter()
            .all(|r| !r.contains("cluster IP\" -m tcp --dport 80")));
        assert_eq!(
            desired_filter(&[web], &[])[SERVICES],
            vec![
                "-d 10.96.0.10/32 -p tcp -m comment --comment \"d/web:http/TCP has no local endpoints\" -m tcp --dport 80 -j DROP".to_string(),
                "-p tcp -m comment --comment \"d/web:http/TCP has no local endpoints\" -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DROP".to_string(),
            ]
        );
    }

    #[test]
    fn client_ip_affinity_sends_a_known_source_back_to_its_endpoint() {
        let mut web = port("web", &[("10.244.1.2", 8080), ("10.244.2.2", 8080)]);
        web.affinity_seconds = Some(600);
        let c = desired(&[web], None);
        let svc = c.keys().find(|k| k.starts_with("KUBE-SVC-")).unwrap();
        let sep_of = |ip: &str| {
            c.keys()
                .find(|k| k.starts_with("KUBE-SEP-") && c[*k][1].contains(ip))
                .unwrap()
                .clone()
        };
        let (one, two) = (sep_of("10.244.1.2"), sep_of("10.244.2.2"));
        // Written as iptables-save prints them (checked on iptables 1.8.9).
        assert_eq!(
            c[svc][0],
            format!("-m comment --comment \"d/web:http/TCP -> 10.244.1.2:8080\" -m recent --rcheck --seconds 600 --reap --name {one} --mask 255.255.255.255 --rsource -j {one}")
        );
        assert!(
            c[svc][1].contains(&format!("--name {two} "))
                && c[svc][1].ends_with(&format!("-j {two}"))
        );
        // Then the round robin for sources not seen yet.
        assert!(c[svc][2].contains("--mode nth --every 2 --packet 0"));
        assert_eq!(
            c[&one][1],
            format!("-p tcp -m comment --comment \"d/web:http/TCP\" -m recent --set --name {one} --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.2:8080")
        );
    }

    #[test]
    fn ports_without_endpoints_are_refused_in_the_filter_table() {
        let mut dns = port("kube-dns", &[]);
        dns.cluster_ip = "10.96.0.53".into();
        dns.node_port = None;
        let ports = [port("web", &[]), port("full", &[("10.244.1.2", 8080)]), dns];
        let filter = desired_filter(&ports, &["10.96.0.53".to_string()]);
        // As iptables-save 1.8.9 prints them (recorded in a netns here), so a
        // save of the applied rules parses back equal and resyncs write nothing.
        let save = "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n\
            -A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
            -A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"d/web:http/TCP has no endpoints\" -m tcp --dport 80 -j REJECT --reject-with tcp-reset\n\
            -A KUBE-SERVICES -p tcp -m comment --comment \"d/web:http/TCP has no endpoints\" -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j REJECT --reject-with tcp-reset\n\
            COMMIT\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n";
        assert_eq!(parse_save_table(save, "filter"), filter);
        assert_eq!(
            Tables::parse_save(save),
            Tables {
                nat: Chains::from([(SERVICES.to_string(), vec![])]),
                filter: filter.clone()
            }
        );
        let input = restore_input_table("filter", &Chains::new(), &filter).unwrap();
        assert!(
            input.starts_with("*filter\n:KUBE-SERVICES - [0:0]\n"),
            "{input}"
        );
        // The Service gets an endpoint: the reject goes.
        let ports = [port("web", &[("10.244.1.2", 8080)])];
        let now = desired_filter(&ports, &[]);
        assert_eq!(now[SERVICES], Vec::<String>::new());
    }

    #[test]
    fn a_service_balances_round_robin_over_its_endpoints() {
        let c = desired(
            &[port(
                "web",
                &[
                    ("10.244.1.2", 8080),
                    ("10.244.2.2", 8080),
                    ("10.244.3.2", 8080),
                ],
            )],
            Some("10.244.0.0/16"),
        );
        let svc = c
            .keys()
            .find(|k| k.starts_with("KUBE-SVC-"))
            .unwrap()
            .clone();
        let rules = &c[&svc];
        assert!(rules[0].starts_with("! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp"));
        assert!(rules[1].contains("--mode nth --every 3 --packet 0"));
        assert!(rules[2].contains("--mode nth --every 2 --packet 0"));
        assert!(
            !rules[3].contains("statistic"),
            "the last endpoint takes the rest"
        );
        let seps: Vec<&String> = c.keys().filter(|k| k.starts_with("KUBE-SEP-")).collect();
        assert_eq!(seps.len(), 3);
        assert!(
            c.keys().all(|k| k.len() <= 28),
            "iptables chain names are at most 28 characters"
        );
        assert!(
            c[SERVICES][0].contains("-d 10.96.0.10/32 -p tcp")
                && c[SERVICES][0].ends_with(&format!("--dport 80 -j {svc}"))
        );
        assert!(c[SERVICES]
            .last()
            .unwrap()
            .contains("--dst-type LOCAL -j KUBE-NODEPORTS"));
        assert!(c[NODEPORTS][1].contains("--dport 30080 -j KUBE-SVC-"));
        let sep = &c[*seps
            .iter()
            .find(|s| c[**s][1].contains("10.244.2.2:8080"))
            .unwrap()];
        assert_eq!(
            sep[0],
            "-s 10.244.2.2/32 -m comment --comment \"d/web:http/TCP\" -j KUBE-MARK-MASQ"
        );
    }

    #[test]
    fn a_service_without_endpoints_has_no_chain() {
        let c = desired(&[port("web", &[])], None);
        assert!(c.keys().all(|k| !k.starts_with("KUBE-SVC-")));
        assert!(c[SERVICES].is_empty());
    }

    #[test]
    fn one_endpoint_change_rewrites_only_that_service() {
        let before = desired(
            &[
                port("a", &[("10.244.1.2", 80)]),
                port("b", &[("10.244.1.3", 80), ("10.244.1.4", 80)]),
            ],
            None,
        );
        let after = desired(
            &[
                port("a", &[("10.244.1.2", 80)]),
                port("b", &[("10.244.1.3", 80)]),
            ],
            None,
        );
        let input = restore_input(&before, &after).unwrap();
        let declared: Vec<&str> = input.lines().filter(|l| l.starts_with(':')).collect();
        assert_eq!(
            declared.len(),
            2,
            "b's service chain and the stale endpoint chain: {input}"
        );
        assert_eq!(input.lines().filter(|l| l.starts_with("-X ")).count(), 1);
        assert!(
            !input.contains("KUBE-SERVICES"),
            "unchanged chains are not touched"
        );
        assert!(restore_input(&after, &after).is_none());
    }

    #[test]
    fn saved_chains_parse_back_and_foreign_chains_are_ignored() {
        let c = desired(
            &[port("web", &[("10.244.1.2", 8080)])],
            Some("10.244.0.0/16"),
        );
        let mut save = String::from("*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:DOCKER - [0:0]\n-A DOCKER -i docker0 -j RETURN\n");
        for (name, rules) in &c {
            save.push_str(&format!(":{name} - [0:0]\n"));
            for r in rules {
                save.push_str(&format!("-A {name} {r}\n"));
            }
        }
        save.push_str(
            ":KUBE-SEP-OLD - [0:0]\n-A KUBE-SEP-OLD -j DNAT --to-destination 1.2.3.4:80\nCOMMIT\n",
        );
        let current = parse_save(&save);
        assert!(!current.contains_key("DOCKER") && !current.contains_key("KUBE-FORWARD"));
        let input = restore_input(&current, &c).unwrap();
        assert_eq!(
            input, "*nat\n:KUBE-SEP-OLD - [0:0]\n-X KUBE-SEP-OLD\nCOMMIT\n",
            "stale rules of ours are removed at start"
        );
    }

    /// What iptables 1.8.9 (nf_tables) saved after restoring `desired` for one
    /// Service with two endpoints (recorded on the lab machine): it parses back
    /// to exactly `desired`, so a resync with no change writes nothing.
    #[test]
    fn a_real_iptables_save_parses_back_to_the_desired_chains() {
        let p = port("web", &[("10.244.1.2", 8080), ("10.244.2.2", 8080)]);
        let c = desired(&[p], Some("10.244.0.0/16"));
        let saved = parse_save(include_str!("testdata/iptables-save-1.8.9-nat.txt"));
        assert_eq!(saved, c);
        assert!(restore_input(&saved, &c).is_none());
    }
}
