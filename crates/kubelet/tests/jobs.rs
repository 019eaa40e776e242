//! Jobs on a real (private) dockerd with the scheduler and every controller:
//! 5 completions 2 at a time never run more than 2 pods and end Complete;
//! an Indexed Job's pods see their index; a failing Job stops at its
//! backoffLimit with BackoffLimitExceeded; a pod failure policy ignores or
//! fails at once on exit codes, a success policy completes an Indexed Job
//! early, backoffLimitPerIndex fails indexes one by one; the real kubectl waits for
//! completion and shows Kubernetes' columns; ttlSecondsAfterFinished
//! removes a finished Job; a Job and a Deployment claiming fake GPUs
//! (Dynamic Resource Allocation) see the devices allocated to them.

mod common;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use minik8s_api::registry;
use minik8s_client::ListParams;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

fn job(name: &str, spec: Value, script: &str) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                            "command": ["sh", "-c", script]}]}}}});
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

fn condition(j: &Value, type_: &str) -> Option<Value> {
    j["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_complete_fail_and_index_their_pods() {
    // The node publishes two make-believe GPUs (DRA's example driver).
    let c = Cluster::start_with(|_| vec!["--fake-gpus".into(), "2".into()]).await;
    c.spawn_control_plane(controller_manager::Config::default());
    let jobs = c.client.dynamic(registry::of::<Job>(), Some("default"));
    let pods = c.pods();

    // doc/workloads.md's example: 5 completions, 2 at a time, a second each.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/job.yaml");
    let out = c.real_kubectl(&["apply", "-f", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    jobs.create(&job(
        "indexed",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        "echo index=$JOB_COMPLETION_INDEX host=$(hostname)",
    ))
    .await
    .unwrap();
    jobs.create(&job("doomed", json!({"backoffLimit": 1}), "exit 3"))
        .await
        .unwrap();
    // podFailurePolicy and successPolicy: indexes 1 and 2 fail with exit code
    // 3, which the policy ignores (with backoffLimit 0 the first failure would
    // fail the Job); index 0 succeeding is enough by the success policy.
    jobs.create(&job(
        "lenient",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimit": 0,
               "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]},
               "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
        "if [ $JOB_COMPLETION_INDEX = 0 ]; then sleep 2; else exit 3; fi",
    ))
    .await
    .unwrap();
    // backoffLimitPerIndex 0: index 2's first failure fails that index, a
    // FailIndex rule fails index 1 the same way; the others still complete,
    // then the Job fails for its failed indexes.
    jobs.create(&job(
        "per-index",
        json!({"completions": 4, "parallelism": 4, "completionMode": "Indexed", "backoffLimitPerIndex": 0,
               "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [9]}}]}}),
        "case $JOB_COMPLETION_INDEX in 1) exit 9;; 2) exit 1;; *) sleep 1;; esac",
    ))
    .await
    .unwrap();
    // A FailJob rule: exit code 42 fails the Job at once, whatever the backoffLimit.
    jobs.create(&job(
        "fatal",
        json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}}]}}),
        "exit 42",
    ))
    .await
    .unwrap();

    let most_running = std::cell::Cell::new(0);
    let done = minik8s_testkit::poll(
        120,
        Duration::from_millis(200),
        "countdown completes",
        || async {
            let list = pods
                .list(&ListParams::default().labels("job-name=countdown"))
                .await
                .unwrap();
            let running = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| phase(p) == "Running" || phase(p) == "Pending")
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .count();
            most_running.set(most_running.get().max(running));
            let j = jobs.get("countdown").await.unwrap();
            match condition(&j, "Complete") {
                Some(_) => Ok(j),
                None => Err(j["status"].to_string()),
            }
        },
    )
    .await;
    let most_running = most_running.get();
    assert!(
        most_running <= 2,
        "parallelism 2, saw {most_running} at once"
    );
    assert_eq!(done["status"]["succeeded"], 5);
    let all = pods
        .list(&ListParams::default().labels("job-name=countdown"))
        .await
        .unwrap();
    let summary: Vec<String> = all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{} {} {:?}",
                p["metadata"]["name"],
                phase(p),
                p["status"]["containerStatuses"][0]["state"]
            )
        })
        .collect();
    assert!(
        done["status"]["failed"].is_null(),
        "{}\n{summary:#?}\n{}",
        done["status"],
        tail(&c.kubelet_log(), 60)
    );
    assert!(
        condition(&done, "SuccessCriteriaMet").is_some(),
        "{}",
        done["status"]
    );
    assert!(done["status"]["completionTime"].is_string());
    assert_eq!(
        done["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        done["metadata"]["uid"]
    );
    let (ok, out) = {
        let o = c.real_kubectl(&[
            "wait",
            "--for=condition=complete",
            "job/countdown",
            "--timeout=30s",
        ]);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    assert!(
        ok && out.contains("job.batch/countdown condition met"),
        "{out}"
    );
    let table = String::from_utf8_lossy(&c.real_kubectl(&["get", "jobs"]).stdout).to_string();
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("countdown"))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[1..3], ["Complete", "5/5"], "{table}");
    let logs = c.real_kubectl(&["logs", "job/countdown"]);
    assert_eq!(String::from_utf8_lossy(&logs.stdout).trim(), "working");
    // Counted pods keep no finalizer.
    let left = pods
        .list(&ListParams::default().labels("job-name=countdown"))
        .await
        .unwrap();
    for p in left["items"].as_array().into_iter().flatten() {
        assert!(
            p["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty()),
            "{}",
            p["metadata"]
        );
    }

    // Indexed: each index once, and each pod saw its own.
    let j = minik8s_testkit::until(60, "indexed completes", || async {
        let j = jobs.get("indexed").await.unwrap();
        condition(&j, "Complete")
            .map(|_| j.clone())
            .ok_or_else(|| j["status"].to_string())
    })
    .await;
    assert_eq!(j["status"]["completedIndexes"], "0-2");
    let list = pods
        .list(&ListParams::default().labels("job-name=indexed"))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for p in list["items"].as_array().into_iter().flatten() {
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        let index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(name.starts_with(&format!("indexed-{index}-")), "{name}");
        let log = c.pod_log(&format!("{name}/log")).await;
        assert_eq!(
            log.trim(),
            format!("index={index} host=indexed-{index}"),
            "{name}"
        );
        seen.insert(index);
    }
    assert_eq!(
        seen,
        BTreeSet::from(["0".to_string(), "1".into(), "2".into()])
    );

    // backoffLimit 1: the second failure (after a 10 s backoff) fails the Job.
    let j = minik8s_testkit::until(90, "doomed fails", || async {
        let j = jobs.get("doomed").await.unwrap();
        condition(&j, "Failed")
            .map(|_| j.clone())
            .ok_or_else(|| j["status"].to_string())
    })
    .await;
    let failed = condition(&j, "Failed").unwrap();
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    assert_eq!(
        failed["message"],
        "Job has reached the specified backoff limit"
    );
    assert_eq!(
        condition(&j, "FailureTarget").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(j["status"]["failed"], 2);
    assert!(j["status"]["active"].is_null(), "{}", j["status"]);

    let finished = |name: &'static str, type_: &'static str| {
        let jobs = &jobs;
        minik8s_testkit::until(90, name, move || async move {
            let j = jobs.get(name).await.unwrap();
            condition(&j, type_)
                .map(|_| j.clone())
                .ok_or_else(|| j["status"].to_string())
        })
    };
    let j = finished("lenient", "Complete").await;
    let complete = condition(&j, "Complete").unwrap();
    assert_eq!(
        (&complete["reason"], &complete["message"]),
        (&json!("SuccessPolicy"), &json!("Matched rules at index 0")),
        "{}",
        j["status"]
    );
    assert!(condition(&j, "SuccessCriteriaMet").is_some());
    assert!(
        j["status"]["failed"].is_null(),
        "ignored failures count nowhere: {}",
        j["status"]
    );
    assert_eq!(j["status"]["completedIndexes"], "0");

    let j = finished("per-index", "Failed").await;
    assert_eq!(condition(&j, "Failed").unwrap()["reason"], "FailedIndexes");
    assert_eq!(
        (
            &j["status"]["failedIndexes"],
            &j["status"]["completedIndexes"]
        ),
        (&json!("1-2"), &json!("0,3")),
        "{}",
        j["status"]
    );
    assert_eq!(j["status"]["failed"], 2);

    let j = finished("fatal", "Failed").await;
    let failed = condition(&j, "Failed").unwrap();
    assert_eq!(failed["reason"], "PodFailurePolicy");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with("Container c for pod default/fatal-")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    assert_eq!(j["status"]["failed"], 1);

    // A finished Job with a TTL goes away by itself.
    jobs.patch(
        "countdown",
        None,
        "application/merge-patch+json",
        &json!({"spec": {"ttlSecondsAfterFinished": 1}}),
    )
    .await
    .unwrap();
    minik8s_testkit::until(30, "the finished Job removed after its TTL", || async {
        match jobs.get("countdown").await {
            Err(e) if e.is_not_found() => Ok(()),
            other => Err(format!("{:?}", other.map(|j| j["metadata"].clone()))),
        }
    })
    .await;

    // kubectl logs deploy/NAME: kubectl picks one of the Deployment's pods.
    let run = |args: &[&str]| kubectl_ok(&c, args);
    run(&[
        "create",
        "deployment",
        "talker",
        "--image=minik8s/busybox:latest",
        "--",
        "sh",
        "-c",
        "echo deployed; sleep 3600",
    ]);
    run(&["rollout", "status", "deploy/talker", "--timeout=60s"]);
    assert_eq!(run(&["logs", "deploy/talker"]).trim(), "deployed");

    gpu_jobs_see_their_devices(&c).await;
}

/// The real kubectl's output; the test fails unless it succeeds.
fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    let o = c.real_kubectl(args);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "kubectl {args:?}: {out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// examples/dra: the Job's pod sees the GPU allocated to its claim as its
/// driver's environment; two pods sharing one claim see the same GPU.
async fn gpu_jobs_see_their_devices(c: &Cluster) {
    let kubectl = |args: &[&str]| kubectl_ok(c, args);
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dra");
    let slice: Value = serde_json::from_str(&kubectl(&[
        "get",
        "resourceslice",
        &format!("{}-gpu.minik8s.io", c.node),
        "-o",
        "json",
    ]))
    .unwrap();
    let uuids: Vec<String> = slice["spec"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            d["attributes"]["uuid"]["string"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(uuids.len(), 2, "{slice}");

    kubectl(&["apply", "-f", &format!("{examples}/gpu-job.yaml")]);
    kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/gpu-job",
        "--timeout=120s",
    ]);
    let logs = kubectl(&["logs", "job/gpu-job"]);
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.len(), 2, "{logs}");
    let uuid = lines[0].strip_prefix("GPU_DEVICE_0=").expect(&logs);
    assert!(
        uuids.iter().any(|u| u == uuid),
        "{uuid} is not one of {uuids:?}"
    );
    assert_eq!(lines[1], format!("NVIDIA_VISIBLE_DEVICES={uuid}"));
    // The pod's claim was made from the template and released when it finished.
    let pods = c.pods();
    let job_pod = pods
        .list(&ListParams::default().labels("job-name=gpu-job"))
        .await
        .unwrap()["items"][0]
        .clone();
    let claim = job_pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .expect("the pod names its claim")
        .to_string();
    minik8s_testkit::until(60, "the finished pod's claim deleted", || async {
        let o = c.real_kubectl(&["get", "resourceclaim", &claim]);
        (!o.status.success())
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&o.stdout).to_string())
    })
    .await;

    kubectl(&["apply", "-f", &format!("{examples}/shared-gpu.yaml")]);
    kubectl(&["rollout", "status", "deploy/gpu-sharers", "--timeout=120s"]);
    let reserved = kubectl(&[
        "get",
        "resourceclaim",
        "shared-gpu",
        "-o",
        "jsonpath={.status.reservedFor[*].name}",
    ]);
    assert_eq!(reserved.split_whitespace().count(), 2, "{reserved}");
    let state = kubectl(&["get", "resourceclaim", "shared-gpu"]);
    assert!(
        state
            .lines()
            .nth(1)
            .unwrap_or("")
            .contains("allocated,reserved"),
        "{state}"
    );
    let sharers = pods
        .list(&ListParams::default().labels("app=gpu-sharers"))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for p in sharers["items"].as_array().into_iter().flatten() {
        let name = p["metadata"]["name"].as_str().unwrap();
        let log = minik8s_testkit::until(30, "a sharer's log", || async {
            let log = c.pod_log(&format!("{name}/log")).await;
            (!log.is_empty()).then_some(log).ok_or_else(String::new)
        })
        .await;
        seen.insert(log.trim().to_string());
    }
    assert_eq!(seen.len(), 1, "both pods see the one shared GPU: {seen:?}");
    let only = seen.into_iter().next().unwrap();
    assert!(uuids.iter().any(|u| only == format!("using {u}")), "{only}");
    kubectl(&[
        "delete",
        "-f",
        &format!("{examples}/shared-gpu.yaml"),
        "-f",
        &format!("{examples}/gpu-job.yaml"),
    ]);
}
