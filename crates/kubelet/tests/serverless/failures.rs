//! Failures on real Docker (part of `serverless.rs`'s cluster): an instance
//! killed in the middle of a call (the call is sent again to the other), a
//! new version rolled out under steady calls (none fails), and a function
//! whose pods crash (held calls fail fast with the reason, not after the
//! cold-start timeout).

use super::{apply, call, dump, kubectl_ok};
use crate::common::Cluster;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn slow(version: u32) -> String {
    format!(
        "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {{name: slow}}\nspec:\n  source: |\n    import time\n\n    def handler(event):\n        time.sleep(event.get(\"sleep\", 0))\n        return {{\"version\": {version}}}\n  scale: {{minScale: 2, maxScale: 2}}\n"
    )
}

fn ready_replicas(c: &Cluster, deploy: &str) -> (i64, i64, i64) {
    let d: Value = serde_json::from_slice(
        &c.real_kubectl(&["get", "deploy", deploy, "-o", "json"])
            .stdout,
    )
    .unwrap_or(Value::Null);
    let n = |p: &str| d.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    (
        n("/status/readyReplicas"),
        n("/status/updatedReplicas"),
        n("/status/replicas"),
    )
}

pub async fn check(c: &Cluster, gateway: SocketAddr) {
    let http = reqwest::Client::new();
    let url = format!("http://{gateway}/function/default/slow");
    kubectl_ok(apply(c, &slow(1)));
    minik8s_testkit::until(60, "two instances of slow", || async {
        let r = ready_replicas(c, "slow-fn");
        (r.0 == 2).then_some(()).ok_or(format!("{r:?}"))
    })
    .await;

    // Two slow calls, one per instance (least busy first); one instance killed mid-call.
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move { call(&http, &url, json!({"sleep": 2})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let docker = |args: &[&str]| {
        Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", &c.dockerd.socket)
            .output()
            .expect("docker")
    };
    let ids = docker(&[
        "ps",
        "-q",
        "--filter",
        "label=io.minik8s.container.name=function",
    ]);
    let ids = String::from_utf8_lossy(&ids.stdout).to_string();
    let victim = ids.lines().next().expect("a running function container");
    assert!(docker(&["kill", victim]).status.success());
    for t in calls {
        let (code, body) = t.await.unwrap();
        assert_eq!(
            (code, body),
            (200, json!({"version": 1})),
            "a call whose instance died is sent again: {}",
            dump(c)
        );
    }
    minik8s_testkit::until(60, "the killed instance restarted", || async {
        let r = ready_replicas(c, "slow-fn");
        (r.0 == 2).then_some(()).ok_or(format!("{r:?}"))
    })
    .await;

    // A new version under steady calls: every call answered, by one version or the other.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..6)
        .map(|_| {
            let (http, url, stop, answered) =
                (http.clone(), url.clone(), stop.clone(), answered.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let (code, body) = call(&http, &url, json!({"sleep": 0.2})).await;
                    if code != 200 {
                        failures.push((code, body));
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    kubectl_ok(apply(c, &slow(2)));
    minik8s_testkit::until(90, "version 2 rolled out under calls", || async {
        let (code, body) = call(&http, &url, json!({})).await;
        let r = ready_replicas(c, "slow-fn");
        (code == 200 && body == json!({"version": 2}) && r == (2, 2, 2))
            .then_some(())
            .ok_or(format!("{code} {body} {r:?}"))
    })
    .await;
    let rollout = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for t in callers {
        failures.extend(t.await.unwrap());
    }
    let answered = answered.load(Ordering::Relaxed);
    eprintln!(
        "rollout under 6 callers: {rollout:?}, {answered} calls, {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "calls failed during the rollout: {failures:?}"
    );
    assert!(answered > 20, "{answered} calls during the rollout");

    // Pods that crash: a held call fails fast with the reason.
    kubectl_ok(apply(c, "apiVersion: serverless.minik8s.io/v1alpha1\nkind: Function\nmetadata: {name: crashy}\nspec:\n  source: |\n    import no_such_module\n\n    def handler(event):\n        return 1\n"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let (code, body) = call(
        &http,
        &format!("http://{gateway}/function/default/crashy"),
        json!({}),
    )
    .await;
    let waited = started.elapsed();
    assert_eq!(code, 503, "{body}");
    let message = body["error"].as_str().unwrap_or("");
    assert!(
        message.starts_with("function default/crashy cannot start an instance: pod crashy-fn-")
            && message.contains("CrashLoopBackOff"),
        "{message}"
    );
    assert!(
        waited < Duration::from_secs(30),
        "failed after {waited:?}, not the 60 s timeout"
    );
    eprintln!("a crashing function failed the call after {waited:?}: {message}");
}
