//! Validation of a custom resource against its structural schema, with the
//! field paths and words of Kubernetes (kube-openapi's validator as the
//! apiextensions apiserver reports it): `spec.replicas: Invalid value:
//! "string": spec.replicas in body must be of type integer: "string"`.

use super::{additional, child, formats, index, items, key, Schema};
use minik8s_api::field::{ErrorType, Errors, FieldError};
use serde_json::Value;

/// Every error of `obj` against the root schema of its version. The root's
/// `apiVersion`, `kind` and `metadata` are the apiserver's to check.
pub fn validate(schema: &Schema, obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let Some(map) = obj.as_object() else {
        return errs;
    };
    let mut root = map.clone();
    for k in ["apiVersion", "kind", "metadata"] {
        root.remove(k);
    }
    let mut top = schema.clone();
    if let Some(props) = &mut top.properties {
        for k in ["apiVersion", "kind", "metadata"] {
            props.remove(k);
        }
    }
    if let Some(req) = &mut top.required {
        req.retain(|r| !["apiVersion", "kind", "metadata"].contains(&r.as_str()));
    }
    walk(&top, &Value::Object(root), "", &mut errs);
    errs
}

/// The JSON type name of a value, as the validator words it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
}

fn type_matches(t: &str, v: &Value) -> bool {
    match (t, v) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        ("", _) => true,
        _ => false,
    }
}

/// "spec.x in body" (or "body" at the root).
fn in_body(path: &str) -> String {
    if path.is_empty() {
        "body".to_string()
    } else {
        format!("{path} in body")
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError::invalid(path, v, detail)
}

fn type_error(path: &str, want: &str, v: &Value) -> FieldError {
    let actual = Value::String(type_name(v).into());
    invalid(
        path,
        &actual,
        format!(
            "{} must be of type {want}: \"{}\"",
            in_body(path),
            type_name(v)
        ),
    )
}

/// A number as Go's `%v` prints a float64 bound (1, 1.5).
fn num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

/// The errors of any value against `s`, reported at `path` (a default).
pub(super) fn walk_value(s: &Schema, v: &Value, path: &str) -> Errors {
    let mut errs = Vec::new();
    walk(s, v, path, &mut errs);
    errs
}

fn walk(s: &Schema, v: &Value, path: &str, errs: &mut Errors) {
    if v.is_null() {
        if s.nullable != Some(true) {
            if let Some(t) = &s.type_ {
                errs.push(type_error(path, t, v));
            }
        }
        return;
    }
    if s.x_kubernetes_int_or_string == Some(true) {
        let ok = v.is_string() || v.as_number().is_some_and(is_integer);
        if !ok {
            errs.push(type_error(path, "integer,string", v));
            return;
        }
    } else if let Some(t) = &s.type_ {
        if !type_matches(t, v) {
            errs.push(type_error(path, t, v));
            return;
        }
    }
    if let Some(allowed) = &s.enum_ {
        if !allowed.iter().any(|a| a.0 == *v) {
            let list: Vec<String> = allowed.iter().map(|a| render(&a.0)).collect();
            errs.push(FieldError {
                kind: ErrorType::NotSupported,
                field: path.to_string(),
                value: Some(render(v)),
                detail: format!("supported values: {}", list.join(", ")),
            });
        }
    }
    match v {
        Value::String(text) => string(s, text, v, path, errs),
        Value::Number(n) => number(s, n.as_f64().unwrap_or(0.0), v, path, errs),
        Value::Array(list) => array(s, list, v, path, errs),
        Value::Object(map) => object(s, map, v, path, errs),
        _ => {}
    }
    combinators(s, v, path, errs);
}

fn string(s: &Schema, text: &str, v: &Value, path: &str, errs: &mut Errors) {
    let chars = text.chars().count() as i64;
    if let Some(max) = s.max_length {
        if chars > max {
            errs.push(FieldError::too_long(path, max as usize));
        }
    }
    if let Some(min) = s.min_length {
        if chars < min {
            errs.push(invalid(
                path,
                v,
                format!("{} should be at least {min} chars long", in_body(path)),
            ));
        }
    }
    if let Some(pattern) = &s.pattern {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(text) => errs.push(invalid(
                path,
                v,
                format!("{} should match '{pattern}'", in_body(path)),
            )),
            Ok(_) => {}
            Err(_) => errs.push(invalid(
                path,
                v,
                format!("{} has an invalid pattern '{pattern}'", in_body(path)),
            )),
        }
    }
    if let Some(format) = &s.format {
        if !formats::valid(format, text) {
            errs.push(invalid(
                path,
                v,
                format!("{} must be of type {format}: {}", in_body(path), render(v)),
            ));
        }
    }
}

fn number(s: &Schema, n: f64, v: &Value, path: &str, errs: &mut Errors) {
    let body = in_body(path);
    if let Some(max) = s.maximum {
        if s.exclusive_maximum == Some(true) && n >= max {
            errs.push(invalid(
                path,
                v,
                format!("{body} should be less than {}", num(max)),
            ));
        } else if n > max {
            let m = num(max);
            errs.push(invalid(
                path,
                v,
                format!("{body} should be less than or equal to {m}"),
            ));
        }
    }
    if let Some(min) = s.minimum {
        if s.exclusive_minimum == Some(true) && n <= min {
            errs.push(invalid(
                path,
                v,
                format!("{body} should be greater than {}", num(min)),
            ));
        } else if n < min {
            let m = num(min);
            errs.push(invalid(
                path,
                v,
                format!("{body} should be greater than or equal to {m}"),
            ));
        }
    }
    if let Some(m) = s.multiple_of.filter(|m| *m > 0.0) {
        let q = n / m;
        if (q - q.round()).abs() > 1e-9 {
            errs.push(invalid(
                path,
                v,
                format!("{body} should be a multiple of {}", num(m)),
            ));
        }
    }
}

fn array(s: &Schema, list: &[Value], v: &Value, path: &str, errs: &mut Errors) {
    if let Some(max) = s.max_items {
        if list.len() as i64 > max {
            errs.push(FieldError::too_many(path, list.len(), max as usize));
        }
    }
    if let Some(min) = s.min_items {
        if (list.len() as i64) < min {
            let detail = format!("{} should have at least {min} items", in_body(path));
            errs.push(invalid(path, v, detail));
        }
    }
    let list_type = s.x_kubernetes_list_type.as_deref();
    if s.unique_items == Some(true) || list_type == Some("set") {
        for (i, item) in list.iter().enumerate() {
            if list[..i].contains(item) {
                errs.push(FieldError::duplicate(index(path, i), item));
            }
        }
    }
    if list_type == Some("map") {
        let keys = s.x_kubernetes_list_map_keys.clone().unwrap_or_default();
        let key_of = |item: &Value| -> Vec<Value> {
            keys.iter()
                .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                .collect()
        };
        for (i, item) in list.iter().enumerate() {
            let k = key_of(item);
            if list[..i].iter().any(|other| key_of(other) == k) {
                let shown: serde_json::Map<String, Value> =
                    keys.iter().cloned().zip(k.iter().cloned()).collect();
                errs.push(FieldError::duplicate(index(path, i), &Value::Object(shown)));
            }
        }
    }
    if let Some(item_schema) = items(s) {
        for (i, item) in list.iter().enumerate() {
            walk(item_schema, item, &index(path, i), errs);
        }
    }
}

fn object(
    s: &Schema,
    map: &serde_json::Map<String, Value>,
    v: &Value,
    path: &str,
    errs: &mut Errors,
) {
    if let Some(max) = s.max_properties {
        if map.len() as i64 > max {
            errs.push(FieldError::too_many(path, map.len(), max as usize));
        }
    }
    if let Some(min) = s.min_properties {
        if (map.len() as i64) < min {
            let detail = format!("{} should have at least {min} properties", in_body(path));
            errs.push(invalid(path, v, detail));
        }
    }
    for r in s.required.iter().flatten() {
        if !map.contains_key(r) {
            errs.push(FieldError::required(child(path, r), ""));
        }
    }
    if s.x_kubernetes_embedded_resource == Some(true) {
        for k in ["apiVersion", "kind"] {
            if map.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(child(path, k), "must not be empty"));
            }
        }
    }
    for (k, val) in map {
        if let Some(prop) = s.properties.as_ref().and_then(|p| p.get(k)) {
            walk(prop, val, &child(path, k), errs);
        } else if let Some(values) = additional(s) {
            walk(values, val, &key(path, k), errs);
        }
    }
}

fn combinators(s: &Schema, v: &Value, path: &str, errs: &mut Errors) {
    let passes = |sub: &Schema| {
        let mut e = Vec::new();
        walk(sub, v, path, &mut e);
        e.is_empty()
    };
    for sub in s.all_of.iter().flatten() {
        walk(sub, v, path, errs);
    }
    if let Some(any) = &s.any_of {
        if !any.iter().any(passes) {
            let detail = format!(
                "{} must validate at least one schema (anyOf)",
                in_body(path)
            );
            errs.push(invalid(path, v, detail));
        }
    }
    if let Some(one) = &s.one_of {
        if one.iter().filter(|sub| passes(sub)).count() != 1 {
            let detail = format!(
                "{} must validate one and only one schema (oneOf)",
                in_body(path)
            );
            errs.push(invalid(path, v, detail));
        }
    }
    if let Some(not) = &s.not {
        if passes(not) {
            let detail = format!("{} must not validate the schema (not)", in_body(path));
            errs.push(invalid(path, v, detail));
        }
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        serde_json::from_value(v).unwrap()
    }

    fn crontab() -> Schema {
        schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["cronSpec"],
            "properties": {
                "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                "image": {"type": "string", "maxLength": 10, "minLength": 2},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "maybe": {"type": "string", "nullable": true},
                "inner": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
            }}}}),
        )
    }

    fn messages(obj: Value) -> Vec<String> {
        let mut m: Vec<String> = validate(&crontab(), &obj)
            .iter()
            .map(ToString::to_string)
            .collect();
        m.sort();
        m
    }

    #[test]
    fn a_valid_object_has_no_errors() {
        let ok = json!({"apiVersion": "x/v1", "kind": "CronTab", "metadata": {"name": "a"}, "spec": {
            "cronSpec": "* * * * */5", "image": "img", "replicas": 3, "mode": "a", "port": "http",
            "when": "2026-11-26T10:00:00Z", "tags": ["x", "y"], "ports": [{"name": "a"}, {"name": "b"}],
            "labels": {"k": "v"}, "maybe": null, "inner": {"apiVersion": "v1", "kind": "Pod", "x": 1}}});
        assert_eq!(messages(ok), Vec::<String>::new());
    }

    #[test]
    fn errors_carry_kubernetes_paths_and_words() {
        let bad = json!({"spec": {"cronSpec": "bad", "image": "far-too-long-image", "replicas": "3", "mode": "c",
            "port": 1.5, "when": "yesterday", "tags": ["x", "x", "y"], "ports": [{"name": "a"}, {"name": "a"}],
            "labels": {"k": 1}, "inner": {"kind": "Pod"}}});
        assert_eq!(
            messages(bad),
            [
                "spec.cronSpec: Invalid value: \"bad\": spec.cronSpec in body should match '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$'",
                "spec.image: Too long: may not be more than 10 bytes",
                "spec.inner.apiVersion: Required value: must not be empty",
                "spec.labels[k]: Invalid value: \"integer\": spec.labels[k] in body must be of type string: \"integer\"",
                "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
                "spec.port: Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
                "spec.ports[1]: Duplicate value: {\"name\":\"a\"}",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.tags[1]: Duplicate value: \"x\"",
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"cronSpec": "* * * * *", "replicas": 0, "image": "i", "maybe": 1}})),
            [
                "spec.image: Invalid value: \"i\": spec.image in body should be at least 2 chars long",
                "spec.maybe: Invalid value: \"integer\": spec.maybe in body must be of type string: \"integer\"",
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ]
        );
        assert_eq!(
            messages(json!({"spec": {}})),
            ["spec.cronSpec: Required value"]
        );
        assert_eq!(
            messages(json!({"spec": {"cronSpec": "* * * * *", "replicas": 11}})),
            ["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]
        );
    }
}
