//! Serverless on real Docker: a Python Function (runtime image from
//! `scripts/images.sh --functions`) called through the gateway cold (0 → 1
//! instance) and warm; 40 concurrent callers scale it past one instance with
//! every call answered; an asynchronous call's result fetched by id; back to
//! zero pods after the idle window; a syntax error reported in status and
//! by the gateway; invalid fields refused with 422. Then workflows, failures
//! and triggers on the same cluster (`serverless/workflows.rs`,
//! `failures.rs`, `triggers.rs`).

mod common;
#[path = "serverless/failures.rs"]
mod failures;
#[path = "serverless/triggers.rs"]
mod triggers;
#[path = "serverless/workflows.rs"]
mod workflows;

use common::Cluster;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HELLO: &str = r#"
apiVersion: serverless.minik8s.io/v1alpha1
kind: Function
metadata:
  name: hello
spec:
  runtime: python
  source: |
    import time

    def handler(event):
        time.sleep(event.get("sleep", 0))
        return {"hello": event.get("name", "world")}
  scale:
    maxScale: 5
    targetConcurrency: 4
    stableWindow: 20s
    idleWindow: 8s
"#;

fn kubectl_ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn apply(c: &Cluster, manifest: &str) -> std::process::Output {
    let path = c.root.path().join("fn.yaml");
    std::fs::write(&path, manifest).unwrap();
    c.real_kubectl(&["apply", "-f", path.to_str().unwrap()])
}

async fn call(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    match http.post(url).json(&body).send().await {
        Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
        Err(e) => (0, json!(e.to_string())),
    }
}

/// What a failed check shows: the function's objects and the kubelet's log.
fn dump(c: &Cluster) -> String {
    let get = c.real_kubectl(&["get", "deploy,rs,pods,endpointslices", "-o", "wide"]);
    let describe = c.real_kubectl(&["describe", "pods"]);
    format!(
        "{}{}\n{}\n{}",
        String::from_utf8_lossy(&get.stdout),
        String::from_utf8_lossy(&get.stderr),
        String::from_utf8_lossy(&describe.stdout),
        common::tail(&c.kubelet_log(), 30)
    )
}

fn replicas(c: &Cluster) -> i64 {
    let out = c.real_kubectl(&[
        "get",
        "deploy",
        "hello-fn",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_scales_from_zero_under_load_and_back() {
    let c = Cluster::start().await;
    let images = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/images.sh"
        ))
        .arg("--functions")
        .env("DOCKER_HOST", &c.dockerd.socket)
        .output()
        .expect("running scripts/images.sh");
    assert!(
        images.status.success(),
        "building the function runtime: {}",
        String::from_utf8_lossy(&images.stderr)
    );
    c.spawn_control_plane(controller_manager::Config::default());
    let config = minik8s_serverless::Config {
        listen: ([127, 0, 0, 1], 0).into(),
        ..Default::default()
    };
    let gateway = minik8s_serverless::start(c.client.clone(), config)
        .await
        .unwrap();
    let url = format!("http://{gateway}/function/default/hello");

    kubectl_ok(apply(&c, HELLO));
    triggers::start(&c);
    let f = minik8s_testkit::until(30, "the Function Ready at zero instances", || async {
        let f: Value = serde_json::from_slice(
            &c.real_kubectl(&["get", "function", "hello", "-o", "json"])
                .stdout,
        )
        .unwrap_or(Value::Null);
        let ready = f["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        if ready && f["status"]["desiredInstances"] == 0 {
            Ok(f)
        } else {
            Err(f["status"].to_string())
        }
    })
    .await;
    assert_eq!(
        f["status"]["url"],
        "http://serverless-gateway.kube-system.svc.cluster.local/function/default/hello"
    );
    assert_eq!(
        replicas(&c),
        0,
        "minScale 0: no instance before the first call"
    );

    // Cold: the call is held while an instance starts.
    let http = reqwest::Client::new();
    let started = Instant::now();
    let (code, body) = call(&http, &url, json!({"name": "minik8s"})).await;
    let cold = started.elapsed();
    assert_eq!(
        (code, body),
        (200, json!({"hello": "minik8s"})),
        "{}",
        dump(&c)
    );
    assert!(replicas(&c) >= 1);
    let started = Instant::now();
    let (code, _) = call(&http, &url, json!({})).await;
    let warm = started.elapsed();
    assert_eq!(code, 200);
    eprintln!("cold call {cold:?}, warm call {warm:?}");
    assert!(warm < cold, "warm {warm:?} is faster than cold {cold:?}");

    // 40 concurrent callers, each call 0.3 s: more than one instance, every call answered.
    let peak = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let peak = peak.clone();
        let client = c.client.clone();
        tokio::spawn(async move {
            let api = client.dynamic(
                minik8s_api::registry::by_kind("apps/v1", "Deployment").unwrap(),
                Some("default"),
            );
            loop {
                if let Ok(d) = api.get("hello-fn").await {
                    let ready = d["status"]["readyReplicas"].as_u64().unwrap_or(0) as usize;
                    peak.fetch_max(ready, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let callers: Vec<_> = (0..40)
        .map(|i| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..12 {
                    answers.push(
                        call(
                            &http,
                            &url,
                            json!({"name": format!("caller-{i}"), "sleep": 0.3}),
                        )
                        .await,
                    );
                }
                answers
            })
        })
        .collect();
    for (i, t) in callers.into_iter().enumerate() {
        for (code, body) in t.await.unwrap() {
            assert_eq!((code, body), (200, json!({"hello": format!("caller-{i}")})));
        }
    }
    watcher.abort();
    let peak = peak.load(Ordering::Relaxed);
    eprintln!("40 callers: {peak} instances ready at the peak");
    assert!(
        peak > 1,
        "40 concurrent callers scaled it past one instance"
    );

    // Asynchronous: an id now, the result later.
    let accepted = http
        .post(format!("{url}?async=true"))
        .json(&json!({"name": "later", "sleep": 0.5}))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let id = accepted.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let result = minik8s_testkit::until(20, "the async call's result", || async {
        let v: Value = http
            .get(format!("http://{gateway}/calls/{id}"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        (v["status"] == "Succeeded")
            .then_some(v.clone())
            .ok_or(v.to_string())
    })
    .await;
    assert_eq!(result["result"], json!({"hello": "later"}));

    // Our kubectl: invoke, synchronously and by id.
    let gw = format!("http://{gateway}");
    let out = kubectl_ok(c.our_kubectl(&[
        "invoke",
        "hello",
        "--data",
        r#"{"name": "cli"}"#,
        "--gateway",
        &gw,
    ]));
    assert_eq!(out.trim(), r#"{"hello":"cli"}"#);
    let accepted: Value = serde_json::from_str(&kubectl_ok(c.our_kubectl(&[
        "invoke",
        "hello",
        "--async",
        "--gateway",
        &gw,
    ])))
    .unwrap();
    let id = accepted["id"].as_str().unwrap().to_string();
    minik8s_testkit::until(20, "kubectl invoke --call shows the result", || async {
        let out = kubectl_ok(c.our_kubectl(&["invoke", "hello", "--call", &id, "--gateway", &gw]));
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        (v["result"] == json!({"hello": "world"}))
            .then_some(())
            .ok_or(out)
    })
    .await;
    let missing = c.our_kubectl(&["invoke", "nope", "--gateway", &gw]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains(
            "Error from server (NotFound): functions.serverless.minik8s.io \"nope\" not found"
        ),
        "{err}"
    );

    // Idle for the idle window: back to zero pods.
    let quiet = Instant::now();
    minik8s_testkit::until(60, "zero pods after the idle window", || async {
        let pods = kubectl_ok(c.real_kubectl(&[
            "get",
            "pods",
            "-l",
            "serverless.minik8s.io/function=hello",
            "-o",
            "name",
        ]));
        (replicas(&c) == 0 && pods.trim().is_empty())
            .then_some(())
            .ok_or(pods)
    })
    .await;
    eprintln!(
        "back to zero pods {:?} after the last call",
        quiet.elapsed()
    );

    // A syntax error: in status, and the gateway says so instead of waiting.
    kubectl_ok(apply(
        &c,
        "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {name: broken}\nspec:\n  source: |\n    def handler(event:\n        return 1\n",
    ));
    let cond = minik8s_testkit::until(30, "SourceReady False", || async {
        let f: Value = serde_json::from_slice(
            &c.real_kubectl(&["get", "function", "broken", "-o", "json"])
                .stdout,
        )
        .unwrap_or(Value::Null);
        f["status"]["conditions"]
            .as_array()
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "SourceReady" && c["status"] == "False")
                    .cloned()
            })
            .ok_or(f["status"].to_string())
    })
    .await;
    assert_eq!(cond["reason"], "SyntaxError");
    assert!(
        cond["message"].as_str().unwrap().starts_with("line 1: "),
        "{cond}"
    );
    let (code, body) = call(
        &http,
        &format!("http://{gateway}/function/default/broken"),
        json!({}),
    )
    .await;
    assert_eq!(code, 503);
    assert!(
        body["error"].as_str().unwrap().contains("SyntaxError"),
        "{body}"
    );
    let table = kubectl_ok(c.real_kubectl(&["get", "functions"]));
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "RUNTIME", "INSTANCES", "READY", "URL", "AGE"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("broken ") && l.contains(" False ")),
        "{table}"
    );

    // Invalid fields: 422 with the field path.
    let bad = apply(&c, "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {name: bad}\nspec:\n  source: x\n  scale: {minScale: 3, maxScale: 2}\n");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("spec.scale.maxScale"), "{err}");

    workflows::check(&c).await;
    failures::check(&c, gateway).await;
    triggers::check(&c).await;
}
