//! The real kubectl (1.37) as the apiserver's tests run it.
#![allow(dead_code)] // each test file uses a part of it

use minik8s_testkit::TestServer;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

fn kubectl_bin() -> PathBuf {
    minik8s_testkit::real_kubectl()
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
        self.command_with(&self.bin, args)
    }

    /// [`Kubectl::command`] with another kubectl binary (an older release).
    pub fn command_with(&self, bin: &std::path::Path, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(bin);
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

/// Runs a test body once per backend.
#[allow(unused_macros)]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(minik8s_testkit::Backend::Embedded).await } )* }
        mod etcd { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(minik8s_testkit::Backend::Etcd).await } )* }
    };
}

/// Raw HTTP calls that return the code and the decoded body.
pub struct Http {
    base: String,
    http: reqwest::Client,
}

impl Http {
    pub fn new(base: &str) -> Self {
        Http {
            base: base.into(),
            http: reqwest::Client::new(),
        }
    }
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        ct: &str,
        body: &str,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        if !ct.is_empty() {
            req = req.header("Content-Type", ct).body(body.to_string());
        }
        let resp = req.send().await.expect("request");
        let code = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
    pub async fn post(&self, path: &str, ct: &str, body: &str) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, ct, body).await
    }
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, "", "").await
    }
}

/// The store's full content under /registry, for "nothing changed" checks.
pub async fn store_snapshot(s: &TestServer) -> (Vec<(String, i64)>, i64) {
    let (kvs, _) = s.server.store.list("/registry/", None).await.unwrap();
    let rev = s.server.store.current_revision().await.unwrap();
    (
        kvs.into_iter()
            .map(|kv| (kv.key, kv.mod_revision))
            .collect(),
        rev,
    )
}

pub fn assert_status(got: &(u16, Value), code: u16, reason: &str) {
    assert_eq!(got.0, code, "{:?}", got.1);
    assert_eq!(got.1["kind"], "Status", "{:?}", got.1);
    assert_eq!(got.1["reason"], reason, "{:?}", got.1);
    assert_eq!(got.1["code"], code);
}

/// Serves `router` over HTTPS on a loopback port with a certificate for
/// `sans` from a CA of its own (a webhook, an extension apiserver); returns
/// the port and the CA as a base64 `caBundle`.
pub async fn tls_server(router: axum::Router, sans: &[&str]) -> (u16, String) {
    use base64::Engine;
    let ca = minik8s_pki::Ca::generate("test-server-ca").unwrap();
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let cert = ca
        .issue("server", &[], &sans, minik8s_pki::Usage::Server, 1)
        .unwrap();
    let config =
        minik8s_pki::serve::server_config(&cert.cert_pem, &cert.key_pem, &ca.cert_pem).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(minik8s_pki::serve::serve(
        listener,
        std::sync::Arc::new(config),
        router,
        std::future::pending(),
    ));
    (
        port,
        base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem),
    )
}

/// A Service `name` in `default` whose port 443 leads, through Endpoints
/// written by hand, to `port` on loopback (where a test's server listens).
pub async fn loopback_service(http: &Http, name: &str, port: u16) {
    let svc = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    let (code, body) = http
        .post(
            "/api/v1/namespaces/default/services",
            "application/json",
            &svc.to_string(),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let ep = serde_json::json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]});
    let (code, body) = http
        .post(
            "/api/v1/namespaces/default/endpoints",
            "application/json",
            &ep.to_string(),
        )
        .await;
    assert_eq!(code, 201, "{body}");
}
