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

/// Once `immutable` is set, neither it nor the data may change: `changed`
/// names the data fields that differ from the stored object's.
fn check_immutable(
    immutable: Option<bool>,
    was_immutable: Option<bool>,
    changed: &[&str],
    errs: &mut Errors,
) {
    if was_immutable != Some(true) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if immutable != Some(true) {
        errs.push(FieldError::forbidden("immutable", WHY));
    }
    for f in changed {
        errs.push(FieldError::forbidden(*f, WHY));
    }
}

/// Kubernetes' `ValidateConfigMap(Update)`.
pub(super) fn validate_config_map(cm: &ConfigMap, old: Option<&ConfigMap>, errs: &mut Errors) {
    let data = cm.data.as_ref();
    let binary = cm.binary_data.as_ref();
    let data_keys = data.into_iter().flat_map(|d| d.keys());
    check_keys(data_keys.clone(), "data", errs);
    for key in data_keys.filter(|k| binary.is_some_and(|b| b.contains_key(*k))) {
        errs.push(FieldError::invalid(
            format!("data[{key}]"),
            &Value::from(key.as_str()),
            "duplicate of key present in binaryData",
        ));
    }
    check_keys(
        binary.into_iter().flat_map(|b| b.keys()),
        "binaryData",
        errs,
    );
    let size: usize = data
        .into_iter()
        .flatten()
        .map(|(_, v)| v.len())
        .sum::<usize>()
        + binary
            .into_iter()
            .flatten()
            .map(|(_, b)| b.0.len())
            .sum::<usize>();
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("", MAX_SIZE));
    }
    if let Some(old) = old {
        let mut changed = Vec::new();
        if cm.data != old.data {
            changed.push("data");
        }
        if cm.binary_data != old.binary_data {
            changed.push("binaryData");
        }
        check_immutable(cm.immutable, old.immutable, &changed, errs);
    }
}

/// Kubernetes' `ValidateSecret(Update)`: keys, size, the keys each type
/// requires; type and (once immutable) data fixed.
pub(super) fn validate_secret(secret: &Secret, old: Option<&Secret>, errs: &mut Errors) {
    let empty = Default::default();
    let data = secret.data.as_ref().unwrap_or(&empty);
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
        "kubernetes.io/dockercfg" => json_key(data, ".dockercfg", errs),
        "kubernetes.io/dockerconfigjson" => json_key(data, ".dockerconfigjson", errs),
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
        if secret.type_ != old.type_ {
            errs.push(FieldError::invalid(
                "type",
                &serde_json::json!(secret.type_),
                "field is immutable",
            ));
        }
        let changed: &[&str] = if secret.data != old.data {
            &["data"]
        } else {
            &[]
        };
        check_immutable(secret.immutable, old.immutable, changed, errs);
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

    fn cm_of(v: Value) -> ConfigMap {
        serde_json::from_value(v).unwrap()
    }

    fn secret(v: Value) -> Secret {
        serde_json::from_value(v).unwrap()
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
        validate_config_map(&cm_of(cm), None, &mut errs);
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
        validate_config_map(&cm_of(big), None, &mut errs);
        assert_eq!(
            messages(&errs),
            [": Too long: may not be more than 1048576 bytes"]
        );
        assert_eq!(errs[0].kind.reason(), "FieldValueTooLong");

        let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "2"}});
        let mut errs = Vec::new();
        validate_config_map(&cm_of(new), Some(&cm_of(old)), &mut errs);
        assert_eq!(
            messages(&errs),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn secret_types_need_their_keys() {
        let check = |v: Value| {
            let mut errs = Vec::new();
            validate_secret(&secret(v), None, &mut errs);
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
        validate_secret(&secret(new), Some(&secret(old)), &mut errs);
        assert_eq!(
            messages(&errs),
            ["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
    }
}
