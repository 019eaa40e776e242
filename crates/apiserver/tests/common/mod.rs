//! The real kubectl v1.32 as the apiserver's tests run it.
#![allow(dead_code)] // each test file uses a part of it

use std::path::PathBuf;
use std::time::Duration;

fn kubectl_bin() -> PathBuf {
    let bin =
        PathBuf::from(std::env::var("REAL_KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into()));
    assert!(
        bin.exists(),
        "the real kubectl is required at {} (set REAL_KUBECTL to another path)",
        bin.display()
    );
    bin
}

/// A kubectl with its own HOME (discovery cache) and kubeconfig.
pub struct Kubectl {
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Kubectl {
    pub fn new(server: &str) -> Kubectl {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".kube")).unwrap();
        std::fs::write(
            home.path().join(".kube/config"),
            format!("apiVersion: v1\nkind: Config\nclusters: [{{name: m, cluster: {{server: \"{server}\"}}}}]\ncontexts: [{{name: m, context: {{cluster: m, user: u}}}}]\nusers: [{{name: u, user: {{}}}}]\ncurrent-context: m\n"),
        )
        .unwrap();
        Kubectl {
            bin: kubectl_bin(),
            home,
        }
    }

    /// A kubectl whose kubeconfig is `kubeconfig` (credentials and all).
    pub fn with_kubeconfig(kubeconfig: &str) -> Kubectl {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".kube")).unwrap();
        std::fs::write(home.path().join(".kube/config"), kubeconfig).unwrap();
        Kubectl {
            bin: kubectl_bin(),
            home,
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(args)
            .env("HOME", self.home.path())
            .env("KUBECONFIG", self.home.path().join(".kube/config"))
            .current_dir(self.home.path())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .expect("kubectl finished within 60 s")
            .expect("running kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl and requires success; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.home.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}
