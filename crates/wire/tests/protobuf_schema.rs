//! The protobuf schema table (`src/protobuf/schema.txt`) is derived, never
//! written by hand: field tags and wire types come from the `k8s-pb` crate's
//! prost message types, JSON field names from `k8s-openapi`'s serde code.
//! This test derives it again from the sources cargo holds and fails when the
//! checked-in table differs (`UPDATE_PROTOBUF_SCHEMA=1 cargo test -p
//! minik8s-wire --test protobuf_schema` rewrites it).

mod common;

use common::{module_of, package_src, rust_files};
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn checked_in_schema_is_derived_from_k8s_pb() {
    let pb = package_src("k8s-pb");
    let openapi = package_src("k8s-openapi").join("v1_37");
    let generated = generate(&pb, &openapi);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf/schema.txt");
    if std::env::var_os("UPDATE_PROTOBUF_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is not what k8s-pb and k8s-openapi give; regenerate it with \
         UPDATE_PROTOBUF_SCHEMA=1 cargo test -p minik8s-wire --test protobuf_schema",
        path.display()
    );
}

struct Field {
    tag: u32,
    rust: String,
    card: &'static str,
    ty: String,
    message: Option<String>,
}

fn generate(pb: &Path, openapi: &Path) -> String {
    let mut messages: BTreeMap<String, Vec<Field>> = BTreeMap::new();
    let mut versions: BTreeMap<String, String> = BTreeMap::new();
    for file in rust_files(pb) {
        let module = module_of(pb, &file);
        if module.is_empty() {
            continue;
        }
        parse_pb_module(
            &module,
            &std::fs::read_to_string(&file).unwrap(),
            &mut messages,
            &mut versions,
        );
    }
    let mut json_names: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in rust_files(openapi) {
        let module = module_of(openapi, &file);
        parse_openapi_file(
            &module,
            &std::fs::read_to_string(&file).unwrap(),
            &mut json_names,
        );
    }
    let mut out = String::from(
        "# Derived from k8s-pb (tags, wire types) and k8s-openapi (JSON names) by\n\
         # crates/wire/tests/protobuf_schema.rs; do not edit.\n\
         # V <apiVersion> <module> | M <message> | F <tag> <jsonName> <one|inline|list|map> <type> [<message>]\n",
    );
    let inlined = inline_fields(&messages, &mut json_names);
    for (api_version, module) in &versions {
        out.push_str(&format!("V {api_version} {module}\n"));
    }
    for (name, fields) in &messages {
        out.push_str(&format!("M {name}\n"));
        let names = json_names.get(&normalize(name));
        let mut fields: Vec<&Field> = fields.iter().collect();
        fields.sort_by_key(|f| f.tag);
        for f in fields {
            let json = names
                .and_then(|n| n.get(&normalize(&f.rust)))
                .cloned()
                .unwrap_or_else(|| lower_camel(&f.rust));
            let card = if inlined.contains(&(name.clone(), f.tag)) {
                "inline"
            } else {
                f.card
            };
            let message = f
                .message
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            out.push_str(&format!("F {} {json} {card} {}{message}\n", f.tag, f.ty));
        }
    }
    out
}

fn parse_pb_module(
    module: &str,
    src: &str,
    messages: &mut BTreeMap<String, Vec<Field>>,
    versions: &mut BTreeMap<String, String>,
) {
    let mut current: Option<String> = None;
    let mut attr: Option<String> = None;
    let mut decl = String::new();
    let mut resource = false;
    for line in src.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("pub struct ") {
            // `Name {` or, for a message without fields, `Name {}`.
            let name = rest.split([' ', '{']).next().unwrap().to_string();
            messages.entry(format!("{module}.{name}")).or_default();
            current = Some(name);
        } else if line == "}" {
            current = None;
            resource = false;
        } else if t.starts_with("impl crate::Resource for ") {
            resource = true;
        } else if resource && t.starts_with("const API_VERSION") {
            let v = t.split('"').nth(1).unwrap().to_string();
            versions.insert(v, module.to_string());
        } else if let Some(a) = t.strip_prefix("#[prost(") {
            attr = Some(a.trim_end_matches(")]").to_string());
            decl.clear();
        } else if attr.is_some() && !t.starts_with("///") {
            decl.push_str(t);
            // A long type spans lines: the declaration ends at a ',' outside `<...>`.
            if t.ends_with(',') && decl.matches('<').count() == decl.matches('>').count() {
                let field = pb_field(module, attr.take().unwrap().as_str(), &decl);
                let name = format!(
                    "{module}.{}",
                    current.as_ref().expect("field outside a struct")
                );
                messages.get_mut(&name).unwrap().push(field);
            }
        }
    }
}

/// One field from its `#[prost(...)]` attribute and `pub name: Type,`.
fn pb_field(module: &str, attr: &str, decl: &str) -> Field {
    let (name, ty) = decl.trim_start_matches("pub ").split_once(':').unwrap();
    let tag = attr.split("tag = \"").nth(1).unwrap();
    let tag: u32 = tag[..tag.find('"').unwrap()].parse().unwrap();
    let (card, wire) = if let Some(map) = attr.strip_prefix("btree_map = \"") {
        let value = map[..map.find('"').unwrap()].split(", ").nth(1).unwrap();
        ("map", value.to_string())
    } else {
        let first = attr.split([',', ' ']).next().unwrap().to_string();
        let card = if attr.contains("repeated") {
            "list"
        } else {
            "one"
        };
        (card, first)
    };
    let message = (wire == "message").then(|| resolve(module, ty));
    let ty = if wire == "message" {
        "msg".to_string()
    } else {
        wire
    };
    Field {
        tag,
        rust: name.trim().to_string(),
        card,
        ty,
        message,
    }
}

/// The message a Rust type names, as `module.Name`: `super::` climbs modules.
fn resolve(module: &str, ty: &str) -> String {
    let inner = ty
        .trim()
        .trim_end_matches([',', '>'])
        .rsplit(['<', ','])
        .next()
        .unwrap()
        .trim();
    let mut path: Vec<&str> = module.split('.').collect();
    let mut segs: Vec<&str> = inner.split("::").collect();
    let last = segs.pop().unwrap();
    if segs.first() == Some(&"crate") {
        path.clear();
        segs.remove(0);
    }
    for s in segs {
        if s == "super" {
            path.pop();
        } else {
            path.push(s);
        }
    }
    path.push(last);
    path.join(".")
}

/// JSON names by normalized Rust field name, from k8s-openapi's field visitor.
fn parse_openapi_file(
    module: &str,
    src: &str,
    out: &mut BTreeMap<String, BTreeMap<String, String>>,
) {
    let Some(name) = src
        .lines()
        .find_map(|l| l.strip_prefix("pub struct "))
        .map(|r| r.trim_end_matches('{').trim().to_string())
    else {
        return;
    };
    // By normalized name: k8s-pb says `PodIp` where k8s-openapi says `PodIP`.
    let names = out
        .entry(normalize(&format!("{module}.{name}")))
        .or_default();
    for line in src.lines() {
        let t = line.trim();
        if let Some((json, key)) = t.split_once("\" => Field::Key_") {
            if let Some(json) = json.strip_prefix('"') {
                let key = normalize(key.trim_end_matches(','));
                // k8s-openapi renames JSONSchemaProps' `$ref` to `ref_path`.
                let key = if key == "refpath" { "ref".into() } else { key };
                names.insert(key, json.to_string());
            }
        }
    }
}

/// `r#type`, `type_`, `cluster_i_ps`, `cluster_ips` → `type`, `clusterips`.
fn normalize(rust: &str) -> String {
    rust.trim_start_matches("r#")
        .replace('_', "")
        .to_lowercase()
}

/// The fields Go embeds in their parent (`json:",inline"`), as (message,
/// tag). k8s-openapi writes such a parent with the embedded struct's fields
/// as its own, so an embedded field is one the parent's JSON does not name
/// while every field of its message is a JSON field of the parent: a
/// Volume's `volumeSource`, the `localObjectReference` of a ConfigMap
/// reference, a Probe's `handler`. A message only ever embedded (a
/// VolumeSource) has no k8s-openapi struct: it takes its JSON names from
/// the parent, which may in turn make its own embedded fields visible, so
/// this runs until nothing changes.
fn inline_fields(
    messages: &BTreeMap<String, Vec<Field>>,
    json_names: &mut BTreeMap<String, BTreeMap<String, String>>,
) -> std::collections::BTreeSet<(String, u32)> {
    let mut inlined = std::collections::BTreeSet::new();
    loop {
        let mut found = Vec::new();
        for (parent, fields) in messages {
            let Some(names) = json_names.get(&normalize(parent)) else {
                continue;
            };
            for f in fields {
                let Some(inner) = f.message.as_ref().filter(|_| f.card == "one") else {
                    continue;
                };
                let inner_names = flat_names(messages, &inlined, inner);
                if !inlined.contains(&(parent.clone(), f.tag))
                    && !names.contains_key(&normalize(&f.rust))
                    && !inner_names.is_empty()
                    && inner_names.iter().all(|n| names.contains_key(n))
                {
                    found.push((parent.clone(), f.tag, inner.clone()));
                }
            }
        }
        if found.is_empty() {
            return inlined;
        }
        for (parent, tag, inner) in found {
            let parent_names = json_names[&normalize(&parent)].clone();
            json_names.entry(normalize(&inner)).or_insert(parent_names);
            inlined.insert((parent, tag));
        }
    }
}

/// The normalized JSON field names of `message` as Go writes it: its own
/// fields, with those of the messages it embeds in their place.
fn flat_names(
    messages: &BTreeMap<String, Vec<Field>>,
    inlined: &std::collections::BTreeSet<(String, u32)>,
    message: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for f in messages.get(message).into_iter().flatten() {
        match &f.message {
            Some(inner) if inlined.contains(&(message.to_string(), f.tag)) => {
                out.extend(flat_names(messages, inlined, inner));
            }
            _ => out.push(normalize(&f.rust)),
        }
    }
    out
}

fn lower_camel(rust: &str) -> String {
    let mut out = String::new();
    for (i, part) in rust.trim_start_matches("r#").split('_').enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            let mut c = part.chars();
            if let Some(f) = c.next() {
                out.extend(f.to_uppercase());
                out.push_str(c.as_str());
            }
        }
    }
    out
}
