//! The JSONPath subset CRDs use (printer columns, scale paths, selectable
//! fields): `.spec.replicas`, `.metadata.labels['app.kubernetes.io/name']`,
//! `.items[0]`, `.items[*].name`, `.status.conditions[?(@.type=="Ready")].status`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.a.b=="v")]` (or `!=`); `None` for `[?(@.a)]` (the field is there).
    Filter(Vec<String>, Option<(bool, Value)>),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<Step>);

impl JsonPath {
    /// Parses `path` (with or without `{}` around it).
    pub fn parse(path: &str) -> Result<JsonPath, String> {
        let p = path.trim();
        let p = p
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(p);
        let p = p.strip_prefix('$').unwrap_or(p);
        let mut steps = Vec::new();
        let mut rest = p;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return Err(format!("unexpected character after '.' in {path:?}"));
                }
                steps.push(Step::Field(r[..end].to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = closing(r).ok_or_else(|| format!("unterminated [ in {path:?}"))?;
                steps.push(bracket(r[..end].trim(), path)?);
                rest = &r[end + 1..];
            } else {
                return Err(format!("unrecognized character in {path:?} at {rest:?}"));
            }
        }
        Ok(JsonPath(steps))
    }

    /// Every value the path reaches in `v`, in order.
    pub fn find<'a>(&self, v: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![v];
        for step in &self.0 {
            let mut next = Vec::new();
            for v in current {
                match step {
                    Step::Field(f) => next.extend(v.get(f.as_str())),
                    Step::Index(i) => {
                        if let Some(list) = v.as_array() {
                            let i = if *i < 0 { list.len() as i64 + i } else { *i };
                            next.extend(usize::try_from(i).ok().and_then(|i| list.get(i)));
                        }
                    }
                    Step::All => match v {
                        Value::Array(list) => next.extend(list.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter(fields, test) => {
                        for item in v.as_array().into_iter().flatten() {
                            let found = fields.iter().try_fold(item, |at, f| at.get(f.as_str()));
                            let keep = match (found, test) {
                                (Some(_), None) => true,
                                (Some(x), Some((eq, want))) => (x == want) == *eq,
                                (None, Some((false, _))) => true,
                                (None, _) => false,
                            };
                            if keep {
                                next.push(item);
                            }
                        }
                    }
                }
            }
            current = next;
        }
        current
    }

    /// The first value the path reaches.
    pub fn first<'a>(&self, v: &'a Value) -> Option<&'a Value> {
        self.find(v).into_iter().next()
    }

    /// A plain field path (`.spec.replicas`) as its fields, for writing.
    pub fn fields(&self) -> Option<Vec<&str>> {
        self.0
            .iter()
            .map(|s| match s {
                Step::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The index of the `]` closing a bracket, past quoted strings.
fn closing(r: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in r.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    s.strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
}

fn bracket(inner: &str, path: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    if let Ok(i) = inner.parse::<i64>() {
        return Ok(Step::Index(i));
    }
    let expr = inner
        .strip_prefix("?(")
        .and_then(|e| e.strip_suffix(')'))
        .ok_or_else(|| format!("unsupported expression [{inner}] in {path:?}"))?;
    let (lhs, test) = match expr.split_once("==") {
        Some((l, r)) => (l, Some((true, r))),
        None => match expr.split_once("!=") {
            Some((l, r)) => (l, Some((false, r))),
            None => (expr, None),
        },
    };
    let fields: Vec<String> = lhs
        .trim()
        .strip_prefix("@.")
        .ok_or_else(|| format!("a filter must start with @. in {path:?}"))?
        .split('.')
        .map(str::to_string)
        .collect();
    let test = match test {
        None => None,
        Some((eq, r)) => {
            let value = match unquote(r) {
                Some(s) => Value::String(s.to_string()),
                None => serde_json::from_str(r.trim())
                    .map_err(|_| format!("unsupported value {r:?} in {path:?}"))?,
            };
            Some((eq, value))
        }
    };
    Ok(Step::Filter(fields, test))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_find_what_printer_columns_ask_for() {
        let obj = json!({"spec": {"replicas": 3, "items": [{"name": "a"}, {"name": "b"}]},
            "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}});
        let find = |p: &str| -> Vec<Value> {
            JsonPath::parse(p)
                .unwrap()
                .find(&obj)
                .into_iter()
                .cloned()
                .collect()
        };
        assert_eq!(find(".spec.replicas"), [json!(3)]);
        assert_eq!(find("{.spec.replicas}"), [json!(3)]);
        assert_eq!(find(".spec.items[*].name"), [json!("a"), json!("b")]);
        assert_eq!(find(".spec.items[-1].name"), [json!("b")]);
        assert_eq!(
            find(".metadata.labels['app.kubernetes.io/name']"),
            [json!("web")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type==\"Ready\")].status"),
            [json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].type"),
            [json!("Synced")]
        );
        assert_eq!(find(".spec.missing"), Vec::<Value>::new());
        assert_eq!(
            JsonPath::parse(".spec.replicas").unwrap().fields(),
            Some(vec!["spec", "replicas"])
        );
        assert!(JsonPath::parse("spec").is_err());
        assert!(JsonPath::parse(".spec[").is_err());
    }
}
