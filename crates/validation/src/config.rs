//! ConfigMap and Secret: keys, the 1 MiB limit, Secret types and their
//! required keys, and `immutable` (Kubernetes' ValidateConfigMap and
//! ValidateSecret, with their messages and field paths).

use super::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

/// The most a ConfigMap's or Secret's data may hold.
pub const MAX_SIZE: usize = 1024 * 1024;

/// Kubernetes' IsConfigMapKey: a file name inside a volume, so no paths.
pub fn config_key_errors(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    if key.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        out.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    if key == "." {
        out.push("must not be '.'".to_string());
    } else if key == ".." {
        out.push("must not be '..'".to_string());
    } else if key.starts_with("..") {
        out.push("must not start with '..'".to_string());
    }
    out
}

fn check_keys<'a>(keys: impl Iterator<Item = &'a String>, path: &str, errs: &mut Errors) {
    for key in keys {
        for msg in config_key_errors(key) {
            errs.push(FieldError::invalid(
                format!("{path}[{key}]"),
                &Value::from(key.as_str()),
                msg,
            ));
        }
    }
}

/// Once `immutable` is set, neither it nor the data may change.
fn check_immutable(obj: &Value, old: &Value, fields: &[&str], errs: &mut Errors) {
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if obj.get("immutable") != Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden("immutable", WHY));
    }
    for f in fields {
        if obj.get(*f) != old.get(*f) {
            errs.push(FieldError::forbidden(*f, WHY));
        }
    }
}

pub(super) fn validate_config_map(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let Ok(cm) = serde_json::from_value::<ConfigMap>(obj.clone()) else {
        return;
    };
    let data = cm.data.unwrap_or_default();
    let binary = cm.binary_data.unwrap_or_default();
    check_keys(data.keys(), "data", errs);
    for key in data.keys().filter(|k| binary.contains_key(*k)) {
        errs.push(FieldError::invalid(
            format!("data[{key}]"),
            &Value::from(key.as_str()),
            "duplicate of key present in binaryData",
        ));
    }
    check_keys(binary.keys(), "binaryData", errs);
    let size: usize = data.values().map(String::len).sum::<usize>()
        + binary.values().map(|b| b.0.len()).sum::<usize>();
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("", MAX_SIZE));
    }
    if let Some(old) = old {
        check_immutable(obj, old, &["data", "binaryData"], errs);
    }
}

pub(super) fn validate_secret(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let Ok(secret) = serde_json::from_value::<Secret>(obj.clone()) else {
        return;
    };
    let data = secret.data.clone().unwrap_or_default();
    check_keys(data.keys(), "data", errs);
    if data.values().map(|b| b.0.len()).sum::<usize>() > MAX_SIZE {
        errs.push(FieldError::too_long("data", MAX_SIZE));
    }
    let has = |k: &str| data.contains_key(k);
    let required = |k: &str| FieldError::required(format!("data[{k}]"), "");
    match secret.type_.as_deref().unwrap_or("Opaque") {
        "kubernetes.io/service-account-token" => {
            let named = secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .is_some_and(|n| !n.is_empty());
            if !named {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => json_key(&data, ".dockercfg", errs),
        "kubernetes.io/dockerconfigjson" => json_key(&data, ".dockerconfigjson", errs),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(|v| v.0.is_empty()) => {
            errs.push(required("ssh-privatekey"));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    errs.push(required(k));
                }
            }
        }
        _ => {}
    }
    if let Some(old) = old {
        if obj.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                "type",
                obj.get("type").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        check_immutable(obj, old, &["data"], errs);
    }
}

/// A key that must hold JSON (Docker's credentials).
fn json_key(
    data: &std::collections::BTreeMap<String, k8s_openapi::ByteString>,
    key: &str,
    errs: &mut Errors,
) {
    match data.get(key) {
        None => errs.push(FieldError::required(format!("data[{key}]"), "")),
        Some(v) => {
            if let Err(e) = serde_json::from_slice::<Value>(&v.0) {
                errs.push(FieldError::invalid(
                    format!("data[{key}]"),
                    &Value::from("<secret contents redacted>"),
                    e.to_string(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn config_keys_are_file_names() {
        assert!(config_key_errors("app.properties").is_empty());
        assert!(config_key_errors("KEY_NAME-1").is_empty());
        assert_eq!(config_key_errors("a/b").len(), 1);
        assert_eq!(config_key_errors("..data"), ["must not start with '..'"]);
        assert_eq!(config_key_errors(&"k".repeat(254)).len(), 1);
    }

    #[test]
    fn config_maps_keys_size_and_immutability() {
        let mut errs = Vec::new();
        let cm = json!({"metadata": {"name": "c"}, "data": {"bad key": "v", "x": "1"}, "binaryData": {"x": "AQ=="}});
        validate_config_map(&cm, None, &mut errs);
        let m = messages(&errs);
        assert!(
            m.iter()
                .any(|e| e
                    .starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key")),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"data[x]: Invalid value: \"x\": duplicate of key present in binaryData"
                    .to_string()
            ),
            "{m:?}"
        );

        let mut errs = Vec::new();
        let big = json!({"metadata": {"name": "c"}, "data": {"a": "x".repeat(MAX_SIZE + 1)}});
        validate_config_map(&big, None, &mut errs);
        assert_eq!(
            messages(&errs),
            [": Too long: may not be more than 1048576 bytes"]
        );
        assert_eq!(errs[0].kind.reason(), "FieldValueTooLong");

        let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "2"}});
        let mut errs = Vec::new();
        validate_config_map(&new, Some(&old), &mut errs);
        assert_eq!(
            messages(&errs),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn secret_types_need_their_keys() {
        let check = |v: Value| {
            let mut errs = Vec::new();
            validate_secret(&v, None, &mut errs);
            messages(&errs)
        };
        assert!(check(json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}})).is_empty());
        assert_eq!(
            check(
                json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}})
            ),
            ["data[tls.key]: Required value"]
        );
        assert_eq!(
            check(json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth"})),
            [
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        assert_eq!(
            check(
                json!({"metadata": {"name": "s"}, "type": "kubernetes.io/service-account-token"})
            ),
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        let bad_json = check(
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson",
                                    "data": {".dockerconfigjson": "bm90IGpzb24="}}),
        );
        assert!(
            bad_json[0].starts_with(
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\""
            ),
            "{bad_json:?}"
        );
        let mut errs = Vec::new();
        let old = json!({"metadata": {"name": "s"}, "type": "Opaque"});
        let new = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA==", "tls.key": "eA=="}});
        validate_secret(&new, Some(&old), &mut errs);
        assert_eq!(
            messages(&errs),
            ["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
    }
}
