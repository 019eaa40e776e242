//! NetworkPolicy (networking.k8s.io/v1) validation, with Kubernetes'
//! messages and field paths: label selectors, ports (protocol, number or
//! name, `endPort` only after a numeric `port`), peers (one of the selectors,
//! or an `ipBlock` alone, whose `except` entries are strict subsets of its
//! `cidr`), and `policyTypes`.

use super::{Errors, FieldError};
use minik8s_api::selector::Selector;
use serde_json::Value;
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

pub(super) fn selector_errors(sel: &Value, path: &str, errs: &mut Errors) {
    let parsed = serde_json::from_value(sel.clone())
        .map_err(|e| e.to_string())
        .and_then(|ls| Selector::from_label_selector(&ls));
    if let Err(e) = parsed {
        errs.push(FieldError::invalid(path, sel, e));
    }
}

fn port_errors(port: &Value, path: &str, errs: &mut Errors) {
    if let Some(p) = port.get("protocol").filter(|p| !p.is_null()) {
        if !matches!(p.as_str(), Some("TCP" | "UDP" | "SCTP")) {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                p,
                &["TCP", "UDP", "SCTP"],
            ));
        }
    }
    let end = port.get("endPort").filter(|e| !e.is_null());
    let valid_number = |n: i64| (1..=65535).contains(&n);
    match port.get("port").filter(|p| !p.is_null()) {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !valid_number(n) {
                errs.push(FieldError::invalid(
                    format!("{path}.port"),
                    &Value::from(n),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if let Some(e) = end {
                let e_n = e.as_i64().unwrap_or(0);
                if e_n < n {
                    errs.push(FieldError::invalid(
                        format!("{path}.endPort"),
                        &Value::from(n),
                        "must be greater than or equal to `port`",
                    ));
                }
                if !valid_number(e_n) {
                    errs.push(FieldError::invalid(
                        format!("{path}.endPort"),
                        e,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
        Some(name @ Value::String(s)) => {
            if let Some(e) = end {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    e,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            if let Some(why) = minik8s_api::names::port_name_error(s) {
                errs.push(FieldError::invalid(format!("{path}.port"), name, why));
            }
        }
        Some(other) => errs.push(FieldError::invalid(
            format!("{path}.port"),
            other,
            "must be a port number or name",
        )),
        None => {
            if let Some(e) = end {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    e,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

fn ip_block_errors(block: &Value, path: &str, errs: &mut Errors) {
    let cidr = block.get("cidr").and_then(Value::as_str).unwrap_or("");
    if cidr.is_empty() {
        errs.push(FieldError::required(format!("{path}.cidr"), ""));
        return;
    }
    let Some(outer) = parse_any_cidr(cidr) else {
        errs.push(FieldError::invalid(
            format!("{path}.cidr"),
            &Value::from(cidr),
            CIDR_MESSAGE,
        ));
        return;
    };
    for (i, except) in block
        .get("except")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.except[{i}]");
        let text = except.as_str().unwrap_or("");
        match parse_any_cidr(text) {
            None => errs.push(FieldError::invalid(at, except, CIDR_MESSAGE)),
            Some(inner) if !strict_subset(outer, inner) => errs.push(FieldError::invalid(
                at,
                except,
                "must be a strict subset of `cidr`",
            )),
            Some(_) => {}
        }
    }
}

fn peer_errors(peer: &Value, path: &str, errs: &mut Errors) {
    let set = |f: &str| peer.get(f).filter(|v| !v.is_null());
    let mut count = 0;
    for f in ["podSelector", "namespaceSelector"] {
        if let Some(sel) = set(f) {
            count += 1;
            selector_errors(sel, &format!("{path}.{f}"), errs);
        }
    }
    if let Some(block) = set("ipBlock") {
        count += 1;
        ip_block_errors(block, &format!("{path}.ipBlock"), errs);
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if count > 1 && set("ipBlock").is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

pub(super) fn validate_network_policy(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    selector_errors(
        spec.get("podSelector").unwrap_or(&Value::Null),
        "spec.podSelector",
        errs,
    );
    for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in spec
            .get(dir)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            for (j, port) in rule
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                port_errors(port, &format!("spec.{dir}[{i}].ports[{j}]"), errs);
            }
            for (j, peer) in rule
                .get(peers)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                peer_errors(peer, &format!("spec.{dir}[{i}].{peers}[{j}]"), errs);
            }
        }
    }
    let types = spec.get("policyTypes").and_then(Value::as_array);
    for (i, t) in types.into_iter().flatten().enumerate() {
        if !matches!(t.as_str(), Some("Ingress" | "Egress")) {
            errs.push(FieldError::not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
    if let Some(types) = types.filter(|t| t.len() > 2) {
        errs.push(FieldError::invalid(
            "spec.policyTypes",
            &Value::Array(types.clone()),
            "may not specify more than two policyTypes",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_network_policy(&json!({"spec": spec}), &mut errs);
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
