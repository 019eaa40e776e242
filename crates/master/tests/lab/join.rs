//! A machine joins the running lab through the master's one-command join
//! (the node bundle, `crates/apiserver/src/node_bundle.rs`, and
//! `scripts/join.sh`): refusals first (a wrong token, a bundle file that no
//! longer matches its signed digest), then a real join with no Rust
//! toolchain on the machine's PATH, whose installed kubelet registers,
//! reaches Ready and runs pods.

use super::{apply, kubectl, kubectl_json, running_pods, LAB_DIR, LAB_NET};
use crate::common::{run, sh, until};
use std::path::Path;
use std::process::{Command, Output};

fn server() -> String {
    format!("https://{LAB_NET}.10:6443")
}

/// The command `scripts/install.sh master` prints, run from the host (the
/// lab's host link reaches the master), installing below `root`.
fn join_from_host(verb_and_args: &str) -> Output {
    run(Command::new("bash").arg("-c").arg(format!(
        "set -o pipefail; curl -fsSL --cacert {LAB_DIR}/cp/pki/ca.crt {}/minik8s/join.sh | bash -s - {verb_and_args}",
        server()
    )))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn nothing_installed(root: &str) -> bool {
    !Path::new(root).exists()
}

pub fn a_machine_joins(next: u32, script: impl Fn(&str) -> String) {
    let token = std::fs::read_to_string(format!("{LAB_DIR}/cp/pki/join-token")).unwrap();
    let token = token.trim();

    // A token the cluster never issued: cluster-info carries no signature by
    // it, and the script stops before anything is fetched or installed.
    let root = format!("{LAB_DIR}/join-refused");
    let out = join_from_host(&format!(
        "worker --token abcdef.0123456789abcdef --node-ip 192.0.2.1 --root {root}"
    ));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cluster-info is not signed by token 'abcdef'"),
        "{}",
        stderr(&out)
    );
    assert!(nothing_installed(&root), "a refused join installed {root}");
    // The right token's id with another secret: the signature does not check out.
    let forged = format!("{}.0000000000000000", &token[..6]);
    let out = join_from_host(&format!(
        "worker --token {forged} --node-ip 192.0.2.1 --root {root}"
    ));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does not check out"),
        "{}",
        stderr(&out)
    );
    assert!(nothing_installed(&root));

    // `fetch` checks and keeps the bundle: the node binaries, scripts and
    // units, every digest as signed.
    let fetched = format!("{LAB_DIR}/bundle-fetched");
    let out = join_from_host(&format!("fetch --token {token} --into {fetched}"));
    assert!(out.status.success(), "{}", stderr(&out));
    for f in [
        "bin/kubelet",
        "bin/kube-proxy",
        "bin/kubectl",
        "bin/nfs-fuse",
        "scripts/install.sh",
    ] {
        assert!(Path::new(&format!("{fetched}/{f}")).exists(), "{f} fetched");
    }
    let sums = std::fs::read_to_string(format!("{fetched}/SHA256SUMS")).unwrap();
    sh(&format!("cd {fetched} && sha256sum --quiet -c SHA256SUMS"));
    assert!(sums.contains("  bin/kubelet\n"), "{sums}");

    // A binary changed on the master after it signed the digests: the join
    // names the file and installs nothing.
    let served = format!("{LAB_DIR}/cp/bin/kube-proxy");
    let original = std::fs::read(&served).unwrap();
    sh(&format!("printf x >> {served}"));
    let out = join_from_host(&format!(
        "worker --token {token} --node-ip 192.0.2.1 --root {root}"
    ));
    std::fs::write(&served, &original).unwrap();
    assert!(!out.status.success());
    let why = stderr(&out);
    assert!(
        why.contains("checksum does not match") && why.contains("bin/kube-proxy: FAILED"),
        "{why}"
    );
    assert!(
        nothing_installed(&root),
        "a tampered bundle installed {root}"
    );

    // The real join: a new machine, the one command, the installed units.
    let node = format!("node{next}");
    script(&format!("join {next}"));
    let log = std::fs::read_to_string(format!("{LAB_DIR}/{node}/join.log")).unwrap();
    assert!(log.contains("node bundle checked"), "{log}");
    let installed = format!("{LAB_DIR}/{node}/root/usr/local/bin/kubelet");
    assert!(Path::new(&installed).exists(), "{installed}");
    // The kubelet that runs is the installed one, with its own identity.
    let pid = std::fs::read_to_string(format!("{LAB_DIR}/{node}/kubelet.pid")).unwrap();
    let exe = std::fs::read_link(format!("/proc/{}/exe", pid.trim())).unwrap();
    assert_eq!(exe, Path::new(&installed));
    let who = sh(&format!(
        "{} --kubeconfig {LAB_DIR}/{node}/root/etc/minik8s/kubelet.conf auth whoami -o jsonpath='{{.status.userInfo.username}}'",
        minik8s_testkit::real_kubectl().display()
    ));
    assert_eq!(who, format!("system:node:{node}"));
    let info = kubectl_json(&format!("get node {node}"));
    assert!(
        info["status"]["nodeInfo"]["kubeletVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.37")),
        "{info}"
    );

    // It runs pods: one pinned to it, whose output is read back.
    let pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"on-joined","labels":{{"app":"on-joined"}}}},
           "spec":{{"nodeName":"{node}","restartPolicy":"Never","containers":[{{"name":"c","image":"busybox",
           "command":["sh","-c","echo hello from $(hostname); sleep 3600"]}}]}}}}"#
    );
    apply(&pod);
    until(90, "a running pod on the joined node", || {
        (running_pods("app=on-joined").len() == 1).then_some(())
    });
    until(30, "its output", || {
        kubectl("logs on-joined")
            .contains("hello from on-joined")
            .then_some(())
    });
    kubectl("delete pod on-joined --wait=false");
}
