//! Defaulting, validation and Pod Security as the Kubernetes apiserver does
//! them for the fields we use: the apiserver's, apart from `minik8s-api`
//! (which every component links) so that the kubelet, kube-proxy and kubectl
//! carry none of it. A kind's rules run on its object decoded as its
//! k8s-openapi type ([`KindRules::RULES`]) and report Kubernetes' field
//! paths (`spec.containers[0].image`) as [`FieldError`]s
//! (`minik8s_api::field`).
//!
//! Here: metadata, helpers and the per-kind dispatch; each group's rules in
//! a file of its own (`pod.rs`, `service.rs`, `apps.rs`, `autoscaling.rs`,
//! `lws.rs`), the defaults in [`defaults`], the Pod Security Standards in
//! [`podsecurity`], a LimitRange's defaults and bounds in [`limitrange`]
//! (the LimitRanger admission's).

use serde_json::Value;

pub use minik8s_api::field::{ErrorType, Errors, FieldError};

pub mod defaults;
pub mod limitrange;
pub mod podsecurity;

pub use kinds::{KindRules, PodSpecAt, Rules};

mod admission;
mod apps;
mod autoscaling;
mod batch;
mod config;
mod crd;
pub mod disaggregatedset;
mod ephemeral;
mod kinds;
mod lifecycle;
pub mod lws;
pub mod lws_pod;
mod lws_scheduling;
mod mutating_policy;
pub mod network_policy;
pub mod networking;
mod node;
mod pod;
mod policy;
mod quota;
mod rbac;
mod resize;
pub mod resource;
pub mod scheduling;
pub mod serverless;
mod service;
pub mod service_cidr;
pub mod storage;
pub mod unsupported;
pub mod workflow;

pub use apps::int_or_percent_error;

pub use crd::{default_crd, validate_crd};
pub use ephemeral::validate_ephemeral_containers_update;
pub use minik8s_api::names::*;

pub use pod::{validate_pod_spec, validate_pod_spec_json};
pub use resize::validate_pod_resize;
pub use scheduling::SYSTEM_PRIORITY_CLASSES;

/// Which naming rule a kind's `metadata.name` follows (its strategy says
/// which; most kinds take subdomains).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NameRule {
    #[default]
    Subdomain,
    Label,
    Dns1035,
    /// Anything usable as one URL path segment (RBAC names such as
    /// `system:basic-user`): not `.` or `..`, no `/` or `%`.
    PathSegment,
    /// An IP address in canonical form (IPAddress objects).
    IpAddress,
}

pub fn name_error(rule: NameRule, name: &str) -> Option<String> {
    match rule {
        NameRule::Subdomain => dns1123_subdomain_error(name),
        NameRule::Label => dns1123_label_error(name),
        NameRule::Dns1035 => dns1035_label_error(name),
        NameRule::PathSegment => match name {
            "." => Some("may not be '.'".into()),
            ".." => Some("may not be '..'".into()),
            n if n.contains('/') => Some("may not contain '/'".into()),
            n if n.contains('%') => Some("may not contain '%'".into()),
            _ => None,
        },
        NameRule::IpAddress => service_cidr::ip_address_name_error(name),
    }
}

// ---------------------------------------------------------------- helpers

/// An object read as its k8s-openapi type for typed validation (`None` when
/// it does not decode: storing it answers 400 then).
fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Option<T> {
    T::deserialize(obj).ok()
}

/// A required name at `path` that must also satisfy `rule`.
fn name_check(errs: &mut Errors, path: String, name: &str, rule: fn(&str) -> Option<String>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if let Some(e) = rule(name) {
        errs.push(FieldError::invalid(
            path,
            &Value::String(name.to_string()),
            e,
        ));
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn non_empty_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    str_at(v, key).filter(|s| !s.is_empty())
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// An optional field of a typed object that, when set, must be one of `allowed`.
fn one_of(errs: &mut Errors, value: Option<&str>, path: &str, allowed: &[&str]) {
    if let Some(v) = value.filter(|v| !allowed.contains(v)) {
        errs.push(FieldError::not_supported(path, &Value::from(v), allowed));
    }
}

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

// ---------------------------------------------------------------- metadata

/// Validates `metadata` common to every kind.
pub fn validate_metadata(obj: &Value, names: NameRule, namespaced: bool) -> Errors {
    let mut errs = Vec::new();
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    match non_empty_str(meta, "name") {
        None => {
            if non_empty_str(meta, "generateName").is_none() {
                errs.push(FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                ));
            }
        }
        Some(name) => {
            if let Some(e) = name_error(names, name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    &Value::String(name.into()),
                    e,
                ));
            }
        }
    }
    if namespaced {
        if let Some(ns) = non_empty_str(meta, "namespace") {
            if let Some(e) = dns1123_label_error(ns) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    &Value::String(ns.into()),
                    e,
                ));
            }
        }
    } else if non_empty_str(meta, "namespace").is_some() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    validate_labels(meta, "metadata.labels", &mut errs);
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in ann {
            if let Some(e) = qualified_name_error(k) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    &Value::String(k.clone()),
                    e,
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            errs.push(FieldError::invalid(
                "metadata.annotations",
                &Value::String(String::new()),
                "must have at most 262144 bytes",
            ));
        }
    }
    for (i, owner) in arr(meta, "ownerReferences").iter().enumerate() {
        for f in ["apiVersion", "kind", "name", "uid"] {
            if non_empty_str(owner, f).is_none() {
                errs.push(FieldError::required(
                    format!("metadata.ownerReferences[{i}].{f}"),
                    "",
                ));
            }
        }
    }
    if arr(meta, "ownerReferences")
        .iter()
        .filter(|o| o.get("controller") == Some(&Value::Bool(true)))
        .count()
        > 1
    {
        errs.push(FieldError::invalid(
            "metadata.ownerReferences",
            &Value::Null,
            "Only one reference can have Controller set to true",
        ));
    }
    errs
}

/// A typed object's labels: qualified names, valid values.
fn validate_label_map(
    labels: Option<&std::collections::BTreeMap<String, String>>,
    path: &str,
    errs: &mut Errors,
) {
    for (k, v) in labels.into_iter().flatten() {
        if let Some(e) = qualified_name_error(k) {
            errs.push(FieldError::invalid(path, &Value::from(k.as_str()), e));
        }
        if let Some(e) = label_value_error(v) {
            errs.push(FieldError::invalid(path, &Value::from(v.as_str()), e));
        }
    }
}

fn validate_labels(meta: &Value, path: &str, errs: &mut Errors) {
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(e) = qualified_name_error(k) {
                errs.push(FieldError::invalid(path, &Value::String(k.clone()), e));
            }
            match v.as_str() {
                Some(s) => {
                    if let Some(e) = label_value_error(s) {
                        errs.push(FieldError::invalid(path, v, e));
                    }
                }
                None => errs.push(FieldError::invalid(path, v, "label values must be strings")),
            }
        }
    }
}

/// Fields Kubernetes never lets an update change.
pub fn validate_metadata_update(new: &Value, old: &Value) -> Errors {
    let mut errs = Vec::new();
    for f in ["name", "namespace", "uid", "creationTimestamp"] {
        let (n, o) = (new["metadata"].get(f), old["metadata"].get(f));
        if n.is_some() && n != o {
            errs.push(FieldError::invalid(
                format!("metadata.{f}"),
                n.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------- per kind

/// The defaults of kind `K` on `obj`; anything but a JSON object is left
/// as it is (decoding it reports the error).
pub fn default<K: KindRules>(obj: &mut Value) {
    if obj.is_object() {
        K::apply_defaults(obj);
    }
}

/// Validates an object of kind `K`; `old` is the stored object on update.
/// Fields minik8s does not act on are refused first, for every kind.
pub fn validate<K: KindRules>(obj: &Value, old: Option<&Value>) -> Errors {
    let decoded = K::RULES.and_then(|_| typed::<K>(obj));
    validate_decoded(obj, decoded.as_ref(), old)
}

/// [`validate`] for a caller that has decoded `obj` as `K` already (the
/// apiserver decodes a write once, for these rules and for its stored
/// form); `decoded` is None when it did not decode.
pub fn validate_decoded<K: KindRules>(
    obj: &Value,
    decoded: Option<&K>,
    old: Option<&Value>,
) -> Errors {
    let mut errs = Vec::new();
    unsupported::validate_unsupported(K::KIND, obj, &mut errs);
    // An object that does not decode gets no typed rules: storing it
    // answers 400 with serde's reason, as Kubernetes' decoding does before
    // any validation.
    if let (Some(rules), Some(decoded)) = (K::RULES, decoded) {
        let old = old.and_then(typed::<K>);
        rules(decoded, old.as_ref(), &mut errs);
    }
    errs
}

/// The fields a fieldSelector on kind `K` may name.
pub fn field_selectors<K: KindRules>() -> Vec<&'static str> {
    let mut fields = vec!["metadata.name", "metadata.namespace"];
    fields.extend(K::FIELD_SELECTORS);
    fields
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(errs: &Errors) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn names() {
        assert!(dns1123_subdomain_error("a.b-c.d").is_none());
        assert!(dns1123_subdomain_error("A").is_some());
        assert!(dns1123_label_error("a.b").is_some());
        assert!(dns1035_label_error("2cube").is_some());
        assert!(dns1035_label_error("cube2").is_none());
        assert!(qualified_name_error("app.kubernetes.io/name").is_none());
        assert!(qualified_name_error("/x").is_some());
        assert!(label_value_error("-x").is_some());
        assert!(port_name_error("http").is_none());
        assert!(port_name_error("8080").is_some());
    }

    #[test]
    fn scheduling_gates_are_named_once_and_only_removed() {
        let gated = |gates: Value, node: Option<&str>| {
            let mut p = json!({"metadata": {"name": "p"}, "spec": {"schedulingGates": gates,
                "containers": [{"name": "c", "image": "busybox"}]}});
            if let Some(n) = node {
                p["spec"]["nodeName"] = json!(n);
            }
            p
        };
        let two = gated(
            json!([{"name": "example.com/a"}, {"name": "example.com/b"}]),
            None,
        );
        assert!(validate::<k8s_openapi::api::core::v1::Pod>(&two, None).is_empty());
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&gated(json!([{"name": "a"}, {"name": "a"}, {"name": "-x"}]), None), None)),
            vec![
                "spec.schedulingGates[1].name: Duplicate value: \"a\"",
                "spec.schedulingGates[2].name: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ]
        );
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&gated(json!([{"name": "a"}]), Some("n1")), None)),
            vec!["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]
        );
        let one = gated(json!([{"name": "example.com/a"}]), None);
        assert!(
            validate::<k8s_openapi::api::core::v1::Pod>(&one, Some(&two)).is_empty(),
            "removing a gate"
        );
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&two, Some(&one))),
            vec!["spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/b'"]
        );
    }

    #[test]
    fn pod_level_resources_bound_the_containers() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"}, "limits": {"cpu": "200m"}},
            "containers": [{"name": "a", "image": "busybox", "resources": {"requests": {"cpu": "150m"}}},
                           {"name": "b", "image": "busybox", "resources": {"limits": {"cpu": "300m"}}}]}});
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&pod, None)),
            vec![
                "spec.resources.requests: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-1Gi\", \"hugepages-2Mi\", \"memory\"",
                "spec.containers[1].resources.limits[cpu]: Invalid value: \"300m\": must be less than or equal to pod limits",
                "spec.resources.requests[cpu]: Invalid value: \"100m\": must be greater than or equal to aggregate container requests of 150m",
            ]
        );
    }

    #[test]
    fn pod_resources_and_env_names() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{
            "name": "c", "image": "busybox",
            "env": [{"name": "1BAD", "value": "x"}, {"name": "my.env-NAME_1"}],
            "resources": {"requests": {"memory": "-1Gi", "cpu": "2"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&pod, None)),
            vec![
                "spec.containers[0].env[0].name: Invalid value: \"1BAD\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            ]
        );
        let fine = json!({"metadata": {"name": "p"}, "spec": {"containers": [{
            "name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert!(validate::<k8s_openapi::api::core::v1::Pod>(&fine, None).is_empty());
    }

    #[test]
    fn pod_without_containers() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            fields(&validate::<k8s_openapi::api::core::v1::Pod>(&pod, None)),
            vec!["spec.containers: Required value"]
        );
    }

    #[test]
    fn container_errors_have_paths() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "c", "image": "busybox", "ports": [{"containerPort": 70000}]},
            {"name": "c"},
        ]}});
        let errs = fields(&validate::<k8s_openapi::api::core::v1::Pod>(&pod, None));
        assert!(
            errs.contains(&"spec.containers[1].image: Required value".to_string()),
            "{errs:?}"
        );
        assert!(
            errs.contains(&"spec.containers[1].name: Duplicate value: \"c\"".to_string()),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()), "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.restartPolicy: Unsupported value: \"Sometimes\"")),
            "{errs:?}"
        );
    }

    #[test]
    fn metadata_rules() {
        let errs = validate_metadata(
            &json!({"metadata": {"name": "Bad_Name", "labels": {"a": "-x"}}}),
            NameRule::Subdomain,
            true,
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field, "metadata.name");
        assert_eq!(errs[1].field, "metadata.labels");
        assert!(validate_metadata(
            &json!({"metadata": {"generateName": "x-"}}),
            NameRule::Subdomain,
            true
        )
        .is_empty());
        assert_eq!(
            validate_metadata(&json!({"metadata": {}}), NameRule::Subdomain, true)[0].field,
            "metadata.name"
        );
    }

    #[test]
    fn replicaset_selector_must_match_template() {
        let rs = json!({"metadata": {"name": "r"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let errs = validate::<k8s_openapi::api::apps::v1::ReplicaSet>(&rs, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        let mut changed = rs.clone();
        changed["spec"]["selector"] = json!({"matchLabels": {"app": "b"}});
        let errs = validate::<k8s_openapi::api::apps::v1::ReplicaSet>(&changed, Some(&rs));
        assert!(errs
            .iter()
            .any(|e| e.field == "spec.selector" && e.detail == "field is immutable"));
    }

    #[test]
    fn service_ports_and_immutable_cluster_ip() {
        let svc = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 0}]}});
        let errs = fields(&validate::<k8s_openapi::api::core::v1::Service>(&svc, None));
        assert_eq!(
            errs,
            vec!["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]
        );
        let mut new = svc.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.6");
        new["spec"]["ports"] = json!([{"port": 80}]);
        let errs = validate::<k8s_openapi::api::core::v1::Service>(&new, Some(&svc));
        assert_eq!(errs[0].field, "spec.clusterIP");
    }

    #[test]
    fn pod_update_may_only_change_images() {
        let old = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a"}]}});
        let ok = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "b"}]}});
        assert!(validate::<k8s_openapi::api::core::v1::Pod>(&ok, Some(&old)).is_empty());
        let bad = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a", "command": ["x"]}]}});
        assert_eq!(
            validate::<k8s_openapi::api::core::v1::Pod>(&bad, Some(&old))[0].kind,
            ErrorType::Forbidden
        );
    }
}
