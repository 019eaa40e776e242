//! Is a CRD's schema structural? Kubernetes (apiextensions/v1) serves only
//! structural schemas: every field has a type (unless it is int-or-string or
//! keeps unknown fields), `properties` and `additionalProperties` are not
//! mixed, `metadata` at the root restricts only `name` and `generateName`,
//! and every default is valid against its own schema.

use super::{additional, items, validate, Schema};
use minik8s_api::field::{Errors, FieldError};
use serde_json::Value;

/// The errors of `s` as the root schema at `path`
/// (`spec.versions[0].schema.openAPIV3Schema`).
pub fn check(s: &Schema, path: &str) -> Errors {
    let mut errs = Vec::new();
    if s.type_.as_deref() != Some("object") {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            &Value::String(s.type_.clone().unwrap_or_default()),
            "must be object at the root",
        ));
    }
    if let Some(meta) = s.properties.as_ref().and_then(|p| p.get("metadata")) {
        let allowed = ["name", "generateName"];
        let extra = meta
            .properties
            .iter()
            .flatten()
            .any(|(k, _)| !allowed.contains(&k.as_str()));
        if extra || meta.default.is_some() || meta.x_kubernetes_preserve_unknown_fields.is_some() {
            errs.push(FieldError::forbidden(
                format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    node(s, path, &mut errs, true);
    errs
}

fn node(s: &Schema, path: &str, errs: &mut Errors, root: bool) {
    let typed = s.type_.as_deref().is_some_and(|t| !t.is_empty());
    let exempt = s.x_kubernetes_int_or_string == Some(true)
        || s.x_kubernetes_preserve_unknown_fields == Some(true);
    if !typed && !exempt && !root {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must not be empty for specified object fields",
        ));
    }
    if let Some(t) = s.type_.as_deref() {
        let known = ["object", "array", "string", "integer", "number", "boolean"];
        if !known.contains(&t) {
            errs.push(FieldError::not_supported(
                format!("{path}.type"),
                &Value::String(t.into()),
                &known,
            ));
        }
        if s.x_kubernetes_int_or_string == Some(true) {
            errs.push(FieldError::forbidden(
                format!("{path}.type"),
                "must be empty if x-kubernetes-int-or-string is true",
            ));
        }
    }
    if s.properties.is_some() && s.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if s.ref_path.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.$ref"),
            "$ref is not supported",
        ));
    }
    if s.type_.as_deref() == Some("array") && items(s).is_none() {
        errs.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(list_type) = s.x_kubernetes_list_type.as_deref() {
        if !["atomic", "set", "map"].contains(&list_type) {
            errs.push(FieldError::not_supported(
                format!("{path}.x-kubernetes-list-type"),
                &Value::String(list_type.into()),
                &["atomic", "set", "map"],
            ));
        }
        if list_type == "map"
            && s.x_kubernetes_list_map_keys
                .as_ref()
                .is_none_or(Vec::is_empty)
        {
            errs.push(FieldError::required(
                format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
    }
    if let Some(d) = &s.default {
        if root {
            errs.push(FieldError::forbidden(
                format!("{path}.default"),
                "must not be set at the root",
            ));
        } else {
            errs.extend(validate::walk_value(s, &d.0, &format!("{path}.default")));
        }
    }
    for (k, prop) in s.properties.iter().flatten() {
        node(prop, &format!("{path}.properties[{k}]"), errs, false);
    }
    if let Some(values) = additional(s) {
        node(values, &format!("{path}.additionalProperties"), errs, false);
    }
    if let Some(item) = items(s) {
        node(item, &format!("{path}.items"), errs, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(v: Value) -> Vec<String> {
        let s: Schema = serde_json::from_value(v).unwrap();
        check(&s, "s").iter().map(ToString::to_string).collect()
    }

    #[test]
    fn structural_schemas_pass_and_others_say_why() {
        assert!(errors(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true},
                "any": {"x-kubernetes-preserve-unknown-fields": true},
                "n": {"type": "integer", "default": 3}}}}}))
        .is_empty());
        assert_eq!(
            errors(json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
            ["s.properties[spec].type: Required value: must not be empty for specified object fields"]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}})),
            ["s.properties[n].default: Invalid value: \"string\": s.properties[n].default in body must be of type integer: \"string\""]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})),
            ["s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"l": {"type": "array"}}})),
            ["s.properties[l].items: Required value: must be specified"]
        );
    }
}
