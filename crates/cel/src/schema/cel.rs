//! `x-kubernetes-validations`: CEL rules of a CRD schema, compiled once per
//! schema with the `cel` crate and run on every write, `self` being the
//! value at the rule's place and `oldSelf` the stored one (transition rules).
//!
//! ```text
//!  schema ─▶ RuleTree::compile (only the branches that hold rules)
//!  write  ─▶ RuleTree::check(new, old) ─▶ each rule at its field path ─▶ 422 causes
//! ```
//!
//! Kubernetes bounds the cost of rules; `cel` has no cost tracker, so a run's
//! cost is estimated as the rule's length times the number of JSON values
//! under `self` (an upper bound on the work of one pass over them), against
//! Kubernetes' limits per rule and per request.

use super::{additional, child, index, items, key, Schema};
use cel::objects::{Key, Map};
use cel::{Context, Env, Program, Value as Cel};
use minik8s_api::field::{ErrorType, Errors, FieldError};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

/// Kubernetes' cost limit for one rule evaluation (PerCallLimit).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' cost budget for all the rules of one request (RuntimeCELCostBudget).
pub const PER_REQUEST_BUDGET: u64 = 10_000_000;

/// The CEL environment of CRD rules: the standard library with the strings,
/// lists and math extensions Kubernetes also offers.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(kubernetes_env()));

/// The standard library with the strings, lists and math extensions (what
/// [`ENV`] holds; admission mutations add their object types to one).
pub(super) fn kubernetes_env() -> Env {
    let mut env = Env::stdlib();
    for ext in [
        cel::extensions::strings as fn(&mut Env) -> _,
        cel::extensions::lists,
        cel::extensions::math,
    ] {
        // Fails only on a name declared twice: the rules then lack that extension's extras.
        env.add_extension(ext).ok();
    }
    env
}

/// One compiled rule.
struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    field_path: Option<String>,
    reason: Option<String>,
    /// A transition rule: it runs only when there is an old value.
    uses_old_self: bool,
}

/// The rules of a schema, laid out as the schema is.
#[derive(Default)]
pub struct RuleTree {
    rules: Vec<Rule>,
    /// The schema type at this place (the value of an Invalid cause).
    type_name: String,
    properties: BTreeMap<String, RuleTree>,
    items: Option<Box<RuleTree>>,
    values: Option<Box<RuleTree>>,
    /// `x-kubernetes-list-map-keys`, to find an item's old self.
    map_keys: Vec<String>,
}

/// Compiles one rule's expression, or says why it does not compile.
pub fn compile(source: &str) -> Result<Program, String> {
    ENV.compile(source)
        .map_err(|e| format!("compilation failed: {e}"))
}

impl RuleTree {
    /// Compiles every rule in `s`; `None` when it has none. Errors carry the
    /// rule's place under `path` (the CRD's schema path).
    pub fn compile(s: &Schema, path: &str) -> Result<Option<RuleTree>, Vec<FieldError>> {
        let mut errs = Vec::new();
        let tree = Self::node(s, path, &mut errs);
        if errs.is_empty() {
            Ok(tree)
        } else {
            Err(errs)
        }
    }

    fn node(s: &Schema, path: &str, errs: &mut Errors) -> Option<RuleTree> {
        let mut t = RuleTree {
            type_name: s.type_.clone().unwrap_or_else(|| "object".into()),
            map_keys: s.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
            ..Default::default()
        };
        for (i, r) in s.x_kubernetes_validations.iter().flatten().enumerate() {
            let place = format!("{path}.x-kubernetes-validations[{i}]");
            let program = match compile(&r.rule) {
                Ok(p) => p,
                Err(e) => {
                    errs.push(FieldError::invalid(
                        format!("{place}.rule"),
                        &Value::String(r.rule.clone()),
                        e,
                    ));
                    continue;
                }
            };
            let message_expression = match r.message_expression.as_deref().map(compile) {
                Some(Err(e)) => {
                    let v = Value::String(r.message_expression.clone().unwrap_or_default());
                    errs.push(FieldError::invalid(
                        format!("{place}.messageExpression"),
                        &v,
                        e,
                    ));
                    continue;
                }
                Some(Ok(p)) => Some(p),
                None => None,
            };
            if let Some(reason) = r.reason.as_deref() {
                let known = [
                    "FieldValueInvalid",
                    "FieldValueForbidden",
                    "FieldValueRequired",
                    "FieldValueDuplicate",
                ];
                if !known.contains(&reason) {
                    errs.push(FieldError::not_supported(
                        format!("{place}.reason"),
                        &Value::String(reason.into()),
                        &known,
                    ));
                }
            }
            t.rules.push(Rule {
                uses_old_self: r.rule.contains("oldSelf"),
                source: r.rule.clone(),
                program,
                message: r.message.clone().filter(|m| !m.is_empty()),
                message_expression,
                field_path: r.field_path.clone().filter(|f| !f.is_empty()),
                reason: r.reason.clone(),
            });
        }
        for (k, prop) in s.properties.iter().flatten() {
            if let Some(sub) = Self::node(prop, &format!("{path}.properties[{k}]"), errs) {
                t.properties.insert(k.clone(), sub);
            }
        }
        t.items = items(s)
            .and_then(|i| Self::node(i, &format!("{path}.items"), errs))
            .map(Box::new);
        t.values = additional(s)
            .and_then(|v| Self::node(v, &format!("{path}.additionalProperties"), errs))
            .map(Box::new);
        let empty = t.rules.is_empty()
            && t.properties.is_empty()
            && t.items.is_none()
            && t.values.is_none();
        (!empty).then_some(t)
    }

    /// Runs every rule against `v` (the object's root without apiVersion,
    /// kind and metadata, as `validate` sees it) and `old` on update.
    pub fn check(&self, v: &Value, old: Option<&Value>) -> Errors {
        let mut errs = Vec::new();
        let mut budget = PER_REQUEST_BUDGET;
        self.walk(v, old, "", &mut errs, &mut budget);
        errs
    }

    fn walk(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        errs: &mut Errors,
        budget: &mut u64,
    ) {
        if v.is_null() {
            return;
        }
        // Ratcheting: a value the update did not change is not judged again.
        if old == Some(v) {
            return;
        }
        for rule in &self.rules {
            if rule.uses_old_self && old.is_none() {
                continue;
            }
            if let Some(e) = self.run(rule, v, old, path, budget) {
                errs.push(e);
                if *budget == 0 {
                    return;
                }
            }
        }
        match v {
            Value::Object(map) => {
                for (k, sub) in &self.properties {
                    if let Some(val) = map.get(k) {
                        sub.walk(
                            val,
                            old.and_then(|o| o.get(k)),
                            &child(path, k),
                            errs,
                            budget,
                        );
                    }
                }
                if let Some(sub) = &self.values {
                    for (k, val) in map {
                        sub.walk(val, old.and_then(|o| o.get(k)), &key(path, k), errs, budget);
                    }
                }
            }
            Value::Array(list) => {
                if let Some(sub) = &self.items {
                    for (i, item) in list.iter().enumerate() {
                        let before = self.old_item(item, old);
                        sub.walk(item, before, &index(path, i), errs, budget);
                    }
                }
            }
            _ => {}
        }
    }

    /// The old item with the same map keys (lists of type map only).
    fn old_item<'a>(&self, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
        if self.map_keys.is_empty() {
            return None;
        }
        old?.as_array()?
            .iter()
            .find(|o| self.map_keys.iter().all(|k| o.get(k) == item.get(k)))
    }

    fn run(
        &self,
        rule: &Rule,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &mut u64,
    ) -> Option<FieldError> {
        let at = match &rule.field_path {
            Some(fp) => format!(
                "{path}{}",
                if path.is_empty() {
                    fp.trim_start_matches('.').to_string()
                } else {
                    fp.clone()
                }
            ),
            None => path.to_string(),
        };
        let cost = rule.source.len() as u64 * (1 + count_values(v) + old.map_or(0, count_values));
        let type_value = Value::String(self.type_name.clone());
        if cost > PER_CALL_LIMIT || cost > *budget {
            let over_budget = cost > *budget;
            *budget = budget.saturating_sub(cost.min(*budget));
            let detail = if over_budget {
                *budget = 0;
                "validation failed due to running out of cost budget, no further validation rules will be run"
            } else {
                "operation cancelled: actual cost limit exceeded"
            };
            return Some(FieldError::invalid(at, &type_value, detail));
        }
        *budget -= cost;
        let mut ctx = Context::with_env(ENV.clone());
        ctx.add_variable_from_value("self", to_cel(v));
        if let Some(o) = old {
            ctx.add_variable_from_value("oldSelf", to_cel(o));
        }
        let detail = match rule.program.execute(&ctx) {
            Ok(Cel::Bool(true)) => return None,
            Ok(Cel::Bool(false)) => rule_message(rule, &ctx),
            Ok(other) => format!(
                "{} evaluation error: the rule gave {other:?}, not a bool",
                rule.source
            ),
            Err(e) => format!("{} evaluation error: {e}", rule.source),
        };
        Some(match rule.reason.as_deref() {
            Some("FieldValueRequired") => FieldError::required(at, detail),
            Some("FieldValueForbidden") => FieldError::forbidden(at, detail),
            Some("FieldValueDuplicate") => FieldError {
                kind: ErrorType::Duplicate,
                field: at,
                value: Some(format!("{:?}", self.type_name)),
                detail,
            },
            _ => FieldError::invalid(at, &type_value, detail),
        })
    }
}

/// Runs a compiled expression with `vars` bound (admission policies and
/// match conditions: `object`, `oldObject`, `request`...).
pub fn eval(program: &Program, vars: &[(&str, &Value)]) -> Result<Cel, String> {
    let mut ctx = Context::with_env(ENV.clone());
    for (name, v) in vars {
        ctx.add_variable_from_value(*name, to_cel(v));
    }
    program.execute(&ctx).map_err(|e| e.to_string())
}

/// [`eval`] of an expression that must give a bool.
pub fn eval_bool(program: &Program, vars: &[(&str, &Value)]) -> Result<bool, String> {
    match eval(program, vars)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!("expected a bool, got {other:?}")),
    }
}

/// [`eval`] of an expression that must give a string (messageExpression).
pub fn eval_string(program: &Program, vars: &[(&str, &Value)]) -> Result<String, String> {
    match eval(program, vars)? {
        Cel::String(s) => Ok(s.to_string()),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

/// A CEL value back as JSON (a policy's variables, bound for later expressions).
pub fn to_json(v: &Cel) -> Value {
    match v {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Cel::String(s) => Value::String(s.to_string()),
        Cel::List(l) => Value::Array(l.iter().map(to_json).collect()),
        Cel::Map(m) => Value::Object(
            m.map
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Key::String(s) => s.to_string(),
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        // A struct an expression built (`Object{...}` in a mutation).
        Cel::Struct(s) => Value::Object(
            s.field_values()
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        Cel::try_from(v.as_ref()).map_or(Value::Null, |c| to_json(&c)),
                    )
                })
                .collect(),
        ),
        other => Value::String(format!("{other:?}")),
    }
}

fn rule_message(rule: &Rule, ctx: &Context) -> String {
    if let Some(expr) = &rule.message_expression {
        if let Ok(Cel::String(s)) = expr.execute(ctx) {
            if !s.trim().is_empty() {
                return s.to_string();
            }
        }
    }
    rule.message
        .clone()
        .unwrap_or_else(|| format!("failed rule: {}", rule.source))
}

/// How many JSON values `v` holds (itself included).
fn count_values(v: &Value) -> u64 {
    match v {
        Value::Array(a) => 1 + a.iter().map(count_values).sum::<u64>(),
        Value::Object(m) => 1 + m.values().map(count_values).sum::<u64>(),
        Value::String(s) => 1 + s.len() as u64 / 64,
        _ => 1,
    }
}

/// A JSON value as CEL sees it: integers are `int`, as in Kubernetes.
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => match n.as_u64() {
                Some(u) => Cel::UInt(u),
                None => Cel::Float(n.as_f64().unwrap_or(0.0)),
            },
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, Cel> = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(schema: Value) -> RuleTree {
        let s: Schema = serde_json::from_value(schema).unwrap();
        RuleTree::compile(&s, "s").unwrap().expect("rules")
    }

    fn spec_rules() -> RuleTree {
        tree(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.replicas", "message": "replicas should be greater than or equal to minReplicas"},
                {"rule": "self.replicas <= self.maxReplicas", "messageExpression": "'replicas ' + string(self.replicas) + ' is over ' + string(self.maxReplicas)"},
                {"rule": "!has(self.forbidden)", "reason": "FieldValueForbidden", "fieldPath": ".forbidden"},
                {"rule": "self.name == oldSelf.name", "message": "name is immutable"}],
            "properties": {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                "name": {"type": "string"}, "forbidden": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('t-')"}]}}}}}}),
        )
    }

    fn messages(errs: Errors) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_judge_self_with_their_messages() {
        let rules = spec_rules();
        let ok = json!({"spec": {"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "name": "a", "tags": ["t-1"]}});
        assert!(rules.check(&ok, None).is_empty());
        let bad = json!({"spec": {"replicas": 9, "minReplicas": 10, "maxReplicas": 5, "forbidden": "x", "name": "a", "tags": ["t-1", "nope"]}});
        assert_eq!(
            messages(rules.check(&bad, None)),
            [
                "spec: Invalid value: \"object\": replicas should be greater than or equal to minReplicas",
                "spec: Invalid value: \"object\": replicas 9 is over 5",
                "spec.forbidden: Forbidden: failed rule: !has(self.forbidden)",
                "spec.tags[1]: Invalid value: \"string\": failed rule: self.startsWith('t-')",
            ]
        );
    }

    #[test]
    fn transition_rules_see_old_self_and_unchanged_values_are_not_judged_again() {
        let rules = spec_rules();
        let old = json!({"spec": {"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "name": "a"}});
        let renamed =
            json!({"spec": {"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "name": "b"}});
        assert_eq!(
            messages(rules.check(&renamed, Some(&old))),
            ["spec: Invalid value: \"object\": name is immutable"]
        );
        assert!(rules.check(&old, Some(&old)).is_empty());
    }

    #[test]
    fn rules_that_do_not_compile_are_reported_where_they_are() {
        let s: Schema = serde_json::from_value(
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a +"}]}),
        )
        .unwrap();
        let errs = RuleTree::compile(&s, "s").err().expect("a compile error");
        assert_eq!(errs[0].field, "s.x-kubernetes-validations[0].rule");
        assert!(
            errs[0].detail.starts_with("compilation failed"),
            "{}",
            errs[0].detail
        );
    }

    #[test]
    fn costly_rules_are_cut_off() {
        let rules = tree(
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x + y >= 0))"}]}}}),
        );
        let big: Vec<i64> = (0..50_000).collect();
        let errs = messages(rules.check(&json!({"list": big}), None));
        assert_eq!(
            errs,
            ["list: Invalid value: \"array\": operation cancelled: actual cost limit exceeded"]
        );
    }
}
