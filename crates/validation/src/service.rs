//! Services: type, ports, selectors, ClusterIP and its immutability; an
//! EndpointSlice's address type.

use super::*;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use std::collections::HashSet;

/// Kubernetes' `ValidateService(Update)` for what minik8s serves.
pub(super) fn validate_service(svc: &Service, old: Option<&Service>, errs: &mut Errors) {
    let empty = ServiceSpec::default();
    let spec = svc.spec.as_ref().unwrap_or(&empty);
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    one_of(
        errs,
        spec.type_.as_deref(),
        "spec.type",
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
    );
    one_of(
        errs,
        spec.session_affinity.as_deref(),
        "spec.sessionAffinity",
        &["ClientIP", "None"],
    );
    validate_affinity(spec, errs);
    validate_ip_families(spec, errs);
    validate_traffic_policies(spec, ty, errs);
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    if ty == "ExternalName" && spec.external_name.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required("spec.externalName", ""));
    }
    validate_ports(ports, ty, errs);
    for (k, v) in spec.selector.iter().flatten() {
        if let Some(e) = qualified_name_error(k) {
            errs.push(FieldError::invalid("spec.selector", &json!(k), e));
        }
        if let Some(e) = label_value_error(v) {
            errs.push(FieldError::invalid("spec.selector", &json!(v), e));
        }
    }
    if let Some(ip) = spec.cluster_ip.as_deref().filter(|ip| !ip.is_empty()) {
        if ip != "None" && ip.parse::<std::net::Ipv4Addr>().is_err() {
            errs.push(FieldError::invalid(
                "spec.clusterIP",
                &json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    // The ClusterIP may change only on the way to or from ExternalName.
    let Some(old_spec) = old.and_then(|o| o.spec.as_ref()) else {
        return;
    };
    let external_name_move =
        old_spec.type_.as_deref() == Some("ExternalName") || ty == "ExternalName";
    let was = old_spec.cluster_ip.as_deref().filter(|ip| !ip.is_empty());
    if !external_name_move && was.is_some() && spec.cluster_ip.as_deref() != was {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            &json!(spec.cluster_ip),
            "field is immutable",
        ));
    }
}

/// Each port: a number, a protocol, a target by number or name, a name
/// (required when there are several, each once), no port and protocol
/// twice, and a node port only where the type has them.
fn validate_ports(ports: &[ServicePort], ty: &str, errs: &mut Errors) {
    let between = "must be between 1 and 65535, inclusive";
    let mut names = HashSet::new();
    let mut port_protos = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        if !(1..=65535).contains(&p.port) {
            errs.push(FieldError::invalid(
                format!("{pp}.port"),
                &json!(p.port),
                between,
            ));
        }
        one_of(
            errs,
            p.protocol.as_deref(),
            &format!("{pp}.protocol"),
            PROTOCOLS,
        );
        match &p.target_port {
            Some(IntOrString::String(s)) => {
                if let Some(e) = port_name_error(s) {
                    errs.push(FieldError::invalid(
                        format!("{pp}.targetPort"),
                        &json!(s),
                        e,
                    ));
                }
            }
            Some(IntOrString::Int(n)) if !(1..=65535).contains(n) => {
                errs.push(FieldError::invalid(
                    format!("{pp}.targetPort"),
                    &json!(n),
                    between,
                ));
            }
            _ => {}
        }
        match p.name.as_deref().filter(|n| !n.is_empty()) {
            None if ports.len() > 1 => errs.push(FieldError::required(format!("{pp}.name"), "")),
            None => {}
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(format!("{pp}.name"), &json!(n), e));
                }
                if !names.insert(n) {
                    errs.push(FieldError::duplicate(format!("{pp}.name"), &json!(n)));
                }
            }
        }
        if !port_protos.insert((p.port, p.protocol.as_deref().unwrap_or("TCP"))) {
            errs.push(FieldError::duplicate(pp.clone(), &json!(p)));
        }
        if let Some(np) = p.node_port {
            if ty == "ClusterIP" && np != 0 {
                errs.push(FieldError::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if !(0..=65535).contains(&np) {
                errs.push(FieldError::invalid(
                    format!("{pp}.nodePort"),
                    &json!(np),
                    between,
                ));
            }
        }
    }
}

/// The cluster is single-stack IPv4: a Service may prefer dual stack (it
/// gets IPv4), but not require it nor ask for IPv6, with the messages
/// Kubernetes' allocator gives such a cluster.
fn validate_ip_families(spec: &ServiceSpec, errs: &mut Errors) {
    let policy = spec.ip_family_policy.as_deref();
    one_of(
        errs,
        policy,
        "spec.ipFamilyPolicy",
        &["PreferDualStack", "RequireDualStack", "SingleStack"],
    );
    if policy == Some("RequireDualStack") {
        errs.push(FieldError::invalid(
            "spec.ipFamilyPolicy",
            &json!(policy),
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, family) in spec.ip_families.iter().flatten().enumerate() {
        if family != "IPv4" {
            errs.push(FieldError::invalid(
                format!("spec.ipFamilies[{i}]"),
                &json!(family),
                format!("ipfamily {family} is not configured on cluster"),
            ));
        }
    }
}

/// The longest ClientIP affinity Kubernetes allows (`MaxClientIPServiceAffinitySeconds`: a day).
const MAX_AFFINITY_SECONDS: i32 = 86400;

/// `sessionAffinityConfig` goes with ClientIP affinity, with a timeout in (0, 1 day].
fn validate_affinity(spec: &ServiceSpec, errs: &mut Errors) {
    let config = spec.session_affinity_config.as_ref();
    match spec.session_affinity.as_deref() {
        Some("ClientIP") => {
            let path = "spec.sessionAffinityConfig";
            let Some(config) = config else {
                errs.push(FieldError::required(
                    path,
                    "when session affinity type is ClientIP",
                ));
                return;
            };
            let Some(client) = &config.client_ip else {
                errs.push(FieldError::required(
                    format!("{path}.clientIP"),
                    "when session affinity type is ClientIP",
                ));
                return;
            };
            let timeout_path = format!("{path}.clientIP.timeoutSeconds");
            match client.timeout_seconds {
                None => errs.push(FieldError::required(
                    timeout_path,
                    "when session affinity type is ClientIP",
                )),
                Some(t) if !(t > 0 && t <= MAX_AFFINITY_SECONDS) => errs.push(FieldError::invalid(
                    timeout_path,
                    &json!(t),
                    format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
                )),
                Some(_) => {}
            }
        }
        _ if config.is_some() => errs.push(FieldError::forbidden(
            "spec.sessionAffinityConfig",
            "must not be set when session affinity is None",
        )),
        _ => {}
    }
}

/// `externalTrafficPolicy` only where traffic comes from outside (NodePort,
/// LoadBalancer, external IPs); `healthCheckNodePort` only for a
/// LoadBalancer with the Local policy.
fn validate_traffic_policies(spec: &ServiceSpec, ty: &str, errs: &mut Errors) {
    let external_ips = spec
        .external_ips
        .as_ref()
        .is_some_and(|ips| !ips.is_empty());
    let externally_accessible =
        ty == "NodePort" || ty == "LoadBalancer" || (ty == "ClusterIP" && external_ips);
    let etp = spec.external_traffic_policy.as_deref();
    match etp {
        Some(v) if !externally_accessible && !v.is_empty() => errs.push(FieldError::invalid(
            "spec.externalTrafficPolicy",
            &json!(v),
            "may only be set for externally-accessible services",
        )),
        Some(_) if externally_accessible => one_of(
            errs,
            etp,
            "spec.externalTrafficPolicy",
            &["Cluster", "Local"],
        ),
        _ => {}
    }
    if ty != "ExternalName" {
        one_of(
            errs,
            spec.internal_traffic_policy.as_deref(),
            "spec.internalTrafficPolicy",
            &["Cluster", "Local"],
        );
    }
    one_of(
        errs,
        spec.traffic_distribution.as_deref(),
        "spec.trafficDistribution",
        &["PreferClose", "PreferSameNode", "PreferSameZone"],
    );
    let needs_health_check = ty == "LoadBalancer" && etp == Some("Local");
    if let Some(port) = spec.health_check_node_port.filter(|p| *p != 0) {
        if !needs_health_check {
            errs.push(FieldError::invalid(
                "spec.healthCheckNodePort",
                &json!(port),
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        } else if !(1..=65535).contains(&port) {
            errs.push(FieldError::invalid(
                "spec.healthCheckNodePort",
                &json!(port),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
}

/// An EndpointSlice's address type: one of IPv4, IPv6 and FQDN.
pub(super) fn validate_endpoint_slice(
    slice: &EndpointSlice,
    _old: Option<&EndpointSlice>,
    errs: &mut Errors,
) {
    const TYPES: [&str; 3] = ["IPv4", "IPv6", "FQDN"];
    match slice.address_type.as_str() {
        "" => errs.push(FieldError::required("addressType", "")),
        t if !TYPES.contains(&t) => {
            errs.push(FieldError::not_supported("addressType", &json!(t), &TYPES))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages for `spec` after the defaults, as Kubernetes words them.
    fn errors(spec: Value) -> Vec<String> {
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": spec});
        crate::default::<k8s_openapi::api::core::v1::Service>(&mut svc);
        let mut errs = Vec::new();
        validate_service(&serde_json::from_value(svc).unwrap(), None, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn client_ip_affinity_is_defaulted_and_checked() {
        let ports = json!([{"port": 80}]);
        let mut svc =
            json!({"kind": "Service", "spec": {"sessionAffinity": "ClientIP", "ports": ports}});
        crate::default::<k8s_openapi::api::core::v1::Service>(&mut svc);
        assert_eq!(
            svc["spec"]["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
        assert!(errors(json!({"sessionAffinity": "ClientIP", "ports": ports})).is_empty());
        assert_eq!(
            errors(json!({"sessionAffinity": "ClientIP", "ports": ports,
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}})),
            ["spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400"]
        );
        assert_eq!(
            errors(json!({"ports": ports, "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}})),
            ["spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None"]
        );
    }

    #[test]
    fn a_single_stack_cluster_refuses_dual_stack_and_ipv6() {
        let ports = json!([{"port": 80}]);
        assert!(errors(json!({"ports": ports, "ipFamilyPolicy": "PreferDualStack"})).is_empty());
        assert_eq!(
            errors(json!({"ports": ports, "ipFamilyPolicy": "RequireDualStack"})),
            ["spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"]
        );
        assert_eq!(
            errors(json!({"ports": ports, "ipFamilies": ["IPv6"]})),
            ["spec.ipFamilies[0]: Invalid value: \"IPv6\": ipfamily IPv6 is not configured on cluster"]
        );
    }

    #[test]
    fn traffic_policies_belong_where_traffic_comes_from() {
        let ports = json!([{"port": 80}]);
        assert_eq!(
            errors(json!({"ports": ports, "externalTrafficPolicy": "Local"})),
            ["spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"]
        );
        assert!(errors(
            json!({"type": "NodePort", "ports": ports, "externalTrafficPolicy": "Local"})
        )
        .is_empty());
        assert_eq!(
            errors(json!({"type": "NodePort", "ports": ports, "internalTrafficPolicy": "Nearby"})),
            ["spec.internalTrafficPolicy: Unsupported value: \"Nearby\": supported values: \"Cluster\", \"Local\""]
        );
        assert_eq!(
            errors(json!({"type": "NodePort", "ports": ports, "healthCheckNodePort": 31000})),
            ["spec.healthCheckNodePort: Invalid value: 31000: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"]
        );
        assert_eq!(
            errors(json!({"type": "LoadBalancer", "ports": ports, "externalTrafficPolicy": "Local",
                "healthCheckNodePort": 70000})),
            ["spec.healthCheckNodePort: Invalid value: 70000: must be between 1 and 65535, inclusive"]
        );
        assert!(
            errors(json!({"ports": ports, "trafficDistribution": "PreferSameNode"})).is_empty()
        );
        assert_eq!(
            errors(json!({"ports": ports, "trafficDistribution": "Nearby"})),
            ["spec.trafficDistribution: Unsupported value: \"Nearby\": supported values: \"PreferClose\", \"PreferSameNode\", \"PreferSameZone\""]
        );
    }
}
