//! Seccomp and AppArmor profiles (`securityContext.seccompProfile`,
//! `appArmorProfile`; the container's win over the pod's), as Docker
//! security options:
//!
//! ```text
//!  RuntimeDefault ──▶ Docker's default profile (nothing to add)
//!  Unconfined     ──▶ seccomp=unconfined          apparmor=unconfined (on a host with AppArmor)
//!  Localhost p    ──▶ seccomp=<the JSON of <root-dir>/seccomp/p>    apparmor=p (loaded on the host)
//! ```
//!
//! A pod asking for an AppArmor profile on a node without AppArmor is
//! refused, as the real kubelet's admission refuses it.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};
use std::path::Path;

/// A profile as the API names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    RuntimeDefault,
    Unconfined,
    Localhost(String),
}

fn profile(ty: &str, localhost: Option<&String>) -> Option<Profile> {
    match ty {
        "RuntimeDefault" => Some(Profile::RuntimeDefault),
        "Unconfined" => Some(Profile::Unconfined),
        "Localhost" => Some(Profile::Localhost(localhost.cloned().unwrap_or_default())),
        _ => None,
    }
}

fn contexts<'a>(
    pod: &'a Pod,
    c: &'a Container,
) -> (Option<&'a SecurityContext>, Option<&'a PodSecurityContext>) {
    (
        c.security_context.as_ref(),
        pod.spec.as_ref().and_then(|s| s.security_context.as_ref()),
    )
}

/// The container's seccomp profile (its own, else the pod's).
pub fn seccomp_of(pod: &Pod, c: &Container) -> Option<Profile> {
    let (csc, psc) = contexts(pod, c);
    csc.and_then(|s| s.seccomp_profile.as_ref())
        .or_else(|| psc.and_then(|s| s.seccomp_profile.as_ref()))
        .and_then(|p| profile(&p.type_, p.localhost_profile.as_ref()))
}

/// The container's AppArmor profile: its own, the pod's, or the older
/// annotation `container.apparmor.security.beta.kubernetes.io/<name>`.
pub fn apparmor_of(pod: &Pod, c: &Container) -> Option<Profile> {
    let (csc, psc) = contexts(pod, c);
    let field = csc
        .and_then(|s| s.app_armor_profile.as_ref())
        .or_else(|| psc.and_then(|s| s.app_armor_profile.as_ref()))
        .and_then(|p| profile(&p.type_, p.localhost_profile.as_ref()));
    field.or_else(|| {
        let key = format!("container.apparmor.security.beta.kubernetes.io/{}", c.name);
        let value = pod.metadata.annotations.as_ref()?.get(&key)?;
        match value.as_str() {
            "runtime/default" => Some(Profile::RuntimeDefault),
            "unconfined" => Some(Profile::Unconfined),
            v => v
                .strip_prefix("localhost/")
                .map(|p| Profile::Localhost(p.to_string())),
        }
    })
}

/// Whether this host enforces AppArmor.
pub fn apparmor_enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y")
}

/// The kubelet's AppArmor admission: a pod that asks for a profile (other
/// than Unconfined) on a host without AppArmor cannot be run as asked.
pub fn apparmor_refusal(pod: &Pod, enabled: bool) -> Option<String> {
    if enabled {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let wants = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .any(|c| matches!(apparmor_of(pod, c), Some(Profile::Localhost(_))));
    wants.then(|| "Cannot enforce AppArmor: AppArmor is not enabled on the host".to_string())
}

/// Docker's security options for the container's profiles. Err: the
/// message of a Localhost seccomp profile that cannot be read.
pub fn security_opts(
    pod: &Pod,
    c: &Container,
    seccomp_root: &Path,
    apparmor: bool,
) -> Result<Vec<String>, String> {
    let mut opts = Vec::new();
    match seccomp_of(pod, c) {
        Some(Profile::Unconfined) => opts.push("seccomp=unconfined".to_string()),
        Some(Profile::Localhost(p)) => {
            let path = seccomp_root.join(p.trim_start_matches('/'));
            let json = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "failed to create the container: cannot load seccomp profile {:?}: {e}",
                    path.display().to_string()
                )
            })?;
            // Docker takes the profile itself, on one line.
            let parsed: serde_json::Value = serde_json::from_str(&json).map_err(|e| {
                format!(
                    "failed to create the container: decoding seccomp profile {:?} failed: {e}",
                    path.display().to_string()
                )
            })?;
            opts.push(format!("seccomp={parsed}"));
        }
        Some(Profile::RuntimeDefault) | None => {}
    }
    if apparmor {
        match apparmor_of(pod, c) {
            Some(Profile::Unconfined) => opts.push("apparmor=unconfined".to_string()),
            Some(Profile::Localhost(p)) => opts.push(format!("apparmor={p}")),
            Some(Profile::RuntimeDefault) | None => {}
        }
    }
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_containers_profile_wins_and_localhost_is_read_from_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join("deny.json"),
            r#"{"defaultAction": "SCMP_ACT_ALLOW"}"#,
        )
        .unwrap();
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [{"name": "a"},
                           {"name": "b", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "deny.json"}}},
                           {"name": "c", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "gone.json"}}}]}}));
        let cs = &p.spec.as_ref().unwrap().containers;
        assert_eq!(
            security_opts(&p, &cs[0], root.path(), false).unwrap(),
            ["seccomp=unconfined"]
        );
        assert_eq!(
            security_opts(&p, &cs[1], root.path(), false).unwrap(),
            [r#"seccomp={"defaultAction":"SCMP_ACT_ALLOW"}"#]
        );
        let err = security_opts(&p, &cs[2], root.path(), false).unwrap_err();
        assert!(err.contains("cannot load seccomp profile"), "{err}");
    }

    #[test]
    fn apparmor_profiles_need_apparmor() {
        let p = pod(json!({"metadata": {"name": "p", "annotations": {
                "container.apparmor.security.beta.kubernetes.io/b": "localhost/k8s-deny-write"}},
            "spec": {"containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                                    {"name": "b"}]}}));
        let cs = &p.spec.as_ref().unwrap().containers;
        assert_eq!(
            apparmor_of(&p, &cs[1]),
            Some(Profile::Localhost("k8s-deny-write".into()))
        );
        assert_eq!(
            apparmor_refusal(&p, false).as_deref(),
            Some("Cannot enforce AppArmor: AppArmor is not enabled on the host")
        );
        assert_eq!(apparmor_refusal(&p, true), None);
        assert_eq!(
            security_opts(&p, &cs[1], Path::new("/"), true).unwrap(),
            ["apparmor=k8s-deny-write"]
        );
        assert!(security_opts(&p, &cs[0], Path::new("/"), false)
            .unwrap()
            .is_empty());
    }
}
