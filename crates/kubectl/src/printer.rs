//! Output: aligned columns as kubectl prints them, server Tables, and `describe`.

use minik8s_api::registry::ResourceInfo;
use serde_json::Value;

/// Left-aligned columns separated by three spaces (kubectl's tabwriter settings).
pub fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; n];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{:<w$}   ", c, w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub struct TableOptions {
    pub wide: bool,
    pub with_namespace: bool,
    pub show_labels: bool,
    /// `pod` etc. before each name, for multi-type gets.
    pub prefix: Option<String>,
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".into(),
        other => other.to_string(),
    }
}

/// Renders a server Table's rows.
pub fn table(defs: &Value, rows: &[Value], o: &TableOptions, header: bool) -> String {
    let defs: Vec<&Value> = defs
        .as_array()
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    let shown: Vec<usize> = (0..defs.len())
        .filter(|i| o.wide || defs[*i]["priority"].as_i64().unwrap_or(0) == 0)
        .collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    if header {
        let mut h: Vec<String> = Vec::new();
        if o.with_namespace {
            h.push("NAMESPACE".into());
        }
        h.extend(
            shown
                .iter()
                .map(|i| defs[*i]["name"].as_str().unwrap_or("").to_uppercase()),
        );
        if o.show_labels {
            h.push("LABELS".into());
        }
        out.push(h);
    }
    for r in rows {
        let cells = r["cells"].as_array().cloned().unwrap_or_default();
        let meta = &r["object"]["metadata"];
        let mut line: Vec<String> = Vec::new();
        if o.with_namespace {
            line.push(meta["namespace"].as_str().unwrap_or("").to_string());
        }
        for (pos, i) in shown.iter().enumerate() {
            let mut c = cells.get(*i).map(cell).unwrap_or_default();
            if pos == 0 {
                if let Some(p) = &o.prefix {
                    c = format!("{p}/{c}");
                }
            }
            line.push(c);
        }
        if o.show_labels {
            let labels: Vec<String> = meta["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            line.push(if labels.is_empty() {
                "<none>".into()
            } else {
                labels.join(",")
            });
        }
        out.push(line);
    }
    columns(&out)
}

fn map_lines(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join("\n              "),
        _ => "<none>".into(),
    }
}

/// Indented YAML of a section, for describe.
fn section(title: &str, v: &Value) -> String {
    let yaml = serde_yaml::to_string(v).unwrap_or_default();
    let body: Vec<String> = yaml.lines().map(|l| format!("  {l}")).collect();
    format!("{title}:\n{}\n", body.join("\n"))
}

/// A readable description: metadata first, then spec and status, then events.
pub fn describe(info: &ResourceInfo, obj: &Value, events: &[Value]) -> String {
    let m = &obj["metadata"];
    let mut out = String::new();
    out.push_str(&format!(
        "{:<14}{}\n",
        "Name:",
        m["name"].as_str().unwrap_or("")
    ));
    if info.namespaced {
        out.push_str(&format!(
            "{:<14}{}\n",
            "Namespace:",
            m["namespace"].as_str().unwrap_or("")
        ));
    }
    out.push_str(&format!("{:<14}{}\n", "Labels:", map_lines(&m["labels"])));
    let mut ann = m["annotations"].clone();
    if let Some(a) = ann.as_object_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    out.push_str(&format!("{:<14}{}\n", "Annotations:", map_lines(&ann)));
    out.push_str(&format!(
        "{:<14}{}\n",
        "API Version:",
        obj["apiVersion"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "{:<14}{}\n",
        "Kind:",
        obj["kind"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "{:<14}{}\n",
        "UID:",
        m["uid"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "{:<14}{}\n",
        "Created:",
        m["creationTimestamp"].as_str().unwrap_or("")
    ));
    if let Some(owners) = m["ownerReferences"].as_array() {
        for o in owners
            .iter()
            .filter(|o| o["controller"] == Value::Bool(true))
        {
            out.push_str(&format!(
                "{:<14}{}/{}\n",
                "Controlled By:",
                o["kind"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            ));
        }
    }
    if let Some(dt) = m["deletionTimestamp"].as_str() {
        out.push_str(&format!("{:<14}{}\n", "Deleting:", dt));
    }
    if let Some(obj_map) = obj.as_object() {
        for (k, v) in obj_map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") || v.is_null() {
                continue;
            }
            let mut title: Vec<char> = k.chars().collect();
            title[0] = title[0].to_ascii_uppercase();
            out.push_str(&section(&title.into_iter().collect::<String>(), v));
        }
    }
    out.push_str(&events_section(events));
    out
}

/// `Events:` with one row per event (type, reason, age, source, message).
fn events_section(events: &[Value]) -> String {
    let mut out = String::new();
    if events.is_empty() {
        out.push_str("Events:       <none>\n");
    } else {
        let mut rows = vec![vec![
            "  Type".to_string(),
            "Reason".into(),
            "Age".into(),
            "From".into(),
            "Message".into(),
        ]];
        rows.push(vec![
            "  ----".to_string(),
            "------".into(),
            "----".into(),
            "----".into(),
            "-------".into(),
        ]);
        for e in events {
            let when = e["lastTimestamp"]
                .as_str()
                .or(e["eventTime"].as_str())
                .or(e["metadata"]["creationTimestamp"].as_str())
                .unwrap_or("");
            rows.push(vec![
                format!("  {}", e["type"].as_str().unwrap_or("")),
                e["reason"].as_str().unwrap_or("").into(),
                minik8s_api::meta::human_age(when),
                e["source"]["component"]
                    .as_str()
                    .or(e["reportingComponent"].as_str())
                    .unwrap_or("")
                    .into(),
                e["message"].as_str().unwrap_or("").into(),
            ]);
        }
        out.push_str("Events:\n");
        out.push_str(&columns(&rows));
    }
    out
}
