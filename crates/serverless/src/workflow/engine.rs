//! The decisions of a workflow run, apart from I/O: a run's status is the
//! whole state (every step execution with its phase), so the executor can
//! stop and resume from what it last wrote. Given a finished execution,
//! [`finish`] records it and appends the executions it starts (the first
//! `next` rule that holds, a loop edge only while under its bound, a join
//! once all its steps have finished); [`conclude`] ends the run when
//! nothing is pending or running.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use minik8s_api::workflow::{phase, RunStatus, StepStatus, WorkflowSpec, MAX_EXECUTIONS};
use serde_json::{json, Map, Value};

/// What one step execution ended with.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Succeeded(Value),
    /// The last call's error, after every retry.
    Failed(String),
}

fn is(s: &StepStatus, p: &str) -> bool {
    s.phase == p
}

/// An execution of `name` waiting to start, its iteration counted from the run so far.
fn pending(spec: &WorkflowSpec, steps: &[StepStatus], name: &str, input: Value) -> StepStatus {
    StepStatus {
        name: name.to_string(),
        function: spec
            .step(name)
            .map(|s| s.function.clone())
            .unwrap_or_default(),
        iteration: steps.iter().filter(|s| s.name == name).count() as i32,
        phase: phase::PENDING.to_string(),
        input: Some(input),
        ..Default::default()
    }
}

/// A new run: the start step pending with the run's input.
pub fn begin(spec: &WorkflowSpec, input: Value, now: Time) -> RunStatus {
    RunStatus {
        phase: phase::RUNNING.to_string(),
        start_time: Some(now),
        steps: vec![pending(spec, &[], &spec.start, input)],
        ..Default::default()
    }
}

/// The indices of executions to start now (none once the run has failed).
pub fn startable(status: &RunStatus) -> Vec<usize> {
    if status.phase != phase::RUNNING {
        return Vec::new();
    }
    (0..status.steps.len())
        .filter(|&i| is(&status.steps[i], phase::PENDING))
        .collect()
}

/// Records that execution `i` ended, and what it starts.
pub fn finish(spec: &WorkflowSpec, status: &mut RunStatus, i: usize, outcome: Outcome, now: Time) {
    let started = status.steps[i].start_time.clone().unwrap_or(now.clone());
    let rec = &mut status.steps[i];
    rec.completion_time = Some(now.clone());
    rec.duration_millis = Some((now.0.as_millisecond() - started.0.as_millisecond()).max(0));
    let output = match outcome {
        Outcome::Failed(error) => {
            rec.phase = phase::FAILED.to_string();
            rec.error = Some(error.clone());
            let attempts = rec.attempts;
            let name = rec.name.clone();
            fail(
                status,
                format!("step {name} failed after {attempts} attempt(s): {error}"),
            );
            return;
        }
        Outcome::Succeeded(output) => {
            rec.phase = phase::SUCCEEDED.to_string();
            rec.error = None;
            rec.output = Some(output.clone());
            output
        }
    };
    let name = status.steps[i].name.clone();
    let Some(step) = spec.step(&name) else {
        return;
    };
    // The first rule that holds; a loop edge at its bound is passed over.
    let mut chosen = None;
    let mut notes = Vec::new();
    for (j, rule) in step.next.iter().enumerate() {
        if !rule.when.as_ref().is_none_or(|w| w.holds(&output)) {
            continue;
        }
        if let Some(l) = &rule.loop_ {
            let taken = status
                .steps
                .iter()
                .filter(|s| s.name == name && s.rule == Some(j as i32))
                .count() as i64;
            if taken >= l.max_iterations {
                notes.push(format!(
                    "loop to {} stopped at its bound of {}",
                    rule.to.join(", "),
                    l.max_iterations
                ));
                continue;
            }
        }
        chosen = Some((j, rule.to.clone()));
        break;
    }
    let mut new = Vec::new();
    if let Some((j, to)) = &chosen {
        status.steps[i].rule = Some(*j as i32);
        status.steps[i].next = to.clone();
        for t in to {
            new.push(pending(spec, &status.steps, t, output.clone()));
        }
    }
    if !notes.is_empty() {
        status.steps[i].message = Some(notes.join("; "));
    }
    // Fan-in: a join step starts once each of its steps finished since it last ran.
    for j in spec.steps.iter().filter(|s| s.join.contains(&name)) {
        let runs = status.steps.iter().filter(|s| s.name == j.name).count();
        let mut input = Map::new();
        for member in &j.join {
            let done: Vec<&StepStatus> = status
                .steps
                .iter()
                .filter(|s| &s.name == member && is(s, phase::SUCCEEDED))
                .collect();
            if done.len() <= runs {
                break;
            }
            let last = done.last().and_then(|s| s.output.clone());
            input.insert(member.clone(), last.unwrap_or(Value::Null));
        }
        if input.len() == j.join.len() {
            new.push(pending(spec, &status.steps, &j.name, Value::Object(input)));
            status.steps[i].next.push(j.name.clone());
        }
    }
    if status.steps.len() + new.len() > MAX_EXECUTIONS {
        fail(
            status,
            format!("the run would make more than {MAX_EXECUTIONS} step executions"),
        );
        return;
    }
    status.steps.extend(new);
}

/// The run fails: nothing pending starts.
fn fail(status: &mut RunStatus, message: String) {
    status.phase = phase::FAILED.to_string();
    status.message.get_or_insert(message);
    for s in &mut status.steps {
        if is(s, phase::PENDING) {
            s.phase = phase::SKIPPED.to_string();
        }
    }
}

/// Whether the run is over (nothing pending or running); if so, its final
/// phase, output and completion time are set.
pub fn conclude(spec: &WorkflowSpec, status: &mut RunStatus, now: Time) -> bool {
    let busy = status
        .steps
        .iter()
        .any(|s| is(s, phase::PENDING) || is(s, phase::RUNNING));
    if busy {
        return false;
    }
    if status.phase != phase::FAILED {
        status.phase = phase::SUCCEEDED.to_string();
        status.output = Some(output(spec, status));
    }
    status.completion_time.get_or_insert(now);
    true
}

/// The run's output: the output of the one execution that ended its branch
/// (started nothing and feeds no join), or `{step: output}` when several did.
fn output(spec: &WorkflowSpec, status: &RunStatus) -> Value {
    let joined = |name: &str| spec.steps.iter().any(|s| s.join.iter().any(|j| j == name));
    let ends: Vec<&StepStatus> = status
        .steps
        .iter()
        .filter(|s| is(s, phase::SUCCEEDED) && s.next.is_empty() && !joined(&s.name))
        .collect();
    match ends.as_slice() {
        [] => Value::Null,
        [one] => one.output.clone().unwrap_or(Value::Null),
        many => {
            let mut out = Map::new();
            for s in many {
                out.insert(s.name.clone(), s.output.clone().unwrap_or(json!(null)));
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Time {
        minik8s_api::meta::time_of(
            chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap(),
        )
    }

    fn spec(v: Value) -> WorkflowSpec {
        serde_json::from_value(v).unwrap()
    }

    /// Runs a workflow with `f(step, input) -> outcome` as the functions, one execution at a time.
    fn run(spec: &WorkflowSpec, input: Value, f: impl Fn(&str, &Value) -> Outcome) -> RunStatus {
        let mut status = begin(spec, input, at(0));
        let mut t = 0;
        while let Some(&i) = startable(&status).first() {
            t += 10;
            status.steps[i].phase = phase::RUNNING.into();
            status.steps[i].start_time = Some(at(t));
            status.steps[i].attempts = 1;
            let out = f(
                &status.steps[i].name,
                status.steps[i].input.as_ref().unwrap(),
            );
            finish(spec, &mut status, i, out, at(t + 5));
        }
        assert!(conclude(spec, &mut status, at(t + 6)));
        status
    }

    fn names(s: &RunStatus) -> Vec<String> {
        s.steps.iter().map(|s| s.name.clone()).collect()
    }

    #[test]
    fn a_branch_follows_the_output() {
        let wf = spec(json!({"start": "grade", "steps": [
            {"name": "grade", "function": "grade", "next": [
                {"when": {"path": "score", "greaterThan": 59}, "to": ["pass"]},
                {"to": ["fail"]}]},
            {"name": "pass", "function": "cheer"},
            {"name": "fail", "function": "console"}]}));
        let f = |step: &str, input: &Value| match step {
            "grade" => Outcome::Succeeded(input.clone()),
            other => Outcome::Succeeded(json!({"by": other})),
        };
        let high = run(&wf, json!({"score": 90}), f);
        assert_eq!(names(&high), ["grade", "pass"]);
        assert_eq!(high.output, Some(json!({"by": "pass"})));
        assert_eq!(high.steps[0].rule, Some(0));
        assert_eq!(high.steps[1].duration_millis, Some(5));
        let low = run(&wf, json!({"score": 20}), f);
        assert_eq!(names(&low), ["grade", "fail"]);
        assert_eq!(low.phase, phase::SUCCEEDED);
    }

    #[test]
    fn a_loop_stops_at_its_bound() {
        let wf = spec(json!({"start": "inc", "steps": [
            {"name": "inc", "function": "inc", "next": [
                {"when": {"path": "n", "lessThan": 100}, "to": ["inc"], "loop": {"maxIterations": 3}}]}]}));
        let s = run(&wf, json!({"n": 0}), |_, i| {
            Outcome::Succeeded(json!({"n": i["n"].as_i64().unwrap() + 1}))
        });
        assert_eq!(names(&s), ["inc"; 4]);
        let iterations: Vec<i32> = s.steps.iter().map(|s| s.iteration).collect();
        assert_eq!(iterations, [0, 1, 2, 3]);
        assert_eq!(s.output, Some(json!({"n": 4})));
        assert_eq!(
            s.steps[3].message.as_deref(),
            Some("loop to inc stopped at its bound of 3")
        );
    }

    #[test]
    fn fan_out_then_fan_in() {
        let wf = spec(json!({"start": "split", "steps": [
            {"name": "split", "function": "f", "next": [{"to": ["a", "b"]}]},
            {"name": "a", "function": "f"},
            {"name": "b", "function": "f"},
            {"name": "merge", "function": "f", "join": ["a", "b"]}]}));
        let s = run(&wf, json!(1), |step, i| match step {
            "merge" => Outcome::Succeeded(
                json!({"sum": i["a"].as_i64().unwrap() + i["b"].as_i64().unwrap()}),
            ),
            "a" => Outcome::Succeeded(json!(i.as_i64().unwrap() + 10)),
            "b" => Outcome::Succeeded(json!(i.as_i64().unwrap() + 20)),
            _ => Outcome::Succeeded(i.clone()),
        });
        assert_eq!(names(&s), ["split", "a", "b", "merge"]);
        assert_eq!(s.steps[3].input, Some(json!({"a": 11, "b": 21})));
        assert_eq!(s.output, Some(json!({"sum": 32})));
    }

    #[test]
    fn a_failed_step_fails_the_run_and_skips_what_waits() {
        let wf = spec(json!({"start": "split", "steps": [
            {"name": "split", "function": "f", "next": [{"to": ["a", "b"]}]},
            {"name": "a", "function": "f"},
            {"name": "b", "function": "f"}]}));
        let s = run(&wf, json!(1), |step, _| match step {
            "a" => Outcome::Failed("500: boom".into()),
            _ => Outcome::Succeeded(json!(1)),
        });
        assert_eq!(s.phase, phase::FAILED);
        let phases: Vec<&str> = s.steps.iter().map(|s| s.phase.as_str()).collect();
        assert_eq!(phases, ["Succeeded", "Failed", "Skipped"]);
        assert_eq!(
            s.message.as_deref(),
            Some("step a failed after 1 attempt(s): 500: boom")
        );
        assert_eq!(s.output, None);
    }

    #[test]
    fn several_ends_give_an_output_per_step() {
        let wf = spec(json!({"start": "s", "steps": [
            {"name": "s", "function": "f", "next": [{"to": ["a", "b"]}]},
            {"name": "a", "function": "f"}, {"name": "b", "function": "f"}]}));
        let s = run(&wf, json!(null), |step, _| Outcome::Succeeded(json!(step)));
        assert_eq!(s.output, Some(json!({"a": "a", "b": "b"})));
    }

    #[test]
    fn runaway_fan_out_is_bounded() {
        let wf = spec(json!({"start": "s", "steps": [
            {"name": "s", "function": "f", "next": [{"to": ["s", "t"], "loop": {"maxIterations": 1000}}]},
            {"name": "t", "function": "f", "next": [{"to": ["s"], "loop": {"maxIterations": 1000}}]}]}));
        let s = run(&wf, json!(null), |_, _| Outcome::Succeeded(json!(1)));
        assert_eq!(s.phase, phase::FAILED);
        assert!(s.steps.len() <= MAX_EXECUTIONS);
        assert!(s.message.unwrap().contains("more than 1000"));
    }
}
