//! Joining a cluster with a bootstrap token (Kubernetes' TLS bootstrapping,
//! with kubeadm's token-based discovery), so a new node needs only the
//! master's address and a token:
//!
//! ```text
//!  1. GET kube-public/cluster-info (anonymous, CA not yet known)
//!  2. check the token's signature on it (jws-kubeconfig-<id>): only the
//!     cluster that issued the token can sign ─▶ trust the CA inside
//!  3. with the CA and the token: create a CertificateSigningRequest for
//!     system:node:<name> (group system:nodes); the approver and the signer
//!     in the controller manager answer it
//!  4. write a kubeconfig with the signed certificate; from then on the
//!     kubelet is system:node:<name>
//! ```
//!
//! The same token also gets the node's kube-proxy a `system:kube-proxy`
//! certificate (minik8s, as k3s gives its agents one).

use anyhow::{bail, Context};
use base64::Engine;
use minik8s_client::config::{Credentials, Target};
use minik8s_client::Client;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

pub const KUBELET_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// The CA a token vouches for: cluster-info's kubeconfig, checked against the
/// token's signature on it. Returns the CA (PEM).
pub fn verified_ca(cluster_info: &Value, token: &str) -> anyhow::Result<String> {
    let (id, secret) = token
        .split_once('.')
        .filter(|(i, s)| i.len() == 6 && s.len() == 16)
        .context("the token must look like abcdef.0123456789abcdef")?;
    let kubeconfig = cluster_info["data"]["kubeconfig"]
        .as_str()
        .context("cluster-info has no kubeconfig")?;
    let Some(sig) = cluster_info["data"][format!("jws-kubeconfig-{id}")].as_str() else {
        bail!("cluster-info is not signed by token {id:?}: the token is unknown to this cluster, or the controller manager has not signed yet");
    };
    if !minik8s_pki::jws::verify(kubeconfig, sig, id, secret) {
        bail!("cluster-info's signature for token {id:?} does not check out: this is not the cluster the token belongs to");
    }
    let doc: Value = serde_yaml::from_str(kubeconfig).context("cluster-info's kubeconfig")?;
    let ca = doc
        .pointer("/clusters/0/cluster/certificate-authority-data")
        .and_then(Value::as_str)
        .context("cluster-info's kubeconfig has no certificate-authority-data")?;
    let pem = base64::engine::general_purpose::STANDARD.decode(ca)?;
    Ok(String::from_utf8(pem)?)
}

/// Asks for a client certificate for `cn` in `orgs` and waits for it.
/// Returns (certificate PEM, key PEM).
async fn request_certificate(
    client: &Client,
    cn: &str,
    orgs: &[&str],
    signer: &str,
) -> anyhow::Result<(String, String)> {
    let (csr_pem, key_pem) = minik8s_pki::certificate_request(cn, orgs)?;
    let name = format!(
        "{}-{}",
        if signer == KUBELET_SIGNER {
            "node-csr"
        } else {
            "csr"
        },
        &uuid_like()
    );
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(&csr_pem), "signerName": signer,
                 "usages": ["digital signature", "key encipherment", "client auth"]}});
    let info =
        minik8s_api::registry::by_kind("certificates.k8s.io/v1", "CertificateSigningRequest")
            .context("the CSR kind")?;
    let api = client.dynamic(info, None);
    api.create(&csr)
        .await
        .with_context(|| format!("creating CertificateSigningRequest {name}"))?;
    tracing::info!(
        csr = name,
        cn,
        signer,
        "certificate requested; waiting for approval and signing"
    );
    for _ in 0..240 {
        let now = api.get(&name).await?;
        for c in now["status"]["conditions"].as_array().into_iter().flatten() {
            if matches!(c["type"].as_str(), Some("Denied" | "Failed")) {
                bail!(
                    "CertificateSigningRequest {name} was {}: {}",
                    c["type"],
                    c["message"]
                );
            }
        }
        if let Some(cert) = now["status"]["certificate"]
            .as_str()
            .filter(|c| !c.is_empty())
        {
            let pem = base64::engine::general_purpose::STANDARD.decode(cert)?;
            return Ok((String::from_utf8(pem)?, key_pem));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!("CertificateSigningRequest {name} was not signed within 60 s (is the controller manager running with --cluster-signing-dir?)")
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos, std::process::id())
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Gets this node's kubeconfig (and kube-proxy's) with `token` from the
/// apiserver at `server`, unless they exist already.
pub async fn join(
    server: &str,
    token: &str,
    node_name: &str,
    kubeconfig: &Path,
    kube_proxy_kubeconfig: Option<&Path>,
) -> anyhow::Result<()> {
    let need_proxy = kube_proxy_kubeconfig.is_some_and(|p| !p.exists());
    if kubeconfig.exists() && !need_proxy {
        return Ok(());
    }
    let server = server.trim_end_matches('/');
    let unverified = Client::for_target(&Target {
        server: server.into(),
        namespace: "default".into(),
        credentials: Credentials {
            insecure: true,
            ..Default::default()
        },
    })?;
    // A new cluster's controller manager signs cluster-info a moment after
    // start: wait (up to a minute) for this token's signature to appear.
    let id = token.split('.').next().unwrap_or("");
    let mut tries = 0;
    let info = loop {
        let info = unverified
            .get_json("/api/v1/namespaces/kube-public/configmaps/cluster-info")
            .await
            .with_context(|| format!("reading cluster-info from {server}"))?;
        tries += 1;
        if info["data"].get(format!("jws-kubeconfig-{id}")).is_some() || tries >= 120 {
            break info;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let ca = verified_ca(&info, token)?;
    tracing::info!(server, "cluster CA checked against the join token");
    let bootstrap = Client::for_target(&Target {
        server: server.into(),
        namespace: "default".into(),
        credentials: Credentials {
            ca_pem: Some(ca.clone()),
            token: Some(token.into()),
            ..Default::default()
        },
    })?;
    if !kubeconfig.exists() {
        let user = format!("system:node:{node_name}");
        let (cert, key) =
            request_certificate(&bootstrap, &user, &["system:nodes"], KUBELET_SIGNER).await?;
        let ck = minik8s_pki::CertKey {
            cert_pem: cert,
            key_pem: key,
        };
        write_private(
            kubeconfig,
            &minik8s_pki::kubeconfig("minik8s", server, &ca, &user, &ck),
        )?;
        tracing::info!(path = %kubeconfig.display(), user, "kubelet kubeconfig written");
    }
    if let Some(path) = kube_proxy_kubeconfig.filter(|p| !p.exists()) {
        let user = "system:kube-proxy";
        let (cert, key) = request_certificate(&bootstrap, user, &[], CLIENT_SIGNER).await?;
        let ck = minik8s_pki::CertKey {
            cert_pem: cert,
            key_pem: key,
        };
        write_private(
            path,
            &minik8s_pki::kubeconfig("minik8s", server, &ca, user, &ck),
        )?;
        tracing::info!(path = %path.display(), user, "kube-proxy kubeconfig written");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_trusted_only_with_the_tokens_signature() {
        let ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: ''\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(ca_pem)
        );
        let token = "abcdef.0123456789abcdef";
        let sig = minik8s_pki::jws::sign(&kubeconfig, "abcdef", "0123456789abcdef").unwrap();
        let info = json!({"data": {"kubeconfig": kubeconfig, "jws-kubeconfig-abcdef": sig}});
        assert_eq!(verified_ca(&info, token).unwrap(), ca_pem);
        let err = verified_ca(&info, "abcdef.ffffffffffffffff")
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not check out"), "{err}");
        let err = verified_ca(&info, "zzzzzz.0123456789abcdef")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not signed by token"), "{err}");
    }
}
