//! A container's securityContext, as the runtime applies it: the user and
//! groups it runs as, privileged or not, a read-only root filesystem, no new
//! privileges, capabilities added and dropped, seccomp and AppArmor profiles
//! (`profiles.rs`). The container's own settings
//! win over the pod's, as in Kubernetes. `runAsNonRoot` is checked here: a
//! container that would run as root is not started (CreateContainerConfigError).

use k8s_openapi::api::core::v1::{Container, Pod};

/// What the runtime must set for one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// `uid` or `uid:gid`.
    pub user: Option<String>,
    /// Supplemental groups and the fsGroup.
    pub group_add: Vec<String>,
    pub privileged: bool,
    pub readonly_rootfs: bool,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privileges: bool,
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    /// Seccomp and AppArmor profiles as the runtime's security options
    /// (see [`crate::profiles`]).
    pub profiles: Vec<String>,
}

/// The effective security settings of `c` in `pod`; Err is Kubernetes'
/// message when `runAsNonRoot` cannot hold or a Localhost seccomp profile
/// (under `seccomp_root`) cannot be read.
pub fn container_security(
    pod: &Pod,
    c: &Container,
    seccomp_root: &std::path::Path,
) -> Result<Security, String> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let csc = c.security_context.as_ref();
    let uid = csc
        .and_then(|s| s.run_as_user)
        .or_else(|| psc.and_then(|s| s.run_as_user));
    let gid = csc
        .and_then(|s| s.run_as_group)
        .or_else(|| psc.and_then(|s| s.run_as_group));
    let non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| psc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let pod_name = format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or("")
    );
    if non_root {
        match uid {
            Some(0) => {
                return Err(format!(
                    "container's runAsUser breaks non-root policy (pod: \"{pod_name}\", container: {})",
                    c.name
                ))
            }
            // The local images run as root unless told otherwise.
            None => {
                return Err(format!(
                    "container has runAsNonRoot and image will run as root (pod: \"{pod_name}\", container: {})",
                    c.name
                ))
            }
            Some(_) => {}
        }
    }
    let mut group_add: Vec<String> = psc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default()
        .iter()
        .map(i64::to_string)
        .collect();
    if let Some(fs) = psc.and_then(|s| s.fs_group) {
        if !group_add.contains(&fs.to_string()) {
            group_add.push(fs.to_string());
        }
    }
    let caps = csc.and_then(|s| s.capabilities.as_ref());
    Ok(Security {
        user: uid.map(|u| match gid {
            Some(g) => format!("{u}:{g}"),
            None => u.to_string(),
        }),
        group_add,
        privileged: csc.and_then(|s| s.privileged).unwrap_or(false),
        readonly_rootfs: csc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        no_new_privileges: csc.and_then(|s| s.allow_privilege_escalation) == Some(false),
        cap_add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        cap_drop: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
        profiles: crate::profiles::security_opts(
            pod,
            c,
            seccomp_root,
            crate::profiles::apparmor_enabled(),
        )?,
    })
}

/// The pod's `fsGroup`, as a group id.
pub fn fs_group(pod: &Pod) -> Option<u32> {
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.fs_group)
        .and_then(|g| u32::try_from(g).ok())
}

/// An emptyDir as Kubernetes makes it: writable by anyone (mode 0777), and
/// with an fsGroup owned by that group with setgid, so files made in it
/// belong to the group too.
pub fn empty_dir_ownership(dir: &std::path::Path, pod: &Pod) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut mode = 0o777;
    if let Some(gid) = fs_group(pod) {
        std::os::unix::fs::chown(dir, None, Some(gid))?;
        mode |= 0o2000;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn container_settings_win_over_the_pods() {
        let p = pod(
            json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
            "containers": [{"name": "c", "securityContext": {"runAsUser": 1001, "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let s = container_security(&p, c, std::path::Path::new("/")).unwrap();
        assert_eq!(s.user.as_deref(), Some("1001:3000"));
        assert_eq!(s.group_add, vec!["4000", "2000"]);
        assert!(s.readonly_rootfs && s.no_new_privileges && !s.privileged);
        assert_eq!(
            (s.cap_add.clone(), s.cap_drop.clone()),
            (
                vec!["NET_BIND_SERVICE".to_string()],
                vec!["ALL".to_string()]
            )
        );
    }

    #[test]
    fn run_as_non_root_needs_a_non_root_user() {
        let p =
            pod(json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "c"}]}));
        let err = container_security(
            &p,
            &p.spec.as_ref().unwrap().containers[0],
            std::path::Path::new("/"),
        )
        .unwrap_err();
        assert_eq!(err, "container has runAsNonRoot and image will run as root (pod: \"web_ns(u1)\", container: c)");
        let p = pod(
            json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 0}, "containers": [{"name": "c"}]}),
        );
        assert!(container_security(
            &p,
            &p.spec.as_ref().unwrap().containers[0],
            std::path::Path::new("/")
        )
        .unwrap_err()
        .contains("breaks non-root policy"));
        let p = pod(
            json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 1000}, "containers": [{"name": "c"}]}),
        );
        assert!(container_security(
            &p,
            &p.spec.as_ref().unwrap().containers[0],
            std::path::Path::new("/")
        )
        .is_ok());
    }
}
