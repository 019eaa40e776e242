//! Starting the secure port: the cluster PKI (created on first start), the
//! serving certificate's names, and the `kubernetes` Service in `default`
//! through which pods reach the apiserver (as kube-apiserver keeps it).

use crate::{ApiServer, Config};
use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use minik8s_api::registry;
use minik8s_pki::serve as tls;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// This machine's address on its default route (no packet is sent), else loopback.
pub fn primary_ip() -> IpAddr {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// The address other machines and pods reach the apiserver on.
pub fn advertise_address(cfg: &Config) -> IpAddr {
    cfg.advertise_address.unwrap_or_else(primary_ip)
}

/// Where the PKI lives (`--pki-dir`, else `<data-dir>/pki`).
pub fn pki_dir(cfg: &Config) -> PathBuf {
    cfg.pki_dir
        .clone()
        .unwrap_or_else(|| cfg.data_dir.join("pki"))
}

/// The names the serving certificate must hold.
fn serving_names(cfg: &Config, service_ip: &str) -> Vec<String> {
    let mut names: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names.push(service_ip.to_string());
    names.push(advertise_address(cfg).to_string());
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        names.push(host.trim().to_string());
    }
    names.extend(
        cfg.tls_san
            .iter()
            .flat_map(|s| s.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
    );
    names.dedup();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| !n.is_empty() && seen.insert(n.clone()));
    names
}

/// The apiserver's side of its connections to kubelets: HTTPS with the
/// `kube-apiserver-kubelet-client` certificate (system:masters). The
/// kubelets' self-signed serving certificates are not checked, as
/// Kubernetes does not without --kubelet-certificate-authority.
pub struct KubeletClient {
    pub http: reqwest::Client,
    pub tls: Arc<rustls::ClientConfig>,
}

impl KubeletClient {
    fn new(cert: &minik8s_pki::CertKey) -> anyhow::Result<KubeletClient> {
        let identity =
            reqwest::Identity::from_pem(format!("{}\n{}", cert.cert_pem, cert.key_pem).as_bytes())?;
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .danger_accept_invalid_certs(true)
            .identity(identity)
            .build()?;
        let tls = Arc::new(tls::insecure_client_config(&cert.cert_pem, &cert.key_pem)?);
        Ok(KubeletClient { http, tls })
    }
}

/// A byte stream to a kubelet (TCP, or TLS over it).
pub trait KubeletStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> KubeletStream for T {}

impl ApiServer {
    /// The base URL of a node's kubelet: https once the secure port is on.
    pub fn kubelet_url(&self, node: &Value) -> String {
        let url = crate::metrics_api::kubelet_url(node);
        match self.kubelet_tls.get() {
            Some(_) => url.replacen("http://", "https://", 1),
            None => url,
        }
    }

    /// The HTTP client for kubelets.
    pub fn kubelet_http(&self) -> &reqwest::Client {
        self.kubelet_tls
            .get()
            .map(|k| &k.http)
            .unwrap_or(&self.http)
    }

    /// A connection to a kubelet at `authority` (host:port), over TLS when
    /// the secure port is on.
    pub async fn kubelet_stream(&self, authority: &str) -> std::io::Result<Box<dyn KubeletStream>> {
        let tcp = tokio::net::TcpStream::connect(authority).await?;
        let Some(k) = self.kubelet_tls.get() else {
            return Ok(Box::new(tcp));
        };
        let host = authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(authority);
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| std::io::Error::other(format!("kubelet address {host}: {e}")))?;
        let tls = tokio_rustls::TlsConnector::from(k.tls.clone())
            .connect(name, tcp)
            .await?;
        Ok(Box::new(tls))
    }

    /// Binds the secure port, makes sure the PKI exists, and serves TLS until
    /// shutdown. Returns the task and the bound address.
    pub async fn start_secure(
        self: &Arc<Self>,
        cfg: &Config,
    ) -> anyhow::Result<Option<(tokio::task::JoinHandle<()>, std::net::SocketAddr)>> {
        let Some(addr) = cfg.secure_listen.as_deref().filter(|a| !a.is_empty()) else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr} (--secure-listen)"))?;
        let local = listener.local_addr()?;
        let service_ip = self.alloc.kubernetes_ip().to_string();
        let names = serving_names(cfg, &service_ip);
        let dir = pki_dir(cfg);
        let server_url = format!("https://127.0.0.1:{}", local.port());
        let pki = minik8s_pki::ClusterPki::ensure(&dir, &names, &server_url)
            .with_context(|| format!("the cluster PKI in {}", dir.display()))?;
        let serving = pki.serving()?;
        let kubelet_client = pki.kubelet_client()?;
        let _ = self.kubelet_tls.set(KubeletClient::new(&kubelet_client)?);
        let signer = minik8s_pki::tokens::Signer::load_or_create(&dir)
            .context("the service-account signing key")?;
        let _ = self.sa_signer.set(signer);
        let config = tls::server_config(&serving.cert_pem, &serving.key_pem, &pki.ca.cert_pem)?;
        let _ = self.secure_addr.set(local);
        let task = tokio::spawn(minik8s_pki::connections::serve_connections(
            listener,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
            self.router(),
            self.shutdown_signal(),
            cfg.connection_limits(),
        ));
        let advertise = advertise_address(cfg);
        if let Err(e) = self
            .ensure_kubernetes_service(&service_ip, local.port())
            .await
        {
            tracing::warn!(error = %e, "the default/kubernetes Service is not in place");
        }
        // Its endpoints: every apiserver on this store that is alive.
        self.spawn_endpoint_reconciler(advertise, local.port());
        let public_url = format!(
            "https://{}",
            std::net::SocketAddr::new(advertise, local.port())
        );
        self.ensure_join_token(&dir).await?;
        self.ensure_cluster_info(&public_url, &pki.ca.cert_pem)
            .await?;
        let bin_dir = cfg
            .node_bundle_bin_dir
            .clone()
            .unwrap_or_else(crate::exe_dir);
        let bundle = Arc::new(crate::node_bundle::NodeBundle::new(
            &bin_dir,
            &cfg.node_bundle_files
                .clone()
                .unwrap_or_else(|| crate::node_bundle::default_file_root(&crate::exe_dir())),
            Arc::new(minik8s_pki::Ca::from_pem(
                &pki.ca.cert_pem,
                &pki.ca.key_pem(),
            )?),
        ));
        let _ = self.node_bundle.set(bundle);
        tracing::info!(listen = %local, pki = %dir.display(), "secure port serving");
        Ok(Some((task, local)))
    }

    /// The `kubernetes` Service (ClusterIP `service_ip`, port 443); its
    /// endpoints are the apiservers' (`apiserver_endpoints`).
    async fn ensure_kubernetes_service(&self, service_ip: &str, port: u16) -> anyhow::Result<()> {
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        let svc = json!({"metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {"type": "ClusterIP", "clusterIP": service_ip, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}});
        self.put_object(registry::of::<Service>(), svc, |old, new| {
            // A Service's spec is kept; only its port's target follows the apiserver.
            let mut out = old.clone();
            out["spec"]["ports"] = new["spec"]["ports"].clone();
            out
        })
        .await
    }

    /// The token nodes join with (`<pki-dir>/join-token`, made once), and its
    /// bootstrap token Secret.
    async fn ensure_join_token(&self, dir: &std::path::Path) -> anyhow::Result<String> {
        let path = dir.join("join-token");
        let token = match std::fs::read_to_string(&path) {
            Ok(t) => t.trim().to_string(),
            Err(_) => {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let t = crate::auth::bootstrap::new_token();
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&path)
                    .with_context(|| format!("writing {}", path.display()))?;
                writeln!(f, "{t}")?;
                t
            }
        };
        let secret = crate::auth::bootstrap::token_secret(
            &token,
            "the token nodes join with (scripts/install.sh worker --token)",
        )
        .with_context(|| {
            format!(
                "{} does not hold a token like abcdef.0123456789abcdef",
                path.display()
            )
        })?;
        match self
            .create(
                registry::of::<k8s_openapi::api::core::v1::Secret>(),
                Some("kube-system"),
                secret,
                Default::default(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => anyhow::bail!("creating the join token's Secret: {e}"),
        }
        Ok(token)
    }

    /// `kube-public/cluster-info`: the server and CA a joining node trusts
    /// once a token's signature on it checks out.
    async fn ensure_cluster_info(&self, server: &str, ca_pem: &str) -> anyhow::Result<()> {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        let kubeconfig = serde_yaml::to_string(&json!({"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "", "cluster": {"certificate-authority-data": ca, "server": server}}],
            "contexts": null, "current-context": "", "preferences": {}, "users": null}))?;
        let cm = json!({"metadata": {"name": "cluster-info", "namespace": "kube-public"},
                        "data": {"kubeconfig": kubeconfig}});
        self.put_object(
            registry::of::<k8s_openapi::api::core::v1::ConfigMap>(),
            cm,
            |old, new| {
                let mut out = old.clone();
                out["data"]["kubeconfig"] = new["data"]["kubeconfig"].clone();
                out
            },
        )
        .await
    }

    /// Creates `obj`, or updates the stored one with `merge(stored, obj)`.
    pub(crate) async fn put_object(
        &self,
        info: &registry::ResourceInfo,
        obj: Value,
        merge: impl Fn(&Value, &Value) -> Value,
    ) -> anyhow::Result<()> {
        let ns = minik8s_api::meta::namespace(&obj).map(str::to_string);
        let name = minik8s_api::meta::name(&obj).to_string();
        match self
            .create(info, ns.as_deref(), obj.clone(), Default::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_already_exists() => {
                let want = obj.clone();
                self.update_with(
                    info,
                    ns.as_deref(),
                    &name,
                    crate::rest::Mode::Main,
                    Default::default(),
                    |old| Ok(merge(old, &want)),
                )
                .await
                .map(|_| ())
                .map_err(|e| anyhow::anyhow!("updating {} {name}: {e}", info.kind))
            }
            Err(e) => Err(anyhow::anyhow!("creating {} {name}: {e}", info.kind)),
        }
    }
}
