//! Reading `-f` arguments: files, directories, `-` for stdin; multi-document
//! YAML or JSON; `kind: List` expanded. Errors name the file and line.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One object read from a manifest, with where it came from.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub source: String,
    pub object: Value,
}

/// Expands `-f` arguments into the files to read (directories: their
/// `.yaml`, `.yml` and `.json` files, sorted).
fn files(args: &[String]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        let p = PathBuf::from(a);
        if a == "-" {
            out.push(p);
        } else if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&p)
                .with_context(|| format!("reading directory {a}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
                })
                .collect();
            entries.sort();
            out.extend(entries);
        } else if p.exists() {
            out.push(p);
        } else {
            bail!("the path \"{a}\" does not exist");
        }
    }
    Ok(out)
}

/// Parses one file's text into objects.
pub fn parse(source: &str, text: &str) -> Result<Vec<Manifest>> {
    let mut docs = Vec::new();
    let looks_json = text.trim_start().starts_with('{') || text.trim_start().starts_with('[');
    if looks_json {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("error parsing {source}: json: line {}: {e}", e.line()))?;
        docs.push(v);
    } else {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v = serde_yaml::Value::deserialize(doc).map_err(|e| match e.location() {
                Some(loc) => anyhow::anyhow!(
                    "error parsing {source}: error converting YAML to JSON: yaml: line {}: {}",
                    loc.line(),
                    strip_location(&e.to_string())
                ),
                None => anyhow::anyhow!("error parsing {source}: {e}"),
            })?;
            if v.is_null() {
                continue;
            }
            let json: Value = serde_json::to_value(&v)
                .map_err(|e| anyhow::anyhow!("error parsing {source}: {e}"))?;
            docs.push(json);
        }
    }
    let mut out = Vec::new();
    for d in docs {
        expand(source, d, &mut out)?;
    }
    Ok(out)
}

fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn expand(source: &str, v: Value, out: &mut Vec<Manifest>) -> Result<()> {
    if !v.is_object() {
        bail!("error validating {source}: the manifest must be an object (a mapping with apiVersion and kind)");
    }
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "List" || (kind.ends_with("List") && v.get("items").is_some()) {
        for item in v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            expand(source, item, out)?;
        }
        return Ok(());
    }
    if kind.is_empty() {
        bail!("error validating {source}: error validating data: kind not set");
    }
    for (field, v) in [
        ("metadata", v.get("metadata")),
        ("metadata.labels", v.pointer("/metadata/labels")),
        ("metadata.annotations", v.pointer("/metadata/annotations")),
    ] {
        if v.is_some_and(|m| !m.is_object() && !m.is_null()) {
            bail!("error validating {source}: error validating data: {field} must be a mapping");
        }
    }
    if v.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        bail!("error validating {source}: error validating data: apiVersion not set");
    }
    out.push(Manifest {
        source: source.to_string(),
        object: v,
    });
    Ok(())
}

/// Reads every object named by the `-f` arguments.
pub fn load(args: &[String]) -> Result<Vec<Manifest>> {
    if args.is_empty() {
        bail!("must specify one of -f and -k");
    }
    let mut out = Vec::new();
    for f in files(args)? {
        let (name, text) = if f == Path::new("-") {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading stdin")?;
            ("STDIN".to_string(), s)
        } else {
            let s =
                std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            (f.display().to_string(), s)
        };
        out.extend(parse(&name, &text)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: b}}\n";
        let m = parse("f.yaml", text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].object["kind"], "Service");
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = parse(
            "bad.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("error parsing bad.yaml: error converting YAML to JSON: yaml: line"),
            "{err}"
        );
        let err = parse("x.json", "{\"kind\": }").unwrap_err().to_string();
        assert!(err.contains("x.json") && err.contains("line 1"), "{err}");
        let err = parse("k.yaml", "apiVersion: v1\nmetadata: {name: a}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("kind not set"), "{err}");
    }
}
