//! Validation as Kubernetes does it for the fields we use. Validators work on
//! the JSON form so they can report Kubernetes' field paths
//! (`spec.containers[0].image`) before any typed decoding.

use crate::selector::Selector;
use serde_json::Value;
use std::fmt;

/// What is wrong with a field, mapped to `StatusCause.reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
}

impl ErrorType {
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Forbidden => "FieldValueForbidden",
        }
    }
}

/// One field error, rendered like apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    /// The offending value, already rendered (`"abc"`, `-1`), for Invalid/NotSupported/Duplicate.
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(render(value)),
            detail: detail.into(),
        }
    }
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        FieldError {
            kind: ErrorType::NotSupported,
            field: field.into(),
            value: Some(render(value)),
            detail: format!("supported values: {}", list.join(", ")),
        }
    }
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        FieldError {
            kind: ErrorType::Duplicate,
            field: field.into(),
            value: Some(render(value)),
            detail: String::new(),
        }
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// The part after `<field>: ` in the message, which is also the cause message.
    pub fn body(&self) -> String {
        let head = match self.kind {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Forbidden => "Forbidden",
        };
        let mut s = head.to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

pub type Errors = Vec<FieldError>;

// ---------------------------------------------------------------- name rules

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

pub fn dns1123_label_error(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower);
    (!ok).then(|| DNS1123_LABEL_MSG.into())
}

pub fn dns1123_subdomain_error(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| is_alnum_lower(c) || c == '-')
                && l.starts_with(is_alnum_lower)
                && l.ends_with(is_alnum_lower)
        });
    (!ok).then(|| DNS1123_SUBDOMAIN_MSG.into())
}

pub fn dns1035_label_error(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.ends_with(is_alnum_lower);
    (!ok).then(|| DNS1035_LABEL_MSG.into())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// Label keys and annotation keys: `[prefix/]name`.
pub fn qualified_name_error(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(e) = dns1123_subdomain_error(p) {
            return Some(format!("prefix part {e}"));
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Some("name part must be non-empty and no more than 63 characters".into());
    }
    let ok = name.chars().all(is_name_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())
}

pub fn label_value_error(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = s.chars().all(is_name_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into())
}

/// An IANA service name (named ports): ≤15 chars, lowercase alnum and '-', at least one letter.
pub fn port_name_error(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= 15
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.chars().any(|c| c.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--");
    (!ok).then(|| "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), at most 15 characters, contain at least one letter, and not start or end with a hyphen".into())
}

/// Which naming rule a kind's `metadata.name` follows.
#[derive(Debug, Clone, Copy)]
pub enum NameRule {
    Subdomain,
    Label,
    Dns1035,
}

pub fn name_rule(kind: &str) -> NameRule {
    match kind {
        "Namespace" => NameRule::Label,
        "Service" | "LeaderWorkerSet" => NameRule::Dns1035,
        _ => NameRule::Subdomain,
    }
}

pub fn name_error(rule: NameRule, name: &str) -> Option<String> {
    match rule {
        NameRule::Subdomain => dns1123_subdomain_error(name),
        NameRule::Label => dns1123_label_error(name),
        NameRule::Dns1035 => dns1035_label_error(name),
    }
}

// ---------------------------------------------------------------- helpers

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

fn check_enum(errs: &mut Errors, v: &Value, key: &str, path: &str, allowed: &[&str]) {
    if let Some(val) = v.get(key) {
        if !val.as_str().is_some_and(|s| allowed.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("{path}.{key}"),
                val,
                allowed,
            ));
        }
    }
}

fn check_non_negative(errs: &mut Errors, v: &Value, key: &str, path: &str) {
    if let Some(val) = v.get(key) {
        if val.as_i64().is_some_and(|n| n < 0) {
            errs.push(FieldError::invalid(
                format!("{path}.{key}"),
                val,
                "must be greater than or equal to 0",
            ));
        }
    }
}

fn check_port(errs: &mut Errors, v: &Value, key: &str, path: &str, required: bool) {
    match v.get(key) {
        None | Some(Value::Null) if required => {
            errs.push(FieldError::required(format!("{path}.{key}"), ""))
        }
        None | Some(Value::Null) => {}
        Some(p) => {
            if !p.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
                errs.push(FieldError::invalid(
                    format!("{path}.{key}"),
                    p,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
}

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

// ---------------------------------------------------------------- metadata

/// Validates `metadata` common to every kind.
pub fn validate_metadata(obj: &Value, kind: &str, namespaced: bool) -> Errors {
    let mut errs = Vec::new();
    let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
    match non_empty_str(&meta, "name") {
        None => {
            if non_empty_str(&meta, "generateName").is_none() {
                errs.push(FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                ));
            }
        }
        Some(name) => {
            if let Some(e) = name_error(name_rule(kind), name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    &Value::String(name.into()),
                    e,
                ));
            }
        }
    }
    if namespaced {
        if let Some(ns) = non_empty_str(&meta, "namespace") {
            if let Some(e) = dns1123_label_error(ns) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    &Value::String(ns.into()),
                    e,
                ));
            }
        }
    } else if non_empty_str(&meta, "namespace").is_some() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    validate_labels(&meta, "metadata.labels", &mut errs);
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
    for (i, owner) in arr(&meta, "ownerReferences").iter().enumerate() {
        for f in ["apiVersion", "kind", "name", "uid"] {
            if non_empty_str(owner, f).is_none() {
                errs.push(FieldError::required(
                    format!("metadata.ownerReferences[{i}].{f}"),
                    "",
                ));
            }
        }
    }
    if arr(&meta, "ownerReferences")
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
        let (n, o) = (
            new.pointer(&format!("/metadata/{f}")),
            old.pointer(&format!("/metadata/{f}")),
        );
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

/// Validates a kind's object; `old` is the stored object on update.
pub fn validate(kind: &str, obj: &Value, old: Option<&Value>) -> Errors {
    let mut errs = Vec::new();
    match kind {
        "Pod" => {
            validate_pod_spec(obj.get("spec").unwrap_or(&Value::Null), "spec", &mut errs);
            if let Some(old) = old {
                validate_pod_update(obj, old, &mut errs);
            }
        }
        "Service" => validate_service(obj, old, &mut errs),
        "ReplicaSet" => validate_replicated(obj, old, "ReplicaSet", &mut errs),
        "StatefulSet" => validate_replicated(obj, old, "StatefulSet", &mut errs),
        "HorizontalPodAutoscaler" => validate_hpa(obj, &mut errs),
        "EndpointSlice" => {
            if obj.get("addressType").is_none() {
                errs.push(FieldError::required("addressType", ""));
            } else {
                check_enum(&mut errs, obj, "addressType", "", &["IPv4", "IPv6", "FQDN"]);
            }
        }
        "Node" => {
            if let Some(cidr) = obj.pointer("/spec/podCIDR").and_then(Value::as_str) {
                if !is_cidr(cidr) {
                    errs.push(FieldError::invalid(
                        "spec.podCIDR",
                        &Value::String(cidr.into()),
                        "must be a valid CIDR",
                    ));
                }
            }
            if let (Some(old), Some(new_cidr)) = (old, obj.pointer("/spec/podCIDR")) {
                if let Some(old_cidr) = old
                    .pointer("/spec/podCIDR")
                    .filter(|c| c.as_str() != Some(""))
                {
                    if old_cidr != new_cidr {
                        errs.push(FieldError::forbidden(
                            "spec.podCIDR",
                            "node updates may not change podCIDR except from \"\" to valid",
                        ));
                    }
                }
            }
        }
        "LeaderWorkerSet" => errs.extend(crate::lws::validate(obj, old)),
        _ => {}
    }
    errs
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

/// Validates a PodSpec at `path` (`spec` or `spec.template.spec`).
pub fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Errors) {
    let containers = arr(spec, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let volumes: Vec<&str> = arr(spec, "volumes")
        .iter()
        .filter_map(|v| str_at(v, "name"))
        .collect();
    let mut seen_vol = std::collections::HashSet::new();
    for (i, v) in arr(spec, "volumes").iter().enumerate() {
        match non_empty_str(v, "name") {
            None => errs.push(FieldError::required(
                format!("{path}.volumes[{i}].name"),
                "",
            )),
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(
                        format!("{path}.volumes[{i}].name"),
                        &Value::String(n.into()),
                        e,
                    ));
                }
                if !seen_vol.insert(n) {
                    errs.push(FieldError::duplicate(
                        format!("{path}.volumes[{i}].name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
        if let Some(hp) = v.get("hostPath") {
            if non_empty_str(hp, "path").is_none() {
                errs.push(FieldError::required(
                    format!("{path}.volumes[{i}].hostPath.path"),
                    "",
                ));
            }
        }
    }
    let mut names = std::collections::HashSet::new();
    for (list, key) in [
        (containers, "containers"),
        (arr(spec, "initContainers"), "initContainers"),
    ] {
        for (i, c) in list.iter().enumerate() {
            let cp = format!("{path}.{key}[{i}]");
            validate_container(c, &cp, &volumes, errs);
            if let Some(n) = non_empty_str(c, "name") {
                if !names.insert(n.to_string()) {
                    errs.push(FieldError::duplicate(
                        format!("{cp}.name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
    }
    check_enum(
        errs,
        spec,
        "restartPolicy",
        path,
        &["Always", "OnFailure", "Never"],
    );
    check_enum(
        errs,
        spec,
        "dnsPolicy",
        path,
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    );
    check_non_negative(errs, spec, "terminationGracePeriodSeconds", path);
    if let Some(ads) = spec.get("activeDeadlineSeconds") {
        if ads.as_i64().is_none_or(|n| n <= 0) {
            errs.push(FieldError::invalid(
                format!("{path}.activeDeadlineSeconds"),
                ads,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    for key in ["hostname", "subdomain"] {
        if let Some(h) = non_empty_str(spec, key) {
            if let Some(e) = dns1123_label_error(h) {
                errs.push(FieldError::invalid(
                    format!("{path}.{key}"),
                    &Value::String(h.into()),
                    e,
                ));
            }
        }
    }
    if let Some(sel) = spec.get("nodeSelector").and_then(Value::as_object) {
        for (k, v) in sel {
            if let Some(e) = qualified_name_error(k) {
                errs.push(FieldError::invalid(
                    format!("{path}.nodeSelector"),
                    &Value::String(k.clone()),
                    e,
                ));
            }
            if let Some(e) = v.as_str().and_then(label_value_error) {
                errs.push(FieldError::invalid(format!("{path}.nodeSelector"), v, e));
            }
        }
    }
    for (i, t) in arr(spec, "tolerations").iter().enumerate() {
        let tp = format!("{path}.tolerations[{i}]");
        check_enum(errs, t, "operator", &tp, &["Equal", "Exists"]);
        check_enum(
            errs,
            t,
            "effect",
            &tp,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
        if str_at(t, "operator") == Some("Exists") && non_empty_str(t, "value").is_some() {
            errs.push(FieldError::invalid(
                format!("{tp}.operator"),
                &Value::String("Exists".into()),
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if t.get("tolerationSeconds").is_some() && str_at(t, "effect") != Some("NoExecute") {
            errs.push(FieldError::invalid(
                format!("{tp}.effect"),
                t.get("effect").unwrap_or(&Value::Null),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

fn validate_container(c: &Value, path: &str, volumes: &[&str], errs: &mut Errors) {
    match non_empty_str(c, "name") {
        None => errs.push(FieldError::required(format!("{path}.name"), "")),
        Some(n) => {
            if let Some(e) = dns1123_label_error(n) {
                errs.push(FieldError::invalid(
                    format!("{path}.name"),
                    &Value::String(n.into()),
                    e,
                ));
            }
        }
    }
    if non_empty_str(c, "image").is_none() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    check_enum(
        errs,
        c,
        "imagePullPolicy",
        path,
        &["Always", "IfNotPresent", "Never"],
    );
    let mut port_names = std::collections::HashSet::new();
    for (i, p) in arr(c, "ports").iter().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        check_port(errs, p, "containerPort", &pp, true);
        if let Some(hp) = p.get("hostPort") {
            if !hp.as_i64().is_some_and(|n| (0..=65535).contains(&n)) {
                errs.push(FieldError::invalid(
                    format!("{pp}.hostPort"),
                    hp,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
        check_enum(errs, p, "protocol", &pp, PROTOCOLS);
        if let Some(n) = non_empty_str(p, "name") {
            if let Some(e) = port_name_error(n) {
                errs.push(FieldError::invalid(
                    format!("{pp}.name"),
                    &Value::String(n.into()),
                    e,
                ));
            }
            if !port_names.insert(n) {
                errs.push(FieldError::duplicate(
                    format!("{pp}.name"),
                    &Value::String(n.into()),
                ));
            }
        }
    }
    for (i, e) in arr(c, "env").iter().enumerate() {
        if non_empty_str(e, "name").is_none() {
            errs.push(FieldError::required(format!("{path}.env[{i}].name"), ""));
        }
        if let Some(fr) = e.pointer("/valueFrom/fieldRef") {
            if non_empty_str(fr, "fieldPath").is_none() {
                errs.push(FieldError::required(
                    format!("{path}.env[{i}].valueFrom.fieldRef.fieldPath"),
                    "",
                ));
            }
        }
    }
    for (i, m) in arr(c, "volumeMounts").iter().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        match non_empty_str(m, "name") {
            None => errs.push(FieldError::required(format!("{mp}.name"), "")),
            Some(n) if !volumes.contains(&n) => {
                errs.push(FieldError::not_found(
                    format!("{mp}.name"),
                    &Value::String(n.into()),
                ));
            }
            _ => {}
        }
        if non_empty_str(m, "mountPath").is_none() {
            errs.push(FieldError::required(format!("{mp}.mountPath"), ""));
        }
    }
    for section in ["limits", "requests"] {
        if let Some(map) = c
            .pointer(&format!("/resources/{section}"))
            .and_then(Value::as_object)
        {
            for (res, q) in map {
                let ok = match q {
                    Value::String(s) => crate::quantity::Quantity::parse(s).is_ok(),
                    Value::Number(_) => true,
                    _ => false,
                };
                if !ok {
                    errs.push(FieldError::invalid(
                        format!("{path}.resources.{section}[{res}]"),
                        q,
                        "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$",
                    ));
                }
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe) {
            let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
                .iter()
                .filter(|h| p.get(**h).is_some())
                .count();
            if handlers != 1 {
                errs.push(FieldError::required(
                    format!("{path}.{probe}"),
                    "must specify a handler type",
                ));
            }
        }
    }
}

impl FieldError {
    /// `Not found`, rendered as Kubernetes does (reason FieldValueNotFound maps to Invalid here).
    pub fn not_found(field: impl Into<String>, value: &Value) -> Self {
        FieldError {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(render(value)),
            detail: "volume not found".into(),
        }
    }
}

/// Pod updates may change only images, activeDeadlineSeconds, tolerations and grace period.
fn validate_pod_update(new: &Value, old: &Value, errs: &mut Errors) {
    fn mask(spec: &Value) -> Value {
        let mut s = spec.clone();
        for list in ["containers", "initContainers"] {
            if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("image");
                    }
                }
            }
        }
        if let Some(m) = s.as_object_mut() {
            for f in [
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
            ] {
                m.remove(f);
            }
        }
        s
    }
    // nodeName may be set once (by binding): an unset old value is not a change.
    let (mut ns, os) = (
        mask(new.get("spec").unwrap_or(&Value::Null)),
        mask(old.get("spec").unwrap_or(&Value::Null)),
    );
    if os.get("nodeName").is_none() {
        if let Some(m) = ns.as_object_mut() {
            m.remove("nodeName");
        }
    }
    if ns != os {
        errs.push(FieldError::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}

fn validate_service(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
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

fn validate_replicated(obj: &Value, old: Option<&Value>, kind: &str, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    check_non_negative(errs, &spec, "replicas", "spec");
    check_non_negative(errs, &spec, "minReadySeconds", "spec");
    let template_labels = spec
        .pointer("/template/metadata/labels")
        .cloned()
        .unwrap_or(Value::Null);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => match serde_json::from_value(sel.clone())
            .map_err(|e| e.to_string())
            .and_then(|ls| Selector::from_label_selector(&ls))
        {
            Err(e) => errs.push(FieldError::invalid("spec.selector", sel, e)),
            Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
                "spec.selector",
                sel,
                "empty selector is invalid for deployment",
            )),
            Ok(s) => {
                let labels = crate::selector::labels_of(
                    &serde_json::json!({"metadata": {"labels": template_labels}}),
                );
                if !s.matches(&labels) {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        &Value::String(labels_string(&labels)),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        },
    }
    validate_labels(
        spec.pointer("/template/metadata").unwrap_or(&Value::Null),
        "spec.template.metadata.labels",
        errs,
    );
    match spec.pointer("/template/spec") {
        Some(ps) => {
            validate_pod_spec(ps, "spec.template.spec", errs);
            if let Some(rp) = ps.get("restartPolicy") {
                if rp != "Always" {
                    errs.push(FieldError::not_supported(
                        "spec.template.spec.restartPolicy",
                        rp,
                        &["Always"],
                    ));
                }
            }
        }
        None => errs.push(FieldError::required("spec.template", "")),
    }
    if kind == "StatefulSet" {
        check_enum(
            errs,
            &spec,
            "podManagementPolicy",
            "spec",
            &["OrderedReady", "Parallel"],
        );
        if let Some(us) = spec.get("updateStrategy") {
            check_enum(
                errs,
                us,
                "type",
                "spec.updateStrategy",
                &["RollingUpdate", "OnDelete"],
            );
            if let Some(ru) = us.get("rollingUpdate") {
                check_non_negative(errs, ru, "partition", "spec.updateStrategy.rollingUpdate");
                if let Some(mu) = ru.get("maxUnavailable") {
                    if let Some(e) = int_or_percent_error(mu, false) {
                        errs.push(FieldError::invalid(
                            "spec.updateStrategy.rollingUpdate.maxUnavailable",
                            mu,
                            e,
                        ));
                    }
                }
            }
        }
        if let Some(start) = spec.pointer("/ordinals/start") {
            if start.as_i64().is_some_and(|n| n < 0) {
                errs.push(FieldError::invalid(
                    "spec.ordinals.start",
                    start,
                    "must be greater than or equal to 0",
                ));
            }
        }
        if let Some(name) = non_empty_str(&spec, "serviceName") {
            if let Some(e) = dns1123_label_error(name) {
                errs.push(FieldError::invalid(
                    "spec.serviceName",
                    &Value::String(name.into()),
                    e,
                ));
            }
        }
    }
    if let Some(old) = old {
        if old.pointer("/spec/selector") != obj.pointer("/spec/selector") {
            errs.push(FieldError::invalid(
                "spec.selector",
                obj.pointer("/spec/selector").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if kind == "StatefulSet" {
            let strip = |v: &Value| {
                let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
                if let Some(m) = s.as_object_mut() {
                    for f in [
                        "replicas",
                        "ordinals",
                        "template",
                        "updateStrategy",
                        "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds",
                        "revisionHistoryLimit",
                    ] {
                        m.remove(f);
                    }
                }
                s
            };
            if strip(obj) != strip(old) {
                errs.push(FieldError::forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"));
            }
        }
    }
}

fn labels_string(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `IntOrString` rules for maxUnavailable/maxSurge: non-negative int or `N%` (≤100% unless `allow_over`).
pub fn int_or_percent_error(v: &Value, allow_over: bool) -> Option<String> {
    match v {
        Value::Number(n) => (n.as_i64().is_none_or(|n| n < 0)).then(|| "must be greater than or equal to 0".into()),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            None => Some("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')".into()),
            Some(p) if p < 0 => Some("must be greater than or equal to 0".into()),
            Some(p) if p > 100 && !allow_over => Some("must not be greater than 100%".into()),
            _ => None,
        },
        _ => Some("must be an integer or percentage".into()),
    }
}

fn validate_hpa(obj: &Value, errs: &mut Errors) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let target = spec.get("scaleTargetRef").cloned().unwrap_or(Value::Null);
    for f in ["kind", "name"] {
        if non_empty_str(&target, f).is_none() {
            errs.push(FieldError::required(format!("spec.scaleTargetRef.{f}"), ""));
        }
    }
    let max = spec.get("maxReplicas").and_then(Value::as_i64);
    match max {
        None => errs.push(FieldError::required("spec.maxReplicas", "")),
        Some(m) if m < 1 => errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &spec["maxReplicas"],
            "must be greater than or equal to 1",
        )),
        _ => {}
    }
    if let Some(min) = spec.get("minReplicas").and_then(Value::as_i64) {
        if min < 1 {
            errs.push(FieldError::invalid(
                "spec.minReplicas",
                &spec["minReplicas"],
                "must be greater than or equal to 1",
            ));
        } else if max.is_some_and(|m| m < min) {
            errs.push(FieldError::invalid(
                "spec.maxReplicas",
                &spec["maxReplicas"],
                "must be greater than or equal to `minReplicas`",
            ));
        }
    }
    for (i, m) in arr(&spec, "metrics").iter().enumerate() {
        let mp = format!("spec.metrics[{i}]");
        match str_at(m, "type") {
            None => errs.push(FieldError::required(format!("{mp}.type"), "")),
            Some(t) => {
                check_enum(
                    errs,
                    m,
                    "type",
                    &mp,
                    &[
                        "ContainerResource",
                        "External",
                        "Object",
                        "Pods",
                        "Resource",
                    ],
                );
                if t == "Resource" {
                    let r = m.get("resource").cloned().unwrap_or(Value::Null);
                    if non_empty_str(&r, "name").is_none() {
                        errs.push(FieldError::required(format!("{mp}.resource.name"), ""));
                    }
                    match r.get("target") {
                        None => {
                            errs.push(FieldError::required(format!("{mp}.resource.target"), ""))
                        }
                        Some(tg) => {
                            check_enum(
                                errs,
                                tg,
                                "type",
                                &format!("{mp}.resource.target"),
                                &["AverageValue", "Utilization", "Value"],
                            );
                            if str_at(tg, "type") == Some("Utilization")
                                && tg
                                    .get("averageUtilization")
                                    .and_then(Value::as_i64)
                                    .is_none_or(|u| u < 1)
                            {
                                errs.push(FieldError::required(
                                    format!("{mp}.resource.target.averageUtilization"),
                                    "must be set and positive",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    for dir in ["scaleUp", "scaleDown"] {
        if let Some(rules) = spec.pointer(&format!("/behavior/{dir}")) {
            let rp = format!("spec.behavior.{dir}");
            check_enum(
                errs,
                rules,
                "selectPolicy",
                &rp,
                &["Disabled", "Max", "Min"],
            );
            if let Some(w) = rules.get("stabilizationWindowSeconds") {
                if !w.as_i64().is_some_and(|w| (0..=3600).contains(&w)) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.stabilizationWindowSeconds"),
                        w,
                        "must be less than or equal to 3600 and greater than or equal to 0",
                    ));
                }
            }
            for (i, p) in arr(rules, "policies").iter().enumerate() {
                let pp = format!("{rp}.policies[{i}]");
                check_enum(errs, p, "type", &pp, &["Percent", "Pods"]);
                if p.get("value")
                    .and_then(Value::as_i64)
                    .is_none_or(|v| v <= 0)
                {
                    errs.push(FieldError::invalid(
                        format!("{pp}.value"),
                        p.get("value").unwrap_or(&Value::Null),
                        "must be greater than zero",
                    ));
                }
                if !p
                    .get("periodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|v| (1..=1800).contains(&v))
                {
                    errs.push(FieldError::invalid(
                        format!("{pp}.periodSeconds"),
                        p.get("periodSeconds").unwrap_or(&Value::Null),
                        "must be greater than zero and less than or equal to 1800",
                    ));
                }
            }
        }
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
    fn pod_without_containers() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            fields(&validate("Pod", &pod, None)),
            vec!["spec.containers: Required value"]
        );
    }

    #[test]
    fn container_errors_have_paths() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "c", "image": "busybox", "ports": [{"containerPort": 70000}]},
            {"name": "c"},
        ]}});
        let errs = fields(&validate("Pod", &pod, None));
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
            "Pod",
            true,
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field, "metadata.name");
        assert_eq!(errs[1].field, "metadata.labels");
        assert!(
            validate_metadata(&json!({"metadata": {"generateName": "x-"}}), "Pod", true).is_empty()
        );
        assert_eq!(
            validate_metadata(&json!({"metadata": {}}), "Pod", true)[0].field,
            "metadata.name"
        );
    }

    #[test]
    fn replicaset_selector_must_match_template() {
        let rs = json!({"metadata": {"name": "r"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let errs = validate("ReplicaSet", &rs, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        let mut changed = rs.clone();
        changed["spec"]["selector"] = json!({"matchLabels": {"app": "b"}});
        let errs = validate("ReplicaSet", &changed, Some(&rs));
        assert!(errs
            .iter()
            .any(|e| e.field == "spec.selector" && e.detail == "field is immutable"));
    }

    #[test]
    fn service_ports_and_immutable_cluster_ip() {
        let svc = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 0}]}});
        let errs = fields(&validate("Service", &svc, None));
        assert_eq!(
            errs,
            vec!["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]
        );
        let mut new = svc.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.6");
        new["spec"]["ports"] = json!([{"port": 80}]);
        let errs = validate("Service", &new, Some(&svc));
        assert_eq!(errs[0].field, "spec.clusterIP");
    }

    #[test]
    fn pod_update_may_only_change_images() {
        let old = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a"}]}});
        let ok = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "b"}]}});
        assert!(validate("Pod", &ok, Some(&old)).is_empty());
        let bad = json!({"spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "a", "command": ["x"]}]}});
        assert_eq!(
            validate("Pod", &bad, Some(&old))[0].kind,
            ErrorType::Forbidden
        );
    }
}
