//! Services: type, ports, selectors, ClusterIP and its immutability.

use super::*;

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
    if let Some(old) = old {
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
