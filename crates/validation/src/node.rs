//! node.k8s.io and the Node itself: a Node's pod CIDR, a RuntimeClass's
//! handler and overhead, on the typed objects, with Kubernetes' messages.

use super::{is_cidr, Errors, FieldError};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use minik8s_api::amount::Amount;
use minik8s_api::names::dns1123_label_error;
use serde_json::json;

/// A Node's `spec.podCIDR`: a CIDR, which an update may set once (from
/// unset or "") but not change.
pub(super) fn validate_node(node: &Node, old: Option<&Node>, errs: &mut Errors) {
    let cidr = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidr.clone());
    let Some(new_cidr) = cidr(node) else {
        return;
    };
    if !is_cidr(&new_cidr) {
        errs.push(FieldError::invalid(
            "spec.podCIDR",
            &json!(new_cidr),
            "must be a valid CIDR",
        ));
    }
    let old_cidr = old.and_then(cidr).filter(|c| !c.is_empty());
    if old_cidr.is_some_and(|old| old != new_cidr) {
        errs.push(FieldError::forbidden(
            "spec.podCIDR",
            "node updates may not change podCIDR except from \"\" to valid",
        ));
    }
}

/// Kubernetes' `ValidateRuntimeClass(Update)`: a handler that is a DNS
/// label, fixed once created; overhead amounts not negative.
pub(super) fn validate_runtime_class(
    class: &RuntimeClass,
    old: Option<&RuntimeClass>,
    errs: &mut Errors,
) {
    if class.handler.is_empty() {
        errs.push(FieldError::required("handler", ""));
    } else if let Some(msg) = dns1123_label_error(&class.handler) {
        errs.push(FieldError::invalid("handler", &json!(class.handler), msg));
    }
    let pod_fixed = class.overhead.as_ref().and_then(|o| o.pod_fixed.as_ref());
    for (k, v) in pod_fixed.into_iter().flatten() {
        if Amount::parse(&v.0).is_some_and(|a| a.is_negative()) {
            errs.push(FieldError::invalid(
                format!("overhead.podFixed[{k}]"),
                &json!(v.0),
                "must be greater than or equal to 0",
            ));
        }
    }
    if old.is_some_and(|old| old.handler != class.handler) {
        errs.push(FieldError::invalid(
            "handler",
            &json!(class.handler),
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

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_pod_cidr_is_a_cidr_set_once() {
        let node = |cidr: &str| decoded::<Node>(json!({"spec": {"podCIDR": cidr}}));
        let mut errs = Vec::new();
        validate_node(&node("10.244.1.0/24"), Some(&node("")), &mut errs);
        validate_node(&node("10.244.1.0/24"), Some(&decoded(json!({}))), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        validate_node(&node("10.244.1.0"), None, &mut errs);
        validate_node(
            &node("10.244.2.0/24"),
            Some(&node("10.244.1.0/24")),
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            [
                "spec.podCIDR: Invalid value: \"10.244.1.0\": must be a valid CIDR",
                "spec.podCIDR: Forbidden: node updates may not change podCIDR except from \"\" to valid",
            ]
        );
    }

    #[test]
    fn a_runtime_class_names_a_fixed_handler_and_no_negative_overhead() {
        let class = |handler: &str, cpu: &str| {
            decoded::<RuntimeClass>(
                json!({"handler": handler, "overhead": {"podFixed": {"cpu": cpu}}}),
            )
        };
        let mut errs = Vec::new();
        validate_runtime_class(&class("runc", "250m"), None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        validate_runtime_class(&class("", "-1"), None, &mut errs);
        validate_runtime_class(&class("Kata_2", "1"), None, &mut errs);
        validate_runtime_class(&class("kata", "1"), Some(&class("runc", "1")), &mut errs);
        let m = messages(&errs);
        assert_eq!(m[0], "handler: Required value");
        assert_eq!(
            m[1],
            "overhead.podFixed[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        );
        assert!(
            m[2].starts_with("handler: Invalid value: \"Kata_2\": a lowercase RFC 1123 label"),
            "{m:?}"
        );
        assert_eq!(m[3], "handler: Invalid value: \"kata\": field is immutable");
    }
}
