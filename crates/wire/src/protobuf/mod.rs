//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! translated to and from the JSON objects minik8s stores.
//!
//! ```text
//!  kubectl create ... ──protobuf──▶ apiserver: decode_object ──JSON──▶ strategy, store
//!  client-go (Accept: protobuf,json) ◀──protobuf── encode_object ◀──JSON── stored object
//! ```
//!
//! On the wire an object is the 4-byte magic `k8s\0` and a `runtime.Unknown`
//! message: `typeMeta {apiVersion, kind}`, then `raw`, the object's own
//! message (e.g. `k8s.io.api.apps.v1.Deployment`). Field numbers and types
//! come from the `k8s-pb` crate's message types through [`schema`]; nothing
//! here spells a Kubernetes message by hand except the few apimachinery types
//! whose JSON differs from their fields (see [`convert`]).

mod convert;
pub(crate) mod schema;
mod wire;

use serde_json::Value;
use wire::{put_bytes, Reader, Wire};

pub use schema::Schema;

/// The media type kubectl's typed clients send and ask for first.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every protobuf object starts with these bytes.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtobufError {
    #[error("the protobuf body does not start with the k8s magic prefix")]
    NoMagic,
    #[error("the protobuf body is truncated in {0}")]
    Truncated(&'static str),
    #[error("malformed protobuf: {0}")]
    Malformed(String),
    #[error("no protobuf message is known for kind {kind} in {api_version}")]
    UnknownKind { api_version: String, kind: String },
}

/// An object from a protobuf body: its JSON form with `apiVersion` and `kind`.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let unknown = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut reader = Reader::new(unknown);
    while let Some((tag, wire)) = reader.field()? {
        match (tag, wire) {
            (1, Wire::Bytes(type_meta)) => {
                let mut tm = Reader::new(type_meta);
                while let Some((t, w)) = tm.field()? {
                    let text = |b: &[u8]| {
                        String::from_utf8(b.to_vec())
                            .map_err(|_| ProtobufError::Malformed("typeMeta is not UTF-8".into()))
                    };
                    match (t, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    if api_version.is_empty() || kind.is_empty() {
        return Err(ProtobufError::Malformed(
            "the object has no apiVersion and kind in its typeMeta".into(),
        ));
    }
    let schema = Schema::get();
    let message =
        schema
            .message_for(&api_version, &kind)
            .ok_or_else(|| ProtobufError::UnknownKind {
                api_version: api_version.clone(),
                kind: kind.clone(),
            })?;
    let Value::Object(fields) = convert::to_json(schema, &message, raw, 0)? else {
        return Err(ProtobufError::Malformed(format!("{kind} is not an object")));
    };
    let mut obj = serde_json::Map::new();
    obj.insert("apiVersion".into(), Value::String(api_version));
    obj.insert("kind".into(), Value::String(kind));
    obj.extend(fields);
    Ok(Value::Object(obj))
}

/// The protobuf encoding of a JSON object, or `None` when its kind has no
/// protobuf message (custom resources and minik8s' own kinds stay JSON).
pub fn encode_object(obj: &Value) -> Result<Option<Vec<u8>>, ProtobufError> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let schema = Schema::get();
    let Some(message) = schema.message_for(api_version, kind) else {
        return Ok(None);
    };
    let mut raw = Vec::new();
    convert::from_json(schema, &message, obj, &mut raw, 0)?;
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, &raw);
    Ok(Some(out))
}

/// Whether an `Accept` header asks for protobuf before anything else (as
/// client-go's typed clients do: `application/vnd.kubernetes.protobuf,
/// application/json`). Tables are only served as JSON.
pub fn preferred(accept: &str) -> bool {
    let first = accept.split(',').next().unwrap_or_default();
    let mut parts = first.split(';').map(str::trim);
    parts.next() == Some(MEDIA_TYPE) && !parts.any(|p| p.starts_with("as="))
}

#[cfg(test)]
mod tests;

/// Removes the line breaks from the base64 strings of `obj`'s byte fields
/// (`Secret.data`, `ConfigMap.binaryData`, a webhook's `caBundle`...), as
/// Go's base64 decoder skips `\r` and `\n`: the TLS Secret of the Kubernetes
/// documentation wraps its data at 76 columns. Returns whether anything
/// changed. Byte fields are those of type `bytes` in the kind's message.
pub fn unwrap_base64(obj: &mut Value) -> bool {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let schema = Schema::get();
    match schema.message_for(&api_version, &kind) {
        Some(message) => convert::unwrap_base64(schema, &message, obj, 0),
        None => false,
    }
}
