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

/// Each unit's ExecStart, with the settings the script wrote, is accepted by
/// the installed binary (run with `--help` appended).
fn assert_units_accepted(root: &Path, env: &BTreeMap<String, String>, units: &[&str]) {
    for unit in units {
        let text = std::fs::read_to_string(root.join(format!("etc/systemd/system/{unit}.service")))
            .unwrap();
        let words = exec_start(&text, env);
        let program = words[0].replace(
            "/usr/local/bin",
            &root.join("usr/local/bin").display().to_string(),
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
}

fn install_ok(args: &[&str]) {
    let out = install(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_ha_control_plane_on_three_vms() {
    let cluster = "cp1=192.168.56.10,cp2=192.168.56.8,cp3=192.168.56.9";
    let members = "http://192.168.56.10:2379,http://192.168.56.8:2379,http://192.168.56.9:2379";
    let etcd_settings = |root: &Path| -> BTreeMap<String, String> {
        std::fs::read_to_string(root.join("etc/default/etcd.minik8s"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    // The first master: an etcd member of the three, the API on all three.
    let first = tempfile::tempdir().unwrap();
    let first_root = first.path().display().to_string();
    install_ok(&[
        "master",
        "--node-ip",
        "192.168.56.10",
        "--etcd-cluster",
        cluster,
        "--root",
        &first_root,
    ]);
    let env = env_file(first.path());
    assert_eq!(env["ETCD_SERVERS"], members);
    let etcd = etcd_settings(first.path());
    assert_eq!(etcd["ETCD_NAME"], "cp1");
    assert_eq!(
        etcd["ETCD_INITIAL_CLUSTER"],
        "cp1=http://192.168.56.10:2380,cp2=http://192.168.56.8:2380,cp3=http://192.168.56.9:2380"
    );
    assert_eq!(etcd["ETCD_LISTEN_PEER_URLS"], "http://192.168.56.10:2380");
    assert_eq!(
        etcd["ETCD_ADVERTISE_CLIENT_URLS"],
        "http://192.168.56.10:2379"
    );
    assert_units_accepted(first.path(), &env, &["minik8s-master"]);

    // The second master: the first's PKI without its serving certificate.
    let pki = tempfile::tempdir().unwrap();
    for f in [
        "ca.crt",
        "ca.key",
        "sa.key",
        "join-token",
        "apiserver.crt",
        "apiserver.key",
    ] {
        std::fs::write(pki.path().join(f), f).unwrap();
    }
    let second = tempfile::tempdir().unwrap();
    install_ok(&[
        "master",
        "--node-ip",
        "192.168.56.8",
        "--etcd-cluster",
        cluster,
        "--pki-from",
        &pki.path().display().to_string(),
        "--root",
        &second.path().display().to_string(),
    ]);
    assert_eq!(etcd_settings(second.path())["ETCD_NAME"], "cp2");
    let copied = second.path().join("var/lib/minik8s/pki");
    assert_eq!(
        std::fs::read_to_string(copied.join("ca.key")).unwrap(),
        "ca.key"
    );
    assert!(copied.join("join-token").exists());
    assert!(
        !copied.join("apiserver.crt").exists() && !copied.join("apiserver.key").exists(),
        "the second master makes its own serving certificate"
    );

    // The third machine: only an etcd member.
    let third = tempfile::tempdir().unwrap();
    install_ok(&[
        "etcd",
        "--node-ip",
        "192.168.56.9",
        "--etcd-cluster",
        cluster,
        "--root",
        &third.path().display().to_string(),
    ]);
    assert_eq!(etcd_settings(third.path())["ETCD_NAME"], "cp3");
    assert!(!third
        .path()
        .join("etc/systemd/system/minik8s-master.service")
        .exists());

    // A worker knows both masters.
    let worker = tempfile::tempdir().unwrap();
    install_ok(&[
        "worker",
        "--server",
        "192.168.56.10,192.168.56.8",
        "--token",
        "abcdef.0123456789abcdef",
        "--node-ip",
        "192.168.56.11",
        "--root",
        &worker.path().display().to_string(),
    ]);
    let env = env_file(worker.path());
    assert_eq!(
        env["MINIK8S_SERVER"],
        "https://192.168.56.10:6443,https://192.168.56.8:6443"
    );
    assert_units_accepted(
        worker.path(),
        &env,
        &["minik8s-kubelet", "minik8s-kube-proxy"],
    );

    // A member list without this machine is refused.
    let out = install(&[
        "master",
        "--node-ip",
        "192.168.56.77",
        "--etcd-cluster",
        cluster,
        "--root",
        &worker.path().display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no member has"));
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
    assert_units_accepted(
        master.path(),
        &env,
        &[
            "minik8s-master",
            "minik8s-kubelet",
            "minik8s-kube-proxy",
            "minik8s-backup",
        ],
    );
    // The master's hourly snapshot, with a retention count.
    let timer = std::fs::read_to_string(
        master
            .path()
            .join("etc/systemd/system/minik8s-backup.timer"),
    )
    .unwrap();
    assert!(timer.contains("OnCalendar=hourly"), "{timer}");
    assert_eq!(env["BACKUP_KEEP"], "24");
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

/// `install.sh upgrade` on a master's machine puts the new binaries and the
/// node bundle's files in place; on a machine with nothing installed, or a
/// worker that never joined, it stops before it changes anything.
#[test]
fn an_upgrade_replaces_the_master_binaries_and_refuses_what_is_not_installed() {
    let master = tempfile::tempdir().unwrap();
    let root = master.path().display().to_string();
    install_ok(&["master", "--node-ip", "192.168.56.10", "--root", &root]);
    let installed = master.path().join("usr/local/bin/master");
    std::fs::write(&installed, "the previous build").unwrap();
    std::fs::remove_file(
        master
            .path()
            .join("usr/local/share/minik8s/scripts/lib/upgrade.sh"),
    )
    .unwrap();
    let out = install(&["upgrade", "--root", &root]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("master binaries installed below"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(bin_dir().join("master")).unwrap(),
        "the master binary is the new build"
    );
    assert!(master
        .path()
        .join("usr/local/share/minik8s/scripts/lib/upgrade.sh")
        .exists());

    let empty = tempfile::tempdir().unwrap();
    let out = install(&["upgrade", "--root", &empty.path().display().to_string()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("minik8s is not installed here"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let worker = tempfile::tempdir().unwrap();
    let root = worker.path().display().to_string();
    install_ok(&[
        "worker",
        "--server",
        "192.168.56.10",
        "--token",
        "abcdef.0123456789abcdef",
        "--node-ip",
        "192.168.56.11",
        "--root",
        &root,
    ]);
    let kubelet = worker.path().join("usr/local/bin/kubelet");
    std::fs::write(&kubelet, "the previous build").unwrap();
    let out = install(&["upgrade", "--root", &root]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has this node joined?"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&kubelet).unwrap(),
        b"the previous build",
        "nothing changed"
    );
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

/// A port another program holds (the quick start's, say) stops the master
/// with an error naming that port and the flag that chose it, for its
/// plain and its TLS listener, instead of a bare "address in use".
#[test]
fn a_taken_port_is_named_in_the_error() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().to_string();
    let free = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let data = std::env::temp_dir().join(format!("taken-port-{}", std::process::id()));
    let cases = [
        (taken.clone(), free(), format!("listening on {taken}")),
        (
            free(),
            taken.clone(),
            format!("listening on {taken} (--secure-listen)"),
        ),
    ];
    for (plain, secure, want) in cases {
        let mut master = Command::new(env!("CARGO_BIN_EXE_master"))
            .args(["--listen", &plain, "--secure-listen", &secure])
            .args(["--serverless-port", "0", "--leader-elect", "false"])
            .args(["--data-dir", &data.display().to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = master.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(30) {
                master.kill().unwrap();
                panic!("the master kept running with {taken} taken");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut master.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!status.success());
        assert!(stderr.contains(&want), "want {want:?} in: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&data);
    drop(held);
}
