//! CustomResourceDefinition (apiextensions.k8s.io/v1): defaults and rules, as
//! Kubernetes' apiextensions validation words them.

use super::{
    dns1035_label_error, dns1123_label_error, dns1123_subdomain_error, Errors, FieldError,
};
use minik8s_cel::schema::{self, jsonpath::JsonPath, Schema};
use serde_json::{json, Value};

/// The printer column types Kubernetes knows.
const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];

/// Fills in what Kubernetes defaults in a CRD: singular and listKind, the
/// conversion strategy, the printer columns' and selectable fields' blanks.
pub fn default_crd(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("singular".into(), json!(kind.to_ascii_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    let conversion = spec.entry("conversion").or_insert_with(|| json!({}));
    if conversion.get("strategy").is_none() {
        conversion["strategy"] = json!("None");
    }
    for v in spec
        .get_mut("versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for col in v
            .get_mut("additionalPrinterColumns")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if col.get("priority").is_none() {
                col["priority"] = json!(0);
            }
        }
    }
}

/// Every rule a CRD breaks.
pub fn validate_crd(obj: &Value, old: Option<&Value>) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let names = spec.get("names").unwrap_or(&Value::Null);
    let plural = names.get("plural").and_then(Value::as_str).unwrap_or("");
    let name = minik8s_api::meta::name(obj);
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if dns1123_subdomain_error(group).is_some() || !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    match spec.get("scope").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.scope", "")),
        Some("Namespaced" | "Cluster") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.scope",
            &json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    names_errors(names, &mut errs);
    versions_errors(spec, &mut errs);
    match spec.pointer("/conversion/strategy").and_then(Value::as_str) {
        None | Some("None") => {}
        Some("Webhook") => errs.push(FieldError::invalid(
            "spec.conversion.strategy",
            &json!("Webhook"),
            "conversion webhooks are not supported by minik8s: use strategy None (versions share one schema-compatible storage)",
        )),
        Some(other) => errs.push(FieldError::not_supported("spec.conversion.strategy", &json!(other), &["None", "Webhook"])),
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        if old_spec.get("group") != spec.get("group") {
            errs.push(FieldError::invalid(
                "spec.group",
                &json!(group),
                "field is immutable",
            ));
        }
        if old_spec.get("scope") != spec.get("scope")
            && old
                .pointer("/status/storedVersions")
                .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        {
            errs.push(FieldError::invalid(
                "spec.scope",
                &spec["scope"],
                "field is immutable",
            ));
        }
    }
    errs
}

fn names_errors(names: &Value, errs: &mut Errors) {
    for field in ["plural", "singular"] {
        match names.get(field).and_then(Value::as_str) {
            None | Some("") if field == "plural" => {
                errs.push(FieldError::required("spec.names.plural", ""))
            }
            Some(n) if !n.is_empty() => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(
                        format!("spec.names.{field}"),
                        &json!(n),
                        e,
                    ));
                }
            }
            _ => {}
        }
    }
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    for (field, k) in [
        ("kind", kind),
        (
            "listKind",
            names.get("listKind").and_then(Value::as_str).unwrap_or(""),
        ),
    ] {
        if !k.is_empty()
            && (!k.starts_with(|c: char| c.is_ascii_alphabetic())
                || !k.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            errs.push(FieldError::invalid(
                format!("spec.names.{field}"),
                &json!(k),
                "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
            ));
        }
    }
    if !kind.is_empty() && names.get("listKind").and_then(Value::as_str) == Some(kind) {
        errs.push(FieldError::invalid(
            "spec.names.listKind",
            &json!(kind),
            "kind and listKind may not be the same",
        ));
    }
    for (i, short) in super::arr(names, "shortNames").iter().enumerate() {
        if let Some(e) = short.as_str().and_then(dns1123_label_error) {
            errs.push(FieldError::invalid(
                format!("spec.names.shortNames[{i}]"),
                short,
                e,
            ));
        }
    }
}

fn versions_errors(spec: &Value, errs: &mut Errors) {
    let versions = super::arr(spec, "versions");
    if versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage") == Some(&json!(true)))
        .count();
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &json!(versions.iter().map(|v| &v["name"]).collect::<Vec<_>>()),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions
        .iter()
        .any(|v| v.get("served") == Some(&json!(true)))
    {
        errs.push(FieldError::invalid(
            "spec.versions",
            &json!(versions.iter().map(|v| &v["name"]).collect::<Vec<_>>()),
            "must have at least one version marked as served",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(e) = dns1035_label_error(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), &json!(name), e));
        }
        if versions[..i].iter().any(|o| o.get("name") == v.get("name")) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
        }
        match v.pointer("/schema/openAPIV3Schema") {
            None | Some(Value::Null) => errs.push(FieldError::required(
                format!("{path}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
            Some(raw) => match serde_json::from_value::<Schema>(raw.clone()) {
                Ok(s) => {
                    errs.extend(schema::structural::check(
                        &s,
                        &format!("{path}.schema.openAPIV3Schema"),
                    ));
                    subresources_errors(v, &path, errs);
                    columns_errors(v, &path, errs);
                    selectable_errors(v, &s, &path, errs);
                }
                Err(e) => errs.push(FieldError::invalid(
                    format!("{path}.schema.openAPIV3Schema"),
                    &json!("..."),
                    e.to_string(),
                )),
            },
        }
    }
}

fn path_error(errs: &mut Errors, field: String, raw: &Value, must_start: &str) {
    let text = raw.as_str().unwrap_or("");
    let parsed = JsonPath::parse(text)
        .ok()
        .and_then(|p| p.fields().map(|f| f.len()));
    if !text.starts_with(must_start) || parsed.is_none_or(|n| n < 2) {
        errs.push(FieldError::invalid(
            field,
            raw,
            format!(
                "should be a json path under {}",
                must_start.trim_end_matches('.')
            ),
        ));
    }
}

fn subresources_errors(v: &Value, path: &str, errs: &mut Errors) {
    let Some(scale) = v.pointer("/subresources/scale").filter(|s| !s.is_null()) else {
        return;
    };
    let sp = format!("{path}.subresources.scale");
    match scale.get("specReplicasPath") {
        Some(p) => path_error(errs, format!("{sp}.specReplicasPath"), p, ".spec."),
        None => errs.push(FieldError::required(format!("{sp}.specReplicasPath"), "")),
    }
    match scale.get("statusReplicasPath") {
        Some(p) => path_error(errs, format!("{sp}.statusReplicasPath"), p, ".status."),
        None => errs.push(FieldError::required(format!("{sp}.statusReplicasPath"), "")),
    }
    if let Some(p) = scale.get("labelSelectorPath").filter(|p| !p.is_null()) {
        let text = p.as_str().unwrap_or("");
        if !(text.starts_with(".spec.") || text.starts_with(".status."))
            || JsonPath::parse(text).is_err()
        {
            errs.push(FieldError::invalid(
                format!("{sp}.labelSelectorPath"),
                p,
                "should be a json path under either .spec or .status",
            ));
        }
    }
}

fn columns_errors(v: &Value, path: &str, errs: &mut Errors) {
    for (i, col) in super::arr(v, "additionalPrinterColumns").iter().enumerate() {
        let cp = format!("{path}.additionalPrinterColumns[{i}]");
        if col
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errs.push(FieldError::required(format!("{cp}.name"), ""));
        }
        match col.get("type").and_then(Value::as_str) {
            None | Some("") => errs.push(FieldError::required(format!("{cp}.type"), "")),
            Some(t) if !COLUMN_TYPES.contains(&t) => errs.push(FieldError::not_supported(
                format!("{cp}.type"),
                &json!(t),
                COLUMN_TYPES,
            )),
            _ => {}
        }
        match col.get("jsonPath").and_then(Value::as_str) {
            None | Some("") => errs.push(FieldError::required(format!("{cp}.jsonPath"), "")),
            Some(p) => {
                if let Err(e) = JsonPath::parse(p) {
                    errs.push(FieldError::invalid(
                        format!("{cp}.jsonPath"),
                        &json!(p),
                        format!("must be a simple json path: {e}"),
                    ));
                }
            }
        }
    }
}

fn selectable_errors(v: &Value, s: &Schema, path: &str, errs: &mut Errors) {
    let fields = super::arr(v, "selectableFields");
    if fields.len() > 8 {
        errs.push(FieldError::too_many(
            format!("{path}.selectableFields"),
            fields.len(),
            8,
        ));
    }
    for (i, f) in fields.iter().enumerate() {
        let fp = format!("{path}.selectableFields[{i}].jsonPath");
        let raw = f.get("jsonPath").cloned().unwrap_or(Value::Null);
        let Some(steps) = raw
            .as_str()
            .and_then(|p| JsonPath::parse(p).ok())
            .and_then(|p| {
                p.fields()
                    .map(|f| f.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            })
        else {
            errs.push(FieldError::invalid(fp, &raw, "must be a simple json path"));
            continue;
        };
        let mut at = Some(s);
        for step in &steps {
            at = at
                .and_then(|s| s.properties.as_ref())
                .and_then(|p| p.get(step));
        }
        match at.and_then(|s| s.type_.as_deref()) {
            Some("string" | "integer" | "boolean") => {}
            Some(_) => errs.push(FieldError::invalid(
                fp,
                &raw,
                "must have type boolean, integer or string",
            )),
            None if at.is_some_and(|s| s.x_kubernetes_int_or_string == Some(true)) => {}
            None => errs.push(FieldError::invalid(
                fp,
                &raw,
                "is an invalid path: does not refer to a field in the schema",
            )),
        }
        if steps.first().map(String::as_str) == Some("metadata") {
            errs.push(FieldError::forbidden(
                format!("{path}.selectableFields[{i}].jsonPath"),
                "must not select metadata fields",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab_crd() -> Value {
        json!({"metadata": {"name": "crontabs.stable.example.com"}, "spec": {
            "group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
                "selectableFields": [{"jsonPath": ".spec.cronSpec"}]}]}})
    }

    fn messages(obj: &Value) -> Vec<String> {
        validate_crd(obj, None)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_documentation_crd_is_valid_and_defaulted() {
        let mut crd = crontab_crd();
        default_crd(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "crontab");
        assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");
        assert_eq!(crd["spec"]["conversion"]["strategy"], "None");
        assert_eq!(messages(&crd), Vec::<String>::new());
    }

    #[test]
    fn broken_crds_are_told_what_is_wrong() {
        let mut crd = crontab_crd();
        crd["metadata"]["name"] = json!("crontab.stable.example.com");
        crd["spec"]["scope"] = json!("Galaxy");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("float");
        crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
            json!(".status.replicas");
        crd["spec"]["versions"][0]["selectableFields"][0]["jsonPath"] = json!(".spec.nope");
        crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let m = messages(&crd);
        for want in [
            "metadata.name: Invalid value: \"crontab.stable.example.com\": must be spec.names.plural+\".\"+spec.group",
            "spec.scope: Unsupported value: \"Galaxy\": supported values: \"Cluster\", \"Namespaced\"",
            "spec.versions: Invalid value: [\"v1\"]: must have exactly one version marked as storage version",
            "spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"float\"",
            "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
            "spec.versions[0].selectableFields[0].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a field in the schema",
            "spec.conversion.strategy: Invalid value: \"Webhook\": conversion webhooks are not supported by minik8s",
        ] {
            assert!(m.iter().any(|e| e.starts_with(want)), "{want}\n in {m:#?}");
        }
        let no_schema = json!({"metadata": {"name": "as.x.io"}, "spec": {"group": "x.io", "scope": "Cluster",
            "names": {"plural": "as", "kind": "A"}, "versions": [{"name": "v1", "served": true, "storage": true}]}});
        assert_eq!(
            messages(&no_schema),
            ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
        );
    }
}
