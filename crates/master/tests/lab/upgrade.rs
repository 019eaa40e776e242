//! doc/deploy.md's rolling upgrade on the lab. The cluster starts on the
//! previous release (scripts/previous-release.sh builds it from a git
//! worktree): its master, and two machines joined with that master's bundle.
//! Then the master is upgraded, and each worker runs the upgrade command
//! (the master's join script, `upgrade`: drain, the new bundle, restart,
//! uncordon) in turn, while requests go to the web Service all along from
//! the master machine (NodePorts) and from both nodes (the ClusterIP).

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const SETUP: Setup = Setup {
    pod_network: "host-gw",
    store: "embedded",
    mtu: 1500,
};

/// Three web pods behind a NodePort Service, at most one of them disrupted
/// at a time; each leaves the endpoints before it stops (preStop).
const WEB: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30080}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: httpd
        image: busybox
        command: ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
        lifecycle:
          preStop:
            sleep: {seconds: 3}
"#;

/// One request: `curl` from a machine's namespace; None when it answered 200.
fn request(netns: &str, url: &str) -> Option<String> {
    let out = run(Command::new("nsenter").arg(format!("--net={netns}")).args([
        "--",
        "curl",
        "-sS",
        "-m",
        "3",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        url,
    ]));
    let code = String::from_utf8_lossy(&out.stdout).into_owned();
    (code != "200").then(|| format!("{code} {}", String::from_utf8_lossy(&out.stderr).trim()))
}

fn node_versions() -> Vec<(String, String, bool)> {
    kubectl_json("get nodes")["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                n["spec"]["unschedulable"] == true,
            )
        })
        .collect()
}

pub fn node_by_node() {
    let new = minik8s_api::release::GIT_VERSION;
    // The previous release's binaries, and its sources (the bundle's scripts).
    let old = sh(&format!(
        "{}/scripts/previous-release.sh",
        repo_root().display()
    ));
    let old = Path::new(old.lines().last().unwrap().trim()).to_path_buf();
    let old_src = old.join("../../src").canonicalize().unwrap();
    let with_old = format!("LAB_BUNDLE_FILES={}", old_src.display());
    Lab::script("down", SETUP);
    let _lab = Lab;
    Lab::script_with("up 1", SETUP, &old, &with_old);
    for n in [2, 3] {
        Lab::script_with(&format!("join {n}"), SETUP, &old, &with_old);
    }
    // node1 is the lab's own first machine (its agents run from LAB_BIN, not
    // installed); the class's machines are the joined ones. It leaves first.
    Lab::script("stop-node 1", SETUP);
    kubectl("delete node node1");
    let before = node_versions();
    let old_version = before[0].1.clone();
    assert!(
        old_version.starts_with("v1.") && old_version != new,
        "the previous release reports {old_version}, this one {new}"
    );
    assert!(
        before.iter().all(|(_, v, _)| *v == old_version),
        "{before:?}"
    );

    apply(WEB);
    until(120, "three web pods ready", || {
        (running_pods("app=web").len() == 3).then_some(())
    });
    let cluster_ip = kubectl_json("get service web")["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let targets: Vec<(String, String)> = vec![
        (
            format!("/run/netns/{LAB_NAME}-cp"),
            format!("http://{}:30080/", node_ip(2)),
        ),
        (
            format!("/run/netns/{LAB_NAME}-cp"),
            format!("http://{}:30080/", node_ip(3)),
        ),
        (netns(2), format!("http://{cluster_ip}/")),
        (netns(3), format!("http://{cluster_ip}/")),
    ];
    for (ns, url) in &targets {
        until(30, &format!("{url} answering from {ns}"), || {
            request(ns, url).is_none().then_some(())
        });
    }

    // Requests all along, round robin over the four ways in.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let started = Instant::now();
    let traffic = {
        let (stop, failures, targets) = (stop.clone(), failures.clone(), targets.clone());
        std::thread::spawn(move || {
            let mut sent = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let (ns, url) = &targets[sent % targets.len()];
                if let Some(why) = request(ns, url) {
                    let at = started.elapsed().as_secs_f64();
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{at:.1} s {ns} {url}: {why}"));
                }
                sent += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            sent
        })
    };

    // The master first (as install.sh upgrade on the master's machine).
    let log = Lab::script_with(
        &format!("upgrade-master {}", bin_dir().display()),
        SETUP,
        &old,
        "",
    );
    let version = kubectl("version");
    assert!(
        version.contains(&format!("Server Version: {new}")),
        "{version}\n{log}"
    );
    // Then each machine with its one command, one after the other.
    for n in [2, 3] {
        let at = started.elapsed().as_secs_f64();
        Lab::script_with(&format!("upgrade {n}"), SETUP, &old, "");
        let out = std::fs::read_to_string(format!("{LAB_DIR}/node{n}/upgrade.log")).unwrap();
        eprintln!(
            "node{n} upgraded in {:.1} s:\n{out}",
            started.elapsed().as_secs_f64() - at
        );
        for line in [
            format!("node/node{n} cordoned"),
            "evicting pod default/web-".to_string(),
            format!("node/node{n} drained"),
            format!("node/node{n} uncordoned"),
            format!("node node{n} upgraded to {new}"),
        ] {
            assert!(
                out.contains(&line),
                "no {line:?} in node{n}'s upgrade:\n{out}"
            );
        }
        let versions = node_versions();
        let me = versions
            .iter()
            .find(|(name, _, _)| *name == format!("node{n}"));
        assert_eq!(
            me,
            Some(&(format!("node{n}"), new.to_string(), false)),
            "{versions:?}"
        );
        if n == 2 {
            // Half way: a cluster of two builds, as `kubectl get nodes` shows it.
            let table = kubectl("get nodes");
            assert!(
                table.contains(new) && table.contains(&old_version),
                "{table}"
            );
        }
        // The installed kubelet is the bundle's: the new build.
        let pid = std::fs::read_to_string(format!("{LAB_DIR}/node{n}/kubelet.pid")).unwrap();
        let exe = std::fs::read_link(format!("/proc/{}/exe", pid.trim())).unwrap();
        assert_eq!(
            exe,
            Path::new(&format!("{LAB_DIR}/node{n}/root/usr/local/bin/kubelet"))
        );
        let running = sh(&format!("{} --version", exe.display()));
        assert!(running.contains(new), "{running}");
    }
    until(120, "three web pods ready after the upgrade", || {
        (running_pods("app=web").len() == 3).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let sent = traffic.join().unwrap();
    let failures = failures.lock().unwrap().clone();
    eprintln!(
        "{sent} requests over {:.0} s of upgrades, {} failed",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(sent > 100, "only {sent} requests were sent");
    assert!(
        failures.is_empty(),
        "requests failed during the upgrade:\n{}",
        failures.join("\n")
    );

    // Upgrading an upgraded node changes nothing: no drain.
    Lab::script("upgrade 2", SETUP);
    let out = std::fs::read_to_string(format!("{LAB_DIR}/node2/upgrade.log")).unwrap();
    assert!(
        out.contains(&format!("node node2 already runs {new}: nothing to do"))
            && !out.contains("cordoned"),
        "{out}"
    );
}
