//! The pod lifecycle on a real (private) dockerd, as Kubernetes' node
//! conformance tests check it (`test/e2e/common/node/`: init_container.go,
//! lifecycle_hook.go, container_probe.go, runtime.go and the sidecar tests):
//! init containers under each restart policy, sidecars that outlive a Job's
//! main container, postStart/preStop hooks seen by a second pod, startup and
//! gRPC probes, termination messages, in-place resize, and what the real
//! kubectl shows.
//! One cluster; the scenarios run side by side.

mod common;
#[path = "lifecycle/pod_host.rs"]
mod pod_host;
#[path = "lifecycle/resources.rs"]
mod resources;

use pod_host::{
    host_namespaces_and_shared_pid, hosts_sysctls_and_downward_resources, runtime_classes,
    seccomp_and_apparmor,
};
use resources::{in_place_resize, local_storage_eviction, pod_level_resources};

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn busybox(name: &str, script: &str) -> Value {
    json!({"name": name, "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "command": ["sh", "-c", script]})
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn init_status<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

fn condition<'a>(p: &'a Value, ty: &str) -> &'a str {
    p["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == ty))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
}

/// The real kubectl, run without holding up the other scenarios' tasks.
fn kubectl(c: &Cluster, args: &[&str]) -> std::process::Output {
    tokio::task::block_in_place(|| c.real_kubectl(args))
}

/// One field (`reason`, `message`) of every event about a pod, as the real kubectl lists them.
fn event_fields(c: &Cluster, pod: &str, field: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={pod}");
    let out = kubectl(
        c,
        &["get", "events", "--field-selector", &selector, "-o", "json"],
    );
    let events: Value = serde_json::from_slice(&out.stdout).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e[field].as_str().map(str::to_string))
        .collect()
}

/// What the real kubectl shows in the STATUS column for a pod.
fn kubectl_status(c: &Cluster, name: &str) -> String {
    let out = kubectl(c, &["get", "pod", name, "--no-headers"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace().nth(2).unwrap_or("").to_string()
}

/// Waits until the real kubectl's STATUS column for `name` is `want`.
async fn wait_kubectl_status(c: &Cluster, name: &str, want: &str, secs: u64) {
    let what = format!("kubectl get pod {name} shows {want}");
    let seen = std::sync::Mutex::new(Vec::<String>::new());
    minik8s_testkit::poll(secs, Duration::from_millis(300), &what, || async {
        let now = kubectl_status(c, name);
        if now == want {
            return Ok(());
        }
        let mut all = seen.lock().unwrap();
        if all.last() != Some(&now) {
            all.push(now);
        }
        Err(format!("STATUS was {all:?}"))
    })
    .await
}

/// init_container.go: "should invoke init containers on a RestartNever pod"
/// and "should not start app containers and fail the pod if init containers
/// fail on a RestartNever pod".
async fn init_containers_restart_never(c: &Cluster) {
    let ok = pod(
        "init-never-ok",
        json!({"restartPolicy": "Never",
               "initContainers": [busybox("init1", "echo one"), busybox("init2", "echo two")],
               "containers": [busybox("run1", "true")]}),
    );
    c.create_pod(ok).await;
    let p = c
        .wait_pod("init-never-ok", "Succeeded", 90, |p| {
            phase(p) == "Succeeded"
        })
        .await;
    for name in ["init1", "init2"] {
        let s = init_status(&p, name);
        assert_eq!(s["state"]["terminated"]["reason"], "Completed", "{s}");
        assert_eq!(s["ready"], true, "{s}");
    }
    // init2 started only after init1 finished.
    let finished1 = init_status(&p, "init1")["state"]["terminated"]["finishedAt"]
        .as_str()
        .unwrap();
    let started2 = init_status(&p, "init2")["state"]["terminated"]["startedAt"]
        .as_str()
        .unwrap();
    assert!(
        finished1 <= started2,
        "init2 ran after init1: {finished1} {started2}"
    );
    assert_eq!(condition(&p, "Initialized"), "True");
    assert_eq!(
        c.pod_log("init-never-ok/log?container=init2").await.trim(),
        "two"
    );

    let failing = pod(
        "init-never-fail",
        json!({"restartPolicy": "Never",
               "initContainers": [busybox("init1", "exit 1"), busybox("init2", "true")],
               "containers": [busybox("run1", "sleep 3600")]}),
    );
    c.create_pod(failing).await;
    let p = c
        .wait_pod("init-never-fail", "Failed", 90, |p| phase(p) == "Failed")
        .await;
    let s = init_status(&p, "init1");
    assert_eq!(s["state"]["terminated"]["exitCode"], 1, "{s}");
    assert_eq!(s["state"]["terminated"]["reason"], "Error");
    assert_eq!(
        init_status(&p, "init2")["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    assert_eq!(
        container_status(&p, "run1").unwrap()["state"]["waiting"]["reason"],
        "PodInitializing",
        "the app never started"
    );
    assert_eq!(condition(&p, "Initialized"), "False");
    assert_eq!(kubectl_status(c, "init-never-fail"), "Init:Error");
}

/// init_container.go: "should invoke init containers on a RestartAlways pod"
/// and "should not start app containers if init containers fail on a
/// RestartAlways pod"; the real kubectl's `Init:1/2`, `PodInitializing`
/// and `Init:CrashLoopBackOff`.
async fn init_containers_restart_always(c: &Cluster) {
    let ok = pod(
        "init-always-ok",
        json!({"initContainers": [busybox("init1", "true"), busybox("init2", "sleep 10")],
               "containers": [busybox("run1", "sleep 3600")]}),
    );
    c.create_pod(ok).await;
    wait_kubectl_status(c, "init-always-ok", "Init:1/2", 60).await;
    let p = c
        .wait_pod("init-always-ok", "Running and Ready", 90, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    assert_eq!(condition(&p, "Initialized"), "True");
    assert_eq!(
        init_status(&p, "init2")["state"]["terminated"]["exitCode"],
        0
    );
    assert_eq!(restarts(&p, "run1"), 0);

    let failing = pod(
        "init-always-fail",
        json!({"initContainers": [busybox("init1", "exit 1"), busybox("init2", "true")],
               "containers": [busybox("run1", "sleep 3600")]}),
    );
    c.create_pod(failing).await;
    wait_kubectl_status(c, "init-always-fail", "Init:CrashLoopBackOff", 60).await;
    let p = c
        .wait_pod("init-always-fail", "init1 restarted", 60, |p| {
            init_status(p, "init1")["restartCount"].as_i64() >= Some(1)
        })
        .await;
    assert_eq!(phase(&p), "Pending");
    assert_eq!(
        init_status(&p, "init1")["lastState"]["terminated"]["exitCode"],
        1
    );
    assert!(init_status(&p, "init2")["state"]["waiting"].is_object());
    assert_eq!(
        container_status(&p, "run1").unwrap()["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    // `kubectl logs -c` reads an init container.
    let out = kubectl(c, &["logs", "init-always-ok", "-c", "init2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Job-like pod (restartPolicy Never) with a sidecar: the sidecar starts
/// before the main container, outlives it, and is stopped after it; the
/// pod then Succeeds. Its sidecar's startup probe holds the main container back.
async fn sidecar_outlives_main_container(c: &Cluster) {
    let mut side = busybox(
        "side",
        "trap 'echo stopped >> /shared/log; exit 0' TERM; echo side >> /shared/log; touch /tmp/up; while :; do sleep 0.2; done",
    );
    side["restartPolicy"] = json!("Always");
    side["startupProbe"] = json!({"exec": {"command": ["cat", "/tmp/up"]}, "periodSeconds": 1});
    side["readinessProbe"] = json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
    side["volumeMounts"] = json!([{"name": "shared", "mountPath": "/shared"}]);
    let mut main = busybox(
        "main",
        "echo main >> /shared/log; sleep 8; echo main done >> /shared/log",
    );
    main["volumeMounts"] = json!([{"name": "shared", "mountPath": "/shared"}]);
    let created = c
        .create_pod(pod(
            "sidecar-job",
            json!({"restartPolicy": "Never", "initContainers": [side], "containers": [main],
                   "volumes": [{"name": "shared", "emptyDir": {}}]}),
        ))
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let p = c
        .wait_pod("sidecar-job", "Running with its sidecar started", 60, |p| {
            phase(p) == "Running" && init_status(p, "side")["started"] == true
        })
        .await;
    assert!(init_status(&p, "side")["state"]["running"].is_object());
    let p = c
        .wait_pod("sidecar-job", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let side = init_status(&p, "side");
    assert!(
        side["state"]["terminated"].is_object(),
        "the sidecar was stopped: {side}"
    );
    let log = std::fs::read_to_string(c.volume_dir(uid, "shared").join("log")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["side", "main", "main done", "stopped"],
        "sidecar first, stopped last"
    );
    assert_eq!(
        container_status(&p, "main").unwrap()["state"]["terminated"]["exitCode"],
        0
    );
}

/// lifecycle_hook.go: postStart and preStop httpGet hooks reach a handler
/// pod; postStart exec and preStop sleep and exec run in the container.
async fn hooks_reach_a_handler_pod(c: &Cluster) {
    let mut handler = busybox("handler", "httpd -f -vv -p 8080 -h /www");
    handler["ports"] = json!([{"containerPort": 8080}]);
    c.create_pod(pod(
        "hook-handler",
        json!({"containers": [handler], "terminationGracePeriodSeconds": 2}),
    ))
    .await;
    let h = c
        .wait_pod("hook-handler", "Running", 60, |p| {
            phase(p) == "Running" && all_ready(p)
        })
        .await;
    let handler_ip = h["status"]["podIP"].as_str().unwrap().to_string();
    let mut hooked = busybox("hooked", "sleep 3600");
    hooked["lifecycle"] = json!({
        "postStart": {"httpGet": {"host": handler_ip, "port": 8080, "path": "/poststart"}},
        "preStop": {"httpGet": {"host": handler_ip, "port": 8080, "path": "/prestop"}}});
    let mut exec = busybox("exec-hooks", "sleep 3600");
    exec["lifecycle"] = json!({
        "postStart": {"exec": {"command": ["sh", "-c", "echo poststart > /shared/hooks"]}},
        "preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> /shared/hooks"]}}});
    exec["volumeMounts"] = json!([{"name": "shared", "mountPath": "/shared"}]);
    let mut sleeper = busybox("sleep-hook", "sleep 3600");
    sleeper["lifecycle"] = json!({"preStop": {"sleep": {"seconds": 2}}});
    let created = c
        .create_pod(pod(
            "hooked",
            json!({"containers": [hooked, exec, sleeper], "terminationGracePeriodSeconds": 5,
                   "volumes": [{"name": "shared", "emptyDir": {}}]}),
        ))
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    c.wait_pod("hooked", "Running", 60, |p| {
        phase(p) == "Running" && all_ready(p)
    })
    .await;
    let handler_log = || c.pod_log("hook-handler/log");
    assert!(
        handler_log().await.contains("/poststart"),
        "{}",
        handler_log().await
    );
    let hooks = c.volume_dir(&uid, "shared").join("hooks");
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), "poststart\n");
    let started = std::time::Instant::now();
    c.pods()
        .delete("hooked", &Default::default())
        .await
        .unwrap();
    c.wait_gone("hooked", 40).await;
    assert!(
        handler_log().await.contains("/prestop"),
        "{}",
        handler_log().await
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the preStop sleep held the stop back"
    );
    c.pods()
        .delete("hook-handler", &Default::default())
        .await
        .unwrap();

    // A failing postStart kills the container: FailedPostStartHook, restarted.
    let mut failing = busybox("failing", "sleep 3600");
    failing["lifecycle"] = json!({"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}});
    c.create_pod(pod(
        "failed-hook",
        json!({"containers": [failing], "terminationGracePeriodSeconds": 2}),
    ))
    .await;
    c.wait_pod("failed-hook", "restarted after its hook failed", 60, |p| {
        restarts(p, "failing") >= 1
    })
    .await;
    let reasons = event_fields(c, "failed-hook", "reason");
    assert!(
        reasons.iter().any(|r| r == "FailedPostStartHook"),
        "{reasons:?}"
    );
}

/// container_probe.go: a startup probe delays liveness (no restart), and a
/// startup probe that never succeeds restarts the container.
async fn startup_probes(c: &Cluster) {
    let mut slow = busybox("slow", "sleep 6; touch /tmp/started; sleep 3600");
    slow["startupProbe"] = json!({"exec": {"command": ["cat", "/tmp/started"]}, "periodSeconds": 1, "failureThreshold": 30});
    // Would kill the container at once if it ran before the startup probe passed.
    slow["livenessProbe"] = json!({"exec": {"command": ["cat", "/tmp/started"]}, "periodSeconds": 1, "failureThreshold": 1});
    c.create_pod(pod("startup-slow", json!({"containers": [slow]})))
        .await;
    let p = c
        .wait_pod("startup-slow", "started", 60, |p| {
            container_status(p, "slow").is_some_and(|s| s["started"] == true)
        })
        .await;
    assert_eq!(
        restarts(&p, "slow"),
        0,
        "liveness waited for the startup probe"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let p = c.pods().get("startup-slow").await.unwrap();
    assert_eq!(restarts(&p, "slow"), 0);
    assert!(all_ready(&p));

    let mut never = busybox("never", "sleep 3600");
    never["startupProbe"] = json!({"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2,
                                   "terminationGracePeriodSeconds": 1});
    c.create_pod(pod("startup-never", json!({"containers": [never]})))
        .await;
    let p = c
        .wait_pod("startup-never", "restarted by its startup probe", 60, |p| {
            restarts(p, "never") >= 1
        })
        .await;
    assert_eq!(container_status(&p, "never").unwrap()["started"], false);
    let messages = event_fields(c, "startup-never", "message");
    assert!(
        messages
            .iter()
            .any(|m| m == "Container never failed startup probe, will be restarted"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("Startup probe failed: ")),
        "{messages:?}"
    );
}

/// runtime.go: termination messages from a file (a custom path, a non-root
/// user) and from the log with FallbackToLogsOnError.
async fn termination_messages(c: &Cluster) {
    let mut file = busybox("file", "echo -n DONE > /dev/termination-custom-log");
    file["terminationMessagePath"] = json!("/dev/termination-custom-log");
    file["securityContext"] = json!({"runAsUser": 1000});
    let mut fallback = busybox("fallback", "echo -n DONE; exit 1");
    fallback["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let mut quiet = busybox("quiet", "echo -n ignored; exit 0");
    quiet["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    c.create_pod(pod(
        "messages",
        json!({"restartPolicy": "Never", "containers": [file, fallback, quiet]}),
    ))
    .await;
    let p = c
        .wait_pod("messages", "Failed", 60, |p| phase(p) == "Failed")
        .await;
    let message =
        |name: &str| container_status(&p, name).unwrap()["state"]["terminated"]["message"].clone();
    assert_eq!(message("file"), "DONE");
    assert_eq!(message("fallback"), "DONE");
    assert_eq!(
        message("quiet"),
        Value::Null,
        "a success does not fall back to the log"
    );
}

/// A gRPC probe against a gRPC health server: ready while it answers
/// SERVING, unready when it says NOT_SERVING.
async fn grpc_probe(c: &Cluster) {
    let mut server = json!({"name": "grpc", "image": "minik8s/grpc-health:latest", "imagePullPolicy": "Never",
                            "command": ["/grpc_health_server", "9090"]});
    server["readinessProbe"] =
        json!({"grpc": {"port": 9090}, "periodSeconds": 1, "failureThreshold": 1});
    c.create_pod(pod("grpc", json!({"containers": [server]})))
        .await;
    c.wait_pod("grpc", "ready through its gRPC probe", 60, all_ready)
        .await;
    let out = kubectl(c, &["exec", "grpc", "--", "touch", "/tmp/not-serving"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_pod("grpc", "unready after NOT_SERVING", 30, |p| !all_ready(p))
        .await;
}

/// The gRPC health server example, in an image with busybox around it.
fn build_grpc_image(c: &Cluster) {
    let exe = std::env::current_exe().unwrap();
    let server = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/grpc_health_server");
    assert!(
        server.exists(),
        "the gRPC health server example is not built at {}: run `cargo build -p kubelet --examples` (cargo test --workspace builds it)",
        server.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(&server, root.join("grpc_health_server")).unwrap();
    let ldd = std::process::Command::new("ldd")
        .arg(&server)
        .output()
        .unwrap();
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        let to = root.join(lib.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(lib, &to).unwrap();
    }
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM minik8s/busybox:latest\nCOPY root/ /\n",
    )
    .unwrap();
    let out = std::process::Command::new("docker")
        .args([
            "-H",
            &c.dockerd.socket,
            "build",
            "-q",
            "-t",
            "minik8s/grpc-health:latest",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the gRPC image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A graceful delete: `kubectl wait --for=condition=Ready=false` returns
/// while the pod terminates (the kubelet publishes its final status first).
async fn graceful_delete_is_observable(c: &Cluster) {
    let app = busybox(
        "app",
        "trap 'sleep 2; exit 0' TERM; while :; do sleep 0.2; done",
    );
    c.create_pod(pod(
        "graceful",
        json!({"containers": [app], "terminationGracePeriodSeconds": 30}),
    ))
    .await;
    c.wait_pod("graceful", "Running", 60, |p| {
        phase(p) == "Running" && all_ready(p)
    })
    .await;
    let kubeconfig = c.root.path().join("kubeconfig");
    let waiting = tokio::task::spawn_blocking(move || {
        std::process::Command::new(minik8s_testkit::real_kubectl())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "wait",
                "--for=condition=Ready=false",
                "pod/graceful",
                "--timeout=60s",
            ])
            .output()
    });
    // kubectl wait is watching before the delete.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deleted = c
        .pods()
        .delete("graceful", &Default::default())
        .await
        .unwrap();
    let waited = waiting.await;
    assert!(deleted["metadata"]["deletionTimestamp"].is_string());
    let waited = waited.unwrap().unwrap();
    assert!(
        waited.status.success(),
        "kubectl wait: {}{}",
        String::from_utf8_lossy(&waited.stdout),
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stdout).contains("condition met"));
    c.wait_gone("graceful", 40).await;
}

/// Every container gets the Service variables (client libraries find the
/// API through KUBERNETES_SERVICE_HOST), and `$(VAR)` in its command and
/// args is expanded (`$$` escapes).
async fn service_variables_and_expansion(c: &Cluster) {
    let services = c.client.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::Service>(),
        Some("default"),
    );
    for (name, port) in [("kubernetes", 443), ("redis-master", 6379)] {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                         "spec": {"ports": [{"name": "main", "port": port}]}});
        // The apiserver may have made `kubernetes` itself.
        let _ = services.create(&svc).await;
    }
    let redis_ip = services.get("redis-master").await.unwrap()["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let mut printer = busybox("env", "");
    printer["command"] = json!(["sh", "-c", "env | sort; echo \"$1 $2\"", "sh"]);
    printer["args"] = json!(["$(GREETING)", "$$(GREETING)"]);
    printer["env"] = json!([{"name": "GREETING", "value": "hello"}]);
    c.create_pod(pod(
        "env-vars",
        json!({"restartPolicy": "Never", "containers": [printer]}),
    ))
    .await;
    c.wait_pod("env-vars", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let log = c.pod_log("env-vars/log").await;
    assert!(
        log.lines()
            .any(|l| l.starts_with("KUBERNETES_SERVICE_HOST=")),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l == "KUBERNETES_SERVICE_PORT_MAIN=443" || l == "KUBERNETES_SERVICE_PORT=443"),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l == format!("REDIS_MASTER_SERVICE_HOST={redis_ip}")),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l == format!("REDIS_MASTER_PORT_6379_TCP=tcp://{redis_ip}:6379")),
        "{log}"
    );
    assert!(log.lines().any(|l| l == "hello $(GREETING)"), "{log}");
}

/// `emptyDir: {medium: Memory}` is a tmpfs of the volume's `sizeLimit`,
/// unmounted when the pod goes.
async fn memory_empty_dir(c: &Cluster) {
    let mut reader = busybox("c", "grep ' /cache ' /proc/mounts");
    reader["volumeMounts"] = json!([{"name": "cache", "mountPath": "/cache"}]);
    let created = c
        .create_pod(pod(
            "memory-dir",
            json!({"restartPolicy": "Never", "containers": [reader],
                   "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]}),
        ))
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    c.wait_pod("memory-dir", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let line = c.pod_log("memory-dir/log").await;
    assert!(line.starts_with("tmpfs /cache tmpfs"), "{line}");
    assert!(line.contains("size=16384k"), "{line}");
    let host_dir = c.volume_dir(&uid, "cache");
    let mounted = || {
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .contains(&host_dir.display().to_string())
    };
    assert!(mounted(), "the node side is a tmpfs");
    c.pods()
        .delete("memory-dir", &Default::default())
        .await
        .unwrap();
    c.wait_gone("memory-dir", 30).await;
    minik8s_testkit::poll(
        30,
        Duration::from_millis(300),
        "the tmpfs unmounted",
        || async {
            if mounted() {
                Err("still mounted".to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;
}

/// `activeDeadlineSeconds`: the kubelet ends the pod at its deadline.
async fn active_deadline(c: &Cluster) {
    c.create_pod(pod(
        "deadline",
        json!({"activeDeadlineSeconds": 4, "terminationGracePeriodSeconds": 1,
               "containers": [busybox("c", "sleep 3600")]}),
    ))
    .await;
    let p = c
        .wait_pod("deadline", "Failed at its deadline", 60, |p| {
            phase(p) == "Failed"
        })
        .await;
    assert_eq!(p["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        p["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    assert!(container_status(&p, "c").unwrap()["state"]["terminated"].is_object());
}

/// Bad probes and hooks are refused with a 422 naming the field; a field
/// the kubelet does not honour yet is accepted with a warning, never silently.
async fn refused_and_warned_fields(c: &Cluster) {
    let dir = tempfile::tempdir().unwrap();
    let apply = |name: &str, spec: Value| {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, pod(name, spec).to_string()).unwrap();
        let out = kubectl(c, &["create", "-f", path.to_str().unwrap()]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let mut two = busybox("c", "sleep 3600");
    two["livenessProbe"] =
        json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}, "periodSeconds": -1});
    let (ok, err) = apply("two-handlers", json!({"containers": [two]}));
    assert!(!ok);
    assert!(err.contains("spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"), "{err}");
    assert!(err.contains("spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"), "{err}");
    let mut hooked_init = busybox("i", "true");
    hooked_init["lifecycle"] = json!({"postStart": {}});
    let mut empty_hook = busybox("c", "sleep 3600");
    empty_hook["lifecycle"] = json!({"preStop": {}});
    let (ok, err) = apply(
        "bad-hooks",
        json!({"initContainers": [hooked_init], "containers": [empty_hook]}),
    );
    assert!(!ok);
    assert!(err.contains("spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always"), "{err}");
    assert!(
        err.contains(
            "spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"
        ),
        "{err}"
    );

    let (ok, err) = apply(
        "user-namespace",
        json!({"terminationGracePeriodSeconds": 1, "nodeName": c.node, "hostUsers": false,
               "containers": [busybox("c", "sleep 3600")]}),
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: spec.hostUsers: not honoured by minik8s yet"),
        "{err}"
    );
    minik8s_testkit::poll(
        60,
        Duration::from_millis(500),
        "a FieldsNotHonoured event",
        || async {
            let out = kubectl(
                c,
                &[
                    "get",
                    "events",
                    "--field-selector",
                    "involvedObject.name=user-namespace",
                    "-o",
                    "json",
                ],
            );
            if !String::from_utf8_lossy(&out.stdout).contains("\"FieldsNotHonoured\"") {
                Err("none yet".to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_pod_lifecycle_as_kubernetes_runs_it() {
    let c = std::sync::Arc::new(Cluster::start().await);
    // Write the kubeconfig the real kubectl uses before the scenarios share it.
    let _ = c.real_kubectl(&["version", "--client"]);
    build_grpc_image(&c);
    // Each scenario is its own task: one waiting on kubectl holds up no other.
    macro_rules! spawn {
        ($scenario:ident) => {{
            let c = c.clone();
            tokio::spawn(async move { $scenario(&c).await })
        }};
    }
    let scenarios = [
        spawn!(init_containers_restart_never),
        spawn!(init_containers_restart_always),
        spawn!(sidecar_outlives_main_container),
        spawn!(hooks_reach_a_handler_pod),
        spawn!(startup_probes),
        spawn!(termination_messages),
        spawn!(grpc_probe),
        spawn!(graceful_delete_is_observable),
        spawn!(refused_and_warned_fields),
        spawn!(service_variables_and_expansion),
        spawn!(active_deadline),
        spawn!(memory_empty_dir),
        spawn!(in_place_resize),
        spawn!(pod_level_resources),
        spawn!(host_namespaces_and_shared_pid),
        spawn!(hosts_sysctls_and_downward_resources),
        spawn!(seccomp_and_apparmor),
        spawn!(runtime_classes),
        spawn!(local_storage_eviction),
    ];
    for outcome in futures::future::join_all(scenarios).await {
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}
