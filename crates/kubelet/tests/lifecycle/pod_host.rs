//! Pod fields the node carries out (pods.go, host_path.go, downwardapi.go,
//! sysctl.go, kubelet_etc_hosts.go): the host's namespaces, one process
//! namespace for the pod, the kubelet's /etc/hosts with hostAliases, the
//! hostname as FQDN, safe sysctls (and an unsafe one refused), fsGroup on a
//! ConfigMap volume, resourceFieldRef in env and files, and subPathExpr.

use super::*;

/// The namespace links of this (the test's) process: the node's.
fn host_ns(kind: &str) -> String {
    std::fs::read_link(format!("/proc/self/ns/{kind}"))
        .unwrap()
        .display()
        .to_string()
}

/// The host's namespaces, one process namespace shared by a pod's containers.
pub(super) async fn host_namespaces_and_shared_pid(c: &Cluster) {
    let script = "for n in net pid ipc; do readlink /proc/self/ns/$n; done; head -1 /etc/hosts";
    c.create_pod(pod(
        "host-ns",
        json!({"restartPolicy": "Never", "hostNetwork": true, "hostPID": true, "hostIPC": true,
               "containers": [busybox("c", script)]}),
    ))
    .await;
    let mut shared = vec![
        busybox("a", "sleep 3600"),
        busybox("b", "sleep 1; ps; sleep 3600"),
    ];
    shared[1]["name"] = json!("b");
    c.create_pod(pod(
        "shared-pid",
        json!({"shareProcessNamespace": true, "terminationGracePeriodSeconds": 1, "containers": shared}),
    ))
    .await;
    let p = c
        .wait_pod("host-ns", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    assert_eq!(
        p["status"]["podIP"], p["status"]["hostIP"],
        "a host-network pod has its node's IP"
    );
    let log = c.pod_log("host-ns/log").await;
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines[..3],
        [host_ns("net"), host_ns("pid"), host_ns("ipc")],
        "{log}"
    );
    assert_eq!(lines[3], "# Kubernetes-managed hosts file (host network).");

    c.wait_pod("shared-pid", "running", 60, all_ready).await;
    minik8s_testkit::poll(
        60,
        Duration::from_millis(500),
        "b sees a's process",
        || async {
            let log = c.pod_log("shared-pid/log?container=b").await;
            // PID 1 is the sandbox's process, not b's own shell; a's sleep
            // is there beside the sandbox's own.
            let first = log
                .lines()
                .find(|l| l.split_whitespace().next() == Some("1"));
            let sandbox_first = first.is_some_and(|l| !l.contains("ps;"));
            if sandbox_first && log.lines().filter(|l| l.ends_with(" sleep 3600")).count() >= 2 {
                Ok(())
            } else {
                Err(log)
            }
        },
    )
    .await;
}

/// The kubelet's /etc/hosts and hostname, sysctls, fsGroup, resource
/// fields and subPathExpr, in one pod; an unsafe sysctl refused.
pub(super) async fn hosts_sysctls_and_downward_resources(c: &Cluster) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "host-cfg"}, "data": {"key": "v"}});
    c.client
        .dynamic(
            minik8s_api::registry::of::<k8s_openapi::api::core::v1::ConfigMap>(),
            Some("default"),
        )
        .create(&cm)
        .await
        .unwrap();
    let script = "hostname; cat /etc/hosts; echo CPU=$CPU MEM=$MEM; cat /proc/sys/net/ipv4/ip_local_port_range; \
                  stat -c '%g %a' /cfg/..data/key; echo $(cat /res/limit-mb); touch /mine/made; ls /all/$POD_NAME";
    let mut c1 = busybox("c", script);
    c1["resources"] = json!({"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "250m", "memory": "64Mi"}});
    c1["env"] = json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}}]);
    c1["volumeMounts"] = json!([
        {"name": "cfg", "mountPath": "/cfg"}, {"name": "res", "mountPath": "/res"},
        {"name": "work", "mountPath": "/all"}, {"name": "work", "mountPath": "/mine", "subPathExpr": "$(POD_NAME)"}]);
    c.create_pod(pod(
        "host-files",
        json!({"restartPolicy": "Never", "hostname": "box", "subdomain": "lab", "setHostnameAsFQDN": true,
               "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
               "securityContext": {"fsGroup": 2000,
                                   "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "32768 40000"}]},
               "volumes": [{"name": "cfg", "configMap": {"name": "host-cfg", "defaultMode": 256}},
                           {"name": "res", "downwardAPI": {"items": [{"path": "limit-mb",
                               "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}]}},
                           {"name": "work", "emptyDir": {}}],
               "containers": [c1]}),
    ))
    .await;
    c.create_pod(pod(
        "unsafe-sysctl",
        json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
               "containers": [busybox("c", "sleep 3600")]}),
    ))
    .await;

    let p = c
        .wait_pod("host-files", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let ip = p["status"]["podIP"].as_str().unwrap().to_string();
    let log = c.pod_log("host-files/log").await;
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "box.lab.default.svc.cluster.local", "{log}");
    assert_eq!(lines[1], "# Kubernetes-managed hosts file.", "{log}");
    let entry = format!("{ip}\tbox.lab.default.svc.cluster.local\tbox");
    assert!(lines.contains(&entry.as_str()), "{log}");
    assert!(lines.contains(&"# Entries added by HostAliases."), "{log}");
    assert!(lines.contains(&"10.1.2.3\tfoo.local\tbar.local"), "{log}");
    assert!(lines.contains(&"CPU=250 MEM=32"), "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.split_whitespace().eq(["32768", "40000"])),
        "{log}"
    );
    // fsGroup: the group owns the file and may read it (0400 | 0440).
    assert!(lines.contains(&"2000 440"), "{log}");
    assert!(lines.contains(&"64"), "{log}");
    assert_eq!(lines.last(), Some(&"made"), "{log}");

    let p = c
        .wait_pod("unsafe-sysctl", "Failed", 60, |p| phase(p) == "Failed")
        .await;
    assert_eq!(p["status"]["reason"], "SysctlForbidden");
    assert_eq!(
        p["status"]["message"],
        "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted"
    );
}

/// Seccomp profiles (seccomp.go): Unconfined turns the filter off, a
/// Localhost profile from the kubelet's `<root-dir>/seccomp` is enforced;
/// an AppArmor profile on a node without AppArmor is refused.
pub(super) async fn seccomp_and_apparmor(c: &Cluster) {
    let dir = c.root.path().join(format!("kubelet-{}/seccomp", c.node));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("deny-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}"#,
    )
    .unwrap();
    let mut open = busybox("open", "grep '^Seccomp:' /proc/self/status");
    open["securityContext"] = json!({"seccompProfile": {"type": "Unconfined"}});
    let mut closed = busybox("closed", "mkdir /tmp/x 2>&1 && echo made || echo refused");
    closed["securityContext"] =
        json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "deny-mkdir.json"}});
    let default = busybox("default", "grep '^Seccomp:' /proc/self/status");
    c.create_pod(pod(
        "seccomp",
        json!({"restartPolicy": "Never", "containers": [open, closed, default]}),
    ))
    .await;
    let mut confined = busybox("c", "sleep 3600");
    confined["securityContext"] =
        json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-deny-write"}});
    c.create_pod(pod("apparmor", json!({"containers": [confined]})))
        .await;

    c.wait_pod("seccomp", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let open = c.pod_log("seccomp/log?container=open").await;
    let default = c.pod_log("seccomp/log?container=default").await;
    let closed = c.pod_log("seccomp/log?container=closed").await;
    assert_eq!(open.split_whitespace().last(), Some("0"), "{open}");
    assert_eq!(default.split_whitespace().last(), Some("2"), "{default}");
    assert!(
        closed.contains("Operation not permitted") && closed.trim_end().ends_with("refused"),
        "{closed}"
    );
    if std::fs::read_to_string("/sys/module/apparmor/parameters/enabled").is_err() {
        let p = c
            .wait_pod("apparmor", "Failed", 60, |p| phase(p) == "Failed")
            .await;
        assert_eq!(p["status"]["reason"], "AppArmor");
        assert_eq!(
            p["status"]["message"],
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
    }
}

/// RuntimeClass: the class's handler is the pod's Docker runtime (sandbox
/// and containers), its overhead the pod's; a handler the node lacks fails
/// the sandbox with FailedCreatePodSandBox; an unknown class is refused.
pub(super) async fn runtime_classes(c: &Cluster) {
    let dir = tempfile::tempdir().unwrap();
    let create = |name: &str, mut doc: Value| {
        if doc["kind"] == "Pod" {
            doc["spec"]["nodeName"] = json!(c.node);
        }
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        let out = kubectl(c, &["create", "-f", path.to_str().unwrap()]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    for (name, handler) in [("plain", "runc"), ("absent", "no-such-runtime")] {
        let class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                           "handler": handler, "overhead": {"podFixed": {"cpu": "10m"}}});
        let (ok, err) = create(name, class);
        assert!(ok, "{err}");
    }
    let (ok, err) = create(
        "rc-gone",
        pod(
            "rc-gone",
            json!({"runtimeClassName": "gone", "containers": [busybox("c", "sleep 3600")]}),
        ),
    );
    assert!(!ok);
    assert!(
        err.contains(r#"pods "rc-gone" is forbidden: pod rejected: RuntimeClass "gone" not found"#),
        "{err}"
    );
    let (ok, err) = create(
        "rc-runc",
        pod(
            "rc-runc",
            json!({"runtimeClassName": "plain", "terminationGracePeriodSeconds": 1,
                             "containers": [busybox("c", "sleep 3600")]}),
        ),
    );
    assert!(ok, "{err}");
    let (ok, err) = create(
        "rc-absent",
        pod(
            "rc-absent",
            json!({"runtimeClassName": "absent", "containers": [busybox("c", "sleep 3600")]}),
        ),
    );
    assert!(ok, "{err}");
    let p = c.wait_pod("rc-runc", "running", 60, all_ready).await;
    assert_eq!(p["spec"]["overhead"], json!({"cpu": "10m"}));
    let ids = c
        .dockerd
        .docker(&["ps", "-q", "--filter", "label=io.minik8s.pod.name=rc-runc"]);
    let ids: Vec<&str> = ids.split_whitespace().collect();
    assert_eq!(ids.len(), 2, "the sandbox and the container: {ids:?}");
    for id in ids {
        let runtime = c
            .dockerd
            .docker(&["inspect", "-f", "{{.HostConfig.Runtime}}", id]);
        assert_eq!(runtime.trim(), "runc");
    }
    minik8s_testkit::poll(
        60,
        Duration::from_millis(500),
        "FailedCreatePodSandBox",
        || async {
            let reasons = event_fields(c, "rc-absent", "message");
            match reasons
                .iter()
                .find(|m| m.starts_with("Failed to create pod sandbox"))
            {
                Some(m) if m.contains("no-such-runtime") => Ok(()),
                _ => Err(format!("{reasons:?}")),
            }
        },
    )
    .await;
}
