//! NetworkPolicy (networking.k8s.io/v1) validation, with Kubernetes'
//! messages and field paths: label selectors, ports (protocol, number or
//! name, `endPort` only after a numeric `port`), peers (one of the selectors,
//! or an `ipBlock` alone, whose `except` entries are strict subsets of its
//! `cidr`), and `policyTypes`.

use super::{Errors, FieldError};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::selector::Selector;
use serde_json::json;
use std::net::IpAddr;

const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// (address, prefix length) of a CIDR, IPv4 or IPv6.
pub fn parse_any_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max && !s.contains(' ')).then_some((ip, bits))
}

/// Whether `inner` (address, bits) lies inside `outer` with a longer prefix.
fn strict_subset(outer: (IpAddr, u8), inner: (IpAddr, u8)) -> bool {
    let mask = |ip: IpAddr, bits: u8| -> Option<u128> {
        let (v, width) = match ip {
            IpAddr::V4(a) => (u32::from(a) as u128, 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let keep = if bits == 0 {
            0
        } else {
            (u128::MAX << (width - bits as u32)) & (u128::MAX >> (128 - width))
        };
        Some(v & keep)
    };
    outer.0.is_ipv4() == inner.0.is_ipv4()
        && inner.1 > outer.1
        && mask(inner.0, outer.1) == mask(outer.0, outer.1)
}

/// A label selector that parses (operators, values for `In`/`NotIn`, keys).
pub(super) fn selector_errors(sel: &LabelSelector, path: &str, errs: &mut Errors) {
    if let Err(e) = Selector::from_label_selector(sel) {
        errs.push(FieldError::invalid(path, &json!(sel), e));
    }
}

fn port_errors(port: &NetworkPolicyPort, path: &str, errs: &mut Errors) {
    const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];
    if let Some(p) = port.protocol.as_deref() {
        if !PROTOCOLS.contains(&p) {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                &json!(p),
                &PROTOCOLS,
            ));
        }
    }
    let end = port.end_port;
    let valid_number = |n: i32| (1..=65535).contains(&n);
    let between = "must be between 1 and 65535, inclusive";
    match &port.port {
        Some(IntOrString::Int(n)) => {
            let n = *n;
            if !valid_number(n) {
                errs.push(FieldError::invalid(
                    format!("{path}.port"),
                    &json!(n),
                    between,
                ));
            }
            if let Some(e) = end {
                if e < n {
                    errs.push(FieldError::invalid(
                        format!("{path}.endPort"),
                        &json!(n),
                        "must be greater than or equal to `port`",
                    ));
                }
                if !valid_number(e) {
                    errs.push(FieldError::invalid(
                        format!("{path}.endPort"),
                        &json!(e),
                        between,
                    ));
                }
            }
        }
        Some(IntOrString::String(name)) => {
            if let Some(e) = end {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    &json!(e),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            if let Some(why) = minik8s_api::names::port_name_error(name) {
                errs.push(FieldError::invalid(
                    format!("{path}.port"),
                    &json!(name),
                    why,
                ));
            }
        }
        None => {
            if let Some(e) = end {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    &json!(e),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

fn ip_block_errors(block: &IPBlock, path: &str, errs: &mut Errors) {
    if block.cidr.is_empty() {
        errs.push(FieldError::required(format!("{path}.cidr"), ""));
        return;
    }
    let Some(outer) = parse_any_cidr(&block.cidr) else {
        errs.push(FieldError::invalid(
            format!("{path}.cidr"),
            &json!(block.cidr),
            CIDR_MESSAGE,
        ));
        return;
    };
    for (i, except) in block.except.iter().flatten().enumerate() {
        let at = format!("{path}.except[{i}]");
        match parse_any_cidr(except) {
            None => errs.push(FieldError::invalid(at, &json!(except), CIDR_MESSAGE)),
            Some(inner) if !strict_subset(outer, inner) => errs.push(FieldError::invalid(
                at,
                &json!(except),
                "must be a strict subset of `cidr`",
            )),
            Some(_) => {}
        }
    }
}

fn peer_errors(peer: &NetworkPolicyPeer, path: &str, errs: &mut Errors) {
    let mut count = 0;
    for (f, sel) in [
        ("podSelector", &peer.pod_selector),
        ("namespaceSelector", &peer.namespace_selector),
    ] {
        if let Some(sel) = sel {
            count += 1;
            selector_errors(sel, &format!("{path}.{f}"), errs);
        }
    }
    if let Some(block) = &peer.ip_block {
        count += 1;
        ip_block_errors(block, &format!("{path}.ipBlock"), errs);
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if count > 1 && peer.ip_block.is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// One direction's rules: each rule's ports and peers.
fn rules_errors<'a>(
    rules: impl Iterator<
        Item = (
            Option<&'a [NetworkPolicyPort]>,
            Option<&'a [NetworkPolicyPeer]>,
        ),
    >,
    dir: &str,
    peers: &str,
    errs: &mut Errors,
) {
    for (i, (ports, peer_list)) in rules.enumerate() {
        for (j, port) in ports.into_iter().flatten().enumerate() {
            port_errors(port, &format!("spec.{dir}[{i}].ports[{j}]"), errs);
        }
        for (j, peer) in peer_list.into_iter().flatten().enumerate() {
            peer_errors(peer, &format!("spec.{dir}[{i}].{peers}[{j}]"), errs);
        }
    }
}

pub(super) fn validate_network_policy(
    policy: &NetworkPolicy,
    _old: Option<&NetworkPolicy>,
    errs: &mut Errors,
) {
    let empty = NetworkPolicySpec::default();
    let spec = policy.spec.as_ref().unwrap_or(&empty);
    if let Some(sel) = &spec.pod_selector {
        selector_errors(sel, "spec.podSelector", errs);
    }
    let ingress = spec.ingress.iter().flatten();
    let ingress = ingress.map(|r| (r.ports.as_deref(), r.from.as_deref()));
    rules_errors(ingress, "ingress", "from", errs);
    let egress = spec.egress.iter().flatten();
    let egress = egress.map(|r| (r.ports.as_deref(), r.to.as_deref()));
    rules_errors(egress, "egress", "to", errs);
    let types = spec.policy_types.as_deref().unwrap_or_default();
    for (i, t) in types.iter().enumerate() {
        if !matches!(t.as_str(), "Ingress" | "Egress") {
            errs.push(FieldError::not_supported(
                format!("spec.policyTypes[{i}]"),
                &json!(t),
                &["Ingress", "Egress"],
            ));
        }
    }
    if types.len() > 2 {
        errs.push(FieldError::invalid(
            "spec.policyTypes",
            &json!(types),
            "may not specify more than two policyTypes",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        let policy = serde_json::from_value(json!({"spec": spec})).unwrap();
        validate_network_policy(&policy, None, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn kubernetes_messages_for_bad_policies() {
        assert!(errors(json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                                  {"namespaceSelector": {"matchLabels": {"a": "b"}}, "podSelector": {}}],
                         "ports": [{"port": 80}, {"port": "http", "protocol": "UDP"}, {"port": 8000, "endPort": 9000}]}],
            "egress": [{}]}))
        .is_empty());
        let got = errors(json!({"podSelector": {},
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.300/8"}}, {}],
                         "ports": [{"port": 0}, {"port": "http", "endPort": 90}, {"port": 90, "endPort": 80}, {"protocol": "ICMP"}]}],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/8", "x"]},
                                "podSelector": {}}]}],
            "policyTypes": ["Ingress", "Sideways"]}));
        let want = [
            "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ingress[0].ports[1].endPort: Invalid value: 90: may not be specified when `port` is non-numeric",
            "spec.ingress[0].ports[2].endPort: Invalid value: 90: must be greater than or equal to `port`",
            "spec.ingress[0].ports[3].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
            "spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.300/8\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            "spec.ingress[0].from[1]: Required value: must specify a peer",
            "spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`",
            "spec.egress[0].to[0].ipBlock.except[1]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`",
            "spec.egress[0].to[0].ipBlock.except[2]: Invalid value: \"x\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            "spec.egress[0].to[0]: Forbidden: may not specify both ipBlock and another peer",
            "spec.policyTypes[1]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
        ];
        assert_eq!(got, want);
    }
}
