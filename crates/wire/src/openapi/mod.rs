//! OpenAPI schemas of the built-in kinds, for `kubectl explain` and for
//! clients that read them (kubectl's client-side apply takes its list merge
//! keys from here).
//!
//! Nothing is written by hand but the patch metadata: a definition's fields
//! and their types come from the protobuf schema table (`protobuf/schema.txt`,
//! itself derived from k8s-pb), descriptions and required fields from
//! `docs.txt` (derived from k8s-openapi's doc comments by
//! `tests/openapi_docs.rs`). Definitions are named as Kubernetes names them
//! (`io.k8s.api.core.v1.Pod`).

mod lws;
mod patch_meta;
mod serverless;

use crate::protobuf::schema::{Cardinality, Schema, Type};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

const DOCS: &str = include_str!("docs.txt");

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Which OpenAPI version a schema is written for: they differ only in where
/// references point and how a reference carries a description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    V2,
    V3,
}

impl Flavor {
    fn reference(self, definition: &str, description: Option<&str>) -> Value {
        match self {
            Flavor::V2 => {
                let mut v = json!({"$ref": format!("#/definitions/{definition}")});
                if let Some(d) = description {
                    v["description"] = json!(d);
                }
                v
            }
            // OpenAPI 3 ignores a `$ref`'s siblings: the description wraps it.
            Flavor::V3 => {
                let mut v =
                    json!({"allOf": [{"$ref": format!("#/components/schemas/{definition}")}]});
                if let Some(d) = description {
                    v["description"] = json!(d);
                }
                v
            }
        }
    }
}

#[derive(Default)]
struct Doc {
    description: String,
    /// json name → (required, description)
    fields: HashMap<&'static str, (bool, String)>,
}

fn docs() -> &'static HashMap<&'static str, Doc> {
    static DOCS_TABLE: OnceLock<HashMap<&'static str, Doc>> = OnceLock::new();
    DOCS_TABLE.get_or_init(|| {
        let mut out: HashMap<&'static str, Doc> = HashMap::new();
        let mut current: Option<&'static str> = None;
        for line in DOCS.lines().filter(|l| !l.starts_with('#')) {
            if let Some(rest) = line.strip_prefix("D ") {
                let (name, description) = rest.split_once('\t').unwrap_or((rest, ""));
                out.insert(
                    name,
                    Doc {
                        description: unescape(description),
                        fields: HashMap::new(),
                    },
                );
                current = Some(name);
            } else if let (Some(rest), Some(def)) = (line.strip_prefix("F "), current) {
                let mut parts = rest.splitn(3, '\t');
                let (Some(json), Some(req), doc) = (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                if let Some(d) = out.get_mut(def) {
                    d.fields
                        .insert(json, (req == "r", unescape(doc.unwrap_or(""))));
                }
            }
        }
        out
    })
}

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n")
}

/// `api.core.v1.Pod` → `io.k8s.api.core.v1.Pod`.
pub fn definition_name(message: &str) -> String {
    if message.starts_with("io.") {
        return message.to_string();
    }
    match message.strip_prefix("apiextensions_apiserver.") {
        Some(rest) => format!("io.k8s.apiextensions-apiserver.{rest}"),
        None => format!("io.k8s.{message}"),
    }
}

/// Messages whose JSON form is not their protobuf shape: a definition with a
/// primitive type, as Kubernetes defines them.
fn primitive(message: &str) -> Option<Value> {
    Some(match message {
        "apimachinery.pkg.apis.meta.v1.Time" | "apimachinery.pkg.apis.meta.v1.MicroTime" => {
            json!({"type": "string", "format": "date-time"})
        }
        "apimachinery.pkg.util.intstr.IntOrString" => {
            json!({"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": true})
        }
        "apimachinery.pkg.api.resource.Quantity" => json!({"type": "string"}),
        "apimachinery.pkg.apis.meta.v1.Duration" => json!({"type": "string"}),
        "apimachinery.pkg.runtime.RawExtension" | "apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            json!({"type": "object"})
        }
        _ => return None,
    })
}

fn scalar(ty: Type) -> Value {
    match ty {
        Type::String => json!({"type": "string"}),
        Type::Bytes => json!({"type": "string", "format": "byte"}),
        Type::Int32 => json!({"type": "integer", "format": "int32"}),
        Type::Int64 => json!({"type": "integer", "format": "int64"}),
        Type::Bool => json!({"type": "boolean"}),
        Type::Double => json!({"type": "number", "format": "double"}),
        Type::Float => json!({"type": "number", "format": "float"}),
        Type::Message => json!({"type": "object"}),
    }
}

/// The message (or written-out definition) that describes a kind.
pub fn message_for(api_version: &str, kind: &str) -> Option<String> {
    match (api_version, kind) {
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet") => {
            return Some(format!("{}{kind}", lws::PREFIX));
        }
        ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet" | "DisaggregatedSetRoleScaler")
        | ("scheduling.volcano.sh/v1beta1", "PodGroup") => {
            return Some(format!("{}{kind}", lws::DS_PREFIX));
        }
        ("serverless.minik8s.io/v1alpha1", "Function" | "Workflow" | "WorkflowRun") => {
            return Some(format!("{}{kind}", serverless::PREFIX));
        }
        _ => {}
    }
    let schema = Schema::get();
    schema.message_for(api_version, kind).or_else(|| {
        // A kind GA in a release newer than k8s-pb's messages (the v1
        // MutatingAdmissionPolicy): its newest pre-release version has the
        // same fields. Only its schema is read so; protobuf stays off for it.
        let (group, _) = api_version.split_once('/')?;
        ["v1beta2", "v1beta1", "v1alpha1"]
            .iter()
            .find_map(|v| schema.message_for(&format!("{group}/{v}"), kind))
    })
}

fn written_out(name: &str) -> Option<&'static lws::Definition> {
    if let Some(short) = name.strip_prefix(lws::PREFIX) {
        return lws::DEFINITIONS.iter().find(|d| d.0 == short);
    }
    if let Some(short) = name.strip_prefix(serverless::PREFIX) {
        return serverless::DEFINITIONS.iter().find(|d| d.0 == short);
    }
    let short = name.strip_prefix(lws::DS_PREFIX)?;
    lws::DS_DEFINITIONS.iter().find(|d| d.0 == short)
}

/// A written-out definition a field type names (`lws:<Name>`, `ds:<Name>`, `fn:<Name>`).
fn written_out_ref(ty: &str) -> Option<String> {
    if let Some(n) = ty.strip_prefix("lws:") {
        return Some(format!("{}{n}", lws::PREFIX));
    }
    if let Some(n) = ty.strip_prefix("fn:") {
        return Some(format!("{}{n}", serverless::PREFIX));
    }
    ty.strip_prefix("ds:")
        .map(|n| format!("{}{n}", lws::DS_PREFIX))
}

/// The messages a definition refers to.
pub fn references(message: &str) -> Vec<String> {
    if let Some((_, _, fields)) = written_out(message) {
        return fields
            .iter()
            .filter_map(|(_, ty, _, _)| {
                let ty = ty.trim_start_matches("[]").trim_start_matches("map:");
                ty.strip_prefix("msg:")
                    .map(str::to_string)
                    .or_else(|| written_out_ref(ty))
            })
            .collect();
    }
    let Some(m) = Schema::get().message(message) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for f in m.fields.iter().filter(|f| f.ty == Type::Message) {
        if f.inline {
            // An inlined message has no definition: its fields are ours.
            out.extend(references(f.message));
        } else {
            out.push(f.message.to_string());
        }
    }
    out
}

/// A written-out definition's schema.
fn written_out_definition(def: &lws::Definition, flavor: Flavor) -> Value {
    let (_, description, fields) = def;
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (json, ty, req, doc) in fields.iter() {
        if *req {
            required.push(*json);
        }
        let (list, ty) = match ty.strip_prefix("[]") {
            Some(t) => (true, t),
            None => (false, *ty),
        };
        let (map, ty) = match ty.strip_prefix("map:") {
            Some(t) => (true, t),
            None => (false, ty),
        };
        let target = ty
            .strip_prefix("msg:")
            .map(definition_name)
            .or_else(|| written_out_ref(ty));
        let mut prop = match (target, list) {
            (Some(t), false) if map => {
                json!({"type": "object", "additionalProperties": flavor.reference(&t, None), "description": doc})
            }
            (Some(t), false) => flavor.reference(&t, Some(doc)),
            (Some(t), true) => {
                json!({"type": "array", "items": flavor.reference(&t, None), "description": doc})
            }
            (None, list) => {
                let item = scalar(match ty {
                    "int32" => Type::Int32,
                    "int64" => Type::Int64,
                    "boolean" => Type::Bool,
                    "double" => Type::Double,
                    _ => Type::String,
                });
                let mut s = if list {
                    json!({"type": "array", "items": item})
                } else {
                    item
                };
                s["description"] = json!(doc);
                s
            }
        };
        if *json == "conditions" {
            prop["x-kubernetes-list-type"] = json!("map");
            prop["x-kubernetes-list-map-keys"] = json!(["type"]);
        }
        if *json == "roles" || *json == "roleStatuses" {
            prop["x-kubernetes-list-type"] = json!("map");
            prop["x-kubernetes-list-map-keys"] = json!(["name"]);
        }
        properties.insert(json.to_string(), prop);
    }
    let mut s = json!({"type": "object", "description": description, "properties": properties});
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    s
}

/// The schema of one message's definition.
pub fn definition(message: &str, flavor: Flavor) -> Option<Value> {
    if let Some(def) = written_out(message) {
        return Some(written_out_definition(def, flavor));
    }
    let doc = docs().get(definition_name(message).as_str());
    let mut schema = match primitive(message) {
        Some(p) => p,
        None => {
            let msg = Schema::get().message(message)?;
            let mut properties = Map::new();
            let mut required = Vec::new();
            add_properties(message, msg, doc, flavor, &mut properties, &mut required);
            let mut s = json!({"type": "object", "properties": properties});
            if !required.is_empty() {
                s["required"] = json!(required);
            }
            s
        }
    };
    if let Some(d) = doc.filter(|d| !d.description.is_empty()) {
        schema["description"] = json!(d.description);
    }
    Some(schema)
}

/// The properties of `msg` (the definition of `message`, described by
/// `doc`), with the fields of the messages it inlines as its own, as Go's
/// JSON writes them.
fn add_properties(
    message: &str,
    msg: &crate::protobuf::schema::Message,
    doc: Option<&Doc>,
    flavor: Flavor,
    properties: &mut Map<String, Value>,
    required: &mut Vec<&'static str>,
) {
    for f in &msg.fields {
        if f.inline {
            if let Some(inner) = Schema::get().message(f.message) {
                add_properties(message, inner, doc, flavor, properties, required);
            }
            continue;
        }
        let (req, description) = doc
            .and_then(|d| d.fields.get(f.json))
            .map(|(r, d)| (*r, Some(d.as_str())))
            .unwrap_or((false, None));
        if req {
            required.push(f.json);
        }
        let item = if f.ty == Type::Message {
            flavor.reference(&definition_name(f.message), None)
        } else {
            scalar(f.ty)
        };
        let mut prop = match f.card {
            Cardinality::One if f.ty == Type::Message => {
                flavor.reference(&definition_name(f.message), description)
            }
            Cardinality::One => item,
            Cardinality::List => json!({"type": "array", "items": item}),
            Cardinality::Map => json!({"type": "object", "additionalProperties": item}),
        };
        if f.card != Cardinality::One || f.ty != Type::Message {
            if let Some(d) = description {
                prop["description"] = json!(d);
            }
        }
        patch_meta::annotate(message, f.json, &mut prop);
        properties.insert(f.json.to_string(), prop);
    }
}

/// The definitions of `kinds` ((group, version, kind) with their message) and
/// of everything they reference, each kind's carrying its
/// `x-kubernetes-group-version-kind`.
pub fn definitions(kinds: &[(&str, &str, &str, String)], flavor: Flavor) -> Map<String, Value> {
    let mut out = closure(kinds.iter().map(|k| k.3.clone()).collect(), flavor);
    for (group, version, kind, message) in kinds {
        if let Some(def) = out.get_mut(&definition_name(message)) {
            // Every kind's object says what it is (TypeMeta, which no message holds).
            if let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut) {
                add_type_meta(props);
                props.sort_keys();
            }
            let gvk = json!({"group": group, "version": version, "kind": kind});
            match def.get_mut("x-kubernetes-group-version-kind") {
                Some(Value::Array(list)) => list.push(gvk),
                _ => def["x-kubernetes-group-version-kind"] = json!([gvk]),
            }
        }
    }
    out
}

/// `apiVersion` and `kind`, which every kind's object has and no message holds.
fn add_type_meta(props: &mut Map<String, Value>) {
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": API_VERSION_DOC}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": KIND_DOC}),
    );
}

/// The message that is every object's `metadata`.
const OBJECT_META: &str = "apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The definitions of custom resources, as Kubernetes publishes a CRD's
/// schema: named `<reversed group>.<version>.<Kind>`, with `apiVersion`,
/// `kind` and a `metadata` that refers to ObjectMeta (whose definitions come along).
pub fn custom_definitions(
    kinds: &[(&str, &str, &str, Value)],
    flavor: Flavor,
) -> Map<String, Value> {
    let mut out = if kinds.is_empty() {
        Map::new()
    } else {
        closure(vec![OBJECT_META.to_string()], flavor)
    };
    for (group, version, kind, schema) in kinds {
        let mut def = schema.clone();
        if !def.is_object() {
            def = json!({"type": "object"});
        }
        if !def["properties"].is_object() {
            def["properties"] = json!({});
        }
        let props = def["properties"].as_object_mut().expect("set above");
        add_type_meta(props);
        props.insert(
            "metadata".into(),
            flavor.reference(&definition_name(OBJECT_META), Some("Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")),
        );
        props.sort_keys();
        def["x-kubernetes-group-version-kind"] =
            json!([{"group": group, "version": version, "kind": kind}]);
        let reversed: Vec<&str> = group.split('.').rev().collect();
        out.insert(format!("{}.{version}.{kind}", reversed.join(".")), def);
    }
    out
}

/// The definitions of `messages` and of every message they refer to.
fn closure(messages: Vec<String>, flavor: Flavor) -> Map<String, Value> {
    let mut seen = BTreeSet::new();
    let mut stack = messages;
    while let Some(m) = stack.pop() {
        if !seen.insert(m.clone()) || primitive(&m).is_some() {
            continue;
        }
        stack.extend(references(&m));
    }
    let mut out = Map::new();
    for m in &seen {
        if let Some(def) = definition(m, flavor) {
            out.insert(definition_name(m), def);
        }
    }
    out
}

#[cfg(test)]
mod tests;
