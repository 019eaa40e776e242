//! Defaulting and pruning: what a structural schema does to an object before
//! it is stored, as Kubernetes does it while decoding a custom resource.
//!
//! - Defaulting fills a missing field (or a `null` one that is not nullable)
//!   with its schema's `default`, then looks inside it.
//! - Pruning drops every field the schema does not name, except below
//!   `x-kubernetes-preserve-unknown-fields` (and at an embedded resource's
//!   `apiVersion`, `kind` and `metadata`).

use super::{additional, items, preserves_unknown, Schema};
use serde_json::{Map, Value};

/// The fields every object keeps at its root (and an embedded resource at its own).
const TYPE_AND_OBJECT_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Fills in the schema's defaults, top-down.
pub fn apply_defaults(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = &s.properties {
                for (name, prop) in props {
                    let missing = match map.get(name) {
                        None => true,
                        Some(Value::Null) => prop.nullable != Some(true),
                        Some(_) => false,
                    };
                    if missing {
                        if let Some(d) = &prop.default {
                            map.insert(name.clone(), d.0.clone());
                        }
                    }
                    if let Some(child) = map.get_mut(name) {
                        apply_defaults(prop, child);
                    }
                }
            }
            if let Some(values) = additional(s) {
                for child in map.values_mut() {
                    apply_defaults(values, child);
                }
            }
        }
        Value::Array(list) => {
            if let Some(item) = items(s) {
                for child in list {
                    apply_defaults(item, child);
                }
            }
        }
        _ => {}
    }
}

/// Drops the fields `s` does not know; the root keeps its type and object meta.
pub fn prune(s: &Schema, v: &mut Value) {
    prune_at(s, v, true);
}

fn prune_at(s: &Schema, v: &mut Value, keeps_meta: bool) {
    match v {
        Value::Object(map) => prune_object(s, map, keeps_meta),
        Value::Array(list) => {
            if let Some(item) = items(s) {
                for child in list {
                    prune_at(item, child, false);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(s: &Schema, map: &mut Map<String, Value>, keeps_meta: bool) {
    let keeps_meta = keeps_meta || s.x_kubernetes_embedded_resource == Some(true);
    let preserve = preserves_unknown(s);
    let values = additional(s);
    map.retain(|k, _| {
        preserve
            || values.is_some()
            || (keeps_meta && TYPE_AND_OBJECT_META.contains(&k.as_str()))
            || s.properties.as_ref().is_some_and(|p| p.contains_key(k))
    });
    for (k, child) in map.iter_mut() {
        if let Some(prop) = s.properties.as_ref().and_then(|p| p.get(k)) {
            prune_at(prop, child, false);
        } else if let Some(values) = values {
            prune_at(values, child, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        serde_json::from_value(json!({"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "image": {"type": "string"},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "env": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "value": {"type": "string", "default": "-"}}}},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "spec": {"type": "object"}}}
        }}}}))
        .unwrap()
    }

    #[test]
    fn defaults_fill_missing_fields_top_down() {
        let mut obj = json!({"metadata": {"name": "a"}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(obj["spec"], json!({"replicas": 1}));
        let mut obj = json!({"spec": {"replicas": null, "env": [{"name": "A"}, {"name": "B", "value": "b"}]}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(
            obj["spec"]["replicas"], 1,
            "a null non-nullable field is defaulted"
        );
        assert_eq!(
            obj["spec"]["env"],
            json!([{"name": "A", "value": "-"}, {"name": "B", "value": "b"}])
        );
    }

    #[test]
    fn unknown_fields_are_pruned_except_where_preserved() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "bogus": 1,
            "spec": {"image": "i", "nope": true, "extra": {"anything": {"deep": 1}},
                     "env": [{"name": "A", "junk": 1}],
                     "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "other": 1}}});
        prune(&schema(), &mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                "spec": {"image": "i", "extra": {"anything": {"deep": 1}}, "env": [{"name": "A"}],
                         "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}})
        );
    }
}
