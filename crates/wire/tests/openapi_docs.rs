//! The OpenAPI descriptions table (`src/openapi/docs.txt`) is derived, never
//! written by hand: descriptions and required fields come from `k8s-openapi`'s
//! generated sources (their doc comments are Kubernetes' own OpenAPI
//! descriptions), for every definition reachable from a kind the registry
//! serves. This test derives it again and fails when the checked-in table
//! differs (`UPDATE_OPENAPI_DOCS=1 cargo test -p minik8s-wire --test
//! openapi_docs` rewrites it).

mod common;

use common::{package_src, rust_files};
use minik8s_wire::openapi;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[test]
fn checked_in_docs_are_derived_from_k8s_openapi() {
    let openapi = package_src("k8s-openapi").join("v1_37");
    let generated = generate(&openapi);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/openapi/docs.txt");
    if std::env::var_os("UPDATE_OPENAPI_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is not what k8s-openapi gives; regenerate it with \
         UPDATE_OPENAPI_DOCS=1 cargo test -p minik8s-wire --test openapi_docs",
        path.display()
    );
}

/// One definition's description and its fields' (json name → (required, description)).
#[derive(Default)]
struct Definition {
    doc: String,
    fields: BTreeMap<String, (bool, String)>,
}

fn generate(openapi: &Path) -> String {
    let mut defs: BTreeMap<String, Definition> = BTreeMap::new();
    for file in rust_files(openapi) {
        if let Some((name, def)) = parse(&std::fs::read_to_string(&file).unwrap()) {
            defs.insert(name, def);
        }
    }
    let mut out = String::from(
        "# Derived from k8s-openapi's doc comments by crates/wire/tests/openapi_docs.rs; do not edit.\n\
         # D <definition>\\t<description> | F <json name>\\t<required: r or ->\\t<description>\n",
    );
    for name in reachable() {
        let Some(def) = defs.get(&name) else {
            continue;
        };
        out.push_str(&format!("D {name}\t{}\n", def.doc));
        for (json, (required, doc)) in &def.fields {
            let r = if *required { "r" } else { "-" };
            out.push_str(&format!("F {json}\t{r}\t{doc}\n"));
        }
    }
    out
}

/// Definition names (`io.k8s.api.core.v1.Pod`) reachable from the kinds the
/// registry serves (in every served version), through the protobuf schema's message fields.
fn reachable() -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    // Kinds served in a version besides the stored one are documented too.
    let alternates = minik8s_wire::versions::ALTERNATE_VERSIONS
        .iter()
        .map(|a| (a.api_version(), &*a.kind));
    let mut stack: Vec<String> = minik8s_api::REGISTRY
        .iter()
        .map(|r| (r.api_version(), &*r.kind))
        .chain(alternates)
        .filter_map(|(api_version, kind)| openapi::message_for(&api_version, kind))
        .collect();
    while let Some(m) = stack.pop() {
        if seen.insert(m.clone()) {
            stack.extend(openapi::references(&m));
        }
    }
    seen.iter().map(|m| openapi::definition_name(m)).collect()
}

/// A k8s-openapi source file: its definition, the struct's doc comment and its
/// fields' (JSON name from the deserializer's visitor, required when not an
/// `Option`, doc comment).
fn parse(src: &str) -> Option<(String, Definition)> {
    let name = src
        .lines()
        .find_map(|l| l.strip_prefix("// Generated from definition "))?
        .trim()
        .to_string();
    let mut def = Definition::default();
    let mut doc: Vec<String> = Vec::new();
    let mut in_struct = false;
    let mut rust_fields: Vec<(String, bool, String)> = Vec::new();
    for line in src.lines() {
        let t = line.trim();
        if let Some(d) = t.strip_prefix("///") {
            let d = d.strip_prefix(' ').unwrap_or(d);
            // rustdoc escapes markdown characters; the descriptions are plain text.
            let plain = ["<", ">", "[", "]", "*", "_", "`"]
                .iter()
                .fold(d.to_string(), |s, c| s.replace(&format!("\\{c}"), c));
            doc.push(plain);
            continue;
        }
        if t.starts_with("pub struct ") && !in_struct {
            def.doc = join(&doc);
            in_struct = !t.ends_with("{}") && !t.ends_with(';');
        } else if in_struct && line == "}" {
            in_struct = false;
        } else if in_struct {
            if let Some((field, ty)) = t.strip_prefix("pub ").and_then(|d| d.split_once(':')) {
                let required = !ty.trim().starts_with("Option<");
                rust_fields.push((field.trim().to_string(), required, join(&doc)));
            }
        }
        if !t.starts_with("#[") {
            doc.clear();
        }
    }
    // JSON names from the field visitor: `"podIP" => Field::Key_pod_ip,`.
    let mut json_names: BTreeMap<String, String> = BTreeMap::new();
    for line in src.lines() {
        if let Some((json, key)) = line.trim().split_once("\" => Field::Key_") {
            if let Some(json) = json.strip_prefix('"') {
                json_names.insert(key.trim_end_matches(',').to_string(), json.to_string());
            }
        }
    }
    for (rust, required, doc) in rust_fields {
        let key = rust.trim_start_matches("r#");
        let Some(json) = json_names.get(key) else {
            continue;
        };
        // Every object has metadata; none is required to send it.
        let required = required && json != "metadata";
        def.fields.insert(json.clone(), (required, doc));
    }
    Some((name, def))
}

/// Doc lines as one line: paragraphs kept as `\n\n`, tabs as spaces.
fn join(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        if l.is_empty() {
            out.push_str("\\n\\n");
        } else {
            if !out.is_empty() && !out.ends_with("\\n\\n") {
                out.push(' ');
            }
            out.push_str(&l.replace('\t', " "));
        }
    }
    out
}
