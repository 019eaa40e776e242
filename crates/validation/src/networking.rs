//! Ingress and IngressClass (`networking.k8s.io/v1`) as Kubernetes validates
//! them (`pkg/apis/networking/validation`): hosts (exact or `*.` wildcard,
//! never an IP), paths by type, backends (a Service by port number or name,
//! or a resource), TLS hosts and Secret names, the class name; an
//! IngressClass's controller, immutable once set.

use super::{Errors, FieldError};
use minik8s_api::names::{dns1035_label_error, dns1123_subdomain_error, port_name_error};
use serde_json::{json, Value};

const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];
const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const MAX_CONTROLLER_LEN: usize = 250;

const WILDCARD_MSG: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `*.example.com`: a `*.` then a subdomain.
pub fn wildcard_subdomain_error(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    match s.strip_prefix("*.") {
        Some(rest) if dns1123_subdomain_error(rest).is_none() => None,
        _ => Some(WILDCARD_MSG.into()),
    }
}

fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

fn host_errors(host: &str, path: &str, errs: &mut Errors) {
    let msg = if host.contains('*') {
        wildcard_subdomain_error(host)
    } else {
        dns1123_subdomain_error(host)
    };
    if let Some(m) = msg {
        errs.push(FieldError::invalid(path, &json!(host), m));
    }
}

fn validate_backend(b: &Value, path: &str, errs: &mut Errors) {
    let resource = b.get("resource").filter(|v| !v.is_null());
    let service = b.get("service").filter(|v| !v.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            &json!(""),
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => {
            let rp = format!("{path}.resource");
            for key in ["kind", "name"] {
                match r.get(key).and_then(Value::as_str).unwrap_or("") {
                    "" => errs.push(FieldError::required(format!("{rp}.{key}"), "")),
                    v if v == "." || v == ".." || v.contains('/') || v.contains('%') => {
                        errs.push(FieldError::invalid(
                            format!("{rp}.{key}"),
                            &json!(v),
                            "may not contain '/' or '%' or be '.' or '..'",
                        ))
                    }
                    _ => {}
                }
            }
        }
        (None, Some(s)) => {
            let sp = format!("{path}.service");
            match s.get("name").and_then(Value::as_str).unwrap_or("") {
                "" => errs.push(FieldError::required(format!("{sp}.name"), "")),
                name => {
                    if let Some(m) = dns1035_label_error(name) {
                        errs.push(FieldError::invalid(format!("{sp}.name"), &json!(name), m));
                    }
                }
            }
            let port = s.get("port").cloned().unwrap_or(Value::Null);
            let name = port.get("name").and_then(Value::as_str).unwrap_or("");
            let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            match (name.is_empty(), number == 0) {
                (false, false) => errs.push(FieldError::invalid(
                    path,
                    &json!(""),
                    "cannot set both port name & port number",
                )),
                (false, true) => {
                    if let Some(m) = port_name_error(name) {
                        errs.push(FieldError::invalid(
                            format!("{sp}.port.name"),
                            &json!(name),
                            m,
                        ));
                    }
                }
                (true, false) => {
                    if !(1..=65535).contains(&number) {
                        errs.push(FieldError::invalid(
                            format!("{sp}.port.number"),
                            &json!(number),
                            "must be between 1 and 65535, inclusive",
                        ));
                    }
                }
                (true, true) => errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                )),
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            path,
            &json!(""),
            "resource or service backend is required",
        )),
    }
}

fn validate_path(p: &Value, path: &str, errs: &mut Errors) {
    let Some(kind) = p.get("pathType").filter(|v| !v.is_null()) else {
        errs.push(FieldError::required(
            format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return;
    };
    let value = p.get("path").and_then(Value::as_str).unwrap_or("");
    let pp = format!("{path}.path");
    match kind.as_str() {
        Some("Exact") | Some("Prefix") => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &pp,
                    &json!(value),
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(FieldError::invalid(
                            &pp,
                            &json!(value),
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(FieldError::invalid(
                            &pp,
                            &json!(value),
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &pp,
                    &json!(value),
                    "must be an absolute path",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            format!("{path}.pathType"),
            kind,
            PATH_TYPES,
        )),
    }
    validate_backend(
        p.get("backend").unwrap_or(&Value::Null),
        &format!("{path}.backend"),
        errs,
    );
}

/// Every rule of an Ingress, on create (`old` None) and update.
pub fn validate_ingress(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let rules = spec
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let default = spec.get("defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default.is_none() {
        errs.push(FieldError::invalid(
            "spec",
            spec.get("rules").unwrap_or(&Value::Null),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default {
        validate_backend(b, "spec.defaultBackend", errs);
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("spec.rules[{i}]");
        let host = rule.get("host").and_then(Value::as_str).unwrap_or("");
        if !host.is_empty() {
            if is_ip(host) {
                errs.push(FieldError::invalid(
                    format!("{rp}.host"),
                    &json!(host),
                    "must be a DNS name, not an IP address",
                ));
            }
            host_errors(host, &format!("{rp}.host"), errs);
        }
        if let Some(http) = rule.get("http").filter(|v| !v.is_null()) {
            let paths = http
                .get("paths")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if paths.is_empty() {
                errs.push(FieldError::required(format!("{rp}.http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                validate_path(p, &format!("{rp}.http.paths[{j}]"), errs);
            }
        }
    }
    for (i, tls) in spec
        .get("tls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, h) in tls
            .get("hosts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            host_errors(
                h.as_str().unwrap_or(""),
                &format!("spec.tls[{i}].hosts[{j}]"),
                errs,
            );
        }
        let secret = tls.get("secretName").and_then(Value::as_str).unwrap_or("");
        if !secret.is_empty() {
            if let Some(m) = dns1123_subdomain_error(secret) {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].secretName"),
                    &json!(secret),
                    m,
                ));
            }
        }
    }
    let class = spec.get("ingressClassName").and_then(Value::as_str);
    if let Some(c) = class {
        if let Some(m) = dns1123_subdomain_error(c) {
            errs.push(FieldError::invalid("spec.ingressClassName", &json!(c), m));
        }
    }
    if old.is_none() {
        let annotation = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .and_then(Value::as_str);
        if let (Some(a), Some(c)) = (annotation, class) {
            if a != c {
                errs.push(FieldError::invalid(
                    format!("annotations.{INGRESS_CLASS_ANNOTATION}"),
                    &json!(a),
                    "must match `ingressClassName` when both are specified",
                ));
            }
        }
    }
}

/// An IngressClass: a domain-prefixed controller, immutable.
pub fn validate_ingress_class(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let controller = obj
        .pointer("/spec/controller")
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = "spec.controller";
    if controller.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else {
        if controller.len() > MAX_CONTROLLER_LEN {
            errs.push(FieldError::too_long(path, MAX_CONTROLLER_LEN));
        }
        match controller.split_once('/') {
            Some((host, rest)) if !host.is_empty() && !rest.is_empty() => {
                if let Some(m) = dns1123_subdomain_error(host) {
                    errs.push(FieldError::invalid(path, &json!(host), m));
                }
            }
            _ => errs.push(FieldError::invalid(
                path,
                &json!(controller),
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            )),
        }
    }
    if let Some(old) = old {
        let before = old
            .pointer("/spec/controller")
            .and_then(Value::as_str)
            .unwrap_or("");
        if before != controller {
            errs.push(FieldError::invalid(
                path,
                &json!(controller),
                "field is immutable",
            ));
        }
    }
    if let Some(p) = obj.pointer("/spec/parameters").filter(|v| !v.is_null()) {
        let pp = "spec.parameters";
        for key in ["kind", "name"] {
            if p.get(key).and_then(Value::as_str).unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("{pp}.{key}"), ""));
            }
        }
        match p.get("scope").and_then(Value::as_str) {
            Some("Namespace") => {
                if p.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    errs.push(FieldError::required(
                        format!("{pp}.namespace"),
                        "`parameters.scope` is set to 'Namespace'",
                    ));
                }
            }
            Some("Cluster") | None => {
                if p.get("namespace").and_then(Value::as_str).is_some() {
                    errs.push(FieldError::forbidden(
                        format!("{pp}.namespace"),
                        "`parameters.scope` is set to 'Cluster'",
                    ));
                }
            }
            Some(other) => errs.push(FieldError::not_supported(
                format!("{pp}.scope"),
                &json!(other),
                &["Cluster", "Namespace"],
            )),
        }
    }
}

#[cfg(test)]
#[path = "networking_tests.rs"]
mod tests;
