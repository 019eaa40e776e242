//! Test harness: a one-node cluster of an in-process apiserver, a private
//! dockerd (`minik8s_testkit::docker`) and the kubelet binary.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi};
pub use minik8s_testkit::docker::{free_pod_cidr, Dockerd};
use minik8s_testkit::{free_port, Backend, TestServer};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

static NEXT_NET: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A one-node cluster: apiserver, private dockerd, kubelet process.
pub struct Cluster {
    pub server: TestServer,
    pub dockerd: Dockerd,
    pub kubelet: Option<Child>,
    pub root: tempfile::TempDir,
    pub node: String,
    pub port: u16,
    pub pod_cidr: String,
    pub client: Client,
    /// More kubelet flags (e.g. --cluster-dns).
    pub kubelet_args: Vec<String>,
    /// Set for [`Cluster::start_secure`]: the kubelet joins over TLS with the
    /// join token instead of using the plain loopback port.
    pub secure: Option<String>,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(|_| Vec::new()).await
    }

    /// A cluster whose kubelet gets `kubelet_args(pod_cidr)` besides the usual flags.
    pub async fn start_with(kubelet_args: impl FnOnce(&str) -> Vec<String>) -> Cluster {
        Self::start_full(kubelet_args, Vec::new()).await
    }

    /// A cluster whose dockerd gets `dockerd_args` besides the usual flags.
    pub async fn start_with_dockerd(dockerd_args: Vec<String>) -> Cluster {
        Self::start_full(|_| Vec::new(), dockerd_args).await
    }

    async fn start_full(
        kubelet_args: impl FnOnce(&str) -> Vec<String>,
        dockerd_args: Vec<String>,
    ) -> Cluster {
        let server = TestServer::start(Backend::Embedded).await;
        let dockerd = tokio::task::spawn_blocking(move || Dockerd::start_with(&dockerd_args))
            .await
            .unwrap();
        let n = NEXT_NET.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let pod_cidr = free_pod_cidr();
        let client = Client::new(&server.url);
        let kubelet_args = kubelet_args(&pod_cidr);
        let mut c = Cluster {
            server,
            dockerd,
            kubelet: None,
            root: tempfile::tempdir().unwrap(),
            node: format!("node-{n}"),
            port: free_port(),
            pod_cidr,
            client,
            kubelet_args,
            secure: None,
        };
        c.start_kubelet();
        c.wait_node_ready().await;
        c
    }

    /// A cluster on the secure port (0.0.0.0, so pods reach it through
    /// their network's gateway, which the serving certificate names), the
    /// controller manager in this process (it signs the kubelet's
    /// certificate and publishes kube-root-ca.crt), a kubelet that joins
    /// with the join token, and ServiceAccount tokens that live
    /// `token_seconds`.
    pub async fn start_secure(token_seconds: i64) -> Cluster {
        Self::start_secure_with(token_seconds, |_| {}, Vec::new()).await
    }

    /// As [`Cluster::start_secure`], the apiserver's config changed by
    /// `server_config` and the kubelet given `kubelet_args`.
    pub async fn start_secure_with(
        token_seconds: i64,
        server_config: impl FnOnce(&mut apiserver::Config),
        kubelet_args: Vec<String>,
    ) -> Cluster {
        let pod_cidr = free_pod_cidr();
        let gateway = Self::gateway_of(&pod_cidr);
        let server = TestServer::start_with(Backend::Embedded, |c| {
            c.secure_listen = Some(format!("0.0.0.0:{}", free_port()));
            c.tls_san = vec![gateway.clone()];
            c.service_account_max_token_expiration = Some(token_seconds);
            server_config(c);
        })
        .await;
        let pki = server.config.data_dir.join("pki");
        let cm = controller_manager::Config {
            cluster_signing_dir: Some(pki.clone()),
            ..Default::default()
        };
        let cm_client =
            minik8s_client::config::connect(None, Some(&pki.join("controller-manager.conf")))
                .unwrap();
        tokio::spawn(controller_manager::run(cm_client, cm));
        let https = format!(
            "https://127.0.0.1:{}",
            server.server.secure_addr.get().unwrap().port()
        );
        let dockerd = tokio::task::spawn_blocking(|| Dockerd::start_with(&[]))
            .await
            .unwrap();
        let n = NEXT_NET.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let client = Client::new(&server.url);
        let mut c = Cluster {
            server,
            dockerd,
            kubelet: None,
            root: tempfile::tempdir().unwrap(),
            node: format!("node-{n}"),
            port: free_port(),
            pod_cidr,
            client,
            kubelet_args,
            secure: Some(https),
        };
        c.start_kubelet();
        c.wait_node_ready().await;
        c
    }

    /// The first address of a pod CIDR: the kubelet's network gateway (this host, for its pods).
    pub fn gateway_of(pod_cidr: &str) -> String {
        let base = pod_cidr.split('/').next().unwrap_or("");
        let mut octets: Vec<u8> = base.split('.').filter_map(|o| o.parse().ok()).collect();
        if let Some(last) = octets.last_mut() {
            *last += 1;
        }
        octets
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }

    pub fn start_kubelet(&mut self) {
        let child = self.spawn_kubelet(&self.node.clone(), self.port, &self.pod_cidr.clone());
        self.kubelet = Some(child);
    }

    /// Starts a kubelet process for `node` on this cluster's dockerd (its own network and CIDR).
    pub fn spawn_kubelet(&self, node: &str, port: u16, pod_cidr: &str) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.path().join(format!("kubelet-{node}.log")))
            .unwrap();
        let server: Vec<String> = match &self.secure {
            None => vec!["--server".into(), self.server.url.clone()],
            Some(https) => vec![
                "--server".into(),
                https.clone(),
                "--bootstrap-token".into(),
                self.server
                    .config
                    .data_dir
                    .join("pki/join-token")
                    .display()
                    .to_string(),
                "--kubeconfig".into(),
                self.root
                    .path()
                    .join(format!("kubelet-{node}.conf"))
                    .display()
                    .to_string(),
            ],
        };
        Command::new(env!("CARGO_BIN_EXE_kubelet"))
            .args(&server)
            .args(["--node-name", node, "--node-ip", "127.0.0.1"])
            .args([
                "--port",
                &port.to_string(),
                "--docker-socket",
                &self.dockerd.socket,
            ])
            .args(["--network", &format!("mk-{node}"), "--pod-cidr", pod_cidr])
            .args([
                "--root-dir",
                &self
                    .root
                    .path()
                    .join(format!("kubelet-{node}"))
                    .display()
                    .to_string(),
                "--sync-seconds",
                "1",
            ])
            .args(&self.kubelet_args)
            .env("RUST_LOG", "kubelet=debug,info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting the kubelet")
    }

    /// Runs the scheduler in this process against the cluster.
    pub fn spawn_scheduler(&self) {
        let (sched, informers) =
            scheduler::build(self.client.clone(), scheduler::Config::default());
        for inf in informers {
            tokio::spawn(inf);
        }
        tokio::spawn(scheduler::worker(sched));
    }

    /// Runs the scheduler and every controller in this process (what `master` adds to the apiserver).
    pub fn spawn_control_plane(&self, controllers: controller_manager::Config) {
        self.spawn_scheduler();
        tokio::spawn(controller_manager::run(self.client.clone(), controllers));
    }

    /// kill -9 the kubelet (its containers keep running).
    pub fn kill_kubelet(&mut self) {
        if let Some(mut k) = self.kubelet.take() {
            let _ = k.kill();
            let _ = k.wait();
        }
    }

    pub fn kubelet_log(&self) -> String {
        std::fs::read_to_string(self.root.path().join(format!("kubelet-{}.log", self.node)))
            .unwrap_or_default()
    }

    pub fn volume_dir(&self, uid: &str, volume: &str) -> PathBuf {
        self.root
            .path()
            .join(format!("kubelet-{}/pods", self.node))
            .join(uid)
            .join("volumes")
            .join(volume)
    }

    pub fn pods(&self) -> DynamicApi {
        self.client.dynamic(registry::of::<Pod>(), Some("default"))
    }

    async fn wait_node_ready(&self) {
        let nodes = self.client.dynamic(registry::of::<Node>(), None);
        for _ in 0..100 {
            if nodes.get(&self.node).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the kubelet did not register its node:\n{}",
            self.kubelet_log()
        );
    }

    /// Creates a pod bound to this node (the scheduler is not part of these tests).
    pub async fn create_pod(&self, mut pod: Value) -> Value {
        pod["spec"]["nodeName"] = Value::String(self.node.clone());
        self.pods().create(&pod).await.unwrap()
    }

    /// Waits until `ok` holds for the pod, or fails with the kubelet's log.
    pub async fn wait_pod<F: Fn(&Value) -> bool>(
        &self,
        name: &str,
        what: &str,
        secs: u64,
        ok: F,
    ) -> Value {
        self.wait_pod_in("default", name, what, secs, ok).await
    }

    /// [`Cluster::wait_pod`] for a pod of namespace `ns`.
    pub async fn wait_pod_in<F: Fn(&Value) -> bool>(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        secs: u64,
        ok: F,
    ) -> Value {
        let what = format!("pod {ns}/{name}: {what}");
        let pods = self.client.dynamic(registry::of::<Pod>(), Some(ns));
        minik8s_testkit::poll(secs, Duration::from_millis(200), &what, || async {
            let last = match pods.get(name).await {
                Ok(p) if ok(&p) => return Ok(p),
                Ok(p) => p,
                Err(_) => Value::Null,
            };
            Err(format!(
                "status: {}\nkubelet log (tail):\n{}",
                serde_json::to_string_pretty(&last["status"]).unwrap(),
                tail(&self.kubelet_log(), 30)
            ))
        })
        .await
    }

    /// A container's log through the apiserver (`path` is what follows `.../pods/`).
    pub async fn pod_log(&self, path: &str) -> String {
        let url = format!("/api/v1/namespaces/default/pods/{path}");
        self.client
            .send(reqwest::Method::GET, &url, None, "*/*")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Runs the real kubectl (1.37, `minik8s_testkit::real_kubectl`) against this cluster.
    pub fn real_kubectl(&self, args: &[&str]) -> std::process::Output {
        let kc = self.root.path().join("kubeconfig");
        if !kc.exists() {
            std::fs::write(&kc, format!("apiVersion: v1\nkind: Config\nclusters: [{{name: m, cluster: {{server: \"{}\"}}}}]\ncontexts: [{{name: m, context: {{cluster: m}}}}]\ncurrent-context: m\n", self.server.url)).unwrap();
        }
        Command::new(minik8s_testkit::real_kubectl())
            .arg("--kubeconfig")
            .arg(&kc)
            .args(args)
            .env("HOME", self.root.path())
            .output()
            .expect("running the real kubectl (1.37)")
    }

    /// Runs our kubectl (built next to the test binaries by `cargo test --workspace`).
    pub fn our_kubectl(&self, args: &[&str]) -> std::process::Output {
        self.our_kubectl_command().args(args).output().unwrap()
    }

    /// Our kubectl, pointed at this cluster, to be given arguments and run.
    pub fn our_kubectl_command(&self) -> Command {
        let ours = std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("kubectl");
        assert!(ours.exists(), "our kubectl is not built at {}: run `cargo build -p kubectl` (cargo test --workspace builds it)", ours.display());
        let mut cmd = Command::new(&ours);
        cmd.args(["--server", &self.server.url]);
        cmd
    }

    pub async fn wait_gone(&self, name: &str, secs: u64) {
        let what = format!("pod {name} gone");
        minik8s_testkit::poll(secs, Duration::from_millis(200), &what, || async {
            if self.pods().get(name).await.is_err_and(|e| e.is_not_found()) {
                return Ok(());
            }
            Err(format!("it exists\n{}", tail(&self.kubelet_log(), 30)))
        })
        .await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_kubelet();
    }
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn phase(p: &Value) -> &str {
    p.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn container_status<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["name"] == name))
}

pub fn restarts(p: &Value, name: &str) -> i64 {
    container_status(p, name)
        .and_then(|c| c["restartCount"].as_i64())
        .unwrap_or(0)
}

pub fn all_ready(p: &Value) -> bool {
    p.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty() && a.iter().all(|c| c["ready"] == true))
}
