//! The metrics pipeline and the HPA on real Docker: a CPU-burning busybox
//! ReplicaSet shows up in `kubectl top` (ours and the real kubectl 1.37), the HPA
//! scales it up to its maximum, and back down to its minimum after the
//! (shortened) stabilization window once the load stops.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Event;
use minik8s_api::registry;
use minik8s_client::ListParams;
use serde_json::{json, Value};
use std::time::Duration;

/// Parses `kubectl top pods` output into (name, millicores, MiB) rows.
fn top_rows(out: &std::process::Output) -> Vec<(String, i64, i64)> {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl top failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "CPU(cores)", "MEMORY(bytes)"], "{text}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |s: &str, unit: &str| s.trim_end_matches(unit).parse::<i64>().unwrap_or(-1);
            (f[0].to_string(), num(f[1], "m"), num(f[2], "Mi"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_and_hpa_follow_cpu_load() {
    let c = Cluster::start().await;
    c.spawn_control_plane(controller_manager::Config {
        horizontal_pod_autoscaler_sync_period: Duration::from_secs(2),
        ..Default::default()
    });

    // The load switch: pods burn CPU while /ctl/burn exists (a hostPath shared by all).
    let ctl = c.root.path().join("ctl");
    std::fs::create_dir_all(&ctl).unwrap();
    std::fs::write(ctl.join("burn"), "").unwrap();
    // Each pod holds 8 MiB in a shell variable (so memory shows in Mi) and is
    // capped at 200m of CPU: 200 % of its 100m request.
    let script = "x=$(head -c 8388608 /dev/zero | tr '\\0' a); while true; do if [ -f /ctl/burn ]; then :; else sleep 1; fi; done";
    let sets = c
        .client
        .dynamic(registry::of::<ReplicaSet>(), Some("default"));
    sets.create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "burn"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "burn"}},
                 "template": {"metadata": {"labels": {"app": "burn"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "volumes": [{"name": "ctl", "hostPath": {"path": ctl.display().to_string()}}],
                                       "containers": [{"name": "burn", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                                                       "command": ["sh", "-c", script],
                                                       "volumeMounts": [{"name": "ctl", "mountPath": "/ctl"}],
                                                       "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}}}}))
        .await
        .unwrap();
    let pods = c.pods();
    let every = Duration::from_millis(300);
    minik8s_testkit::poll(60, every, "the burn pod running", || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let running = list["items"]
            .as_array()
            .is_some_and(|i| i.len() == 1 && phase(&i[0]) == "Running" && all_ready(&i[0]));
        running
            .then_some(())
            .ok_or_else(|| format!("{list}\n{}", tail(&c.kubelet_log(), 30)))
    })
    .await;

    // kubectl top, ours and the real one: non-zero CPU and memory for the pod.
    let every = Duration::from_secs(1);
    minik8s_testkit::poll(60, every, "kubectl top shows the load", || async {
        let ours = top_rows(&c.our_kubectl(&["top", "pods"]));
        let real = top_rows(&c.real_kubectl(&["top", "pods"]));
        let busy = |rows: &[(String, i64, i64)]| {
            rows.len() == 1 && rows[0].0.starts_with("burn-") && rows[0].1 > 50 && rows[0].2 >= 8
        };
        (busy(&ours) && busy(&real))
            .then_some(())
            .ok_or_else(|| format!("ours {ours:?}, real {real:?}"))
    })
    .await;
    let nodes = c.real_kubectl(&["top", "nodes"]);
    let text = String::from_utf8_lossy(&nodes.stdout);
    assert!(
        text.contains(&c.node),
        "kubectl top nodes: {text}{}",
        String::from_utf8_lossy(&nodes.stderr)
    );

    // The HPA: 200 % against a 50 % target asks for 4; max 3 wins.
    let hpas = c
        .client
        .dynamic(registry::of::<HorizontalPodAutoscaler>(), Some("default"));
    hpas.create(&json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "burn"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "burn"},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}}}}))
        .await
        .unwrap();
    let wait_replicas = |want: i64, secs: u64, what: &'static str| {
        let (sets, hpas) = (sets.clone(), hpas.clone());
        async move {
            let seen_max = std::cell::Cell::new(0);
            let every = Duration::from_millis(500);
            minik8s_testkit::poll(secs, every, what, || async {
                let rs = sets.get("burn").await.unwrap();
                let n = rs["spec"]["replicas"].as_i64().unwrap_or(0);
                seen_max.set(seen_max.get().max(n));
                if n == want {
                    return Ok(seen_max.get());
                }
                let hpa = hpas.get("burn").await.unwrap();
                Err(format!("replicas {n}, hpa status {}", hpa["status"]))
            })
            .await
        }
    };
    wait_replicas(3, 60, "scale up to max 3 within 60 s").await;
    let hpa = hpas.get("burn").await.unwrap();
    let status = &hpa["status"];
    assert!(
        status["currentMetrics"][0]["resource"]["current"]["averageUtilization"]
            .as_i64()
            .unwrap_or(0)
            > 50,
        "{status}"
    );
    let cond = |t: &str| -> Value {
        status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(cond("AbleToScale")["status"], "True", "{status}");
    assert_eq!(cond("ScalingActive")["status"], "True", "{status}");
    let events = c.client.dynamic(registry::of::<Event>(), Some("default"));
    let evs = events
        .list(&ListParams::default().fields("reason=SuccessfulRescale"))
        .await
        .unwrap();
    assert!(
        evs["items"][0]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("New size: "),
        "{evs}"
    );

    // Stay at 3 while burning (max respected), then the load stops: back to min 1.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        sets.get("burn").await.unwrap()["spec"]["replicas"],
        3,
        "max respected"
    );
    std::fs::remove_file(ctl.join("burn")).unwrap();
    let seen_max = wait_replicas(1, 120, "scale down to min 1 after the load stops").await;
    assert_eq!(seen_max, 3);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        sets.get("burn").await.unwrap()["spec"]["replicas"],
        1,
        "min respected"
    );
}
