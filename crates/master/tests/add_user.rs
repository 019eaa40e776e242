//! `scripts/add-user.sh NAME` (doc/security.md's one command for a
//! student) against a cluster on the secure port: the student's kubeconfig
//! works with the real kubectl, is confined to the student's namespace by
//! `edit`, and the namespace enforces the restricted Pod Security level.

use minik8s_testkit::apiserver::{Backend, TestServer};
use minik8s_testkit::free_port;
use std::path::Path;
use std::process::Command;

fn kubectl(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(minik8s_testkit::real_kubectl())
        .arg("--kubeconfig")
        .arg(config)
        .args(args)
        .output()
        .expect("running the real kubectl (1.37)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_user_makes_a_confined_student() {
    let server = TestServer::start_with(Backend::Embedded, |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", free_port()));
    })
    .await;
    let pki = server.config.data_dir.join("pki");
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("alice.kubeconfig");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_minik8s-add-user"))
        .parent()
        .unwrap()
        .to_path_buf();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/add-user.sh");
    let out = tokio::task::spawn_blocking({
        let (pki, conf) = (pki.clone(), conf.clone());
        move || {
            Command::new("bash")
                .arg(script)
                .args(["alice", "--pki-dir"])
                .arg(&pki)
                .arg("--out")
                .arg(&conf)
                .args(["--quota", "pods=10,requests.cpu=2"])
                .env("MINIK8S_BIN", bin_dir)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("namespace/alice created (pod security: restricted)"),
        "{said}"
    );
    assert!(
        said.contains("resourcequota/alice-quota created (pods=10,requests.cpu=2)"),
        "{said}"
    );

    let who = tokio::task::spawn_blocking({
        let conf = conf.clone();
        move || {
            kubectl(
                &conf,
                &[
                    "auth",
                    "whoami",
                    "-o",
                    "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
                ],
            )
        }
    })
    .await
    .unwrap();
    assert!(who.0, "{}", who.2);
    assert_eq!(who.1, "alice [\"students\",\"system:authenticated\"]");

    // The RoleBinding reaches the authorizer a moment after it is written.
    let conf2 = conf.clone();
    minik8s_testkit::poll(
        10,
        std::time::Duration::from_millis(200),
        "alice may create deployments",
        move || {
            let conf = conf2.clone();
            async move {
                let (ok, out, err) = tokio::task::spawn_blocking(move || {
                    kubectl(&conf, &["auth", "can-i", "create", "deployments"])
                })
                .await
                .unwrap();
                if ok && out.trim() == "yes" {
                    Ok(())
                } else {
                    Err(format!("{out}{err}"))
                }
            }
        },
    )
    .await;
    let conf3 = conf.clone();
    let (results, privileged) = tokio::task::spawn_blocking(move || {
        let conf = conf3;
        let results = [
            kubectl(&conf, &["create", "deployment", "web", "--image=nginx"]),
            kubectl(&conf, &["get", "pods", "-n", "default"]),
            kubectl(&conf, &["auth", "can-i", "--list"]),
            kubectl(&conf, &["get", "quota", "alice-quota", "-o", "jsonpath={.spec.hard}"]),
            kubectl(&conf, &["auth", "can-i", "delete", "resourcequotas"]),
        ];
        let manifest = conf.with_file_name("priv.yaml");
        std::fs::write(&manifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox, securityContext: {privileged: true}}]}\n").unwrap();
        let privileged = kubectl(&conf, &["create", "-f", &manifest.display().to_string()]);
        (results, privileged)
    })
    .await
    .unwrap();
    assert!(results[0].0, "edit in its own namespace: {}", results[0].2);
    assert!(!results[1].0);
    assert!(results[1].2.contains("pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""), "{}", results[1].2);
    assert!(results[2].0, "{}", results[2].2);
    assert!(
        results[2]
            .1
            .lines()
            .any(|l| l.starts_with("deployments.apps ") && l.contains("create")),
        "{}",
        results[2].1
    );
    // The student sees the quota and cannot change it.
    assert_eq!(
        results[3].1, r#"{"pods":"10","requests.cpu":"2"}"#,
        "{}",
        results[3].2
    );
    assert_eq!(results[4].1.trim(), "no");
    assert!(!privileged.0);
    assert!(
        privileged.2.contains(
            "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": privileged"
        ),
        "{}",
        privileged.2
    );
}
