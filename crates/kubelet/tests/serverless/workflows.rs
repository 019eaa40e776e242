//! Workflows on real Docker (part of `serverless.rs`'s cluster): a branch
//! taken for two inputs, a loop stopped at its bound then fan-out and fan-in,
//! a failing step retried to success and one retried then reported, each
//! run followed by our `kubectl get workflowruns -w`; a cycle, a missing
//! function and a missing workflow refused with 422.

use super::{apply, kubectl_ok};
use crate::common::Cluster;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

fn function(name: &str, body: &str, extra: &str) -> String {
    let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
    format!("---\napiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {{name: {name}}}\nspec:\n{extra}  source: |\n{body}")
}

const WORKFLOWS: &str = r#"
---
apiVersion: serverless.minik8s.io/v1alpha1
kind: Workflow
metadata: {name: grade}
spec:
  start: grade
  steps:
  - name: grade
    function: grade
    next:
    - when: {path: passed, equals: true}
      to: [pass]
    - to: [fail]
  - {name: pass, function: cheer}
  - {name: fail, function: console}
---
apiVersion: serverless.minik8s.io/v1alpha1
kind: Workflow
metadata: {name: count}
spec:
  start: inc
  steps:
  - name: inc
    function: inc
    next:
    - when: {path: "n", lessThan: 100}
      to: [inc]
      loop: {maxIterations: 3}
    - to: [double, square]
  - {name: double, function: double}
  - {name: square, function: square}
  - {name: total, function: total, join: [double, square]}
---
apiVersion: serverless.minik8s.io/v1alpha1
kind: Workflow
metadata: {name: flaky}
spec:
  start: flaky
  steps:
  - {name: flaky, function: flaky, retry: {limit: 3, backoffSeconds: 0}}
---
apiVersion: serverless.minik8s.io/v1alpha1
kind: Workflow
metadata: {name: doomed}
spec:
  start: doomed
  steps:
  - {name: doomed, function: doomed, retry: {limit: 1, backoffSeconds: 1}}
"#;

fn run_manifest(name: &str, workflow: &str, input: Value) -> String {
    format!("---\napiVersion: serverless.minik8s.io/v1alpha1\nkind: WorkflowRun\nmetadata: {{name: {name}}}\nspec:\n  workflow: {workflow}\n  input: {input}\n")
}

fn get_run(c: &Cluster, name: &str) -> Value {
    serde_json::from_slice(
        &c.real_kubectl(&["get", "workflowrun", name, "-o", "json"])
            .stdout,
    )
    .unwrap_or(Value::Null)
}

fn steps(run: &Value) -> Vec<(String, String)> {
    run["status"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("").to_string(),
                s["phase"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

pub async fn check(c: &Cluster) {
    let mut functions = String::new();
    for (name, body, extra) in [
        ("grade", "def handler(event):\n    return {\"score\": event[\"score\"], \"passed\": event[\"score\"] >= 60}", ""),
        ("cheer", "def handler(event):\n    return {\"message\": \"congratulations\", \"score\": event[\"score\"]}", ""),
        ("console", "def handler(event):\n    return {\"message\": \"try again\", \"score\": event[\"score\"]}", ""),
        ("inc", "def handler(event):\n    return {\"n\": event.get(\"n\", 0) + 1}", ""),
        ("double", "def handler(event):\n    return event[\"n\"] * 2", ""),
        ("square", "def handler(event):\n    return event[\"n\"] ** 2", ""),
        ("total", "def handler(event):\n    return {\"sum\": event[\"double\"] + event[\"square\"]}", ""),
        // One instance, so the module's counter sees every attempt.
        ("flaky", "calls = 0\n\ndef handler(event):\n    global calls\n    calls += 1\n    if calls < 3:\n        raise RuntimeError(f\"flaky call {calls}\")\n    return {\"calls\": calls}", "  scale: {maxScale: 1}\n"),
        ("doomed", "def handler(event):\n    raise ValueError(\"always wrong\")", ""),
    ] {
        functions.push_str(&function(name, body, extra));
    }
    kubectl_ok(apply(c, &functions));
    kubectl_ok(apply(c, WORKFLOWS));

    // Our kubectl follows the runs as they change.
    let mut watch = c
        .our_kubectl_command()
        .args(["get", "workflowruns", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("our kubectl get -w");
    let lines = BufReader::new(watch.stdout.take().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                seen.lock().unwrap().push(line);
            }
        })
    };

    let mut runs = String::new();
    for (name, wf, input) in [
        ("grade-high", "grade", json!({"score": 90})),
        ("grade-low", "grade", json!({"score": 20})),
        ("count", "count", json!({"n": 0})),
        ("flaky", "flaky", json!({})),
        ("doomed", "doomed", json!({})),
    ] {
        runs.push_str(&run_manifest(name, wf, input));
    }
    let path = c.root.path().join("runs.yaml");
    std::fs::write(&path, runs).unwrap();
    kubectl_ok(c.real_kubectl(&["create", "-f", path.to_str().unwrap()]));

    let ended = |name: &'static str| async move {
        minik8s_testkit::until(90, &format!("workflow run {name} ended"), || async {
            let run = get_run(c, name);
            let phase = run["status"]["phase"].as_str().unwrap_or("");
            if phase == "Succeeded" || phase == "Failed" {
                Ok(run)
            } else {
                Err(run["status"].to_string())
            }
        })
        .await
    };

    // The branch: the right step for each input.
    let high = ended("grade-high").await;
    assert_eq!(high["status"]["phase"], "Succeeded", "{high}");
    assert_eq!(
        steps(&high),
        [
            ("grade".into(), "Succeeded".into()),
            ("pass".into(), "Succeeded".into())
        ]
    );
    assert_eq!(
        high["status"]["output"],
        json!({"message": "congratulations", "score": 90})
    );
    let step = &high["status"]["steps"][0];
    assert_eq!(step["input"], json!({"score": 90}));
    assert_eq!(step["output"], json!({"score": 90, "passed": true}));
    assert!(step["durationMillis"].as_i64().is_some() && step["startTime"].is_string());
    let low = ended("grade-low").await;
    assert_eq!(
        steps(&low),
        [
            ("grade".into(), "Succeeded".into()),
            ("fail".into(), "Succeeded".into())
        ]
    );
    assert_eq!(
        low["status"]["output"],
        json!({"message": "try again", "score": 20})
    );

    // The loop stops at its bound, then fan-out and fan-in.
    let count = ended("count").await;
    assert_eq!(count["status"]["phase"], "Succeeded", "{count}");
    let names: Vec<String> = steps(&count).into_iter().map(|s| s.0).collect();
    assert_eq!(names[..4], ["inc", "inc", "inc", "inc"]);
    assert_eq!(names.len(), 7, "{names:?}");
    assert_eq!(names[6], "total");
    assert_eq!(
        count["status"]["steps"][3]["message"],
        "loop to inc stopped at its bound of 3"
    );
    assert_eq!(
        count["status"]["steps"][6]["input"],
        json!({"double": 8, "square": 16})
    );
    assert_eq!(count["status"]["output"], json!({"sum": 24}));

    // Retries: to success, and spent then reported.
    let flaky = ended("flaky").await;
    assert_eq!(flaky["status"]["phase"], "Succeeded", "{flaky}");
    assert_eq!(flaky["status"]["steps"][0]["attempts"], 3);
    assert_eq!(flaky["status"]["output"], json!({"calls": 3}));
    let doomed = ended("doomed").await;
    assert_eq!(doomed["status"]["phase"], "Failed", "{doomed}");
    assert_eq!(doomed["status"]["steps"][0]["attempts"], 2);
    let message = doomed["status"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("step doomed failed after 2 attempt(s): 500: ")
            && message.contains("always wrong"),
        "{message}"
    );

    let saw_success = || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("grade-high ") && l.contains("Succeeded"))
    };
    for _ in 0..100 {
        if saw_success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let _ = reader.join();
    let seen = seen.lock().unwrap().clone();
    assert!(saw_success(), "the watch saw grade-high succeed: {seen:?}");
    assert!(
        seen[0].split_whitespace().collect::<Vec<_>>()
            == ["NAME", "WORKFLOW", "PHASE", "STEPS", "DURATION", "AGE"],
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.starts_with("grade-high ") && l.contains("Running")),
        "the watch saw the run running before it succeeded: {seen:?}"
    );
    let table = kubectl_ok(c.real_kubectl(&["get", "wfr"]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("doomed ") && l.contains(" Failed ") && l.contains(" 1/1 ")),
        "{table}"
    );

    // Refused with 422: a cycle outside a declared loop, a missing function, a missing workflow.
    let cycle = apply(c, "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Workflow\nmetadata: {name: cycle}\nspec:\n  start: a\n  steps:\n  - {name: a, function: inc, next: [{to: [b]}]}\n  - {name: b, function: inc, next: [{to: [a]}]}\n");
    let err = String::from_utf8_lossy(&cycle.stderr);
    assert!(!cycle.status.success());
    assert!(
        err.contains("spec.steps: Invalid value: \"a -> b -> a\": a cycle must be a declared loop"),
        "{err}"
    );
    let missing = apply(c, "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Workflow\nmetadata: {name: missing}\nspec:\n  start: a\n  steps:\n  - {name: a, function: nope}\n");
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("spec.steps[0].function: Not found: \"nope\""),
        "{err}"
    );
    let orphan = apply(c, &run_manifest("orphan", "nowhere", json!({})));
    let err = String::from_utf8_lossy(&orphan.stderr);
    assert!(
        err.contains("spec.workflow: Not found: \"nowhere\""),
        "{err}"
    );
}
