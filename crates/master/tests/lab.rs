//! Multi-node end to end on `scripts/lab.sh`: three nodes, each a network
//! namespace with its own dockerd, kubelet and kube-proxy, and the control
//! plane in a fourth. Everything is driven as a user would: manifests through
//! kubectl, traffic with busybox from nodes and from inside pods.
//!
//! Needs root, dockerd, iptables, nsenter and busybox-static (scripts/test.sh
//! installs them), and the workspace's debug binaries (`cargo test --workspace`
//! builds them; scripts/test.sh also runs `cargo build --bins` first). A
//! missing piece fails the test with a message; it never passes silently.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{bin_dir, repo_root, run, sh, try_sh, until};
/// Ingress on every node of the host-gw lab.
#[path = "lab/ingress.rs"]
mod ingress;
/// A machine joins the host-gw lab with the master's one-command join.
#[path = "lab/join.rs"]
mod join;
/// Scenarios run on the host-gw lab (storage, gangs).
#[path = "lab/scenarios.rs"]
mod scenarios;
/// A lab on the previous release upgraded node by node while it serves.
#[path = "lab/upgrade.rs"]
mod upgrade;

const LAB_NAME: &str = "mk8se2e";
const LAB_DIR: &str = "/tmp/mk8s-e2e";
const LAB_NET: &str = "192.168.79";
/// The admin's kubeconfig lab.sh writes (TLS to 192.168.79.10:6443, a client certificate).
const KUBECONFIG: &str = "/tmp/mk8s-e2e/admin.conf";

fn kubectl(args: &str) -> String {
    sh(&format!(
        "{}/kubectl --kubeconfig {KUBECONFIG} {args}",
        bin_dir().display()
    ))
}

fn kubectl_json(args: &str) -> Value {
    serde_json::from_str(&kubectl(&format!("{args} -o json"))).unwrap()
}

fn apply(manifest: &str) {
    let path = format!("{LAB_DIR}-manifest.yaml");
    std::fs::write(&path, manifest).unwrap();
    kubectl(&format!("apply -f {path}"));
}

fn netns(node: u32) -> String {
    format!("/run/netns/{LAB_NAME}-node{node}")
}

fn node_ip(node: u32) -> String {
    format!("{LAB_NET}.{}", 10 + node)
}

/// A command in node N's network namespace (busybox for the client tools).
fn on_node(node: u32, cmd: &str) -> Option<String> {
    try_sh(&format!("nsenter --net={} -- sh -c '{cmd}'", netns(node)))
}

/// `docker exec` into the first container of a pod, on its node's dockerd.
fn in_pod(pod: &Value, cmd: &str) -> Option<String> {
    in_pod_or_why(pod, cmd).ok()
}

/// [`in_pod`], or what went wrong: no such container, or the command's exit
/// status with its output (what a failed step's message should show).
fn in_pod_or_why(pod: &Value, cmd: &str) -> Result<String, String> {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let node: u32 = pod["spec"]["nodeName"].as_str().unwrap()["node".len()..]
        .parse()
        .unwrap();
    let container = pod["spec"]["containers"][0]["name"].as_str().unwrap();
    let docker = format!("docker -H unix://{LAB_DIR}/node{node}/docker.sock");
    let id = sh(&format!(
        "{docker} ps -q --filter label=io.minik8s.pod.name={name} --filter label=io.minik8s.container.name={container}"
    ));
    let id = id
        .lines()
        .next()
        .ok_or_else(|| format!("no running container {container} of pod {name} on node{node}"))?;
    let out = run(Command::new("bash")
        .arg("-c")
        .arg(format!("{docker} exec {id} sh -c '{cmd}'")));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "`{cmd}` in {name} failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `nslookup NAME` in `pod` until the answer holds `expected` (a pod's first
/// lookup may race its node's DNS learning the Service). Panics with the last
/// failure, the pod's resolv.conf and its node's kube-proxy log otherwise.
fn cluster_dns_answers(pod: &Value, name: &str, expected: &str) -> String {
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match in_pod_or_why(pod, &format!("nslookup {name}")) {
            Ok(out) if out.contains(expected) => return out,
            Ok(out) => last = format!("no {expected} in: {out}"),
            Err(why) => last = why,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let node = pod["spec"]["nodeName"].as_str().unwrap_or("?");
    let resolv = in_pod_or_why(pod, "cat /etc/resolv.conf").unwrap_or_else(|e| e);
    let log = try_sh(&format!("tail -n 20 {LAB_DIR}/{node}/kube-proxy.log")).unwrap_or_default();
    panic!("{name} did not resolve to {expected} in 20 s: {last}\nresolv.conf:\n{resolv}\nkube-proxy on {node}:\n{log}");
}

/// Fetches `url` `n` times with busybox wget and returns the answers.
fn fetch_many(n: usize, url: &str) -> String {
    format!("for i in $(seq {n}); do timeout 3 busybox wget -qO- {url} || echo FAILED; done")
}

fn running_pods(selector: &str) -> Vec<Value> {
    kubectl_json(&format!("get pods -l {selector}"))["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["status"]["phase"] == "Running"
                && p["metadata"]["deletionTimestamp"].is_null()
                && p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .cloned()
        .collect()
}

/// What must be the same on the host before `up` and after `down`: every
/// rule, link, address, route, namespace, mount, cgroup and process that
/// names the lab. The rest of the host is not compared: it may run a cluster
/// of its own (the quick start), whose pods, veths, mounts and chains come and
/// go while the lab runs.
fn host_state() -> String {
    let out = run(Command::new("bash")
        .arg("-c")
        // The pattern goes in through the environment so that this shell's
        // own command line does not match it.
        .arg(
            "{ iptables-save; ip -o link; ip -o addr; ip route; ip netns list; cat /proc/mounts; \
               find /sys/fs/cgroup -maxdepth 2 -name \"$LAB_NAME*\"; \
               for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done; } 2>/dev/null \
             | grep -E \"$PATTERN\" | sed 's/\\[[0-9]*:[0-9]*\\]//' | sort",
        )
        .env("LAB_NAME", LAB_NAME)
        .env(
            "PATTERN",
            format!("{LAB_NAME}|{LAB_DIR}|{}\\.", LAB_NET.replace('.', "\\.")),
        ));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Counting-only rules in the host's netfilter (raw PREROUTING sees every
/// packet the host routes or, with bridge netfilter, bridges; filter FORWARD
/// every one it passes on) for packets between two pod addresses; removed on drop.
struct HostProbe {
    rules: Vec<String>,
}

impl HostProbe {
    const TAG: &'static str = "mk8se2e-probe";

    fn insert(src: &str, dst: &str) -> HostProbe {
        let probe = HostProbe {
            rules: [("raw", "PREROUTING"), ("filter", "FORWARD")]
                .iter()
                .map(|(table, chain)| {
                    format!(
                        "-t {table} {{}} {chain} -s {src} -d {dst} -m comment --comment {}",
                        Self::TAG
                    )
                })
                .collect(),
        };
        for rule in &probe.rules {
            sh(&format!("iptables -w {}", rule.replace("{}", "-I")));
        }
        probe
    }

    /// Packets counted by the probe's rules so far.
    fn packets(&self) -> u64 {
        sh("iptables-save -c")
            .lines()
            .filter(|l| l.contains(Self::TAG))
            .filter_map(|l| l.strip_prefix('[')?.split(':').next()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for HostProbe {
    fn drop(&mut self) {
        for rule in &self.rules {
            let _ = try_sh(&format!("iptables -w {}", rule.replace("{}", "-D")));
        }
    }
}

/// The lab; `down` runs on drop, also when an assertion failed.
struct Lab;

impl Lab {
    fn up(setup: Setup) -> Lab {
        Lab::up_with_nodes(setup, 3)
    }

    fn up_with_nodes(setup: Setup, nodes: u32) -> Lab {
        for tool in ["dockerd", "iptables", "nsenter", "ip", "busybox", "curl"] {
            assert!(
                try_sh(&format!("command -v {tool}")).is_some(),
                "{tool} is required for the lab test (scripts/test.sh installs it)"
            );
        }
        assert_eq!(sh("id -u").trim(), "0", "the lab test needs root");
        for b in ["master", "kubelet", "kube-proxy", "kubectl"] {
            assert!(
                bin_dir().join(b).exists(),
                "{} is missing: run `cargo build --workspace --bins` (scripts/test.sh does)",
                bin_dir().join(b).display()
            );
        }
        assert!(
            try_sh(&format!("ip route | grep -q '^{LAB_NET}\\.'")).is_none(),
            "{LAB_NET}.0/24 is already routed on this host"
        );
        let lab = Lab;
        let started = Instant::now();
        Lab::script(&format!("up {nodes}"), setup);
        eprintln!("lab up in {:.1} s", started.elapsed().as_secs_f64());
        lab
    }

    fn script(verb: &str, setup: Setup) -> String {
        Lab::script_with(verb, setup, &bin_dir(), "")
    }

    /// lab.sh VERB with the binaries in `bin` and more settings (`VAR=value ...`).
    fn script_with(verb: &str, setup: Setup, bin: &Path, env: &str) -> String {
        sh(&format!(
            "LAB_DIR={LAB_DIR} LAB_NAME={LAB_NAME} LAB_NET={LAB_NET} LAB_BIN={} \
             LAB_POD_NETWORK={} LAB_STORE={} {env} \
             LAB_MASTER_ARGS='--node-monitor-period 1s --node-monitor-grace-period 6s \
             --default-not-ready-toleration-seconds 2 --default-unreachable-toleration-seconds 2' \
             LAB_KUBELET_ARGS='--node-status-update-frequency 1s' \
             {}/scripts/lab.sh {verb} 2>&1",
            bin.display(),
            setup.pod_network,
            setup.store,
            repo_root().display()
        ))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let out = run(Command::new("bash").arg("-c").arg(format!(
            "LAB_DIR={LAB_DIR} LAB_NAME={LAB_NAME} LAB_NET={LAB_NET} {}/scripts/lab.sh down",
            repo_root().display()
        )));
        if !out.status.success() {
            eprintln!("lab down failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

const WHO_LOAD_BALANCERS: &str = r#"
# The who pods behind two LoadBalancers (the default policy, and Local), a
# Service with ClientIP affinity and one with internalTrafficPolicy: Local.
apiVersion: v1
kind: Service
metadata: {name: who-lb}
spec:
  type: LoadBalancer
  selector: {app: who}
  ports: [{name: http, port: 8081, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: who-local}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: who}
  ports: [{name: http, port: 8082, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: who-sticky}
spec:
  sessionAffinity: ClientIP
  selector: {app: who}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: who-near}
spec:
  internalTrafficPolicy: Local
  selector: {app: who}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

const WHO: &str = r#"
# Two web pods, one on node1 and one on node2, each answering with its own name.
apiVersion: v1
kind: Service
metadata: {name: who}
spec:
  type: NodePort
  selector: {app: who}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: who}
spec:
  replicas: 2
  selector: {matchLabels: {app: who}}
  template:
    metadata: {labels: {app: who}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node1, node2]}]
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: who}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: web
        image: minik8s/busybox:latest
        imagePullPolicy: Never
        # index.html: the pod's name; /cgi-bin/ip: the caller's address as the pod sees it.
        command: ["sh", "-c", "mkdir -p /tmp/www/cgi-bin && hostname > /tmp/www/index.html && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /tmp/www/cgi-bin/ip && chmod +x /tmp/www/cgi-bin/ip && exec httpd -f -p 8080 -h /tmp/www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node3
  containers:
  - name: sh
    image: minik8s/busybox:latest
    imagePullPolicy: Never
    command: ["sleep", "3600"]
"#;

/// A Deployment whose pods answer their VERSION over HTTP (ready by a
/// probe) and keep serving 2 s after SIGTERM, while kube-proxy drops them.
const ROLLER: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: roller}
spec:
  replicas: 4
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: roller}}
  template:
    metadata: {labels: {app: roller}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: minik8s/busybox:latest
        imagePullPolicy: Never
        env: [{name: VERSION, value: v1}]
        command: ["sh", "-c", "mkdir -p /w; echo $VERSION > /w/index.html; httpd -p 8080 -h /w; trap 'sleep 2; exit 0' TERM; while :; do sleep 1; done"]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: roller}
spec:
  selector: {app: roller}
  ports: [{port: 80, targetPort: 8080}]
"#;

/// A DaemonSet with a Docker Hub image name (served by the lab's registry).
const AGENT: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{name: agent, image: \"busybox:1.36\", imagePullPolicy: IfNotPresent, command: [sleep, \"3600\"]}]\n";

const SURVIVOR: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: survivor}
spec:
  replicas: 3
  selector: {matchLabels: {app: survivor}}
  template:
    metadata: {labels: {app: survivor}}
    spec:
      containers:
      - name: sleep
        image: minik8s/busybox:latest
        imagePullPolicy: Never
        command: ["sleep", "3600"]
"#;

fn answers(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// One lab at a time: they share names, and each checks the host afterwards.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The kubelets route between the nodes themselves (host-gw); the
/// apiserver's embedded store.
#[test]
fn three_nodes_host_gw() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    three_node_lab(Setup {
        pod_network: "host-gw",
        store: "embedded",
        mtu: 1500,
    });
}

/// As on lab VMs with flannel: vxlan as flannel sets it up, a subnet.env per
/// node (the kubelets take subnet and MTU from it, node IPAM is off), etcd.
#[test]
fn three_nodes_vxlan_like_flannel() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    three_node_lab(Setup {
        pod_network: "vxlan",
        store: "etcd",
        mtu: 1450,
    });
}

/// doc/deploy.md's upgrade on the lab: a master and two joined workers on
/// the previous release (scripts/previous-release.sh), upgraded master first
/// then node by node while a Deployment with a PodDisruptionBudget serves
/// requests from the master machine and from the nodes: none fails.
#[test]
fn a_cluster_upgrades_node_by_node_while_it_serves() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    upgrade::node_by_node();
}

/// doc/deploy.md's class on the lab, its commands in order: a master and
/// one worker, nine machines joining with the one command (no toolchain),
/// two students from scripts/add-user.sh; alice's restricted web tier runs
/// one pod per worker and answers; bob cannot look into alice's namespace.
#[test]
fn a_class_of_ten_workers() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    let setup = Setup {
        pod_network: "host-gw",
        store: "embedded",
        mtu: 1500,
    };
    Lab::script("down", setup);
    let _lab = Lab::up_with_nodes(setup, 1);
    let started = Instant::now();
    for n in 2..=10 {
        Lab::script(&format!("join {n}"), setup);
    }
    eprintln!(
        "nine machines joined in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let nodes = kubectl("get nodes --no-headers");
    assert_eq!(
        nodes.lines().filter(|l| l.contains(" Ready ")).count(),
        10,
        "{nodes}"
    );
    let students = format!("{LAB_DIR}-students");
    std::fs::create_dir_all(&students).unwrap();
    for student in ["alice", "bob"] {
        // On the master, as doc/deploy.md runs it (the admin kubeconfig names 127.0.0.1).
        let out = run(Command::new("bash")
            .arg(repo_root().join("scripts/lab.sh"))
            .envs([
                ("LAB_DIR", LAB_DIR),
                ("LAB_NAME", LAB_NAME),
                ("LAB_NET", LAB_NET),
            ])
            .args(["exec", "cp", "bash"])
            .arg(repo_root().join("scripts/add-user.sh"))
            .args([student, "--server", &format!("https://{LAB_NET}.10:6443")])
            .args(["--pki-dir", &format!("{LAB_DIR}/cp/pki")])
            .args(["--out", &format!("{students}/{student}.kubeconfig")])
            .env("MINIK8S_BIN", bin_dir()));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let as_student = |student: &str, args: &[&str]| {
        run(Command::new(minik8s_testkit::real_kubectl())
            .env("KUBECONFIG", format!("{students}/{student}.kubeconfig"))
            .current_dir(repo_root())
            .args(args))
    };
    let out = as_student("alice", &["apply", "-f", "examples/student-web.yaml"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods = until(120, "ten web pods running in alice's namespace", || {
        let out = as_student("alice", &["get", "pods", "-l", "app=web", "-o", "json"]);
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        let pods: Vec<Value> = list["items"]
            .as_array()?
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .cloned()
            .collect();
        (pods.len() == 10).then_some(pods)
    });
    let nodes: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .collect();
    assert_eq!(nodes.len(), 10, "one per worker: {nodes:?}");
    // Each answers, from the first worker (over the pod network).
    for p in &pods {
        let ip = p["status"]["podIP"].as_str().unwrap();
        let page = until(30, "the pod's page", || {
            on_node(1, &format!("timeout 5 busybox wget -qO- http://{ip}:8080/"))
        });
        assert!(page.contains("hello from minik8s"), "{page}");
    }
    let out = as_student("bob", &["get", "pods", "-n", "alice"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Forbidden")
            || String::from_utf8_lossy(&out.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&students);
}

/// How a lab is set up: `LAB_POD_NETWORK`, `LAB_STORE`, and the pods' MTU that follows.
#[derive(Clone, Copy)]
struct Setup {
    pod_network: &'static str,
    store: &'static str,
    mtu: u32,
}

fn three_node_lab(setup: Setup) {
    let Setup {
        pod_network, mtu, ..
    } = setup;
    // A lab left by a run that crashed goes first (down is harmless when nothing is up).
    Lab::script("down", setup);
    let before = host_state();
    {
        let _lab = Lab::up(setup);
        let nodes = kubectl("get nodes --no-headers");
        assert_eq!(
            nodes.lines().filter(|l| l.contains(" Ready ")).count(),
            3,
            "{nodes}"
        );
        // Every node joined with the token: its kubelet is system:node:<name>
        // (the real kubectl with the kubeconfig the kubelet wrote), and the
        // Node authorizer keeps it off the cluster's Secrets.
        for n in 1..=3 {
            let conf = format!("{LAB_DIR}/node{n}/kubelet.conf");
            let who = sh(&format!(
                "{kubectl} --kubeconfig {conf} auth whoami -o jsonpath='{{.status.userInfo.username}}'",
                kubectl = minik8s_testkit::real_kubectl().display()
            ));
            assert_eq!(who, format!("system:node:node{n}"));
        }
        let denied = run(Command::new(minik8s_testkit::real_kubectl()).args([
            "--kubeconfig",
            &format!("{LAB_DIR}/node1/kubelet.conf"),
            "get",
            "secrets",
            "-A",
        ]));
        assert!(!denied.status.success());
        assert!(
            String::from_utf8_lossy(&denied.stderr).contains("forbidden"),
            "{}",
            String::from_utf8_lossy(&denied.stderr)
        );
        // The snapshot sees the lab's traces (so an empty one after down means something).
        let during = host_state();
        for trace in [
            format!("{LAB_NAME}-host"),
            format!("{LAB_NAME}-node3"),
            format!("{LAB_DIR}/node1"),
        ] {
            assert!(
                during.contains(&trace),
                "{trace} not in the host's state: {during}"
            );
        }
        let status = Lab::script("status", setup);
        // master and 3 × (dockerd, kubelet, kube-proxy), and etcd when it is the store.
        let processes = if setup.store == "etcd" { 11 } else { 10 };
        if status.matches("running").count() != processes {
            // A process that stopped says why in its log.
            let logs = try_sh(&format!("tail -n 15 {LAB_DIR}/*/*.log 2>&1")).unwrap_or_default();
            panic!("expected {processes} running processes:\n{status}\n{logs}");
        }

        apply(WHO);
        let who = until(60, "two ready who pods", || {
            let pods = running_pods("app=who");
            (pods.len() == 2).then_some(pods)
        });
        let who_names: BTreeSet<String> = who
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        let who_nodes: BTreeSet<&str> = who
            .iter()
            .map(|p| p["spec"]["nodeName"].as_str().unwrap())
            .collect();
        assert_eq!(who_nodes, BTreeSet::from(["node1", "node2"]));
        let client = until(60, "the client pod on node3", || {
            let p = kubectl_json("get pod client");
            (p["status"]["phase"] == "Running").then_some(p)
        });

        let pod_mtu = in_pod(&client, "cat /sys/class/net/eth0/mtu").unwrap();
        assert_eq!(
            pod_mtu.trim(),
            mtu.to_string(),
            "the pods' MTU on {pod_network}"
        );
        if pod_network == "vxlan" {
            // The subnets are flannel's leases (subnet.env), not node IPAM's.
            for n in 1..=3 {
                let node = kubectl_json(&format!("get node node{n}"));
                assert_eq!(node["spec"]["podCIDR"], format!("10.244.{n}.0/24"));
            }
        }

        // Pod to pod across nodes, by IP, with the source address kept. The
        // packets never meet the host's netfilter, so the host's own rules (a
        // quick start's masquerade and FORWARD DROP) cannot touch them.
        let probe = HostProbe::insert(
            client["status"]["podIP"].as_str().unwrap(),
            who[0]["status"]["podIP"].as_str().unwrap(),
        );
        for target in &who {
            let ip = target["status"]["podIP"].as_str().unwrap();
            let got = in_pod(&client, &format!("timeout 3 wget -qO- http://{ip}:8080/"))
                .unwrap_or_else(|| panic!("client on node3 cannot reach pod {ip}"));
            assert_eq!(got.trim(), target["metadata"]["name"].as_str().unwrap());
        }
        // The callee sees the caller's pod IP: no NAT between pod subnets.
        let target_ip = who[0]["status"]["podIP"].as_str().unwrap();
        let seen = in_pod(
            &client,
            &format!("timeout 3 wget -qO- http://{target_ip}:8080/cgi-bin/ip"),
        )
        .expect("the CGI answers");
        // busybox httpd listens on IPv6 and shows IPv4 callers as [::ffff:a.b.c.d].
        let seen = seen
            .trim()
            .trim_start_matches("[::ffff:")
            .trim_end_matches(']');
        assert_eq!(
            seen,
            client["status"]["podIP"].as_str().unwrap(),
            "source address kept"
        );
        assert_eq!(
            probe.packets(),
            0,
            "pod-to-pod packets between lab nodes passed the host's netfilter"
        );
        drop(probe);
        let a = &who[0];
        let b_ip = who[1]["status"]["podIP"].as_str().unwrap();
        let ping = in_pod(a, &format!("ping -c 2 -W 2 {b_ip}"))
            .expect("ping between pods on node1 and node2");
        assert!(ping.contains("2 packets received"), "{ping}");

        // The VIP from every node and from a pod: exact round robin over both pods.
        let svc = kubectl_json("get svc who");
        let vip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
        let node_port = svc["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        let answered = |text: &str| -> BTreeSet<String> { answers(text).into_iter().collect() };
        // Every kube-proxy programs the endpoints on its own: a node may lag the
        // Ready pods by a sync, so each check gets a few seconds to see both pods.
        let both_answer = |what: &str, fetch: &dyn Fn() -> Option<String>| {
            let every = Duration::from_millis(250);
            minik8s_testkit::poll_blocking(10, every, what, || {
                let out = fetch().unwrap_or_default();
                (answered(&out) == who_names)
                    .then_some(())
                    .ok_or(format!("not both pods answered: {out}"))
            })
        };
        for node in 1..=3 {
            both_answer(&format!("the VIP from node{node}"), &|| {
                on_node(node, &fetch_many(6, &format!("http://{vip}/")))
            });
        }
        both_answer("the VIP from the client pod", &|| {
            in_pod(
                &client,
                &fetch_many(6, &format!("http://{vip}/")).replace("busybox ", ""),
            )
        });

        // NodePort on node1 and node2, reached from node3 (one endpoint is remote each time).
        for node in [1, 2] {
            let url = format!("http://{}:{node_port}/", node_ip(node));
            both_answer(&format!("NodePort {url} from node3"), &|| {
                on_node(3, &fetch_many(4, &url))
            });
        }

        // LoadBalancer: the built-in service load balancer gives it the three
        // nodes' addresses, and each answers at the Service's port.
        apply(WHO_LOAD_BALANCERS);
        let every_node: Vec<String> = (1..=3).map(node_ip).collect();
        until(30, "the load balancer's addresses", || {
            let svc = kubectl_json("get svc who-lb");
            let mut ips: Vec<String> = svc["status"]["loadBalancer"]["ingress"]
                .as_array()?
                .iter()
                .filter_map(|i| i["ip"].as_str().map(String::from))
                .collect();
            ips.sort();
            (ips == every_node).then_some(())
        });
        // From the lab's host, outside the cluster (a node would short-circuit
        // the address through its own kube-proxy, as in Kubernetes).
        for node in 1..=3 {
            let url = format!("http://{}:8081/", node_ip(node));
            both_answer(&format!("LoadBalancer {url} from outside"), &|| {
                try_sh(&fetch_many(6, &url))
            });
        }
        // externalTrafficPolicy: Local: node1's address reaches node1's pod only,
        // and the pod sees the client's own address (not masqueraded); node3,
        // with no pod of it, takes none.
        let on_node1 = who
            .iter()
            .find(|p| p["spec"]["nodeName"] == "node1")
            .and_then(|p| p["metadata"]["name"].as_str())
            .unwrap()
            .to_string();
        let local = format!("http://{}:8082/", node_ip(1));
        until(15, "the Local load balancer on node1", || {
            let got = answers(&try_sh(&fetch_many(4, &local))?);
            got.iter().all(|g| *g == on_node1).then_some(())
        });
        let seen = try_sh(&format!("timeout 3 busybox wget -qO- {local}cgi-bin/ip")).unwrap();
        assert_eq!(
            seen.trim()
                .trim_start_matches("[::ffff:")
                .trim_end_matches(']'),
            format!("{LAB_NET}.1"),
            "the client's address is kept"
        );
        let none_here = try_sh(&fetch_many(1, &format!("http://{}:8082/", node_ip(3)))).unwrap();
        assert_eq!(none_here.trim(), "FAILED", "node3 has no pod of who-local");

        // ClientIP affinity from a pod: 20 requests, one backend.
        let sticky = kubectl_json("get svc who-sticky");
        let sticky_url = format!("http://{}/", sticky["spec"]["clusterIP"].as_str().unwrap());
        let seen = until(15, "the sticky Service's rules", || {
            let got = answers(&in_pod(
                &client,
                &fetch_many(20, &sticky_url).replace("busybox ", ""),
            )?);
            (got.len() == 20 && !got.contains(&"FAILED".to_string())).then_some(got)
        });
        assert!(
            seen.iter().all(|g| *g == seen[0]),
            "one backend for one client: {seen:?}"
        );
        // internalTrafficPolicy: Local: node1 reaches node1's pod only; node3 has none.
        let near = kubectl_json("get svc who-near");
        let near_url = format!("http://{}/", near["spec"]["clusterIP"].as_str().unwrap());
        until(15, "the node-local Service on node1", || {
            let got = answers(&on_node(1, &fetch_many(4, &near_url))?);
            got.iter().all(|g| *g == on_node1).then_some(())
        });
        let from3 = on_node(3, &fetch_many(1, &near_url)).unwrap();
        assert_eq!(from3.trim(), "FAILED", "node3 has no pod of who-near");
        // trafficDistribution (doc/networking.md's commands, with the real
        // kubectl): node1 in zone a, node2 and node3 in zone b; each node
        // reaches the pod of its own zone only.
        let real = minik8s_testkit::real_kubectl().display().to_string();
        let real_kubectl = |args: &str| sh(&format!("{real} --kubeconfig {KUBECONFIG} {args}"));
        for (node, zone) in [(1, "a"), (2, "b"), (3, "b")] {
            real_kubectl(&format!(
                "label node node{node} topology.kubernetes.io/zone={zone}"
            ));
        }
        apply("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {trafficDistribution: PreferClose, selector: {app: who}, ports: [{port: 80, targetPort: http}]}\n");
        until(15, "zone hints on web's endpoints", || {
            let hints = real_kubectl(
                "get endpointslice -l kubernetes.io/service-name=web -o jsonpath='{.items[0].endpoints[*].hints}'",
            );
            (hints.contains(r#"{"forZones":[{"name":"a"}]}"#)
                && hints.contains(r#"{"forZones":[{"name":"b"}]}"#))
            .then_some(())
        });
        let on_node2 = who
            .iter()
            .find(|p| p["spec"]["nodeName"] == "node2")
            .and_then(|p| p["metadata"]["name"].as_str())
            .unwrap()
            .to_string();
        let zoned = kubectl_json("get svc web");
        let zoned_url = format!("http://{}/", zoned["spec"]["clusterIP"].as_str().unwrap());
        for (node, pod) in [(1, &on_node1), (3, &on_node2)] {
            until(15, &format!("node{node} reaching its zone's pod"), || {
                let got = answers(&on_node(node, &fetch_many(6, &zoned_url))?);
                got.iter().all(|g| g == pod).then_some(())
            });
        }
        kubectl("delete svc web");
        for node in 1..=3 {
            real_kubectl(&format!(
                "label node node{node} topology.kubernetes.io/zone-"
            ));
        }
        // A Service changed from ExternalName to ClusterIP is reachable by name within 10 s.
        apply("apiVersion: v1\nkind: Service\nmetadata: {name: flip}\nspec: {type: ExternalName, externalName: nothing.example.invalid}\n");
        let changed = Instant::now();
        let path = format!("{LAB_DIR}-flip.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Service\nmetadata: {name: flip}\nspec: {selector: {app: who}, ports: [{port: 80, targetPort: http}]}\n",
        )
        .unwrap();
        kubectl(&format!("replace -f {path}"));
        until(10, "flip answering by name as a ClusterIP Service", || {
            let out = in_pod(&client, "timeout 3 wget -qO- http://flip/")?;
            who_names.contains(out.trim()).then_some(())
        });
        eprintln!(
            "ExternalName -> ClusterIP reachable by name after {:.1} s",
            changed.elapsed().as_secs_f64()
        );

        // Cluster DNS from inside a pod: the Service name, short and full.
        let lookup = cluster_dns_answers(&client, "who.default.svc.cluster.local", &vip);
        assert!(lookup.contains(&vip), "{lookup}");
        let out = in_pod(&client, "timeout 3 wget -qO- http://who/").unwrap();
        assert!(who_names.contains(out.trim()), "{out}");

        // Endpoints follow a pod's death: its name stops answering at the VIP.
        let victim = who[1]["metadata"]["name"].as_str().unwrap().to_string();
        kubectl(&format!("delete pod {victim} --wait=false"));
        let deleted = Instant::now();
        until(15, "the VIP to stop sending to the deleted pod", || {
            let out = on_node(3, &fetch_many(4, &format!("http://{vip}/")))?;
            let got = answers(&out);
            (got.iter().all(|g| g != &victim && g != "FAILED")).then_some(())
        });
        eprintln!(
            "VIP stopped using the deleted pod after {:.1} s",
            deleted.elapsed().as_secs_f64()
        );
        let replacement = until(60, "a replacement who pod", || {
            running_pods("app=who")
                .into_iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
                .find(|n| !who_names.contains(n))
        });
        until(15, "the replacement to answer at the VIP", || {
            let out = on_node(3, &fetch_many(4, &format!("http://{vip}/")))?;
            answers(&out).contains(&replacement).then_some(())
        });

        // An LWS group spread over the three nodes: each worker reaches its
        // leader over HTTP at LWS_LEADER_ADDRESS (cluster DNS + pod routes).
        kubectl(&format!(
            "apply -f {}/examples/multi-node.yaml",
            repo_root().display()
        ));
        let group = until(90, "the LWS group's three pods running", || {
            let pods = running_pods("leaderworkerset.sigs.k8s.io/name=spread");
            (pods.len() == 3).then_some(pods)
        });
        let spread: BTreeSet<&str> = group
            .iter()
            .map(|p| p["spec"]["nodeName"].as_str().unwrap())
            .collect();
        assert_eq!(spread.len(), 3, "the group is on three nodes");
        // One log through our kubectl, the other through the real one (v1.32):
        // both go apiserver → the worker's kubelet on its node.
        let ours = format!("{}/kubectl", bin_dir().display());
        let real = minik8s_testkit::real_kubectl().display().to_string();
        for (worker, kubectl) in [("spread-0-1", ours.as_str()), ("spread-0-2", real.as_str())] {
            let log = until(60, "the worker to log its leader's answer", || {
                let log = try_sh(&format!(
                    "{kubectl} --kubeconfig {KUBECONFIG} logs {worker}"
                ))?;
                log.contains("got:").then_some(log)
            });
            assert!(log.contains("got: leader spread-0"), "{worker}: {log}");
        }

        // A DaemonSet as a tutorial writes it (`image: busybox:1.36`): every
        // node pulls it from the master's registry, its dockerd's mirror.
        apply(AGENT);
        let agents = until(90, "an agent pod on each node", || {
            let pods = running_pods("app=agent");
            (pods.len() == 3).then_some(pods)
        });
        let nodes: BTreeSet<&str> = agents
            .iter()
            .map(|p| p["spec"]["nodeName"].as_str().unwrap())
            .collect();
        assert_eq!(nodes.len(), 3, "one agent per node");
        kubectl("delete ds agent");

        // A Deployment of 4 rolled from one env to another with maxSurge 1,
        // maxUnavailable 0: fetched through its Service all along, it always
        // answers and never has fewer than 4 ready pods.
        apply(ROLLER);
        until(90, "4 ready roller pods", || {
            (running_pods("app=roller").len() == 4).then_some(())
        });
        let roller_vip = kubectl_json("get svc roller")["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .to_string();
        until(15, "the roller Service to answer v1", || {
            let out = on_node(1, &fetch_many(4, &format!("http://{roller_vip}/")))?;
            answers(&out).iter().all(|a| a == "v1").then_some(())
        });
        // The real kubectl (ours has no `set`).
        sh(&format!(
            "{kubectl} --kubeconfig {KUBECONFIG} set env deploy/roller VERSION=v2",
            kubectl = minik8s_testkit::real_kubectl().display()
        ));
        let mut fewest_ready = usize::MAX;
        let mut failed = Vec::new();
        until(120, "every answer v2 and the rollout done", || {
            fewest_ready = fewest_ready.min(running_pods("app=roller").len());
            let out = on_node(1, &fetch_many(4, &format!("http://{roller_vip}/")))?;
            let got = answers(&out);
            failed.extend(got.iter().filter(|a| *a != "v1" && *a != "v2").cloned());
            let d = kubectl_json("get deploy roller");
            let done = d["status"]["updatedReplicas"] == 4
                && d["status"]["availableReplicas"] == 4
                && d["status"]["replicas"] == 4;
            (done && got.iter().all(|a| a == "v2")).then_some(())
        });
        assert!(failed.is_empty(), "answers during the rollout: {failed:?}");
        assert!(fewest_ready >= 4, "ready pods fell to {fewest_ready}");
        // Recreate: every old pod is gone before the first new one runs.
        // (First the v1 pods still terminating after the rolling update go.)
        let hashes = || -> BTreeSet<String> {
            kubectl_json("get pods -l app=roller")["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["status"]["phase"] == "Running")
                .map(|p| p["metadata"]["labels"]["pod-template-hash"].to_string())
                .collect()
        };
        until(30, "only v2 pods left", || {
            (hashes().len() == 1).then_some(())
        });
        sh(&format!(
            "{kubectl} --kubeconfig {KUBECONFIG} patch deploy roller -p \
             '{{\"spec\":{{\"strategy\":{{\"type\":\"Recreate\",\"rollingUpdate\":null}}}}}}'",
            kubectl = minik8s_testkit::real_kubectl().display()
        ));
        sh(&format!(
            "{kubectl} --kubeconfig {KUBECONFIG} set env deploy/roller VERSION=v3",
            kubectl = minik8s_testkit::real_kubectl().display()
        ));
        let mut overlap = None;
        until(120, "the Recreate rollout", || {
            let running = hashes();
            if running.len() > 1 && overlap.is_none() {
                overlap = Some(running.clone());
            }
            let d = kubectl_json("get deploy roller");
            let done = d["status"]["updatedReplicas"] == 4
                && d["status"]["availableReplicas"] == 4
                && d["status"]["replicas"] == 4;
            (done && running.len() == 1).then_some(())
        });
        assert_eq!(overlap, None, "old and new pods ran at once");
        kubectl("delete deploy roller");
        kubectl("delete svc roller");
        if pod_network == "host-gw" {
            scenarios::local_volumes_follow_their_node();
            scenarios::nfs_is_shared_across_nodes();
            scenarios::gangs_take_a_zone_each();
            scenarios::deployment_spreads_two_per_node();
            scenarios::preemption_spares_the_budget();
            scenarios::network_policies_across_nodes();
            ingress::ingress_on_every_node(&client);
        }

        // Node failure: node3 stops (kubelet, kube-proxy, dockerd); it goes
        // NotReady and its ReplicaSet pods come back on node1 and node2.
        kubectl("delete lws spread");
        kubectl("delete pod client --wait=false");
        apply(SURVIVOR);
        let placed = until(60, "three survivor pods", || {
            let pods = running_pods("app=survivor");
            (pods.len() == 3).then_some(pods)
        });
        assert!(
            placed.iter().any(|p| p["spec"]["nodeName"] == "node3"),
            "round robin puts one survivor on node3"
        );
        let node3_ready = || -> Option<bool> {
            let n = kubectl_json("get node node3");
            let conditions = n["status"]["conditions"].as_array()?.clone();
            let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
            Some(ready["status"] == "True")
        };
        assert_eq!(node3_ready(), Some(true), "node3 is Ready before it fails");
        let failed = Instant::now();
        Lab::script("stop-node 3", setup);
        eprintln!("node3 stopped in {:.1} s", failed.elapsed().as_secs_f64());
        until(30, "node3 to stop being Ready", || {
            (node3_ready() == Some(false)).then_some(())
        });
        eprintln!(
            "node3 not Ready after {:.1} s",
            failed.elapsed().as_secs_f64()
        );
        until(60, "three survivor pods on node1 and node2", || {
            let pods = running_pods("app=survivor");
            (pods.len() == 3 && pods.iter().all(|p| p["spec"]["nodeName"] != "node3")).then_some(())
        });
        eprintln!(
            "pods replaced after {:.1} s",
            failed.elapsed().as_secs_f64()
        );

        // A DaemonSet made while node3 is down reaches it when it comes back.
        apply(AGENT);
        until(90, "agents on node1 and node2", || {
            (running_pods("app=agent").len() == 2).then_some(())
        });
        Lab::script("start-node 3", setup);
        until(60, "node3 Ready again", || {
            (node3_ready() == Some(true)).then_some(())
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let pods = running_pods("app=agent");
            if pods.len() == 3 && pods.iter().any(|p| p["spec"]["nodeName"] == "node3") {
                break;
            }
            if Instant::now() > deadline {
                let state = try_sh(&format!(
                    "{}/kubectl --kubeconfig {KUBECONFIG} get pods,ds,nodes -o wide; {0}/kubectl --kubeconfig {KUBECONFIG} get events | grep -i agent; grep -v -E '^ +([0-9]+: |at )' {LAB_DIR}/node3/kubelet.log | tail -n 40",
                    bin_dir().display()
                ))
                .unwrap_or_default();
                panic!("timed out after 90 s: an agent on node3 too\n{state}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }

        if setup.pod_network == "host-gw" {
            join::a_machine_joins(4, |verb| Lab::script(verb, setup));
            // The DaemonSet reaches the machine that joined.
            until(90, "an agent on node4 too", || {
                let pods = running_pods("app=agent");
                (pods.len() == 4 && pods.iter().any(|p| p["spec"]["nodeName"] == "node4"))
                    .then_some(())
            });
        }
    }
    // down left the host exactly as it was.
    let after = host_state();
    assert_eq!(
        before, after,
        "the lab left traces on the host (iptables, links, addresses, routes, netns, mounts, cgroups or processes)"
    );
    assert!(!Path::new(LAB_DIR).exists(), "{LAB_DIR} is left behind");
}
