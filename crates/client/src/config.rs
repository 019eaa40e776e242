//! Where a component finds its apiserver: `--server URL`, or a kubeconfig
//! (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`), or http://127.0.0.1:8080.

use serde_json::Value;
use std::path::{Path, PathBuf};

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// The server URL and default namespace a client should use, and how it
/// proves who it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    pub server: String,
    pub namespace: String,
    pub credentials: Credentials,
}

/// What a kubeconfig's cluster and user entries say about TLS and identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    /// The CA that signed the server's certificate (PEM).
    pub ca_pem: Option<String>,
    /// `insecure-skip-tls-verify`.
    pub insecure: bool,
    /// A client certificate followed by its key (PEM).
    pub client_pem: Option<String>,
    /// A bearer token.
    pub token: Option<String>,
}

/// The bytes of `<key>-data` (base64) or of the file `<key>` (relative to the
/// kubeconfig's directory).
fn data_or_file(entry: Option<&Value>, key: &str, base: &Path) -> Result<Option<String>, String> {
    use base64::Engine;
    let Some(entry) = entry else {
        return Ok(None);
    };
    if let Some(data) = entry.get(format!("{key}-data")).and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| format!("{key}-data: {e}"))?;
        return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
    }
    if let Some(file) = entry.get(key).and_then(Value::as_str) {
        let path = base.join(file);
        return std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|e| format!("{key} {}: {e}", path.display()));
    }
    Ok(None)
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading kubeconfig {0}: {1}")]
    Read(PathBuf, String),
    #[error("kubeconfig {0}: {1}")]
    Invalid(PathBuf, String),
}

/// Reads the server and namespace of the current context of a kubeconfig file.
pub fn from_kubeconfig(path: &Path) -> Result<Target, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.into(), e.to_string()))?;
    let doc: Value = serde_yaml::from_str(&text)
        .map_err(|e| ConfigError::Invalid(path.into(), e.to_string()))?;
    let invalid = |m: &str| ConfigError::Invalid(path.into(), m.to_string());
    let current = doc
        .get("current-context")
        .and_then(Value::as_str)
        .unwrap_or("");
    let find = |list: &str, name: &str| -> Option<Value> {
        doc.get(list)?
            .as_array()?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
            .cloned()
    };
    let context = find("contexts", current)
        .ok_or_else(|| invalid(&format!("context {current:?} not found")))?;
    let cluster_name = context
        .pointer("/context/cluster")
        .and_then(Value::as_str)
        .unwrap_or("");
    let cluster = find("clusters", cluster_name)
        .ok_or_else(|| invalid(&format!("cluster {cluster_name:?} not found")))?;
    let server = cluster
        .pointer("/cluster/server")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("cluster has no server"))?;
    let namespace = context
        .pointer("/context/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let base = path.parent().unwrap_or(Path::new("."));
    let user_name = context
        .pointer("/context/user")
        .and_then(Value::as_str)
        .unwrap_or("");
    let user = find("users", user_name).and_then(|u| u.get("user").cloned());
    let cluster_entry = cluster.get("cluster");
    let ca_pem =
        data_or_file(cluster_entry, "certificate-authority", base).map_err(|e| invalid(&e))?;
    let cert = data_or_file(user.as_ref(), "client-certificate", base).map_err(|e| invalid(&e))?;
    let key = data_or_file(user.as_ref(), "client-key", base).map_err(|e| invalid(&e))?;
    let token = match user
        .as_ref()
        .and_then(|u| u.get("token"))
        .and_then(Value::as_str)
    {
        Some(t) => Some(t.to_string()),
        None => match user
            .as_ref()
            .and_then(|u| u.get("tokenFile"))
            .and_then(Value::as_str)
        {
            Some(f) => Some(
                std::fs::read_to_string(base.join(f))
                    .map_err(|e| invalid(&format!("tokenFile {f}: {e}")))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        },
    };
    let insecure = cluster_entry
        .and_then(|c| c.get("insecure-skip-tls-verify"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Target {
        server: server.trim_end_matches('/').to_string(),
        namespace: namespace.to_string(),
        credentials: Credentials {
            ca_pem,
            insecure,
            client_pem: match (cert, key) {
                (Some(c), Some(k)) => Some(format!("{c}\n{k}")),
                _ => None,
            },
            token,
        },
    })
}

/// A client for the apiserver that `--server` / `--kubeconfig` (or
/// $KUBECONFIG) name: what every component's `main` starts with.
/// The flags every binary finds its apiserver by (flattened into each one's
/// arguments, so they are spelled and resolved the same everywhere).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientFlags {
    /// The address and port of the API server (`--master` as kube-proxy's
    /// and the kubelet's upstream flag).
    #[arg(short = 's', long, alias = "master", global = true)]
    pub server: Option<String>,
    /// Path to the kubeconfig file (else $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Requests a second this client sends at most after a burst (0: no
    /// limit); each component has its own default, as in Kubernetes.
    #[arg(long, global = true)]
    pub kube_api_qps: Option<f32>,
    /// Requests this client may send at once before --kube-api-qps applies.
    #[arg(long, global = true)]
    pub kube_api_burst: Option<u32>,
}

impl ClientFlags {
    /// Where the flags (and the environment) say the apiserver is.
    pub fn resolve(&self) -> Result<Target, ConfigError> {
        resolve(self.server.as_deref(), self.kubeconfig.as_deref())
    }

    /// A client for that apiserver.
    pub fn connect(&self) -> Result<crate::Client, ConfigError> {
        connect(self.server.as_deref(), self.kubeconfig.as_deref())
    }

    /// A client for that apiserver, rate limited by the flags or else by the
    /// component's `(qps, burst)` defaults.
    pub fn connect_limited(&self, defaults: (f32, u32)) -> Result<crate::Client, ConfigError> {
        let client = self.connect()?;
        Ok(client.with_rate_limit(
            self.kube_api_qps.unwrap_or(defaults.0),
            self.kube_api_burst.unwrap_or(defaults.1),
        ))
    }
}

pub fn connect(
    server: Option<&str>,
    kubeconfig: Option<&Path>,
) -> Result<crate::Client, ConfigError> {
    crate::Client::for_target(&resolve(server, kubeconfig)?)
}

/// Resolves the target from flags and the environment, in kubectl's order.
pub fn resolve(server: Option<&str>, kubeconfig: Option<&Path>) -> Result<Target, ConfigError> {
    let from_file = match kubeconfig {
        Some(p) => Some(from_kubeconfig(p)?),
        None => {
            let env = std::env::var_os("KUBECONFIG")
                .map(PathBuf::from)
                .filter(|p| !p.as_os_str().is_empty());
            let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config"));
            match env.or(home).filter(|p| p.exists()) {
                Some(p) => Some(from_kubeconfig(&p)?),
                None => None,
            }
        }
    };
    let mut target = from_file.unwrap_or_else(|| Target {
        server: DEFAULT_SERVER.into(),
        namespace: "default".into(),
        credentials: Credentials::default(),
    });
    if let Some(s) = server {
        target.server = normalize_server(s);
    }
    // Over plain HTTP (the loopback port) a kubeconfig's CA, certificate
    // and token mean nothing, and a token must not be sent in clear.
    if target.server.starts_with("http://") {
        target.credentials = Credentials::default();
    }
    Ok(target)
}

/// `127.0.0.1:8080` → `http://127.0.0.1:8080`.
/// Several comma-separated servers (an HA control plane) are each normalized.
pub fn normalize_server(s: &str) -> String {
    s.split(',')
        .map(|one| {
            let one = one.trim().trim_end_matches('/');
            if one.contains("://") {
                one.to_string()
            } else {
                format!("http://{one}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_current_context() {
        let dir = std::env::temp_dir().join(format!("kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("config");
        std::fs::write(&p, "apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n- {name: ca, cluster: {server: 'http://a:1'}}\n- {name: cb, cluster: {server: 'http://b:2/'}}\ncontexts:\n- {name: a, context: {cluster: ca}}\n- {name: b, context: {cluster: cb, namespace: team}}\n").unwrap();
        assert_eq!(
            from_kubeconfig(&p).unwrap(),
            Target {
                server: "http://b:2".into(),
                namespace: "team".into(),
                credentials: Default::default(),
            }
        );
        let t = resolve(Some("127.0.0.1:9"), Some(&p)).unwrap();
        assert_eq!(
            t,
            Target {
                server: "http://127.0.0.1:9".into(),
                namespace: "team".into(),
                credentials: Default::default(),
            }
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
