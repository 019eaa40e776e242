//! Workflows of serverless functions (`serverless.minik8s.io/v1alpha1`): a
//! Workflow is a graph of steps, each calling a Function with the output of
//! the step before; a WorkflowRun is one execution with its input, each
//! step's status and the output. The course project's left/right branch is
//! a `next` rule with a `when`.
//!
//! ```text
//!   start ─▶ check ──when .grade == "pass"──▶ congratulate
//!                 └─otherwise──────────────▶ retry-later ──loop (≤ 3)──▶ check
//!   fan-out: next[].to: [a, b]          fan-in: join: [a, b] (input {a: .., b: ..})
//! ```
//!
//! Semantics (the serverless executor, `crates/serverless/src/workflow/`):
//! a step's `next` rules are tried in order and the first whose `when`
//! holds (or that has none) is taken; its `to` steps all start with the
//! step's output as input (fan-out). A `loop` rule is taken at most
//! `maxIterations` times in a run, then skipped. A step with `join` starts
//! once each joined step has finished since it last ran, with the input
//! `{step: output, ...}` (fan-in). A failing call is tried again
//! `retry.limit` times, `backoffSeconds` doubling; then the run fails.
//!
//! Validation (`minik8s_validation::workflow`) refuses unknown steps and
//! cycles that are not declared loops; that each function exists is checked
//! by the apiserver.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const KIND: &str = "Workflow";
pub const RUN_KIND: &str = "WorkflowRun";
/// Comparisons a `when` may make on a field of the output.
pub const OPERATORS: &[&str] = &["equals", "notEquals", "greaterThan", "lessThan", "exists"];
/// The most step executions one run may make (fan-out inside loops is bounded too).
pub const MAX_EXECUTIONS: usize = 1000;
/// The label a run gets with its Workflow's name (`kubectl get workflowruns -l`).
pub const WORKFLOW_LABEL: &str = "serverless.minik8s.io/workflow";

fn api_version() -> String {
    crate::serverless::API_VERSION.to_string()
}
fn workflow_kind() -> String {
    KIND.to_string()
}
fn run_kind() -> String {
    RUN_KIND.to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "workflow_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WorkflowSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// The step a run begins with (given the run's input).
    #[serde(default)]
    pub start: String,
    #[serde(default)]
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub name: String,
    /// A Function in the Workflow's namespace.
    #[serde(default)]
    pub function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Where to go after this step: the first rule that holds is taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<NextRule>,
    /// Steps that must all have finished before this one (fan-in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Further attempts after a failed call (0 to 10; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i32>,
    /// Wait before the first retry, doubled for each next one (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    #[serde(default)]
    pub to: Vec<String>,
    /// Declares this edge as closing a loop, taken at most `maxIterations` times.
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    pub loop_: Option<Loop>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loop {
    pub max_iterations: i64,
}

/// A test on one field of a step's output (`path`: dotted, `items.0.name`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct When {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_equals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greater_than: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub less_than: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
}

/// The field at a dotted path (`.` or empty: the value itself).
pub fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = value;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        at = match at {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// JSON equality with numbers compared as numbers (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

impl When {
    /// Whether the test holds for `output`.
    pub fn holds(&self, output: &Value) -> bool {
        let field = lookup(output, &self.path);
        if let Some(e) = self.exists {
            return field.is_some() == e;
        }
        let Some(field) = field else {
            // notEquals holds for a missing field, as for any other value.
            return self.not_equals.is_some();
        };
        if let Some(v) = &self.equals {
            return same(field, v);
        }
        if let Some(v) = &self.not_equals {
            return !same(field, v);
        }
        let n = field.as_f64();
        if let Some(x) = self.greater_than {
            return n.is_some_and(|n| n > x);
        }
        if let Some(x) = self.less_than {
            return n.is_some_and(|n| n < x);
        }
        false
    }
}

impl Step {
    pub fn retry_limit(&self) -> u32 {
        self.retry
            .as_ref()
            .and_then(|r| r.limit)
            .unwrap_or(0)
            .max(0) as u32
    }

    /// The wait before retry number `n` (1-based): backoff × 2^(n-1), at most 5 minutes.
    pub fn backoff(&self, n: u32) -> std::time::Duration {
        let base = self
            .retry
            .as_ref()
            .and_then(|r| r.backoff_seconds)
            .unwrap_or(1)
            .max(0) as u64;
        std::time::Duration::from_secs((base << n.saturating_sub(1).min(16)).min(300))
    }
}

impl WorkflowSpec {
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }
}

namespaced_resource!(
    Workflow,
    crate::serverless::API_VERSION,
    crate::serverless::GROUP,
    "v1alpha1",
    "Workflow",
    "workflows"
);

/// One execution of a Workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "run_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RunSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    /// The Workflow's name (same namespace).
    #[serde(default)]
    pub workflow: String,
    /// The first step's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    /// A step not started because the run failed first.
    pub const SKIPPED: &str = "Skipped";
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// Pending, Running, Succeeded or Failed.
    #[serde(default)]
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The last step's output (or `{step: output}` when several steps end the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every step execution, in the order they began.
    #[serde(default)]
    pub steps: Vec<StepStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    pub name: String,
    #[serde(default)]
    pub function: String,
    /// How many times this step ran before in the run (0 the first time).
    #[serde(default)]
    pub iteration: i32,
    /// Pending, Running, Succeeded, Failed or Skipped.
    #[serde(default)]
    pub phase: String,
    /// Calls made (1 + retries).
    #[serde(default)]
    pub attempts: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The last failed call's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_millis: Option<i64>,
    /// The index of the `next` rule taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<i32>,
    /// The steps this one started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<String>,
    /// Why a rule was passed over (a loop at its bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

namespaced_resource!(
    WorkflowRun,
    crate::serverless::API_VERSION,
    crate::serverless::GROUP,
    "v1alpha1",
    "WorkflowRun",
    "workflowruns"
);

/// One edge of the graph: from a step to the steps after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// A declared loop edge (may close a cycle).
    pub loop_max: Option<i64>,
}

/// The edges of a Workflow's spec (next rules and joins), as written.
pub fn edges(spec: &Value) -> Vec<Edge> {
    let mut out = Vec::new();
    for step in spec["steps"].as_array().into_iter().flatten() {
        let name = step["name"].as_str().unwrap_or_default().to_string();
        for rule in step["next"].as_array().into_iter().flatten() {
            for to in rule["to"].as_array().into_iter().flatten() {
                out.push(Edge {
                    from: name.clone(),
                    to: to.as_str().unwrap_or_default().to_string(),
                    loop_max: rule.pointer("/loop/maxIterations").and_then(Value::as_i64),
                });
            }
        }
        for from in step["join"].as_array().into_iter().flatten() {
            out.push(Edge {
                from: from.as_str().unwrap_or_default().to_string(),
                to: name.clone(),
                loop_max: None,
            });
        }
    }
    out
}

/// The functions a Workflow calls (for the apiserver's existence check).
pub fn functions(spec: &Value) -> Vec<(usize, String)> {
    spec["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s["function"].as_str()?.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn when_tests_a_field_of_the_output() {
        let out = json!({"grade": "pass", "score": 7, "items": [{"n": 1.0}]});
        let w = |v: Value| serde_json::from_value::<When>(v).unwrap();
        assert!(w(json!({"path": "grade", "equals": "pass"})).holds(&out));
        assert!(!w(json!({"path": "grade", "notEquals": "pass"})).holds(&out));
        assert!(w(json!({"path": "missing", "notEquals": "pass"})).holds(&out));
        assert!(w(json!({"path": "score", "greaterThan": 6.5})).holds(&out));
        assert!(!w(json!({"path": "score", "lessThan": 7})).holds(&out));
        assert!(w(json!({"path": "items.0.n", "equals": 1})).holds(&out));
        assert!(w(json!({"path": "items.1", "exists": false})).holds(&out));
        assert!(!w(json!({"path": "grade", "greaterThan": 1})).holds(&out));
        assert!(w(json!({"path": ".", "equals": 3})).holds(&json!(3)));
    }

    #[test]
    fn retry_backoff_doubles_and_is_bounded() {
        let step: Step = serde_json::from_value(json!({"name": "a", "function": "f",
            "retry": {"limit": 3, "backoffSeconds": 2}}))
        .unwrap();
        assert_eq!(step.retry_limit(), 3);
        let secs: Vec<u64> = (1..=3).map(|n| step.backoff(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8]);
        assert_eq!(step.backoff(40).as_secs(), 300);
    }
}
