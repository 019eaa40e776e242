//! Kubernetes' version skew policy for the node components: a kubelet or a
//! kube-proxy may be up to three minor versions older than the apiserver it
//! talks to, never newer. Both check it when they start and refuse to run
//! outside it — which is why an upgrade does the control plane first and
//! the nodes after (doc/deploy.md, "Version skew").

use crate::Client;
use std::time::Duration;

/// How many minor versions a node component may lag behind the apiserver.
pub const MAX_MINORS_BEHIND: u32 = 3;

/// `(major, minor)` of a Kubernetes version: `v1.37.0+minik8s`, `v1.36.4`, `1.35`.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether `component` at version `own` may work with an apiserver at `server`.
pub fn check(component: &str, own: &str, server: &str) -> Result<(), String> {
    let (Some((own_major, own_minor)), Some((server_major, server_minor))) =
        (major_minor(own), major_minor(server))
    else {
        return Err(format!(
            "cannot compare {component} {own} with the apiserver's version {server:?}"
        ));
    };
    if own_major != server_major || own_minor > server_minor {
        return Err(format!(
            "{component} {own} is newer than the apiserver ({server}): a {component} may be up to \
             {MAX_MINORS_BEHIND} minor versions older than the apiserver, never newer; upgrade \
             the control plane first"
        ));
    }
    if server_minor - own_minor > MAX_MINORS_BEHIND {
        return Err(format!(
            "{component} {own} is more than {MAX_MINORS_BEHIND} minor versions older than the \
             apiserver ({server}): install the master's binaries on this node (its join \
             command installs them again)"
        ));
    }
    Ok(())
}

/// How long a starting component waits for the apiserver's `/version`
/// (a node booting beside its master; systemd restarts it after that).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Reads the apiserver's `/version` (retrying for [`PATIENCE`] while it does
/// not answer) and refuses a skew the policy does not allow.
pub async fn require_supported(client: &Client, component: &str, own: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let server = loop {
        match client.get_json("/version").await {
            Ok(v) => break v["gitVersion"].as_str().unwrap_or_default().to_string(),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("reading the apiserver's /version: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    };
    check(component, own, &server)?;
    tracing::info!(component, version = own, apiserver = %server, "version skew within policy");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_components_may_lag_three_minors_and_never_lead() {
        assert_eq!(major_minor("v1.37.0+minik8s"), Some((1, 37)));
        assert_eq!(major_minor("1.34"), Some((1, 34)));
        assert!(check("kubelet", "v1.37.0+minik8s", "v1.37.2").is_ok());
        assert!(check("kubelet", "v1.34.0", "v1.37.0+minik8s").is_ok());
        let newer = check("kubelet", "v1.37.0+minik8s", "v1.36.4").unwrap_err();
        assert!(
            newer.contains("is newer than the apiserver (v1.36.4)")
                && newer.contains("control plane first"),
            "{newer}"
        );
        let old = check("kube-proxy", "v1.33.1", "v1.37.0").unwrap_err();
        assert!(old.contains("more than 3 minor versions older"), "{old}");
        assert!(check("kubelet", "v1.37.0", "not a version").is_err());
    }
}
