//! A custom resource: one served version of a CustomResourceDefinition. Its
//! strategy is made from the CRD when the CRD controller (`crd.rs`) serves
//! it, and replaced when the CRD changes.
//!
//! ```text
//!  write ─▶ default (schema defaults) ─▶ validate (structural schema, CEL rules)
//!        ─▶ canonicalize (prune unknown fields, reported as kubectl warnings)
//!  read  ─▶ cells (additionalPrinterColumns) · scale_of (scale subresource paths)
//! ```

use super::Strategy;
use crate::table::Row;
use minik8s_api::meta::human_age;
use minik8s_cel::schema::{self, cel::RuleTree, jsonpath::JsonPath, Schema};
use minik8s_validation::Errors;
use minik8s_wire::versions::AlternateVersion;
use serde_json::{json, Value};
use std::sync::Arc;

/// One printer column: where its value is and how it is shown.
struct PrinterColumn {
    path: Option<JsonPath>,
    kind: String,
}

/// The scale subresource's paths.
struct ScalePaths {
    spec: JsonPath,
    status: JsonPath,
    selector: Option<JsonPath>,
}

pub struct CustomResource {
    schema: Schema,
    /// The schema's `x-kubernetes-validations`, compiled.
    rules: Option<RuleTree>,
    /// Has the status subresource (status is written only through it, and
    /// does not bump the generation).
    status: bool,
    columns: Option<Vec<PrinterColumn>>,
    scale: Option<ScalePaths>,
    selectable: Vec<String>,
    /// Set for a version other than the CRD's storage version.
    stored_in: Option<Arc<AlternateVersion>>,
}

impl CustomResource {
    /// The strategy of `version` (one entry of the CRD's `spec.versions`).
    pub fn from_version(crd: &Value, version: &Value) -> Result<CustomResource, String> {
        let spec = &crd["spec"];
        let storage = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["storage"] == json!(true))
            .and_then(|v| v["name"].as_str())
            .unwrap_or_default();
        let name = version["name"].as_str().unwrap_or_default();
        let stored_in = (name != storage && !storage.is_empty()).then(|| {
            Arc::new(AlternateVersion::api_version_only(
                spec["group"].as_str().unwrap_or_default(),
                name,
                spec["names"]["plural"].as_str().unwrap_or_default(),
                spec["names"]["kind"].as_str().unwrap_or_default(),
                storage,
            ))
        });
        let schema: Schema = serde_json::from_value(
            version
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .unwrap_or(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
        )
        .map_err(|e| format!("schema: {e}"))?;
        let parse = |p: Option<&Value>| {
            p.and_then(Value::as_str)
                .and_then(|p| JsonPath::parse(p).ok())
        };
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        path: parse(c.get("jsonPath")),
                        kind: c["type"].as_str().unwrap_or("string").to_string(),
                    })
                    .collect()
            });
        let scale = version.pointer("/subresources/scale").and_then(|s| {
            Some(ScalePaths {
                spec: parse(s.get("specReplicasPath"))?,
                status: parse(s.get("statusReplicasPath"))?,
                selector: parse(s.get("labelSelectorPath")),
            })
        });
        let selectable = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f["jsonPath"].as_str())
            .map(|p| p.trim_start_matches('.').to_string())
            .collect();
        let rules = RuleTree::compile(&schema, "openAPIV3Schema").map_err(|errs| {
            let why: Vec<String> = errs.iter().map(ToString::to_string).collect();
            why.join("; ")
        })?;
        Ok(CustomResource {
            schema,
            rules,
            status: version
                .pointer("/subresources/status")
                .is_some_and(|s| !s.is_null()),
            columns,
            scale,
            selectable,
            stored_in,
        })
    }
}

/// A cell of a printer column, as Kubernetes' CRD table convertor makes it.
fn cell(kind: &str, v: Option<&Value>) -> Value {
    match (kind, v) {
        (_, None | Some(Value::Null)) => Value::Null,
        ("date", Some(Value::String(t))) => json!(human_age(t)),
        ("integer", Some(Value::Number(n))) => json!(n.as_f64().map(|f| f as i64)),
        ("number" | "boolean", Some(v @ (Value::Number(_) | Value::Bool(_)))) => v.clone(),
        ("string", Some(Value::String(s))) => json!(s),
        ("string", Some(other)) => json!(other.to_string()),
        _ => Value::Null,
    }
}

impl Strategy for CustomResource {
    fn canonicalize(&self, mut obj: Value) -> Result<Value, String> {
        schema::prune(&self.schema, &mut obj);
        Ok(obj)
    }

    fn default(&self, obj: &mut Value) {
        schema::apply_defaults(&self.schema, obj);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        let mut errs = schema::validate(&self.schema, obj);
        // Rules run on well-typed values only, as in Kubernetes.
        if errs.is_empty() {
            if let Some(rules) = &self.rules {
                errs.extend(rules.check(obj, old));
            }
        }
        errs
    }

    fn strategic_merge(&self) -> bool {
        false
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }

    fn field_selectors(&self) -> Vec<minik8s_api::registry::Text> {
        let mut f: Vec<minik8s_api::registry::Text> =
            vec!["metadata.name".into(), "metadata.namespace".into()];
        f.extend(self.selectable.iter().cloned().map(Into::into));
        f
    }

    fn table_row(&self) -> Row {
        crate::table::rows::age_only
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        match &self.columns {
            None => (self.table_row())(obj),
            Some(cols) => cols
                .iter()
                .map(|c| cell(&c.kind, c.path.as_ref().and_then(|p| p.first(obj))))
                .collect(),
        }
    }

    fn scale_selector(&self, obj: &Value) -> String {
        self.scale_of(obj).2
    }

    fn scale_of(&self, obj: &Value) -> (i64, i64, String) {
        let Some(paths) = &self.scale else {
            return (0, 0, String::new());
        };
        let int = |p: &JsonPath| p.first(obj).and_then(Value::as_i64).unwrap_or(0);
        let selector = paths
            .selector
            .as_ref()
            .and_then(|p| p.first(obj))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        (int(&paths.spec), int(&paths.status), selector)
    }

    fn set_replicas(&self, obj: &mut Value, replicas: i64) -> Result<(), String> {
        let fields = self
            .scale
            .as_ref()
            .and_then(|s| s.spec.fields())
            .ok_or("the custom resource has no scale subresource")?;
        let mut at = obj;
        for (i, f) in fields.iter().enumerate() {
            if !at.is_object() {
                return Err(format!("{} is not an object", fields[..i].join(".")));
            }
            at = at
                .as_object_mut()
                .expect("checked above")
                .entry(f.to_string())
                .or_insert_with(|| json!({}));
        }
        *at = json!(replicas);
        Ok(())
    }

    fn stored_in(&self) -> Option<Arc<AlternateVersion>> {
        self.stored_in.clone()
    }

    fn openapi_schema(&self) -> Option<Value> {
        serde_json::to_value(&self.schema).ok()
    }

    fn generation_relevant(&self, obj: &Value) -> Option<Value> {
        let mut o = obj.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
            if self.status {
                m.remove("status");
            }
        }
        Some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab_version() -> Value {
        json!({"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"}, "replicas": {"type": "integer", "default": 1}, "color": {"type": "string"}}},
                "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}}}}}},
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
            "additionalPrinterColumns": [
                {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"}],
            "selectableFields": [{"jsonPath": ".spec.color"}]})
    }

    #[test]
    fn printer_columns_scale_and_generation_follow_the_crd() {
        let crd = json!({"spec": {"group": "stable.example.com", "names": {"plural": "crontabs", "kind": "CronTab"}, "versions": [crontab_version()]}});
        let cr = CustomResource::from_version(&crd, &crontab_version()).unwrap();
        assert!(cr.stored_in().is_none(), "the storage version");
        let mut obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "a"},
            "spec": {"cronSpec": "* * * * */5", "junk": true}, "status": {"replicas": 2, "selector": "app=a"}});
        cr.default(&mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        let obj = cr.canonicalize(obj).unwrap();
        assert!(obj["spec"].get("junk").is_none());
        assert_eq!(
            cr.cells(&obj),
            [json!("* * * * */5"), json!(1), Value::Null]
        );
        assert_eq!(cr.scale_of(&obj), (1, 2, "app=a".to_string()));
        let mut scaled = obj.clone();
        cr.set_replicas(&mut scaled, 5).unwrap();
        assert_eq!(scaled["spec"]["replicas"], 5);
        assert_ne!(
            cr.generation_relevant(&scaled),
            cr.generation_relevant(&obj)
        );
        let mut status_only = obj.clone();
        status_only["status"]["replicas"] = json!(9);
        assert_eq!(
            cr.generation_relevant(&status_only),
            cr.generation_relevant(&obj)
        );
        assert!(cr.field_selectors().iter().any(|f| f == "spec.color"));
        let errs = cr.validate(&json!({"spec": {"replicas": "x"}}), None);
        assert_eq!(errs[0].field, "spec.replicas");
    }
}
