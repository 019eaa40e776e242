//! ServiceCIDR and IPAddress (`networking.k8s.io/v1`): the Service IP ranges
//! and the record of each address given out, validated with Kubernetes'
//! messages. The cluster is single-stack IPv4, so a ServiceCIDR holds one
//! IPv4 range (an IPv6 one would be accepted and never used: refused).

use super::network_policy::parse_any_cidr;
use super::{Errors, FieldError};
use k8s_openapi::api::networking::v1::{IPAddress, ParentReference, ServiceCIDR};
use minik8s_api::names::dns1123_subdomain_error;
use serde_json::json;
use std::net::IpAddr;

const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// The canonical form of a CIDR: its address masked to the prefix.
fn canonical_cidr(ip: IpAddr, bits: u8) -> String {
    match ip {
        IpAddr::V4(a) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            format!("{}/{bits}", std::net::Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            format!("{}/{bits}", std::net::Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

/// A ServiceCIDR: one or two CIDRs (one per family), canonical, immutable
/// once set (a second family may be added).
pub fn validate_service_cidr(
    service_cidr: &ServiceCIDR,
    old: Option<&ServiceCIDR>,
    errs: &mut Errors,
) {
    let path = "spec.cidrs";
    let cidrs_of = |s: &ServiceCIDR| {
        s.spec
            .as_ref()
            .and_then(|s| s.cidrs.clone())
            .unwrap_or_default()
    };
    let cidrs = cidrs_of(service_cidr);
    let spec = json!(service_cidr.spec.clone().unwrap_or_default());
    if cidrs.is_empty() {
        errs.push(FieldError::required(path, "at least one CIDR required"));
        return;
    }
    if cidrs.len() > 2 {
        errs.push(FieldError::invalid(
            path,
            &spec,
            "may only hold up to 2 values",
        ));
        return;
    }
    let mut families = Vec::new();
    for (i, cidr) in cidrs.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match parse_any_cidr(cidr) {
            None => errs.push(FieldError::invalid(&at, &json!(cidr), CIDR_MESSAGE)),
            Some((ip, bits)) => {
                let canonical = canonical_cidr(ip, bits);
                if canonical != **cidr {
                    errs.push(FieldError::invalid(
                        &at,
                        &json!(cidr),
                        format!("must be in canonical form ({canonical:?})"),
                    ));
                } else if ip.is_ipv6() {
                    errs.push(FieldError::invalid(
                        &at,
                        &json!(cidr),
                        "this cluster is single-stack IPv4: Services get IPv4 addresses only",
                    ));
                } else if bits > 30 {
                    errs.push(FieldError::invalid(
                        &at,
                        &json!(cidr),
                        "leaves no address for a Service (the prefix may be at most /30)",
                    ));
                }
                families.push(ip.is_ipv4());
            }
        }
    }
    if families.len() == 2 && families[0] == families[1] {
        errs.push(FieldError::invalid(
            path,
            &spec,
            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
        ));
    }
    let Some(old) = old else { return };
    let before = cidrs_of(old);
    if before.len() == cidrs.len() {
        for (i, (was, now)) in before.iter().zip(&cidrs).enumerate() {
            if was != now {
                errs.push(FieldError::invalid(
                    format!("{path}[{i}]"),
                    &json!(now),
                    "field is immutable",
                ));
            }
        }
    } else if !(before.len() == 1 && cidrs.len() == 2 && before[0] == cidrs[0]) {
        errs.push(FieldError::invalid(
            path,
            &json!(cidrs),
            "field is immutable",
        ));
    }
}

/// An IPAddress's name is the address, in canonical form.
pub fn ip_address_name_error(name: &str) -> Option<String> {
    match name.parse::<IpAddr>() {
        Err(_) => Some(format!("ParseAddr({name:?}): unable to parse IP")),
        Ok(ip) if ip.to_string() != name => Some("must be a canonical format IP address".into()),
        Ok(_) => None,
    }
}

/// An IPAddress: the object it is allocated to (`spec.parentRef`), immutable.
pub fn validate_ip_address(address: &IPAddress, old: Option<&IPAddress>, errs: &mut Errors) {
    let path = "spec.parentRef";
    let parent = &address.spec.parent_ref;
    if *parent == ParentReference::default() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let segment_error = |s: &str| match s {
        "." => Some("may not be '.'"),
        ".." => Some("may not be '..'"),
        s if s.contains('/') => Some("may not contain '/'"),
        s if s.contains('%') => Some("may not contain '%'"),
        _ => None,
    };
    let group = parent.group.as_deref().unwrap_or_default();
    if !group.is_empty() {
        if let Some(msg) = dns1123_subdomain_error(group) {
            errs.push(FieldError::invalid(
                format!("{path}.group"),
                &json!(group),
                msg,
            ));
        }
    }
    for (key, value) in [("resource", &parent.resource), ("name", &parent.name)] {
        if value.is_empty() {
            errs.push(FieldError::required(format!("{path}.{key}"), ""));
        } else if let Some(msg) = segment_error(value) {
            errs.push(FieldError::invalid(
                format!("{path}.{key}"),
                &json!(value),
                msg,
            ));
        }
    }
    let namespace = parent.namespace.as_deref().unwrap_or_default();
    if !namespace.is_empty() {
        if let Some(msg) = minik8s_api::names::dns1123_label_error(namespace) {
            errs.push(FieldError::invalid(
                format!("{path}.namespace"),
                &json!(namespace),
                msg,
            ));
        }
    }
    if old.is_some_and(|old| old.spec.parent_ref != *parent) {
        errs.push(FieldError::invalid(
            path,
            &json!(parent),
            "field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn decoded<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn cidr_errors(cidrs: Value, old: Option<Value>) -> Vec<String> {
        let obj = decoded(json!({"spec": {"cidrs": cidrs}}));
        let old = old.map(|c| decoded(json!({"spec": {"cidrs": c}})));
        let mut errs = Vec::new();
        validate_service_cidr(&obj, old.as_ref(), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn service_cidrs_are_canonical_single_family_and_immutable() {
        assert!(cidr_errors(json!(["10.100.0.0/24"]), None).is_empty());
        assert_eq!(
            cidr_errors(json!([]), None),
            ["spec.cidrs: Required value: at least one CIDR required"]
        );
        assert_eq!(
            cidr_errors(json!(["10.100.0.1/24"]), None),
            ["spec.cidrs[0]: Invalid value: \"10.100.0.1/24\": must be in canonical form (\"10.100.0.0/24\")"]
        );
        assert_eq!(
            cidr_errors(json!(["nope"]), None),
            ["spec.cidrs[0]: Invalid value: \"nope\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
        );
        assert_eq!(
            cidr_errors(json!(["10.1.0.0/24", "10.2.0.0/24"]), None).len(),
            1
        );
        assert_eq!(
            cidr_errors(json!(["fd00::/108"]), None),
            ["spec.cidrs[0]: Invalid value: \"fd00::/108\": this cluster is single-stack IPv4: Services get IPv4 addresses only"]
        );
        assert_eq!(
            cidr_errors(json!(["10.3.0.0/24"]), Some(json!(["10.100.0.0/24"]))),
            ["spec.cidrs[0]: Invalid value: \"10.3.0.0/24\": field is immutable"]
        );
    }

    #[test]
    fn ip_addresses_name_an_address_and_a_parent() {
        assert_eq!(ip_address_name_error("10.96.0.5"), None);
        assert_eq!(
            ip_address_name_error("10.96.0.x").as_deref(),
            Some("ParseAddr(\"10.96.0.x\"): unable to parse IP")
        );
        assert_eq!(
            ip_address_name_error("2001:db8:0::1").as_deref(),
            Some("must be a canonical format IP address")
        );
        let check = |obj: Value, old: Option<Value>| {
            let mut errs = Vec::new();
            let old = old.map(decoded);
            validate_ip_address(&decoded(obj), old.as_ref(), &mut errs);
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        let parent = json!({"spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "web"}}});
        assert!(check(parent.clone(), None).is_empty());
        assert_eq!(
            check(json!({"spec": {}}), None),
            ["spec.parentRef: Required value"]
        );
        assert_eq!(
            check(
                json!({"spec": {"parentRef": {"resource": "services"}}}),
                None
            ),
            ["spec.parentRef.name: Required value"]
        );
        let moved = json!({"spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "other"}}});
        assert_eq!(check(moved, Some(parent)).len(), 1);
    }
}
