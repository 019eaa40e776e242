//! Ingress and IngressClass (`networking.k8s.io/v1`) as Kubernetes validates
//! them (`pkg/apis/networking/validation`): hosts (exact or `*.` wildcard,
//! never an IP), paths by type, backends (a Service by port number or name,
//! or a resource), TLS hosts and Secret names, the class name; an
//! IngressClass's controller, immutable once set.

use super::{Errors, FieldError};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, Ingress, IngressBackend, IngressClass, IngressServiceBackend, IngressSpec,
};
use minik8s_api::names::{dns1035_label_error, dns1123_subdomain_error, port_name_error};
use serde_json::json;

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

fn validate_backend(b: &IngressBackend, path: &str, errs: &mut Errors) {
    match (&b.resource, &b.service) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            &json!(""),
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => {
            let rp = format!("{path}.resource");
            for (key, v) in [("kind", &r.kind), ("name", &r.name)] {
                match v.as_str() {
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
        (None, Some(s)) => validate_service_backend(s, path, errs),
        (None, None) => errs.push(FieldError::invalid(
            path,
            &json!(""),
            "resource or service backend is required",
        )),
    }
}

/// A Service backend: the Service's name and one port, by name or number.
fn validate_service_backend(s: &IngressServiceBackend, path: &str, errs: &mut Errors) {
    let sp = format!("{path}.service");
    if s.name.is_empty() {
        errs.push(FieldError::required(format!("{sp}.name"), ""));
    } else if let Some(m) = dns1035_label_error(&s.name) {
        errs.push(FieldError::invalid(format!("{sp}.name"), &json!(s.name), m));
    }
    let port = s.port.as_ref();
    let name = port.and_then(|p| p.name.as_deref()).unwrap_or_default();
    let number = port.and_then(|p| p.number).unwrap_or_default();
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

fn validate_path(p: &HTTPIngressPath, path: &str, errs: &mut Errors) {
    if p.path_type.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return;
    }
    let value = p.path.as_deref().unwrap_or_default();
    let pp = format!("{path}.path");
    match p.path_type.as_str() {
        "Exact" | "Prefix" => {
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
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &pp,
                    &json!(value),
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.pathType"),
            &json!(other),
            PATH_TYPES,
        )),
    }
    validate_backend(&p.backend, &format!("{path}.backend"), errs);
}

/// Every rule of an Ingress, on create (`old` None) and update.
pub fn validate_ingress(ingress: &Ingress, old: Option<&Ingress>, errs: &mut Errors) {
    let empty = IngressSpec::default();
    let spec = ingress.spec.as_ref().unwrap_or(&empty);
    let rules = spec.rules.as_deref().unwrap_or_default();
    if rules.is_empty() && spec.default_backend.is_none() {
        errs.push(FieldError::invalid(
            "spec",
            &json!(spec.rules),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = &spec.default_backend {
        validate_backend(b, "spec.defaultBackend", errs);
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("spec.rules[{i}]");
        let host = rule.host.as_deref().unwrap_or_default();
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
        if let Some(http) = &rule.http {
            if http.paths.is_empty() {
                errs.push(FieldError::required(format!("{rp}.http.paths"), ""));
            }
            for (j, p) in http.paths.iter().enumerate() {
                validate_path(p, &format!("{rp}.http.paths[{j}]"), errs);
            }
        }
    }
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        for (j, h) in tls.hosts.iter().flatten().enumerate() {
            host_errors(h, &format!("spec.tls[{i}].hosts[{j}]"), errs);
        }
        let secret = tls.secret_name.as_deref().unwrap_or_default();
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
    let class = spec.ingress_class_name.as_deref();
    if let Some(c) = class {
        if let Some(m) = dns1123_subdomain_error(c) {
            errs.push(FieldError::invalid("spec.ingressClassName", &json!(c), m));
        }
    }
    if old.is_none() {
        let annotation = ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION));
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
pub fn validate_ingress_class(class: &IngressClass, old: Option<&IngressClass>, errs: &mut Errors) {
    let controller_of = |c: &IngressClass| {
        c.spec
            .as_ref()
            .and_then(|s| s.controller.clone())
            .unwrap_or_default()
    };
    let controller = controller_of(class);
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
    if old.is_some_and(|old| controller_of(old) != controller) {
        errs.push(FieldError::invalid(
            path,
            &json!(controller),
            "field is immutable",
        ));
    }
    if let Some(p) = class.spec.as_ref().and_then(|s| s.parameters.as_ref()) {
        let pp = "spec.parameters";
        for (key, v) in [("kind", &p.kind), ("name", &p.name)] {
            if v.is_empty() {
                errs.push(FieldError::required(format!("{pp}.{key}"), ""));
            }
        }
        match p.scope.as_deref() {
            Some("Namespace") => {
                if p.namespace.as_deref().unwrap_or_default().is_empty() {
                    errs.push(FieldError::required(
                        format!("{pp}.namespace"),
                        "`parameters.scope` is set to 'Namespace'",
                    ));
                }
            }
            Some("Cluster") | None => {
                if p.namespace.is_some() {
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
