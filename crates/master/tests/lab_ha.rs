//! The crash matrix on `scripts/lab.sh`, each fault during a 30-pod
//! rollout (kill -9, as a machine losing power):
//!
//! - a single-master lab: the master, a kubelet, a kube-proxy and a node's
//!   dockerd die and come back;
//! - the HA control plane (`LAB_HA=1`): a 3-member etcd cluster, two
//!   control-plane machines (an apiserver, a scheduler and a controller
//!   manager each, as processes of their own; the last two leader-elected),
//!   two nodes whose agents know both apiservers; the leading scheduler, the
//!   leading controller manager, an apiserver, an etcd member and then a
//!   whole control-plane machine die.
//!
//! After each fault the cluster converges: exactly 30 Running pods of the
//! new template, no orphan container on any node, Endpoints equal to the
//! ready pods, and the containers of a Deployment nobody touched still the
//! same. The time to converge is printed.
//!
//! Needs what `lab.rs` needs, plus etcd (scripts/test.sh installs it).

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Instant;

mod common;
use common::{bin_dir, repo_root, run, sh, try_sh, until};

const REPLICAS: usize = 30;

/// One lab at a time: the two tests of this file share the machine.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A lab of two nodes, single-master or HA; `down` on drop, also when an
/// assertion failed.
struct Lab {
    name: &'static str,
    dir: &'static str,
    net: &'static str,
    ha: bool,
}

impl Lab {
    /// Checks the tools, clears what a crashed run left, brings the lab up.
    fn up(name: &'static str, dir: &'static str, net: &'static str, ha: bool) -> Lab {
        for tool in ["dockerd", "etcd", "nsenter", "ip", "busybox", "curl"] {
            assert!(
                try_sh(&format!("command -v {tool}")).is_some(),
                "{tool} is required for the lab fault tests (scripts/test.sh installs it)"
            );
        }
        assert_eq!(sh("id -u").trim(), "0", "the lab test needs root");
        let lab = Lab { name, dir, net, ha };
        lab.down();
        let started = Instant::now();
        lab.lab("up 2");
        eprintln!("lab {name} up in {:.1} s", started.elapsed().as_secs_f64());
        lab
    }

    fn env(&self) -> String {
        format!(
            "LAB_DIR={} LAB_NAME={} LAB_NET={} LAB_HA={}",
            self.dir,
            self.name,
            self.net,
            u8::from(self.ha)
        )
    }

    fn lab(&self, verb: &str) -> String {
        sh(&format!(
            "{} LAB_BIN={} \
             LAB_MASTER_ARGS='--node-monitor-period 1s --node-monitor-grace-period 6s' \
             LAB_KUBELET_ARGS='--node-status-update-frequency 1s' \
             {}/scripts/lab.sh {verb} 2>&1",
            self.env(),
            bin_dir().display(),
            repo_root().display()
        ))
    }

    fn down(&self) {
        let out = run(Command::new("bash").arg("-c").arg(format!(
            "{} {}/scripts/lab.sh down",
            self.env(),
            repo_root().display()
        )));
        if !out.status.success() {
            eprintln!("lab down failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    /// Our kubectl through whichever apiserver answers (the admin's
    /// kubeconfig names one server, as kubectl's do).
    fn kubectl(&self, args: &str) -> String {
        let confs: &[&str] = if self.ha {
            &["admin.conf", "admin2.conf"]
        } else {
            &["admin.conf"]
        };
        for _ in 0..3 {
            for conf in confs {
                if let Some(out) = try_sh(&format!(
                    "timeout 20 {}/kubectl --kubeconfig {}/{conf} {args} 2>/dev/null",
                    bin_dir().display(),
                    self.dir
                )) {
                    return out;
                }
            }
            // A master coming back: its apiserver answers within seconds.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        panic!("no apiserver answered `kubectl {args}`");
    }

    /// One attempt through each apiserver with the real kubectl (ours has
    /// no `create configmap`): whether one acknowledged it.
    fn try_kubectl(&self, args: &str) -> bool {
        let confs: &[&str] = if self.ha {
            &["admin.conf", "admin2.conf"]
        } else {
            &["admin.conf"]
        };
        confs.iter().any(|conf| {
            try_sh(&format!(
                "timeout 10 {kubectl} --kubeconfig {}/{conf} {args} >/dev/null 2>&1",
                self.dir,
                kubectl = minik8s_testkit::real_kubectl().display()
            ))
            .is_some()
        })
    }

    fn kubectl_json(&self, args: &str) -> Value {
        serde_json::from_str(&self.kubectl(&format!("{args} -o json"))).unwrap()
    }

    fn apply(&self, manifest: &str) {
        let path = format!("{}-manifest.yaml", self.dir);
        std::fs::write(&path, manifest).unwrap();
        self.kubectl(&format!("apply -f {path}"));
    }

    /// The control-plane machine (1: cp, 2: cp2) whose `process`
    /// (scheduler or controller-manager) holds its Lease: the holder's
    /// identity ends with its process id, which the lab keeps in a pid file.
    fn leader(&self, process: &str) -> u32 {
        let lease = format!("kube-{}", process.trim_start_matches("kube-"));
        let lease = self.kubectl_json(&format!("get lease {lease} -n kube-system"));
        let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or("");
        let pid = holder.rsplit('_').next().unwrap_or("");
        for (n, cp) in [(1, "cp"), (2, "cp2")] {
            let file = format!("{}/{cp}/{process}.pid", self.dir);
            if std::fs::read_to_string(&file).is_ok_and(|p| p.trim() == pid) {
                return n;
            }
        }
        panic!("no {process} of the lab holds its Lease (holder {holder:?})");
    }

    fn pods(&self, selector: &str) -> Vec<Value> {
        self.kubectl_json(&format!("get pods -l {selector}"))["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Container ids with their pod's uid, on node N.
    fn containers(&self, node: u32) -> Vec<(String, String)> {
        let out = sh(&format!(
            "docker -H unix://{}/node{node}/docker.sock ps --filter label=io.minik8s.pod.uid \
             --format '{{{{.ID}}}} {{{{.Label \"io.minik8s.pod.uid\"}}}}'",
            self.dir
        ));
        out.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(id, uid)| (id.to_string(), uid.to_string()))
            .collect()
    }

    /// Running containers whose pod is not a live pod of that node.
    fn orphans(&self) -> Vec<String> {
        let all = self.kubectl_json("get pods -A");
        let mut found = Vec::new();
        for node in 1..=2u32 {
            let here: BTreeSet<String> = all["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["spec"]["nodeName"] == format!("node{node}"))
                .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
                .collect();
            for (id, uid) in self.containers(node) {
                if !here.contains(&uid) {
                    found.push(format!("node{node}: {id} (pod {uid})"));
                }
            }
        }
        found
    }

    /// Waits for `web` to be exactly REPLICAS Running pods of `round`, with
    /// no orphan container and Endpoints equal to them; returns the seconds taken.
    fn converge(&self, round: u32, started: Instant, what: &str) -> f64 {
        until(
            180,
            &format!("{what}: {REPLICAS} Running pods of round {round}"),
            || {
                let web = self.pods("app=web");
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
            self.orphans().is_empty().then_some(())
        });
        until(
            60,
            &format!("{what}: Endpoints of the {REPLICAS} pods"),
            || {
                let ep = self.kubectl_json("get endpoints web");
                let addresses = ep["subsets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["addresses"].as_array())
                    .map(|a| a.len())
                    .sum::<usize>();
                let ips: BTreeSet<String> = self
                    .pods("app=web")
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

    /// The containers of the `steady` Deployment (4 pods), once all run.
    fn steady_containers(&self) -> BTreeSet<String> {
        until(60, "steady's 4 pods", || {
            (self
                .pods("app=steady")
                .iter()
                .filter(|p| is_running(p))
                .count()
                == 4)
                .then_some(())
        });
        let uids: BTreeSet<String> = self
            .pods("app=steady")
            .iter()
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        (1..=2)
            .flat_map(|n| self.containers(n))
            .filter(|(_, uid)| uids.contains(uid))
            .map(|(id, _)| id)
            .collect()
    }

    /// `steady` (4 pods) and `web` (REPLICAS pods behind a Service), converged.
    fn deploy(&self) -> BTreeSet<String> {
        self.apply(&deployment("steady", 4, 0));
        self.apply(&deployment("web", REPLICAS, 0));
        self.apply("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n");
        self.converge(0, Instant::now(), "initial rollout");
        let steady = self.steady_containers();
        assert_eq!(steady.len(), 8, "a sandbox and a container per pod");
        steady
    }

    /// A rollout to `round`, `fault` while it runs, then convergence.
    fn fault_during_rollout(&self, round: u32, what: &str, fault: impl FnOnce()) -> f64 {
        self.apply(&deployment("web", REPLICAS, round));
        let t = Instant::now();
        fault();
        self.converge(round, t, what)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.down();
    }
}

fn deployment(name: &str, replicas: usize, round: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  \
         selector: {{matchLabels: {{app: {name}}}}}\n  strategy: {{rollingUpdate: {{maxSurge: 5, maxUnavailable: 5}}}}\n  \
         template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      \
         containers:\n      - name: c\n        image: busybox:latest\n        command: [sleep, '3600']\n        \
         env: [{{name: ROUND, value: '{round}'}}]\n      \
         tolerations:\n      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}\n      \
         - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}\n"
    )
}

fn is_running(p: &Value) -> bool {
    p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
}

/// A single master and two nodes: the master, a kubelet, a kube-proxy and
/// a node's dockerd each die during a rollout and come back; then a node is
/// cut off from the control plane and healed.
#[test]
fn single_master_lab_survives_each_process_killed_during_a_rollout() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = Lab::up("mk8sft", "/tmp/mk8s-faults-e2e", "192.168.81", false);
    let steady = lab.deploy();

    lab.fault_during_rollout(1, "kill -9 of the master", || {
        lab.lab("stop-master 1");
        std::thread::sleep(std::time::Duration::from_secs(2));
        lab.lab("start-master 1");
    });
    lab.fault_during_rollout(2, "kill -9 of node1's kubelet", || {
        lab.lab("kill 1 kubelet");
        std::thread::sleep(std::time::Duration::from_secs(2));
        lab.lab("start 1 kubelet");
    });
    lab.fault_during_rollout(3, "kill -9 of node2's kube-proxy", || {
        lab.lab("kill 2 kube-proxy");
        std::thread::sleep(std::time::Duration::from_secs(2));
        lab.lab("start 2 kube-proxy");
    });
    assert_eq!(
        lab.steady_containers(),
        steady,
        "containers running at the kills are untouched"
    );
    // The node's dockerd last: its containers may be restarted with it.
    lab.fault_during_rollout(4, "kill -9 of node1's dockerd", || {
        lab.lab("kill 1 dockerd");
        std::thread::sleep(std::time::Duration::from_secs(2));
        lab.lab("start 1 dockerd");
    });
    assert_eq!(lab.steady_containers().len(), 8, "steady runs again");

    // A partition: node2 loses the control plane. It goes NotReady, its pods
    // are evicted (their tolerations allow 2 s) and replaced on node1; once
    // healed, its kubelet removes the stale pods and their containers.
    let on_node2 = |lab: &Lab| -> Vec<String> {
        lab.pods("app=web")
            .iter()
            .filter(|p| p["spec"]["nodeName"] == "node2")
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect()
    };
    let stale = on_node2(&lab);
    assert!(!stale.is_empty(), "web has pods on node2");
    let t = Instant::now();
    lab.lab("partition 2");
    until(60, "node2 NotReady", || {
        let node = lab.kubectl_json("get node node2");
        let ready = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready")
            .map(|c| c["status"].as_str().unwrap_or("").to_string());
        (ready.as_deref() != Some("True")).then_some(())
    });
    until(180, "web's pods replaced on node1", || {
        let running = lab
            .pods("app=web")
            .iter()
            .filter(|p| is_running(p) && p["spec"]["nodeName"] == "node1")
            .count();
        (running == REPLICAS).then_some(())
    });
    eprintln!(
        "partition of node2: pods replaced on node1 in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    lab.lab("heal 2");
    lab.converge(4, t, "healed partition of node2");
    let left: Vec<String> = on_node2(&lab)
        .into_iter()
        .filter(|uid| stale.contains(uid))
        .collect();
    assert!(left.is_empty(), "stale pods removed: {left:?}");
}

#[test]
fn ha_control_plane_survives_losing_each_process_and_an_etcd_member() {
    let _one = ONE_LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = Lab::up("mk8sha", "/tmp/mk8s-ha-e2e", "192.168.80", true);
    let status = lab.lab("status");
    for line in [
        "cp       etcd               running",
        "cp       apiserver          running",
        "cp2      scheduler          running",
        "cp2      controller-manager running",
        "cp3      etcd               running",
    ] {
        assert!(status.contains(line), "{status}");
    }
    // Pods reach the API through the `kubernetes` Service: both apiservers.
    let both = [format!("{}.10", lab.net), format!("{}.8", lab.net)];
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ep = lab.kubectl_json("get endpoints kubernetes");
        let mut ips: Vec<String> = ep["subsets"][0]["addresses"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["ip"].as_str())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        ips.sort();
        let mut want = both.to_vec();
        want.sort();
        if ips == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubernetes endpoints {ips:?}, want {want:?}"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let steady = lab.deploy();

    // A client creates ConfigMaps through whichever apiserver answers for
    // the whole test: every create acknowledged (201) must be there at the end.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let acknowledged = std::sync::Mutex::new(Vec::new());
    let attempts = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("ack-{i}");
                if lab.try_kubectl(&format!("create configmap {name} --from-literal=i={i}")) {
                    acknowledged.lock().unwrap().push(name);
                }
                i += 1;
            }
            i
        });
        // Stops the writer also when an assertion below fails (or the scope would wait for it).
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let stopper = StopOnDrop(&stop);
        // 1. The leading scheduler dies during a rollout: the other one takes
        //    its Lease over and schedules the new pods.
        let leader = lab.leader("scheduler");
        lab.fault_during_rollout(
            1,
            &format!("kill -9 of the leading scheduler (machine {leader})"),
            || {
                lab.lab(&format!("stop-scheduler {leader}"));
            },
        );
        assert_ne!(lab.leader("scheduler"), leader, "the other scheduler leads");
        lab.lab(&format!("start-scheduler {leader}"));

        // 2. The leading controller manager dies during a rollout.
        let leader = lab.leader("controller-manager");
        lab.fault_during_rollout(
            2,
            &format!("kill -9 of the leading controller manager (machine {leader})"),
            || {
                lab.lab(&format!("stop-controller-manager {leader}"));
            },
        );
        assert_ne!(
            lab.leader("controller-manager"),
            leader,
            "the other controller manager leads"
        );
        lab.lab(&format!("start-controller-manager {leader}"));

        // 3. An apiserver dies during a rollout (the first one, which the
        //    nodes use first): they move to the other; the components that
        //    talked to it lose their Leases to the other machine's.
        lab.fault_during_rollout(3, "kill -9 of an apiserver", || {
            lab.lab("stop-apiserver 1");
        });
        lab.lab("start-apiserver 1");

        // 4. An etcd member dies during a rollout: the other two keep a quorum.
        lab.fault_during_rollout(4, "kill -9 of an etcd member", || {
            lab.lab("stop-etcd 3");
        });
        lab.lab("start-etcd 3");

        // 5. A whole control-plane machine loses power: the one whose
        //    scheduler leads (its apiserver, scheduler and controller manager).
        let leader = lab.leader("scheduler");
        lab.fault_during_rollout(
            5,
            &format!("kill -9 of control-plane machine {leader}"),
            || {
                lab.lab(&format!("stop-master {leader}"));
            },
        );
        lab.lab(&format!("start-master {leader}"));

        drop(stopper);
        writer.join().unwrap()
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    let listed: BTreeSet<String> = lab.kubectl_json("get configmaps")["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|n| !listed.contains(*n))
        .collect();
    eprintln!(
        "{} creates acknowledged of {attempts} attempted during the faults; lost: {}",
        acknowledged.len(),
        lost.len()
    );
    assert!(acknowledged.len() > 10, "the writer got creates through");
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");

    assert_eq!(
        lab.steady_containers(),
        steady,
        "containers running at the kills are untouched"
    );
}
