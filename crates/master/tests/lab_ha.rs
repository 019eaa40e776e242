//! The HA control plane on `scripts/lab.sh` (`LAB_HA=1`): a 3-member etcd
//! cluster, two masters (apiserver, scheduler and controller manager each,
//! the last two leader-elected), two nodes whose agents know both apiservers.
//! During 30-pod rollouts machines of the control plane die (kill -9): the
//! leading master, an etcd member, then the other master. After each fault
//! the cluster converges: exactly 30 Running pods of the new template, no
//! orphan container on any node, Endpoints equal to the ready pods, and the
//! containers of a Deployment nobody touched still the same. The time to
//! converge is printed.
//!
//! Needs what `lab.rs` needs, plus etcd (scripts/test.sh installs it).

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Instant;

mod common;
use common::{bin_dir, repo_root, run, sh, try_sh, until};

const LAB_NAME: &str = "mk8sha";
const LAB_DIR: &str = "/tmp/mk8s-ha-e2e";
const LAB_NET: &str = "192.168.80";
const REPLICAS: usize = 30;

fn lab(verb: &str) -> String {
    sh(&format!(
        "LAB_DIR={LAB_DIR} LAB_NAME={LAB_NAME} LAB_NET={LAB_NET} LAB_BIN={} LAB_HA=1 \
         LAB_MASTER_ARGS='--node-monitor-period 1s --node-monitor-grace-period 6s' \
         LAB_KUBELET_ARGS='--node-status-update-frequency 1s' \
         {}/scripts/lab.sh {verb} 2>&1",
        bin_dir().display(),
        repo_root().display()
    ))
}

/// The lab; `down` on drop, also when an assertion failed.
struct HaLab;

impl Drop for HaLab {
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

/// Our kubectl through whichever apiserver answers (the admin's kubeconfig
/// names one server, as kubectl's do).
fn kubectl(args: &str) -> String {
    for conf in ["admin.conf", "admin2.conf"] {
        if let Some(out) = try_sh(&format!(
            "timeout 20 {}/kubectl --kubeconfig {LAB_DIR}/{conf} {args} 2>/dev/null",
            bin_dir().display()
        )) {
            return out;
        }
    }
    panic!("no apiserver answered `kubectl {args}`");
}

fn kubectl_json(args: &str) -> Value {
    serde_json::from_str(&kubectl(&format!("{args} -o json"))).unwrap()
}

fn apply(manifest: &str) {
    let path = format!("{LAB_DIR}-manifest.yaml");
    std::fs::write(&path, manifest).unwrap();
    kubectl(&format!("apply -f {path}"));
}

fn deployment(name: &str, replicas: usize, round: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  \
         selector: {{matchLabels: {{app: {name}}}}}\n  strategy: {{rollingUpdate: {{maxSurge: 5, maxUnavailable: 5}}}}\n  \
         template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      \
         containers:\n      - name: c\n        image: busybox:latest\n        command: [sleep, '3600']\n        \
         env: [{{name: ROUND, value: '{round}'}}]\n"
    )
}

/// The control-plane machine (1 or 2) whose master leads the controllers.
fn leading_master() -> u32 {
    let lease = kubectl_json("get lease kube-controller-manager -n kube-system");
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or("");
    if holder.ends_with(&format!("{LAB_NET}.10")) {
        1
    } else {
        2
    }
}

fn pods(selector: &str) -> Vec<Value> {
    kubectl_json(&format!("get pods -l {selector}"))["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn is_running(p: &Value) -> bool {
    p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
}

/// Container ids with their pod's uid, on node N.
fn containers(node: u32) -> Vec<(String, String)> {
    let out = sh(&format!(
        "docker -H unix://{LAB_DIR}/node{node}/docker.sock ps --filter label=io.minik8s.pod.uid \
         --format '{{{{.ID}}}} {{{{.Label \"io.minik8s.pod.uid\"}}}}'"
    ));
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, uid)| (id.to_string(), uid.to_string()))
        .collect()
}

/// Running containers whose pod is not a live pod of that node.
fn orphans() -> Vec<String> {
    let all = kubectl_json("get pods -A");
    let mut found = Vec::new();
    for node in 1..=2u32 {
        let here: BTreeSet<String> = all["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["spec"]["nodeName"] == format!("node{node}"))
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        for (id, uid) in containers(node) {
            if !here.contains(&uid) {
                found.push(format!("node{node}: {id} (pod {uid})"));
            }
        }
    }
    found
}

/// Waits for `web` to be exactly REPLICAS Running pods of `round`, with no
/// orphan container and Endpoints equal to them; returns the seconds taken.
fn converge(round: u32, started: Instant, what: &str) -> f64 {
    until(
        180,
        &format!("{what}: {REPLICAS} Running pods of round {round}"),
        || {
            let web = pods("app=web");
            let current = web
                .iter()
                .filter(|p| {
                    is_running(p)
                        && p["spec"]["containers"][0]["env"][0]["value"].as_str()
                            == Some(round.to_string().as_str())
                })
                .count();
            (web.len() == REPLICAS && current == REPLICAS).then_some(())
        },
    );
    until(90, &format!("{what}: no orphan containers"), || {
        orphans().is_empty().then_some(())
    });
    until(
        60,
        &format!("{what}: Endpoints of the {REPLICAS} pods"),
        || {
            let ep = kubectl_json("get endpoints web");
            let addresses = ep["subsets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["addresses"].as_array())
                .map(|a| a.len())
                .sum::<usize>();
            let ips: BTreeSet<String> = pods("app=web")
                .iter()
                .filter_map(|p| p["status"]["podIP"].as_str().map(str::to_string))
                .collect();
            (addresses == REPLICAS && ips.len() == REPLICAS).then_some(())
        },
    );
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}: converged in {secs:.1} s");
    secs
}

fn steady_containers() -> BTreeSet<String> {
    let uids: BTreeSet<String> = pods("app=steady")
        .iter()
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
        .collect();
    (1..=2)
        .flat_map(containers)
        .filter(|(_, uid)| uids.contains(uid))
        .map(|(id, _)| id)
        .collect()
}

#[test]
fn ha_control_plane_survives_losing_masters_and_an_etcd_member() {
    for tool in ["dockerd", "etcd", "nsenter", "ip", "busybox", "curl"] {
        assert!(
            try_sh(&format!("command -v {tool}")).is_some(),
            "{tool} is required for the HA lab test (scripts/test.sh installs it)"
        );
    }
    assert_eq!(sh("id -u").trim(), "0", "the lab test needs root");
    let _ = try_sh(&format!(
        "LAB_DIR={LAB_DIR} LAB_NAME={LAB_NAME} LAB_NET={LAB_NET} {}/scripts/lab.sh down",
        repo_root().display()
    ));
    let started = Instant::now();
    let _lab = HaLab;
    lab("up 2");
    eprintln!("HA lab up in {:.1} s", started.elapsed().as_secs_f64());
    let status = lab("status");
    for line in [
        "cp       etcd       running",
        "cp2      master     running",
        "cp3      etcd       running",
    ] {
        assert!(status.contains(line), "{status}");
    }

    apply(&deployment("steady", 4, 0));
    apply(&deployment("web", REPLICAS, 0));
    apply("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n");
    converge(0, Instant::now(), "initial rollout");
    until(60, "steady's 4 pods", || {
        (pods("app=steady").iter().filter(|p| is_running(p)).count() == 4).then_some(())
    });
    let steady = steady_containers();
    assert_eq!(steady.len(), 8, "a sandbox and a container per pod");

    // 1. The leading master dies during a rollout: the other takes the Leases
    //    over, the nodes move to its apiserver.
    apply(&deployment("web", REPLICAS, 1));
    let leader = leading_master();
    let t = Instant::now();
    lab(&format!("stop-master {leader}"));
    converge(1, t, &format!("kill -9 of the leading master ({leader})"));
    assert_ne!(leading_master(), leader, "the other master leads");
    lab(&format!("start-master {leader}"));

    // 2. An etcd member dies during a rollout: the other two keep a quorum.
    apply(&deployment("web", REPLICAS, 2));
    let t = Instant::now();
    lab("stop-etcd 3");
    converge(2, t, "kill -9 of an etcd member");
    lab("start-etcd 3");

    // 3. The master that leads now dies during a rollout too.
    apply(&deployment("web", REPLICAS, 3));
    let leader = leading_master();
    let t = Instant::now();
    lab(&format!("stop-master {leader}"));
    converge(
        3,
        t,
        &format!("kill -9 of the leading master ({leader}) again"),
    );

    assert_eq!(
        steady_containers(),
        steady,
        "containers running at the kills are untouched"
    );
}
