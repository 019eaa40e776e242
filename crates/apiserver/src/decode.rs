//! Request bodies: which media types are accepted, decoding them, and what
//! `fieldValidation` does with fields the kind does not have.
//!
//! ```text
//!  Content-Type ─▶ json | yaml | protobuf   (anything else: 415)
//!  body ─▶ Value ─▶ strategy.canonicalize (typed round trip) ─▶ stored form
//!                     └─ fields it dropped: Ignore │ Warn (Warning header) │ Strict (400)
//! ```

use crate::strategy;
use crate::warnings::Warnings;
use axum::http::{header, HeaderMap};
use minik8s_api::registry::ResourceInfo;
use minik8s_api::ApiError;
use serde_json::Value;

/// What create/update bodies may be sent as.
pub const BODY_MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    minik8s_wire::protobuf::MEDIA_TYPE,
];

/// What PATCH bodies may be sent as.
pub const PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
];

pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

/// The media type without parameters, lower case ("" when none was sent).
fn media_type(headers: &HeaderMap) -> String {
    let ct = content_type(headers);
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Decodes a JSON, YAML or protobuf request body into an object.
pub fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    decode_body_noting_duplicates(headers, body).map(|(v, _)| v)
}

/// [`decode_body`], and whether a JSON body sets some field twice (found
/// while parsing, so the common body without duplicates is parsed once;
/// [`duplicate_fields`] names them when there are).
pub fn decode_body_noting_duplicates(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Value, bool), ApiError> {
    let media = media_type(headers);
    let duplicates = std::cell::Cell::new(false);
    let v: Value = match media.as_str() {
        minik8s_wire::protobuf::MEDIA_TYPE => {
            return minik8s_wire::protobuf::decode_object(body)
                .map(|v| (v, false))
                .map_err(|e| ApiError::bad_request(format!("error decoding protobuf body: {e}")))
        }
        _ if body.iter().all(u8::is_ascii_whitespace)
            && BODY_MEDIA_TYPES.contains(&media.as_str()) =>
        {
            return Err(ApiError::bad_request("the request body is empty"))
        }
        "application/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
        "application/json" => {
            use serde::de::DeserializeSeed;
            let mut de = serde_json::Deserializer::from_slice(body);
            let v = JsonNotingDuplicates(&duplicates)
                .deserialize(&mut de)
                .and_then(|v| de.end().map(|()| v))
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "couldn't get version/kind; json parse error: {e}"
                    ))
                })?;
            v
        }
        _ => return Err(ApiError::unsupported_media_type(BODY_MEDIA_TYPES)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok((v, duplicates.get()))
}

/// Builds a JSON value as serde_json does (the last of duplicate keys wins,
/// in the first one's place), setting the flag when an object repeats a key.
struct JsonNotingDuplicates<'a>(&'a std::cell::Cell<bool>);

impl<'de> serde::de::DeserializeSeed<'de> for JsonNotingDuplicates<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for JsonNotingDuplicates<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(JsonNotingDuplicates(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(JsonNotingDuplicates(self.0))?;
            if out.insert(key, value).is_some() {
                self.0.set(true);
            }
        }
        Ok(Value::Object(out))
    }
}

/// `?fieldValidation=`: what a field the kind does not know does to a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Dropped silently (also the server's own writes).
    #[default]
    Ignore,
    /// Dropped, with a `Warning` header per field (Kubernetes' default).
    Warn,
    /// The write fails with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the parameter as sent with `options_kind` (CreateOptions,
    /// UpdateOptions, PatchOptions); absent means Warn.
    pub fn parse(value: Option<&str>, options_kind: &str) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "{options_kind}.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
            )),
        }
    }
}

/// Re-encodes through the kind's typed struct (its strategy's
/// canonicalization): rejects wrong types, and reports the fields the typed
/// decode dropped as `validation` says. `canonical` is the strategy's
/// canonicalization of `obj` when validating it made one already.
pub fn normalize(
    info: &ResourceInfo,
    strategy: &dyn strategy::Strategy,
    obj: Value,
    canonical: Option<Result<Value, String>>,
    validation: FieldValidation,
    warnings: &Warnings,
) -> Result<Value, ApiError> {
    let bad = |e: String| ApiError::bad_request(format!("{} in body: {e}", info.kind));
    // Base64 wrapped over lines decodes in Go: retried without the breaks
    // (only when the object does not decode, so the common path pays nothing).
    let retry = |mut obj: Value, e: String| {
        if minik8s_wire::protobuf::unwrap_base64(&mut obj) {
            strategy.canonicalize(obj).map_err(bad)
        } else {
            Err(bad(e))
        }
    };
    let canonical = canonical.or_else(|| strategy.canonicalize_borrowed(&obj));
    if validation == FieldValidation::Ignore {
        return match canonical {
            Some(Ok(out)) => Ok(out),
            Some(Err(e)) => retry(obj, e),
            None => strategy.canonicalize(obj).map_err(bad),
        };
    }
    // The input is kept to find the unknown fields: decoded from where it
    // lies when the strategy can, else from a copy.
    let (input, out) = match canonical {
        Some(Ok(out)) => (obj, out),
        Some(Err(e)) => (obj.clone(), retry(obj, e)?),
        None => (obj.clone(), strategy.canonicalize(obj).map_err(bad)?),
    };
    let mut unknown = Vec::new();
    find_unknown(&input, &out, &mut Vec::new(), &mut unknown);
    let unknown: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if unknown.is_empty() {
        return Ok(out);
    }
    if validation == FieldValidation::Warn {
        for w in unknown {
            warnings.push(w);
        }
        return Ok(out);
    }
    Err(ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
        info.kind,
        info.version,
        info.kind,
        unknown.join(", ")
    )))
}

/// The fields a JSON body sets twice (`metadata.name`, `spec.containers[0].image`),
/// which Go's decoder reports as strict decoding errors (the last value wins
/// otherwise). Empty for a body that is not JSON.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    use serde::de::DeserializeSeed;
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Duplicates {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    out
}

/// A walk of a JSON document that records the keys each object repeats.
struct Duplicates<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Duplicates<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Duplicates {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Duplicates {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Fields present in `input` that the typed decode dropped. The path of the
/// walk is a stack of segments, joined only for a field that is reported:
/// every write passes here, and nearly all have nothing to report.
fn find_unknown(input: &Value, output: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                match o.get(k) {
                    None if !v.is_null() => out.push(join_path(path, Some(k))),
                    Some(ov) if ov.is_object() || ov.is_array() => {
                        path.push(k.clone());
                        find_unknown(v, ov, path, out);
                        path.pop();
                    }
                    _ => {}
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (idx, (iv, ov)) in i.iter().zip(o).enumerate() {
                if ov.is_object() || ov.is_array() {
                    path.push(format!("[{idx}]"));
                    find_unknown(iv, ov, path, out);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// `spec.containers[0].bogus` from its segments (index segments are `[n]`).
fn join_path(path: &[String], last: Option<&str>) -> String {
    let mut joined = String::new();
    for seg in path.iter().map(String::as_str).chain(last) {
        if !joined.is_empty() && !seg.starts_with('[') {
            joined.push('.');
        }
        joined.push_str(seg);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_named_by_their_path_inside_lists() {
        let pods = minik8s_api::registry::of::<minik8s_api::k8s::api::core::v1::Pod>();
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "bogus": 1,
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"},
                {"name": "d", "image": "i", "ports": [{"containerPort": 80, "porty": 1}]}]}});
        let err = normalize(
            pods,
            strategy::builtin(pods),
            pod.clone(),
            None,
            FieldValidation::Strict,
            &Warnings::default(),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.ends_with(
            "strict decoding error: unknown field \"bogus\", unknown field \"spec.containers[1].ports[0].porty\""
        ), "{}", err.message);
        let warnings = Warnings::default();
        let out = normalize(
            pods,
            strategy::builtin(pods),
            pod,
            None,
            FieldValidation::Warn,
            &warnings,
        )
        .unwrap();
        assert!(out.get("bogus").is_none());
        assert_eq!(warnings.take().len(), 2);
    }

    fn headers(ct: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(ct) = ct {
            h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        }
        h
    }

    #[test]
    fn bodies_only_in_kubernetes_media_types() {
        let body = br#"{"kind":"ConfigMap"}"#;
        for ct in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
        ] {
            assert!(decode_body(&headers(ct), body).is_ok(), "{ct:?}");
        }
        assert!(decode_body(&headers(Some("application/yaml")), b"kind: ConfigMap").is_ok());
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/cbor",
        ] {
            let e = decode_body(&headers(Some(ct)), body).unwrap_err();
            assert_eq!(e.code, 415, "{ct}");
            assert_eq!(e.message, "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf");
        }
        assert_eq!(decode_body(&headers(None), b"  ").unwrap_err().code, 400);
        assert_eq!(decode_body(&headers(None), b"[1]").unwrap_err().code, 400);
    }

    #[test]
    fn base64_wrapped_over_lines_decodes_as_in_go() {
        let secrets = minik8s_api::registry::of::<minik8s_api::k8s::api::core::v1::Secret>();
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": "aGVsbG8g\nd29ybGQ=\n", "tls.key": "a2V5\r\n"}});
        for validation in [FieldValidation::Ignore, FieldValidation::Strict] {
            let out = normalize(
                secrets,
                strategy::builtin(secrets),
                secret.clone(),
                None,
                validation,
                &Warnings::default(),
            )
            .unwrap();
            assert_eq!(out["data"]["tls.crt"], "aGVsbG8gd29ybGQ=");
            assert_eq!(out["data"]["tls.key"], "a2V5");
        }
        let broken = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "data": {"k": "not base64!\n"}});
        let e = normalize(
            secrets,
            strategy::builtin(secrets),
            broken,
            None,
            FieldValidation::Strict,
            &Warnings::default(),
        )
        .unwrap_err();
        assert_eq!(e.code, 400, "{}", e.message);
    }

    #[test]
    fn json_bodies_decode_as_serde_json_does_and_note_duplicates() {
        let h = headers(Some("application/json"));
        let body = br#"{"kind": "ConfigMap", "n": [1, -2, 3.5, 18446744073709551615, null, true],
            "data": {"a": "1", "b": "2", "a": "3"}}"#;
        let (v, dup) = decode_body_noting_duplicates(&h, body).unwrap();
        let native: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(v, native);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            serde_json::to_string(&native).unwrap(),
            "same key order"
        );
        assert!(dup);
        let (_, dup) =
            decode_body_noting_duplicates(&h, br#"{"a": {"b": 1}, "c": {"b": 2}}"#).unwrap();
        assert!(!dup);
        assert_eq!(decode_body(&h, b"{} x").unwrap_err().code, 400);
    }

    #[test]
    fn duplicate_fields_are_named_by_their_path() {
        let body = br#"{"metadata": {"name": "a", "name": "b"},
            "spec": {"containers": [{"name": "c", "image": "x", "image": "y"}]}, "spec": {}}"#;
        assert_eq!(
            duplicate_fields(body),
            ["metadata.name", "spec.containers[0].image", "spec"]
        );
        assert!(duplicate_fields(br#"{"a": {"b": 1}, "c": {"b": 2}}"#).is_empty());
        assert!(duplicate_fields(b"kind: ConfigMap").is_empty());
    }

    #[test]
    fn field_validation_values() {
        assert_eq!(
            FieldValidation::parse(None, "CreateOptions").unwrap(),
            FieldValidation::Warn
        );
        assert_eq!(
            FieldValidation::parse(Some("Strict"), "CreateOptions").unwrap(),
            FieldValidation::Strict
        );
        let e = FieldValidation::parse(Some("Frob"), "PatchOptions").unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (422, "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Frob\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""));
    }
}
