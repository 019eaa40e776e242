//! Services: type, ports, selectors, ClusterIP and its immutability; an
//! EndpointSlice's address type.

use super::*;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

pub(super) fn validate_service(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let ty = str_at(&spec, "type").unwrap_or("ClusterIP");
    check_enum(
        errs,
        &spec,
        "type",
        "spec",
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
    );
    check_enum(
        errs,
        &spec,
        "sessionAffinity",
        "spec",
        &["ClientIP", "None"],
    );
    validate_affinity(&spec, errs);
    validate_ip_families(&spec, errs);
    validate_traffic_policies(&spec, ty, errs);
    let headless = str_at(&spec, "clusterIP") == Some("None");
    let ports = arr(&spec, "ports");
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    if ty == "ExternalName" && non_empty_str(&spec, "externalName").is_none() {
        errs.push(FieldError::required("spec.externalName", ""));
    }
    let mut names = std::collections::HashSet::new();
    let mut port_protos = std::collections::HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        check_port(errs, p, "port", &pp, true);
        check_enum(errs, p, "protocol", &pp, PROTOCOLS);
        match p.get("targetPort") {
            Some(Value::String(s)) => {
                if let Some(e) = port_name_error(s) {
                    errs.push(FieldError::invalid(
                        format!("{pp}.targetPort"),
                        &Value::String(s.clone()),
                        e,
                    ));
                }
            }
            Some(Value::Number(_)) => check_port(errs, p, "targetPort", &pp, false),
            Some(other) => errs.push(FieldError::invalid(
                format!("{pp}.targetPort"),
                other,
                "must be an int or a string",
            )),
            None => {}
        }
        match non_empty_str(p, "name") {
            None if ports.len() > 1 => errs.push(FieldError::required(format!("{pp}.name"), "")),
            None => {}
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(
                        format!("{pp}.name"),
                        &Value::String(n.into()),
                        e,
                    ));
                }
                if !names.insert(n.to_string()) {
                    errs.push(FieldError::duplicate(
                        format!("{pp}.name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
        let key = (
            p.get("port").and_then(Value::as_i64),
            str_at(p, "protocol").unwrap_or("TCP").to_string(),
        );
        if !port_protos.insert(key) {
            errs.push(FieldError::duplicate(pp.to_string(), p));
        }
        if let Some(np) = p.get("nodePort") {
            if ty == "ClusterIP" && np.as_i64() != Some(0) {
                errs.push(FieldError::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if !np
                .as_i64()
                .is_some_and(|n| n == 0 || (1..=65535).contains(&n))
            {
                errs.push(FieldError::invalid(
                    format!("{pp}.nodePort"),
                    np,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    if let Some(sel) = spec.get("selector").and_then(Value::as_object) {
        for (k, v) in sel {
            if let Some(e) = qualified_name_error(k) {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    &Value::String(k.clone()),
                    e,
                ));
            }
            if let Some(e) = v.as_str().and_then(label_value_error) {
                errs.push(FieldError::invalid("spec.selector", v, e));
            }
        }
    }
    if let Some(ip) = non_empty_str(&spec, "clusterIP") {
        if ip != "None" && ip.parse::<std::net::Ipv4Addr>().is_err() {
            errs.push(FieldError::invalid(
                "spec.clusterIP",
                &Value::String(ip.into()),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    // The ClusterIP may change only on the way to or from ExternalName.
    let external_name_move = |old: &Value| {
        old.pointer("/spec/type") == Some(&Value::String("ExternalName".into()))
            || ty == "ExternalName"
    };
    if let Some(old) = old.filter(|o| !external_name_move(o)) {
        let (o, n) = (
            old.pointer("/spec/clusterIP"),
            obj.pointer("/spec/clusterIP"),
        );
        if o.is_some_and(|o| o != "") && n != o {
            errs.push(FieldError::invalid(
                "spec.clusterIP",
                n.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

/// The cluster is single-stack IPv4: a Service may prefer dual stack (it
/// gets IPv4), but not require it nor ask for IPv6, with the messages
/// Kubernetes' allocator gives such a cluster.
fn validate_ip_families(spec: &Value, errs: &mut Errors) {
    check_enum(
        errs,
        spec,
        "ipFamilyPolicy",
        "spec",
        &["PreferDualStack", "RequireDualStack", "SingleStack"],
    );
    if let Some(policy) = spec
        .get("ipFamilyPolicy")
        .filter(|p| *p == "RequireDualStack")
    {
        errs.push(FieldError::invalid(
            "spec.ipFamilyPolicy",
            policy,
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, family) in arr(spec, "ipFamilies").iter().enumerate() {
        if family != "IPv4" {
            let name = family.as_str().unwrap_or_default();
            errs.push(FieldError::invalid(
                format!("spec.ipFamilies[{i}]"),
                family,
                format!("ipfamily {name} is not configured on cluster"),
            ));
        }
    }
}

/// The longest ClientIP affinity Kubernetes allows (`MaxClientIPServiceAffinitySeconds`: a day).
const MAX_AFFINITY_SECONDS: i64 = 86400;

/// `sessionAffinityConfig` goes with ClientIP affinity, with a timeout in (0, 1 day].
fn validate_affinity(spec: &Value, errs: &mut Errors) {
    let config = spec.get("sessionAffinityConfig").filter(|c| !c.is_null());
    match str_at(spec, "sessionAffinity") {
        Some("ClientIP") => {
            let path = "spec.sessionAffinityConfig";
            let Some(config) = config else {
                errs.push(FieldError::required(
                    path,
                    "when session affinity type is ClientIP",
                ));
                return;
            };
            let Some(client) = config.get("clientIP").filter(|c| !c.is_null()) else {
                errs.push(FieldError::required(
                    format!("{path}.clientIP"),
                    "when session affinity type is ClientIP",
                ));
                return;
            };
            let timeout_path = format!("{path}.clientIP.timeoutSeconds");
            match client.get("timeoutSeconds").filter(|t| !t.is_null()) {
                None => errs.push(FieldError::required(
                    timeout_path,
                    "when session affinity type is ClientIP",
                )),
                Some(t)
                    if !t
                        .as_i64()
                        .is_some_and(|t| t > 0 && t <= MAX_AFFINITY_SECONDS) =>
                {
                    errs.push(FieldError::invalid(
                        timeout_path,
                        t,
                        format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
                    ))
                }
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
fn validate_traffic_policies(spec: &Value, ty: &str, errs: &mut Errors) {
    let external_ips = !arr(spec, "externalIPs").is_empty();
    let externally_accessible =
        ty == "NodePort" || ty == "LoadBalancer" || (ty == "ClusterIP" && external_ips);
    let etp = spec.get("externalTrafficPolicy").filter(|v| !v.is_null());
    match etp {
        Some(v) if !externally_accessible && v != "" => errs.push(FieldError::invalid(
            "spec.externalTrafficPolicy",
            v,
            "may only be set for externally-accessible services",
        )),
        Some(_) if externally_accessible => check_enum(
            errs,
            spec,
            "externalTrafficPolicy",
            "spec",
            &["Cluster", "Local"],
        ),
        _ => {}
    }
    if ty != "ExternalName" {
        check_enum(
            errs,
            spec,
            "internalTrafficPolicy",
            "spec",
            &["Cluster", "Local"],
        );
    }
    check_enum(
        errs,
        spec,
        "trafficDistribution",
        "spec",
        &["PreferClose", "PreferSameNode", "PreferSameZone"],
    );
    let needs_health_check =
        ty == "LoadBalancer" && str_at(spec, "externalTrafficPolicy") == Some("Local");
    if let Some(port) = spec
        .get("healthCheckNodePort")
        .filter(|p| p.as_i64() != Some(0) && !p.is_null())
    {
        if !needs_health_check {
            errs.push(FieldError::invalid(
                "spec.healthCheckNodePort",
                port,
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        } else if !port.as_i64().is_some_and(|p| (1..=65535).contains(&p)) {
            errs.push(FieldError::invalid(
                "spec.healthCheckNodePort",
                port,
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
    use serde_json::json;

    /// The messages for `spec` after the defaults, as Kubernetes words them.
    fn errors(spec: Value) -> Vec<String> {
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": spec});
        crate::default::<k8s_openapi::api::core::v1::Service>(&mut svc);
        let mut errs = Vec::new();
        validate_service(&svc, None, &mut errs);
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
