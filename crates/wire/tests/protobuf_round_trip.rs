//! No field is lost in protobuf: every kind the server serves in protobuf is
//! filled with every field its k8s-openapi type has (read from k8s-openapi's
//! generated sources, independently of our protobuf schema table), encoded
//! to protobuf, decoded back, and compared with what went in. A field the
//! table does not carry, or carries under the wrong name (Go's embedded
//! structs, `json:",inline"`), shows up here by its path, unless the
//! server refuses that field (Kubernetes 1.37 fields minik8s does not act
//! on, `validation/unsupported.rs`).

mod common;

use common::{module_of, package_src, rust_files};
use minik8s_wire::protobuf;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// One k8s-openapi struct: its fields as (JSON name, Rust type).
type Struct = Vec<(String, String)>;

/// Every k8s-openapi struct of the release, by `module.Name`, lower case.
fn structs(root: &Path) -> BTreeMap<String, Struct> {
    let mut out = BTreeMap::new();
    for file in rust_files(root) {
        let src = std::fs::read_to_string(&file).unwrap();
        let Some(decl) = src.lines().find_map(|l| l.strip_prefix("pub struct ")) else {
            continue;
        };
        // `pub struct X(pub serde_json::Value);`: a Go struct without fields.
        let name = decl
            .split(['(', '{'])
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        // Rust field name → type, from the struct's body.
        let mut types = BTreeMap::new();
        let mut in_body = false;
        for line in src.lines() {
            if line.starts_with("pub struct ") {
                in_body = true;
            } else if in_body && line == "}" {
                break;
            } else if let Some(decl) = line.strip_prefix("    pub ").filter(|_| in_body) {
                if let Some((field, ty)) = decl.split_once(": ") {
                    types.insert(field.to_string(), ty.trim_end_matches(',').to_string());
                }
            }
        }
        // JSON name → Rust field name, from the generated field visitor.
        let mut fields = Vec::new();
        for line in src.lines() {
            let t = line.trim();
            if let Some((json, key)) = t.split_once("\" => Field::Key_") {
                if let (Some(json), Some(ty)) =
                    (json.strip_prefix('"'), types.get(key.trim_end_matches(',')))
                {
                    fields.push((json.to_string(), ty.clone()));
                }
            }
        }
        out.insert(
            format!("{}.{name}", module_of(root, &file)).to_lowercase(),
            fields,
        );
    }
    out
}

/// The `T` of `Wrapper<T>` when `ty` is one.
fn inner<'a>(ty: &'a str, wrapper: &str) -> Option<&'a str> {
    ty.strip_prefix(wrapper)?.strip_suffix('>')
}

/// A value of Rust type `ty` with every field set (nested structs filled
/// down to `depth`), or None for a struct too deep to fill.
fn fill(all: &BTreeMap<String, Struct>, ty: &str, depth: usize) -> Option<Value> {
    if let Some(t) = inner(ty, "Option<").or_else(|| inner(ty, "std::boxed::Box<")) {
        return fill(all, t, depth);
    }
    if let Some(t) = inner(ty, "std::vec::Vec<") {
        return Some(json!([fill(all, t, depth)?]));
    }
    if let Some(t) = inner(ty, "std::collections::BTreeMap<std::string::String, ") {
        return Some(json!({"key-1": fill(all, t, depth)?}));
    }
    let short = ty.rsplit("::").next().unwrap_or(ty);
    Some(match short {
        "String" => json!("text-1"),
        "i32" | "i64" => json!(7),
        "f64" => json!(1.5),
        "bool" => json!(true),
        "ByteString" => json!("aGVsbG8="),
        "Quantity" => json!("250m"),
        "IntOrString" => json!("http"),
        "Time" => json!("2026-01-02T03:04:05Z"),
        "MicroTime" => json!("2026-01-02T03:04:05.123456Z"),
        "RawExtension" => json!({"apiVersion": "v1", "kind": "ConfigMap"}),
        "FieldsV1" => json!({"f:metadata": {"f:labels": {}}}),
        "JSON" => json!({"any": ["json", 1]}),
        "JSONSchemaPropsOrArray" => json!({"type": "string"}),
        "JSONSchemaPropsOrBool" => json!(true),
        "JSONSchemaPropsOrStringArray" => json!(["a"]),
        "Value" => json!({"any": "json"}),
        _ => {
            if depth == 0 {
                return None;
            }
            let path = ty.trim_start_matches("crate::").replace("::", ".");
            let fields = all
                .get(&path.to_lowercase())
                .unwrap_or_else(|| panic!("no k8s-openapi struct {path}"));
            let mut obj = Map::new();
            for (json, field_ty) in fields {
                if let Some(v) = fill(all, field_ty, depth - 1) {
                    obj.insert(json.clone(), v);
                }
            }
            Value::Object(obj)
        }
    })
}

/// Paths where `got` differs from `want` (missing, extra or changed).
fn differences(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    None => out.push(format!("{path}.{k} lost")),
                    Some(gv) => differences(wv, gv, &format!("{path}.{k}"), out),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k} appeared"));
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                differences(wv, gv, &format!("{path}[{i}]"), out);
            }
        }
        _ if want != got => out.push(format!("{path}: sent {want}, got {got}")),
        _ => {}
    }
}

#[test]
fn every_field_of_every_served_kind_survives_protobuf() {
    let root = package_src("k8s-openapi").join("v1_37");
    let all = structs(&root);
    let schema = protobuf::Schema::get();
    let mut lost = Vec::new();
    let mut kinds = 0;
    for info in minik8s_api::REGISTRY {
        let api_version = info.api_version();
        let Some(message) = schema.message_for(&api_version, &info.kind) else {
            continue; // minik8s' own kinds and LWS stay JSON
        };
        let ty = format!("crate::{message}").replace('.', "::");
        let Some(Value::Object(mut obj)) = fill(&all, &ty, 8) else {
            panic!("{message}: no k8s-openapi struct to fill");
        };
        obj.insert("apiVersion".into(), json!(api_version));
        obj.insert("kind".into(), json!(info.kind));
        let sent = Value::Object(obj);
        let bytes = protobuf::encode_object(&sent)
            .unwrap_or_else(|e| panic!("{message}: encoding: {e}"))
            .expect("a protobuf message");
        let back =
            protobuf::decode_object(&bytes).unwrap_or_else(|e| panic!("{message}: decoding: {e}"));
        let mut lost_here = Vec::new();
        differences(&sent, &back, "", &mut lost_here);
        // What protobuf cannot carry must be what the server refuses (422):
        // Kubernetes 1.37 fields minik8s does not act on.
        let mut unsupported = Vec::new();
        minik8s_validation::unsupported::validate_unsupported(&info.kind, &sent, &mut unsupported);
        let refused: Vec<String> = unsupported
            .into_iter()
            .filter(|e| e.to_string().contains("is not supported by minik8s"))
            .map(|e| format!(".{}", e.field))
            .collect();
        // A refused field covers what lies under it.
        let covered = |l: &str| {
            let field = l.trim_end_matches(" lost");
            refused.iter().any(|r| {
                field == r
                    || field.starts_with(&format!("{r}."))
                    || field.starts_with(&format!("{r}["))
            })
        };
        lost.extend(
            lost_here
                .into_iter()
                .filter(|l| !covered(l))
                .map(|l| format!("{}{l}", info.kind)),
        );
        kinds += 1;
    }
    assert!(kinds > 30, "only {kinds} kinds have protobuf messages");
    assert!(
        lost.is_empty(),
        "{} fields do not survive protobuf:\n{}",
        lost.len(),
        lost.join("\n")
    );
}
