//! Label and field selectors: the string grammar clients send in
//! `?labelSelector=` / `?fieldSelector=`, and the structured
//! `metav1.LabelSelector` that objects carry.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
        }
    }
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub requirements: Vec<Requirement>,
}

impl Selector {
    pub fn everything() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches an object's `metadata.labels` given as JSON.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(&labels_of(obj))
    }

    /// Parses the `labelSelector` query grammar (`a=b,c!=d,e in (x,y),!f`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for term in split_terms(s)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(Selector { requirements })
    }

    /// Converts a structured `LabelSelector`. A nil selector (None) matches nothing in
    /// Kubernetes; callers decide that case, this converts only a present one.
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (k, v) in ls.match_labels.iter().flatten() {
            requirements.push(Requirement::Equals(k.clone(), v.clone()));
        }
        for e in ls.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let r = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!("values: Required value: for 'in', 'notin' operators, values set can't be empty ({})", e.key))
                }
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                op => return Err(format!("\"{op}\" is not a valid label selector operator")),
            };
            requirements.push(r);
        }
        Ok(Selector { requirements })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "unable to parse requirement: unmatched ')' in {s:?}"
                    ));
                }
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if depth != 0 {
        return Err(format!(
            "unable to parse requirement: unclosed '(' in {s:?}"
        ));
    }
    out.push(cur);
    Ok(out)
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok(Requirement::DoesNotExist(key.to_string()));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(checked_key(k)?, checked_value(v)?));
    }
    if let Some((k, v)) = term.split_once("==") {
        return Ok(Requirement::Equals(checked_key(k)?, checked_value(v)?));
    }
    if let Some((k, v)) = term.split_once('=') {
        return Ok(Requirement::Equals(checked_key(k)?, checked_value(v)?));
    }
    for (word, not) in [(" notin ", true), (" in ", false)] {
        if let Some(pos) = term.find(word) {
            let key = checked_key(&term[..pos])?;
            let rest = term[pos + word.len()..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| {
                    format!("unable to parse requirement: expected (values) in {term:?}")
                })?;
            let values: Vec<String> = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            for v in &values {
                checked_value(v)?;
            }
            return Ok(if not {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    check_key(term)?;
    Ok(Requirement::Exists(term.to_string()))
}

fn checked_key(k: &str) -> Result<String, String> {
    let k = k.trim();
    check_key(k)?;
    Ok(k.to_string())
}

fn checked_value(v: &str) -> Result<String, String> {
    let v = v.trim();
    if let Some(e) = crate::names::label_value_error(v) {
        return Err(format!("invalid label value: {v:?}: {e}"));
    }
    Ok(v.to_string())
}

fn check_key(k: &str) -> Result<(), String> {
    if let Some(e) = crate::names::qualified_name_error(k) {
        return Err(format!("invalid label key {k:?}: {e}"));
    }
    Ok(())
}

/// `metadata.labels` of a JSON object.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// One `fieldSelector` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negate: bool,
}

/// A parsed field selector (terms ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`; `supported` lists the field paths the kind allows.
    pub fn parse(s: &str, supported: &[&str]) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, negate) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push(FieldTerm {
                field: field.to_string(),
                value: value.trim().to_string(),
                negate,
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let actual = field_value(obj, &t.field);
            (actual == t.value) != t.negate
        })
    }

    /// The value this selector pins `field` to with `=`, if any.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negate)
            .map(|t| t.value.as_str())
    }
}

/// A dotted path's value as a string (`""` when missing), as Kubernetes' field sets do.
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_grammar() {
        let s = Selector::parse("app=web,tier!=db,env in (prod, staging),!legacy,team").unwrap();
        assert_eq!(s.requirements.len(), 5);
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("team", "a"),
            ("legacy", "")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(Selector::parse("").unwrap().matches(&labels(&[])));
        let n = Selector::parse("a notin (x),b==c").unwrap();
        assert!(n.matches(&labels(&[("b", "c")])));
        assert!(!n.matches(&labels(&[("a", "x"), ("b", "c")])));
    }

    #[test]
    fn label_grammar_errors() {
        assert!(Selector::parse("a in (x").is_err());
        assert!(Selector::parse("-bad=x").is_err());
        assert!(Selector::parse("a=b c").is_err());
    }

    #[test]
    fn structured_selector_roundtrips_to_string() {
        let ls: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
        }))
        .unwrap();
        let s = Selector::from_label_selector(&ls).unwrap();
        assert_eq!(s.to_string(), "app=x,tier in (a,b)");
        assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn field_selectors() {
        let supported = ["metadata.name", "spec.nodeName", "status.phase"];
        let pod = json!({"metadata": {"name": "p", "namespace": "default"},
                         "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let f = FieldSelector::parse(
            "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed",
            &supported,
        )
        .unwrap();
        assert!(f.matches(&pod));
        assert!(!FieldSelector::parse("spec.nodeName=", &supported)
            .unwrap()
            .matches(&pod));
        let err = FieldSelector::parse("spec.bogus=1", &supported).unwrap_err();
        assert_eq!(err, "field label not supported: spec.bogus");
    }
}
