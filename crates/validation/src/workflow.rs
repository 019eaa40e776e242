//! The rules of minik8s' Workflow and WorkflowRun
//! (`serverless.minik8s.io/v1alpha1`) on their JSON form (served as custom
//! resources: a field of the wrong type is a 422 naming it). That each
//! function and a run's Workflow exist is checked by the apiserver.

use crate::{Errors, FieldError};
use minik8s_api::workflow::{self, OPERATORS};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The rules of a Workflow that need nothing but the object: named steps
/// calling functions, rules and joins naming steps that exist, and no
/// cycle but declared loops.
pub fn validate_workflow(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let steps = spec["steps"].as_array().cloned().unwrap_or_default();
    if steps.is_empty() {
        errs.push(FieldError::required(
            "spec.steps",
            "a workflow has at least one step",
        ));
        return errs;
    }
    let mut names = BTreeSet::new();
    for (i, s) in steps.iter().enumerate() {
        validate_step(i, s, &mut names, &mut errs);
    }
    let known = |n: &Value| n.as_str().is_some_and(|n| names.contains(n));
    match spec.get("start") {
        None => errs.push(FieldError::required("spec.start", "the first step")),
        Some(s) if !known(s) => errs.push(FieldError::not_found("spec.start", s)),
        _ => {}
    }
    for (i, s) in steps.iter().enumerate() {
        for (j, rule) in s["next"].as_array().into_iter().flatten().enumerate() {
            let at = format!("spec.steps[{i}].next[{j}]");
            validate_next_rule(&at, rule, &known, &mut errs);
        }
        for (k, j) in s["join"].as_array().into_iter().flatten().enumerate() {
            if !known(j) {
                errs.push(FieldError::not_found(
                    format!("spec.steps[{i}].join[{k}]"),
                    j,
                ));
            }
        }
    }
    if errs.is_empty() {
        if let Some(cycle) = undeclared_cycle(&spec) {
            errs.push(FieldError::invalid(
                "spec.steps",
                &json!(cycle.join(" -> ")),
                "a cycle must be a declared loop: give the edge that closes it loop.maxIterations",
            ));
        }
    }
    errs
}

/// Step `i`: a unique DNS label for a name, a function, retry bounds.
fn validate_step(i: usize, s: &Value, names: &mut BTreeSet<String>, errs: &mut Errors) {
    let name = s["name"].as_str().unwrap_or_default();
    let field = format!("spec.steps[{i}].name");
    if name.is_empty() {
        errs.push(FieldError::required(field, ""));
    } else if let Some(m) = crate::dns1123_label_error(name) {
        errs.push(FieldError::invalid(field, &s["name"], m));
    } else if !names.insert(name.to_string()) {
        errs.push(FieldError::duplicate(field, &s["name"]));
    }
    if s["function"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required(
            format!("spec.steps[{i}].function"),
            "",
        ));
    }
    if let Some(b) = s.pointer("/retry/backoffSeconds") {
        if b.as_i64().is_none_or(|b| !(0..=300).contains(&b)) {
            errs.push(FieldError::invalid(
                format!("spec.steps[{i}].retry.backoffSeconds"),
                b,
                "must be between 0 and 300, inclusive",
            ));
        }
    }
    if let Some(l) = s.pointer("/retry/limit") {
        if l.as_i64().is_none_or(|l| !(0..=10).contains(&l)) {
            errs.push(FieldError::invalid(
                format!("spec.steps[{i}].retry.limit"),
                l,
                "must be between 0 and 10, inclusive",
            ));
        }
    }
}

/// A `next` rule at `at`: steps that exist to go to, a well-formed
/// `when`, a loop's bound.
fn validate_next_rule(at: &str, rule: &Value, known: &dyn Fn(&Value) -> bool, errs: &mut Errors) {
    let to = rule["to"].as_array().cloned().unwrap_or_default();
    if to.is_empty() {
        errs.push(FieldError::required(
            format!("{at}.to"),
            "the steps that follow",
        ));
    }
    for (k, t) in to.iter().enumerate() {
        if !known(t) {
            errs.push(FieldError::not_found(format!("{at}.to[{k}]"), t));
        }
    }
    if let Some(when) = rule.get("when") {
        validate_when(at, when, errs);
    }
    if let Some(m) = rule.pointer("/loop/maxIterations") {
        if m.as_i64().is_none_or(|m| !(1..=1000).contains(&m)) {
            errs.push(FieldError::invalid(
                format!("{at}.loop.maxIterations"),
                m,
                "must be between 1 and 1000, inclusive",
            ));
        }
    }
}

/// A rule's `when`: the output field it compares and exactly one
/// comparison, of the right type.
fn validate_when(at: &str, when: &Value, errs: &mut Errors) {
    match when.get("path") {
        Some(Value::String(p)) if !p.is_empty() => {}
        None | Some(Value::Null) | Some(Value::String(_)) => errs.push(FieldError::required(
            format!("{at}.when.path"),
            "the output field compared",
        )),
        // YAML reads a bare `n`, `y`, `on` or `no` as a boolean: quote it.
        Some(p) => errs.push(FieldError::invalid(
            format!("{at}.when.path"),
            p,
            "must be a string",
        )),
    }
    let ops = OPERATORS.iter().filter(|o| when.get(**o).is_some()).count();
    if ops != 1 {
        errs.push(FieldError::invalid(
            format!("{at}.when"),
            when,
            format!("must have exactly one of {}", OPERATORS.join(", ")),
        ));
    }
    for op in ["greaterThan", "lessThan"] {
        if when.get(op).is_some_and(|v| !v.is_number()) {
            errs.push(FieldError::invalid(
                format!("{at}.when.{op}"),
                &when[op],
                "must be a number",
            ));
        }
    }
    if when.get("exists").is_some_and(|v| !v.is_boolean()) {
        errs.push(FieldError::invalid(
            format!("{at}.when.exists"),
            &when["exists"],
            "must be true or false",
        ));
    }
}

/// A cycle made of edges that are not declared loops, as step names.
fn undeclared_cycle(spec: &Value) -> Option<Vec<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in workflow::edges(spec)
        .into_iter()
        .filter(|e| e.loop_max.is_none())
    {
        graph.entry(e.from).or_default().insert(e.to);
    }
    // Depth-first search with the path on a stack: a node met again on the path closes a cycle.
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle = path[i..].to_vec();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, &graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// The rules of a WorkflowRun: it names a Workflow, and what it was asked
/// to run does not change.
pub fn validate_run(obj: &Value, old: Option<&Value>) -> Errors {
    let mut errs = Vec::new();
    let workflow = obj.pointer("/spec/workflow");
    match workflow.and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.workflow", "the Workflow to run")),
        Some(w) => {
            if let Some(m) = crate::dns1123_subdomain_error(w) {
                errs.push(FieldError::invalid("spec.workflow", &json!(w), m));
            }
        }
    }
    if let Some(old) = old {
        if obj.get("spec") != old.get("spec") {
            errs.push(FieldError::invalid(
                "spec",
                &json!("..."),
                "field is immutable",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branchy() -> Value {
        json!({"spec": {"start": "check", "steps": [
            {"name": "check", "function": "classify", "retry": {"limit": 2}, "next": [
                {"when": {"path": "grade", "equals": "pass"}, "to": ["congratulate"]},
                {"to": ["retry-later"]}]},
            {"name": "congratulate", "function": "cheer"},
            {"name": "retry-later", "function": "wait", "next": [
                {"to": ["check"], "loop": {"maxIterations": 3}}]}]}})
    }

    #[test]
    fn a_declared_loop_is_no_cycle_and_an_undeclared_one_is() {
        assert!(
            validate_workflow(&branchy()).is_empty(),
            "{:?}",
            validate_workflow(&branchy())
        );
        let mut bad = branchy();
        bad["spec"]["steps"][2]["next"][0]
            .as_object_mut()
            .unwrap()
            .remove("loop");
        let errs = validate_workflow(&bad);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "spec.steps");
        assert!(
            errs[0]
                .to_string()
                .contains("check -> retry-later -> check"),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn unknown_steps_operators_and_fan_in() {
        let wf = json!({"spec": {"start": "nope", "steps": [
            {"name": "a", "function": "f", "next": [{"to": ["b", "c"]}]},
            {"name": "b", "function": "f", "next": [{"when": {"path": "x"}, "to": ["d"]}]},
            {"name": "c", "function": "f"},
            {"name": "d", "join": ["b", "zz"]}]}});
        let fields: Vec<String> = validate_workflow(&wf)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.steps[3].function",
                "spec.start",
                "spec.steps[1].next[0].when",
                "spec.steps[3].join[1]"
            ]
        );
        let fan_in = json!({"spec": {"steps": [{"name": "a"}, {"name": "b"}, {"name": "m", "join": ["a", "b"]}]}});
        assert_eq!(workflow::edges(&fan_in["spec"]).len(), 2);
        assert_eq!(workflow::functions(&branchy()["spec"]).len(), 3);
    }

    #[test]
    fn a_run_names_a_workflow_and_keeps_its_spec() {
        let run = json!({"spec": {"workflow": "grade", "input": {"x": 1}}});
        assert!(validate_run(&run, None).is_empty());
        let fields = |e: Errors| e.into_iter().map(|e| e.field).collect::<Vec<_>>();
        assert_eq!(
            fields(validate_run(&json!({"spec": {}}), None)),
            ["spec.workflow"]
        );
        let changed = json!({"spec": {"workflow": "grade", "input": {"x": 2}}});
        assert_eq!(fields(validate_run(&changed, Some(&run))), ["spec"]);
    }
}
