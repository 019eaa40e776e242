//! The lab-VM deployment (`scripts/install.sh`, `deploy/systemd/`): what it
//! writes for a master and for a flannel worker, and that every flag the
//! units pass, with the settings the script wrote, is one the binaries
//! accept (each ExecStart is run with `--help` appended: clap rejects an
//! unknown flag or a bad value before it gets to the help).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_BIN_EXE_master"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn install(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .args(args)
        .args(["--bin-dir", &bin_dir().display().to_string()])
        .output()
        .unwrap()
}

fn env_file(root: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(root.join("etc/minik8s/minik8s.env"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The ExecStart words with `${VAR}` and `$VAR` expanded as systemd does
/// (an unbraced variable splits into words; an empty one disappears).
fn exec_start(unit: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let mut words = Vec::new();
    for w in line.split_whitespace() {
        if let Some(var) = w.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
            let value = env
                .get(var)
                .unwrap_or_else(|| panic!("{var} is not in the env file"));
            words.push(value.clone());
        } else if let Some(var) = w.strip_prefix('$') {
            let value = env
                .get(var)
                .unwrap_or_else(|| panic!("{var} is not in the env file"));
            words.extend(value.split_whitespace().map(str::to_string));
        } else {
            words.push(w.to_string());
        }
    }
    words
}

#[test]
fn units_and_settings_for_a_master_and_a_flannel_worker() {
    let master = tempfile::tempdir().unwrap();
    let out = install(&[
        "all",
        "--node-ip",
        "192.168.56.10",
        "--root",
        &master.path().display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = env_file(master.path());
    assert_eq!(env["MINIK8S_SERVER"], "https://192.168.56.10:6443");
    assert_eq!(
        env["JOIN_TOKEN"], "/var/lib/minik8s/pki/join-token",
        "the kubelet of an `all` machine joins with the token its master writes"
    );
    assert_eq!(
        env["ALLOCATE_NODE_CIDRS"], "true",
        "node IPAM without flannel"
    );
    for unit in ["minik8s-master", "minik8s-kubelet", "minik8s-kube-proxy"] {
        let text = std::fs::read_to_string(
            master
                .path()
                .join(format!("etc/systemd/system/{unit}.service")),
        )
        .unwrap();
        let words = exec_start(&text, &env);
        let program = words[0].replace(
            "/usr/local/bin",
            &master.path().join("usr/local/bin").display().to_string(),
        );
        assert!(Path::new(&program).exists(), "{program} was installed");
        let check = Command::new(&program)
            .args(&words[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{unit}: {:?} is rejected: {}",
            &words[1..],
            String::from_utf8_lossy(&check.stderr)
        );
    }
    assert!(!master
        .path()
        .join("etc/systemd/system/flanneld.service")
        .exists());

    let worker = tempfile::tempdir().unwrap();
    let root = worker.path().display().to_string();
    let args = [
        "worker",
        "--server",
        "192.168.56.10",
        "--token",
        "abcdef.0123456789abcdef",
        "--node-ip",
        "192.168.56.11",
    ];
    let out = install(
        &[
            &args[..],
            &["--node-name", "w1", "--flannel", "--root", &root],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = env_file(worker.path());
    assert_eq!(
        (env["NODE_NAME"].as_str(), env["NODE_IP"].as_str()),
        ("w1", "192.168.56.11")
    );
    assert_eq!(env["MINIK8S_SERVER"], "https://192.168.56.10:6443");
    assert_eq!(env["JOIN_TOKEN"], "abcdef.0123456789abcdef");
    assert_eq!(
        env["FLANNEL_ETCD"], "http://192.168.56.10:2379",
        "flannel reads the master's etcd"
    );
    let flannel =
        std::fs::read_to_string(worker.path().join("etc/systemd/system/flanneld.service")).unwrap();
    assert!(
        flannel.contains("Before=minik8s-kubelet.service"),
        "the lease exists before the kubelet reads it"
    );
    exec_start(&flannel, &env);
    assert!(!worker
        .path()
        .join("etc/systemd/system/minik8s-master.service")
        .exists());

    // A second run keeps the settings a teacher may have edited.
    std::fs::write(
        worker.path().join("etc/minik8s/minik8s.env"),
        "NODE_NAME=edited\n",
    )
    .unwrap();
    assert!(install(&[&args[..], &["--root", &root]].concat())
        .status
        .success());
    assert_eq!(env_file(worker.path())["NODE_NAME"], "edited");
}

#[test]
fn missing_settings_are_refused_with_a_message() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().display().to_string();
    let out = install(&["worker", "--node-ip", "192.168.56.11", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server"));
    let out = install(&[
        "worker",
        "--server",
        "10.0.0.1",
        "--node-ip",
        "192.168.56.11",
        "--root",
        &root,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
    let out = install(&["master", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--node-ip"));
    let out = install(&["controller", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
}
